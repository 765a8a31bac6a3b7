// The pod cost model: predicts the time of an optimizer step, throughput and
// time to train from an ExecutionPlan (it never sees the script). Everything is
// a function of the plan and of the chip's description, so changing the
// mapping changes the answer for the reason it would on hardware:
//
// - compute: each layer's FLOPs by kind of work, split over `shard` IPUs, at
//   the chip's peak times a fitted efficiency (matmul, attention, convolution),
//   element-wise work at the SRAM bandwidth, plus a fitted latency per
//   operation (synchronisation and control of each compute step);
// - the pipeline: cycle by cycle, PopART's schedule (GA + 2S - 2 cycles for S
//   forward stages; each cycle lasts as long as its busiest IPU);
// - communication: stage boundaries and tensor-parallel all-reduces over
//   IPU-Links; gradient all-reduce across replicas as a ring inside a rack and
//   over GW-Links between racks; replicated-tensor-sharding gathers;
// - Streaming Memory traffic (offloaded state, phased execution), the optimizer
//   update, host I/O, and a fitted fixed cost per step.
//
// The fitted parameters live with the chip (hw::Calibration); calibrate.h fits
// them. docs/cost-model.md has the formulas, the fit and its residuals.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/ir/execution_plan.h"
#include "runtime/ir/json.h"

