// One training phase executed on virtual IPUs: `r` replicas, each a pipeline
// of `p` shard groups of `t` IPUs, holding the buffers a real IPU would hold
// (weights, gradient accumulators, optimizer state on chip or in Streaming
// Memory, the stash of micro batches in flight, exchange buffers). A step is
// the pipeline's cycles as BSP supersteps, then the gradient reduction across
// replicas (ring all-reduce, or reduce-scatter with replicated tensor
// sharding), loss scaling and the optimizer.
//
// The trainer also exposes the model's state in canonical form (one tensor
// per parameter, whatever the mapping), which is what checkpoints, weight
// export and the mapping-invariance tests compare.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/emulator/data.h"
#include "runtime/emulator/error.h"
#include "runtime/emulator/instances.h"
#include "runtime/emulator/model.h"
#include "runtime/emulator/tensor_file.h"
#include "runtime/ir/execution_plan.h"
#include "runtime/train/events.h"

namespace ipu::emu {

struct TrainerSettings {
  long long seed = 0;
  int hostThreads = 1;
  const std::atomic<bool>* cancel = nullptr;   // checked between pipeline cycles
  const train::Policies* policies = nullptr;
  std::string runName;                         // with the phase, names the data and rounding streams
  std::shared_ptr<const ImageSet> images;      // an image model's file dataset (null: synthetic images)
  // The instances of an MPI job (instances.h): this process computes only
  // its share of the replicas; null or one instance: all of them.
  std::shared_ptr<Instances> instances;
};

struct StepResult {
  bool completed = true;       // false: cancelled, or a caller's policy failed; nothing changed
  std::string stopReason;      // why it did not complete ("" when cancelled)
  double loss = 0;
  double lr = 0;
  double lossScale = 1;        // the scale this step used
  bool skipped = false;        // overflow: no update
  double clipFactor = 1;       // clip_norm's factor on the gradients (1: none); gradients() is before it
  double seconds = 0;
  std::map<std::string, double> metrics;   // mlm_accuracy, nsp_accuracy, lm_accuracy, accuracy
  std::vector<double> ipuMemoryBytes;      // per IPU of one replica: peak of this step
};

using NamedTensors = std::vector<std::pair<std::string, Mat>>;

// What one step moved between virtual IPUs, counted where the trainer moves
// it (bytes in the plan's precision); [replica][...], since every replica
// moves its own. The plan's ir::Traffic says how much it should be.
struct StepTraffic {
  std::vector<std::vector<double>> activations;  // [replica][boundary]: forward, stage b to b + 1, every micro batch
  std::vector<std::vector<double>> gradients;    // [replica][boundary]: backward, stage b + 1 to b
  std::vector<std::vector<double>> reduced;      // [replica][IPU]: gradients entered into the reduction across replicas
  std::vector<std::vector<double>> gathered;     // [replica][IPU]: updated weights all-gathered (RTS)
  std::vector<std::vector<double>> batchNorm;    // [replica][IPU]: batch norm's sums all-reduced across replicas (fp32)
  // [replica][IPU]: tensor sharding's all-reduces among the IPUs of a shard
  // group (the plan's ShardActivations and ShardGradients): the bytes of the
  // buffers the IPU entered and how many all-reduces, in the forward passes
  // and recomputations, and in the backward passes.
  struct ShardReductions {
    double bytes = 0, operations = 0;
  };
  std::vector<std::vector<ShardReductions>> shardActivations, shardGradients;
  // Streaming Memory, [replica][IPU]: bytes read and written, by what (the
  // fields of the plan's ir::StreamingTraffic; with RTS, this replica's share).
  std::vector<std::vector<ir::StreamingTraffic>> streamed;
  // [replica][IPU]: phased execution with RTS of the weights: the buffers of
  // the all-gathers that assemble each segment's weights from the replicas' shares.
  std::vector<std::vector<double>> gatheredStreamed;
};

class PhaseTrainer {
 public:
  // `corpus` is the text for BERT and GPT models (null for an MLP).
  static Expected<std::unique_ptr<PhaseTrainer>> create(const ir::PhasePlan& phase, const TrainerSettings& settings,
                                                        std::shared_ptr<const TextCorpus> corpus);
  ~PhaseTrainer();
  PhaseTrainer(const PhaseTrainer&) = delete;
  PhaseTrainer& operator=(const PhaseTrainer&) = delete;

  const ir::PhasePlan& phase() const;
  const Model& model() const;
  long long stepsDone() const;
  // Run the next optimizer step. Errors: a virtual IPU out of memory (IPU5007),
  // a missing `lua` learning-rate function (IPU5008). A policy returning NaN
  // (train::Policies) stops before the step: completed is false, with a reason.
  Expected<StepResult> step();
  // Held-out metrics over `samples` samples (forward only, replica 0):
  // mlm_accuracy and mlm_baseline (the majority token), nsp_accuracy,
  // lm_accuracy and lm_baseline, or accuracy and baseline for an MLP.
  std::map<std::string, double> evaluate(int samples) const;

  // The host data of a step: micro batch m of replica r is element r * GA + m.
  std::vector<MicroBatch> batches(long long step) const;

  // Canonical state.
  NamedTensors weights() const;
  NamedTensors gradients() const;      // the last step's reduced gradients, unscaled
  Expected<bool> setWeights(const NamedTensors& weights);   // all parameters, by name
  // Batch norm's running statistics (buffers, not parameters: no gradient,
  // no optimizer): "running_mean/<layer>.<unit>" and "running_var/...", 1 x
  // channels each, in layer order. Setting takes those it finds by name.
  NamedTensors runningStatistics() const;
  Expected<bool> setRunningStatistics(const NamedTensors& tensors);
  TensorFile checkpoint() const;       // weights, running statistics, optimizer state, loss scale, step
  Expected<bool> restore(const TensorFile& file);
  // Whether every replica and every copy of a tied tensor holds the same weights.
  bool copiesAgree() const;
  // Bytes on each virtual IPU of one replica (peak so far), and what lives in Streaming Memory.
  std::vector<double> ipuMemoryBytes() const;
  double streamingBytes() const;
  // Phased execution (runtime/ir/phased.h), [IPU of a replica][phase], peaks
  // so far: the bytes the phase's weights (running and prefetched) and
  // gradient accumulators occupied, which the plan's ir::Ipu::phaseBytes
  // predicts; and all the IPU held while the phase ran. Empty when not phased.
  std::vector<std::vector<double>> phaseParameterBytes() const;
  std::vector<std::vector<double>> phaseMemoryBytes() const;
  // The last step's traffic, and the parameters each IPU of a replica holds
  // (a tensor split over the shard group counts its shard, a whole one counts
  // on every IPU of the group).
  const StepTraffic& lastStepTraffic() const;
  std::vector<double> ipuParameters() const;

  struct Impl;

 private:
  explicit PhaseTrainer(std::unique_ptr<Impl> impl);
  static Expected<std::unique_ptr<PhaseTrainer>> createUnchecked(const ir::PhasePlan& phase, const TrainerSettings& settings,
                                                                 std::shared_ptr<const TextCorpus> corpus);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ipu::emu
