// A Gaussian process regression model for Bayesian search: zero-mean prior on
// standardised targets, Matern 5/2 kernel with one length scale per input
// dimension (ARD), Gaussian observation noise. Inputs are points of the unit
// cube (bayes.h maps parameters there).
//
//   k(x, x') = s2 * (1 + sqrt5 r + 5/3 r^2) * exp(-sqrt5 r),
//   r^2 = sum_d ((x_d - x'_d) / l_d)^2,   K = k(X, X) + (noise + jitter) I
//
// The hyper-parameters (l_1..l_D, s2, noise) are fitted by maximising the log
// marginal likelihood with its analytic gradient (L-BFGS, several starts),
// each one bounded: l in [0.01, 20], s2 in [0.05, 20], noise in [1e-6, 2]
// (targets are standardised, so these are relative to their spread). Each
// length scale also has a weak log-normal prior (median 0.4, sd 1 in the
// logarithm) added to the likelihood: with the few observations of a sweep's
// first trials the likelihood alone often prefers length scales so short
// that the model is white noise (a mean that reverts to the average between
// any two trials), and expected improvement then only re-samples the best
// trial's neighbourhood. With a few dozen observations the data dominate.
#pragma once

#include <Eigen/Dense>

#include "interpreter/sweep/rng.h"

namespace ipu::sweep {

struct GpHyper {
  Eigen::VectorXd lengthScales;
  double signalVariance = 1;
  double noiseVariance = 1e-4;
};

class GaussianProcess {
 public:
  // Fits the hyper-parameters to (X, y): one row of X per observation. The
  // optimiser starts from the middle of the bounds (in log space) and from
  // `starts - 1` random points drawn from `rng`.
  static GaussianProcess fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, SplitMix64& rng, int starts = 4);
  // The posterior of the same prior (hyper-parameters and standardisation)
  // given other data: for fantasised observations.
  static GaussianProcess withHyper(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const GpHyper& hyper,
                                   double yMean, double yScale);

  // Posterior mean and variance of the latent function (noise excluded), in
  // the units of y, at each row of Xs.
  void predict(const Eigen::MatrixXd& Xs, Eigen::VectorXd& mean, Eigen::VectorXd& variance) const;

  const GpHyper& hyper() const { return hyper_; }
  double yMean() const { return yMean_; }
  double yScale() const { return yScale_; }
  double logMarginalLikelihood() const { return lml_; }

  // The log marginal likelihood of standardised targets z under `hyper`, and
  // its gradient with respect to (log l_1..log l_D, log s2, log noise) when
  // `gradient` is not null. -infinity when K cannot be factorised.
  static double logMarginalLikelihood(const Eigen::MatrixXd& X, const Eigen::VectorXd& z, const GpHyper& hyper,
                                      Eigen::VectorXd* gradient);

 private:
  Eigen::MatrixXd X_;
  GpHyper hyper_;
  double yMean_ = 0, yScale_ = 1;
  Eigen::LLT<Eigen::MatrixXd> llt_;
  Eigen::VectorXd alpha_;  // K^-1 z
  double lml_ = 0;
};

}  // namespace ipu::sweep
