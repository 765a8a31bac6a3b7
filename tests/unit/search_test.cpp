// The mapping search (interpreter/search): its pruned search returns what a
// brute force over the same space returns, its pipeline split is the optimal
// contiguous split, a candidate it reports is what the planner and the cost
// model say of the same mapping written as a script, and it explains when
// nothing fits. The published configurations are checked in
// PublishedRowsAreMatchedOrBeaten.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

#include "interpreter/search/result_cache.h"
#include "interpreter/search/script_edit.h"
#include "interpreter/search/search.h"
#include "interpreter/session/session.h"
#include "tests/unit/test_support.h"

namespace ipu {
namespace {

struct Searched {
  std::unique_ptr<session::Session> session;
  const check::CheckedProgram* program = nullptr;
  base::FileId file = base::kNoFile;
};

Searched load(const std::string& text, const std::string& name = "search_test.ipu") {
  Searched s;
  s.session = std::make_unique<session::Session>();
  s.file = s.session->addSource(test::sourceDir() + "/tests/" + name, text);
  s.program = s.session->check(s.file);
  return s;
}

Searched loadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  Searched s;
  s.session = std::make_unique<session::Session>();
  s.file = s.session->addSource(path, ss.str());
  s.program = s.session->check(s.file);
  return s;
}

search::PhaseResult run(Searched& s, search::Options o, std::size_t phase = 0) {
  const check::PhaseSpec& ph = s.program->runs.at(0).phases.at(phase);
  return search::searchPhase(ph, s.session->checker()->evaluator(), s.session->sources(), o);
}

std::string describe(const search::Candidate& c) {
  std::ostringstream os;
  os << "t" << c.shard << " p" << c.pipeline << " r" << c.replicas << " b" << c.microBatch << " rc"
     << ir::name(c.recompute) << " os" << c.optimizerStateStreaming << " ws" << c.weightsStreaming << " k" << c.phases
     << " rtsO" << c.rtsOptimizerState << " rtsW" << c.rtsWeights << " split " << search::name(c.split) << " step "
     << c.stepTime;
  return os.str();
}

// Same score and the same mapping, rank by rank.
void expectSameRanking(const search::PhaseResult& pruned, const search::PhaseResult& brute) {
  ASSERT_EQ(pruned.top.size(), brute.top.size());
  for (std::size_t i = 0; i < brute.top.size(); ++i) {
    EXPECT_EQ(describe(pruned.top[i]), describe(brute.top[i])) << "rank " << i + 1;
    EXPECT_EQ(pruned.top[i].stages, brute.top[i].stages) << "rank " << i + 1;
  }
  // The winner re-ranked at each end of an assumption's range: the pruned
  // search's answer is the brute force's (docs/search.md says why it is exact).
  ASSERT_EQ(pruned.assumptions.size(), brute.assumptions.size());
  for (std::size_t i = 0; i < brute.assumptions.size(); ++i) {
    const auto &p = pruned.assumptions[i], &b = brute.assumptions[i];
    ASSERT_EQ(p.bestAtLow.has_value(), b.bestAtLow.has_value());
    ASSERT_EQ(p.bestAtHigh.has_value(), b.bestAtHigh.has_value());
    if (b.bestAtLow) {
      EXPECT_EQ(describe(*p.bestAtLow), describe(*b.bestAtLow));
    }
    if (b.bestAtHigh) {
      EXPECT_EQ(describe(*p.bestAtHigh), describe(*b.bestAtHigh));
    }
    EXPECT_EQ(p.holdsAtLow, b.holdsAtLow);
    EXPECT_EQ(p.holdsAtHigh, b.holdsAtHigh);
  }
  ASSERT_EQ(pruned.pareto.size(), brute.pareto.size());
  for (std::size_t i = 0; i < brute.pareto.size(); ++i) {
    EXPECT_DOUBLE_EQ(pruned.pareto[i].stepTime, brute.pareto[i].stepTime) << "Pareto row " << i;
    EXPECT_EQ(pruned.paretoLimits[i], brute.paretoLimits[i]);
  }
}

const char* kTinyBert = R"(
import "std/pods"
import "std/precision"
import "std/models/bert"
chip small_chip = GC200 with { tiles: 16, memory: 48 MB, code_base: 1 MB }
machine small_machine = M2000 with { chip: small_chip, ipus: 4, streaming_memory: 1 GB }
pod small_pod {
  machine: small_machine
  machines: 2
}
model tiny = bert(layers: 4, hidden: 256, heads: 4, ffn: 1024, vocab: 8000, positions: 128)
mapping two for tiny on small_pod {
  pipeline {
    ipu 0: embedding, encoder[0..2], mlm_head, nsp_head
    ipu 1: encoder[2..4]
  }
  replicas: 4
}
training t {
  mapping: two
  precision: fp16_mixed
  optimizer: lamb(weight_decay: 0.01)
  phase p {
    seq_len: 128
    masked_tokens: 20
    micro_batch: 4
    global_batch: 64
    steps: 1000
    lr: 0.001
  }
}
)";

const char* kSmallGpt = R"(
import "std/pods"
import "std/precision"
import "std/models/gpt"
chip small_chip = GC200 with { tiles: 64, memory: 96 MB, code_base: 2 MB }
machine small_machine = M2000 with { chip: small_chip, ipus: 4, streaming_memory: 4 GB }
pod small_pod {
  machine: small_machine
  machines: 2
}
model g = gpt(layers: 6, hidden: 512, heads: 8, vocab: 16000, positions: 256)
mapping one for g on small_pod {
  replicas: 8
}
training t {
  mapping: one
  precision: fp16_mixed
  optimizer: adamw(weight_decay: 0.1)
  phase p {
    seq_len: 256
    micro_batch: 1
    global_batch: 48
    steps: 500
    lr: 0.0003
  }
}
)";

const char* kSmallVit = R"(
import "std/pods"
import "std/precision"
import "std/models/vit"
model v = vit(layers: 4, hidden: 192, heads: 3, image: 64, patch: 16, classes: 100)
mapping one for v on POD4 {
  replicas: 4
}
training t {
  mapping: one
  precision: fp16_mixed
  optimizer: sgd(momentum: 0.9)
  phase p {
    image_size: 64
    micro_batch: 8
    global_batch: 96
    steps: 100
    lr: 0.1
  }
}
)";

void bruteForceMatches(const char* script, search::Objective objective) {
  Searched s = load(script);
  ASSERT_NE(s.program, nullptr) << test::runText(script).rendered();
  search::Options o;
  o.objective = objective;
  o.top = 4;
  search::PhaseResult pruned = run(s, o);
  o.prune = false;
  search::PhaseResult brute = run(s, o);
  ASSERT_TRUE(pruned.error.empty()) << pruned.error;
  ASSERT_FALSE(brute.top.empty());
  // The brute force evaluated every candidate; the search skipped some.
  EXPECT_EQ(brute.counts.pruned + brute.counts.prunedMemory, 0);
  EXPECT_EQ(pruned.counts.space, brute.counts.space);
  EXPECT_LT(pruned.counts.evaluated, brute.counts.evaluated);
  expectSameRanking(pruned, brute);
}

