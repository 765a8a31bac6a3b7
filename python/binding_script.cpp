// ipu.Script (ipu.load) and ipu.Mapping: check, plan, estimate, search and
// mapping variants of a script, over the one engine (session::Session) the
// CLI uses. Plans and estimates are the documents `ipu plan --json` and
// `ipu estimate --json` print (ir::toJson, cost::toJson), as dicts.
#include <pybind11/stl.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include "interpreter/base/render.h"
#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/measured_run.h"
#include "interpreter/search/search.h"
#include "interpreter/session/session.h"
#include "interpreter/store/run_store.h"
#include "python/binding.h"
#include "python/script_handle.h"
#include "runtime/ir/mapping_fields.h"

namespace ipu::python {

namespace {

// A Python value as a script writes it after `field:` (8, 0.6, "streaming",
// [0.3, 0.6], ["weights", "optimizer_state"], None for `none`).
std::string fieldText(const py::handle& v) {
  if (v.is_none()) return "none";
  if (py::isinstance<py::bool_>(v)) raiseError("a mapping field takes no true or false");
  if (py::isinstance<py::int_>(v)) return py::str(v).cast<std::string>();
  if (py::isinstance<py::float_>(v)) return py::repr(v).cast<std::string>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    std::string out = "[";
    bool first = true;
    for (const auto& x : v) {
      out += (first ? "" : ", ") + fieldText(x);
      first = false;
    }
    return out + "]";
  }
  raiseError("a mapping field takes a number, a string, a list of them or None, not " +
             py::str(py::type::of(v)).cast<std::string>());
}

Mapping withFields(const Mapping& base, const py::dict& fields) {
  Mapping m = base;
  for (const auto& [k, v] : fields) {
    std::string name = k.cast<std::string>(), problem;
    if (!runner::setMappingField(m.value, name, fieldText(v), problem)) raiseError(problem);
  }
  m.asWritten = m.asWritten && fields.empty();
  return m;
}

py::object mappingFields(const Mapping& m) {
  return toPython(nlohmann::ordered_json::parse(runner::mappingText(m.value)));
}

// A fresh session per call, as each CLI command has: the script is read from
// the disk again, and diagnostics never accumulate across calls.
struct Fresh {
  session::Session s;
  std::optional<base::FileId> file;
  explicit Fresh(const std::string& path) {
    file = s.readFile(path);
    if (!file) raiseDiagnostics(s.diagnostics(), s.sources(), "cannot read `" + path + "`");
  }
};

// The document a command prints, with its diagnostics, or IpuError.
py::object document(ir::Json j, session::Session& s, const base::Diagnostics& diags) {
  if (diags.hasErrors()) raiseDiagnostics(diags, s.sources(), "the script has errors");
  j["diagnostics"] = base::toJson(diags, s.sources());
  return toPython(j);
}

class Script {
 public:
  explicit Script(std::string path) : path_(std::move(path)) {
    // Read once now, so that a missing file is an error of load().
    Fresh f(path_);
  }
  const std::string& path() const { return path_; }

  // `ipu check`: the diagnostics of checking and planning.
  py::list check() {
    Fresh f(path_);
    {
      py::gil_scoped_release nogil;
      f.s.plan(*f.file);
    }
    return diagnosticList(f.s.diagnostics(), f.s.sources());
  }

  // `ipu plan --json`, or the plan of the training whose phase is `mapping`'s, planned with it.
  py::object plan(const std::optional<Mapping>& mapping) {
    Fresh f(path_);
    if (!mapping || mapping->asWritten) {
      const ir::ExecutionPlan* p = nullptr;
      {
        py::gil_scoped_release nogil;
        p = f.s.plan(*f.file, /*requireRuns=*/true);
      }
      if (p == nullptr) raiseDiagnostics(f.s.diagnostics(), f.s.sources(), "the script does not plan");
      return document(ir::toJson(*p), f.s, f.s.diagnostics());
    }
    runner::MeasuredPlan mp = planWith(f, *mapping);
    return document(ir::toJson(mp.plan), f.s, mp.diagnostics);
  }

