// The ring collectives on their own (the pipeline schedule: traffic_test.cpp).
#include <gtest/gtest.h>

#include <numeric>

#include "runtime/emulator/collectives.h"

namespace ipu::emu {
namespace {

TEST(Collectives, RingAllReduceSumsEveryElementOnEveryReplica) {
  for (int r = 1; r <= 8; ++r)
    for (std::size_t n : {1u, 3u, 7u, 64u, 1001u}) {
      std::vector<std::vector<float>> bufs(static_cast<std::size_t>(r), std::vector<float>(n));
      for (int i = 0; i < r; ++i)
        for (std::size_t k = 0; k < n; ++k) bufs[static_cast<std::size_t>(i)][k] = static_cast<float>((i + 1) * 1000 + static_cast<int>(k));
      std::vector<float*> ptrs;
      for (auto& b : bufs) ptrs.push_back(b.data());
      ringAllReduce(ptrs, n);
      for (int i = 0; i < r; ++i)
        for (std::size_t k = 0; k < n; ++k)
          ASSERT_EQ(bufs[static_cast<std::size_t>(i)][k], static_cast<float>(1000 * r * (r + 1) / 2 + r * static_cast<int>(k)))
              << "r=" << r << " n=" << n << " replica " << i << " element " << k;
    }
}

TEST(Collectives, ReduceScatterLeavesEachReplicaItsChunk) {
  const int r = 4;
  const std::size_t n = 10;
  std::vector<std::vector<float>> bufs(r, std::vector<float>(n, 1.0f));
  std::vector<float*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.data());
  ringReduceScatter(ptrs, n);
  for (int i = 0; i < r; ++i) {
    const Chunk c = chunkOf(n, r, i);
    for (std::size_t k = c.begin; k < c.end; ++k) EXPECT_EQ(bufs[static_cast<std::size_t>(i)][k], 4.0f);
  }
  // The chunks tile the buffer.
  std::size_t covered = 0;
  for (int i = 0; i < r; ++i) covered += chunkOf(n, r, i).end - chunkOf(n, r, i).begin;
  EXPECT_EQ(covered, n);
  ringAllGather(ptrs, n);
  for (const auto& b : bufs)
    for (float v : b) EXPECT_EQ(v, 4.0f);
}

}  // namespace
}  // namespace ipu::emu
