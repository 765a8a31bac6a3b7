#include "runtime/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace ipu::train {

double learningRate(const ir::LrSchedule& lr, long long step, long long phaseSteps) {
  const double peak = lr.peak;
  const double s = static_cast<double>(std::max(0LL, step));
  const double warmup = std::max(0.0, lr.warmupSteps);
  if (s < warmup) return peak * (s + 1) / warmup;
  const double decaySteps = static_cast<double>(phaseSteps) - warmup;
  if (!(decaySteps > 0)) return lr.decay == ir::LrDecay::Constant ? peak : lr.end;
  // Progress through the decay: 0 at its first step, 1 at the phase's end.
  const double progress = std::clamp((s - warmup) / decaySteps, 0.0, 1.0);
  const double span = peak - lr.end;
  switch (lr.decay) {
    case ir::LrDecay::Constant: return peak;
    case ir::LrDecay::Linear: return lr.end + span * (1 - progress);
    case ir::LrDecay::Cosine: return lr.end + span * 0.5 * (1 + std::cos(std::acos(-1.0) * progress));
    case ir::LrDecay::Poly: return lr.end + span * std::pow(1 - progress, lr.power);
    case ir::LrDecay::Exponential: return peak > 0 && lr.end > 0 ? peak * std::pow(lr.end / peak, progress) : peak;
  }
  return peak;
}

}  // namespace ipu::train
