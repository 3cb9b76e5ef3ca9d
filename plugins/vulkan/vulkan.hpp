// The Vulkan framework plugin's private types: the plugin, its contexts, queues, events, memory,
// programs and kernels, as the SDK's framework adapter expects them
// (sdk/include/parenchyma/sdk/framework.hpp lists which member fills which ABI slot).
//
// Lifetime rule: the host may destroy contexts, queues, memory and programs in any order before
// shutdown, but Vulkan wants every buffer, pipeline and semaphore gone before its VkDevice. So
// each object holds the VkDevice it was made on through a shared_ptr<device_state>: the last
// object to go destroys the device. Buffers freed while a queue may still use them wait in the
// device's graveyard until every queue's timeline has passed the work recorded before the free.
#pragma once

#include "vk_loader.hpp"

#include <parenchyma/sdk/blob_cache.hpp>
#include <parenchyma/sdk/framework.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::vulkan {

inline constexpr const char* plugin_name = "vulkan";

// Throws sdk::error "<call>: <VK_NAME> (<code>)[: <advice>]".
[[noreturn]] void vk_fail(pcy_status status, std::string_view call, VkResult r,
                          std::string_view advice = {});
// Out-of-memory results become OUT_OF_MEMORY, everything else `otherwise`.
pcy_status status_for(VkResult r, pcy_status otherwise) noexcept;
inline void vk_check(VkResult r, const char* call, pcy_status status = PCY_ERR_DEVICE,
                     std::string_view advice = {}) {
  if (r != VK_SUCCESS) [[unlikely]]
    vk_fail(status_for(r, status), call, r, advice);
}

// One physical device as discovered at initialisation; lives until shutdown.
struct device_info {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  std::string name, vendor, driver_name, driver_info, driver_version, api_version, uuid;
  pcy_device_kind kind = PCY_DEVICE_OTHER;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t queue_family = 0;
  uint32_t subgroup_size = 0;
  bool subgroup_shuffle = false; // compute shaders have subgroup basic and shuffle operations
  bool host_unified = false, fp16 = false, fp64 = false, int64 = false;
  bool int8 = false, int16 = false; // shaderInt8/16 with 8/16-bit storage-buffer access
  // shaderDenormPreserveFloat16/32/64: the device keeps subnormal results when a module asks
  // (DenormPreserve); without the request a driver may flush them (NVIDIA's does for f32).
  bool denorm_preserve16 = false, denorm_preserve32 = false, denorm_preserve64 = false;
  // bufferDeviceAddress (Vulkan 1.2): every buffer gets a 64-bit address, which a kernel takes
  // as a buffer_reference member of its push constants (no maxStorageBufferRange limit there).
  bool device_address = false;
  uint64_t global_memory = 0, local_memory = 0, max_alloc = 0, max_storage_range = 0;
  uint32_t max_work_group = 0, max_push_constants = 0;
  uint32_t max_group_count[3] = {0, 0, 0};
  uint32_t max_group_size[3] = {0, 0, 0};
  uint64_t min_storage_align = 0;
  VkPhysicalDeviceMemoryProperties memory{};
  // VK_EXT_external_memory_host on a host-unified device (CPU or integrated GPU): host pointers
  // aligned to minImportedHostPointerAlignment are imported without a copy.
  bool host_import = false;
  uint64_t host_import_align = 0;
  // What a pipeline cache's data is valid for (VkPipelineCacheHeaderVersionOne), and its key.
  uint32_t vendor_id = 0, device_id = 0, driver_version_raw = 0;
  uint8_t pipeline_cache_uuid[VK_UUID_SIZE] = {};
};

// A queue's timeline semaphore: value v is signalled when the v-th batch submitted on the queue
// has completed. Shared by the queue, its events and graveyard entries.
struct timeline {
  timeline(VkDevice device, PFN_vkDestroySemaphore destroy, VkSemaphore s) noexcept
      : semaphore(s), device_(device), destroy_(destroy) {}
  ~timeline() { destroy_(device_, semaphore, nullptr); }
  timeline(const timeline&) = delete;
  timeline& operator=(const timeline&) = delete;
  // Destroyed by its last holder; every holder also holds the device (queue, event) or is the
  // device itself (its timeline list and graveyard, emptied before the device goes).
  const VkSemaphore semaphore;
  // The value that covers every command recorded so far (the open batch's, once it has one).
  std::atomic<uint64_t> covers{0};

private:
  VkDevice device_;
  PFN_vkDestroySemaphore destroy_;
};

// One VkDevice (of one context's device) and what every object made on it shares.
class device_state {
public:
  // `pipelines`: where the VkPipelineCache is loaded from and saved to (disabled: neither).
  device_state(const vk_api& vk, const device_info& info, const sdk::logger& log,
               sdk::blob_cache& pipelines);
  ~device_state();
  device_state(const device_state&) = delete;
  device_state& operator=(const device_state&) = delete;

