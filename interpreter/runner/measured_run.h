// Runs measured outside `ipu` (a real training script logging through the
// Python module, docs/python.md): how the store keeps them so that they are
// set beside estimates of the same plan (`ipu runs compare`) and can be
// fitted (`ipu calibrate --store`). A measured run is a store run of kind
// `run` whose parameter `source` is `measured`; it keeps, as parameters, what
// is needed to plan it again: the script's path (its text is the run's
// script), the run and phase it measured, and the mapping it used when not
// the one written (a mapping value, as text). Its plan hash is the hash of
// that plan, as an estimate of it records.
#pragma once
#include <optional>
#include <string>
#include "interpreter/base/diagnostic.h"
#include "interpreter/plan/mapping_value.h"
#include "interpreter/session/session.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::runner {

// Parameter keys of a measured run (beside the plan's own, runParameters).
inline constexpr const char* kSourceParameter = "source";           // "measured"
inline constexpr const char* kMeasuredSource = "measured";
inline constexpr const char* kMeasuredScriptParameter = "measured.script";    // the path the script was read from
inline constexpr const char* kMeasuredPhaseParameter = "measured.phase";      // the phase measured
inline constexpr const char* kMeasuredMappingParameter = "measured.mapping";  // mappingText, absent: as written
inline constexpr const char* kMeasuredLabelParameter = "measured.label";      // a row label for calibration

// A mapping value as text (JSON: placement, stages, every setting of the
// table of mapping fields as script text, the batch request), and back onto
// `value` (the phase's mapping as written, so that what the text does not
// say stays as written). False with `problem` when the text is not one.
std::string mappingText(const plan::MappingValue& value);
bool applyMappingText(plan::MappingValue& value, const std::string& text, std::string& problem);

// Sets one field of a mapping value by name, its value as a script writes it
// (`replicas`, `8`): a field of the mapping field table
// (runtime/ir/mapping_fields.h), `pipeline_ipus` (balanced over that many
// IPUs), `placement` (`as_written`, `balanced`, `single`), or a batch figure
// (`micro_batch`, `gradient_accumulation`, `global_batch`). False with
// `problem` for an unknown name or a value the field does not take.
bool setMappingField(plan::MappingValue& value, const std::string& name, const std::string& text, std::string& problem);

// The run named `run` ("" for the first) of the script `file` of `s`,
// planned, with its phase `phase` ("" for the first) planned with `mapping`
// (null: as written) in place of its own. `s` must not have planned before.
struct MeasuredPlan {
  bool ok = false;
  ir::ExecutionPlan plan;     // that one run
  std::size_t run = 0, phase = 0;  // indices in the script's runs and that run's phases
  std::string problem;        // when not ok and the diagnostics do not say why
  base::Diagnostics diagnostics;   // spans in s.sources()
};
MeasuredPlan planMeasured(session::Session& s, base::FileId file, const std::string& run, const std::string& phase,
                          const plan::MappingValue* mapping);

}  // namespace ipu::runner
