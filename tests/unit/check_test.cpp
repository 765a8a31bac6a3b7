// Unit tests of the check layer: units, evaluation, records against schemas,
// batch arithmetic, schedules, and the errors a user sees.
#include <gtest/gtest.h>

#include <cmath>

#include "interpreter/check/codes.h"
#include "interpreter/check/modules.h"
#include "interpreter/check/units.h"
#include "tests/unit/test_support.h"

using namespace ipu;
using namespace ipu::check;

namespace {

// Evaluate `let name = ...` in a script and return its value.
Value valueOf(const std::string& script, const std::string& name, test::Outcome* keep = nullptr) {
  test::Outcome o = test::runText(script);
  Value out;
  if (auto* c = o.session->checker(); c != nullptr && c->root() != nullptr) {
    ModuleScope& scope = c->evaluator().scopeOf(*c->root());
    if (const Value* v = scope.lookupOwn(name, c->evaluator(), {})) out = *v;
  }
  if (keep != nullptr) *keep = std::move(o);
  return out;
}

bool hasCode(const test::Outcome& o, const std::string& code) {
  for (const auto& c : o.codes())
    if (c == code) return true;
  return false;
}

}  // namespace

TEST(Units, LookupAndFormat) {
  auto mb = lookupUnit("MB");
  ASSERT_TRUE(mb);
  EXPECT_EQ(mb->factor, 1e6);
  EXPECT_EQ(lookupUnit("MiB")->factor, 1048576.0);
  EXPECT_EQ(lookupUnit("GB/s")->dim, dims::bandwidth());
  EXPECT_EQ(lookupUnit("GHz")->dim, dims::hertz());
  EXPECT_DOUBLE_EQ(lookupUnit("Gbps")->factor, 1.25e8);
  EXPECT_TRUE(lookupUnit("%")->percent);
  EXPECT_FALSE(lookupUnit("Mb"));
  EXPECT_EQ(formatBytes(9e8), "900.0 MB");
  EXPECT_EQ(formatQuantity(1.33e9, dims::hertz()), "1.33 GHz");
  EXPECT_EQ((dims::bytes() / dims::bandwidth()), dims::seconds());
}

TEST(Evaluate, ArithmeticWithUnits) {
  Value t = valueOf("let t = 900 MB / (64 GB/s)\n", "t");
  ASSERT_TRUE(t.isNumber());
  EXPECT_EQ(t.dim, dims::seconds());
  EXPECT_NEAR(t.number, 9e8 / 6.4e10, 1e-12);
  Value peak = valueOf("let p = 1472 * 1.33 GHz * 128\n", "p");
  EXPECT_EQ(peak.dim, dims::hertz());
  EXPECT_NEAR(peak.number, 250.6e12, 1e11);
  Value f = valueOf("let f = 25% + 5%\n", "f");
  EXPECT_NEAR(f.number, 0.30, 1e-12);
  EXPECT_TRUE(f.percent);
  Value g = valueOf("let g = 65536 / (8 * 4)\n", "g");
  EXPECT_TRUE(g.isWhole());
  EXPECT_EQ(g.number, 2048);
  Value m = valueOf("let m = max([1, 5, 3]) + min(2, 7) + len(0..10) + sum(0..4)\n", "m");
  EXPECT_EQ(m.number, 5 + 2 + 10 + 6);
  Value c = valueOf("let c = if 3 > 2 and not false then \"yes\" else \"no\"\n", "c");
  EXPECT_EQ(c.text, "yes");
}

TEST(Evaluate, DeclarationOrderDoesNotMatter) {
  Value a = valueOf("let a = b * 2\nlet b = 21\n", "a");
  EXPECT_EQ(a.number, 42);
}

TEST(Evaluate, UnitErrors) {
  test::Outcome o;
  valueOf("let x = 900 MB + 1.33 GHz\n", "x", &o);
  EXPECT_TRUE(hasCode(o, code::kUnitMismatch)) << o.rendered();
  valueOf("let x = 5 Mb\n", "x", &o);
  EXPECT_TRUE(hasCode(o, code::kUnknownUnit));
  EXPECT_NE(o.rendered().find("did you mean `MB`"), std::string::npos) << o.rendered();
  valueOf("let x = 1 / 0\n", "x", &o);
  EXPECT_TRUE(hasCode(o, code::kInvalidOperation));
}

