// Finite-difference checks of every kernel's backward pass: for a random
// projection R of the output (or the head's loss), the analytic gradient of
// sum(R * y) with respect to sampled weights and inputs must match central
// differences. Sharded kernels are also checked against their unsharded
// selves. fp32 throughout; the tolerance allows for float rounding in the
// differences (h = 5e-3 on O(1) values: about 1e-4 absolute).
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/kernels/kernel.h"
#include "runtime/emulator/kernels/kernel_ops.h"

namespace ipu::emu {
namespace {

ir::Layer layer(const std::string& op, std::vector<std::pair<std::string, double>> nums,
                std::vector<std::pair<std::string, std::string>> texts = {}, const std::string& tied = "") {
  ir::Layer l;
  l.name = op;
  ir::setOpName(l, op);
  l.tiedTo = tied;
  for (auto& [k, v] : nums) l.attributes.push_back({k, v, ""});
  for (auto& [k, v] : texts) l.attributes.push_back({k, 0, v});
  return l;
}

Mat randomMat(Eigen::Index r, Eigen::Index c, Stream& s, double scale, double offset = 0) {
  Mat m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(offset + scale * s.normal());
  return m;
}

MicroBatch sequenceBatch(int vocab) {
  MicroBatch mb;
  mb.samples = 2;
  mb.seq = 4;
  mb.tokens = {2, 7, 4, 3, 2, 9, vocab - 1, 0};
  mb.segments = {0, 0, 1, 1, 0, 0, 1, 0};
  mb.positions = {0, 1, 2, 3, 0, 1, 2, 3};
  mb.sequenceIds = {0, 0, 1, 1, 0, 0, 0, -1};   // a pack of two, and a padded sample
  mb.maskedRow = {1, 5, 6};
  mb.maskedLabel = {5, 8, 3};
  mb.classifiedRow = {0, 2, 4};
  mb.classLabel = {1, 0, 1};
  mb.nextToken = {7, 4, 3, -1, 9, 6, -1, -1};
  mb.mlmCount = 4;   // as if the global batch had more
  mb.classCount = 3;
  mb.lmCount = 7;
  return mb;
}

struct Harness {
  std::unique_ptr<Kernel> kernel;
  std::vector<ParamSpec> specs;
  std::vector<Mat> full;        // unsharded parameters
  int shards = 1;
  MicroBatch mb;
  Mat x, r;                     // input, output projection

