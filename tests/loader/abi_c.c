/* The ABI headers compiled as plain C (built as C99 and as C11 with -Wall -Wextra -pedantic
 * -Werror): proves they are C, not C++ in disguise, and pins the layout rules every struct must
 * keep — struct_size first, the extension chain second, the frozen plugin prefix identical in
 * every entry table. Run as a test, it also checks PCY_HAS_FIELD on a truncated struct. */
#include <parenchyma/abi/ext/pcy_blas.h>
#include <parenchyma/abi/ext/pcy_coll.h>
#include <parenchyma/abi/ext/pcy_nn.h>
#include <parenchyma/abi/pcy_base.h>
#include <parenchyma/abi/pcy_bundle.h>
#include <parenchyma/abi/pcy_framework.h>

#include <stdio.h>
#include <string.h>

/* C99 has no _Static_assert; a negative array size is the portable compile-time failure. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define ABI_ASSERT(cond, tag) _Static_assert(cond, #tag)
#else
#define ABI_ASSERT(cond, tag) typedef char abi_assert_##tag[(cond) ? 1 : -1]
#endif

/* Every ABI struct opens with struct_size, then ext. */
#define HEADER_RULE(T)                                                                             \
  ABI_ASSERT(offsetof(T, struct_size) == 0, T##_struct_size_first);                                \
  ABI_ASSERT(offsetof(T, ext) == sizeof(size_t), T##_ext_second);                                  \
  ABI_ASSERT(sizeof(((T*)0)->struct_size) == sizeof(size_t), T##_size_type)

/* The extension node itself: struct_size first, then the link to the next node. */
ABI_ASSERT(offsetof(pcy_ext, struct_size) == 0, pcy_ext_struct_size_first);
ABI_ASSERT(offsetof(pcy_ext, next) == sizeof(size_t), pcy_ext_next_second);
HEADER_RULE(pcy_error);
HEADER_RULE(pcy_host_services);
HEADER_RULE(pcy_plugin_prefix);
HEADER_RULE(pcy_memory_handle);
HEADER_RULE(pcy_tensor);
HEADER_RULE(pcy_property);
HEADER_RULE(pcy_framework_init_args);
HEADER_RULE(pcy_framework_probe);
HEADER_RULE(pcy_memory_alloc_args);
HEADER_RULE(pcy_memory_transfer_args);
HEADER_RULE(pcy_memory_copy_args);
HEADER_RULE(pcy_memory_fill_args);
HEADER_RULE(pcy_memory_export_args);
HEADER_RULE(pcy_memory_import_args);
HEADER_RULE(pcy_native_handle_args);
HEADER_RULE(pcy_program_build_args);
HEADER_RULE(pcy_kernel_create_args);
HEADER_RULE(pcy_kernel_launch_args);
HEADER_RULE(pcy_framework_api);
HEADER_RULE(pcy_op_call);
HEADER_RULE(pcy_op_desc);
HEADER_RULE(pcy_bundle_init_args);
HEADER_RULE(pcy_bundle_context_args);
HEADER_RULE(pcy_bundle_api);
HEADER_RULE(pcy_op_arg_ext);
HEADER_RULE(pcy_op_schema);

/* The frozen prefix sits at the same offsets in every entry table, so a host can read any
 * plugin's abi_major before trusting anything else in its table. */
#define PREFIX_RULE(T, f)                                                                          \
  ABI_ASSERT(offsetof(T, f) == offsetof(pcy_plugin_prefix, f), T##_prefix_##f)
#define PREFIX_RULES(T)                                                                            \
  PREFIX_RULE(T, abi_major);                                                                       \
  PREFIX_RULE(T, abi_minor);                                                                       \
  PREFIX_RULE(T, kind);                                                                            \
  PREFIX_RULE(T, name);                                                                            \
  PREFIX_RULE(T, plugin_version);                                                                  \
  PREFIX_RULE(T, description)
PREFIX_RULES(pcy_framework_api);
PREFIX_RULES(pcy_bundle_api);

/* The 1.0 framework table: its first slot follows the prefix; the program slots come last, so a
 * 1.0 plugin without them can end its table early (see the loader's older-minor stub). */
ABI_ASSERT(PCY_FRAMEWORK_API_SIZE_1_0 <= sizeof(pcy_framework_api), framework_size_1_0);

/* The size pins, as numbers on LP64 (x86-64, aarch64): a pin that moved means a field was
 * inserted, removed or retyped in that minor's part of the struct — a major change. */
#if defined(__LP64__)
ABI_ASSERT(PCY_FRAMEWORK_API_SIZE_1_0 == 272, pin_framework_api_1_0);
ABI_ASSERT(PCY_FRAMEWORK_API_SIZE_1_2 == 320, pin_framework_api_1_2);
ABI_ASSERT(PCY_BUNDLE_API_SIZE_1_0 == 120, pin_bundle_api_1_0);
ABI_ASSERT(PCY_BUNDLE_API_SIZE_1_1 == 128, pin_bundle_api_1_1);
ABI_ASSERT(PCY_OP_CALL_SIZE_1_0 == 44, pin_op_call_1_0);
ABI_ASSERT(PCY_OP_CALL_SIZE_1_1 == 72, pin_op_call_1_1);
ABI_ASSERT(PCY_OP_DESC_SIZE_1_0 == 56, pin_op_desc_1_0);
ABI_ASSERT(PCY_OP_DESC_SIZE_1_1 == 64, pin_op_desc_1_1);
ABI_ASSERT(PCY_HOST_SERVICES_SIZE_1_0 == 56, pin_host_services_1_0);
ABI_ASSERT(PCY_HOST_SERVICES_SIZE_1_1 == 72, pin_host_services_1_1);
ABI_ASSERT(PCY_HOST_SERVICES_SIZE_1_4 == 88, pin_host_services_1_4);
ABI_ASSERT(PCY_BUNDLE_CONTEXT_ARGS_SIZE_1_0 == 72, pin_bundle_context_args_1_0);
ABI_ASSERT(PCY_BUNDLE_INIT_ARGS_SIZE_1_0 == 40, pin_bundle_init_args_1_0);
ABI_ASSERT(PCY_PROPERTY_SIZE_1_0 == 56, pin_property_1_0);
ABI_ASSERT(PCY_TENSOR_SIZE_1_0 == 64, pin_tensor_1_0);
ABI_ASSERT(PCY_MEMORY_HANDLE_SIZE_1_0 == 73, pin_memory_handle_1_0);
ABI_ASSERT(PCY_KERNEL_CREATE_ARGS_SIZE_1_0 == 40, pin_kernel_create_args_1_0);
ABI_ASSERT(PCY_KERNEL_CREATE_ARGS_SIZE_1_3 == 44, pin_kernel_create_args_1_3);
ABI_ASSERT(sizeof(pcy_op_arg) == 32, op_arg_record_frozen);
ABI_ASSERT(sizeof(pcy_kernel_arg) == 32, kernel_arg_record_frozen);
#endif
/* 1.1 fields come after every 1.0 field of their struct. */
ABI_ASSERT(offsetof(pcy_op_call, arg_ext) >= PCY_OP_CALL_SIZE_1_0, op_call_1_1_after_1_0);
ABI_ASSERT(offsetof(pcy_op_desc, schema) >= PCY_OP_DESC_SIZE_1_0, op_desc_1_1_after_1_0);
ABI_ASSERT(offsetof(pcy_host_services, setting) >= PCY_HOST_SERVICES_SIZE_1_0,
           host_services_1_1_after_1_0);
ABI_ASSERT(offsetof(pcy_host_services, progress) >= PCY_HOST_SERVICES_SIZE_1_1,
           host_services_1_4_after_1_1);
ABI_ASSERT(offsetof(pcy_bundle_api, op_available) >= PCY_BUNDLE_API_SIZE_1_0,
           bundle_api_1_1_after_1_0);
ABI_ASSERT(offsetof(pcy_framework_api, initialize) >= sizeof(pcy_plugin_prefix),
           framework_slots_after_prefix);
ABI_ASSERT(offsetof(pcy_framework_api, kernel_launch) + sizeof(void (*)(void)) ==
               PCY_FRAMEWORK_API_SIZE_1_0,
           framework_kernel_launch_last_of_1_0);
/* 1.2: the graph slots come after every 1.0 slot, graph_destroy last. */
ABI_ASSERT(offsetof(pcy_framework_api, graph_create) >= PCY_FRAMEWORK_API_SIZE_1_0,
           framework_1_2_after_1_0);
ABI_ASSERT(PCY_FRAMEWORK_API_SIZE_1_2 == sizeof(pcy_framework_api), framework_graph_destroy_last);
/* 1.3: kernel flags after every 1.0 field of pcy_kernel_create_args. */
ABI_ASSERT(offsetof(pcy_kernel_create_args, flags) >= PCY_KERNEL_CREATE_ARGS_SIZE_1_0,
           kernel_create_args_1_3_after_1_0);
ABI_ASSERT(offsetof(pcy_bundle_api, extension) >= sizeof(pcy_plugin_prefix),
           bundle_fields_after_prefix);

/* The slot lists (PCY_FRAMEWORK_API_SLOTS, PCY_BUNDLE_API_SLOTS) pin every slot, generated:
 * - its place: slot k lies k function pointers after the table's first slot (nothing inserted
 *   between slots, no slot retyped to another size);
 * - its minor: it lies after the size pin of the minor before its own and inside the pin of its
 *   own minor, so slots are appended in minor order and a slot's minor column tells the truth.
 * A slot of a minor that has no pin here yet fails to compile: add the minor's size pin to the
 * header and its two lines below. */
#define SLOT_BYTES sizeof(void (*)(void))
#define FW_BEFORE_0 offsetof(pcy_framework_api, initialize)
#define FW_BEFORE_1 PCY_FRAMEWORK_API_SIZE_1_0
#define FW_BEFORE_2 PCY_FRAMEWORK_API_SIZE_1_0
#define FW_BEFORE_3 PCY_FRAMEWORK_API_SIZE_1_2
#define FW_THROUGH_0 PCY_FRAMEWORK_API_SIZE_1_0
#define FW_THROUGH_1 PCY_FRAMEWORK_API_SIZE_1_0
#define FW_THROUGH_2 PCY_FRAMEWORK_API_SIZE_1_2
#define FW_THROUGH_3 PCY_FRAMEWORK_API_SIZE_1_2
#define B_BEFORE_0 offsetof(pcy_bundle_api, initialize)
#define B_BEFORE_1 PCY_BUNDLE_API_SIZE_1_0
#define B_BEFORE_2 PCY_BUNDLE_API_SIZE_1_1
#define B_BEFORE_3 PCY_BUNDLE_API_SIZE_1_1
#define B_THROUGH_0 PCY_BUNDLE_API_SIZE_1_0
#define B_THROUGH_1 PCY_BUNDLE_API_SIZE_1_1
#define B_THROUGH_2 PCY_BUNDLE_API_SIZE_1_1
#define B_THROUGH_3 PCY_BUNDLE_API_SIZE_1_1
#define SLOT_PINS(T, P, first, index, name, minor)                                                 \
  ABI_ASSERT(offsetof(T, name) == offsetof(T, first) + (size_t)(index)*SLOT_BYTES,                 \
             T##_##name##_place);                                                                  \
  ABI_ASSERT(sizeof(((T*)0)->name) == SLOT_BYTES, T##_##name##_pointer);                           \
  ABI_ASSERT(offsetof(T, name) >= P##_BEFORE_##minor, T##_##name##_after_earlier_minors);          \
  ABI_ASSERT(PCY_SIZE_THROUGH(T, name) <= P##_THROUGH_##minor, T##_##name##_inside_its_minor);
#define FW_SLOT_PINS(name, minor, need, thread, ret, params, args)                                 \
  SLOT_PINS(pcy_framework_api, FW, initialize, PCY_FRAMEWORK_SLOT_##name, name, minor)
#define B_SLOT_PINS(name, minor, need, thread, ret, params, args)                                  \
  SLOT_PINS(pcy_bundle_api, B, initialize, PCY_BUNDLE_SLOT_##name, name, minor)
PCY_FRAMEWORK_API_SLOTS(FW_SLOT_PINS)
PCY_BUNDLE_API_SLOTS(B_SLOT_PINS)
/* The tables end with their last slot; the bundle's fields before its slots keep their order. */
ABI_ASSERT(offsetof(pcy_framework_api, initialize) + PCY_FRAMEWORK_SLOT_COUNT * SLOT_BYTES ==
               sizeof(pcy_framework_api),
           framework_slots_last);
ABI_ASSERT(offsetof(pcy_bundle_api, initialize) + PCY_BUNDLE_SLOT_COUNT * SLOT_BYTES ==
               sizeof(pcy_bundle_api),
           bundle_slots_last);
#define BEFORE(T, a, b) ABI_ASSERT(offsetof(T, a) < offsetof(T, b), T##_##a##_before_##b)
BEFORE(pcy_bundle_api, extension, framework);
BEFORE(pcy_bundle_api, framework, min_framework_abi_minor);
BEFORE(pcy_bundle_api, min_framework_abi_minor, initialize);

/* Values written into enums are part of the ABI. */
ABI_ASSERT(PCY_OK == 0 && PCY_ERR_LAUNCH == 10, status_values);
ABI_ASSERT(PCY_PLUGIN_FRAMEWORK == 1 && PCY_PLUGIN_BUNDLE == 2, plugin_kind_values);
ABI_ASSERT(PCY_DEVICE_CPU == 1 && PCY_DEVICE_GPU == 2 && PCY_DEVICE_ACCELERATOR == 3,
           device_kind_values);
ABI_ASSERT(PCY_HANDLE_HOST_POINTER == 1 && PCY_HANDLE_OPENCL_BUFFER == 3, handle_kind_values);
ABI_ASSERT(PCY_INTENT_IN == 1 && PCY_INTENT_OUT == 2 && PCY_INTENT_INOUT == 3, intent_values);
ABI_ASSERT(PCY_ABI_VERSION_MAJOR == 1, abi_major_is_1);
ABI_ASSERT(PCY_ABI_VERSION_MINOR == 5, abi_minor_is_5);
ABI_ASSERT(PCY_KERNEL_WAITS_FOR_PRIOR == 1, kernel_flag_values);
ABI_ASSERT(PCY_DTYPE_U8 == 5 && PCY_DTYPE_F16 == 6 && PCY_DTYPE_BF16 == 7, dtype_values);
ABI_ASSERT(PCY_DTYPE_I8 == 8 && PCY_DTYPE_I16 == 9 && PCY_DTYPE_BOOL == 10, dtype_values_1_5);
ABI_ASSERT(PCY_SCHEMA_DTYPE_ANY == 255, schema_dtype_any);
ABI_ASSERT(PCY_OP_ARG_FLOAT == 3 && PCY_OP_ARG_INT_ARRAY == 4, op_arg_kind_values);
ABI_ASSERT(PCY_SCHEMA_INT == 1 && PCY_SCHEMA_INT_ARRAY == 5 && PCY_SCHEMA_INTENT_OVERWRITE == 4,
           schema_values);

int main(void) {
  /* A sender that knew only the first three fields of pcy_memory_handle. */
  pcy_memory_handle h;
  int failures = 0;
  memset(&h, 0, sizeof h);
  h.struct_size = offsetof(pcy_memory_handle, bytes);
  if (!PCY_HAS_FIELD(&h, pcy_memory_handle, kind)) {
    puts("FAIL: PCY_HAS_FIELD says kind is absent from a struct that has it");
    ++failures;
  }
  if (PCY_HAS_FIELD(&h, pcy_memory_handle, bytes)) {
    puts("FAIL: PCY_HAS_FIELD says bytes is present beyond struct_size");
    ++failures;
  }
  h.struct_size = sizeof h;
  if (!PCY_HAS_FIELD(&h, pcy_memory_handle, pinned)) {
    puts("FAIL: PCY_HAS_FIELD misses the last field of a full struct");
    ++failures;
  }
  /* The schemas are usable from C: gemm has 13 arguments, C is #11 and overwritten. */
  if (pcy_blas_gemm_schema.arg_count != 13 || strcmp(pcy_blas_gemm_args[11].name, "C") != 0 ||
      pcy_blas_gemm_args[11].intent != PCY_SCHEMA_INTENT_OVERWRITE ||
      pcy_blas_gemm_args[6].rank != 2 || pcy_blas_schemas[0] != &pcy_blas_asum_schema) {
    puts("FAIL: the BLAS schemas read wrong from C");
    ++failures;
  }
  /* 1.5: gemm_batched, appended (17 arguments; A, B, C of any rank; batch last). */
  if (PCY_BLAS_OP_COUNT != 11 || pcy_blas_schemas[10] != &pcy_blas_gemm_batched_schema ||
      pcy_blas_gemm_batched_schema.arg_count != 17 ||
      strcmp(pcy_blas_gemm_batched_args[13].name, "C") != 0 ||
      pcy_blas_gemm_batched_args[13].intent != PCY_SCHEMA_INTENT_OVERWRITE ||
      strcmp(pcy_blas_gemm_batched_args[8].name, "stride_a") != 0 ||
      strcmp(pcy_blas_gemm_batched_args[16].name, "batch") != 0 ||
      pcy_blas_gemm_batched_args[6].rank != PCY_SCHEMA_RANK_ANY) {
    puts("FAIL: blas.gemm_batched's schema reads wrong from C");
    ++failures;
  }
  if (strcmp(PCY_FRAMEWORK_ENTRY_SYMBOL, "pcy_framework_entry") != 0 ||
      strcmp(PCY_BUNDLE_ENTRY_SYMBOL, "pcy_bundle_entry") != 0 ||
      strcmp(PCY_BLAS_EXTENSION, "blas") != 0) {
    puts("FAIL: entry symbol or extension names changed");
    ++failures;
  }
  printf("ABI %d.%d: framework table %u bytes, bundle table %u bytes, C %ld\n",
         PCY_ABI_VERSION_MAJOR, PCY_ABI_VERSION_MINOR, (unsigned)sizeof(pcy_framework_api),
         (unsigned)sizeof(pcy_bundle_api),
#ifdef __STDC_VERSION__
         (long)__STDC_VERSION__
#else
         0L
#endif
  );
  return failures == 0 ? 0 : 1;
}
