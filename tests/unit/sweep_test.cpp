// The sweep algorithms (interpreter/sweep, docs/sweeps.md "Search methods"):
// names and cell identities, grid order and resume semantics, run cap and
// target, every distribution's draws, determinism, the Gaussian process and
// expected improvement, fantasies and failures, and hyperband.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "interpreter/sweep/bayes.h"
#include "interpreter/sweep/gp.h"
#include "interpreter/sweep/hyperband.h"
#include "interpreter/sweep/propose.h"

namespace ipu::sweep {
namespace {

ParamSpec values(const std::string& path, std::vector<ParamValue> v) {
  ParamSpec p;
  p.path = path;
  p.distribution = Distribution::Values;
  p.values = std::move(v);
  return p;
}
ParamSpec ranged(const std::string& path, Distribution d, double min, double max, double q = 0) {
  ParamSpec p;
  p.path = path;
  p.distribution = d;
  p.min = min;
  p.max = max;
  p.q = q;
  return p;
}
ParamSpec normal(const std::string& path, Distribution d, double mu, double sigma, double q = 0) {
  ParamSpec p;
  p.path = path;
  p.distribution = d;
  p.mu = mu;
  p.sigma = sigma;
  p.q = q;
  return p;
}
SweepSpec specOf(Method m, std::vector<ParamSpec> params, std::uint64_t seed = 7) {
  SweepSpec s;
  s.name = "s";
  s.method = m;
  s.metric.name = "loss";
  s.parameters = std::move(params);
  s.seed = seed;
  return s;
}
double number(const Assignment& a, const std::string& path) {
  for (const auto& [p, v] : a)
    if (p == path) return v.number;
  ADD_FAILURE() << "no parameter " << path;
  return 0;
}
const ParamValue& valueOf(const Assignment& a, const std::string& path) {
  for (const auto& entry : a)
    if (entry.first == path) return entry.second;
  throw std::runtime_error("no parameter " + path);
}
// Four standard errors of a proportion p over n draws.
double tolerance(double p, int n) { return 4 * std::sqrt(p * (1 - p) / n); }

// ------------------------------------------------------------------ space.h

TEST(SweepSpace, NamesRoundTrip) {
  for (Method m : {Method::Grid, Method::Random, Method::Bayes}) EXPECT_EQ(methodFromName(methodName(m)), m);
  for (Goal g : {Goal::Minimize, Goal::Maximize}) EXPECT_EQ(goalFromName(goalName(g)), g);
  for (int i = 0; i <= static_cast<int>(Distribution::QLogNormal); ++i) {
    auto d = static_cast<Distribution>(i);
    EXPECT_EQ(distributionFromName(distributionName(d)), d) << distributionName(d);
  }
  EXPECT_STREQ(distributionName(Distribution::QLogUniform), "q_log_uniform");
  EXPECT_FALSE(methodFromName("hyperopt"));
  EXPECT_FALSE(goalFromName("Minimize"));
  EXPECT_FALSE(distributionFromName("loguniform"));
}

TEST(SweepSpace, CanonicalText) {
  EXPECT_EQ(ParamValue::ofNumber(0.1).canonical(), "0.1");
  EXPECT_EQ(ParamValue::ofNumber(1e-4).canonical(), "0.0001");
  EXPECT_EQ(ParamValue::ofNumber(3e-5).canonical(), "3e-05");
  EXPECT_EQ(ParamValue::ofNumber(4096).canonical(), "4096");
  EXPECT_EQ(ParamValue::ofNumber(6.02214076e23).canonical(), "6.02214076e+23");
  EXPECT_EQ(ParamValue::ofNumber(0.1 + 0.2).canonical(), "0.30000000000000004");  // exact: a different cell from 0.3
  EXPECT_EQ(ParamValue::ofNumber(-0.0).canonical(), "0");
  EXPECT_EQ(ParamValue::ofInteger(-12).canonical(), "-12");
  EXPECT_EQ(ParamValue::ofBoolean(true).canonical(), "true");
  EXPECT_EQ(ParamValue::ofName("fp16").canonical(), "fp16");
  EXPECT_EQ(ParamValue::ofText("a \"b\"\\\n").canonical(), "\"a \\\"b\\\"\\\\\\u000a\"");
  // Reading the text back gives the same double.
  for (double v : {0.1, 1.0 / 3, 6.02214076e23, 1e-300, -2.5e-7, 123456789.0}) EXPECT_EQ(std::stod(ParamValue::ofNumber(v).canonical()), v);
}

TEST(SweepSpace, ShownTextIsForPeople) {
  // What a q_log_uniform draw or a sum lands on, shown as written.
  EXPECT_EQ(ParamValue::ofNumber(0.0010000000000000002).shown(), "0.001");
  EXPECT_EQ(ParamValue::ofNumber(0.029999999999999995).shown(), "0.03");
  EXPECT_EQ(ParamValue::ofNumber(400).canonical(), "4e+02");  // the stored identity is unchanged
  EXPECT_EQ(ParamValue::ofNumber(400).shown(), "400");
  EXPECT_EQ(ParamValue::ofNumber(3e-5).shown(), "3e-05");
  EXPECT_EQ(ParamValue::ofNumber(1.0 / 3).shown(), "0.333333");
  EXPECT_EQ(ParamValue::ofName("fp16").shown(), "fp16");
  EXPECT_EQ(ParamValue::ofInteger(12).shown(), "12");
  Assignment a = {{"lr", ParamValue::ofNumber(0.029999999999999995)}, {"batch", ParamValue::ofInteger(4)}};
  EXPECT_EQ(assignmentShown(a), "batch=4 lr=0.03");
}

TEST(SweepSpace, AssignmentKeyIsOrderFreeAndDistinguishesValues) {
  Assignment a = {{"lr", ParamValue::ofNumber(0.001)}, {"batch", ParamValue::ofInteger(4)}};
  Assignment b = {{"batch", ParamValue::ofInteger(4)}, {"lr", ParamValue::ofNumber(0.001)}};
  EXPECT_EQ(assignmentKey(a), "batch=4 lr=0.001");
  EXPECT_EQ(assignmentKey(a), assignmentKey(b));
  Assignment name = {{"p", ParamValue::ofName("fp16")}}, text = {{"p", ParamValue::ofText("fp16")}};
  EXPECT_NE(assignmentKey(name), assignmentKey(text));
  // A text value cannot imitate two parameters.
  Assignment tricky = {{"a", ParamValue::ofText("1 b=2")}};
  Assignment two = {{"a", ParamValue::ofText("1")}, {"b", ParamValue::ofInteger(2)}};
  EXPECT_NE(assignmentKey(tricky), assignmentKey(two));
}

// --------------------------------------------------------------------- grid

SweepSpec smallGrid() {
  return specOf(Method::Grid, {values("a", {ParamValue::ofName("x"), ParamValue::ofName("y")}),
                               ranged("b", Distribution::IntUniform, 1, 3),
                               ranged("c", Distribution::QUniform, 0, 0.3, 0.1)});
}

TEST(SweepGrid, EnumeratesTheProductLastParameterFastest) {
  SweepSpec spec = smallGrid();
  ASSERT_EQ(gridSize(spec), 24u);
  std::vector<ParamValue> c = gridValues(spec.parameters[2]);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[3].canonical(), "0.3");  // not 0.30000000000000004
  EXPECT_EQ(assignmentKey(gridCell(spec, 0)), "a=x b=1 c=0");
  EXPECT_EQ(assignmentKey(gridCell(spec, 1)), "a=x b=1 c=0.1");
  EXPECT_EQ(assignmentKey(gridCell(spec, 4)), "a=x b=2 c=0");
  EXPECT_EQ(assignmentKey(gridCell(spec, 23)), "a=y b=3 c=0.3");
  std::vector<Trial> history;
  std::set<std::string> seen;
  for (std::uint64_t i = 0; i < 24; ++i) {
    Proposal p = propose(spec, history, i);
    ASSERT_EQ(p.kind, Proposal::Kind::Next);
    EXPECT_EQ(assignmentKey(p.assignment), assignmentKey(gridCell(spec, i)));
    EXPECT_TRUE(seen.insert(assignmentKey(p.assignment)).second);
    history.push_back({p.assignment, TrialState::Finished, 1.0});
  }
  Proposal done = propose(spec, history, 24);
  EXPECT_EQ(done.kind, Proposal::Kind::Exhausted);
  EXPECT_EQ(done.why, Proposal::Why::GridDone);
}

TEST(SweepGrid, ResumeRunsFailedCellsAgainAndFinishedOnesNever) {
  SweepSpec spec = smallGrid();
  std::vector<Trial> history = {{gridCell(spec, 0), TrialState::Finished, 1.0},
                                {gridCell(spec, 1), TrialState::Failed, std::nullopt},
                                {gridCell(spec, 2), TrialState::Running, std::nullopt},
                                {gridCell(spec, 3), TrialState::Stopped, 2.0}};
  EXPECT_EQ(assignmentKey(propose(spec, history, 4).assignment), assignmentKey(gridCell(spec, 1)));
  // Agents that fail every third attempt: every cell still finishes exactly once.
  history.clear();
  std::map<std::string, int> finished;
  int attempts = 0;
  for (std::uint64_t i = 0; i < 100; ++i) {
    Proposal p = propose(spec, history, i);
    if (p.kind == Proposal::Kind::Exhausted) break;
    ASSERT_EQ(p.kind, Proposal::Kind::Next);
    bool fails = ++attempts % 3 == 0;
    history.push_back({p.assignment, fails ? TrialState::Failed : TrialState::Finished, 0.5});
    if (!fails) ++finished[assignmentKey(p.assignment)];
  }
  EXPECT_EQ(finished.size(), 24u);
  for (const auto& [key, count] : finished) EXPECT_EQ(count, 1) << key;
  EXPECT_EQ(attempts, 35);  // 24 successes and 11 failures (attempts 3, 6, ..., 33)
}

TEST(SweepGrid, ProblemsAreReportedNotCrashed) {
  SweepSpec continuous = specOf(Method::Grid, {ranged("lr", Distribution::LogUniform, 1e-5, 1e-1)});
  EXPECT_FALSE(gridSize(continuous));
  Proposal p = propose(continuous, {}, 0);
  EXPECT_EQ(p.kind, Proposal::Kind::Invalid);
  EXPECT_NE(p.problem.find("`lr`"), std::string::npos) << p.problem;
  EXPECT_NE(p.problem.find("finite list"), std::string::npos) << p.problem;
  // The same parameter is fine for random search.
  continuous.method = Method::Random;
  EXPECT_EQ(propose(continuous, {}, 0).kind, Proposal::Kind::Next);

  auto problem = [](std::vector<ParamSpec> params, Method m = Method::Random) {
    return specProblem(specOf(m, std::move(params))).value_or("");
  };
  EXPECT_NE(problem({}).find("no parameters"), std::string::npos);
  EXPECT_NE(problem({values("a", {})}).find("no values"), std::string::npos);
  EXPECT_NE(problem({ranged("a", Distribution::Uniform, 2, 1)}).find("greater"), std::string::npos);
  EXPECT_NE(problem({ranged("a", Distribution::LogUniform, 0, 1)}).find("positive"), std::string::npos);
  EXPECT_NE(problem({ranged("a", Distribution::QUniform, 0, 1, 0)}).find("q must"), std::string::npos);
  EXPECT_NE(problem({ranged("a", Distribution::QUniform, 0.1, 0.2, 1)}).find("no multiple"), std::string::npos);
  EXPECT_NE(problem({ranged("a", Distribution::IntUniform, 0.2, 0.8)}).find("no integer"), std::string::npos);
  EXPECT_NE(problem({normal("a", Distribution::Normal, 0, -1)}).find("sigma"), std::string::npos);
  EXPECT_NE(problem({ranged("a", Distribution::Uniform, 0, INFINITY)}).find("finite"), std::string::npos);
  EXPECT_NE(problem({ranged("a", Distribution::Uniform, 0, 1), ranged("a", Distribution::Uniform, 0, 1)}).find("twice"),
            std::string::npos);
  ParamSpec cat = values("c", {ParamValue::ofName("x"), ParamValue::ofName("y")});
  cat.distribution = Distribution::Categorical;
  cat.probabilities = {1};
  EXPECT_NE(problem({cat}).find("1 probabilities for 2 values"), std::string::npos);
  cat.probabilities = {0, 0};
  EXPECT_NE(problem({cat}).find("sum to zero"), std::string::npos);
  cat.probabilities = {-1, 2};
  EXPECT_NE(problem({cat}).find("negative"), std::string::npos);
}

TEST(SweepPropose, HostileSpecsAreRefusedOrSearchedWithoutCrashing) {
  const double inf = INFINITY, nan = NAN;
  std::vector<ParamSpec> hostile = {
      ranged("a", Distribution::Uniform, nan, 1),          ranged("a", Distribution::LogUniform, -1, 1),
      ranged("a", Distribution::QUniform, 0, 1, nan),     ranged("a", Distribution::QUniform, 0, 1e300, 1e-300),
      ranged("a", Distribution::IntUniform, -1e300, 0),   ranged("a", Distribution::QLogUniform, 1e-300, 1e300, 1e-10),
      normal("a", Distribution::Normal, inf, 1),          normal("a", Distribution::QNormal, 0, 1, -1),
      normal("a", Distribution::LogNormal, 700, 50),      normal("a", Distribution::QLogNormal, 0, 1e300, 1),
      normal("a", Distribution::Normal, 0, 0),            ranged("a", Distribution::Uniform, 5, 5),
  };
  int refused = 0;
  for (const ParamSpec& p : hostile)
    for (Method m : {Method::Grid, Method::Random, Method::Bayes}) {
      SweepSpec spec = specOf(m, {p});
      std::vector<Trial> history;
      for (std::uint64_t i = 0; i < 6; ++i) {
        Proposal next = propose(spec, history, i);
        if (next.kind == Proposal::Kind::Invalid) {
          EXPECT_FALSE(next.problem.empty());
          ++refused;
          break;
        }
        if (next.kind != Proposal::Kind::Next) break;
        history.push_back({next.assignment, TrialState::Finished, static_cast<double>(i % 3)});
      }
    }
  // The first eight are refused by every method; the other four (valid, if
  // extreme) only by grid, which needs a finite list.
  EXPECT_EQ(refused, 8 * 3 + 4);
}

TEST(SweepGrid, SizeSaturates) {
  std::vector<ParamSpec> params;
  for (int i = 0; i < 8; ++i) params.push_back(ranged("p" + std::to_string(i), Distribution::IntUniform, 0, 1e6));
  EXPECT_EQ(gridSize(specOf(Method::Grid, params)), UINT64_MAX);
  // A saturated grid still proposes its first cell at once.
  Proposal p = propose(specOf(Method::Grid, params), {}, 0);
  ASSERT_EQ(p.kind, Proposal::Kind::Next);
  EXPECT_EQ(assignmentKey(p.assignment), "p0=0 p1=0 p2=0 p3=0 p4=0 p5=0 p6=0 p7=0");
  EXPECT_EQ(gridSize(specOf(Method::Grid, {values("a", {ParamValue::ofInteger(1)}), ranged("b", Distribution::IntUniform, 5, 9)})),
            5u);
}

TEST(SweepGrid, QLogUniformEnumeratesMultiples) {
  ParamSpec p = ranged("batch", Distribution::QLogUniform, 3, 20, 4);
  std::vector<ParamValue> v = gridValues(p);
  ASSERT_EQ(v.size(), 5u);  // 4, 8, 12, 16, 20: the bounds are inclusive
  EXPECT_EQ(v[0], ParamValue::ofInteger(4));
  EXPECT_EQ(v[4], ParamValue::ofInteger(20));
  EXPECT_TRUE(gridValues(p, 4).empty());  // over the limit
}

// ------------------------------------------------------- run cap and target

TEST(SweepPropose, RunCapCountsAllButFailedTrials) {
  SweepSpec spec = specOf(Method::Random, {ranged("x", Distribution::Uniform, 0, 1)});
  spec.runCap = 3;
  std::vector<Trial> history = {{propose(spec, {}, 0).assignment, TrialState::Finished, 1.0},
                                {propose(spec, {}, 1).assignment, TrialState::Failed, std::nullopt},
                                {propose(spec, {}, 2).assignment, TrialState::Running, std::nullopt}};
  EXPECT_EQ(propose(spec, history, 3).kind, Proposal::Kind::Next);
  history.push_back({propose(spec, {}, 3).assignment, TrialState::Stopped, 2.0});
  Proposal p = propose(spec, history, 4);
  EXPECT_EQ(p.kind, Proposal::Kind::Exhausted);
  EXPECT_EQ(p.why, Proposal::Why::RunCap);
}

TEST(SweepPropose, TargetReachedEndsTheSweep) {
  SweepSpec spec = specOf(Method::Bayes, {ranged("x", Distribution::Uniform, 0, 1)});
  spec.metric.target = 0.5;
  Assignment a = {{"x", ParamValue::ofNumber(0.2)}};
  EXPECT_EQ(propose(spec, {{a, TrialState::Finished, 0.6}, {a, TrialState::Running, std::nullopt}}, 2).kind,
            Proposal::Kind::Next);
  Proposal p = propose(spec, {{a, TrialState::Finished, 0.5}}, 1);
  EXPECT_EQ(p.kind, Proposal::Kind::Exhausted);
  EXPECT_EQ(p.why, Proposal::Why::TargetReached);
  spec.metric.goal = Goal::Maximize;
  EXPECT_EQ(propose(spec, {{a, TrialState::Finished, 0.4}}, 1).kind, Proposal::Kind::Next);
  EXPECT_EQ(propose(spec, {{a, TrialState::Stopped, 0.7}}, 1).why, Proposal::Why::TargetReached);
  // A failed trial's value does not count.
  EXPECT_EQ(propose(spec, {{a, TrialState::Failed, 0.9}}, 1).kind, Proposal::Kind::Next);
}

// ------------------------------------------------------------ distributions

std::vector<ParamValue> draws(const ParamSpec& p, int n, std::uint64_t seed = 1) {
  std::vector<ParamValue> out;
  for (int i = 0; i < n; ++i) {
    SplitMix64 rng = SplitMix64::forStream(seed, static_cast<std::uint64_t>(i));
    out.push_back(sampleParameter(p, rng));
  }
  return out;
}
double fractionBelow(const std::vector<ParamValue>& v, double x) {
  return static_cast<double>(std::count_if(v.begin(), v.end(), [&](const ParamValue& p) { return p.number < x; })) /
         static_cast<double>(v.size());
}
bool isMultiple(double v, double q) { return std::fabs(v / q - std::round(v / q)) < 1e-9; }

constexpr int kDraws = 20000;

TEST(SweepDistributions, Uniform) {
  auto v = draws(ranged("x", Distribution::Uniform, -2, 6), kDraws);
  for (const auto& x : v) {
    ASSERT_EQ(x.kind, ParamValue::Kind::Number);
    ASSERT_GE(x.number, -2);
    ASSERT_LE(x.number, 6);
  }
  for (double q : {0.1, 0.25, 0.5, 0.9}) EXPECT_NEAR(fractionBelow(v, -2 + 8 * q), q, tolerance(q, kDraws));
}

TEST(SweepDistributions, IntUniformIsInclusive) {
  auto v = draws(ranged("n", Distribution::IntUniform, 1, 6), kDraws);
  std::map<long long, int> counts;
  for (const auto& x : v) {
    ASSERT_EQ(x.kind, ParamValue::Kind::Integer);
    ++counts[static_cast<long long>(x.number)];
  }
  ASSERT_EQ(counts.size(), 6u);
  EXPECT_EQ(counts.begin()->first, 1);
  EXPECT_EQ(counts.rbegin()->first, 6);
  for (const auto& [value, count] : counts) EXPECT_NEAR(count / double(kDraws), 1 / 6.0, tolerance(1 / 6.0, kDraws)) << value;
}

TEST(SweepDistributions, LogUniformIsUniformInTheLogarithm) {
  auto v = draws(ranged("lr", Distribution::LogUniform, 1e-5, 1e-1), kDraws);
  for (const auto& x : v) {
    ASSERT_GE(x.number, 1e-5);
    ASSERT_LE(x.number, 1e-1);
  }
  // The median is the geometric mean; each decade holds a quarter.
  EXPECT_NEAR(fractionBelow(v, 1e-3), 0.5, tolerance(0.5, kDraws));
  EXPECT_NEAR(fractionBelow(v, 1e-4), 0.25, tolerance(0.25, kDraws));
  EXPECT_NEAR(fractionBelow(v, 1e-2), 0.75, tolerance(0.25, kDraws));
}

TEST(SweepDistributions, QFormsAreMultiplesInRange) {
  auto qu = draws(ranged("x", Distribution::QUniform, 0, 1, 0.25), kDraws);
  std::set<double> seen;
  for (const auto& x : qu) {
    ASSERT_TRUE(isMultiple(x.number, 0.25)) << x.number;
    ASSERT_GE(x.number, 0);
    ASSERT_LE(x.number, 1);
    seen.insert(x.number);
  }
  EXPECT_EQ(seen.size(), 5u);
  // Rounding: the inner multiples get a quarter each, the ends an eighth.
  EXPECT_NEAR(fractionBelow(qu, 0.1), 0.125, tolerance(0.125, kDraws));

  auto qlu = draws(ranged("batch", Distribution::QLogUniform, 2, 512, 2), kDraws);
  for (const auto& x : qlu) {
    ASSERT_EQ(x.kind, ParamValue::Kind::Integer);  // integral q
    ASSERT_TRUE(isMultiple(x.number, 2));
    ASSERT_GE(x.number, 2);
    ASSERT_LE(x.number, 512);
  }
  EXPECT_NEAR(fractionBelow(qlu, 32.5), 0.5, tolerance(0.5, kDraws));  // geometric mean 32

  auto qn = draws(normal("x", Distribution::QNormal, 10, 3, 0.5), kDraws);
  for (const auto& x : qn) ASSERT_TRUE(isMultiple(x.number, 0.5));
  EXPECT_NEAR(fractionBelow(qn, 9.9), 0.5, tolerance(0.5, kDraws) + 0.07);  // 10 itself rounds to 10

  auto qln = draws(normal("x", Distribution::QLogNormal, std::log(100.0), 1, 5), kDraws);
  for (const auto& x : qln) {
    ASSERT_TRUE(isMultiple(x.number, 5));
    ASSERT_GE(x.number, 0);
  }
  EXPECT_NEAR(fractionBelow(qln, 97.5), 0.5, tolerance(0.5, kDraws) + 0.03);
}

TEST(SweepDistributions, NormalAndLogNormal) {
  auto v = draws(normal("x", Distribution::Normal, 3, 2), kDraws);
  double sum = 0, sum2 = 0;
  for (const auto& x : v) {
    sum += x.number;
    sum2 += x.number * x.number;
  }
  double mean = sum / kDraws, sd = std::sqrt(sum2 / kDraws - mean * mean);
  EXPECT_NEAR(mean, 3, 4 * 2 / std::sqrt(kDraws));
  EXPECT_NEAR(sd, 2, 0.05 * 2);
  EXPECT_NEAR(fractionBelow(v, 3 - 2), 0.158655, tolerance(0.16, kDraws));  // one sigma below

  auto l = draws(normal("lr", Distribution::LogNormal, std::log(1e-3), 1.5), kDraws);
  for (const auto& x : l) ASSERT_GT(x.number, 0);
  EXPECT_NEAR(fractionBelow(l, 1e-3), 0.5, tolerance(0.5, kDraws));
  EXPECT_NEAR(fractionBelow(l, 1e-3 * std::exp(1.5)), 0.841345, tolerance(0.16, kDraws));
}

TEST(SweepDistributions, CategoricalFollowsItsProbabilities) {
  ParamSpec p = values("precision", {ParamValue::ofName("fp16"), ParamValue::ofName("fp32"), ParamValue::ofName("mixed")});
  p.distribution = Distribution::Categorical;
  p.probabilities = {0.6, 0.1, 0.3};
  std::map<std::string, int> counts;
  for (const auto& x : draws(p, kDraws)) ++counts[x.text];
  EXPECT_NEAR(counts["fp16"] / double(kDraws), 0.6, tolerance(0.6, kDraws));
  EXPECT_NEAR(counts["fp32"] / double(kDraws), 0.1, tolerance(0.1, kDraws));
  EXPECT_NEAR(counts["mixed"] / double(kDraws), 0.3, tolerance(0.3, kDraws));
  // Without probabilities (and for plain values): equally likely.
  p.probabilities = {0, 1, 0};
  for (const auto& x : draws(p, 200)) ASSERT_EQ(x.text, "fp32");
  p.distribution = Distribution::Values;
  counts.clear();
  for (const auto& x : draws(p, kDraws)) ++counts[x.text];
  for (const auto& [name, count] : counts) EXPECT_NEAR(count / double(kDraws), 1 / 3.0, tolerance(1 / 3.0, kDraws)) << name;
}

// --------------------------------------------------------------- determinism

TEST(SweepPropose, SameHistorySameProposal) {
  for (Method m : {Method::Random, Method::Bayes}) {
    SweepSpec spec = specOf(m, {ranged("x", Distribution::Uniform, 0, 1), ranged("lr", Distribution::LogUniform, 1e-5, 1),
                                values("c", {ParamValue::ofName("a"), ParamValue::ofName("b")})});
    std::vector<Trial> history;
    for (std::uint64_t i = 0; i < 8; ++i) {
      Proposal p = propose(spec, history, i);
      ASSERT_EQ(p.kind, Proposal::Kind::Next);
      EXPECT_EQ(assignmentKey(p.assignment), assignmentKey(propose(spec, history, i).assignment));
      history.push_back({p.assignment, TrialState::Finished, number(p.assignment, "x") + std::log(number(p.assignment, "lr"))});
    }
    std::string key = assignmentKey(propose(spec, history, 8).assignment);
    EXPECT_EQ(key, assignmentKey(propose(spec, history, 8).assignment)) << methodName(m);
    EXPECT_NE(key, assignmentKey(propose(spec, history, 9).assignment)) << methodName(m);
    SweepSpec other = spec;
    other.seed = 8;
    EXPECT_NE(key, assignmentKey(propose(other, history, 8).assignment)) << methodName(m);
  }
}

// ----------------------------------------------------------- Gaussian process

TEST(SweepGp, LogMarginalLikelihoodGradientMatchesFiniteDifferences) {
  SplitMix64 rng(3);
  Eigen::MatrixXd X(12, 3);
  Eigen::VectorXd z(12);
  for (int i = 0; i < 12; ++i) {
    for (int d = 0; d < 3; ++d) X(i, d) = rng.uniform();
    z(i) = std::sin(4 * X(i, 0)) + X(i, 1) * X(i, 2) + 0.1 * rng.normal();
  }
  GpHyper h;
  h.lengthScales = Eigen::Vector3d(0.3, 0.7, 1.4);
  h.signalVariance = 1.3;
  h.noiseVariance = 0.02;
  Eigen::VectorXd g;
  double lml = GaussianProcess::logMarginalLikelihood(X, z, h, &g);
  ASSERT_TRUE(std::isfinite(lml));
  ASSERT_EQ(g.size(), 5);
  const double e = 1e-5;
  for (int k = 0; k < 5; ++k) {
    auto shifted = [&](double by) {
      GpHyper s = h;
      if (k < 3) s.lengthScales(k) *= std::exp(by);
      if (k == 3) s.signalVariance *= std::exp(by);
      if (k == 4) s.noiseVariance *= std::exp(by);
      return GaussianProcess::logMarginalLikelihood(X, z, s, nullptr);
    };
    double numeric = (shifted(e) - shifted(-e)) / (2 * e);
    EXPECT_NEAR(g(k), numeric, 1e-5 * (1 + std::fabs(numeric))) << k;
  }
}

TEST(SweepGp, FitRecoversASmoothFunction) {
  auto f = [](double x, double y) { return std::sin(3 * x) + std::cos(2 * y) + 10; };
  SplitMix64 rng(11);
  const int n = 40;
  Eigen::MatrixXd X(n, 2);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    X(i, 0) = rng.uniform();
    X(i, 1) = rng.uniform();
    y(i) = f(X(i, 0), X(i, 1));
  }
  GaussianProcess gp = GaussianProcess::fit(X, y, rng);
  Eigen::MatrixXd T(50, 2);
  for (int i = 0; i < 50; ++i) T.row(i) << 0.05 + 0.9 * rng.uniform(), 0.05 + 0.9 * rng.uniform();
  Eigen::VectorXd mean, variance;
  gp.predict(T, mean, variance);
  double squared = 0, worst = 0;
  for (int i = 0; i < 50; ++i) {
    double err = mean(i) - f(T(i, 0), T(i, 1));
    squared += err * err;
    worst = std::max(worst, std::fabs(err));
  }
  EXPECT_LT(std::sqrt(squared / 50), 0.02);  // f spans about 2
  EXPECT_LT(worst, 0.08);
  // Noise-free data: the fitted noise is small, the predictive sd at the
  // data is too, and it grows away from them.
  EXPECT_LT(gp.hyper().noiseVariance, 1e-3);
  Eigen::VectorXd atData, atDataVariance;
  gp.predict(X.topRows(5), atData, atDataVariance);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(atData(i), y(i), 0.01);
  Eigen::MatrixXd far(1, 2);
  far << 3.0, 3.0;
  Eigen::VectorXd farMean, farVariance;
  gp.predict(far, farMean, farVariance);
  EXPECT_GT(farVariance(0), 100 * atDataVariance.maxCoeff());
}

