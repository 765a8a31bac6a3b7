#include "runtime/emulator/fp16_product.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"

namespace ipu::emu::fp16 {

namespace {

using Index = std::ptrdiff_t;

constexpr Index kDepth = 16;   // products an AMP unit sums before a partial is written
constexpr int kPanel = 32;     // columns of a packed panel of op(B): two 16-lane vectors
constexpr Index kChunkRows = 64;  // rows of op(A) that pass over a panel of op(B) before the next panel (a multiple of kTileRows)
constexpr int kTileRows = 8;   // rows of op(A) per register tile (8 x 32 block sums: 16 registers)

constexpr std::uint32_t kSign = 0x80000000u;
constexpr std::uint32_t kSmallestNormal = 0x38800000u;   // 2^-14
constexpr std::uint32_t kLargestHalf = 0x477FE000u;      // 65504
constexpr std::uint32_t kBeyondHalf = 0x47800000u;       // 65536: the step above 65504
constexpr std::uint32_t kInfinity = 0x7F800000u;
constexpr std::uint32_t kKept = 0xFFFFE000u;             // a float's bits that binary16 keeps in its normal range
constexpr float kOffset = 6.103515625e-05f;              // 2^-14

std::uint32_t bitsOf(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

float floatOf(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

float roundNearestHalf(float x) { return toFloat(fromFloat(x)); }

}  // namespace

float roundPartialStochastic(float x, std::uint32_t u) {
  const std::uint32_t b = bitsOf(x);
  const std::uint32_t a = b & ~kSign;
  if (a > kInfinity) return roundNearestHalf(x);   // NaN
  const bool tiny = a < kSmallestNormal;
  const float y = tiny ? floatOf(a) + kOffset : floatOf(a);
  std::uint32_t t = (bitsOf(y) + u) & kKept;       // no carry into the sign: a <= infinity, u < 2^13
  if (t >= kBeyondHalf) t = kInfinity;
  const float z = tiny ? floatOf(t) - kOffset : floatOf(t);
  return floatOf(bitsOf(z) | (b & kSign));
}

namespace {

// The random bits of one element and block: the top 13 round the block's
// sum, the low 13 the accumulator.
constexpr int kSumShift = 19;
constexpr std::uint32_t kAccMask = 0x1FFFu;

#if defined(__AVX512F__)
constexpr bool kHaveVector = true;

// roundPartialStochastic on 16 lanes, for lanes up to 65504 (the caller
// checks the rest, which are rare): the same operations, with the
// subnormal-range lanes offset and restored by masked float additions (no
// branch). `largest` collects the magnitudes' bits (unsigned maximum).
inline __m512 roundStochastic16(__m512 x, __m512i u, __m512i& largest) {
  const __m512i b = _mm512_castps_si512(x);
  const __m512i a = _mm512_and_si512(b, _mm512_set1_epi32(static_cast<int>(~kSign)));
  largest = _mm512_max_epu32(largest, a);
  const __mmask16 tiny = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(static_cast<int>(kSmallestNormal)));
  const __m512 offset = _mm512_set1_ps(kOffset);
  const __m512 y = _mm512_mask_add_ps(_mm512_castsi512_ps(a), tiny, _mm512_castsi512_ps(a), offset);
  const __m512i t = _mm512_and_si512(_mm512_add_epi32(_mm512_castps_si512(y), u), _mm512_set1_epi32(static_cast<int>(kKept)));
  const __m512 z = _mm512_mask_sub_ps(_mm512_castsi512_ps(t), tiny, _mm512_castsi512_ps(t), offset);
  // z | (b & sign): ternary-logic table of A | (B & C) is 0xF8.
  return _mm512_castsi512_ps(
      _mm512_ternarylogic_epi32(_mm512_castps_si512(z), b, _mm512_set1_epi32(static_cast<int>(kSign)), 0xF8));
}

// Round to nearest-even by the hardware conversion (the same as fromFloat for
// every value an addition or fused multiply-add produces: subnormals,
// overflow to infinity, quiet NaN with its payload).
inline __m512 roundNearest16(__m512 x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// lowbias32 on 16 lanes (counter_rng.h, hash32).
inline __m512i hash16(__m512i x) {
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7FEB352D));
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(static_cast<int>(0x846CA68BU)));
  return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
}

// Where a tile reads its operands: kTileRows rows of op(A), element k of row
// r at a[r * rowStride + k * step], and a packed panel of op(B), its kPanel
// columns of reduction index k at panel + k * kPanel (masks m0 and m1 select
// the lanes of its two vectors that are columns of C).
struct TileOperands {
  const float* a;
  Index rowStride, step;
  const float* panel;
  __mmask16 m0, m1;
};

// One register tile, the whole reduction. The block sums stay in registers
// (16 of them); the accumulators, touched once per block, in the first-level
// cache. op(A) is read in place: kTransposed when its rows are its storage's
// columns (step 1 along the rows, so a row index is an immediate offset),
// else along the rows of its storage (step 1 along the reduction).
// `position` holds the low 32 bits of the row-major position in C of each
// row's first column. Returns false, having written nothing, when a
// stochastic rounding met a value above 65504 (overflow, infinity, NaN): the
// caller computes that tile element by element.
template <bool kStochastic, bool kTransposed>
bool tile(const TileOperands& o, Index depth, const std::uint32_t* mul, const std::uint32_t* add, const std::uint32_t* lanes,
          const std::uint32_t* position, float* c, Index ldc, int rows) {
  alignas(64) float acc[kTileRows][kPanel] = {};
  __m512i largest = _mm512_setzero_si512();
  const float* ar[kTileRows];
  for (int r = 0; r < kTileRows; ++r) ar[r] = o.a + (kTransposed ? r : r * o.rowStride);
  const Index step = kTransposed ? o.step : 1;
  const float* pb = o.panel;
  Index j = 0;
  for (Index k0 = 0; k0 < depth; k0 += kDepth, ++j) {
    const Index k1 = std::min(depth, k0 + kDepth);
    __m512 part[kTileRows][2];
    for (auto& row : part) row[0] = row[1] = _mm512_setzero_ps();
    for (Index k = k0; k < k1; ++k) {
      const __m512 b0 = _mm512_loadu_ps(pb + k * kPanel);
      const __m512 b1 = _mm512_loadu_ps(pb + k * kPanel + 16);
      for (int r = 0; r < kTileRows; ++r) {
        const __m512 av = _mm512_set1_ps(ar[r][k * step]);
        part[r][0] = _mm512_fmadd_ps(av, b0, part[r][0]);
        part[r][1] = _mm512_fmadd_ps(av, b1, part[r][1]);
      }
    }
    if constexpr (kStochastic) {
      const __m512i lane0 = _mm512_loadu_si512(lanes + j * kPanel);
      const __m512i lane1 = _mm512_loadu_si512(lanes + j * kPanel + 16);
      const __m512i accMask = _mm512_set1_epi32(static_cast<int>(kAccMask));
      for (int r = 0; r < kTileRows; ++r) {
        const __m512i base = _mm512_set1_epi32(static_cast<int>(position[r] * mul[j] + add[j]));
        const __m512i w0 = hash16(_mm512_add_epi32(base, lane0));
        const __m512i w1 = hash16(_mm512_add_epi32(base, lane1));
        const __m512 s0 = roundStochastic16(part[r][0], _mm512_srli_epi32(w0, kSumShift), largest);
        const __m512 s1 = roundStochastic16(part[r][1], _mm512_srli_epi32(w1, kSumShift), largest);
        const __m512 a0 = _mm512_add_ps(_mm512_load_ps(acc[r]), s0);
        const __m512 a1 = _mm512_add_ps(_mm512_load_ps(acc[r] + 16), s1);
        _mm512_store_ps(acc[r], roundStochastic16(a0, _mm512_and_si512(w0, accMask), largest));
        _mm512_store_ps(acc[r] + 16, roundStochastic16(a1, _mm512_and_si512(w1, accMask), largest));
      }
    } else {
      for (int r = 0; r < kTileRows; ++r)
        for (int v = 0; v < 2; ++v) {
          const __m512 sum = _mm512_add_ps(_mm512_load_ps(acc[r] + 16 * v), roundNearest16(part[r][v]));
          _mm512_store_ps(acc[r] + 16 * v, roundNearest16(sum));
        }
    }
  }
  if (kStochastic && _mm512_cmpgt_epu32_mask(largest, _mm512_set1_epi32(static_cast<int>(kLargestHalf))) != 0) return false;
  for (int r = 0; r < rows; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, o.m0, _mm512_load_ps(acc[r]));
    _mm512_mask_storeu_ps(c + r * ldc + 16, o.m1, _mm512_load_ps(acc[r] + 16));
  }
  return true;
}
#else
constexpr bool kHaveVector = false;
#endif

}  // namespace

