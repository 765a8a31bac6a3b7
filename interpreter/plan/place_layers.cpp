#include "interpreter/plan/place_layers.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "interpreter/plan/codes.h"
#include "interpreter/plan/plan_memory.h"

namespace ipu::plan {

namespace {

int indexOf(const ir::PhasePlan& p, const std::string& name) {
  for (std::size_t i = 0; i < p.layers.size(); ++i)
    if (p.layers[i].name == name) return static_cast<int>(i);
  return -1;
}

// Relative time of a layer for balancing: dense FLOPs run near peak, the
// memory-bound element-wise work is weighted as 4x slower per FLOP. (The cost
// model in runtime/cost times layers properly; the planner must not depend on
// it, and a proxy is enough to split a chain evenly.)
double work(const ir::Layer& l, bool recompute) {
  auto dense = [](const ir::Flops& f) { return f.matmul + f.attention + f.conv; };
  double d = dense(l.forward) * (recompute ? 2 : 1) + dense(l.backward);
  double e = l.forward.elementwise * (recompute ? 2 : 1) + l.backward.elementwise;
  return d + 4 * e;
}

// The heads of a model whose output projection shares the embedding go back
// on the embedding's IPU, after the last IPU, as Graphcore places BERT's MLM
// and NSP heads: returns the first layer of that tail, or n when none.
int tailStart(const ir::PhasePlan& p) {
  const int n = static_cast<int>(p.layers.size());
  for (int i = n / 2; i < n; ++i) {
    const ir::Layer& l = p.layers[static_cast<std::size_t>(i)];
    if (l.tiedTo.empty()) continue;
    int target = indexOf(p, l.tiedTo);
    if (target < 0) {
      for (int k = 0; k < n; ++k)
        if (p.layers[static_cast<std::size_t>(k)].name.rfind(l.tiedTo, 0) == 0) {
          target = k;
          break;
        }
    }
    if (target >= 0 && target < i) return i;
  }
  return n;
}

void balance(PhaseContext& ctx, int ipus) {
  ir::PhasePlan& p = ctx.plan;
  const int n = static_cast<int>(p.layers.size());
  const bool recompute = ctx.settings.recompute != ir::Recompute::None;
  const int tail = std::min(tailStart(p), n);
  const int chain = tail;  // layers [0, chain) are split; [tail, n) follow their tie
  int parts = std::min(ipus, std::max(1, chain));
  std::vector<double> prefix(static_cast<std::size_t>(chain) + 1, 0);
  for (int i = 0; i < chain; ++i) prefix[static_cast<std::size_t>(i) + 1] = prefix[static_cast<std::size_t>(i)] + work(p.layers[static_cast<std::size_t>(i)], recompute);
  double tailWork = 0;
  std::vector<int> tailLayers;
  for (int i = tail; i < n; ++i) {
    tailWork += work(p.layers[static_cast<std::size_t>(i)], recompute);
    tailLayers.push_back(i);
  }
  const bool hasTail = !tailLayers.empty();
  const int stageCount = parts + (hasTail ? 1 : 0);
  const double capacity = p.pod.machine.chip.memoryBytes;
  const double inf = std::numeric_limits<double>::infinity();

  auto partCost = [&](int k, int a, int b, bool memoryAware) {
    double c = prefix[static_cast<std::size_t>(b)] - prefix[static_cast<std::size_t>(a)];
    if (k == 0) c += tailWork;
    if (memoryAware) {
      // The part is stage k; the tail (on part 0) is the last stage.
      IpuLoad load;
      load.ipu = k;
      load.stageCount = stageCount;
      for (int i = a; i < b; ++i) load.layerStages.emplace_back(i, k);
      if (k == 0)
        for (int t : tailLayers) load.layerStages.emplace_back(t, stageCount - 1);
      double streaming = 0;
      if (ipuMemory(ctx, load, streaming).total() > capacity) return inf;
    }
    return c;
  };

  std::vector<int> cut;  // part k covers [cut[k], cut[k+1])
  for (bool memoryAware : {true, false}) {
    // best[k][i]: the least possible maximum cost of splitting [0, i) into k parts.
    std::vector<std::vector<double>> best(static_cast<std::size_t>(parts) + 1,
                                          std::vector<double>(static_cast<std::size_t>(chain) + 1, inf));
    std::vector<std::vector<int>> from(static_cast<std::size_t>(parts) + 1, std::vector<int>(static_cast<std::size_t>(chain) + 1, -1));
    best[0][0] = 0;
    for (int k = 1; k <= parts; ++k)
      for (int i = k; i <= chain - (parts - k); ++i)
        for (int j = k - 1; j < i; ++j) {
          double prev = best[static_cast<std::size_t>(k - 1)][static_cast<std::size_t>(j)];
          if (prev == inf) continue;
          double c = std::max(prev, partCost(k - 1, j, i, memoryAware));
          if (c < best[static_cast<std::size_t>(k)][static_cast<std::size_t>(i)]) {
            best[static_cast<std::size_t>(k)][static_cast<std::size_t>(i)] = c;
            from[static_cast<std::size_t>(k)][static_cast<std::size_t>(i)] = j;
          }
        }
    if (best[static_cast<std::size_t>(parts)][static_cast<std::size_t>(chain)] == inf) continue;
    cut.assign(static_cast<std::size_t>(parts) + 1, 0);
    int i = chain;
    for (int k = parts; k >= 1; --k) {
      cut[static_cast<std::size_t>(k)] = i;
      i = from[static_cast<std::size_t>(k)][static_cast<std::size_t>(i)];
    }
    cut[0] = 0;
    break;
  }
  if (cut.empty()) {  // fewer layers than parts: one per IPU
    cut.clear();
    for (int k = 0; k <= parts; ++k) cut.push_back(std::min(k, chain));
  }
  for (int k = 0; k < parts; ++k)
    for (int i = cut[static_cast<std::size_t>(k)]; i < cut[static_cast<std::size_t>(k) + 1]; ++i) p.layers[static_cast<std::size_t>(i)].ipu = k;
  for (int t : tailLayers) p.layers[static_cast<std::size_t>(t)].ipu = 0;
  ctx.settings.pipelineIpus = parts;
}

}  // namespace

void placeLayers(PhaseContext& ctx) {
  ir::PhasePlan& p = ctx.plan;
  const check::MappingSpec& m = ctx.mapping;
  switch (m.pipelineKind) {
    case check::MappingSpec::PipelineKind::Single:
      for (auto& l : p.layers) l.ipu = 0;
      ctx.settings.pipelineIpus = 1;
      break;
    case check::MappingSpec::PipelineKind::Explicit:
      for (const auto& stage : m.stages)
        for (int leaf : stage.leaves)
          if (leaf >= 0 && static_cast<std::size_t>(leaf) < p.layers.size()) p.layers[static_cast<std::size_t>(leaf)].ipu = static_cast<int>(stage.ipu);
      ctx.settings.pipelineIpus = m.pipelineIpus;
      break;
    case check::MappingSpec::PipelineKind::Balanced:
      balance(ctx, ctx.settings.pipelineIpus > 0 ? ctx.settings.pipelineIpus : m.pipelineIpus);
      break;
    case check::MappingSpec::PipelineKind::Lua:
      if (ctx.diags != nullptr)
        ctx.diags->error(code::kLuaPlacement, m.spanOf("pipeline"),
                         "placement by a Lua function (`pipeline: lua " + m.luaFunction + "`) is not available in this version",
                         "place the layers with `pipeline { ipu 0: ... }` or `balanced(p)`");
      for (auto& l : p.layers) l.ipu = 0;
      ctx.settings.pipelineIpus = 1;
      break;
  }
  p.mapping.pipelineIpus = ctx.settings.pipelineIpus;

  // Stages in data-flow order.
  p.stages.clear();
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    if (p.stages.empty() || p.stages.back().ipu != p.layers[i].ipu) {
      ir::Stage s;
      s.index = static_cast<int>(p.stages.size());
      s.ipu = p.layers[i].ipu;
      p.stages.push_back(s);
    }
    p.stages.back().layers.push_back(static_cast<int>(i));
    p.layers[i].stage = p.stages.back().index;
  }
  const int S = static_cast<int>(p.stages.size());
  for (auto& s : p.stages) s.stashDepth = S > 1 ? 2 * (S - 1 - s.index) + 1 : 1;

  // Physical IPUs of one replica: pipeline IPU g spans shards g*t .. g*t+t-1.
  p.ipus.clear();
  const int t = std::max(1, ctx.settings.shard);
  for (int g = 0; g < ctx.settings.pipelineIpus; ++g)
    for (int s = 0; s < t; ++s) {
      ir::Ipu ipu;
      ipu.index = g * t + s;
      ipu.ipu = g;
      ipu.shard = s;
      for (std::size_t i = 0; i < p.layers.size(); ++i)
        if (p.layers[i].ipu == g) ipu.layers.push_back(static_cast<int>(i));
      p.ipus.push_back(std::move(ipu));
    }
  p.ipusUsed = t * ctx.settings.pipelineIpus * ctx.settings.replicas;
}

}  // namespace ipu::plan
