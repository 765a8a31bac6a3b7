// The kernels of the standard library's ops. Conventions (kernel.h): row-major
// [rows, features] tensors; every tensor a kernel outputs or keeps is rounded
// to the compute type by Numerics; statistics are fp32. Gradients of
// parameters a kernel replicates over its shard group are returned in shard
// 0's slot.
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/emulator/kernels/conv_kernels.h"
#include "runtime/emulator/fp16.h"
#include "runtime/emulator/kernels/kernel.h"
#include "runtime/emulator/kernels/kernel_ops.h"
#include "runtime/emulator/kernels/sequence_kernels.h"

namespace ipu::emu {

double Saved::elements() const {
  double n = 0;
  for (const auto& m : mats) n += static_cast<double>(m.size());
  return n;
}

namespace {

// --------------------------------------------------------------- embedding

class EmbeddingKernel : public Kernel {
 public:
  EmbeddingKernel(int vocab, int hidden, int positions, int types) : v_(vocab), h_(hidden), p_(positions), t_(types) {}
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> ps{{"word", v_, h_, ParamClass::Embedding, ShardAxis::None, kInitStd, 0, ""},
                              {"position", p_, h_, ParamClass::Embedding, ShardAxis::None, kInitStd, 0, ""}};
    if (t_ > 0) ps.push_back({"type", t_, h_, ParamClass::Embedding, ShardAxis::None, kInitStd, 0, ""});
    ps.push_back({"ln.gamma", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 1, ""});
    ps.push_back({"ln.beta", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 0, ""});
    return ps;
  }
  void forward(const Mat&, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult*) const override {
    const auto& w = p[0];
    const Eigen::Index n = static_cast<Eigen::Index>(mb.tokens.size());
    Mat e(n, h_);
    for (Eigen::Index i = 0; i < n; ++i) {
      const std::size_t k = static_cast<std::size_t>(i);
      e.row(i) = w[0]->row(mb.tokens[k]) + w[1]->row(mb.positions[k]);
      if (t_ > 0) e.row(i) += w[2]->row(mb.segments[k]);
    }
    nx.round(e);
    saved.mats.resize(2);
    layerNormForward(e, *w[norm()], *w[norm() + 1], nx, y, saved.mats[0], saved.mats[1]);
  }
  void backward(const Mat&, const Mat& dy, const MicroBatch& mb, const ShardParams& p, Numerics& nx, const Saved& saved,
                float, Mat& dx, ShardGrads& grads) const override {
    const auto& w = p[0];
    auto& g = grads[0];
    g.resize(w.size());
    Mat de = layerNormBackward(dy, saved.mats[0], saved.mats[1], *w[norm()], nx, g[norm()], g[norm() + 1]);
    g[0] = Mat::Zero(v_, h_);
    g[1] = Mat::Zero(p_, h_);
    if (t_ > 0) g[2] = Mat::Zero(t_, h_);
    for (Eigen::Index i = 0; i < de.rows(); ++i) {
      const std::size_t k = static_cast<std::size_t>(i);
      g[0].row(mb.tokens[k]) += de.row(i);
      g[1].row(mb.positions[k]) += de.row(i);
      if (t_ > 0) g[2].row(mb.segments[k]) += de.row(i);
    }
    for (std::size_t k = 0; k < static_cast<std::size_t>(norm()); ++k) nx.round(g[k]);
    dx.resize(0, 0);
  }

