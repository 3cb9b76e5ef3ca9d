// Memory: device-local buffers (pinned allocations: host-visible, mapped buffers), freed through
// the device's graveyard once no queue can still use them.
#include "vulkan.hpp"

namespace parenchyma::vulkan {

memory::memory(device_ref dev, device_state::buffer b, uint64_t bytes) noexcept
    : dev_(std::move(dev)), buffer_(b), bytes_(bytes) {}

memory::~memory() {
  device_state* d = dev_.get();
  try {
    d->bury([d, b = buffer_] { d->destroy_buffer(b); });
  } catch (...) { // no memory for the graveyard entry: wait for the device instead
    std::lock_guard lock(d->submit_mutex); // the device's one queue: externally synchronised
    d->fn.vkDeviceWaitIdle(d->device);
    d->destroy_buffer(buffer_);
  }
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
  return new memory(devices_[device], d.make_buffer(bytes, pinned, "memory_alloc"), bytes);
}

} // namespace parenchyma::vulkan
