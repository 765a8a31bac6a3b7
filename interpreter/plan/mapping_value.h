// The one mapping value: a placement, every setting of the table of mapping
// fields (runtime/ir/mapping_fields.h) and a batch request. Every way of
// producing a mapping other than the checker reading a script builds one: the
// session's variants (Session::planVariant), the search's candidates and
// what `ipu search --write` writes back, and the settings `search { }` keeps
// fixed. It becomes a mapping the planner takes through one function,
// prepareMapping, which validates it with the checker's rules
// (check/mapping_rules.h) and derives its batch with the checker's
// deriveBatch (check/batch.h), so a value is accepted, refused and batched
// exactly as the same mapping written in a script.
//
//   plan::MappingValue v = plan::valueOf(phase);      // as written
//   v.placement = plan::MappingValue::Placement::Balanced;
//   v.pipelineIpus = 8; v.settings.replicas = 8; v.batch.microBatch = 4;
//   plan::PreparedMapping p = plan::prepareMapping(phase, v);
//   if (p.ok) ... plan::planPhase(phase costed for p.batch, *p.spec, p.spec->mapping, ...)
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/check/batch.h"
#include "interpreter/check/program.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::plan {

struct MappingValue {
  // Where layers go: the pipeline as the base mapping writes it (explicit
  // stages, balanced(p), a Lua function or one IPU); balanced over
  // `pipelineIpus`; everything on one IPU; or the given stages.
  enum class Placement { AsWritten, Balanced, Single, Explicit };
  Placement placement = Placement::AsWritten;
  int pipelineIpus = 1;  // p (Balanced; read back as written for AsWritten; from the stages for Explicit)
  std::vector<std::pair<int, std::vector<int>>> stages;  // Explicit: data-flow order, pipeline IPU and layer indices
  // t, r, phases, recompute, streaming, RTS, available memory proportion,
  // batch-norm groups: the table's fields (its pipeline fields follow the
  // placement; an empty available_memory_proportion keeps the base's).
  ir::Mapping settings;
  check::BatchRequest batch;  // two (or three) of micro batch, accumulation, global batch
};

// The phase's mapping and batch as the script writes them.
MappingValue valueOf(const check::PhaseSpec& phase);

// The value as a mapping spec: `base` (its name, model, pod, spans and
// `search`) with the value's placement and settings. Not validated.
std::shared_ptr<check::MappingSpec> specOf(const check::MappingSpec& base, const MappingValue& value);

struct PreparedMapping {
  bool ok = false;                                // false: refused (see diagnostics)
  std::shared_ptr<const check::MappingSpec> spec; // when ok
  ir::Batch batch;                                // when ok
  base::Diagnostics diagnostics;                  // the checker's codes and messages, at the base mapping
};

// specOf, validateMapping and deriveBatch: the value ready to plan. `base`
// is the mapping the value varies: the phase's own (null), or another checked
// mapping of the same model (a REPL's `:plan m` for the last training).
PreparedMapping prepareMapping(const check::PhaseSpec& phase, const MappingValue& value,
                               const check::MappingSpec* base = nullptr);

}  // namespace ipu::plan
