#include "runtime/cost/calibrate.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <thread>

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
    if (std::fabs(vals[n] - vals[0]) < 1e-10 * (1 + std::fabs(vals[0]))) break;
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

namespace {

// x = [op latency (kilocycles), update cost (ns per parameter), then per
// architecture: matmul, conv efficiency].
//
// What is not fitted, and why (docs/cost-model.md, "Calibration"):
// - the GW-Link latency is the machine's: no row tells it apart from the
//   other per-step costs, and fitted it absorbed the BERT POD256 shortfall and
//   predicted ResNet's racks 70% too slow when ResNet's rows were left out;
// - there is no constant per framework: a framework's constant is a label of
//   the models it was fitted on (PyTorch's 357 ms per step, fitted on BERT,
//   did not transfer to shorter steps);
// - the host round trip (`step_overhead`) is 0: fitted on every row it is
//   0.000 ms, and rows with steps of seconds cannot tell it from
//   `update_cost`, so a fit without ResNet's short steps put BERT's per-step
//   cost into it and predicted ResNet up to 54% too slow.
constexpr std::size_t kShared = 2;

struct FitProblem {
  std::vector<Measurement>& rows;
  const std::vector<std::string>& architectures;
  const std::string& source;
  double attentionFactor;
  std::vector<bool> use;  // rows in the fit

  std::size_t architectureIndex(const Measurement& r) const {
    const std::string a = architectureOf(r.phase.pod.machine.chip);
    return static_cast<std::size_t>(std::find(architectures.begin(), architectures.end(), a) - architectures.begin());
  }
  hw::Calibration calibration(const Vec& x, std::size_t k) const {
    hw::Calibration cal;
    cal.present = true;
    cal.source = source;
    cal.opLatencyCycles = x[0] * 1000;
    cal.stepOverheadSeconds = 0;
    cal.updateSecondsPerParameter = x[1] * 1e-9;
    cal.matmulEfficiency = x[kShared + 2 * k];
    cal.convEfficiency = x[kShared + 2 * k + 1];
    cal.attentionFactor = attentionFactor;
    return cal;
  }
  void apply(const Vec& x) {
    for (auto& r : rows) r.phase.pod.machine.chip.calibration = calibration(x, architectureIndex(r));
  }
  double loss(const Vec& x) {
    for (std::size_t i = 0; i < kShared; ++i)
      if (x[i] < 0) return 1e9;
    for (std::size_t i = kShared; i < x.size(); ++i)
      if (!(x[i] > 0.02 && x[i] <= 1)) return 1e9;
    apply(x);
    double sum = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (!use[i]) continue;
      PhaseEstimate e = estimatePhase(rows[i].phase);
      if (!e.ok || !(e.samplesPerSecond > 0)) return 1e9;
      double d = std::log(e.samplesPerSecond / rows[i].samplesPerSecond);
      sum += d * d;
    }
    return sum;
  }
  // Nelder-Mead from each start, twice (it can stall); the best result.
  Vec fit(const std::vector<Vec>& starts) {
    Vec best;
    double bestLoss = std::numeric_limits<double>::infinity();
    auto f = [&](const Vec& x) { return loss(x); };
    for (const Vec& x0 : starts) {
      Vec steps = {2, 0.2};
      for (std::size_t k = 0; k < architectures.size(); ++k) {
        steps.push_back(0.05);
        steps.push_back(0.05);
      }
      Vec x = minimise(f, x0, steps, 4000);
      x = minimise(f, x, steps, 4000);
      double l = loss(x);
      if (l < bestLoss) {
        bestLoss = l;
        best = x;
      }
    }
    return best;
  }
};

double predict(Measurement& r) { return estimatePhase(r.phase).samplesPerSecond; }

ErrorSummary summarise(std::vector<double> errors) {
  ErrorSummary s;
  if (errors.empty()) return s;
  for (double& e : errors) e = std::fabs(e);
  std::sort(errors.begin(), errors.end());
  for (double e : errors) s.mean += e / static_cast<double>(errors.size());
  const std::size_t n = errors.size();
  s.median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  s.worst = errors.back();
  return s;
}

}  // namespace

