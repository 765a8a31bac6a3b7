// Matrix products with fp16 partials (docs/emulator.md, "Precision"), as the
// emulator defines them:
//
// - the products of each block of 16 along the reduction (an AMP unit's
//   depth) are summed in fp32 by fused multiply-adds in order of the
//   reduction index, starting from zero;
// - the block's sum is added to the running fp16 accumulator in fp32 and
//   the sum rounded to fp16: one rounding per block, as an AMP pass writes
//   its partial;
// - the rounding is to nearest-even (fp16::fromFloat), or stochastic
//   (roundPartialStochastic below) with 13 random bits: for element (r, c)
//   and block j, the top 13 bits of R xor C, R = draw32 of position r in
//   stream32(subKey(key, 0), j) and C = draw32 of position c in
//   stream32(subKey(key, 1), j) (counter_rng.h). A block's elements then have
//   pairwise independent bits (two elements differ in their row or their
//   column draw) from (rows + columns) draws, not one per element.
//
// The kernels keep a tile of block sums in vector registers and round them
// there, a stretch of the reduction at a time (AVX-512, or AVX2 with FMA,
// chosen at run time by what the host has: vector_isa.h); without either,
// the same definition is computed element by element. All give the same
// bits (tested).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"

namespace ipu::emu::fp16 {

// Stochastic rounding of x to fp16 with 13 random bits u (u < 8192), as fp16
// partials round. Where the result is a normal fp16 (|x| >= 2^-14) it adds u
// to the 13 bits that binary16 drops and truncates: x rounds up with
// probability (dropped bits) / 2^13, exactly unbiased. In the subnormal range
// |x| is first offset by 2^-14 in fp32 arithmetic (round to nearest), which
// places it in the binade whose fp16 spacing is the subnormal spacing 2^-24,
// rounded there the same way, and the offset removed (exactly): the
// probability is that of |x| rounded to a multiple of 2^-37, within 2^-14 of
// an ulp. Results above 65504 are infinity; NaN as fromFloat; the sign is
// kept (also on zero).
float roundPartialStochastic(float x, std::uint32_t u);

// A matrix operand: element (i, k) of op(X) is data[i * rowStride + k * colStride].
struct Operand {
  const float* data;
  std::ptrdiff_t rowStride, colStride;
};

// How a product is computed: fp16::Kernel (fp16.h): the widest vector kernel
// the host supports (Best), a given one, or element by element (Portable);
// all give the same bits (tested).

// One product C = op(A) op(B), op(A) rows x depth and op(B) depth x cols:
// op(B), packed for the kernel, and the rounding streams, prepared once and
// shared by the row blocks that the host threads compute.
class PartialsProduct {
 public:
  // Runs tasks 0 .. n-1, in any order and at once if it likes (the host
  // threads): packing op(B) is a pass over it, which one thread alone would
  // do while the others wait.
  using ParallelFor = std::function<void(std::size_t n, const std::function<void(std::size_t)>& task)>;

  PartialsProduct(Operand b, std::ptrdiff_t depth, std::ptrdiff_t cols, bool stochastic, std::uint64_t key,
                  Kernel kernel = Kernel::Best, const ParallelFor& parallel = nullptr);
  ~PartialsProduct();
  PartialsProduct(const PartialsProduct&) = delete;
  PartialsProduct& operator=(const PartialsProduct&) = delete;

  // Rows [r0, r0 + nr) of C, row-major with `cols` columns (row r0 starts at
  // c + r0 * cols). Calls for disjoint rows may run at once.
  void rows(Operand a, std::ptrdiff_t r0, std::ptrdiff_t nr, float* c) const;

 private:
  void portableRows(Operand a, std::ptrdiff_t r0, std::ptrdiff_t nr, float* c) const;
  void avx512Rows(Operand a, std::ptrdiff_t r0, std::ptrdiff_t nr, float* c) const;
  void avx2Rows(Operand a, std::ptrdiff_t r0, std::ptrdiff_t nr, float* c) const;
  bool bounded(std::uint32_t maxA) const;
  void packPanel(std::ptrdiff_t p);
  void packPanel(std::ptrdiff_t p, std::ptrdiff_t kBegin, std::ptrdiff_t kEnd);
  std::ptrdiff_t packedOffset(std::ptrdiff_t p, std::ptrdiff_t k) const;
  template <int kRows, int kCols, typename Tile>
  void tiles(Operand a, std::ptrdiff_t r0, std::ptrdiff_t nr, float* c, Tile tile) const;
  void portableTile(Operand a, std::ptrdiff_t r0, std::ptrdiff_t nr, std::ptrdiff_t panel, float* c) const;

  Operand b_;
  std::ptrdiff_t depth_, cols_;
  bool stochastic_;
  Kernel kernel_;   // Avx512, Avx2 or Portable
  std::uint32_t maxB_ = 0;                       // the largest |op(B)|'s bits (NaN above infinity)
  std::vector<float> packed_;                    // op(B) as panels of kPanel columns (zero beyond the last column), by stretches of the reduction (packedOffset)
  std::vector<Stream32> rowStreams_;                   // block j's stream of row draws
  std::vector<std::uint32_t> columnBits_;              // panel p, block j: its columns' random bits (the tiles' TileStreams::columns)
};

}  // namespace ipu::emu::fp16
