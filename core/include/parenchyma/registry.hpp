// parenchyma: discovery, loading, probing and ranking of plugins; the load report.
//
// A Registry finds plugin files, loads them through stages (file check, load, entry symbol,
// version negotiation, initialise, probe) and records every candidate in a load report.
// Search order: RegistryOptions::plugin_paths, then PARENCHYMA_PLUGIN_PATH (colon-separated),
// then the config's "plugin_paths", then the parenchyma/plugins directory next to the core
// library. Within a directory files are taken in sorted order; a duplicate plugin name is
// skipped and reported.
//
// Threads (docs/threads.md): a Registry is immutable once constructed; every const member may
// be called from any number of threads at once, and Registries may be constructed and destroyed
// concurrently (the core serialises the plugins' initialisation process-wide). Backends and
// tensors keep what they use of a Registry alive, so it may be destroyed before them; only
// Backend::registry() then refers to a destroyed object.
#pragma once

#include <parenchyma/export.hpp>

#include <parenchyma/abi/pcy_bundle.h>
#include <parenchyma/abi/pcy_framework.h>
#include <parenchyma/error.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace parenchyma {
inline namespace v1 {

enum class device_kind { other = 0, cpu = 1, gpu = 2, accelerator = 3 };
PARENCHYMA_API const char* to_string(device_kind kind) noexcept;

enum class fallback_policy { allow, warn, deny };
PARENCHYMA_API const char* to_string(fallback_policy p) noexcept;

// One candidate plugin file and what became of it.
struct LoadReportEntry {
  std::string path;
  std::string name;   // plugin name once known, else the file name
  std::string kind;   // "framework", "bundle" or "unknown"
  std::string stage;  // the last stage reached: file, load, entry, version, initialize, probe,
                      // ready
  std::string status; // "loaded", "skipped" or "failed"
  std::string reason; // why it was skipped/failed, or a note (e.g. "0 devices: ...")
  std::string advice; // what to do about it
};

using property_value = std::variant<std::string, int64_t, double, bool>;

struct Device {
  uint32_t index = 0;        // position in Framework::devices(): the N of "opencl:N"
  uint32_t plugin_index = 0; // the plugin's own index of the device (differs when the plugin
                             // failed to describe an earlier device, which is then left out)
  std::string name;
  std::string vendor;
  device_kind kind = device_kind::other;
  std::vector<std::pair<std::string, property_value>> properties; // every property, plugin order
};

class Registry;
class BundleInfo;

// A loaded framework plugin (possibly with 0 devices).
class PARENCHYMA_API Framework {
public:
  const std::string& name() const noexcept { return name_; }
  const std::string& path() const noexcept { return path_; }
  const std::string& version() const noexcept { return version_; }
  const std::string& description() const noexcept { return description_; }
  const std::vector<Device>& devices() const noexcept { return devices_; }
  const std::string& reason() const noexcept { return reason_; } // why 0 devices, if so
  const pcy_framework_api& api() const noexcept { return *api_; }
  pcy_plugin plugin() const noexcept { return plugin_; }
  uint32_t abi_minor() const noexcept { return api_->abi_minor; }
  // Best device kind (gpu > accelerator > cpu > other), for ranking unlisted frameworks.
  device_kind best_kind() const noexcept;

private:
  friend class Registry;
  friend struct RegistryImpl;
  std::string name_, path_, version_, description_, reason_;
  std::vector<Device> devices_;
  const pcy_framework_api* api_ = nullptr;
  pcy_plugin plugin_ = nullptr;
};

// A loaded bundle plugin: an extension for one framework.
class PARENCHYMA_API BundleInfo {
public:
  const std::string& name() const noexcept { return name_; }
  const std::string& path() const noexcept { return path_; }
  const std::string& extension() const noexcept { return extension_; }
  const std::string& framework() const noexcept { return framework_; }
  const std::string& reason() const noexcept { return reason_; }
  const pcy_bundle_api& api() const noexcept { return *api_; }
  pcy_bundle_plugin plugin() const noexcept { return plugin_; }
  const std::vector<const pcy_op_desc*>& ops() const noexcept { return ops_; }
  const pcy_op_desc* find_op(std::string_view name, pcy_dtype dtype) const noexcept;
  // Position in the load order (the search order), for choosing between two bundles of an op.
  size_t order() const noexcept { return order_; }

private:
  friend class Registry;
  friend struct RegistryImpl;
  std::string name_, path_, extension_, framework_, reason_;
  const pcy_bundle_api* api_ = nullptr;
  pcy_bundle_plugin plugin_ = nullptr;
  std::vector<const pcy_op_desc*> ops_; // only ops whose descriptor checked out at load
  size_t order_ = 0;
};

// The effective configuration (default config file, PARENCHYMA_CONFIG, options).
struct Config {
  // "ranking" as an array: an explicit framework order, best first (devices of a framework not
  // listed go before the first listed device of a worse device kind).
  std::vector<std::string> ranking;
  // "ranking" as an object ("gpu", "accelerator", "cpu", "other" -> framework order): devices
  // rank by kind first, then by the framework order given for their kind (unlisted frameworks
  // after the listed ones, by name). The shipped default config uses this form. Exactly one of
  // the two forms is set.
  std::map<std::string, std::vector<std::string>> ranking_by_kind;
  std::string backend; // a selection string, e.g. "opencl,native"
  std::vector<std::string> plugin_paths;
  std::vector<std::string> deny; // frameworks never selected
  fallback_policy fallback = fallback_policy::warn;
  std::string log_level = "warn";
  std::string cache_dir; // compiled kernels; empty: the default
  // Bundles to prefer when several serve the same op on one framework, best first; the others
  // in search (load) order.
  std::vector<std::string> bundle_priority;
  // Plugin settings (e.g. "PARENCHYMA_OPENCL_PLATFORMS": "nvidia"), used where the environment
  // does not set the variable; plugins read them through the host (pcy_host_services::setting).
  std::map<std::string, std::string> settings;
  // "validate": wrap every plugin table in the validation layer (docs/validation.md), used
  // when neither RegistryOptions::validate nor PARENCHYMA_VALIDATE decides.
  bool validate = false;
  std::vector<std::string> sources; // the files it was read from, in order
};

struct RegistryOptions {
  // Extra plugin directories or files, searched first.
  std::vector<std::filesystem::path> plugin_paths;
  // A config file to read instead of PARENCHYMA_CONFIG / the default config.
  std::optional<std::filesystem::path> config_file;
  // Replaces the process environment for PARENCHYMA_* lookups (tests use this); nullopt: getenv.
  std::optional<std::map<std::string, std::string>> environment;
  // Search the directory next to the core library (off for tests that want an exact set).
  bool default_plugin_dir = true;
  // Read the default config shipped with the library when no other config is named.
  bool default_config = true;
  // The validation layer (docs/validation.md): checks every call between the core and the
  // plugins, at a cost; off, the plugins' tables are called directly. nullopt: PARENCHYMA_VALIDATE
  // decides (taken from `environment` when that sets it, else from the process environment even
  // when `environment` replaces it, except in set-uid processes), else the config's "validate".
  std::optional<bool> validate;
};

// One choice of backend, with the reason it was made.
struct Selection {
  std::string framework;
  uint32_t device = 0;
  std::string reason;              // e.g. "PARENCHYMA_BACKEND=opencl: first available entry"
  std::vector<std::string> denied; // frameworks never used for this backend (nor its fallback)
};

// One device in the default order, with why it got its place.
struct RankedDevice {
  const Framework* framework = nullptr;
  uint32_t device = 0; // position in framework->devices()
  std::string reason;  // e.g. "gpu; cuda is first for gpu devices in the config's ranking"
};

// One cell of the op x framework matrix: an op a bundle serves.
struct OpCoverage {
  std::string extension;
  std::string op;
  pcy_dtype dtype;
  std::string framework;
  std::string bundle;
  std::string implementation;
  const pcy_op_schema* schema = nullptr; // the op's arguments (ABI 1.1 bundles), else nullptr;
                                         // plugin memory, valid while the Registry lives
};

struct RegistryImpl;
class BackendImpl;

class PARENCHYMA_API Registry {
public:
  explicit Registry(RegistryOptions options = {});
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The process's shared registry, created on first use (thread-safe). It is destroyed when the
  // process exits (after main returns), which shuts the plugins down once the last backend and
  // tensor using them are gone: pending kernel-cache writes complete and no plugin thread
  // outlives the process's exit handlers.
  static Registry& global();
  // Leaves the global registry and its plugins loaded at process exit instead of shutting them
  // down, for a host whose other threads may still be inside runtime calls when the process
  // exits (Python's daemon threads: the Python package calls it at exit when a thread is inside
  // an op). Pending kernel-cache writes are then abandoned. Cannot be undone.
  static void keep_global_at_exit() noexcept;

  const std::vector<LoadReportEntry>& load_report() const noexcept;
  const std::vector<std::unique_ptr<Framework>>& frameworks() const noexcept;
  const std::vector<std::unique_ptr<BundleInfo>>& bundles() const noexcept;
  const Framework* find_framework(std::string_view name) const noexcept;
  const Config& config() const noexcept;
  // The search path actually used, in order.
  const std::vector<std::filesystem::path>& search_path() const noexcept;

  // Every device of every loaded framework, best first, denied frameworks left out: by device
  // kind, then the framework order of the config's "ranking" (docs/config.md has the rules).
  std::vector<RankedDevice> device_ranking() const;
  // Frameworks with at least one device, in the order of their best device in device_ranking().
  std::vector<const Framework*> ranking() const;

  // Resolves a selection string ("cuda:1,opencl,!native"); empty: environment > config >
  // ranking. Throws parenchyma::error (unavailable/config) saying why nothing matched.
  Selection select(std::string_view request = {}) const;

  // Every op every loaded bundle serves (parenchyma-info --ops).
  std::vector<OpCoverage> op_coverage() const;

  // Environment lookup honouring RegistryOptions::environment and the set-uid rule.
  std::optional<std::string> env(const char* name) const;

  // Problems with the configuration or environment that did not stop the registry (a
  // malformed PARENCHYMA_BACKEND, a bad PARENCHYMA_LOG_LEVEL, two bundles serving one op...).
  const std::vector<std::string>& notices() const noexcept;

  RegistryImpl& impl() noexcept { return *impl_; }

private:
  std::shared_ptr<RegistryImpl> impl_;
};

} // namespace v1
} // namespace parenchyma
