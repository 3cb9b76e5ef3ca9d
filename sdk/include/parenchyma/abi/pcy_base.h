/* parenchyma plugin ABI: the parts shared by every plugin kind.
 *
 * This header is the contract between libparenchyma-core (the "host") and plugins.
 * It is plain C (C99) and includes only <stddef.h>, <stdint.h> and <stdbool.h>.
 * Every ABI name starts with pcy_ / PCY_.
 *
 * VERSIONING (docs/abi.md has the numbered rules and the changelog)
 *   PCY_ABI_VERSION_MAJOR is bumped when anything is removed, reordered or retyped.
 *   PCY_ABI_VERSION_MINOR is bumped when a field, slot or enum value is appended.
 *   Every struct starts with `struct_size` (sizeof the struct as the sender knew it) and `ext`
 *   (an extension chain). A receiver accepts any struct_size >= the size at which the field it
 *   reads was introduced (use PCY_HAS_FIELD); fields beyond the sender's struct_size are absent.
 *   PCY_<STRUCT>_SIZE_<MAJOR>_<MINOR> pins give each struct's size at each minor that changed it
 *   (from offsetof of that minor's last field): what a sender of that minor sends at least.
 *   A NULL function slot, or a slot beyond the table's struct_size, means "unsupported": the
 *   host never calls it.
 *
 * OWNERSHIP / LIFETIME / THREADING conventions for every pointer are written beside it as
 *   [owner; lifetime; threads].
 */
#ifndef PCY_BASE_H
#define PCY_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PCY_ABI_VERSION_MAJOR 1
#define PCY_ABI_VERSION_MINOR 5

#if defined(_WIN32)
#define PCY_EXPORT __declspec(dllexport)
#else
#define PCY_EXPORT __attribute__((visibility("default")))
#endif

/* The size of struct `type` up to and including `field`: what a sender that knew `field` as its
 * last field sends at least. The per-minor size pins below are built from it. */
#define PCY_SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

/* True when struct `s` (a pointer) was sent with field `field` present. */
#define PCY_HAS_FIELD(s, type, field) ((s)->struct_size >= PCY_SIZE_THROUGH(type, field))

/* Extension chain node. Any struct's `ext` points at a list of these (or NULL).
 * [owner: sender; lifetime: the call it is passed to; threads: read-only] */
typedef struct pcy_ext {
  size_t struct_size;
  const struct pcy_ext* next; /* [sender; the call; read-only] */
  uint32_t type;              /* PCY_EXT_* value; receivers skip types they do not know */
} pcy_ext;

/* ---------------------------------------------------------------------------------------------
 * Errors. Every fallible call returns pcy_error* : NULL is success. A non-NULL error is owned by
 * the caller, who must call err->destroy(err) exactly once (from any thread).
 * ------------------------------------------------------------------------------------------- */
typedef enum pcy_status {
  PCY_OK = 0,
  PCY_ERR_INVALID_ARGUMENT = 1, /* the caller passed something wrong; message says which */
  PCY_ERR_UNSUPPORTED = 2,      /* the plugin does not offer this (slot, handle kind, dtype) */
  PCY_ERR_OUT_OF_MEMORY = 3,    /* device or host allocation failed; nothing else changed */
  PCY_ERR_DEVICE = 4,           /* the driver or device reported a failure */
  PCY_ERR_BUILD = 5,            /* program compile failed; message holds the build log */
  PCY_ERR_NOT_FOUND = 6,        /* a named thing (kernel, op, device) does not exist */
  PCY_ERR_VERSION = 7,          /* ABI or driver version mismatch */
  PCY_ERR_UNAVAILABLE = 8,      /* a runtime dependency (driver, vendor library) is missing */
  PCY_ERR_INTERNAL = 9,         /* a bug or an unexpected exception inside the plugin */
  PCY_ERR_LAUNCH = 10           /* a kernel launch was refused (work size, arguments) */
} pcy_status;

typedef struct pcy_error {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_status code;
  const char* message; /* [the error; until destroy; any thread] UTF-8, never NULL */
  const char* origin;  /* [the error; until destroy; any thread] plugin name or "core" */
  void (*destroy)(struct pcy_error* self); /* frees the error and its strings */
} pcy_error;

