// Memory: cl_mem buffers, pinned (mapped once) host buffers, and the memory-handle protocol
// (export as OPENCL_BUFFER / HOST_POINTER; zero-copy import of host pointers and same-context
// buffers, everything else refused so the core copies instead).
#include "opencl.hpp"

#include <cstring>
#include <vector>

namespace parenchyma::opencl {
namespace {
std::atomic<uint64_t> next_serial{1};
} // namespace

memory::memory(const cl_api& cl, cl_mem mem, cl_context ctx, uint64_t bytes, void* host_pointer,
               cl_command_queue unmap_queue) noexcept
    : cl_(cl), mem_(mem), ctx_(ctx), bytes_(bytes), host_(host_pointer), unmap_queue_(unmap_queue),
      serial_(next_serial.fetch_add(1, std::memory_order_relaxed)) {}

memory::~memory() {
  if (unmap_queue_ != nullptr) {
    // Pinned buffers stay mapped for their whole life; unmap before release.
    if (cl_.clEnqueueUnmapMemObject(unmap_queue_, mem_, host_, 0, nullptr, nullptr) == CL_SUCCESS)
      cl_.clFinish(unmap_queue_);
    cl_.clReleaseCommandQueue(unmap_queue_);
  }
  cl_.clReleaseMemObject(mem_);
}

bool memory::export_to(pcy_handle_kind kind, pcy_memory_handle& h) const noexcept {
  switch (kind) {
  case PCY_HANDLE_OPENCL_BUFFER:
    h.opencl_buffer = mem_;
    h.opencl_context = ctx_;
    h.bytes = bytes_;
    return true;
  case PCY_HANDLE_HOST_POINTER:
    // Only where the bytes really are host memory the host may read after queue_finish.
    if (host_ == nullptr) return false;
    h.host_pointer = host_;
    h.bytes = bytes_;
    h.pinned = false; // page-locked for no GPU driver
    return true;
  default: return false;
  }
}

void memory::check_range(uint64_t offset, uint64_t bytes, const char* what) const {
  if (offset > bytes_ || bytes > bytes_ - offset) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str(what, ": bytes [", offset, ", ", offset + bytes,
                                                 ") are outside the buffer of ", bytes_, " bytes"));
}

memory* context::alloc(uint32_t device, uint64_t bytes, uint32_t flags) {
  const device_info& d = dev(device);
  // PoCL accepts huge sizes and fails only at first use; refuse them here, clearly.
  if (bytes > d.max_alloc || bytes > d.global_memory)
    sdk::fail(PCY_ERR_OUT_OF_MEMORY,
              sdk::str("memory_alloc of ", bytes, " bytes on '", d.name,
                       "': above its largest allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE ",
                       d.max_alloc, " bytes, global memory ", d.global_memory,
                       " bytes); split the data into smaller tensors or use another device"));
  const bool pinned = (flags & PCY_MEMORY_HOST_PINNED) != 0;
  cl_mem_flags f = CL_MEM_READ_WRITE;
  if (pinned) f |= CL_MEM_ALLOC_HOST_PTR;
  cl_int err = CL_SUCCESS;
  cl_mem m = cl_.clCreateBuffer(ctx_, f, static_cast<size_t>(bytes), nullptr, &err);
  if (err != CL_SUCCESS || m == nullptr)
    cl_fail(status_for(err, PCY_ERR_DEVICE), "clCreateBuffer", err,
            sdk::str("allocating ", bytes, " bytes on '", d.name,
                     "' failed; free other tensors or use smaller ones"));
  if (!pinned || !d.host_unified) return new memory(cl_, m, ctx_, bytes, nullptr, nullptr);

  // On a device that shares host memory, map the pinned buffer once: its bytes are then host
  // memory that other plugins may alias (export HOST_POINTER).
  try {
    cl_command_queue q = map_queue(device);
    void* host = cl_.clEnqueueMapBuffer(q, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                        static_cast<size_t>(bytes), 0, nullptr, nullptr, &err);
    cl_check(err, "clEnqueueMapBuffer", status_for(err, PCY_ERR_DEVICE),
             "mapping a pinned buffer failed; allocate it without PCY_MEMORY_HOST_PINNED");
    cl_.clRetainCommandQueue(q);
    return new memory(cl_, m, ctx_, bytes, host, q);
  } catch (...) {
    cl_.clReleaseMemObject(m);
    throw;
  }
}

