// Unit tests of the cost model: its predictions against the published table
// (with the committed calibration), and properties that must hold whatever
// the fitted parameters are.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "runtime/cost/calibrate.h"
#include "runtime/cost/codes.h"
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

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

// In sample, with the calibration committed in the stdlib: the mean absolute
// error within 6% and 85% of the rows within 10%. (The honest figure is the
// leave-one-out one below.)
TEST(CostModel, PredictsThePublishedTable) {
  std::vector<PublishedRow> rows = publishedTable();
  ASSERT_GE(rows.size(), 25u);
  double sumAbs = 0;
  int within = 0;
  for (const auto& row : rows) {
    test::Outcome o = test::runFile(test::sourceDir() + "/tests/published/" + row.script, /*estimate=*/true);
    ASSERT_NE(o.estimate, nullptr) << row.label << "\n" << o.rendered();
    ASSERT_FALSE(o.session->diagnostics().hasErrors()) << row.label << "\n" << o.rendered();
    const cost::PhaseEstimate& e = o.estimate->runs.at(0).phases.at(0);
    double error = e.samplesPerSecond / row.measured - 1;
    within += std::fabs(error) < 0.10;
    sumAbs += std::fabs(error);
    // Every row's interval comes from the calibration's cross-validated
    // errors and contains the estimate (at an end when every comparable row
    // erred the same way).
    EXPECT_LE(e.throughputLow, e.samplesPerSecond) << row.label;
    EXPECT_GE(e.throughputHigh, e.samplesPerSecond) << row.label;
    EXPECT_LT(e.throughputLow, e.throughputHigh) << row.label;
  }
  // In sample is not the figure to quote (leave-one-group-out is, below):
  // without a constant per framework the fit no longer bends to each family,
  // so it is 7.1% where the labels made it 5.1%.
  EXPECT_LT(sumAbs / static_cast<double>(rows.size()), 0.08);
  EXPECT_GE(within, static_cast<int>(0.75 * static_cast<double>(rows.size())));
}

// Cross-validated errors on the published table, as bounds a change must
// not cross. Leave-one-out: each row predicted by a fit on all the others
// (mean within 8.5%, median within 6%, every row of a kind of model the table
// has at least three rows of within 30%, the single ViT row within 40%).
TEST(Calibration, LeaveOneOutErrorOnThePublishedTable) {
  std::vector<PublishedRow> table = publishedTable();
  ASSERT_GE(table.size(), 25u);
  std::vector<test::Outcome> outcomes;
  std::vector<cost::Measurement> rows;
  for (const auto& row : table) {
    outcomes.push_back(test::runFile(test::sourceDir() + "/tests/published/" + row.script));
    ASSERT_NE(outcomes.back().plan, nullptr) << row.label;
    rows.push_back(cost::Measurement{row.label, outcomes.back().plan->runs.at(0).phases.at(0), row.measured});
  }
  cost::FitResult fit = cost::fitCalibration(rows, "test");
  EXPECT_LE(fit.leaveOneOut.mean, 0.085);
  EXPECT_LE(fit.leaveOneOut.median, 0.06);
  EXPECT_GE(fit.leaveOneOut.mean, fit.inSample.mean - 0.005);  // out of sample is not better on average
  EXPECT_LE(fit.leaveOneOut.worst, 0.40);
  std::map<std::string, int> perFamily;
  for (const auto& r : fit.residuals) ++perFamily[r.family];
  for (const auto& r : fit.residuals) {
    ASSERT_GT(r.looPredicted, 0) << r.label;
    if (perFamily[r.family] >= 3) {
      EXPECT_LE(std::fabs(r.looError()), 0.30) << r.label;
    }
  }

  // Grouped cross-validation, the figure docs/cost-model.md quotes: each
  // configuration group (model, pipeline shape, micro batch) predicted by a
  // fit without any of its rows. Its near-copies no longer help, so it is
  // worse than leave-one-out. The targets are a mean within 10% (8.2% today)
  // and a worst within 25%, which the ViT group (one row, +38%) misses; every
  // other group is within 31%.
  EXPECT_GE(fit.groups, 8u);
  EXPECT_LT(fit.groups, rows.size());
  for (const auto& r : fit.residuals) {
    ASSERT_GT(r.logoPredicted, 0) << r.label;
    EXPECT_FALSE(r.group.empty()) << r.label;
  }
  EXPECT_GE(fit.leaveOneGroupOut.mean, fit.leaveOneOut.mean);
  EXPECT_LE(fit.leaveOneGroupOut.mean, 0.10);
  EXPECT_LE(fit.leaveOneGroupOut.median, 0.08);
  EXPECT_LE(fit.leaveOneGroupOut.worst, 0.40);
  for (const auto& r : fit.residuals)
    if (perFamily[r.family] >= 3) {
      EXPECT_LE(std::fabs(r.logoError()), 0.31) << r.label;
    }

  // The intervals' nominal coverage, 80%: each calibration row's own
  // leave-one-group-out error falls inside the interval made, as `ipu
  // estimate` makes it, from the other rows' errors, for about 80% of rows.
  // Each chip's record holds every row of its architecture (the GC200 and
  // the Bow are one), so one record holds them all.
  int covered = 0, total = 0;
  for (const auto& [chip, cal] : fit.chips)
    EXPECT_EQ(cal.rows.size(), rows.size()) << chip;
  for (const auto& [chip, cal] : std::map<std::string, hw::Calibration>{*fit.chips.begin()})
    for (std::size_t i = 0; i < cal.rows.size(); ++i) {
      const auto& row = cal.rows[i];
      const cost::ErrorRange range =
          cost::likelyErrorRange(cost::comparableErrors(cal.rows, row.family, row.ipus, row.accumulation, i));
      covered += row.logoError >= range.low && row.logoError <= range.high;
      ++total;
    }
  ASSERT_EQ(total, static_cast<int>(rows.size()));
  const double coverage = static_cast<double>(covered) / total;
  std::printf("interval coverage on the table: %d of %d rows (%.0f%%)\n", covered, total, 100 * coverage);
  EXPECT_GE(coverage, 0.70);
  EXPECT_LE(coverage, 0.90);
}

