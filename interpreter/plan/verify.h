// Pass 5: invariants of the finished plan (every layer on exactly one IPU of
// the pipeline, stages consistent, IPU count within the pod), which are bugs
// if they fail, and the verdict: IPUs over their In-Processor Memory or
// Streaming Memory are errors that name the largest components and the
// levers (tried on the plan, not guessed) that would make it fit.
#pragma once

#include "interpreter/plan/context.h"

namespace ipu::plan {
void verifyPlan(PhaseContext& ctx);
}
