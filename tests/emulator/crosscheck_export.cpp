// The emulator's side of the PyTorch cross-check (torch_crosscheck.py): plans
// a tiny BERT through the front end, then writes, in the emulator's tensor
// file format (docs/emulator.md, "Files"), the initial weights, the data of
// the first step, the step's loss and reduced gradients, and the weights after
// one optimizer step. Usage: ipu_emulator_crosscheck OUT_DIR lamb|adamw
#include <cstdio>
#include <string>

#include "interpreter/session/session.h"
#include "runtime/emulator/data.h"
#include "runtime/emulator/emulator.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/emulator/trainer.h"
#include "tests/emulator/crosscheck_support.h"

namespace {

int fail(const std::string& what) { return ipu::crosscheck::fail("crosscheck", what); }

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
  std::string error;
  const ipu::ir::PhasePlan* planned = ipu::crosscheck::planFirstPhase(s, "crosscheck.ipu", script, &error);
  if (planned == nullptr) return fail(error);
  const ipu::ir::PhasePlan& phase = *planned;

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
    batch.set(p + "mlm_count", ipu::crosscheck::exact(mb.mlmCount));
    batch.set(p + "class_count", ipu::crosscheck::exact(mb.classCount));
    batch.tensors.emplace_back(p + "tokens", ipu::crosscheck::row(mb.tokens));
    batch.tensors.emplace_back(p + "segments", ipu::crosscheck::row(mb.segments));
    batch.tensors.emplace_back(p + "positions", ipu::crosscheck::row(mb.positions));
    batch.tensors.emplace_back(p + "sequence_ids", ipu::crosscheck::row(mb.sequenceIds));
    batch.tensors.emplace_back(p + "masked_row", ipu::crosscheck::row(mb.maskedRow));
    batch.tensors.emplace_back(p + "masked_label", ipu::crosscheck::row(mb.maskedLabel));
    batch.tensors.emplace_back(p + "classified_row", ipu::crosscheck::row(mb.classifiedRow));
    batch.tensors.emplace_back(p + "class_label", ipu::crosscheck::row(mb.classLabel));
  }
  if (auto ok = ipu::emu::writeTensorFile(out + "/batch.ipt", batch); !ok) return fail(ok.error().message);

  auto r = trainer.step();
  if (!r) return fail(r.error().message);
  ipu::emu::TensorFile step;
  ipu::crosscheck::addStep(step, *r, trainer);
  if (auto ok = ipu::emu::writeTensorFile(out + "/step.ipt", step); !ok) return fail(ok.error().message);
  std::printf("loss %.9g lr %g\n", r->loss, r->lr);
  return 0;
}
