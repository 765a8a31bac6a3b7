// Pass 2: put every layer on a pipeline IPU (as written, or balanced(p)),
// then derive the pipeline's stages in data-flow order: each maximal run of
// consecutive layers on one IPU is a stage, so a head placed back on IPU 0
// after the last IPU is a stage of its own, as in Graphcore's BERT. Stage s of
// S keeps 2(S-1-s)+1 micro batches in flight between its forward and backward.
#pragma once

#include "interpreter/plan/context.h"

namespace ipu::plan {
void placeLayers(PhaseContext& ctx);
}
