// Memory: device-local buffers (pinned allocations: host-visible, mapped buffers), freed through
// the device's graveyard once no queue can still use them; host memory imported without a copy
// (VK_EXT_external_memory_host) and exported as a host pointer where the bytes are host memory.
#include "vulkan.hpp"

#include <cstdint>

namespace parenchyma::vulkan {

memory::memory(device_ref dev, device_state::buffer b, uint64_t bytes, void* host) noexcept
    : dev_(std::move(dev)), buffer_(b), bytes_(bytes), host_(host),
      imported_(host != nullptr && b.mapped == nullptr) {}

memory::~memory() {
  device_state* d = dev_.get();
  try {
    d->bury([d, b = buffer_] { d->destroy_buffer(b); });
    // An import's VkDeviceMemory goes as soon as no queued work uses it: the host memory under
    // it is its owner's, who frees it after this call (once the work is done, as the ABI says).
    if (imported_) d->collect();
  } catch (...) { // no memory for the graveyard entry: wait for the device instead
    std::lock_guard lock(d->submit_mutex); // the device's one queue: externally synchronised
    d->fn.vkDeviceWaitIdle(d->device);
    d->destroy_buffer(buffer_);
  }
}

bool memory::export_to(pcy_handle_kind kind, pcy_memory_handle& h) const noexcept {
  // Only where the bytes are host memory the host may read after queue_finish: imported host
  // memory, or a coherent mapping (pinned allocations; device memory of a host-unified device).
  if (kind != PCY_HANDLE_HOST_POINTER || host_ == nullptr) return false;
  h.host_pointer = host_;
  h.bytes = bytes_;
  h.pinned = false; // page-locked for no GPU driver
  return true;
}

device_state::buffer device_state::import_host(void* host, uint64_t bytes) {
  // The allocation covers whole units of minImportedHostPointerAlignment (a Vulkan rule): past
  // `bytes` it reaches at most to the end of the last byte's page, which is mapped memory of the
  // process, and nothing ever reads or writes there (transfers and kernels are bounded by the
  // buffer's size). Where the unit is larger than 4 KiB (the smallest page of the systems we
  // run on) only whole units are imported.
  constexpr uint64_t smallest_page = 4096;
  const uint64_t align = info.host_import_align;
  const uint64_t rounded = (bytes + align - 1) / align * align;
  if (align > smallest_page && rounded != bytes)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("host memory of ", bytes, " bytes is not a multiple of '", info.name,
                       "' import alignment (", align,
                       " bytes, larger than a 4 KiB page); the memory is copied instead"));
  VkMemoryHostPointerPropertiesEXT hp{};
  hp.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT;
  VkResult r = fn.vkGetMemoryHostPointerPropertiesEXT(
      device, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, host, &hp);
  if (r != VK_SUCCESS || hp.memoryTypeBits == 0)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("'", info.name, "' cannot import host pointer ", host,
                       " (vkGetMemoryHostPointerPropertiesEXT: ", vk_result_name(r),
                       r == VK_SUCCESS ? ", no memory type" : "",
                       "); the memory is copied instead"));
  buffer b;
  VkExternalMemoryBufferCreateInfo ext{};
  ext.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  ext.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.pNext = &ext;
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
             VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (info.device_address) bi.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  r = fn.vkCreateBuffer(device, &bi, nullptr, &b.handle);
  if (r != VK_SUCCESS)
    vk_fail(
        status_for(r, PCY_ERR_DEVICE), "vkCreateBuffer", r,
        sdk::str("a buffer over ", bytes, " bytes of imported host memory on '", info.name, "'"));
  VkMemoryRequirements req{};
  fn.vkGetBufferMemoryRequirements(device, b.handle, &req);
  const uint32_t type =
      memory_type(req.memoryTypeBits & hp.memoryTypeBits, 0, VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  if (type == UINT32_MAX || req.size > rounded) {
    fn.vkDestroyBuffer(device, b.handle, nullptr);
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("'", info.name, "' cannot import host pointer ", host, " for a buffer (",
                       type == UINT32_MAX
                           ? "no memory type serves both"
                           : sdk::str("the buffer needs ", req.size, " bytes, more than the ",
                                      rounded, " that can be imported"),
                       "); the memory is copied instead"));
  }
  VkImportMemoryHostPointerInfoEXT import{};
  import.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT;
  import.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  import.pHostPointer = host;
  VkMemoryAllocateFlagsInfo flags{};
  flags.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO;
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  if (info.device_address) import.pNext = &flags;
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.pNext = &import;
  ai.allocationSize = rounded;
  ai.memoryTypeIndex = type;
  r = fn.vkAllocateMemory(device, &ai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    fn.vkDestroyBuffer(device, b.handle, nullptr);
    sdk::fail(r == VK_ERROR_INVALID_EXTERNAL_HANDLE ? PCY_ERR_UNSUPPORTED
                                                    : status_for(r, PCY_ERR_DEVICE),
              sdk::str("vkAllocateMemory importing host pointer ", host, " (", rounded,
                       " bytes) on '", info.name, "': ", vk_result_name(r)));
  }
  r = fn.vkBindBufferMemory(device, b.handle, b.memory, 0);
  if (r == VK_SUCCESS && info.device_address) {
    VkBufferDeviceAddressInfo di{};
    di.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO;
    di.buffer = b.handle;
    b.address = fn.vkGetBufferDeviceAddress(device, &di);
  }
  if (r != VK_SUCCESS) {
    destroy_buffer(b);
    vk_fail(status_for(r, PCY_ERR_DEVICE), "vkBindBufferMemory", r,
            sdk::str("imported host memory on '", info.name, "'"));
  }
  return b;
}

