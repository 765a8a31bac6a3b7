// The check stage's entry point: load a script and its imports, evaluate every
// declaration in the user's files (so mistakes in unused ones are found too),
// and resolve what the script runs into typed specs (program.h). All problems
// are diagnostics; a program is returned only when there were no errors.
#pragma once

#include <memory>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/check/evaluator.h"
#include "interpreter/check/modules.h"
#include "interpreter/check/prelude.h"
#include "interpreter/check/program.h"
#include "interpreter/check/sweeps.h"

namespace ipu::check {

class Checker {
 public:
  // `prelude`: the standard library to share (null: load it here); then
  // `sources` must start with the prelude's files (a copy of its map).
  // `cache`: parsed user modules to reuse across checks (may be null).
  Checker(base::SourceMap& sources, base::Diagnostics& diags, const Prelude* prelude, ModuleCache* cache = nullptr);
  ~Checker();

  // With `overrides`, the training they name is checked with a trial's values
  // in place of those the script writes (sweeps.h): the program is the one
  // the script with those values written in would give.
  std::unique_ptr<CheckedProgram> checkFile(base::FileId root, const Overrides* overrides = nullptr);

  // Access for the session and the REPL.
  Evaluator& evaluator() { return *evaluator_; }
  ModuleLoader& loader() { return *loader_; }
  const Module* root() const { return root_; }

 private:
  base::SourceMap& sources_;
  base::Diagnostics& diags_;
  std::unique_ptr<ModuleLoader> loader_;
  std::unique_ptr<Evaluator> evaluator_;
  const Module* root_ = nullptr;
};

}  // namespace ipu::check
