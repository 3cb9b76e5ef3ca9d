// parenchyma core, private: the state behind Registry, Backend and TensorStorage.
//
// Ownership: a Registry owns a RegistryImpl (plugins, config, report). A DeviceContext (one
// plugin context on one device, shared by every backend and tensor slot on that device) keeps
// the RegistryImpl alive; a BackendImpl (one queue, its bundle contexts and its resolved ops)
// keeps its DeviceContext alive. So plugins are shut down only after the last backend and the
// last tensor slot are gone, whatever order the user destroys things in.
#pragma once

#include <parenchyma/backend.hpp>
#include <parenchyma/registry.hpp>
#include <parenchyma/shared_tensor.hpp>

#include "os.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
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
// The host's progress service (1.4): a plugin's step of slow work shows on the progress line of
// the thread waiting for it (WaitProgress in backend.cpp), when there is one.
void plugin_progress(void* user, const char* step) noexcept;

// ---- text helpers (config.cpp) ---------------------------------------------------------------
// At most `max` bytes of `text`, control bytes escaped, "..." appended when cut: what an error
// message may quote of a value that came from outside.
std::string quote_prefix(std::string_view text, size_t max = 60);
// [a-z0-9_]+, at most 64 bytes: plugin, framework, extension and op names.
bool valid_name(std::string_view s) noexcept;

// ---- config and selection strings (config.cpp) ----------------------------------------------
// Reads a JSON config file over `base`: keys it sets replace base's. Throws errc::config naming
// the file and the key; never anything else. Only regular files of at most max_config_bytes are
// read (a directory, FIFO or device is refused without blocking).
inline constexpr uint64_t max_config_bytes = 1u << 20;
inline constexpr int max_config_depth = 16;
Config read_config(const std::filesystem::path& file, Config base);
// The same over text already in memory (the fuzz target uses this).
Config parse_config(std::string_view text, const std::string& origin, Config base);

struct SelectItem {
  std::string name;
  std::optional<uint32_t> device;
  bool deny = false;
};
// Parses "cuda:1,opencl,!native". `origin` names where it came from (for the error message);
// an entry that is not a name gets a "did you mean" from `known` (the frameworks present), or
// its lower-case spelling where that is a name.
std::vector<SelectItem> parse_selection(std::string_view text, std::string_view origin,
                                        const std::vector<std::string>& known = {});
// The entry of `known` that `name` most likely meant: the same name in another case, else the
// nearest within a small edit distance (transpositions count one). Empty when none is close.
std::string closest_name(std::string_view name, const std::vector<std::string>& known);
// "did you mean \"x\"?" for closest_name, or "" when there is none.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& known);

// ---- use after fork (fork.cpp) ---------------------------------------------------------------
// Counts the forks this process descends from (a pthread_atfork child handler adds one). A
// registry records the count when it is made; when it differs, the registry and everything
// made from it (contexts, backends, tensor slots) came from a parent process: every use raises
// errc::unavailable naming fork and the fix, and destructors skip their plugin calls. A child
// forked while a registry existed refuses new registries too (the drivers it would load again
// are the parent's, already initialised: PoCL then hangs); one forked while none existed makes
// its own.
extern std::atomic<uint32_t> fork_generation;
[[noreturn]] void refuse_after_fork(const char* what);
inline uint32_t current_fork_generation() noexcept {
  return fork_generation.load(std::memory_order_relaxed);
}
// A registry being made (RegistryImpl's member initialiser): refused in a child forked while a
// registry existed; else counted, and the fork count returned.
uint32_t registry_opening();

// ---- the plugin boundary (registry.cpp) ------------------------------------------------------
// Plugin lifecycle calls (load, initialize, probe, device queries, context creation and
// destruction, shutdown, unload) never run concurrently anywhere in the process: some drivers
// (PoCL's device query, seen crashing) are not safe to initialise from two threads at once.
std::mutex& plugin_lifecycle_mutex() noexcept;

