#include "interpreter/plan/schedule.h"

#include <algorithm>

namespace ipu::plan {

void planSchedule(PhaseContext& ctx) {
  ir::PhasePlan& p = ctx.plan;
  p.schedule.stages = static_cast<int>(p.stages.size());
  p.schedule.microBatches = std::max(1LL, p.batch.gradientAccumulation);
  p.schedule.recompute = ctx.settings.recompute;
  for (auto& s : p.stages) s.stashDepth = p.schedule.stashDepth(s.index);
}

void planTraffic(PhaseContext& ctx) {
  ir::PhasePlan& p = ctx.plan;
  const ir::Mapping& m = ctx.settings;
  const double ga = static_cast<double>(p.schedule.microBatches);
  const double r = std::max(1, m.replicas);
  const double bc = ir::bytesOf(p.precision.compute);
  const double bw = ir::bytesOf(p.precision.weights);
  const double ba = ir::bytesOf(p.precision.accumulators);
  const double stateBytes = p.optimizer.moments * ir::bytesOf(p.precision.optimizerState) + (p.precision.masterWeights ? 4.0 : 0.0);
  const double rtsO = m.rtsOptimizerState ? r : 1, rtsW = m.rtsWeights ? r : 1;
  const bool phased = m.phases > 1 || m.weightsStreaming;
  ir::Traffic tr;

  // What stage s sends down is its last layer's output; the backward pass
  // returns the gradient of the same tensor.
  for (std::size_t s = 0; s + 1 < p.stages.size(); ++s) {
    const double bytes = p.layers[static_cast<std::size_t>(p.stages[s].layers.back())].outputElements * bc;
    tr.boundaries.push_back({static_cast<int>(s), bytes, bytes});
  }

  for (const auto& ipu : p.ipus) {
    const double w = ipu.parameters;
    if (m.replicas > 1) {
      // RTS of the optimizer state: each replica updates its share, so the
      // gradients are reduce-scattered and the updated weights all-gathered.
      tr.collectives.push_back({m.rtsOptimizerState ? ir::CollectiveKind::ReduceScatter : ir::CollectiveKind::AllReduce,
                                ir::CollectiveTensors::Gradients, ipu.index, w * ba});
      if (m.rtsOptimizerState)
        tr.collectives.push_back({ir::CollectiveKind::AllGather, ir::CollectiveTensors::UpdatedWeights, ipu.index, w * bw});
      if (phased && m.rtsWeights)
        tr.collectives.push_back({ir::CollectiveKind::AllGather, ir::CollectiveTensors::StreamedWeights, ipu.index, w * bw});
    }
    // Distributed batch norm: per unit and micro batch, three all-reduces
    // among the group's replicas inside the passes, in fp32: the forward
    // pass's sums (and count), its squared deviations, and the backward
    // pass's two sums (and count). Replicated on the shard group, like the
    // kernels that compute them.
    if (m.replicas > 1 && m.batchNormGroup() > 1) {
      double values = 0, units = 0;
      for (int li : ipu.layers)
        for (int c : ir::batchNormChannels(p.layers[static_cast<std::size_t>(li)])) {
          values += 4.0 * c + 2;
          units += 1;
        }
      if (units > 0)
        tr.collectives.push_back({ir::CollectiveKind::AllReduce, ir::CollectiveTensors::BatchNormStatistics, ipu.index, ga * values * 4,
                                  ga * units * 3});
    }
    if (!m.optimizerStateStreaming && !phased) continue;
    ir::StreamingTraffic st;
    st.ipu = ipu.index;
    st.optimizerState = 2 * (w / rtsO) * stateBytes;
    if (phased) {
      double stash = 0;
      for (int li : ipu.layers) stash += p.layers[static_cast<std::size_t>(li)].inputElements;
      st.weights = 2 * w * bw / rtsW;
      st.gradients = w * ba / rtsO;
      st.activations = 2 * ga * stash * bc;
    }
    tr.streaming.push_back(st);
  }
  p.traffic = std::move(tr);
}

}  // namespace ipu::plan
