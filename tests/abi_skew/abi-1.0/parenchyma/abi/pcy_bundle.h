/* parenchyma plugin ABI: bundle plugins (one extension, such as "blas", for one framework).
 *
 * A bundle plugin exports exactly one symbol, PCY_BUNDLE_ENTRY_SYMBOL, of type
 * pcy_bundle_entry_fn, returning a pointer to a static const pcy_bundle_api.
 *
 * Ops run on the framework's own queue: the bundle reaches the framework's native objects
 * (CUstream, cl_command_queue) through the framework table's native_handle slot.
 */
#ifndef PCY_BUNDLE_H
#define PCY_BUNDLE_H

#include "pcy_base.h"
#include "pcy_framework.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PCY_BUNDLE_ENTRY_SYMBOL "pcy_bundle_entry"

typedef enum pcy_arg_intent {
  PCY_INTENT_IN = 1,   /* read: the host syncs this argument onto the op's device first */
  PCY_INTENT_OUT = 2,  /* write-only: no sync; every other copy becomes stale */
  PCY_INTENT_INOUT = 3 /* read and write: synced first, other copies stale afterwards */
} pcy_arg_intent;

typedef enum pcy_op_arg_kind {
  PCY_OP_ARG_TENSOR = 1,
  PCY_OP_ARG_INT = 2,  /* i64 */
  PCY_OP_ARG_FLOAT = 3 /* f64; the op converts to its dtype */
} pcy_op_arg_kind;

/* One op argument. [owner: host; lifetime: the op call; threads: the calling thread] */
typedef struct pcy_op_arg {
  pcy_op_arg_kind kind;
  pcy_arg_intent intent; /* TENSOR only */
  const pcy_tensor* tensor;
  int64_t i;
  double f;
} pcy_op_arg;

typedef struct pcy_op_call {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_bundle_context context; /* from context_init */
  pcy_queue queue;            /* the backend's queue, of the context the bundle was set up on */
  const pcy_op_arg* args;     /* [host; the call] in the order the op's signature gives */
  uint32_t arg_count;
} pcy_op_call;

typedef pcy_error* (*pcy_op_fn)(const pcy_op_call* call);

/* An op the bundle implements. Static: [plugin; until shutdown; read-only].
 * `signature` lists each argument as <kind><intent?>: "t<" tensor in, "t>" tensor out,
 * "t=" tensor inout, "i" int, "f" float — e.g. axpy is "f t< t=". The extension's header
 * (e.g. pcy_blas.h) fixes the signatures; the host checks a bundle's against its own. */
typedef struct pcy_op_desc {
  size_t struct_size;
  const pcy_ext* ext;
  const char* name; /* e.g. "gemm" */
  pcy_dtype dtype;  /* the element type it computes in */
  const char* signature;
  pcy_op_fn fn;               /* NULL: unsupported */
  const char* implementation; /* e.g. "OpenBLAS 0.3.21 cblas_sgemm", for parenchyma-info */
} pcy_op_desc;

typedef struct pcy_bundle_init_args {
  size_t struct_size;
  const pcy_ext* ext;
  const pcy_host_services* host; /* [host; until shutdown; any] */
  pcy_bundle_plugin plugin;      /* out */
  /* out: why the bundle serves fewer ops than it could ("libcublas.so.13 not found"), or NULL.
   * [plugin; until shutdown] */
  const char* reason;
} pcy_bundle_init_args;

typedef struct pcy_bundle_context_args {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_bundle_plugin plugin;
  const pcy_framework_api* framework; /* [host; until context_teardown] the framework's table */
  pcy_plugin framework_plugin;        /* the framework's plugin instance */
  pcy_context context;
  uint32_t device;           /* index into the context's devices (for memory_alloc, queues) */
  uint32_t plugin_device;    /* the same device as an index into the plugin's device list
                                (for device_properties) */
  pcy_queue queue;           /* the backend's queue; ops are enqueued on it */
  pcy_bundle_context bundle; /* out */
} pcy_bundle_context_args;

typedef struct pcy_bundle_api {
  PCY_PLUGIN_PREFIX;     /* kind == PCY_PLUGIN_BUNDLE */
  const char* extension; /* [plugin; static] e.g. "blas" */
  const char* framework; /* [plugin; static] the framework plugin's name, e.g. "native" */
  uint32_t min_framework_abi_minor; /* framework tables older than this are refused */

  pcy_error* (*initialize)(pcy_bundle_init_args* args);
  void (*shutdown)(pcy_bundle_plugin plugin);
  /* The ops, after initialize: [plugin; until shutdown; read-only]. Resolved once by the host. */
  pcy_error* (*ops)(pcy_bundle_plugin plugin, const pcy_op_desc** ops, size_t* count);
  /* Per-context state (compiled programs, library handles). Threads: one call at a time per
   * context; ops on one bundle context are serialised by the host. */
  pcy_error* (*context_init)(pcy_bundle_context_args* args);
  void (*context_teardown)(pcy_bundle_context bundle);
} pcy_bundle_api;

typedef const pcy_bundle_api* (*pcy_bundle_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PCY_BUNDLE_H */
