// The convolutional kernels (conv_kernels.h). Conventions as in kernels.cpp:
// every tensor a kernel outputs or keeps is rounded to the compute type by
// Numerics (convolutions are im2col matrix products, so fp16 partials follow
// the matmul rules); normalisation statistics and the loss are fp32 (summed
// in double, then used as float). The kernels are replicated on a shard group.
#include "runtime/emulator/kernels/conv_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "runtime/emulator/kernels/kernel_ops.h"

namespace ipu::emu {

namespace {

constexpr float kNormEpsilon = kBatchNormEpsilon;
constexpr float kFcInitStd = 0.01f;

// ------------------------------------------------------------ convolution

// The patches of group `grp`: row n*P + p (output pixel p of sample n), column
// (c*k + ky)*k + kx (input channel c of the group, kernel offset ky, kx);
// zero where the window leaves the image.
Mat im2col(const Mat& x, const ConvGeometry& g, int grp, const Numerics& nx) {
  const int o = g.outSize(), P = o * o, cg = g.cin / g.groups, K = cg * g.k * g.k, S = g.size;
  const Eigen::Index N = x.rows();
  Mat cols(N * P, K);
  nx.parallelFor(static_cast<std::size_t>(N), [&](std::size_t nn) {
    const auto n = static_cast<Eigen::Index>(nn);
    const float* img = x.row(n).data();
    for (int c = 0; c < cg; ++c) {
      const float* plane = img + static_cast<std::ptrdiff_t>(grp * cg + c) * S * S;
      for (int ky = 0; ky < g.k; ++ky)
        for (int kx = 0; kx < g.k; ++kx) {
          const Eigen::Index col = (c * g.k + ky) * g.k + kx;
          for (int oy = 0; oy < o; ++oy) {
            const int iy = oy * g.stride - g.pad + ky;
            for (int ox = 0; ox < o; ++ox) {
              const int ix = ox * g.stride - g.pad + kx;
              const bool inside = iy >= 0 && iy < S && ix >= 0 && ix < S;
              cols(n * P + oy * o + ox, col) = inside ? plane[iy * S + ix] : 0.0f;
            }
          }
        }
    }
  });
  return cols;
}

// The adjoint of im2col: adds the patches' gradients into dx (sample rows).
void col2imAdd(const Mat& dcols, const ConvGeometry& g, int grp, Mat& dx, const Numerics& nx) {
  const int o = g.outSize(), P = o * o, cg = g.cin / g.groups, S = g.size;
  nx.parallelFor(static_cast<std::size_t>(dx.rows()), [&](std::size_t nn) {
    const auto n = static_cast<Eigen::Index>(nn);
    float* img = dx.row(n).data();
    for (int c = 0; c < cg; ++c) {
      float* plane = img + static_cast<std::ptrdiff_t>(grp * cg + c) * S * S;
      for (int ky = 0; ky < g.k; ++ky)
        for (int kx = 0; kx < g.k; ++kx) {
          const Eigen::Index col = (c * g.k + ky) * g.k + kx;
          for (int oy = 0; oy < o; ++oy) {
            const int iy = oy * g.stride - g.pad + ky;
            if (iy < 0 || iy >= S) continue;
            for (int ox = 0; ox < o; ++ox) {
              const int ix = ox * g.stride - g.pad + kx;
              if (ix >= 0 && ix < S) plane[iy * S + ix] += dcols(n * P + oy * o + ox, col);
            }
          }
        }
    }
  });
}

}  // namespace

Mat conv2d(const Mat& x, const Mat& w, const ConvGeometry& g, Numerics& nx) {
  const int o = g.outSize(), P = o * o, og = g.cout / g.groups;
  const Eigen::Index N = x.rows();
  Mat y(N, static_cast<Eigen::Index>(g.cout) * P);
  for (int grp = 0; grp < g.groups; ++grp) {
    const Mat cols = im2col(x, g, grp, nx);
    const Mat wg = w.middleRows(static_cast<Eigen::Index>(grp) * og, og);
    const Mat out = nx.mmNT(cols, wg);  // [N*P, og], rounded
    for (Eigen::Index n = 0; n < N; ++n)
      for (int c = 0; c < og; ++c)
        for (int p = 0; p < P; ++p) y(n, static_cast<Eigen::Index>(grp * og + c) * P + p) = out(n * P + p, c);
  }
  return y;
}

void conv2dBackward(const Mat& x, const Mat& w, const Mat& dy, const ConvGeometry& g, Numerics& nx, Mat* dx, Mat& dw) {
  const int o = g.outSize(), P = o * o, og = g.cout / g.groups;
  const Eigen::Index N = x.rows();
  dw.resize(w.rows(), w.cols());
  if (dx != nullptr) dx->setZero(N, x.cols());
  for (int grp = 0; grp < g.groups; ++grp) {
    const Mat cols = im2col(x, g, grp, nx);
    Mat dout(N * P, og);
    for (Eigen::Index n = 0; n < N; ++n)
      for (int c = 0; c < og; ++c)
        for (int p = 0; p < P; ++p) dout(n * P + p, c) = dy(n, static_cast<Eigen::Index>(grp * og + c) * P + p);
    dw.middleRows(static_cast<Eigen::Index>(grp) * og, og) = nx.mmTN(dout, cols);
    if (dx != nullptr) {
      const Mat wg = w.middleRows(static_cast<Eigen::Index>(grp) * og, og);
      col2imAdd(nx.mm(dout, wg), g, grp, *dx, nx);
    }
  }
  if (dx != nullptr) nx.round(*dx);
}

namespace {

// ---------------------------------------------------------- normalisation

enum class NormKind { Batch, Group };

std::optional<NormKind> normKindFromName(const std::string& s) {
  if (s == "batch") return NormKind::Batch;
  if (s == "group") return NormKind::Group;
  return std::nullopt;
}

// Normalisation of [N, C*P] activations with a per-channel affine transform.
// The statistics sets: channel c (batch norm: over N*P values) or sample n's
// group of C/G channels (group norm: over (C/G)*P values).
struct Norm {
  NormKind kind = NormKind::Batch;
  int groups = 1;

