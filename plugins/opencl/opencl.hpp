// The OpenCL framework plugin's private types: the plugin, its contexts, queues, events,
// memory, programs and kernels, as the SDK's framework adapter expects them
// (sdk/include/parenchyma/sdk/framework.hpp lists which member fills which ABI slot).
//
// Lifetime rule: an object refers only to plugin-owned data (the cl_api table, device_info) and
// to OpenCL handles it retained itself, never to another ABI object, so the host may destroy
// contexts, queues and memory in any order before shutdown.
#pragma once

#include "cl_loader.hpp"

#include <parenchyma/sdk/blob_cache.hpp>
#include <parenchyma/sdk/framework.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::opencl {

inline constexpr const char* plugin_name = "opencl";

// Throws sdk::error "<call>: <CL_NAME> (<code>)[: <advice>]".
[[noreturn]] void cl_fail(pcy_status status, std::string_view call, cl_int err,
                          std::string_view advice = {});
inline void cl_check(cl_int err, const char* call, pcy_status status = PCY_ERR_DEVICE,
                     std::string_view advice = {}) {
  if (err != CL_SUCCESS) [[unlikely]]
    cl_fail(status, call, err, advice);
}
// Allocation failures (also reported lazily by enqueues) become OUT_OF_MEMORY.
pcy_status status_for(cl_int err, pcy_status otherwise) noexcept;

// One OpenCL device as discovered at initialisation; lives until shutdown.
struct device_info {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  std::string name, vendor, platform_name, platform_version, version, c_version, driver_version,
      extensions, uuid;
  pcy_device_kind kind = PCY_DEVICE_OTHER;
  bool host_unified = false;
  bool fp64 = false;
  uint32_t compute_units = 0;
  uint64_t global_memory = 0, local_memory = 0, max_alloc = 0;
  uint64_t max_work_group = 0;
  uint64_t max_work_item[3] = {0, 0, 0};
  uint32_t base_align = 128; // bytes: CL_DEVICE_MEM_BASE_ADDR_ALIGN / 8
  // Every context on this device shares one cl_context per device set and one in-order
  // cl_command_queue, process-wide (see shared_queues below); decided at discovery.
  bool shared_queue = false;
};

// PoCL before 7.0 aborts ("pocl_release_dlhandle_cache: Assertion `found->ref_count > 0'") when
// one kernel runs from several command queues at once with different launch sizes: its CPU
// drivers look the loaded work-group function up again by properties at release and can pick
// another cache item (fixed by PoCL commit c9ac4c0, June 2024, first in 7.0). On such a device
// no two kernels may be in flight from different queues, in any context of the process, so the
// plugin gives all contexts with the same devices one cl_context and all queues of a device one
// in-order cl_command_queue. Work of separate backends is then ordered, never wrong; PoCL
// already spreads each kernel over every core. Reference counted; thread-safe.
namespace shared_queues {
// Whether a platform needs it: PoCL whose CL_PLATFORM_VERSION names a version below 7.
bool needed(std::string_view platform_name, std::string_view platform_version);
cl_context acquire_context(const cl_api& cl, const cl_context_properties* props,
                           const std::vector<cl_device_id>& devices, cl_int& err);
void release_context(const cl_api& cl, cl_context ctx);
cl_command_queue acquire_queue(const cl_api& cl, cl_context ctx, cl_device_id device, cl_int& err);
void release_queue(const cl_api& cl, cl_command_queue q);
} // namespace shared_queues

class context;
class queue;
class event;
class memory;
class program;
class kernel;

class plugin : public sdk::framework_plugin<context, queue, event, memory, program, kernel> {
public:
  static constexpr sdk::plugin_info info{
      plugin_name, "0.1.0",
      "OpenCL: every device of every platform through the ICD loader (libOpenCL.so.1)"};

  explicit plugin(const pcy_host_services& host);
  ~plugin();

  const cl_api& cl() const noexcept { return cl_; }
  const device_info& device(uint32_t index) const { return *devices_.at(index); }
  sdk::blob_cache& cache() noexcept { return cache_; }

private:
  void discover(); // device.cpp
  cl_api cl_;
  sdk::settings settings_;                            // the host's setting service
  std::vector<std::unique_ptr<device_info>> devices_; // in step with the base's properties
  // Last: destroyed first, it finishes the pending writes, whose closures still use cl_.
  sdk::blob_cache cache_;
};

class context {
public:
  PCY_SDK_CONTEXT_MEMBERS(context, plugin, queue, memory);
  memory* import(uint32_t device, const pcy_memory_handle& handle);
  program* build(std::string_view source, const char* options, bool& cache_hit); // program.cpp
  void* native_context() noexcept { return ctx_; }
  void* native_device(uint32_t device) const { return dev(device).id; }
  void* native_platform(uint32_t device) const { return dev(device).platform; }

  // The device at an index into this context's devices; NOT_FOUND when out of range.
  const device_info& dev(uint32_t device) const;
  const cl_api& cl() const noexcept { return cl_; }
  cl_context handle() const noexcept { return ctx_; }

private:
  cl_program build_from_source(std::string_view source, const std::string& options);
  cl_program build_from_binaries(const std::vector<std::vector<unsigned char>>& binaries,
                                 const std::string& options, std::string& why);
  // A queue of this plugin's own for mapping pinned buffers; retained by each user.
  cl_command_queue map_queue(uint32_t device);
  // Whether the driver uses host memory that is not aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN in
  // place (CL_MEM_USE_HOST_PTR without a copy of its own): asked of the device once.

