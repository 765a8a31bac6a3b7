// `ipu`: the command-line shell over the session. Thin on purpose: argument
// parsing, choosing human or JSON output, colour policy, and exit codes
// (0 success, 1 user error with diagnostics printed, 2 usage error).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>
#include <string>
#include <vector>

#include "interpreter/base/render.h"
#include "interpreter/base/terminal.h"
#include "interpreter/cli/calibrate_command.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/cli/estimate_report.h"
#include "interpreter/cli/plan_report.h"
#include "interpreter/cli/timeline_render.h"
#include "runtime/cost/timeline.h"
#include "interpreter/session/session.h"
#include "interpreter/syntax/parser.h"
#include "interpreter/syntax/printer.h"
#include "runtime/ir/json.h"

namespace {

using namespace ipu;

constexpr int kOk = 0, kUserError = 1, kUsage = 2;

const char* kUsageText = R"(usage: ipu <command> [options] FILE

Plan and simulate training on Graphcore IPU pods from `.ipu` scripts.

commands:
  check FILE      parse and check a script; report every error (silent when clean)
  plan FILE       compile the script's runs into plans: placement per IPU, memory
                  per IPU against its capacity, batch figures, pipeline schedule
  fmt FILE...     format scripts in the canonical style (in place)
  estimate FILE   predict step time, throughput and time to train of every phase
  calibrate TABLE fit the cost model to measured throughput (a CSV table; see
                  docs/cost-model.md) and print the parameters as an .ipu module
  run FILE        train a small model on the emulator (not available yet)
  repl [FILE]     interactive session (not available yet)

options:
  --json                 machine-readable output (plan, estimate; check: same as --format json)
  --format human|json    diagnostics format for `check`
  --color auto|always|never
                         colour (default auto: only on a terminal; NO_COLOR disables)
  --check                fmt: change nothing; exit 1 if a file is not formatted
  -o, --output FILE      calibrate: write the parameters to FILE
  --timeline             estimate: draw each phase's step, IPU by IPU
  --timeline-svg FILE    estimate: write the timelines as an SVG picture
  --stdout               fmt: print the formatted text instead of writing the file
  -h, --help             this help
  --version              the version

Documentation: docs/language.md, docs/plan.md, docs/cost-model.md, docs/diagnostics.md.
)";

struct Options {
  std::string command;
  std::vector<std::string> files;
  bool json = false;
  bool fmtCheck = false;
  bool fmtStdout = false;
  std::string output;
  bool timeline = false;
  std::string timelineSvg;
  base::ColorMode color = base::ColorMode::Auto;
};

int usage(const std::string& message) {
  std::cerr << "ipu: " << message << "\n\n" << kUsageText;
  return kUsage;
}

void printDiagnostics(session::Session& s, bool json, base::ColorMode mode) {
  const auto& diags = s.diagnostics();
  if (json) {
    ir::Json j = ir::Json::object();
    j["diagnostics"] = base::toJson(diags, s.sources());
    j["errors"] = static_cast<long long>(diags.errorCount());
    j["warnings"] = static_cast<long long>(diags.warningCount());
    std::cout << j.dump() << "\n";
    return;
  }
  base::Painter painter(base::shouldColor(mode, 2));
  for (const auto& d : diags.all()) {
    base::renderHuman(std::cerr, d, s.sources(), painter);
    std::cerr << "\n";
  }
  std::string summary = base::summaryLine(diags, painter);
  if (!summary.empty()) std::cerr << summary << "\n";
}

// What hooks print goes to stderr, tagged with the hook's name, so that
// stdout stays the report (or the JSON document).
void showHookOutput(session::Session& s) {
  s.setHookOutput([](const std::string& hook, const std::string& line) { std::cerr << "[" << hook << "] " << line << "\n"; });
}

