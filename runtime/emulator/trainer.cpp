#include "runtime/emulator/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <sstream>
#include <thread>
#include <tuple>

#include "runtime/base/invariant.h"
#include "runtime/emulator/collectives.h"
#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"
#include "runtime/emulator/optimizer.h"
#include "runtime/emulator/thread_pool.h"
#include "runtime/ir/phased.h"
#include "runtime/train/lr_schedule.h"

namespace ipu::emu {

namespace {

// One layer's use of a parameter: its own gradient accumulator, so that the
// gradient of a tied tensor is the sum of its uses in layer order on every
// mapping (a shared accumulator would add them in schedule order).
struct Use {
  int layer = 0;
  Mat acc;
  bool written = false;
};

// A parameter (or one shard of it) as one shard group of one replica holds it.
struct Slot {
  int param = 0;
  int shard = -1;               // -1: the whole tensor (unsharded, or replicated on the group)
  Eigen::Index row0 = 0, col0 = 0, rows = 0, cols = 0;   // its block of the canonical tensor
  Mat value;                    // the weights on chip (phased: only while a segment using them runs)
  Mat home;                     // phased: the weights in Streaming Memory (with RTS of the weights, only
                                // this replica's share, `owned`, is kept current)
  Mat grad;                     // the step's summed gradient: the all-reduce buffer
  std::vector<Use> uses;
  Chunk owned;                  // the elements this replica updates (all, or its RTS chunk)
  OptimizerState state;         // on chip; empty when it lives in Streaming Memory
  int streamed = -1;            // index into the group's Streaming Memory
  bool primary = false;         // the copy in the owner layer's group (tied copies are not)
  std::vector<float> scratch;   // LAMB's update direction between the two passes
  NormSums sums;
};

// Saved between a stage's forward and backward pass for one micro batch.
struct StashEntry {
  std::vector<Mat> trunk;       // trunk values entering the stage's layers
  std::vector<int> trunkOf;     // per layer of the stage: index into trunk
  std::vector<Saved> saved;     // per layer (without recomputation, or once the stage is recomputed)
  double elements() const {
    double n = 0;
    for (const auto& t : trunk) n += static_cast<double>(t.size());
    for (const auto& s : saved) n += s.elements();
    return n;
  }
};

struct Message {
  int replica = 0, stage = 0, micro = 0;
  bool gradient = false;
  Mat tensor;
};

using Key2 = std::pair<int, int>;

// One pipeline IPU of one replica: `t` physical IPUs that hold its layers.
struct Group {
  int replica = 0, ipu = 0;
  std::vector<Slot> slots;
  std::map<Key2, int> slotAt;              // (param, shard) -> slot
  std::vector<OptimizerState> streaming;   // Streaming Memory: offloaded optimizer state
  std::map<Key2, Mat> activationsIn, gradientsIn;   // exchange buffers, by (stage, micro batch)
  std::map<Key2, StashEntry> stash;
  std::vector<Message> outbox;
  double dynamicPeak = 0;                  // elements in stash and exchange buffers, this step
  // Phased execution: Streaming Memory's activations, the input of (layer,
  // micro batch), and the gradients between two segments, by (segment, micro batch).
  std::map<Key2, Mat> streamedInputs, streamedGradients;

  double dynamicElements() const {
    double n = 0;
    for (const auto& [k, e] : stash) n += e.elements();
    for (const auto& [k, m] : activationsIn) n += static_cast<double>(m.size());
    for (const auto& [k, m] : gradientsIn) n += static_cast<double>(m.size());
    for (const auto& m : outbox) n += static_cast<double>(m.tensor.size());
    return n;
  }
};

// Turns to compute: at most `n` holders at once. Distributed batch norm runs
// each virtual IPU group on a thread of its own (runGroups); the turns keep
// the host's compute at about `hostThreads` threads, and a thread waiting for
// the other replicas of its batch-norm group gives its turn up, so a wait
// never holds a turn another thread needs to get there.
class ComputeTurns {
 public:
  explicit ComputeTurns(int n) : free_(n) {}
  void acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

// Thrown into the threads waiting in a BatchNormExchange when another thread
// of the cycle failed (it will never arrive): the failure itself is rethrown.
struct ExchangeAborted {};

// The all-reduces of distributed batch norm: the replicas of a batch-norm
// group meet at the same point of the same layer (`Key`) with equally long
// vectors; the last to arrive adds them in replica order, so the result is
// the same whichever thread ran which replica, and in whatever order they came.
class BatchNormExchange {
 public:
  // (batch-norm group, micro batch, layer, backward pass, exchange within the layer call)
  using Key = std::tuple<int, int, int, int, int>;

  void allReduce(const Key& key, int member, int members, std::vector<double>& values, ComputeTurns& turns) {
    std::unique_lock<std::mutex> lock(mu_);
    Meeting& m = meetings_[key];
    if (m.parts.empty()) m.parts.resize(static_cast<std::size_t>(members));
    m.parts[static_cast<std::size_t>(member)] = values;
    if (++m.arrived == members) {
      m.sum = m.parts[0];
      for (std::size_t r = 1; r < m.parts.size(); ++r)
        for (std::size_t i = 0; i < m.sum.size(); ++i) m.sum[i] += m.parts[r][i];
      cv_.notify_all();
    } else {
      turns.release();
      cv_.wait(lock, [&] { return m.arrived == members || aborted_; });
      lock.unlock();
      turns.acquire();
      lock.lock();
      if (aborted_) throw ExchangeAborted{};
    }
    values = m.sum;
    if (++m.left == members) meetings_.erase(key);
  }
  // A thread of the cycle failed: wake everyone waiting.
  void abort() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      aborted_ = true;
    }
    cv_.notify_all();
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = false;
    meetings_.clear();
  }

 private:
  struct Meeting {
    std::vector<std::vector<double>> parts;   // per member of the group
    std::vector<double> sum;
    int arrived = 0, left = 0;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Meeting> meetings_;
  bool aborted_ = false;
};

// Per channel, the running statistics of one batch-norm unit that held-out
// evaluation normalises with (PyTorch's running_mean and running_var).
struct RunningStatistics {
  std::vector<float> mean, var;
};

// PyTorch's BatchNorm2d default: running = (1 - momentum) running + momentum batch.
constexpr double kRunningMomentum = 0.1;

std::string fmtBytes(double b) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << b / 1e6 << " MB";
  return s.str();
}

}  // namespace

struct PhaseTrainer::Impl {
  ir::PhasePlan plan;
  TrainerSettings settings;
  std::shared_ptr<const Model> model;
  std::unique_ptr<SampleSource> data;
  std::unique_ptr<ThreadPool> pool;

  int R = 1, P = 1, T = 1, S = 1, GA = 1, MB = 1;
  bool fp16Compute = false, fp16Partials = false, fp16Weights = false, fp16Acc = false, fp16State = false;
  bool stochastic = false, master = false, streamingState = false, rts = false;
  bool phased = false;         // runs phase by phase (runtime/ir/phased.h)
  bool rtsStreamed = false;    // phased, with the weights sharded over the replicas in Streaming Memory
  std::vector<ir::PhaseSegment> segments;
  std::vector<std::vector<double>> phaseParamPeak, phasePeak;   // [IPU][phase]
  ir::Recompute recompute = ir::Recompute::None;
  std::vector<int> stageIpu;
  std::vector<std::vector<int>> stageLayers;
  std::vector<Group> groups;   // replica-major: groups[r * P + g]
  std::vector<double> staticBytes;   // per IPU of a replica (ipu * T + shard)
  std::vector<double> peakBytes;
  std::uint64_t phaseKey = 0;
  StepTraffic traffic;         // what the last step moved

  // Training state.
  long long step = 0;
  long long updates = 0;       // applied optimizer updates (bias correction)
  double lossScale = 1;
  long long goodSteps = 0;
  double lastScale = 1;        // the scale of the last step run
  bool lastOverflow = false;   // whether it overflowed

  // Per step.
  std::vector<MicroBatch> batches;                     // [r * GA + m]
  std::vector<std::vector<HeadResult>> results;        // [r * GA + m][layer]
  std::vector<std::vector<char>> hasResult;       // char, not bool: written from several threads
  std::uint64_t stepKey = 0;

  // Batch norm (docs/emulator.md, "Batch norm across replicas", "Running
  // statistics"): replicas sharing statistics,
  // the exchange between them, the statistics each unit normalised with this
  // step, keyed (replica, micro batch, layer, unit), and the running statistics
  // [layer][unit].
  int bnSpan = 1;
  BatchNormExchange bnExchange;
  std::unique_ptr<ComputeTurns> bnTurns;
  std::mutex bnRecordedMutex;
  std::map<std::tuple<int, int, int, int>, BatchNormStatistics> bnRecorded;
  std::vector<std::vector<RunningStatistics>> running;

  Group& group(int r, int g) { return groups[static_cast<std::size_t>(r * P + g)]; }
  const Group& group(int r, int g) const { return groups[static_cast<std::size_t>(r * P + g)]; }

  Expected<bool> setup();
  void buildSlots(Group& g);
  void computeStaticBytes();
  Numerics numerics(int replica, int micro, int layer, int pass) const;
  // `weights`: per slot of the group, the weights to use instead of the slots' own.
  ShardParams paramsFor(const Group& g, int layer, const std::vector<Mat>* weights = nullptr) const;
  void accumulate(Group& g, int layer, ShardGrads& grads, int gmb);
  void forwardStage(Group& g, int stage, int micro);
  void recomputeStage(Group& g, int stage, int micro);
  void backwardStage(Group& g, int stage, int micro);
  // One layer's backward pass for one micro batch: `d` is the gradient of the
  // trunk after the layer on entry and before it on return. `saved`: what its
  // forward pass kept, or null to recompute it from `x`.
  void backwardLayer(Group& g, int layer, int micro, const Mat& x, Saved* saved, Mat& d);
  // One layer's forward pass for one micro batch in training: its output in
  // `y` (a head's loss and sums go to the micro batch's results instead),
  // what its backward pass needs in `saved`.
  void forwardLayer(Group& g, int layer, int micro, const Mat& x, Saved& saved, Mat& y);
  void runCycle(const std::vector<ir::Work>& work);
  void deliver();
  // Phased execution: one step's segment runs, and what they hold and move.
  void runPhased();
  void runSegment(Group& g, int segment, bool backward);
  std::vector<std::size_t> slotsOf(const Group& g, const ir::PhaseSegment& seg) const;
  void loadWeights(Group& g, const std::vector<std::size_t>& slots);
  Mat storedWeights(const Group& g, std::size_t slot) const;
  template <class F>
  void forIpusOf(const Group& g, const Slot& s, F f) const {
    for (int t = 0; t < T; ++t)
      if (s.shard < 0 || s.shard == t) f(static_cast<std::size_t>(g.ipu * T + t));
  }
  void reduceGradients();
  // Adds, for every replica and each of its IPUs, the bytes of the slots it
  // enters into a collective across replicas: a slot split over the shard
  // group belongs to its shard's IPU, a whole one to every IPU of the group.
  void countCollective(std::vector<std::vector<double>>& into, double bytesPerElement) const;
  std::vector<double> parameters() const;
  bool overflowed() const;
  double gradientNorm() const;
  void update(double lr, float gradScale);
  OptimizerState& stateOf(Group& g, Slot& s) { return s.streamed >= 0 ? g.streaming[static_cast<std::size_t>(s.streamed)] : s.state; }
  const OptimizerState& stateOf(const Group& g, const Slot& s) const {
    return s.streamed >= 0 ? g.streaming[static_cast<std::size_t>(s.streamed)] : s.state;
  }
  double learningRate(Error* error) const;
  Mat gather(int param, int what) const;   // 0 value, 1 grad, 2 m, 3 v, 4 master
  void scatterState(int param, int what, const Mat& canonical);
  Expected<StepResult> runStep();
  void abandonStep();
  std::vector<MicroBatch> batchesOf(long long n) const;
  // Batch norm.
  void runGroups(std::size_t count, const std::function<void(std::size_t)>& task);
  void recordBatchNorm(int replica, int micro, int layer, int unit, BatchNormStatistics stats);
  const BatchNormStatistics& recordedBatchNorm(int replica, int micro, int layer, int unit);
  void updateRunningStatistics();
  NamedTensors runningTensors() const;
  Expected<bool> setRunningTensors(const NamedTensors& tensors);
};

