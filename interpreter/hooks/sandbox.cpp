#include "interpreter/hooks/sandbox.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}

// Lua reports errors with longjmp, which skips C++ destructors. Functions
// that Lua calls (the lua_CFunctions below) therefore keep no object with a
// destructor alive when they may raise: messages are formatted into plain
// char buffers first.

namespace ipu::hooks {

std::chrono::nanoseconds threadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

namespace {

constexpr int kCountStep = 1000;  // instructions between budget checks
// Worst-case steps a string pattern may take (C code is not interrupted by
// the instruction budget, so a backtracking pattern is refused up front).
// Steps are counted conservatively (see patternCost), so the figure is well
// under a second of matching.
constexpr double kPatternBudget = 2e8;
// Elements `table.sort` sorts with its default comparison (which makes no
// call the budget could see): a few seconds at most for long strings.
constexpr long long kSortLimit = 1 << 20;
// Allocations at least this large check the clock (string.rep, table.concat
// and gsub building big results in a loop inside one C call).
constexpr std::size_t kLargeAllocation = 64u << 10;

using Clock = std::chrono::steady_clock;

const char* const kForbidden[] = {"io", "os", "package", "require", "debug", "coroutine", "dofile", "loadfile",
                                  "collectgarbage", "rawset", "loadstring", "module", "setfenv", "getfenv", "jit",
                                  "ffi", "warn"};

}  // namespace

struct LuaSandbox::State {
  SandboxLimits limits;
  std::function<void(const std::string&)> print;
  std::string chunkName;   // "=hook name": Lua's source name for the hook's code
  std::size_t used = 0;
  bool hostSide = false;   // the host itself is using the state outside a protected call: no limit
  long long instructions = 0;
  bool pending = false;    // a classified failure is being raised
  LuaFailure::Kind pendingKind = LuaFailure::Kind::Runtime;
  std::vector<LuaFrame> frames;  // filled by the message handler
  int errorLine = 0;
  int lastLine = 0;        // the hook's line last seen by the instruction counter (for memory errors)
  Clock::time_point deadline = Clock::time_point::max();  // of the protected call in progress, on the wall clock
  std::chrono::nanoseconds budget{0};      // of the protected call in progress, in thread CPU time
  std::chrono::nanoseconds cpuStart{0};    // the thread's CPU time when it started
  bool timedOut = false;   // the deadline passed: every further allocation and hook check fails
  unsigned allocations = 0;  // every 1,024th allocation checks the clock too (the compiler's, `load` of huge text)
};

namespace {

LuaSandbox::State* stateOf(lua_State* L) { return *static_cast<LuaSandbox::State**>(lua_getextraspace(L)); }

// Whether the call in progress used its budget. The wall clock is cheap to
// read and never behind the thread's CPU time, so it is checked first; only
// when it passed the deadline is the CPU time read (a system call), and when
// the thread was not running all that while (a busy host) the deadline moves
// to where the rest of the budget would end.
bool pastDeadline(LuaSandbox::State* s) {
  if (Clock::now() <= s->deadline) return false;
  const std::chrono::nanoseconds used = threadCpuTime() - s->cpuStart;
  if (used >= s->budget) return true;
  s->deadline = Clock::now() + (s->budget - used);
  return false;
}

void* budgetAlloc(void* ud, void* ptr, std::size_t osize, std::size_t nsize) {
  auto* s = static_cast<LuaSandbox::State*>(ud);
  if (ptr == nullptr) osize = 0;
  if (nsize == 0) {
    s->used -= osize;
    std::free(ptr);
    return nullptr;
  }
  // Outside protected calls an allocation failure would abort the process,
  // so the few allocations the host makes there are not limited.
  if (nsize > osize && !s->hostSide && s->used + (nsize - osize) > s->limits.memoryBytes) return nullptr;
  // A C function building a large value in a loop is bounded by the clock:
  // once the deadline passes every growth fails, which Lua raises as an
  // error the protected call classifies as time (fatal() below).
  if (nsize > osize && !s->hostSide &&
      (s->timedOut || ((nsize >= kLargeAllocation || (++s->allocations & 1023u) == 0) && pastDeadline(s)))) {
    s->timedOut = true;
    return nullptr;
  }
  void* out = std::realloc(ptr, nsize);
  if (out != nullptr) s->used = s->used + nsize - osize;
  return out;
}

int panic(lua_State* L) {
  const char* msg = lua_tostring(L, -1);
  std::fprintf(stderr, "ipu: internal error: Lua panic outside a protected call: %s\n", msg != nullptr ? msg : "?");
  std::abort();
}

bool fatal(LuaSandbox::State* s, int status) {
  if (s->timedOut) {
    s->pending = true;
    s->pendingKind = LuaFailure::Kind::Time;
  } else if (status == LUA_ERRMEM) {
    s->pending = true;
    s->pendingKind = LuaFailure::Kind::Memory;
  }
  return s->pending && (s->pendingKind == LuaFailure::Kind::Instructions || s->pendingKind == LuaFailure::Kind::Time ||
                        s->pendingKind == LuaFailure::Kind::Memory);
}

// The host reads or writes the state outside a protected call.
struct HostSide {
  explicit HostSide(LuaSandbox::State* s) : s_(s) { s_->hostSide = true; }
  ~HostSide() { s_->hostSide = false; }
  LuaSandbox::State* s_;
};

// Counts instructions, and remembers the hook's line that last ran or called
// a function, to locate failures that stop the VM without a traceback (an
// allocation refused inside a library function).
int messageHandler(lua_State* L);

[[noreturn]] void raiseTimeout(lua_State* L, LuaSandbox::State* s) {
  s->timedOut = true;
  s->pending = true;
  s->pendingKind = LuaFailure::Kind::Time;
  char buf[128];
  std::snprintf(buf, sizeof buf, "ran for more than its budget of %lld ms (an endless loop, or work on huge values?)",
                s->limits.millisecondsPerCall);
  luaL_error(L, "%s", buf);
  std::abort();  // luaL_error does not return
}

void countHook(lua_State* L, lua_Debug* ar) {
  LuaSandbox::State* s = stateOf(L);
  // Every call and return into or out of a library function passes here, so
  // a loop of expensive library calls is bounded by the clock even when it
  // runs few VM instructions.
  if (s->timedOut || pastDeadline(s)) {
    // Once raised, the error must be able to reach the host: the message
    // handler that collects the traceback is let through.
    if (s->timedOut && ar->event != LUA_HOOKCOUNT && lua_getinfo(L, "f", ar) != 0) {
      const bool handler = lua_tocfunction(L, -1) == messageHandler;
      lua_pop(L, 1);
      if (handler) return;
    }
    raiseTimeout(L, s);
  }
  if (ar->event == LUA_HOOKRET) return;
  if (ar->event == LUA_HOOKCALL || ar->event == LUA_HOOKTAILCALL) {
    lua_Debug caller;
    if (lua_getstack(L, 1, &caller) != 0 && lua_getinfo(L, "Sl", &caller) != 0 && caller.source != nullptr &&
        s->chunkName == caller.source && caller.currentline > 0)
      s->lastLine = caller.currentline;
    return;
  }
  s->instructions += kCountStep;
  if (lua_getinfo(L, "Sl", ar) != 0 && ar->source != nullptr && s->chunkName == ar->source && ar->currentline > 0)
    s->lastLine = ar->currentline;
  if (s->instructions > s->limits.instructionsPerCall) {
    s->pending = true;
    s->pendingKind = LuaFailure::Kind::Instructions;
    char buf[128];
    std::snprintf(buf, sizeof buf, "used its budget of %lld Lua instructions (an endless loop?)",
                  s->limits.instructionsPerCall);
    luaL_error(L, "%s", buf);
  }
}

// Collects the traceback while the stack is still there.
int messageHandler(lua_State* L) {
  LuaSandbox::State* s = stateOf(L);
  s->frames.clear();
  s->errorLine = 0;
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar) != 0 && s->frames.size() < 32; ++level) {
    if (lua_getinfo(L, "Sln", &ar) == 0) break;
    LuaFrame f;
    f.inHook = ar.source != nullptr && s->chunkName == ar.source && ar.currentline > 0;
    f.line = f.inHook ? ar.currentline : 0;
    if (ar.what != nullptr && std::strcmp(ar.what, "main") == 0) f.function = "the hook's top level";
    else if (ar.name != nullptr) f.function = std::string("`") + ar.name + "`";
    else if (ar.what != nullptr && std::strcmp(ar.what, "C") == 0) f.function = "a library function";
    // else unnamed: a function the host called (named by the caller) or an anonymous one
    if (f.inHook && s->errorLine == 0) s->errorLine = f.line;
    s->frames.push_back(std::move(f));
  }
  if (lua_type(L, 1) != LUA_TSTRING && lua_type(L, 1) != LUA_TNUMBER && !luaL_getmetafield(L, 1, "__tostring")) {
    // error(table) and friends: say what it was.
    lua_pushfstring(L, "error() was given a %s, not a message", luaL_typename(L, 1));
  } else if (lua_type(L, 1) != LUA_TSTRING) {
    if (lua_type(L, 1) != LUA_TNUMBER) lua_pop(L, 1);  // the __tostring metafield
    luaL_tolstring(L, 1, nullptr);
  } else {
    lua_pushvalue(L, 1);
  }
  return 1;
}

