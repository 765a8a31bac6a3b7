#include "interpreter/sweep/space.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace ipu::sweep {

namespace {

template <typename E>
struct Named {
  E value;
  const char* name;
};

constexpr Named<Method> kMethods[] = {
    {Method::Grid, "grid"}, {Method::Random, "random"}, {Method::Bayes, "bayes"}};
constexpr Named<Goal> kGoals[] = {{Goal::Minimize, "minimize"}, {Goal::Maximize, "maximize"}};
// W&B's names, so that a W&B user recognises them. Unlike W&B's `log_uniform`
// (whose bounds are exponents), our bounds are always values: W&B's
// `log_uniform_values`.
constexpr Named<Distribution> kDistributions[] = {
    {Distribution::Values, "values"},
    {Distribution::Categorical, "categorical"},
    {Distribution::Uniform, "uniform"},
    {Distribution::IntUniform, "int_uniform"},
    {Distribution::LogUniform, "log_uniform"},
    {Distribution::QUniform, "q_uniform"},
    {Distribution::QLogUniform, "q_log_uniform"},
    {Distribution::Normal, "normal"},
    {Distribution::QNormal, "q_normal"},
    {Distribution::LogNormal, "log_normal"},
    {Distribution::QLogNormal, "q_log_normal"},
};

template <typename E, std::size_t N>
const char* nameOf(const Named<E> (&table)[N], E value) {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  return "?";
}

template <typename E, std::size_t N>
std::optional<E> fromName(const Named<E> (&table)[N], const std::string& name) {
  for (const auto& entry : table)
    if (name == entry.name) return entry.value;
  return std::nullopt;
}

// The shortest decimal text that reads back as the same double; -0 is 0 (they
// compare equal, so they must be the same cell).
std::string numberText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  // The fewest significant digits that read back exactly, in %g's notation
  // (0.0001, 1e-05, 6.02214076e+23: fixed unless the exponent is below -4
  // or not below the digits), which is how people write them.
  char buf[64];
  for (int digits = 1; digits <= 17; ++digits) {
    auto result = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, digits);
    double back = 0;
    std::from_chars(buf, result.ptr, back);
    if (back == v || digits == 17) return std::string(buf, result.ptr);
  }
  return "?";
}

// A double-quoted string with `"` and `\` escaped and control characters as
// \u00XX, so no text value can look like another value or like a separator.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

}  // namespace

const char* methodName(Method m) { return nameOf(kMethods, m); }
const char* goalName(Goal g) { return nameOf(kGoals, g); }
const char* distributionName(Distribution d) { return nameOf(kDistributions, d); }
std::optional<Method> methodFromName(const std::string& name) { return fromName(kMethods, name); }
std::optional<Goal> goalFromName(const std::string& name) { return fromName(kGoals, name); }
std::optional<Distribution> distributionFromName(const std::string& name) { return fromName(kDistributions, name); }

std::string ParamValue::canonical() const {
  switch (kind) {
    case Kind::Number: return numberText(number);
    case Kind::Integer: {
      // Beyond long long the value is not an integer anyone wrote; show it
      // as a number rather than convert out of range.
      if (!(std::fabs(number) < 9.2e18)) return numberText(number);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(number));
      return buf;
    }
    case Kind::Boolean: return number != 0 ? "true" : "false";
    case Kind::Name: return text;
    case Kind::Text: return quoted(text);
  }
  return "?";
}

std::string ParamValue::shown() const {
  if (kind != Kind::Number || !std::isfinite(number)) return canonical();
  char buf[48];
  if (number == std::floor(number) && std::fabs(number) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", number);
  else std::snprintf(buf, sizeof buf, "%.6g", number);
  return buf;
}

std::string assignmentShown(const Assignment& a) {
  std::vector<const std::pair<std::string, ParamValue>*> sorted;
  sorted.reserve(a.size());
  for (const auto& entry : a) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](const auto* x, const auto* y) { return x->first < y->first; });
  std::string out;
  for (const auto* entry : sorted) out += (out.empty() ? "" : " ") + entry->first + "=" + entry->second.shown();
  return out;
}

std::string assignmentKey(const Assignment& a) {
  std::vector<const std::pair<std::string, ParamValue>*> sorted;
  sorted.reserve(a.size());
  for (const auto& entry : a) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](const auto* x, const auto* y) { return x->first < y->first; });
  std::string key;
  for (const auto* entry : sorted) {
    if (!key.empty()) key += ' ';
    key += entry->first;
    key += '=';
    key += entry->second.canonical();
  }
  return key;
}

}  // namespace ipu::sweep