namespace {

// Packed copies of op(B) reuse the buffers of earlier products (a training
// step runs thousands of products; a fresh allocation of a large one would be
// fresh pages every time). Each thread keeps a few that its products released.
constexpr std::size_t kSpareBuffers = 4;
thread_local std::vector<std::vector<float>> tSpare;

std::vector<float> packedBuffer(std::size_t n) {
  std::vector<float> v;
  if (!tSpare.empty()) {
    v = std::move(tSpare.back());
    tSpare.pop_back();
  }
  v.resize(n);
  return v;
}

}  // namespace

PartialsProduct::~PartialsProduct() {
  if (tSpare.size() < kSpareBuffers) tSpare.push_back(std::move(packed_));
}

PartialsProduct::PartialsProduct(Operand b, Index depth, Index cols, bool stochastic, std::uint64_t key, Kernel kernel)
    : b_(b), depth_(std::max<Index>(depth, 0)), cols_(std::max<Index>(cols, 0)), stochastic_(stochastic),
      vector_(kHaveVector && kernel == Kernel::Best) {
  // op(B) packed as panels of kPanel columns, read along its contiguous
  // dimension.
  const Index panels = (cols_ + kPanel - 1) / kPanel;
  packed_ = packedBuffer(static_cast<std::size_t>(panels * depth_ * kPanel));   // every element written below
  for (Index p = 0; p < panels; ++p) {
    float* out = packed_.data() + p * depth_ * kPanel;
    const Index col0 = p * kPanel;
    const Index width = std::min<Index>(kPanel, cols_ - col0);
    if (b.colStride == 1 && width == kPanel) {
      for (Index k = 0; k < depth_; ++k) {
        const float* in = b.data + k * b.rowStride + col0;
        for (Index l = 0; l < kPanel; ++l) out[k * kPanel + l] = in[l];   // a fixed-length copy, vectorised
      }
    } else if (b.colStride == 1) {
      for (Index k = 0; k < depth_; ++k)
        for (Index l = 0; l < kPanel; ++l) out[k * kPanel + l] = l < width ? b.data[k * b.rowStride + col0 + l] : 0.0f;
    } else {
      for (Index l = 0; l < kPanel; ++l)
        for (Index k = 0; k < depth_; ++k) out[k * kPanel + l] = l < width ? b.data[k * b.rowStride + (col0 + l) * b.colStride] : 0.0f;
    }
  }
  if (!stochastic_) return;
  const Index blocks = (depth_ + kDepth - 1) / kDepth;
  const auto nb = static_cast<std::size_t>(blocks);
  keys_.resize(nb);
  mul_.resize(nb);
  add_.resize(nb);
  lanes_.resize(nb * kPanel);
  for (std::size_t j = 0; j < nb; ++j) {
    keys_[j] = subKey(key, j);
    const Stream32 s = stream32(keys_[j], 0);
    mul_[j] = s.mul;
    add_[j] = s.add;
    for (int l = 0; l < kPanel; ++l) lanes_[j * kPanel + static_cast<std::size_t>(l)] = static_cast<std::uint32_t>(l) * s.mul;
  }
}