TEST(Evaluate, NamesAndCycles) {
  test::Outcome o;
  valueOf("let size = 3\nlet x = siez * 2\n", "x", &o);
  EXPECT_NE(o.rendered().find("did you mean `size`"), std::string::npos) << o.rendered();
  valueOf("let a = b\nlet b = a\n", "a", &o);
  EXPECT_TRUE(hasCode(o, code::kCyclicDefinition)) << o.rendered();
  valueOf("let x = bert_large\n", "x", &o);
  EXPECT_NE(o.rendered().find("add `import \"std/models/bert\"`"), std::string::npos) << o.rendered();
  valueOf("let x = seq_len\n", "x", &o);
  EXPECT_TRUE(hasCode(o, code::kPhaseVariable));
  valueOf("let x = 1\nlet x = 2\n", "x", &o);
  EXPECT_TRUE(hasCode(o, code::kDuplicateName));
}

TEST(Evaluate, RecordsAgainstSchemas) {
  test::Outcome o;
  valueOf("import \"std/pods\"\nchip c = GC200 with { memry: 1 GB }\n", "c", &o);
  EXPECT_TRUE(hasCode(o, code::kUnknownField));
  EXPECT_NE(o.rendered().find("did you mean `memory`"), std::string::npos) << o.rendered();
  valueOf("import \"std/pods\"\nchip c = GC200 with { memory: 1.33 GHz }\n", "c", &o);
  EXPECT_TRUE(hasCode(o, code::kUnitMismatch));
  valueOf("precision p { compute: fp61 }\n", "p", &o);
  EXPECT_NE(o.rendered().find("did you mean `fp16`"), std::string::npos) << o.rendered();
  valueOf("import \"std/pods\"\npod p { machine: M2000 }\n", "p", &o);
  EXPECT_TRUE(hasCode(o, code::kMissingField));
  Value ipus = valueOf("import \"std/pods\"\nlet n = POD64.ipus\n", "n");
  EXPECT_EQ(ipus.number, 64);
  Value clock = valueOf("import \"std/pods\"\nlet c = Bow.clock\n", "c");
  EXPECT_NEAR(clock.number, 1.85e9, 1);
}

TEST(Evaluate, TemplatesArgumentsAndVariants) {
  test::Outcome o;
  std::string pods = "import \"std/pods\"\npod small(n: int) { machine: M2000, machines: n }\n";
  Value p = valueOf(pods + "let k = small(n: 3).ipus\n", "k");
  EXPECT_EQ(p.number, 12);
  valueOf(pods + "let k = small(m: 3)\n", "k", &o);
  EXPECT_TRUE(hasCode(o, code::kBadArgument));
  EXPECT_NE(o.rendered().find("did you mean `n`"), std::string::npos);
  valueOf(pods + "let k = small()\n", "k", &o);
  EXPECT_NE(o.rendered().find("missing argument `n`"), std::string::npos) << o.rendered();
  valueOf(pods + "let k = small(n: \"x\")\n", "k", &o);
  EXPECT_TRUE(hasCode(o, code::kTypeMismatch));
  Value layers = valueOf("import \"std/models/bert\"\nmodel m = bert_base with { layers: 6 }\nlet n = m.layers\n", "n");
  EXPECT_EQ(layers.number, 1 + 6 * 2 + 2);
  valueOf("model m { layer x = m() }\nlet n = m.layers\n", "n", &o);
  EXPECT_FALSE(o.errorCodes().empty()) << "self-instantiation must be an error, not a hang";
}

TEST(Evaluate, EnumerationsReadBareNames) {
  test::Outcome o;
  valueOf("optimizer o = lamb(exclude: [bias, norm], weight_decay: 0.01)\n", "o", &o);
  EXPECT_TRUE(o.errorCodes().empty()) << o.rendered();
  valueOf("optimizer o = lamb(exclude: [bais])\n", "o", &o);
  EXPECT_NE(o.rendered().find("did you mean `bias`"), std::string::npos) << o.rendered();
  valueOf("optimizer o = lamb(betta1: 0.8)\n", "o", &o);
  EXPECT_NE(o.rendered().find("did you mean `beta1`"), std::string::npos) << o.rendered();
}

