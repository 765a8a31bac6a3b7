#include "interpreter/runner/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <unistd.h>

#include "interpreter/hooks/run_hooks.h"
#include "interpreter/runner/checkpoint_fetch.h"
#include "interpreter/runner/progress.h"
#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/run_directory.h"
#include "interpreter/runner/run_import.h"
#include "interpreter/runner/run_parameters.h"
#include "interpreter/runner/store_recorder.h"
#include "runtime/emulator/emulator.h"
#include "runtime/files/regular_file.h"
#include "runtime/ir/plan_hash.h"

namespace ipu::runner {

namespace fs = std::filesystem;

namespace {

// Several observers as one: hooks first (they may log metrics the record
// then writes, or stop the run), then the record, then the display.
class FanOut : public train::Observer {
 public:
  explicit FanOut(std::vector<train::Observer*> all) : all_(std::move(all)) {}
  train::PhaseDecision phaseStart(train::Source src, const train::PhaseInfo& info) override {
    train::PhaseDecision out;
    for (auto* o : all_) {
      train::PhaseDecision d = o->phaseStart(src, info);
      if (d.stop.stop && !out.stop.stop) out.stop = d.stop;
      if (!d.startFrom.empty() && out.startFrom.empty()) out.startFrom = d.startFrom;
    }
    return out;
  }
  train::StopRequest step(train::Source src, const train::StepInfo& info, std::map<std::string, double>& logged) override {
    train::StopRequest out;
    for (auto* o : all_) {
      train::StopRequest r = o->step(src, info, logged);
      if (r.stop && !out.stop) out = r;
    }
    return out;
  }
  train::StopRequest phaseEnd(train::Source src, const train::PhaseInfo& info) override {
    train::StopRequest out;
    for (auto* o : all_) {
      train::StopRequest r = o->phaseEnd(src, info);
      if (r.stop && !out.stop) out = r;
    }
    return out;
  }
  void checkpointWritten(train::Source src, const train::CheckpointInfo& info) override {
    for (auto* o : all_) o->checkpointWritten(src, info);
  }

 private:
  std::vector<train::Observer*> all_;
};

void report(session::Session& s, const emu::Error& e) {
  s.diagnostics().error(e.code, s.spanOf(e.where), e.message, e.help);
}

// Instance 0 tells the other instances of an MPI job where the run's
// checkpoints are (they resume from them), once, or that it stopped before
// the run began ("\x01"): whichever way `train` returns.
class CheckpointsAnnouncement {
 public:
  explicit CheckpointsAnnouncement(emu::Instances* instances) : instances_(instances) {}
  ~CheckpointsAnnouncement() { send(kNoRun); }
  void send(const std::string& directory) {
    if (instances_ == nullptr || sent_) return;
    sent_ = true;
    instances_->broadcast(directory);
  }
  static constexpr const char* kNoRun = "\x01";

