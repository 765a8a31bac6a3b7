// Diagnostic codes of the hooks layer (IPU4xxx). Stable: tests and
// docs/diagnostics.md refer to them.
#pragma once

#include <vector>

#include "interpreter/base/diagnostic.h"

namespace ipu::hooks {

namespace code {
inline constexpr const char* kLuaSyntax = "IPU4001";
inline constexpr const char* kLuaRuntime = "IPU4002";
inline constexpr const char* kLuaInstructions = "IPU4003";
inline constexpr const char* kLuaMemory = "IPU4004";
inline constexpr const char* kLuaForbidden = "IPU4005";
inline constexpr const char* kMetricUnavailable = "IPU4006";
inline constexpr const char* kLuaFunction = "IPU4007";
inline constexpr const char* kLuaBadValue = "IPU4008";
}  // namespace code

const std::vector<base::CodeInfo>& hookCodes();

}  // namespace ipu::hooks
