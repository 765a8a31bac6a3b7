// Phased execution executed (runtime/ir/phased.h): with `phases: k` or
// `weights: streaming`, each segment's weights come on chip from Streaming
// Memory for its forward run and its backward run, every layer's input waits
// in Streaming Memory for its backward pass, and the accumulators go out after
// each backward run. The proofs:
// - the same mapping with and without phases trains to bit-identical losses
//   and weights (the order of every sum is the same; only where tensors wait
//   changes);
// - what the emulator moves to and from Streaming Memory, and gathers across
//   replicas, is the plan's ir::Traffic, byte for byte;
// - what a phase's weights and accumulators occupy is the plan's
//   ir::Ipu::phaseBytes, and the phase's whole peak is below the chip's
//   capacity; a phase that does not fit fails.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "runtime/emulator/emulator.h"
#include "runtime/emulator/error.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/ir/phased.h"
#include "tests/emulator/emulator_test_support.h"

namespace ipu::emutest {
namespace {

constexpr int kSteps = 3;

const char* const kTwoStages = "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }";
const char* const kHeadsBack = "pipeline {\n ipu 0: embedding, encoder[0], mlm_head, nsp_head\n ipu 1: encoder[1]\n }";

struct Case {
  const char* what;
  std::string mapping;   // without the phased-execution lines
  std::string phased;    // the lines that make it phased
  std::string optimizer = "adamw(weight_decay: 0.01, exclude: [bias, norm])";
  std::string precision = "compute: fp32";
};

std::vector<Case> cases() {
  return {
      {"1 IPU, 2 phases", "", "phases: 2"},
      {"1 IPU, 3 phases, LAMB", "", "phases: 3", "lamb(weight_decay: 0.01, exclude: [bias, norm])"},
      {"1 IPU, weights: streaming", "", "weights: streaming"},
      {"2 stages, 2 phases, 2 replicas", std::string(kTwoStages) + "\n replicas: 2", "phases: 2"},
      {"3 stages on 2 IPUs, 2 phases", kHeadsBack, "phases: 2"},
      {"2 replicas, 2 phases, RTS of weights and optimizer state", "replicas: 2\n replicated_tensor_sharding: [weights, optimizer_state]",
       "phases: 2"},
      {"4 replicas, weights: streaming, RTS of the optimizer state", "replicas: 4\n replicated_tensor_sharding: optimizer_state",
       "weights: streaming"},
      {"2 stages, 2 phases, fp16 with stochastic rounding", kTwoStages, "phases: 2", "adamw(weight_decay: 0.01, exclude: [bias, norm])",
       "compute: fp16\n weights: fp16\n accumulators: fp16\n stochastic_rounding: true\n loss_scale: 1024"},
      {"2 replicas, 2 phases, LAMB, fp16 weights with fp32 master weights, RTS of the state", "replicas: 2\n replicated_tensor_sharding: optimizer_state",
       "phases: 2", "lamb(weight_decay: 0.01, exclude: [bias, norm])",
       "compute: fp16\n weights: fp16\n master_weights: fp32\n loss_scale: 1024"},
      {"1 IPU, 2 phases, LARS with momentum", "", "phases: 2", "lars(momentum: 0.9, weight_decay: 0.0001, exclude: [bias, norm])"},
      {"2 stages, 2 phases, recompute every layer", std::string(kTwoStages) + "\n recompute: every_layer", "phases: 2"},
  };
}

TinyBert bertFor(const Case& c, bool phased) {
  TinyBert tb;
  tb.mapping = c.mapping + (phased ? "\n " + c.phased : std::string());
  tb.optimizer = c.optimizer;
  tb.precision = c.precision;
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 2\n gradient_accumulation: 3\n steps: 10\n lr: 0.002";
  return tb;
}

struct Result {
  std::vector<double> losses;
  emu::NamedTensors weights;
  emu::NamedTensors gradients;
  std::map<std::string, double> evaluation;
};

Result train(const ir::PhasePlan& phase) {
  Result r;
  const TrainedSteps run = runSteps(phase, kSteps);
  r.losses = run.losses();
  if (!run.completed) return r;
  EXPECT_TRUE(run.trainer->copiesAgree());
  r.weights = run.trainer->weights();
  r.gradients = run.trainer->gradients();
  r.evaluation = run.trainer->evaluate(16);
  return r;
}

TEST(Phased, TheSameMappingWithoutPhasesIsBitIdentical) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    const ir::PhasePlan with = phaseOf(bertFor(c, true).script());
    const ir::PhasePlan without = phaseOf(bertFor(c, false).script());
    ASSERT_TRUE(ir::isPhased(with.mapping));
    ASSERT_FALSE(ir::isPhased(without.mapping));
    const Result a = train(with), b = train(without);
    ASSERT_EQ(a.losses.size(), static_cast<std::size_t>(kSteps));
    ASSERT_EQ(b.losses.size(), static_cast<std::size_t>(kSteps));
    for (int i = 0; i < kSteps; ++i) EXPECT_EQ(a.losses[static_cast<std::size_t>(i)], b.losses[static_cast<std::size_t>(i)]) << "step " << i;
    EXPECT_EQ(maxRelativeDifference(a.weights, b.weights), 0.0);
    EXPECT_EQ(maxRelativeDifference(a.gradients, b.gradients), 0.0);
    EXPECT_EQ(a.evaluation, b.evaluation);
    // Three steps moved the weights: the comparison is not between two initialisations.
    auto fresh = trainerFor(without);
    ASSERT_TRUE(fresh);
    EXPECT_GT(maxRelativeDifference(a.weights, fresh->weights()), 1e-4);
  }
}

