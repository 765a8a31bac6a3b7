#include "runtime/emulator/fp16_product.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"
#include "runtime/emulator/vector_isa.h"

#if IPU_X86_KERNELS
#include <immintrin.h>
#endif

namespace ipu::emu::fp16 {

namespace {

using Index = std::ptrdiff_t;

constexpr Index kDepth = 16;   // products an AMP unit sums before a partial is written
constexpr int kPanel = 32;     // columns of a packed panel of op(B): two 16-lane vectors
// Reduction indices of op(B)'s panels that the tiles pass over before the
// next ones (a multiple of kDepth): 32 KB of a panel, which stays in the
// first-level cache while a chunk's tiles pass over it.
constexpr Index kStretch = 256;
constexpr Index kChunkRows = 64;  // rows of op(A) that pass over a panel of op(B) before the next panel (a multiple of every tile's rows)

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

// A draw's 13 random bits, the top 13 of its 32.
constexpr int kFieldShift = 19;

// Where a tile reads its operands: rows of op(A), element k of row r at
// a[r * rowStride + k * step], and columns of a packed panel of op(B), the
// tile's columns of reduction index k at panel + k * kPanel, of which the
// first `width` are columns of C.
struct TileOperands {
  const float* a;
  Index rowStride, step;
  const float* panel;
  int width;
  Index depth;   // reduction indices of this call (a stretch of the product's: tiles())
  bool resume;   // the stretch is not the first: the accumulators start from C's values, not from zero
};

// The stochastic bits of a tile (13 random bits each): block j's column
// draws of the tile's columns l at columns[j * kPanel + l], and row r's at
// rows[j * kRows + r]. An element's bits are its row's xor its column's.
struct TileStreams {
  const std::uint32_t* columns;
  const std::uint32_t* rows;
};

#if IPU_X86_KERNELS
// ------------------------------------------------------------------ AVX-512

// roundPartialStochastic on 16 lanes, for lanes up to 65504 (the caller
// checks the rest, which are rare): the same operations, with the
// subnormal-range lanes offset and restored by masked float additions (no
// branch). `largest` collects the magnitudes' bits (unsigned maximum).
template <bool kChecked>
IPU_TARGET_AVX512 inline __m512 roundStochastic16(__m512 x, __m512i u, __m512i& largest) {
  const __m512i b = _mm512_castps_si512(x);
  const __m512i a = _mm512_and_si512(b, _mm512_set1_epi32(static_cast<int>(~kSign)));
  if constexpr (kChecked) largest = _mm512_max_epu32(largest, a);
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
IPU_TARGET_AVX512 inline __m512 roundNearest16(__m512 x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

constexpr int kTileRows512 = 8;   // rows of op(A) per AVX-512 tile (8 x 32 block sums: 16 registers)

// One AVX-512 tile, kTileRows512 rows by a panel's kPanel columns, the whole
// reduction. The block sums stay in registers (16 of them); the
// accumulators, touched once per block, in the first-level cache. op(A) is
// read with step 1 along the rows when kTransposed (a row index is an
// immediate offset: the tile's rows as tiles() packs a transposed op(A)),
// else along the rows of its storage in place (step 1 along the
// reduction). Returns false, having
// written nothing, when a stochastic rounding met a value above 65504
// (overflow, infinity, NaN): the caller computes that tile element by
// element. Without kChecked the caller has shown that no value exceeds
// 65504 (PartialsProduct::bounded), and the tile does not look.
template <bool kStochastic, bool kTransposed, bool kChecked>
IPU_TARGET_AVX512 bool tile512(const TileOperands& o, const TileStreams& st, float* c, Index ldc, int rows) {
  // The accumulators, written by the first block (as 0 + its sum: the
  // definition's zero start, which turns a sum of -0 into +0) before any
  // read, unless the call resumes a reduction: then they start as the
  // partials that C holds (zero in rows and columns outside C).
  alignas(64) float acc[kTileRows512][kPanel];
  const Index depth = o.depth;
  const auto m0 = static_cast<__mmask16>(o.width >= 16 ? 0xFFFFu : (1u << o.width) - 1u);
  const auto m1 = static_cast<__mmask16>(o.width >= 32 ? 0xFFFFu : o.width <= 16 ? 0u : (1u << (o.width - 16)) - 1u);
  if (o.resume)
#pragma GCC unroll 8
    for (int r = 0; r < kTileRows512; ++r) {
      _mm512_store_ps(acc[r], r < rows ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps());
      _mm512_store_ps(acc[r] + 16, r < rows ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps());
    }
  const __m512 zero = _mm512_setzero_ps();
  __m512i largest = _mm512_setzero_si512();
  const float* ar[kTileRows512];
  for (int r = 0; r < kTileRows512; ++r) ar[r] = o.a + (kTransposed ? r : r * o.rowStride);
  const Index step = kTransposed ? o.step : 1;
  const float* pb = o.panel;
  Index j = 0;
  for (Index k0 = 0; k0 < depth; k0 += kDepth, ++j) {
    const Index k1 = std::min(depth, k0 + kDepth);
    const bool first = j == 0 && !o.resume;
    __m512 part[kTileRows512][2];
#pragma GCC unroll 8
    for (auto& row : part) row[0] = row[1] = _mm512_setzero_ps();
    for (Index k = k0; k < k1; ++k) {
      const __m512 b0 = _mm512_loadu_ps(pb + k * kPanel);
      const __m512 b1 = _mm512_loadu_ps(pb + k * kPanel + 16);
      for (int r = 0; r < kTileRows512; ++r) {
        const __m512 av = _mm512_set1_ps(ar[r][k * step]);
        part[r][0] = _mm512_fmadd_ps(av, b0, part[r][0]);
        part[r][1] = _mm512_fmadd_ps(av, b1, part[r][1]);
      }
    }
    if constexpr (kStochastic) {
      const __m512i column0 = _mm512_loadu_si512(st.columns + j * kPanel), column1 = _mm512_loadu_si512(st.columns + j * kPanel + 16);
      const std::uint32_t* rowBits = st.rows + j * kTileRows512;
#pragma GCC unroll 8
      for (int r = 0; r < kTileRows512; ++r) {
        const __m512i row = _mm512_set1_epi32(static_cast<int>(rowBits[r]));
        const __m512 x0 = _mm512_add_ps(first ? zero : _mm512_load_ps(acc[r]), part[r][0]);
        const __m512 x1 = _mm512_add_ps(first ? zero : _mm512_load_ps(acc[r] + 16), part[r][1]);
        _mm512_store_ps(acc[r], roundStochastic16<kChecked>(x0, _mm512_xor_si512(column0, row), largest));
        _mm512_store_ps(acc[r] + 16, roundStochastic16<kChecked>(x1, _mm512_xor_si512(column1, row), largest));
      }
    } else {
#pragma GCC unroll 8
      for (int r = 0; r < kTileRows512; ++r)
        for (int v = 0; v < 2; ++v) {
          const __m512 sum = _mm512_add_ps(first ? zero : _mm512_load_ps(acc[r] + 16 * v), part[r][v]);
          _mm512_store_ps(acc[r] + 16 * v, roundNearest16(sum));
        }
    }
  }
  if (kStochastic && kChecked && _mm512_cmpgt_epu32_mask(largest, _mm512_set1_epi32(static_cast<int>(kLargestHalf))) != 0)
    return false;
  for (int r = 0; r < rows; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, _mm512_load_ps(acc[r]));
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, _mm512_load_ps(acc[r] + 16));
  }
  return true;
}

// --------------------------------------------------------------------- AVX2

// roundStochastic16 on 8 lanes. Without masked operations, the offset is
// added and removed on every lane, as zero on the lanes that are not in the
// subnormal range (exact: x + 0 is x for x >= 0).
template <bool kChecked>
IPU_TARGET_AVX2 inline __m256 roundStochastic8(__m256 x, __m256i u, __m256i& largest) {
  const __m256i b = _mm256_castps_si256(x);
  const __m256i a = _mm256_and_si256(b, _mm256_set1_epi32(static_cast<int>(~kSign)));
  if constexpr (kChecked) largest = _mm256_max_epu32(largest, a);
  // Signed comparison: both sides are below 2^31.
  const __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(kSmallestNormal)), a);
  const __m256 offset = _mm256_and_ps(_mm256_castsi256_ps(tiny), _mm256_set1_ps(kOffset));
  const __m256 y = _mm256_add_ps(_mm256_castsi256_ps(a), offset);
  const __m256i t = _mm256_and_si256(_mm256_add_epi32(_mm256_castps_si256(y), u), _mm256_set1_epi32(static_cast<int>(kKept)));
  const __m256 z = _mm256_sub_ps(_mm256_castsi256_ps(t), offset);
  return _mm256_or_ps(z, _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(kSign)))));
}