// __index of the global table: library names, then forbidden names with an
// explanation, else nil (an undefined global, as in Lua).
int globalIndex(lua_State* L) {
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char* key = lua_tostring(L, 2);
    for (const char* f : kForbidden)
      if (std::strcmp(key, f) == 0) {
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "`%s` is not available in ipu hooks: they have only the base, string, table, math and utf8 "
                      "libraries",
                      key);
        LuaSandbox::State* s = stateOf(L);
        s->pending = true;
        s->pendingKind = LuaFailure::Kind::Forbidden;
        return luaL_error(L, "%s", buf);
      }
  }
  lua_pushnil(L);
  return 1;
}

int globalNewIndex(lua_State* L) {
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  const bool library = !lua_isnil(L, -1);
  lua_pop(L, 1);
  if (library) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "`%s` belongs to the host and is read-only in ipu hooks",
                  lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
    LuaSandbox::State* s = stateOf(L);
    s->pending = true;
    s->pendingKind = LuaFailure::Kind::Forbidden;
    return luaL_error(L, "%s", buf);
  }
  lua_rawset(L, 1);
  return 0;
}

// A library table seen through a read-only proxy.
int readOnlyNewIndex(lua_State* L) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "library tables are read-only in ipu hooks (assigning `%s`)",
                lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
  LuaSandbox::State* s = stateOf(L);
  s->pending = true;
  s->pendingKind = LuaFailure::Kind::Forbidden;
  return luaL_error(L, "%s", buf);
}

