#include "runtime/emulator/optimizer.h"

#include <cmath>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"

namespace ipu::emu {

namespace {

// Round a stored value to fp16 when that is its type.
float store(float x, bool fp16, bool stochastic, std::uint64_t key, std::size_t i) {
  if (!fp16) return x;
  if (stochastic) return fp16::roundStochastic(x, static_cast<std::uint32_t>(draw64(key, i) >> 32));
  return fp16::roundNearest(x);
}

// The fp32 value the optimizer updates: the master copy when kept.
float current(const UpdateSpan& sp, std::size_t i) {
  return sp.state->master.empty() ? sp.value[i] : sp.state->master[sp.first + i];
}

void write(const UpdateSettings& s, const UpdateSpan& sp, std::size_t i, float w) {
  const std::size_t at = sp.offset + i;
  if (!sp.state->master.empty()) {
    sp.state->master[sp.first + i] = w;
    sp.value[i] = store(w, s.fp16Weights, s.stochastic, s.key, at);
  } else {
    sp.value[i] = store(w, s.fp16Weights, s.stochastic, s.key, at);
  }
}

float decay(const UpdateSettings& s) { return s.excluded ? 0.0f : static_cast<float>(s.optimizer->weightDecay); }

}  // namespace

bool needsTrustRatio(const ir::Optimizer& o) { return o.kind == "lamb" || o.kind == "lars"; }

NormSums prepare(const UpdateSettings& s, UpdateSpan sp) {
  NormSums sums;
  const ir::Optimizer& o = *s.optimizer;
  const float wd = decay(s);
  if (o.kind == "lamb") {
    const float b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2);
    const float eps = static_cast<float>(o.epsilon);
    const double bc1 = o.biasCorrection ? 1.0 - std::pow(o.beta1, static_cast<double>(s.t)) : 1.0;
    const double bc2 = o.biasCorrection ? 1.0 - std::pow(o.beta2, static_cast<double>(s.t)) : 1.0;
    const float sb2 = static_cast<float>(std::sqrt(bc2));
    const float ib1 = static_cast<float>(1.0 / bc1);
    auto& st = *sp.state;
    if (sp.u->size() < sp.first + sp.n) sp.u->resize(sp.first + sp.n);
    for (std::size_t i = 0; i < sp.n; ++i) {
      const float g = sp.grad[i] * s.gradScale;
      const float m = store(st.m[sp.first + i] * b1 + g * (1 - b1), s.fp16State, false, 0, 0);
      const float v = store(st.v[sp.first + i] * b2 + (1 - b2) * g * g, s.fp16State, false, 0, 0);
      st.m[sp.first + i] = m;
      st.v[sp.first + i] = v;
      const float w = current(sp, i);
      const float u = (m * ib1) / (std::sqrt(v) / sb2 + eps) + wd * w;
      (*sp.u)[sp.first + i] = u;
      sums.w2 += static_cast<double>(w) * w;
      sums.u2 += static_cast<double>(u) * u;
    }
  } else if (o.kind == "lars") {
    for (std::size_t i = 0; i < sp.n; ++i) {
      const float g = sp.grad[i] * s.gradScale;
      const float w = current(sp, i);
      sums.w2 += static_cast<double>(w) * w;
      sums.g2 += static_cast<double>(g) * g;
    }
  }
  return sums;
}

double trustRatio(const UpdateSettings& s, const NormSums& total) {
  const ir::Optimizer& o = *s.optimizer;
  if (s.excluded) return 1.0;
  const double wn = std::sqrt(total.w2);
  if (o.kind == "lamb") {
    const double un = std::sqrt(total.u2);
    return wn > 0 && un > 0 ? wn / un : 1.0;
  }
  if (o.kind == "lars") {
    const double gn = std::sqrt(total.g2);
    const double denom = gn + o.weightDecay * wn;
    return wn > 0 && denom > 0 ? o.trustCoefficient * wn / denom : 1.0;
  }
  return 1.0;
}

void apply(const UpdateSettings& s, double ratio, UpdateSpan sp) {
  const ir::Optimizer& o = *s.optimizer;
  auto& st = *sp.state;
  const float lr = static_cast<float>(s.lr);
  const float wd = decay(s);
  if (o.kind == "lamb") {
    const float step = static_cast<float>(s.lr * ratio);
    for (std::size_t i = 0; i < sp.n; ++i) write(s, sp, i, current(sp, i) - step * (*sp.u)[sp.first + i]);
    return;
  }
  if (o.kind == "lars") {
    const float mom = static_cast<float>(o.momentum);
    const float scaled = static_cast<float>(s.lr * ratio);
    for (std::size_t i = 0; i < sp.n; ++i) {
      const float w = current(sp, i);
      const float g = sp.grad[i] * s.gradScale + wd * w;
      const float v = store(mom * st.m[sp.first + i] + scaled * g, s.fp16State, false, 0, 0);
      st.m[sp.first + i] = v;
      write(s, sp, i, w - v);
    }
    return;
  }
  if (o.kind == "adam" || o.kind == "adamw") {
    const bool decoupled = o.kind == "adamw";
    const float b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2);
    const float eps = static_cast<float>(o.epsilon);
    const double bc1 = o.biasCorrection ? 1.0 - std::pow(o.beta1, static_cast<double>(s.t)) : 1.0;
    const double bc2 = o.biasCorrection ? 1.0 - std::pow(o.beta2, static_cast<double>(s.t)) : 1.0;
    const float stepSize = static_cast<float>(s.lr / bc1);
    const float sb2 = static_cast<float>(std::sqrt(bc2));
    const float shrink = 1.0f - lr * wd;
    for (std::size_t i = 0; i < sp.n; ++i) {
      float w = current(sp, i);
      float g = sp.grad[i] * s.gradScale;
      if (decoupled) w = w * shrink;
      else g = g + wd * w;
      const float m = store(st.m[sp.first + i] * b1 + g * (1 - b1), s.fp16State, false, 0, 0);
      const float v = store(st.v[sp.first + i] * b2 + (1 - b2) * g * g, s.fp16State, false, 0, 0);
      st.m[sp.first + i] = m;
      st.v[sp.first + i] = v;
      const float denom = std::sqrt(v) / sb2 + eps;
      write(s, sp, i, w - stepSize * (m / denom));
    }
    return;
  }
  // sgd, momentum
  const float mom = static_cast<float>(o.momentum);
  for (std::size_t i = 0; i < sp.n; ++i) {
    const float w = current(sp, i);
    const float g = sp.grad[i] * s.gradScale + wd * w;
    float d = g;
    if (!st.m.empty()) {
      const float v = store(mom * st.m[sp.first + i] + g, s.fp16State, false, 0, 0);
      st.m[sp.first + i] = v;
      d = o.nesterov ? g + mom * v : v;
    }
    write(s, sp, i, w - lr * d);
  }
}

}  // namespace ipu::emu
