// parenchyma core: the validation layer's checks of the bundle slots (validate_layer.hpp).
#include "validate_layer.hpp"

namespace parenchyma {
inline namespace v1 {
namespace validate {
namespace layer {
// ---- bundle entry points --------------------------------------------------------------------

pcy_error* b_initialize(int slot, pcy_bundle_init_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, true, "initialize");
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_bundle_init_args", PCY_BUNDLE_INIT_ARGS_SIZE_1_0))
      PARENCHYMA_VALIDATE_SIZED(c.f, a->host, "pcy_host_services", PCY_HOST_SERVICES_SIZE_1_0);
    const auto fn = c.ok() ? c.b->orig.initialize : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(a);
    if (e == nullptr && a->plugin != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::bundle;
      r.slot = slot;
      r.plugin = a->plugin;
      add(c.s, a->plugin, std::move(r));
    }
    return e;
  });
}

void release_ops(state& s, bundle_slot& bs, const void* instance) {
  for (auto& set : bs.op_sets)
    if (instance == nullptr || set->instance == instance)
      for (int& k : set->op_slots)
        if (k >= 0) {
          s.ops[static_cast<size_t>(k)] = op_slot{};
          s.op_free.push_back(k);
          k = -1;
        }
}

void b_shutdown(int slot, pcy_bundle_plugin p) {
  guarded_void([&] {
    scope c(slot, true, "shutdown");
    expect(c.s, c.f, slot, p, kind::bundle, "bundle instance", true);
    std::vector<std::string> leaks;
    decltype(pcy_bundle_api::shutdown) fn = nullptr;
    if (c.ok()) {
      uint64_t n = 0;
      std::string text = collect_leaks(c.s, true, slot, p, n);
      leak_report(c.s, c.b->owner, c.who, n, std::move(text), leaks);
      release_ops(c.s, *c.b, p);
      drop(c.s, p, "shutdown");
      fn = c.b->orig.shutdown;
    }
    if (std::string bad = c.verdict(); !bad.empty()) return report_void(bad);
    for (const auto& l : leaks)
      detail::log(PCY_LOG_ERROR, origin, l);
    fn(p);
  });
}

// The host-owned copies of the plugin's descriptors, each fn the layer's entry point for it.
// An array the registry would refuse (NULL, too long, odd element size) is passed on unchanged.
const pcy_op_desc* wrap_ops(state& s, int slot, const void* instance, const pcy_op_desc* ops,
                            size_t n) {
  if (n == 0 || ops == nullptr || n > detail::max_ops) return ops;
  size_t stride = 0;
  std::memcpy(&stride, &ops[0].struct_size, sizeof stride);
  if (stride < PCY_OP_DESC_SIZE_1_0 || stride > detail::max_struct_stride ||
      stride % alignof(pcy_op_desc) != 0 ||
      reinterpret_cast<uintptr_t>(ops) % alignof(pcy_op_desc) != 0)
    return ops;
  bundle_slot& bs = s.b[static_cast<size_t>(slot)];
  for (const auto& set : bs.op_sets)
    if (set->instance == instance && set->plugin_array == ops && set->count == n)
      return set->copies.get();
  auto set = std::make_unique<op_set>();
  set->instance = instance;
  set->plugin_array = ops;
  set->count = n;
  set->stride = stride;
  set->copies = std::make_unique<pcy_op_desc[]>(n);
  set->op_slots.assign(n, -1);
  size_t unwrapped = 0;
  for (size_t i = 0; i < n; ++i) {
    pcy_op_desc& d = set->copies[i];
    std::memset(&d, 0, sizeof d);
    std::memcpy(&d, reinterpret_cast<const char*>(ops) + i * stride,
                std::min(stride, sizeof(pcy_op_desc)));
    d.struct_size = sizeof(pcy_op_desc);                   // the copies are 1.1 descriptors ...
    if (stride < PCY_OP_DESC_SIZE_1_1) d.schema = nullptr; // ... without a schema for 1.0 ones
    if (d.fn == nullptr) continue;                         // refused by the registry
    if (s.op_free.empty()) {
      ++unwrapped;
      continue;
    }
    const int k = s.op_free.front();
    s.op_free.pop_front();
    op_slot& os = s.ops[static_cast<size_t>(k)];
    os.used = true;
    os.bundle = slot;
    os.instance = instance;
    os.fn = d.fn;
    os.copy = &d;
    const char* dt = sdk::dtype_name_or_null(raw(d.dtype));
    os.label = str(bs.name, ".", d.name != nullptr ? detail::quote_prefix(d.name, 64) : "?", " (",
                   dt != nullptr ? dt : "?", ")");
    d.fn = op_entries[static_cast<size_t>(k)];
    set->op_slots[i] = k;
  }
  if (unwrapped > 0)
    detail::log(PCY_LOG_WARN, origin,
                str(bs.name, ": ", unwrapped,
                    " op(s) left unchecked: the validation layer's op pool is exhausted"));
  const pcy_op_desc* out = set->copies.get();
  bs.op_sets.push_back(std::move(set));
  return out;
}

pcy_error* b_ops(int slot, pcy_bundle_plugin p, const pcy_op_desc** out, size_t* n) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, true, "ops");
    expect(c.s, c.f, slot, p, kind::bundle, "bundle instance");
    const auto fn = c.ok() ? c.b->orig.ops : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(p, out, n);
    if (e == nullptr && out != nullptr && n != nullptr) {
      std::lock_guard lock(c.s.m);
      if (c.s.b[static_cast<size_t>(slot)].used) *out = wrap_ops(c.s, slot, p, *out, *n);
    }
    return e;
  });
}

