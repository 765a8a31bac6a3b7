// After placement: the pipeline schedule (ir::PipelineSchedule, built once
// here from the stages, the gradient accumulation and the recomputation
// policy), and, after the memory plan, pass 4: what one optimizer step moves
// (ir::Traffic): the activations and gradients crossing each stage boundary,
// the collectives across replicas (gradients, RTS gathers) and each IPU's
// Streaming Memory traffic.
#pragma once

#include "interpreter/plan/context.h"

namespace ipu::plan {
void planSchedule(PhaseContext& ctx);
void planTraffic(PhaseContext& ctx);
}
