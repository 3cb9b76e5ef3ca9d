// Vulkan through the core's C++ API, with the plugins of this build: ranking (a Vulkan CPU
// device below native), SharedTensor round trips between the host, native and Vulkan with the
// transfer counters, GLSL user kernels on SharedTensors, two Vulkan backends of two registries
// exchanging a tensor (their VkDevices cannot copy to each other: the core stages it), errors of
// a user kernel through the C++ API. Exits 77 when the plugin is missing or has no device here.
#include "support/catch.hpp"
#include "support/catch_run.hpp"

#include <parenchyma/parenchyma.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <span>
#include <string>
#include <variant>
#include <vector>

using namespace parenchyma;

namespace {

RegistryOptions options(std::map<std::string, std::string> env = {}) {
  RegistryOptions o;
  if (!env.count("PARENCHYMA_CACHE_DIR")) {
    const char* c = std::getenv("PARENCHYMA_CACHE_DIR");
    env["PARENCHYMA_CACHE_DIR"] =
        c && *c ? c : "/tmp/pcy-vulkan-core-cache-" + std::to_string(::getpid());
  }
  o.environment = std::move(env);
  o.default_plugin_dir = true;
  return o;
}

void fill_random(std::span<float> v) {
  static std::mt19937 gen(4242);
  std::uniform_real_distribution<float> d(-1, 1);
  for (auto& x : v)
    x = d(gen);
}

const char* scale_source = R"GLSL(#version 450
#kernel scale
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer ys { float y[]; };
layout(push_constant) uniform args { int n; float a; };
void main() {
  int i = int(gl_GlobalInvocationID.x);
  if (i < n) y[i] = a * y[i];
}
#kernel axpy
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer xs { float x[]; };
layout(std430, set = 0, binding = 1) buffer ys { float y[]; };
layout(push_constant) uniform args { int n; float a; };
void main() {
  int i = int(gl_GlobalInvocationID.x);
  if (i < n) y[i] = a * x[i] + y[i];
}
)GLSL";

} // namespace

TEST_CASE("a Vulkan device that is the host CPU ranks below native") {
  Registry r(options());
  const auto ranked = r.device_ranking();
  int native = -1;
  for (size_t i = 0; i < ranked.size(); ++i)
    if (ranked[i].framework->name() == "native") native = static_cast<int>(i);
  REQUIRE(native >= 0);
  bool saw = false;
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (ranked[i].framework->name() != "vulkan") continue;
    saw = true;
    const Device& d = ranked[i].framework->devices()[ranked[i].device];
    INFO(d.name << " (" << to_string(d.kind) << "): " << ranked[i].reason);
    if (d.kind == device_kind::cpu) CHECK(static_cast<int>(i) > native);
  }
  REQUIRE(saw);
  Registry forced(options({{"PARENCHYMA_BACKEND", "vulkan"}}));
  CHECK(forced.select().framework == "vulkan");
  Registry denied(options({{"PARENCHYMA_BACKEND", "!vulkan"}}));
  CHECK(denied.select().framework != "vulkan");
}

// Where the device imports host memory (lavapipe: VK_EXT_external_memory_host), the tensor's
// host memory is aliased by native and Vulkan alike: no copy at all. Without the import
// (PARENCHYMA_VULKAN_NO_HOST_IMPORT, as on a discrete GPU): one copy each way.
TEST_CASE("SharedTensor: host -> native -> Vulkan -> native -> host, zero or one copy each way") {
  for (const bool import : {true, false}) {
    INFO((import ? "host import allowed" : "PARENCHYMA_VULKAN_NO_HOST_IMPORT=1"));
    Registry r(options(
        import ? std::map<std::string, std::string>{}
               : std::map<std::string, std::string>{{"PARENCHYMA_VULKAN_NO_HOST_IMPORT", "1"}}));
    bool host_import = false;
    for (const auto& [key, value] : r.find_framework("vulkan")->devices().front().properties)
      if (key == "host_import") host_import = std::get<bool>(value);
    if (!import) CHECK_FALSE(host_import);
    Backend native(r, "native");
    Backend vk(r, "vulkan");
    auto program = vk.build_program(scale_source);
    auto scale = program.kernel("scale");
    for (int n : {1, 1000, 65537, 1 << 20}) {
      INFO("n " << n);
      SharedTensor<float> t({n});
      auto w = t.write_only();
      fill_random(w);
      std::vector<float> ref(w.begin(), w.end());
      t.storage().reset_stats();
      (void)t.read(native);
      const float a = 1.5f;
      vk.launch(scale, LaunchDims::linear(n),
                {KernelArg::scalar(n), KernelArg::scalar(a), KernelArg::inout(t)});
      (void)t.read(native);
      auto out = t.read();
      int bad = 0;
      for (int i = 0; i < n; ++i)
        if (out[i] != a * ref[i]) ++bad;
      CHECK(bad == 0);
      const TransferStats& s = t.stats();
      INFO("aliases " << s.aliases << " h2d " << s.host_to_device << " d2h " << s.device_to_host
                      << " copies " << s.device_copies);
      if (host_import) { // aliased by both frameworks: not a byte moved
        CHECK(s.aliases >= 2);
        CHECK(s.bytes_to_device == 0);
        CHECK(s.bytes_to_host == 0);
      } else {
        CHECK(s.bytes_to_device == uint64_t(n) * sizeof(float));
        CHECK(s.bytes_to_host == uint64_t(n) * sizeof(float));
      }
    }
  }
}