TEST(Search, BruteForceMatchesOnTinyBert) { bruteForceMatches(kTinyBert, search::Objective::Throughput); }
TEST(Search, BruteForceMatchesRankedByTheEstimate) {
  Searched s = load(kSmallGpt);
  ASSERT_NE(s.program, nullptr);
  search::Options o;
  o.rank = search::Rank::Expected;
  o.top = 4;
  search::PhaseResult pruned = run(s, o);
  o.prune = false;
  search::PhaseResult brute = run(s, o);
  ASSERT_FALSE(brute.top.empty());
  // The assumption check is exact only under the conservative ranking; the ranking itself is exact under both.
  brute.assumptions = pruned.assumptions;
  expectSameRanking(pruned, brute);
}

// The conservative ranking orders by the likely range's lower end; the
// expected one by the estimate. Every row says which regimes put it outside
// the calibration, and a phased row is one of them (no calibration row ran
// phased). Recomputed here from each row's own figures.
TEST(Search, ConservativeRankingUsesTheLikelyRangesLowerEnd) {
  Searched s = load(kSmallGpt);
  ASSERT_NE(s.program, nullptr);
  search::Options o;
  o.top = 50;
  o.prune = false;
  for (search::Rank rank : {search::Rank::Conservative, search::Rank::Expected}) {
    o.rank = rank;
    search::PhaseResult r = run(s, o);
    ASSERT_GE(r.top.size(), 2u);
    bool sawPhased = false;
    for (std::size_t i = 0; i < r.top.size(); ++i) {
      const search::Candidate& c = r.top[i];
      ASSERT_GT(c.throughputLow, 0);
      const double expected = rank == search::Rank::Conservative ? c.stepTime * c.samplesPerSecond / c.throughputLow : c.stepTime;
      EXPECT_NEAR(c.rankedStep, expected, 1e-12 * expected) << describe(c);
      EXPECT_GE(c.rankedStep, c.stepTime);
      if (i > 0) {
        EXPECT_LE(r.top[i - 1].score, c.score);
      }
      if (c.phases > 1 || c.weightsStreaming) {
        sawPhased = true;
        EXPECT_TRUE(std::any_of(c.regimes.begin(), c.regimes.end(),
                                [](const cost::RegimeFlag& f) { return f.regime == cost::Regime::Phased; }))
            << describe(c);
      }
    }
    EXPECT_TRUE(sawPhased);
  }
}

// The winner against every kept mapping with the Streaming Memory bandwidth
// at each end of its range: the check's best is the fastest by the ranking
// at that end, and "holds" says whether that is the winner.
TEST(Search, AssumptionCheckFindsTheBestAtEachEnd) {
  Searched s = load(kSmallGpt);
  ASSERT_NE(s.program, nullptr);
  search::Options o;
  o.top = 100000;   // every fitting mapping (brute force): the check is recomputed from them
  o.prune = false;
  search::PhaseResult r = run(s, o);
  ASSERT_EQ(r.assumptions.size(), 1u);
  const search::AssumptionCheck& check = r.assumptions[0];
  EXPECT_EQ(check.range.assumption, cost::Assumption::StreamingBandwidth);
  bool moves = false;
  for (int high = 0; high < 2; ++high) {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& c : r.top) {
      best = std::min(best, c.rankedStepAt(check.range.assumption, high == 1, r.rank));
      moves = moves || !c.sensitivities.empty();
    }
    const auto& found = high ? check.bestAtHigh : check.bestAtLow;
    ASSERT_TRUE(found.has_value());
    EXPECT_DOUBLE_EQ(found->rankedStepAt(check.range.assumption, high == 1, r.rank), best);
    const bool holds = high ? check.holdsAtHigh : check.holdsAtLow;
    EXPECT_EQ(holds, describe(*found) == describe(r.top.front()));
  }
  EXPECT_TRUE(moves);  // some mapping streams, so the check is not vacuous
}
TEST(Search, BruteForceMatchesOnSmallGpt) { bruteForceMatches(kSmallGpt, search::Objective::Throughput); }
TEST(Search, BruteForceMatchesOnSmallVit) { bruteForceMatches(kSmallVit, search::Objective::Throughput); }
TEST(Search, BruteForceMatchesPerIpu) { bruteForceMatches(kSmallGpt, search::Objective::ThroughputPerIpu); }
TEST(Search, BruteForceMatchesWithHeadroom) {
  Searched s = load(kTinyBert);
  ASSERT_NE(s.program, nullptr);
  search::Options o;
  o.headroom = 0.3;
  o.top = 3;
  search::PhaseResult pruned = run(s, o);
  o.prune = false;
  expectSameRanking(pruned, run(s, o));
  for (const auto& c : pruned.top) EXPECT_LE(c.peakMemoryBytes, 0.7 * c.capacityBytes);
}

// The split equals the best of every contiguous split, by enumeration.
TEST(Search, OptimalCutsMatchEnumeration) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 10);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 9);
    const int parts = 1 + static_cast<int>(rng() % static_cast<unsigned>(n));
    std::vector<double> w(static_cast<std::size_t>(n));
    for (auto& x : w) x = u(rng);
    const double tail = trial % 2 ? u(rng) : 0;
    // Every choice of parts-1 cut points among n-1 gaps.
    double best = 1e300;
    std::vector<int> pick(static_cast<std::size_t>(n - 1), 0);
    std::fill(pick.begin(), pick.begin() + (parts - 1), 1);
    std::sort(pick.begin(), pick.end());
    do {
      double worst = 0, run = 0;
      int part = 0;
      for (int i = 0; i < n; ++i) {
        run += w[static_cast<std::size_t>(i)];
        if (i == n - 1 || pick[static_cast<std::size_t>(i)]) {
          worst = std::max(worst, run + (part == 0 ? tail : 0));
          run = 0;
          ++part;
        }
      }
      best = std::min(best, worst);
    } while (std::next_permutation(pick.begin(), pick.end()));
    std::vector<int> cuts = search::optimalCuts(w, tail, parts);
    ASSERT_EQ(static_cast<int>(cuts.size()), parts + 1);
    double worst = 0;
    for (int k = 0; k < parts; ++k) {
      ASSERT_LT(cuts[static_cast<std::size_t>(k)], cuts[static_cast<std::size_t>(k) + 1]);
      double sum = k == 0 ? tail : 0;
      for (int i = cuts[static_cast<std::size_t>(k)]; i < cuts[static_cast<std::size_t>(k) + 1]; ++i) sum += w[static_cast<std::size_t>(i)];
      worst = std::max(worst, sum);
    }
    EXPECT_NEAR(worst, best, 1e-9 * best) << "n " << n << " parts " << parts;
  }
  EXPECT_TRUE(search::optimalCuts({1, 2}, 0, 3).empty());
}

