// `ipu estimate FILE`: predict each phase's step time, throughput and time to
// train (docs/cost-model.md), and record the prediction in the run store.
#include <algorithm>
#include <iostream>
#include <sstream>

#include "interpreter/base/render.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/cli/session_output.h"
#include "interpreter/cli/training_options.h"
#include "interpreter/report/estimate_report.h"
#include "interpreter/report/timeline_render.h"
#include "interpreter/runner/estimate_record.h"
#include "runtime/cost/timeline.h"

namespace ipu::cli {

namespace {

const char* kHelp = R"(usage: ipu estimate FILE [options]

Predict the step time, throughput and time to train of every phase of the
script's runs with the cost model (docs/cost-model.md), and record the
prediction in the run store, where `ipu runs compare` sets it beside runs of
the same plan (docs/tracking.md).

options:
  --json                 the estimate as JSON on stdout (format ipu-estimate/1)
  --timeline             draw each phase's step, IPU by IPU
  --timeline-svg FILE    write the timelines as an SVG picture
  --store PATH|URI       the run store (default: $IPU_STORE, else runs/ipu.db)
  --runs-dir DIR         the default store is DIR/ipu.db
  --no-store             record nothing
  --set PATH=VALUE       estimate with VALUE in place of what the script writes
                         at PATH (repeatable; as `ipu run --set`, docs/run.md)
  --instances N          price the replicas as N host instances, one per host
                         (PopRun), whose gradient reduction crosses the hosts'
                         network (docs/cost-model.md, "Instances")
  --color auto|always|never
                         colour (default auto: only on a terminal; NO_COLOR disables)
)";

struct Options {
  std::vector<std::string> files;
  bool json = false;
  bool timeline = false;
  std::string timelineSvg;
  StoreOptions store;
  ValuesSet set;  // --set PATH=VALUE
  int instances = 1;
  base::ColorMode color = base::ColorMode::Auto;
};

// Every phase's timeline, stacked in one SVG picture.
std::string timelinesSvg(const ir::ExecutionPlan& plan, const cost::Estimate& est) {
  std::string body;
  double y = 0, width = 0;
  for (std::size_t i = 0; i < plan.runs.size() && i < est.runs.size(); ++i)
    for (std::size_t k = 0; k < plan.runs[i].phases.size() && k < est.runs[i].phases.size(); ++k) {
      const auto& e = est.runs[i].phases[k];
      if (!e.ok) continue;
      const auto& ph = plan.runs[i].phases[k];
      std::string svg = report::drawTimelineSvg(cost::timeline(ph, e), "run " + plan.runs[i].name + ", phase " + ph.name,
                                                ph.mapping.shard);
      double h = std::stod(svg.substr(svg.find("height=\"") + 8));
      width = std::max(width, std::stod(svg.substr(svg.find("width=\"") + 7)));
      body += "<svg y=\"" + std::to_string(static_cast<long>(y)) + "\"" + svg.substr(4);
      y += h;
    }
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << static_cast<long>(width) << "\" height=\""
      << static_cast<long>(y) << "\">\n"
      << body << "</svg>\n";
  return svg.str();
}

int estimate(const Options& o) {
  session::Session s;
  showHookOutput(s);
  s.setHosting(cost::Hosting{o.instances});
  auto file = s.readFile(o.files[0]);
  const bool setParsed = !file || setValues(s, o.set);
  const cost::Estimate* est = file && setParsed ? s.estimate(*file) : nullptr;
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
  if (est != nullptr && plan != nullptr && !s.diagnostics().hasErrors() && !o.store.noStore) {
    std::string storeError;
    auto runStore = openRecordingStore(o.store, storeError);
    if (!runStore) {
      std::cerr << "ipu estimate: error: not recorded: " << storeError << "\n  help: --no-store estimates without recording\n";
      return kUserError;
    }
    try {
      std::map<std::string, std::string> given;
      for (const auto& [at, value] : o.set) given["set." + at] = value;
      if (o.instances > 1) given["instances"] = std::to_string(o.instances);
      auto ids = runner::recordEstimate(*runStore, *plan, *est, s.rootText(), given);
      // Part of the answer (what to compare against later), so on standard
      // output; beside a JSON document, on standard error.
      std::ostream& out = o.json ? std::cerr : std::cout;
      for (long long id : ids) out << "recorded as run " << id << " in " << runStore->location() << "\n";
    } catch (const store::StoreError& e) {
      std::cerr << "ipu estimate: warning: not recorded: " << e.what() << "\n";
    }
  }
  if (!o.timelineSvg.empty() && est != nullptr && plan != nullptr) {
    std::string error;
    if (!replaceFile(o.timelineSvg, timelinesSvg(*plan, *est), error)) {
      std::cerr << "ipu estimate: " << error << "\n";
      return kUserError;
    }
  }
  return s.diagnostics().hasErrors() ? kUserError : kOk;
}

int run(const std::vector<std::string>& args) {
  Options o;
  ArgumentReader in(args);
  std::string v, error;
  while (in.next()) {
    if (in.flag("--json")) o.json = true;
    else if (in.flag("--timeline")) o.timeline = true;
    else if (in.value("--timeline-svg", v)) {
      if (v.empty()) return usage("estimate", "`--timeline-svg` needs a file name");
      o.timelineSvg = v;
    } else if (readStoreOption(in, o.store, error)) {
      if (!error.empty()) return usage("estimate", error);
    } else if (readSetOption(in, o.set, error)) {
      if (!error.empty()) return usage("estimate", error);
    } else if (readInstancesOption(in, o.instances, error)) {
      if (!error.empty()) return usage("estimate", error);
    } else if (in.value("--color", v)) {
      if (!parseColor(v, o.color)) return usage("estimate", "--color takes `auto`, `always` or `never`");
    } else if (in.isOption()) {
      return usage("estimate", "unknown option `" + in.word() + "`");
    } else {
      o.files.push_back(in.word());
    }
  }
  if (o.files.size() != 1) return usage("estimate", "`estimate` takes one script");
  return estimate(o);
}

}  // namespace

const Command kEstimateCommand{"estimate", "estimate FILE",
                               "predict step time, throughput and time to train of every phase", kHelp, run};

}  // namespace ipu::cli
