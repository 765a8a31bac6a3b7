#include "interpreter/cli/calibration_table.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "runtime/cost/cost_model.h"
#include "runtime/files/regular_file.h"

namespace ipu::cli {

namespace {

constexpr std::uint64_t kMaxTableBytes = 16u << 20;
constexpr double kMinThroughput = 1e-3, kMaxThroughput = 1e9;
constexpr double kPlausibleFactor = 100;

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
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.erase(0, 1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  }
  return out;
}

// A field as the user wrote it, for a message: control bytes escaped, long
// fields cut.
std::string shown(const std::string& field) {
  std::string out;
  for (unsigned char c : field.substr(0, 40)) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (field.size() > 40) out += "...";
  return out;
}

// A plain decimal number: digits, one optional point, an optional exponent.
bool plainNumber(const std::string& s, double& value) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return false;
  char* end = nullptr;
  value = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(value);
}

}  // namespace

CalibrationTable readCalibrationTable(const std::string& path) {
  CalibrationTable out;
  files::ReadResult file = files::readRegularFile(path, kMaxTableBytes);
  if (!file.ok()) {
    out.problems.push_back({0, file.describe(path) + (file.status == files::ReadResult::Status::TooLarge
                                                          ? "; the limit is 16 MiB"
                                                          : "")});
    return out;
  }
  std::istringstream in(file.text);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> want = {"label", "script", "run", "phase", "samples_per_s"};
  if (splitCsv(line) != want) {
    out.problems.push_back({1, "the table must start with the header `label,script,run,phase,samples_per_s`"});
    return out;
  }
  int lineNo = 1;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty() || line == "\r" || line[0] == '#') continue;
    auto f = splitCsv(line);
    if (f.size() != 5) {
      out.problems.push_back({lineNo, "expected 5 fields, found " + std::to_string(f.size())});
      continue;
    }
    double measured = 0;
    if (!plainNumber(f[4], measured)) {
      out.problems.push_back({lineNo, "`" + shown(f[4]) + "` is not a number (write a throughput like `1234.5`)"});
      continue;
    }
    if (!(measured > 0)) {
      out.problems.push_back({lineNo, "`" + shown(f[4]) + "` is not a positive throughput"});
      continue;
    }
    if (measured < kMinThroughput || measured > kMaxThroughput) {
      out.problems.push_back({lineNo, "`" + shown(f[4]) + "` samples/s is not a plausible throughput (between " +
                                          throughputText(kMinThroughput) + " and " + throughputText(kMaxThroughput) +
                                          "); is it in samples per second?"});
      continue;
    }
    if (f[1].empty()) {
      out.problems.push_back({lineNo, "the `script` field is empty"});
      continue;
    }
    out.rows.push_back(TableRow{lineNo, f[0], f[1], f[2], f[3], measured});
  }
  if (out.rows.empty() && out.problems.empty()) out.problems.push_back({0, "the table has no measurements"});
  return out;
}

std::string implausibleMeasurement(double measured, const ir::PhasePlan& phase) {
  cost::PhaseEstimate e = cost::estimatePhase(phase);
  if (!e.ok || !(e.samplesPerSecond > 0) || !std::isfinite(e.samplesPerSecond))
    return "the cost model cannot estimate this configuration, so it cannot be fitted to it";
  const double ratio = measured / e.samplesPerSecond;
  if (ratio > kPlausibleFactor || ratio < 1 / kPlausibleFactor)
    return throughputText(measured) + " samples/s is more than " + throughputText(kPlausibleFactor) +
           " times off the model's " + throughputText(e.samplesPerSecond) +
           " samples/s for this configuration, further than calibration can move it; is the figure or its unit "
           "wrong?";
  return "";
}

std::size_t parametersToFit(const std::vector<cost::Measurement>& rows) {
  std::set<std::string> architectures;
  for (const auto& r : rows) architectures.insert(cost::architectureOf(r.phase.pod.machine.chip));
  return 2 + 2 * architectures.size();
}

std::string degenerateFit(const cost::FitResult& fit) {
  if (fit.chips.empty()) return "the fit found no parameters";
  for (const auto& [chip, c] : fit.chips) {
    const double values[] = {c.matmulEfficiency, c.convEfficiency, c.attentionFactor, c.opLatencyCycles,
                             c.stepOverheadSeconds};
    for (double v : values)
      if (!std::isfinite(v) || v < 0) return chip + ": the fit gave a parameter that is not a finite positive number";
    if (c.matmulEfficiency > 1 || c.convEfficiency > 1) return chip + ": the fit gave an efficiency above 100%";
    if (c.opLatencyCycles > 1e7 || c.stepOverheadSeconds > 1e3)
      return chip + ": the fit gave an implausible operation latency or step overhead";
  }
  for (const auto& r : fit.residuals)
    if (!std::isfinite(r.predicted) || !(r.predicted > 0)) return "the fitted model predicts no throughput for `" + r.label + "`";
  return "";
}

std::string throughputText(double v) {
  char buf[32];
  if (!std::isfinite(v)) return v > 0 ? "inf" : v < 0 ? "-inf" : "nan";
  if (std::fabs(v) >= 1e9 || (v != 0 && std::fabs(v) < 1e-2)) std::snprintf(buf, sizeof buf, "%.3g", v);
  else if (std::fabs(v) >= 100) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace ipu::cli
