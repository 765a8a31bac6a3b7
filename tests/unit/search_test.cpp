// The mapping search (interpreter/search): its pruned search returns what a
// brute force over the same space returns, its pipeline split is the optimal
// contiguous split, a candidate it reports is what the planner and the cost
// model say of the same mapping written as a script, and it explains when
// nothing fits. The published configurations are checked in
// PublishedRowsAreMatchedOrBeaten.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "interpreter/search/search.h"
#include "interpreter/session/session.h"
#include "tests/unit/test_support.h"

namespace ipu {
namespace {

struct Searched {
  std::unique_ptr<session::Session> session;
  const check::CheckedProgram* program = nullptr;
};

Searched load(const std::string& text, const std::string& name = "search_test.ipu") {
  Searched s;
  s.session = std::make_unique<session::Session>();
  base::FileId f = s.session->addSource(test::sourceDir() + "/tests/" + name, text);
  s.program = s.session->check(f);
  return s;
}

Searched loadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  Searched s;
  s.session = std::make_unique<session::Session>();
  base::FileId f = s.session->addSource(path, ss.str());
  s.program = s.session->check(f);
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

// The best mapping, written out by --write and put back in the script with
// its micro batch, plans and estimates to the figures the search reported:
// the search's in-process variants are the mappings a user would write.
TEST(Search, WrittenMappingPlansToTheSameFigures) {
  for (const char* script : {kTinyBert, kSmallGpt}) {
    Searched s = load(script);
    ASSERT_NE(s.program, nullptr);
    search::Options o;
    o.top = 3;
    search::PhaseResult r = run(s, o);
    ASSERT_FALSE(r.top.empty());
    for (const auto& best : r.top) {
      const check::PhaseSpec& ph = s.program->runs[0].phases[0];
      std::string text = script;
      text += "\n" + search::mappingSource(ph, best, "found") + "\n";
      // The same training on the found mapping, with its micro batch.
      const std::string head = "training t {\n  mapping: ";
      const std::size_t at = text.find(head) + head.size();
      text.replace(at, text.find('\n', at) - at, "found");
      std::string phaseLine = "micro_batch: " + std::to_string(ph.batch.microBatch);
      text.replace(text.find(phaseLine), phaseLine.size(), "micro_batch: " + std::to_string(best.microBatch));
      test::Outcome out = test::runText(text, "search_written.ipu");
      ASSERT_NE(out.plan, nullptr) << out.rendered() << "\n" << text;
      ASSERT_TRUE(out.errorCodes().empty()) << out.rendered() << "\n" << text;
      const ir::PhasePlan& plan = out.plan->runs.at(0).phases.at(0);
      cost::PhaseEstimate e = cost::estimatePhase(plan);
      EXPECT_NEAR(e.stepTime, best.stepTime, 1e-9 * best.stepTime) << search::mappingSource(ph, best, "found");
      EXPECT_EQ(plan.ipusUsed, best.ipusUsed);
      EXPECT_EQ(plan.batch.gradientAccumulation, best.gradientAccumulation);
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

}  // namespace
}  // namespace ipu
