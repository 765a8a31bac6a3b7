// `ipu calibrate TABLE.csv`: plan every configuration in a table of measured
// throughput, fit the cost model's parameters (runtime/cost/calibrate.h),
// print the residuals, and write the parameters as an `.ipu` module of
// `let` records that a chip's `calibration:` field takes.
//
// The table is CSV with a header: label,script,run,phase,samples_per_s. Paths
// are relative to the table; empty run/phase mean the script's first.
// With --store, the measured runs of a run store (runner/measured_run.h:
// trainings logged through the Python module) are rows too, after the
// table's: each planned again from the script text and mapping it recorded,
// its throughput the mean of its `samples_per_s` points (what `ipu runs
// compare` calls measured).
// Returns the process exit code.

#include <algorithm>
#include <iomanip>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <variant>
#include <vector>

#include "interpreter/base/render.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/calibration_table.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/runner/measured_run.h"
#include "interpreter/runner/run_parameters.h"
#include "interpreter/session/session.h"
#include "interpreter/store/filter.h"
#include "interpreter/store/run_store.h"
#include "interpreter/syntax/parser.h"
#include "interpreter/syntax/printer.h"
#include "runtime/cost/calibrate.h"

namespace ipu::cli {

namespace fs = std::filesystem;

namespace {

std::string letName(const std::string& chip) {
  std::string s;
  for (char c : chip) s += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '_';
  return s + "_calibration";
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

const char* kHelp = R"(usage: ipu calibrate [TABLE.csv] [--store PATH|URI [--where EXPR]] [-o FILE] [--color WHEN]

Fit the cost model to measured throughput: plan every configuration of a CSV
table of measurements (label,script,run,phase,samples_per_s; paths relative
to the table, empty run or phase for the script's first), fit the model's
parameters, print the residuals, and print the parameters as an `.ipu` module
of `let` records that a chip's `calibration:` field takes (docs/cost-model.md).

With --store, the measured runs of a run store are rows too (after the
table's, or alone): trainings logged with the Python module's ipu.start_run
(docs/python.md), finished, each planned again from the script text and
mapping it recorded (a relative script path from the current directory),
its throughput the mean of its `samples_per_s` points, its label the
`label` given to start_run (else the run's name).

options:
  --store PATH|URI       also fit the finished measured runs of this store
  --where EXPR           only those this filter keeps (the language of `ipu runs --where`)
  --name NAME            what the module says it was fitted on (default: the table's file
                         name, and "measured runs of" the store's)
  -o, --output FILE      write the parameters to FILE instead
  --color auto|always|never
                         colour (default auto: only on a terminal; NO_COLOR disables)
)";

struct Rows {
  std::vector<cost::Measurement> rows;
  std::vector<std::unique_ptr<session::Session>> sessions;  // what the rows' plans refer to
};

// The table's rows, planned. False (problems printed) when any row fails.
bool tableRows(const std::string& table, Rows& out, const base::Painter& painter) {
  // The table is read and its figures checked first (calibration_table.h):
  // every problem is reported at its line, and nothing is fitted to a table
  // with one.
  CalibrationTable parsed = readCalibrationTable(table);
  auto problem = [&](int line, const std::string& message) {
    std::cerr << table;
    if (line > 0) std::cerr << ":" << line;
    std::cerr << ": error: " << message << "\n";
  };
  for (const auto& p : parsed.problems) problem(p.line, p.message);
  if (!parsed.problems.empty()) return false;
  const fs::path base = fs::path(table).parent_path();
  bool failed = false;
  for (const TableRow& row : parsed.rows) {
    auto s = std::make_unique<session::Session>();
    fs::path script = fs::path(row.script).is_absolute() ? fs::path(row.script) : base / row.script;
    auto file = s->readFile(script.string());
    const ir::ExecutionPlan* plan = file ? s->plan(*file, true) : nullptr;
    if (plan == nullptr || s->diagnostics().hasErrors()) {
      for (const auto& d : s->diagnostics().all()) base::renderHuman(std::cerr, d, s->sources(), painter);
      problem(row.line, "`" + row.script + "` does not plan");
      failed = true;
      continue;
    }
    const ir::PhasePlan* found = nullptr;
    for (const auto& r : plan->runs)
      if (row.run.empty() || r.name == row.run)
        for (const auto& ph : r.phases)
          if ((row.phase.empty() || ph.name == row.phase) && found == nullptr) found = &ph;
    if (found == nullptr) {
      problem(row.line, "no run `" + row.run + "` phase `" + row.phase + "` in `" + row.script + "`");
      failed = true;
      continue;
    }
    if (std::string why = implausibleMeasurement(row.samplesPerSecond, *found); !why.empty()) {
      problem(row.line, why);
      failed = true;
      continue;
    }
    out.rows.push_back(cost::Measurement{row.label, *found, row.samplesPerSecond});
    out.sessions.push_back(std::move(s));
  }
  return !failed;
}

// The mean of a run's finite `samples_per_s` points, as `ipu runs compare`
// reports a run's measured throughput; NaN without one.
double measuredThroughput(store::RunStore& st, long long run) {
  double sum = 0;
  long long n = 0;
  for (const auto& pt : st.metricHistory(run, "samples_per_s"))
    if (std::isfinite(pt.value)) sum += pt.value, ++n;
  return n > 0 ? sum / static_cast<double>(n) : std::nan("");
}

// The store's finished measured runs that `where` keeps, oldest first,
// planned again. Returns an exit code: 0 with the rows added.
int storeRows(const std::string& location, const std::string& where, Rows& out, const base::Painter& painter) {
  auto problem = [&](long long run, const std::string& message) {
    std::cerr << location;
    if (run > 0) std::cerr << ": run " << run;
    std::cerr << ": error: " << message << "\n";
  };
  std::unique_ptr<store::RunStore> st;
  std::vector<store::RunRecord> all;
  try {
    st = store::openStore(location, store::OpenMode::Existing);
    all = st->listRuns();
  } catch (const store::StoreError& e) {
    std::cerr << "ipu calibrate: error: " << e.what() << "\n";
    return kUserError;
  }
  std::vector<const store::RunRecord*> measured;
  for (const auto& r : all) {
    auto source = r.parameters.find(runner::kSourceParameter);
    if (r.kind == store::RunKind::Run && source != r.parameters.end() && source->second == runner::kMeasuredSource)
      measured.push_back(&r);
  }
  if (!where.empty()) {
    store::FieldResolver names(all);
    auto parsed = store::Filter::parse(where, names);
    if (auto* e = std::get_if<store::FilterError>(&parsed)) {
      std::cerr << "ipu calibrate: error: --where: " << e->message << "\n" << store::renderFilterError(where, *e, "  ");
      if (!e->help.empty()) std::cerr << "  help: " << e->help << "\n";
      return kUsage;
    }
    const auto& filter = std::get<store::Filter>(parsed);
    measured.erase(std::remove_if(measured.begin(), measured.end(), [&](const store::RunRecord* r) { return !filter.matches(*r); }),
                   measured.end());
  }
  // A run still going, or one that failed, measured no steady throughput.
  std::size_t unfinished = 0;
  measured.erase(std::remove_if(measured.begin(), measured.end(),
                                [&](const store::RunRecord* r) {
                                  bool skip = r->status != store::RunStatus::Finished;
                                  unfinished += skip ? 1 : 0;
                                  return skip;
                                }),
                 measured.end());
  if (unfinished > 0)
    std::cerr << "ipu calibrate: " << unfinished << " measured run" << (unfinished == 1 ? "" : "s")
              << " not finished left out\n";
  if (measured.empty()) {
    problem(0, std::string("no finished measured run") + (where.empty() ? "" : " matches `" + where + "`") +
                   " (runs logged with the Python module's ipu.start_run, docs/python.md)");
    return kUserError;
  }
  std::sort(measured.begin(), measured.end(), [](const store::RunRecord* a, const store::RunRecord* b) { return a->id < b->id; });
  bool failed = false;
  for (const store::RunRecord* brief : measured) {
    std::optional<store::RunRecord> r;
    double samplesPerSecond = std::nan("");
    try {
      r = st->run(brief->id);
      if (r) samplesPerSecond = measuredThroughput(*st, r->id);
    } catch (const store::StoreError& e) {
      std::cerr << "ipu calibrate: error: " << e.what() << "\n";
      return kUserError;
    }
    if (!r) continue;  // deleted meanwhile
    auto param = [&](const char* key) {
      auto it = r->parameters.find(key);
      return it == r->parameters.end() ? std::string() : it->second;
    };
    const std::string path = param(runner::kMeasuredScriptParameter);
    // Planned from the text the run recorded, at the path it was read from
    // (so its imports resolve as they did), with the mapping it recorded.
    auto s = std::make_unique<session::Session>();
    base::FileId file = s->addSource(path, r->script);
    runner::MeasuredPlan mp = runner::planMeasured(*s, file, r->training, param(runner::kMeasuredPhaseParameter), nullptr);
    if (mp.ok && !param(runner::kMeasuredMappingParameter).empty()) {
      plan::MappingValue v = s->variantOf(mp.run, mp.phase);
      std::string why;
      if (!runner::applyMappingText(v, param(runner::kMeasuredMappingParameter), why)) {
        problem(r->id, why);
        failed = true;
        continue;
      }
      session::PlannedVariant pv = s->planVariant(v, mp.run, mp.phase);
      mp.ok = pv.ok;
      mp.diagnostics = pv.diagnostics;
      if (pv.ok) mp.plan.runs[0].phases[mp.phase] = pv.plan;
    }
    if (!mp.ok) {
      for (const auto& d : mp.diagnostics.all()) base::renderHuman(std::cerr, d, s->sources(), painter);
      problem(r->id, "`" + path + "` does not plan" + (mp.problem.empty() ? std::string() : ": " + mp.problem));
      failed = true;
      continue;
    }
    if (runner::planHash(mp.plan.runs[0]) != r->planHash) {
      problem(r->id, "planned again, `" + path + "` gives another plan than the run recorded (" + r->planHash +
                         "): a module it imports changed, or the path is relative to another directory");
      failed = true;
      continue;
    }
    const ir::PhasePlan& phase = mp.plan.runs[0].phases[mp.phase];
    if (!std::isfinite(samplesPerSecond)) {
      problem(r->id, "no `samples_per_s` logged: run.log(step, samples_per_s=...) records the throughput");
      failed = true;
      continue;
    }
    if (std::string why = implausibleMeasurement(samplesPerSecond, phase); !why.empty()) {
      problem(r->id, why);
      failed = true;
      continue;
    }
    std::string label = param(runner::kMeasuredLabelParameter);
    out.rows.push_back(cost::Measurement{label.empty() ? r->name : label, phase, samplesPerSecond});
    out.sessions.push_back(std::move(s));
  }
  return failed ? kUserError : kOk;
}

// Fits the rows, prints the residuals and the three errors, writes the module.
// `origin` begins its error messages: the table's path, else the store's.
int fitAndWrite(const std::vector<cost::Measurement>& rows, const std::string& fittedOn, const std::string& origin,
                const std::string& output) {
  auto problem = [&](const std::string& message) { std::cerr << origin << ": error: " << message << "\n"; };
  std::string line;
  if (rows.size() < parametersToFit(rows)) {
    problem(std::to_string(rows.size()) + " measurement" + (rows.size() == 1 ? "" : "s") + " cannot determine " +
                   std::to_string(parametersToFit(rows)) +
                   " parameters (2 shared, 2 per chip architecture): add rows, ideally of different models and pod sizes");
    return 1;
  }
  std::cerr << "fitting " << rows.size() << " measurements...\n";
  const std::string source = "fitted by `ipu calibrate` on " + fittedOn;
  cost::FitResult fit = cost::fitCalibration(rows, source);
  if (std::string why = degenerateFit(fit); !why.empty()) {
    problem("the fit is degenerate (" + why + "); nothing was written");
    return 1;
  }

  std::ostringstream report;
  report << "row                                      chip        measured   predicted   error   left out   error   group out   error\n";
  for (const auto& r : fit.residuals) {
    char buf[240];
    std::snprintf(buf, sizeof buf, "%-40s %-8s %11s %11s %+6.1f%% %10s %+6.1f%% %11s %+6.1f%%\n", r.label.c_str(), r.chip.c_str(),
                  throughputText(r.measured).c_str(), throughputText(r.predicted).c_str(), 100 * r.error(),
                  throughputText(r.looPredicted).c_str(), 100 * r.looError(), throughputText(r.logoPredicted).c_str(),
                  100 * r.logoError());
    report << buf;
  }
  auto summary = [&](const char* what, const cost::ErrorSummary& s) {
    report << what << ": mean absolute error " << fixed(100 * s.mean, 1) << "%, median " << fixed(100 * s.median, 1)
           << "%, worst " << fixed(100 * s.worst, 1) << "%\n";
  };
  // Each configuration group's errors when it was left out: where the model
  // extrapolates well and where it does not.
  std::vector<std::string> groups;
  for (const auto& r : fit.residuals)
    if (r.logoPredicted > 0 && std::find(groups.begin(), groups.end(), r.group) == groups.end()) groups.push_back(r.group);
  int width = 14;
  for (const auto& g : groups) width = std::max(width, static_cast<int>(g.size()));
  if (!groups.empty()) report << std::left << std::setw(width) << "group left out" << std::right << "  rows   mean   worst\n";
  for (const auto& g : groups) {
    std::size_t n = 0;
    double mean = 0, worst = 0;
    for (const auto& r : fit.residuals)
      if (r.group == g && r.logoPredicted > 0) {
        ++n;
        mean += std::fabs(r.logoError());
        if (std::fabs(r.logoError()) > std::fabs(worst)) worst = r.logoError();
      }
    char buf[240];
    std::snprintf(buf, sizeof buf, "  %4zu %5.1f%% %+6.1f%%\n", n, 100 * mean / static_cast<double>(n), 100 * worst);
    report << std::left << std::setw(width) << g << std::right << buf;
  }
  summary("in sample (fitted on every row)", fit.inSample);
  summary("leave-one-out (each row predicted by the fit on the others)", fit.leaveOneOut);
  summary(("leave-one-group-out (each of " + std::to_string(fit.groups) +
           " configuration groups predicted by the fit on the other groups)").c_str(),
          fit.leaveOneGroupOut);
  for (const auto& n : fit.notes) report << "note: " << n << "\n";
  std::cerr << report.str();

  std::ostringstream module;
  module << "// Generated by `ipu calibrate " << fittedOn
         << "`: the cost model's parameters, fitted on measured throughput\n"
         << "// (docs/cost-model.md explains them). Do not edit by hand: re-run the command.\n//\n";
  std::istringstream lines(report.str());
  while (std::getline(lines, line)) module << "// " << line << "\n";
  for (const auto& [chip, cal] : fit.chips) {
    module << "\nlet " << letName(chip) << " = {\n"
           << "  source: \"" << chip << ", " << source << "\"\n"
           << "  matmul_efficiency: " << fixed(cal.matmulEfficiency, 4) << "\n"
           << "  conv_efficiency: " << fixed(cal.convEfficiency, 4) << "\n"
           << "  attention_factor: " << fixed(cal.attentionFactor, 2) << "\n"
           << "  op_latency: " << fixed(cal.opLatencyCycles, 0) << "  // cycles\n"
           << "  step_overhead: " << fixed(cal.stepOverheadSeconds * 1e3, 3) << " ms\n"
           << "  update_cost: " << fixed(cal.updateSecondsPerParameter * 1e9, 4) << " ns  // per parameter of a replica\n";
    // The rows' cross-validated errors: `ipu estimate`'s intervals (logo_error) and coverage warnings.
    auto listOf = [&](const char* name, auto value) {
      module << "  " << name << ": [";
      for (std::size_t i = 0; i < cal.rows.size(); ++i) module << (i ? ", " : "") << value(cal.rows[i]);
      module << "]\n";
    };
    listOf("loo_family", [](const hw::Calibration::Row& r) { return "\"" + r.family + "\""; });
    listOf("loo_ipus", [](const hw::Calibration::Row& r) { return fixed(r.ipus, 0); });
    listOf("loo_accumulation", [](const hw::Calibration::Row& r) { return fixed(r.accumulation, 0); });
    listOf("loo_micro_batch", [](const hw::Calibration::Row& r) { return fixed(r.microBatch, 0); });
    listOf("loo_memory", [](const hw::Calibration::Row& r) { return fixed(r.memory, 4); });
    listOf("loo_phased", [](const hw::Calibration::Row& r) { return std::string(r.phased ? "true" : "false"); });
    listOf("loo_recomputes", [](const hw::Calibration::Row& r) { return std::string(r.recomputes ? "true" : "false"); });
    listOf("loo_software", [](const hw::Calibration::Row& r) {
      // A script's own string: its quotes and backslashes escaped, so the module reads back.
      std::string quoted = "\"";
      for (char ch : r.software) {
        if (ch == '"' || ch == '\\') quoted += '\\';
        quoted += ch;
      }
      return quoted + "\"";
    });
    listOf("loo_chip", [](const hw::Calibration::Row& r) { return "\"" + r.chip + "\""; });
    listOf("loo_error", [](const hw::Calibration::Row& r) { return fixed(r.looError, 4); });
    listOf("logo_error", [](const hw::Calibration::Row& r) { return fixed(r.logoError, 4); });
    module << "}\n";
  }
  // Canonical formatting, so the module passes `ipu fmt --check`.
  base::SourceMap sources;
  base::Diagnostics diags;
  base::FileId id = sources.add(output.empty() ? "calibration.ipu" : output, module.str());
  auto program = syntax::parse(sources, id, diags);
  std::string text = program ? syntax::print(*program, &sources) : module.str();
  if (output.empty()) {
    std::cout << text;
    return 0;
  }
  std::string error;
  if (!replaceFile(output, text, error)) {
    std::cerr << "ipu calibrate: " << error << "\n";
    return 1;
  }
  std::cerr << "wrote " << output << "\n";
  return 0;
}

int run(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  std::string output, storeLocation, where, name;
  bool whereGiven = false;
  base::ColorMode color = base::ColorMode::Auto;
  ArgumentReader in(args);
  std::string v;
  while (in.next()) {
    if (in.value("--output", v, "-o")) {
      if (v.empty()) return usage("calibrate", "`--output` needs a file name");
      output = v;
    } else if (in.value("--store", v)) {
      if (v.empty()) return usage("calibrate", "`--store` needs a path or a postgresql:// URI");
      storeLocation = v;
    } else if (in.value("--where", v)) {
      if (v.empty()) return usage("calibrate", "`--where` needs a filter");
      where = v;
      whereGiven = true;
    } else if (in.value("--name", v)) {
      if (v.empty() || v.find_first_of("\n\"`\\") != std::string::npos)
        return usage("calibrate", "`--name` needs a name on one line, without quotes, backquotes or backslashes");
      name = v;
    } else if (in.value("--color", v)) {
      if (!parseColor(v, color)) return usage("calibrate", "--color takes `auto`, `always` or `never`");
    } else if (in.isOption()) {
      return usage("calibrate", "unknown option `" + in.word() + "`");
    } else {
      files.push_back(in.word());
    }
  }
  if (files.size() > 1) return usage("calibrate", "`calibrate` takes one table of measurements");
  if (whereGiven && storeLocation.empty()) return usage("calibrate", "`--where` filters the runs of `--store`");
  if (files.empty() && storeLocation.empty()) return usage("calibrate", "`calibrate` takes a table of measurements, --store, or both");
  base::Painter painter(base::shouldColor(color, 2));
  Rows rows;
  if (!files.empty() && !tableRows(files[0], rows, painter)) return kUserError;
  if (!storeLocation.empty())
    if (int code = storeRows(storeLocation, where, rows, painter); code != kOk) return code;
  if (name.empty()) {
    // What the module says it was fitted on: the table's file name, the store's.
    if (!files.empty()) name = fs::path(files[0]).filename().string();
    if (!storeLocation.empty())
      name += (name.empty() ? "" : " and ") + std::string("measured runs of ") +
              (store::isPostgresLocation(storeLocation) ? std::string("a PostgreSQL store") : fs::path(storeLocation).filename().string());
  }
  return fitAndWrite(rows.rows, name, files.empty() ? storeLocation : files[0], output);
}

}  // namespace

const Command kCalibrateCommand{"calibrate", "calibrate [TABLE] [--store URL]",
                                "fit the cost model to measured throughput (a CSV table, measured\n"
                                "runs of a store; docs/cost-model.md) and print the parameters as an .ipu module",
                                kHelp, run};

}  // namespace ipu::cli