  plugin& owner_;
  const cl_api& cl_;
  cl_context ctx_ = nullptr;
  bool shared_ = false; // ctx_ is shared_queues' (every device has shared_queue)
  std::vector<const device_info*> devices_;
  std::vector<cl_device_id> ids_;
  std::mutex map_mutex_;
  std::vector<cl_command_queue> map_queues_;
};

class event {
public:
  event(const cl_api& cl, cl_event ev, cl_context ctx) noexcept : cl_(cl), ev_(ev), ctx_(ctx) {}
  ~event();
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  void wait();
  cl_event handle() const noexcept { return ev_; }
  cl_context context_handle() const noexcept { return ctx_; }

private:
  const cl_api& cl_;
  cl_event ev_;
  cl_context ctx_;
};

class memory {
public:
  // host_pointer: where the bytes live in host memory (NULL: unknown / device memory).
  // unmap_queue: set for a pinned buffer mapped once at allocation (unmapped at free).
  memory(const cl_api& cl, cl_mem mem, cl_context ctx, uint64_t bytes, void* host_pointer,
         cl_command_queue unmap_queue) noexcept;
  ~memory();
  memory(const memory&) = delete;
  memory& operator=(const memory&) = delete;

  bool export_to(pcy_handle_kind kind, pcy_memory_handle& handle) const noexcept;
  void* native() const noexcept { return mem_; }

  cl_mem handle() const noexcept { return mem_; }
  cl_context context_handle() const noexcept { return ctx_; }
  uint64_t bytes() const noexcept { return bytes_; }
  void* host_pointer() const noexcept { return host_; }
  // A process-unique number: kernels cache arguments by it, since a freed cl_mem's address
  // may be reused by the next buffer.
  uint64_t serial() const noexcept { return serial_; }
  void check_range(uint64_t offset, uint64_t bytes, const char* what) const;

private:
  const cl_api& cl_;
  cl_mem mem_;
  cl_context ctx_;
  uint64_t bytes_;
  void* host_;
  cl_command_queue unmap_queue_;
  uint64_t serial_;
};

class queue {
public:
  queue(const context& ctx, uint32_t device);
  ~queue();
  queue(const queue&) = delete;
  queue& operator=(const queue&) = delete;

  PCY_SDK_QUEUE_MEMBERS(memory, event);
  void launch(kernel& k, const pcy_kernel_launch_args& args); // program.cpp
  void* native() const noexcept { return q_; }

private:
  void same_context(const memory& m, const char* what) const;
  [[noreturn]] void launch_failed(const kernel& k, const pcy_kernel_launch_args& a, cl_int err,
                                  const size_t* global, const size_t* local) const;

  // Host bytes that a non-blocking read still may write (until the next finish). A write from
  // host memory that overlaps them waits for the queue first: NVIDIA's OpenCL (driver 580) takes
  // the source of a write from pageable memory when the write is enqueued, not when the in-order
  // queue reaches it, so a write of bytes that an earlier read had yet to fill sent stale data
  // (an imported host array written back by one op and read again by the next, 2026-12-03).
  struct host_range {
    uintptr_t begin, end;
  };
  std::vector<host_range> pending_reads_;
  void wait_for_reads_into(const void* host, uint64_t bytes);

  const cl_api& cl_;
  const device_info& dev_;
  cl_context ctx_;
  cl_command_queue q_ = nullptr;
};

class program {
public:
  program(const cl_api& cl, cl_program prog, cl_context ctx) noexcept
      : cl_(cl), prog_(prog), ctx_(ctx) {}
  ~program();
  program(const program&) = delete;
  program& operator=(const program&) = delete;
  kernel* create_kernel(const char* name);

private:
  const cl_api& cl_;
  cl_program prog_;
  cl_context ctx_;
};

class kernel {
public:
  // What an argument slot expects, from clGetKernelArgInfo when the driver offers it.
  enum class expects : uint8_t { unknown, memory, scalar, local };
  struct arg_state {  // the value last given to clSetKernelArg, to skip repeating it
    uint8_t kind = 0; // 0: not set (or unknown) / pcy_kernel_arg_kind
    uint32_t size = 0;
    uint64_t serial = 0;
    unsigned char bytes[16] = {};
  };

  kernel(const cl_api& cl, cl_kernel k, cl_context ctx, std::string name);
  ~kernel();
  kernel(const kernel&) = delete;
  kernel& operator=(const kernel&) = delete;

  // Sets argument i unless it already holds this value; throws INVALID_ARGUMENT on a mismatch.
  void set(uint32_t i, const pcy_kernel_arg& a);
  uint32_t arg_count() const noexcept { return static_cast<uint32_t>(args_.size()); }
  const std::string& name() const noexcept { return name_; }
  cl_kernel handle() const noexcept { return k_; }

private:
  [[noreturn]] void bad_arg(uint32_t i, const pcy_kernel_arg& a, cl_int err);
  std::string describe(uint32_t i) const;

  const cl_api& cl_;
  cl_kernel k_;
  cl_context ctx_;
  std::string name_;
  std::vector<arg_state> args_;
  std::vector<expects> expect_;
  std::vector<std::string> type_names_; // "float*", "int"; empty when unknown
};

} // namespace parenchyma::opencl