  std::vector<std::vector<Mat>> shardCopies() const {
    std::vector<std::vector<Mat>> c(static_cast<std::size_t>(shards));
    for (int s = 0; s < shards; ++s)
      for (std::size_t k = 0; k < specs.size(); ++k) {
        const Mat& f = full[k];
        if (!kernel->sharded() || specs[k].axis == ShardAxis::None) c[static_cast<std::size_t>(s)].push_back(f);
        else if (specs[k].axis == ShardAxis::Cols) c[static_cast<std::size_t>(s)].push_back(f.middleCols(f.cols() / shards * s, f.cols() / shards));
        else c[static_cast<std::size_t>(s)].push_back(f.middleRows(f.rows() / shards * s, f.rows() / shards));
      }
    return c;
  }
  static ShardParams view(const std::vector<std::vector<Mat>>& c) {
    ShardParams p(c.size());
    for (std::size_t s = 0; s < c.size(); ++s)
      for (const auto& m : c[s]) p[s].push_back(&m);
    return p;
  }
  double objective(Mat* y = nullptr) const {
    auto c = shardCopies();
    Numerics nx;
    Saved sv;
    Mat out;
    HeadResult hr;
    kernel->forward(x, mb, view(c), nx, sv, out, kernel->isHead() ? &hr : nullptr);
    if (y != nullptr) *y = out;
    if (kernel->isHead()) return hr.loss;
    double l = 0;
    for (Eigen::Index i = 0; i < out.size(); ++i) l += static_cast<double>(out.data()[i]) * r.data()[i];
    return l;
  }
  // Analytic gradients: per full parameter, and of the input.
  void analytic(std::vector<Mat>& dparams, Mat& dx) const {
    auto c = shardCopies();
    Numerics nx;
    Saved sv;
    Mat out;
    HeadResult hr;
    kernel->forward(x, mb, view(c), nx, sv, out, kernel->isHead() ? &hr : nullptr);
    ShardGrads g(static_cast<std::size_t>(kernel->sharded() ? shards : 1));
    Numerics nb;
    kernel->backward(x, r, mb, view(c), nb, sv, 1.0f, dx, g);
    dparams.clear();
    for (std::size_t k = 0; k < specs.size(); ++k) {
      Mat d = Mat::Zero(full[k].rows(), full[k].cols());
      if (!kernel->sharded() || specs[k].axis == ShardAxis::None) {
        d = g[0][k];
      } else {
        for (int s = 0; s < shards; ++s) {
          const Mat& part = g[static_cast<std::size_t>(s)][k];
          if (specs[k].axis == ShardAxis::Cols) d.middleCols(part.cols() * s, part.cols()) = part;
          else d.middleRows(part.rows() * s, part.rows()) = part;
        }
      }
      dparams.push_back(d);
    }
  }
};

Harness make(const ir::Layer& l, int shards, int seqLen, Mat x, Eigen::Index outCols) {
  Harness h;
  auto k = makeKernel(l, shards, seqLen);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.error().message);
  h.kernel = std::move(k.value());
  h.specs = h.kernel->params();
  h.shards = shards;
  Stream s(hashName(ir::opName(l) + std::to_string(shards)));
  for (const auto& spec : h.specs)
    h.full.push_back(randomMat(spec.rows, spec.cols, s, spec.cls == ParamClass::Norm ? 0.2 : 0.5,
                               spec.cls == ParamClass::Norm && spec.name == "ln.gamma" ? 1.0 : 0.0));
  h.x = std::move(x);
  const Eigen::Index rows = h.x.rows() > 0 ? h.x.rows() : 8;
  h.r = randomMat(rows, outCols, s, 1.0);
  return h;
}

void checkGradients(Harness& h, const std::string& what) {
  std::vector<Mat> dp;
  Mat dx;
  h.analytic(dp, dx);
  const float eps = 5e-3f;
  Stream pick(hashName(what));
  int checked = 0;
  auto probe = [&](float* slot, double analyticValue, const std::string& label) {
    const float saved = *slot;
    *slot = saved + eps;
    const double up = h.objective();
    *slot = saved - eps;
    const double down = h.objective();
    *slot = saved;
    const double fd = (up - down) / (2.0 * eps);
    EXPECT_NEAR(analyticValue, fd, 2e-3 + 2e-2 * std::abs(fd)) << what << ": " << label;
    ++checked;
  };
  for (std::size_t k = 0; k < h.full.size(); ++k) {
    Mat& p = h.full[k];
    for (int n = 0; n < 12; ++n) {
      const Eigen::Index i = static_cast<Eigen::Index>(pick.below(static_cast<std::uint64_t>(p.size())));
      probe(p.data() + i, dp[k].data()[i], h.specs[k].name + "[" + std::to_string(i) + "]");
    }
  }
  if (h.x.size() > 0) {
    ASSERT_EQ(dx.rows(), h.x.rows()) << what;
    for (int n = 0; n < 24; ++n) {
      const Eigen::Index i = static_cast<Eigen::Index>(pick.below(static_cast<std::uint64_t>(h.x.size())));
      probe(h.x.data() + i, dx.data()[i], "x[" + std::to_string(i) + "]");
    }
  }
  EXPECT_GT(checked, 0);
}

Mat input(Eigen::Index rows, Eigen::Index cols, const char* seed) {
  Stream s(hashName(seed));
  return randomMat(rows, cols, s, 1.0);
}

TEST(KernelGradients, Embedding) {
  auto h = make(layer("embedding", {{"vocab", 16}, {"hidden", 6}, {"positions", 8}, {"types", 2}, {"seq", 4}}), 1, 4, Mat(), 6);
  h.mb = sequenceBatch(16);
  checkGradients(h, "embedding");
}

TEST(KernelGradients, AttentionPostNorm) {
  auto h = make(layer("attention", {{"hidden", 8}, {"heads", 2}, {"seq", 4}, {"causal", 0}}, {{"norm", "post"}}), 1, 4, input(8, 8, "a"), 8);
  h.mb = sequenceBatch(11);
  checkGradients(h, "attention post");
}

TEST(KernelGradients, AttentionPreNormCausal) {
  auto h = make(layer("attention", {{"hidden", 8}, {"heads", 2}, {"seq", 4}, {"causal", 1}}, {{"norm", "pre"}}), 1, 4, input(8, 8, "b"), 8);
  h.mb = sequenceBatch(11);
  checkGradients(h, "attention pre causal");
}

TEST(KernelGradients, AttentionShardedOverTwo) {
  auto h = make(layer("attention", {{"hidden", 8}, {"heads", 2}, {"seq", 4}}, {{"norm", "post"}}), 2, 4, input(8, 8, "c"), 8);
  h.mb = sequenceBatch(11);
  checkGradients(h, "attention t=2");
}

TEST(KernelGradients, FfnPostNorm) {
  auto h = make(layer("ffn", {{"hidden", 6}, {"intermediate", 10}, {"seq", 4}}, {{"norm", "post"}}), 1, 4, input(8, 6, "d"), 6);
  h.mb = sequenceBatch(11);
  checkGradients(h, "ffn post");
}

TEST(KernelGradients, FfnPreNormShardedOverTwo) {
  auto h = make(layer("ffn", {{"hidden", 6}, {"intermediate", 10}, {"seq", 4}}, {{"norm", "pre"}}), 2, 4, input(8, 6, "e"), 6);
  h.mb = sequenceBatch(11);
  checkGradients(h, "ffn pre t=2");
}

TEST(KernelGradients, MlmHead) {
  auto h = make(layer("mlm_head", {{"hidden", 6}, {"vocab", 11}, {"seq", 4}}, {{"tie", "embedding"}}, "embedding"), 1, 4, input(8, 6, "f"), 6);
  h.mb = sequenceBatch(11);
  checkGradients(h, "mlm_head");
}

TEST(KernelGradients, PooledClassifier) {
  auto h = make(layer("pooled_classifier", {{"hidden", 6}, {"classes", 2}, {"seq", 4}}), 1, 4, input(8, 6, "g"), 6);
  h.mb = sequenceBatch(11);
  checkGradients(h, "pooled_classifier");
}

TEST(KernelGradients, PooledClassifierWithLabelSmoothing) {
  auto h = make(layer("pooled_classifier", {{"hidden", 6}, {"classes", 2}, {"seq", 4}}), 1, 4, input(8, 6, "g"), 6);
  h.mb = sequenceBatch(11);
  h.mb.labelSmoothing = 0.2;
  checkGradients(h, "pooled_classifier, label smoothing 0.2");
}

TEST(KernelGradients, LmHead) {
  auto h = make(layer("lm_head", {{"hidden", 6}, {"vocab", 11}, {"seq", 4}}, {{"tie", "embedding"}}, "embedding"), 1, 4, input(8, 6, "h"), 6);
  h.mb = sequenceBatch(11);
  checkGradients(h, "lm_head");
}

TEST(KernelGradients, DenseOnFeaturesAndOnInput) {
  for (const char* act : {"gelu", "tanh", "relu", "none"}) {
    auto first = make(layer("dense", {{"inputs", 5}, {"outputs", 4}}, {{"activation", act}}), 1, 0, Mat(), 4);
    first.mb.samples = 8;
    first.mb.features = input(8, 5, "i");
    checkGradients(first, std::string("dense first ") + act);
    auto inner = make(layer("dense", {{"inputs", 5}, {"outputs", 4}}, {{"activation", act}}), 1, 0, input(8, 5, "j"), 4);
    inner.mb.samples = 8;
    checkGradients(inner, std::string("dense ") + act);
  }
}

TEST(KernelGradients, SoftmaxLoss) {
  auto h = make(layer("softmax_loss", {{"classes", 3}}), 1, 0, input(4, 3, "k"), 3);
  h.mb.samples = 4;
  h.mb.classifiedRow = {0, 1, 2, 3};
  h.mb.classLabel = {0, 2, 1, 2};
  h.mb.classCount = 4;
  checkGradients(h, "softmax_loss");
  h.mb.labelSmoothing = 0.3;
  checkGradients(h, "softmax_loss, label smoothing 0.3");
}

// With label smoothing e the loss is the cross-entropy against the target
// 1 - e on the label plus e / classes on every class, -sum_j t_j log p_j,
// computed here from the log-probabilities in double (crossEntropy uses
// lse - (1 - e) z_label - e mean(z)); the gradient is (p - t) times the scale.
TEST(Kernels, CrossEntropyWithLabelSmoothingIsTheSmoothedTargetsLoss) {
  Stream s(hashName("smoothing"));
  const Mat logits = randomMat(5, 7, s, 3.0);
  const std::vector<int> labels = {0, 6, 3, 3, 1};
  for (double e : {0.0, 0.1, 0.5}) {
    Mat grad;
    double correct = 0;
    const double got = crossEntropy(logits, labels, &correct, &grad, 2.0f, e);
    double want = 0, right = 0;
    for (Eigen::Index i = 0; i < logits.rows(); ++i) {
      double mx = -1e30, sum = 0;
      Eigen::Index arg = 0;
      for (Eigen::Index j = 0; j < logits.cols(); ++j)
        if (logits(i, j) > mx) mx = logits(i, j), arg = j;
      for (Eigen::Index j = 0; j < logits.cols(); ++j) sum += std::exp(logits(i, j) - mx);
      right += arg == labels[static_cast<std::size_t>(i)] ? 1 : 0;
      for (Eigen::Index j = 0; j < logits.cols(); ++j) {
        const double t = (j == labels[static_cast<std::size_t>(i)] ? 1 - e : 0.0) + e / static_cast<double>(logits.cols());
        const double logP = logits(i, j) - mx - std::log(sum);
        want -= t * logP;
        EXPECT_NEAR(grad(i, j), 2.0 * (std::exp(logP) - t), 1e-6) << "e " << e << " (" << i << ", " << j << ")";
      }
    }
    EXPECT_NEAR(got, want, 1e-5 * std::abs(want)) << "e " << e;
    EXPECT_EQ(correct, right);
  }
  // Smoothing changes the loss (a test of the parameter reaching it).
  EXPECT_GT(std::abs(crossEntropy(logits, labels, nullptr, nullptr, 1.0f, 0.1) - crossEntropy(logits, labels, nullptr, nullptr, 1.0f)),
            1e-3);
}

// Splitting heads or intermediate units over shards changes only the order of
// a sum: outputs and gradients agree with the unsharded kernel to float rounding.
TEST(KernelGradients, ShardedMatchesUnsharded) {
  for (const char* op : {"attention", "ffn"}) {
    const bool attn = std::string(op) == "attention";
    auto l = attn ? layer(op, {{"hidden", 8}, {"heads", 4}, {"seq", 4}}, {{"norm", "pre"}})
                  : layer(op, {{"hidden", 8}, {"intermediate", 12}, {"seq", 4}}, {{"norm", "post"}});
    auto one = make(l, 1, 4, input(8, 8, "m"), 8);
    auto two = make(l, 2, 4, input(8, 8, "m"), 8);
    two.full = one.full;
    two.r = one.r;
    one.mb = two.mb = sequenceBatch(11);
    Mat y1, y2;
    one.objective(&y1);
    two.objective(&y2);
    EXPECT_LT((y1 - y2).cwiseAbs().maxCoeff(), 1e-5) << op;
    std::vector<Mat> d1, d2;
    Mat dx1, dx2;
    one.analytic(d1, dx1);
    two.analytic(d2, dx2);
    EXPECT_LT((dx1 - dx2).cwiseAbs().maxCoeff(), 1e-5) << op;
    for (std::size_t k = 0; k < d1.size(); ++k) EXPECT_LT((d1[k] - d2[k]).cwiseAbs().maxCoeff(), 1e-5) << op << " " << one.specs[k].name;
  }
}

// ------------------------------------------------ GroupBERT and ViT kernels

// The convolution's taps (3 and 4: "same" padding, odd and even) reach across
// the boundary between the packed sequences of sample 0 and into padding;
// sequenceBatch's ids make those taps zero.
TEST(KernelGradients, ConvModule) {
  for (int taps : {3, 4}) {
    auto h = make(layer("conv_module", {{"hidden", 8}, {"kernel", static_cast<double>(taps)}, {"groups", 2}, {"seq", 4}}), 1, 4,
                  input(8, 8, "n"), 8);
    h.mb = sequenceBatch(11);
    checkGradients(h, "conv_module kernel " + std::to_string(taps));
  }
}

TEST(KernelGradients, GroupedFfn) {
  auto h = make(layer("grouped_ffn", {{"hidden", 8}, {"intermediate", 12}, {"groups", 4}, {"seq", 4}}), 1, 4, input(8, 8, "o"), 8);
  h.mb = sequenceBatch(11);
  checkGradients(h, "grouped_ffn");
}

TEST(KernelGradients, GroupedFfnShardedOverTwo) {
  auto h = make(layer("grouped_ffn", {{"hidden", 8}, {"intermediate", 12}, {"groups", 4}, {"seq", 4}}), 2, 4, input(8, 8, "p"), 8);
  h.mb = sequenceBatch(11);
  checkGradients(h, "grouped_ffn t=2");
}

TEST(KernelGradients, LayerNorm) {
  auto h = make(layer("layer_norm", {{"hidden", 6}, {"seq", 4}}), 1, 4, input(8, 6, "q"), 6);
  h.mb = sequenceBatch(11);
  checkGradients(h, "layer_norm");
}

// Two images of 3 channels, 4 x 4 pixels, patches of 2: 4 patches and a class
// token per image.
MicroBatch imageBatch() {
  MicroBatch mb;
  mb.samples = 2;
  mb.seq = 5;
  mb.sequenceIds.assign(10, 0);
  mb.features = input(2, 48, "image");
  mb.classLabel = {2, 0};
  mb.classCount = 3;
  return mb;
}

TEST(KernelGradients, PatchEmbedding) {
  auto h = make(layer("patch_embedding", {{"patch", 2}, {"channels", 3}, {"hidden", 6}, {"image", 4}}), 1, 5, Mat(), 6);
  h.mb = imageBatch();
  h.r = input(10, 6, "patch projection");
  checkGradients(h, "patch_embedding");
}

TEST(KernelGradients, TokenClassifier) {
  auto h = make(layer("token_classifier", {{"hidden", 6}, {"classes", 3}, {"seq", 5}}), 1, 5, input(10, 6, "r"), 3);
  h.mb = imageBatch();
  checkGradients(h, "token_classifier");
  h.mb.labelSmoothing = 0.1;
  checkGradients(h, "token_classifier, label smoothing 0.1");
}

// The patch embedding reads pixels where the documented layout puts them:
// channel-major images, patches row-major, each patch's vector in (channel,
// row, column) order; the class token is each image's first row.
TEST(Kernels, PatchEmbeddingLayout) {
  auto k = makeKernel(layer("patch_embedding", {{"patch", 2}, {"channels", 3}, {"hidden", 48}, {"image", 4}}), 1, 5);
  ASSERT_TRUE(k.ok());
  const auto specs = (*k)->params();
  ASSERT_EQ(specs.size(), 4u);
  std::vector<Mat> w;
  for (const auto& s : specs) w.push_back(Mat::Zero(s.rows, s.cols));
  w[0] = Mat::Identity(12, 48);   // projection: hidden unit j reads patch element j (j < 12)
  w[3](0, 0) = 5;                 // the class token
  MicroBatch mb = imageBatch();
  for (Eigen::Index i = 0; i < 48; ++i) mb.features(1, i) = static_cast<float>(i);
  std::vector<const Mat*> ptrs;
  for (const auto& m : w) ptrs.push_back(&m);
  Numerics nx;
  Saved sv;
  Mat y;
  (*k)->forward(Mat(), mb, ShardParams{ptrs}, nx, sv, y, nullptr);
  ASSERT_EQ(y.rows(), 10);
  EXPECT_EQ(y(5, 0), 5.0f);   // image 1's class token
  // Image 1, patch 3 (bottom right): channel c, row 2 + dy, column 2 + dx is pixel c * 16 + (2 + dy) * 4 + 2 + dx.
  for (int c = 0; c < 3; ++c)
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx) EXPECT_EQ(y(5 + 4, (c * 2 + dy) * 2 + dx), static_cast<float>(c * 16 + (2 + dy) * 4 + 2 + dx));
}

