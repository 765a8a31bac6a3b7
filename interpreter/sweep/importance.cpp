#include "interpreter/sweep/importance.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "interpreter/sweep/bayes.h"
#include "interpreter/sweep/gp.h"

namespace ipu::sweep {

namespace {

constexpr std::size_t kBasePoints = 256;    // Monte Carlo points of the other parameters
constexpr int kLevels = 16;                 // points of a range a parameter is set to
constexpr std::size_t kFitLimit = 100;      // observations the hyper-parameters are fitted to (gp.h is O(n^3))
constexpr double kNoiseShareWarning = 0.5;  // above it, the model explains less than half the variance
constexpr std::uint64_t kSeed = 0x1a9d0b7ce5f3a2d1ULL;

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double average = 0.5 * static_cast<double>(i + j) + 1;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = average;
    i = j + 1;
  }
  return r;
}

double variance(const Eigen::VectorXd& v) {
  if (v.size() < 2) return 0;
  return (v.array() - v.mean()).square().sum() / static_cast<double>(v.size());
}

// The hyper-parameters fitted to at most kFitLimit observations spread over
// the history (every k-th), the model then conditioned on all of them.
GaussianProcess fitModel(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, SplitMix64& rng) {
  const auto n = static_cast<std::size_t>(X.rows());
  if (n <= kFitLimit) return GaussianProcess::fit(X, y, rng);
  Eigen::MatrixXd Xs(static_cast<Eigen::Index>(kFitLimit), X.cols());
  Eigen::VectorXd ys(static_cast<Eigen::Index>(kFitLimit));
  for (std::size_t i = 0; i < kFitLimit; ++i) {
    const auto from = static_cast<Eigen::Index>(i * n / kFitLimit);
    Xs.row(static_cast<Eigen::Index>(i)) = X.row(from);
    ys(static_cast<Eigen::Index>(i)) = y(from);
  }
  GaussianProcess subset = GaussianProcess::fit(Xs, ys, rng);
  return GaussianProcess::withHyper(X, y, subset.hyper(), subset.yMean(), subset.yScale());
}

Eigen::VectorXd predictMean(const GaussianProcess& gp, const Eigen::MatrixXd& points) {
  Eigen::VectorXd mean, var;
  gp.predict(points, mean, var);
  return mean;
}

}  // namespace

std::size_t minimumObservations(std::size_t parameters) { return std::max<std::size_t>(8, 4 * parameters); }

