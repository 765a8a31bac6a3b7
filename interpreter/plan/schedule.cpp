#include "interpreter/plan/schedule.h"

#include <algorithm>

namespace ipu::plan {

void scheduleSteps(PhaseContext& ctx) {
  ir::PhasePlan& p = ctx.plan;
  const ir::Mapping& m = ctx.settings;
  const long long ga = std::max<long long>(1, p.batch.gradientAccumulation);
  const int S = static_cast<int>(p.stages.size());
  // PopART: S forward stages make 2S-1 training stages; a step of GA micro
  // batches takes GA + (2S-1) - 1 cycles (fill, steady state, drain).
  p.pipelineCycles = static_cast<int>(S > 1 ? ga + 2 * S - 2 : ga);

  const double t = std::max(1, m.shard);
  const double bc = ir::bytesOf(p.precision.compute);
  const double bw = ir::bytesOf(p.precision.weights);
  const double ba = ir::bytesOf(p.precision.accumulators);
  ir::Communication c;
  for (std::size_t s = 0; s + 1 < p.stages.size(); ++s) {
    int last = p.stages[s].layers.back();
    c.boundaryBytesPerMicroBatch =
        std::max(c.boundaryBytesPerMicroBatch, p.layers[static_cast<std::size_t>(last)].outputElements * bc);
  }
  // Per IPU: the largest shard of the model's weights any IPU holds.
  double maxW = 0;
  for (const auto& ipu : p.ipus) {
    double w = 0;
    for (int li : ipu.layers) {
      const auto& l = p.layers[static_cast<std::size_t>(li)];
      w += l.shardable ? l.params / t : l.params;
    }
    maxW = std::max(maxW, w);
  }
  if (m.replicas > 1) c.allReduceBytesPerIpu = maxW * ba;
  if (m.rtsOptimizerState && m.replicas > 1) c.rtsGatherBytesPerIpu = maxW * bw;
  double streaming = 0;
  for (const auto& ipu : p.ipus) streaming = std::max(streaming, ipu.streamingBytes);
  if (m.phases > 1 || m.weightsStreaming) {
    // Weights in for the forward and again for the backward of every micro
    // batch; gradients out; state read and written once per step.
    double weights = maxW * bw / (m.rtsWeights ? m.replicas : 1);
    c.streamingBytesPerStepPerIpu = static_cast<double>(ga) * (2 * weights + maxW * ba) + 2 * streaming;
  } else if (m.optimizerStateStreaming) {
    c.streamingBytesPerStepPerIpu = 2 * streaming;  // read and write the state once per step
  }
  p.communication = c;
}

}  // namespace ipu::plan