  Eigen::Index sets(Eigen::Index N, int C) const { return kind == NormKind::Batch ? C : N * groups; }
  Eigen::Index setOf(Eigen::Index n, int c, int C) const { return kind == NormKind::Batch ? c : n * groups + c / (C / groups); }

  // Writes y, and keeps xhat (the normalised input) and rstd (1 x sets).
  // Batch norm takes its statistics from nx.batchNorm() when there is one
  // (kernel.h): over the replicas sharing them in training, as recorded when
  // recomputing, the running statistics in evaluation.
  void forward(const Mat& x, int C, int P, const Mat& gamma, const Mat& beta, Numerics& nx, Mat& y, Mat& xhat, Mat& rstd) const {
    const Eigen::Index N = x.rows(), S = sets(N, C);
    BatchNormContext* context = kind == NormKind::Batch ? nx.batchNorm() : nullptr;
    std::vector<float> mean(static_cast<std::size_t>(S));
    rstd.resize(1, S);
    if (context != nullptr && context->mode() != BatchNormContext::Mode::Train) {
      const BatchNormStatistics& given = context->next();
      mean = given.mean;
      for (Eigen::Index s = 0; s < S; ++s) rstd(0, s) = given.rstd[static_cast<std::size_t>(s)];
    } else {
      std::vector<double> sum(static_cast<std::size_t>(S), 0.0), sq(static_cast<std::size_t>(S), 0.0);
      for (Eigen::Index n = 0; n < N; ++n)
        for (int c = 0; c < C; ++c) {
          const auto s = static_cast<std::size_t>(setOf(n, c, C));
          for (int p = 0; p < P; ++p) {
            const double v = x(n, static_cast<Eigen::Index>(c) * P + p);
            sum[s] += v;
          }
        }
      double count = static_cast<double>(N) * P * C / static_cast<double>(S);
      if (context != nullptr) {
        // Distributed batch norm: the sums and counts of every replica of the group.
        sum.push_back(count);
        context->allReduce(sum);
        count = sum.back();
        sum.pop_back();
      }
      for (std::size_t s = 0; s < mean.size(); ++s) mean[s] = static_cast<float>(sum[s] / count);
      for (Eigen::Index n = 0; n < N; ++n)
        for (int c = 0; c < C; ++c) {
          const auto s = static_cast<std::size_t>(setOf(n, c, C));
          for (int p = 0; p < P; ++p) {
            const double d = x(n, static_cast<Eigen::Index>(c) * P + p) - mean[s];
            sq[s] += d * d;
          }
        }
      // The squared deviations from the group's mean: a second exchange, so
      // that the variance is the two-pass one of a single replica.
      if (context != nullptr) context->allReduce(sq);
      for (Eigen::Index s = 0; s < S; ++s)
        rstd(0, s) = static_cast<float>(1.0 / std::sqrt(sq[static_cast<std::size_t>(s)] / count + kNormEpsilon));
      if (context != nullptr) {
        BatchNormStatistics used;
        used.count = count;
        used.mean = mean;
        used.rstd.assign(rstd.data(), rstd.data() + S);
        used.squares = std::move(sq);
        context->record(std::move(used));
      }
    }
    xhat.resize(N, x.cols());
    y.resize(N, x.cols());
    for (Eigen::Index n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) {
        const Eigen::Index s = setOf(n, c, C);
        const auto seg = Eigen::seqN(static_cast<Eigen::Index>(c) * P, P);
        xhat(n, seg) = (x(n, seg).array() - mean[static_cast<std::size_t>(s)]) * rstd(0, s);
      }
    nx.round(xhat);
    for (Eigen::Index n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) {
        const auto seg = Eigen::seqN(static_cast<Eigen::Index>(c) * P, P);
        y(n, seg) = xhat(n, seg).array() * gamma(0, c) + beta(0, c);
      }
    nx.round(y);
  }

