// parenchyma core: plugin discovery, the load stages, the load report, ranking and selection.
//
// Plugins are not trusted: every count, pointer, name and size they hand back is checked here,
// at the boundary, and a plugin that fails a check is refused at its stage in the load report.
#include "binary_format.hpp"
#include "internal.hpp"
#include "validate.hpp"

#include <parenchyma/sdk/dtype.hpp>
#include <parenchyma/sdk/slots.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <type_traits>

namespace parenchyma {
inline namespace v1 {

namespace fs = std::filesystem;
namespace os = detail::os;

const char* to_string(device_kind kind) noexcept {
  switch (kind) {
  case device_kind::cpu: return "cpu";
  case device_kind::gpu: return "gpu";
  case device_kind::accelerator: return "accelerator";
  case device_kind::other: return "other";
  }
  return "other";
}

const char* to_string(fallback_policy p) noexcept {
  switch (p) {
  case fallback_policy::allow: return "allow";
  case fallback_policy::warn: return "warn";
  case fallback_policy::deny: return "deny";
  }
  return "warn";
}

namespace detail {
std::mutex& plugin_lifecycle_mutex() noexcept {
  // Never destroyed: registries may be torn down during the process's exit handlers.
  static std::mutex* m = new std::mutex;
  return *m;
}
} // namespace detail

namespace {

int kind_rank(device_kind k) {
  switch (k) {
  case device_kind::gpu: return 3;
  case device_kind::accelerator: return 2;
  case device_kind::cpu: return 1;
  case device_kind::other: return 0;
  }
  return 0;
}

std::vector<std::string> split_paths(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t colon = s.find(os::path_list_separator(), start);
    std::string part =
        s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!part.empty()) out.push_back(part);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

// A plugin's error message, freed; bounded, since a plugin's text is not trusted either.
std::string take_error(pcy_error* e) {
  if (e == nullptr) return {};
  std::string m = e->message != nullptr ? detail::quote_prefix(e->message, 2000) : "(no message)";
  if (e->destroy != nullptr) e->destroy(e);
  return m;
}

// A string a plugin gave: empty for NULL, bounded.
std::string plugin_string(const char* s, size_t max = 256) {
  return s == nullptr ? std::string() : detail::quote_prefix(s, max);
}

// An enum field a plugin filled in, as the integer it holds: reading an out-of-range value
// through the enum type itself is undefined behaviour in C++.
template <class E> int64_t raw_enum(const E& e) noexcept {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<int64_t>(v);
}

} // namespace

device_kind Framework::best_kind() const noexcept {
  device_kind best = device_kind::other;
  for (const auto& d : devices_)
    if (kind_rank(d.kind) > kind_rank(best)) best = d.kind;
  return best;
}

const pcy_op_desc* BundleInfo::find_op(std::string_view name, pcy_dtype dtype) const noexcept {
  for (const pcy_op_desc* op : ops_)
    if (op->dtype == dtype && name == op->name) return op;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
RegistryImpl::RegistryImpl(RegistryOptions opts) : options(std::move(opts)) {
  secure = os::secure_process();
}

RegistryImpl::~RegistryImpl() {
  if (detail::registry_closing(*this)) return; // fork.cpp: a forked child tears down nothing
  std::lock_guard<std::mutex> lock(detail::plugin_lifecycle_mutex());
  for (size_t i = bundles.size(); i-- > 0;)
    if (bundles[i]->plugin_ != nullptr) bundles[i]->api_->shutdown(bundles[i]->plugin_);
  for (size_t i = frameworks.size(); i-- > 0;)
    if (frameworks[i]->plugin_ != nullptr) frameworks[i]->api_->shutdown(frameworks[i]->plugin_);
  bundles.clear();
  frameworks.clear();
  // libraries unload last, in reverse order of loading.
  while (!libraries.empty())
    libraries.pop_back();
  validate::registry_closed(this); // leaks of the validation layer, when on
}

std::optional<std::string> RegistryImpl::env(const char* name) const {
  if (options.environment) {
    auto it = options.environment->find(name);
    if (it == options.environment->end()) return std::nullopt;
    return it->second;
  }
  if (secure) return std::nullopt;
  return sdk::os::getenv_utf8(name);
}

const char* RegistryImpl::setting(const char* name) {
  if (name == nullptr || *name == '\0') return nullptr;
  std::lock_guard<std::mutex> lock(settings_mutex);
  auto [it, fresh] = settings_asked.try_emplace(name);
  if (fresh) {
    if (auto v = env(name))
      it->second = *v;
    else if (auto c = config.settings.find(name); c != config.settings.end())
      it->second = c->second;
  }
  return it->second ? it->second->c_str() : nullptr;
}

namespace {
const char* host_setting(void* user, const char* name) {
  try {
    return static_cast<RegistryImpl*>(user)->setting(name);
  } catch (...) {
    return nullptr;
  }
}
} // namespace

void RegistryImpl::add_report(LoadReportEntry e) {
  const pcy_log_level level = e.status == "loaded" ? PCY_LOG_DEBUG : PCY_LOG_INFO;
  detail::log(level, "registry",
              e.path + ": " + e.status + " at stage " + e.stage +
                  (e.reason.empty() ? "" : " (" + e.reason + ")"));
  report.push_back(std::move(e));
}

void RegistryImpl::note(std::string text) {
  detail::log(PCY_LOG_WARN, "registry", text);
  notices.push_back(std::move(text));
}

// ---- the stages of RegistryImpl::load, in order ---------------------------------------------

// 1. Configuration: the shipped default, then PARENCHYMA_CONFIG or the API's file. A config file
//    that was named but cannot be used is an error: running with other settings than the ones
//    asked for would be worse. Environment values that are malformed do not stop the registry (an
//    explicit request must still work): they are noted, and PARENCHYMA_BACKEND's error is raised
//    where it is used.
void RegistryImpl::read_configuration(const fs::path& libdir) {
  if (options.default_config && !libdir.empty()) {
    const fs::path def = (libdir / PARENCHYMA_CONFIG_RELPATH).make_preferred();
    std::error_code ec;
    if (fs::exists(def, ec)) config = detail::read_config(def, config);
  }
  if (options.config_file) {
    config = detail::read_config(*options.config_file, config);
  } else if (auto p = env("PARENCHYMA_CONFIG"); p && !p->empty()) {
    try {
      config = detail::read_config(*p, config);
    } catch (const error& e) {
      throw error(e.code(), "PARENCHYMA_CONFIG", e.what());
    }
  }
  if (auto lvl = env("PARENCHYMA_LOG_LEVEL"); lvl && !lvl->empty()) {
    if (auto parsed = detail::parse_log_level(*lvl))
      detail::set_log_level(*parsed);
    else
      note("PARENCHYMA_LOG_LEVEL: \"" + detail::quote_prefix(*lvl) +
           "\" is not a level (use trace, debug, info, warn, error, critical or off); ignored");
  } else if (auto parsed = detail::parse_log_level(config.log_level)) {
    detail::set_log_level(*parsed);
  }
  if (auto b = env("PARENCHYMA_BACKEND"); b && !b->empty()) {
    env_backend = *b;
    try {
      env_items = detail::parse_selection(*b, "PARENCHYMA_BACKEND");
    } catch (const error& e) {
      env_backend_error = e;
      note(std::string(e.what()) + " (used only when no backend is requested explicitly)");
    }
  }
}

// 2. The cache directory for compiled kernels, and the host services every plugin receives.
void RegistryImpl::set_up_host() {
  if (auto c = env("PARENCHYMA_CACHE_DIR"); c && !c->empty())
    cache_dir = *c;
  else if (!config.cache_dir.empty())
    cache_dir = config.cache_dir;
  else
    cache_dir = os::default_cache_dir([this](const char* name) { return env(name); });

  host.struct_size = sizeof host;
  host.host_abi_major = PCY_ABI_VERSION_MAJOR;
  host.host_abi_minor = PCY_ABI_VERSION_MINOR;
  host.log_user = this;
  host.log = &detail::plugin_log;
  host.log_level = detail::log_level();
  host.cache_dir = cache_dir.empty() ? nullptr : cache_dir.c_str();
  host.setting = &host_setting;
  host.setting_user = this;
  host.progress = &detail::plugin_progress;
  host.progress_user = this;
}

// 3. The search path (API, environment, config, next to the core library) and the plugin files
//    on it, each entry that cannot be used reported.
std::vector<fs::path> RegistryImpl::find_candidates(const fs::path& libdir) {
  for (const auto& p : options.plugin_paths)
    search_path.push_back(p);
  if (auto pp = env("PARENCHYMA_PLUGIN_PATH"))
    for (const auto& p : split_paths(*pp))
      search_path.push_back(os::path_from_utf8(p));
  for (const auto& p : config.plugin_paths)
    search_path.push_back(os::path_from_utf8(p));
  if (options.default_plugin_dir && !libdir.empty())
    search_path.push_back((libdir / PARENCHYMA_PLUGIN_RELDIR).make_preferred());

  std::vector<fs::path> candidates;
  for (const auto& entry : search_path) {
    LoadReportEntry e{
        os::utf8(entry), os::utf8(entry.filename()), "unknown", "file", "skipped", "", ""};
    const os::file_info st = os::examine(entry);
    if (!st.error.empty()) {
      e.reason = st.missing ? "plugin path does not exist"
                            : "plugin path cannot be examined (" + st.error + ")";
      e.advice = "fix PARENCHYMA_PLUGIN_PATH / plugin_paths, or create the directory";
      add_report(std::move(e));
      continue;
    }
    if (st.type == fs::file_type::regular) {
      candidates.push_back(entry);
      continue;
    }
    if (st.type != fs::file_type::directory) {
      e.reason = std::string("plugin path is ") + os::describe(st.type) +
                 ", not a plugin file or directory";
      e.advice = "fix PARENCHYMA_PLUGIN_PATH / plugin_paths";
      add_report(std::move(e));
      continue;
    }
    if (auto why = os::untrusted(entry)) {
      e.status = "failed";
      e.reason = "plugin directory refused: " + *why;
      e.advice = "remove write access for other users (chmod o-w,g-w), make the directory and "
                 "its parents owned by you or root, or move the plugins";
      add_report(std::move(e));
      continue;
    }
    std::error_code ec;
    std::vector<fs::path> files;
    fs::directory_iterator it(entry, ec), end;
    for (; !ec && it != end; it.increment(ec))
      if (it->path().extension() == os::plugin_suffix()) files.push_back(it->path());
    if (ec) {
      e.status = "failed";
      e.reason = "plugin directory cannot be read (" + ec.message() + ")";
      e.advice = "give this user read and search permission on it (chmod u+rx), or remove it "
                 "from the search path";
      add_report(std::move(e));
    }
    std::sort(files.begin(), files.end());
    candidates.insert(candidates.end(), files.begin(), files.end());
  }
  return candidates;
}

// 6. Two bundles serving one op on one framework: the config's bundle_priority, else load order.
void RegistryImpl::note_shadowed_ops() {
  std::map<std::string, std::vector<const BundleInfo*>> providers;
  for (size_t i = 0; i < bundles.size(); ++i)
    for (const OpEntry& op : bundle_ops[i])
      providers[bundles[i]->extension() + "." + op.desc->name + " " +
                sdk::dtype_name(op.desc->dtype) + " on " + bundles[i]->framework()]
          .push_back(bundles[i].get());
  auto priority = [&](const BundleInfo* b) {
    const auto& p = config.bundle_priority;
    const auto it = std::find(p.begin(), p.end(), b->name());
    return std::make_pair(static_cast<size_t>(it - p.begin()), b->order());
  };
  std::map<std::string, std::vector<std::string>> shadowed; // losing bundle -> cells
  for (auto& [cell, list] : providers) {
    if (list.size() < 2) continue;
    std::stable_sort(list.begin(), list.end(), [&](const BundleInfo* a, const BundleInfo* b) {
      return priority(a) < priority(b);
    });
    for (size_t i = 1; i < list.size(); ++i)
      shadowed[list[i]->name() + " (" + list[0]->name() + " wins)"].push_back(cell);
  }
  for (const auto& [who, cells] : shadowed)
    note("bundle " + who + " also serves " + std::to_string(cells.size()) + " op(s), e.g. " +
         cells.front() +
         "; the winner is the first in the config's bundle_priority, else the first loaded");
  // A bundle_priority entry naming no bundle found here orders nothing: most likely a typo
  // (the config may be shared with machines that have other bundles, so it is not refused).
  std::vector<std::string> bundle_names;
  for (const auto& b : bundles)
    bundle_names.push_back(b->name());
  for (const auto& n : config.bundle_priority)
    if (std::find(bundle_names.begin(), bundle_names.end(), n) == bundle_names.end()) {
      std::string list;
      for (const auto& b : bundle_names)
        list += (list.empty() ? "" : ", ") + b;
      const std::string hint = detail::did_you_mean(n, bundle_names);
      note("config key 'bundle_priority' names \"" + n + "\", which is no loaded bundle (" +
           (list.empty() ? "none is loaded" : "loaded: " + list) + "), so the entry has no effect" +
           (hint.empty() ? "" : "; " + hint));
    }
}

void RegistryImpl::load() {
  if (secure && !options.environment)
    note("set-uid process: PARENCHYMA_* environment variables are ignored");
  const fs::path libdir = os::core_library_dir();
  read_configuration(libdir);
  set_up_host();
  const std::vector<fs::path> candidates = find_candidates(libdir);
  { // 4. Each candidate file: checked, loaded, its table checked, initialised, probed.
    std::lock_guard<std::mutex> lock(detail::plugin_lifecycle_mutex());
    for (const auto& c : candidates)
      load_candidate(c);
  }
  // 5. Bundles whose framework did not load are kept out of op routing (but stay in the report).
  for (auto& b : bundles)
    if (std::none_of(frameworks.begin(), frameworks.end(),
                     [&](const auto& f) { return f->name() == b->framework(); })) {
      if (b->reason_.empty()) b->reason_ = "framework '" + b->framework() + "' is not loaded";
      for (auto& e : report)
        if (e.name == b->name() && e.status == "loaded")
          e.reason += "; framework '" + b->framework() + "' is not loaded: its ops are unused";
    }
  note_shadowed_ops();
}

void RegistryImpl::load_candidate(const fs::path& path) {
  LoadReportEntry e;
  e.path = os::utf8(path);
  e.name = os::utf8(path.stem());
  e.kind = "unknown";
  e.stage = "file";
  e.status = "failed";

  const os::file_info st = os::examine(path);
  if (!st.error.empty()) {
    e.reason = "cannot be examined (" + st.error + ")";
    e.advice = "check the file and its permissions";
    return add_report(std::move(e));
  }
  if (st.type != fs::file_type::regular) {
    e.status = "skipped";
    e.reason = std::string("is ") + os::describe(st.type) + ", not a plugin file";
    e.advice = "remove it from the plugin directory";
    return add_report(std::move(e));
  }
  if (auto why = os::untrusted(path)) {
    e.reason = "plugin file refused: " + *why;
    e.advice = "remove write access for other users (chmod o-w,g-w) and make the file and its "
               "directories owned by you or root";
    return add_report(std::move(e));
  }
  if (auto why = detail::foreign_binary(path)) {
    e.reason = *why;
    e.advice = std::string("install the plugin's build for this platform (") +
               detail::host_machine_name() +
               "), or rebuild it with this platform's toolchain (docs/platforms.md): a plugin "
               "folder holds the plugins of one platform";
    return add_report(std::move(e));
  }

  e.stage = "load";
  sdk::os::library lib;
  if (std::string why = lib.open(path); !why.empty()) {
    e.reason = why;
    e.advice = std::string("check that the file is a shared library for this platform and that "
                           "its dependencies are installed (") +
               os::dependency_tool() + " " + os::utf8(path) + ")";
    return add_report(std::move(e));
  }

  e.stage = "entry";
  const auto fw_entry = lib.function<const pcy_framework_api* (*)()>(PCY_FRAMEWORK_ENTRY_SYMBOL);
  const auto bundle_entry = lib.function<const pcy_bundle_api* (*)()>(PCY_BUNDLE_ENTRY_SYMBOL);
  const bool is_fw = fw_entry != nullptr;
  const bool is_bundle = bundle_entry != nullptr;
  if (!is_fw && !is_bundle) {
    e.reason = "no entry symbol " PCY_FRAMEWORK_ENTRY_SYMBOL " or " PCY_BUNDLE_ENTRY_SYMBOL;
    e.advice = "not a parenchyma plugin: build it with PCY_FRAMEWORK_PLUGIN / PCY_BUNDLE_PLUGIN "
               "from the SDK, or remove it from the plugin directory";
    return add_report(std::move(e));
  }
  const void* table = nullptr;
  if (is_fw)
    table = fw_entry();
  else
    table = bundle_entry();
  if (load_table(path, table, is_fw, e)) libraries.push_back(std::move(lib));
  add_report(std::move(e));
}

bool RegistryImpl::load_table(const fs::path& path, const void* table, bool is_fw,
                              LoadReportEntry& e) {
  e.kind = is_fw ? "framework" : "bundle";
  e.stage = "entry";
  const auto* prefix = static_cast<const pcy_plugin_prefix*>(table);
  if (prefix == nullptr || prefix->struct_size < sizeof(pcy_plugin_prefix)) {
    e.reason = "the entry point returned no table, or one too small to hold the plugin prefix";
    e.advice = "rebuild the plugin against this SDK";
    return false;
  }
  const uint32_t want_kind = is_fw ? PCY_PLUGIN_FRAMEWORK : PCY_PLUGIN_BUNDLE;
  if (prefix->kind != want_kind) {
    e.reason =
        "the table's kind (" + std::to_string(prefix->kind) + ") does not match its entry symbol";
    e.advice = "rebuild the plugin against this SDK";
    return false;
  }

  e.stage = "version";
  if (prefix->abi_major != PCY_ABI_VERSION_MAJOR) {
    e.reason = "plugin built for ABI " + std::to_string(prefix->abi_major) + "." +
               std::to_string(prefix->abi_minor) + ", core speaks " +
               std::to_string(PCY_ABI_VERSION_MAJOR) + "." + std::to_string(PCY_ABI_VERSION_MINOR);
    e.advice = "rebuild the plugin against this SDK (ABI major " +
               std::to_string(PCY_ABI_VERSION_MAJOR) + ")";
    return false;
  }
  const std::string pname = plugin_string(prefix->name, 80);
  if (!pname.empty()) e.name = pname;
  if (!detail::valid_name(pname)) {
    e.reason = pname.empty() ? "the plugin has no name"
                             : "the plugin's name \"" + pname +
                                   "\" is not [a-z0-9_]+ (at most 64 bytes): it could be neither "
                                   "selected nor denied";
    e.advice = "give the plugin class a lower-case name of letters, digits and '_'";
    return false;
  }
  // Duplicate names: the first one found wins (search order is documented).
  auto dup = [&](const std::string& path_first) {
    e.status = "skipped";
    e.reason = "duplicate plugin name '" + pname + "': already loaded from " + path_first;
    e.advice = "remove one of the two files, or order the search path to pick the one you want";
    return false;
  };
  for (const auto& f : frameworks)
    if (f->name() == pname) return dup(f->path());
  for (const auto& b : bundles)
    if (b->name() == pname) return dup(b->path());

  return is_fw ? load_framework(path, table, *prefix, e) : load_bundle(path, table, *prefix, e);
}

bool RegistryImpl::load_framework(const fs::path& path, const void* table,
                                  const pcy_plugin_prefix& prefix, LoadReportEntry& e) {
  // Normalise the table: copy what the plugin sent, zero the slots it does not know about.
  auto t = std::make_unique<pcy_framework_api>();
  std::memset(t.get(), 0, sizeof *t);
  std::memcpy(t.get(), table, std::min<size_t>(prefix.struct_size, sizeof *t));
  t->struct_size = sizeof *t;
  // The required slots, from the slot list (PCY_FRAMEWORK_API_SLOTS).
  if (const char* slot = sdk::missing_required_slot(*t)) {
    e.stage = "entry";
    e.reason = "required slot '" + std::string(slot) + "' is NULL or absent (table of " +
               std::to_string(prefix.struct_size) + " bytes)";
    e.advice =
        "implement " + std::string(slot) + " in the plugin; only optional slots may be left NULL";
    return false;
  }
  validate::wrap_framework(*this, *t); // the validation layer, when on (docs/validation.md)
  e.stage = "initialize";
  pcy_framework_init_args args{};
  args.struct_size = sizeof args;
  args.host = &host;
  if (pcy_error* err = t->initialize(&args)) {
    e.reason = take_error(err);
    e.advice = "see the plugin's message; the plugin is skipped and everything else works";
    return false;
  }
  if (args.plugin == nullptr) {
    e.reason = "initialize reported success but returned no plugin instance";
    e.advice = "fix the plugin: initialize must set args->plugin";
    return false;
  }
  auto fw = std::make_unique<Framework>();
  fw->name_ = e.name;
  fw->path_ = os::utf8(path);
  fw->version_ = plugin_string(prefix.plugin_version);
  fw->description_ = plugin_string(prefix.description, 400);
  fw->api_ = t.get();
  fw->plugin_ = args.plugin;

  e.stage = "probe";
  pcy_framework_probe probe{};
  probe.struct_size = sizeof probe;
  if (pcy_error* err = t->probe(args.plugin, &probe)) {
    e.reason = "probe failed: " + take_error(err);
    e.advice = "see the plugin's message";
    t->shutdown(args.plugin);
    return false;
  }
  if (probe.device_count > detail::max_devices) {
    e.reason = "probe reported " + std::to_string(probe.device_count) + " devices, more than the " +
               std::to_string(detail::max_devices) + " a plugin may have: refused as broken";
    e.advice = "fix the plugin's probe";
    t->shutdown(args.plugin);
    return false;
  }
  fw->reason_ = plugin_string(probe.reason, 1000);
  std::string skipped;
  for (uint32_t d = 0; d < probe.device_count; ++d) {
    std::string why;
    if (auto dev = describe_device(*t, args.plugin, d, why)) {
      dev->index = static_cast<uint32_t>(fw->devices_.size());
      fw->devices_.push_back(std::move(*dev));
    } else {
      skipped += "; device " + std::to_string(d) + " left out: " + why;
    }
  }
  e.stage = "ready";
  e.status = "loaded";
  e.reason = std::to_string(fw->devices_.size()) + " device(s)" + skipped;
  if (fw->devices_.empty() && !fw->reason_.empty()) e.reason += ": " + fw->reason_;
  if (fw->devices_.empty())
    e.advice =
        fw->reason_.empty() ? "no device found" : "loaded, but nothing to run on: " + fw->reason_;
  if (prefix.struct_size < sizeof(pcy_framework_api))
    e.reason += "; built for ABI " + std::to_string(prefix.abi_major) + "." +
                std::to_string(prefix.abi_minor) + " with a " + std::to_string(prefix.struct_size) +
                "-byte table (reduced capability: later slots unsupported)";
  framework_tables.push_back(std::move(t));
  frameworks.push_back(std::move(fw));
  return true;
}

std::optional<Device> RegistryImpl::describe_device(const pcy_framework_api& t, pcy_plugin plugin,
                                                    uint32_t d, std::string& why) {
  const pcy_property* props = nullptr;
  size_t n = 0;
  if (pcy_error* err = t.device_properties(plugin, d, &props, &n)) {
    why = take_error(err);
    return std::nullopt;
  }
  if (n > detail::max_properties) {
    why = std::to_string(n) + " properties, more than " + std::to_string(detail::max_properties);
    return std::nullopt;
  }
  if (n > 0 && props == nullptr) {
    why = "device_properties returned " + std::to_string(n) + " properties but no array";
    return std::nullopt;
  }
  // Arrays are walked with the plugin's element size, so a newer minor's larger structs work.
  const size_t stride = n > 0 ? props[0].struct_size : sizeof(pcy_property);
  if (n > 0 && (stride < PCY_PROPERTY_SIZE_1_0 || stride > detail::max_struct_stride ||
                stride % alignof(pcy_property) != 0 ||
                reinterpret_cast<uintptr_t>(props) % alignof(pcy_property) != 0)) {
    why = "property elements of " + std::to_string(stride) + " bytes (expected at least " +
          std::to_string(PCY_PROPERTY_SIZE_1_0) + ", aligned)";
    return std::nullopt;
  }
  Device dev;
  dev.plugin_index = d;
  for (size_t i = 0; i < n; ++i) {
    const pcy_property& p =
        *reinterpret_cast<const pcy_property*>(reinterpret_cast<const char*>(props) + i * stride);
    if (p.key == nullptr) continue;
    const std::string key = plugin_string(p.key, 64);
    property_value v;
    const int64_t type = raw_enum(p.type);
    switch (type) {
    case PCY_VALUE_STRING: v = plugin_string(p.s, 4096); break;
    case PCY_VALUE_INT: v = p.i; break;
    case PCY_VALUE_FLOAT: v = p.f; break;
    case PCY_VALUE_BOOL: v = p.i != 0; break;
    default: continue; // a value type from the future (or garbage): not shown
    }
    if (key == PCY_PROP_NAME && p.type == PCY_VALUE_STRING) dev.name = std::get<std::string>(v);
    if (key == PCY_PROP_VENDOR && p.type == PCY_VALUE_STRING) dev.vendor = std::get<std::string>(v);
    if (key == PCY_PROP_KIND && p.type == PCY_VALUE_INT) {
      dev.kind = static_cast<device_kind>(std::clamp<int64_t>(p.i, 0, 3));
      v = std::string(to_string(dev.kind)); // shown as a word, not a number
    }
    dev.properties.emplace_back(key, std::move(v));
  }
  return dev;
}

bool RegistryImpl::load_bundle(const fs::path& path, const void* table,
                               const pcy_plugin_prefix& prefix, LoadReportEntry& e) {
  auto t = std::make_unique<pcy_bundle_api>();
  std::memset(t.get(), 0, sizeof *t);
  std::memcpy(t.get(), table, std::min<size_t>(prefix.struct_size, sizeof *t));
  t->struct_size = sizeof *t;
  // The required slots, from the slot list (PCY_BUNDLE_API_SLOTS), and the two names.
  const char* slot = sdk::missing_required_slot(*t);
  if (slot == nullptr && t->extension == nullptr) slot = "extension";
  if (slot == nullptr && t->framework == nullptr) slot = "framework";
  if (slot != nullptr) {
    e.reason = "required bundle slot '" + std::string(slot) + "' is NULL or absent (table of " +
               std::to_string(prefix.struct_size) + " bytes)";
    e.advice = "rebuild the bundle with PCY_BUNDLE_PLUGIN from this SDK";
    return false;
  }
  const std::string extension = plugin_string(t->extension, 80);
  const std::string framework = plugin_string(t->framework, 80);
  if (!detail::valid_name(extension) || !detail::valid_name(framework)) {
    e.reason = "the bundle's extension \"" + extension + "\" or framework \"" + framework +
               "\" is not a name of [a-z0-9_]+";
    e.advice = "fix the bundle's extension and framework names";
    return false;
  }
  validate::wrap_bundle(*this, *t); // the validation layer, when on (docs/validation.md)
  e.stage = "initialize";
  pcy_bundle_init_args args{};
  args.struct_size = sizeof args;
  args.host = &host;
  if (pcy_error* err = t->initialize(&args)) {
    e.reason = take_error(err);
    e.advice = "see the plugin's message; the bundle is skipped and everything else works";
    return false;
  }
  if (args.plugin == nullptr) {
    e.reason = "initialize reported success but returned no plugin instance";
    e.advice = "fix the bundle: initialize must set args->plugin";
    return false;
  }
  auto b = std::make_unique<BundleInfo>();
  b->name_ = e.name;
  b->path_ = os::utf8(path);
  b->extension_ = extension;
  b->framework_ = framework;
  b->api_ = t.get();
  b->plugin_ = args.plugin;
  b->order_ = bundles.size();
  b->reason_ = plugin_string(args.reason, 1000);
  e.stage = "probe";
  const pcy_op_desc* ops = nullptr;
  size_t n = 0;
  if (pcy_error* err = t->ops(args.plugin, &ops, &n)) {
    e.reason = "ops failed: " + take_error(err);
    t->shutdown(args.plugin);
    return false;
  }
  const size_t stride = n > 0 && ops != nullptr ? ops[0].struct_size : sizeof(pcy_op_desc);
  if (n > detail::max_ops || (n > 0 && ops == nullptr) ||
      (n > 0 && (stride < PCY_OP_DESC_SIZE_1_0 || stride > detail::max_struct_stride ||
                 stride % alignof(pcy_op_desc) != 0 ||
                 reinterpret_cast<uintptr_t>(ops) % alignof(pcy_op_desc) != 0))) {
    e.reason = n > detail::max_ops ? "ops returned " + std::to_string(n) + " ops, more than " +
                                         std::to_string(detail::max_ops)
               : ops == nullptr
                   ? "ops returned " + std::to_string(n) + " ops but no array"
                   : "op descriptors of " + std::to_string(stride) + " bytes (expected at least " +
                         std::to_string(PCY_OP_DESC_SIZE_1_0) + ")";
    e.advice = "fix the bundle's ops table";
    t->shutdown(args.plugin);
    return false;
  }
  std::vector<OpEntry> checked;
  std::string refused;
  size_t refused_count = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto* op =
        reinterpret_cast<const pcy_op_desc*>(reinterpret_cast<const char*>(ops) + i * stride);
    const std::string opname = plugin_string(op->name, 80);
    std::string why;
    std::optional<std::vector<detail::ArgRule>> rules;
    // A 1.1 descriptor carries the extension's schema: it is the contract; the signature is
    // then only what 1.0 hosts read. A 1.0 descriptor has only the signature.
    const pcy_op_schema* schema =
        stride >= PCY_OP_DESC_SIZE_1_1 && op->schema != nullptr ? op->schema : nullptr;
    if (!detail::valid_name(opname))
      why = "its name \"" + opname + "\" is not [a-z0-9_]+";
    else if (sdk::dtype_name_or_null(raw_enum(op->dtype)) == nullptr)
      why = "its dtype " + std::to_string(raw_enum(op->dtype)) + " is unknown";
    else if (op->fn == nullptr)
      why = "no function";
    else if (schema != nullptr && (schema->extension == nullptr || schema->name == nullptr ||
                                   extension != schema->extension || opname != schema->name ||
                                   !(rules = detail::rules_of(*schema))))
      why = "its schema is malformed or belongs to another op";
    else if (schema == nullptr &&
             (op->signature == nullptr || !(rules = detail::rules_of(op->signature))))
      why = "malformed signature \"" + plugin_string(op->signature, 80) + "\"";
    if (!why.empty()) {
      if (++refused_count <= 3) refused += "; op " + std::to_string(i) + " refused: " + why;
      continue;
    }
    checked.push_back({op, std::move(*rules), schema});
    b->ops_.push_back(op);
  }
  if (refused_count > 3) refused += "; and " + std::to_string(refused_count - 3) + " more";
  e.stage = "ready";
  e.status = "loaded";
  e.reason = "extension " + b->extension_ + " for " + b->framework_ + ": " +
             std::to_string(b->ops_.size()) + " op(s)" +
             (b->reason_.empty() ? "" : "; " + b->reason_) + refused;
  if (refused_count > 0)
    e.advice = "the refused ops are served by other bundles (or fall back); fix the bundle's op "
               "table";
  bundle_tables.push_back(std::move(t));
  bundles.push_back(std::move(b));
  bundle_ops.push_back(std::move(checked));
  return true;
}

// ---- ranking and selection -------------------------------------------------------------------

std::map<std::string, size_t> RegistryImpl::coverage(const Framework& fw) const {
  std::map<std::string, size_t> out;
  for (size_t i = 0; i < bundles.size(); ++i)
    if (bundles[i]->framework() == fw.name()) {
      std::set<std::pair<std::string, int>> cells;
      for (const OpEntry& op : bundle_ops[i])
        cells.emplace(op.desc->name, static_cast<int>(op.desc->dtype));
      out[bundles[i]->extension()] += cells.size();
    }
  return out;
}

std::vector<std::string> RegistryImpl::standing_denials() const {
  std::vector<std::string> deny = config.deny;
  if (!env_backend_error)
    for (const auto& i : env_items)
      if (i.deny) deny.push_back(i.name);
  return deny;
}

std::vector<RankedDevice> RegistryImpl::device_ranking(const std::vector<std::string>& deny) const {
  auto denied = [&](const std::string& n) {
    return std::find(deny.begin(), deny.end(), n) != deny.end();
  };
  std::vector<RankedDevice> out;
  const bool by_kind = !config.ranking_by_kind.empty();
  auto kind_list = [&](device_kind k) -> const std::vector<std::string>* {
    auto it = config.ranking_by_kind.find(to_string(k));
    return it == config.ranking_by_kind.end() ? nullptr : &it->second;
  };
  auto list_pos = [](const std::vector<std::string>* list, const std::string& name) {
    if (list == nullptr) return std::string::npos;
    auto it = std::find(list->begin(), list->end(), name);
    return it == list->end() ? std::string::npos : static_cast<size_t>(it - list->begin());
  };

  struct Candidate {
    const Framework* fw;
    const Device* dev;
  };
  std::vector<Candidate> all;
  for (const auto& f : frameworks)
    if (!denied(f->name()))
      for (const auto& d : f->devices())
        all.push_back({f.get(), &d});

  if (by_kind || config.ranking.empty()) {
    // Kind first, then the framework order for that kind, then name, then device position.
    std::stable_sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) {
      const int ka = kind_rank(a.dev->kind), kb = kind_rank(b.dev->kind);
      if (ka != kb) return ka > kb;
      const size_t pa = list_pos(kind_list(a.dev->kind), a.fw->name());
      const size_t pb = list_pos(kind_list(b.dev->kind), b.fw->name());
      if (pa != pb) return pa < pb;
      if (a.fw != b.fw) return a.fw->name() < b.fw->name();
      return a.dev->index < b.dev->index;
    });
    for (const auto& c : all) {
      const auto* list = kind_list(c.dev->kind);
      std::string why = std::string(to_string(c.dev->kind));
      if (list_pos(list, c.fw->name()) != std::string::npos)
        why += "; " + c.fw->name() + " is #" + std::to_string(list_pos(list, c.fw->name()) + 1) +
               " for " + to_string(c.dev->kind) + " devices in the config's ranking";
      else if (by_kind)
        why += "; " + c.fw->name() + " is not listed for " + to_string(c.dev->kind) +
               " devices in the config's ranking: after the listed ones, by name";
      else
        why += "; no ranking configured: by device kind, then framework name";
      out.push_back({c.fw, c.dev->index, std::move(why)});
    }
  } else {
    // An explicit framework order; an unlisted framework's device goes before the first listed
    // device of a worse kind.
    std::vector<Candidate> listed, unlisted;
    for (const auto& name : config.ranking)
      for (const auto& c : all)
        if (c.fw->name() == name) listed.push_back(c);
    for (const auto& c : all)
      if (std::find(config.ranking.begin(), config.ranking.end(), c.fw->name()) ==
          config.ranking.end())
        unlisted.push_back(c);
    auto by_kind_in_fw = [](const Candidate& a, const Candidate& b) {
      return a.fw == b.fw && kind_rank(a.dev->kind) > kind_rank(b.dev->kind);
    };
    std::stable_sort(listed.begin(), listed.end(), by_kind_in_fw);
    std::stable_sort(unlisted.begin(), unlisted.end(), [](const Candidate& a, const Candidate& b) {
      const int ka = kind_rank(a.dev->kind), kb = kind_rank(b.dev->kind);
      return ka != kb ? ka > kb : a.fw->name() < b.fw->name();
    });
    std::vector<Candidate> order = listed;
    std::vector<bool> is_listed(order.size(), true);
    for (const auto& u : unlisted) {
      size_t at = order.size();
      for (size_t i = 0; i < order.size(); ++i)
        if (is_listed[i] && kind_rank(order[i].dev->kind) < kind_rank(u.dev->kind)) {
          at = i;
          break;
        }
      order.insert(order.begin() + static_cast<std::ptrdiff_t>(at), u);
      is_listed.insert(is_listed.begin() + static_cast<std::ptrdiff_t>(at), false);
    }
    for (size_t i = 0; i < order.size(); ++i) {
      const auto& c = order[i];
      std::string why = std::string(to_string(c.dev->kind)) + "; ";
      if (is_listed[i])
        why += c.fw->name() + " is #" +
               std::to_string(list_pos(&config.ranking, c.fw->name()) + 1) +
               " in the config's ranking";
      else
        why += c.fw->name() + " is not in the config's ranking: placed by device kind";
      out.push_back({c.fw, c.dev->index, std::move(why)});
    }
  }

