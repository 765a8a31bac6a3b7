// `ipu check FILE...`: parse, check and plan scripts, and report every
// problem (docs/diagnostics.md).
#include <iostream>

#include "interpreter/base/render.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/session_output.h"

namespace ipu::cli {

namespace {

const char* kHelp = R"(usage: ipu check FILE... [--json | --format human|json] [--color WHEN]

Parse and check scripts and plan their runs, so that a mapping that cannot fit
is an error too; report every problem (silent when clean). Several files are
checked in one process with the standard library loaded once, each in a
session of its own; the exit code is 1 when any of them has an error.

options:
  --json, --format json  diagnostics as JSON on stdout (docs/diagnostics.md);
                         several files: {"files": [...], "errors", "warnings"}
  --format human         diagnostics for a person on stderr (the default)
  --color auto|always|never
                         colour (default auto: only on a terminal; NO_COLOR disables)
)";

struct Options {
  std::vector<std::string> files;
  bool json = false;
  base::ColorMode color = base::ColorMode::Auto;
};

int check(const Options& o) {
  if (o.files.size() == 1) {
    session::Session s;
    showHookOutput(s);
    auto file = s.readFile(o.files[0]);
    // `check` runs the planner too, so that a mapping that cannot fit is a check error.
    if (file) s.plan(*file);
    printDiagnostics(s, o.json, o.color);
    return s.diagnostics().hasErrors() ? kUserError : kOk;
  }
  // Several files are checked one after the other in this process: the
  // standard library is loaded once (the prelude) and each file gets a
  // session of its own, so one file's declarations never leak into another's.
  bool errors = false;
  ir::Json files = ir::Json::array();
  std::size_t errorCount = 0, warningCount = 0;
  for (const auto& path : o.files) {
    session::Session s;
    showHookOutput(s);
    if (auto file = s.readFile(path)) s.plan(*file);
    const auto& diags = s.diagnostics();
    errors = errors || diags.hasErrors();
    if (!o.json) {
      printDiagnostics(s, false, o.color);
      continue;
    }
    ir::Json j = ir::Json::object();
    j["file"] = path;
    j["diagnostics"] = base::toJson(diags, s.sources());
    j["errors"] = diags.errorCount();
    j["warnings"] = diags.warningCount();
    errorCount += diags.errorCount();
    warningCount += diags.warningCount();
    files.push_back(std::move(j));
  }
  if (o.json) {
    ir::Json j = ir::Json::object();
    j["files"] = std::move(files);
    j["errors"] = errorCount;
    j["warnings"] = warningCount;
    std::cout << j.dump() << "\n";
  }
  return errors ? kUserError : kOk;
}

int run(const std::vector<std::string>& args) {
  Options o;
  ArgumentReader in(args);
  std::string v;
  while (in.next()) {
    if (in.flag("--json")) o.json = true;
    else if (in.value("--format", v)) {
      if (v == "json") o.json = true;
      else if (v == "human") o.json = false;
      else return usage("check", "--format takes `human` or `json`");
    } else if (in.value("--color", v)) {
      if (!parseColor(v, o.color)) return usage("check", "--color takes `auto`, `always` or `never`");
    } else if (in.isOption()) {
      return usage("check", "unknown option `" + in.word() + "`");
    } else {
      o.files.push_back(in.word());
    }
  }
  if (o.files.empty()) return usage("check", "`check` takes one or more scripts");
  return check(o);
}

}  // namespace

const Command kCheckCommand{"check", "check FILE...", "parse and check scripts; report every error (silent when clean)",
                            kHelp, run};

}  // namespace ipu::cli
