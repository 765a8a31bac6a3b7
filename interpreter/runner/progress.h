// Progress of a training run for a person: on a terminal, one line redrawn in
// place per step (phase, bar, steps, loss, learning rate, samples/s, ETA); on
// a pipe or a file, a line every tenth of a phase, so logs stay readable. At
// the end of each phase, its held-out evaluation.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

#include "interpreter/base/terminal.h"
#include "runtime/train/events.h"

namespace ipu::runner {

class Progress : public train::Observer {
 public:
  Progress(std::ostream& os, bool terminal, base::Painter painter) : os_(os), terminal_(terminal), p_(painter) {}

  train::PhaseDecision phaseStart(train::Source, const train::PhaseInfo&) override;
  train::StopRequest step(train::Source, const train::StepInfo&, std::map<std::string, double>& logged) override;
  train::StopRequest phaseEnd(train::Source, const train::PhaseInfo&) override;
  void finishLine();  // ends a line being redrawn (before other output)
  // One line for the whole run, redrawn in place on a terminal and erased by
  // eraseLine(), each drawing starting with `prefix` (a sweep agent's trial):
  // no phase headers, no summaries. Without a terminal, nothing is drawn.
  void oneLine(std::string prefix) {
    oneLine_ = true;
    prefix_ = std::move(prefix);
  }
  void eraseLine();

 private:
  std::ostream& os_;
  bool terminal_;
  base::Painter p_;
  bool lineOpen_ = false;
  bool oneLine_ = false;
  std::string prefix_, phase_;
  long long steps_ = 0, first_ = 0;
  std::chrono::steady_clock::time_point start_, lastDraw_;
  double lastLoss_ = train::kNotMeasured;
};

// "0:01:05"
std::string clock(double seconds);

}  // namespace ipu::runner
