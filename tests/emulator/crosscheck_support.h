// Shared by the emulator's side of the PyTorch cross-checks
// (crosscheck_export.cpp, resnet_crosscheck_export.cpp,
// sequence_crosscheck_export.cpp): a script planned through the front end,
// and the pieces of the tensor files (docs/emulator.md, "Files") that the
// Python side reads.
#pragma once

#include <string>
#include <vector>

#include "interpreter/session/session.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/emulator/trainer.h"

namespace ipu::crosscheck {

// Integers as a 1 x n tensor.
emu::Mat row(const std::vector<int>& v);

// A number with every digit a double needs to come back exactly.
std::string exact(double v);

// Prints "<tool>: <what>" on stderr; returns the exit status 1.
int fail(const std::string& tool, const std::string& what);

// `script` checked and planned in `session`; null when the front end
// reports errors. *diagnostics: everything it reported, rendered. (The
// emulator's tests plan their scripts with it too.)
const ir::ExecutionPlan* planScript(session::Session& session, const std::string& name, const std::string& script, std::string* diagnostics);

// The first phase of the first run of `script`, planned in `session`; null,
// with the rendered diagnostics in *error, when the front end reports errors.
const ir::PhasePlan* planFirstPhase(session::Session& session, const std::string& name, const std::string& script, std::string* error);

// A step's loss and learning rate, then the reduced gradients ("grad/<name>")
// and the weights after the update ("after/<name>").
void addStep(emu::TensorFile& file, const emu::StepResult& step, emu::PhaseTrainer& trainer);

}  // namespace ipu::crosscheck
