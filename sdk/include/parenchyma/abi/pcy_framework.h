/* parenchyma plugin ABI: framework plugins (a compute API such as the host CPU, OpenCL, CUDA).
 *
 * A framework plugin exports exactly one symbol, PCY_FRAMEWORK_ENTRY_SYMBOL, of type
 * pcy_framework_entry_fn, which returns a pointer to a static const pcy_framework_api.
 *
 * Threading (docs/abi.md G2, G4): calls that enqueue work on one queue are serialised by the
 * host; queue_finish and event_wait may come from another thread while the queue's owner
 * enqueues. Context-level calls (alloc, free, export, import, queue_create, native_handle,
 * program_build) may come from several threads at once on one context. initialize, probe,
 * device_properties, context_create, context_destroy and shutdown are never called concurrently
 * (for any plugin, anywhere in the process). Calls on different objects may come at once.
 * Queue semantics: every operation taking a pcy_queue is ordered after the earlier work on that
 * queue. An operation with `blocking == false` may return before it ran; host pointers it was
 * given must stay valid until queue_finish (or an event recorded after it) completes.
 */
#ifndef PCY_FRAMEWORK_H
#define PCY_FRAMEWORK_H

#include "pcy_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PCY_FRAMEWORK_ENTRY_SYMBOL "pcy_framework_entry"

/* Well-known device property keys. A plugin may add its own keys (lower_snake_case). */
#define PCY_PROP_NAME "name"                     /* string */
#define PCY_PROP_VENDOR "vendor"                 /* string */
#define PCY_PROP_KIND "kind"                     /* int: pcy_device_kind */
#define PCY_PROP_COMPUTE_UNITS "compute_units"   /* int */
#define PCY_PROP_GLOBAL_MEMORY "global_memory"   /* int: bytes */
#define PCY_PROP_LOCAL_MEMORY "local_memory"     /* int: bytes */
#define PCY_PROP_MAX_WORK_GROUP "max_work_group" /* int */
#define PCY_PROP_DRIVER_VERSION "driver_version" /* string */
#define PCY_PROP_UUID "uuid"                     /* string */
#define PCY_PROP_HOST_UNIFIED "host_unified"     /* bool: shares memory with the host */
#define PCY_PROP_FP64 "fp64"                     /* bool */

typedef enum pcy_device_kind {
  PCY_DEVICE_OTHER = 0,
  PCY_DEVICE_CPU = 1,
  PCY_DEVICE_GPU = 2,
  PCY_DEVICE_ACCELERATOR = 3
} pcy_device_kind;

typedef enum pcy_value_type {
  PCY_VALUE_STRING = 1,
  PCY_VALUE_INT = 2,
  PCY_VALUE_FLOAT = 3,
  PCY_VALUE_BOOL = 4
} pcy_value_type;

typedef struct pcy_property {
  size_t struct_size;
  const pcy_ext* ext;
  const char* key; /* [plugin; until shutdown; read-only] */
  pcy_value_type type;
  const char* s; /* STRING: [plugin; until shutdown; read-only] */
  int64_t i;     /* INT and BOOL (0/1) */
  double f;      /* FLOAT */
} pcy_property;

/* ---- initialisation ------------------------------------------------------------------------ */
typedef struct pcy_framework_init_args {
  size_t struct_size;
  const pcy_ext* ext;
  const pcy_host_services* host; /* [host; until shutdown; any] */
  pcy_plugin plugin;             /* out: the plugin instance, passed to every later call */
} pcy_framework_init_args;

typedef struct pcy_framework_probe {
  size_t struct_size;
  const pcy_ext* ext;
  uint32_t device_count;
  /* Why device_count is 0 (or lower than it could be), e.g. "libcuda.so.1 not found".
   * [plugin; until shutdown; read-only] NULL when there is nothing to say. */
  const char* reason;
} pcy_framework_probe;

/* ---- memory -------------------------------------------------------------------------------- */
typedef enum pcy_memory_flags {
  PCY_MEMORY_DEFAULT = 0,
  PCY_MEMORY_HOST_PINNED = 1 /* page-locked host memory the device can reach (CUDA, OpenCL) */
} pcy_memory_flags;

