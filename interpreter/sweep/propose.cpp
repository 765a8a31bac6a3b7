#include "interpreter/sweep/propose.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "interpreter/sweep/bayes.h"

namespace ipu::sweep {

namespace {

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

bool integralStep(double q) { return q >= 1 && q < kMaxExactInteger && std::floor(q) == q; }

bool isQ(Distribution d) {
  return d == Distribution::QUniform || d == Distribution::QLogUniform || d == Distribution::QNormal ||
         d == Distribution::QLogNormal;
}
bool hasRange(Distribution d) {
  return d == Distribution::Uniform || d == Distribution::IntUniform || d == Distribution::LogUniform ||
         d == Distribution::QUniform || d == Distribution::QLogUniform;
}
bool isLogRange(Distribution d) { return d == Distribution::LogUniform || d == Distribution::QLogUniform; }

// The multiples k*q within [min, max] of a bounded q form: k in [first, last].
// A small tolerance so that 0.3 / 0.1 (2.9999999999999996) counts 3.
struct Multiples {
  double first = 0, last = -1;
  double count() const { return last >= first ? last - first + 1 : 0; }
};
Multiples multiplesInRange(const ParamSpec& p) {
  Multiples m;
  m.first = std::ceil(p.min / p.q - 1e-9);
  m.last = std::floor(p.max / p.q + 1e-9);
  return m;
}

struct IntRange {
  double first = 0, last = -1;
  double count() const { return last >= first ? last - first + 1 : 0; }
};
IntRange integersInRange(const ParamSpec& p) { return {std::ceil(p.min), std::floor(p.max)}; }

ParamValue stepValue(const ParamSpec& p, double k) {
  double v = multipleOf(p.q, k);
  if (integralStep(p.q) && std::fabs(v) < kMaxExactInteger) return ParamValue::ofInteger(static_cast<long long>(v));
  return ParamValue::ofNumber(v);
}

// How many values a parameter has in a grid (as a double: it may be huge), or
// nullopt when it has no finite list.
std::optional<double> gridCount(const ParamSpec& p) {
  switch (p.distribution) {
    case Distribution::Values:
    case Distribution::Categorical: return static_cast<double>(p.values.size());
    case Distribution::IntUniform: return integersInRange(p).count();
    case Distribution::QUniform:
    case Distribution::QLogUniform: return multiplesInRange(p).count();
    default: return std::nullopt;
  }
}

ParamValue gridValueAt(const ParamSpec& p, std::uint64_t i) {
  switch (p.distribution) {
    case Distribution::Values:
    case Distribution::Categorical: return p.values.at(i);
    case Distribution::IntUniform:
      return ParamValue::ofInteger(static_cast<long long>(integersInRange(p).first + static_cast<double>(i)));
    default: return stepValue(p, multiplesInRange(p).first + static_cast<double>(i));
  }
}

std::string parameterProblem(const ParamSpec& p, Method method) {
  const std::string where = "parameter `" + p.path + "` (" + distributionName(p.distribution) + "): ";
  switch (p.distribution) {
    case Distribution::Values:
    case Distribution::Categorical: {
      if (p.values.empty()) return where + "no values";
      if (p.distribution == Distribution::Categorical && !p.probabilities.empty()) {
        if (p.probabilities.size() != p.values.size())
          return where + std::to_string(p.probabilities.size()) + " probabilities for " +
                 std::to_string(p.values.size()) + " values";
        double total = 0;
        for (double w : p.probabilities) {
          if (!std::isfinite(w) || w < 0) return where + "a probability is negative or not finite";
          total += w;
        }
        if (!(total > 0)) return where + "the probabilities sum to zero";
      }
      return {};
    }
    default: break;
  }
  if (hasRange(p.distribution)) {
    if (!std::isfinite(p.min) || !std::isfinite(p.max)) return where + "the bounds must be finite";
    if (p.min > p.max) return where + "min is greater than max";
    if (isLogRange(p.distribution) && !(p.min > 0)) return where + "the bounds of a log range must be positive";
  } else {
    if (!std::isfinite(p.mu) || !std::isfinite(p.sigma)) return where + "mu and sigma must be finite";
    if (p.sigma < 0) return where + "sigma is negative";
  }
  if (isQ(p.distribution) && !(std::isfinite(p.q) && p.q > 0)) return where + "q must be positive";
  if (p.distribution == Distribution::IntUniform) {
    if (std::fabs(p.min) >= kMaxExactInteger || std::fabs(p.max) >= kMaxExactInteger)
      return where + "the bounds must be within +-2^53";
    if (integersInRange(p).count() == 0) return where + "no integer lies in [min, max]";
  }
  if ((p.distribution == Distribution::QUniform || p.distribution == Distribution::QLogUniform)) {
    if (multiplesInRange(p).count() == 0) return where + "no multiple of q lies in [min, max]";
    if (std::fabs(p.min / p.q) >= kMaxExactInteger || std::fabs(p.max / p.q) >= kMaxExactInteger)
      return where + "too many multiples of q in [min, max]";
  }
  if (method == Method::Grid && !gridCount(p))
    return where + "a grid needs a finite list of values (values, categorical, int_uniform, q_uniform or "
                   "q_log_uniform with bounds)";
  return {};
}

bool reached(const Metric& m, double v) {
  if (!m.target || !std::isfinite(v)) return false;
  return m.goal == Goal::Minimize ? v <= *m.target : v >= *m.target;
}

Proposal exhausted(Proposal::Why why) {
  Proposal p;
  p.kind = Proposal::Kind::Exhausted;
  p.why = why;
  return p;
}

}  // namespace

const char* trialStateName(TrialState s) {
  switch (s) {
    case TrialState::Finished: return "finished";
    case TrialState::Failed: return "failed";
    case TrialState::Running: return "running";
    case TrialState::Stopped: return "stopped";
  }
  return "?";
}

double multipleOf(double q, double k) {
  double v = k * q;
  if (!std::isfinite(v) || v == 0) return v == 0 ? 0.0 : v;
  char buf[64];
  auto written = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 15);
  double shortened = v;
  std::from_chars(buf, written.ptr, shortened);
  return shortened;
}

