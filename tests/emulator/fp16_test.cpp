// binary16 emulation: exhaustive conversion checks, round-to-nearest-even
// against an independent reference (exact arithmetic in double), overflow,
// and the statistics of stochastic rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"
#include "runtime/emulator/fp16_product.h"
#include "runtime/emulator/numerics.h"
#include "runtime/base/thread_pool.h"

namespace ipu::emu {
namespace {

std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float fromBits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The value of a finite binary16 pattern, computed from the definition.
double halfValue(std::uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

// Reference round-to-nearest-even over all finite halves (binary search on
// the sorted positive values), for |x| below the overflow threshold.
std::uint16_t referenceNearest(double x) {
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  if (a >= 65520.0) return static_cast<std::uint16_t>((neg ? 0x8000 : 0) | 0x7C00);
  std::uint16_t lo = 0, hi = 0x7BFF;
  while (lo < hi) {  // largest pattern with value <= a
    const std::uint16_t mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
    if (halfValue(mid) <= a) lo = mid;
    else hi = static_cast<std::uint16_t>(mid - 1);
  }
  std::uint16_t r = lo;
  if (lo < 0x7BFF || a > halfValue(0x7BFF)) {  // a lies between lo and the next value up
    const double down = halfValue(lo), up = lo < 0x7BFF ? halfValue(static_cast<std::uint16_t>(lo + 1)) : 65536.0;
    if (a - down > up - a || (a - down == up - a && (lo & 1))) r = static_cast<std::uint16_t>(lo + 1);
  }
  if (r == 0x7C00) r = 0x7C00;
  return static_cast<std::uint16_t>((neg ? 0x8000 : 0) | r);
}

TEST(Fp16, EveryPatternRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = fp16::toFloat(static_cast<std::uint16_t>(h));
    const std::uint16_t back = fp16::fromFloat(f);
    ASSERT_EQ(back, h) << std::hex << "pattern 0x" << h;
    const bool nan = ((h >> 10) & 0x1F) == 0x1F && (h & 0x3FF) != 0;
    if (nan) {
      ASSERT_TRUE(std::isnan(f));
    } else if (((h >> 10) & 0x1F) == 0x1F) {
      ASSERT_TRUE(std::isinf(f));
    } else {
      ASSERT_EQ(static_cast<double>(f), halfValue(static_cast<std::uint16_t>(h))) << std::hex << h;
    }
    // Stochastic rounding of a representable value never changes it.
    if (!nan) {
      ASSERT_EQ(fp16::fromFloatStochastic(f, 0xFFFFFFFFu), h);
    }
  }
}

TEST(Fp16, TiesRoundToEven) {
  // Every midpoint between two adjacent finite halves rounds to the even one;
  // just above and below a midpoint round to the nearer one.
  for (std::uint32_t h = 0; h < 0x7BFF; ++h) {
    const double a = halfValue(static_cast<std::uint16_t>(h)), b = halfValue(static_cast<std::uint16_t>(h + 1));
    const float mid = static_cast<float>((a + b) / 2);  // exact: midpoints need at most 12 significant bits
    ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
    const std::uint16_t even = (h & 1) ? static_cast<std::uint16_t>(h + 1) : static_cast<std::uint16_t>(h);
    ASSERT_EQ(fp16::fromFloat(mid), even) << std::hex << h;
    ASSERT_EQ(fp16::fromFloat(-mid), static_cast<std::uint16_t>(even | 0x8000)) << std::hex << h;
    ASSERT_EQ(fp16::fromFloat(std::nextafter(mid, 0.0f)), h);
    ASSERT_EQ(fp16::fromFloat(std::nextafter(mid, 1e9f)), h + 1);
  }
}

TEST(Fp16, MatchesReferenceOnRandomFloats) {
  Stream s(42);
  for (int i = 0; i < 2000000; ++i) {
    // Random bit patterns across the whole float range, finite ones only.
    float f = fromBits(static_cast<std::uint32_t>(s.next()));
    if (!std::isfinite(f)) continue;
    if (i % 2 == 0) {
      // Half of the draws in binary16's range, where the rounding is decided.
      int e = 0;
      f = std::ldexp(std::frexp(f, &e), static_cast<int>(s.below(50)) - 30);
    }
    ASSERT_EQ(fp16::fromFloat(f), referenceNearest(f)) << f;
  }
}

// The buffer routines' fast path agrees with the element conversions.
// The kernels the host runs, for tests that run each (a kernel the host
// lacks is reported, not tested).
std::vector<fp16::Kernel> hostKernels() {
  std::vector<fp16::Kernel> out;
  for (fp16::Kernel k : {fp16::Kernel::Avx512, fp16::Kernel::Avx2, fp16::Kernel::Portable}) {
    if (fp16::kernelSupported(k)) out.push_back(k);
    else std::printf("  kernel %d: not supported by this host, not tested\n", static_cast<int>(k));
  }
  return out;
}

// Every buffer rounding kernel the host runs (AVX-512; element by element)
// gives the element conversions' bits.
TEST(Fp16, BufferRoundingMatchesElementConversion) {
  Stream s(5);
  std::vector<float> x;
  for (int i = 0; i < 1000000; ++i) {
    float f = fromBits(static_cast<std::uint32_t>(s.next()));
    int e = 0;
    if (std::isfinite(f)) f = std::ldexp(std::frexp(f, &e), static_cast<int>(s.below(48)) - 30);
    x.push_back(f);
  }
  for (float edge : {65504.0f, 65519.99f, 65520.0f, 6.1035156e-05f, 6.1035152e-05f, -65519.0f, 1e-40f, -1e-42f,
                     std::ldexp(1.0f, -25), std::ldexp(3.0f, -25), -std::ldexp(5.0f, -26), 0.0f, -0.0f})
    x.push_back(edge);
  const std::uint64_t key = 77;
  for (fp16::Kernel kernel : hostKernels()) {
    SCOPED_TRACE("kernel " + std::to_string(static_cast<int>(kernel)));
    std::vector<float> a = x, b = x;
    fp16::roundNearest(a.data(), a.size(), kernel);
    fp16::roundStochastic(b.data(), b.size(), key, 0, kernel);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float nearest = fp16::toFloat(fp16::fromFloat(x[i]));
      const float stochastic = fp16::toFloat(fp16::fromFloatStochastic(x[i], draw32(key, i)));
      // Bit for bit, NaN payloads included.
      ASSERT_EQ(bits(a[i]), bits(nearest)) << x[i];
      ASSERT_EQ(bits(b[i]), bits(stochastic)) << x[i];
    }
    // A part of a tensor (a row block, a chunk) rounded on its own draws the
    // positions it has in the whole tensor.
    std::vector<float> c = x;
    const std::size_t from = 1001;
    fp16::roundStochastic(c.data(), from, key, 0, kernel);
    fp16::roundStochastic(c.data() + from, c.size() - from, key, from, kernel);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(b[i])) continue;
      ASSERT_EQ(bits(c[i]), bits(b[i])) << i;
    }
    // Positions that cross 2^32 (where the generator's stream words change:
    // the vector kernel leaves such a range to the element path, which takes
    // the words of each position's own high half).
    const std::size_t near = (std::size_t{1} << 32) - 1000;
    std::vector<float> d(x.begin(), x.begin() + 5000);
    fp16::roundStochastic(d.data(), d.size(), key, near, kernel);
    for (std::size_t i = 0; i < d.size(); ++i)
      ASSERT_EQ(bits(d[i]), bits(fp16::toFloat(fp16::fromFloatStochastic(x[i], draw32(key, near + i))))) << near + i;
  }
}