// Upper bounds on what a plugin may hand back; beyond them it is refused, not trusted.
inline constexpr uint32_t max_devices = 256;
inline constexpr size_t max_properties = 1024;
inline constexpr size_t max_ops = 4096;
inline constexpr size_t max_struct_stride = 4096;

struct BoundOp;
struct ArgRule;
struct Recorder;

} // namespace detail

class DeviceContext;

// One op a bundle serves, checked at load: its descriptor and its argument rules (from its
// schema when it has one, else from its signature).
struct OpEntry {
  const pcy_op_desc* desc = nullptr;
  std::vector<detail::ArgRule> rules;
  const pcy_op_schema* schema = nullptr;
};

struct RegistryImpl : std::enable_shared_from_this<RegistryImpl> {
  RegistryOptions options;
  Config config;
  std::vector<std::filesystem::path> search_path;
  std::vector<LoadReportEntry> report;
  std::vector<std::string> notices;
  std::vector<std::unique_ptr<Framework>> frameworks;
  std::vector<std::unique_ptr<BundleInfo>> bundles;
  // Normalised copies of plugin tables (absent slots zeroed), parallel to frameworks/bundles.
  std::vector<std::unique_ptr<pcy_framework_api>> framework_tables;
  std::vector<std::unique_ptr<pcy_bundle_api>> bundle_tables;
  std::vector<sdk::os::library> libraries;
  // Checked ops per bundle (parallel to bundles).
  std::vector<std::vector<OpEntry>> bundle_ops;
  pcy_host_services host{};
  std::string cache_dir;
  bool secure = false;                                   // set-uid: environment overrides ignored
  uint32_t fork_generation = detail::registry_opening(); // fork.cpp
  Registry* owner = nullptr;                             // the Registry object this belongs to

  // PARENCHYMA_BACKEND as parsed at load (or the error that parsing it gave).
  std::optional<std::string> env_backend;
  std::vector<detail::SelectItem> env_items;
  std::optional<error> env_backend_error;

  // Answers to pcy_host_services::setting, kept until the registry goes (their lifetime).
  std::mutex settings_mutex;
  std::map<std::string, std::optional<std::string>> settings_asked;
  const char* setting(const char* name);

  std::mutex contexts_mutex;
  std::map<std::pair<const Framework*, uint32_t>, std::weak_ptr<DeviceContext>> contexts;

  // Fallback warnings logged so far ("op from -> to"): each once per registry, however many
  // backends resolve the op (a program that probes with one backend and runs with another
  // logged it twice).
  std::mutex warned_mutex;
  std::set<std::string> warned;

  explicit RegistryImpl(RegistryOptions opts);
  ~RegistryImpl();
  void load();
  std::optional<std::string> env(const char* name) const;
  // The shared context of one device (position in fw.devices()): made on first use.
  std::shared_ptr<DeviceContext> context_for(const Framework& fw, uint32_t device);
  // The load stages after the library was opened: prefix, version, name, then the framework or
  // bundle stages. False when the plugin was refused (`e` says why). Also the fuzz target's door.
  bool load_table(const std::filesystem::path& path, const void* table, bool is_framework,
                  LoadReportEntry& e);
  // Every device, best first, leaving out the denied frameworks.
  std::vector<RankedDevice> device_ranking(const std::vector<std::string>& deny) const;
  std::vector<const Framework*> ranking() const;
  Selection select(std::string_view request) const;
  // The frameworks denied by the configuration and the environment (never used at all).
  std::vector<std::string> standing_denials() const;
  // How many op cells the framework's bundles serve, per extension.
  std::map<std::string, size_t> coverage(const Framework& fw) const;

private:
  // The stages of load (registry.cpp).
  void read_configuration(const std::filesystem::path& libdir);
  void set_up_host();
  std::vector<std::filesystem::path> find_candidates(const std::filesystem::path& libdir);
  void note_shadowed_ops();
  void load_candidate(const std::filesystem::path& path);
  bool load_framework(const std::filesystem::path& path, const void* table,
                      const pcy_plugin_prefix& prefix, LoadReportEntry& e);
  bool load_bundle(const std::filesystem::path& path, const void* table,
                   const pcy_plugin_prefix& prefix, LoadReportEntry& e);
  std::optional<Device> describe_device(const pcy_framework_api& t, pcy_plugin plugin, uint32_t d,
                                        std::string& why);
  void add_report(LoadReportEntry entry);
  void note(std::string text);
};

