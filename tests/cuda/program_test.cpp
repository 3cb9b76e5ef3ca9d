// CUDA plugin on a GPU: NVRTC programs (errors with the log, missing kernels), launches the
// plugin must refuse (argument count and sizes, block size), user kernels checked against a
// double-precision host reference, and the cubin cache (miss, hit, corrupt, truncated).
#include "fixture.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace cuda_test;
namespace fs = std::filesystem;

namespace {
const char* kernels = R"(
extern "C" __global__ void axpy_f64(unsigned long long n, double a, const double* x, double* y) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
extern "C" __global__ void scale2d(int w, int h, float s, float* m) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) m[(long long)y * w + x] *= s;
}
// One partial sum per block, through dynamic shared memory (a LOCAL argument).
extern "C" __global__ void block_sum(unsigned n, const float* x, float* out) {
  extern __shared__ float buf[];
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}
)";

fs::path fresh_cache() {
  const fs::path d = fs::temp_directory_path() / ("pcy-cuda-prog-" + std::to_string(::getpid()) +
                                                  "-" + std::to_string(rng()() % 1000000));
  fs::remove_all(d);
  return d;
}

std::vector<fs::path> cache_files(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir / "cuda")) return out;
  for (auto& e : fs::directory_iterator(dir / "cuda"))
    if (e.path().extension() == ".pcyblob") out.push_back(e.path()); // the SDK's blob_cache
  return out;
}
} // namespace

TEST_CASE("a source that does not compile gives PCY_ERR_BUILD with the NVRTC log",
          "[cuda][gpu][program]") {
  auto& g = shared_gpu();
  built b;
  std::string msg;
  const char* bad = "extern \"C\" __global__ void k(float* p) { p[0] = not_declared_anywhere; }";
  CHECK(status_of(try_build(g, bad, nullptr, b), &msg) == PCY_ERR_BUILD);
  INFO(msg);
  CHECK(msg.find("not_declared_anywhere") != std::string::npos);
  CHECK(msg.find("sm_") != std::string::npos);
  CHECK(msg.rfind("cuda: ", 0) == 0);
  // Nothing else disturbed.
  auto ok = build(g, kernels);
  CHECK(ok.program);
}

TEST_CASE("a missing kernel is PCY_ERR_NOT_FOUND naming it", "[cuda][gpu][program]") {
  auto& g = shared_gpu();
  auto b = build(g, kernels);
  host::kernel k;
  std::string msg;
  CHECK(status_of(try_kernel(g, b.program.get(), "no_such_kernel", k), &msg) == PCY_ERR_NOT_FOUND);
  CHECK(msg.find("no_such_kernel") != std::string::npos);
}

TEST_CASE("user kernels compute what a double-precision reference does", "[cuda][gpu][program]") {
  auto& g = shared_gpu();
  auto b = build(g, kernels, "--use_fast_math");
  SECTION("1-D axpy, plugin-chosen and explicit block sizes") {
    auto k = kernel(g, b.program.get(), "axpy_f64");
    for (uint32_t local : {0u, 128u, 1000u}) {
      const unsigned long long n = 1000003;
      const double a = random_reals<double>(1)[0];
      auto x = random_reals<double>(n), y = random_reals<double>(n);
      auto mx = g.alloc(n * 8), my = g.alloc(n * 8);
      host::write(g.fw, g.q.get(), mx.get(), 0, x.data(), n * 8);
      host::write(g.fw, g.q.get(), my.get(), 0, y.data(), n * 8);
      host::check(try_launch(g, k.get(),
                             {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())},
                             {n}, {local}));
      std::vector<double> out(n);
      host::read(g.fw, g.q.get(), my.get(), 0, out.data(), n * 8);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i)
        bad += std::abs(out[i] - (y[i] + a * x[i])) > 1e-12;
      CAPTURE(local);
      CHECK(bad == 0);
    }
  }
  SECTION("2-D scale") {
    auto k = kernel(g, b.program.get(), "scale2d");
    const int w = 1001, h = 333;
    const float s = 1.5f;
    auto m = random_reals<float>(size_t(w) * h);
    auto mm = g.alloc(m.size() * 4);
    host::write(g.fw, g.q.get(), mm.get(), 0, m.data(), m.size() * 4);
    host::check(try_launch(g, k.get(),
                           {scalar_arg(w), scalar_arg(h), scalar_arg(s), mem_arg(mm.get())},
                           {uint64_t(w), uint64_t(h)}));
    std::vector<float> out(m.size());
    host::read(g.fw, g.q.get(), mm.get(), 0, out.data(), out.size() * 4);
    size_t bad = 0;
    for (size_t i = 0; i < m.size(); ++i)
      bad += out[i] != m[i] * s;
    CHECK(bad == 0);
  }
  SECTION("dynamic shared memory from a LOCAL argument") {
    auto k = kernel(g, b.program.get(), "block_sum");
    const unsigned n = 100000, block = 256, blocks = (n + block - 1) / block;
    auto x = random_reals<float>(n);
    auto mx = g.alloc(n * 4), mo = g.alloc(blocks * 4);
    host::write(g.fw, g.q.get(), mx.get(), 0, x.data(), n * 4);
    host::check(try_launch(
        g, k.get(),
        {scalar_arg(n), mem_arg(mx.get()), mem_arg(mo.get()), local_arg(block * sizeof(float))},
        {n}, {block}));
    std::vector<float> out(blocks);
    host::read(g.fw, g.q.get(), mo.get(), 0, out.data(), blocks * 4);
    double got = 0, want = 0;
    for (float v : out)
      got += v;
    for (float v : x)
      want += v;
    CHECK(std::abs(got - want) < 1e-3 * std::sqrt(double(n)));
  }
}

