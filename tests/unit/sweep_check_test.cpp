// Unit tests of `sweep` declarations (check/sweeps.h): the SweepSpec the
// checker makes of one, and trial values applied without script text, which
// must give the plan (and the diagnostics) of the script with those values
// written in by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "interpreter/check/codes.h"
#include "interpreter/sweep/space.h"
#include "runtime/ir/json.h"
#include "tests/unit/test_support.h"

using namespace ipu;

namespace {

// A small BERT trained in two phases: the first by epochs of a sized dataset
// with the linear scaling rule (so steps and the peak learning rate follow
// the global batch), the second by steps.
const std::string kScript = R"(import "std/pods"
import "std/models/bert"

chip tiny_chip = GC200 with { tiles: 16, memory: 64 MB, code_base: 1 MB }
machine tiny_machine = M2000 with { chip: tiny_chip, ipus: 4, streaming_memory: 1 GB }
pod tiny_pod {
  machine: tiny_machine
  machines: 1
}
model tiny = bert(layers: 2, hidden: 64, heads: 2, ffn: 256, vocab: 1000, positions: 128)
mapping two_by_two for tiny on tiny_pod {
  pipeline {
    ipu 0: embedding, encoder[0], mlm_head, nsp_head
    ipu 1: encoder[1]
  }
  replicas: 2
  recompute: none
}
precision full {
  compute: fp32
}
precision half {
  compute: fp16
  loss_scale: 128
}
dataset corpus {
  samples: 64000
}
training tiny_pretrain {
  mapping: two_by_two
  precision: full
  dataset: corpus
  optimizer: lamb(weight_decay: 0.01, exclude: [bias, norm])
  seed: 1234
  phase short {
    seq_len: 32
    masked_tokens: 5
    micro_batch: 4
    gradient_accumulation: 2
    epochs: 1
    lr: 0.002 per 16 warmup 10 steps then linear to 0
  }
  phase long from short {
    seq_len: 64
    masked_tokens: 10
    micro_batch: 2
    global_batch: 16
    steps: 100
    lr: 0.001 warmup 10 steps then linear to 0
  }
}
run tiny_pretrain
)";

std::string replaceOnce(std::string text, const std::string& from, const std::string& to) {
  std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "`" << from << "` is not in the script";
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << "`" << from << "` is in the script twice";
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

struct Planned {
  std::unique_ptr<session::Session> session;
  const ir::ExecutionPlan* plan = nullptr;
  std::string json;
  std::set<std::pair<std::string, std::string>> diagnostics;  // (code, message)
};

// Plans `text` as the same file name every time (plans name their source).
Planned planText(const std::string& text, std::optional<check::Overrides> overrides = std::nullopt) {
  Planned p;
  p.session = std::make_unique<session::Session>();
  base::FileId f = p.session->addSource(test::sourceDir() + "/tests/sweep.ipu", text);
  p.session->setOverrides(std::move(overrides));
  p.plan = p.session->plan(f);
  if (p.plan != nullptr) p.json = ir::toJson(*p.plan).dump(1);
  for (const auto& d : p.session->diagnostics().all()) p.diagnostics.emplace(d.code, d.message);
  return p;
}

check::Overrides trial(sweep::Assignment values) {
  check::Overrides o;
  o.training = "tiny_pretrain";
  o.values = std::move(values);
  return o;
}

using PV = sweep::ParamValue;

const check::CheckedProgram* checkText(session::Session& s, const std::string& text) {
  return s.check(s.addSource(test::sourceDir() + "/tests/sweep.ipu", text));
}

std::string sessionCodes(session::Session& s) {
  std::string out;
  for (const auto& d : s.diagnostics().all()) out += d.code + " " + d.message + "\n";
  return out;
}

}  // namespace

