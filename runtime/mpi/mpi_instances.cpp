#include "runtime/mpi/mpi_instances.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace ipu::mpi {

namespace {

// Waits for requests without spinning: Open MPI's blocking calls poll at
// full speed, and an instance polling for its peer takes the core the peer
// (or, on a shared host, another instance) needs to get there. A short sleep
// between tests costs the waiter at most that long once the data is in.
void waitFor(int n, MPI_Request* requests) {
  int done = 0;
  for (int spins = 0;; ++spins) {
    MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE);
    if (done != 0) return;
    if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class MpiInstances final : public emu::Instances {
 public:
  MpiInstances() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &count_);
    // Collectives of the main thread and the batch-norm exchanges of the
    // worker threads each on a communicator of their own: a tagged
    // point-to-point message can never match a collective's.
    MPI_Comm_dup(MPI_COMM_WORLD, &collective_);
    MPI_Comm_dup(MPI_COMM_WORLD, &exchange_);
    int flag = 0;
    void* ub = nullptr;
    MPI_Comm_get_attr(exchange_, MPI_TAG_UB, &ub, &flag);
    tagUpperBound_ = flag != 0 && ub != nullptr ? *static_cast<int*>(ub) : 32767;
  }
  int rank() const override { return rank_; }
  int count() const override { return count_; }

  void allGather(const float* mine, std::size_t n, float* all) override {
    if (n > static_cast<std::size_t>(INT_MAX)) fail("a gradient all-gather of " + std::to_string(n) + " values exceeds MPI's count");
    MPI_Request request;
    MPI_Iallgather(mine, static_cast<int>(n), MPI_FLOAT, all, static_cast<int>(n), MPI_FLOAT, collective_, &request);
    waitFor(1, &request);
    count(static_cast<double>(n) * sizeof(float) * (count_ - 1), static_cast<double>(n) * sizeof(float) * (count_ - 1));
  }

  std::vector<std::string> allGatherBytes(const std::string& mine) override {
    int n = static_cast<int>(mine.size());
    std::vector<int> sizes(static_cast<std::size_t>(count_)), offsets(static_cast<std::size_t>(count_));
    MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, collective_);
    int total = 0;
    for (int k = 0; k < count_; ++k) {
      offsets[static_cast<std::size_t>(k)] = total;
      total += sizes[static_cast<std::size_t>(k)];
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Request request;
    MPI_Iallgatherv(mine.data(), n, MPI_CHAR, &all[0], sizes.data(), offsets.data(), MPI_CHAR, collective_, &request);
    waitFor(1, &request);
    std::vector<std::string> out;
    for (int k = 0; k < count_; ++k)
      out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(k)]), static_cast<std::size_t>(sizes[static_cast<std::size_t>(k)])));
    return out;
  }

  std::string broadcast(const std::string& value) override {
    unsigned long long n = value.size();
    MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, collective_);
    std::string out = rank_ == 0 ? value : std::string(static_cast<std::size_t>(n), '\0');
    if (n > 0) MPI_Bcast(&out[0], static_cast<int>(n), MPI_CHAR, 0, collective_);
    return out;
  }

  bool any(bool mine) override {
    int in = mine ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, collective_);
    return out != 0;
  }

  void exchange(long long tag, const std::vector<int>& peers, const std::vector<double>& mine,
                std::vector<std::vector<double>>& theirs) override {
    if (tag < 0 || tag > tagUpperBound_)
      fail("a batch-norm exchange needs tag " + std::to_string(tag) + ", above MPI's limit " + std::to_string(tagUpperBound_) +
           " (fewer micro batches per replica or replicas per batch-norm group)");
    theirs.assign(peers.size(), std::vector<double>());
    std::vector<MPI_Request> requests;
    // Sizes first: the peers' parts need not be as long as this instance's.
    std::vector<int> sizes(peers.size());
    const int mySize = static_cast<int>(mine.size());
    for (std::size_t k = 0; k < peers.size(); ++k) {
      requests.emplace_back();
      MPI_Irecv(&sizes[k], 1, MPI_INT, peers[k], static_cast<int>(tag), exchange_, &requests.back());
      requests.emplace_back();
      MPI_Isend(&mySize, 1, MPI_INT, peers[k], static_cast<int>(tag), exchange_, &requests.back());
    }
    waitFor(static_cast<int>(requests.size()), requests.data());
    requests.clear();
    for (std::size_t k = 0; k < peers.size(); ++k) {
      theirs[k].resize(static_cast<std::size_t>(sizes[k]));
      requests.emplace_back();
      MPI_Irecv(theirs[k].data(), sizes[k], MPI_DOUBLE, peers[k], static_cast<int>(tag), exchange_, &requests.back());
      requests.emplace_back();
      MPI_Isend(mine.data(), mySize, MPI_DOUBLE, peers[k], static_cast<int>(tag), exchange_, &requests.back());
    }
    waitFor(static_cast<int>(requests.size()), requests.data());
    double in = 0;
    for (int s : sizes) in += static_cast<double>(s) * sizeof(double);
    count(static_cast<double>(mySize) * sizeof(double) * static_cast<double>(peers.size()), in);
  }

  [[noreturn]] void fail(const std::string& message) override {
    std::cerr << "ipu run: error: instance " << rank_ << " of " << count_ << " failed: " << message << "\n" << std::flush;
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);   // MPI_Abort does not return; this says so to the compiler
  }

  double bytesSent() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  double bytesReceived() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  void count(double sent, double received) {
    std::lock_guard<std::mutex> lock(mu_);
    sent_ += sent;
    received_ += received;
  }
  int rank_ = 0, count_ = 1;
  long long tagUpperBound_ = 32767;
  MPI_Comm collective_ = MPI_COMM_NULL, exchange_ = MPI_COMM_NULL;
  mutable std::mutex mu_;
  double sent_ = 0, received_ = 0;
};

}  // namespace

bool launchedByMpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

std::shared_ptr<emu::Instances> start(std::string& error) {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    error = "MPI could not start";
    return nullptr;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    error = "this MPI library does not support MPI_THREAD_MULTIPLE, which distributed batch norm's exchanges need";
    MPI_Finalize();
    return nullptr;
  }
  return std::make_shared<MpiInstances>();
}

bool finish(emu::Instances& instances, bool ok, const std::string& message, std::string& failures, double patienceSeconds) {
  // A barrier that a failed instance does not wait at forever: if the others
  // are blocked in a step waiting for its data, they never arrive.
  MPI_Request barrier;
  MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  while (done == 0) {
    MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
    if (done != 0) break;
    if (!ok && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > patienceSeconds) instances.fail(message);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::string mine = ok ? std::string() : std::to_string(instances.rank()) + "\t" + message;
  const std::vector<std::string> all = instances.allGatherBytes(mine);
  bool allOk = true;
  failures.clear();
  for (const auto& m : all) {
    if (m.empty()) continue;
    allOk = false;
    const auto tab = m.find('\t');
    if (tab + 1 == m.size()) continue;
    // When instance 0 failed too, it said why; the others met the same
    // failure at the same point (every instance runs the same plan and steps).
    if (!all.front().empty()) continue;
    failures += "instance " + m.substr(0, tab) + " of " + std::to_string(instances.count()) + " failed: " + m.substr(tab + 1) + "\n";
  }
  MPI_Finalize();
  return allOk;
}

}  // namespace ipu::mpi
