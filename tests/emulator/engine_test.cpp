// The engine as `ipu run` drives it (emulator.h): phases in order with `from`,
// held-out evaluation, observer events, checkpoints and resume, cancellation,
// errors as values, the host-memory check; and the other model families.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>

#include <unistd.h>

#include "runtime/emulator/data.h"
#include "runtime/emulator/emulator.h"
#include "runtime/emulator/tensor_file.h"
#include "tests/emulator/emulator_test_support.h"

namespace ipu::emutest {
namespace {

namespace fs = std::filesystem;

struct Recorder : train::Observer {
  std::vector<std::string> events;
  std::vector<train::StepInfo> steps;
  std::vector<train::PhaseInfo> ends;
  std::vector<train::PhaseInfo> starts;
  std::atomic<bool>* cancelAt = nullptr;
  long long cancelStep = -1;
  long long stopStep = -1;
  std::string startFrom;
  train::PhaseDecision phaseStart(train::Source, const train::PhaseInfo& info) override {
    events.push_back("start " + info.phase + " " + info.checkpoint);
    starts.push_back(info);
    train::PhaseDecision d;
    if (!startFrom.empty() && !info.from.empty()) d.startFrom = startFrom;
    return d;
  }
  train::StopRequest step(train::Source, const train::StepInfo& s, std::map<std::string, double>&) override {
    steps.push_back(s);
    if (cancelAt != nullptr && s.globalStep == cancelStep) cancelAt->store(true);
    train::StopRequest r;
    if (s.globalStep == stopStep) r = {true, "enough"};
    return r;
  }
  train::StopRequest phaseEnd(train::Source, const train::PhaseInfo& info) override {
    events.push_back("end " + info.phase);
    ends.push_back(info);
    return {};
  }
  std::vector<train::CheckpointInfo> checkpoints;
  void checkpointWritten(train::Source, const train::CheckpointInfo& c) override {
    EXPECT_TRUE(fs::is_regular_file(c.path)) << c.path;  // complete when announced
    checkpoints.push_back(c);
  }
};

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ipu_emulator_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// The tiny BERT example's shape (2 encoder layers, 3 pipeline stages on 2
// IPUs with the heads back on IPU 0, 2 replicas, two phases), shortened so the
// test takes about half a minute on two cores. The full example is
// examples/tiny_bert.ipu.
TEST(Training, TinyBertBeatsTheMajorityBaseline) {
  TinyBert tb;
  tb.model = "bert(layers: 2, hidden: 64, heads: 2, ffn: 256, vocab: 1000, positions: 128)";
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0], mlm_head, nsp_head\n ipu 1: encoder[1]\n }\n replicas: 2";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 8\n gradient_accumulation: 1\n steps: 1000\n"
             " lr: 0.02 warmup 50 steps then linear to 0\n }\n phase long from one {\n seq_len: 64\n masked_tokens: 10\n"
             " micro_batch: 4\n gradient_accumulation: 2\n steps: 60\n lr: 0.005 warmup 6 steps then linear to 0";
  const ir::ExecutionPlan plan = planOf(tb.script());
  ASSERT_EQ(plan.runs.size(), 1u);
  ASSERT_EQ(plan.runs[0].phases.size(), 2u);
  Recorder rec;
  emu::Options o;
  o.observer = &rec;
  o.hostThreads = 2;
  auto out = emu::run(plan.runs[0], o);
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ(out->status, emu::Status::Completed);
  ASSERT_EQ(out->phases.size(), 2u);
  const auto& first = out->phases[0].evaluation;
  const auto& second = out->phases[1].evaluation;
  std::printf("held-out MLM accuracy: %.3f after phase one, %.3f after phase two; majority baseline %.3f / %.3f\n",
              first.at("mlm_accuracy"), second.at("mlm_accuracy"), first.at("mlm_baseline"), second.at("mlm_baseline"));
  EXPECT_GT(first.at("mlm_accuracy"), first.at("mlm_baseline") + 0.05);
  EXPECT_GT(first.at("mlm_accuracy"), 1.5 * first.at("mlm_baseline"));
  EXPECT_GT(second.at("mlm_accuracy"), second.at("mlm_baseline") + 0.05);
  // Events: both phases, every step, in order.
  EXPECT_EQ(rec.events.front(), "start one ");
  EXPECT_EQ(rec.events.back(), "end long");
  ASSERT_EQ(rec.steps.size(), 1060u);
  EXPECT_EQ(rec.steps.back().globalStep, 1060);
  EXPECT_EQ(rec.steps.back().step, 60);
  EXPECT_GT(rec.steps.back().samplesPerSecond, 0);
  EXPECT_EQ(rec.steps.front().ipuMemoryBytes.size(), 2u);
  EXPECT_TRUE(rec.steps.front().metrics.count("mlm_accuracy"));
  EXPECT_TRUE(rec.steps.front().metrics.count("nsp_accuracy"));
  EXPECT_LT(rec.steps.back().loss, rec.steps.front().loss);
  ASSERT_EQ(rec.ends.size(), 2u);
  EXPECT_EQ(rec.ends[1].metrics.at("mlm_accuracy"), second.at("mlm_accuracy"));
  EXPECT_EQ(rec.ends[1].stepsRun, 60);
}