TEST(SweepGp, NoiseIsEstimated) {
  SplitMix64 rng(5);
  const int n = 60;
  Eigen::MatrixXd X(n, 1);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    X(i, 0) = rng.uniform();
    y(i) = 2 * X(i, 0) + 0.3 * rng.normal();
  }
  GaussianProcess gp = GaussianProcess::fit(X, y, rng);
  double noiseSd = std::sqrt(gp.hyper().noiseVariance) * gp.yScale();
  EXPECT_GT(noiseSd, 0.2);
  EXPECT_LT(noiseSd, 0.42);
}

TEST(SweepGp, ExpectedImprovement) {
  EXPECT_NEAR(expectedImprovement(0, 1, 0), 0.3989422804014327, 1e-12);  // sd * pdf(0)
  EXPECT_DOUBLE_EQ(expectedImprovement(1, 0, 3), 2);
  EXPECT_DOUBLE_EQ(expectedImprovement(4, 0, 3), 0);
  EXPECT_GT(expectedImprovement(0, 2, 0), expectedImprovement(0, 1, 0));  // uncertainty is worth something
  EXPECT_GT(expectedImprovement(-1, 1, 0), expectedImprovement(0, 1, 0));
}

// --------------------------------------------------------------------- bayes

std::vector<Trial> run(SweepSpec spec, const std::function<double(const Assignment&)>& f, int trials,
                       std::vector<Trial> history = {}) {
  for (int i = 0; i < trials; ++i) {
    Proposal p = propose(spec, history, history.size());
    EXPECT_EQ(p.kind, Proposal::Kind::Next);
    if (p.kind != Proposal::Kind::Next) break;
    history.push_back({p.assignment, TrialState::Finished, f(p.assignment)});
  }
  return history;
}
const Trial& bestOf(const std::vector<Trial>& h, Goal goal = Goal::Minimize) {
  return *std::min_element(h.begin(), h.end(), [&](const Trial& a, const Trial& b) {
    return goal == Goal::Minimize ? *a.value < *b.value : *a.value > *b.value;
  });
}

