// PhaseTrainer's state and the parts that act on it (the class's interface
// is runtime/emulator/trainer.h; nothing outside runtime/emulator/trainer*
// includes this). One struct, because every part reads the same groups and
// slots; its member functions are split by concern, one file each:
//
//   trainer/setup.cpp             the buffers of every replica, from the plan; per-layer helpers
//   trainer/pipeline.cpp          the pipeline executor: a schedule cycle's stages, the exchange
//   trainer/phased_execution.cpp  phased execution: segments, weights through Streaming Memory
//   trainer/batch_norm.cpp        batch norm's exchange, recorded and running statistics
//   trainer/reduction.cpp         gradients summed over uses and across replicas; overflow, norm
//   trainer/update.cpp            the optimizer update (chunks, Streaming Memory, RTS all-gather)
//   trainer/checkpoint.cpp        canonical state: weights, optimizer state, checkpoints
//   trainer.cpp                   a step from start to end, evaluation, the facade
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/base/thread_pool.h"
#include "runtime/emulator/trainer.h"
#include "runtime/emulator/trainer/batch_norm.h"
#include "runtime/emulator/trainer/state.h"
#include "runtime/ir/phased.h"

namespace ipu::emu {

namespace trainer {
// "12.3 MB", for the memory errors (setup.cpp).
std::string fmtBytes(double b);
}  // namespace trainer

struct PhaseTrainer::Impl {
  using Group = trainer::Group;
  using Slot = trainer::Slot;
  using Key2 = trainer::Key2;

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
  trainer::BatchNormExchange bnExchange;
  std::unique_ptr<trainer::ComputeTurns> bnTurns;
  std::mutex bnRecordedMutex;
  std::map<std::tuple<int, int, int, int>, BatchNormStatistics> bnRecorded;
  std::vector<std::vector<trainer::RunningStatistics>> running;

  // Instances (instances.h, docs/run.md "Across processes and hosts"): this
  // process computes the passes of replicas [firstLocal, firstLocal +
  // localReplicas) only, yet holds every replica's buffers: the other
  // replicas' gradients arrive before the reduction (gatherGradients), which
  // then runs the very same ring on every instance, so the sums, the update
  // and the checkpoints are those of one process. Without RTS an instance
  // updates only its own replicas (update()); checkpoints and evaluation
  // read its first replica.
  Instances* instances = nullptr;   // null: one process runs every replica
  int firstLocal = 0, localReplicas = 1;
  bool local(int r) const { return r >= firstLocal && r < firstLocal + localReplicas; }
  int ownerOf(int r) const { return r / localReplicas; }
  void gatherGradients();
  // Its send and receive buffers, kept from step to step: fresh ones cost
  // page faults on every step of a run.
  std::vector<float> gatherMine, gatherAll;
  // Without RTS: where another instance's replica r's slots of IPU g arrived
  // in gatherAll ([r * P + g][slot]), which the ring reads in place.
  std::vector<std::vector<float*>> gathered;
  float* gradientOf(int r, int g, std::size_t slot);
  void gatherResults();
  void gatherBatchNormStatistics();

  Group& group(int r, int g) { return groups[static_cast<std::size_t>(r * P + g)]; }
  const Group& group(int r, int g) const { return groups[static_cast<std::size_t>(r * P + g)]; }
  template <class F>
  void forIpusOf(const Group& g, const Slot& s, F f) const {
    for (int t = 0; t < T; ++t)
      if (s.shard < 0 || s.shard == t) f(static_cast<std::size_t>(g.ipu * T + t));
  }
  OptimizerState& stateOf(Group& g, Slot& s) { return s.streamed >= 0 ? g.streaming[static_cast<std::size_t>(s.streamed)] : s.state; }
  const OptimizerState& stateOf(const Group& g, const Slot& s) const {
    return s.streamed >= 0 ? g.streaming[static_cast<std::size_t>(s.streamed)] : s.state;
  }

  // setup.cpp: the buffers of every replica, initialised from the seed; the
  // helpers every pass uses to run a layer on a group.
  Expected<bool> setup();
  void buildSlots(Group& g);
  void computeStaticBytes();
  std::vector<MicroBatch> batchesOf(long long n) const;
  Numerics numerics(int replica, int micro, int layer, int pass) const;
  // `weights`: per slot of the group, the weights to use instead of the slots' own.
  ShardParams paramsFor(const Group& g, int layer, const std::vector<Mat>* weights = nullptr) const;
  void accumulate(Group& g, int layer, ShardGrads& grads, int gmb);

  // pipeline.cpp: the pipeline executor, one schedule cycle at a time.
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
  // Adds what a pass of a layer on group `g` moved among its shard group's
  // IPUs (every IPU of the group enters the same buffers): to the forward
  // passes' and recomputations' count, or the backward passes'.
  void countShardExchange(const Group& g, const ShardExchange& moved, bool backward);

  // phased_execution.cpp: one step's segment runs, and what they hold and move.
  void runPhased();
  void runSegment(Group& g, int segment, bool backward);
  std::vector<std::size_t> slotsOf(const Group& g, const ir::PhaseSegment& seg) const;
  void loadWeights(Group& g, const std::vector<std::size_t>& slots);
  Mat storedWeights(const Group& g, std::size_t slot) const;

  // batch_norm.cpp: every group of a cycle on a thread (distributed batch
  // norm), the statistics recorded for recomputation, the running statistics.
  void runGroups(std::size_t count, const std::function<void(std::size_t)>& task);
  void recordBatchNorm(int replica, int micro, int layer, int unit, BatchNormStatistics stats);
  const BatchNormStatistics& recordedBatchNorm(int replica, int micro, int layer, int unit);
  void updateRunningStatistics();
  NamedTensors runningTensors() const;
  Expected<bool> setRunningTensors(const NamedTensors& tensors);

  // reduction.cpp: the gradients, summed in each replica and across replicas.
  void reduceGradients();
  // Adds, for every replica and each of its IPUs, the bytes of the slots it
  // enters into a collective across replicas: a slot split over the shard
  // group belongs to its shard's IPU, a whole one to every IPU of the group.
  void countCollective(std::vector<std::vector<double>>& into, double bytesPerElement) const;
  std::vector<double> parameters() const;
  bool overflowed() const;
  double gradientNorm() const;

  // update.cpp: the optimizer step on every slot.
  void update(double lr, float gradScale);

  // checkpoint.cpp: canonical tensors from and to the slots.
  Mat gather(int param, int what) const;   // 0 value, 1 grad, 2 m, 3 v, 4 master
  void scatterState(int param, int what, const Mat& canonical);

  // trainer.cpp: a step from start to end.
  double learningRate(Error* error) const;
  Expected<StepResult> runStep();
  void abandonStep();
};

}  // namespace ipu::emu
