// Tensors and the arithmetic of one precision setting. Tensors are row-major
// float matrices; fp16 tensors hold only values exactly representable in
// binary16 (fp16.h), so an fp16 "store" is a rounding of every element.
//
// What each precision field means here (docs/emulator.md, "Precision"):
// - compute fp16: every tensor a kernel outputs or keeps (activations, their
//   gradients, weight gradients) is rounded to fp16; statistics inside a
//   kernel (LayerNorm moments, softmax sums, the loss) are computed in fp32,
//   as the IPU's fp16 codelets do;
// - partials fp16: a matmul accumulates products in fp32 only within blocks
//   of 16 along the reduction dimension (an AMP unit's depth), rounds each
//   block's sum to fp16 and accumulates the blocks in fp16; partials fp32
//   accumulate in fp32 and round once;
// - stochastic rounding: every rounding to fp16 is stochastic, drawn from a
//   counter-based stream keyed by where the rounding happens (step, replica,
//   micro batch, layer, pass, tensor), so results never depend on threads.
//
// Host threads: a Numerics may carry the trainer's thread pool; its matrix
// products and roundings then split into row blocks run on every host thread
// (nested inside the virtual IPU's task). A block's products and random
// streams are those of the whole tensor, so results do not depend on the
// threads: with fp16 partials the blocks are a function of the shapes only;
// an fp32 product takes one block per thread (numerics.cpp says why that
// keeps every bit). Kernels use `parallelFor` and `fork` for their own loops
// (attention heads): a fork has its own rounding stream, keyed by the loop
// index.
#pragma once

#include <cstdint>
#include <functional>

#include <Eigen/Core>

namespace ipu {
class ThreadPool;
}

namespace ipu::emu {

class BatchNormContext;

// What tensor sharding's all-reduces among a shard group moved during one
// kernel call (allReduceShards adds to it): the elements of the buffer each
// IPU of the group entered, summed over the all-reduces, and how many there
// were. The trainer hands one to each pass it counts (docs/emulator.md,
// "Tensor sharding").
struct ShardExchange {
  double elements = 0;
  double operations = 0;
};

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

class Numerics {
 public:
  Numerics() = default;
  Numerics(bool fp16Compute, bool fp16Partials, bool stochastic, std::uint64_t key, ThreadPool* pool = nullptr)
      : fp16_(fp16Compute), fp16Partials_(fp16Compute && fp16Partials), stochastic_(stochastic), key_(key), pool_(pool) {}

  bool fp16() const { return fp16_; }
  bool stochastic() const { return stochastic_; }

  // Round a tensor to the compute type (a no-op in fp32).
  void round(Mat& m);
  void round(float* data, std::size_t n);
  // C = op(A) * op(B), then rounded to the compute type.
  Mat mm(const Mat& a, const Mat& b);      // A B
  Mat mmTN(const Mat& a, const Mat& b);    // A^T B
  Mat mmNT(const Mat& a, const Mat& b);    // A B^T

  // Where batch norm takes its statistics (kernel.h); null: from the micro
  // batch alone. Forks share it.
  void setBatchNorm(BatchNormContext* context) { batchNorm_ = context; }
  BatchNormContext* batchNorm() const { return batchNorm_; }
  // Where the shard all-reduces of a kernel call are counted; null: not
  // counted (evaluation). Forks share it.
  void setShardExchange(ShardExchange* counter) { shardExchange_ = counter; }
  ShardExchange* shardExchange() const { return shardExchange_; }

  // A fresh key for a rounding that is not a tensor of this kernel (used by
  // callers that round on their own, e.g. the optimizer).
  std::uint64_t nextKey();

  // Run f(i) for i in [0, n) on the host threads (in order on one thread
  // without a pool). Iterations must write disjoint data.
  void parallelFor(std::size_t n, const std::function<void(std::size_t)>& f) const;
  // Run f(begin, end) over fixed chunks of [0, n) of about `grain` items.
  void parallelChunks(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& f) const;
  // The Numerics of iteration i of a parallel loop: the same precision and
  // threads, its own rounding stream (subKey(base, i); take `base` from
  // nextKey() once, before the loop).
  Numerics fork(std::uint64_t base, std::uint64_t i) const;

 private:
  Mat product(const Mat& a, bool ta, const Mat& b, bool tb);

  bool fp16_ = false;
  bool fp16Partials_ = false;
  bool stochastic_ = false;
  std::uint64_t key_ = 0;
  std::uint64_t counter_ = 0;
  ThreadPool* pool_ = nullptr;
  BatchNormContext* batchNorm_ = nullptr;
  ShardExchange* shardExchange_ = nullptr;
};

// Round a buffer to fp16 (nearest-even, or stochastic with `key`; element i
// draws position offset + i of the stream).
void roundToHalf(float* data, std::size_t n, bool stochastic, std::uint64_t key, std::size_t offset = 0);

}  // namespace ipu::emu
