// The plan is the single source of truth for its backends: the pipeline
// schedule every backend reads (runtime/ir/schedule.h), and the traffic the
// plan says a step moves (ir::Traffic) against what the emulator actually
// moves when it runs the step on virtual IPUs.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "runtime/ir/schedule.h"
#include "tests/emulator/emulator_test_support.h"

namespace ipu::emutest {
namespace {

// ------------------------------------------------------------- the schedule

struct Timing {
  std::map<std::pair<int, long long>, long long> forward, recompute, backward;   // (stage, micro) -> cycle
  std::map<std::pair<int, long long>, std::size_t> backwardAt;                   // -> position in its cycle
  std::map<std::pair<int, long long>, std::size_t> forwardAt;
  std::vector<int> peak;                                                          // per stage: micro batches in flight
};

Timing walk(const ir::PipelineSchedule& sc) {
  Timing t;
  t.peak.assign(static_cast<std::size_t>(sc.stages), 0);
  std::vector<int> inFlight(static_cast<std::size_t>(sc.stages), 0);
  for (long long c = 0; c < sc.cycles(); ++c) {
    const auto work = sc.cycle(c);
    bool backwardSeen = false;
    for (std::size_t i = 0; i < work.size(); ++i) {
      const ir::Work& w = work[i];
      const std::pair<int, long long> key{w.stage, w.micro};
      EXPECT_GE(w.micro, 0);
      EXPECT_LT(w.micro, sc.microBatches);
      switch (w.pass) {
        case ir::Pass::Forward:
          EXPECT_FALSE(backwardSeen) << "grouped: every forward before every backward";
          EXPECT_EQ(t.forward.count(key), 0u) << "stage " << w.stage << " forwards micro batch " << w.micro << " twice";
          t.forward[key] = c;
          t.forwardAt[key] = i;
          ++inFlight[static_cast<std::size_t>(w.stage)];
          break;
        case ir::Pass::Recompute:
          backwardSeen = true;
          EXPECT_EQ(t.recompute.count(key), 0u);
          t.recompute[key] = c;
          EXPECT_LT(i + 1, work.size());
          if (i + 1 < work.size()) {
            EXPECT_EQ(work[i + 1], (ir::Work{w.stage, w.micro, ir::Pass::Backward})) << "a recompute runs right before its backward";
          }
          break;
        case ir::Pass::Backward:
          backwardSeen = true;
          EXPECT_EQ(t.backward.count(key), 0u) << "stage " << w.stage << " backwards micro batch " << w.micro << " twice";
          t.backward[key] = c;
          t.backwardAt[key] = i;
          break;
      }
    }
    for (int s = 0; s < sc.stages; ++s)
      t.peak[static_cast<std::size_t>(s)] = std::max(t.peak[static_cast<std::size_t>(s)], inFlight[static_cast<std::size_t>(s)]);
    for (const auto& w : work)
      if (w.pass == ir::Pass::Backward) --inFlight[static_cast<std::size_t>(w.stage)];
  }
  return t;
}

TEST(Schedule, CyclesForwardsAndBackwardsInDependencyOrder) {
  for (ir::Recompute rc : {ir::Recompute::None, ir::Recompute::EveryLayer, ir::Recompute::Stage})
    for (int S = 1; S <= 6; ++S)
      for (long long ga = 1; ga <= 9; ++ga) {
        const ir::PipelineSchedule sc{S, ga, rc};
        SCOPED_TRACE("S=" + std::to_string(S) + " GA=" + std::to_string(ga) + " recompute=" + name(rc));
        ASSERT_EQ(sc.cycles(), ga + 2 * S - 2);
        const Timing t = walk(sc);
        // Every micro batch exactly once forward and once backward on every stage.
        EXPECT_EQ(t.forward.size(), static_cast<std::size_t>(S * ga));
        EXPECT_EQ(t.backward.size(), static_cast<std::size_t>(S * ga));
        EXPECT_EQ(t.recompute.size(), rc == ir::Recompute::None ? 0u : static_cast<std::size_t>(S * ga));
        for (int s = 0; s < S; ++s)
          for (long long m = 0; m < ga; ++m) {
            const std::pair<int, long long> here{s, m}, up{s + 1, m}, down{s - 1, m};
            ASSERT_TRUE(t.forward.count(here) && t.backward.count(here));
            // A forward needs the previous stage's output, sent in an earlier cycle.
            if (s > 0) {
              EXPECT_GT(t.forward.at(here), t.forward.at(down));
            }
            // A backward needs the next stage's gradient, sent in an earlier cycle;
            // the last stage's backward follows its own forward in the same cycle.
            if (s < S - 1) {
              EXPECT_GT(t.backward.at(here), t.backward.at(up));
            } else {
              EXPECT_EQ(t.backward.at(here), t.forward.at(here));
              EXPECT_GT(t.backwardAt.at(here), t.forwardAt.at(here));
            }
            if (rc != ir::Recompute::None) {
              EXPECT_EQ(t.recompute.at(here), t.backward.at(here));
            }
          }
        // The stash the memory plan sizes for is what the schedule keeps in flight.
        for (int s = 0; s < S; ++s) {
          if (ga >= sc.stashDepth(s)) {
            EXPECT_EQ(t.peak[static_cast<std::size_t>(s)], sc.stashDepth(s)) << "stage " << s;
          }
        }
        // at() and cycle() say the same: a stage idles exactly when it has no work.
        for (long long c = 0; c < sc.cycles(); ++c)
          for (int s = 0; s < S; ++s) {
            const ir::StageCycle w = sc.at(s, c);
            bool listed = false;
            for (const auto& x : sc.cycle(c)) listed |= x.stage == s;
            EXPECT_EQ(w.idle(), !listed);
            if (w.forward >= 0) {
              EXPECT_EQ(t.forward.at({s, w.forward}), c);
            }
            if (w.backward >= 0) {
              EXPECT_EQ(t.backward.at({s, w.backward}), c);
            }
          }
      }
}

TEST(Schedule, LargeStepsAreAFunctionNotATable) {
  // GA 2000 on 64 stages: the plan holds three numbers, and any cycle is
  // answered without building the others.
  const ir::PipelineSchedule sc{64, 2000, ir::Recompute::Stage};
  EXPECT_EQ(sc.cycles(), 2000 + 2 * 64 - 2);
  const ir::StageCycle mid = sc.at(10, 1000);
  EXPECT_EQ(mid.forward, 990);
  EXPECT_EQ(mid.backward, 1000 - 2 * 63 + 10);
  EXPECT_TRUE(mid.recompute);
  EXPECT_TRUE(sc.at(63, 0).idle());
  EXPECT_EQ(sc.cycle(sc.cycles() - 1), (std::vector<ir::Work>{{0, 1999, ir::Pass::Recompute}, {0, 1999, ir::Pass::Backward}}));
}

TEST(Schedule, PlanCarriesItCompactly) {
  TinyBert tb;
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }\n recompute: stage_inputs";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 1\n gradient_accumulation: 2000\n steps: 1\n lr: 0.002";
  const ir::PhasePlan ph = phaseOf(tb.script());
  EXPECT_EQ(ph.schedule.stages, 2);
  EXPECT_EQ(ph.schedule.microBatches, 2000);
  EXPECT_EQ(ph.schedule.recompute, ir::Recompute::Stage);
  ir::Json j = ir::toJson(ph);
  EXPECT_EQ(j["pipeline_cycles"].dump(-1), "2002");
  EXPECT_EQ(j["schedule"].dump(-1), R"({"stages":2,"micro_batches":2000,"recompute":"stage_inputs","cycles":2002})");
}

// ------------------------------------------------------- traffic, measured

struct Case {
  const char* what;
  const char* mapping;
  long long ga;
  const char* precision = "compute: fp32";
};

// Pipelines of 1, 2, 3 (a non-contiguous one) and 4 stages, 1, 2 and 4
// replicas, with and without recomputation and RTS.
const Case kCases[] = {
    {"p1 r1", "", 4},
    {"p2 r1 (tied head on another IPU)", "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }", 4},
    {"p4 r1", "pipeline {\n ipu 0: embedding\n ipu 1: encoder[0]\n ipu 2: encoder[1]\n ipu 3: mlm_head, nsp_head\n }", 5},
    {"p1 r2", "replicas: 2", 2},
    {"p1 r4", "replicas: 4", 1},
    {"p2 r2 every_layer", "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }\n replicas: 2\n recompute: every_layer", 3},
    {"p2 r4 stage_inputs", "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }\n replicas: 4\n recompute: stage_inputs", 2},
    {"p2 3 stages r2", "pipeline {\n ipu 0: embedding, encoder[0], mlm_head, nsp_head\n ipu 1: encoder[1]\n }\n replicas: 2", 3},
    {"p4 r2 stage_inputs", "pipeline {\n ipu 0: embedding\n ipu 1: encoder[0]\n ipu 2: encoder[1]\n ipu 3: mlm_head, nsp_head\n }\n replicas: 2\n recompute: stage_inputs", 4},
    {"p4 r2 every_layer, fp16", "pipeline {\n ipu 0: embedding\n ipu 1: encoder[0]\n ipu 2: encoder[1]\n ipu 3: mlm_head, nsp_head\n }\n replicas: 2\n recompute: every_layer", 2,
     "compute: fp16\n weights: fp16\n accumulators: fp16\n loss_scale: 1024"},
    {"p2 r2 RTS", "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }\n replicas: 2\n replicated_tensor_sharding: optimizer_state", 2},
    {"p1 r4 streamed state, RTS", "replicas: 4\n optimizer_state: streaming\n replicated_tensor_sharding: optimizer_state", 1},
};

const ir::Collective* findCollective(const ir::PhasePlan& ph, ir::CollectiveTensors what, int ipu) {
  for (const auto& c : ph.traffic.collectives)
    if (c.tensors == what && c.ipu == ipu) return &c;
  return nullptr;
}

TEST(Traffic, TheEmulatorMovesWhatThePlanSays) {
  for (const Case& k : kCases) {
    SCOPED_TRACE(k.what);
    TinyBert tb;
    tb.mapping = k.mapping;
    tb.precision = k.precision;
    tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 2\n gradient_accumulation: " + std::to_string(k.ga) + "\n steps: 2\n lr: 0.002";
    const ir::PhasePlan ph = phaseOf(tb.script());
    ASSERT_FALSE(ph.layers.empty());
    const int R = ph.mapping.replicas, S = static_cast<int>(ph.stages.size());
    auto trainer = trainerFor(ph);
    ASSERT_TRUE(trainer);
    auto step = trainer->step();
    ASSERT_TRUE(step.ok()) << step.error().message;
    ASSERT_TRUE(step->completed);
    const emu::StepTraffic& moved = trainer->lastStepTraffic();

    // Parameters: what each virtual IPU holds is what the plan sizes the
    // update, the reduction and the memory for (tied copies included).
    const std::vector<double> params = trainer->ipuParameters();
    ASSERT_EQ(params.size(), ph.ipus.size());
    double total = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(params[i], ph.ipus[i].parameters) << "IPU " << i;
      total += params[i];
    }
    EXPECT_GE(total, ph.parameters);

    // Between stages: every micro batch's activation forward and gradient back.
    ASSERT_EQ(ph.traffic.boundaries.size(), static_cast<std::size_t>(S - 1));
    ASSERT_EQ(moved.activations.size(), static_cast<std::size_t>(R));
    double exchanged = 0;
    for (int r = 0; r < R; ++r)
      for (int b = 0; b + 1 < S; ++b) {
        const ir::StageBoundary& pb = ph.traffic.boundaries[static_cast<std::size_t>(b)];
        EXPECT_EQ(pb.from, b);
        EXPECT_GT(pb.activationBytes, 0);
        EXPECT_EQ(moved.activations[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)], static_cast<double>(k.ga) * pb.activationBytes)
            << "replica " << r << " boundary " << b;
        EXPECT_EQ(moved.gradients[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)], static_cast<double>(k.ga) * pb.gradientBytes)
            << "replica " << r << " boundary " << b;
        if (r == 0) exchanged += moved.activations[0][static_cast<std::size_t>(b)] + moved.gradients[0][static_cast<std::size_t>(b)];
      }
    EXPECT_EQ(exchanged, ph.traffic.stageExchangeBytes(ph.schedule.microBatches));

    // Across replicas: the gradients each IPU enters into the reduction, and
    // with RTS of the optimizer state the updated weights it all-gathers.
    for (int r = 0; r < R; ++r)
      for (const auto& ipu : ph.ipus) {
        const double reduced = moved.reduced[static_cast<std::size_t>(r)][static_cast<std::size_t>(ipu.index)];
        const double gathered = moved.gathered[static_cast<std::size_t>(r)][static_cast<std::size_t>(ipu.index)];
        const ir::Collective* g = findCollective(ph, ir::CollectiveTensors::Gradients, ipu.index);
        const ir::Collective* w = findCollective(ph, ir::CollectiveTensors::UpdatedWeights, ipu.index);
        if (R == 1) {
          EXPECT_EQ(g, nullptr);
          EXPECT_EQ(reduced, 0);
          continue;
        }
        ASSERT_NE(g, nullptr) << "IPU " << ipu.index;
        EXPECT_EQ(g->kind, ph.mapping.rtsOptimizerState ? ir::CollectiveKind::ReduceScatter : ir::CollectiveKind::AllReduce);
        EXPECT_GT(reduced, 0);
        EXPECT_EQ(reduced, g->bytes) << "replica " << r << " IPU " << ipu.index;
        EXPECT_EQ(gathered, w != nullptr ? w->bytes : 0.0) << "replica " << r << " IPU " << ipu.index;
      }
  }
}

