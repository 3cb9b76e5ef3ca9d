// parenchyma core: the validation layer (docs/validation.md), in the manner of Vulkan's and
// oneAPI Unified Runtime's validation layers.
//
// A wrapped table's function pointers are the layer's own. The C slots carry no user pointer, so
// each wrapped table gets a slot of a fixed pool, and each slot its own set of entry points
// (template instances): an entry point knows which plugin's table it was called through, and
// so can tell a handle of another plugin from its own. Bundle ops likewise get one entry point
// each from a pool. Every handle a plugin hands out is recorded (kind, plugin, owner context);
// every call that takes one checks it first. One mutex guards everything: this is a debugging
// mode, and no plugin function is ever called with it held.
#include "validate.hpp"

#include "internal.hpp"

#include <parenchyma/sdk/common.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace parenchyma {
inline namespace v1 {
namespace validate {
namespace {

// Pools: tables alive at once in a process (a registry holds a handful), and bundle ops.
// When a pool is empty the plugin is left unwrapped, with a notice: it still works.
constexpr int fw_pool = 64;
constexpr int bundle_pool = 64;
constexpr int op_pool = 4096;
constexpr const char* origin = "validation";
constexpr size_t max_messages = 64;
constexpr size_t max_freed = 1u << 16; // remembered destroyed handles (for "use after free")

// The rules a report names (docs/validation.md lists them).
constexpr const char* rule_live = "live handle";
constexpr const char* rule_kind = "handle kind";
constexpr const char* rule_owner = "handle owner";
constexpr const char* rule_context = "same context";
constexpr const char* rule_size = "struct size";
constexpr const char* rule_in = "in tensor unchanged";
constexpr const char* rule_event = "event context";
constexpr const char* rule_extent = "tensor extent";
constexpr const char* rule_alias = "exporter outlives alias";
constexpr const char* rule_children = "context outlives objects";
constexpr const char* rule_framework = "bundle framework";
constexpr const char* rule_call = "op call";
constexpr const char* rule_leak = "leak";
// The thread rules (docs/abi.md G2, G4): reported, and the call still forwarded — it is well
// formed, and refusing one of two racing calls would make the run's outcome depend on timing.
constexpr const char* rule_queue_threads = "queue serialised";
constexpr const char* rule_lifecycle_threads = "lifecycle serialised";

// A plugin property by which a framework declares that its queues may wait for events of its
// other contexts (docs/validation.md: "Events across contexts").
constexpr const char* cross_context_key = "cross_context_events";

enum class kind : uint8_t {
  plugin,
  context,
  queue,
  event,
  memory,
  program,
  kernel,
  bundle,
  bundle_context
};

const char* kind_name(kind k) {
  switch (k) {
  case kind::plugin: return "plugin instance";
  case kind::context: return "context";
  case kind::queue: return "queue";
  case kind::event: return "event";
  case kind::memory: return "memory";
  case kind::program: return "program";
  case kind::kernel: return "kernel";
  case kind::bundle: return "bundle instance";
  case kind::bundle_context: return "bundle context";
  }
  return "handle";
}
bool on_bundle_side(kind k) { return k == kind::bundle || k == kind::bundle_context; }

struct record {
  kind k = kind::plugin;
  int slot = -1;                 // framework slot, or bundle slot for the bundle kinds
  uint32_t refs = 1;             // a plugin may hand out one object twice (then destroys it twice)
  const void* plugin = nullptr;  // the plugin (or bundle) instance it belongs to
  const void* context = nullptr; // the framework context it lives in
  const void* parent = nullptr;  // event: its queue; kernel: its program; memory: what it
                                 // aliases; bundle context: the queue it was set up with
  uint64_t bytes = 0;            // memory: usable bytes (0: unknown)
  uint32_t device = 0;           // queue: device index in its context
  std::vector<uint32_t> devices; // context: the plugin's device indices
  uint32_t aliases = 0;          // memory: live imports of its exports
  std::vector<std::pair<int, uint64_t>> exported; // memory: the handles it was exported as
  int8_t host = -1;                               // memory: host-visible? -1: not asked yet
  const std::byte* host_ptr = nullptr;
  uint64_t host_bytes = 0;
  const pcy_framework_api* fw_table = nullptr; // bundle context: the framework table it got
  int fw_slot = -1;                            // ... and that table's slot, when wrapped
  uint32_t busy = 0;                           // queue, bundle context: calls inside it now
  std::thread::id busy_by;                     // ... all on this thread
  const std::string* busy_who = nullptr;       // ... the first one's (valid while busy > 0)
  const char* busy_call = nullptr;
};

struct gone {
  kind k;
  int slot;
  const char* by;
};

struct fw_slot {
  bool used = false;
  const RegistryImpl* owner = nullptr;
  const pcy_framework_api* host_table = nullptr;
  pcy_framework_api orig{};
  std::string name;
  std::map<uint32_t, bool> cross_context_events; // by plugin device, from device_properties
};

// The host-owned copies of one bundle instance's op descriptors, with the layer's entry points.
struct op_set {
  const void* instance = nullptr;
  const void* plugin_array = nullptr;
  size_t count = 0, stride = 0;
  std::unique_ptr<pcy_op_desc[]> copies;
  std::vector<int> op_slots; // per op, -1 when the op is not wrapped
};

struct bundle_slot {
  bool used = false;
  const RegistryImpl* owner = nullptr;
  const pcy_bundle_api* host_table = nullptr;
  pcy_bundle_api orig{};
  std::string name, framework;
  std::vector<std::unique_ptr<op_set>> op_sets; // kept until the registry closes
};

struct op_slot {
  bool used = false;
  int bundle = -1;
  const void* instance = nullptr;
  pcy_op_fn fn = nullptr;
  const pcy_op_desc* copy = nullptr;
  std::string label; // "blas_native.axpy (f32)"
};

struct registry_state {
  uint64_t leaks = 0;
};

struct state {
  std::mutex m;
  std::array<fw_slot, fw_pool> fw;
  std::array<bundle_slot, bundle_pool> b;
  std::array<op_slot, op_pool> ops;
  // Free slots are taken from the front and given back at the end, so a slot is reused as late
  // as possible (a stale pointer into a given-back table is then most likely still refused).
  std::deque<int> fw_free, b_free, op_free;
  std::unordered_map<const void*, record> live;
  std::unordered_map<const void*, gone> freed;
  std::map<std::pair<int, uint64_t>, const void*> exports; // (handle kind, value) -> memory
  std::map<const RegistryImpl*, registry_state> registries;
  // The lifecycle call in progress (G4): depth on one thread, its name and plugin.
  uint32_t lifecycle = 0;
  std::thread::id lifecycle_by;
  std::string lifecycle_call;
  counters c;
  state() {
    for (int i = 0; i < fw_pool; ++i)
      fw_free.push_back(i);
    for (int i = 0; i < bundle_pool; ++i)
      b_free.push_back(i);
    for (int i = 0; i < op_pool; ++i)
      op_free.push_back(i);
  }
};

state& st() {
  // Never destroyed: registries (the global one) close during the process's exit handlers.
  static state* s = new state;
  return *s;
}
std::atomic<bool> g_any_wrapped{false};

using sdk::str;

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

template <class E> int64_t raw(const E& e) noexcept {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<int64_t>(v);
}

// The first broken rule of one call.
struct finding {
  const char* rule = nullptr;
  std::string problem;
  void set(const char* r, std::string p) {
    if (rule != nullptr) return;
    rule = r;
    problem = std::move(p);
  }
};

std::string slot_name(const state& s, bool bundle, int slot) {
  if (slot < 0) return "?";
  return bundle ? s.b[static_cast<size_t>(slot)].name : s.fw[static_cast<size_t>(slot)].name;
}

// Under the lock: counts the violation and returns its text.
std::string count(state& s, const std::string& who, const char* call, const finding& f) {
  std::string msg = who + "." + call + ": " + f.problem + " [rule: " + f.rule + "]";
  ++s.c.violations;
  ++s.c.rules[f.rule];
  s.c.messages.push_back(msg);
  if (s.c.messages.size() > max_messages) s.c.messages.erase(s.c.messages.begin());
  return msg;
}

// After the lock: the report, logged at ERROR and returned as the call's error.
pcy_error* report(const std::string& msg) {
  detail::log(PCY_LOG_ERROR, origin, msg);
  return sdk::make_error(PCY_ERR_INVALID_ARGUMENT, msg, origin);
}
void report_void(const std::string& msg) { detail::log(PCY_LOG_ERROR, origin, msg); }

template <class F> pcy_error* guarded(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return sdk::make_error(PCY_ERR_OUT_OF_MEMORY, "validation layer: host memory exhausted",
                           origin);
  }
}
template <class F> void guarded_void(F&& f) noexcept {
  try {
    f();
  } catch (...) {
    detail::log(PCY_LOG_ERROR, origin, "validation layer: host memory exhausted");
  }
}

// `h` must be a live handle of kind `k` made through slot `slot` (of the framework or bundle
// side, by the kind); otherwise the finding says which rule it breaks.
record* expect(state& s, finding& f, int slot, const void* h, kind k, const char* role,
               bool destroying = false) {
  if (f.rule != nullptr) return nullptr;
  const bool bundle = on_bundle_side(k);
  if (h == nullptr) {
    f.set(rule_live, str(role, " is NULL"));
    return nullptr;
  }
  if (auto it = s.live.find(h); it != s.live.end()) {
    record& r = it->second;
    if (r.k != k) {
      f.set(rule_kind, str(role, " ", hex(h), " is a ", kind_name(r.k), " of '",
                           slot_name(s, on_bundle_side(r.k), r.slot), "', not a ", kind_name(k)));
      return nullptr;
    }
    if (r.slot != slot) {
      f.set(rule_owner,
            str(role, " ", hex(h), " is a ", kind_name(k), " of plugin '",
                slot_name(s, bundle, r.slot), "', not of '", slot_name(s, bundle, slot), "'"));
      return nullptr;
    }
    return &r;
  }
  if (auto g = s.freed.find(h); g != s.freed.end() && g->second.k == k) {
    f.set(rule_live, str(role, " ", hex(h), " is a ", kind_name(k), " of '",
                         slot_name(s, bundle, g->second.slot), "' already destroyed by ",
                         g->second.by, destroying ? " (double free)" : " (use after free)"));
    return nullptr;
  }
  f.set(rule_live, str(role, " ", hex(h), " is not a live ", kind_name(k),
                       " (never handed out by a plugin, or destroyed long ago)"));
  return nullptr;
}

template <class T>
bool sized(finding& f, const T* p, size_t pin, const char* type, const char* pin_name) {
  if (f.rule != nullptr) return false;
  if (p == nullptr) {
    f.set(rule_size, str(type, " pointer is NULL"));
    return false;
  }
  if (p->struct_size < pin) {
    f.set(rule_size, str(type, ".struct_size is ", p->struct_size, ", less than ", pin_name, " (",
                         pin, " bytes)"));
    return false;
  }
  return true;
}
#define PARENCHYMA_VALIDATE_SIZED(f, p, type, pin) sized(f, p, pin, type, #pin)

record& add(state& s, const void* h, record r) {
  s.freed.erase(h);
  auto [it, fresh] = s.live.try_emplace(h, std::move(r));
  if (!fresh) {
    if (it->second.k == r.k && it->second.slot == r.slot)
      ++it->second.refs;
    else
      it->second = std::move(r); // an address the layer missed being destroyed, reused
  }
  return it->second;
}

void forget_exports(state& s, const void* h, const record& r) {
  for (const auto& key : r.exported)
    if (auto e = s.exports.find(key); e != s.exports.end() && e->second == h) s.exports.erase(e);
}

void drop(state& s, const void* h, const char* by) {
  auto it = s.live.find(h);
  if (it == s.live.end()) return;
  record& r = it->second;
  if (--r.refs > 0) return;
  if (r.k == kind::memory) {
    if (r.parent != nullptr)
      if (auto src = s.live.find(r.parent); src != s.live.end() && src->second.aliases > 0)
        --src->second.aliases;
    forget_exports(s, h, r);
  }
  const gone g{r.k, r.slot, by};
  s.live.erase(it);
  if (s.freed.size() >= max_freed) s.freed.clear();
  s.freed[h] = g;
}

// The live objects an instance still owns, by kind: dropped (the plugin is going) and counted.
std::string collect_leaks(state& s, bool bundle, int slot, const void* instance, uint64_t& total) {
  total = 0;
  std::map<kind, uint64_t> by_kind;
  std::string examples;
  size_t shown = 0;
  for (auto it = s.live.begin(); it != s.live.end();) {
    const record& r = it->second;
    if (on_bundle_side(r.k) == bundle && r.slot == slot && r.plugin == instance &&
        r.k != kind::plugin && r.k != kind::bundle) {
      ++by_kind[r.k];
      if (shown++ < 6) examples += str(shown == 1 ? "" : ", ", kind_name(r.k), " ", hex(it->first));
      forget_exports(s, it->first, r);
      it = s.live.erase(it);
    } else {
      ++it;
    }
  }
  std::string text;
  for (const auto& [k, n] : by_kind) {
    text += str(text.empty() ? "" : ", ", n, " ", kind_name(k));
    total += n;
    s.c.leaked[kind_name(k)] += n;
  }
  s.c.leaks += total;
  if (text.empty()) return text;
  return str(total, " object(s) still alive: ", text, " (", examples, shown > 6 ? ", ..." : "",
             ")");
}

void leak_report(state& s, const RegistryImpl* owner, const std::string& who, uint64_t n,
                 std::string text, std::vector<std::string>& out) {
  if (text.empty()) return;
  if (auto r = s.registries.find(owner); r != s.registries.end()) r->second.leaks += n;
  std::string msg = who + ".shutdown: " + text + " [rule: " + rule_leak + "]";
  s.c.messages.push_back(msg);
  if (s.c.messages.size() > max_messages) s.c.messages.erase(s.c.messages.begin());
  out.push_back(std::move(msg));
}

// The slot's state, or a finding when its registry is gone (a stale table pointer).
fw_slot* fw_of(state& s, int slot, finding& f) {
  fw_slot& fs = s.fw[static_cast<size_t>(slot)];
  if (!fs.used) {
    f.set(rule_live, "called through a framework table whose registry no longer exists");
    return nullptr;
  }
  return &fs;
}
bundle_slot* b_of(state& s, int slot, finding& f) {
  bundle_slot& bs = s.b[static_cast<size_t>(slot)];
  if (!bs.used) {
    f.set(rule_live, "called through a bundle table whose registry no longer exists");
    return nullptr;
  }
  return &bs;
}

// One checked call: the lock, the slot's name, the first finding.
struct scope {
  state& s = st();
  std::unique_lock<std::mutex> lock{s.m};
  finding f;
  std::string who = "?";
  const char* call;
  fw_slot* fw = nullptr;
  bundle_slot* b = nullptr;
  scope(int slot, bool bundle, const char* name) : call(name) {
    if (bundle) {
      b = b_of(s, slot, f);
      if (b != nullptr) who = b->name;
    } else {
      fw = fw_of(s, slot, f);
      if (fw != nullptr) who = fw->name;
    }
  }
  bool ok() const { return f.rule == nullptr; }
  // Counts a finding and releases the lock; empty when the call is fine. A thread rule broken
  // on the way is logged here, and the call goes on.
  std::string verdict() {
    std::string msg = ok() ? std::string() : count(s, who, call, f);
    lock.unlock();
    for (const auto& r : races)
      report_void(r);
    races.clear();
    return msg;
  }
  // The call enqueues on queue (or bundle context) `h`: no other thread may be inside one too.
  void busy(const void* h, record* r, const char* what) {
    if (r == nullptr || !ok() || held_n == held.size()) return;
    const auto me = std::this_thread::get_id();
    if (r->busy > 0 && r->busy_by != me) {
      race(rule_queue_threads,
           str(what, " ", hex(h), " is used by another thread (",
               r->busy_who != nullptr ? *r->busy_who : std::string("?"), ".", r->busy_call,
               ") at the same time: calls that enqueue on one queue, and ops on one bundle "
               "context, must come one at a time"));
      return;
    }
    if (r->busy++ == 0) {
      r->busy_who = &who;
      r->busy_call = call;
    }
    r->busy_by = me;
    held[held_n++] = h;
  }
  // A lifecycle call: no other thread may be inside one of any plugin (G4).
  void lifecycle() {
    if (!ok()) return;
    const auto me = std::this_thread::get_id();
    if (s.lifecycle > 0 && s.lifecycle_by != me) {
      race(rule_lifecycle_threads,
           str(call, " runs while another thread is inside ", s.lifecycle_call,
               ": initialize, probe, device_properties, context_create, context_destroy and "
               "shutdown must never run at the same time, for any plugin"));
      return;
    }
    if (s.lifecycle++ == 0) s.lifecycle_call = who + "." + call;
    s.lifecycle_by = me;
    in_lifecycle = true;
  }
  ~scope() {
    if (held_n == 0 && !in_lifecycle) return;
    try {
      if (!lock.owns_lock()) lock.lock();
      for (size_t i = 0; i < held_n; ++i)
        if (auto it = s.live.find(held[i]); it != s.live.end() && it->second.busy > 0)
          --it->second.busy;
      if (in_lifecycle && s.lifecycle > 0) --s.lifecycle;
    } catch (...) {
    }
  }
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;

private:
  void race(const char* rule, std::string problem) {
    finding r;
    r.set(rule, std::move(problem));
    races.push_back(count(s, who, call, r));
  }
  std::vector<std::string> races;
  std::array<const void*, 2> held{};
  size_t held_n = 0;
  bool in_lifecycle = false;
};

// ---- framework entry points -----------------------------------------------------------------

pcy_error* fw_initialize(int slot, pcy_framework_init_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, false, "initialize");
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_framework_init_args",
                                  PCY_FRAMEWORK_INIT_ARGS_SIZE_1_0))
      PARENCHYMA_VALIDATE_SIZED(c.f, a->host, "pcy_host_services", PCY_HOST_SERVICES_SIZE_1_0);
    c.lifecycle();
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
    c.lifecycle();
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
    c.lifecycle();
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
    c.lifecycle();
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
    c.lifecycle();
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
      c.lifecycle();
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

