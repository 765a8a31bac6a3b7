// `ipu`: the command-line shell over the session. Thin on purpose: argument
// parsing, choosing human or JSON output, colour policy, and exit codes
// (0 success, 1 user error with diagnostics printed, 2 usage error).
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "interpreter/base/render.h"
#include "interpreter/base/terminal.h"
#include "interpreter/cli/calibrate_command.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/cli/report_command.h"
#include "interpreter/cli/runs_command.h"
#include "interpreter/cli/sweep_command.h"
#include "interpreter/cli/sweep_run_command.h"
#include "interpreter/cli/search_command.h"
#include "interpreter/repl/repl.h"
#include "interpreter/report/estimate_report.h"
#include "interpreter/report/plan_report.h"
#include "interpreter/report/timeline_render.h"
#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/step_export.h"
#include "interpreter/runner/train.h"
#include "interpreter/session/session.h"
#include "interpreter/syntax/parser.h"
#include "interpreter/syntax/printer.h"
#include "runtime/cost/timeline.h"
#include "runtime/ir/json.h"

namespace {

using namespace ipu;

constexpr int kOk = 0, kUserError = 1, kUsage = 2;

const char* kUsageText = R"(usage: ipu <command> [options] FILE

Plan and simulate training on Graphcore IPU pods from `.ipu` scripts.

commands:
  check FILE...   parse and check scripts; report every error (silent when clean)
  plan FILE       compile the script's runs into plans: placement per IPU, memory
                  per IPU against its capacity, batch figures, pipeline schedule
  fmt FILE...     format scripts in the canonical style (in place)
  estimate FILE   predict step time, throughput and time to train of every phase
  search FILE     find the fastest mappings of each phase that fit (docs/search.md;
                  `ipu search --help` lists its options)
  calibrate TABLE fit the cost model to measured throughput (a CSV table; see
                  docs/cost-model.md) and print the parameters as an .ipu module
  run FILE        train the script's runs on the emulator (small models), with a
                  progress display and a run directory (docs/run.md)
  repl [FILE]     interactive session: declarations accumulate, expressions print
                  their value, :plan :estimate :mem :run :doc (see docs/repl.md)
  runs            list, filter, show and compare recorded runs and estimates
                  (`ipu runs --help`; docs/tracking.md)
  report [IDS]    one self-contained HTML file with plots of recorded runs
  sweep FILE [NAME]
                  create or resume a sweep declared in FILE and run an agent on it
  sweep           list sweeps of the run store, show one's status, pause, resume
                  or cancel it (`ipu sweep --help`; docs/sweeps.md)
  agent SWEEP     run one more agent on a sweep of the run store (`ipu agent --help`)

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
  --runs-dir DIR         run: where run directories go (default: runs)
  --resume[=DIR]         run: continue the latest run of the training (or DIR)
  --steps N              run: at most N steps per phase (a quick try)
  --threads N            run: host threads for the virtual IPUs (default: all)
  --checkpoint-every N   run: steps between checkpoints (default: 100)
  --export-steps N DIR   run: also write the first N steps (weights, batches,
                         gradients) to DIR as NumPy files (docs/emulator.md)
  --store PATH|URI       run, estimate: the run store (default: $IPU_STORE, else runs/ipu.db)
  --no-store             run, estimate: record nothing in the run store
  -h, --help             this help
  --version              the version

Documentation: docs/language.md, docs/plan.md, docs/cost-model.md, docs/run.md,
docs/repl.md, docs/hooks.md, docs/emulator.md, docs/tracking.md, docs/sweeps.md, docs/diagnostics.md.
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
  // run
  bool resume = false;
  std::string resumeFrom;
  std::string runsDir = "runs";
  int threads = 0;
  long long steps = 0;
  long long checkpointEvery = 100;
  runner::ExportRequest exportRequest;   // --export-steps N DIR (steps 0: none)
  base::ColorMode color = base::ColorMode::Auto;
  std::string store;     // --store
  bool noStore = false;  // --no-store
};

// The run store `run` and `estimate` record into (docs/tracking.md); null
// with --no-store, or when it cannot be opened (then `error` says why).
std::unique_ptr<store::RunStore> openRecordingStore(const Options& o, std::string& error) {
  if (o.noStore) return nullptr;
  try {
    return store::openStore(cli::storeLocation(o.store, o.runsDir), store::OpenMode::Create);
  } catch (const store::StoreError& e) {
    error = e.what();
    return nullptr;
  }
}

int usage(const std::string& message) {
  // The message and where to look, not the whole help: the mistake stays on screen.
  std::cerr << "ipu: " << message << "\nusage: ipu <command> [options] FILE  (`ipu --help` lists commands and options)\n";
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
  s.setHookOutput([](const std::string& hook, const std::string& line) { std::cerr << "[" << hook << "] " << base::printable(line) << "\n"; });
}

