// Training a planned run on the emulator, as `ipu run` and the REPL's `:run`
// do: check that the host can hold it, open a run directory (or reopen one to
// resume), run the phases with the training's Lua hooks, a progress display
// and the run record listening, and write how it ended. Problems become
// diagnostics of the session, pointing into the script.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "interpreter/base/terminal.h"
#include "interpreter/hooks/run_hooks.h"
#include "interpreter/session/session.h"
#include "interpreter/store/run_store.h"
#include "runtime/emulator/instances.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::runner {

struct TrainSettings {
  std::string runsRoot = "runs";   // run directories go under <runsRoot>/<training>/
  bool resume = false;             // continue a run from its last checkpoint
  std::string resumeFrom;          // the run directory to resume ("": the latest of this training)
  int threads = 0;                 // host threads (0: all)
  long long stepLimit = 0;         // at most this many steps per phase (0: all)
  long long checkpointEvery = 100; // steps between checkpoints (and one at the end of every phase)
  const std::atomic<bool>* cancel = nullptr;
  // Why `cancel` was set, when not by the user's Ctrl-C: an early stop (a
  // sweep's hyperband) makes the run `stopped`, with the reason, as a hook's
  // stop does; another reason (the sweep was cancelled) is recorded in place
  // of "Ctrl-C". Asked once, after the run ended cancelled; null: Ctrl-C.
  struct CancelCause {
    bool earlyStop = false;
    std::string reason;
  };
  std::function<CancelCause()> cancelCause;
  // Non-empty: the progress is one line redrawn in place on a terminal,
  // starting with this (a sweep agent's "trial 3 [lr=0.01]"), erased when the
  // run ends, with no phase headers or summaries (Progress::oneLine).
  std::string progressLine;
  std::string scriptText;          // kept as script.ipu
  std::string scriptDirectory;     // relative dataset paths resolve here
  std::string corpus;              // the built-in corpus ("": the emulator's default)
  base::ColorMode color = base::ColorMode::Auto;
  store::RunStore* store = nullptr; // where the run is also recorded (docs/tracking.md); null: nowhere
  // Whether the checkpoints' bytes are kept in the store too (`--artifacts`);
  // a resumed run fetches from the store the checkpoints it needs that are
  // not in its run directory (checkpoint_fetch.h), whatever this says.
  store::ArtifactStorage artifacts = store::ArtifactStorage::Files;
  // The checkpoint of another run whose weights the phases without `from`
  // start from (a sweep's `from:`, emu::Options::initialWeights); "": none.
  std::string initialWeights;
  std::map<std::string, std::string> parameters;  // recorded with the run's own (a sweep trial's)
  std::vector<std::string> tags;                  // the run's tags in the store
  std::string name;                               // the run's name in the store ("": <training>-<id>)
  const hooks::SweepTrial* sweepTrial = nullptr;  // the hooks' ctx.sweep and ctx.trial; null: not a trial
  // An MPI job's instances (docs/run.md, "Across processes and hosts"):
  // `train` runs on instance 0, which alone writes the run directory and the
  // store's record; the others run `trainInstance`. Null: one process.
  std::shared_ptr<emu::Instances> instances;
};

struct TrainResult {
  enum class Status { Completed, Stopped, Cancelled, Failed } status = Status::Failed;
  std::string runDirectory;
  std::string stopReason;  // Stopped: what the hook (or the early stop) said
  std::string cancelReason;  // Cancelled: "Ctrl-C", or CancelCause's reason
  long long storeRunId = 0;  // the run's id in the store (0: not recorded)
  std::string storeFailure;  // why the store could not record all of it ("" if it did)
};

// Progress goes to `progress` (a terminal gets a line redrawn in place).
TrainResult train(session::Session& session, const ir::RunPlan& run, const TrainSettings& settings,
                  std::ostream& progress, bool progressIsTerminal);

// An instance other than 0 of an MPI job: runs its replicas of the run
// instance 0 runs in `train`, writing nothing (no run directory, no store,
// no progress), reading the checkpoints instance 0 names when resuming.
// Completed or Failed; a failure's message goes to `error`.
TrainResult trainInstance(session::Session& session, const ir::RunPlan& run, const TrainSettings& settings, std::string& error);

}  // namespace ipu::runner
