// Where the trials of a sweep with `from:` start (docs/sweeps.md, "Starting
// from another run"): the checkpoint a trial's weights are loaded from,
// found in the run store when the trial starts.
//
// - `from: best(S)`: the last checkpoint of the run of sweep S's best
//   finished trial (by S's metric and goal). While S has no finished trial
//   but can still get one (it is running or paused), the answer is Wait.
// - `from: checkpoint("RUN")`: the last checkpoint of that recorded run (by
//   its id, `12`, or its name, `tiny_trial-12`).
//
// A run's last checkpoint is the one at the highest global step of those it
// recorded (for records older than schema version 4, which have no step, the
// newest file), of those present on this host or kept in the store
// (`--artifacts store`). One kept in the store and not here is fetched when
// the trial starts (fetchTrialStart, checkpoint_fetch.h).
#pragma once

#include <string>

#include "interpreter/store/run_store.h"
#include "interpreter/store/sweep_store.h"
#include "interpreter/sweep/space.h"

namespace ipu::runner {

struct TrialStart {
  enum class Status {
    Ready,        // start from `checkpoint`
    Wait,         // best(S): S has no finished trial yet, and may get one
    Unavailable,  // there is nothing to start from: `problem` says why
  } status = Status::Unavailable;
  std::string checkpoint;  // Ready: the checkpoint file
  long long runId = 0;     // Ready: the run that wrote it
  std::string runName;     // Ready: its name (`tiny_trial-12`)
  long long trial = -1;    // best(S), Ready: the index of S's best trial
  std::string problem;     // Wait, Unavailable: a sentence saying why
  // Ready: the checkpoint's record, and whether its file must still be
  // found or fetched on this host (`checkpoint` is then "").
  store::Artifact artifact;
  bool fetch = false;
};

// A Ready start whose checkpoint is to be fetched (or its file checked
// against its recorded SHA-256): its file on this host, fetched from the
// store under `runsRoot` when needed. Unavailable, with the problem, when
// it cannot be (not here and not in the store, or a damaged copy).
void fetchTrialStart(TrialStart& start, store::RunStore& runs, const std::string& runsRoot);

TrialStart resolveTrialStart(const sweep::StartFrom& from, store::SweepStore& sweeps, store::RunStore& runs);

// Why sweep `sweep`, whose trials start `from`, cannot run any trial (the
// start is Unavailable): the agent's error, and `ipu sweep`'s before it
// creates such a sweep.
std::string unavailableStart(const std::string& sweep, const sweep::StartFrom& from, const TrialStart& start);

// How a start is described to people: "the best trial (3) of sweep `lr_grid`,
// run tiny_trial-12" or "run tiny_trial-12".
std::string describeStart(const sweep::StartFrom& from, const TrialStart& start);

}  // namespace ipu::runner
