#include "runtime/emulator/schedule.h"

namespace ipu::emu {

std::vector<std::vector<StageWork>> pipelineCycles(int stages, int ga) {
  const int S = stages;
  std::vector<std::vector<StageWork>> cycles(static_cast<std::size_t>(ga + 2 * S - 2));
  for (int c = 0; c < static_cast<int>(cycles.size()); ++c) {
    auto& work = cycles[static_cast<std::size_t>(c)];
    for (int s = 0; s < S; ++s) {
      const int m = c - s;
      if (m >= 0 && m < ga) work.push_back({s, m, true});
    }
    for (int s = S - 2; s >= 0; --s) {
      const int m = c - (2 * (S - 1) - s);
      if (m >= 0 && m < ga) work.push_back({s, m, false});
    }
  }
  return cycles;
}

}  // namespace ipu::emu
