// NN bundle for CUDA: our own CUDA C kernels (every op but the cuDNN convolutions), built once
// per bundle context through the framework's program_build (NVRTC for the device's own
// architecture, cubin cache) and launched on the backend's stream. NVRTC sees no headers: the
// half types are 16-bit words converted by the SDK's shared source (sdk/cuda_source.hpp), and
// every op computes in float (f32, f16, bf16) or double (f64).
//
// Entry points are extern "C" <kernel>_<dtype> (f32, f64, f16, bf16; LRN and dropout f32/f64
// only). Pointers travel as 8-byte scalars (device addresses with the tensor's byte offset
// applied); sizes as long long, geometry as int (the decoder keeps extents below 2^31, the
// bundle the padded extents H + 2 pad, W + 2 pad, which bound every plane coordinate computed
// here). Every elementwise kernel loops with a grid stride, so any grid size is correct.
// The kernels themselves are in kernels.cu, which compiles after the SDK's common part
// (sdk::cuda_common_source), as kernel_source() joins them; tests/cuda/kernel_sources_test.cpp
// compiles the whole with NVRTC.
#pragma once

#include <parenchyma/sdk/cuda_source.hpp>

// kernel_body: kernels.cu, embedded at build time (parenchyma_embed_source), NUL-terminated.
#include "nn_cuda_kernels.hpp" // generated in the build tree

namespace parenchyma::nn_cuda {

// The whole source handed to program_build: the SDK's common part, then kernel_body.
inline const char* kernel_source() { return sdk::cuda_source_with<kernel_body>().c_str(); }

} // namespace parenchyma::nn_cuda
