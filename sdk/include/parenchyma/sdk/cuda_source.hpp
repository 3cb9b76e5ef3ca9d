// parenchyma SDK: CUDA C source that the CUDA bundles' run-time kernels share (NVRTC sees no
// headers, so each bundle's source is self-contained): a bundle builds the text
// cuda_common_source + its own source once (cuda_source_with below) and hands that to
// program_build.
//
// It holds: i64, the grid-stride loop GRID_LOOP, the early-launch macros PCY_WAIT_PRIOR and
// PCY_START_NEXT, the 16-bit storage types h16 (IEEE half) and b16 (bfloat16) with their
// conversions to and from float (by the PTX cvt instructions; bf16 before sm_80 by bit
// operations; round to nearest even, NaN kept quiet), and io<S>: how storage type S loads to and
// stores from its compute type io<S>::C (float for f32, f16 and bf16; double for f64).
#pragma once

#include <string>

namespace parenchyma::sdk {

// clang-format off
inline constexpr const char* cuda_common_source = R"CUDA(
typedef long long i64;

#define GRID_LOOP(i, count)                                                                    \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (count);                        \
       i += (i64)gridDim.x * blockDim.x)

// Early launch (pcy_kernel_create_args.flags, PCY_KERNEL_WAITS_FOR_PRIOR): a kernel created with
// the flag calls PCY_WAIT_PRIOR() in every thread before it touches memory, so the plugin may
// start it while the work before it still runs (programmatic dependent launch, sm_90+; elsewhere
// both macros are empty and the launch is the usual one). PCY_START_NEXT() lets the next such
// kernel begin its launch; a kernel without it lets it begin when its blocks exit.
#if __CUDA_ARCH__ >= 900
#define PCY_WAIT_PRIOR() asm volatile("griddepcontrol.wait;" ::: "memory")
#define PCY_START_NEXT() asm volatile("griddepcontrol.launch_dependents;" :::)
#else
#define PCY_WAIT_PRIOR() ((void)0)
#define PCY_START_NEXT() ((void)0)
#endif

struct h16 { unsigned short b; };
struct b16 { unsigned short b; };

__device__ __forceinline__ float h16_to_f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short f_to_h16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ unsigned short f_to_b16(float f) {
#if __CUDA_ARCH__ >= 800
  // One instruction (round to nearest even, a NaN becomes the canonical quiet NaN). The bit
  // operations cost bf16 sigmoid 104 registers, two blocks per SM and 0.57x PyTorch on the H200.
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u); // round to nearest even
  return (unsigned short)(u >> 16);
#endif
}

// Storage type S, compute type C.
template <class S> struct io;
template <> struct io<float> {
  typedef float C;
  static __device__ __forceinline__ float ld(float v) { return v; }
  static __device__ __forceinline__ float st(float v) { return v; }
};
template <> struct io<double> {
  typedef double C;
  static __device__ __forceinline__ double ld(double v) { return v; }
  static __device__ __forceinline__ double st(double v) { return v; }
};
template <> struct io<h16> {
  typedef float C;
  static __device__ __forceinline__ float ld(h16 v) { return h16_to_f(v.b); }
  static __device__ __forceinline__ h16 st(float v) { h16 r; r.b = f_to_h16(v); return r; }
};
template <> struct io<b16> {
  typedef float C;
  static __device__ __forceinline__ float ld(b16 v) { return __uint_as_float((unsigned)v.b << 16); }
  static __device__ __forceinline__ b16 st(float v) { b16 r; r.b = f_to_b16(v); return r; }
};
)CUDA";
// clang-format on

// The common source followed by `body`, built on first use and kept for the process.
// Body: a NUL-terminated source, a char array or a const char* constant.
template <const auto& Body> const std::string& cuda_source_with() {
  static const std::string s = std::string(cuda_common_source) + Body;
  return s;
}

} // namespace parenchyma::sdk
