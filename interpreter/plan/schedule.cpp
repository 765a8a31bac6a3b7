#include "interpreter/plan/schedule.h"

#include <algorithm>

#include "runtime/ir/phased.h"

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

  const std::vector<ir::PhaseSegment>& segments = ctx.segments;   // planMemory's (empty unless phased)
  const std::vector<double> segmentParameters = ir::segmentsParameters(p, segments, m.shard);
  // Phased: what the segment runs of each pipeline IPU load and accumulate
  // (runtime/ir/phased.h), the same for every IPU of its shard group.
  struct Loads {
    double loaded = 0, accumulated = 0;
  };
  std::vector<Loads> loads;   // per pipeline IPU that has segments
  for (const auto& seg : segments) loads.resize(std::max(loads.size(), static_cast<std::size_t>(seg.ipu) + 1));
  for (std::size_t q = 0; q < loads.size(); ++q)
    for (const auto& run : ir::segmentRuns(segments, static_cast<int>(q))) {
      const double n = segmentParameters[static_cast<std::size_t>(run.segment)];
      loads[q].loaded += n;
      if (run.backward) loads[q].accumulated += n;
    }
  for (const auto& ipu : p.ipus) {
    const double w = ipu.parameters;
    const Loads here = ipu.ipu >= 0 && static_cast<std::size_t>(ipu.ipu) < loads.size() ? loads[static_cast<std::size_t>(ipu.ipu)] : Loads{};
    const double loaded = here.loaded, accumulated = here.accumulated;
    if (m.replicas > 1) {
      // RTS of the optimizer state: each replica updates its share, so the
      // gradients are reduce-scattered and the updated weights all-gathered
      // (unless the weights live sharded in Streaming Memory, where each
      // replica writes back its own share and gathers them as they load).
      tr.collectives.push_back({m.rtsOptimizerState ? ir::CollectiveKind::ReduceScatter : ir::CollectiveKind::AllReduce,
                                ir::CollectiveTensors::Gradients, ipu.index, w * ba});
      if (m.rtsOptimizerState && !(phased && m.rtsWeights))
        tr.collectives.push_back({ir::CollectiveKind::AllGather, ir::CollectiveTensors::UpdatedWeights, ipu.index, w * bw});
      if (phased && m.rtsWeights)
        tr.collectives.push_back({ir::CollectiveKind::AllGather, ir::CollectiveTensors::StreamedWeights, ipu.index, loaded * bw});
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
    // Tensor sharding (Megatron's split, among the t IPUs of the shard group,
    // every IPU of it entering the same buffers): each shardable layer's
    // partial output is summed by an all-reduce in its forward pass, and again
    // in its recomputation when there is one; its partial input gradient by
    // one in its backward pass. Both are counted at the output's size: that is
    // the input gradient's for the blocks sharding splits (attention, FFN:
    // residual blocks), and what the estimate has always priced for the rest.
    if (m.shard > 1) {
      double outputs = 0, layers = 0;
      for (int li : ipu.layers) {
        const ir::Layer& l = p.layers[static_cast<std::size_t>(li)];
        if (!l.shardable) continue;
        outputs += l.outputElements;
        layers += 1;
      }
      const double forwards = m.recompute == ir::Recompute::None ? 1 : 2;
      if (layers > 0) {
        tr.collectives.push_back({ir::CollectiveKind::AllReduce, ir::CollectiveTensors::ShardActivations, ipu.index,
                                  ga * forwards * outputs * bc, ga * forwards * layers});
        tr.collectives.push_back({ir::CollectiveKind::AllReduce, ir::CollectiveTensors::ShardGradients, ipu.index, ga * outputs * bc,
                                  ga * layers});
      }
    }
    if (!m.optimizerStateStreaming && !phased) continue;
    ir::StreamingTraffic st;
    st.ipu = ipu.index;
    st.optimizerState = 2 * (w / rtsO) * stateBytes;
    if (phased) {
      // The stash goes out and comes back for the backward pass, as the
      // memory plan keeps it in Streaming Memory (plan_memory.cpp): with
      // recomputation, each layer's input (the first layer's input is the
      // micro batch, from the host); without, every activation each layer
      // keeps for its backward pass (its share under tensor sharding). Between
      // two segments of a stage the activation also comes back for the
      // forward run, and its gradient goes out and back.
      double once = 0, between = 0;
      for (const auto& seg : segments) {
        if (seg.ipu != ipu.ipu) continue;
        for (int li : seg.layers) once += ir::stashedElements(p, li, m.recompute, m.shard);
        const bool stageFirst = &seg == &segments.front() || (&seg - 1)->stage != seg.stage;
        if (!stageFirst) between += p.layers[static_cast<std::size_t>(seg.layers.front())].inputElements;
      }
      st.weights = loaded * bw / rtsW;
      st.gradients = accumulated * ba;
      st.activations = ga * (2 * once + 3 * between) * bc;
      // The update streams each parameter's weights and reduced gradient
      // through the chip (its share with RTS of the optimizer state) and
      // writes the weights back (its share with RTS of the weights).
      st.update = (w / rtsO) * (bw + ba) + w * bw / rtsW;
    }
    tr.streaming.push_back(st);
  }
  p.traffic = std::move(tr);
}

}  // namespace ipu::plan
