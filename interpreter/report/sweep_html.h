// The report of one sweep (`ipu report --sweep SWEEP`, docs/sweeps.md
// "Report"): built once from the store's records as data (SweepReport), then
// written as JSON (`--json`) or as one self-contained HTML page (no script
// from elsewhere, no network, no file beside it) that draws, as SVG made
// here:
//   - the optimisation history: each ended trial's metric in the order trials
//     ended, the best so far for the goal, stopped and failed trials marked,
//     the target when there is one;
//   - parallel coordinates: one axis per parameter (log for log-scaled ones,
//     categories for lists) and the metric, a line per trial coloured by its
//     metric, the best trial highlighted;
//   - parameter importance (interpreter/sweep/importance.h);
//   - the trials, best first.
// The page also carries the JSON document, so the two cannot disagree.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/store/sweep_store.h"
#include "interpreter/sweep/importance.h"

namespace ipu::report {

struct SweepReport {
  // How a parameter's axis is drawn.
  enum class Scale { Linear, Log, Categorical };
  struct Axis {
    std::string path;
    sweep::Distribution distribution = sweep::Distribution::Values;
    Scale scale = Scale::Linear;
    double lo = 0, hi = 1;                // Linear and Log: the range (the spec's, widened to the trials' values)
    std::vector<std::string> categories;  // Categorical: the listed values, canonical text, in the spec's order
  };
  struct Trial {
    store::TrialRecord record;
    std::optional<long long> steps;  // the highest step its run recorded
    std::optional<long long> rank;   // 1 for the best; finished then stopped trials with a metric
    bool best = false;
  };
  // One ended trial (finished, stopped, failed, killed) in the order trials ended.
  struct HistoryPoint {
    long long index = 0;
    store::TrialState state = store::TrialState::Finished;
    double metric = store::kNoTime;      // NaN: none
    double bestSoFar = store::kNoTime;   // the best finished metric up to here; NaN: none yet
  };

  store::SweepRecord sweep;
  std::string source;  // the store's location
  std::map<store::TrialState, long long> counts;  // every state, zero included
  std::vector<Axis> axes;                          // the spec's parameters, in order
  std::vector<Trial> trials;                       // best first (see sweep_html.cpp)
  std::vector<HistoryPoint> history;
  std::optional<long long> best;                   // the best trial's index
  sweep::ImportanceResult importance;
};

// `runSteps`: run id -> the highest step the run recorded, for the trials' runs.
SweepReport buildSweepReport(const store::SweepRecord& sweep, const std::vector<store::TrialRecord>& trials,
                             const std::map<long long, long long>& runSteps, const std::string& source);

// The document of `ipu report --sweep --json` (docs/sweeps.md, "Report").
nlohmann::json sweepReportJson(const SweepReport& report);

// The page; `title` is its heading.
std::string sweepReportHtml(const SweepReport& report, const std::string& title);

}  // namespace ipu::report
