// pcy_array_random.h on devices: OpenCL C computes the same bits as the host's C++ (every word,
// every transform, over 10^5 drawn elements and the edge cases), and the header compiles with
// NVRTC as CUDA device code. Each part is skipped, saying why, when its runtime is absent.
#include "random_common.hpp"
#include "support/catch.hpp"

#include <bit>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#if defined(PCY_ARRAY_RANDOM_OPENCL)
#include "cl_loader.hpp"
#endif
#if defined(PCY_ARRAY_RANDOM_NVRTC)
#include "nvrtc_loader.hpp"
#endif

namespace rt = pcy_array_random_test;

// Catch2 v3 has SKIP; with v2 the test case says why and ends (passing, with the warning).
#if defined(SKIP)
#define PCY_RANDOM_SKIP(msg) SKIP(msg)
#else
#define PCY_RANDOM_SKIP(msg)                                                                       \
  do {                                                                                             \
    WARN("SKIPPED: " << msg);                                                                      \
    return;                                                                                        \
  } while (0)
#endif

namespace {

// Unused in a build with neither OpenCL nor NVRTC (their cases then say they are skipped).
[[maybe_unused]] std::string header_text() {
  std::ifstream in(PCY_ARRAY_RANDOM_HEADER, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// What every device computes from the words of one element (and the host, for comparison).
struct transforms {
  uint32_t uniform_f32, normal_f32;
  uint64_t uniform_f64, normal_f64;
  int64_t randint;
  int32_t bernoulli;
};
constexpr int64_t randint_lo = -1000000007;
uint64_t randint_range(const rt::words& w) {
  return (uint64_t(w[3]) << 20) ^ 0x9e3779b97f4a7c15ull;
}
constexpr uint64_t bernoulli_threshold = 0x4ccccccc; // p = 0.3

[[maybe_unused]] transforms on_host(const rt::words& w) {
  return {std::bit_cast<uint32_t>(pcy_rng_uniform_f32(w[0])),
          std::bit_cast<uint32_t>(pcy_rng_normal_f32(w[0], w[1])),
          std::bit_cast<uint64_t>(pcy_rng_uniform_f64(w[0], w[1])),
          std::bit_cast<uint64_t>(pcy_rng_normal_f64(w[0], w[1], w[2], w[3])),
          pcy_rng_randint(w[0], w[1], randint_lo, randint_range(w)),
          pcy_rng_bernoulli(w[0], bernoulli_threshold)};
}

} // namespace

#if defined(PCY_ARRAY_RANDOM_OPENCL)
namespace {

namespace pcl = parenchyma::opencl;

const char* const opencl_kernels = R"CL(
__kernel void pcy_test_words(ulong seed, ulong offset, __global uint* out) {
  const size_t i = get_global_id(0);
  uint w[4];
  pcy_rng_words(seed, offset, (ulong)i, w);
  for (int k = 0; k < 4; ++k) out[4 * i + k] = w[k];
}

__kernel void pcy_test_transforms(__global const uint* in, __global uint* f32,
                                  __global ulong* f64, __global long* ri, __global int* bern,
                                  long lo, ulong range_xor, ulong threshold) {
  const size_t i = get_global_id(0);
  const uint w0 = in[4 * i], w1 = in[4 * i + 1], w2 = in[4 * i + 2], w3 = in[4 * i + 3];
  f32[2 * i] = as_uint(pcy_rng_uniform_f32(w0));
  f32[2 * i + 1] = as_uint(pcy_rng_normal_f32(w0, w1));
#if PCY_RNG_F64
  f64[2 * i] = as_ulong(pcy_rng_uniform_f64(w0, w1));
  f64[2 * i + 1] = as_ulong(pcy_rng_normal_f64(w0, w1, w2, w3));
#else
  f64[2 * i] = 0;
  f64[2 * i + 1] = (ulong)w2;
#endif
  ri[i] = pcy_rng_randint(w0, w1, lo, ((ulong)w3 << 20) ^ range_xor);
  bern[i] = pcy_rng_bernoulli(w0, threshold);
}
)CL";

// Releases OpenCL objects at the end of the test case.
struct cl_cleanup {
  explicit cl_cleanup(const pcl::cl_api& a) : api(a) {}
  cl_cleanup(const cl_cleanup&) = delete;
  cl_cleanup& operator=(const cl_cleanup&) = delete;
  const pcl::cl_api& api;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  cl_program program = nullptr;
  std::vector<cl_kernel> kernels;
  std::vector<cl_mem> buffers;
  ~cl_cleanup() {
    for (cl_mem b : buffers)
      api.clReleaseMemObject(b);
    for (cl_kernel k : kernels)
      api.clReleaseKernel(k);
    if (program) api.clReleaseProgram(program);
    if (queue) api.clReleaseCommandQueue(queue);
    if (context) api.clReleaseContext(context);
  }
};

#define PCY_CL_CHECK(call)                                                                         \
  do {                                                                                             \
    const cl_int pcy_cl_err = (call);                                                              \
    INFO(#call);                                                                                   \
    REQUIRE(pcl::cl_error_name(pcy_cl_err) == std::string("CL_SUCCESS"));                          \
  } while (0)

} // namespace

TEST_CASE("array random: OpenCL C gives the host's bits", "[array][random][opencl]") {
  static pcl::cl_api api; // the ICD loader stays loaded (see cl_loader.cpp)
  std::string why;
  if (!api.loaded() && !api.load("libOpenCL.so.1", why)) PCY_RANDOM_SKIP("no OpenCL: " << why);
  cl_uint nplatforms = 0;
  if (api.clGetPlatformIDs(0, nullptr, &nplatforms) != CL_SUCCESS || nplatforms == 0)
    PCY_RANDOM_SKIP("no OpenCL platform");
  std::vector<cl_platform_id> platforms(nplatforms);
  PCY_CL_CHECK(api.clGetPlatformIDs(nplatforms, platforms.data(), nullptr));
  cl_device_id device = nullptr;
  for (cl_platform_id p : platforms) {
    if (api.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &device, nullptr) == CL_SUCCESS) break;
    device = nullptr;
  }
  if (device == nullptr) PCY_RANDOM_SKIP("no OpenCL device on " << nplatforms << " platform(s)");
  char name[256] = {}, extensions[8192] = {};
  api.clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
  api.clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, sizeof extensions - 1, extensions, nullptr);
  const bool fp64 = std::string(extensions).find("cl_khr_fp64") != std::string::npos;
  std::printf("OpenCL device: %s (%s)\n", name, fp64 ? "with fp64" : "without fp64: binary32 only");