TinyBert shortRun() {
  TinyBert tb;
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }\n replicas: 2";
  tb.precision = "compute: fp16\n weights: fp16\n master_weights: fp32\n loss_scale: dynamic(initial: 1024, interval: 2)";
  tb.optimizer = "adamw(weight_decay: 0.01)";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 2\n steps: 4\n lr: 0.002\n }\n"
             " phase two from one {\n seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 2\n steps: 3\n lr: 0.001";
  return tb;
}

emu::TensorFile finalOf(const fs::path& dir, const std::string& phase) {
  auto f = emu::readTensorFile(emu::checkpointPath(dir.string(), phase, 0, true));
  EXPECT_TRUE(f.ok());
  return f.ok() ? f.value() : emu::TensorFile{};
}

TEST(Checkpoints, CancelThenResumeContinuesIdentically) {
  const ir::ExecutionPlan plan = planOf(shortRun().script());
  ASSERT_FALSE(plan.runs.empty());
  // Uninterrupted.
  const fs::path a = scratch("a");
  Recorder ra;
  emu::Options oa;
  oa.observer = &ra;
  oa.checkpointDirectory = a.string();
  oa.evaluationSamples = 16;
  auto whole = emu::run(plan.runs[0], oa);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  ASSERT_EQ(whole->status, emu::Status::Completed);
  // Cancelled during global step 3 (inside the first phase), then resumed.
  const fs::path b = scratch("b");
  std::atomic<bool> cancel{false};
  Recorder rb;
  rb.cancelAt = &cancel;
  rb.cancelStep = 2;  // set after step 2 is reported: step 3 never completes
  emu::Options ob = oa;
  ob.observer = &rb;
  ob.cancel = &cancel;
  ob.checkpointDirectory = b.string();
  auto cut = emu::run(plan.runs[0], ob);
  ASSERT_TRUE(cut.ok()) << cut.error().message;
  EXPECT_EQ(cut->status, emu::Status::Cancelled);
  EXPECT_EQ(rb.steps.size(), 2u);
  EXPECT_TRUE(fs::exists(emu::checkpointPath(b.string(), "one", 2, false)));
  EXPECT_FALSE(fs::exists(emu::checkpointPath(b.string(), "one", 0, true)));
  for (const auto& e : fs::recursive_directory_iterator(b)) EXPECT_NE(e.path().extension(), ".tmp");
  cancel = false;
  Recorder rc;
  emu::Options oc = ob;
  oc.observer = &rc;
  oc.resume = true;
  auto rest = emu::run(plan.runs[0], oc);
  ASSERT_TRUE(rest.ok()) << rest.error().message;
  ASSERT_EQ(rest->status, emu::Status::Completed);
  ASSERT_EQ(rc.steps.size(), 5u);  // steps 3-4 of phase one, 1-3 of phase two
  EXPECT_EQ(rc.steps.front().globalStep, 3);
  for (std::size_t i = 0; i < rc.steps.size(); ++i) {
    EXPECT_EQ(rc.steps[i].loss, ra.steps[i + 2].loss) << "step " << i + 3;
    EXPECT_EQ(rc.steps[i].lossScale, ra.steps[i + 2].lossScale);
  }
  for (const char* ph : {"one", "two"}) {
    const auto x = finalOf(a, ph), y = finalOf(b, ph);
    ASSERT_EQ(x.tensors.size(), y.tensors.size());
    for (std::size_t i = 0; i < x.tensors.size(); ++i) EXPECT_TRUE(x.tensors[i].second == y.tensors[i].second) << x.tensors[i].first;
    EXPECT_EQ(x.get("loss_scale"), y.get("loss_scale"));
  }
  // A second resume finds everything done.
  Recorder rd;
  oc.observer = &rd;
  auto again = emu::run(plan.runs[0], oc);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(rd.steps.empty());
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(Checkpoints, ObserverStopsAndChoosesStartingCheckpoint) {
  const ir::ExecutionPlan plan = planOf(shortRun().script());
  const fs::path d = scratch("stop");
  Recorder r;
  r.stopStep = 3;
  emu::Options o;
  o.observer = &r;
  o.checkpointDirectory = d.string();
  o.checkpointEvery = 1;
  o.evaluationSamples = 8;
  auto out = emu::run(plan.runs[0], o);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, emu::Status::Stopped);
  EXPECT_EQ(out->stopReason, "enough");
  EXPECT_EQ(r.steps.size(), 3u);
  // Resume; phase two starts from phase one's step-2 checkpoint, chosen by the
  // observer among those offered, instead of phase one's final weights.
  const fs::path copy = scratch("stop_copy");
  fs::copy(d, copy, fs::copy_options::recursive);
  Recorder s;
  s.startFrom = emu::checkpointPath(d.string(), "one", 2, false);
  o.observer = &s;
  o.resume = true;
  auto rest = emu::run(plan.runs[0], o);
  ASSERT_TRUE(rest.ok()) << rest.error().message;
  EXPECT_EQ(rest->status, emu::Status::Completed);
  ASSERT_EQ(s.starts.size(), 2u);
  EXPECT_EQ(s.starts[1].checkpoint, emu::checkpointPath(d.string(), "one", 0, true));
  const auto& offered = s.starts[1].checkpoints;
  EXPECT_NE(std::find(offered.begin(), offered.end(), s.startFrom), offered.end());
  Recorder u;
  o.observer = &u;
  o.checkpointDirectory = copy.string();
  auto plain = emu::run(plan.runs[0], o);
  ASSERT_TRUE(plain.ok());
  const auto chosen = finalOf(d, "two"), usual = finalOf(copy, "two");
  ASSERT_EQ(chosen.tensors.size(), usual.tensors.size());
  EXPECT_FALSE(chosen.tensors[0].second == usual.tensors[0].second);
  fs::remove_all(d);
  fs::remove_all(copy);
}

