#include "interpreter/plan/place_layers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

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
  const int chain = std::min(tailStart(p), n);  // layers [0, chain) are split; [chain, n) follow their tie
  const int parts = std::min(ipus, std::max(1, chain));
  std::vector<double> w(static_cast<std::size_t>(chain));
  double total = 0;
  for (int i = 0; i < chain; ++i) total += w[static_cast<std::size_t>(i)] = work(p.layers[static_cast<std::size_t>(i)], recompute);
  std::vector<int> tail;
  double tailWork = 0;
  for (int i = chain; i < n; ++i) {
    tail.push_back(i);
    tailWork += work(p.layers[static_cast<std::size_t>(i)], recompute);
  }
  const int stageCount = parts + (tail.empty() ? 0 : 1);
  const double capacity = p.pod.machine.chip.memoryBytes;

  // Greedy: fill each IPU in order with as many layers as the cost bound and
  // its memory allow. Stage k keeps 2(S-1-k)+1 micro batches in flight, so the
  // stages fill in order; with fewer parts than IPUs, parts are split below,
  // which never raises a part's cost or memory.
  // Part k covering chain layers [a, b): its work (part 0 also carries the
  // tied tail), and whether it fits in memory. Both grow with b, so the
  // furthest cut a part can take is found by binary search.
  std::vector<double> prefix(static_cast<std::size_t>(chain) + 1, 0);
  for (int i = 0; i < chain; ++i) prefix[static_cast<std::size_t>(i) + 1] = prefix[static_cast<std::size_t>(i)] + w[static_cast<std::size_t>(i)];
  auto cost = [&](int k, int a, int b) { return prefix[static_cast<std::size_t>(b)] - prefix[static_cast<std::size_t>(a)] + (k == 0 ? tailWork : 0); };
  // Memory of part k = [a, b) grows with b, so for each (k, a) one
  // accumulator is grown layer by layer, on demand, until the first layer that
  // does not fit; every later question about (k, a) is answered from it. The
  // bisections below ask about the same parts many times.
  struct Growth {
    IpuMemory acc;
    int fitsTo;           // [a, fitsTo) fits
    bool stopped = false;  // adding layer fitsTo does not fit
  };
  std::vector<std::unique_ptr<Growth>> growth(static_cast<std::size_t>(parts) * static_cast<std::size_t>(chain + 1));
  // The furthest b in [a, limit] such that [a, b) fits in memory on part k.
  auto memoryFurthest = [&](int k, int a, int limit) {
    auto& g = growth[static_cast<std::size_t>(k) * static_cast<std::size_t>(chain + 1) + static_cast<std::size_t>(a)];
    if (!g) {
      g = std::make_unique<Growth>(Growth{IpuMemory(ctx, k, stageCount), a});
      if (k == 0)
        for (int t : tail) g->acc.add(t, stageCount - 1);
    }
    if (g->stopped || g->fitsTo >= limit) return std::min(g->fitsTo, limit);
    // One breakdown for the whole extension when it fits (the usual case),
    // else a bisection for the first layer that does not.
    auto grown = [&](int b) {
      IpuMemory acc = g->acc;
      for (int i = g->fitsTo; i < b; ++i) acc.add(i, k);
      return acc;
    };
    IpuMemory whole = grown(limit);
    if (whole.total() <= capacity) {
      g->acc = std::move(whole);
      g->fitsTo = limit;
      return limit;
    }
    int lo = g->fitsTo, hi = limit - 1;  // [a, lo) fits, [a, hi + 1) does not
    while (lo < hi) {
      int mid = lo + (hi - lo + 1) / 2;
      if (grown(mid).total() <= capacity) lo = mid;
      else hi = mid - 1;
    }
    g->fitsTo = lo;
    g->stopped = true;
    return std::min(g->fitsTo, limit);
  };
  auto memoryFits = [&](int k, int a, int b) { return memoryFurthest(k, a, b) >= b; };
  // The furthest b in (a, limit] such that part k = [a, b) fits; a if none.
  auto furthest = [&](int k, int a, int limit, double bound, bool memoryAware) {
    int lo = a, hi = limit;  // invariant: [a, lo) is within the bound (or lo == a)
    while (lo < hi) {
      int mid = lo + (hi - lo + 1) / 2;
      if (cost(k, a, mid) <= bound) lo = mid;
      else hi = mid - 1;
    }
    return memoryAware ? memoryFurthest(k, a, lo) : lo;
  };
  // Greedy from layer `from` as part `firstPart`: each IPU in order takes as
  // many layers as the bound and its memory allow. Stage k keeps 2(S-1-k)+1
  // micro batches in flight, so later stages have more room; with fewer parts
  // than IPUs, parts are split below, which never raises a part's cost or memory.
  auto greedyFrom = [&](int from, int firstPart, double bound, bool memoryAware) {
    std::vector<int> cuts = {from};
    int i = from;
    for (int k = firstPart; i < chain; ++k) {
      if (k >= parts) return std::vector<int>{};
      int j = furthest(k, i, chain, bound, memoryAware);
      if (j == i) return std::vector<int>{};  // not even one layer fits here
      cuts.push_back(j);
      i = j;
    }
    return cuts;
  };
  auto greedy = [&](double bound, bool memoryAware) { return greedyFrom(0, 0, bound, memoryAware); };

  std::vector<int> cuts;
  for (bool memoryAware : {true, false}) {
    double hi = total + tailWork;
    if (greedy(hi, memoryAware).empty()) continue;
    double lo = 0;
    for (int it = 0; it < 60 && hi - lo > 1e-9 * hi; ++it) {
      double mid = (lo + hi) / 2;
      if (greedy(mid, memoryAware).empty()) lo = mid;
      else hi = mid;
    }
    cuts = greedy(hi, memoryAware);
    // Among partitions whose slowest IPU is as fast as possible, prefer the
    // most even: put each cut as near its ideal share of the work as the rest
    // still allows (feasibility of the rest only improves as a cut moves later).
    if (static_cast<int>(cuts.size()) - 1 == parts) {
      std::vector<int> even = {0};
      bool ok = true;
      for (int k = 0; k + 1 < parts && ok; ++k) {
        int a = even.back(), top = chain - (parts - 1 - k);
        int jmax = furthest(k, a, top, hi, memoryAware);
        double ideal = (prefix.back() + tailWork) * (k + 1) / parts - (k == 0 ? 0 : tailWork);
        int jIdeal = static_cast<int>(std::lower_bound(prefix.begin() + a + 1, prefix.begin() + top + 1, ideal) - prefix.begin());
        jIdeal = std::min(std::max(jIdeal, a + 1), jmax);
        if (jmax <= a || greedyFrom(jmax, k + 1, hi, memoryAware).empty()) {
          ok = false;
          break;
        }
        // The earliest cut at or after the ideal point that leaves a feasible
        // rest (a later cut leaves less, so feasibility is monotone).
        int low = jIdeal, up = jmax;
        while (low < up) {
          int mid = low + (up - low) / 2;
          if (greedyFrom(mid, k + 1, hi, memoryAware).empty()) low = mid + 1;
          else up = mid;
        }
        even.push_back(low);
      }
      if (ok && cost(parts - 1, even.back(), chain) <= hi && (!memoryAware || memoryFits(parts - 1, even.back(), chain))) {
        even.push_back(chain);
        cuts = even;
      }
    }
    break;
  }
  if (cuts.empty()) {  // no balanced split exists even ignoring memory: one layer each, the rest on the last
    for (int k = 0; k < parts; ++k) cuts.push_back(k);
    cuts.push_back(chain);
  }
  // Use every IPU: split the costliest parts that hold more than one layer.
  while (static_cast<int>(cuts.size()) - 1 < parts) {
    int best = -1;
    double bestCost = -1;
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      if (cuts[k + 1] - cuts[k] < 2) continue;
      double c = 0;
      for (int i = cuts[k]; i < cuts[k + 1]; ++i) c += w[static_cast<std::size_t>(i)];
      if (c > bestCost) {
        bestCost = c;
        best = static_cast<int>(k);
      }
    }
    if (best < 0) break;
    int a = cuts[static_cast<std::size_t>(best)], b = cuts[static_cast<std::size_t>(best) + 1], mid = a + 1;
    double run = 0;
    for (int i = a; i < b - 1; ++i) {
      run += w[static_cast<std::size_t>(i)];
      mid = i + 1;
      if (run >= bestCost / 2) break;
    }
    cuts.insert(cuts.begin() + best + 1, mid);
  }
  const int used = static_cast<int>(cuts.size()) - 1;
  for (int k = 0; k < used; ++k)
    for (int i = cuts[static_cast<std::size_t>(k)]; i < cuts[static_cast<std::size_t>(k) + 1]; ++i)
      p.layers[static_cast<std::size_t>(i)].ipu = k;
  for (int t : tail) p.layers[static_cast<std::size_t>(t)].ipu = 0;
  ctx.settings.pipelineIpus = used;
}

