#include "interpreter/lsp/workspace.h"

#include <algorithm>
#include <filesystem>

#include "interpreter/lsp/uri.h"
#include "interpreter/session/session.h"
#include "runtime/ir/plan_hash.h"

namespace ipu::lsp {

namespace fs = std::filesystem;

Json toJson(Position p) { return Json{{"line", p.line}, {"character", p.character}}; }
Json toJson(const Range& r) { return Json{{"start", toJson(r.start)}, {"end", toJson(r.end)}}; }

std::optional<Position> positionFrom(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  auto line = j.find("line");
  auto character = j.find("character");
  if (line == j.end() || character == j.end() || !line->is_number_unsigned() || !character->is_number_unsigned())
    return std::nullopt;
  // Beyond 2^32 - 1 means "the end" as much as any other position past it.
  auto clamp = [](const Json& v) {
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(v.get<std::uint64_t>(), 0xffffffffu));
  };
  return Position{clamp(*line), clamp(*character)};
}

std::optional<Range> rangeFrom(const Json& j) {
  if (!j.is_object() || !j.contains("start") || !j.contains("end")) return std::nullopt;
  auto start = positionFrom(j["start"]);
  auto end = positionFrom(j["end"]);
  if (!start || !end) return std::nullopt;
  return Range{*start, *end};
}

base::LineCol Analysis::place(Position p, PositionEncoding encoding) const {
  return sessionLineCol(text(), lines->offsetOf(p, encoding));
}

Workspace::Workspace(const DocumentStore& documents, StandardLibraryFiles& standardLibrary)
    : documents_(documents), standardLibrary_(standardLibrary) {}
Workspace::~Workspace() = default;

session::Session& Workspace::session() {
  if (session_ == nullptr || checks_ >= kChecksPerSession) {
    // A fresh session (see the header): it is told every open text again.
    session_ = std::make_unique<session::Session>();
    // Scripts with `search { }` mappings are searched on every check, as
    // `ipu check` does; results are cached between checks (search/result_cache.h).
    told_.clear();
    checks_ = 0;
  }
  return *session_;
}

void Workspace::syncOpenDocuments(const OpenDocument& except) {
  session::Session& s = session();
  for (const auto& d : documents_.all()) {
    if (d.uri == except.uri || standardLibrary_.standardPathOf(d.uri)) continue;
    auto told = told_.find(d.uri);
    if (told != told_.end() && told->second == d.version) continue;
    s.update(d.path, *d.text);
    told_[d.uri] = d.version;
  }
}

std::shared_ptr<const session::Snapshot> Workspace::librarySnapshot() {
  // The standard library's modules are in every snapshot; this one is of an
  // empty script, for documents of the library itself.
  if (library_ == nullptr) {
    session::Session s;
    const std::string path = sessionPathOf("ipu-lsp:standard-library");
    s.update(path, "");
    library_ = s.snapshot(path);
  }
  return library_;
}

std::shared_ptr<const Analysis> Workspace::analyse(const OpenDocument& document) {
  if (auto it = latest_.find(document.uri); it != latest_.end())
    if (it->second->document.version == document.version && it->second->document.text == document.text) return it->second;
  auto a = std::make_shared<Analysis>();
  a->document = document;
  a->lines = std::make_unique<LineIndex>(*a->document.text);
  if (auto standard = standardLibrary_.standardPathOf(document.uri)) {
    a->standardPath = standard;
    a->queryPath = *standard;
    a->snapshot = librarySnapshot();
  } else {
    session::Session& s = session();
    syncOpenDocuments(document);
    s.update(document.path, *document.text);
    told_[document.uri] = document.version;
    a->queryPath = document.path;
    a->snapshot = s.snapshot(document.path);
    ++checks_;
    for (const auto& p : a->snapshot->modulePaths())
      if (p != document.path) a->imports.insert(p);
  }
  a->program = a->snapshot->programOf(a->queryPath);
  std::shared_ptr<const Analysis> done = a;
  auto latest = latest_.find(document.uri);
  if (latest == latest_.end() || latest->second->document.version <= document.version) latest_[document.uri] = done;
  if (done->program) lastParsed_[document.uri] = done;
  return done;
}

std::shared_ptr<const session::Snapshot> Workspace::snapshotOfText(const OpenDocument& document, const std::string& text) {
  auto& cached = snapshotsOfText_[document.uri];
  if (cached.second != nullptr && cached.first == text) return cached.second;
  session::Session& s = session();
  syncOpenDocuments(document);
  s.update(document.path, text);
  told_.erase(document.uri);  // the session no longer has the document's own text
  cached = {text, s.snapshot(document.path)};
  ++checks_;
  return cached.second;
}