 private:
  std::size_t norm() const { return t_ > 0 ? 3 : 2; }
  int v_, h_, p_, t_;
};

// --------------------------------------------------------------- attention

class AttentionKernel : public Kernel {
 public:
  AttentionKernel(int hidden, int heads, bool causal, bool preNorm, int shards)
      : h_(hidden), heads_(heads), causal_(causal), pre_(preNorm), t_(shards) {}
  bool sharded() const override { return t_ > 1; }
  std::vector<ParamSpec> params() const override {
    return {{"wq", h_, h_, ParamClass::Weight, ShardAxis::Cols, kInitStd, 0, ""},
            {"bq", 1, h_, ParamClass::Bias, ShardAxis::Cols, 0, 0, ""},
            {"wk", h_, h_, ParamClass::Weight, ShardAxis::Cols, kInitStd, 0, ""},
            {"bk", 1, h_, ParamClass::Bias, ShardAxis::Cols, 0, 0, ""},
            {"wv", h_, h_, ParamClass::Weight, ShardAxis::Cols, kInitStd, 0, ""},
            {"bv", 1, h_, ParamClass::Bias, ShardAxis::Cols, 0, 0, ""},
            {"wo", h_, h_, ParamClass::Weight, ShardAxis::Rows, kInitStd, 0, ""},
            {"bo", 1, h_, ParamClass::Bias, ShardAxis::None, 0, 0, ""},
            {"ln.gamma", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 1, ""},
            {"ln.beta", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 0, ""}};
  }

  // Saved layout: 0 hin (pre-norm), 1-2 pre LN stats, then per shard q, k, v,
  // P, ctx, then 2 post LN stats.
  void forward(const Mat& x, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult*) const override {
    saved.mats.assign(static_cast<std::size_t>(3 + 5 * t_ + 2), Mat());
    const Mat* hin = &x;
    if (pre_) {
      layerNormForward(x, *p[0][8], *p[0][9], nx, saved.mats[0], saved.mats[1], saved.mats[2]);
      hin = &saved.mats[0];
    }
    const int S = mb.seq, B = mb.samples, hl = heads_ / t_, d = h_ / heads_;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::vector<Mat> partial(static_cast<std::size_t>(t_));
    for (int s = 0; s < t_; ++s) {
      const auto& w = p[static_cast<std::size_t>(s)];
      Mat* m = &saved.mats[static_cast<std::size_t>(3 + 5 * s)];
      Mat& q = m[0];
      Mat& k = m[1];
      Mat& v = m[2];
      Mat& probs = m[3];
      Mat& ctx = m[4];
      q = nx.mm(*hin, *w[0]);
      addRow(q, *w[1]);
      nx.round(q);
      k = nx.mm(*hin, *w[2]);
      addRow(k, *w[3]);
      nx.round(k);
      v = nx.mm(*hin, *w[4]);
      addRow(v, *w[5]);
      nx.round(v);
      probs.resize(static_cast<Eigen::Index>(B) * hl * S, S);
      ctx.resize(q.rows(), q.cols());
      // Heads of all samples in parallel, each with its own rounding stream.
      const std::uint64_t base = nx.nextKey();
      nx.parallelFor(static_cast<std::size_t>(B * hl), [&](std::size_t bj) {
        const int b = static_cast<int>(bj) / hl, j = static_cast<int>(bj) % hl;
        Numerics hx = nx.fork(base, bj);
        {
          const Mat qb = q.block(b * S, j * d, S, d);
          const Mat kb = k.block(b * S, j * d, S, d);
          const Mat vb = v.block(b * S, j * d, S, d);
          Mat sc = hx.mmNT(qb, kb);
          sc *= scale;
          hx.round(sc);
          for (int i = 0; i < S; ++i) {
            const int idi = mb.sequenceIds[static_cast<std::size_t>(b * S + i)];
            float mx = -std::numeric_limits<float>::infinity();
            for (int jj = 0; jj < S; ++jj) {
              const bool allowed = mb.sequenceIds[static_cast<std::size_t>(b * S + jj)] == idi && (!causal_ || jj <= i);
              if (!allowed) sc(i, jj) = -std::numeric_limits<float>::infinity();
              mx = std::max(mx, sc(i, jj));
            }
            sc.row(i) = (sc.row(i).array() - mx).exp().matrix();
            sc.row(i) /= sc.row(i).sum();
          }
          hx.round(sc);
          probs.block((static_cast<Eigen::Index>(b) * hl + j) * S, 0, S, S) = sc;
          ctx.block(b * S, j * d, S, d) = hx.mm(sc, vb);
        }
      });
      partial[static_cast<std::size_t>(s)] = nx.mm(ctx, *w[6]);
    }
    Mat a = allReduceShards(partial, nx);
    addRow(a, *p[0][7]);
    nx.round(a);
    Mat z = x + a;
    nx.round(z);
    if (pre_) {
      y = std::move(z);
    } else {
      const std::size_t post = static_cast<std::size_t>(3 + 5 * t_);
      layerNormForward(z, *p[0][8], *p[0][9], nx, y, saved.mats[post], saved.mats[post + 1]);
    }
  }

