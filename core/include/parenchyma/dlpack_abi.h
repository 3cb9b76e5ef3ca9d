/* parenchyma: the DLPack data structures, declared by the project (C and C++).
 *
 * DLPack is a stable C ABI for handing tensors between libraries. This header declares its
 * version 1.x structs and constants with the names and memory layout the published ABI fixes,
 * so that the library and the Python package build without a system dlpack/dlpack.h and always
 * speak both kinds of exchange: DLManagedTensorVersioned (DLPack >= 1.0: a version, flags such
 * as READ_ONLY) and the older unversioned DLManagedTensor (DLPack 0.x consumers).
 *
 * Compatibility with the reference header: included first, this header claims its include guard,
 * so a later #include <dlpack/dlpack.h> adds nothing (the declarations are the same ABI). A
 * dlpack.h >= 1.0 included before it is used as it is; an older one is refused (it lacks the
 * versioned struct, and its declarations would clash with these). */
#ifndef PARENCHYMA_DLPACK_ABI_H
#define PARENCHYMA_DLPACK_ABI_H

#if defined(DLPACK_DLPACK_H_) && !defined(PARENCHYMA_DLPACK_ABI_DECLARED)
#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION < 1
/* It lacks DLManagedTensorVersioned: include the parenchyma header first instead. */
#error "a dlpack/dlpack.h older than 1.0 was included before parenchyma/dlpack_abi.h"
#endif
#else                    /* our own declarations */
#define DLPACK_DLPACK_H_ /* the reference header's guard: it becomes a no-op after this one */
#define PARENCHYMA_DLPACK_ABI_DECLARED 1

#include <stdint.h>

/* The DLPack version these declarations follow; a consumer reads any 1.x struct. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

#ifdef __cplusplus
extern "C" {
#endif

/* DLManagedTensorVersioned::version. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* Where the memory lives (DLDevice::device_type); values fixed by the ABI. */
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3, /* pinned host memory of CUDA */
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id; /* the device ordinal (0 for the host) */
} DLDevice;

/* DLDataType::code. */
typedef enum {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6
} DLDataTypeCode;

/* An element type: code (a DLDataTypeCode), bits per lane, lanes (1 for scalars). */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/* The tensor itself, owned by neither side: the address of the element at index i is
 * (char*)data + byte_offset + sum(i[k] * strides[k]) * bytes per element; strides NULL means
 * dense row-major. */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;   /* ndim extents */
  int64_t* strides; /* ndim strides in elements, or NULL */
  uint64_t byte_offset;
} DLTensor;

/* DLPack 0.x: a tensor with its producer's context; the consumer calls deleter(self) once when
 * done (a NULL deleter: nothing to release). */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

/* DLManagedTensorVersioned::flags. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0) /* the consumer must not write */
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1) /* the producer made a copy */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)

/* DLPack >= 1.0: the version comes first, so a consumer can check it before reading the rest
 * (a major version it does not know: it must only call the deleter). */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* our own declarations */
#endif /* PARENCHYMA_DLPACK_ABI_H */
