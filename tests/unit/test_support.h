// Helpers shared by the unit and script tests: run a script through the
// session from text or a file, and read the result.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "interpreter/session/session.h"
#include "runtime/ir/json.h"

namespace ipu::test {

std::string sourceDir();

struct Outcome {
  std::unique_ptr<session::Session> session;
  const check::CheckedProgram* program = nullptr;
  const ir::ExecutionPlan* plan = nullptr;
  const cost::Estimate* estimate = nullptr;      // only when asked for
  std::vector<std::string> codes() const;        // codes of all diagnostics
  std::vector<std::string> errorCodes() const;
  std::string rendered() const;                  // every diagnostic, rendered
};

// Check and plan `text` as if it were the file `name` (relative imports resolve
// from the test's source directory).
Outcome runText(const std::string& text, const std::string& name = "test.ipu");
// With `estimate`, the plan is also estimated with the cost model (as
// `ipu estimate` does, so a script without a training is an error).
Outcome runFile(const std::string& path, bool estimate = false);
// Plans the file and trains each run with the emulator (at most `steps` steps
// per phase, run directories in a temporary directory), as `ipu run` does.
Outcome trainFile(const std::string& path, long long steps = 1);

// "a.b.0.c" over a JSON document; null when missing.
const nlohmann::ordered_json* jsonAt(const nlohmann::ordered_json& root, const std::string& path);

}  // namespace ipu::test
