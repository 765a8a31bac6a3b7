#include "interpreter/search/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <thread>
#include <tuple>

#include "interpreter/plan/expand_layers.h"
#include "interpreter/plan/mapping_value.h"
#include "interpreter/plan/planner.h"
#include "interpreter/search/layer_costs.h"
#include "runtime/base/invariant.h"
#include "runtime/base/thread_pool.h"
#include "runtime/cost/cost_model.h"
#include "runtime/ir/phased.h"
#include "runtime/ir/schedule.h"

namespace ipu::search {

using Field = ir::MappingField;

const char* name(Objective o) { return check::nameOf(o); }

std::optional<Objective> objectiveNamed(const std::string& text) {
  for (Objective o : check::kSearchObjectives)
    if (text == name(o)) return o;
  if (text == "cost") return Objective::ThroughputPerIpu;
  return std::nullopt;
}

const char* name(Split s) {
  switch (s) {
    case Split::Single: return "single";
    case Split::Optimal: return "optimal";
    case Split::Balanced: return "balanced";
    case Split::Declared: return "declared";
  }
  return "single";
}

const char* name(StopReason s) {
  switch (s) {
    case StopReason::None: return "none";
    case StopReason::TimeLimit: return "time_limit";
    case StopReason::Interrupted: return "interrupted";
  }
  return "none";
}

const char* name(Rank r) { return r == Rank::Expected ? "expected" : "conservative"; }

std::optional<Rank> rankNamed(const std::string& text) {
  for (Rank r : {Rank::Conservative, Rank::Expected})
    if (text == name(r)) return r;
  return std::nullopt;
}

double Candidate::samplesPerSecondAt(cost::Assumption assumption, bool high) const {
  for (const auto& s : sensitivities)
    if (s.range.assumption == assumption) return high ? s.samplesPerSecondAtHigh : s.samplesPerSecondAtLow;
  return samplesPerSecond;
}

double Candidate::rankedStepAt(cost::Assumption assumption, bool high, Rank rank) const {
  const double sps = samplesPerSecondAt(assumption, high);
  if (!(sps > 0) || !(samplesPerSecond > 0)) return rankedStep;
  const double step = stepTime * samplesPerSecond / sps;
  return rank == Rank::Conservative && throughputHigh > 0 ? step * (1 + errorHigh) : step;
}

void Fixed::fix(ir::MappingField field, const ir::Mapping& from) {
  ir::mappingField(field).set(values, ir::mappingField(field).get(from));
  fields.insert(field);
}

void Fixed::merge(const Fixed& other) {
  for (ir::MappingField f : other.fields) fix(f, other.values);
  if (other.microBatch) microBatch = other.microBatch;
  if (other.split) split = other.split;
}

Options optionsOf(const check::MappingSpec& m) {
  Options o;
  if (!m.search) return o;
  o.objective = m.search->objective;
  o.maxIpus = m.search->maxIpus;
  o.headroom = m.search->headroom;
  // The settings written beside `search` stay as written: every field of
  // the table the user wrote, and the pipeline's IPUs when it is not Lua.
  for (const auto& row : ir::mappingFields())
    if (row.written == ir::FieldWritten::ByUser && m.fieldSpans.count(row.name) > 0) o.fixed.fix(row.field, m.mapping);
  if (m.fieldSpans.count("pipeline") > 0 && m.pipelineKind != check::MappingSpec::PipelineKind::Lua)
    o.fixed.fix(ir::MappingField::PipelineIpus, m.mapping);
  return o;
}

bool Fixed::admits(const ir::Mapping& m) const {
  for (ir::MappingField f : fields) {
    const ir::MappingFieldRow& row = ir::mappingField(f);
    if (row.get(values) != row.get(m)) return false;
  }
  return true;
}

namespace {

// What `--fix` accepts besides the table's fields, for messages.
std::string fixKeys() {
  std::string keys;
  for (const auto& row : ir::mappingFields())
    if (row.written == ir::FieldWritten::ByUser || row.field == ir::MappingField::PipelineIpus)
      keys += std::string(keys.empty() ? "" : ", ") + (row.field == ir::MappingField::PipelineIpus ? "pipeline" : row.name);
  return keys + ", micro_batch or split";
}

}  // namespace

std::optional<std::string> applyFix(Fixed& f, const std::string& keyValue) {
  const auto eq = keyValue.find('=');
  if (eq == std::string::npos) return "`--fix` takes KEY=VALUE, e.g. `--fix replicas=4`";
  std::string key = keyValue.substr(0, eq), v = keyValue.substr(eq + 1);
  if (key == "micro_batch") {
    long long x = 0;
    bool ok = !v.empty() && v.size() <= 13;
    for (char c : v) ok = ok && c >= '0' && c <= '9';
    if (ok) x = std::stoll(v);
    if (!ok || x < 1 || x > (1LL << 40)) return "`micro_batch` takes a whole number from 1, not `" + v + "`";
    if (f.microBatch && *f.microBatch != x)
      return "`micro_batch` is fixed twice, to " + std::to_string(*f.microBatch) + " and to " + v + "; give it once";
    f.microBatch = x;
    return std::nullopt;
  }
  if (key == "split") {
    std::optional<Split> s;
    if (v == "optimal") s = Split::Optimal;
    else if (v == "balanced") s = Split::Balanced;
    else return "`split` takes optimal or balanced, not `" + v + "`";
    if (f.split && *f.split != *s) return "`split` is fixed twice, to " + std::string(name(*f.split)) + " and to " + v + "; give it once";
    f.split = s;
    return std::nullopt;
  }
  // Names the search has always taken for table fields.
  if (key == "pipeline") key = ir::nameOf(Field::PipelineIpus);
  if (key == "rts") key = ir::nameOf(Field::ReplicatedTensorSharding);
  const ir::MappingFieldRow* row = ir::mappingFieldNamed(key);
  if (row != nullptr && row->field == Field::ReplicatedTensorSharding && v == "both")
    v = ir::fieldText(*row, ir::FieldValue{0, row->symbols, {}});
  if (row == nullptr || (row->written != ir::FieldWritten::ByUser && row->field != ir::MappingField::PipelineIpus))
    return "unknown choice `" + key + "`: fix " + fixKeys();
  std::string problem;
  std::optional<ir::FieldValue> value = ir::parseField(*row, v, problem);
  if (!value) return problem;
  if (f.has(row->field) && row->get(f.values) != *value)
    return "`" + keyValue.substr(0, eq) + "` is fixed twice, to " + ir::fieldText(*row, row->get(f.values)) + " and to " +
           ir::fieldText(*row, *value) + "; give it once";
  row->set(f.values, *value);
  f.fields.insert(row->field);
  return std::nullopt;
}

namespace {

using Clock = std::chrono::steady_clock;

// The heads tied back to an earlier layer (BERT's MLM head to the embedding)
// close the pipeline on the embedding's IPU, as Graphcore places them: the
// first layer of that tail, or n when there is none. Same rule as the
// planner's `balanced(p)`.
int tailStart(const std::vector<check::LayerFacts>& layers) {
  const int n = static_cast<int>(layers.size());
  for (int i = n / 2; i < n; ++i) {
    const auto& l = layers[static_cast<std::size_t>(i)];
    if (l.tiedTo.empty()) continue;
    for (int k = 0; k < i; ++k) {
      const std::string& p = layers[static_cast<std::size_t>(k)].path;
      if (p == l.tiedTo || p.rfind(l.tiedTo + ".", 0) == 0 || p.rfind(l.tiedTo + "[", 0) == 0) return i;
    }
  }
  return n;
}

// The contiguous split of chain layers [0, c) into exactly `parts` pipeline
// IPUs that minimises the slowest IPU, where IPU 0 also carries the tail's
// time: a parametric search on the bound, each bound checked greedily from
// the last IPU backwards (each takes as many layers as the bound allows,
// which leaves the smallest possible remainder to IPU 0), O(n log(1/eps)).
// Returns the first layer of each part and c, or nothing when c < parts.
}  // namespace

std::vector<int> optimalCuts(const std::vector<double>& w, double tail, int parts) {
  const int c = static_cast<int>(w.size());
  if (parts < 1 || c < parts) return {};
  std::vector<double> prefix(static_cast<std::size_t>(c) + 1, 0);
  for (int i = 0; i < c; ++i) prefix[static_cast<std::size_t>(i) + 1] = prefix[static_cast<std::size_t>(i)] + w[static_cast<std::size_t>(i)];
  auto sum = [&](int a, int b) { return prefix[static_cast<std::size_t>(b)] - prefix[static_cast<std::size_t>(a)]; };
  // Greedy from the back with at most parts-1 back parts; cuts in ascending order.
  auto greedy = [&](double bound, std::vector<int>* cuts) {
    int end = c, made = 0;
    std::vector<int> starts;
    while (made < parts - 1 && end > 0) {
      int a = end - 1;  // at least one layer
      if (sum(a, end) > bound) break;
      // The smallest a with sum(a, end) <= bound (prefix sums increase).
      int lo = 0, hi = a;
      while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (sum(mid, end) <= bound) hi = mid;
        else lo = mid + 1;
      }
      a = lo;
      if (a == 0) a = 1;  // IPU 0 keeps at least one layer
      if (a >= end) break;
      starts.push_back(a);
      end = a;
      ++made;
    }
    const bool ok = sum(0, end) + tail <= bound;
    if (ok && cuts != nullptr) {
      cuts->assign(1, 0);
      for (auto it = starts.rbegin(); it != starts.rend(); ++it) cuts->push_back(*it);
      cuts->push_back(c);
    }
    return ok;
  };
  double lo = 0, hi = prefix.back() + tail;
  for (int it = 0; it < 100 && hi - lo > 1e-12 * hi; ++it) {
    double mid = (lo + hi) / 2;
    if (greedy(mid, nullptr)) hi = mid;
    else lo = mid;
  }
  std::vector<int> cuts;
  if (!greedy(hi, &cuts)) return {};
  // Fewer parts than IPUs: splitting a part never raises the slowest, so
  // split the costliest parts of more than one layer at their middle.
  while (static_cast<int>(cuts.size()) - 1 < parts) {
    int best = -1;
    double bestCost = -1;
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      if (cuts[k + 1] - cuts[k] < 2) continue;
      double cost = sum(cuts[k], cuts[k + 1]) + (k == 0 ? tail : 0);
      if (cost > bestCost) bestCost = cost, best = static_cast<int>(k);
    }
    if (best < 0) return {};
    const int a = cuts[static_cast<std::size_t>(best)], b = cuts[static_cast<std::size_t>(best) + 1];
    int mid = a + 1;
    while (mid + 1 < b && sum(a, mid + 1) <= sum(mid + 1, b)) ++mid;
    cuts.insert(cuts.begin() + best + 1, mid);
  }
  return cuts;
}

