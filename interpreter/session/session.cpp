#include "interpreter/session/session.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "interpreter/check/codes.h"
#include "interpreter/check/resolver.h"
#include "interpreter/hooks/hook_set.h"
#include "interpreter/hooks/lua_placement.h"
#include "interpreter/hooks/run_hooks.h"
#include "interpreter/plan/expand_layers.h"
#include "interpreter/plan/planner.h"
#include "interpreter/syntax/codes.h"

namespace ipu::session {

Session::Session() : prelude_(&check::Prelude::get()), sources_(prelude_->sources()) {}
Session::~Session() = default;

std::optional<base::FileId> Session::readFile(const std::string& path) {
  base::FileText file = base::readSourceFile(path);
  switch (file.status) {
    case base::FileText::Status::Ok: return sources_.add(path, std::move(file.text));
    case base::FileText::Status::Missing:
      diags_.error(syntax::code::kUnreadable, {}, "cannot read `" + path + "`: " + file.problem,
                   "check the path; scripts end in `.ipu`");
      break;
    case base::FileText::Status::NotAFile:
      diags_.error(syntax::code::kUnreadable, {}, "`" + path + "` is " + file.problem + ", not a script");
      break;
    case base::FileText::Status::TooLarge: {
      char size[32];
      std::snprintf(size, sizeof size, "%.1f", static_cast<double>(file.bytes) / (1 << 20));
      diags_.error(syntax::code::kFileTooLarge, {},
                   "`" + path + "` is " + size + " MiB (" + std::to_string(file.bytes) + " bytes); the limit is 8 MiB",
                   "split it into modules and `import` them");
      break;
    }
    case base::FileText::Status::Unreadable:
      diags_.error(syntax::code::kUnreadable, {}, "cannot read `" + path + "`: " + file.problem);
      break;
  }
  return std::nullopt;
}

base::FileId Session::addSource(std::string name, std::string text) { return sources_.add(std::move(name), std::move(text)); }

const check::CheckedProgram* Session::check(base::FileId file) {
  placement_.reset();
  hooks_.reset();
  layerCosts_.reset();  // keyed by the old checker's model values
  layerExpansions_.reset();
  root_ = file;
  checker_ = std::make_unique<check::Checker>(sources_, diags_, prelude_, &moduleCache_);
  program_ = checker_->checkFile(file);
  if (program_) {
    // Loading runs each hook's top level (in its sandbox) and resolves the
    // program's `lua NAME` functions.
    hooks_ = std::make_unique<hooks::HookSet>(*program_, sources_, diags_, hookPrint_);
    placement_ = std::make_unique<hooks::LuaPlacement>(*hooks_);
  }
  if (diags_.hasErrors()) return nullptr;
  return program_.get();
}

const ir::ExecutionPlan* Session::plan(base::FileId file, bool requireRuns) {
  const check::CheckedProgram* program = check(file);
  if (program == nullptr) return nullptr;
  if (requireRuns && program->runs.empty()) {
    diags_.error(check::code::kNothingToRun, {}, "nothing to plan: `" + sources_.file(file).path() + "` declares no training",
                 "declare `training NAME { mapping: ..., phase ... }`; `run NAME` picks which ones to plan");
    return nullptr;
  }
  plan_ = std::make_unique<ir::ExecutionPlan>(plan::planProgram(*program, sources_, diags_, placement_.get()));
  return plan_.get();
}

}  // namespace ipu::session

namespace ipu::session {

base::Span Session::spanOf(const ir::SourceRef& ref) const {
  for (base::FileId id = 0; id < sources_.size(); ++id) {
    const base::SourceFile& f = sources_.file(id);
    if (f.path() != ref.file || ref.line == 0) continue;
    std::uint32_t begin = f.lineStart(ref.line);
    std::string_view line = f.lineText(ref.line);
    std::uint32_t off = begin, col = 1;
    while (col < ref.column && off < begin + line.size()) {
      ++off;
      while (off < begin + line.size() && (static_cast<unsigned char>(f.text()[off]) & 0xC0) == 0x80) ++off;
      ++col;
    }
    std::uint32_t end = off;
    while (end < begin + line.size() && (std::isalnum(static_cast<unsigned char>(f.text()[end])) || f.text()[end] == '_')) ++end;
    return base::Span{id, off, std::max(end, off + 1)};
  }
  return {};
}

const cost::Estimate* Session::estimate(base::FileId file) {
  const ir::ExecutionPlan* p = plan(file, /*requireRuns=*/true);
  if (p == nullptr) return nullptr;
  estimate_ = std::make_unique<cost::Estimate>(cost::estimate(*p));
  // One diagnostic per problem and place (several phases may hit the same one).
  for (const auto& pr : estimate_->problems) diags_.error(pr.code, spanOf(pr.where), pr.message, pr.help);
  // Hooks run under the estimate too, on its timing (runtime/cost/estimate_steps.h).
  for (std::size_t i = 0; i < p->runs.size() && hooks_ != nullptr && !diags_.hasErrors(); ++i) {
    hooks::RunHooks runHooks(*hooks_, p->runs[i], train::Source::Estimate);
    train::Policies policies = runHooks.policies();
    if (!runHooks.wantsEvents() && !policies.learningRate) continue;
    estimate_->runs[i].hooks = cost::stepThrough(p->runs[i], estimate_->runs[i], runHooks, policies);
  }
  return estimate_.get();
}

}  // namespace ipu::session