  void backward(const Mat& x, const Mat& dy, const MicroBatch& mb, const ShardParams& p, Numerics& nx, const Saved& saved,
                float, Mat& dx, ShardGrads& grads) const override {
    for (auto& g : grads) g.assign(10, Mat());
    auto& g0 = grads[0];
    Mat da;
    if (pre_) {
      da = dy;
    } else {
      const std::size_t post = static_cast<std::size_t>(3 + 5 * t_);
      da = layerNormBackward(dy, saved.mats[post], saved.mats[post + 1], *p[0][8], nx, g0[8], g0[9]);
    }
    dx = da;  // the residual
    g0[7] = columnSums(da, nx);
    const Mat& hin = pre_ ? saved.mats[0] : x;
    const int S = mb.seq, B = mb.samples, hl = heads_ / t_, d = h_ / heads_;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::vector<Mat> dhin(static_cast<std::size_t>(t_));
    for (int s = 0; s < t_; ++s) {
      const auto& w = p[static_cast<std::size_t>(s)];
      auto& g = grads[static_cast<std::size_t>(s)];
      const Mat* m = &saved.mats[static_cast<std::size_t>(3 + 5 * s)];
      const Mat& q = m[0];
      const Mat& k = m[1];
      const Mat& v = m[2];
      const Mat& probs = m[3];
      const Mat& ctx = m[4];
      g[6] = nx.mmTN(ctx, da);
      Mat dctx = nx.mmNT(da, *w[6]);
      Mat dq(q.rows(), q.cols()), dk(k.rows(), k.cols()), dv(v.rows(), v.cols());
      const std::uint64_t base = nx.nextKey();
      nx.parallelFor(static_cast<std::size_t>(B * hl), [&](std::size_t bj) {
        const int b = static_cast<int>(bj) / hl, j = static_cast<int>(bj) % hl;
        Numerics hx = nx.fork(base, bj);
        {
          const Mat P = probs.block((static_cast<Eigen::Index>(b) * hl + j) * S, 0, S, S);
          const Mat dc = dctx.block(b * S, j * d, S, d);
          const Mat qb = q.block(b * S, j * d, S, d);
          const Mat kb = k.block(b * S, j * d, S, d);
          const Mat vb = v.block(b * S, j * d, S, d);
          Mat dP = hx.mmNT(dc, vb);
          dv.block(b * S, j * d, S, d) = hx.mmTN(P, dc);
          Mat dS(S, S);
          for (int i = 0; i < S; ++i) {
            const float dot = (dP.row(i).array() * P.row(i).array()).sum();
            dS.row(i) = (P.row(i).array() * (dP.row(i).array() - dot) * scale).matrix();
          }
          hx.round(dS);
          dq.block(b * S, j * d, S, d) = hx.mm(dS, kb);
          dk.block(b * S, j * d, S, d) = hx.mmTN(dS, qb);
        }
      });
      g[0] = nx.mmTN(hin, dq);
      g[1] = columnSums(dq, nx);
      g[2] = nx.mmTN(hin, dk);
      g[3] = columnSums(dk, nx);
      g[4] = nx.mmTN(hin, dv);
      g[5] = columnSums(dv, nx);
      Mat dh = nx.mmNT(dq, *w[0]);
      dh += nx.mmNT(dk, *w[2]);
      nx.round(dh);
      dh += nx.mmNT(dv, *w[4]);
      nx.round(dh);
      dhin[static_cast<std::size_t>(s)] = std::move(dh);
    }
    Mat dh = allReduceShards(dhin, nx);
    if (pre_) dh = layerNormBackward(dh, saved.mats[1], saved.mats[2], *p[0][8], nx, g0[8], g0[9]);
    dx += dh;
    nx.round(dx);
  }