IPU_TARGET_AVX2 inline __m256 roundNearest8(__m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

constexpr int kTileRows256 = 4;   // rows per AVX2 tile
constexpr int kTileCols256 = 16;  // columns per AVX2 tile (half a panel): 4 x 16 block sums in 8 of the 16 registers

// tile512 with AVX2: kTileRows256 rows by kTileCols256 columns (o.panel
// points at the tile's first column in its panel, st.columns at that
// column's random bits).
template <bool kStochastic, bool kTransposed, bool kChecked>
IPU_TARGET_AVX2 bool tile256(const TileOperands& o, const TileStreams& st, float* c, Index ldc, int rows) {
  alignas(32) float acc[kTileRows256][kTileCols256];   // written by the first block before any read, or resumed (tile512)
  const Index depth = o.depth;
  const int width = std::min(o.width, kTileCols256);
  if (o.resume)
    for (int r = 0; r < kTileRows256; ++r) {
      if (r < rows && width == kTileCols256) {
        _mm256_store_ps(acc[r], _mm256_loadu_ps(c + r * ldc));
        _mm256_store_ps(acc[r] + 8, _mm256_loadu_ps(c + r * ldc + 8));
      } else {
        for (int l = 0; l < kTileCols256; ++l) acc[r][l] = r < rows && l < width ? c[r * ldc + l] : 0.0f;
      }
    }
  const __m256 zero = _mm256_setzero_ps();
  __m256i largest = _mm256_setzero_si256();
  const float* ar[kTileRows256];
  for (int r = 0; r < kTileRows256; ++r) ar[r] = o.a + (kTransposed ? r : r * o.rowStride);
  const Index step = kTransposed ? o.step : 1;
  const float* pb = o.panel;
  Index j = 0;
  for (Index k0 = 0; k0 < depth; k0 += kDepth, ++j) {
    const Index k1 = std::min(depth, k0 + kDepth);
    const bool first = j == 0 && !o.resume;
    __m256 part[kTileRows256][2];
    for (auto& row : part) row[0] = row[1] = _mm256_setzero_ps();
    for (Index k = k0; k < k1; ++k) {
      const __m256 b0 = _mm256_loadu_ps(pb + k * kPanel);
      const __m256 b1 = _mm256_loadu_ps(pb + k * kPanel + 8);
      for (int r = 0; r < kTileRows256; ++r) {
        const __m256 av = _mm256_broadcast_ss(ar[r] + k * step);
        part[r][0] = _mm256_fmadd_ps(av, b0, part[r][0]);
        part[r][1] = _mm256_fmadd_ps(av, b1, part[r][1]);
      }
    }
    if constexpr (kStochastic) {
      const __m256i column0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(st.columns + j * kPanel));
      const __m256i column1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(st.columns + j * kPanel + 8));
      const std::uint32_t* rowBits = st.rows + j * kTileRows256;
      for (int r = 0; r < kTileRows256; ++r) {
        const __m256i row = _mm256_set1_epi32(static_cast<int>(rowBits[r]));
        for (int v = 0; v < 2; ++v) {
          const __m256 x = _mm256_add_ps(first ? zero : _mm256_load_ps(acc[r] + 8 * v), part[r][v]);
          _mm256_store_ps(acc[r] + 8 * v, roundStochastic8<kChecked>(x, _mm256_xor_si256(v == 0 ? column0 : column1, row), largest));
        }
      }
    } else {
      for (int r = 0; r < kTileRows256; ++r)
        for (int v = 0; v < 2; ++v) {
          _mm256_store_ps(acc[r] + 8 * v, roundNearest8(_mm256_add_ps(first ? zero : _mm256_load_ps(acc[r] + 8 * v), part[r][v])));
        }
    }
  }
  // Magnitudes are below 2^31: a signed comparison.
  if (kStochastic && kChecked &&
      _mm256_movemask_epi8(_mm256_cmpgt_epi32(largest, _mm256_set1_epi32(static_cast<int>(kLargestHalf)))) != 0)
    return false;
  for (int r = 0; r < rows; ++r) std::copy(acc[r], acc[r] + width, c + r * ldc);
  return true;
}
#endif

}  // namespace

