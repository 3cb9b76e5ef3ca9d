/* A bundle as a third party wrote it against the ABI 1.0 headers (the frozen copy in abi-1.0/):
 * extension "stubext", op "negate" (f32, signature "i t="), for the framework "skew10". Its op
 * descriptors and table are 1.0-sized; the 1.1 host must route to it (matching its signature
 * with the front-end's schema) and hand it nothing it cannot read. */
#include <parenchyma/abi/pcy_bundle.h>

#include <stdlib.h>

#if PCY_ABI_VERSION_MINOR != 0
#error "this bundle must be compiled against the frozen ABI 1.0 headers"
#endif

struct pcy_bundle_plugin_s {
  int unused;
};
struct pcy_bundle_context_s {
  const pcy_framework_api* fw;
};
static struct pcy_bundle_plugin_s the_plugin;

static void destroy_error(pcy_error* e) { free(e); }
static pcy_error* fail(const char* message) {
  pcy_error* e = (pcy_error*)malloc(sizeof *e);
  if (e == NULL) return NULL;
  e->struct_size = sizeof *e;
  e->ext = NULL;
  e->code = PCY_ERR_INVALID_ARGUMENT;
  e->message = message;
  e->origin = "skewext_skew10";
  e->destroy = destroy_error;
  return e;
}

static pcy_error* negate(const pcy_op_call* call) {
  /* What a 1.0 bundle can rely on: the 1.0 fields of the call. */
  if (call->struct_size < sizeof(pcy_op_call) || call->arg_count != 2) return fail("bad call");
  if (call->args[0].kind != PCY_OP_ARG_INT || call->args[1].kind != PCY_OP_ARG_TENSOR)
    return fail("bad argument kinds");
  const pcy_tensor* t = call->args[1].tensor;
  pcy_native_handle_args a = {sizeof a, NULL, PCY_NATIVE_MEMORY, NULL, 0, NULL, t->memory, NULL};
  pcy_error* e = call->context->fw->native_handle(&a);
  if (e != NULL) return e;
  float* x = (float*)((char*)a.handle + t->byte_offset);
  for (int64_t i = 0; i < call->args[0].i; ++i)
    x[i] = -x[i];
  return NULL;
}

static const pcy_op_desc ops[] = {
    {sizeof(pcy_op_desc), NULL, "negate", PCY_DTYPE_F32, "i t=", negate, "skew 1.0 negate"}};

static pcy_error* initialize(pcy_bundle_init_args* a) {
  a->plugin = &the_plugin;
  a->reason = NULL;
  return NULL;
}
static void shutdown(pcy_bundle_plugin p) { (void)p; }
static pcy_error* get_ops(pcy_bundle_plugin p, const pcy_op_desc** out, size_t* n) {
  (void)p;
  *out = ops;
  *n = 1;
  return NULL;
}
static pcy_error* context_init(pcy_bundle_context_args* a) {
  struct pcy_bundle_context_s* c = (struct pcy_bundle_context_s*)malloc(sizeof *c);
  if (c == NULL) return fail("no memory");
  c->fw = a->framework;
  a->bundle = c;
  return NULL;
}
static void context_teardown(pcy_bundle_context c) { free(c); }

static const pcy_bundle_api table = {sizeof(pcy_bundle_api),
                                     NULL,
                                     PCY_ABI_VERSION_MAJOR,
                                     PCY_ABI_VERSION_MINOR,
                                     PCY_PLUGIN_BUNDLE,
                                     "skewext_skew10",
                                     "1.0",
                                     "a bundle built against the frozen ABI 1.0 headers",
                                     "stubext",
                                     "skew10",
                                     0,
                                     initialize,
                                     shutdown,
                                     get_ops,
                                     context_init,
                                     context_teardown};

PCY_EXPORT const pcy_bundle_api* pcy_bundle_entry(void) { return &table; }