// The best mappings, put into their script as `--write` does (a new
// mapping, the phase's micro batch and accumulation set), plan and estimate
// to the figures the search reported: the search's in-process variants are
// the mappings a user would write.
TEST(Search, WrittenMappingPlansToTheSameFigures) {
  for (const char* script : {kTinyBert, kSmallGpt}) {
    Searched s = load(script);
    ASSERT_NE(s.program, nullptr);
    search::Options o;
    o.top = 3;
    search::PhaseResult r = run(s, o);
    ASSERT_FALSE(r.top.empty());
    const check::PhaseSpec& ph = s.program->runs[0].phases[0];
    for (const auto& best : r.top) {
      search::ScriptEdit edit = search::putFoundMappings(s.session->sources(), s.file, *s.program, {{"t", &ph, best}});
      ASSERT_TRUE(edit.ok) << edit.problem;
      test::Outcome out = test::runText(edit.text, "search_written.ipu");
      ASSERT_NE(out.plan, nullptr) << out.rendered() << "\n" << edit.text;
      ASSERT_TRUE(out.errorCodes().empty()) << out.rendered() << "\n" << edit.text;
      const ir::PhasePlan& plan = out.plan->runs.at(0).phases.at(0);
      cost::PhaseEstimate e = cost::estimatePhase(plan);
      EXPECT_NEAR(e.stepTime, best.stepTime, 1e-9 * best.stepTime) << edit.text;
      EXPECT_EQ(plan.ipusUsed, best.ipusUsed);
      EXPECT_EQ(plan.batch.microBatch, best.microBatch);
      EXPECT_EQ(plan.batch.gradientAccumulation, best.gradientAccumulation);
      EXPECT_EQ(plan.batch.globalBatch, ph.batch.globalBatch);
      EXPECT_TRUE(plan.fits);
    }
  }
}

// A mapping declared with `search { ... }` plans as the search's best for
// the same constraints: the language feature and `ipu search` agree.
TEST(Search, DeclaredSearchPlansAsTheBest) {
  std::string declared = kTinyBert;
  const std::string body = R"(  pipeline {
    ipu 0: embedding, encoder[0..2], mlm_head, nsp_head
    ipu 1: encoder[2..4]
  }
  replicas: 4
)";
  ASSERT_NE(declared.find(body), std::string::npos);
  declared.replace(declared.find(body), body.size(), "  search {\n    max_ipus: 4\n    headroom: 10%\n  }\n");
  test::Outcome out = test::runText(declared, "search_declared.ipu");
  ASSERT_NE(out.plan, nullptr) << out.rendered();
  ASSERT_TRUE(out.errorCodes().empty()) << out.rendered();
  ASSERT_EQ(out.codes(), std::vector<std::string>{"IPU2008"}) << out.rendered();
  const ir::PhasePlan& plan = out.plan->runs.at(0).phases.at(0);
  cost::PhaseEstimate e = cost::estimatePhase(plan);

  Searched s = load(kTinyBert);
  search::Options o;
  o.maxIpus = 4;
  o.headroom = 0.1;
  o.top = 1;
  search::PhaseResult r = run(s, o);
  ASSERT_FALSE(r.top.empty());
  const auto& best = r.top.front();
  EXPECT_NEAR(e.stepTime, best.stepTime, 1e-9 * best.stepTime);
  EXPECT_EQ(plan.ipusUsed, best.ipusUsed);
  EXPECT_EQ(plan.mapping.replicas, best.replicas);
  EXPECT_EQ(plan.batch.microBatch, best.microBatch);
  EXPECT_EQ(plan.batch.globalBatch, 64);
  EXPECT_TRUE(plan.fits);
}

TEST(Search, SameScriptSameRanking) {
  Searched a = load(kSmallGpt), b = load(kSmallGpt);
  search::Options o;
  o.top = 5;
  search::PhaseResult x = run(a, o), y = run(b, o);
  ASSERT_EQ(x.top.size(), y.top.size());
  for (std::size_t i = 0; i < x.top.size(); ++i) EXPECT_EQ(describe(x.top[i]), describe(y.top[i]));
  EXPECT_EQ(x.counts.evaluated, y.counts.evaluated);
}

// The workers search fixed waves of groups: one thread or several give the
// same ranking, Pareto table, assumption checks and counts, bit for bit.
TEST(Search, AnswerAndCountsDoNotDependOnTheThreads) {
  for (const char* script : {kSmallGpt, kTinyBert, kSmallVit}) {
    Searched s = load(script);
    ASSERT_NE(s.program, nullptr);
    search::Options o;
    o.threads = 1;
    const search::PhaseResult one = run(s, o);
    ASSERT_FALSE(one.top.empty());
    for (int threads : {2, 5}) {
      o.threads = threads;
      const search::PhaseResult many = run(s, o);
      expectSameRanking(many, one);
      EXPECT_EQ(many.counts.evaluated, one.counts.evaluated) << threads << " threads";
      EXPECT_EQ(many.counts.pruned, one.counts.pruned) << threads << " threads";
      EXPECT_EQ(many.counts.prunedMemory, one.counts.prunedMemory) << threads << " threads";
      EXPECT_EQ(many.counts.rejectedMemory, one.counts.rejectedMemory) << threads << " threads";
      for (std::size_t i = 0; i < one.top.size(); ++i) EXPECT_EQ(many.top[i].rankedStep, one.top[i].rankedStep);
    }
  }
}

// A deadline that has passed, or the interrupt flag, stops the search before
// its first wave: what it returns says so, counts what it did not search,
// and holds only what it evaluated (the script's own mapping).
TEST(Search, StopsAtTheDeadlineOrWhenInterrupted) {
  Searched s = load(kSmallGpt);
  search::Options o;
  const search::PhaseResult full = run(s, o);
  EXPECT_EQ(full.stopped, search::StopReason::None);
  EXPECT_EQ(full.counts.notSearched, 0);
  o.deadline = std::chrono::steady_clock::now();
  const search::PhaseResult late = run(s, o);
  EXPECT_EQ(late.stopped, search::StopReason::TimeLimit);
  EXPECT_EQ(late.counts.notSearched, full.counts.space);
  EXPECT_EQ(late.counts.evaluated, 1);
  ASSERT_LE(late.top.size(), 1u);
  if (!late.top.empty()) {
    EXPECT_EQ(late.top.front().split, search::Split::Declared);
  }
  o.deadline.reset();
  std::atomic<bool> interrupt{true};
  o.interrupt = &interrupt;
  const search::PhaseResult stopped = run(s, o);
  EXPECT_EQ(stopped.stopped, search::StopReason::Interrupted);
  EXPECT_GT(stopped.counts.notSearched, 0);
  // A deadline far away changes nothing.
  interrupt = false;
  o.deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
  const search::PhaseResult budget = run(s, o);
  EXPECT_EQ(budget.stopped, search::StopReason::None);
  expectSameRanking(budget, full);
}