  // `ipu estimate --json` (of the whole script, or of `mapping`'s training
  // planned with it); recorded in `store` when given, as `ipu estimate` records.
  py::object estimate(const std::optional<Mapping>& mapping, const py::object& store) {
    Fresh f(path_);
    const cost::Estimate* est = nullptr;
    const ir::ExecutionPlan* plan = nullptr;
    base::Diagnostics diags;
    std::optional<runner::MeasuredPlan> mp;
    if (!mapping || mapping->asWritten) {
      {
        py::gil_scoped_release nogil;
        est = f.s.estimate(*f.file);
      }
      plan = est != nullptr ? f.s.lastPlan() : nullptr;
      diags = f.s.diagnostics();
    } else {
      mp = planWith(f, *mapping);
      std::size_t before = f.s.diagnostics().all().size();
      {
        py::gil_scoped_release nogil;
        est = f.s.estimatePlan(mp->plan);
      }
      plan = &mp->plan;
      diags = mp->diagnostics;
      for (std::size_t i = before; i < f.s.diagnostics().all().size(); ++i) diags.add(f.s.diagnostics().all()[i]);
    }
    if (est == nullptr || plan == nullptr) raiseDiagnostics(diags, f.s.sources(), "the script cannot be estimated");
    py::object out = document(cost::toJson(*est), f.s, diags);
    if (!store.is_none()) {
      std::string location = storeLocation(store);
      py::list ids;
      try {
        std::vector<long long> recorded;
        {
          py::gil_scoped_release nogil;
          auto st = store::openStore(location, store::OpenMode::Create);
          recorded = runner::recordEstimate(*st, *plan, *est, f.s.rootText());
        }
        for (long long id : recorded) ids.append(id);
      } catch (const store::StoreError& e) {
        raiseStoreError(e.what());
      }
      out["recorded"] = ids;
    }
    return out;
  }

  // The mapping of a phase as written (run and phase by name, "" for the first).
  Mapping mapping(const std::string& run, const std::string& phase) {
    Fresh f(path_);
    const ir::ExecutionPlan* p = f.s.plan(*f.file, true);
    if (p == nullptr || f.s.diagnostics().hasErrors()) raiseDiagnostics(f.s.diagnostics(), f.s.sources(), "the script does not plan");
    auto [ri, pi] = indices(*p, run, phase);
    Mapping m;
    m.script = path_;
    m.run = p->runs[ri].name;
    m.phase = p->runs[ri].phases[pi].name;
    m.value = f.s.variantOf(ri, pi);
    return m;
  }

  // `ipu search`: the best mappings of each phase (or the one named).
  py::list search(const std::string& run, const std::string& phase, const search::Options& options) {
    Fresh f(path_);
    const check::CheckedProgram* program = f.s.check(*f.file);
    if (program == nullptr) raiseDiagnostics(f.s.diagnostics(), f.s.sources(), "the script has errors");
    if (program->runs.empty()) raiseError("`" + path_ + "` declares no training to search");
    py::list out;
    bool any = false;
    for (const auto& r : program->runs) {
      if (!run.empty() && r.name != run) continue;
      for (const auto& ph : r.phases) {
        if (!phase.empty() && ph.name != phase) continue;
        any = true;
        search::PhaseResult res;
        {
          py::gil_scoped_release nogil;
          res = search::searchPhase(ph, f.s.checker()->evaluator(), f.s.sources(), options);
        }
        py::dict d;
        d["run"] = r.name;
        d["phase"] = ph.name;
        d["objective"] = search::name(res.objective);
        d["global_batch"] = res.globalBatch;
        d["pod_ipus"] = res.podIpus;
        d["max_ipus"] = res.maxIpus;
        d["error"] = res.error.empty() ? py::object(py::none()) : py::object(py::str(res.error));
        d["stopped"] = res.stopped == search::StopReason::None ? py::object(py::none()) : py::object(py::str(search::name(res.stopped)));
        d["seconds"] = res.seconds;
        py::dict counts;
        counts["space"] = res.counts.space;
        counts["evaluated"] = res.counts.evaluated;
        counts["pruned_by_bound"] = res.counts.pruned;
        counts["pruned_by_memory"] = res.counts.prunedMemory;
        counts["rejected_for_memory"] = res.counts.rejectedMemory;
        counts["not_searched"] = res.counts.notSearched;
        d["counts"] = counts;
        py::list top;
        for (const auto& c : res.top) top.append(candidate(r.name, ph, c));
        d["top"] = top;
        d["declared"] = res.declared ? candidate(r.name, ph, *res.declared) : py::object(py::none());
        out.append(d);
      }
    }
    if (!any) raiseError("no training `" + run + "` with a phase `" + phase + "` in `" + path_ + "`");
    return out;
  }

