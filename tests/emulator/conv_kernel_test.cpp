// The convolutional kernels (runtime/emulator/kernels/conv_kernels.h): finite-
// difference checks of every backward pass (conv_stem, bottleneck,
// basic_block, pooled_fc, and the convolution itself with stride, padding and
// groups), for batch norm and group norm; the convolution against a direct
// loop; fp16 outputs representable and close to fp32; attribute errors.
// fp32 gradient checks use central differences with h = 1e-3 on O(1) values:
// float rounding of objectives of ~100 terms is ~1e-6, ~1e-3 in a difference,
// so the tolerance is 4e-3 + 2% of the difference. Normalisation over few
// values is strongly curved, which is why h is smaller than
// kernel_gradient_test.cpp's 5e-3.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/emulator/kernels/conv_kernels.h"
#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"

namespace ipu::emu {
namespace {

ir::Layer layer(const std::string& op, std::vector<std::pair<std::string, double>> nums,
                std::vector<std::pair<std::string, std::string>> texts = {}) {
  ir::Layer l;
  l.name = op;
  ir::setOpName(l, op);
  for (auto& [k, v] : nums) l.attributes.push_back({k, v, ""});
  for (auto& [k, v] : texts) l.attributes.push_back({k, 0, v});
  return l;
}

Mat randomMat(Eigen::Index r, Eigen::Index c, Stream& s, double scale, double offset = 0) {
  Mat m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(offset + scale * s.normal());
  return m;
}

struct Harness {
  std::unique_ptr<Kernel> kernel;
  std::vector<ParamSpec> specs;
  std::vector<Mat> params;
  MicroBatch mb;
  Mat x, r;