std::string architectureOf(const hw::Chip& c) {
  char key[160];
  std::snprintf(key, sizeof key, "%d tiles, %g/%g flops per cycle, %g bytes", c.tiles, c.fp16FlopsPerCycle, c.fp32FlopsPerCycle,
                c.memoryBytes);
  return key;
}

std::string configurationGroup(const ir::PhasePlan& phase) {
  char params[32];
  std::snprintf(params, sizeof params, "%.3g", phase.parameters);
  return familyOf(phase) + " " + params + " params, " + std::to_string(std::max(1, phase.mapping.pipelineIpus)) + " IPUs x t " +
         std::to_string(std::max(1, phase.mapping.shard)) + ", micro batch " + std::to_string(phase.batch.microBatch);
}

FitResult fitCalibration(std::vector<Measurement> rows, const std::string& source, double attentionFactor, bool crossValidate) {
  FitResult out;
  // Chips in the table, and which kinds of work each one's rows exercise.
  std::vector<std::string> chips, architectures;
  std::map<std::string, std::size_t> architectureOfChip;
  std::map<std::string, bool> hasMatmul, hasConv;
  for (const auto& r : rows) {
    const std::string& c = r.phase.pod.machine.chip.name;
    if (std::find(chips.begin(), chips.end(), c) == chips.end()) chips.push_back(c);
    const std::string a = architectureOf(r.phase.pod.machine.chip);
    if (std::find(architectures.begin(), architectures.end(), a) == architectures.end()) architectures.push_back(a);
    architectureOfChip[c] = static_cast<std::size_t>(std::find(architectures.begin(), architectures.end(), a) - architectures.begin());
    for (const auto& l : r.phase.layers) {
      hasMatmul[a] = hasMatmul[a] || l.forward.matmul > 0;
      hasConv[a] = hasConv[a] || l.forward.conv > 0;
    }
  }
  FitProblem pb{rows, architectures, source, attentionFactor, std::vector<bool>(rows.size(), true)};
  // A few fixed starting points guard against a poor local minimum.
  std::vector<Vec> starts;
  for (const Vec& s : {Vec{5, 0.3, 0.3, 0.3}, Vec{10, 0.1, 0.5, 0.45}, Vec{1, 0.6, 0.4, 0.25}}) {
    Vec x0(s.begin(), s.begin() + kShared);
    for (std::size_t k = 0; k < architectures.size(); ++k) {
      x0.push_back(s[kShared]);
      x0.push_back(s[kShared + 1]);
    }
    starts.push_back(x0);
  }
  const Vec best = pb.fit(starts);
  if (best.empty()) return out;  // no start gave a finite loss: no parameters (the caller reports it)

  // Cross-validation: folds of rows left out of the fit, each predicted by
  // the fit on the other rows. A fold is one row (leave-one-out) or one
  // configuration group (leave-one-group-out). The folds' fits are
  // independent of each other, so they run on every host core, each thread on
  // its own copy of the rows (a fit writes the calibration into its rows).
  // The result does not depend on the threads.
  std::vector<std::string> groupOf(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) groupOf[i] = configurationGroup(rows[i].phase);
  std::vector<std::string> groupNames;
  for (const auto& g : groupOf)
    if (std::find(groupNames.begin(), groupNames.end(), g) == groupNames.end()) groupNames.push_back(g);
  out.groups = groupNames.size();
  std::vector<std::vector<std::size_t>> folds;
  for (std::size_t i = 0; i < rows.size(); ++i) folds.push_back({i});
  const std::size_t firstGroupFold = folds.size();
  for (const auto& g : groupNames) {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (groupOf[i] == g) members.push_back(i);
    folds.push_back(std::move(members));
  }
  std::vector<double> loo(rows.size(), 0), logo(rows.size(), 0);
  if (crossValidate && rows.size() > 1) {
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      std::vector<Measurement> own = rows;
      FitProblem local{own, architectures, source, attentionFactor, std::vector<bool>(own.size(), true)};
      for (std::size_t f = next++; f < folds.size(); f = next++) {
        const auto& fold = folds[f];
        if (fold.size() == rows.size()) continue;   // one group only: nothing to fit on
        local.use.assign(own.size(), true);
        for (std::size_t i : fold) local.use[i] = false;
        // Warm-started from the full fit (the optimum without a few rows of
        // many is near it); Nelder-Mead then moves to the optimum of the other
        // rows, so the rows left out do not decide their own prediction.
        Vec x = local.fit({best});
        local.apply(x);
        for (std::size_t i : fold) (f < firstGroupFold ? loo : logo)[i] = predict(own[i]);
      }
    };
    const std::size_t threads = std::max<std::size_t>(1, std::min<std::size_t>(std::thread::hardware_concurrency(), folds.size()));
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
  }

  pb.apply(best);
  std::vector<double> errs, looErrs, logoErrs;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Measurement& r = rows[i];
    Residual res;
    res.label = r.label;
    res.chip = r.phase.pod.machine.chip.name;
    res.family = familyOf(r.phase);
    res.group = groupOf[i];
    res.ipus = r.phase.ipusUsed;
    res.accumulation = static_cast<double>(r.phase.batch.gradientAccumulation);
    res.microBatch = static_cast<double>(r.phase.batch.microBatch);
    for (const auto& ipu : r.phase.ipus)
      if (ipu.capacityBytes > 0) res.memory = std::max(res.memory, ipu.memory.total() / ipu.capacityBytes);
    res.phased = r.phase.mapping.phases > 1 || r.phase.mapping.weightsStreaming;
    res.recomputes = r.phase.mapping.recompute != ir::Recompute::None;
    res.software = r.phase.software;
    res.measured = r.samplesPerSecond;
    res.predicted = predict(r);
    res.looPredicted = loo[i];
    res.logoPredicted = logo[i];
    errs.push_back(res.error());
    if (loo[i] > 0) looErrs.push_back(res.looError());
    if (logo[i] > 0) logoErrs.push_back(res.logoError());
    out.residuals.push_back(res);
  }
  out.inSample = summarise(errs);
  out.leaveOneOut = summarise(looErrs);
  out.leaveOneGroupOut = summarise(logoErrs);
  out.meanAbsoluteError = out.inSample.mean;
  out.maxAbsoluteError = out.inSample.worst;
  for (std::size_t k = 0; k < chips.size(); ++k) {
    hw::Calibration cal = pb.calibration(best, architectureOfChip[chips[k]]);
    for (const auto& r : out.residuals)
      // Every row of the chip's architecture: they were fitted with the
      // same parameters, so their errors are the chip's evidence too.
      if (architectureOfChip[r.chip] == architectureOfChip[chips[k]] && r.looPredicted > 0) {
        hw::Calibration::Row row;
        row.family = r.family;
        row.ipus = r.ipus;
        row.accumulation = r.accumulation;
        row.looError = r.looError();
        row.logoError = r.logoPredicted > 0 ? r.logoError() : r.looError();
        row.described = true;
        row.microBatch = r.microBatch;
        row.memory = r.memory;
        row.phased = r.phased;
        row.recomputes = r.recomputes;
        row.softwareRecorded = true;
        row.software = r.software;
        row.chip = r.chip;
        cal.rows.push_back(row);
      }
    out.chips[chips[k]] = cal;
    const std::string& a = architectures[architectureOfChip[chips[k]]];
    if (!hasMatmul[a])
      out.notes.push_back(chips[k] + ": no matmul in the measurements of its architecture, so its matmul efficiency is not determined");
    if (!hasConv[a])
      out.notes.push_back(chips[k] + ": no convolution in the measurements of its architecture, so its conv efficiency is not determined");
  }
  return out;
}

}  // namespace ipu::cost
