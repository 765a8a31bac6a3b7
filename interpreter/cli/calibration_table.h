// The table `ipu calibrate` fits: read and checked before any fitting, so a
// typo in a measurement is an error at its line rather than a degenerate
// calibration (or a crash in the fit). Checked, in order:
//
// - the file is a regular file of reasonable size (runtime/files), with the
//   header `label,script,run,phase,samples_per_s`;
// - every throughput is one plain decimal number, finite and positive (not
//   `inf`, `nan`, `0x1p3`, `12abc`), between 1e-3 and 1e9 samples/s;
// - once planned, every throughput is within a factor of 100 of what the
//   uncalibrated cost model predicts for its configuration (the fit's
//   parameters cannot move the prediction further, so such a row is a typo or
//   a different unit);
// - there are at least as many rows as parameters to fit;
// - the fitted parameters are finite and in range before they are written.
#pragma once

#include <string>
#include <vector>

#include "runtime/cost/calibrate.h"

namespace ipu::cli {

struct TableProblem {
  int line = 0;  // 1-based line of the table; 0 for the table as a whole
  std::string message;
};

struct TableRow {
  int line = 0;
  std::string label, script, run, phase;
  double samplesPerSecond = 0;
};

struct CalibrationTable {
  std::vector<TableRow> rows;
  std::vector<TableProblem> problems;
};

// Reads and checks the table's text (the first group of checks above).
CalibrationTable readCalibrationTable(const std::string& path);

// `measured` against the uncalibrated model's prediction for `phase`; empty
// when plausible, else why not.
std::string implausibleMeasurement(double measured, const ir::PhasePlan& phase);

// Parameters `fitCalibration` fits for these rows (2 shared + 2 per chip
// architecture, cost::architectureOf).
std::size_t parametersToFit(const std::vector<cost::Measurement>& rows);

// Why the fitted result cannot be written ("" when it can).
std::string degenerateFit(const cost::FitResult& fit);

// A throughput for a table of people: at most 12 significant characters,
// never hundreds of digits.
std::string throughputText(double samplesPerSecond);

}  // namespace ipu::cli
