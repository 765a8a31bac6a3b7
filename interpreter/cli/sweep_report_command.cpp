#include "interpreter/cli/sweep_report_command.h"

#include <iostream>

#include "interpreter/base/diagnostic.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/cli/runs_command.h"
#include "interpreter/report/sweep_html.h"
#include "interpreter/store/run_store.h"
#include "interpreter/store/sweep_store.h"

namespace ipu::cli {

namespace {

constexpr int kOk = 0, kUserError = 1, kUsage = 2;

const char* kSweepReportUsage = R"(usage: ipu report --sweep SWEEP -o report.html
       ipu report --sweep SWEEP --json [-o report.json]

The report of one sweep of the run store (docs/sweeps.md, "Report"): the
optimisation history (each trial's metric in the order trials ended, the best
so far, stopped and failed trials, the target), parallel coordinates of the
parameters and the metric, each parameter's importance (rank correlation and
a Gaussian-process main effect), and the trials, best first. One HTML file
that needs nothing else (no network), or the same content as JSON.

  --sweep SWEEP       the sweep, by name (`ipu sweep list` lists them)
  -o, --output FILE   where to write the report (required for HTML; with
                      --json, the JSON goes there instead of stdout)
  --json              the report as JSON
  --store PATH|URI    the run store (default: $IPU_STORE, else runs/ipu.db)
  --runs-dir DIR      the store is DIR/ipu.db
  --title TEXT        the page's heading (default: sweep SWEEP)
)";

int usage(const std::string& message) {
  std::cerr << "ipu report: " << message << "\n(`ipu report --sweep S --help` lists what it takes)\n";
  return kUsage;
}

// The highest step a run recorded, over its metrics.
std::optional<long long> stepsOf(const store::RunRecord& run) {
  std::optional<long long> steps;
  for (const auto& [key, s] : run.metrics)
    if (s.count > 0) steps = std::max(steps.value_or(0), s.lastStep);
  return steps;
}

}  // namespace

bool wantsSweepReport(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--sweep" || a.rfind("--sweep=", 0) == 0) return true;
  return false;
}

int sweepReportCommand(const std::vector<std::string>& args) {
  std::string sweepName, output, storeFlag, runsDir = "runs", title;
  bool json = false;
  ArgumentReader in(args);
  while (in.next()) {
    const std::string a = in.word();   // the option as written, for the messages
    // A value left out (the option last, or `--name=`) is a mistake; an
    // explicit empty word (`--title ""`) is taken as given. After value(),
    // the reader is still on the option only when the value was left out.
    auto absent = [&](const std::string& v) { return v.empty() && in.isOption(); };
    if (in.flag("-h") || in.flag("--help")) {
      std::cout << kSweepReportUsage;
      return kOk;
    }
    if (in.flag("--json")) {
      json = true;
    } else if (in.value("--sweep", sweepName)) {
      if (absent(sweepName)) return usage("`--sweep` needs a sweep's name");
    } else if (in.value("-o", output) || in.value("--output", output)) {
      if (absent(output)) return usage("`" + a + "` needs a file name");
    } else if (in.value("--store", storeFlag)) {
      if (absent(storeFlag)) return usage("`--store` needs a path or a postgresql:// URI");
    } else if (in.value("--runs-dir", runsDir)) {
      if (absent(runsDir)) return usage("`--runs-dir` needs a directory");
    } else if (in.value("--title", title)) {
      if (absent(title)) return usage("`--title` needs a text");
    } else if (in.flag("--where") || a.rfind("--where=", 0) == 0 || in.flag("--limit") || a.rfind("--limit=", 0) == 0) {
      return usage("`" + a.substr(0, a.find('=')) + "` selects runs; a sweep's report shows every trial of the sweep");
    } else if (in.isOption()) {
      return usage("unknown option `" + a + "`");
    } else {
      return usage("`" + a + "`: a sweep's report takes no run ids (`ipu report ID...` reports runs)");
    }
  }
  if (sweepName.empty()) return usage("`--sweep` needs a sweep's name");
  if (!json && output.empty()) return usage("say where to write the report: -o report.html (or --json)");

  const std::string location = storeLocation(storeFlag, runsDir);
  try {
    auto sweeps = store::openSweepStore(location, store::OpenMode::Existing);
    std::optional<store::SweepRecord> sweep = sweeps->sweep(sweepName);
    if (!sweep) {
      std::vector<std::string> names;
      for (const auto& s : sweeps->listSweeps()) names.push_back(s.name);
      const std::string hint = base::didYouMean(sweepName, names);
      std::cerr << "ipu report: error: there is no sweep `" << sweepName << "` in `" << sweeps->location() << "`"
                << (hint.empty() ? "" : "; " + hint)
                << (names.empty() ? " (the store has no sweep)" : " (`ipu sweep list` lists them)") << "\n";
      return kUserError;
    }
    const std::vector<store::TrialRecord> trials = sweeps->trials(sweep->id);
    // The steps of each trial's run, from the runs' metric summaries.
    auto runs = store::openStore(location, store::OpenMode::Existing);
    std::map<long long, long long> runSteps;
    for (const auto& t : trials)
      if (t.runId && runSteps.count(*t.runId) == 0)
        if (auto run = runs->run(*t.runId))
          if (auto steps = stepsOf(*run)) runSteps[*t.runId] = *steps;
    const report::SweepReport r = report::buildSweepReport(*sweep, trials, runSteps, sweeps->location());

    std::string text = json ? report::sweepReportJson(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"
                            : report::sweepReportHtml(r, title.empty() ? "sweep " + sweep->name : title);
    if (json && output.empty()) {
      std::cout << text;
      return kOk;
    }
    std::string error;
    if (!replaceFile(output, text, error)) {
      std::cerr << "ipu report: " << error << "\n";
      return kUserError;
    }
    const long long ended = static_cast<long long>(r.history.size());
    std::cerr << "wrote " << output << ": sweep " << sweep->name << ", " << trials.size() << " trial"
              << (trials.size() == 1 ? "" : "s") << ", " << ended << " ended"
              << (r.best ? ", best trial " + std::to_string(*r.best) : std::string(", no trial finished yet")) << "\n";
    return kOk;
  } catch (const store::StoreError& e) {
    std::cerr << "ipu report: error: " << e.what() << "\n";
    return kUserError;
  }
}

}  // namespace ipu::cli
