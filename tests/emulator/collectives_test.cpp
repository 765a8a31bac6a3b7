// The ring collectives and the pipeline schedule, on their own.
#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "runtime/emulator/collectives.h"
#include "runtime/emulator/schedule.h"

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

TEST(Schedule, GroupedPipelineMatchesThePlansCounts) {
  for (int S = 1; S <= 5; ++S)
    for (int ga = 1; ga <= 6; ++ga) {
      const auto cycles = pipelineCycles(S, ga);
      ASSERT_EQ(static_cast<int>(cycles.size()), ga + 2 * S - 2);
      std::map<std::pair<int, int>, int> fwd, bwd;
      std::vector<int> inFlight(static_cast<std::size_t>(S), 0), peak(static_cast<std::size_t>(S), 0);
      for (int c = 0; c < static_cast<int>(cycles.size()); ++c) {
        bool backwardSeen = false;
        for (const auto& w : cycles[static_cast<std::size_t>(c)]) {
          if (w.forward) {
            EXPECT_FALSE(backwardSeen) << "grouped: forwards before backwards";
            fwd[{w.stage, w.micro}] = c;
            if (w.stage < S - 1) ++inFlight[static_cast<std::size_t>(w.stage)];
          } else {
            backwardSeen = true;
            bwd[{w.stage, w.micro}] = c;
          }
        }
        for (int s = 0; s < S; ++s) peak[static_cast<std::size_t>(s)] = std::max(peak[static_cast<std::size_t>(s)], inFlight[static_cast<std::size_t>(s)]);
        for (const auto& w : cycles[static_cast<std::size_t>(c)])
          if (!w.forward) --inFlight[static_cast<std::size_t>(w.stage)];
      }
      for (int s = 0; s < S; ++s)
        for (int m = 0; m < ga; ++m) {
          const std::pair<int, int> here{s, m}, up{s + 1, m}, down{s - 1, m};
          ASSERT_TRUE(fwd.count(here));
          if (s > 0) {
            EXPECT_GT(fwd[here], fwd[down]);   // its input was sent in an earlier cycle
          }
          if (s < S - 1) {
            ASSERT_TRUE(bwd.count(here));
            const int after = s + 1 == S - 1 ? fwd[up] : bwd[up];
            EXPECT_GT(bwd[here], after);
          }
        }
      // Micro batches in flight between a stage's forward and backward: the plan's stash depth.
      for (int s = 0; s < S - 1; ++s) {
        if (ga >= 2 * (S - 1 - s) + 1) {
          EXPECT_EQ(peak[static_cast<std::size_t>(s)], 2 * (S - 1 - s) + 1) << "S=" << S << " stage " << s;
        }
      }
    }
}

}  // namespace
}  // namespace ipu::emu
