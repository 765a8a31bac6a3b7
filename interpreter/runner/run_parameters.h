// What a run record keeps of a plan: its resolved values flattened into named
// parameters (`mapping.replicas`, `optimizer.beta1`, `phases.one.lr.peak`),
// so `ipu runs --where` can filter on them and `ipu runs compare` can show
// what differs; and a hash of the plan, equal for an estimate and a run of
// the same plan, so predictions can be set beside measurements.
//
// Every value of a phase is kept under `phases.<phase>.<name>`; the value is
// also kept under `<name>` alone when every phase of the run agrees on it
// (so a one-phase run reads `mapping.replicas`, and a two-phase run does too
// unless its phases use different replica counts).
#pragma once

#include <map>
#include <string>

#include "runtime/ir/execution_plan.h"

namespace ipu::runner {

std::map<std::string, std::string> runParameters(const ir::RunPlan& run);

// The plan text a run directory keeps as plan.json (docs/run.md).
std::string planText(const ir::RunPlan& run);
// The plan's content hash (runtime/ir/plan_hash.h): 16 hex digits, equal
// exactly when the plans are, and equal to the hash of its plan.json.
std::string planHash(const ir::RunPlan& run);

}  // namespace ipu::runner
