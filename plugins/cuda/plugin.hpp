// The CUDA framework plugin's classes: plugin (devices), context (primary contexts), queue
// (a stream), event, memory, program and kernel. Each .cpp of this folder implements one part;
// entry.cpp turns the classes into the C table.
#pragma once

#include "cuda_loader.hpp"
#include "nvrtc_loader.hpp"
#include "staging.hpp"

#include <parenchyma/sdk/blob_cache.hpp>
#include <parenchyma/sdk/framework.hpp>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::cuda {

class plugin;
class context;
class queue;
class event;
class memory;
class program;
class kernel;
class graph;

// The context current on this thread as far as we know: set through make_current only, so an
// op costs no driver call when it is already ours. Other code may change it behind our back;
// ops that fail with a context error forget the cache and retry once (see call()).
inline thread_local CUcontext tl_current = nullptr;

inline void make_current(const driver& d, CUcontext c) {
  if (tl_current != c) [[unlikely]] {
    check(d, d.api().cuCtxSetCurrent(c), "cuCtxSetCurrent");
    tl_current = c;
  }
}

// Runs a driver call with `c` current; if it failed because another context was made current
// by someone else, makes ours current for real and tries once more.
template <class F> CUresult call(const driver& d, CUcontext c, F&& f) {
  make_current(d, c);
  CUresult r = f();
  if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED ||
      r == CUDA_ERROR_INVALID_HANDLE) [[unlikely]] {
    tl_current = nullptr;
    make_current(d, c);
    r = f();
  }
  return r;
}

struct device_info {
  CUdevice device = 0;
  int ordinal = 0;
  std::string name;
  int cc = 0; // compute capability as 10 * major + minor, e.g. 90
  int multiprocessors = 0;
  uint64_t memory = 0;
  int max_threads_per_block = 0;
  int shared_per_block = 0;
};

class plugin : public sdk::framework_plugin<context, queue, event, memory, program, kernel, graph> {
public:
  static constexpr sdk::plugin_info info{
      "cuda", "0.1.0",
      "NVIDIA GPUs through the CUDA driver API (libcuda.so.1 at run time), kernels by NVRTC"};

  explicit plugin(const pcy_host_services& host);

  const driver& drv() const noexcept { return driver_; }
  const device_info& device(uint32_t i) const { return devices_[i]; }
  const staging_config& staging() const noexcept { return staging_; }
  // Whether kernels created with PCY_KERNEL_WAITS_FOR_PRIOR may launch early (programmatic
  // dependent launch): the driver has cuLaunchKernelEx and PARENCHYMA_CUDA_EARLY_LAUNCH is not 0.
  bool early_launch() const noexcept { return early_launch_; }
  cuda::nvrtc& nvrtc() noexcept { return nvrtc_; }
  sdk::blob_cache& cache() noexcept { return cache_; }

private:
  void add_gpu(int ordinal); // its device_info and its properties
  driver driver_;
  staging_config staging_;
  bool early_launch_ = false;
  cuda::nvrtc nvrtc_;
  sdk::blob_cache cache_;            // its destructor, at shutdown, completes the pending writes
  std::vector<device_info> devices_; // in step with the base's device properties
};

// One device of a context: its primary context and staging pool.
struct device_slot {
  uint32_t index = 0; // the plugin's device index
  const device_info* info = nullptr;
  CUcontext ctx = nullptr;
  std::unique_ptr<staging_pool> staging;
};

class context {
public:
  PCY_SDK_CONTEXT_MEMBERS(context, plugin, queue, memory);
  memory* import(uint32_t device, const pcy_memory_handle& handle);
  program* build(std::string_view source, const char* options, bool& cache_hit);
  void* native_context() const noexcept { return slots_[0].ctx; }
  void* native_device(uint32_t device) const;

  plugin& owner() const noexcept { return p_; }
  const driver& drv() const noexcept { return p_.drv(); }
  device_slot& slot(uint32_t device);
  size_t slot_count() const noexcept { return slots_.size(); }

private:
  plugin& p_;
  std::vector<device_slot> slots_;
};

class event {
public:
  event(const driver& d, CUcontext ctx, CUevent e) : d_(d), ctx_(ctx), e_(e) {}
  ~event();
  void wait();
  CUevent native() const noexcept { return e_; }

private:
  const driver& d_;
  CUcontext ctx_;
  CUevent e_;
};

