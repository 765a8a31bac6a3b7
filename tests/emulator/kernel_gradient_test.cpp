// Finite-difference checks of every kernel's backward pass: for a random
// projection R of the output (or the head's loss), the analytic gradient of
// sum(R * y) with respect to sampled weights and inputs must match central
// differences. Sharded kernels are also checked against their unsharded
// selves. fp32 throughout; the tolerance allows for float rounding in the
// differences (h = 5e-3 on O(1) values: about 1e-4 absolute).
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/kernel.h"

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
