// IEEE 754 binary16 ("fp16", "half") as the IPU stores it, emulated bit-exactly
// on the host: conversions between float and binary16 with round-to-nearest-
// even (subnormals, infinities and NaN included), and stochastic rounding,
// where a value rounds up with probability equal to its distance from the
// lower neighbour in units of the gap between the two neighbours, so that the
// rounding is unbiased in expectation. The emulator keeps fp16 tensors as
// float values that are exactly representable in binary16: arithmetic on them
// is fp32 arithmetic, and every store rounds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ipu::emu::fp16 {

inline constexpr float kMax = 65504.0f;

std::uint16_t fromFloat(float x);                         // round to nearest, ties to even
float toFloat(std::uint16_t h);                           // exact
// Stochastic rounding of x, with `random` a uniform 32-bit draw.
std::uint16_t fromFloatStochastic(float x, std::uint32_t random);

inline float roundNearest(float x) { return toFloat(fromFloat(x)); }
inline float roundStochastic(float x, std::uint32_t random) { return toFloat(fromFloatStochastic(x, random)); }

// The 32 random bits with which the stochastic roundings of stream `key`
// round the value at position n: draw32(key, n) (counter_rng.h, a 32-bit
// hash of a keyed permutation of the position; cheap enough to draw for
// every element a kernel writes).
std::uint32_t roundingDraw(std::uint64_t key, std::uint64_t n);

// Which of the hand-written vector kernels computes: the widest the host
// supports (Best), a given one, or element by element (Portable). Every
// kernel gives the same bits (the tests run each one the host has on the
// same inputs); a kernel the host lacks computes as Portable. The buffer
// roundings below have an AVX-512 kernel only (Avx2 computes them element by
// element); the products with fp16 partials (fp16_product.h) have both.
enum class Kernel { Best, Avx512, Avx2, Portable };

// Whether the host runs `kernel` (Best and Portable: always).
bool kernelSupported(Kernel kernel);

// Round `n` floats in place; stochastic rounding rounds element i with
// roundingDraw(key, offset + i).
void roundNearest(float* data, std::size_t n, Kernel kernel = Kernel::Best);
void roundStochastic(float* data, std::size_t n, std::uint64_t key, std::size_t offset = 0, Kernel kernel = Kernel::Best);

}  // namespace ipu::emu::fp16