// The convolution runs along each sequence only: changing one packed sequence
// (or the padding) changes no output of another.
TEST(Kernels, ConvModuleStaysInsideSequences) {
  auto h = make(layer("conv_module", {{"hidden", 8}, {"kernel", 5}, {"groups", 2}, {"seq", 4}}), 1, 4, input(8, 8, "s"), 8);
  h.mb = sequenceBatch(11);   // sample 0: ids 0 0 1 1; sample 1: 0 0 0 -1
  Mat before, after;
  h.objective(&before);
  h.x.row(2).array() += 1.0f;   // sample 0, sequence 1
  h.x.row(7).array() -= 1.0f;   // sample 1, padding
  h.objective(&after);
  for (int r : {0, 1, 4, 5, 6}) EXPECT_EQ((before.row(r) - after.row(r)).cwiseAbs().maxCoeff(), 0.0f) << "row " << r;
  EXPECT_GT((before.row(3) - after.row(3)).cwiseAbs().maxCoeff(), 0.0f);   // row 2's own neighbour does change
}

// How far fp32 rounding lets a grouped FFN's output (y = x + W2
// GELU(W1 z + b1) + b2, z = LN(x)) move when only its first product's
// columns are split over shards, element by element. z is the same in both
// (the same code on the same rows), and so is everything after the first
// product, which on the IPUs of a shard is a product of fewer columns of W1:
// its sums are those of the whole product, but Eigen orders a column's sum
// by the product's width and the instruction set (the shard's outputs are
// bit-identical on some hosts and a few ulp away on others). So the bound is
// two summation orders of W1 z + b1 (each within gamma_(h+1) sum |z||W1| +
// |b1| of the exact value; Higham, "Accuracy and Stability", 3.1), carried
// through GELU (slope at most 1.13, and each evaluation's own error, taken
// as 8 u of its input: the erf approximation and four roundings), the
// grouped product (its own rounding of the moved values, gamma_(i/g)) and
// the two additions (one rounding each, in each of the two). |z_m| is at most
// |gamma_m| sqrt(h - 1) + |beta_m|: a normalised row of h values has none
// beyond sqrt(h - 1).
Eigen::ArrayXXd groupedFfnShardingBound(const Harness& h, int groups) {
  const double u = std::ldexp(1.0, -24);
  const auto g = [u](Eigen::Index n) { return static_cast<double>(n) * u / (1 - static_cast<double>(n) * u); };
  const Mat &w1 = h.full[0], &b1 = h.full[1], &w2 = h.full[2], &b2 = h.full[3], &lnGamma = h.full[4], &lnBeta = h.full[5];
  const Eigen::Index hidden = w1.rows(), inter = w1.cols(), ig = inter / groups, og = w2.cols();
  Eigen::ArrayXd z(hidden), a(inter), dAct(inter);
  for (Eigen::Index m = 0; m < hidden; ++m)
    z(m) = (std::abs(lnGamma(0, m)) * std::sqrt(static_cast<double>(hidden - 1)) + std::abs(lnBeta(0, m))) * (1 + g(4));
  for (Eigen::Index k = 0; k < inter; ++k) {
    a(k) = std::abs(b1(0, k));   // bounds |h1_k| and the sum of its terms' magnitudes
    for (Eigen::Index m = 0; m < hidden; ++m) a(k) += z(m) * std::abs(w1(m, k));
    dAct(k) = 1.13 * 2 * g(hidden + 1) * a(k) + 2 * 8 * u * a(k);   // |GELU(v)| <= |v|
  }
  Eigen::ArrayXXd bound(h.x.rows(), hidden);
  for (Eigen::Index c = 0; c < hidden; ++c) {
    const Eigen::Index j = c / og, q = c % og;   // group j's block of w2, its column q
    double p = 0, dPart = 0;
    for (Eigen::Index k = j * ig; k < (j + 1) * ig; ++k) {
      p += std::abs(w2(k, q)) * a(k);
      dPart += std::abs(w2(k, q)) * dAct(k);
    }
    dPart += 2 * g(ig) * p;
    const double o = p + std::abs(b2(0, c));
    for (Eigen::Index r = 0; r < h.x.rows(); ++r) bound(r, c) = dPart + 2 * u * o + 2 * u * (std::abs(h.x(r, c)) + o);
  }
  return bound;
}

