// Vulkan plugin tests: the built parenchyma-vulkan.so opened with dlopen (no core involved) and
// driven through the SDK's host wrappers. What the framework conformance suite does not reach:
// several kernels in one GLSL source, scalars of several sizes through push constants, a SPIR-V
// module compiled by glslc, the errors a wrong launch or source gets, memory and kernels freed
// while work that uses them is still queued, fills at odd offsets, graphs (replays and what a
// capture refuses), the pipeline cache (saved, loaded, a bad file ignored), host memory imported
// and exported, a missing Vulkan loader.
// Exits 77 (skipped, with the reason) when the plugin finds no device.
#include "support/catch.hpp"
#include "support/catch_run.hpp"

#include <parenchyma/abi/pcy_framework.h>
#include <parenchyma/sdk/blob_cache.hpp>
#include <parenchyma/sdk/host.hpp>

#include <dlfcn.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace host = parenchyma::sdk::host;

namespace {

const pcy_framework_api& api() {
  static const pcy_framework_api* table = [] {
    void* lib = ::dlopen(PCY_VULKAN_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "cannot open %s: %s\n", PCY_VULKAN_PLUGIN, ::dlerror());
      std::abort();
    }
    auto entry = reinterpret_cast<pcy_framework_entry_fn>(::dlsym(lib, PCY_FRAMEWORK_ENTRY_SYMBOL));
    return entry();
  }();
  return *table;
}

// Host services: log lines kept, settings from a map.
struct test_host {
  std::mutex mu;
  std::vector<std::string> log;
  std::map<std::string, std::string> settings;
  pcy_host_services services{};
  explicit test_host(std::map<std::string, std::string> s = {}) : settings(std::move(s)) {
    services.struct_size = sizeof services;
    services.host_abi_major = PCY_ABI_VERSION_MAJOR;
    services.host_abi_minor = PCY_ABI_VERSION_MINOR;
    services.log_user = this;
    services.log = [](void* u, pcy_log_level, const char* origin, const char* message) {
      auto* h = static_cast<test_host*>(u);
      std::lock_guard lock(h->mu);
      h->log.push_back(std::string(origin) + ": " + message);
    };
    services.log_level = PCY_LOG_DEBUG;
    services.setting_user = this;
    services.setting = [](void* u, const char* name) -> const char* {
      auto* h = static_cast<test_host*>(u);
      auto it = h->settings.find(name);
      return it == h->settings.end() ? nullptr : it->second.c_str();
    };
  }
};

struct env {
  env() = default;
  explicit env(std::map<std::string, std::string> settings) : h(std::move(settings)) {}
  test_host h;
  host::framework fw{&api(), &h.services};
  uint32_t d0 = 0;
  host::context ctx = host::make_context(fw, {&d0, 1});
  host::queue q = host::make_queue(fw, ctx.get(), 0);

  host::memory alloc(uint64_t bytes) { return host::alloc(fw, ctx.get(), 0, bytes); }
  template <class T> host::memory upload(const std::vector<T>& v) {
    host::memory m = alloc(v.size() * sizeof(T));
    host::write(fw, q.get(), m.get(), 0, v.data(), v.size() * sizeof(T));
    return m;
  }
  template <class T> std::vector<T> download(pcy_memory m, size_t n) {
    std::vector<T> out(n);
    host::read(fw, q.get(), m, 0, out.data(), n * sizeof(T));
    return out;
  }
};

// pcy_error -> (code, message); {0, ""} when the call succeeded.
std::pair<int, std::string> outcome(pcy_error* e) {
  if (e == nullptr) return {0, ""};
  std::pair<int, std::string> r{static_cast<int>(e->code), e->message ? e->message : ""};
  INFO("origin: " << (e->origin ? e->origin : "(null)") << ", message: " << r.second);
  CHECK(std::string(e->origin ? e->origin : "") == "vulkan");
  e->destroy(e);
  return r;
}

pcy_error* try_build(env& e, const std::string& source, pcy_program* out,
                     const char* options = nullptr) {
  pcy_program_build_args b{};
  b.struct_size = sizeof b;
  b.context = e.ctx.get();
  b.source = source.data();
  b.source_size = source.size();
  b.options = options;
  pcy_error* err = api().program_build(&b);
  *out = b.program;
  return err;
}

host::program build(env& e, const std::string& source, const char* options = nullptr) {
  pcy_program p = nullptr;
  const auto [code, message] = outcome(try_build(e, source, &p, options));
  INFO(message);
  REQUIRE(code == 0);
  return host::program(p, api().program_destroy);
}

host::kernel make_kernel(pcy_program p, const char* name) {
  pcy_kernel_create_args k{};
  k.struct_size = sizeof k;
  k.program = p;
  k.name = name;
  host::check(api().kernel_create(&k));
  return host::kernel(k.kernel, api().kernel_destroy);
}

// A buffer by its device address: a buffer_reference push constant between two scalars.
const char* by_address = R"(#version 450
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint w[]; };
layout(push_constant) uniform args { uint first; Words data; uint n; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) data.w[first + i] = 0xC0DE0000u + i;
}
)";

pcy_kernel_arg mem(pcy_memory m) {
  pcy_kernel_arg a{};
  a.kind = PCY_ARG_MEMORY;
  a.memory = m;
  return a;
}
template <class T> pcy_kernel_arg scalar(const T& v) {
  pcy_kernel_arg a{};
  a.kind = PCY_ARG_SCALAR;
  a.value = &v;
  a.size = sizeof v;
  return a;
}

