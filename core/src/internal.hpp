// parenchyma core, private: the state behind Registry, Backend and TensorStorage.
#pragma once

#include <parenchyma/backend.hpp>
#include <parenchyma/registry.hpp>
#include <parenchyma/shared_tensor.hpp>

#include <boost/dll/shared_library.hpp>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma {
inline namespace v1 {
namespace detail {

// ---- logging (log.cpp) ----------------------------------------------------------------------
void log(pcy_log_level level, std::string_view origin, std::string_view message);
bool log_enabled(pcy_log_level level) noexcept;
// Parses "trace|debug|info|warn|error|critical|off"; nullopt when unknown.
std::optional<pcy_log_level> parse_log_level(std::string_view text) noexcept;
void set_log_level(pcy_log_level level) noexcept;
pcy_log_level log_level() noexcept;
// The host-services log callback handed to plugins.
void plugin_log(void* user, pcy_log_level level, const char* origin, const char* message);

// ---- config and selection strings (config.cpp) ----------------------------------------------
// Reads a JSON config file over `base`: keys it sets replace base's. Throws errc::config naming
// the file and the key.
Config read_config(const std::filesystem::path& file, Config base);

struct SelectItem {
  std::string name;
  std::optional<uint32_t> device;
  bool deny = false;
};
// Parses "cuda:1,opencl,!native". `origin` names where it came from (for the error message).
std::vector<SelectItem> parse_selection(std::string_view text, std::string_view origin);

// ---- the registry ---------------------------------------------------------------------------
struct BoundOp;

} // namespace detail

struct RegistryImpl : std::enable_shared_from_this<RegistryImpl> {
  RegistryOptions options;
  Config config;
  std::vector<std::filesystem::path> search_path;
  std::vector<LoadReportEntry> report;
  std::vector<std::unique_ptr<Framework>> frameworks;
  std::vector<std::unique_ptr<BundleInfo>> bundles;
  // Normalised copies of plugin tables (absent slots zeroed), parallel to frameworks/bundles.
  std::vector<std::unique_ptr<pcy_framework_api>> framework_tables;
  std::vector<std::unique_ptr<pcy_bundle_api>> bundle_tables;
  std::vector<boost::dll::shared_library> libraries;
  pcy_host_services host{};
  std::string cache_dir;
  bool secure = false;       // set-uid: environment overrides ignored
  Registry* owner = nullptr; // the Registry object this belongs to

  std::mutex backends_mutex;
  std::map<std::pair<const Framework*, uint32_t>, std::weak_ptr<BackendImpl>> backends;

  explicit RegistryImpl(RegistryOptions opts);
  ~RegistryImpl();
  void load();
  std::optional<std::string> env(const char* name) const;
  // A shared backend (one context and queue per framework device per registry).
  std::shared_ptr<BackendImpl> backend_for(const Framework& fw, uint32_t device,
                                           Selection selection);
  std::vector<const Framework*> ranking() const;
  Selection select(std::string_view request) const;

private:
  void load_candidate(const std::filesystem::path& path);
  void add_report(LoadReportEntry entry);
};

namespace detail {

// Parsed op signature: one entry per argument.
enum class sig_arg : uint8_t { integer, real, scalar, tensor_in, tensor_out, tensor_inout };
std::vector<sig_arg> parse_signature(std::string_view signature);

struct BoundOp {
  enum class state : uint8_t { unresolved, ready, failed } st = state::unresolved;
  pcy_op_fn fn = nullptr;
  pcy_bundle_context bundle = nullptr;
  BackendImpl* target = nullptr;           // where it runs
  std::shared_ptr<BackendImpl> target_ref; // keeps a fallback target alive
  std::vector<sig_arg> signature;
  OpRoute route;
  std::string failure; // why it cannot run (state::failed)
  errc failure_code = errc::unsupported;
  bool warned = false;
};

} // namespace detail

class BackendImpl {
public:
  BackendImpl(std::shared_ptr<RegistryImpl> registry, const Framework& fw, uint32_t device,
              Selection selection);
  ~BackendImpl();
  BackendImpl(const BackendImpl&) = delete;
  BackendImpl& operator=(const BackendImpl&) = delete;

  std::shared_ptr<RegistryImpl> registry;
  const Framework* framework;
  const pcy_framework_api* api;
  uint32_t device;
  std::string name;
  Selection selection;
  pcy_context context = nullptr;
  pcy_queue queue = nullptr;
  std::atomic<uint64_t> fallbacks{0};

  void finish();
  // The device reads host memory at full speed (a CPU, or host_unified): aliasing pays off.
  bool shares_host_memory() const noexcept { return shares_host_; }
  detail::BoundOp& op(const OpKey& key);
  pcy_bundle_context bundle_context(const BundleInfo& bundle);
  std::weak_ptr<BackendImpl> self;

private:
  void resolve(detail::BoundOp& op, const OpKey& key);
  std::vector<std::unique_ptr<detail::BoundOp>> ops_;
  std::vector<std::pair<const BundleInfo*, pcy_bundle_context>> bundle_contexts_;
  std::mutex mutex_; // guards resolution and bundle contexts (slow path only)
  bool shares_host_ = false;
};

} // namespace v1
} // namespace parenchyma
