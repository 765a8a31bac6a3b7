#include "interpreter/sweep/space.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <locale>
#include <sstream>

namespace ipu::sweep {

namespace {

// One table per enum, so a name and its enumerator cannot drift apart.
constexpr std::array<std::pair<Method, const char*>, 3> kMethods = {{
    {Method::Grid, "grid"}, {Method::Random, "random"}, {Method::Bayes, "bayes"}}};
constexpr std::array<std::pair<Goal, const char*>, 2> kGoals = {{{Goal::Minimize, "minimize"}, {Goal::Maximize, "maximize"}}};
constexpr std::array<std::pair<Distribution, const char*>, 11> kDistributions = {{
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
}};

template <typename E, std::size_t N>
const char* nameIn(const std::array<std::pair<E, const char*>, N>& table, E e) {
  for (const auto& [v, n] : table)
    if (v == e) return n;
  return "?";
}

template <typename E, std::size_t N>
std::optional<E> lookupIn(const std::array<std::pair<E, const char*>, N>& table, const std::string& name) {
  for (const auto& [v, n] : table)
    if (name == n) return v;
  return std::nullopt;
}

// %.17g in the classic locale: the same text on every host.
std::string exactNumber(double v) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os.precision(17);
  os << v;
  return os.str();
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

const char* methodName(Method m) { return nameIn(kMethods, m); }
const char* goalName(Goal g) { return nameIn(kGoals, g); }
const char* distributionName(Distribution d) { return nameIn(kDistributions, d); }
std::optional<Method> methodFromName(const std::string& name) { return lookupIn(kMethods, name); }
std::optional<Goal> goalFromName(const std::string& name) { return lookupIn(kGoals, name); }
std::optional<Distribution> distributionFromName(const std::string& name) { return lookupIn(kDistributions, name); }

std::string ParamValue::canonical() const {
  switch (kind) {
    case Kind::Number: return exactNumber(number);
    case Kind::Integer: return exactNumber(number);  // integral: printed without a point
    case Kind::Boolean: return number != 0 ? "true" : "false";
    case Kind::Name: return text;
    case Kind::Text: return quoted(text);
  }
  return {};
}

std::string assignmentKey(const Assignment& a) {
  std::vector<std::pair<std::string, std::string>> parts;
  parts.reserve(a.size());
  for (const auto& [path, value] : a) parts.emplace_back(path, value.canonical());
  std::sort(parts.begin(), parts.end());
  std::string key;
  for (const auto& [path, text] : parts) key += (key.empty() ? "" : ";") + path + "=" + text;
  return key;
}

}  // namespace ipu::sweep
