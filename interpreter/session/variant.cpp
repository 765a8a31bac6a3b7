// Session::variantOf and Session::planVariant (variant.h).
#include "interpreter/check/codes.h"
#include "interpreter/check/resolver.h"
#include "interpreter/hooks/lua_placement.h"
#include "interpreter/plan/context.h"
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

Session::PlannedRun Session::planRunWith(const check::MappingSpec& mapping, std::size_t run) {
  PlannedRun out;
  if (program_ == nullptr || checker_ == nullptr || run >= program_->runs.size()) {
    out.diagnostics.error(check::code::kNothingToRun, {}, "no checked training to plan with another mapping",
                          "check a script that declares a training first (Session::check)");
    return out;
  }
  const check::TrainingSpec& training = program_->runs[run];
  out.run.name = training.name;
  out.run.source = plan::sourceRef(sources_, training.span);
  out.run.hooks = training.hooks;
  out.run.seed = training.seed;
  for (std::size_t i = 0; i < training.phases.size(); ++i) {
    const check::PhaseSpec& phase = training.phases[i];
    if (phase.model != nullptr && mapping.model != nullptr && phase.model->name != mapping.model->name) {
      out.diagnostics.error(check::code::kModelMismatch, mapping.span,
                            "phase `" + phase.name + "` of training `" + training.name + "` trains `" + phase.model->name +
                                "`, but mapping `" + mapping.name + "` maps `" + mapping.model->name + "`",
                            "use a mapping for `" + phase.model->name + "`");
      return out;
    }
    // The other mapping as a value: its placement and settings, the phase's batch as written.
    plan::MappingValue value = plan::valueOf(phase);
    value.settings = mapping.mapping;
    value.pipelineIpus = mapping.pipelineIpus;
    plan::PreparedMapping prepared = plan::prepareMapping(phase, value, &mapping);
    if (!prepared.ok) {
      out.diagnostics = std::move(prepared.diagnostics);
      return out;
    }
    check::PhaseSpec ph = phase;
    ph.mapping = prepared.spec;
    if (!layerCosts_) layerCosts_ = std::make_unique<check::LayerCostCache>();
    const std::size_t before = diags_.all().size();
    check::Resolver resolver(checker_->evaluator());
    const bool derived = resolver.rederive(ph, prepared.batch, *layerCosts_);
    out.diagnostics.append(diags_.splitOff(before));
    if (!derived) return out;
    out.run.phases.push_back(
        plan::planPhase(ph, *prepared.spec, prepared.spec->mapping, sources_, &out.diagnostics, placement_.get()));
  }
  out.ok = true;
  return out;
}

}  // namespace ipu::session
