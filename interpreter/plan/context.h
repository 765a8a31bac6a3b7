// What the lowering passes share for one training phase: the checked phase,
// the mapping being planned (possibly a lever variant of the script's), and
// the plan under construction. Passes are plain functions over this state,
// run in a fixed order by planner.cpp.
#pragma once

#include <optional>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/check/program.h"
#include "interpreter/plan/placement_function.h"
#include "runtime/ir/execution_plan.h"
#include "runtime/ir/phased.h"

namespace ipu::plan {

class LayerExpansions;

struct PhaseContext {
  const check::PhaseSpec& phase;
  const check::MappingSpec& mapping;   // placement as the script wrote it (or a variant)
  ir::Mapping settings;                // t, r, phases, recompute, offload, RTS, AMP (may differ from the script's)
  const base::SourceMap& sources;
  base::Diagnostics* diags;            // null while trying levers: no diagnostics then
  ir::PhasePlan plan;
  // Derived once from the layers (by expand_layers) so that memory accounting
  // never compares names: the layers each layer's weights are tied to, and an
  // id per distinct layer definition (identical layers share code when phased).
  std::vector<std::vector<int>> tiedPartners;
  std::vector<int> codeClass;
  PlacementFunction* placement = nullptr;  // for `pipeline: lua f` (null: none available)
  bool placementFailed = false;            // no placement to judge (the Lua function failed)
  LayerExpansions* expansions = nullptr;   // expanded layers to reuse across variants (may be null)
  // Phased: the plan's segments (runtime/ir/phased.h), set by planMemory once
  // the layers have their phases, for the passes after it.
  std::vector<ir::PhaseSegment> segments;
  // Set by verifyPlan: the index in `diags` of the "does not fit" error,
  // whose help the planner fills in with the levers that fit (levers.h).
  std::optional<std::size_t> doesNotFit;
};

ir::SourceRef sourceRef(const base::SourceMap& sources, base::Span span);

}  // namespace ipu::plan
