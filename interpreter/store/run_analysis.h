// What listings and comparisons of runs compute from records, shared by
// `ipu runs` (list, compare) and `ipu ui` (its table and comparison page), so
// the terminal and the page order and compare runs alike.
#pragma once

#include <string>
#include <vector>

#include "interpreter/store/filter.h"
#include "interpreter/store/run_store.h"

namespace ipu::store {

// Orders runs by a field (stable): numbers as numbers, text as text, runs
// without the field last in either direction.
void sortRuns(std::vector<RunRecord>& runs, const Field& field, bool descending);

// "-loss" or "loss:desc": descending; "loss" or "loss:asc": ascending. The
// name left once the direction is taken off.
std::string sortKey(const std::string& spec, bool& descending);

// The parameters whose values are not the same in every run (a parameter
// some runs lack counts as differing), sorted by name.
std::vector<std::string> differingParameters(const std::vector<RunRecord>& runs);

// The columns that tell listed runs apart, after the built-in ones: up to
// four parameters that differ among `runs` (the plain ones first, then
// per-phase ones), then `loss` and `samples_per_s` when runs have them.
std::vector<Field> tellingColumns(const std::vector<RunRecord>& runs, const FieldResolver& names);

// Predicted against measured: a run of kind `run` with the newest estimate of
// the same plan (same plan hash), and per metric both record: the estimate's
// value against the mean of the run's finite points.
struct PredictedMetric {
  std::string key;
  double predicted = kNoTime;
  double measuredMean = kNoTime;  // NaN: no finite point
};
struct EstimatePairing {
  const RunRecord* run = nullptr;  // into the runs given
  RunRecord estimate;
  std::vector<PredictedMetric> metrics;  // by key
};
// `all`: every run of the store, newest first (listRuns()).
std::vector<EstimatePairing> pairWithEstimates(RunStore& store, const std::vector<RunRecord>& runs,
                                               const std::vector<RunRecord>& all);

}  // namespace ipu::store
