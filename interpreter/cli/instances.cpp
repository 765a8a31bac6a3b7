#include "interpreter/cli/instances.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "interpreter/base/terminal.h"
#include "interpreter/cli/command.h"

#ifdef IPU_HAVE_MPI
#include "runtime/mpi/mpi_instances.h"
#endif

namespace ipu::cli {

bool underMpirun() {
#ifdef IPU_HAVE_MPI
  return mpi::launchedByMpirun();
#else
  return false;
#endif
}

int launchInstances(int n, const std::vector<std::string>& args, const std::string& command) {
#ifndef IPU_HAVE_MPI
  (void)n;
  (void)args;
  std::cerr << "ipu " << command << ": error: this ipu was built without MPI, so it cannot run instances\n"
               "  help: install openmpi-bin and libopenmpi-dev (`./dev`), then rebuild (CMake finds MPI: IPU_MPI=AUTO)\n";
  return kUserError;
#else
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    std::cerr << "ipu " << command << ": error: cannot find this program's path to start its instances\n";
    return kUserError;
  }
  self[len] = '\0';
  // Ctrl-C: mpirun passes SIGTERM on to the instances, which stop at the
  // next step and write their last checkpoint; by default it sends SIGKILL a
  // second later, which a large model's checkpoint may not make.
  std::vector<std::string> argv{"mpirun", "-n", std::to_string(n), "--oversubscribe", "--mca", "odls_base_sigkill_timeout", "60"};
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
  std::cout.flush();
  std::cerr.flush();
  ::execvp("mpirun", cargs.data());
  std::cerr << "ipu " << command << ": error: cannot start `mpirun` for --instances " << n
            << "\n  help: install openmpi-bin (Debian), or start `mpirun -n " << n << " ipu " << command << " ...` yourself\n";
  return kUserError;
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
  if (rank == 0 && !allOk && exitCode == kOk) return kUserError;
  return exitCode;
#else
  (void)instances;
  (void)message;
  return exitCode;
#endif
}

}  // namespace ipu::cli
