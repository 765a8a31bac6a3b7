// GroupBERT and ViT on the emulator: the plan's parameter counts are what the kernels
// hold, and mapping invariance as invariance_test.cpp proves it for BERT:
// pipelines (with the heads back on IPU 0 and the tied word matrix on another
// IPU), recomputation and Streaming Memory are bit-exact; replicas and tensor
// sharding (attention by heads, grouped FFNs by groups) reorder fp32 sums and
// agree within 2e-5 (the reasoning of invariance_test.cpp). fp16 compute
// trains like fp32.
#include <gtest/gtest.h>


#include "interpreter/session/session.h"
#include "runtime/emulator/emulator.h"
#include "tests/emulator/emulator_test_support.h"

namespace ipu::emutest {
namespace {

constexpr int kSteps = 3;

TinyBert tinyGroupBert() {
  TinyBert tb;
  tb.model = "groupbert(layers: 2, hidden: 32, heads: 4, ffn: 64, groups: 4, kernel: 5, vocab: 400, positions: 64)";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 4\n steps: 10\n lr: 0.002";
  return tb;
}

std::string scriptOf(const TinyBert& tb) {
  std::string s = tb.script();
  const std::string bert = "import \"std/models/bert\"";
  s.replace(s.find(bert), bert.size(), "import \"std/models/groupbert\"");
  return s;
}

struct Result {
  std::vector<double> losses;
  emu::NamedTensors weights;
};

Result train(const TinyBert& tb, int threads = 2) {
  Result r;
  const TrainedSteps run = runSteps(phaseOf(scriptOf(tb)), kSteps, threads);
  for (const auto& s : run.steps) EXPECT_FALSE(s.skipped);
  r.losses = run.losses();
  if (run.completed) r.weights = run.trainer->weights();
  return r;
}

const Result& reference() {
  static const Result r = train(tinyGroupBert());
  return r;
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

TEST(GroupBert, PlanParametersAreTheKernels) {
  const ir::PhasePlan phase = phaseOf(scriptOf(tinyGroupBert()));
  auto t = trainerFor(phase);
  ASSERT_TRUE(t);
  const auto& model = t->model();
  ASSERT_EQ(model.layers().size(), phase.layers.size());
  std::vector<double> held(phase.layers.size(), 0);
  for (const auto& p : model.params()) held[static_cast<std::size_t>(p.owner)] += static_cast<double>(p.spec.rows * p.spec.cols);
  int convs = 0, grouped = 0;
  for (std::size_t i = 0; i < phase.layers.size(); ++i) {
    const ir::Layer& l = phase.layers[i];
    EXPECT_EQ(held[i], l.params) << l.name;
    convs += l.op == ir::LayerOp::ConvModule;
    grouped += l.op == ir::LayerOp::GroupedFfn;
  }
  EXPECT_EQ(convs, 2);
  EXPECT_EQ(grouped, 4);
  EXPECT_EQ(phase.layers[phase.layers.size() - 3].name, "final_norm");
  EXPECT_EQ(model.family(), emu::Family::Bert);
}

TEST(GroupBert, ReferenceLearns) {
  const Result& r = reference();
  ASSERT_EQ(r.losses.size(), static_cast<std::size_t>(kSteps));
  auto t = trainerFor(phaseOf(scriptOf(tinyGroupBert())));
  ASSERT_TRUE(t);
  EXPECT_GT(maxRelativeDifference(t->weights(), r.weights), 1e-3);
}

TEST(GroupBert, PipelinesAreBitExact) {
  const char* mappings[] = {
      "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], final_norm, mlm_head, nsp_head\n }",
      // Three stages on two IPUs, the tied word matrix on IPU 0 for both uses.
      "pipeline {\n ipu 0: embedding, encoder[0], mlm_head, nsp_head\n ipu 1: encoder[1], final_norm\n }",
      // The conv module and the FFNs of one encoder layer on different IPUs; the MLM head holds a copy of the tied embedding.
      "pipeline {\n ipu 0: embedding, encoder[0].conv\n ipu 1: encoder[0].ffn1, encoder[0].attention, encoder[0].ffn2\n"
      " ipu 2: encoder[1]\n ipu 3: final_norm, mlm_head, nsp_head\n }",
  };
  for (const char* m : mappings) {
    TinyBert tb = tinyGroupBert();
    tb.mapping = m;
    expectIdentical(train(tb), reference(), m);
  }
}

TEST(GroupBert, RecomputationAndStreamingMemoryAreBitExact) {
  for (const char* r : {"every_layer", "stage_inputs"}) {
    TinyBert tb = tinyGroupBert();
    tb.mapping = std::string("pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], final_norm, mlm_head, nsp_head\n }\n recompute: ") + r;
    expectIdentical(train(tb), reference(), r);
  }
  TinyBert tb = tinyGroupBert();
  tb.mapping = "optimizer_state: streaming";
  expectIdentical(train(tb), reference(), "optimizer state in Streaming Memory");
}

TEST(GroupBert, HostThreadsDoNotMatter) {
  TinyBert tb = tinyGroupBert();
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0], mlm_head\n ipu 1: encoder[1], final_norm, nsp_head\n }\n replicas: 2\n shard: 2";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 2\n steps: 10\n lr: 0.002";
  expectIdentical(train(tb, 1), train(tb, 3), "1 vs 3 host threads");
}

TEST(GroupBert, ReplicasAndShardingMatchOneIpu) {
  TinyBert replicas = tinyGroupBert();
  replicas.mapping = "replicas: 4";
  replicas.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 1\n steps: 10\n lr: 0.002";
  expectClose(train(replicas), reference(), "4 replicas GA=1 vs 1 replica GA=4");
  TinyBert sharded = tinyGroupBert();
  sharded.mapping = "shard: 2";
  expectClose(train(sharded), reference(), "t=2 vs t=1");
  TinyBert all = tinyGroupBert();
  all.mapping = "pipeline {\n ipu 0: embedding, encoder[0], mlm_head, nsp_head\n ipu 1: encoder[1], final_norm\n }\n replicas: 2\n shard: 2\n recompute: every_layer";
  all.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 2\n steps: 10\n lr: 0.002";
  expectClose(train(all), reference(), "p=2 (3 stages), r=2, t=2, recompute");
}

// fp16 compute, weights, partials and accumulators with stochastic rounding
// and a loss scale: no step overflows and the losses follow fp32's to fp16's
// precision (2%: fp16 keeps 11 bits, and three steps of rounded updates
// separate the runs a little).
TEST(GroupBert, Fp16TracksFp32) {
  TinyBert tb = tinyGroupBert();
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], final_norm, mlm_head, nsp_head\n }\n shard: 2";
  tb.precision = "compute: fp16\n weights: fp16\n master_weights: fp32\n partials: fp16\n accumulators: fp16\n stochastic_rounding: on\n loss_scale: 256";
  const Result half = train(tb);
  ASSERT_EQ(half.losses.size(), static_cast<std::size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) EXPECT_NEAR(half.losses[i], reference().losses[i], 0.02 * reference().losses[i]) << "step " << i;
  EXPECT_GT(maxRelativeDifference(half.weights, reference().weights), 0.0) << "fp16 rounds";
}

