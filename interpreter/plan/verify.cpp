#include "interpreter/plan/verify.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "interpreter/check/units.h"
#include "interpreter/plan/codes.h"
#include "runtime/base/invariant.h"

namespace ipu::plan {

namespace {

using check::formatBytes;
using check::formatPercent;

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
    // The help (what would make it fit) is filled in by the planner once the
    // passes are done (levers.h): finding it plans other mappings.
    auto& d = diags.error(code::kDoesNotFit, at, msg.str());
    ctx.doesNotFit = diags.all().size() - 1;
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
