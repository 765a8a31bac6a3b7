// The human-readable `ipu plan` report: per run and phase, the mapping, the
// derived batch, the placement and the memory of every IPU against its
// capacity, with a verdict. (`--json` prints ir::toJson instead.)
#pragma once

#include <ostream>

#include "interpreter/base/terminal.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::report {

// `memoryOnly` keeps the memory table and the verdict (the REPL's `:mem`).
void printPlanReport(std::ostream& os, const ir::ExecutionPlan& plan, const base::Painter& painter,
                     bool memoryOnly = false);

}  // namespace ipu::report
