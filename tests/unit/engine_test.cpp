// The long-lived engine: the prelude (the standard library loaded once per
// process and shared by every session, also across threads), the user-module
// cache, and planning mapping variants as values (session/variant.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <unistd.h>

#include "interpreter/check/codes.h"
#include "interpreter/check/prelude.h"
#include "tests/unit/test_support.h"

using namespace ipu;

namespace {

std::string planJson(const test::Outcome& o) { return o.plan == nullptr ? std::string() : ir::toJson(*o.plan).dump(); }

}  // namespace

TEST(Prelude, SessionsShareTheStandardLibrary) {
  const check::Prelude& prelude = check::Prelude::get();
  ASSERT_NE(prelude.module("std/pods"), nullptr);
  ASSERT_NE(prelude.module("std/models/bert"), nullptr);
  test::Outcome a = test::runFile(test::sourceDir() + "/examples/bert_large_pod16.ipu");
  test::Outcome b = test::runFile(test::sourceDir() + "/examples/bert_large_pod64.ipu");
  ASSERT_NE(a.plan, nullptr);
  ASSERT_NE(b.plan, nullptr);
  // Both sessions' loaders hand out the prelude's module, not a parse of their own.
  EXPECT_EQ(a.session->checker()->loader().loadStandard("std/models/bert"), prelude.module("std/models/bert"));
  EXPECT_EQ(b.session->checker()->loader().loadStandard("std/models/bert"), prelude.module("std/models/bert"));
  // The standard files keep their ids in each session's source map.
  for (base::FileId id = 0; id < prelude.sources().size(); ++id)
    EXPECT_EQ(&a.session->sources().file(id), &prelude.sources().file(id));
}

TEST(Prelude, PlansAreTheSameFromManyThreads) {
  const std::string path = test::sourceDir() + "/examples/gpt3_175b_pod256.ipu";
  const std::string expected = planJson(test::runFile(path));
  ASSERT_FALSE(expected.empty());
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 3; ++k) got[i] = planJson(test::runFile(path));
    });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, expected);
}

TEST(ModuleCache, AnUnchangedModuleIsParsedOnceAndAChangedOneAgain) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ipu-module-cache-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [](const fs::path& p, const std::string& text) { std::ofstream(p) << text; };
  write(dir / "lib.ipu", "let width = 1024\n");
  write(dir / "main.ipu", "import \"lib\"\nlet twice = width * 2\n");
  session::Session s;
  auto root = s.readFile((dir / "main.ipu").string());
  ASSERT_TRUE(root);
  ASSERT_NE(s.check(*root), nullptr);
  const check::Module* first = nullptr;
  for (const auto& m : s.checker()->loader().modules())
    if (m->name.find("lib") != std::string::npos) first = m.get();
  ASSERT_NE(first, nullptr);
  auto program = first->program;
  std::size_t files = s.sources().size();
  ASSERT_NE(s.check(*root), nullptr);
  EXPECT_EQ(s.sources().size(), files);  // no new file: the parse was reused
  const check::Module* again = nullptr;
  for (const auto& m : s.checker()->loader().modules())
    if (m->name.find("lib") != std::string::npos) again = m.get();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->program, program);
  write(dir / "lib.ipu", "let width = oops\n");
  EXPECT_EQ(s.check(*root), nullptr);  // changed: parsed and checked again
  EXPECT_EQ(s.sources().size(), files + 1);
  fs::remove_all(dir);
}

// ------------------------------------------------------------ batch derivation