// Distributed batch norm: the plan counts, per IPU of a replica, the sums its
// batch-norm units all-reduce across their group in a step (ir::batchNormChannels
// of its layers); the emulator enters exactly that into its exchanges. The
// plan's units are the kernels' (bottleneck and basic blocks, with and
// without a projection; none with group norm).
TEST(Traffic, DistributedBatchNormMovesWhatThePlanSays) {
  const std::string pipeline = "pipeline {\n ipu 0: stem, stage1[0], stage2[0]\n ipu 1: stage2[1], stage3[0], stage4[0], head\n }";
  for (const std::string& block : {std::string("basic"), std::string("bottleneck")}) {
    SCOPED_TRACE(block);
    const std::string text =
        "import \"std/pods\"\nimport \"std/models/resnet\"\n"
        "model tiny = resnet(blocks: [1, 2, 1, 1], width: 4, classes: 5, block: \"" + block + "\")\n"
        "mapping m for tiny on POD16 {\n " + pipeline + "\n replicas: 4\n batch_norm_replicas: 2\n}\n"
        "training t {\n mapping: m\n optimizer: momentum(momentum: 0.9)\n"
        " phase one { image_size: 32, micro_batch: 2, gradient_accumulation: 3, steps: 2, lr: 0.05 }\n}\n";
    const ir::PhasePlan ph = phaseOf(text);
    ASSERT_FALSE(ph.layers.empty());
    auto trainer = trainerFor(ph);
    ASSERT_TRUE(trainer);
    const auto& layers = trainer->model().layers();
    ASSERT_EQ(layers.size(), ph.layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      std::vector<int> kernel;
      for (const auto& u : layers[i].kernel->batchNorms()) kernel.push_back(u.channels);
      EXPECT_EQ(kernel, ir::batchNormChannels(ph.layers[i])) << ph.layers[i].name;
    }
    auto step = trainer->step();
    ASSERT_TRUE(step.ok()) << step.error().message;
    const emu::StepTraffic& moved = trainer->lastStepTraffic();
    ASSERT_EQ(moved.batchNorm.size(), 4u);
    for (int r = 0; r < 4; ++r)
      for (const auto& ipu : ph.ipus) {
        const ir::Collective* c = findCollective(ph, ir::CollectiveTensors::BatchNormStatistics, ipu.index);
        ASSERT_NE(c, nullptr) << "IPU " << ipu.index;
        EXPECT_GT(c->bytes, 0);
        EXPECT_EQ(moved.batchNorm[static_cast<std::size_t>(r)][static_cast<std::size_t>(ipu.index)], c->bytes) << "replica " << r << " IPU " << ipu.index;
        double units = 0;
        for (int li : ipu.layers) units += static_cast<double>(ir::batchNormChannels(ph.layers[static_cast<std::size_t>(li)]).size());
        EXPECT_EQ(c->operations, 3 * 3 * units) << "3 all-reduces per unit and micro batch, 3 micro batches";
      }
  }
  // Group norm has no batch-norm units; per-replica batch norm no exchange.
  for (const std::string& variant : {std::string("norm: \"group\", norm_groups: 2"), std::string("")}) {
    const std::string text =
        "import \"std/pods\"\nimport \"std/models/resnet\"\n"
        "model tiny = resnet(blocks: [1, 1, 1, 1], width: 4, classes: 5, block: \"basic\"" + (variant.empty() ? "" : ", " + variant) + ")\n"
        "mapping m for tiny on POD16 {\n replicas: 4\n" + (variant.empty() ? "" : " batch_norm_replicas: 2\n") + "}\n"
        "training t {\n mapping: m\n optimizer: momentum(momentum: 0.9)\n"
        " phase one { image_size: 32, micro_batch: 2, gradient_accumulation: 1, steps: 2, lr: 0.05 }\n}\n";
    const ir::PhasePlan ph = phaseOf(text);
    ASSERT_FALSE(ph.layers.empty());
    EXPECT_EQ(findCollective(ph, ir::CollectiveTensors::BatchNormStatistics, 0), nullptr) << variant;
    auto trainer = trainerFor(ph);
    ASSERT_TRUE(trainer);
    ASSERT_TRUE(trainer->step().ok());
    for (const auto& perReplica : trainer->lastStepTraffic().batchNorm)
      for (double b : perReplica) EXPECT_EQ(b, 0) << variant;
  }
}

