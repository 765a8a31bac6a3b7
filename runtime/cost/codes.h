// Runtime diagnostic codes (IPU3xxx) of the cost model. Stable: tests and docs
// refer to them. (The runtime does not depend on the front end's diagnostics;
// the session turns Problems into diagnostics pointing into the script.)
#pragma once

#include <vector>

namespace ipu::cost {

namespace code {
inline constexpr const char* kNoCalibration = "IPU3001";
inline constexpr const char* kMissingHardware = "IPU3002";
// The emulator's code for the same rule (ir::refuseInstances), which
// `ipu estimate --instances` applies as `ipu run --instances` does.
inline constexpr const char* kInstances = "IPU5012";
}  // namespace code

struct CodeTitle {
  const char* code;
  const char* title;
};
const std::vector<CodeTitle>& costCodes();

}  // namespace ipu::cost
