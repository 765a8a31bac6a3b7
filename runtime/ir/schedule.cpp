#include "runtime/ir/schedule.h"

#include <algorithm>

namespace ipu::ir {

const char* name(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::EveryLayer: return "every_layer";
    case Recompute::Stage: return "stage_inputs";
  }
  return "none";
}

std::optional<Recompute> recomputeFromName(std::string_view n) {
  for (Recompute r : kRecomputes)
    if (n == name(r)) return r;
  return std::nullopt;
}

const char* name(Pass p) {
  switch (p) {
    case Pass::Forward: return "forward";
    case Pass::Recompute: return "recompute";
    case Pass::Backward: return "backward";
  }
  return "forward";
}

long long PipelineSchedule::cycles() const {
  const long long ga = std::max(1LL, microBatches);
  const int S = std::max(1, stages);
  return ga + 2LL * S - 2;
}

StageCycle PipelineSchedule::at(int stage, long long cycle) const {
  StageCycle w;
  if (stage < 0 || stage >= stages) return w;
  const long long ga = std::max(1LL, microBatches);
  const long long f = cycle - stage;
  const long long b = cycle - (2LL * (stages - 1) - stage);
  if (f >= 0 && f < ga) w.forward = f;
  if (b >= 0 && b < ga) {
    w.backward = b;
    w.recompute = recompute != Recompute::None;
  }
  return w;
}

std::vector<Work> PipelineSchedule::cycle(long long c) const {
  std::vector<Work> out;
  for (int s = 0; s < stages; ++s) {
    const StageCycle w = at(s, c);
    if (w.forward >= 0) out.push_back({s, w.forward, Pass::Forward});
  }
  for (int s = stages - 1; s >= 0; --s) {
    const StageCycle w = at(s, c);
    if (w.backward < 0) continue;
    if (w.recompute) out.push_back({s, w.backward, Pass::Recompute});
    out.push_back({s, w.backward, Pass::Backward});
  }
  return out;
}

int PipelineSchedule::stashDepth(int stage) const { return 2 * (stages - 1 - stage) + 1; }

}  // namespace ipu::ir
