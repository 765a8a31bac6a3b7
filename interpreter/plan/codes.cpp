#include "interpreter/plan/codes.h"

namespace ipu::plan {

const std::vector<base::CodeInfo>& planCodes() {
  static const std::vector<base::CodeInfo> codes = {
      {code::kDoesNotFit, "an IPU needs more In-Processor Memory than the chip has"},
      {code::kStreamingOverflow, "an IPU needs more Streaming Memory than its machine provides"},
      {code::kTiedApart, "a layer sharing weights with one on another IPU duplicates them (warning)"},
      {code::kBadPlacement, "a Lua placement puts a layer outside the IPUs available or leaves an IPU empty"},
      {code::kSearchNothingFits, "a mapping's `search` found no mapping that fits"},
      {code::kSearchNeedsGlobalBatch, "a phase using a searched mapping does not give its `global_batch`"},
      {code::kSearchChose, "what a mapping's `search` chose for a phase (note)"},
  };
  return codes;
}

}  // namespace ipu::plan
