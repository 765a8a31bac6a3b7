#include "runtime/emulator/fp16.h"

#include <cmath>
#include <cstring>

#include "runtime/emulator/counter_rng.h"

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

// The buffer versions round millions of values per step: values whose result
// is a normal binary16 (2^-14 <= |x| < 65520, or 65504 when rounding up) take a branch-free path on the
// float's bits, which gives the same result as fromFloat/fromFloatStochastic
// (the tests compare them); the rest go through the general conversion.
namespace {
constexpr std::uint32_t kFastLow = 0x38800000u;   // 2^-14, the smallest normal binary16
constexpr std::uint32_t kFastHigh = 0x477FF000u;  // 65520: from here on nearest rounding gives infinity
constexpr std::uint32_t kFastHighStochastic = 0x477FE000u;  // 65504: above it rounding up gives infinity
}  // namespace

void roundNearest(float* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t b = bitsOf(data[i]);
    const std::uint32_t a = b & 0x7FFFFFFFu;
    if (a >= kFastLow && a < kFastHigh) {
      const std::uint32_t odd = (a >> 13) & 1u;
      data[i] = floatOf((b & 0x80000000u) | ((a + 0xFFFu + odd) & 0xFFFFE000u));
    } else if (a < kFastLow) {
      // Subnormal results: multiples of 2^-24. Scaling by 2^24 is exact, and
      // adding and subtracting 2^23 rounds to an integer, ties to even.
      const float y = floatOf(a) * 16777216.0f;
      const float units = (y + 8388608.0f) - 8388608.0f;
      data[i] = floatOf((b & 0x80000000u) | bitsOf(units * 5.9604644775390625e-8f));
    } else {
      data[i] = toFloat(fromFloat(data[i]));
    }
  }
}

void roundStochastic(float* data, std::size_t n, std::uint64_t key) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t r = static_cast<std::uint32_t>(draw64(key, i) >> 32);
    const std::uint32_t b = bitsOf(data[i]);
    const std::uint32_t a = b & 0x7FFFFFFFu;
    if (a >= kFastLow && a < kFastHighStochastic) {
      const std::uint32_t up = (r >> 19) < (a & 0x1FFFu) ? 1u : 0u;
      data[i] = floatOf((b & 0x80000000u) | ((a & 0xFFFFE000u) + (up << 13)));
    } else if (a < kFastLow) {
      // Subnormal results: the fraction of 2^-24 above the truncation, at
      // 32 bits (what fromFloatStochastic compares; below 2^-32 of an ulp,
      // never up).
      const float y = floatOf(a) * 16777216.0f;
      const float lo = std::floor(y);
      const auto threshold = static_cast<std::uint64_t>(static_cast<double>(y - lo) * 4294967296.0);
      const float units = lo + (static_cast<std::uint64_t>(r) < threshold ? 1.0f : 0.0f);
      data[i] = floatOf((b & 0x80000000u) | bitsOf(units * 5.9604644775390625e-8f));
    } else {
      data[i] = toFloat(fromFloatStochastic(data[i], r));
    }
  }
}

}  // namespace ipu::emu::fp16