TEST(SweepBayes, FindsTheMinimumOfAQuadratic) {
  SweepSpec spec = specOf(Method::Bayes, {ranged("x", Distribution::Uniform, -2, 3)});
  auto f = [](const Assignment& a) { double x = number(a, "x"); return (x - 0.7) * (x - 0.7); };
  std::vector<Trial> history;
  for (double x : {-2.0, -1.0, 2.0, 3.0}) history.push_back({{{"x", ParamValue::ofNumber(x)}}, TrialState::Finished,
                                                             (x - 0.7) * (x - 0.7)});
  // From four points around it, the next proposal is between the two best...
  Proposal p = propose(spec, history, 4);
  ASSERT_EQ(p.kind, Proposal::Kind::Next);
  EXPECT_GT(number(p.assignment, "x"), -1);
  EXPECT_LT(number(p.assignment, "x"), 2);
  // ...and six trials later the best is within 0.03.
  history = run(spec, f, 6, history);
  EXPECT_NEAR(number(bestOf(history).assignment, "x"), 0.7, 0.03);
  // Maximising the negated function proposes exactly the same points.
  SweepSpec maximise = spec;
  maximise.metric.goal = Goal::Maximize;
  std::vector<Trial> negated = history;
  for (Trial& t : negated) t.value = -*t.value;
  EXPECT_EQ(assignmentKey(propose(spec, history, 10).assignment), assignmentKey(propose(maximise, negated, 10).assignment));
}