namespace {

// The batch-norm context of one layer call of the training step
// (BatchNormContext, kernel.h): its replica meets the other replicas of its
// batch-norm group in the exchange, and what it normalised with is kept.
class StepBatchNorm final : public BatchNormContext {
 public:
  StepBatchNorm(PhaseTrainer::Impl& im, int replica, int micro, int layer, Mode mode, bool backward)
      : im_(im), replica_(replica), micro_(micro), layer_(layer), mode_(mode), backward_(backward) {}
  Mode mode() const override { return mode_; }
  void allReduce(std::vector<double>& sums) override {
    const int call = calls_++;
    if (im_.bnSpan <= 1) return;
    // What the plan counts (fp32 values), on every IPU of the shard group:
    // the kernel is replicated there. Only this group's thread writes these.
    const int ipu = im_.model->layers()[static_cast<std::size_t>(layer_)].ipu;
    for (int t = 0; t < im_.T; ++t)
      im_.traffic.batchNorm[static_cast<std::size_t>(replica_)][static_cast<std::size_t>(ipu * im_.T + t)] += 4.0 * static_cast<double>(sums.size());
    im_.bnExchange.allReduce({replica_ / im_.bnSpan, micro_, layer_, backward_ ? 1 : 0, call}, replica_ % im_.bnSpan, im_.bnSpan,
                             sums, *im_.bnTurns);
  }
  void record(BatchNormStatistics stats) override {
    const int unit = units_++;
    // The running statistics read the first replica of each group (the
    // others hold the same statistics); recomputation reads every replica's
    // own. Keep no more than that: the host holds them for the whole step.
    const bool first = replica_ % im_.bnSpan == 0;
    if (!first && im_.recompute == ir::Recompute::None && !im_.phased) return;   // phased execution recomputes every layer
    if (!first) stats.squares.clear();
    im_.recordBatchNorm(replica_, micro_, layer_, unit, std::move(stats));
  }
  const BatchNormStatistics& next() override { return im_.recordedBatchNorm(replica_, micro_, layer_, units_++); }

 private:
  PhaseTrainer::Impl& im_;
  int replica_, micro_, layer_;
  Mode mode_;
  bool backward_;
  int calls_ = 0, units_ = 0;
};

// Held-out evaluation: every unit normalises with its running statistics.
class RunningBatchNorm final : public BatchNormContext {
 public:
  explicit RunningBatchNorm(const std::vector<RunningStatistics>& units) : units_(units) {}
  Mode mode() const override { return Mode::Evaluate; }
  void allReduce(std::vector<double>&) override {}
  void record(BatchNormStatistics) override {}
  const BatchNormStatistics& next() override {
    const RunningStatistics& r = units_.at(next_++);
    current_.mean = r.mean;
    current_.rstd.resize(r.var.size());
    for (std::size_t c = 0; c < r.var.size(); ++c)
      current_.rstd[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(r.var[c]) + kBatchNormEpsilon));
    return current_;
  }

 private:
  const std::vector<RunningStatistics>& units_;
  std::size_t next_ = 0;
  BatchNormStatistics current_;
};

}  // namespace

std::vector<MicroBatch> PhaseTrainer::Impl::batchesOf(long long n) const {
  const long long global = static_cast<long long>(R) * GA * MB;
  std::vector<MicroBatch> out;
  out.reserve(static_cast<std::size_t>(R * GA));
  for (int i = 0; i < R * GA; ++i) out.push_back(data->make(n * global + static_cast<long long>(i) * MB, MB));
  std::vector<MicroBatch*> all;
  for (auto& b : out) all.push_back(&b);
  SampleSource::normalise(all);
  return out;
}

// ------------------------------------------------------------------- set-up

Expected<bool> PhaseTrainer::Impl::setup() {
  const auto& m = plan.mapping;
  R = std::max(1, m.replicas);
  T = std::max(1, m.shard);
  P = std::max(1, m.pipelineIpus);
  GA = static_cast<int>(std::max(1LL, plan.batch.gradientAccumulation));
  MB = static_cast<int>(std::max(1LL, plan.batch.microBatch));
  S = static_cast<int>(plan.stages.size());
  if (S == 0) return Error{code::kUnsupportedModel, "the plan of phase `" + plan.name + "` has no stages", "", plan.source};
  stageIpu.resize(static_cast<std::size_t>(S));
  stageLayers.resize(static_cast<std::size_t>(S));
  for (const auto& st : plan.stages) {
    if (st.index < 0 || st.index >= S || st.ipu < 0 || st.ipu >= P)
      return Error{code::kInternal, "the plan's stage " + std::to_string(st.index) + " is inconsistent", "", plan.source};
    stageIpu[static_cast<std::size_t>(st.index)] = st.ipu;
    stageLayers[static_cast<std::size_t>(st.index)] = st.layers;
  }
  for (std::size_t s = 0; s < stageLayers.size(); ++s)
    for (int l : stageLayers[s])
      if (l < 0 || l >= static_cast<int>(model->layers().size()) || model->layers()[static_cast<std::size_t>(l)].ipu != stageIpu[s])
        return Error{code::kInternal, "the plan's stage " + std::to_string(s) + " names a layer of another IPU", "", plan.source};
  const auto& pr = plan.precision;
  fp16Compute = pr.compute == ir::DType::FP16;
  fp16Partials = pr.partials == ir::DType::FP16;
  fp16Weights = pr.weights == ir::DType::FP16;
  fp16Acc = pr.accumulators == ir::DType::FP16;
  fp16State = pr.optimizerState == ir::DType::FP16;
  stochastic = pr.stochasticRounding;
  master = fp16Weights && pr.masterWeights;
  streamingState = m.optimizerStateStreaming || ir::isPhased(m);
  rts = R > 1 && (m.rtsOptimizerState || m.rtsWeights);
  phased = ir::isPhased(m);
  rtsStreamed = phased && R > 1 && m.rtsWeights;
  if (phased) segments = ir::phaseSegments(plan);
  recompute = m.recompute;
  // A Lua policy sets the scale before the first step.
  lossScale = pr.lossScale.kind == ir::LossScaleKind::Static || pr.lossScale.kind == ir::LossScaleKind::Dynamic
                  ? pr.lossScale.value
                  : 1.0;
  phaseKey = subKey(subKey(static_cast<std::uint64_t>(settings.seed), hashName(settings.runName)), hashName(plan.name));
  if (plan.schedule.stages != S || plan.schedule.microBatches != GA || plan.schedule.recompute != m.recompute)
    return Error{code::kInternal, "the plan's pipeline schedule does not match its stages and gradient accumulation", "", plan.source};
  pool = std::make_unique<ThreadPool>(std::max(1, settings.hostThreads));
  bnSpan = m.batchNormGroup();
  if (R % bnSpan != 0)
    return Error{code::kInternal,
                 "batch norm's statistics span " + std::to_string(bnSpan) + " replicas, which do not divide the " + std::to_string(R) + " replicas",
                 "the checker refuses this mapping (IPU1112)", m.source};
  bnTurns = std::make_unique<ComputeTurns>(std::max(1, settings.hostThreads));
  running.resize(model->layers().size());
  for (std::size_t li = 0; li < model->layers().size(); ++li)
    for (const auto& u : model->layers()[li].kernel->batchNorms())
      running[li].push_back({std::vector<float>(static_cast<std::size_t>(u.channels), 0.0f), std::vector<float>(static_cast<std::size_t>(u.channels), 1.0f)});

  // Buffers of every replica, initialised from the seed (the same on every mapping).
  groups.resize(static_cast<std::size_t>(R * P));
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < P; ++g) {
      Group& gr = group(r, g);
      gr.replica = r;
      gr.ipu = g;
      buildSlots(gr);
    }
  const auto values = model->initialValues(static_cast<std::uint64_t>(settings.seed));
  for (std::size_t p = 0; p < values.size(); ++p) {
    scatterState(static_cast<int>(p), 0, values[p]);
    if (master) scatterState(static_cast<int>(p), 4, values[p]);
  }
  if (phased) {
    // The weights live in Streaming Memory and come on chip segment by segment.
    for (auto& gr : groups)
      for (auto& s : gr.slots) s.value = Mat();
    int phases = 0;
    for (const auto& seg : segments) phases = std::max(phases, seg.phase + 1);
    phaseParamPeak.assign(static_cast<std::size_t>(P * T), std::vector<double>(static_cast<std::size_t>(phases), 0.0));
    phasePeak = phaseParamPeak;
  }
  computeStaticBytes();
  peakBytes = staticBytes;
  for (std::size_t i = 0; i < staticBytes.size(); ++i) {
    const double cap = i < plan.ipus.size() ? plan.ipus[i].capacityBytes : 0;
    if (cap > 0 && staticBytes[i] > cap)
      return Error{code::kIpuMemory,
                   "virtual IPU " + std::to_string(i) + " needs " + fmtBytes(staticBytes[i]) + " for code, weights, accumulators and optimizer state, more than the chip's " + fmtBytes(cap),
                   "the plan's memory model underestimated this mapping; try the levers `ipu plan` suggests", plan.mapping.source};
  }
  return true;
}

