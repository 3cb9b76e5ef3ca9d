// parenchyma mock plugin: device memory that is host memory, and host pointers exported and
// imported without copying (when PARENCHYMA_MOCK_SLOTS offers export and import).
#include "mock.hpp"

#include <parenchyma/sdk/os.hpp>

#include <cstdlib>

namespace parenchyma::mock {

namespace {
constexpr uint64_t alignment = 64;
} // namespace

memory::~memory() {
  if (owned_) sdk::os::aligned_free(ptr_);
}

std::byte* memory::at(uint64_t offset, uint64_t bytes, const char* what) const {
  if (offset > bytes_ || bytes > bytes_ - offset)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str(what, " of ", bytes, " bytes at offset ", offset,
                                                 " is outside the ", bytes_, "-byte allocation"));
  return ptr_ + offset;
}

bool memory::export_to(pcy_handle_kind kind, pcy_memory_handle& h) {
  settings::offered(plugin_.config().exports, "memory export");
  if (kind != PCY_HANDLE_HOST_POINTER) return false; // the SDK answers PCY_ERR_UNSUPPORTED
  h.host_pointer = ptr_;
  h.bytes = bytes_;
  h.pinned = pinned_;
  return true;
}

void* memory::native() {
  settings::offered(plugin_.config().natives, "native handles");
  return ptr_;
}

memory* context::alloc(uint32_t device, uint64_t bytes, uint32_t flags) {
  check_device(device);
  const uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded < bytes) // a size near 2^64 wraps when rounded up
    sdk::fail(PCY_ERR_OUT_OF_MEMORY, sdk::str("allocation of ", bytes, " bytes is too large"));
  auto* p = static_cast<std::byte*>(sdk::os::aligned_alloc(alignment, rounded));
  if (p == nullptr)
    sdk::fail(PCY_ERR_OUT_OF_MEMORY, sdk::str("host allocation of ", bytes, " bytes failed"));
  // "Pinned" host memory is what every mock allocation already is: host memory.
  return new memory(p, bytes, true, (flags & PCY_MEMORY_HOST_PINNED) != 0, plugin_);
}

memory* context::import(uint32_t device, const pcy_memory_handle& h) {
  settings::offered(plugin_.config().imports, "memory import");
  check_device(device);
  if (h.kind != PCY_HANDLE_HOST_POINTER || h.host_pointer == nullptr || h.bytes == 0)
    sdk::fail(PCY_ERR_UNSUPPORTED, "mock imports host pointers only (a non-empty one)");
  return new memory(static_cast<std::byte*>(h.host_pointer), h.bytes, false, h.pinned, plugin_);
}

} // namespace parenchyma::mock
