// Fitting the cost model's parameters to measured throughput. The same
// procedure serves the published table and a user's own measurements.
//
// Parameters: per chip architecture (architectureOf), the matmul and
// convolution efficiencies; shared by all chips, the latency of one operation
// in cycles and the per-step update cost per parameter of a replica. Not
// fitted, each for a reason stated in calibrate.cpp: the attention factor
// (the published rows cannot separate it from the matmul efficiency), the
// host round trip `step_overhead` (0), a cost per framework (none), and the
// GW-Link latency (the machine's). The fit
// minimises the sum of squared log errors (relative errors, symmetric) with
// Nelder-Mead from fixed starting points, so it is deterministic.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/ir/execution_plan.h"

namespace ipu::cost {

struct Measurement {
  std::string label;
  ir::PhasePlan phase;          // planned configuration (its chip's calibration is replaced while fitting)
  double samplesPerSecond = 0;  // measured
};

struct Residual {
  std::string label;
  std::string chip;
  std::string family;           // familyOf(phase)
  std::string group;            // configurationGroup(phase)
  double ipus = 0, accumulation = 0;
  // The regime the row ran in (hw::Calibration::Row): estimates say when they leave it.
  double microBatch = 0, memory = 0;
  bool phased = false, recomputes = false;
  std::string software;         // the row's declared `software`
  double measured = 0, predicted = 0;
  double looPredicted = 0;      // predicted by the fit on every other row (0 when not computed)
  double logoPredicted = 0;     // predicted by the fit on every other group's rows (0 when not computed)
  double error() const { return predicted / measured - 1; }
  double looError() const { return looPredicted / measured - 1; }
  double logoError() const { return logoPredicted / measured - 1; }
};

// Mean, median and worst absolute relative error over the rows.
struct ErrorSummary {
  double mean = 0, median = 0, worst = 0;
};

struct FitResult {
  std::map<std::string, hw::Calibration> chips;  // by chip name, with their rows' cross-validated errors
  std::vector<Residual> residuals;
  ErrorSummary inSample;
  ErrorSummary leaveOneOut;     // zero when not computed
  ErrorSummary leaveOneGroupOut;   // zero when not computed
  std::size_t groups = 0;       // configuration groups among the rows
  double meanAbsoluteError = 0; // in sample (inSample.mean)
  double maxAbsoluteError = 0;  // in sample (inSample.worst)
  std::vector<std::string> notes;  // parameters the data could not determine
};

// The configuration a row measures, for grouped cross-validation: the model
// (its kinds of layers and its parameter count), the pipeline's shape (IPUs
// per pipeline, tensor sharding) and the micro batch. Rows that differ only
// in framework, release, chip, pod size or accumulation are one group: a row
// left out on its own leaves its near-copies in the fit, which then predicts
// it from them rather than from the model.
std::string configurationGroup(const ir::PhasePlan& phase);

// Chips with the same tiles, per-tile arithmetic and memory are one
// architecture at different clocks (the Bow is the GC200 at 1.85 GHz): the
// share of peak their matmuls and convolutions reach is the same, and the
// clock enters through the peak, so the fit gives them one pair of
// efficiencies. That also lets rows of one chip inform the other, so a
// configuration group left out does not leave a chip's efficiency
// undetermined.
std::string architectureOf(const hw::Chip& chip);

// Fits the parameters on every row, then (with `crossValidate`) once more per
// row without it, predicting the row left out, and once more per
// configuration group without the group's rows, predicting them: the honest
// figure of how the model does on a configuration it was not fitted on is the
// last (leave-one-group-out).
FitResult fitCalibration(std::vector<Measurement> rows, const std::string& source, double attentionFactor = 0.5,
                         bool crossValidate = true);

}  // namespace ipu::cost
