// `ipu report [IDS | --where FILTER] -o report.html`: one self-contained HTML
// file of recorded runs, with their curves (grouped, smoothed), parameters,
// and for many runs parallel coordinates and a scatter (interpreter/report/runs_html.h;
// docs/tracking.md). Its own file with one entry point, so the command
// line's dispatch needs only a line for it.
// `args` are the arguments after `report`. Returns the process exit code.

#include <iostream>

#include "interpreter/cli/arguments.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/cli/runs_command.h"
#include "interpreter/cli/sweep_report_command.h"
#include "interpreter/report/runs_html.h"
#include "interpreter/store/run_store.h"

#include "interpreter/cli/command.h"

namespace ipu::cli {

namespace {


const char* kReportUsage = R"(usage: ipu report [ID...] [--where FILTER] [--limit N] -o report.html
       ipu report --sweep SWEEP [--json] -o report.html

Writes one self-contained HTML file (no network needed: it can be mailed) with
the metric curves of the selected runs overlaid, one legend naming each run by
what differs (or its --name), grouping by a parameter or tag (mean and min-max
band; by default past 20 runs), smoothing, metrics that never changed in a
table, their parameters, tags and notes, and for three runs or more a
parallel-coordinates plot and a scatter of any metric against any parameter.
Runs are chosen by number or name, or with --where
(the filter language of `ipu runs`, docs/tracking.md); neither: the newest
--limit runs (default 20).

  -o, --output FILE   where to write the report (required; - for standard output)
  --store PATH|URI    the run store (default: $IPU_STORE, else runs/ipu.db)
  --runs-dir DIR      the store is DIR/ipu.db
  --title TEXT        the page's heading

`ipu report --sweep SWEEP -o report.html` reports one sweep instead
(`ipu report --sweep S --help`; docs/sweeps.md).
)";

int usage(const std::string& message) {
  std::cerr << "ipu report: " << message << "\n(`ipu report --help` lists what it takes)\n";
  return kUsage;
}

}  // namespace

namespace {

int reportCommand(const std::vector<std::string>& args) {
  if (wantsSweepReport(args)) return sweepReportCommand(args);  // `--sweep SWEEP`: sweep_report_command.h
  std::vector<std::string> ids;
  std::string where, output, storeFlag, runsDir = "runs", title;
  long long limit = 0;
  ArgumentReader in(args);
  while (in.next()) {
    const std::string a = in.word();   // the option as written, for the messages
    // A value left out (the option last, or `--name=`) is a mistake; an
    // explicit empty word (`--title ""`) is taken as given. After value(),
    // the reader is still on the option only when the value was left out.
    auto absent = [&](const std::string& v) { return v.empty() && in.isOption(); };
    std::string v;
    if (in.value("--where", where)) {
      if (absent(where)) return usage("`--where` needs a filter");
    } else if (in.value("-o", output) || in.value("--output", output)) {
      if (absent(output)) return usage("`" + a + "` needs a file name");
    } else if (in.value("--store", storeFlag)) {
      if (absent(storeFlag)) return usage("`--store` needs a path or a postgresql:// URI");
    } else if (in.value("--runs-dir", runsDir)) {
      if (absent(runsDir)) return usage("`--runs-dir` needs a directory");
    } else if (in.value("--title", title)) {
      if (absent(title)) return usage("`--title` needs a text");
    } else if (in.value("--limit", v)) {
      char* end = nullptr;
      limit = std::strtoll(v.c_str(), &end, 10);
      if (absent(v) || *end != '\0' || limit < 1) return usage("`--limit` needs a whole number of at least 1");
    } else if (in.isOption()) {
      return usage("unknown option `" + a + "`");
    } else {
      ids.push_back(a);
    }
  }
  if (output.empty()) return usage("say where to write the report: -o report.html");
  if (!ids.empty() && limit > 0) return usage("--limit applies to --where or the newest runs, not to runs named one by one");

  const std::string location = storeLocation(storeFlag, runsDir);
  try {
    auto st = store::openStore(location, store::OpenMode::Existing);
    std::vector<store::RunRecord> selected;
    if (int code = selectRuns(*st, ids, where, selected, "report")) return code;
    if (ids.empty()) {
      const std::size_t cap = static_cast<std::size_t>(limit > 0 ? limit : 20);
      if (selected.size() > cap) {
        if (limit == 0)
          std::cerr << "ipu report: " << selected.size() << " runs match; the report shows the newest " << cap
                    << " (--limit N for more)\n";
        selected.resize(cap);
      }
    }
    if (selected.empty()) {
      std::cerr << "ipu report: no run to report" << (where.empty() ? " (the store is empty)" : ": none matches --where")
                << "\n";
      return kUserError;
    }
    std::vector<report::ReportRun> runs;
    for (auto& r : selected) {
      report::ReportRun rr;
      for (auto& p : st->metricCurves(r.id, report::kMaxPointsPerCurve)) rr.history[p.key].push_back(std::move(p));
      rr.record = std::move(r);
      runs.push_back(std::move(rr));
    }
    const std::string html =
        report::runsReportHtml(runs, title.empty() ? "ipu runs report" : title, st->location());
    // `-o -`: the page on standard output (into a pipe or another tool).
    std::string error;
    if (output == "-") {
      std::cout << html << std::flush;
      if (!std::cout) {
        std::cerr << "ipu report: the report could not be written to standard output\n";
        return kUserError;
      }
    } else if (!replaceFile(output, html, error)) {
      std::cerr << "ipu report: " << error << "\n";
      return kUserError;
    }
    std::cerr << "wrote " << (output == "-" ? "the report to standard output" : output) << ": " << runs.size() << " run" << (runs.size() == 1 ? "" : "s") << ", "
              << report::curveCount(runs) << " curves\n";
    return kOk;
  } catch (const store::StoreError& e) {
    std::cerr << "ipu report: error: " << e.what() << "\n";
    return kUserError;
  }
}

}  // namespace

const Command kReportCommand{"report", "report [IDS]",
    "one self-contained HTML file with plots of recorded runs, or of\n"
    "one sweep (--sweep SWEEP: history, parallel coordinates, importance)",
    kReportUsage, reportCommand};

}  // namespace ipu::cli
