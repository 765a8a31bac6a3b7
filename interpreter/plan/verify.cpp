#include "interpreter/plan/verify.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "interpreter/check/units.h"
#include "interpreter/plan/codes.h"
#include "interpreter/plan/planner.h"
#include "runtime/base/invariant.h"

namespace ipu::plan {

namespace {

using check::formatBytes;
using check::formatPercent;

double peak(const ir::PhasePlan& p) {
  double worst = 0;
  for (const auto& ipu : p.ipus) worst = std::max(worst, ipu.memory.total());
  return worst;
}

struct Lever {
  std::string text;  // how to write it in the script
  double peakBytes;
};

// Try each change a user could make to the mapping, alone, and keep those
// after which every IPU fits. The plan is re-run for each: the levers are
// measured, not guessed.
std::vector<Lever> tryLevers(const PhaseContext& ctx) {
  std::vector<Lever> out;
  const ir::Mapping& base = ctx.settings;
  const hw::Pod& pod = ctx.plan.pod;
  const bool hasState = ctx.plan.optimizer.moments > 0 || ctx.plan.precision.masterWeights;
  auto attempt = [&](const std::string& text, ir::Mapping settings, const check::MappingSpec* mapping = nullptr,
                     const check::PhaseSpec* phase = nullptr) {
    ir::PhasePlan p = planPhase(phase ? *phase : ctx.phase, mapping ? *mapping : ctx.mapping, settings, ctx.sources,
                                nullptr, ctx.placement, ctx.expansions);
    if (p.fits) out.push_back(Lever{text, peak(p)});
    return p.fits;
  };
  if (hasState && !base.optimizerStateStreaming && base.phases <= 1) {
    ir::Mapping s = base;
    s.optimizerStateStreaming = true;
    attempt("optimizer_state: streaming", s);
  }
  if (hasState && base.replicas > 1 && !base.rtsOptimizerState && !base.optimizerStateStreaming) {
    ir::Mapping s = base;
    s.rtsOptimizerState = true;
    attempt("replicated_tensor_sharding: optimizer_state", s);
  }
  if (base.recompute == ir::Recompute::None) {
    ir::Mapping s = base;
    s.recompute = ir::Recompute::EveryLayer;
    attempt("recompute: every_layer", s);
  }
  int p = std::max(1, base.pipelineIpus);
  // The same IPUs, split evenly: a hand-written pipeline often overloads one IPU.
  if (p > 1 && ctx.mapping.pipelineKind != check::MappingSpec::PipelineKind::Balanced &&
      static_cast<std::size_t>(p) <= ctx.plan.layers.size()) {
    check::MappingSpec variant = ctx.mapping;
    variant.pipelineKind = check::MappingSpec::PipelineKind::Balanced;
    ir::Mapping s = base;
    s.availableMemoryProportion.resize(std::min<std::size_t>(1, s.availableMemoryProportion.size()));
    attempt("pipeline: balanced(" + std::to_string(p) + ")", s, &variant);
  }
  // Gradient accumulators kept in fp32 beside fp16 compute: the precision's
  // `accumulators: fp16` halves them.
  if (ctx.phase.precision.accumulators == ir::DType::FP32 && ctx.phase.precision.compute == ir::DType::FP16) {
    check::PhaseSpec variant = ctx.phase;
    variant.precision.accumulators = ir::DType::FP16;
    const std::string& name = ctx.phase.precision.name;
    attempt(name.empty() ? "accumulators: fp16" : "precision: " + name + " with { accumulators: fp16 }", base, nullptr,
            &variant);
  }
  long long deeper = 2LL * p * base.shard * base.replicas;
  if (deeper <= pod.ipus() && static_cast<std::size_t>(2 * p) <= ctx.plan.layers.size()) {
    check::MappingSpec variant = ctx.mapping;
    variant.pipelineKind = check::MappingSpec::PipelineKind::Balanced;
    ir::Mapping s = base;
    s.pipelineIpus = 2 * p;
    s.availableMemoryProportion.resize(std::min<std::size_t>(1, s.availableMemoryProportion.size()));
    attempt("pipeline: balanced(" + std::to_string(2 * p) + ")", s, &variant);
  }
  if (2LL * base.shard * p * base.replicas <= pod.ipus()) {
    ir::Mapping s = base;
    s.shard = base.shard * 2;
    attempt("shard: " + std::to_string(s.shard), s);
  }
  for (int k = std::max(2, base.phases * 2); k <= 256; k *= 2) {
    ir::Mapping s = base;
    s.phases = k;
    if (attempt("phases: " + std::to_string(k), s)) break;
  }
  if (out.empty() && hasState && !base.optimizerStateStreaming && base.phases <= 1) {
    ir::Mapping s = base;
    s.optimizerStateStreaming = true;
    s.recompute = ir::Recompute::EveryLayer;
    attempt("optimizer_state: streaming, recompute: every_layer", s);
  }
  return out;  // in the order tried: the least disruptive changes first
}

std::string largestComponents(const ir::MemoryBreakdown& m) {
  std::vector<std::pair<double, std::string>> parts = {
      {m.weights, "weights"},         {m.optimizerState, "optimizer state"}, {m.gradientAccumulators, "gradient accumulators"},
      {m.activations, "activations"}, {m.code, "code"},                       {m.exchange, "exchange buffers"},
      {m.temporaries, "temporaries"}};
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string s;
  for (std::size_t i = 0; i < 3; ++i) s += (i ? ", " : "") + parts[i].second + " " + formatBytes(parts[i].first);
  return s;
}

}  // namespace

void verifyPlan(PhaseContext& ctx) {
  ir::PhasePlan& p = ctx.plan;
  // Invariants of the lowering: failures here are bugs, not user errors.
  for (const auto& l : p.layers)
    IPU_INVARIANT(l.ipu >= 0 && l.ipu < std::max(1, ctx.settings.pipelineIpus), "every layer is placed on one of the phase's pipeline IPUs");
  IPU_INVARIANT(p.ipus.size() == static_cast<std::size_t>(std::max(1, ctx.settings.shard) * std::max(1, ctx.settings.pipelineIpus)),
                "the plan has one IPU entry per pipeline IPU and shard");
  if (ctx.diags == nullptr) return;
  // Without the placement (a Lua function that failed) there is nothing to judge.
  if (ctx.placementFailed) return;
  base::Diagnostics& diags = *ctx.diags;

  // Weights shared with a layer on another IPU are duplicated.
  for (const auto& l : p.layers) {
    if (l.tiedTo.empty()) continue;
    for (const auto& other : p.layers)
      if ((other.name == l.tiedTo || other.name.rfind(l.tiedTo + ".", 0) == 0) && other.ipu != l.ipu) {
        double bytes = l.tiedParams / std::max(1, ctx.settings.shard) * ir::bytesOf(p.precision.weights);
        base::Span at = ctx.mapping.spanOf("pipeline");
        int index = static_cast<int>(&l - p.layers.data());
        for (const auto& st : ctx.mapping.stages)
          if (std::find(st.leaves.begin(), st.leaves.end(), index) != st.leaves.end()) at = st.span;
        diags.warning(code::kTiedApart, at,
                      "`" + l.name + "` shares its weights with `" + other.name + "` but runs on IPU " +
                          std::to_string(l.ipu) + ", not IPU " + std::to_string(other.ipu) +
                          ": the shared weights are kept twice (+" + formatBytes(bytes) + " of weights alone)",
                      "place `" + l.name + "` on IPU " + std::to_string(other.ipu) + " with `" + other.name + "`");
        break;
      }
  }

  // In-Processor Memory.
  const ir::Ipu* worst = nullptr;
  int over = 0;
  for (const auto& ipu : p.ipus)
    if (ipu.memory.total() > ipu.capacityBytes) {
      ++over;
      if (worst == nullptr || ipu.memory.total() > worst->memory.total()) worst = &ipu;
    }
  std::string where = "phase `" + p.name + "` of mapping `" + ctx.mapping.name + "`";
  if (worst != nullptr) {
    double need = worst->memory.total(), cap = worst->capacityBytes;
    std::string ipuName = "IPU " + std::to_string(worst->index);
    base::Span at = ctx.mapping.spanOf("pipeline");
    for (const auto& st : ctx.mapping.stages)
      if (st.ipu == worst->ipu) {
        at = st.span;
        break;
      }
    std::ostringstream msg;
    msg << ipuName << " needs " << formatBytes(need) << " of In-Processor Memory, " << formatBytes(need - cap) << " ("
        << formatPercent((need - cap) / cap) << ") more than the " << p.pod.machine.chip.name << "'s "
        << formatBytes(cap) << " (" << where << ")";
    std::vector<Lever> levers = tryLevers(ctx);
    std::string help;
    if (!levers.empty()) {
      help = "it fits with ";
      for (std::size_t i = 0; i < levers.size() && i < 4; ++i)
        help += (i ? ", or " : "") + std::string("`") + levers[i].text + "` (peak " + formatBytes(levers[i].peakBytes) + ")";
    } else {
      help = "no single change to the mapping makes it fit: combine offload, replicated tensor sharding, recomputation, "
             "a deeper pipeline or phased execution, or use a smaller micro batch";
    }
    auto& d = diags.error(code::kDoesNotFit, at, msg.str(), help);
    d.addNote({{}, "largest on " + ipuName + ": " + largestComponents(worst->memory)});
    if (over > 1) d.addNote({{}, std::to_string(over - 1) + " more IPU" + (over > 2 ? "s do" : " does") + " not fit either"});
  }

  // Streaming Memory.
  for (const auto& ipu : p.ipus)
    if (ipu.streamingBytes > ipu.streamingCapacityBytes) {
      diags.error(code::kStreamingOverflow, ctx.mapping.span,
                  "IPU " + std::to_string(ipu.index) + " keeps " + formatBytes(ipu.streamingBytes) +
                      " in Streaming Memory, more than its share " + formatBytes(ipu.streamingCapacityBytes) + " of `" +
                      p.pod.machine.name + "`'s " + formatBytes(p.pod.machine.streamingMemoryBytes) + " (" + where + ")",
                  ctx.settings.replicas > 1 && !ctx.settings.rtsOptimizerState
                      ? "shard the state across replicas with `replicated_tensor_sharding: optimizer_state`"
                      : "use more IPUs per replica (a deeper pipeline or `shard: t`), or a machine with more DDR");
      break;
    }
}

}  // namespace ipu::plan
