// parenchyma: DLPack in and out of SharedTensor, without copies.
//
//   // NumPy / PyTorch / CuPy hand us a DLManagedTensor*; we hand one back.
//   parenchyma::TensorStorage t = parenchyma::from_dlpack(managed);     // aliases the bytes
//   parenchyma::blas::scal(backend, 2.0, t);                           // runs on them in place
//   DLManagedTensor* out = parenchyma::to_dlpack(t, backend);          // the same bytes again
//
// Export (to_dlpack): the tensor's latest data is made to live in its slot on the backend, the
// backend's queue is finished (the consumer may read at once, on any stream) — or, on a CUDA
// backend given the consumer's stream, that stream is made to wait for the backend's work
// through an event, without the host waiting (the `stream` of the Python protocol) — and that slot
// becomes the tensor's only valid copy: the consumer may write through the pointer, and the next
// parenchyma access sees what it wrote (once the consumer's own work finished). The returned
// tensor keeps the bytes alive until its deleter runs, even after the SharedTensor is destroyed
// or resized. Devices: kDLCPU for native and for OpenCL devices that share host memory (the
// host copy when an OpenCL buffer cannot give its host pointer), kDLCUDA (device = the CUDA
// ordinal) for the cuda plugin. An OpenCL buffer that is not host memory has no DLPack device:
// refused with errc::unsupported, or exported through the host copy with through_host.
//
// Import (from_dlpack): a kDLCPU (or kDLCUDAHost) tensor becomes the tensor's host copy, aliased
// (devices that share host memory alias it in turn when an op runs there). The program may keep
// using the array, with the same rule on every device and at every address: after an op and
// Backend::synchronize() (or a host read of the tensor) the array holds the op's result, and
// what the program writes into it after a synchronisation is what the next op reads. A device
// that cannot use the array in place (CUDA, an OpenCL driver that would copy) gets a device copy
// that the core keeps in step: results are copied back on the op's queue right after each op that
// writes the tensor, and the copy is read again from the array when the host synchronised since.
// Tensors whose imported bytes overlap are one memory for ops that need distinct operands
// (TensorStorage::shares_memory_with). A kDLCUDA tensor
// becomes a slot of a cuda backend of that device, imported through the memory-handle protocol.
// Shapes, byte offset and dtype are honoured (f32, f64, f16, bf16, i32, i64, u8; one lane).
// Strides must be dense row-major (as NULL strides are): other layouts are refused with
// errc::invalid_argument, or copied into a dense tensor with make_dense (host memory only). On
// success the tensor owns the DLManagedTensor and calls its deleter when its last slot using
// the bytes goes; on an error nothing was taken: the caller still owns it.
//
// Threads: as SharedTensor (one thread at a time per tensor). A deleter may run on any thread.
// DLPack version: both kinds, always: the unversioned DLManagedTensor (DLPack 0.x, what NumPy
// 1.22+, PyTorch and CuPy accept) and DLManagedTensorVersioned (DLPack 1.x): the same tensors with
// a version and flags (READ_ONLY both ways); docs/python.md. The structs are declared by
// parenchyma/dlpack_abi.h (the published ABI; no system dlpack/dlpack.h is needed).
#pragma once

#include <parenchyma/export.hpp>

#include <parenchyma/backend.hpp>
#include <parenchyma/dlpack_abi.h>
#include <parenchyma/shared_tensor.hpp>

// 1: DLManagedTensorVersioned is spoken (always, since the project declares DLPack 1.x itself;
// kept for code written when it depended on the system dlpack.h's version).
#define PARENCHYMA_DLPACK_VERSIONED 1

namespace parenchyma {
inline namespace v1 {

struct DLPackExportOptions {
  // An OpenCL buffer that is not host memory: export the host copy (a copy to the host) instead
  // of refusing.
  bool through_host = false;
  // CUDA backends: the stream the consumer reads on (a CUstream as an integer; 1 is the legacy
  // default stream, 2 the per-thread default stream, as in DLPack's Python protocol). The
  // stream waits for the backend's work on the tensor through an event; the host does not wait.
  // -1: the consumer asks for no ordering at all. 0 (the default): the host waits for the work,
  // so any stream may read. Ignored on other backends (their exports are finished on the host).
  intptr_t consumer_stream = 0;
};

struct DLPackImportOptions {
  // Non-dense strides: copy into a dense tensor (host memory only) instead of refusing.
  bool make_dense = false;
  // Refuse every write access to the tensor (write and write_only, on the host and on devices).
  bool read_only = false;
};

// The DLPack device a backend's memory is exported as; errc::unsupported for an OpenCL device
// whose memory is not host memory.
PARENCHYMA_API DLDevice dlpack_device(const Backend& backend);

// Exports t on the backend (see above). Never returns null; throws parenchyma::error.
PARENCHYMA_API DLManagedTensor* to_dlpack(TensorStorage& t, const Backend& backend,
                                          const DLPackExportOptions& options = {});
// Exports t's host copy (kDLCPU), after making it hold the latest data.
PARENCHYMA_API DLManagedTensor* to_dlpack_host(TensorStorage& t);

// Imports a DLPack tensor without copying (see above). `backend` is needed for kDLCUDA memory
// (a cuda backend of that device; nullptr: "cuda:<device_id>" of the global registry) and
// ignored for host memory.
PARENCHYMA_API TensorStorage from_dlpack(DLManagedTensor* tensor, const Backend* backend = nullptr,
                                         const DLPackImportOptions& options = {});

// The same with DLManagedTensorVersioned (DLPack >= 1.0). Export: version {1, minor of
// parenchyma/dlpack_abi.h}; flags READ_ONLY where the tensor was imported read-only.
// Import: a major version other than the library's is refused with errc::unsupported and, as
// the DLPack rules ask of a consumer that cannot read the struct, the tensor's deleter is called;
// READ_ONLY makes the tensor read-only (as DLPackImportOptions::read_only); every other error
// leaves the tensor with the caller, as above.
PARENCHYMA_API DLManagedTensorVersioned*
to_dlpack_versioned(TensorStorage& t, const Backend& backend,
                    const DLPackExportOptions& options = {});
PARENCHYMA_API DLManagedTensorVersioned* to_dlpack_versioned_host(TensorStorage& t);
PARENCHYMA_API TensorStorage from_dlpack(DLManagedTensorVersioned* tensor,
                                         const Backend* backend = nullptr,
                                         const DLPackImportOptions& options = {});

// The dtype of a DLPack data type, or errc::unsupported naming it.
PARENCHYMA_API pcy_dtype dtype_from_dlpack(DLDataType type);
PARENCHYMA_API DLDataType dtype_to_dlpack(pcy_dtype dtype);

} // namespace v1
} // namespace parenchyma
