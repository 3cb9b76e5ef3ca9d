// A short-lived program as users write them: the default (global) registry, an OpenCL backend, a
// user kernel that no earlier run built (argv[1] makes its source unique, so the plugin's cache
// writer has an entry to write as main returns), a BLAS op, and a plain return from main.
// argv[2], when given, is the OpenCL device index to use (else the default choice), or "count":
// exit 64 + the number of OpenCL devices (at most 32), and do nothing else.
// Exit codes: 0 done, 3 a parenchyma error, 77 no OpenCL device here.
#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

namespace pa = parenchyma;

int main(int argc, char** argv) {
  const std::string salt = argc > 1 ? argv[1] : "0";
  try {
    const pa::Framework* fw = pa::Registry::global().find_framework("opencl");
    if (argc > 2 && std::string(argv[2]) == "count")
      return 64 + static_cast<int>(fw == nullptr ? 0 : std::min<size_t>(fw->devices().size(), 32));
    if (fw == nullptr || fw->devices().empty()) return 77;
    pa::Backend b(argc > 2 ? "opencl:" + std::string(argv[2]) : std::string("opencl"));
    const std::string src = "// run " + salt +
                            "\n__kernel void add(__global float* x, uint n) {\n"
                            "  const uint i = get_global_id(0);\n"
                            "  if (i < n) x[i] += 1.0f;\n}\n";
    pa::Program p = b.build_program(src);
    pa::Kernel k = p.kernel("add");
    pa::SharedTensor<float> x({1000});
    for (float& v : x.write_only())
      v = 1.0f;
    b.launch(k, pa::LaunchDims::linear(1000),
             {pa::KernelArg::inout(x), pa::KernelArg::scalar<uint32_t>(1000)});
    pa::blas::scal(b, 3.0, x);
    if (x.read()[999] != 6.0f) {
      std::fprintf(stderr, "wrong result %g\n", double(x.read()[999]));
      return 4;
    }
  } catch (const pa::error& e) {
    std::fprintf(stderr, "exit_child: %s\n", e.what());
    return 3;
  }
  return 0; // no synchronize, no teardown: the runtime must finish its own work at exit
}
