// Shared setup for the OpenCL benchmarks: the opencl plugin through the core's Registry (its C
// table, as the core calls it), a context and queue made through that table, the same objects'
// native handles for the raw-OpenCL peer, and the versions that go into the JSON meta.
#pragma once

#include "cl_loader.hpp"
#include "harness.hpp"

#include <parenchyma/parenchyma.hpp>
#include <parenchyma/sdk/host.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace opencl_bench {

namespace host = parenchyma::sdk::host;

inline const parenchyma::opencl::cl_api& raw() {
  static parenchyma::opencl::cl_api api = [] {
    parenchyma::opencl::cl_api a;
    std::string why;
    if (!a.load("libOpenCL.so.1", why)) {
      std::printf("SKIPPED: %s\n", why.c_str());
      std::exit(77);
    }
    return a;
  }();
  return api;
}

inline void cl_ok(cl_int err, const char* what) {
  if (err != CL_SUCCESS) {
    std::fprintf(stderr, "%s failed: %s\n", what, parenchyma::opencl::cl_error_name(err));
    std::exit(1);
  }
}

// The opencl framework as loaded by a Registry; exits 77 when it has no device.
struct plugin {
  explicit plugin(std::map<std::string, std::string> env = {}) {
    parenchyma::RegistryOptions o;
    o.environment = std::move(env);
    registry = std::make_unique<parenchyma::Registry>(std::move(o));
    fw = registry->find_framework("opencl");
    if (fw == nullptr || fw->devices().empty()) {
      std::printf("SKIPPED: no OpenCL device (%s)\n", fw ? fw->reason().c_str() : "plugin missing");
      std::exit(77);
    }
    api = &fw->api();
    const uint32_t dev = 0;
    pcy_context c = nullptr;
    host::check(api->context_create(fw->plugin(), &dev, 1, &c));
    ctx = host::context(c, api->context_destroy);
    pcy_queue q = nullptr;
    host::check(api->queue_create(ctx.get(), 0, &q));
    queue = host::queue(q, api->queue_destroy);
    cl_ctx = static_cast<cl_context>(native(PCY_NATIVE_CONTEXT));
    cl_queue = static_cast<cl_command_queue>(native(PCY_NATIVE_QUEUE));
    cl_dev = static_cast<cl_device_id>(native(PCY_NATIVE_DEVICE));
  }
  void* native(pcy_native_object what, pcy_memory m = nullptr) const {
    pcy_native_handle_args a{};
    a.struct_size = sizeof a;
    a.object = what;
    a.context = ctx.get();
    a.queue = queue.get();
    a.memory = m;
    host::check(api->native_handle(&a));
    return a.handle;
  }
  std::string property(const std::string& key) const {
    for (const auto& [k, v] : fw->devices().front().properties)
      if (k == key) {
        if (auto s = std::get_if<std::string>(&v)) return *s;
        if (auto i = std::get_if<int64_t>(&v)) return std::to_string(*i);
        if (auto b = std::get_if<bool>(&v)) return *b ? "true" : "false";
      }
    return {};
  }
  void describe(bench::suite& s) const {
    s.meta("device", property("name"));
    s.meta("platform_version", property("platform_version"));
    s.meta("driver_version", property("driver_version"));
    const char* t = std::getenv("POCL_MAX_PTHREAD_COUNT");
    s.meta("pocl_threads", t ? t : "default (one per core)");
    s.meta("hardware_threads", std::to_string(std::thread::hardware_concurrency()));
  }

  std::unique_ptr<parenchyma::Registry> registry;
  const parenchyma::Framework* fw = nullptr;
  const pcy_framework_api* api = nullptr;
  host::context ctx;
  host::queue queue;
  cl_context cl_ctx = nullptr;
  cl_command_queue cl_queue = nullptr;
  cl_device_id cl_dev = nullptr;
};

} // namespace opencl_bench