TEST(SweepDeclaration, BecomesASweepSpec) {
  session::Session s;
  const check::CheckedProgram* p = checkText(s, kScript + R"(
sweep search for tiny_pretrain {
  method: bayes
  metric: maximize(eval.mlm_accuracy, target: 0.5)
  parameters {
    phase.short.lr: log_uniform(1e-4, 1e-2)
    phase.short.micro_batch: [4, 8, 16]
    optimizer.weight_decay: categorical([0, 0.01, 0.1], probabilities: [0.2, 0.5, 0.3])
    mapping.recompute: [none, every_layer]
    model.hidden: int_uniform(32, 128)
    precision: [full, half]
    phase.long.steps: q_uniform(50 steps, 200 steps, 50)
    optimizer.beta2: normal(0.99, 0.005)
  }
  run_cap: 40
  early_terminate: hyperband(min_iter: 20, eta: 3)
  seed: 7
}
sweep second for tiny_pretrain {
  method: random
  metric {
    name: "eval.loss"
    goal: minimize
  }
  parameters {
    seed: [1, 2, 3]
  }
  run_cap: 3
  from: best(search)
}
sweep third for tiny_pretrain {
  method: grid
  metric: minimize(loss)
  parameters {
    phase.long.micro_batch: int_uniform(1, 4)
  }
  from: checkpoint("20261125-abc")
}
)");
  ASSERT_NE(p, nullptr) << sessionCodes(s);
  ASSERT_EQ(p->sweeps.size(), 3u);
  const sweep::SweepSpec& a = p->sweeps[0];
  EXPECT_EQ(a.name, "search");
  EXPECT_EQ(a.training, "tiny_pretrain");
  EXPECT_EQ(a.method, sweep::Method::Bayes);
  EXPECT_EQ(a.metric.name, "eval.mlm_accuracy");
  EXPECT_EQ(a.metric.goal, sweep::Goal::Maximize);
  ASSERT_TRUE(a.metric.target);
  EXPECT_DOUBLE_EQ(*a.metric.target, 0.5);
  EXPECT_EQ(a.runCap, 40);
  EXPECT_TRUE(a.earlyTerminate.enabled);
  EXPECT_EQ(a.earlyTerminate.minIter, 20);
  EXPECT_EQ(a.earlyTerminate.eta, 3);
  EXPECT_EQ(a.seed, 7u);
  EXPECT_FALSE(a.from);
  // Sorted by path.
  std::vector<std::string> paths;
  for (const auto& q : a.parameters) paths.push_back(q.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"mapping.recompute", "model.hidden", "optimizer.beta2", "optimizer.weight_decay",
                                             "phase.long.steps", "phase.short.lr", "phase.short.micro_batch", "precision"}));
  auto param = [&](const std::string& path) -> const sweep::ParamSpec& {
    return *std::find_if(a.parameters.begin(), a.parameters.end(), [&](const auto& q) { return q.path == path; });
  };
  EXPECT_EQ(param("mapping.recompute").distribution, sweep::Distribution::Values);
  EXPECT_EQ(param("mapping.recompute").values, (std::vector<PV>{PV::ofName("none"), PV::ofName("every_layer")}));
  EXPECT_EQ(param("model.hidden").distribution, sweep::Distribution::IntUniform);
  EXPECT_EQ(param("model.hidden").min, 32);
  EXPECT_EQ(param("model.hidden").max, 128);
  EXPECT_EQ(param("optimizer.beta2").distribution, sweep::Distribution::Normal);
  EXPECT_DOUBLE_EQ(param("optimizer.beta2").mu, 0.99);
  EXPECT_DOUBLE_EQ(param("optimizer.beta2").sigma, 0.005);
  const auto& wd = param("optimizer.weight_decay");
  EXPECT_EQ(wd.distribution, sweep::Distribution::Categorical);
  EXPECT_EQ(wd.values, (std::vector<PV>{PV::ofInteger(0), PV::ofNumber(0.01), PV::ofNumber(0.1)}));
  EXPECT_EQ(wd.probabilities, (std::vector<double>{0.2, 0.5, 0.3}));
  EXPECT_EQ(param("phase.long.steps").distribution, sweep::Distribution::QUniform);
  EXPECT_EQ(param("phase.long.steps").q, 50);
  EXPECT_EQ(param("phase.long.steps").max, 200);
  EXPECT_EQ(param("phase.short.lr").distribution, sweep::Distribution::LogUniform);
  EXPECT_DOUBLE_EQ(param("phase.short.lr").min, 1e-4);
  EXPECT_EQ(param("phase.short.micro_batch").values,
            (std::vector<PV>{PV::ofInteger(4), PV::ofInteger(8), PV::ofInteger(16)}));
  EXPECT_EQ(param("precision").values, (std::vector<PV>{PV::ofName("full"), PV::ofName("half")}));

  const sweep::SweepSpec& b = p->sweeps[1];
  EXPECT_EQ(b.method, sweep::Method::Random);
  EXPECT_EQ(b.metric.name, "eval.loss");
  EXPECT_EQ(b.metric.goal, sweep::Goal::Minimize);
  EXPECT_FALSE(b.metric.target);
  EXPECT_FALSE(b.earlyTerminate.enabled);
  ASSERT_TRUE(b.from);
  EXPECT_EQ(b.from->kind, sweep::StartFrom::Kind::SweepBest);
  EXPECT_EQ(b.from->name, "search");

  // A grid lists the whole numbers of an int_uniform as its values.
  const sweep::SweepSpec& c = p->sweeps[2];
  EXPECT_EQ(c.method, sweep::Method::Grid);
  EXPECT_EQ(c.runCap, 0);
  ASSERT_EQ(c.parameters.size(), 1u);
  EXPECT_EQ(c.parameters[0].distribution, sweep::Distribution::Values);
  EXPECT_EQ(c.parameters[0].values, (std::vector<PV>{PV::ofInteger(1), PV::ofInteger(2), PV::ofInteger(3), PV::ofInteger(4)}));
  ASSERT_TRUE(c.from);
  EXPECT_EQ(c.from->kind, sweep::StartFrom::Kind::Run);
  EXPECT_EQ(c.from->name, "20261125-abc");
}

