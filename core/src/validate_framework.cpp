// parenchyma core: the validation layer's checks of the framework slots (validate_layer.hpp).
#include "validate_layer.hpp"

namespace parenchyma {
inline namespace v1 {
namespace validate {
namespace layer {
// ---- framework entry points -----------------------------------------------------------------

pcy_error* fw_initialize(int slot, pcy_framework_init_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "initialize");
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_framework_init_args",
                                  PCY_FRAMEWORK_INIT_ARGS_SIZE_1_0))
      PARENCHYMA_VALIDATE_SIZED(c.f, a->host, "pcy_host_services", PCY_HOST_SERVICES_SIZE_1_0);
    const auto fn = c.ok() ? c.fw->orig.initialize : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(a);
    if (e == nullptr && a->plugin != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::plugin;
      r.slot = slot;
      r.plugin = a->plugin;
      add(c.s, a->plugin, std::move(r));
    }
    return e;
  });
}

void fw_shutdown(int slot, pcy_plugin p) {
  guarded_void([&] {
    scope c(slot, false, "shutdown");
    expect(c.s, c.f, slot, p, kind::plugin, "plugin", true);
    std::vector<std::string> leaks;
    decltype(pcy_framework_api::shutdown) fn = nullptr;
    if (c.ok()) {
      uint64_t n = 0;
      std::string text = collect_leaks(c.s, false, slot, p, n);
      leak_report(c.s, c.fw->owner, c.who, n, std::move(text), leaks);
      drop(c.s, p, "shutdown");
      fn = c.fw->orig.shutdown;
    }
    if (std::string bad = c.verdict(); !bad.empty()) return report_void(bad);
    for (const auto& l : leaks)
      detail::log(PCY_LOG_ERROR, origin, l);
    fn(p);
  });
}

pcy_error* fw_probe(int slot, pcy_plugin p, pcy_framework_probe* out) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "probe");
    expect(c.s, c.f, slot, p, kind::plugin, "plugin");
    PARENCHYMA_VALIDATE_SIZED(c.f, out, "pcy_framework_probe", PCY_FRAMEWORK_PROBE_SIZE_1_0);
    const auto fn = c.ok() ? c.fw->orig.probe : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    return fn(p, out);
  });
}

// Whether a property array (as the registry checks it) says cross_context_events = true.
std::optional<bool> cross_context_property(const pcy_property* props, size_t n) {
  if (props == nullptr || n == 0 || n > detail::max_properties) return std::nullopt;
  size_t stride = 0;
  std::memcpy(&stride, &props[0].struct_size, sizeof stride);
  if (stride < PCY_PROPERTY_SIZE_1_0 || stride > detail::max_struct_stride ||
      stride % alignof(pcy_property) != 0 ||
      reinterpret_cast<uintptr_t>(props) % alignof(pcy_property) != 0)
    return std::nullopt;
  for (size_t i = 0; i < n; ++i) {
    const auto& p =
        *reinterpret_cast<const pcy_property*>(reinterpret_cast<const char*>(props) + i * stride);
    if (p.key != nullptr && std::strncmp(p.key, cross_context_key, 64) == 0 &&
        raw(p.type) == PCY_VALUE_BOOL)
      return p.i != 0;
  }
  return false;
}

pcy_error* fw_device_properties(int slot, pcy_plugin p, uint32_t d, const pcy_property** props,
                                size_t* n) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "device_properties");
    expect(c.s, c.f, slot, p, kind::plugin, "plugin");
    const auto fn = c.ok() ? c.fw->orig.device_properties : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(p, d, props, n);
    if (e == nullptr && props != nullptr && n != nullptr)
      if (auto cross = cross_context_property(*props, *n)) {
        std::lock_guard lock(c.s.m);
        if (c.s.fw[static_cast<size_t>(slot)].used)
          c.s.fw[static_cast<size_t>(slot)].cross_context_events[d] = *cross;
      }
    return e;
  });
}

