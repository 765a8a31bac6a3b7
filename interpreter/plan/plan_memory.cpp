#include "interpreter/plan/plan_memory.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace ipu::plan {

namespace {

int stashDepth(int stage, int stages) { return stages > 1 ? 2 * (stages - 1 - stage) + 1 : 1; }

// The largest sub-graph's parameters when `weights` (per layer, in order) are
// split into `k` phases. Up to one phase per layer, phases are contiguous runs
// of layers; beyond that, layers are serialised into slices (matmuls split
// along their output), in proportion to their size.
double maxPhaseWeights(const std::vector<double>& weights, int k) {
  if (weights.empty() || k <= 1) {
    double sum = 0;
    for (double w : weights) sum += w;
    return sum;
  }
  const int n = static_cast<int>(weights.size());
  double total = 0;
  for (double w : weights) total += w;
  if (k >= n) {
    double worst = 0;
    for (double w : weights) {
      double slices = std::max(1.0, std::ceil(k * w / std::max(total, 1.0)));
      worst = std::max(worst, w / slices);
    }
    return worst;
  }
  // Smallest capacity that splits the run into at most k contiguous parts.
  double lo = *std::max_element(weights.begin(), weights.end()), hi = total;
  for (int iter = 0; iter < 60 && hi - lo > 1e-6 * hi; ++iter) {
    double mid = (lo + hi) / 2, run = 0;
    int parts = 1;
    for (double w : weights) {
      if (run + w > mid) {
        ++parts;
        run = 0;
      }
      run += w;
    }
    if (parts <= k) hi = mid;
    else lo = mid;
  }
  return hi;
}

}  // namespace

ir::MemoryBreakdown ipuMemory(const PhaseContext& ctx, const IpuLoad& load, double& streamingBytes) {
  const ir::PhasePlan& p = ctx.plan;
  const ir::Mapping& m = ctx.settings;
  const ir::Precision& prec = p.precision;
  const double t = std::max(1, m.shard);
  const double r = std::max(1, m.replicas);
  const double bw = ir::bytesOf(prec.weights), bc = ir::bytesOf(prec.compute);
  const double ba = ir::bytesOf(prec.accumulators), bo = ir::bytesOf(prec.optimizerState);
  const double bp = ir::bytesOf(prec.partials);
  const double stateBytesPerParam = p.optimizer.moments * bo + (prec.masterWeights ? 4.0 : 0.0);
  const double rtsO = m.rtsOptimizerState ? r : 1, rtsW = m.rtsWeights ? r : 1;
  const bool phased = m.phases > 1 || m.weightsStreaming;

  std::set<int> here;
  for (const auto& ls : load.layerStages) here.insert(ls.first);

  // Parameters per IPU of the shard group. A layer tied to one on another IPU
  // keeps its own copy of the shared weights.
  std::vector<double> layerWeights;
  double W = 0, largestLayerW = 0;
  for (const auto& [li, stage] : load.layerStages) {
    const ir::Layer& l = p.layers[static_cast<std::size_t>(li)];
    double w = l.params;
    if (!l.tiedTo.empty()) {
      bool partnerHere = false;
      for (int other : here) {
        const std::string& name = p.layers[static_cast<std::size_t>(other)].name;
        partnerHere |= name == l.tiedTo || name.rfind(l.tiedTo + ".", 0) == 0 || name.rfind(l.tiedTo + "[", 0) == 0;
      }
      if (!partnerHere) w += l.tiedParams;
    }
    w = l.shardable ? w / t : w;
    layerWeights.push_back(w);
    W += w;
    largestLayerW = std::max(largestLayerW, w);
  }

  ir::MemoryBreakdown mem;
  streamingBytes = 0;
  double resident = W;  // parameters whose weights and gradients are on chip
  if (phased) {
    int k = m.phases > 1 ? m.phases : static_cast<int>(layerWeights.size());
    resident = maxPhaseWeights(layerWeights, k);
    mem.weights = 2 * resident * bw;  // the running sub-graph, and the next one prefetched
    mem.gradientAccumulators = resident * ba;
    streamingBytes += W * bw / rtsW + W * ba / rtsO;
  } else {
    mem.weights = W * bw;
    mem.gradientAccumulators = W * ba;
  }

  const double state = W * stateBytesPerParam / rtsO;
  double staging = 0;
  if (m.optimizerStateStreaming || phased) {
    // State streams through a staging buffer one layer (or slice) at a time,
    // during the optimizer update, when no activation is live.
    staging = (phased ? resident : largestLayerW) * stateBytesPerParam / rtsO;
    streamingBytes += state;
  } else {
    mem.optimizerState = state;
  }

  // Activations: micro batches in flight between each stage's forward and
  // backward pass keep their stash; recomputation keeps only checkpoints.
  double stash = 0, working = 0;
  std::map<int, double> stageWorking;
  std::map<int, int> firstOfStage;
  for (const auto& [li, stage] : load.layerStages)
    if (!firstOfStage.count(stage) || li < firstOfStage[stage]) firstOfStage[stage] = li;
  for (const auto& [li, stage] : load.layerStages) {
    const ir::Layer& l = p.layers[static_cast<std::size_t>(li)];
    const double depth = stashDepth(stage, load.stageCount);
    const double act = l.shardable ? l.activationElements / t : l.activationElements;
    switch (m.recompute) {
      case ir::Recompute::None:
        stash += depth * act;
        break;
      case ir::Recompute::EveryLayer:
        stash += depth * l.inputElements;
        working = std::max(working, act);
        break;
      case ir::Recompute::Stage:
        if (firstOfStage[stage] == li) stash += depth * l.inputElements;
        stageWorking[stage] += act;
        break;
    }
  }
  for (const auto& [_, w] : stageWorking) working = std::max(working, w);
  if (phased) {
    // Phased execution keeps the stash in Streaming Memory; on chip are the
    // running sub-graph's working set and its boundary buffers.
    double boundary = 0;
    for (const auto& [li, stage] : load.layerStages)
      boundary = std::max(boundary, p.layers[static_cast<std::size_t>(li)].inputElements);
    double work = 0;
    for (const auto& [li, stage] : load.layerStages) {
      const ir::Layer& l = p.layers[static_cast<std::size_t>(li)];
      work = std::max(work, l.shardable ? l.activationElements / t : l.activationElements);
    }
    mem.activations = (work + 2 * boundary) * bc;
    streamingBytes += stash * bc;
  } else {
    mem.activations = (stash + working) * bc;
  }

  // Code: per layer instance (vertex state and exchange programs differ per
  // instance); in phased execution one sub-graph's code serves every phase,
  // so each distinct layer definition is counted once.
  mem.code = p.pod.machine.chip.codeBaseBytes;
  std::set<std::string> distinct;
  for (const auto& [li, stage] : load.layerStages) {
    const ir::Layer& l = p.layers[static_cast<std::size_t>(li)];
    if (phased) {
      std::string key = l.definition;
      for (const auto& a : l.attributes) key += "|" + a.name + "=" + std::to_string(a.number) + a.text;
      if (!distinct.insert(key).second) continue;
    }
    mem.code += l.codeBytes;
  }

  // Exchange: send/receive buffers for activations and gradients at stage
  // boundaries; tensor sharding adds buffers for its collectives.
  std::set<int> stagesHere;
  for (const auto& [li, stage] : load.layerStages) stagesHere.insert(stage);
  double boundaryElements = 0;
  for (int s : stagesHere) {
    int first = -1, last = -1;
    for (const auto& [li, stage] : load.layerStages)
      if (stage == s) {
        first = first < 0 ? li : std::min(first, li);
        last = std::max(last, li);
      }
    if (s > 0) boundaryElements += p.layers[static_cast<std::size_t>(first)].inputElements;
    if (s < load.stageCount - 1) boundaryElements += p.layers[static_cast<std::size_t>(last)].outputElements;
  }
  // Activations and their gradients cross a boundary at different times of a
  // pipeline cycle and share its buffer.
  mem.exchange = boundaryElements * bc;
  if (t > 1) {
    double largestOut = 0;
    for (const auto& [li, stage] : load.layerStages)
      largestOut = std::max(largestOut, p.layers[static_cast<std::size_t>(li)].outputElements);
    mem.exchange += largestOut * bc;
  }

  // Temporaries: matmul/convolution partials, capped by availableMemoryProportion.
  double amp = m.availableMemoryProportion.empty() ? 0.6
               : m.availableMemoryProportion.size() == 1
                   ? m.availableMemoryProportion[0]
                   : m.availableMemoryProportion[std::min<std::size_t>(static_cast<std::size_t>(std::max(0, load.ipu)),
                                                                       m.availableMemoryProportion.size() - 1)];
  double workspace = 0;
  for (const auto& [li, stage] : load.layerStages) {
    const ir::Layer& l = p.layers[static_cast<std::size_t>(li)];
    workspace = std::max(workspace, (l.shardable ? l.workspaceElements / t : l.workspaceElements) * bp);
  }
  mem.temporaries = std::min(workspace, amp * p.pod.machine.chip.memoryBytes);

  // Liveness: the forward/backward passes' transients (activations, exchange
  // buffers, temporaries) and the optimizer update's staging buffer are never
  // live together; only the staging buffer's excess over them adds to the peak.
  double transient = mem.activations + mem.exchange + mem.temporaries;
  mem.optimizerState += std::max(0.0, staging - transient);
  return mem;
}

