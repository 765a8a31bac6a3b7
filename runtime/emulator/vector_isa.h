// Which vector instruction set the host offers to the emulator's hand-written
// kernels (fp16 roundings and products with fp16 partials). The kernels are
// compiled for their instruction set with target attributes whatever the
// build's own flags, and chosen at run time: a portable build
// (IPU_PORTABLE=ON) uses them on a host that has them, and the tests run every
// kernel the host supports on the same inputs.
#pragma once

namespace ipu::emu {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define IPU_X86_KERNELS 1
// AVX-512 as the kernels use it: 512-bit integer and float operations with
// masks (F, BW, VL), 64-bit multiplication (DQ), the half-float conversions.
#define IPU_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,f16c")))
// AVX2 with fused multiply-add and the half-float conversions (F16C): every
// x86 CPU since Haswell (2013) and Zen.
#define IPU_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define IPU_X86_KERNELS 0
#endif

enum class VectorIsa { None, Avx2, Avx512 };

// The widest of the above that the host supports (determined once).
VectorIsa hostVectorIsa();

}  // namespace ipu::emu
