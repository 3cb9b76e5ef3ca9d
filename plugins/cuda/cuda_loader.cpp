// Loads libcuda.so.1 and resolves the driver entry points once (see cuda_loader.hpp).
#include "cuda_loader.hpp"

#include <parenchyma/sdk/library.hpp>

#include <cstdio>
#include <cstdlib>

namespace parenchyma::cuda {

namespace {
using get_proc_fn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                 CUdriverProcAddressQueryResult*);
using version_fn = CUresult (*)(int*);

std::string cuda_version_text(int v) { return sdk::str(v / 1000, ".", (v % 1000) / 10); }
} // namespace

std::string safe_getenv(const char* name) {
  const char* v = sdk::os::secure_getenv(name); // set-uid: never trust the environment
  return v ? std::string(v) : std::string();
}

std::string pretty_bytes(uint64_t bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else if (v == static_cast<double>(static_cast<uint64_t>(v)))
    std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

pcy_status status_of(CUresult r) noexcept {
  switch (r) {
  case CUDA_SUCCESS: return PCY_OK;
  case CUDA_ERROR_OUT_OF_MEMORY: return PCY_ERR_OUT_OF_MEMORY;
  case CUDA_ERROR_INVALID_VALUE:
  case CUDA_ERROR_INVALID_HANDLE: return PCY_ERR_INVALID_ARGUMENT;
  case CUDA_ERROR_NOT_FOUND: return PCY_ERR_NOT_FOUND;
  case CUDA_ERROR_NOT_SUPPORTED: return PCY_ERR_UNSUPPORTED;
  case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
  case CUDA_ERROR_INVALID_IMAGE:
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return PCY_ERR_LAUNCH;
  case CUDA_ERROR_NO_DEVICE:
  case CUDA_ERROR_STUB_LIBRARY:
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return PCY_ERR_UNAVAILABLE;
  default: return PCY_ERR_DEVICE;
  }
}

driver::driver(const std::string& library, const sdk::settings& settings) {
  std::string path = library;
  if (path.empty()) path = settings.get("PARENCHYMA_CUDA_DRIVER");
  const bool default_path = path.empty();
  if (default_path) path = sdk::os::cuda_driver_library; // libcuda.so.1, nvcuda.dll

  sdk::os::library lib;
  if (const std::string why = lib.open(sdk::os::path_from_utf8(path)); !why.empty()) {
    reason_ = default_path ? sdk::str(path, " not found: no NVIDIA driver installed (", why, ")")
                           : sdk::str(path, " (PARENCHYMA_CUDA_DRIVER) could not be loaded: ", why);
    return;
  }
  lib_ = lib.release(); // never unloaded (~driver)

  // The version first, through plain dlsym: it must work on drivers too old for the rest.
  auto get_version =
      reinterpret_cast<version_fn>(sdk::os::library::find(lib_, "cuDriverGetVersion"));
  if (get_version == nullptr) {
    reason_ = sdk::str(path, " has no cuDriverGetVersion: not a CUDA driver library");
    return;
  }
  const CUresult vr = get_version(&version_);
  if (vr == CUDA_ERROR_STUB_LIBRARY) {
    reason_ = sdk::str(path, " is the CUDA toolkit's stub library, not a driver: install the "
                             "NVIDIA driver (or remove the stubs directory from the library path)");
    return;
  }
  if (vr != CUDA_SUCCESS) {
    reason_ = sdk::str("cuDriverGetVersion failed with error ", static_cast<int>(vr));
    return;
  }
  if (version_ < min_driver_version) {
    reason_ = sdk::str("driver supports CUDA ", cuda_version_text(version_),
                       ", this plugin needs >= ", cuda_version_text(min_driver_version),
                       ": update the NVIDIA driver");
    return;
  }
  auto get_proc =
      reinterpret_cast<get_proc_fn>(sdk::os::library::find(lib_, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    reason_ = sdk::str(path, " lacks cuGetProcAddress_v2 (CUDA >= 12.0): update the NVIDIA driver");
    return;
  }

  // Resolved once; a missing required entry point makes the whole driver unusable.
  auto resolve = [&](const char* name, int version, void** slot, bool required) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    const CUresult r = get_proc(name, slot, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (r == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && *slot != nullptr) return true;
    *slot = nullptr;
    if (required && reason_.empty())
      reason_ = sdk::str("the driver (CUDA ", cuda_version_text(version_), ") lacks ", name,
                         " (CUDA ", cuda_version_text(version), " ABI): update the NVIDIA driver");
    return false;
  };
  bool all = true;
#define PCY_CUDA_RESOLVE(name, version)                                                            \
  all &= resolve(#name, version, reinterpret_cast<void**>(&api_.name), true);
  PCY_CUDA_REQUIRED(PCY_CUDA_RESOLVE)
#undef PCY_CUDA_RESOLVE
#define PCY_CUDA_RESOLVE_OPTIONAL(name, version)                                                   \
  resolve(#name, version, reinterpret_cast<void**>(&api_.name), false);
  PCY_CUDA_OPTIONAL(PCY_CUDA_RESOLVE_OPTIONAL)
#undef PCY_CUDA_RESOLVE_OPTIONAL
  if (!all) return;

  const CUresult ir = api_.cuInit(0);
  if (ir != CUDA_SUCCESS) {
    reason_ = sdk::str("cuInit: ", describe(ir));
    if (ir == CUDA_ERROR_NO_DEVICE) reason_ += ": no NVIDIA GPU is visible to this process";
    return;
  }
  ok_ = true;
}

driver::~driver() {
  // Never dlclose libcuda: other libraries in the process (cuBLAS, the runtime) may share it,
  // and the driver's own threads outlive our last call.
  lib_ = nullptr;
}

std::string driver::version_string() const { return cuda_version_text(version_); }

const char* driver::name_of(CUresult r) const {
  const char* name = nullptr;
  if (api_.cuGetErrorName != nullptr && api_.cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
    return name;
  return "CUDA_ERROR_UNKNOWN";
}

std::string driver::describe(CUresult r) const {
  const char* text = nullptr;
  std::string out = name_of(r);
  if (api_.cuGetErrorString != nullptr && api_.cuGetErrorString(r, &text) == CUDA_SUCCESS && text)
    out += sdk::str(" (", text, ")");
  else
    out += sdk::str(" (error ", static_cast<int>(r), ")");
  return out;
}

} // namespace parenchyma::cuda