 private:
  int h_, heads_;
  bool causal_, pre_;
  int t_;
};

// --------------------------------------------------------------------- ffn

class FfnKernel : public Kernel {
 public:
  FfnKernel(int hidden, int intermediate, bool preNorm, int shards) : h_(hidden), i_(intermediate), pre_(preNorm), t_(shards) {}
  bool sharded() const override { return t_ > 1; }
  std::vector<ParamSpec> params() const override {
    return {{"w1", h_, i_, ParamClass::Weight, ShardAxis::Cols, kInitStd, 0, ""},
            {"b1", 1, i_, ParamClass::Bias, ShardAxis::Cols, 0, 0, ""},
            {"w2", i_, h_, ParamClass::Weight, ShardAxis::Rows, kInitStd, 0, ""},
            {"b2", 1, h_, ParamClass::Bias, ShardAxis::None, 0, 0, ""},
            {"ln.gamma", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 1, ""},
            {"ln.beta", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 0, ""}};
  }
  // Saved layout: 0 hin (pre-norm), 1-2 pre LN stats, per shard h1 and act, then 2 post LN stats.
  void forward(const Mat& x, const MicroBatch&, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult*) const override {
    saved.mats.assign(static_cast<std::size_t>(3 + 2 * t_ + 2), Mat());
    const Mat* hin = &x;
    if (pre_) {
      layerNormForward(x, *p[0][4], *p[0][5], nx, saved.mats[0], saved.mats[1], saved.mats[2]);
      hin = &saved.mats[0];
    }
    std::vector<Mat> partial(static_cast<std::size_t>(t_));
    for (int s = 0; s < t_; ++s) {
      const auto& w = p[static_cast<std::size_t>(s)];
      Mat& h1 = saved.mats[static_cast<std::size_t>(3 + 2 * s)];
      Mat& act = saved.mats[static_cast<std::size_t>(4 + 2 * s)];
      h1 = nx.mm(*hin, *w[0]);
      addRow(h1, *w[1]);
      nx.round(h1);
      act = gelu(h1, nx);
      partial[static_cast<std::size_t>(s)] = nx.mm(act, *w[2]);
    }
    Mat o = allReduceShards(partial, nx);
    addRow(o, *p[0][3]);
    nx.round(o);
    Mat z = x + o;
    nx.round(z);
    if (pre_) {
      y = std::move(z);
    } else {
      const std::size_t post = static_cast<std::size_t>(3 + 2 * t_);
      layerNormForward(z, *p[0][4], *p[0][5], nx, y, saved.mats[post], saved.mats[post + 1]);
    }
  }
  void backward(const Mat& x, const Mat& dy, const MicroBatch&, const ShardParams& p, Numerics& nx, const Saved& saved,
                float, Mat& dx, ShardGrads& grads) const override {
    for (auto& g : grads) g.assign(6, Mat());
    auto& g0 = grads[0];
    Mat dout;
    if (pre_) {
      dout = dy;
    } else {
      const std::size_t post = static_cast<std::size_t>(3 + 2 * t_);
      dout = layerNormBackward(dy, saved.mats[post], saved.mats[post + 1], *p[0][4], nx, g0[4], g0[5]);
    }
    dx = dout;
    g0[3] = columnSums(dout, nx);
    const Mat& hin = pre_ ? saved.mats[0] : x;
    std::vector<Mat> dhin(static_cast<std::size_t>(t_));
    for (int s = 0; s < t_; ++s) {
      const auto& w = p[static_cast<std::size_t>(s)];
      auto& g = grads[static_cast<std::size_t>(s)];
      const Mat& h1 = saved.mats[static_cast<std::size_t>(3 + 2 * s)];
      const Mat& act = saved.mats[static_cast<std::size_t>(4 + 2 * s)];
      g[2] = nx.mmTN(act, dout);
      Mat dact = nx.mmNT(dout, *w[2]);
      Mat dh1 = geluBackward(dact, h1, nx);
      g[0] = nx.mmTN(hin, dh1);
      g[1] = columnSums(dh1, nx);
      dhin[static_cast<std::size_t>(s)] = nx.mmNT(dh1, *w[0]);
    }
    Mat dh = allReduceShards(dhin, nx);
    if (pre_) dh = layerNormBackward(dh, saved.mats[1], saved.mats[2], *p[0][4], nx, g0[4], g0[5]);
    dx += dh;
    nx.round(dx);
  }

