// parenchyma core: plugin discovery, the load stages, the load report, ranking and selection.
#include "internal.hpp"

#include <boost/dll/runtime_symbol_info.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

namespace parenchyma {
inline namespace v1 {

namespace fs = std::filesystem;

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

// The directory holding this library (the core), found from the library's own location.
fs::path core_library_dir() {
  try {
    std::error_code ec;
    fs::path p = fs::path(boost::dll::this_line_location().string()).parent_path();
    fs::path c = fs::weakly_canonical(p, ec);
    return ec ? p : c;
  } catch (...) {
    return {};
  }
}

// Refuses files or directories that other users may write (someone could plant code there).
std::optional<std::string> unsafe_permissions(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  if ((st.st_mode & S_IWOTH) != 0) return p.string() + " is writable by all users";
  if ((st.st_mode & S_IWGRP) != 0 && st.st_uid != ::geteuid() && st.st_uid != 0)
    return p.string() + " is group-writable and owned by another user";
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return p.string() + " is owned by another user (uid " + std::to_string(st.st_uid) + ")";
  return std::nullopt;
}

std::vector<std::string> split_paths(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t colon = s.find(':', start);
    std::string part =
        s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!part.empty()) out.push_back(part);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

const char* const required_framework_slots[] = {
    "initialize",      "shutdown",     "probe",         "device_properties", "context_create",
    "context_destroy", "queue_create", "queue_destroy", "queue_finish",      "memory_alloc",
    "memory_free",     "memory_read",  "memory_write"};

std::optional<std::string> missing_framework_slot(const pcy_framework_api& t) {
  const void* slots[] = {reinterpret_cast<const void*>(t.initialize),
                         reinterpret_cast<const void*>(t.shutdown),
                         reinterpret_cast<const void*>(t.probe),
                         reinterpret_cast<const void*>(t.device_properties),
                         reinterpret_cast<const void*>(t.context_create),
                         reinterpret_cast<const void*>(t.context_destroy),
                         reinterpret_cast<const void*>(t.queue_create),
                         reinterpret_cast<const void*>(t.queue_destroy),
                         reinterpret_cast<const void*>(t.queue_finish),
                         reinterpret_cast<const void*>(t.memory_alloc),
                         reinterpret_cast<const void*>(t.memory_free),
                         reinterpret_cast<const void*>(t.memory_read),
                         reinterpret_cast<const void*>(t.memory_write)};
  for (size_t i = 0; i < std::size(slots); ++i)
    if (slots[i] == nullptr) return std::string(required_framework_slots[i]);
  return std::nullopt;
}

std::string take_error(pcy_error* e) {
  if (e == nullptr) return {};
  std::string m = e->message != nullptr ? e->message : "(no message)";
  if (e->destroy != nullptr) e->destroy(e);
  return m;
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
    if (op->dtype == dtype && op->name != nullptr && name == op->name) return op;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
RegistryImpl::RegistryImpl(RegistryOptions opts) : options(std::move(opts)) {
  secure = ::getauxval(AT_SECURE) != 0;
}

RegistryImpl::~RegistryImpl() {
  for (size_t i = bundles.size(); i-- > 0;)
    if (bundles[i]->plugin_ != nullptr) bundles[i]->api_->shutdown(bundles[i]->plugin_);
  for (size_t i = frameworks.size(); i-- > 0;)
    if (frameworks[i]->plugin_ != nullptr) frameworks[i]->api_->shutdown(frameworks[i]->plugin_);
  bundles.clear();
  frameworks.clear();
  // libraries unload last, in reverse order of loading.
  while (!libraries.empty())
    libraries.pop_back();
}

std::optional<std::string> RegistryImpl::env(const char* name) const {
  if (options.environment) {
    auto it = options.environment->find(name);
    if (it == options.environment->end()) return std::nullopt;
    return it->second;
  }
  if (secure) return std::nullopt;
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

void RegistryImpl::add_report(LoadReportEntry e) {
  const pcy_log_level level = e.status == "loaded" ? PCY_LOG_DEBUG : PCY_LOG_INFO;
  detail::log(level, "registry",
              e.path + ": " + e.status + " at stage " + e.stage +
                  (e.reason.empty() ? "" : " (" + e.reason + ")"));
  report.push_back(std::move(e));
}

void RegistryImpl::load() {
  if (secure && !options.environment)
    detail::log(PCY_LOG_WARN, "registry",
                "set-uid process: PARENCHYMA_* environment variables are ignored");

  // 1. Configuration: the shipped default, then PARENCHYMA_CONFIG or the API's file.
  const fs::path libdir = core_library_dir();
  if (options.default_config && !libdir.empty()) {
    const fs::path def = libdir / PARENCHYMA_CONFIG_RELPATH;
    std::error_code ec;
    if (fs::exists(def, ec)) config = detail::read_config(def, config);
  }
  if (options.config_file) {
    config = detail::read_config(*options.config_file, config);
  } else if (auto p = env("PARENCHYMA_CONFIG"); p && !p->empty()) {
    config = detail::read_config(*p, config);
  }
  if (auto lvl = env("PARENCHYMA_LOG_LEVEL")) {
    auto parsed = detail::parse_log_level(*lvl);
    if (!parsed)
      throw error(errc::config, "PARENCHYMA_LOG_LEVEL",
                  "\"" + *lvl +
                      "\" is not a level: use trace, debug, info, warn, error, critical or off");
    detail::set_log_level(*parsed);
  } else if (auto parsed = detail::parse_log_level(config.log_level)) {
    detail::set_log_level(*parsed);
  }
  if (auto b = env("PARENCHYMA_BACKEND")) detail::parse_selection(*b, "PARENCHYMA_BACKEND");

  // 2. Cache directory for compiled kernels.
  if (auto c = env("PARENCHYMA_CACHE_DIR"); c && !c->empty())
    cache_dir = *c;
  else if (!config.cache_dir.empty())
    cache_dir = config.cache_dir;
  else if (auto x = env("XDG_CACHE_HOME"); x && !x->empty())
    cache_dir = *x + "/parenchyma";
  else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    cache_dir = std::string(home) + "/.cache/parenchyma";

  host.struct_size = sizeof host;
  host.host_abi_major = PCY_ABI_VERSION_MAJOR;
  host.host_abi_minor = PCY_ABI_VERSION_MINOR;
  host.log_user = this;
  host.log = &detail::plugin_log;
  host.log_level = detail::log_level();
  host.cache_dir = cache_dir.empty() ? nullptr : cache_dir.c_str();

  // 3. The search path: API, environment, config, next to the core library.
  for (const auto& p : options.plugin_paths)
    search_path.push_back(p);
  if (auto pp = env("PARENCHYMA_PLUGIN_PATH"))
    for (const auto& p : split_paths(*pp))
      search_path.emplace_back(p);
  for (const auto& p : config.plugin_paths)
    search_path.emplace_back(p);
  if (options.default_plugin_dir && !libdir.empty())
    search_path.push_back(libdir / PARENCHYMA_PLUGIN_RELDIR);

  std::vector<fs::path> candidates;
  for (const auto& entry : search_path) {
    std::error_code ec;
    if (fs::is_regular_file(entry, ec)) {
      candidates.push_back(entry);
      continue;
    }
    if (!fs::is_directory(entry, ec)) {
      add_report({entry.string(), entry.filename().string(), "unknown", "file", "skipped",
                  "plugin path does not exist or is not a directory",
                  "fix PARENCHYMA_PLUGIN_PATH / plugin_paths, or create the directory"});
      continue;
    }
    if (auto why = unsafe_permissions(entry)) {
      add_report({entry.string(), entry.filename().string(), "unknown", "file", "failed",
                  "plugin directory refused: " + *why,
                  "remove write access for other users (chmod o-w,g-w) or move the plugins"});
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(entry, ec))
      if (f.path().extension() == ".so") files.push_back(f.path());
    std::sort(files.begin(), files.end());
    candidates.insert(candidates.end(), files.begin(), files.end());
  }
  for (const auto& c : candidates)
    load_candidate(c);

  // Bundles whose framework did not load are kept out of op routing (but stay in the report).
  for (auto& b : bundles) {
    bool present = false;
    for (const auto& f : frameworks)
      present = present || (f->name() == b->framework());
    if (!present && b->reason_.empty())
      b->reason_ = "framework '" + b->framework() + "' is not loaded";
  }
}

void RegistryImpl::load_candidate(const fs::path& path) {
  LoadReportEntry e;
  e.path = path.string();
  e.name = path.stem().string();
  e.kind = "unknown";
  e.stage = "file";
  e.status = "failed";

  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    e.reason = "not a regular file";
    e.advice = "remove it from the plugin directory";
    return add_report(std::move(e));
  }
  if (auto why = unsafe_permissions(path)) {
    e.reason = "plugin file refused: " + *why;
    e.advice = "remove write access for other users (chmod o-w,g-w)";
    return add_report(std::move(e));
  }

  e.stage = "load";
  boost::dll::shared_library lib;
  try {
    lib.load(boost::dll::fs::path(path.string()),
             boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& ex) {
    e.reason = ex.what();
    e.advice = "check that the file is a shared library for this platform and that its "
               "dependencies are installed (ldd " +
               path.string() + ")";
    return add_report(std::move(e));
  }

  e.stage = "entry";
  const bool is_fw = lib.has(PCY_FRAMEWORK_ENTRY_SYMBOL);
  const bool is_bundle = lib.has(PCY_BUNDLE_ENTRY_SYMBOL);
  if (!is_fw && !is_bundle) {
    e.reason = "no entry symbol " PCY_FRAMEWORK_ENTRY_SYMBOL " or " PCY_BUNDLE_ENTRY_SYMBOL;
    e.advice = "not a parenchyma plugin: build it with PCY_FRAMEWORK_PLUGIN / PCY_BUNDLE_PLUGIN "
               "from the SDK, or remove it from the plugin directory";
    return add_report(std::move(e));
  }
  e.kind = is_fw ? "framework" : "bundle";
  const pcy_plugin_prefix* prefix = nullptr;
  const void* table = nullptr;
  if (is_fw) {
    auto entry = lib.get<const pcy_framework_api*()>(PCY_FRAMEWORK_ENTRY_SYMBOL);
    table = entry();
  } else {
    auto entry = lib.get<const pcy_bundle_api*()>(PCY_BUNDLE_ENTRY_SYMBOL);
    table = entry();
  }
  prefix = static_cast<const pcy_plugin_prefix*>(table);
  if (prefix == nullptr || prefix->struct_size < sizeof(pcy_plugin_prefix)) {
    e.reason = "the entry point returned no table, or one too small to hold the plugin prefix";
    e.advice = "rebuild the plugin against this SDK";
    return add_report(std::move(e));
  }
  if (prefix->name != nullptr) e.name = prefix->name;
  const uint32_t want_kind = is_fw ? PCY_PLUGIN_FRAMEWORK : PCY_PLUGIN_BUNDLE;
  if (prefix->kind != want_kind) {
    e.reason =
        "the table's kind (" + std::to_string(prefix->kind) + ") does not match its entry symbol";
    e.advice = "rebuild the plugin against this SDK";
    return add_report(std::move(e));
  }

  e.stage = "version";
  if (prefix->abi_major != PCY_ABI_VERSION_MAJOR) {
    e.reason = "plugin built for ABI " + std::to_string(prefix->abi_major) + "." +
               std::to_string(prefix->abi_minor) + ", core speaks " +
               std::to_string(PCY_ABI_VERSION_MAJOR) + "." + std::to_string(PCY_ABI_VERSION_MINOR);
    e.advice = "rebuild the plugin against this SDK (ABI major " +
               std::to_string(PCY_ABI_VERSION_MAJOR) + ")";
    return add_report(std::move(e));
  }
  if (prefix->name == nullptr || *prefix->name == '\0') {
    e.reason = "the plugin has no name";
    e.advice = "set a name in the plugin class";
    return add_report(std::move(e));
  }
  // Duplicate names: the first one found wins (search order is documented).
  const std::string pname = prefix->name;
  auto dup = [&](const std::string& path_first) {
    e.status = "skipped";
    e.reason = "duplicate plugin name '" + pname + "': already loaded from " + path_first;
    e.advice = "remove one of the two files, or order the search path to pick the one you want";
    add_report(std::move(e));
  };
  for (const auto& f : frameworks)
    if (f->name() == pname) return dup(f->path());
  for (const auto& b : bundles)
    if (b->name() == pname) return dup(b->path());

  // Normalise the table: copy what the plugin sent, zero the slots it does not know about.
  if (is_fw) {
    auto t = std::make_unique<pcy_framework_api>();
    std::memset(t.get(), 0, sizeof *t);
    std::memcpy(t.get(), table, std::min<size_t>(prefix->struct_size, sizeof *t));
    t->struct_size = sizeof *t;
    if (auto slot = missing_framework_slot(*t)) {
      e.stage = "entry";
      e.reason = "required slot '" + *slot + "' is NULL or absent (table of " +
                 std::to_string(prefix->struct_size) + " bytes)";
      e.advice = "implement " + *slot + " in the plugin; only optional slots may be left NULL";
      return add_report(std::move(e));
    }
    e.stage = "initialize";
    pcy_framework_init_args args{};
    args.struct_size = sizeof args;
    args.host = &host;
    if (pcy_error* err = t->initialize(&args)) {
      e.reason = take_error(err);
      e.advice = "see the plugin's message; the plugin is skipped and everything else works";
      return add_report(std::move(e));
    }
    auto fw = std::make_unique<Framework>();
    fw->name_ = pname;
    fw->path_ = path.string();
    fw->version_ = prefix->plugin_version != nullptr ? prefix->plugin_version : "";
    fw->description_ = prefix->description != nullptr ? prefix->description : "";
    fw->api_ = t.get();
    fw->plugin_ = args.plugin;

    e.stage = "probe";
    pcy_framework_probe probe{};
    probe.struct_size = sizeof probe;
    if (pcy_error* err = t->probe(args.plugin, &probe)) {
      e.reason = "probe failed: " + take_error(err);
      e.advice = "see the plugin's message";
      t->shutdown(args.plugin);
      return add_report(std::move(e));
    }
    if (probe.reason != nullptr) fw->reason_ = probe.reason;
    for (uint32_t d = 0; d < probe.device_count; ++d) {
      const pcy_property* props = nullptr;
      size_t n = 0;
      if (pcy_error* err = t->device_properties(args.plugin, d, &props, &n)) {
        detail::log(PCY_LOG_WARN, pname, "device " + std::to_string(d) + ": " + take_error(err));
        continue;
      }
      Device dev;
      dev.index = d;
      // Arrays are walked with the plugin's element size, so a newer minor's larger structs work.
      const size_t stride = n > 0 && props[0].struct_size >= sizeof(pcy_property)
                                ? props[0].struct_size
                                : sizeof(pcy_property);
      for (size_t i = 0; i < n; ++i) {
        const pcy_property& p = *reinterpret_cast<const pcy_property*>(
            reinterpret_cast<const char*>(props) + i * stride);
        if (p.key == nullptr) continue;
        property_value v;
        switch (p.type) {
        case PCY_VALUE_STRING: v = std::string(p.s != nullptr ? p.s : ""); break;
        case PCY_VALUE_INT: v = p.i; break;
        case PCY_VALUE_FLOAT: v = p.f; break;
        case PCY_VALUE_BOOL: v = p.i != 0; break;
        }
        if (std::strcmp(p.key, PCY_PROP_NAME) == 0 && p.s != nullptr) dev.name = p.s;
        if (std::strcmp(p.key, PCY_PROP_VENDOR) == 0 && p.s != nullptr) dev.vendor = p.s;
        if (std::strcmp(p.key, PCY_PROP_KIND) == 0 && p.type == PCY_VALUE_INT)
          dev.kind = static_cast<device_kind>(std::clamp<int64_t>(p.i, 0, 3));
        dev.properties.emplace_back(p.key, std::move(v));
      }
      fw->devices_.push_back(std::move(dev));
    }
    e.stage = "ready";
    e.status = "loaded";
    e.reason = std::to_string(fw->devices_.size()) + " device(s)";
    if (fw->devices_.empty() && !fw->reason_.empty()) e.reason += ": " + fw->reason_;
    if (fw->devices_.empty())
      e.advice =
          fw->reason_.empty() ? "no device found" : "loaded, but nothing to run on: " + fw->reason_;
    if (prefix->struct_size < sizeof(pcy_framework_api))
      e.reason += "; built for ABI " + std::to_string(prefix->abi_major) + "." +
                  std::to_string(prefix->abi_minor) + " with a " +
                  std::to_string(prefix->struct_size) +
                  "-byte table (reduced capability: later slots unsupported)";
    framework_tables.push_back(std::move(t));
    frameworks.push_back(std::move(fw));
  } else {
    auto t = std::make_unique<pcy_bundle_api>();
    std::memset(t.get(), 0, sizeof *t);
    std::memcpy(t.get(), table, std::min<size_t>(prefix->struct_size, sizeof *t));
    t->struct_size = sizeof *t;
    if (t->initialize == nullptr || t->shutdown == nullptr || t->ops == nullptr ||
        t->context_init == nullptr || t->context_teardown == nullptr || t->extension == nullptr ||
        t->framework == nullptr) {
      e.reason = "a required bundle slot (initialize, shutdown, ops, context_init, "
                 "context_teardown, extension, framework) is NULL or absent";
      e.advice = "rebuild the bundle with PCY_BUNDLE_PLUGIN from this SDK";
      return add_report(std::move(e));
    }
    e.stage = "initialize";
    pcy_bundle_init_args args{};
    args.struct_size = sizeof args;
    args.host = &host;
    if (pcy_error* err = t->initialize(&args)) {
      e.reason = take_error(err);
      e.advice = "see the plugin's message; the bundle is skipped and everything else works";
      return add_report(std::move(e));
    }
    auto b = std::make_unique<BundleInfo>();
    b->name_ = pname;
    b->path_ = path.string();
    b->extension_ = t->extension;
    b->framework_ = t->framework;
    b->api_ = t.get();
    b->plugin_ = args.plugin;
    e.stage = "probe";
    const pcy_op_desc* ops = nullptr;
    size_t n = 0;
    if (pcy_error* err = t->ops(args.plugin, &ops, &n)) {
      e.reason = "ops failed: " + take_error(err);
      t->shutdown(args.plugin);
      return add_report(std::move(e));
    }
    const size_t stride = n > 0 && ops[0].struct_size >= sizeof(pcy_op_desc) ? ops[0].struct_size
                                                                             : sizeof(pcy_op_desc);
    for (size_t i = 0; i < n; ++i) {
      const auto* op =
          reinterpret_cast<const pcy_op_desc*>(reinterpret_cast<const char*>(ops) + i * stride);
      if (op->struct_size >= sizeof(pcy_op_desc) && op->fn != nullptr && op->name != nullptr &&
          op->signature != nullptr)
        b->ops_.push_back(op);
    }
    if (args.reason != nullptr) b->reason_ = args.reason;
    e.stage = "ready";
    e.status = "loaded";
    e.reason = "extension " + b->extension_ + " for " + b->framework_ + ": " +
               std::to_string(b->ops_.size()) + " op(s)" +
               (b->reason_.empty() ? "" : "; " + b->reason_);
    bundle_tables.push_back(std::move(t));
    bundles.push_back(std::move(b));
  }
  libraries.push_back(std::move(lib));
  add_report(std::move(e));
}

std::vector<const Framework*> RegistryImpl::ranking() const {
  auto denied = [&](const std::string& n) {
    return std::find(config.deny.begin(), config.deny.end(), n) != config.deny.end();
  };
  std::vector<const Framework*> listed, unlisted;
  for (const auto& name : config.ranking)
    for (const auto& f : frameworks)
      if (f->name() == name && !f->devices().empty() && !denied(name) &&
          std::find(listed.begin(), listed.end(), f.get()) == listed.end())
        listed.push_back(f.get());
  for (const auto& f : frameworks)
    if (!f->devices().empty() && !denied(f->name()) &&
        std::find(config.ranking.begin(), config.ranking.end(), f->name()) == config.ranking.end())
      unlisted.push_back(f.get());
  std::sort(unlisted.begin(), unlisted.end(), [](const Framework* a, const Framework* b) {
    const int ka = kind_rank(a->best_kind()), kb = kind_rank(b->best_kind());
    return ka != kb ? ka > kb : a->name() < b->name();
  });
  // An unlisted framework goes before the first listed one whose best device kind is worse.
  std::vector<const Framework*> out = listed;
  for (const Framework* u : unlisted) {
    auto pos = std::find_if(out.begin(), out.end(), [&](const Framework* f) {
      return std::find(listed.begin(), listed.end(), f) != listed.end() &&
             kind_rank(f->best_kind()) < kind_rank(u->best_kind());
    });
    out.insert(pos, u);
  }
  return out;
}

Selection RegistryImpl::select(std::string_view request) const {
  std::string source;
  std::string text;
  bool explicit_request = true;
  if (!request.empty()) {
    source = "explicit request";
    text = std::string(request);
  } else if (auto b = env("PARENCHYMA_BACKEND"); b && !b->empty()) {
    source = "PARENCHYMA_BACKEND";
    text = *b;
  } else if (!config.backend.empty()) {
    source = "config key 'backend'";
    text = config.backend;
  } else {
    explicit_request = false;
  }

  std::vector<detail::SelectItem> items;
  if (explicit_request) items = detail::parse_selection(text, source);
  std::vector<std::string> deny = config.deny;
  for (const auto& i : items)
    if (i.deny) deny.push_back(i.name);
  auto is_denied = [&](const std::string& n) {
    return std::find(deny.begin(), deny.end(), n) != deny.end();
  };
  const auto ranked = ranking();
  std::string ranked_names;
  for (const Framework* f : ranked)
    ranked_names += (ranked_names.empty() ? "" : " > ") + f->name();

  std::vector<detail::SelectItem> wanted;
  for (const auto& i : items)
    if (!i.deny) wanted.push_back(i);

  if (wanted.empty()) {
    // Default ranking (possibly with denials).
    for (const Framework* f : ranked) {
      if (is_denied(f->name())) continue;
      Selection s{f->name(), 0, ""};
      s.reason =
          "default ranking (" + (ranked_names.empty() ? std::string("none") : ranked_names) + ")";
      if (explicit_request) s.reason += " with " + source + "=\"" + text + "\"";
      s.reason += ": " + f->name() + " is the best available";
      return s;
    }
    std::string why = "no framework with a device is available";
    for (const auto& f : frameworks)
      why += "; " + f->name() + ": " +
             (f->devices().empty()
                  ? "0 devices" + (f->reason().empty() ? "" : " (" + f->reason() + ")")
                  : std::string("denied"));
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
      for (const auto& r : report)
        if (r.name == w.name && r.status != "loaded")
          why += " (" + r.path + " " + r.status + " at stage " + r.stage + ": " + r.reason + ")";
      continue;
    }
    if (is_denied(w.name)) {
      why += "; " + item + ": denied by configuration";
      continue;
    }
    if (fw->devices().empty()) {
      why += "; " + item + ": 0 devices" + (fw->reason().empty() ? "" : " (" + fw->reason() + ")");
      continue;
    }
    const uint32_t dev = w.device.value_or(0);
    if (dev >= fw->devices().size()) {
      why += "; " + item + ": device " + std::to_string(dev) + " does not exist (" +
             std::to_string(fw->devices().size()) + " device(s))";
      continue;
    }
    Selection s{w.name, dev, ""};
    s.reason = source + "=\"" + text + "\": " + item + " is the first available entry";
    return s;
  }
  throw error(errc::unavailable, source,
              "\"" + text + "\" cannot be met" + why +
                  ". Choose an available backend (see parenchyma-info) or fix the request");
}

std::shared_ptr<BackendImpl> RegistryImpl::backend_for(const Framework& fw, uint32_t device,
                                                       Selection selection) {
  std::lock_guard<std::mutex> lock(backends_mutex);
  auto key = std::make_pair(&fw, device);
  if (auto it = backends.find(key); it != backends.end())
    if (auto existing = it->second.lock()) return existing;
  auto impl = std::make_shared<BackendImpl>(shared_from_this(), fw, device, std::move(selection));
  impl->self = impl;
  backends[key] = impl;
  return impl;
}

// ---------------------------------------------------------------------------------------------
Registry::Registry(RegistryOptions options)
    : impl_(std::make_shared<RegistryImpl>(std::move(options))) {
  impl_->owner = this;
  impl_->load();
}

Registry::~Registry() = default;

Registry& Registry::global() {
  // Deliberately never destroyed: plugins (GPU drivers among them) are not shut down during
  // static destruction, whose order across libraries is unspecified.
  static Registry* instance = new Registry();
  return *instance;
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
std::vector<const Framework*> Registry::ranking() const { return impl_->ranking(); }
Selection Registry::select(std::string_view request) const { return impl_->select(request); }
std::optional<std::string> Registry::env(const char* name) const { return impl_->env(name); }

std::vector<OpCoverage> Registry::op_coverage() const {
  std::vector<OpCoverage> out;
  for (const auto& b : impl_->bundles) {
    if (find_framework(b->framework()) == nullptr) continue;
    for (const pcy_op_desc* op : b->ops())
      out.push_back({b->extension(), op->name, op->dtype, b->framework(), b->name(),
                     op->implementation != nullptr ? op->implementation : ""});
  }
  return out;
}

} // namespace v1
} // namespace parenchyma