namespace {
std::string training(const std::string& phase, const std::string& mappingExtra = "replicas: 4") {
  return "import \"std/pods\"\nimport \"std/models/bert\"\nimport \"std/precision\"\n"
         "mapping m for bert_base on POD16 {\n  pipeline: balanced(4)\n  recompute: every_layer\n  " + mappingExtra + "\n}\n"
         "training t {\n  mapping: m\n  optimizer: lamb()\n  precision: fp16_sr\n  phase one {\n    seq_len: 128\n    masked_tokens: 20\n    " +
         phase + "\n  }\n}\n";
}
long long planned(const test::Outcome& o, const std::string& field) {
  ir::Json j = ir::toJson(*o.plan);
  const nlohmann::ordered_json* v = test::jsonAt(j, "runs.0.phases.0." + field);
  return v == nullptr || !v->is_number() ? -1 : v->get<long long>();
}
}  // namespace

TEST(Batch, AnyTwoDeriveTheThird) {
  test::Outcome a = test::runText(training("micro_batch: 8; global_batch: 65536; steps: 10; lr: 0.001"));
  ASSERT_TRUE(a.plan) << a.rendered();
  EXPECT_EQ(planned(a, "gradient_accumulation"), 2048);
  test::Outcome b = test::runText(training("micro_batch: 8; gradient_accumulation: 16; steps: 10; lr: 0.001"));
  ASSERT_TRUE(b.plan) << b.rendered();
  EXPECT_EQ(planned(b, "global_batch"), 8 * 16 * 4);
  test::Outcome c = test::runText(training("gradient_accumulation: 16; global_batch: 1024; steps: 10; lr: 0.001"));
  ASSERT_TRUE(c.plan) << c.rendered();
  EXPECT_EQ(planned(c, "micro_batch"), 16);
}

TEST(Batch, InconsistentAndIndivisibleAreErrors) {
  test::Outcome a = test::runText(training("micro_batch: 8; gradient_accumulation: 16; global_batch: 1000; steps: 10; lr: 0.001"));
  EXPECT_TRUE(hasCode(a, code::kBatchInconsistent)) << a.rendered();
  EXPECT_NE(a.rendered().find("8 x 16 x 4 = 512, not 1,000"), std::string::npos) << a.rendered();
  test::Outcome b = test::runText(training("micro_batch: 8; global_batch: 1000; steps: 10; lr: 0.001"));
  EXPECT_TRUE(hasCode(b, code::kBatchIndivisible)) << b.rendered();
  EXPECT_NE(b.rendered().find("992 (gradient_accumulation 31) or 1,024 (gradient_accumulation 32)"), std::string::npos)
      << b.rendered();
  test::Outcome c = test::runText(training("micro_batch: 8; steps: 10; lr: 0.001"));
  EXPECT_TRUE(hasCode(c, code::kBatchUnderdetermined));
}

TEST(Schedule, WarmupUnitsAndScaling) {
  test::Outcome a = test::runText(training("micro_batch: 8; global_batch: 1024; steps: 1000; lr: 0.001 per 256 warmup 10% then cosine to 0"));
  ASSERT_TRUE(a.plan) << a.rendered();
  ir::Json j = ir::toJson(*a.plan);
  EXPECT_NEAR(test::jsonAt(j, "runs.0.phases.0.lr.peak")->get<double>(), 0.004, 1e-12);
  EXPECT_EQ(test::jsonAt(j, "runs.0.phases.0.lr.warmup_steps")->get<double>(), 100);
  test::Outcome b = test::runText(training("micro_batch: 8; global_batch: 1024; steps: 100; lr: 0.001 warmup 200 steps then linear to 0"));
  EXPECT_TRUE(hasCode(b, code::kBadSchedule)) << b.rendered();
  test::Outcome c = test::runText(training("micro_batch: 8; global_batch: 1024; steps: 100; lr: 0.001 warmup 20 then linear to 0"));
  EXPECT_NE(c.rendered().find("warmup needs a unit"), std::string::npos) << c.rendered();
  test::Outcome d = test::runText(training("micro_batch: 8; global_batch: 1024; steps: 100; lr: 0.001 then lineer to 0"));
  EXPECT_NE(d.rendered().find("did you mean `linear`"), std::string::npos) << d.rendered();
  test::Outcome e = test::runText(training("micro_batch: 8; global_batch: 1024; epochs: 3; lr: 0.001"));
  EXPECT_TRUE(hasCode(e, code::kEpochsNeedSamples));
}

