#include "interpreter/hooks/hook_set.h"

#include <algorithm>
#include <chrono>
#include <regex>
#include <set>

#include "interpreter/check/codes.h"
#include "interpreter/hooks/codes.h"

namespace ipu::hooks {

namespace {

const char* codeFor(LuaFailure::Kind kind) {
  switch (kind) {
    case LuaFailure::Kind::Syntax: return code::kLuaSyntax;
    case LuaFailure::Kind::Runtime: return code::kLuaRuntime;
    case LuaFailure::Kind::Instructions: return code::kLuaInstructions;
    case LuaFailure::Kind::Time: return code::kLuaInstructions;
    case LuaFailure::Kind::Memory: return code::kLuaMemory;
    case LuaFailure::Kind::Forbidden: return code::kLuaForbidden;
    case LuaFailure::Kind::Unavailable: return code::kMetricUnavailable;
    case LuaFailure::Kind::BadValue: return code::kLuaBadValue;
  }
  return code::kLuaRuntime;
}

std::string helpFor(LuaFailure::Kind kind, const SandboxLimits& limits) {
  switch (kind) {
    case LuaFailure::Kind::Syntax: return "the hook is Lua 5.4";
    case LuaFailure::Kind::Runtime: return "fix the Lua code at this line";
    case LuaFailure::Kind::Instructions:
      return "a hook call may run " + std::to_string(limits.instructionsPerCall) +
             " Lua instructions: look for a loop that never ends";
    case LuaFailure::Kind::Time:
      return "a hook call may run for " + std::to_string(limits.millisecondsPerCall) +
             " ms, library functions included: look for a loop that never ends or work on huge strings and tables";
    case LuaFailure::Kind::Memory:
      return "a hook may use " + std::to_string(limits.memoryBytes >> 20) +
             " MB: look for a table or string that keeps growing";
    case LuaFailure::Kind::Forbidden:
      return "hooks have the base, string, table, math and utf8 libraries; the host's values are read-only "
             "(docs/hooks.md, \"The sandbox\")";
    case LuaFailure::Kind::Unavailable:
      return "test `ctx.source` (\"estimate\" or \"emulator\") before asking, or train with `ipu run` (docs/hooks.md)";
    case LuaFailure::Kind::BadValue: return "see docs/hooks.md for what each function must return";
  }
  return {};
}

std::string roleName(check::LuaFunctionRef::Role role) {
  switch (role) {
    case check::LuaFunctionRef::Role::Placement: return "placement";
    case check::LuaFunctionRef::Role::LearningRate: return "learning-rate schedule";
    case check::LuaFunctionRef::Role::LossScale: return "loss-scaling policy";
  }
  return "function";
}

}  // namespace

HookSet::HookSet(const check::CheckedProgram& program, base::SourceMap& sources, base::Diagnostics& diags,
                 PrintLine print, SandboxLimits limits)
    : program_(program), sources_(sources), diags_(diags) {
  bool anyFailed = false;
  // All top levels together share one budget, so a script with many slow
  // hooks cannot make `ipu check` take (hooks x per-call budget).
  const auto loadStart = threadCpuTime();
  for (const auto& spec : program.hooks) {
    auto h = std::make_unique<LoadedHook>();
    h->spec = &spec;
    const std::string name = spec.name;
    h->sandbox = std::make_unique<LuaSandbox>(
        name, limits, [print, name](const std::string& line) {
          if (print) print(name, line);
        });
    LuaFailure failure;
    const long long spent = std::chrono::duration_cast<std::chrono::milliseconds>(threadCpuTime() - loadStart).count();
    const long long left = std::max(0LL, limits.millisecondsShared - spent);
    if (!h->sandbox->load(spec.source, failure, std::min(limits.millisecondsPerCall, left))) {
      report(*h, failure, "", "while loading");
      anyFailed = true;
    }
    hooks_.push_back(std::move(h));
  }

  // Resolve each `lua NAME` to the one hook that defines it.
  std::set<std::string> providing;
  for (const auto& ref : program.luaFunctions) {
    if (providers_.count(ref.name)) continue;
    std::vector<LoadedHook*> found;
    std::vector<std::string> defined;
    for (const auto& h : hooks_) {
      if (h->failed) continue;
      if (h->sandbox->hasFunction(ref.name)) found.push_back(h.get());
      for (const auto& f : h->sandbox->functions()) defined.push_back(f);
    }
    if (found.size() == 1) {
      providers_[ref.name] = found.front();
      providing.insert(found.front()->name());
      continue;
    }
    if (found.empty() && anyFailed) continue;  // the hook that failed may have defined it
    if (found.empty()) {
      std::string help = base::didYouMean(ref.name, defined);
      if (help.empty())
        help = program.hooks.empty()
                   ? "declare a hook that defines it: `hook h = lua \"\"\" function " + ref.name + "(...) ... end \"\"\"`"
                   : "define `function " + ref.name + "(...)` in one of the script's hooks";
      diags_.error(code::kLuaFunction, ref.span,
                   "no hook defines the Lua function `" + ref.name + "` (the " + roleName(ref.role) + ")", help);
    } else {
      auto& d = diags_.error(code::kLuaFunction, ref.span,
                             "the Lua function `" + ref.name + "` is defined by " + std::to_string(found.size()) +
                                 " hooks: `" + found[0]->name() + "` and `" + found[1]->name() + "`",
                             "keep one definition, or rename one of them");
      for (LoadedHook* h : found) d.addNote(base::Note{h->spec->span, "hook `" + h->name() + "` defines it"});
    }
  }

  // Hooks that nothing uses (unless a name did not resolve: the hook meant
  // may be among them).
  bool unresolved = false;
  for (const auto& ref : program.luaFunctions) unresolved = unresolved || !providers_.count(ref.name);
  for (const auto& h : hooks_) {
    if (unresolved) break;
    const std::string& name = h->name();
    if (std::find(program.hooksInTrainings.begin(), program.hooksInTrainings.end(), name) !=
            program.hooksInTrainings.end() ||
        providing.count(name) || h->failed)
      continue;
    diags_.warning(check::code::kUnusedHook, h->spec->span,
                   "hook `" + name + "` is declared but no training uses it, and it defines no function the script names",
                   "add `hooks: [" + name + "]` to the training that should run it");
  }
}

HookSet::~HookSet() = default;

LoadedHook* HookSet::hook(const std::string& name) {
  for (auto& h : hooks_)
    if (h->name() == name) return h.get();
  return nullptr;
}

LoadedHook* HookSet::provider(const std::string& function) {
  auto it = providers_.find(function);
  return it == providers_.end() ? nullptr : it->second;
}

const check::LuaFunctionRef* HookSet::reference(const std::string& function) const {
  for (const auto& r : program_.luaFunctions)
    if (r.name == function) return &r;
  return nullptr;
}

base::Span HookSet::lineSpan(const LoadedHook& hook, int line) {
  const check::HookSpec& spec = *hook.spec;
  line = std::max(1, line);
  if (spec.file) {
    auto it = luaFiles_.find(&hook);
    base::FileId f = it != luaFiles_.end() ? it->second : sources_.add(spec.path, spec.source);
    luaFiles_[&hook] = f;
    const base::SourceFile& sf = sources_.file(f);
    std::uint32_t l = std::min<std::uint32_t>(static_cast<std::uint32_t>(line), sf.lineCount());
    std::uint32_t begin = sf.lineStart(l);
    std::uint32_t end = begin + static_cast<std::uint32_t>(sf.lineText(l).size());
    while (begin < end && (sf.text()[begin] == ' ' || sf.text()[begin] == '\t')) ++begin;
    return base::Span{f, begin, std::max(begin + 1, end)};
  }
  const base::SourceFile* sf = sources_.find(spec.sourceSpan.file);
  if (sf == nullptr) return spec.span;
  std::uint32_t first = sf->lineCol(spec.sourceSpan.begin).line;
  std::uint32_t l = std::min(first + static_cast<std::uint32_t>(line) - 1, sf->lineCount());
  std::uint32_t begin = l == first ? spec.sourceSpan.begin : sf->lineStart(l);
  std::uint32_t lineEnd = sf->lineStart(l) + static_cast<std::uint32_t>(sf->lineText(l).size());
  std::uint32_t end = std::min(lineEnd, spec.sourceSpan.end);
  while (begin < end && (sf->text()[begin] == ' ' || sf->text()[begin] == '\t')) ++begin;
  return base::Span{spec.sourceSpan.file, begin, std::max(begin + 1, end)};
}

void HookSet::report(LoadedHook& hook, const LuaFailure& failure, const std::string& function, const std::string& during,
                     base::Span fallback) {
  hook.failed = true;
  std::string message = failure.message;
  // Lua counts lines within the hook; say them as lines of the file shown.
  if (!hook.spec->file)
    if (const base::SourceFile* sf = sources_.find(hook.spec->sourceSpan.file)) {
      const std::uint32_t first = sf->lineCol(hook.spec->sourceSpan.begin).line;
      static const std::regex atLine("at line ([0-9]+)");
      std::string rewritten;
      std::size_t last = 0;
      for (auto it = std::sregex_iterator(message.begin(), message.end(), atLine); it != std::sregex_iterator(); ++it) {
        rewritten += message.substr(last, static_cast<std::size_t>(it->position()) - last);
        rewritten += "at line " + std::to_string(first + std::stoul((*it)[1]) - 1);
        last = static_cast<std::size_t>(it->position() + it->length());
      }
      message = rewritten + message.substr(last);
    }
  std::string what;
  if (failure.kind == LuaFailure::Kind::Syntax) what = "Lua syntax error in hook `" + hook.name() + "`";
  else if (function.empty()) what = "hook `" + hook.name() + "` failed " + during;
  else what = "hook `" + hook.name() + "` failed in `" + function + "`" + (during.empty() ? "" : " " + during);
  base::Span at = failure.line > 0 || !fallback.valid() ? lineSpan(hook, failure.line) : fallback;
  if (failure.line == 0 && !fallback.valid()) at = hook.spec->span;
  auto& d = diags_.error(codeFor(failure.kind), at, what + ": " + message, helpFor(failure.kind, SandboxLimits{}));
  // The traceback, innermost first: each further frame of the hook's code is
  // where its function called the one before.
  int lastInHook = -1;
  for (int i = 0; i < static_cast<int>(failure.traceback.size()); ++i)
    if (failure.traceback[static_cast<std::size_t>(i)].inHook) lastInHook = i;
  bool primary = true;
  for (int i = 0; i < static_cast<int>(failure.traceback.size()); ++i) {
    const LuaFrame& frame = failure.traceback[static_cast<std::size_t>(i)];
    if (!frame.inHook) continue;
    if (primary) {
      primary = false;
      continue;
    }
    std::string who = frame.function;
    if (who.empty()) who = i == lastInHook && !function.empty() ? "`" + function + "`" : "an anonymous function";
    d.addNote(base::Note{lineSpan(hook, frame.line), "called from " + who});
  }
  if (failure.kind == LuaFailure::Kind::Runtime && !d.notes.empty())
    d.help = "fix the Lua code; the notes show the calls that led here";
}

}  // namespace ipu::hooks
