// parenchyma native plugin: aligned host allocations, and host pointers shared without copying.
#include "native.hpp"

#include <parenchyma/sdk/os.hpp>

#include <cstdlib>
#include <cstring>

namespace parenchyma::native {

namespace {
constexpr uint64_t alignment = 64;
}

memory::~memory() {
  if (owned_) sdk::os::aligned_free(ptr);
}

void memory::check_range(uint64_t offset, uint64_t bytes, const char* what) const {
  if (offset > size || bytes > size - offset)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str(what, " of ", bytes, " bytes at offset ", offset,
                                                 " is outside the ", size, "-byte allocation"));
}

bool memory::export_to(pcy_handle_kind kind, pcy_memory_handle& h) {
  if (kind != PCY_HANDLE_HOST_POINTER) return false;
  h.host_pointer = ptr;
  h.bytes = size;
  return true;
}

memory* context::alloc(uint32_t device, uint64_t bytes, uint32_t) {
  if (device != 0)
    sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("device ", device, " is not in this context"));
  if (plugin_.memory_bytes() != 0 && bytes > plugin_.memory_bytes())
    sdk::fail(PCY_ERR_OUT_OF_MEMORY, sdk::str("allocation of ", bytes, " bytes exceeds the host's ",
                                              plugin_.memory_bytes(), " bytes of memory"));
  const uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* p = sdk::os::aligned_alloc(alignment, rounded);
  if (p == nullptr)
    sdk::fail(PCY_ERR_OUT_OF_MEMORY, sdk::str("host allocation of ", bytes, " bytes failed"));
  return new memory(p, bytes, true);
}

memory* context::import(uint32_t device, const pcy_memory_handle& h) {
  if (device != 0)
    sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("device ", device, " is not in this context"));
  if (h.kind != PCY_HANDLE_HOST_POINTER || h.host_pointer == nullptr)
    sdk::fail(PCY_ERR_UNSUPPORTED, "the native framework imports host pointers only");
  return new memory(h.host_pointer, h.bytes, false);
}

} // namespace parenchyma::native