// Splitting a grouped FFN's groups over shards assembles the same outputs
// (the all-reduce adds zeros outside each shard's features, exactly) to the
// rounding of the first product's sums (groupedFfnShardingBound), and the
// same gradients to float rounding (the input gradient is a sum split over
// shards).
TEST(KernelGradients, GroupedFfnShardedMatchesUnsharded) {
  auto l = layer("grouped_ffn", {{"hidden", 8}, {"intermediate", 16}, {"groups", 4}, {"seq", 4}});
  auto one = make(l, 1, 4, input(8, 8, "t"), 8);
  auto four = make(l, 4, 4, input(8, 8, "t"), 8);
  four.full = one.full;
  four.r = one.r;
  one.mb = four.mb = sequenceBatch(11);
  Mat y1, y4;
  one.objective(&y1);
  four.objective(&y4);
  const Eigen::ArrayXXd bound = groupedFfnShardingBound(one, 4);
  EXPECT_LT(bound.maxCoeff(), 1e-4 * y1.cwiseAbs().maxCoeff()) << "the bound would hide a misplaced feature";
  for (Eigen::Index r = 0; r < y1.rows(); ++r)
    for (Eigen::Index c = 0; c < y1.cols(); ++c)
      EXPECT_LE(std::abs(static_cast<double>(y1(r, c)) - y4(r, c)), bound(r, c)) << "row " << r << ", feature " << c;
  std::vector<Mat> d1, d4;
  Mat dx1, dx4;
  one.analytic(d1, dx1);
  four.analytic(d4, dx4);
  EXPECT_LT((dx1 - dx4).cwiseAbs().maxCoeff(), 1e-5);
  for (std::size_t k = 0; k < d1.size(); ++k) EXPECT_LT((d1[k] - d4[k]).cwiseAbs().maxCoeff(), 1e-5) << one.specs[k].name;
  EXPECT_FALSE(makeKernel(l, 3, 4).ok()) << "4 groups do not split over 3 shards";
}

