#include "interpreter/plan/mapping_value.h"

#include <set>

#include "interpreter/check/mapping_rules.h"

namespace ipu::plan {

MappingValue valueOf(const check::PhaseSpec& phase) {
  MappingValue v;
  if (phase.mapping == nullptr) return v;
  v.placement = MappingValue::Placement::AsWritten;
  v.pipelineIpus = phase.mapping->pipelineIpus;
  v.settings = phase.mapping->mapping;
  // The two (or three) batch figures the script gave.
  const ir::Batch& b = phase.batch;
  if (b.derived != ir::DerivedBatch::MicroBatch) v.batch.microBatch = b.microBatch;
  if (b.derived != ir::DerivedBatch::GradientAccumulation) v.batch.gradientAccumulation = b.gradientAccumulation;
  if (b.derived != ir::DerivedBatch::GlobalBatch) v.batch.globalBatch = b.globalBatch;
  return v;
}

std::shared_ptr<check::MappingSpec> specOf(const check::MappingSpec& base, const MappingValue& v) {
  auto spec = std::make_shared<check::MappingSpec>(base);
  switch (v.placement) {
    case MappingValue::Placement::AsWritten: break;
    case MappingValue::Placement::Balanced:
      spec->pipelineKind = check::MappingSpec::PipelineKind::Balanced;
      spec->pipelineIpus = v.pipelineIpus;
      spec->stages.clear();
      break;
    case MappingValue::Placement::Single:
      spec->pipelineKind = check::MappingSpec::PipelineKind::Single;
      spec->pipelineIpus = 1;
      spec->stages.clear();
      break;
    case MappingValue::Placement::Explicit: {
      // Stages may share an IPU (the tied heads back on the embedding's): p is the IPUs used.
      std::set<int> ipus;
      spec->pipelineKind = check::MappingSpec::PipelineKind::Explicit;
      spec->stages.clear();
      for (const auto& [ipu, layers] : v.stages) {
        spec->stages.push_back(check::StageSpec{ipu, {}, layers});
        ipus.insert(ipu);
      }
      spec->pipelineIpus = static_cast<int>(ipus.size());
      break;
    }
  }
  const ir::Mapping& written = base.mapping;
  spec->mapping = v.settings;
  spec->mapping.name = written.name;
  if (spec->mapping.availableMemoryProportion.empty()) spec->mapping.availableMemoryProportion = written.availableMemoryProportion;
  spec->mapping.pipelineIpus = spec->pipelineIpus;
  spec->mapping.pipelineKind = spec->pipelineKind;
  return spec;
}

PreparedMapping prepareMapping(const check::PhaseSpec& phase, const MappingValue& value, const check::MappingSpec* base) {
  PreparedMapping out;
  if (base == nullptr) base = phase.mapping.get();
  if (base == nullptr) return out;
  auto spec = specOf(*base, value);
  if (!check::validateMapping(*spec, check::MappingRuleContext{}, out.diagnostics)) return out;
  check::BatchProblem problem = check::deriveBatch(value.batch, spec->mapping.replicas, phase.name, out.batch);
  if (problem.code != nullptr) {
    out.diagnostics.error(problem.code, phase.span, problem.message, problem.help);
    return out;
  }
  out.spec = std::move(spec);
  out.ok = true;
  return out;
}

}  // namespace ipu::plan
