// The OpenCL bundles' kernel files (extensions/{blas,nn}/opencl/kernels.cl), read from disk and
// built on their own through the OpenCL plugin, with the options the bundles pass: f32 with both
// gemm variants (tiled for GPUs, the vector kernel for CPUs), and f64 where the device has fp64.
// A source error shows here, with the compiler's log, rather than at a bundle's first use. Each
// program must hold the kernels the bundle looks up first.
#include "plugin_fixture.hpp"

#include <fstream>
#include <iterator>
#include <string>

using namespace pcy_test;

namespace {

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool has_fp64(const env& e) {
  for (const auto& p : e.fw.properties(0))
    if (std::string_view(p.key) == "fp64") return p.i != 0;
  return false;
}

// Builds `source` with `options` and makes `kernel` from it; the build log is in the error.
void builds(const env& e, const std::string& source, const std::string& options,
            const char* kernel) {
  INFO("options: " << options);
  auto b = build(e, source, options.c_str());
  auto k = make_kernel(e, b.program.get(), kernel);
  CHECK(k.get() != nullptr);
}

} // namespace

TEST_CASE("blas kernels.cl builds on its own for f32 and f64", "[kernel_sources]") {
  env e; // no cache: the compiler sees each source
  const std::string source = read_file(PCY_BLAS_OPENCL_KERNELS);
  // blas_opencl.cpp's build(): RWG and the gemm shape of gemm_shape's defaults.
  const std::string shape = " -DRWG=256 -DTS_M=64 -DTS_N=64 -DTS_K=16 -DWPT_M=4 -DWPT_N=4"
                            " -DGEMM_MR=6 -DGEMM_MC=96 -DGEMM_KC=128";
  builds(e, source, "-DREAL=float" + shape + " -DGEMM_TILED -DGEMM_VW=8", "axpy_k");
  builds(e, source, "-DREAL=float" + shape + " -DGEMM_VW=8", "axpy_k");
  if (has_fp64(e))
    builds(e, source, "-DREAL=double -DPCY_FP64" + shape + " -DGEMM_VW=4", "axpy_k");
  else
    WARN("the device has no fp64: the f64 build is not checked");
}

TEST_CASE("nn kernels.cl builds on its own for f32 and f64", "[kernel_sources]") {
  env e;
  const std::string source = read_file(PCY_NN_OPENCL_KERNELS);
  builds(e, source, "-DREAL=float -DSWG=256 -DTS=16", "act_fwd");
  if (has_fp64(e))
    builds(e, source, "-DREAL=double -DPCY_FP64 -DSWG=256 -DTS=16", "act_fwd");
  else
    WARN("the device has no fp64: the f64 build is not checked");
}