TEST(SweepBayes, BeatsRandomOnALogScaledAndCategoricalSpace) {
  // The loss of a training as a function of its learning rate (best at 3e-4,
  // on a log scale) and its optimizer (one is clearly better).
  SweepSpec spec = specOf(Method::Bayes, {ranged("lr", Distribution::LogUniform, 1e-6, 1e-1),
                                          values("optimizer", {ParamValue::ofName("sgd"), ParamValue::ofName("adam"),
                                                               ParamValue::ofName("lamb")})});
  auto f = [](const Assignment& a) {
    double l = std::log10(number(a, "lr")) - std::log10(3e-4);
    return l * l + (valueOf(a, "optimizer").text == "lamb" ? 0.0 : 1.0);
  };
  int bayesBetter = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    spec.seed = seed;
    spec.method = Method::Bayes;
    std::vector<Trial> b = run(spec, f, 15);
    spec.method = Method::Random;
    std::vector<Trial> r = run(spec, f, 15);
    const Trial& best = bestOf(b);
    EXPECT_EQ(valueOf(best.assignment, "optimizer").text, "lamb") << seed;
    EXPECT_NEAR(std::log10(number(best.assignment, "lr")), std::log10(3e-4), 0.15) << seed;
    if (*best.value < *bestOf(r).value) ++bayesBetter;
  }
  EXPECT_GE(bayesBetter, 4);
}