std::shared_ptr<const session::Snapshot> Workspace::namingSnapshot(const Analysis& a, const std::string& imports) {
  if (a.program || a.standardPath) return a.snapshot;
  if (auto good = lastParsed(a.document.uri)) return good->snapshot;
  return snapshotOfText(a.document, imports);
}

std::vector<std::shared_ptr<const Analysis>> Workspace::latestAnalyses() const {
  std::vector<std::shared_ptr<const Analysis>> out;
  for (const auto& [uri, a] : latest_) out.push_back(a);
  return out;
}

std::shared_ptr<const Analysis> Workspace::lastParsed(const std::string& uri) const {
  auto it = lastParsed_.find(uri);
  return it != lastParsed_.end() ? it->second : nullptr;
}

std::vector<std::string> Workspace::dependentsOf(const std::string& path) const {
  std::vector<std::string> out;
  for (const auto& [uri, a] : latest_)
    if (a->imports.count(path) > 0) out.push_back(uri);
  return out;
}

std::optional<std::string> Workspace::uriOfPath(const std::string& path, bool standard) {
  if (standard) return standardLibrary_.uriOf(path);
  for (const auto& d : documents_.all())
    if (d.path == path) return d.uri;
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  return fileUriOf(ec ? path : absolute.lexically_normal().string());
}

Json Workspace::range(const std::string& text, std::size_t begin, std::size_t end) const {
  LineIndex lines(text);
  return toJson(lines.rangeOf(begin, std::max(begin, end), encoding_));
}

namespace {
bool isStandardPath(const std::string& path) { return path.rfind("std/", 0) == 0; }
}  // namespace

std::optional<Json> Workspace::location(const session::Snapshot& snapshot, base::Span span) {
  const base::SourceFile* f = snapshot.sources().find(span.file);
  if (f == nullptr) return std::nullopt;
  auto uri = uriOfPath(f->path(), isStandardPath(f->path()));
  if (!uri) return std::nullopt;
  return Json{{"uri", *uri}, {"range", range(f->text(), span.begin, span.end)}};
}

namespace {

int severityOf(base::Severity s) {
  switch (s) {
    case base::Severity::Error: return 1;
    case base::Severity::Warning: return 2;
    case base::Severity::Note: return 3;  // Information
  }
  return 1;
}

}  // namespace

std::vector<Json> Workspace::diagnose(const Analysis& analysis) {
  const OpenDocument& doc = analysis.document;
  std::map<std::string, std::vector<Json>> byUri;
  byUri[doc.uri];  // the document's own list, even when empty: it clears what was shown
  if (!analysis.standardPath) {
    plan(analysis);
    session::Session& s = *session_;  // the one that planned (session() would replace it after its last check)
    const base::SourceMap& sources = s.sources();
    std::map<base::FileId, std::unique_ptr<LineIndex>> lines;
    auto rangeIn = [&](const base::SourceFile& f, base::FileId id, base::Span span) {
      auto& index = lines[id];
      if (index == nullptr) index = std::make_unique<LineIndex>(f.text());
      return toJson(index->rangeOf(span.begin, std::max(span.begin, span.end), encoding_));
    };
    for (const auto& d : s.diagnostics().all()) {
      const base::SourceFile* f = sources.find(d.span.file);
      std::string uri = doc.uri;
      Json range = toJson(Range{});  // a diagnostic about no place in particular: the document's start
      if (f != nullptr) {
        auto u = uriOfPath(f->path(), isStandardPath(f->path()));
        if (u) {
          uri = *u;
          range = rangeIn(*f, d.span.file, d.span);
        }
      }
      Json j = Json::object();
      j["range"] = range;
      j["severity"] = severityOf(d.severity);
      j["code"] = d.code;
      j["source"] = "ipu";
      // `help:` and the notes without a place are part of what `ipu check`
      // prints under the message; the protocol has a message only.
      std::string message = d.message;
      if (!d.help.empty()) message += "\nhelp: " + d.help;
      Json related = Json::array();
      for (const auto& n : d.notes) {
        const base::SourceFile* nf = sources.find(n.span.file);
        std::optional<std::string> nu = nf != nullptr ? uriOfPath(nf->path(), isStandardPath(nf->path())) : std::nullopt;
        if (!nu) {
          message += "\nnote: " + n.message;
          continue;
        }
        related.push_back(Json{{"location", Json{{"uri", *nu}, {"range", rangeIn(*nf, n.span.file, n.span)}}},
                               {"message", n.message}});
      }
      j["message"] = message;
      if (!related.empty()) j["relatedInformation"] = std::move(related);
      byUri[uri].push_back(std::move(j));
    }
  }
  // Merge with what other documents report on the same files.
  std::set<std::string> targets;
  for (auto& [target, byDocument] : reported_)
    if (byDocument.erase(doc.uri) > 0) targets.insert(target);
  for (auto& [target, list] : byUri) {
    targets.insert(target);
    if (!list.empty()) reported_[target][doc.uri] = std::move(list);
  }
  std::vector<Json> out;
  for (const auto& target : targets) {
    Json list = Json::array();
    std::set<std::string> seen;
    for (const auto& [from, items] : reported_[target])
      for (const auto& item : items)
        if (seen.insert(serialize(item)).second) list.push_back(item);
    if (reported_[target].empty()) reported_.erase(target);
    Json params{{"uri", target}};
    if (target == doc.uri) params["version"] = doc.version;
    params["diagnostics"] = std::move(list);
    out.push_back(std::move(params));
  }
  return out;
}