int fw_slot_of(const state& s, const pcy_framework_api* table) {
  if (table == nullptr) return -1;
  for (int i = 0; i < fw_pool; ++i)
    if (s.fw[static_cast<size_t>(i)].used && s.fw[static_cast<size_t>(i)].host_table == table)
      return i;
  return -1;
}

pcy_error* b_context_init(int slot, pcy_bundle_context_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, true, "context_init");
    int fs = -1;
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_bundle_context_args",
                                  PCY_BUNDLE_CONTEXT_ARGS_SIZE_1_0)) {
      expect(c.s, c.f, slot, a->plugin, kind::bundle, "bundle instance");
      fs = fw_slot_of(c.s, a->framework);
      if (fs >= 0 && c.ok()) {
        // The framework's objects, checked as that framework's own calls check them.
        const fw_slot& fws = c.s.fw[static_cast<size_t>(fs)];
        if (fws.name != c.b->framework)
          c.f.set(rule_framework, str("the bundle serves framework '", c.b->framework,
                                      "', it was set up on '", fws.name, "'"));
        expect(c.s, c.f, fs, a->framework_plugin, kind::plugin, "framework plugin");
        record* cr = expect(c.s, c.f, fs, a->context, kind::context, "context");
        record* qr = expect(c.s, c.f, fs, a->queue, kind::queue, "queue");
        if (cr != nullptr && cr->plugin != a->framework_plugin)
          c.f.set(rule_owner, str("context ", hex(a->context),
                                  " belongs to another instance of the framework than ",
                                  hex(a->framework_plugin)));
        if (qr != nullptr && qr->context != a->context)
          c.f.set(rule_context, str("queue ", hex(a->queue), " belongs to context ",
                                    hex(qr->context), ", not to ", hex(a->context)));
      }
    }
    const auto fn = c.ok() ? c.b->orig.context_init : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(a);
    if (e == nullptr && a->bundle != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::bundle_context;
      r.slot = slot;
      r.plugin = a->plugin;
      r.context = a->context;
      r.parent = a->queue;
      r.fw_table = a->framework;
      r.fw_slot = fs;
      add(c.s, a->bundle, std::move(r));
    }
    return e;
  });
}

void b_context_teardown(int slot, pcy_bundle_context bc) {
  guarded_void([&] {
    scope c(slot, true, "context_teardown");
    decltype(pcy_bundle_api::context_teardown) fn = nullptr;
    if (expect(c.s, c.f, slot, bc, kind::bundle_context, "bundle context", true) != nullptr) {
      fn = c.b->orig.context_teardown;
      drop(c.s, bc, "context_teardown");
    }
    if (std::string bad = c.verdict(); !bad.empty()) return report_void(bad);
    fn(bc);
  });
}

bool b_op_available(int slot, pcy_bundle_context bc, const pcy_op_desc* op, const char** reason) {
  try {
    scope c(slot, true, "op_available");
    expect(c.s, c.f, slot, bc, kind::bundle_context, "bundle context");
    // The bundle is asked about its own descriptor, not the host's copy of it.
    const pcy_op_desc* theirs = op;
    if (c.ok())
      for (const auto& set : c.b->op_sets)
        if (op >= set->copies.get() && op < set->copies.get() + set->count) {
          const auto i = static_cast<size_t>(op - set->copies.get());
          theirs = reinterpret_cast<const pcy_op_desc*>(
              static_cast<const char*>(set->plugin_array) + i * set->stride);
        }
    const auto fn = c.ok() ? c.b->orig.op_available : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) {
      report_void(bad);
      if (reason != nullptr) *reason = "refused by the validation layer (see the log)";
      return false;
    }
    return fn(bc, theirs, reason);
  } catch (...) {
    return false;
  }
}

// ---- the entry points of each pool slot, from the slot list -----------------------------------

namespace {
template <int S> struct bundle_entries {
#define PARENCHYMA_VALIDATE_B_ENTRY(name, minor, need, thread, ret, params, args)                  \
  static ret name params noexcept { return b_##name(S, PARENCHYMA_VALIDATE_ARGS args); }
  PCY_BUNDLE_API_SLOTS(PARENCHYMA_VALIDATE_B_ENTRY)
#undef PARENCHYMA_VALIDATE_B_ENTRY
  static void install(pcy_bundle_api& t) noexcept {
#define PARENCHYMA_VALIDATE_B_INSTALL(name, minor, need, thread, ret, params, args)                \
  if (t.name != nullptr) t.name = &name;
    PCY_BUNDLE_API_SLOTS(PARENCHYMA_VALIDATE_B_INSTALL)
#undef PARENCHYMA_VALIDATE_B_INSTALL
  }
};

template <int... I>
constexpr std::array<void (*)(pcy_bundle_api&) noexcept, sizeof...(I)>
bundle_installers(std::integer_sequence<int, I...>) {
  return {&bundle_entries<I>::install...};
}
} // namespace

const std::array<void (*)(pcy_bundle_api&) noexcept, bundle_pool> bundle_install =
    bundle_installers(std::make_integer_sequence<int, bundle_pool>{});

} // namespace layer
} // namespace validate
} // namespace v1
} // namespace parenchyma