// The likely range: the j-th smallest to the j-th largest of n errors, j =
// max(1, floor((n + 1) / 10)), widened to include 0; the comparable rows: the
// model's kind nearest in IPUs and accumulation, or all rows when the kind
// has too few.
TEST(Calibration, IntervalsFromComparableRows) {
  std::vector<double> errors;
  for (int i = 1; i <= 19; ++i) errors.push_back(0.01 * i);   // 0.01 .. 0.19: j = 2
  cost::ErrorRange r = cost::likelyErrorRange(errors);
  EXPECT_NEAR(r.low, 0.0, 1e-12);     // the 2nd smallest is 0.02 > 0: widened to 0
  EXPECT_NEAR(r.high, 0.18, 1e-12);   // the 2nd largest
  r = cost::likelyErrorRange({-0.3, -0.1, 0.0, 0.1, 0.2});
  EXPECT_NEAR(r.low, -0.3, 1e-12);    // j = 1: min to max
  EXPECT_NEAR(r.high, 0.2, 1e-12);
  std::vector<hw::Calibration::Row> rows;
  auto row = [](const char* family, double ipus, double accumulation, double logoError) {
    hw::Calibration::Row out;
    out.family = family;
    out.ipus = ipus;
    out.accumulation = accumulation;
    out.logoError = logoError;
    return out;
  };
  for (int i = 0; i < 12; ++i) rows.push_back(row("bert", static_cast<double>(16 << (i % 4)), 32, 0.01 * i));
  rows.push_back(row("resnet", 16, 1, 0.9));
  cost::ComparableErrors c = cost::comparableErrors(rows, "bert", 16, 32);
  ASSERT_EQ(c.errors.size(), cost::kIntervalRows);
  for (double e : c.errors) EXPECT_NE(e, 0.9);   // never another kind's row while the kind has enough
  // The three rows at 16 IPUs come first (logo errors 0, 0.04, 0.08), then 32 IPUs.
  EXPECT_EQ(c.errors[0], 0.0);
  EXPECT_EQ(c.errors[1], 0.04);
  EXPECT_NE(c.basis.find("nominally 80%"), std::string::npos) << c.basis;
  c = cost::comparableErrors(rows, "resnet", 16, 1);
  EXPECT_EQ(c.errors.size(), rows.size());        // too few of its kind: every row
  {
    // Trimmed among 19 errors (j = 2), the kind's one row (+90%) would be
    // cut off; the interval spans it, and the basis says so.
    std::vector<hw::Calibration::Row> many(rows);
    for (int i = 0; i < 6; ++i) many.push_back(row("bert", 16, 32, 0.01));
    const cost::ComparableErrors one = cost::comparableErrors(many, "resnet", 16, 1);
    ASSERT_EQ(one.errors.size(), 19u);
    EXPECT_NEAR(cost::likelyErrorRange(one.errors).high, 0.11, 1e-12);
    EXPECT_NEAR(cost::likelyErrorRange(one).high, 0.9, 1e-12);
    EXPECT_NE(one.basis.find("the one row of this model's kind (+90%)"), std::string::npos) << one.basis;
  }
  c = cost::comparableErrors(rows, "resnet", 16, 1, 12);
  EXPECT_EQ(c.errors.size(), rows.size() - 1);    // the skipped row left out
  for (int i = 0; i < 4; ++i) rows.push_back(row("vit", 64, 8, -0.02 * i));
  c = cost::comparableErrors(rows, "vit", 64, 8);
  EXPECT_EQ(c.errors.size(), 4u);                 // 4 of its kind: those, min to max
  EXPECT_NE(c.basis.find("nominally 60%"), std::string::npos) << c.basis;
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
  // 4x fewer FLOP per cycle; the fixed latency of each compute step does not change with precision.
  EXPECT_GT(full.breakdown.compute, 2.5 * half.breakdown.compute);
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

// The cost model prices the plan's schedule and traffic and derives neither:
// changing the figures in the plan changes the estimate by them.
TEST(CostModel, PricesThePlansScheduleAndTraffic) {
  test::Outcome o = test::runText(bert(std::string(kPipeline4) + "replicas: 4\n"));
  ASSERT_NE(o.plan, nullptr) << o.rendered();
  const ir::PhasePlan& base = o.plan->runs[0].phases[0];
  const cost::PhaseEstimate e = cost::estimatePhase(base);
  ASSERT_TRUE(e.ok);
  EXPECT_EQ(e.cycles, base.schedule.cycles());
  ASSERT_FALSE(base.traffic.boundaries.empty());
  ASSERT_FALSE(base.traffic.collectives.empty());
  ASSERT_FALSE(base.traffic.streaming.empty());

  ir::PhasePlan longer = base;
  longer.schedule.microBatches *= 2;
  const cost::PhaseEstimate el = cost::estimatePhase(longer);
  EXPECT_EQ(el.cycles, 2 * base.schedule.microBatches + 2 * base.schedule.stages - 2);
  EXPECT_DOUBLE_EQ(el.breakdown.compute, 2 * e.breakdown.compute);
  EXPECT_NEAR(el.breakdown.pipelineFillDrain, e.breakdown.pipelineFillDrain, 1e-12 * el.stepTime);

  ir::PhasePlan wider = base;
  for (auto& b : wider.traffic.boundaries) b.activationBytes *= 2, b.gradientBytes *= 2;
  const cost::PhaseEstimate ew = cost::estimatePhase(wider);
  EXPECT_GT(ew.breakdown.exchange, e.breakdown.exchange);
  EXPECT_DOUBLE_EQ(ew.breakdown.compute, e.breakdown.compute);

  ir::PhasePlan alone = base;
  alone.traffic.collectives.clear();
  const cost::PhaseEstimate ea = cost::estimatePhase(alone);
  EXPECT_GT(e.breakdown.allReduce, 0);
  EXPECT_EQ(ea.breakdown.allReduce, 0);
  EXPECT_NEAR(ea.stepTime, e.stepTime - e.breakdown.allReduce - e.breakdown.rtsCollectives, 1e-12 * e.stepTime);

  ir::PhasePlan heavier = base;
  for (auto& c : heavier.traffic.collectives) c.bytes *= 2;
  EXPECT_GT(cost::estimatePhase(heavier).breakdown.allReduce, e.breakdown.allReduce);

  ir::PhasePlan offloaded = base;
  for (auto& st : offloaded.traffic.streaming) st.optimizerState *= 4;
  EXPECT_GT(cost::estimatePhase(offloaded).breakdown.streaming, e.breakdown.streaming);
}

// Weights stream once per step in phased execution: more micro batches per
// step stream more activations, not more weights.
TEST(Plan, PhasedWeightsStreamOncePerStep) {
  auto phased = [](int ga) {
    test::Outcome o = test::runText(bert("phases: 4\nrecompute: every_layer\n", "fp16_sr",
                                         "seq_len: 128; masked_tokens: 20; micro_batch: 8; gradient_accumulation: " + std::to_string(ga)));
    EXPECT_NE(o.plan, nullptr) << o.rendered();
    return o.plan ? o.plan->runs[0].phases[0] : ir::PhasePlan{};
  };
  const ir::PhasePlan a = phased(8), b = phased(32);
  ASSERT_EQ(a.traffic.streaming.size(), a.ipus.size());
  ASSERT_EQ(b.traffic.streaming.size(), b.ipus.size());
  for (std::size_t i = 0; i < a.ipus.size(); ++i) {
    const ir::StreamingTraffic &sa = a.traffic.streaming[i], &sb = b.traffic.streaming[i];
    EXPECT_GT(sa.weights, 0);
    EXPECT_EQ(sa.weights, sb.weights) << i;
    EXPECT_EQ(sa.gradients, sb.gradients) << i;
    EXPECT_EQ(sa.optimizerState, sb.optimizerState) << i;
    EXPECT_DOUBLE_EQ(4 * sa.activations, sb.activations) << i;
    // In for the forward and the backward pass: twice the IPU's weights, and
    // twice more a tied tensor its two users load in different phases.
    bool tiedHere = false;
    for (int li : a.ipus[i].layers) tiedHere |= !a.layers[static_cast<std::size_t>(li)].tiedTo.empty();
    if (tiedHere) EXPECT_GT(sa.weights, 2 * a.ipus[i].parameters * ir::bytesOf(a.precision.weights)) << i;
    else EXPECT_DOUBLE_EQ(sa.weights, 2 * a.ipus[i].parameters * ir::bytesOf(a.precision.weights)) << i;
  }
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

// The per-step update cost is paid once per optimizer step, not per micro
// batch, and grows with the model's parameters.
TEST(CostModel, UpdateCostIsPerStepAndPerParameter) {
  auto withCost = [](std::string text, double seconds) {
    test::Outcome o = test::runText(text);
    EXPECT_NE(o.plan, nullptr);
    ir::PhasePlan ph = o.plan->runs[0].phases[0];
    ph.pod.machine.chip.calibration.updateSecondsPerParameter = seconds;
    return cost::estimatePhase(ph);
  };
  auto at = [&](int ga, double seconds) {
    return withCost(bert(std::string(kPipeline4) + "replicas: 4\n", "fp16_sr",
                         "seq_len: 128; masked_tokens: 20; micro_batch: 8; gradient_accumulation: " + std::to_string(ga)),
                    seconds);
  };
  const double c = 1e-9;
  cost::PhaseEstimate few0 = at(8, 0), few = at(8, c), many0 = at(512, 0), many = at(512, c);
  const double added = few.stepTime - few0.stepTime;
  EXPECT_GT(added, 0.3);  // BERT-Large: about 335 M parameters at 1 ns each
  EXPECT_NEAR(many.stepTime - many0.stepTime, added, 1e-9);  // the same at any accumulation
  EXPECT_GT(few0.samplesPerSecond / few.samplesPerSecond, many0.samplesPerSecond / many.samplesPerSecond);
  // BERT-Base (110 M parameters) pays about a third of it.
  std::string base = bert(std::string(kPipeline4) + "replicas: 4\n");
  base.replace(base.find("bert_large on"), 10, "bert_base ");
  base.replace(base.find("encoder[17..24]"), 15, "encoder[9..12]");
  base.replace(base.find("encoder[10..17]"), 15, "encoder[6..9]");
  base.replace(base.find("encoder[3..10]"), 14, "encoder[3..6]");
  const double baseAdded = withCost(base, c).stepTime - withCost(base, 0).stepTime;
  EXPECT_GT(baseAdded, 0.2 * added);
  EXPECT_LT(baseAdded, 0.5 * added);
}

// The GW-Link latency (the machine's `gw_link_latency`, or one a
// calibration measured in its place) is paid by collectives between racks
// only, once per step of the ring: more racks, more latency.
TEST(CostModel, GwLatencyCostsOnlyAcrossRacks) {
  auto on = [](const std::string& pod, int r, double machineLatency, double calibrated = 0) {
    std::string text = bert(std::string(kPipeline4) + "replicas: " + std::to_string(r) + "\n");
    text.replace(text.find("POD64"), 5, pod);
    test::Outcome o = test::runText(text);
    EXPECT_NE(o.plan, nullptr);
    ir::PhasePlan ph = o.plan->runs[0].phases[0];
    EXPECT_DOUBLE_EQ(ph.pod.machine.gwLinkLatencySeconds, 10e-6);   // std/pods' assumption
    ph.pod.machine.gwLinkLatencySeconds = machineLatency;
    ph.pod.machine.chip.calibration.gwLatencySeconds = calibrated;
    return cost::estimatePhase(ph);
  };
  EXPECT_DOUBLE_EQ(on("POD64", 16, 1e-3).breakdown.allReduce, on("POD64", 16, 0).breakdown.allReduce);
  const double two = on("POD128", 32, 1e-3).breakdown.allReduce - on("POD128", 32, 0).breakdown.allReduce;
  const double four = on("POD256", 64, 1e-3).breakdown.allReduce - on("POD256", 64, 0).breakdown.allReduce;
  EXPECT_NEAR(two, 2 * 1e-3, 1e-9);   // 2 (racks - 1) steps
  EXPECT_NEAR(four, 6 * 1e-3, 1e-9);
  // A calibration's measured latency replaces the machine's.
  const double measured = on("POD256", 64, 1e-3, 2e-3).breakdown.allReduce - on("POD256", 64, 1e-3).breakdown.allReduce;
  EXPECT_NEAR(measured, 6 * 1e-3, 1e-9);
}

// Shapes that do not fill the AMP units or the tiles cost more per FLOP.
TEST(CostModel, MatmulShapeCost) {
  EXPECT_DOUBLE_EQ(cost::matmulShapeCost(1024, 1024, 4096, 1472), 1.0);
  EXPECT_GT(cost::matmulShapeCost(1576, 64, 197, 1472), 1.0);  // ViT's 197 tokens, padded to 200
  EXPECT_GT(cost::matmulShapeCost(1576, 197, 64, 1472), cost::matmulShapeCost(1576, 192, 64, 1472));
  EXPECT_GT(cost::matmulShapeCost(8, 1024, 1024, 1472), 1.0);  // 8 rows leave tiles idle
  // In the model: the same layers and FLOPs, with the attention's sequence
  // length declared off the AMP's groups, take longer.
  test::Outcome o = test::runText(bert(std::string(kPipeline4) + "replicas: 4\n", "fp16_sr",
                                       "seq_len: 96; masked_tokens: 20; micro_batch: 8; gradient_accumulation: 64"));
  ASSERT_NE(o.plan, nullptr);
  ir::PhasePlan even = o.plan->runs[0].phases[0], odd = even;
  for (auto& l : odd.layers)
    for (auto& a : l.attributes)
      if (a.name == "seq") a.number = 97;
  EXPECT_GT(cost::estimatePhase(odd).breakdown.compute, cost::estimatePhase(even).breakdown.compute);
}

// Image data comes over the host link: a slow enough link bounds throughput.
TEST(CostModel, HostInputBoundsImageThroughput) {
  auto rn = [](const std::string& hostBandwidth) {
    std::string text = slurp(test::sourceDir() + "/tests/published/resnet50_pod16_mlperf_v11.ipu");
    text.insert(text.find("mapping mlperf"), "machine slow = M2000 with { host_bandwidth: " + hostBandwidth +
                                                  " }\npod slowpod = POD16 with { machine: slow }\n");
    text.replace(text.find("on POD16"), 8, "on slowpod");
    return estimateOf(text);
  };
  cost::PhaseEstimate fast = rn("100 Gbps"), slow = rn("1 Gbps");
  EXPECT_EQ(fast.breakdown.hostIo, 0);
  EXPECT_GT(slow.breakdown.hostIo, 0);
  EXPECT_LT(slow.samplesPerSecond, 0.5 * fast.samplesPerSecond);
}

// The host's input pipeline (a dataset's `host_work` and `sample_bytes`)
// bounds the step when preparing or reading a step's samples takes longer
// than the pipeline computes; below that it is hidden. ResNet-50 on a POD16
// at micro batch 20, accumulation 10 and 16 replicas: each of the 4
// machines' hosts prepares 800 samples per step.
TEST(CostModel, HostInputPipelineBoundsTheStep) {
  auto rn = [](const std::string& dataset, const std::string& machine, std::vector<cost::Problem>* out = nullptr) {
    std::string text = slurp(test::sourceDir() + "/tests/published/resnet50_pod16_mlperf_v11.ipu");
    text.insert(text.find("mapping mlperf"), "dataset jpeg = imagenet with { " + dataset + " }\nmachine host = M2000 with { " +
                                                  machine + " }\npod hostpod = POD16 with { machine: host }\n");
    text.replace(text.find("on POD16"), 8, "on hostpod");
    text.replace(text.find("dataset: imagenet"), 17, "dataset: jpeg");
    test::Outcome o = test::runText(text);
    EXPECT_NE(o.plan, nullptr) << o.rendered();
    if (o.plan == nullptr) return cost::PhaseEstimate{};
    std::vector<cost::Problem> own;
    cost::PhaseEstimate e = cost::estimatePhase(o.plan->runs[0].phases[0], out ? out : &own);
    EXPECT_TRUE(out != nullptr || own.empty()) << own.front().message;
    return e;
  };
  const std::string cores = "host_cores: 32", storage = "host_storage_bandwidth: 1.5 GB/s";
  const cost::PhaseEstimate plain = rn("samples: 1281167", cores);
  EXPECT_EQ(plain.breakdown.hostIo, 0);
  // 800 x 0.1 ms / 32 cores = 2.5 ms of a step of about 100 ms: hidden, but said.
  const cost::PhaseEstimate light = rn("host_work: 0.1 ms", cores);
  EXPECT_EQ(light.breakdown.hostIo, 0);
  EXPECT_NEAR(light.samplesPerSecond, plain.samplesPerSecond, 1e-9 * plain.samplesPerSecond);
  bool said = false;
  for (const auto& a : light.assumptions) said = said || a.find("800 samples per step for each machine: 2.5 ms of host CPU") != std::string::npos;
  EXPECT_TRUE(said);
  // 10 ms and 20 ms per sample are host-bound: the step grows by 800 x 10 ms / 32.
  const cost::PhaseEstimate slow = rn("host_work: 10 ms", cores), slower = rn("host_work: 20 ms", cores);
  EXPECT_GT(slow.breakdown.hostIo, 0);
  EXPECT_LT(slow.samplesPerSecond, plain.samplesPerSecond);
  EXPECT_NEAR(slower.stepTime - slow.stepTime, 800 * 0.010 / 32, 1e-9);
  // Twice the cores prepare twice the samples.
  const cost::PhaseEstimate doubled = rn("host_work: 20 ms", "host_cores: 64");
  EXPECT_NEAR(doubled.stepTime, slow.stepTime, 1e-12 * slow.stepTime);
  // Storage reads: 800 samples of 1 MB at 1.5 GB/s per machine.
  const cost::PhaseEstimate read1 = rn("sample_bytes: 1 MB", storage), read2 = rn("sample_bytes: 2 MB", storage);
  EXPECT_GT(read1.breakdown.hostIo, 0);
  EXPECT_NEAR(read2.stepTime - read1.stepTime, 800 * 1e6 / 1.5e9, 1e-9);
  // The slowest of the host's stages bounds the step, not their sum.
  const cost::PhaseEstimate both = rn("host_work: 20 ms, sample_bytes: 500 KB", cores + ", " + storage);
  EXPECT_NEAR(both.stepTime, slower.stepTime, 1e-12 * slower.stepTime);
  // A machine that does not say how many cores prepare its samples cannot price them.
  std::vector<cost::Problem> problems;
  rn("host_work: 10 ms", "host_cores: 0", &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].code, std::string(cost::code::kMissingHardware));
  EXPECT_NE(problems[0].message.find("`host_cores`"), std::string::npos) << problems[0].message;
}

// An estimate far from every calibration row says so; one inside it does not.
TEST(CostModel, CoverageWarnings) {
  cost::PhaseEstimate inside = estimateOf(slurp(test::sourceDir() + "/tests/published/bert_large_pod64_mlperf_v11.ipu"));
  EXPECT_TRUE(inside.regimes.empty());
  std::string gpt =
      "import \"std/pods\"\nimport \"std/models/gpt\"\nimport \"std/precision\"\n"
      "mapping m for gpt2_small on POD16 {\n pipeline {\n ipu 0: embedding, decoder[0..3]\n ipu 1: decoder[3..6]\n"
      " ipu 2: decoder[6..9]\n ipu 3: decoder[9..12], lm_head\n }\n replicas: 4\n recompute: every_layer\n}\n"
      "training t {\n mapping: m\n precision: fp16_sr\n optimizer: adamw(weight_decay: 0.01)\n"
      " phase one { seq_len: 1024; micro_batch: 1; gradient_accumulation: 2048; steps: 10; lr: 0.0001 }\n}\n";
  cost::PhaseEstimate far = estimateOf(gpt);
  ASSERT_FALSE(far.regimes.empty());
  EXPECT_EQ(far.regimes[0].regime, cost::Regime::OtherModel);
  EXPECT_NE(far.regimes[0].message.find("no calibration row"), std::string::npos);
  EXPECT_GT(far.throughputHigh, far.throughputLow);  // still an interval, from every row
  // A pod size far from the BERT rows of the GC200 (16 to 128 IPUs).
  std::string one = slurp(test::sourceDir() + "/tests/published/bert_large_pod16_mlperf_v11.ipu");
  one.replace(one.find("replicas: 4"), 11, "replicas: 1");
  one.replace(one.find("on POD16"), 8, "on POD4");
  cost::PhaseEstimate small = estimateOf(one);
  bool pod = false;
  for (const auto& f : small.regimes) pod = pod || (f.regime == cost::Regime::PodSize && f.message.find("IPUs") != std::string::npos);
  EXPECT_TRUE(pod);
}

ir::PhasePlan planOf(const std::string& text) {
  test::Outcome o = test::runText(text);
  EXPECT_NE(o.plan, nullptr) << o.rendered();
  return o.plan != nullptr ? o.plan->runs.at(0).phases.at(0) : ir::PhasePlan{};
}

bool flags(const cost::PhaseEstimate& e, cost::Regime r) {
  for (const auto& f : e.regimes)
    if (f.regime == r) return true;
  return false;
}

// Each way a phase leaves the calibration rows of its kind (recorded with each
// row by `ipu calibrate`) is flagged, and widens the interval to the worst
// leave-one-group-out errors of the chip's rows; a phase inside them keeps the
// comparable rows' interval.
TEST(CostModel, RegimesOutsideTheRowsWidenTheInterval) {
  const ir::PhasePlan inside = planOf(slurp(test::sourceDir() + "/tests/published/bert_large_pod64_mlperf_v11.ipu"));
  const auto& rows = inside.pod.machine.chip.calibration.rows;
  ASSERT_FALSE(rows.empty());
  for (const auto& r : rows) EXPECT_TRUE(r.described);
  double worstHigh = 0, worstLow = 0;
  for (const auto& r : rows) worstHigh = std::max(worstHigh, r.logoError), worstLow = std::min(worstLow, r.logoError);
  const cost::PhaseEstimate base = cost::estimatePhase(inside);
  ASSERT_TRUE(base.regimes.empty());
  ASSERT_TRUE(base.errorHigh < worstHigh || base.errorLow > worstLow);  // else widening could not be seen
  auto outside = [&](auto change, cost::Regime expected) {
    ir::PhasePlan p = inside;
    change(p);
    const cost::PhaseEstimate e = cost::estimatePhase(p);
    EXPECT_TRUE(flags(e, expected)) << cost::name(expected);
    EXPECT_DOUBLE_EQ(e.errorHigh, worstHigh) << cost::name(expected);
    EXPECT_DOUBLE_EQ(e.errorLow, worstLow) << cost::name(expected);
    EXPECT_NEAR(e.throughputLow, e.samplesPerSecond / (1 + worstHigh), 1e-9 * e.samplesPerSecond);
    EXPECT_NE(e.intervalBasis.find("widened"), std::string::npos);
    EXPECT_EQ(base.intervalBasis.find("widened"), std::string::npos);
  };
  outside([](ir::PhasePlan& p) { p.mapping.phases = 4; }, cost::Regime::Phased);
  outside([](ir::PhasePlan& p) { p.mapping.recompute = ir::Recompute::None; }, cost::Regime::NoRecompute);
  outside([](ir::PhasePlan& p) { p.batch.microBatch = 1000; }, cost::Regime::MicroBatch);
  outside([](ir::PhasePlan& p) {
    for (auto& ipu : p.ipus) ipu.capacityBytes = ipu.memory.total() * 1.001;  // 99.9% full
  }, cost::Regime::MemoryOccupancy);
  // The regimes a configuration has before it is planned (what the search
  // bounds with) are the planned phase's, less memory occupancy.
  cost::Configuration c = cost::configurationOf(inside);
  EXPECT_TRUE(cost::regimesOf(c, rows).empty());
  c.phased = true;
  EXPECT_DOUBLE_EQ(cost::leastErrorHigh(c, rows), worstHigh);
}

// A phase that streams is priced again at the ends of the machine's declared
// range for the unpublished Streaming Memory bandwidth: slower at the low
// end, faster at the high end, and the interval spans both.
TEST(CostModel, StreamingBandwidthRangeMovesTheEstimate) {
  const ir::PhasePlan p = planOf(slurp(test::sourceDir() + "/examples/tiny_gpt.ipu"));
  ASSERT_FALSE(p.traffic.streaming.empty());
  EXPECT_GT(p.pod.machine.streamingBandwidthHigh, p.pod.machine.streamingBandwidth);
  const cost::PhaseEstimate e = cost::estimatePhase(p);
  ASSERT_EQ(e.sensitivities.size(), 1u);
  const cost::Sensitivity& s = e.sensitivities[0];
  EXPECT_EQ(s.range.assumption, cost::Assumption::StreamingBandwidth);
  EXPECT_LT(s.range.low, s.range.nominal);
  EXPECT_GT(s.range.high, s.range.nominal);
  EXPECT_LE(s.samplesPerSecondAtLow, e.samplesPerSecond);
  EXPECT_GE(s.samplesPerSecondAtHigh, e.samplesPerSecond);
  EXPECT_NEAR(e.throughputLow, std::min(e.samplesPerSecond, s.samplesPerSecondAtLow) / (1 + e.errorHigh),
              1e-9 * e.samplesPerSecond);
  EXPECT_NEAR(e.throughputHigh, std::max(e.samplesPerSecond, s.samplesPerSecondAtHigh) / (1 + e.errorLow),
              1e-9 * e.samplesPerSecond);
  // The same plan on a machine that declares no range is taken as exact.
  ir::PhasePlan exact = p;
  exact.pod.machine.streamingBandwidthLow = exact.pod.machine.streamingBandwidthHigh = 0;
  EXPECT_TRUE(cost::estimatePhase(exact).sensitivities.empty());
  // A plan that does not stream has nothing to re-price.
  const ir::PhasePlan resident = planOf(slurp(test::sourceDir() + "/tests/published/bert_large_pod64_mlperf_v11.ipu"));
  EXPECT_TRUE(cost::estimatePhase(resident).sensitivities.empty());
}

// A declared `software` picks its framework's fixed cost per step from the
// calibration; a framework the calibration has no row of gets the default and
// a warning.
TEST(CostModel, SoftwareSetsTheFixedCostPerStep) {
  EXPECT_EQ(cost::frameworkOf("popart sdk2.3"), "popart");
  EXPECT_EQ(cost::frameworkOf(" pytorch "), "pytorch");
  EXPECT_EQ(cost::frameworkOf(""), "");
  std::string text = slurp(test::sourceDir() + "/tests/published/bert_large_pod64_mlperf_v11.ipu");
  auto with = [&](const std::string& software, double slow, double fast) {
    std::string t = text;
    t.replace(t.find("\"popart sdk2.3\""), 15, "\"" + software + "\"");
    test::Outcome o = test::runText(t);
    EXPECT_NE(o.plan, nullptr) << o.rendered();
    ir::PhasePlan ph = o.plan->runs[0].phases[0];
    EXPECT_EQ(ph.software, software);
    hw::Calibration& cal = ph.pod.machine.chip.calibration;
    cal.stepOverheadSeconds = 0.002;
    cal.softwareStepOverhead = {{"pytorch", slow}, {"popart", fast}};
    return cost::estimatePhase(ph);
  };
  cost::PhaseEstimate torch = with("pytorch sdk3.3", 0.35, 0.02), native = with("popart sdk2.3", 0.35, 0.02),
                      unknown = with("jax sdk3.3", 0.35, 0.02);
  EXPECT_DOUBLE_EQ(torch.breakdown.overhead, 0.35);
  EXPECT_DOUBLE_EQ(native.breakdown.overhead, 0.02);
  EXPECT_DOUBLE_EQ(unknown.breakdown.overhead, 0.002);
  EXPECT_LT(torch.samplesPerSecond, native.samplesPerSecond);
  EXPECT_TRUE(native.regimes.empty());
  ASSERT_FALSE(unknown.regimes.empty());
  EXPECT_EQ(unknown.regimes[0].regime, cost::Regime::OtherFramework);
  EXPECT_NE(unknown.regimes[0].message.find("jax"), std::string::npos);
}

// The software a phase declares is judged against the rows of its kind of
// model on its chip: none declared, a framework no row of the chip ran, one
// only other models ran, and a release none of them ran are each flagged and
// widen the interval to the worst errors; the rows' own software is not.
TEST(CostModel, SoftwareOutsideTheRowsIsFlagged) {
  EXPECT_EQ(cost::releaseOf("popart sdk2.3"), "sdk2.3");
  EXPECT_EQ(cost::releaseOf("  tensorflow1   pre-sdk2.5 "), "pre-sdk2.5");
  EXPECT_EQ(cost::releaseOf("pytorch"), "");
  EXPECT_EQ(cost::releaseOf(""), "");
  // The record holds the rows of the GC200's architecture (the Bow's too):
  // BERT ran PopART (pre-SDK 2.5 to SDK 3.1), TensorFlow 1 and 2,
  // PaddlePaddle and PyTorch; ResNet-50 only TensorFlow 1.
  const ir::PhasePlan inside = planOf(slurp(test::sourceDir() + "/tests/published/bert_large_pod64_mlperf_v11.ipu"));
  const ir::PhasePlan resnet = planOf(slurp(test::sourceDir() + "/tests/published/resnet50_pod64_mlperf_v11.ipu"));
  ASSERT_EQ(inside.software, "popart sdk2.3");
  const auto& rows = inside.pod.machine.chip.calibration.rows;
  for (const auto& r : rows) EXPECT_TRUE(r.softwareRecorded);
  double worstHigh = 0;
  for (const auto& r : rows) worstHigh = std::max(worstHigh, r.logoError);
  EXPECT_TRUE(cost::estimatePhase(inside).regimes.empty());
  auto flagged = [&](const std::string& software, cost::Regime expected, const std::string& said, const ir::PhasePlan& base) {
    ir::PhasePlan p = base;
    p.software = software;
    const cost::PhaseEstimate e = cost::estimatePhase(p);
    int times = 0;
    for (const auto& f : e.regimes)
      if (f.regime == expected) {
        ++times;
        EXPECT_NE(f.message.find(said), std::string::npos) << f.message;
      }
    EXPECT_EQ(times, 1) << software << ": " << cost::name(expected);
    EXPECT_DOUBLE_EQ(e.errorHigh, worstHigh) << software;
    // Before planning too, as the search judges a group of mappings.
    cost::Configuration c = cost::configurationOf(p);
    bool before = false;
    for (const auto& f : cost::regimesOf(c, rows)) before = before || f.regime == expected;
    EXPECT_TRUE(before) << software;
  };
  flagged("", cost::Regime::NoSoftware, "declare the training's `software`", inside);
  flagged("paddlepaddle sdk2.5", cost::Regime::FrameworkOfModel, "`paddlepaddle`", resnet);
  flagged("popart sdk3.3", cost::Regime::Release, "`sdk3.3`", inside);
  flagged("jax 0.4", cost::Regime::OtherFramework, "`jax`", inside);
  // The other release the rows ran is inside them.
  ir::PhasePlan older = inside;
  older.software = "popart sdk2.1";
  EXPECT_TRUE(cost::estimatePhase(older).regimes.empty());
  // A calibration fitted before the rows' software was recorded judges none of it.
  ir::PhasePlan unrecorded = inside;
  for (auto& r : unrecorded.pod.machine.chip.calibration.rows) r.softwareRecorded = false;
  unrecorded.software = "";
  EXPECT_TRUE(cost::estimatePhase(unrecorded).regimes.empty());
}

// The framework's host-side cost is a round trip to the host, which the
// device makes once per `device_iterations` steps: declaring 8 divides it by
// 8 and changes nothing else of the step.
TEST(CostModel, DeviceIterationsDivideTheHostRoundTrip) {
  const std::string text = slurp(test::sourceDir() + "/tests/published/bert_large_pod64_mlperf_v11.ipu");
  const std::string software = "software: \"popart sdk2.3\"";
  ASSERT_NE(text.find(software), std::string::npos);
  std::string eight = text;
  eight.replace(eight.find(software), software.size(), software + "\n  device_iterations: 8");
  const ir::PhasePlan once = planOf(text), every8 = planOf(eight);
  EXPECT_EQ(once.deviceIterations, 1);
  ASSERT_EQ(every8.deviceIterations, 8);
  // The committed calibration charges no round trip (the table puts it at 0,
  // docs/cost-model.md); a user who measured their host's states it.
  ir::PhasePlan onceTimed = once, every8Timed = every8;
  for (ir::PhasePlan* p : {&onceTimed, &every8Timed}) {
    EXPECT_EQ(p->pod.machine.chip.calibration.stepOverheadSeconds, 0);
    p->pod.machine.chip.calibration.stepOverheadSeconds = 0.02;
  }
  const cost::PhaseEstimate a = cost::estimatePhase(onceTimed), b = cost::estimatePhase(every8Timed);
  ASSERT_DOUBLE_EQ(a.breakdown.overhead, 0.02);
  EXPECT_DOUBLE_EQ(b.breakdown.overhead, a.breakdown.overhead / 8);
  // Sums of a dozen terms in another order: equal to rounding (a relative 1e-12).
  EXPECT_NEAR(b.stepTime, a.stepTime - a.breakdown.overhead * 7 / 8, 1e-12 * a.stepTime);
  EXPECT_GT(b.samplesPerSecond, a.samplesPerSecond);
  // A device iteration count is whole and at least 1.
  std::string zero = text;
  zero.replace(zero.find(software), software.size(), software + "\n  device_iterations: 0");
  test::Outcome bad = test::runText(zero);
  EXPECT_EQ(bad.plan, nullptr);
  EXPECT_NE(bad.rendered().find("device_iterations"), std::string::npos) << bad.rendered();
}

// A record holds every row of its chip's architecture; a model whose rows
// all ran on another chip of it (ViT: the Bow only) is flagged on this one,
// and its interval widened, while on the Bow it is not.
TEST(CostModel, ModelMeasuredOnlyOnAnotherChipIsFlagged) {
  const std::string bow = slurp(test::sourceDir() + "/tests/published/vit_b16_bow_pod64.ipu");
  std::string gc200 = bow;
  gc200.replace(gc200.find("on BowPOD64"), 11, "on POD64");
  const ir::PhasePlan onBow = planOf(bow), onGc200 = planOf(gc200);
  ASSERT_EQ(onGc200.pod.machine.chip.name, "GC200");
  for (const auto& r : onGc200.pod.machine.chip.calibration.rows) EXPECT_FALSE(r.chip.empty());
  const cost::PhaseEstimate b = cost::estimatePhase(onBow), g = cost::estimatePhase(onGc200);
  EXPECT_FALSE(flags(b, cost::Regime::OtherChip));
  ASSERT_TRUE(flags(g, cost::Regime::OtherChip));
  for (const auto& f : g.regimes)
    if (f.regime == cost::Regime::OtherChip) {
      EXPECT_NE(f.message.find("`Bow`"), std::string::npos) << f.message;
    }
  EXPECT_GE(g.errorHigh - g.errorLow, b.errorHigh - b.errorLow);
  // BERT ran on both chips: not flagged on either.
  EXPECT_FALSE(flags(cost::estimatePhase(planOf(slurp(test::sourceDir() + "/tests/published/bert_large_pod64_mlperf_v11.ipu"))),
                     cost::Regime::OtherChip));
}

// The committed calibration has no constant per framework (a label of the
// rows it was fitted on, which did not transfer): the same configuration in
// PyTorch and PopART is priced the same, and the framework only decides the
// coverage warnings.
TEST(CostModel, NoFrameworkConstantInTheCommittedCalibration) {
  std::string text = slurp(test::sourceDir() + "/tests/published/bert_large_bow_pod64_packed_phase1.ipu");
  std::string torch = text;
  torch.replace(torch.find("\"popart sdk3.1\""), 15, "\"pytorch sdk3.2\"");
  const cost::PhaseEstimate a = estimateOf(text), b = estimateOf(torch);
  EXPECT_DOUBLE_EQ(a.stepTime, b.stepTime);
  EXPECT_TRUE(planOf(text).pod.machine.chip.calibration.softwareStepOverhead.empty());
}

// While the pipeline fills only forward passes run, and while it drains
// only backward ones: those cycles cost the work they do, less than a full
// cycle each, and nothing without a pipeline. The saving is the same at any
// accumulation, so it matters most for deep pipelines at small accumulation.
TEST(CostModel, RampCyclesCostTheWorkTheyDo) {
  auto at = [](int ga) {
    return bert(std::string(kPipeline4) + "replicas: 4\n", "fp16_sr",
                "seq_len: 128; masked_tokens: 20; micro_batch: 8; gradient_accumulation: " + std::to_string(ga));
  };
  const cost::PhaseEstimate small = estimateOf(at(16)), large = estimateOf(at(256));
  const int stages = planOf(at(16)).schedule.stages;
  ASSERT_GE(stages, 4);
  double busiest = 0;
  for (const auto& ipu : small.ipus) busiest = std::max(busiest, ipu.busy());
  ASSERT_GT(busiest, 0);
  // The ramps' 2(S - 1) cycles cost less than full cycles, and more than nothing.
  EXPECT_GT(small.breakdown.pipelineFillDrain, 0);
  EXPECT_LT(small.breakdown.pipelineFillDrain, (2.0 * stages - 2) * busiest * 0.9);
  EXPECT_NEAR(small.breakdown.pipelineFillDrain, large.breakdown.pipelineFillDrain, 1e-9);
  EXPECT_GT(small.breakdown.pipelineFillDrain / small.stepTime, large.breakdown.pipelineFillDrain / large.stepTime);
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
  truth.stepOverheadSeconds = 0;      // not fitted (calibrate.cpp says why)
  truth.updateSecondsPerParameter = 0.2e-9;
  truth.gwLatencySeconds = 0;         // the machine's
  std::vector<std::string> scripts = {"resnet50_pod16_mlperf_v11.ipu",   "resnet50_pod64_mlperf_v11.ipu",
                                      "resnet50_pod128_mlperf_v11.ipu",  "resnet50_pod256_mlperf_v11.ipu",
                                      "bert_large_pod16_mlperf_v11.ipu", "bert_large_pod64_mlperf_v11.ipu",
                                      "bert_large_pod128_mlperf_v11.ipu", "bert_large_pod16_mlperf_v10.ipu"};
  std::vector<test::Outcome> outcomes;
  for (const auto& s : scripts) {
    outcomes.push_back(test::runFile(test::sourceDir() + "/tests/published/" + s));
    ASSERT_NE(outcomes.back().plan, nullptr) << outcomes.back().rendered();
    ir::PhasePlan ph = outcomes.back().plan->runs[0].phases[0];
    ph.pod.machine.chip.calibration = truth;
    rows.push_back(cost::Measurement{s, ph, cost::estimatePhase(ph).samplesPerSecond});
  }
  cost::FitResult fit = cost::fitCalibration(rows, "synthetic", 0.5, /*leaveOneOut=*/false);
  ASSERT_EQ(fit.chips.size(), 1u);
  const hw::Calibration& got = fit.chips.begin()->second;
  EXPECT_LT(fit.maxAbsoluteError, 0.005);
  EXPECT_NEAR(got.matmulEfficiency, truth.matmulEfficiency, 0.03);
  EXPECT_NEAR(got.convEfficiency, truth.convEfficiency, 0.03);
  EXPECT_NEAR(got.updateSecondsPerParameter, truth.updateSecondsPerParameter, 0.05e-9);
  cost::FitResult again = cost::fitCalibration(rows, "synthetic", 0.5, false);
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
  // The ramp cycles are shorter than steady-state ones, and the cycles add
  // up to the pipeline time the estimate priced.
  ASSERT_EQ(tl.cycleStart.size(), static_cast<std::size_t>(tl.cycles) + 1);
  EXPECT_LT(tl.cycleStart[1] - tl.cycleStart[0], 0.9 * tl.cycleTime);
  EXPECT_NEAR(tl.cycleStart.back(), 8 * tl.cycleTime + e.breakdown.pipelineFillDrain, 1e-9 * e.stepTime);
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

// Distributed batch norm: the plan's batch_norm_statistics entries make each
// IPU's exchange longer by their rings among the group's replicas; the rest
// of the estimate stays; declaring 1 (per-replica) changes nothing.
TEST(CostModel, DistributedBatchNormAddsItsAllReducesToTheExchange) {
  auto resnet = [](const std::string& extra) {
    return "import \"std/pods\"\nimport \"std/models/resnet\"\n"
           "mapping m for resnet50 on POD16 {\n replicas: 16\n" + extra + "}\n"
           "training t {\n  mapping: m\n  optimizer: momentum(momentum: 0.9)\n"
           "  phase one { image_size: 224; micro_batch: 4; gradient_accumulation: 8; steps: 100; lr: 0.1 }\n}\n";
  };
  test::Outcome base = test::runText(resnet(""));
  test::Outcome one = test::runText(resnet(" batch_norm_replicas: 1\n"));
  test::Outcome four = test::runText(resnet(" batch_norm_replicas: 4\n"));
  test::Outcome all = test::runText(resnet(" batch_norm_replicas: all\n"));
  ASSERT_NE(base.plan, nullptr) << base.rendered();
  ASSERT_NE(four.plan, nullptr) << four.rendered();
  ASSERT_NE(all.plan, nullptr) << all.rendered();
  ASSERT_NE(one.plan, nullptr) << one.rendered();
  const ir::PhasePlan& pb = base.plan->runs[0].phases[0];
  const ir::PhasePlan& p4 = four.plan->runs[0].phases[0];
  const cost::PhaseEstimate eb = cost::estimatePhase(pb), e1 = cost::estimatePhase(one.plan->runs[0].phases[0]);
  const cost::PhaseEstimate e4 = cost::estimatePhase(p4), ea = cost::estimatePhase(all.plan->runs[0].phases[0]);
  ASSERT_TRUE(eb.ok && e1.ok && e4.ok && ea.ok);
  EXPECT_EQ(e1.stepTime, eb.stepTime);
  const ir::Collective* bn = nullptr;
  for (const auto& c : p4.traffic.collectives)
    if (c.tensors == ir::CollectiveTensors::BatchNormStatistics) bn = &c;
  ASSERT_NE(bn, nullptr);
  // ResNet-50: 53 batch-norm units (stem, 16 blocks of 3, 4 projections), 3 all-reduces each per micro batch.
  EXPECT_EQ(bn->operations, 3.0 * 53 * 8);
  for (const auto& c : pb.traffic.collectives) EXPECT_NE(c.tensors, ir::CollectiveTensors::BatchNormStatistics);
  EXPECT_GT(e4.breakdown.exchange, eb.breakdown.exchange);
  EXPECT_GT(ea.breakdown.exchange, e4.breakdown.exchange) << "a ring over 16 replicas pays more latency than over 4";
  EXPECT_DOUBLE_EQ(e4.breakdown.compute, eb.breakdown.compute);
  EXPECT_DOUBLE_EQ(e4.breakdown.allReduce, eb.breakdown.allReduce);
  EXPECT_GT(e4.stepTime, eb.stepTime);
}

TEST(LearningRate, WarmupThenDecay) {
  ir::LrSchedule lr;
  lr.peak = 1.0;
  lr.warmupSteps = 10;
  lr.decay = ir::LrDecay::Linear;
  lr.end = 0;
  EXPECT_DOUBLE_EQ(train::learningRate(lr, 0, 110), 0.1);
  EXPECT_DOUBLE_EQ(train::learningRate(lr, 9, 110), 1.0);
  EXPECT_DOUBLE_EQ(train::learningRate(lr, 10, 110), 1.0);
  EXPECT_DOUBLE_EQ(train::learningRate(lr, 60, 110), 0.5);
  lr.decay = ir::LrDecay::Cosine;
  EXPECT_NEAR(train::learningRate(lr, 60, 110), 0.5, 1e-12);
  EXPECT_NEAR(train::learningRate(lr, 35, 110), 0.5 * (1 + std::cos(std::acos(-1.0) / 4)), 1e-12);
  lr.decay = ir::LrDecay::Poly;
  lr.power = 2;
  EXPECT_NEAR(train::learningRate(lr, 60, 110), 0.25, 1e-12);
  lr.decay = ir::LrDecay::Exponential;
  lr.end = 0.01;
  EXPECT_NEAR(train::learningRate(lr, 60, 110), 0.1, 1e-12);
  lr.decay = ir::LrDecay::Constant;
  EXPECT_DOUBLE_EQ(train::learningRate(lr, 100, 110), 1.0);
}

// `--instances N` (cost::Hosting): the replicas driven by N hosts reduce on
// each instance's fabric, then through the hosts. One instance is the plain
// estimate, bit for bit; more instances move only the reduction, by the
// amount the hierarchy says (docs/cost-model.md, "Instances").
TEST(CostModel, HostInstancesPriceTheReductionThroughTheHosts) {
  test::Outcome o = test::runText(bert(std::string(kPipeline4) + "replicas: 16\n"));
  ASSERT_NE(o.plan, nullptr) << o.rendered();
  ir::PhasePlan ph = o.plan->runs[0].phases[0];
  const hw::Machine& m = ph.pod.machine;
  EXPECT_GT(m.hostNetworkBandwidth, 0) << "std/pods states the host network";
  EXPECT_GT(m.hostNetworkLatencySeconds, 0);
  std::vector<cost::Problem> problems;
  const cost::PhaseEstimate one = cost::estimatePhase(ph), same = cost::estimatePhase(ph, &problems, cost::Hosting{1});
  EXPECT_EQ(one.stepTime, same.stepTime);
  EXPECT_EQ(same.breakdown.acrossInstances, 0);
  EXPECT_EQ(same.instances, 1);

  const ir::Collective* grads = nullptr;
  for (const auto& c : ph.traffic.collectives)
    if (c.tensors == ir::CollectiveTensors::Gradients && (grads == nullptr || c.bytes > grads->bytes)) grads = &c;
  ASSERT_NE(grads, nullptr);
  double previousAcross = 0;
  for (int n : {2, 4, 16}) {
    const cost::PhaseEstimate e = cost::estimatePhase(ph, &problems, cost::Hosting{n});
    ASSERT_TRUE(problems.empty()) << problems.front().message;
    ASSERT_TRUE(e.ok);
    EXPECT_EQ(e.instances, n);
    const cost::Breakdown &a = one.breakdown, &b = e.breakdown;
    // Nothing but the reduction moves.
    EXPECT_EQ(a.compute, b.compute);
    EXPECT_EQ(a.exchange, b.exchange);
    EXPECT_EQ(a.optimizer, b.optimizer);
    EXPECT_EQ(a.streaming, b.streaming);
    // Fewer replicas share each instance's fabric ring (none with one replica each).
    EXPECT_LT(b.allReduce, a.allReduce) << n;
    if (n == 16) {
      EXPECT_EQ(b.allReduce, 0);
    }
    // Through the hosts, by hand: each IPU's 1/k share to its host and back
    // over the machine's host link, then the hosts' ring over the instance's shares.
    const double k = 16.0 / n, ipus = static_cast<double>(ph.ipusUsed) / n, share = grads->bytes / k;
    const double expected = 2 * share / (m.hostBandwidth / m.ipus) + 2 * (n - 1.0) / n * ipus * share / m.hostNetworkBandwidth +
                            2 * (n - 1.0) * m.hostNetworkLatencySeconds;
    EXPECT_NEAR(b.acrossInstances, expected, 1e-12 * expected) << n;
    EXPECT_GT(b.acrossInstances, previousAcross) << "more instances, more of the reduction crosses the hosts";
    previousAcross = b.acrossInstances;
    EXPECT_GT(e.stepTime, one.stepTime) << "the hosts' network is slower than the IPU-Links";
    EXPECT_NEAR(e.stepTime, b.total(), 1e-12 * e.stepTime);
    bool stated = false;
    for (const auto& a2 : e.assumptions) stated = stated || a2.find("host_network_bandwidth") != std::string::npos;
    EXPECT_TRUE(stated) << "the estimate states the assumed host network";
  }
  // Directional: a faster network or a shorter latency costs less.
  ir::PhasePlan faster = ph;
  faster.pod.machine.hostNetworkBandwidth *= 4;
  faster.pod.machine.hostNetworkLatencySeconds /= 4;
  EXPECT_LT(cost::estimatePhase(faster, nullptr, cost::Hosting{4}).breakdown.acrossInstances,
            cost::estimatePhase(ph, nullptr, cost::Hosting{4}).breakdown.acrossInstances);
}

// PopRun's rule (IPU5012, shared with `ipu run --instances`) and the
// hardware it needs (IPU3002) stop the estimate, pointing at the mapping.
TEST(CostModel, HostInstancesThatDoNotDivideOrLackANetworkAreRefused) {
  test::Outcome o = test::runText(bert(std::string(kPipeline4) + "replicas: 4\n"));
  ASSERT_NE(o.plan, nullptr) << o.rendered();
  ir::PhasePlan ph = o.plan->runs[0].phases[0];
  std::vector<cost::Problem> problems;
  cost::PhaseEstimate e = cost::estimatePhase(ph, &problems, cost::Hosting{3});
  EXPECT_FALSE(e.ok);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].code, std::string("IPU5012"));
  EXPECT_EQ(problems[0].message, "mapping `m` has 4 replicas, which do not divide over 3 instances");
  EXPECT_EQ(problems[0].where.line, ph.mapping.source.line);
  problems.clear();
  ph.pod.machine.hostNetworkBandwidth = 0;
  e = cost::estimatePhase(ph, &problems, cost::Hosting{2});
  EXPECT_FALSE(e.ok);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].code, std::string("IPU3002"));
  EXPECT_NE(problems[0].message.find("host_network_bandwidth"), std::string::npos);
  // Without instances the network is not needed.
  problems.clear();
  EXPECT_TRUE(cost::estimatePhase(ph, &problems).ok);
  EXPECT_TRUE(problems.empty());
}

