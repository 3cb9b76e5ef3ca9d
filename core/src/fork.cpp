// parenchyma core: use after fork. A child process inherits the parent's plugins, contexts and
// queues, but not the threads behind them (driver worker threads, the native plugin's pool,
// OpenMP's team under oneDNN), nor their locks in a consistent state: its first op would wait
// forever (OpenCL in queue_finish, native in libgomp). So each registry records how many forks
// its process descends from; in a child, a registry made before the fork and everything made
// from it refuse every use with an error that names the cause and the fix, and their
// destructors leave the plugin state alone (the child abandons what the parent owned instead of
// calling into it). A child forked while a registry existed refuses new registries as well:
// loading the plugins again would reuse the parent's initialised drivers (a fresh registry's
// first OpenCL op hangs in such a child). A child forked while none existed makes its own.
#include "internal.hpp"

#include <parenchyma/error.hpp>

#include <atomic>
#include <string>

namespace parenchyma {
inline namespace v1 {
namespace detail {

std::atomic<uint32_t> fork_generation{0};

namespace {

std::atomic<int64_t> live_registries{0};
std::atomic<bool> forked_with_registry{false};

void on_fork_child() noexcept {
  fork_generation.fetch_add(1, std::memory_order_relaxed);
  if (live_registries.load(std::memory_order_relaxed) > 0)
    forked_with_registry.store(true, std::memory_order_relaxed);
}

// Installed when the library loads; glibc drops it when the library is unloaded. (Windows has no
// fork: nothing to install there, and the count stays 0.)
const bool atfork_installed = os::on_fork_child(&on_fork_child);

} // namespace

void refuse_after_fork(const char* what) {
  (void)atfork_installed;
  throw error(errc::unavailable, "parenchyma",
              std::string(what) +
                  " in a process forked after the runtime was created: the parent's devices, "
                  "queues and plugin threads do not survive fork() (the child would hang). "
                  "Create the runtime (the first Registry or Backend) only after fork(), or "
                  "exec() in the child; in Python, use multiprocessing's 'spawn' or "
                  "'forkserver' start method (multiprocessing.get_context('spawn'))");
}

uint32_t registry_opening() {
  if (forked_with_registry.load(std::memory_order_relaxed)) [[unlikely]]
    refuse_after_fork("creating a Registry");
  live_registries.fetch_add(1, std::memory_order_relaxed);
  return current_fork_generation();
}

bool registry_closing(RegistryImpl& r) noexcept {
  live_registries.fetch_sub(1, std::memory_order_relaxed);
  if (!inherited(r)) return false;
  // Never unloaded: unloading would run the drivers' teardown against the parent's state.
  for (auto& lib : r.libraries)
    lib.leak();
  r.libraries.clear();
  return true;
}

} // namespace detail
} // namespace v1
} // namespace parenchyma
