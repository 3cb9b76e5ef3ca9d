// parenchyma: SharedTensor — an n-d array with lazily coherent copies on every device it visits.
//
// Each device the tensor visits gets a memory slot owned by that device's plugin. Access intent
// decides what moves: read syncs a stale slot; write syncs, then marks every other slot stale;
// write_only skips the sync. Reading a tensor nobody wrote is an error. Moving data between two
// slots takes the cheapest route: a zero-copy alias (import of an exported handle), a device copy
// inside one framework, or host staging. Transfer counters record every route taken.
//
// Threads (docs/threads.md): a tensor is used from one thread at a time, like std::vector —
// including const access, which may sync. Handing it to another thread (with the usual
// happens-before: a join, a mutex, a future) is fine, also to a backend of another thread: the
// tensor waits for the queues that last used it before another queue or the host touches it.
// Distinct tensors may be used from distinct threads at once, on any backends.
//
// Shapes: every dimension >= 0 and the element and byte counts must fit in 63 bits, else
// errc::invalid_argument (nothing is allocated). A moved-from tensor is valid: it reads as an
// empty tensor of shape [0] and may be resized or assigned.
#pragma once

#include <parenchyma/export.hpp>

#include <parenchyma/backend.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace parenchyma {
inline namespace v1 {

enum class access { read, write, write_only };

struct TransferStats {
  uint64_t aliases = 0;        // slots created as zero-copy aliases of another slot
  uint64_t device_copies = 0;  // same-framework device-to-device copies
  uint64_t host_to_device = 0; // writes from the host copy into a device slot
  uint64_t device_to_host = 0; // reads from a device slot into the host copy
  uint64_t bytes_device_copy = 0;
  uint64_t bytes_to_device = 0;
  uint64_t bytes_to_host = 0;
  uint64_t transfers() const noexcept { return device_copies + host_to_device + device_to_host; }
};

// The untyped storage behind SharedTensor<T>; extension front-ends pass it to ops.
class PARENCHYMA_API TensorStorage {
public:
  TensorStorage(pcy_dtype dtype, std::vector<int64_t> shape);
  ~TensorStorage();
  TensorStorage(TensorStorage&&) noexcept;
  TensorStorage& operator=(TensorStorage&&) noexcept;
  TensorStorage(const TensorStorage&) = delete;
  TensorStorage& operator=(const TensorStorage&) = delete;

  pcy_dtype dtype() const noexcept { return dtype_; } // inline: front-ends ask on every op
  const std::vector<int64_t>& shape() const noexcept;
  uint64_t size() const noexcept { return count_; } // elements
  uint64_t bytes() const noexcept;
  bool initialized() const noexcept; // some slot holds written data
  // Imported read-only (a read-only DLPack tensor): every write access is refused.
  bool read_only() const noexcept;
  // Whether the two tensors are one memory: the same tensor (not empty), or byte ranges that
  // overlap in memory both share with the world outside the runtime (two DLPack imports of one
  // buffer, overlapping views, an export imported again). Ops that need distinct operands
  // refuse such pairs (ext::checker::distinct).
  bool shares_memory_with(const TensorStorage& other) const noexcept;
  // The same tensor, or two imports of exactly the same bytes.
  bool same_memory_as(const TensorStorage& other) const noexcept;

  // Same element count, new shape; data kept. Throws errc::invalid_argument otherwise.
  void reshape(std::vector<int64_t> shape);
  // Any shape; drops the data and every slot (the tensor becomes uninitialised).
  void resize(std::vector<int64_t> shape);

  // Host access; the pointer is valid until the next access with another intent or device.
  void* host(access intent);
  const void* host_read() const;
  // Device access on a backend: the plugin memory holding the tensor there, after the sync.
  pcy_memory device(const Backend& backend, access intent);
  pcy_memory device(BackendImpl& backend, access intent);

  // Asks for the host copy to be pinned (page-locked) where a plugin offers it. Drops nothing.
  void prefer_pinned_host(bool pinned);

  const TransferStats& stats() const noexcept;
  void reset_stats() noexcept;
  // How many device slots the tensor has (the host copy not counted).
  size_t slot_count() const noexcept;

  struct Impl;
  Impl& impl() { return impl_ ? *impl_ : ensure(); }
  // The state itself, shared: a Graph that captured the tensor holds it (core use).
  std::shared_ptr<Impl> shared_impl() {
    ensure_impl();
    return impl_;
  }

private:
  Impl& ensure(); // a moved-from tensor gets a fresh, empty Impl
  void ensure_impl() {
    if (!impl_) ensure();
  }
  pcy_dtype dtype_;
  uint64_t count_ = 0;         // the element count, kept beside Impl's so it reads without a call
  std::shared_ptr<Impl> impl_; // shared only with the graphs that captured the tensor
};

// The half types (ABI 1.1), as 16-bit storage with conversions to and from float: what tensor
// cores and today's models use. Arithmetic happens on the devices (or after converting).
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float v) noexcept : bits(from_float(v)) {}
  explicit operator float() const noexcept { return to_float(bits); }
  PARENCHYMA_API static uint16_t from_float(float v) noexcept; // round to nearest even
  PARENCHYMA_API static float to_float(uint16_t h) noexcept;
};
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float v) noexcept : bits(from_float(v)) {}
  explicit operator float() const noexcept { return to_float(bits); }
  PARENCHYMA_API static uint16_t from_float(float v) noexcept; // round to nearest even
  PARENCHYMA_API static float to_float(uint16_t h) noexcept;
};

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr pcy_dtype value = PCY_DTYPE_F32; };
template <> struct dtype_of<double> { static constexpr pcy_dtype value = PCY_DTYPE_F64; };
template <> struct dtype_of<int32_t> { static constexpr pcy_dtype value = PCY_DTYPE_I32; };
template <> struct dtype_of<int64_t> { static constexpr pcy_dtype value = PCY_DTYPE_I64; };
template <> struct dtype_of<uint8_t> { static constexpr pcy_dtype value = PCY_DTYPE_U8; };
template <> struct dtype_of<int8_t> { static constexpr pcy_dtype value = PCY_DTYPE_I8; };
template <> struct dtype_of<int16_t> { static constexpr pcy_dtype value = PCY_DTYPE_I16; };
// bool is one byte on every platform parenchyma builds for (checked below).
template <> struct dtype_of<bool> { static constexpr pcy_dtype value = PCY_DTYPE_BOOL; };
static_assert(sizeof(bool) == 1, "parenchyma's bool dtype is one byte");
template <> struct dtype_of<f16> { static constexpr pcy_dtype value = PCY_DTYPE_F16; };
template <> struct dtype_of<bf16> { static constexpr pcy_dtype value = PCY_DTYPE_BF16; };