namespace ipu::cost {

// Seconds per optimizer step, by cause. They add up to the step time.
struct Breakdown {
  double compute = 0;           // forward and backward, on the average IPU, in steady state
  double recompute = 0;         // recomputed forward passes
  double pipelineFillDrain = 0; // cycles where the pipeline fills and drains
  double stageImbalance = 0;    // steady-state time the busiest IPU takes beyond the average
  double exchange = 0;          // stage-boundary transfers and tensor-parallel collectives
  double allReduce = 0;         // gradient reduction across replicas
  double rtsCollectives = 0;    // replicated-tensor-sharding gathers of updated weights
  double acrossInstances = 0;   // the reductions' way through the hosts when the replicas run as host instances
  double streaming = 0;         // Streaming Memory traffic not hidden behind compute
  double optimizer = 0;         // the weight update on chip
  double hostIo = 0;            // host I/O not hidden behind compute
  double overhead = 0;          // fixed cost per step (calibrated)
  double total() const;
};

// One IPU's work for one micro batch (seconds), and how busy it is.
struct IpuTime {
  int ipu = 0;
  double forward = 0, backward = 0, recompute = 0, exchange = 0;
  double flopsPerStep = 0;
  double utilisation = 0;  // achieved FLOP/s over peak, over the whole step
  double memoryBytes = 0;    // In-Processor Memory the plan uses (the fullest IPU of its shard group)
  double capacityBytes = 0;
  double busy() const { return forward + backward + recompute + exchange; }
};

// A problem that stops an estimate; `where` points back into the script.
struct Problem {
  std::string code;
  std::string message;
  std::string help;
  ir::SourceRef where;
};

// A way a phase leaves what the calibration rows ran (docs/cost-model.md,
// "Uncertainty"): the fit was never checked there, so the estimate's interval
// is widened, and the search ranks it by that wider interval's lower end.
enum class Regime {
  OtherModel,          // no row has the model's kinds of layers
  OtherFramework,      // no row ran the declared software's framework
  OtherChip,           // no row of the model's kind ran on this chip (only on others of its architecture)
  FrameworkOfModel,    // no row of the model's kind ran the declared framework
  Release,             // no row of the model's kind ran the declared release of its framework
  NoSoftware,          // no `software` declared: no host-side cost per step is charged
  PodSize,             // IPUs far from every row of the model's kind
  Accumulation,        // gradient accumulation far from every row
  MicroBatch,          // micro batch outside the rows'
  MemoryOccupancy,     // In-Processor Memory fuller than any row's
  Phased,              // phased execution, which no row of the kind ran
  NoRecompute,         // no recomputation, which no row of the kind ran
  StreamingBandwidth,  // the step time rests on the assumed Streaming Memory bandwidth
};
const char* name(Regime r);
// Whether leaving the rows this way widens the interval to the worst errors
// of the whole calibration (an assumption widens it by its own range instead).
bool widensToWorstErrors(Regime r);

struct RegimeFlag {
  Regime regime;
  std::string message;   // what is outside the rows, in words
};

// A constant of the hardware description that is assumed, not published,
// and the range it plausibly lies in (declared with the machine).
enum class Assumption { StreamingBandwidth };
const char* name(Assumption a);   // "Streaming Memory bandwidth"
struct AssumedRange {
  Assumption assumption;
  double nominal = 0, low = 0, high = 0;   // as assumed, and its range's ends (widened to include it)
};
// The machine's assumptions that declare a range.
std::vector<AssumedRange> assumedRanges(const hw::Machine& m);

// How the estimate moves when an assumption takes the ends of its range.
struct Sensitivity {
  AssumedRange range;
  double samplesPerSecondAtLow = 0, samplesPerSecondAtHigh = 0;
};

struct PhaseEstimate {
  std::string name;
  bool ok = false;
  int instances = 1;           // host instances the replicas were priced as (Hosting)
  double stepTime = 0;
  Breakdown breakdown;
  double samplesPerSecond = 0;
  double tokensPerSecond = 0;  // 0 when the phase has no sequence length
  double timeToTrain = 0;      // steps x step time
  long long steps = 0;
  int cycles = 0;              // pipeline cycles per step
  double cycleTime = 0;        // steady-state cycle
  // The cycles while the pipeline fills and drains last only as long as the
  // work they do: cycles [fullCycleBegin, fullCycleBegin + fullCycles) are
  // steady-state ones of cycleTime, the others are rampCycleSeconds in order.
  long long fullCycleBegin = 0, fullCycles = 0;
  std::vector<double> rampCycleSeconds;
  double cycleSeconds(long long cycle) const;
  // Each pipeline stage's work for one micro batch, by which the ramp cycles
  // are priced and the timeline drawn: its layers' passes, and the share of
  // its IPU's exchange each of its passes carries (half per pass, split among
  // the IPU's stages).
  struct StageTime {
    int ipu = 0;
    double forward = 0, recompute = 0, backward = 0;
    double exchangeShare = 0;
  };
  std::vector<StageTime> stages;   // by stage index
  double pipelineUtilisation = 0;
  std::vector<IpuTime> ipus;   // one per pipeline IPU
  double peakMemoryBytes = 0;  // the fullest IPU's In-Processor Memory
  bool fits = true;            // every IPU's memory fits (the plan's verdict)
  std::string calibration;     // where the parameters came from
  std::vector<std::string> assumptions;
  // The range the throughput is likely in: from the leave-one-group-out
  // errors of the calibration rows comparable to this phase
  // (comparableErrors, likelyErrorRange below), widened when the phase
  // leaves the rows (regimes) and spanning the assumptions' ranges
  // (sensitivities). Empty (0, 0) without rows.
  double throughputLow = 0, throughputHigh = 0;
  // The relative errors (predicted / measured - 1) the interval allows,
  // before the assumptions' ranges: throughputLow is the lowest of the
  // estimate and its sensitivities over (1 + errorHigh).
  double errorLow = 0, errorHigh = 0;
  std::string intervalBasis;                 // which rows the interval comes from, and how it was widened
  std::vector<RegimeFlag> regimes;           // how the phase is outside every calibration row
  std::vector<Sensitivity> sensitivities;    // assumptions the estimate moves with
};

// The range of relative errors (predicted / measured - 1) a prediction is
// likely in, from the cross-validated errors of comparable rows: between
// their j-th smallest and j-th largest, j = max(1, floor((n + 1) / 10)), a
// prediction interval of nominal coverage 80% (or a little more) for a row
// like them; widened to include 0.
struct ErrorRange {
  double low = 0, high = 0;
};
ErrorRange likelyErrorRange(std::vector<double> errors);
// The rows an interval comes from: up to kIntervalRows rows of the model's
// kind (familyOf), the nearest in IPUs and gradient accumulation (a factor
// of 2 in IPUs counts as much as a factor of 4 in accumulation); every row
// of the chip when the kind has fewer than kFewestIntervalRows (another
// model's errors then stand in for its own). With n < 9 rows of the kind the
// interval is their min to max, nominally (n - 1) / (n + 1): the basis says
// so. `skip`: a row to leave out (the coverage test).
inline constexpr std::size_t kIntervalRows = 9;   // min to max of 9: nominal 80%
inline constexpr std::size_t kFewestIntervalRows = 3;
struct ComparableErrors {
  std::vector<double> errors;   // their leave-one-group-out errors
  // When the kind has rows but too few to make the interval alone: their
  // errors, which the interval always spans. Trimmed among every row's, the
  // one row of a kind the model misses most would fall outside the range of
  // a configuration just like it.
  std::vector<double> kindErrors;
  std::string basis;            // which rows, in words
};
ComparableErrors comparableErrors(const std::vector<hw::Calibration::Row>& rows, const std::string& family, double ipus,
                                  double accumulation, std::size_t skip = static_cast<std::size_t>(-1));
// likelyErrorRange of the comparable errors, widened to span the kind's own
// rows' errors (kindErrors).
ErrorRange likelyErrorRange(const ComparableErrors& comparable);

// The kinds of layers of a phase's model ("attention+embedding+ffn+..."): what
// makes two rows of a calibration table comparable.
std::string familyOf(const ir::PhasePlan& phase);

// What the calibration rows record of a configuration (hw::Calibration::Row),
// so a phase's regimes can be judged before it is planned (the search bounds
// the ranked figure of a whole group of mappings with it).
struct Configuration {
  std::string family;
  std::string chip;           // the chip whose calibration rows these are
  std::string software;       // the declared `software` ("" when unstated)
  double ipus = 0, accumulation = 1, microBatch = 0;
  double memory = 0;          // the fullest IPU's occupancy; 0 when not planned yet
  bool phased = false, recomputes = true;
};
Configuration configurationOf(const ir::PhasePlan& phase);
// The ways `c` is outside every calibration row (no assumption regimes: those
// need the estimate).
std::vector<RegimeFlag> regimesOf(const Configuration& c, const std::vector<hw::Calibration::Row>& rows);
// The least the interval of an estimate of `c` lets it overstate throughput
// by (its errorHigh): what any mapping with `c`'s figures is at least widened
// by; planning can only add regimes (memory occupancy), which only widen it.
double leastErrorHigh(const Configuration& c, const std::vector<hw::Calibration::Row>& rows);

// The framework of a declared `software` ("pytorch sdk3.3" -> "pytorch"): its
// first word. The calibration's fixed cost per step is per framework: the
// published figures show frameworks on the same configuration hundreds of
// milliseconds apart per step, and SDK releases of one framework within a
// few milliseconds (docs/cost-model.md).
std::string frameworkOf(const std::string& software);
// The release of a declared `software` ("pytorch sdk3.3" -> "sdk3.3"): what
// follows its framework, "" when it names none.
std::string releaseOf(const std::string& software);
// The fixed cost per step of `software` under `cal` (the breakdown's overhead).
double stepOverhead(const hw::Calibration& cal, const std::string& software);

// Work the chip does per useful FLOP of a matrix product with inner dimension
// `inner` and `outputs` outputs per row, over `rows` rows on `tiles` tiles: 1
// when the shape fills the AMP units and the tiles, more when a dimension is
// padded to the AMP's groups or tiles are left idle.
double matmulShapeCost(double rows, double inner, double outputs, double tiles);

// A run stepped through with its hooks (estimate_steps.h).
struct SteppedPhase {
  std::string name;
  long long steps = 0;      // planned
  long long stepsRun = 0;   // before a stop
  double timeToTrain = 0;   // stepsRun x step time
  std::map<std::string, double> logged;  // last value of every metric hooks logged
};

struct SteppedRun {
  std::vector<SteppedPhase> phases;
  bool stopped = false;
  std::string stopReason;   // who stopped it and why
  double timeToTrain = 0;   // until the stop
};

struct RunEstimate {
  std::string name;
  std::vector<PhaseEstimate> phases;
  double timeToTrain = 0;
  std::optional<SteppedRun> hooks;  // when the run has hooks: what they did
};

struct Estimate {
  std::vector<RunEstimate> runs;
  std::vector<Problem> problems;
};

// How the replicas are driven from hosts: by one process (PopRun's default),
// or as `instances` processes, each on its own host and driving R/instances
// replicas, whose reductions then cross the hosts' network (`ipu estimate
// --instances N`; docs/cost-model.md "Instances").
struct Hosting {
  int instances = 1;
};

PhaseEstimate estimatePhase(const ir::PhasePlan& phase, std::vector<Problem>* problems = nullptr, const Hosting& hosting = {});
Estimate estimate(const ir::ExecutionPlan& plan, const Hosting& hosting = {});

ir::Json toJson(const PhaseEstimate& e);
ir::Json toJson(const Estimate& e);

}  // namespace ipu::cost
