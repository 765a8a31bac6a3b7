// `ipu report --sweep SWEEP [-o FILE] [--json]`: the report of one sweep of
// the run store, as one self-contained HTML file or as JSON
// (interpreter/report/sweep_html.h; docs/sweeps.md "Report"). `ipu report`
// hands its arguments here when they name a sweep.
#pragma once

#include <string>
#include <vector>

namespace ipu::cli {

// True when `args` (after `report`) ask for a sweep's report.
bool wantsSweepReport(const std::vector<std::string>& args);

// `args` are the arguments after `report`. Returns the process exit code
// (0 written, 1 no such sweep or store, a store error, a file not written;
// 2 a usage error).
int sweepReportCommand(const std::vector<std::string>& args);

}  // namespace ipu::cli
