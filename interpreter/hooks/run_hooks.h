// A training's hooks, attached to one run: the train::Observer the runtime
// drives (on_phase_start, on_step, on_phase_end of every hook the training
// lists, in order) and the train::Policies backed by `lua NAME` functions
// (learning rate, loss scaling). The same object serves `ipu run` (the
// emulator: real metrics) and `ipu estimate` (timing only: asking for the
// loss there is an IPU4006 error, not nil).
//
// A hook that fails is reported (HookSet::report) and the run is asked to
// stop; what the run recorded so far is kept by the runtime.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/hooks/hook_set.h"
#include "interpreter/hooks/lua_ctx.h"
#include "runtime/ir/execution_plan.h"
#include "runtime/train/events.h"

namespace ipu::hooks {

// The sweep a run is a trial of, as hooks see it (`ctx.sweep`, `ctx.trial`;
// docs/hooks.md). Runs that are not trials have none (both read as nil).
struct SweepTrial {
  std::string sweep;                  // its name
  std::string method;                 // grid, random, bayes
  std::string metric;                 // the metric's key
  std::string goal;                   // minimize, maximize
  std::optional<double> best;         // the sweep's best metric when the trial started
  long long index = 0;                // the trial's index in the sweep (0, 1, ...)
  std::string key;                    // its assignment key
  CtxFields params;                   // path -> value
  std::string startFrom;              // the checkpoint its weights start from ("": the initialisation)
};

class RunHooks : public train::Observer {
 public:
  RunHooks(HookSet& hooks, const ir::RunPlan& run, train::Source source);

  train::PhaseDecision phaseStart(train::Source, const train::PhaseInfo&) override;
  train::StopRequest step(train::Source, const train::StepInfo&, std::map<std::string, double>& logged) override;
  train::StopRequest phaseEnd(train::Source, const train::PhaseInfo&) override;

  // The sweep trial this run is (kept by the caller for the run's length);
  // null: not a trial.
  void setSweepTrial(const SweepTrial* trial) { trial_ = trial; }

  // Policies for the run's `lua NAME` functions (unset members: none named).
  train::Policies policies();

  // Something failed (reported): the run should stop.
  bool failed() const { return failed_; }
  // Whether any hook wants events (so the runtime may skip them otherwise).
  bool wantsEvents() const { return !listeners_.empty(); }

 private:
  struct Listener {
    LoadedHook* hook = nullptr;
    bool onStep = false, onPhaseStart = false, onPhaseEnd = false;
  };
  HookSet& hooks_;
  const ir::RunPlan& run_;
  train::Source source_;
  std::vector<Listener> listeners_;
  const SweepTrial* trial_ = nullptr;
  bool failed_ = false;
  long long serial_ = 0;  // numbers the calls, so a ctx kept after its call is refused
};

}  // namespace ipu::hooks