TEST(SweepDeclaration, AssignmentKeysAreCanonical) {
  sweep::Assignment x = {{"phase.short.lr", PV::ofNumber(0.001)}, {"mapping.recompute", PV::ofName("none")}};
  sweep::Assignment y = {{"mapping.recompute", PV::ofName("none")}, {"phase.short.lr", PV::ofNumber(0.001)}};
  EXPECT_EQ(sweep::assignmentKey(x), sweep::assignmentKey(y));
  EXPECT_EQ(sweep::assignmentKey(x), "mapping.recompute=none phase.short.lr=0.001");
  EXPECT_NE(sweep::assignmentKey({{"a", PV::ofInteger(1)}}), sweep::assignmentKey({{"a", PV::ofText("1")}}));
  EXPECT_EQ(PV::ofNumber(0.1).canonical(), "0.1");  // the shortest text that reads back exactly
  EXPECT_EQ(std::stod(PV::ofNumber(0.1 + 0.2).canonical()), 0.1 + 0.2);
  EXPECT_EQ(PV::ofBoolean(true).canonical(), "true");
  for (auto m : {sweep::Method::Grid, sweep::Method::Random, sweep::Method::Bayes})
    EXPECT_EQ(sweep::methodFromName(sweep::methodName(m)), m);
  EXPECT_FALSE(sweep::distributionFromName("gaussian"));
  EXPECT_EQ(sweep::distributionFromName("q_log_uniform"), sweep::Distribution::QLogUniform);
}