/* ---------------------------------------------------------------------------------------------
 * Host services: given to each plugin at initialisation.
 * [owner: host; lifetime: from initialize until shutdown returns; threads: any thread]
 * ------------------------------------------------------------------------------------------- */
typedef enum pcy_log_level {
  PCY_LOG_TRACE = 0,
  PCY_LOG_DEBUG = 1,
  PCY_LOG_INFO = 2,
  PCY_LOG_WARN = 3,
  PCY_LOG_ERROR = 4,
  PCY_LOG_CRITICAL = 5,
  PCY_LOG_OFF = 6
} pcy_log_level;

typedef struct pcy_host_services {
  size_t struct_size;
  const pcy_ext* ext;
  uint32_t host_abi_major; /* the ABI the host speaks; a plugin may refuse it */
  uint32_t host_abi_minor;
  void* log_user; /* [host; until shutdown; passed back to log unchanged] */
  /* Plugins never print: every message goes here. `origin` and `message` are borrowed for the
   * duration of the call. Thread-safe; may be called from any plugin thread. */
  void (*log)(void* log_user, pcy_log_level level, const char* origin, const char* message);
  pcy_log_level log_level; /* messages below this level are dropped by the host; skip them */
  const char* cache_dir;   /* [host; until shutdown] directory for compiled kernels, NULL: none */
  /* --- 1.1 --- */
  /* A setting by name, e.g. "PARENCHYMA_OPENCL_PLATFORMS": the environment variable as the host
   * sees it (ignored in set-uid processes; a host may replace the environment, as tests do), else
   * the config file's "settings" entry; NULL when neither sets it. Plugins read their settings
   * here instead of getenv, so every plugin keeps the same rules. The string is owned by the host
   * and valid until shutdown returns. Thread-safe. */
  const char* (*setting)(void* setting_user, const char* name);
  void* setting_user; /* [host; until shutdown; passed back to setting unchanged] */
  /* --- 1.4 --- */
  /* A step of slow work the host is waiting for, e.g. "compiling softmax_rows (and 5 more
   * kernels)" while a program builds: the host may show it on its progress line (a terminal,
   * after a second). `step` is borrowed for the call. Call it on the thread that does the work,
   * before the step; cheap, never blocks. NULL or absent (a 1.3 host): not shown. */
  void (*progress)(void* progress_user, const char* step);
  void* progress_user; /* [host; until shutdown; passed back to progress unchanged] */
} pcy_host_services;

#define PCY_HOST_SERVICES_SIZE_1_0 PCY_SIZE_THROUGH(pcy_host_services, cache_dir)
#define PCY_HOST_SERVICES_SIZE_1_1 PCY_SIZE_THROUGH(pcy_host_services, setting_user)
#define PCY_HOST_SERVICES_SIZE_1_4 PCY_SIZE_THROUGH(pcy_host_services, progress_user)

/* ---------------------------------------------------------------------------------------------
 * Plugin identity: the frozen prefix that begins every entry table. It never changes across
 * majors, so a host can always read the major and refuse a plugin built for another one.
 * ------------------------------------------------------------------------------------------- */
typedef enum pcy_plugin_kind { PCY_PLUGIN_FRAMEWORK = 1, PCY_PLUGIN_BUNDLE = 2 } pcy_plugin_kind;

#define PCY_PLUGIN_PREFIX                                                                          \
  size_t struct_size;                                                                              \
  const pcy_ext* ext;                                                                              \
  uint32_t abi_major; /* PCY_ABI_VERSION_MAJOR the plugin was built against */                     \
  uint32_t abi_minor; /* PCY_ABI_VERSION_MINOR the plugin was built against */                     \
  uint32_t kind;      /* pcy_plugin_kind */                                                        \
  const char* name;   /* [plugin; static; any] unique short name, [a-z0-9_]+, e.g. "opencl" */     \
  const char* plugin_version; /* [plugin; static; any] the plugin's own version string */          \
  const char* description     /* [plugin; static; any] one line for parenchyma-info */

typedef struct pcy_plugin_prefix {
  PCY_PLUGIN_PREFIX;
} pcy_plugin_prefix;

/* ---------------------------------------------------------------------------------------------
 * Data types and tensors (modelled on DLPack's DLTensor).
 * ------------------------------------------------------------------------------------------- */