pcy_error* fw_context_create(int slot, pcy_plugin p, const uint32_t* devices, uint32_t n,
                             pcy_context* out) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "context_create");
    expect(c.s, c.f, slot, p, kind::plugin, "plugin");
    const auto fn = c.ok() ? c.fw->orig.context_create : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(p, devices, n, out);
    if (e == nullptr && out != nullptr && *out != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::context;
      r.slot = slot;
      r.plugin = p;
      if (devices != nullptr && n <= detail::max_devices) r.devices.assign(devices, devices + n);
      add(c.s, *out, std::move(r));
    }
    return e;
  });
}

void fw_context_destroy(int slot, pcy_context ctx) {
  guarded_void([&] {
    scope c(slot, false, "context_destroy");
    decltype(pcy_framework_api::context_destroy) fn = nullptr;
    std::string children;
    if (expect(c.s, c.f, slot, ctx, kind::context, "context", true) != nullptr) {
      std::map<kind, int> by_kind;
      for (const auto& [h, r] : c.s.live)
        if (r.context == ctx && r.slot == slot && !on_bundle_side(r.k)) ++by_kind[r.k];
      for (const auto& [k, n] : by_kind)
        children += str(children.empty() ? "" : ", ", n, " ", kind_name(k));
      fn = c.fw->orig.context_destroy;
      drop(c.s, ctx, "context_destroy");
    }
    std::string bad = c.verdict();
    if (!bad.empty()) return report_void(bad);
    if (!children.empty()) {
      // Reported, and still forwarded: the host asked for it, and its objects are its business.
      finding f;
      f.set(rule_children, str("context ", hex(ctx),
                               " destroyed while objects made in it are "
                               "still alive (",
                               children, "): destroy them first"));
      std::unique_lock lock(c.s.m);
      bad = count(c.s, c.who, "context_destroy", f);
      lock.unlock();
      report_void(bad);
    }
    fn(ctx);
  });
}

pcy_error* fw_queue_create(int slot, pcy_context ctx, uint32_t device, pcy_queue* out) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "queue_create");
    record* cr = expect(c.s, c.f, slot, ctx, kind::context, "context");
    const void* plugin = cr != nullptr ? cr->plugin : nullptr;
    const auto fn = c.ok() ? c.fw->orig.queue_create : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(ctx, device, out);
    if (e == nullptr && out != nullptr && *out != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::queue;
      r.slot = slot;
      r.plugin = plugin;
      r.context = ctx;
      r.device = device;
      add(c.s, *out, std::move(r));
    }
    return e;
  });
}

void fw_queue_destroy(int slot, pcy_queue q) {
  guarded_void([&] {
    scope c(slot, false, "queue_destroy");
    decltype(pcy_framework_api::queue_destroy) fn = nullptr;
    if (expect(c.s, c.f, slot, q, kind::queue, "queue", true) != nullptr) {
      fn = c.fw->orig.queue_destroy;
      drop(c.s, q, "queue_destroy");
    }
    if (std::string bad = c.verdict(); !bad.empty()) return report_void(bad);
    fn(q);
  });
}

pcy_error* fw_queue_finish(int slot, pcy_queue q) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "queue_finish");
    expect(c.s, c.f, slot, q, kind::queue, "queue");
    const auto fn = c.ok() ? c.fw->orig.queue_finish : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    return fn(q);
  });
}

pcy_error* fw_event_record(int slot, pcy_queue q, pcy_event* out) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "event_record");
    record* qr = expect(c.s, c.f, slot, q, kind::queue, "queue");
    const void* plugin = qr != nullptr ? qr->plugin : nullptr;
    const void* ctx = qr != nullptr ? qr->context : nullptr;
    c.busy(q, qr, "queue");
    const auto fn = c.ok() ? c.fw->orig.event_record : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(q, out);
    if (e == nullptr && out != nullptr && *out != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::event;
      r.slot = slot;
      r.plugin = plugin;
      r.context = ctx;
      r.parent = q;
      add(c.s, *out, std::move(r));
    }
    return e;
  });
}

