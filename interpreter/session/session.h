// The one entry point shared by the CLI, the REPL, the language server and the
// tests: load -> parse -> check -> validate hooks -> plan (-> estimate | run,
// in later layers). A Session owns the sources and the diagnostics of one
// invocation; callers render the diagnostics however they present them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/check/checker.h"
#include "interpreter/check/program.h"
#include "interpreter/session/declarations.h"
#include "interpreter/session/queries.h"
#include "interpreter/session/variant.h"
#include "runtime/cost/cost_model.h"
#include "runtime/cost/estimate_steps.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::check {
class LayerCostCache;
}  // namespace ipu::check

namespace ipu::plan {
class LayerExpansions;
}  // namespace ipu::plan

namespace ipu::hooks {
class HookSet;
class LuaPlacement;
}  // namespace ipu::hooks

namespace ipu::session {

class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  base::SourceMap& sources() { return sources_; }
  base::Diagnostics& diagnostics() { return diags_; }

  // Read a script into the source map; on failure reports IPU0011 and returns nothing.
  std::optional<base::FileId> readFile(const std::string& path);
  base::FileId addSource(std::string name, std::string text);

  // Replace the text of the file at `path` (a script, or a module scripts
  // import) for every later check() and snapshot(): the disk is no longer
  // read for it (an editor's unsaved buffer). Modules whose text did not
  // change stay parsed (check::ModuleCache, by path and text).
  void update(const std::string& path, std::string text);
  // Undo update(): later checks read the file at `path` from the disk again
  // (an editor closed its buffer).
  void forget(const std::string& path);
  // Check the file at `path` (its text as last given to update(), else the
  // disk's) and keep what the check saw as an immutable snapshot to query
  // (queries.h). Later updates and snapshots do not change it. Null, with a
  // diagnostic, when the file cannot be read. The session's diagnostics are
  // not touched by the check: the snapshot has its own.
  std::shared_ptr<const Snapshot> snapshot(const std::string& path);

  // Parse, check and validate hooks. Null when there were errors.
  const check::CheckedProgram* check(base::FileId file);
  // A sweep trial's values (check/sweeps.h), in place of those the script
  // writes, for every later check(), plan() and estimate() until cleared:
  // the program and plan are those of the script with the values written in,
  // derived values (global batch, steps from epochs, lr scaling, layer costs)
  // derived again. A value that does not fit gets the diagnostics the field
  // would give in a script. No script text is written.
  void setOverrides(std::optional<check::Overrides> overrides) { overrides_ = std::move(overrides); }
  // How estimate() and estimatePlan() price the replicas: driven by one
  // host process (the default) or as host instances (`--instances N`).
  void setHosting(const cost::Hosting& hosting) { hosting_ = hosting; }
  const std::optional<check::Overrides>& overrides() const { return overrides_; }
  // A value given outside the script as `PATH=VALUE` (`ipu run --set`),
  // VALUE parsed in the language from a source of its own named `--set PATH`
  // (what its diagnostics point into). Nothing, with syntax diagnostics, when
  // VALUE does not parse. Give the result to setOverrides().
  std::optional<check::WrittenOverride> readOverride(const std::string& path, const std::string& value);
  // check() with `overrides` (kept for later calls, as setOverrides does).
  const check::CheckedProgram* checkWithOverrides(base::FileId file, check::Overrides overrides) {
    setOverrides(std::move(overrides));
    return check(file);
  }

  // Whether check() runs the searches of mappings declared with `search { }`
  // (Run, the default) or leaves their phases with the mapping and the batch
  // the script writes (AsWritten: what `ipu search --write` edits).
  enum class Searches { Run, AsWritten };
  void setSearches(Searches searches) { searches_ = searches; }

  // Where the results of `search { }` blocks are kept between checks
  // (search/result_cache.h): by default $XDG_CACHE_HOME/ipu/search or
  // ~/.cache/ipu/search, none with IPU_NO_CACHE=1; none: every check searches.
  void setSearchCache(std::optional<std::string> directory) { searchCache_ = std::move(directory); }
  const std::optional<std::string>& searchCache() const { return searchCache_; }

  // What later plans are for (declarations.h): with Purpose::Run, what the
  // emulator cannot execute is an error of plan(); by default a warning.
  void setPurpose(Purpose purpose) { purpose_ = purpose; }

