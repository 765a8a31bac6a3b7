// Parameter importance (interpreter/sweep/importance.h, docs/sweeps.md
// "Report"): on synthetic sweeps where one parameter drives the metric and
// the others are noise, the driver's importance dominates, whatever the shape
// of its effect (monotone, with an optimum inside its range, categorical);
// correlations are signed and see monotone effects only; too few trials or a
// constant metric give notes, not numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>

#include "interpreter/sweep/importance.h"
#include "interpreter/sweep/rng.h"

namespace ipu::sweep {
namespace {

ParamSpec ranged(const std::string& path, Distribution d, double min, double max) {
  ParamSpec p;
  p.path = path;
  p.distribution = d;
  p.min = min;
  p.max = max;
  return p;
}
ParamSpec listed(const std::string& path, std::vector<ParamValue> v) {
  ParamSpec p;
  p.path = path;
  p.distribution = Distribution::Values;
  p.values = std::move(v);
  return p;
}
SweepSpec specOf(std::vector<ParamSpec> params) {
  SweepSpec s;
  s.name = "synthetic";
  s.training = "t";
  s.method = Method::Random;
  s.metric.name = "loss";
  s.parameters = std::move(params);
  return s;
}
const ParameterImportance& of(const ImportanceResult& r, const std::string& path) {
  for (const auto& p : r.parameters)
    if (p.path == path) return p;
  throw std::runtime_error("no parameter " + path);
}

// metric = 5 x + noise; z does nothing.
std::vector<Observation> linearDriver(std::size_t n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<Observation> out;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = rng.uniform(), z = rng.uniform();
    out.push_back({{{"x", ParamValue::ofNumber(x)}, {"z", ParamValue::ofNumber(z)}}, 5 * x + 0.1 * rng.normal()});
  }
  return out;
}

TEST(SweepImportance, AMonotoneDriverDominatesANoiseParameter) {
  const SweepSpec spec = specOf({ranged("x", Distribution::Uniform, 0, 1), ranged("z", Distribution::Uniform, 0, 1)});
  const ImportanceResult r = parameterImportance(spec, linearDriver(30, 11));
  ASSERT_TRUE(r.modelFitted) << (r.notes.empty() ? "" : r.notes[0]);
  EXPECT_TRUE(r.reliable);
  EXPECT_EQ(r.observations, 30u);
  const auto &x = of(r, "x"), &z = of(r, "z");
  ASSERT_TRUE(x.importance && z.importance && x.spearman && z.spearman);
  EXPECT_GT(*x.importance, 0.85);
  EXPECT_LT(*z.importance, 0.05);
  EXPECT_GT(*x.importance, 20 * *z.importance);
  EXPECT_GT(*x.spearman, 0.9);  // signed: the metric grows with x
  EXPECT_LT(std::abs(*z.spearman), 0.45);
  EXPECT_GE(r.interactions, 0.0);
  EXPECT_LE(*x.importance + *z.importance, 1.02);  // each share has its own Monte Carlo total
}

TEST(SweepImportance, CorrelationIsSignedByTheDirectionOfTheEffect) {
  const SweepSpec spec = specOf({ranged("x", Distribution::Uniform, 0, 1), ranged("z", Distribution::Uniform, 0, 1)});
  std::vector<Observation> obs = linearDriver(30, 11);
  for (auto& o : obs) o.metric = -o.metric;
  const ImportanceResult r = parameterImportance(spec, obs);
  ASSERT_TRUE(of(r, "x").spearman);
  EXPECT_LT(*of(r, "x").spearman, -0.9);
  ASSERT_TRUE(of(r, "x").importance);
  EXPECT_GT(*of(r, "x").importance, 0.85);
}

// A learning rate with its optimum in the middle of a log range: the rank
// correlation misses it, the model-based importance does not. The other
// parameter is a list of names that does nothing.
TEST(SweepImportance, AnOptimumInsideALogRangeIsFoundByTheModelNotByTheCorrelation) {
  const SweepSpec spec =
      specOf({ranged("lr", Distribution::LogUniform, 1e-4, 1e-1),
              listed("precision.compute", {ParamValue::ofName("fp16"), ParamValue::ofName("fp32"), ParamValue::ofName("bf16")})});
  SplitMix64 rng(5);
  std::vector<Observation> obs;
  for (int i = 0; i < 40; ++i) {
    const double lr = std::exp(std::log(1e-4) + rng.uniform() * (std::log(1e-1) - std::log(1e-4)));
    const char* names[] = {"fp16", "fp32", "bf16"};
    const double d = std::log10(lr) + 2.5;
    obs.push_back({{{"lr", ParamValue::ofNumber(lr)}, {"precision.compute", ParamValue::ofName(names[rng.below(3)])}},
                   2 + d * d + 0.05 * rng.normal()});
  }
  const ImportanceResult r = parameterImportance(spec, obs);
  ASSERT_TRUE(r.modelFitted);
  const auto &lr = of(r, "lr"), &prec = of(r, "precision.compute");
  ASSERT_TRUE(lr.importance && prec.importance);
  EXPECT_GT(*lr.importance, 0.8);
  EXPECT_LT(*prec.importance, 0.05);
  ASSERT_TRUE(lr.spearman);
  EXPECT_LT(std::abs(*lr.spearman), 0.5);
  EXPECT_FALSE(prec.spearman) << "names have no order";
}

TEST(SweepImportance, ACategoricalDriverDominatesANumericNoiseParameter) {
  const SweepSpec spec =
      specOf({listed("optimizer", {ParamValue::ofName("adam"), ParamValue::ofName("lamb"), ParamValue::ofName("sgd")}),
              ranged("seed", Distribution::IntUniform, 1, 1000)});
  SplitMix64 rng(9);
  std::vector<Observation> obs;
  const std::map<std::string, double> effect{{"adam", 1.0}, {"lamb", 0.4}, {"sgd", 3.0}};
  const char* names[] = {"adam", "lamb", "sgd"};
  for (int i = 0; i < 24; ++i) {
    const std::string o = names[i % 3];
    obs.push_back({{{"optimizer", ParamValue::ofName(o)},
                    {"seed", ParamValue::ofInteger(1 + static_cast<long long>(rng.below(1000)))}},
                   effect.at(o) + 0.05 * rng.normal()});
  }
  const ImportanceResult r = parameterImportance(spec, obs);
  ASSERT_TRUE(r.modelFitted);
  ASSERT_TRUE(of(r, "optimizer").importance && of(r, "seed").importance);
  EXPECT_GT(*of(r, "optimizer").importance, 0.85);
  EXPECT_LT(*of(r, "seed").importance, 0.05);
}

TEST(SweepImportance, TooFewTrialsGiveANoteInsteadOfNumbers) {
  const SweepSpec spec = specOf({ranged("x", Distribution::Uniform, 0, 1), ranged("z", Distribution::Uniform, 0, 1)});
  EXPECT_EQ(minimumObservations(2), 8u);
  EXPECT_EQ(minimumObservations(5), 20u);
  ImportanceResult r = parameterImportance(spec, linearDriver(7, 3));
  EXPECT_FALSE(r.modelFitted);
  EXPECT_FALSE(of(r, "x").importance);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("needs 8 trials"), std::string::npos) << r.notes[0];
  EXPECT_TRUE(of(r, "x").spearman) << "7 trials are enough for a correlation";

