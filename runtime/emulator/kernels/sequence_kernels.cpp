// GroupBERT's and ViT's kernels (sequence_kernels.h). Conventions as in
// kernels.cpp: row-major [rows, features] tensors, weights [inputs, outputs]
// (y = x W); every tensor a kernel outputs or keeps is rounded to the compute
// type by Numerics; statistics are fp32. Gradients of parameters a kernel
// replicates over its shard group are returned in shard 0's slot.
#include "runtime/emulator/kernels/sequence_kernels.h"

#include <cmath>
#include <string>

#include "runtime/emulator/kernels/kernel_ops.h"

namespace ipu::emu {

namespace {

// ------------------------------------------------------- grouped projection

// y = x W for a block-diagonal W of `groups` blocks stored as [in, out/g]
// (sequence_kernels.h): one product per group, each reducing over its own
// in/g features (so fp16 partials accumulate over the group's depth only).
Mat groupedForward(const Mat& x, const Mat& w, int groups, Numerics& nx) {
  const Eigen::Index ig = x.cols() / groups, og = w.cols();
  Mat y(x.rows(), og * groups);
  for (int k = 0; k < groups; ++k) {
    const Mat xk = x.middleCols(k * ig, ig);
    const Mat wk = w.middleRows(k * ig, ig);
    y.middleCols(k * og, og) = nx.mm(xk, wk);
  }
  return y;
}

// The weight gradient (x^T dy per block, stacked as W is) and the input
// gradient (dy W^T per block).
void groupedBackward(const Mat& x, const Mat& dy, const Mat& w, int groups, Numerics& nx, Mat& dw, Mat* dx) {
  const Eigen::Index ig = x.cols() / groups, og = w.cols();
  dw.resize(w.rows(), w.cols());
  if (dx != nullptr) dx->resize(x.rows(), x.cols());
  for (int k = 0; k < groups; ++k) {
    const Mat xk = x.middleCols(k * ig, ig);
    const Mat dyk = dy.middleCols(k * og, og);
    dw.middleRows(k * ig, ig) = nx.mmTN(xk, dyk);
    if (dx != nullptr) dx->middleCols(k * ig, ig) = nx.mmNT(dyk, w.middleRows(k * ig, ig));
  }
}

// ----------------------------------------------------- depthwise convolution

// Whether rows r and r2 (sample b, position p is row b * seq + p) are in the
// same sequence: the same sample and, in a packed sample, the same sequence
// id (padding, id -1, neighbours only padding, as it attends only to padding).
bool sameSequence(const MicroBatch& mb, Eigen::Index r, Eigen::Index r2) {
  if (r2 < 0 || r2 >= static_cast<Eigen::Index>(mb.samples) * mb.seq) return false;
  if (r / mb.seq != r2 / mb.seq) return false;
  return mb.sequenceIds.empty() || mb.sequenceIds[static_cast<std::size_t>(r)] == mb.sequenceIds[static_cast<std::size_t>(r2)];
}

// c[r] = sum_j w[j] * in[r + j - left] over the taps whose row is in r's
// sequence ("same" padding: left = (K - 1) / 2 taps before, the rest after,
// as PyTorch's padding="same"), then + bias. fp32 sums, one rounding.
Mat depthwiseForward(const Mat& in, const Mat& w, const Mat& bias, const MicroBatch& mb, Numerics& nx) {
  const Eigen::Index n = in.rows(), taps = w.rows(), left = (taps - 1) / 2;
  Mat c(n, in.cols());
  nx.parallelChunks(static_cast<std::size_t>(n), rowGrain(in.cols() * taps), [&](std::size_t b, std::size_t e) {
    for (auto r = static_cast<Eigen::Index>(b); r < static_cast<Eigen::Index>(e); ++r) {
      c.row(r).setZero();
      for (Eigen::Index j = 0; j < taps; ++j) {
        const Eigen::Index r2 = r + j - left;
        if (sameSequence(mb, r, r2)) c.row(r).array() += w.row(j).array() * in.row(r2).array();
      }
      c.row(r) += bias.row(0);
    }
  });
  nx.round(c);
  return c;
}

// The input gradient (each row gathers the taps that read it) and the tap
// weights' gradient (each tap a sum over rows in row order: deterministic).
void depthwiseBackward(const Mat& in, const Mat& dc, const Mat& w, const MicroBatch& mb, Numerics& nx, Mat& din, Mat& dw) {
  const Eigen::Index n = in.rows(), taps = w.rows(), left = (taps - 1) / 2;
  din.resize(n, in.cols());
  nx.parallelChunks(static_cast<std::size_t>(n), rowGrain(in.cols() * taps), [&](std::size_t b, std::size_t e) {
    for (auto r2 = static_cast<Eigen::Index>(b); r2 < static_cast<Eigen::Index>(e); ++r2) {
      din.row(r2).setZero();
      for (Eigen::Index j = 0; j < taps; ++j) {
        const Eigen::Index r = r2 - j + left;   // the output row whose tap j reads r2
        if (sameSequence(mb, r2, r)) din.row(r2).array() += w.row(j).array() * dc.row(r).array();
      }
    }
  });
  nx.round(din);
  dw.resize(taps, in.cols());
  nx.parallelFor(static_cast<std::size_t>(taps), [&](std::size_t jj) {
    const auto j = static_cast<Eigen::Index>(jj);
    Eigen::Array<float, 1, Eigen::Dynamic> acc = Eigen::Array<float, 1, Eigen::Dynamic>::Zero(in.cols());
    for (Eigen::Index r = 0; r < n; ++r) {
      const Eigen::Index r2 = r + j - left;
      if (sameSequence(mb, r, r2)) acc += dc.row(r).array() * in.row(r2).array();
    }
    dw.row(j) = acc.matrix();
  });
  nx.round(dw);
}

// ---------------------------------------------------------- conv module

class ConvModuleKernel : public Kernel {
 public:
  ConvModuleKernel(int hidden, int kernel, int groups) : h_(hidden), k_(kernel), g_(groups) {}
  std::vector<ParamSpec> params() const override {
    return {{"ln.gamma", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 1, ""},
            {"ln.beta", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 0, ""},
            {"glu.w", h_, 2 * h_, ParamClass::Weight, ShardAxis::None, kInitStd, 0, ""},
            {"glu.b", 1, 2 * h_, ParamClass::Bias, ShardAxis::None, 0, 0, ""},
            {"conv.w", k_, h_, ParamClass::Weight, ShardAxis::None, kInitStd, 0, ""},
            {"conv.b", 1, h_, ParamClass::Bias, ShardAxis::None, 0, 0, ""},
            {"proj.w", h_, h_ / g_, ParamClass::Weight, ShardAxis::None, kInitStd, 0, ""},
            {"proj.b", 1, h_, ParamClass::Bias, ShardAxis::None, 0, 0, ""}};
  }
  // Saved: 0 LN output, 1-2 LN stats, 3 GLU input [rows, 2h], 4 sigmoid of
  // the gate, 5 GLU output, 6 convolution output, 7 its GELU.
  void forward(const Mat& x, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult*) const override {
    const auto& w = p[0];
    saved.mats.assign(8, Mat());
    auto& m = saved.mats;
    layerNormForward(x, *w[0], *w[1], nx, m[0], m[1], m[2]);
    m[3] = nx.mm(m[0], *w[2]);
    addRow(m[3], *w[3]);
    nx.round(m[3]);
    m[4] = (1.0f + (-m[3].rightCols(h_).array()).exp()).inverse().matrix();
    nx.round(m[4]);
    m[5] = (m[3].leftCols(h_).array() * m[4].array()).matrix();
    nx.round(m[5]);
    m[6] = depthwiseForward(m[5], *w[4], *w[5], mb, nx);
    m[7] = gelu(m[6], nx);
    Mat o = groupedForward(m[7], *w[6], g_, nx);
    addRow(o, *w[7]);
    nx.round(o);
    y = x + o;
    nx.round(y);
  }
  void backward(const Mat& x, const Mat& dy, const MicroBatch& mb, const ShardParams& p, Numerics& nx, const Saved& saved,
                float, Mat& dx, ShardGrads& grads) const override {
    const auto& w = p[0];
    const auto& m = saved.mats;
    auto& g = grads[0];
    g.assign(8, Mat());
    g[7] = columnSums(dy, nx);
    Mat dact;
    groupedBackward(m[7], dy, *w[6], g_, nx, g[6], &dact);
    const Mat dc = geluBackward(dact, m[6], nx);
    g[5] = columnSums(dc, nx);
    Mat dglu;
    depthwiseBackward(m[5], dc, *w[4], mb, nx, dglu, g[4]);
    // GLU: out = value * s, s = sigmoid(gate): d value = dout s, d gate = dout value s (1 - s).
    Mat da(x.rows(), 2 * h_);
    da.leftCols(h_) = (dglu.array() * m[4].array()).matrix();
    da.rightCols(h_) = (dglu.array() * m[3].leftCols(h_).array() * m[4].array() * (1.0f - m[4].array())).matrix();
    nx.round(da);
    g[3] = columnSums(da, nx);
    g[2] = nx.mmTN(m[0], da);
    const Mat du = nx.mmNT(da, *w[2]);
    dx = layerNormBackward(du, m[1], m[2], *w[0], nx, g[0], g[1]);
    dx += dy;
    nx.round(dx);
  }