// Tensor sharding and phases together: each segment's weights (split over
// the shard group where the kernel shards them) come on chip per run. The
// per-IPU figures differ from the plan's at t > 1 (docs/emulator.md,
// "Limitations"), the results must not.
TEST(Phased, ShardedSegmentsAreBitIdentical) {
  Case c{"t = 2, 2 stages, 2 phases", std::string(kTwoStages) + "\n shard: 2", "phases: 2"};
  const ir::PhasePlan with = phaseOf(bertFor(c, true).script()), without = phaseOf(bertFor(c, false).script());
  ASSERT_EQ(with.mapping.shard, 2);
  const Result a = train(with), b = train(without);
  ASSERT_EQ(a.losses.size(), static_cast<std::size_t>(kSteps));
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(maxRelativeDifference(a.weights, b.weights), 0.0);
  EXPECT_EQ(a.evaluation, b.evaluation);
}

// A ResNet whose batch norm spans 2 of 4 replicas: the replicas meet inside
// every segment run's forward and backward passes, and the backward run's
// recomputation normalises with the statistics the forward run recorded.
TEST(Phased, DistributedBatchNormIsBitIdentical) {
  auto resnet = [](const std::string& phased) {
    return phaseOf(
        "import \"std/pods\"\nimport \"std/models/resnet\"\n"
        "model tiny = resnet(blocks: [1, 1, 1, 1], width: 4, classes: 5, block: \"basic\")\n"
        "mapping m for tiny on POD16 {\n replicas: 4\n batch_norm_replicas: 2\n " + phased + "\n}\n"
        "training t {\n mapping: m\n optimizer: lars(momentum: 0.9, weight_decay: 0.0001, exclude: [bias, norm])\n seed: 3\n"
        " phase one { image_size: 32, micro_batch: 2, gradient_accumulation: 2, steps: 10, lr: 0.05 }\n}\n");
  };
  const ir::PhasePlan with = resnet("phases: 3"), without = resnet("");
  ASSERT_TRUE(ir::isPhased(with.mapping));
  const Result a = train(with), b = train(without);
  ASSERT_EQ(a.losses.size(), static_cast<std::size_t>(kSteps));
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(maxRelativeDifference(a.weights, b.weights), 0.0);
  EXPECT_EQ(a.evaluation, b.evaluation);   // with the running statistics
  auto fresh = trainerFor(without);
  ASSERT_TRUE(fresh);
  EXPECT_GT(maxRelativeDifference(a.weights, fresh->weights()), 1e-4);
}