namespace detail {
// The check on the paths that use a backend: one relaxed load and a compare, no system call.
inline bool inherited(const RegistryImpl& r) noexcept {
  return r.fork_generation != current_fork_generation();
}
inline void check_fork(const RegistryImpl& r, const char* what) {
  if (inherited(r)) [[unlikely]]
    refuse_after_fork(what);
}
// A registry going (its destructor's first step): uncounted; a forked child's copy of a parent's
// registry keeps its libraries loaded for good and returns true (nothing is torn down).
bool registry_closing(RegistryImpl& r) noexcept;
// Host access to a tensor (TensorStorage::Impl) whose slots or in-flight backends came from a
// parent process: refused. Scans only in a process that was forked.
template <class TensorImpl> void check_fork_of(const TensorImpl& t, const char* what) {
  if (current_fork_generation() == 0) [[likely]]
    return;
  for (const auto& s : t.slots)
    if (s.ctx && inherited(*s.ctx->registry)) refuse_after_fork(what);
  for (const auto& b : t.in_flight)
    if (inherited(*b->registry)) refuse_after_fork(what);
}
} // namespace detail

// One plugin context on one device: shared by every backend made for that device from one
// registry, and by the tensor slots allocated in it. Thread-safe: context-level plugin calls
// may come from any thread (the ABI requires plugins to allow it).
class DeviceContext {
public:
  DeviceContext(std::shared_ptr<RegistryImpl> registry, const Framework& fw, uint32_t position);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  std::shared_ptr<RegistryImpl> registry;
  const Framework* framework;
  const pcy_framework_api* api;
  uint32_t position;      // index in framework->devices()
  uint32_t plugin_device; // the plugin's own index of the device
  std::string name;       // "opencl:0"
  pcy_context context = nullptr;
  bool shares_host = false; // the device reads host memory at full speed: aliasing pays off

  // Reads into host memory that no backend's queue orders (a tensor read on the host after
  // its writers were settled) go through a queue of the context's own, one call at a time.
  template <class F> void with_transfer_queue(F&& f) {
    std::lock_guard<std::mutex> lock(transfer_mutex_);
    if (transfer_queue_ == nullptr) make_transfer_queue();
    f(transfer_queue_);
  }

private:
  void make_transfer_queue();
  std::mutex transfer_mutex_;
  pcy_queue transfer_queue_ = nullptr;
};

namespace detail {

// What one argument of an op must be, checked on every call (a few byte compares).
struct ArgRule {
  uint8_t kind = 0;   // pcy_schema_kind
  uint8_t intent = 0; // TENSOR: pcy_arg_intent or PCY_SCHEMA_INTENT_OVERWRITE
  uint8_t dtype = 0;  // TENSOR: PCY_SCHEMA_DTYPE_OP or a fixed dtype
  int8_t rank = PCY_SCHEMA_RANK_ANY;
  const char* name = nullptr; // from the schema; nullptr for a 1.0 key (then "#i")
  // Decided once at resolution, so the per-call check is one load and two compares per
  // argument: the (kind, intent) pair of an OpArg as one 64-bit value, and the (at most two)
  // pairs the rule takes. Non-tensor OpArgs carry intent IN, as OpArg's factories make them.
  uint64_t accept_a = ~uint64_t{0}, accept_b = ~uint64_t{0};
  uint8_t want_dtype = 0; // the dtype a tensor (or scalar tensor) must have
  uint8_t extra = 0;      // bit 0: check the rank; bit 1: a scalar tensor (one element)
};
constexpr uint64_t arg_pair(uint32_t kind, uint32_t intent) noexcept {
  return static_cast<uint64_t>(kind) | (static_cast<uint64_t>(intent) << 32);
}
inline constexpr size_t max_op_args = 24;

struct BoundOp {
  enum class state : uint8_t { ready, failed } st = state::failed;
  pcy_op_fn fn = nullptr;
  pcy_bundle_context bundle = nullptr;
  BackendImpl* target = nullptr; // where it runs (this backend or one of its fallbacks)
  uint32_t arg_count = 0;
  bool needs_ext = false; // some argument is an int array: the call carries arg_ext
  // Some tensor argument may be passed OUT (write-only): its sync is deferred until every
  // argument passed the check, so a refused call leaves it as it was. IN and INOUT syncs keep
  // the data wherever they run; ops with only those sync as they check.
  bool defer_sync = false;
  std::array<ArgRule, max_op_args> rules{};
  OpRoute route;
  std::string failure; // why it cannot run (state::failed)
  errc failure_code = errc::unsupported;
  // Set after the first call returned: that call shows a progress line when it is slow (a
  // library compiling its kernels at first use, as CLBlast does).
  std::atomic<bool> warm{false};
};

// The rules of a schema or of a 1.0 signature; nullopt when either is malformed.
std::optional<std::vector<ArgRule>> rules_of(const pcy_op_schema& schema);
std::optional<std::vector<ArgRule>> rules_of(std::string_view signature);
// Whether a bundle's op (rules from its schema or signature) takes what the key's rules pass.
bool compatible(const std::vector<ArgRule>& bundle, const std::vector<ArgRule>& key) noexcept;

} // namespace detail