pcy_error* fw_transfer(int slot, const pcy_memory_transfer_args* a, bool read) {
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

// ---- bundle entry points --------------------------------------------------------------------

pcy_error* b_initialize(int slot, pcy_bundle_init_args* a) {
  return guarded([&]() -> pcy_error* {
    scope c(slot, true, "initialize");
    if (PARENCHYMA_VALIDATE_SIZED(c.f, a, "pcy_bundle_init_args", PCY_BUNDLE_INIT_ARGS_SIZE_1_0))
      PARENCHYMA_VALIDATE_SIZED(c.f, a->host, "pcy_host_services", PCY_HOST_SERVICES_SIZE_1_0);
    c.lifecycle();
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
    c.lifecycle();
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

extern const std::array<pcy_op_fn, op_pool> op_entries;

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
    const char* dt = sdk::dtype_name(static_cast<pcy_dtype>(raw(d.dtype)));
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

// ---- ops: the `in` tensor check ---------------------------------------------------------------

// [begin, end) bytes of a tensor in its memory; nullopt when its shape cannot be read.
std::optional<std::pair<uint64_t, uint64_t>> extent(const pcy_tensor& t) {
  const size_t es = sdk::dtype_size(static_cast<pcy_dtype>(raw(t.dtype)));
  if (es == 0 || t.ndim < 0 || t.ndim > 64 || (t.ndim > 0 && t.shape == nullptr))
    return std::nullopt;
  int64_t lo = 0, hi = 0; // element offsets of the lowest and highest element
  for (int32_t k = 0; k < t.ndim; ++k) {
    if (t.shape[k] < 0) return std::nullopt;
    if (t.shape[k] == 0) return std::make_pair(t.byte_offset, t.byte_offset);
  }
  int64_t dense = 1;
  for (int32_t k = t.ndim; k-- > 0;) {
    const int64_t stride = t.strides != nullptr ? t.strides[k] : dense;
    int64_t span = 0;
    if (__builtin_mul_overflow(t.shape[k] - 1, stride, &span)) return std::nullopt;
    if (__builtin_add_overflow(span >= 0 ? hi : lo, span, span >= 0 ? &hi : &lo))
      return std::nullopt;
    if (__builtin_mul_overflow(dense, t.shape[k], &dense)) return std::nullopt;
  }
  int64_t lo_b = 0, hi_b = 0;
  if (__builtin_mul_overflow(lo, static_cast<int64_t>(es), &lo_b) ||
      __builtin_mul_overflow(hi + 1, static_cast<int64_t>(es), &hi_b))
    return std::nullopt;
  const auto off = static_cast<int64_t>(t.byte_offset);
  if (off < 0 || off + lo_b < 0) return std::nullopt;
  return std::make_pair(static_cast<uint64_t>(off + lo_b), static_cast<uint64_t>(off + hi_b));
}

uint64_t hash_bytes(const std::byte* p, uint64_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  for (; i < n; ++i)
    h = (h ^ static_cast<uint64_t>(p[i])) * 0x100000001b3ull;
  return h;
}

std::string arg_name(const pcy_op_desc* copy, uint32_t i) {
  std::string n = str("#", i);
  if (copy != nullptr && copy->schema != nullptr && i < copy->schema->arg_count &&
      copy->schema->args != nullptr && copy->schema->args[i].name != nullptr)
    n = detail::quote_prefix(copy->schema->args[i].name, 32) + " (" + n + ")";
  return n;
}

struct watched {
  uint32_t arg;
  const void* memory;
  const std::byte* bytes = nullptr; // host view of the extent; nullptr: not checked
  uint64_t size = 0;
  uint64_t hash = 0;
};

void finish(const pcy_framework_api* fw, pcy_queue q) {
  if (fw == nullptr || fw->queue_finish == nullptr) return;
  if (pcy_error* e = fw->queue_finish(q)) e->destroy(e);
}

pcy_error* run_op(int k, const pcy_op_call* call) {
  return guarded([&]() -> pcy_error* {
    state& s = st();
    pcy_op_fn fn = nullptr;
    std::string label;
    const pcy_op_desc* copy = nullptr;
    const void* instance = nullptr;
    int slot = -1;
    {
      std::unique_lock lock(s.m);
      const op_slot& os = s.ops[static_cast<size_t>(k)];
      if (!os.used) {
        finding f;
        f.set(rule_live, "an op of a bundle that was shut down was called");
        std::string bad = count(s, "?", "op", f);
        lock.unlock();
        return report(bad);
      }
      fn = os.fn;
      label = os.label;
      copy = os.copy;
      instance = os.instance;
      slot = os.bundle;
    }
    scope c(slot, true, "op");
    c.who = label;
    finding& f = c.f;
    const pcy_framework_api* fw = nullptr; // the framework's own table (for finish, export)
    std::vector<watched> ins;
    std::vector<std::pair<const void*, std::pair<uint64_t, uint64_t>>> writes;
    std::vector<size_t> ask; // ins whose memory's host view is not known yet
    if (c.ok() && PARENCHYMA_VALIDATE_SIZED(f, call, "pcy_op_call", PCY_OP_CALL_SIZE_1_0)) {
      record* bc = expect(s, f, slot, call->context, kind::bundle_context, "bundle context");
      if (bc != nullptr && bc->plugin != instance)
        f.set(rule_owner, str("bundle context ", hex(call->context),
                              " was set up by another instance of the bundle"));
      int fs = -1;
      const void* ctx = nullptr;
      if (bc != nullptr) {
        fs = bc->fw_slot;
        ctx = bc->context;
        fw = fs >= 0 ? &s.fw[static_cast<size_t>(fs)].orig : bc->fw_table;
      }
      if (fs >= 0 && !s.fw[static_cast<size_t>(fs)].used) fs = -1;
      record* q = nullptr;
      if (fs >= 0) {
        q = expect(s, f, fs, call->queue, kind::queue, "the call's queue");
        if (q != nullptr && q->context != ctx)
          f.set(rule_context,
                str("queue ", hex(call->queue), " belongs to context ", hex(q->context),
                    ", the bundle context was set up in ", hex(ctx)));
      }
      if (call->arg_count > 0 && call->args == nullptr)
        f.set(rule_call, str("args is NULL with arg_count ", call->arg_count));
      const bool has_ext = PCY_HAS_FIELD(call, pcy_op_call, arg_ext) && call->arg_ext != nullptr;
      for (uint32_t i = 0; f.rule == nullptr && call->args != nullptr && i < call->arg_count; ++i) {
        const pcy_op_arg& a = call->args[i];
        if (has_ext)
          PARENCHYMA_VALIDATE_SIZED(f, &call->arg_ext[i], "pcy_op_arg_ext",
                                    PCY_SIZE_THROUGH(pcy_op_arg_ext, count));
        if (raw(a.kind) != PCY_OP_ARG_TENSOR) continue;
        const std::string name = "argument " + arg_name(copy, i);
        if (!PARENCHYMA_VALIDATE_SIZED(f, a.tensor, "pcy_tensor", PCY_TENSOR_SIZE_1_0)) {
          f.problem = name + ": " + f.problem;
          break;
        }
        const auto range = extent(*a.tensor);
        if (fs < 0) continue; // memory of a framework the layer does not know
        const std::string role = name + "'s memory";
        record* m = expect(s, f, fs, a.tensor->memory, kind::memory, role.c_str());
        if (m == nullptr) break;
        if (m->context != ctx)
          f.set(rule_context,
                str(role, " ", hex(a.tensor->memory), " lives in context ", hex(m->context),
                    ", the bundle context was set up in ", hex(ctx)));
        if (!range || (m->bytes > 0 && range->second > m->bytes))
          f.set(rule_extent, range
                                 ? str(name, " reaches byte ", range->second,
                                       " of its memory, which has ", m->bytes)
                                 : str(name, " has a shape (or strides) that cannot be laid out"));
        if (f.rule != nullptr) break;
        if (raw(a.intent) != PCY_INTENT_IN) {
          writes.emplace_back(a.tensor->memory, *range);
          continue;
        }
        if (range->first == range->second) continue;
        watched w{i, a.tensor->memory};
        if (m->host < 0) ask.push_back(ins.size());
        ins.push_back(w);
      }
      c.busy(call->context, bc, "bundle context");
      c.busy(call->queue, q, "queue");
    }
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);

    // Host views of the `in` tensors' memory, asked of the framework once per memory.
    for (size_t idx : ask) {
      if (fw == nullptr || fw->memory_export == nullptr) break;
      pcy_memory_handle h{};
      h.struct_size = sizeof h;
      pcy_memory_export_args x{};
      x.struct_size = sizeof x;
      x.memory = static_cast<pcy_memory>(const_cast<void*>(ins[idx].memory));
      x.kind = PCY_HANDLE_HOST_POINTER;
      x.handle = &h;
      pcy_error* e = fw->memory_export(&x);
      const bool visible =
          e == nullptr && raw(h.kind) == PCY_HANDLE_HOST_POINTER && h.host_pointer != nullptr;
      if (e != nullptr) e->destroy(e);
      std::lock_guard relock(s.m);
      if (auto it = s.live.find(ins[idx].memory); it != s.live.end() && it->second.host < 0) {
        it->second.host = visible ? 1 : 0;
        it->second.host_ptr = visible ? static_cast<const std::byte*>(h.host_pointer) : nullptr;
        it->second.host_bytes = visible ? h.bytes : 0;
      }
    }
    bool any = false;
    {
      std::lock_guard relock(s.m);
      for (watched& w : ins) {
        auto it = s.live.find(w.memory);
        if (it == s.live.end() || it->second.host != 1) continue;
        const auto range = *extent(*call->args[w.arg].tensor);
        if (range.second > it->second.host_bytes) continue;
        // An `in` argument whose bytes are also written through another argument may change.
        bool overlap = false;
        for (const auto& [mem, r] : writes) {
          if (mem == w.memory) {
            overlap = overlap || (r.first < range.second && range.first < r.second);
            continue;
          }
          auto wi = s.live.find(mem);
          overlap =
              overlap || (wi != s.live.end() && wi->second.host == 1 &&
                          wi->second.host_ptr + r.first < it->second.host_ptr + range.second &&
                          it->second.host_ptr + range.first < wi->second.host_ptr + r.second);
        }
        if (overlap) continue;
        w.bytes = it->second.host_ptr + range.first;
        w.size = range.second - range.first;
        any = true;
      }
    }
    // The op's queue is drained before (a pending write may still be filling an `in` tensor)
    // and after (the op may run asynchronously): validation mode is slow on purpose.
    if (any) {
      finish(fw, call->queue);
      for (watched& w : ins)
        if (w.bytes != nullptr) w.hash = hash_bytes(w.bytes, w.size);
    }
    pcy_error* e = fn(call);
    if (!any) return e;
    finish(fw, call->queue);
    for (const watched& w : ins) {
      if (w.bytes == nullptr || hash_bytes(w.bytes, w.size) == w.hash) continue;
      f.set(rule_in,
            str("argument ", arg_name(copy, w.arg), " is an `in` tensor (memory ", hex(w.memory),
                ", ", w.size, " bytes), and its bytes changed during the op: the bundle wrote it"));
      break;
    }
    if (f.rule == nullptr) return e;
    c.lock.lock();
    std::string bad = c.verdict();
    if (e != nullptr) {
      report_void(bad);
      return e;
    }
    return report(bad);
  });
}

// ---- the entry points of each pool slot ----------------------------------------------------

template <int S> struct fw_entries {
  static pcy_error* initialize(pcy_framework_init_args* a) noexcept { return fw_initialize(S, a); }
  static void shutdown(pcy_plugin p) noexcept { fw_shutdown(S, p); }
  static pcy_error* probe(pcy_plugin p, pcy_framework_probe* o) noexcept {
    return fw_probe(S, p, o);
  }
  static pcy_error* device_properties(pcy_plugin p, uint32_t d, const pcy_property** pr,
                                      size_t* n) noexcept {
    return fw_device_properties(S, p, d, pr, n);
  }
  static pcy_error* context_create(pcy_plugin p, const uint32_t* d, uint32_t n,
                                   pcy_context* o) noexcept {
    return fw_context_create(S, p, d, n, o);
  }
  static void context_destroy(pcy_context c) noexcept { fw_context_destroy(S, c); }
  static pcy_error* queue_create(pcy_context c, uint32_t d, pcy_queue* o) noexcept {
    return fw_queue_create(S, c, d, o);
  }
  static void queue_destroy(pcy_queue q) noexcept { fw_queue_destroy(S, q); }
  static pcy_error* queue_finish(pcy_queue q) noexcept { return fw_queue_finish(S, q); }
  static pcy_error* event_record(pcy_queue q, pcy_event* o) noexcept {
    return fw_event_record(S, q, o);
  }
  static pcy_error* event_wait(pcy_event e) noexcept { return fw_event_wait(S, e); }
  static pcy_error* queue_wait_event(pcy_queue q, pcy_event e) noexcept {
    return fw_queue_wait_event(S, q, e);
  }
  static void event_destroy(pcy_event e) noexcept { fw_event_destroy(S, e); }
  static pcy_error* memory_alloc(pcy_memory_alloc_args* a) noexcept {
    return fw_memory_alloc(S, a);
  }
  static void memory_free(pcy_memory m) noexcept { fw_memory_free(S, m); }
  static pcy_error* memory_read(const pcy_memory_transfer_args* a) noexcept {
    return fw_transfer(S, a, true);
  }
  static pcy_error* memory_write(const pcy_memory_transfer_args* a) noexcept {
    return fw_transfer(S, a, false);
  }
  static pcy_error* memory_copy(const pcy_memory_copy_args* a) noexcept {
    return fw_memory_copy(S, a);
  }
  static pcy_error* memory_fill(const pcy_memory_fill_args* a) noexcept {
    return fw_memory_fill(S, a);
  }
  static pcy_error* memory_export(pcy_memory_export_args* a) noexcept {
    return fw_memory_export(S, a);
  }
  static pcy_error* memory_import(pcy_memory_import_args* a) noexcept {
    return fw_memory_import(S, a);
  }
  static pcy_error* native_handle(pcy_native_handle_args* a) noexcept {
    return fw_native_handle(S, a);
  }
  static pcy_error* program_build(pcy_program_build_args* a) noexcept {
    return fw_program_build(S, a);
  }
  static void program_destroy(pcy_program p) noexcept { fw_program_destroy(S, p); }
  static pcy_error* kernel_create(pcy_kernel_create_args* a) noexcept {
    return fw_kernel_create(S, a);
  }
  static void kernel_destroy(pcy_kernel k) noexcept { fw_kernel_destroy(S, k); }
  static pcy_error* kernel_launch(const pcy_kernel_launch_args* a) noexcept {
    return fw_kernel_launch(S, a);
  }
  // Every slot the plugin filled becomes the layer's; an absent one stays absent.
  static void install(pcy_framework_api& t) noexcept {
#define PARENCHYMA_VALIDATE_SLOT(name)                                                             \
  if (t.name != nullptr) t.name = &name;
    PARENCHYMA_VALIDATE_SLOT(initialize)
    PARENCHYMA_VALIDATE_SLOT(shutdown)
    PARENCHYMA_VALIDATE_SLOT(probe)
    PARENCHYMA_VALIDATE_SLOT(device_properties)
    PARENCHYMA_VALIDATE_SLOT(context_create)
    PARENCHYMA_VALIDATE_SLOT(context_destroy)
    PARENCHYMA_VALIDATE_SLOT(queue_create)
    PARENCHYMA_VALIDATE_SLOT(queue_destroy)
    PARENCHYMA_VALIDATE_SLOT(queue_finish)
    PARENCHYMA_VALIDATE_SLOT(event_record)
    PARENCHYMA_VALIDATE_SLOT(event_wait)
    PARENCHYMA_VALIDATE_SLOT(queue_wait_event)
    PARENCHYMA_VALIDATE_SLOT(event_destroy)
    PARENCHYMA_VALIDATE_SLOT(memory_alloc)
    PARENCHYMA_VALIDATE_SLOT(memory_free)
    PARENCHYMA_VALIDATE_SLOT(memory_read)
    PARENCHYMA_VALIDATE_SLOT(memory_write)
    PARENCHYMA_VALIDATE_SLOT(memory_copy)
    PARENCHYMA_VALIDATE_SLOT(memory_fill)
    PARENCHYMA_VALIDATE_SLOT(memory_export)
    PARENCHYMA_VALIDATE_SLOT(memory_import)
    PARENCHYMA_VALIDATE_SLOT(native_handle)
    PARENCHYMA_VALIDATE_SLOT(program_build)
    PARENCHYMA_VALIDATE_SLOT(program_destroy)
    PARENCHYMA_VALIDATE_SLOT(kernel_create)
    PARENCHYMA_VALIDATE_SLOT(kernel_destroy)
    PARENCHYMA_VALIDATE_SLOT(kernel_launch)
  }
};

template <int S> struct bundle_entries {
  static pcy_error* initialize(pcy_bundle_init_args* a) noexcept { return b_initialize(S, a); }
  static void shutdown(pcy_bundle_plugin p) noexcept { b_shutdown(S, p); }
  static pcy_error* ops(pcy_bundle_plugin p, const pcy_op_desc** o, size_t* n) noexcept {
    return b_ops(S, p, o, n);
  }
  static pcy_error* context_init(pcy_bundle_context_args* a) noexcept {
    return b_context_init(S, a);
  }
  static void context_teardown(pcy_bundle_context c) noexcept { b_context_teardown(S, c); }
  static bool op_available(pcy_bundle_context c, const pcy_op_desc* op, const char** r) noexcept {
    return b_op_available(S, c, op, r);
  }
  static void install(pcy_bundle_api& t) noexcept {
    PARENCHYMA_VALIDATE_SLOT(initialize)
    PARENCHYMA_VALIDATE_SLOT(shutdown)
    PARENCHYMA_VALIDATE_SLOT(ops)
    PARENCHYMA_VALIDATE_SLOT(context_init)
    PARENCHYMA_VALIDATE_SLOT(context_teardown)
    PARENCHYMA_VALIDATE_SLOT(op_available)
#undef PARENCHYMA_VALIDATE_SLOT
  }
};

template <int K> pcy_error* op_entry(const pcy_op_call* call) noexcept { return run_op(K, call); }

template <int... I>
constexpr std::array<void (*)(pcy_framework_api&) noexcept, sizeof...(I)>
fw_installers(std::integer_sequence<int, I...>) {
  return {&fw_entries<I>::install...};
}
template <int... I>
constexpr std::array<void (*)(pcy_bundle_api&) noexcept, sizeof...(I)>
bundle_installers(std::integer_sequence<int, I...>) {
  return {&bundle_entries<I>::install...};
}
template <int... I>
constexpr std::array<pcy_op_fn, sizeof...(I)> op_entry_list(std::integer_sequence<int, I...>) {
  return {&op_entry<I>...};
}

constexpr auto fw_install = fw_installers(std::make_integer_sequence<int, fw_pool>{});
constexpr auto bundle_install = bundle_installers(std::make_integer_sequence<int, bundle_pool>{});
constexpr std::array<pcy_op_fn, op_pool> op_entries_list =
    op_entry_list(std::make_integer_sequence<int, op_pool>{});
const std::array<pcy_op_fn, op_pool> op_entries = op_entries_list;

// ---- switching the layer on -------------------------------------------------------------------

std::optional<bool> parse_switch(const std::string& v) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  return std::nullopt;
}

// RegistryOptions::validate, else PARENCHYMA_VALIDATE (from the options' environment when that
// sets it, else the process's own environment, which set-uid processes ignore: a debugging switch
// must reach registries that tests isolate), else the config's "validate".
bool wanted(RegistryImpl& r) {
  if (r.options.validate) return *r.options.validate;
  std::optional<std::string> v;
  if (r.options.environment)
    if (auto it = r.options.environment->find("PARENCHYMA_VALIDATE");
        it != r.options.environment->end())
      v = it->second;
  if (!v && !r.secure)
    if (const char* e = std::getenv("PARENCHYMA_VALIDATE")) v = std::string(e);
  if (v && !v->empty()) {
    if (auto on = parse_switch(*v)) return *on;
    const std::string text = "PARENCHYMA_VALIDATE: \"" + detail::quote_prefix(*v) +
                             "\" is not a switch (use 1 or 0); ignored";
    if (std::find(r.notices.begin(), r.notices.end(), text) == r.notices.end()) {
      detail::log(PCY_LOG_WARN, "registry", text);
      r.notices.push_back(text);
    }
  }
  return r.config.validate;
}

// A slot given back: its records go (the plugin is unloaded), and it joins the free list.
void release_fw(state& s, int i) {
  fw_slot& fs = s.fw[static_cast<size_t>(i)];
  for (auto it = s.live.begin(); it != s.live.end();)
    if (!on_bundle_side(it->second.k) && it->second.slot == i) {
      forget_exports(s, it->first, it->second);
      it = s.live.erase(it);
    } else {
      ++it;
    }
  fs = fw_slot{};
  s.fw_free.push_back(i);
}

void release_bundle(state& s, int i) {
  bundle_slot& bs = s.b[static_cast<size_t>(i)];
  release_ops(s, bs, nullptr);
  for (auto it = s.live.begin(); it != s.live.end();)
    if (on_bundle_side(it->second.k) && it->second.slot == i)
      it = s.live.erase(it);
    else
      ++it;
  bs.used = false;
  bs.owner = nullptr;
  bs.host_table = nullptr;
  bs.op_sets.clear();
  bs.name.clear();
  bs.framework.clear();
  s.b_free.push_back(i);
}

// Whether the registry validates; remembered for it (its slots are given back at close).
bool validating(state& s, std::unique_lock<std::mutex>& lock, RegistryImpl& r) {
  if (s.registries.count(&r) != 0) return true;
  lock.unlock();
  const bool on = wanted(r);
  lock.lock();
  if (on) s.registries.try_emplace(&r);
  return on;
}

std::string table_name(const char* name) {
  return name != nullptr ? detail::quote_prefix(name, 64) : std::string("?");
}

} // namespace

void wrap_framework(RegistryImpl& r, pcy_framework_api& t) noexcept {
  try {
    state& s = st();
    std::unique_lock lock(s.m);
    if (!validating(s, lock, r)) return;
    // A table at the address of one wrapped before was freed (its plugin was refused): that
    // slot is dead.
    for (int i = 0; i < fw_pool; ++i)
      if (s.fw[static_cast<size_t>(i)].used && s.fw[static_cast<size_t>(i)].host_table == &t)
        release_fw(s, i);
    if (s.fw_free.empty()) {
      const std::string text = "validation: no free slot for framework " + table_name(t.name) +
                               " (more than " + std::to_string(fw_pool) +
                               " validated framework tables alive): it is not validated";
      r.notices.push_back(text);
      lock.unlock();
      detail::log(PCY_LOG_WARN, origin, text);
      return;
    }
    const int i = s.fw_free.front();
    s.fw_free.pop_front();
    fw_slot& fs = s.fw[static_cast<size_t>(i)];
    fs.used = true;
    fs.owner = &r;
    fs.host_table = &t;
    fs.orig = t;
    fs.name = table_name(t.name);
    fw_install[static_cast<size_t>(i)](t);
    ++s.c.wrapped_tables;
    g_any_wrapped.store(true, std::memory_order_relaxed);
  } catch (...) {
    detail::log(PCY_LOG_ERROR, origin, "validation layer: could not wrap a framework table");
  }
}

void wrap_bundle(RegistryImpl& r, pcy_bundle_api& t) noexcept {
  try {
    state& s = st();
    std::unique_lock lock(s.m);
    if (!validating(s, lock, r)) return;
    for (int i = 0; i < bundle_pool; ++i)
      if (s.b[static_cast<size_t>(i)].used && s.b[static_cast<size_t>(i)].host_table == &t)
        release_bundle(s, i);
    if (s.b_free.empty()) {
      const std::string text = "validation: no free slot for bundle " + table_name(t.name) +
                               " (more than " + std::to_string(bundle_pool) +
                               " validated bundle tables alive): it is not validated";
      r.notices.push_back(text);
      lock.unlock();
      detail::log(PCY_LOG_WARN, origin, text);
      return;
    }
    const int i = s.b_free.front();
    s.b_free.pop_front();
    bundle_slot& bs = s.b[static_cast<size_t>(i)];
    bs.used = true;
    bs.owner = &r;
    bs.host_table = &t;
    bs.orig = t;
    bs.name = table_name(t.name);
    bs.framework = table_name(t.framework);
    bundle_install[static_cast<size_t>(i)](t);
    ++s.c.wrapped_tables;
    g_any_wrapped.store(true, std::memory_order_relaxed);
  } catch (...) {
    detail::log(PCY_LOG_ERROR, origin, "validation layer: could not wrap a bundle table");
  }
}

void registry_closed(const RegistryImpl* r) noexcept {
  if (!g_any_wrapped.load(std::memory_order_relaxed)) return;
  try {
    state& s = st();
    std::unique_lock lock(s.m);
    auto reg = s.registries.find(r);
    if (reg == s.registries.end()) return;
    std::vector<std::string> lines;
    // Instances the registry never shut down (its own were; these were made by someone else
    // through its tables): leaks, with everything they still own.
    auto instances = [&](bool bundle, int slot, const std::string& who) {
      std::vector<const void*> alive;
      for (const auto& [h, rec] : s.live)
        if (rec.slot == slot && rec.k == (bundle ? kind::bundle : kind::plugin)) alive.push_back(h);
      for (const void* h : alive) {
        uint64_t n = 0;
        std::string text = collect_leaks(s, bundle, slot, h, n);
        ++s.c.leaks; // the instance itself
        ++s.c.leaked[kind_name(bundle ? kind::bundle : kind::plugin)];
        leak_report(s, r, who, n + 1,
                    str(kind_name(bundle ? kind::bundle : kind::plugin), " ", hex(h),
                        " never shut down", text.empty() ? "" : "; ", text),
                    lines);
      }
    };
    for (int i = 0; i < bundle_pool; ++i)
      if (s.b[static_cast<size_t>(i)].used && s.b[static_cast<size_t>(i)].owner == r) {
        instances(true, i, s.b[static_cast<size_t>(i)].name);
        release_bundle(s, i);
      }
    for (int i = 0; i < fw_pool; ++i)
      if (s.fw[static_cast<size_t>(i)].used && s.fw[static_cast<size_t>(i)].owner == r) {
        instances(false, i, s.fw[static_cast<size_t>(i)].name);
        release_fw(s, i);
      }
    const uint64_t leaks = reg->second.leaks;
    s.registries.erase(reg);
    lock.unlock();
    for (const auto& l : lines)
      detail::log(PCY_LOG_ERROR, origin, l);
    if (leaks > 0)
      detail::log(PCY_LOG_ERROR, origin,
                  str("registry closed with ", leaks,
                      " leaked object(s) (see the shutdown reports above) [rule: ", rule_leak,
                      "]"));
  } catch (...) {
  }
}

counters snapshot() {
  state& s = st();
  std::lock_guard lock(s.m);
  return s.c;
}

void reset() noexcept {
  state& s = st();
  std::lock_guard lock(s.m);
  const uint64_t wrapped = s.c.wrapped_tables;
  s.c = counters{};
  s.c.wrapped_tables = wrapped;
}

} // namespace validate
} // namespace v1
} // namespace parenchyma