  ShardParams view() const {
    ShardParams p(1);
    for (const auto& m : params) p[0].push_back(&m);
    return p;
  }
  double objective(Numerics nx = Numerics(), Mat* y = nullptr) const {
    Saved sv;
    Mat out;
    HeadResult hr;
    kernel->forward(x, mb, view(), nx, sv, out, kernel->isHead() ? &hr : nullptr);
    if (y != nullptr) *y = out;
    if (kernel->isHead()) return hr.loss;
    EXPECT_EQ(out.rows(), r.rows());
    EXPECT_EQ(out.cols(), r.cols());
    return (out.cast<double>().array() * r.cast<double>().array()).sum();
  }
  void analytic(std::vector<Mat>& dp, Mat& dx) const {
    Numerics nx;
    Saved sv;
    Mat out;
    HeadResult hr;
    kernel->forward(x, mb, view(), nx, sv, out, kernel->isHead() ? &hr : nullptr);
    ShardGrads g(1);
    kernel->backward(x, r, mb, view(), nx, sv, 1.0f, dx, g);
    dp = g[0];
  }
};

Harness make(const ir::Layer& l, Eigen::Index samples, const char* seed) {
  Harness h;
  auto k = makeConvKernel(l);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.error().message);
  if (!k.ok()) return h;
  h.kernel = std::move(k.value());
  h.specs = h.kernel->params();
  Stream s(hashName(seed));
  for (const auto& spec : h.specs)
    h.params.push_back(randomMat(spec.rows, spec.cols, s, spec.cls == ParamClass::Norm ? 0.3 : 0.5,
                                 spec.name.size() > 6 && spec.name.substr(spec.name.size() - 6) == ".gamma" ? 1.0 : 0.0));
  ImageWidths w;
  EXPECT_TRUE(imageWidths(l, w));
  h.x = randomMat(samples, w.in, s, 1.0);
  if (!h.kernel->isHead()) h.r = randomMat(samples, w.out, s, 1.0);
  h.mb.samples = static_cast<int>(samples);
  return h;
}

// ReLU and max pool are not differentiable everywhere, and with batch norm
// every weight moves a whole channel, so a probe of +-h often straddles a
// kink (some ReLU input or a pool's winner changes sign within it). There the
// central difference is meaningless, but the analytic gradient must still be
// the derivative of the piece the point lies on: it must match one of the
// one-sided differences (which then disagree with each other).
void checkGradients(Harness& h, const std::string& what) {
  ASSERT_NE(h.kernel, nullptr) << what;
  std::vector<Mat> dp;
  Mat dx;
  h.analytic(dp, dx);
  ASSERT_EQ(dp.size(), h.params.size()) << what;
  const float eps = 1e-3f;
  const double f0 = h.objective();
  Stream pick(hashName(what));
  int checked = 0, kinks = 0;
  auto probe = [&](float* slot, double analyticValue, const std::string& label) {
    const float saved = *slot;
    *slot = saved + eps;
    const double up = h.objective();
    *slot = saved - eps;
    const double down = h.objective();
    *slot = saved;
    const double fd = (up - down) / (2.0 * eps);
    const double tol = 4e-3 + 2e-2 * std::abs(fd);
    ++checked;
    if (std::abs(analyticValue - fd) <= tol) return;
    const double right = (up - f0) / eps, left = (f0 - down) / eps;
    const double oneSided = 4e-3 + 2e-2 * std::max(std::abs(right), std::abs(left));
    if (std::abs(right - left) > 2 * oneSided &&
        (std::abs(analyticValue - right) <= oneSided || std::abs(analyticValue - left) <= oneSided)) {
      ++kinks;
      return;
    }
    ADD_FAILURE() << what << ": " << label << ": analytic " << analyticValue << ", central difference " << fd;
  };
  for (std::size_t k = 0; k < h.params.size(); ++k) {
    ASSERT_EQ(dp[k].rows(), h.params[k].rows()) << what << " " << h.specs[k].name;
    ASSERT_EQ(dp[k].cols(), h.params[k].cols()) << what << " " << h.specs[k].name;
    for (int n = 0; n < 10; ++n) {
      const auto i = static_cast<Eigen::Index>(pick.below(static_cast<std::uint64_t>(h.params[k].size())));
      probe(h.params[k].data() + i, dp[k].data()[i], h.specs[k].name + "[" + std::to_string(i) + "]");
    }
  }
  ASSERT_EQ(dx.rows(), h.x.rows()) << what;
  ASSERT_EQ(dx.cols(), h.x.cols()) << what;
  for (int n = 0; n < 30; ++n) {
    const auto i = static_cast<Eigen::Index>(pick.below(static_cast<std::uint64_t>(h.x.size())));
    probe(h.x.data() + i, dx.data()[i], "x[" + std::to_string(i) + "]");
  }
  EXPECT_GT(checked, 30);
  // Most probes must be on smooth ground, or the check would rest on one-sided differences alone.
  EXPECT_LE(kinks * 2, checked) << what << ": " << kinks << " of " << checked << " probes straddle a kink";
  std::printf("%s: %d probes, %d across a kink\n", what.c_str(), checked, kinks);
}

const std::vector<std::pair<std::string, std::string>> kBatch = {{"norm", "batch"}};
const std::vector<std::pair<std::string, std::string>> kGroup = {{"norm", "group"}};

TEST(ConvKernelGradients, StemBatchNorm) {
  auto h = make(layer("conv_stem", {{"channels", 3}, {"out", 4}, {"size", 8}}, kBatch), 3, "stem bn");
  checkGradients(h, "conv_stem batch");
}

TEST(ConvKernelGradients, StemGroupNormOddSide) {
  auto h = make(layer("conv_stem", {{"channels", 2}, {"out", 4}, {"size", 7}, {"norm_groups", 2}}, kGroup), 2, "stem gn");
  checkGradients(h, "conv_stem group");
}

TEST(ConvKernelGradients, BottleneckProjectionBatchNorm) {
  auto h = make(layer("bottleneck", {{"inputs", 4}, {"mid", 2}, {"out", 8}, {"stride", 2}, {"size", 6}}, kBatch), 3, "bneck proj");
  EXPECT_EQ(h.specs.size(), 12u);  // three units and the projection
  checkGradients(h, "bottleneck projection batch");
}

TEST(ConvKernelGradients, BottleneckIdentityGroupNorm) {
  auto h = make(layer("bottleneck", {{"inputs", 8}, {"mid", 4}, {"out", 8}, {"stride", 1}, {"size", 4}, {"norm_groups", 2}}, kGroup), 2,
                "bneck id");
  EXPECT_EQ(h.specs.size(), 9u);  // identity shortcut
  checkGradients(h, "bottleneck identity group");
}

TEST(ConvKernelGradients, BasicBlockProjectionBatchNorm) {
  auto h = make(layer("basic_block", {{"inputs", 4}, {"out", 6}, {"stride", 2}, {"size", 5}}, kBatch), 3, "basic proj");
  EXPECT_EQ(h.specs.size(), 9u);
  checkGradients(h, "basic_block projection batch");
}

TEST(ConvKernelGradients, BasicBlockIdentityGroupNorm) {
  auto h = make(layer("basic_block", {{"inputs", 4}, {"out", 4}, {"stride", 1}, {"size", 4}, {"norm_groups", 2}}, kGroup), 2, "basic id");
  EXPECT_EQ(h.specs.size(), 6u);
  checkGradients(h, "basic_block identity group");
}

TEST(ConvKernelGradients, PooledFcWithAndWithoutLabelSmoothing) {
  for (double smoothing : {0.0, 0.1}) {
    auto h = make(layer("pooled_fc", {{"inputs", 4}, {"classes", 5}, {"size", 3}}), 4, "fc");
    h.mb.classLabel = {0, 3, 4, 1};
    h.mb.classifiedRow = {0, 1, 2, 3};
    h.mb.classCount = 6;  // as if the global batch had more
    h.mb.labelSmoothing = smoothing;
    checkGradients(h, "pooled_fc smoothing " + std::to_string(smoothing));
  }
}

// The label-smoothed loss is the cross-entropy against the smoothed target.
TEST(ConvKernels, LabelSmoothingLossMatchesItsDefinition) {
  auto h = make(layer("pooled_fc", {{"inputs", 2}, {"classes", 3}, {"size", 1}}), 1, "ls");
  h.params[0] << 1, 0, 0, 0, 1, 0;   // logits = pooled features, then 0
  h.params[1].setZero();
  h.x.resize(1, 2);
  h.x << 2, -1;
  h.mb.classLabel = {1};
  h.mb.classCount = 1;
  h.mb.labelSmoothing = 0.3;
  const double z[3] = {2, -1, 0};
  const double lse = std::log(std::exp(z[0]) + std::exp(z[1]) + std::exp(z[2]));
  double expected = 0;
  for (int k = 0; k < 3; ++k) expected += ((k == 1 ? 0.7 : 0.0) + 0.1) * (lse - z[k]);
  EXPECT_NEAR(h.objective(), expected, 1e-6);
}

// conv2d with stride, padding and groups: the values against a direct loop,
// the gradients by finite differences.
TEST(ConvKernels, Conv2dStridePaddingGroups) {
  const ConvGeometry g{4, 6, 5, 3, 2, 1, 2};
  ASSERT_EQ(g.outSize(), 3);
  Stream s(hashName("conv2d"));
  Mat x = randomMat(2, 4 * 25, s, 1.0);
  Mat w = randomMat(6, 2 * 9, s, 0.5);
  Numerics nx;
  const Mat y = conv2d(x, w, g, nx);
  ASSERT_EQ(y.cols(), 6 * 9);
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 6; ++o)
      for (int oy = 0; oy < 3; ++oy)
        for (int ox = 0; ox < 3; ++ox) {
          double acc = 0;
          const int grp = o / 3;
          for (int c = 0; c < 2; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
                if (iy < 0 || iy >= 5 || ix < 0 || ix >= 5) continue;
                acc += static_cast<double>(x(n, (grp * 2 + c) * 25 + iy * 5 + ix)) * w(o, (c * 3 + ky) * 3 + kx);
              }
          EXPECT_NEAR(y(n, o * 9 + oy * 3 + ox), acc, 1e-5);
        }
  const Mat r = randomMat(2, 6 * 9, s, 1.0);
  Mat dx, dw;
  conv2dBackward(x, w, r, g, nx, &dx, dw);
  auto f = [&]() { return (conv2d(x, w, g, nx).cast<double>().array() * r.cast<double>().array()).sum(); };
  const float eps = 1e-2f;  // the objective is linear in each input: differences are exact up to rounding
  for (Mat* m : {&x, &w}) {
    const Mat& d = m == &x ? dx : dw;
    for (Eigen::Index i = 0; i < m->size(); i += 7) {
      const float v = m->data()[i];
      m->data()[i] = v + eps;
      const double up = f();
      m->data()[i] = v - eps;
      const double down = f();
      m->data()[i] = v;
      EXPECT_NEAR(d.data()[i], (up - down) / (2 * eps), 1e-3) << (m == &x ? "x" : "w") << i;
    }
  }
}