pcy_error* launch(env& e, pcy_kernel k, std::vector<pcy_kernel_arg> args, uint64_t global,
                  uint32_t local = 0) {
  pcy_kernel_launch_args l{};
  l.struct_size = sizeof l;
  l.queue = e.q.get();
  l.kernel = k;
  l.dims = 1;
  l.global[0] = global;
  l.local[0] = local;
  l.args = args.data();
  l.arg_count = static_cast<uint32_t>(args.size());
  return api().kernel_launch(&l);
}

std::vector<float> random_floats(size_t n) {
  static std::mt19937 gen(12345);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v)
    x = d(gen);
  return v;
}

// Two kernels in one source, a shared prefix, scalars of 4 and 8 bytes.
const char* two_kernels = R"GLSL(#version 450
#extension GL_ARB_gpu_shader_int64 : require
layout(std430, set = 0, binding = 0) buffer ys { float y[]; };

#kernel scale
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) readonly buffer xs { float x[]; };
layout(push_constant) uniform args { float a; uint n; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) y[i] = a * x[i];
}

#kernel iota
layout(local_size_x = 128) in;
layout(push_constant) uniform args { int64_t base; uint n; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) y[i] = float(base + int64_t(i));
}
)GLSL";

} // namespace

TEST_CASE("two kernels of one GLSL source, with scalars of 4 and 8 bytes") {
  env e;
  host::program p = build(e, two_kernels);
  host::kernel scale = make_kernel(p.get(), "scale");
  host::kernel iota = make_kernel(p.get(), "iota");
  const uint32_t n = 1000;
  const auto x = random_floats(n + 3);
  host::memory mx = e.upload(x);
  host::memory my = e.alloc((n + 3) * sizeof(float));
  const std::vector<float> sentinel(n + 3, -7.0f);
  host::write(e.fw, e.q.get(), my.get(), 0, sentinel.data(), sentinel.size() * sizeof(float));
  const float a = 1.5f;
  REQUIRE(launch(e, scale.get(), {mem(my.get()), mem(mx.get()), scalar(a), scalar(n)}, n) ==
          nullptr);
  auto y = e.download<float>(my.get(), n + 3);
  for (uint32_t i = 0; i < n; ++i)
    REQUIRE(y[i] == a * x[i]);
  for (uint32_t i = n; i < n + 3; ++i)
    REQUIRE(y[i] == -7.0f);

  const int64_t base = -500;
  REQUIRE(launch(e, iota.get(), {mem(my.get()), scalar(base), scalar(n)}, n) == nullptr);
  y = e.download<float>(my.get(), n + 3);
  for (uint32_t i = 0; i < n; ++i)
    REQUIRE(y[i] == static_cast<float>(base + i));
  CHECK(y[n] == -7.0f);
}

TEST_CASE("a SPIR-V module compiled by glslc, given as bytes") {
#ifndef PCY_VULKAN_AXPY_SPV
  WARN("glslc was not found at configure time: the SPIR-V path is not tested here");
#else
  std::ifstream in(PCY_VULKAN_AXPY_SPV, std::ios::binary);
  REQUIRE(in.good());
  const std::string spirv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  env e;
  host::program p = build(e, spirv);
  host::kernel k = make_kernel(p.get(), "main"); // the module's entry point
  const uint32_t n = 777;
  const auto x = random_floats(n), y0 = random_floats(n);
  host::memory mx = e.upload(x), my = e.upload(y0);
  const float a = -0.75f;
  REQUIRE(launch(e, k.get(), {mem(mx.get()), mem(my.get()), scalar(a), scalar(n)}, n) == nullptr);
  const auto y = e.download<float>(my.get(), n);
  for (uint32_t i = 0; i < n; ++i) {
    const double want = double(a) * x[i] + y0[i]; // the device may fuse the multiply-add
    REQUIRE(std::abs(y[i] - want) <= 1e-5 * (1 + std::abs(want)));
  }
  // Options make no sense for a binary.
  pcy_program none = nullptr;
  const auto [code, message] = outcome(try_build(e, spirv, &none, "-DX=1"));
  CHECK(code == PCY_ERR_BUILD);
  CHECK(message.find("SPIR-V") != std::string::npos);
#endif
}

