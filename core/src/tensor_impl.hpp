// parenchyma core, private: the slots behind a SharedTensor and their coherence state.
#pragma once

#include "internal.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace parenchyma {
inline namespace v1 {

// One copy of the tensor's bytes. The host copy has ctx == nullptr unless it is plugin memory
// (pinned). Slots belong to a device context, not to a backend: every backend on one device
// shares the slot, so handing a tensor from one thread's backend to another's copies nothing.
// Slots that alias the same bytes (a zero-copy import) share a group; validity is per group.
// The bytes of a slot once a DLPack export shares them: freed when the tensor and every
// exported DLManagedTensor let go (a deleter may run on any thread, after the tensor is gone).
struct SlotHold {
  std::shared_ptr<DeviceContext> ctx;
  pcy_memory memory = nullptr;
  void* host_alloc = nullptr; // our aligned allocation
  std::shared_ptr<void> keep; // what the bytes came from (an imported DLManagedTensor)
  SlotHold() = default;
  SlotHold(const SlotHold&) = delete;
  SlotHold& operator=(const SlotHold&) = delete;
  ~SlotHold();
};

struct Slot {
  std::shared_ptr<DeviceContext> ctx; // owner of `memory`; null for plain host memory
  pcy_memory memory = nullptr;        // device memory (or the plugin memory behind host_ptr)
  void* native = nullptr;             // memory's native handle, resolved once (may be NULL)
  void* host_ptr = nullptr;           // host copy: where the bytes are
  bool owns_host = false;             // host_ptr came from our aligned allocation
  int group = 0;
  // Where the bytes came from, released after `memory` (an imported DLManagedTensor).
  std::shared_ptr<void> keep;
  // Set once the slot's bytes were exported: it owns memory/host_ptr/keep instead of the slot.
  std::shared_ptr<SlotHold> hold;
};

// The native handle of a slot's memory, asked once when the slot is made (NULL if none).
void* native_of(const DeviceContext& c, pcy_memory m);

struct TensorStorage::Impl {
  pcy_dtype dtype;
  std::vector<int64_t> shape;
  uint64_t count = 0;
  uint64_t bytes = 0;
  std::vector<Slot> slots; // creation order: an alias is always after what it aliases
  int host = -1;           // index of the host copy in slots
  uint64_t valid = 0;      // bit g: group g holds the latest data
  int next_group = 0;
  bool pinned_host = false;
  bool read_only = false; // imported read-only: every write access is refused
  // The host copy is memory the program owns and may touch directly between ops (an imported
  // host array: from_dlpack of kDLCPU memory). Where a device cannot use it in place, the device
  // copy is refreshed from it before an op reads it if the host synchronised since
  // (`host_epoch`), and every op that writes the tensor there writes the result back into it on
  // the op's queue: the array reads the same at the synchronisation points whatever its
  // address (docs/python.md, "Imported host arrays").
  bool external = false;
  uint64_t external_epoch = 0; // host_epoch() when the device copy and the array last agreed
  // The bytes the tensor shares with memory outside the runtime (an import, or an export that
  // something may import again): overlap with another tensor's extent means the two operands
  // are one memory (checker::distinct). space 0: none; else the DLPack device (type << 32 | id).
  uint64_t extent_space = 0;
  uintptr_t extent_lo = 0, extent_hi = 0;
  // Backends whose queues may still be using this tensor's memory (kept alive until settled).
  std::vector<std::shared_ptr<BackendImpl>> in_flight;
  TransferStats stats;
  // The slot of the last device access: repeated ops on one backend take a short path.
  const BackendImpl* last_backend = nullptr;
  int last_slot = -1;
  // Graphs (graph.cpp): bumped whenever the slots or the shape change (release, reshape); set
  // once no TensorStorage owns it any more (only graphs that captured it hold it).
  uint64_t generation = 0;
  bool orphaned = false;

  ~Impl();
  void release();
  // The device slot in context c (a pinned host copy made there is not one), or -1.
  int find(const DeviceContext* c) const noexcept {
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i].ctx.get() == c && slots[i].host_ptr == nullptr) return static_cast<int>(i);
    return -1;
  }
  bool is_valid(int group) const noexcept { return (valid >> group) & 1u; }
  int new_group();
  void settle_except(const BackendImpl* keep);
  int make_device_slot(BackendImpl& b);
  int make_host_slot();
  // Makes slot `idx` hold the latest data; `via` is the backend whose queue orders a write
  // into a device slot (nullptr for the host copy).
  void sync_into(int idx, BackendImpl* via);
  pcy_memory device(BackendImpl& b, access intent);
  // The same, with the memory's native handle (for op tensor descriptors). The short path (the
  // same backend as last time, nothing else in flight, no sync needed) is inline: Backend::invoke
  // takes it for every tensor of a repeated op; device_slow does the rest.
  pcy_memory device(BackendImpl& b, access intent, void** native) {
    if (last_backend == &b && in_flight.size() == 1 && in_flight[0].get() == &b) [[likely]] {
      const Slot& s = slots[static_cast<size_t>(last_slot)];
      if ((intent == access::write_only || is_valid(s.group)) &&
          (intent == access::read || !read_only)) {
        if (intent != access::read) valid = uint64_t{1} << s.group;
        if (native != nullptr) *native = s.native;
        return s.memory;
      }
    }
    return device_slow(b, intent, native);
  }
  pcy_memory device_slow(BackendImpl& b, access intent, void** native,
                         std::vector<Writeback>* writebacks = nullptr);
  // For an op's packing: the same, and a tensor whose device copy stands apart from an imported
  // host array is listed in `writebacks`, which the op's caller writes back after the op.
  pcy_memory device_for_op(BackendImpl& b, access intent, void** native,
                           std::vector<Writeback>& writebacks) {
    // last_backend is set only for a slot that uses the array in place (device_slow).
    if (!external || last_backend == &b) [[likely]]
      return device(b, intent, native);
    return device_slow(b, intent, native, &writebacks);
  }
  void* host_access(access intent);
  std::string describe() const;
  void refuse_write(const char* where) const; // throws: the tensor is read-only
  // Every slot's bytes shared with an export (see SlotHold); the holds, creation order.
  std::vector<std::shared_ptr<SlotHold>> share_slots();
};

} // namespace v1
} // namespace parenchyma