// In fp16 every tensor a kernel returns (output, input and weight gradients)
// holds binary16 values only, and they follow the fp32 results to fp16's
// precision (each within 3% of its tensor's largest element: a few roundings
// of 2^-11 each, through LayerNorm and GELU).
TEST(Kernels, SequenceKernelsInFp16) {
  struct Case {
    ir::Layer l;
    int shards, seq;
    Mat x;
    Eigen::Index outCols;
    bool image;
  };
  std::vector<Case> cases;
  cases.push_back({layer("conv_module", {{"hidden", 32}, {"kernel", 3}, {"groups", 4}, {"seq", 4}}), 1, 4, input(8, 32, "u"), 32, false});
  cases.push_back({layer("grouped_ffn", {{"hidden", 32}, {"intermediate", 64}, {"groups", 4}, {"seq", 4}}), 2, 4, input(8, 32, "v"), 32, false});
  cases.push_back({layer("layer_norm", {{"hidden", 32}, {"seq", 4}}), 1, 4, input(8, 32, "w"), 32, false});
  cases.push_back({layer("patch_embedding", {{"patch", 2}, {"channels", 3}, {"hidden", 32}, {"image", 4}}), 1, 5, Mat(), 32, true});
  cases.push_back({layer("token_classifier", {{"hidden", 32}, {"classes", 3}, {"seq", 5}}), 1, 5, input(10, 32, "x"), 3, true});
  for (auto& c : cases) {
    auto h = make(c.l, c.shards, c.seq, c.x, c.outCols);
    h.mb = c.image ? imageBatch() : sequenceBatch(11);
    if (c.image && c.x.size() == 0) h.r = input(10, 32, "fp16 projection");
    for (auto& m : h.full) roundToHalf(m.data(), static_cast<std::size_t>(m.size()), false, 0);
    roundToHalf(h.x.data(), static_cast<std::size_t>(h.x.size()), false, 0);
    roundToHalf(h.r.data(), static_cast<std::size_t>(h.r.size()), false, 0);
    auto run = [&](bool fp16, Mat& y, Mat& dx, ShardGrads& g) {
      auto copies = h.shardCopies();
      Numerics nx(fp16, fp16, false, 99);
      Saved sv;
      HeadResult hr;
      h.kernel->forward(h.x, h.mb, Harness::view(copies), nx, sv, y, h.kernel->isHead() ? &hr : nullptr);
      g.assign(static_cast<std::size_t>(h.kernel->sharded() ? h.shards : 1), {});
      h.kernel->backward(h.x, h.r, h.mb, Harness::view(copies), nx, sv, 1.0f, dx, g);
    };
    Mat y32, y16, dx32, dx16;
    ShardGrads g32, g16;
    run(false, y32, dx32, g32);
    run(true, y16, dx16, g16);
    const std::string what = ir::opName(c.l);
    auto isHalf = [](const Mat& m) {
      Mat r = m;
      roundToHalf(r.data(), static_cast<std::size_t>(r.size()), false, 0);
      return r == m;
    };
    auto close = [&](const Mat& a, const Mat& b, const std::string& name) {
      ASSERT_EQ(a.rows(), b.rows()) << what << " " << name;
      if (a.size() == 0) return;
      EXPECT_TRUE(isHalf(b)) << what << " " << name << " is not binary16";
      const float scale = std::max(a.cwiseAbs().maxCoeff(), 1e-3f);
      EXPECT_LT((a - b).cwiseAbs().maxCoeff(), 0.03f * scale) << what << " " << name;
    };
    close(y32, y16, "output");
    close(dx32, dx16, "input gradient");
    for (std::size_t s = 0; s < g32.size(); ++s)
      for (std::size_t k = 0; k < g32[s].size(); ++k) close(g32[s][k], g16[s][k], h.specs[k].name);
  }
}

