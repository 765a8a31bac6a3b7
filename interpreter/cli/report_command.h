// `ipu report [IDS | --where FILTER] -o report.html`: one self-contained HTML
// file of recorded runs, with their curves, parameters, and for many runs
// parallel coordinates and a scatter (interpreter/report/runs_html.h;
// docs/tracking.md). Its own file with one entry point, so the command
// line's dispatch needs only a line for it.
#pragma once

#include <string>
#include <vector>

namespace ipu::cli {

// `args` are the arguments after `report`. Returns the process exit code.
int reportCommand(const std::vector<std::string>& args);

}  // namespace ipu::cli