  // A framework whose bundles serve fewer than half the ops of an extension that another
  // ranked framework serves goes after the frameworks that serve them: it would otherwise
  // become every program's default and send most ops elsewhere.
  std::map<std::string, size_t> best;
  std::map<const Framework*, std::map<std::string, size_t>> cov;
  for (const auto& r : out)
    if (!cov.count(r.framework)) {
      cov[r.framework] = coverage(*r.framework);
      for (const auto& [ext, n] : cov[r.framework])
        best[ext] = std::max(best[ext], n);
    }
  std::vector<RankedDevice> kept, demoted;
  for (auto& r : out) {
    std::string lacking;
    for (const auto& [ext, n] : best) {
      const size_t mine = cov[r.framework].count(ext) ? cov[r.framework][ext] : 0;
      if (n > 0 && mine * 2 < n)
        lacking += (lacking.empty() ? "" : ", ") + ext + " (" + std::to_string(mine) + " of " +
                   std::to_string(n) + " ops)";
    }
    if (lacking.empty()) {
      kept.push_back(std::move(r));
    } else {
      r.reason += "; demoted: its bundles serve too few ops of " + lacking +
                  " (request it by name to use it anyway)";
      demoted.push_back(std::move(r));
    }
  }
  kept.insert(kept.end(), std::make_move_iterator(demoted.begin()),
              std::make_move_iterator(demoted.end()));
  return kept;
}

