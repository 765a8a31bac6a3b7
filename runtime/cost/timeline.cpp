#include "runtime/cost/timeline.h"

#include <algorithm>

namespace ipu::cost {

const char* name(Activity a) {
  switch (a) {
    case Activity::Forward: return "forward";
    case Activity::Recompute: return "recompute";
    case Activity::Backward: return "backward";
    case Activity::Exchange: return "exchange";
    case Activity::Idle: return "idle";
    case Activity::AllReduce: return "all-reduce";
    case Activity::Streaming: return "streaming";
    case Activity::Optimizer: return "optimizer";
    case Activity::Overhead: return "overhead";
  }
  return "?";
}

Timeline timeline(const ir::PhasePlan& p, const PhaseEstimate& e) {
  Timeline t;
  const int P = static_cast<int>(e.ipus.size());
  const int S = static_cast<int>(p.stages.size());
  t.cycles = e.cycles;
  t.cycleTime = e.cycleTime;
  t.stepTime = e.stepTime;
  t.ipus = P;
  // Share of each IPU's per-micro-batch work done by each of its stages.
  std::vector<double> stageShare(static_cast<std::size_t>(S), 0);
  std::vector<double> ipuWork(static_cast<std::size_t>(P), 0);
  for (const auto& st : p.stages) {
    double w = 0;
    for (int li : st.layers) {
      const auto& l = p.layers[static_cast<std::size_t>(li)];
      w += l.forward.total() + l.backward.total() + 1;  // +1: a stage is never weightless
    }
    stageShare[static_cast<std::size_t>(st.index)] = w;
    ipuWork[static_cast<std::size_t>(std::clamp(st.ipu, 0, P - 1))] += w;
  }
  for (const auto& st : p.stages)
    stageShare[static_cast<std::size_t>(st.index)] /= ipuWork[static_cast<std::size_t>(std::clamp(st.ipu, 0, P - 1))];

  for (long long c = 0; c < t.cycles; ++c) {
    const double start = static_cast<double>(c) * t.cycleTime;
    for (int g = 0; g < P; ++g) {
      const IpuTime& it = e.ipus[static_cast<std::size_t>(g)];
      double fwd = 0, rec = 0, bwd = 0, active = 0;
      for (const auto& st : p.stages) {
        if (std::clamp(st.ipu, 0, P - 1) != g) continue;
        const double share = stageShare[static_cast<std::size_t>(st.index)];
        const ir::StageCycle work = p.schedule.at(st.index, c);
        if (work.forward >= 0) {
          fwd += it.forward * share;
          active += share / 2;
        }
        if (work.backward >= 0) {
          if (work.recompute) rec += it.recompute * share;
          bwd += it.backward * share;
          active += share / 2;
        }
      }
      double x = it.exchange * active, at = start;
      auto add = [&](Activity a, double d) {
        if (d <= 0) return;
        t.segments.push_back(Segment{g, a, at, at + d, c});
        at += d;
      };
      add(Activity::Forward, fwd);
      add(Activity::Recompute, rec);
      add(Activity::Backward, bwd);
      add(Activity::Exchange, x);
      add(Activity::Idle, start + t.cycleTime - at);
    }
  }
  // After the pipeline: collectives, Streaming Memory, the update, overhead.
  const Breakdown& b = e.breakdown;
  double at = static_cast<double>(t.cycles) * t.cycleTime;
  const std::pair<Activity, double> tail[] = {{Activity::AllReduce, b.allReduce + b.rtsCollectives},
                                              {Activity::Streaming, b.streaming + b.hostIo},
                                              {Activity::Optimizer, b.optimizer},
                                              {Activity::Overhead, b.overhead}};
  for (const auto& [a, d] : tail) {
    if (d <= 0) continue;
    for (int g = 0; g < P; ++g) t.segments.push_back(Segment{g, a, at, at + d, -1});
    at += d;
  }
  return t;
}

}  // namespace ipu::cost