void pushReadOnlyProxy(lua_State* L, int table) {
  table = lua_absindex(L, table);
  lua_newtable(L);                  // proxy
  lua_newtable(L);                  // its metatable
  lua_pushvalue(L, table);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, readOnlyNewIndex);
  lua_setfield(L, -2, "__newindex");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
}

int sandboxPrint(lua_State* L) {
  const int n = lua_gettop(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; ++i) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, nullptr);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  std::size_t len = 0;
  const char* text = lua_tolstring(L, -1, &len);
  LuaSandbox::State* s = stateOf(L);
  if (s->print) s->print(std::string(text, len));
  return 0;
}

// pcall and xpcall that cannot swallow a used-up budget: once the
// instruction or memory budget is exhausted the error keeps propagating.
int finishProtected(lua_State* L, int status, int base) {
  LuaSandbox::State* s = stateOf(L);
  if (status != LUA_OK) {
    if (fatal(s, status)) return lua_error(L);
    s->pending = false;  // caught by the hook: no longer a failure of ours
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
  }
  lua_pushboolean(L, 1);
  lua_insert(L, base);
  return lua_gettop(L) - base + 1;
}

int sandboxPcall(lua_State* L) {
  luaL_checkany(L, 1);
  const int base = 1;
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  return finishProtected(L, status, base);
}