// The heart of it: for each trial, the plan from overrides is the plan of the
// script edited by hand, derived values included.
TEST(SweepOverrides, PlanEqualsTheHandEditedScript) {
  struct Case {
    sweep::Assignment values;
    std::vector<std::pair<std::string, std::string>> edits;  // (as written, as edited)
  };
  std::vector<Case> cases = {
      // Global batch, steps from epochs and the scaled peak rate derive again.
      {{{"phase.short.micro_batch", PV::ofInteger(8)}}, {{"micro_batch: 4", "micro_batch: 8"}}},
      // The peak of a schedule: warmup, `per` and decay stay.
      {{{"phase.short.lr", PV::ofNumber(0.004)}}, {{"lr: 0.002 per 16", "lr: 0.004 per 16"}}},
      // Gradient accumulation derives again from the global batch.
      {{{"phase.long.micro_batch", PV::ofInteger(4)}, {"phase.long.steps", PV::ofInteger(150)}},
       {{"micro_batch: 2", "micro_batch: 4"}, {"steps: 100", "steps: 150"}}},
      // Fields of the declarations the training uses.
      {{{"optimizer.weight_decay", PV::ofNumber(0.1)}, {"mapping.recompute", PV::ofName("every_layer")}},
       {{"weight_decay: 0.01", "weight_decay: 0.1"}, {"recompute: none", "recompute: every_layer"}}},
      // Replicas change the global batch of both phases.
      {{{"mapping.replicas", PV::ofInteger(1)}}, {{"replicas: 2", "replicas: 1"}}},
      // A model argument: every layer is costed again.
      {{{"model.hidden", PV::ofInteger(128)}}, {{"hidden: 64", "hidden: 128"}}},
      // A declaration by name, and a field of the dataset.
      {{{"precision", PV::ofName("half")}, {"dataset.samples", PV::ofInteger(32000)}},
       {{"precision: full", "precision: half"}, {"samples: 64000", "samples: 32000"}}},
      // The training's seed.
      {{{"seed", PV::ofInteger(99)}}, {{"seed: 1234", "seed: 99"}}},
  };
  Planned base = planText(kScript);
  ASSERT_NE(base.plan, nullptr) << base.json;
  for (const auto& c : cases) {
    std::string edited = kScript;
    for (const auto& [from, to] : c.edits) edited = replaceOnce(edited, from, to);
    Planned byHand = planText(edited);
    Planned byOverrides = planText(kScript, trial(c.values));
    const std::string what = sweep::assignmentKey(c.values);
    ASSERT_NE(byHand.plan, nullptr) << what;
    ASSERT_NE(byOverrides.plan, nullptr) << what << "\n" << sessionCodes(*byOverrides.session);
    EXPECT_EQ(byOverrides.json, byHand.json) << what;
    EXPECT_NE(byOverrides.json, base.json) << what << ": the trial changed nothing";
    EXPECT_EQ(byOverrides.diagnostics, byHand.diagnostics) << what;
  }
  // Derived values really moved: micro batch 8 doubles the global batch and
  // halves the steps of an epoch, and the peak rate scales with the batch.
  Planned mb8 = planText(kScript, trial({{"phase.short.micro_batch", PV::ofInteger(8)}}));
  ASSERT_NE(mb8.plan, nullptr);
  const ir::PhasePlan& before = base.plan->runs[0].phases[0];
  const ir::PhasePlan& after = mb8.plan->runs[0].phases[0];
  EXPECT_EQ(after.batch.globalBatch, 2 * before.batch.globalBatch);
  EXPECT_EQ(after.steps, before.steps / 2);
  EXPECT_DOUBLE_EQ(after.lr.peak, 2 * before.lr.peak);
}