// Every checkpoint written is announced to the observer (the run store
// records each: docs/tracking.md, "Artifacts"), with its phase and steps.
TEST(Checkpoints, EveryCheckpointWrittenIsAnnounced) {
  const ir::ExecutionPlan plan = planOf(shortRun().script());
  const fs::path d = scratch("announced");
  Recorder r;
  emu::Options o;
  o.observer = &r;
  o.checkpointDirectory = d.string();
  o.checkpointEvery = 2;
  o.evaluationSamples = 8;
  auto out = emu::run(plan.runs[0], o);
  ASSERT_TRUE(out.ok()) << out.error().message;
  std::vector<std::string> files, announced;
  for (const auto& e : fs::recursive_directory_iterator(d))
    if (e.path().extension() == ".ipt") files.push_back(e.path().string());
  for (const auto& c : r.checkpoints) {
    announced.push_back(c.path);
    EXPECT_EQ(c.path, emu::checkpointPath(d.string(), c.phase, c.step, c.final));
  }
  std::sort(files.begin(), files.end());
  std::sort(announced.begin(), announced.end());
  EXPECT_EQ(announced, files);
  ASSERT_FALSE(r.checkpoints.empty());
  // Global steps grow, and a phase's final checkpoint is at its last step.
  for (std::size_t i = 1; i < r.checkpoints.size(); ++i)
    EXPECT_GE(r.checkpoints[i].globalStep, r.checkpoints[i - 1].globalStep);
  EXPECT_TRUE(r.checkpoints.back().final);
  EXPECT_EQ(r.checkpoints.back().globalStep, static_cast<long long>(r.steps.size()));
  fs::remove_all(d);
}

