// Queues (one in-order cl_command_queue each), events (markers and barriers) and the memory
// transfers enqueued on a queue: read, write, copy, fill.
#include "opencl.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace parenchyma::opencl {

// ---- events -----------------------------------------------------------------------------------

event::~event() { cl_.clReleaseEvent(ev_); }

void event::wait() { cl_check(cl_.clWaitForEvents(1, &ev_), "clWaitForEvents"); }

// ---- queues -----------------------------------------------------------------------------------

queue::queue(const context& ctx, uint32_t device)
    : cl_(ctx.cl()), dev_(ctx.dev(device)), ctx_(ctx.handle()) {
  cl_int err = CL_SUCCESS;
  q_ = dev_.shared_queue ? shared_queues::acquire_queue(cl_, ctx_, dev_.id, err)
                         : cl_.clCreateCommandQueue(ctx_, dev_.id, 0, &err);
  if (err != CL_SUCCESS || q_ == nullptr)
    cl_fail(status_for(err, PCY_ERR_DEVICE), "clCreateCommandQueue", err,
            sdk::str("could not create a queue on '", dev_.name, "'"));
}

queue::~queue() {
  cl_.clFinish(q_); // the ABI: queue_destroy waits for the queue's work first
  if (dev_.shared_queue)
    shared_queues::release_queue(cl_, q_);
  else
    cl_.clReleaseCommandQueue(q_);
}

void queue::finish() {
  const cl_int err = cl_.clFinish(q_);
  pending_reads_.clear();
  if (err != CL_SUCCESS)
    cl_fail(status_for(err, PCY_ERR_DEVICE), "clFinish", err,
            sdk::str("work on '", dev_.name, "' failed (a kernel may have faulted)"));
}

void queue::wait_for_reads_into(const void* host, uint64_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(host);
  const uintptr_t end = begin + static_cast<uintptr_t>(bytes);
  for (const host_range& r : pending_reads_)
    if (r.begin < end && begin < r.end) {
      finish();
      return;
    }
}

event* queue::record() {
  cl_event ev = nullptr;
  cl_check(cl_.clEnqueueMarkerWithWaitList(q_, 0, nullptr, &ev), "clEnqueueMarkerWithWaitList");
  return new event(cl_, ev, ctx_);
}

void queue::wait(event& e) {
  if (e.context_handle() != ctx_) {
    // OpenCL wait lists cannot hold another context's events: wait on the host instead.
    e.wait();
    return;
  }
  cl_event ev = e.handle();
  cl_check(cl_.clEnqueueBarrierWithWaitList(q_, 1, &ev, nullptr), "clEnqueueBarrierWithWaitList");
}

void queue::same_context(const memory& m, const char* what) const {
  if (m.context_handle() != ctx_) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str(what, ": the memory belongs to another OpenCL context than the queue"));
}

void queue::read(memory& m, uint64_t offset, void* host, uint64_t bytes, bool blocking) {
  m.check_range(offset, bytes, "memory_read");
  same_context(m, "memory_read");
  if (bytes == 0) return;
  const cl_int err = cl_.clEnqueueReadBuffer(q_, m.handle(), blocking ? CL_TRUE : CL_FALSE,
                                             static_cast<size_t>(offset),
                                             static_cast<size_t>(bytes), host, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) [[unlikely]]
    cl_fail(status_for(err, PCY_ERR_DEVICE), "clEnqueueReadBuffer", err,
            sdk::str("reading ", bytes, " bytes from '", dev_.name, "'"));
  if (blocking) return;
  const auto begin = reinterpret_cast<uintptr_t>(host);
  const host_range r{begin, begin + static_cast<uintptr_t>(bytes)};
  // A few ranges are kept apart; past that they merge into one (a wait then may come sooner).
  if (pending_reads_.size() < 16) {
    pending_reads_.push_back(r);
  } else {
    pending_reads_[0].begin = std::min(pending_reads_[0].begin, r.begin);
    pending_reads_[0].end = std::max(pending_reads_[0].end, r.end);
  }
}

