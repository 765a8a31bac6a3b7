#include "interpreter/cli/instances.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

#include "interpreter/base/terminal.h"
#include "interpreter/cli/command.h"

#ifdef IPU_HAVE_MPI
#include "runtime/mpi/mpi_instances.h"
#endif

namespace ipu::cli {

#ifdef IPU_HAVE_MPI
namespace {

// The file in which instance 0 leaves the job's exit code for the `ipu
// COMMAND --instances N` that launched it (launchInstances). Every instance
// then exits 0: Open MPI's mpirun (4.1, Debian 12) treats an instance's
// non-zero exit as a failure to abort the job, and with the longer SIGKILL
// grace it is given here that abort hung for two minutes and then crashed in
// PMIx_Finalize, though the instances had already agreed and ended.
constexpr const char* kStatusVariable = "IPU_INSTANCES_STATUS";

// The mpirun this process started, for the signal handler below.
volatile sig_atomic_t gMpirun = 0;
volatile sig_atomic_t gInterrupts = 0;

// Ctrl-C (or SIGTERM) of `ipu COMMAND --instances N`: the first asks the
// instances to stop at the next step, through mpirun, which passes SIGUSR2
// on to them; a second one is mpirun's own Ctrl-C, which ends the job.
// mpirun runs in a process group of its own, so a terminal's Ctrl-C reaches
// only this process: mpirun's Ctrl-C would kill the instances a second after
// asking them to stop, too soon for a checkpoint, and a longer grace
// (`odls_base_sigkill_timeout`) made Open MPI 4.1's mpirun hang.
void forwardInterrupt(int) {
  const pid_t mpirun = static_cast<pid_t>(gMpirun);
  if (mpirun <= 0) return;
  ::kill(mpirun, gInterrupts++ == 0 ? SIGUSR2 : SIGINT);
}

}  // namespace
#endif

bool underMpirun() {
#ifdef IPU_HAVE_MPI
  return mpi::launchedByMpirun();
#else
  return false;
#endif
}

bool instancesAvailable(const std::string& command) {
#ifdef IPU_HAVE_MPI
  (void)command;
  return true;
#else
  std::cerr << "ipu " << command << ": error: this ipu was built without MPI, so it cannot run instances\n"
               "  help: install openmpi-bin and libopenmpi-dev (`./dev`), then rebuild (CMake finds MPI: IPU_MPI=AUTO)\n";
  return false;
#endif
}

int launchInstances(int n, const std::vector<std::string>& args, const std::string& command) {
#ifndef IPU_HAVE_MPI
  (void)n;
  (void)args;
  instancesAvailable(command);
  return kUserError;
#else
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    std::cerr << "ipu " << command << ": error: cannot find this program's path to start its instances\n";
    return kUserError;
  }
  self[len] = '\0';
  // Ctrl-C: see forwardInterrupt. Standard input goes to no instance: mpirun
  // runs in a process group of its own, which may not read the terminal.
  std::vector<std::string> argv{"mpirun", "-n", std::to_string(n), "--oversubscribe", "--stdin", "none", "-x", kStatusVariable};
  // Open MPI refuses root without being told; a container's user often is root.
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.push_back(self);
  argv.push_back(command);
  bool threads = false, color = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--color" || args[i].rfind("--color=", 0) == 0) color = true;
    if (args[i] == "--instances") {
      ++i;
      continue;
    }
    if (args[i].rfind("--instances=", 0) == 0) continue;
    if (args[i] == "--threads" || args[i].rfind("--threads=", 0) == 0) threads = true;
    argv.push_back(args[i]);
  }
  // The instances write through mpirun's pseudo-terminals, which say
  // "terminal" even when this process's output goes to a pipe: colour is
  // decided here, where the user's terminal (or pipe) is seen.
  if (!color) {
    argv.push_back("--color");
    argv.push_back(base::shouldColor(base::ColorMode::Auto, 1) && base::shouldColor(base::ColorMode::Auto, 2) ? "always"
                                                                                                               : "never");
  }
  // The instances share this host's cores: by default each takes its share.
  if (!threads) {
    argv.push_back("--threads");
    argv.push_back(std::to_string(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / n)));
  }
  std::vector<char*> cargs;
  for (auto& a : argv) cargs.push_back(&a[0]);
  cargs.push_back(nullptr);
  // Where instance 0 leaves the job's exit code (kStatusVariable).
  const char* tmp = std::getenv("TMPDIR");
  std::string status = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ipu-instances-XXXXXX";
  const int fd = ::mkstemp(&status[0]);
  if (fd < 0) {
    std::cerr << "ipu " << command << ": error: cannot make a file in " << (tmp != nullptr ? tmp : "/tmp")
              << " for the instances' exit status\n  help: set TMPDIR to a directory you can write\n";
    return kUserError;
  }
  ::close(fd);
  ::setenv(kStatusVariable, status.c_str(), 1);
  std::cout.flush();
  std::cerr.flush();
  // Ctrl-C reaches this process alone (forwardInterrupt); the instances stop
  // at a step and say so through the status file, while this process waits.
  struct sigaction forward {}, oldInt{}, oldTerm{};
  forward.sa_handler = forwardInterrupt;
  sigemptyset(&forward.sa_mask);
  gInterrupts = 0;
  ::sigaction(SIGINT, &forward, &oldInt);
  ::sigaction(SIGTERM, &forward, &oldTerm);
  const pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);
    ::sigaction(SIGINT, &oldInt, nullptr);
    ::sigaction(SIGTERM, &oldTerm, nullptr);
    ::execvp("mpirun", cargs.data());
    std::cerr << "ipu " << command << ": error: cannot start `mpirun` for --instances " << n
              << "\n  help: install openmpi-bin (Debian), or start `mpirun -n " << n << " ipu " << command << " ...` yourself\n";
    std::_Exit(127);
  }
  if (child > 0) {
    ::setpgid(child, child);   // before the exec too (either may run first)
    gMpirun = child;
  }
  int waited = 0;
  while (child > 0 && ::waitpid(child, &waited, 0) < 0 && errno == EINTR) {
  }
  gMpirun = 0;
  ::sigaction(SIGINT, &oldInt, nullptr);
  ::sigaction(SIGTERM, &oldTerm, nullptr);
  int code = -1;
  if (std::ifstream in(status); in) in >> code;
  std::remove(status.c_str());
  if (code >= 0) return code;
  // No status: the job did not reach its end (mpirun could not start, an
  // instance was killed); mpirun said why.
  if (child < 0) {
    std::cerr << "ipu " << command << ": error: cannot start `mpirun`: " << std::strerror(errno) << "\n";
    return kUserError;
  }
  if (WIFEXITED(waited)) return WEXITSTATUS(waited) == 127 ? kUserError : std::max(1, WEXITSTATUS(waited));
  return WIFSIGNALED(waited) ? 128 + WTERMSIG(waited) : kUserError;
