// Unit tests of the cost model: its predictions against the published table
// (with the committed calibration), and properties that must hold whatever
// the fitted parameters are.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "runtime/cost/calibrate.h"
#include "runtime/cost/cost_model.h"
#include "runtime/cost/timeline.h"
#include "runtime/train/lr_schedule.h"
#include "tests/unit/test_support.h"

using namespace ipu;

namespace {

struct PublishedRow {
  std::string label, script;
  double measured = 0;
};

std::vector<PublishedRow> publishedTable() {
  std::ifstream in(test::sourceDir() + "/tests/published/published.csv");
  std::vector<PublishedRow> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) f.push_back(cell);
    if (f.size() == 5) rows.push_back({f[0], f[1], std::stod(f[4])});
  }
  return rows;
}

// A BERT-Large training on POD64 whose mapping and precision the tests vary.
std::string bert(const std::string& mapping, const std::string& precision = "fp16_sr",
                 const std::string& phase = "seq_len: 128; masked_tokens: 20; micro_batch: 8; gradient_accumulation: 64") {
  return "import \"std/pods\"\nimport \"std/models/bert\"\nimport \"std/precision\"\n"
         "mapping m for bert_large on POD64 {\n" + mapping + "\n}\n"
         "training t {\n  mapping: m\n  precision: " + precision + "\n  optimizer: lamb(weight_decay: 0.01)\n"
         "  phase one { " + phase + "; steps: 100; lr: 0.006 }\n}\n";
}

const char* kPipeline4 =
    "pipeline {\n ipu 0: embedding, encoder[0..3], mlm_head, nsp_head\n ipu 1: encoder[3..10]\n"
    " ipu 2: encoder[10..17]\n ipu 3: encoder[17..24]\n}\nrecompute: every_layer\n"
    "optimizer_state: streaming\navailable_memory_proportion: [0.15, 0.25, 0.25, 0.25]\n";

// Plans `text` and estimates its first phase; fails the test on any error.
cost::PhaseEstimate estimateOf(const std::string& text) {
  test::Outcome o = test::runText(text);
  EXPECT_NE(o.plan, nullptr) << o.rendered();
  if (o.plan == nullptr || o.plan->runs.empty() || o.plan->runs[0].phases.empty()) return {};
  std::vector<cost::Problem> problems;
  cost::PhaseEstimate e = cost::estimatePhase(o.plan->runs[0].phases[0], &problems);
  EXPECT_TRUE(problems.empty()) << problems.front().message;
  EXPECT_TRUE(e.ok);
  return e;
}

}  // namespace

// The acceptance bar: every published row within 10%, the mean
// absolute error within 5%, with the calibration committed in the stdlib.
TEST(CostModel, PredictsThePublishedTable) {
  std::vector<PublishedRow> rows = publishedTable();
  ASSERT_GE(rows.size(), 7u);
  double sumAbs = 0;
  for (const auto& row : rows) {
    test::Outcome o = test::runFile(test::sourceDir() + "/tests/published/" + row.script, /*estimate=*/true);
    ASSERT_NE(o.estimate, nullptr) << row.label << "\n" << o.rendered();
    ASSERT_FALSE(o.session->diagnostics().hasErrors()) << row.label << "\n" << o.rendered();
    const cost::PhaseEstimate& e = o.estimate->runs.at(0).phases.at(0);
    double error = e.samplesPerSecond / row.measured - 1;
    EXPECT_LT(std::fabs(error), 0.10) << row.label << ": predicted " << e.samplesPerSecond << ", published " << row.measured;
    sumAbs += std::fabs(error);
  }
  EXPECT_LT(sumAbs / static_cast<double>(rows.size()), 0.05);
}

// The breakdown adds up to the step, and throughput follows from it.
TEST(CostModel, BreakdownAddsUpToTheStep) {
  cost::PhaseEstimate e = estimateOf(bert(std::string(kPipeline4) + "replicas: 16\n"));
  EXPECT_NEAR(e.breakdown.total(), e.stepTime, 1e-12 * e.stepTime);
  EXPECT_NEAR(e.samplesPerSecond, 8.0 * 64 * 16 / e.stepTime, 1e-9 * e.samplesPerSecond);
  EXPECT_NEAR(e.tokensPerSecond, e.samplesPerSecond * 128, 1e-6 * e.tokensPerSecond);
  EXPECT_EQ(e.cycles, 64 + 2 * 5 - 2);  // 5 stages: the heads come back to IPU 0
  EXPECT_NEAR(e.timeToTrain, 100 * e.stepTime, 1e-9 * e.timeToTrain);
  ASSERT_EQ(e.ipus.size(), 4u);
  for (const auto& it : e.ipus) {
    EXPECT_GT(it.utilisation, 0);
    EXPECT_LT(it.utilisation, 1);
    EXPECT_GT(it.memoryBytes, 0);
    EXPECT_LE(it.memoryBytes, it.capacityBytes);
  }
}