 private:
  emu::Instances* instances_;
  bool sent_ = false;
};

// What every instance gives the emulator alike (instance 0 in train, the
// others in trainInstance).
emu::Options emulatorOptions(const TrainSettings& settings) {
  emu::Options options;
  options.instances = settings.instances;
  options.hostThreads = settings.threads;
  options.checkpointEvery = settings.checkpointEvery;
  options.stepLimit = settings.stepLimit;
  options.datasetDirectory = settings.scriptDirectory;
  options.initialWeights = settings.initialWeights;
  if (!settings.corpus.empty()) options.builtinCorpus = settings.corpus;
  return options;
}

// The checkpoints a resume of `dir` needs, from the store where the run
// directory lacks them (or holds another file): the latest at or before
// global step `atMost` (-1: any), and every phase's final checkpoint (a
// phase with `from` starts from it). A copy in the store that is damaged is
// an error, never loaded; a checkpoint whose bytes the store does not keep
// is left to the emulator, which resumes from what the directory has.
bool restoreCheckpoints(store::RunStore& st, long long runId, const RunDirectory& dir, long long atMost,
                        std::ostream& progress, std::string& problem) {
  std::optional<store::RunRecord> record;
  try {
    record = st.run(runId);
  } catch (const store::StoreError& e) {
    problem = "the checkpoints of this run could not be read from the store: " + std::string(e.what());
    return false;
  }
  if (!record) return true;
  const store::Artifact* latest = nullptr;
  std::vector<const store::Artifact*> needed;
  for (const auto& a : record->artifacts) {
    if (a.kind != "checkpoint" || a.step < 0) continue;
    const bool final = fs::path(a.path).filename() == "final.ipt";
    if (final) needed.push_back(&a);
    if (atMost >= 0 && a.step > atMost) continue;
    if (latest == nullptr || a.step > latest->step || (a.step == latest->step && final)) latest = &a;
  }
  if (latest != nullptr && std::find(needed.begin(), needed.end(), latest) == needed.end()) needed.push_back(latest);
  for (const store::Artifact* a : needed) {
    // Only into the run directory: a checkpoint the store keeps is named
    // relative to it.
    if (!a->stored || !staysInside(a->path)) continue;
    const std::string destination = dir.path() + "/" + a->path;
    const CheckpointFile f = ensureCheckpoint(st, *record, *a, destination);
    if (!f.ok) {
      problem = f.problem;
      return false;
    }
    if (f.fetched) progress << "fetched " << a->path << " of run " << record->name << " from the store\n";
  }
  return true;
}

}  // namespace

TrainResult train(session::Session& session, const ir::RunPlan& run, const TrainSettings& settings,
                  std::ostream& progress, bool progressIsTerminal) {
  TrainResult result;
  CheckpointsAnnouncement announce(settings.instances != nullptr && settings.instances->count() > 1 ? settings.instances.get() : nullptr);
  emu::Options options = emulatorOptions(settings);
  options.cancel = settings.cancel;

  // Before anything is written: can this host emulate it at all?
  auto fits = emu::checkHostMemory(run, emu::hostMemoryAvailable(), options);
  if (!fits) {
    report(session, fits.error());
    return result;
  }

  // The run directory: a new one, or the one to resume.
  std::string error;
  std::optional<RunDirectory> dir;
  const std::string planText = runner::planText(run);
  const std::string identity = ir::planHash(run);
  if (settings.resume) {
    std::string path = settings.resumeFrom.empty() ? RunDirectory::latest(settings.runsRoot, run.name) : settings.resumeFrom;
    if (path.empty()) {
      session.diagnostics().error(emu::code::kCheckpoint, session.spanOf(run.source),
                                  "there is no run of training `" + run.name + "` under `" + settings.runsRoot +
                                      "` to resume",
                                  "start it without --resume");
      return result;
    }
    bool busy = false;
    dir = RunDirectory::reopen(path, error, &busy);
    if (!dir) {
      session.diagnostics().error(emu::code::kCheckpoint, session.spanOf(run.source), error,
                                  busy ? "one run directory takes one writer at a time"
                                       : "give --resume=DIR a directory `ipu run` made (runs/" + run.name +
                                             "/<date-time>), or --resume alone for the latest one");
      return result;
    }
    for (const auto& repaired : dir->repairs()) progress << "note: " << repaired << "\n";
    {
      files::ReadResult before = files::readRegularFile(path + "/plan.json", std::uint64_t{1} << 30);
      if (!before.ok()) {
        session.diagnostics().error(emu::code::kCheckpoint, session.spanOf(run.source),
                                    "the run's plan record cannot be read: " + before.describe(path + "/plan.json"),
                                    "start a new run without --resume");
        return result;
      }
      // The same plan by content (runtime/ir/plan_hash.h), not by the bytes
      // plan.json was written as.
      const auto recorded = nlohmann::ordered_json::parse(before.text, nullptr, /*allow_exceptions=*/false);
      if (recorded.is_discarded()) {
        session.diagnostics().error(emu::code::kCheckpoint, session.spanOf(run.source),
                                    "the run's plan record `" + path + "/plan.json` is not JSON",
                                    "start a new run without --resume");
        return result;
      }
      if (ir::contentHash(recorded) != identity) {
        session.diagnostics().error(emu::code::kCheckpoint, session.spanOf(run.source),
                                    "the plan of training `" + run.name + "` changed since `" + path +
                                        "` started, so its checkpoints do not belong to it",
                                    "start a new run (without --resume), or restore the script as it was (" + path +
                                        "/script.ipu) and give the same `--set` values it ran with, if any "
                                        "(`ipu runs show` lists them as set.PATH)");
        return result;
      }
    }
  } else {
    dir = RunDirectory::create(settings.runsRoot, run.name, error);
  }
  if (!dir) {
    session.diagnostics().error(emu::code::kIo, session.spanOf(run.source), error,
                                "choose another place with --runs-dir");
    return result;
  }
  result.runDirectory = dir->path();
  if (!dir->resumed() &&
      (!dir->writeFile("script.ipu", settings.scriptText, error) || !dir->writeFile("plan.json", planText, error))) {
    session.diagnostics().error(emu::code::kIo, session.spanOf(run.source), error);
    return result;
  }
  options.checkpointDirectory = dir->checkpoints();
  options.resume = settings.resume;
  // Never past the last step whose record is whole (a line torn by a crash).
  if (dir->resumed()) options.resumeAtMost = dir->completeSteps();
  announce.send(options.checkpointDirectory);
  // What a checkpoint belongs to.
  options.planIdentity = identity;

  // The run store: a new record, or the one of the run directory resumed.
  std::unique_ptr<StoreRecorder> recorder;
  if (settings.store != nullptr) {
    try {
      const std::string absolute = artifactPath(dir->path());
      std::optional<long long> id;
      if (dir->resumed()) {
        id = settings.store->findByRunDirectory(absolute);
        // A run recorded without the store: bring in what it recorded first.
        if (!id) importRunDirectories(*settings.store, {dir->path()});
        id = settings.store->findByRunDirectory(absolute);
      }
      if (!id) {
        store::NewRun nr;
        nr.kind = store::RunKind::Run;
        nr.training = run.name;
        nr.name = settings.name;
        nr.script = settings.scriptText;
        nr.planHash = identity;
        nr.parameters = runParameters(run);
        for (const auto& [k, v] : settings.parameters) nr.parameters[k] = v;
        nr.host = hostName();
        nr.pid = static_cast<long long>(::getpid());
        nr.startedAt = store::nowSeconds();
        id = settings.store->createRun(nr);
        settings.store->addArtifact(*id, {"run_directory", absolute});
        if (!settings.tags.empty()) settings.store->addTags(*id, settings.tags);
      }
      recorder = std::make_unique<StoreRecorder>(*settings.store, *id, dir->path(), dir->resumed(), &progress,
                                                 settings.artifacts);
      result.storeRunId = *id;
    } catch (const store::StoreError& e) {
      result.storeFailure = "the run store could not start this run's record (" + std::string(e.what()) +
                            "); the run directory has every step: `ipu runs import " + dir->path() +
                            "` records it once the store works again";
    }
  }

  // Resuming where the run directory lacks the checkpoints it continues
  // from (another host, no shared file system): fetched from the store.
  if (dir->resumed() && result.storeRunId != 0) {
    std::string problem;
    if (!restoreCheckpoints(*settings.store, result.storeRunId, *dir, options.resumeAtMost, progress, problem)) {
      session.diagnostics().error(emu::code::kCheckpoint, session.spanOf(run.source), problem);
      return result;
    }
  }

  // Listeners: the training's hooks, the record, the store, the display.
  hooks::RunHooks runHooks(*session.hooks(), run, train::Source::Emulator);
  runHooks.setSweepTrial(settings.sweepTrial);
  options.policies = runHooks.policies();
  Progress display(progress, progressIsTerminal, base::Painter(base::shouldColor(settings.color, 2)));
  if (!settings.progressLine.empty()) display.oneLine(settings.progressLine);
  std::vector<train::Observer*> observers{&runHooks, &*dir};
  if (recorder) observers.push_back(recorder.get());
  observers.push_back(&display);
  FanOut all(observers);
  options.observer = &all;
  ir::Json start = ir::Json::object();
  start["event"] = settings.resume ? "resumed" : "started";
  if (!settings.initialWeights.empty()) start["initial_weights"] = settings.initialWeights;
  dir->event(std::move(start));

  const auto t0 = std::chrono::steady_clock::now();
  emu::Expected<emu::RunOutcome> outcome = emu::run(run, options);
  if (settings.progressLine.empty()) display.finishLine();
  else display.eraseLine();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  ir::Json summary = ir::Json::object();
  summary["training"] = run.name;
  summary["seconds"] = seconds;
  if (!outcome && !dir->resumed() && !dir->stepsRecorded()) {
    // Refused before the first step (a layer without a kernel, a missing
    // dataset): nothing to keep, so no run directory is left behind.
    report(session, outcome.error());
    std::error_code ec;
    fs::remove_all(dir->path(), ec);
    result.runDirectory.clear();
    if (recorder) {
      recorder.reset();
      try {
        settings.store->deleteRun(result.storeRunId);
      } catch (const store::StoreError&) {
      }
      result.storeRunId = 0;
    }
    return result;
  }
  if (!outcome && dir->resumed() && !dir->stepsRecorded()) {
    // A resume refused before its first step (no checkpoint, a damaged one):
    // the record stays as the earlier run left it.
    report(session, outcome.error());
    return result;
  }
  if (!outcome) {
    report(session, outcome.error());
    summary["status"] = "failed";
    summary["error"] = outcome.error().code + ": " + outcome.error().message;
  } else {
    const emu::RunOutcome& o = outcome.value();
    result.status = o.status == emu::Status::Completed   ? TrainResult::Status::Completed
                    : o.status == emu::Status::Cancelled ? TrainResult::Status::Cancelled
                                                         : TrainResult::Status::Stopped;
    result.stopReason = o.stopReason;
    std::string cancelReason = "Ctrl-C";
    if (result.status == TrainResult::Status::Cancelled && settings.cancelCause) {
      const TrainSettings::CancelCause cause = settings.cancelCause();
      if (cause.earlyStop) {
        result.status = TrainResult::Status::Stopped;
        result.stopReason = cause.reason;
      } else if (!cause.reason.empty()) {
        cancelReason = cause.reason;
      }
    }
    result.cancelReason = cancelReason;
    // A hook that failed stopped the run: that is a failure (reported by the hooks).
    if (runHooks.failed()) result.status = TrainResult::Status::Failed;
    summary["status"] = result.status == TrainResult::Status::Completed ? "completed"
                        : result.status == TrainResult::Status::Cancelled ? "cancelled"
                        : result.status == TrainResult::Status::Stopped   ? "stopped"
                                                                         : "failed";
    summary["stop_reason"] = result.stopReason.empty() ? ir::Json() : ir::Json(result.stopReason);
    ir::Json phases = ir::Json::array();
    for (const auto& p : o.phases) {
      ir::Json pj = ir::Json::object();
      pj["name"] = p.name;
      pj["steps"] = p.steps;
      pj["last_loss"] = ir::Json(p.lastLoss);
      ir::Json ev = ir::Json::object();
      for (const auto& [k, v] : p.evaluation) ev[k] = ir::Json(v);
      pj["evaluation"] = std::move(ev);
      pj["checkpoint"] = p.checkpoint.empty() ? ir::Json() : ir::Json(p.checkpoint);
      phases.push(std::move(pj));
    }
    summary["phases"] = std::move(phases);
    if (!o.instanceBytesSent.empty()) {
      // What crossed instances against what the plan says (docs/run.md, "Across processes and hosts").
      ir::Json in = ir::Json::object();
      in["count"] = static_cast<long long>(o.instanceBytesSent.size());
      auto list = [](const std::vector<double>& v) {
        ir::Json a = ir::Json::array();
        for (double x : v) a.push(ir::Json(x));
        return a;
      };
      in["bytes_sent"] = list(o.instanceBytesSent);
      in["bytes_received"] = list(o.instanceBytesReceived);
      in["planned_bytes_sent"] = list(o.instanceBytesPlanned);
      summary["instances"] = std::move(in);
    }
  }
  if (!dir->writeFile("summary.json", summary.dump() + "\n", error) || dir->ioFailed()) {
    session.diagnostics().error(emu::code::kIo, session.spanOf(run.source),
                                "the run record in `" + dir->path() + "` could not be written completely" +
                                    (error.empty() ? std::string() : ": " + error));
    result.status = TrainResult::Status::Failed;
  }
  if (recorder) {
    const store::RunStatus status = !outcome ? store::RunStatus::Failed
                                    : result.status == TrainResult::Status::Completed ? store::RunStatus::Finished
                                    : result.status == TrainResult::Status::Cancelled ? store::RunStatus::Cancelled
                                    : result.status == TrainResult::Status::Stopped   ? store::RunStatus::Stopped
                                                                                      : store::RunStatus::Failed;
    std::string reason = !outcome ? outcome.error().code + ": " + outcome.error().message : result.stopReason;
    if (result.status == TrainResult::Status::Cancelled) reason = result.cancelReason.empty() ? "Ctrl-C" : result.cancelReason;
    if (status == store::RunStatus::Failed && reason.empty()) reason = "a hook failed";
    recorder->finish(status, reason);
    if (recorder->failed()) result.storeFailure = recorder->failure();
  }
  return result;
}

TrainResult trainInstance(session::Session& session, const ir::RunPlan& run, const TrainSettings& settings, std::string& error) {
  TrainResult result;
  emu::Options options = emulatorOptions(settings);
  options.planIdentity = ir::planHash(run);
  const std::string checkpoints = settings.instances->broadcast(std::string());
  if (checkpoints == CheckpointsAnnouncement::kNoRun) {
    // Instance 0 refused the run before it began, and said why.
    result.status = TrainResult::Status::Failed;
    return result;
  }
  options.checkpointDirectory = checkpoints;
  options.resume = settings.resume;
  // The hooks' policies (a Lua learning rate or loss scale) shape every
  // step, so they run here too; the hooks as observers run on instance 0.
  hooks::RunHooks runHooks(*session.hooks(), run, train::Source::Emulator);
  runHooks.setSweepTrial(settings.sweepTrial);
  options.policies = runHooks.policies();
  emu::Expected<emu::RunOutcome> outcome = emu::run(run, options);
  if (!outcome) {
    error = outcome.error().code + ": " + outcome.error().message;
    return result;
  }
  result.status = outcome->status == emu::Status::Completed   ? TrainResult::Status::Completed
                  : outcome->status == emu::Status::Cancelled ? TrainResult::Status::Cancelled
                                                              : TrainResult::Status::Stopped;
  return result;
}

}  // namespace ipu::runner