TEST(SweepBayes, IntegersAndQuantizedValuesAreRounded) {
  SweepSpec spec = specOf(Method::Bayes, {ranged("layers", Distribution::IntUniform, 1, 24),
                                          ranged("batch", Distribution::QLogUniform, 8, 1024, 8)});
  auto f = [](const Assignment& a) { return std::fabs(number(a, "layers") - 12) + std::fabs(std::log2(number(a, "batch")) - 7); };
  for (const Trial& t : run(spec, f, 12)) {
    EXPECT_EQ(valueOf(t.assignment, "layers").kind, ParamValue::Kind::Integer);
    EXPECT_EQ(valueOf(t.assignment, "batch").kind, ParamValue::Kind::Integer);
    EXPECT_TRUE(isMultiple(number(t.assignment, "batch"), 8));
  }
}

TEST(SweepBayes, RunningTrialsAreFantasisedAndFailuresAvoided) {
  SweepSpec spec = specOf(Method::Bayes, {ranged("x", Distribution::Uniform, -2, 3)});
  std::vector<Trial> history;
  for (double x : {-2.0, -1.0, 2.0, 3.0}) history.push_back({{{"x", ParamValue::ofNumber(x)}}, TrialState::Finished,
                                                             (x - 0.7) * (x - 0.7)});
  Assignment first = propose(spec, history, 4).assignment;
  // The same point in flight: the next agent goes elsewhere.
  std::vector<Trial> inFlight = history;
  inFlight.push_back({first, TrialState::Running, std::nullopt});
  Assignment second = propose(spec, inFlight, 4).assignment;
  EXPECT_GT(std::fabs(number(second, "x") - number(first, "x")), 0.05);
  // Failed there instead: imputed as the worst value, so the search moves away too.
  std::vector<Trial> failed = history;
  failed.push_back({first, TrialState::Failed, std::nullopt});
  Assignment third = propose(spec, failed, 4).assignment;
  EXPECT_GT(std::fabs(number(third, "x") - number(first, "x")), 0.05);
}