 private:
  int h_, i_;
  bool pre_;
  int t_;
};

// ---------------------------------------------------------------- mlm head

class MlmHeadKernel : public Kernel {
 public:
  MlmHeadKernel(int hidden, int vocab, std::string tiedWord) : h_(hidden), v_(vocab), tied_(std::move(tiedWord)) {}
  bool isHead() const override { return true; }
  std::vector<ParamSpec> params() const override {
    return {{"transform.w", h_, h_, ParamClass::Weight, ShardAxis::None, kInitStd, 0, ""},
            {"transform.b", 1, h_, ParamClass::Bias, ShardAxis::None, 0, 0, ""},
            {"ln.gamma", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 1, ""},
            {"ln.beta", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 0, ""},
            {"decoder.bias", 1, v_, ParamClass::Bias, ShardAxis::None, 0, 0, ""},
            {"decoder.word", v_, h_, ParamClass::Embedding, ShardAxis::None, 0, 0, tied_}};
  }
  // Saved: 0 t1 (pre-GELU), 1 act, 2-3 LN stats, 4 u (LN output), 5 logits.
  void forward(const Mat& x, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult* head) const override {
    const auto& w = p[0];
    saved.mats.assign(6, Mat());
    auto& m = saved.mats;
    const Mat hm = gatherRows(x, mb.maskedRow);
    m[0] = nx.mm(hm, *w[0]);
    addRow(m[0], *w[1]);
    nx.round(m[0]);
    m[1] = gelu(m[0], nx);
    layerNormForward(m[1], *w[2], *w[3], nx, m[4], m[2], m[3]);
    m[5] = nx.mmNT(m[4], *w[5]);
    addRow(m[5], *w[4]);
    nx.round(m[5]);
    y.resize(0, 0);
    if (head != nullptr) {
      double correct = 0;
      head->loss = crossEntropy(m[5], mb.maskedLabel, &correct, nullptr, 1.0f) / mb.mlmCount;
      head->sums["mlm_correct"] = correct;
      head->sums["mlm_count"] = static_cast<double>(mb.maskedLabel.size());
    }
  }
  void backward(const Mat& x, const Mat&, const MicroBatch& mb, const ShardParams& p, Numerics& nx, const Saved& saved,
                float lossScale, Mat& dx, ShardGrads& grads) const override {
    const auto& w = p[0];
    const auto& m = saved.mats;
    auto& g = grads[0];
    g.assign(6, Mat());
    Mat dlogits;
    crossEntropy(m[5], mb.maskedLabel, nullptr, &dlogits, static_cast<float>(lossScale / mb.mlmCount));
    nx.round(dlogits);
    g[4] = columnSums(dlogits, nx);
    g[5] = nx.mmTN(dlogits, m[4]);
    Mat du = nx.mm(dlogits, *w[5]);
    Mat dact = layerNormBackward(du, m[2], m[3], *w[2], nx, g[2], g[3]);
    Mat dt1 = geluBackward(dact, m[0], nx);
    const Mat hm = gatherRows(x, mb.maskedRow);
    g[0] = nx.mmTN(hm, dt1);
    g[1] = columnSums(dt1, nx);
    dx = scatterRows(nx.mmNT(dt1, *w[0]), mb.maskedRow, x.rows());
  }

