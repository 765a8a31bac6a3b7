// The emulator's side of the ResNet cross-check (torch_resnet_crosscheck.py):
// plans a tiny ResNet from the standard library's resnet() through the front
// end, then writes, in the emulator's tensor file format (docs/emulator.md,
// "Files"), the initial weights and, for each of three optimizer steps, the
// step's data (two micro batches of eight 64x64 images), loss, reduced
// gradients and the weights after it, and the emulator's decisions at the
// network's kinks (every ReLU's output, the stem max pool's choices).
// Usage: ipu_resnet_crosscheck OUT_DIR momentum|lars batch|group bottleneck|basic
#include <cstdio>
#include <map>
#include <string>

#include "interpreter/session/session.h"
#include "runtime/emulator/kernels/conv_kernels.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/emulator/trainer.h"
#include "tests/emulator/crosscheck_support.h"

namespace {

int fail(const std::string& what) { return ipu::crosscheck::fail("resnet crosscheck", what); }

constexpr int kSteps = 3;

// The emulator's decisions at the kinks of one step's forward pass, for the
// reference to follow where an input lies within rounding of a kink (a ReLU
// input near 0, two nearly equal maxima of a pooling window): there the side
// an fp32 program lands on depends on its order of operations, and either side
// is right. The forward pass is replayed through the model's own kernels, on
// the weights the step starts from and its micro batches, in fp32 on one
// thread as the trainer runs it here; its loss must equal the trainer's bit
// for bit, or these would not be the trainer's decisions. Tensors, per micro
// batch m and layer L: "mb<m>.<L>.relu<j>" (the j-th ReLU's output in forward
// order: the stem's, then a block's chain and its final ReLU) and
// "mb<m>.<L>.pool" (the max pool's chosen input column per output).
struct Kinks {
  ipu::emu::TensorFile file;
  double loss = 0;
};

ipu::emu::Expected<Kinks> replayKinks(const ipu::emu::PhaseTrainer& trainer, const std::vector<ipu::emu::MicroBatch>& mbs) {
  const ipu::emu::Model& model = trainer.model();
  std::map<std::string, ipu::emu::Mat> weights;
  for (auto& [name, w] : trainer.weights()) weights.emplace(name, w);
  Kinks out;
  for (std::size_t m = 0; m < mbs.size(); ++m) {
    ipu::emu::Mat x;
    ipu::emu::Numerics nx;
    for (const auto& layer : model.layers()) {
      ipu::emu::ShardParams p(1);
      for (int id : layer.params) p[0].push_back(&weights.at(model.params()[static_cast<std::size_t>(id)].name));
      ipu::emu::Saved saved;
      ipu::emu::Mat y;
      ipu::emu::HeadResult head;
      layer.kernel->forward(x, mbs[m], p, nx, saved, y, layer.head ? &head : nullptr);
      const std::string op = ipu::ir::opName(*layer.plan);
      const std::string prefix = "mb" + std::to_string(m) + "." + layer.plan->name + ".";
      const auto& s = saved.mats;
      if (op == "conv_stem") {
        // Saved: xhat, rstd, ReLU output, pool argmax (conv_kernels.cpp).
        out.file.tensors.emplace_back(prefix + "relu0", s.at(2));
        out.file.tensors.emplace_back(prefix + "pool", s.at(3));
      } else if (op == "bottleneck" || op == "basic_block") {
        // Saved: per chain unit i xhat, rstd, output after its ReLU (none
        // for the last unit); the projection's two; the block's output.
        const std::size_t units = (s.size() - 3) / 3;
        int j = 0;
        for (std::size_t i = 0; i + 1 < units; ++i) out.file.tensors.emplace_back(prefix + "relu" + std::to_string(j++), s.at(3 * i + 2));
        out.file.tensors.emplace_back(prefix + "relu" + std::to_string(j), s.back());
      } else if (!layer.head) {
        return ipu::emu::Error{"", "the cross-check does not know where layer " + layer.plan->name + " (" + op + ") has kinks", "", {}};
      }
      if (layer.head) out.loss += head.loss;
      else x = std::move(y);
    }
  }
  return out;
}

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
    auto kinks = replayKinks(trainer, mbs);
    if (!kinks) return fail(kinks.error().message);
    auto r = trainer.step();
    if (!r) return fail(r.error().message);
    if (kinks->loss != r->loss)
      return fail("the replayed forward pass of step " + std::to_string(k + 1) + " has loss " + ipu::crosscheck::exact(kinks->loss) +
                  ", the trainer's " + ipu::crosscheck::exact(r->loss) + ": its kink decisions would not be the trainer's");
    if (auto ok = ipu::emu::writeTensorFile(out + "/kinks" + std::to_string(k) + ".ipt", kinks->file); !ok)
      return fail(ok.error().message);
    ipu::emu::TensorFile step;
    ipu::crosscheck::addStep(step, *r, trainer);
    // Batch norm's running statistics after the step ("running_mean/<unit>", "running_var/<unit>").
    for (auto& t : trainer.runningStatistics()) step.tensors.push_back(std::move(t));
    if (auto ok = ipu::emu::writeTensorFile(out + "/step" + std::to_string(k) + ".ipt", step); !ok) return fail(ok.error().message);
    std::printf("step %d loss %.9g lr %g\n", k + 1, r->loss, r->lr);
  }
  return 0;
}