std::vector<const Framework*> RegistryImpl::ranking() const {
  std::vector<const Framework*> out;
  for (const auto& r : device_ranking(standing_denials()))
    if (std::find(out.begin(), out.end(), r.framework) == out.end()) out.push_back(r.framework);
  return out;
}

Selection RegistryImpl::select(std::string_view request) const {
  // Where each denial comes from, for the error messages.
  std::vector<std::pair<std::string, std::string>> deny;
  for (const auto& n : config.deny)
    deny.emplace_back(n, "the config's deny list");
  if (!env_backend_error)
    for (const auto& i : env_items)
      if (i.deny)
        deny.emplace_back(i.name,
                          "PARENCHYMA_BACKEND=\"" + detail::quote_prefix(*env_backend) + "\"");

  // Framework names present (loaded or not), for "did you mean" in the errors.
  std::vector<std::string> known;
  for (const auto& r : report)
    if (r.kind == "framework") known.push_back(r.name);
  std::string source, text;
  std::vector<detail::SelectItem> items;
  if (!request.empty()) {
    source = "explicit request";
    text = std::string(request);
    items = detail::parse_selection(text, source, known);
  } else if (env_backend) {
    if (env_backend_error) {
      detail::parse_selection(*env_backend, "PARENCHYMA_BACKEND", known); // throws, with a hint
      throw *env_backend_error;
    }
    source = "PARENCHYMA_BACKEND";
    text = *env_backend;
    items = env_items;
  } else if (!config.backend.empty()) {
    source = "config key 'backend'";
    text = config.backend;
    items = detail::parse_selection(text, source, known);
  }
  for (const auto& i : items)
    if (i.deny && source != "PARENCHYMA_BACKEND")
      deny.emplace_back(i.name, source + "=\"" + detail::quote_prefix(text) + "\"");

  std::vector<std::string> deny_names;
  for (const auto& [n, why] : deny)
    deny_names.push_back(n);
  auto denied_by = [&](const std::string& n) -> const std::string* {
    for (const auto& [name, why] : deny)
      if (name == n) return &why;
    return nullptr;
  };
  const auto ranked = device_ranking(deny_names);
  auto label = [&](const RankedDevice& r) {
    return r.framework->name() + ":" + std::to_string(r.device);
  };

  std::vector<detail::SelectItem> wanted;
  for (const auto& i : items)
    if (!i.deny) wanted.push_back(i);

  if (wanted.empty()) {
    if (!ranked.empty()) {
      const RankedDevice& top = ranked.front();
      Selection s{top.framework->name(), top.device, "", deny_names};
      std::string order;
      for (size_t i = 0; i < ranked.size() && i < 6; ++i)
        order += (i ? " > " : "") + label(ranked[i]);
      if (ranked.size() > 6) order += " > ...";
      s.reason = "default ranking (" + order + ")";
      if (!source.empty())
        s.reason += " with " + source + "=\"" + detail::quote_prefix(text) + "\"";
      s.reason += ": " + label(top) + " is the most potent device (" + top.reason + ")";
      return s;
    }
    std::string why = "no framework with a device is available";
    for (const auto& f : frameworks)
      why += "; " + f->name() + ": " +
             (f->devices().empty()
                  ? "0 devices" + (f->reason().empty() ? "" : " (" + f->reason() + ")")
                  : "denied by " + *denied_by(f->name()));
    if (frameworks.empty())
      why += " (no framework plugin loaded: see the load report, e.g. parenchyma-info --explain)";
    throw error(errc::unavailable, "registry", why);
  }

  std::string why;
  for (const auto& w : wanted) {
    const Framework* fw = nullptr;
    for (const auto& f : frameworks)
      if (f->name() == w.name) fw = f.get();
    std::string item = w.name + (w.device ? ":" + std::to_string(*w.device) : "");
    if (fw == nullptr) {
      why += "; " + item + ": no such framework plugin loaded";
      if (auto hint = detail::did_you_mean(w.name, known); !hint.empty()) why += " (" + hint + ")";
      for (const auto& r : report)
        if (r.name == w.name && r.status != "loaded")
          why += " (" + r.path + " " + r.status + " at stage " + r.stage + ": " + r.reason + ")";
      continue;
    }
    if (const std::string* by = denied_by(w.name)) {
      why += "; " + item + ": denied by " + *by;
      continue;
    }
    if (fw->devices().empty()) {
      why += "; " + item + ": 0 devices" + (fw->reason().empty() ? "" : " (" + fw->reason() + ")");
      continue;
    }
    if (w.device && *w.device >= fw->devices().size()) {
      why += "; " + item + ": device " + std::to_string(*w.device) + " does not exist (" +
             std::to_string(fw->devices().size()) + " device(s))";
      continue;
    }
    uint32_t dev = w.device.value_or(0);
    std::string how = item + " is the first available entry";
    if (!w.device)
      for (const auto& r : ranked)
        if (r.framework == fw) {
          dev = r.device;
          how += "; its most potent device is " + label(r) + " (" + r.reason + ")";
          break;
        }
    Selection s{w.name, dev, "", deny_names};
    s.reason = source + "=\"" + detail::quote_prefix(text) + "\": " + how;
    return s;
  }
  throw error(errc::unavailable, source,
              "\"" + detail::quote_prefix(text) + "\" cannot be met" + why +
                  ". Choose an available backend (see parenchyma-info) or fix the request");
}

