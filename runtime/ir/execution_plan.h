// The ExecutionPlan: what `ipu plan` compiles a script into, and all that the
// runtime (cost model, emulator) ever sees of it. Plain data, immutable once
// built: it can be printed, diffed, serialised and handed to either backend.
// Every layer carries the source location it came from, so a runtime error
// can point back into the script.
//
// Units: bytes, FLOP, elements (of the tensor's dtype), per micro batch unless
// a name says otherwise. The JSON form is documented in docs/plan-json.md.
#pragma once

#include <string>
#include <vector>

#include "runtime/ir/json.h"
#include "runtime/ir/kinds.h"
#include "runtime/ir/schedule.h"
#include "runtime/model/hardware.h"

namespace ipu::ir {

struct SourceRef {
  std::string file;
  unsigned line = 0;
  unsigned column = 0;
};

enum class DType { FP16, FP32 };
const char* name(DType t);
inline double bytesOf(DType t) { return t == DType::FP16 ? 2.0 : 4.0; }

// Forward FLOPs of a layer for one micro batch, by the kind of work, because
// each kind runs at a different efficiency on the chip.
struct Flops {
  double matmul = 0;
  double attention = 0;   // QK^T and AV
  double conv = 0;
  double elementwise = 0; // normalisation, activations, softmax, residuals
  double total() const { return matmul + attention + conv + elementwise; }
};

struct Attribute {
  std::string name;
  double number = 0;
  std::string text;       // non-empty for string attributes
};

struct Layer {
  std::string name;        // "encoder[3].attention"
  LayerOp op = LayerOp::Other;  // the kernel the emulator runs: attention, ffn, embedding, ...
  std::string otherOp;     // the op's name when `op` is Other (a user's op), else ""
  std::string definition;  // the stdlib/user `layer` template it was made from
  SourceRef source;
  double params = 0;       // own parameters, excluding tied ones
  std::string tiedTo;      // layer whose weights it shares ("" if none)
  double tiedParams = 0;   // parameters shared with `tiedTo`
  bool shardable = true;   // can be split over `shard: t` IPUs
  Flops forward;
  Flops backward;
  double activationElements = 0;  // kept for the backward pass when not recomputed
  double inputElements = 0;       // the layer's input (a recomputation checkpoint)
  double outputElements = 0;      // what flows to the next layer
  double workspaceElements = 0;   // matmul/conv partials while the layer runs
  double codeBytes = 0;           // vertex state and exchange code for one instance
  double ops = 1;                 // compute steps of one forward pass (each pays the chip's op latency)
  std::vector<Attribute> attributes;  // the template's arguments (hidden, heads, ...)
  int ipu = 0;             // pipeline IPU (group of `shard` IPUs) it is placed on
  int stage = 0;           // pipeline stage in data-flow order
  int phase = 0;           // phased-execution sub-graph on its IPU
};

// The op as the layer definition names it: what the plan's JSON writes.
inline std::string opName(const Layer& l) { return l.op == LayerOp::Other ? l.otherOp : nameOf(l.op); }
// Sets `op` (and `otherOp`, for a name the toolchain does not know) from the
// name a layer definition gives.
void setOpName(Layer& l, const std::string& name);

// The channels of each batch-norm unit of a layer, in forward order: the
// standard library's conv layers with `norm` "batch" (the default): a
// conv_stem has one, a bottleneck three and a basic_block two, plus one on
// the projection shortcut when the stride or the width changes. Empty for
// other layers, group norm, and attributes that are not whole numbers. The
// emulator's kernels declare the same units (a test holds them together).
std::vector<int> batchNormChannels(const Layer& l);

struct MemoryBreakdown {
  double weights = 0;
  double optimizerState = 0;        // moments, and fp32 master weights when kept
  double gradientAccumulators = 0;
  double activations = 0;           // stash of micro batches in flight + recomputation working set
  double code = 0;
  double exchange = 0;              // inter-IPU send/receive buffers
  double temporaries = 0;           // matmul/conv partials, capped by availableMemoryProportion
  double other() const { return code + exchange + temporaries; }
  double total() const { return weights + optimizerState + gradientAccumulators + activations + other(); }
};

struct Ipu {
  int index = 0;       // within one replica: ipu * shard + shardIndex
  int ipu = 0;         // pipeline IPU (the `ipu N` of the script)
  int shard = 0;
  std::vector<int> layers;         // indices into PhasePlan::layers
  MemoryBreakdown memory;
  double capacityBytes = 0;
  bool fits = true;
  double streamingBytes = 0;       // Streaming Memory this IPU uses
  double streamingCapacityBytes = 0;
  int phases = 1;                  // phased-execution sub-graphs
  // Parameters whose weights, gradients and optimizer state it holds: its
  // layers' own (split over the shard group when shardable), and its copy of
  // weights tied to a layer on another IPU. The update, the gradient
  // reduction and the streamed state are sized by it.
  double parameters = 0;
  // Phased execution (runtime/ir/phased.h): per phase of this IPU, the bytes
  // its weights and gradient accumulators occupy while it runs at most (the
  // running segment's weights, the prefetched next one's, and its
  // accumulators in the backward run). Empty when not phased.
  std::vector<double> phaseBytes;
};

struct Stage {
  int index = 0;
  int ipu = 0;
  std::vector<int> layers;
  int stashDepth = 1;       // micro batches in flight between its forward and backward
};

struct Mapping {
  std::string name;
  SourceRef source;
  int shard = 1;            // t
  int pipelineIpus = 1;     // p
  int replicas = 1;         // r
  int phases = 1;           // phased execution sub-graphs per IPU
  PipelineKind pipelineKind = PipelineKind::Single;
  Recompute recompute = Recompute::None;
  bool optimizerStateStreaming = false;
  bool weightsStreaming = false;
  bool rtsWeights = false;
  bool rtsOptimizerState = false;
  std::vector<double> availableMemoryProportion;  // per pipeline IPU; none declared: kDefaultAvailableMemoryProportion
  static constexpr double kDefaultAvailableMemoryProportion = 0.6;
  // Distributed batch norm: how many consecutive replicas share batch-norm
  // statistics (micro batch m of replicas k*n .. k*n + n - 1);
  // kAllReplicas: every replica. 1 is per-replica batch norm.
  static constexpr int kAllReplicas = 0;
  int batchNormReplicas = 1;
  // The replicas of one batch-norm group, resolved (at least 1).
  int batchNormGroup() const { return batchNormReplicas == kAllReplicas ? (replicas > 1 ? replicas : 1) : (batchNormReplicas > 1 ? batchNormReplicas : 1); }
};

struct LossScale {
  LossScaleKind kind = LossScaleKind::None;
  std::string luaFunction;    // lua: the policy (`loss_scale: lua f`)
  double value = 1;           // static value, or dynamic initial value
  double factor = 2;          // dynamic: growth/backoff factor
  double interval = 2000;     // dynamic: steps without overflow before growing
};

struct Precision {
  std::string name;
  DType compute = DType::FP32;
  DType weights = DType::FP32;
  bool masterWeights = false;     // an fp32 master copy beside fp16 weights
  DType partials = DType::FP32;
  DType accumulators = DType::FP32;
  DType optimizerState = DType::FP32;
  bool stochasticRounding = false;
  LossScale lossScale;
};

struct Optimizer {
  std::string name;
  OptimizerKind kind = OptimizerKind::Sgd;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-6, weightDecay = 0, momentum = 0;
  double trustCoefficient = 0.001, clipNorm = 0;
  bool biasCorrection = true, nesterov = false;
  std::vector<ParamClass> exclude;    // parameter classes without weight decay / trust ratio
  int moments = 0;                    // state tensors per parameter
};

struct LrSchedule {
  double base = 0;          // as written
  double per = 0;           // linear scaling rule: lr = base * global_batch / per (0: off)
  double peak = 0;          // after scaling
  double warmupSteps = 0;
  LrDecay decay = LrDecay::Constant;
  double end = 0;
  double power = 1;
  std::string luaFunction;  // custom schedule (`lr: lua f`), empty if none
};

struct Batch {
  long long microBatch = 0;
  long long gradientAccumulation = 0;
  long long replicas = 0;
  long long globalBatch = 0;
  DerivedBatch derived = DerivedBatch::None;  // which of the three was derived
};

struct Dataset {
  std::string name;
  DatasetKind kind = DatasetKind::Synthetic;
  std::string path;
  double samples = 0;        // 0 when unknown
  bool packing = false;
  double sequencesPerPack = 1;  // average real sequences in one packed sample
  double maskProbability = 0.15;
  // The host's input pipeline, per sample (0: not stated, not priced):
  // CPU time on one core to read, decode and augment it, and the bytes it
  // takes in storage.
  double hostWorkSeconds = 0;
  double sampleBytes = 0;
};

// What one optimizer step moves, per replica (the replicas are identical),
// in bytes. The planner derives it once; the cost model prices it and the
// emulator moves exactly this much (tests/emulator/traffic_test.cpp).

// Between stage `from` and `from + 1`, for each micro batch: the activation
// the forward pass sends down the pipeline and its gradient, which the
// backward pass sends back. It is the sending stage's last layer's output.
struct StageBoundary {
  int from = 0;
  double activationBytes = 0;   // forward, per micro batch
  double gradientBytes = 0;     // backward, per micro batch
};

enum class CollectiveKind { AllReduce, ReduceScatter, AllGather };
const char* name(CollectiveKind k);
enum class CollectiveTensors {
  Gradients,        // the step's accumulated gradients, before the update
  UpdatedWeights,   // RTS of the optimizer state: each replica updated its share
  StreamedWeights,  // RTS of streamed weights: each replica keeps a share in Streaming Memory;
                    // `bytes` sums the gathers of a step (one per segment run)
  BatchNormStatistics,  // distributed batch norm: per-channel sums inside the forward and backward passes
  // Tensor sharding (`shard: t > 1`): among the t IPUs of a shard group, not
  // the replicas. Each shardable layer's partial output is summed by an
  // all-reduce in every forward pass and recomputation (ShardActivations),
  // its partial input gradient by another in the backward pass (ShardGradients).
  ShardActivations,
  ShardGradients,
};
const char* name(CollectiveTensors t);

// One collective across the replicas, on one IPU of each replica: `bytes` is
// the buffer every replica enters (the ring moves 2(r-1)/r of it per replica
// for an all-reduce, (r-1)/r for a reduce-scatter or an all-gather).
// Batch norm's statistics are many small all-reduces among the replicas of
// a batch-norm group (Mapping::batchNormGroup): `bytes` is their total in a
// step and `operations` how many there are (3 per unit and micro batch).
// The shard group's all-reduces (ShardActivations, ShardGradients) run among
// the t IPUs of one replica's shard group: `bytes` is the total buffer this
// IPU enters in a step (every micro batch), `operations` how many
// all-reduces that is (one per shardable layer, pass and micro batch), each
// paying the ring's latency.
struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  CollectiveTensors tensors = CollectiveTensors::Gradients;
  int ipu = 0;          // Ipu::index
  double bytes = 0;
  double operations = 1;
};

