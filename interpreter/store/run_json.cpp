#include "interpreter/store/run_json.h"

#include <cmath>

namespace ipu::store {

namespace {

// JSON has no NaN: a time or value not known is null.
void numberOrNull(double v, nlohmann::json& slot) {
  if (std::isfinite(v)) slot = v;
  else slot = nullptr;
}

}  // namespace

nlohmann::json runJson(const RunRecord& r, bool full) {
  nlohmann::json j;
  j["id"] = r.id;
  j["name"] = r.name;
  j["kind"] = name(r.kind);
  j["training"] = r.training;
  j["status"] = name(r.status);
  j["stop_reason"] = r.stopReason;
  numberOrNull(r.startedAt, j["started_at"]);
  numberOrNull(r.endedAt, j["ended_at"]);
  numberOrNull(r.heartbeatAt, j["heartbeat_at"]);
  j["host"] = r.host;
  j["pid"] = r.pid;
  j["plan_hash"] = r.planHash;
  j["note"] = r.note;
  j["tags"] = r.tags;
  j["parameters"] = r.parameters;
  nlohmann::json m = nlohmann::json::object();
  for (const auto& [k, s] : r.metrics) {
    nlohmann::json x;
    numberOrNull(s.last, x["last"]);
    numberOrNull(s.min, x["min"]);
    numberOrNull(s.max, x["max"]);
    x["last_step"] = s.lastStep;
    x["count"] = s.count;
    m[k] = x;
  }
  j["metrics"] = m;
  if (full) {
    j["script"] = r.script;
    nlohmann::json a = nlohmann::json::array();
    for (const auto& art : r.artifacts) {
      nlohmann::json x = {{"kind", art.kind}, {"path", art.path}};
      if (art.kind == "checkpoint") {
        x["phase"] = art.phase.empty() ? nlohmann::json() : nlohmann::json(art.phase);
        x["step"] = art.step >= 0 ? nlohmann::json(art.step) : nlohmann::json();
        x["size"] = art.size >= 0 ? nlohmann::json(art.size) : nlohmann::json();
        x["sha256"] = art.sha256.empty() ? nlohmann::json() : nlohmann::json(art.sha256);
        x["host"] = art.host;
        x["run_directory"] = art.runDirectory.empty() ? nlohmann::json() : nlohmann::json(art.runDirectory);
        x["stored"] = art.stored;
      }
      a.push_back(std::move(x));
    }
    j["artifacts"] = a;
  }
  return j;
}

}  // namespace ipu::store