TEST(SweepBayes, FirstTrialsAreRandomAndForeignTrialsIgnored) {
  SweepSpec spec = specOf(Method::Bayes, {ranged("x", Distribution::Uniform, 0, 1), ranged("y", Distribution::Uniform, 0, 1)});
  SweepSpec random = spec;
  random.method = Method::Random;
  // max(2, parameters + 1) = 3 random trials.
  std::vector<Trial> history;
  for (std::uint64_t i = 0; i < 3; ++i) {
    Proposal p = propose(spec, history, i);
    EXPECT_EQ(assignmentKey(p.assignment), assignmentKey(propose(random, history, i).assignment));
    history.push_back({p.assignment, TrialState::Finished, 1.0 + static_cast<double>(i)});
  }
  EXPECT_NE(assignmentKey(propose(spec, history, 3).assignment), assignmentKey(propose(random, history, 3).assignment));
  // A trial of another shape (a parameter missing, a value of the wrong kind)
  // is ignored, not a crash.
  history.push_back({{{"x", ParamValue::ofNumber(0.5)}}, TrialState::Finished, 0.0});
  history.push_back({{{"x", ParamValue::ofName("big")}, {"y", ParamValue::ofNumber(0.1)}}, TrialState::Finished, 0.0});
  history.push_back({{{"x", ParamValue::ofNumber(0.2)}, {"y", ParamValue::ofNumber(0.1)}}, TrialState::Finished, NAN});
  EXPECT_EQ(propose(spec, history, 6).kind, Proposal::Kind::Next);
}

