#include "interpreter/base/diagnostic.h"

#include <algorithm>
#include <cctype>

namespace ipu::base {

void Diagnostic::addNote(Note note) {
  for (const auto& n : notes)
    if (n.message == note.message && n.span.file == note.span.file && n.span.begin == note.span.begin) return;
  notes.push_back(std::move(note));
}

Diagnostic& Diagnostics::add(Diagnostic d) {
  // The same mistake reached twice (a stdlib formula evaluated for every layer
  // and phase) is reported once.
  for (auto& existing : items_)
    if (existing.code == d.code && existing.span.file == d.span.file && existing.span.begin == d.span.begin &&
        existing.span.end == d.span.end && existing.message == d.message)
      return existing;
  if (d.severity == Severity::Error) ++errors_;
  items_.push_back(std::move(d));
  return items_.back();
}

Diagnostic& Diagnostics::error(std::string code, Span span, std::string message, std::string help) {
  return add(Diagnostic{std::move(code), Severity::Error, span, std::move(message), std::move(help), {}});
}

Diagnostic& Diagnostics::warning(std::string code, Span span, std::string message, std::string help) {
  return add(Diagnostic{std::move(code), Severity::Warning, span, std::move(message), std::move(help), {}});
}

void Diagnostics::append(const Diagnostics& other) {
  for (const auto& d : other.items_) add(d);
}

std::size_t Diagnostics::warningCount() const {
  return static_cast<std::size_t>(std::count_if(items_.begin(), items_.end(), [](const Diagnostic& d) {
    return d.severity == Severity::Warning;
  }));
}

namespace {
// Optimal string alignment distance, case-insensitive: a transposition counts as
// one edit, which is the most common typo (`bert_lrage`).
std::size_t editDistance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}
}  // namespace

std::vector<std::string> closestMatches(const std::string& word, const std::vector<std::string>& candidates,
                                        std::size_t limit) {
  if (word.size() > 200) return {};
  std::vector<std::pair<std::size_t, std::string>> scored;
  const std::size_t threshold = std::max<std::size_t>(1, (word.size() + 2) / 3);
  for (const auto& c : candidates) {
    if (c == word || c.size() > 200) continue;
    std::size_t dist = editDistance(word, c);
    bool prefix = c.size() > word.size() && word.size() >= 3 && c.compare(0, word.size(), word) == 0;
    if (dist <= threshold || prefix) scored.emplace_back(prefix ? std::min(dist, threshold) : dist, c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& s : scored) {
    if (std::find(out.begin(), out.end(), s.second) != out.end()) continue;
    out.push_back(s.second);
    if (out.size() == limit) break;
  }
  return out;
}

std::string didYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  auto best = closestMatches(word, candidates, 2);
  if (best.empty()) return {};
  std::string s = "did you mean `" + best[0] + "`";
  if (best.size() > 1) s += " or `" + best[1] + "`";
  return s + "?";
}

std::vector<std::string> didYouMeanCandidates(const std::string& help) {
  std::vector<std::string> out;
  const std::string lead = "did you mean `";
  std::size_t at = help.find(lead);
  if (at == std::string::npos) return out;
  at += lead.size() - 1;
  // `x`, then optionally ` or `y``, then `?`.
  for (;;) {
    const std::size_t close = help.find('`', at + 1);
    if (help[at] != '`' || close == std::string::npos) return out;
    out.push_back(help.substr(at + 1, close - at - 1));
    if (help.compare(close + 1, 5, " or `") != 0) return out;
    at = close + 5;
  }
}

Diagnostics Diagnostics::splitOff(std::size_t from) {
  Diagnostics rest;
  for (std::size_t i = from; i < items_.size(); ++i) {
    if (items_[i].severity == Severity::Error) --errors_;
    rest.add(std::move(items_[i]));
  }
  if (from < items_.size()) items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(from), items_.end());
  return rest;
}

}  // namespace ipu::base
