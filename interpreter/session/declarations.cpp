#include "interpreter/session/declarations.h"

#include <set>
#include <string>
#include <tuple>

#include "runtime/emulator/emulator.h"

namespace ipu::session {

namespace {

bool inStandardLibrary(const ir::SourceRef& where) { return where.file.rfind("std/", 0) == 0; }

}  // namespace

std::size_t reportDeclarationProblems(const ir::ExecutionPlan& plan, base::Diagnostics& diags,
                                      const std::function<base::Span(const ir::SourceRef&)>& spanOf) {
  std::size_t count = 0;
  // Several runs (and phases) may share a model: one diagnostic per place and message.
  std::set<std::tuple<std::string, unsigned, std::string>> seen;
  for (const auto& run : plan.runs)
    for (const auto& p : emu::checkDeclarations(run)) {
      ir::SourceRef where = p.error.where;
      std::string message = p.error.message;
      if (where.file.empty() || inStandardLibrary(where)) {
        if (!where.file.empty()) message += " (in the standard library's " + where.file + ":" + std::to_string(where.line) + ")";
        where = p.phase;
      }
      if (!seen.insert({where.file, where.line, message}).second) continue;
      diags.error(p.error.code, spanOf(where), message, p.error.help);
      ++count;
    }
  return count;
}

}  // namespace ipu::session
