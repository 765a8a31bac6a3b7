#include "interpreter/lsp/formatting.h"

#include "interpreter/lsp/workspace.h"
#include "interpreter/syntax/format.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

namespace ipu::lsp {

namespace {

// `ipu fmt`'s text of the document, or none when it cannot be formatted.
std::optional<std::string> formatted(const Analysis& a) {
  base::SourceMap sources;
  const base::FileId id = sources.add(a.document.path, a.text());
  base::Diagnostics diags;
  syntax::Formatted f = syntax::formatSource(sources, id, diags);
  if (f.outcome != syntax::Formatted::Outcome::Formatted) return std::nullopt;
  return std::move(f.text);
}

// The lines of a text, each with its `\n` (the last one without, when the text does not end in one).
std::vector<std::string_view> linesOf(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

// A run of differing lines: before's [b0, b1) become after's [a0, a1).
struct Hunk {
  std::size_t b0, b1, a0, a1;
};

// A line without its spaces: what the printer keeps of a line it re-spaces.
std::string keyOf(std::string_view line) {
  std::string out;
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') out += c;
  return out;
}

// The hunks that turn `before` into `after`. Lines are matched by their text
// without spaces (a longest common subsequence), so a line the printer only
// re-spaced is a hunk of its own, and lines it split, joined or added are
// grouped with their neighbours that have no match.
std::vector<Hunk> lineDiff(const std::vector<std::string_view>& before, const std::vector<std::string_view>& after) {
  std::vector<std::string> kb, ka;
  for (auto l : before) kb.push_back(keyOf(l));
  for (auto l : after) ka.push_back(keyOf(l));
  std::vector<Hunk> out;
  auto matched = [&](std::size_t i, std::size_t j) {
    if (before[i] != after[j]) out.push_back(Hunk{i, i + 1, j, j + 1});
  };
  std::size_t lo = 0;
  while (lo < kb.size() && lo < ka.size() && kb[lo] == ka[lo]) matched(lo, lo), ++lo;
  std::size_t hb = kb.size(), ha = ka.size();
  std::vector<Hunk> tail;
  while (hb > lo && ha > lo && kb[hb - 1] == ka[ha - 1]) {
    --hb, --ha;
    if (before[hb] != after[ha]) tail.insert(tail.begin(), Hunk{hb, hb + 1, ha, ha + 1});
  }
  const std::size_t n = hb - lo, m = ha - lo;
  // The middle line by line; one hunk when it is too large to match (a whole file rewritten).
  constexpr std::size_t kMostCells = 4'000'000;
  if (n == 0 || m == 0 || (n + 1) * (m + 1) > kMostCells) {
    if (n > 0 || m > 0) out.push_back(Hunk{lo, hb, lo, ha});
    out.insert(out.end(), tail.begin(), tail.end());
    return out;
  }
  std::vector<std::uint32_t> common((n + 1) * (m + 1), 0);  // common[i][j]: of before[lo+i..] and after[lo+j..]
  auto at = [&](std::size_t i, std::size_t j) -> std::uint32_t& { return common[i * (m + 1) + j]; };
  for (std::size_t i = n; i-- > 0;)
    for (std::size_t j = m; j-- > 0;)
      at(i, j) = kb[lo + i] == ka[lo + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
  std::size_t i = 0, j = 0;
  std::optional<Hunk> open;
  auto close = [&] {
    if (open) out.push_back(*open);
    open.reset();
  };
  while (i < n || j < m) {
    if (i < n && j < m && kb[lo + i] == ka[lo + j]) {
      close();
      matched(lo + i, lo + j);
      ++i, ++j;
      continue;
    }
    if (!open) open = Hunk{lo + i, lo + i, lo + j, lo + j};
    if (j < m && (i == n || at(i, j + 1) >= at(i + 1, j))) open->a1 = lo + ++j;
    else open->b1 = lo + ++i;
  }
  close();
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

}  // namespace

Json formatRange(const Analysis& a, const Range& range, PositionEncoding encoding) {
  auto after = formatted(a);
  if (!after) return nullptr;
  const std::string& before = a.text();
  const auto beforeLines = linesOf(before), afterLines = linesOf(*after);
  // The range's lines, counted in `\n`-ended lines as the diff counts them.
  auto lineAt = [&](std::size_t offset) {
    return static_cast<std::size_t>(std::count(before.begin(), before.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
  };
  const std::size_t startOffset = a.lines->offsetOf(range.start, encoding);
  const std::size_t endOffset = std::max(startOffset, a.lines->offsetOf(range.end, encoding));
  const std::size_t first = lineAt(startOffset);
  std::size_t last = lineAt(endOffset);
  if (last > first && endOffset > 0 && before[endOffset - 1] == '\n') --last;
  std::vector<std::size_t> starts{0};  // where each line of `before` starts, and its end
  for (const auto& l : beforeLines) starts.push_back(starts.back() + l.size());
  Json edits = Json::array();
  for (const Hunk& h : lineDiff(beforeLines, afterLines)) {
    const bool touches = h.b0 == h.b1 ? h.b0 >= first && h.b0 <= last + 1 : h.b0 <= last && h.b1 > first;
    if (!touches) continue;
    std::string text;
    for (std::size_t k = h.a0; k < h.a1; ++k) text += afterLines[k];
    edits.push_back(Json{{"range", toJson(a.lines->rangeOf(starts[h.b0], starts[h.b1], encoding))}, {"newText", text}});
  }
  return edits;
}

Json formatDocument(const Analysis& a, PositionEncoding encoding) {
  auto formattedText = formatted(a);
  if (!formattedText) return nullptr;
  const std::string& before = a.text();
  const std::string& after = *formattedText;
  Json edits = Json::array();
  if (before == after) return edits;
  // The smallest middle that differs, cut at character boundaries.
  std::size_t prefix = 0;
  while (prefix < before.size() && prefix < after.size() && before[prefix] == after[prefix]) ++prefix;
  while (prefix > 0 && (static_cast<unsigned char>(before[prefix]) & 0xC0) == 0x80) --prefix;
  std::size_t suffix = 0;
  while (suffix < before.size() - prefix && suffix < after.size() - prefix &&
         before[before.size() - 1 - suffix] == after[after.size() - 1 - suffix])
    ++suffix;
  while (suffix > 0 && (static_cast<unsigned char>(before[before.size() - suffix]) & 0xC0) == 0x80) --suffix;
  // Never cut a \r\n in two: the protocol counts it as one line break.
  if (prefix > 0 && prefix < before.size() && before[prefix - 1] == '\r' && before[prefix] == '\n') --prefix;
  if (suffix > 0 && before.size() - suffix > 0 && before[before.size() - suffix] == '\n' &&
      before[before.size() - suffix - 1] == '\r')
    --suffix;
  const Range range = a.lines->rangeOf(prefix, before.size() - suffix, encoding);
  edits.push_back(Json{{"range", toJson(range)}, {"newText", after.substr(prefix, after.size() - suffix - prefix)}});
  return edits;
}

}  // namespace ipu::lsp