TEST(Errors, AreValuesPointingIntoTheScript) {
  TinyBert tb;
  ir::ExecutionPlan plan = planOf(tb.script());
  ASSERT_FALSE(plan.runs.empty());
  {
    ir::RunPlan r = plan.runs[0];
    r.phases[0].fits = false;
    auto out = emu::run(r, {});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().code, "IPU5001");
    EXPECT_EQ(out.error().where.line, r.phases[0].mapping.source.line);
  }
  {
    ir::RunPlan r = plan.runs[0];
    r.phases[0].lr.luaFunction = "my_lr";
    auto out = emu::run(r, {});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().code, "IPU5008");
    emu::Options o;
    o.policies.learningRate = [](long long step, const std::string&) { return 0.001 * static_cast<double>(step + 1); };
    o.stepLimit = 2;
    o.evaluationSamples = 4;
    Recorder rec;
    o.observer = &rec;
    auto ok = emu::run(r, o);
    ASSERT_TRUE(ok.ok()) << ok.error().message;
    ASSERT_EQ(rec.steps.size(), 2u);
    EXPECT_EQ(rec.steps[1].lr, 0.002);
    o.policies.learningRate = [](long long, const std::string&) { return std::nan(""); };
    auto failed = emu::run(r, o);
    ASSERT_TRUE(failed.ok());
    EXPECT_EQ(failed->status, emu::Status::Stopped);
  }
  {
    ir::RunPlan r = plan.runs[0];
    r.phases[0].dataset.kind = ir::DatasetKind::Text;
    r.phases[0].dataset.path = "no/such/corpus.txt";
    auto out = emu::run(r, {});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().code, "IPU5004");
  }
  {
    // A user's op the emulator has no kernel for.
    const std::string fft = "import \"std/pods\"\nimport \"std/layers\"\n"
                            "layer spectral(width: int) { op: \"fft\"\n params: width\n flops: { elementwise: 10 * micro_batch * width }\n"
                            " output: micro_batch * width }\n"
                            "model mixer { layer inp = dense(inputs: 16, outputs: 16)\n layer mix = spectral(width: 16)\n"
                            " layer out = dense(inputs: 16, outputs: 4)\n layer loss = softmax_loss(classes: 4) }\n"
                            "mapping m for mixer on POD16 { replicas: 16 }\n"
                            "training t { mapping: m\n optimizer: sgd()\n phase p { micro_batch: 2, gradient_accumulation: 1, steps: 1, lr: 0.1 } }\n";
    ir::ExecutionPlan rp = planOf(fft);
    ASSERT_FALSE(rp.runs.empty());
    auto out = emu::run(rp.runs[0], {});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().code, "IPU5002");
    EXPECT_GT(out.error().where.line, 0u);
    EXPECT_NE(out.error().help.find("ipu estimate"), std::string::npos);
  }
}

TEST(Engine, RunsASinglePhase) {
  const ir::ExecutionPlan plan = planOf(shortRun().script());
  ASSERT_FALSE(plan.runs.empty());
  emu::Options o;
  o.seed = plan.runs[0].seed;
  o.evaluationSamples = 8;
  Recorder r;
  o.observer = &r;
  auto out = emu::run(plan.runs[0].phases[0], o);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->status, emu::Status::Completed);
  EXPECT_EQ(r.steps.size(), 4u);
  // Phase two starts from phase one: alone, it needs phase one's checkpoint.
  auto two = emu::run(plan.runs[0].phases[1], o);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().code, "IPU5005");
}

TEST(HostMemory, RefusesARunTooLargeForTheHost) {
  TinyBert tb;
  ir::ExecutionPlan plan = planOf(tb.script());
  ASSERT_FALSE(plan.runs.empty());
  const emu::HostMemory need = emu::hostMemoryNeeded(plan.runs[0]);
  EXPECT_GT(need.total, 1e6);
  EXPECT_LT(need.total, 1e9);
  EXPECT_TRUE(emu::checkHostMemory(plan.runs[0], 64e9).ok());
  auto refused = emu::checkHostMemory(plan.runs[0], 1e5);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, "IPU5003");
  EXPECT_NE(refused.error().help.find("ipu estimate"), std::string::npos);
  // BERT-Large on a POD16 would need far more than a laptop.
  ir::ExecutionPlan big = planOf("import \"std/pods\"\nimport \"std/models/bert\"\n"
                                 "mapping m for bert_large on POD16 { pipeline: balanced(4), replicas: 4, recompute: every_layer, optimizer_state: streaming, phases: 4 }\n"
                                 "training t { mapping: m\n optimizer: lamb()\n phase p { seq_len: 128, masked_tokens: 20, micro_batch: 8, gradient_accumulation: 16, steps: 10, lr: 0.001 } }\n");
  ASSERT_FALSE(big.runs.empty());
  EXPECT_GT(emu::hostMemoryNeeded(big.runs[0]).total, 10e9);
  EXPECT_GT(emu::hostMemoryAvailable(), 0);
}

