#include "runtime/emulator/vector_isa.h"

namespace ipu::emu {

namespace {

VectorIsa detect() {
#if IPU_X86_KERNELS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c"))
    return VectorIsa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) return VectorIsa::Avx2;
#endif
  return VectorIsa::None;
}

}  // namespace

VectorIsa hostVectorIsa() {
  static const VectorIsa isa = detect();
  return isa;
}

}  // namespace ipu::emu
