// libFuzzer target: the plugin loader's stages after dlopen, fed plugin tables whose every field
// comes from the fuzzer — table sizes, ABI versions, kinds, names, NULL slots, device counts,
// property arrays (counts, element sizes, keys, value types), bundle op tables (counts, element
// sizes, names, dtypes, signatures, NULL functions) — then ranking, selection, context creation
// and op resolution over what loaded. The host must refuse what is wrong at its stage and never
// crash. What a real plugin could not lie about without the host being unable to tell (a
// pointer to memory that is not there, a string without its NUL, an array shorter than the
// count it claims) is kept honest: pointers are NULL or valid, arrays are as long as claimed.
#include "internal.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace parenchyma;

// The fake plugin's answers, rebuilt for every input.
struct script {
  std::deque<std::string> strings; // stable storage for every string handed out
  uint32_t device_count = 0;
  bool probe_fails = false, init_fails = false, null_instance = false, null_context = false;
  std::vector<std::vector<unsigned char>> props; // per device: count * stride bytes
  std::vector<size_t> prop_counts;
  std::vector<bool> prop_fail, prop_null;
  std::vector<unsigned char> ops;
  size_t op_count = 0;
  bool ops_null = false, ops_fail = false;
};
script* g = nullptr;

const char* keep(std::string s) { return g->strings.emplace_back(std::move(s)).c_str(); }

const char* fuzz_string(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 6)) {
  case 0: return nullptr;
  case 1: return keep("stub");
  case 2: return keep("native");
  case 3: return keep("negate");
  case 4: return keep(PCY_PROP_KIND);
  case 5: return keep(PCY_PROP_NAME);
  default: return keep(in.ConsumeRandomLengthString(80));
  }
}

pcy_error* fail(const char* what) {
  auto* e = static_cast<pcy_error*>(std::malloc(sizeof(pcy_error)));
  e->struct_size = sizeof *e;
  e->ext = nullptr;
  e->code = PCY_ERR_DEVICE;
  e->message = what;
  e->origin = "fuzz";
  e->destroy = [](pcy_error* x) { std::free(x); };
  return e;
}

int dummy;
pcy_error* initialize(pcy_framework_init_args* a) {
  if (g->init_fails) return fail("init fails");
  a->plugin = g->null_instance ? nullptr : reinterpret_cast<pcy_plugin>(&dummy);
  return nullptr;
}
void shutdown(pcy_plugin) {}
pcy_error* probe(pcy_plugin, pcy_framework_probe* p) {
  if (g->probe_fails) return fail("probe fails");
  p->device_count = g->device_count;
  p->reason = nullptr;
  return nullptr;
}
pcy_error* device_properties(pcy_plugin, uint32_t d, const pcy_property** out, size_t* n) {
  if (d >= g->props.size() || g->prop_fail[d]) return fail("no such device");
  *out = g->prop_null[d] ? nullptr : reinterpret_cast<const pcy_property*>(g->props[d].data());
  *n = g->prop_counts[d];
  return nullptr;
}
pcy_error* context_create(pcy_plugin, const uint32_t*, uint32_t, pcy_context* out) {
  *out = g->null_context ? nullptr : reinterpret_cast<pcy_context>(&dummy);
  return nullptr;
}
void context_destroy(pcy_context) {}
pcy_error* queue_create(pcy_context, uint32_t, pcy_queue* out) {
  *out = reinterpret_cast<pcy_queue>(&dummy);
  return nullptr;
}
void queue_destroy(pcy_queue) {}
pcy_error* queue_finish(pcy_queue) { return nullptr; }
pcy_error* memory_alloc(pcy_memory_alloc_args*) { return fail("no memory"); }
void memory_free(pcy_memory) {}
pcy_error* memory_rw(const pcy_memory_transfer_args*) { return fail("no memory"); }

pcy_error* bundle_initialize(pcy_bundle_init_args* a) {
  if (g->init_fails) return fail("init fails");
  a->plugin = g->null_instance ? nullptr : reinterpret_cast<pcy_bundle_plugin>(&dummy);
  a->reason = nullptr;
  return nullptr;
}
void bundle_shutdown(pcy_bundle_plugin) {}
pcy_error* bundle_ops(pcy_bundle_plugin, const pcy_op_desc** out, size_t* n) {
  if (g->ops_fail) return fail("ops fails");
  *out = g->ops_null ? nullptr : reinterpret_cast<const pcy_op_desc*>(g->ops.data());
  *n = g->op_count;
  return nullptr;
}
pcy_error* context_init(pcy_bundle_context_args* a) {
  a->bundle = nullptr;
  return nullptr;
}
void context_teardown(pcy_bundle_context) {}
pcy_error* op_fn(const pcy_op_call*) { return nullptr; }

