// Mapping invariance in fp32: the same model, data and global batch give the
// same loss and weights whatever the mapping. Where the mapping does not
// change the order of any floating-point sum (pipelining, recomputation,
// Streaming Memory, host threads) the results are bit-exact. Data parallelism
// (a ring all-reduce adds the replicas' gradients in ring order instead of
// accumulating micro batches in order) and tensor sharding (a matmul's
// reduction is split in two partial sums) reorder fp32 sums: each reordering
// changes a result by at most a few ulp (about 1e-7 relative), and over three
// optimizer steps the weights then differ by about 1e-7; we allow 2e-5,
// relative to max(1, |w|), which is 100x that and still far below the change
// one step makes (about 1e-3), so a wrong reduction cannot pass.
#include <gtest/gtest.h>

#include "tests/emulator/emulator_test_support.h"

namespace ipu::emutest {
namespace {

constexpr int kSteps = 3;

struct Result {
  std::vector<double> losses;
  emu::NamedTensors weights;
};

Result train(const TinyBert& tb, int threads = 2) {
  Result r;
  const TrainedSteps run = runSteps(phaseOf(tb.script()), kSteps, threads);
  r.losses = run.losses();
  if (run.completed) r.weights = run.trainer->weights();
  return r;
}

TinyBert base() {
  TinyBert tb;
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 4\n steps: 10\n lr: 0.002";
  return tb;
}

void expectIdentical(const Result& a, const Result& b, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (std::size_t i = 0; i < a.losses.size(); ++i) EXPECT_EQ(a.losses[i], b.losses[i]) << what << " step " << i;
  EXPECT_EQ(maxRelativeDifference(a.weights, b.weights), 0.0) << what;
}

void expectClose(const Result& a, const Result& b, const std::string& what, double tolerance = 2e-5) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (std::size_t i = 0; i < a.losses.size(); ++i) EXPECT_NEAR(a.losses[i], b.losses[i], tolerance * std::abs(b.losses[i])) << what << " step " << i;
  const double d = maxRelativeDifference(a.weights, b.weights);
  EXPECT_LT(d, tolerance) << what;
  std::printf("%s: max relative weight difference %.3g\n", what.c_str(), d);
}

const Result& reference() {
  static const Result r = train(base());
  return r;
}

TEST(MappingInvariance, ReferenceLearns) {
  const Result& r = reference();
  ASSERT_EQ(r.losses.size(), static_cast<std::size_t>(kSteps));
  // The comparisons below are meaningful only if steps change the weights.
  auto phase = phaseOf(base().script());
  auto t = trainerFor(phase);
  const double moved = maxRelativeDifference(t->weights(), r.weights);
  EXPECT_GT(moved, 1e-3);
}

TEST(MappingInvariance, TwoStagePipelineIsBitExact) {
  TinyBert tb = base();
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }";
  expectIdentical(train(tb), reference(), "2-stage pipeline");
}

TEST(MappingInvariance, HeadsBackOnIpuZeroIsBitExact) {
  // Three stages on two IPUs, the tied word matrix on IPU 0 for both uses.
  TinyBert tb = base();
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0], mlm_head, nsp_head\n ipu 1: encoder[1]\n }";
  expectIdentical(train(tb), reference(), "3 stages on 2 IPUs");
}

TEST(MappingInvariance, FourStagePipelineWithTiedWeightsApartIsBitExact) {
  // The MLM head holds a copy of the tied embedding on another IPU.
  TinyBert tb = base();
  tb.mapping = "pipeline {\n ipu 0: embedding\n ipu 1: encoder[0]\n ipu 2: encoder[1]\n ipu 3: mlm_head, nsp_head\n }";
  expectIdentical(train(tb), reference(), "4-stage pipeline");
}

TEST(MappingInvariance, RecomputationIsBitExact) {
  for (const char* r : {"every_layer", "stage_inputs"}) {
    TinyBert tb = base();
    tb.mapping = std::string("pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }\n recompute: ") + r;
    expectIdentical(train(tb), reference(), r);
  }
}

TEST(MappingInvariance, StreamingMemoryIsBitExact) {
  TinyBert tb = base();
  tb.mapping = "optimizer_state: streaming";
  expectIdentical(train(tb), reference(), "optimizer state in Streaming Memory");
}