int cmdCheck(const Options& o) {
  if (o.files.size() != 1) return usage("`check` takes one script");
  session::Session s;
  showHookOutput(s);
  auto file = s.readFile(o.files[0]);
  // `check` runs the planner too, so that a mapping that cannot fit is a check error.
  if (file) s.plan(*file);
  printDiagnostics(s, o.json, o.color);
  return s.diagnostics().hasErrors() ? kUserError : kOk;
}

int cmdPlan(const Options& o) {
  if (o.files.size() != 1) return usage("`plan` takes one script");
  session::Session s;
  showHookOutput(s);
  auto file = s.readFile(o.files[0]);
  const ir::ExecutionPlan* plan = file ? s.plan(*file, /*requireRuns=*/true) : nullptr;
  if (o.json) {
    ir::Json j = plan != nullptr ? ir::toJson(*plan) : ir::Json::object();
    if (plan == nullptr) {
      j["format"] = "ipu-plan/1";
      j["runs"] = ir::Json::array();
    }
    j["diagnostics"] = base::toJson(s.diagnostics(), s.sources());
    std::cout << j.dump() << "\n";
  } else {
    printDiagnostics(s, false, o.color);
    if (plan != nullptr && !plan->runs.empty())
      cli::printPlanReport(std::cout, *plan, base::Painter(base::shouldColor(o.color, 1)));
  }
  return s.diagnostics().hasErrors() ? kUserError : kOk;
}

// Format in place only when the result parses back to the same tree: a
// formatter bug must never damage a script.
int cmdEstimate(const Options& o) {
  if (o.files.size() != 1) return usage("`estimate` takes one script");
  session::Session s;
  showHookOutput(s);
  auto file = s.readFile(o.files[0]);
  const cost::Estimate* est = file ? s.estimate(*file) : nullptr;
  const ir::ExecutionPlan* plan = est != nullptr ? s.lastPlan() : nullptr;
  if (o.json) {
    ir::Json j = est != nullptr ? cost::toJson(*est) : ir::Json::object();
    if (est == nullptr) {
      j["format"] = "ipu-estimate/1";
      j["runs"] = ir::Json::array();
    }
    j["diagnostics"] = base::toJson(s.diagnostics(), s.sources());
    std::cout << j.dump() << "\n";
  } else {
    printDiagnostics(s, false, o.color);
    if (est != nullptr && plan != nullptr)
      cli::printEstimateReport(std::cout, *plan, *est, base::Painter(base::shouldColor(o.color, 1)), o.timeline);
  }
  if (!o.timelineSvg.empty() && est != nullptr && plan != nullptr) {
    // One picture per phase, stacked.
    std::string body;
    double y = 0, width = 0;
    for (std::size_t i = 0; i < plan->runs.size() && i < est->runs.size(); ++i)
      for (std::size_t k = 0; k < plan->runs[i].phases.size() && k < est->runs[i].phases.size(); ++k) {
        const auto& e = est->runs[i].phases[k];
        if (!e.ok) continue;
        const auto& ph = plan->runs[i].phases[k];
        std::string svg = cli::drawTimelineSvg(cost::timeline(ph, e), "run " + plan->runs[i].name + ", phase " + ph.name,
                                               ph.mapping.shard);
        double h = std::stod(svg.substr(svg.find("height=\"") + 8));
        width = std::max(width, std::stod(svg.substr(svg.find("width=\"") + 7)));
        body += "<svg y=\"" + std::to_string(static_cast<long>(y)) + "\"" + svg.substr(4);
        y += h;
      }
    std::ostringstream svg;
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << static_cast<long>(width) << "\" height=\""
        << static_cast<long>(y) << "\">\n" << body << "</svg>\n";
    std::string error;
    if (!cli::replaceFile(o.timelineSvg, svg.str(), error)) {
      std::cerr << "ipu estimate: " << error << "\n";
      return kUserError;
    }
  }
  return s.diagnostics().hasErrors() ? kUserError : kOk;
}