// examples/tiny_groupbert.ipu as shipped (1,000 steps, 2-stage pipeline with
// the heads back on IPU 0, 2 replicas): held-out MLM accuracy well above the
// majority baseline (measured 0.37 against 0.10) in about half a minute.
TEST(GroupBert, TheExampleBeatsTheMajorityBaseline) {
  const ir::ExecutionPlan plan = planOfExample("tiny_groupbert.ipu");
  ASSERT_EQ(plan.runs.size(), 1u);
  emu::Options o;
  o.hostThreads = 2;
  auto out = emu::run(plan.runs[0], o);
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ(out->status, emu::Status::Completed);
  const auto& eval = out->phases.at(0).evaluation;
  std::printf("held-out MLM accuracy %.3f, majority baseline %.3f\n", eval.at("mlm_accuracy"), eval.at("mlm_baseline"));
  EXPECT_GT(eval.at("mlm_accuracy"), 2.0 * eval.at("mlm_baseline"));
  EXPECT_GT(eval.at("mlm_accuracy"), eval.at("mlm_baseline") + 0.1);
}

// ViT on the synthetic images (docs/emulator.md, "Image data"): patch
// embedding, pre-norm encoder, class-token head. Its kernels' gradients are
// in kernel_gradient_test.cpp, the PyTorch check in torch_sequence_crosscheck.py.
std::string vitScript(const std::string& mapping, const std::string& batch) {
  return "import \"std/pods\"\nimport \"std/models/vit\"\n"
         "model tiny = vit(layers: 2, hidden: 32, heads: 4, ffn: 64, patch: 4, image: 16, classes: 10)\n"
         "mapping m for tiny on POD16 {\n" +
         mapping +
         "\n}\n"
         "training t { mapping: m\n optimizer: adamw(weight_decay: 0.01, exclude: [bias, norm])\n seed: 5\n"
         " phase p { image_size: 16, " +
         batch + ", steps: 10, lr: 0.002 } }\n";
}

