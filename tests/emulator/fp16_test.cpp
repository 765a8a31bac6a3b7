// binary16 emulation: exhaustive conversion checks, round-to-nearest-even
// against an independent reference (exact arithmetic in double), overflow,
// and the statistics of stochastic rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"
#include "runtime/emulator/numerics.h"

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
  std::vector<float> a = x, b = x;
  fp16::roundNearest(a.data(), a.size());
  const std::uint64_t key = 77;
  fp16::roundStochastic(b.data(), b.size(), key);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float nearest = fp16::toFloat(fp16::fromFloat(x[i]));
    const float stochastic = fp16::toFloat(fp16::fromFloatStochastic(x[i], static_cast<std::uint32_t>(draw64(key, i) >> 32)));
    if (std::isnan(nearest)) {
      ASSERT_TRUE(std::isnan(a[i]) && std::isnan(b[i]));
      continue;
    }
    ASSERT_EQ(bits(a[i]), bits(nearest)) << x[i];
    ASSERT_EQ(bits(b[i]), bits(stochastic)) << x[i];
  }
  // A part of a tensor (a row block, a chunk) rounded on its own draws the
  // positions it has in the whole tensor.
  std::vector<float> c = x;
  const std::size_t from = 1001;
  fp16::roundStochastic(c.data(), from, key);
  fp16::roundStochastic(c.data() + from, c.size() - from, key, from);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(b[i])) continue;
    ASSERT_EQ(bits(c[i]), bits(b[i])) << i;
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

}  // namespace
}  // namespace ipu::emu
