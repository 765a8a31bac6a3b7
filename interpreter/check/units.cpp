#include "interpreter/check/units.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace ipu::check {

Dim Dim::operator*(const Dim& o) const {
  Dim d;
  for (std::size_t i = 0; i < kBaseUnits; ++i) d.exp[i] = static_cast<std::int8_t>(exp[i] + o.exp[i]);
  return d;
}

Dim Dim::operator/(const Dim& o) const {
  Dim d;
  for (std::size_t i = 0; i < kBaseUnits; ++i) d.exp[i] = static_cast<std::int8_t>(exp[i] - o.exp[i]);
  return d;
}

Dim Dim::pow(int n) const {
  Dim d;
  for (std::size_t i = 0; i < kBaseUnits; ++i) d.exp[i] = static_cast<std::int8_t>(exp[i] * n);
  return d;
}

std::string Dim::describe() const {
  if (dimensionless()) return "number";
  if (*this == dims::bytes()) return "bytes";
  if (*this == dims::bandwidth()) return "bandwidth (bytes/s)";
  if (*this == dims::hertz()) return "frequency (Hz)";
  if (*this == dims::flop()) return "FLOP";
  if (*this == dims::flopRate()) return "compute rate (FLOP/s)";
  if (*this == dims::seconds()) return "time (s)";
  if (*this == dims::steps()) return "steps";
  if (*this == dims::epochs()) return "epochs";
  if (*this == dims::samples()) return "samples";
  static const char* names[kBaseUnits] = {"bytes", "s", "FLOP", "steps", "epochs", "samples"};
  std::string num, den;
  for (std::size_t i = 0; i < kBaseUnits; ++i) {
    if (exp[i] == 0) continue;
    std::string& part = exp[i] > 0 ? num : den;
    if (!part.empty()) part += "*";
    part += names[i];
    int p = std::abs(exp[i]);
    if (p != 1) part += "^" + std::to_string(p);
  }
  if (num.empty()) num = "1";
  return den.empty() ? num : num + "/" + den;
}

namespace {
const std::map<std::string, UnitInfo>& table() {
  static const std::map<std::string, UnitInfo> t = [] {
    std::map<std::string, UnitInfo> m;
    auto add = [&](const char* name, double f, Dim d) { m[name] = UnitInfo{f, d, false}; };
    Dim B = dims::bytes(), BW = dims::bandwidth();
    add("B", 1, B);
    add("KB", 1e3, B); add("MB", 1e6, B); add("GB", 1e9, B); add("TB", 1e12, B);
    add("KiB", 1024.0, B); add("MiB", 1048576.0, B); add("GiB", 1073741824.0, B); add("TiB", 1099511627776.0, B);
    add("B/s", 1, BW);
    add("KB/s", 1e3, BW); add("MB/s", 1e6, BW); add("GB/s", 1e9, BW); add("TB/s", 1e12, BW);
    add("KiB/s", 1024.0, BW); add("MiB/s", 1048576.0, BW); add("GiB/s", 1073741824.0, BW);
    add("Mbps", 1e6 / 8, BW); add("Gbps", 1e9 / 8, BW); add("Tbps", 1e12 / 8, BW);
    add("Hz", 1, dims::hertz()); add("kHz", 1e3, dims::hertz()); add("MHz", 1e6, dims::hertz()); add("GHz", 1e9, dims::hertz());
    add("FLOP", 1, dims::flop()); add("GFLOP", 1e9, dims::flop()); add("TFLOP", 1e12, dims::flop()); add("PFLOP", 1e15, dims::flop());
    add("FLOPS", 1, dims::flopRate()); add("GFLOPS", 1e9, dims::flopRate()); add("TFLOPS", 1e12, dims::flopRate());
    add("PFLOPS", 1e15, dims::flopRate());
    add("ns", 1e-9, dims::seconds()); add("us", 1e-6, dims::seconds()); add("ms", 1e-3, dims::seconds());
    add("s", 1, dims::seconds()); add("min", 60, dims::seconds()); add("h", 3600, dims::seconds());
    add("minutes", 60, dims::seconds()); add("hours", 3600, dims::seconds()); add("days", 86400, dims::seconds());
    add("step", 1, dims::steps()); add("steps", 1, dims::steps());
    add("epoch", 1, dims::epochs()); add("epochs", 1, dims::epochs());
    add("sample", 1, dims::samples()); add("samples", 1, dims::samples());
    m["%"] = UnitInfo{0.01, Dim::none(), true};
    return m;
  }();
  return t;
}
}  // namespace

std::optional<UnitInfo> lookupUnit(const std::string& unit) {
  auto it = table().find(unit);
  if (it == table().end()) return std::nullopt;
  return it->second;
}

const std::vector<std::string>& unitNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [k, _] : table()) v.push_back(k);
    return v;
  }();
  return names;
}

std::string formatNumber(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string formatPercent(double fraction) {
  const double pct = 100 * fraction;
  if (!std::isfinite(pct)) return std::isnan(pct) ? "?%" : (pct > 0 ? "inf%" : "-inf%");
  char buf[32];
  if (std::fabs(pct) < 1e6) std::snprintf(buf, sizeof buf, "%.0f%%", pct);
  else std::snprintf(buf, sizeof buf, "%.1e%%", pct);
  return buf;
}

std::string formatCell(double value, int decimals, std::size_t width) {
  char buf[64];
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  if (std::string(buf).size() <= width) return buf;
  for (int digits = static_cast<int>(width) - 6; digits >= 0; --digits) {
    std::snprintf(buf, sizeof buf, "%.*e", std::max(0, digits), value);
    if (std::string(buf).size() <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, "%.0e", value);
  return buf;
}

static std::string scaled(double v, const char* const* units, double step, int n, int decimals) {
  int i = 0;
  double a = std::fabs(v);
  while (i + 1 < n && a >= step) {
    a /= step;
    v /= step;
    ++i;
  }
  char buf[48];
  if (i == 0) std::snprintf(buf, sizeof buf, "%s %s", formatNumber(v).c_str(), units[0]);
  else if (a >= step) std::snprintf(buf, sizeof buf, "%.2e %s", v, units[i]);  // beyond the largest unit
  else std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, units[i]);
  return buf;
}

std::string formatBytes(double bytes) {
  static const char* const u[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  return scaled(bytes, u, 1000.0, 7, 1);
}

std::string formatQuantity(double v, const Dim& d) {
  if (d.dimensionless()) return formatNumber(v);
  if (d == dims::bytes()) return formatBytes(v);
  if (d == dims::bandwidth()) {
    static const char* const u[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s"};
    return scaled(v, u, 1000.0, 5, 1);
  }
  if (d == dims::hertz()) {
    static const char* const u[] = {"Hz", "kHz", "MHz", "GHz"};
    return scaled(v, u, 1000.0, 4, 2);
  }
  if (d == dims::flopRate()) {
    static const char* const u[] = {"FLOPS", "KFLOPS", "MFLOPS", "GFLOPS", "TFLOPS", "PFLOPS"};
    return scaled(v, u, 1000.0, 6, 1);
  }
  if (d == dims::seconds()) return formatNumber(v) + " s";
  if (d == dims::steps()) return formatNumber(v) + " steps";
  if (d == dims::epochs()) return formatNumber(v) + " epochs";
  if (d == dims::samples()) return formatNumber(v) + " samples";
  return formatNumber(v) + " " + d.describe();
}

}  // namespace ipu::check
