// OpenCL through the core's C++ API: ranking and overrides, SharedTensor round trips between
// the host, the native plugin and OpenCL (aliasing and transfer counters), user kernels on
// SharedTensors, and native handles used with raw OpenCL calls. Exits 77 when the OpenCL
// plugin is missing or has no device here.
#include "support/catch.hpp"
#include "support/catch_run.hpp"
#include "support/random.hpp"
#if PARENCHYMA_CATCH3
#include <algorithm>
#endif

#include "cl_loader.hpp"

#include <parenchyma/parenchyma.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

using namespace parenchyma;

namespace fs = std::filesystem;

namespace {

std::string cache_root() {
  const char* c = std::getenv("PARENCHYMA_CACHE_DIR");
  return c && *c ? c : "/tmp/pcy-opencl-core-cache-" + std::to_string(::getpid());
}

// A registry over the plugins of this build, with an environment of our choosing.
RegistryOptions options(std::map<std::string, std::string> env = {}) {
  RegistryOptions o;
  if (!env.count("PARENCHYMA_CACHE_DIR")) env["PARENCHYMA_CACHE_DIR"] = cache_root();
  // The platform filter of the run (the GPU machine's NVIDIA-only pass) reaches the plugin
  // through the replaced environment, as every plugin setting does.
  if (const char* f = std::getenv("PARENCHYMA_OPENCL_PLATFORMS");
      f && !env.count("PARENCHYMA_OPENCL_PLATFORMS"))
    env["PARENCHYMA_OPENCL_PLATFORMS"] = f;
  o.environment = std::move(env);
  o.default_plugin_dir = true;
  return o;
}

using pcy_test_support::rng;

template <class T> void fill_random(std::span<T> v) {
  std::uniform_real_distribution<T> d(-1, 1);
  for (auto& x : v)
    x = d(rng());
}

// Whether the backend's device (the framework's best, not necessarily its device 0) shares
// memory with the host.
bool opencl_host_unified(const Backend& b) {
  for (const auto& [k, v] : b.device().properties)
    if (k == "host_unified") return std::get<bool>(v);
  return false;
}

const char* scale_source = R"CL(
__kernel void scale(const int n, const float a, __global float* y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = a * y[i];
}
__kernel void axpy(const int n, const float a, __global const float* x, __global float* y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}
)CL";

} // namespace

TEST_CASE("an OpenCL device that is the host CPU ranks below native, a GPU above it",
          "[opencl][core]") {
  Registry r(options());
  const auto ranked = r.device_ranking();
  int native = -1;
  for (size_t i = 0; i < ranked.size(); ++i)
    if (ranked[i].framework->name() == "native") native = static_cast<int>(i);
  REQUIRE(native >= 0);
  bool saw_opencl = false;
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (ranked[i].framework->name() != "opencl") continue;
    saw_opencl = true;
    const Device& d = ranked[i].framework->devices()[ranked[i].device];
    INFO(d.name << " (" << to_string(d.kind) << "): " << ranked[i].reason);
    CHECK_FALSE(ranked[i].reason.empty());
    if (d.kind == device_kind::cpu) CHECK(static_cast<int>(i) > native);
    if (d.kind == device_kind::gpu) CHECK(static_cast<int>(i) < native);
  }
  REQUIRE(saw_opencl);
  const bool any_gpu = std::any_of(ranked.begin(), ranked.end(), [](const RankedDevice& x) {
    return x.framework->devices()[x.device].kind == device_kind::gpu;
  });
  if (!any_gpu) CHECK(r.select().framework == "native");
  // Backend("opencl") picks the framework's most potent device the same way.
  const Selection s = r.select("opencl");
  const Device& chosen = r.find_framework("opencl")->devices()[s.device];
  for (const auto& d : r.find_framework("opencl")->devices())
    if (d.kind == device_kind::gpu) CHECK(chosen.kind == device_kind::gpu);

  Registry forced(options({{"PARENCHYMA_BACKEND", "opencl"}}));
  CHECK(forced.select().framework == "opencl");
  Registry denied(options({{"PARENCHYMA_BACKEND", "!opencl"}}));
  CHECK(denied.select().framework != "opencl");
  if (!any_gpu) CHECK(denied.select().framework == "native");
  // An explicit request wins over the environment's preferences.
  CHECK(Backend(forced, "native").framework().name() == "native");
}

