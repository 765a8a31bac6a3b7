// The arithmetic the layer kernels share: LayerNorm, GELU, row gathers,
// softmax cross-entropy, the shard all-reduce, and reading a plan layer's
// attributes. Every tensor these return is rounded to the compute type by the
// Numerics they are given; statistics (LayerNorm moments, softmax sums, the
// loss) are computed in fp32 (docs/emulator.md, "Precision").
#pragma once

#include <string>
#include <vector>

#include "runtime/emulator/error.h"
#include "runtime/emulator/numerics.h"
#include "runtime/ir/execution_plan.h"
#include "runtime/runnable/runnable.h"

namespace ipu::emu {

inline constexpr float kLayerNormEpsilon = 1e-5f;
inline constexpr float kInitStd = 0.02f;  // BERT's initialiser range

// m += row, broadcast over m's rows (a bias). Not rounded: the caller rounds.
void addRow(Mat& m, const Mat& row);
// Rows per chunk of row-wise work split over the host threads.
std::size_t rowGrain(Eigen::Index cols);
// The column sums of m (a bias gradient), rounded.
Mat columnSums(const Mat& m, Numerics& nx);

// y = gamma * xhat + beta per row, xhat = (x - mean) * rstd; keeps xhat and
// rstd ([rows, 1]) for the backward pass.
void layerNormForward(const Mat& x, const Mat& gamma, const Mat& beta, Numerics& nx, Mat& y, Mat& xhat, Mat& rstd);
// dx from dy; writes (does not accumulate) dgamma and dbeta.
Mat layerNormBackward(const Mat& dy, const Mat& xhat, const Mat& rstd, const Mat& gamma, Numerics& nx, Mat& dgamma,
                      Mat& dbeta);

// The exact (erf-based) GELU, and dy * GELU'(x).
Mat gelu(const Mat& x, Numerics& nx);
Mat geluBackward(const Mat& dy, const Mat& x, Numerics& nx);

Mat gatherRows(const Mat& x, const std::vector<int>& rows);
// Distinct rows of `part` into an n-row matrix of zeros.
Mat scatterRows(const Mat& part, const std::vector<int>& rows, Eigen::Index n);

// Softmax cross-entropy over rows: the summed loss (fp32 math); writes the
// count of correct argmax predictions, and `grad` (if given) receives
// (softmax - target) * scale. The target is the one-hot label, or with label
// smoothing e > 0, 1 - e on the label plus e / classes on every class
// (PyTorch's cross_entropy(..., label_smoothing=e)); e = 0 is the plain loss.
double crossEntropy(const Mat& logits, const std::vector<int>& labels, double* correct, Mat* grad, float scale,
                    double smoothing = 0);

// Sum the shards' partial results with a ring all-reduce over their buffers;
// returns the reduced tensor (every shard holds the same). Counts the buffer
// in nx.shardExchange() when there is more than one shard.
Mat allReduceShards(std::vector<Mat>& parts, Numerics& nx);

// A numeric attribute of a plan layer (`fallback` when absent or a string),
// and a string attribute: the kernel table's readers.
using runnable::number;
using runnable::text;

}  // namespace ipu::emu