double relativeGap(double a, double b) { return std::abs(a - b) / std::max(1.0, std::abs(b)); }

TEST(Phased, StreamingMemoryTrafficIsThePlans) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    const ir::PhasePlan ph = phaseOf(bertFor(c, true).script());
    const int R = std::max(1, ph.mapping.replicas);
    auto t = trainerFor(ph);
    ASSERT_TRUE(t);
    auto step = t->step();
    ASSERT_TRUE(step.ok()) << step.error().message;
    const emu::StepTraffic& moved = t->lastStepTraffic();
    ASSERT_EQ(ph.traffic.streaming.size(), ph.ipus.size());
    ASSERT_EQ(moved.streamed.size(), static_cast<std::size_t>(R));
    // Without recomputation the plan streams the stash a layer keeps (its
    // activations); the emulator recomputes each layer from its streamed
    // input instead (docs/emulator.md, "Phased execution"), so what it moves
    // is the plan's of the same mapping with `recompute: every_layer`, and
    // the plan without recomputation moves more.
    ir::PhasePlan recomputed = ph;
    if (ph.mapping.recompute == ir::Recompute::None) {
      Case every = c;
      every.mapping += "\n recompute: every_layer";
      recomputed = phaseOf(bertFor(every, true).script());
      ASSERT_EQ(recomputed.traffic.streaming.size(), ph.traffic.streaming.size());
    }
    const bool trustRatio = ph.optimizer.kind == ir::OptimizerKind::Lamb || ph.optimizer.kind == ir::OptimizerKind::Lars;
    for (const auto& plan : ph.traffic.streaming) {
      SCOPED_TRACE("IPU " + std::to_string(plan.ipu));
      const std::size_t i = static_cast<std::size_t>(plan.ipu);
      EXPECT_GT(plan.weights, 0);
      EXPECT_GT(plan.activations, 0);
      // Every replica moves the same activations and accumulators; with RTS
      // each moves its share of the weights, the update and the state, and
      // the shares add up to the plan's figure times the replicas.
      ir::StreamingTraffic sum;
      for (int r = 0; r < R; ++r) {
        const ir::StreamingTraffic& m = moved.streamed[static_cast<std::size_t>(r)][i];
        const ir::StreamingTraffic& inputs = recomputed.traffic.streaming[i];
        EXPECT_EQ(m.activations, inputs.activations) << "replica " << r;
        if (ph.mapping.recompute == ir::Recompute::None) {
          EXPECT_GT(plan.activations, inputs.activations) << "replica " << r;
        }
        EXPECT_EQ(m.gradients, plan.gradients) << "replica " << r;
        if (!ph.mapping.rtsWeights) {
          EXPECT_EQ(m.weights, plan.weights) << "replica " << r;
        }
        sum.weights += m.weights;
        sum.update += m.update;
        sum.optimizerState += m.optimizerState;
      }
      EXPECT_LT(relativeGap(sum.weights, R * plan.weights), 1e-12);
      EXPECT_LT(relativeGap(sum.update, R * plan.update), 1e-12);
      // LAMB's two passes (its norms first, then the update) each move what
      // they use; both read the fp32 master weights when there are some,
      // which the plan does not price (docs/emulator.md).
      double masterRead = 0;
      if (trustRatio && ph.precision.masterWeights)
        for (int r = 0; r < R; ++r) masterRead += 4 * t->ipuParameters()[i] / (ph.mapping.rtsOptimizerState ? R : 1);
      EXPECT_LT(relativeGap(sum.optimizerState, R * plan.optimizerState + masterRead), 1e-12);
    }
    // Across replicas: the gradients' reduction, and the gathers that assemble
    // sharded weights as they load (then no gather of updated weights).
    for (const auto& ipu : ph.ipus)
      for (int r = 0; r < R; ++r) {
        const std::size_t i = static_cast<std::size_t>(ipu.index);
        double streamedGather = 0, updatedGather = 0;
        for (const auto& col : ph.traffic.collectives) {
          if (col.ipu != ipu.index) continue;
          if (col.tensors == ir::CollectiveTensors::StreamedWeights) streamedGather += col.bytes;
          if (col.tensors == ir::CollectiveTensors::UpdatedWeights) updatedGather += col.bytes;
        }
        EXPECT_EQ(moved.gatheredStreamed[static_cast<std::size_t>(r)][i], streamedGather) << "replica " << r;
        EXPECT_EQ(moved.gathered[static_cast<std::size_t>(r)][i], updatedGather) << "replica " << r;
        if (R > 1 && ph.mapping.rtsWeights) {
          EXPECT_GT(streamedGather, 0);
        }
      }
  }
}

