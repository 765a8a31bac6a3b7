// A layer kernel: the forward and backward computation of one `op` of the
// standard library (stdlib/layers.ipu), in Eigen, on one micro batch. Shapes
// come from the layer's attributes in the plan. A kernel owns no weights: it
// declares its parameters, and the executor hands it the buffers of the
// virtual IPUs that hold them, so the same kernel runs on any mapping.
//
// Tensor sharding: attention, FFN and grouped FFN split over the `t` IPUs of a
// shard group (heads, intermediate units, groups); the kernel computes each shard's part on that
// shard's weights and sums the partial results with a ring all-reduce across
// the shards' buffers, where Megatron-style sharding needs it. Other kernels
// are replicated on the shard group.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/emulator/error.h"
#include "runtime/emulator/numerics.h"
#include "runtime/ir/execution_plan.h"

namespace ipu::emu {

// Parameter classes of an optimizer's `exclude` list (runtime/ir/kinds.h).
using ir::ParamClass;

// How a parameter splits over the t IPUs of a shard group.
enum class ShardAxis { None, Rows, Cols };

struct ParamSpec {
  std::string name;        // within the layer: "wq", "ln.gamma", ...
  Eigen::Index rows = 0, cols = 0;   // full (unsharded) shape
  ParamClass cls = ParamClass::Weight;
  ShardAxis axis = ShardAxis::None;
  float initStd = 0;       // normal(0, initStd) when > 0, else constant initValue
  float initValue = 0;
  std::string tiedTo;      // "embedding.word": a parameter of another layer, used here too
};

// The host's data for one micro batch. Row indices count tokens (sample b,
// position p is row b * seq + p) or samples for non-sequence models.
struct MicroBatch {
  int samples = 0;
  int seq = 0;
  std::vector<int> tokens, segments, positions;
  std::vector<int> sequenceIds;      // a token attends only to tokens of the same id (-1: padding)
  std::vector<int> maskedRow, maskedLabel;     // MLM predictions
  std::vector<int> classifiedRow, classLabel;  // NSP (row of each [CLS]) or classification (sample)
  std::vector<int> nextToken;        // causal LM label per row, -1 where none
  Mat features;                      // inputs of an MLP (samples x inputs), or images (samples x C*H*W, channel-major)
  double labelSmoothing = 0;         // the phase's label_smoothing, for classifier losses that apply it
  // Losses are means over the whole global batch: each micro batch divides
  // by these global counts, so the gradients do not depend on the mapping.
  double mlmCount = 1, classCount = 1, lmCount = 1;
};

// What a kernel keeps from its forward pass for the backward pass.
struct Saved {
  std::vector<Mat> mats;
  double elements() const;
};

// A loss layer's result for one micro batch: the loss (already divided by the
// global count) and counts for accuracy metrics.
struct HeadResult {
  double loss = 0;
  std::map<std::string, double> sums;  // e.g. mlm_correct, mlm_count
};

// The parameters of one layer on each shard of its group: params[s][k] is
// parameter k (in params() order) as shard s holds it. Unsharded parameters
// are the same buffer for every shard.
using ShardParams = std::vector<std::vector<const Mat*>>;
using ShardGrads = std::vector<std::vector<Mat>>;  // gradients, same layout; filled by backward

// Batch norm's statistics, per channel, as one batch-norm unit normalised
// with them: `mean` and `rstd` (1 / sqrt(var + eps)) are what normalisation
// used; `count` values per channel entered them (over every replica sharing
// the statistics), and `squares` is the sum of their squared deviations from
// `mean` (in double), from which running statistics take the variance.
struct BatchNormStatistics {
  double count = 0;
  std::vector<float> mean, rstd;
  std::vector<double> squares;
};

// PyTorch's BatchNorm2d epsilon (and group norm's).
inline constexpr float kBatchNormEpsilon = 1e-5f;

// Where a batch-norm unit gets its statistics from: the executor's side of
// batch norm. A kernel without one (Numerics::batchNorm() null) normalises
// over its own micro batch. The executor hands one per layer call; the units
// of the call ask it in their forward order (a counter inside), which is the
// order of Kernel::batchNorms().
class BatchNormContext {
 public:
  enum class Mode {
    Train,       // normalise over the batch; statistics span the replicas of the context's group
    Recompute,   // a recomputed forward pass: the statistics the forward pass used, unchanged
    Evaluate,    // held-out evaluation: the running statistics
  };
  virtual ~BatchNormContext() = default;
  virtual Mode mode() const = 0;
  // Train: replaces `sums` by their element-wise sum over the replicas that
  // share statistics, added in replica order (identity with one). Every
  // replica of the group calls it with the same length at the same point.
  virtual void allReduce(std::vector<double>& sums) = 0;
  // Train: what the next unit normalised with (kept for recomputation and
  // for the running statistics).
  virtual void record(BatchNormStatistics stats) = 0;
  // Recompute: what the next unit recorded; Evaluate: its running
  // statistics (count and squares left empty).
  virtual const BatchNormStatistics& next() = 0;
};

// A batch-norm unit of a layer: its name within the layer ("conv1.norm") and
// its channels.
struct BatchNormUnit {
  std::string name;
  int channels = 0;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::vector<ParamSpec> params() const = 0;
  // A head reads the trunk and produces a loss; the rest transform the trunk.
  virtual bool isHead() const { return false; }
  // Whether it splits over shards (otherwise replicated on the group).
  virtual bool sharded() const { return false; }
  // Its batch-norm units, in forward order (none for most kernels).
  virtual std::vector<BatchNormUnit> batchNorms() const { return {}; }
  // `x` is the trunk tensor entering the layer (empty for the first layer).
  virtual void forward(const Mat& x, const MicroBatch& mb, const ShardParams& p, Numerics& nx, Saved& saved, Mat& y,
                       HeadResult* head) const = 0;
  // `dy` is the gradient of the output (for a head, ignored: its loss seeds
  // the gradient, multiplied by `lossScale`); writes the input gradient `dx`
  // (left empty for the first layer) and the parameters' gradients.
  virtual void backward(const Mat& x, const Mat& dy, const MicroBatch& mb, const ShardParams& p, Numerics& nx,
                        const Saved& saved, float lossScale, Mat& dx, ShardGrads& grads) const = 0;
};

// The kernel for a plan layer, split over `shards` IPUs in a phase whose
// sequences have `seqLen` tokens. What it accepts is the kernel table's
// (runtime/runnable/runnable.h): its IPU5002 for an op without a kernel or
// attributes the kernel cannot run.
Expected<std::unique_ptr<Kernel>> makeKernel(const ir::Layer& layer, int shards, long long seqLen);
// Whether the table has a kernel for the op (else a model is outside what the
// emulator runs, which is a limitation, not a mistake in the script).
bool hasKernel(ir::LayerOp op);

}  // namespace ipu::emu
