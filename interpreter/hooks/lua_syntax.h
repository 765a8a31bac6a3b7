// Lua syntax validation for `hook` blocks. Hooks are stored and validated now
// and run by the runtime later; a syntax error in a hook is reported at the
// line of the `.ipu` file that holds it. This layer is the only one linking
// Lua; it compiles the chunk as text only (never bytecode) in a state with a
// small memory budget, and executes nothing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "interpreter/base/diagnostic.h"

namespace ipu::hooks {

struct LuaSyntaxError {
  int line = 0;         // 1-based line within the chunk
  std::string message;  // Lua's message without the "chunk:line:" prefix
};

std::optional<LuaSyntaxError> checkLuaSyntax(const std::string& source);

namespace code {
inline constexpr const char* kLuaSyntax = "IPU4001";
}
const std::vector<base::CodeInfo>& hookCodes();

}  // namespace ipu::hooks
