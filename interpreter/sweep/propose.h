// Proposing a sweep's next trial: grid, random and Bayesian search
// (docs/sweeps.md, "Search methods").
//
// A proposal is a pure function of the spec, the trials so far and the trial
// index: no state is kept between proposals, so any agent on any host,
// restarted at any moment, proposes what another would. Random numbers come
// from SplitMix64 seeded with (spec.seed, trial index).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/sweep/rng.h"
#include "interpreter/sweep/space.h"

namespace ipu::sweep {

enum class TrialState {
  Finished,  // ran to its end; `value` is its final metric (if it reported one)
  Failed,    // crashed, was killed or lost its agent: a grid cell to run again
  Running,   // in flight: claimed by an agent, no final value yet
  Stopped,   // stopped early by hyperband (or a hook); `value` is its last metric
};
const char* trialStateName(TrialState s);

struct Trial {
  Assignment assignment;
  TrialState state = TrialState::Running;
  std::optional<double> value;  // the metric, as reported (goal not applied)
};

struct Proposal {
  enum class Kind {
    Next,       // run `assignment`
    Exhausted,  // nothing more to run: see `why`
    Invalid,    // the spec cannot be searched by its method: see `problem`
  };
  enum class Why { GridDone, RunCap, TargetReached };
  Kind kind = Kind::Next;
  Assignment assignment;
  Why why = Why::GridDone;
  std::string problem;
};

// The next trial of the sweep. `trialIndex` numbers proposals (the store's
// count of trials created so far, say); it seeds the random numbers, so two
// agents asking at once with different indices get different proposals.
//
// Common to all methods, checked in this order:
// - an invalid spec (specProblem) gives Invalid;
// - a Finished or Stopped trial whose value reached metric.target (<= for
//   minimize, >= for maximize) gives Exhausted/TargetReached;
// - with run_cap > 0, as many Finished, Stopped and Running trials as run_cap
//   give Exhausted/RunCap (failed trials do not count: they are retried).
// Grid: the first cell, in gridCell order, whose key is not the key of a
// Finished, Stopped or Running trial; Exhausted/GridDone when there is none.
// Random: every parameter drawn from its distribution (sampleParameter).
// Bayes: see bayes.h.
Proposal propose(const SweepSpec& spec, const std::vector<Trial>& history, std::uint64_t trialIndex);

// Why the spec's parameters cannot be searched by its method, or nullopt:
// no parameters, duplicate paths, an empty list, probabilities that are not
// one per value or are negative or sum to zero, min > max, non-finite bounds,
// log bounds that are not positive, q <= 0, sigma < 0, a q range holding no
// multiple of q; and, for grid, a distribution other than values,
// categorical, int_uniform, q_uniform or q_log_uniform (the others have no
// finite list of values).
std::optional<std::string> specProblem(const SweepSpec& spec);

// The number of grid cells, saturating at UINT64_MAX; nullopt when a
// parameter has no finite list of values. For the checker's "too large".
std::optional<std::uint64_t> gridSize(const SweepSpec& spec);

// The values a parameter takes in a grid, in order: the list as declared
// (values, categorical); min..max (int_uniform); the multiples of q in
// [min, max], ascending (q_uniform, q_log_uniform). Empty when it has none
// or the list would exceed `limit` values.
std::vector<ParamValue> gridValues(const ParamSpec& p, std::uint64_t limit = 1u << 20);

// Cell `index` of the grid (0 <= index < gridSize): the cartesian product in
// the spec's parameter order, the last parameter varying fastest.
Assignment gridCell(const SweepSpec& spec, std::uint64_t index);

// One draw from a parameter's distribution:
// values: one of them, equally likely; categorical: one of them with its
// probability (equal when none are given); uniform: in [min, max];
// int_uniform: an integer in [min, max], each equally likely; log_uniform:
// exp of uniform in [log min, log max]; normal: mu + sigma * N(0, 1);
// log_normal: exp(mu + sigma * N(0, 1)) (mu and sigma of the logarithm).
// The q forms round the draw to the nearest multiple of q (and q_uniform and
// q_log_uniform keep it within [min, max]). Results of int_uniform, and of
// the q forms with an integral q, are Integer values; others are Number.
ParamValue sampleParameter(const ParamSpec& p, SplitMix64& rng);

// A real number x drawn (or optimised) for a numeric parameter, as the value
// the parameter takes: rounded to the nearest multiple of q for the q forms
// (the nearest one within [min, max] for q_uniform and q_log_uniform), to the
// nearest integer in [min, max] for int_uniform, clamped to [min, max] for
// uniform and log_uniform. Not for values and categorical.
ParamValue quantize(const ParamSpec& p, double x);

// A multiple k*q as the shortest decimal near it, so that 3 * 0.1 is 0.3,
// not 0.30000000000000004 (cells are identified by their text).
double multipleOf(double q, double k);

}  // namespace ipu::sweep
