// The emulator's side of the PyTorch cross-check (torch_crosscheck.py): plans
// a tiny BERT through the front end, then writes, in the emulator's tensor
// file format (docs/emulator.md, "Files"), the initial weights, the data of
// the first step, the step's loss and reduced gradients, and the weights after
// one optimizer step. Usage: ipu_emulator_crosscheck OUT_DIR lamb|adamw
#include <cstdio>
#include <sstream>
#include <string>

#include "interpreter/base/render.h"
#include "interpreter/session/session.h"
#include "runtime/emulator/data.h"
#include "runtime/emulator/emulator.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/emulator/trainer.h"

namespace {

using ipu::emu::Mat;

Mat row(const std::vector<int>& v) {
  Mat m(1, static_cast<Eigen::Index>(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) m(0, static_cast<Eigen::Index>(i)) = static_cast<float>(v[i]);
  return m;
}

std::string num(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

int fail(const std::string& what) {
  std::fprintf(stderr, "crosscheck: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return fail("usage: ipu_emulator_crosscheck OUT_DIR lamb|adamw");
  const std::string out = argv[1], opt = argv[2];
  const std::string optimizer = opt == "lamb" ? "lamb(weight_decay: 0.01, exclude: [bias, norm])" : "adamw(weight_decay: 0.01, epsilon: 1e-6)";
  const std::string script =
      "import \"std/pods\"\nimport \"std/models/bert\"\n"
      "model tiny = bert(layers: 2, hidden: 32, heads: 4, ffn: 64, vocab: 400, positions: 64)\n"
      "mapping one_ipu for tiny on POD4 { }\n"
      "training t {\n mapping: one_ipu\n optimizer: " + optimizer + "\n seed: 11\n"
      " phase one { seq_len: 32, masked_tokens: 5, micro_batch: 4, gradient_accumulation: 2, steps: 10, lr: 0.002 }\n}\n";
  ipu::session::Session s;
  auto f = s.addSource("crosscheck.ipu", script);
  const ipu::ir::ExecutionPlan* plan = s.plan(f);
  std::string diags;
  bool errors = false;
  for (const auto& d : s.diagnostics().all()) {
    diags += ipu::base::renderHuman(d, s.sources(), false);
    errors |= d.severity == ipu::base::Severity::Error;
  }
  if (plan == nullptr || errors) return fail("the script did not plan:\n" + diags);
  const ipu::ir::PhasePlan& phase = plan->runs.at(0).phases.at(0);

  auto corpus = ipu::emu::loadCorpus(ipu::emu::defaultCorpusPath(), 400);
  if (!corpus) return fail(corpus.error().message);
  ipu::emu::TrainerSettings ts;
  ts.seed = 11;
  ts.hostThreads = 1;
  ts.runName = "t";
  auto created = ipu::emu::PhaseTrainer::create(phase, ts, corpus.value());
  if (!created) return fail(created.error().message);
  auto& trainer = **created;

  ipu::emu::TensorFile initial;
  initial.set("optimizer", opt);
  for (const auto& p : trainer.model().params()) initial.set("class." + p.name, ipu::ir::nameOf(p.spec.cls));
  initial.tensors = trainer.weights();
  if (auto ok = ipu::emu::writeTensorFile(out + "/initial.ipt", initial); !ok) return fail(ok.error().message);

  ipu::emu::TensorFile batch;
  const auto mbs = trainer.batches(0);
  batch.set("micro_batches", std::to_string(mbs.size()));
  for (std::size_t k = 0; k < mbs.size(); ++k) {
    const auto& mb = mbs[k];
    const std::string p = "mb" + std::to_string(k) + ".";
    batch.set(p + "samples", std::to_string(mb.samples));
    batch.set(p + "seq", std::to_string(mb.seq));
    batch.set(p + "mlm_count", num(mb.mlmCount));
    batch.set(p + "class_count", num(mb.classCount));
    batch.tensors.emplace_back(p + "tokens", row(mb.tokens));
    batch.tensors.emplace_back(p + "segments", row(mb.segments));
    batch.tensors.emplace_back(p + "positions", row(mb.positions));
    batch.tensors.emplace_back(p + "sequence_ids", row(mb.sequenceIds));
    batch.tensors.emplace_back(p + "masked_row", row(mb.maskedRow));
    batch.tensors.emplace_back(p + "masked_label", row(mb.maskedLabel));
    batch.tensors.emplace_back(p + "classified_row", row(mb.classifiedRow));
    batch.tensors.emplace_back(p + "class_label", row(mb.classLabel));
  }
  if (auto ok = ipu::emu::writeTensorFile(out + "/batch.ipt", batch); !ok) return fail(ok.error().message);

  auto r = trainer.step();
  if (!r) return fail(r.error().message);
  ipu::emu::TensorFile step;
  step.set("loss", num(r->loss));
  step.set("lr", num(r->lr));
  for (auto& [name, g] : trainer.gradients()) step.tensors.emplace_back("grad/" + name, g);
  for (auto& [name, w] : trainer.weights()) step.tensors.emplace_back("after/" + name, w);
  if (auto ok = ipu::emu::writeTensorFile(out + "/step.ipt", step); !ok) return fail(ok.error().message);
  std::printf("loss %.9g lr %g\n", r->loss, r->lr);
  return 0;
}
