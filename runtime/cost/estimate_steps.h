// Stepping through an estimated run: the same phase/step events `ipu run`
// produces, with the cost model's timing in place of measurements, so hooks
// run under `ipu estimate` too (a budget hook can stop the run when its
// predicted time or cost runs out). Steps are not simulated one by one: each
// step of a phase has the phase's predicted step time; the learning rate
// follows the schedule (or the run's Lua policy).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/cost/cost_model.h"
#include "runtime/train/events.h"

namespace ipu::cost {

SteppedRun stepThrough(const ir::RunPlan& run, const RunEstimate& estimate, train::Observer& observer,
                       const train::Policies& policies);

}  // namespace ipu::cost