pcy_error* fw_event_wait(int slot, pcy_event ev) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "event_wait");
    expect(c.s, c.f, slot, ev, kind::event, "event");
    const auto fn = c.ok() ? c.fw->orig.event_wait : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    return fn(ev);
  });
}

pcy_error* fw_queue_wait_event(int slot, pcy_queue q, pcy_event ev) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "queue_wait_event");
    record* qr = expect(c.s, c.f, slot, q, kind::queue, "queue");
    record* er = expect(c.s, c.f, slot, ev, kind::event, "event");
    if (qr != nullptr && er != nullptr && qr->context != er->context) {
      // Allowed only where the plugin says its queues can wait for its other contexts' events.
      bool allowed = false;
      if (auto cr = c.s.live.find(qr->context); cr != c.s.live.end())
        if (qr->device < cr->second.devices.size()) {
          const auto& cross = c.fw->cross_context_events;
          auto it = cross.find(cr->second.devices[qr->device]);
          allowed = it != cross.end() && it->second;
        }
      if (!allowed)
        c.f.set(rule_event,
                str("event ", hex(ev), " was recorded in context ", hex(er->context),
                    ", the queue ", hex(q), " belongs to context ", hex(qr->context),
                    ": the plugin does not declare '", cross_context_key, "' for the device"));
    }
    c.busy(q, qr, "queue");
    const auto fn = c.ok() ? c.fw->orig.queue_wait_event : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    return fn(q, ev);
  });
}

void fw_event_destroy(int slot, pcy_event ev) {
  guarded_void([&] {
    scope c(slot, false, "event_destroy");
    decltype(pcy_framework_api::event_destroy) fn = nullptr;
    if (expect(c.s, c.f, slot, ev, kind::event, "event", true) != nullptr) {
      fn = c.fw->orig.event_destroy;
      drop(c.s, ev, "event_destroy");
    }
    if (std::string bad = c.verdict(); !bad.empty()) return report_void(bad);
    fn(ev);
  });
}

pcy_error* fw_memory_alloc(int slot, pcy_memory_alloc_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "memory_alloc");
    const void* plugin = nullptr;
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_memory_alloc_args", PCY_MEMORY_ALLOC_ARGS_SIZE_1_0))
      if (record* cr = expect(c.s, c.f, slot, a->context, kind::context, "context"))
        plugin = cr->plugin;
    const auto fn = c.ok() ? c.fw->orig.memory_alloc : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(a);
    if (e == nullptr && a->memory != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::memory;
      r.slot = slot;
      r.plugin = plugin;
      r.context = a->context;
      r.bytes = a->bytes;
      add(c.s, a->memory, std::move(r));
    }
    return e;
  });
}

void fw_memory_free(int slot, pcy_memory m) {
  guarded_void([&] {
    scope c(slot, false, "memory_free");
    decltype(pcy_framework_api::memory_free) fn = nullptr;
    uint32_t aliases = 0;
    if (record* r = expect(c.s, c.f, slot, m, kind::memory, "memory", true)) {
      aliases = r->aliases;
      fn = c.fw->orig.memory_free;
      drop(c.s, m, "memory_free");
    }
    std::string bad = c.verdict();
    if (!bad.empty()) return report_void(bad);
    if (aliases > 0) {
      finding f;
      f.set(rule_alias, str("memory ", hex(m), " freed while ", aliases,
                            " imported alias(es) of its export are alive: free the aliases "
                            "first (they now point at freed bytes)"));
      std::unique_lock lock(c.s.m);
      bad = count(c.s, c.who, "memory_free", f);
      lock.unlock();
      report_void(bad);
    }
    fn(m);
  });
}

// A queue and a memory of one context (transfers, fills).
void same_context(finding& f, const record* q, const record* m, const void* qh, const void* mh,
                  const char* role) {
  if (q == nullptr || m == nullptr || q->context == m->context) return;
  f.set(rule_context, str(role, " ", hex(mh), " lives in context ", hex(m->context), ", the queue ",
                          hex(qh), " belongs to context ", hex(q->context)));
}

