// CUDA plugin test support: loads the built parenchyma-cuda.so with dlopen (no core involved),
// drives it through the SDK's host wrappers, captures its log, makes random data.
#pragma once

#include "support/catch.hpp"

#include <parenchyma/abi/pcy_framework.h>
#include <parenchyma/sdk/host.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cuda_test {

namespace host = parenchyma::sdk::host;

#ifdef PCY_CUDA_PLUGIN
inline const pcy_framework_api& plugin_api() {
  static const pcy_framework_api* api = [] {
    void* lib = ::dlopen(PCY_CUDA_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
    auto entry = reinterpret_cast<pcy_framework_entry_fn>(::dlsym(lib, PCY_FRAMEWORK_ENTRY_SYMBOL));
    if (entry == nullptr) throw std::runtime_error("no pcy_framework_entry in " PCY_CUDA_PLUGIN);
    return entry();
  }();
  return *api;
}
#endif

// Every message the plugin logged.
struct captured_log {
  std::mutex mu;
  std::vector<std::pair<pcy_log_level, std::string>> lines;
  size_t count(std::string_view needle) {
    std::lock_guard lock(mu);
    size_t n = 0;
    for (auto& l : lines)
      n += l.second.find(needle) != std::string::npos;
    return n;
  }
  void clear() {
    std::lock_guard lock(mu);
    lines.clear();
  }
};

// Host services whose log captures everything (TRACE and up) and a cache directory.
struct test_host {
  explicit test_host(std::string cache = default_cache_dir()) : cache_dir(std::move(cache)) {
    services.struct_size = sizeof services;
    services.host_abi_major = PCY_ABI_VERSION_MAJOR;
    services.host_abi_minor = PCY_ABI_VERSION_MINOR;
    services.log_user = &log;
    services.log = [](void* user, pcy_log_level level, const char*, const char* message) {
      auto* l = static_cast<captured_log*>(user);
      std::lock_guard lock(l->mu);
      l->lines.emplace_back(level, message);
    };
    services.log_level = PCY_LOG_TRACE;
    services.cache_dir = cache_dir.empty() ? nullptr : cache_dir.c_str();
    // Settings from the environment, as the core answers them without a config.
    services.setting = [](void*, const char* name) -> const char* { return std::getenv(name); };
  }
  static std::string default_cache_dir() {
    const char* d = std::getenv("PARENCHYMA_CACHE_DIR");
    return d && *d ? d : "/tmp/parenchyma-cuda-test-cache";
  }
  captured_log log;
  std::string cache_dir;
  pcy_host_services services{};
};

inline std::mt19937_64& rng() {
  static std::mt19937_64 g{std::random_device{}()};
  return g;
}
inline std::vector<unsigned char> random_bytes(size_t n) {
  std::vector<unsigned char> v(n);
  auto& g = rng();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t x = g();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i)
    v[i] = static_cast<unsigned char>(g());
  return v;
}
template <class T> std::vector<T> random_reals(size_t n) {
  std::uniform_real_distribution<T> d(-1, 1);
  std::vector<T> v(n);
  for (auto& x : v)
    x = d(rng());
  return v;
}

// The status of a call that is expected to fail; the message lands in `message`.
inline pcy_status status_of(pcy_error* e, std::string* message = nullptr) {
  if (e == nullptr) return PCY_OK;
  const pcy_status s = e->code;
  if (message) *message = std::string(e->origin) + ": " + e->message;
  e->destroy(e);
  return s;
}

// Scoped environment variable (tests that need it run before any other plugin instance).
struct scoped_env {
  scoped_env(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~scoped_env() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }
  const char* name_;
  std::string old_;
  bool had_ = false;
};

inline const pcy_property* find_property(std::span<const pcy_property> props,
                                         std::string_view key) {
  for (const auto& p : props)
    if (key == p.key) return &p;
  return nullptr;
}

} // namespace cuda_test

#ifdef PCY_CUDA_PLUGIN
namespace cuda_test {

// One plugin instance with a context and a queue on device 0.
struct gpu {
  explicit gpu(std::string cache = test_host::default_cache_dir())
      : h(std::move(cache)), fw(&plugin_api(), &h.services) {
    const uint32_t dev = 0;
    ctx = host::make_context(fw, std::span<const uint32_t>(&dev, 1));
    q = host::make_queue(fw, ctx.get(), 0);
  }
  const pcy_framework_api& api() const { return fw.api(); }
  int64_t int_property(const char* key) const {
    auto* p = find_property(fw.properties(0), key);
    if (p == nullptr) throw std::runtime_error(std::string("no property ") + key);
    return p->i;
  }
  host::memory alloc(uint64_t bytes, uint32_t flags = PCY_MEMORY_DEFAULT) {
    return host::alloc(fw, ctx.get(), 0, bytes, flags);
  }
  test_host h;
  host::framework fw;
  host::context ctx;
  host::queue q;
};

// The shared instance most tests use.
inline gpu& shared_gpu() {
  static gpu g;
  return g;
}

struct built {
  host::program program;
  bool cache_hit = false;
};
inline pcy_error* try_build(gpu& g, std::string_view source, const char* options, built& out) {
  pcy_program_build_args a{};
  a.struct_size = sizeof a;
  a.context = g.ctx.get();
  a.source = source.data();
  a.source_size = source.size();
  a.options = options;
  pcy_error* e = g.api().program_build(&a);
  if (e == nullptr) {
    out.program = host::program(a.program, g.api().program_destroy);
    out.cache_hit = a.cache_hit;
  }
  return e;
}
inline built build(gpu& g, std::string_view source, const char* options = nullptr) {
  built b;
  host::check(try_build(g, source, options, b));
  return b;
}
inline pcy_error* try_kernel(gpu& g, pcy_program p, const char* name, host::kernel& out) {
  pcy_kernel_create_args a{};
  a.struct_size = sizeof a;
  a.program = p;
  a.name = name;
  pcy_error* e = g.api().kernel_create(&a);
  if (e == nullptr) out = host::kernel(a.kernel, g.api().kernel_destroy);
  return e;
}
inline host::kernel kernel(gpu& g, pcy_program p, const char* name) {
  host::kernel k;
  host::check(try_kernel(g, p, name, k));
  return k;
}
inline pcy_kernel_arg mem_arg(pcy_memory m) {
  pcy_kernel_arg a{};
  a.kind = PCY_ARG_MEMORY;
  a.memory = m;
  return a;
}
template <class T> pcy_kernel_arg scalar_arg(const T& v) {
  pcy_kernel_arg a{};
  a.kind = PCY_ARG_SCALAR;
  a.value = &v;
  a.size = sizeof(T);
  return a;
}
inline pcy_kernel_arg local_arg(size_t bytes) {
  pcy_kernel_arg a{};
  a.kind = PCY_ARG_LOCAL;
  a.size = bytes;
  return a;
}
inline pcy_error* try_launch(gpu& g, pcy_kernel k, std::vector<pcy_kernel_arg> args,
                             std::vector<uint64_t> global, std::vector<uint32_t> local = {}) {
  pcy_kernel_launch_args a{};
  a.struct_size = sizeof a;
  a.queue = g.q.get();
  a.kernel = k;
  a.dims = static_cast<uint32_t>(global.size());
  for (size_t i = 0; i < global.size(); ++i)
    a.global[i] = global[i];
  for (size_t i = 0; i < local.size(); ++i)
    a.local[i] = local[i];
  a.args = args.data();
  a.arg_count = static_cast<uint32_t>(args.size());
  return g.api().kernel_launch(&a);
}

} // namespace cuda_test
#endif
