#include "interpreter/sweep/gp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace ipu::sweep {

namespace {

constexpr double kSqrt5 = 2.23606797749979;
constexpr double kLog2Pi = 1.8378770664093453;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Bounds of the log hyper-parameters (gp.h).
const double kLogLengthMin = std::log(0.01), kLogLengthMax = std::log(20.0);
const double kLogSignalMin = std::log(0.05), kLogSignalMax = std::log(20.0);
const double kLogNoiseMin = std::log(1e-6), kLogNoiseMax = std::log(2.0);
const double kLogLengthPriorMedian = std::log(0.4), kLogLengthPriorSd = 1.0;
const double kLogNoisePriorMedian = std::log(1e-2), kLogNoisePriorSd = 2.0;

// Squared scaled distances r^2 between the rows of A and of B (|a|^2 + |b|^2
// - 2 a.b, a matrix product rather than a loop over pairs).
Eigen::MatrixXd squaredDistances(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B, const Eigen::VectorXd& lengths) {
  Eigen::MatrixXd a = A * lengths.cwiseInverse().asDiagonal(), b = B * lengths.cwiseInverse().asDiagonal();
  Eigen::MatrixXd d = -2.0 * a * b.transpose();
  d.colwise() += a.rowwise().squaredNorm();
  d.rowwise() += b.rowwise().squaredNorm().transpose();
  return d.cwiseMax(0.0);
}

// The Matern 5/2 kernel of squared distances.
Eigen::MatrixXd matern(const Eigen::MatrixXd& r2, double signal) {
  Eigen::ArrayXXd r = r2.array().sqrt();
  return (signal * (1 + kSqrt5 * r + 5.0 / 3.0 * r2.array()) * (-kSqrt5 * r).exp()).matrix();
}

// K = k(X, X), and the factor C with dk/dlog l_d = C * delta_d^2 / l_d^2.
void kernelMatrix(const Eigen::MatrixXd& X, const GpHyper& h, Eigen::MatrixXd& K, Eigen::MatrixXd* C) {
  Eigen::MatrixXd r2 = squaredDistances(X, X, h.lengthScales);
  r2.diagonal().setZero();
  K = matern(r2, h.signalVariance);
  if (C) {
    Eigen::ArrayXXd r = r2.array().sqrt();
    *C = (h.signalVariance * 5.0 / 3.0 * (1 + kSqrt5 * r) * (-kSqrt5 * r).exp()).matrix();
  }
}

// Cholesky of K + noise I with the smallest jitter (1e-8 up to 1e-4 of the
// signal variance) that makes it positive definite; false if none does.
bool factor(const Eigen::MatrixXd& K, double noise, double signal, Eigen::LLT<Eigen::MatrixXd>& llt) {
  for (double jitter = 1e-8; jitter <= 1.01e-4; jitter *= 10) {
    Eigen::MatrixXd A = K;
    A.diagonal().array() += noise + jitter * signal;
    llt.compute(A);
    if (llt.info() == Eigen::Success) return true;
  }
  return false;
}

struct Bounds {
  Eigen::VectorXd lo, hi;
};
Bounds hyperBounds(Eigen::Index dims) {
  Bounds b;
  b.lo.resize(dims + 2);
  b.hi.resize(dims + 2);
  b.lo.head(dims).setConstant(kLogLengthMin);
  b.hi.head(dims).setConstant(kLogLengthMax);
  b.lo(dims) = kLogSignalMin;
  b.hi(dims) = kLogSignalMax;
  b.lo(dims + 1) = kLogNoiseMin;
  b.hi(dims + 1) = kLogNoiseMax;
  return b;
}

// The optimiser works on unbounded z; the log hyper-parameters are
// lo + (hi - lo) * sigmoid(z), so every step stays within the bounds.
GpHyper fromUnbounded(const Eigen::VectorXd& z, const Bounds& b, Eigen::VectorXd* dTheta) {
  const Eigen::Index dims = z.size() - 2;
  Eigen::VectorXd s = (1.0 + (-z.array()).exp()).inverse().matrix();
  Eigen::VectorXd theta = b.lo + (b.hi - b.lo).cwiseProduct(s);
  if (dTheta) *dTheta = (b.hi - b.lo).cwiseProduct(s.cwiseProduct((1.0 - s.array()).matrix()));
  GpHyper h;
  h.lengthScales = theta.head(dims).array().exp().matrix();
  h.signalVariance = std::exp(theta(dims));
  h.noiseVariance = std::exp(theta(dims + 1));
  return h;
}

// Limited-memory BFGS (Nocedal and Wright, algorithm 7.4) with a backtracking
// Armijo line search, minimising f. Returns the best point found.
template <typename F>
Eigen::VectorXd minimise(F&& f, Eigen::VectorXd x, int maxIterations, double& fx) {
  const int memory = 8;
  Eigen::VectorXd g(x.size());
  fx = f(x, g);
  if (!std::isfinite(fx)) return x;
  std::vector<Eigen::VectorXd> S, Y;
  for (int iteration = 0; iteration < maxIterations; ++iteration) {
    if (g.lpNorm<Eigen::Infinity>() < 1e-5) break;
    // Two-loop recursion: d = -H g.
    Eigen::VectorXd q = g;
    std::vector<double> a(S.size());
    for (std::size_t k = S.size(); k-- > 0;) {
      a[k] = S[k].dot(q) / Y[k].dot(S[k]);
      q -= a[k] * Y[k];
    }
    if (!S.empty()) q *= S.back().dot(Y.back()) / Y.back().squaredNorm();
    for (std::size_t k = 0; k < S.size(); ++k) {
      double b = Y[k].dot(q) / Y[k].dot(S[k]);
      q += (a[k] - b) * S[k];
    }
    Eigen::VectorXd d = -q;
    double slope = g.dot(d);
    if (!(slope < 0)) {
      d = -g;
      slope = -g.squaredNorm();
      S.clear();
      Y.clear();
    }
    double step = S.empty() ? std::min(1.0, 1.0 / g.norm()) : 1.0;
    Eigen::VectorXd xNew, gNew(x.size());
    double fNew = kInfinity;
    bool accepted = false;
    for (int halving = 0; halving < 30; ++halving) {
      xNew = x + step * d;
      fNew = f(xNew, gNew);
      if (std::isfinite(fNew) && fNew <= fx + 1e-4 * step * slope) {
        accepted = true;
        break;
      }
      step *= 0.5;
    }
    if (!accepted) break;
    Eigen::VectorXd s = xNew - x, y = gNew - g;
    bool converged = std::fabs(fx - fNew) < 1e-8 * (1 + std::fabs(fx));
    x = xNew;
    g = gNew;
    fx = fNew;
    if (converged) break;
    if (s.dot(y) > 1e-12) {
      S.push_back(s);
      Y.push_back(y);
      if (static_cast<int>(S.size()) > memory) {
        S.erase(S.begin());
        Y.erase(Y.begin());
      }
    }
  }
  return x;
}

}  // namespace

