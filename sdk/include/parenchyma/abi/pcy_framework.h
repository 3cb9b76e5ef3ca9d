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
/* The slots of pcy_framework_api, ONE list, in table order. Everything else about a slot — the
 * struct field, the SDK adapter's table, the registry's required-slot check, the validation
 * layer's wrapper and the layout pins — is generated from this list (docs/abi.md "Adding a
 * slot"). Append only: a new minor's slots go last.
 *
 *   X(name, minor, need, thread, return type, (parameters), (argument names))
 *
 * minor   the ABI minor that added the slot (1.<minor>).
 * need    REQUIRED: a table without it is refused at load. OPTIONAL: may be NULL. PROGRAMS,
 *         GRAPHS: optional groups, offered all together or not at all.
 * thread  the threading rule (docs/abi.md G2, G4) the validation layer checks: LIFECYCLE (never
 *         at the same time as another lifecycle call of any plugin), ENQUEUE (calls that enqueue
 *         on one queue come one at a time), ANY.
 * The parameters' types are the argument rules the validation layer checks on every call: a
 * handle (pcy_plugin, pcy_context, pcy_queue, pcy_event, pcy_memory, pcy_program, pcy_kernel,
 * pcy_graph) must be a live handle of that kind made by this plugin (a destroying slot: not
 * destroyed twice); an argument struct must have struct_size >= its 1.0 pin; a handle written
 * through an out pointer is recorded as made by this plugin. Slots with further rules (same
 * context, events across contexts, aliases, ...) have them in docs/validation.md.
 *
 * Lifecycle. initialize may refuse the host's ABI (PCY_ERR_VERSION). A plugin whose vendor
 * library is absent still initialises and reports 0 devices with a reason in probe. shutdown is
 * called once, after every object it made was destroyed. device_properties: an array [plugin;
 * until shutdown; read-only]. context_create: a context over `count` devices (indices into the
 * plugin's device list). Queues are in-order; queue_destroy waits for the queue's work first.
 * event_wait: the host waits; queue_wait_event: the queue waits. native_handle: native objects
 * for interop (cuBLAS, CLBlast, user code). Programs may be absent (the native plugin compiles
 * nothing). Graphs (1.2): see "graphs" above. */
