// The CUDA plugin's one exported symbol: the SDK adapter's table over our classes, with the
// native-handle slot wrapped so that CUdevice 0 (a valid device, but a NULL void*) is returned.
#include "plugin.hpp"

namespace {
using adapter = parenchyma::sdk::framework_adapter<parenchyma::cuda::plugin>;

pcy_error* native_handle(pcy_native_handle_args* a) noexcept {
  if (a != nullptr && a->struct_size >= sizeof(pcy_native_handle_args) &&
      a->object == PCY_NATIVE_DEVICE) {
    return parenchyma::sdk::guard(parenchyma::cuda::plugin::info.name, [&] {
      auto* c = reinterpret_cast<parenchyma::cuda::context*>(a->context);
      if (c == nullptr) parenchyma::sdk::fail(PCY_ERR_INVALID_ARGUMENT, "context is NULL");
      a->handle = c->native_device(a->device);
    });
  }
  return adapter::native_handle(a);
}

constexpr pcy_framework_api make_table() noexcept {
  pcy_framework_api t = adapter::table;
  t.native_handle = &native_handle;
  return t;
}
constexpr pcy_framework_api table = make_table();
} // namespace

extern "C" PCY_EXPORT const pcy_framework_api* pcy_framework_entry(void) { return &table; }
