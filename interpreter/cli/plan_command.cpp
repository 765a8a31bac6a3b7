// `ipu plan FILE`: compile the script's runs into plans and print them, for a
// person or as the documented JSON (docs/plan.md).
#include <iostream>

#include "interpreter/base/render.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/session_output.h"
#include "interpreter/report/plan_report.h"

namespace ipu::cli {

namespace {

const char* kHelp = R"(usage: ipu plan FILE [--json] [--color WHEN]

Compile the script's runs into plans: the placement of layers on each IPU,
memory per IPU against its capacity, the batch figures and the pipeline
schedule, with a verdict on whether each phase fits (docs/plan.md).

options:
  --json                 the plans as JSON on stdout (format ipu-plan/1, docs/plan.md),
                         with the diagnostics under "diagnostics"
  --color auto|always|never
                         colour (default auto: only on a terminal; NO_COLOR disables)
)";

int run(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  bool json = false;
  base::ColorMode color = base::ColorMode::Auto;
  ArgumentReader in(args);
  std::string v;
  while (in.next()) {
    if (in.flag("--json")) json = true;
    else if (in.value("--color", v)) {
      if (!parseColor(v, color)) return usage("plan", "--color takes `auto`, `always` or `never`");
    } else if (in.isOption()) {
      return usage("plan", "unknown option `" + in.word() + "`");
    } else {
      files.push_back(in.word());
    }
  }
  if (files.size() != 1) return usage("plan", "`plan` takes one script");
  session::Session s;
  showHookOutput(s);
  auto file = s.readFile(files[0]);
  const ir::ExecutionPlan* plan = file ? s.plan(*file, /*requireRuns=*/true) : nullptr;
  if (json) {
    ir::Json j = plan != nullptr ? ir::toJson(*plan) : ir::Json::object();
    if (plan == nullptr) {
      j["format"] = "ipu-plan/1";
      j["runs"] = ir::Json::array();
    }
    j["diagnostics"] = base::toJson(s.diagnostics(), s.sources());
    std::cout << j.dump() << "\n";
  } else {
    printDiagnostics(s, false, color);
    if (plan != nullptr && !plan->runs.empty())
      report::printPlanReport(std::cout, *plan, base::Painter(base::shouldColor(color, 1)));
  }
  return s.diagnostics().hasErrors() ? kUserError : kOk;
}

}  // namespace

const Command kPlanCommand{"plan", "plan FILE",
                           "compile the script's runs into plans: placement per IPU, memory\n"
                           "per IPU against its capacity, batch figures, pipeline schedule",
                           kHelp, run};

}  // namespace ipu::cli