TEST_CASE("SharedTensor: host -> native -> OpenCL -> host round trips", "[opencl][core][tensor]") {
  Registry r(options());
  Backend native(r, "native");
  Backend ocl(r, "opencl");
  const bool shared = opencl_host_unified(ocl);
  auto program = ocl.build_program(scale_source);
  auto scale = program.kernel("scale");

  for (int n : {1, 1000, 65537, 1 << 20}) {
    INFO("n " << n);
    SharedTensor<float> t({n});
    auto w = t.write_only();
    fill_random(w);
    std::vector<float> ref(w.begin(), w.end());
    t.storage().reset_stats();

    (void)t.read(native); // native sees it
    const float a = 1.5f;
    ocl.launch(scale, LaunchDims::linear(n),
               {KernelArg::scalar(n), KernelArg::scalar(a), KernelArg::inout(t)});
    (void)t.read(native); // back to native after OpenCL wrote
    auto out = t.read();  // and the host
    int bad = 0;
    for (int i = 0; i < n; ++i)
      if (std::abs(out[i] - double(a) * ref[i]) > 1e-6) ++bad;
    CHECK(bad == 0);
    const TransferStats& s = t.stats();
    INFO("aliases " << s.aliases << " h2d " << s.host_to_device << " d2h " << s.device_to_host
                    << " copies " << s.device_copies);
    if (shared) {
      CHECK(s.bytes_to_device == 0); // every move was an alias of the same bytes
      CHECK(s.bytes_to_host == 0);
      CHECK(s.bytes_device_copy == 0);
      CHECK(s.transfers() == 0);
    } else {
      // Not shared: exactly one copy each way (host -> OpenCL, OpenCL -> host), none redundant.
      CHECK(s.bytes_to_device == uint64_t(n) * sizeof(float));
      CHECK(s.bytes_to_host == uint64_t(n) * sizeof(float));
    }
  }
}

TEST_CASE("SharedTensor written first on OpenCL reads back on the host", "[opencl][core][tensor]") {
  Registry r(options());
  Backend ocl(r, "opencl");
  auto program = ocl.build_program(scale_source);
  auto axpy = program.kernel("axpy");
  const int n = 100003;
  SharedTensor<float> x({n}), y({n});
  fill_random(x.write_only());
  fill_random(y.write_only());
  std::vector<float> rx(x.read().begin(), x.read().end());
  std::vector<float> ry(y.read().begin(), y.read().end());
  const float a = -0.75f;
  for (int rep = 0; rep < 3; ++rep) {
    ocl.launch(axpy, LaunchDims::linear(n, 64),
               {KernelArg::scalar(n), KernelArg::scalar(a), KernelArg::in(x), KernelArg::inout(y)});
    for (int i = 0; i < n; ++i)
      ry[i] = static_cast<float>(double(a) * rx[i] + ry[i]);
  }
  auto out = y.read();
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (std::abs(out[i] - ry[i]) > 1e-5 * (1 + std::abs(ry[i]))) ++bad;
  CHECK(bad == 0);
  // x was only read on the device: still valid everywhere, nothing moved back.
  CHECK(x.stats().bytes_to_host == 0);
}

