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

// A stop request: the run ends cleanly after the current step, keeping what
// it recorded.
struct StopRequest {
  bool stop = false;
  std::string reason;
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void phaseStart(Source, const PhaseInfo&) {}
  // May add metrics to `logged` (name -> value) for the run record, or ask to stop.
  virtual StopRequest step(Source, const StepInfo&, std::map<std::string, double>& logged) {
    (void)logged;
    return {};
  }
  virtual void phaseEnd(Source, const PhaseInfo&) {}
};

// Decisions a script may take over from the built-in policies (`lr: lua f`,
// a Lua loss-scaling policy). Unset functions mean the built-in policy.
struct LossScaleState {
  double scale = 1;
  bool overflow = false;        // this step's gradients overflowed fp16
  long long goodSteps = 0;      // consecutive steps without overflow before this one
};

struct Policies {
  // lr(step within the phase from 0, phase name) for a `lua f` schedule.
  std::function<double(long long, const std::string&)> learningRate;
  // The next loss scale.
  std::function<double(const LossScaleState&)> lossScale;
};

}  // namespace ipu::train