// `pipeline: lua f`: the function answers with an IPU per layer; check that
// every layer lands on an IPU the pod has for this mapping and that no IPU in
// between is left empty (an empty pipeline IPU is an idle, wasted chip).
void placeByFunction(PhaseContext& ctx) {
  ir::PhasePlan& p = ctx.plan;
  const check::MappingSpec& m = ctx.mapping;
  const int t = std::max(1, ctx.settings.shard), r = std::max(1, ctx.settings.replicas);
  const int maxIpus = std::max(1, m.pod.ipus() / (t * r));
  auto fallback = [&]() {
    for (auto& l : p.layers) l.ipu = 0;
    ctx.settings.pipelineIpus = 1;
    ctx.placementFailed = true;
  };
  if (ctx.placement == nullptr) {
    if (ctx.diags != nullptr)
      ctx.diags->error(code::kBadPlacement, m.spanOf("pipeline"),
                       "the layers cannot be placed: `lua " + m.luaFunction + "` has no Lua hooks to run in",
                       "plan the script with `ipu plan`, which loads its hooks");
    fallback();
    return;
  }
  PlacementRequest req;
  req.function = m.luaFunction;
  req.at = m.spanOf("pipeline");
  req.mapping = m.name;
  req.phase = ctx.phase.name;
  req.model = m.model != nullptr ? m.model->name : std::string();
  req.maxIpus = maxIpus;
  req.shard = t;
  req.replicas = r;
  req.chipMemoryBytes = m.pod.machine.chip.memoryBytes;
  req.layers = &p.layers;
  std::optional<std::vector<int>> ipus = ctx.placement->place(req);
  if (!ipus || ipus->size() != p.layers.size()) {
    fallback();
    return;
  }
  std::vector<int> count(static_cast<std::size_t>(maxIpus), 0);
  int used = 0;
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    const int g = (*ipus)[i];
    if (g < 0 || g >= maxIpus) {
      if (ctx.diags != nullptr)
        ctx.diags->error(code::kBadPlacement, m.spanOf("pipeline"),
                         "`" + m.luaFunction + "` puts `" + p.layers[i].name + "` on IPU " + std::to_string(g) +
                             ", but phase `" + ctx.phase.name + "` has IPUs 0 to " + std::to_string(maxIpus - 1) +
                             " for its pipeline (" + std::to_string(m.pod.ipus()) + " IPUs / (shard " +
                             std::to_string(t) + " x replicas " + std::to_string(r) + "))",
                         "return an IPU between 0 and `info.max_ipus - 1`");
      fallback();
      return;
    }
    ++count[static_cast<std::size_t>(g)];
    used = std::max(used, g + 1);
  }
  for (int g = 0; g < used; ++g)
    if (count[static_cast<std::size_t>(g)] == 0) {
      if (ctx.diags != nullptr)
        ctx.diags->error(code::kBadPlacement, m.spanOf("pipeline"),
                         "`" + m.luaFunction + "` leaves IPU " + std::to_string(g) + " without layers but uses IPU " +
                             std::to_string(used - 1) + " (phase `" + ctx.phase.name + "`)",
                         "number the IPUs it uses from 0 without gaps");
      fallback();
      return;
    }
  for (std::size_t i = 0; i < p.layers.size(); ++i) p.layers[i].ipu = (*ipus)[i];
  ctx.settings.pipelineIpus = used;
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
      placeByFunction(ctx);
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