// Buffers of values that are already binary16 (normal, subnormal, zero),
// some vectors with one value that is not, agree with the element
// conversions too, in every kernel the host runs (the AVX-512 kernel skips
// the draws of vectors that round to themselves).
TEST(Fp16, BufferRoundingOfHalfValuesMatchesElementConversion) {
  Stream s(8);
  std::vector<float> x;
  for (int i = 0; i < 100000; ++i) {
    const int kind = static_cast<int>(s.below(8));
    float f = fp16::roundNearest(static_cast<float>(s.normal() * 10.0));
    if (kind == 0) f = 0.0f;
    if (kind == 1) f = -0.0f;
    if (kind == 2) f = static_cast<float>(std::ldexp(static_cast<double>(s.below(1024)), -24));   // binary16 subnormals
    x.push_back(f);
  }
  for (std::size_t i = 0; i < x.size(); i += 48) x[i] = static_cast<float>(s.normal());   // one inexact value in every third vector of 16
  const std::uint64_t key = 78;
  for (fp16::Kernel kernel : hostKernels()) {
    std::vector<float> b = x;
    fp16::roundStochastic(b.data(), b.size(), key, 0, kernel);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float stochastic = fp16::toFloat(fp16::fromFloatStochastic(x[i], draw32(key, i)));
      ASSERT_EQ(bits(b[i]), bits(stochastic)) << "kernel " << static_cast<int>(kernel) << ", " << i << ": " << x[i];
    }
  }
}