typedef struct pcy_memory_alloc_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_context context;
  uint32_t device;   /* index into the context's devices */
  uint64_t bytes;    /* > 0 */
  uint32_t flags;    /* pcy_memory_flags */
  pcy_memory memory; /* out [caller; until memory_free; any] */
} pcy_memory_alloc_args;

/* Copies between device memory and host memory: host_pointer is [caller; see queue semantics]. */
typedef struct pcy_memory_transfer_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_queue queue;
  pcy_memory memory;
  uint64_t offset;    /* bytes into memory */
  void* host_pointer; /* destination of read, source of write */
  uint64_t bytes;
  bool blocking; /* true: the bytes have moved when the call returns */
} pcy_memory_transfer_args;

typedef struct pcy_memory_copy_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_queue queue; /* a queue of the destination's device */
  pcy_memory src;
  uint64_t src_offset;
  pcy_memory dst; /* may be of another context of the same plugin */
  uint64_t dst_offset;
  uint64_t bytes;
} pcy_memory_copy_args;

typedef struct pcy_memory_fill_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_queue queue;
  pcy_memory memory;
  uint64_t offset;
  uint64_t bytes;        /* a multiple of pattern_size */
  const void* pattern;   /* [caller; the call] copied before return */
  uint32_t pattern_size; /* 1, 2, 4, 8 or 16 */
} pcy_memory_fill_args;

/* Export describes existing memory as a handle of the requested kind; the handle is valid while
 * the memory lives. Import makes a pcy_memory that aliases the handle's bytes WITHOUT copying
 * and without owning them: it fails with PCY_ERR_UNSUPPORTED unless the alias is zero-copy
 * (e.g. a host pointer into a CPU OpenCL device, pinned host memory into CUDA). The importer's
 * memory_free releases only the alias; the exporter's memory must outlive it. */
typedef struct pcy_memory_export_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_memory memory;
  pcy_handle_kind kind;      /* requested kind */
  pcy_memory_handle* handle; /* out: [caller provides storage; struct_size set by caller] */
} pcy_memory_export_args;

typedef struct pcy_memory_import_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_context context;
  uint32_t device;
  const pcy_memory_handle* handle; /* [caller; the call] */
  pcy_memory memory;               /* out [caller; until memory_free; any] */
} pcy_memory_import_args;

/* ---- native handles ------------------------------------------------------------------------ */
typedef enum pcy_native_object {
  PCY_NATIVE_DEVICE = 1,  /* CUdevice (as intptr), cl_device_id */
  PCY_NATIVE_CONTEXT = 2, /* CUcontext, cl_context */
  PCY_NATIVE_QUEUE = 3,   /* CUstream, cl_command_queue */
  PCY_NATIVE_MEMORY = 4,  /* CUdeviceptr (as uintptr), cl_mem, host pointer */
  PCY_NATIVE_PLATFORM = 5 /* cl_platform_id */
} pcy_native_object;

typedef struct pcy_native_handle_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_native_object object;
  pcy_context context; /* for DEVICE, CONTEXT, PLATFORM */
  uint32_t device;     /* for DEVICE, PLATFORM: index into the context's devices */
  pcy_queue queue;     /* for QUEUE */
  pcy_memory memory;   /* for MEMORY */
  void* handle;        /* out: borrowed [plugin; while the object lives; per the vendor API] */
} pcy_native_handle_args;

/* ---- programs and kernels ------------------------------------------------------------------ */
typedef struct pcy_program_build_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_context context;
  const char* source;  /* [caller; the call] the framework's kernel language */
  size_t source_size;  /* bytes; 0: NUL-terminated */
  const char* options; /* [caller; the call] compiler options, may be NULL */
  pcy_program program; /* out [caller; until program_destroy] */
  bool cache_hit;      /* out: loaded from the binary cache */
} pcy_program_build_args;

/* Kernel flags (1.3), a promise about the kernel's code that lets a plugin launch it sooner.
 * PCY_KERNEL_WAITS_FOR_PRIOR: every thread of the kernel executes the device-side wait for prior
 *   work before it reads or writes memory (CUDA C: the SDK's PCY_WAIT_PRIOR(), i.e.
 *   `griddepcontrol.wait` on sm_90+, first in the kernel). The plugin may then start the kernel
 *   while the work before it on the queue still runs (CUDA: programmatic dependent launch; in a
 *   captured graph, a programmatic edge). A plugin that cannot do this launches it as usual. A
 *   kernel that breaks the promise races with the work before it. */