TEST(Search, FixedChoicesAndMaxIpusAreRespected) {
  Searched s = load(kSmallGpt);
  search::Options o;
  o.top = 10;
  o.maxIpus = 4;
  ASSERT_FALSE(search::applyFix(o.fixed, "recompute=every_layer").has_value());
  ASSERT_FALSE(search::applyFix(o.fixed, "replicas=2").has_value());
  search::PhaseResult r = run(s, o);
  ASSERT_FALSE(r.top.empty());
  for (const auto& c : r.top) {
    EXPECT_LE(c.ipusUsed, 4);
    EXPECT_EQ(c.replicas, 2);
    EXPECT_EQ(c.recompute, ir::Recompute::EveryLayer);
  }
  search::Fixed f;
  EXPECT_TRUE(search::applyFix(f, "replicas=zero").has_value());
  EXPECT_TRUE(search::applyFix(f, "colour=blue").has_value());
  EXPECT_TRUE(search::applyFix(f, "recompute").has_value());
}

TEST(Search, ThroughputPerIpuPrefersFewerIpus) {
  Searched s = load(kSmallGpt);
  search::Options o;
  search::PhaseResult fast = run(s, o);
  o.objective = search::Objective::ThroughputPerIpu;
  search::PhaseResult cheap = run(s, o);
  ASSERT_FALSE(fast.top.empty());
  ASSERT_FALSE(cheap.top.empty());
  const auto& f = fast.top.front();
  const auto& c = cheap.top.front();
  EXPECT_GE(c.samplesPerSecond / c.ipusUsed, f.samplesPerSecond / f.ipusUsed);
  EXPECT_LE(f.stepTime, c.stepTime);
}

TEST(Search, NothingFitsSaysWhy) {
  std::string script = kSmallGpt;
  script.replace(script.find("layers: 6, hidden: 512"), std::string("layers: 6, hidden: 512").size(), "layers: 6, hidden: 4096");
  script.replace(script.find("heads: 8"), 8, "heads: 32");
  script.replace(script.find("streaming_memory: 4 GB"), std::string("streaming_memory: 4 GB").size(), "streaming_memory: 64 MB");
  Searched s = load(script);
  ASSERT_NE(s.program, nullptr);
  search::Options o;
  o.maxIpus = 4;
  search::PhaseResult r = run(s, o);
  EXPECT_TRUE(r.top.empty());
  ASSERT_TRUE(r.leastMemory.has_value());
  EXPECT_FALSE(r.leastMemory->fits);
  EXPECT_GT(r.leastMemory->peakMemoryBytes, 0);
  EXPECT_FALSE(r.leastMemory->peakComponent.empty());
  EXPECT_GT(r.counts.rejectedMemory, 0);
  ASSERT_FALSE(r.relax.empty());
  EXPECT_NE(r.relax.front().find("--max-ipus 8"), std::string::npos) << r.relax.front();
}

// Every published configuration (tests/published, one script per row of
// ../shared/reference/published-results.md): the published mapping is in the
// space and fits, and the search's best fits and is predicted at least as fast.
TEST(Search, PublishedRowsAreMatchedOrBeaten) {
  const char* rows[] = {"resnet50_pod16_mlperf_v11", "resnet50_pod64_mlperf_v11", "bert_large_pod16_mlperf_v11",
                        "bert_large_pod64_mlperf_v11", "bert_large_bow_pod16_phase1", "bert_large_bow_pod16_phase2",
                        "resnet50_bow_pod16"};
  for (const char* row : rows) {
    Searched s = loadFile(test::sourceDir() + "/tests/published/" + row + ".ipu");
    ASSERT_NE(s.program, nullptr) << row;
    search::Options o;
    o.top = 1;
    search::PhaseResult r = run(s, o);
    ASSERT_TRUE(r.error.empty()) << row << ": " << r.error;
    ASSERT_TRUE(r.declared.has_value()) << row;
    EXPECT_TRUE(r.declared->fits) << row;
    EXPECT_LE(r.declared->ipusUsed, r.maxIpus) << row;
    ASSERT_FALSE(r.top.empty()) << row;
    EXPECT_TRUE(r.top.front().fits) << row;
    EXPECT_LE(r.top.front().rankedStep, r.declared->rankedStep) << row;
    // The issue's bar for the published BERT rows: the first answer is within
    // 1.35x of the published mapping, or says it is outside the calibration.
    if (std::string(row).find("bert") != std::string::npos) {
      EXPECT_TRUE(r.declared->stepTime / r.top.front().stepTime <= 1.35 || !r.top.front().regimes.empty()) << row;
    }
  }
}

// ---------------------------------------------------------------- --write
// `ipu search --write` and `--apply` (search/script_edit.h): the script with
// the found mapping put in, everything else byte for byte. The candidates here
// are written by hand, so the expected text does not move with the cost model.

const char* kWriteHeader = R"(// A script with what a user writes around a mapping.
import "std/pods"
import "std/precision"
import "std/models/bert"

chip small_chip = GC200 with { tiles: 16, memory: 48 MB, code_base: 1 MB }
machine small_machine = M2000 with { chip: small_chip, ipus: 4, streaming_memory: 1 GB }
pod small_pod {
  machine: small_machine
  machines: 2
}
model tiny = bert(layers: 4, hidden: 256, heads: 4, ffn: 1024, vocab: 8000, positions: 128)

/* the mapping we had */
mapping two for tiny on small_pod {
  pipeline {
    ipu 0: embedding, encoder[0..2], mlm_head, nsp_head
    ipu 1: encoder[2..4]
  }
  replicas: 4  // four replicas
}
)";

// t 1 x p 1 x r `replicas`, micro batch `b`, recomputing every layer.
search::Candidate handMade(int replicas, long long b, long long ga, ir::Recompute recompute = ir::Recompute::EveryLayer) {
  search::Candidate c;
  c.replicas = replicas;
  c.microBatch = b;
  c.gradientAccumulation = ga;
  c.recompute = recompute;
  c.split = search::Split::Single;
  c.samplesPerSecond = 1234.4;
  return c;
}

const check::PhaseSpec& phaseNamed(const Searched& s, const std::string& name) {
  for (const auto& run : s.program->runs)
    for (const auto& ph : run.phases)
      if (ph.name == name) return ph;
  ADD_FAILURE() << "no phase " << name;
  return s.program->runs.at(0).phases.at(0);
}