TEST_CASE("a tensor written on Vulkan reads back on the host; an input stays valid") {
  Registry r(options());
  Backend vk(r, "vulkan");
  auto program = vk.build_program(scale_source);
  auto axpy = program.kernel("axpy");
  const int n = 100003;
  SharedTensor<float> x({n}), y({n});
  fill_random(x.write_only());
  fill_random(y.write_only());
  std::vector<float> rx(x.read().begin(), x.read().end());
  std::vector<float> ry(y.read().begin(), y.read().end());
  const float a = -0.75f;
  for (int rep = 0; rep < 3; ++rep) {
    vk.launch(axpy, LaunchDims::linear(n, 64),
              {KernelArg::scalar(n), KernelArg::scalar(a), KernelArg::in(x), KernelArg::inout(y)});
    for (int i = 0; i < n; ++i)
      ry[i] = static_cast<float>(double(a) * rx[i] + ry[i]);
  }
  auto out = y.read();
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (std::abs(out[i] - ry[i]) > 1e-5 * (1 + std::abs(ry[i]))) ++bad;
  CHECK(bad == 0);
  CHECK(x.stats().bytes_to_host == 0);
}

TEST_CASE("two Vulkan backends of two registries exchange a tensor") {
  Registry r1(options()), r2(options());
  Backend a(r1, "vulkan"), b(r2, "vulkan");
  REQUIRE(a.native(PCY_NATIVE_CONTEXT) != b.native(PCY_NATIVE_CONTEXT));
  auto pa = a.build_program(scale_source);
  auto pb = b.build_program(scale_source);
  auto sa = pa.kernel("scale"), sb = pb.kernel("scale");
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
    if (out[i] != 12.0f * ref[i]) ++bad;
  CHECK(bad == 0);
}

TEST_CASE("user kernel errors through the C++ API name the plugin and the cause") {
  Registry r(options());
  Backend vk(r, "vulkan");
  try {
    (void)vk.build_program(
        "#version 450\n#kernel k\nlayout(local_size_x = 1) in;\nvoid main() { nope; }\n");
    FAIL("a broken GLSL source built");
  } catch (const parenchyma::error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("vulkan") != std::string::npos);
    CHECK(what.find("nope") != std::string::npos);
  }
  auto program = vk.build_program(scale_source);
  auto scale = program.kernel("scale");
  SharedTensor<float> t({16});
  fill_random(t.write_only());
  try {
    vk.launch(scale, LaunchDims::linear(16), {KernelArg::scalar(16), KernelArg::inout(t)});
    FAIL("a launch with a missing argument ran");
  } catch (const parenchyma::error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("takes 3 arguments") != std::string::npos);
  }
}

int main(int argc, char** argv) {
  {
    Registry r(options());
    const Framework* f = r.find_framework("vulkan");
    if (f == nullptr) {
      std::string why = "the vulkan plugin was not loaded";
      for (const auto& e : r.load_report())
        if (e.name == "vulkan" || e.path.find("vulkan.so") != std::string::npos)
          why += " (" + e.stage + ": " + e.reason + ")";
      std::printf("SKIPPED: %s\n", why.c_str());
      return 77;
    }
    if (f->devices().empty()) {
      std::printf("SKIPPED: the Vulkan plugin found no device: %s\n", f->reason().c_str());
      return 77;
    }
    if (r.find_framework("native") == nullptr) {
      std::printf("SKIPPED: the native plugin is missing\n");
      return 77;
    }
  }
#ifndef PCY_VULKAN_GLSL_MODULE
  std::printf("SKIPPED: the Vulkan plugin's GLSL compiler module was not built (install "
              "libshaderc-dev, glslang-dev and spirv-tools, then configure again)\n");
  return 77;
#endif
  return parenchyma_test::run_catch(argc, argv);
}