TEST_CASE("two OpenCL backends in two registries exchange tensors", "[opencl][core][tensor]") {
  // off: two cl_contexts (the tensor is staged through the host); on: the device's queues and
  // contexts are shared process-wide (the default on PoCL before 7.0), so the buffers alias.
  const std::string share = GENERATE(as<std::string>{}, "off", "on");
  CAPTURE(share);
  Registry r1(options({{"PARENCHYMA_OPENCL_SHARED_QUEUE", share}}));
  Registry r2(options({{"PARENCHYMA_OPENCL_SHARED_QUEUE", share}}));
  Backend a(r1, "opencl");
  Backend b(r2, "opencl");
  if (share == "off")
    REQUIRE(a.native(PCY_NATIVE_CONTEXT) != b.native(PCY_NATIVE_CONTEXT));
  else
    REQUIRE(a.native(PCY_NATIVE_CONTEXT) == b.native(PCY_NATIVE_CONTEXT));
  auto pa = a.build_program(scale_source);
  auto pb = b.build_program(scale_source);
  auto sa = pa.kernel("scale");
  auto sb = pb.kernel("scale");
  const int n = 4099;
  SharedTensor<float> t({n});
  fill_random(t.write_only());
  std::vector<float> ref(t.read().begin(), t.read().end());
  const float two = 2.0f, three = 3.0f;
  a.launch(sa, LaunchDims::linear(n),
           {KernelArg::scalar(n), KernelArg::scalar(two), KernelArg::inout(t)});
  b.launch(sb, LaunchDims::linear(n),
           {KernelArg::scalar(n), KernelArg::scalar(three), KernelArg::inout(t)});
  a.launch(sa, LaunchDims::linear(n),
           {KernelArg::scalar(n), KernelArg::scalar(two), KernelArg::inout(t)});
  auto out = t.read();
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (std::abs(out[i] - 12.0 * ref[i]) > 1e-5) ++bad;
  CHECK(bad == 0);
}

TEST_CASE("user kernels: errors through the C++ API", "[opencl][core][kernels]") {
  Registry r(options());
  Backend ocl(r, "opencl");
  try {
    ocl.build_program("__kernel void k(__global float* y) { y[0] = nope; }");
    FAIL("a broken source built");
  } catch (const parenchyma::error& e) {
    CHECK(e.code() == errc::build);
    CHECK(e.origin() == "opencl");
    CHECK(std::string(e.what()).find("nope") != std::string::npos);
  }
  auto program = ocl.build_program(scale_source);
  try {
    (void)program.kernel("missing_kernel");
    FAIL("a missing kernel was found");
  } catch (const parenchyma::error& e) {
    CHECK(e.code() == errc::not_found);
    CHECK(std::string(e.what()).find("missing_kernel") != std::string::npos);
  }
  auto scale = program.kernel("scale");
  SharedTensor<float> t({10});
  fill_random(t.write_only());
  try {
    ocl.launch(scale, LaunchDims::linear(10), {KernelArg::scalar(10), KernelArg::inout(t)});
    FAIL("a launch with too few arguments ran");
  } catch (const parenchyma::error& e) {
    CHECK(e.code() == errc::invalid_argument);
    CHECK(std::string(e.what()).find("takes 3 arguments, got 2") != std::string::npos);
  }
  // The backend and the tensor still work.
  std::vector<float> ref(t.read().begin(), t.read().end());
  const float a = 4.0f;
  ocl.launch(scale, LaunchDims::linear(10),
             {KernelArg::scalar(10), KernelArg::scalar(a), KernelArg::inout(t)});
  auto out = t.read();
  for (int i = 0; i < 10; ++i)
    CHECK(std::abs(out[i] - 4.0 * ref[i]) < 1e-6);
}

