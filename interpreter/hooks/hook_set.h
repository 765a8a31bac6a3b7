// The hooks of a checked program, each loaded into its own sandbox: its code
// compiled (text only) and its top level run, so the functions it defines are
// known. Loading resolves every `lua NAME` of the program to the one hook that
// defines NAME, and reports, as diagnostics pointing into the `.ipu` file (or
// the `.lua` file), Lua syntax errors, failures of the top level, names no
// hook or several hooks define, and hooks nothing uses. Later failures (a hook
// function failing during a run) are reported the same way through report().
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/check/program.h"
#include "interpreter/hooks/sandbox.h"

namespace ipu::hooks {

struct LoadedHook {
  const check::HookSpec* spec = nullptr;
  std::unique_ptr<LuaSandbox> sandbox;
  bool failed = false;  // its code or one of its calls failed: it is not called again
  const std::string& name() const { return spec->name; }
};

class HookSet {
 public:
  // Receives what hooks print, one line at a time.
  using PrintLine = std::function<void(const std::string& hook, const std::string& line)>;

  HookSet(const check::CheckedProgram& program, base::SourceMap& sources, base::Diagnostics& diags,
          PrintLine print = {}, SandboxLimits limits = {});
  ~HookSet();
  HookSet(const HookSet&) = delete;
  HookSet& operator=(const HookSet&) = delete;

  LoadedHook* hook(const std::string& name);
  // The hook that defines `function`, one of the program's `lua NAME`s
  // (null when it could not be resolved; that was reported).
  LoadedHook* provider(const std::string& function);
  const check::LuaFunctionRef* reference(const std::string& function) const;

  // Reports a failure of `hook` while it ran `function` (`during` says when,
  // e.g. "at step 3 of phase `one`"), at the hook's line, with the traceback
  // as notes, and marks the hook failed. `fallback` locates failures with no
  // line of the hook's code (a bad return value): the `lua NAME` that named it.
  void report(LoadedHook& hook, const LuaFailure& failure, const std::string& function, const std::string& during,
              base::Span fallback = {});

  base::Diagnostics& diagnostics() { return diags_; }

 private:
  base::Span lineSpan(const LoadedHook& hook, int line);

  const check::CheckedProgram& program_;
  base::SourceMap& sources_;
  base::Diagnostics& diags_;
  std::vector<std::unique_ptr<LoadedHook>> hooks_;
  std::map<std::string, LoadedHook*> providers_;
  std::map<const LoadedHook*, base::FileId> luaFiles_;  // `lua file` hooks, shown from their own file
};

}  // namespace ipu::hooks