namespace {
pcy_error* transfer(int slot, const pcy_memory_transfer_args* a, bool read) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, read ? "memory_read" : "memory_write");
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_memory_transfer_args",
                                  PCY_MEMORY_TRANSFER_ARGS_SIZE_1_0)) {
      record* q = expect(c.s, c.f, slot, a->queue, kind::queue, "queue");
      record* m = expect(c.s, c.f, slot, a->memory, kind::memory, "memory");
      same_context(c.f, q, m, a->queue, a->memory, "memory");
      c.busy(a->queue, q, "queue");
    }
    const auto fn = !c.ok() ? nullptr : read ? c.fw->orig.memory_read : c.fw->orig.memory_write;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    return fn(a);
  });
}
} // namespace

pcy_error* fw_memory_read(int slot, const pcy_memory_transfer_args* a) {
  return transfer(slot, a, true);
}
pcy_error* fw_memory_write(int slot, const pcy_memory_transfer_args* a) {
  return transfer(slot, a, false);
}

pcy_error* fw_memory_copy(int slot, const pcy_memory_copy_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "memory_copy");
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_memory_copy_args", PCY_MEMORY_COPY_ARGS_SIZE_1_0)) {
      record* q = expect(c.s, c.f, slot, a->queue, kind::queue, "queue");
      expect(c.s, c.f, slot, a->src, kind::memory, "source memory"); // any context of the plugin
      record* d = expect(c.s, c.f, slot, a->dst, kind::memory, "destination memory");
      same_context(c.f, q, d, a->queue, a->dst, "destination memory");
      c.busy(a->queue, q, "queue");
    }
    const auto fn = c.ok() ? c.fw->orig.memory_copy : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    return fn(a);
  });
}

pcy_error* fw_memory_fill(int slot, const pcy_memory_fill_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "memory_fill");
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_memory_fill_args", PCY_MEMORY_FILL_ARGS_SIZE_1_0)) {
      record* q = expect(c.s, c.f, slot, a->queue, kind::queue, "queue");
      record* m = expect(c.s, c.f, slot, a->memory, kind::memory, "memory");
      same_context(c.f, q, m, a->queue, a->memory, "memory");
      c.busy(a->queue, q, "queue");
    }
    const auto fn = c.ok() ? c.fw->orig.memory_fill : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    return fn(a);
  });
}

// The identity of an exported handle, for matching an import to its exporter.
std::optional<std::pair<int, uint64_t>> handle_key(const pcy_memory_handle& h) {
  const int64_t k = raw(h.kind);
  uint64_t value = 0;
  if (k == PCY_HANDLE_HOST_POINTER)
    value = reinterpret_cast<uintptr_t>(h.host_pointer);
  else if (k == PCY_HANDLE_CUDA_DEVICE_POINTER)
    value = h.cuda_pointer;
  else if (k == PCY_HANDLE_OPENCL_BUFFER)
    value = reinterpret_cast<uintptr_t>(h.opencl_buffer);
  else
    return std::nullopt;
  if (value == 0) return std::nullopt;
  return std::make_pair(static_cast<int>(k), value);
}

pcy_error* fw_memory_export(int slot, pcy_memory_export_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "memory_export");
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_memory_export_args",
                                  PCY_MEMORY_EXPORT_ARGS_SIZE_1_0) &&
        PARENCHYMA_VALIDATE_SIZED(c.f, a->handle, "pcy_memory_handle", PCY_MEMORY_HANDLE_SIZE_1_0))
      expect(c.s, c.f, slot, a->memory, kind::memory, "memory");
    const auto fn = c.ok() ? c.fw->orig.memory_export : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(a);
    if (e == nullptr && raw(a->handle->kind) == raw(a->kind))
      if (auto key = handle_key(*a->handle)) {
        std::lock_guard lock(c.s.m);
        if (auto it = c.s.live.find(a->memory); it != c.s.live.end()) {
          record& r = it->second;
          if (std::find(r.exported.begin(), r.exported.end(), *key) == r.exported.end())
            r.exported.push_back(*key);
          c.s.exports[*key] = a->memory;
          if (key->first == PCY_HANDLE_HOST_POINTER && r.host < 0) {
            r.host = 1;
            r.host_ptr = static_cast<const std::byte*>(a->handle->host_pointer);
            r.host_bytes = a->handle->bytes;
          }
        }
      }
    return e;
  });
}

