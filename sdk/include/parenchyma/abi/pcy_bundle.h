/* parenchyma plugin ABI: bundle plugins (one extension, such as "blas", for one framework).
 *
 * A bundle plugin exports exactly one symbol, PCY_BUNDLE_ENTRY_SYMBOL, of type
 * pcy_bundle_entry_fn, returning a pointer to a static const pcy_bundle_api.
 *
 * Ops run on the framework's own queue: the bundle reaches the framework's native objects
 * (CUstream, cl_command_queue) through the framework table's native_handle slot.
 *
 * Every op of an extension is declared once, as data, in the extension's header (in ext/): a
 * pcy_op_schema listing each argument's name, kind, intent, dtype rule and rank rule. From that
 * one table come the front-end's argument packing, the host's per-call check, the bundles'
 * decoders and the documentation. The 1.0 signature strings ("i s t< i t= i") are derived from
 * it for 1.0 hosts and bundles.
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
  PCY_OP_ARG_INT = 2,      /* i64 */
  PCY_OP_ARG_FLOAT = 3,    /* f64; the op converts to its dtype */
  PCY_OP_ARG_INT_ARRAY = 4 /* 1.1: i64 values, in the call's arg_ext (count also in `i`) */
} pcy_op_arg_kind;

/* One op argument. [owner: host; lifetime: the op call; threads: the calling thread]
 * A plain record (no struct_size) frozen for major 1; what 1.1 adds per argument is in
 * pcy_op_arg_ext, a parallel array. */
typedef struct pcy_op_arg {
  pcy_op_arg_kind kind;
  pcy_arg_intent intent; /* TENSOR only */
  const pcy_tensor* tensor;
  int64_t i; /* INT; INT_ARRAY: the element count */
  double f;
} pcy_op_arg;

/* 1.1: what an argument carries beyond pcy_op_arg, one per argument (parallel to args).
 * [owner: host; lifetime: the op call; threads: the calling thread] */
typedef struct pcy_op_arg_ext {
  size_t struct_size;
  const pcy_ext* ext;
  const int64_t* ints; /* INT_ARRAY: `count` values [host; the call]; NULL otherwise */
  uint64_t count;
} pcy_op_arg_ext;

struct pcy_op_call;
/* 1.1: temporary device memory for one op, from a pool of the backend's (not allocated per op).
 * Valid for work this op enqueues on the call's queue; the next op on the queue may reuse it.
 * `native` receives the memory's native handle (may be NULL). Called from inside the op. */
typedef pcy_error* (*pcy_workspace_fn)(const struct pcy_op_call* call, uint64_t bytes,
                                       pcy_memory* memory, void** native);

typedef struct pcy_op_call {
  size_t struct_size;
  const pcy_ext* ext;
  pcy_bundle_context context; /* from context_init */
  pcy_queue queue;            /* the backend's queue, of the context the bundle was set up on */
  const pcy_op_arg* args;     /* [host; the call] in the order the op's schema gives */
  uint32_t arg_count;
  /* --- 1.1 --- */
  const pcy_op_arg_ext* arg_ext; /* [host; the call] arg_count entries, or NULL when no argument
                                    needs one (no INT_ARRAY) */
  pcy_workspace_fn workspace;    /* NULL: the host offers no workspace (a 1.0 host) */
  void* workspace_user;          /* [host; the call] for the host's workspace function */
} pcy_op_call;

#define PCY_OP_CALL_SIZE_1_0 PCY_SIZE_THROUGH(pcy_op_call, arg_count)
#define PCY_OP_CALL_SIZE_1_1 PCY_SIZE_THROUGH(pcy_op_call, workspace_user)

typedef pcy_error* (*pcy_op_fn)(const pcy_op_call* call);

/* ---- op schemas (1.1) ----------------------------------------------------------------------
 * What a front-end passes for each argument. A SCALAR is either a FLOAT (a host value) or a
 * one-element TENSOR of the op's dtype with intent IN (a value that stays on the device). */
typedef enum pcy_schema_kind {
  PCY_SCHEMA_INT = 1,
  PCY_SCHEMA_FLOAT = 2,
  PCY_SCHEMA_SCALAR = 3,
  PCY_SCHEMA_TENSOR = 4,
  PCY_SCHEMA_INT_ARRAY = 5
} pcy_schema_kind;

#define PCY_SCHEMA_DTYPE_OP 0 /* dtype rule: the op's dtype (else a fixed pcy_dtype) */
/* 1.5: dtype rule "any dtype": the op reads the tensor's dtype from pcy_tensor::dtype (the array
 * extension's inputs). A 1.4 host refuses schemas with it (no tensor has dtype 255). */
#define PCY_SCHEMA_DTYPE_ANY 255
#define PCY_SCHEMA_RANK_ANY (-1)
/* Schema intent beyond pcy_arg_intent: an output the op overwrites where it writes and reads
 * only where its other arguments say so (beta != 0, a sub-range, an increment). The caller
 * passes OUT when every element is overwritten unread (no sync), INOUT otherwise. */
