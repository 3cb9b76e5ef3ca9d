// The raw-dispatch baseline of bench_blas_vulkan: x[i] *= a over n floats, one invocation per
// element, in work-groups of 256 (the shape of blas_vulkan's scal on a 1024-element vector).
// Compiled here, once, into vk_scal_spv.hpp (the GPU machine has no GLSL compiler); after an
// edit, regenerate the header with tools/bench/blas/vk_scal_spv.sh.
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer data { float x[]; };
layout(push_constant) uniform args {
  uint n;
  float a;
};
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) x[i] *= a;
}