ParamValue quantize(const ParamSpec& p, double x) {
  switch (p.distribution) {
    case Distribution::IntUniform: {
      IntRange r = integersInRange(p);
      double v = std::clamp(std::round(x), r.first, r.last);
      return ParamValue::ofInteger(static_cast<long long>(v));
    }
    case Distribution::Uniform:
    case Distribution::LogUniform: return ParamValue::ofNumber(std::clamp(x, p.min, p.max));
    case Distribution::QUniform:
    case Distribution::QLogUniform: {
      Multiples m = multiplesInRange(p);
      return stepValue(p, std::clamp(std::round(x / p.q), m.first, m.last));
    }
    case Distribution::QNormal:
    case Distribution::QLogNormal: return stepValue(p, std::round(x / p.q));
    default: return ParamValue::ofNumber(x);
  }
}

ParamValue sampleParameter(const ParamSpec& p, SplitMix64& rng) {
  switch (p.distribution) {
    case Distribution::Values: return p.values.at(rng.below(p.values.size()));
    case Distribution::Categorical: {
      if (p.probabilities.empty()) return p.values.at(rng.below(p.values.size()));
      double total = 0;
      for (double w : p.probabilities) total += w;
      double u = rng.uniform() * total, cumulative = 0;
      for (std::size_t i = 0; i < p.values.size(); ++i) {
        cumulative += p.probabilities[i];
        if (u < cumulative) return p.values[i];
      }
      // Rounding can leave u at the total: the last value with weight.
      for (std::size_t i = p.values.size(); i-- > 0;)
        if (p.probabilities[i] > 0) return p.values[i];
      return p.values.back();
    }
    case Distribution::Uniform:
    case Distribution::QUniform: return quantize(p, p.min + rng.uniform() * (p.max - p.min));
    case Distribution::IntUniform: {
      IntRange r = integersInRange(p);
      auto n = static_cast<std::uint64_t>(r.count());
      return ParamValue::ofInteger(static_cast<long long>(r.first) + static_cast<long long>(rng.below(n)));
    }
    case Distribution::LogUniform:
    case Distribution::QLogUniform: {
      double lo = std::log(p.min), hi = std::log(p.max);
      return quantize(p, std::exp(lo + rng.uniform() * (hi - lo)));
    }
    case Distribution::Normal:
    case Distribution::QNormal: return quantize(p, p.mu + p.sigma * rng.normal());
    case Distribution::LogNormal:
    case Distribution::QLogNormal: return quantize(p, std::exp(p.mu + p.sigma * rng.normal()));
  }
  return ParamValue::ofNumber(0);
}