  // Check, then plan every run. Null when checking failed; a plan that does not
  // fit is returned (with IPU2001 reported) so it can be shown. With
  // `requireRuns`, a script with no training to plan is an error (IPU1216).
  const ir::ExecutionPlan* plan(base::FileId file, bool requireRuns = false);

  // Check, plan, then estimate every phase with the cost model. Null when
  // checking failed, or when nothing could be estimated. Runs whose trainings
  // have hooks are then stepped through with them (RunEstimate::hooks).
  const cost::Estimate* estimate(base::FileId file);

  // Where hooks' `print` goes (one call per line); by default nowhere.
  void setHookOutput(std::function<void(const std::string& hook, const std::string& line)> print) {
    hookPrint_ = std::move(print);
  }
  // The loaded hooks of the last check (null before, or when checking failed early).
  hooks::HookSet* hooks() { return hooks_.get(); }

  // The plan the last plan() or estimate() made (null if none).
  const ir::ExecutionPlan* lastPlan() const { return plan_.get(); }

  // The span a runtime's source reference points to (for runtime errors).
  base::Span spanOf(const ir::SourceRef& ref) const;
  // The root file's text, as checked (what a run record keeps as its script).
  std::string rootText() const { return root_ != base::kNoFile ? sources_.file(root_).text() : std::string(); }

  // Mapping variants as values (variant.h), after a successful check().
  // The variant that run `run`'s phase `phase` is written as (run 0 phase 0 of
  // a script without trainings: a default variant).
  plan::MappingValue variantOf(std::size_t run = 0, std::size_t phase = 0) const;
  // Plan `variant` in place of that phase's mapping, without source text.
  // The session's diagnostics are left as they were.
  PlannedVariant planVariant(const plan::MappingValue& variant, std::size_t run = 0, std::size_t phase = 0,
                             Detail detail = Detail::Full);

  // Run `run` planned with `mapping` (a mapping the last check resolved, of
  // the same model) in place of each phase's own, as mapping values: each
  // phase's batch as written, derived again for the mapping's replicas. Not
  // ok (with the checker's codes) when the mapping does not apply. The
  // session's diagnostics are left as they were.
  struct PlannedRun {
    bool ok = false;
    ir::RunPlan run;
    base::Diagnostics diagnostics;
  };
  PlannedRun planRunWith(const check::MappingSpec& mapping, std::size_t run);
  // The cost model's estimate of `plan` (made by this session), stepped
  // through the hooks of its runs as estimate() does. Null with diagnostics
  // on the session when it cannot be estimated.
  const cost::Estimate* estimatePlan(const ir::ExecutionPlan& plan);

  // The checker of the last check: evaluation state for the REPL and tests.
  check::Checker* checker() { return checker_.get(); }

 private:
  void resolveSearches();

  const check::Prelude* prelude_;   // the standard library, shared by every session
  base::SourceMap sources_;         // starts with the prelude's files
  base::Diagnostics diags_;
  check::ModuleCache moduleCache_;  // the user's modules, parsed once per text
  std::map<std::string, std::string> texts_;  // update(): by canonical path
  base::FileId root_ = base::kNoFile;
  std::unique_ptr<check::Checker> checker_;
  std::unique_ptr<check::CheckedProgram> program_;
  std::optional<check::Overrides> overrides_;      // a sweep trial's values (setOverrides)
  cost::Hosting hosting_;                          // setHosting
  std::optional<std::string> searchCache_;         // setSearchCache
  Searches searches_ = Searches::Run;
  std::unique_ptr<check::LayerCostCache> layerCosts_;  // for variants of the checked program
  std::unique_ptr<plan::LayerExpansions> layerExpansions_;
  std::unique_ptr<ir::ExecutionPlan> plan_;
  std::unique_ptr<cost::Estimate> estimate_;
  Purpose purpose_ = Purpose::Estimate;
  std::size_t declarationErrors_ = 0;  // of the last plan (declarations.h)
  std::function<void(const std::string&, const std::string&)> hookPrint_;
  std::unique_ptr<hooks::HookSet> hooks_;          // before the plan, which may call into it
  std::unique_ptr<hooks::LuaPlacement> placement_;
};

}  // namespace ipu::session
