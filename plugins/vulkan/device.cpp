// Device discovery (every Vulkan 1.2 physical device with a compute queue, with its properties),
// the VkDevice each context makes per device (its VkPipelineCache: pipeline_cache.cpp), its
// buffers, and contexts.
#include "vulkan.hpp"

#include <parenchyma/sdk/library.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

namespace parenchyma::vulkan {
namespace {

std::string vendor_name(uint32_t id) {
  switch (id) {
  case 0x10DE: return "NVIDIA";
  case 0x1002: return "AMD";
  case 0x1022: return "AMD";
  case 0x8086: return "Intel";
  case 0x13B5: return "ARM";
  case 0x5143: return "Qualcomm";
  case 0x106B: return "Apple";
  case 0x1010: return "Imagination Technologies";
  case 0x10005: return "Mesa";
  default: {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%04x", id);
    return buf;
  }
  }
}

// The driver version as its vendor encodes it (NVIDIA: 10.8.8.6 bits; others VK_MAKE_VERSION).
std::string driver_version_text(uint32_t vendor, uint32_t v) {
  char buf[48];
  if (vendor == 0x10DE)
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", (v >> 22) & 0x3ff, (v >> 14) & 0xff,
                  (v >> 6) & 0xff, v & 0x3f);
  else
    std::snprintf(buf, sizeof buf, "%u.%u.%u", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
                  VK_API_VERSION_PATCH(v));
  return buf;
}

std::string uuid_text(const uint8_t* u) {
  char buf[40];
  std::snprintf(buf, sizeof buf,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                u[15]);
  return buf;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated_gpu";
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete_gpu";
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual_gpu";
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
  default: return "other";
  }
}

// Whether the physical device offers the device extension `name`.
bool has_extension(const vk_api& vk, VkPhysicalDevice p, const char* name) {
  uint32_t count = 0;
  if (vk.vkEnumerateDeviceExtensionProperties(p, nullptr, &count, nullptr) != VK_SUCCESS)
    return false;
  std::vector<VkExtensionProperties> all(count);
  if (vk.vkEnumerateDeviceExtensionProperties(p, nullptr, &count, all.data()) != VK_SUCCESS)
    return false;
  for (uint32_t i = 0; i < count; ++i)
    if (std::strcmp(all[i].extensionName, name) == 0) return true;
  return false;
}

} // namespace