namespace {

// What one plan of every layer on one IPU (of a shard group of t) says for
// micro batch b, none of which depends on the placement: the IPU's work for
// one micro batch (compute, recomputation and the tensor-parallel
// collectives, no stage boundary), the parameters its layers hold (their
// share of the group) and the elements phased execution stashes in
// Streaming Memory per micro batch. Spread over p pipeline IPUs, the
// busiest has at least a p-th of each.
// For memory (interpreter/plan/plan_memory.cpp), the IPU that holds a
// layer holds at least the chip's base code and the layer's code, its
// activations, its share of the tensor-parallel buffer, its partials (up to
// the available memory proportion) and, phased, the two boundary buffers
// of its input: `layerBytes` is the largest such sum resident and
// `phasedLayerBytes` phased. Streaming Memory holds at least the stash of
// every layer (`streamedStash`, elements: without recomputation all its
// activations, with every-layer recomputation its input; stage
// recomputation stashes stage inputs only, counted as none).
struct Floors {
  double work = 0, parameters = 0, stashed = 0;
  double layerBytes = 0, phasedLayerBytes = 0, streamedStash = 0;
};

struct Group {
  int t = 1, p = 1, r = 1;
  long long b = 0, ga = 0;
  ir::Recompute recompute = ir::Recompute::None;
  double boundStep = 0;   // lower bound on the ranked step time of any candidate of the group
  double boundScore = 0;
  int ipus = 0;
  double computeBound = 0;   // lower bound on the estimate's step time (boundStep before the ranking's widening)
  const Floors* floors = nullptr;
  // Prepared before the group is searched (Searcher::prepare), read by the workers:
  double phasedWidening = 1;             // leastWidening of the group's phased variants
  const std::vector<int>* cuts = nullptr;   // the optimal split's cuts (p > 1; empty: none)
};

// The fastest fitting mapping with an assumption at each end of its range.
struct Ends {
  cost::AssumedRange range;
  std::optional<Candidate> best[2];   // at the low end, at the high end
  double score[2] = {0, 0};
};

// What the search keeps as it goes.
struct Standings {
  std::vector<Candidate> top;            // best first, at most Options::top
  std::map<int, Candidate> bestWithin;   // Pareto row (most IPUs) -> fastest kept within it
  std::map<cost::Assumption, Ends> atEnds;   // the pod's assumptions that declare a range
};

// One worker's planning state: the phase costed for each micro batch (its
// batch figures set per candidate) and the planner's expanded layers,
// shared by the candidates of a micro batch.
struct Scratch {
  std::map<long long, check::PhaseSpec> phases;
  plan::LayerExpansions expansions;
};

// What searching one group found; merged into the standings in group order.
struct GroupOutcome {
  struct Closest {
    double floorRatio = 0;   // the variant's memory floor over capacity (the larger of the two memories)
    std::size_t variant = 0;
    Split split = Split::Single;
  };
  Counts counts;
  std::optional<Closest> closest;        // while nothing fits: the group's variant pruned for memory with the least floor
  std::vector<Candidate> kept;           // fitting candidates, in the order the group met them
  std::optional<Candidate> leastMemory;  // the group's closest to fitting
};

// The closest to fitting: the smallest overrun of whichever memory binds.
double overrun(const Candidate& x) {
  const double ipm = x.capacityBytes > 0 ? x.peakMemoryBytes / x.capacityBytes : 0;
  const double sm = x.streamingCapacityBytes > 0 ? x.streamingBytes / x.streamingCapacityBytes : 0;
  return std::max(ipm, sm);
}

// A candidate's settings apart from t, p, r, b, recompute and the split.
struct Variant {
  bool osStream = false, rtsO = false, rtsW = false, weightsStream = false;
  int phases = 1;
};

const char* largestComponent(const ir::MemoryBreakdown& m, double* bytes) {
  std::pair<double, const char*> parts[] = {{m.weights, "weights"},
                                            {m.optimizerState, "optimizer state"},
                                            {m.gradientAccumulators, "gradient accumulators"},
                                            {m.activations, "activations"},
                                            {m.code, "code"},
                                            {m.exchange, "exchange buffers"},
                                            {m.temporaries, "temporaries"}};
  auto* best = &parts[0];
  for (auto& p : parts)
    if (p.first > best->first) best = &p;
  *bytes = best->first;
  return best->second;
}

// Phased execution's rungs in the order the search climbs them: resident,
// 2, 4, ... sub-graphs, then weights streamed layer by layer.
int rung(const Candidate& c) { return c.weightsStreaming ? std::numeric_limits<int>::max() : c.phases; }

auto orderKey(const Candidate& c) {
  return std::make_tuple(c.score, c.ipusUsed, c.shard, c.pipeline, c.replicas, c.microBatch, static_cast<int>(c.recompute),
                         c.optimizerStateStreaming, c.rtsOptimizerState, rung(c), c.rtsWeights, static_cast<int>(c.split));
}

// The same mapping but for its phased-execution rung.
bool sameButRung(const Candidate& a, const Candidate& b) {
  return a.shard == b.shard && a.pipeline == b.pipeline && a.replicas == b.replicas && a.microBatch == b.microBatch &&
         a.recompute == b.recompute && a.optimizerStateStreaming == b.optimizerStateStreaming &&
         a.rtsOptimizerState == b.rtsOptimizerState && a.rtsWeights == b.rtsWeights && a.stages == b.stages &&
         rung(a) > 1 && rung(b) > 1;
}

bool sameMapping(const Candidate& a, const Candidate& b) {
  return a.shard == b.shard && a.pipeline == b.pipeline && a.replicas == b.replicas && a.microBatch == b.microBatch &&
         a.recompute == b.recompute && a.optimizerStateStreaming == b.optimizerStateStreaming &&
         a.weightsStreaming == b.weightsStreaming && a.phases == b.phases && a.rtsOptimizerState == b.rtsOptimizerState &&
         a.rtsWeights == b.rtsWeights && a.stages == b.stages;
}

class Searcher {
 public:
  Searcher(const check::PhaseSpec& phase, check::Evaluator& ev, const base::SourceMap& sources, const Options& o)
      : phase_(phase), costs_(ev, phase), sources_(sources), o_(o), declared_(*phase.mapping) {}

