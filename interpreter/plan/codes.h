// Plan diagnostic codes (IPU2xxx). Stable: tests and docs refer to them.
#pragma once

#include <vector>

#include "interpreter/base/diagnostic.h"

namespace ipu::plan::code {
inline constexpr const char* kDoesNotFit = "IPU2001";
inline constexpr const char* kStreamingOverflow = "IPU2002";
inline constexpr const char* kTiedApart = "IPU2003";
// IPU2004 (Lua placement not available) is retired: it is available.
inline constexpr const char* kBadPlacement = "IPU2005";
// A mapping's `search { ... }` (interpreter/search, run by the session).
inline constexpr const char* kSearchNothingFits = "IPU2006";
inline constexpr const char* kSearchNeedsGlobalBatch = "IPU2007";
inline constexpr const char* kSearchChose = "IPU2008";
}  // namespace ipu::plan::code

namespace ipu::plan {
const std::vector<base::CodeInfo>& planCodes();
}  // namespace ipu::plan
