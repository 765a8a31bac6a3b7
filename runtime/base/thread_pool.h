// Host threads for work split into tasks: the emulator's virtual IPUs (a BSP
// superstep is one `run`: every task, one virtual IPU group's work for the
// superstep, runs to completion before `run` returns, which is the sync) and
// the mapping search's workers (interpreter/search: one task per worker, each
// searching groups of one wave). Tasks touch only their own buffers, so the
// result never depends on how many threads there are or which thread ran
// which task.
//
// `run` nests: a task may itself call `run` (a kernel splitting a matrix
// product into row blocks, attention into its heads). The nested tasks go to
// the same threads: the caller works through its own tasks while idle threads
// help, so one IPU alone uses every thread and several IPUs running at once
// share them without oversubscribing the host. Callers split work so that no
// result depends on the split: by sizes, never by the number of threads,
// except where the arithmetic is shown not to depend on the split (an fp32
// product's row blocks, emulator/numerics.cpp). So nesting changes no result.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ipu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 1: everything on the caller's thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Run task(i) for i in [0, n); returns when all are done. May be called
  // from inside a task.
  void run(std::size_t n, const std::function<void(std::size_t)>& task);

 private:
  struct Job {
    const std::function<void(std::size_t)>* task = nullptr;
    std::size_t count = 0, next = 0;
    std::atomic<std::size_t> finished{0};   // changed under the lock; the caller polls it without
  };
  // Claim and run one task of `job`; false when none is left to claim. Called with `lock` held.
  bool runOne(Job& job, std::unique_lock<std::mutex>& lock);
  void work();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<Job*> jobs_;   // with unclaimed tasks; the newest (innermost) is served first
  std::atomic<std::size_t> pending_{0};   // jobs_.size(), readable without the lock (idle workers poll it)
  int waiting_ = 0;   // callers asleep on done_ (guarded by mu_)
  bool stop_ = false;
};

}  // namespace ipu
