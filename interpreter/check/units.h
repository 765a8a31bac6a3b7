// Physical units. A quantity is a double in base units (bytes, seconds, FLOP,
// steps, epochs, samples) plus a dimension: a vector of integer exponents over
// those base units. `64 GB/s` is 6.4e10 with dimension bytes^1 seconds^-1, so
// `900 MB / (64 GB/s)` is a time and `memory: 1.33 GHz` is a dimension error.
// Decimal prefixes are powers of 1000 (900 MB = 9e8 bytes, as Graphcore's
// datasheets count); binary ones (MiB) are powers of 1024.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ipu::check {

enum class BaseUnit { Bytes, Seconds, Flop, Steps, Epochs, Samples };
inline constexpr std::size_t kBaseUnits = 6;

struct Dim {
  std::array<std::int8_t, kBaseUnits> exp{};

  static Dim none() { return Dim{}; }
  static Dim of(BaseUnit u, int power = 1) {
    Dim d;
    d.exp[static_cast<std::size_t>(u)] = static_cast<std::int8_t>(power);
    return d;
  }
  bool dimensionless() const {
    for (auto e : exp)
      if (e != 0) return false;
    return true;
  }
  bool operator==(const Dim& o) const { return exp == o.exp; }
  bool operator!=(const Dim& o) const { return exp != o.exp; }
  Dim operator*(const Dim& o) const;
  Dim operator/(const Dim& o) const;
  Dim pow(int n) const;
  // "bytes", "bandwidth (bytes/s)", "frequency (Hz)", "number", ...
  std::string describe() const;
};

namespace dims {
inline Dim bytes() { return Dim::of(BaseUnit::Bytes); }
inline Dim seconds() { return Dim::of(BaseUnit::Seconds); }
inline Dim hertz() { return Dim::of(BaseUnit::Seconds, -1); }
inline Dim flop() { return Dim::of(BaseUnit::Flop); }
inline Dim bandwidth() { return bytes() / seconds(); }
inline Dim flopRate() { return flop() / seconds(); }
inline Dim steps() { return Dim::of(BaseUnit::Steps); }
inline Dim epochs() { return Dim::of(BaseUnit::Epochs); }
inline Dim samples() { return Dim::of(BaseUnit::Samples); }
}  // namespace dims

struct UnitInfo {
  double factor = 1;  // multiply the written number by this to get base units
  Dim dim;
  bool percent = false;
};

std::optional<UnitInfo> lookupUnit(const std::string& unit);
const std::vector<std::string>& unitNames();

// Human display: "900 MB", "1.33 GHz", "64 GB/s", "2000 steps", "12.5%".
std::string formatQuantity(double value, const Dim& dim);
std::string formatBytes(double bytes);
std::string formatNumber(double value);  // 65536, 0.006, 1.5e-05
// A share for people: "57%", "149%", "8.4e+14%" (never an overflowed
// integer, never hundreds of digits, whatever the fraction).
std::string formatPercent(double fraction);
// A number in a table column of `width` characters: fixed with `decimals`
// when it fits, else in scientific notation ("8.0e+13"), so columns never
// run into each other.
std::string formatCell(double value, int decimals, std::size_t width);

}  // namespace ipu::check
