// y[i] = a * x[i] + y[i] for i < n: compiled to SPIR-V at build time by glslc (when installed),
// so the plugin's SPIR-V path is tested with a module it did not compile itself.
#version 450
layout(local_size_x = 32) in;
layout(std430, set = 0, binding = 0) readonly buffer xs { float x[]; };
layout(std430, set = 0, binding = 1) buffer ys { float y[]; };
layout(push_constant) uniform args {
  float a;
  uint n;
};
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