TEST(Fp16, OverflowUnderflowAndSpecials) {
  EXPECT_EQ(fp16::fromFloat(65504.0f), 0x7BFF);
  EXPECT_EQ(fp16::fromFloat(65519.99f), 0x7BFF);
  EXPECT_EQ(fp16::fromFloat(65520.0f), 0x7C00);   // the tie goes to "even": infinity
  EXPECT_EQ(fp16::fromFloat(1e9f), 0x7C00);
  EXPECT_EQ(fp16::fromFloat(-1e9f), 0xFC00);
  EXPECT_EQ(fp16::fromFloat(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_TRUE(std::isnan(fp16::roundNearest(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(fp16::fromFloat(std::ldexp(1.0f, -24)), 0x0001);          // smallest subnormal
  EXPECT_EQ(fp16::fromFloat(std::ldexp(1.0f, -25)), 0x0000);          // half of it: tie to even (zero)
  EXPECT_EQ(fp16::fromFloat(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp16::fromFloat(std::ldexp(1.0f, -14)), 0x0400);          // smallest normal
  EXPECT_EQ(fp16::fromFloat(-0.0f), 0x8000);
  EXPECT_EQ(fp16::fromFloat(1e-30f), 0x0000);
  EXPECT_EQ(fp16::fromFloat(std::numeric_limits<float>::denorm_min()), 0x0000);
}

// Stochastic rounding is unbiased: for values between two halves, the mean of
// N roundings estimates x. With N = 200,000 draws of a Bernoulli(p) step, the
// standard error of the mean is at most ulp * 0.5 / sqrt(N); we require
// |mean - x| < 5 standard errors, which a correct implementation fails with
// probability below 6e-7 per value (two-sided normal tail at 5 sigma). The
// inputs and streams are fixed, so the test is deterministic.
TEST(Fp16, StochasticRoundingIsUnbiased) {
  const int n = 200000;
  const float values[] = {1.0f + 0.3f * 0.0009765625f, 0.1f, -3.14159265f, 1000.7f, 6.1e-6f /* subnormal range */,
                          2.0e-8f /* below the smallest subnormal */, 65000.3f};
  for (float x : values) {
    const std::uint16_t lo = fp16::fromFloatStochastic(x, 0xFFFFFFFFu);  // the truncation: the largest draw never rounds up
    double a = fp16::toFloat(lo);
    double b = fp16::toFloat(static_cast<std::uint16_t>(lo + 1));
    const double ulp = std::fabs(b - a);
    double sum = 0;
    std::vector<float> buf(static_cast<std::size_t>(n), x);
    fp16::roundStochastic(buf.data(), buf.size(), hashName("sr") ^ bits(x));
    for (float v : buf) {
      ASSERT_TRUE(v == static_cast<float>(a) || v == static_cast<float>(b)) << x << " rounded to " << v;
      sum += v;
    }
    const double mean = sum / n;
    const double se = ulp * 0.5 / std::sqrt(static_cast<double>(n));
    EXPECT_LT(std::fabs(mean - x), 5 * se) << "x=" << x << " mean=" << mean << " ulp=" << ulp;
  }
  // Nearest rounding of the same value is biased (the contrast the test relies on).
  const float x = 1.0f + 0.3f * 0.0009765625f;
  EXPECT_NE(fp16::roundNearest(x), x);
}

TEST(Fp16, StochasticRoundingIsReproducible) {
  std::vector<float> a(1000, 0.1f), b(1000, 0.1f);
  fp16::roundStochastic(a.data(), a.size(), 99);
  fp16::roundStochastic(b.data(), b.size(), 99);
  EXPECT_EQ(a, b);
  std::vector<float> c(1000, 0.1f);
  fp16::roundStochastic(c.data(), c.size(), 100);
  EXPECT_NE(a, c);
}

// fp16 partials accumulate in blocks of 16 products: with long reductions the
// result differs from fp32 partials (which round once) but both are fp16.
TEST(Fp16, PartialsTypeChangesMatmulRounding) {
  Stream s(7);
  Mat a(4, 256), b(256, 3);
  for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = fp16::roundNearest(static_cast<float>(s.normal()));
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = fp16::roundNearest(static_cast<float>(s.normal()));
  Numerics p32(true, false, false, 1), p16(true, true, false, 1);
  Mat c32 = p32.mm(a, b), c16 = p16.mm(a, b);
  Mat exact = a * b;
  for (Eigen::Index i = 0; i < c32.size(); ++i) {
    EXPECT_EQ(fp16::roundNearest(c32.data()[i]), c32.data()[i]);
    EXPECT_EQ(fp16::roundNearest(c16.data()[i]), c16.data()[i]);
  }
  EXPECT_GT((c16 - c32).cwiseAbs().maxCoeff(), 0.0f);
  EXPECT_LE((c32 - exact).cwiseAbs().maxCoeff(), (c16 - exact).cwiseAbs().maxCoeff());
}

// fp16 partials' stochastic rounding from its definition (docs/emulator.md,
// "Precision"), in double arithmetic on values rather than on bits: |x| in
// the subnormal range is offset by 2^-14 in fp32; the value v then lies
// between adjacent fp16 values lo <= v < lo + ulp and rounds up when
// 2^13 (v - lo) / ulp + u >= 2^13; the offset is removed, results above
// 65504 are infinity and the sign is kept.
float referencePartialRounding(float x, std::uint32_t u) {
  if (std::isnan(x)) return x;
  const double offset = std::ldexp(1.0, -14);
  const float m = std::fabs(x);
  const bool tiny = m < static_cast<float>(offset);
  const double v = tiny ? static_cast<double>(m + static_cast<float>(offset)) : static_cast<double>(m);
  double result = std::numeric_limits<double>::infinity();
  if (std::isfinite(v)) {
    int e = 0;
    std::frexp(v, &e);                                // v = f 2^e, f in [0.5, 1): binade 2^(e-1), 10 fraction bits
    const double ulp = std::ldexp(1.0, std::max(e - 1, -14) - 10);
    const double lo = std::floor(v / ulp) * ulp;
    const double steps = (v - lo) / ulp * 8192.0;     // exact: the dropped bits of a float
    result = lo + (steps + u >= 8192.0 ? ulp : 0.0);
    if (result > 65504.0) result = std::numeric_limits<double>::infinity();
    if (tiny) result -= offset;
  }
  return std::copysign(static_cast<float>(result), x);
}

// The element function of fp16 partials' stochastic rounding against its
// definition, for values over the whole range (normal, subnormal, below the
// smallest subnormal, overflowing, zero, infinities) and every sign; and its
// expectation over all 2^13 draws: exactly x where the result is a normal
// fp16, within 2^-14 of an ulp (2^-38) in the subnormal range.
TEST(Fp16, PartialsRoundingMatchesDefinitionAndIsUnbiased) {
  Stream s(21);
  std::vector<float> values = {0.0f, -0.0f, 65504.0f, 65504.5f, 65519.0f, 65535.9f, 65536.0f, 1e9f, -70000.0f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::ldexp(1.0f, -14), std::nextafter(std::ldexp(1.0f, -14), 0.0f), std::ldexp(1.0f, -24),
                               std::ldexp(1.0f, -25), 1e-30f, -1e-42f, std::ldexp(1.0f, -13) - std::ldexp(1.0f, -40)};
  for (int i = 0; i < 4000; ++i) {
    const float f = static_cast<float>(s.uniform() + 0.5) * std::ldexp(1.0f, static_cast<int>(s.below(52)) - 35);
    values.push_back(s.below(2) != 0 ? -f : f);
  }
  for (float x : values) {
    double sum = 0;
    for (std::uint32_t u = 0; u < 8192; ++u) {
      const float got = fp16::roundPartialStochastic(x, u);
      const float want = referencePartialRounding(x, u);
      ASSERT_EQ(bits(got), bits(want)) << x << " with u = " << u << ": " << got << ", the definition " << want;
      ASSERT_EQ(fp16::roundNearest(got), got) << x;
      sum += got;
    }
    if (std::fabs(x) > 65504.0f) continue;
    const double mean = sum / 8192.0;
    if (std::fabs(x) >= std::ldexp(1.0f, -14)) EXPECT_EQ(mean, static_cast<double>(x)) << x;
    else EXPECT_LE(std::fabs(mean - x), std::ldexp(1.0, -38)) << x;
  }
  EXPECT_TRUE(std::isnan(fp16::roundPartialStochastic(std::numeric_limits<float>::quiet_NaN(), 5)));
}

// The semantics of fp16 partials, from their definition (docs/emulator.md,
// "Precision"), one element at a time: each block of 16 products summed in
// fp32 by fused multiply-adds in order of the reduction index from zero,
// added to the fp16 accumulator in fp32, the result rounded to fp16;
// stochastically, element (r, c) of block j rounds with the top 13 bits of
// its row's draw xor its column's: draw32 of position r in stream
// stream32(subKey(key, 0), j), and of position c in stream32(subKey(key, 1), j).
Mat referencePartials(const Mat& a, const Mat& b, bool stochastic, std::uint64_t key) {
  Mat c(a.rows(), b.cols());
  for (Eigen::Index r = 0; r < a.rows(); ++r)
    for (Eigen::Index col = 0; col < b.cols(); ++col) {
      float acc = 0.0f;
      for (Eigen::Index k0 = 0, j = 0; k0 < a.cols(); k0 += 16, ++j) {
        float sum = 0.0f;
        for (Eigen::Index k = k0; k < std::min<Eigen::Index>(k0 + 16, a.cols()); ++k) sum = std::fma(a(r, k), b(k, col), sum);
        if (!stochastic) {
          acc = fp16::roundNearest(acc + sum);
          continue;
        }
        const std::uint32_t rowDraw = draw32(stream32(subKey(key, 0), static_cast<std::uint32_t>(j)), static_cast<std::uint32_t>(r));
        const std::uint32_t columnDraw = draw32(stream32(subKey(key, 1), static_cast<std::uint32_t>(j)), static_cast<std::uint32_t>(col));
        acc = referencePartialRounding(acc + sum, (rowDraw ^ columnDraw) >> 19);
      }
      c(r, col) = acc;
    }
  return c;
}

Mat randomHalves(Eigen::Index rows, Eigen::Index cols, Stream& s, double scale) {
  Mat m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = fp16::roundNearest(static_cast<float>(scale * s.normal()));
  return m;
}

void expectSameBits(const Mat& got, const Mat& want, const std::string& what) {
  ASSERT_EQ(got.rows(), want.rows()) << what;
  ASSERT_EQ(got.cols(), want.cols()) << what;
  int mismatches = 0;
  for (Eigen::Index i = 0; i < got.size(); ++i) {
    const bool same = bits(got.data()[i]) == bits(want.data()[i]) || (std::isnan(got.data()[i]) && std::isnan(want.data()[i]));
    if (!same && ++mismatches <= 3)
      ADD_FAILURE() << what << ": element " << i << " is " << got.data()[i] << ", the definition " << want.data()[i];
  }
  EXPECT_EQ(mismatches, 0) << what;
}

// A product's shape and the scale of its operands' values.
// The operands of a product test: random halves of the given scale, with
// two scales that ask for more.
struct ProductShape {
  Eigen::Index rows, depth, cols;
  double scale;   // kSpecials, kLateOverflow: below
};
constexpr double kSpecials = 300.0;      // overflowing block sums; infinities and NaN, whose products reach infinity and NaN
constexpr double kLateOverflow = -1.0;   // overflow only after the kernels' first stretch of the reduction

void productOperands(const ProductShape& z, Stream& s, Mat& a, Mat& b) {
  a = randomHalves(z.rows, z.depth, s, z.scale == kLateOverflow ? 1.0 : z.scale);
  b = randomHalves(z.depth, z.cols, s, z.scale == kLateOverflow ? 1.0 : z.scale);
  if (z.scale == kSpecials) {
    a(0, 3) = std::numeric_limits<float>::infinity();
    a(1, 0) = std::numeric_limits<float>::quiet_NaN();
    a(12, 5) = std::numeric_limits<float>::infinity();   // a full tile, read in place
    b(2, 4) = -std::numeric_limits<float>::infinity();
  }
  if (z.scale == kLateOverflow) {
    // The product is deeper than the kernels' stretch of the reduction
    // (256, more than two): in two rows (one in a full tile, read in place)
    // a block of the second stretch sums to 65504 + 2^-8, just above the
    // largest half, where the vector kernels leave the tile to the element-
    // by-element computation of the whole reduction. Rounded (down but with
    // probability 2^-13), the partials stay finite and come back down in the
    // third stretch, which must not resume from the finished values.
    for (Eigen::Index r : {2, 13}) {
      a.row(r).setZero();
      a(r, 300) = 65504.0f;
      a(r, 301) = 0.00390625f;
      a(r, 590) = -30000.0f;
    }
    for (Eigen::Index c = 0; c < z.cols; ++c) b(300, c) = b(301, c) = b(590, c) = 1.0f;
  }
}

// The product kernel (fp16_product.h) against the element-by-element
// definition, bit for bit, for every transposition, through Numerics on one
// and on three host threads, and the portable kernel directly; shapes that
// leave partial tiles and a partial last block, values whose block sums fall
// in the subnormal range or below it, overflow, infinities and NaN.
TEST(Fp16, PartialsProductMatchesDefinition) {
  Stream s(11);
  const ProductShape shapes[] = {{1, 1, 1, 1.0},    {37, 70, 45, 1.0},  {130, 300, 70, 0.5}, {21, 16, 40, kSpecials},
                          {9, 40, 33, 2e-3}, {7, 20, 19, 1e-4}, {64, 33, 16, 40.0},  {200, 48, 96, 3e-3},
                          {24, 600, 40, kLateOverflow}};
  ThreadPool pool(3);
  for (const ProductShape& z : shapes)
    for (bool stochastic : {false, true}) {
      Mat a, b;
      productOperands(z, s, a, b);
      const std::uint64_t base = 1234;
      const std::uint64_t key = subKey(base, 0);   // a fresh Numerics' first tensor
      const Mat want = referencePartials(a, b, stochastic, key);
      const Mat at = a.transpose(), bt = b.transpose();
      const std::string shape = std::to_string(z.rows) + "x" + std::to_string(z.depth) + "x" + std::to_string(z.cols) +
                                (stochastic ? " stochastic" : " nearest");
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        const std::string what = shape + (p ? ", 3 threads" : ", 1 thread");
        Numerics n1(true, true, stochastic, base, p), n2(true, true, stochastic, base, p), n3(true, true, stochastic, base, p),
            n4(true, true, stochastic, base, p);
        expectSameBits(n1.mm(a, b), want, what + ", A B");
        expectSameBits(n2.mmTN(at, b), want, what + ", A^T B");
        expectSameBits(n3.mmNT(a, bt), want, what + ", A B^T");
        expectSameBits(n4.mmNT(at.transpose(), bt), want, what + ", A B^T again");
      }
      // The portable kernel (builds without AVX-512), in two row ranges.
      Mat portable(z.rows, z.cols);
      fp16::PartialsProduct product(fp16::Operand{b.data(), b.cols(), 1}, z.depth, z.cols, stochastic, key,
                                    fp16::Kernel::Portable);
      const Eigen::Index half = z.rows / 2;
      product.rows(fp16::Operand{a.data(), a.cols(), 1}, 0, half, portable.data());
      product.rows(fp16::Operand{a.data(), a.cols(), 1}, half, z.rows - half, portable.data());
      expectSameBits(portable, want, shape + ", portable kernel");
    }
}

// Every product kernel the host runs (AVX-512, AVX2 with FMA, element by
// element) gives the definition's bits, for operands read in place along
// either dimension, on shapes that leave partial tiles, half-filled AVX2
// tiles and partial last blocks, with values in the subnormal range, below
// it, overflowing, infinite and NaN. A kernel the host lacks is reported,
// not tested.
TEST(Fp16, PartialsProductKernelsAgree) {
  Stream s(23);
  const ProductShape shapes[] = {{1, 1, 1, 1.0},   {37, 70, 45, 1.0}, {13, 33, 20, 0.5}, {21, 16, 40, kSpecials},
                          {9, 40, 33, 2e-3}, {7, 20, 19, 1e-4}, {66, 47, 64, 2.0}, {200, 48, 96, 3e-3},
                          {70, 300, 260, 1.0},   // large enough that op(B) is packed by tasks
                          {24, 600, 40, kLateOverflow}};
  // Packing tasks run in reverse order, as host threads may run them.
  int packTasks = 0;
  const fp16::PartialsProduct::ParallelFor reversed = [&](std::size_t n, const std::function<void(std::size_t)>& task) {
    packTasks += static_cast<int>(n);
    for (std::size_t t = n; t-- > 0;) task(t);
  };
  const fp16::Kernel kernels[] = {fp16::Kernel::Avx512, fp16::Kernel::Avx2, fp16::Kernel::Portable};
  int tested = 0;
  for (fp16::Kernel kernel : kernels) {
    if (!fp16::kernelSupported(kernel)) {
      std::printf("  kernel %d: not supported by this host, not tested\n", static_cast<int>(kernel));
      continue;
    }
    ++tested;
    for (const ProductShape& z : shapes)
      for (bool stochastic : {false, true}) {
        Mat a, b;
        productOperands(z, s, a, b);
        const std::uint64_t key = subKey(4321, static_cast<std::uint64_t>(z.rows));
        const Mat want = referencePartials(a, b, stochastic, key);
        const Mat at = a.transpose(), bt = b.transpose();
        const std::string what = std::to_string(z.rows) + "x" + std::to_string(z.depth) + "x" + std::to_string(z.cols) +
                                 (stochastic ? " stochastic" : " nearest") + ", kernel " + std::to_string(static_cast<int>(kernel));
        for (bool transposeA : {false, true})
          for (bool transposeB : {false, true}) {
            const fp16::Operand opA = transposeA ? fp16::Operand{at.data(), 1, at.cols()} : fp16::Operand{a.data(), a.cols(), 1};
            const fp16::Operand opB = transposeB ? fp16::Operand{bt.data(), 1, bt.cols()} : fp16::Operand{b.data(), b.cols(), 1};
            fp16::PartialsProduct product(opB, z.depth, z.cols, stochastic, key, kernel, reversed);
            Mat got(z.rows, z.cols);
            // Two row ranges, the first not a multiple of any tile's rows.
            const Eigen::Index first = std::min<Eigen::Index>(z.rows, 11);
            product.rows(opA, 0, first, got.data());
            product.rows(opA, first, z.rows - first, got.data());
            expectSameBits(got, want, what + (transposeA ? ", A^T" : ", A") + (transposeB ? " B^T" : " B"));
          }
      }
  }
  EXPECT_GE(tested, 1);
  EXPECT_GT(packTasks, 0);
}

// Stochastic rounding in the product is unbiased: every element of this
// product has the same exact value, 1 + 3 2^-13 + 5 2^-15 (a first block
// whose sum lies between fp16 values, then a second whose addition does too),
// so the mean over 120,000 elements estimates it. Each of the two roundings
// adds a variance of at most ulp^2 / 4 (ulp 2^-10 here), and the elements'
// bits are pairwise independent (row xor column draws), so the variance of
// the mean is that of independent roundings: the standard error is below
// 2^-10 sqrt(2/4 / N), within the 2^-10 sqrt(3/4 / N) used; 5 of them bound the error
// of a correct implementation but not of rounding to nearest, which is off by
// 3 2^-13 + 5 2^-15 - 2^-10 (or of truncation, off by more). The same for
// block sums in the subnormal range (7.45 and 2.3 steps of 2^-24).
TEST(Fp16, PartialsProductStochasticRoundingIsUnbiased) {
  const Eigen::Index rows = 300, cols = 400;
  struct Case {
    float first, third, fifth;
    double ulp;
  };
  const float third = std::ldexp(1.0f, -13), fifth = std::ldexp(1.0f, -15);
  for (const Case& t : {Case{1.0f, third, fifth, std::ldexp(1.0, -10)},
                        Case{std::ldexp(7.0f, -24), std::ldexp(0.15f, -24), std::ldexp(0.46f, -24), std::ldexp(1.0, -24)}}) {
    Mat a = Mat::Zero(rows, 32), b = Mat::Zero(32, cols);
    for (Eigen::Index r = 0; r < rows; ++r) {
      a(r, 0) = t.first;
      for (int k = 1; k <= 3; ++k) a(r, k) = t.third;    // block 0: first + 3 third
      for (int k = 16; k < 21; ++k) a(r, k) = t.fifth;   // block 1: 5 fifth
    }
    b.setOnes();
    const double exact = static_cast<double>(t.first) + 3.0 * t.third + 5.0 * t.fifth;
    Numerics n(true, true, true, 99);
    const Mat c = n.mm(a, b);
    double sum = 0;
    for (Eigen::Index i = 0; i < c.size(); ++i) {
      ASSERT_EQ(fp16::roundNearest(c.data()[i]), c.data()[i]);
      sum += c.data()[i];
    }
    const double mean = sum / static_cast<double>(c.size());
    const double se = t.ulp * std::sqrt(0.75 / static_cast<double>(c.size()));
    EXPECT_LT(std::fabs(mean - exact), 5 * se) << "mean " << mean << " exact " << exact;
    Numerics nearest(true, true, false, 99);
    EXPECT_GT(std::fabs(nearest.mm(a, b)(0, 0) - exact), 50 * se);
  }
}

// The generator of the stochastic roundings' bits (counter_rng.h, draw32):
// its top 13 bits (those fp16 partials round with) and its low 13, over
// consecutive positions, against each other, against the next position, another
// stream and a position 2^32 further, are uniform and unrelated. Chi-square
// tests over 256 cells (255 degrees of freedom: mean 255, standard deviation
// 22.6) with a bound 6 deviations above the mean; the streams are fixed, so the
// test is deterministic (a counter without the hash fails every one of them).
TEST(Fp16, RoundingBitsAreUniformAndUnrelated) {
  const int n = 1 << 20;
  const double bound = 255.0 + 6 * 22.6;
  auto chiSquare = [&](const std::vector<double>& counts) {
    const double expected = static_cast<double>(n) / static_cast<double>(counts.size());
    double x = 0;
    for (double c : counts) x += (c - expected) * (c - expected) / expected;
    return x;
  };
  const std::uint64_t key = subKey(hashName("bits"), 6);
  const std::uint64_t other = subKey(hashName("bits"), 7);
  std::vector<double> top13(256), low13(256), both(256), pairs(256), streams(256), far(256);
  std::vector<double> set(32);
  for (int i = 0; i < n; ++i) {
    const std::uint32_t x = draw32(key, static_cast<std::uint64_t>(i));
    const std::uint32_t next = draw32(key, static_cast<std::uint64_t>(i) + 1);
    const std::uint32_t y = draw32(other, static_cast<std::uint64_t>(i));
    const std::uint32_t z = draw32(key, (std::uint64_t{1} << 32) + static_cast<std::uint64_t>(i));
    const std::uint32_t top = x >> 19, low = x & 0x1FFFu;   // the two fields, 13 bits each
    top13[top >> 5] += 1;
    low13[low & 0xFF] += 1;
    both[((top >> 9) << 4) | (low >> 9)] += 1;
    pairs[((top >> 9) << 4) | (next >> 28)] += 1;
    streams[((top >> 9) << 4) | (y >> 28)] += 1;
    far[((top >> 9) << 4) | (z >> 28)] += 1;
    for (int bit = 0; bit < 32; ++bit) set[static_cast<std::size_t>(bit)] += (x >> bit) & 1u;
  }
  EXPECT_LT(chiSquare(top13), bound) << "the top 13 bits";
  EXPECT_LT(chiSquare(low13), bound) << "the low 13 bits";
  EXPECT_LT(chiSquare(both), bound) << "the two fields of one draw";
  EXPECT_LT(chiSquare(pairs), bound) << "consecutive positions";
  EXPECT_LT(chiSquare(streams), bound) << "two blocks' streams";
  EXPECT_LT(chiSquare(far), bound) << "positions 2^32 apart";
  // Each bit is set half of the time (5 standard errors of a fair coin).
  for (int bit = 0; bit < 32; ++bit)
    EXPECT_LT(std::fabs(set[static_cast<std::size_t>(bit)] / n - 0.5), 5 * 0.5 / std::sqrt(static_cast<double>(n))) << "bit " << bit;
}

// The bits with which fp16 partials round element (r, c) of block j: the top
// 13 of row r's draw xor column c's (fp16_product.h). Over many products
// (keys), one element's bits are uniform, and the bits of two elements that
// share a row, or a column, or neither, are unrelated: chi-square over 256
// cells of their top 4 bits each, bound 6 deviations above the mean (the keys
// are fixed, so the test is deterministic). Pairwise independence is what
// keeps the variance of any sum of rounding errors that of independent
// roundings. One column draw shared by all columns would fail the row test,
// a shared row draw the column test.
TEST(Fp16, PartialsRowColumnBitsArePairwiseIndependent) {
  const int n = 1 << 18;
  const double bound = 255.0 + 6 * 22.6;
  const std::uint32_t j = 5, r1 = 3, r2 = 900, c1 = 17, c2 = 18;
  std::vector<double> single(256), sameRow(256), sameColumn(256), neither(256);
  for (int i = 0; i < n; ++i) {
    const std::uint64_t key = subKey(hashName("row-column"), static_cast<std::uint64_t>(i));
    const Stream32 rows = stream32(subKey(key, 0), j), columns = stream32(subKey(key, 1), j);
    auto bitsAt = [&](std::uint32_t r, std::uint32_t c) { return (draw32(rows, r) ^ draw32(columns, c)) >> 19; };
    const std::uint32_t u = bitsAt(r1, c1);
    single[u >> 5] += 1;
    sameRow[((u >> 9) << 4) | (bitsAt(r1, c2) >> 9)] += 1;
    sameColumn[((u >> 9) << 4) | (bitsAt(r2, c1) >> 9)] += 1;
    neither[((u >> 9) << 4) | (bitsAt(r2, c2) >> 9)] += 1;
  }
  auto chiSquare = [&](const std::vector<double>& counts) {
    const double expected = static_cast<double>(n) / static_cast<double>(counts.size());
    double x = 0;
    for (double k : counts) x += (k - expected) * (k - expected) / expected;
    return x;
  };
  EXPECT_LT(chiSquare(single), bound) << "one element's bits";
  EXPECT_LT(chiSquare(sameRow), bound) << "two elements of a row";
  EXPECT_LT(chiSquare(sameColumn), bound) << "two elements of a column";
  EXPECT_LT(chiSquare(neither), bound) << "two elements sharing neither";
}

}  // namespace
}  // namespace ipu::emu