void PartialsProduct::rows(Operand a, Index r0, Index nr, float* c) const {
  if (nr <= 0 || cols_ <= 0) return;
  if (depth_ == 0) {
    std::fill(c + r0 * cols_, c + (r0 + nr) * cols_, 0.0f);
    return;
  }
  // The vector kernel computes draw positions in 32 bits (every product
  // below 2^32 elements, i.e. 16 GB).
  const bool small = static_cast<std::uint64_t>(r0 + nr) * static_cast<std::uint64_t>(cols_) <= (std::uint64_t{1} << 32);
  // It reads op(A) in place along one of its storage's dimensions.
  const bool contiguous = a.rowStride == 1 || a.colStride == 1;
  if (vector_ && small && contiguous) vectorRows(a, r0, nr, c);
  else portableRows(a, r0, nr, c);
}

// Element by element (in panels of op(B), so that the multiply-adds of a row
// vectorise where the build has fused multiply-add instructions).
void PartialsProduct::portableRows(Operand a, Index r0, Index nr, float* c) const {
  const Index panels = (cols_ + kPanel - 1) / kPanel;
  for (Index p = 0; p < panels; ++p) portableTile(a, r0, nr, p, c);
}

// Rows [r0, r0 + nr) of C in panel p's columns.
void PartialsProduct::portableTile(Operand a, Index r0, Index nr, Index p, float* c) const {
  const Index col0 = p * kPanel;
  const int width = static_cast<int>(std::min<Index>(kPanel, cols_ - col0));
  const float* pb = packed_.data() + p * depth_ * kPanel;
  for (Index i = r0; i < r0 + nr; ++i) {
    float acc[kPanel] = {};
    Index j = 0;
    for (Index k0 = 0; k0 < depth_; k0 += kDepth, ++j) {
      float part[kPanel] = {};
      for (Index k = k0; k < std::min(depth_, k0 + kDepth); ++k) {
        const float aik = a.data[i * a.rowStride + k * a.colStride];
        for (int l = 0; l < kPanel; ++l) part[l] = std::fma(aik, pb[k * kPanel + l], part[l]);
      }
      for (int l = 0; l < width; ++l) {
        if (!stochastic_) {
          acc[l] = roundNearestHalf(acc[l] + roundNearestHalf(part[l]));
          continue;
        }
        const auto n = static_cast<std::uint64_t>(i * cols_ + col0 + l);
        const std::uint32_t w = draw32(keys_[static_cast<std::size_t>(j)], n);
        acc[l] = roundPartialStochastic(acc[l] + roundPartialStochastic(part[l], w >> kSumShift), w & kAccMask);
      }
    }
    std::copy(acc, acc + width, c + i * cols_ + col0);
  }
}