void Workspace::plan(const Analysis& analysis) {
  const OpenDocument& doc = analysis.document;
  session::Session& s = session();
  syncOpenDocuments(doc);
  s.update(doc.path, *doc.text);
  told_[doc.uri] = doc.version;
  // What `ipu check` runs: check, hooks, searches and the plan, so that a
  // mapping that cannot fit is an error here too.
  s.diagnostics().clear();
  const base::FileId root = s.addSource(doc.path, *doc.text);
  const ir::ExecutionPlan* planned = s.plan(root);
  ++checks_;
  analysis.plan = planned != nullptr ? std::make_shared<const ir::ExecutionPlan>(*planned) : nullptr;
  analysis.planned = true;
  if (analysis.plan != nullptr) lastPlans_[doc.uri] = analysis.plan;
}

std::shared_ptr<const ir::ExecutionPlan> Workspace::lastPlan(const std::string& uri) const {
  auto it = lastPlans_.find(uri);
  return it != lastPlans_.end() ? it->second : nullptr;
}

std::shared_ptr<const ir::ExecutionPlan> Workspace::planOf(const Analysis& analysis) {
  if (analysis.standardPath) return nullptr;
  if (!analysis.planned) plan(analysis);
  return analysis.plan;
}

std::shared_ptr<const Workspace::PhaseFigures> Workspace::estimateOf(const ir::PhasePlan& phase) {
  // The key: the phase plan's content (ir::contentHash of its plan JSON),
  // with the source positions left out, since the cost model never reads them.
  ir::PhasePlan unplaced = phase;
  unplaced.source = {};
  unplaced.mapping.source = {};
  for (auto& l : unplaced.layers) l.source = {};
  const std::string key = ir::contentHash(ir::toJson(unplaced));
  if (auto it = estimates_.find(key); it != estimates_.end()) return it->second;
  auto figures = std::make_shared<PhaseFigures>();
  figures->key = key;
  figures->estimate = cost::estimatePhase(phase, &figures->problems);
  // Bounded: a burst of edits to a mapping makes one entry per value tried.
  if (estimates_.size() >= kEstimatesKept) estimates_.clear();
  estimates_[key] = figures;
  return figures;
}

std::vector<Json> Workspace::close(const std::string& uri, const std::string& path) {
  if (session_ != nullptr && !standardLibrary_.standardPathOf(uri)) session_->forget(path);
  told_.erase(uri);
  snapshotsOfText_.erase(uri);
  latest_.erase(uri);
  lastParsed_.erase(uri);
  lastPlans_.erase(uri);
  std::set<std::string> targets{uri};
  for (auto& [target, byDocument] : reported_)
    if (byDocument.erase(uri) > 0) targets.insert(target);
  std::vector<Json> out;
  for (const auto& target : targets) {
    Json list = Json::array();
    std::set<std::string> seen;
    if (auto it = reported_.find(target); it != reported_.end()) {
      for (const auto& [from, items] : it->second)
        for (const auto& item : items)
          if (seen.insert(serialize(item)).second) list.push_back(item);
      if (it->second.empty()) reported_.erase(it);
    }
    out.push_back(Json{{"uri", target}, {"diagnostics", std::move(list)}});
  }
  return out;
}

}  // namespace ipu::lsp
