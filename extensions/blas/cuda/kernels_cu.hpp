// BLAS bundle for CUDA: our own CUDA C kernels. Built once per context through the CUDA
// framework's program_build (NVRTC for the device's own architecture, cubin cache) and launched
// with kernel_launch on the backend's stream. NVRTC sees no headers: the source is
// self-contained. Two groups:
//  * BLAS-1 at memory speed (asum, dot, nrm2, scal, copy, swap, axpy, axpby): 16-byte vector
//    loads on contiguous data (a scalar head up to the first aligned element, a scalar tail),
//    several vectors in flight per thread, a grid-stride loop over a grid of SMs x k blocks
//    (any grid size is correct); strided calls take the scalar loop. cuBLAS's f32 BLAS-1 reach
//    only 55-78 % of the H200's device-copy bandwidth (docs/blas.md, P4). Reductions: warp
//    shuffles, one partial per block in a scratch buffer of the context, and the last block to
//    finish (an atomic counter it resets to 0) sums the partials in a fixed order and writes the
//    result to device memory: one launch, deterministic.
//  * what cuBLAS does not do the reference-BLAS way (docs/blas.md, "Reference semantics"):
//    nrm2 (Blue's scaled sums), axpby, axpy with a device-resident alpha, beta-scaling of outputs,
//    and the guard around gemm/gemv with a device-resident alpha.
//
// Pointers travel as 8-byte scalars (device addresses with the tensor's byte offset applied);
// a scalar is a host value `a` plus a device pointer `pa` that, when not null, replaces it, so a
// device-resident alpha or beta is read on the device, never on the host.
// The kernels themselves are in kernels.cu, which compiles after the SDK's common part
// (sdk::cuda_common_source), as kernel_source() joins them; tests/cuda/kernel_sources_test.cpp
// compiles the whole with NVRTC.
#pragma once

#include <parenchyma/sdk/cuda_source.hpp>

// kernel_body: kernels.cu, embedded at build time (parenchyma_embed_source), NUL-terminated.
#include "blas_cuda_kernels.hpp" // generated in the build tree

namespace parenchyma::blas_cuda {

// Kernel names the bundle looks up, each with the suffixes _f32 and _f64 (blas_cuda.cpp).
inline constexpr const char* kernel_names[] = {
    "axpby", "axpy", "scale", "save_if_alpha0", "restore_if_alpha0", "asum",       "dot",
    "nrm2",  "scal", "copy",  "swap",           "axpy_small",        "scal_small", "copy_small"};

// The whole source handed to program_build: the SDK's common part, then kernel_body.
inline const char* kernel_source() { return sdk::cuda_source_with<kernel_body>().c_str(); }

} // namespace parenchyma::blas_cuda
