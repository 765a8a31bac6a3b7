// `sweep` declarations and trial values.
//
// A sweep names a training and the values of it to vary, by dotted path from
// the training: `lr`, `phase.short.micro_batch`, `optimizer.weight_decay`,
// `mapping.replicas`, `precision.compute`, `model.hidden`. The checker turns
// each declaration into a sweep::SweepSpec (interpreter/sweep/space.h) and
// checks that every path names a value the training has and that every value
// the sweep can propose fits that value's type and unit.
//
// A trial gives the training one value per path (a sweep::Assignment). The
// values are substituted into the training as evaluated values, where the
// checker reads those fields, before the training is resolved: so what is
// derived from them (the batch figures, steps from epochs, the learning rate's
// linear scaling, the model's layer costs) is derived again, exactly as for a
// script with those values written in. No script text is written.
// Internal to the check layer; the session exposes it (session.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/check/evaluator.h"
#include "interpreter/check/program.h"
#include "interpreter/sweep/space.h"

namespace ipu::check {

// A value written outside the script, in the language (`ipu run --set
// PATH=VALUE`): evaluated in the script's scope and checked as the field
// checks it, so `500 steps`, `every_layer`, `fp16_mixed` and `2e-4` mean what
// they mean in the script, and a mistake points into the text given.
struct WrittenOverride {
  std::string path;                            // as in a sweep's `parameters`
  std::shared_ptr<const syntax::Expr> value;   // parsed from its own source
  Span pathAt;                                 // the PATH of PATH=VALUE
};

// A trial's values for one training, or values given on the command line for
// every training that runs.
struct Overrides {
  // The training declaration they apply to; "" applies them to every
  // training the script runs (`ipu run --set`).
  std::string training;
  sweep::Assignment values;  // (path, value), paths as in a sweep's `parameters`
  std::vector<WrittenOverride> written;  // after `values`
  // Where a diagnostic about a value points when the script does not write
  // that value (e.g. the sweep's declaration); may be empty.
  Span at;
};

// Largest grid the checker accepts: beyond it a grid is almost certainly a
// mistake (a range meant as a distribution, a list pasted twice).
inline constexpr double kMaxGridCells = 10'000;

// Check one `sweep` declaration of `module`. `sweeps` are the module's sweep
// declarations (for `from: best(NAME)`); `training` is the resolved training
// when the script runs it (for hyperband's bounds), else null. Returns the
// spec, or nothing when errors were reported.
std::optional<sweep::SweepSpec> checkSweep(Evaluator& ev, const Module& module, const syntax::Declaration& decl,
                                           const std::vector<const syntax::Declaration*>& sweeps,
                                           const TrainingSpec* training);

// The training record `training` (of `module`) with `values` substituted.
// Null when a path names nothing (IPU1301): no script writes a value there.
// A value the field does not take is reported as the script with it written
// in would report it, and that field is unknown in the record returned, so
// that checking goes on (and reports what follows) as it does for the script.
std::shared_ptr<const Record> applyOverrides(Evaluator& ev, const Module& module, const Record& training,
                                             const Overrides& overrides);

}  // namespace ipu::check
