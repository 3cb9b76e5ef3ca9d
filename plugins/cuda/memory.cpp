// Memory: device allocations (cuMemAlloc), pinned host allocations (cuMemHostAlloc, portable and
// device-mapped), and the memory-handle protocol: export of device pointers and pinned host
// memory, import of a same-device pointer or of pinned host memory as a zero-copy alias.
#include "plugin.hpp"

namespace parenchyma::cuda {

memory* context::alloc(uint32_t device, uint64_t bytes, uint32_t flags) {
  device_slot& s = slot(device);
  const auto& d = drv();
  make_current(d, s.ctx);
  if (flags & PCY_MEMORY_HOST_PINNED) {
    void* host = nullptr;
    const CUresult r =
        d.api().cuMemHostAlloc(&host, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (r != CUDA_SUCCESS)
      sdk::fail(status_of(r), sdk::str("cuMemHostAlloc of ", pretty_bytes(bytes),
                                       " of pinned host memory failed: ", d.describe(r)));
    CUdeviceptr mapped = 0;
    const CUresult m = d.api().cuMemHostGetDevicePointer(&mapped, host, 0);
    if (m != CUDA_SUCCESS) {
      d.api().cuMemFreeHost(host);
      sdk::fail(status_of(m), sdk::str("cuMemHostGetDevicePointer: ", d.describe(m)));
    }
    return new memory(*this, device, memory::kind::pinned, mapped, host, bytes);
  }
  CUdeviceptr ptr = 0;
  const CUresult r = d.api().cuMemAlloc(&ptr, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    size_t free_bytes = 0, total = 0;
    d.api().cuMemGetInfo(&free_bytes, &total);
    sdk::fail(PCY_ERR_OUT_OF_MEMORY,
              sdk::str("cuMemAlloc of ", pretty_bytes(bytes), " on ", s.info->name,
                       " failed: CUDA_ERROR_OUT_OF_MEMORY; ", pretty_bytes(free_bytes), " free of ",
                       pretty_bytes(total)));
  }
  if (r != CUDA_SUCCESS)
    sdk::fail(status_of(r), sdk::str("cuMemAlloc of ", pretty_bytes(bytes), " on ", s.info->name,
                                     " failed: ", d.describe(r)));
  return new memory(*this, device, memory::kind::device, ptr, nullptr, bytes);
}

memory* context::import(uint32_t device, const pcy_memory_handle& h) {
  device_slot& s = slot(device);
  const auto& d = drv();
  if (h.bytes == 0) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "memory handle of 0 bytes");
  make_current(d, s.ctx);
  switch (h.kind) {
  case PCY_HANDLE_CUDA_DEVICE_POINTER: {
    if (h.cuda_device != s.info->ordinal)
      sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str("a device pointer of CUDA device ", h.cuda_device,
                                              " cannot be aliased on device ", s.info->ordinal,
                                              " (", s.info->name, "): it must be copied"));
    unsigned int type = 0;
    int ordinal = -1;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void* values[] = {&type, &ordinal};
    const CUresult r = d.api().cuPointerGetAttributes(2, attrs, values, h.cuda_pointer);
    if (r != CUDA_SUCCESS || type == 0)
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                sdk::str("0x", std::hex, h.cuda_pointer, " is not memory the CUDA driver knows"));
    if (type == CU_MEMORYTYPE_DEVICE && ordinal != s.info->ordinal)
      sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str("the pointer lives on CUDA device ", ordinal,
                                              ", not on device ", s.info->ordinal));
    return new memory(*this, device, memory::kind::device_alias, h.cuda_pointer, nullptr, h.bytes);
  }
  case PCY_HANDLE_HOST_POINTER: {
    if (h.host_pointer == nullptr)
      sdk::fail(PCY_ERR_INVALID_ARGUMENT, "host pointer handle with a NULL pointer");
    if (!h.pinned)
      sdk::fail(PCY_ERR_UNSUPPORTED, "pageable host memory cannot be aliased by a CUDA device: "
                                     "it must be copied (or allocated pinned)");
    CUdeviceptr mapped = 0;
    const CUresult r = d.api().cuMemHostGetDevicePointer(&mapped, h.host_pointer, 0);
    if (r != CUDA_SUCCESS)
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str("host memory marked pinned is not mapped by the CUDA driver (",
                         d.describe(r), "): it must be copied"));
    return new memory(*this, device, memory::kind::host_alias, mapped, h.host_pointer, h.bytes);
  }
  default:
    sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str("the CUDA plugin cannot import handle kind ",
                                            static_cast<int>(h.kind), ": it must be copied"));
  }
}

memory::~memory() {
  const auto& d = ctx_.drv();
  if (kind_ != kind::device && kind_ != kind::pinned) return; // aliases own nothing
  if (tl_current != cu_ctx_ && d.api().cuCtxSetCurrent(cu_ctx_) == CUDA_SUCCESS)
    tl_current = cu_ctx_;
  if (kind_ == kind::device)
    d.api().cuMemFree(ptr_);
  else
    d.api().cuMemFreeHost(host_);
}

bool memory::export_to(pcy_handle_kind k, pcy_memory_handle& h) {
  h.bytes = bytes_;
  switch (k) {
  case PCY_HANDLE_CUDA_DEVICE_POINTER:
    // Pinned memory is device-mapped: its device pointer is usable by kernels too.
    h.cuda_pointer = ptr_;
    h.cuda_device = ctx_.slot(slot_).info->ordinal;
    return true;
  case PCY_HANDLE_HOST_POINTER:
    if (!host_backed()) return false;
    h.host_pointer = host_;
    h.pinned = true;
    return true;
  default: return false;
  }
}

void memory::check_range(uint64_t offset, uint64_t bytes, const char* what) const {
  if (offset > bytes_ || bytes > bytes_ - offset) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str(what, " of ", bytes, " bytes at offset ", offset, " runs past the end of a ",
                       bytes_, "-byte allocation"));
}

} // namespace parenchyma::cuda
