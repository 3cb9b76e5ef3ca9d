// The CUDA backend through the core: SharedTensor moves native <-> CUDA <-> OpenCL with the
// transfer counters (no redundant copy), pinned host copies aliased into CUDA, and user kernels
// through Backend::build_program / launch, checked against a double-precision host reference.
#include "support/catch.hpp"
#include "support/catch_run.hpp"

#include <parenchyma/parenchyma.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>

using namespace parenchyma;

namespace {
Registry& registry() {
  static Registry r([] {
    RegistryOptions o;
    o.plugin_paths = {PCY_TEST_PLUGIN_DIR};
    o.default_plugin_dir = false;
    o.default_config = false;
    o.environment = std::map<std::string, std::string>{};
    return o;
  }());
  return r;
}

bool has_devices(const char* name) {
  const Framework* f = registry().find_framework(name);
  return f != nullptr && !f->devices().empty();
}

std::vector<float> random_floats(size_t n) {
  static std::mt19937 g{std::random_device{}()};
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v)
    x = d(g);
  return v;
}

const char* source = R"(
extern "C" __global__ void axpby(unsigned long long n, float a, const float* x, float b, float* y) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b * y[i];
}
)";
} // namespace

TEST_CASE("user kernels run on Backend(\"cuda\") over SharedTensors", "[cuda][core]") {
  Backend cuda(registry(), "cuda");
  CHECK(cuda.framework().name() == "cuda");
  auto prog = cuda.build_program(source, "--use_fast_math");
  auto k = prog.kernel("axpby");
  const uint64_t n = 1000003;
  SharedTensor<float> x({int64_t(n)}), y({int64_t(n)});
  const auto xs = random_floats(n), ys = random_floats(n);
  std::copy(xs.begin(), xs.end(), x.write_only().begin());
  std::copy(ys.begin(), ys.end(), y.write_only().begin());
  const float a = 0.75f, b = -1.25f;
  cuda.launch(k, LaunchDims::linear(n),
              {KernelArg::scalar(n), KernelArg::scalar(a), KernelArg::in(x), KernelArg::scalar(b),
               KernelArg::inout(y)});
  auto out = y.read();
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double want = double(a) * xs[i] + double(b) * ys[i];
    bad += std::abs(out[i] - want) > 1e-5 * (1 + std::abs(want));
  }
  CHECK(bad == 0);
  CHECK(x.stats().host_to_device == 1);
  CHECK(y.stats().host_to_device == 1);
  CHECK(y.stats().device_to_host == 1);
  // Reading again moves nothing.
  (void)x.read(cuda);
  (void)y.read();
  CHECK(x.stats().transfers() == 1);
  CHECK(y.stats().transfers() == 2);

  // A missing kernel is an error naming it.
  try {
    (void)prog.kernel("not_there");
    FAIL("missing kernel accepted");
  } catch (const error& e) {
    CHECK(e.code() == errc::not_found);
    CHECK(std::string(e.what()).find("not_there") != std::string::npos);
  }
  // A source that does not compile: errc::build with the log.
  try {
    (void)cuda.build_program("extern \"C\" __global__ void k() { undefined_name_7(); }");
    FAIL("bad source built");
  } catch (const error& e) {
    CHECK(e.code() == errc::build);
    CHECK(std::string(e.what()).find("undefined_name_7") != std::string::npos);
  }
  // Native handles for interop.
  CHECK(cuda.native(PCY_NATIVE_CONTEXT) != nullptr);
  CHECK(cuda.native(PCY_NATIVE_QUEUE) != nullptr);
  CHECK(cuda.native_memory(y) != nullptr);
}

TEST_CASE("tensors move native <-> CUDA <-> OpenCL with exact transfer counts", "[cuda][core]") {
  Backend cuda(registry(), "cuda");
  auto k = cuda.build_program(source).kernel("axpby");
  const uint64_t n = (3u << 20) + 7; // staged (pageable host copy), not a chunk multiple
  SharedTensor<float> t({int64_t(n)});
  const auto v = random_floats(n);
  SharedTensor<float> zero({int64_t(n)});
  if (has_devices("native")) {
    Backend native(registry(), "native");
    // Native -> CUDA: written through the native backend's memory, read on CUDA.
    (void)t.write_only(native);
    std::copy(v.begin(), v.end(), t.write().begin());
  } else {
    std::copy(v.begin(), v.end(), t.write_only().begin());
  }
  t.storage().reset_stats();
  std::copy(v.begin(), v.end(), zero.write_only().begin());
  // y = 2*x + 0*y on the GPU, in place on t.
  const float two = 2, nil = 0;
  cuda.launch(k, LaunchDims::linear(n),
              {KernelArg::scalar(n), KernelArg::scalar(two), KernelArg::in(zero),
               KernelArg::scalar(nil), KernelArg::inout(t)});
  CHECK(t.stats().host_to_device == 1);
  CHECK(t.stats().device_copies == 0);

  if (has_devices("opencl")) {
    Backend ocl(registry(), "opencl");
    (void)t.read(ocl); // CUDA -> OpenCL: through the host copy (or an alias of it)
    CHECK(t.stats().device_to_host == 1);
    (void)t.read(ocl);
    (void)t.read(cuda);
    CHECK(t.stats().device_to_host == 1); // nothing moves twice
  } else {
    WARN("no OpenCL device: the CUDA -> OpenCL leg was not run");
  }
  auto out = t.read();
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad += out[i] != 2 * v[i];
  CHECK(bad == 0);
  CHECK(t.stats().device_to_host == 1);
}

TEST_CASE("a pinned host copy is shared with CUDA without copies", "[cuda][core]") {
  Backend cuda(registry(), "cuda");
  auto k = cuda.build_program(source).kernel("axpby");
  const uint64_t n = 100003;
  SharedTensor<float> t({int64_t(n)}), x({int64_t(n)});
  t.storage().prefer_pinned_host(true);
  (void)t.write_only(cuda); // a CUDA slot first, so the host copy can be CUDA-pinned
  const auto v = random_floats(n), xs = random_floats(n);
  std::copy(v.begin(), v.end(), t.write().begin());
  std::copy(xs.begin(), xs.end(), x.write_only().begin());
  t.storage().reset_stats();
  const float one = 1, half = 0.5f;
  cuda.launch(k, LaunchDims::linear(n),
              {KernelArg::scalar(n), KernelArg::scalar(one), KernelArg::in(x),
               KernelArg::scalar(half), KernelArg::inout(t)});
  auto out = t.read();
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad += std::abs(out[i] - (double(xs[i]) + 0.5 * v[i])) > 1e-6;
  CHECK(bad == 0);
  INFO("aliases " << t.stats().aliases << " h2d " << t.stats().host_to_device << " d2h "
                  << t.stats().device_to_host);
  CHECK(t.stats().transfers() <= 2);
}

int main(int argc, char** argv) {
  try {
    const Framework* f = registry().find_framework("cuda");
    if (f == nullptr) {
      std::string why = "plugin not found";
      for (const auto& e : registry().load_report())
        if (e.name == "cuda") why = e.stage + ": " + e.reason;
      std::printf("FAILED: cuda plugin built but not loaded by the core: %s\n", why.c_str());
      return 1;
    }
    if (f->devices().empty()) {
      if (f->reason().empty()) {
        std::printf("FAILED: cuda has 0 devices and no reason\n");
        return 1;
      }
      std::printf("SKIPPED: cuda: %s\n", f->reason().c_str());
      return 77;
    }
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  return parenchyma_test::run_catch(argc, argv);
}
