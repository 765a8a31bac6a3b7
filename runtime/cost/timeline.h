// One optimizer step as a timeline: for every pipeline IPU, what it does in
// each pipeline cycle (forward, recompute, backward, exchange, idle), then the
// step's collectives, streaming, update and fixed overhead. Drawn by
// `ipu estimate --timeline` (ASCII) and `--timeline-svg` (SVG).
#pragma once

#include <vector>

#include "runtime/cost/cost_model.h"

namespace ipu::cost {

enum class Activity { Forward, Recompute, Backward, Exchange, Idle, AllReduce, Streaming, Optimizer, Overhead };
const char* name(Activity a);

struct Segment {
  int ipu = 0;
  Activity activity = Activity::Idle;
  double start = 0, end = 0;   // seconds from the start of the step
  long long cycle = -1;        // pipeline cycle, or -1 after the pipeline
};

struct Timeline {
  long long cycles = 0;
  double cycleTime = 0;             // a steady-state cycle
  // When each cycle starts (cycles + 1 entries, the last the pipeline's
  // end): ramp cycles are shorter than steady-state ones.
  std::vector<double> cycleStart;
  double stepTime = 0;
  int ipus = 0;
  std::vector<Segment> segments;  // in time order per IPU
};

// The step of `phase` that `estimate` describes (estimate must be ok).
Timeline timeline(const ir::PhasePlan& phase, const PhaseEstimate& estimate);

}  // namespace ipu::cost