memory* context::import(uint32_t device, const pcy_memory_handle& h) {
  const device_info& d = dev(device);
  switch (h.kind) {
  case PCY_HANDLE_HOST_POINTER: {
    if (!d.host_unified)
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str("'", d.name,
                         "' does not share memory with the host: a host pointer "
                         "cannot be aliased without a copy"));
    if (h.host_pointer == nullptr || h.bytes == 0)
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                "memory_import: HOST_POINTER handle without pointer or bytes");
    // Below the device's base alignment the memory is never used in place: a driver may keep a
    // copy of its own (the spec lets it), and one that does use it (PoCL) runs kernels compiled
    // for aligned buffers on it — vector loads wider than the offset (CLBlast's XscalFast on an
    // address 16 mod 32: a crash). The core keeps a device copy in step instead.
    if (reinterpret_cast<uintptr_t>(h.host_pointer) % d.base_align != 0)
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str("host pointer ", h.host_pointer, " is not aligned to the ", d.base_align,
                         " bytes '", d.name, "' needs to use it in place (its kernels assume "
                         "aligned buffers)"));
    if (h.bytes > d.max_alloc)
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str("host memory of ", h.bytes, " bytes exceeds '", d.name,
                         "' CL_DEVICE_MAX_MEM_ALLOC_SIZE (", d.max_alloc, " bytes)"));
    cl_int err = CL_SUCCESS;
    cl_mem m = cl_.clCreateBuffer(ctx_, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                                  static_cast<size_t>(h.bytes), h.host_pointer, &err);
    if (err != CL_SUCCESS || m == nullptr)
      cl_fail(status_for(err, PCY_ERR_DEVICE), "clCreateBuffer(CL_MEM_USE_HOST_PTR)", err,
              "the driver refused to use the host memory in place");
    return new memory(cl_, m, ctx_, h.bytes, h.host_pointer, nullptr);
  }
  case PCY_HANDLE_OPENCL_BUFFER: {
    if (h.opencl_buffer == nullptr)
      sdk::fail(PCY_ERR_INVALID_ARGUMENT, "memory_import: OPENCL_BUFFER handle without a cl_mem");
    if (h.opencl_context != ctx_)
      sdk::fail(PCY_ERR_UNSUPPORTED, "memory_import: the cl_mem belongs to another cl_context; "
                                     "OpenCL cannot alias it across contexts (copy instead)");
    auto* m = static_cast<cl_mem>(h.opencl_buffer);
    size_t size = 0;
    cl_check(cl_.clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, nullptr),
             "clGetMemObjectInfo(CL_MEM_SIZE)", PCY_ERR_INVALID_ARGUMENT,
             "the handle does not name a live cl_mem");
    if (h.bytes > size)
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                sdk::str("memory_import: handle says ", h.bytes, " bytes, the cl_mem has ", size));
    // A buffer that uses host memory in place on a host-unified device still is host memory.
    void* host = nullptr;
    cl_mem_flags flags = 0;
    if (d.host_unified &&
        cl_.clGetMemObjectInfo(m, CL_MEM_FLAGS, sizeof flags, &flags, nullptr) == CL_SUCCESS &&
        (flags & CL_MEM_USE_HOST_PTR) != 0)
      cl_.clGetMemObjectInfo(m, CL_MEM_HOST_PTR, sizeof host, &host, nullptr);
    cl_check(cl_.clRetainMemObject(m), "clRetainMemObject");
    return new memory(cl_, m, ctx_, h.bytes ? h.bytes : size, host, nullptr);
  }
  default:
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("opencl cannot import handle kind ", static_cast<int>(h.kind),
                       " (only HOST_POINTER on host-unified devices and OPENCL_BUFFER of the same "
                       "cl_context)"));
  }
}

} // namespace parenchyma::opencl
