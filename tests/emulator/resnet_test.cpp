// A tiny ResNet (stdlib/models/resnet.ipu) trained by the emulator: mapping
// invariance with group norm, with per-replica and with distributed batch
// norm, what batch norm changes when the micro batch changes, batch norm's
// running statistics (their definition, evaluation, checkpoints), fp16
// training, and the example
// examples/tiny_resnet.ipu learning far above chance on held-out images.
//
// Tolerances as in invariance_test.cpp: data parallelism and accumulation
// reorder fp32 sums (a ring all-reduce instead of in-order accumulation), a
// few ulp per reordering, about 1e-7 relative in the weights after three
// steps; 2e-5 relative to max(1, |w|) is 100x that and still far below what a
// step changes (checked: over 1e-3).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "runtime/emulator/kernels/conv_kernels.h"
#include "runtime/emulator/emulator.h"
#include "tests/emulator/emulator_test_support.h"

namespace ipu::emutest {
namespace {

using emu::Mat;

constexpr int kSteps = 3;

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Result {
  std::vector<double> losses;
  emu::NamedTensors weights;
  emu::NamedTensors running;   // batch norm's running statistics
};

std::string script(const std::string& norm, const std::string& mapping, int microBatch, int accumulation,
                   const std::string& precision = "compute: fp32") {
  return "import \"std/pods\"\nimport \"std/models/resnet\"\n"
         "model tiny = resnet(blocks: [1, 1, 1, 1], width: 4, classes: 5, block: \"basic\", " + norm + ")\n"
         "mapping m for tiny on POD16 {\n" + mapping + "\n}\n"
         "precision p {\n" + precision + "\n}\n"
         "training t {\n mapping: m\n precision: p\n optimizer: momentum(momentum: 0.9, weight_decay: 0.0001, exclude: [bias, norm])\n seed: 3\n"
         " phase one { image_size: 32, micro_batch: " + std::to_string(microBatch) + ", gradient_accumulation: " +
         std::to_string(accumulation) + ", label_smoothing: 0.1, steps: 10, lr: 0.05 }\n}\n";
}

Result train(const std::string& text, int threads = 2) {
  Result r;
  const TrainedSteps run = runSteps(phaseOf(text), kSteps, threads);
  r.losses = run.losses();
  if (!run.completed) return r;
  r.weights = run.trainer->weights();
  r.running = run.trainer->runningStatistics();
  return r;
}

void expectClose(const Result& a, const Result& b, const std::string& what, double tolerance = 2e-5) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  ASSERT_EQ(a.losses.size(), static_cast<std::size_t>(kSteps)) << what;
  for (std::size_t i = 0; i < a.losses.size(); ++i) EXPECT_NEAR(a.losses[i], b.losses[i], tolerance * std::abs(b.losses[i])) << what << " step " << i;
  const double d = maxRelativeDifference(a.weights, b.weights);
  EXPECT_LT(d, tolerance) << what;
  std::printf("%s: max relative weight difference %.3g\n", what.c_str(), d);
}

const char* kGroup = "norm: \"group\", norm_groups: 2";
const char* kBatch = "norm: \"batch\"";

TEST(ResNet, GroupNormIsMappingInvariant) {
  const Result one = train(script(kGroup, "", 2, 16));
  ASSERT_EQ(one.losses.size(), static_cast<std::size_t>(kSteps));
  auto t = trainerFor(phaseOf(script(kGroup, "", 2, 16)));
  ASSERT_TRUE(t);
  EXPECT_GT(maxRelativeDifference(t->weights(), one.weights), 1e-3) << "the steps must move the weights";
  expectClose(train(script(kGroup, "replicas: 16", 2, 1)), one, "group norm: 16 replicas x 1 vs 1 x 16");
  expectClose(train(script(kGroup, "replicas: 4", 2, 4)), one, "group norm: 4 replicas x 4 vs 1 x 16");
  // Larger micro batches: group norm's statistics are per sample, so only
  // the order of sums changes.
  expectClose(train(script(kGroup, "replicas: 2", 8, 2)), one, "group norm: micro batch 8 vs 2");
}

TEST(ResNet, PipelineAndRecomputationAreBitExact) {
  const Result ref = train(script(kBatch, "replicas: 2", 4, 2));
  ASSERT_EQ(ref.losses.size(), static_cast<std::size_t>(kSteps));
  const std::string pipeline = "replicas: 2\n pipeline {\n ipu 0: stem, stage1[0], stage2[0]\n ipu 1: stage3[0], stage4[0], head\n }";
  for (const std::string& mapping : {pipeline, std::string("replicas: 2\n recompute: every_layer"),
                                     pipeline + "\n recompute: stage_inputs"}) {
    const Result r = train(script(kBatch, mapping, 4, 2));
    ASSERT_EQ(r.losses.size(), ref.losses.size()) << mapping;
    for (std::size_t i = 0; i < r.losses.size(); ++i) EXPECT_EQ(r.losses[i], ref.losses[i]) << mapping;
    EXPECT_EQ(maxRelativeDifference(r.weights, ref.weights), 0.0) << mapping;
  }
}

// Batch norm's statistics are per micro batch on one replica: replicas x
// accumulation with the same micro batch normalise the same groups of
// samples (invariant), a different micro batch does not (documented in
// docs/emulator.md, "Normalisation").
TEST(ResNet, PerReplicaBatchNormDependsOnTheMicroBatchOnly) {
  const Result one = train(script(kBatch, "", 4, 4));
  expectClose(train(script(kBatch, "replicas: 4", 4, 1)), one, "batch norm: 4 replicas x 1 vs 1 x 4");
  const Result bigger = train(script(kBatch, "", 8, 2));
  ASSERT_EQ(bigger.losses.size(), one.losses.size());
  EXPECT_GT(std::abs(bigger.losses[0] - one.losses[0]), 1e-4 * std::abs(one.losses[0]))
      << "batch norm over 8 samples must differ from over 4";
  EXPECT_GT(maxRelativeDifference(bigger.weights, one.weights), 1e-4);
}

// Distributed batch norm (`batch_norm_replicas`): statistics that span the
// same samples give the same curve, whatever the replicas and micro batches
// (replica groups are consecutive, so without accumulation replicas 2q and
// 2q + 1 with micro batch 4 hold the 8 samples of replica q with micro batch 8). Only the order of
// the sums changes: the tolerance of the other invariance tests. The running
// statistics follow (they average the step's global batch).
TEST(ResNet, DistributedBatchNormIsMappingInvariant) {
  const Result one = train(script(kBatch, "", 16, 1));
  ASSERT_EQ(one.losses.size(), static_cast<std::size_t>(kSteps));
  ASSERT_FALSE(one.running.empty());
  const auto expectSame = [&](const Result& r, const Result& ref, const std::string& what) {
    expectClose(r, ref, what);
    const double d = maxRelativeDifference(r.running, ref.running);
    EXPECT_LT(d, 2e-5) << what << ": running statistics";
    std::printf("%s: max relative running-statistics difference %.3g\n", what.c_str(), d);
  };
  expectSame(train(script(kBatch, "replicas: 4\n batch_norm_replicas: 4", 4, 1)), one, "batch norm over 4 replicas x 4 vs 1 x 16");
  expectSame(train(script(kBatch, "replicas: 16\n batch_norm_replicas: all", 1, 1)), one, "batch norm over all 16 replicas x 1 vs 1 x 16");
  expectSame(train(script(kBatch, "replicas: 4\n batch_norm_replicas: 2", 4, 1)), train(script(kBatch, "replicas: 2", 8, 1)),
             "batch norm over pairs of replicas x 4 vs 2 replicas x 8");
  // With accumulation, a group's micro batch m is not one replica's micro
  // batch of 8 (replica r's micro batch m holds samples (r GA + m) MB ...):
  // other samples share statistics, and the curve differs.
  const Result accumulated = train(script(kBatch, "replicas: 4\n batch_norm_replicas: 2", 4, 2));
  ASSERT_EQ(accumulated.losses.size(), static_cast<std::size_t>(kSteps));
  EXPECT_GT(maxRelativeDifference(accumulated.weights, train(script(kBatch, "replicas: 2", 8, 2)).weights), 1e-4);
  // Per-replica batch norm over the same replicas normalises smaller sets:
  // a different curve, as batch norm predicts.
  const Result perReplica = train(script(kBatch, "replicas: 4", 4, 1));
  ASSERT_EQ(perReplica.losses.size(), one.losses.size());
  EXPECT_GT(std::abs(perReplica.losses[0] - one.losses[0]), 1e-4 * std::abs(one.losses[0]));
  EXPECT_GT(maxRelativeDifference(perReplica.weights, one.weights), 1e-4);
}

// Pipelines, recomputation (which must reuse the forward pass's statistics)
// and the number of host threads change nothing, also with statistics
// spanning replicas, in fp32 and fp16.
TEST(ResNet, DistributedBatchNormPipelineRecomputeAndThreadsAreBitExact) {
  const std::string pipeline = "\n pipeline {\n ipu 0: stem, stage1[0], stage2[0]\n ipu 1: stage3[0], stage4[0], head\n }";
  for (const std::string& precision : {std::string("compute: fp32"), std::string("compute: fp16\n loss_scale: 64")}) {
    for (const std::string& span : {std::string("batch_norm_replicas: 2"), std::string("batch_norm_replicas: all")}) {
      const std::string base = "replicas: 4\n " + span;
      const Result ref = train(script(kBatch, base, 2, 2, precision), 2);
      ASSERT_EQ(ref.losses.size(), static_cast<std::size_t>(kSteps)) << precision << " " << span;
      for (const auto& [mapping, threads] : std::vector<std::pair<std::string, int>>{
               {base, 1}, {base, 3}, {base + pipeline, 2}, {base + pipeline, 1}, {base + "\n recompute: every_layer", 2},
               {base + pipeline + "\n recompute: stage_inputs", 2}, {base + "\n recompute: every_layer", 1}}) {
        const Result r = train(script(kBatch, mapping, 2, 2, precision), threads);
        const std::string what = precision + " | " + mapping + " | threads " + std::to_string(threads);
        ASSERT_EQ(r.losses.size(), ref.losses.size()) << what;
        for (std::size_t i = 0; i < r.losses.size(); ++i) EXPECT_EQ(r.losses[i], ref.losses[i]) << what;
        EXPECT_EQ(maxRelativeDifference(r.weights, ref.weights), 0.0) << what;
        EXPECT_EQ(maxRelativeDifference(r.running, ref.running), 0.0) << what;
      }
    }
  }
}

// The running statistics after one step are PyTorch's BatchNorm2d's after
// one forward pass over the global batch (momentum 0.1, unbiased variance):
// checked on the stem, whose input is the images themselves, so its batch
// statistics can be computed here from the batch and the initial weights;
// they do not depend on how the global batch was split, even with
// per-replica statistics (the step's sets combine into the global batch).
TEST(ResNet, RunningStatisticsArePyTorchsOverTheGlobalBatch) {
  for (const std::string& mapping : {std::string(""), std::string("replicas: 4"), std::string("replicas: 4\n batch_norm_replicas: all")}) {
    const int micro = mapping.empty() ? 16 : 4;
    auto t = trainerFor(phaseOf(script(kBatch, mapping, micro, 1)));
    ASSERT_TRUE(t);
    const auto batches = t->batches(0);
    Mat w;
    for (const auto& [name, m] : t->weights())
      if (name == "stem.conv.w") w = m;
    ASSERT_EQ(w.rows(), 4);
    ASSERT_TRUE(t->step().ok());
    // The stem's convolution (3 -> 4 channels, 7x7/2, padding 3) over every sample of the step.
    emu::ConvGeometry geo{3, 4, 32, 7, 2, 3, 1};
    const int P = geo.outSize() * geo.outSize();
    std::vector<double> sum(4, 0.0), sq(4, 0.0);
    double n = 0;
    std::vector<Mat> outs;
    for (const auto& mb : batches) {
      emu::Numerics nx;
      outs.push_back(emu::conv2d(mb.features, w, geo, nx));
    }
    for (const Mat& a : outs)
      for (Eigen::Index s = 0; s < a.rows(); ++s)
        for (int c = 0; c < 4; ++c)
          for (int p = 0; p < P; ++p) sum[static_cast<std::size_t>(c)] += a(s, c * P + p);
    n = static_cast<double>(batches.size()) * micro * P;
    for (const Mat& a : outs)
      for (Eigen::Index s = 0; s < a.rows(); ++s)
        for (int c = 0; c < 4; ++c)
          for (int p = 0; p < P; ++p) {
            const double d = a(s, c * P + p) - sum[static_cast<std::size_t>(c)] / n;
            sq[static_cast<std::size_t>(c)] += d * d;
          }
    Mat mean, var;
    for (const auto& [name, m] : t->runningStatistics()) {
      if (name == "running_mean/stem.conv.norm") mean = m;
      if (name == "running_var/stem.conv.norm") var = m;
    }
    ASSERT_EQ(mean.cols(), 4) << mapping;
    ASSERT_EQ(var.cols(), 4) << mapping;
    for (int c = 0; c < 4; ++c) {
      const double m = sum[static_cast<std::size_t>(c)] / n, v = sq[static_cast<std::size_t>(c)] / (n - 1);
      EXPECT_NEAR(mean(0, c), 0.1 * m, 1e-5 * (1 + std::abs(m))) << mapping << " channel " << c;
      EXPECT_NEAR(var(0, c), 0.9 + 0.1 * v, 1e-5 * (1 + v)) << mapping << " channel " << c;
      EXPECT_GT(std::abs(var(0, c) - 1.0f), 1e-4) << "the step must move the running variance";
    }
  }
}

// Held-out evaluation normalises with the running statistics, not with the
// evaluation batch's: changing them changes the result, and the result does
// not depend on the evaluation's micro batch. They survive a checkpoint; a
// checkpoint without them (written before the emulator kept them) still loads.
TEST(ResNet, EvaluationUsesRunningStatisticsAndCheckpointsKeepThem) {
  const std::string text = script(kBatch, "", 8, 1);
  auto t = trainerFor(phaseOf(text));
  ASSERT_TRUE(t);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(t->step().ok());
  const auto before = t->evaluate(64);
  ASSERT_TRUE(before.count("loss"));

  // Same weights and statistics, micro batch 1: each sample is normalised
  // alone, which batch statistics could not do (the variance of one sample's
  // values per channel would be the only thing left), yet the result is the same.
  auto single = trainerFor(phaseOf(script(kBatch, "", 1, 8)));
  ASSERT_TRUE(single);
  ASSERT_TRUE(single->restore(t->checkpoint()).ok());
  const auto alone = single->evaluate(64);
  EXPECT_EQ(alone.at("accuracy"), before.at("accuracy"));
  EXPECT_NEAR(alone.at("loss"), before.at("loss"), 1e-5 * before.at("loss"));

  // Shifted running means change what evaluation computes.
  emu::NamedTensors shifted = t->runningStatistics();
  ASSERT_FALSE(shifted.empty());
  for (auto& [name, m] : shifted)
    if (name.rfind("running_mean/", 0) == 0) m.array() += 0.5f;
  auto u = trainerFor(phaseOf(text));
  ASSERT_TRUE(u->restore(t->checkpoint()).ok());
  EXPECT_EQ(maxRelativeDifference(u->runningStatistics(), t->runningStatistics()), 0.0) << "a checkpoint keeps them";
  EXPECT_EQ(u->evaluate(64).at("loss"), before.at("loss"));
  ASSERT_TRUE(u->setRunningStatistics(shifted).ok());
  EXPECT_GT(std::abs(u->evaluate(64).at("loss") - before.at("loss")), 1e-4 * before.at("loss"));

  // An old checkpoint: no running statistics; it loads, they keep their values.
  emu::TensorFile old = t->checkpoint();
  std::vector<std::pair<std::string, Mat>> kept;
  for (auto& tensor : old.tensors)
    if (tensor.first.rfind("running_", 0) != 0) kept.push_back(tensor);
  ASSERT_LT(kept.size(), old.tensors.size());
  old.tensors = kept;
  auto v = trainerFor(phaseOf(text));
  const emu::NamedTensors initial = v->runningStatistics();
  ASSERT_TRUE(v->restore(old).ok());
  EXPECT_EQ(maxRelativeDifference(v->runningStatistics(), initial), 0.0);
  EXPECT_EQ(maxRelativeDifference(v->weights(), t->weights()), 0.0);
}

TEST(ResNet, Fp16TrainingTracksFp32) {
  const Result full = train(script(kGroup, "replicas: 2", 4, 2));
  const Result half = train(script(kGroup, "replicas: 2", 4, 2, "compute: fp16\n loss_scale: 64"));
  ASSERT_EQ(half.losses.size(), full.losses.size());
  for (std::size_t i = 0; i < half.losses.size(); ++i) {
    EXPECT_TRUE(std::isfinite(half.losses[i]));
    EXPECT_NEAR(half.losses[i], full.losses[i], 0.02 * full.losses[i]) << "step " << i;
    if (i == 0) {
      EXPECT_NE(half.losses[i], full.losses[i]) << "fp16 must round something";
    }
  }
}

// The example trains on synthetic images to held-out accuracy far above
// chance (10 classes: 0.1) in well under a minute.
TEST(ResNet, ExampleLearnsFarAboveChance) {
  const std::string path = sourceDir() + "/examples/tiny_resnet.ipu";
  ir::ExecutionPlan plan = planOf(readText(path));
  ASSERT_EQ(plan.runs.size(), 1u);
  emu::Options o;
  o.hostThreads = 2;
  auto out = emu::run(plan.runs[0], o);
  ASSERT_TRUE(out.ok()) << out.error().code << " " << out.error().message;
  ASSERT_EQ(out->phases.size(), 1u);
  const auto& eval = out->phases[0].evaluation;
  ASSERT_TRUE(eval.count("accuracy"));
  std::printf("tiny_resnet: held-out accuracy %.3f (baseline %.3f), loss %.3f\n", eval.at("accuracy"), eval.at("baseline"), eval.at("loss"));
  EXPECT_GT(eval.at("accuracy"), 0.6);
  EXPECT_LT(eval.at("baseline"), 0.2);
}

}  // namespace
}  // namespace ipu::emutest