void queue::write(memory& m, uint64_t offset, const void* host, uint64_t bytes, bool blocking) {
  m.check_range(offset, bytes, "memory_write");
  same_context(m, "memory_write");
  if (bytes == 0) return;
  if (!pending_reads_.empty()) [[unlikely]]
    wait_for_reads_into(host, bytes);
  const cl_int err = cl_.clEnqueueWriteBuffer(
      q_, m.handle(), blocking ? CL_TRUE : CL_FALSE, static_cast<size_t>(offset),
      static_cast<size_t>(bytes), host, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) [[unlikely]]
    cl_fail(status_for(err, PCY_ERR_DEVICE), "clEnqueueWriteBuffer", err,
            sdk::str("writing ", bytes, " bytes to '", dev_.name, "'"));
}

void queue::copy(memory& src, uint64_t src_offset, memory& dst, uint64_t dst_offset,
                 uint64_t bytes) {
  src.check_range(src_offset, bytes, "memory_copy (source)");
  dst.check_range(dst_offset, bytes, "memory_copy (destination)");
  if (src.context_handle() != dst.context_handle() || dst.context_handle() != ctx_)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              "memory_copy: source and destination belong to different OpenCL contexts, which "
              "cannot copy directly (the core stages the data through host memory)");
  if (bytes == 0) return;
  sdk::refuse_overlap_in_one_buffer(src.handle() == dst.handle(), src_offset, dst_offset, bytes);
  const cl_int err = cl_.clEnqueueCopyBuffer(
      q_, src.handle(), dst.handle(), static_cast<size_t>(src_offset),
      static_cast<size_t>(dst_offset), static_cast<size_t>(bytes), 0, nullptr, nullptr);
  if (err != CL_SUCCESS) [[unlikely]]
    cl_fail(status_for(err, PCY_ERR_DEVICE), "clEnqueueCopyBuffer", err,
            sdk::str("copying ", bytes, " bytes on '", dev_.name, "'"));
}

void queue::fill(memory& m, uint64_t offset, uint64_t bytes, const void* pattern, uint32_t size) {
  m.check_range(offset, bytes, "memory_fill");
  same_context(m, "memory_fill");
  if (pattern == nullptr) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "memory_fill: pattern is NULL");
  if (size != 1 && size != 2 && size != 4 && size != 8 && size != 16)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str("memory_fill: pattern of ", size, " bytes (1, 2, 4, 8 or 16)"));
  if (bytes == 0) return;
  cl_int err = CL_SUCCESS;
  if (offset % size == 0) {
    err = cl_.clEnqueueFillBuffer(q_, m.handle(), pattern, size, static_cast<size_t>(offset),
                                  static_cast<size_t>(bytes), 0, nullptr, nullptr);
    if (err != CL_SUCCESS) [[unlikely]]
      cl_fail(status_for(err, PCY_ERR_DEVICE), "clEnqueueFillBuffer", err,
              sdk::str("filling ", bytes, " bytes on '", dev_.name, "'"));
    return;
  }
  // OpenCL wants the offset to be a multiple of the pattern size; a rare case, so write the
  // repeated pattern from host memory instead (blocking, as the staging buffer is temporary).
  std::vector<unsigned char> staged(static_cast<size_t>(bytes));
  for (size_t i = 0; i < staged.size(); i += size)
    std::memcpy(staged.data() + i, pattern, size);
  err = cl_.clEnqueueWriteBuffer(q_, m.handle(), CL_TRUE, static_cast<size_t>(offset),
                                 staged.size(), staged.data(), 0, nullptr, nullptr);
  if (err != CL_SUCCESS) [[unlikely]]
    cl_fail(status_for(err, PCY_ERR_DEVICE), "clEnqueueWriteBuffer (fill)", err,
            sdk::str("filling ", bytes, " bytes on '", dev_.name, "'"));
}

} // namespace parenchyma::opencl