void plugin::discover() {
  // PARENCHYMA_VULKAN_LIBRARY names another loader (ignored in set-uid processes, like every
  // setting).
  std::string library = settings_.get("PARENCHYMA_VULKAN_LIBRARY");
  if (library.empty()) library = sdk::os::vulkan_library;
  if (!vk_.load(library.c_str(), reason_)) {
    log_.info("0 devices: ", reason_);
    return;
  }
  uint32_t count = 0;
  VkResult r = vk_.vkEnumeratePhysicalDevices(vk_.instance, &count, nullptr);
  std::vector<VkPhysicalDevice> physical(count);
  if (r == VK_SUCCESS && count > 0)
    r = vk_.vkEnumeratePhysicalDevices(vk_.instance, &count, physical.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    reason_ = sdk::str("vkEnumeratePhysicalDevices: ", vk_result_name(r),
                       ": the Vulkan installation looks broken; run vulkaninfo to see why");
    log_.warn("0 devices: ", reason_);
    return;
  }
  physical.resize(count);
  if (physical.empty()) {
    reason_ = "the Vulkan loader found no device: install a driver (Debian: mesa-vulkan-drivers "
              "for lavapipe on the CPU, or the GPU vendor's driver); check VK_ICD_FILENAMES";
    log_.info("0 devices: ", reason_);
    return;
  }

  std::string notes; // why some device is not offered
  auto note = [&](const std::string& s) { notes += (notes.empty() ? "" : "; ") + s; };
  // PARENCHYMA_VULKAN_NO_FP64=1 treats every device as one without shaderFloat64 (a test aid:
  // the f64-less path of bundles on a device that has fp64): the property says no and the
  // feature is not enabled, so a shader that uses double fails to load.
  const std::string no_fp64 = settings_.get("PARENCHYMA_VULKAN_NO_FP64");
  const bool hide_fp64 = !no_fp64.empty() && no_fp64 != "0";
  if (hide_fp64) log_.info("PARENCHYMA_VULKAN_NO_FP64: devices offered without shaderFloat64");
  // PARENCHYMA_VULKAN_NO_DEVICE_ADDRESS=1 likewise offers every device without
  // bufferDeviceAddress (a test aid: the refusals of a tensor above maxStorageBufferRange).
  const std::string no_address = settings_.get("PARENCHYMA_VULKAN_NO_DEVICE_ADDRESS");
  const bool hide_address = !no_address.empty() && no_address != "0";
  if (hide_address)
    log_.info("PARENCHYMA_VULKAN_NO_DEVICE_ADDRESS: devices offered without bufferDeviceAddress");
  // PARENCHYMA_VULKAN_NO_HOST_IMPORT=1 offers every device without host-memory import (a test
  // aid: the staged transfers that a discrete GPU uses, on lavapipe).
  const std::string no_import = settings_.get("PARENCHYMA_VULKAN_NO_HOST_IMPORT");
  const bool hide_import = !no_import.empty() && no_import != "0";
  if (hide_import)
    log_.info("PARENCHYMA_VULKAN_NO_HOST_IMPORT: devices offered without host-memory import");
  for (VkPhysicalDevice p : physical) {
    auto d = std::make_unique<device_info>();
    d->physical = p;
    VkPhysicalDeviceProperties base{};
    vk_.vkGetPhysicalDeviceProperties(p, &base);
    d->name = base.deviceName;
    if (base.apiVersion < VK_API_VERSION_1_2) {
      note(sdk::str("device '", d->name, "' speaks Vulkan ", VK_API_VERSION_MAJOR(base.apiVersion),
                    ".", VK_API_VERSION_MINOR(base.apiVersion),
                    ", this plugin needs 1.2: update the driver"));
      continue;
    }
    VkPhysicalDeviceDriverProperties drv{};
    drv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    VkPhysicalDeviceVulkan12Properties v12{};
    v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES;
    v12.pNext = &drv;
    VkPhysicalDeviceVulkan11Properties v11{};
    v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES;
    v11.pNext = &v12;
    VkPhysicalDeviceProperties2 props{};
    props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    props.pNext = &v11;
    vk_.vkGetPhysicalDeviceProperties2(p, &props);

    VkPhysicalDeviceVulkan12Features f12{};
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    VkPhysicalDeviceVulkan11Features f11{};
    f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 features{};
    features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    features.pNext = &f11;
    vk_.vkGetPhysicalDeviceFeatures2(p, &features);
    if (!f12.timelineSemaphore) {
      note(sdk::str("device '", d->name, "' lacks timeline semaphores (Vulkan 1.2 feature)"));
      continue;
    }

    uint32_t families = 0;
    vk_.vkGetPhysicalDeviceQueueFamilyProperties(p, &families, nullptr);
    std::vector<VkQueueFamilyProperties> fam(families);
    vk_.vkGetPhysicalDeviceQueueFamilyProperties(p, &families, fam.data());
    // A compute family; one without graphics first (a dedicated compute engine), else any.
    uint32_t chosen = UINT32_MAX;
    for (uint32_t i = 0; i < families; ++i)
      if ((fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && fam[i].queueCount > 0 &&
          (chosen == UINT32_MAX || ((fam[chosen].queueFlags & VK_QUEUE_GRAPHICS_BIT) &&
                                    !(fam[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))))
        chosen = i;
    if (chosen == UINT32_MAX) {
      note(sdk::str("device '", d->name, "' has no compute queue"));
      continue;
    }
    d->queue_family = chosen;
    d->type = base.deviceType;
    // lavapipe/llvmpipe (and SwiftShader) report the CPU type: the same cores as the native
    // framework, through slower code, so the ranking places them below it (config ranking.cpu).
    d->kind = base.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU     ? PCY_DEVICE_CPU
              : base.deviceType == VK_PHYSICAL_DEVICE_TYPE_OTHER ? PCY_DEVICE_OTHER
                                                                 : PCY_DEVICE_GPU;
    d->host_unified = base.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
                      base.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
    d->vendor = vendor_name(base.vendorID);
    d->vendor_id = base.vendorID;
    d->device_id = base.deviceID;
    d->driver_version_raw = base.driverVersion;
    std::memcpy(d->pipeline_cache_uuid, base.pipelineCacheUUID, VK_UUID_SIZE);
    d->driver_name = drv.driverName;
    d->driver_info = drv.driverInfo;
    d->driver_version = driver_version_text(base.vendorID, base.driverVersion);
    if (!d->driver_info.empty()) d->driver_version += " (" + d->driver_info + ")";
    d->api_version =
        sdk::str(VK_API_VERSION_MAJOR(base.apiVersion), ".", VK_API_VERSION_MINOR(base.apiVersion),
                 ".", VK_API_VERSION_PATCH(base.apiVersion));
    d->uuid = uuid_text(v11.deviceUUID);
    d->subgroup_size = v11.subgroupSize;
    constexpr VkSubgroupFeatureFlags shuffle =
        VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
    d->subgroup_shuffle = (v11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                          (v11.subgroupSupportedOperations & shuffle) == shuffle;
    d->fp16 = f12.shaderFloat16 != VK_FALSE;
    d->fp64 = features.features.shaderFloat64 != VK_FALSE && !hide_fp64;
    d->int64 = features.features.shaderInt64 != VK_FALSE;
    // 8- and 16-bit integers in registers and in storage buffers (the array bundle's small types)
    d->int8 = f12.shaderInt8 != VK_FALSE && f12.storageBuffer8BitAccess != VK_FALSE;
    d->int16 =
        features.features.shaderInt16 != VK_FALSE && f11.storageBuffer16BitAccess != VK_FALSE;
    d->denorm_preserve16 = v12.shaderDenormPreserveFloat16 != VK_FALSE;
    d->denorm_preserve32 = v12.shaderDenormPreserveFloat32 != VK_FALSE;
    d->denorm_preserve64 = v12.shaderDenormPreserveFloat64 != VK_FALSE;
    d->device_address = f12.bufferDeviceAddress != VK_FALSE && !hide_address;
    // Host pointers imported in place: on host-unified devices with VK_EXT_external_memory_host
    // (lavapipe, integrated GPUs); its properties are asked for only where it exists.
    if (d->host_unified && !hide_import &&
        has_extension(vk_, p, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME)) {
      VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{};
      host.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
      VkPhysicalDeviceProperties2 hp{};
      hp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
      hp.pNext = &host;
      vk_.vkGetPhysicalDeviceProperties2(p, &hp);
      const uint64_t a = host.minImportedHostPointerAlignment;
      d->host_import = a > 0 && (a & (a - 1)) == 0; // a power of two, as the spec requires
      d->host_import_align = a;
    }
    vk_.vkGetPhysicalDeviceMemoryProperties(p, &d->memory);
    for (uint32_t h = 0; h < d->memory.memoryHeapCount; ++h)
      if (d->memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
        d->global_memory += d->memory.memoryHeaps[h].size;
    const VkPhysicalDeviceLimits& lim = base.limits;
    d->local_memory = lim.maxComputeSharedMemorySize;
    d->max_alloc = v11.maxMemoryAllocationSize;
    d->max_storage_range = lim.maxStorageBufferRange;
    d->max_work_group = lim.maxComputeWorkGroupInvocations;
    d->max_push_constants = lim.maxPushConstantsSize;
    d->min_storage_align = lim.minStorageBufferOffsetAlignment;
    for (int i = 0; i < 3; ++i) {
      d->max_group_count[i] = lim.maxComputeWorkGroupCount[i];
      d->max_group_size[i] = lim.maxComputeWorkGroupSize[i];
    }

    sdk::property_list& pr = add_device();
    pr.text(PCY_PROP_NAME, d->name);
    pr.text(PCY_PROP_VENDOR, d->vendor);
    pr.number(PCY_PROP_KIND, d->kind);
    pr.text("device_type", type_name(base.deviceType));
    pr.number(PCY_PROP_GLOBAL_MEMORY, static_cast<int64_t>(d->global_memory));
    pr.number(PCY_PROP_LOCAL_MEMORY, static_cast<int64_t>(d->local_memory));
    pr.number(PCY_PROP_MAX_WORK_GROUP, d->max_work_group);
    pr.number("max_alloc", static_cast<int64_t>(d->max_alloc));
    pr.number("max_storage_buffer_range", static_cast<int64_t>(d->max_storage_range));
    pr.number("max_push_constants", d->max_push_constants);
    pr.number("subgroup_size", d->subgroup_size);
    pr.flag("subgroup_shuffle", d->subgroup_shuffle);
    pr.text("vulkan_version", d->api_version);
    pr.text("driver_name", d->driver_name);
    pr.text(PCY_PROP_DRIVER_VERSION, d->driver_version);
    pr.text(PCY_PROP_UUID, d->uuid);
    pr.flag(PCY_PROP_HOST_UNIFIED, d->host_unified);
    pr.flag(PCY_PROP_FP64, d->fp64);
    pr.flag("fp16", d->fp16);
    pr.flag("int64", d->int64);
    pr.flag("int8", d->int8);
    pr.flag("int16", d->int16);
    pr.flag("denorm_preserve_f32", d->denorm_preserve32);
    pr.flag("buffer_device_address", d->device_address);
    pr.flag("host_import", d->host_import);
    if (d->host_import)
      pr.number("host_import_alignment", static_cast<int64_t>(d->host_import_align));
    log_.debug("device ", devices_.size(), ": '", d->name, "' (", d->vendor, ", ",
               type_name(base.deviceType), ", Vulkan ", d->api_version, ", driver ",
               d->driver_version, "; subnormals kept on request: f16 ", d->denorm_preserve16,
               ", f32 ", d->denorm_preserve32, ", f64 ", d->denorm_preserve64, ")");
    devices_.push_back(std::move(d));
  }
  if (devices_.empty()) {
    reason_ = "no usable Vulkan device" + (notes.empty() ? std::string() : ": " + notes);
    log_.info("0 devices: ", reason_);
  } else if (!notes.empty()) {
    reason_ = notes;
    log_.info(reason_);
  }
}

// ---- one VkDevice -----------------------------------------------------------------------------

device_state::device_state(const vk_api& api, const device_info& d, const sdk::logger& l,
                           sdk::blob_cache& pipelines)
    : vk(api), info(d), log(l), pipelines_(pipelines) {
  // Every feature the device has, except robust buffer access (a cost on some GPUs; kernels
  // bounds-check, as on every framework).
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &f11;
  vk.vkGetPhysicalDeviceFeatures2(d.physical, &features);
  features.features.robustBufferAccess = VK_FALSE;
  if (!d.fp64) features.features.shaderFloat64 = VK_FALSE;   // PARENCHYMA_VULKAN_NO_FP64
  if (!d.device_address) f12.bufferDeviceAddress = VK_FALSE; // PARENCHYMA_VULKAN_NO_DEVICE_ADDRESS
  // Capture and replay of addresses is for debuggers; multi-device addresses need device groups.
  f12.bufferDeviceAddressCaptureReplay = VK_FALSE;
  f12.bufferDeviceAddressMultiDevice = VK_FALSE;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo q{};
  q.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  q.queueFamilyIndex = d.queue_family;
  q.queueCount = 1;
  q.pQueuePriorities = &priority;
  VkDeviceCreateInfo info_{};
  info_.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info_.pNext = &features;
  info_.queueCreateInfoCount = 1;
  info_.pQueueCreateInfos = &q;
  const char* extensions[] = {VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME};
  if (d.host_import) {
    info_.enabledExtensionCount = 1;
    info_.ppEnabledExtensionNames = extensions;
  }
  const VkResult r = vk.vkCreateDevice(d.physical, &info_, nullptr, &device);
  if (r != VK_SUCCESS)
    vk_fail(status_for(r, PCY_ERR_DEVICE), "vkCreateDevice", r,
            sdk::str("could not open '", d.name, "'"));
  if (std::string missing = fn.load(vk, device); !missing.empty()) {
    auto destroy =
        reinterpret_cast<PFN_vkDestroyDevice>(vk.vkGetDeviceProcAddr(device, "vkDestroyDevice"));
    if (destroy != nullptr) destroy(device, nullptr);
    sdk::fail(PCY_ERR_DEVICE, sdk::str("the driver of '", d.name, "' does not resolve ", missing,
                                       ": a Vulkan 1.2 driver is needed"));
  }
  fn.vkGetDeviceQueue(device, d.queue_family, 0, &queue);
  if (d.host_import)
    fn.vkGetMemoryHostPointerPropertiesEXT =
        reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
            vk.vkGetDeviceProcAddr(device, "vkGetMemoryHostPointerPropertiesEXT"));
  host_import = fn.vkGetMemoryHostPointerPropertiesEXT != nullptr;
  try {
    open_pipeline_cache();
  } catch (...) { // out of memory: pipelines are built without a cache
    if (pipeline_cache != VK_NULL_HANDLE)
      fn.vkDestroyPipelineCache(device, pipeline_cache, nullptr);
    pipeline_cache = VK_NULL_HANDLE;
  }
}

device_state::~device_state() {
  // Every queue is gone (each held this state) and waited for its work; the buried buffers can
  // go now.
  fn.vkDeviceWaitIdle(device);
  for (grave& g : graves_)
    g.release();
  graves_.clear(); // their timelines' semaphores go before the device
  timelines_.clear();
  for (const buffer& b : staging_free_)
    destroy_buffer(b);
  staging_free_.clear();
  save_pipeline_cache();
  fn.vkDestroyDevice(device, nullptr);
}

uint32_t device_state::memory_type(uint32_t bits, VkMemoryPropertyFlags want,
                                   VkMemoryPropertyFlags prefer) const noexcept {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t i = 0; i < info.memory.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = info.memory.memoryTypes[i].propertyFlags;
    if (!(bits & (1u << i)) || (f & want) != want) continue;
    if ((f & prefer) == prefer) return i;
    if (fallback == UINT32_MAX) fallback = i;
  }
  return fallback;
}

device_state::buffer device_state::make_buffer(uint64_t bytes, bool host_visible,
                                               const char* what) {
  buffer b;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
             VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (info.device_address) bi.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = fn.vkCreateBuffer(device, &bi, nullptr, &b.handle);
  if (r != VK_SUCCESS)
    vk_fail(status_for(r, PCY_ERR_DEVICE), "vkCreateBuffer", r,
            sdk::str(what, " of ", bytes, " bytes on '", info.name, "'"));
  VkMemoryRequirements req{};
  fn.vkGetBufferMemoryRequirements(device, b.handle, &req);
  const uint32_t type =
      host_visible
          ? memory_type(req.memoryTypeBits,
                        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                        VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
          : memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  const uint32_t any = type != UINT32_MAX ? type : memory_type(req.memoryTypeBits, 0);
  if (any == UINT32_MAX || (host_visible && type == UINT32_MAX)) {
    fn.vkDestroyBuffer(device, b.handle, nullptr);
    sdk::fail(PCY_ERR_DEVICE, sdk::str(what, " on '", info.name, "': no ",
                                       host_visible ? "host-visible, coherent" : "suitable",
                                       " memory type for a buffer"));
  }
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = any;
  VkMemoryAllocateFlagsInfo flags{};
  flags.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO;
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  if (info.device_address) ai.pNext = &flags;
  r = fn.vkAllocateMemory(device, &ai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    fn.vkDestroyBuffer(device, b.handle, nullptr);
    vk_fail(status_for(r, PCY_ERR_DEVICE), "vkAllocateMemory", r,
            sdk::str(what, " of ", bytes, " bytes on '", info.name,
                     "' failed; free other tensors or use smaller ones"));
  }
  r = fn.vkBindBufferMemory(device, b.handle, b.memory, 0);
  // Device memory of a host-unified device that is host memory (host-visible and coherent, as
  // all of lavapipe's is) is mapped too, so that it can be exported as a host pointer.
  constexpr VkMemoryPropertyFlags coherent =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const bool map =
      host_visible ||
      (info.host_unified && (info.memory.memoryTypes[any].propertyFlags & coherent) == coherent);
  if (r == VK_SUCCESS && map) r = fn.vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped);
  if (r == VK_SUCCESS && info.device_address) {
    VkBufferDeviceAddressInfo di{};
    di.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO;
    di.buffer = b.handle;
    b.address = fn.vkGetBufferDeviceAddress(device, &di);
  }
  if (r != VK_SUCCESS) {
    destroy_buffer(b);
    vk_fail(status_for(r, PCY_ERR_DEVICE), map ? "vkMapMemory" : "vkBindBufferMemory", r,
            sdk::str(what, " on '", info.name, "'"));
  }
  return b;
}

void device_state::destroy_buffer(const buffer& b) noexcept {
  if (b.handle != VK_NULL_HANDLE) fn.vkDestroyBuffer(device, b.handle, nullptr);
  if (b.memory != VK_NULL_HANDLE) fn.vkFreeMemory(device, b.memory, nullptr); // unmaps too
}

device_state::buffer device_state::acquire_staging(uint64_t bytes) {
  uint64_t size = staging_min;
  while (size < bytes && size < staging_pooled_max)
    size <<= 1;
  if (size < bytes) size = bytes; // beyond the pooled sizes: made and destroyed as asked
  if (size <= staging_pooled_max) {
    std::lock_guard lock(staging_mutex_);
    for (auto it = staging_free_.begin(); it != staging_free_.end(); ++it)
      if (it->bytes == size) {
        const buffer b = *it;
        staging_free_.erase(it);
        staging_pooled_ -= size;
        return b;
      }
  }
  log.debug("a staging buffer of ", size, " bytes on '", info.name, "' (none free in the pool)");
  buffer b = make_buffer(size, true, "a staging buffer");
  b.bytes = size;
  return b;
}

void device_state::release_staging(const buffer& b) noexcept {
  if (b.bytes <= staging_pooled_max) {
    std::lock_guard lock(staging_mutex_);
    if (staging_pooled_ + b.bytes <= staging_pool_max) {
      try {
        staging_free_.push_back(b);
        staging_pooled_ += b.bytes;
        return;
      } catch (...) { // no room for the entry: the buffer goes
      }
    }
  }
  destroy_buffer(b);
}

void device_state::add_timeline(const std::shared_ptr<timeline>& t) {
  std::lock_guard lock(mutex_);
  timelines_.push_back(t);
}

void device_state::remove_timeline(const timeline* t) {
  std::lock_guard lock(mutex_);
  std::erase_if(timelines_, [&](const auto& p) { return p.get() == t; });
}

void device_state::bury(std::function<void()> release) {
  std::unique_lock lock(mutex_);
  grave g{std::move(release), {}};
  for (const auto& t : timelines_)
    if (const uint64_t v = t->covers.load(std::memory_order_acquire); v > 0)
      g.until.emplace_back(t, v);
  if (g.until.empty()) { // no queue ever recorded work: nothing can use it
    lock.unlock();
    g.release();
    return;
  }
  graves_.push_back(std::move(g));
}

void device_state::collect() {
  std::lock_guard lock(mutex_);
  std::erase_if(graves_, [&](grave& g) {
    for (const auto& [t, v] : g.until) {
      uint64_t now = 0;
      if (fn.vkGetSemaphoreCounterValue(device, t->semaphore, &now) != VK_SUCCESS || now < v)
        return false;
    }
    g.release();
    return true;
  });
}

// ---- contexts ---------------------------------------------------------------------------------

context::context(plugin& owner, std::span<const uint32_t> devices) : owner_(owner) {
  std::set<uint32_t> seen;
  for (uint32_t index : devices) {
    if (!seen.insert(index).second)
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                sdk::str("context_create: device ", index, " is listed twice"));
    devices_.push_back(std::make_shared<device_state>(owner.vk(), owner.device(index), owner.log(),
                                                      owner.pipeline_cache()));
  }
}

context::~context() = default;

device_state& context::dev(uint32_t device) const {
  if (device >= devices_.size()) [[unlikely]]
    sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("device ", device, " is not in this context (",
                                          devices_.size(), " devices)"));
  return *devices_[device];
}

queue* context::create_queue(uint32_t device) { return new queue(*this, device); }

} // namespace parenchyma::vulkan
