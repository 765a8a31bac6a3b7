// Optimizers against their definitions on hand-computed cases, and loss
// scaling: overflow detected, the step skipped, the scale backed off, and
// training recovering.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/emulator/fp16.h"
#include "runtime/emulator/optimizer.h"
#include "tests/emulator/emulator_test_support.h"

namespace ipu::emu {
namespace {

struct Case {
  std::vector<float> w, g;
  OptimizerState st;
  std::vector<float> u;
};

UpdateSettings settings(const ir::Optimizer& o, double lr, bool excluded = false) {
  UpdateSettings s;
  s.optimizer = &o;
  s.lr = lr;
  s.t = 1;
  s.excluded = excluded;
  return s;
}

void step(const UpdateSettings& s, Case& c) {
  UpdateSpan sp;
  sp.value = c.w.data();
  sp.grad = c.g.data();
  sp.n = c.w.size();
  sp.state = &c.st;
  sp.u = &c.u;
  const NormSums sums = prepare(s, sp);
  apply(s, trustRatio(s, sums), sp);
}

TEST(Lamb, TrustRatioOnAHandComputedCase) {
  ir::Optimizer o;
  o.kind = ir::OptimizerKind::Lamb;
  o.beta1 = 0.9;
  o.beta2 = 0.999;
  o.epsilon = 1e-6;
  o.weightDecay = 0.01;
  Case c{{3, 4}, {0.6f, 0.8f}, {{0, 0}, {0, 0}, {}}, {}};
  step(settings(o, 0.1), c);
  // First step with bias correction: m_hat = g, v_hat = g^2, so
  // u_i = g_i / (|g_i| + eps) + wd * w_i, and r = ||w|| / ||u|| with ||w|| = 5.
  const double u0 = 0.6 / (0.6 + 1e-6) + 0.03, u1 = 0.8 / (0.8 + 1e-6) + 0.04;
  const double r = 5.0 / std::sqrt(u0 * u0 + u1 * u1);
  EXPECT_NEAR(c.w[0], 3 - 0.1 * r * u0, 2e-6);
  EXPECT_NEAR(c.w[1], 4 - 0.1 * r * u1, 2e-6);
  EXPECT_NEAR(r, 3.41594, 1e-5);  // about 5 / sqrt(1.03^2 + 1.04^2)
  EXPECT_NEAR(c.st.m[0], 0.06, 1e-7);
  EXPECT_NEAR(c.st.v[1], 0.00064, 1e-8);  // (1 - beta2) is 0.001 only to float precision
}

TEST(Lamb, ExcludedTensorsGetNoDecayAndNoTrustRatio) {
  ir::Optimizer o;
  o.kind = ir::OptimizerKind::Lamb;
  o.weightDecay = 0.5;
  o.epsilon = 1e-6;
  Case c{{3, 4}, {0.6f, 0.8f}, {{0, 0}, {0, 0}, {}}, {}};
  step(settings(o, 0.1, true), c);
  EXPECT_NEAR(c.w[0], 3 - 0.1 * 0.6 / (0.6 + 1e-6), 1e-6);
  EXPECT_NEAR(c.w[1], 4 - 0.1 * 0.8 / (0.8 + 1e-6), 1e-6);
}

TEST(Lamb, ZeroWeightsUseARatioOfOne) {
  ir::Optimizer o;
  o.kind = ir::OptimizerKind::Lamb;
  Case c{{0, 0}, {1, -1}, {{0, 0}, {0, 0}, {}}, {}};
  step(settings(o, 0.01), c);
  EXPECT_NEAR(c.w[0], -0.01, 1e-7);
  EXPECT_NEAR(c.w[1], 0.01, 1e-7);
}

TEST(Lars, TrustRatioMatchesDefinition) {
  ir::Optimizer o;
  o.kind = ir::OptimizerKind::Lars;
  o.momentum = 0.9;
  o.weightDecay = 0.1;
  o.trustCoefficient = 0.001;
  Case c{{3, 4}, {0.6f, 0.8f}, {{0, 0}, {}, {}}, {}};
  step(settings(o, 1.0), c);
  const double ratio = 0.001 * 5 / (1 + 0.1 * 5);
  EXPECT_NEAR(c.w[0], 3 - ratio * (0.6 + 0.3), 1e-6);
  EXPECT_NEAR(c.w[1], 4 - ratio * (0.8 + 0.4), 1e-6);
}

TEST(Optimizers, SgdMomentumAdamAdamW) {
  ir::Optimizer sgd;
  sgd.kind = ir::OptimizerKind::Sgd;
  sgd.weightDecay = 0.1;
  Case a{{1}, {0.5f}, {}, {}};
  step(settings(sgd, 0.1), a);
  EXPECT_NEAR(a.w[0], 1 - 0.1 * (0.5 + 0.1), 1e-7);

  ir::Optimizer mom;
  mom.kind = ir::OptimizerKind::Momentum;
  mom.momentum = 0.9;
  Case b{{1}, {0.5f}, {{0}, {}, {}}, {}};
  step(settings(mom, 0.1), b);
  step(settings(mom, 0.1), b);
  EXPECT_NEAR(b.w[0], 1 - 0.1 * 0.5 - 0.1 * (0.9 * 0.5 + 0.5), 1e-6);

  ir::Optimizer adamw;
  adamw.kind = ir::OptimizerKind::AdamW;
  adamw.weightDecay = 0.1;
  adamw.epsilon = 1e-8;
  Case d{{2}, {-0.5f}, {{0}, {0}, {}}, {}};
  step(settings(adamw, 0.01), d);
  EXPECT_NEAR(d.w[0], 2 * (1 - 0.001) + 0.01, 1e-6);   // decoupled decay, then -lr * sign(g)

  ir::Optimizer adam = adamw;
  adam.kind = ir::OptimizerKind::Adam;
  Case e{{2}, {-0.5f}, {{0}, {0}, {}}, {}};
  step(settings(adam, 0.01), e);
  EXPECT_NEAR(e.w[0], 2 + 0.01, 1e-6);   // L2 decay enters the gradient: -0.5 + 0.2 is still negative
}

// The moments' coefficients are the script's betas rounded to fp32 once, and
// 1 - beta computed in double then rounded (docs/emulator.md, "Moments in
// fp32"). Over the first updates from zero moments, m_hat / sqrt(v_hat) is
// exactly g / |g| for every t, so Adam's, AdamW's and LAMB's step is lr times
// the sign of g, to within a few roundings (U = 2^-24). Computing 1 - beta2 in
// fp32 from fp32(0.999) makes every such step 6.4e-6 (107 U) too large: this
// test fails then.
TEST(Optimizers, MomentCoefficientsAreTheExactBetasRoundedOnce) {
  const double u = std::ldexp(1.0, -24);
  for (double beta2 : {0.999, 0.98, 0.9999}) {
    ir::Optimizer o;
    o.beta1 = 0.9;
    o.beta2 = beta2;
    o.epsilon = 1e-30;   // negligible: the step is the ratio alone
    o.weightDecay = 0;
    const MomentCoefficients c(o, 3);
    EXPECT_EQ(c.keep2, static_cast<float>(1.0 - beta2));
    EXPECT_EQ(c.keep1, static_cast<float>(1.0 - 0.9));
    EXPECT_EQ(c.correction2, 1.0 - std::pow(beta2, 3.0));
    for (ir::OptimizerKind kind : {ir::OptimizerKind::Adam, ir::OptimizerKind::AdamW, ir::OptimizerKind::Lamb}) {
      o.kind = kind;
      Case k{{0, 0}, {0.37f, -1.25f}, {{0, 0}, {0, 0}, {}}, {}};
      for (long long t = 1; t <= 3; ++t) {
        UpdateSettings s = settings(o, 1.0);
        s.t = t;
        const std::vector<float> before = k.w;
        step(s, k);
        // LAMB's trust ratio: 1 with zero weights, else ||w|| / ||u||, u
        // being the signs (norm sqrt 2).
        const double norm = std::hypot(static_cast<double>(before[0]), static_cast<double>(before[1]));
        const double r = kind == ir::OptimizerKind::Lamb && norm > 0 ? norm / std::sqrt(2.0) : 1.0;
        const double d0 = static_cast<double>(k.w[0]) - before[0], d1 = static_cast<double>(k.w[1]) - before[1];
        EXPECT_NEAR(d0, -r, 16 * u * r) << static_cast<int>(kind) << " t=" << t << " beta2=" << beta2;
        EXPECT_NEAR(d1, r, 16 * u * r) << static_cast<int>(kind) << " t=" << t << " beta2=" << beta2;
      }
    }
  }
}

TEST(Optimizers, MasterWeightsKeepUpdatesFp16WouldLose) {
  ir::Optimizer sgd;
  sgd.kind = ir::OptimizerKind::Sgd;
  // 1 + 1e-4 is not representable in fp16 (the spacing at 1 is ~1e-3).
  Case without{{1}, {-1}, {}, {}};
  UpdateSettings s = settings(sgd, 1e-4);
  s.fp16Weights = true;
  for (int i = 0; i < 10; ++i) step(s, without);
  EXPECT_EQ(without.w[0], 1.0f);
  Case with{{1}, {-1}, {{}, {}, {1}}, {}};
  for (int i = 0; i < 10; ++i) step(s, with);
  EXPECT_NEAR(with.st.master[0], 1.001, 1e-6);
  EXPECT_EQ(with.w[0], 1.0009765625f);   // the fp16 nearest to 1.001
  // Stochastic rounding keeps the fp16 weights unbiased without a master copy.
  Case sr{{1}, {-1}, {}, {}};
  s.stochastic = true;
  double mean = 0;
  for (int k = 0; k < 400; ++k) {
    sr.w[0] = 1;
    s.key = static_cast<std::uint64_t>(k);
    step(s, sr);
    mean += sr.w[0];
  }
  EXPECT_NEAR(mean / 400, 1.0001, 0.00005);
}

}  // namespace
}  // namespace ipu::emu