template <class T> class SharedTensor {
public:
  using value_type = T;
  static constexpr pcy_dtype dtype = dtype_of<T>::value;

  explicit SharedTensor(std::vector<int64_t> shape) : s_(dtype, std::move(shape)) {}
  SharedTensor(std::initializer_list<int64_t> shape) : s_(dtype, std::vector<int64_t>(shape)) {}

  const std::vector<int64_t>& shape() const noexcept { return s_.shape(); }
  uint64_t size() const noexcept { return s_.size(); }
  bool initialized() const noexcept { return s_.initialized(); }
  void reshape(std::vector<int64_t> shape) { s_.reshape(std::move(shape)); }
  void resize(std::vector<int64_t> shape) { s_.resize(std::move(shape)); }

  // Host views (sync as the intent needs).
  std::span<const T> read() const {
    return {static_cast<const T*>(s_.host_read()), static_cast<size_t>(s_.size())};
  }
  std::span<T> write() {
    return {static_cast<T*>(s_.host(access::write)), static_cast<size_t>(s_.size())};
  }
  std::span<T> write_only() {
    return {static_cast<T*>(s_.host(access::write_only)), static_cast<size_t>(s_.size())};
  }

  // Device memory on a backend (sync as the intent needs).
  pcy_memory read(const Backend& b) const { return s_.device(b, access::read); }
  pcy_memory write(const Backend& b) { return s_.device(b, access::write); }
  pcy_memory write_only(const Backend& b) { return s_.device(b, access::write_only); }

  const TransferStats& stats() const noexcept { return s_.stats(); }
  TensorStorage& storage() noexcept { return s_; }
  const TensorStorage& storage() const noexcept { return s_; }
  operator TensorStorage&() noexcept { return s_; }
  operator const TensorStorage&() const noexcept { return s_; }

private:
  mutable TensorStorage s_;
};

} // namespace v1
} // namespace parenchyma