pcy_error* fw_memory_import(int slot, pcy_memory_import_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "memory_import");
    const void* plugin = nullptr;
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_memory_import_args",
                                  PCY_MEMORY_IMPORT_ARGS_SIZE_1_0) &&
        PARENCHYMA_VALIDATE_SIZED(c.f, a->handle, "pcy_memory_handle", PCY_MEMORY_HANDLE_SIZE_1_0))
      if (record* cr = expect(c.s, c.f, slot, a->context, kind::context, "context"))
        plugin = cr->plugin;
    const auto fn = c.ok() ? c.fw->orig.memory_import : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(a);
    if (e == nullptr && a->memory != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::memory;
      r.slot = slot;
      r.plugin = plugin;
      r.context = a->context;
      r.bytes = a->handle->bytes;
      if (auto key = handle_key(*a->handle))
        if (auto ex = c.s.exports.find(*key); ex != c.s.exports.end())
          if (auto src = c.s.live.find(ex->second); src != c.s.live.end()) {
            r.parent = ex->second;
            ++src->second.aliases;
          }
      add(c.s, a->memory, std::move(r));
    }
    return e;
  });
}

pcy_error* fw_native_handle(int slot, pcy_native_handle_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "native_handle");
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_native_handle_args",
                                  PCY_NATIVE_HANDLE_ARGS_SIZE_1_0)) {
      // Only the handle the object kind reads (a memory's handle needs no context).
      switch (raw(a->object)) {
      case PCY_NATIVE_DEVICE:
      case PCY_NATIVE_CONTEXT:
      case PCY_NATIVE_PLATFORM: expect(c.s, c.f, slot, a->context, kind::context, "context"); break;
      case PCY_NATIVE_QUEUE: expect(c.s, c.f, slot, a->queue, kind::queue, "queue"); break;
      case PCY_NATIVE_MEMORY: expect(c.s, c.f, slot, a->memory, kind::memory, "memory"); break;
      default: break; // an object kind from the future: the plugin answers
      }
    }
    const auto fn = c.ok() ? c.fw->orig.native_handle : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    return fn(a);
  });
}

pcy_error* fw_program_build(int slot, pcy_program_build_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "program_build");
    const void* plugin = nullptr;
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_program_build_args",
                                  PCY_PROGRAM_BUILD_ARGS_SIZE_1_0))
      if (record* cr = expect(c.s, c.f, slot, a->context, kind::context, "context"))
        plugin = cr->plugin;
    const auto fn = c.ok() ? c.fw->orig.program_build : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(a);
    if (e == nullptr && a->program != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::program;
      r.slot = slot;
      r.plugin = plugin;
      r.context = a->context;
      add(c.s, a->program, std::move(r));
    }
    return e;
  });
}

void fw_program_destroy(int slot, pcy_program p) {
  guarded_void([&] {
    scope c(slot, false, "program_destroy");
    decltype(pcy_framework_api::program_destroy) fn = nullptr;
    if (expect(c.s, c.f, slot, p, kind::program, "program", true) != nullptr) {
      fn = c.fw->orig.program_destroy;
      drop(c.s, p, "program_destroy");
    }
    if (std::string bad = c.verdict(); !bad.empty()) return report_void(bad);
    fn(p);
  });
}

