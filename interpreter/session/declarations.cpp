#include "interpreter/session/declarations.h"

#include <set>
#include <string>
#include <tuple>

#include "runtime/runnable/runnable.h"

namespace ipu::session {

namespace {

bool inStandardLibrary(const ir::SourceRef& where) { return where.file.rfind("std/", 0) == 0; }

}  // namespace

std::size_t reportDeclarationProblems(const ir::ExecutionPlan& plan, Purpose purpose, base::Diagnostics& diags,
                                      const std::function<base::Span(const ir::SourceRef&)>& spanOf) {
  std::size_t errors = 0;
  // Several runs (and phases) may share a model: one diagnostic per place and message.
  std::set<std::tuple<std::string, unsigned, std::string>> seen;
  for (const auto& run : plan.runs)
    for (const auto& [p, phase] : runnable::runProblems(run)) {
      ir::SourceRef where = p.where;
      std::string message = p.message;
      if (where.file.empty() || inStandardLibrary(where)) {
        if (!where.file.empty()) message += " (in the standard library's " + where.file + ":" + std::to_string(where.line) + ")";
        where = phase;
      }
      if (!seen.insert({where.file, where.line, message}).second) continue;
      // A layer op without a kernel is one written for estimation: only `ipu run` refuses it.
      if (purpose != Purpose::Run && p.withoutKernel) continue;
      if (purpose == Purpose::Run || p.reach == runnable::Reach::RunAndEstimate) {
        diags.error(p.code, spanOf(where), message, p.help);
        ++errors;
      } else {
        diags.warning(p.code, spanOf(where), "`ipu run` would refuse this: " + message, p.help);
      }
    }
  return errors;
}

}  // namespace ipu::session
