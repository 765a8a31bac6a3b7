// The mapping search: for one phase of a training, every mapping of its model
// onto its pod at its declared global batch, ranked by an objective, with the
// ones that do not fit rejected by the planner's memory model and the rest
// timed by the cost model, in process (no script text is written or read).
//
// The space (docs/search.md): tensor sharding t, pipeline IPUs p and replicas r
// with t x p x r within the pod (and --max-ipus); every micro batch b that
// divides global_batch / r, gradient accumulation derived; recompute none,
// every layer or stage inputs; optimizer state on chip or in Streaming Memory;
// replicated tensor sharding (with r > 1) of the optimizer state, and of the
// weights too under phased execution; phased execution off, or on with the
// fewest sub-graphs that fit; and two pipeline splits: the contiguous split
// that minimises the cost model's slowest stage (with tied heads back on the
// embedding's IPU, as Graphcore places BERT's), and the planner's memory-aware
// `balanced(p)`. The script's own mapping is evaluated too, for comparison.
//
// The search is exhaustive with pruning: a group of candidates sharing
// (t, p, r, b, recompute) is skipped when a lower bound on its step time
// (its compute and tensor-parallel collectives; phased, its Streaming Memory
// traffic) cannot beat what is already kept, and a variant when a floor on
// its memory is over the capacity. Groups are searched by worker threads in
// waves fixed by what is kept, never by the threads, and ties are broken by a
// fixed order, so the same script always gives the same ranking and counts.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "interpreter/base/source.h"
#include "interpreter/check/evaluator.h"
#include "interpreter/check/program.h"
#include "interpreter/plan/mapping_value.h"
#include "runtime/cost/cost_model.h"
#include "runtime/ir/execution_plan.h"
#include "runtime/ir/mapping_fields.h"

