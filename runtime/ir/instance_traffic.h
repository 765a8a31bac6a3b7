// What crosses MPI instances in one step when a phase's replicas run as N
// processes (`mpirun -n N ipu run`, docs/run.md "Across processes and
// hosts"), derived from the plan's collectives: which of them cross
// instances for this N, and how many bytes each instance sends for them in
// the emulator's scheme. The run compares it with what the instances counted.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/ir/execution_plan.h"

namespace ipu::ir {

struct InstanceTraffic {
  // The gradient reduction crosses instances whenever N > 1: each instance
  // sends its replicas' summed gradients (fp32, the plan's Gradients
  // collectives counted in elements) to each of the N - 1 others.
  double gradientBytes = 0;
  // Distributed batch norm crosses instances when a batch-norm group's
  // replicas live on several of them: the instance sends its members' sums
  // (fp64, the plan's BatchNormStatistics collectives in values) to each
  // other instance of the group.
  double batchNormBytes = 0;
  double total() const { return gradientBytes + batchNormBytes; }
};

// Per instance, bytes sent in one step; empty when the replicas do not
// divide over the instances. Exact for unsharded mappings (`shard: 1`); with
// tensor sharding the plan counts a replicated tensor on every IPU of its
// shard group, so this overstates the gradient bytes.
std::vector<InstanceTraffic> instanceTraffic(const PhasePlan& phase, int instances);

// PopRun's rule, written once for `ipu run --instances` and `ipu estimate
// --instances` (IPU5012): every instance drives the same number of replicas.
// Empty when `instances` divides the mapping's replicas.
struct InstancesRefusal {
  std::string message, help;
  SourceRef where;  // the mapping
};
std::optional<InstancesRefusal> refuseInstances(const PhasePlan& phase, int instances);

}  // namespace ipu::ir