void PhaseTrainer::Impl::buildSlots(Group& g) {
  const auto& layers = model->layers();
  const auto& params = model->params();
  for (std::size_t li = 0; li < layers.size(); ++li) {
    const ModelLayer& L = layers[li];
    if (L.ipu != g.ipu) continue;
    const bool sharded = L.kernel->sharded();
    const auto& specs = L.specs;
    for (std::size_t k = 0; k < specs.size(); ++k) {
      const int pid = L.params[k];
      const ParamSpec& full = params[static_cast<std::size_t>(pid)].spec;
      const bool split = sharded && specs[k].axis != ShardAxis::None;
      for (int s = 0; s < (split ? T : 1); ++s) {
        const Key2 key{pid, split ? s : -1};
        auto it = g.slotAt.find(key);
        if (it == g.slotAt.end()) {
          Slot slot;
          slot.param = pid;
          slot.shard = key.second;
          slot.rows = full.rows;
          slot.cols = full.cols;
          if (split && specs[k].axis == ShardAxis::Cols) {
            slot.cols = full.cols / T;
            slot.col0 = slot.cols * s;
          } else if (split) {
            slot.rows = full.rows / T;
            slot.row0 = slot.rows * s;
          }
          const std::size_t n = static_cast<std::size_t>(slot.rows * slot.cols);
          slot.owned = rts ? chunkOf(n, R, g.replica) : Chunk{0, n};
          slot.primary = layers[static_cast<std::size_t>(params[static_cast<std::size_t>(pid)].owner)].ipu == g.ipu;
          const std::size_t owned = slot.owned.end - slot.owned.begin;
          OptimizerState st;
          const int moments = plan.optimizer.moments;
          if (moments >= 1) st.m.assign(owned, 0.0f);
          if (moments >= 2) st.v.assign(owned, 0.0f);
          if (master) st.master.assign(owned, 0.0f);
          if (streamingState) {
            slot.streamed = static_cast<int>(g.streaming.size());
            g.streaming.push_back(std::move(st));
          } else {
            slot.state = std::move(st);
          }
          g.slotAt[key] = static_cast<int>(g.slots.size());
          g.slots.push_back(std::move(slot));
          it = g.slotAt.find(key);
        }
        Use u;
        u.layer = static_cast<int>(li);
        g.slots[static_cast<std::size_t>(it->second)].uses.push_back(std::move(u));
      }
    }
  }
}

void PhaseTrainer::Impl::computeStaticBytes() {
  const double wb = fp16Weights ? 2 : 4, ab = fp16Acc ? 2 : 4, sb = fp16State ? 2 : 4;
  staticBytes.assign(static_cast<std::size_t>(P * T), 0.0);
  for (int g = 0; g < P; ++g) {
    const Group& gr = group(0, g);
    double staging = 0;
    for (const auto& s : gr.slots) {
      const double n = static_cast<double>(s.rows * s.cols);
      // Phased, a segment's weights and accumulators are on chip only while it runs (runSegment counts them).
      double bytes = phased ? 0.0 : n * wb + n * ab * static_cast<double>(s.uses.size());
      const OptimizerState& st = stateOf(gr, s);
      if (s.streamed < 0) bytes += st.bytes(sb);
      else staging = std::max(staging, st.bytes(sb));
      for (int t = 0; t < T; ++t)
        if (s.shard < 0 || s.shard == t) staticBytes[static_cast<std::size_t>(g * T + t)] += bytes;
    }
    for (int t = 0; t < T; ++t) staticBytes[static_cast<std::size_t>(g * T + t)] += staging + plan.pod.machine.chip.codeBaseBytes;
  }
  for (const auto& L : model->layers())
    for (int t = 0; t < T; ++t) staticBytes[static_cast<std::size_t>(L.ipu * T + t)] += L.plan->codeBytes;
}

// ------------------------------------------------------------------ helpers

Numerics PhaseTrainer::Impl::numerics(int replica, int micro, int layer, int pass) const {
  const std::uint64_t gmb = static_cast<std::uint64_t>(replica * GA + micro);
  return Numerics(fp16Compute, fp16Partials, stochastic,
                  subKey(subKey(subKey(stepKey, gmb), static_cast<std::uint64_t>(layer)), static_cast<std::uint64_t>(pass)),
                  pool.get());
}

ShardParams PhaseTrainer::Impl::paramsFor(const Group& g, int layer, const std::vector<Mat>* weights) const {
  const ModelLayer& L = model->layers()[static_cast<std::size_t>(layer)];
  const bool sharded = L.kernel->sharded();
  const auto& specs = L.specs;
  const int kt = sharded ? T : 1;
  ShardParams p(static_cast<std::size_t>(kt));
  for (int s = 0; s < kt; ++s)
    for (std::size_t k = 0; k < specs.size(); ++k) {
      const bool split = sharded && specs[k].axis != ShardAxis::None;
      const int slot = g.slotAt.at({L.params[k], split ? s : -1});
      p[static_cast<std::size_t>(s)].push_back(weights != nullptr ? &(*weights)[static_cast<std::size_t>(slot)] : &g.slots[static_cast<std::size_t>(slot)].value);
    }
  return p;
}

void PhaseTrainer::Impl::accumulate(Group& g, int layer, ShardGrads& grads, int gmb) {
  const ModelLayer& L = model->layers()[static_cast<std::size_t>(layer)];
  const bool sharded = L.kernel->sharded();
  const auto& specs = L.specs;
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const bool split = sharded && specs[k].axis != ShardAxis::None;
    for (int s = 0; s < (split ? T : 1); ++s) {
      Mat& gradient = grads[static_cast<std::size_t>(split ? s : 0)][k];
      Slot& slot = g.slots[static_cast<std::size_t>(g.slotAt.at({L.params[k], split ? s : -1}))];
      for (auto& u : slot.uses) {
        if (u.layer != layer) continue;
        if (!u.written) {
          u.acc = std::move(gradient);
          u.written = true;
        } else {
          u.acc += gradient;
          if (fp16Acc)
            roundToHalf(u.acc.data(), static_cast<std::size_t>(u.acc.size()), stochastic,
                        subKey(subKey(stepKey, 0xACC0ULL + static_cast<std::uint64_t>(gmb)), static_cast<std::uint64_t>(layer * 64 + static_cast<int>(k) * 8 + s)));
        }
      }
    }
  }
}

// ------------------------------------------------------------ the pipeline

void PhaseTrainer::Impl::forwardStage(Group& g, int stage, int micro) {
  const auto& layers = stageLayers[static_cast<std::size_t>(stage)];
  StashEntry e;
  Mat in;
  if (stage > 0) {
    auto it = g.activationsIn.find({stage, micro});
    IPU_INVARIANT(it != g.activationsIn.end(), "the schedule runs a stage's forward pass after its input activations arrived");
    in = std::move(it->second);
    g.activationsIn.erase(it);
  }
  e.trunk.push_back(std::move(in));
  e.trunkOf.resize(layers.size());
  e.saved.resize(layers.size());
  bool lastUsed = false;
  for (std::size_t k = 0; k < layers.size(); ++k) {
    const int li = layers[k];
    const ModelLayer& L = model->layers()[static_cast<std::size_t>(li)];
    e.trunkOf[k] = static_cast<int>(e.trunk.size()) - 1;
    lastUsed = true;
    Saved sv;
    Mat out;
    forwardLayer(g, li, micro, e.trunk.back(), sv, out);
    if (!L.head) {
      e.trunk.push_back(std::move(out));
      lastUsed = false;
    }
    if (recompute == ir::Recompute::None) e.saved[k] = std::move(sv);
  }
  if (stage < S - 1) g.outbox.push_back({g.replica, stage + 1, micro, false, e.trunk.back()});
  // Keep only what the backward pass needs: checkpoints under recomputation.
  if (!lastUsed && e.trunk.size() > 1) e.trunk.pop_back();
  if (recompute == ir::Recompute::Stage) e.trunk.resize(1);
  g.stash[{stage, micro}] = std::move(e);
}

void PhaseTrainer::Impl::forwardLayer(Group& g, int li, int micro, const Mat& x, Saved& saved, Mat& y) {
  const ModelLayer& L = model->layers()[static_cast<std::size_t>(li)];
  const auto slot = static_cast<std::size_t>(g.replica * GA + micro);
  Numerics nx = numerics(g.replica, micro, li, 0);
  StepBatchNorm bn(*this, g.replica, micro, li, BatchNormContext::Mode::Train, false);
  nx.setBatchNorm(&bn);
  HeadResult* head = L.head ? &results[slot][static_cast<std::size_t>(li)] : nullptr;
  L.kernel->forward(x, batches[slot], paramsFor(g, li), nx, saved, y, head);
  if (L.head) hasResult[slot][static_cast<std::size_t>(li)] = 1;
}

void PhaseTrainer::Impl::recomputeStage(Group& g, int stage, int micro) {
  // `every_layer` recomputes each layer right before its backward pass (in
  // backwardStage), so that one layer's saved values are live at a time.
  if (recompute != ir::Recompute::Stage) return;
  // Recompute the whole stage from its input checkpoint.
  const auto& layers = stageLayers[static_cast<std::size_t>(stage)];
  const MicroBatch& mb = batches[static_cast<std::size_t>(g.replica * GA + micro)];
  StashEntry& e = g.stash.at({stage, micro});
  for (std::size_t k = 0; k < layers.size(); ++k) {
    const int li = layers[k];
    const ModelLayer& L = model->layers()[static_cast<std::size_t>(li)];
    Numerics nx = numerics(g.replica, micro, li, 0);
    StepBatchNorm bn(*this, g.replica, micro, li, BatchNormContext::Mode::Recompute, false);
    nx.setBatchNorm(&bn);
    Mat out;
    L.kernel->forward(e.trunk[static_cast<std::size_t>(e.trunkOf[k])], mb, paramsFor(g, li), nx, e.saved[k], out, nullptr);
    if (!L.head && k + 1 < layers.size()) e.trunk.push_back(std::move(out));
  }
}

void PhaseTrainer::Impl::backwardStage(Group& g, int stage, int micro) {
  const auto& layers = stageLayers[static_cast<std::size_t>(stage)];
  auto sit = g.stash.find({stage, micro});
  IPU_INVARIANT(sit != g.stash.end(), "the schedule runs a stage's backward pass after its forward pass stashed the micro batch");
  StashEntry e = std::move(sit->second);
  g.stash.erase(sit);
  Mat d;
  if (stage < S - 1) {
    auto it = g.gradientsIn.find({stage, micro});
    IPU_INVARIANT(it != g.gradientsIn.end(), "the schedule runs a stage's backward pass after the next stage's gradients arrived");
    d = std::move(it->second);
    g.gradientsIn.erase(it);
  }
  for (std::size_t k = layers.size(); k-- > 0;)
    backwardLayer(g, layers[k], micro, e.trunk[static_cast<std::size_t>(e.trunkOf[k])],
                  recompute == ir::Recompute::EveryLayer ? nullptr : &e.saved[k], d);
  if (stage > 0) g.outbox.push_back({g.replica, stage - 1, micro, true, std::move(d)});
}

void PhaseTrainer::Impl::backwardLayer(Group& g, int li, int micro, const Mat& x, Saved* saved, Mat& d) {
  const ModelLayer& L = model->layers()[static_cast<std::size_t>(li)];
  const int slot = g.replica * GA + micro;
  const MicroBatch& mb = batches[static_cast<std::size_t>(slot)];
  Saved recomputed;
  if (saved == nullptr) {
    // Recomputation: the layer's forward again, normalising with the
    // batch-norm statistics its forward pass recorded.
    Numerics nx = numerics(g.replica, micro, li, 0);
    StepBatchNorm bn(*this, g.replica, micro, li, BatchNormContext::Mode::Recompute, false);
    nx.setBatchNorm(&bn);
    Mat out;
    L.kernel->forward(x, mb, paramsFor(g, li), nx, recomputed, out, nullptr);
    saved = &recomputed;
  }
  Numerics nb = numerics(g.replica, micro, li, 1);
  StepBatchNorm bnBackward(*this, g.replica, micro, li, BatchNormContext::Mode::Train, true);
  nb.setBatchNorm(&bnBackward);
  const int kt = L.kernel->sharded() ? T : 1;
  ShardGrads grads(static_cast<std::size_t>(kt));
  Mat dx;
  L.kernel->backward(x, d, mb, paramsFor(g, li), nb, *saved, static_cast<float>(lossScale), dx, grads);
  // A head's input gradient adds to the trunk's (its input is also the next layer's).
  if (L.head && d.size() != 0) {
    d += dx;
    nb.round(d);
  } else {
    d = std::move(dx);
  }
  accumulate(g, li, grads, slot);
}

