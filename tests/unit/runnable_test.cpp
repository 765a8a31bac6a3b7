// The kernel table (runtime/runnable/runnable.h) on its own: which ops run,
// what a layer's attributes must be, and what a stack must be as a whole;
// runtime/emulator's kernel_table_test holds the kernels to it.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/runnable/runnable.h"

namespace ipu::runnable {
namespace {

ir::Layer layer(const std::string& name, ir::LayerOp op, std::vector<std::pair<std::string, double>> numbers,
                std::vector<std::pair<std::string, std::string>> texts = {}) {
  ir::Layer l;
  l.name = name;
  l.op = op;
  l.source = {"t.ipu", static_cast<unsigned>(10 + name.size()), 3};
  for (auto& [k, v] : numbers) l.attributes.push_back({k, v, ""});
  for (auto& [k, v] : texts) l.attributes.push_back({k, 0, v});
  return l;
}

ir::PhasePlan mlp(std::vector<ir::Layer> layers) {
  ir::PhasePlan p;
  p.name = "p";
  p.model = "m";
  p.source = {"t.ipu", 40, 3};
  p.seqLen = 0;
  p.layers = std::move(layers);
  return p;
}

TEST(Runnable, EveryOpButAUsersHasOneRowAndTheMessageListsThem) {
  for (ir::LayerOp op : ir::kLayerOps) {
    const auto rows = std::count_if(kernels().begin(), kernels().end(), [op](const KernelRow& r) { return r.op == op; });
    EXPECT_EQ(rows, op == ir::LayerOp::Other ? 0 : 1) << ir::nameOf(op);
  }
  EXPECT_EQ(runnableOps(),
            "embedding, attention, ffn, mlm_head, pooled_classifier, lm_head, dense, softmax_loss, conv_module, "
            "grouped_ffn, layer_norm, conv_stem, bottleneck, basic_block, pooled_fc, patch_embedding and token_classifier");
  for (const auto& row : kernels()) EXPECT_GT(std::string(row.runs).size(), 10u) << ir::nameOf(row.op);
}

TEST(Runnable, ALayerWithoutAKernelSaysWhatRuns) {
  ir::Layer l = layer("mix", ir::LayerOp::Other, {{"width", 16}});
  l.otherOp = "fft";
  auto p = layerProblem(l, 1, 16);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->code, "IPU5002");
  EXPECT_EQ(p->message, "layer `mix`: the emulator has no kernel for op \"fft\"");
  EXPECT_EQ(p->help, "`ipu run` executes " + runnableOps() + " layers; use `ipu estimate` for the others");
  EXPECT_EQ(p->where.line, l.source.line);
  EXPECT_EQ(p->reach, Reach::Run);
}

TEST(Runnable, TheFirstRequirementALayerFailsIsTheProblem) {
  // Both `inputs` and `outputs` are missing: the row checks `inputs` first.
  auto dense = layerProblem(layer("proj", ir::LayerOp::Dense, {{"width", 16}}), 1, 16);
  ASSERT_TRUE(dense);
  EXPECT_EQ(dense->message, "layer `proj`: attribute `inputs` must be a positive whole number");
  EXPECT_EQ(dense->help, "check the layer's arguments");
  auto act = layerProblem(layer("d", ir::LayerOp::Dense, {{"inputs", 4}, {"outputs", 4}}, {{"activation", "swish"}}), 1, 16);
  ASSERT_TRUE(act);
  EXPECT_EQ(act->message, "layer `d`: activation \"swish\" has no kernel");
  EXPECT_FALSE(layerProblem(layer("d", ir::LayerOp::Dense, {{"inputs", 4}, {"outputs", 4}}, {{"activation", "tanh"}}), 1, 16));

  const ir::Layer attention = layer("a", ir::LayerOp::Attention, {{"hidden", 12}, {"heads", 6}, {"seq", 16}});
  EXPECT_FALSE(layerProblem(attention, 3, 16));
  EXPECT_EQ(layerProblem(attention, 4, 16)->message, "layer `a`: 6 heads cannot be split over shard: 4");
  EXPECT_EQ(layerProblem(attention, 3, 32)->message, "layer `a`: its `seq` is 16 but the phase's seq_len is 32");
  ir::Layer unsharded = attention;
  unsharded.shardable = false;
  EXPECT_FALSE(layerProblem(unsharded, 4, 16));

  const ir::Layer embedding = layer("e", ir::LayerOp::Embedding, {{"vocab", 100}, {"hidden", 8}, {"positions", 64}});
  EXPECT_EQ(layerProblem(embedding, 1, 128)->message, "layer `e`: it has 64 positions, fewer than the phase's seq_len 128");
  EXPECT_EQ(layerProblem(layer("h", ir::LayerOp::LmHead, {{"hidden", 8}, {"vocab", 100}}), 1, 16)->help, "pass `tie: embedding`");

  const ir::Layer stem = layer("s", ir::LayerOp::ConvStem, {{"channels", 3}, {"out", 24}, {"size", 32}, {"norm_groups", 16}},
                               {{"norm", "group"}});
  EXPECT_EQ(layerProblem(stem, 1, 0)->message, "layer `s`: 16 groups do not divide 24 channels");
  const ir::Layer patches = layer("pe", ir::LayerOp::PatchEmbedding, {{"patch", 4}, {"channels", 3}, {"hidden", 8}, {"image", 16}});
  EXPECT_FALSE(layerProblem(patches, 1, 17));
  EXPECT_EQ(layerProblem(patches, 1, 65)->message, "layer `pe`: its images make 17 tokens but the phase's image_size makes 65");
}

TEST(Runnable, AStackIsJudgedAsAWholeAfterItsLayers) {
  const ir::Layer in = layer("in", ir::LayerOp::Dense, {{"inputs", 16}, {"outputs", 8}});
  const ir::Layer out = layer("out", ir::LayerOp::Dense, {{"inputs", 8}, {"outputs", 4}});
  const ir::Layer loss = layer("loss", ir::LayerOp::SoftmaxLoss, {{"classes", 4}});
  EXPECT_FALSE(phaseProblem(mlp({in, out, loss})));

  auto noLoss = phaseProblem(mlp({in, out}));
  ASSERT_TRUE(noLoss);
  EXPECT_EQ(noLoss->code, "IPU5006");
  EXPECT_EQ(noLoss->message, "the model's last layer `out` produces no loss");
  EXPECT_EQ(noLoss->where.line, out.source.line);
  EXPECT_EQ(noLoss->reach, Reach::Run);

  auto widths = phaseProblem(mlp({in, layer("o", ir::LayerOp::Dense, {{"inputs", 7}, {"outputs", 4}}), loss}));
  ASSERT_TRUE(widths);
  EXPECT_EQ(widths->message, "layer `o` expects width 7 but receives 8");

  // A layer's own problem comes before the stack's.
  ir::Layer mix = layer("mix", ir::LayerOp::Other, {});
  mix.otherOp = "fft";
  EXPECT_EQ(phaseProblem(mlp({in, mix}))->code, "IPU5002");

  // Without layers nothing can be priced either: that one stops estimation too.
  auto empty = phaseProblem(mlp({}));
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->code, "IPU5006");
  EXPECT_EQ(empty->message, "phase `p` trains model `m`, which has no layers");
  EXPECT_EQ(empty->reach, Reach::RunAndEstimate);
}