memory* context::import(uint32_t device, const pcy_memory_handle& h) {
  device_state& d = dev(device);
  const device_info& i = d.info;
  if (h.kind != PCY_HANDLE_HOST_POINTER)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("vulkan cannot import handle kind ", static_cast<int>(h.kind),
                       " (only HOST_POINTER, on host-unified devices with "
                       "VK_EXT_external_memory_host)"));
  if (!d.host_import)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              i.host_unified
                  ? sdk::str("'", i.name,
                             "' does not import host memory (no VK_EXT_external_memory_host, or "
                             "PARENCHYMA_VULKAN_NO_HOST_IMPORT is set): a host pointer cannot be "
                             "aliased without a copy")
                  : sdk::str("'", i.name,
                             "' does not share memory with the host: a host pointer is not "
                             "aliased (kernels reading host memory over the bus are slower "
                             "than a copy)"));
  if (h.host_pointer == nullptr || h.bytes == 0)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              "memory_import: HOST_POINTER handle without pointer or bytes");
  if (reinterpret_cast<uintptr_t>(h.host_pointer) % i.host_import_align != 0)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("host pointer ", h.host_pointer, " is not aligned to the ",
                       i.host_import_align, " bytes '", i.name,
                       "' can import (minImportedHostPointerAlignment); the memory is copied "
                       "instead"));
  if (h.bytes > i.max_alloc)
    sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str("host memory of ", h.bytes, " bytes exceeds '", i.name,
                                            "' maxMemoryAllocationSize (", i.max_alloc, " bytes)"));
  d.collect();
  const device_state::buffer b = d.import_host(h.host_pointer, h.bytes);
  return new memory(devices_[device], b, h.bytes, h.host_pointer);
}

void memory::check_range(uint64_t offset, uint64_t bytes, const char* what) const {
  if (offset > bytes_ || bytes > bytes_ - offset) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str(what, ": bytes [", offset, ", ", offset + bytes,
                                                 ") are outside the buffer of ", bytes_, " bytes"));
}

memory* context::alloc(uint32_t device, uint64_t bytes, uint32_t flags) {
  device_state& d = dev(device);
  const device_info& i = d.info;
  if (bytes > i.max_alloc || bytes > i.global_memory)
    sdk::fail(PCY_ERR_OUT_OF_MEMORY,
              sdk::str("memory_alloc of ", bytes, " bytes on '", i.name,
                       "': above its largest allocation (maxMemoryAllocationSize ", i.max_alloc,
                       " bytes, device-local heaps ", i.global_memory,
                       " bytes); split the data into smaller tensors or use another device"));
  d.collect();
  const bool pinned = (flags & PCY_MEMORY_HOST_PINNED) != 0;
  const device_state::buffer b = d.make_buffer(bytes, pinned, "memory_alloc");
  return new memory(devices_[device], b, bytes, b.mapped);
}

} // namespace parenchyma::vulkan