 private:
  int h_, v_;
  std::string tied_;
};

// ------------------------------------------------------- pooled classifier

class PooledClassifierKernel : public Kernel {
 public:
  PooledClassifierKernel(int hidden, int classes) : h_(hidden), c_(classes) {}
  bool isHead() const override { return true; }
  std::vector<ParamSpec> params() const override {
    return {{"pooler.w", h_, h_, ParamClass::Weight, ShardAxis::None, kInitStd, 0, ""},
            {"pooler.b", 1, h_, ParamClass::Bias, ShardAxis::None, 0, 0, ""},
            {"classifier.w", h_, c_, ParamClass::Weight, ShardAxis::None, kInitStd, 0, ""},
            {"classifier.b", 1, c_, ParamClass::Bias, ShardAxis::None, 0, 0, ""}};
  }
  // Saved: 0 pooled, 1 logits.
  void forward(const Mat& x, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult* head) const override {
    const auto& w = p[0];
    saved.mats.assign(2, Mat());
    auto& m = saved.mats;
    const Mat first = gatherRows(x, mb.classifiedRow);
    m[0] = nx.mm(first, *w[0]);
    addRow(m[0], *w[1]);
    nx.round(m[0]);
    m[0] = m[0].array().tanh().matrix();
    nx.round(m[0]);
    m[1] = nx.mm(m[0], *w[2]);
    addRow(m[1], *w[3]);
    nx.round(m[1]);
    y.resize(0, 0);
    if (head != nullptr) {
      double correct = 0;
      head->loss = crossEntropy(m[1], mb.classLabel, &correct, nullptr, 1.0f, mb.labelSmoothing) / mb.classCount;
      head->sums["nsp_correct"] = correct;
      head->sums["nsp_count"] = static_cast<double>(mb.classLabel.size());
    }
  }
  void backward(const Mat& x, const Mat&, const MicroBatch& mb, const ShardParams& p, Numerics& nx, const Saved& saved,
                float lossScale, Mat& dx, ShardGrads& grads) const override {
    const auto& w = p[0];
    const auto& m = saved.mats;
    auto& g = grads[0];
    g.assign(4, Mat());
    Mat dlogits;
    crossEntropy(m[1], mb.classLabel, nullptr, &dlogits, static_cast<float>(lossScale / mb.classCount), mb.labelSmoothing);
    nx.round(dlogits);
    g[3] = columnSums(dlogits, nx);
    g[2] = nx.mmTN(m[0], dlogits);
    Mat dpooled = nx.mmNT(dlogits, *w[2]);
    Mat dpre = dpooled.array() * (1.0f - m[0].array().square());
    nx.round(dpre);
    const Mat first = gatherRows(x, mb.classifiedRow);
    g[0] = nx.mmTN(first, dpre);
    g[1] = columnSums(dpre, nx);
    dx = scatterRows(nx.mmNT(dpre, *w[0]), mb.classifiedRow, x.rows());
  }

 private:
  int h_, c_;
};

// ----------------------------------------------------------------- lm head

class LmHeadKernel : public Kernel {
 public:
  LmHeadKernel(int hidden, int vocab, std::string tiedWord) : h_(hidden), v_(vocab), tied_(std::move(tiedWord)) {}
  bool isHead() const override { return true; }
  std::vector<ParamSpec> params() const override {
    return {{"ln.gamma", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 1, ""},
            {"ln.beta", 1, h_, ParamClass::Norm, ShardAxis::None, 0, 0, ""},
            {"decoder.word", v_, h_, ParamClass::Embedding, ShardAxis::None, 0, 0, tied_}};
  }
  static void rows(const MicroBatch& mb, std::vector<int>& r, std::vector<int>& labels) {
    for (std::size_t i = 0; i < mb.nextToken.size(); ++i)
      if (mb.nextToken[i] >= 0) {
        r.push_back(static_cast<int>(i));
        labels.push_back(mb.nextToken[i]);
      }
  }
  // Saved: 0-1 LN stats, 2 LN output (selected rows), 3 logits.
  void forward(const Mat& x, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult* head) const override {
    const auto& w = p[0];
    saved.mats.assign(4, Mat());
    auto& m = saved.mats;
    Mat hn;
    layerNormForward(x, *w[0], *w[1], nx, hn, m[0], m[1]);
    std::vector<int> r, labels;
    rows(mb, r, labels);
    m[2] = gatherRows(hn, r);
    m[3] = nx.mmNT(m[2], *w[2]);
    y.resize(0, 0);
    if (head != nullptr) {
      double correct = 0;
      head->loss = crossEntropy(m[3], labels, &correct, nullptr, 1.0f) / mb.lmCount;
      head->sums["lm_correct"] = correct;
      head->sums["lm_count"] = static_cast<double>(labels.size());
    }
  }
  void backward(const Mat& x, const Mat&, const MicroBatch& mb, const ShardParams& p, Numerics& nx, const Saved& saved,
                float lossScale, Mat& dx, ShardGrads& grads) const override {
    const auto& w = p[0];
    const auto& m = saved.mats;
    auto& g = grads[0];
    g.assign(3, Mat());
    std::vector<int> r, labels;
    rows(mb, r, labels);
    Mat dlogits;
    crossEntropy(m[3], labels, nullptr, &dlogits, static_cast<float>(lossScale / mb.lmCount));
    nx.round(dlogits);
    g[2] = nx.mmTN(dlogits, m[2]);
    Mat dh = scatterRows(nx.mm(dlogits, *w[2]), r, x.rows());
    dx = layerNormBackward(dh, m[0], m[1], *w[0], nx, g[0], g[1]);
  }

