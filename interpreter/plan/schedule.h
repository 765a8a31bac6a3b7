// Pass 4: the pipeline schedule and communication volumes per optimizer step:
// GA + 2S - 2 pipeline cycles for S forward stages (PopART's count), the
// activations crossing stage boundaries, the gradient all-reduce across
// replicas, replicated-tensor-sharding gathers, and Streaming Memory traffic.
#pragma once

#include "interpreter/plan/context.h"

namespace ipu::plan {
void scheduleSteps(PhaseContext& ctx);
}