double GaussianProcess::logMarginalLikelihood(const Eigen::MatrixXd& X, const Eigen::VectorXd& z, const GpHyper& h,
                                              Eigen::VectorXd* gradient) {
  const Eigen::Index n = X.rows(), dims = X.cols();
  Eigen::MatrixXd K, C;
  kernelMatrix(X, h, K, gradient ? &C : nullptr);
  Eigen::LLT<Eigen::MatrixXd> llt;
  if (!factor(K, h.noiseVariance, h.signalVariance, llt)) return -kInfinity;
  Eigen::VectorXd alpha = llt.solve(z);
  double logDet = 2 * llt.matrixLLT().diagonal().array().log().sum();
  double lml = -0.5 * z.dot(alpha) - 0.5 * logDet - 0.5 * static_cast<double>(n) * kLog2Pi;
  if (gradient) {
    // d lml / d theta = 1/2 tr((alpha alpha^T - K^-1) dK/dtheta).
    Eigen::MatrixXd W = alpha * alpha.transpose() - llt.solve(Eigen::MatrixXd::Identity(n, n));
    gradient->resize(dims + 2);
    // sum_ij WC_ij (x_i - x_j)^2 = 2 sum_i x_i^2 (WC 1)_i - 2 x^T WC x, WC symmetric.
    Eigen::MatrixXd WC = W.cwiseProduct(C);
    Eigen::VectorXd rowSums = WC.rowwise().sum();
    for (Eigen::Index d = 0; d < dims; ++d) {
      const auto x = X.col(d);
      double sum = 2 * x.cwiseAbs2().dot(rowSums) - 2 * x.dot(WC * x);
      (*gradient)(d) = 0.5 * sum / (h.lengthScales(d) * h.lengthScales(d));
    }
    (*gradient)(dims) = 0.5 * W.cwiseProduct(K).sum();
    (*gradient)(dims + 1) = 0.5 * h.noiseVariance * W.trace();
  }
  return lml;
}

