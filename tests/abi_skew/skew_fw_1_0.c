/* A framework plugin as a third party wrote it against the ABI 1.0 headers (a frozen copy of
 * them is in abi-1.0/, and this file is compiled against that copy only): plain C, one device
 * whose "device memory" is host memory. The 1.1 host must load it with reduced capability and
 * never read or call past what 1.0 defines. Name "skew10". */
#include <parenchyma/abi/pcy_framework.h>

#include <stdlib.h>
#include <string.h>

#if PCY_ABI_VERSION_MINOR != 0
#error "this plugin must be compiled against the frozen ABI 1.0 headers"
#endif

struct pcy_plugin_s {
  int unused;
};
struct pcy_context_s {
  int unused;
};
struct pcy_queue_s {
  int unused;
};
struct pcy_memory_s {
  void* bytes;
  uint64_t size;
  int owned;
};

static struct pcy_plugin_s the_plugin;
static const pcy_property props[] = {
    {sizeof(pcy_property), NULL, PCY_PROP_NAME, PCY_VALUE_STRING, "Skew 1.0 Device", 0, 0},
    {sizeof(pcy_property), NULL, PCY_PROP_VENDOR, PCY_VALUE_STRING, "parenchyma tests", 0, 0},
    {sizeof(pcy_property), NULL, PCY_PROP_KIND, PCY_VALUE_INT, NULL, PCY_DEVICE_ACCELERATOR, 0},
    {sizeof(pcy_property), NULL, PCY_PROP_HOST_UNIFIED, PCY_VALUE_BOOL, NULL, 1, 0}};

static void destroy_error(pcy_error* e) { free(e); }
static pcy_error* fail(pcy_status code, const char* message) {
  pcy_error* e = (pcy_error*)malloc(sizeof *e);
  if (e == NULL) return NULL;
  e->struct_size = sizeof *e;
  e->ext = NULL;
  e->code = code;
  e->message = message;
  e->origin = "skew10";
  e->destroy = destroy_error;
  return e;
}

static pcy_error* initialize(pcy_framework_init_args* a) {
  if (a->struct_size < sizeof *a || a->host == NULL || a->host->host_abi_major != 1)
    return fail(PCY_ERR_VERSION, "needs an ABI 1 host");
  a->plugin = &the_plugin;
  return NULL;
}
static void shutdown(pcy_plugin p) { (void)p; }
static pcy_error* probe(pcy_plugin p, pcy_framework_probe* out) {
  (void)p;
  out->device_count = 1;
  out->reason = NULL;
  return NULL;
}
static pcy_error* device_properties(pcy_plugin p, uint32_t d, const pcy_property** out, size_t* n) {
  (void)p;
  if (d != 0) return fail(PCY_ERR_NOT_FOUND, "no such device");
  *out = props;
  *n = sizeof props / sizeof props[0];
  return NULL;
}
static pcy_error* context_create(pcy_plugin p, const uint32_t* d, uint32_t n, pcy_context* out) {
  (void)p;
  if (n != 1 || d[0] != 0) return fail(PCY_ERR_NOT_FOUND, "one device only");
  *out = (pcy_context)malloc(sizeof(struct pcy_context_s));
  return *out ? NULL : fail(PCY_ERR_OUT_OF_MEMORY, "no memory");
}
static void context_destroy(pcy_context c) { free(c); }
static pcy_error* queue_create(pcy_context c, uint32_t d, pcy_queue* out) {
  (void)c;
  (void)d;
  *out = (pcy_queue)malloc(sizeof(struct pcy_queue_s));
  return *out ? NULL : fail(PCY_ERR_OUT_OF_MEMORY, "no memory");
}
static void queue_destroy(pcy_queue q) { free(q); }
static pcy_error* queue_finish(pcy_queue q) {
  (void)q;
  return NULL;
}
static pcy_error* memory_alloc(pcy_memory_alloc_args* a) {
  pcy_memory m = (pcy_memory)malloc(sizeof *m);
  if (m == NULL) return fail(PCY_ERR_OUT_OF_MEMORY, "no memory");
  m->bytes = calloc(1, (size_t)a->bytes);
  m->size = a->bytes;
  m->owned = 1;
  if (m->bytes == NULL) {
    free(m);
    return fail(PCY_ERR_OUT_OF_MEMORY, "no memory");
  }
  a->memory = m;
  return NULL;
}
static void memory_free(pcy_memory m) {
  if (m->owned) free(m->bytes);
  free(m);
}
static pcy_error* memory_read(const pcy_memory_transfer_args* a) {
  if (a->offset + a->bytes > a->memory->size) return fail(PCY_ERR_INVALID_ARGUMENT, "past the end");
  memcpy(a->host_pointer, (char*)a->memory->bytes + a->offset, (size_t)a->bytes);
  return NULL;
}
static pcy_error* memory_write(const pcy_memory_transfer_args* a) {
  if (a->offset + a->bytes > a->memory->size) return fail(PCY_ERR_INVALID_ARGUMENT, "past the end");
  memcpy((char*)a->memory->bytes + a->offset, a->host_pointer, (size_t)a->bytes);
  return NULL;
}
static pcy_error* native_handle(pcy_native_handle_args* a) {
  if (a->object != PCY_NATIVE_MEMORY) return fail(PCY_ERR_UNSUPPORTED, "memory only");
  a->handle = a->memory->bytes;
  return NULL;
}

/* The 1.0 table: no events, copy, fill, export/import or programs (reduced capability). */
static const pcy_framework_api table = {sizeof(pcy_framework_api),
                                        NULL,
                                        PCY_ABI_VERSION_MAJOR,
                                        PCY_ABI_VERSION_MINOR,
                                        PCY_PLUGIN_FRAMEWORK,
                                        "skew10",
                                        "1.0",
                                        "a plugin built against the frozen ABI 1.0 headers",
                                        initialize,
                                        shutdown,
                                        probe,
                                        device_properties,
                                        context_create,
                                        context_destroy,
                                        queue_create,
                                        queue_destroy,
                                        queue_finish,
                                        NULL,
                                        NULL,
                                        NULL,
                                        NULL,
                                        memory_alloc,
                                        memory_free,
                                        memory_read,
                                        memory_write,
                                        NULL,
                                        NULL,
                                        NULL,
                                        NULL,
                                        native_handle,
                                        NULL,
                                        NULL,
                                        NULL,
                                        NULL,
                                        NULL};

PCY_EXPORT const pcy_framework_api* pcy_framework_entry(void) { return &table; }
