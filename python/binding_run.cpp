// ipu.start_run: a training that runs outside `ipu` (a PyTorch or PopTorch
// script, docs/python.md) recorded in the run store as a measured run
// (runner/measured_run.h): linked to the plan its script declares by the
// plan hash an estimate of that plan records, so `ipu runs compare` sets
// the estimate beside it and `ipu calibrate --store` can fit to it.
#include <pybind11/stl.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/measured_run.h"
#include "interpreter/runner/run_parameters.h"
#include "interpreter/session/session.h"
#include "interpreter/store/run_store.h"
#include "python/binding.h"
#include "python/script_handle.h"

namespace ipu::python {

namespace {

// Points are written in batches, as the emulator's recorder does
// (runner/store_recorder.h): one short transaction per second or per 1,000
// points, so many processes can log into one SQLite file.
constexpr double kFlushSeconds = 1;
constexpr std::size_t kFlushPoints = 1000;

class MeasuredRun {
 public:
  MeasuredRun(const std::string& location, const store::NewRun& nr) : location_(location) {
    guarded([&] {
      store_ = store::openStore(location_, store::OpenMode::Create);
      id_ = store_->createRun(nr);
    });
    planHash_ = nr.planHash;
    training_ = nr.training;
    lastFlush_ = std::chrono::steady_clock::now();
  }
  ~MeasuredRun() {
    // Dropped without finish(): the process is alive no longer than its
    // objects, so the run is marked as having ended without saying how.
    if (!finished_ && store_) {
      try {
        writeBuffer();
        store_->finishRun(id_, store::RunStatus::Failed, "ended without finish()", store::nowSeconds());
      } catch (const std::exception&) {
        // Nothing to report to in a destructor; `ipu runs gc` marks it killed later.
      }
    }
  }

  long long id() const { return id_; }
  std::string name() const { return training_ + "-" + std::to_string(id_); }
  const std::string& planHash() const { return planHash_; }
  const std::string& location() const { return location_; }

  void log(long long step, const py::kwargs& metrics) {
    if (finished_) raiseError("run " + std::to_string(id_) + " is finished: log() after finish()");
    if (step < 0) raiseError("a step is a whole number from 0");
    const double now = store::nowSeconds();
    std::vector<store::MetricPoint> points;
    for (const auto& [k, v] : metrics) {
      double value = 0;
      try {
        value = v.cast<double>();
      } catch (const py::cast_error&) {
        raiseError("metric `" + k.cast<std::string>() + "` is not a number");
      }
      // A diverged loss is kept as NaN and left out of summaries (run_store.h).
      points.push_back({k.cast<std::string>(), step, std::isfinite(value) ? value : std::nan(""), now});
    }
    guarded([&] {
      buffer_.insert(buffer_.end(), points.begin(), points.end());
      if (buffer_.size() >= kFlushPoints ||
          std::chrono::duration<double>(std::chrono::steady_clock::now() - lastFlush_).count() >= kFlushSeconds)
        writeBuffer();
    });
  }

  void flush() {
    guarded([&] { writeBuffer(); });
  }

  void finish(const std::string& status, const std::string& reason) {
    auto s = store::parseRunStatus(status);
    if (!s || *s == store::RunStatus::Running)
      raiseError("a run finishes `finished`, `failed`, `stopped`, `cancelled` or `killed`, not `" + status + "`");
    if (finished_) return;  // once: a `with` block's end after an explicit finish()
    guarded([&] {
      writeBuffer();
      store_->finishRun(id_, *s, reason, store::nowSeconds());
    });
    finished_ = true;
  }

 private:
  void writeBuffer() {
    if (!buffer_.empty()) store_->appendMetrics(id_, buffer_);
    else store_->heartbeat(id_, store::nowSeconds());
    buffer_.clear();
    lastFlush_ = std::chrono::steady_clock::now();
  }
  template <typename F>
  void guarded(F&& f) {
    storeCall(mutex_, std::forward<F>(f));
  }