TEST_CASE("wrong sources and launches get errors that say what is wrong") {
  env e;
  pcy_program none = nullptr;
  SECTION("no #version") {
    const auto [code, message] = outcome(try_build(e, "void main() {}", &none));
    CHECK(code == PCY_ERR_BUILD);
    CHECK(message.find("#version") != std::string::npos);
  }
  SECTION("a GLSL error carries the compiler's log and the kernel's name") {
    const auto [code, message] =
        outcome(try_build(e,
                          "#version 450\n#kernel broken\nlayout(local_size_x = 1) in;\n"
                          "void main() { undeclared = 1; }\n",
                          &none));
    CHECK(code == PCY_ERR_BUILD);
    CHECK(message.find("broken") != std::string::npos);
    CHECK(message.find("undeclared") != std::string::npos);
  }
  SECTION("an unknown build option") {
    const auto [code, message] = outcome(try_build(e, two_kernels, &none, "-cl-fast-relaxed-math"));
    CHECK(code == PCY_ERR_BUILD);
    CHECK(message.find("-cl-fast-relaxed-math") != std::string::npos);
  }
  SECTION("a kernel name twice") {
    const auto [code, message] = outcome(
        try_build(e, "#version 450\n#kernel a\nvoid main(){}\n#kernel a\nvoid main(){}\n", &none));
    CHECK(code == PCY_ERR_BUILD);
    CHECK(message.find("twice") != std::string::npos);
  }
  SECTION("launches") {
    host::program p = build(e, two_kernels, "-O0 -DUNUSED=3");
    host::kernel k = make_kernel(p.get(), "scale");
    host::memory m = e.alloc(256);
    const float a = 1.0f;
    const uint32_t n = 64;
    const double wide = 1.0;
    auto [c1, m1] = outcome(launch(e, k.get(), {mem(m.get()), scalar(a), scalar(n)}, n));
    CHECK(c1 == PCY_ERR_INVALID_ARGUMENT);
    CHECK(m1.find("takes 4 arguments") != std::string::npos);
    auto [c2, m2] =
        outcome(launch(e, k.get(), {mem(m.get()), mem(m.get()), scalar(wide), scalar(n)}, n));
    CHECK(c2 == PCY_ERR_INVALID_ARGUMENT);
    CHECK(m2.find("8") != std::string::npos);
    auto [c3, m3] =
        outcome(launch(e, k.get(), {mem(m.get()), mem(m.get()), scalar(a), scalar(n)}, n, 32));
    CHECK(c3 == PCY_ERR_INVALID_ARGUMENT);
    CHECK(m3.find("64") != std::string::npos);
    pcy_kernel_arg local{};
    local.kind = PCY_ARG_LOCAL;
    local.size = 64;
    auto [c4, m4] = outcome(launch(e, k.get(), {mem(m.get()), local, scalar(a), scalar(n)}, n));
    CHECK(c4 == PCY_ERR_UNSUPPORTED);
    CHECK(m4.find("shared") != std::string::npos);
    auto [c5, m5] = outcome(launch(e, k.get(), {mem(m.get()), mem(m.get()), scalar(a), scalar(n)},
                                   n, 64)); // the shader's own size is fine
    CHECK(c5 == 0);
    // A kernel of another context.
    env other;
    host::memory om = other.alloc(256);
    auto [c6, m6] =
        outcome(launch(other, k.get(), {mem(om.get()), mem(om.get()), scalar(a), scalar(n)}, n));
    CHECK(c6 == PCY_ERR_INVALID_ARGUMENT);
    CHECK(m6.find("another context") != std::string::npos);
    host::finish(e.fw, e.q.get());
  }
  SECTION("an unknown kernel names the ones there are") {
    host::program p = build(e, two_kernels);
    pcy_kernel_create_args k{};
    k.struct_size = sizeof k;
    k.program = p.get();
    k.name = "nope";
    const auto [code, message] = outcome(api().kernel_create(&k));
    CHECK(code == PCY_ERR_NOT_FOUND);
    CHECK(message.find("scale, iota") != std::string::npos);
  }
}

TEST_CASE("memory and kernels freed while queued work still uses them") {
  env e;
  host::program p = build(e, two_kernels);
  host::kernel iota = make_kernel(p.get(), "iota");
  const uint32_t n = 1 << 16;
  const int64_t base = 3;
  host::memory keep = e.alloc(n * sizeof(float));
  for (int round = 0; round < 20; ++round) {
    host::memory tmp = e.alloc(n * sizeof(float));
    REQUIRE(launch(e, iota.get(), {mem(tmp.get()), scalar(base), scalar(n)}, n) == nullptr);
    host::copy(e.fw, e.q.get(), tmp.get(), 0, keep.get(), 0, n * sizeof(float));
    // tmp is freed here, before the queue ran the launch and the copy.
  }
  iota.reset(); // and the kernel, before a finish
  const auto y = e.download<float>(keep.get(), n);
  for (uint32_t i = 0; i < n; i += 997)
    REQUIRE(y[i] == static_cast<float>(base + i));
}