// Tensor sharding: the plan counts, per IPU of a shard group, the all-reduces
// among the group's IPUs that sum each shardable layer's partial output in
// its forward pass and recomputation (ShardActivations) and its partial input
// gradient in its backward pass (ShardGradients); the emulator counts the
// buffers its split kernels enter into allReduceShards. The emulator splits
// attention and FFN only and replicates embeddings and heads on the group,
// which the plan prices as vocabulary-parallel (docs/emulator.md,
// "Limitations"): what those layers' all-reduces would move is the one
// difference, and it is checked to be exactly their share of the plan's.
struct ShardCase {
  const char* what;
  bool gpt;
  const char* mapping;
  long long ga;
  const char* precision = "compute: fp32";
  // Phased without recomputation: the emulator recomputes each layer from
  // its streamed input (docs/emulator.md, "Phased execution"), so its
  // forward all-reduces are those of the same mapping with `recompute: every_layer`.
  bool recomputesAnyway = false;
};

const ShardCase kShardCases[] = {
    {"BERT t2", false, "shard: 2", 2},
    {"BERT t2 p2 r2 every_layer", false,
     "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }\n shard: 2\n replicas: 2\n recompute: every_layer", 3},
    {"BERT t2 p2 stage_inputs", false, "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }\n shard: 2\n recompute: stage_inputs",
     2},
    {"BERT t2 r2 fp16", false, "shard: 2\n replicas: 2", 2, "compute: fp16\n weights: fp16\n accumulators: fp16\n loss_scale: 1024"},
    {"BERT t2 phased every_layer", false, "shard: 2\n phases: 2\n recompute: every_layer", 2},
    {"BERT t2 phased", false, "shard: 2\n phases: 2", 2, "compute: fp32", true},
    {"GPT t2", true, "shard: 2", 2},
    {"GPT t2 p2 every_layer", true, "pipeline {\n ipu 0: embedding, decoder[0], lm_head\n ipu 1: decoder[1]\n }\n shard: 2\n recompute: every_layer", 3},
    {"GPT t2 phased every_layer r2", true, "shard: 2\n phases: 2\n replicas: 2\n recompute: every_layer", 2},
};

