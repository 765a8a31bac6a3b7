// A counter-based random number generator: the n-th number of a stream is a
// pure function of (key, n), so any draw can be recomputed in any order, on
// any thread, after a resume, or during recomputation, and give the same bits.
// It is SplitMix64 (Steele, Lea, Flood 2014) addressed by position: the state
// after n steps is key + n * gamma, and the output is its finaliser.
#pragma once

#include <cstdint>
#include <string_view>

namespace ipu::emu {

inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The n-th 64-bit draw of stream `key`.
inline std::uint64_t draw64(std::uint64_t key, std::uint64_t n) {
  return mix64(key + (n + 1) * 0x9E3779B97F4A7C15ULL);
}

// A cheaper generator for the random bits of stochastic rounding, which
// draws for every element a kernel writes and, under fp16 partials, for
// every row and column of a product and 16-deep block (millions of draws per
// step): 32-bit lanes, so that loops over consecutive positions vectorise.
// The stream's key and the high half of the position select two 32-bit
// words through mix64 (once per stream, not per draw): an odd multiplier and
// an offset. The low half of the position is mapped by x -> x * mul + add (a
// permutation of the 32-bit values that differs from key to key, so the
// streams of two keys are not shifted copies of one sequence) and then
// through Wellons's "lowbias32" integer hash (hash-prospector: two
// multiply-xorshift rounds). Statistics: tests/emulator/fp16_test.cpp,
// Fp16.RoundingBitsAreUniformAndUnrelated.
struct Stream32 {
  std::uint32_t mul, add;
};

inline Stream32 stream32(std::uint64_t key, std::uint32_t high) {
  const std::uint64_t m = mix64(key ^ (static_cast<std::uint64_t>(high) * 0xD1B54A32D192ED03ULL));
  return {static_cast<std::uint32_t>(m) | 1u, static_cast<std::uint32_t>(m >> 32)};
}

// lowbias32's two multipliers (its shifts are 16, 15, 16); the vector
// kernels' copies of hash32 (fp16.cpp, fp16_product.cpp) use them too.
constexpr std::uint32_t kHash32Mul1 = 0x7FEB352DU, kHash32Mul2 = 0x846CA68BU;

inline std::uint32_t hash32(std::uint32_t x) {
  x ^= x >> 16;
  x *= kHash32Mul1;
  x ^= x >> 15;
  x *= kHash32Mul2;
  return x ^ (x >> 16);
}

// Draw `low` of a stream (positions high * 2^32 + low).
inline std::uint32_t draw32(Stream32 s, std::uint32_t low) { return hash32(low * s.mul + s.add); }
// The n-th 32-bit draw of stream `key`.
inline std::uint32_t draw32(std::uint64_t key, std::uint64_t n) {
  return draw32(stream32(key, static_cast<std::uint32_t>(n >> 32)), static_cast<std::uint32_t>(n));
}

// Derive a sub-stream key: streams for different purposes never share draws.
inline std::uint64_t subKey(std::uint64_t key, std::uint64_t part) { return mix64(key ^ mix64(part + 0x632BE59BD9B4E019ULL)); }

inline std::uint64_t hashName(std::string_view s) {
  std::uint64_t h = 0xCBF29CE484222325ULL;  // FNV-1a, then mixed
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ULL;
  return mix64(h);
}

// Uniform in [0, 1) with 53 random bits.
inline double uniform(std::uint64_t key, std::uint64_t n) { return static_cast<double>(draw64(key, n) >> 11) * 0x1.0p-53; }

// A sequential reader of one stream, for code that draws a variable number of values.
class Stream {
 public:
  explicit Stream(std::uint64_t key) : key_(key) {}
  std::uint64_t next() { return draw64(key_, n_++); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, bound), bound > 0 (53-bit resolution: the bias is below 2^-40 for our bounds).
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t v = static_cast<std::uint64_t>(uniform() * static_cast<double>(bound));
    return v < bound ? v : bound - 1;
  }
  // Standard normal (Box-Muller; one value per two draws keeps positions simple).
  double normal();

 private:
  std::uint64_t key_;
  std::uint64_t n_ = 0;
};

}  // namespace ipu::emu