typedef enum pcy_kernel_flag { PCY_KERNEL_WAITS_FOR_PRIOR = 1u << 0 } pcy_kernel_flag;

typedef struct pcy_kernel_create_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_program program;
  const char* name;  /* [caller; the call] */
  pcy_kernel kernel; /* out [caller; until kernel_destroy; launches on one queue at a time] */
  /* --- 1.3 --- */
  uint32_t flags; /* pcy_kernel_flag bits; unknown bits are ignored */
} pcy_kernel_create_args;

typedef enum pcy_kernel_arg_kind {
  PCY_ARG_MEMORY = 1, /* memory (device pointer / cl_mem) */
  PCY_ARG_SCALAR = 2, /* `size` bytes at `value` */
  PCY_ARG_LOCAL = 3   /* `size` bytes of work-group local / dynamic shared memory */
} pcy_kernel_arg_kind;

typedef struct pcy_kernel_arg {
  pcy_kernel_arg_kind kind;
  pcy_memory memory; /* MEMORY */
  const void* value; /* SCALAR: [caller; the call] copied before return */
  size_t size;       /* SCALAR, LOCAL */
} pcy_kernel_arg;

/* global: total work-items per dimension; local: work-group (block) size, 0 = plugin chooses.
 * On CUDA the grid is ceil(global / local); kernels must bounds-check. */
typedef struct pcy_kernel_launch_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_queue queue;
  pcy_kernel kernel;
  uint32_t dims; /* 1..3 */
  uint64_t global[3];
  uint32_t local[3];
  const pcy_kernel_arg* args; /* [caller; the call] */
  uint32_t arg_count;
} pcy_kernel_launch_args;

/* ---- graphs (1.2) -------------------------------------------------------------------------- */
/* Work captured from a queue once and launched again with one call (a CUDA graph). Optional:
 * a plugin offers all six graph slots or none, and a host without them replays ops itself.
 * A graph is built on one queue and launched only on it; it is used by one thread at a time.
 *   graph_create         an empty graph for `queue`.
 *   queue_capture_begin  from now on, work enqueued on `queue` from the calling thread is not
 *                        run: it is appended to `graph`, after everything captured into it
 *                        before. Operations that cannot be captured (host waits, transfers from
 *                        pageable host memory, allocations) fail while capturing.
 *   queue_capture_end    ends the capture begun on `queue`: the queue runs work again, whether
 *                        the call succeeds or not. An error (something inside the capture
 *                        failed or could not be captured) leaves `graph` unusable: destroy it.
 *   graph_instantiate    after the last capture: makes the graph launchable (no capture after).
 *   graph_launch         enqueues the whole graph on `queue` (the queue it was built on).
 *   graph_destroy        may be called while a launch still runs: the plugin frees it after. */
typedef struct pcy_graph_s* pcy_graph; /* [caller; until graph_destroy; one thread at a time] */