// The edited text checks, and the phase reads back with the mapping and batch written.
void expectReadsBack(const search::ScriptEdit& edit, const std::string& phase, const search::Candidate& c) {
  Searched back = load(edit.text, "search_write_back.ipu");
  ASSERT_NE(back.program, nullptr) << back.session->diagnostics().all().size() << "\n" << edit.text;
  const check::PhaseSpec& ph = phaseNamed(back, phase);
  EXPECT_EQ(ph.batch.microBatch, c.microBatch) << edit.text;
  EXPECT_EQ(ph.batch.gradientAccumulation, c.gradientAccumulation) << edit.text;
  EXPECT_EQ(ph.mapping->mapping.replicas, c.replicas) << edit.text;
  EXPECT_EQ(ph.mapping->mapping.recompute, c.recompute) << edit.text;
}

TEST(SearchWrite, KeepsEverythingElseAndTheGlobalBatch) {
  const std::string script = std::string(kWriteHeader) + R"(
training t {
  mapping: two
  precision: fp16_mixed
  optimizer: lamb(weight_decay: 0.01)
  micro_batch: 4  // on the training: the phase inherits it
  phase p {
    // the only phase
    seq_len: 128
    masked_tokens: 20
    global_batch: 64
    steps: 1000
    lr: 0.001
  }
}
)";
  Searched s = load(script);
  ASSERT_NE(s.program, nullptr);
  const search::Candidate c = handMade(8, 2, 4);
  search::ScriptEdit edit = search::putFoundMappings(s.session->sources(), s.file, *s.program, {{"t", &phaseNamed(s, "p"), c}});
  ASSERT_TRUE(edit.ok) << edit.problem;
  const std::string expected = std::string(kWriteHeader).insert(std::string(kWriteHeader).size() - 1, R"(

// Found by `ipu search` for phase `p` of `t` (1,234 samples/s predicted).
mapping two_searched for tiny on small_pod {
  replicas: 8
  recompute: every_layer
})") + R"(
training t {
  mapping: two
  precision: fp16_mixed
  optimizer: lamb(weight_decay: 0.01)
  micro_batch: 4  // on the training: the phase inherits it
  phase p {
    mapping: two_searched
    micro_batch: 2
    // the only phase
    seq_len: 128
    masked_tokens: 20
    global_batch: 64
    steps: 1000
    lr: 0.001
  }
}
)";
  EXPECT_EQ(edit.text, expected);
  ASSERT_EQ(edit.changes.size(), 2u);
  EXPECT_EQ(edit.changes[0], "declared mapping `two_searched` after `two` (line 15)");
  EXPECT_EQ(edit.changes[1],
            "phase `p` of `t`: mapping `two_searched` (was `two`), micro_batch 4 -> 2, replicas 4 -> 8 (in the mapping); "
            "global batch 64 as before");
  expectReadsBack(edit, "p", c);
}

// A phase on one line, naming its mapping, with its micro batch derived from
// the accumulation: the fields are replaced where they are; a name in use is not taken.
TEST(SearchWrite, OneLinePhaseWithItsOwnMappingAndDerivedMicroBatch) {
  const std::string script = std::string(kWriteHeader) + R"(
let two_searched = 1

training t {
  precision: fp16_mixed
  optimizer: lamb(weight_decay: 0.01)
  phase p { mapping: two, seq_len: 128, masked_tokens: 20, gradient_accumulation: 2, global_batch: 64, steps: 1000, lr: 0.001 }
}
)";
  Searched s = load(script);
  ASSERT_NE(s.program, nullptr);
  const search::Candidate c = handMade(8, 2, 4);
  search::ScriptEdit edit = search::putFoundMappings(s.session->sources(), s.file, *s.program, {{"t", &phaseNamed(s, "p"), c}});
  ASSERT_TRUE(edit.ok) << edit.problem;
  EXPECT_NE(edit.text.find("mapping two_searched_2 for tiny on small_pod {"), std::string::npos) << edit.text;
  EXPECT_NE(edit.text.find("  phase p { mapping: two_searched_2, seq_len: 128, masked_tokens: 20, gradient_accumulation: 4, "
                           "global_batch: 64, steps: 1000, lr: 0.001 }\n"),
            std::string::npos)
      << edit.text;
  EXPECT_NE(edit.changes.back().find("micro_batch 8 -> 2 (derived), gradient_accumulation 2 -> 4"), std::string::npos)
      << edit.changes.back();
  expectReadsBack(edit, "p", c);
}

// A phase that takes everything from its training (an empty block), and one
// whose block opens with a comment over several lines: the fields go where
// they cannot change a comment.
TEST(SearchWrite, EmptyBlockAndCommentAfterTheBrace) {
  const std::string script = std::string(kWriteHeader) + R"(
training t {
  mapping: two
  precision: fp16_mixed
  optimizer: lamb(weight_decay: 0.01)
  seq_len: 128
  masked_tokens: 20
  micro_batch: 4
  global_batch: 64
  steps: 100
  lr: 0.001
  phase p {}
  phase q from p { /* a comment
    over two lines */ steps: 10
  }
}
)";
  Searched s = load(script);
  ASSERT_NE(s.program, nullptr);
  const search::Candidate c = handMade(8, 2, 4);
  search::ScriptEdit edit = search::putFoundMappings(s.session->sources(), s.file, *s.program,
                                                     {{"t", &phaseNamed(s, "p"), c}, {"t", &phaseNamed(s, "q"), c}});
  ASSERT_TRUE(edit.ok) << edit.problem;
  EXPECT_NE(edit.text.find("  phase p { mapping: two_searched, micro_batch: 2 }\n"), std::string::npos) << edit.text;
  EXPECT_NE(edit.text.find("  phase q from p { /* a comment\n    over two lines */ mapping: two_searched, micro_batch: 2, steps: 10\n"),
            std::string::npos)
      << edit.text;
  expectReadsBack(edit, "p", c);
  expectReadsBack(edit, "q", c);
}

// Two phases of one mapping given different answers: one mapping each,
// named after its phase; a phase given its own mapping keeps it.
TEST(SearchWrite, EachPhaseGetsItsMapping) {
  const std::string script = std::string(kWriteHeader) + R"(
training t {
  mapping: two
  precision: fp16_mixed
  optimizer: lamb(weight_decay: 0.01)
  phase p { seq_len: 128, masked_tokens: 20, micro_batch: 4, global_batch: 64, steps: 1000, lr: 0.001 }
  phase q from p { seq_len: 128, masked_tokens: 20, micro_batch: 4, global_batch: 64, steps: 100, lr: 0.001 }
  phase r from q { seq_len: 128, masked_tokens: 20, micro_batch: 4, global_batch: 64, steps: 100, lr: 0.001 }
}
)";
  Searched s = load(script);
  ASSERT_NE(s.program, nullptr);
  const search::Candidate cp = handMade(8, 2, 4), cq = handMade(4, 4, 4, ir::Recompute::None);
  search::Candidate cr = handMade(4, 4, 4, ir::Recompute::None);
  cr.split = search::Split::Declared;  // the script's own mapping was the best
  search::ScriptEdit edit = search::putFoundMappings(
      s.session->sources(), s.file, *s.program,
      {{"t", &phaseNamed(s, "p"), cp}, {"t", &phaseNamed(s, "q"), cq}, {"t", &phaseNamed(s, "r"), cr}});
  ASSERT_TRUE(edit.ok) << edit.problem;
  const std::size_t p = edit.text.find("mapping two_searched_p for tiny on small_pod {\n  replicas: 8\n  recompute: every_layer\n}");
  const std::size_t q = edit.text.find("mapping two_searched_q for tiny on small_pod {\n  replicas: 4\n}");
  EXPECT_NE(p, std::string::npos) << edit.text;
  EXPECT_NE(q, std::string::npos) << edit.text;
  EXPECT_LT(p, q);
  EXPECT_NE(edit.text.find("  phase p { mapping: two_searched_p, seq_len: 128, masked_tokens: 20, micro_batch: 2,"), std::string::npos)
      << edit.text;
  EXPECT_NE(edit.text.find("  phase q from p { mapping: two_searched_q, seq_len: 128,"), std::string::npos) << edit.text;
  EXPECT_NE(edit.text.find("  phase r from q { seq_len: 128,"), std::string::npos) << edit.text;
  EXPECT_EQ(edit.changes.back(), "phase `r` of `t`: its mapping `two` is the best found; unchanged");
  expectReadsBack(edit, "p", cp);
  expectReadsBack(edit, "q", cq);
}

