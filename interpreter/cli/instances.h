// `ipu run` as the instances of an MPI job (docs/run.md, "Across processes
// and hosts"): starting mpirun for `--instances N`, joining the job when
// mpirun started this process, and ending it. Without MPI in the build
// (IPU_MPI), joining finds no job and launching says how to get one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/emulator/instances.h"

namespace ipu::cli {

// Whether mpirun (or another PMI launcher) started this process.
bool underMpirun();

// `ipu COMMAND ARGS --instances N` (`run`, `agent`): runs `mpirun -n N
// --oversubscribe` with `ipu COMMAND ARGS` on this host (each instance with
// hardware threads / N host threads unless --threads says otherwise), waits
// for it, and returns the job's exit code as instance 0 left it (130 after
// Ctrl-C), or mpirun's when the job did not reach its end.
int launchInstances(int n, const std::vector<std::string>& args, const std::string& command = "run");
// Whether this ipu can start instances (it was built with MPI); when not,
// says so as `ipu COMMAND` and what to do.
bool instancesAvailable(const std::string& command);

// The job this process belongs to; null when mpirun did not start it (or
// the build has no MPI), or when MPI failed to start (`error` then says why).
std::shared_ptr<emu::Instances> joinInstances(std::string& error);

// The host threads an instance uses by default: the hardware threads shared
// by the instances on this host.
int defaultInstanceThreads();

// Ends the job (every instance calls it): this instance's exit code and,
// when it failed without having printed why, its message. Instance 0 prints
// the other instances' failures. Returns the exit code for this process:
// instance 0's is 1 if any instance failed.
int finishInstances(emu::Instances& instances, int exitCode, const std::string& message);

}  // namespace ipu::cli
