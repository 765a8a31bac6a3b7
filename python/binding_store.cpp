// ipu._ipu.Store: the run store (interpreter/store) as lists of dicts: runs
// filtered with the `--where` language of `ipu runs`, metric histories,
// sweeps and their trials, tags and notes. The package wraps it to give
// pandas frames (python/ipu/__init__.py).
#include <pybind11/stl.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <variant>
#include "interpreter/store/filter.h"
#include "interpreter/store/run_json.h"
#include "interpreter/store/run_store.h"
#include "interpreter/store/sweep_records.h"
#include "interpreter/store/sweep_store.h"
#include "python/binding.h"
#include "python/script_handle.h"

namespace ipu::python {

namespace {

py::object numberOrNone(double v) { return std::isfinite(v) ? py::object(py::float_(v)) : py::object(py::none()); }

py::object fromJson(const nlohmann::json& j) { return toPython(nlohmann::ordered_json::parse(j.dump())); }

// The run as `ipu runs --json` prints it (store/run_json.h): the same keys.
py::object runDict(const store::RunRecord& r, bool full) { return fromJson(store::runJson(r, full)); }

class Store {
 public:
  explicit Store(const py::object& where, bool create) {
    location_ = storeLocation(where);
    call([&] { runs_ = store::openStore(location_, create ? store::OpenMode::Create : store::OpenMode::Existing); });
  }
  const std::string& location() const { return location_; }

  py::list runs(const std::optional<std::string>& where) {
    std::vector<store::RunRecord> all;
    call([&] { all = runs_->listRuns(); });
    py::list out;
    if (!where || where->empty()) {
      for (const auto& r : all) out.append(runDict(r, false));
      return out;
    }
    store::FieldResolver names(all);
    auto parsed = store::Filter::parse(*where, names);
    if (auto* e = std::get_if<store::FilterError>(&parsed)) raiseError("--where: " + e->message + "\n" + store::renderFilterError(*where, *e, "  "));
    const auto& filter = std::get<store::Filter>(parsed);
    for (const auto& r : all)
      if (filter.matches(r)) out.append(runDict(r, false));
    return out;
  }

  py::object run(const std::string& idOrName) { return runDict(find(idOrName), true); }

  py::list metrics(const std::string& idOrName, const std::string& key) {
    store::RunRecord r = find(idOrName);
    std::vector<store::MetricPoint> points;
    call([&] { points = runs_->metricHistory(r.id, key); });
    py::list out;
    for (const auto& p : points) {
      py::dict d;
      d["key"] = p.key;
      d["step"] = p.step;
      d["value"] = numberOrNone(p.value);
      d["time"] = p.time;
      out.append(d);
    }
    return out;
  }

  void tag(const std::string& idOrName, const std::vector<std::string>& tags, bool remove) {
    store::RunRecord r = find(idOrName);
    for (const auto& t : tags)
      if (t.empty() || t.find_first_of(", \t\n") != std::string::npos)
        raiseError("a tag is one word without commas or spaces: `" + t + "`");
    call([&] { remove ? runs_->removeTags(r.id, tags) : runs_->addTags(r.id, tags); });
  }

  void note(const std::string& idOrName, const std::string& text) {
    store::RunRecord r = find(idOrName);
    call([&] { runs_->setNote(r.id, text); });
  }

  py::list sweeps() {
    std::vector<store::SweepRecord> all;
    std::vector<std::vector<store::TrialRecord>> trials;
    call([&] {
      auto sw = store::openSweepStore(location_, store::OpenMode::Existing);
      all = sw->listSweeps();
      for (const auto& s : all) trials.push_back(sw->trials(s.id));
    });
    py::list out;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const auto& s = all[i];
      py::dict d;
      d["id"] = s.id;
      d["name"] = s.name;
      d["state"] = store::name(s.state);
      d["created_at"] = numberOrNone(s.createdAt);
      d["spec"] = fromJson(store::toJson(s.spec));
      py::list ts;
      for (const auto& t : trials[i]) {
        py::dict x;
        x["index"] = t.index;
        x["state"] = store::name(t.state);
        x["assignment"] = fromJson(store::toJson(t.assignment));
        x["agent"] = t.agent;
        x["attempts"] = t.attempts;
        x["run_id"] = t.runId ? py::object(py::int_(*t.runId)) : py::object(py::none());
        x["metric"] = numberOrNone(t.metric);
        x["reason"] = t.reason;
        x["started_at"] = numberOrNone(t.startedAt);
        x["ended_at"] = numberOrNone(t.endedAt);
        ts.append(x);
      }
      d["trials"] = ts;
      out.append(d);
    }
    return out;
  }

 private:
  // A store call without the GIL; its failures as ipu.StoreError.
  template <typename F>
  void call(F&& f) {
    storeCall(mutex_, std::forward<F>(f));
  }

  store::RunRecord find(const std::string& idOrName) {
    std::optional<store::RunRecord> r;
    call([&] { r = store::findRun(*runs_, idOrName); });
    if (!r) raiseStoreError("no run `" + idOrName + "` in " + location_);
    return *r;
  }

  std::string location_;
  std::unique_ptr<store::RunStore> runs_;
  std::mutex mutex_;
};

}  // namespace

void registerStore(py::module_& m) {
  py::class_<Store>(m, "Store", "The run store at a path (SQLite) or a postgresql:// URI (docs/tracking.md).")
      .def(py::init<py::object, bool>(), py::arg("location") = py::none(), py::arg("create") = true)
      .def_property_readonly("location", &Store::location)
      .def("runs", &Store::runs, py::arg("where") = py::none(),
           "Every run and estimate, newest first, as dicts (the keys of `ipu runs --json`); `where` filters "
           "with the language of `ipu runs --where`.")
      .def("run", &Store::run, py::arg("run"), "One run by id or name, with its script and artifacts.")
      .def("metrics", &Store::metrics, py::arg("run"), py::arg("key") = "",
           "A run's metric points (key, step, value, time), by key then step; one key's with `key`.")
      .def("tag", [](Store& s, const std::string& run, const py::args& tags) { s.tag(run, tags.cast<std::vector<std::string>>(), false); })
      .def("untag", [](Store& s, const std::string& run, const py::args& tags) { s.tag(run, tags.cast<std::vector<std::string>>(), true); })
      .def("note", &Store::note, py::arg("run"), py::arg("text"))
      .def("sweeps", &Store::sweeps, "Every sweep, oldest first, with its spec and trials.");
}

}  // namespace ipu::python