TEST(VirtualIpus, MemoryIsAccountedAndEnforced) {
  TinyBert tb;
  tb.mapping = "pipeline {\n ipu 0: embedding, encoder[0]\n ipu 1: encoder[1], mlm_head, nsp_head\n }\n replicas: 2";
  tb.phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 4\n steps: 10\n lr: 0.002";
  const ir::PhasePlan onChip = phaseOf(tb.script());
  auto t = trainerFor(onChip);
  ASSERT_TRUE(t);
  auto r = t->step();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->ipuMemoryBytes.size(), 2u);
  const double code0 = onChip.pod.machine.chip.codeBaseBytes;
  for (double b : r->ipuMemoryBytes) {
    EXPECT_GT(b, code0);
    EXPECT_LT(b, onChip.ipus[0].capacityBytes);
  }
  // Optimizer state in Streaming Memory leaves the IPUs; RTS splits it over replicas.
  TinyBert streamed = tb;
  streamed.mapping += "\n optimizer_state: streaming";
  auto s = trainerFor(phaseOf(streamed.script()));
  TinyBert sharded = tb;
  sharded.mapping += "\n replicated_tensor_sharding: optimizer_state";
  auto h = trainerFor(phaseOf(sharded.script()));
  ASSERT_TRUE(s && h);
  EXPECT_EQ(t->streamingBytes(), 0);
  EXPECT_GT(s->streamingBytes(), 0);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_LT(s->ipuMemoryBytes()[i], t->ipuMemoryBytes()[i]);
    EXPECT_LT(h->ipuMemoryBytes()[i], t->ipuMemoryBytes()[i]);
  }
  // A chip too small for what the IPU must hold fails before training, at the mapping.
  ir::PhasePlan tiny = onChip;
  tiny.ipus[1].capacityBytes = 0.5 * t->ipuMemoryBytes()[1];
  emu::TrainerSettings ts;
  ts.runName = "t";
  auto corpus = emu::loadCorpus(emu::defaultCorpusPath(), 400);
  auto refused = emu::PhaseTrainer::create(tiny, ts, corpus.value());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, "IPU5007");
  EXPECT_EQ(refused.error().where.line, tiny.mapping.source.line);
  // Activations in flight count too: a capacity between the static and the peak bytes fails in the step.
  ir::PhasePlan tight = onChip;
  auto probe = trainerFor(onChip);
  const double staticBytes = probe->ipuMemoryBytes()[0];
  tight.ipus[0].capacityBytes = staticBytes + 1;
  auto c = emu::PhaseTrainer::create(tight, ts, corpus.value());
  ASSERT_TRUE(c.ok());
  auto overflow = (*c)->step();
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.error().code, "IPU5007");
}

TEST(Families, GptLearnsNextTokens) {
  TinyBert tb;
  tb.model = "gpt(layers: 2, hidden: 32, heads: 2, vocab: 400, positions: 64)";
  tb.extra = "";
  tb.phase = "seq_len: 32\n micro_batch: 8\n gradient_accumulation: 1\n steps: 150\n lr: 0.002";
  tb.optimizer = "adamw(weight_decay: 0.01)";
  std::string script = tb.script();
  script.replace(script.find("std/models/bert"), 15, "std/models/gpt");
  auto t = trainerFor(phaseOf(script));
  ASSERT_TRUE(t);
  double first = 0, last = 0;
  for (int i = 0; i < 150; ++i) {
    auto r = t->step();
    ASSERT_TRUE(r.ok()) << r.error().message;
    if (i == 0) first = r->loss;
    last = r->loss;
  }
  EXPECT_LT(last, first - 1.0);
  const auto ev = t->evaluate(64);
  EXPECT_GT(ev.at("lm_accuracy"), ev.at("lm_baseline"));
}