 private:
  static std::pair<std::size_t, std::size_t> indices(const ir::ExecutionPlan& p, const std::string& run, const std::string& phase) {
    for (std::size_t i = 0; i < p.runs.size(); ++i) {
      if (!run.empty() && p.runs[i].name != run) continue;
      for (std::size_t k = 0; k < p.runs[i].phases.size(); ++k)
        if (phase.empty() || p.runs[i].phases[k].name == phase) return {i, k};
      raiseError("no phase `" + phase + "` in training `" + p.runs[i].name + "`");
    }
    raiseError(run.empty() ? std::string("the script declares no training") : "no training `" + run + "` in the script");
  }

  runner::MeasuredPlan planWith(Fresh& f, const Mapping& m) {
    requireScriptOf(m, path_);
    runner::MeasuredPlan mp;
    {
      py::gil_scoped_release nogil;
      mp = runner::planMeasured(f.s, *f.file, m.run, m.phase, &m.value);
    }
    if (!mp.ok) raiseDiagnostics(mp.diagnostics, f.s.sources(), mp.problem.empty() ? "the mapping does not plan" : mp.problem);
    return mp;
  }

  py::dict candidate(const std::string& run, const check::PhaseSpec& ph, const search::Candidate& c) const {
    ir::Json settings = ir::Json::object();
    ir::writeMappingJson(search::mappingOf(ph, c).mapping, settings);
    py::dict d = toPython(settings);
    d["micro_batch"] = c.microBatch;
    d["gradient_accumulation"] = c.gradientAccumulation;
    d["split"] = search::name(c.split);
    d["ipus"] = c.ipusUsed;
    d["fits"] = c.fits;
    d["step_time_s"] = c.stepTime;
    d["samples_per_s"] = c.samplesPerSecond;
    d["tokens_per_s"] = c.tokensPerSecond > 0 ? py::object(py::float_(c.tokensPerSecond)) : py::object(py::none());
    d["time_to_train_s"] = c.timeToTrain;
    d["peak_memory_bytes"] = c.peakMemoryBytes;
    Mapping m;
    m.script = path_;
    m.run = run;
    m.phase = ph.name;
    m.value = search::mappingValue(ph, c);
    m.asWritten = false;
    d["mapping"] = py::cast(m);
    return d;
  }

  // Nothing else: each call works in a session of its own (Fresh), so calls
  // from several Python threads (the GIL released during the long parts)
  // share no state but the standard library's prelude, which sessions share
  // read-only.
  std::string path_;
};

search::Options searchOptions(const std::string& objective, const std::string& rank, int top, int maxIpus, double headroom,
                              int threads, const py::dict& fix, std::optional<double> timeLimit) {
  search::Options o;
  auto obj = search::objectiveNamed(objective);
  if (!obj) raiseError("objective takes `throughput`, `time_to_train` or `throughput_per_ipu`, not `" + objective + "`");
  o.objective = *obj;
  auto rk = search::rankNamed(rank);
  if (!rk) raiseError("rank takes `conservative` or `expected`, not `" + rank + "`");
  o.rank = *rk;
  if (top < 1) raiseError("top takes a whole number from 1");
  o.top = top;
  o.maxIpus = maxIpus;
  if (!(headroom >= 0 && headroom < 1)) raiseError("headroom takes a fraction in [0, 1)");
  o.headroom = headroom;
  o.threads = threads;
  // `--fix name=value`, the CLI's own parser of it.
  for (const auto& [k, v] : fix)
    if (auto problem = search::applyFix(o.fixed, k.cast<std::string>() + "=" + fieldText(v))) raiseError(*problem);
  if (timeLimit) {
    if (!(*timeLimit > 0)) raiseError("time_limit takes a number of seconds above 0");
    o.deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(*timeLimit));
  }
  return o;
}

}  // namespace

