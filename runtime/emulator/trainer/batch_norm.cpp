// Batch norm's state in the trainer (trainer/batch_norm.h): the training
// step's BatchNormContext, the threads distributed batch norm needs, the
// statistics recorded for recomputation and the running statistics.
#include "runtime/emulator/trainer/batch_norm.h"

#include <algorithm>
#include <exception>
#include <thread>

#include "runtime/emulator/trainer/impl.h"

namespace ipu::emu {

using namespace trainer;

void StepBatchNorm::allReduce(std::vector<double>& sums) {
  const int call = calls_++;
  if (im_.bnSpan <= 1) return;
  // What the plan counts (fp32 values), on every IPU of the shard group:
  // the kernel is replicated there. Only this group's thread writes these.
  const int ipu = im_.model->layers()[static_cast<std::size_t>(layer_)].ipu;
  for (int t = 0; t < im_.T; ++t)
    im_.traffic.batchNorm[static_cast<std::size_t>(replica_)][static_cast<std::size_t>(ipu * im_.T + t)] += 4.0 * static_cast<double>(sums.size());
  const int q = replica_ / im_.bnSpan, first = q * im_.bnSpan;
  if (im_.instances == nullptr) {
    im_.bnExchange.allReduce({q, micro_, layer_, backward_ ? 1 : 0, call}, replica_ - first, im_.bnSpan, im_.bnSpan, sums, *im_.bnTurns);
    return;
  }
  // The group's members on other instances (owners are contiguous: peers in rank order).
  const int self = im_.instances->rank();
  int localMembers = 0;
  std::vector<int> peers;
  for (int r = first; r < first + im_.bnSpan; ++r) {
    const int owner = im_.ownerOf(r);
    if (owner == self) ++localMembers;
    else if (peers.empty() || peers.back() != owner) peers.push_back(owner);
  }
  BatchNormExchange::Remote remote;
  if (!peers.empty()) {
    // A tag unique within the step, so that concurrent exchanges between the
    // same two instances never take each other's message.
    constexpr int kCallsPerLayer = 64;
    if (call >= kCallsPerLayer) im_.instances->fail("a layer call made more than 64 batch-norm exchanges");
    const long long layers = static_cast<long long>(im_.model->layers().size());
    const long long tag = ((((static_cast<long long>(q) * im_.GA + micro_) * layers + layer_) * 2 + (backward_ ? 1 : 0)) * kCallsPerLayer) + call;
    const std::size_t n = sums.size();
    remote = [&, tag, n](std::vector<std::vector<double>>& parts) {
      std::vector<double> mine;
      for (int r = first; r < first + im_.bnSpan; ++r)
        if (im_.local(r)) mine.insert(mine.end(), parts[static_cast<std::size_t>(r - first)].begin(), parts[static_cast<std::size_t>(r - first)].end());
      std::vector<std::vector<double>> theirs;
      im_.instances->exchange(tag, peers, mine, theirs);
      for (std::size_t k = 0; k < peers.size(); ++k) {
        std::size_t at = 0;
        for (int r = first; r < first + im_.bnSpan; ++r) {
          if (im_.ownerOf(r) != peers[k]) continue;
          if (theirs[k].size() < (at + 1) * n) im_.instances->fail("a batch-norm exchange received fewer values than its group holds");
          parts[static_cast<std::size_t>(r - first)].assign(theirs[k].begin() + static_cast<std::ptrdiff_t>(at * n),
                                                            theirs[k].begin() + static_cast<std::ptrdiff_t>((at + 1) * n));
          ++at;
        }
      }
    };
  }
  im_.bnExchange.allReduce({q, micro_, layer_, backward_ ? 1 : 0, call}, replica_ - first, im_.bnSpan, localMembers, sums, *im_.bnTurns, remote);
}

void StepBatchNorm::record(BatchNormStatistics stats) {
  const int unit = units_++;
  // The running statistics read the first replica of each group (the
  // others hold the same statistics); recomputation reads every replica's
  // own. Keep no more than that: the host holds them for the whole step.
  const bool first = replica_ % im_.bnSpan == 0;
  if (!first && im_.recompute == ir::Recompute::None && !im_.phased) return;   // phased execution recomputes every layer
  if (!first) stats.squares.clear();
  im_.recordBatchNorm(replica_, micro_, layer_, unit, std::move(stats));
}

const BatchNormStatistics& StepBatchNorm::next() { return im_.recordedBatchNorm(replica_, micro_, layer_, units_++); }

void PhaseTrainer::Impl::runGroups(std::size_t count, const std::function<void(std::size_t)>& task) {
  if (bnSpan <= 1) {
    pool->run(count, task);
    return;
  }
  // Distributed batch norm: a group's task waits inside a kernel for the
  // other replicas of its batch-norm group. A pool task must not (with fewer
  // threads than groups the waiting task would hold the thread the others
  // need), so every group runs on a thread of its own, taking turns
  // (ComputeTurns) to keep about hostThreads threads computing; their inner
  // parallel loops still go to the pool. Results do not depend on any of it:
  // the exchange adds in replica order.
  bnExchange.reset();
  std::vector<std::exception_ptr> failed(count);
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    threads.emplace_back([&, i] {
      bnTurns->acquire();
      try {
        task(i);
      } catch (...) {
        failed[i] = std::current_exception();
        // The other instances would wait for this group's exchanges forever.
        if (instances != nullptr) {
          std::string what = "an emulator thread failed";
          try {
            throw;
          } catch (const std::exception& e) {
            what += std::string(": ") + e.what();
          } catch (...) {
          }
          instances->fail(what);
        }
        bnExchange.abort();
      }
      bnTurns->release();
    });
  for (auto& t : threads) t.join();
  // Rethrow the failure itself, not a waiter it woke (there is a waiter
  // only when there is a failure).
  for (const auto& f : failed) {
    if (!f) continue;
    try {
      std::rethrow_exception(f);
    } catch (const ExchangeAborted&) {
      continue;
    }
  }
}

void PhaseTrainer::Impl::recordBatchNorm(int replica, int micro, int layer, int unit, BatchNormStatistics stats) {
  std::lock_guard<std::mutex> lock(bnRecordedMutex);
  bnRecorded[{replica, micro, layer, unit}] = std::move(stats);
}

const BatchNormStatistics& PhaseTrainer::Impl::recordedBatchNorm(int replica, int micro, int layer, int unit) {
  // The forward pass of the same micro batch recorded it on this replica's
  // thread, before (the schedule recomputes after the forward pass).
  std::lock_guard<std::mutex> lock(bnRecordedMutex);
  return bnRecorded.at({replica, micro, layer, unit});
}

void PhaseTrainer::Impl::updateRunningStatistics() {
  // Once per step, from the step's global batch: the statistics sets (micro
  // batch m of batch-norm group q) combine in the order (q, m) into the mean
  // and the unbiased variance of every value the unit normalised this step
  // (Chan et al.'s pairwise formula, in double), then one momentum update.
  // With one set per step this is PyTorch's BatchNorm2d after one forward
  // pass; otherwise the step's sets count as one batch, so the running
  // statistics do not depend on how the global batch was split.
  for (std::size_t li = 0; li < running.size(); ++li)
    for (std::size_t u = 0; u < running[li].size(); ++u) {
      RunningStatistics& rs = running[li][u];
      const std::size_t C = rs.mean.size();
      std::vector<const BatchNormStatistics*> sets;
      for (int q = 0; q < R / bnSpan; ++q)
        for (int m = 0; m < GA; ++m) {
          auto it = bnRecorded.find({q * bnSpan, m, static_cast<int>(li), static_cast<int>(u)});
          if (it != bnRecorded.end()) sets.push_back(&it->second);
        }
      if (sets.empty()) continue;
      double n = 0;
      std::vector<double> mean(C, 0.0), m2(C, 0.0);
      for (const BatchNormStatistics* st : sets) {
        const double nb = st->count, total = n + nb;
        for (std::size_t c = 0; c < C; ++c) {
          const double delta = static_cast<double>(st->mean[c]) - mean[c];
          mean[c] += delta * nb / total;
          m2[c] += st->squares[c] + delta * delta * n * nb / total;
        }
        n = total;
      }
      for (std::size_t c = 0; c < C; ++c) {
        const double var = m2[c] / std::max(1.0, n - 1);
        rs.mean[c] = static_cast<float>((1 - kRunningMomentum) * rs.mean[c] + kRunningMomentum * mean[c]);
        rs.var[c] = static_cast<float>((1 - kRunningMomentum) * rs.var[c] + kRunningMomentum * var);
      }
    }
  bnRecorded.clear();
}

NamedTensors PhaseTrainer::Impl::runningTensors() const {
  NamedTensors out;
  for (std::size_t li = 0; li < running.size(); ++li) {
    const auto units = model->layers()[li].kernel->batchNorms();
    for (std::size_t u = 0; u < running[li].size(); ++u) {
      const std::string name = model->layers()[li].plan->name + "." + units[u].name;
      const auto& rs = running[li][u];
      const auto C = static_cast<Eigen::Index>(rs.mean.size());
      out.emplace_back("running_mean/" + name, Eigen::Map<const Mat>(rs.mean.data(), 1, C));
      out.emplace_back("running_var/" + name, Eigen::Map<const Mat>(rs.var.data(), 1, C));
    }
  }
  return out;
}

Expected<bool> PhaseTrainer::Impl::setRunningTensors(const NamedTensors& tensors) {
  // Absent ones keep their values (a checkpoint written before the emulator
  // kept running statistics); a present one must fit.
  for (std::size_t li = 0; li < running.size(); ++li) {
    const auto units = model->layers()[li].kernel->batchNorms();
    for (std::size_t u = 0; u < running[li].size(); ++u) {
      const std::string name = model->layers()[li].plan->name + "." + units[u].name;
      auto& rs = running[li][u];
      const std::pair<const char*, std::vector<float>*> targets[] = {{"running_mean/", &rs.mean}, {"running_var/", &rs.var}};
      for (const auto& [prefix, into] : targets) {
        for (const auto& [n, m] : tensors) {
          if (n != prefix + name) continue;
          if (m.size() != static_cast<Eigen::Index>(into->size()))
            return Error{code::kCheckpoint,
                         "tensor `" + n + "` holds " + std::to_string(m.size()) + " values for " + std::to_string(into->size()) + " channels",
                         "it was saved from a model of another size", plan.source};
          into->assign(m.data(), m.data() + m.size());
        }
      }
    }
  }
  return true;
}

}  // namespace ipu::emu
