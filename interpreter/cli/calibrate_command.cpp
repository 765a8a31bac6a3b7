#include "interpreter/cli/calibrate_command.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "interpreter/base/render.h"
#include "interpreter/cli/output_file.h"
#include "interpreter/session/session.h"
#include "interpreter/syntax/parser.h"
#include "interpreter/syntax/printer.h"
#include "runtime/cost/calibrate.h"

namespace ipu::cli {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> splitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') cur += c;
  }
  out.push_back(cur);
  for (auto& s : out) {
    while (!s.empty() && s.front() == ' ') s.erase(0, 1);
    while (!s.empty() && s.back() == ' ') s.pop_back();
  }
  return out;
}

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

}  // namespace

int calibrateCommand(const std::string& table, const std::string& output, base::ColorMode color) {
  std::ifstream in(table);
  if (!in) {
    std::cerr << "ipu calibrate: cannot read `" << table << "`\n";
    return 1;
  }
  const fs::path base = fs::path(table).parent_path();
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header = splitCsv(line);
  const std::vector<std::string> want = {"label", "script", "run", "phase", "samples_per_s"};
  if (header != want) {
    std::cerr << "ipu calibrate: `" << table << "` must start with the header `label,script,run,phase,samples_per_s`\n";
    return 1;
  }
  std::vector<cost::Measurement> rows;
  std::vector<std::unique_ptr<session::Session>> sessions;
  base::Painter painter(base::shouldColor(color, 2));
  int lineNo = 1;
  bool failed = false;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty() || line[0] == '#') continue;
    auto f = splitCsv(line);
    if (f.size() != 5) {
      std::cerr << table << ":" << lineNo << ": expected 5 fields, found " << f.size() << "\n";
      failed = true;
      continue;
    }
    char* end = nullptr;
    double measured = std::strtod(f[4].c_str(), &end);
    if (end == f[4].c_str() || !(measured > 0)) {
      std::cerr << table << ":" << lineNo << ": `" << f[4] << "` is not a positive throughput\n";
      failed = true;
      continue;
    }
    auto s = std::make_unique<session::Session>();
    fs::path script = fs::path(f[1]).is_absolute() ? fs::path(f[1]) : base / f[1];
    auto file = s->readFile(script.string());
    const ir::ExecutionPlan* plan = file ? s->plan(*file, true) : nullptr;
    if (plan == nullptr || s->diagnostics().hasErrors()) {
      for (const auto& d : s->diagnostics().all()) base::renderHuman(std::cerr, d, s->sources(), painter);
      std::cerr << table << ":" << lineNo << ": `" << f[1] << "` does not plan\n";
      failed = true;
      continue;
    }
    const ir::PhasePlan* found = nullptr;
    for (const auto& r : plan->runs)
      if (f[2].empty() || r.name == f[2])
        for (const auto& ph : r.phases)
          if ((f[3].empty() || ph.name == f[3]) && found == nullptr) found = &ph;
    if (found == nullptr) {
      std::cerr << table << ":" << lineNo << ": no run `" << f[2] << "` phase `" << f[3] << "` in `" << f[1] << "`\n";
      failed = true;
      continue;
    }
    rows.push_back(cost::Measurement{f[0], *found, measured});
    sessions.push_back(std::move(s));
  }
  if (failed) return 1;
  if (rows.empty()) {
    std::cerr << "ipu calibrate: `" << table << "` has no measurements\n";
    return 1;
  }
  std::cerr << "fitting " << rows.size() << " measurements...\n";
  const std::string source = "fitted by `ipu calibrate` on " + fs::path(table).filename().string();
  cost::FitResult fit = cost::fitCalibration(rows, source);

  std::ostringstream report;
  report << "row                                      chip        measured   predicted   error   left out   error\n";
  for (const auto& r : fit.residuals) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%-40s %-8s %11.0f %11.0f %+6.1f%% %10.0f %+6.1f%%\n", r.label.c_str(), r.chip.c_str(),
                  r.measured, r.predicted, 100 * r.error(), r.looPredicted, 100 * r.looError());
    report << buf;
  }
  auto summary = [&](const char* what, const cost::ErrorSummary& s) {
    report << what << ": mean absolute error " << fixed(100 * s.mean, 1) << "%, median " << fixed(100 * s.median, 1)
           << "%, worst " << fixed(100 * s.worst, 1) << "%\n";
  };
  summary("in sample (fitted on every row)", fit.inSample);
  summary("leave-one-out (each row predicted by the fit on the others)", fit.leaveOneOut);
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
    // The rows' leave-one-out errors: the intervals and coverage warnings of `ipu estimate`.
    auto listOf = [&](const char* name, auto value) {
      module << "  " << name << ": [";
      for (std::size_t i = 0; i < cal.rows.size(); ++i) module << (i ? ", " : "") << value(cal.rows[i]);
      module << "]\n";
    };
    listOf("loo_family", [](const hw::Calibration::Row& r) { return "\"" + r.family + "\""; });
    listOf("loo_ipus", [](const hw::Calibration::Row& r) { return fixed(r.ipus, 0); });
    listOf("loo_accumulation", [](const hw::Calibration::Row& r) { return fixed(r.accumulation, 0); });
    listOf("loo_error", [](const hw::Calibration::Row& r) { return fixed(r.looError, 4); });
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

}  // namespace ipu::cli
