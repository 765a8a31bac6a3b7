// The worker's side of the server: the one long-lived Session of the
// workspace, the analysis of each document version a request or a change
// asks about, the diagnostics `ipu check` gives, and how the session's paths
// and spans become the protocol's URIs and ranges.
//
// Only the worker thread uses a Workspace (the session and its snapshots are
// not shared between threads). It reads the open documents from the store
// and tells the session their texts before each check, so that a script sees
// the unsaved text of the modules it imports.
//
// The plan of each version (what diagnose() plans, kept with its analysis)
// and the cost model's estimate of each planned phase feed the code lenses,
// inlay hints and plan hovers (plan_views.h). Estimates are cached by the
// phase plan's content without its source positions: an edit that leaves a
// phase's plan as it was (a comment, another mapping, a line added above)
// does not price it again.
//
// Memory stays bounded over any number of edits: every check of a new text
// adds that text to the session's source map, so the session is replaced by
// a fresh one (the standard library is shared, so this costs one parse of
// each open document) after kChecksPerSession checks.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/lsp/document_store.h"
#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"
#include "interpreter/lsp/standard_library_files.h"
#include "interpreter/session/queries.h"
#include "interpreter/syntax/ast.h"
#include "runtime/cost/cost_model.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::session {
class Session;
}

namespace ipu::lsp {

// One version of one document, checked.
struct Analysis {
  OpenDocument document;
  // A file of the standard library (opened from StandardLibraryFiles): its
  // module's path ("std/models/bert.ipu"); the snapshot is then the library's.
  std::optional<std::string> standardPath;
  std::shared_ptr<const session::Snapshot> snapshot;  // never null
  std::shared_ptr<const syntax::Program> program;     // null when the text does not parse
  std::string queryPath;                              // what to ask the snapshot about
  std::unique_ptr<LineIndex> lines;                   // of *document.text
  // The user modules the check read besides the document (their session paths).
  std::set<std::string> imports;

  const std::string& text() const { return *document.text; }
  // What `ipu plan` made of this version (Workspace::planOf), once asked:
  // set by the worker, the only thread that sees an Analysis.
  mutable bool planned = false;
  mutable std::shared_ptr<const ir::ExecutionPlan> plan;  // null: the check failed, or a standard module
  // The session's line and column of a protocol position in this document.
  base::LineCol place(Position p, PositionEncoding encoding) const;
};

class Workspace {
 public:
  static constexpr int kChecksPerSession = 200;

  Workspace(const DocumentStore& documents, StandardLibraryFiles& standardLibrary);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  void setEncoding(PositionEncoding encoding) { encoding_ = encoding; }
  PositionEncoding encoding() const { return encoding_; }

  // The analysis of `document` at its version (kept for the latest version of each document).
  std::shared_ptr<const Analysis> analyse(const OpenDocument& document);
  // Forget the analysis of `uri`: the next analyse() checks it again (a
  // module it imports changed).
  void invalidate(const std::string& uri) { latest_.erase(uri); }
  // The latest analysis of each open document (for references across them).
  std::vector<std::shared_ptr<const Analysis>> latestAnalyses() const;
  // The latest analysis of `uri` whose text parsed (completion falls back on it mid-edit).
  std::shared_ptr<const Analysis> lastParsed(const std::string& uri) const;

  // A snapshot of a script with text `text` at the document's path: what
  // its top level sees, for completion and signature help in a document
  // that has never parsed (the caller passes its imports alone). Kept per
  // document while the text is the same.
  std::shared_ptr<const session::Snapshot> snapshotOfText(const OpenDocument& document, const std::string& text);
  // The snapshot that best knows the top level of a document (to ask about
  // analysis.queryPath): its own when it parsed, else its last version that
  // parsed, else one of its imports alone (`imports`: read lexically by the caller).
  std::shared_ptr<const session::Snapshot> namingSnapshot(const Analysis& analysis, const std::string& imports);

  // What `ipu check` reports for the document (Session::plan): the params of
  // one publishDiagnostics per file that has them or had them from this
  // document before (an imported module's errors are shown in that module).
  std::vector<Json> diagnose(const Analysis& analysis);
  // The plan of the analysis's version: every run's phases, as `ipu plan`
  // and `ipu estimate` make it (Session::plan); planned by diagnose() or
  // here. Null when the check failed.
  std::shared_ptr<const ir::ExecutionPlan> planOf(const Analysis& analysis);
  // The plan of the document's last version that planned (null if none did).
  std::shared_ptr<const ir::ExecutionPlan> lastPlan(const std::string& uri) const;
  // The cost model's estimate of a phase (cost::estimatePhase, what `ipu
  // estimate` prints), with the problems that stopped it; cached (see above).
  struct PhaseFigures {
    std::string key;  // the phase plan's content hash (the background search's figures are kept by it too)
    cost::PhaseEstimate estimate;
    std::vector<cost::Problem> problems;
  };
  std::shared_ptr<const PhaseFigures> estimateOf(const ir::PhasePlan& phase);
  static constexpr std::size_t kEstimatesKept = 64;
  // The open documents whose last check read the module at `path`.
  std::vector<std::string> dependentsOf(const std::string& path) const;
  // The document was closed: the session reads its file from disk again;
  // returns the publishDiagnostics params that clear what it had shown.
  std::vector<Json> close(const std::string& uri, const std::string& path);

  // A session path or a span of a snapshot as the protocol names it. None
  // when the file cannot be shown (a standard module that could not be written).
  std::optional<std::string> uriOfPath(const std::string& path, bool standard);
  std::optional<Json> location(const session::Snapshot& snapshot, base::Span span);
  Json range(const std::string& text, std::size_t begin, std::size_t end) const;
  StandardLibraryFiles& standardLibrary() { return standardLibrary_; }
  const DocumentStore& documents() const { return documents_; }

 private:
  void syncOpenDocuments(const OpenDocument& except);
  session::Session& session();
  // Checks and plans the document's version on the session (its diagnostics
  // are the session's afterwards) and keeps the plan in the analysis.
  void plan(const Analysis& analysis);
  std::shared_ptr<const session::Snapshot> librarySnapshot();

  const DocumentStore& documents_;
  StandardLibraryFiles& standardLibrary_;
  PositionEncoding encoding_ = PositionEncoding::Utf16;
  std::unique_ptr<session::Session> session_;
  int checks_ = 0;
  std::map<std::string, long long> told_;  // the version of each document the session has the text of
  std::map<std::string, std::shared_ptr<const Analysis>> latest_, lastParsed_;
  std::shared_ptr<const session::Snapshot> library_;
  std::map<std::string, std::shared_ptr<const PhaseFigures>> estimates_;
  std::map<std::string, std::shared_ptr<const ir::ExecutionPlan>> lastPlans_;  // lastPlan(): by uri  // estimateOf(): by content hash
  std::map<std::string, std::pair<std::string, std::shared_ptr<const session::Snapshot>>> snapshotsOfText_;  // snapshotOfText()
  // What each document's last check reported, per file it reported on:
  // a file's diagnostics are those of every document that reported on it.
  std::map<std::string, std::map<std::string, std::vector<Json>>> reported_;  // target uri -> document uri -> list
};

// Protocol JSON of the common shapes.
Json toJson(Position p);
Json toJson(const Range& r);
std::optional<Position> positionFrom(const Json& j);
std::optional<Range> rangeFrom(const Json& j);

}  // namespace ipu::lsp