std::string shardScript(const ShardCase& k, const std::string& mapping) {
  TinyBert tb;
  tb.mapping = mapping;
  tb.precision = k.precision;
  if (k.gpt) {
    tb.model = "gpt(layers: 2, hidden: 32, heads: 2, vocab: 400, positions: 64)";
    tb.optimizer = "adamw(weight_decay: 0.01)";
    tb.phase = "seq_len: 32\n micro_batch: 2\n gradient_accumulation: " + std::to_string(k.ga) + "\n steps: 2\n lr: 0.002";
  } else {
    tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 2\n gradient_accumulation: " + std::to_string(k.ga) + "\n steps: 2\n lr: 0.002";
  }
  std::string script = tb.script();
  if (k.gpt) script.replace(script.find("std/models/bert"), 15, "std/models/gpt");
  return script;
}

TEST(Traffic, ShardedLayersAllReduceWhatThePlanSays) {
  for (const ShardCase& k : kShardCases) {
    SCOPED_TRACE(k.what);
    const ir::PhasePlan ph = phaseOf(shardScript(k, k.mapping));
    ASSERT_FALSE(ph.layers.empty());
    ASSERT_EQ(ph.mapping.shard, 2);
    // What the emulator's forward passes do: the plan's with recomputation.
    const ir::PhasePlan forwards = k.recomputesAnyway ? phaseOf(shardScript(k, std::string(k.mapping) + "\n recompute: every_layer")) : ph;
    if (k.recomputesAnyway) {
      ASSERT_EQ(ph.mapping.recompute, ir::Recompute::None);
    }
    auto trainer = trainerFor(ph);
    ASSERT_TRUE(trainer);
    const auto& kernels = trainer->model().layers();
    ASSERT_EQ(kernels.size(), ph.layers.size());
    auto step = trainer->step();
    ASSERT_TRUE(step.ok()) << step.error().message;
    ASSERT_TRUE(step->completed);
    const emu::StepTraffic& moved = trainer->lastStepTraffic();
    const int R = std::max(1, ph.mapping.replicas);
    ASSERT_EQ(moved.shardActivations.size(), static_cast<std::size_t>(R));
    const double bc = ir::bytesOf(ph.precision.compute);
    const double ga = static_cast<double>(k.ga);

    for (const auto& ipu : ph.ipus) {
      SCOPED_TRACE("IPU " + std::to_string(ipu.index));
      const ir::Collective* act = findCollective(ph, ir::CollectiveTensors::ShardActivations, ipu.index);
      const ir::Collective* grad = findCollective(ph, ir::CollectiveTensors::ShardGradients, ipu.index);
      const ir::Collective* actForwards = findCollective(forwards, ir::CollectiveTensors::ShardActivations, ipu.index);
      ASSERT_NE(act, nullptr);
      ASSERT_NE(grad, nullptr);
      ASSERT_NE(actForwards, nullptr);
      EXPECT_EQ(act->kind, ir::CollectiveKind::AllReduce);
      EXPECT_EQ(grad->kind, ir::CollectiveKind::AllReduce);
      // The plan's layers the emulator runs replicated on the group.
      double replicatedBytes = 0, replicatedLayers = 0, splitLayers = 0;
      for (int li : ipu.layers) {
        const ir::Layer& l = ph.layers[static_cast<std::size_t>(li)];
        if (!l.shardable) continue;
        if (kernels[static_cast<std::size_t>(li)].kernel->sharded()) {
          splitLayers += 1;
        } else {
          replicatedBytes += l.outputElements * bc;
          replicatedLayers += 1;
        }
      }
      ASSERT_GT(splitLayers + replicatedLayers, 0);
      const double forwardPasses = forwards.mapping.recompute == ir::Recompute::None ? 1 : 2;
      EXPECT_EQ(actForwards->operations, ga * forwardPasses * (splitLayers + replicatedLayers));
      EXPECT_EQ(grad->operations, ga * (splitLayers + replicatedLayers));
      if (k.recomputesAnyway) {
        EXPECT_LT(act->bytes, actForwards->bytes) << "the plan without recomputation all-reduces once per forward pass";
      }
      for (int r = 0; r < R; ++r) {
        const auto& a = moved.shardActivations[static_cast<std::size_t>(r)][static_cast<std::size_t>(ipu.index)];
        const auto& g = moved.shardGradients[static_cast<std::size_t>(r)][static_cast<std::size_t>(ipu.index)];
        EXPECT_EQ(a.bytes > 0, splitLayers > 0) << "replica " << r;
        EXPECT_EQ(a.bytes, actForwards->bytes - ga * forwardPasses * replicatedBytes) << "replica " << r;
        EXPECT_EQ(a.operations, actForwards->operations - ga * forwardPasses * replicatedLayers) << "replica " << r;
        EXPECT_EQ(g.bytes, grad->bytes - ga * replicatedBytes) << "replica " << r;
        EXPECT_EQ(g.operations, grad->operations - ga * replicatedLayers) << "replica " << r;
      }
    }
  }
  // Without sharding the plan has no shard all-reduce and the emulator moves none.
  const ShardCase flat{"t1", false, "", 2};
  const ir::PhasePlan ph = phaseOf(shardScript(flat, flat.mapping));
  for (const auto& c : ph.traffic.collectives) {
    EXPECT_NE(c.tensors, ir::CollectiveTensors::ShardActivations);
    EXPECT_NE(c.tensors, ir::CollectiveTensors::ShardGradients);
  }
  auto trainer = trainerFor(ph);
  ASSERT_TRUE(trainer);
  ASSERT_TRUE(trainer->step().ok());
  for (const auto& perReplica : trainer->lastStepTraffic().shardActivations)
    for (const auto& a : perReplica) EXPECT_EQ(a.operations, 0);
  for (const auto& perReplica : trainer->lastStepTraffic().shardGradients)
    for (const auto& g : perReplica) EXPECT_EQ(g.operations, 0);
}

}  // namespace
}  // namespace ipu::emutest
