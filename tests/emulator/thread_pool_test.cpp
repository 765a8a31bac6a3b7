// The host threads' pool (runtime/emulator/thread_pool.h): every task runs
// exactly once, `run` returns only after all of its tasks ended, and a task
// may itself call `run`. The caller polls for the tasks others run before it
// sleeps, and returns the moment they end; a job lives on the caller's stack,
// so a pool that touched it after the caller returned would show here as
// lost or doubled counts (and under a sanitizer as a use after return).
#include "runtime/base/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace ipu::emu {
namespace {

// The first min(n, threads) tasks wait for each other, so that they run on
// different threads at once (a caller that ran every task itself would
// test nothing); gives up after 10 s (a loaded host schedules every thread
// well within that), which fails the test. Waiting threads yield: there
// may be more of them than cores.
class Rendezvous {
 public:
  explicit Rendezvous(int parties) : parties_(parties) {}
  bool meet() {
    arrived_.fetch_add(1);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived_.load() < parties_) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::yield();
    }
    return true;
  }

 private:
  const int parties_;
  std::atomic<int> arrived_{0};
};

void spinFor(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST(ThreadPool, RunsEveryTaskOnceBeforeReturning) {
  for (int threads : {2, 4}) {
    ThreadPool pool(threads);
    // More threads than this host's cores (2 in CI) are part of the test.
    for (int round = 0; round < 100; ++round) {
      const std::size_t n = 2 + static_cast<std::size_t>(round % 8);
      std::vector<std::atomic<int>> ran(n);
      std::atomic<bool> met{true};
      Rendezvous first(static_cast<int>(std::min<std::size_t>(n, static_cast<std::size_t>(threads))));
      std::atomic<std::size_t> claimed{0};
      pool.run(n, [&](std::size_t i) {
        if (claimed.fetch_add(1) < static_cast<std::size_t>(threads) && !first.meet()) met = false;
        // Tasks of different lengths: some end after the caller ran out of its own.
        spinFor(std::chrono::microseconds(3 * (i % 4)));
        ran[i].fetch_add(1);
      });
      ASSERT_TRUE(met.load()) << threads << " threads: the tasks did not run at once";
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(ran[i].load(), 1) << threads << " threads, round " << round << ", task " << i;
    }
  }
}

TEST(ThreadPool, NestedRunsCompleteInsideTheirTask) {
  ThreadPool pool(3);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::atomic<int>> inner(4 * 8);
    std::vector<int> sums(4, 0);
    pool.run(4, [&](std::size_t i) {
      pool.run(8, [&](std::size_t j) { inner[i * 8 + j].fetch_add(1); });
      // Every inner task of this outer task has ended when its run returns.
      int s = 0;
      for (std::size_t j = 0; j < 8; ++j) s += inner[i * 8 + j].load();
      sums[i] = s;
    });
    for (int s : sums) ASSERT_EQ(s, 8) << "round " << round;
  }
}

TEST(ThreadPool, WaitsForASlowTaskBeyondThePollingWindow) {
  // The task the other thread runs outlasts the caller's polling (50
  // microseconds): the caller then sleeps and must be woken by its end, not
  // return early or hang.
  ThreadPool pool(2);
  for (int round = 0; round < 5; ++round) {
    Rendezvous both(2);
    std::atomic<bool> met{true};
    std::atomic<int> done{0};
    std::atomic<std::size_t> callerTask{2};
    const auto caller = std::this_thread::get_id();
    pool.run(2, [&](std::size_t i) {
      if (!both.meet()) met = false;
      if (std::this_thread::get_id() == caller) callerTask = i;
      else std::this_thread::sleep_for(std::chrono::milliseconds(5));
      done.fetch_add(1);
    });
    ASSERT_TRUE(met.load());
    EXPECT_LT(callerTask.load(), 2u);
    EXPECT_EQ(done.load(), 2) << "round " << round;
  }
}

}  // namespace
}  // namespace ipu::emu
