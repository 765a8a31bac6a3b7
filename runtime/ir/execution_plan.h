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
  std::string op;          // the kernel the emulator runs: "attention", "ffn", "embedding", ...
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
};

struct Stage {
  int index = 0;
  int ipu = 0;
  std::vector<int> layers;
  int stashDepth = 1;       // micro batches in flight between its forward and backward
};

enum class Recompute { None, EveryLayer, Stage };
const char* name(Recompute r);

struct Mapping {
  std::string name;
  SourceRef source;
  int shard = 1;            // t
  int pipelineIpus = 1;     // p
  int replicas = 1;         // r
  int phases = 1;           // phased execution sub-graphs per IPU
  std::string pipelineKind; // "explicit", "balanced", "single"
  Recompute recompute = Recompute::None;
  bool optimizerStateStreaming = false;
  bool weightsStreaming = false;
  bool rtsWeights = false;
  bool rtsOptimizerState = false;
  std::vector<double> availableMemoryProportion;  // per pipeline IPU
};

struct LossScale {
  std::string kind = "none";  // none, static, dynamic, lua
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
  std::string kind;         // sgd, momentum, adam, adamw, lamb, lars
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-6, weightDecay = 0, momentum = 0;
  double trustCoefficient = 0.001, clipNorm = 0;
  bool biasCorrection = true, nesterov = false;
  std::vector<std::string> exclude;   // parameter classes without weight decay / trust ratio
  int moments = 0;                    // state tensors per parameter
};

struct LrSchedule {
  double base = 0;          // as written
  double per = 0;           // linear scaling rule: lr = base * global_batch / per (0: off)
  double peak = 0;          // after scaling
  double warmupSteps = 0;
  std::string decay = "constant";  // constant, linear, cosine, poly, exponential
  double end = 0;
  double power = 1;
  std::string luaFunction;  // custom schedule (`lr: lua f`), empty if none
};

struct Batch {
  long long microBatch = 0;
  long long gradientAccumulation = 0;
  long long replicas = 0;
  long long globalBatch = 0;
  std::string derived;       // which of the three was derived
};

struct Dataset {
  std::string name;
  std::string kind;          // synthetic, text, files
  std::string path;
  double samples = 0;        // 0 when unknown
  bool packing = false;
  double sequencesPerPack = 1;  // average real sequences in one packed sample
  double maskProbability = 0.15;
};

struct Communication {
  double boundaryBytesPerMicroBatch = 0;  // largest activation crossing a stage boundary
  double allReduceBytesPerIpu = 0;        // gradients reduced across replicas per step
  double rtsGatherBytesPerIpu = 0;        // RTS all-gathers per step
  double streamingBytesPerStepPerIpu = 0; // Streaming Memory traffic per step
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
  std::string software;      // framework and SDK the script declares ("" when unstated)
  long long steps = 0;
  double epochs = 0;         // when given in epochs
  double parameters = 0;     // unique parameters of the model
  std::vector<Layer> layers;
  std::vector<Stage> stages;
  std::vector<Ipu> ipus;     // the IPUs of one replica (all replicas are identical)
  int ipusUsed = 0;
  int pipelineCycles = 0;    // per optimiser step: GA + 2S - 2
  Communication communication;
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
