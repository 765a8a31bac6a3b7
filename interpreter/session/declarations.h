// What `ipu run` would refuse about a plan's declarations (the emulator's
// own checks, emu::checkDeclarations, which need no host), reported while
// checking and planning, so `ipu check` passes only what can also run. A
// problem found in a standard-library layer (an embedding's `positions`
// against the phase's `seq_len`) is reported at the user's phase, where the
// fix is, with the layer named in the message.
#pragma once

#include <cstddef>
#include <functional>

#include "interpreter/base/diagnostic.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::session {

// Reports each problem; returns how many there were.
std::size_t reportDeclarationProblems(const ir::ExecutionPlan& plan, base::Diagnostics& diags,
                                      const std::function<base::Span(const ir::SourceRef&)>& spanOf);

}  // namespace ipu::session
