// Host threads that run the virtual IPUs' compute phases. A BSP superstep is
// one `run`: every task (one virtual IPU group's work for the superstep)
// runs to completion before `run` returns, which is the sync. Tasks touch
// only their own IPU's buffers, so the result never depends on how many
// threads there are or which thread ran which task.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ipu::emu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 1: everything on the caller's thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Run task(i) for i in [0, n); returns when all are done.
  void run(std::size_t n, const std::function<void(std::size_t)>& task);

 private:
  void work();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t)>* task_ = nullptr;
  std::size_t next_ = 0, count_ = 0, finished_ = 0;
  unsigned long long generation_ = 0;
  bool stop_ = false;
};

}  // namespace ipu::emu
