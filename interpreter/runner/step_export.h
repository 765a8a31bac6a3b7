// `ipu run --export-steps N DIR`: the first N steps of a training written out
// so that anyone can build their own reference without compiling C++
// (docs/emulator.md, "Exporting steps"). Canonical tensors only, the same
// whatever the mapping: the initial weights, each step's global batch as the
// model consumes it, the reduced and unscaled gradients the optimizer
// receives, the weights (and optimizer state) after the update, as NumPy
// .npy files, with a manifest.json naming every file and the settings a
// reference needs (optimizer, learning rate of each step, precision,
// mapping, seed). tools/ipu_export.py reads it.
//
// The export is its own pass over the first phase, before the run: a fresh
// trainer with the run's seed, data and Lua policies. Results depend only on
// the plan, the seed and the data (docs/emulator.md, "Determinism"), so the
// steps exported are the steps the run then trains (the tests compare the
// exported weights with the run's checkpoint of the same step).
#pragma once

#include <ostream>
#include <string>

#include "interpreter/runner/train.h"
#include "interpreter/session/session.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::runner {

struct ExportRequest {
  long long steps = 0;     // the first N steps of the first phase
  std::string directory;   // created if missing
};

// Why `directory` cannot take an export ("" when it can): it must be missing,
// empty, or a previous export (a manifest.json of format ipu-export/1, even
// of an export interrupted part way), which is then replaced.
std::string exportDirectoryProblem(const std::string& directory);

// Why the plan cannot be exported as asked ("" when it can): one training,
// and a first phase with at least `steps` steps (`stepLimit`: --steps).
std::string exportPlanProblem(const ir::ExecutionPlan& plan, long long steps, long long stepLimit);

struct ExportResult {
  enum class Status { Written, Cancelled, Failed } status = Status::Failed;
  long long steps = 0;     // steps written
};

// Writes the export. Problems (the data cannot be read, a file cannot be
// written, a Lua policy fails) are diagnostics of the session; a one-line
// summary goes to `progress`. Uses settings.threads, cancel, corpus and
// scriptDirectory, as the run does.
ExportResult exportSteps(session::Session& session, const ir::RunPlan& run, const TrainSettings& settings,
                         const ExportRequest& request, std::ostream& progress);

}  // namespace ipu::runner
