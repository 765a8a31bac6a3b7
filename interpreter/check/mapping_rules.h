// The rules a mapping keeps beyond each field's own type, with their codes
// and messages, written once: checked for a mapping as the script writes it
// (Resolver::mapping) and for every mapping value made from one (a variant
// planned by the session, a search candidate written back), so a mapping is
// accepted or refused the same way whichever way it was made.
//
//   pipeline IPUs and counts at least 1; balanced(p) no deeper than the model;
//   available_memory_proportion one value or one per pipeline IPU;
//   t x p x r within the pod; replicas a power of two where the pod needs it;
//   batch_norm_replicas a divisor of replicas.
//
// Warnings (an underused pod, RTS with one replica, a replica on a
// non-power-of-two number of IPUs) are for mappings as written only: a
// variant is a question asked by a tool, not the user's text.
#pragma once

#include "interpreter/base/diagnostic.h"
#include "interpreter/check/program.h"

namespace ipu::check {

enum class MappingOrigin { Written, Variant };

struct MappingRuleContext {
  MappingOrigin origin = MappingOrigin::Variant;
  bool hardwareKnown = true;   // false: the pod was declared with errors (reported there): no t x p x r checks
  bool fieldErrors = false;    // the mapping's record had errors: no warnings that would restate them
};

// Reports each broken rule to `diags`; false when any is an error. Stops
// after `balanced(p)` deeper than the model (the IPU counts after it would
// only restate it).
bool validateMapping(const MappingSpec& spec, const MappingRuleContext& context, base::Diagnostics& diags);

}  // namespace ipu::check
