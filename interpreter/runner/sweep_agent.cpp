#include "interpreter/runner/sweep_agent.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "interpreter/check/sweeps.h"
#include "interpreter/store/sweep_records.h"
#include "interpreter/runner/estimate_record.h"
#include "interpreter/runner/sweep_start.h"
#include "interpreter/runner/train.h"
#include "interpreter/session/session.h"
#include "interpreter/sweep/hyperband.h"
#include "interpreter/sweep/propose.h"

namespace ipu::runner {

namespace {

using store::TrialState;

const char* const kPredicted[] = {"samples_per_s",        "tokens_per_s",      "step_time_s",
                                  "pipeline_utilisation", "peak_memory_bytes", "time_to_train_s"};

// How many fresh draws a random or Bayesian proposal gets before the sweep is
// taken to have nothing new left (a small discrete space, fully tried).
constexpr std::uint64_t kRedraws = 64;

// The store's trials as the proposers see them (sweep/propose.h). Queued and
// running trials are in flight. A failed or killed trial is a failed one for
// random and Bayesian search (imputed as the worst value); for a grid its
// cell is taken: the store keeps one row per cell, and failed cells are
// queued again when the sweep is resumed (`ipu sweep FILE`), not proposed anew.
std::vector<sweep::Trial> history(const store::SweepRecord& sw, const std::vector<store::TrialRecord>& trials) {
  std::vector<sweep::Trial> out;
  out.reserve(trials.size());
  for (const auto& t : trials) {
    sweep::Trial h;
    h.assignment = t.assignment;
    if (std::isfinite(t.metric)) h.value = t.metric;
    switch (t.state) {
      case TrialState::Finished: h.state = sweep::TrialState::Finished; break;
      case TrialState::Stopped: h.state = sweep::TrialState::Stopped; break;
      case TrialState::Queued:
      case TrialState::Running: h.state = sweep::TrialState::Running; break;
      case TrialState::Failed:
      case TrialState::Killed:
        h.state = sw.spec.method == sweep::Method::Grid ? sweep::TrialState::Running : sweep::TrialState::Failed;
        break;
    }
    out.push_back(std::move(h));
  }
  return out;
}

// The proposer the store calls inside its claim. A draw whose key is an
// existing trial's (random and Bayesian search over lists can repeat one) is
// drawn again from another stream, deterministically.
std::optional<sweep::Assignment> proposeNext(const store::SweepRecord& sw, const std::vector<store::TrialRecord>& trials) {
  const std::vector<sweep::Trial> past = history(sw, trials);
  std::set<std::string> keys;
  for (const auto& t : trials) keys.insert(t.key);
  const auto index = static_cast<std::uint64_t>(trials.size());
  for (std::uint64_t redraw = 0; redraw < kRedraws; ++redraw) {
    sweep::Proposal p = sweep::propose(sw.spec, past, index + (redraw << 32));
    if (p.kind == sweep::Proposal::Kind::Invalid)
      throw std::runtime_error("sweep `" + sw.name + "` cannot be searched: " + p.problem);
    if (p.kind == sweep::Proposal::Kind::Exhausted) return std::nullopt;
    if (!keys.count(sweep::assignmentKey(p.assignment))) return std::move(p.assignment);
    if (sw.spec.method == sweep::Method::Grid) return std::nullopt;  // cannot happen: the grid skips taken cells
  }
  return std::nullopt;
}

std::string formatNumber(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string assignmentText(const sweep::Assignment& a) {
  std::string out;
  for (const auto& [path, value] : a) out += (out.empty() ? "" : " ") + path + "=" + value.shown();
  return out;
}

std::string firstError(const base::Diagnostics& d) {
  for (const auto& x : d.all())
    if (x.severity == base::Severity::Error) return x.code + ": " + x.message;
  return "the trial's script has errors";
}

std::string defaultAgentId() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  return std::string(host) + ":" + std::to_string(static_cast<long long>(::getpid()));
}

// Sends the trial's heartbeat every `every` seconds until stopped; sets
// `cancel` (which the training polls) when the lease is lost or the sweep is
// cancelled, or when `interrupt` is set.
class Heartbeat {
 public:
  // `judge`, when set, is asked every `judgeEvery` seconds whether to stop
  // the trial early (hyperband); it runs on the heartbeat's thread.
  Heartbeat(store::SweepStore& st, const store::TrialLease& lease, double every, const std::atomic<bool>* interrupt,
            std::function<bool()> judge = {}, double judgeEvery = 1)
      : store_(st), lease_(lease), every_(every), interrupt_(interrupt), judge_(std::move(judge)),
        judgeEvery_(judgeEvery), thread_([this] { loop(); }) {}
  ~Heartbeat() { stop(); }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  const std::atomic<bool>& cancel() const { return cancel_; }
  store::LeaseState state() const { return state_.load(); }
  bool interrupted() const { return interrupted_.load(); }
  bool judgedStop() const { return judgedStop_.load(); }
  std::string storeError() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