  const vk_api& vk;
  const device_info& info;
  const sdk::logger& log;
  VkDevice device = VK_NULL_HANDLE;
  vk_device_api fn;
  VkQueue queue = VK_NULL_HANDLE; // shared by every pcy queue of the context on this device
  std::mutex submit_mutex;        // vkQueueSubmit on `queue` is externally synchronised
  // The driver's compiled pipelines (device.cpp): loaded from the plugin's pipeline cache when
  // an entry made for this device and driver is there, saved back when the device goes.
  // VK_NULL_HANDLE when the driver refused to make one (pipelines are then built without).
  VkPipelineCache pipeline_cache = VK_NULL_HANDLE;

  // A memory type index allowed by `bits` that has all of `want` (and preferably `prefer`);
  // UINT32_MAX when none.
  uint32_t memory_type(uint32_t bits, VkMemoryPropertyFlags want,
                       VkMemoryPropertyFlags prefer = 0) const noexcept;
  // A buffer with memory bound; throws (OUT_OF_MEMORY when the device has none left).
  struct buffer {
    VkBuffer handle = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    void* mapped = nullptr;      // host-visible buffers are mapped for their whole life
    VkDeviceAddress address = 0; // 0 without bufferDeviceAddress
    uint64_t bytes = 0;          // the size asked for
  };
  // On a host-unified device, device-local memory that is also host-visible and coherent is
  // mapped too (`mapped` set): it is host memory, which memory_export offers as a host pointer.
  buffer make_buffer(uint64_t bytes, bool host_visible, const char* what);
  // A buffer over `bytes` of host memory at `host`, imported without a copy
  // (VK_EXT_external_memory_host; `host_import` must be true). Throws UNSUPPORTED for a pointer
  // the device cannot import (alignment, size, the driver's answer).
  buffer import_host(void* host, uint64_t bytes);
  bool host_import = false; // info.host_import, and the extension enabled on this VkDevice
  void destroy_buffer(const buffer& b) noexcept;
  // Staging buffers (host-visible, mapped, at least `bytes`) from this device's pool, so that
  // repeated transfers make no Vulkan allocation: sizes are rounded up to a power of two (64 KiB
  // at least); those of up to staging_pooled_max go back to the pool when released (at most
  // staging_pool_max bytes in it, the rest destroyed). Any thread; the pool goes with the device.
  buffer acquire_staging(uint64_t bytes);
  // `b` (from acquire_staging) once no work uses it any more.
  void release_staging(const buffer& b) noexcept;
  static constexpr uint64_t staging_min = uint64_t{64} << 10;
  static constexpr uint64_t staging_pooled_max = uint64_t{4} << 20;
  static constexpr uint64_t staging_pool_max = uint64_t{16} << 20;

  // Timelines of the live queues, for the graveyard.
  void add_timeline(const std::shared_ptr<timeline>& t);
  void remove_timeline(const timeline* t);
  // Runs `release` (which destroys Vulkan objects of this device) once every live queue has
  // finished the work recorded so far: buffers and pipelines freed while work that uses them
  // may be recorded or running.
  void bury(std::function<void()> release);
  // Runs the releases whose work has completed.
  void collect();

private:
  void open_pipeline_cache();
  void save_pipeline_cache() noexcept;
  sdk::blob_cache& pipelines_;
  sdk::blob_cache::key_type pipeline_key_{};
  size_t pipeline_bytes_loaded_ = 0;

  struct grave {
    std::function<void()> release;
    std::vector<std::pair<std::shared_ptr<timeline>, uint64_t>> until;
  };
  std::mutex mutex_; // timelines_ and graves_
  std::vector<std::shared_ptr<timeline>> timelines_;
  std::vector<grave> graves_;
  std::mutex staging_mutex_; // staging_free_, staging_pooled_
  std::vector<buffer> staging_free_;
  uint64_t staging_pooled_ = 0; // bytes of staging_free_'s buffers
};
using device_ref = std::shared_ptr<device_state>;

class context;
class queue;
class event;
class memory;
class program;
class kernel;
class graph;

class plugin : public sdk::framework_plugin<context, queue, event, memory, program, kernel, graph> {
public:
  static constexpr sdk::plugin_info info{
      plugin_name, "0.1.0",
      "Vulkan: every Vulkan 1.2 device with a compute queue, through the loader (libvulkan.so.1)"};

  explicit plugin(const pcy_host_services& host);
  ~plugin();

