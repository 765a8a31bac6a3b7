#include "runtime/emulator/numerics.h"

#include <algorithm>

#include "runtime/emulator/counter_rng.h"
#include "runtime/emulator/fp16.h"

namespace ipu::emu {

namespace {
constexpr int kAmpDepth = 16;  // products an AMP unit sums before a partial is written
}

void roundToHalf(float* data, std::size_t n, bool stochastic, std::uint64_t key) {
  if (stochastic)
    fp16::roundStochastic(data, n, key);
  else
    fp16::roundNearest(data, n);
}

std::uint64_t Numerics::nextKey() { return subKey(key_, counter_++); }

void Numerics::round(float* data, std::size_t n) {
  if (!fp16_) return;
  roundToHalf(data, n, stochastic_, nextKey());
}

void Numerics::round(Mat& m) { round(m.data(), static_cast<std::size_t>(m.size())); }

Mat Numerics::blocked(const Mat& a, bool ta, const Mat& b, bool tb) {
  const Eigen::Index k = ta ? a.rows() : a.cols();
  const Eigen::Index rows = ta ? a.cols() : a.rows();
  const Eigen::Index cols = tb ? b.rows() : b.cols();
  Mat acc = Mat::Zero(rows, cols);
  Mat part(rows, cols);
  for (Eigen::Index k0 = 0; k0 < k; k0 += kAmpDepth) {
    const Eigen::Index kb = std::min<Eigen::Index>(kAmpDepth, k - k0);
    if (!ta && !tb) part.noalias() = a.middleCols(k0, kb) * b.middleRows(k0, kb);
    else if (ta && !tb) part.noalias() = a.middleRows(k0, kb).transpose() * b.middleRows(k0, kb);
    else part.noalias() = a.middleCols(k0, kb) * b.middleCols(k0, kb).transpose();
    roundToHalf(part.data(), static_cast<std::size_t>(part.size()), stochastic_, nextKey());
    acc += part;
    roundToHalf(acc.data(), static_cast<std::size_t>(acc.size()), stochastic_, nextKey());
  }
  return acc;
}

Mat Numerics::mm(const Mat& a, const Mat& b) {
  if (fp16Partials_) return blocked(a, false, b, false);
  Mat c;
  c.noalias() = a * b;
  round(c);
  return c;
}

Mat Numerics::mmTN(const Mat& a, const Mat& b) {
  if (fp16Partials_) return blocked(a, true, b, false);
  Mat c;
  c.noalias() = a.transpose() * b;
  round(c);
  return c;
}

Mat Numerics::mmNT(const Mat& a, const Mat& b) {
  if (fp16Partials_) return blocked(a, false, b, true);
  Mat c;
  c.noalias() = a * b.transpose();
  round(c);
  return c;
}

}  // namespace ipu::emu