GaussianProcess GaussianProcess::withHyper(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const GpHyper& hyper,
                                           double yMean, double yScale) {
  GaussianProcess gp;
  gp.X_ = X;
  gp.hyper_ = hyper;
  gp.yMean_ = yMean;
  gp.yScale_ = yScale;
  Eigen::VectorXd z = (y.array() - yMean) / yScale;
  Eigen::MatrixXd K;
  kernelMatrix(X, hyper, K, nullptr);
  if (!factor(K, hyper.noiseVariance, hyper.signalVariance, gp.llt_)) {
    // Cannot happen with a noise variance >= 1e-6 of a unit signal; keep a
    // usable model anyway: the prior plus a large noise.
    K.diagonal().array() += 1.0;
    gp.llt_.compute(K);
  }
  gp.alpha_ = gp.llt_.solve(z);
  const Eigen::Index n = X.rows();
  gp.lml_ = -0.5 * z.dot(gp.alpha_) - gp.llt_.matrixLLT().diagonal().array().log().sum() -
            0.5 * static_cast<double>(n) * kLog2Pi;
  return gp;
}

GaussianProcess GaussianProcess::fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, SplitMix64& rng, int starts) {
  const Eigen::Index dims = X.cols();
  double mean = y.mean();
  double scale = y.size() > 1 ? std::sqrt((y.array() - mean).square().mean()) : 0.0;
  if (!(scale > 1e-12 * (1 + std::fabs(mean)))) scale = 1;
  Eigen::VectorXd z = (y.array() - mean) / scale;

  Bounds bounds = hyperBounds(dims);
  auto objective = [&](const Eigen::VectorXd& u, Eigen::VectorXd& g) {
    Eigen::VectorXd dTheta, gTheta;
    GpHyper h = fromUnbounded(u, bounds, &dTheta);
    double lml = logMarginalLikelihood(X, z, h, &gTheta);
    if (!std::isfinite(lml)) return kInfinity;
    // The log-normal priors on each length scale and the noise (gp.h).
    for (Eigen::Index d = 0; d < dims; ++d) {
      double t = (std::log(h.lengthScales(d)) - kLogLengthPriorMedian) / kLogLengthPriorSd;
      lml -= 0.5 * t * t;
      gTheta(d) -= t / kLogLengthPriorSd;
    }
    double t = (std::log(h.noiseVariance) - kLogNoisePriorMedian) / kLogNoisePriorSd;
    lml -= 0.5 * t * t;
    gTheta(dims + 1) -= t / kLogNoisePriorSd;
    g = -gTheta.cwiseProduct(dTheta);
    return -lml;
  };
  Eigen::VectorXd best;
  double bestValue = kInfinity;
  for (int start = 0; start < std::max(1, starts); ++start) {
    Eigen::VectorXd u = Eigen::VectorXd::Zero(dims + 2);
    if (start > 0)
      for (Eigen::Index i = 0; i < u.size(); ++i) u(i) = 1.5 * rng.normal();
    double value = kInfinity;
    Eigen::VectorXd found = minimise(objective, u, 60, value);
    if (value < bestValue || best.size() == 0) {
      bestValue = value;
      best = found;
    }
  }
  return withHyper(X, y, fromUnbounded(best, bounds, nullptr), mean, scale);
}

void GaussianProcess::predict(const Eigen::MatrixXd& Xs, Eigen::VectorXd& mean, Eigen::VectorXd& variance) const {
  Eigen::MatrixXd Ks = matern(squaredDistances(X_, Xs, hyper_.lengthScales), hyper_.signalVariance);
  Eigen::VectorXd meanZ = Ks.transpose() * alpha_;
  Eigen::MatrixXd V = llt_.matrixL().solve(Ks);
  Eigen::VectorXd varianceZ =
      (hyper_.signalVariance - V.colwise().squaredNorm().transpose().array()).max(0.0).matrix();
  mean = (yMean_ + yScale_ * meanZ.array()).matrix();
  variance = (yScale_ * yScale_ * varianceZ.array()).matrix();
}

}  // namespace ipu::sweep
