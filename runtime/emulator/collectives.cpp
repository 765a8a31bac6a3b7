#include "runtime/emulator/collectives.h"

namespace ipu::emu {

Chunk chunkOf(std::size_t n, int parts, int c) {
  const std::size_t p = static_cast<std::size_t>(parts);
  const std::size_t i = static_cast<std::size_t>(c);
  return {n * i / p, n * (i + 1) / p};
}

void ringReduceScatter(const std::vector<float*>& buffers, std::size_t n, RoundFn round, void* context) {
  const int r = static_cast<int>(buffers.size());
  if (r <= 1) return;
  // Step k: IPU i sends chunk (i - k - 1) mod r to IPU i + 1, which adds it to
  // its own. After r - 1 steps IPU i holds the full sum of chunk i. Every
  // transfer of a step happens "at once" (BSP): sends read the values from
  // before the step, so a step first copies what is sent.
  std::vector<std::vector<float>> inFlight(static_cast<std::size_t>(r));
  for (int k = 0; k < r - 1; ++k) {
    for (int i = 0; i < r; ++i) {
      const int c = ((i - k - 1) % r + r) % r;
      const Chunk ch = chunkOf(n, r, c);
      inFlight[static_cast<std::size_t>(i)].assign(buffers[static_cast<std::size_t>(i)] + ch.begin,
                                                   buffers[static_cast<std::size_t>(i)] + ch.end);
    }
    for (int i = 0; i < r; ++i) {
      const int to = (i + 1) % r;
      const int c = ((i - k - 1) % r + r) % r;
      const Chunk ch = chunkOf(n, r, c);
      float* dst = buffers[static_cast<std::size_t>(to)] + ch.begin;
      const std::vector<float>& src = inFlight[static_cast<std::size_t>(i)];
      for (std::size_t j = 0; j < src.size(); ++j) dst[j] = src[j] + dst[j];
      if (round != nullptr) round(dst, src.size(), context);
    }
  }
}

void ringAllGather(const std::vector<float*>& buffers, std::size_t n) {
  const int r = static_cast<int>(buffers.size());
  if (r <= 1) return;
  // Step k: IPU i passes chunk (i - k) mod r, which it already holds reduced, on to IPU i + 1.
  for (int k = 0; k < r - 1; ++k) {
    for (int i = 0; i < r; ++i) {
      const int c = ((i - k) % r + r) % r;
      const Chunk ch = chunkOf(n, r, c);
      const int to = (i + 1) % r;
      const float* src = buffers[static_cast<std::size_t>(i)] + ch.begin;
      float* dst = buffers[static_cast<std::size_t>(to)] + ch.begin;
      for (std::size_t j = 0; j < ch.end - ch.begin; ++j) dst[j] = src[j];
    }
  }
}

void ringAllReduce(const std::vector<float*>& buffers, std::size_t n, RoundFn round, void* context) {
  ringReduceScatter(buffers, n, round, context);
  ringAllGather(buffers, n);
}

}  // namespace ipu::emu