TEST(Runnable, LanguageModelsNeedEightTokensAndTiedHeads) {
  ir::Layer emb = layer("embedding", ir::LayerOp::Embedding, {{"vocab", 100}, {"hidden", 8}, {"positions", 64}});
  ir::Layer head = layer("head", ir::LayerOp::LmHead, {{"hidden", 8}, {"vocab", 100}});
  head.tiedTo = "embedding";
  ir::PhasePlan p = mlp({emb, head});
  p.seqLen = 16;
  EXPECT_FALSE(phaseProblem(p));
  p.seqLen = 4;
  ASSERT_TRUE(phaseProblem(p));
  EXPECT_EQ(phaseProblem(p)->message, "phase `p` has seq_len 4");
  EXPECT_FALSE(modelProblem(p));  // the model builds; only the data is too short
  p.seqLen = 16;
  p.layers[1].tiedTo = "encoder";
  EXPECT_EQ(phaseProblem(p)->message, "layer `head` is tied to `encoder.word`, which no earlier embedding layer declares");
  p.layers[1].tiedTo = "embedding";
  p.layers[1].attributes[1].number = 99;
  EXPECT_EQ(phaseProblem(p)->message, "layer `head` shares `embedding.word` but its vocab/hidden differ from the embedding's");

  // One problem per phase, with the phase it was found in.
  ir::RunPlan run;
  run.phases = {p, p};
  run.phases[0].layers[1].attributes[1].number = 100;
  run.phases[1].source.line = 41;
  const std::vector<PhaseProblem> all = runProblems(run);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].phase.line, 41u);
  EXPECT_EQ(all[0].problem.where.line, p.layers[1].source.line);
}

}  // namespace
}  // namespace ipu::runnable
