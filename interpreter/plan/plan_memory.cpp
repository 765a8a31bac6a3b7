#include "interpreter/plan/plan_memory.h"

#include "runtime/ir/phased.h"

#include <algorithm>
#include <cmath>

namespace ipu::plan {

namespace {

// The largest sub-graph's parameters when `weights` (per layer, in order) are
// split into `k` phases. Up to one phase per layer, phases are contiguous runs
// of layers; beyond that, layers are serialised into slices (matmuls split
// along their output), in proportion to their size.
double maxPhaseWeights(const std::vector<double>& weights, int k) {
  double total = 0;
  for (double w : weights) total += w;
  if (weights.empty() || k <= 1) return total;
  const int n = static_cast<int>(weights.size());
  if (k >= n) {
    double worst = 0;
    for (double w : weights) {
      double slices = std::max(1.0, std::ceil(k * w / std::max(total, 1.0)));
      worst = std::max(worst, w / slices);
    }
    return worst;
  }
  // Smallest capacity that splits the run into at most k contiguous parts.
  double lo = *std::max_element(weights.begin(), weights.end()), hi = total;
  for (int iter = 0; iter < 60 && hi - lo > 1e-6 * hi; ++iter) {
    double mid = (lo + hi) / 2, run = 0;
    int parts = 1;
    for (double w : weights) {
      if (run + w > mid) {
        ++parts;
        run = 0;
      }
      run += w;
    }
    if (parts <= k) hi = mid;
    else lo = mid;
  }
  return hi;
}

// The phase of each layer when `weights` (per layer, in order) are split into
// `k` phases: the contiguous split whose largest phase is smallest (the
// capacity maxPhaseWeights bisects for, filled greedily); one layer per phase
// when k reaches the number of layers.
std::vector<int> balancedPhases(const std::vector<double>& weights, int k) {
  const int n = static_cast<int>(weights.size());
  std::vector<int> phase(weights.size(), 0);
  if (k >= n) {
    for (int i = 0; i < n; ++i) phase[static_cast<std::size_t>(i)] = i;
    return phase;
  }
  const double capacity = maxPhaseWeights(weights, k);
  int part = 0;
  double run = 0;
  for (int i = 0; i < n; ++i) {
    const double w = weights[static_cast<std::size_t>(i)];
    // The remaining layers must leave one phase each for those after them.
    if (i > 0 && (run + w > capacity || n - i <= k - 1 - part) && part < k - 1) {
      ++part;
      run = 0;
    }
    run += w;
    phase[static_cast<std::size_t>(i)] = part;
  }
  return phase;
}

}  // namespace

IpuMemory::IpuMemory(const PhaseContext& ctx, int ipu, int stageCount)
    : ctx_(&ctx), ipu_(ipu), stageCount_(stageCount), t_(std::max(1, ctx.settings.shard)),
      r_(std::max(1, ctx.settings.replicas)), phased_(ctx.settings.phases > 1 || ctx.settings.weightsStreaming),
      member_(ctx.plan.layers.size(), 0) {}

void IpuMemory::add(int li, int stage) {
  const ir::Layer& l = ctx_->plan.layers[static_cast<std::size_t>(li)];
  layers_.push_back(li);
  member_[static_cast<std::size_t>(li)] = 1;
  double w = l.shardable ? l.params / t_ : l.params;
  weights_.push_back(w);
  W_ += w;
  largestW_ = std::max(largestW_, w + (l.tiedTo.empty() ? 0 : (l.shardable ? l.tiedParams / t_ : l.tiedParams)));
  if (!l.tiedTo.empty()) tied_.push_back(li);

  // Activations: micro batches in flight between a stage's forward and
  // backward keep their stash; recomputation keeps only checkpoints.
  const double depth = ir::PipelineSchedule{stageCount_, 1, ctx_->settings.recompute}.stashDepth(stage);
  const double act = l.shardable ? l.activationElements / t_ : l.activationElements;
  maxAct_ = std::max(maxAct_, act);
  auto it = std::find_if(stages_.begin(), stages_.end(), [&](const StageSpan& s) { return s.stage == stage; });
  bool firstOfStage = it == stages_.end();
  if (firstOfStage) stages_.push_back(StageSpan{stage, li, li});
  else {
    it->first = std::min(it->first, li);
    it->last = std::max(it->last, li);
  }
  switch (ctx_->settings.recompute) {
    case ir::Recompute::None: stash_ += depth * act; break;
    case ir::Recompute::EveryLayer:
      stash_ += depth * l.inputElements;
      working_ = std::max(working_, act);
      break;
    case ir::Recompute::Stage: {
      if (firstOfStage) stash_ += depth * l.inputElements;  // layers arrive in order within a stage
      auto sw = std::find_if(stageWork_.begin(), stageWork_.end(), [&](const auto& p) { return p.first == stage; });
      if (sw == stageWork_.end()) stageWork_.emplace_back(stage, act);
      else sw->second += act;
      break;
    }
  }
  largestIn_ = std::max(largestIn_, l.inputElements);
  largestOut_ = std::max(largestOut_, l.outputElements);
  workspace_ = std::max(workspace_, l.shardable ? l.workspaceElements / t_ : l.workspaceElements);

  // Code: per layer instance (vertex state and exchange programs differ per
  // instance); in phased execution one sub-graph's code serves every phase,
  // so each distinct layer definition is counted once.
  if (phased_) {
    int cls = ctx_->codeClass[static_cast<std::size_t>(li)];
    if (std::find(distinct_.begin(), distinct_.end(), cls) != distinct_.end()) return;
    distinct_.push_back(cls);
  }
  code_ += l.codeBytes;
}

ir::MemoryBreakdown IpuMemory::breakdown(double* streamingOut, double* parametersOut) const {
  const ir::PhasePlan& p = ctx_->plan;
  const ir::Mapping& m = ctx_->settings;
  const ir::Precision& prec = p.precision;
  const double bw = ir::bytesOf(prec.weights), bc = ir::bytesOf(prec.compute);
  const double ba = ir::bytesOf(prec.accumulators), bo = ir::bytesOf(prec.optimizerState);
  const double bp = ir::bytesOf(prec.partials);
  const double stateBytesPerParam = p.optimizer.moments * bo + (prec.masterWeights ? 4.0 : 0.0);
  const double rtsO = m.rtsOptimizerState ? r_ : 1, rtsW = m.rtsWeights ? r_ : 1;

  // A layer tied to one on another IPU keeps its own copy of the shared weights.
  double W = W_;
  std::vector<std::pair<int, double>> copies;
  for (int li : tied_) {
    const ir::Layer& l = p.layers[static_cast<std::size_t>(li)];
    bool partnerHere = false;
    for (int other : ctx_->tiedPartners[static_cast<std::size_t>(li)]) partnerHere |= member_[static_cast<std::size_t>(other)] != 0;
    if (partnerHere) continue;
    double copy = l.shardable ? l.tiedParams / t_ : l.tiedParams;
    W += copy;
    copies.emplace_back(li, copy);
  }

  ir::MemoryBreakdown mem;
  double streaming = 0;
  double resident = W;  // parameters whose weights and gradients are on chip
  if (phased_) {
    std::vector<double> weights = weights_;
    for (const auto& [li, copy] : copies)
      for (std::size_t k = 0; k < layers_.size(); ++k)
        if (layers_[k] == li) weights[k] += copy;
    int k = m.phases > 1 ? m.phases : static_cast<int>(weights.size());
    if (residency_ && k <= static_cast<int>(weights.size())) {
      resident = residency_->largestSegment;
      mem.weights = residency_->weights * bw;
      mem.gradientAccumulators = residency_->accumulators * ba;
    } else {
      // More phases than layers: layers are sliced, and the running sub-graph
      // and the prefetched one are at most the largest slice each.
      resident = maxPhaseWeights(weights, k);
      mem.weights = 2 * resident * bw;
      mem.gradientAccumulators = resident * ba;
    }
    streaming += W * bw / rtsW + W * ba / rtsO;
  } else {
    mem.weights = W * bw;
    mem.gradientAccumulators = W * ba;
  }

  const double state = W * stateBytesPerParam / rtsO;
  double staging = 0;
  if (m.optimizerStateStreaming || phased_) {
    // State streams through a staging buffer one layer (or slice) at a time,
    // during the optimizer update, when no activation is live.
    staging = (phased_ ? resident : largestW_) * stateBytesPerParam / rtsO;
    streaming += state;
  } else {
    mem.optimizerState = state;
  }

  double working = working_;
  for (const auto& [stage, w] : stageWork_) working = std::max(working, w);
  if (phased_) {
    // Phased execution keeps the stash in Streaming Memory; on chip are the
    // running sub-graph's working set and its boundary buffers.
    mem.activations = (maxAct_ + 2 * largestIn_) * bc;
    streaming += stash_ * bc;
  } else {
    mem.activations = (stash_ + working) * bc;
  }

  mem.code = p.pod.machine.chip.codeBaseBytes + code_;

  // Exchange: activations and their gradients cross a stage boundary at
  // different times of a pipeline cycle and share its buffer; tensor sharding
  // adds a buffer for its collectives.
  double boundary = 0;
  for (const auto& s : stages_) {
    if (s.stage > 0) boundary += p.layers[static_cast<std::size_t>(s.first)].inputElements;
    if (s.stage < stageCount_ - 1) boundary += p.layers[static_cast<std::size_t>(s.last)].outputElements;
  }
  mem.exchange = boundary * bc + (t_ > 1 ? largestOut_ * bc : 0);

  // Temporaries: matmul/convolution partials, capped by availableMemoryProportion.
  const auto& amps = m.availableMemoryProportion;
  double amp = amps.empty() ? ir::Mapping::kDefaultAvailableMemoryProportion : amps[std::min<std::size_t>(static_cast<std::size_t>(std::max(0, ipu_)), amps.size() - 1)];
  mem.temporaries = std::min(workspace_ * bp, amp * p.pod.machine.chip.memoryBytes);

  // Liveness: the forward/backward passes' transients and the optimizer
  // update's staging buffer are never live together; only the staging
  // buffer's excess over them adds to the peak.
  double transient = mem.activations + mem.exchange + mem.temporaries;
  mem.optimizerState += std::max(0.0, staging - transient);
  if (streamingOut != nullptr) *streamingOut = streaming;
  if (parametersOut != nullptr) *parametersOut = W;
  return mem;
}

void planMemory(PhaseContext& ctx) {
  ir::PhasePlan& p = ctx.plan;
  const double capacity = p.pod.machine.chip.memoryBytes;
  const double streamingCapacity = p.pod.streamingBytesPerIpu();
  const int S = static_cast<int>(p.stages.size());
  const bool phased = ir::isPhased(ctx.settings);
  const double t = std::max(1, ctx.settings.shard);
  // Phased execution: the phase of each layer on its pipeline IPU, balanced by
  // the weights it puts there (its copy of tied weights included); with
  // `weights: streaming` alone, one layer per phase.
  if (phased)
    for (auto& ipu : p.ipus) {
      if (ipu.shard != 0) continue;
      std::vector<double> w;
      for (int li : ipu.layers) {
        const ir::Layer& l = p.layers[static_cast<std::size_t>(li)];
        double own = l.shardable ? l.params / t : l.params;
        bool partnerHere = false;
        for (int o : ctx.tiedPartners[static_cast<std::size_t>(li)])
          partnerHere |= std::find(ipu.layers.begin(), ipu.layers.end(), o) != ipu.layers.end();
        if (!l.tiedTo.empty() && !partnerHere) own += l.shardable ? l.tiedParams / t : l.tiedParams;
        w.push_back(own);
      }
      const int k = ctx.settings.phases > 1 ? ctx.settings.phases : static_cast<int>(w.size());
      const std::vector<int> phase = balancedPhases(w, k);
      for (std::size_t i = 0; i < ipu.layers.size(); ++i) p.layers[static_cast<std::size_t>(ipu.layers[i])].phase = phase[i];
    }
  ctx.segments = phased ? ir::phaseSegments(p) : std::vector<ir::PhaseSegment>{};
  const std::vector<ir::PhaseSegment>& segments = ctx.segments;
  const std::vector<double> segmentParameters = ir::segmentsParameters(p, segments, ctx.settings.shard);
  const double bw = ir::bytesOf(p.precision.weights), ba = ir::bytesOf(p.precision.accumulators);
  int k = ctx.settings.phases > 1 ? ctx.settings.phases : 1;
  p.fits = true;
  // The IPUs of a shard group hold the same layers, each its share of them,
  // and so the same memory: computed for the group's first IPU and copied
  // (a search plans thousands of candidates with 8 IPUs per group).
  std::vector<int> computedFor;   // per pipeline IPU: the index in p.ipus of the IPU computed, or -1
  for (std::size_t u = 0; u < p.ipus.size(); ++u) {
    ir::Ipu& ipu = p.ipus[u];
    if (ipu.ipu >= 0 && static_cast<std::size_t>(ipu.ipu) < computedFor.size() && computedFor[static_cast<std::size_t>(ipu.ipu)] >= 0) {
      const ir::Ipu& same = p.ipus[static_cast<std::size_t>(computedFor[static_cast<std::size_t>(ipu.ipu)])];
      if (same.layers == ipu.layers) {
        ipu.memory = same.memory;
        ipu.parameters = same.parameters;
        ipu.phaseBytes = same.phaseBytes;
        ipu.capacityBytes = same.capacityBytes;
        ipu.streamingBytes = same.streamingBytes;
        ipu.streamingCapacityBytes = same.streamingCapacityBytes;
        ipu.fits = same.fits;
        ipu.phases = same.phases;
        p.fits = p.fits && ipu.fits;
        continue;
      }
    }
    if (ipu.ipu >= 0) {
      if (computedFor.size() <= static_cast<std::size_t>(ipu.ipu)) computedFor.resize(static_cast<std::size_t>(ipu.ipu) + 1, -1);
      computedFor[static_cast<std::size_t>(ipu.ipu)] = static_cast<int>(u);
    }
    IpuMemory acc(ctx, ipu.ipu, S);
    for (int li : ipu.layers) acc.add(li, p.layers[static_cast<std::size_t>(li)].stage);
    ipu.phaseBytes.clear();
    if (phased) {
      // What each run of a segment holds (runtime/ir/phased.h): its weights,
      // the next run's prefetched, and in the backward run its accumulators.
      const std::vector<ir::SegmentRun> runs = ir::segmentRuns(segments, ipu.ipu);
      IpuMemory::PhasedResidency res;
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const ir::PhaseSegment& seg = segments[static_cast<std::size_t>(runs[i].segment)];
        const double here = segmentParameters[static_cast<std::size_t>(runs[i].segment)];
        const double next = i + 1 < runs.size() ? segmentParameters[static_cast<std::size_t>(runs[i + 1].segment)] : 0;
        const double accumulators = runs[i].backward ? here : 0;
        res.weights = std::max(res.weights, here + next);
        res.accumulators = std::max(res.accumulators, accumulators);
        res.largestSegment = std::max(res.largestSegment, here);
        if (ipu.phaseBytes.size() <= static_cast<std::size_t>(seg.phase)) ipu.phaseBytes.resize(static_cast<std::size_t>(seg.phase) + 1, 0.0);
        double& b = ipu.phaseBytes[static_cast<std::size_t>(seg.phase)];
        b = std::max(b, (here + next) * bw + accumulators * ba);
      }
      acc.setPhasedResidency(res);
    }
    double streaming = 0;
    ipu.memory = acc.breakdown(&streaming, &ipu.parameters);
    ipu.capacityBytes = capacity;
    ipu.streamingBytes = streaming;
    ipu.streamingCapacityBytes = streamingCapacity;
    ipu.fits = ipu.memory.total() <= capacity && streaming <= streamingCapacity;
    ipu.phases = phased ? std::max(k, static_cast<int>(ipu.phaseBytes.size())) : k;
    p.fits = p.fits && ipu.fits;
  }
}

}  // namespace ipu::plan
