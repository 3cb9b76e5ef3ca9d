// A short-lived program as users write them: the default (global) registry, a backend of the
// framework PCY_EXIT_FRAMEWORK names (opencl by default; vulkan), a user kernel that no earlier
// run built (argv[1] makes its source unique, so the plugin's cache writer has an entry to write
// as main returns), a BLAS op where the framework has a BLAS bundle, and a plain return from
// main. argv[2], when given, is the device index to use (else the default choice), or "count":
// exit 64 + the number of the framework's devices (at most 32), and do nothing else.
// Exit codes: 0 done, 3 a parenchyma error, 77 no device of the framework here.
#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace pa = parenchyma;

namespace {
// x[i] += 1 over n elements, in the framework's kernel language; `salt` makes the source new.
std::string add_one_source(const std::string& framework, const std::string& salt) {
  if (framework == "vulkan")
    return "#version 450\n// run " + salt +
           "\n#kernel add\nlayout(local_size_x = 64) in;\n"
           "layout(std430, set = 0, binding = 0) buffer xs { float x[]; };\n"
           "layout(push_constant) uniform args { uint n; };\n"
           "void main() {\n  uint i = gl_GlobalInvocationID.x;\n  if (i < n) x[i] += 1.0;\n}\n";
  return "// run " + salt +
         "\n__kernel void add(__global float* x, uint n) {\n"
         "  const uint i = get_global_id(0);\n"
         "  if (i < n) x[i] += 1.0f;\n}\n";
}
} // namespace

int main(int argc, char** argv) {
  const std::string salt = argc > 1 ? argv[1] : "0";
  const char* env = std::getenv("PCY_EXIT_FRAMEWORK");
  const std::string name = env != nullptr && *env ? env : "opencl";
  try {
    const pa::Framework* fw = pa::Registry::global().find_framework(name);
    if (argc > 2 && std::string(argv[2]) == "count")
      return 64 + static_cast<int>(fw == nullptr ? 0 : std::min<size_t>(fw->devices().size(), 32));
    if (fw == nullptr || fw->devices().empty()) return 77;
    pa::Backend b(argc > 2 ? name + ":" + std::string(argv[2]) : name);
    pa::Program p = b.build_program(add_one_source(name, salt));
    pa::Kernel k = p.kernel("add");
    pa::SharedTensor<float> x({1000});
    for (float& v : x.write_only())
      v = 1.0f;
    b.launch(k, pa::LaunchDims::linear(1000),
             {pa::KernelArg::inout(x), pa::KernelArg::scalar<uint32_t>(1000)});
    // The BLAS bundle's programs are cached too, where the framework has one.
    bool blas = false;
    try {
      blas = !b.route(pa::blas::detail::scal_key(PCY_DTYPE_F32)).fallback;
    } catch (const pa::error&) { // served nowhere
    }
    if (blas) pa::blas::scal(b, 3.0, x);
    if (x.read()[999] != (blas ? 6.0f : 2.0f)) {
      std::fprintf(stderr, "wrong result %g\n", double(x.read()[999]));
      return 4;
    }
  } catch (const pa::error& e) {
    std::fprintf(stderr, "exit_child: %s\n", e.what());
    return 3;
  }
  return 0; // no synchronize, no teardown: the runtime must finish its own work at exit
}
