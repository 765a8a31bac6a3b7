// The learning rate at a step of a phase, from the schedule the script
// declares (docs/language.md, "Learning-rate schedules"). Shared by everything
// that steps through a training: the emulator uses it for real updates, the
// estimate's step events report it to hooks.
#pragma once

#include "runtime/ir/execution_plan.h"

namespace ipu::train {

// `step` counts from 0 within the phase; `phaseSteps` is the phase's length.
// Warmup rises linearly from peak/warmup to the peak over `warmupSteps`
// steps; the decay then runs from the peak to `end` over the remaining steps.
// A custom (`lua f`) schedule is not evaluated here: the caller asks its hook.
double learningRate(const ir::LrSchedule& lr, long long step, long long phaseSteps);

}  // namespace ipu::train