  r = parameterImportance(spec, linearDriver(4, 3));
  EXPECT_FALSE(of(r, "x").spearman);
  EXPECT_FALSE(of(r, "x").importance);
  EXPECT_EQ(r.notes.size(), 2u);

  r = parameterImportance(spec, {});
  EXPECT_EQ(r.observations, 0u);
  EXPECT_FALSE(r.notes.empty());
}

TEST(SweepImportance, AConstantMetricAndForeignTrialsAreSaidNotScored) {
  const SweepSpec spec = specOf({ranged("x", Distribution::Uniform, 0, 1), ranged("z", Distribution::Uniform, 0, 1)});
  std::vector<Observation> obs = linearDriver(12, 4);
  for (auto& o : obs) o.metric = 1.5;
  obs.push_back({{{"x", ParamValue::ofNumber(0.5)}}, 2.0});  // lacks z: does not fit the spec
  const ImportanceResult r = parameterImportance(spec, obs);
  EXPECT_EQ(r.observations, 12u);
  EXPECT_EQ(r.ignored, 1u);
  EXPECT_FALSE(r.modelFitted);
  EXPECT_FALSE(of(r, "x").importance);
  EXPECT_FALSE(of(r, "x").spearman);
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_NE(r.notes[1].find("the same for every trial"), std::string::npos);
}

TEST(SweepImportance, IsDeterministic) {
  const SweepSpec spec = specOf({ranged("x", Distribution::Uniform, 0, 1), ranged("z", Distribution::Uniform, 0, 1)});
  const auto obs = linearDriver(20, 8);
  const ImportanceResult a = parameterImportance(spec, obs), b = parameterImportance(spec, obs);
  ASSERT_TRUE(a.modelFitted);
  for (std::size_t i = 0; i < a.parameters.size(); ++i) {
    EXPECT_EQ(*a.parameters[i].importance, *b.parameters[i].importance);
    EXPECT_EQ(*a.parameters[i].spearman, *b.parameters[i].spearman);
  }
}

TEST(SweepImportance, SpearmanRanksWithTies) {
  EXPECT_DOUBLE_EQ(*spearman({1, 2, 3, 4, 5}, {1, 4, 9, 16, 25}), 1.0);  // any increasing function
  EXPECT_DOUBLE_EQ(*spearman({1, 2, 3, 4}, {9, 7, 2, -5}), -1.0);
  // y ranks 1, 2, 3.5, 5, 3.5: rho = 8 / sqrt(10 * 9.5) (scipy.stats.spearmanr agrees)
  EXPECT_NEAR(*spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 0.8207826816681233, 1e-12);
  EXPECT_FALSE(spearman({1, 2}, {3, 4}));
  EXPECT_FALSE(spearman({1, 1, 1}, {3, 4, 5}));
  EXPECT_FALSE(spearman({1, 2, 3}, {3, 4}));
}

}  // namespace
}  // namespace ipu::sweep