std::shared_ptr<DeviceContext> RegistryImpl::context_for(const Framework& fw, uint32_t device) {
  std::lock_guard<std::mutex> lock(contexts_mutex);
  auto key = std::make_pair(&fw, device);
  if (auto it = contexts.find(key); it != contexts.end())
    if (auto existing = it->second.lock()) return existing;
  auto ctx = std::make_shared<DeviceContext>(shared_from_this(), fw, device);
  contexts[key] = ctx;
  return ctx;
}

// ---------------------------------------------------------------------------------------------
Registry::Registry(RegistryOptions options)
    : impl_(std::make_shared<RegistryImpl>(std::move(options))) {
  impl_->owner = this;
  impl_->load();
}

Registry::~Registry() = default;

namespace {
std::atomic<bool> g_keep_global{false}; // Registry::keep_global_at_exit
} // namespace

void Registry::keep_global_at_exit() noexcept { g_keep_global.store(true); }

Registry& Registry::global() {
  // Destroyed by the exit handlers, in reverse order of construction: after every static the
  // program made before its first backend, and before the drivers' own exit handlers, which
  // were registered while this registry loaded them. Except where the system has already taken
  // the plugins down (os::process_ending: Windows at ExitProcess), or where threads may still
  // be inside calls (keep_global_at_exit): then left to the system.
  struct holder {
    Registry* r = new Registry();
    ~holder() {
      if (!detail::os::process_ending() && !g_keep_global.load()) delete r;
    }
  };
  static holder instance;
  return *instance.r;
}

