// Shared by the emulator's tests: plans built from .ipu text through the real
// front end (the session), and small scripts that vary one mapping feature.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/emulator/trainer.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::emutest {

std::string sourceDir();

// Check and plan a script; fails the current test (and returns an empty plan)
// when the front end reports errors.
ir::ExecutionPlan planOf(const std::string& script);

// A tiny BERT training script. `mapping` is the body of the mapping block;
// `precision` the body of the precision block; `optimizer` an optimizer
// expression; `phase` the body of the single phase.
struct TinyBert {
  std::string model = "bert(layers: 2, hidden: 32, heads: 4, ffn: 64, vocab: 400, positions: 64)";
  std::string mapping = "";
  std::string precision = "compute: fp32";
  std::string optimizer = "lamb(weight_decay: 0.01, exclude: [bias, norm])";
  std::string phase = "seq_len: 32\n masked_tokens: 5\n micro_batch: 4\n gradient_accumulation: 4\n steps: 4\n lr: 0.002";
  std::string pod = "ipus: 8";
  std::string extra = "";
  std::string script() const;
};

// Checks and plans examples/NAME as shipped.
ir::ExecutionPlan planOfExample(const std::string& name);

// The first phase of the first run of a script.
ir::PhasePlan phaseOf(const std::string& script);

std::unique_ptr<emu::PhaseTrainer> trainerFor(const ir::PhasePlan& phase, int threads = 2, long long seed = 7);

// A short training run: `steps` steps of a fresh trainer (trainerFor), each
// expected to succeed; their results, and the trainer after them for what a
// test reads next (weights, gradients, evaluation). `trainer` is null when
// it could not be built; `steps` stops at the first step that failed.
struct TrainedSteps {
  std::vector<emu::StepResult> steps;
  std::unique_ptr<emu::PhaseTrainer> trainer;
  bool completed = false;   // every step ran
  std::vector<double> losses() const;
};
TrainedSteps runSteps(const ir::PhasePlan& phase, int steps, int threads = 2);

// Largest |a - b| / max(1, |b|) over all elements of two canonical tensor lists.
double maxRelativeDifference(const emu::NamedTensors& a, const emu::NamedTensors& b);

}  // namespace ipu::emutest