 private:
  int h_, k_, g_;
};

// ---------------------------------------------------------- grouped ffn

// Tensor sharding splits the groups: IPU s of t holds the columns of w1, b1
// for its groups' intermediate units and the rows of w2 (its blocks), so it
// computes the output features of its groups; an all-reduce of the partial
// outputs (zero outside each IPU's features, so the sum is exact) assembles
// them, and another sums the IPUs' input gradients.
class GroupedFfnKernel : public Kernel {
 public:
  GroupedFfnKernel(int hidden, int intermediate, int groups, int shards) : h_(hidden), i_(intermediate), g_(groups), t_(shards) {}
  bool sharded() const override { return t_ > 1; }
  std::vector<ParamSpec> params() const override {
    return {{"w1", h_, i_, ParamClass::Weight, ShardAxis::Cols, kInitStd, 0, ""},
            {"b1", 1, i_, ParamClass::Bias, ShardAxis::Cols, 0, 0, ""},
            {"w2", i_, h_ / g_, ParamClass::Weight, ShardAxis::Rows, kInitStd, 0, ""},
            {"b2", 1, h_, ParamClass::Bias, ShardAxis::None, 0, 0, ""},
            {"ln.gamma", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 1, ""},
            {"ln.beta", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 0, ""}};
  }
  // Saved: 0 LN output, 1-2 LN stats, then per shard the pre-GELU units and their GELU.
  void forward(const Mat& x, const MicroBatch&, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult*) const override {
    saved.mats.assign(static_cast<std::size_t>(3 + 2 * t_), Mat());
    auto& m = saved.mats;
    layerNormForward(x, *p[0][4], *p[0][5], nx, m[0], m[1], m[2]);
    const int gs = g_ / t_;
    const Eigen::Index cols = h_ / t_;
    std::vector<Mat> partial(static_cast<std::size_t>(t_));
    for (int s = 0; s < t_; ++s) {
      const auto& w = p[static_cast<std::size_t>(s)];
      Mat& h1 = m[static_cast<std::size_t>(3 + 2 * s)];
      Mat& act = m[static_cast<std::size_t>(4 + 2 * s)];
      h1 = nx.mm(m[0], *w[0]);
      addRow(h1, *w[1]);
      nx.round(h1);
      act = gelu(h1, nx);
      Mat& part = partial[static_cast<std::size_t>(s)];
      if (t_ == 1) {
        part = groupedForward(act, *w[2], gs, nx);
      } else {
        part = Mat::Zero(x.rows(), h_);
        part.middleCols(s * cols, cols) = groupedForward(act, *w[2], gs, nx);
      }
    }
    Mat o = allReduceShards(partial, nx);
    addRow(o, *p[0][3]);
    nx.round(o);
    y = x + o;
    nx.round(y);
  }
  void backward(const Mat& x, const Mat& dy, const MicroBatch&, const ShardParams& p, Numerics& nx, const Saved& saved,
                float, Mat& dx, ShardGrads& grads) const override {
    for (auto& g : grads) g.assign(6, Mat());
    auto& g0 = grads[0];
    const auto& m = saved.mats;
    g0[3] = columnSums(dy, nx);
    const int gs = g_ / t_;
    const Eigen::Index cols = h_ / t_;
    std::vector<Mat> dhin(static_cast<std::size_t>(t_));
    for (int s = 0; s < t_; ++s) {
      const auto& w = p[static_cast<std::size_t>(s)];
      auto& g = grads[static_cast<std::size_t>(s)];
      const Mat& h1 = m[static_cast<std::size_t>(3 + 2 * s)];
      const Mat& act = m[static_cast<std::size_t>(4 + 2 * s)];
      const Mat dys = t_ == 1 ? dy : Mat(dy.middleCols(s * cols, cols));
      Mat dact;
      groupedBackward(act, dys, *w[2], gs, nx, g[2], &dact);
      const Mat dh1 = geluBackward(dact, h1, nx);
      g[0] = nx.mmTN(m[0], dh1);
      g[1] = columnSums(dh1, nx);
      dhin[static_cast<std::size_t>(s)] = nx.mmNT(dh1, *w[0]);
    }
    const Mat du = allReduceShards(dhin, nx);
    dx = layerNormBackward(du, m[1], m[2], *p[0][4], nx, g0[4], g0[5]);
    dx += dy;
    nx.round(dx);
  }

