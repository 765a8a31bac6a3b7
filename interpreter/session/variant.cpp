// Session::variantOf and Session::planVariant (variant.h).
#include "interpreter/check/codes.h"
#include "interpreter/check/resolver.h"
#include "interpreter/hooks/lua_placement.h"
#include "interpreter/plan/expand_layers.h"
#include "interpreter/plan/mapping_value.h"
#include "interpreter/plan/planner.h"
#include "interpreter/session/session.h"

namespace ipu::session {

plan::MappingValue Session::variantOf(std::size_t run, std::size_t phase) const {
  if (program_ == nullptr || run >= program_->runs.size() || phase >= program_->runs[run].phases.size()) return {};
  return plan::valueOf(program_->runs[run].phases[phase]);
}

PlannedVariant Session::planVariant(const plan::MappingValue& v, std::size_t run, std::size_t phase, Detail detail) {
  PlannedVariant out;
  if (program_ == nullptr || checker_ == nullptr || run >= program_->runs.size() ||
      phase >= program_->runs[run].phases.size()) {
    out.diagnostics.error(check::code::kNothingToRun, {}, "no checked training phase to plan a variant of",
                          "check a script that declares a training first (Session::check)");
    return out;
  }
  const check::PhaseSpec& base = program_->runs[run].phases[phase];
  plan::PreparedMapping prepared = plan::prepareMapping(base, v);
  if (!prepared.ok) {
    out.diagnostics = std::move(prepared.diagnostics);
    return out;
  }
  check::PhaseSpec ph = base;
  ph.mapping = prepared.spec;
  if (!layerCosts_) layerCosts_ = std::make_unique<check::LayerCostCache>();
  if (!layerExpansions_) layerExpansions_ = std::make_unique<plan::LayerExpansions>();
  const std::size_t before = diags_.all().size();
  check::Resolver resolver(checker_->evaluator());
  bool derived = resolver.rederive(ph, prepared.batch, *layerCosts_);
  out.diagnostics = diags_.splitOff(before);
  if (!derived) return out;
  out.plan = plan::planPhase(ph, *prepared.spec, prepared.spec->mapping, sources_,
                             detail == Detail::Full ? &out.diagnostics : nullptr, placement_.get(), layerExpansions_.get());
  out.ok = true;
  return out;
}

}  // namespace ipu::session
