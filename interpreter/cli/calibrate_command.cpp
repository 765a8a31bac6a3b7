// `ipu calibrate TABLE.csv`: plan every configuration in a table of measured
// throughput, fit the cost model's parameters (runtime/cost/calibrate.h),
// print the residuals, and write the parameters as an `.ipu` module of
// `let` records that a chip's `calibration:` field takes.
//
// The table is CSV with a header: label,script,run,phase,samples_per_s. Paths
// are relative to the table; empty run/phase mean the script's first.
// Returns the process exit code.

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "interpreter/base/render.h"
#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/cli/calibration_table.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/session/session.h"
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

const char* kHelp = R"(usage: ipu calibrate TABLE.csv [-o FILE] [--color WHEN]

Fit the cost model to measured throughput: plan every configuration of a CSV
table of measurements (label,script,run,phase,samples_per_s; paths relative
to the table, empty run or phase for the script's first), fit the model's
parameters, print the residuals, and print the parameters as an `.ipu` module
of `let` records that a chip's `calibration:` field takes (docs/cost-model.md).

options:
  -o, --output FILE      write the parameters to FILE instead
  --color auto|always|never
                         colour (default auto: only on a terminal; NO_COLOR disables)
)";

int calibrate(const std::string& table, const std::string& output, base::ColorMode color) {
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
  if (!parsed.problems.empty()) return 1;
  const fs::path base = fs::path(table).parent_path();
  std::string line;
  std::vector<cost::Measurement> rows;
  std::vector<std::unique_ptr<session::Session>> sessions;
  base::Painter painter(base::shouldColor(color, 2));
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
    rows.push_back(cost::Measurement{row.label, *found, row.samplesPerSecond});
    sessions.push_back(std::move(s));
  }
  if (failed) return 1;
  if (rows.size() < parametersToFit(rows)) {
    problem(0, std::to_string(rows.size()) + " measurement" + (rows.size() == 1 ? "" : "s") + " cannot determine " +
                   std::to_string(parametersToFit(rows)) +
                   " parameters (2 shared, 2 per chip): add rows, ideally of different models and pod sizes");
    return 1;
  }
  std::cerr << "fitting " << rows.size() << " measurements...\n";
  const std::string source = "fitted by `ipu calibrate` on " + fs::path(table).filename().string();
  cost::FitResult fit = cost::fitCalibration(rows, source);
  if (std::string why = degenerateFit(fit); !why.empty()) {
    problem(0, "the fit is degenerate (" + why + "); nothing was written");
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
  summary("in sample (fitted on every row)", fit.inSample);
  summary("leave-one-out (each row predicted by the fit on the others)", fit.leaveOneOut);
  summary(("leave-one-group-out (each of " + std::to_string(fit.groups) +
           " configuration groups predicted by the fit on the other groups)").c_str(),
          fit.leaveOneGroupOut);
  for (const auto& n : fit.notes) report << "note: " << n << "\n";
  std::cerr << report.str();

  std::ostringstream module;
  module << "// Generated by `ipu calibrate " << fs::path(table).filename().string()
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
           << "  update_cost: " << fixed(cal.updateSecondsPerParameter * 1e9, 4) << " ns  // per parameter of a replica\n"
           << "  gw_latency: " << fixed(cal.gwLatencySeconds * 1e3, 3) << " ms\n";
    if (!cal.softwareStepOverhead.empty()) {
      module << "  software: [";
      std::size_t i = 0;
      for (const auto& kv : cal.softwareStepOverhead) module << (i++ ? ", " : "") << "\"" << kv.first << "\"";
      module << "]\n  software_step_overhead: [";
      i = 0;
      for (const auto& kv : cal.softwareStepOverhead) module << (i++ ? ", " : "") << fixed(kv.second * 1e3, 3) << " ms";
      module << "]\n";
    }
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
  std::string output;
  base::ColorMode color = base::ColorMode::Auto;
  ArgumentReader in(args);
  std::string v;
  while (in.next()) {
    if (in.value("--output", v, "-o")) {
      if (v.empty()) return usage("calibrate", "`--output` needs a file name");
      output = v;
    } else if (in.value("--color", v)) {
      if (!parseColor(v, color)) return usage("calibrate", "--color takes `auto`, `always` or `never`");
    } else if (in.isOption()) {
      return usage("calibrate", "unknown option `" + in.word() + "`");
    } else {
      files.push_back(in.word());
    }
  }
  if (files.size() != 1) return usage("calibrate", "`calibrate` takes one table of measurements");
  return calibrate(files[0], output, color);
}

}  // namespace

const Command kCalibrateCommand{"calibrate", "calibrate TABLE",
                                "fit the cost model to measured throughput (a CSV table; see\n"
                                "docs/cost-model.md) and print the parameters as an .ipu module",
                                kHelp, run};

}  // namespace ipu::cli