pcy_error* fw_kernel_create(int slot, pcy_kernel_create_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "kernel_create");
    const void *plugin = nullptr, *ctx = nullptr;
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_kernel_create_args",
                                  PCY_KERNEL_CREATE_ARGS_SIZE_1_0))
      if (record* pr = expect(c.s, c.f, slot, a->program, kind::program, "program")) {
        plugin = pr->plugin;
        ctx = pr->context;
      }
    const auto fn = c.ok() ? c.fw->orig.kernel_create : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(a);
    if (e == nullptr && a->kernel != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::kernel;
      r.slot = slot;
      r.plugin = plugin;
      r.context = ctx;
      r.parent = a->program;
      add(c.s, a->kernel, std::move(r));
    }
    return e;
  });
}

void fw_kernel_destroy(int slot, pcy_kernel k) {
  guarded_void([&] {
    scope c(slot, false, "kernel_destroy");
    decltype(pcy_framework_api::kernel_destroy) fn = nullptr;
    if (expect(c.s, c.f, slot, k, kind::kernel, "kernel", true) != nullptr) {
      fn = c.fw->orig.kernel_destroy;
      drop(c.s, k, "kernel_destroy");
    }
    if (std::string bad = c.verdict(); !bad.empty()) return report_void(bad);
    fn(k);
  });
}

pcy_error* fw_kernel_launch(int slot, const pcy_kernel_launch_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "kernel_launch");
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_kernel_launch_args",
                                  PCY_KERNEL_LAUNCH_ARGS_SIZE_1_0)) {
      record* q = expect(c.s, c.f, slot, a->queue, kind::queue, "queue");
      record* k = expect(c.s, c.f, slot, a->kernel, kind::kernel, "kernel");
      if (q != nullptr && k != nullptr && q->context != k->context)
        c.f.set(rule_context,
                str("kernel ", hex(a->kernel), " was made in context ", hex(k->context),
                    ", the queue ", hex(a->queue), " belongs to context ", hex(q->context)));
      // Memory arguments (the plugin itself checks counts and kinds it does not know).
      if (q != nullptr && a->args != nullptr && a->arg_count <= 4096)
        for (uint32_t i = 0; i < a->arg_count && c.ok(); ++i)
          if (raw(a->args[i].kind) == PCY_ARG_MEMORY) {
            const std::string role = str("memory argument #", i);
            record* m = expect(c.s, c.f, slot, a->args[i].memory, kind::memory, role.c_str());
            same_context(c.f, q, m, a->queue, a->args[i].memory, role.c_str());
          }
      c.busy(a->queue, q, "queue");
    }
    const auto fn = c.ok() ? c.fw->orig.kernel_launch : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    return fn(a);
  });
}

// ---- graphs (1.2) ---------------------------------------------------------------------------
// A graph is built on one queue and launched only on it (pcy_framework.h): the queue it was made
// for is its parent.

pcy_error* fw_graph_create(int slot, pcy_queue q, pcy_graph* out) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "graph_create");
    record* qr = expect(c.s, c.f, slot, q, kind::queue, "queue");
    const void* plugin = qr != nullptr ? qr->plugin : nullptr;
    const void* ctx = qr != nullptr ? qr->context : nullptr;
    const auto fn = c.ok() ? c.fw->orig.graph_create : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(q, out);
    if (e == nullptr && out != nullptr && *out != nullptr) {
      std::lock_guard lock(c.s.m);
      record r;
      r.k = kind::graph;
      r.slot = slot;
      r.plugin = plugin;
      r.context = ctx;
      r.parent = q;
      add(c.s, *out, std::move(r));
    }
    return e;
  });
}

