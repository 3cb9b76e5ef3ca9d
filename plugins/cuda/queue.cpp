// Queues (a non-blocking CUstream each), events (CUevent, timing disabled) and the operations
// enqueued on a queue: host<->device transfers (direct for pinned or small host memory, through
// the pinned staging pool for large pageable memory), device and peer copies, fills and kernel
// launches. Everything is asynchronous on the stream; blocking transfers wait for it.
#include "plugin.hpp"

#include <algorithm>
#include <cstring>

namespace parenchyma::cuda {

// ---- events ----------------------------------------------------------------------------------
event::~event() {
  if (tl_current != ctx_ && d_.api().cuCtxSetCurrent(ctx_) == CUDA_SUCCESS) tl_current = ctx_;
  d_.api().cuEventDestroy(e_);
}

void event::wait() {
  check(d_, call(d_, ctx_, [&] { return d_.api().cuEventSynchronize(e_); }), "cuEventSynchronize");
}

// ---- queue -----------------------------------------------------------------------------------
queue::queue(context& c, uint32_t slot)
    : d_(c.drv()), ctx_(c), slot_(slot), cu_ctx_(c.slot(slot).ctx),
      device_(c.slot(slot).info->device), staging_(c.slot(slot).staging.get()),
      read_threshold_(c.owner().staging().threshold),
      write_threshold_(c.owner().staging().write_threshold) {
  make_current(d_, cu_ctx_);
  check(d_, d_.api().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

queue::~queue() {
  if (tl_current != cu_ctx_ && d_.api().cuCtxSetCurrent(cu_ctx_) == CUDA_SUCCESS)
    tl_current = cu_ctx_;
  d_.api().cuStreamSynchronize(stream_); // the ABI promises the queue's work is done first
  d_.api().cuStreamDestroy(stream_);
}

void queue::finish() {
  check(d_, call(d_, cu_ctx_, [&] { return d_.api().cuStreamSynchronize(stream_); }),
        "cuStreamSynchronize");
}

event* queue::record() {
  make_current(d_, cu_ctx_);
  CUevent e = nullptr;
  check(d_, d_.api().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  const CUresult r = d_.api().cuEventRecord(e, stream_);
  if (r != CUDA_SUCCESS) {
    d_.api().cuEventDestroy(e);
    check(d_, r, "cuEventRecord");
  }
  return new event(d_, cu_ctx_, e);
}

void queue::wait(event& e) {
  // Works across contexts and devices: the stream waits on the device, the host does not.
  check(d_, call(d_, cu_ctx_, [&] { return d_.api().cuStreamWaitEvent(stream_, e.native(), 0); }),
        "cuStreamWaitEvent");
}

// Pinned (page-locked, registered) host memory can be DMA'd directly; pageable cannot.
bool queue::host_pinned(const void* p, uint64_t bytes) const {
  unsigned int type = 0;
  void* start = nullptr;
  size_t size = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* values[] = {&type, &start, &size};
  // Unknown pointers are not an error here: the attributes come back zero.
  if (d_.api().cuPointerGetAttributes(3, attrs, values, reinterpret_cast<CUdeviceptr>(p)) !=
      CUDA_SUCCESS)
    return false;
  if (type == 0) return false;
  if (size == 0 || start == nullptr) return true; // no range reported: the driver copes
  const auto* s = static_cast<const char*>(start);
  const auto* q = static_cast<const char*>(p);
  return q >= s && static_cast<uint64_t>(q - s) + bytes <= size;
}

void queue::write(memory& m, uint64_t offset, const void* host, uint64_t bytes, bool blocking) {
  m.check_range(offset, bytes, "memory_write");
  if (bytes == 0) return;
  if (host == nullptr) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "memory_write from a NULL host pointer");
  make_current(d_, cu_ctx_);
  if (bytes < write_threshold_ || host_pinned(host, bytes)) {
    check(d_,
          call(d_, cu_ctx_,
               [&] { return d_.api().cuMemcpyHtoDAsync(m.ptr() + offset, host, bytes, stream_); }),
          "cuMemcpyHtoDAsync");
  } else {
    staging_->write(stream_, m.ptr() + offset, host, bytes);
  }
  if (blocking) finish();
}

void queue::read(memory& m, uint64_t offset, void* host, uint64_t bytes, bool blocking) {
  m.check_range(offset, bytes, "memory_read");
  if (bytes == 0) return;
  if (host == nullptr) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "memory_read into a NULL host pointer");
  make_current(d_, cu_ctx_);
  if (bytes < read_threshold_ || host_pinned(host, bytes)) {
    check(d_,
          call(d_, cu_ctx_,
               [&] { return d_.api().cuMemcpyDtoHAsync(host, m.ptr() + offset, bytes, stream_); }),
          "cuMemcpyDtoHAsync");
    if (blocking) finish();
  } else {
    staging_->read(stream_, host, m.ptr() + offset, bytes); // returns with the data in place
  }
}

void queue::copy(memory& src, uint64_t src_offset, memory& dst, uint64_t dst_offset,
                 uint64_t bytes) {
  src.check_range(src_offset, bytes, "memory_copy source");
  dst.check_range(dst_offset, bytes, "memory_copy destination");
  if (bytes == 0) return;
  if (dst.cu_device() != device_ && !dst.host_backed())
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              "memory_copy must be enqueued on a queue of the destination's device");
  CUresult r;
  if (src.cu_context() == dst.cu_context() || src.host_backed() || dst.host_backed()) {
    r = call(d_, cu_ctx_, [&] {
      return d_.api().cuMemcpyDtoDAsync(dst.ptr() + dst_offset, src.ptr() + src_offset, bytes,
                                        stream_);
    });
  } else {
    r = call(d_, cu_ctx_, [&] {
      return d_.api().cuMemcpyPeerAsync(dst.ptr() + dst_offset, dst.cu_context(),
                                        src.ptr() + src_offset, src.cu_context(), bytes, stream_);
    });
  }
  check(d_, r, "memory_copy");
}

void queue::fill(memory& m, uint64_t offset, uint64_t bytes, const void* pattern, uint32_t size) {
  m.check_range(offset, bytes, "memory_fill");
  if (size != 1 && size != 2 && size != 4 && size != 8 && size != 16)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str("fill pattern of ", size, " bytes (1, 2, 4, 8 or 16)"));
  if (bytes == 0) return;
  if (pattern == nullptr) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "fill pattern is NULL");
  unsigned char p[16];
  std::memcpy(p, pattern, size);
  const CUdeviceptr dst = m.ptr() + offset;
  const uint64_t count = bytes / size;
  const auto& api = d_.api();
  make_current(d_, cu_ctx_);
  auto run = [&](auto&& f, const char* what) { check(d_, call(d_, cu_ctx_, f), what); };

  const bool uniform = std::all_of(p, p + size, [&](unsigned char b) { return b == p[0]; });
  uint32_t w0 = 0;
  std::memcpy(&w0, p, std::min<uint32_t>(size, 4));
  bool words_equal = size >= 4 && dst % 4 == 0;
  for (uint32_t w = 4; words_equal && w < size; w += 4)
    words_equal = std::memcmp(p, p + w, 4) == 0;

  if (uniform) {
    run([&] { return api.cuMemsetD8Async(dst, p[0], bytes, stream_); }, "cuMemsetD8Async");
  } else if (size == 2 && dst % 2 == 0) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    run([&] { return api.cuMemsetD16Async(dst, v, count, stream_); }, "cuMemsetD16Async");
  } else if (words_equal) {
    run([&] { return api.cuMemsetD32Async(dst, w0, bytes / 4, stream_); }, "cuMemsetD32Async");
  } else {
    // An 8/16-byte (or unaligned) pattern is a column per 32-bit word (or byte) of a
    // (size-byte pitch) x count array: a 2-D memset each, no kernel of ours needed.
    CUresult r = CUDA_SUCCESS;
    if (size >= 8 && dst % 4 == 0) {
      for (uint32_t w = 0; w < size && r == CUDA_SUCCESS; w += 4) {
        uint32_t v;
        std::memcpy(&v, p + w, 4);
        r = call(d_, cu_ctx_,
                 [&] { return api.cuMemsetD2D32Async(dst + w, size, v, 1, count, stream_); });
      }
    } else {
      for (uint32_t b = 0; b < size && r == CUDA_SUCCESS; ++b)
        r = call(d_, cu_ctx_,
                 [&] { return api.cuMemsetD2D8Async(dst + b, size, p[b], 1, count, stream_); });
    }
    if (r != CUDA_SUCCESS) fill_by_doubling(dst, bytes, p, size);
  }
}

