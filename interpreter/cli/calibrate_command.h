// `ipu calibrate TABLE.csv`: plan every configuration in a table of measured
// throughput, fit the cost model's parameters (runtime/cost/calibrate.h),
// print the residuals, and write the parameters as an `.ipu` module of
// `let` records that a chip's `calibration:` field takes.
//
// The table is CSV with a header: label,script,run,phase,samples_per_s. Paths
// are relative to the table; empty run/phase mean the script's first.
#pragma once

#include <string>

#include "interpreter/base/terminal.h"

namespace ipu::cli {

// Returns the process exit code.
int calibrateCommand(const std::string& table, const std::string& output, base::ColorMode color);

}  // namespace ipu::cli
