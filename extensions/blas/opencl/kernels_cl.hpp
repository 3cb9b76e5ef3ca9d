// BLAS bundle for OpenCL: our own OpenCL C kernels, built once per context and dtype through the
// framework's program_build (which caches binaries on disk). REAL is float or double (-D).
// Scalars come as a host value plus an optional one-element buffer: bit 0 of `flags` takes alpha
// from pa[0], bit 1 beta from pb[0], so device-resident scalars never round-trip to the host.
// Every kernel bounds-checks (the grid is rounded up). Reference-BLAS semantics are decided in
// the kernel, where a device-resident scalar can be seen: beta == 0 never reads y or C (garbage
// or NaN there cannot leak into the result), alpha == 0 never reads x, A or B (axpy leaves y
// untouched), and nrm2 scales its sum of squares so that it neither overflows nor underflows.
// The kernels themselves are in kernels.cl (OpenCL C, compiled on its own by the test
// opencl_kernel_sources).
#pragma once

// kernel_source: kernels.cl, embedded at build time (parenchyma_embed_source), NUL-terminated.
#include "blas_opencl_kernels.hpp" // generated in the build tree