namespace ipu::search {

using Objective = check::SearchObjective;
const char* name(Objective o);
std::optional<Objective> objectiveNamed(const std::string& text);

enum class Split { Single, Optimal, Balanced, Declared };
const char* name(Split s);

// What the ranking orders by. Conservative: the lower end of each mapping's
// likely throughput range (cost::PhaseEstimate::throughputLow), so a mapping
// that rests on a regime no calibration row covers, or on an assumed
// constant, ranks by what it would give if the model erred as badly as it
// has on configurations it had not seen. Expected: the cost model's point
// estimate.
enum class Rank { Conservative, Expected };
const char* name(Rank r);
std::optional<Rank> rankNamed(const std::string& text);

// Choices the user fixes (`--fix key=value`, or the settings written beside
// `search { }`); the others are searched. Mapping settings are fixed through
// the table of mapping fields (runtime/ir/mapping_fields.h): `values` holds
// them and `fields` says which are fixed. Settings the search does not vary
// (available_memory_proportion, batch_norm_replicas) are the declared ones
// unless fixed here.
struct Fixed {
  ir::Mapping values;
  std::set<ir::MappingField> fields;
  std::optional<long long> microBatch;
  std::optional<Split> split;
  bool has(ir::MappingField f) const { return fields.count(f) > 0; }
  bool any() const { return !fields.empty() || microBatch || split; }
  // Fixes `field` to its value in `from`.
  void fix(ir::MappingField field, const ir::Mapping& from);
  // Whether `m` has every fixed setting's value.
  bool admits(const ir::Mapping& m) const;
  // Fixes what `other` fixes too, to `other`'s values where both fix a setting.
  void merge(const Fixed& other);
};
// Parses one `key=value`: a mapping field of the table (`pipeline` is
// `pipeline_ipus`, the IPUs of a balanced or explicit pipeline; `rts` is
// `replicated_tensor_sharding`, which also takes `both`), `micro_batch` or
// `split`. On failure (an unknown key, a value the field does not take, a
// key given twice with different values) returns a message saying what is accepted.
std::optional<std::string> applyFix(Fixed& fixed, const std::string& keyValue);

struct Progress {
  long long evaluated = 0, pruned = 0, groupsDone = 0, groups = 0;
  long long evaluationsLeft = 0;   // the candidates the groups after groupsDone would plan if what is kept stayed as it is (an estimate)
  double seconds = 0;
  double etaSeconds = -1;          // evaluationsLeft at the pace so far; -1 before any was planned
};

// Why a search stopped before it covered the space.
enum class StopReason { None, TimeLimit, Interrupted };
const char* name(StopReason s);

struct Options {
  Objective objective = Objective::Throughput;
  Rank rank = Rank::Conservative;
  int maxIpus = 0;         // 0: the pod's IPUs
  double headroom = 0;     // fraction of each IPU's memory to keep free
  Fixed fixed;
  int top = 5;
  bool prune = true;       // false: evaluate every candidate (the brute force the tests compare with)
  // Worker threads; 0: one per core. The answer and the counts are the same
  // for any number (the groups are searched in fixed waves).
  int threads = 0;
  std::function<void(const Progress&)> progress;  // called now and then during long searches, on the caller's thread
  // Stop between waves when the deadline passes (`--time-limit`) or the
  // flag is set (SIGINT): the result then holds the best found so far.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  const std::atomic<bool>* interrupt = nullptr;
};

struct Candidate {
  // The mapping.
  int shard = 1, pipeline = 1, replicas = 1, phases = 1;
  long long microBatch = 0, gradientAccumulation = 0;
  ir::Recompute recompute = ir::Recompute::None;
  bool optimizerStateStreaming = false, weightsStreaming = false;
  bool rtsOptimizerState = false, rtsWeights = false;
  Split split = Split::Single;
  std::vector<std::pair<int, std::vector<int>>> stages;  // data-flow order: pipeline IPU, layer indices
  std::vector<int> layersPerIpu;                          // layers on each pipeline IPU
  // What the planner and the cost model say.
  int ipusUsed = 0;
  bool fits = false;           // every IPU within its memory less the headroom, Streaming Memory within its own
  double stepTime = 0, samplesPerSecond = 0, tokensPerSecond = 0, timeToTrain = 0;
  double peakMemoryBytes = 0, capacityBytes = 0;
  int peakIpu = 0;             // the IPU (of one replica) that holds the peak
  std::string peakComponent;   // its largest memory component
  double peakComponentBytes = 0;
  // Streaming Memory: the fullest IPU's share in use, and that share's capacity.
  double streamingBytes = 0, streamingCapacityBytes = 0;
  int streamingIpu = 0;
  // What does not fit (when !fits): In-Processor Memory (less the
  // headroom), Streaming Memory, or both.
  bool inProcessorOver = false;
  bool streamingOver() const { return streamingBytes > streamingCapacityBytes; }
  // How sure: the likely throughput range (samples/s; 0, 0 without
  // calibration rows), the ways the mapping is outside every calibration
  // row, the assumptions it moves with, and the step time by cause.
  double throughputLow = 0, throughputHigh = 0;
  std::vector<cost::RegimeFlag> regimes;
  std::vector<cost::Sensitivity> sensitivities;
  cost::Breakdown breakdown;
  double errorHigh = 0;        // the most the estimate may overstate throughput by (cost::PhaseEstimate::errorHigh)
  double rankedStep = 0;       // the step time the ranking uses (Options::rank): stepTime, or the range's lower end's
  double score = 0;            // the objective's value of rankedStep, lower is better
  // Samples per second with an assumption at an end of its range (the
  // estimate itself when the mapping does not move with it).
  double samplesPerSecondAt(cost::Assumption assumption, bool high) const;
  // The step time the ranking would use with the assumption at that end.
  double rankedStepAt(cost::Assumption assumption, bool high, Rank rank) const;
};

// The winner re-ranked with an assumed constant at each end of its plausible
// range (cost::Sensitivity): whether it stays first. Under the conservative
// ranking the answer covers the whole space (the bounds that prune are below
// any mapping's step time at any bandwidth of the range: their streaming part
// is priced at its top); under the expected ranking, the mappings evaluated.
struct AssumptionCheck {
  cost::AssumedRange range;
  std::optional<Candidate> bestAtLow, bestAtHigh;   // the fastest with the constant at that end
  bool holdsAtLow = true, holdsAtHigh = true;        // the winner is that fastest
};

struct Counts {
  long long space = 0;           // candidates in the space
  long long evaluated = 0;       // planned and estimated
  long long pruned = 0;          // skipped: their bound could not beat what was kept
  long long prunedMemory = 0;    // skipped: a smaller micro batch of the same configuration did not fit
  long long rejectedMemory = 0;  // evaluated, and over memory (or headroom)
  long long notSearched = 0;     // left when the search stopped early (PhaseResult::stopped)
};

struct PhaseResult {
  std::string phase;
  Objective objective = Objective::Throughput;
  long long globalBatch = 0;
  int podIpus = 0, maxIpus = 0;
  std::vector<Candidate> top;      // fitting, best first
  std::vector<Candidate> pareto;   // fitting: the fastest within each pod size (1, 2, 4, ... IPUs, and the limit),
                                   // kept when faster than every smaller size's
  std::vector<int> paretoLimits;   // the pod size of each Pareto row
  std::optional<Candidate> declared;      // the script's mapping, as written
  std::optional<Candidate> leastMemory;   // when nothing fits: the closest (smallest overrun of the binding memory)
  std::vector<std::string> relax;         // when nothing fits: which constraint to relax
  Rank rank = Rank::Conservative;
  std::vector<AssumptionCheck> assumptions;  // when the winner or its rivals move with an assumption
  Counts counts;
  // Not None: the search stopped before covering the space, and `top` is the
  // best of what it evaluated, not the best of the space.
  StopReason stopped = StopReason::None;
  double seconds = 0;
  std::string error;               // the search could not run (no calibration, ...)
};

// Search one phase. `evaluator` is the checker's (it costs the layers for other
// micro batches); `sources` locates source references.
PhaseResult searchPhase(const check::PhaseSpec& phase, check::Evaluator& evaluator, const base::SourceMap& sources,
                        const Options& options);

// The candidate as the one mapping value (plan/mapping_value.h): its
// placement, its settings (the declared ones for what the search does not
// vary) and its batch (the phase's global batch at the candidate's micro
// batch; as written for the declared mapping). The search plans every
// candidate through plan::prepareMapping of this value.
plan::MappingValue mappingValue(const check::PhaseSpec& phase, const Candidate& c);
// The value as a mapping the planner takes, not validated (plan::specOf).
// Used by `--write` (search/script_edit.h), the JSON output and the tests.
check::MappingSpec mappingOf(const check::PhaseSpec& phase, const Candidate& c);

// The contiguous split of a chain of layer times into exactly `parts` pipeline
// IPUs that minimises the slowest, IPU 0 also carrying `tail` (the tied heads
// placed back on it): the first layer of each part, then w.size(). Empty when
// there are fewer layers than parts. Exposed for the tests.
std::vector<int> optimalCuts(const std::vector<double>& w, double tail, int parts);

// Make `phase` use the candidate: its mapping (keeping the declared one's
// name, spans and search), its batch figures, and its layers costed for the
// candidate's micro batch. False when the layers cannot be costed.
bool applyCandidate(check::PhaseSpec& phase, check::Evaluator& evaluator, const Candidate& c);

// What a mapping's `search { }` block asks for: its objective, `max_ipus`
// and `headroom`, and every setting written beside it fixed (with the
// pipeline's IPUs, unless a Lua function places the layers). `ipu check`,
// `plan`, `estimate` and `run` search with these; `ipu search` starts from
// them, and its options override them.
Options optionsOf(const check::MappingSpec& m);

}  // namespace ipu::search
