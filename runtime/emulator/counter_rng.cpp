#include "runtime/emulator/counter_rng.h"

#include <cmath>

namespace ipu::emu {

double Stream::normal() {
  // Box-Muller on two uniforms, the first in (0, 1].
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace ipu::emu