TEST_CASE("launches the kernel cannot take are refused with PCY_ERR_LAUNCH",
          "[cuda][gpu][program]") {
  auto& g = shared_gpu();
  auto b = build(g, kernels);
  auto k = kernel(g, b.program.get(), "axpy_f64");
  const unsigned long long n = 1000;
  const double a = 2;
  auto mx = g.alloc(n * 8), my = g.alloc(n * 8);
  std::string msg;
  // A block bigger than any device allows.
  CHECK(status_of(try_launch(g, k.get(),
                             {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())},
                             {n}, {2048}),
                  &msg) == PCY_ERR_LAUNCH);
  CHECK(msg.find("2048") != std::string::npos);
  // Dynamic shared memory beyond the device's limit.
  CHECK(status_of(try_launch(g, k.get(),
                             {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get()),
                              local_arg(size_t(1) << 30)},
                             {n}, {128}),
                  &msg) == PCY_ERR_LAUNCH);
  const bool checks_params = g.int_property("kernel_param_checks") == 1;
  if (!checks_params) {
    WARN("driver older than CUDA 12.4: argument counts cannot be checked");
    return;
  }
  CHECK(status_of(try_launch(g, k.get(), {scalar_arg(n), scalar_arg(a), mem_arg(mx.get())}, {n}),
                  &msg) == PCY_ERR_LAUNCH);
  CHECK(msg.find("takes 4 parameters") != std::string::npos);
  const float wrong = 2; // 4 bytes where the kernel takes a double
  CHECK(
      status_of(try_launch(g, k.get(),
                           {scalar_arg(n), scalar_arg(wrong), mem_arg(mx.get()), mem_arg(my.get())},
                           {n}),
                &msg) == PCY_ERR_LAUNCH);
  CHECK(msg.find("parameter 1 is 8 bytes") != std::string::npos);
  // The queue still works after the refusals.
  host::check(try_launch(
      g, k.get(), {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())}, {n}));
  host::finish(g.fw, g.q.get());
}

TEST_CASE("the cubin cache: miss, hit, corrupt and truncated entries", "[cuda][gpu][cache]") {
  const fs::path dir = fresh_cache();
  gpu g(dir.string());
  const std::string token = std::to_string(rng()());
  const std::string source = std::string(kernels) + "\n// " + token + "\n";
  auto run_axpy = [&](const built& b) {
    auto k = kernel(g, b.program.get(), "axpy_f64");
    const unsigned long long n = 4097;
    const double a = 0.5;
    auto x = random_reals<double>(n), y = random_reals<double>(n);
    auto mx = g.alloc(n * 8), my = g.alloc(n * 8);
    host::write(g.fw, g.q.get(), mx.get(), 0, x.data(), n * 8);
    host::write(g.fw, g.q.get(), my.get(), 0, y.data(), n * 8);
    host::check(try_launch(
        g, k.get(), {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())}, {n}));
    std::vector<double> out(n);
    host::read(g.fw, g.q.get(), my.get(), 0, out.data(), n * 8);
    for (size_t i = 0; i < n; ++i)
      if (std::abs(out[i] - (y[i] + a * x[i])) > 1e-12) return false;
    return true;
  };
  auto first = build(g, source);
  CHECK_FALSE(first.cache_hit);
  CHECK(run_axpy(first));
  // The entry is written on the cache's thread; a build of the same key waits for it.
  auto second = build(g, source);
  CHECK(second.cache_hit);
  CHECK(run_axpy(second));
  auto files = cache_files(dir);
  REQUIRE(files.size() == 1);
  // Other options are another entry.
  auto other = build(g, source, "-DSOMETHING=1");
  CHECK_FALSE(other.cache_hit);
  CHECK(build(g, source, "-DSOMETHING=1").cache_hit); // waits for its write
  CHECK(cache_files(dir).size() == 2);

  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(200);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 1);
    f.seekp(200);
    f.write(&c, 1);
  }
  g.h.log.clear();
  auto rebuilt = build(g, source);
  CHECK_FALSE(rebuilt.cache_hit);
  CHECK(g.h.log.count("checksum mismatch") == 1);
  CHECK(run_axpy(rebuilt));
  CHECK(build(g, source).cache_hit);

  fs::resize_file(files[0], fs::file_size(files[0]) / 2);
  auto again = build(g, source);
  CHECK_FALSE(again.cache_hit);
  CHECK(run_axpy(again));
  CHECK(build(g, source).cache_hit);
  fs::remove_all(dir);
}

TEST_CASE("without NVRTC the plugin runs everything but compilation", "[cuda][gpu][program]") {
  scoped_env e("PARENCHYMA_NVRTC", "/nonexistent/libnvrtc.so.13");
  gpu g(fresh_cache().string());
  built b;
  std::string msg;
  CHECK(status_of(try_build(g, kernels, nullptr, b), &msg) == PCY_ERR_UNAVAILABLE);
  CHECK(msg.find("PARENCHYMA_NVRTC") != std::string::npos);
  auto m = g.alloc(4097);
  auto src = random_bytes(4097);
  std::vector<unsigned char> back(4097);
  host::write(g.fw, g.q.get(), m.get(), 0, src.data(), src.size());
  host::read(g.fw, g.q.get(), m.get(), 0, back.data(), back.size());
  CHECK(back == src);
}