TEST(Phased, PhaseMemoryIsThePlans) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    const ir::PhasePlan ph = phaseOf(bertFor(c, true).script());
    const ir::PhasePlan flat = phaseOf(bertFor(c, false).script());
    auto t = trainerFor(ph);
    auto u = trainerFor(flat);
    ASSERT_TRUE(t && u);
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(t->step().ok());
      ASSERT_TRUE(u->step().ok());
    }
    const auto params = t->phaseParameterBytes();
    const auto peaks = t->phaseMemoryBytes();
    ASSERT_EQ(params.size(), ph.ipus.size());
    for (const auto& ipu : ph.ipus) {
      SCOPED_TRACE("IPU " + std::to_string(ipu.index));
      const auto& measured = params[static_cast<std::size_t>(ipu.index)];
      ASSERT_FALSE(ipu.phaseBytes.empty());
      ASSERT_LE(ipu.phaseBytes.size(), measured.size());
      int used = 0;
      for (std::size_t p = 0; p < ipu.phaseBytes.size(); ++p) {
        EXPECT_EQ(measured[p], ipu.phaseBytes[p]) << "phase " << p;
        if (ipu.phaseBytes[p] > 0) ++used;
        EXPECT_LT(peaks[static_cast<std::size_t>(ipu.index)][p], ipu.capacityBytes) << "phase " << p;
      }
      EXPECT_GE(used, 2);
      // Only a segment's weights (and the next one's) are on chip at a time.
      EXPECT_LT(t->ipuMemoryBytes()[static_cast<std::size_t>(ipu.index)], u->ipuMemoryBytes()[static_cast<std::size_t>(ipu.index)]);
    }
    EXPECT_GT(t->streamingBytes(), u->streamingBytes());
  }
}

TEST(Phased, EveryPhaseOfTheRequestedCountIsUsed) {
  // `phases: 4` on a 7-layer IPU (embedding, two encoder layers of attention
  // and FFN, two heads) makes four phases, balanced by weight, in layer order.
  TinyBert tb;
  tb.mapping = "phases: 4";
  const ir::PhasePlan ph = phaseOf(tb.script());
  std::vector<int> phases;
  for (const auto& l : ph.layers) phases.push_back(l.phase);
  ASSERT_EQ(phases.size(), 7u);
  EXPECT_EQ(phases.front(), 0);
  EXPECT_EQ(phases.back(), 3);
  for (std::size_t i = 1; i < phases.size(); ++i) EXPECT_LE(phases[i] - phases[i - 1], 1) << i;
  for (std::size_t i = 1; i < phases.size(); ++i) EXPECT_GE(phases[i], phases[i - 1]) << i;
  EXPECT_EQ(ir::phaseSegments(ph).size(), 4u);
  EXPECT_EQ(ph.ipus[0].phaseBytes.size(), 4u);
}