  PhaseResult run() {
    const auto start = Clock::now();
    start_ = start;
    PhaseResult out;
    out.phase = phase_.name;
    out.objective = o_.objective;
    gb_ = phase_.batch.globalBatch;
    out.globalBatch = gb_;
    podIpus_ = declared_.pod.ipus();
    maxIpus_ = o_.maxIpus > 0 ? std::min(o_.maxIpus, podIpus_) : podIpus_;
    out.podIpus = podIpus_;
    out.maxIpus = maxIpus_;
    n_ = static_cast<int>(phase_.layers->size());
    chain_ = tailStart(*phase_.layers);
    for (const auto& l : *phase_.layers) params_ += l.params;
    // What every step pays whatever the mapping: the software's fixed cost and
    // the update's cost per parameter of a replica (cost::Breakdown's overhead
    // and part of its optimizer term).
    const hw::Calibration& cal = declared_.pod.machine.chip.calibration;
    overhead_ = cost::stepOverhead(cal, phase_.software) / static_cast<double>(std::max(1LL, phase_.deviceIterations)) +
                params_ * cal.updateSecondsPerParameter;
    weightBytes_ = ir::bytesOf(phase_.precision.weights);
    computeBytes_ = ir::bytesOf(phase_.precision.compute);
    fastestStreaming_ = declared_.pod.machine.streamingBandwidth;
    accumulatorBytes_ = ir::bytesOf(phase_.precision.accumulators);
    stateBytesPerParam_ = phase_.optimizer.moments * ir::bytesOf(phase_.precision.optimizerState) +
                          (phase_.precision.masterWeights ? 4.0 : 0.0);
    codeBase_ = declared_.pod.machine.chip.codeBaseBytes;
    partialBytes_ = ir::bytesOf(phase_.precision.partials);
    streamingCapacity_ = declared_.pod.streamingBytesPerIpu();
    {
      // The partials are capped by the smallest available memory proportion
      // any pipeline IPU may get.
      const auto& amps = declared_.mapping.availableMemoryProportion;
      const double least = amps.empty() ? ir::Mapping::kDefaultAvailableMemoryProportion : *std::min_element(amps.begin(), amps.end());
      leastTemporaries_ = least * declared_.pod.machine.chip.memoryBytes;
    }
    capacity_ = declared_.pod.machine.chip.memoryBytes;
    for (const cost::AssumedRange& range : cost::assumedRanges(declared_.pod.machine)) {
      standings_.atEnds[range.assumption].range = range;
      if (range.assumption == cost::Assumption::StreamingBandwidth) fastestStreaming_ = std::max(fastestStreaming_, range.high);
    }

    // The script's own mapping, as written.
    {
      Candidate d;
      d.shard = std::max(1, declared_.mapping.shard);
      d.replicas = std::max(1, declared_.mapping.replicas);
      d.pipeline = std::max(1, declared_.mapping.pipelineIpus);
      d.microBatch = phase_.batch.microBatch;
      d.gradientAccumulation = phase_.batch.gradientAccumulation;
      d.recompute = declared_.mapping.recompute;
      d.optimizerStateStreaming = declared_.mapping.optimizerStateStreaming;
      d.weightsStreaming = declared_.mapping.weightsStreaming;
      d.phases = std::max(1, declared_.mapping.phases);
      d.rtsOptimizerState = declared_.mapping.rtsOptimizerState;
      d.rtsWeights = declared_.mapping.rtsWeights;
      d.split = Split::Declared;
      std::string problem;
      costedFor(d.microBatch);
      GroupOutcome declaredOutcome;
      const bool evaluated = evaluate(d, &problem, mainScratch_, declaredOutcome);
      counts_.evaluated += declaredOutcome.counts.evaluated;
      if (!evaluated) {
        out.error = problem;
        return out;
      }
      // A Lua placement needs the hooks, which the search does not run: such
      // a mapping is neither compared nor kept.
      if (declared_.pipelineKind != check::MappingSpec::PipelineKind::Lua) {
        out.declared = d;
        if (d.ipusUsed <= maxIpus_ && allowed(d)) keep(standings_, d);
      }
    }
    if (gb_ <= 0 || n_ == 0) {
      out.error = "phase `" + phase_.name + "` has no global batch or no layers to map";
      return out;
    }

    std::vector<Group> groups = enumerate();
    out.counts.space = space_;
    std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
      return std::tie(a.boundScore, a.ipus, a.t, a.p, a.r, a.b, a.recompute) <
             std::tie(b.boundScore, b.ipus, b.t, b.p, b.r, b.b, b.recompute);
    });
    progress_.groups = static_cast<long long>(groups.size());
    // In waves of groups in bound order, each group searched by a worker
    // against the standings as they were before its wave, the outcomes
    // merged in group order: the answer and the counts depend on the waves,
    // which the standings fix, and not on the threads. A wave holds the next
    // groups the standings cannot prune, one at first and then twice as many
    // each time up to kWaveGroups, so the first groups (the likeliest
    // winners) set the standings the rest are pruned by.
    const int threads = o_.threads > 0 ? o_.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    ThreadPool pool(threads);
    std::vector<Scratch> scratch(static_cast<std::size_t>(threads));
    const auto loopStart = Clock::now();
    auto lastReport = loopStart;
    const long long evaluatedBefore = counts_.evaluated;
    std::size_t next = 0;
    for (std::size_t wave = 1; next < groups.size(); wave = std::min<std::size_t>(2 * wave, kWaveGroups)) {
      if (const StopReason why = stopRequested(); why != StopReason::None) {
        out.stopped = why;
        for (std::size_t k = next; k < groups.size(); ++k) counts_.notSearched += sizeOf(groups[k]);
        break;
      }
      // The wave: the next `wave` groups the standings cannot prune (and
      // the pruned ones among them).
      std::vector<std::size_t> live;
      std::size_t end = next;
      for (; end < groups.size() && live.size() < wave; ++end) {
        if (hopeless(standings_, groups[end].boundStep, groups[end].boundScore, groups[end].ipus)) {
          counts_.pruned += sizeOf(groups[end]);
          continue;
        }
        prepare(groups[end]);
        live.push_back(end);
      }
      std::vector<GroupOutcome> outcomes(end - next);
      std::atomic<std::size_t> claimed{0};
      pool.run(scratch.size(), [&](std::size_t w) {
        for (std::size_t i = claimed++; i < live.size(); i = claimed++)
          searchGroup(groups[live[i]], standings_, scratch[w], outcomes[live[i] - next]);
      });
      for (std::size_t k = next; k < end; ++k) {
        GroupOutcome& o = outcomes[k - next];
        if (o.closest) closest_.emplace_back(k, *o.closest);
        merge(o);
      }
      next = end;
      report(groups, next, loopStart, evaluatedBefore, lastReport);
    }