const std::vector<LoadReportEntry>& Registry::load_report() const noexcept { return impl_->report; }
const std::vector<std::unique_ptr<Framework>>& Registry::frameworks() const noexcept {
  return impl_->frameworks;
}
const std::vector<std::unique_ptr<BundleInfo>>& Registry::bundles() const noexcept {
  return impl_->bundles;
}
const Framework* Registry::find_framework(std::string_view name) const noexcept {
  for (const auto& f : impl_->frameworks)
    if (f->name() == name) return f.get();
  return nullptr;
}
const Config& Registry::config() const noexcept { return impl_->config; }
const std::vector<fs::path>& Registry::search_path() const noexcept { return impl_->search_path; }
std::vector<RankedDevice> Registry::device_ranking() const {
  return impl_->device_ranking(impl_->standing_denials());
}
std::vector<const Framework*> Registry::ranking() const { return impl_->ranking(); }
Selection Registry::select(std::string_view request) const { return impl_->select(request); }
std::optional<std::string> Registry::env(const char* name) const { return impl_->env(name); }
const std::vector<std::string>& Registry::notices() const noexcept { return impl_->notices; }

std::vector<OpCoverage> Registry::op_coverage() const {
  std::vector<OpCoverage> out;
  for (size_t i = 0; i < impl_->bundles.size(); ++i) {
    const BundleInfo& b = *impl_->bundles[i];
    if (find_framework(b.framework()) == nullptr) continue;
    for (const OpEntry& e : impl_->bundle_ops[i])
      out.push_back({b.extension(), e.desc->name, e.desc->dtype, b.framework(), b.name(),
                     plugin_string(e.desc->implementation, 200), e.schema});
  }
  return out;
}

} // namespace v1
} // namespace parenchyma