TEST(Families, MlpLearnsTheSyntheticTask) {
  const std::string script =
      "import \"std/pods\"\nimport \"std/layers\"\n"
      "model mlp {\n layer l1 = dense(inputs: 16, outputs: 64)\n layer l2 = dense(inputs: 64, outputs: 4, activation: \"none\")\n"
      " layer loss = softmax_loss(classes: 4)\n}\n"
      "mapping m for mlp on POD4 { pipeline {\n ipu 0: l1\n ipu 1: l2, loss\n }\n replicas: 2 }\n"
      "training t { mapping: m\n optimizer: adamw()\n phase p { micro_batch: 16, gradient_accumulation: 2, steps: 200, lr: 0.01 } }\n";
  auto t = trainerFor(phaseOf(script));
  ASSERT_TRUE(t);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(t->step().ok());
  const auto ev = t->evaluate(512);
  EXPECT_GT(ev.at("accuracy"), ev.at("baseline") + 0.3);
}

TEST(Data, SamplesAreDeterministicAndMaskedAsBertDoes) {
  TinyBert tb;
  auto t1 = trainerFor(phaseOf(tb.script()));
  auto t2 = trainerFor(phaseOf(tb.script()), 1);
  ASSERT_TRUE(t1 && t2);
  const auto a = t1->batches(5), b = t2->batches(5);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens);
    EXPECT_EQ(a[i].maskedRow, b[i].maskedRow);
  }
  // Over many samples: ~15% of real tokens chosen, capped by masked_tokens;
  // of those 80% [MASK], 10% random, 10% unchanged; NSP labels balanced.
  double masked = 0, maskToken = 0, same = 0, next = 0, pairs = 0;
  for (long long s = 0; s < 200; ++s)
    for (const auto& mb : t1->batches(s)) {
      for (std::size_t k = 0; k < mb.maskedRow.size(); ++k) {
        const int tok = mb.tokens[static_cast<std::size_t>(mb.maskedRow[k])];
        masked += 1;
        maskToken += tok == emu::Vocabulary::kMask;
        same += tok == mb.maskedLabel[k];
      }
      for (int l : mb.classLabel) {
        next += l;
        pairs += 1;
      }
      for (std::size_t b0 = 0; b0 < static_cast<std::size_t>(mb.samples); ++b0)
        EXPECT_EQ(mb.tokens[b0 * static_cast<std::size_t>(mb.seq)], emu::Vocabulary::kCls);
    }
  EXPECT_NEAR(maskToken / masked, 0.8, 0.02);
  EXPECT_NEAR(same / masked, 0.1, 0.02);
  EXPECT_NEAR(next / pairs, 0.5, 0.04);
}

TEST(Data, PackingPutsSeveralSequencesInASample) {
  TinyBert tb;
  tb.extra = "dataset packed { kind: text, path: \"../../runtime/emulator/corpus\", packing: on, sequences_per_pack: 2 }\n";
  tb.phase = "seq_len: 64\n masked_tokens: 10\n micro_batch: 4\n gradient_accumulation: 1\n steps: 5\n lr: 0.002\n dataset: packed";
  const ir::PhasePlan phase = phaseOf(tb.script());
  EXPECT_TRUE(phase.dataset.packing);
  auto t = trainerFor(phase);
  ASSERT_TRUE(t);
  const auto mb = t->batches(0)[0];
  EXPECT_EQ(mb.classLabel.size(), 8u);   // two [CLS] per sample
  int ids = 0;
  for (int id : mb.sequenceIds) ids = std::max(ids, id);
  EXPECT_EQ(ids, 1);
  for (int i = 0; i < 5; ++i) {
    auto r = t->step();
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(std::isfinite(r->loss));
  }
  // Through the engine, the relative path resolves against the dataset directory.
  ir::ExecutionPlan plan = planOf(tb.script());
  emu::Options o;
  o.datasetDirectory = sourceDir() + "/tests/emulator";
  o.stepLimit = 1;
  o.evaluationSamples = 4;
  auto out = emu::run(plan.runs[0], o);
  ASSERT_TRUE(out.ok()) << out.error().message;
}

}  // namespace
}  // namespace ipu::emutest