// Fallback for shapes a 2-D memset refuses: one pattern from the host, then device copies that
// double the filled prefix (log2(count) copies, ordered on the stream).
void queue::fill_by_doubling(CUdeviceptr dst, uint64_t bytes, const unsigned char* pattern,
                             uint32_t size) {
  const auto& api = d_.api();
  // From pageable memory the driver has consumed the source when the call returns.
  check(d_, api.cuMemcpyHtoDAsync(dst, pattern, size, stream_), "cuMemcpyHtoDAsync (fill)");
  for (uint64_t done = size; done < bytes; done *= 2) {
    const uint64_t n = std::min(done, bytes - done);
    check(d_, api.cuMemcpyDtoDAsync(dst + done, dst, n, stream_), "cuMemcpyDtoDAsync (fill)");
  }
}

// ---- kernel launch: the hot path (no allocation, lock, lookup or exception unless refused) ---
void queue::launch(kernel& k, const pcy_kernel_launch_args& a) {
  const kernel::per_device& f = k.on(slot_);
  if (a.arg_count > kernel::max_args) [[unlikely]]
    sdk::fail(PCY_ERR_LAUNCH, sdk::str("kernel '", k.name(), "': ", a.arg_count,
                                       " arguments (at most ", kernel::max_args, ")"));
  if (a.arg_count > 0 && a.args == nullptr) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, "kernel arguments are NULL");
  void* params[kernel::max_args];
  CUdeviceptr pointers[kernel::max_args];
  uint32_t n = 0;
  size_t shared = 0;
  const auto& sizes = k.param_sizes();
  for (uint32_t i = 0; i < a.arg_count; ++i) {
    const pcy_kernel_arg& arg = a.args[i];
    size_t size = 0;
    switch (arg.kind) {
    case PCY_ARG_MEMORY: {
      auto* m = reinterpret_cast<memory*>(arg.memory);
      if (m == nullptr) [[unlikely]]
        sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                  sdk::str("kernel '", k.name(), "' argument ", i, ": NULL memory"));
      if (m->cu_device() != device_ && !m->host_backed()) [[unlikely]]
        sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                  sdk::str("kernel '", k.name(), "' argument ", i,
                           ": memory of another device than the queue's"));
      pointers[n] = m->ptr();
      params[n] = &pointers[n];
      size = sizeof(CUdeviceptr);
      break;
    }
    case PCY_ARG_SCALAR:
      if (arg.value == nullptr || arg.size == 0) [[unlikely]]
        sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                  sdk::str("kernel '", k.name(), "' argument ", i, ": scalar without a value"));
      params[n] = const_cast<void*>(arg.value); // the driver copies it during cuLaunchKernel
      size = arg.size;
      break;
    case PCY_ARG_LOCAL:
      shared += arg.size; // dynamic shared memory: one extern __shared__ array, no parameter
      continue;
    default:
      sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str("kernel '", k.name(), "' argument ", i,
                                                   ": unknown kind ", static_cast<int>(arg.kind)));
    }
    if (k.params_known() && n < sizes.size() && sizes[n] != size) [[unlikely]]
      sdk::fail(PCY_ERR_LAUNCH, sdk::str("kernel '", k.name(), "' parameter ", n, " is ", sizes[n],
                                         " bytes but argument ", i, " has ", size));
    ++n;
  }
  if (k.params_known() && n != sizes.size()) [[unlikely]]
    sdk::fail(PCY_ERR_LAUNCH, sdk::str("kernel '", k.name(), "' takes ", sizes.size(),
                                       " parameters but the launch passed ", n));

  // Work sizes: grid = ceil(global / local); local 0 everywhere lets the plugin choose.
  uint32_t block[3] = {1, 1, 1};
  uint64_t grid[3] = {1, 1, 1};
  const bool choose =
      a.local[0] == 0 && (a.dims < 2 || a.local[1] == 0) && (a.dims < 3 || a.local[2] == 0);
  for (uint32_t d = 0; d < a.dims; ++d) {
    if (a.global[d] == 0) return; // nothing to run
    block[d] = a.local[d] ? a.local[d] : 1;
  }
  if (choose) {
    if (a.dims == 1) {
      const uint64_t want = (a.global[0] + 31) & ~uint64_t(31);
      block[0] = static_cast<uint32_t>(std::min<uint64_t>(f.suggested_block, want));
    } else {
      block[0] = 32;
      block[1] = a.dims == 2 ? 8 : 4;
      block[2] = a.dims == 3 ? 2 : 1;
    }
  }
  const uint64_t threads = uint64_t(block[0]) * block[1] * block[2];
  if (threads > static_cast<uint64_t>(f.max_threads)) [[unlikely]]
    sdk::fail(PCY_ERR_LAUNCH,
              sdk::str("kernel '", k.name(), "': a block of ", block[0], "x", block[1], "x",
                       block[2], " = ", threads, " threads exceeds its limit of ", f.max_threads,
                       " (registers and device limits); use a smaller local size"));
  for (uint32_t d = 0; d < a.dims; ++d)
    grid[d] = (a.global[d] + block[d] - 1) / block[d];
  if (grid[0] > 0x7fffffffu || grid[1] > 65535 || grid[2] > 65535) [[unlikely]]
    sdk::fail(PCY_ERR_LAUNCH,
              sdk::str("kernel '", k.name(), "': grid ", grid[0], "x", grid[1], "x", grid[2],
                       " exceeds the device's limits "
                       "(2^31-1 x 65535 x 65535); use a larger local size"));

  const CUresult r = call(d_, cu_ctx_, [&] {
    if (f.early) {
      // Programmatic stream serialisation: the kernel may start while the kernel before it on
      // the stream still runs; it waits for it (griddepcontrol.wait) before touching memory.
      // Captured into a graph, the edge from the kernel before becomes programmatic.
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig c{};
      c.gridDimX = static_cast<unsigned>(grid[0]);
      c.gridDimY = static_cast<unsigned>(grid[1]);
      c.gridDimZ = static_cast<unsigned>(grid[2]);
      c.blockDimX = block[0];
      c.blockDimY = block[1];
      c.blockDimZ = block[2];
      c.sharedMemBytes = static_cast<unsigned>(shared);
      c.hStream = stream_;
      c.attrs = &attr;
      c.numAttrs = 1;
      return d_.api().cuLaunchKernelEx(&c, f.fn, params, nullptr);
    }
    return d_.api().cuLaunchKernel(f.fn, static_cast<unsigned>(grid[0]),
                                   static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2]),
                                   block[0], block[1], block[2], static_cast<unsigned>(shared),
                                   stream_, params, nullptr);
  });
  if (r != CUDA_SUCCESS) [[unlikely]] {
    const pcy_status st = (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
                              ? PCY_ERR_LAUNCH
                              : status_of(r);
    sdk::fail(st, sdk::str("cuLaunchKernel of '", k.name(), "' (grid ", grid[0], "x", grid[1], "x",
                           grid[2], ", block ", block[0], "x", block[1], "x", block[2], ", ",
                           shared, " bytes shared) refused: ", d_.describe(r)));
  }
}

} // namespace parenchyma::cuda