// A value a field does not take gets the diagnostics the field gives when the
// value is written in the script.
TEST(SweepOverrides, BadValuesGetTheFieldsDiagnostics) {
  struct Case {
    sweep::Assignment values;
    std::string from, to;
    std::string code;
  };
  std::vector<Case> cases = {
      {{{"phase.short.micro_batch", PV::ofNumber(2.5)}}, "micro_batch: 4", "micro_batch: 2.5", check::code::kOutOfRange},
      {{{"phase.short.micro_batch", PV::ofInteger(0)}}, "micro_batch: 4", "micro_batch: 0", check::code::kOutOfRange},
      {{{"mapping.recompute", PV::ofName("sometimes")}}, "recompute: none", "recompute: sometimes", check::code::kTypeMismatch},
      {{{"mapping.replicas", PV::ofInteger(3)}}, "replicas: 2", "replicas: 3", check::code::kTooManyIpus},
      {{{"phase.long.micro_batch", PV::ofInteger(3)}}, "micro_batch: 2", "micro_batch: 3", check::code::kBatchIndivisible},
      {{{"optimizer.weight_decay", PV::ofText("high")}}, "weight_decay: 0.01", "weight_decay: \"high\"", check::code::kTypeMismatch},
  };
  for (const auto& c : cases) {
    Planned byHand = planText(replaceOnce(kScript, c.from, c.to));
    Planned byOverrides = planText(kScript, trial(c.values));
    const std::string what = sweep::assignmentKey(c.values);
    EXPECT_EQ(byOverrides.plan, nullptr) << what;
    bool found = std::any_of(byOverrides.diagnostics.begin(), byOverrides.diagnostics.end(),
                             [&](const auto& d) { return d.first == c.code; });
    EXPECT_TRUE(found) << what << " gave:\n" << sessionCodes(*byOverrides.session);
    EXPECT_EQ(byOverrides.diagnostics, byHand.diagnostics) << what;
  }
}

TEST(SweepOverrides, UnknownPathsAndTrainings) {
  Planned typo = planText(kScript, trial({{"optimizer.weigth_decay", PV::ofNumber(0.1)}}));
  EXPECT_EQ(typo.plan, nullptr);
  ASSERT_EQ(typo.session->diagnostics().all().size(), 1u) << sessionCodes(*typo.session);
  const auto& d = typo.session->diagnostics().all()[0];
  EXPECT_EQ(d.code, check::code::kUnknownSweepPath);
  EXPECT_NE(d.help.find("optimizer.weight_decay"), std::string::npos) << d.help;

  Planned phase = planText(kScript, trial({{"phase.shrt.lr", PV::ofNumber(0.1)}}));
  ASSERT_FALSE(phase.session->diagnostics().all().empty());
  EXPECT_NE(phase.session->diagnostics().all()[0].help.find("phase.short.lr"), std::string::npos);

  // `lr` at the training level: every phase writes its own, so it would change nothing.
  Planned noEffect = planText(kScript, trial({{"lr", PV::ofNumber(0.1)}}));
  EXPECT_EQ(noEffect.plan, nullptr);
  EXPECT_TRUE(noEffect.diagnostics.size() == 1 && noEffect.diagnostics.begin()->first == check::code::kSweepPathNoEffect)
      << sessionCodes(*noEffect.session);

  check::Overrides other = trial({{"seed", PV::ofInteger(1)}});
  other.training = "tiny_pretrian";
  Planned none = planText(kScript, other);
  EXPECT_EQ(none.plan, nullptr);
  EXPECT_EQ(none.diagnostics.begin()->first, check::code::kBadSweep);
}

// The session keeps the overrides for later calls until they are cleared.
TEST(SweepOverrides, KeptUntilCleared) {
  session::Session s;
  base::FileId f = s.addSource(test::sourceDir() + "/tests/sweep.ipu", kScript);
  s.setOverrides(trial({{"seed", PV::ofInteger(7)}}));
  const ir::ExecutionPlan* p = s.plan(f);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->runs[0].seed, 7);
  s.setOverrides(std::nullopt);
  p = s.plan(f);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->runs[0].seed, 1234);
}