    if (standings_.top.empty() && out.stopped == StopReason::None) closestAmongPruned(groups);
    out.counts.evaluated = counts_.evaluated;
    out.counts.pruned = counts_.pruned;
    out.counts.prunedMemory = counts_.prunedMemory;
    out.counts.rejectedMemory = counts_.rejectedMemory;
    out.counts.notSearched = counts_.notSearched;
    const std::vector<Candidate>& top_ = standings_.top;
    out.top = top_;
    // Pareto: per pod size (powers of two up to the limit), the fastest
    // mapping within it; kept when faster than every smaller size's.
    double bestSoFar = std::numeric_limits<double>::infinity();
    for (const auto& [limit, c] : standings_.bestWithin)
      if (c.rankedStep < bestSoFar) {
        out.pareto.push_back(c);
        out.paretoLimits.push_back(limit);
        bestSoFar = c.rankedStep;
      }
    out.rank = o_.rank;
    // The winner against the fastest with each assumption at an end of its range.
    if (!top_.empty())
      for (const auto& [assumption, ends] : standings_.atEnds) {
        AssumptionCheck check;
        check.range = ends.range;
        check.bestAtLow = ends.best[0];
        check.bestAtHigh = ends.best[1];
        check.holdsAtLow = !ends.best[0] || sameMapping(*ends.best[0], top_.front());
        check.holdsAtHigh = !ends.best[1] || sameMapping(*ends.best[1], top_.front());
        out.assumptions.push_back(std::move(check));
      }
    if (top_.empty()) {
      out.leastMemory = leastMemory_;
      if (maxIpus_ < podIpus_)
        out.relax.push_back("allow more IPUs: `--max-ipus " + std::to_string(podIpus_) + "` (the pod has " +
                            std::to_string(podIpus_) + ")");
      if (o_.headroom > 0 && leastMemory_ && leastMemory_->peakMemoryBytes <= leastMemory_->capacityBytes)
        out.relax.push_back("keep less memory free: the least-memory mapping fits with no headroom");
      if (fixedAnything())
        out.relax.push_back("drop the fixed choices (`--fix ...`): they exclude the rest of the space");
      out.relax.push_back("a pod with more IPUs (or IPUs with more memory)");
    }
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return out;
  }

 private:
  // A worker's view while it searches one group: the standings of its wave
  // (copied on the group's first keep, then its own) and the outcome it fills.
  struct GroupSearch {
    const Searcher& searcher;
    const Standings& shared;
    Scratch& scratch;
    GroupOutcome& out;
    std::optional<Standings> local;
    const Standings& standings() const { return local ? *local : shared; }
    void keep(const Candidate& c) {
      if (!c.fits) return;
      if (!local) local = shared;
      searcher.keep(*local, c);
      out.kept.push_back(c);
    }
    // While nothing fits, the variant pruned for memory whose floor overruns least.
    void prunedForMemory(double floorRatio, std::size_t variant, Split split) {
      if (!standings().top.empty()) return;
      if (!out.closest || floorRatio < out.closest->floorRatio) out.closest = GroupOutcome::Closest{floorRatio, variant, split};
    }
  };

  // When nothing fits, the closest to fitting among the variants the memory
  // floors pruned: each group's least floor, evaluated from the smallest
  // while a floor is below the least overrun found (a floor never exceeds
  // its variant's overrun).
  void closestAmongPruned(const std::vector<Group>& groups) {
    std::sort(closest_.begin(), closest_.end(), [](const auto& a, const auto& b) {
      return std::tie(a.second.floorRatio, a.first) < std::tie(b.second.floorRatio, b.first);
    });
    GroupOutcome o;
    for (const auto& [k, cl] : closest_) {
      if (leastMemory_ && cl.floorRatio >= overrun(*leastMemory_)) break;
      const Group& g = groups[k];
      static const std::vector<int> kNoCuts;
      Candidate c = candidateOf(g, variants(g)[cl.variant], cl.split, g.cuts != nullptr ? *g.cuts : kNoCuts);
      o = GroupOutcome{};
      if (!evaluate(c, nullptr, mainScratch_, o)) continue;
      --counts_.prunedMemory;   // now evaluated instead
      merge(o);
    }
  }

  // The layers costed for micro batch b (costs_, which the workers must not
  // call: it derives them on first use), recorded for evaluate().
  check::PhaseSpec* costedFor(long long b) {
    check::PhaseSpec* ph = costs_.phaseFor(b);
    costed_[b] = ph;
    return ph;
  }

  // What a worker needs of a group that the bounds did not prune: the
  // widening of its phased variants and its optimal split.
  void prepare(Group& g) {
    g.phasedWidening = leastWidening(g, true);
    if (g.p <= 1) return;
    auto key = std::make_tuple(g.t, g.b, static_cast<int>(g.recompute), g.p);
    auto it = cuts_.find(key);
    if (it == cuts_.end()) {
      const std::vector<double>* times = layerTimes(g.t, g.b, g.recompute);
      if (times == nullptr) times = layerTimes(1, g.b, g.recompute);
      std::vector<int> cuts;
      if (times != nullptr) {
        std::vector<double> w(times->begin(), times->begin() + chain_);
        double tail = 0;
        for (int i = chain_; i < n_; ++i) tail += (*times)[static_cast<std::size_t>(i)];
        cuts = optimalCuts(w, tail, g.p);
      }
      it = cuts_.emplace(key, std::move(cuts)).first;
    }
    g.cuts = &it->second;
  }

  void merge(GroupOutcome& o) {
    counts_.evaluated += o.counts.evaluated;
    counts_.pruned += o.counts.pruned;
    counts_.prunedMemory += o.counts.prunedMemory;
    counts_.rejectedMemory += o.counts.rejectedMemory;
    for (const Candidate& c : o.kept) keep(standings_, c);
    if (o.leastMemory && (!leastMemory_ || overrun(*o.leastMemory) < overrun(*leastMemory_))) leastMemory_ = std::move(o.leastMemory);
  }

  StopReason stopRequested() const {
    if (o_.interrupt != nullptr && o_.interrupt->load()) return StopReason::Interrupted;
    if (o_.deadline && Clock::now() >= *o_.deadline) return StopReason::TimeLimit;
    return StopReason::None;
  }

  // The candidates a group would plan if the standings stayed as they are:
  // searchGroup's cheap checks (the group's and each ladder's bound, the
  // memory floors) without its planning; a phased ladder that passes them is
  // binary-searched, about log2 of its rungs plus one. An estimate for the
  // progress bar only: the ladder's bound here leaves out the phased
  // widening, so it errs towards more.
  double expectedEvaluations(const Group& g) const {
    if (hopeless(standings_, g.boundStep, g.boundScore, g.ipus)) return 0;
    const std::vector<Variant> vs = variants(g);
    double n = 0;
    std::size_t i = 0;
    while (i < vs.size()) {
      const Variant& v = vs[i];
      const bool phased = v.phases > 1 || v.weightsStream;
      std::size_t j = i + 1;
      if (phased)
        while (j < vs.size() && (vs[j].phases > 1 || vs[j].weightsStream) && vs[j].osStream == v.osStream && vs[j].rtsO == v.rtsO &&
               vs[j].rtsW == v.rtsW)
          ++j;
      const double bound = phased ? std::max(g.boundStep, phasedFloor(g, v)) : g.boundStep;
      const bool fits = memoryFloor(g, v) <= (1 - o_.headroom) * capacity_ && (!phased || streamingFloor(g, v) <= streamingCapacity_);
      if (fits && !hopeless(standings_, bound, scoreOf(bound, g.ipus), g.ipus))
        n += phased ? std::log2(static_cast<double>(j - i)) + 1 : 1;
      i = j;
    }
    return n * splits(g);
  }

  // Progress, at most four times a second: the candidates left to plan if
  // the standings stayed as they are, and the time they would take at the
  // pace of the evaluations so far.
  void report(const std::vector<Group>& groups, std::size_t next, Clock::time_point loopStart, long long evaluatedBefore,
              Clock::time_point& last) {
    if (!o_.progress) return;
    const auto now = Clock::now();
    if (now - last < std::chrono::milliseconds(250) && next < groups.size()) return;
    last = now;
    double expected = 0;
    for (std::size_t k = next; k < groups.size(); ++k) expected += expectedEvaluations(groups[k]);
    progress_.evaluated = counts_.evaluated;
    progress_.pruned = counts_.pruned + counts_.prunedMemory;
    progress_.groupsDone = static_cast<long long>(next);
    progress_.evaluationsLeft = static_cast<long long>(expected);
    progress_.seconds = std::chrono::duration<double>(now - start_).count();
    const long long evaluated = counts_.evaluated - evaluatedBefore;
    const double pace = evaluated > 0 ? std::chrono::duration<double>(now - loopStart).count() / static_cast<double>(evaluated) : -1;
    progress_.etaSeconds = pace >= 0 ? pace * expected : -1;
    o_.progress(progress_);
  }

  bool fixedAnything() const {
    return o_.fixed.any();
  }

  bool allowed(const Candidate& c) const {
    const Fixed& f = o_.fixed;
    return f.admits(mappingOf(phase_, c).mapping) && (!f.microBatch || *f.microBatch == c.microBatch) &&
           (!f.split || *f.split == c.split);
  }

  double scoreOf(double step, int ipus) const {
    return o_.objective == Objective::ThroughputPerIpu ? step * ipus : step;
  }

  // The cost model's compute time (forward, backward, recomputation) of every
  // layer for one micro batch at shard t: one plan with each layer on its own
  // pipeline IPU, estimated. The cost model times each layer independently of
  // where it is placed, so these are the figures every placement adds up.
  const std::vector<double>* layerTimes(int t, long long b, ir::Recompute rc) {
    auto key = std::make_tuple(t, b, static_cast<int>(rc));
    auto it = layerTimes_.find(key);
    if (it != layerTimes_.end()) return it->second.empty() ? nullptr : &it->second;
    std::vector<double>& out = layerTimes_[key];
    check::PhaseSpec* ph = costedFor(b);
    if (ph == nullptr) return nullptr;
    setBatch(*ph, b, 1);
    check::MappingSpec spec = declared_;
    spec.pipelineKind = check::MappingSpec::PipelineKind::Explicit;
    spec.stages.clear();
    for (int i = 0; i < n_; ++i) spec.stages.push_back(check::StageSpec{i, {}, {i}});
    spec.pipelineIpus = n_;
    ir::Mapping settings = declared_.mapping;
    settings.shard = t;
    settings.replicas = 1;
    settings.pipelineIpus = n_;
    settings.phases = 1;
    settings.weightsStreaming = settings.optimizerStateStreaming = settings.rtsWeights = settings.rtsOptimizerState = false;
    settings.recompute = rc;
    ir::PhasePlan plan = plan::planPhase(*ph, spec, settings, sources_, nullptr, nullptr, &mainScratch_.expansions);
    cost::PhaseEstimate e = cost::estimatePhase(plan);
    if (!e.ok || static_cast<int>(e.ipus.size()) != n_) return nullptr;
    for (const auto& ipu : e.ipus) out.push_back(ipu.forward + ipu.backward + ipu.recompute);
    return &out;
  }

  // Floors of (t, b, recompute), planned once; computed before any worker runs.
  const Floors* floors(int t, long long b, ir::Recompute rc) {
    auto key = std::make_tuple(t, b, static_cast<int>(rc));
    auto it = floors_.find(key);
    if (it != floors_.end()) return it->second ? &*it->second : nullptr;
    std::optional<Floors>& out = floors_[key];
    check::PhaseSpec* ph = costedFor(b);
    if (ph == nullptr) return nullptr;
    setBatch(*ph, b, 1);
    check::MappingSpec spec = declared_;
    spec.pipelineKind = check::MappingSpec::PipelineKind::Single;
    spec.stages.clear();
    spec.pipelineIpus = 1;
    ir::Mapping settings = declared_.mapping;
    settings.shard = t;
    settings.replicas = 1;
    settings.pipelineIpus = 1;
    settings.pipelineKind = ir::PipelineKind::Single;
    settings.phases = 1;
    settings.weightsStreaming = settings.optimizerStateStreaming = settings.rtsWeights = settings.rtsOptimizerState = false;
    settings.recompute = rc;
    ir::PhasePlan plan = plan::planPhase(*ph, spec, settings, sources_, nullptr, nullptr, &mainScratch_.expansions);
    cost::PhaseEstimate e = cost::estimatePhase(plan);
    if (!e.ok || e.ipus.size() != 1) return nullptr;
    Floors f;
    f.work = e.ipus.front().busy();
    for (std::size_t i = 0; i < plan.layers.size(); ++i) {
      const ir::Layer& l = plan.layers[i];
      f.parameters += l.shardable ? l.params / t : l.params;
      // Every candidate's first stage starts with the first layer, which
      // reads the host's micro batch: this plan's rule holds for them all.
      f.stashed += ir::stashedElements(plan, static_cast<int>(i), rc, t);
      const double act = l.shardable ? l.activationElements / t : l.activationElements;
      const double partials = std::min((l.shardable ? l.workspaceElements / t : l.workspaceElements) * partialBytes_, leastTemporaries_);
      const double held = codeBase_ + l.codeBytes + act * computeBytes_ + (t > 1 ? l.outputElements * computeBytes_ : 0) + partials;
      f.layerBytes = std::max(f.layerBytes, held);
      f.phasedLayerBytes = std::max(f.phasedLayerBytes, held + 2 * l.inputElements * computeBytes_);
      f.streamedStash += rc == ir::Recompute::None ? act : rc == ir::Recompute::EveryLayer ? l.inputElements : 0;
    }
    out = f;
    return &*out;
  }

  // A lower bound on the step time (before the ranking's widening) of a
  // phased variant: a step moves at least its Streaming Memory traffic
  // (runtime/ir/phased.h: every weight in for the forward and again for the
  // backward run, the gradients out, the stash out and back for each micro
  // batch, the update's reads and writes), a p-th of it on the busiest IPU,
  // and the pipeline's time hides at most that traffic's time. Priced at the
  // top of the bandwidth's plausible range, so the bound holds at every
  // bandwidth the assumption checks try.
  double phasedFloor(const Group& g, const Variant& v) const {
    const Floors* fl = g.floors;
    if (fl == nullptr || !(fastestStreaming_ > 0)) return g.computeBound;
    const double w = fl->parameters, rtsO = v.rtsO ? g.r : 1, rtsW = v.rtsW ? g.r : 1;
    const double bytes = 2 * w * weightBytes_ / rtsW + w * accumulatorBytes_ +
                         static_cast<double>(g.ga) * 2 * fl->stashed * computeBytes_ +
                         w * ((weightBytes_ + accumulatorBytes_) / rtsO + weightBytes_ / rtsW);
    return std::max(g.computeBound, bytes / g.p / fastestStreaming_ + overhead_);
  }

  void setBatch(check::PhaseSpec& ph, long long b, int r) const {
    ph.batch.microBatch = b;
    ph.batch.replicas = r;
    ph.batch.globalBatch = gb_;
    ph.batch.gradientAccumulation = gb_ / (b * r);
    ph.batch.derived = ir::DerivedBatch::GradientAccumulation;
  }

  std::vector<Group> enumerate() {
    std::vector<Group> groups;
    const Fixed& f = o_.fixed;
    std::vector<ir::Recompute> recomputes = {ir::Recompute::None, ir::Recompute::EveryLayer, ir::Recompute::Stage};
    // The global batch's divisors, ascending, by trial division up to its square root.
    std::vector<long long> divisors, large;
    for (long long d = 1; d <= gb_ / d; ++d)
      if (gb_ % d == 0) {
        divisors.push_back(d);
        if (d != gb_ / d) large.push_back(gb_ / d);
      }
    divisors.insert(divisors.end(), large.rbegin(), large.rend());
    for (int t = 1; t <= maxIpus_; t *= 2) {
      if (f.has(Field::Shard) && f.values.shard != t) continue;
      for (int p = 1; t * p <= maxIpus_ && p <= chain_; ++p) {
        if (f.has(Field::PipelineIpus) && f.values.pipelineIpus != p) continue;
        for (int r = 1; t * p * r <= maxIpus_; ++r) {
          if (gb_ % r != 0 || (f.has(Field::Replicas) && f.values.replicas != r)) continue;
          if (declared_.pod.powerOfTwoReplicas && (r & (r - 1)) != 0) continue;  // the pod runs replicas in rings of 2^k
          // Declared batch-norm groups must divide the replicas (IPU1112).
          if (declared_.mapping.batchNormReplicas > 1 && r % declared_.mapping.batchNormReplicas != 0) continue;
          const long long perReplica = gb_ / r;
          for (long long b : divisors) {
            if (perReplica % b != 0 || (f.microBatch && *f.microBatch != b)) continue;
            for (ir::Recompute rc : recomputes) {
              if (f.has(Field::Recompute) && f.values.recompute != rc) continue;
              // Bound from the layers' times unsharded: sharding over t IPUs
              // divides a layer's time by at most t.
              const std::vector<double>* times = layerTimes(1, b, rc);
              if (times == nullptr) continue;
              Group g{t, p, r, b, perReplica / b, rc, 0, 0, t * p * r, 0, nullptr};
              // The step takes at least the busiest IPU's work over the
              // step, GA times its work for a micro batch (the ramp cycles
              // cost only the work they do, so the schedule's extra cycles are
              // no floor), and that is at least the average IPU's and at least
              // the slowest layer's. The average also counts the
              // tensor-parallel collectives and the layers that do not shard
              // (one plan of every layer on one IPU of a group of t).
              double sum = 0, slowest = 0;
              for (double x : *times) sum += x, slowest = std::max(slowest, x);
              double cycle = std::max(sum / p, slowest) / t;
              const Floors* fl = floors(t, b, rc);
              if (fl != nullptr) cycle = std::max(cycle, fl->work / p);
              // Ranked by the likely range's lower end, a mapping's step is
              // its estimate times at least (1 + the comparable rows' worst
              // overstatement): regimes only widen that, and the ranges of
              // the assumptions only lower the end.
              g.floors = fl;
              g.computeBound = static_cast<double>(g.ga) * cycle + overhead_;
              g.boundStep = g.computeBound * leastWidening(g, false);
              g.boundScore = scoreOf(g.boundStep, g.ipus);
              space_ += static_cast<long long>(variants(g).size()) * splits(g);
              groups.push_back(g);
            }
          }
        }
      }
    }
    return groups;
  }

  // The least factor the conservative ranking multiplies the estimate's step
  // time of a mapping of the group by (phased or not): the interval's least
  // overstatement for what is known of the mapping before it is planned
  // (cost::leastErrorHigh); 1 under the expected ranking.
  double leastWidening(const Group& g, bool phased) {
    const auto& rows = declared_.pod.machine.chip.calibration.rows;
    if (o_.rank != Rank::Conservative || rows.empty() || family_.empty()) return 1;
    auto key = std::make_tuple(g.ipus, std::max<long long>(1, g.ga), g.b, g.recompute != ir::Recompute::None, phased);
    auto it = widening_.find(key);
    if (it != widening_.end()) return it->second;
    cost::Configuration c;
    c.family = family_;
    c.chip = declared_.pod.machine.chip.name;
    c.software = phase_.software;   // every candidate runs the phase's software
    c.ipus = g.ipus;
    c.accumulation = static_cast<double>(std::max<long long>(1, g.ga));
    c.microBatch = static_cast<double>(g.b);
    c.phased = phased;
    c.recomputes = g.recompute != ir::Recompute::None;
    return widening_[key] = 1 + cost::leastErrorHigh(c, rows);
  }

  long long sizeOf(const Group& g) const { return static_cast<long long>(variants(g).size()) * splits(g); }

  int splits(const Group& g) const {
    if (g.p == 1) return 1;
    const Fixed& f = o_.fixed;
    return f.split ? 1 : 2;
  }

  // Every variant of a group; the phased ones form ladders of sub-graph
  // counts (2, 4, ... 256, then weights streamed layer by layer).
  std::vector<Variant> variants(const Group& g) const {
    std::vector<Variant> out;
    const Fixed& f = o_.fixed;
    for (bool os : {false, true})
      for (bool rtsO : {false, true}) {
        if (rtsO && g.r == 1) continue;
        for (bool rtsW : {false, true}) {
          if (rtsW && g.r == 1) continue;
          for (int k : kLadder) {
            Variant v{os, rtsO, rtsW, k == 0, k == 0 ? 1 : k};
            if (rtsW && v.phases == 1 && !v.weightsStream) continue;  // RTS of weights only matters when they stream
            // Phased execution streams the optimizer state anyway: `on_chip` would be the same candidate.
            if ((v.phases > 1 || v.weightsStream) && !os) continue;
            const ir::Mapping& x = f.values;
            if ((f.has(Field::OptimizerState) && x.optimizerStateStreaming != os) ||
                (f.has(Field::ReplicatedTensorSharding) && (x.rtsOptimizerState != rtsO || x.rtsWeights != rtsW)) ||
                (f.has(Field::Weights) && x.weightsStreaming != v.weightsStream) || (f.has(Field::Phases) && x.phases != v.phases))
              continue;
            out.push_back(v);
          }
        }
      }
    return out;
  }

  // The Pareto table's rows: pod sizes 1, 2, 4, ... below the limit, and the limit.
  int rowFor(int ipus) const {
    int row = 1;
    while (row < ipus) row *= 2;
    return std::min(row, maxIpus_);
  }

  // The fastest step among kept mappings within the Pareto row a count falls in.
  double bestStepAtOrBelow(const Standings& st, int ipus) const {
    auto it = st.bestWithin.find(rowFor(ipus));
    return it == st.bestWithin.end() ? std::numeric_limits<double>::infinity() : it->second.rankedStep;
  }

  // Nothing in the group can enter the top list or the Pareto table.
  bool hopeless(const Standings& st, double boundStep, double boundScore, int ipus) const {
    if (!o_.prune) return false;
    const bool topFull = static_cast<int>(st.top.size()) >= std::max(1, o_.top);
    if (!topFull || boundScore <= orderKeyScore(st.top.back())) return false;
    return boundStep >= bestStepAtOrBelow(st, ipus);
  }
  static double orderKeyScore(const Candidate& c) { return c.score; }

  // A lower bound on the fullest IPU's memory without planning: it holds at
  // least its share of the weights and gradient accumulators, and of the
  // optimizer state when that stays on chip, plus the chip's base code.
  double memoryFloor(const Group& g, const Variant& v) const {
    const Floors* fl = g.floors;
    if (v.phases > 1 || v.weightsStream) return fl != nullptr ? fl->phasedLayerBytes : 0;
    // The average IPU: its share of the weights, accumulators and on-chip
    // state, and of the stash (every micro batch in flight keeps at least
    // one copy), beside the chip's base code.
    const double share = params_ / (static_cast<double>(g.p) * g.t);
    const double state = v.osStream ? 0 : stateBytesPerParam_ / (v.rtsO ? g.r : 1);
    const double stash = fl != nullptr ? fl->streamedStash * computeBytes_ / g.p : 0;
    return std::max(share * (weightBytes_ + accumulatorBytes_ + state) + stash + codeBase_, fl != nullptr ? fl->layerBytes : 0);
  }

  // A lower bound on the fullest IPU's Streaming Memory under phased
  // execution: a p-th of every weight, its accumulator and its optimizer
  // state (their shares with replicated tensor sharding) and of the stash.
  double streamingFloor(const Group& g, const Variant& v) const {
    const Floors* fl = g.floors;
    if (fl == nullptr) return 0;
    const double rtsO = v.rtsO ? g.r : 1, rtsW = v.rtsW ? g.r : 1;
    return (fl->parameters * (weightBytes_ / rtsW + (accumulatorBytes_ + stateBytesPerParam_) / rtsO) +
            fl->streamedStash * computeBytes_) / g.p;
  }

  Candidate candidateOf(const Group& g, const Variant& v, Split split, const std::vector<int>& cuts) const {
    Candidate c;
    c.shard = g.t;
    c.pipeline = g.p;
    c.replicas = g.r;
    c.microBatch = g.b;
    c.gradientAccumulation = g.ga;
    c.recompute = g.recompute;
    c.optimizerStateStreaming = v.osStream;
    c.rtsOptimizerState = v.rtsO;
    c.rtsWeights = v.rtsW;
    c.weightsStreaming = v.weightsStream;
    c.phases = v.phases;
    c.split = split;
    if (split == Split::Optimal) {
      for (int k = 0; k + 1 < static_cast<int>(cuts.size()); ++k) {
        std::vector<int> layers;
        for (int i = cuts[static_cast<std::size_t>(k)]; i < cuts[static_cast<std::size_t>(k) + 1]; ++i) layers.push_back(i);
        c.stages.emplace_back(k, std::move(layers));
      }
      if (chain_ < n_) {
        std::vector<int> tail;
        for (int i = chain_; i < n_; ++i) tail.push_back(i);
        c.stages.emplace_back(0, std::move(tail));
      }
    }
    return c;
  }

  // Evaluate and keep; false when the candidate is not one of the group's
  // (the planner's `balanced` used fewer IPUs: that mapping is in a smaller group).
  bool tryCandidate(const Group& g, Candidate& c, GroupSearch& gs) const {
    if (!evaluate(c, nullptr, gs.scratch, gs.out) || c.pipeline != g.p) return false;
    gs.keep(c);
    return true;
  }

  // Search one group against the standings as they were before its wave
  // (and what the group itself keeps): what a worker runs.
  void searchGroup(const Group& g, const Standings& shared, Scratch& scratch, GroupOutcome& out) const {
    GroupSearch gs{*this, shared, scratch, out, std::nullopt};
    Counts& counts = out.counts;
    const std::vector<Variant> vs = variants(g);
    const int nSplits = splits(g);
    const long long size = static_cast<long long>(vs.size()) * nSplits;
    if (hopeless(shared, g.boundStep, g.boundScore, g.ipus)) {
      counts.pruned += size;
      return;
    }
    std::vector<Split> splitKinds;
    if (g.p == 1) splitKinds = {Split::Single};
    else if (o_.fixed.split) splitKinds = {*o_.fixed.split};
    else splitKinds = {Split::Optimal, Split::Balanced};
    static const std::vector<int> kNoCuts;
    const std::vector<int>& cuts = g.cuts != nullptr ? *g.cuts : kNoCuts;
    for (Split split : splitKinds) {
      // Resident variants one by one; each phased ladder (sub-graph counts in
      // increasing order, memory non-increasing along it) by binary search
      // for its first rung that fits, which is the ladder's best: the cost
      // model's time does not depend on the count.
      std::size_t i = 0;
      while (i < vs.size()) {
        const Variant& v = vs[i];
        const bool phased = v.phases > 1 || v.weightsStream;
        std::size_t j = i + 1;
        if (phased)
          while (j < vs.size() && (vs[j].phases > 1 || vs[j].weightsStream) && vs[j].osStream == v.osStream &&
                 vs[j].rtsO == v.rtsO && vs[j].rtsW == v.rtsW)
            ++j;
        const long long rungs = static_cast<long long>(j - i);
        // A phased ladder is outside the calibration rows when none ran
        // phased: its bound widens with it.
        const double ladderBound = phased ? std::max(g.boundStep, phasedFloor(g, v) * g.phasedWidening) : g.boundStep;
        if (hopeless(gs.standings(), ladderBound, scoreOf(ladderBound, g.ipus), g.ipus)) {
          counts.pruned += rungs;
          i = j;
          continue;
        }
        if (split == Split::Optimal && cuts.empty()) {  // fewer chain layers than IPUs: no such split
          counts.pruned += rungs;
          i = j;
          continue;
        }
        if (!phased) {
          if (o_.prune && memoryFloor(g, v) > (1 - o_.headroom) * capacity_) {
            ++counts.prunedMemory;
            gs.prunedForMemory(std::max(memoryFloor(g, v) / capacity_, 0.0), i, split);
          } else {
            Candidate c = candidateOf(g, v, split, cuts);
            tryCandidate(g, c, gs);
          }
          i = j;
          continue;
        }
        // Every rung holds at least the ladder's floors: none fits when they do not.
        if (o_.prune && (memoryFloor(g, v) > (1 - o_.headroom) * capacity_ || streamingFloor(g, v) > streamingCapacity_)) {
          counts.prunedMemory += rungs;
          gs.prunedForMemory(std::max(memoryFloor(g, v) / capacity_, streamingCapacity_ > 0 ? streamingFloor(g, v) / streamingCapacity_ : 0.0),
                             j - 1, split);
          i = j;
          continue;
        }
        if (!o_.prune) {
          for (std::size_t k = i; k < j; ++k) {
            Candidate c = candidateOf(g, vs[k], split, cuts);
            tryCandidate(g, c, gs);
          }
          i = j;
          continue;
        }
        // Binary search over rungs [i, j): the first that fits.
        std::size_t lo = i, hi = j;  // answer in [lo, hi]; hi == j: none fits
        std::optional<Candidate> found;
        std::vector<std::size_t> tried;
        bool foreign = false;
        while (lo < hi) {
          std::size_t mid = lo + (hi - lo) / 2;
          Candidate c = candidateOf(g, vs[mid], split, cuts);
          tried.push_back(mid);
          if (!evaluate(c, nullptr, scratch, out) || c.pipeline != g.p) {
            foreign = true;
            break;
          }
          if (c.fits) {
            found = c;
            hi = mid;
          } else {
            lo = mid + 1;
          }
        }
        if (found) gs.keep(*found);
        if (!foreign) {
          // Rungs not evaluated: below the first fit they do not fit (memory
          // only falls along the ladder); above it, they are no faster.
          for (std::size_t k = i; k < j; ++k) {
            if (std::find(tried.begin(), tried.end(), k) != tried.end()) continue;
            if (!found || k < hi) ++counts.prunedMemory;
            else ++counts.pruned;
          }
        }
        i = j;
      }
    }
  }

  // Plan and estimate one candidate; fills its results.
  // Reads only what run() prepared before the workers start: the layers
  // costed for every micro batch of the space (costs_) and the family.
  bool evaluate(Candidate& c, std::string* problem, Scratch& scratch, GroupOutcome& out) const {
    auto costed = costed_.find(c.microBatch);
    if (costed == costed_.end() || costed->second == nullptr) {
      if (problem != nullptr) *problem = "the model's layers cannot be costed for micro batch " + std::to_string(c.microBatch);
      return false;
    }
    auto mine = scratch.phases.find(c.microBatch);
    if (mine == scratch.phases.end()) mine = scratch.phases.emplace(c.microBatch, *costed->second).first;
    check::PhaseSpec* ph = &mine->second;
    Counts& counts = out.counts;
    ++counts.evaluated;
    // The candidate as the one mapping value: validated and its batch derived
    // as the same mapping written in the script would be.
    plan::PreparedMapping prepared = plan::prepareMapping(phase_, mappingValue(phase_, c));
    if (!prepared.ok && c.split == Split::Declared) {
      // Settings fixed with --fix apply to yours too; they may not fit it.
      if (problem != nullptr)
        *problem = "the fixed settings do not apply to the script's mapping `" + declared_.name + "`: " +
                   (prepared.diagnostics.all().empty() ? std::string("it is refused")
                                                       : prepared.diagnostics.all().front().message) +
                   "; fix a value it accepts, or drop that --fix";
      return false;
    }
    // The space holds only mappings the checker accepts; one it refuses is a
    // bug here (it would otherwise vanish from the counts unseen).
    IPU_INVARIANT(prepared.ok, "every candidate the search generates is a mapping the checker accepts");
    ph->batch = prepared.batch;
    ir::PhasePlan plan = plan::planPhase(*ph, *prepared.spec, prepared.spec->mapping, sources_, nullptr, nullptr, &scratch.expansions);
    cost::PhaseEstimate e = cost::estimatePhase(plan);
    if (!e.ok) {
      if (problem != nullptr)
        *problem = "the cost model cannot time phase `" + phase_.name + "` on `" + declared_.pod.name +
                   "` (its chip has no calibration, or misses a figure): `ipu estimate` says why";
      return false;
    }
    if (problem != nullptr && family_.empty()) family_ = cost::familyOf(plan);   // the declared mapping, before any worker
    c.pipeline = plan.mapping.pipelineIpus;
    c.stages.clear();
    for (const auto& s : plan.stages) c.stages.emplace_back(s.ipu, s.layers);
    c.layersPerIpu.assign(static_cast<std::size_t>(std::max(1, c.pipeline)), 0);
    for (const auto& l : plan.layers)
      if (l.ipu >= 0 && l.ipu < c.pipeline) ++c.layersPerIpu[static_cast<std::size_t>(l.ipu)];
    c.ipusUsed = plan.ipusUsed;
    c.stepTime = e.stepTime;
    c.breakdown = e.breakdown;
    c.throughputLow = e.throughputLow;
    c.throughputHigh = e.throughputHigh;
    c.regimes = e.regimes;
    c.errorHigh = e.errorHigh;
    c.sensitivities = e.sensitivities;
    // The conservative step: the one the likely range's lower end gives
    // (samples per step are the same at any throughput).
    c.rankedStep = o_.rank == Rank::Conservative && e.throughputLow > 0 && e.samplesPerSecond > 0
                       ? e.stepTime * e.samplesPerSecond / e.throughputLow
                       : e.stepTime;
    c.samplesPerSecond = e.samplesPerSecond;
    c.tokensPerSecond = e.tokensPerSecond;
    c.timeToTrain = e.timeToTrain;
    c.peakMemoryBytes = 0;
    for (const auto& ipu : plan.ipus)
      if (ipu.memory.total() > c.peakMemoryBytes) {
        c.peakMemoryBytes = ipu.memory.total();
        c.capacityBytes = ipu.capacityBytes;
        c.peakIpu = ipu.index;
        c.peakComponent = largestComponent(ipu.memory, &c.peakComponentBytes);
      }
    c.streamingBytes = c.streamingCapacityBytes = 0;
    for (const auto& ipu : plan.ipus)
      if (c.streamingCapacityBytes == 0 || ipu.streamingBytes - ipu.streamingCapacityBytes > c.streamingBytes - c.streamingCapacityBytes) {
        c.streamingBytes = ipu.streamingBytes;
        c.streamingCapacityBytes = ipu.streamingCapacityBytes;
        c.streamingIpu = ipu.index;
      }
    c.inProcessorOver = c.peakMemoryBytes > (1 - o_.headroom) * c.capacityBytes;
    c.fits = plan.fits && !c.inProcessorOver;
    c.score = scoreOf(c.rankedStep, c.ipusUsed);
    if (!c.fits) {
      if (c.split != Split::Declared) ++counts.rejectedMemory;
      if (c.split != Split::Declared && (!out.leastMemory || overrun(c) < overrun(*out.leastMemory))) out.leastMemory = c;
    }
    return true;
  }

  void keep(Standings& st, const Candidate& c) const {
    if (!c.fits) return;
    keepAtEnds(st, c);
    for (int row = rowFor(c.ipusUsed);; row = rowFor(row + 1)) {
      auto it = st.bestWithin.find(row);
      if (it == st.bestWithin.end() || std::make_tuple(c.rankedStep, c.ipusUsed) < std::make_tuple(it->second.rankedStep, it->second.ipusUsed) ||
          (c.rankedStep == it->second.rankedStep && c.ipusUsed == it->second.ipusUsed && orderKey(c) < orderKey(it->second)))
        st.bestWithin[row] = c;
      if (row >= maxIpus_) break;
    }
    std::vector<Candidate>& top_ = st.top;
    // More sub-graphs than needed, for no gain, is not another answer.
    for (auto it = top_.begin(); it != top_.end(); ++it) {
      if (sameMapping(*it, c)) return;
      if (!sameButRung(*it, c)) continue;
      if (it->rankedStep <= c.rankedStep && rung(*it) < rung(c)) return;
      if (c.rankedStep <= it->rankedStep && rung(c) < rung(*it)) {
        top_.erase(it);
        break;
      }
    }
    auto pos = std::upper_bound(top_.begin(), top_.end(), c, [](const Candidate& a, const Candidate& b) { return orderKey(a) < orderKey(b); });
    top_.insert(pos, c);
    if (static_cast<int>(top_.size()) > std::max(1, o_.top)) top_.pop_back();
  }

  // The fastest fitting mapping with each assumption at each end of its
  // range, by the objective at that end (ties by the fixed order).
  void keepAtEnds(Standings& st, const Candidate& c) const {
    for (auto& [assumption, ends] : st.atEnds)
      for (int high = 0; high < 2; ++high) {
        auto& best = ends.best[high];
        const double score = scoreOf(c.rankedStepAt(assumption, high == 1, o_.rank), c.ipusUsed);
        if (!best || score < ends.score[high] || (score == ends.score[high] && orderKey(c) < orderKey(*best))) {
          best = c;
          ends.score[high] = score;
        }
      }
  }


  static constexpr int kLadder[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 0};  // 0: weights streaming
  static constexpr std::size_t kWaveGroups = 16;   // the most groups a wave searches

  const check::PhaseSpec& phase_;
  LayerCosts costs_;
  const base::SourceMap& sources_;
  const Options& o_;
  const check::MappingSpec& declared_;
  long long gb_ = 0;
  int podIpus_ = 0, maxIpus_ = 0, n_ = 0, chain_ = 0;
  double overhead_ = 0;
  long long space_ = 0;
  Counts counts_;
  Progress progress_;
  Clock::time_point start_;
  Standings standings_;
  Scratch mainScratch_;                  // the declared mapping's, and the bounds' plans
  std::optional<Candidate> leastMemory_;
  std::vector<std::pair<std::size_t, GroupOutcome::Closest>> closest_;   // group index, its least-floor variant pruned for memory
  std::map<long long, const check::PhaseSpec*> costed_;   // the layers costed per micro batch (costs_), for the workers
  mutable std::string family_;                     // the model's kinds of layers (cost::familyOf), from the declared mapping
  std::map<std::tuple<int, long long, long long, bool, bool>, double> widening_;  // leastWidening's answers
  std::map<std::tuple<int, long long, int, int>, std::vector<int>> cuts_;  // optimal splits per (t, b, recompute, p)
  std::map<std::tuple<int, long long, int>, std::vector<double>> layerTimes_;
  std::map<std::tuple<int, long long, int>, std::optional<Floors>> floors_;
  double fastestStreaming_ = 0;   // the top of the Streaming Memory bandwidth's plausible range
  double computeBytes_ = 2, partialBytes_ = 4, streamingCapacity_ = 0, leastTemporaries_ = 0;
  double params_ = 0, weightBytes_ = 0, accumulatorBytes_ = 0, stateBytesPerParam_ = 0, codeBase_ = 0, capacity_ = 0;
};

}  // namespace

