// Pass 1: the phase's costed layers become plan layers (names, ops, FLOPs,
// activation sizes, code, ties, source locations).
#pragma once

#include "interpreter/plan/context.h"

namespace ipu::plan {
void expandLayers(PhaseContext& ctx);
}