 private:
  int h_, v_;
  std::string tied_;
};

// ------------------------------------------------------------------- dense

using ir::Activation;

class DenseKernel : public Kernel {
 public:
  DenseKernel(int inputs, int outputs, Activation act) : in_(inputs), out_(outputs), act_(act) {}
  std::vector<ParamSpec> params() const override {
    return {{"w", in_, out_, ParamClass::Weight, ShardAxis::None, kInitStd, 0, ""},
            {"b", 1, out_, ParamClass::Bias, ShardAxis::None, 0, 0, ""}};
  }
  // Saved: 0 pre-activation.
  void forward(const Mat& x, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult*) const override {
    const Mat& in = x.size() == 0 ? mb.features : x;
    saved.mats.assign(1, Mat());
    Mat& pre = saved.mats[0];
    pre = nx.mm(in, *p[0][0]);
    addRow(pre, *p[0][1]);
    nx.round(pre);
    switch (act_) {
      case Activation::Gelu: y = gelu(pre, nx); break;
      case Activation::Relu: y = pre.cwiseMax(0.0f); break;
      case Activation::Tanh: y = pre.array().tanh().matrix(); nx.round(y); break;
      case Activation::None: y = pre; break;
    }
  }
  void backward(const Mat& x, const Mat& dy, const MicroBatch& mb, const ShardParams& p, Numerics& nx, const Saved& saved,
                float, Mat& dx, ShardGrads& grads) const override {
    const bool first = x.size() == 0;
    const Mat& in = first ? mb.features : x;
    const Mat& pre = saved.mats[0];
    Mat dpre;
    switch (act_) {
      case Activation::Gelu: dpre = geluBackward(dy, pre, nx); break;
      case Activation::Relu: dpre = dy.binaryExpr(pre, [](float g, float v) { return v > 0 ? g : 0.0f; }); break;
      case Activation::Tanh:
        dpre = dy.array() * (1.0f - pre.array().tanh().square());
        nx.round(dpre);
        break;
      case Activation::None: dpre = dy; break;
    }
    auto& g = grads[0];
    g.assign(2, Mat());
    g[0] = nx.mmTN(in, dpre);
    g[1] = columnSums(dpre, nx);
    if (first)
      dx.resize(0, 0);
    else
      dx = nx.mmNT(dpre, *p[0][0]);
  }

 private:
  int in_, out_;
  Activation act_;
};

// ------------------------------------------------------------ softmax loss

class SoftmaxLossKernel : public Kernel {
 public:
  explicit SoftmaxLossKernel(int classes) : c_(classes) {}
  bool isHead() const override { return true; }
  std::vector<ParamSpec> params() const override { return {}; }
  void forward(const Mat& x, const MicroBatch& mb, const ShardParams&, Numerics&, Saved& saved, Mat& y,
               HeadResult* head) const override {
    saved.mats.clear();
    y.resize(0, 0);
    if (head != nullptr) {
      double correct = 0;
      head->loss = crossEntropy(gatherRows(x, mb.classifiedRow), mb.classLabel, &correct, nullptr, 1.0f, mb.labelSmoothing) / mb.classCount;
      head->sums["class_correct"] = correct;
      head->sums["class_count"] = static_cast<double>(mb.classLabel.size());
    }
  }
  void backward(const Mat& x, const Mat&, const MicroBatch& mb, const ShardParams&, Numerics& nx, const Saved&,
                float lossScale, Mat& dx, ShardGrads& grads) const override {
    grads[0].clear();
    Mat d;
    crossEntropy(gatherRows(x, mb.classifiedRow), mb.classLabel, nullptr, &d, static_cast<float>(lossScale / mb.classCount), mb.labelSmoothing);
    nx.round(d);
    dx = scatterRows(d, mb.classifiedRow, x.rows());
  }
  int classes() const { return c_; }