// Batch norm's statistics span the micro batch: a sample's output depends on
// the others. Group norm's do not.
TEST(ConvKernels, BatchNormCouplesSamplesGroupNormDoesNot) {
  for (const auto& norm : {kBatch, kGroup}) {
    auto h = make(layer("basic_block", {{"inputs", 4}, {"out", 4}, {"stride", 1}, {"size", 4}, {"norm_groups", 2}}, norm), 3, "couple");
    Mat y1, y2;
    h.objective(Numerics(), &y1);
    h.x.row(2) *= 3.0f;
    h.objective(Numerics(), &y2);
    const double change = (y1.topRows(2) - y2.topRows(2)).cwiseAbs().maxCoeff();
    if (norm[0].second == "batch") EXPECT_GT(change, 1e-3);
    else EXPECT_EQ(change, 0.0);
  }
}

// fp16 compute: every output is a binary16 value, and close to fp32.
TEST(ConvKernels, Fp16OutputsAreHalfAndCloseToFp32) {
  const std::vector<ir::Layer> layers = {
      layer("conv_stem", {{"channels", 3}, {"out", 4}, {"size", 8}}, kBatch),
      layer("bottleneck", {{"inputs", 4}, {"mid", 2}, {"out", 8}, {"stride", 2}, {"size", 6}, {"norm_groups", 2}}, kGroup),
      layer("basic_block", {{"inputs", 4}, {"out", 6}, {"stride", 2}, {"size", 5}}, kBatch),
  };
  for (const auto& l : layers) {
    auto h = make(l, 4, "fp16");
    for (auto& m : h.params) fp16::roundNearest(m.data(), static_cast<std::size_t>(m.size()));
    fp16::roundNearest(h.x.data(), static_cast<std::size_t>(h.x.size()));
    Mat y32, y16;
    h.objective(Numerics(), &y32);
    h.objective(Numerics(true, true, false, 1), &y16);
    for (Eigen::Index i = 0; i < y16.size(); ++i) ASSERT_EQ(y16.data()[i], fp16::roundNearest(y16.data()[i])) << ir::opName(l);
    const double scale = y32.cwiseAbs().maxCoeff();
    EXPECT_LT((y32 - y16).cwiseAbs().maxCoeff(), 2e-2 * scale) << ir::opName(l);
    EXPECT_GT((y32 - y16).cwiseAbs().maxCoeff(), 0.0) << ir::opName(l) << ": fp16 changed nothing";
    // Backward in fp16: gradients representable too.
    Saved sv;
    Mat out, dx;
    Numerics nx(true, true, false, 2);
    h.kernel->forward(h.x, h.mb, h.view(), nx, sv, out, nullptr);
    ShardGrads g(1);
    h.kernel->backward(h.x, h.r, h.mb, h.view(), nx, sv, 1.0f, dx, g);
    for (Eigen::Index i = 0; i < dx.size(); ++i) ASSERT_EQ(dx.data()[i], fp16::roundNearest(dx.data()[i])) << ir::opName(l);
    for (const auto& m : g[0])
      for (Eigen::Index i = 0; i < m.size(); ++i) ASSERT_EQ(m.data()[i], fp16::roundNearest(m.data()[i])) << ir::opName(l);
  }
}

