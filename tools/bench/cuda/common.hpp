// Shared by the CUDA benchmarks: the plugin loaded like a host loads it (dlopen + entry), and
// the raw driver loaded the same way the plugin loads it (libcuda.so.1 + cuGetProcAddress), so
// "ours" and "peer" run in one process on the same device, context and stream.
#pragma once

#include "cuda_loader.hpp"
#include "nvrtc_loader.hpp"

#include <parenchyma/abi/pcy_framework.h>
#include <parenchyma/sdk/host.hpp>

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace cuda_bench {

namespace host = parenchyma::sdk::host;
namespace pc = parenchyma::cuda;

inline double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline const pcy_framework_api* load_plugin(const char* path = PCY_CUDA_PLUGIN) {
  void* lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
  auto entry = reinterpret_cast<pcy_framework_entry_fn>(::dlsym(lib, PCY_FRAMEWORK_ENTRY_SYMBOL));
  if (entry == nullptr) throw std::runtime_error("no entry symbol");
  return entry();
}

inline pcy_host_services services(const char* cache_dir) {
  pcy_host_services s{};
  s.struct_size = sizeof s;
  s.host_abi_major = PCY_ABI_VERSION_MAJOR;
  s.host_abi_minor = PCY_ABI_VERSION_MINOR;
  s.log = [](void*, pcy_log_level level, const char* origin, const char* message) {
    if (level >= PCY_LOG_WARN) std::fprintf(stderr, "[%s] %s\n", origin, message);
  };
  s.log_level = PCY_LOG_WARN;
  s.cache_dir = cache_dir;
  return s;
}

inline void cu(const pc::driver& d, CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw std::runtime_error(std::string(what) + ": " + d.describe(r));
}

// The plugin with one context and queue on device 0, and the raw driver sharing its objects.
struct rig {
  explicit rig(const char* cache_dir)
      : svc(services(cache_dir)), api(load_plugin()), fw(api, &svc) {
    if (fw.probe().device_count == 0) {
      const char* why = fw.probe().reason;
      throw std::runtime_error(std::string("no CUDA device: ") + (why ? why : "?"));
    }
    const uint32_t dev = 0;
    ctx = host::make_context(fw, std::span<const uint32_t>(&dev, 1));
    q = host::make_queue(fw, ctx.get(), 0);
    if (!drv.ok()) throw std::runtime_error("raw driver: " + drv.reason());
    stream = static_cast<CUstream>(native(PCY_NATIVE_QUEUE));
    cuctx = static_cast<CUcontext>(native(PCY_NATIVE_CONTEXT));
    cu(drv, drv.api().cuCtxSetCurrent(cuctx), "cuCtxSetCurrent");
    for (const auto& p : fw.properties(0)) {
      if (std::string(p.key) == "name") device_name = p.s;
      if (std::string(p.key) == "driver_version") driver_version = p.s;
      if (std::string(p.key) == "architecture") arch = p.s;
      if (std::string(p.key) == "compute_capability") cc = int(std::atof(p.s) * 10 + 0.5);
    }
  }
  void* native(pcy_native_object o) {
    pcy_native_handle_args a{};
    a.struct_size = sizeof a;
    a.object = o;
    a.context = ctx.get();
    a.queue = q.get();
    host::check(fw.api().native_handle(&a));
    return a.handle;
  }
  host::program build(const char* source) {
    pcy_program_build_args b{};
    b.struct_size = sizeof b;
    b.context = ctx.get();
    b.source = source;
    host::check(api->program_build(&b));
    return host::program(b.program, api->program_destroy);
  }
  host::kernel kernel(pcy_program p, const char* name) {
    pcy_kernel_create_args k{};
    k.struct_size = sizeof k;
    k.program = p;
    k.name = name;
    host::check(api->kernel_create(&k));
    return host::kernel(k.kernel, api->kernel_destroy);
  }
  // The peer's copy of the same function: the same source compiled the same way, loaded into
  // the same (primary) context.
  CUfunction raw_function(const char* source, const char* name) {
    auto out = rtc.compile(source, {}, cc);
    CUmodule m = nullptr;
    cu(drv, drv.api().cuModuleLoadData(&m, out.image.data()), "cuModuleLoadData");
    CUfunction f = nullptr;
    cu(drv, drv.api().cuModuleGetFunction(&f, m, name), "cuModuleGetFunction");
    return f;
  }
  pcy_host_services svc;
  const pcy_framework_api* api;
  host::framework fw;
  host::context ctx;
  host::queue q;
  pc::driver drv;
  pc::nvrtc rtc;
  CUstream stream = nullptr;
  CUcontext cuctx = nullptr;
  std::string device_name, driver_version, arch;
  int cc = 0;
};

inline std::vector<unsigned char> random_bytes(size_t n) {
  std::vector<unsigned char> v(n);
  std::mt19937_64 g{std::random_device{}()};
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t x = g();
    std::memcpy(v.data() + i, &x, 8);
  }
  return v;
}

} // namespace cuda_bench
