// The standard library against published figures: parameter counts of every
// model within 2%, hardware peaks, and every stdlib declaration checks.
#include <gtest/gtest.h>

#include <cmath>

#include "interpreter/check/modules.h"
#include "tests/unit/test_support.h"

using namespace ipu;

namespace {

double params(const std::string& module, const std::string& model) {
  test::Outcome o = test::runText("import \"" + module + "\"\nlet n = " + model + ".params\n");
  auto* c = o.session->checker();
  if (c == nullptr || c->root() == nullptr) return -1;
  const check::Value* v = c->evaluator().scopeOf(*c->root()).lookupOwn("n", c->evaluator(), {});
  EXPECT_TRUE(o.errorCodes().empty()) << o.rendered();
  return v != nullptr && v->isNumber() ? v->number : -1;
}

}  // namespace

struct Published {
  const char* module;
  const char* model;
  double parameters;  // the published count
  const char* source;
};

class ParameterCount : public ::testing::TestWithParam<Published> {};

TEST_P(ParameterCount, WithinTwoPercentOfPublished) {
  const Published& p = GetParam();
  double n = params(p.module, p.model);
  EXPECT_NEAR(n / p.parameters, 1.0, 0.02) << p.model << ": " << n << " parameters, published " << p.parameters
                                           << " (" << p.source << ")";
}

INSTANTIATE_TEST_SUITE_P(
    Stdlib, ParameterCount,
    ::testing::Values(Published{"std/models/bert", "bert_base", 110e6, "Devlin et al. 2019"},
                      Published{"std/models/bert", "bert_large", 337.5e6, "335-340M as commonly reported"},
                      Published{"std/models/gpt", "gpt2_small", 124e6, "HF model card"},
                      Published{"std/models/gpt", "gpt2_medium", 355e6, "HF model card"},
                      Published{"std/models/gpt", "gpt2_large", 774e6, "HF model card"},
                      Published{"std/models/gpt", "gpt2_xl", 1542e6, "Radford et al. 2019, table 2"},
                      Published{"std/models/gpt", "gpt3_175b", 175e9, "Brown et al. 2020"},
                      Published{"std/models/resnet", "resnet50", 25.6e6, "He et al. 2016 / torchvision 25,557,032"},
                      Published{"std/models/resnet", "resnet18", 11.69e6, "torchvision 11,689,512"},
                      Published{"std/models/resnet", "resnet34", 21.80e6, "torchvision 21,797,672"},
                      Published{"std/models/vit", "vit_b16", 86e6, "Dosovitskiy et al. 2021"}),
    [](const ::testing::TestParamInfo<Published>& param) { return std::string(param.param.model); });

TEST(Stdlib, BertLargeIsInThePublishedRange) {
  double n = params("std/models/bert", "bert_large");
  EXPECT_GE(n, 335e6);
  EXPECT_LE(n, 340e6);
}

TEST(Stdlib, EveryModuleChecksCleanly) {
  for (const auto& name : check::ModuleLoader::standardModuleNames()) {
    test::Outcome o = test::runText("import \"" + name + "\"\n");
    EXPECT_TRUE(o.session->diagnostics().empty()) << name << ":\n" << o.rendered();
  }
}

TEST(Stdlib, HardwarePeaksMatchDatasheets) {
  test::Outcome o = test::runText("import \"std/pods\"\nlet gc = GC200.tiles * GC200.clock * GC200.flops_per_cycle.fp16\n"
                                  "let bow = Bow.tiles * Bow.clock * Bow.flops_per_cycle.fp16\n"
                                  "let fp32 = GC200.tiles * GC200.clock * GC200.flops_per_cycle.fp32\n");
  auto* c = o.session->checker();
  auto& scope = c->evaluator().scopeOf(*c->root());
  EXPECT_NEAR(scope.lookupOwn("gc", c->evaluator(), {})->number / 250e12, 1.0, 0.01);     // GC200 datasheet
  EXPECT_NEAR(scope.lookupOwn("bow", c->evaluator(), {})->number / 348.6e12, 1.0, 0.01);  // Bow Pod256 datasheet / 256
  EXPECT_NEAR(scope.lookupOwn("fp32", c->evaluator(), {})->number / 62.5e12, 1.0, 0.01);
}

// The layer FLOP formulas agree with the standard count: a transformer layer's
// forward and backward matmuls cost 6 FLOP per parameter per token, and
// attention adds 12 x seq x hidden per token per layer (Kaplan et al. 2020).
TEST(Stdlib, TransformerFlopsMatchTheStandardCount) {
  test::Outcome o = test::runText(
      "import \"std/pods\"\nimport \"std/models/bert\"\nimport \"std/precision\"\n"
      "mapping m for bert_large on POD16 { pipeline: balanced(4); replicas: 4; recompute: every_layer; optimizer_state: streaming }\n"
      "training t { mapping: m; precision: fp16_sr; optimizer: lamb(weight_decay: 0.01)\n"
      "  phase one { seq_len: 384; masked_tokens: 56; micro_batch: 2; global_batch: 16384; steps: 10; lr: 0.002 } }\n");
  ASSERT_NE(o.plan, nullptr) << o.rendered();
  const auto& ph = o.plan->runs[0].phases[0];
  const double tokens = 2.0 * 384;
  double params = 0, matmul = 0, attention = 0;
  int layers = 0;
  for (const auto& l : ph.layers) {
    if (l.op != ir::LayerOp::Attention && l.op != ir::LayerOp::Ffn) continue;
    params += l.params;
    matmul += l.forward.matmul + l.backward.matmul;
    attention += l.forward.attention + l.backward.attention;
    layers += l.op == ir::LayerOp::Attention;
  }
  ASSERT_EQ(layers, 24);
  EXPECT_NEAR(matmul / (6 * params * tokens), 1.0, 0.01);
  EXPECT_NEAR(attention / (12.0 * 384 * 1024 * tokens * layers), 1.0, 1e-9);
}