 private:
  void loop() {
    auto last = std::chrono::steady_clock::now();
    auto lastJudged = last;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      // Short waits so an interrupt stops the training promptly.
      wake_.wait_for(lock, std::chrono::milliseconds(200));
      if (done_) break;
      if (interrupt_ != nullptr && interrupt_->load()) {
        interrupted_ = true;
        cancel_ = true;
      }
      if (judge_ && !cancel_ && std::chrono::steady_clock::now() - lastJudged >= std::chrono::duration<double>(judgeEvery_)) {
        lastJudged = std::chrono::steady_clock::now();
        lock.unlock();
        try {
          if (judge_()) {
            judgedStop_ = true;
            cancel_ = true;
          }
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> relock(mutex_);
          error_ = e.what();
        }
        lock.lock();
        if (done_) break;
      }
      if (std::chrono::steady_clock::now() - last < std::chrono::duration<double>(every_)) continue;
      last = std::chrono::steady_clock::now();
      lock.unlock();
      try {
        store::LeaseState s = store_.heartbeatTrial(lease_, store::nowSeconds());
        if (s != store::LeaseState::Held) {
          state_ = s;
          cancel_ = true;
        }
      } catch (const std::exception& e) {
        // A store that fails now and then (a busy SQLite file, a dropped
        // connection) is retried at the next beat; the trial goes on.
        std::lock_guard<std::mutex> relock(mutex_);
        error_ = e.what();
      }
      lock.lock();
    }
  }

  store::SweepStore& store_;
  store::TrialLease lease_;
  double every_;
  const std::atomic<bool>* interrupt_;
  std::function<bool()> judge_;
  double judgeEvery_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> judgedStop_{false};
  std::atomic<bool> interrupted_{false};
  std::atomic<store::LeaseState> state_{store::LeaseState::Held};
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::string error_;
  std::thread thread_;  // last: started once the rest is ready
};

// Hyperband for a trial being trained (sweep/hyperband.h): finds the trial's
// run in the store (this process's running run of the training, started
// since the trial), links it to the trial so that other agents see its
// curve, and judges the trial on the metric's values by step in the runs of
// every trial of the sweep (the training's recorder writes them about once a
// second).
class EarlyStop {
 public:
  EarlyStop(store::SweepStore& sweeps, store::RunStore& runs, const store::SweepRecord& sw, const store::Claim& claim,
            double since)
      : sweeps_(sweeps), runs_(runs), sw_(sw), claim_(claim), since_(since), pid_(static_cast<long long>(::getpid())),
        host_(hostName()) {}

  bool operator()() {
    if (!runId_) {
      for (const auto& r : runs_.listRuns())
        if (r.kind == store::RunKind::Run && r.status == store::RunStatus::Running && r.pid == pid_ &&
            r.host == host_ && r.training == sw_.spec.training && r.startedAt >= since_ - 1 &&
            (!runId_ || r.id > *runId_))
          runId_ = r.id;
      if (!runId_) return false;
      sweeps_.attachRun(claim_.lease, *runId_);
    }
    std::vector<store::TrialRecord> trials = sweeps_.trials(sw_.id);
    std::vector<sweep::Curve> curves;
    std::size_t mine = trials.size();
    for (const auto& t : trials) {
      const bool self = t.index == claim_.trial.index;
      if (self) mine = curves.size();
      std::optional<long long> id = self ? runId_ : t.runId;
      sweep::Curve c;
      if (id)
        for (const auto& p : runs_.metricHistory(*id, sw_.spec.metric.name)) c.emplace_back(p.step, p.value);
      std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      curves.push_back(std::move(c));
    }
    if (mine == trials.size() || curves[mine].empty()) return false;
    sweep::StopDecision d = sweep::hyperbandDecision(sw_.spec.earlyTerminate, sw_.spec.metric.goal, curves, mine,
                                                     curves[mine].back().first);
    if (!d.stop) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    reason_ = d.reason.empty() ? "stopped early by hyperband at step " + std::to_string(d.bracket) : d.reason;
    return true;
  }
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return reason_;
  }

