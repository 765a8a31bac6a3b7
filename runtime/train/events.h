// What a training run reports while it steps, and what it lets the outside
// decide. The emulator (`ipu run`) and the estimate (`ipu estimate`, timing
// only) both drive an Observer through the same calls, so a hook, a progress
// bar or the experiment tracker is written once. The runtime defines this
// interface and never knows who implements it (the Lua hooks live in
// interpreter/hooks and are wired in by the CLI).
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace ipu::train {

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();
inline bool measured(double v) { return !std::isnan(v); }

// Where the numbers of a run come from: hooks that need a metric the source
// does not have get a clear error instead of nil.
enum class Source { Emulator, Estimate };
const char* name(Source s);

struct PhaseInfo {
  std::string run;
  std::string phase;
  int index = 0;              // phase number within the run, from 0
  long long steps = 0;        // optimizer steps in the phase
  std::string from;           // phase whose result it starts from ("" if none)
  std::string checkpoint;     // checkpoint it starts from / wrote at its end ("" if none)
  std::vector<std::string> checkpoints;  // at phaseStart: those it may start from instead (emulator only)
  long long stepsRun = 0;     // at phaseEnd: steps actually run (fewer when stopped)
  // At phaseEnd: held-out evaluation of the source, if it has one (the
  // emulator: mlm_accuracy, mlm_baseline, nsp_accuracy, ...).
  std::map<std::string, double> metrics;
  // At phaseEnd, for a phase that uses Streaming Memory (the emulator): the
  // bytes the last step moved to and from it, per replica (the replicas'
  // shares averaged), and the plan's figure for one step (ir::Traffic).
  double streamedBytesPerStep = kNotMeasured;
  double plannedStreamedBytesPerStep = kNotMeasured;
  // Phased without recomputation: the plan streams the stash each layer keeps
  // (what the cost model prices); the emulator recomputes it from the
  // layer's streamed input, so it moves less (docs/emulator.md).
  bool stashRecomputed = false;
};

struct StepInfo {
  std::string run;
  std::string phase;
  long long step = 0;         // within the phase, from 1
  long long globalStep = 0;   // over the whole run, from 1
  double loss = kNotMeasured;
  double lr = 0;
  double lossScale = 1;
  bool skipped = false;       // the update was skipped (fp16 overflow)
  double samplesPerSecond = kNotMeasured;
  double tokensPerSecond = kNotMeasured;
  double stepTimeSeconds = kNotMeasured;
  std::vector<double> ipuMemoryBytes;   // per IPU of one replica
  std::map<std::string, double> metrics;  // further metrics of the source (e.g. mlm_accuracy)
};

// A checkpoint the source has just written (the emulator: every
// --checkpoint-every steps, at a stop and at each phase's end), so that the
// run's record lists every one (docs/tracking.md, "Artifacts").
struct CheckpointInfo {
  std::string run;
  std::string phase;
  std::string path;           // the file, as written
  long long step = 0;         // within the phase
  long long globalStep = 0;   // over the whole run
  bool final = false;         // the phase's final checkpoint (final.ipt)
};

// A stop request: the run ends cleanly after the current step, keeping what
// it recorded.
struct StopRequest {
  bool stop = false;
  std::string reason;
};

// What an observer decides before a phase: to stop the run, or to start from
// another of `PhaseInfo::checkpoints`.
struct PhaseDecision {
  StopRequest stop;
  std::string startFrom;  // "" keeps PhaseInfo::checkpoint
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual PhaseDecision phaseStart(Source, const PhaseInfo&) { return {}; }
  // May add metrics to `logged` (name -> value) for the run record, or ask to stop.
  virtual StopRequest step(Source, const StepInfo&, std::map<std::string, double>& logged) {
    (void)logged;
    return {};
  }
  virtual StopRequest phaseEnd(Source, const PhaseInfo&) { return {}; }
  // After the checkpoint's file is complete (written and renamed into place).
  virtual void checkpointWritten(Source, const CheckpointInfo&) {}
};

// Decisions a script may take over from the built-in policies (`lr: lua f`,
// a Lua loss-scaling policy). Unset functions mean the built-in policy.
struct LossScaleState {
  double scale = 0;             // the previous step's scale (0 before the first step)
  bool overflow = false;        // the previous step's gradients overflowed fp16 (its update was skipped)
  long long goodSteps = 0;      // consecutive steps without overflow so far
  std::string phase;
  long long step = 0;           // the coming step within the phase, from 1
};

// A policy that fails (its hook raised an error or returned a bad value)
// returns NaN; the run then stops without applying the step, and the failure
// has been reported as a diagnostic.
struct Policies {
  // lr(step within the phase from 0, phase name) for a `lua f` schedule.
  std::function<double(long long, const std::string&)> learningRate;
  // The loss scale for the coming step, given how the previous one went.
  std::function<double(const LossScaleState&)> lossScale;
};

}  // namespace ipu::train
