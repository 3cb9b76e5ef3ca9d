// coll bundle for CUDA: our own CUDA C kernels (kernels.cu: f16 / bf16 widened to an f32
// workspace and narrowed back, AVG's division), built once per context through the CUDA
// framework's program_build (NVRTC, cubin cache) and launched on the backend's stream around
// NCCL's calls. NVRTC sees no headers: the SDK's common part comes first (sdk::cuda_common_source);
// tests/cuda/kernel_sources_test.cpp compiles the whole with NVRTC.
#pragma once

#include <parenchyma/sdk/cuda_source.hpp>

// kernel_body: kernels.cu, embedded at build time (parenchyma_embed_source), NUL-terminated.
#include "coll_cuda_kernels.hpp" // generated in the build tree

namespace parenchyma::coll_cuda {

// The whole source handed to program_build: the SDK's common part, then kernel_body.
inline const char* kernel_source() { return sdk::cuda_source_with<kernel_body>().c_str(); }

} // namespace parenchyma::coll_cuda
