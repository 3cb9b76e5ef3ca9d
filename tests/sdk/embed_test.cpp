// parenchyma_embed_source (sdk/cmake/ParenchymaPlugin.cmake): the generated char array holds the
// file's bytes exactly, then a NUL. Checked on a file with awkward bytes (quotes, backslashes,
// raw-string terminators, a CRLF, UTF-8, no final line end) and on every kernel file this build
// embeds in a bundle, against the file as it is on disk now.
#include "support/catch.hpp"

#include "embed_fixture.hpp"
#if PCY_HAVE_BLAS_OPENCL
#include "blas_opencl_kernels.hpp"
#endif
#if PCY_HAVE_NN_OPENCL
#include "nn_opencl_kernels.hpp"
#endif
#if PCY_HAVE_BLAS_CUDA
#include "blas_cuda_kernels.hpp"
#endif
#if PCY_HAVE_NN_CUDA
#include "nn_cuda_kernels.hpp"
#endif
#if PCY_HAVE_BLAS_VULKAN
#include "blas_vulkan_kernels.hpp"
#endif
#if PCY_HAVE_NN_VULKAN
#include "nn_vulkan_kernels.hpp"
#endif

#include <cstddef>
#include <fstream>
#include <iterator>
#include <string>

namespace {

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <size_t N> void same_as_file(const char (&embedded)[N], const char* path) {
  INFO(path);
  const std::string file = read_file(path);
  REQUIRE(N == file.size() + 1);
  CHECK(embedded[N - 1] == '\0');
  CHECK(std::string(embedded, N - 1) == file);
}

} // namespace

TEST_CASE("embedded: a file with awkward bytes comes through byte for byte", "[sdk]") {
  same_as_file(pcy_test::embed_fixture, PCY_EMBED_FIXTURE);
}

TEST_CASE("embedded: each bundle's kernel file is what the bundle carries", "[sdk]") {
  int checked = 0;
#if PCY_HAVE_BLAS_OPENCL
  same_as_file(parenchyma::blas_opencl::kernel_source, PCY_BLAS_OPENCL_FILE);
  ++checked;
#endif
#if PCY_HAVE_NN_OPENCL
  same_as_file(parenchyma::nn_opencl::kernel_source, PCY_NN_OPENCL_FILE);
  ++checked;
#endif
#if PCY_HAVE_BLAS_CUDA
  same_as_file(parenchyma::blas_cuda::kernel_body, PCY_BLAS_CUDA_FILE);
  ++checked;
#endif
#if PCY_HAVE_NN_CUDA
  same_as_file(parenchyma::nn_cuda::kernel_body, PCY_NN_CUDA_FILE);
  ++checked;
#endif
#if PCY_HAVE_BLAS_VULKAN
  same_as_file(parenchyma::blas_vulkan::kernel_source, PCY_BLAS_VULKAN_FILE);
  ++checked;
#endif
#if PCY_HAVE_NN_VULKAN
  same_as_file(parenchyma::nn_vulkan::kernel_source, PCY_NN_VULKAN_FILE);
  ++checked;
#endif
  if (checked == 0) WARN("no bundle with kernel files in this build: nothing to compare");
}
