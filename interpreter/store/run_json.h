// A run record as JSON: what `ipu runs --json` and `ipu runs show --json`
// print (docs/tracking.md) and what the Python module's Store returns
// (docs/python.md), written once so the two cannot drift apart.
#pragma once

#include <nlohmann/json.hpp>

#include "interpreter/store/run_store.h"

namespace ipu::store {

// id, name, kind, training, status, stop_reason, started_at, ended_at,
// heartbeat_at (seconds since the epoch, or null), host, pid, plan_hash,
// note, tags, parameters, metrics (key -> last, min, max, last_step, count);
// with `full`, script and artifacts (kind, path) too.
nlohmann::json runJson(const RunRecord& r, bool full);

}  // namespace ipu::store