  // dx from dy; writes dgamma and dbeta.
  Mat backward(const Mat& dy, const Mat& xhat, const Mat& rstd, int C, int P, const Mat& gamma, Numerics& nx, Mat& dgamma,
               Mat& dbeta) const {
    const Eigen::Index N = dy.rows(), S = sets(N, C);
    dgamma.setZero(1, C);
    dbeta.setZero(1, C);
    std::vector<double> m1(static_cast<std::size_t>(S), 0.0), m2(static_cast<std::size_t>(S), 0.0);
    std::vector<double> dg(static_cast<std::size_t>(C), 0.0), db(static_cast<std::size_t>(C), 0.0);
    for (Eigen::Index n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) {
        const auto s = static_cast<std::size_t>(setOf(n, c, C));
        double a = 0, b = 0;
        for (int p = 0; p < P; ++p) {
          const Eigen::Index j = static_cast<Eigen::Index>(c) * P + p;
          a += dy(n, j);
          b += static_cast<double>(dy(n, j)) * xhat(n, j);
        }
        db[static_cast<std::size_t>(c)] += a;
        dg[static_cast<std::size_t>(c)] += b;
        m1[s] += a * gamma(0, c);
        m2[s] += b * gamma(0, c);
      }
    for (int c = 0; c < C; ++c) {
      dgamma(0, c) = static_cast<float>(dg[static_cast<std::size_t>(c)]);
      dbeta(0, c) = static_cast<float>(db[static_cast<std::size_t>(c)]);
    }
    nx.round(dgamma);
    nx.round(dbeta);
    double count = static_cast<double>(N) * P * C / static_cast<double>(S);
    BatchNormContext* context = kind == NormKind::Batch ? nx.batchNorm() : nullptr;
    if (context != nullptr && context->mode() == BatchNormContext::Mode::Train) {
      // Distributed batch norm: both sums (and the count) over the group, in
      // one exchange; dgamma and dbeta stay this replica's (they are
      // parameter gradients, reduced with the others after the step).
      std::vector<double> both = m1;
      both.insert(both.end(), m2.begin(), m2.end());
      both.push_back(count);
      context->allReduce(both);
      std::copy(both.begin(), both.begin() + S, m1.begin());
      std::copy(both.begin() + S, both.begin() + 2 * S, m2.begin());
      count = both.back();
    }
    Mat dx(N, dy.cols());
    for (Eigen::Index n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) {
        const Eigen::Index s = setOf(n, c, C);
        const auto seg = Eigen::seqN(static_cast<Eigen::Index>(c) * P, P);
        const float a = static_cast<float>(m1[static_cast<std::size_t>(s)] / count);
        const float b = static_cast<float>(m2[static_cast<std::size_t>(s)] / count);
        dx(n, seg) = rstd(0, s) * (dy(n, seg).array() * gamma(0, c) - a - xhat(n, seg).array() * b);
      }
    nx.round(dx);
    return dx;
  }
};

// ---------------------------------------------------------- small pieces

Mat relu(const Mat& x) { return x.cwiseMax(0.0f); }

// dy where the ReLU's output was positive.
Mat reluBackward(const Mat& dy, const Mat& out) {
  return dy.binaryExpr(out, [](float g, float v) { return v > 0 ? g : 0.0f; });
}

// 3x3 max pool, stride 2, padding 1 (the stem's). `arg` keeps each output's
// input column (exact in float below 2^24, checked at construction).
Mat maxPool(const Mat& x, int C, int S, Mat& arg) {
  const int o = convOutSize(S, 3, 2, 1), P = o * o;
  Mat y(x.rows(), static_cast<Eigen::Index>(C) * P);
  arg.resize(x.rows(), y.cols());
  for (Eigen::Index n = 0; n < x.rows(); ++n)
    for (int c = 0; c < C; ++c)
      for (int oy = 0; oy < o; ++oy)
        for (int ox = 0; ox < o; ++ox) {
          float best = -std::numeric_limits<float>::infinity();
          Eigen::Index at = -1;
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
              if (iy < 0 || iy >= S || ix < 0 || ix >= S) continue;
              const Eigen::Index j = static_cast<Eigen::Index>(c) * S * S + iy * S + ix;
              if (at < 0 || x(n, j) > best) {
                best = x(n, j);
                at = j;
              }
            }
          const Eigen::Index out = static_cast<Eigen::Index>(c) * P + oy * o + ox;
          y(n, out) = best;
          arg(n, out) = static_cast<float>(at);
        }
  return y;
}

Mat maxPoolBackward(const Mat& dy, const Mat& arg, Eigen::Index inCols) {
  Mat dx = Mat::Zero(dy.rows(), inCols);
  for (Eigen::Index n = 0; n < dy.rows(); ++n)
    for (Eigen::Index j = 0; j < dy.cols(); ++j) dx(n, static_cast<Eigen::Index>(arg(n, j))) += dy(n, j);
  return dx;
}

float heStd(int fanIn) { return std::sqrt(2.0f / static_cast<float>(fanIn)); }

// A convolution followed by normalisation: its parameters, in order, are the
// weight and the norm's gamma and beta.
struct ConvNorm {
  ConvGeometry geo;
  Norm norm;
  std::string name;   // "conv1" -> params "conv1.w", "conv1.norm.gamma", "conv1.norm.beta"

