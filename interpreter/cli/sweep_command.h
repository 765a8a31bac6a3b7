// `ipu sweep`: administer the sweeps of the run store (docs/sweeps.md, "Agents
// and the store").
//
//   ipu sweep list                 ipu sweep status SWEEP
//   ipu sweep pause SWEEP          ipu sweep resume SWEEP       ipu sweep cancel SWEEP
//
// each with --store PATH|URI (else $IPU_STORE, else <--runs-dir>/ipu.db) and
// --json. Kept in its own file, with one entry point taking the command's own
// arguments, like `ipu runs`.
#pragma once

#include <string>
#include <vector>

namespace ipu::cli {

// `args` are the arguments after `sweep`. Returns the process exit code
// (0 done, 1 a store error or an unknown sweep, 2 a usage error).
int sweepCommand(const std::vector<std::string>& args);

}  // namespace ipu::cli