#define PCY_SCHEMA_INTENT_OVERWRITE 4

/* [owner: the extension's header; static; read-only] */
typedef struct pcy_arg_schema {
  const char* name; /* [a-z][a-z0-9_]*, unique in the op, e.g. "alpha" */
  uint8_t kind;     /* pcy_schema_kind */
  uint8_t intent;   /* TENSOR: pcy_arg_intent or PCY_SCHEMA_INTENT_OVERWRITE; otherwise 0 */
  uint8_t dtype;    /* TENSOR: PCY_SCHEMA_DTYPE_OP, a fixed pcy_dtype (e.g. I32 indices) or
                       (1.5) PCY_SCHEMA_DTYPE_ANY */
  int8_t rank;      /* TENSOR: the exact number of dimensions, or PCY_SCHEMA_RANK_ANY */
} pcy_arg_schema;

typedef struct pcy_op_schema {
  size_t struct_size;
  const pcy_ext* ext;
  const char* extension; /* e.g. "blas" */
  const char* name;      /* e.g. "gemm" */
  uint32_t arg_count;    /* at most 24 */
  const pcy_arg_schema* args;
} pcy_op_schema;

/* An op the bundle implements. Static: [plugin; until shutdown; read-only].
 * `signature` lists each argument as <kind><intent?>: "t<" tensor in, "t>" tensor out,
 * "t=" tensor inout, "i" int, "f" float, "s" scalar (a float, or a one-element tensor in),
 * "a" int array (1.1) — e.g. axpy (n, alpha, x, incx, y, incy) is "i s t< i t= i". It is what
 * a 1.0 host checks; a 1.1 bundle derives it from `schema`. */
typedef struct pcy_op_desc {
  size_t struct_size;
  const pcy_ext* ext;
  const char* name; /* e.g. "gemm" */
  pcy_dtype dtype;  /* the element type it computes in */
  const char* signature;
  pcy_op_fn fn;               /* NULL: unsupported */
  const char* implementation; /* e.g. "OpenBLAS 0.3.21 cblas_sgemm", for parenchyma-info */
  /* --- 1.1 --- */
  const pcy_op_schema* schema; /* [plugin (usually the extension's header); static] or NULL */
} pcy_op_desc;

#define PCY_OP_DESC_SIZE_1_0 PCY_SIZE_THROUGH(pcy_op_desc, implementation)
#define PCY_OP_DESC_SIZE_1_1 PCY_SIZE_THROUGH(pcy_op_desc, schema)

typedef struct pcy_bundle_init_args {
  size_t struct_size;
  const pcy_ext* ext;
  const pcy_host_services* host; /* [host; until shutdown; any] */
  pcy_bundle_plugin plugin;      /* out */
  /* out: why the bundle serves fewer ops than it could ("libcublas.so.13 not found"), or NULL.
   * [plugin; until shutdown] */
  const char* reason;
} pcy_bundle_init_args;

#define PCY_BUNDLE_INIT_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_bundle_init_args, reason)

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

#define PCY_BUNDLE_CONTEXT_ARGS_SIZE_1_0 PCY_SIZE_THROUGH(pcy_bundle_context_args, bundle)

/* The slots of pcy_bundle_api, ONE list, in table order (after the fields extension, framework
 * and min_framework_abi_minor); the columns as for PCY_FRAMEWORK_API_SLOTS (pcy_framework.h).
 * The validation layer's handles here are pcy_bundle_plugin and pcy_bundle_context.
 *   initialize, shutdown  lifecycle of the bundle instance.
 *   ops                   the ops, after initialize: [plugin; until shutdown; read-only].
 *                         Resolved once by the host.
 *   context_init          per-context state (compiled programs, library handles). Threads: one
 *   context_teardown      call at a time per context; ops on one bundle context are serialised
 *                         by the host.
 *   op_available (1.1)    whether `op` (one of this bundle's descriptors) runs on this context's
 *                         device, e.g. false for f64 ops on a device without fp64; then the host
 *                         routes it elsewhere (fallback policy) instead of failing at call time.
 *                         `reason` (may be set to NULL) [bundle; until context_teardown]. NULL
 *                         slot: every op is available. */
#define PCY_BUNDLE_API_SLOTS(X)                                                                    \
  X(initialize, 0, REQUIRED, LIFECYCLE, pcy_error*, (pcy_bundle_init_args * args), (args))         \
  X(shutdown, 0, REQUIRED, LIFECYCLE, void, (pcy_bundle_plugin plugin), (plugin))                  \
  X(ops, 0, REQUIRED, ANY, pcy_error*,                                                             \
    (pcy_bundle_plugin plugin, const pcy_op_desc** ops, size_t* count), (plugin, ops, count))      \
  X(context_init, 0, REQUIRED, ANY, pcy_error*, (pcy_bundle_context_args * args), (args))          \
  X(context_teardown, 0, REQUIRED, ANY, void, (pcy_bundle_context bundle), (bundle))               \
  X(op_available, 1, OPTIONAL, ANY, bool,                                                          \
    (pcy_bundle_context bundle, const pcy_op_desc* op, const char** reason), (bundle, op, reason))