void planMemory(PhaseContext& ctx) {
  ir::PhasePlan& p = ctx.plan;
  const double capacity = p.pod.machine.chip.memoryBytes;
  const double streamingCapacity = p.pod.streamingBytesPerIpu();
  const int S = static_cast<int>(p.stages.size());
  int k = ctx.settings.phases > 1 ? ctx.settings.phases : 1;
  p.fits = true;
  for (auto& ipu : p.ipus) {
    IpuLoad load;
    load.ipu = ipu.ipu;
    load.stageCount = S;
    for (int li : ipu.layers) load.layerStages.emplace_back(li, p.layers[static_cast<std::size_t>(li)].stage);
    double streaming = 0;
    ipu.memory = ipuMemory(ctx, load, streaming);
    ipu.capacityBytes = capacity;
    ipu.streamingBytes = streaming;
    ipu.streamingCapacityBytes = streamingCapacity;
    ipu.fits = ipu.memory.total() <= capacity && streaming <= streamingCapacity;
    ipu.phases = k;
    p.fits = p.fits && ipu.fits;
  }
  // Phase index of each layer on its IPU (contiguous split by weights).
  if (k > 1)
    for (auto& ipu : p.ipus) {
      if (ipu.shard != 0) continue;
      double total = 0;
      for (int li : ipu.layers) total += p.layers[static_cast<std::size_t>(li)].params;
      double run = 0;
      for (int li : ipu.layers) {
        auto& l = p.layers[static_cast<std::size_t>(li)];
        l.phase = total > 0 ? std::min(k - 1, static_cast<int>(run / total * k)) : 0;
        run += l.params;
      }
    }
}

}  // namespace ipu::plan
