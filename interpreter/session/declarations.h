// What `ipu run` would refuse about a plan's declarations (the runnable
// table, runtime/runnable/runnable.h, which needs neither the emulator nor
// the host), reported while checking and planning. For a run they are
// errors, so nothing starts that the emulator cannot execute; otherwise
// they are warnings, so a model written for estimation (a layer of your own
// `op`) still checks, plans and estimates, except a phase without layers,
// which estimation cannot price either. A problem found in a
// standard-library layer (an embedding's `positions` against the phase's
// `seq_len`) is reported at the user's phase, where the fix is, with the
// layer named in the message.
#pragma once

#include <cstddef>
#include <functional>

#include "interpreter/base/diagnostic.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::session {

// What the plan is made for: decides whether what `ipu run` would refuse is
// an error (Run) or a warning (Estimate: check, plan, estimate, search).
enum class Purpose { Estimate, Run };

// Reports each problem; returns how many were errors.
std::size_t reportDeclarationProblems(const ir::ExecutionPlan& plan, Purpose purpose, base::Diagnostics& diags,
                                      const std::function<base::Span(const ir::SourceRef&)>& spanOf);

}  // namespace ipu::session
