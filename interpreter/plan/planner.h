// The plan stage's entry point: lower every run's phases to an ExecutionPlan
// by running the passes in order (expand_layers, place_layers, plan_memory,
// schedule, verify). Diagnostics (IPU2xxx) go to `diags`; the plan is always
// returned so that a mapping that does not fit can still be shown.
#pragma once

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/check/program.h"
#include "interpreter/plan/placement_function.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::plan {

class LayerExpansions;

// `placement` answers `pipeline: lua f` (null when no Lua hooks are loaded:
// such mappings are then reported as unplaceable).
ir::ExecutionPlan planProgram(const check::CheckedProgram& program, const base::SourceMap& sources,
                              base::Diagnostics& diags, PlacementFunction* placement = nullptr);

// One phase with the given mapping settings (a lever variant when they differ
// from the script's). `diags` may be null: then nothing is reported.
// `expansions`: expanded layers to reuse across variants of the phase (may be null).
ir::PhasePlan planPhase(const check::PhaseSpec& phase, const check::MappingSpec& mapping, const ir::Mapping& settings,
                        const base::SourceMap& sources, base::Diagnostics* diags, PlacementFunction* placement = nullptr,
                        LayerExpansions* expansions = nullptr);

}  // namespace ipu::plan