  void specs(std::vector<ParamSpec>& out) const {
    out.push_back({name + ".w", geo.cout, (geo.cin / geo.groups) * geo.k * geo.k, ParamClass::Weight, ShardAxis::None,
                   heStd((geo.cin / geo.groups) * geo.k * geo.k), 0, ""});
    out.push_back({name + ".norm.gamma", 1, geo.cout, ParamClass::Norm, ShardAxis::None, 0, 1, ""});
    out.push_back({name + ".norm.beta", 1, geo.cout, ParamClass::Norm, ShardAxis::None, 0, 0, ""});
  }
  // Its batch-norm unit, named after its gamma and beta ("conv1.norm").
  void batchNorms(std::vector<BatchNormUnit>& out) const {
    if (norm.kind == NormKind::Batch) out.push_back({name + ".norm", geo.cout});
  }
  int P() const { return geo.outSize() * geo.outSize(); }
  // y = norm(conv(x)); keeps xhat and rstd.
  Mat forward(const Mat& x, const std::vector<const Mat*>& w, std::size_t at, Numerics& nx, Mat& xhat, Mat& rstd) const {
    const Mat a = conv2d(x, *w[at], geo, nx);
    Mat y;
    norm.forward(a, geo.cout, P(), *w[at + 1], *w[at + 2], nx, y, xhat, rstd);
    return y;
  }
  // Gradients of the three parameters into g[at..at+2]; dx when non-null.
  void backward(const Mat& x, const Mat& dy, const std::vector<const Mat*>& w, std::size_t at, const Mat& xhat, const Mat& rstd,
                Numerics& nx, std::vector<Mat>& g, Mat* dx) const {
    const Mat da = norm.backward(dy, xhat, rstd, geo.cout, P(), *w[at + 1], nx, g[at + 1], g[at + 2]);
    conv2dBackward(x, *w[at], da, geo, nx, dx, g[at]);
  }
};

// ------------------------------------------------------------------- stem

// 7x7/2 convolution (padding 3), norm, ReLU, 3x3/2 max pool (padding 1).
class ConvStemKernel : public Kernel {
 public:
  ConvStemKernel(int channels, int out, int size, Norm norm) {
    conv_.geo = {channels, out, size, 7, 2, 3, 1};
    conv_.norm = norm;
    conv_.name = "conv";
  }
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> ps;
    conv_.specs(ps);
    return ps;
  }
  std::vector<BatchNormUnit> batchNorms() const override {
    std::vector<BatchNormUnit> units;
    conv_.batchNorms(units);
    return units;
  }
  // Saved: 0 xhat, 1 rstd, 2 ReLU output, 3 pool argmax.
  void forward(const Mat& x, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult*) const override {
    const Mat& in = x.size() == 0 ? mb.features : x;
    saved.mats.assign(4, Mat());
    auto& m = saved.mats;
    m[2] = relu(conv_.forward(in, p[0], 0, nx, m[0], m[1]));
    y = maxPool(m[2], conv_.geo.cout, conv_.geo.outSize(), m[3]);
  }
  void backward(const Mat& x, const Mat& dy, const MicroBatch& mb, const ShardParams& p, Numerics& nx, const Saved& saved,
                float, Mat& dx, ShardGrads& grads) const override {
    const bool first = x.size() == 0;
    const Mat& in = first ? mb.features : x;
    const auto& m = saved.mats;
    auto& g = grads[0];
    g.assign(3, Mat());
    Mat dr = maxPoolBackward(dy, m[3], m[2].cols());
    nx.round(dr);
    const Mat dn = reluBackward(dr, m[2]);
    if (first) {
      conv_.backward(in, dn, p[0], 0, m[0], m[1], nx, g, nullptr);
      dx.resize(0, 0);
    } else {
      conv_.backward(in, dn, p[0], 0, m[0], m[1], nx, g, &dx);
    }
  }

