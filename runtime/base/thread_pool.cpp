#include "runtime/base/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace ipu {

namespace {
constexpr auto kPoll = std::chrono::microseconds(50);
}

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

bool ThreadPool::runOne(Job& job, std::unique_lock<std::mutex>& lock) {
  if (job.next >= job.count) return false;
  const std::size_t i = job.next++;
  if (job.next == job.count) {
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
    pending_.store(jobs_.size(), std::memory_order_relaxed);
  }
  lock.unlock();
  (*job.task)(i);
  lock.lock();
  if (job.finished.fetch_add(1, std::memory_order_release) + 1 == job.count && waiting_ > 0) done_.notify_all();
  return true;
}

void ThreadPool::run(std::size_t n, const std::function<void(std::size_t)>& task) {
  if (n == 0) return;
  if (workers_.empty() || n == 1) {
    for (std::size_t i = 0; i < n; ++i) task(i);
    return;
  }
  Job job;
  job.task = &task;
  job.count = n;
  std::unique_lock<std::mutex> lock(mu_);
  jobs_.push_back(&job);
  pending_.store(jobs_.size(), std::memory_order_relaxed);
  wake_.notify_all();
  // The caller works through its own tasks, then waits for those others run:
  // polling first, as idle workers do (the last tasks usually end within
  // microseconds, and sleeping and being woken costs more), then asleep.
  while (runOne(job, lock)) {
  }
  if (job.finished != job.count) {
    lock.unlock();
    const auto until = std::chrono::steady_clock::now() + kPoll;
    while (job.finished.load(std::memory_order_acquire) != job.count && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
    lock.lock();
  }
  ++waiting_;
  done_.wait(lock, [&] { return job.finished == job.count; });
  --waiting_;
}

// An idle worker polls for new work for a short while before it sleeps: a
// kernel's parallel regions follow each other within microseconds, and waking
// a sleeping thread costs more than that.
void ThreadPool::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (jobs_.empty() && !stop_) {
      lock.unlock();
      const auto until = std::chrono::steady_clock::now() + kPoll;
      while (pending_.load(std::memory_order_relaxed) == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      lock.lock();
    }
    wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    runOne(*jobs_.back(), lock);
  }
}

}  // namespace ipu
