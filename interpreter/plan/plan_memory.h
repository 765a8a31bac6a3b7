// Pass 3: the memory of every IPU, by component, against the chip's
// In-Processor Memory, and what lives in Streaming Memory. The model is
// documented, term by term, in docs/plan.md ("Memory model").
#pragma once

#include <vector>

#include "interpreter/plan/context.h"

namespace ipu::plan {

void planMemory(PhaseContext& ctx);

// One pipeline IPU's load: layers (indices into plan.layers) with the
// pipeline stage each runs in, out of `stageCount` stages.
struct IpuLoad {
  int ipu = 0;  // pipeline IPU, for its availableMemoryProportion
  std::vector<std::pair<int, int>> layerStages;
  int stageCount = 1;
};

// Memory of one IPU of that pipeline IPU's shard group, and the Streaming
// Memory it uses. The balancer calls this to reject partitions that cannot fit.
ir::MemoryBreakdown ipuMemory(const PhaseContext& ctx, const IpuLoad& load, double& streamingBytes);

}  // namespace ipu::plan