 private:
  store::SweepStore& sweeps_;
  store::RunStore& runs_;
  const store::SweepRecord& sw_;
  const store::Claim& claim_;
  double since_;
  long long pid_;
  std::string host_;
  std::optional<long long> runId_;
  mutable std::mutex mutex_;
  std::string reason_;
};

struct TrialRun {
  store::TrialOutcome outcome;
  bool lost = false;         // the lease was lost: write nothing
  bool interrupted = false;  // the agent was interrupted
};

// The last value of `key` in run `runId`, or NaN.
double metricOf(store::RunStore& runStore, long long runId, const std::string& key) {
  std::optional<store::RunRecord> r = runStore.run(runId);
  if (!r) return store::kNoTime;
  auto it = r->metrics.find(key);
  if (it == r->metrics.end() || it->second.count == 0) return store::kNoTime;
  return it->second.last;
}

// The hooks' view of the trial (ctx.sweep, ctx.trial).
hooks::SweepTrial hookView(const store::SweepRecord& sw, const store::TrialRecord& trial, std::optional<double> best,
                           const std::string& startFrom) {
  hooks::SweepTrial h;
  h.sweep = sw.name;
  h.method = sweep::methodName(sw.spec.method);
  h.metric = sw.spec.metric.name;
  h.goal = sweep::goalName(sw.spec.metric.goal);
  h.best = best;
  h.index = trial.index;
  h.key = trial.key;
  for (const auto& [path, v] : trial.assignment) {
    switch (v.kind) {
      case sweep::ParamValue::Kind::Number: h.params.emplace_back(path, hooks::CtxValue::ofNumber(v.number)); break;
      case sweep::ParamValue::Kind::Integer:
        h.params.emplace_back(path, hooks::CtxValue::ofInteger(static_cast<long long>(v.number)));
        break;
      case sweep::ParamValue::Kind::Boolean: h.params.emplace_back(path, hooks::CtxValue::ofBoolean(v.number != 0)); break;
      case sweep::ParamValue::Kind::Name:
      case sweep::ParamValue::Kind::Text: h.params.emplace_back(path, hooks::CtxValue::ofString(v.text)); break;
    }
  }
  h.startFrom = startFrom;
  return h;
}

// What instance 0 sends the other instances of an agent's MPI job before a
// trial (`ipu agent --instances N`), and in place of one when it leaves.
constexpr const char* kNoMoreTrials = "\x02";

std::string trialMessage(const store::SweepRecord& sw, const store::TrialRecord& trial, std::optional<double> best,
                         const std::string& scriptPath, const std::string& initialWeights) {
  nlohmann::json j;
  j["sweep"] = sw.name;
  j["spec"] = store::toJson(sw.spec);
  j["script"] = sw.script;
  j["script_path"] = scriptPath;
  j["index"] = trial.index;
  j["key"] = trial.key;
  j["assignment"] = store::toJson(trial.assignment);
  j["best"] = best ? nlohmann::json(*best) : nlohmann::json();
  j["initial_weights"] = initialWeights;
  return j.dump();
}

