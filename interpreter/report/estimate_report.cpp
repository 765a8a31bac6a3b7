#include "interpreter/report/estimate_report.h"

#include "interpreter/check/units.h"
#include "interpreter/report/timeline_render.h"
#include "runtime/cost/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace ipu::report {

using base::Style;

std::string formatDuration(double s) {
  char buf[48];
  if (!std::isfinite(s)) return "unbounded";
  if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else if (s < 1) std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  else if (s < 120) std::snprintf(buf, sizeof buf, "%.2f s", s);
  else if (s < 2 * 3600) std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  else if (s < 3 * 86400) std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  else std::snprintf(buf, sizeof buf, "%.1f days", s / 86400);
  return buf;
}

namespace {

std::string commas(double v) {
  if (!std::isfinite(v) || std::fabs(v) >= 1e15) return check::formatCell(v, 0, 9);  // llround would overflow
  long long n = std::llround(v);
  std::string s = std::to_string(n), out;
  int c = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it, ++c) {
    if (c && c % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
  }
  return out;
}

std::string pct(double f) {
  if (!std::isfinite(f) || std::fabs(f) >= 1e4) return check::formatPercent(f);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * f);
  return buf;
}

std::string pad(const std::string& s, std::size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

// "612 MB 67%": the IPU's memory and its share of the chip's.
std::string memoryCell(double bytes, double capacity) {
  char buf[48];
  if (capacity > 0)
    std::snprintf(buf, sizeof buf, "%s MB %4s", check::formatCell(bytes / 1e6, 0, 9).c_str(),
                  check::formatPercent(bytes / capacity).c_str());
  else
    std::snprintf(buf, sizeof buf, "%s MB", check::formatCell(bytes / 1e6, 0, 9).c_str());
  return buf;
}

void printPhase(std::ostream& os, const ir::PhasePlan& ph, const cost::PhaseEstimate& e, const base::Painter& p,
                bool timeline) {
  os << "\n" << p.paint(Style::Bold, "phase " + ph.name) << "  " << ph.model << " on " << ph.pod.name << ", "
     << ph.ipusUsed << " of " << ph.pod.ipus() << " IPUs (" << ph.mapping.shard << " x " << ph.mapping.pipelineIpus << " x "
     << ph.mapping.replicas << "), " << ph.pod.machine.chip.name << "\n";
  if (!e.ok) {
    os << "  " << p.paint(Style::Error, "no estimate") << " (see the error above)\n";
    return;
  }
  auto row = [&](const char* label, const std::string& text) {
    os << "  " << p.paint(Style::Dim, pad(label, 14)) << text << "\n";
  };
  std::ostringstream step;
  step << p.paint(Style::Bold, formatDuration(e.stepTime)) << ": " << p.paint(Style::Bold, commas(e.samplesPerSecond))
       << " samples/s";
  if (e.tokensPerSecond > 0) step << ", " << commas(e.tokensPerSecond) << " tokens/s";
  row("step", step.str());
  if (e.throughputHigh > 0)
    row("likely", commas(e.throughputLow) + " to " + commas(e.throughputHigh) + " samples/s (" + e.intervalBasis + ")");
  for (const auto& f : e.regimes) row("warning", p.paint(Style::Accent, f.message));
  row("time to train", formatDuration(e.timeToTrain) + " (" + commas(static_cast<double>(e.steps)) + " steps)");
  std::ostringstream pipe;
  pipe << commas(e.cycles) << " cycles of " << formatDuration(e.cycleTime) << ", " << pct(e.pipelineUtilisation)
       << " of IPU time busy";
  row("pipeline", pipe.str());
  if (!e.fits)
    row("memory", p.paint(Style::Error, "does not fit") + ": the plan's error says which IPU overflows (`ipu plan`)");

  const cost::Breakdown& b = e.breakdown;
  const std::pair<const char*, double> parts[] = {
      {"compute", b.compute},       {"recompute", b.recompute},   {"fill/drain", b.pipelineFillDrain},
      {"imbalance", b.stageImbalance}, {"exchange", b.exchange}, {"all-reduce", b.allReduce},
      {"RTS gathers", b.rtsCollectives}, {"via hosts", b.acrossInstances}, {"streaming", b.streaming}, {"optimizer", b.optimizer},
      {"host I/O", b.hostIo},       {"overhead", b.overhead}};
  os << "  " << p.paint(Style::Dim, "where the step goes") << "\n";
  for (const auto& [name, t] : parts) {
    if (!(t > 0)) continue;
    double f = t / e.stepTime;
    int bar = static_cast<int>(std::round(f * 30));
    os << "    " << pad(name, 12) << pad(formatDuration(t), 10, true) << pad(pct(f), 8, true) << "  "
       << p.paint(Style::Accent, std::string(static_cast<std::size_t>(bar), '#')) << "\n";
  }
  os << "  " << p.paint(Style::Dim, pad("IPU", 7) + pad("forward", 11, true) + pad("backward", 11, true) +
                                        pad("recompute", 11, true) + pad("exchange", 11, true) + pad("per micro batch", 17, true) +
                                        pad("FLOP use", 10, true) + pad("memory", 14, true))
     << "\n";
  const int t = std::max(1, ph.mapping.shard);
  for (const auto& it : e.ipus) {
    std::string label = t > 1 ? std::to_string(it.ipu * t) + "-" + std::to_string(it.ipu * t + t - 1) : std::to_string(it.ipu);
    os << "  " << pad(label, 7) << pad(formatDuration(it.forward), 11, true) << pad(formatDuration(it.backward), 11, true)
       << pad(formatDuration(it.recompute), 11, true) << pad(formatDuration(it.exchange), 11, true)
       << pad(formatDuration(it.busy()), 17, true) << pad(pct(it.utilisation), 10, true);
    const std::string mem = memoryCell(it.memoryBytes, it.capacityBytes);
    const bool over = it.capacityBytes > 0 && it.memoryBytes > it.capacityBytes;
    os << (over ? p.paint(Style::Error, pad(mem, 14, true)) : pad(mem, 14, true)) << "\n";
  }
  if (timeline) drawTimelineAscii(os, cost::timeline(ph, e), ph.mapping.shard, p);
}

}  // namespace