TEST_CASE("fills of every pattern size at offsets that vkCmdFillBuffer cannot take") {
  env e;
  const uint64_t bytes = 3 * (uint64_t{1} << 20) + 48;
  host::memory m = e.alloc(bytes);
  std::vector<unsigned char> want(bytes, 0xAB);
  host::write(e.fw, e.q.get(), m.get(), 0, want.data(), bytes);
  const unsigned char pattern[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  for (uint32_t size : {1u, 2u, 4u, 8u, 16u}) {
    const uint64_t offset = size * 3 + 1, len = (bytes - offset - 7) / size * size;
    INFO("pattern " << size << ", offset " << offset << ", " << len << " bytes");
    host::fill(e.fw, e.q.get(), m.get(), offset, len, pattern, size);
    for (uint64_t i = 0; i < len; ++i)
      want[offset + i] = pattern[i % size];
    const auto got = e.download<unsigned char>(m.get(), bytes);
    REQUIRE(got == want);
  }
}

TEST_CASE("small transfers of many sizes from several threads reuse the device's staging buffers") {
  // Each thread writes and reads back blocks of 1 byte to 1 MiB at odd offsets through a queue
  // of its own; the staging buffers come from the device's pool (debug log: one line per buffer
  // made), so 2400 transfers make a few dozen at most.
  env e;
  constexpr int threads = 4, rounds = 300;
  constexpr uint64_t most = uint64_t{1} << 20;
  std::vector<std::string> failures(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        host::queue q = host::make_queue(e.fw, e.ctx.get(), 0);
        host::memory m = e.alloc(most + 64);
        std::mt19937_64 g(static_cast<uint64_t>(t) * 7919 + 1);
        std::vector<unsigned char> data(most), back(most);
        for (int r = 0; r < rounds; ++r) {
          const uint64_t bytes =
              r % 10 == 0 ? most : (g() % 5 == 0 ? 1 + g() % 64 : 1 + g() % (300u << 10));
          const uint64_t offset = g() % 61;
          for (uint64_t i = 0; i < bytes; ++i)
            data[i] = static_cast<unsigned char>(g() >> 56);
          host::write(e.fw, q.get(), m.get(), offset, data.data(), bytes, r % 2 == 0);
          host::read(e.fw, q.get(), m.get(), offset, back.data(), bytes);
          if (std::memcmp(data.data(), back.data(), bytes) != 0) {
            failures[static_cast<size_t>(t)] =
                "round " + std::to_string(r) + ": " + std::to_string(bytes) + " bytes differ";
            return;
          }
        }
      } catch (const std::exception& x) {
        failures[static_cast<size_t>(t)] = x.what();
      }
    });
  for (auto& th : pool)
    th.join();
  for (const std::string& f : failures)
    CHECK(f.empty());
  size_t made = 0;
  {
    std::lock_guard lock(e.h.mu);
    for (const std::string& l : e.h.log)
      made += l.find("a staging buffer of") != std::string::npos ? 1 : 0;
  }
  INFO(made << " staging buffers made for " << threads * rounds * 2 << " transfers");
  CHECK(made >= 1);
  CHECK(made <= static_cast<size_t>(threads) * 6 * 2); // 6 sizes (64 KiB .. 1 MiB) x 2 in use
}

TEST_CASE("transfers larger than the 64 MiB staging piece, and a buffer too large to bind") {
  env e;
  const uint64_t bytes = (uint64_t{150} << 20) + 5, offset = 3;
  std::vector<unsigned char> data(bytes);
  uint64_t state = 0x9e3779b97f4a7c15u;
  for (auto& b : data) { // cheap pseudo-random bytes: every piece differs from the others
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    b = static_cast<unsigned char>(state);
  }
  host::memory m = e.alloc(bytes + offset);
  host::write(e.fw, e.q.get(), m.get(), offset, data.data(), bytes, /*blocking=*/false);
  std::vector<unsigned char> back(bytes);
  host::read(e.fw, e.q.get(), m.get(), offset, back.data(), bytes);
  REQUIRE(back == data);

  // A kernel binds whole buffers: one above maxStorageBufferRange is refused with its size.
  int64_t range = 0;
  for (const pcy_property& p : e.fw.properties(0))
    if (std::string(p.key) == "max_storage_buffer_range") range = p.i;
  REQUIRE(range > 0);
  if (static_cast<uint64_t>(range) >= bytes + offset) {
    WARN("this device binds buffers of " << range << " bytes: the refusal is not reached");
    return;
  }
  host::program p = build(e, two_kernels);
  host::kernel iota = make_kernel(p.get(), "iota");
  const int64_t base = 0;
  const uint32_t n = 16;
  const auto [code, message] =
      outcome(launch(e, iota.get(), {mem(m.get()), scalar(base), scalar(n)}, n));
  CHECK(code == PCY_ERR_UNSUPPORTED);
  CHECK(message.find("maxStorageBufferRange") != std::string::npos);
  CHECK(message.find(std::to_string(bytes + offset)) != std::string::npos);

  // The same buffer as a buffer_reference push constant (its device address): no range limit.
  // The kernel writes words past maxStorageBufferRange, read back with the host's data around.
  bool device_address = false;
  for (const pcy_property& q : e.fw.properties(0))
    if (std::string(q.key) == "buffer_device_address") device_address = q.i != 0;
  if (!device_address) {
    WARN("this device has no bufferDeviceAddress: the address form is not reached");
    return;
  }
  host::program pa = build(e, by_address);
  host::kernel words = make_kernel(pa.get(), "main");
  const uint32_t count = 1000;
  const uint32_t first = static_cast<uint32_t>((bytes + offset) / 4) - count - 1;
  REQUIRE(uint64_t{first} * 4 > static_cast<uint64_t>(range));
  // Scalars and the buffer interleaved: the memory argument fills the pointer member.
  REQUIRE(launch(e, words.get(), {scalar(first), mem(m.get()), scalar(count)}, count) == nullptr);
  std::vector<uint32_t> got(count + 2);
  host::read(e.fw, e.q.get(), m.get(), (uint64_t{first} - 1) * 4, got.data(), got.size() * 4);
  std::vector<uint32_t> want(count + 2);
  std::memcpy(&want[0], data.data() + (uint64_t{first} - 1) * 4 - offset, 4);
  std::memcpy(&want[count + 1], data.data() + (uint64_t{first} + count) * 4 - offset, 4);
  for (uint32_t i = 0; i < count; ++i)
    want[i + 1] = 0xC0DE0000u + i;
  CHECK(got == want);
  // A launch that gives the pointer a scalar is refused by name.
  const auto [c2, m2] =
      outcome(launch(e, words.get(), {scalar(first), scalar(first), scalar(count)}, count));
  CHECK(c2 == PCY_ERR_INVALID_ARGUMENT);
  CHECK(m2.find("buffer_reference") != std::string::npos);
}