#define PCY_FRAMEWORK_API_SLOTS(X)                                                                 \
  X(initialize, 0, REQUIRED, LIFECYCLE, pcy_error*, (pcy_framework_init_args * args), (args))      \
  X(shutdown, 0, REQUIRED, LIFECYCLE, void, (pcy_plugin plugin), (plugin))                         \
  X(probe, 0, REQUIRED, LIFECYCLE, pcy_error*, (pcy_plugin plugin, pcy_framework_probe * out),     \
    (plugin, out))                                                                                 \
  X(device_properties, 0, REQUIRED, LIFECYCLE, pcy_error*,                                         \
    (pcy_plugin plugin, uint32_t device, const pcy_property** props, size_t* count),               \
    (plugin, device, props, count))                                                                \
  X(context_create, 0, REQUIRED, LIFECYCLE, pcy_error*,                                            \
    (pcy_plugin plugin, const uint32_t* devices, uint32_t count, pcy_context* out),                \
    (plugin, devices, count, out))                                                                 \
  X(context_destroy, 0, REQUIRED, LIFECYCLE, void, (pcy_context context), (context))               \
  X(queue_create, 0, REQUIRED, ANY, pcy_error*,                                                    \
    (pcy_context context, uint32_t device, pcy_queue * out), (context, device, out))               \
  X(queue_destroy, 0, REQUIRED, ANY, void, (pcy_queue queue), (queue))                             \
  X(queue_finish, 0, REQUIRED, ANY, pcy_error*, (pcy_queue queue), (queue))                        \
  X(event_record, 0, OPTIONAL, ENQUEUE, pcy_error*, (pcy_queue queue, pcy_event * out),            \
    (queue, out))                                                                                  \
  X(event_wait, 0, OPTIONAL, ANY, pcy_error*, (pcy_event event), (event))                          \
  X(queue_wait_event, 0, OPTIONAL, ENQUEUE, pcy_error*, (pcy_queue queue, pcy_event event),        \
    (queue, event))                                                                                \
  X(event_destroy, 0, OPTIONAL, ANY, void, (pcy_event event), (event))                             \
  X(memory_alloc, 0, REQUIRED, ANY, pcy_error*, (pcy_memory_alloc_args * args), (args))            \
  X(memory_free, 0, REQUIRED, ANY, void, (pcy_memory memory), (memory))                            \
  X(memory_read, 0, REQUIRED, ENQUEUE, pcy_error*, (const pcy_memory_transfer_args* args), (args)) \
  X(memory_write, 0, REQUIRED, ENQUEUE, pcy_error*, (const pcy_memory_transfer_args* args),        \
    (args))                                                                                        \
  X(memory_copy, 0, OPTIONAL, ENQUEUE, pcy_error*, (const pcy_memory_copy_args* args), (args))     \
  X(memory_fill, 0, OPTIONAL, ENQUEUE, pcy_error*, (const pcy_memory_fill_args* args), (args))     \
  X(memory_export, 0, OPTIONAL, ANY, pcy_error*, (pcy_memory_export_args * args), (args))          \
  X(memory_import, 0, OPTIONAL, ANY, pcy_error*, (pcy_memory_import_args * args), (args))          \
  X(native_handle, 0, OPTIONAL, ANY, pcy_error*, (pcy_native_handle_args * args), (args))          \
  X(program_build, 0, PROGRAMS, ANY, pcy_error*, (pcy_program_build_args * args), (args))          \
  X(program_destroy, 0, PROGRAMS, ANY, void, (pcy_program program), (program))                     \
  X(kernel_create, 0, PROGRAMS, ANY, pcy_error*, (pcy_kernel_create_args * args), (args))          \
  X(kernel_destroy, 0, PROGRAMS, ANY, void, (pcy_kernel kernel), (kernel))                         \
  X(kernel_launch, 0, PROGRAMS, ENQUEUE, pcy_error*, (const pcy_kernel_launch_args* args), (args)) \
  X(graph_create, 2, GRAPHS, ANY, pcy_error*, (pcy_queue queue, pcy_graph * out), (queue, out))    \
  X(queue_capture_begin, 2, GRAPHS, ENQUEUE, pcy_error*, (pcy_queue queue, pcy_graph graph),       \
    (queue, graph))                                                                                \
  X(queue_capture_end, 2, GRAPHS, ENQUEUE, pcy_error*, (pcy_queue queue, pcy_graph graph),         \
    (queue, graph))                                                                                \
  X(graph_instantiate, 2, GRAPHS, ANY, pcy_error*, (pcy_graph graph), (graph))                     \
  X(graph_launch, 2, GRAPHS, ENQUEUE, pcy_error*, (pcy_queue queue, pcy_graph graph),              \
    (queue, graph))                                                                                \
  X(graph_destroy, 2, GRAPHS, ANY, void, (pcy_graph graph), (graph))

/* A struct field from a slot of a list. */
#define PCY_SLOT_FIELD(name, minor, need, thread, ret, params, args) ret(*name) params;

typedef struct pcy_framework_api {
  PCY_PLUGIN_PREFIX; /* kind == PCY_PLUGIN_FRAMEWORK */
  PCY_FRAMEWORK_API_SLOTS(PCY_SLOT_FIELD)
} pcy_framework_api;

/* The slots' positions (0, 1, ...) and their number, for layout checks and tools. */
#define PCY_SLOT_INDEX_FRAMEWORK(name, minor, need, thread, ret, params, args)                     \
  PCY_FRAMEWORK_SLOT_##name,
enum pcy_framework_slot_index {
  PCY_FRAMEWORK_API_SLOTS(PCY_SLOT_INDEX_FRAMEWORK) PCY_FRAMEWORK_SLOT_COUNT
};

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