// `start`: where the trial's weights start (a sweep with `from:`), else null.
TrialRun runTrial(store::SweepStore& sweepStore, store::RunStore& runStore, const store::SweepRecord& sw,
                  const store::Claim& claim, const AgentSettings& settings, const TrialStart* start,
                  std::optional<double> best, std::ostream& progress) {
  TrialRun out;
  store::TrialOutcome& o = out.outcome;
  o.state = TrialState::Failed;
  if (start != nullptr && start->status != TrialStart::Status::Ready) {
    o.reason = "no checkpoint to start from: " + start->problem;
    return out;
  }
  session::Session s;
  const base::FileId file = s.addSource(settings.scriptPath, sw.script);
  check::Overrides overrides;
  overrides.training = sw.spec.training;
  overrides.values = claim.trial.assignment;
  s.setOverrides(overrides);
  const bool predicted = isPredictedMetric(sw.spec.metric.name);

  EarlyStop early(sweepStore, runStore, sw, claim, store::nowSeconds());
  std::function<bool()> judge;
  if (!predicted && sw.spec.earlyTerminate.enabled) judge = [&early] { return early(); };
  Heartbeat beat(sweepStore, claim.lease, settings.heartbeatEvery, settings.interrupt, judge);
  // A trial trains on the emulator unless its metric is predicted.
  if (!predicted) s.setPurpose(session::Purpose::Run);
  const ir::ExecutionPlan* plan = predicted ? nullptr : s.plan(file, /*requireRuns=*/true);
  const cost::Estimate* estimate = predicted ? s.estimate(file) : nullptr;
  if (predicted) plan = s.lastPlan();
  if (s.diagnostics().hasErrors() || plan == nullptr || (predicted && estimate == nullptr)) {
    o.reason = firstError(s.diagnostics());
    return out;
  }
  auto run = std::find_if(plan->runs.begin(), plan->runs.end(),
                          [&](const ir::RunPlan& r) { return r.name == sw.spec.training; });
  if (run == plan->runs.end()) {
    o.reason = "the script does not `run " + sw.spec.training + "`: there is no trial to train";
    return out;
  }
  const std::size_t runIndex = static_cast<std::size_t>(run - plan->runs.begin());

  if (predicted) {
    // The trial's run alone: an estimate of the other runs is not this trial.
    ir::ExecutionPlan one;
    one.runs.push_back(*run);
    cost::Estimate mine;
    if (runIndex < estimate->runs.size()) mine.runs.push_back(estimate->runs[runIndex]);
    std::vector<long long> ids = recordEstimate(runStore, one, mine, sw.script);
    if (ids.empty()) {
      o.reason = "the trial's run could not be estimated";
      return out;
    }
    o.runId = ids.front();
    for (const auto& p : mine.runs.front().phases)
      if (!p.fits) {
        o.reason = "phase `" + p.name + "` does not fit in the IPUs' memory";
        return out;
      }
  } else {
    TrainSettings t;
    t.runsRoot = settings.runsRoot;
    t.threads = settings.threads;
    t.stepLimit = settings.stepLimit;
    t.cancel = &beat.cancel();
    // The run's record says why the trial ended early: hyperband's stop is a
    // result (`stopped`), not a Ctrl-C.
    t.cancelCause = [&] {
      TrainSettings::CancelCause c;
      if (beat.judgedStop() && !beat.interrupted() && beat.state() == store::LeaseState::Held) {
        c.earlyStop = true;
        c.reason = early.reason();
      } else if (beat.state() == store::LeaseState::Cancelled) {
        c.reason = "the sweep was cancelled";
      } else if (beat.state() == store::LeaseState::Lost) {
        c.reason = "the trial's lease was lost (another agent took it over)";
      } else {
        c.reason = "the agent was interrupted (Ctrl-C)";
      }
      return c;
    };
    t.scriptText = sw.script;
    t.scriptDirectory = std::filesystem::absolute(settings.scriptPath).parent_path().string();
    t.color = base::ColorMode::Never;
    t.store = &runStore;
    t.artifacts = settings.artifacts;
    t.parameters["sweep"] = sw.name;
    t.parameters["sweep.trial"] = std::to_string(claim.trial.index);
    if (start != nullptr) {
      // Where its weights started, for `ipu runs` (a parameter and a tag).
      t.initialWeights = start->checkpoint;
      t.parameters["start_from"] = start->checkpoint;
      t.parameters["start_from.run"] = std::to_string(start->runId);
      if (start->trial >= 0) t.parameters["start_from.trial"] = std::to_string(start->trial);
      t.tags.push_back("from:" + start->runName);
    }
    const hooks::SweepTrial view = hookView(sw, claim.trial, best, start != nullptr ? start->checkpoint : "");
    t.sweepTrial = &view;
    // One line per trial is the agent's display; on a terminal, while the
    // trial trains, one more line redrawn in place (erased at the end).
    std::ostream quiet(nullptr);
    TrainResult r;
    if (settings.instances != nullptr && settings.instances->count() > 1) {
      // The other instances train it with this one (followTrials).
      settings.instances->broadcast(trialMessage(sw, claim.trial, best, settings.scriptPath, t.initialWeights));
      t.instances = settings.instances;
    }
    if (settings.progressIsTerminal) {
      t.progressLine = "trial " + std::to_string(claim.trial.index) + " [" + assignmentText(claim.trial.assignment) + "]";
      t.color = settings.color;
      r = train(s, *run, t, progress, true);
    } else {
      r = train(s, *run, t, quiet, false);
    }
    if (r.storeRunId != 0) o.runId = r.storeRunId;
    beat.stop();
    out.interrupted = beat.interrupted();
    if (beat.state() == store::LeaseState::Lost) {
      out.lost = true;
      return out;
    }
    switch (r.status) {
      case TrainResult::Status::Completed: break;
      case TrainResult::Status::Stopped:
        // A hook or hyperband stopped the training: a result with the metric it reached.
        o.state = TrialState::Stopped;
        o.reason = r.stopReason.empty() ? "a hook stopped the training" : r.stopReason;
        break;
      case TrainResult::Status::Cancelled:
        if (beat.judgedStop() && !beat.interrupted() && beat.state() == store::LeaseState::Held) {
          // Stopped by hyperband: a result, with the metric it had reached.
          o.state = TrialState::Stopped;
          o.reason = early.reason();
          break;
        }
        o.state = TrialState::Killed;
        o.reason = beat.state() == store::LeaseState::Cancelled ? "the sweep was cancelled" : "the agent was interrupted";
        return out;
      case TrainResult::Status::Failed:
        o.reason = s.diagnostics().hasErrors() ? firstError(s.diagnostics()) : "the training failed";
        return out;
    }
    // A record the store did not complete has no metric to judge the trial by.
    if (!o.runId || !r.storeFailure.empty()) {
      o.state = TrialState::Failed;
      o.reason = "the run store did not record the training" + (r.storeFailure.empty() ? "" : ": " + r.storeFailure);
      return out;
    }
  }
  beat.stop();
  if (beat.state() == store::LeaseState::Lost) {
    out.lost = true;
    return out;
  }
  o.metric = metricOf(runStore, *o.runId, sw.spec.metric.name);
  // A trial stopped early (a hook, hyperband) is a result even when it ended
  // before its metric was first recorded (an `eval.` key, mid-phase).
  if (!std::isfinite(o.metric) && o.state != TrialState::Stopped) {
    o.state = TrialState::Failed;
    o.reason = "the trial's run recorded no finite `" + sw.spec.metric.name + "`";
    if (!predicted && sw.spec.metric.name.rfind("eval.", 0) == 0)
      o.reason += " (is the training's dataset evaluated? the run's `eval.` keys are its held-out metrics)";
    return out;
  }
  if (o.state != TrialState::Stopped) o.state = TrialState::Finished;
  return out;
}

}  // namespace

