#include "interpreter/sweep/bayes.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>

#include "interpreter/sweep/gp.h"

namespace ipu::sweep {

namespace {

double normalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double normalPdf(double x) { return 0.3989422804014327 * std::exp(-0.5 * x * x); }

// The inverse of the standard normal distribution function (Acklam's
// rational approximation, relative error below 1.2e-9), p in (0, 1).
double normalQuantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double low = 0.02425;
  if (p < low) {
    double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - low) {
    double q = std::sqrt(-2 * std::log(1 - p));
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

bool isLog(Distribution d) {
  return d == Distribution::LogUniform || d == Distribution::QLogUniform || d == Distribution::LogNormal ||
         d == Distribution::QLogNormal;
}
bool isNormal(Distribution d) {
  return d == Distribution::Normal || d == Distribution::QNormal || d == Distribution::LogNormal ||
         d == Distribution::QLogNormal;
}

// A numeric value to its coordinate in [0, 1].
double toUnit(const ParamSpec& p, double x) {
  double u;
  if (isNormal(p.distribution)) {
    double t = x;
    if (isLog(p.distribution)) t = x > 0 ? std::log(x) : -1e300;
    u = p.sigma > 0 ? normalCdf((t - p.mu) / p.sigma) : 0.5;
  } else if (isLog(p.distribution)) {
    double lo = std::log(p.min), hi = std::log(p.max);
    u = hi > lo ? ((x > 0 ? std::log(x) : lo) - lo) / (hi - lo) : 0.5;
  } else {
    u = p.max > p.min ? (x - p.min) / (p.max - p.min) : 0.5;
  }
  return std::isfinite(u) ? std::clamp(u, 0.0, 1.0) : 0.5;
}

// A coordinate to the value it stands for, rounded as the parameter requires.
ParamValue fromUnit(const ParamSpec& p, double u) {
  u = std::clamp(u, 0.0, 1.0);
  double x;
  if (isNormal(p.distribution)) {
    double t = p.mu + p.sigma * normalQuantile(std::clamp(u, 1e-9, 1 - 1e-9));
    x = isLog(p.distribution) ? std::exp(t) : t;
  } else if (isLog(p.distribution)) {
    double lo = std::log(p.min), hi = std::log(p.max);
    x = std::exp(lo + u * (hi - lo));
  } else {
    x = p.min + u * (p.max - p.min);
  }
  return quantize(p, x);
}

bool sameValue(const ParamValue& a, const ParamValue& b) {
  if (a.isNumeric() && b.isNumeric()) return a.number == b.number;
  return a == b;
}

// Fitting the hyper-parameters costs O(n^3) per likelihood evaluation and a
// few hundred evaluations; beyond kFitLimit observations they are fitted to
// the best half of kFitLimit and the rest spread evenly over the history, and
// the model is then conditioned on all observations (one factorisation).
constexpr std::size_t kFitLimit = 100;

GaussianProcess fitHyperOnSubset(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, SplitMix64& rng) {
  const auto n = static_cast<std::size_t>(X.rows());
  if (n <= kFitLimit) return GaussianProcess::fit(X, y, rng);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return y(a) < y(b); });
  std::vector<std::size_t> chosen(order.begin(), order.begin() + kFitLimit / 2);
  std::vector<std::size_t> rest(order.begin() + kFitLimit / 2, order.end());
  std::sort(rest.begin(), rest.end());
  const std::size_t others = kFitLimit - chosen.size();
  for (std::size_t i = 0; i < others; ++i) chosen.push_back(rest[i * rest.size() / others]);
  Eigen::MatrixXd Xs(chosen.size(), X.cols());
  Eigen::VectorXd ys(chosen.size());
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    Xs.row(static_cast<Eigen::Index>(i)) = X.row(static_cast<Eigen::Index>(chosen[i]));
    ys(static_cast<Eigen::Index>(i)) = y(static_cast<Eigen::Index>(chosen[i]));
  }
  GaussianProcess subset = GaussianProcess::fit(Xs, ys, rng);
  return GaussianProcess::withHyper(X, y, subset.hyper(), subset.yMean(), subset.yScale());
}

}  // namespace

Encoding::Encoding(const SweepSpec& spec) {
  for (const ParamSpec& p : spec.parameters) {
    Slot s;
    s.parameter = p;
    s.first = dimensions_;
    s.oneHot = p.distribution == Distribution::Values || p.distribution == Distribution::Categorical;
    s.width = s.oneHot ? static_cast<Eigen::Index>(p.values.size()) : 1;
    dimensions_ += s.width;
    slots_.push_back(std::move(s));
  }
}