TEST(DeriveBatch, AnyTwoGiveTheThirdAndTheSameErrorsAsScripts) {
  ir::Batch b;
  check::BatchRequest r;
  r.microBatch = 8;
  r.globalBatch = 512;
  EXPECT_EQ(check::deriveBatch(r, 4, "p", b).code, nullptr);
  EXPECT_EQ(b.gradientAccumulation, 16);
  EXPECT_EQ(b.derived, ir::DerivedBatch::GradientAccumulation);
  r = {};
  r.gradientAccumulation = 16;
  r.globalBatch = 512;
  EXPECT_EQ(check::deriveBatch(r, 4, "p", b).code, nullptr);
  EXPECT_EQ(b.microBatch, 8);
  r = {};
  r.microBatch = 8;
  r.gradientAccumulation = 3;
  EXPECT_EQ(check::deriveBatch(r, 2, "p", b).code, nullptr);
  EXPECT_EQ(b.globalBatch, 48);
  r.globalBatch = 50;
  EXPECT_STREQ(check::deriveBatch(r, 2, "p", b).code, check::code::kBatchInconsistent);
  r = {};
  r.microBatch = 3;
  r.globalBatch = 100;
  check::BatchProblem p = check::deriveBatch(r, 2, "p", b);
  EXPECT_STREQ(p.code, check::code::kBatchIndivisible);
  EXPECT_EQ(p.field, "global_batch");
  EXPECT_NE(p.help.find("96"), std::string::npos);
  r = {};
  r.microBatch = 3;
  EXPECT_STREQ(check::deriveBatch(r, 2, "p", b).code, check::code::kBatchUnderdetermined);
}

// --------------------------------------------------------- mapping variants

namespace {

struct Knobs {
  int p = 4, t = 1, r = 4, phases = 1;
  const char* recompute = "every_layer";
  bool osStreaming = false, wStreaming = false, rtsW = false, rtsOs = false;
  long long mb = 8, ga = 16;
  int batchForm = 0;  // 0: micro batch + accumulation, 1: micro batch + global, 2: accumulation + global
};

// The variant written as a script. Every variable part keeps its line count,
// so spans (and so the plans' source references) do not move.
std::string script(const Knobs& k) {
  std::string mb = "micro_batch: " + std::to_string(k.mb);
  std::string ga = "gradient_accumulation: " + std::to_string(k.ga);
  std::string gb = "global_batch: " + std::to_string(k.mb * k.ga * k.r);
  std::string b1 = k.batchForm == 2 ? ga : mb, b2 = k.batchForm == 0 ? ga : gb;
  std::string rts;
  if (k.rtsW && k.rtsOs) rts = "replicated_tensor_sharding: [weights, optimizer_state]";
  else if (k.rtsW) rts = "replicated_tensor_sharding: weights";
  else if (k.rtsOs) rts = "replicated_tensor_sharding: optimizer_state";
  else rts = "// no replicated tensor sharding";
  return "import \"std/pods\"\nimport \"std/models/bert\"\nimport \"std/precision\"\n"
         "training t {\n  mapping: m\n  precision: fp16_sr\n  optimizer: lamb(weight_decay: 0.01)\n"
         "  phase one {\n    seq_len: 128\n    masked_tokens: 20\n    " + b1 + "\n    " + b2 + "\n"
         "    steps: 1000\n    lr: 0.006 per 256 warmup 10% then linear to 0\n  }\n}\n"
         "mapping m for bert_large on POD64 {\n  pipeline: balanced(" + std::to_string(k.p) + ")\n"
         "  shard: " + std::to_string(k.t) + "\n  replicas: " + std::to_string(k.r) + "\n"
         "  phases: " + std::to_string(k.phases) + "\n  recompute: " + k.recompute + "\n"
         "  optimizer_state: " + (k.osStreaming ? "streaming" : "on_chip") + "\n"
         "  weights: " + (k.wStreaming ? "streaming" : "on_chip") + "\n  " + rts + "\n}\n";
}

plan::MappingValue variant(const Knobs& k) {
  plan::MappingValue v;
  v.placement = plan::MappingValue::Placement::Balanced;
  v.pipelineIpus = k.p;
  ir::Mapping& m = v.settings;
  m.shard = k.t;
  m.replicas = k.r;
  m.phases = k.phases;
  m.recompute = std::string(k.recompute) == "every_layer" ? ir::Recompute::EveryLayer
                : std::string(k.recompute) == "stage_inputs" ? ir::Recompute::Stage
                                                              : ir::Recompute::None;
  m.optimizerStateStreaming = k.osStreaming;
  m.weightsStreaming = k.wStreaming;
  m.rtsWeights = k.rtsW;
  m.rtsOptimizerState = k.rtsOs;
  m.availableMemoryProportion = {0.6};
  if (k.batchForm != 2) v.batch.microBatch = k.mb;
  if (k.batchForm != 1) v.batch.gradientAccumulation = k.ga;
  if (k.batchForm != 0) v.batch.globalBatch = k.mb * k.ga * k.r;
  return v;
}

}  // namespace

