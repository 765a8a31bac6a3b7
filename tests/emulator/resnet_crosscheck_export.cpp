// The emulator's side of the ResNet cross-check (torch_resnet_crosscheck.py):
// plans a tiny ResNet from the standard library's resnet() through the front
// end, then writes, in the emulator's tensor file format (docs/emulator.md,
// "Files"), the initial weights and, for each of three optimizer steps, the
// step's data (two micro batches of eight 64x64 images), loss, reduced
// gradients and the weights after it.
// Usage: ipu_resnet_crosscheck OUT_DIR momentum|lars batch|group bottleneck|basic
#include <cstdio>
#include <string>

#include "interpreter/session/session.h"
#include "runtime/emulator/conv_kernels.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/emulator/trainer.h"
#include "tests/emulator/crosscheck_support.h"

namespace {

int fail(const std::string& what) { return ipu::crosscheck::fail("resnet crosscheck", what); }

constexpr int kSteps = 3;

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) return fail("usage: ipu_resnet_crosscheck OUT_DIR momentum|lars batch|group bottleneck|basic");
  const std::string out = argv[1], opt = argv[2], norm = argv[3], block = argv[4];
  if ((opt != "momentum" && opt != "lars") || (norm != "batch" && norm != "group") || (block != "bottleneck" && block != "basic"))
    return fail("usage: ipu_resnet_crosscheck OUT_DIR momentum|lars batch|group bottleneck|basic");
  const std::string optimizer = opt == "lars" ? "lars(momentum: 0.9, weight_decay: 0.0001, trust_coefficient: 0.02, exclude: [bias, norm])"
                                              : "momentum(momentum: 0.9, weight_decay: 0.0001, exclude: [bias, norm])";
  const std::string script =
      "import \"std/pods\"\nimport \"std/models/resnet\"\n"
      "model tiny = resnet(blocks: [1, 1, 1, 1], width: 4, classes: 5, block: \"" + block + "\", norm: \"" + norm + "\", norm_groups: 2)\n"
      "mapping one_ipu for tiny on POD4 { }\n"
      "training t {\n mapping: one_ipu\n optimizer: " + optimizer + "\n seed: 5\n"
      " phase one { image_size: 64, micro_batch: 8, gradient_accumulation: 2, label_smoothing: 0.1, steps: 10, lr: 0.05 }\n}\n";
  ipu::session::Session s;
  std::string error;
  const ipu::ir::PhasePlan* planned = ipu::crosscheck::planFirstPhase(s, "resnet_crosscheck.ipu", script, &error);
  if (planned == nullptr) return fail(error);
  const ipu::ir::PhasePlan& phase = *planned;

  ipu::emu::TrainerSettings ts;
  ts.seed = 5;
  ts.hostThreads = 1;
  ts.runName = "t";
  auto created = ipu::emu::PhaseTrainer::create(phase, ts, nullptr);
  if (!created) return fail(created.error().message);
  auto& trainer = **created;

  ipu::emu::TensorFile initial;
  initial.set("optimizer", opt);
  initial.set("norm", norm);
  initial.set("norm_groups", "2");
  initial.set("label_smoothing", ipu::crosscheck::exact(phase.labelSmoothing));
  initial.set("momentum", ipu::crosscheck::exact(phase.optimizer.momentum));
  initial.set("weight_decay", ipu::crosscheck::exact(phase.optimizer.weightDecay));
  initial.set("trust_coefficient", ipu::crosscheck::exact(phase.optimizer.trustCoefficient));
  // The layers in order: op, stride (blocks) and the image side they read.
  const auto& layers = trainer.model().layers();
  initial.set("layers", std::to_string(layers.size()));
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& l = *layers[i].plan;
    std::string stride = "1";
    for (const auto& a : l.attributes)
      if (a.name == "stride") stride = ipu::crosscheck::exact(a.number);
    initial.set("layer." + std::to_string(i), l.name + " " + ipu::ir::opName(l) + " " + stride);
  }
  for (const auto& p : trainer.model().params()) initial.set("class." + p.name, ipu::ir::nameOf(p.spec.cls));
  initial.tensors = trainer.weights();
  if (auto ok = ipu::emu::writeTensorFile(out + "/initial.ipt", initial); !ok) return fail(ok.error().message);

  for (int k = 0; k < kSteps; ++k) {
    ipu::emu::TensorFile batch;
    const auto mbs = trainer.batches(k);
    batch.set("micro_batches", std::to_string(mbs.size()));
    for (std::size_t m = 0; m < mbs.size(); ++m) {
      const auto& mb = mbs[m];
      const std::string p = "mb" + std::to_string(m) + ".";
      batch.set(p + "class_count", ipu::crosscheck::exact(mb.classCount));
      batch.set(p + "label_smoothing", ipu::crosscheck::exact(mb.labelSmoothing));
      batch.tensors.emplace_back(p + "features", mb.features);
      batch.tensors.emplace_back(p + "labels", ipu::crosscheck::row(mb.classLabel));
    }
    if (auto ok = ipu::emu::writeTensorFile(out + "/batch" + std::to_string(k) + ".ipt", batch); !ok) return fail(ok.error().message);
    auto r = trainer.step();
    if (!r) return fail(r.error().message);
    ipu::emu::TensorFile step;
    ipu::crosscheck::addStep(step, *r, trainer);
    // Batch norm's running statistics after the step ("running_mean/<unit>", "running_var/<unit>").
    for (auto& t : trainer.runningStatistics()) step.tensors.push_back(std::move(t));
    if (auto ok = ipu::emu::writeTensorFile(out + "/step" + std::to_string(k) + ".ipt", step); !ok) return fail(ok.error().message);
    std::printf("step %d loss %.9g lr %g\n", k + 1, r->loss, r->lr);
  }
  return 0;
}
