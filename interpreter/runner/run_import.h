// Run directories written before there was a store (or with --no-store) come
// into the store with `ipu runs import DIR...`: the script, its parameters
// (by planning script.ipu again; a script that no longer plans keeps only the
// training's name), the plan hash of plan.json, every line of metrics.jsonl,
// the held-out evaluations of events.jsonl, how summary.json says it ended
// (no summary.json: the process died, so `killed`), and the checkpoints.
// A directory already in the store is skipped, so importing twice is safe,
// also from several processes at once: the run is recorded with its
// directory in one transaction that checks it is not there yet. A record
// the store holds only in part (its process lost the store mid-run, or was
// killed before its last points reached it: fewer points than the
// directory, or still `running` though its process is gone) is completed
// from the directory instead, in one transaction; a run still recording is
// left to its process.
#pragma once

#include <string>
#include <vector>

#include "interpreter/store/run_store.h"

namespace ipu::runner {

struct ImportResult {
  std::vector<std::pair<std::string, long long>> imported;  // directory, new run id
  std::vector<std::string> skipped;                          // already in the store
  std::vector<std::string> completed;                        // "DIR: what was completed" (a partial record made whole)
  std::vector<std::string> live;                             // "DIR: which process" (still being recorded: left alone)
  std::vector<std::string> problems;                         // "DIR: why"
  std::vector<std::string> warnings;                         // "DIR: what was left out" (imported all the same)
};

// The metric points a run directory holds (metrics.jsonl, and the held-out
// evaluations of events.jsonl as `eval.<name>`), at steps before `beforeStep`.
// Lines that are not a metric record (not a JSON object, or without a whole
// `global_step` from 0) are left out and counted in `skipped`.
std::vector<store::MetricPoint> pointsOfRunDirectory(const std::string& directory, long long beforeStep,
                                                     long long* skipped = nullptr);

// Each path is a run directory or a folder holding run directories (searched
// recursively, e.g. `runs/`). Throws store::StoreError on a store failure.
ImportResult importRunDirectories(store::RunStore& store, const std::vector<std::string>& paths);

}  // namespace ipu::runner
