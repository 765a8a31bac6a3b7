// The human-readable `ipu plan` report: per run and phase, the mapping, the
// derived batch, the placement and the memory of every IPU against its
// capacity, with a verdict. (`--json` prints ir::toJson instead.)
#pragma once

#include <ostream>

#include "interpreter/base/terminal.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::cli {

void printPlanReport(std::ostream& os, const ir::ExecutionPlan& plan, const base::Painter& painter);

}  // namespace ipu::cli
