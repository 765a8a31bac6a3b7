// When a mapping does not fit: each change a user could make to it alone,
// planned (not guessed), and those after which every IPU fits, as the text to
// write in the script. The planner runs this after the passes of a plan that
// does not fit (planner.cpp), never from inside a pass: each lever is another
// mapping value (mapping_value.h) planned from the top.
#pragma once

#include <string>
#include <vector>

#include "interpreter/base/source.h"
#include "interpreter/check/program.h"
#include "interpreter/plan/placement_function.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::plan {

class LayerExpansions;

struct Lever {
  std::string text;  // how to write it in the script (`optimizer_state: streaming`)
  double peakBytes;  // the fullest IPU's memory with it
};

// `settings` are the mapping's as planned (`plan` is their plan). In the order
// tried: the least disruptive changes first.
std::vector<Lever> leversThatFit(const check::PhaseSpec& phase, const check::MappingSpec& mapping, const ir::Mapping& settings,
                                 const ir::PhasePlan& plan, const base::SourceMap& sources, PlacementFunction* placement,
                                 LayerExpansions* expansions);

// The help of the "does not fit" error: the first few levers, or what to combine.
std::string leversHelp(const std::vector<Lever>& levers);
// The levers' texts a help written by leversHelp names, in its order (an
// editor offers to write them: lsp/code_actions.h); none for other text.
std::vector<std::string> leverTextsIn(const std::string& help);

}  // namespace ipu::plan