// A mapping declared with `search { }` stays as it is; the phase uses the
// mapping written beside it, so checking the written script does not search.
TEST(SearchWrite, SearchedMappingIsKeptAndNoLongerSearched) {
  const std::string script = std::string(kWriteHeader) + R"(
mapping best for tiny on small_pod {
  search {
    max_ipus: 8
  }
  recompute: every_layer
}

training t {
  mapping: best
  precision: fp16_mixed
  optimizer: lamb(weight_decay: 0.01)
  phase p { seq_len: 128, masked_tokens: 20, micro_batch: 4, global_batch: 64, steps: 1000, lr: 0.001 }
}
)";
  Searched s = load(script);
  ASSERT_NE(s.program, nullptr);
  search::Candidate c = handMade(8, 2, 4);
  c.rtsOptimizerState = true;  // so that it fits: the check below is clean
  search::ScriptEdit edit = search::putFoundMappings(s.session->sources(), s.file, *s.program, {{"t", &phaseNamed(s, "p"), c}});
  ASSERT_TRUE(edit.ok) << edit.problem;
  EXPECT_NE(edit.text.find("mapping best for tiny on small_pod {\n  search {\n    max_ipus: 8\n  }\n  recompute: every_layer\n}\n\n"
                           "// Found by `ipu search`"),
            std::string::npos)
      << edit.text;
  test::Outcome out = test::runText(edit.text, "search_write_back.ipu");
  ASSERT_NE(out.plan, nullptr) << out.rendered();
  EXPECT_TRUE(out.codes().empty()) << out.rendered();  // no IPU2008: nothing was searched
  EXPECT_EQ(out.plan->runs.at(0).phases.at(0).mapping.name, "best_searched");
}

// ----------------------------------------------------------------- the cache
// Results of `search { }` blocks kept between checks (search/result_cache.h),
// in a temporary directory (never the user's).

const char* kSearchedScript = R"(
import "std/pods"
import "std/precision"
import "std/models/bert"
model small = bert(layers: 2, hidden: 128, heads: 2, ffn: 512, vocab: 4000, positions: 128)
mapping best for small on POD16 {
  search {
    max_ipus: 4
  }
}
training t {
  mapping: best
  precision: fp16_mixed
  optimizer: lamb(weight_decay: 0.01)
  phase p {
    seq_len: 128
    masked_tokens: 20
    micro_batch: 4
    global_batch: 64
    steps: 100
    lr: 0.001
  }
}
)";

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ipu-search-cache-XXXXXX").string();
    path = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::vector<std::filesystem::path> files() const {
    std::vector<std::filesystem::path> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(path, ec))
      if (e.is_regular_file()) out.push_back(e.path());
    return out;
  }
};

std::string readAll(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A cache file's content but for how long its search took.
std::string withoutSeconds(const std::string& file) {
  auto j = nlohmann::ordered_json::parse(file, nullptr, false);
  if (j.is_object() && j.contains("result") && j["result"].is_object()) j["result"].erase("seconds");
  return j.dump();
}

// What a check says of the searched phase: its note, and the plan made from it (every number exactly).
struct Checked {
  std::string note, plan;
};
Checked checkWithCache(const std::string& text, const std::optional<std::string>& directory) {
  session::Session s;
  s.setSearchCache(directory);
  const ir::ExecutionPlan* plan = s.plan(s.addSource(test::sourceDir() + "/tests/search_cache.ipu", text));
  Checked out;
  for (const auto& d : s.diagnostics().all())
    if (d.code == "IPU2008") out.note = d.message;
  if (plan != nullptr) out.plan = static_cast<const nlohmann::ordered_json&>(ir::toJson(*plan)).dump();
  return out;
}

std::string withoutSeconds(const search::PhaseResult& r) {
  ir::Json j = search::resultJson(r);
  j.erase("seconds");
  return static_cast<const nlohmann::ordered_json&>(j).dump();
}

TEST(SearchCache, CachedIsWhatAFreshSearchGives) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const Checked fresh = checkWithCache(kSearchedScript, std::nullopt);
  ASSERT_FALSE(fresh.note.empty());
  ASSERT_FALSE(fresh.plan.empty());
  EXPECT_TRUE(dir.files().empty());
  const Checked first = checkWithCache(kSearchedScript, dir.path.string());
  ASSERT_EQ(dir.files().size(), 1u);
  const Checked again = checkWithCache(kSearchedScript, dir.path.string());
  EXPECT_EQ(first.note, fresh.note);
  EXPECT_EQ(again.note, fresh.note);
  EXPECT_EQ(first.plan, fresh.plan);
  EXPECT_EQ(again.plan, fresh.plan);
  EXPECT_EQ(dir.files().size(), 1u);

  // The result read back is the result, every figure of it.
  Searched s = load(kSearchedScript);
  ASSERT_NE(s.program, nullptr);
  const check::PhaseSpec& ph = s.program->runs.at(0).phases.at(0);
  search::Options o;
  o.maxIpus = 4;
  bool cached = true;
  const search::PhaseResult a = search::searchPhaseCached(ph, s.session->checker()->evaluator(), s.session->sources(), o,
                                                          dir.path.string(), &cached);
  EXPECT_FALSE(cached);
  const search::PhaseResult b = search::searchPhaseCached(ph, s.session->checker()->evaluator(), s.session->sources(), o,
                                                          dir.path.string(), &cached);
  EXPECT_TRUE(cached);
  const search::PhaseResult c = search::searchPhase(ph, s.session->checker()->evaluator(), s.session->sources(), o);
  EXPECT_EQ(withoutSeconds(b), withoutSeconds(c));
  EXPECT_EQ(withoutSeconds(a), withoutSeconds(c));
  ASSERT_FALSE(b.top.empty());
  EXPECT_EQ(describe(b.top.front()), describe(c.top.front()));
  EXPECT_EQ(b.top.front().stages, c.top.front().stages);

  // A search stopped early is not kept: it is not a function of its key.
  TempDir other;
  ASSERT_FALSE(other.path.empty());
  o.deadline = std::chrono::steady_clock::now();
  const search::PhaseResult stopped = search::searchPhaseCached(ph, s.session->checker()->evaluator(), s.session->sources(), o,
                                                                other.path.string(), &cached);
  EXPECT_EQ(stopped.stopped, search::StopReason::TimeLimit);
  EXPECT_FALSE(cached);
  EXPECT_TRUE(other.files().empty());
}

