// PhaseTrainer::Impl, the gradient reduction (trainer/impl.h): inside a
// replica every copy of a parameter gets the sum of its uses in layer order;
// across replicas a ring all-reduce, or with RTS a reduce-scatter. Then the
// checks on the reduced gradients before the update: overflow and the norm
// that clip_norm uses.
#include "runtime/emulator/trainer/impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/emulator/fp16.h"

namespace ipu::emu {

using namespace trainer;

void PhaseTrainer::Impl::reduceGradients() {
  // Inside each replica: every copy of a parameter gets the sum of all its
  // uses' accumulators, in layer order (tied weights across IPUs exchange
  // their accumulators).
  pool->run(static_cast<std::size_t>(R), [&](std::size_t r) {
    if (!local(static_cast<int>(r))) return;   // its instance sums it; gatherGradients brings it
    std::map<Key2, std::vector<std::pair<int, Mat*>>> uses;
    std::map<Key2, int> copies;   // slots holding the parameter (tied weights: one per IPU)
    for (int g = 0; g < P; ++g)
      for (auto& s : group(static_cast<int>(r), g).slots) {
        ++copies[{s.param, s.shard}];
        for (auto& u : s.uses)
          if (u.written) uses[{s.param, s.shard}].push_back({u.layer, &u.acc});
      }
    for (int g = 0; g < P; ++g) {
      Group& gr = group(static_cast<int>(r), g);
      for (auto& s : gr.slots) {
        auto list = uses[{s.param, s.shard}];
        std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        if (list.empty()) {
          s.grad = Mat::Zero(s.rows, s.cols);
          continue;
        }
        // The only copy takes the first accumulator's buffer (the next
        // step's first accumulation replaces it: accumulate()); tied copies
        // each read it.
        if (copies[{s.param, s.shard}] == 1) s.grad = std::move(*list[0].second);
        else s.grad = *list[0].second;
        for (std::size_t i = 1; i < list.size(); ++i) {
          s.grad += *list[i].second;
          if (fp16Acc) roundToHalf(s.grad.data(), static_cast<std::size_t>(s.grad.size()), false, 0);
        }
      }
    }
  });
  for (auto& gr : groups)
    for (auto& s : gr.slots)
      for (auto& u : s.uses) u.written = false;
  if (R == 1) return;
  gatherGradients();
  // Across replicas: a ring all-reduce (or, with RTS, a reduce-scatter: each
  // replica keeps the reduced chunk it updates) per tensor.
  std::vector<Key2> work;
  for (int g = 0; g < P; ++g)
    for (std::size_t j = 0; j < group(0, g).slots.size(); ++j) work.push_back({g, static_cast<int>(j)});
  const bool round = fp16Acc;
  countCollective(traffic.reduced, ir::bytesOf(plan.precision.accumulators));
  pool->run(work.size(), [&](std::size_t w) {
    const int g = work[w].first;
    const std::size_t j = static_cast<std::size_t>(work[w].second);
    std::vector<float*> bufs;
    for (int r = 0; r < R; ++r) bufs.push_back(gradientOf(r, g, j));
    const std::size_t n = static_cast<std::size_t>(group(firstLocal, g).slots[j].grad.size());
    RoundFn fn = round ? [](float* d, std::size_t k, void*) { roundToHalf(d, k, false, 0); } : RoundFn(nullptr);
    if (rts) ringReduceScatter(bufs, n, fn, nullptr);
    else ringAllReduce(bufs, n, fn, nullptr);
  });
}

void PhaseTrainer::Impl::gatherGradients() {
  if (instances == nullptr) return;
  // Every replica's summed gradients, at their replica's place on every
  // instance: one all-gather of the slots of this instance's replicas, in
  // (replica, IPU, slot) order, which is the same length on every instance
  // (the replicas hold the same slots). The reduction after it is the
  // single-process ring, so the order of every sum is fixed by replica
  // index, not by which instance's data arrived first.
  std::size_t perReplica = 0;
  for (int g = 0; g < P; ++g)
    for (const auto& s : group(0, g).slots) perReplica += static_cast<std::size_t>(s.rows * s.cols);
  const std::size_t perInstance = perReplica * static_cast<std::size_t>(localReplicas);
  std::vector<float>& mine = gatherMine;
  std::vector<float>& all = gatherAll;
  mine.resize(perInstance);
  all.resize(perInstance * static_cast<std::size_t>(instances->count()));
  std::size_t at = 0;
  for (int r = firstLocal; r < firstLocal + localReplicas; ++r)
    for (int g = 0; g < P; ++g)
      for (const auto& s : group(r, g).slots) {
        std::copy(s.grad.data(), s.grad.data() + s.grad.size(), mine.data() + at);
        at += static_cast<std::size_t>(s.grad.size());
      }
  instances->allGather(mine.data(), perInstance, all.data());
  // Without RTS the ring reads another instance's replicas where they
  // arrived (gathered), and what it leaves there is not read again: this
  // instance updates, checks and measures its own replicas only. With RTS
  // every replica keeps its reduced chunk, which this instance updates too.
  gathered.assign(static_cast<std::size_t>(R * P), {});
  at = 0;
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < P; ++g)
      for (auto& s : group(r, g).slots) {
        const std::size_t n = static_cast<std::size_t>(s.rows * s.cols);
        if (!local(r)) {
          if (rts) {
            s.grad.resize(s.rows, s.cols);
            std::copy(all.data() + at, all.data() + at + n, s.grad.data());
          } else {
            gathered[static_cast<std::size_t>(r * P + g)].push_back(all.data() + at);
          }
        }
        at += n;
      }
}