// More replicas at a fixed per-replica work: the step changes only by
// communication, and throughput never drops (inside one rack and across).
TEST(CostModel, MoreReplicasChangeOnlyCommunication) {
  cost::PhaseEstimate base = estimateOf(bert(std::string(kPipeline4) + "replicas: 1\n"));
  double previous = base.samplesPerSecond;
  for (int r : {2, 4, 8, 16}) {
    cost::PhaseEstimate e = estimateOf(bert(std::string(kPipeline4) + "replicas: " + std::to_string(r) + "\n"));
    const cost::Breakdown &a = base.breakdown, &b = e.breakdown;
    EXPECT_DOUBLE_EQ(a.compute, b.compute) << r;
    EXPECT_DOUBLE_EQ(a.recompute, b.recompute) << r;
    EXPECT_DOUBLE_EQ(a.pipelineFillDrain, b.pipelineFillDrain) << r;
    EXPECT_DOUBLE_EQ(a.stageImbalance, b.stageImbalance) << r;
    EXPECT_DOUBLE_EQ(a.exchange, b.exchange) << r;
    double comm = (b.allReduce + b.rtsCollectives + b.streaming) - (a.allReduce + a.rtsCollectives + a.streaming);
    EXPECT_NEAR(e.stepTime - base.stepTime, comm + (b.optimizer - a.optimizer), 1e-12) << r;
    EXPECT_GT(b.allReduce, 0) << r;
    EXPECT_GE(e.samplesPerSecond, previous) << r;
    previous = e.samplesPerSecond;
  }
}

// Replicas beyond one rack reduce over GW-Links, which are slower: the
// all-reduce of a POD256 step (4 racks) costs more than one inside a POD64.
TEST(CostModel, AllReduceAcrossRacksCostsMore) {
  auto on = [](const std::string& pod, int r) {
    std::string text = bert(std::string(kPipeline4) + "replicas: " + std::to_string(r) + "\n");
    text.replace(text.find("POD64"), 5, pod);
    return estimateOf(text);
  };
  cost::PhaseEstimate inRack = on("POD64", 16), acrossRacks = on("POD256", 64);
  EXPECT_GT(acrossRacks.breakdown.allReduce, inRack.breakdown.allReduce);
  EXPECT_GT(acrossRacks.samplesPerSecond, 3 * inRack.samplesPerSecond);  // still scales
}

// Deeper gradient accumulation amortises the pipeline's fill and drain.
TEST(CostModel, DeeperAccumulationRaisesPipelineUtilisation) {
  double previous = 0;
  for (int ga : {4, 16, 64, 256, 1024}) {
    cost::PhaseEstimate e = estimateOf(bert(kPipeline4, "fp16_sr",
                                            "seq_len: 128; masked_tokens: 20; micro_batch: 8; gradient_accumulation: " +
                                                std::to_string(ga)));
    EXPECT_GT(e.pipelineUtilisation, previous) << ga;
    EXPECT_LT(e.pipelineUtilisation, 1) << ga;
    previous = e.pipelineUtilisation;
  }
}

TEST(CostModel, Fp32IsSlowerThanFp16) {
  cost::PhaseEstimate half = estimateOf(bert(kPipeline4, "fp16_sr"));
  cost::PhaseEstimate full = estimateOf(bert(kPipeline4, "fp32_full"));
  EXPECT_GT(full.stepTime, 1.5 * half.stepTime);  // 4x fewer FLOP per cycle, 2x the bytes
  EXPECT_GT(full.breakdown.compute, 3 * half.breakdown.compute);
}