typedef enum pcy_dtype {
  PCY_DTYPE_F32 = 1,
  PCY_DTYPE_F64 = 2,
  PCY_DTYPE_I32 = 3,
  PCY_DTYPE_I64 = 4,
  PCY_DTYPE_U8 = 5,
  PCY_DTYPE_F16 = 6, /* 1.1: IEEE 754 binary16 */
  PCY_DTYPE_BF16 = 7, /* 1.1: bfloat16 (the upper half of an f32) */
  PCY_DTYPE_I8 = 8,   /* 1.5 */
  PCY_DTYPE_I16 = 9,  /* 1.5 */
  PCY_DTYPE_BOOL = 10 /* 1.5: one byte, 0 (false) or 1 (true); any other byte reads as true */
} pcy_dtype;

/* Opaque handles: each plugin defines the struct behind its own handles. */
typedef struct pcy_plugin_s* pcy_plugin;   /* an initialised framework plugin */
typedef struct pcy_context_s* pcy_context; /* a context over one or more devices */
typedef struct pcy_queue_s* pcy_queue;     /* an in-order queue/stream on one device */
typedef struct pcy_event_s* pcy_event;     /* a point in a queue */
typedef struct pcy_memory_s* pcy_memory;   /* a memory allocation or an imported alias */
typedef struct pcy_program_s* pcy_program; /* a built program */
typedef struct pcy_kernel_s* pcy_kernel;   /* a kernel of a program */
typedef struct pcy_bundle_plugin_s* pcy_bundle_plugin;   /* an initialised bundle plugin */
typedef struct pcy_bundle_context_s* pcy_bundle_context; /* bundle state for one context */

/* ---------------------------------------------------------------------------------------------
 * The memory-handle protocol: how one plugin's memory is described to another.
 * ------------------------------------------------------------------------------------------- */
typedef enum pcy_handle_kind {
  PCY_HANDLE_NONE = 0,
  PCY_HANDLE_HOST_POINTER = 1,        /* CPU-addressable bytes: host_pointer */
  PCY_HANDLE_CUDA_DEVICE_POINTER = 2, /* a CUdeviceptr in cuda_pointer, on cuda_device */
  PCY_HANDLE_OPENCL_BUFFER = 3        /* a cl_mem in opencl_buffer, of opencl_context */
} pcy_handle_kind;

typedef struct pcy_memory_handle {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_handle_kind kind;
  uint64_t bytes;        /* usable bytes from the start of the handle */
  void* host_pointer;    /* HOST_POINTER: [exporter; while the exported memory lives; any] */
  uint64_t cuda_pointer; /* CUDA_DEVICE_POINTER: CUdeviceptr value */
  int32_t cuda_device;   /* CUDA_DEVICE_POINTER: CUdevice ordinal */
  void* opencl_buffer;   /* OPENCL_BUFFER: cl_mem [exporter; while the memory lives] */
  void* opencl_context;  /* OPENCL_BUFFER: cl_context the buffer belongs to */
  bool pinned;           /* HOST_POINTER: page-locked and registered with a GPU driver */
} pcy_memory_handle;

/* A tensor as an op sees it. [owner: host; lifetime: the op call; threads: the calling thread]
 * Element (i0,...,in) lives at byte_offset + sizeof(dtype) * sum(ik * strides[k]) of memory. */
typedef struct pcy_tensor {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_memory memory; /* memory of the framework the op runs on */
  /* The memory's native handle as PCY_NATIVE_MEMORY gives it (host pointer, CUdeviceptr,
   * cl_mem), resolved once by the host so ops need no call to find it; NULL: ask the framework. */
  void* data;
  pcy_dtype dtype;
  int32_t ndim;
  const int64_t* shape;   /* [host; the call] ndim entries */
  const int64_t* strides; /* [host; the call] ndim entries, in elements; NULL: row-major dense */
  uint64_t byte_offset;
} pcy_tensor;

/* 1.0 sizes of the structs above (none of them grew in 1.1 but the host services). */
#define PCY_ERROR_SIZE_1_0 PCY_SIZE_THROUGH(pcy_error, destroy)
#define PCY_MEMORY_HANDLE_SIZE_1_0 PCY_SIZE_THROUGH(pcy_memory_handle, pinned)
#define PCY_TENSOR_SIZE_1_0 PCY_SIZE_THROUGH(pcy_tensor, byte_offset)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PCY_BASE_H */
