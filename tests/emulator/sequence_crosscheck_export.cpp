// The emulator's side of the GroupBERT and ViT PyTorch cross-checks
// (torch_sequence_crosscheck.py): plans a tiny model through the front end,
// trains it a few steps, and writes, in the emulator's tensor file format
// (docs/emulator.md, "Files"), the initial weights, then for every step its
// micro batches, loss, learning rate, reduced gradients and the weights after
// the optimizer step. Usage: ipu_emulator_sequence_crosscheck OUT_DIR groupbert|vit STEPS
#include <cstdio>
#include <string>

#include "interpreter/session/session.h"
#include "runtime/emulator/data.h"
#include "runtime/emulator/emulator.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/emulator/trainer.h"
#include "tests/emulator/crosscheck_support.h"

namespace {

int fail(const std::string& what) { return ipu::crosscheck::fail("sequence crosscheck", what); }

const char* kPod =
    "chip small_chip = GC200 with { tiles: 16, memory: 256 MB, code_base: 1 MB }\n"
    "machine small_machine = M2000 with { chip: small_chip, ipus: 4, streaming_memory: 1 GB }\n"
    "pod small_pod { machine: small_machine, machines: 1 }\n";

// A 2-layer GroupBERT with LAMB (its published optimizer) on packed
// samples (the convolution must stop at the packed sequences' boundaries), and a 2-layer ViT
// with AdamW; both in fp32 on one IPU, two micro batches per step.
std::string script(const std::string& model) {
  if (model == "groupbert")
    return std::string("import \"std/pods\"\nimport \"std/models/groupbert\"\n") + kPod +
           "dataset packed { kind: synthetic, packing: on, sequences_per_pack: 2 }\n"
           "model tiny = groupbert(layers: 2, hidden: 32, heads: 4, ffn: 64, groups: 4, kernel: 5, vocab: 400, positions: 64)\n"
           "mapping one for tiny on small_pod { }\n"
           "training t {\n mapping: one\n optimizer: lamb(weight_decay: 0.01, exclude: [bias, norm])\n seed: 11\n"
           " phase one { seq_len: 32, masked_tokens: 5, micro_batch: 4, gradient_accumulation: 2, steps: 10,"
           " lr: 0.002, dataset: packed }\n}\n";
  return std::string("import \"std/pods\"\nimport \"std/models/vit\"\n") + kPod +
         "dataset images { kind: synthetic }\n"
         "model tiny = vit(layers: 2, hidden: 32, heads: 4, ffn: 64, patch: 4, image: 16, classes: 10, channels: 3)\n"
         "mapping one for tiny on small_pod { }\n"
         "training t {\n mapping: one\n optimizer: adamw(weight_decay: 0.01, epsilon: 1e-6)\n seed: 11\n"
         " phase one { dataset: images, image_size: 16, micro_batch: 4, gradient_accumulation: 2, label_smoothing: 0.1, steps: 10,"
         " lr: 0.002 }\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return fail("usage: ipu_emulator_sequence_crosscheck OUT_DIR groupbert|vit STEPS");
  const std::string out = argv[1], model = argv[2];
  const int steps = std::atoi(argv[3]);
  if ((model != "groupbert" && model != "vit") || steps < 1 || steps > 10) return fail("usage: ipu_emulator_sequence_crosscheck OUT_DIR groupbert|vit STEPS");
  ipu::session::Session s;
  std::string error;
  const ipu::ir::PhasePlan* planned = ipu::crosscheck::planFirstPhase(s, "sequence_crosscheck.ipu", script(model), &error);
  if (planned == nullptr) return fail(error);
  const ipu::ir::PhasePlan& phase = *planned;

  std::shared_ptr<const ipu::emu::TextCorpus> corpus;
  if (model == "groupbert") {
    auto loaded = ipu::emu::loadCorpus(ipu::emu::defaultCorpusPath(), 400);
    if (!loaded) return fail(loaded.error().message);
    corpus = loaded.value();
  }
  ipu::emu::TrainerSettings ts;
  ts.seed = 11;
  ts.hostThreads = 1;
  ts.runName = "t";
  auto created = ipu::emu::PhaseTrainer::create(phase, ts, corpus);
  if (!created) return fail(created.error().message);
  auto& trainer = **created;

  ipu::emu::TensorFile initial;
  for (const auto& p : trainer.model().params()) initial.set("class." + p.name, ipu::ir::nameOf(p.spec.cls));
  initial.set("steps", std::to_string(steps));
  initial.tensors = trainer.weights();
  if (auto ok = ipu::emu::writeTensorFile(out + "/initial.ipt", initial); !ok) return fail(ok.error().message);

  for (int k = 0; k < steps; ++k) {
    ipu::emu::TensorFile step;
    const auto mbs = trainer.batches(k);
    step.set("micro_batches", std::to_string(mbs.size()));
    for (std::size_t i = 0; i < mbs.size(); ++i) {
      const auto& mb = mbs[i];
      const std::string p = "mb" + std::to_string(i) + ".";
      step.set(p + "samples", std::to_string(mb.samples));
      step.set(p + "seq", std::to_string(mb.seq));
      step.set(p + "mlm_count", ipu::crosscheck::exact(mb.mlmCount));
      step.set(p + "class_count", ipu::crosscheck::exact(mb.classCount));
      step.set(p + "label_smoothing", ipu::crosscheck::exact(mb.labelSmoothing));
      const std::pair<const char*, const std::vector<int>*> ints[] = {
          {"tokens", &mb.tokens},         {"segments", &mb.segments},       {"positions", &mb.positions},
          {"sequence_ids", &mb.sequenceIds}, {"masked_row", &mb.maskedRow}, {"masked_label", &mb.maskedLabel},
          {"classified_row", &mb.classifiedRow}, {"class_label", &mb.classLabel}};
      for (const auto& [name, v] : ints)
        if (!v->empty()) step.tensors.emplace_back(p + name, ipu::crosscheck::row(*v));
      if (mb.features.size() > 0) step.tensors.emplace_back(p + "features", mb.features);
    }
    auto r = trainer.step();
    if (!r) return fail(r.error().message);
    if (!r->completed || r->skipped) return fail("step " + std::to_string(k + 1) + " did not update");
    ipu::crosscheck::addStep(step, *r, trainer);
    if (auto ok = ipu::emu::writeTensorFile(out + "/step" + std::to_string(k + 1) + ".ipt", step); !ok) return fail(ok.error().message);
    std::printf("step %d loss %.9g lr %g\n", k + 1, r->loss, r->lr);
  }
  return 0;
}
