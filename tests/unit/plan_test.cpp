// Unit tests of the plan layer: the seed articles' facts about what fits, and
// properties the memory model must have whatever its constants.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "interpreter/check/codes.h"
#include "interpreter/plan/codes.h"
#include "tests/unit/test_support.h"

using namespace ipu;

namespace {

std::string bertLarge(const std::string& mapping, const std::string& phase = "seq_len: 128; masked_tokens: 20; micro_batch: 8; global_batch: 65536") {
  return "import \"std/pods\"\nimport \"std/models/bert\"\nimport \"std/precision\"\n"
         "mapping m for bert_large on POD16 {\n" + mapping + "\n}\n"
         "training t {\n  mapping: m\n  precision: fp16_sr\n  optimizer: lamb(weight_decay: 0.01)\n"
         "  phase one { " + phase + "; steps: 100; lr: 0.006 }\n}\n";
}

const char* kFourIpus =
    "pipeline {\n ipu 0: embedding, encoder[0..3], mlm_head, nsp_head\n ipu 1: encoder[3..10]\n"
    " ipu 2: encoder[10..17]\n ipu 3: encoder[17..24]\n}\nreplicas: 4\nrecompute: every_layer\n"
    "replicated_tensor_sharding: optimizer_state\navailable_memory_proportion: [0.15, 0.25, 0.25, 0.25]\n";

bool fits(const test::Outcome& o) {
  if (o.plan == nullptr) return false;
  for (const auto& r : o.plan->runs)
    for (const auto& p : r.phases)
      if (!p.fits) return false;
  return true;
}

double peakOf(const test::Outcome& o, bool streaming = false) {
  double peak = 0;
  for (const auto& ipu : o.plan->runs.at(0).phases.at(0).ipus)
    peak = std::max(peak, streaming ? ipu.streamingBytes : ipu.memory.total());
  return peak;
}

}  // namespace

// "The optimizer state for the pre-training system is stored in Streaming
// Memory" (BERT-Large Training on the IPU explained, 2021).
TEST(SeedFacts, BertLargeOnFourIpusFitsOnlyWithOptimizerStateInStreamingMemory) {
  test::Outcome onChip = test::runText(bertLarge(kFourIpus));
  test::Outcome offChip = test::runText(bertLarge(std::string(kFourIpus) + "optimizer_state: streaming\n"));
  ASSERT_TRUE(onChip.plan && offChip.plan) << onChip.rendered() << offChip.rendered();
  EXPECT_FALSE(fits(onChip));
  EXPECT_TRUE(fits(offChip)) << offChip.rendered();
  // The error names the lever that the plan measured.
  EXPECT_NE(onChip.rendered().find("`optimizer_state: streaming`"), std::string::npos) << onChip.rendered();
}

// "If we expand the pipeline depth to a dimension of 8 we are able to fit the
// whole model including all the optimiser state inside the IPU In-Processor
// Memory" (Building Large Models on IPU, 2021).
TEST(SeedFacts, BertLargeOnEightIpusFitsEverythingOnChip) {
  for (const char* phase : {"seq_len: 128; masked_tokens: 20; micro_batch: 8; global_batch: 65536",
                            "seq_len: 384; masked_tokens: 56; micro_batch: 2; global_batch: 16384"}) {
    test::Outcome o = test::runText(bertLarge(
        "pipeline: balanced(8)\nreplicas: 2\nrecompute: every_layer\nreplicated_tensor_sharding: optimizer_state\n"
        "available_memory_proportion: 0.25\n", phase));
    ASSERT_TRUE(o.plan) << o.rendered();
    EXPECT_TRUE(fits(o)) << phase << "\n" << o.rendered();
    EXPECT_EQ(o.plan->runs[0].phases[0].ipusUsed, 16);
  }
}

