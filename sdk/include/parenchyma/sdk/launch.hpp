// parenchyma SDK: the argument struct of a framework's kernel_launch, built field by field, and
// the kernel arguments it points at.
//
// `pcy_kernel_launch_args l{};` followed by the field writes is what every caller wrote first,
// and GCC turns the value-initialisation of a struct this size into `rep stosq`, whose start-up
// costs about 20 ns on the CPU machine's EPYC (a micro-benchmark, 2026-12-02) — on a path whose
// whole budget is tens of nanoseconds (P1, P2, G1). Writing each field once costs a few stores.
// Padding bytes stay unwritten; no receiver reads them (B1: fields only, up to struct_size).
#pragma once

#include <parenchyma/abi/pcy_framework.h>

#include <array>
#include <cstdint>

namespace parenchyma::sdk {

// A launch of `count` arguments at `args` over dims (1-3) dimensions; unused dimensions of
// `global` and `local` should be 1 (local 0 everywhere lets the plugin choose).
inline pcy_kernel_launch_args launch_args(pcy_queue queue, pcy_kernel kernel, uint32_t dims,
                                          const std::array<uint64_t, 3>& global,
                                          const std::array<uint32_t, 3>& local,
                                          const pcy_kernel_arg* args, uint32_t count) noexcept {
  pcy_kernel_launch_args l; // every field is written below
  l.struct_size = sizeof l;
  l.ext = nullptr;
  l.queue = queue;
  l.kernel = kernel;
  l.dims = dims;
  for (int i = 0; i < 3; ++i) {
    l.global[i] = global[i];
    l.local[i] = local[i];
  }
  l.args = args;
  l.arg_count = count;
  return l;
}

// A kernel argument by value (a scalar, or a device address on CUDA): points at `v`, which must
// outlive the launch call (the framework copies it before returning).
template <class V> pcy_kernel_arg val(const V& v) noexcept {
  return {PCY_ARG_SCALAR, nullptr, &v, sizeof(V)};
}
// A kernel argument that is a framework memory (an OpenCL buffer).
inline pcy_kernel_arg mem(pcy_memory m) noexcept { return {PCY_ARG_MEMORY, m, nullptr, 0}; }

} // namespace parenchyma::sdk
