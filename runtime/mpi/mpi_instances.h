// The MPI implementation of emu::Instances (runtime/emulator/instances.h),
// built when CMake finds MPI (IPU_MPI). This header names no MPI type, so
// the command line includes it without MPI's headers.
#pragma once

#include <memory>
#include <string>

#include "runtime/emulator/instances.h"

namespace ipu::mpi {

// Whether this process was started by mpirun (Open MPI's, or another PMI launcher's, variables).
bool launchedByMpirun();

// Initialises MPI (threads: MPI_THREAD_MULTIPLE, which distributed batch
// norm's exchanges need) and returns the instances of the job; null with
// `error` set when MPI cannot start or lacks thread support.
std::shared_ptr<emu::Instances> start(std::string& error);

// The end of a job, entered by every instance: whether this one succeeded,
// and its message if not. Instance 0 gets the failed instances' messages
// in `failures` when it succeeded itself (when it failed, it reported the
// failure, which the others met too); returns whether every instance succeeded.
// An instance that failed waits at most `patienceSeconds` for the others to
// arrive (they may be blocked waiting for it), then stops the job; one that
// succeeded waits as long as it takes. Finalises MPI.
bool finish(emu::Instances& instances, bool ok, const std::string& message, std::string& failures,
            double patienceSeconds = 30);

}  // namespace ipu::mpi