plan::MappingValue mappingValue(const check::PhaseSpec& phase, const Candidate& c) {
  plan::MappingValue v = plan::valueOf(phase);  // the declared mapping and batch
  ir::Mapping& m = v.settings;
  if (c.split == Split::Declared) {
    // A fixed available_memory_proportion (--fix) may list another pipeline's IPUs: its first value then.
    if (m.availableMemoryProportion.size() > 1 &&
        static_cast<int>(m.availableMemoryProportion.size()) != std::max(1, phase.mapping->pipelineIpus))
      m.availableMemoryProportion.resize(1);
    return v;
  }
  m.shard = c.shard;
  m.replicas = c.replicas;
  m.phases = c.phases;
  m.recompute = c.recompute;
  m.optimizerStateStreaming = c.optimizerStateStreaming;
  m.weightsStreaming = c.weightsStreaming;
  m.rtsOptimizerState = c.rtsOptimizerState;
  m.rtsWeights = c.rtsWeights;
  // available_memory_proportion is kept as declared (one value for every
  // IPU, or one per IPU when the pipeline has as many); otherwise its first value.
  if (m.availableMemoryProportion.size() > 1 && static_cast<int>(m.availableMemoryProportion.size()) != c.pipeline)
    m.availableMemoryProportion.resize(1);
  if (c.pipeline <= 1) {
    v.placement = plan::MappingValue::Placement::Single;
  } else if (c.split == Split::Balanced && c.stages.empty()) {
    v.placement = plan::MappingValue::Placement::Balanced;
    v.pipelineIpus = c.pipeline;
  } else {
    v.placement = plan::MappingValue::Placement::Explicit;
    v.stages = c.stages;
  }
  // The global batch is the phase's; the candidate chooses the micro batch.
  v.batch = {};
  v.batch.microBatch = c.microBatch;
  v.batch.globalBatch = phase.batch.globalBatch;
  return v;
}