 private:
  int c_;
};

}  // namespace

bool hasKernel(ir::LayerOp op) { return runnable::kernelFor(op) != nullptr; }

Expected<std::unique_ptr<Kernel>> makeKernel(const ir::Layer& l, int shards, long long seqLen) {
  // Whether the layer can run is the table's decision (runtime/runnable); the
  // cases below build what it accepts.
  if (auto problem = runnable::layerProblem(l, shards, seqLen))
    return Error{problem->code, problem->message, problem->help, problem->where};
  auto at = [&](const char* key) { return static_cast<int>(number(l, key)); };
  const int split = l.shardable ? std::max(1, shards) : 1;
  switch (l.op) {
    case ir::LayerOp::Embedding:
      return std::unique_ptr<Kernel>(new EmbeddingKernel(at("vocab"), at("hidden"), at("positions"),
                                                         std::max(0, static_cast<int>(number(l, "types", 0)))));
    case ir::LayerOp::Attention:
      return std::unique_ptr<Kernel>(new AttentionKernel(at("hidden"), at("heads"), number(l, "causal", 0) != 0,
                                                         ir::normPositionFromName(text(l, "norm", "post")) == ir::NormPosition::Pre, split));
    case ir::LayerOp::Ffn:
      return std::unique_ptr<Kernel>(new FfnKernel(at("hidden"), at("intermediate"),
                                                   ir::normPositionFromName(text(l, "norm", "post")) == ir::NormPosition::Pre, split));
    case ir::LayerOp::MlmHead: return std::unique_ptr<Kernel>(new MlmHeadKernel(at("hidden"), at("vocab"), l.tiedTo + ".word"));
    case ir::LayerOp::LmHead: return std::unique_ptr<Kernel>(new LmHeadKernel(at("hidden"), at("vocab"), l.tiedTo + ".word"));
    case ir::LayerOp::PooledClassifier: return std::unique_ptr<Kernel>(new PooledClassifierKernel(at("hidden"), at("classes")));
    case ir::LayerOp::Dense: {
      const std::optional<ir::Activation> act = ir::activationFromName(text(l, "activation", "gelu"));
      if (!act) break;  // the table accepts only activations with a kernel
      return std::unique_ptr<Kernel>(new DenseKernel(at("inputs"), at("outputs"), *act));
    }
    case ir::LayerOp::SoftmaxLoss: return std::unique_ptr<Kernel>(new SoftmaxLossKernel(at("classes")));
    case ir::LayerOp::ConvStem:
    case ir::LayerOp::Bottleneck:
    case ir::LayerOp::BasicBlock:
    case ir::LayerOp::PooledFc: return makeConvKernel(l);
    // GroupBERT and ViT (sequence_kernels.h).
    case ir::LayerOp::PatchEmbedding:
    case ir::LayerOp::TokenClassifier:
    case ir::LayerOp::ConvModule:
    case ir::LayerOp::GroupedFfn:
    case ir::LayerOp::LayerNorm: return makeSequenceKernel(l, shards);
    // No kernel: the table has no row for it, so layerProblem refused it.
    case ir::LayerOp::Other: break;
  }
  return Error{code::kInternal, "layer `" + l.name + "`: the kernel table accepts op \"" + ir::opName(l) + "\" but no kernel is built for it",
               "this is a bug in ipu", l.source};
}

}  // namespace ipu::emu
