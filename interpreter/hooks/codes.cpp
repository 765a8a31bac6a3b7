#include "interpreter/hooks/lua_syntax.h"

#include <cstdlib>
#include <cstring>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
}

namespace ipu::hooks {

const std::vector<base::CodeInfo>& hookCodes() {
  static const std::vector<base::CodeInfo> codes = {{code::kLuaSyntax, "a Lua hook that does not compile"}};
  return codes;
}

namespace {

struct Budget {
  std::size_t used = 0;
  std::size_t limit = 64u << 20;
};

// Compiling needs memory in proportion to the source; the budget keeps a
// hostile hook from exhausting the host while we only check its syntax.
void* budgetAlloc(void* ud, void* ptr, std::size_t osize, std::size_t nsize) {
  auto* b = static_cast<Budget*>(ud);
  if (ptr == nullptr) osize = 0;
  if (nsize == 0) {
    b->used -= osize;
    std::free(ptr);
    return nullptr;
  }
  if (nsize > osize && b->used + (nsize - osize) > b->limit) return nullptr;
  void* out = std::realloc(ptr, nsize);
  if (out != nullptr) b->used = b->used + nsize - osize;
  return out;
}

}  // namespace

std::optional<LuaSyntaxError> checkLuaSyntax(const std::string& source) {
  Budget budget;
  lua_State* L = lua_newstate(budgetAlloc, &budget);
  if (L == nullptr) return LuaSyntaxError{1, "cannot create a Lua state"};
  std::optional<LuaSyntaxError> result;
  int status = luaL_loadbufferx(L, source.data(), source.size(), "=hook", "t");
  if (status != LUA_OK) {
    const char* msg = lua_tostring(L, -1);
    std::string text = msg != nullptr ? msg : "unknown Lua error";
    LuaSyntaxError err;
    err.line = 1;
    err.message = text;
    // "hook:3: 'end' expected near <eof>"
    if (text.rfind("hook:", 0) == 0) {
      std::size_t colon = text.find(':', 5);
      if (colon != std::string::npos) {
        err.line = std::atoi(text.substr(5, colon - 5).c_str());
        err.message = text.substr(colon + 1);
        while (!err.message.empty() && err.message.front() == ' ') err.message.erase(0, 1);
      }
    }
    if (status == LUA_ERRMEM) err.message = "the hook is too large to compile";
    result = err;
  }
  lua_close(L);
  return result;
}

}  // namespace ipu::hooks