// GPT-3 175B on POD256 as t = 8, p = 8, r = 4 needs phased execution.
TEST(SeedFacts, Gpt3OnPod256FitsOnlyWithPhasedExecution) {
  test::Outcome phased = test::runFile(test::sourceDir() + "/examples/gpt3_175b_pod256.ipu");
  ASSERT_TRUE(phased.plan) << phased.rendered();
  EXPECT_TRUE(fits(phased)) << phased.rendered();
  EXPECT_EQ(phased.plan->runs[0].phases[0].ipusUsed, 256);
  test::Outcome resident = test::runText(
      "import \"" + test::sourceDir() + "/examples/gpt3_175b_pod256.ipu\" as g\n"
      "training t = g.gpt3 with { mapping: g.gpt3_resident }\nrun t\n");
  ASSERT_TRUE(resident.plan) << resident.rendered();
  EXPECT_FALSE(fits(resident));
  EXPECT_NE(resident.rendered().find("`phases:"), std::string::npos) << resident.rendered();
}

TEST(MemoryModel, OffloadingStateFreesInProcessorMemoryAndUsesStreamingMemory) {
  test::Outcome a = test::runText(bertLarge(kFourIpus));
  test::Outcome b = test::runText(bertLarge(std::string(kFourIpus) + "optimizer_state: streaming\n"));
  EXPECT_LT(peakOf(b), peakOf(a));
  EXPECT_GT(peakOf(b, true), peakOf(a, true));
}

TEST(MemoryModel, ShardingStateAcrossReplicasDividesIt) {
  std::string noRts = kFourIpus;
  noRts.replace(noRts.find("replicated_tensor_sharding: optimizer_state"), 43, "");
  test::Outcome a = test::runText(bertLarge(noRts));
  test::Outcome b = test::runText(bertLarge(kFourIpus));
  const auto& ia = a.plan->runs[0].phases[0].ipus[1].memory;
  const auto& ib = b.plan->runs[0].phases[0].ipus[1].memory;
  EXPECT_NEAR(ia.optimizerState / ib.optimizerState, 4.0, 1e-9);
}

TEST(MemoryModel, RecomputationShrinksActivations) {
  std::string none = kFourIpus;
  none.replace(none.find("recompute: every_layer"), 22, "recompute: none");
  test::Outcome a = test::runText(bertLarge(none + "optimizer_state: streaming\n"));
  test::Outcome b = test::runText(bertLarge(std::string(kFourIpus) + "optimizer_state: streaming\n"));
  EXPECT_GT(a.plan->runs[0].phases[0].ipus[1].memory.activations, 2 * b.plan->runs[0].phases[0].ipus[1].memory.activations);
}

TEST(MemoryModel, Fp32NeedsMoreMemoryThanFp16) {
  std::string text = bertLarge(std::string(kFourIpus) + "optimizer_state: streaming\n");
  test::Outcome fp16 = test::runText(text);
  text.replace(text.find("precision: fp16_sr"), 18, "precision: fp32_full");
  test::Outcome fp32 = test::runText(text);
  EXPECT_GT(peakOf(fp32), 1.5 * peakOf(fp16));
}

TEST(Pipeline, StagesFollowDataFlowAndStashDepths) {
  test::Outcome o = test::runText(bertLarge(std::string(kFourIpus) + "optimizer_state: streaming\n"));
  const auto& ph = o.plan->runs[0].phases[0];
  // The heads return to IPU 0 after IPU 3: five stages, stash 9, 7, 5, 3, 1.
  ASSERT_EQ(ph.stages.size(), 5u);
  EXPECT_EQ(ph.stages[4].ipu, 0);
  std::vector<int> depths;
  for (const auto& s : ph.stages) depths.push_back(s.stashDepth);
  EXPECT_EQ(depths, (std::vector<int>{9, 7, 5, 3, 1}));
  // PopART: GA + 2S - 2 cycles.
  EXPECT_EQ(ph.schedule.cycles(), 2048 + 2 * 5 - 2);
}

TEST(Pipeline, BalancedPlacesEveryLayerOnceAndContiguously) {
  test::Outcome o = test::runText(bertLarge("pipeline: balanced(8)\nreplicas: 2\nrecompute: every_layer\noptimizer_state: streaming\n"));
  ASSERT_TRUE(o.plan) << o.rendered();
  const auto& ph = o.plan->runs[0].phases[0];
  std::vector<int> seen(ph.layers.size(), 0);
  for (const auto& ipu : ph.ipus)
    for (int l : ipu.layers) seen[static_cast<std::size_t>(l)]++;
  for (int s : seen) EXPECT_EQ(s, 1);
  // Encoders run through IPUs in order; the tied heads go back to the embedding's IPU.
  int last = 0;
  for (const auto& l : ph.layers) {
    if (l.name.rfind("encoder", 0) != 0) continue;
    EXPECT_GE(l.ipu, last) << l.name;
    last = l.ipu;
  }
  EXPECT_EQ(last, 7);
  for (const auto& l : ph.layers) {
    if (l.name == "mlm_head" || l.name == "nsp_head" || l.name == "embedding") {
      EXPECT_EQ(l.ipu, 0) << l.name;
    }
  }
}

