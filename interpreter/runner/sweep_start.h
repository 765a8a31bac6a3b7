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
// A run's last checkpoint is the newest of the checkpoint files it recorded
// (the emulator writes them in the order it trains), of those present on
// this host.
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
};

TrialStart resolveTrialStart(const sweep::StartFrom& from, store::SweepStore& sweeps, store::RunStore& runs);

// Why sweep `sweep`, whose trials start `from`, cannot run any trial (the
// start is Unavailable): the agent's error, and `ipu sweep`'s before it
// creates such a sweep.
std::string unavailableStart(const std::string& sweep, const sweep::StartFrom& from, const TrialStart& start);

// How a start is described to people: "the best trial (3) of sweep `lr_grid`,
// run tiny_trial-12" or "run tiny_trial-12".
std::string describeStart(const sweep::StartFrom& from, const TrialStart& start);

}  // namespace ipu::runner
