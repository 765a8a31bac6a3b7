#include "runtime/emulator/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"

namespace ipu::emu {

namespace {

// Round a stored value to fp16 when that is its type.
float store(float x, bool fp16, bool stochastic, std::uint64_t key, std::size_t i) {
  if (!fp16) return x;
  if (stochastic) return fp16::roundStochastic(x, fp16::roundingDraw(key, i));
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

// The element-wise updates work in blocks of kBlock elements: straight loops
// into local buffers that the compiler vectorises, and the buffer roundings of
// fp16.h (the same results as `store`, element by element: the tests compare
// them).
constexpr std::size_t kBlock = 256;

void roundBlock(float* buf, std::size_t n, bool fp16, bool stochastic, std::uint64_t key, std::size_t offset) {
  if (!fp16) return;
  if (stochastic) fp16::roundStochastic(buf, n, key, offset);
  else fp16::roundNearest(buf, n);
}

void currentBlock(const UpdateSpan& sp, std::size_t i0, std::size_t n, float* out) {
  const float* from = sp.state->master.empty() ? sp.value + i0 : sp.state->master.data() + sp.first + i0;
  std::copy(from, from + n, out);
}

// The stored weights of elements i0 .. i0 + n - 1, after the fp32 weights
// were updated in place (the master copy when kept, else the stored weights
// themselves): rounded to their type.
void storeWeights(const UpdateSettings& s, const UpdateSpan& sp, std::size_t i0, std::size_t n) {
  float* value = sp.value + i0;
  if (!sp.state->master.empty()) {
    const float* master = sp.state->master.data() + sp.first + i0;
    std::copy(master, master + n, value);
  }
  roundBlock(value, n, s.fp16Weights, s.stochastic, s.key, sp.offset + i0);
}

// Write new fp32 weights w[0, n) of elements i0...: the master copy when
// kept, and the stored weights rounded to their type.
void writeBlock(const UpdateSettings& s, const UpdateSpan& sp, std::size_t i0, float* w, std::size_t n) {
  if (!sp.state->master.empty()) std::copy(w, w + n, sp.state->master.data() + sp.first + i0);
  roundBlock(w, n, s.fp16Weights, s.stochastic, s.key, sp.offset + i0);
  std::copy(w, w + n, sp.value + i0);
}

float decay(const UpdateSettings& s) { return s.excluded ? 0.0f : static_cast<float>(s.optimizer->weightDecay); }

}  // namespace

MomentCoefficients::MomentCoefficients(const ir::Optimizer& o, long long t)
    : beta1(static_cast<float>(o.beta1)),
      beta2(static_cast<float>(o.beta2)),
      keep1(static_cast<float>(1.0 - o.beta1)),
      keep2(static_cast<float>(1.0 - o.beta2)),
      correction1(o.biasCorrection ? 1.0 - std::pow(o.beta1, static_cast<double>(t)) : 1.0),
      correction2(o.biasCorrection ? 1.0 - std::pow(o.beta2, static_cast<double>(t)) : 1.0) {}

bool needsTrustRatio(const ir::Optimizer& o) {
  switch (o.kind) {
    case ir::OptimizerKind::Lamb:
    case ir::OptimizerKind::Lars: return true;
    case ir::OptimizerKind::Sgd:
    case ir::OptimizerKind::Momentum:
    case ir::OptimizerKind::Adam:
    case ir::OptimizerKind::AdamW: return false;
  }
  return false;
}

NormSums prepare(const UpdateSettings& s, UpdateSpan sp) {
  NormSums sums;
  const ir::Optimizer& o = *s.optimizer;
  const float wd = decay(s);
  if (o.kind == ir::OptimizerKind::Lamb) {
    const MomentCoefficients c(o, s.t);
    const float eps = static_cast<float>(o.epsilon);
    const float sb2 = static_cast<float>(std::sqrt(c.correction2));
    const float ib1 = static_cast<float>(1.0 / c.correction1);
    auto& st = *sp.state;
    if (sp.u->size() < sp.first + sp.n) sp.u->resize(sp.first + sp.n);
    float w[kBlock], m[kBlock], v[kBlock], u[kBlock];
    for (std::size_t i0 = 0; i0 < sp.n; i0 += kBlock) {
      const std::size_t n = std::min(kBlock, sp.n - i0);
      const std::size_t at = sp.first + i0;
      for (std::size_t i = 0; i < n; ++i) {
        const float g = sp.grad[i0 + i] * s.gradScale;
        m[i] = st.m[at + i] * c.beta1 + g * c.keep1;
        v[i] = st.v[at + i] * c.beta2 + c.keep2 * g * g;
      }
      roundBlock(m, n, s.fp16State, false, 0, 0);
      roundBlock(v, n, s.fp16State, false, 0, 0);
      std::copy(m, m + n, st.m.begin() + static_cast<std::ptrdiff_t>(at));
      std::copy(v, v + n, st.v.begin() + static_cast<std::ptrdiff_t>(at));
      currentBlock(sp, i0, n, w);
      for (std::size_t i = 0; i < n; ++i) u[i] = (m[i] * ib1) / (std::sqrt(v[i]) / sb2 + eps) + wd * w[i];
      std::copy(u, u + n, sp.u->begin() + static_cast<std::ptrdiff_t>(at));
      for (std::size_t i = 0; i < n; ++i) {
        sums.w2 += static_cast<double>(w[i]) * w[i];
        sums.u2 += static_cast<double>(u[i]) * u[i];
      }
    }
  } else if (o.kind == ir::OptimizerKind::Lars) {
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
  if (o.kind == ir::OptimizerKind::Lamb) {
    const double un = std::sqrt(total.u2);
    return wn > 0 && un > 0 ? wn / un : 1.0;
  }
  if (o.kind == ir::OptimizerKind::Lars) {
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
  if (o.kind == ir::OptimizerKind::Lamb) {
    const float step = static_cast<float>(s.lr * ratio);
    float w[kBlock];
    for (std::size_t i0 = 0; i0 < sp.n; i0 += kBlock) {
      const std::size_t n = std::min(kBlock, sp.n - i0);
      currentBlock(sp, i0, n, w);
      const float* u = sp.u->data() + sp.first + i0;
      for (std::size_t i = 0; i < n; ++i) w[i] = w[i] - step * u[i];
      writeBlock(s, sp, i0, w, n);
    }
    return;
  }
  if (o.kind == ir::OptimizerKind::Lars) {
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
  if (o.kind == ir::OptimizerKind::Adam || o.kind == ir::OptimizerKind::AdamW) {
    const bool decoupled = o.kind == ir::OptimizerKind::AdamW;
    const MomentCoefficients c(o, s.t);
    const float eps = static_cast<float>(o.epsilon);
    const float stepSize = static_cast<float>(s.lr / c.correction1);
    const float sb2 = static_cast<float>(std::sqrt(c.correction2));
    const float shrink = 1.0f - lr * wd;
    // In place (the moments, and the fp32 weights: the master copy when
    // kept): the update is a pass over memory, which copies through local
    // buffers made about 15% longer at hidden 512.
    for (std::size_t i0 = 0; i0 < sp.n; i0 += kBlock) {
      const std::size_t n = std::min(kBlock, sp.n - i0);
      const std::size_t at = sp.first + i0;
      float* w = sp.state->master.empty() ? sp.value + i0 : sp.state->master.data() + at;
      float* m = st.m.data() + at;
      float* v = st.v.data() + at;
      for (std::size_t i = 0; i < n; ++i) {
        float g = sp.grad[i0 + i] * s.gradScale;
        if (decoupled) w[i] = w[i] * shrink;
        else g = g + wd * w[i];
        m[i] = m[i] * c.beta1 + g * c.keep1;
        v[i] = v[i] * c.beta2 + c.keep2 * g * g;
      }
      roundBlock(m, n, s.fp16State, false, 0, 0);
      roundBlock(v, n, s.fp16State, false, 0, 0);
      for (std::size_t i = 0; i < n; ++i) {
        const float denom = std::sqrt(v[i]) / sb2 + eps;
        w[i] = w[i] - stepSize * (m[i] / denom);
      }
      storeWeights(s, sp, i0, n);
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