 private:
  ConvNorm conv_;
};

// -------------------------------------------------------- residual blocks

// A residual block: a chain of conv+norm units (ReLU between them), plus the
// shortcut (identity, or a 1x1 strided projection with norm when the shape
// changes), added before the final ReLU.
class ResidualKernel : public Kernel {
 public:
  ResidualKernel(std::vector<ConvNorm> chain, std::optional<ConvNorm> projection)
      : chain_(std::move(chain)), proj_(std::move(projection)) {}
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> ps;
    for (const auto& u : chain_) u.specs(ps);
    if (proj_) proj_->specs(ps);
    return ps;
  }
  // In forward order: the chain, then the projection.
  std::vector<BatchNormUnit> batchNorms() const override {
    std::vector<BatchNormUnit> units;
    for (const auto& u : chain_) u.batchNorms(units);
    if (proj_) proj_->batchNorms(units);
    return units;
  }
  // Saved: per chain unit i: 3i xhat, 3i+1 rstd, 3i+2 its output (after ReLU,
  // except the last unit's, which is kept as nothing); then the projection's
  // xhat and rstd; last the block's output.
  void forward(const Mat& x, const MicroBatch&, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult*) const override {
    const std::size_t U = chain_.size();
    saved.mats.assign(3 * U + 3, Mat());
    auto& m = saved.mats;
    const Mat* h = &x;
    Mat last;
    for (std::size_t i = 0; i < U; ++i) {
      Mat z = chain_[i].forward(*h, p[0], 3 * i, nx, m[3 * i], m[3 * i + 1]);
      if (i + 1 < U) {
        m[3 * i + 2] = relu(z);
        h = &m[3 * i + 2];
      } else {
        last = std::move(z);
      }
    }
    if (proj_) last += proj_->forward(x, p[0], 3 * U, nx, m[3 * U], m[3 * U + 1]);
    else last += x;
    nx.round(last);
    y = relu(last);
    m[3 * U + 2] = y;
  }
  void backward(const Mat& x, const Mat& dy, const MicroBatch&, const ShardParams& p, Numerics& nx, const Saved& saved,
                float, Mat& dx, ShardGrads& grads) const override {
    const std::size_t U = chain_.size();
    const auto& m = saved.mats;
    auto& g = grads[0];
    g.assign(3 * U + (proj_ ? 3 : 0), Mat());
    const Mat dz = reluBackward(dy, m[3 * U + 2]);
    Mat d = dz;
    for (std::size_t i = U; i-- > 0;) {
      const Mat& in = i == 0 ? x : m[3 * (i - 1) + 2];
      Mat din;
      chain_[i].backward(in, d, p[0], 3 * i, m[3 * i], m[3 * i + 1], nx, g, &din);
      d = i == 0 ? std::move(din) : reluBackward(din, in);
    }
    if (proj_) {
      Mat dsc;
      proj_->backward(x, dz, p[0], 3 * U, m[3 * U], m[3 * U + 1], nx, g, &dsc);
      d += dsc;
    } else {
      d += dz;
    }
    nx.round(d);
    dx = std::move(d);
  }

 private:
  std::vector<ConvNorm> chain_;
  std::optional<ConvNorm> proj_;
};

