#include "interpreter/check/mapping_rules.h"

#include <algorithm>
#include <string>

#include "interpreter/check/codes.h"
#include "runtime/ir/mapping_fields.h"

namespace ipu::check {

namespace {

bool isPowerOfTwo(long long n) { return n > 0 && (n & (n - 1)) == 0; }


}  // namespace

bool validateMapping(const MappingSpec& spec, const MappingRuleContext& context, base::Diagnostics& diags) {
  const ir::Mapping& mp = spec.mapping;
  const bool written = context.origin == MappingOrigin::Written;
  bool ok = true;
  // The schema admits only counts from 1 in a script; a value made by a tool is checked here.
  auto atLeastOne = [&](long long v, const char* field) {
    if (v >= 1) return;
    diags.error(code::kOutOfRange, spec.spanOf(field), "`" + std::string(field) + "` must be at least 1, found " + std::to_string(v));
    ok = false;
  };
  atLeastOne(mp.shard, ir::nameOf(ir::MappingField::Shard));
  atLeastOne(mp.replicas, ir::nameOf(ir::MappingField::Replicas));
  atLeastOne(mp.phases, ir::nameOf(ir::MappingField::Phases));
  if (spec.pipelineKind != MappingSpec::PipelineKind::Lua) atLeastOne(spec.pipelineIpus, ir::nameOf(ir::MappingField::Pipeline));
  if (!ok) return false;

  const std::size_t layers = spec.model != nullptr ? spec.model->layers.size() : 0;
  if (spec.pipelineKind == MappingSpec::PipelineKind::Balanced && static_cast<std::size_t>(spec.pipelineIpus) > layers) {
    diags.error(code::kBalancedTooDeep, spec.pipelineSpan.valid() ? spec.pipelineSpan : spec.spanOf(ir::nameOf(ir::MappingField::Pipeline)),
                "`balanced(" + std::to_string(spec.pipelineIpus) + ")` asks for more IPUs than `" +
                    (spec.model != nullptr ? spec.model->name : std::string("the model")) + "` has layers (" +
                    std::to_string(layers) + ")",
                "use at most balanced(" + std::to_string(layers) + ")");
    return false;
  }

  // Available memory proportion: one value, or one per pipeline IPU.
  const auto& amp = mp.availableMemoryProportion;
  if (amp.size() != 1 && spec.pipelineIpus > 0 && amp.size() != static_cast<std::size_t>(spec.pipelineIpus)) {
    diags.error(code::kAmpLength, spec.spanOf(ir::nameOf(ir::MappingField::AvailableMemoryProportion)),
                "`available_memory_proportion` lists " + std::to_string(amp.size()) + " values for " +
                    std::to_string(spec.pipelineIpus) + " pipeline IPUs",
                "give one value, or one per IPU of the pipeline");
    ok = false;
  }

  // t x p x r against the pod.
  const hw::Pod& pd = spec.pod;
  const long long perReplica = static_cast<long long>(mp.shard) * std::max(1, spec.pipelineIpus);
  const long long used = perReplica * mp.replicas;
  if (!context.hardwareKnown) {
    // reported where the hardware is declared
  } else if (spec.pipelineIpus > 0 && used > pd.ipus()) {
    const long long fit = pd.ipus() / std::max(1LL, perReplica);
    std::string help = fit >= 1 ? "with t = " + std::to_string(mp.shard) + " and p = " + std::to_string(spec.pipelineIpus) +
                                      ", `" + pd.name + "` holds at most " + std::to_string(fit) + " replica" +
                                      (fit == 1 ? "" : "s") + "; use `replicas: " + std::to_string(fit) + "` or a larger pod"
                                : "a replica needs " + std::to_string(perReplica) + " IPUs; use a pod with at least that many";
    diags.error(code::kTooManyIpus, spec.spanOf(ir::nameOf(ir::MappingField::Replicas)),
                "mapping `" + spec.name + "` needs t x p x r = " + std::to_string(mp.shard) + " x " +
                    std::to_string(spec.pipelineIpus) + " x " + std::to_string(mp.replicas) + " = " + std::to_string(used) +
                    " IPUs, but `" + pd.name + "` has " + std::to_string(pd.ipus()),
                help);
    ok = false;
  } else if (spec.pipelineIpus > 0) {
    if (pd.powerOfTwoReplicas && !isPowerOfTwo(mp.replicas)) {
      long long lo = 1;
      while (lo * 2 <= mp.replicas) lo *= 2;
      diags.error(code::kReplicasPowerOfTwo, spec.spanOf(ir::nameOf(ir::MappingField::Replicas)),
                  "`replicas: " + std::to_string(mp.replicas) + "` is not a power of two; `" + pd.name +
                      "` runs replicas in rings of 1, 2, 4, 8, ...",
                  "use `replicas: " + std::to_string(lo) + "` or `replicas: " + std::to_string(lo * 2) + "`");
      ok = false;
    }
    const bool warn = written && !context.fieldErrors && !spec.placementErrors;
    if (warn && pd.powerOfTwoReplicas && !isPowerOfTwo(perReplica))
      diags.warning(code::kReplicaIpusPowerOfTwo, spec.spanOf(ir::nameOf(ir::MappingField::Pipeline)),
                    "each replica uses " + std::to_string(perReplica) +
                        " IPUs, not a power of two: the partition rounds up and the rest idle",
                    "a pipeline over a power-of-two number of IPUs uses them all");
    if (warn && used < pd.ipus() && mp.replicas * 2 * perReplica <= pd.ipus() && !spec.search)  // a search chooses how many IPUs to use
      diags.warning(code::kPodUnderused, spec.spanOf(ir::nameOf(ir::MappingField::Replicas)),
                    "mapping `" + spec.name + "` uses " + std::to_string(used) + " of `" + pd.name + "`'s " +
                        std::to_string(pd.ipus()) + " IPUs",
                    "`replicas: " + std::to_string(pd.ipus() / perReplica) + "` would use the whole pod");
  }
  if (written && (mp.rtsWeights || mp.rtsOptimizerState) && mp.replicas == 1 && !context.fieldErrors)
    diags.warning(code::kRtsOneReplica, spec.spanOf(ir::nameOf(ir::MappingField::ReplicatedTensorSharding)),
                  "replicated tensor sharding has no effect with one replica",
                  "remove `replicated_tensor_sharding`, or use more `replicas`");

  // Distributed batch norm: groups of consecutive replicas.
  if (mp.batchNormReplicas > 1 && mp.replicas % mp.batchNormReplicas != 0) {
    std::string divisors;
    for (int d = 1; d <= mp.replicas; ++d)
      if (mp.replicas % d == 0) divisors += (divisors.empty() ? "" : ", ") + std::to_string(d);
    diags.error(code::kBatchNormReplicas, spec.spanOf(ir::nameOf(ir::MappingField::BatchNormReplicas)),
                "`batch_norm_replicas: " + std::to_string(mp.batchNormReplicas) + "` does not divide the mapping's " +
                    std::to_string(mp.replicas) + " replicas",
                "batch norm's statistics span groups of consecutive replicas; use a divisor of " +
                    std::to_string(mp.replicas) + " (" + divisors + ") or `all`");
    ok = false;
  }
  return ok;
}

}  // namespace ipu::check
