// Batch norm's state in the trainer (docs/emulator.md, "Batch norm across
// replicas", "Running statistics"): the all-reduces between the replicas of
// a batch-norm group, the turns that keep the threads of distributed batch
// norm at about hostThreads computing, the running statistics, and the two
// BatchNormContexts the kernels see (kernel.h): one for a training step, one
// for held-out evaluation. Its own file because it is the trainer's only
// cross-thread rendezvous: the locking is easier to review in one place.
//
// PhaseTrainer::Impl's batch-norm members (runGroups, recordBatchNorm,
// recordedBatchNorm, updateRunningStatistics, runningTensors,
// setRunningTensors) are defined in trainer/batch_norm.cpp too.
#pragma once

#include <cmath>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "runtime/emulator/kernels/kernel.h"
#include "runtime/emulator/trainer.h"

namespace ipu::emu::trainer {

// Turns to compute: at most `n` holders at once. Distributed batch norm runs
// each virtual IPU group on a thread of its own (runGroups); the turns keep
// the host's compute at about `hostThreads` threads, and a thread waiting for
// the other replicas of its batch-norm group gives its turn up, so a wait
// never holds a turn another thread needs to get there.
class ComputeTurns {
 public:
  explicit ComputeTurns(int n) : free_(n) {}
  void acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

// Thrown into the threads waiting in a BatchNormExchange when another thread
// of the cycle failed (it will never arrive): the failure itself is rethrown.
struct ExchangeAborted {};

// The all-reduces of distributed batch norm: the replicas of a batch-norm
// group meet at the same point of the same layer (`Key`) with equally long
// vectors; the last to arrive adds them in replica order, so the result is
// the same whichever thread ran which replica, and in whatever order they came.
// With instances (instances.h) only `localMembers` of the group meet here;
// the last of them fetches the other members' parts from their instances
// (`remote`), so every instance adds the same parts in the same order.
class BatchNormExchange {
 public:
  // (batch-norm group, micro batch, layer, backward pass, exchange within the layer call)
  using Key = std::tuple<int, int, int, int, int>;
  // Fills the parts of the members other instances run.
  using Remote = std::function<void(std::vector<std::vector<double>>& parts)>;

  void allReduce(const Key& key, int member, int members, int localMembers, std::vector<double>& values, ComputeTurns& turns,
                 const Remote& remote = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    Meeting& m = meetings_[key];
    if (m.parts.empty()) m.parts.resize(static_cast<std::size_t>(members));
    m.parts[static_cast<std::size_t>(member)] = values;
    if (++m.arrived == localMembers) {
      if (remote) {
        // Waiting for other instances: without the lock (other meetings go
        // on) and without the turn (another instance may wait for a group
        // this one has yet to run). The local members have all arrived, so
        // nobody else touches m.parts; map nodes do not move.
        lock.unlock();
        turns.release();
        remote(m.parts);
        turns.acquire();
        lock.lock();
        if (aborted_) throw ExchangeAborted{};
      }
      m.sum = m.parts[0];
      for (std::size_t r = 1; r < m.parts.size(); ++r)
        for (std::size_t i = 0; i < m.sum.size(); ++i) m.sum[i] += m.parts[r][i];
      m.done = true;
      cv_.notify_all();
    } else {
      turns.release();
      cv_.wait(lock, [&] { return m.done || aborted_; });
      lock.unlock();
      turns.acquire();
      lock.lock();
      if (aborted_) throw ExchangeAborted{};
    }
    values = m.sum;
    if (++m.left == localMembers) meetings_.erase(key);
  }
  // A thread of the cycle failed: wake everyone waiting.
  void abort() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      aborted_ = true;
    }
    cv_.notify_all();
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = false;
    meetings_.clear();
  }

 private:
  struct Meeting {
    std::vector<std::vector<double>> parts;   // per member of the group
    std::vector<double> sum;
    int arrived = 0, left = 0;
    bool done = false;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Meeting> meetings_;
  bool aborted_ = false;
};

// Per channel, the running statistics of one batch-norm unit that held-out
// evaluation normalises with (PyTorch's running_mean and running_var).
struct RunningStatistics {
  std::vector<float> mean, var;
};

// PyTorch's BatchNorm2d default: running = (1 - momentum) running + momentum batch.
constexpr double kRunningMomentum = 0.1;

// The batch-norm context of one layer call of the training step
// (BatchNormContext, kernel.h): its replica meets the other replicas of its
// batch-norm group in the exchange, and what it normalised with is kept.
class StepBatchNorm final : public BatchNormContext {
 public:
  StepBatchNorm(PhaseTrainer::Impl& im, int replica, int micro, int layer, Mode mode, bool backward)
      : im_(im), replica_(replica), micro_(micro), layer_(layer), mode_(mode), backward_(backward) {}
  Mode mode() const override { return mode_; }
  void allReduce(std::vector<double>& sums) override;
  void record(BatchNormStatistics stats) override;
  const BatchNormStatistics& next() override;

 private:
  PhaseTrainer::Impl& im_;
  int replica_, micro_, layer_;
  Mode mode_;
  bool backward_;
  int calls_ = 0, units_ = 0;
};

// Held-out evaluation: every unit normalises with its running statistics.
class RunningBatchNorm final : public BatchNormContext {
 public:
  explicit RunningBatchNorm(const std::vector<RunningStatistics>& units) : units_(units) {}
  Mode mode() const override { return Mode::Evaluate; }
  void allReduce(std::vector<double>&) override {}
  void record(BatchNormStatistics) override {}
  const BatchNormStatistics& next() override {
    const RunningStatistics& r = units_.at(next_++);
    current_.mean = r.mean;
    current_.rstd.resize(r.var.size());
    for (std::size_t c = 0; c < r.var.size(); ++c)
      current_.rstd[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(r.var[c]) + kBatchNormEpsilon));
    return current_;
  }

 private:
  const std::vector<RunningStatistics>& units_;
  std::size_t next_ = 0;
  BatchNormStatistics current_;
};

}  // namespace ipu::emu::trainer