check::MappingSpec mappingOf(const check::PhaseSpec& phase, const Candidate& c) {
  return *plan::specOf(*phase.mapping, mappingValue(phase, c));
}

bool applyCandidate(check::PhaseSpec& phase, check::Evaluator& evaluator, const Candidate& c) {
  plan::PreparedMapping prepared = plan::prepareMapping(phase, mappingValue(phase, c));
  if (!prepared.ok) return false;
  LayerCosts costs(evaluator, phase);
  check::PhaseSpec* costed = costs.phaseFor(c.microBatch);
  if (costed == nullptr) return false;
  auto layers = costed->layers;
  phase.layers = std::move(layers);
  phase.lr = costed->lr;
  phase.steps = costed->steps;
  phase.mapping = prepared.spec;
  phase.batch = prepared.batch;
  return true;
}

PhaseResult searchPhase(const check::PhaseSpec& phase, check::Evaluator& evaluator, const base::SourceMap& sources,
                        const Options& options) {
  if (phase.mapping == nullptr || phase.model == nullptr) {
    PhaseResult r;
    r.phase = phase.name;
    r.error = "phase `" + phase.name + "` has no mapping to start from";
    return r;
  }
  // Settings the search does not vary are the declared ones, unless fixed:
  // then every candidate (the declared mapping too) has the fixed value.
  bool override = false;
  for (ir::MappingField f : options.fixed.fields)
    override = override || f == ir::MappingField::AvailableMemoryProportion || f == ir::MappingField::BatchNormReplicas;
  if (!override) return Searcher(phase, evaluator, sources, options).run();
  check::PhaseSpec fixedPhase = phase;
  auto mapping = std::make_shared<check::MappingSpec>(*phase.mapping);
  for (ir::MappingField f : {ir::MappingField::AvailableMemoryProportion, ir::MappingField::BatchNormReplicas})
    if (options.fixed.has(f)) ir::mappingField(f).set(mapping->mapping, ir::mappingField(f).get(options.fixed.values));
  fixedPhase.mapping = mapping;
  return Searcher(fixedPhase, evaluator, sources, options).run();
}

}  // namespace ipu::search