typedef struct pcy_bundle_api {
  PCY_PLUGIN_PREFIX;     /* kind == PCY_PLUGIN_BUNDLE */
  const char* extension; /* [plugin; static] e.g. "blas" */
  const char* framework; /* [plugin; static] the framework plugin's name, e.g. "native" */
  uint32_t min_framework_abi_minor; /* framework tables older than this are refused */
  PCY_BUNDLE_API_SLOTS(PCY_SLOT_FIELD)
} pcy_bundle_api;

#define PCY_SLOT_INDEX_BUNDLE(name, minor, need, thread, ret, params, args) PCY_BUNDLE_SLOT_##name,
enum pcy_bundle_slot_index { PCY_BUNDLE_API_SLOTS(PCY_SLOT_INDEX_BUNDLE) PCY_BUNDLE_SLOT_COUNT };

#define PCY_BUNDLE_API_SIZE_1_0 PCY_SIZE_THROUGH(pcy_bundle_api, context_teardown)
#define PCY_BUNDLE_API_SIZE_1_1 PCY_SIZE_THROUGH(pcy_bundle_api, op_available)

typedef const pcy_bundle_api* (*pcy_bundle_entry_fn)(void);

/* ---- declaring a schema in an extension header ----------------------------------------------
 *   #define MYEXT_SCALE_ARGS(X) X(n, INT, 0, OP, ANY) X(alpha, SCALAR, 0, OP, ANY) \
 *                               X(x, TENSOR, INOUT, OP, ANY)
 *   PCY_DECLARE_OP_SCHEMA(myext, scale, "myext", MYEXT_SCALE_ARGS)
 * declares `myext_scale_args[]` and `myext_scale_schema` (static const in C, inline constexpr in
 * C++). The fields of X: name, kind (INT, FLOAT, SCALAR, TENSOR, INT_ARRAY), intent (0, IN, OUT,
 * INOUT, OVERWRITE), dtype (OP, ANY or a pcy_dtype suffix such as I32, U8), rank (ANY or 0..5). */
#define PCY_SCHEMA_INTENT_0 0
#define PCY_SCHEMA_INTENT_IN PCY_INTENT_IN
#define PCY_SCHEMA_INTENT_OUT PCY_INTENT_OUT
#define PCY_SCHEMA_INTENT_INOUT PCY_INTENT_INOUT
#define PCY_SCHEMA_DTYPE_F32 PCY_DTYPE_F32
#define PCY_SCHEMA_DTYPE_F64 PCY_DTYPE_F64
#define PCY_SCHEMA_DTYPE_I32 PCY_DTYPE_I32
#define PCY_SCHEMA_DTYPE_I64 PCY_DTYPE_I64
#define PCY_SCHEMA_DTYPE_U8 PCY_DTYPE_U8
#define PCY_SCHEMA_DTYPE_BOOL PCY_DTYPE_BOOL
#define PCY_SCHEMA_RANK_0 0
#define PCY_SCHEMA_RANK_1 1
#define PCY_SCHEMA_RANK_2 2
#define PCY_SCHEMA_RANK_3 3
#define PCY_SCHEMA_RANK_4 4
#define PCY_SCHEMA_RANK_5 5
#define PCY_SCHEMA_ARG(name, kind, intent, dtype, rank)                                            \
  {#name, PCY_SCHEMA_##kind, PCY_SCHEMA_INTENT_##intent, PCY_SCHEMA_DTYPE_##dtype,                 \
   PCY_SCHEMA_RANK_##rank},
#define PCY_SCHEMA_COUNT(name, kind, intent, dtype, rank) +1

#if defined(__GNUC__)
#define PCY_MAYBE_UNUSED __attribute__((unused))
#else
#define PCY_MAYBE_UNUSED
#endif

#ifndef __cplusplus
#define PCY_DECLARE_OP_SCHEMA(prefix, op, extension_name, ARGS)                                    \
  static const pcy_arg_schema prefix##_##op##_args[] PCY_MAYBE_UNUSED = {ARGS(PCY_SCHEMA_ARG)};    \
  static const pcy_op_schema prefix##_##op##_schema PCY_MAYBE_UNUSED = {                           \
      sizeof(pcy_op_schema), NULL, extension_name, #op, 0 ARGS(PCY_SCHEMA_COUNT),                  \
      prefix##_##op##_args};
#else
#define PCY_DECLARE_OP_SCHEMA(prefix, op, extension_name, ARGS)                                    \
  inline constexpr pcy_arg_schema prefix##_##op##_args[] = {ARGS(PCY_SCHEMA_ARG)};                 \
  inline constexpr pcy_op_schema prefix##_##op##_schema = {                                        \
      sizeof(pcy_op_schema), nullptr, extension_name, #op, 0 ARGS(PCY_SCHEMA_COUNT),               \
      prefix##_##op##_args};
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PCY_BUNDLE_H */