TEST(ConvKernels, BadAttributesAreErrors) {
  auto expectError = [](const ir::Layer& l, const std::string& needle) {
    auto k = makeKernel(l, 1, 0);
    ASSERT_FALSE(k.ok()) << ir::opName(l);
    EXPECT_EQ(k.error().code, "IPU5002");
    EXPECT_NE(k.error().message.find(needle), std::string::npos) << k.error().message;
  };
  expectError(layer("bottleneck", {{"inputs", 4}}), "mid");
  expectError(layer("conv_stem", {{"channels", 3}, {"out", 4}, {"size", 7.5}}), "size");
  expectError(layer("conv_stem", {{"channels", 3}, {"out", 6}, {"size", 8}, {"norm_groups", 4}}, kGroup), "groups do not divide");
  expectError(layer("basic_block", {{"inputs", 4}, {"out", 4}, {"stride", 1}, {"size", 4}}, {{"norm", "layer"}}), "norm");
  expectError(layer("basic_block", {{"inputs", 4}, {"out", 4}, {"stride", 0}, {"size", 4}}), "stride");
  expectError(layer("conv_stem", {{"channels", 64}, {"out", 4}, {"size", 1024}}), "16,777,216");
  EXPECT_TRUE(makeKernel(layer("pooled_fc", {{"inputs", 4}, {"classes", 3}, {"size", 2}}), 1, 0).ok());
}

}  // namespace
}  // namespace ipu::emu
