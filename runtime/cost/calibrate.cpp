#include "runtime/cost/calibrate.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "runtime/cost/cost_model.h"

namespace ipu::cost {

namespace {

using Vec = std::vector<double>;

// Nelder-Mead simplex minimisation (standard coefficients).
Vec minimise(const std::function<double(const Vec&)>& f, Vec x0, const Vec& step, int iterations) {
  const std::size_t n = x0.size();
  std::vector<Vec> pts(n + 1, x0);
  for (std::size_t i = 0; i < n; ++i) pts[i + 1][i] += step[i];
  std::vector<double> vals(n + 1);
  for (std::size_t i = 0; i <= n; ++i) vals[i] = f(pts[i]);
  std::vector<std::size_t> order(n + 1);
  for (int it = 0; it < iterations; ++it) {
    for (std::size_t i = 0; i <= n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return vals[a] < vals[b]; });
    std::vector<Vec> p2;
    std::vector<double> v2;
    for (std::size_t i : order) {
      p2.push_back(pts[i]);
      v2.push_back(vals[i]);
    }
    pts.swap(p2);
    vals.swap(v2);
    if (std::fabs(vals[n] - vals[0]) < 1e-14) break;
    Vec c(n, 0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) c[j] += pts[i][j] / static_cast<double>(n);
    auto along = [&](double t) {
      Vec y(n);
      for (std::size_t j = 0; j < n; ++j) y[j] = c[j] + t * (pts[n][j] - c[j]);
      return y;
    };
    Vec xr = along(-1);
    double fr = f(xr);
    if (fr < vals[0]) {
      Vec xe = along(-2);
      double fe = f(xe);
      if (fe < fr) {
        pts[n] = xe;
        vals[n] = fe;
      } else {
        pts[n] = xr;
        vals[n] = fr;
      }
    } else if (fr < vals[n - 1]) {
      pts[n] = xr;
      vals[n] = fr;
    } else {
      Vec xc = along(0.5);
      double fc = f(xc);
      if (fc < vals[n]) {
        pts[n] = xc;
        vals[n] = fc;
      } else {
        for (std::size_t i = 1; i <= n; ++i) {
          for (std::size_t j = 0; j < n; ++j) pts[i][j] = pts[0][j] + 0.5 * (pts[i][j] - pts[0][j]);
          vals[i] = f(pts[i]);
        }
      }
    }
  }
  std::size_t best = static_cast<std::size_t>(std::min_element(vals.begin(), vals.end()) - vals.begin());
  return pts[best];
}

}  // namespace

FitResult fitCalibration(std::vector<Measurement> rows, const std::string& source, double attentionFactor) {
  FitResult out;
  // Chips in the table, and which kinds of work each one's rows exercise.
  std::vector<std::string> chips;
  std::map<std::string, bool> hasMatmul, hasConv;
  for (const auto& r : rows) {
    const std::string& c = r.phase.pod.machine.chip.name;
    if (std::find(chips.begin(), chips.end(), c) == chips.end()) chips.push_back(c);
    for (const auto& l : r.phase.layers) {
      hasMatmul[c] = hasMatmul[c] || l.forward.matmul > 0;
      hasConv[c] = hasConv[c] || l.forward.conv > 0;
    }
  }
  // x = [op latency (kilocycles), step overhead (ms), then per chip: matmul, conv efficiency]
  auto apply = [&](const Vec& x) {
    for (auto& r : rows) {
      hw::Calibration& cal = r.phase.pod.machine.chip.calibration;
      std::size_t k = static_cast<std::size_t>(std::find(chips.begin(), chips.end(), r.phase.pod.machine.chip.name) - chips.begin());
      cal.present = true;
      cal.source = source;
      cal.opLatencyCycles = x[0] * 1000;
      cal.stepOverheadSeconds = x[1] / 1000;
      cal.matmulEfficiency = x[2 + 2 * k];
      cal.convEfficiency = x[3 + 2 * k];
      cal.attentionFactor = attentionFactor;
    }
  };
  auto loss = [&](const Vec& x) {
    if (x[0] < 0 || x[1] < 0) return 1e9;
    for (std::size_t i = 2; i < x.size(); ++i)
      if (!(x[i] > 0.02 && x[i] <= 1)) return 1e9;
    apply(x);
    double sum = 0;
    for (const auto& r : rows) {
      PhaseEstimate e = estimatePhase(r.phase);
      if (!e.ok || !(e.samplesPerSecond > 0)) return 1e9;
      double d = std::log(e.samplesPerSecond / r.samplesPerSecond);
      sum += d * d;
    }
    return sum;
  };
  Vec best;
  double bestLoss = std::numeric_limits<double>::infinity();
  // A few fixed starting points guard against a poor local minimum.
  for (const Vec& start : {Vec{5, 3, 0.3, 0.3}, Vec{10, 1, 0.5, 0.45}, Vec{1, 5, 0.4, 0.25}}) {
    Vec x0 = {start[0], start[1]};
    Vec steps = {2, 1};
    for (std::size_t k = 0; k < chips.size(); ++k) {
      x0.push_back(start[2]);
      x0.push_back(start[3]);
      steps.push_back(0.05);
      steps.push_back(0.05);
    }
    Vec x = minimise(loss, x0, steps, 4000);
    x = minimise(loss, x, steps, 4000);  // restart from the result: Nelder-Mead can stall
    double l = loss(x);
    if (l < bestLoss) {
      bestLoss = l;
      best = x;
    }
  }
  if (best.empty()) return out;  // no start gave a finite loss: no parameters (the caller reports it)
  apply(best);
  double sumAbs = 0;
  for (const auto& r : rows) {
    PhaseEstimate e = estimatePhase(r.phase);
    Residual res{r.label, r.phase.pod.machine.chip.name, r.samplesPerSecond, e.samplesPerSecond};
    sumAbs += std::fabs(res.error());
    out.maxAbsoluteError = std::max(out.maxAbsoluteError, std::fabs(res.error()));
    out.residuals.push_back(res);
  }
  out.meanAbsoluteError = rows.empty() ? 0 : sumAbs / static_cast<double>(rows.size());
  for (std::size_t k = 0; k < chips.size(); ++k) {
    hw::Calibration cal;
    cal.present = true;
    cal.source = source;
    cal.opLatencyCycles = best[0] * 1000;
    cal.stepOverheadSeconds = best[1] / 1000;
    cal.matmulEfficiency = best[2 + 2 * k];
    cal.convEfficiency = best[3 + 2 * k];
    cal.attentionFactor = attentionFactor;
    out.chips[chips[k]] = cal;
    if (!hasMatmul[chips[k]])
      out.notes.push_back(chips[k] + ": no matmul in its measurements, so its matmul efficiency is not determined");
    if (!hasConv[chips[k]])
      out.notes.push_back(chips[k] + ": no convolution in its measurements, so its conv efficiency is not determined");
  }
  return out;
}

}  // namespace ipu::cost