// One IPU's Streaming Memory traffic per step (reads plus writes). Weights
// stream once per step, not once per micro batch: phased execution runs every
// micro batch of the step through a sub-graph while its weights are on chip
// (PopART's batch serialisation), which is what makes it affordable; the
// activations each layer keeps for its backward pass go out and back for
// every micro batch.
// The rule is runtime/ir/phased.h: each segment's weights come in for its
// forward run and again for its backward run (divided by r with RTS of the
// weights, whose other shares are all-gathered, CollectiveTensors::StreamedWeights);
// its accumulators go out after its backward run; every layer's input goes out
// and comes back for its backward pass, and between two segments of a stage
// the activation also comes back for the forward run and its gradient goes
// out and back.
struct StreamingTraffic {
  int ipu = 0;                  // Ipu::index
  double optimizerState = 0;    // read and written once, during the update
  double weights = 0;           // phased: in for the forward and again for the backward
  double gradients = 0;         // phased: out once
  double activations = 0;       // phased: each layer's input, out and back per micro batch
  double update = 0;            // phased: the update's reads of weights and gradients, and its write of the weights
  double phased() const { return weights + gradients + activations + update; }
};

struct Traffic {
  std::vector<StageBoundary> boundaries;    // one per pair of neighbouring stages, in order
  std::vector<Collective> collectives;      // none with one replica
  std::vector<StreamingTraffic> streaming;  // the IPUs that use Streaming Memory
  // Bytes crossing stage boundaries in one step (both directions, every micro batch).
  double stageExchangeBytes(long long microBatches) const;
};

