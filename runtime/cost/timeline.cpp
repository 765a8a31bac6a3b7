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
  t.cycles = e.cycles;
  t.cycleTime = e.cycleTime;
  t.stepTime = e.stepTime;
  t.ipus = P;
  double start = 0;
  t.cycleStart.reserve(static_cast<std::size_t>(t.cycles) + 1);
  for (long long c = 0; c < t.cycles; ++c) {
    t.cycleStart.push_back(start);
    const double length = e.cycleSeconds(c);   // a ramp cycle lasts the work it does
    for (int g = 0; g < P; ++g) {
      // The stages' work as the cost model priced it (PhaseEstimate::stages).
      const IpuTime& it = e.ipus[static_cast<std::size_t>(g)];
      double fwd = 0, rec = 0, bwd = 0, active = 0;
      for (std::size_t s = 0; s < e.stages.size(); ++s) {
        const PhaseEstimate::StageTime& st = e.stages[s];
        if (st.ipu != g) continue;
        const ir::StageCycle work = p.schedule.at(static_cast<int>(s), c);
        if (work.forward >= 0) {
          fwd += st.forward;
          active += st.exchangeShare;
        }
        if (work.backward >= 0) {
          rec += st.recompute;
          bwd += st.backward;
          active += st.exchangeShare;
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
      add(Activity::Idle, start + length - at);
    }
    start += length;
  }
  // After the pipeline: collectives, Streaming Memory, the update, overhead.
  const Breakdown& b = e.breakdown;
  t.cycleStart.push_back(start);
  double at = start;
  const std::pair<Activity, double> tail[] = {{Activity::AllReduce, b.allReduce + b.rtsCollectives + b.acrossInstances},
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
