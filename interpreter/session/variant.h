// Mappings as values: plan a variant of a checked training phase without
// writing script text. This is the API a mapping search, a sweep or the REPL
// varies; keep it small and stable.
//
//   session::Session s;
//   auto f = s.readFile("examples/bert_large_pod64.ipu");
//   s.check(*f);                                  // once
//   plan::MappingValue v = s.variantOf();         // run 0, phase 0, as written
//   v.placement = plan::MappingValue::Placement::Balanced;
//   v.pipelineIpus = 8; v.settings.replicas = 8; v.batch.microBatch = 4;
//   session::PlannedVariant p = s.planVariant(v); // p.ok, p.plan, p.diagnostics
//   cost::PhaseEstimate e = cost::estimatePhase(p.plan);
//
// The value is the plan layer's one mapping value (plan/mapping_value.h):
// it is validated and its batch derived by plan::prepareMapping, as every
// mapping value is.
//
// A variant planned this way and the same variant written as a script give
// identical plans (tests/unit/engine_test.cpp checks it over random
// variants). What depends on the batch (global batch, steps given in epochs,
// the linear-scaling learning rate, warmup in epochs) is derived again for
// the variant's batch; layer costs are cached per (model, micro batch,
// sequence length, masked tokens, image size), so variants that keep the
// micro batch do not evaluate the model again.
//
// Errors: a variant the checker would reject (check/mapping_rules.h: t x p x
// r beyond the pod, replicas not a power of two on a pod that needs it,
// balanced(p) deeper than the model, an available_memory_proportion list of
// the wrong length, batch-norm groups that do not divide the replicas; a
// batch that does not derive) is `ok == false` with the checker's codes and
// messages, pointing at the base mapping. Warnings the checker gives scripts
// (an underused pod, ...) are not repeated for variants. Plan diagnostics
// (IPU2xxx, e.g. does not fit) are in `diagnostics` with `ok == true`.
#pragma once

#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/plan/mapping_value.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::session {

// How much a plan explains itself. `Full`: the plan diagnostics a script
// gets, including "does not fit" with the levers that would make it fit
// (each lever is another plan, so this costs several plans when it does not
// fit). `Verdict`: the plan and its `fits`, no diagnostics (what a search
// needs; the plan is the same).
enum class Detail { Full, Verdict };

struct PlannedVariant {
  bool ok = false;                 // false: rejected before planning (see diagnostics)
  ir::PhasePlan plan;              // when ok; `plan.fits` says whether it fits
  base::Diagnostics diagnostics;   // spans are in the session's source map
};

}  // namespace ipu::session