// What `ipu check` says about sweeps, case by case: the parameter lines of a
// sweep of kScript's training, and the one diagnostic each must give.
TEST(SweepDeclaration, ChecksEveryParameter) {
  struct Case {
    std::string method, parameters, code, message;
  };
  std::vector<Case> cases = {
      {"grid", "phase.short.micro_batch: [4, 2.5]", check::code::kOutOfRange, "must be a whole number"},
      {"grid", "phase.short.micro_batch: [4, 0]", check::code::kOutOfRange, "must be positive"},
      {"grid", "mapping.recompute: [none, evry_layer]", check::code::kTypeMismatch, "found `evry_layer`"},
      {"grid", "phase.short.steps: [100, 2 GB]", check::code::kUnitMismatch, "`steps` expects"},
      {"grid", "precision: [full, fp64]", check::code::kUnknownName, "fp64"},
      {"grid", "model.hidden: [64, \"wide\"]", check::code::kTypeMismatch, "`hidden`"},
      {"grid", "phase.short.lr: [0.001, 0.001]", check::code::kBadDistribution, "listed twice"},
      {"grid", "phase.short.lr: []", check::code::kBadDistribution, "has no values"},
      {"random", "phase.short.lr: uniform(0.01, 0.01)", check::code::kBadDistribution, "is empty"},
      {"random", "phase.short.lr: log_uniform(0, 0.01)", check::code::kOutOfRange, "must be positive"},
      {"random", "optimizer.weight_decay: log_uniform(0, 0.01)", check::code::kBadDistribution, "bounds must be positive"},
      {"random", "optimizer.beta2: normal(0.99, 0)", check::code::kBadDistribution, "`sigma` must be a positive"},
      {"random", "optimizer.weight_decay: q_uniform(0, 0.1, 0.5)", check::code::kBadDistribution, "wider than the range"},
      {"random", "optimizer.weight_decay: categorical([0, 0.1], probabilities: [1])", check::code::kBadDistribution,
       "1 probability for 2 values"},
      {"random", "optimizer.weight_decay: gaussian(0, 1)", check::code::kBadDistribution, "not a distribution"},
      {"random", "optimizer.weight_decay: uniform(0)", check::code::kBadArgument, "needs `max`"},
      {"random", "mapping.recompute: uniform(0, 1)", check::code::kDistributionForField, "a range of numbers cannot"},
      {"random", "phase.long.micro_batch: q_uniform(1, 8, 0.5)", check::code::kDistributionForField, "gives fractions"},
      {"random", "model.hidden: int_uniform(32.5, 64)", check::code::kBadDistribution, "takes whole numbers"},
      {"grid", "optimizer.weight_decay: categorical([0, 0.1], probabilities: [0.5, 0.5])", check::code::kGridNotFinite,
       "probabilities mean nothing"},
      {"grid", "hooks: [1]", check::code::kUnknownSweepPath, "cannot be swept"},
      {"grid", "phase.short.model: [tiny]", check::code::kUnknownSweepPath, "cannot be swept"},
      {"grid", "model.hidden.x: [1]", check::code::kUnknownSweepPath, "no value `model.hidden.x`"},
  };
  for (const auto& c : cases) {
    std::string text = kScript + "sweep s for tiny_pretrain {\n  method: " + c.method +
                       "\n  metric: minimize(loss)\n  parameters {\n    " + c.parameters + "\n  }\n  run_cap: 4\n}\n";
    session::Session s;
    const check::CheckedProgram* p = checkText(s, text);
    EXPECT_EQ(p, nullptr) << c.parameters;
    const auto& all = s.diagnostics().all();
    ASSERT_EQ(all.size(), 1u) << c.parameters << "\n" << sessionCodes(s);
    EXPECT_EQ(all[0].code, c.code) << c.parameters << "\n" << sessionCodes(s);
    EXPECT_NE(all[0].message.find(c.message), std::string::npos) << c.parameters << "\n" << sessionCodes(s);
  }
}