TEST_CASE("a device without bufferDeviceAddress refuses buffer_reference kernels by name") {
  env e(std::map<std::string, std::string>{{"PARENCHYMA_VULKAN_NO_DEVICE_ADDRESS", "1"}});
  bool reported = false;
  for (const pcy_property& q : e.fw.properties(0))
    if (std::string(q.key) == "buffer_device_address") {
      reported = true;
      CHECK(q.i == 0);
    }
  CHECK(reported);
  host::program p = build(e, by_address); // SPIR-V does not depend on the device
  pcy_kernel_create_args k{};
  k.struct_size = sizeof k;
  k.program = p.get();
  k.name = "main";
  const auto [code, message] = outcome(api().kernel_create(&k));
  CHECK(code == PCY_ERR_UNSUPPORTED);
  CHECK(message.find("bufferDeviceAddress") != std::string::npos);
  CHECK(message.find("maxStorageBufferRange") != std::string::npos);
  // Descriptor kernels still run.
  host::program d = build(e, two_kernels);
  host::kernel iota = make_kernel(d.get(), "iota");
  host::memory m = e.alloc(16 * sizeof(float));
  const int64_t base = 0;
  const uint32_t n = 16;
  CHECK(launch(e, iota.get(), {mem(m.get()), scalar(base), scalar(n)}, n) == nullptr);
}

TEST_CASE("pinned (host-visible) memory: transfers, copies and kernels like device memory") {
  env e;
  const uint32_t n = 4099;
  host::memory pinned =
      host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(float), PCY_MEMORY_HOST_PINNED);
  const auto x = random_floats(n);
  host::write(e.fw, e.q.get(), pinned.get(), 0, x.data(), n * sizeof(float));
  host::memory device = e.alloc(n * sizeof(float));
  host::copy(e.fw, e.q.get(), pinned.get(), 0, device.get(), 0, n * sizeof(float));
  host::program p = build(e, two_kernels);
  host::kernel scale = make_kernel(p.get(), "scale");
  const float a = -2.0f;
  REQUIRE(launch(e, scale.get(), {mem(pinned.get()), mem(device.get()), scalar(a), scalar(n)}, n) ==
          nullptr);
  const auto y = e.download<float>(pinned.get(), n);
  for (uint32_t i = 0; i < n; ++i)
    REQUIRE(y[i] == a * x[i]);
}

// Runs two_kernels' `iota` (y[i] = base + i) over n floats on queue q and checks the result.
void run_iota(host::framework& fw, pcy_context ctx, pcy_queue q, pcy_program p, uint32_t n,
              int64_t base) {
  host::kernel iota = make_kernel(p, "iota");
  host::memory m = host::alloc(fw, ctx, 0, n * sizeof(float));
  pcy_kernel_arg args[3] = {mem(m.get()), scalar(base), scalar(n)};
  pcy_kernel_launch_args l{};
  l.struct_size = sizeof l;
  l.queue = q;
  l.kernel = iota.get();
  l.dims = 1;
  l.global[0] = n;
  l.args = args;
  l.arg_count = 3;
  host::check(api().kernel_launch(&l));
  std::vector<float> y(n);
  host::read(fw, q, m.get(), 0, y.data(), n * sizeof(float));
  for (uint32_t i = 0; i < n; ++i)
    REQUIRE(y[i] == static_cast<float>(base + i));
}

TEST_CASE("GLSL compiled once comes from the kernel cache in the next plugin instance") {
  char tmpl[] = "/tmp/pcy-vulkan-cache-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  auto run = [&](bool expect_hit) {
    test_host h;
    h.services.cache_dir = dir.c_str();
    host::framework fw(&api(), &h.services);
    const uint32_t d0 = 0;
    host::context ctx = host::make_context(fw, {&d0, 1});
    host::queue q = host::make_queue(fw, ctx.get(), 0);
    pcy_program_build_args b{};
    b.struct_size = sizeof b;
    b.context = ctx.get();
    b.source = two_kernels;
    host::check(api().program_build(&b));
    host::program p(b.program, api().program_destroy);
    CHECK(b.cache_hit == expect_hit);
    run_iota(fw, ctx.get(), q.get(), p.get(), 300, 7);
  };
  run(false);
  run(true);
  // Entries that are not the cache's own are refused by it and compiled again.
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir))
    if (f.is_regular_file()) std::ofstream(f.path(), std::ios::binary | std::ios::trunc) << "junk";
  run(false);
  std::filesystem::remove_all(dir);
}