// Several files are checked one after the other in this process: the
// standard library is loaded once (the prelude) and each file gets a session
// of its own, so one file's declarations never leak into another's.
int cmdCheck(const Options& o) {
  if (o.files.empty()) return usage("`check` takes one or more scripts");
  if (o.files.size() == 1) {
    session::Session s;
    showHookOutput(s);
    auto file = s.readFile(o.files[0]);
    // `check` runs the planner too, so that a mapping that cannot fit is a check error.
    if (file) s.plan(*file);
    printDiagnostics(s, o.json, o.color);
    return s.diagnostics().hasErrors() ? kUserError : kOk;
  }
  bool errors = false;
  ir::Json files = ir::Json::array();
  long long errorCount = 0, warningCount = 0;
  for (const auto& path : o.files) {
    session::Session s;
    showHookOutput(s);
    if (auto file = s.readFile(path)) s.plan(*file);
    const auto& diags = s.diagnostics();
    errors = errors || diags.hasErrors();
    if (o.json) {
      ir::Json j = ir::Json::object();
      j["file"] = path;
      j["diagnostics"] = base::toJson(diags, s.sources());
      j["errors"] = static_cast<long long>(diags.errorCount());
      j["warnings"] = static_cast<long long>(diags.warningCount());
      errorCount += static_cast<long long>(diags.errorCount());
      warningCount += static_cast<long long>(diags.warningCount());
      files.push(std::move(j));
    } else {
      printDiagnostics(s, false, o.color);
    }
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
      report::printPlanReport(std::cout, *plan, base::Painter(base::shouldColor(o.color, 1)));
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
      report::printEstimateReport(std::cout, *plan, *est, base::Painter(base::shouldColor(o.color, 1)), o.timeline);
  }
  // An estimate with errors (a phase the model cannot estimate, a failing
  // hook) is not kept: the store holds predictions one can compare against.
  if (est != nullptr && plan != nullptr && !s.diagnostics().hasErrors() && !o.noStore) {
    std::string storeError;
    auto runStore = openRecordingStore(o, storeError);
    if (!runStore) {
      std::cerr << "ipu estimate: error: not recorded: " << storeError << "\n  help: --no-store estimates without recording\n";
      return kUserError;
    }
    try {
      auto ids = runner::recordEstimate(*runStore, *plan, *est, s.rootText());
      for (long long id : ids) std::cerr << "recorded as run " << id << " in " << runStore->location() << "\n";
    } catch (const store::StoreError& e) {
      std::cerr << "ipu estimate: warning: not recorded: " << e.what() << "\n";
    }
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
        std::string svg = report::drawTimelineSvg(cost::timeline(ph, e), "run " + plan->runs[i].name + ", phase " + ph.name,
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

std::atomic<bool> gCancel{false};

// The first Ctrl-C stops the run cleanly (after the current micro batch,
// keeping what was recorded); a second one ends the process.
void onInterrupt(int) {
  gCancel = true;
  std::signal(SIGINT, SIG_DFL);
}

runner::TrainSettings trainSettings(const Options& o, const std::string& scriptText, const std::string& scriptDir) {
  runner::TrainSettings t;
  t.runsRoot = o.runsDir;
  t.resume = o.resume;
  t.resumeFrom = o.resumeFrom;
  t.threads = o.threads;
  t.stepLimit = o.steps;
  t.checkpointEvery = o.checkpointEvery;
  t.cancel = &gCancel;
  t.scriptText = scriptText;
  t.scriptDirectory = scriptDir;
  t.color = o.color;
  return t;
}

// How a training run ended, for a person (stdout).
void printTrainResult(const runner::TrainResult& r, const std::string& training, base::ColorMode color) {
  base::Painter p(base::shouldColor(color, 1));
  using base::Style;
  switch (r.status) {
    case runner::TrainResult::Status::Completed: std::cout << p.paint(Style::Good, "completed"); break;
    case runner::TrainResult::Status::Stopped: std::cout << p.paint(Style::Warning, "stopped by a hook"); break;
    case runner::TrainResult::Status::Cancelled: std::cout << p.paint(Style::Warning, "stopped by Ctrl-C"); break;
    case runner::TrainResult::Status::Failed: std::cout << p.paint(Style::Error, "failed"); break;
  }
  std::cout << ": training " << training;
  if (!r.runDirectory.empty()) std::cout << ", recorded in " << r.runDirectory;
  else if (r.status == runner::TrainResult::Status::Failed) std::cout << " (nothing was recorded)";
  std::cout << "\n";
  if (r.status == runner::TrainResult::Status::Stopped && !r.stopReason.empty())
    std::cout << "  reason: " << r.stopReason << "\n";
  if (r.status == runner::TrainResult::Status::Cancelled)
    std::cout << p.paint(Style::Dim, "continue it with --resume=" + r.runDirectory) << "\n";
}

void reportStoreRecord(const runner::TrainResult& r, const store::RunStore* runStore) {
  if (runStore == nullptr) return;
  if (r.storeRunId != 0) std::cerr << "recorded as run " << r.storeRunId << " in " << runStore->location() << "\n";
  if (!r.storeFailure.empty()) std::cerr << "ipu run: warning: the run store missed part of this run: " << r.storeFailure << "\n";
}

int cmdRun(const Options& o) {
  if (o.files.size() != 1) return usage("`run` takes one script");
  const bool exporting = o.exportRequest.steps > 0;
  if (exporting && o.resume) return usage("`--export-steps` exports the first steps of a new run; it cannot be combined with --resume");
  if (exporting) {
    const std::string problem = runner::exportDirectoryProblem(o.exportRequest.directory);
    if (!problem.empty()) return usage(problem);
  }
  session::Session s;
  showHookOutput(s);
  auto file = s.readFile(o.files[0]);
  const ir::ExecutionPlan* plan = file ? s.plan(*file, /*requireRuns=*/true) : nullptr;
  if (plan == nullptr || s.diagnostics().hasErrors()) {
    printDiagnostics(s, false, o.color);
    return kUserError;
  }
  printDiagnostics(s, false, o.color);  // warnings
  s.diagnostics().clear();
  // Opened once the script is known to plan: a mistake in it creates no store.
  std::string storeError;
  auto runStore = openRecordingStore(o, storeError);
  if (!storeError.empty()) {
    std::cerr << "ipu run: error: " << storeError << "\n  help: --no-store runs without recording in the store\n";
    return kUserError;
  }
  if (exporting) {
    const std::string problem = runner::exportPlanProblem(*plan, o.exportRequest.steps, o.steps);
    if (!problem.empty()) return usage(problem);
  }
  std::signal(SIGINT, onInterrupt);
  const std::string dir = std::filesystem::absolute(o.files[0]).parent_path().string();
  if (exporting) {
    const runner::ExportResult exported =
        runner::exportSteps(s, plan->runs.front(), trainSettings(o, s.rootText(), dir), o.exportRequest, std::cerr);
    if (s.diagnostics().hasErrors()) printDiagnostics(s, false, o.color);
    s.diagnostics().clear();
    if (exported.status == runner::ExportResult::Status::Failed) return kUserError;
    if (exported.status == runner::ExportResult::Status::Cancelled) return 130;
  }
  int status = kOk;
  for (const auto& run : plan->runs) {
    runner::TrainSettings settings = trainSettings(o, s.rootText(), dir);
    settings.store = runStore.get();
    runner::TrainResult r = runner::train(s, run, settings, std::cerr, ::isatty(2) != 0);
    if (s.diagnostics().hasErrors()) printDiagnostics(s, false, o.color);
    reportStoreRecord(r, runStore.get());
    s.diagnostics().clear();
    printTrainResult(r, run.name, o.color);
    if (r.status == runner::TrainResult::Status::Failed) return kUserError;
    if (r.status == runner::TrainResult::Status::Cancelled) return 130;
    if (r.status == runner::TrainResult::Status::Stopped) status = kOk;
  }
  return status;
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
    if (formatted.size() > base::kMaxSourceBytes) {  // it could not be read back (IPU0010)
      std::cerr << "ipu fmt: formatted, `" << path << "` would be " << formatted.size()
                << " bytes, over the 8 MiB a script may have; it is left untouched (split it into modules and "
                   "`import` them)\n";
      status = kUserError;
      continue;
    }
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
  if (args.empty()) {
    std::cerr << kUsageText;
    return kUsage;
  }
  // `runs`, `report`, `search` and `sweep` parse their own arguments (interpreter/cli/runs_command.h,
  // report_command.h, search_command.h, sweep_command.h).
  static const std::vector<std::string> kTakesValue{"--timeline-svg", "-o", "--output", "--runs-dir", "--threads", "--steps",
                                                   "--checkpoint-every", "--format", "--color", "--store"};
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (std::find(kTakesValue.begin(), kTakesValue.end(), args[i]) != kTakesValue.end()) {
      ++i;
      continue;
    }
    if (args[i] == "--export-steps" || args[i].rfind("--export-steps=", 0) == 0) {  // N DIR, or =N DIR
      i += args[i] == "--export-steps" ? 2 : 1;
      continue;
    }
    if (args[i].empty() || args[i][0] == '-') continue;
    std::vector<std::string> rest(args.begin(), args.end());
    rest.erase(rest.begin() + static_cast<long>(i));
    if (args[i] == "runs") return cli::runsCommand(rest);
    if (args[i] == "report") return cli::reportCommand(rest);
    if (args[i] == "search") return cli::searchCommand(rest);
    if (args[i] == "sweep") return cli::sweepCommand(rest);
    if (args[i] == "agent") return cli::agentCommand(rest);
    break;
  }
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
    else if (a == "--resume") o.resume = true;
    else if (a.rfind("--resume=", 0) == 0) {
      o.resume = true;
      o.resumeFrom = a.substr(9);
      if (o.resumeFrom.empty()) return usage("`--resume=` needs a run directory");
    }
    else if (a == "--runs-dir" || a.rfind("--runs-dir=", 0) == 0) {
      o.runsDir = value("--runs-dir");
      if (o.runsDir.empty()) return usage("`--runs-dir` needs a directory");
    }
    else if (a == "--threads" || a.rfind("--threads=", 0) == 0 || a == "--steps" || a.rfind("--steps=", 0) == 0 ||
             a == "--checkpoint-every" || a.rfind("--checkpoint-every=", 0) == 0) {
      const std::string name = a.substr(0, a.find('='));
      std::string v = value(name.c_str());
      char* end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < (name == "--threads" ? 0 : 1) || n > 1000000000)
        return usage("`" + name + "` needs a whole number" + (name == "--threads" ? "" : " of at least 1"));
      if (name == "--threads") o.threads = static_cast<int>(std::min<long long>(n, 1024));
      else if (name == "--steps") o.steps = n;
      else o.checkpointEvery = n;
    }
    else if (a == "--export-steps" || a.rfind("--export-steps=", 0) == 0) {
      const std::string v = value("--export-steps");
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 1000000)
        return usage("`--export-steps` needs a whole number of steps from 1 to 1000000, then a directory (`--export-steps N DIR`)");
      // An option in DIR's place is a forgotten DIR (a directory named `-x` is `./-x`).
      if (i + 1 >= args.size() || args[i + 1].empty() || args[i + 1][0] == '-')
        return usage("`--export-steps " + v + "` needs a directory to write to (`--export-steps N DIR`)");
      o.exportRequest.steps = n;
      o.exportRequest.directory = args[++i];
    }
    else if (a == "--store" || a.rfind("--store=", 0) == 0) {
      o.store = value("--store");
      if (o.store.empty()) return usage("`--store` needs a path or a postgresql:// URI");
    }
    else if (a == "--no-store") o.noStore = true;
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
  if (o.exportRequest.steps > 0 && o.command != "run") return usage("`--export-steps` is an option of `run`");
  if (o.command == "check") return cmdCheck(o);
  if (o.command == "plan") return cmdPlan(o);
  if (o.command == "fmt") return cmdFmt(o);
  if (o.command == "estimate") return cmdEstimate(o);
  if (o.command == "calibrate") {
    if (o.files.size() != 1) return usage("`calibrate` takes one table of measurements");
    return cli::calibrateCommand(o.files[0], o.output, o.color);
  }
  if (o.command == "repl") {
    if (o.files.size() > 1) return usage("`repl` takes at most one script");
    repl::ReplOptions ro;
    if (!o.files.empty()) ro.file = o.files[0];
    ro.color = o.color;
    ro.trainer = [&o](repl::Workspace::Planned& planned, const std::atomic<bool>& cancel) {
      std::string storeError;
      auto runStore = openRecordingStore(o, storeError);
      if (!storeError.empty()) std::cerr << "warning: not recorded in the run store: " << storeError << "\n";
      bool ok = true;
      for (const auto& run : planned.plan->runs) {
        runner::TrainSettings t = trainSettings(o, planned.session->rootText(), std::filesystem::current_path().string());
        t.cancel = &cancel;
        t.store = runStore.get();
        runner::TrainResult r = runner::train(*planned.session, run, t, std::cerr, ::isatty(2) != 0);
        reportStoreRecord(r, runStore.get());
        std::cerr << repl::Workspace::diagnostics(planned, base::Painter(base::shouldColor(o.color, 2)));
        planned.session->diagnostics().clear();
        printTrainResult(r, run.name, o.color);
        ok = ok && r.status != runner::TrainResult::Status::Failed;
        if (r.status == runner::TrainResult::Status::Cancelled) break;
      }
      return ok;
    };
    return repl::runRepl(ro);
  }
  if (o.command == "run") return cmdRun(o);
  std::string hint = base::didYouMean(o.command, {"check", "plan", "fmt", "estimate", "search", "calibrate", "run", "repl", "runs", "report", "sweep", "agent"});
  return usage("unknown command `" + o.command + "`" + (hint.empty() ? "" : "; " + hint));
}
