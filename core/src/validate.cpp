// parenchyma core: the validation layer (docs/validation.md), in the manner of Vulkan's and
// oneAPI Unified Runtime's validation layers: switching it on, wrapping a registry's tables, and
// the leak reports when a registry closes or the process exits. Its parts: validate_layer.hpp.
#include "validate_layer.hpp"

namespace parenchyma {
inline namespace v1 {
namespace validate {
namespace layer {
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

// At process exit: a registry still open has not reported its leaks, and never will (it is
// kept alive by what it handed out: a DLPack export never deleted, a tensor in static storage,
// a backend never released). Every object its plugins made that is still alive is reported and
// counted as a leak here.
void exit_report() noexcept {
  if (!g_any_wrapped.load(std::memory_order_relaxed)) return;
  try {
    state& s = st();
    std::unique_lock lock(s.m);
    std::vector<std::string> lines;
    uint64_t total = 0;
    auto objects = [&](bool bundle, int slot, const std::string& who, const RegistryImpl* owner) {
      std::vector<const void*> instances;
      for (const auto& [h, rec] : s.live)
        if (rec.slot == slot && rec.k == (bundle ? kind::bundle : kind::plugin))
          instances.push_back(h);
      for (const void* h : instances) {
        uint64_t n = 0;
        // Reported, not forgotten: a static destroyed by a later exit handler may still free
        // them through the layer, and must not be told that its handle is not live.
        std::string text = collect_leaks(s, bundle, slot, h, n, false);
        if (n == 0) continue;
        total += n;
        std::string msg = who + ": at process exit, its registry " + hex(owner) +
                          " is still open (something it handed out is alive: a DLPack export "
                          "never deleted, a tensor or backend never released): " +
                          text + " [rule: " + rule_leak + "]";
        s.c.messages.push_back(msg);
        if (s.c.messages.size() > max_messages) s.c.messages.erase(s.c.messages.begin());
        lines.push_back(std::move(msg));
      }
    };
    for (const auto& [owner, reg] : s.registries) {
      for (int i = 0; i < bundle_pool; ++i)
        if (s.b[static_cast<size_t>(i)].used && s.b[static_cast<size_t>(i)].owner == owner)
          objects(true, i, s.b[static_cast<size_t>(i)].name, owner);
      for (int i = 0; i < fw_pool; ++i)
        if (s.fw[static_cast<size_t>(i)].used && s.fw[static_cast<size_t>(i)].owner == owner)
          objects(false, i, s.fw[static_cast<size_t>(i)].name, owner);
    }
    lock.unlock();
    for (const auto& l : lines)
      detail::log(PCY_LOG_ERROR, origin, l);
    if (total > 0)
      detail::log(PCY_LOG_ERROR, origin,
                  str("process exits with ", total,
                      " leaked object(s) of registries never closed (see above) [rule: ", rule_leak,
                      "]"));
  } catch (...) {
  }
}

// Whether the registry validates; remembered for it (its slots are given back at close).
bool validating(state& s, std::unique_lock<std::mutex>& lock, RegistryImpl& r) {
  if (s.registries.count(&r) != 0) return true;
  lock.unlock();
  const bool on = wanted(r);
  lock.lock();
  if (on) {
    s.registries.try_emplace(&r);
    // The exit report runs after every exit handler registered later, the global registry's
    // destructor among them (it is registered when the registry finished loading).
    static const bool registered = std::atexit(&exit_report) == 0;
    (void)registered;
  }
  return on;
}

std::string table_name(const char* name) {
  return name != nullptr ? detail::quote_prefix(name, 64) : std::string("?");
}
} // namespace layer
} // namespace validate
} // namespace v1
} // namespace parenchyma

namespace parenchyma {
inline namespace v1 {
namespace validate {
using namespace layer;

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