// A graph captured on the queue (graph.cpp): launches with descriptor sets and push constants,
// a fill through a staging buffer (an 8-byte pattern) and a copy, replayed many times; what
// waits for the device or the host is refused by name and breaks the capture.
TEST_CASE("graphs: recorded command buffers replayed, and what a capture refuses") {
  env e;
  host::program p = build(e, two_kernels);
  host::kernel scale = make_kernel(p.get(), "scale");
  const uint32_t n = 4099;
  auto x = random_floats(n);
  std::vector<float> y(n, 0.0f);
  host::memory mx = e.upload(x), my = e.upload(y);
  pcy_graph g = nullptr;
  REQUIRE(api().graph_create(e.q.get(), &g) == nullptr);
  std::unique_ptr<pcy_graph_s, void (*)(pcy_graph)> graph(g, api().graph_destroy);
  const float pattern[2] = {0.5f, -2.0f}; // 8 bytes: a staging buffer the graph keeps
  {
    float a = 1.5f; // captured by value: changed below, before the launches
    REQUIRE(api().queue_capture_begin(e.q.get(), g) == nullptr);
    REQUIRE(launch(e, scale.get(), {mem(my.get()), mem(mx.get()), scalar(a), scalar(n)}, n) ==
            nullptr);
    REQUIRE(api().queue_capture_end(e.q.get(), g) == nullptr);
    a = 100.0f;
    REQUIRE(api().queue_capture_begin(e.q.get(), g) == nullptr);
    host::fill(e.fw, e.q.get(), mx.get(), 8, 64 * sizeof(float), pattern, sizeof pattern);
    host::copy(e.fw, e.q.get(), my.get(), 0, mx.get(), 1024 * sizeof(float), 16 * sizeof(float));
    REQUIRE(api().queue_capture_end(e.q.get(), g) == nullptr);
  }
  REQUIRE(api().graph_instantiate(g) == nullptr);
  CHECK(outcome(api().graph_instantiate(g)).second.find("already instantiated") !=
        std::string::npos);
  CHECK(e.download<float>(my.get(), n) == y); // capturing ran nothing
  for (int round = 0; round < 25; ++round) {
    REQUIRE(api().graph_launch(e.q.get(), g) == nullptr);
    for (uint32_t i = 0; i < n; ++i)
      y[i] = 1.5f * x[i];
    for (uint32_t i = 0; i < 64; ++i)
      x[2 + i] = pattern[i % 2];
    for (uint32_t i = 0; i < 16; ++i)
      x[1024 + i] = y[i];
  }
  CHECK(e.download<float>(my.get(), n) == y);
  CHECK(e.download<float>(mx.get(), n) == x);

  // Refused inside a capture, each by name; the capture then ends with an error.
  const float one = 1.0f;
  std::vector<float> host_bytes(16);
  pcy_event ev = nullptr;
  const std::vector<std::pair<const char*, std::function<pcy_error*()>>> refused = {
      {"queue_finish", [&] { return api().queue_finish(e.q.get()); }},
      {"memory_read",
       [&] {
         pcy_memory_transfer_args t{};
         t.struct_size = sizeof t;
         t.queue = e.q.get();
         t.memory = my.get();
         t.host_pointer = host_bytes.data();
         t.bytes = 16;
         t.blocking = true;
         return api().memory_read(&t);
       }},
      {"memory_write",
       [&] {
         pcy_memory_transfer_args t{};
         t.struct_size = sizeof t;
         t.queue = e.q.get();
         t.memory = my.get();
         t.host_pointer = host_bytes.data();
         t.bytes = sizeof(float);
         return api().memory_write(&t);
       }},
      {"event_record", [&] { return api().event_record(e.q.get(), &ev); }},
      {"graph_launch", [&] { return api().graph_launch(e.q.get(), g); }},
  };
  for (const auto& [what, call] : refused) {
    INFO(what);
    pcy_graph broken = nullptr;
    REQUIRE(api().graph_create(e.q.get(), &broken) == nullptr);
    REQUIRE(api().queue_capture_begin(e.q.get(), broken) == nullptr);
    const auto [code, message] = outcome(call());
    CHECK(code == PCY_ERR_UNSUPPORTED);
    CHECK(message.find(what) != std::string::npos);
    CHECK(message.find("capturing a graph") != std::string::npos);
    const auto [end_code, end_message] = outcome(api().queue_capture_end(e.q.get(), broken));
    CHECK(end_code == PCY_ERR_UNSUPPORTED);
    CHECK(end_message.find("capture failed") != std::string::npos);
    CHECK(outcome(api().graph_instantiate(broken)).first == PCY_ERR_INVALID_ARGUMENT);
    api().graph_destroy(broken);
  }
  CHECK(ev == nullptr);
  // A graph is launched only when instantiated, and only on its own queue.
  host::queue other = host::make_queue(e.fw, e.ctx.get(), 0);
  CHECK(outcome(api().graph_launch(other.get(), g)).first == PCY_ERR_INVALID_ARGUMENT);
  CHECK(outcome(api().queue_capture_begin(other.get(), g)).first == PCY_ERR_INVALID_ARGUMENT);
  pcy_graph raw = nullptr;
  REQUIRE(api().graph_create(e.q.get(), &raw) == nullptr);
  CHECK(outcome(api().graph_launch(e.q.get(), raw)).first == PCY_ERR_INVALID_ARGUMENT);
  api().graph_destroy(raw);
  // A graph destroyed in the middle of a capture ends it: the queue runs work again.
  {
    pcy_graph open = nullptr;
    REQUIRE(api().graph_create(e.q.get(), &open) == nullptr);
    REQUIRE(api().queue_capture_begin(e.q.get(), open) == nullptr);
    api().graph_destroy(open);
  }
  // The queue works as before, and the graph once more after it, then is destroyed while its
  // launch may still run.
  REQUIRE(launch(e, scale.get(), {mem(my.get()), mem(mx.get()), scalar(one), scalar(n)}, n) ==
          nullptr);
  REQUIRE(api().graph_launch(e.q.get(), g) == nullptr);
  graph.reset();
  for (uint32_t i = 0; i < n; ++i)
    y[i] = 1.5f * x[i];
  for (uint32_t i = 0; i < 64; ++i)
    x[2 + i] = pattern[i % 2];
  for (uint32_t i = 0; i < 16; ++i)
    x[1024 + i] = y[i];
  CHECK(e.download<float>(my.get(), n) == y);
  CHECK(e.download<float>(mx.get(), n) == x);
}