void PartialsProduct::vectorRows([[maybe_unused]] Operand a, [[maybe_unused]] Index r0, [[maybe_unused]] Index nr,
                                 [[maybe_unused]] float* c) const {
#if defined(__AVX512F__)
  const Index panels = (cols_ + kPanel - 1) / kPanel;
  const bool transposed = a.rowStride == 1;
  // A last tile of fewer than kTileRows rows reads a copy of them, padded
  // with zero rows, since reading the matrix in place would pass its end.
  const Index full = nr / kTileRows * kTileRows;
  std::unique_ptr<float[]> edge;
  if (full < nr) {
    edge.reset(new float[static_cast<std::size_t>(kTileRows * depth_)]);
    for (int r = 0; r < kTileRows; ++r)
      for (Index k = 0; k < depth_; ++k)
        edge[static_cast<std::size_t>(r * depth_ + k)] = r0 + full + r < r0 + nr ? a.data[(r0 + full + r) * a.rowStride + k * a.colStride] : 0.0f;
  }
  for (Index q0 = r0; q0 < r0 + nr; q0 += kChunkRows) {
    const Index qn = std::min(kChunkRows, r0 + nr - q0);
    // Panels outside the row tiles: a panel of op(B) stays in cache while the
    // chunk's row tiles pass over it.
    for (Index p = 0; p < panels; ++p) {
      const Index col0 = p * kPanel;
      TileOperands o{};
      o.panel = packed_.data() + p * depth_ * kPanel;
      const int width = static_cast<int>(std::min<Index>(kPanel, cols_ - col0));
      o.m0 = static_cast<__mmask16>(width >= 16 ? 0xFFFFu : (1u << width) - 1u);
      o.m1 = static_cast<__mmask16>(width >= 32 ? 0xFFFFu : width <= 16 ? 0u : (1u << (width - 16)) - 1u);
      for (Index i0 = q0; i0 < q0 + qn; i0 += kTileRows) {
        const int rows = static_cast<int>(std::min<Index>(kTileRows, q0 + qn - i0));
        const bool inPlace = rows == kTileRows;
        o.a = inPlace ? a.data + i0 * a.rowStride : edge.get();
        o.rowStride = inPlace ? a.rowStride : depth_;
        o.step = inPlace ? a.colStride : 1;
        std::uint32_t position[kTileRows];
        for (int r = 0; r < kTileRows; ++r) position[r] = static_cast<std::uint32_t>((i0 + r) * cols_ + col0);
        float* ct = c + i0 * cols_ + col0;
        const bool t = inPlace && transposed;
        bool done;
        if (stochastic_)
          done = t ? tile<true, true>(o, depth_, mul_.data(), add_.data(), lanes_.data(), position, ct, cols_, rows)
                   : tile<true, false>(o, depth_, mul_.data(), add_.data(), lanes_.data(), position, ct, cols_, rows);
        else
          done = t ? tile<false, true>(o, depth_, nullptr, nullptr, nullptr, position, ct, cols_, rows)
                   : tile<false, false>(o, depth_, nullptr, nullptr, nullptr, position, ct, cols_, rows);
        if (!done) portableTile(a, i0, rows, p, c);
      }
    }
  }
#endif
}

}  // namespace ipu::emu::fp16