// ------------------------------------------------------- pooled classifier

// Global average pool, a fully connected layer, and softmax cross-entropy
// with the phase's label smoothing (crossEntropy, MicroBatch::labelSmoothing).
class PooledFcKernel : public Kernel {
 public:
  PooledFcKernel(int inputs, int classes, int size) : c_(inputs), k_(classes), s_(size) {}
  bool isHead() const override { return true; }
  std::vector<ParamSpec> params() const override {
    return {{"fc.w", c_, k_, ParamClass::Weight, ShardAxis::None, kFcInitStd, 0, ""},
            {"fc.b", 1, k_, ParamClass::Bias, ShardAxis::None, 0, 0, ""}};
  }
  // Saved: 0 pooled features, 1 logits.
  void forward(const Mat& x, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
               HeadResult* head) const override {
    const auto& w = p[0];
    saved.mats.assign(2, Mat());
    auto& m = saved.mats;
    const int P = s_ * s_;
    m[0].resize(x.rows(), c_);
    for (Eigen::Index n = 0; n < x.rows(); ++n)
      for (int c = 0; c < c_; ++c) m[0](n, c) = x(n, Eigen::seqN(static_cast<Eigen::Index>(c) * P, P)).mean();
    nx.round(m[0]);
    m[1] = nx.mm(m[0], *w[0]);
    m[1].rowwise() += w[1]->row(0);
    nx.round(m[1]);
    y.resize(0, 0);
    if (head != nullptr) {
      double correct = 0;
      head->loss = crossEntropy(m[1], mb.classLabel, &correct, nullptr, 1.0f, mb.labelSmoothing) / mb.classCount;
      head->sums["class_correct"] = correct;
      head->sums["class_count"] = static_cast<double>(mb.classLabel.size());
    }
  }
  void backward(const Mat& x, const Mat&, const MicroBatch& mb, const ShardParams& p, Numerics& nx, const Saved& saved,
                float lossScale, Mat& dx, ShardGrads& grads) const override {
    const auto& w = p[0];
    const auto& m = saved.mats;
    auto& g = grads[0];
    g.assign(2, Mat());
    Mat dlogits;
    crossEntropy(m[1], mb.classLabel, nullptr, &dlogits, static_cast<float>(lossScale / mb.classCount), mb.labelSmoothing);
    nx.round(dlogits);
    g[0] = nx.mmTN(m[0], dlogits);
    g[1] = dlogits.colwise().sum();
    nx.round(g[1]);
    const Mat dpooled = nx.mmNT(dlogits, *w[0]);
    const int P = s_ * s_;
    dx.resize(x.rows(), x.cols());
    for (Eigen::Index n = 0; n < x.rows(); ++n)
      for (int c = 0; c < c_; ++c) dx(n, Eigen::seqN(static_cast<Eigen::Index>(c) * P, P)).setConstant(dpooled(n, c) / static_cast<float>(P));
    nx.round(dx);
  }