 private:
  int h_, i_, g_, t_;
};

// ----------------------------------------------------------- layer norm

class LayerNormKernel : public Kernel {
 public:
  explicit LayerNormKernel(int hidden) : h_(hidden) {}
  std::vector<ParamSpec> params() const override {
    return {{"gamma", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 1, ""},
            {"beta", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 0, ""}};
  }
  // Saved: the LN stats.
  void forward(const Mat& x, const MicroBatch&, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult*) const override {
    saved.mats.assign(2, Mat());
    layerNormForward(x, *p[0][0], *p[0][1], nx, y, saved.mats[0], saved.mats[1]);
  }
  void backward(const Mat&, const Mat& dy, const MicroBatch&, const ShardParams& p, Numerics& nx, const Saved& saved,
                float, Mat& dx, ShardGrads& grads) const override {
    auto& g = grads[0];
    g.assign(2, Mat());
    dx = layerNormBackward(dy, saved.mats[0], saved.mats[1], *p[0][0], nx, g[0], g[1]);
  }

 private:
  int h_;
};

// ------------------------------------------------------ patch embedding

// Images are rows of C * size * size floats, channel-major then row-major
// (MicroBatch::features). Patch i (row-major over the (size / P)^2 patches)
// is the vector of its C * P * P pixels in the order (channel, row, column),
// the order of a PyTorch Conv2d weight [hidden, C, P, P] flattened; `proj.w`
// is that weight transposed, [C * P * P, hidden]. Sample b's tokens are rows
// b * (patches + 1) ...: the class token, then the patches.
class PatchEmbeddingKernel : public Kernel {
 public:
  PatchEmbeddingKernel(int patch, int channels, int hidden, int size)
      : p_(patch), c_(channels), h_(hidden), size_(size), side_(size / patch) {}
  std::vector<ParamSpec> params() const override {
    const Eigen::Index tokens = static_cast<Eigen::Index>(side_) * side_ + 1;
    return {{"proj.w", static_cast<Eigen::Index>(c_) * p_ * p_, h_, ParamClass::Weight, ShardAxis::None, kInitStd, 0, ""},
            {"proj.b", 1, h_, ParamClass::Bias, ShardAxis::None, 0, 0, ""},
            {"position", tokens, h_, ParamClass::Embedding, ShardAxis::None, kInitStd, 0, ""},
            {"cls", 1, h_, ParamClass::Embedding, ShardAxis::None, kInitStd, 0, ""}};
  }
  int tokens() const { return side_ * side_ + 1; }
  // The patch matrix [samples * patches, C * P * P] of a micro batch.
  Mat patches(const MicroBatch& mb) const {
    const int n = side_ * side_, cpp = c_ * p_ * p_;
    Mat out(static_cast<Eigen::Index>(mb.samples) * n, cpp);
    for (int b = 0; b < mb.samples; ++b)
      for (int i = 0; i < n; ++i) {
        const int py = i / side_, px = i % side_;
        for (int c = 0; c < c_; ++c)
          for (int dy = 0; dy < p_; ++dy)
            for (int dxx = 0; dxx < p_; ++dxx)
              out(static_cast<Eigen::Index>(b) * n + i, (c * p_ + dy) * p_ + dxx) =
                  mb.features(b, (static_cast<Eigen::Index>(c) * size_ + py * p_ + dy) * size_ + px * p_ + dxx);
      }
    return out;
  }
  // Saved: nothing (the patches are a function of the batch).
  void forward(const Mat&, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult*) const override {
    const auto& w = p[0];
    saved.mats.clear();
    const int n = side_ * side_, s = n + 1;
    Mat proj = nx.mm(patches(mb), *w[0]);
    addRow(proj, *w[1]);
    nx.round(proj);
    y.resize(static_cast<Eigen::Index>(mb.samples) * s, h_);
    for (int b = 0; b < mb.samples; ++b) {
      const Eigen::Index r = static_cast<Eigen::Index>(b) * s;
      y.row(r) = w[3]->row(0) + w[2]->row(0);
      y.middleRows(r + 1, n) = proj.middleRows(static_cast<Eigen::Index>(b) * n, n) + w[2]->bottomRows(n);
    }
    nx.round(y);
  }
  void backward(const Mat&, const Mat& dy, const MicroBatch& mb, const ShardParams&, Numerics& nx, const Saved&, float,
                Mat& dx, ShardGrads& grads) const override {
    auto& g = grads[0];
    g.assign(4, Mat());
    const int n = side_ * side_, s = n + 1;
    Mat dproj(static_cast<Eigen::Index>(mb.samples) * n, h_);
    g[2] = Mat::Zero(s, h_);
    g[3] = Mat::Zero(1, h_);
    for (int b = 0; b < mb.samples; ++b) {
      const Eigen::Index r = static_cast<Eigen::Index>(b) * s;
      g[3] += dy.row(r);
      g[2] += dy.middleRows(r, s);
      dproj.middleRows(static_cast<Eigen::Index>(b) * n, n) = dy.middleRows(r + 1, n);
    }
    nx.round(g[2]);
    nx.round(g[3]);
    g[0] = nx.mmTN(patches(mb), dproj);
    g[1] = columnSums(dproj, nx);
    dx.resize(0, 0);
  }