  std::string location_, planHash_, training_;
  std::unique_ptr<store::RunStore> store_;
  long long id_ = 0;
  std::vector<store::MetricPoint> buffer_;
  std::chrono::steady_clock::time_point lastFlush_;
  bool finished_ = false;
  std::mutex mutex_;
};

std::unique_ptr<MeasuredRun> startRun(const std::string& script, const std::optional<Mapping>& mapping,
                                      const std::string& phase, const py::object& store, const std::string& run,
                                      const std::string& label, const std::map<std::string, std::string>& parameters) {
  session::Session s;
  auto file = s.readFile(script);
  if (!file) raiseDiagnostics(s.diagnostics(), s.sources(), "cannot read `" + script + "`");
  const bool varied = mapping && !mapping->asWritten;
  std::string runName = run, phaseName = phase;
  if (mapping) {
    requireScriptOf(*mapping, script);
    // The mapping names its training and phase; a phase given too must agree.
    if (!phase.empty() && phase != mapping->phase) raiseError("the mapping is of phase `" + mapping->phase + "`, not `" + phase + "`");
    if (!run.empty() && run != mapping->run) raiseError("the mapping is of training `" + mapping->run + "`, not `" + run + "`");
    runName = mapping->run;
    phaseName = mapping->phase;
  }
  runner::MeasuredPlan mp;
  {
    py::gil_scoped_release nogil;
    mp = runner::planMeasured(s, *file, runName, phaseName, varied ? &mapping->value : nullptr);
  }
  if (!mp.ok) raiseDiagnostics(mp.diagnostics, s.sources(), mp.problem.empty() ? "the script does not plan" : mp.problem);
  const ir::RunPlan& rp = mp.plan.runs[0];
  store::NewRun nr;
  nr.kind = store::RunKind::Run;
  nr.training = rp.name;
  nr.script = s.rootText();
  nr.planHash = runner::planHash(rp);
  nr.parameters = runner::runParameters(rp);
  for (const auto& [k, v] : parameters) {
    if (nr.parameters.count(k)) raiseError("parameter `" + k + "` is the plan's own");
    nr.parameters[k] = v;
  }
  nr.parameters[runner::kSourceParameter] = runner::kMeasuredSource;
  nr.parameters[runner::kMeasuredScriptParameter] = s.sources().file(*file).path();
  nr.parameters[runner::kMeasuredPhaseParameter] = rp.phases[mp.phase].name;
  if (varied) nr.parameters[runner::kMeasuredMappingParameter] = runner::mappingText(mapping->value);
  if (!label.empty()) nr.parameters[runner::kMeasuredLabelParameter] = label;
  nr.host = runner::hostName();
  nr.pid = static_cast<long long>(::getpid());
  nr.startedAt = store::nowSeconds();
  return std::make_unique<MeasuredRun>(storeLocation(store), nr);
}

}  // namespace

void registerMeasuredRun(py::module_& m) {
  py::class_<MeasuredRun>(m, "Run", "A measured run being recorded (ipu.start_run).")
      .def_property_readonly("id", &MeasuredRun::id)
      .def_property_readonly("name", &MeasuredRun::name)
      .def_property_readonly("plan_hash", &MeasuredRun::planHash)
      .def_property_readonly("store", &MeasuredRun::location)
      .def("log", &MeasuredRun::log, py::arg("step"),
           "Record metrics at a global step: run.log(step, loss=..., samples_per_s=...). Buffered, written at least every second.")
      .def("flush", &MeasuredRun::flush, "Write what log() buffered now.")
      .def("finish", &MeasuredRun::finish, py::arg("status") = "finished", py::arg("reason") = "",
           "Write what is buffered and record how the run ended.");
  m.def("start_run", &startRun, py::arg("script"), py::arg("mapping") = py::none(), py::arg("phase") = "",
        py::arg("store") = py::none(), py::arg("run") = "", py::arg("label") = "",
        py::arg("parameters") = std::map<std::string, std::string>(),
        "Start recording a training measured outside ipu, as the plan of `script`'s training (its first, or `run`) "
        "with its phase `phase` (the first by default) on `mapping` (as written by default).");
}

}  // namespace ipu::python