// A kernel's parameters are what its layer definition's `params` formula
// counts (stdlib/layers.ipu), so the plan holds what the emulator holds.
TEST(Kernels, SequenceKernelParameterCountsMatchTheFormulas) {
  auto count = [](const ir::Layer& l, long long seqLen = 5) {
    auto k = makeKernel(l, 1, seqLen);
    EXPECT_TRUE(k.ok()) << ir::opName(l);
    double n = 0;
    if (k.ok())
      for (const auto& s : (*k)->params()) n += static_cast<double>(s.rows * s.cols);
    return n;
  };
  const double h = 48, kernel = 7, groups = 4, inter = 96, patch = 4, channels = 3, image = 16, classes = 10;
  EXPECT_EQ(count(layer("conv_module", {{"hidden", h}, {"kernel", kernel}, {"groups", groups}, {"seq", 5}})),
            2 * h + 2 * h * h + 2 * h + kernel * h + h + h * h / groups + h);
  EXPECT_EQ(count(layer("grouped_ffn", {{"hidden", h}, {"intermediate", inter}, {"groups", groups}, {"seq", 5}})),
            h * inter + inter + inter * h / groups + h + 2 * h);
  EXPECT_EQ(count(layer("layer_norm", {{"hidden", h}, {"seq", 5}})), 2 * h);
  const double patches = (image / patch) * (image / patch);
  auto pe = layer("patch_embedding", {{"patch", patch}, {"channels", channels}, {"hidden", h}, {"image", image}});
  EXPECT_EQ(count(pe, static_cast<long long>(patches) + 1), patch * patch * channels * h + h + (patches + 1) * h + h);
  EXPECT_EQ(count(layer("token_classifier", {{"hidden", h}, {"classes", classes}, {"seq", 5}})), 2 * h + h * classes + classes);
}

TEST(Kernels, UnsupportedOpIsAnError) {
  auto k = makeKernel(layer("bottleneck", {{"inputs", 4}}), 1, 0);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, "IPU5002");
  auto bad = makeKernel(layer("attention", {{"hidden", 8}, {"heads", 3}, {"seq", 4}}), 1, 4);
  ASSERT_FALSE(bad.ok());
  auto split = makeKernel(layer("attention", {{"hidden", 8}, {"heads", 2}, {"seq", 4}}), 4, 4);
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.error().message.find("split"), std::string::npos);
}

}  // namespace
}  // namespace ipu::emu