namespace {

#if IPU_X86_KERNELS
// Packs 8 columns of op(B) for 8 reduction indices by an 8 x 8
// transposition in registers: op(B) stored by columns (element (k, l) of the
// block at column[l * stride + k]), the packed panel by rows (element (k, l)
// at out[k * kPanel + l]).
IPU_TARGET_AVX2 void transpose8x8(const float* column, Index stride, float* out) {
  const __m256 r0 = _mm256_loadu_ps(column), r1 = _mm256_loadu_ps(column + stride);
  const __m256 r2 = _mm256_loadu_ps(column + 2 * stride), r3 = _mm256_loadu_ps(column + 3 * stride);
  const __m256 r4 = _mm256_loadu_ps(column + 4 * stride), r5 = _mm256_loadu_ps(column + 5 * stride);
  const __m256 r6 = _mm256_loadu_ps(column + 6 * stride), r7 = _mm256_loadu_ps(column + 7 * stride);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)), u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)), u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  _mm256_storeu_ps(out, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(out + kPanel, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(out + 2 * kPanel, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(out + 3 * kPanel, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(out + 4 * kPanel, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(out + 5 * kPanel, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(out + 6 * kPanel, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(out + 7 * kPanel, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// hash32 (counter_rng.h) on 8 lanes.
IPU_TARGET_AVX2 inline __m256i hash8(__m256i x) {
  x = _mm256_mullo_epi32(_mm256_xor_si256(x, _mm256_srli_epi32(x, 16)), _mm256_set1_epi32(static_cast<int>(kHash32Mul1)));
  x = _mm256_mullo_epi32(_mm256_xor_si256(x, _mm256_srli_epi32(x, 15)), _mm256_set1_epi32(static_cast<int>(kHash32Mul2)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// drawFields for the leading multiple of 8 positions; returns how many. The
// draws of consecutive positions hash an arithmetic sequence (modulo 2^32,
// as draw32 computes it), so 8 lanes advance by one addition.
IPU_TARGET_AVX2 std::size_t drawFieldsAvx2(Stream32 s, std::uint32_t first, std::size_t n, std::uint32_t* out) {
  const std::size_t whole = n / 8 * 8;
  __m256i x = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first * s.mul + s.add)),
                               _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(s.mul))));
  const __m256i step = _mm256_set1_epi32(static_cast<int>(8u * s.mul));
  for (std::size_t i = 0; i < whole; i += 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_srli_epi32(hash8(x), kFieldShift));
    x = _mm256_add_epi32(x, step);
  }
  return whole;
}
#endif

// The random fields (the top 13 bits of draw32) of positions first, first +
// 1, ..., of stream s, into out[0 .. n): the rows' or the columns' bits of a
// block. With `vector`, 8 at a time (a product's rows and columns draw
// (rows + columns) x blocks of them, a tenth of a small product's time drawn
// one by one).
void drawFields(Stream32 s, std::uint32_t first, std::size_t n, std::uint32_t* out, [[maybe_unused]] bool vector) {
  std::size_t done = 0;
#if IPU_X86_KERNELS
  if (vector) done = drawFieldsAvx2(s, first, n, out);
#endif
  for (std::size_t i = done; i < n; ++i) out[i] = draw32(s, first + static_cast<std::uint32_t>(i)) >> kFieldShift;
}

// The largest |op(A)| of rows [r0, r0 + nr) of a product of depth `depth`,
// as bits (unsigned maximum: NaN above infinity).
std::uint32_t largestMagnitude(Operand a, Index r0, Index nr, Index depth) {
  std::uint32_t largest = 0;
  const bool rowsContiguous = a.colStride == 1;
  const Index outer = rowsContiguous ? nr : depth, inner = rowsContiguous ? depth : nr;
  const Index outerStride = rowsContiguous ? a.rowStride : a.colStride;
  const float* first = a.data + r0 * a.rowStride;
  for (Index i = 0; i < outer; ++i) {
    const float* line = first + i * outerStride;
    for (Index k = 0; k < inner; ++k) largest = std::max(largest, bitsOf(line[k]) & ~kSign);
  }
  return largest;
}

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

namespace {

// The kernel that computes a product asked to use `kernel` on this host.
Kernel resolve(Kernel kernel) {
  if (kernel == Kernel::Best) {
    switch (hostVectorIsa()) {
      case VectorIsa::Avx512: return Kernel::Avx512;
      case VectorIsa::Avx2: return Kernel::Avx2;
      case VectorIsa::None: return Kernel::Portable;
    }
  }
  return kernelSupported(kernel) ? kernel : Kernel::Portable;
}

}  // namespace

PartialsProduct::~PartialsProduct() {
  if (tSpare.size() < kSpareBuffers) tSpare.push_back(std::move(packed_));
}

// Where the packed op(B) holds element (k, l) of panel p: the stretches of
// kStretch reduction indices one after the other, each with every panel's
// rows of it (the tiles read a stretch of all panels; laid out panel after
// panel, the panels' stretches would sit a multiple of 128 KB apart and
// share the second-level cache's sets).
Index PartialsProduct::packedOffset(Index p, Index k) const {
  const Index panels = (cols_ + kPanel - 1) / kPanel;
  const Index k0 = k / kStretch * kStretch, length = std::min(kStretch, depth_ - k0);
  return k0 * panels * kPanel + (p * length + k - k0) * kPanel;
}

// Panel p of op(B): its kPanel columns (zero past the last), read along op(B)'s
// contiguous dimension.
void PartialsProduct::packPanel(Index p) {
  for (Index s0 = 0; s0 < depth_; s0 += kStretch) packPanel(p, s0, std::min(depth_, s0 + kStretch));
}

// Rows [kBegin, kEnd) of panel p, within one stretch.
void PartialsProduct::packPanel(Index p, Index kBegin, Index kEnd) {
  float* out = packed_.data() + packedOffset(p, kBegin) - kBegin * kPanel;   // row k at out + k * kPanel
  const Index col0 = p * kPanel;
  const Index width = std::min<Index>(kPanel, cols_ - col0);
  if (b_.colStride == 1 && width == kPanel) {
    for (Index k = kBegin; k < kEnd; ++k) {
      const float* in = b_.data + k * b_.rowStride + col0;
      for (Index l = 0; l < kPanel; ++l) out[k * kPanel + l] = in[l];   // a fixed-length copy, vectorised
    }
  } else if (b_.colStride == 1) {
    for (Index k = kBegin; k < kEnd; ++k)
      for (Index l = 0; l < kPanel; ++l) out[k * kPanel + l] = l < width ? b_.data[k * b_.rowStride + col0 + l] : 0.0f;
  } else {
    Index done = kBegin;   // reduction indices packed by 8 x 8 transpositions
#if IPU_X86_KERNELS
    if (b_.rowStride == 1 && width == kPanel && hostVectorIsa() != VectorIsa::None) {
      done = kBegin + (kEnd - kBegin) / 8 * 8;
      for (Index k0 = kBegin; k0 < done; k0 += 8)
        for (Index l0 = 0; l0 < kPanel; l0 += 8)
          transpose8x8(b_.data + (col0 + l0) * b_.colStride + k0, b_.colStride, out + k0 * kPanel + l0);
    }
#endif
    // Read along op(B)'s columns (contiguous), a few reduction indices at a
    // time, so that the panel rows written stay in cache.
    constexpr Index kReadRows = 64;
    for (Index k0 = done; k0 < kEnd; k0 += kReadRows) {
      const Index k1 = std::min(kEnd, k0 + kReadRows);
      for (Index l = 0; l < kPanel; ++l) {
        if (l >= width) {
          for (Index k = k0; k < k1; ++k) out[k * kPanel + l] = 0.0f;
          continue;
        }
        const float* in = b_.data + (col0 + l) * b_.colStride;
        for (Index k = k0; k < k1; ++k) out[k * kPanel + l] = in[k * b_.rowStride];
      }
    }
  }
}

PartialsProduct::PartialsProduct(Operand b, Index depth, Index cols, bool stochastic, std::uint64_t key, Kernel kernel,
                                 const ParallelFor& parallel)
    : b_(b), depth_(std::max<Index>(depth, 0)), cols_(std::max<Index>(cols, 0)), stochastic_(stochastic),
      kernel_(resolve(kernel)) {
  // op(B) packed as panels of kPanel columns (packPanel), a few panels per
  // task; a small product's are not worth handing out.
  const Index panels = (cols_ + kPanel - 1) / kPanel;
  packed_ = packedBuffer(static_cast<std::size_t>(panels * depth_ * kPanel));   // every element written by packPanel
  constexpr Index kPackTasks = 8;
  const Index perTask = std::max<Index>(1, (panels + kPackTasks - 1) / kPackTasks);
  const auto tasks = static_cast<std::size_t>((panels + perTask - 1) / perTask);
  std::vector<std::uint32_t> taskMaxB(tasks, 0);   // the largest |op(B)|'s bits of each task's panels, for bounded()
  const Index blocks = (depth_ + kDepth - 1) / kDepth;
  std::vector<Stream32> columnStreams;   // block j's stream of column draws (drawn into columnBits_ here)
  if (stochastic_) {
    const std::uint64_t rowKey = subKey(key, 0), columnKey = subKey(key, 1);
    rowStreams_.resize(static_cast<std::size_t>(blocks));
    columnStreams.resize(static_cast<std::size_t>(blocks));
    for (Index j = 0; j < blocks; ++j) {
      rowStreams_[static_cast<std::size_t>(j)] = stream32(rowKey, static_cast<std::uint32_t>(j));
      columnStreams[static_cast<std::size_t>(j)] = stream32(columnKey, static_cast<std::uint32_t>(j));
    }
    columnBits_.resize(static_cast<std::size_t>(panels * blocks * kPanel));
  }
  auto pack = [&](std::size_t t) {
    const Index p0 = static_cast<Index>(t) * perTask, p1 = std::min(panels, p0 + perTask);
    for (Index p = p0; p < p1; ++p) packPanel(p);
    if (!stochastic_) return;
    // The columns' random bits of every block (TileStreams::columns), zero past the last column.
    for (Index p = p0; p < p1; ++p)
      for (Index j = 0; j < blocks; ++j) {
        std::uint32_t* out = columnBits_.data() + (p * blocks + j) * kPanel;
        const Index live = std::min<Index>(kPanel, cols_ - p * kPanel);
        drawFields(columnStreams[static_cast<std::size_t>(j)], static_cast<std::uint32_t>(p * kPanel), static_cast<std::size_t>(live), out,
                   kernel_ != Kernel::Portable);
        std::fill(out + live, out + kPanel, 0u);
      }
    std::uint32_t largest = 0;
    for (Index s0 = 0; s0 < depth_; s0 += kStretch)   // the tasks' panels are contiguous in each stretch
      for (auto v = packed_.begin() + packedOffset(p0, s0); v != packed_.begin() + packedOffset(p0, s0) + (p1 - p0) * std::min(kStretch, depth_ - s0) * kPanel; ++v)
        largest = std::max(largest, bitsOf(*v) & ~kSign);
    taskMaxB[t] = largest;
  };
  if (parallel && tasks > 1 && depth_ * cols_ >= 64 * 1024) parallel(tasks, pack);
  else
    for (std::size_t t = 0; t < tasks; ++t) pack(t);
  if (!stochastic_) return;
  for (std::uint32_t m : taskMaxB) maxB_ = std::max(maxB_, m);
}

void PartialsProduct::rows(Operand a, Index r0, Index nr, float* c) const {
  if (nr <= 0 || cols_ <= 0) return;
  if (depth_ == 0) {
    std::fill(c + r0 * cols_, c + (r0 + nr) * cols_, 0.0f);
    return;
  }
  // They read op(A) in place along one of its storage's dimensions.
  const bool contiguous = a.rowStride == 1 || a.colStride == 1;
  if (contiguous && kernel_ == Kernel::Avx512) avx512Rows(a, r0, nr, c);
  else if (contiguous && kernel_ == Kernel::Avx2) avx2Rows(a, r0, nr, c);
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
  const Index blocks = (depth_ + kDepth - 1) / kDepth;
  std::vector<std::uint32_t> row(stochastic_ ? static_cast<std::size_t>(blocks) : 0);   // the row's draw of each block
  for (Index i = r0; i < r0 + nr; ++i) {
    for (std::size_t j = 0; j < row.size(); ++j) row[j] = draw32(rowStreams_[j], static_cast<std::uint32_t>(i)) >> kFieldShift;
    float acc[kPanel] = {};
    Index j = 0;
    for (Index k0 = 0; k0 < depth_; k0 += kDepth, ++j) {
      float part[kPanel] = {};
      const float* pb = packed_.data() + packedOffset(p, k0) - k0 * kPanel;   // row k at pb + k * kPanel (a block lies in one stretch)
      for (Index k = k0; k < std::min(depth_, k0 + kDepth); ++k) {
        const float aik = a.data[i * a.rowStride + k * a.colStride];
        for (int l = 0; l < kPanel; ++l) part[l] = std::fma(aik, pb[k * kPanel + l], part[l]);
      }
      const std::uint32_t* column = stochastic_ ? columnBits_.data() + (p * blocks + j) * kPanel : nullptr;
      for (int l = 0; l < width; ++l)
        acc[l] = stochastic_ ? roundPartialStochastic(acc[l] + part[l], row[static_cast<std::size_t>(j)] ^ column[l])
                             : roundNearestHalf(acc[l] + part[l]);
    }
    std::copy(acc, acc + width, c + i * cols_ + col0);
  }
}

// Rows [r0, r0 + nr) of C by tiles of kRows rows and kCols columns (kCols
// divides kPanel): `tile(operands, transposed, checked, streams, c, rows)`
// computes one and returns false when it met a value it leaves to the
// element-by-element kernel (which then computes the tile's whole panel for
// those rows); `checked` is false where bounded() has shown that no value
// exceeds 65504.
template <int kRows, int kCols, typename Tile>
void PartialsProduct::tiles(Operand a, Index r0, Index nr, float* c, Tile tile) const {
  const Index panels = (cols_ + kPanel - 1) / kPanel;
  // A transposed op(A) (its rows are its storage's columns) is copied, a
  // chunk at a time, into the order the tiles read it: tile t's element
  // (r, k) at t * kRows * depth + k * kRows + r, rows past the end zero. Read
  // in place, each of a tile's reduction steps would touch a fresh cache
  // line at the storage's row stride, half of which the tile uses (a weight
  // gradient's product took twice Eigen's time that way).
  const bool packA = a.rowStride == 1 && a.colStride != 1;
  thread_local std::vector<float> tPackedA;
  thread_local std::vector<std::uint32_t> tRowBits;
  const Index blocks = (depth_ + kDepth - 1) / kDepth;
  // A last tile of fewer than kRows rows reads a copy of them, padded with
  // zero rows, since reading the matrix in place would pass its end.
  const Index full = nr / kRows * kRows;
  std::unique_ptr<float[]> edge;
  if (full < nr && !packA) {
    edge.reset(new float[static_cast<std::size_t>(kRows * depth_)]);
    for (int r = 0; r < kRows; ++r)
      for (Index k = 0; k < depth_; ++k)
        edge[static_cast<std::size_t>(r * depth_ + k)] = r0 + full + r < r0 + nr ? a.data[(r0 + full + r) * a.rowStride + k * a.colStride] : 0.0f;
  }
  // For each chunk of kChunkRows rows, before its first tiles: its rows'
  // random bits of every block, per tile (TileStreams::rows), a transposed
  // op(A) packed, and whether its tiles must check for values above 65504.
  // (Just before: the pass over the chunk's op(A) brings it into the cache
  // for its tiles; done for all chunks first, the product took a tenth longer.)
  const Index blockTiles = (nr + kRows - 1) / kRows;
  const Index chunks = (nr + kChunkRows - 1) / kChunkRows;
  std::vector<char> checked(static_cast<std::size_t>(chunks), 0);
  if (stochastic_) tRowBits.resize(static_cast<std::size_t>(blockTiles * blocks * kRows));
  if (packA) tPackedA.resize(static_cast<std::size_t>(blockTiles * kRows * depth_));
  auto prepare = [&](Index q0, Index qn) {
    const Index chunkTiles = (qn + kRows - 1) / kRows;
    const Index t0 = (q0 - r0) / kRows;   // the chunk's first tile in the block
    // The largest |op(A)| of the chunk (bits; unsigned maximum: NaN above
    // infinity), for bounded(): while packing a transposed op(A), else by a
    // pass over the rows.
    std::uint32_t maxA = 0;
    if (stochastic_) {
      std::uint32_t fields[kChunkRows];
      for (Index j = 0; j < blocks; ++j) {
        drawFields(rowStreams_[static_cast<std::size_t>(j)], static_cast<std::uint32_t>(q0), static_cast<std::size_t>(qn), fields,
                   kernel_ != Kernel::Portable);
        for (Index t = 0; t < chunkTiles; ++t)
          for (int r = 0; r < kRows; ++r) {
            const Index i = t * kRows + r;
            tRowBits[static_cast<std::size_t>(((t0 + t) * blocks + j) * kRows + r)] = i < qn ? fields[i] : 0u;
          }
      }
    }
    if (packA) {
      for (Index k = 0; k < depth_; ++k) {
        const float* in = a.data + q0 + k * a.colStride;
        if (stochastic_)
          for (Index i = 0; i < qn; ++i) maxA = std::max(maxA, bitsOf(in[i]) & ~kSign);
        for (Index t = 0; t < chunkTiles; ++t) {
          float* out = tPackedA.data() + ((t0 + t) * depth_ + k) * kRows;
          const Index live = std::min<Index>(kRows, qn - t * kRows);
          std::copy_n(in + t * kRows, live, out);
          std::fill(out + live, out + kRows, 0.0f);
        }
      }
    } else if (stochastic_) {
      maxA = largestMagnitude(a, q0, qn, depth_);
    }
    checked[static_cast<std::size_t>((q0 - r0) / kChunkRows)] = stochastic_ && !bounded(maxA);
  };
  // The tiles: a stretch of kStretch reduction indices at a time over
  // all chunks (a deep product's panels would not stay in the first-level
  // cache whole, nor op(B) in the second); within it a chunk's row tiles
  // pass over a panel of op(B) while it stays in cache. A tile resumes its
  // accumulators from C where the previous stretch left them: the blocks,
  // their order and their random bits are those of one pass, and so are the
  // results (tested against the definition).
  const Index stretches = (depth_ + kStretch - 1) / kStretch;
  constexpr int kHalves = kPanel / kCols;
  // Tiles (tile, panel, column offset) that a stretch left to portableTile,
  // which computes the whole reduction: later stretches skip them.
  std::vector<bool> elementwise(stretches > 1 ? static_cast<std::size_t>(blockTiles * panels * kHalves) : 0);
  for (Index s = 0; s < stretches; ++s) {
    const Index k0 = s * kStretch;
    const Index j0 = k0 / kDepth;   // the stretch's first block
    for (Index q0 = r0; q0 < r0 + nr; q0 += kChunkRows) {
      const Index qn = std::min(kChunkRows, r0 + nr - q0);
      if (s == 0) {
        prepare(q0, qn);
      } else {
        // The chunk's op(A) in this stretch, fetched ahead of its tiles
        // (which otherwise wait for it from the third-level cache: the whole
        // of a deep product's op(A) does not stay in the second; the same
        // pass that prepare() makes over the first stretch).
        const Index kn = std::min(kStretch, depth_ - k0);
        if (packA) {
          const float* from = tPackedA.data() + (q0 - r0) * depth_;
          for (Index t = 0; t < (qn + kRows - 1) / kRows; ++t)
            for (Index e = 0; e < kn * kRows; e += 16) __builtin_prefetch(from + t * kRows * depth_ + k0 * kRows + e);
        } else if (a.colStride == 1) {
          for (Index i = q0; i < q0 + qn; ++i)
            for (Index e = 0; e < kn; e += 16) __builtin_prefetch(a.data + i * a.rowStride + k0 + e);
        }
      }
      const bool check = checked[static_cast<std::size_t>((q0 - r0) / kChunkRows)] != 0;
      for (Index p = 0; p < panels; ++p)
        for (int h = 0; h < kPanel; h += kCols) {
          const Index col0 = p * kPanel + h;
          if (col0 >= cols_) break;
          TileOperands o{};
          o.panel = packed_.data() + packedOffset(p, k0) + h;
          o.width = static_cast<int>(std::min<Index>(kCols, cols_ - col0));
          o.depth = std::min(kStretch, depth_ - k0);
          o.resume = s > 0;
          for (Index i0 = q0; i0 < q0 + qn; i0 += kRows) {
            const Index t = (i0 - r0) / kRows;
            const auto flag = static_cast<std::size_t>((t * panels + p) * kHalves + h / kCols);
            if (stretches > 1 && elementwise[flag]) continue;
            const int rows = static_cast<int>(std::min<Index>(kRows, q0 + qn - i0));
            const bool inPlace = rows == kRows;
            if (packA) {
              o.a = tPackedA.data() + t * kRows * depth_;
              o.rowStride = 1;
              o.step = kRows;
            } else {
              o.a = inPlace ? a.data + i0 * a.rowStride : edge.get();
              o.rowStride = inPlace ? a.rowStride : depth_;
              o.step = inPlace ? a.colStride : 1;
            }
            o.a += k0 * o.step;
            const TileStreams st{stochastic_ ? columnBits_.data() + (p * blocks + j0) * kPanel + h : nullptr,
                                 stochastic_ ? tRowBits.data() + (t * blocks + j0) * kRows : nullptr};
            if (!tile(o, packA || (inPlace && a.rowStride == 1), check, st, c + i0 * cols_ + col0, rows)) {
              portableTile(a, i0, rows, p, c);
              if (stretches > 1) elementwise[flag] = true;
            }
          }
        }
    }
  }
}

// Whether rows of op(A) whose largest magnitude has the bits maxA provably
// meet no value above 65504 in the product, so that the stochastic roundings
// need not look for them: with M the largest |a| times the largest |b| (both
// finite), a block's sum is at most 16 M (1 + 2^-20); adding it to the
// accumulator (in fp32) and rounding to fp16 grow a magnitude by at most one
// binary16 ulp (2^-10 relative, or 2^-24 in the subnormal range) and an fp32
// rounding, so over J <= 256 blocks every value stays below
// depth M (1 + 2^-9)^J + 1, less than 1.7 depth M + 1: depth M <= 16384
// keeps it below 28,000.
bool PartialsProduct::bounded(std::uint32_t maxA) const {
  if (depth_ > 256 * kDepth || maxB_ >= kInfinity || maxA >= kInfinity) return false;
  return static_cast<double>(depth_) * static_cast<double>(floatOf(maxA)) * static_cast<double>(floatOf(maxB_)) <= 16384.0;
}

void PartialsProduct::avx512Rows([[maybe_unused]] Operand a, [[maybe_unused]] Index r0, [[maybe_unused]] Index nr,
                                 [[maybe_unused]] float* c) const {
#if IPU_X86_KERNELS
  const Index ldc = cols_;
  const bool stochastic = stochastic_;
  tiles<kTileRows512, kPanel>(a, r0, nr, c, [&](const TileOperands& o, bool transposed, bool checked, const TileStreams& st, float* ct, int rows) {
    if (stochastic && checked)
      return transposed ? tile512<true, true, true>(o, st, ct, ldc, rows) : tile512<true, false, true>(o, st, ct, ldc, rows);
    if (stochastic)
      return transposed ? tile512<true, true, false>(o, st, ct, ldc, rows) : tile512<true, false, false>(o, st, ct, ldc, rows);
    return transposed ? tile512<false, true, false>(o, st, ct, ldc, rows) : tile512<false, false, false>(o, st, ct, ldc, rows);
  });
#endif
}

void PartialsProduct::avx2Rows([[maybe_unused]] Operand a, [[maybe_unused]] Index r0, [[maybe_unused]] Index nr,
                               [[maybe_unused]] float* c) const {
#if IPU_X86_KERNELS
  const Index ldc = cols_;
  const bool stochastic = stochastic_;
  tiles<kTileRows256, kTileCols256>(a, r0, nr, c, [&](const TileOperands& o, bool transposed, bool checked, const TileStreams& st, float* ct, int rows) {
    if (stochastic && checked)
      return transposed ? tile256<true, true, true>(o, st, ct, ldc, rows) : tile256<true, false, true>(o, st, ct, ldc, rows);
    if (stochastic)
      return transposed ? tile256<true, true, false>(o, st, ct, ldc, rows) : tile256<true, false, false>(o, st, ct, ldc, rows);
    return transposed ? tile256<false, true, false>(o, st, ct, ldc, rows) : tile256<false, false, false>(o, st, ct, ldc, rows);
  });
#endif
}

}  // namespace ipu::emu::fp16