TEST_CASE("a second build of the same source hits the program cache", "[opencl][core][cache]") {
  const std::string dir = cache_root() + "/core-cache-" + std::to_string(rng()());
  const std::string source = "// " + std::to_string(rng()()) + "\n" + std::string(scale_source);
  {
    Registry r(options({{"PARENCHYMA_CACHE_DIR", dir}}));
    Backend ocl(r, "opencl");
    CHECK_FALSE(ocl.build_program(source).cache_hit());
  }
  Registry r(options({{"PARENCHYMA_CACHE_DIR", dir}}));
  Backend ocl(r, "opencl");
  CHECK(ocl.build_program(source).cache_hit());
  CHECK(std::filesystem::exists(dir + "/opencl"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("native handles interoperate with raw OpenCL", "[opencl][core][native]") {
  parenchyma::opencl::cl_api cl;
  std::string why;
  REQUIRE(cl.load("libOpenCL.so.1", why));
  Registry r(options());
  Backend ocl(r, "opencl");
  auto ctx = static_cast<cl_context>(ocl.native(PCY_NATIVE_CONTEXT));
  auto queue = static_cast<cl_command_queue>(ocl.native(PCY_NATIVE_QUEUE));
  REQUIRE(ctx != nullptr);
  REQUIRE(queue != nullptr);
  const int n = 3001;
  SharedTensor<float> t({n});
  fill_random(t.write_only());
  std::vector<float> ref(t.read().begin(), t.read().end());
  auto mem = static_cast<cl_mem>(ocl.native_memory(t));
  REQUIRE(mem != nullptr);
  // Raw read on the backend's own queue sees the tensor's bytes.
  std::vector<float> raw(n);
  REQUIRE(cl.clEnqueueReadBuffer(queue, mem, CL_TRUE, 0, n * sizeof(float), raw.data(), 0, nullptr,
                                 nullptr) == CL_SUCCESS);
  CHECK(raw == ref);
  // A raw buffer in the backend's context works with its queue.
  cl_int err = CL_SUCCESS;
  cl_mem own = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), nullptr, &err);
  REQUIRE(err == CL_SUCCESS);
  REQUIRE(cl.clEnqueueCopyBuffer(queue, mem, own, 0, 0, n * sizeof(float), 0, nullptr, nullptr) ==
          CL_SUCCESS);
  std::vector<float> back(n);
  REQUIRE(cl.clEnqueueReadBuffer(queue, own, CL_TRUE, 0, n * sizeof(float), back.data(), 0, nullptr,
                                 nullptr) == CL_SUCCESS);
  CHECK(back == ref);
  cl.clReleaseMemObject(own);
}

int main(int argc, char** argv) {
  {
    Registry r(options());
    const Framework* f = r.find_framework("opencl");
    if (f == nullptr) {
      std::string why = "the opencl plugin was not loaded";
      for (const auto& e : r.load_report())
        if (e.name == "opencl" || e.path.find("opencl.so") != std::string::npos)
          why += " (" + e.stage + ": " + e.reason + ")";
      std::printf("SKIPPED: %s\n", why.c_str());
      return 77;
    }
    if (f->devices().empty()) {
      std::printf("SKIPPED: the OpenCL plugin found no device: %s\n", f->reason().c_str());
      return 77;
    }
    if (r.find_framework("native") == nullptr) {
      std::printf("SKIPPED: the native plugin is missing\n");
      return 77;
    }
  }
  return parenchyma_test::run_catch(argc, argv);
}

TEST_CASE("the plugin's settings come through the host: replaced environment and config",
          "[opencl][core][settings]") {
  {
    Registry r(options());
    const Framework* f = r.find_framework("opencl");
    if (f == nullptr || f->devices().empty()) {
      WARN("skipped: no OpenCL device here");
      return;
    }
  }
  // The replaced environment (RegistryOptions::environment), not the process's.
  {
    Registry r(options({{"PARENCHYMA_OPENCL_PLATFORMS", "no-such-platform"}}));
    const Framework* f = r.find_framework("opencl");
    REQUIRE(f != nullptr);
    CHECK(f->devices().empty());
    INFO(f->reason());
    CHECK(f->reason().find("left out by PARENCHYMA_OPENCL_PLATFORMS") != std::string::npos);
  }
  // The config's "settings", with no such variable in the environment.
  const fs::path dir =
      fs::temp_directory_path() / ("pcy-opencl-settings-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms(0755));
  const fs::path cfg = dir / "parenchyma.json";
  {
    std::ofstream out(cfg);
    out << R"({"settings": {"PARENCHYMA_OPENCL_PLATFORMS": "no-such-platform"}})";
  }
  fs::permissions(cfg, fs::perms(0644));
  RegistryOptions o = options();
  o.environment->erase("PARENCHYMA_OPENCL_PLATFORMS");
  o.config_file = cfg;
  {
    Registry r(o);
    const Framework* f = r.find_framework("opencl");
    REQUIRE(f != nullptr);
    CHECK(f->devices().empty());
    INFO(f->reason());
    CHECK(f->reason().find("left out by PARENCHYMA_OPENCL_PLATFORMS") != std::string::npos);
  }
  fs::remove_all(dir);
}