void printEstimateReport(std::ostream& os, const ir::ExecutionPlan& plan, const cost::Estimate& estimate,
                         const base::Painter& p, bool timeline) {
  std::set<std::string> calibrations, assumptions;
  for (std::size_t i = 0; i < plan.runs.size() && i < estimate.runs.size(); ++i) {
    const auto& run = plan.runs[i];
    const auto& est = estimate.runs[i];
    if (i) os << "\n";
    os << p.paint(Style::Accent, "run " + run.name)
       << p.paint(Style::Dim, "  " + run.source.file + ":" + std::to_string(run.source.line)) << "\n";
    for (std::size_t k = 0; k < run.phases.size() && k < est.phases.size(); ++k) {
      printPhase(os, run.phases[k], est.phases[k], p, timeline);
      if (est.phases[k].ok) calibrations.insert(est.phases[k].calibration);
      for (const auto& a : est.phases[k].assumptions) assumptions.insert(a);
    }
    if (run.phases.size() > 1)
      os << "\n  " << p.paint(Style::Bold, "time to train, all phases: " + formatDuration(est.timeToTrain)) << "\n";
    if (est.hooks) {
      const cost::SteppedRun& h = *est.hooks;
      os << "\n  " << p.paint(Style::Bold, "hooks") << "  ";
      if (h.stopped)
        os << p.paint(Style::Accent, "stopped the run: " + h.stopReason) << "; time to train until then "
           << formatDuration(h.timeToTrain) << "\n";
      else
        os << "ran on every step; the run was not stopped\n";
      for (const auto& sp : h.phases) {
        if (sp.logged.empty()) continue;
        os << "    phase " << sp.name << " logged:";
        for (const auto& [k, v] : sp.logged) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.6g", v);
          os << " " << k << " = " << buf;
        }
        os << "\n";
      }
    }
  }
  os << "\n";
  for (const auto& c : calibrations) os << p.paint(Style::Dim, "calibration  ") << c << "\n";
  for (const auto& a : assumptions) os << p.paint(Style::Dim, "assumption   ") << a << "\n";
  os << p.paint(Style::Dim, "             how the estimate is made and how well it matches published results: docs/cost-model.md")
     << "\n";
}

}  // namespace ipu::report
