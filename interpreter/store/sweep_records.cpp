#include "interpreter/store/sweep_records.h"

#include <cmath>

#include "interpreter/store/run_store.h"

namespace ipu::store {

using nlohmann::json;

namespace {

[[noreturn]] void malformed(const std::string& what, const std::string& why) {
  throw StoreError(what + " is malformed: " + why);
}

// A number that may be absent from the JSON (a non-finite one is written as null).
json finiteOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

double numberAt(const json& j, const char* key, double fallback, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) malformed(what, std::string("`") + key + "` is not a number");
  return it->get<double>();
}

std::string textAt(const json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) malformed(what, std::string("`") + key + "` is missing or not text");
  return it->get<std::string>();
}

}  // namespace

json toJson(const sweep::ParamValue& v) {
  using K = sweep::ParamValue::Kind;
  switch (v.kind) {
    case K::Number: return finiteOrNull(v.number);
    case K::Integer: return static_cast<long long>(v.number);
    case K::Boolean: return v.number != 0;
    case K::Name: return json{{"name", v.text}};
    case K::Text: return v.text;
  }
  return nullptr;
}

json toJson(const sweep::Assignment& a) {
  json j = json::object();
  for (const auto& [path, value] : a) j[path] = toJson(value);
  return j;
}

json toJson(const sweep::SweepSpec& s) {
  json params = json::array();
  for (const auto& p : s.parameters) {
    json values = json::array();
    for (const auto& v : p.values) values.push_back(toJson(v));
    params.push_back({{"path", p.path},
                      {"distribution", sweep::distributionName(p.distribution)},
                      {"values", values},
                      {"probabilities", p.probabilities},
                      {"min", p.min},
                      {"max", p.max},
                      {"mu", p.mu},
                      {"sigma", p.sigma},
                      {"q", p.q}});
  }
  json j = {{"name", s.name},
            {"training", s.training},
            {"method", sweep::methodName(s.method)},
            {"metric",
             {{"name", s.metric.name},
              {"goal", sweep::goalName(s.metric.goal)},
              {"target", s.metric.target ? finiteOrNull(*s.metric.target) : json(nullptr)}}},
            {"parameters", params},
            {"run_cap", s.runCap},
            {"early_terminate",
             {{"enabled", s.earlyTerminate.enabled},
              {"min_iter", s.earlyTerminate.minIter},
              {"eta", s.earlyTerminate.eta},
              {"max_iter", s.earlyTerminate.maxIter}}},
            {"seed", s.seed}};
  if (s.from)
    j["from"] = {{"kind", s.from->kind == sweep::StartFrom::Kind::Run ? "run" : "sweep_best"}, {"name", s.from->name}};
  else
    j["from"] = nullptr;
  return j;
}

sweep::ParamValue paramValueFromJson(const json& j, const std::string& what) {
  if (j.is_boolean()) return sweep::ParamValue::ofBoolean(j.get<bool>());
  if (j.is_number_integer()) return sweep::ParamValue::ofInteger(j.get<long long>());
  if (j.is_number()) return sweep::ParamValue::ofNumber(j.get<double>());
  if (j.is_null()) return sweep::ParamValue::ofNumber(std::nan(""));
  if (j.is_string()) return sweep::ParamValue::ofText(j.get<std::string>());
  if (j.is_object() && j.size() == 1 && j.contains("name") && j["name"].is_string())
    return sweep::ParamValue::ofName(j["name"].get<std::string>());
  malformed(what, "a parameter value `" + j.dump() + "` is none of number, integer, boolean, text or {\"name\": ...}");
}

sweep::Assignment assignmentFromJson(const json& j, const std::string& what) {
  if (!j.is_object()) malformed(what, "an assignment is not an object");
  sweep::Assignment a;
  for (const auto& [path, value] : j.items()) a.emplace_back(path, paramValueFromJson(value, what));
  return a;
}

sweep::SweepSpec specFromJson(const json& j, const std::string& what) {
  if (!j.is_object()) malformed(what, "not an object");
  sweep::SweepSpec s;
  s.name = textAt(j, "name", what);
  s.training = textAt(j, "training", what);
  auto method = sweep::methodFromName(textAt(j, "method", what));
  if (!method) malformed(what, "unknown method");
  s.method = *method;
  if (!j.contains("metric") || !j["metric"].is_object()) malformed(what, "`metric` is missing");
  const json& m = j["metric"];
  s.metric.name = textAt(m, "name", what);
  auto goal = sweep::goalFromName(textAt(m, "goal", what));
  if (!goal) malformed(what, "unknown goal");
  s.metric.goal = *goal;
  if (m.contains("target") && !m["target"].is_null()) s.metric.target = numberAt(m, "target", 0, what);
  if (!j.contains("parameters") || !j["parameters"].is_array()) malformed(what, "`parameters` is missing");
  for (const json& p : j["parameters"]) {
    if (!p.is_object()) malformed(what, "a parameter is not an object");
    sweep::ParamSpec ps;
    ps.path = textAt(p, "path", what);
    auto d = sweep::distributionFromName(textAt(p, "distribution", what));
    if (!d) malformed(what, "unknown distribution of `" + ps.path + "`");
    ps.distribution = *d;
    if (p.contains("values")) {
      if (!p["values"].is_array()) malformed(what, "`values` of `" + ps.path + "` is not a list");
      for (const json& v : p["values"]) ps.values.push_back(paramValueFromJson(v, what));
    }
    if (p.contains("probabilities")) {
      if (!p["probabilities"].is_array()) malformed(what, "`probabilities` of `" + ps.path + "` is not a list");
      for (const json& v : p["probabilities"]) {
        if (!v.is_number()) malformed(what, "a probability of `" + ps.path + "` is not a number");
        ps.probabilities.push_back(v.get<double>());
      }
    }
    ps.min = numberAt(p, "min", 0, what);
    ps.max = numberAt(p, "max", 0, what);
    ps.mu = numberAt(p, "mu", 0, what);
    ps.sigma = numberAt(p, "sigma", 1, what);
    ps.q = numberAt(p, "q", 0, what);
    s.parameters.push_back(std::move(ps));
  }
  s.runCap = static_cast<long long>(numberAt(j, "run_cap", 0, what));
  if (j.contains("early_terminate") && j["early_terminate"].is_object()) {
    const json& e = j["early_terminate"];
    s.earlyTerminate.enabled = e.value("enabled", false);
    s.earlyTerminate.minIter = static_cast<long long>(numberAt(e, "min_iter", 1, what));
    s.earlyTerminate.eta = static_cast<int>(numberAt(e, "eta", 3, what));
    s.earlyTerminate.maxIter = static_cast<long long>(numberAt(e, "max_iter", 0, what));
  }
  if (j.contains("from") && j["from"].is_object()) {
    sweep::StartFrom f;
    std::string kind = textAt(j["from"], "kind", what);
    if (kind == "run") f.kind = sweep::StartFrom::Kind::Run;
    else if (kind == "sweep_best") f.kind = sweep::StartFrom::Kind::SweepBest;
    else malformed(what, "`from.kind` is `" + kind + "`");
    f.name = textAt(j["from"], "name", what);
    s.from = f;
  }
  if (j.contains("seed")) {
    if (!j["seed"].is_number_integer()) malformed(what, "`seed` is not a whole number");
    s.seed = j["seed"].get<std::uint64_t>();
  }
  return s;
}

}  // namespace ipu::store