// A result with every field away from its default reads back from its JSON
// as it was: the numbers exactly (a third of a sample per second is not
// rounded), the regimes, sensitivities, breakdowns and assumption checks.
TEST(SearchCache, EveryFieldOfAResultReadsBack) {
  auto candidate = [](double x) {
    search::Candidate c;
    c.shard = 2, c.pipeline = 3, c.replicas = 4, c.phases = 8, c.microBatch = 5, c.gradientAccumulation = 6;
    c.recompute = ir::Recompute::Stage;
    c.optimizerStateStreaming = c.weightsStreaming = c.rtsOptimizerState = c.rtsWeights = true;
    c.split = search::Split::Balanced;
    c.stages = {{0, {0, 1}}, {1, {2}}, {2, {3, 4}}, {0, {5}}};
    c.layersPerIpu = {3, 1, 2};
    c.ipusUsed = 24, c.fits = true;
    c.stepTime = x, c.samplesPerSecond = x / 3, c.tokensPerSecond = x * 7, c.timeToTrain = x * 11;
    c.peakMemoryBytes = x + 1, c.capacityBytes = x + 2, c.peakIpu = 2, c.peakComponent = "activations";
    c.peakComponentBytes = x + 3, c.streamingBytes = x + 4, c.streamingCapacityBytes = x + 5, c.streamingIpu = 1;
    c.inProcessorOver = true;
    c.throughputLow = x / 7, c.throughputHigh = x / 5;
    c.regimes = {{cost::Regime::Phased, "phased, as no row of its kind"}, {cost::Regime::StreamingBandwidth, "rests on 16 GB/s"}};
    c.sensitivities = {{{cost::Assumption::StreamingBandwidth, 16e9, 4e9, 32e9}, x / 9, x / 2}};
    c.breakdown = {x, x / 2, x / 3, x / 4, x / 5, x / 6, x / 7, x / 8, x / 9, x / 10, x / 11, x / 12};
    c.errorHigh = 0.21, c.rankedStep = x * 1.21, c.score = x * 1.21 * 24;
    return c;
  };
  search::PhaseResult r;
  r.phase = "p";
  r.objective = search::Objective::ThroughputPerIpu;
  r.globalBatch = 720, r.podIpus = 64, r.maxIpus = 32;
  r.top = {candidate(1.0 / 3), candidate(2.0 / 3)};
  r.pareto = {candidate(0.1)};
  r.paretoLimits = {32};
  r.declared = candidate(0.7);
  r.leastMemory = candidate(0.9);
  r.relax = {"allow more IPUs", "keep less memory free"};
  r.rank = search::Rank::Expected;
  search::AssumptionCheck a;
  a.range = {cost::Assumption::StreamingBandwidth, 16e9, 4e9, 32e9};
  a.bestAtLow = candidate(0.3);
  a.holdsAtLow = false;
  r.assumptions = {a};
  r.counts = {11, 12, 13, 14, 15, 16};
  r.seconds = 0.125;
  const std::string written = static_cast<const nlohmann::ordered_json&>(search::resultJson(r)).dump();
  const std::optional<search::PhaseResult> back = search::resultFromJson(nlohmann::ordered_json::parse(written));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(static_cast<const nlohmann::ordered_json&>(search::resultJson(*back)).dump(), written);
  ASSERT_EQ(back->top.size(), 2u);
  const search::Candidate& c = back->top[0];
  EXPECT_EQ(c.samplesPerSecond, (1.0 / 3) / 3);
  EXPECT_EQ(c.stages, candidate(1.0 / 3).stages);
  EXPECT_EQ(c.split, search::Split::Balanced);
  EXPECT_EQ(c.recompute, ir::Recompute::Stage);
  ASSERT_EQ(c.regimes.size(), 2u);
  EXPECT_EQ(c.regimes[1].regime, cost::Regime::StreamingBandwidth);
  EXPECT_EQ(c.regimes[1].message, "rests on 16 GB/s");
  ASSERT_EQ(c.sensitivities.size(), 1u);
  EXPECT_EQ(c.sensitivities[0].range.low, 4e9);
  EXPECT_EQ(c.sensitivities[0].samplesPerSecondAtHigh, (1.0 / 3) / 2);
  EXPECT_EQ(c.breakdown.acrossInstances, (1.0 / 3) / 8);
  EXPECT_EQ(c.breakdown.overhead, (1.0 / 3) / 12);
  EXPECT_EQ(c.rankedStep, (1.0 / 3) * 1.21);
  EXPECT_EQ(back->rank, search::Rank::Expected);
  ASSERT_EQ(back->assumptions.size(), 1u);
  EXPECT_FALSE(back->assumptions[0].holdsAtLow);
  EXPECT_TRUE(back->assumptions[0].bestAtLow.has_value());
  EXPECT_FALSE(back->assumptions[0].bestAtHigh.has_value());
  EXPECT_EQ(back->counts.rejectedMemory, 15);
  EXPECT_EQ(back->counts.notSearched, 16);
  EXPECT_EQ(back->leastMemory->peakComponent, "activations");
  // A name the build does not know is not read as something else.
  std::string unknown = written;
  unknown.replace(unknown.find("\"phased\""), 8, "\"warped\"");
  EXPECT_FALSE(search::resultFromJson(nlohmann::ordered_json::parse(unknown)).has_value());
}