std::optional<Eigen::VectorXd> Encoding::encode(const Assignment& a) const {
  Eigen::VectorXd point = Eigen::VectorXd::Zero(dimensions_);
  for (const Slot& s : slots_) {
    auto found = std::find_if(a.begin(), a.end(), [&](const auto& entry) { return entry.first == s.parameter.path; });
    if (found == a.end()) return std::nullopt;
    const ParamValue& v = found->second;
    if (s.oneHot) {
      const auto& values = s.parameter.values;
      auto at = std::find_if(values.begin(), values.end(), [&](const ParamValue& w) { return sameValue(v, w); });
      if (at == values.end()) return std::nullopt;
      point(s.first + (at - values.begin())) = 1;
    } else {
      if (!v.isNumeric() || !std::isfinite(v.number)) return std::nullopt;
      point(s.first) = toUnit(s.parameter, v.number);
    }
  }
  return point;
}

Assignment Encoding::decode(const Eigen::VectorXd& point) const {
  Assignment a;
  a.reserve(slots_.size());
  for (const Slot& s : slots_) {
    if (s.oneHot) {
      Eigen::Index best = 0;
      point.segment(s.first, s.width).maxCoeff(&best);
      a.emplace_back(s.parameter.path, s.parameter.values.at(static_cast<std::size_t>(best)));
    } else {
      a.emplace_back(s.parameter.path, fromUnit(s.parameter, point(s.first)));
    }
  }
  return a;
}

Eigen::VectorXd Encoding::randomPoint(SplitMix64& rng) const {
  Eigen::VectorXd point = Eigen::VectorXd::Zero(dimensions_);
  for (const Slot& s : slots_) {
    if (s.oneHot)
      point(s.first + static_cast<Eigen::Index>(rng.below(static_cast<std::uint64_t>(s.width)))) = 1;
    else
      point(s.first) = rng.uniform();
  }
  return point;
}

Eigen::VectorXd Encoding::perturb(const Eigen::VectorXd& point, double scale, SplitMix64& rng) const {
  Eigen::VectorXd moved = point;
  const double switchProbability = 1.0 / static_cast<double>(std::max<std::size_t>(1, slots_.size()));
  for (const Slot& s : slots_) {
    if (s.oneHot) {
      if (s.width > 1 && rng.uniform() < switchProbability) {
        moved.segment(s.first, s.width).setZero();
        moved(s.first + static_cast<Eigen::Index>(rng.below(static_cast<std::uint64_t>(s.width)))) = 1;
      }
    } else {
      moved(s.first) = std::clamp(point(s.first) + scale * rng.normal(), 0.0, 1.0);
    }
  }
  return moved;
}

double expectedImprovement(double mean, double sd, double best) {
  double improvement = best - mean;
  if (!(sd > 1e-12)) return std::max(improvement, 0.0);
  double z = improvement / sd;
  return improvement * normalCdf(z) + sd * normalPdf(z);
}