 private:
  int p_, c_, h_, size_, side_;
};

// ----------------------------------------------------- token classifier

// LayerNorm and a linear classifier on each sample's class token (row
// b * tokens), softmax cross-entropy against MicroBatch::classLabel divided
// by the global batch's classCount.
class TokenClassifierKernel : public Kernel {
 public:
  TokenClassifierKernel(int hidden, int classes) : h_(hidden), c_(classes) {}
  bool isHead() const override { return true; }
  std::vector<ParamSpec> params() const override {
    return {{"ln.gamma", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 1, ""},
            {"ln.beta", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 0, ""},
            {"w", h_, c_, ParamClass::Weight, ShardAxis::None, kInitStd, 0, ""},
            {"b", 1, c_, ParamClass::Bias, ShardAxis::None, 0, 0, ""}};
  }
  static std::vector<int> classRows(const Mat& x, const MicroBatch& mb) {
    std::vector<int> rows;
    const int s = mb.samples > 0 ? static_cast<int>(x.rows()) / mb.samples : 0;
    for (int b = 0; b < mb.samples; ++b) rows.push_back(b * s);
    return rows;
  }
  // Saved: 0 LN output, 1-2 LN stats, 3 logits.
  void forward(const Mat& x, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult* head) const override {
    const auto& w = p[0];
    saved.mats.assign(4, Mat());
    auto& m = saved.mats;
    layerNormForward(gatherRows(x, classRows(x, mb)), *w[0], *w[1], nx, m[0], m[1], m[2]);
    m[3] = nx.mm(m[0], *w[2]);
    addRow(m[3], *w[3]);
    nx.round(m[3]);
    y.resize(0, 0);
    if (head != nullptr) {
      double correct = 0;
      head->loss = crossEntropy(m[3], mb.classLabel, &correct, nullptr, 1.0f, mb.labelSmoothing) / mb.classCount;
      head->sums["class_correct"] = correct;
      head->sums["class_count"] = static_cast<double>(mb.classLabel.size());
    }
  }
  void backward(const Mat& x, const Mat&, const MicroBatch& mb, const ShardParams& p, Numerics& nx, const Saved& saved,
                float lossScale, Mat& dx, ShardGrads& grads) const override {
    const auto& w = p[0];
    const auto& m = saved.mats;
    auto& g = grads[0];
    g.assign(4, Mat());
    Mat dlogits;
    crossEntropy(m[3], mb.classLabel, nullptr, &dlogits, static_cast<float>(lossScale / mb.classCount), mb.labelSmoothing);
    nx.round(dlogits);
    g[3] = columnSums(dlogits, nx);
    g[2] = nx.mmTN(m[0], dlogits);
    const Mat dn = nx.mmNT(dlogits, *w[2]);
    dx = scatterRows(layerNormBackward(dn, m[1], m[2], *w[0], nx, g[0], g[1]), classRows(x, mb), x.rows());
  }