TEST(SweepBayes, LongHistoriesStillFitAndPropose) {
  // 150 trials: the hyper-parameters are fitted to 100 of them, the model
  // conditioned on all; the proposal is near the optimum of a 4-D bowl.
  std::vector<ParamSpec> params;
  for (int d = 0; d < 4; ++d) params.push_back(ranged("x" + std::to_string(d), Distribution::Uniform, 0, 1));
  SweepSpec spec = specOf(Method::Bayes, params);
  SplitMix64 rng(9);
  std::vector<Trial> history;
  for (int i = 0; i < 150; ++i) {
    Assignment a;
    double f = 0;
    for (int d = 0; d < 4; ++d) {
      double x = rng.uniform();
      a.emplace_back("x" + std::to_string(d), ParamValue::ofNumber(x));
      f += (x - 0.3) * (x - 0.3);
    }
    history.push_back({a, TrialState::Finished, f});
  }
  Proposal p = propose(spec, history, 150);
  ASSERT_EQ(p.kind, Proposal::Kind::Next);
  for (int d = 0; d < 4; ++d) EXPECT_NEAR(number(p.assignment, "x" + std::to_string(d)), 0.3, 0.05) << d;
}

// ----------------------------------------------------------------- hyperband

EarlyTerminate hyperband(long long minIter, int eta, long long maxIter = 0) {
  EarlyTerminate e;
  e.enabled = true;
  e.minIter = minIter;
  e.eta = eta;
  e.maxIter = maxIter;
  return e;
}

