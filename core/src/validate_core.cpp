// parenchyma core: the validation layer's shared state and checks (validate_layer.hpp).
#include "validate_layer.hpp"

namespace parenchyma {
inline namespace v1 {
namespace validate {
namespace layer {
std::atomic<bool> g_any_wrapped{false};

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
  case kind::graph: return "graph";
  }
  return "handle";
}

state& st() {
  // Never destroyed: registries (the global one) close during the process's exit handlers.
  static state* s = new state;
  return *s;
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

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

// `h` must be a live handle of kind `k` made through slot `slot` (of the framework or bundle
// side, by the kind); otherwise the finding says which rule it breaks.
record* expect(state& s, finding& f, int slot, const void* h, kind k, const char* role,
               bool destroying) {
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
std::string collect_leaks(state& s, bool bundle, int slot, const void* instance, uint64_t& total,
                          bool forget) {
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
      if (forget) {
        forget_exports(s, it->first, r);
        it = s.live.erase(it);
      } else {
        ++it;
      }
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

} // namespace layer
} // namespace validate
} // namespace v1
} // namespace parenchyma
