// The proposers' random numbers: SplitMix64 (Steele, Lea and Flood 2014), a
// counter-based generator whose stream is a pure function of its 64-bit seed.
// A proposal seeds one from (sweep seed, trial index), so the same sweep
// proposes the same trials on any machine and in any agent, and no state has
// to be stored between proposals. (std::mt19937 would do too, but the
// standard library's distributions are not specified bit-for-bit, so
// uniform/normal draws are derived here.)
#pragma once

#include <cmath>
#include <cstdint>

namespace ipu::sweep {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  // A generator for one (seed, stream) pair: streams of the same seed are
  // unrelated, as are the same stream of different seeds.
  static SplitMix64 forStream(std::uint64_t seed, std::uint64_t stream) {
    SplitMix64 mixer(seed ^ 0x5851f42d4c957f2dULL);
    std::uint64_t a = mixer.next();
    SplitMix64 second(a + stream * 0x9e3779b97f4a7c15ULL);
    return SplitMix64(second.next());
  }

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1): for logarithms.
  double openUniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  // Uniform integer in [0, n), n > 0, without modulo bias (Lemire's method
  // would be faster; rejection is simpler and this is not hot).
  std::uint64_t below(std::uint64_t n) {
    std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
    std::uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
  // Standard normal by Box-Muller (one of the pair; simpler than caching).
  double normal() {
    double u1 = openUniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::uint64_t state_;
};

}  // namespace ipu::sweep