// Lua runs a message handler while the error is being raised, with hooks
// disabled (the error may come from inside the count hook): a handler that
// loops would escape every budget. So the hook's handler is called after
// the protected call has returned, as an ordinary call the budgets see.
// Nothing is lost: without the debug library a handler cannot inspect the
// stack it was raised on.
int sandboxXpcall(lua_State* L) {
  const int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 1);   // f
  lua_copy(L, 2, 1);     // handler at 1
  lua_replace(L, 2);     // f at 2
  int status = lua_pcall(L, n - 2, LUA_MULTRET, 0);
  if (status != LUA_OK) {
    LuaSandbox::State* s = stateOf(L);
    if (fatal(s, status)) return lua_error(L);
    s->pending = false;
    lua_pushvalue(L, 1);  // the handler
    lua_insert(L, -2);    // handler, error
    const int handled = lua_pcall(L, 1, 1, 0);
    if (handled != LUA_OK && fatal(s, handled)) return lua_error(L);
    s->pending = false;
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
  }
  return finishProtected(L, status, 2);
}

int sandboxSetmetatable(lua_State* L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_getfield(L, 2, "__gc");
    const bool gc = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (gc) {
      LuaSandbox::State* s = stateOf(L);
      s->pending = true;
      s->pendingKind = LuaFailure::Kind::Forbidden;
      return luaL_error(L, "finalizers (`__gc`) are not allowed in ipu hooks");
    }
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

// load(chunk [, name [, mode [, env]]]) for text only: bytecode could break
// out of the sandbox.
int sandboxLoad(lua_State* L) {
  const int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, 1);
  if (n >= 2) lua_pushvalue(L, 2);
  else lua_pushnil(L);
  lua_pushliteral(L, "t");
  int args = 3;
  if (n >= 4) {
    lua_pushvalue(L, 4);
    ++args;
  }
  lua_call(L, args, 2);
  return 2;
}

// The worst case of Lua's matcher, in steps: every start position (one when
// anchored), times the pattern's length (a long character class is scanned
// for every subject character), times the subject length for every
// repetition (`*`, `+`, `-` backtrack) and every `%b` (which scans to the
// end of the subject), times 2 for every `?`. Conservative on purpose: the
// matcher is C code that neither the instruction counter nor the clock can
// interrupt, so what could run long is refused up front.
double patternCost(const char* p, std::size_t plen, std::size_t n, bool anchoredOrPlain) {
  const double subject = static_cast<double>(n) + 1;
  double cost = (anchoredOrPlain ? 1.0 : subject) * (static_cast<double>(plen) + 1);
  bool inSet = false;
  for (std::size_t i = 0; i < plen; ++i) {
    char c = p[i];
    if (c == '%') {
      if (!inSet && i + 1 < plen && p[i + 1] == 'b') {
        cost *= subject;
        i += 3;  // %bxy
        continue;
      }
      ++i;
      continue;
    }
    if (inSet) {
      if (c == ']') inSet = false;
      continue;
    }
    if (c == '[') {
      inSet = true;
      if (i + 1 < plen && p[i + 1] == '^') ++i;
      if (i + 1 < plen && p[i + 1] == ']') ++i;
      continue;
    }
    if ((c == '*' || c == '+' || c == '-') && i > 0) cost *= subject;
    else if (c == '?') cost *= 2;
    if (cost > 1e300) break;
  }
  return cost;
}

// table.sort with the default comparison runs entirely in C; with a
// comparison function every comparison is a call the clock sees.
int guardedSort(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (lua_isnoneornil(L, 2)) {
    const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, 1));
    if (n > kSortLimit) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "table.sort of %lld elements could take too long; the sandbox sorts at most %lld without a "
                    "comparison function",
                    static_cast<long long>(n), kSortLimit);
      return LuaSandbox::fail(L, LuaFailure::Kind::Time, buf);
    }
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 0);
  return 0;
}