void PhaseTrainer::Impl::runCycle(const std::vector<ir::Work>& work) {
  runGroups(groups.size(), [&](std::size_t i) {
    Group& g = groups[i];
    for (const auto& w : work) {
      IPU_INVARIANT(w.stage >= 0 && w.stage < S, "the pipeline schedule's work names stages of the plan");
      if (stageIpu[static_cast<std::size_t>(w.stage)] != g.ipu) continue;
      const int micro = static_cast<int>(w.micro);
      switch (w.pass) {
        case ir::Pass::Forward: forwardStage(g, w.stage, micro); break;
        case ir::Pass::Recompute: recomputeStage(g, w.stage, micro); break;
        case ir::Pass::Backward: backwardStage(g, w.stage, micro); break;
      }
    }
    g.dynamicPeak = std::max(g.dynamicPeak, g.dynamicElements());
  });
  deliver();
}

void PhaseTrainer::Impl::deliver() {
  // Exchange: deliver what each IPU sent to the IPU of the receiving stage.
  const double bc = ir::bytesOf(plan.precision.compute);
  for (auto& g : groups) {
    for (auto& m : g.outbox) {
      IPU_INVARIANT(m.stage >= 0 && m.stage < S && (m.gradient ? m.stage < S - 1 : m.stage > 0),
                    "a message goes to a neighbouring stage: activations forward, gradients backward");
      // Activations go from stage - 1 to stage; gradients from stage + 1 to stage.
      const std::size_t boundary = static_cast<std::size_t>(m.gradient ? m.stage : m.stage - 1);
      auto& moved = m.gradient ? traffic.gradients : traffic.activations;
      moved[static_cast<std::size_t>(m.replica)][boundary] += static_cast<double>(m.tensor.size()) * bc;
      Group& to = group(m.replica, stageIpu[static_cast<std::size_t>(m.stage)]);
      (m.gradient ? to.gradientsIn : to.activationsIn)[{m.stage, m.micro}] = std::move(m.tensor);
    }
    g.outbox.clear();
  }
}

// -------------------------------------------------------- phased execution

std::vector<std::size_t> PhaseTrainer::Impl::slotsOf(const Group& g, const ir::PhaseSegment& seg) const {
  std::vector<std::size_t> out;
  for (int li : seg.layers)
    for (int pid : model->layers()[static_cast<std::size_t>(li)].params)
      for (std::size_t j = 0; j < g.slots.size(); ++j)
        if (g.slots[j].param == pid && std::find(out.begin(), out.end(), j) == out.end()) out.push_back(j);
  std::sort(out.begin(), out.end());
  return out;
}

Mat PhaseTrainer::Impl::storedWeights(const Group& g, std::size_t j) const {
  if (!rtsStreamed) return g.slots[j].home;
  // Each replica keeps its share current: assemble the tensor from all of them.
  Mat w(g.slots[j].rows, g.slots[j].cols);
  for (int r = 0; r < R; ++r) {
    const Slot& src = group(r, g.ipu).slots[j];
    std::copy(src.home.data() + src.owned.begin, src.home.data() + src.owned.end, w.data() + src.owned.begin);
  }
  return w;
}

void PhaseTrainer::Impl::loadWeights(Group& g, const std::vector<std::size_t>& slots) {
  const double wb = fp16Weights ? 2 : 4;
  auto& streamed = traffic.streamed[static_cast<std::size_t>(g.replica)];
  for (std::size_t j : slots) {
    Slot& s = g.slots[j];
    s.value = storedWeights(g, j);
    // This replica reads its share; with RTS the rest comes by an all-gather.
    const double n = static_cast<double>(s.rows * s.cols);
    const double read = rtsStreamed ? static_cast<double>(s.owned.end - s.owned.begin) : n;
    forIpusOf(g, s, [&](std::size_t i) {
      streamed[i].weights += read * wb;
      if (rtsStreamed) traffic.gatheredStreamed[static_cast<std::size_t>(g.replica)][i] += n * wb;
    });
  }
}

void PhaseTrainer::Impl::runPhased() {
  // Forward: stages in order, each stage's segments in order; backward in
  // reverse. All replicas run a segment together; a stage's exchange is
  // delivered once all of its segments ran.
  const int n = static_cast<int>(segments.size());
  auto pass = [&](bool backward) {
    for (int i = 0; i < n; ++i) {
      if (settings.cancel != nullptr && settings.cancel->load()) return;
      const int k = backward ? n - 1 - i : i;
      runGroups(static_cast<std::size_t>(R), [&](std::size_t r) { runSegment(group(static_cast<int>(r), segments[static_cast<std::size_t>(k)].ipu), k, backward); });
      const int next = backward ? k - 1 : k + 1;
      if (next < 0 || next >= n || segments[static_cast<std::size_t>(next)].stage != segments[static_cast<std::size_t>(k)].stage) deliver();
    }
  };
  pass(false);
  pass(true);
}

void PhaseTrainer::Impl::runSegment(Group& g, int k, bool backward) {
  const ir::PhaseSegment& seg = segments[static_cast<std::size_t>(k)];
  const int n = static_cast<int>(segments.size());
  const bool stageFirst = k == 0 || segments[static_cast<std::size_t>(k - 1)].stage != seg.stage;
  const bool stageLast = k == n - 1 || segments[static_cast<std::size_t>(k + 1)].stage != seg.stage;
  const double cb = fp16Compute ? 2 : 4, wb = fp16Weights ? 2 : 4, ab = fp16Acc ? 2 : 4;
  auto& streamed = traffic.streamed[static_cast<std::size_t>(g.replica)];
  double actBytes = 0;   // activations and gradients through Streaming Memory, for every IPU of the group
  auto out = [&](std::map<Key2, Mat>& where, Key2 key, const Mat& m) {
    where[key] = m;
    actBytes += static_cast<double>(m.size()) * cb;
  };
  auto back = [&](std::map<Key2, Mat>& where, Key2 key) {
    auto it = where.find(key);
    IPU_INVARIANT(it != where.end(), "a phased backward run finds what its forward run left in Streaming Memory");
    Mat m = std::move(it->second);
    where.erase(it);
    actBytes += static_cast<double>(m.size()) * cb;
    return m;
  };

  // The segment's weights come on chip (and, in the backward run, its
  // accumulators); the next run's weights are prefetched meanwhile.
  const std::vector<std::size_t> slots = slotsOf(g, seg);
  loadWeights(g, slots);
  std::vector<double> onChip(static_cast<std::size_t>(T), 0.0);
  for (std::size_t j : slots) {
    const double e = static_cast<double>(g.slots[j].rows * g.slots[j].cols);
    forIpusOf(g, g.slots[j], [&](std::size_t i) { onChip[i - static_cast<std::size_t>(g.ipu * T)] += e * (wb + (backward ? ab : 0.0)); });
  }
  const std::vector<ir::SegmentRun> runs = ir::segmentRuns(segments, g.ipu);
  for (std::size_t i = 0; i + 1 < runs.size(); ++i)
    if (runs[i].segment == k && runs[i].backward == backward)
      for (std::size_t j : slotsOf(g, segments[static_cast<std::size_t>(runs[i + 1].segment)])) {
        const double e = static_cast<double>(g.slots[j].rows * g.slots[j].cols);
        forIpusOf(g, g.slots[j], [&](std::size_t ip) { onChip[ip - static_cast<std::size_t>(g.ipu * T)] += e * wb; });
      }

  double dynamic = g.dynamicElements();   // exchange buffers (the stash is in Streaming Memory)
  for (int m = 0; m < GA; ++m) {
    if (!backward) {
      // The trunk entering the segment: from the previous stage, or from the
      // previous segment through Streaming Memory.
      Mat x;
      if (!stageFirst) {
        x = g.streamedInputs.at({seg.layers.front(), m});
        actBytes += static_cast<double>(x.size()) * cb;
      } else if (seg.stage > 0) {
        auto it = g.activationsIn.find({seg.stage, m});
        IPU_INVARIANT(it != g.activationsIn.end(), "a stage's first segment runs after its input activations arrived");
        x = std::move(it->second);
        g.activationsIn.erase(it);
      }
      for (std::size_t q = 0; q < seg.layers.size(); ++q) {
        const int li = seg.layers[q];
        const ModelLayer& L = model->layers()[static_cast<std::size_t>(li)];
        // Each layer's input waits in Streaming Memory for its backward pass
        // (the previous segment already wrote the first one's).
        if (q > 0 || stageFirst) out(g.streamedInputs, {li, m}, x);
        Saved sv;
        Mat y;
        forwardLayer(g, li, m, x, sv, y);
        if (!L.head) x = std::move(y);
      }
      if (!stageLast) out(g.streamedInputs, {segments[static_cast<std::size_t>(k + 1)].layers.front(), m}, x);
      else if (seg.stage < S - 1) g.outbox.push_back({g.replica, seg.stage + 1, m, false, std::move(x)});
    } else {
      Mat d;
      if (!stageLast) d = back(g.streamedGradients, {k, m});
      else if (seg.stage < S - 1) {
        auto it = g.gradientsIn.find({seg.stage, m});
        IPU_INVARIANT(it != g.gradientsIn.end(), "a stage's last segment runs backward after the next stage's gradients arrived");
        d = std::move(it->second);
        g.gradientsIn.erase(it);
      }
      // Each layer's input comes back, and its forward pass is recomputed from it.
      for (std::size_t q = seg.layers.size(); q-- > 0;)
        backwardLayer(g, seg.layers[q], m, back(g.streamedInputs, {seg.layers[q], m}), nullptr, d);
      if (!stageFirst) out(g.streamedGradients, {k - 1, m}, d);
      else if (seg.stage > 0) g.outbox.push_back({g.replica, seg.stage - 1, m, true, std::move(d)});
    }
    dynamic = std::max(dynamic, g.dynamicElements());
  }
  g.dynamicPeak = std::max(g.dynamicPeak, dynamic);

  // The weights leave; the backward run writes its accumulators out.
  for (std::size_t j : slots) {
    Slot& s = g.slots[j];
    s.value = Mat();
    if (backward) {
      const double e = static_cast<double>(s.rows * s.cols);
      forIpusOf(g, s, [&](std::size_t i) { streamed[i].gradients += e * ab; });
    }
  }
  for (int t = 0; t < T; ++t) {
    const std::size_t i = static_cast<std::size_t>(g.ipu * T + t);
    streamed[i].activations += actBytes;
    if (g.replica != 0) continue;
    // Replica 0 measures what the replicas (identical) hold.
    double& pp = phaseParamPeak[i][static_cast<std::size_t>(seg.phase)];
    pp = std::max(pp, onChip[static_cast<std::size_t>(t)]);
    double& peak = phasePeak[i][static_cast<std::size_t>(seg.phase)];
    peak = std::max(peak, staticBytes[i] + onChip[static_cast<std::size_t>(t)] + dynamic * cb / T);
  }
}

// --------------------------------------------------------------- batch norm

