// An agent of a sweep (docs/sweeps.md, "Running a sweep"): claims trials of
// one sweep from the run store, runs each and records its result, until the
// sweep has nothing left for it, it is cancelled, `count` trials have run, or
// it is interrupted. While the sweep is paused, or starts `from: best(S)` and
// S has no finished trial yet, it waits (asking the store again with a
// growing delay).
//
// With `from:`, each trial's weights start from a checkpoint found in the
// store when the trial starts (sweep_start.h), recorded in the trial's run.
//
// A trial is the sweep's training with the trial's values substituted
// (session::Session::setOverrides): the sweep's stored script text is checked
// under the path it was declared in, so its imports resolve as they did.
// Then either
// - the metric is a prediction of the cost model (isPredictedMetric): the
//   trial's plan is estimated and recorded as a run of kind `estimate`; or
// - otherwise the trial trains on the emulator (runner::train), recorded in
//   the store as a run.
// Either way the trial's metric is the last value of the metric's key in its
// recorded run (for `eval.NAME`, the held-out evaluation at the end of the
// last phase), and the run is linked to the trial (attachRun).
//
// While a trial runs, a thread sends its heartbeat every few seconds; when
// the store answers that the lease is lost or the sweep was cancelled, the
// training is stopped.
#pragma once

#include <atomic>
#include <memory>
#include <ostream>
#include <string>

#include "interpreter/base/terminal.h"
#include "interpreter/store/run_store.h"
#include "interpreter/store/sweep_store.h"
#include "runtime/emulator/instances.h"

namespace ipu::runner {

// The metrics a trial takes from the cost model rather than the emulator:
// figures of the IPU pod that the emulator, running on the host, cannot
// measure. The keys `ipu estimate` records (estimate_record.h):
// samples_per_s, tokens_per_s, step_time_s, pipeline_utilisation,
// peak_memory_bytes, time_to_train_s.
bool isPredictedMetric(const std::string& name);

struct AgentSettings {
  std::string scriptPath;        // the path the sweep's script is checked under (its imports resolve from it)
  std::string runsRoot = "runs"; // run directories of trained trials
  long long count = 0;           // at most this many trials (0: as many as the sweep has)
  long long stepLimit = 0;       // at most this many steps per phase of a trial (0: all)
  int threads = 0;               // host threads for training (0: all)
  double staleAfter = 60;        // seconds without a heartbeat before a trial is presumed dead
  double heartbeatEvery = 5;     // seconds between heartbeats
  int maxAttempts = 3;
  double waitFirst = 0.5;        // seconds before asking the store again while waiting (doubling) ...
  double waitAtMost = 5;         // ... up to this
  std::string agentId;           // "" : host:pid
  const std::atomic<bool>* interrupt = nullptr;  // set (e.g. by SIGINT): stop the trial, end it killed, leave
  // The progress stream is a terminal: while a trial trains, one line shows
  // its step, loss and ETA, redrawn in place and replaced by the trial's line.
  bool progressIsTerminal = false;
  base::ColorMode color = base::ColorMode::Auto;
  // Whether trained trials keep their checkpoints' bytes in the store (`--artifacts`).
  store::ArtifactStorage artifacts = store::ArtifactStorage::Files;
  // An MPI job's instances (`ipu agent --instances N`): each trained trial
  // runs on all of them, instance 0 running this agent; null: one process.
  std::shared_ptr<emu::Instances> instances;
};

struct AgentResult {
  enum class Ending {
    Done,         // the sweep is finished (or has nothing left for this agent)
    Count,        // `count` trials ran
    Cancelled,    // the sweep is cancelled
    Interrupted,  // `interrupt` was set
  } ending = Ending::Done;
  long long trials = 0;    // trials this agent ran (claimed and ended)
  long long finished = 0;  // of which finished with a metric
  long long failed = 0;    // of which failed
};

const char* endingName(AgentResult::Ending e);

// Runs the agent's loop on sweep `sweepId`. `runStore` and `sweepStore` are
// the same store (two connections). Progress, one line per trial, goes to
// `progress`. Throws store::StoreError when the store fails, and
// std::runtime_error when the sweep's method cannot search its spec.
AgentResult runAgent(store::SweepStore& sweepStore, store::RunStore& runStore, long long sweepId,
                     const AgentSettings& settings, std::ostream& progress);

// An agent whose trials are MPI jobs (`ipu agent --instances N`, docs/sweeps.md):
// instance 0 runs runAgent with AgentSettings::instances set, and before each
// trial it trains sends the others what to train; they run their replicas of
// it (runner::trainInstance), writing nothing, until instance 0 calls
// endTrials. Estimated trials run on instance 0 alone.
//
// The other instances: trains what instance 0 sends until it ends. `settings`
// gives threads, steps per phase and the interrupt. Returns when instance 0
// ends; a trial this instance cannot set up stops the job (Instances::fail).
void followTrials(emu::Instances& instances, const AgentSettings& settings);
// Instance 0: no more trials (the others' followTrials returns). Once.
void endTrials(emu::Instances& instances);

}  // namespace ipu::runner
