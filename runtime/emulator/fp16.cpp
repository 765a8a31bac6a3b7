#include "runtime/emulator/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/vector_isa.h"

#if IPU_X86_KERNELS
#include <immintrin.h>
#endif

namespace ipu::emu::fp16 {

namespace {

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

// Truncate |x| (given by its float bits without sign) towards zero to binary16,
// and return the bits that were dropped as a fraction of one binary16 ulp in
// `remainder` (numerator) over 2^`shift` (denominator). Infinity/NaN are not
// handled here. The result may be 0x7C00 (overflow to infinity) only when the
// exponent is beyond binary16's range.
struct Truncated {
  std::uint32_t half;      // magnitude bits of the truncated value
  std::uint32_t remainder; // dropped bits
  int shift;               // number of dropped bits (remainder < 2^shift)
};

Truncated truncateMagnitude(std::uint32_t a) {
  const int exp = static_cast<int>(a >> 23);  // biased float exponent
  std::uint32_t mant = a & 0x7FFFFFu;
  if (exp >= 0x8F) return {0x7C00u, 0, 0};    // |x| >= 2^16: beyond every finite binary16
  if (exp >= 0x71) {                           // normal binary16 range (2^-14 and up)
    const std::uint32_t half = (static_cast<std::uint32_t>(exp - 0x70) << 10) | (mant >> 13);
    return {half, mant & 0x1FFFu, 13};
  }
  // Subnormal binary16 (or zero): value = m * 2^-24 with m < 1024.
  if (exp == 0) {
    // Float subnormals are below 2^-126: far below half an fp16 ulp.
    return {0, mant, 49};  // the remainder is a negligible fraction; its exact size only matters as "nonzero"
  }
  mant |= 0x800000u;                           // implicit bit
  const int shift = 0x7E - exp;                // 14 + (0x70 - exp) dropped mantissa bits beyond 13
  if (shift >= 32) return {0, mant, 49};
  // value = mant * 2^(exp-127-23); in units of 2^-24: mant * 2^(exp-126) = mant >> (126-exp).
  return {mant >> shift, mant & ((1u << shift) - 1u), shift};
}

}  // namespace

std::uint16_t fromFloat(float x) {
  const std::uint32_t b = bitsOf(x);
  const std::uint32_t sign = (b >> 16) & 0x8000u;
  const std::uint32_t a = b & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) {                      // Inf or NaN
    if (a == 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
    std::uint32_t payload = (a >> 13) & 0x3FFu;
    if (payload == 0) payload = 0x200u;        // keep it a NaN
    return static_cast<std::uint16_t>(sign | 0x7C00u | payload);
  }
  Truncated t = truncateMagnitude(a);
  if (t.half >= 0x7C00u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  std::uint32_t h = t.half;
  if (t.shift > 0 && t.shift < 32) {
    const std::uint32_t halfway = 1u << (t.shift - 1);
    if (t.remainder > halfway || (t.remainder == halfway && (h & 1u))) ++h;  // may carry into the exponent, or to Inf
  }
  // shift 49 marks a float subnormal or a value below 2^-25 that cannot reach halfway... except
  // values in [2^-25, 2^-24) whose shift was < 32 are handled above.
  return static_cast<std::uint16_t>(sign | h);
}

float toFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return floatOf(sign | 0x7F800000u | (mant << 13));
  if (exp != 0) return floatOf(sign | ((exp + 0x70u) << 23) | (mant << 13));
  if (mant == 0) return floatOf(sign);
  // Subnormal: normalise.
  int e = -1;
  do {
    mant <<= 1;
    ++e;
  } while ((mant & 0x400u) == 0);
  return floatOf(sign | (static_cast<std::uint32_t>(0x70 - e) << 23) | ((mant & 0x3FFu) << 13));
}

std::uint32_t roundingDraw(std::uint64_t key, std::uint64_t n) { return draw32(key, n); }

std::uint16_t fromFloatStochastic(float x, std::uint32_t random) {
  const std::uint32_t b = bitsOf(x);
  const std::uint32_t sign = (b >> 16) & 0x8000u;
  const std::uint32_t a = b & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return fromFloat(x);
  Truncated t = truncateMagnitude(a);
  if (t.half >= 0x7C00u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  std::uint32_t h = t.half;
  // Round up with probability remainder / 2^shift, compared at 32 bits of resolution.
  if (t.remainder != 0) {
    bool up;
    if (t.shift <= 32) {
      const std::uint64_t threshold = static_cast<std::uint64_t>(t.remainder) << (32 - t.shift);
      up = static_cast<std::uint64_t>(random) < threshold;
    } else {
      up = false;  // below 2^-56 of an ulp: probability under 2^-32
    }
    if (up) ++h;  // the step above 65504 is infinity, as for an overflowing round-to-nearest
  }
  return static_cast<std::uint16_t>(sign | h);
}

// The buffer versions round millions of values per step. They work on chunks
// of kLanes values with straight-line code the compiler vectorises: values
// whose result is a normal binary16 (2^-14 <= |x| < 65520, or 65504 when
// rounding up) are rounded on the float's bits, values in the subnormal range
// by float arithmetic that is exact there; both give the same result as
// fromFloat/fromFloatStochastic (the tests compare them). The rare rest
// (overflow, infinities, NaN) goes through the general conversion afterwards.
namespace {
constexpr std::uint32_t kFastLow = 0x38800000u;   // 2^-14, the smallest normal binary16
constexpr std::uint32_t kFastHigh = 0x477FF000u;  // 65520: from here on nearest rounding gives infinity
constexpr std::uint32_t kFastHighStochastic = 0x477FE000u;  // 65504: above it rounding up gives infinity
constexpr std::size_t kLanes = 64;
constexpr float kTwo24 = 16777216.0f;             // 2^24: one binary16 subnormal step is 2^-24
constexpr float kTwoMinus24 = 5.9604644775390625e-8f;
}  // namespace

namespace {

void roundNearestPortable(float* data, std::size_t n) {
  for (std::size_t i0 = 0; i0 < n; i0 += kLanes) {
    const std::size_t m = std::min(kLanes, n - i0);
    float* d = data + i0;
    std::uint32_t slow = 0;
    for (std::size_t i = 0; i < m; ++i) {
      const std::uint32_t b = bitsOf(d[i]);
      const std::uint32_t a = b & 0x7FFFFFFFu;
      const std::uint32_t odd = (a >> 13) & 1u;
      const std::uint32_t normal = (b & 0x80000000u) | ((a + 0xFFFu + odd) & 0xFFFFE000u);
      // Subnormal results: multiples of 2^-24. Scaling by 2^24 is exact, and
      // adding and subtracting 2^23 rounds to an integer, ties to even.
      const float y = floatOf(a) * kTwo24;
      const float units = (y + 8388608.0f) - 8388608.0f;
      const std::uint32_t subnormal = (b & 0x80000000u) | bitsOf(units * kTwoMinus24);
      const bool rest = a >= kFastHigh;        // left as it is for the general conversion below
      slow |= rest ? 1u : 0u;
      d[i] = floatOf(rest ? b : (a < kFastLow ? subnormal : normal));
    }
    if (slow != 0)
      for (std::size_t i = 0; i < m; ++i)
        if ((bitsOf(d[i]) & 0x7FFFFFFFu) >= kFastHigh) d[i] = toFloat(fromFloat(d[i]));
  }
}

#if IPU_X86_KERNELS
// roundNearestPortable by the hardware conversion to binary16 and back
// (vcvtps2ph with round-to-nearest-even, then vcvtph2ps), 16 lanes at a
// time with AVX-512: the same bits as fromFloat then toFloat for every float
// but a signalling NaN, which the hardware makes quiet where fromFloat keeps
// the payload as it is; NaN lanes go through the element conversion (the
// tests compare them on a million values, NaN included). Returns how many
// leading elements it rounded.
IPU_TARGET_AVX512 std::size_t roundNearestAvx512(float* data, std::size_t n) {
  const std::size_t whole = n / 16 * 16;
  for (std::size_t i0 = 0; i0 < whole; i0 += 16) {
    float* p = data + i0;
    const __m512 x = _mm512_loadu_ps(p);
    const __m512 y = _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    _mm512_storeu_ps(p, y);
    if (nan != 0)
      for (int l = 0; l < 16; ++l)
        if ((nan >> l) & 1u) p[l] = toFloat(fromFloat(x[l]));
  }
  return whole;
}

#endif

}  // namespace

bool kernelSupported(Kernel kernel) {
  switch (kernel) {
    case Kernel::Best:
    case Kernel::Portable: return true;
    case Kernel::Avx512: return hostVectorIsa() == VectorIsa::Avx512;
    case Kernel::Avx2: return hostVectorIsa() == VectorIsa::Avx512 || hostVectorIsa() == VectorIsa::Avx2;
  }
  return false;
}

#if IPU_X86_KERNELS
namespace {

// Whether a buffer rounding asked to use `kernel` runs the AVX-512 kernel.
bool bufferAvx512(Kernel kernel) {
  return (kernel == Kernel::Best || kernel == Kernel::Avx512) && hostVectorIsa() == VectorIsa::Avx512;
}

}  // namespace
#endif

void roundNearest(float* data, std::size_t n, [[maybe_unused]] Kernel kernel) {
  std::size_t done = 0;
#if IPU_X86_KERNELS
  if (bufferAvx512(kernel)) done = roundNearestAvx512(data, n);
#endif
  roundNearestPortable(data + done, n - done);
}

namespace {

void roundStochasticPortable(float* data, std::size_t n, std::uint64_t key, std::size_t offset) {
  std::uint32_t random[kLanes];
  for (std::size_t i0 = 0; i0 < n; i0 += kLanes) {
    const std::size_t m = std::min(kLanes, n - i0);
    float* d = data + i0;
    const std::uint64_t first = offset + i0;
    if ((first >> 32) == ((first + m - 1) >> 32)) {   // one stream word pair for the chunk (all but a chunk that straddles 2^32)
      const Stream32 stream = stream32(key, static_cast<std::uint32_t>(first >> 32));
      for (std::size_t i = 0; i < m; ++i) random[i] = draw32(stream, static_cast<std::uint32_t>(first + i));
    } else {
      for (std::size_t i = 0; i < m; ++i) random[i] = roundingDraw(key, first + i);
    }
    std::uint32_t slow = 0;
    for (std::size_t i = 0; i < m; ++i) {
      const std::uint32_t r = random[i];
      const std::uint32_t b = bitsOf(d[i]);
      const std::uint32_t a = b & 0x7FFFFFFFu;
      const std::uint32_t up = (r >> 19) < (a & 0x1FFFu) ? 1u : 0u;
      const std::uint32_t normal = (b & 0x80000000u) | ((a & 0xFFFFE000u) + (up << 13));
      // Subnormal results: |x| = M 2^-s in units of 2^-24 (M the mantissa
      // with its implicit bit, s = 126 - exponent >= 14). M 2^(32 - s),
      // truncated, is |x| in 32.32 fixed point: its integer part is the
      // truncation and its fraction the dropped part at 32 bits of resolution
      // (what fromFloatStochastic compares; below 2^-32 of an ulp, never up).
      // The shift is clamped so that lanes that take another path stay defined.
      const std::uint32_t e = a >> 23;
      const std::uint32_t mant = (a & 0x7FFFFFu) | (e != 0 ? 0x800000u : 0u);
      const std::uint32_t sw = e != 0 ? 126u - e : 125u;   // wraps for e > 126, clamped next
      const std::uint64_t fixed = (static_cast<std::uint64_t>(mant) << 32) >> (sw < 63u ? sw : 63u);
      const auto lo = static_cast<std::uint32_t>(fixed >> 32);
      const auto threshold = static_cast<std::uint32_t>(fixed);
      const std::uint32_t units = lo + (r < threshold ? 1u : 0u);
      // units <= 1024 as a float without a conversion instruction (2^23 + units, less 2^23).
      const std::uint32_t subnormal = (b & 0x80000000u) | bitsOf((floatOf(0x4B000000u | units) - 8388608.0f) * kTwoMinus24);
      const bool rest = a >= kFastHighStochastic;   // left as it is for the general conversion below
      slow |= rest ? 1u : 0u;
      d[i] = floatOf(rest ? b : (a < kFastLow ? subnormal : normal));
    }
    if (slow != 0)
      for (std::size_t i = 0; i < m; ++i)
        if ((bitsOf(d[i]) & 0x7FFFFFFFu) >= kFastHighStochastic) d[i] = toFloat(fromFloatStochastic(d[i], random[i]));
  }
}

#if IPU_X86_KERNELS
// Helpers of the AVX-512 kernel (functions, not lambdas: a lambda would not
// inherit the kernel's target attribute).
IPU_TARGET_AVX512 inline __m512i splat32(std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
// hash32 (counter_rng.h) on 16 lanes.
IPU_TARGET_AVX512 inline __m512i hash16(__m512i x) {
  x = _mm512_mullo_epi32(_mm512_xor_si512(x, _mm512_srli_epi32(x, 16)), splat32(kHash32Mul1));
  x = _mm512_mullo_epi32(_mm512_xor_si512(x, _mm512_srli_epi32(x, 15)), splat32(kHash32Mul2));
  return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
}

// roundStochasticPortable with AVX-512, 16 elements at a time; returns how
// many leading elements it rounded (the multiple of 16 below n, or none when
// the positions straddle a multiple of 2^32, which the portable code
// handles). The draws (roundingDraw) of consecutive positions are hash32 of
// an arithmetic sequence: 16 lanes advance by one addition. Values whose result
// is a normal binary16 or zero round on the float's bits without a branch:
// adding the complement of the 13 random bits to the 13 bits binary16 drops
// carries into the kept bits exactly when the random bits are below the
// dropped ones (the portable path's comparison). Vectors with a value in the
// subnormal range compute the portable path's fixed-point comparison with
// variable shifts (a shift by 32 or more gives zero, as the 64-bit shifts of
// the portable path do); the rare rest (above 65504, infinities, NaN) goes
// through the element conversion afterwards.
IPU_TARGET_AVX512 std::size_t roundStochasticAvx512(float* data, std::size_t n, std::uint64_t key, std::size_t offset) {
  const std::size_t whole = n / 16 * 16;
  if (whole == 0 || (offset >> 32) != ((offset + whole - 1) >> 32)) return 0;
  const Stream32 stream = stream32(key, static_cast<std::uint32_t>(offset >> 32));
  __m512i x = _mm512_add_epi32(splat32(static_cast<std::uint32_t>(offset) * stream.mul + stream.add),
                               _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), splat32(stream.mul)));
  const __m512i step = splat32(16u * stream.mul);
  for (std::size_t i0 = 0; i0 < whole; i0 += 16) {
    float* p = data + i0;
    const __m512i b = _mm512_loadu_si512(p);
    const __m512i a = _mm512_and_si512(b, splat32(0x7FFFFFFFu));
    // Nonzero magnitudes below 2^-14 (zero wraps to the largest value).
    const __mmask16 tiny = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(a, splat32(1)), splat32(kFastLow - 1));
    const __mmask16 rest = _mm512_cmpge_epu32_mask(a, splat32(kFastHighStochastic));
    // Vectors of binary16 values in the normal range or zero (none of the
    // bits binary16 drops set) round to themselves whatever the draws: a
    // gradient accumulated into zero, a tensor rounded before. Their draws
    // are skipped.
    if ((tiny | rest) == 0 && _mm512_test_epi32_mask(b, splat32(0x1FFFu)) == 0) {
      x = _mm512_add_epi32(x, step);
      continue;
    }
    const __m512i r = hash16(x);
    x = _mm512_add_epi32(x, step);
    const __m512i complement = _mm512_srli_epi32(_mm512_xor_si512(r, splat32(0xFFFFFFFFu)), 19);
    __m512i result = _mm512_and_si512(_mm512_add_epi32(b, complement), splat32(0xFFFFE000u));
    if (tiny != 0) {
      const __m512i mant = _mm512_or_si512(_mm512_and_si512(a, splat32(0x7FFFFFu)), splat32(0x800000u));
      const __m512i sw = _mm512_sub_epi32(splat32(126), _mm512_srli_epi32(a, 23));
      const __m512i whole16 = _mm512_srlv_epi32(mant, sw);
      const __m512i fraction = _mm512_or_si512(_mm512_sllv_epi32(mant, _mm512_sub_epi32(splat32(32), sw)),
                                               _mm512_srlv_epi32(mant, _mm512_sub_epi32(sw, splat32(32))));
      const __m512i units = _mm512_mask_add_epi32(whole16, _mm512_cmplt_epu32_mask(r, fraction), whole16, splat32(1));
      const __m512 value = _mm512_mul_ps(_mm512_cvtepi32_ps(units), _mm512_set1_ps(kTwoMinus24));
      // value | (b & sign): ternary-logic table of A | (B & C) is 0xF8.
      result = _mm512_mask_mov_epi32(result, tiny, _mm512_ternarylogic_epi32(_mm512_castps_si512(value), b, splat32(0x80000000u), 0xF8));
    }
    _mm512_storeu_si512(p, _mm512_mask_mov_epi32(result, rest, b));
    if (rest != 0)
      for (int l = 0; l < 16; ++l)
        if ((rest >> l) & 1u)
          p[l] = toFloat(fromFloatStochastic(p[l], roundingDraw(key, offset + i0 + static_cast<std::size_t>(l))));
  }
  return whole;
}
#endif

}  // namespace

void roundStochastic(float* data, std::size_t n, std::uint64_t key, std::size_t offset, [[maybe_unused]] Kernel kernel) {
  std::size_t done = 0;
#if IPU_X86_KERNELS
  if (bufferAvx512(kernel)) done = roundStochasticAvx512(data, n, key, offset);
#endif
  roundStochasticPortable(data + done, n - done, key, offset + done);
}

}  // namespace ipu::emu::fp16