TEST(SweepDeclaration, DeclarationForms) {
  struct Case {
    std::string text, code, message;
  };
  const std::string body = "{\n  method: grid\n  metric: minimize(loss)\n  parameters {\n    seed: [1, 2]\n  }\n}\n";
  std::vector<Case> cases = {
      {"sweep s " + body, check::code::kBadSweep, "does not say which training"},
      {"sweep s for two_by_two " + body, check::code::kBadSweep, "this is a mapping"},
      {"sweep s for tiny_pretrain on tiny_pod " + body, check::code::kBadSweep, "`on` belongs to mappings"},
      {"sweep s for tiny_pretrain {\n  method: grid\n  metric: minimize(loss)\n  parameters {\n  }\n}\n",
       check::code::kMissingField, "varies nothing"},
      {"sweep s for tiny_pretrain {\n  method: grid\n  parameters {\n    seed: [1]\n  }\n}\n", check::code::kBadMetric,
       "needs a `metric`"},
      {"sweep s for tiny_pretrain {\n  method: grid\n  metric { name: loss }\n  parameters {\n    seed: [1]\n  }\n}\n",
       check::code::kBadMetric, "no `goal`"},
      {"sweep s for tiny_pretrain {\n  method: grid\n  metric: minimize(loss + 1)\n  parameters {\n    seed: [1]\n  }\n}\n",
       check::code::kBadMetric, "named by its key"},
      {"sweep s for tiny_pretrain {\n  methd: grid\n  metric: minimize(loss)\n  parameters {\n    seed: [1]\n  }\n}\n",
       check::code::kUnknownField, "not a field of a sweep"},
      {"sweep s for tiny_pretrain {\n  method: grid\n  metric: minimize(loss)\n  parameters {\n    seed: [1]\n  }\n"
       "  early_terminate: hyperband(eta: 3)\n}\n",
       check::code::kBadEarlyTerminate, "needs `min_iter`"},
      {"sweep s for tiny_pretrain {\n  method: grid\n  metric: minimize(loss)\n  parameters {\n    seed: [1]\n  }\n"
       "  early_terminate: hyperband(min_iter: 10, eta: 1)\n}\n",
       check::code::kBadEarlyTerminate, "at least 2"},
      {"sweep s for tiny_pretrain {\n  method: grid\n  metric: minimize(loss)\n  parameters {\n    seed: [1]\n  }\n"
       "  from: best(s)\n}\n",
       check::code::kBadSweepStart, "its own best trial"},
      {"sweep s for tiny_pretrain {\n  method: grid\n  metric: minimize(loss)\n  parameters {\n    seed: [1]\n  }\n"
       "  from: checkpoint(run7)\n}\n",
       check::code::kBadSweepStart, "a run's id as a string"},
      {"sweep s for tiny_pretrain " + body + "run s\n", check::code::kBadRun, "`s` is a sweep"},
  };
  for (const auto& c : cases) {
    std::string text = kScript + c.text;
    // The script already runs tiny_pretrain; a second `run` line is the case's.
    session::Session s;
    checkText(s, text);
    const auto& all = s.diagnostics().all();
    ASSERT_FALSE(all.empty()) << c.text;
    EXPECT_EQ(all[0].code, c.code) << c.text << "\n" << sessionCodes(s);
    EXPECT_NE(all[0].message.find(c.message), std::string::npos) << c.text << "\n" << sessionCodes(s);
  }
  // A training-level path is fine when some phase inherits it.
  session::Session ok;
  const check::CheckedProgram* p = checkText(ok, kScript + "sweep s for tiny_pretrain {\n  method: grid\n"
                                                           "  metric: minimize(loss)\n  parameters {\n"
                                                           "    optimizer.weight_decay: [0, 0.1]\n    seed: [1, 2]\n  }\n}\n");
  ASSERT_NE(p, nullptr) << sessionCodes(ok);
  EXPECT_EQ(p->sweeps.at(0).parameters.size(), 2u);
}