// Offloading the optimizer state frees In-Processor Memory and costs
// Streaming Memory time.
TEST(CostModel, OffloadFreesMemoryAndCostsStreamingTime) {
  std::string onChip = std::string(kPipeline4);
  onChip.replace(onChip.find("optimizer_state: streaming\n"), 27, "");
  test::Outcome a = test::runText(bert(onChip + "replicas: 4\n"));
  test::Outcome b = test::runText(bert(std::string(kPipeline4) + "replicas: 4\n"));
  ASSERT_TRUE(a.plan && b.plan);
  const auto& pa = a.plan->runs[0].phases[0];
  const auto& pb = b.plan->runs[0].phases[0];
  for (std::size_t i = 0; i < pa.ipus.size(); ++i) {
    EXPECT_LT(pb.ipus[i].memory.optimizerState, pa.ipus[i].memory.optimizerState) << i;
    EXPECT_LT(pb.ipus[i].memory.total(), pa.ipus[i].memory.total()) << i;
  }
  cost::PhaseEstimate ea = cost::estimatePhase(pa), eb = cost::estimatePhase(pb);
  EXPECT_EQ(ea.breakdown.streaming, 0);
  EXPECT_GT(eb.breakdown.streaming, 0);
  EXPECT_GT(eb.stepTime, ea.stepTime);
}

// Tensor sharding splits the compute and adds collectives between the shards.
TEST(CostModel, ShardingSplitsComputeAndAddsExchange) {
  cost::PhaseEstimate t1 = estimateOf(bert(std::string(kPipeline4) + "replicas: 4\n"));
  cost::PhaseEstimate t2 = estimateOf(bert(std::string(kPipeline4) + "replicas: 4\nshard: 2\n"));
  EXPECT_LT(t2.breakdown.compute, t1.breakdown.compute);
  EXPECT_GT(t2.breakdown.exchange, t1.breakdown.exchange);
}

// Recomputation costs a forward pass per micro batch and nothing else.
TEST(CostModel, RecomputationCostsForwardPasses) {
  std::string without = std::string(kPipeline4);
  without.replace(without.find("recompute: every_layer\n"), 23, "");
  cost::PhaseEstimate on = estimateOf(bert(kPipeline4)), off = estimateOf(bert(without));
  EXPECT_EQ(off.breakdown.recompute, 0);
  EXPECT_GT(on.breakdown.recompute, 0.2 * on.breakdown.compute);
  EXPECT_LT(on.breakdown.recompute, 0.5 * on.breakdown.compute);  // forward is a third of forward + backward
}

// A balanced pipeline is faster than a lopsided one with the same IPUs.
TEST(CostModel, ImbalanceCostsTime) {
  const char* lopsided =
      "pipeline {\n ipu 0: embedding, mlm_head, nsp_head\n ipu 1: encoder[0..2]\n"
      " ipu 2: encoder[2..4]\n ipu 3: encoder[4..24]\n}\nrecompute: every_layer\noptimizer_state: streaming\n";
  cost::PhaseEstimate good = estimateOf(bert(kPipeline4)), bad = estimateOf(bert(lopsided));
  EXPECT_GT(bad.breakdown.stageImbalance, 5 * good.breakdown.stageImbalance);
  EXPECT_GT(bad.stepTime, 1.5 * good.stepTime);
}

// A chip without calibration cannot be estimated; the error says what to do.
TEST(CostModel, UncalibratedChipIsAnError) {
  std::string text = bert("replicas: 64\nrecompute: every_layer\noptimizer_state: streaming\n");
  text.insert(text.find("mapping m"), "chip raw { clock: 1 GHz, tiles: 1472, memory: 900 MB, flops_per_cycle: { fp16: 64, fp32: 16 } }\n"
                                     "machine box = M2000 with { chip: raw }\npod rawpod = POD64 with { machine: box }\n");
  text.replace(text.find("on POD64"), 8, "on rawpod");
  test::Outcome o = test::runText(text);
  ASSERT_NE(o.plan, nullptr) << o.rendered();
  std::vector<cost::Problem> problems;
  cost::PhaseEstimate e = cost::estimatePhase(o.plan->runs[0].phases[0], &problems);
  EXPECT_FALSE(e.ok);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].code, "IPU3001");
  EXPECT_NE(problems[0].help.find("ipu calibrate"), std::string::npos);
}

