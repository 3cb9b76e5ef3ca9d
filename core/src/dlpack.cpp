// parenchyma core: DLPack export and import of SharedTensor storage (parenchyma/dlpack.hpp).
// Export shares a slot's bytes (SlotHold keeps them alive past the tensor); import makes the
// producer's bytes a slot (the host copy, or a CUDA slot through the memory-handle protocol).
#include <parenchyma/dlpack.hpp>

#include "tensor_impl.hpp"

#include <parenchyma/sdk/common.hpp>

#include <parenchyma/sdk/library.hpp>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

namespace parenchyma {
inline namespace v1 {

namespace {

constexpr const char* origin = "dlpack";
constexpr int32_t max_dims = 64; // more than any producer makes; bounds what we read
// DLPack 0.8's kDLBool (one byte per element).
constexpr uint8_t dl_bool = kDLBool;

std::string type_name(DLDataType t) {
  const char* code = t.code == kDLInt      ? "int"
                     : t.code == kDLUInt   ? "uint"
                     : t.code == kDLFloat  ? "float"
                     : t.code == kDLBfloat ? "bfloat"
                     : t.code == dl_bool   ? "bool"
                                           : nullptr;
  std::string s = code ? code : "code " + std::to_string(t.code) + " ";
  s += std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

std::string device_name(DLDevice d) {
  switch (d.device_type) {
  case kDLCPU: return "kDLCPU";
  case kDLCUDA: return "kDLCUDA:" + std::to_string(d.device_id);
  case kDLCUDAHost: return "kDLCUDAHost";
  case kDLOpenCL: return "kDLOpenCL:" + std::to_string(d.device_id);
  case kDLVulkan: return "kDLVulkan";
  case kDLMetal: return "kDLMetal";
  case kDLROCM: return "kDLROCM:" + std::to_string(d.device_id);
  case kDLCUDAManaged: return "kDLCUDAManaged";
  default: return "device type " + std::to_string(static_cast<int>(d.device_type));
  }
}

// What an export hands out: the managed tensor (one of the two forms), its shape and strides,
// and the bytes it keeps.
struct Exported {
  DLManagedTensor managed{};
  DLManagedTensorVersioned versioned{};
  std::vector<int64_t> shape, strides;
  std::vector<std::shared_ptr<SlotHold>> holds;
  bool read_only = false;
};

void exported_deleter(DLManagedTensor* self) noexcept {
  delete static_cast<Exported*>(self->manager_ctx);
}

void exported_versioned_deleter(DLManagedTensorVersioned* self) noexcept {
  delete static_cast<Exported*>(self->manager_ctx);
}

// The versioned form of an export made by to_dlpack / to_dlpack_host (which own nothing else).
DLManagedTensorVersioned* as_versioned(DLManagedTensor* m) noexcept {
  auto* e = static_cast<Exported*>(m->manager_ctx);
  e->versioned.version.major = DLPACK_MAJOR_VERSION;
  e->versioned.version.minor = DLPACK_MINOR_VERSION;
  e->versioned.manager_ctx = e;
  e->versioned.deleter = &exported_versioned_deleter;
  e->versioned.flags = e->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  e->versioned.dl_tensor = e->managed.dl_tensor;
  e->managed.deleter = nullptr; // one owner: the versioned form
  return &e->versioned;
}

// The bytes a tensor shares with the world outside the runtime, in the address space of a
// DLPack device (host memory is one space, whatever kDLCPU or kDLCUDAHost called it).
void set_extent(TensorStorage::Impl& t, DLDevice device, const void* data) {
  const bool host = device.device_type == kDLCPU || device.device_type == kDLCUDAHost;
  t.extent_space = host ? uint64_t{kDLCPU} << 32
                        : (static_cast<uint64_t>(device.device_type) << 32) |
                              static_cast<uint32_t>(device.device_id);
  t.extent_lo = reinterpret_cast<uintptr_t>(data);
  t.extent_hi = t.extent_lo + t.bytes;
}

DLManagedTensor* make_managed(TensorStorage::Impl& t, void* data, DLDevice device) {
  auto e = std::make_unique<Exported>();
  e->shape = t.shape;
  e->strides.assign(t.shape.size(), 1);
  for (size_t i = t.shape.size(); i-- > 1;)
    e->strides[i - 1] = e->strides[i] * (t.shape[i] > 0 ? t.shape[i] : 1);
  e->holds = t.share_slots();
  e->read_only = t.read_only;
  DLTensor& d = e->managed.dl_tensor;
  d.data = data;
  d.device = device;
  d.ndim = static_cast<int32_t>(t.shape.size());
  d.dtype = dtype_to_dlpack(t.dtype);
  d.shape = e->shape.data();
  d.strides = e->strides.data();
  d.byte_offset = 0;
  e->managed.manager_ctx = e.get();
  e->managed.deleter = &exported_deleter;
  // What imports it again overlaps this tensor (checker::distinct compares the extents).
  if (t.extent_space == 0) set_extent(t, device, data);
  return &e.release()->managed;
}

bool is_cuda(const BackendImpl& b) { return b.framework->name() == "cuda"; }

// The few CUDA driver functions an export to a consumer stream needs (an event recorded on the
// backend's stream, waited for by the consumer's), loaded once from the driver the cuda plugin
// uses; the core links nothing of CUDA. Signatures as in cuda.h, with opaque handles.
struct cuda_events {
  using fn_ctx_push = int (*)(void*);
  using fn_ctx_pop = int (*)(void**);
  using fn_event_create = int (*)(void**, unsigned);
  using fn_event_record = int (*)(void*, void*);
  using fn_stream_wait = int (*)(void*, void*, unsigned);
  using fn_event_destroy = int (*)(void*);
  fn_ctx_push ctx_push = nullptr;
  fn_ctx_pop ctx_pop = nullptr;
  fn_event_create event_create = nullptr;
  fn_event_record event_record = nullptr;
  fn_stream_wait stream_wait = nullptr;
  fn_event_destroy event_destroy = nullptr;
  std::string missing; // why it cannot be used; empty when every function was found

  static const cuda_events& get() {
    static const cuda_events e = load(); // once; thread-safe
    return e;
  }

private:
  static cuda_events load() {
    cuda_events e;
    // The cuda plugin has loaded the driver already if a cuda backend exists.
    const char* driver = sdk::os::cuda_driver_library;
    sdk::os::library lib;
    if (!lib.open_loaded(driver).empty() && !lib.open(driver).empty()) {
      e.missing = std::string(driver) + " cannot be loaded";
      return e;
    }
    auto sym = [&](auto& f, const char* name) {
      f = lib.function<std::remove_reference_t<decltype(f)>>(name);
      if (f == nullptr && e.missing.empty()) e.missing = std::string("the driver lacks ") + name;
    };
    sym(e.ctx_push, "cuCtxPushCurrent_v2");
    sym(e.ctx_pop, "cuCtxPopCurrent_v2");
    sym(e.event_create, "cuEventCreate");
    sym(e.event_record, "cuEventRecord");
    sym(e.stream_wait, "cuStreamWaitEvent");
    sym(e.event_destroy, "cuEventDestroy_v2");
    lib.leak(); // the library stays loaded for the process (the plugin holds it too)
    return e;
  }
};

// Makes `consumer` wait for everything enqueued so far on the backend's stream.
void order_consumer_stream(const Backend& backend, intptr_t consumer) {
  const cuda_events& cu = cuda_events::get();
  if (!cu.missing.empty())
    throw error(errc::unsupported, origin,
                "cannot order the consumer's stream: " + cu.missing +
                    "; export with consumer_stream = 0 (the host waits)");
  void* ctx = backend.native(PCY_NATIVE_CONTEXT);
  void* ours = backend.native(PCY_NATIVE_QUEUE);
  auto check = [](int rc, const char* call) {
    if (rc != 0)
      throw error(errc::device, origin,
                  std::string(call) + " failed with CUresult " + std::to_string(rc) +
                      " while ordering the consumer's stream");
  };
  check(cu.ctx_push(ctx), "cuCtxPushCurrent");
  void* event = nullptr;
  int rc = cu.event_create(&event, 0x2 /* CU_EVENT_DISABLE_TIMING */);
  const char* failed = "cuEventCreate";
  if (rc == 0) {
    rc = cu.event_record(event, ours);
    failed = "cuEventRecord";
    if (rc == 0) {
      rc = cu.stream_wait(reinterpret_cast<void*>(consumer), event, 0);
      failed = "cuStreamWaitEvent";
    }
    (void)cu.event_destroy(event); // released once the work it marks is done
  }
  void* popped = nullptr;
  (void)cu.ctx_pop(&popped);
  check(rc, failed);
}

} // namespace

pcy_dtype dtype_from_dlpack(DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 32) return PCY_DTYPE_F32;
    if (t.code == kDLFloat && t.bits == 64) return PCY_DTYPE_F64;
    if (t.code == kDLFloat && t.bits == 16) return PCY_DTYPE_F16;
    if (t.code == kDLBfloat && t.bits == 16) return PCY_DTYPE_BF16;
    if (t.code == kDLInt && t.bits == 32) return PCY_DTYPE_I32;
    if (t.code == kDLInt && t.bits == 64) return PCY_DTYPE_I64;
    if (t.code == kDLUInt && t.bits == 8) return PCY_DTYPE_U8;
    if (t.code == kDLInt && t.bits == 8) return PCY_DTYPE_I8;
    if (t.code == kDLInt && t.bits == 16) return PCY_DTYPE_I16;
    if (t.code == dl_bool && t.bits == 8) return PCY_DTYPE_BOOL;
  }
  throw error(
      errc::unsupported, origin,
      "the DLPack data type " + type_name(t) +
          " has no parenchyma dtype (f32, f64, f16, bf16, i8, i16, i32, i64, u8, bool; one lane): "
          "convert it first");
}

DLDataType dtype_to_dlpack(pcy_dtype t) {
  switch (t) {
  case PCY_DTYPE_F32: return {kDLFloat, 32, 1};
  case PCY_DTYPE_F64: return {kDLFloat, 64, 1};
  case PCY_DTYPE_F16: return {kDLFloat, 16, 1};
  case PCY_DTYPE_BF16: return {kDLBfloat, 16, 1};
  case PCY_DTYPE_I32: return {kDLInt, 32, 1};
  case PCY_DTYPE_I64: return {kDLInt, 64, 1};
  case PCY_DTYPE_U8: return {kDLUInt, 8, 1};
  case PCY_DTYPE_I8: return {kDLInt, 8, 1};
  case PCY_DTYPE_I16: return {kDLInt, 16, 1};
  case PCY_DTYPE_BOOL: return {dl_bool, 8, 1};
  }
  throw error(errc::unsupported, origin,
              "dtype " + std::to_string(static_cast<int>(t)) + " has no DLPack data type");
}

DLDevice dlpack_device(const Backend& backend) {
  const BackendImpl& b = backend.impl();
  if (is_cuda(b)) return {kDLCUDA, static_cast<int32_t>(b.dev->plugin_device)};
  if (b.dev->shares_host) return {kDLCPU, 0};
  throw error(errc::unsupported, origin,
              b.name + " keeps tensors in device memory that is not host memory, and DLPack has "
                       "no device type for OpenCL buffers: export with through_host (a copy to "
                       "the host), or use a CPU or CUDA backend");
}

DLManagedTensor* to_dlpack_host(TensorStorage& t) {
  TensorStorage::Impl& impl = t.impl();
  (void)dtype_to_dlpack(impl.dtype);
  // The consumer may write: the host copy becomes the only valid one.
  const access intent = impl.read_only    ? access::read
                        : impl.valid == 0 ? access::write_only
                                          : access::write;
  void* data = impl.host_access(intent);
  return make_managed(impl, data, {kDLCPU, 0});
}

DLManagedTensor* to_dlpack(TensorStorage& t, const Backend& backend,
                           const DLPackExportOptions& options) {
  TensorStorage::Impl& impl = t.impl();
  BackendImpl& b = backend.impl();
  (void)dtype_to_dlpack(impl.dtype);
  const bool cuda = is_cuda(b);
  if (!cuda && !b.dev->shares_host) {
    if (options.through_host) return to_dlpack_host(t);
    (void)dlpack_device(backend); // throws the explanation
  }
  const access intent = impl.read_only    ? access::read
                        : impl.valid == 0 ? access::write_only
                                          : access::write;
  pcy_memory memory = impl.device(b, intent);
  if (cuda && options.consumer_stream != 0) {
    // Other backends' work on the tensor is finished on the host; this backend's stays queued,
    // and the consumer's stream waits for it through an event.
    impl.settle_except(&b);
    if (options.consumer_stream != -1) order_consumer_stream(backend, options.consumer_stream);
  } else {
    impl.settle_except(nullptr); // the consumer may read at once, on any stream
  }
  if (b.api->memory_export == nullptr) {
    if (!cuda) return to_dlpack_host(t);
    throw error(errc::unsupported, b.framework->name(), "the plugin exports no memory handles");
  }
  pcy_memory_handle h{};
  h.struct_size = sizeof h;
  pcy_memory_export_args x{};
  x.struct_size = sizeof x;
  x.memory = memory;
  x.kind = cuda ? PCY_HANDLE_CUDA_DEVICE_POINTER : PCY_HANDLE_HOST_POINTER;
  x.handle = &h;
  if (pcy_error* e = b.api->memory_export(&x)) {
    if (e->code == PCY_ERR_UNSUPPORTED && !cuda) { // an OpenCL buffer without a host pointer
      e->destroy(e);
      return to_dlpack_host(t);
    }
    throw_if(e, ("exporting " + impl.describe() + " on " + b.name).c_str());
  }
  // What the plugin claims is checked before anyone is handed it.
  int32_t got_kind = 0;
  static_assert(sizeof got_kind == sizeof h.kind);
  std::memcpy(&got_kind, &h.kind, sizeof got_kind);
  void* data =
      cuda ? reinterpret_cast<void*>(static_cast<uintptr_t>(h.cuda_pointer)) : h.host_pointer;
  if (got_kind != static_cast<int32_t>(x.kind) || data == nullptr || h.bytes < impl.bytes)
    throw error(errc::plugin, b.framework->name(),
                "memory_export returned a handle of another kind, a null pointer or fewer bytes "
                "than the tensor has");
  return make_managed(impl, data,
                      cuda ? DLDevice{kDLCUDA, static_cast<int32_t>(b.dev->plugin_device)}
                           : DLDevice{kDLCPU, 0});
}

TensorStorage from_dlpack(DLManagedTensor* m, const Backend* backend,
                          const DLPackImportOptions& options) {
  if (m == nullptr) throw error(errc::invalid_argument, origin, "a null DLManagedTensor");
  const DLTensor& d = m->dl_tensor;
  if (d.ndim < 0 || d.ndim > max_dims)
    throw error(errc::invalid_argument, origin,
                "ndim " + std::to_string(d.ndim) + " is out of range (0 to " +
                    std::to_string(max_dims) + ")");
  if (d.ndim > 0 && d.shape == nullptr)
    throw error(errc::invalid_argument, origin, "a tensor of rank > 0 without a shape");
  const pcy_dtype dtype = dtype_from_dlpack(d.dtype);
  const uint64_t elem = sdk::dtype_size(dtype);
  std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
  TensorStorage t(dtype, shape); // checks every dimension and the element and byte counts
  TensorStorage::Impl& impl = t.impl();
  const uint64_t count = impl.count;

  // The layout: dense row-major (NULL strides say so), else refused or copied.
  bool dense = true;
  if (d.strides != nullptr && count > 0) {
    int64_t want = 1;
    for (int32_t i = d.ndim; i-- > 0;) {
      if (shape[static_cast<size_t>(i)] != 1 && d.strides[i] != want) dense = false;
      want *= shape[static_cast<size_t>(i)];
    }
  }
  if (count > 0 && d.data == nullptr)
    throw error(errc::invalid_argument, origin, "a non-empty tensor with a null data pointer");
  char* base = static_cast<char*>(d.data) + d.byte_offset;
  if (count > 0 && reinterpret_cast<uintptr_t>(base) % elem != 0)
    throw error(errc::invalid_argument, origin,
                "the data pointer plus byte_offset " + std::to_string(d.byte_offset) +
                    " is not aligned to the element size (" + std::to_string(elem) + " bytes)");
  const bool host = d.device.device_type == kDLCPU || d.device.device_type == kDLCUDAHost;
  const bool cuda = d.device.device_type == kDLCUDA;
  if (!host && !cuda)
    throw error(errc::unsupported, origin,
                "tensors on " + device_name(d.device) +
                    " cannot be imported: parenchyma imports host memory (kDLCPU) and CUDA "
                    "device memory (kDLCUDA)");

  if (!dense) {
    std::string strides = "[";
    for (int32_t i = 0; i < d.ndim; ++i)
      strides += (i ? ", " : "") + std::to_string(d.strides[i]);
    strides += "]";
    if (!options.make_dense || !host)
      throw error(errc::invalid_argument, origin,
                  "the strides " + strides +
                      " (in elements) are not dense row-major: parenchyma's ops take dense "
                      "tensors; make the array contiguous first" +
                      (host ? std::string(", or import with make_dense (a copy)")
                            : std::string(" (device memory is not made dense here)")));
    // A gather into a dense tensor of our own; then the producer's tensor is released.
    auto* out = static_cast<char*>(impl.host_access(access::write_only));
    std::vector<int64_t> idx(static_cast<size_t>(d.ndim), 0);
    for (uint64_t n = 0; n < count; ++n) {
      int64_t off = 0;
      for (int32_t i = 0; i < d.ndim; ++i)
        off += idx[static_cast<size_t>(i)] * d.strides[i];
      std::memcpy(out + n * elem, base + off * static_cast<int64_t>(elem), elem);
      for (int32_t i = d.ndim; i-- > 0;) {
        if (++idx[static_cast<size_t>(i)] < shape[static_cast<size_t>(i)]) break;
        idx[static_cast<size_t>(i)] = 0;
      }
    }
    if (m->deleter) m->deleter(m);
    impl.read_only = options.read_only;
    return t;
  }

  // From here on nothing can fail before the slot owns the producer's tensor.
  if (host) {
    Slot s;
    s.host_ptr = base;
    s.group = impl.new_group();
    impl.slots.push_back(std::move(s));
    impl.host = static_cast<int>(impl.slots.size() - 1);
    impl.valid = uint64_t{1} << impl.slots.back().group;
    impl.slots.back().keep = std::shared_ptr<DLManagedTensor>(m, [](DLManagedTensor* p) {
      if (p->deleter) p->deleter(p);
    });
    impl.read_only = options.read_only;
    impl.external = true; // the program may touch the array between ops
    set_extent(impl, d.device, base);
    return t;
  }

  // kDLCUDA: a slot of a cuda backend of that device.
  std::optional<Backend> own;
  if (backend == nullptr) {
    own.emplace("cuda:" + std::to_string(d.device.device_id));
    backend = &*own;
  }
  BackendImpl& b = backend->impl();
  if (!is_cuda(b) || static_cast<int32_t>(b.dev->plugin_device) != d.device.device_id)
    throw error(errc::invalid_argument, origin,
                "a tensor on " + device_name(d.device) + " cannot be imported into " + b.name +
                    ": pass a cuda backend of that device");
  if (b.api->memory_import == nullptr)
    throw error(errc::unsupported, b.framework->name(), "the plugin imports no memory handles");
  pcy_memory_handle h{};
  h.struct_size = sizeof h;
  h.kind = PCY_HANDLE_CUDA_DEVICE_POINTER;
  h.cuda_pointer = reinterpret_cast<uintptr_t>(base);
  h.bytes = impl.bytes == 0 ? elem : impl.bytes;
  pcy_memory_import_args im{};
  im.struct_size = sizeof im;
  im.context = b.dev->context;
  im.device = 0;
  im.handle = &h;
  throw_if(b.api->memory_import(&im), ("importing " + impl.describe() + " into " + b.name).c_str());
  if (im.memory == nullptr)
    throw error(errc::plugin, b.framework->name(),
                "memory_import reported success but returned no memory");
  Slot s;
  s.ctx = b.dev;
  s.memory = im.memory;
  try {
    s.group = impl.new_group();
  } catch (...) {
    b.api->memory_free(im.memory);
    throw;
  }
  s.native = native_of(*b.dev, im.memory);
  s.keep = std::shared_ptr<DLManagedTensor>(m, [](DLManagedTensor* p) {
    if (p->deleter) p->deleter(p);
  });
  impl.slots.push_back(std::move(s));
  impl.valid = uint64_t{1} << impl.slots.back().group;
  impl.read_only = options.read_only;
  set_extent(impl, d.device, base);
  return t;
}

DLManagedTensorVersioned* to_dlpack_versioned(TensorStorage& t, const Backend& backend,
                                              const DLPackExportOptions& options) {
  return as_versioned(to_dlpack(t, backend, options));
}

DLManagedTensorVersioned* to_dlpack_versioned_host(TensorStorage& t) {
  return as_versioned(to_dlpack_host(t));
}

TensorStorage from_dlpack(DLManagedTensorVersioned* m, const Backend* backend,
                          const DLPackImportOptions& options) {
  if (m == nullptr) throw error(errc::invalid_argument, origin, "a null DLManagedTensorVersioned");
  if (m->version.major != DLPACK_MAJOR_VERSION) {
    const std::string got =
        std::to_string(m->version.major) + "." + std::to_string(m->version.minor);
    if (m->deleter != nullptr) m->deleter(m); // a struct we cannot read: released, as DLPack asks
    throw error(errc::unsupported, origin,
                "a DLManagedTensorVersioned of DLPack " + got + ": this library speaks DLPack " +
                    std::to_string(DLPACK_MAJOR_VERSION) +
                    ".x; the tensor was released (its deleter called) as the DLPack rules ask");
  }
  // The unversioned path does the work through an adapter that owns `m` once the import took it.
  struct Adapter {
    DLManagedTensor managed{};
    DLManagedTensorVersioned* inner = nullptr;
    static void deleter(DLManagedTensor* self) noexcept {
      auto* a = static_cast<Adapter*>(self->manager_ctx);
      DLManagedTensorVersioned* inner = a->inner;
      delete a;
      if (inner->deleter != nullptr) inner->deleter(inner);
    }
  };
  auto a = std::make_unique<Adapter>();
  a->managed.dl_tensor = m->dl_tensor;
  a->managed.manager_ctx = a.get();
  a->managed.deleter = &Adapter::deleter;
  a->inner = m;
  DLPackImportOptions o = options;
  o.read_only = o.read_only || (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  TensorStorage t = from_dlpack(&a->managed, backend, o); // on error `m` stays the caller's
  (void)a.release();                                      // now owned through the slot
  return t;
}

} // namespace v1
} // namespace parenchyma
