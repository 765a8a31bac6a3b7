// Pruning recorded checkpoints (`ipu runs gc --keep-checkpoints`,
// docs/tracking.md "Artifacts"): which checkpoints a retention rule lets go,
// and removing them (their records, their bytes kept in the store, and
// their files on this host).
//
// Never pruned: the checkpoints of a run still `running` (it may be
// resumed), those of a run an unfinished sweep's `from:` starts its trials
// from (for `from: best(S)` with S still running or paused, those of every
// run of S's trials, since any may become its best), and records older than
// schema version 4 that have no step to order them by.
#pragma once

#include <string>
#include <vector>

#include "interpreter/store/run_store.h"
#include "interpreter/store/sweep_store.h"

namespace ipu::runner {

enum class KeepCheckpoints {
  All,   // prune nothing
  Last,  // per run: its last checkpoint (what --resume and `from:` take) and every phase's final one
  Best,  // as Last; and a sweep's trials other than its best keep none
};
const char* name(KeepCheckpoints k);
std::optional<KeepCheckpoints> parseKeepCheckpoints(const std::string& text);

struct RetentionRule {
  KeepCheckpoints keep = KeepCheckpoints::All;
  double olderThanDays = 0;  // only runs that ended at least this long ago (0: any)
};

struct PrunedCheckpoint {
  long long runId = 0;
  std::string runName;
  store::Artifact artifact;
  long long bytes = 0;       // its size (0 when unknown)
  bool fileHere = false;     // its file is on this host (and is removed)
};

struct PrunePlan {
  std::vector<PrunedCheckpoint> checkpoints;
  long long storeBytes = 0;   // bytes kept in the store that go
  long long fileBytes = 0;    // bytes of files on this host that go
  long long elsewhere = 0;    // checkpoints whose files are on other hosts (their records go, the files stay)
  std::vector<std::string> protectedRuns;  // names of runs kept whole, and why
};

PrunePlan planPrune(store::RunStore& runs, store::SweepStore& sweeps, const RetentionRule& rule, double now);

// Removes what the plan names; the problems (a file that could not be
// removed), one sentence each.
std::vector<std::string> prune(store::RunStore& runs, const PrunePlan& plan);

}  // namespace ipu::runner