// An array of `count` elements of `stride` bytes: each element's known fields filled from the
// fuzzer, struct_size set to the stride (the host walks by element 0's struct_size), the rest
// of each element fuzz bytes.
template <class T, class Fill>
std::vector<unsigned char> array_of(FuzzedDataProvider& in, size_t count, size_t stride,
                                    Fill fill) {
  std::vector<unsigned char> bytes(count * stride + sizeof(T));
  for (size_t i = 0; i < count; ++i) {
    T element{};
    fill(element);
    element.struct_size = stride;
    const size_t n = std::min(stride, sizeof(T));
    std::memcpy(bytes.data() + i * stride, &element, n);
    for (size_t b = n; b < stride; ++b)
      bytes[i * stride + b] = in.ConsumeIntegral<unsigned char>();
  }
  return bytes;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  script s;
  g = &s;

  // The framework table, in storage at least as large as the size it claims.
  const size_t fw_size = in.ConsumeIntegralInRange<size_t>(0, sizeof(pcy_framework_api) + 64);
  std::vector<unsigned char> fw_storage(std::max(fw_size, sizeof(pcy_framework_api)));
  pcy_framework_api fw{};
  fw.struct_size = fw_size;
  fw.abi_major = in.ConsumeBool() ? PCY_ABI_VERSION_MAJOR : in.ConsumeIntegral<uint32_t>();
  fw.abi_minor = in.ConsumeIntegral<uint32_t>();
  fw.kind = in.ConsumeBool() ? PCY_PLUGIN_FRAMEWORK : in.ConsumeIntegral<uint32_t>();
  fw.name = in.ConsumeBool() ? keep("stub") : fuzz_string(in);
  fw.plugin_version = fuzz_string(in);
  fw.description = fuzz_string(in);
  fw.initialize = &initialize;
  fw.shutdown = &shutdown;
  fw.probe = &probe;
  fw.device_properties = &device_properties;
  fw.context_create = &context_create;
  fw.context_destroy = &context_destroy;
  fw.queue_create = &queue_create;
  fw.queue_destroy = &queue_destroy;
  fw.queue_finish = &queue_finish;
  fw.memory_alloc = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? nullptr : &memory_alloc;
  fw.memory_free = &memory_free;
  fw.memory_read = &memory_rw;
  fw.memory_write = &memory_rw;
  std::memcpy(fw_storage.data(), &fw, sizeof fw);

  s.init_fails = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  s.null_instance = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  s.probe_fails = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  s.null_context = in.ConsumeIntegralInRange<int>(0, 7) == 0;
  s.device_count =
      in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 4) : in.ConsumeIntegral<uint32_t>();
  const uint32_t described = std::min<uint32_t>(s.device_count, 8);
  for (uint32_t d = 0; d < described; ++d) {
    const size_t count = in.ConsumeIntegralInRange<size_t>(0, 12);
    const size_t stride = in.ConsumeBool()
                              ? sizeof(pcy_property)
                              : in.ConsumeIntegralInRange<size_t>(0, 2 * sizeof(pcy_property));
    s.props.push_back(array_of<pcy_property>(in, count, stride, [&](pcy_property& p) {
      p.key = fuzz_string(in);
      p.type = static_cast<pcy_value_type>(in.ConsumeIntegralInRange<int>(-1, 6));
      p.s = fuzz_string(in);
      p.i = in.ConsumeIntegral<int64_t>();
      p.f = in.ConsumeFloatingPoint<double>();
    }));
    // The count may lie upwards only when no array is given (a NULL array is detectable).
    const bool null_array = in.ConsumeIntegralInRange<int>(0, 7) == 0;
    s.prop_null.push_back(null_array);
    s.prop_counts.push_back(null_array && in.ConsumeBool() ? in.ConsumeIntegral<size_t>() : count);
    s.prop_fail.push_back(in.ConsumeIntegralInRange<int>(0, 7) == 0);
  }
  if (s.device_count > described && s.device_count <= detail::max_devices)
    s.device_count = described; // more devices than we describe would be a lie about arrays

  // The bundle table.
  const size_t b_size = in.ConsumeIntegralInRange<size_t>(0, sizeof(pcy_bundle_api) + 64);
  std::vector<unsigned char> b_storage(std::max(b_size, sizeof(pcy_bundle_api)));
  pcy_bundle_api b{};
  b.struct_size = b_size;
  b.abi_major = in.ConsumeBool() ? PCY_ABI_VERSION_MAJOR : in.ConsumeIntegral<uint32_t>();
  b.abi_minor = in.ConsumeIntegral<uint32_t>();
  b.kind = in.ConsumeBool() ? PCY_PLUGIN_BUNDLE : in.ConsumeIntegral<uint32_t>();
  b.name = in.ConsumeBool() ? keep("stubext_fuzz") : fuzz_string(in);
  b.plugin_version = fuzz_string(in);
  b.description = fuzz_string(in);
  b.extension = in.ConsumeBool() ? keep("stubext") : fuzz_string(in);
  b.framework = in.ConsumeBool() ? keep("stub") : fuzz_string(in);
  b.initialize = &bundle_initialize;
  b.shutdown = &bundle_shutdown;
  b.ops = &bundle_ops;
  b.context_init = &context_init;
  b.context_teardown = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? nullptr : &context_teardown;
  std::memcpy(b_storage.data(), &b, sizeof b);
  s.ops_fail = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  const size_t op_count = in.ConsumeIntegralInRange<size_t>(0, 10);
  const size_t op_stride = in.ConsumeBool()
                               ? sizeof(pcy_op_desc)
                               : in.ConsumeIntegralInRange<size_t>(0, 2 * sizeof(pcy_op_desc));
  s.ops = array_of<pcy_op_desc>(in, op_count, op_stride, [&](pcy_op_desc& o) {
    o.name = fuzz_string(in);
    o.dtype = static_cast<pcy_dtype>(in.ConsumeIntegralInRange<int>(0, 7));
    o.signature = in.ConsumeBool() ? keep("i t=") : fuzz_string(in);
    o.fn = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? nullptr : &op_fn;
    o.implementation = fuzz_string(in);
  });
  s.ops_null = in.ConsumeIntegralInRange<int>(0, 7) == 0;
  s.op_count = s.ops_null && in.ConsumeBool() ? in.ConsumeIntegral<size_t>() : op_count;
  const std::string request = in.ConsumeRandomLengthString(40);
  // Op keys are static in real front-ends (each takes a process-wide slot): a fixed few here.
  static const OpKey keys[] = {
      {"stubext", "negate", PCY_DTYPE_F32, "i t="}, {"stubext", "negate", PCY_DTYPE_F32, "i t< t>"},
      {"stubext", "negate", PCY_DTYPE_F64, "i t="}, {"stubext", "missing", PCY_DTYPE_F32, "i"},
      {"other", "negate", PCY_DTYPE_F32, "i t="},   {"stubext", "negate", PCY_DTYPE_F32, "i q"}};
  const OpKey& key = keys[in.ConsumeIntegralInRange<size_t>(0, std::size(keys) - 1)];

  try {
    RegistryOptions o;
    o.default_plugin_dir = false;
    o.default_config = false;
    o.environment = std::map<std::string, std::string>{};
    auto reg = std::make_shared<RegistryImpl>(o);
    reg->load();
    LoadReportEntry e1, e2;
    reg->load_table("fuzz-framework.so", fw_storage.data(), true, e1);
    reg->load_table("fuzz-bundle.so", b_storage.data(), false, e2);
    (void)reg->device_ranking({});
    (void)reg->ranking();
    try {
      (void)reg->select(request);
    } catch (const error&) {
    }
    for (const auto& f : reg->frameworks) {
      if (f->devices().empty()) continue;
      try {
        auto ctx = reg->context_for(*f, 0);
        auto be = std::make_shared<BackendImpl>(ctx, Selection{f->name(), 0, "", {}},
                                                std::vector<std::string>{});
        be->self = be;
        (void)be->op(key);
        (void)be->op(keys[0]);
      } catch (const error&) {
      }
    }
  } catch (const error&) {
  }
  g = nullptr;
  return 0;
}