int guardedPattern(lua_State* L) {
  std::size_t n = 0, plen = 0;
  const char* s = lua_tolstring(L, 1, &n);
  const char* p = lua_tolstring(L, 2, &plen);
  const int which = static_cast<int>(lua_tointeger(L, lua_upvalueindex(2)));  // 0 find, 1 match, 2 gmatch, 3 gsub
  if (s != nullptr && p != nullptr) {
    bool plain = which == 0 && lua_toboolean(L, 4);
    bool anchored = plen > 0 && p[0] == '^' && which != 2;
    double cost = plain ? 1.0 : patternCost(p, plen, n, anchored);
    if (cost > kPatternBudget) {
      LuaSandbox::State* st = stateOf(L);
      st->pending = true;
      st->pendingKind = LuaFailure::Kind::Time;
      return luaL_error(L,
                        "the string pattern could take too long on a %d-byte string (its repetitions backtrack); "
                        "match a shorter string or a simpler pattern",
                        static_cast<int>(std::min<std::size_t>(n, 2147483647)));
    }
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

}  // namespace

LuaSandbox::LuaSandbox(std::string hookName, SandboxLimits limits, std::function<void(const std::string&)> print)
    : name_(std::move(hookName)), state_(std::make_unique<State>()) {
  state_->limits = limits;
  state_->print = std::move(print);
  state_->chunkName = "=" + name_;
  L_ = lua_newstate(budgetAlloc, state_.get());
  if (L_ == nullptr) return;
  *static_cast<State**>(lua_getextraspace(L_)) = state_.get();
  lua_atpanic(L_, panic);

  luaL_requiref(L_, LUA_GNAME, luaopen_base, 1);
  luaL_requiref(L_, LUA_STRLIBNAME, luaopen_string, 1);
  luaL_requiref(L_, LUA_TABLIBNAME, luaopen_table, 1);
  luaL_requiref(L_, LUA_MATHLIBNAME, luaopen_math, 1);
  luaL_requiref(L_, LUA_UTF8LIBNAME, luaopen_utf8, 1);
  lua_settop(L_, 0);

  // Harden the string library in place (string methods use it directly).
  lua_getglobal(L_, LUA_STRLIBNAME);
  lua_pushnil(L_);
  lua_setfield(L_, -2, "dump");
  const char* patterns[] = {"find", "match", "gmatch", "gsub"};
  for (int i = 0; i < 4; ++i) {
    lua_getfield(L_, -1, patterns[i]);
    lua_pushinteger(L_, i);
    lua_pushcclosure(L_, guardedPattern, 2);
    lua_setfield(L_, -2, patterns[i]);
  }
  lua_pop(L_, 1);
  lua_getglobal(L_, LUA_TABLIBNAME);
  lua_getfield(L_, -1, "sort");
  lua_pushcclosure(L_, guardedSort, 1);
  lua_setfield(L_, -2, "sort");
  lua_pop(L_, 1);
  // Hide the string metatable (it holds the real string table).
  lua_pushliteral(L_, "");
  if (lua_getmetatable(L_, -1)) {
    lua_pushboolean(L_, 0);
    lua_setfield(L_, -2, "__metatable");
    lua_pop(L_, 1);
  }
  lua_pop(L_, 1);

  // Move every global into the library table behind a locked global table.
  lua_pushglobaltable(L_);
  const int g = lua_gettop(L_);
  lua_newtable(L_);
  const int lib = lua_gettop(L_);
  lua_pushnil(L_);
  while (lua_next(L_, g) != 0) {
    lua_pushvalue(L_, -2);
    lua_insert(L_, -2);
    lua_rawset(L_, lib);
  }
  // Clear the global table.
  for (;;) {
    lua_pushnil(L_);
    if (lua_next(L_, g) == 0) break;
    lua_pop(L_, 1);
    lua_pushnil(L_);
    lua_rawset(L_, g);
  }
  for (const char* f : kForbidden) {
    lua_pushnil(L_);
    lua_setfield(L_, lib, f);
  }
  // Library tables become read-only proxies.
  for (const char* name : {LUA_STRLIBNAME, LUA_TABLIBNAME, LUA_MATHLIBNAME, LUA_UTF8LIBNAME}) {
    lua_getfield(L_, lib, name);
    pushReadOnlyProxy(L_, -1);
    lua_setfield(L_, lib, name);
    lua_pop(L_, 1);
  }
  // Replacements of base functions.
  lua_pushcfunction(L_, sandboxPrint);
  lua_setfield(L_, lib, "print");
  lua_pushcfunction(L_, sandboxPcall);
  lua_setfield(L_, lib, "pcall");
  lua_pushcfunction(L_, sandboxXpcall);
  lua_setfield(L_, lib, "xpcall");
  lua_getfield(L_, lib, "setmetatable");
  lua_pushcclosure(L_, sandboxSetmetatable, 1);
  lua_setfield(L_, lib, "setmetatable");
  lua_getfield(L_, lib, "load");
  lua_pushcclosure(L_, sandboxLoad, 1);
  lua_setfield(L_, lib, "load");
  lua_pushvalue(L_, g);
  lua_setfield(L_, lib, LUA_GNAME);
  // The global table's metatable.
  lua_newtable(L_);
  lua_pushvalue(L_, lib);
  lua_pushcclosure(L_, globalIndex, 1);
  lua_setfield(L_, -2, "__index");
  lua_pushvalue(L_, lib);
  lua_pushcclosure(L_, globalNewIndex, 1);
  lua_setfield(L_, -2, "__newindex");
  lua_pushboolean(L_, 0);
  lua_setfield(L_, -2, "__metatable");
  lua_setmetatable(L_, g);
  lua_settop(L_, 0);

  lua_sethook(L_, countHook, LUA_MASKCOUNT | LUA_MASKCALL | LUA_MASKRET, kCountStep);
}

LuaSandbox::~LuaSandbox() {
  if (L_ != nullptr) lua_close(L_);
}

bool LuaSandbox::ok() const { return L_ != nullptr; }

const SandboxLimits& LuaSandbox::limits() const { return state_->limits; }

void LuaSandbox::setCurrentCall(void* call) {
  if (L_ == nullptr) return;
  HostSide host(state_.get());
  if (call != nullptr) lua_pushlightuserdata(L_, call);
  else lua_pushnil(L_);
  lua_setfield(L_, LUA_REGISTRYINDEX, "ipu.call");
}

void* LuaSandbox::currentCall(lua_State* L) {
  lua_getfield(L, LUA_REGISTRYINDEX, "ipu.call");
  void* p = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return p;
}

int LuaSandbox::fail(lua_State* L, LuaFailure::Kind kind, const char* message) {
  State* s = stateOf(L);
  s->pending = true;
  s->pendingKind = kind;
  return luaL_error(L, "%s", message);
}

bool LuaSandbox::protectedCall(int args, int results, LuaFailure& failure, long long milliseconds) {
  State* s = state_.get();
  const int fn = lua_gettop(L_) - args;
  lua_pushcfunction(L_, messageHandler);
  lua_insert(L_, fn);
  s->instructions = 0;
  s->pending = false;
  s->frames.clear();
  s->errorLine = 0;
  s->lastLine = 0;
  s->timedOut = false;
  const long long budget = milliseconds >= 0 ? milliseconds : s->limits.millisecondsPerCall;
  s->budget = std::chrono::milliseconds(budget);
  s->cpuStart = threadCpuTime();
  s->deadline = Clock::now() + s->budget;
  int status = lua_pcall(L_, args, results, fn);
  s->deadline = Clock::time_point::max();
  const bool timedOut = s->timedOut;
  s->timedOut = false;
  lua_remove(L_, fn);
  if (status == LUA_OK) return true;
  failure = LuaFailure{};
  HostSide host(s);
  if (timedOut) {
    failure.kind = LuaFailure::Kind::Time;
    failure.message = budget < s->limits.millisecondsPerCall
                          ? "ran out of the " + std::to_string(s->limits.millisecondsShared) +
                                " ms it shares with the calls before it (all hooks' top levels, or one placement's "
                                "calls), which used most"
                          : "ran for more than its budget of " + std::to_string(budget) +
                                " ms (an endless loop, or work on huge values?)";
  } else if (status == LUA_ERRMEM || (s->pending && s->pendingKind == LuaFailure::Kind::Memory)) {
    failure.kind = LuaFailure::Kind::Memory;
    failure.message = "used its memory budget of " + std::to_string(s->limits.memoryBytes >> 20) + " MB";
  } else {
    failure.kind = s->pending ? s->pendingKind : LuaFailure::Kind::Runtime;
    std::size_t len = 0;
    const char* msg = lua_tolstring(L_, -1, &len);
    failure.message = msg != nullptr ? std::string(msg, len) : "an error object that is not a string";
    // Drop Lua's "hook name:line: " prefix: the location is reported separately.
    const std::string prefix = name_ + ":";
    if (failure.message.rfind(prefix, 0) == 0) {
      std::size_t i = prefix.size();
      while (i < failure.message.size() && std::isdigit(static_cast<unsigned char>(failure.message[i]))) ++i;
      if (i > prefix.size() && failure.message.compare(i, 2, ": ") == 0) failure.message.erase(0, i + 2);
    }
  }
  failure.line = s->errorLine != 0 ? s->errorLine : s->lastLine;
  failure.traceback = s->frames;
  s->pending = false;
  lua_pop(L_, 1);
  return false;
}

bool LuaSandbox::load(const std::string& source, LuaFailure& failure, long long milliseconds) {
  if (L_ == nullptr) {
    failure = LuaFailure{LuaFailure::Kind::Memory, 0, "cannot create a Lua state", {}};
    return false;
  }
  int status = luaL_loadbufferx(L_, source.data(), source.size(), state_->chunkName.c_str(), "t");
  if (status != LUA_OK) {
    HostSide host(state_.get());
    failure = LuaFailure{};
    failure.kind = status == LUA_ERRMEM ? LuaFailure::Kind::Memory : LuaFailure::Kind::Syntax;
    std::size_t len = 0;
    const char* msg = lua_tolstring(L_, -1, &len);
    std::string text = msg != nullptr ? std::string(msg, len) : "unknown Lua error";
    const std::string prefix = name_ + ":";
    failure.line = 1;
    if (text.rfind(prefix, 0) == 0) {
      std::size_t colon = text.find(':', prefix.size());
      if (colon != std::string::npos) {
        failure.line = std::atoi(text.substr(prefix.size(), colon - prefix.size()).c_str());
        text = text.substr(colon + 1);
        while (!text.empty() && text.front() == ' ') text.erase(0, 1);
      }
    }
    failure.message = status == LUA_ERRMEM ? "the hook is too large to compile" : text;
    lua_pop(L_, 1);
    return false;
  }
  return protectedCall(0, 0, failure, milliseconds);
}

bool LuaSandbox::hasFunction(const std::string& name) const {
  if (L_ == nullptr) return false;
  HostSide host(state_.get());
  lua_pushglobaltable(L_);
  lua_pushlstring(L_, name.data(), name.size());
  lua_rawget(L_, -2);
  const bool fn = lua_type(L_, -1) == LUA_TFUNCTION;
  lua_pop(L_, 2);
  return fn;
}

std::vector<std::string> LuaSandbox::functions() const {
  std::vector<std::string> out;
  if (L_ == nullptr) return out;
  HostSide host(state_.get());
  lua_pushglobaltable(L_);
  lua_pushnil(L_);
  while (lua_next(L_, -2) != 0) {
    if (lua_type(L_, -2) == LUA_TSTRING && lua_type(L_, -1) == LUA_TFUNCTION) out.emplace_back(lua_tostring(L_, -2));
    lua_pop(L_, 1);
  }
  lua_pop(L_, 1);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

struct CallRequest {
  const std::string* name;
  const std::function<int(lua_State*)>* pushArgs;
  int results;
};

// Runs inside the protected call, so pushing the arguments may fail safely.
int trampoline(lua_State* L) {
  auto* req = static_cast<CallRequest*>(lua_touserdata(L, 1));
  lua_settop(L, 0);
  lua_pushglobaltable(L);
  lua_pushlstring(L, req->name->data(), req->name->size());
  lua_rawget(L, -2);
  lua_remove(L, 1);
  const int args = (*req->pushArgs)(L);
  lua_call(L, args, req->results);
  return req->results;
}

}  // namespace

bool LuaSandbox::call(const std::string& name, int results, const std::function<int(lua_State*)>& pushArgs,
                      const std::function<bool(lua_State*, LuaFailure&)>& readResults, LuaFailure& failure,
                      long long milliseconds) {
  if (L_ == nullptr || !hasFunction(name)) {
    failure = LuaFailure{LuaFailure::Kind::Runtime, 0, "the hook defines no function `" + name + "`", {}};
    return false;
  }
  CallRequest req{&name, &pushArgs, results};
  lua_pushcfunction(L_, trampoline);
  lua_pushlightuserdata(L_, &req);
  if (!protectedCall(1, results, failure, milliseconds)) return false;
  HostSide host(state_.get());
  const int top = lua_gettop(L_);
  bool ok = readResults(L_, failure);
  lua_settop(L_, top - results);
  return ok;
}

}  // namespace ipu::hooks