namespace {
// A call that takes a queue and a graph of that queue, and enqueues on the queue. `capture`: 1
// marks the queue capturing when the call succeeds (capture_begin), 0 marks it not capturing
// after the call whatever it returned (capture_end), -1 leaves the mark.
template <class Fn>
pcy_error* graph_on_queue(int slot, const char* call, pcy_queue q, pcy_graph g, Fn slot_of,
                          int capture = -1) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, call);
    record* qr = expect(c.s, c.f, slot, q, kind::queue, "queue");
    record* gr = expect(c.s, c.f, slot, g, kind::graph, "graph");
    if (qr != nullptr && gr != nullptr && gr->parent != q)
      c.f.set(rule_graph_queue,
              str("graph ", hex(g), " was created for queue ", hex(gr->parent), ", not for queue ",
                  hex(q), ": a graph is captured and launched on its own queue"));
    c.busy(q, qr, "queue");
    const auto fn = c.ok() ? slot_of(c.fw->orig) : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    pcy_error* e = fn(q, g);
    if (capture >= 0 && (capture == 0 || e == nullptr)) {
      std::lock_guard lock(c.s.m);
      if (auto it = c.s.live.find(q); it != c.s.live.end() && it->second.k == kind::queue)
        it->second.capturing = capture == 1;
    }
    return e;
  });
}
} // namespace

pcy_error* fw_queue_capture_begin(int slot, pcy_queue q, pcy_graph g) {
  return graph_on_queue(
      slot, "queue_capture_begin", q, g,
      [](const pcy_framework_api& t) { return t.queue_capture_begin; }, 1);
}
pcy_error* fw_queue_capture_end(int slot, pcy_queue q, pcy_graph g) {
  return graph_on_queue(
      slot, "queue_capture_end", q, g,
      [](const pcy_framework_api& t) { return t.queue_capture_end; }, 0);
}
pcy_error* fw_graph_launch(int slot, pcy_queue q, pcy_graph g) {
  return graph_on_queue(slot, "graph_launch", q, g,
                        [](const pcy_framework_api& t) { return t.graph_launch; });
}

pcy_error* fw_graph_instantiate(int slot, pcy_graph g) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "graph_instantiate");
    expect(c.s, c.f, slot, g, kind::graph, "graph");
    const auto fn = c.ok() ? c.fw->orig.graph_instantiate : nullptr;
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);
    return fn(g);
  });
}

void fw_graph_destroy(int slot, pcy_graph g) {
  guarded_void([&] {
    scope c(slot, false, "graph_destroy");
    decltype(pcy_framework_api::graph_destroy) fn = nullptr;
    if (expect(c.s, c.f, slot, g, kind::graph, "graph", true) != nullptr) {
      fn = c.fw->orig.graph_destroy;
      drop(c.s, g, "graph_destroy");
    }
    if (std::string bad = c.verdict(); !bad.empty()) return report_void(bad);
    fn(g);
  });
}

// ---- the entry points of each pool slot, from the slot list -----------------------------------

namespace {
template <int S> struct fw_entries {
#define PARENCHYMA_VALIDATE_FW_ENTRY(name, minor, need, thread, ret, params, args)                 \
  static ret name params noexcept { return fw_##name(S, PARENCHYMA_VALIDATE_ARGS args); }
  PCY_FRAMEWORK_API_SLOTS(PARENCHYMA_VALIDATE_FW_ENTRY)
#undef PARENCHYMA_VALIDATE_FW_ENTRY
  // Every slot the plugin filled becomes the layer's; an absent one stays absent.
  static void install(pcy_framework_api& t) noexcept {
#define PARENCHYMA_VALIDATE_FW_INSTALL(name, minor, need, thread, ret, params, args)               \
  if (t.name != nullptr) t.name = &name;
    PCY_FRAMEWORK_API_SLOTS(PARENCHYMA_VALIDATE_FW_INSTALL)
#undef PARENCHYMA_VALIDATE_FW_INSTALL
  }
};

template <int... I>
constexpr std::array<void (*)(pcy_framework_api&) noexcept, sizeof...(I)>
fw_installers(std::integer_sequence<int, I...>) {
  return {&fw_entries<I>::install...};
}
} // namespace

const std::array<void (*)(pcy_framework_api&) noexcept, fw_pool> fw_install =
    fw_installers(std::make_integer_sequence<int, fw_pool>{});

} // namespace layer
} // namespace validate
} // namespace v1
} // namespace parenchyma