float* PhaseTrainer::Impl::gradientOf(int r, int g, std::size_t j) {
  if (instances != nullptr && !rts && !local(r)) return gathered[static_cast<std::size_t>(r * P + g)][j];
  return group(r, g).slots[j].grad.data();
}

void PhaseTrainer::Impl::countCollective(std::vector<std::vector<double>>& into, double bytesPerElement) const {
  for (const auto& gr : groups)
    for (const auto& s : gr.slots)
      for (int t = 0; t < T; ++t)
        if (s.shard < 0 || s.shard == t)
          into[static_cast<std::size_t>(gr.replica)][static_cast<std::size_t>(gr.ipu * T + t)] +=
              static_cast<double>(s.rows * s.cols) * bytesPerElement;
}

std::vector<double> PhaseTrainer::Impl::parameters() const {
  std::vector<double> out(static_cast<std::size_t>(P * T), 0.0);
  for (int g = 0; g < P; ++g)
    for (const auto& s : group(0, g).slots)
      for (int t = 0; t < T; ++t)
        if (s.shard < 0 || s.shard == t) out[static_cast<std::size_t>(g * T + t)] += static_cast<double>(s.rows * s.cols);
  return out;
}

namespace {

// Whether any of n values is infinite or NaN: whether the largest magnitude's
// bits reach an all-ones exponent. A loop the compiler vectorises, where
// Eigen's allFinite() took 4% of an fp32 step at hidden 512.
bool anyNonFinite(const float* x, std::size_t n) {
  std::uint32_t largest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t b;
    std::memcpy(&b, x + i, sizeof b);
    largest = std::max(largest, b & 0x7FFFFFFFu);
  }
  return largest >= 0x7F800000u;
}

}  // namespace

bool PhaseTrainer::Impl::overflowed() const {
  // Another instance's replicas reduce to the same values (gatherGradients).
  for (const auto& gr : groups)
    for (const auto& s : gr.slots)
      if ((rts || local(gr.replica)) && anyNonFinite(s.grad.data() + s.owned.begin, s.owned.end - s.owned.begin)) return true;
  return false;
}

double PhaseTrainer::Impl::gradientNorm() const {
  // Each canonical element once: primary copies, this instance's first
  // replica (replica 0 in one process; or every replica's own chunk with
  // RTS), in canonical order.
  double sum = 0;
  for (int r = rts ? 0 : firstLocal; r < (rts ? R : firstLocal + 1); ++r)
    for (int g = 0; g < P; ++g)
      for (const auto& s : group(r, g).slots) {
        if (!s.primary) continue;
        for (std::size_t i = s.owned.begin; i < s.owned.end; ++i) sum += static_cast<double>(s.grad.data()[i]) * s.grad.data()[i];
      }
  return std::sqrt(sum) / lossScale;
}

}  // namespace ipu::emu