namespace ipu::emutest {
namespace {

TEST(LossScaling, DynamicScaleRecoversFromOverflow) {
  TinyBert tb;
  tb.precision = "compute: fp16\n weights: fp16\n master_weights: fp32\n partials: fp32\n loss_scale: dynamic(initial: 1e12, factor: 4, interval: 3)";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 2\n steps: 40\n lr: 0.002";
  auto t = trainerFor(phaseOf(tb.script()));
  ASSERT_TRUE(t);
  const auto initial = t->weights();
  int skipped = 0;
  double scale = 0;
  bool recovered = false, grew = false;
  for (int i = 0; i < 30; ++i) {
    auto r = t->step();
    ASSERT_TRUE(r.ok()) << r.error().message;
    if (i == 0) {
      EXPECT_TRUE(r->skipped);       // 1e12 times any gradient overflows fp16
      EXPECT_EQ(r->lossScale, 1e12);
      EXPECT_EQ(maxRelativeDifference(t->weights(), initial), 0.0);   // nothing was applied
    }
    if (r->skipped) {
      ++skipped;
      EXPECT_FALSE(recovered && r->lossScale < scale / 4) << "scale fell after recovering";
    } else {
      recovered = true;
      EXPECT_TRUE(std::isfinite(r->loss));
    }
    if (recovered && r->lossScale > scale && scale > 0) grew = true;
    scale = r->lossScale;
  }
  EXPECT_GT(skipped, 3);
  EXPECT_TRUE(recovered);
  EXPECT_LT(scale, 1e12);
  EXPECT_TRUE(grew);   // after `interval` clean steps it tries a larger scale again
  EXPECT_GT(maxRelativeDifference(t->weights(), initial), 1e-4);
}

TEST(LossScaling, StaticScaleThatOverflowsSkipsEveryStep) {
  TinyBert tb;
  tb.precision = "compute: fp16\n weights: fp16\n partials: fp16\n loss_scale: 1e9";
  auto t = trainerFor(phaseOf(tb.script()));
  ASSERT_TRUE(t);
  const auto initial = t->weights();
  for (int i = 0; i < 3; ++i) {
    auto r = t->step();
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->skipped);
    EXPECT_EQ(r->lossScale, 1e9);
  }
  EXPECT_EQ(maxRelativeDifference(t->weights(), initial), 0.0);
}

TEST(LossScaling, Fp16TrainingTracksFp32) {
  // Graphcore's fp16 recipe (fp16 weights with stochastic rounding, static
  // scale) learns: its loss after a few steps is close to fp32's.
  TinyBert fp32;
  fp32.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 8\n gradient_accumulation: 1\n steps: 20\n lr: 0.005";
  TinyBert fp16 = fp32;
  fp16.precision = "compute: fp16\n weights: fp16\n partials: fp16\n accumulators: fp16\n stochastic_rounding: on\n loss_scale: 256";
  auto a = trainerFor(phaseOf(fp32.script()));
  auto b = trainerFor(phaseOf(fp16.script()));
  double la = 0, lb = 0;
  for (int i = 0; i < 20; ++i) {
    auto ra = a->step();
    auto rb = b->step();
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_FALSE(rb->skipped);
    la = ra->loss;
    lb = rb->loss;
  }
  EXPECT_NEAR(lb, la, 0.05 * la);
  // fp16 storage: every weight is an fp16 value.
  for (const auto& [name, w] : b->weights())
    for (Eigen::Index i = 0; i < w.size(); ++i) ASSERT_EQ(emu::fp16::roundNearest(w.data()[i]), w.data()[i]) << name;
}

}  // namespace
}  // namespace ipu::emutest