// Fitting is deterministic and recovers parameters it generated data with.
TEST(Calibration, RecoversKnownParameters) {
  std::vector<cost::Measurement> rows;
  hw::Calibration truth;
  truth.present = true;
  truth.matmulEfficiency = 0.55;
  truth.convEfficiency = 0.40;
  truth.attentionFactor = 0.5;
  truth.opLatencyCycles = 5000;
  truth.stepOverheadSeconds = 2e-3;
  std::vector<std::string> scripts = {"resnet50_pod16_mlperf_v11.ipu", "resnet50_pod64_mlperf_v11.ipu",
                                      "bert_large_pod16_mlperf_v11.ipu", "bert_large_pod64_mlperf_v11.ipu"};
  std::vector<test::Outcome> outcomes;
  for (const auto& s : scripts) {
    outcomes.push_back(test::runFile(test::sourceDir() + "/tests/published/" + s));
    ASSERT_NE(outcomes.back().plan, nullptr) << outcomes.back().rendered();
    ir::PhasePlan ph = outcomes.back().plan->runs[0].phases[0];
    ph.pod.machine.chip.calibration = truth;
    rows.push_back(cost::Measurement{s, ph, cost::estimatePhase(ph).samplesPerSecond});
  }
  cost::FitResult fit = cost::fitCalibration(rows, "synthetic");
  ASSERT_EQ(fit.chips.size(), 1u);
  const hw::Calibration& got = fit.chips.begin()->second;
  EXPECT_LT(fit.maxAbsoluteError, 0.005);
  EXPECT_NEAR(got.matmulEfficiency, truth.matmulEfficiency, 0.03);
  EXPECT_NEAR(got.convEfficiency, truth.convEfficiency, 0.03);
  cost::FitResult again = cost::fitCalibration(rows, "synthetic");
  EXPECT_EQ(again.chips.begin()->second.matmulEfficiency, got.matmulEfficiency);
}

// The timeline of one step shows every stage's work and the bubbles.
TEST(Timeline, CoversEveryIpuAndTheStep) {
  test::Outcome o = test::runText(bert(std::string(kPipeline4) + "replicas: 16\n", "fp16_sr",
                                       "seq_len: 128; masked_tokens: 20; micro_batch: 8; gradient_accumulation: 8"));
  ASSERT_NE(o.plan, nullptr);
  const auto& ph = o.plan->runs[0].phases[0];
  cost::PhaseEstimate e = cost::estimatePhase(ph);
  cost::Timeline tl = cost::timeline(ph, e);
  ASSERT_EQ(tl.ipus, 4);
  EXPECT_EQ(tl.cycles, 8 + 2 * 5 - 2);
  for (int g = 0; g < tl.ipus; ++g) {
    double at = 0, busy = 0;
    int forwardCycles = 0, backwardCycles = 0;
    for (const auto& s : tl.segments) {
      if (s.ipu != g) continue;
      EXPECT_NEAR(s.start, at, 1e-12) << "segments of IPU " << g << " are contiguous";
      EXPECT_LT(s.start, s.end);
      at = s.end;
      if (s.activity == cost::Activity::Forward) ++forwardCycles;
      if (s.activity == cost::Activity::Backward) ++backwardCycles;
      if (s.activity != cost::Activity::Idle) busy += s.end - s.start;
    }
    EXPECT_NEAR(at, tl.stepTime, 1e-9 * tl.stepTime) << g;
    EXPECT_LT(busy, tl.stepTime) << g;
    // Each stage does GA forward and GA backward passes; IPU 0 has two stages
    // whose passes may share cycles.
    EXPECT_GE(forwardCycles, 8) << g;
    EXPECT_GE(backwardCycles, 8) << g;
    EXPECT_LE(forwardCycles, 16) << g;
  }
}

TEST(LearningRate, WarmupThenDecay) {
  ir::LrSchedule lr;
  lr.peak = 1.0;
  lr.warmupSteps = 10;
  lr.decay = "linear";
  lr.end = 0;
  EXPECT_DOUBLE_EQ(train::learningRate(lr, 0, 110), 0.1);
  EXPECT_DOUBLE_EQ(train::learningRate(lr, 9, 110), 1.0);
  EXPECT_DOUBLE_EQ(train::learningRate(lr, 10, 110), 1.0);
  EXPECT_DOUBLE_EQ(train::learningRate(lr, 60, 110), 0.5);
  lr.decay = "cosine";
  EXPECT_NEAR(train::learningRate(lr, 60, 110), 0.5, 1e-12);
  EXPECT_NEAR(train::learningRate(lr, 35, 110), 0.5 * (1 + std::cos(std::acos(-1.0) / 4)), 1e-12);
  lr.decay = "poly";
  lr.power = 2;
  EXPECT_NEAR(train::learningRate(lr, 60, 110), 0.25, 1e-12);
  lr.decay = "exponential";
  lr.end = 0.01;
  EXPECT_NEAR(train::learningRate(lr, 60, 110), 0.1, 1e-12);
  lr.decay = "constant";
  EXPECT_DOUBLE_EQ(train::learningRate(lr, 100, 110), 1.0);
}