TEST(Pipeline, TiedLayersApartWarn) {
  std::string apart =
      "pipeline {\n ipu 0: embedding, encoder[0..6]\n ipu 1: encoder[6..12]\n ipu 2: encoder[12..18]\n"
      " ipu 3: encoder[18..24], mlm_head, nsp_head\n}\nreplicas: 4\nrecompute: every_layer\noptimizer_state: streaming\n";
  test::Outcome o = test::runText(bertLarge(apart));
  bool warned = false;
  for (const auto& c : o.codes()) warned |= c == plan::code::kTiedApart;
  EXPECT_TRUE(warned) << o.rendered();
}

// Code lives on every tile a layer uses: the standard library's estimates are
// for a full 1,472-tile chip, and a chip with half the tiles holds half.
TEST(MemoryModel, LayerCodeScalesWithTheChipsTiles) {
  auto onChip = [](int tiles) {
    return "import \"std/pods\"\nimport \"std/models/bert\"\n"
           "chip c = GC200 with { tiles: " + std::to_string(tiles) + " }\n"
           "machine mm = M2000 with { chip: c }\npod p { machine: mm\n machines: 1 }\n"
           "model tiny = bert(layers: 2, hidden: 64, heads: 2, ffn: 256, vocab: 1000, positions: 128)\n"
           "mapping m for tiny on p { pipeline: balanced(2)\n replicas: 2 }\n"
           "training t {\n  mapping: m\n  optimizer: sgd()\n  phase one { seq_len: 32; masked_tokens: 5; micro_batch: 4; gradient_accumulation: 1; steps: 1; lr: 0.1 }\n}\n";
  };
  test::Outcome full = test::runText(onChip(1472)), half = test::runText(onChip(736));
  ASSERT_NE(full.plan, nullptr) << full.rendered();
  ASSERT_NE(half.plan, nullptr) << half.rendered();
  const auto& a = full.plan->runs.at(0).phases.at(0);
  const auto& b = half.plan->runs.at(0).phases.at(0);
  const double base = 48e6;  // GC200's code_base, which a chip declares for itself
  for (std::size_t i = 0; i < a.ipus.size(); ++i) {
    EXPECT_GT(a.ipus[i].memory.code - base, 0);
    EXPECT_NEAR(b.ipus[i].memory.code - base, (a.ipus[i].memory.code - base) / 2, 1.0);
  }
  for (std::size_t i = 0; i < a.layers.size(); ++i) EXPECT_DOUBLE_EQ(b.layers[i].codeBytes, a.layers[i].codeBytes / 2);
}

// The help of IPU2001 lists every single change that makes the mapping fit,
// measured by re-planning: a balanced split of the same IPUs, and fp16
// gradient accumulators in place of the precision's fp32 ones, when they do.
TEST(Levers, ABalancedSplitAndFp16AccumulatorsAreSuggestedWhenTheyFit) {
  std::ifstream in(test::sourceDir() + "/examples/bert_large_pod16.ipu");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = "precision: fp16_sr", to = "precision: fp16_mixed";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), to);
  test::Outcome o = test::runText(text, "mixed.ipu");
  ASSERT_EQ(o.errorCodes(), std::vector<std::string>{"IPU2001"}) << o.rendered();
  const std::string help = o.session->diagnostics().all().front().help;
  EXPECT_NE(help.find("`pipeline: balanced(4)`"), std::string::npos) << help;
  EXPECT_NE(help.find("`precision: fp16_mixed with { accumulators: fp16 }`"), std::string::npos) << help;
  // Each suggestion really fits: apply the accumulator one and re-plan.
  text.replace(text.find(to), to.size(), "precision: fp16_mixed with { accumulators: fp16 }");
  EXPECT_TRUE(test::runText(text, "fixed.ipu").errorCodes().empty());
}
