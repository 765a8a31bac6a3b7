// The JSON API of `ipu ui` (dashboard.h; the contract is in docs/tracking.md,
// "Live dashboard: ipu ui"). Every answer is built from the store as it is at
// the request: nothing is cached, so a run being written shows its newest
// points.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "interpreter/base/diagnostic.h"
#include "interpreter/report/runs_html.h"
#include "interpreter/report/sweep_html.h"
#include "interpreter/runner/dead_runs.h"
#include "interpreter/runner/measured_run.h"
#include "interpreter/store/filter.h"
#include "interpreter/store/run_analysis.h"
#include "interpreter/store/run_json.h"
#include "interpreter/store/run_store.h"
#include "interpreter/store/sweep_store.h"
#include "interpreter/ui/dashboard.h"
#include "interpreter/ui/requests.h"

namespace ipu::ui {

using nlohmann::json;

namespace {

json numberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

Reply jsonReply(const json& j, int status = 200) {
  return {status, "application/json", j.dump(-1, ' ', false, json::error_handler_t::replace)};
}

}  // namespace

Reply errorReply(int status, const std::string& message) { return jsonReply(json{{"error", message}}, status); }

Dashboard::Dashboard(std::string store, bool writable, int pollMilliseconds)
    : store_(std::move(store)), writable_(writable), pollMilliseconds_(pollMilliseconds) {}

std::string param(const Query& q, const std::string& name) {
  auto it = q.find(name);
  return it == q.end() ? std::string() : it->second;
}

std::variant<std::vector<store::RunRecord>, Reply> findRuns(store::RunStore& st, const std::vector<store::RunRecord>* all,
                                                            const Query& q) {
  const std::string text = param(q, "ids");
  std::vector<std::string> ids;
  std::stringstream in(text);
  for (std::string id; std::getline(in, id, ',');) {
    id.erase(0, id.find_first_not_of(' '));
    id.erase(id.find_last_not_of(' ') + 1);
    if (!id.empty()) ids.push_back(id);
  }
  if (ids.empty()) return errorReply(400, "`ids` names no run: give runs by id or name, e.g. ?ids=3,5");
  if (ids.size() > 200) return errorReply(400, "`ids` names " + std::to_string(ids.size()) + " runs: at most 200 at once");
  std::vector<store::RunRecord> runs;
  std::set<long long> seen;
  for (const auto& id : ids) {
    auto r = store::findRun(st, id, all);
    if (!r) return errorReply(404, "there is no run `" + id + "` in `" + st.location() + "`");
    if (seen.insert(r->id).second) runs.push_back(std::move(*r));
  }
  return runs;
}

Reply Dashboard::config() const {
  return guarded([&] {
    return jsonReply({{"store", store::openStore(store_, store::OpenMode::Existing)->location()},
                      {"writable", writable_},
                      {"poll_ms", pollMilliseconds_}});
  });
}

Reply Dashboard::runs(const Query& q) const {
  return guarded([&]() -> Reply {
    auto st = store::openStore(store_, store::OpenMode::Existing);
    std::vector<store::RunRecord> all = st->listRuns();
    // Shown as `ipu runs` shows them: a run of this host whose process died is killed.
    if (!runner::markDeadLocalRuns(*st, &all).empty()) all = st->listRuns();
    store::FieldResolver names(all);
    std::vector<store::RunRecord> selected;
    const std::string where = param(q, "where");
    if (where.find_first_not_of(" \t\r\n") == std::string::npos) {
      selected = all;
    } else {
      auto parsed = store::Filter::parse(where, names);
      if (auto* e = std::get_if<store::FilterError>(&parsed))
        return jsonReply({{"error", "where: " + e->message},
                          {"where", where},
                          {"offset", e->offset},
                          {"length", e->length},
                          {"help", e->help},
                          {"shown", store::renderFilterError(where, *e, "")}},
                         400);
      const auto& filter = std::get<store::Filter>(parsed);
      for (const auto& r : all)
        if (filter.matches(r)) selected.push_back(r);
    }
    if (const std::string sort = param(q, "sort"); !sort.empty()) {
      bool descending = false;
      const std::string key = store::sortKey(sort, descending);
      auto field = names.resolve(key);
      if (!field) return errorReply(400, "sort: no run has `" + key + "`; " + names.unknownNameHelp(key));
      store::sortRuns(selected, *field, descending);
    }
    const std::size_t matched = selected.size();
    if (const std::string limit = param(q, "limit"); !limit.empty()) {
      char* end = nullptr;
      const long long n = std::strtoll(limit.c_str(), &end, 10);
      if (*end != '\0' || n < 1) return errorReply(400, "limit: `" + limit + "` is not a whole number of at least 1");
      if (selected.size() > static_cast<std::size_t>(n)) selected.resize(static_cast<std::size_t>(n));
    }
    std::vector<store::Field> columns;
    if (const std::string text = param(q, "columns"); !text.empty()) {
      std::stringstream in(text);
      for (std::string name; std::getline(in, name, ',');) {
        name.erase(0, name.find_first_not_of(' '));
        name.erase(name.find_last_not_of(' ') + 1);
        if (name.empty()) continue;
        auto field = names.resolve(name);
        if (!field) return errorReply(400, "columns: no run has `" + name + "`; " + names.unknownNameHelp(name));
        columns.push_back(*field);
      }
    } else {
      columns = store::tellingColumns(selected, names);
    }
    json out;
    out["store"] = st->location();
    out["total"] = all.size();
    out["matched"] = matched;
    out["columns"] = json::array();
    for (const auto& c : columns) out["columns"].push_back(c.label);
    out["names"] = names.names();
    out["runs"] = json::array();
    for (const auto& r : selected) {
      json j = store::runJson(r, false);
      json cells = json::array();
      for (const auto& c : columns) cells.push_back(store::FieldResolver::format(r, c));
      j["cells"] = std::move(cells);
      out["runs"].push_back(std::move(j));
    }
    return jsonReply(out);
  });
}

Reply Dashboard::run(const std::string& id) const {
  return guarded([&]() -> Reply {
    auto st = store::openStore(store_, store::OpenMode::Existing);
    auto r = store::findRun(*st, id);
    if (!r) return errorReply(404, "there is no run `" + id + "` in `" + st->location() + "`");
    if (const std::vector<store::RunRecord> one{*r}; !runner::markDeadLocalRuns(*st, &one).empty())
      r = store::findRun(*st, std::to_string(r->id));
    return jsonReply(store::runJson(*r, true));
  });
}

Reply Dashboard::metrics(const std::string& id, const Query& q) const {
  return guarded([&]() -> Reply {
    long long since = -1;
    if (const std::string text = param(q, "since"); !text.empty()) {
      char* end = nullptr;
      since = std::strtoll(text.c_str(), &end, 10);
      if (*end != '\0') return errorReply(400, "since: `" + text + "` is not a whole number (a step)");
    }
    auto st = store::openStore(store_, store::OpenMode::Existing);
    auto r = store::findRun(*st, id);
    if (!r) return errorReply(404, "there is no run `" + id + "` in `" + st->location() + "`");
    const std::string key = param(q, "key");
    if (!key.empty() && r->metrics.count(key) == 0) {
      std::vector<std::string> keys;
      for (const auto& [k, s] : r->metrics) keys.push_back(k);
      const std::string hint = base::didYouMean(key, keys);
      return errorReply(404, "run " + std::to_string(r->id) + " has no metric `" + key + "`" + (hint.empty() ? "" : "; " + hint));
    }
    json points = json::array();
    long long lastStep = -1;
    for (const auto& p : st->metricHistory(r->id, key)) {
      if (p.step <= since) continue;
      lastStep = std::max(lastStep, p.step);
      points.push_back({{"key", p.key}, {"step", p.step}, {"value", numberOrNull(p.value)}, {"time", numberOrNull(p.time)}});
    }
    return jsonReply({{"run", r->id},
                      {"status", store::name(r->status)},
                      {"since", since},
                      {"last_step", lastStep < 0 ? json(nullptr) : json(lastStep)},
                      {"points", points}});
  });
}

Reply Dashboard::reportData(const Query& q) const {
  return guarded([&]() -> Reply {
    // Asked every poll by every live page: the runs are read by id, the
    // store not listed.
    auto st = store::openStore(store_, store::OpenMode::Existing);
    auto found = findRuns(*st, nullptr, q);
    if (auto* reply = std::get_if<Reply>(&found)) return *reply;
    std::vector<report::ReportRun> runs;
    for (auto& r : std::get<std::vector<store::RunRecord>>(found)) {
      report::ReportRun rr;
      for (auto& p : st->metricCurves(r.id, report::kMaxPointsPerCurve)) rr.history[p.key].push_back(std::move(p));
      rr.record = std::move(r);
      runs.push_back(std::move(rr));
    }
    return jsonReply(report::runsReportData(runs));
  });
}

Reply Dashboard::comparison(const Query& q) const {
  return guarded([&]() -> Reply {
    auto st = store::openStore(store_, store::OpenMode::Existing);
    auto all = st->listRuns();  // the estimates to pair runs with
    if (!runner::markDeadLocalRuns(*st, &all).empty()) all = st->listRuns();
    auto found = findRuns(*st, &all, q);
    if (auto* reply = std::get_if<Reply>(&found)) return *reply;
    const auto& runs = std::get<std::vector<store::RunRecord>>(found);
    json out;
    out["runs"] = json::array();
    for (const auto& r : runs) out["runs"].push_back(store::runJson(r, false));
    out["differing_parameters"] = json::array();
    for (const auto& k : store::differingParameters(runs)) {
      json values = json::array();
      for (const auto& r : runs) {
        auto it = r.parameters.find(k);
        values.push_back(it == r.parameters.end() ? json(nullptr) : json(it->second));
      }
      out["differing_parameters"].push_back({{"name", k}, {"values", values}});
    }
    out["predicted_vs_measured"] = json::array();
    for (const auto& pr : store::pairWithEstimates(*st, runs, all)) {
      auto source = pr.run->parameters.find(runner::kSourceParameter);
      json metrics = json::array();
      for (const auto& m : pr.metrics)
        metrics.push_back({{"key", m.key},
                           {"predicted", numberOrNull(m.predicted)},
                           {"measured_mean", numberOrNull(m.measuredMean)},
                           {"ratio", std::isfinite(m.measuredMean) && m.measuredMean != 0
                                         ? numberOrNull(m.predicted / m.measuredMean) : json(nullptr)}});
      out["predicted_vs_measured"].push_back(
          {{"run", pr.run->id},
           {"estimate", pr.estimate.id},
           {"plan_hash", pr.run->planHash},
           {"measured_by_training", source != pr.run->parameters.end() && source->second == runner::kMeasuredSource},
           {"metrics", metrics}});
    }
    return jsonReply(out);
  });
}

Reply Dashboard::sweeps() const {
  return guarded([&]() -> Reply {
    auto sw = store::openSweepStore(store_, store::OpenMode::Existing);
    json out = json::array();
    for (const auto& s : sw->listSweeps()) {
      const store::SweepStatus status = sw->status(s.id);
      json counts = json::object();
      long long total = 0;
      for (const auto& [state, n] : status.counts) {
        counts[store::name(state)] = n;
        total += n;
      }
      json best = nullptr;
      if (status.best)
        best = {{"index", status.best->index},
                {"metric", numberOrNull(status.best->metric)},
                {"run", status.best->runId ? json(*status.best->runId) : json(nullptr)}};
      out.push_back({{"name", s.name},
                     {"training", s.spec.training},
                     {"method", sweep::methodName(s.spec.method)},
                     {"state", store::name(s.state)},
                     {"created_at", numberOrNull(s.createdAt)},
                     {"metric", {{"name", s.spec.metric.name}, {"goal", sweep::goalName(s.spec.metric.goal)}}},
                     {"total", total},
                     {"counts", counts},
                     {"best", best}});
    }
    return jsonReply({{"sweeps", out}});
  });
}

std::variant<report::SweepReport, Reply> sweepReport(const std::string& location, const std::string& name) {
  auto sw = store::openSweepStore(location, store::OpenMode::Existing);
  std::optional<store::SweepRecord> s = sw->sweep(name);
  if (!s) {
    std::vector<std::string> names;
    for (const auto& x : sw->listSweeps()) names.push_back(x.name);
    const std::string hint = base::didYouMean(name, names);
    return errorReply(404, "there is no sweep `" + name + "` in `" + sw->location() + "`" + (hint.empty() ? "" : "; " + hint));
  }
  const auto trials = sw->trials(s->id);
  // The highest step each trial's run recorded, from the runs' summaries.
  std::set<long long> wanted;
  for (const auto& t : trials)
    if (t.runId) wanted.insert(*t.runId);
  std::map<long long, long long> runSteps;
  if (!wanted.empty()) {
    auto runs = store::openStore(location, store::OpenMode::Existing);
    for (const auto& r : runs->listRuns()) {
      if (!wanted.count(r.id)) continue;
      for (const auto& [key, m] : r.metrics)
        if (m.count > 0) runSteps[r.id] = std::max(runSteps.count(r.id) ? runSteps[r.id] : 0, m.lastStep);
    }
  }
  return report::buildSweepReport(*s, trials, runSteps, sw->location());
}

Reply Dashboard::sweep(const std::string& name) const {
  return guarded([&]() -> Reply {
    auto built = sweepReport(store_, name);
    if (auto* reply = std::get_if<Reply>(&built)) return *reply;
    return jsonReply(report::sweepReportJson(std::get<report::SweepReport>(built)));
  });
}

namespace {

const char* kReadOnly =
    "the dashboard is read-only: start it with `ipu ui --writable` to tag runs and write notes from the page";

// The body of a POST as a JSON object, or the reply saying why it is not one.
std::variant<json, Reply> jsonBody(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return errorReply(400, "the request's body is not a JSON object");
  return j;
}

}  // namespace

Reply Dashboard::changeTags(const std::string& id, const std::string& body) const {
  if (!writable_) return errorReply(403, kReadOnly);
  return guarded([&]() -> Reply {
    auto parsed = jsonBody(body);
    if (auto* reply = std::get_if<Reply>(&parsed)) return *reply;
    const json& j = std::get<json>(parsed);
    std::vector<std::string> add, remove;
    for (auto [field, list] : {std::pair{"add", &add}, std::pair{"remove", &remove}}) {
      if (!j.contains(field)) continue;
      if (!j[field].is_array()) return errorReply(400, std::string("`") + field + "` must be a list of tags");
      for (const auto& t : j[field]) {
        if (!t.is_string()) return errorReply(400, std::string("`") + field + "` must be a list of tags (strings)");
        const std::string tag = t.get<std::string>();
        if (std::string problem = store::tagProblem(tag); !problem.empty()) return errorReply(400, problem);
        list->push_back(tag);
      }
    }
    if (add.empty() && remove.empty()) return errorReply(400, "give tags to `add` or `remove`, e.g. {\"add\": [\"baseline\"]}");
    auto st = store::openStore(store_, store::OpenMode::Existing);
    auto r = store::findRun(*st, id);
    if (!r) return errorReply(404, "there is no run `" + id + "` in `" + st->location() + "`");
    if (!add.empty()) st->addTags(r->id, add);
    if (!remove.empty()) st->removeTags(r->id, remove);
    return jsonReply(store::runJson(*store::findRun(*st, std::to_string(r->id)), false));
  });
}

Reply Dashboard::setNote(const std::string& id, const std::string& body) const {
  if (!writable_) return errorReply(403, kReadOnly);
  return guarded([&]() -> Reply {
    auto parsed = jsonBody(body);
    if (auto* reply = std::get_if<Reply>(&parsed)) return *reply;
    const json& j = std::get<json>(parsed);
    if (!j.contains("note") || !j["note"].is_string())
      return errorReply(400, "give the note as {\"note\": \"text\"} (\"\" clears it)");
    auto st = store::openStore(store_, store::OpenMode::Existing);
    auto r = store::findRun(*st, id);
    if (!r) return errorReply(404, "there is no run `" + id + "` in `" + st->location() + "`");
    st->setNote(r->id, j["note"].get<std::string>());
    return jsonReply(store::runJson(*store::findRun(*st, std::to_string(r->id)), false));
  });
}

}  // namespace ipu::ui
