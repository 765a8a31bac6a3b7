#include "interpreter/runner/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "interpreter/check/units.h"

namespace ipu::runner {

using base::Style;

std::string clock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-:--:--";
  long long s = std::llround(seconds);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

void Progress::finishLine() {
  if (lineOpen_) os_ << "\n";
  lineOpen_ = false;
}

void Progress::eraseLine() {
  if (lineOpen_) os_ << "\r\x1b[K" << std::flush;
  lineOpen_ = false;
}

train::PhaseDecision Progress::phaseStart(train::Source, const train::PhaseInfo& info) {
  if (!oneLine_) finishLine();
  steps_ = info.steps;
  first_ = 0;
  start_ = std::chrono::steady_clock::now();
  lastDraw_ = {};
  phase_ = info.phase;
  if (oneLine_) return {};
  os_ << p_.paint(Style::Bold, "phase " + info.phase) << "  " << info.steps << " steps";
  if (!info.checkpoint.empty()) os_ << p_.paint(Style::Dim, ", from " + info.checkpoint);
  os_ << "\n";
  return {};
}

train::StopRequest Progress::step(train::Source, const train::StepInfo& s, std::map<std::string, double>&) {
  if (first_ == 0) {
    first_ = s.step;  // a resumed phase starts past 1
    start_ = std::chrono::steady_clock::now();
  }
  if (train::measured(s.loss)) lastLoss_ = s.loss;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const long long done = s.step - first_ + 1;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(steps_ - s.step) : NAN;
  const bool last = s.step == steps_;
  if (oneLine_ && !terminal_) return {};
  if (terminal_) {
    // Redraw at most ~20 times a second.
    if (!last && now - lastDraw_ < std::chrono::milliseconds(50)) return {};
    lastDraw_ = now;
  } else {
    const long long every = std::max<long long>(1, steps_ / 10);
    if (!last && s.step % every != 0) return {};
  }
  const int width = 24;
  const double frac = steps_ > 0 ? static_cast<double>(s.step) / static_cast<double>(steps_) : 1;
  const int fill = static_cast<int>(std::round(frac * width));
  char line[256];
  std::snprintf(line, sizeof line, "  %6lld/%lld  loss %s  lr %.3g  %s samples/s  ETA %s", s.step, steps_,
                train::measured(s.loss) ? std::to_string(s.loss).substr(0, 6).c_str() : "-", s.lr,
                train::measured(s.samplesPerSecond) ? std::to_string(std::llround(s.samplesPerSecond)).c_str() : "-",
                clock(eta).c_str());
  if (terminal_) os_ << "\r\x1b[K";
  if (oneLine_) os_ << prefix_ << " " << p_.paint(Style::Dim, phase_);
  os_ << "  " << p_.paint(Style::Accent, std::string(static_cast<std::size_t>(fill), '#'))
      << p_.paint(Style::Dim, std::string(static_cast<std::size_t>(width - fill), '.')) << line;
  if (s.skipped) os_ << p_.paint(Style::Warning, "  (skipped: fp16 overflow)");
  if (terminal_) {
    lineOpen_ = true;
    os_ << std::flush;
  } else {
    os_ << "\n";
  }
  return {};
}

train::StopRequest Progress::phaseEnd(train::Source, const train::PhaseInfo& info) {
  if (oneLine_) return {};  // the line goes on into the next phase
  finishLine();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (info.stepsRun < info.steps)
    os_ << "  " << p_.paint(Style::Warning, "stopped") << " after " << info.stepsRun << " of " << info.steps << " steps, "
        << clock(elapsed);
  else
    os_ << "  " << p_.paint(Style::Good, "done") << ": " << info.stepsRun << " steps in " << clock(elapsed);
  if (train::measured(lastLoss_)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", lastLoss_);
    os_ << ", last loss " << buf;
  }
  os_ << "\n";
  if (!info.metrics.empty()) {
    os_ << "  " << p_.paint(Style::Dim, "held-out:");
    for (const auto& [k, v] : info.metrics) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4g", v);
      os_ << " " << k << " " << buf;
    }
    os_ << "\n";
  }
  if (train::measured(info.streamedBytesPerStep)) {
    // The emulator counts what it moves; the plan's traffic is what the cost model priced.
    const double planned = info.plannedStreamedBytesPerStep;
    const bool same = train::measured(planned) && std::abs(info.streamedBytesPerStep - planned) <= 1e-9 * std::max(1.0, planned);
    os_ << "  " << p_.paint(Style::Dim, "Streaming Memory:") << " " << check::formatBytes(info.streamedBytesPerStep) << " moved per step and replica"
        << (same ? ", as the plan says"
            : train::measured(planned)
                ? " (the plan says " + check::formatBytes(planned) +
                      (info.stashRecomputed ? ": it streams the stash each layer keeps, which the emulator recomputes from "
                                              "the layer's input instead" : "") + ")"
                : std::string())
        << "\n";
  }
  return {};
}

}  // namespace ipu::runner
