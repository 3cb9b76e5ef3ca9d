// parenchyma core: SharedTensor's storage — slots per device, lazy coherence by access intent,
// and the transfer routes (zero-copy alias, same-framework copy, host staging).
#include "tensor_impl.hpp"

#include <parenchyma/sdk/common.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <utility>

namespace parenchyma {
inline namespace v1 {

namespace {

uint64_t element_size(pcy_dtype t) {
  const size_t n = sdk::dtype_size(t); // the SDK's one table of dtypes
  if (n == 0) throw error(errc::invalid_argument, "SharedTensor", "unknown dtype");
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i == 16) return s + ", ... (" + std::to_string(shape.size()) + " dimensions)]";
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

// The element count of a shape, refusing negative dimensions and any product (elements or
// bytes) that does not fit: a wrapped count would back a huge tensor with a tiny buffer.
uint64_t element_count(const std::vector<int64_t>& shape, pcy_dtype dtype) {
  if (shape.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw error(errc::invalid_argument, "SharedTensor", "too many dimensions");
  uint64_t n = 1;
  for (int64_t d : shape)
    if (d < 0)
      throw error(errc::invalid_argument, "SharedTensor",
                  "negative dimension " + std::to_string(d) + " in the shape " +
                      shape_string(shape));
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n) ||
        n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw error(errc::invalid_argument, "SharedTensor",
                  "the shape " + shape_string(shape) +
                      " has more elements than fit in 63 bits: check the dimensions");
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n, element_size(dtype), &bytes) ||
      bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw error(errc::invalid_argument, "SharedTensor",
                "the shape " + shape_string(shape) + " needs more bytes than fit in 63 bits");
  return n;
}

// pcy_error -> exception, except UNSUPPORTED which the caller treats as "try another route".
bool unsupported_or_throw(pcy_error* e, const char* what) {
  if (e == nullptr) return false;
  if (e->code == PCY_ERR_UNSUPPORTED) {
    e->destroy(e);
    return true;
  }
  throw_if(e, what);
  return false;
}

constexpr uint64_t host_alignment = 4096;

} // namespace

void* native_of(const DeviceContext& c, pcy_memory m) {
  if (c.api->native_handle == nullptr) return nullptr;
  pcy_native_handle_args a{};
  a.struct_size = sizeof a;
  a.object = PCY_NATIVE_MEMORY;
  a.context = c.context;
  a.memory = m;
  if (pcy_error* e = c.api->native_handle(&a)) {
    e->destroy(e);
    return nullptr;
  }
  return a.handle;
}

TensorStorage::Impl::~Impl() { release(); }

std::string TensorStorage::Impl::describe() const {
  return shape_string(shape) + " " + sdk::dtype_name(dtype);
}

void TensorStorage::Impl::release() {
  for (const auto& b : in_flight)
    if (pcy_error* e = b->api->queue_finish(b->queue)) e->destroy(e);
  if (!in_flight.empty()) host_synchronised();
  external = false;
  extent_space = 0;
  extent_lo = extent_hi = 0;
  in_flight.clear();
  while (!slots.empty()) { // newest first: an alias goes before what it aliases
    Slot& s = slots.back();
    if (!s.hold) {
      if (s.ctx && s.memory != nullptr && !detail::inherited(*s.ctx->registry))
        s.ctx->api->memory_free(s.memory);
      if (s.owns_host) sdk::os::aligned_free(s.host_ptr);
    }
    slots.pop_back();
  }
  last_backend = nullptr;
  last_slot = -1;
  host = -1;
  valid = 0;
  next_group = 0;
  ++generation; // a graph that captured a slot of it refuses to replay
}

SlotHold::~SlotHold() {
  if (ctx && memory != nullptr && !detail::inherited(*ctx->registry)) ctx->api->memory_free(memory);
  sdk::os::aligned_free(host_alloc);
  keep.reset(); // after the memory that may wrap its bytes
}

std::vector<std::shared_ptr<SlotHold>> TensorStorage::Impl::share_slots() {
  std::vector<std::shared_ptr<SlotHold>> holds;
  holds.reserve(slots.size());
  for (Slot& s : slots) {
    if (!s.hold) {
      auto h = std::make_shared<SlotHold>();
      h->ctx = s.ctx;
      h->memory = s.memory;
      h->host_alloc = s.owns_host ? s.host_ptr : nullptr;
      h->keep = std::move(s.keep);
      s.owns_host = false;
      s.hold = std::move(h);
    }
    holds.push_back(s.hold);
  }
  return holds;
}

void TensorStorage::Impl::refuse_write(const char* where) const {
  throw error(errc::invalid_argument, "SharedTensor",
              "writing " + describe() + " " + where +
                  ", but it was imported read-only (a read-only DLPack tensor): copy it into a "
                  "tensor of its own first");
}

int TensorStorage::Impl::new_group() {
  if (next_group >= 64)
    throw error(errc::unsupported, "SharedTensor",
                "a tensor can hold copies on at most 64 devices");
  return next_group++;
}

void TensorStorage::Impl::settle_except(const BackendImpl* keep) {
  if (in_flight.empty() || (in_flight.size() == 1 && in_flight[0].get() == keep)) return;
  for (size_t i = 0; i < in_flight.size();) {
    if (in_flight[i].get() == keep) {
      ++i;
      continue;
    }
    in_flight[i]->finish();
    in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

int TensorStorage::Impl::make_host_slot() {
  // 1. Alias a device slot whose bytes are host memory (native plugin, CPU OpenCL, pinned).
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& s = slots[i];
    if (!s.ctx || s.memory == nullptr || s.ctx->api->memory_export == nullptr) continue;
    pcy_memory_handle h{};
    h.struct_size = sizeof h;
    pcy_memory_export_args a{};
    a.struct_size = sizeof a;
    a.memory = s.memory;
    a.kind = PCY_HANDLE_HOST_POINTER;
    a.handle = &h;
    if (unsupported_or_throw(s.ctx->api->memory_export(&a), "exporting a host pointer")) continue;
    if (h.host_pointer == nullptr || h.bytes < bytes) continue;
    Slot host_slot;
    host_slot.host_ptr = h.host_pointer;
    host_slot.group = s.group;
    slots.push_back(std::move(host_slot));
    ++stats.aliases;
    return host = static_cast<int>(slots.size() - 1);
  }
  // 2. Pinned memory from a plugin that offers it, when asked for.
  const uint64_t alloc_bytes = bytes == 0 ? host_alignment : bytes;
  if (pinned_host) {
    for (size_t i = 0; i < slots.size(); ++i) {
      const std::shared_ptr<DeviceContext> b = slots[i].ctx;
      if (!b || b->api->memory_export == nullptr) continue;
      pcy_memory_alloc_args a{};
      a.struct_size = sizeof a;
      a.context = b->context;
      a.device = 0;
      a.bytes = alloc_bytes;
      a.flags = PCY_MEMORY_HOST_PINNED;
      if (pcy_error* e = b->api->memory_alloc(&a)) {
        e->destroy(e);
        continue;
      }
      pcy_memory_handle h{};
      h.struct_size = sizeof h;
      pcy_memory_export_args x{};
      x.struct_size = sizeof x;
      x.memory = a.memory;
      x.kind = PCY_HANDLE_HOST_POINTER;
      x.handle = &h;
      if (pcy_error* e = b->api->memory_export(&x)) {
        e->destroy(e);
        b->api->memory_free(a.memory);
        continue;
      }
      if (h.host_pointer == nullptr || h.bytes < alloc_bytes) {
        b->api->memory_free(a.memory);
        continue;
      }
      Slot host_slot;
      host_slot.ctx = b;
      host_slot.memory = a.memory;
      host_slot.host_ptr = h.host_pointer;
      host_slot.group = new_group();
      slots.push_back(std::move(host_slot));
      return host = static_cast<int>(slots.size() - 1);
    }
  }
  // 3. Plain page-aligned host memory (pages are touched only when written).
  const uint64_t rounded = (alloc_bytes + host_alignment - 1) / host_alignment * host_alignment;
  void* p = sdk::os::aligned_alloc(host_alignment, rounded);
  if (p == nullptr)
    throw error(errc::out_of_memory, "SharedTensor",
                "host allocation of " + std::to_string(rounded) + " bytes failed for " +
                    describe());
  Slot host_slot;
  host_slot.host_ptr = p;
  host_slot.owns_host = true;
  host_slot.group = new_group();
  slots.push_back(std::move(host_slot));
  return host = static_cast<int>(slots.size() - 1);
}

int TensorStorage::Impl::make_device_slot(BackendImpl& b) {
  DeviceContext& c = *b.dev;
  const pcy_framework_api& api = *c.api;
  // A fresh tensor gets its host copy first, so that devices sharing host memory can alias it.
  if (slots.empty() && api.memory_import != nullptr && c.shares_host) make_host_slot();

  // 1. Zero-copy: import a handle exported by an existing slot. Host memory is aliased only into
  //    devices that share it (CPUs, host-unified devices): a discrete GPU reading host memory
  //    over the bus is slower than a copy, so it gets device memory (fast from pinned memory).
  const uint64_t need = bytes == 0 ? host_alignment : bytes;
  if (api.memory_import != nullptr) {
    for (size_t i = 0; i < slots.size(); ++i) {
      const Slot& s = slots[i];
      static constexpr pcy_handle_kind kinds[] = {
          PCY_HANDLE_HOST_POINTER, PCY_HANDLE_CUDA_DEVICE_POINTER, PCY_HANDLE_OPENCL_BUFFER};
      for (pcy_handle_kind kind : kinds) {
        if (kind == PCY_HANDLE_HOST_POINTER && !c.shares_host) continue;
        pcy_memory_handle h{};
        h.struct_size = sizeof h;
        if (!s.ctx || s.memory == nullptr) {
          if (kind != PCY_HANDLE_HOST_POINTER || s.host_ptr == nullptr) continue;
          h.kind = PCY_HANDLE_HOST_POINTER;
          h.host_pointer = s.host_ptr;
          h.bytes = need;
        } else {
          if (s.ctx->api->memory_export == nullptr) break;
          pcy_memory_export_args x{};
          x.struct_size = sizeof x;
          x.memory = s.memory;
          x.kind = kind;
          x.handle = &h;
          if (unsupported_or_throw(s.ctx->api->memory_export(&x), "exporting memory")) continue;
          // What the exporter claims is checked before another plugin is handed it.
          int32_t got_kind = 0; // an enum a plugin wrote: compared as the integer it holds
          static_assert(sizeof got_kind == sizeof h.kind);
          std::memcpy(&got_kind, &h.kind, sizeof got_kind);
          if (got_kind != static_cast<int32_t>(kind) || h.bytes < bytes) continue;
        }
        pcy_memory_import_args im{};
        im.struct_size = sizeof im;
        im.context = c.context;
        im.device = 0;
        im.handle = &h;
        if (unsupported_or_throw(api.memory_import(&im), "importing memory")) continue;
        if (im.memory == nullptr)
          throw error(errc::plugin, c.framework->name(),
                      "memory_import reported success but returned no memory");
        Slot slot;
        slot.ctx = b.dev;
        slot.memory = im.memory;
        slot.native = native_of(c, im.memory);
        slot.group = s.group;
        slots.push_back(std::move(slot));
        ++stats.aliases;
        return static_cast<int>(slots.size() - 1);
      }
    }
  }
  // 2. Fresh device memory.
  pcy_memory_alloc_args a{};
  a.struct_size = sizeof a;
  a.context = c.context;
  a.device = 0;
  a.bytes = bytes == 0 ? 4 : bytes;
  throw_if(api.memory_alloc(&a), ("allocating " + describe() + " on " + c.name).c_str());
  if (a.memory == nullptr)
    throw error(errc::plugin, c.framework->name(),
                "memory_alloc reported success but returned no memory");
  Slot slot;
  slot.ctx = b.dev;
  slot.memory = a.memory;
  slot.native = native_of(c, a.memory);
  try {
    slot.group = new_group();
  } catch (...) {
    api.memory_free(a.memory);
    throw;
  }
  slots.push_back(std::move(slot));
  return static_cast<int>(slots.size() - 1);
}

void TensorStorage::Impl::sync_into(int idx, BackendImpl* via) {
  if (is_valid(slots[static_cast<size_t>(idx)].group) || valid == 0 || bytes == 0) return;
  Slot* dst = &slots[static_cast<size_t>(idx)];
  // The host copy may be plugin memory (pinned); it is still filled by a blocking read below.
  if (idx != host && dst->ctx) {
    BackendImpl& db = *via;
    // 1. A device copy inside one framework.
    if (db.api->memory_copy != nullptr) {
      for (const Slot& s : slots) {
        if (!s.ctx || s.memory == nullptr || !is_valid(s.group) || s.host_ptr != nullptr ||
            s.ctx->framework != db.framework)
          continue;
        pcy_memory_copy_args cp{};
        cp.struct_size = sizeof cp;
        cp.queue = db.queue;
        cp.src = s.memory;
        cp.dst = dst->memory;
        cp.bytes = bytes;
        if (unsupported_or_throw(db.api->memory_copy(&cp), "device copy")) continue;
        ++stats.device_copies;
        stats.bytes_device_copy += bytes;
        valid |= uint64_t{1} << dst->group;
        return;
      }
    }
    // 2. From the host copy; 3. staged through it.
    if (host < 0) {
      make_host_slot();
      dst = &slots[static_cast<size_t>(idx)];
    }
    sync_into(host, nullptr);
    if (is_valid(dst->group)) return; // the host copy aliases dst
    pcy_memory_transfer_args w{};
    w.struct_size = sizeof w;
    w.queue = db.queue;
    w.memory = dst->memory;
    w.host_pointer = slots[static_cast<size_t>(host)].host_ptr;
    w.bytes = bytes;
    w.blocking = false; // the host copy is not touched before this queue is settled
    throw_if(db.api->memory_write(&w), ("copying " + describe() + " to " + db.name).c_str());
    ++stats.host_to_device;
    stats.bytes_to_device += bytes;
    valid |= uint64_t{1} << dst->group;
    return;
  }
  // The host copy: read a valid device slot. Its writers were settled before this, so the
  // read goes through the context's own transfer queue (no backend's queue is borrowed, so a
  // tensor handed to another thread never touches the first thread's queue).
  for (const Slot& s : slots) {
    if (!s.ctx || s.memory == nullptr || !is_valid(s.group)) continue;
    void* to = dst->host_ptr;
    s.ctx->with_transfer_queue([&](pcy_queue q) {
      pcy_memory_transfer_args r{};
      r.struct_size = sizeof r;
      r.queue = q;
      r.memory = s.memory;
      r.host_pointer = to;
      r.bytes = bytes;
      r.blocking = true;
      throw_if(s.ctx->api->memory_read(&r),
               ("copying " + describe() + " from " + s.ctx->name + " to the host").c_str());
    });
    ++stats.device_to_host;
    stats.bytes_to_host += bytes;
    valid |= uint64_t{1} << dst->group;
    return;
  }
  throw error(errc::internal, "SharedTensor", "no valid copy to read " + describe() + " from");
}

pcy_memory TensorStorage::Impl::device(BackendImpl& b, access intent) {
  return device(b, intent, nullptr);
}

pcy_memory TensorStorage::Impl::device_slow(BackendImpl& b, access intent, void** native,
                                            std::vector<Writeback>* writebacks) {
  detail::check_fork(*b.registry, "device access to a tensor");
  if (read_only && intent != access::read) refuse_write(("on " + b.name).c_str());
  settle_except(&b);
  int idx = find(b.dev.get());
  if (idx < 0) idx = make_device_slot(b);
  const int group = slots[static_cast<size_t>(idx)].group;
  // A device copy that stands apart from an imported host array: the program may have written
  // the array since the copy was made (it synchronised since), so the array is read again.
  const bool apart = external && host >= 0 && slots[static_cast<size_t>(host)].group != group;
  if (apart && intent != access::write_only && is_valid(slots[static_cast<size_t>(host)].group) &&
      external_epoch != host_epoch())
    valid &= ~(uint64_t{1} << group);
  if (intent != access::write_only) {
    if (valid == 0)
      throw error(errc::uninitialized, "SharedTensor",
                  "reading " + describe() + " on " + b.name +
                      ", but nothing was ever written to it: write it first (write()/write_only() "
                      "on the host, or pass it as an op output)");
    if (!is_valid(group)) sync_into(idx, &b);
  }
  if (intent != access::read) valid = uint64_t{1} << group;
  bool listed = false;
  for (const auto& f : in_flight)
    listed = listed || f.get() == &b;
  if (!listed) in_flight.push_back(b.self.lock());
  const Slot& slot = slots[static_cast<size_t>(idx)];
  // The short path (device()) is for slots that need nothing of this: an apart slot comes here.
  last_backend = apart ? nullptr : &b;
  last_slot = idx;
  if (apart) {
    external_epoch = host_epoch();
    if (intent != access::read && writebacks != nullptr) writebacks->push_back({this, idx});
  }
  if (native != nullptr) *native = slot.native;
  return slot.memory;
}

namespace {
std::atomic<uint64_t> host_epoch_count{1};
} // namespace
uint64_t host_epoch() noexcept { return host_epoch_count.load(std::memory_order_relaxed); }
void host_synchronised() noexcept { host_epoch_count.fetch_add(1, std::memory_order_relaxed); }

void BackendImpl::write_back() {
  // Emptied whatever happens: no entry may outlive this op's tensors.
  struct empty_on_exit {
    std::vector<Writeback>& list;
    ~empty_on_exit() { list.clear(); }
  } guard{writebacks};
  // The arrays change: every other device copy of an imported array (another import of the same
  // buffer, say) is read again before its next use, on its queue after these copies.
  host_synchronised();
  const uint64_t epoch = host_epoch();
  for (const Writeback& w : writebacks) {
    TensorStorage::Impl& t = *w.tensor;
    if (t.host < 0 || w.slot < 0 || static_cast<size_t>(w.slot) >= t.slots.size()) continue;
    const Slot& from = t.slots[static_cast<size_t>(w.slot)];
    const Slot& to = t.slots[static_cast<size_t>(t.host)];
    if (!t.is_valid(from.group) || t.bytes == 0) continue;
    pcy_memory_transfer_args r{};
    r.struct_size = sizeof r;
    r.queue = queue;
    r.memory = from.memory;
    r.host_pointer = to.host_ptr;
    r.bytes = t.bytes;
    r.blocking = false; // ordered after the op on its queue; the host waits at synchronisation
    throw_if(api->memory_read(&r),
             ("writing " + t.describe() + " back into its imported host array").c_str());
    ++t.stats.device_to_host;
    t.stats.bytes_to_host += t.bytes;
    t.valid |= uint64_t{1} << to.group;
    t.external_epoch = epoch;
  }
}

void* TensorStorage::Impl::host_access(access intent) {
  detail::check_fork_of(*this, "host access to a tensor");
  if (read_only && intent != access::read) refuse_write("on the host");
  host_synchronised();
  for (const auto& b : in_flight)
    if (b->recorder != nullptr) [[unlikely]]
      throw error(errc::invalid_argument, "SharedTensor",
                  "host access to " + describe() + " while " + b->name +
                      " records a graph that uses it: the recorded ops have not run yet; touch "
                      "it on the host before recording or after it");
  settle_except(nullptr);
  if (host < 0) make_host_slot();
  const Slot& h = slots[static_cast<size_t>(host)];
  if (intent == access::read && valid == 0)
    throw error(errc::uninitialized, "SharedTensor",
                "reading " + describe() +
                    " on the host, but nothing was ever written to it: write it first");
  if (intent != access::write_only) sync_into(host, nullptr);
  if (intent != access::read) valid = uint64_t{1} << h.group;
  last_backend = nullptr;
  return slots[static_cast<size_t>(host)].host_ptr;
}

// ---------------------------------------------------------------------------------------------
// A moved-from TensorStorage has no Impl: it reads as an empty tensor ([0], 0 elements) of its
// dtype, and any use that needs storage gives it a fresh empty one (valid, like std::vector).
namespace {
const std::vector<int64_t>& empty_shape() {
  static const std::vector<int64_t> s{0};
  return s;
}
} // namespace

TensorStorage::Impl& TensorStorage::ensure() {
  if (!impl_) {
    impl_ = std::make_shared<Impl>();
    impl_->dtype = dtype_;
    impl_->shape = {0};
  }
  return *impl_;
}

TensorStorage::TensorStorage(pcy_dtype dtype, std::vector<int64_t> shape) : dtype_(dtype) {
  const uint64_t n = element_count(shape, dtype);
  count_ = n;
  impl_ = std::make_shared<Impl>();
  impl_->dtype = dtype;
  impl_->count = n;
  impl_->bytes = n * element_size(dtype);
  impl_->shape = std::move(shape);
}
TensorStorage::~TensorStorage() {
  if (impl_) impl_->orphaned = true; // a graph may still hold it: its replays refuse
}
TensorStorage::TensorStorage(TensorStorage&& o) noexcept
    : dtype_(o.dtype_), count_(std::exchange(o.count_, 0)), impl_(std::move(o.impl_)) {}
TensorStorage& TensorStorage::operator=(TensorStorage&& o) noexcept {
  if (this != &o) {
    dtype_ = o.dtype_;
    count_ = std::exchange(o.count_, 0);
    if (impl_) impl_->orphaned = true;
    impl_ = std::move(o.impl_);
  }
  return *this;
}

const std::vector<int64_t>& TensorStorage::shape() const noexcept {
  return impl_ ? impl_->shape : empty_shape();
}
uint64_t TensorStorage::bytes() const noexcept { return impl_ ? impl_->bytes : 0; }
bool TensorStorage::initialized() const noexcept { return impl_ && impl_->valid != 0; }
bool TensorStorage::read_only() const noexcept { return impl_ && impl_->read_only; }
bool TensorStorage::same_memory_as(const TensorStorage& o) const noexcept {
  if (this == &o) return true;
  if (!impl_ || !o.impl_ || impl_->extent_space == 0) return false;
  return impl_->extent_space == o.impl_->extent_space && impl_->extent_lo == o.impl_->extent_lo &&
         impl_->extent_hi == o.impl_->extent_hi;
}
bool TensorStorage::shares_memory_with(const TensorStorage& o) const noexcept {
  if (this == &o) return count_ != 0;
  if (!impl_ || !o.impl_ || impl_->extent_space == 0) return false;
  const Impl& a = *impl_;
  const Impl& b = *o.impl_;
  return a.extent_space == b.extent_space && a.extent_lo < b.extent_hi && b.extent_lo < a.extent_hi;
}

void TensorStorage::reshape(std::vector<int64_t> shape) {
  Impl& i = ensure();
  const uint64_t n = element_count(shape, dtype_);
  if (n != i.count)
    throw error(errc::invalid_argument, "SharedTensor",
                "reshape from " + shape_string(i.shape) + " (" + std::to_string(i.count) +
                    " elements) to " + shape_string(shape) + " (" + std::to_string(n) +
                    " elements): the element count must stay the same; use resize() to change it");
  i.shape = std::move(shape);
  ++i.generation;
}

void TensorStorage::resize(std::vector<int64_t> shape) {
  const uint64_t n = element_count(shape, dtype_); // checked before anything is dropped
  Impl& i = ensure();
  i.release();
  i.read_only = false; // a fresh tensor of its own
  i.shape = std::move(shape);
  i.count = n;
  i.bytes = n * element_size(dtype_);
  count_ = n;
}

void* TensorStorage::host(access intent) { return ensure().host_access(intent); }
const void* TensorStorage::host_read() const {
  return const_cast<TensorStorage*>(this)->ensure().host_access(access::read);
}
pcy_memory TensorStorage::device(const Backend& backend, access intent) {
  return ensure().device(backend.impl(), intent);
}
pcy_memory TensorStorage::device(BackendImpl& backend, access intent) {
  return ensure().device(backend, intent);
}
void TensorStorage::prefer_pinned_host(bool pinned) { ensure().pinned_host = pinned; }
const TransferStats& TensorStorage::stats() const noexcept {
  static const TransferStats none{};
  return impl_ ? impl_->stats : none;
}
void TensorStorage::reset_stats() noexcept {
  if (impl_) impl_->stats = {};
}
size_t TensorStorage::slot_count() const noexcept {
  if (!impl_) return 0;
  size_t n = 0;
  for (const Slot& s : impl_->slots)
    n += (s.ctx && s.host_ptr == nullptr) ? 1 : 0;
  return n;
}

// ---- half types ------------------------------------------------------------------------------
uint16_t f16::from_float(float v) noexcept {
  uint32_t x = 0;
  std::memcpy(&x, &v, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant != 0 ? 0x200u : 0)); // inf/NaN
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u); // overflow: inf
  if (e <= 0) {                                              // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; // may carry into the exponent: right
  return static_cast<uint16_t>(sign | h);
}

float f16::to_float(uint16_t h) noexcept {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else { // subnormal: normalise
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float v;
  std::memcpy(&v, &x, 4);
  return v;
}

uint16_t bf16::from_float(float v) noexcept {
  uint32_t x = 0;
  std::memcpy(&x, &v, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u); // NaN
  x += 0x7fffu + ((x >> 16) & 1u); // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

float bf16::to_float(uint16_t h) noexcept {
  const uint32_t x = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &x, 4);
  return v;
}

} // namespace v1
} // namespace parenchyma