Result trainVit(const std::string& mapping, const std::string& batch) {
  Result r;
  const ir::PhasePlan phase = phaseOf(vitScript(mapping, batch));
  auto t = trainerFor(phase, 2);
  EXPECT_TRUE(t);
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

// Every parameter the plan counts is one the kernels hold, layer by layer.
TEST(Vit, PlanParametersAreTheKernels) {
  const ir::PhasePlan phase = phaseOf(vitScript("", "micro_batch: 4, gradient_accumulation: 4"));
  auto t = trainerFor(phase);
  ASSERT_TRUE(t);
  const auto& model = t->model();
  ASSERT_EQ(model.layers().size(), phase.layers.size());
  for (std::size_t i = 0; i < phase.layers.size(); ++i) {
    double held = 0;
    for (const auto& spec : model.layers()[i].specs) held += static_cast<double>(spec.rows * spec.cols);
    EXPECT_EQ(held, phase.layers[i].params) << phase.layers[i].name;
  }
  EXPECT_EQ(model.imageTokens(), 17);  // (16 / 4)^2 patches and the class token
}

// Pipelines and recomputation are bit-exact; replicas reorder the gradient
// sums (within 2e-5, as for BERT).
TEST(Vit, MappingsAgree) {
  const std::string batch = "micro_batch: 4, gradient_accumulation: 4";
  const Result one = trainVit("", batch);
  ASSERT_EQ(one.losses.size(), static_cast<std::size_t>(kSteps));
  expectIdentical(trainVit("pipeline {\n ipu 0: patches, encoder[0]\n ipu 1: encoder[1], head\n }", batch), one,
                  "2-stage pipeline");
  expectIdentical(trainVit("recompute: every_layer", batch), one, "recompute every layer");
  expectClose(trainVit("replicas: 4", "micro_batch: 4, gradient_accumulation: 1"), one, "4 replicas");
}

// The example learns far above chance (10 classes) in seconds.
TEST(Vit, ExampleLearnsFarAboveChance) {
  const ir::ExecutionPlan plan = planOfExample("tiny_vit.ipu");
  ASSERT_EQ(plan.runs.size(), 1u);
  emu::Options o;
  o.hostThreads = 2;
  auto out = emu::run(plan.runs[0], o);
  ASSERT_TRUE(out.ok()) << out.error().code << " " << out.error().message;
  const auto& eval = out->phases.at(0).evaluation;
  ASSERT_TRUE(eval.count("accuracy"));
  std::printf("tiny_vit: held-out accuracy %.3f (baseline %.3f)\n", eval.at("accuracy"), eval.at("baseline"));
  EXPECT_GT(eval.at("accuracy"), 0.6);
  EXPECT_LT(eval.at("baseline"), 0.2);
}

// A ViT whose position table is for other images than the phase's is refused
// when it is planned for a run, at the phase (IPU5002), not run on the wrong
// number of tokens.
TEST(Vit, ImagesOfAnotherSizeAreRefused) {
  std::string script = vitScript("", "micro_batch: 2, gradient_accumulation: 1");
  script.replace(script.find("image_size: 16"), 14, "image_size: 32");
  session::Session s;
  s.setPurpose(session::Purpose::Run);
  auto f = s.addSource(sourceDir() + "/tests/emulator/vit.ipu", script);
  s.plan(f);
  bool refused = false;
  for (const auto& d : s.diagnostics().all())
    if (d.code == "IPU5002") {
      refused = d.severity == base::Severity::Error;
      EXPECT_NE(d.message.find("17 tokens"), std::string::npos) << d.message;
      EXPECT_TRUE(d.span.valid());
    }
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace ipu::emutest