Proposal proposeBayes(const SweepSpec& spec, const std::vector<Trial>& history, std::uint64_t trialIndex) {
  SplitMix64 rng = SplitMix64::forStream(spec.seed, trialIndex);
  const Encoding encoding(spec);
  const double sign = spec.metric.goal == Goal::Maximize ? -1.0 : 1.0;

  std::vector<Eigen::VectorXd> observedX, failedX, pendingX;
  std::vector<double> observedY;
  std::set<std::string> taken;
  for (const Trial& t : history) {
    if (t.state != TrialState::Failed) taken.insert(assignmentKey(t.assignment));
    std::optional<Eigen::VectorXd> x = encoding.encode(t.assignment);
    if (!x) continue;
    switch (t.state) {
      case TrialState::Finished:
      case TrialState::Stopped:
        if (t.value && std::isfinite(*t.value)) {
          observedX.push_back(*x);
          observedY.push_back(sign * *t.value);
        } else {
          failedX.push_back(*x);  // ended without a usable metric: as bad as a failure
        }
        break;
      case TrialState::Failed: failedX.push_back(*x); break;
      case TrialState::Running: pendingX.push_back(*x); break;
    }
  }

  Proposal next;
  const std::size_t initial = std::max<std::size_t>(2, spec.parameters.size() + 1);
  if (history.size() < initial || observedY.size() < 2) {
    for (const ParamSpec& p : spec.parameters) next.assignment.emplace_back(p.path, sampleParameter(p, rng));
    return next;
  }

  const double worst = *std::max_element(observedY.begin(), observedY.end());
  const std::size_t n = observedX.size() + failedX.size(), dims = static_cast<std::size_t>(encoding.dimensions());
  Eigen::MatrixXd X(n, dims);
  Eigen::VectorXd y(n);
  for (std::size_t i = 0; i < observedX.size(); ++i) {
    X.row(i) = observedX[i].transpose();
    y(i) = observedY[i];
  }
  for (std::size_t i = 0; i < failedX.size(); ++i) {
    X.row(observedX.size() + i) = failedX[i].transpose();
    y(observedX.size() + i) = worst;
  }
  GaussianProcess gp = fitHyperOnSubset(X, y, rng);
  if (!pendingX.empty()) {
    Eigen::MatrixXd P(pendingX.size(), dims);
    for (std::size_t i = 0; i < pendingX.size(); ++i) P.row(i) = pendingX[i].transpose();
    Eigen::VectorXd believed, unused;
    gp.predict(P, believed, unused);
    Eigen::MatrixXd XP(n + pendingX.size(), dims);
    XP << X, P;
    Eigen::VectorXd yP(n + pendingX.size());
    yP << y, believed;
    gp = GaussianProcess::withHyper(XP, yP, gp.hyper(), gp.yMean(), gp.yScale());
  }

  // The incumbent: the smallest posterior mean at an observed or fantasised
  // point (a believed value counts as observed, so a point next to a running
  // trial that is only as good as it promises no improvement).
  Eigen::MatrixXd known(observedX.size() + pendingX.size(), dims);
  for (std::size_t i = 0; i < observedX.size(); ++i) known.row(i) = observedX[i].transpose();
  for (std::size_t i = 0; i < pendingX.size(); ++i) known.row(observedX.size() + i) = pendingX[i].transpose();
  Eigen::VectorXd knownMean, knownVariance;
  gp.predict(known, knownMean, knownVariance);
  const double incumbent = knownMean.minCoeff();

  auto score = [&](const std::vector<Eigen::VectorXd>& points) {
    Eigen::MatrixXd C(points.size(), dims);
    for (std::size_t i = 0; i < points.size(); ++i) C.row(i) = points[i].transpose();
    Eigen::VectorXd mean, variance;
    gp.predict(C, mean, variance);
    std::vector<double> ei(points.size());
    for (std::size_t i = 0; i < points.size(); ++i) ei[i] = expectedImprovement(mean(i), std::sqrt(variance(i)), incumbent);
    return ei;
  };

  std::vector<Eigen::VectorXd> candidates;
  for (int i = 0; i < 2000; ++i) candidates.push_back(encoding.round(encoding.randomPoint(rng)));
  std::vector<std::size_t> order(observedX.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return observedY[a] < observedY[b]; });
  for (std::size_t k = 0; k < std::min<std::size_t>(5, order.size()); ++k)
    for (int i = 0; i < 50; ++i) candidates.push_back(encoding.round(encoding.perturb(observedX[order[k]], 0.05, rng)));
  std::vector<double> ei = score(candidates);

  // Refine from the five best candidates that are not existing trials.
  auto isTaken = [&](const Eigen::VectorXd& point) { return taken.count(assignmentKey(encoding.decode(point))) > 0; };
  std::vector<std::size_t> ranked(candidates.size());
  std::iota(ranked.begin(), ranked.end(), 0);
  std::stable_sort(ranked.begin(), ranked.end(), [&](std::size_t a, std::size_t b) { return ei[a] > ei[b]; });
  std::vector<Eigen::VectorXd> starts;
  std::vector<double> startEi;
  for (std::size_t index : ranked) {
    if (starts.size() == 5) break;
    if (isTaken(candidates[index])) continue;
    bool duplicate = false;
    for (const auto& s : starts) duplicate = duplicate || s == candidates[index];
    if (duplicate) continue;
    starts.push_back(candidates[index]);
    startEi.push_back(ei[index]);
  }
  if (starts.empty()) {
    // Every candidate is an existing trial (a small discrete space): the best.
    next.assignment = encoding.decode(candidates[ranked.front()]);
    return next;
  }
  double scale = 0.05;
  for (int round = 0; round < 30; ++round, scale *= 0.85) {
    std::vector<Eigen::VectorXd> moves;
    for (const auto& s : starts)
      for (int i = 0; i < 8; ++i) moves.push_back(encoding.round(encoding.perturb(s, scale, rng)));
    std::vector<double> moveEi = score(moves);
    for (std::size_t k = 0; k < starts.size(); ++k)
      for (std::size_t i = 0; i < 8; ++i) {
        std::size_t m = k * 8 + i;
        if (moveEi[m] > startEi[k] && !isTaken(moves[m])) {
          starts[k] = moves[m];
          startEi[k] = moveEi[m];
        }
      }
  }
  std::size_t best = static_cast<std::size_t>(std::max_element(startEi.begin(), startEi.end()) - startEi.begin());
  next.assignment = encoding.decode(starts[best]);
  return next;
}

}  // namespace ipu::sweep
