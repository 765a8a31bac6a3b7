// The optimizers of ir::Optimizer, element by element over a parameter's
// (shard's, replica's chunk of a) tensor. LAMB and LARS scale each tensor's
// update by a trust ratio computed over the whole tensor, so their update is
// two passes: `prepare` computes partial sums of squares that the caller adds
// over shards and replicas, then `apply` updates. Parameters whose class is in
// the optimizer's `exclude` list get no weight decay and a trust ratio of 1.
//
// Semantics (docs/emulator.md, "Optimizers"): sgd and momentum add L2 weight
// decay to the gradient (momentum and Nesterov as torch.optim.SGD); adam adds
// L2 decay to the gradient and adamw decays the weights (as torch.optim.Adam
// and AdamW); lamb follows You et al. 2020 with decoupled decay inside the
// trust-ratio update; lars follows You, Gitman and Ginsburg 2017.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/ir/execution_plan.h"

namespace ipu::emu {

// Moments (and the fp32 master copy) of the elements a replica updates.
struct OptimizerState {
  std::vector<float> m, v, master;
  double bytes(double momentBytes) const {
    return static_cast<double>(m.size() + v.size()) * momentBytes + static_cast<double>(master.size()) * 4.0;
  }
};

struct UpdateSettings {
  const ir::Optimizer* optimizer = nullptr;
  double lr = 0;
  long long t = 1;              // updates applied so far, including this one (bias correction)
  float gradScale = 1;          // 1 / loss scale, times the clipping factor
  bool excluded = false;        // no weight decay, no trust ratio
  bool fp16Weights = false;
  bool fp16State = false;
  bool stochastic = false;
  std::uint64_t key = 0;        // stochastic rounding of this tensor's writes
};

struct NormSums {
  double w2 = 0, u2 = 0, g2 = 0;
  NormSums& operator+=(const NormSums& o) {
    w2 += o.w2;
    u2 += o.u2;
    g2 += o.g2;
    return *this;
  }
};

// n elements of a tensor: `value` the stored weights, `grad` the summed
// gradient (still loss-scaled), `state` the moments and master copy (master
// empty when there is none) of a range that holds these elements from index
// `first` on. `u` is scratch indexed like the state (grown to first + n when
// smaller; callers updating chunks of one range in parallel size it first).
struct UpdateSpan {
  float* value = nullptr;
  const float* grad = nullptr;
  std::size_t n = 0;
  std::size_t offset = 0;       // position of element 0 in the whole tensor (random streams)
  OptimizerState* state = nullptr;
  std::size_t first = 0;        // index of element 0 in state and u
  std::vector<float>* u = nullptr;
};

// The coefficients of Adam's, AdamW's and LAMB's moments at update t:
// m = beta1 m + keep1 g, v = beta2 v + keep2 g^2 in fp32, where beta1, beta2,
// keep1 = 1 - beta1 and keep2 = 1 - beta2 are each computed in double from
// the script's values and rounded to fp32 once (1 - fp32(beta2) would be
// 1.3e-5 relative off for 0.999, and every update 6.4e-6 too large), and the
// bias corrections 1 - beta^t are in double (1 without bias correction).
// docs/emulator.md, "Optimizers".
struct MomentCoefficients {
  MomentCoefficients(const ir::Optimizer& o, long long t);
  float beta1, beta2, keep1, keep2;
  double correction1, correction2;
};

bool needsTrustRatio(const ir::Optimizer& o);
// Pass 1 (LAMB, LARS): update moments/direction and return partial sums.
NormSums prepare(const UpdateSettings& s, UpdateSpan span);
// The trust ratio of a whole tensor from its summed partials (1 when not used).
double trustRatio(const UpdateSettings& s, const NormSums& total);
// Pass 2: write the new weights (and moments for the single-pass optimizers).
void apply(const UpdateSettings& s, double ratio, UpdateSpan span);

}  // namespace ipu::emu