TEST(MappingInvariance, HostThreadsDoNotMatter) {
  // Four stages on two IPUs (the heads on different IPUs, each reading the
  // trunk), two replicas, two shards: many tasks per superstep.
  TinyBert tb = base();
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0], mlm_head\n ipu 1: encoder[1], nsp_head\n }\n replicas: 2\n shard: 2";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 2\n steps: 10\n lr: 0.002";
  const Result one = train(tb, 1);
  expectIdentical(one, train(tb, 3), "1 vs 3 host threads");
  expectClose(one, reference(), "heads on different IPUs, r=2, t=2");
}

// One IPU uses every host thread: matrix products split into row blocks,
// attention into its heads, the optimizer into chunks, roundings into chunks.
// The splits depend on the sizes only, so the results do not depend on the
// threads, in fp32 and with fp16 partials and stochastic rounding (every
// rounding stream keyed by position). Sizes large enough that every split
// has several parts.
TEST(MappingInvariance, ThreadsInsideOneIpuAreBitExact) {
  TinyBert tb = base();
  tb.model = "bert(layers: 2, hidden: 128, heads: 4, ffn: 1024, vocab: 400, positions: 64)";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 16\n gradient_accumulation: 1\n steps: 10\n lr: 0.002";
  for (const std::string optimizer : {"adamw(weight_decay: 0.01)", "lamb(weight_decay: 0.01, exclude: [bias, norm])"}) {
    tb.optimizer = optimizer;
    tb.precision = "compute: fp32";
    expectIdentical(train(tb, 1), train(tb, 3), "fp32, " + optimizer + ": 1 vs 3 host threads");
    tb.precision = "compute: fp16\n weights: fp16\n partials: fp16\n accumulators: fp16\n stochastic_rounding: on\n loss_scale: 256";
    expectIdentical(train(tb, 1), train(tb, 3), "fp16 partials, stochastic rounding, " + optimizer + ": 1 vs 3 host threads");
  }
}

TEST(MappingInvariance, ReplicasMatchGradientAccumulation) {
  TinyBert tb = base();
  tb.mapping = "replicas: 4";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 1\n steps: 10\n lr: 0.002";
  expectClose(train(tb), reference(), "4 replicas GA=1 vs 1 replica GA=4");
}

TEST(MappingInvariance, ReplicatedTensorShardingMatchesReplicas) {
  TinyBert plain = base();
  plain.mapping = "replicas: 4";
  plain.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 1\n steps: 10\n lr: 0.002";
  TinyBert sharded = plain;
  sharded.mapping = "replicas: 4\n replicated_tensor_sharding: optimizer_state\n optimizer_state: streaming";
  // The same ring sums; only LAMB's per-tensor norms add the replicas' chunks (in double).
  expectClose(train(sharded), train(plain), "RTS of optimizer state", 1e-6);
}

TEST(MappingInvariance, TensorShardingMatchesOneIpu) {
  TinyBert tb = base();
  tb.mapping = "shard: 2";
  expectClose(train(tb), reference(), "t=2 vs t=1");
}

// With fp16 weights updated by stochastic rounding (no master copy), every
// replica and both copies of the tied word matrix draw the same random bits:
// they stay identical, step after step.
TEST(MappingInvariance, CopiesStayIdenticalUnderStochasticRounding) {
  TinyBert tb = base();
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }\n replicas: 2\n shard: 2";
  tb.precision = "compute: fp16\n weights: fp16\n partials: fp16\n accumulators: fp16\n stochastic_rounding: on\n loss_scale: 128";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 1\n steps: 10\n lr: 0.002";
  auto t = trainerFor(phaseOf(tb.script()));
  ASSERT_TRUE(t);
  for (int i = 0; i < 3; ++i) {
    auto r = t->step();
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->skipped);
    EXPECT_TRUE(t->copiesAgree()) << "after step " << i + 1;
  }
}

TEST(MappingInvariance, EverythingAtOnce) {
  TinyBert tb = base();
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0], mlm_head, nsp_head\n ipu 1: encoder[1]\n }\n replicas: 2\n shard: 2\n recompute: every_layer";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 2\n steps: 10\n lr: 0.002";
  expectClose(train(tb), reference(), "p=2 (3 stages), r=2, t=2, recompute");
}

}  // namespace
}  // namespace ipu::emutest