void PhaseTrainer::Impl::runGroups(std::size_t count, const std::function<void(std::size_t)>& task) {
  if (bnSpan <= 1) {
    pool->run(count, task);
    return;
  }
  // Distributed batch norm: a group's task waits inside a kernel for the
  // other replicas of its batch-norm group. A pool task must not (with fewer
  // threads than groups the waiting task would hold the thread the others
  // need), so every group runs on a thread of its own, taking turns
  // (ComputeTurns) to keep about hostThreads threads computing; their inner
  // parallel loops still go to the pool. Results do not depend on any of it:
  // the exchange adds in replica order.
  bnExchange.reset();
  std::vector<std::exception_ptr> failed(count);
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    threads.emplace_back([&, i] {
      bnTurns->acquire();
      try {
        task(i);
      } catch (...) {
        failed[i] = std::current_exception();
        bnExchange.abort();
      }
      bnTurns->release();
    });
  for (auto& t : threads) t.join();
  // Rethrow the failure itself, not a waiter it woke (there is a waiter
  // only when there is a failure).
  for (const auto& f : failed) {
    if (!f) continue;
    try {
      std::rethrow_exception(f);
    } catch (const ExchangeAborted&) {
      continue;
    }
  }
}

void PhaseTrainer::Impl::recordBatchNorm(int replica, int micro, int layer, int unit, BatchNormStatistics stats) {
  std::lock_guard<std::mutex> lock(bnRecordedMutex);
  bnRecorded[{replica, micro, layer, unit}] = std::move(stats);
}

const BatchNormStatistics& PhaseTrainer::Impl::recordedBatchNorm(int replica, int micro, int layer, int unit) {
  // The forward pass of the same micro batch recorded it on this replica's
  // thread, before (the schedule recomputes after the forward pass).
  std::lock_guard<std::mutex> lock(bnRecordedMutex);
  return bnRecorded.at({replica, micro, layer, unit});
}

void PhaseTrainer::Impl::updateRunningStatistics() {
  // Once per step, from the step's global batch: the statistics sets (micro
  // batch m of batch-norm group q) combine in the order (q, m) into the mean
  // and the unbiased variance of every value the unit normalised this step
  // (Chan et al.'s pairwise formula, in double), then one momentum update.
  // With one set per step this is PyTorch's BatchNorm2d after one forward
  // pass; otherwise the step's sets count as one batch, so the running
  // statistics do not depend on how the global batch was split.
  for (std::size_t li = 0; li < running.size(); ++li)
    for (std::size_t u = 0; u < running[li].size(); ++u) {
      RunningStatistics& rs = running[li][u];
      const std::size_t C = rs.mean.size();
      std::vector<const BatchNormStatistics*> sets;
      for (int q = 0; q < R / bnSpan; ++q)
        for (int m = 0; m < GA; ++m) {
          auto it = bnRecorded.find({q * bnSpan, m, static_cast<int>(li), static_cast<int>(u)});
          if (it != bnRecorded.end()) sets.push_back(&it->second);
        }
      if (sets.empty()) continue;
      double n = 0;
      std::vector<double> mean(C, 0.0), m2(C, 0.0);
      for (const BatchNormStatistics* st : sets) {
        const double nb = st->count, total = n + nb;
        for (std::size_t c = 0; c < C; ++c) {
          const double delta = static_cast<double>(st->mean[c]) - mean[c];
          mean[c] += delta * nb / total;
          m2[c] += st->squares[c] + delta * delta * n * nb / total;
        }
        n = total;
      }
      for (std::size_t c = 0; c < C; ++c) {
        const double var = m2[c] / std::max(1.0, n - 1);
        rs.mean[c] = static_cast<float>((1 - kRunningMomentum) * rs.mean[c] + kRunningMomentum * mean[c]);
        rs.var[c] = static_cast<float>((1 - kRunningMomentum) * rs.var[c] + kRunningMomentum * var);
      }
    }
  bnRecorded.clear();
}

NamedTensors PhaseTrainer::Impl::runningTensors() const {
  NamedTensors out;
  for (std::size_t li = 0; li < running.size(); ++li) {
    const auto units = model->layers()[li].kernel->batchNorms();
    for (std::size_t u = 0; u < running[li].size(); ++u) {
      const std::string name = model->layers()[li].plan->name + "." + units[u].name;
      const auto& rs = running[li][u];
      const auto C = static_cast<Eigen::Index>(rs.mean.size());
      out.emplace_back("running_mean/" + name, Eigen::Map<const Mat>(rs.mean.data(), 1, C));
      out.emplace_back("running_var/" + name, Eigen::Map<const Mat>(rs.var.data(), 1, C));
    }
  }
  return out;
}

Expected<bool> PhaseTrainer::Impl::setRunningTensors(const NamedTensors& tensors) {
  // Absent ones keep their values (a checkpoint written before the emulator
  // kept running statistics); a present one must fit.
  for (std::size_t li = 0; li < running.size(); ++li) {
    const auto units = model->layers()[li].kernel->batchNorms();
    for (std::size_t u = 0; u < running[li].size(); ++u) {
      const std::string name = model->layers()[li].plan->name + "." + units[u].name;
      auto& rs = running[li][u];
      const std::pair<const char*, std::vector<float>*> targets[] = {{"running_mean/", &rs.mean}, {"running_var/", &rs.var}};
      for (const auto& [prefix, into] : targets) {
        for (const auto& [n, m] : tensors) {
          if (n != prefix + name) continue;
          if (m.size() != static_cast<Eigen::Index>(into->size()))
            return Error{code::kCheckpoint,
                         "tensor `" + n + "` holds " + std::to_string(m.size()) + " values for " + std::to_string(into->size()) + " channels",
                         "it was saved from a model of another size", plan.source};
          into->assign(m.data(), m.data() + m.size());
        }
      }
    }
  }
  return true;
}

// --------------------------------------------------------- the weight update

void PhaseTrainer::Impl::reduceGradients() {
  // Inside each replica: every copy of a parameter gets the sum of all its
  // uses' accumulators, in layer order (tied weights across IPUs exchange
  // their accumulators).
  pool->run(static_cast<std::size_t>(R), [&](std::size_t r) {
    std::map<Key2, std::vector<std::pair<int, Mat*>>> uses;
    std::map<Key2, int> copies;   // slots holding the parameter (tied weights: one per IPU)
    for (int g = 0; g < P; ++g)
      for (auto& s : group(static_cast<int>(r), g).slots) {
        ++copies[{s.param, s.shard}];
        for (auto& u : s.uses)
          if (u.written) uses[{s.param, s.shard}].push_back({u.layer, &u.acc});
      }
    for (int g = 0; g < P; ++g) {
      Group& gr = group(static_cast<int>(r), g);
      for (auto& s : gr.slots) {
        auto list = uses[{s.param, s.shard}];
        std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        if (list.empty()) {
          s.grad = Mat::Zero(s.rows, s.cols);
          continue;
        }
        // The only copy takes the first accumulator's buffer (the next
        // step's first accumulation replaces it: accumulate()); tied copies
        // each read it.
        if (copies[{s.param, s.shard}] == 1) s.grad = std::move(*list[0].second);
        else s.grad = *list[0].second;
        for (std::size_t i = 1; i < list.size(); ++i) {
          s.grad += *list[i].second;
          if (fp16Acc) roundToHalf(s.grad.data(), static_cast<std::size_t>(s.grad.size()), false, 0);
        }
      }
    }
  });
  for (auto& gr : groups)
    for (auto& s : gr.slots)
      for (auto& u : s.uses) u.written = false;
  if (R == 1) return;
  // Across replicas: a ring all-reduce (or, with RTS, a reduce-scatter: each
  // replica keeps the reduced chunk it updates) per tensor.
  std::vector<Key2> work;
  for (int g = 0; g < P; ++g)
    for (std::size_t j = 0; j < group(0, g).slots.size(); ++j) work.push_back({g, static_cast<int>(j)});
  const bool round = fp16Acc;
  countCollective(traffic.reduced, ir::bytesOf(plan.precision.accumulators));
  pool->run(work.size(), [&](std::size_t w) {
    const int g = work[w].first;
    const std::size_t j = static_cast<std::size_t>(work[w].second);
    std::vector<float*> bufs;
    for (int r = 0; r < R; ++r) bufs.push_back(group(r, g).slots[j].grad.data());
    const std::size_t n = static_cast<std::size_t>(group(0, g).slots[j].grad.size());
    RoundFn fn = round ? [](float* d, std::size_t k, void*) { roundToHalf(d, k, false, 0); } : RoundFn(nullptr);
    if (rts) ringReduceScatter(bufs, n, fn, nullptr);
    else ringAllReduce(bufs, n, fn, nullptr);
  });
}

void PhaseTrainer::Impl::countCollective(std::vector<std::vector<double>>& into, double bytesPerElement) const {
  for (const auto& gr : groups)
    for (const auto& s : gr.slots)
      for (int t = 0; t < T; ++t)
        if (s.shard < 0 || s.shard == t)
          into[static_cast<std::size_t>(gr.replica)][static_cast<std::size_t>(gr.ipu * T + t)] +=
              static_cast<double>(s.rows * s.cols) * bytesPerElement;
}

std::vector<double> PhaseTrainer::Impl::parameters() const {
  std::vector<double> out(static_cast<std::size_t>(P * T), 0.0);
  for (int g = 0; g < P; ++g)
    for (const auto& s : group(0, g).slots)
      for (int t = 0; t < T; ++t)
        if (s.shard < 0 || s.shard == t) out[static_cast<std::size_t>(g * T + t)] += static_cast<double>(s.rows * s.cols);
  return out;
}

namespace {

// Whether any of n values is infinite or NaN: whether the largest magnitude's
// bits reach an all-ones exponent. A loop the compiler vectorises, where
// Eigen's allFinite() took 4% of an fp32 step at hidden 512.
bool anyNonFinite(const float* x, std::size_t n) {
  std::uint32_t largest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t b;
    std::memcpy(&b, x + i, sizeof b);
    largest = std::max(largest, b & 0x7FFFFFFFu);
  }
  return largest >= 0x7F800000u;
}

}  // namespace

bool PhaseTrainer::Impl::overflowed() const {
  for (const auto& gr : groups)
    for (const auto& s : gr.slots)
      if (anyNonFinite(s.grad.data() + s.owned.begin, s.owned.end - s.owned.begin)) return true;
  return false;
}

double PhaseTrainer::Impl::gradientNorm() const {
  // Each canonical element once: primary copies, replica 0 (or every
  // replica's own chunk with RTS), in canonical order.
  double sum = 0;
  for (int r = 0; r < (rts ? R : 1); ++r)
    for (int g = 0; g < P; ++g)
      for (const auto& s : group(r, g).slots) {
        if (!s.primary) continue;
        for (std::size_t i = s.owned.begin; i < s.owned.end; ++i) sum += static_cast<double>(s.grad.data()[i]) * s.grad.data()[i];
      }
  return std::sqrt(sum) / lossScale;
}

