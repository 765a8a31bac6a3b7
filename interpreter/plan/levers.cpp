#include "interpreter/plan/levers.h"

#include <algorithm>

#include "interpreter/check/units.h"
#include "interpreter/plan/mapping_value.h"
#include "interpreter/plan/planner.h"
#include "runtime/ir/mapping_fields.h"

namespace ipu::plan {

namespace {

using Field = ir::MappingField;

double peak(const ir::PhasePlan& p) {
  double worst = 0;
  for (const auto& ipu : p.ipus) worst = std::max(worst, ipu.memory.total());
  return worst;
}

// `name: value` as the script writes the field (the table's text).
std::string written(Field f, const ir::Mapping& m) {
  const ir::MappingFieldRow& row = ir::mappingField(f);
  return std::string(row.name) + ": " + ir::fieldText(row, row.get(m));
}

}  // namespace

std::vector<Lever> leversThatFit(const check::PhaseSpec& phase, const check::MappingSpec& mapping, const ir::Mapping& settings,
                                 const ir::PhasePlan& plan, const base::SourceMap& sources, PlacementFunction* placement,
                                 LayerExpansions* expansions) {
  std::vector<Lever> out;
  const hw::Pod& pod = plan.pod;
  const bool hasState = plan.optimizer.moments > 0 || plan.precision.masterWeights;
  MappingValue base;  // the mapping as planned, placed as written
  base.settings = settings;
  auto attempt = [&](const std::string& text, const MappingValue& v, const check::PhaseSpec& ph) {
    auto spec = specOf(mapping, v);
    ir::PhasePlan p = planPhase(ph, *spec, spec->mapping, sources, nullptr, placement, expansions);
    if (p.fits) out.push_back(Lever{text, peak(p)});
    return p.fits;
  };
  auto change = [&](auto&& edit) {
    MappingValue v = base;
    edit(v.settings);
    return v;
  };
  const ir::Mapping& s = settings;
  if (hasState && !s.optimizerStateStreaming && s.phases <= 1) {
    MappingValue v = change([](ir::Mapping& m) { m.optimizerStateStreaming = true; });
    attempt(written(Field::OptimizerState, v.settings), v, phase);
  }
  if (hasState && s.replicas > 1 && !s.rtsOptimizerState && !s.optimizerStateStreaming) {
    MappingValue v = change([](ir::Mapping& m) { m.rtsOptimizerState = true; });
    attempt(written(Field::ReplicatedTensorSharding, v.settings), v, phase);
  }
  if (s.recompute == ir::Recompute::None) {
    MappingValue v = change([](ir::Mapping& m) { m.recompute = ir::Recompute::EveryLayer; });
    attempt(written(Field::Recompute, v.settings), v, phase);
  }
  const int p = std::max(1, s.pipelineIpus);
  auto balanced = [&](int ipus) {
    MappingValue v = base;
    v.placement = MappingValue::Placement::Balanced;
    v.pipelineIpus = ipus;
    auto& amp = v.settings.availableMemoryProportion;
    amp.resize(std::min<std::size_t>(1, amp.size()));
    return v;
  };
  // The same IPUs, split evenly: a hand-written pipeline often overloads one IPU.
  if (p > 1 && mapping.pipelineKind != check::MappingSpec::PipelineKind::Balanced &&
      static_cast<std::size_t>(p) <= plan.layers.size())
    attempt("pipeline: balanced(" + std::to_string(p) + ")", balanced(p), phase);
  // Gradient accumulators kept in fp32 beside fp16 compute: the precision's
  // `accumulators: fp16` halves them.
  if (phase.precision.accumulators == ir::DType::FP32 && phase.precision.compute == ir::DType::FP16) {
    check::PhaseSpec variant = phase;
    variant.precision.accumulators = ir::DType::FP16;
    const std::string& name = phase.precision.name;
    attempt(name.empty() ? "accumulators: fp16" : "precision: " + name + " with { accumulators: fp16 }", base, variant);
  }
  const long long deeper = 2LL * p * s.shard * s.replicas;
  if (deeper <= pod.ipus() && static_cast<std::size_t>(2 * p) <= plan.layers.size())
    attempt("pipeline: balanced(" + std::to_string(2 * p) + ")", balanced(2 * p), phase);
  if (2LL * s.shard * p * s.replicas <= pod.ipus()) {
    MappingValue v = change([](ir::Mapping& m) { m.shard *= 2; });
    attempt(written(Field::Shard, v.settings), v, phase);
  }
  for (int k = std::max(2, s.phases * 2); k <= 256; k *= 2) {
    MappingValue v = change([k](ir::Mapping& m) { m.phases = k; });
    if (attempt(written(Field::Phases, v.settings), v, phase)) break;
  }
  if (out.empty() && hasState && !s.optimizerStateStreaming && s.phases <= 1) {
    MappingValue v = change([](ir::Mapping& m) {
      m.optimizerStateStreaming = true;
      m.recompute = ir::Recompute::EveryLayer;
    });
    attempt(written(Field::OptimizerState, v.settings) + ", " + written(Field::Recompute, v.settings), v, phase);
  }
  return out;
}

namespace {
constexpr const char* kFitsWith = "it fits with ";
}  // namespace

std::vector<std::string> leverTextsIn(const std::string& help) {
  std::vector<std::string> out;
  if (help.rfind(kFitsWith, 0) != 0) return out;
  // Each lever is written in backticks; nothing else of the help is.
  for (std::size_t at = help.find('`'); at != std::string::npos;) {
    const std::size_t end = help.find('`', at + 1);
    if (end == std::string::npos) break;
    out.push_back(help.substr(at + 1, end - at - 1));
    at = help.find('`', end + 1);
  }
  return out;
}

std::string leversHelp(const std::vector<Lever>& levers) {
  if (levers.empty())
    return "no single change to the mapping makes it fit: combine offload, replicated tensor sharding, recomputation, "
           "a deeper pipeline or phased execution, or use a smaller micro batch";
  std::string help = kFitsWith;
  for (std::size_t i = 0; i < levers.size() && i < 4; ++i)
    help += (i ? ", or " : "") + std::string("`") + levers[i].text + "` (peak " + check::formatBytes(levers[i].peakBytes) + ")";
  return help;
}

}  // namespace ipu::plan