// The check takes what the file holds: a result changed in the file shows in
// the note (so the cache is what answered), and a file that is not a result
// for its key (empty, cut short, not JSON, another key, a value of the wrong
// type) is ignored, searched again and written again.
TEST(SearchCache, DamagedFileIsIgnoredAndWrittenAgain) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const Checked fresh = checkWithCache(kSearchedScript, dir.path.string());
  ASSERT_FALSE(fresh.note.empty());
  ASSERT_EQ(dir.files().size(), 1u);
  const std::filesystem::path file = dir.files().front();
  const std::string good = readAll(file);
  ASSERT_FALSE(good.empty());

  nlohmann::ordered_json edited = nlohmann::ordered_json::parse(good);
  edited["result"]["top"][0]["samples_per_second"] = 4242.0;
  std::ofstream(file) << edited.dump();
  EXPECT_NE(checkWithCache(kSearchedScript, dir.path.string()).note.find("4242 samples/s predicted"), std::string::npos);

  nlohmann::ordered_json otherKey = nlohmann::ordered_json::parse(good);
  otherKey["key"] = std::string(64, '0');
  nlohmann::ordered_json wrongType = nlohmann::ordered_json::parse(good);
  wrongType["result"]["top"] = 3;
  nlohmann::ordered_json missing = nlohmann::ordered_json::parse(good);
  missing["result"]["top"][0].erase("replicas");
  for (const std::string& damage : {std::string(), good.substr(0, good.size() / 2), std::string("not json {"),
                                    std::string("[]"), otherKey.dump(), wrongType.dump(), missing.dump()}) {
    std::ofstream(file, std::ios::trunc) << damage;
    const Checked again = checkWithCache(kSearchedScript, dir.path.string());
    EXPECT_EQ(again.note, fresh.note) << damage.substr(0, 80);
    EXPECT_EQ(again.plan, fresh.plan) << damage.substr(0, 80);
    EXPECT_EQ(withoutSeconds(readAll(file)), withoutSeconds(good)) << damage.substr(0, 80);
  }
}

// The key follows what the search reads, not where it is written.
TEST(SearchCache, KeyFollowsWhatTheSearchReads) {
  auto keyOf = [](const std::string& text, double headroom = 0) {
    Searched s = load(text);
    EXPECT_NE(s.program, nullptr) << text;
    if (s.program == nullptr) return std::string();
    search::Options o;
    o.maxIpus = 4;
    o.headroom = headroom;
    return search::resultKey(s.program->runs.at(0).phases.at(0), s.session->checker()->evaluator(), s.session->sources(), o)
        .value_or("");
  };
  auto replaced = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  const std::string base = keyOf(kSearchedScript);
  ASSERT_EQ(base.size(), 64u);
  // Moved down by a comment: the same search.
  EXPECT_EQ(keyOf("// the same search, two lines lower\n\n" + std::string(kSearchedScript)), base);
  EXPECT_NE(keyOf(kSearchedScript, 0.1), base);
  EXPECT_NE(keyOf(replaced(kSearchedScript, "global_batch: 64", "global_batch: 128")), base);
  EXPECT_NE(keyOf(replaced(kSearchedScript, "hidden: 128", "hidden: 192")), base);
  EXPECT_NE(keyOf(replaced(kSearchedScript, "fp16_mixed", "fp16_sr")), base);
  EXPECT_NE(keyOf(replaced(kSearchedScript, "lamb(weight_decay: 0.01)", "adamw(weight_decay: 0.01)")), base);
  EXPECT_NE(keyOf(replaced(kSearchedScript, "on POD16", "on POD64")), base);
}

TEST(SearchCache, DirectoryFromTheEnvironment) {
  struct Saved {
    const char* name;
    std::optional<std::string> value;
  };
  std::vector<Saved> saved;
  for (const char* name : {"IPU_NO_CACHE", "XDG_CACHE_HOME", "HOME"}) {
    const char* v = std::getenv(name);
    saved.push_back({name, v != nullptr ? std::optional<std::string>(v) : std::nullopt});
  }
  ::setenv("IPU_NO_CACHE", "1", 1);
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(search::cacheDirectoryFromEnvironment(), std::nullopt);
  ::setenv("IPU_NO_CACHE", "0", 1);
  EXPECT_EQ(search::cacheDirectoryFromEnvironment(), std::optional<std::string>("/tmp/xdg/ipu/search"));
  ::unsetenv("IPU_NO_CACHE");
  ::setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  ::setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(search::cacheDirectoryFromEnvironment(), std::optional<std::string>("/home/someone/.cache/ipu/search"));
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("HOME");
  EXPECT_EQ(search::cacheDirectoryFromEnvironment(), std::nullopt);
  for (const auto& s : saved) {
    if (s.value) ::setenv(s.name, s.value->c_str(), 1);
    else ::unsetenv(s.name);
  }
}

// The key writes the fields of these structures one by one, and a cache file
// the fields of a result (result_cache.cpp): a field added to one of them
// changes its size here, and must be added to the key or the file too (or
// said why not), before this size is updated. A result that depends on
// something else than its inputs (a search stopped by a time limit) must not
// be kept. Sizes are those of x86-64 with libstdc++, where the project is
// built; a field that fits in padding does not change them.
TEST(SearchCache, KeyCoversEveryFieldOfWhatItReads) {
#if defined(__x86_64__) && defined(__GLIBCXX__)
  EXPECT_EQ(sizeof(hw::Calibration), 168u);
  EXPECT_EQ(sizeof(hw::Calibration::Row), 160u);
  EXPECT_EQ(sizeof(hw::Chip), 280u);
  EXPECT_EQ(sizeof(hw::Machine), 408u);
  EXPECT_EQ(sizeof(hw::Pod), 456u);
  EXPECT_EQ(sizeof(ir::Precision), 128u);
  EXPECT_EQ(sizeof(ir::LossScale), 64u);
  EXPECT_EQ(sizeof(ir::Optimizer), 136u);
  EXPECT_EQ(sizeof(ir::LrSchedule), 88u);
  EXPECT_EQ(sizeof(ir::Dataset), 120u);
  EXPECT_EQ(sizeof(ir::Batch), 40u);
  EXPECT_EQ(sizeof(ir::Flops), 32u);
  EXPECT_EQ(sizeof(ir::Attribute), 72u);
  EXPECT_EQ(sizeof(ir::Mapping), 136u);
  EXPECT_EQ(sizeof(check::LayerFacts), 344u);
  EXPECT_EQ(sizeof(check::PhaseSpec), 1032u);
  EXPECT_EQ(sizeof(check::MappingSpec), 832u);
  EXPECT_EQ(sizeof(check::StageSpec), 48u);
  EXPECT_EQ(sizeof(check::SearchSpec), 32u);
  EXPECT_EQ(sizeof(check::ModelSpec), 128u);
  EXPECT_EQ(sizeof(search::Options), 304u);
  EXPECT_EQ(sizeof(search::Fixed), 208u);
  EXPECT_EQ(sizeof(search::Candidate), 408u);
  EXPECT_EQ(sizeof(search::Counts), 48u);
  EXPECT_EQ(sizeof(search::PhaseResult), 1112u);
  EXPECT_EQ(sizeof(search::AssumptionCheck), 872u);
  EXPECT_EQ(sizeof(cost::Breakdown), 96u);
  EXPECT_EQ(sizeof(cost::RegimeFlag), 40u);
  EXPECT_EQ(sizeof(cost::Sensitivity), 48u);
  EXPECT_EQ(sizeof(cost::AssumedRange), 32u);
#else
  GTEST_SKIP() << "sizes are recorded for x86-64 with libstdc++";
#endif
}

}  // namespace
}  // namespace ipu
