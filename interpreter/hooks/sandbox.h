// One hook's Lua state, locked down because scripts are shared between
// people: only the base, string, table, math and utf8 libraries (no io, os,
// package, require, debug, coroutine, dofile, loadfile, collectgarbage,
// string.dump, rawset, no bytecode), library globals read-only, finalizers
// refused, an instruction budget and a wall-clock budget per call, and a
// memory budget per state. The wall clock is what bounds the library's C
// functions (which the instruction counter never sees): it is checked on
// every function call and return, every 1,000 instructions and on large
// allocations, and the C functions whose single call could run long on
// bounded memory (backtracking patterns, `%b`, long character classes,
// `table.sort` of millions of elements) are refused up front from the size
// of their inputs.
// Every failure comes back as a LuaFailure value with the Lua line and a
// traceback; nothing is thrown and nothing is printed.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

struct lua_State;

namespace ipu::hooks {

// The CPU time the calling thread has used. Budgets are in it, not in wall
// time, so that a busy host (other processes, a parallel build) does not make
// a hook that is well within its budget fail.
std::chrono::nanoseconds threadCpuTime();

struct SandboxLimits {
  long long instructionsPerCall = 20'000'000;  // Lua VM instructions per top-level run or hook call
  std::size_t memoryBytes = 64u << 20;         // everything the state allocates
  long long millisecondsPerCall = 2'000;       // CPU time of the calling thread per top-level run or hook call
  long long millisecondsShared = 10'000;        // CPU time for a series: all top levels, one placement
};

struct LuaFrame {
  bool inHook = false;  // a line of the hook's own code (else a library function)
  int line = 0;         // 1-based within the hook's code
  std::string function; // "on_step", "local helper", "main chunk", ...
};

struct LuaFailure {
  enum class Kind { Syntax, Runtime, Instructions, Time, Memory, Forbidden, Unavailable, BadValue } kind = Kind::Runtime;
  int line = 0;             // 1-based within the hook's code; 0 when unknown
  std::string message;      // without Lua's "chunk:line:" prefix
  std::vector<LuaFrame> traceback;  // innermost first
};

class LuaSandbox {
 public:
  // `print` writes one line per call through `print` (the caller prefixes it).
  LuaSandbox(std::string hookName, SandboxLimits limits, std::function<void(const std::string&)> print);
  ~LuaSandbox();
  LuaSandbox(const LuaSandbox&) = delete;
  LuaSandbox& operator=(const LuaSandbox&) = delete;

  bool ok() const;  // the state could be created

  // Compiles the hook's code (text only) and runs its top level, which
  // normally just defines functions; `milliseconds` (when >= 0) replaces the
  // time budget for this run (what is left of a budget shared by all hooks).
  bool load(const std::string& source, LuaFailure& failure, long long milliseconds = -1);

  // A global function the code defined.
  bool hasFunction(const std::string& name) const;
  std::vector<std::string> functions() const;  // global functions, sorted

  // Calls global function `name`: the caller pushes the arguments with
  // `pushArgs` (on the state) and reads the results with `readResults` (the
  // results are on the stack top; return false with `failure` set to refuse
  // them). Budgets are reset for each call.
  // `milliseconds` (when >= 0) replaces the time budget for this call (what
  // is left of a budget shared by a series of calls, like a placement's).
  bool call(const std::string& name, int results, const std::function<int(lua_State*)>& pushArgs,
            const std::function<bool(lua_State*, LuaFailure&)>& readResults, LuaFailure& failure,
            long long milliseconds = -1);

  lua_State* state() { return L_; }
  const SandboxLimits& limits() const;

  // The host call in progress, for host functions the hook calls back (ctx
  // methods): set for the duration of one call, null otherwise.
  void setCurrentCall(void* call);
  static void* currentCall(lua_State* L);

  struct State;  // the budgets' bookkeeping, reachable from the Lua state (sandbox.cpp)
  const std::string& hookName() const { return name_; }

  // Raises a classified Lua error from inside a host function (a C function
  // called by the hook): the failure keeps its kind and message. It does not
  // return (Lua longjmps), so the caller must hold no C++ object with a
  // destructor: format the message into a char buffer.
  static int fail(lua_State* L, LuaFailure::Kind kind, const char* message);

 private:
  bool protectedCall(int args, int results, LuaFailure& failure, long long milliseconds = -1);
  std::string name_;
  lua_State* L_ = nullptr;
  std::unique_ptr<State> state_;
};

}  // namespace ipu::hooks