void PhaseTrainer::Impl::update(double lr, float gradScale) {
  const ir::Optimizer& opt = plan.optimizer;
  auto excluded = [&](int pid) {
    const ir::ParamClass cls = model->params()[static_cast<std::size_t>(pid)].spec.cls;
    return std::find(opt.exclude.begin(), opt.exclude.end(), cls) != opt.exclude.end();
  };
  auto settingsFor = [&](const Slot& s) {
    UpdateSettings us;
    us.optimizer = &opt;
    us.lr = lr;
    us.t = updates;
    us.gradScale = gradScale;
    us.excluded = excluded(s.param);
    us.fp16Weights = fp16Weights;
    us.fp16State = fp16State;
    us.stochastic = stochastic;
    // Keyed by the tensor, never by the replica or IPU holding it: every copy
    // (replicas, tied copies) draws the same bits and stays identical.
    us.key = subKey(subKey(subKey(phaseKey, 0x0B7ULL + static_cast<std::uint64_t>(step)), static_cast<std::uint64_t>(s.param)),
                    static_cast<std::uint64_t>(s.shard + 1));
    return us;
  };
  // The work: chunks of kUpdateChunk elements of every slot, all groups at
  // once (a slot whose state is in Streaming Memory is one item: its state
  // moves as a whole). The chunks are fixed by the sizes, and a chunk's
  // elements draw the same random positions as in a whole-tensor update, so
  // the threads change nothing; LAMB's and LARS's sums add the chunks' partial
  // sums in order.
  constexpr std::size_t kUpdateChunk = std::size_t{1} << 16;
  struct Item {
    std::size_t group, slot, begin, end;   // [begin, end) within the slot's owned range
    bool whole;                            // Streaming Memory: every chunk, in order, in one item
  };
  // Phased: the weights come from Streaming Memory for the update and go
  // back; each replica reads its share (with RTS) and writes back what it keeps.
  const double wb = fp16Weights ? 2 : 4, ab = fp16Acc ? 2 : 4;
  if (phased)
    pool->run(groups.size(), [&](std::size_t i) {
      Group& gr = groups[i];
      for (auto& s : gr.slots) {
        s.value = s.home;
        const double share = static_cast<double>(s.owned.end - s.owned.begin);
        forIpusOf(gr, s, [&](std::size_t ip) { traffic.streamed[static_cast<std::size_t>(gr.replica)][ip].update += share * (wb + ab); });
      }
    });
  std::vector<Item> items;
  for (std::size_t i = 0; i < groups.size(); ++i)
    for (std::size_t j = 0; j < groups[i].slots.size(); ++j) {
      Slot& s = groups[i].slots[j];
      const std::size_t n = s.owned.end - s.owned.begin;
      if (needsTrustRatio(opt) && s.scratch.size() < n) s.scratch.resize(n);
      if (s.streamed >= 0) {
        items.push_back({i, j, 0, n, true});
        continue;
      }
      std::size_t b = 0;
      do {
        items.push_back({i, j, b, std::min(n, b + kUpdateChunk), false});
        b += kUpdateChunk;
      } while (b < n);
    }
  // Run f on each fixed chunk of an item.
  auto chunks = [&](const Item& it, const std::function<void(const Item&)>& f) {
    if (!it.whole) {
      f(it);
      return;
    }
    std::size_t b = it.begin;
    do {
      f({it.group, it.slot, b, std::min(it.end, b + kUpdateChunk), false});
      b += kUpdateChunk;
    } while (b < it.end);
  };
  auto span = [&](Slot& s, OptimizerState& st, const Item& it) {
    UpdateSpan sp;
    sp.value = s.value.data() + s.owned.begin + it.begin;
    sp.grad = s.grad.data() + s.owned.begin + it.begin;
    sp.n = it.end - it.begin;
    sp.offset = s.owned.begin + it.begin;
    sp.state = &st;
    sp.first = it.begin;
    sp.u = &s.scratch;
    return sp;
  };
  // Streaming Memory: state moves to a staging buffer for the update and
  // back; returns the bytes moved. Each pass moves only what it uses: LAMB's
  // first pass (the norms) updates the moments and reads the master weights,
  // its second writes the weights; LARS's first pass only reads the weights,
  // its second updates the momentum and the weights. The master weights come
  // along whenever a pass reads the weights (they are the weights then).
  enum Part : unsigned { kMoments = 1, kMaster = 2, kAll = 3 };
  auto withState = [&](Group& gr, Slot& s, unsigned in, unsigned out, const std::function<void(OptimizerState&)>& f) {
    if (s.streamed < 0) {
      f(s.state);
      return 0.0;
    }
    const double mb = fp16State ? 2 : 4;
    OptimizerState& stored = gr.streaming[static_cast<std::size_t>(s.streamed)];
    OptimizerState staging;
    double moved = 0;
    if (in & kMoments) {
      staging.m = stored.m;
      staging.v = stored.v;
      moved += static_cast<double>(stored.m.size() + stored.v.size()) * mb;
    }
    if (in & kMaster) {
      staging.master = stored.master;
      moved += static_cast<double>(stored.master.size()) * 4;
    }
    f(staging);
    if (out & kMoments) {
      moved += static_cast<double>(staging.m.size() + staging.v.size()) * mb;
      stored.m = std::move(staging.m);
      stored.v = std::move(staging.v);
    }
    if (out & kMaster) {
      moved += static_cast<double>(staging.master.size()) * 4;
      stored.master = std::move(staging.master);
    }
    return moved;
  };
  const bool lamb = opt.kind == ir::OptimizerKind::Lamb;
  const unsigned firstIn = lamb ? kAll : kMaster, firstOut = lamb ? kMoments : 0u;
  const unsigned secondIn = needsTrustRatio(opt) ? (lamb ? kMaster : kAll) : kAll;
  std::vector<double> moved(items.size(), 0.0);
  const bool twoPass = needsTrustRatio(opt);
  if (twoPass) {
    std::vector<NormSums> partial(items.size());
    pool->run(items.size(), [&](std::size_t w) {
      const Item& it = items[w];
      Group& gr = groups[it.group];
      Slot& s = gr.slots[it.slot];
      const UpdateSettings us = settingsFor(s);
      moved[w] += withState(gr, s, firstIn, firstOut, [&](OptimizerState& st) {
        chunks(it, [&](const Item& c) { partial[w] += prepare(us, span(s, st, c)); });
      });
    });
    for (auto& gr : groups)
      for (auto& s : gr.slots) s.sums = NormSums{};
    for (std::size_t w = 0; w < items.size(); ++w) groups[items[w].group].slots[items[w].slot].sums += partial[w];
  }
  pool->run(items.size(), [&](std::size_t w) {
    const Item& it = items[w];
    Group& gr = groups[it.group];
    Slot& s = gr.slots[it.slot];
    const UpdateSettings us = settingsFor(s);
    double ratio = 1;
    if (twoPass) {
      // The whole tensor's sums: its shards on this group, and with RTS every replica's chunk.
      NormSums total;
      for (int r = 0; r < (rts ? R : 1); ++r) {
        const Group& src = rts ? group(r, gr.ipu) : gr;
        for (const auto& o : src.slots)
          if (o.param == s.param) total += o.sums;
      }
      ratio = trustRatio(us, total);
    }
    moved[w] += withState(gr, s, secondIn, secondIn, [&](OptimizerState& st) { chunks(it, [&](const Item& c) { apply(us, ratio, span(s, st, c)); }); });
  });
  for (std::size_t w = 0; w < items.size(); ++w) {
    const Group& gr = groups[items[w].group];
    const Slot& s = gr.slots[items[w].slot];
    forIpusOf(gr, s, [&](std::size_t ip) { traffic.streamed[static_cast<std::size_t>(gr.replica)][ip].optimizerState += moved[w]; });
  }
  // With the weights sharded in Streaming Memory, each replica writes back its
  // share and the segments gather them as they load: no all-gather here.
  if (rts && !rtsStreamed) {
    // Every replica updated its chunk; all-gather the new weights.
    countCollective(traffic.gathered, ir::bytesOf(plan.precision.weights));
    std::vector<Key2> work;
    for (int g = 0; g < P; ++g)
      for (std::size_t j = 0; j < group(0, g).slots.size(); ++j) work.push_back({g, static_cast<int>(j)});
    pool->run(work.size(), [&](std::size_t w) {
      const int g = work[w].first;
      const std::size_t j = static_cast<std::size_t>(work[w].second);
      std::vector<float*> bufs;
      for (int r = 0; r < R; ++r) bufs.push_back(group(r, g).slots[j].value.data());
      ringAllGather(bufs, static_cast<std::size_t>(group(0, g).slots[j].value.size()));
    });
  }
  if (phased)
    pool->run(groups.size(), [&](std::size_t i) {
      Group& gr = groups[i];
      for (auto& s : gr.slots) {
        const std::size_t b = rtsStreamed ? s.owned.begin : 0, e = rtsStreamed ? s.owned.end : static_cast<std::size_t>(s.value.size());
        std::copy(s.value.data() + b, s.value.data() + e, s.home.data() + b);
        s.value = Mat();
        forIpusOf(gr, s, [&](std::size_t ip) { traffic.streamed[static_cast<std::size_t>(gr.replica)][ip].update += static_cast<double>(e - b) * wb; });
      }
    });
}

double PhaseTrainer::Impl::learningRate(Error* error) const {
  if (!plan.lr.luaFunction.empty()) {
    if (settings.policies == nullptr || !settings.policies->learningRate) {
      *error = Error{code::kMissingPolicy, "phase `" + plan.name + "` takes its learning rate from the Lua function `" + plan.lr.luaFunction + "`",
                     "the caller must supply Policies::learningRate (the CLI wires the script's hooks)", plan.source};
      return 0;
    }
    return settings.policies->learningRate(step, plan.name);
  }
  return train::learningRate(plan.lr, step, plan.steps);
}

void PhaseTrainer::Impl::abandonStep() {
  // Nothing a cancelled step did is kept: what waits between passes, and the
  // accumulators it started.
  for (auto& g : groups) {
    g.stash.clear();
    g.streamedInputs.clear();
    g.streamedGradients.clear();
    g.activationsIn.clear();
    g.gradientsIn.clear();
    g.outbox.clear();
    for (auto& s : g.slots)
      for (auto& u : s.uses) u.written = false;
  }
}