// One op workspace allocation (pcy_op_call::workspace): shared by its backend and by the
// framework graphs whose captured ops were handed it (their device pointer is baked in).
struct WorkspaceBuffer {
  const pcy_framework_api* api = nullptr;
  pcy_memory memory = nullptr;
  void* native = nullptr;
  uint64_t bytes = 0;
  WorkspaceBuffer() = default;
  WorkspaceBuffer(const WorkspaceBuffer&) = delete;
  WorkspaceBuffer& operator=(const WorkspaceBuffer&) = delete;
  ~WorkspaceBuffer() {
    if (memory != nullptr) api->memory_free(memory);
  }
};

// An op wrote a tensor in a device slot that stands apart from its imported host array: the
// result is copied back into the array on the op's queue right after the op (tensor.cpp).
struct Writeback {
  TensorStorage::Impl* tensor = nullptr;
  int slot = -1;
};

// The host's synchronisation count: bumped whenever the host waits for a queue or touches a
// tensor, so a device copy of an imported host array knows the program may have written the
// array since it was made (TensorStorage::Impl::external).
uint64_t host_epoch() noexcept;
void host_synchronised() noexcept;

class BackendImpl {
public:
  BackendImpl(std::shared_ptr<DeviceContext> device, Selection selection,
              std::vector<std::string> denied);
  ~BackendImpl();
  BackendImpl(const BackendImpl&) = delete;
  BackendImpl& operator=(const BackendImpl&) = delete;

  std::shared_ptr<DeviceContext> dev;
  std::shared_ptr<RegistryImpl> registry;
  const Framework* framework;
  const pcy_framework_api* api;
  uint32_t device; // position in framework->devices()
  std::string name;
  Selection selection;
  std::vector<std::string> denied; // never used for fallback
  pcy_context context = nullptr;
  pcy_queue queue = nullptr;
  std::atomic<uint64_t> fallbacks{0};
  std::weak_ptr<BackendImpl> self;
  // The graph being recorded on this backend (graph.cpp), or null: Backend::invoke tests it once.
  detail::Recorder* recorder = nullptr;

  void finish();
  // Tensors an op wrote whose imported host arrays want the result (see Writeback); filled while
  // an op's arguments are packed, emptied right after the op: by write_back() when it ran, by
  // drop_writebacks() when it did not.
  std::vector<Writeback> writebacks;
  void write_back();
  void drop_writebacks() noexcept { writebacks.clear(); }
  bool shares_host_memory() const noexcept { return dev->shares_host; }
  // The op workspace (pcy_op_call::workspace): one buffer per backend, grown on demand.
  static pcy_error* workspace(const pcy_op_call* call, uint64_t bytes, pcy_memory* memory,
                              void** native) noexcept;

