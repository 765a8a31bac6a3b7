// Pass 3: the memory of every IPU, by component, against the chip's
// In-Processor Memory, and what lives in Streaming Memory. The model is
// documented, term by term, in docs/plan.md ("Memory model").
//
// The model is an accumulator: layers are added one at a time (O(1) each) and
// the breakdown is read at any point, so the balancer can grow a candidate
// pipeline stage layer by layer and stop when it no longer fits.
#pragma once

#include <optional>
#include <vector>

#include "interpreter/plan/context.h"

namespace ipu::plan {

void planMemory(PhaseContext& ctx);

class IpuMemory {
 public:
  // One IPU of pipeline IPU `ipu`'s shard group, in a pipeline of `stageCount` stages.
  IpuMemory(const PhaseContext& ctx, int ipu, int stageCount);
  void add(int layer, int stage);
  // `parameters`: the parameters the IPU holds, its copies of tied weights included.
  ir::MemoryBreakdown breakdown(double* streamingBytes = nullptr, double* parameters = nullptr) const;
  double total() const { return breakdown().total(); }

  // Phased execution, once the planner has split the IPU's layers into
  // segments (runtime/ir/phased.h): the parameters (elements) on chip at most
  // as weights (running and prefetched segments) and as accumulators, and the
  // largest segment's. Without it, the breakdown bounds them from the weights
  // alone, as the balancer needs before phases exist.
  struct PhasedResidency {
    double weights = 0, accumulators = 0, largestSegment = 0;
  };
  void setPhasedResidency(const PhasedResidency& r) { residency_ = r; }

 private:
  struct StageSpan {
    int stage, first, last;
  };
  const PhaseContext* ctx_;  // a pointer, so that an accumulator can be copied and assigned
  int ipu_, stageCount_;
  double t_, r_;
  bool phased_;
  std::vector<int> layers_;
  std::vector<char> member_;           // member_[layer]: on this IPU
  std::vector<double> weights_;        // per added layer, before tie copies
  std::vector<int> tied_;              // added layers whose weights are tied to others
  std::vector<StageSpan> stages_;
  double W_ = 0, largestW_ = 0;
  double stash_ = 0, working_ = 0, maxAct_ = 0, code_ = 0, workspace_ = 0, largestOut_ = 0, largestIn_ = 0;
  std::vector<std::pair<int, double>> stageWork_;  // recompute: stage -> activations of its layers
  std::vector<int> distinct_;          // phased: code classes already counted
  std::optional<PhasedResidency> residency_;
};

}  // namespace ipu::plan
