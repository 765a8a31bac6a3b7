#include "runtime/ir/instance_traffic.h"

#include <algorithm>

namespace ipu::ir {

std::optional<InstancesRefusal> refuseInstances(const PhasePlan& phase, int instances) {
  const Mapping& m = phase.mapping;
  const int R = std::max(1, m.replicas);
  if (instances >= 1 && R % instances == 0) return std::nullopt;
  return InstancesRefusal{"mapping `" + m.name + "` has " +
                              (R == 1 ? std::string("1 replica, which cannot be split") : std::to_string(R) + " replicas, which do not divide") +
                              " over " + std::to_string(instances) + " instances",
                          "every instance runs the same number of replicas: run a number of instances that divides " +
                              std::to_string(R),
                          m.source};
}

std::vector<InstanceTraffic> instanceTraffic(const PhasePlan& phase, int instances) {
  const int R = std::max(1, phase.mapping.replicas);
  if (instances < 1 || R % instances != 0) return {};
  std::vector<InstanceTraffic> out(static_cast<std::size_t>(instances));
  if (instances == 1) return out;
  const int local = R / instances;
  // Per replica and step: gradient elements, batch-norm values.
  double gradients = 0, batchNorm = 0;
  for (const auto& c : phase.traffic.collectives) {
    if (c.tensors == CollectiveTensors::Gradients) gradients += c.bytes / bytesOf(phase.precision.accumulators);
    if (c.tensors == CollectiveTensors::BatchNormStatistics) batchNorm += c.bytes / 4.0;   // fp32 in the plan
  }
  const int span = phase.mapping.batchNormGroup();
  for (int k = 0; k < instances; ++k) {
    InstanceTraffic& t = out[static_cast<std::size_t>(k)];
    t.gradientBytes = gradients * 4.0 * local * (instances - 1);
    // Every batch-norm group with members on instance k and on others.
    for (int first = 0; first < R; first += span) {
      int mine = 0;
      std::vector<int> peers;
      for (int r = first; r < first + span; ++r) {
        const int owner = r / local;
        if (owner == k) ++mine;
        else if (std::find(peers.begin(), peers.end(), owner) == peers.end()) peers.push_back(owner);
      }
      if (mine > 0) t.batchNormBytes += batchNorm * 8.0 * mine * static_cast<double>(peers.size());
    }
  }
  return out;
}

}  // namespace ipu::ir
