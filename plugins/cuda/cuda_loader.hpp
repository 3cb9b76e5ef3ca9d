// The CUDA driver API, loaded at run time: libcuda.so.1 is dlopen'ed once, every entry point is
// resolved once through cuGetProcAddress_v2 into one struct, and nothing links libcuda. cuda.h is
// included for types and prototypes only (decltype of each function gives its pointer type).
#pragma once

#include <cuda.h>

#include <parenchyma/sdk/common.hpp>

#include <cstdint>
#include <string>

namespace parenchyma::cuda {

// The oldest driver whose entry points we use: cuGetProcAddress_v2 and the 12.0 ABI of each
// function we request. cuFuncGetParamInfo (12.4) is optional.
inline constexpr int min_driver_version = 12000;

// name, the CUDA version whose ABI of that entry point we call.
#define PCY_CUDA_REQUIRED(X)                                                                       \
  X(cuInit, 12000)                                                                                 \
  X(cuGetErrorName, 12000)                                                                         \
  X(cuGetErrorString, 12000)                                                                       \
  X(cuDeviceGetCount, 12000)                                                                       \
  X(cuDeviceGet, 12000)                                                                            \
  X(cuDeviceGetName, 12000)                                                                        \
  X(cuDeviceGetAttribute, 12000)                                                                   \
  X(cuDeviceTotalMem, 12000)                                                                       \
  X(cuDeviceGetUuid, 12000)                                                                        \
  X(cuDeviceGetPCIBusId, 12000)                                                                    \
  X(cuDevicePrimaryCtxRetain, 12000)                                                               \
  X(cuDevicePrimaryCtxRelease, 12000)                                                              \
  X(cuCtxSetCurrent, 12000)                                                                        \
  X(cuCtxGetCurrent, 12000)                                                                        \
  X(cuStreamCreate, 12000)                                                                         \
  X(cuStreamDestroy, 12000)                                                                        \
  X(cuStreamSynchronize, 12000)                                                                    \
  X(cuStreamWaitEvent, 12000)                                                                      \
  X(cuEventCreate, 12000)                                                                          \
  X(cuEventDestroy, 12000)                                                                         \
  X(cuEventRecord, 12000)                                                                          \
  X(cuEventSynchronize, 12000)                                                                     \
  X(cuMemGetInfo, 12000)                                                                           \
  X(cuMemAlloc, 12000)                                                                             \
  X(cuMemFree, 12000)                                                                              \
  X(cuMemHostAlloc, 12000)                                                                         \
  X(cuMemFreeHost, 12000)                                                                          \
  X(cuMemHostGetDevicePointer, 12000)                                                              \
  X(cuPointerGetAttributes, 12000)                                                                 \
  X(cuMemcpyHtoDAsync, 12000)                                                                      \
  X(cuMemcpyDtoHAsync, 12000)                                                                      \
  X(cuMemcpyDtoDAsync, 12000)                                                                      \
  X(cuMemcpyPeerAsync, 12000)                                                                      \
  X(cuMemsetD8Async, 12000)                                                                        \
  X(cuMemsetD16Async, 12000)                                                                       \
  X(cuMemsetD32Async, 12000)                                                                       \
  X(cuMemsetD2D8Async, 12000)                                                                      \
  X(cuMemsetD2D32Async, 12000)                                                                     \
  X(cuModuleLoadData, 12000)                                                                       \
  X(cuModuleUnload, 12000)                                                                         \
  X(cuModuleGetFunction, 12000)                                                                    \
  X(cuFuncGetAttribute, 12000)                                                                     \
  X(cuOccupancyMaxPotentialBlockSize, 12000)                                                       \
  X(cuLaunchKernel, 12000)

// The graph entry points (pcy_framework_api's graph slots): without them a backend replays
// command lists instead. cuLaunchKernelEx: early launch (PCY_KERNEL_WAITS_FOR_PRIOR); without it
// every kernel launches the usual way.
#define PCY_CUDA_OPTIONAL(X)                                                                       \
  X(cuFuncGetParamInfo, 12040)                                                                     \
  X(cuLaunchKernelEx, 12000)                                                                       \
  X(cuStreamBeginCapture, 12000)                                                                   \
  X(cuStreamEndCapture, 12000)                                                                     \
  X(cuGraphCreate, 12000)                                                                          \
  X(cuGraphDestroy, 12000)                                                                         \
  X(cuGraphGetNodes, 12000)                                                                        \
  X(cuGraphAddChildGraphNode, 12000)                                                               \
  X(cuGraphInstantiateWithFlags, 12000)                                                            \
  X(cuGraphLaunch, 12000)                                                                          \
  X(cuGraphExecDestroy, 12000)                                                                     \
  PCY_CUDA_FLAT_CAPTURE(X)

// Capture straight into one graph (12.3): each op's segment joins the graph as its own nodes, not
// as a child graph. Built only against CUDA 13 headers, where cuStreamGetCaptureInfo's prototype
// is the 12.3 ABI (with edge data) that version 12030 resolves to.
#if CUDA_VERSION >= 13000
#define PCY_CUDA_FLAT_CAPTURE(X)                                                                   \
  X(cuStreamBeginCaptureToGraph, 12030)                                                            \
  X(cuStreamGetCaptureInfo, 12030)
#else
#define PCY_CUDA_FLAT_CAPTURE(X)
#endif

// The resolved entry points. Member names go through cuda.h's macros (cuMemAlloc is
// cuMemAlloc_v2), so each member has the prototype of the ABI we request.
struct driver_api {
#define PCY_CUDA_DECLARE(name, version) decltype(&::name) name = nullptr;
  PCY_CUDA_REQUIRED(PCY_CUDA_DECLARE)
  PCY_CUDA_OPTIONAL(PCY_CUDA_DECLARE)
#undef PCY_CUDA_DECLARE
};

// One loaded driver: either usable (ok()) or the reason it is not.
class driver {
public:
  // library: the file to dlopen; empty: the setting PARENCHYMA_CUDA_DRIVER or "libcuda.so.1".
  explicit driver(const std::string& library = {}, const sdk::settings& settings = {});
  ~driver();
  driver(const driver&) = delete;
  driver& operator=(const driver&) = delete;

  bool ok() const noexcept { return ok_; }
  const std::string& reason() const noexcept { return reason_; }
  int version() const noexcept { return version_; } // e.g. 13000
  std::string version_string() const;               // "13.0"
  const driver_api& api() const noexcept { return api_; }

  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string describe(CUresult r) const;
  const char* name_of(CUresult r) const;

private:
  void* lib_ = nullptr;
  driver_api api_{};
  bool ok_ = false;
  int version_ = 0;
  std::string reason_;
};

// The plugin's status code for a driver result.
pcy_status status_of(CUresult r) noexcept;

// Throws sdk::error("<what>: CUDA_ERROR_X (text)") unless r is CUDA_SUCCESS.
inline void check(const driver& d, CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) [[unlikely]]
    sdk::fail(status_of(r), sdk::str(what, ": ", d.describe(r)));
}

// "200 GiB", "4.5 MiB", "17 bytes".
std::string pretty_bytes(uint64_t bytes);

// An environment variable, ignored in set-uid/set-gid processes; empty when unset.
std::string safe_getenv(const char* name);

} // namespace parenchyma::cuda
