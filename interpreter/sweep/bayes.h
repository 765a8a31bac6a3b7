// Bayesian search (docs/sweeps.md, "Search methods"): a Gaussian process
// (gp.h) over the parameters mapped to the unit cube, and the next trial
// where the expected improvement is largest.
//
// - Parameters to the unit cube: ranges linearly (uniform, int_uniform,
//   q_uniform) or in the logarithm (log_uniform, q_log_uniform); the normal
//   forms through their cumulative distribution (so a uniform point of the
//   cube is a draw from the prior); values and categorical one-hot, one
//   dimension per value. A point of the cube is turned back into values by
//   the inverse map, rounding (quantize) and the largest one-hot coordinate,
//   and every candidate is scored at its rounded point.
// - Targets: the metric, negated when the goal is maximize (the GP
//   minimises). Finished and stopped trials with a finite value are
//   observations; failed trials (and finished or stopped ones without a
//   finite value) are observations of the worst value observed
//   (so the search moves away from where trials fail); running trials are
//   fantasies: the GP fitted to the observations is conditioned on its own
//   mean at their points (the "kriging believer"), which leaves the mean
//   unchanged but removes the uncertainty there, so concurrent agents spread
//   out. Trials whose assignment does not fit the spec are ignored.
// - Beyond 100 observations the hyper-parameters are fitted to 100 of them
//   (the best 50 and 50 spread over the rest), and the model conditioned on
//   all: a sweep of 500 trials proposes in about a second.
// - The first max(2, parameters + 1) trials, or all trials while fewer than
//   two observations exist, are drawn as by random search.
// - Expected improvement over the smallest posterior mean at an observed or
//   running trial's point (robust to noise), maximised over 2000 random points of the cube
//   and 250 perturbations of the five best observations, then refined from
//   the five best candidates by 30 rounds of shrinking random perturbations.
//   A candidate equal to an existing (finished, stopped or running) trial is
//   taken only if no other is left.
#pragma once

#include <optional>
#include <vector>

#include <Eigen/Dense>

#include "interpreter/sweep/propose.h"

namespace ipu::sweep {

// The unit-cube coordinates of a spec's parameters.
class Encoding {
 public:
  explicit Encoding(const SweepSpec& spec);
  Eigen::Index dimensions() const { return dimensions_; }
  // nullopt when a parameter is missing or a listed value is not in its list.
  std::optional<Eigen::VectorXd> encode(const Assignment& a) const;
  Assignment decode(const Eigen::VectorXd& point) const;
  // The point of the values `point` decodes to (rounded); `point` itself if
  // they cannot be encoded (a log-normal draw beyond the largest double).
  Eigen::VectorXd round(const Eigen::VectorXd& point) const { return encode(decode(point)).value_or(point); }
  Eigen::VectorXd randomPoint(SplitMix64& rng) const;
  // A nearby point: continuous coordinates moved by N(0, scale^2) (within
  // [0, 1]); each one-hot parameter switched to another value with
  // probability 1 / parameters.
  Eigen::VectorXd perturb(const Eigen::VectorXd& point, double scale, SplitMix64& rng) const;
  // The coordinates of the spec's `parameter`-th parameter: `width` of them
  // from `first` (one per value when one-hot). For importance.h, which
  // varies one parameter of a point at a time.
  struct Coordinates {
    Eigen::Index first = 0, width = 1;
    bool oneHot = false;
  };
  Coordinates coordinates(std::size_t parameter) const {
    const Slot& s = slots_.at(parameter);
    return {s.first, s.width, s.oneHot};
  }

 private:
  struct Slot {
    ParamSpec parameter;
    Eigen::Index first = 0, width = 1;  // its coordinates
    bool oneHot = false;
  };
  std::vector<Slot> slots_;
  Eigen::Index dimensions_ = 0;
};

// Expected improvement (of a minimisation) over `best` of a normal
// prediction with the given mean and standard deviation.
double expectedImprovement(double mean, double sd, double best);

// propose() for method bayes, after its common checks.
Proposal proposeBayes(const SweepSpec& spec, const std::vector<Trial>& history, std::uint64_t trialIndex);

}  // namespace ipu::sweep