void endTrials(emu::Instances& instances) { instances.broadcast(kNoMoreTrials); }

void followTrials(emu::Instances& instances, const AgentSettings& settings) {
  static const std::atomic<bool> never{false};
  for (;;) {
    const std::string message = instances.broadcast(std::string());
    if (message == kNoMoreTrials) return;
    store::SweepRecord sw;
    store::TrialRecord trial;
    std::optional<double> best;
    std::string scriptPath, initialWeights;
    try {
      const nlohmann::json j = nlohmann::json::parse(message);
      sw.name = j.at("sweep").get<std::string>();
      sw.spec = store::specFromJson(j.at("spec"), "the trial instance 0 sent");
      sw.script = j.at("script").get<std::string>();
      scriptPath = j.at("script_path").get<std::string>();
      trial.index = j.at("index").get<long long>();
      trial.key = j.at("key").get<std::string>();
      trial.assignment = store::assignmentFromJson(j.at("assignment"), "the trial instance 0 sent");
      if (j.at("best").is_number()) best = j.at("best").get<double>();
      initialWeights = j.at("initial_weights").get<std::string>();
    } catch (const std::exception& e) {
      instances.fail(std::string("cannot read the trial instance 0 sent: ") + e.what());
    }
    // The trial as instance 0 plans it: the same script, values and start.
    session::Session s;
    const base::FileId file = s.addSource(scriptPath, sw.script);
    check::Overrides overrides;
    overrides.training = sw.spec.training;
    overrides.values = trial.assignment;
    s.setOverrides(overrides);
    s.setPurpose(session::Purpose::Run);
    const ir::ExecutionPlan* plan = s.plan(file, /*requireRuns=*/true);
    if (s.diagnostics().hasErrors() || plan == nullptr)
      instances.fail("trial " + std::to_string(trial.index) + " does not plan here: " + firstError(s.diagnostics()));
    auto run = std::find_if(plan->runs.begin(), plan->runs.end(),
                            [&](const ir::RunPlan& r) { return r.name == sw.spec.training; });
    if (run == plan->runs.end()) instances.fail("the trial's script does not `run " + sw.spec.training + "`");
    TrainSettings t;
    t.threads = settings.threads;
    t.stepLimit = settings.stepLimit;
    // Instance 0 decides when a trial stops (its heartbeat, hyperband,
    // Ctrl-C): every instance stops at the same step with it.
    t.cancel = settings.interrupt != nullptr ? settings.interrupt : &never;
    t.scriptText = sw.script;
    t.scriptDirectory = std::filesystem::absolute(scriptPath).parent_path().string();
    t.initialWeights = initialWeights;
    const hooks::SweepTrial view = hookView(sw, trial, best, initialWeights);
    t.sweepTrial = &view;
    // Held by the caller's shared pointer for the job's length.
    t.instances = std::shared_ptr<emu::Instances>(&instances, [](emu::Instances*) {});
    std::string error;
    const TrainResult r = trainInstance(s, *run, t, error);
    if (r.status == TrainResult::Status::Failed && !error.empty())
      instances.fail("trial " + std::to_string(trial.index) + ": " + error);
  }
}

