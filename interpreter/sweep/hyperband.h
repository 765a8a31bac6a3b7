// Early termination by hyperband brackets, as W&B's sweeps do it
// (docs/sweeps.md, "Early termination"): a pure function of the metric
// values the trials reported at their steps.
//
// Brackets are at steps min_iter * eta^k, k = 0, 1, ..., up to max_iter when
// it is set. A trial reaches bracket b when it reports at a step >= b; its
// value at b is the first value it reported at a step >= b (what was known
// when it crossed the bracket). When a trial reports at step s, it is judged
// at the largest bracket b <= s that it has reached: it is stopped unless it
// is in the top ceil(n / eta) of the n trials (itself included, in any state)
// that have reached b, ranked by the metric with the goal applied. A trial
// is in the top m when fewer than m trials are strictly better (ties are
// kept). A value that is not finite (a diverged loss) is worse than any
// finite one. So the first trial to reach a bracket always continues, and a
// trial is stopped only by trials that did better at the same step.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "interpreter/sweep/space.h"

namespace ipu::sweep {

// The metric values one trial reported, by step (ascending steps).
using Curve = std::vector<std::pair<long long, double>>;

// The bracket steps of `rule` up to `lastStep` (or max_iter when set), ascending.
std::vector<long long> hyperbandBrackets(const EarlyTerminate& rule, long long lastStep);

struct StopDecision {
  bool stop = false;
  long long bracket = 0;  // the bracket judged; 0: none reached yet
  std::size_t rank = 0;   // how many trials did strictly better there
  std::size_t reached = 0;  // trials that reached it
  std::size_t kept = 0;     // how many continue from it: ceil(reached / eta)
  std::string reason;     // for a stop: why, for the trial's record
};

// Whether trial `index` of `curves`, having reported at `step`, is stopped.
// A disabled rule, one with min_iter < 1 or eta < 2 (the checker rejects
// those), an index out of range or a step before the first bracket never
// stops.
StopDecision hyperbandDecision(const EarlyTerminate& rule, Goal goal, const std::vector<Curve>& curves,
                               std::size_t index, long long step);

}  // namespace ipu::sweep
