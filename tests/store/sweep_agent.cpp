// An agent for the sweep-store concurrency test (sweep_store_test.cpp,
// SweepAgents): the loop of sweep_store.h, with "training a trial" being a
// sleep. It appends `claim KEY AGENT` when it claims a trial and `done KEY
// AGENT` when the trial's work is over (before it is recorded), one write(2)
// of O_APPEND each, so the lines of several agents never interleave. A
// thread heartbeats the trial and stops it if the lease is lost or the
// sweep cancelled.
//
//   ipu_sweep_agent STORE SWEEP LOG AGENT TRIAL_SECONDS STALE_AFTER HEARTBEAT_SECONDS
//   ipu_sweep_agent create STORE SWEEP      (the grid of sweep_grid.h, for the command's tests)
//
// Exits 0 when the sweep is finished or cancelled, 1 on a store error.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "interpreter/store/sweep_store.h"
#include "tests/store/sweep_grid.h"

namespace {

void appendLine(const std::string& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return;
  std::string text = line + "\n";
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::cerr << "short write\n";
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ipu::store;
  if (argc == 4 && std::string(argv[1]) == "create") {
    try {
      auto store = openSweepStore(argv[2], OpenMode::Create);
      store->createOrResumeSweep(ipu::testing::gridSpec(argv[3]), "// made by ipu_sweep_agent\n", nowSeconds());
      return 0;
    } catch (const StoreError& e) {
      std::cerr << e.what() << "\n";
      return 1;
    }
  }
  if (argc != 8) {
    std::cerr << "usage: ipu_sweep_agent STORE SWEEP LOG AGENT TRIAL_SECONDS STALE_AFTER HEARTBEAT_SECONDS\n";
    return 2;
  }
  const std::string location = argv[1], sweepName = argv[2], log = argv[3], agent = argv[4];
  const double trialSeconds = std::atof(argv[5]), staleAfter = std::atof(argv[6]), every = std::atof(argv[7]);
  try {
    auto store = openSweepStore(location, OpenMode::Existing);
    auto sweep = store->sweep(sweepName);
    if (!sweep) {
      std::cerr << agent << ": no sweep " << sweepName << "\n";
      return 1;
    }
    ClaimOptions options;
    options.agent = agent;
    options.staleAfter = staleAfter;
    for (;;) {
      Claim c = store->claimTrial(sweep->id, options, ipu::testing::nextGridCell, nowSeconds());
      if (c.outcome == ClaimOutcome::Wait || c.outcome == ClaimOutcome::Paused) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (c.outcome != ClaimOutcome::Trial) return 0;
      appendLine(log, "claim " + c.trial.key + " " + agent);
      std::atomic<LeaseState> held{LeaseState::Held};
      std::mutex m;
      std::condition_variable cv;
      bool over = false;
      std::thread beat([&] {
        std::unique_lock<std::mutex> lock(m);
        while (!cv.wait_for(lock, std::chrono::duration<double>(every), [&] { return over; }))
          if (held == LeaseState::Held) held = store->heartbeatTrial(c.lease, nowSeconds());
      });
      const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(trialSeconds);
      while (held == LeaseState::Held && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      {
        std::lock_guard<std::mutex> lock(m);
        over = true;
      }
      cv.notify_one();
      beat.join();
      if (held == LeaseState::Lost) continue;  // someone else runs this trial now
      if (held == LeaseState::Cancelled) {
        store->endTrial(c.lease, {TrialState::Killed, kNoTime, std::nullopt, "the sweep was cancelled"}, nowSeconds());
        continue;
      }
      appendLine(log, "done " + c.trial.key + " " + agent);
      store->endTrial(c.lease, {TrialState::Finished, ipu::testing::testMetric(c.trial.assignment), std::nullopt, ""},
                      nowSeconds());
    }
  } catch (const StoreError& e) {
    std::cerr << agent << ": " << e.what() << "\n";
    return 1;
  }
}
