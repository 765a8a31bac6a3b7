// The arithmetic kernels share (kernel_ops.h). Conventions as in kernels.cpp:
// every tensor returned is rounded to the compute type by Numerics;
// statistics (LayerNorm moments, softmax sums) are fp32.
#include "runtime/emulator/kernels/kernel_ops.h"

#include <algorithm>
#include <cmath>

#include <unsupported/Eigen/SpecialFunctions>

#include "runtime/emulator/collectives.h"

namespace ipu::emu {

namespace {

void roundShardSum(float* data, std::size_t n, void* context) {
  Numerics* nx = static_cast<Numerics*>(context);
  nx->round(data, n);
}

}  // namespace

void addRow(Mat& m, const Mat& row) { m.rowwise() += row.row(0); }

// Rows per chunk of row-wise work split over the host threads (about 16K
// elements: a fixed split, so results do not depend on the threads).
std::size_t rowGrain(Eigen::Index cols) { return static_cast<std::size_t>(std::max<Eigen::Index>(1, 16384 / std::max<Eigen::Index>(1, cols))); }

Mat columnSums(const Mat& m, Numerics& nx) {
  Mat s = m.colwise().sum();
  nx.round(s);
  return s;
}

void layerNormForward(const Mat& x, const Mat& gamma, const Mat& beta, Numerics& nx, Mat& y, Mat& xhat, Mat& rstd) {
  const Eigen::Index n = x.rows(), h = x.cols();
  xhat.resize(n, h);
  rstd.resize(n, 1);
  nx.parallelChunks(static_cast<std::size_t>(n), rowGrain(h), [&](std::size_t b, std::size_t e) {
    for (auto i = static_cast<Eigen::Index>(b); i < static_cast<Eigen::Index>(e); ++i) {
      const float mean = x.row(i).mean();
      const float var = (x.row(i).array() - mean).square().mean();
      const float r = 1.0f / std::sqrt(var + kLayerNormEpsilon);
      xhat.row(i) = (x.row(i).array() - mean) * r;
      rstd(i, 0) = r;
    }
  });
  nx.round(xhat);
  y.resize(n, h);
  nx.parallelChunks(static_cast<std::size_t>(n), rowGrain(h), [&](std::size_t b, std::size_t e) {
    const auto rows = static_cast<Eigen::Index>(e - b);
    y.middleRows(static_cast<Eigen::Index>(b), rows) =
        (xhat.middleRows(static_cast<Eigen::Index>(b), rows).array().rowwise() * gamma.row(0).array()).rowwise() + beta.row(0).array();
  });
  nx.round(y);
}

// dx from dy; accumulates nothing: writes dgamma, dbeta.
Mat layerNormBackward(const Mat& dy, const Mat& xhat, const Mat& rstd, const Mat& gamma, Numerics& nx, Mat& dgamma,
                      Mat& dbeta) {
  dgamma = (dy.array() * xhat.array()).colwise().sum();
  dbeta = dy.colwise().sum();
  nx.round(dgamma);
  nx.round(dbeta);
  const float invH = 1.0f / static_cast<float>(dy.cols());
  Mat dx(dy.rows(), dy.cols());
  nx.parallelChunks(static_cast<std::size_t>(dy.rows()), rowGrain(dy.cols()), [&](std::size_t b, std::size_t e) {
    Eigen::Array<float, 1, Eigen::Dynamic> dxhat;
    for (auto i = static_cast<Eigen::Index>(b); i < static_cast<Eigen::Index>(e); ++i) {
      dxhat = dy.row(i).array() * gamma.row(0).array();
      const float m1 = dxhat.sum() * invH;
      const float m2 = (dxhat * xhat.row(i).array()).sum() * invH;
      dx.row(i) = rstd(i, 0) * (dxhat - m1 - xhat.row(i).array() * m2);
    }
  });
  nx.round(dx);
  return dx;
}

namespace {
const float kInvSqrt2 = 0.70710678118654752f;
const float kInvSqrt2Pi = 0.39894228040143268f;
}  // namespace

// GELU and its derivative use Eigen's vectorised erf and exp (a few ulp from
// the C library's, well inside the PyTorch cross-check's tolerances).
Mat gelu(const Mat& x, Numerics& nx) {
  Mat y(x.rows(), x.cols());
  nx.parallelChunks(static_cast<std::size_t>(x.rows()), rowGrain(x.cols()), [&](std::size_t b, std::size_t e) {
    const auto v = x.middleRows(static_cast<Eigen::Index>(b), static_cast<Eigen::Index>(e - b)).array();
    y.middleRows(static_cast<Eigen::Index>(b), static_cast<Eigen::Index>(e - b)) = 0.5f * v * (1.0f + (v * kInvSqrt2).erf());
  });
  nx.round(y);
  return y;
}

Mat geluBackward(const Mat& dy, const Mat& x, Numerics& nx) {
  Mat d(x.rows(), x.cols());
  nx.parallelChunks(static_cast<std::size_t>(x.rows()), rowGrain(x.cols()), [&](std::size_t b, std::size_t e) {
    const auto rows = static_cast<Eigen::Index>(e - b);
    const auto v = x.middleRows(static_cast<Eigen::Index>(b), rows).array();
    const auto g = dy.middleRows(static_cast<Eigen::Index>(b), rows).array();
    d.middleRows(static_cast<Eigen::Index>(b), rows) =
        g * (0.5f * (1.0f + (v * kInvSqrt2).erf()) + v * (kInvSqrt2Pi * (-0.5f * v * v).exp()));
  });
  nx.round(d);
  return d;
}

Mat gatherRows(const Mat& x, const std::vector<int>& rows) {
  Mat out(static_cast<Eigen::Index>(rows.size()), x.cols());
  for (std::size_t i = 0; i < rows.size(); ++i) out.row(static_cast<Eigen::Index>(i)) = x.row(rows[i]);
  return out;
}

// Rows are distinct: a plain scatter into zeros.
Mat scatterRows(const Mat& part, const std::vector<int>& rows, Eigen::Index n) {
  Mat out = Mat::Zero(n, part.cols());
  for (std::size_t i = 0; i < rows.size(); ++i) out.row(rows[i]) += part.row(static_cast<Eigen::Index>(i));
  return out;
}

// The smoothed loss is lse - (1 - e) z_label - e mean(z): the target's
// weights sum to 1, so its log-sum-exp term is lse once.
double crossEntropy(const Mat& logits, const std::vector<int>& labels, double* correct, Mat* grad, float scale, double smoothing) {
  double loss = 0;
  double right = 0;
  const double e = smoothing;
  const auto classes = static_cast<double>(logits.cols());
  if (grad != nullptr) grad->resize(logits.rows(), logits.cols());
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    Eigen::Index arg = 0;
    const float mx = logits.row(i).maxCoeff(&arg);
    const float sum = (logits.row(i).array() - mx).exp().sum();
    const float lse = mx + std::log(sum);
    const int label = labels[static_cast<std::size_t>(i)];
    if (e > 0) {
      const double mean = static_cast<double>(logits.row(i).sum()) / classes;
      loss += static_cast<double>(lse) - (1 - e) * static_cast<double>(logits(i, label)) - e * mean;
    } else {
      loss += static_cast<double>(lse - logits(i, label));
    }
    if (arg == label) right += 1;
    if (grad != nullptr) {
      if (e > 0) {
        grad->row(i) = ((logits.row(i).array() - lse).exp() - static_cast<float>(e / classes)).matrix() * scale;
        (*grad)(i, label) -= static_cast<float>((1 - e) * scale);
      } else {
        grad->row(i) = ((logits.row(i).array() - lse).exp() * scale).matrix();
        (*grad)(i, label) -= scale;
      }
    }
  }
  if (correct != nullptr) *correct = right;
  return loss;
}

// Sum the shards' partial results with a ring all-reduce over their buffers;
// returns the reduced tensor (every shard holds the same).
Mat allReduceShards(std::vector<Mat>& parts, Numerics& nx) {
  if (parts.size() == 1) return parts[0];
  if (ShardExchange* counter = nx.shardExchange()) {
    counter->elements += static_cast<double>(parts[0].size());
    counter->operations += 1;
  }
  std::vector<float*> bufs;
  for (auto& p : parts) bufs.push_back(p.data());
  ringAllReduce(bufs, static_cast<std::size_t>(parts[0].size()), nx.fp16() ? &roundShardSum : nullptr, &nx);
  return parts[0];
}

}  // namespace ipu::emu