  const vk_api& vk() const noexcept { return vk_; }
  const device_info& device(uint32_t index) const { return *devices_.at(index); }
  // The GLSL compiler, loaded on first use; nullptr with `why` when there is none.
  const shaderc_api* shaderc(std::string& why);
  // SPIR-V compiled from GLSL, by source and options (kind "vulkan" of the SDK's kernel cache).
  sdk::blob_cache& cache() noexcept { return cache_; }
  // The drivers' pipeline caches (VkPipelineCache data), by device and driver (kind
  // "vulkan-pipeline").
  sdk::blob_cache& pipeline_cache() noexcept { return pipelines_; }

private:
  void discover(); // device.cpp
  vk_api vk_;
  sdk::settings settings_;
  std::vector<std::unique_ptr<device_info>> devices_;
  std::mutex shaderc_mutex_;
  bool shaderc_tried_ = false;
  shaderc_api shaderc_;
  std::string shaderc_why_;
  // Last: destroyed first, they finish the pending writes.
  sdk::blob_cache cache_;
  sdk::blob_cache pipelines_;
};

class context {
public:
  PCY_SDK_CONTEXT_MEMBERS(context, plugin, queue, memory);
  program* build(std::string_view source, const char* options, bool& cache_hit); // program.cpp
  memory* import(uint32_t device, const pcy_memory_handle& h);                   // memory.cpp
  void* native_context() const noexcept { return devices_.front()->device; }
  void* native_device(uint32_t device) const { return dev(device).info.physical; }
  void* native_platform(uint32_t) const noexcept { return owner_.vk().instance; }

  // The device at an index into this context's devices; NOT_FOUND when out of range.
  device_state& dev(uint32_t device) const;
  const device_ref& ref(uint32_t device) const {
    dev(device);
    return devices_[device];
  }
  const std::vector<device_ref>& devices() const noexcept { return devices_; }

private:
  plugin& owner_;
  std::vector<device_ref> devices_;
};

class memory {
public:
  // `host`: the host memory the bytes are (imported, or a coherent mapping), else NULL.
  memory(device_ref dev, device_state::buffer b, uint64_t bytes, void* host) noexcept;
  ~memory();
  memory(const memory&) = delete;
  memory& operator=(const memory&) = delete;

  // PCY_HANDLE_HOST_POINTER where the bytes are host memory; false for every other kind.
  bool export_to(pcy_handle_kind kind, pcy_memory_handle& h) const noexcept;
  void* native() const noexcept { return buffer_.handle; }
  VkBuffer handle() const noexcept { return buffer_.handle; }
  const device_state* device() const noexcept { return dev_.get(); }
  uint64_t bytes() const noexcept { return bytes_; }
  VkDeviceAddress address() const noexcept { return buffer_.address; }
  void check_range(uint64_t offset, uint64_t bytes, const char* what) const;

private:
  device_ref dev_;
  device_state::buffer buffer_;
  uint64_t bytes_;
  void* host_;
  bool imported_;
};

class event {
public:
  event(device_ref dev, std::shared_ptr<timeline> t, uint64_t value) noexcept
      : dev_(std::move(dev)), timeline_(std::move(t)), value_(value) {}
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  void wait();
  const device_state* device() const noexcept { return dev_.get(); }
  VkSemaphore semaphore() const noexcept { return timeline_->semaphore; }
  uint64_t value() const noexcept { return value_; }

private:
  device_ref dev_;
  std::shared_ptr<timeline> timeline_;
  uint64_t value_;
};

// Recorded commands and what they need until their work has completed: a queue's batch (one
// submit), or a graph's command buffer (replayed by every launch, freed with the graph).
struct batch {
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  uint64_t value = 0; // the timeline value its submit signals (a queue's batch)
  std::vector<device_state::buffer> staging;
  std::vector<VkDescriptorPool> pools;
  uint32_t commands = 0;
  uint64_t staged = 0; // bytes of its staging buffers
};

// A graph (queue_capture_begin .. graph_launch, graph.cpp): the work captured on its queue,
// recorded into one command buffer of its own, with the descriptor sets, push constants and
// staging buffers of the captured commands (kernel arguments are taken by value at capture).
// Launching it submits that command buffer again, in order on the queue's timeline.
class graph {
public:
  graph(device_ref dev, queue* owner);
  ~graph();
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;
  void instantiate();

private:
  friend class queue;
  device_ref dev_;
  queue* owner_; // the queue it is captured and launched on
  VkCommandPool pool_ = VK_NULL_HANDLE;
  batch rec_; // rec_.cmd: begun at creation, ended by instantiate
  bool capturing_ = false, broken_ = false, ready_ = false;
};

class queue {
public:
  queue(const context& ctx, uint32_t device);
  ~queue();
  queue(const queue&) = delete;
  queue& operator=(const queue&) = delete;

