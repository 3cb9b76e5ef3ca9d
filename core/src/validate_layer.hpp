// parenchyma core, private: the validation layer's parts (docs/validation.md). One shared state
// (validate_core.cpp) behind one mutex; the checked entry points of the framework slots
// (validate_framework.cpp), of the bundle slots (validate_bundle.cpp) and of bundle ops
// (validate_ops.cpp); switching the layer on, wrapping tables and the leak reports (validate.cpp).
//
// A wrapped table's function pointers are the layer's own. The C slots carry no user pointer, so
// each wrapped table gets a slot of a fixed pool, and each slot its own set of entry points
// (template instances): an entry point knows which plugin's table it was called through, and
// so can tell a handle of another plugin from its own. Bundle ops likewise get one entry point
// each from a pool. Every handle a plugin hands out is recorded (kind, plugin, owner context);
// every call that takes one checks it first. One mutex guards everything: this is a debugging
// mode, and no plugin function is ever called with it held.
//
// The slot lists (PCY_FRAMEWORK_API_SLOTS, PCY_BUNDLE_API_SLOTS) generate the entry points and
// the installers: each slot `x` of a list is checked by `fw_x` (or `b_x`), declared here from the
// list, so a slot added to the list without its check does not compile.
#pragma once

#include "validate.hpp"

#include "internal.hpp"

#include <parenchyma/sdk/common.hpp>
#include <parenchyma/sdk/slots.hpp>

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
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace parenchyma {
inline namespace v1 {
namespace validate {
namespace layer {
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
constexpr const char* rule_graph_queue = "graph queue";
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
  bundle_context,
  graph // 1.2
};

const char* kind_name(kind k);
inline bool on_bundle_side(kind k) { return k == kind::bundle || k == kind::bundle_context; }

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
  bool capturing = false; // queue: a capture began (and succeeded) and has not ended
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

state& st();
extern std::atomic<bool> g_any_wrapped;

using sdk::str;

std::string hex(const void* p);

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

std::string slot_name(const state& s, bool bundle, int slot);

// Under the lock: counts the violation and returns its text.
std::string count(state& s, const std::string& who, const char* call, const finding& f);

// After the lock: the report, logged at ERROR and returned as the call's error.
pcy_error* report(const std::string& msg);
void report_void(const std::string& msg);

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
               bool destroying = false);

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

record& add(state& s, const void* h, record r);

void forget_exports(state& s, const void* h, const record& r);

void drop(state& s, const void* h, const char* by);

// The live objects an instance still owns, by kind: counted, and dropped (the plugin is going)
// unless `forget` is false.
std::string collect_leaks(state& s, bool bundle, int slot, const void* instance, uint64_t& total,
                          bool forget = true);

void leak_report(state& s, const RegistryImpl* owner, const std::string& who, uint64_t n,
                 std::string text, std::vector<std::string>& out);

// The slot's state, or a finding when its registry is gone (a stale table pointer).
fw_slot* fw_of(state& s, int slot, finding& f);
bundle_slot* b_of(state& s, int slot, finding& f);

// One checked call: the lock, the slot's name, the first finding.
struct scope {
  state& s = st();
  std::unique_lock<std::mutex> lock{s.m};
  finding f;
  std::string who = "?";
  const char* call;
  sdk::slot_thread thread;
  fw_slot* fw = nullptr;
  bundle_slot* b = nullptr;
  // `name`: the slot's name in its list (its thread column decides the lifecycle rule), or "op".
  scope(int slot, bool bundle, const char* name) : call(name), thread(thread_of(bundle, name)) {
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
    if (thread == sdk::slot_thread::lifecycle) lifecycle();
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
  // The thread column of a slot of the lists (PCY_FRAMEWORK_API_SLOTS, PCY_BUNDLE_API_SLOTS).
  static sdk::slot_thread thread_of(bool bundle, const char* name) {
    for (const sdk::slot_info& si : bundle ? std::span<const sdk::slot_info>(sdk::bundle_slots)
                                           : std::span<const sdk::slot_info>(sdk::framework_slots))
      if (std::strcmp(si.name, name) == 0) return si.thread;
    return sdk::slot_thread::any;
  }
  // A lifecycle call (a slot whose thread column is LIFECYCLE, from verdict()): no other thread
  // may be inside one of any plugin (G4).
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

// ---- the checks of each slot, from the slot lists --------------------------------------------

// fw_<slot>(int slot, the slot's parameters...): the checked call through pool slot `slot`.
#define PARENCHYMA_VALIDATE_WITH_SLOT(...) (int slot, __VA_ARGS__)
#define PARENCHYMA_VALIDATE_DECLARE_FW(name, minor, need, thread, ret, params, args)               \
  ret fw_##name PARENCHYMA_VALIDATE_WITH_SLOT params;
#define PARENCHYMA_VALIDATE_DECLARE_B(name, minor, need, thread, ret, params, args)                \
  ret b_##name PARENCHYMA_VALIDATE_WITH_SLOT params;
PCY_FRAMEWORK_API_SLOTS(PARENCHYMA_VALIDATE_DECLARE_FW)
PCY_BUNDLE_API_SLOTS(PARENCHYMA_VALIDATE_DECLARE_B)
#undef PARENCHYMA_VALIDATE_DECLARE_FW
#undef PARENCHYMA_VALIDATE_DECLARE_B

// The argument list of a slot, for forwarding.
#define PARENCHYMA_VALIDATE_ARGS(...) __VA_ARGS__

// Per pool slot, the function that puts its entry points into a table (validate_framework.cpp,
// validate_bundle.cpp), and the entry point of each op pool slot (validate_ops.cpp).
extern const std::array<void (*)(pcy_framework_api&) noexcept, fw_pool> fw_install;
extern const std::array<void (*)(pcy_bundle_api&) noexcept, bundle_pool> bundle_install;
extern const std::array<pcy_op_fn, op_pool> op_entries;

pcy_error* run_op(int k, const pcy_op_call* call);
// The op pool slots of a bundle slot's op sets (of one instance, or all) given back.
void release_ops(state& s, bundle_slot& bs, const void* instance);
// The pool slot of a framework table the host holds, or -1.
int fw_slot_of(const state& s, const pcy_framework_api* table);

} // namespace layer
} // namespace validate
} // namespace v1
} // namespace parenchyma