  cl_cleanup cl{api};
  cl_int err = CL_SUCCESS;
  cl.context = api.clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  PCY_CL_CHECK(err);
  cl.queue = api.clCreateCommandQueue(cl.context, device, 0, &err);
  PCY_CL_CHECK(err);
  const std::string source = std::string("#define PCY_RNG_F64 ") + (fp64 ? "1" : "0") + "\n" +
                             header_text() + opencl_kernels;
  const char* text = source.c_str();
  cl.program = api.clCreateProgramWithSource(cl.context, 1, &text, nullptr, &err);
  PCY_CL_CHECK(err);
  // No -cl-mad-enable, no -cl-fast-relaxed-math: the header's bits assume IEEE operations.
  const cl_int built =
      api.clBuildProgram(cl.program, 1, &device, "-cl-std=CL1.2", nullptr, nullptr);
  {
    size_t size = 0;
    api.clGetProgramBuildInfo(cl.program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    api.clGetProgramBuildInfo(cl.program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    INFO("build log:\n" << log);
    PCY_CL_CHECK(built);
  }
  cl_kernel words_kernel = api.clCreateKernel(cl.program, "pcy_test_words", &err);
  PCY_CL_CHECK(err);
  cl.kernels.push_back(words_kernel);
  cl_kernel transforms_kernel = api.clCreateKernel(cl.program, "pcy_test_transforms", &err);
  PCY_CL_CHECK(err);
  cl.kernels.push_back(transforms_kernel);

  const auto buffer = [&](size_t bytes, cl_mem_flags flags, const void* host) {
    cl_mem b = api.clCreateBuffer(cl.context, flags, bytes, const_cast<void*>(host), &err);
    PCY_CL_CHECK(err);
    cl.buffers.push_back(b);
    return b;
  };
  const auto run = [&](cl_kernel k, size_t n) {
    PCY_CL_CHECK(
        api.clEnqueueNDRangeKernel(cl.queue, k, 1, nullptr, &n, nullptr, 0, nullptr, nullptr));
    PCY_CL_CHECK(api.clFinish(cl.queue));
  };
  const auto read = [&](cl_mem b, void* dst, size_t bytes) {
    PCY_CL_CHECK(api.clEnqueueReadBuffer(cl.queue, b, CL_TRUE, 0, bytes, dst, 0, nullptr, nullptr));
  };

  // 1. The words of 10^5 elements of a draw at an offset that carries into the counter's high word.
  const size_t n = 100000;
  const cl_ulong seed = 0x0123456789abcdefull, offset = 0xffffffffull - 1000;
  cl_mem words_out = buffer(4 * n * sizeof(cl_uint), CL_MEM_WRITE_ONLY, nullptr);
  PCY_CL_CHECK(api.clSetKernelArg(words_kernel, 0, sizeof seed, &seed));
  PCY_CL_CHECK(api.clSetKernelArg(words_kernel, 1, sizeof offset, &offset));
  PCY_CL_CHECK(api.clSetKernelArg(words_kernel, 2, sizeof(cl_mem), &words_out));
  run(words_kernel, n);
  std::vector<rt::words> device_words(n);
  read(words_out, device_words.data(), 4 * n * sizeof(cl_uint));
  std::vector<rt::words> host_words(n);
  size_t word_mismatches = 0;
  for (size_t e = 0; e < n; ++e) {
    host_words[e] = rt::draw(seed, offset, e);
    word_mismatches += host_words[e] != device_words[e];
  }
  CHECK(word_mismatches == 0);

  // 2. Every transform of those words and of the edge cases.
  std::vector<rt::words> in = rt::edge_words();
  in.insert(in.end(), host_words.begin(), host_words.end());
  const size_t m = in.size();
  cl_mem in_buf = buffer(m * sizeof(rt::words), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, in.data());
  cl_mem f32 = buffer(2 * m * sizeof(cl_uint), CL_MEM_WRITE_ONLY, nullptr);
  cl_mem f64 = buffer(2 * m * sizeof(cl_ulong), CL_MEM_WRITE_ONLY, nullptr);
  cl_mem ri = buffer(m * sizeof(cl_long), CL_MEM_WRITE_ONLY, nullptr);
  cl_mem bern = buffer(m * sizeof(cl_int), CL_MEM_WRITE_ONLY, nullptr);
  const cl_long lo = randint_lo;
  const cl_ulong range_xor = 0x9e3779b97f4a7c15ull, threshold = bernoulli_threshold;
  const cl_mem mems[] = {in_buf, f32, f64, ri, bern};
  for (cl_uint a = 0; a < 5; ++a)
    PCY_CL_CHECK(api.clSetKernelArg(transforms_kernel, a, sizeof(cl_mem), &mems[a]));
  PCY_CL_CHECK(api.clSetKernelArg(transforms_kernel, 5, sizeof lo, &lo));
  PCY_CL_CHECK(api.clSetKernelArg(transforms_kernel, 6, sizeof range_xor, &range_xor));
  PCY_CL_CHECK(api.clSetKernelArg(transforms_kernel, 7, sizeof threshold, &threshold));
  run(transforms_kernel, m);
  std::vector<uint32_t> d32(2 * m);
  std::vector<uint64_t> d64(2 * m);
  std::vector<int64_t> dri(m);
  std::vector<int32_t> dbern(m);
  read(f32, d32.data(), d32.size() * sizeof(uint32_t));
  read(f64, d64.data(), d64.size() * sizeof(uint64_t));
  read(ri, dri.data(), dri.size() * sizeof(int64_t));
  read(bern, dbern.data(), dbern.size() * sizeof(int32_t));
  size_t bad[6] = {};
  size_t first_bad = m;
  for (size_t i = 0; i < m; ++i) {
    const transforms h = on_host(in[i]);
    const bool b[6] = {h.uniform_f32 != d32[2 * i],
                       h.normal_f32 != d32[2 * i + 1],
                       fp64 && h.uniform_f64 != d64[2 * i],
                       fp64 && h.normal_f64 != d64[2 * i + 1],
                       h.randint != dri[i],
                       h.bernoulli != dbern[i]};
    for (int k = 0; k < 6; ++k) {
      bad[k] += b[k];
      if (b[k] && first_bad == m) first_bad = i;
    }
  }
  std::printf("OpenCL: %zu words and %zu x 6 transforms compared bit for bit\n", n, m);
  if (first_bad < m) {
    const rt::words& w = in[first_bad];
    const transforms h = on_host(w);
    UNSCOPED_INFO("first mismatch at element "
                  << first_bad << ": words " << std::hex << w[0] << " " << w[1] << " " << w[2]
                  << " " << w[3] << "; host normal_f32 " << h.normal_f32 << " device "
                  << d32[2 * first_bad + 1] << "; host normal_f64 " << h.normal_f64 << " device "
                  << d64[2 * first_bad + 1]);
  }
  CHECK(bad[0] == 0); // uniform_f32
  CHECK(bad[1] == 0); // normal_f32
  CHECK(bad[2] == 0); // uniform_f64
  CHECK(bad[3] == 0); // normal_f64
  CHECK(bad[4] == 0); // randint
  CHECK(bad[5] == 0); // bernoulli
}
#else
TEST_CASE("array random: OpenCL C gives the host's bits", "[array][random][opencl]") {
  PCY_RANDOM_SKIP("this build has no OpenCL plugin (PARENCHYMA_WITH_OPENCL, OpenCL headers)");
}
#endif

#if defined(PCY_ARRAY_RANDOM_NVRTC)
TEST_CASE("array random: the header compiles with NVRTC", "[array][random][cuda]") {
  namespace pc = parenchyma::cuda;
  pc::nvrtc rtc;
  if (!rtc.available()) PCY_RANDOM_SKIP("NVRTC is not available: " << rtc.reason());
  const std::string source = "#define PCY_RNG_FN static __device__ inline\n" + header_text() + R"CU(
extern "C" __global__ void pcy_test_transforms(unsigned long long seed, unsigned long long offset,
    unsigned int* words, float* f32, double* f64, long long* ri, int* bern, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned int w[4];
  pcy_rng_words(seed, offset, (unsigned long long)i, w);
  for (int k = 0; k < 4; ++k) words[4 * i + k] = w[k];
  f32[2 * i] = pcy_rng_uniform_f32(w[0]);
  f32[2 * i + 1] = pcy_rng_normal_f32(w[0], w[1]);
  f64[2 * i] = pcy_rng_uniform_f64(w[0], w[1]);
  f64[2 * i + 1] = pcy_rng_normal_f64(w[0], w[1], w[2], w[3]);
  ri[i] = pcy_rng_randint(w[0], w[1], -5, (unsigned long long)w[3] << 20);
  bern[i] = pcy_rng_bernoulli(w[0], 0x4ccccccdull);
}
)CU";
  // 1. A cubin for the H200's architecture, with NVRTC's default options.
  try {
    const pc::nvrtc::output out = rtc.compile(source, {}, 90);
    std::printf("NVRTC %s: %s, %zu bytes%s%s\n", rtc.version().c_str(), out.target.c_str(),
                out.image.size(), out.log.empty() ? "" : "; log:\n", out.log.c_str());
    CHECK(out.cubin);
    CHECK(!out.image.empty());
  } catch (const std::exception& e) {
    FAIL("NVRTC: " << e.what());
  }
  // 2. No contraction under --fmad=true (NVRTC's default): the header's __fmul_rn/__fadd_rn
  // become mul.rn/add.rn, which PTX never fuses, so the PTX has no fma at all. Compute
  // capability 9.1 does not exist: the loader then gives PTX for compute_90. The control, a
  // plain a * b + c, shows that the search finds the fma contraction makes.
  const auto ptx_of = [&](const std::string& src) {
    const pc::nvrtc::output out = rtc.compile(src, {"--fmad=true"}, 91);
    REQUIRE(!out.cubin);
    return std::string(out.image.data());
  };
  try {
    const std::string control =
        ptx_of("extern \"C\" __global__ void k(float* x) { x[0] = x[1] * x[2] + x[3]; }\n");
    REQUIRE(control.find("fma.rn.f32") != std::string::npos);
    const std::string ptx = ptx_of(source);
    INFO("PTX:\n" << ptx);
    CHECK(ptx.find("fma.") == std::string::npos);
    CHECK(ptx.find("mul.rn.f32") != std::string::npos);
    CHECK(ptx.find("mul.rn.f64") != std::string::npos);
  } catch (const std::exception& e) {
    FAIL("NVRTC: " << e.what());
  }
}
#else
TEST_CASE("array random: the header compiles with NVRTC", "[array][random][cuda]") {
  PCY_RANDOM_SKIP("this build has no CUDA plugin (PARENCHYMA_WITH_CUDA, cuda.h and nvrtc.h)");
}
#endif