TEST(Phased, APhaseThatDoesNotFitFails) {
  Case c = cases()[0];
  ir::PhasePlan ph = phaseOf(bertFor(c, true).script());
  auto probe = trainerFor(ph);
  ASSERT_TRUE(probe);
  ASSERT_TRUE(probe->step().ok());
  const auto peaks = probe->phaseMemoryBytes()[0];
  const double largest = *std::max_element(peaks.begin(), peaks.end());
  const double smallest = *std::min_element(peaks.begin(), peaks.end());
  ASSERT_LT(smallest, largest);
  ph.ipus[0].capacityBytes = (smallest + largest) / 2;
  auto t = trainerFor(ph);
  ASSERT_TRUE(t);
  auto step = t->step();
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.error().code, emu::code::kIpuMemory);
  EXPECT_NE(step.error().message.find("execution phase"), std::string::npos) << step.error().message;
}

TEST(Phased, ACheckpointResumesBitIdentically) {
  Case c = cases()[5];  // RTS of the weights: each replica's share is in its own Streaming Memory
  const ir::PhasePlan ph = phaseOf(bertFor(c, true).script());
  auto straight = trainerFor(ph);
  auto first = trainerFor(ph);
  ASSERT_TRUE(straight && first);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(straight->step().ok());
  ASSERT_TRUE(first->step().ok());
  const emu::TensorFile saved = first->checkpoint();
  auto resumed = trainerFor(ph);
  ASSERT_TRUE(resumed);
  ASSERT_TRUE(resumed->restore(saved).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(resumed->step().ok());
  EXPECT_EQ(maxRelativeDifference(resumed->weights(), straight->weights()), 0.0);
}

// `ipu run` tells the user what a phase moved through Streaming Memory per
// step, beside the plan's figure: the observer receives both at the phase's end.
TEST(Phased, TheRunReportsTheStreamedBytesBesideThePlans) {
  struct Capture : train::Observer {
    std::vector<train::PhaseInfo> ends;
    train::StopRequest phaseEnd(train::Source, const train::PhaseInfo& info) override {
      ends.push_back(info);
      return {};
    }
  };
  const std::vector<Case> all = cases();
  for (int which : {0, 5, 6, 10}) {   // 1 IPU; RTS of weights and state; RTS of the state only; recomputation
    const Case& c = all[static_cast<std::size_t>(which)];
    SCOPED_TRACE(c.what);
    TinyBert tb = bertFor(c, true);
    tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 2\n gradient_accumulation: 3\n steps: 2\n lr: 0.002";
    const ir::ExecutionPlan plan = planOf(tb.script());
    ASSERT_EQ(plan.runs.size(), 1u);
    Capture capture;
    emu::Options o;
    o.hostThreads = 2;
    o.observer = &capture;
    o.evaluationSamples = 8;
    auto out = emu::run(plan.runs[0], o);
    ASSERT_TRUE(out.ok()) << out.error().message;
    ASSERT_EQ(capture.ends.size(), 1u);
    const train::PhaseInfo& end = capture.ends[0];
    ASSERT_TRUE(train::measured(end.streamedBytesPerStep));
    EXPECT_GT(end.streamedBytesPerStep, 0);
    const bool recomputes = plan.runs[0].phases[0].mapping.recompute != ir::Recompute::None;
    EXPECT_EQ(end.stashRecomputed, !recomputes);
    if (recomputes) {
      EXPECT_LT(relativeGap(end.streamedBytesPerStep, end.plannedStreamedBytesPerStep), 1e-12);
    } else {
      EXPECT_LT(end.streamedBytesPerStep, end.plannedStreamedBytesPerStep);  // the stash, recomputed instead of streamed
    }
  }
}

// examples/tiny_gpt.ipu (4 phases per IPU, RTS of the weights and the state,
// a pipeline, 2 replicas) learns the corpus well above its majority baseline.
TEST(Phased, TheTinyGptExampleLearns) {
  const ir::ExecutionPlan plan = planOfExample("tiny_gpt.ipu");
  ASSERT_EQ(plan.runs.size(), 1u);
  const ir::PhasePlan& ph = plan.runs[0].phases.at(0);
  ASSERT_EQ(ph.mapping.phases, 4);
  ASSERT_TRUE(ph.mapping.rtsWeights);
  emu::Options o;
  o.hostThreads = 2;
  auto out = emu::run(plan.runs[0], o);
  ASSERT_TRUE(out.ok()) << out.error().code << " " << out.error().message;
  const auto& eval = out->phases.at(0).evaluation;
  ASSERT_TRUE(eval.count("lm_accuracy"));
  std::printf("tiny_gpt: held-out next-token accuracy %.3f (baseline %.3f)\n", eval.at("lm_accuracy"), eval.at("lm_baseline"));
  EXPECT_GT(eval.at("lm_accuracy"), 1.6 * eval.at("lm_baseline"));
}

// examples/tiny_gpt.ipu (a pipeline whose LM head is a stage of its own,
// back on IPU 0; RTS of the weights and the state; 2 replicas) with
// `recompute: every_layer`: what the emulator streams is the plan's, field by
// field. The plan once took the LM head's input to be its output (`tokens`,
// the default of a layer's `input`) rather than the trunk it reads
// (`tokens * hidden`), so it streamed 10.5 MB a step where the emulator moved
// 10.7 MB, an excess that grew with the hidden size.
TEST(Phased, TheTinyGptExampleStreamsThePlansBytes) {
  std::ifstream in(sourceDir() + "/examples/tiny_gpt.ipu");
  ASSERT_TRUE(in);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  const std::string phases = "  phases: 4\n";
  ASSERT_NE(text.find(phases), std::string::npos);
  text.replace(text.find(phases), phases.size(), phases + "  recompute: every_layer\n");
  const ir::PhasePlan ph = phaseOf(text);
  ASSERT_FALSE(ph.layers.empty());
  ASSERT_EQ(ph.mapping.recompute, ir::Recompute::EveryLayer);
  ASSERT_TRUE(ph.mapping.rtsWeights);
  const int R = ph.mapping.replicas;
  ASSERT_EQ(R, 2);
  ASSERT_EQ(ph.layers.back().op, ir::LayerOp::LmHead);
  ASSERT_EQ(ph.stages.back().layers, std::vector<int>{static_cast<int>(ph.layers.size()) - 1}) << "the head is a stage of its own";
  auto t = trainerFor(ph);
  ASSERT_TRUE(t);
  auto step = t->step();
  ASSERT_TRUE(step.ok()) << step.error().message;
  const emu::StepTraffic& moved = t->lastStepTraffic();
  ASSERT_EQ(moved.streamed.size(), static_cast<std::size_t>(R));
  ASSERT_EQ(ph.traffic.streaming.size(), ph.ipus.size());
  double planned = 0, streamed = 0;
  for (const auto& plan : ph.traffic.streaming) {
    SCOPED_TRACE("IPU " + std::to_string(plan.ipu));
    const std::size_t i = static_cast<std::size_t>(plan.ipu);
    EXPECT_GT(plan.activations, 0);
    ir::StreamingTraffic sum;
    for (int r = 0; r < R; ++r) {
      const ir::StreamingTraffic& m = moved.streamed[static_cast<std::size_t>(r)][i];
      EXPECT_EQ(m.activations, plan.activations) << "replica " << r;
      EXPECT_EQ(m.gradients, plan.gradients) << "replica " << r;
      sum.weights += m.weights;
      sum.update += m.update;
      sum.optimizerState += m.optimizerState;
      streamed += (m.optimizerState + m.phased()) / R;
    }
    // With RTS each replica moves its share of the weights, the update and the state.
    EXPECT_LT(relativeGap(sum.weights, R * plan.weights), 1e-12);
    EXPECT_LT(relativeGap(sum.update, R * plan.update), 1e-12);
    EXPECT_LT(relativeGap(sum.optimizerState, R * plan.optimizerState), 1e-12);
    planned += plan.optimizerState + plan.phased();
  }
  // What `ipu run` prints beside the plan's figure.
  EXPECT_LT(relativeGap(streamed, planned), 1e-12) << streamed << " bytes moved, " << planned << " planned";
}

}  // namespace
}  // namespace ipu::emutest