  PCY_SDK_QUEUE_MEMBERS(memory, event);
  void launch(kernel& k, const pcy_kernel_launch_args& args); // program.cpp
  void* native() const noexcept { return dev_->queue; }
  // Graphs (graph.cpp).
  graph* create_graph();
  void capture_begin(graph& g);
  void capture_end(graph& g);
  void launch_graph(graph& g);

private:
  // The command buffer that takes the next command, begun: the open batch's, or the graph's
  // while capturing; a barrier before each command after the first, so that commands run in
  // order (pcy queues are in-order).
  VkCommandBuffer command(); // caller holds mutex_
  // Where commands go now: the open batch, or the graph being captured.
  batch& recording() noexcept { return capture_ != nullptr ? capture_->rec_ : open_; }
  // Submits the open batch if it has commands (and `also` after them, in the same submit);
  // caller holds mutex_.
  void submit(VkCommandBuffer also = VK_NULL_HANDLE);
  // Throws (and breaks the capture) when the queue is capturing: `what` waits for the device or
  // the host, which a graph cannot hold.
  void refuse_in_capture(const char* what);
  friend class graph; // ~graph ends a capture its host never ended (abandon_capture)
  void abandon_capture(const graph& g) noexcept;
  void wait_value(uint64_t value, const char* what);
  void reap(); // recycle the batches that completed
  void same_device(const memory& m, const char* what) const;
  VkDescriptorSet descriptor_set(VkDescriptorSetLayout layout, uint32_t storage,
                                 uint32_t uniform); // program.cpp
  device_state::buffer staging(uint64_t bytes);

  device_ref dev_;
  std::shared_ptr<timeline> timeline_;
  std::mutex mutex_; // finish and event_wait may come from another thread (pcy_framework.h)
  VkCommandPool pool_ = VK_NULL_HANDLE;
  batch open_;
  std::vector<batch> in_flight_;
  std::vector<VkCommandBuffer> spare_;
  uint64_t submitted_ = 0;                              // the value of the last submitted batch
  std::vector<std::pair<VkSemaphore, uint64_t>> waits_; // for the next submit
  graph* capture_ = nullptr;                            // the graph being captured, if any
};

// A kernel's interface, read from its SPIR-V (spirv.cpp).
struct kernel_interface {
  std::string entry; // the SPIR-V entry point
  uint32_t local[3] = {1, 1, 1};
  bool local_known = false;
  struct binding {
    uint32_t set = 0, binding = 0;
    VkDescriptorType type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  };
  std::vector<binding> bindings; // sorted by binding
  struct push_member {
    uint32_t offset = 0, size = 0; // size 0: not a scalar or vector of scalars
    // A buffer_reference (PhysicalStorageBuffer pointer, 8 bytes): filled by a PCY_ARG_MEMORY
    // argument with the buffer's device address, after the bindings.
    bool pointer = false;
  };
  std::vector<push_member> push; // in member order
  uint32_t push_size = 0;
  uint32_t pointers = 0; // push members that are pointers
};
// The GLCompute entry points of a SPIR-V module with each one's interface; throws BUILD with
// what is wrong.
std::vector<kernel_interface> reflect(std::span<const uint32_t> words, std::string_view origin);

class program {
public:
  struct module {
    std::string name; // the kernel name
    std::vector<uint32_t> words;
    kernel_interface iface;
  };
  program(std::vector<device_ref> devices, std::vector<module> modules) noexcept
      : devices_(std::move(devices)), modules_(std::move(modules)) {}
  program(const program&) = delete;
  program& operator=(const program&) = delete;
  kernel* create_kernel(const char* name);

private:
  std::vector<device_ref> devices_;
  std::vector<module> modules_;
};

class kernel {
public:
  // Pipelines, one per device of the program's context.
  struct pipeline {
    device_ref dev;
    VkShaderModule shader = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
  };
  kernel(std::string name, kernel_interface iface) noexcept
      : name_(std::move(name)), iface_(std::move(iface)) {}
  ~kernel();
  kernel(const kernel&) = delete;
  kernel& operator=(const kernel&) = delete;
  void add(const device_ref& dev, std::span<const uint32_t> words); // program.cpp

  const std::string& name() const noexcept { return name_; }
  const kernel_interface& iface() const noexcept { return iface_; }
  const pipeline* on(const device_state* dev) const noexcept {
    for (const pipeline& p : pipelines_)
      if (p.dev.get() == dev) return &p;
    return nullptr;
  }
  uint32_t storage_count() const noexcept { return storage_; }
  uint32_t uniform_count() const noexcept { return uniform_; }

private:
  std::string name_;
  kernel_interface iface_;
  std::vector<pipeline> pipelines_;
  uint32_t storage_ = 0, uniform_ = 0;
};

} // namespace parenchyma::vulkan