int cmdFmt(const Options& o) {
  if (o.files.empty()) return usage("`fmt` takes one or more scripts");
  int status = kOk;
  for (const auto& path : o.files) {
    session::Session s;
    auto file = s.readFile(path);
    std::unique_ptr<syntax::Program> program;
    if (file) program = syntax::parse(s.sources(), *file, s.diagnostics());
    if (!program) {
      printDiagnostics(s, false, o.color);
      status = kUserError;
      continue;
    }
    std::string formatted = syntax::print(*program, &s.sources());
    base::FileId again = s.addSource(path, formatted);
    base::Diagnostics scratch;
    auto reparsed = syntax::parse(s.sources(), again, scratch);
    if (!reparsed || syntax::toSExpr(*reparsed) != syntax::toSExpr(*program)) {
      std::cerr << "ipu fmt: internal error: formatting `" << path
                << "` would change its meaning; the file is left untouched (please report this)\n";
      status = kUserError;
      continue;
    }
    const std::string& original = s.sources().file(*file).text();
    if (o.fmtStdout) {
      std::cout << formatted;
      continue;
    }
    if (original == formatted) continue;
    if (o.fmtCheck) {
      std::cerr << path << ": not formatted (run `ipu fmt " << path << "`)\n";
      status = kUserError;
      continue;
    }
    std::string error;
    if (!cli::replaceFile(path, formatted, error)) {
      std::cerr << "ipu fmt: " << error << "\n";
      status = kUserError;
    }
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage("no command given");
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* name) -> std::string {
      std::string prefix = std::string(name) + "=";
      if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
      if (i + 1 < args.size()) return args[++i];
      return {};
    };
    if (a == "-h" || a == "--help" || a == "help") {
      std::cout << kUsageText;
      return kOk;
    }
    if (a == "--version") {
      std::cout << "ipu 0.1.0\n";
      return kOk;
    }
    if (a == "--json") o.json = true;
    else if (a == "--timeline") o.timeline = true;
    else if (a == "--timeline-svg" || a.rfind("--timeline-svg=", 0) == 0) {
      o.timelineSvg = value("--timeline-svg");
      if (o.timelineSvg.empty()) return usage("`--timeline-svg` needs a file name");
    }
    else if (a == "-o" || a == "--output" || a.rfind("--output=", 0) == 0) {
      o.output = value("--output");
      if (o.output.empty()) return usage("`" + a + "` needs a file name");
    }
    else if (a == "--check") o.fmtCheck = true;
    else if (a == "--stdout") o.fmtStdout = true;
    else if (a == "--format" || a.rfind("--format=", 0) == 0) {
      std::string v = value("--format");
      if (v == "json") o.json = true;
      else if (v != "human") return usage("--format takes `human` or `json`");
    } else if (a == "--color" || a.rfind("--color=", 0) == 0) {
      std::string v = value("--color");
      if (v == "auto") o.color = base::ColorMode::Auto;
      else if (v == "always") o.color = base::ColorMode::Always;
      else if (v == "never") o.color = base::ColorMode::Never;
      else return usage("--color takes `auto`, `always` or `never`");
    } else if (a.size() > 1 && a[0] == '-') {
      return usage("unknown option `" + a + "`");
    } else if (o.command.empty()) {
      o.command = a;
    } else {
      o.files.push_back(a);
    }
  }
  if (o.command == "check") return cmdCheck(o);
  if (o.command == "plan") return cmdPlan(o);
  if (o.command == "fmt") return cmdFmt(o);
  if (o.command == "estimate") return cmdEstimate(o);
  if (o.command == "calibrate") {
    if (o.files.size() != 1) return usage("`calibrate` takes one table of measurements");
    return cli::calibrateCommand(o.files[0], o.output, o.color);
  }
  if (o.command == "run" || o.command == "repl") {
    std::cerr << "ipu " << o.command << ": not available in this version yet\n";
    return kUsage;
  }
  return usage("unknown command `" + o.command + "`");
}
