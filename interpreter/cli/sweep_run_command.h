// Running sweeps (docs/sweeps.md, "Running a sweep"):
//
//   ipu sweep FILE [NAME] [--store URL] [--count N] [--runs-dir D] [--steps N] [--threads N]
//       creates the sweep NAME of FILE in the run store, or resumes it (its
//       failed and killed trials queued again), and runs an agent on it;
//   ipu agent SWEEP [--store URL] [--count N] [--runs-dir D] [--script-dir D] [--steps N] [--threads N]
//       runs an agent on a sweep already in the store (from another process or host);
//   ipu sweep create FILE [NAME] [--store URL]
//       creates (or resumes) it and runs no agent.
//
// Progress goes to stderr, one line per trial; a summary to stdout.
#pragma once

#include <string>
#include <vector>

namespace ipu::cli {

// `args` are the arguments after `sweep` (the first is the script) and after
// `agent`. Return the exit code: 0 the agent ended normally (the sweep is
// done, paused or cancelled, or `--count` trials ran), 1 a user error (the
// script has errors, an unknown sweep, a store that fails), 2 a usage error,
// 130 interrupted.
// With `Agent::None` (`ipu sweep create FILE [NAME]`), the sweep is created
// or resumed and no agent runs: agents join with `ipu agent`.
enum class SweepAgent { Run, None };
int sweepRunCommand(const std::vector<std::string>& args, SweepAgent agent = SweepAgent::Run);
int agentCommand(const std::vector<std::string>& args);

}  // namespace ipu::cli