 private:
  int h_, c_;
};

}  // namespace

Expected<std::unique_ptr<Kernel>> makeSequenceKernel(const ir::Layer& l, int shards) {
  // makeKernel has checked the layer against the kernel table (runtime/runnable).
  auto whole = [&](const char* key) { return static_cast<int>(number(l, key)); };
  const int split = l.shardable ? std::max(1, shards) : 1;
  switch (l.op) {
    case ir::LayerOp::ConvModule: return std::unique_ptr<Kernel>(new ConvModuleKernel(whole("hidden"), whole("kernel"), whole("groups")));
    case ir::LayerOp::GroupedFfn:
      return std::unique_ptr<Kernel>(new GroupedFfnKernel(whole("hidden"), whole("intermediate"), whole("groups"), split));
    case ir::LayerOp::LayerNorm: return std::unique_ptr<Kernel>(new LayerNormKernel(whole("hidden")));
    case ir::LayerOp::PatchEmbedding:
      return std::unique_ptr<Kernel>(new PatchEmbeddingKernel(whole("patch"), whole("channels"), whole("hidden"), whole("image")));
    case ir::LayerOp::TokenClassifier: return std::unique_ptr<Kernel>(new TokenClassifierKernel(whole("hidden"), whole("classes")));
    default: break;
  }
  return Error{code::kInternal, "layer `" + l.name + "`: the emulator has no sequence kernel for op \"" + ir::opName(l) + "\"",
               "this is a bug in ipu", l.source};
}

}  // namespace ipu::emu
