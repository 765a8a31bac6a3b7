// Batch derivation, one pure function: give any two of micro batch, gradient
// accumulation and global batch (with the replica count), and the third is
// derived; or a problem saying why not. The checker uses it for phases as
// written and the session for mapping variants (session/variant.h), so both
// derive and reject batches the same way. The 10^15-sample bound is checked
// by the caller, which knows the figures as written.
#pragma once

#include <optional>
#include <string>

#include "runtime/ir/execution_plan.h"

namespace ipu::check {

struct BatchRequest {
  std::optional<long long> microBatch, gradientAccumulation, globalBatch;  // none: not given
};

struct BatchProblem {
  const char* code = nullptr;  // null: no problem
  std::string field;           // the field it is about ("" for the phase itself)
  std::string message, help;
};

// `phase`: the phase's name, for messages. On a problem, `out` is unspecified.
BatchProblem deriveBatch(const BatchRequest& request, long long replicas, const std::string& phase, ir::Batch& out);

}  // namespace ipu::check