// Distributed batch norm whose groups span instances pays the hosts'
// latency on every one of its small reductions; groups inside an instance
// cost what they cost on one host.
TEST(CostModel, BatchNormGroupsSpanningInstancesGoThroughTheHosts) {
  auto resnetPlan = [](const std::string& group) {
    test::Outcome o = test::runText("import \"std/pods\"\nimport \"std/models/resnet\"\n"
                                    "mapping m for resnet50 on POD16 {\n replicas: 16\n batch_norm_replicas: " + group + "\n}\n"
                                    "training t {\n  mapping: m\n  optimizer: momentum(momentum: 0.9)\n"
                                    "  phase one { image_size: 224; micro_batch: 4; gradient_accumulation: 8; steps: 100; lr: 0.1 }\n}\n");
    EXPECT_NE(o.plan, nullptr) << o.rendered();
    return o.plan->runs[0].phases[0];
  };
  const ir::PhasePlan four = resnetPlan("4"), all = resnetPlan("all");
  // Groups of 4 on instances of 4 replicas: no group spans two instances.
  EXPECT_EQ(cost::estimatePhase(four, nullptr, cost::Hosting{4}).breakdown.exchange, cost::estimatePhase(four).breakdown.exchange);
  // Groups of 4 on instances of 2: each spans two.
  EXPECT_GT(cost::estimatePhase(four, nullptr, cost::Hosting{8}).breakdown.exchange, cost::estimatePhase(four).breakdown.exchange);
  // The hosts' latency lands on every small reduction of a spanning group,
  // on none of a group inside an instance.
  auto slower = [](ir::PhasePlan p) {
    p.pod.machine.hostNetworkLatencySeconds *= 2;
    return p;
  };
  const double perOperation = cost::estimatePhase(slower(all), nullptr, cost::Hosting{2}).breakdown.exchange -
                              cost::estimatePhase(all, nullptr, cost::Hosting{2}).breakdown.exchange;
  const ir::Collective* bn = nullptr;
  for (const auto& c : all.traffic.collectives)
    if (c.tensors == ir::CollectiveTensors::BatchNormStatistics && all.ipus[static_cast<std::size_t>(c.ipu)].shard == 0) bn = &c;
  ASSERT_NE(bn, nullptr);
  // 2 instances: one host ring step each way per reduction (the step's
  // exchange, with one IPU per replica, is its one IPU's).
  ASSERT_EQ(std::max(1, all.mapping.pipelineIpus), 1);
  EXPECT_NEAR(perOperation, bn->operations * 2 * all.pod.machine.hostNetworkLatencySeconds, 1e-9 * perOperation);
  EXPECT_EQ(cost::estimatePhase(slower(four), nullptr, cost::Hosting{4}).breakdown.exchange,
            cost::estimatePhase(four, nullptr, cost::Hosting{4}).breakdown.exchange);
}