// The VkPipelineCache of each VkDevice (device.cpp): saved to the plugin's pipeline cache
// (kind "vulkan-pipeline") when the device goes, loaded by the next plugin instance; a damaged
// file (refused by the blob cache's checksum) or an intact entry whose data is for another
// device or driver (refused by the plugin's header check) is ignored: kernels still build and
// run, and the next save replaces it.
TEST_CASE("the pipeline cache: saved, loaded again, a corrupt or foreign file ignored") {
  char tmpl[] = "/tmp/pcy-vulkan-pipelines-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  auto run = [&] { // the log of one plugin instance that built and ran a kernel
    test_host h;
    h.services.cache_dir = dir.c_str();
    {
      host::framework fw(&api(), &h.services);
      const uint32_t d0 = 0;
      host::context ctx = host::make_context(fw, {&d0, 1});
      host::queue q = host::make_queue(fw, ctx.get(), 0);
      pcy_program_build_args b{};
      b.struct_size = sizeof b;
      b.context = ctx.get();
      b.source = two_kernels;
      host::check(api().program_build(&b));
      host::program p(b.program, api().program_destroy);
      run_iota(fw, ctx.get(), q.get(), p.get(), 100, 11);
    } // the device goes here (its cache is saved), then the plugin (the write finishes)
    std::string all;
    for (const auto& line : h.log)
      all += line + "\n";
    return all;
  };
  auto entry = [&] { // the one pipeline cache entry
    std::vector<std::filesystem::path> files;
    for (const auto& f : std::filesystem::directory_iterator(dir + "/vulkan-pipeline"))
      files.push_back(f.path());
    REQUIRE(files.size() == 1);
    return files.front();
  };
  const std::string first = run();
  INFO(first);
  CHECK(first.find("pipeline cache: ") != std::string::npos);
  CHECK(first.find(" bytes saved to ") != std::string::npos);
  const std::filesystem::path file = entry();
  const std::string second = run();
  CHECK(second.find(" bytes loaded from " + file.string()) != std::string::npos);

  // Damaged: the blob cache's checksum refuses it; the next save puts an intact one back.
  std::ifstream in(file, std::ios::binary);
  const std::vector<unsigned char> good((std::istreambuf_iterator<char>(in)),
                                        std::istreambuf_iterator<char>());
  in.close();
  REQUIRE(good.size() > parenchyma::sdk::blob_cache::header_size + 16);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << "junk";
  const std::string damaged = run();
  CHECK(damaged.find(" bytes loaded from ") == std::string::npos);
  CHECK(run().find(" bytes loaded from ") != std::string::npos);

  // Intact entries whose data is not for this device or driver: refused by the header check.
  parenchyma::sdk::blob_cache::key_type key{};
  std::memcpy(key.data(), good.data() + 32, key.size());
  const std::vector<unsigned char> payload(
      good.begin() + static_cast<std::ptrdiff_t>(parenchyma::sdk::blob_cache::header_size),
      good.end());
  const std::vector<std::pair<std::string, std::function<void(std::vector<unsigned char>&)>>>
      foreign = {
          {"another pipelineCacheUUID", [](auto& d) { d[16] ^= 0xFF; }},
          {"made for vendor", [](auto& d) { d[8] ^= 0x01; }},
          {"header version", [](auto& d) { d[4] = 7; }},
          {"header size", [](auto& d) { d[0] = 0xFF; }},
          {"shorter than the 32-byte header", [](auto& d) { d.resize(12); }},
      };
  for (const auto& [why, change] : foreign) {
    INFO(why);
    std::vector<unsigned char> data = payload;
    change(data);
    const auto bytes = parenchyma::sdk::blob_cache::encode("vulkan-pipeline", key, data);
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    const std::string log = run();
    INFO(log);
    CHECK(log.find(" ignored (") != std::string::npos);
    CHECK(log.find(why) != std::string::npos);
    CHECK(log.find(" bytes loaded from ") == std::string::npos);
  }
  CHECK(run().find(" bytes loaded from ") != std::string::npos); // saved again, intact
  std::filesystem::remove_all(dir);
}

