#include "interpreter/plan/planner.h"

#include "interpreter/plan/expand_layers.h"
#include "interpreter/plan/levers.h"
#include "interpreter/plan/place_layers.h"
#include "interpreter/plan/plan_memory.h"
#include "interpreter/plan/schedule.h"
#include "interpreter/plan/verify.h"

namespace ipu::plan {

ir::PhasePlan planPhase(const check::PhaseSpec& phase, const check::MappingSpec& mapping, const ir::Mapping& settings,
                        const base::SourceMap& sources, base::Diagnostics* diags, PlacementFunction* placement,
                        LayerExpansions* expansions) {
  PhaseContext ctx{phase, mapping, settings, sources, diags, {}, {}, {}, placement, false, expansions, {}, {}};
  expandLayers(ctx);
  placeLayers(ctx);
  planSchedule(ctx);
  planMemory(ctx);
  planTraffic(ctx);
  verifyPlan(ctx);
  // What would make a mapping that does not fit fit: other mappings, each
  // planned from here, after this plan's passes (levers.h).
  if (ctx.doesNotFit && diags != nullptr)
    diags->at(*ctx.doesNotFit).help =
        leversHelp(leversThatFit(phase, mapping, ctx.settings, ctx.plan, sources, placement, expansions));
  ctx.plan.mapping = ctx.settings;
  ctx.plan.mapping.source = sourceRef(sources, mapping.span);
  return std::move(ctx.plan);
}

ir::ExecutionPlan planProgram(const check::CheckedProgram& program, const base::SourceMap& sources,
                              base::Diagnostics& diags, PlacementFunction* placement) {
  ir::ExecutionPlan plan;
  for (const auto& run : program.runs) {
    ir::RunPlan r;
    r.name = run.name;
    r.source = sourceRef(sources, run.span);
    r.hooks = run.hooks;
    r.seed = run.seed;
    for (const auto& phase : run.phases)
      r.phases.push_back(planPhase(phase, *phase.mapping, phase.mapping->mapping, sources, &diags, placement));
    plan.runs.push_back(std::move(r));
  }
  return plan;
}

}  // namespace ipu::plan
