// NN bundle for OpenCL: our own OpenCL C 1.2 kernels, one program per dtype built once per bundle
// context through the framework's program_build (which caches binaries on disk). Build options:
// REAL (float or double), PCY_FP64 for double, SWG (the work-group size of the row reductions, a
// power of two) and TS (the tile edge of the implicit-GEMM convolutions; work-groups TS x TS).
// Every tensor comes as a buffer plus an element offset (its byte_offset). Loops are
// grid-stride, so any global size covers any element count. The semantics are pcy_nn.h's.
// The kernels themselves are in kernels.cl (OpenCL C, compiled on its own by the test
// opencl_kernel_sources).
#pragma once

// kernel_source: kernels.cl, embedded at build time (parenchyma_embed_source), NUL-terminated.
#include "nn_opencl_kernels.hpp" // generated in the build tree