#endif
}

std::shared_ptr<emu::Instances> joinInstances(std::string& error) {
#ifdef IPU_HAVE_MPI
  if (!mpi::launchedByMpirun()) return nullptr;
  return mpi::start(error);
#else
  (void)error;
  return nullptr;
#endif
}

int defaultInstanceThreads() {
  int local = 1;
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(v));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / local);
}

int finishInstances(emu::Instances& instances, int exitCode, const std::string& message) {
#ifdef IPU_HAVE_MPI
  // Ctrl-C (130) and success leave the job intact; anything else is a failure.
  const bool ok = exitCode == kOk || exitCode == 130;
  std::string failures;
  const int rank = instances.rank();
  const bool allOk = mpi::finish(instances, ok, message, failures);
  if (rank == 0 && !failures.empty()) std::cerr << "ipu run: error: " << failures;
  const int code = rank == 0 && !allOk && exitCode == kOk ? kUserError : exitCode;
  // Launched by `--instances` (kStatusVariable): instance 0 hands the code
  // to the launcher, and every instance leaves mpirun a clean exit.
  if (const char* status = std::getenv(kStatusVariable); status != nullptr && *status != '\0') {
    if (rank == 0) {
      std::ofstream out(status, std::ios::trunc);
      out << code << "\n";
    }
    return kOk;
  }
  return code;
#else
  (void)instances;
  (void)message;
  return exitCode;
#endif
}

}  // namespace ipu::cli
