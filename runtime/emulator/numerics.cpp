#include "runtime/emulator/numerics.h"

#include <algorithm>
#include <optional>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"
#include "runtime/emulator/fp16_product.h"
#include "runtime/base/thread_pool.h"

namespace ipu::emu {

namespace {

// How a product splits over the host threads: into at most `most` row
// blocks of at least kMinBlockRows rows (a multiple of 16) and about
// kTaskFlops each.
//
// With fp16 partials the split is a function of the shape only (at most
// kMaxBlocks blocks): the kernel packs op(B) once for all blocks, so blocks
// cost nothing, and no element's arithmetic depends on them (tested).
//
// An fp32 product (Eigen) splits into one block per host thread: every call
// packs all of op(B) again, a sixth of an fp32 step at hidden 512 with eight
// blocks on one thread. The number of threads still changes no bit: Eigen
// sums each element's products in chunks of a depth that depends on the
// depth and the cache sizes only, and takes C's rows in groups of 4 whose
// kernel depends on the group's position, which a block starting at a
// multiple of 16 rows keeps (Eigen 3.4; the thread-count tests check it).
constexpr double kTaskFlops = 2.0e6;       // tens of microseconds: far above a task's hand-over cost
constexpr Eigen::Index kMaxBlocks = 8;
constexpr Eigen::Index kMinBlockRows = 64;
// Element-wise work (roundings) splits into chunks of this many elements.
constexpr std::size_t kRoundGrain = 1 << 15;

Eigen::Index rowsPerBlock(Eigen::Index rows, double flops, Eigen::Index most) {
  const Eigen::Index blocks = std::min<Eigen::Index>(most, static_cast<Eigen::Index>(flops / kTaskFlops));
  if (blocks <= 1 || rows < 2 * kMinBlockRows) return rows;
  Eigen::Index per = (rows + blocks - 1) / blocks;
  per = std::max(kMinBlockRows, (per + 15) / 16 * 16);
  return std::min(per, rows);
}

}  // namespace

void roundToHalf(float* data, std::size_t n, bool stochastic, std::uint64_t key, std::size_t offset) {
  if (stochastic)
    fp16::roundStochastic(data, n, key, offset);
  else
    fp16::roundNearest(data, n);
}

std::uint64_t Numerics::nextKey() { return subKey(key_, counter_++); }

void Numerics::parallelFor(std::size_t n, const std::function<void(std::size_t)>& f) const {
  if (pool_ == nullptr || n <= 1) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  pool_->run(n, f);
}

void Numerics::parallelChunks(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& f) const {
  grain = std::max<std::size_t>(1, grain);
  const std::size_t chunks = (n + grain - 1) / grain;
  if (chunks <= 1) {
    if (n > 0) f(0, n);
    return;
  }
  parallelFor(chunks, [&](std::size_t c) { f(c * grain, std::min(n, (c + 1) * grain)); });
}

Numerics Numerics::fork(std::uint64_t base, std::uint64_t i) const {
  Numerics n(*this);
  n.key_ = subKey(base, i);
  n.counter_ = 0;
  return n;
}

void Numerics::round(float* data, std::size_t n) {
  if (!fp16_) return;
  const std::uint64_t key = nextKey();
  const bool sr = stochastic_;
  parallelChunks(n, kRoundGrain, [&](std::size_t b, std::size_t e) { roundToHalf(data + b, e - b, sr, key, b); });
}

void Numerics::round(Mat& m) { round(m.data(), static_cast<std::size_t>(m.size())); }

Mat Numerics::product(const Mat& a, bool ta, const Mat& b, bool tb) {
  const Eigen::Index rows = ta ? a.cols() : a.rows();
  const Eigen::Index cols = tb ? b.rows() : b.cols();
  const Eigen::Index k = ta ? a.rows() : a.cols();
  Mat c(rows, cols);
  const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(k);
  const Eigen::Index per = rowsPerBlock(rows, flops, fp16Partials_ ? kMaxBlocks : pool_ != nullptr ? pool_->threads() : 1);
  const Eigen::Index blocks = rows == 0 ? 0 : (rows + per - 1) / per;
  // The rounding streams of the whole tensor, reserved before the blocks run.
  const bool partials = fp16Partials_;
  const std::uint64_t key = fp16_ ? nextKey() : 0;
  const bool sr = stochastic_;
  // Rows [r0, r0 + nr) of op(A) op(B) in fp32.
  auto full = [&](Eigen::Index r0, Eigen::Index nr, auto o) {
    if (!ta && !tb) o.noalias() = a.middleRows(r0, nr) * b;
    else if (ta && !tb) o.noalias() = a.middleCols(r0, nr).transpose() * b;
    else if (!ta && tb) o.noalias() = a.middleRows(r0, nr) * b.transpose();
    else o.noalias() = a.middleCols(r0, nr).transpose() * b.transpose();
  };
  std::optional<fp16::PartialsProduct> partialsProduct;
  if (partials) {
    const fp16::Operand opB = tb ? fp16::Operand{b.data(), 1, b.cols()} : fp16::Operand{b.data(), b.cols(), 1};
    partialsProduct.emplace(opB, k, cols, sr, key, fp16::Kernel::Best,
                            [this](std::size_t n, const std::function<void(std::size_t)>& task) { parallelFor(n, task); });
  }
  auto block = [&](std::size_t bi) {
    const Eigen::Index r0 = static_cast<Eigen::Index>(bi) * per;
    const Eigen::Index nr = std::min(per, rows - r0);
    const std::size_t offset = static_cast<std::size_t>(r0 * cols);
    const std::size_t n = static_cast<std::size_t>(nr * cols);
    if (!partials) {
      full(r0, nr, c.middleRows(r0, nr));
      if (fp16_) roundToHalf(c.data() + offset, n, sr, key, offset);
      return;
    }
    // fp16 partials: fp16_product.h (the product's rounding bits are drawn
    // from streams of `key` by row, column and 16-deep block).
    const fp16::Operand opA = ta ? fp16::Operand{a.data(), 1, a.cols()} : fp16::Operand{a.data(), a.cols(), 1};
    partialsProduct->rows(opA, r0, nr, c.data());
  };
  if (blocks == 1) block(0);
  else parallelFor(static_cast<std::size_t>(blocks), block);
  return c;
}

Mat Numerics::mm(const Mat& a, const Mat& b) { return product(a, false, b, false); }
Mat Numerics::mmTN(const Mat& a, const Mat& b) { return product(a, true, b, false); }
Mat Numerics::mmNT(const Mat& a, const Mat& b) { return product(a, false, b, true); }

}  // namespace ipu::emu
