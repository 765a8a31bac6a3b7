// Collectives over per-IPU buffers, executed the way the IPU-Links run them:
// a ring. An all-reduce is a reduce-scatter (n-1 steps: each IPU sends one
// chunk to its neighbour, which adds it to its own) followed by an all-gather
// (n-1 steps: the reduced chunks travel round the ring). Each buffer belongs
// to one virtual IPU; the sums happen in the order the ring imposes, which
// is why replicas agree with each other bit for bit, and agree with gradient
// accumulation on one replica only up to the reordering of a sum.
#pragma once

#include <cstddef>
#include <vector>

namespace ipu::emu {

// Chunk c of a buffer of n elements split over `parts` IPUs: [begin, end).
struct Chunk {
  std::size_t begin = 0, end = 0;
};
Chunk chunkOf(std::size_t n, int parts, int c);

// Every buffer has n elements. After the call, buffer i holds the reduced
// chunk i (reduce-scatter) / everything (all-reduce, all-gather). `round`,
// when set, rounds each partial sum as it lands (fp16 buffers).
using RoundFn = void (*)(float* data, std::size_t n, void* context);
void ringReduceScatter(const std::vector<float*>& buffers, std::size_t n, RoundFn round = nullptr, void* context = nullptr);
void ringAllGather(const std::vector<float*>& buffers, std::size_t n);
void ringAllReduce(const std::vector<float*>& buffers, std::size_t n, RoundFn round = nullptr, void* context = nullptr);

}  // namespace ipu::emu