class memory {
public:
  enum class kind { device, pinned, device_alias, host_alias };
  memory(context& c, uint32_t slot, kind k, CUdeviceptr ptr, void* host, uint64_t bytes)
      : ctx_(c), slot_(slot), kind_(k), ptr_(ptr), host_(host), bytes_(bytes),
        cu_ctx_(c.slot(slot).ctx), device_(c.slot(slot).info->device) {}
  ~memory();
  memory(const memory&) = delete;
  memory& operator=(const memory&) = delete;

  bool export_to(pcy_handle_kind kind, pcy_memory_handle& handle);
  void* native() const noexcept { return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_)); }

  CUdeviceptr ptr() const noexcept { return ptr_; }
  uint64_t bytes() const noexcept { return bytes_; }
  CUcontext cu_context() const noexcept { return cu_ctx_; }
  CUdevice cu_device() const noexcept { return device_; }
  // Page-locked host memory mapped for every device (usable by kernels anywhere).
  bool host_backed() const noexcept { return kind_ == kind::pinned || kind_ == kind::host_alias; }
  void check_range(uint64_t offset, uint64_t bytes, const char* what) const;

private:
  context& ctx_;
  uint32_t slot_;
  kind kind_;
  CUdeviceptr ptr_;
  void* host_;
  uint64_t bytes_;
  CUcontext cu_ctx_;
  CUdevice device_;
};

class queue {
public:
  queue(context& c, uint32_t slot);
  ~queue();
  queue(const queue&) = delete;
  queue& operator=(const queue&) = delete;

  PCY_SDK_QUEUE_MEMBERS(memory, event);
  void launch(kernel& k, const pcy_kernel_launch_args& args);
  void* native() const noexcept { return stream_; }
  // Graphs (graph.cpp): each capture appends one segment to the graph, after the last one.
  graph* create_graph();
  void capture_begin(graph& g);
  void capture_end(graph& g);
  void launch_graph(graph& g);

private:
  bool host_pinned(const void* p, uint64_t bytes) const;
  void fill_by_doubling(CUdeviceptr dst, uint64_t bytes, const unsigned char* pattern,
                        uint32_t size);
  const driver& d_;
  context& ctx_;
  uint32_t slot_;
  CUcontext cu_ctx_;
  CUdevice device_;
  CUstream stream_ = nullptr;
  staging_pool* staging_;
  uint64_t read_threshold_;
  uint64_t write_threshold_;
};

class program {
public:
  program(context& c, std::vector<CUmodule> modules) : ctx_(c), modules_(std::move(modules)) {}
  ~program();
  program(const program&) = delete;
  program& operator=(const program&) = delete;
  kernel* create_kernel(const char* name, uint32_t flags);

private:
  friend class kernel;
  context& ctx_;
  std::vector<CUmodule> modules_; // one per context device
};

class kernel {
public:
  static constexpr uint32_t max_args = 32;
  struct per_device {
    CUfunction fn = nullptr;
    int max_threads = 0;
    int suggested_block = 256;
    // Launched with programmatic stream serialisation: the kernel was created with
    // PCY_KERNEL_WAITS_FOR_PRIOR, the device is sm_90 or newer and early launch is on.
    bool early = false;
  };
  kernel(std::string name, std::vector<per_device> fns, std::vector<size_t> param_sizes,
         bool params_known)
      : name_(std::move(name)), fns_(std::move(fns)), param_sizes_(std::move(param_sizes)),
        params_known_(params_known) {}

  const std::string& name() const noexcept { return name_; }
  const per_device& on(uint32_t slot) const noexcept { return fns_[slot]; }
  const std::vector<size_t>& param_sizes() const noexcept { return param_sizes_; }
  bool params_known() const noexcept { return params_known_; }

private:
  std::string name_;
  std::vector<per_device> fns_;
  std::vector<size_t> param_sizes_;
  bool params_known_;
};

// A CUDA graph built from captured segments, each a child graph node after the one before.
class graph {
public:
  graph(const driver& d, CUcontext ctx, CUstream stream, CUgraph g)
      : d_(d), ctx_(ctx), stream_(stream), g_(g) {}
  ~graph();
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;
  void instantiate();

private:
  friend class queue;
  const driver& d_;
  CUcontext ctx_;
  CUstream stream_; // the queue it was built on, and the only one it launches on
  CUgraph g_;
  // The nodes the next captured segment depends on: the leaves so far (flat capture), or the
  // one child-graph node of the last segment.
  std::vector<CUgraphNode> last_;
  CUgraphExec exec_ = nullptr;
  bool capturing_ = false;
  bool broken_ = false; // a capture failed: the graph is incomplete
};

} // namespace parenchyma::cuda