 private:
  int c_, k_, s_;
};

}  // namespace

Expected<std::unique_ptr<Kernel>> makeConvKernel(const ir::Layer& l) {
  // makeKernel has checked the layer against the kernel table (runtime/runnable).
  const auto at = [&](const char* k) { return static_cast<int>(number(l, k)); };
  Norm norm;
  if (l.op != ir::LayerOp::PooledFc) {
    const auto k = normKindFromName(text(l, "norm", "batch"));
    if (!k) return Error{code::kInternal, "layer `" + l.name + "`: a `norm` the kernel table does not accept", "this is a bug in ipu", l.source};
    norm.kind = *k;
    if (norm.kind == NormKind::Group) norm.groups = static_cast<int>(number(l, "norm_groups", 32));
  }
  switch (l.op) {
    case ir::LayerOp::ConvStem: return std::unique_ptr<Kernel>(new ConvStemKernel(at("channels"), at("out"), at("size"), norm));
    case ir::LayerOp::Bottleneck:
    case ir::LayerOp::BasicBlock: {
      const bool bottleneck = l.op == ir::LayerOp::Bottleneck;
      const int in = at("inputs"), out = at("out"), stride = at("stride"), size = at("size");
      const int mid = bottleneck ? at("mid") : out;
      const int o = convOutSize(size, 3, stride, 1);
      std::vector<ConvNorm> chain;
      if (bottleneck) {
        // v1.5: the stride is on the 3x3 convolution.
        chain.push_back({{in, mid, size, 1, 1, 0, 1}, norm, "conv1"});
        chain.push_back({{mid, mid, size, 3, stride, 1, 1}, norm, "conv2"});
        chain.push_back({{mid, out, o, 1, 1, 0, 1}, norm, "conv3"});
      } else {
        chain.push_back({{in, out, size, 3, stride, 1, 1}, norm, "conv1"});
        chain.push_back({{out, out, o, 3, 1, 1, 1}, norm, "conv2"});
      }
      std::optional<ConvNorm> projection;
      if (stride != 1 || in != out) projection = ConvNorm{{in, out, size, 1, stride, 0, 1}, norm, "shortcut"};
      return std::unique_ptr<Kernel>(new ResidualKernel(std::move(chain), std::move(projection)));
    }
    case ir::LayerOp::PooledFc:
      return std::unique_ptr<Kernel>(new PooledFcKernel(at("inputs"), at("classes"), at("size")));
    default: break;
  }
  return Error{code::kInternal, "layer `" + l.name + "`: op \"" + ir::opName(l) + "\" is not a convolutional op",
               "this is a bug in ipu", l.source};
}

}  // namespace ipu::emu
