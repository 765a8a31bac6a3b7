// A tiny ResNet (stdlib/models/resnet.ipu) trained by the emulator: mapping
// invariance with group norm and with per-replica batch norm, what batch norm
// changes when the micro batch changes, fp16 training, and the example
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

#include "runtime/emulator/emulator.h"
#include "tests/emulator/emulator_test_support.h"

namespace ipu::emutest {
namespace {

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
  auto phase = phaseOf(text);
  auto t = trainerFor(phase, threads);
  if (!t) return r;
  for (int i = 0; i < kSteps; ++i) {
    auto s = t->step();
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    if (!s.ok()) return r;
    r.losses.push_back(s->loss);
  }
  r.weights = t->weights();
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