  // The op's binding on this backend, resolved on first use. Lock-free once resolved: a
  // resolved op is published with release semantics and never changes again.
  detail::BoundOp& op(const OpKey& key) {
    const auto idx = static_cast<uint32_t>(key.index());
    if (idx < op_chunk * op_chunks) [[likely]]
      if (std::atomic<detail::BoundOp*>* chunk =
              chunks_[idx / op_chunk].load(std::memory_order_acquire))
        if (detail::BoundOp* bound = chunk[idx % op_chunk].load(std::memory_order_acquire))
            [[likely]]
          return *bound;
    return resolve_slow(key, idx);
  }

private:
  static constexpr uint32_t op_chunk = 256, op_chunks = 256; // 65536 op keys per process
  detail::BoundOp& resolve_slow(const OpKey& key, uint32_t idx);
  void resolve(detail::BoundOp& op, const OpKey& key);
  pcy_bundle_context bundle_context(const BundleInfo& bundle);
  BackendImpl& fallback_for(const Framework& fw, uint32_t device, const std::string& why);

  std::array<std::atomic<std::atomic<detail::BoundOp*>*>, op_chunks> chunks_{};
  std::vector<std::unique_ptr<std::atomic<detail::BoundOp*>[]>> chunk_storage_;
  std::vector<std::unique_ptr<detail::BoundOp>> bound_storage_;
  std::vector<std::pair<const BundleInfo*, pcy_bundle_context>> bundle_contexts_;
  // Backends of other frameworks this one borrows ops from (its own queues, not shared).
  std::vector<std::pair<const DeviceContext*, std::shared_ptr<BackendImpl>>> fallbacks_;
  std::mutex mutex_; // guards resolution, bundle contexts and fallbacks (slow path only)
  // Used by this backend's queue only: no lock. Graphs that captured it share it.
  std::shared_ptr<WorkspaceBuffer> workspace_;
};

// Empties a backend's write-back list when the op that filled it ends without running.
struct writeback_scope {
  BackendImpl& b;
  ~writeback_scope() {
    if (!b.writebacks.empty()) [[unlikely]]
      b.drop_writebacks();
  }
};

namespace detail {

// What a graph captured of one tensor (graph.cpp): the state it holds, the slot it saw, and how
// the recorded ops use it (the access of the first use; whether any use writes it).
struct GraphTensor {
  std::shared_ptr<TensorStorage::Impl> impl;
  uint64_t generation = 0;
  pcy_memory memory = nullptr;
  void* native = nullptr;
  access first = access::read;
  bool written = false;
  uint64_t valid_before = 0; // its coherence before recording (restored after)
  std::string op, arg;       // its first use, for errors
};

// One recorded call of a command list: a deep copy of the packed pcy_op_call, its internal
// pointers relinked into the vectors here (whose buffers never move once filled).
struct RecordedOp {
  std::string label; // "blas.axpy (f32)"
  pcy_op_fn fn = nullptr;
  pcy_op_call call{};
  std::vector<pcy_op_arg> args;
  std::vector<pcy_tensor> tensors; // parallel to args
  std::vector<pcy_op_arg_ext> exts;
  std::vector<std::vector<int64_t>> shapes, ints;
};

// The recording state of one backend, from Graph::record until it returns.
struct Recorder {
  BackendImpl* backend = nullptr;
  pcy_graph graph = nullptr; // the framework graph being captured; null: a command list
  std::vector<GraphTensor> tensors;
  std::vector<RecordedOp> ops; // command list only
  std::vector<std::string> labels;
  std::vector<std::shared_ptr<WorkspaceBuffer>> workspaces;
  bool capturing = false; // inside queue_capture_begin .. end (one op)
  std::string failure;    // a capture failed: the graph is unusable, the recording fails
};

// Records one call on a recording backend (backend.cpp): packs it as invoke does, then appends
// it to the command list or runs it under capture.
void record_op(BackendImpl& backend, const OpKey& key, BoundOp& op, std::span<const OpArg> args);

} // namespace detail

} // namespace v1
} // namespace parenchyma
