// Session::variantOf and Session::planVariant (variant.h).
#include <algorithm>

#include "interpreter/check/codes.h"
#include "interpreter/check/resolver.h"
#include "interpreter/hooks/lua_placement.h"
#include "interpreter/plan/expand_layers.h"
#include "interpreter/plan/planner.h"
#include "interpreter/session/session.h"

namespace ipu::session {

namespace {

bool isPowerOfTwo(long long n) { return n > 0 && (n & (n - 1)) == 0; }

// The checks Resolver::mapping makes of a mapping as written, with its codes
// and messages; false when the variant is rejected.
bool validate(const check::MappingSpec& spec, base::Diagnostics& diags) {
  const ir::Mapping& mp = spec.mapping;
  bool ok = true;
  auto atLeastOne = [&](int v, const char* field) {
    if (v >= 1) return;
    diags.error(check::code::kOutOfRange, spec.spanOf(field),
                "`" + std::string(field) + "` must be at least 1, found " + std::to_string(v));
    ok = false;
  };
  atLeastOne(mp.shard, "shard");
  atLeastOne(mp.replicas, "replicas");
  atLeastOne(mp.phases, "phases");
  if (spec.pipelineKind != check::MappingSpec::PipelineKind::Lua) atLeastOne(spec.pipelineIpus, "pipeline");
  if (!ok) return false;
  const std::size_t layers = spec.model->layers.size();
  if (spec.pipelineKind == check::MappingSpec::PipelineKind::Balanced && static_cast<std::size_t>(spec.pipelineIpus) > layers) {
    diags.error(check::code::kBalancedTooDeep, spec.spanOf("pipeline"),
                "`balanced(" + std::to_string(spec.pipelineIpus) + ")` asks for more IPUs than `" + spec.model->name +
                    "` has layers (" + std::to_string(layers) + ")",
                "use at most balanced(" + std::to_string(layers) + ")");
    return false;
  }
  const auto& amp = mp.availableMemoryProportion;
  if (amp.size() != 1 && spec.pipelineIpus > 0 && amp.size() != static_cast<std::size_t>(spec.pipelineIpus)) {
    diags.error(check::code::kAmpLength, spec.spanOf("available_memory_proportion"),
                "`available_memory_proportion` lists " + std::to_string(amp.size()) + " values for " +
                    std::to_string(spec.pipelineIpus) + " pipeline IPUs",
                "give one value, or one per IPU of the pipeline");
    ok = false;
  }
  const hw::Pod& pd = spec.pod;
  long long perReplica = static_cast<long long>(mp.shard) * std::max(1, spec.pipelineIpus);
  long long used = perReplica * mp.replicas;
  if (spec.pipelineIpus > 0 && used > pd.ipus()) {
    long long fit = pd.ipus() / std::max(1LL, perReplica);
    std::string help = fit >= 1 ? "with t = " + std::to_string(mp.shard) + " and p = " + std::to_string(spec.pipelineIpus) +
                                      ", `" + pd.name + "` holds at most " + std::to_string(fit) + " replica" +
                                      (fit == 1 ? "" : "s") + "; use `replicas: " + std::to_string(fit) + "` or a larger pod"
                                : "a replica needs " + std::to_string(perReplica) + " IPUs; use a pod with at least that many";
    diags.error(check::code::kTooManyIpus, spec.spanOf("replicas"),
                "mapping `" + spec.name + "` needs t x p x r = " + std::to_string(mp.shard) + " x " +
                    std::to_string(spec.pipelineIpus) + " x " + std::to_string(mp.replicas) + " = " + std::to_string(used) +
                    " IPUs, but `" + pd.name + "` has " + std::to_string(pd.ipus()),
                help);
    ok = false;
  } else if (spec.pipelineIpus > 0 && pd.powerOfTwoReplicas && !isPowerOfTwo(mp.replicas)) {
    long long lo = 1;
    while (lo * 2 <= mp.replicas) lo *= 2;
    diags.error(check::code::kReplicasPowerOfTwo, spec.spanOf("replicas"),
                "`replicas: " + std::to_string(mp.replicas) + "` is not a power of two; `" + pd.name +
                    "` runs replicas in rings of 1, 2, 4, 8, ...",
                "use `replicas: " + std::to_string(lo) + "` or `replicas: " + std::to_string(lo * 2) + "`");
    ok = false;
  }
  // A variant with other replicas keeps the base's batch-norm groups.
  if (mp.batchNormReplicas > 1 && mp.replicas % mp.batchNormReplicas != 0) {
    diags.error(check::code::kBatchNormReplicas, spec.spanOf("batch_norm_replicas"),
                "`batch_norm_replicas: " + std::to_string(mp.batchNormReplicas) + "` does not divide the variant's " +
                    std::to_string(mp.replicas) + " replicas",
                "batch norm's statistics span groups of consecutive replicas; choose replicas it divides, or declare `all`");
    ok = false;
  }
  return ok;
}

}  // namespace

MappingVariant Session::variantOf(std::size_t run, std::size_t phase) const {
  MappingVariant v;
  if (program_ == nullptr || run >= program_->runs.size() || phase >= program_->runs[run].phases.size()) return v;
  const check::PhaseSpec& ph = program_->runs[run].phases[phase];
  const ir::Mapping& mp = ph.mapping->mapping;
  v.placement = MappingVariant::Placement::AsWritten;
  v.pipelineIpus = ph.mapping->pipelineIpus;
  v.shard = mp.shard;
  v.replicas = mp.replicas;
  v.phases = mp.phases;
  v.recompute = mp.recompute;
  v.optimizerStateStreaming = mp.optimizerStateStreaming;
  v.weightsStreaming = mp.weightsStreaming;
  v.rtsWeights = mp.rtsWeights;
  v.rtsOptimizerState = mp.rtsOptimizerState;
  v.availableMemoryProportion = mp.availableMemoryProportion;
  // The two (or three) batch figures the script gave.
  const ir::Batch& b = ph.batch;
  if (b.derived != ir::DerivedBatch::MicroBatch) v.batch.microBatch = b.microBatch;
  if (b.derived != ir::DerivedBatch::GradientAccumulation) v.batch.gradientAccumulation = b.gradientAccumulation;
  if (b.derived != ir::DerivedBatch::GlobalBatch) v.batch.globalBatch = b.globalBatch;
  return v;
}

PlannedVariant Session::planVariant(const MappingVariant& v, std::size_t run, std::size_t phase, Detail detail) {
  PlannedVariant out;
  if (program_ == nullptr || checker_ == nullptr || run >= program_->runs.size() ||
      phase >= program_->runs[run].phases.size()) {
    out.diagnostics.error(check::code::kNothingToRun, {}, "no checked training phase to plan a variant of",
                          "check a script that declares a training first (Session::check)");
    return out;
  }
  const check::PhaseSpec& base = program_->runs[run].phases[phase];
  auto spec = std::make_shared<check::MappingSpec>(*base.mapping);
  switch (v.placement) {
    case MappingVariant::Placement::AsWritten: break;
    case MappingVariant::Placement::Balanced:
      spec->pipelineKind = check::MappingSpec::PipelineKind::Balanced;
      spec->pipelineIpus = v.pipelineIpus;
      spec->stages.clear();
      break;
    case MappingVariant::Placement::Single:
      spec->pipelineKind = check::MappingSpec::PipelineKind::Single;
      spec->pipelineIpus = 1;
      spec->stages.clear();
      break;
  }
  ir::Mapping& mp = spec->mapping;
  mp.shard = v.shard;
  mp.replicas = v.replicas;
  mp.phases = v.phases;
  mp.recompute = v.recompute;
  mp.optimizerStateStreaming = v.optimizerStateStreaming;
  mp.weightsStreaming = v.weightsStreaming;
  mp.rtsWeights = v.rtsWeights;
  mp.rtsOptimizerState = v.rtsOptimizerState;
  mp.pipelineIpus = spec->pipelineIpus;
  mp.pipelineKind = spec->pipelineKind;
  if (!v.availableMemoryProportion.empty()) mp.availableMemoryProportion = v.availableMemoryProportion;
  if (!validate(*spec, out.diagnostics)) return out;

  ir::Batch batch;
  check::BatchProblem problem = check::deriveBatch(v.batch, mp.replicas, base.name, batch);
  if (problem.code != nullptr) {
    out.diagnostics.error(problem.code, base.span, problem.message, problem.help);
    return out;
  }
  check::PhaseSpec ph = base;
  ph.mapping = spec;
  if (!layerCosts_) layerCosts_ = std::make_unique<check::LayerCostCache>();
  if (!layerExpansions_) layerExpansions_ = std::make_unique<plan::LayerExpansions>();
  const std::size_t before = diags_.all().size();
  check::Resolver resolver(checker_->evaluator());
  bool derived = resolver.rederive(ph, batch, *layerCosts_);
  out.diagnostics = diags_.splitOff(before);
  if (!derived) return out;
  out.plan = plan::planPhase(ph, *spec, spec->mapping, sources_, detail == Detail::Full ? &out.diagnostics : nullptr,
                             placement_.get(), layerExpansions_.get());
  out.ok = true;
  return out;
}

}  // namespace ipu::session