TEST(Mapping, PodLimitsAndPowerOfTwo) {
  test::Outcome a = test::runText(training("micro_batch: 8; global_batch: 1024; steps: 10; lr: 0.001", "replicas: 8"));
  EXPECT_TRUE(hasCode(a, code::kTooManyIpus)) << a.rendered();
  EXPECT_NE(a.rendered().find("use `replicas: 4`"), std::string::npos) << a.rendered();
  test::Outcome b = test::runText(training("micro_batch: 8; global_batch: 768; steps: 10; lr: 0.001", "replicas: 3"));
  EXPECT_TRUE(hasCode(b, code::kReplicasPowerOfTwo)) << b.rendered();
  test::Outcome c = test::runText(training("micro_batch: 8; global_batch: 256; steps: 10; lr: 0.001", "replicas: 1"));
  EXPECT_TRUE(hasCode(c, code::kPodUnderused)) << c.rendered();
  EXPECT_TRUE(c.errorCodes().empty()) << c.rendered();
}

// Messages that say what is wrong, not what the parser made of it.
TEST(Messages, MalformedNumbersChainedComparisonsAndPolyWithoutPower) {
  test::Outcome a = test::runText("let x = 1__000\n");
  ASSERT_EQ(a.errorCodes(), std::vector<std::string>{"IPU1017"});
  EXPECT_NE(a.rendered().find("malformed"), std::string::npos) << a.rendered();
  EXPECT_EQ(a.rendered().find("unknown unit"), std::string::npos) << a.rendered();
  test::Outcome b = test::runText("let x = 1 < 2 < 3\n");
  EXPECT_NE(b.rendered().find("comparisons do not chain"), std::string::npos) << b.rendered();
  test::Outcome ok = test::runText("let x = 1 < 2 and 2 < 3\nlet y = 65_536\n");
  EXPECT_TRUE(ok.errorCodes().empty()) << ok.rendered();
}

TEST(Format, PercentagesAndCellsNeverOverflow) {
  EXPECT_EQ(check::formatPercent(0.57), "57%");
  EXPECT_EQ(check::formatPercent(1.49), "149%");
  EXPECT_EQ(check::formatPercent(1.25e18).find('-'), std::string::npos);
  EXPECT_LE(check::formatPercent(1e300).size(), 10u);
  EXPECT_EQ(check::formatCell(12.34, 1, 7), "12.3");
  EXPECT_LE(check::formatCell(8e19, 1, 7).size(), 7u);
  EXPECT_LE(check::formatBytes(8e25).size(), 16u) << check::formatBytes(8e25);
}

// A model without layers is a check error at the user's line: estimation
// cannot price it either.
TEST(Declarations, AnEmptyModelIsACheckError) {
  test::Outcome empty = test::runText(
      "import \"std/pods\"\nmodel m {}\nmapping mp for m on POD4 { replicas: 4 }\n"
      "training t {\n  mapping: mp\n  optimizer: adam()\n"
      "  phase p { micro_batch: 8; gradient_accumulation: 1; steps: 10; lr: 0.001 }\n}\n");
  ASSERT_EQ(empty.errorCodes(), std::vector<std::string>{"IPU5006"}) << empty.rendered();
  EXPECT_NE(empty.rendered().find("test.ipu:7:3"), std::string::npos) << empty.rendered();
}

// The help of a standard name used without its import, and its reader (the
// language server's fix), agree; the checker writes that help.
TEST(ImportHelp, ReadsBackTheModuleToImport) {
  const std::string help = check::importHelp("bert_large", "std/models/bert");
  EXPECT_EQ(help, "`bert_large` is defined in `std/models/bert`: add `import \"std/models/bert\"`");
  EXPECT_EQ(check::moduleToImport(help), "std/models/bert");
  EXPECT_EQ(check::moduleToImport("did you mean `bert_large`?"), "");
  auto out = test::runText("import \"std/pods\"\nmapping m for bert_large on POD16 { replicas: 16 }\n");
  ASSERT_FALSE(out.session->diagnostics().all().empty());
  EXPECT_EQ(check::moduleToImport(out.session->diagnostics().all()[0].help), "std/models/bert");
}
