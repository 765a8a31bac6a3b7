// How much each parameter of a sweep matters to its metric, from the trials
// that ended with a value (`ipu report --sweep`, docs/sweeps.md "Report").
// Two figures per parameter:
//
// - Spearman's rank correlation of the parameter's value with the metric,
//   signed (positive: larger values go with a larger metric, whatever the
//   goal). Only for parameters whose values are numbers; names and text have
//   no order. It sees monotone effects only: a learning rate with an optimum
//   in the middle of its range can have a correlation near zero.
//
// - A model-based importance: the first-order (main-effect) share of the
//   metric's variance, as in fANOVA (Hutter, Hoos and Leyton-Brown 2014),
//   computed on the posterior mean of the Gaussian process the Bayesian
//   search uses (gp.h, with ARD length scales), fitted to the trials in the
//   unit cube of bayes.h's Encoding (log parameters in their logarithm,
//   lists one-hot). For parameter i, with m the model's mean:
//
//     V_i = Var over x_i of ( E over the other parameters of m(x) ),   V = Var m(x)
//     importance_i = V_i / V   (in [0, 1]; the shares sum to 1 or less, up to
//                               Monte Carlo error; the rest is interactions)
//
//   over the uniform measure of the cube (the prior of each distribution; each
//   listed value equally likely), by Monte Carlo: the same 256 random points
//   with parameter i set to each of its values (a list) or to 16 evenly spaced
//   points of its range; V and V_i are taken over those same predictions, so
//   a share is in [0, 1] and a parameter the model does not depend on scores
//   exactly 0. It sees effects of any shape, but only as well as the model
//   fits: it is left out (with a note saying why) below
//   minimumObservations(parameters) trials, when the metric does not vary,
//   and flagged when the fitted noise is most of the variance.
//
// Deterministic: the same trials give the same figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/sweep/space.h"

namespace ipu::sweep {

struct Observation {
  Assignment assignment;
  double metric = 0;  // finite
};

struct ParameterImportance {
  std::string path;
  std::optional<double> spearman;    // in [-1, 1]; none: not numeric, too few trials, or a constant
  std::optional<double> importance;  // in [0, 1]; none: see ImportanceResult::notes
};

struct ImportanceResult {
  std::vector<ParameterImportance> parameters;  // the spec's order
  std::size_t observations = 0;                 // trials used (their assignment fits the spec)
  std::size_t ignored = 0;                      // trials whose assignment does not fit the spec
  bool modelFitted = false;                     // `importance` was computed
  bool reliable = false;                        // fitted, and the model explains most of the variance
  double noiseShare = 0;                        // fitted noise variance / (signal + noise), when fitted
  double interactions = 0;                      // 1 - the sum of the main effects, when fitted
  std::vector<std::string> notes;               // why figures are missing or weak, for the reader
};

// The trials the model needs: 4 per parameter, at least 8.
std::size_t minimumObservations(std::size_t parameters);
// The trials a correlation needs.
constexpr std::size_t kMinimumForCorrelation = 5;

ImportanceResult parameterImportance(const SweepSpec& spec, const std::vector<Observation>& observations);

// Spearman's rho of two samples of the same length (ties get their average
// rank); none when fewer than 3 pairs or either sample is constant.
std::optional<double> spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace ipu::sweep