TEST(MappingVariants, PlannedAsValuesTheyEqualTheSameVariantWrittenAsAScript) {
  // The base: one variant, checked once; every other variant is planned from it.
  session::Session base;
  base::FileId f = base.addSource(test::sourceDir() + "/tests/variant.ipu", script(Knobs{}));
  ASSERT_NE(base.check(f), nullptr);
  std::mt19937 rng(20261123);
  auto pick = [&](std::initializer_list<int> xs) { return *(xs.begin() + rng() % xs.size()); };
  const char* recomputes[] = {"none", "every_layer", "stage_inputs"};
  int planned = 0, fitting = 0;
  for (int i = 0; i < 60; ++i) {
    Knobs k;
    k.p = pick({1, 2, 4, 8});
    k.t = pick({1, 1, 2});
    int maxR = 64 / (k.p * k.t);
    k.r = 1;
    for (int steps = static_cast<int>(rng() % 6); steps > 0 && k.r * 2 <= maxR; --steps) k.r *= 2;
    k.phases = pick({1, 1, 2});
    k.recompute = recomputes[rng() % 3];
    k.osStreaming = rng() % 2;
    k.wStreaming = rng() % 4 == 0;
    k.rtsW = rng() % 4 == 0;
    k.rtsOs = rng() % 2;
    k.mb = pick({1, 2, 4, 8, 16});
    k.ga = pick({1, 3, 8, 32});
    k.batchForm = static_cast<int>(rng() % 3);
    SCOPED_TRACE(script(k));
    test::Outcome written = test::runText(script(k), "variant.ipu");
    ASSERT_NE(written.plan, nullptr) << written.rendered();
    session::PlannedVariant v = base.planVariant(variant(k));
    ASSERT_TRUE(v.ok);
    EXPECT_EQ(ir::toJson(v.plan).dump(), ir::toJson(written.plan->runs.at(0).phases.at(0)).dump());
    // The same plan diagnostics (does not fit, ...), minus the checker's warnings.
    std::vector<std::string> scriptCodes, variantCodes;
    for (const auto& d : written.session->diagnostics().all())
      if (d.code.rfind("IPU2", 0) == 0) scriptCodes.push_back(d.code);
    for (const auto& d : v.diagnostics.all()) variantCodes.push_back(d.code);
    EXPECT_EQ(variantCodes, scriptCodes);
    ++planned;
    fitting += v.plan.fits;
  }
  EXPECT_EQ(planned, 60);
  EXPECT_GT(fitting, 0);
  EXPECT_LT(fitting, 60);  // the sample covers both verdicts
}

