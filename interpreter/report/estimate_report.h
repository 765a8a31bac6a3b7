// The human-readable `ipu estimate` report: per run and phase, the step time
// and where it goes, throughput, pipeline utilisation, per-IPU work and
// utilisation, time to train, and the calibration and assumptions behind it.
#pragma once

#include <ostream>

#include "interpreter/base/terminal.h"
#include "runtime/cost/cost_model.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::report {

void printEstimateReport(std::ostream& os, const ir::ExecutionPlan& plan, const cost::Estimate& estimate,
                         const base::Painter& painter, bool timeline = false);

// "12.6 s", "6.15 ms", "27.3 h", "4.1 days".
std::string formatDuration(double seconds);

}  // namespace ipu::report