/* ---- the table ----------------------------------------------------------------------------- */
typedef struct pcy_framework_api {
  PCY_PLUGIN_PREFIX; /* kind == PCY_PLUGIN_FRAMEWORK */

  /* Lifecycle. initialize may refuse the host's ABI (PCY_ERR_VERSION). A plugin whose vendor
   * library is absent still initialises and reports 0 devices with a reason in probe.
   * shutdown is called once, after every object it made was destroyed; threads: one. */
  pcy_error* (*initialize)(pcy_framework_init_args* args);
  void (*shutdown)(pcy_plugin plugin);
  pcy_error* (*probe)(pcy_plugin plugin, pcy_framework_probe* out);

  /* Devices: properties as an array [plugin; until shutdown; read-only]. */
  pcy_error* (*device_properties)(pcy_plugin plugin, uint32_t device, const pcy_property** props,
                                  size_t* count);

  /* Contexts over `count` devices (indices into the plugin's device list). */
  pcy_error* (*context_create)(pcy_plugin plugin, const uint32_t* devices, uint32_t count,
                               pcy_context* out);
  void (*context_destroy)(pcy_context context);

  /* Queues (in-order) and events. */
  pcy_error* (*queue_create)(pcy_context context, uint32_t device, pcy_queue* out);
  void (*queue_destroy)(pcy_queue queue); /* waits for the queue's work first */
  pcy_error* (*queue_finish)(pcy_queue queue);
  pcy_error* (*event_record)(pcy_queue queue, pcy_event* out);
  pcy_error* (*event_wait)(pcy_event event);                        /* host waits */
  pcy_error* (*queue_wait_event)(pcy_queue queue, pcy_event event); /* queue waits */
  void (*event_destroy)(pcy_event event);

  /* Memory. */
  pcy_error* (*memory_alloc)(pcy_memory_alloc_args* args);
  void (*memory_free)(pcy_memory memory);
  pcy_error* (*memory_read)(const pcy_memory_transfer_args* args);
  pcy_error* (*memory_write)(const pcy_memory_transfer_args* args);
  pcy_error* (*memory_copy)(const pcy_memory_copy_args* args);
  pcy_error* (*memory_fill)(const pcy_memory_fill_args* args);
  pcy_error* (*memory_export)(pcy_memory_export_args* args);
  pcy_error* (*memory_import)(pcy_memory_import_args* args);

  /* Native handles for interop (cuBLAS, CLBlast, user code). */
  pcy_error* (*native_handle)(pcy_native_handle_args* args);

  /* Programs: may be NULL (the native plugin compiles nothing). */
  pcy_error* (*program_build)(pcy_program_build_args* args);
  void (*program_destroy)(pcy_program program);
  pcy_error* (*kernel_create)(pcy_kernel_create_args* args);
  void (*kernel_destroy)(pcy_kernel kernel);
  pcy_error* (*kernel_launch)(const pcy_kernel_launch_args* args);

  /* --- 1.2: graphs (optional, all or none; see above) --- */
  pcy_error* (*graph_create)(pcy_queue queue, pcy_graph* out);
  pcy_error* (*queue_capture_begin)(pcy_queue queue, pcy_graph graph);
  pcy_error* (*queue_capture_end)(pcy_queue queue, pcy_graph graph);
  pcy_error* (*graph_instantiate)(pcy_graph graph);
  pcy_error* (*graph_launch)(pcy_queue queue, pcy_graph graph);
  void (*graph_destroy)(pcy_graph graph);
} pcy_framework_api;

typedef const pcy_framework_api* (*pcy_framework_entry_fn)(void);

/* Sizes at each minor that changed a struct (from offsetof of that minor's last field): a
 * receiver requires the pin of the minor whose fields it reads, and reads later fields only
 * behind PCY_HAS_FIELD. The framework ABI did not grow in 1.1; 1.2 appended the graph slots;
 * 1.3 appended pcy_kernel_create_args.flags. */
#define PCY_FRAMEWORK_API_SIZE_1_0 PCY_SIZE_THROUGH(pcy_framework_api, kernel_launch)
#define PCY_FRAMEWORK_API_SIZE_1_2 PCY_SIZE_THROUGH(pcy_framework_api, graph_destroy)
#define PCY_PROPERTY_SIZE_1_0 PCY_SIZE_THROUGH(pcy_property, f)
#define PCY_FRAMEWORK_INIT_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_framework_init_args, plugin)
#define PCY_FRAMEWORK_PROBE_SIZE_1_0 PCY_SIZE_THROUGH(pcy_framework_probe, reason)
#define PCY_MEMORY_ALLOC_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_memory_alloc_args, memory)
#define PCY_MEMORY_TRANSFER_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_memory_transfer_args, blocking)
#define PCY_MEMORY_COPY_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_memory_copy_args, bytes)
#define PCY_MEMORY_FILL_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_memory_fill_args, pattern_size)
#define PCY_MEMORY_EXPORT_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_memory_export_args, handle)
#define PCY_MEMORY_IMPORT_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_memory_import_args, memory)
#define PCY_NATIVE_HANDLE_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_native_handle_args, handle)
#define PCY_PROGRAM_BUILD_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_program_build_args, cache_hit)
#define PCY_KERNEL_CREATE_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_kernel_create_args, kernel)
#define PCY_KERNEL_CREATE_ARGS_SIZE_1_3 PCY_SIZE_THROUGH(pcy_kernel_create_args, flags)
#define PCY_KERNEL_LAUNCH_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_kernel_launch_args, arg_count)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PCY_FRAMEWORK_H */