struct PhasePlan {
  std::string name;
  std::string from;          // phase whose result it starts from ("" if none)
  SourceRef source;
  std::string model;
  hw::Pod pod;
  Mapping mapping;
  Precision precision;
  Optimizer optimizer;
  LrSchedule lr;
  Dataset dataset;
  Batch batch;
  long long seqLen = 0, maskedTokens = 0, imageSize = 0;
  double labelSmoothing = 0;  // classifier losses' target smoothing (0: one-hot)
  std::string software;      // framework and SDK the script declares ("" when unstated)
  long long deviceIterations = 1;  // optimizer steps the device runs per round trip to the host
  long long steps = 0;
  double epochs = 0;         // when given in epochs
  double parameters = 0;     // unique parameters of the model
  std::vector<Layer> layers;
  std::vector<Stage> stages;
  std::vector<Ipu> ipus;     // the IPUs of one replica (all replicas are identical)
  int ipusUsed = 0;
  PipelineSchedule schedule; // built by the planner from the stages, GA and recomputation
  Traffic traffic;
  bool fits = true;
};

struct RunPlan {
  std::string name;
  SourceRef source;
  std::vector<PhasePlan> phases;
  std::vector<std::string> hooks;
  long long seed = 0;
};

struct ExecutionPlan {
  std::vector<RunPlan> runs;
};

Json toJson(const ExecutionPlan& plan);
Json toJson(const PhasePlan& phase);

}  // namespace ipu::ir