bool isPredictedMetric(const std::string& name) {
  return std::find(std::begin(kPredicted), std::end(kPredicted), name) != std::end(kPredicted);
}

const char* endingName(AgentResult::Ending e) {
  switch (e) {
    case AgentResult::Ending::Done: return "done";
    case AgentResult::Ending::Count: return "count";
    case AgentResult::Ending::Cancelled: return "cancelled";
    case AgentResult::Ending::Interrupted: return "interrupted";
  }
  return "done";
}

AgentResult runAgent(store::SweepStore& sweepStore, store::RunStore& runStore, long long sweepId,
                     const AgentSettings& settings, std::ostream& progress) {
  AgentResult result;
  store::ClaimOptions options;
  options.agent = settings.agentId.empty() ? defaultAgentId() : settings.agentId;
  options.staleAfter = settings.staleAfter;
  options.maxAttempts = settings.maxAttempts;
  auto interrupted = [&] { return settings.interrupt != nullptr && settings.interrupt->load(); };
  // Waiting (a paused sweep, a sweep whose `from:` has no trial yet): the
  // store is asked again after a delay that doubles up to waitAtMost, and
  // the wait is said once, when it starts.
  double delay = 0;
  std::string waitingFor;
  auto wait = [&](const std::string& why) {
    if (why != waitingFor) {
      progress << why << "\n" << std::flush;
      waitingFor = why;
      delay = 0;
    }
    delay = std::min(settings.waitAtMost, delay <= 0 ? settings.waitFirst : delay * 2);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(delay);
    while (!interrupted() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  };
  for (;;) {
    if (interrupted()) {
      result.ending = AgentResult::Ending::Interrupted;
      return result;
    }
    if (settings.count > 0 && result.trials >= settings.count) {
      result.ending = AgentResult::Ending::Count;
      return result;
    }
    // A sweep starting `from:` another run: no trial before there is a
    // checkpoint to start from (every trial would fail the same way).
    const std::optional<store::SweepRecord> before = sweepStore.status(sweepId).sweep;
    if (before && before->state == store::SweepState::Running && before->spec.from) {
      TrialStart s = resolveTrialStart(*before->spec.from, sweepStore, runStore);
      if (s.status == TrialStart::Status::Wait) {
        wait("sweep " + before->name + ": waiting for a trial to start from: " + s.problem + " (Ctrl-C leaves)");
        continue;
      }
      if (s.status == TrialStart::Status::Unavailable)
        throw std::runtime_error(unavailableStart(before->name, *before->spec.from, s));
    }
    store::Claim claim = sweepStore.claimTrial(sweepId, options, proposeNext, store::nowSeconds());
    switch (claim.outcome) {
      case store::ClaimOutcome::Trial: break;
      case store::ClaimOutcome::Wait:
        // Other agents' trials are running; one may fail and be queued again.
        for (int i = 0; i < 10 && !interrupted(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      case store::ClaimOutcome::Paused: {
        const std::string name = before ? before->name : std::to_string(sweepId);
        wait("sweep " + name + " is paused: waiting until it is resumed (`ipu sweep resume " + name +
             "`) or cancelled (Ctrl-C leaves)");
        continue;
      }
      case store::ClaimOutcome::Cancelled: result.ending = AgentResult::Ending::Cancelled; return result;
      case store::ClaimOutcome::Finished: result.ending = AgentResult::Ending::Done; return result;
    }
    waitingFor.clear();
    // The sweep as it is now (its spec and script may have been replaced by a
    // resume), and its best metric so far (for the hooks' ctx.sweep.best).
    const store::SweepStatus current = sweepStore.status(sweepId);
    const std::optional<store::SweepRecord> sw = current.sweep;
    const auto started = std::chrono::steady_clock::now();
    // Where its weights start, resolved now: the best trial of the sweep it
    // starts from may have changed since the last trial.
    std::optional<TrialStart> start;
    if (sw->spec.from) {
      start = resolveTrialStart(*sw->spec.from, sweepStore, runStore);
      // Its file on this host, fetched from the store if it is not here.
      fetchTrialStart(*start, runStore, settings.runsRoot);
    }
    TrialRun tr = runTrial(sweepStore, runStore, *sw, claim, settings, start ? &*start : nullptr,
                           current.best ? std::optional<double>(current.best->metric) : std::nullopt, progress);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    bool written = false;
    if (!tr.lost) {
      if (tr.outcome.runId) sweepStore.attachRun(claim.lease, *tr.outcome.runId);
      written = sweepStore.endTrial(claim.lease, tr.outcome, store::nowSeconds());
    }
    ++result.trials;
    if (written && tr.outcome.state == TrialState::Finished) ++result.finished;
    if (written && tr.outcome.state == TrialState::Failed) ++result.failed;

    store::SweepStatus st = sweepStore.status(sweepId);
    std::string line = "trial " + std::to_string(claim.trial.index) + " [" + assignmentText(claim.trial.assignment) + "] ";
    if (start && start->status == TrialStart::Status::Ready) line += "from " + describeStart(*sw->spec.from, *start) + " ";
    if (!written)
      line += "lost: another agent took it over";
    else if (tr.outcome.state == TrialState::Finished || tr.outcome.state == TrialState::Stopped)
      line += std::string(store::name(tr.outcome.state)) + " " + sw->spec.metric.name + "=" + formatNumber(tr.outcome.metric);
    else
      line += std::string(store::name(tr.outcome.state)) + ": " + tr.outcome.reason;
    char secs[32];
    std::snprintf(secs, sizeof secs, " (%.1fs)", seconds);
    line += secs;
    if (st.best) {
      line += " | best " + formatNumber(st.best->metric) + " (trial " + std::to_string(st.best->index) + ")";
      if (written && std::isfinite(tr.outcome.metric) && st.best->index == claim.trial.index) line += " new best";
    }
    const long long done = st.counts[TrialState::Finished] + st.counts[TrialState::Stopped];
    line += " | done " + std::to_string(done) + ", running " + std::to_string(st.counts[TrialState::Running]) +
            ", failed " + std::to_string(st.counts[TrialState::Failed]);
    progress << line << "\n" << std::flush;
    if (tr.interrupted) {
      result.ending = AgentResult::Ending::Interrupted;
      return result;
    }
  }
}

}  // namespace ipu::runner