TEST(MappingVariants, InvalidVariantsAreRejectedWithTheCheckersCodes) {
  session::Session s;
  base::FileId f = s.addSource(test::sourceDir() + "/tests/variant.ipu", script(Knobs{}));
  ASSERT_NE(s.check(f), nullptr);
  std::size_t before = s.diagnostics().all().size();
  plan::MappingValue v = s.variantOf();
  EXPECT_EQ(v.settings.replicas, 4);
  EXPECT_EQ(*v.batch.microBatch, 8);
  EXPECT_EQ(*v.batch.gradientAccumulation, 16);
  EXPECT_FALSE(v.batch.globalBatch.has_value());
  auto codeOf = [&](const plan::MappingValue& x) {
    session::PlannedVariant p = s.planVariant(x);
    EXPECT_FALSE(p.ok);
    return p.diagnostics.all().empty() ? std::string() : p.diagnostics.all().front().code;
  };
  plan::MappingValue tooMany = v;
  tooMany.settings.replicas = 32;
  EXPECT_EQ(codeOf(tooMany), check::code::kTooManyIpus);
  plan::MappingValue notPow2 = v;
  notPow2.settings.replicas = 3;
  EXPECT_EQ(codeOf(notPow2), check::code::kReplicasPowerOfTwo);
  plan::MappingValue deep = v;
  deep.placement = plan::MappingValue::Placement::Balanced;
  deep.pipelineIpus = 1000;
  EXPECT_EQ(codeOf(deep), check::code::kBalancedTooDeep);
  plan::MappingValue batch = v;
  batch.batch = {};
  batch.batch.microBatch = 3;
  batch.batch.globalBatch = 1000;
  EXPECT_EQ(codeOf(batch), check::code::kBatchIndivisible);
  // The session's own diagnostics are as the check left them.
  EXPECT_EQ(s.diagnostics().all().size(), before);
  // The variant as written plans like the script.
  session::PlannedVariant same = s.planVariant(v);
  ASSERT_TRUE(same.ok);
  const ir::ExecutionPlan* plan = s.plan(f);
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(ir::toJson(same.plan).dump(), ir::toJson(plan->runs.at(0).phases.at(0)).dump());
}

namespace ipu {
namespace {

// The REPL's `:plan m`: a training planned with another mapping of its model,
// as mapping values; a mapping of another model is refused with the
// checker's code for it.
TEST(MappingVariants, ATrainingPlannedWithAnotherMappingOfItsModel) {
  std::ifstream in(std::string(IPU_SOURCE_DIR) + "/examples/tiny_bert.ipu");
  std::stringstream text;
  text << in.rdbuf()
       << "\nmapping one = two_by_two with { replicas: 1 }\n"
          "model small = bert(layers: 1, hidden: 64, heads: 2, ffn: 256, vocab: 1000, positions: 128)\n"
          "mapping foreign for small on tiny_pod { }\n";
  session::Session s;
  auto f = s.addSource(std::string(IPU_SOURCE_DIR) + "/examples/tiny_other.ipu", text.str());
  const check::CheckedProgram* program = s.check(f);
  ASSERT_NE(program, nullptr);
  const check::MappingSpec *one = nullptr, *foreign = nullptr;
  for (const auto& m : program->mappings) {
    if (m->name == "one") one = m.get();
    if (m->name == "foreign") foreign = m.get();
  }
  ASSERT_TRUE(one && foreign);
  session::Session::PlannedRun planned = s.planRunWith(*one, 0);
  ASSERT_TRUE(planned.ok) << (planned.diagnostics.all().empty() ? "" : planned.diagnostics.all().front().message);
  ASSERT_EQ(planned.run.phases.size(), 2u);
  for (const auto& ph : planned.run.phases) {
    EXPECT_EQ(ph.mapping.replicas, 1);
    EXPECT_EQ(ph.mapping.pipelineIpus, 2);  // two_by_two's pipeline, kept by `with`
    EXPECT_EQ(ph.batch.globalBatch, ph.batch.microBatch * ph.batch.gradientAccumulation);  // as written: mb and GA
  }
  EXPECT_EQ(planned.run.phases[0].batch.gradientAccumulation, 2);
  session::Session::PlannedRun refused = s.planRunWith(*foreign, 0);
  EXPECT_FALSE(refused.ok);
  ASSERT_FALSE(refused.diagnostics.all().empty());
  EXPECT_EQ(refused.diagnostics.all().front().code, check::code::kModelMismatch);
}

}  // namespace
}  // namespace ipu