std::optional<std::string> specProblem(const SweepSpec& spec) {
  if (spec.parameters.empty()) return std::string("the sweep has no parameters");
  std::set<std::string> paths;
  for (const ParamSpec& p : spec.parameters) {
    if (!paths.insert(p.path).second) return "parameter `" + p.path + "` is declared twice";
    std::string problem = parameterProblem(p, spec.method);
    if (!problem.empty()) return problem;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> gridSize(const SweepSpec& spec) {
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t size = 1;
  for (const ParamSpec& p : spec.parameters) {
    std::optional<double> count = gridCount(p);
    if (!count) return std::nullopt;
    if (*count == 0) return 0;
    if (*count >= 1.8e19 || static_cast<std::uint64_t>(*count) > kMax / size) {
      size = kMax;  // saturated; a later zero still makes the grid empty
      continue;
    }
    size = size == kMax ? kMax : size * static_cast<std::uint64_t>(*count);
  }
  return size;
}

std::vector<ParamValue> gridValues(const ParamSpec& p, std::uint64_t limit) {
  std::optional<double> count = gridCount(p);
  if (!count || *count == 0 || *count > static_cast<double>(limit)) return {};
  std::vector<ParamValue> out;
  auto n = static_cast<std::uint64_t>(*count);
  out.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) out.push_back(gridValueAt(p, i));
  return out;
}

Assignment gridCell(const SweepSpec& spec, std::uint64_t index) {
  Assignment cell(spec.parameters.size());
  for (std::size_t i = spec.parameters.size(); i-- > 0;) {
    const ParamSpec& p = spec.parameters[i];
    auto n = static_cast<std::uint64_t>(gridCount(p).value_or(1));
    cell[i] = {p.path, gridValueAt(p, index % n)};
    index /= n;
  }
  return cell;
}

Proposal propose(const SweepSpec& spec, const std::vector<Trial>& history, std::uint64_t trialIndex) {
  if (std::optional<std::string> problem = specProblem(spec)) {
    Proposal p;
    p.kind = Proposal::Kind::Invalid;
    p.problem = *problem;
    return p;
  }
  long long counted = 0;
  for (const Trial& t : history) {
    if ((t.state == TrialState::Finished || t.state == TrialState::Stopped) && t.value && reached(spec.metric, *t.value))
      return exhausted(Proposal::Why::TargetReached);
    if (t.state != TrialState::Failed) ++counted;
  }
  if (spec.runCap > 0 && counted >= spec.runCap) return exhausted(Proposal::Why::RunCap);

  Proposal next;
  switch (spec.method) {
    case Method::Grid: {
      std::set<std::string> taken;
      for (const Trial& t : history)
        if (t.state != TrialState::Failed) taken.insert(assignmentKey(t.assignment));
      std::uint64_t size = gridSize(spec).value_or(0);
      // At most |taken| cells are skipped, so this ends however large the grid.
      for (std::uint64_t i = 0; i < size; ++i) {
        Assignment cell = gridCell(spec, i);
        if (!taken.count(assignmentKey(cell))) {
          next.assignment = std::move(cell);
          return next;
        }
      }
      return exhausted(Proposal::Why::GridDone);
    }
    case Method::Random: {
      SplitMix64 rng = SplitMix64::forStream(spec.seed, trialIndex);
      for (const ParamSpec& p : spec.parameters) next.assignment.emplace_back(p.path, sampleParameter(p, rng));
      return next;
    }
    case Method::Bayes: return proposeBayes(spec, history, trialIndex);
  }
  return next;
}

}  // namespace ipu::sweep