void requireScriptOf(const Mapping& m, const std::string& path) {
  std::error_code ea, eb;
  auto a = std::filesystem::weakly_canonical(m.script, ea), b = std::filesystem::weakly_canonical(path, eb);
  if (ea || eb || a != b) raiseError("the mapping is of `" + m.script + "`, not of `" + path + "`");
}

std::string storeLocation(const py::handle& store) {
  if (store.is_none()) {
    const char* env = std::getenv("IPU_STORE");
    return env != nullptr && *env != '\0' ? std::string(env) : std::string("runs/ipu.db");
  }
  if (py::isinstance<py::str>(store)) return store.cast<std::string>();
  if (py::hasattr(store, "__fspath__")) return py::str(store.attr("__fspath__")()).cast<std::string>();
  if (py::hasattr(store, "location")) return py::str(store.attr("location")).cast<std::string>();
  raiseError("a store is a path, a postgresql:// URI or an ipu.Store");
}

void registerScript(py::module_& m) {
  py::class_<Mapping>(m, "Mapping",
                      "A mapping of one training phase, as a value: vary it with with_(field=value, ...) "
                      "and plan or estimate it with Script.plan(mapping=...) / Script.estimate(mapping=...).")
      .def_readonly("script", &Mapping::script)
      .def_readonly("run", &Mapping::run)
      .def_readonly("phase", &Mapping::phase)
      .def_readonly("as_written", &Mapping::asWritten)
      .def("with_", [](const Mapping& self, const py::kwargs& fields) { return withFields(self, fields); },
           "A copy with fields set: any field of the mapping table (replicas=8, shard=2, recompute='every_layer', "
           "available_memory_proportion=[0.3, 0.6], ...), pipeline_ipus (balanced), placement, micro_batch, "
           "gradient_accumulation, global_batch.")
      .def("fields", &mappingFields, "The value as a dict: placement, pipeline_ipus, stages, settings (as script text), batch.")
      .def("__repr__", [](const Mapping& self) {
        return "<Mapping " + std::string(self.asWritten ? "as written" : runner::mappingText(self.value)) + " of " + self.run + "/" +
               self.phase + " in " + self.script + ">";
      });

  py::class_<Script>(m, "Script", "A script, loaded with ipu.load(path). Each call reads it again, as a CLI command does.")
      .def(py::init<std::string>(), py::arg("path"))
      .def_property_readonly("path", &Script::path)
      .def("check", &Script::check, "The diagnostics of checking and planning (`ipu check`), as ipu.Diagnostic objects.")
      .def("plan", &Script::plan, py::arg("mapping") = py::none(),
           "The plan as `ipu plan --json` prints it; with a mapping, its training planned with it. Raises IpuError.")
      .def("estimate", &Script::estimate, py::arg("mapping") = py::none(), py::arg("store") = py::none(),
           "The estimate as `ipu estimate --json` prints it; with a store, recorded there (ids under 'recorded').")
      .def("mapping", &Script::mapping, py::arg("run") = "", py::arg("phase") = "",
           "The mapping of a phase as written (the first training and phase by default).")
      .def("with_",
           [](Script& self, const py::kwargs& fields) { return withFields(self.mapping("", ""), fields); },
           "The first phase's mapping with fields set: script.with_(replicas=8).")
      .def(
          "search",
          [](Script& self, const std::string& run, const std::string& phase, const std::string& objective, int top,
             int maxIpus, double headroom, const std::string& rank, int threads, const py::dict& fix,
             std::optional<double> timeLimit) {
            return self.search(run, phase, searchOptions(objective, rank, top, maxIpus, headroom, threads, fix, timeLimit));
          },
          py::arg("run") = "", py::arg("phase") = "", py::arg("objective") = "throughput", py::arg("top") = 5,
          py::arg("max_ipus") = 0, py::arg("headroom") = 0.0, py::arg("rank") = "conservative", py::arg("threads") = 0,
          py::arg("fix") = py::dict(), py::arg("time_limit") = py::none(),
          "`ipu search`: per phase, the best mappings (each with its ipu.Mapping under 'mapping').");
}

}  // namespace ipu::python
