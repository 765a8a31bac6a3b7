// `ipu estimate` keeps its predictions: each run of the script becomes a run
// of kind `estimate` in the store, with the same parameters and plan hash a
// real run of that plan would have, and the predicted figures as metrics over
// the run's steps (flat within each phase), so `ipu runs compare` can set
// prediction beside measurement and `ipu report` can draw them together.
#pragma once

#include <string>
#include <vector>

#include "interpreter/store/run_store.h"
#include "runtime/cost/cost_model.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::runner {

// Metric keys: samples_per_s, tokens_per_s, step_time_s, pipeline_utilisation,
// peak_memory_bytes at the first and last global step of each phase;
// time_to_train_s (cumulative) at the last. Returns the new runs' ids.
// Throws store::StoreError.
// `parameters` are recorded beside the runs' own (`set.PATH` for `--set`).
std::vector<long long> recordEstimate(store::RunStore& store, const ir::ExecutionPlan& plan,
                                      const cost::Estimate& estimate, const std::string& scriptText,
                                      const std::map<std::string, std::string>& parameters = {});

std::string hostName();
// Whether a run's process is still there: on this host, a process with its
// id (another host's processes cannot be seen: false; its heartbeat decides).
bool processAlive(const std::string& host, long long pid);

}  // namespace ipu::runner
