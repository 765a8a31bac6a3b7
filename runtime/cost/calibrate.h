// Fitting the cost model's parameters to measured throughput. The same
// procedure serves the published table and a user's own measurements.
//
// Parameters: per chip, the matmul and convolution efficiencies; shared by all
// chips in the table, the latency of one operation in cycles (the tile and
// exchange architecture is the same across Mk2 chips) and the fixed cost of a
// step in seconds (host-side). The attention factor is fixed, not fitted: the
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
  double measured = 0, predicted = 0;
  double error() const { return predicted / measured - 1; }
};

struct FitResult {
  std::map<std::string, hw::Calibration> chips;  // by chip name
  std::vector<Residual> residuals;
  double meanAbsoluteError = 0;
  double maxAbsoluteError = 0;
  std::vector<std::string> notes;  // parameters the data could not determine
};

FitResult fitCalibration(std::vector<Measurement> rows, const std::string& source, double attentionFactor = 0.5);

}  // namespace ipu::cost
