// Bayesian against random search (interpreter/sweep) on standard test
// functions: Branin (2-D), Hartmann-6 (6-D) and Branin with Gaussian noise
// (sd 5% of Branin's range over its domain, scored on the noiseless value).
// 20 seeds per function and method, 30 trials each, proposed one at a time
// through sweep::propose exactly as agents propose them; prints the median
// (and quartiles) of the best value after 30 trials. Figures, not a test:
// docs/sweeps.md records them. Both methods share each seed, so their first
// trials (random in both) are the same points.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "interpreter/sweep/propose.h"
#include "interpreter/sweep/rng.h"

namespace {

using namespace ipu::sweep;

constexpr double kPi = 3.14159265358979323846;

double branin(const std::vector<double>& x) {
  const double b = 5.1 / (4 * kPi * kPi), c = 5 / kPi, t = 1 / (8 * kPi);
  double u = x[1] - b * x[0] * x[0] + c * x[0] - 6;
  return u * u + 10 * (1 - t) * std::cos(x[0]) + 10;
}

double hartmann6(const std::vector<double>& x) {
  static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
  static const double A[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                 {0.05, 10, 17, 0.1, 8, 14},
                                 {3, 3.5, 1.7, 10, 17, 8},
                                 {17, 8, 0.05, 10, 0.1, 14}};
  static const double P[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                 {2329, 4135, 8307, 3736, 1004, 9991},
                                 {2348, 1451, 3522, 2883, 3047, 6650},
                                 {4047, 8828, 8732, 5743, 1091, 381}};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) inner += A[i][j] * (x[j] - 1e-4 * P[i][j]) * (x[j] - 1e-4 * P[i][j]);
    sum += alpha[i] * std::exp(-inner);
  }
  return -sum;
}

struct Problem {
  std::string name;
  std::vector<std::pair<double, double>> bounds;
  std::function<double(const std::vector<double>&)> f;
  double optimum;
  double noiseSd = 0;
};

// Branin's range over its domain, from a 301 x 301 grid (its maximum, 308.1,
// is at the corner (-5, 0), which the grid contains).
double braninRange() {
  double lo = 1e300, hi = -1e300;
  for (int i = 0; i <= 300; ++i)
    for (int j = 0; j <= 300; ++j) {
      double v = branin({-5 + 15.0 * i / 300, 15.0 * j / 300});
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  return hi - lo;
}

struct Outcome {
  double best = 1e300;    // the smallest noiseless value among the trials
  double picked = 0;      // the noiseless value of the trial with the best observed value
};

Outcome runSweep(const Problem& problem, Method method, std::uint64_t seed, int trials) {
  SweepSpec spec;
  spec.name = problem.name;
  spec.method = method;
  spec.metric = {"f", Goal::Minimize, std::nullopt};
  spec.runCap = trials;
  spec.seed = seed;
  for (std::size_t d = 0; d < problem.bounds.size(); ++d) {
    ParamSpec p;
    p.path = "x" + std::to_string(d + 1);
    p.distribution = Distribution::Uniform;
    p.min = problem.bounds[d].first;
    p.max = problem.bounds[d].second;
    spec.parameters.push_back(p);
  }
  // The noise has its own stream, the same for both methods.
  SplitMix64 noise = SplitMix64::forStream(seed, 0xbadc0ffee);
  std::vector<Trial> history;
  Outcome out;
  double bestObserved = 1e300;
  for (int i = 0; i < trials; ++i) {
    Proposal p = propose(spec, history, static_cast<std::uint64_t>(i));
    if (p.kind != Proposal::Kind::Next) {
      std::fprintf(stderr, "unexpected proposal kind for %s: %s\n", problem.name.c_str(), p.problem.c_str());
      std::exit(1);
    }
    std::vector<double> x;
    for (const auto& [path, value] : p.assignment) x.push_back(value.number);
    double clean = problem.f(x);
    double observed = clean + problem.noiseSd * noise.normal();
    history.push_back({p.assignment, TrialState::Finished, observed});
    out.best = std::min(out.best, clean);
    if (observed < bestObserved) {
      bestObserved = observed;
      out.picked = clean;
    }
  }
  return out;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  auto i = static_cast<std::size_t>(pos);
  double frac = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - frac) + v[i + 1] * frac : v[i];
}

}  // namespace

int main(int argc, char** argv) {
  // [FUNCTION [FIRST_SEED]]: only one function (branin, hartmann6,
  // noisy_branin, or all), seeds FIRST_SEED.. (1000 unless given).
  const std::string only = argc > 1 && std::string(argv[1]) != "all" ? argv[1] : "";
  const std::uint64_t firstSeed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000;
  const int seeds = 20, trials = 30;
  std::vector<Problem> problems = {
      {"branin", {{-5, 10}, {0, 15}}, branin, 0.397887, 0},
      {"hartmann6", std::vector<std::pair<double, double>>(6, {0.0, 1.0}), hartmann6, -3.32237, 0},
      {"noisy_branin", {{-5, 10}, {0, 15}}, branin, 0.397887, 0.05 * braninRange()},
  };
  std::printf("%d seeds (%llu..) x %d trials; best = the smallest noiseless f among the trials; (picked) = the noiseless f of\n"
              "the trial with the best observed (noisy) value, the one a user would pick\n",
              seeds, static_cast<unsigned long long>(firstSeed), trials);
  std::printf("%-14s %10s %8s | %-26s | %-26s | %s\n", "function", "optimum", "noise sd", "random: median [q1, q3]",
              "bayes: median [q1, q3]", "bayes better (of 20)");
  auto started = std::chrono::steady_clock::now();
  for (const Problem& problem : problems) {
    if (!only.empty() && problem.name != only) continue;
    std::vector<double> random, bayes, randomPicked, bayesPicked;
    int bayesBetter = 0;
    for (int s = 0; s < seeds; ++s) {
      auto seed = firstSeed + static_cast<std::uint64_t>(s);
      Outcome r = runSweep(problem, Method::Random, seed, trials), b = runSweep(problem, Method::Bayes, seed, trials);
      random.push_back(r.best);
      bayes.push_back(b.best);
      randomPicked.push_back(r.picked);
      bayesPicked.push_back(b.picked);
      if (b.best < r.best) ++bayesBetter;
    }
    char r[64], b[64];
    std::snprintf(r, sizeof r, "%.4f [%.4f, %.4f]", quantile(random, 0.5), quantile(random, 0.25), quantile(random, 0.75));
    std::snprintf(b, sizeof b, "%.4f [%.4f, %.4f]", quantile(bayes, 0.5), quantile(bayes, 0.25), quantile(bayes, 0.75));
    std::printf("%-14s %10.4f %8.2f | %-26s | %-26s | %d\n", problem.name.c_str(), problem.optimum, problem.noiseSd, r, b,
                bayesBetter);
    if (problem.noiseSd > 0) {
      std::snprintf(r, sizeof r, "%.4f [%.4f, %.4f]", quantile(randomPicked, 0.5), quantile(randomPicked, 0.25),
                    quantile(randomPicked, 0.75));
      std::snprintf(b, sizeof b, "%.4f [%.4f, %.4f]", quantile(bayesPicked, 0.5), quantile(bayesPicked, 0.25),
                    quantile(bayesPicked, 0.75));
      std::printf("%-14s %10s %8s | %-26s | %-26s |\n", "  (picked)", "", "", r, b);
    }
    std::fflush(stdout);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("%.1f s\n", seconds);
  return 0;
}