std::optional<double> spearman(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 3) return std::nullopt;
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(rx.begin(), rx.end(), 0.0) / n, my = std::accumulate(ry.begin(), ry.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  if (!(sxx > 0) || !(syy > 0)) return std::nullopt;
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

ImportanceResult parameterImportance(const SweepSpec& spec, const std::vector<Observation>& observations) {
  ImportanceResult result;
  for (const ParamSpec& p : spec.parameters) result.parameters.push_back({p.path, std::nullopt, std::nullopt});
  if (spec.parameters.empty()) return result;

  const Encoding encoding(spec);
  std::vector<Eigen::VectorXd> points;
  std::vector<const Observation*> used;
  for (const Observation& o : observations) {
    if (!std::isfinite(o.metric)) continue;
    std::optional<Eigen::VectorXd> x = encoding.encode(o.assignment);
    if (!x) {
      ++result.ignored;
      continue;
    }
    points.push_back(*x);
    used.push_back(&o);
  }
  const std::size_t n = used.size();
  result.observations = n;
  if (result.ignored > 0)
    result.notes.push_back(std::to_string(result.ignored) + " trial" + (result.ignored == 1 ? "" : "s") +
                           " left out: the assignment does not fit the sweep's parameters");

  std::vector<double> metric;
  for (const Observation* o : used) metric.push_back(o->metric);
  const bool constant = n > 0 && std::all_of(metric.begin(), metric.end(), [&](double v) { return v == metric[0]; });

  // Correlations: numeric parameters, from kMinimumForCorrelation trials.
  if (n >= kMinimumForCorrelation && !constant) {
    for (std::size_t i = 0; i < spec.parameters.size(); ++i) {
      std::vector<double> values;
      bool numeric = true;
      for (const Observation* o : used) {
        const auto& a = o->assignment;
        auto at = std::find_if(a.begin(), a.end(), [&](const auto& e) { return e.first == spec.parameters[i].path; });
        if (at == a.end() || !at->second.isNumeric()) {
          numeric = false;
          break;
        }
        values.push_back(at->second.number);
      }
      if (numeric) result.parameters[i].spearman = spearman(values, metric);
    }
  }

  const std::size_t needed = minimumObservations(spec.parameters.size());
  if (constant) {
    result.notes.push_back("the metric is the same for every trial: nothing to attribute");
    return result;
  }
  if (n < needed) {
    result.notes.push_back("model-based importance needs " + std::to_string(needed) + " trials with a metric (4 per "
                           "parameter, at least 8); there " + (n == 1 ? "is " : "are ") + std::to_string(n));
    if (n < kMinimumForCorrelation)
      result.notes.push_back("correlations need " + std::to_string(kMinimumForCorrelation) + " trials with a metric");
    return result;
  }

  Eigen::MatrixXd X(static_cast<Eigen::Index>(n), encoding.dimensions());
  Eigen::VectorXd y(static_cast<Eigen::Index>(n));
  for (std::size_t i = 0; i < n; ++i) {
    X.row(static_cast<Eigen::Index>(i)) = points[i].transpose();
    y(static_cast<Eigen::Index>(i)) = metric[i];
  }
  SplitMix64 rng(kSeed);
  const GaussianProcess gp = fitModel(X, y, rng);
  const GpHyper& h = gp.hyper();
  result.noiseShare = h.noiseVariance / (h.signalVariance + h.noiseVariance);

  // The same base points for every parameter and level (common random
  // numbers): a parameter the mean does not depend on gets exactly 0.
  Eigen::MatrixXd base(static_cast<Eigen::Index>(kBasePoints), encoding.dimensions());
  for (std::size_t b = 0; b < kBasePoints; ++b)
    base.row(static_cast<Eigen::Index>(b)) = encoding.round(encoding.randomPoint(rng)).transpose();
  const double total = variance(predictMean(gp, base));
  if (!(total > 1e-12 * std::max(1.0, y.array().abs().maxCoeff()))) {
    result.notes.push_back("the fitted model is flat (it explains the differences between trials as noise): no "
                           "parameter can be told apart");
    return result;
  }

  double sum = 0;
  for (std::size_t i = 0; i < spec.parameters.size(); ++i) {
    const Encoding::Coordinates c = encoding.coordinates(i);
    const int levels = c.oneHot ? static_cast<int>(c.width) : kLevels;
    // Every base point at every level of the parameter: a sample of the
    // product measure. The variance of all of them is the total variance
    // V, the variance of the level means the main effect's V_i; over one
    // sample V_i <= V (the law of total variance), so a share is in [0, 1].
    Eigen::VectorXd effect(levels);
    Eigen::VectorXd all(levels * base.rows());
    for (int k = 0; k < levels; ++k) {
      Eigen::MatrixXd moved = base;
      for (Eigen::Index b = 0; b < moved.rows(); ++b) {
        if (c.oneHot) {
          moved.row(b).segment(c.first, c.width).setZero();
          moved(b, c.first + k) = 1;
        } else {
          moved(b, c.first) = (k + 0.5) / kLevels;
          moved.row(b) = encoding.round(moved.row(b).transpose()).transpose();
        }
      }
      const Eigen::VectorXd m = predictMean(gp, moved);
      effect(k) = m.mean();
      all.segment(k * base.rows(), base.rows()) = m;
    }
    const double v = variance(all);
    const double share = v > 0 ? std::clamp(variance(effect) / v, 0.0, 1.0) : 0.0;
    result.parameters[i].importance = share;
    sum += share;
  }
  result.modelFitted = true;
  result.interactions = std::max(0.0, 1.0 - sum);
  result.reliable = result.noiseShare <= kNoiseShareWarning;
  if (!result.reliable)
    result.notes.push_back("the model attributes most of the metric's variation to noise (noise share " +
                           std::to_string(static_cast<int>(std::lround(100 * result.noiseShare))) +
                           "%): the importances are weak evidence");
  return result;
}

}  // namespace ipu::sweep
