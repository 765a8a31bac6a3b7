#include "interpreter/sweep/space.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ipu::sweep {

namespace {

struct Named {
  const char* text;
  Distribution value;
};

constexpr Named kDistributions[] = {
    {"values", Distribution::Values},
    {"categorical", Distribution::Categorical},
    {"uniform", Distribution::Uniform},
    {"int_uniform", Distribution::IntUniform},
    {"log_uniform", Distribution::LogUniform},
    {"q_uniform", Distribution::QUniform},
    {"q_log_uniform", Distribution::QLogUniform},
    {"normal", Distribution::Normal},
    {"q_normal", Distribution::QNormal},
    {"log_normal", Distribution::LogNormal},
    {"q_log_normal", Distribution::QLogNormal},
};

}  // namespace

const char* methodName(Method m) {
  switch (m) {
    case Method::Grid: return "grid";
    case Method::Random: return "random";
    case Method::Bayes: return "bayes";
  }
  return "grid";
}

const char* goalName(Goal g) { return g == Goal::Minimize ? "minimize" : "maximize"; }

const char* distributionName(Distribution d) {
  for (const auto& n : kDistributions)
    if (n.value == d) return n.text;
  return "values";
}

std::optional<Method> methodFromName(const std::string& name) {
  for (Method m : {Method::Grid, Method::Random, Method::Bayes})
    if (name == methodName(m)) return m;
  return std::nullopt;
}

std::optional<Goal> goalFromName(const std::string& name) {
  for (Goal g : {Goal::Minimize, Goal::Maximize})
    if (name == goalName(g)) return g;
  return std::nullopt;
}

std::optional<Distribution> distributionFromName(const std::string& name) {
  for (const auto& n : kDistributions)
    if (name == n.text) return n.value;
  return std::nullopt;
}

std::string ParamValue::canonical() const {
  switch (kind) {
    case Kind::Integer: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(number));
      return buf;
    }
    case Kind::Boolean: return number != 0 ? "true" : "false";
    case Kind::Name: return text;
    case Kind::Text: {
      // Quoted, so that the text "fp16" and the name fp16 are different values.
      std::string out = "\"";
      for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      return out + "\"";
    }
    case Kind::Number: break;
  }
  // %.17g round-trips every double; the program never sets a locale, so the
  // decimal separator is always '.'.
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", number);
  return buf;
}

std::string assignmentKey(const Assignment& a) {
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(a.size());
  for (const auto& [path, value] : a) pairs.emplace_back(path, value.canonical());
  std::sort(pairs.begin(), pairs.end());
  std::string key;
  for (const auto& [path, value] : pairs) {
    if (!key.empty()) key += ' ';
    key += path + '=' + value;
  }
  return key;
}

}  // namespace ipu::sweep
