#include "runtime/emulator/thread_pool.h"

namespace ipu::emu {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run(std::size_t n, const std::function<void(std::size_t)>& task) {
  if (n == 0) return;
  if (workers_.empty() || n == 1) {
    for (std::size_t i = 0; i < n; ++i) task(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = &task;
    next_ = 0;
    count_ = n;
    finished_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  // The caller works too.
  for (;;) {
    std::size_t i;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (next_ >= count_) break;
      i = next_++;
    }
    task(i);
    std::lock_guard<std::mutex> lock(mu_);
    if (++finished_ == count_) done_.notify_all();
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return finished_ == count_; });
  task_ = nullptr;
}

void ThreadPool::work() {
  unsigned long long seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && task_ != nullptr && next_ < count_); });
    if (stop_) return;
    seen = generation_;
    while (task_ != nullptr && next_ < count_) {
      const std::size_t i = next_++;
      const auto* task = task_;
      lock.unlock();
      (*task)(i);
      lock.lock();
      if (++finished_ == count_) done_.notify_all();
    }
  }
}

}  // namespace ipu::emu