TEST(SweepHyperband, Brackets) {
  EXPECT_EQ(hyperbandBrackets(hyperband(1, 3), 100), (std::vector<long long>{1, 3, 9, 27, 81}));
  EXPECT_EQ(hyperbandBrackets(hyperband(1, 3, 30), 100), (std::vector<long long>{1, 3, 9, 27}));
  EXPECT_EQ(hyperbandBrackets(hyperband(100, 2), 1000), (std::vector<long long>{100, 200, 400, 800}));
  EXPECT_EQ(hyperbandBrackets(hyperband(1, 3), 0), (std::vector<long long>{}));
  EXPECT_EQ(hyperbandBrackets(hyperband(1LL << 60, 4), INT64_MAX).size(), 2u);  // 2^60, 2^62, and no overflow
  EarlyTerminate off = hyperband(1, 3);
  off.enabled = false;
  EXPECT_TRUE(hyperbandBrackets(off, 100).empty());
}

TEST(SweepHyperband, StopsAllButTheTopThird) {
  // Nine trials with constant losses 1..9, all reported at step 3.
  std::vector<Curve> curves;
  for (int i = 0; i < 9; ++i) curves.push_back({{1, 10.0 + i}, {3, 1.0 + i}});
  for (std::size_t i = 0; i < 9; ++i) {
    StopDecision d = hyperbandDecision(hyperband(1, 3), Goal::Minimize, curves, i, 3);
    EXPECT_EQ(d.bracket, 3);
    EXPECT_EQ(d.reached, 9u);
    EXPECT_EQ(d.kept, 3u);
    EXPECT_EQ(d.rank, i);
    EXPECT_EQ(d.stop, i >= 3) << i;
    if (d.stop) {
      EXPECT_NE(d.reason.find("at step 3"), std::string::npos);
    }
  }
  // Maximising: the other end.
  EXPECT_TRUE(hyperbandDecision(hyperband(1, 3), Goal::Maximize, curves, 0, 3).stop);
  EXPECT_FALSE(hyperbandDecision(hyperband(1, 3), Goal::Maximize, curves, 8, 3).stop);
  // Before the first bracket, or disabled: never.
  EXPECT_FALSE(hyperbandDecision(hyperband(5, 3), Goal::Minimize, curves, 8, 3).stop);
  EXPECT_EQ(hyperbandDecision(hyperband(5, 3), Goal::Minimize, curves, 8, 3).bracket, 0);
  EarlyTerminate off = hyperband(1, 3);
  off.enabled = false;
  EXPECT_FALSE(hyperbandDecision(off, Goal::Minimize, curves, 8, 3).stop);
  EXPECT_FALSE(hyperbandDecision(hyperband(1, 3), Goal::Minimize, curves, 99, 3).stop);
  // The first to reach a bracket continues; a diverged loss is the worst.
  EXPECT_FALSE(hyperbandDecision(hyperband(1, 3), Goal::Minimize, {{{1, 50.0}}}, 0, 1).stop);
  std::vector<Curve> diverged = {{{1, 5.0}}, {{1, NAN}}, {{1, 7.0}}};
  EXPECT_TRUE(hyperbandDecision(hyperband(1, 3), Goal::Minimize, diverged, 1, 1).stop);
  EXPECT_FALSE(hyperbandDecision(hyperband(1, 3), Goal::Minimize, diverged, 0, 1).stop);
}

TEST(SweepHyperband, ValueAtABracketIsTheFirstReportAtOrAfterIt) {
  // Reports every 4 steps: bracket 3 is judged on the report at step 4.
  std::vector<Curve> curves = {{{4, 1.0}, {8, 0.5}}, {{4, 2.0}, {8, 0.1}}, {{4, 3.0}}};
  StopDecision d = hyperbandDecision(hyperband(1, 3), Goal::Minimize, curves, 1, 8);
  EXPECT_EQ(d.bracket, 3);  // 9 is not reached at step 8
  EXPECT_EQ(d.rank, 1u);    // 1.0 < 2.0 at the report of step 4
  EXPECT_TRUE(d.stop);      // ceil(3 / 3) = 1 kept
}

TEST(SweepHyperband, StopsPoorTrialsEarlyAndKeepsTheBest) {
  // Nine trials run one after another, each for 81 steps, loss a + 1/sqrt(s):
  // the final ranking is the ranking at every step, the best (a = 0.05) is
  // the fifth to run.
  const std::vector<double> a = {0.5, 0.3, 0.8, 0.4, 0.05, 0.9, 0.2, 0.7, 0.6};
  std::vector<Curve> curves(a.size());
  long long steps = 0;
  std::vector<bool> completed(a.size(), false);
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (long long s = 1; s <= 81; ++s) {
      curves[i].push_back({s, a[i] + 1 / std::sqrt(static_cast<double>(s))});
      ++steps;
      if (hyperbandDecision(hyperband(1, 3, 81), Goal::Minimize, curves, i, s).stop) break;
      if (s == 81) completed[i] = true;
    }
  }
  EXPECT_TRUE(completed[4]);
  EXPECT_TRUE(completed[0]);  // the first trial has no one to lose to
  EXPECT_FALSE(completed[2]);
  EXPECT_FALSE(completed[5]);
  EXPECT_LT(steps, 9 * 81 / 2);
}

}  // namespace
}  // namespace ipu::sweep