// Host memory imported without a copy (VK_EXT_external_memory_host) and memory exported as a
// host pointer, where the device shares memory with the host (lavapipe does): kernels write the
// host's bytes in place; a pointer below the import alignment, and handles of other kinds, are
// refused with PCY_ERR_UNSUPPORTED and the reason.
TEST_CASE("host memory imported in place, exported as a host pointer; what cannot be imported") {
  env e;
  host::framework& fw = e.fw;
  const pcy_property* props = nullptr;
  size_t count = 0;
  host::check(api().device_properties(fw.plugin(), 0, &props, &count));
  bool host_import = false;
  int64_t align = 0;
  for (size_t i = 0; i < count; ++i) {
    const std::string key = props[i].key;
    if (key == "host_import") host_import = props[i].i != 0;
    if (key == "host_import_alignment") align = props[i].i;
  }
  auto import = [&](void* p, uint64_t bytes, pcy_handle_kind kind = PCY_HANDLE_HOST_POINTER) {
    pcy_memory_handle h{};
    h.struct_size = sizeof h;
    h.kind = kind;
    h.host_pointer = p;
    h.bytes = bytes;
    pcy_memory_import_args ia{};
    ia.struct_size = sizeof ia;
    ia.context = e.ctx.get();
    ia.handle = &h;
    pcy_error* err = api().memory_import(&ia);
    return std::make_pair(err, host::memory(ia.memory, api().memory_free));
  };
  const uint32_t n = 1000; // 4000 bytes: not a whole unit of the alignment
  std::vector<unsigned char> block(n * sizeof(float) + 2 * 65536);
  unsigned char* aligned = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(block.data()) + 65535) & ~uintptr_t{65535});
  if (!host_import) {
    auto [err, m] = import(aligned, n * sizeof(float));
    const auto [code, message] = outcome(err);
    CHECK(code == PCY_ERR_UNSUPPORTED);
    WARN("the device does not import host memory: " << message);
    return;
  }
  REQUIRE(align > 0);
  REQUIRE(align <= 65536);
  host::program p = build(e, two_kernels);
  host::kernel iota = make_kernel(p.get(), "iota");
  {
    auto [err, m] = import(aligned, n * sizeof(float));
    REQUIRE(outcome(err).first == 0);
    const int64_t base = 5;
    REQUIRE(launch(e, iota.get(), {mem(m.get()), scalar(base), scalar(n)}, n) == nullptr);
    host::finish(fw, e.q.get());
    const auto* y = reinterpret_cast<const float*>(aligned);
    for (uint32_t i = 0; i < n; ++i)
      REQUIRE(y[i] == static_cast<float>(base + i)); // the host's bytes, written in place
    // Exported again: the same pointer.
    pcy_memory_handle h{};
    h.struct_size = sizeof h;
    pcy_memory_export_args x{};
    x.struct_size = sizeof x;
    x.memory = m.get();
    x.kind = PCY_HANDLE_HOST_POINTER;
    x.handle = &h;
    REQUIRE(api().memory_export(&x) == nullptr);
    CHECK(h.host_pointer == aligned);
    CHECK(h.bytes == n * sizeof(float));
    x.kind = PCY_HANDLE_CUDA_DEVICE_POINTER;
    CHECK(outcome(api().memory_export(&x)).first == PCY_ERR_UNSUPPORTED);
  }
  { // Device memory of a host-unified device is exported as a host pointer too.
    host::memory m = e.alloc(n * sizeof(float));
    const int64_t base = -40;
    REQUIRE(launch(e, iota.get(), {mem(m.get()), scalar(base), scalar(n)}, n) == nullptr);
    host::finish(fw, e.q.get());
    pcy_memory_handle h{};
    h.struct_size = sizeof h;
    pcy_memory_export_args x{};
    x.struct_size = sizeof x;
    x.memory = m.get();
    x.kind = PCY_HANDLE_HOST_POINTER;
    x.handle = &h;
    REQUIRE(api().memory_export(&x) == nullptr);
    REQUIRE(h.host_pointer != nullptr);
    const auto* y = static_cast<const float*>(h.host_pointer);
    for (uint32_t i = 0; i < n; ++i)
      REQUIRE(y[i] == static_cast<float>(base + i));
  }
  // Refused, by name: a pointer off the alignment, other kinds, no pointer.
  {
    auto [err, m] = import(aligned + 64, n * sizeof(float));
    const auto [code, message] = outcome(err);
    CHECK(code == PCY_ERR_UNSUPPORTED);
    CHECK(message.find("minImportedHostPointerAlignment") != std::string::npos);
  }
  for (pcy_handle_kind kind : {PCY_HANDLE_CUDA_DEVICE_POINTER, PCY_HANDLE_OPENCL_BUFFER}) {
    auto [err, m] = import(aligned, n * sizeof(float), kind);
    const auto [code, message] = outcome(err);
    CHECK(code == PCY_ERR_UNSUPPORTED);
    CHECK(message.find("only HOST_POINTER") != std::string::npos);
  }
  {
    auto [err, m] = import(nullptr, 64);
    CHECK(outcome(err).first == PCY_ERR_INVALID_ARGUMENT);
  }
}

TEST_CASE("a missing Vulkan loader: 0 devices and the reason") {
  test_host h;
  h.settings["PARENCHYMA_VULKAN_LIBRARY"] = "/nonexistent/libvulkan.so.1";
  host::framework fw(&api(), &h.services);
  const pcy_framework_probe p = fw.probe();
  CHECK(p.device_count == 0);
  REQUIRE(p.reason != nullptr);
  const std::string reason = p.reason;
  CHECK(reason.find("/nonexistent/libvulkan.so.1 not found") != std::string::npos);
  CHECK(reason.find("libvulkan1") != std::string::npos);
}

int main(int argc, char** argv) {
#ifndef PCY_VULKAN_GLSL_MODULE
  std::printf("SKIPPED: the Vulkan plugin's GLSL compiler module was not built (install "
              "libshaderc-dev, glslang-dev and spirv-tools, then configure again)\n");
  return 77;
#endif
  {
    test_host h;
    host::framework fw(&api(), &h.services);
    const pcy_framework_probe p = fw.probe();
    if (p.device_count == 0) {
      std::printf("SKIPPED: the Vulkan plugin found no device: %s\n",
                  p.reason ? p.reason : "(no reason given)");
      return 77;
    }
  }
  return parenchyma_test::run_catch(argc, argv);
}
