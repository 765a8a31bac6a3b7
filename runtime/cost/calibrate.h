// Fitting the cost model's parameters to measured throughput. The same
// procedure serves the published table and a user's own measurements.
//
// Parameters: per chip, the matmul and convolution efficiencies; shared by all
// chips in the table (the tile, exchange and link architecture is the same
// across Mk2 chips), the latency of one operation in cycles, the fixed
// host-side cost of a step per framework the rows declare (and a default for
// other frameworks), the per-step update cost per parameter of a replica, and
// the latency of a cross-rack step over GW-Links. The attention factor is
// fixed, not fitted: the
// published rows cannot separate it from the matmul efficiency. The fit
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
  double ipus = 0, accumulation = 0;
  double measured = 0, predicted = 0;
  double looPredicted = 0;      // predicted by the fit on every other row (0 when not computed)
  double error() const { return predicted / measured - 1; }
  double looError() const { return looPredicted / measured - 1; }
};

// Mean, median and worst absolute relative error over the rows.
struct ErrorSummary {
  double mean = 0, median = 0, worst = 0;
};

struct FitResult {
  std::map<std::string, hw::Calibration> chips;  // by chip name, with their rows' leave-one-out errors
  std::vector<Residual> residuals;
  ErrorSummary inSample;
  ErrorSummary leaveOneOut;     // zero when not computed
  double meanAbsoluteError = 0; // in sample (inSample.mean)
  double maxAbsoluteError = 0;  // in sample (inSample.worst)
  std::vector<std::string> notes;  // parameters the data could not determine
};

// Fits the parameters on every row, then (with `leaveOneOut`) once more per
// row without it, and predicts the row left out: the honest figure of how the
// model does on a configuration it was not fitted on.
FitResult fitCalibration(std::vector<Measurement> rows, const std::string& source, double attentionFactor = 0.5,
                         bool leaveOneOut = true);

}  // namespace ipu::cost