Expected<StepResult> PhaseTrainer::Impl::runStep() {
  const auto t0 = std::chrono::steady_clock::now();
  StepResult out;
  Error err;
  out.lr = learningRate(&err);
  if (!err.code.empty()) return err;
  if (std::isnan(out.lr)) {
    out.completed = false;
    out.stopReason = "the learning-rate function failed";
    return out;
  }
  if (settings.policies != nullptr && settings.policies->lossScale) {
    // A custom policy decides the scale of the coming step from how the previous one went.
    train::LossScaleState st;
    st.scale = step > 0 ? lastScale : 0;
    st.overflow = lastOverflow;
    st.goodSteps = goodSteps;
    st.phase = plan.name;
    st.step = step + 1;
    const double next = settings.policies->lossScale(st);
    if (std::isnan(next) || !(next > 0)) {
      out.completed = false;
      out.stopReason = "the loss-scaling function failed";
      return out;
    }
    lossScale = next;
  }
  stepKey = subKey(phaseKey, static_cast<std::uint64_t>(step));
  // The host builds the step's global batch; micro batch m of replica r holds
  // samples (r * GA + m) * MB ... + MB - 1 of the step.
  batches = batchesOf(step);
  results.assign(batches.size(), std::vector<HeadResult>(model->layers().size()));
  hasResult.assign(batches.size(), std::vector<char>(model->layers().size(), 0));
  for (auto& g : groups) g.dynamicPeak = 0;
  bnRecorded.clear();
  traffic = StepTraffic{};
  const std::size_t boundaries = static_cast<std::size_t>(std::max(0, S - 1));
  traffic.activations.assign(static_cast<std::size_t>(R), std::vector<double>(boundaries, 0.0));
  traffic.gradients = traffic.activations;
  traffic.reduced.assign(static_cast<std::size_t>(R), std::vector<double>(static_cast<std::size_t>(P * T), 0.0));
  traffic.gathered = traffic.reduced;
  traffic.gatheredStreamed = traffic.reduced;
  traffic.streamed.assign(static_cast<std::size_t>(R), std::vector<ir::StreamingTraffic>(static_cast<std::size_t>(P * T)));
  for (auto& row : traffic.streamed)
    for (std::size_t i = 0; i < row.size(); ++i) row[i].ipu = static_cast<int>(i);
  traffic.batchNorm = traffic.reduced;

  if (phased) {
    // Cancelling abandons the step between two segment runs at the latest.
    runPhased();
    if (settings.cancel != nullptr && settings.cancel->load()) {
      abandonStep();
      out.completed = false;
      return out;
    }
  }
  for (long long c = 0; !phased && c < plan.schedule.cycles(); ++c) {
    if (settings.cancel != nullptr && settings.cancel->load()) {
      abandonStep();
      out.completed = false;
      return out;
    }
    runCycle(plan.schedule.cycle(c));
  }
  updateRunningStatistics();
  reduceGradients();
  out.lossScale = lossScale;
  lastScale = lossScale;
  const bool overflow = overflowed();
  out.skipped = overflow;
  if (!overflow) {
    ++updates;
    float scale = static_cast<float>(1.0 / lossScale);
    if (plan.optimizer.clipNorm > 0) {
      const double norm = gradientNorm();
      const double clip = plan.optimizer.clipNorm / (norm + 1e-6);
      if (clip < 1) {
        scale = static_cast<float>(scale * clip);
        out.clipFactor = clip;
      }
    }
    update(out.lr, scale);
  }
  // Loss scaling: back off on overflow, grow after `interval` clean steps.
  const auto& ls = plan.precision.lossScale;
  lastOverflow = overflow;
  if (settings.policies != nullptr && settings.policies->lossScale) {
    goodSteps = overflow ? 0 : goodSteps + 1;   // the policy sets the next scale before the next step
  } else if (ls.kind == ir::LossScaleKind::Dynamic) {
    if (overflow) {
      lossScale = std::max(1.0, lossScale / ls.factor);
      goodSteps = 0;
    } else if (++goodSteps >= static_cast<long long>(ls.interval)) {
      lossScale *= ls.factor;
      goodSteps = 0;
    }
  } else {
    goodSteps = overflow ? 0 : goodSteps + 1;
  }

  // Loss and metrics, summed in a fixed order.
  double loss = 0;
  std::map<std::string, double> sums;
  for (std::size_t i = 0; i < results.size(); ++i)
    for (std::size_t l = 0; l < results[i].size(); ++l) {
      if (!hasResult[i][l]) continue;
      loss += results[i][l].loss;
      for (const auto& [k, v] : results[i][l].sums) sums[k] += v;
    }
  out.loss = loss;
  for (const char* m : {"mlm", "nsp", "lm"})
    if (sums.count(std::string(m) + "_count") && sums[std::string(m) + "_count"] > 0)
      out.metrics[std::string(m) + "_accuracy"] = sums[std::string(m) + "_correct"] / sums[std::string(m) + "_count"];
  if (sums.count("class_count") && sums["class_count"] > 0) out.metrics["accuracy"] = sums["class_correct"] / sums["class_count"];

  // Memory: the peak of each virtual IPU this step.
  const double cb = fp16Compute ? 2 : 4;
  out.ipuMemoryBytes.assign(staticBytes.size(), 0);
  for (int g = 0; g < P; ++g) {
    double dyn = 0;
    for (int r = 0; r < R; ++r) dyn = std::max(dyn, group(r, g).dynamicPeak);
    for (int t = 0; t < T; ++t) {
      const std::size_t i = static_cast<std::size_t>(g * T + t);
      out.ipuMemoryBytes[i] = staticBytes[i] + dyn * cb / T;
      if (phased) out.ipuMemoryBytes[i] = *std::max_element(phasePeak[i].begin(), phasePeak[i].end());
      peakBytes[i] = std::max(peakBytes[i], out.ipuMemoryBytes[i]);
      const double cap = i < plan.ipus.size() ? plan.ipus[i].capacityBytes : 0;
      std::string during;
      if (phased) {
        const auto worst = std::max_element(phasePeak[i].begin(), phasePeak[i].end());
        during = " while its execution phase " + std::to_string(worst - phasePeak[i].begin()) + " ran";
      }
      if (cap > 0 && out.ipuMemoryBytes[i] > cap)
        return Error{code::kIpuMemory,
                     "virtual IPU " + std::to_string(i) + " needed " + fmtBytes(out.ipuMemoryBytes[i]) + during + " in step " + std::to_string(step + 1) +
                         " of phase `" + plan.name + "`, more than the chip's " + fmtBytes(cap),
                     phased ? "more phases (`phases: k`) put fewer weights on chip at a time; `ipu plan --json` gives each phase's bytes (`phase_bytes`)"
                            : "the activations in flight exceed what the plan assumed; try `recompute: every_layer` or a smaller micro batch",
                     plan.mapping.source};
    }
  }
  ++step;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

// ----------------------------------------------------------- canonical state

Mat PhaseTrainer::Impl::gather(int param, int what) const {
  const auto& spec = model->params()[static_cast<std::size_t>(param)].spec;
  Mat full = Mat::Zero(spec.rows, spec.cols);
  // Shards from the owner's group; chunks from every replica when sharded by RTS.
  const int ownerIpu = model->layers()[static_cast<std::size_t>(model->params()[static_cast<std::size_t>(param)].owner)].ipu;
  const bool chunked = what >= 2 || (what == 1 && rts) || (what == 0 && rtsStreamed);
  for (int r = 0; r < (chunked && rts ? R : 1); ++r) {
    const Group& gr = group(r, ownerIpu);
    for (const auto& s : gr.slots) {
      if (s.param != param) continue;
      Mat block(s.rows, s.cols);
      if (what == 0) {
        block = phased ? s.home : s.value;
      } else if (what == 1) {
        block = s.grad;
      } else {
        block = full.block(s.row0, s.col0, s.rows, s.cols);
        const OptimizerState& st = stateOf(gr, s);
        const std::vector<float>& v = what == 2 ? st.m : what == 3 ? st.v : st.master;
        for (std::size_t i = 0; i < v.size(); ++i) block.data()[s.owned.begin + i] = v[i];
      }
      if ((what == 1 && rts) || (what == 0 && rtsStreamed)) {
        Mat cur = full.block(s.row0, s.col0, s.rows, s.cols);
        for (std::size_t i = s.owned.begin; i < s.owned.end; ++i) cur.data()[i] = block.data()[i];
        block = cur;
      }
      full.block(s.row0, s.col0, s.rows, s.cols) = block;
    }
  }
  return full;
}

void PhaseTrainer::Impl::scatterState(int param, int what, const Mat& canonical) {
  for (auto& gr : groups)
    for (auto& s : gr.slots) {
      if (s.param != param) continue;
      const Mat block = canonical.block(s.row0, s.col0, s.rows, s.cols);
      if (what == 0) {
        Mat& w = phased ? s.home : s.value;
        w = block;
        if (fp16Weights) fp16::roundNearest(w.data(), static_cast<std::size_t>(w.size()));
        continue;
      }
      OptimizerState& st = stateOf(gr, s);
      std::vector<float>& v = what == 2 ? st.m : what == 3 ? st.v : st.master;
      if (v.empty()) continue;
      v.assign(block.data() + s.owned.begin, block.data() + s.owned.end);
    }
}

// ------------------------------------------------------------- the facade

PhaseTrainer::PhaseTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PhaseTrainer::~PhaseTrainer() = default;

Expected<std::unique_ptr<PhaseTrainer>> PhaseTrainer::create(const ir::PhasePlan& phase, const TrainerSettings& settings,
                                                             std::shared_ptr<const TextCorpus> corpus) {
  try {
    return createUnchecked(phase, settings, std::move(corpus));
  } catch (const std::bad_alloc&) {
    return Error{code::kHostMemory, "the host ran out of memory setting up phase `" + phase.name + "`",
                 "`ipu estimate` predicts time and memory on the pod without running the model", phase.source};
  }
}

Expected<std::unique_ptr<PhaseTrainer>> PhaseTrainer::createUnchecked(const ir::PhasePlan& phase, const TrainerSettings& settings,
                                                                      std::shared_ptr<const TextCorpus> corpus) {
  auto impl = std::make_unique<Impl>();
  impl->plan = phase;
  impl->settings = settings;
  auto model = Model::build(impl->plan);
  if (!model) return model.error();
  impl->model = model.value();
  const Family family = impl->model->family();
  const bool textless = family == Family::Mlp || family == Family::Image;
  if (family == Family::Image && settings.images != nullptr) {
    const ImageSet& im = *settings.images;
    const Model& md = *impl->model;
    std::string wrong;
    if (im.channels != md.imageChannels()) wrong = std::to_string(im.channels) + " channels, the model's stem takes " + std::to_string(md.imageChannels());
    else if (im.height != md.imageSize() || im.width != md.imageSize())
      wrong = std::to_string(im.height) + "x" + std::to_string(im.width) + " images, the phase's image_size is " + std::to_string(md.imageSize());
    else if (im.classes != md.classes()) wrong = std::to_string(im.classes) + " classes, the model's classifier has " + std::to_string(md.classes());
    else if (im.count() < 10) wrong = std::to_string(im.count()) + " records, fewer than the 10 needed to hold one out";
    if (!wrong.empty())
      return Error{code::kImageFile, "dataset `" + phase.dataset.name + "` holds " + wrong,
                   "make the file's images and classes match the model, or the model match the file", phase.source};
  }
  if (!textless && corpus == nullptr)
    return Error{code::kDataset, "phase `" + phase.name + "` trains a language model but has no text", "", phase.source};
  SampleSettings ss;
  ss.key = subKey(subKey(static_cast<std::uint64_t>(settings.seed), hashName(settings.runName)), hashName("data:" + phase.name));
  ss.taskKey = subKey(static_cast<std::uint64_t>(settings.seed), 0x7A5CULL);
  ss.seqLen = static_cast<int>(phase.seqLen);
  ss.maskedTokens = static_cast<int>(phase.maskedTokens > 0 ? phase.maskedTokens : std::max(1LL, phase.seqLen * 15 / 100));
  ss.maskProbability = phase.dataset.maskProbability;
  ss.packing = phase.dataset.packing;
  ss.sequencesPerPack = phase.dataset.sequencesPerPack;
  ss.labelSmoothing = phase.labelSmoothing;
  if (!textless && ss.seqLen < 8)
    return Error{code::kUnsupportedModel, "phase `" + phase.name + "` has seq_len " + std::to_string(ss.seqLen), "the emulator needs sequences of at least 8 tokens", phase.source};
  if (impl->model->family() == Family::Gpt && corpus->trainStream.size() < static_cast<std::size_t>(ss.seqLen) * 4)
    return Error{code::kDataset, "the corpus is too short for sequences of " + std::to_string(ss.seqLen) + " tokens", "use more text or a shorter seq_len", phase.source};
  if (phase.precision.lossScale.kind == ir::LossScaleKind::Lua && (settings.policies == nullptr || !settings.policies->lossScale))
    return Error{code::kMissingPolicy, "phase `" + phase.name + "` takes its loss scale from the Lua function `" + phase.precision.lossScale.luaFunction + "`",
                 "the caller must supply Policies::lossScale (the CLI wires the script's hooks)", phase.source};
  impl->data = std::make_unique<SampleSource>(impl->model, std::move(corpus), ss, family == Family::Image ? settings.images : nullptr);
  auto ok = impl->setup();
  if (!ok) return ok.error();
  return std::unique_ptr<PhaseTrainer>(new PhaseTrainer(std::move(impl)));
}

const ir::PhasePlan& PhaseTrainer::phase() const { return impl_->plan; }
const Model& PhaseTrainer::model() const { return *impl_->model; }
long long PhaseTrainer::stepsDone() const { return impl_->step; }
Expected<StepResult> PhaseTrainer::step() {
  try {
    return impl_->runStep();
  } catch (const std::bad_alloc&) {
    return Error{code::kHostMemory, "the host ran out of memory in step " + std::to_string(impl_->step + 1) + " of phase `" + impl_->plan.name + "`",
                 "`ipu estimate` predicts time and memory on the pod without running the model", impl_->plan.source};
  }
}
std::vector<double> PhaseTrainer::ipuMemoryBytes() const { return impl_->peakBytes; }
std::vector<MicroBatch> PhaseTrainer::batches(long long step) const { return impl_->batchesOf(step); }

bool PhaseTrainer::copiesAgree() const {
  // Every replica, and every IPU holding a copy of a tied tensor, must hold the same weights.
  const Impl& im = *impl_;
  // Phased, the weights are in Streaming Memory; with RTS of the weights each
  // replica keeps only its share current, so copies agree within a replica.
  std::map<std::tuple<int, int, int>, const Mat*> first;
  for (const auto& gr : im.groups)
    for (const auto& s : gr.slots) {
      const Mat& w = im.phased ? s.home : s.value;
      auto [it, fresh] = first.emplace(std::make_tuple(s.param, s.shard, im.rtsStreamed ? gr.replica : 0), &w);
      if (!fresh && !(*it->second == w)) return false;
    }
  return true;
}

const StepTraffic& PhaseTrainer::lastStepTraffic() const { return impl_->traffic; }
std::vector<double> PhaseTrainer::ipuParameters() const { return impl_->parameters(); }

double PhaseTrainer::streamingBytes() const {
  double b = 0;
  for (const auto& gr : impl_->groups)
    if (gr.replica == 0) {
      for (const auto& st : gr.streaming) b += st.bytes(impl_->fp16State ? 2 : 4);
      if (impl_->phased)
        for (const auto& s : gr.slots)
          b += static_cast<double>(impl_->rtsStreamed ? s.owned.end - s.owned.begin : static_cast<std::size_t>(s.home.size())) * (impl_->fp16Weights ? 2 : 4);
    }
  return b;
}

std::vector<std::vector<double>> PhaseTrainer::phaseParameterBytes() const { return impl_->phaseParamPeak; }
std::vector<std::vector<double>> PhaseTrainer::phaseMemoryBytes() const { return impl_->phasePeak; }

std::map<std::string, double> PhaseTrainer::evaluate(int samples) const {
  const Impl& im = *impl_;
  std::map<std::string, double> sums;
  double loss = 0;
  int batches = 0;
  const int majority = im.data->majorityLabel();
  const auto& layers = im.model->layers();
  // Phased, the weights are in Streaming Memory: evaluate with a copy of them.
  std::vector<std::vector<Mat>> stored;
  if (im.phased)
    for (int g = 0; g < im.P; ++g) {
      stored.emplace_back();
      for (std::size_t j = 0; j < im.group(0, g).slots.size(); ++j) stored.back().push_back(im.storedWeights(im.group(0, g), j));
    }
  for (int first = 0; first < samples; first += im.MB) {
    const int n = std::min(im.MB, samples - first);
    MicroBatch mb = im.data->make(first, n, true);
    Mat x;
    for (std::size_t li = 0; li < layers.size(); ++li) {
      const ModelLayer& L = layers[li];
      const Group& g = im.group(0, L.ipu);
      Numerics nx(im.fp16Compute, im.fp16Partials, false, subKey(0xE7A1ULL, li));
      RunningBatchNorm bn(im.running[li]);
      nx.setBatchNorm(&bn);
      Saved sv;
      Mat out;
      HeadResult hr;
      L.kernel->forward(x, mb, im.paramsFor(g, static_cast<int>(li), im.phased ? &stored[static_cast<std::size_t>(L.ipu)] : nullptr), nx, sv, out,
                        L.head ? &hr : nullptr);
      if (L.head) {
        loss += hr.loss;
        for (const auto& [k, v] : hr.sums) sums[k] += v;
      } else {
        x = std::move(out);
      }
    }
    for (int l : mb.maskedLabel) sums["mlm_majority"] += l == majority ? 1 : 0;
    for (int l : mb.nextToken) sums["lm_majority"] += l == majority ? 1 : 0;
    for (int l : mb.classLabel) sums["class_majority"] += l == majority ? 1 : 0;
    ++batches;
  }
  std::map<std::string, double> out;
  auto ratio = [&](const std::string& a, const std::string& b) { return sums[b] > 0 ? sums[a] / sums[b] : 0.0; };
  if (sums["mlm_count"] > 0) {
    out["mlm_accuracy"] = ratio("mlm_correct", "mlm_count");
    out["mlm_baseline"] = ratio("mlm_majority", "mlm_count");
  }
  if (sums["nsp_count"] > 0) out["nsp_accuracy"] = ratio("nsp_correct", "nsp_count");
  if (sums["lm_count"] > 0) {
    out["lm_accuracy"] = ratio("lm_correct", "lm_count");
    out["lm_baseline"] = ratio("lm_majority", "lm_count");
  }
  if (sums["class_count"] > 0) {
    out["accuracy"] = ratio("class_correct", "class_count");
    out["baseline"] = ratio("class_majority", "class_count");
  }
  if (batches > 0) out["loss"] = loss / batches;
  return out;
}

NamedTensors PhaseTrainer::weights() const {
  NamedTensors out;
  for (std::size_t p = 0; p < impl_->model->params().size(); ++p)
    out.emplace_back(impl_->model->params()[p].name, impl_->gather(static_cast<int>(p), 0));
  return out;
}

NamedTensors PhaseTrainer::gradients() const {
  NamedTensors out;
  for (std::size_t p = 0; p < impl_->model->params().size(); ++p) {
    Mat g = impl_->gather(static_cast<int>(p), 1);
    g /= static_cast<float>(impl_->lastScale);
    out.emplace_back(impl_->model->params()[p].name, std::move(g));
  }
  return out;
}

Expected<bool> PhaseTrainer::setWeights(const NamedTensors& weights) {
  const auto& params = impl_->model->params();
  for (std::size_t p = 0; p < params.size(); ++p) {
    const Mat* found = nullptr;
    for (const auto& [name, m] : weights)
      if (name == params[p].name) found = &m;
    if (found == nullptr)
      return Error{code::kCheckpoint, "the weights have no tensor `" + params[p].name + "`", "they were saved from a different model", impl_->plan.source};
    if (found->rows() != params[p].spec.rows || found->cols() != params[p].spec.cols)
      return Error{code::kCheckpoint,
                   "tensor `" + params[p].name + "` is " + std::to_string(found->rows()) + "x" + std::to_string(found->cols()) + ", the model's is " +
                       std::to_string(params[p].spec.rows) + "x" + std::to_string(params[p].spec.cols),
                   "the weights were saved from a model of another size", impl_->plan.source};
  }
  for (std::size_t p = 0; p < params.size(); ++p)
    for (const auto& [name, m] : weights)
      if (name == params[p].name) {
        impl_->scatterState(static_cast<int>(p), 0, m);
        if (impl_->master) impl_->scatterState(static_cast<int>(p), 4, m);
      }
  return true;
}

TensorFile PhaseTrainer::checkpoint() const {
  const Impl& im = *impl_;
  TensorFile f;
  f.set("format", "ipu-checkpoint/1");
  f.set("phase", im.plan.name);
  f.set("step", std::to_string(im.step));
  f.set("updates", std::to_string(im.updates));
  std::ostringstream ls;
  ls.precision(17);
  ls << im.lossScale;
  f.set("loss_scale", ls.str());
  f.set("good_steps", std::to_string(im.goodSteps));
  f.set("last_overflow", im.lastOverflow ? "1" : "0");
  std::ostringstream last;
  last.precision(17);
  last << im.lastScale;
  f.set("last_scale", last.str());
  f.set("seed", std::to_string(im.settings.seed));
  for (std::size_t p = 0; p < im.model->params().size(); ++p) {
    const std::string& n = im.model->params()[p].name;
    f.tensors.emplace_back(n, im.gather(static_cast<int>(p), 0));
    if (im.plan.optimizer.moments >= 1) f.tensors.emplace_back("m/" + n, im.gather(static_cast<int>(p), 2));
    if (im.plan.optimizer.moments >= 2) f.tensors.emplace_back("v/" + n, im.gather(static_cast<int>(p), 3));
    if (im.master) f.tensors.emplace_back("master/" + n, im.gather(static_cast<int>(p), 4));
  }
  for (auto& t : im.runningTensors()) f.tensors.push_back(std::move(t));
  return f;
}

NamedTensors PhaseTrainer::runningStatistics() const { return impl_->runningTensors(); }
Expected<bool> PhaseTrainer::setRunningStatistics(const NamedTensors& tensors) { return impl_->setRunningTensors(tensors); }

Expected<bool> PhaseTrainer::restore(const TensorFile& file) {
  Impl& im = *impl_;
  NamedTensors w;
  for (const auto& t : file.tensors)
    if (t.first.find('/') == std::string::npos) w.push_back(t);
  auto ok = setWeights(w);
  if (!ok) return ok.error();
  for (std::size_t p = 0; p < im.model->params().size(); ++p) {
    const std::string& n = im.model->params()[p].name;
    const int kinds[] = {2, 3, 4};
    const char* prefix[] = {"m/", "v/", "master/"};
    for (int k = 0; k < 3; ++k)
      if (const Mat* m = file.find(prefix[k] + n)) im.scatterState(static_cast<int>(p), kinds[k], *m);
  }
  auto statistics = im.setRunningTensors(file.tensors);
  if (!statistics) return statistics.error();
  try {
    im.step = std::stoll(file.get("step", "0"));
    im.updates = std::stoll(file.get("updates", "0"));
    im.lossScale = std::stod(file.get("loss_scale", "1"));
    im.goodSteps = std::stoll(file.get("good_steps", "0"));
    im.lastOverflow = file.get("last_overflow", "0") == "1";
    im.lastScale = std::stod(file.get("last_scale", "1"));
  } catch (...) {
    return Error{code::kCheckpoint, "the checkpoint's step or loss-scale fields are not numbers", "the file may be damaged", im.plan.source};
  }
  return true;
}

}  // namespace ipu::emu
