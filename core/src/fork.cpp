// parenchyma core: use after fork. A child process inherits the parent's plugins, contexts and
// queues, but not the threads behind them (driver worker threads, OpenMP pools), nor locks in a
// consistent state: its first op would wait forever (OpenCL in queue_finish, oneDNN in libgomp).
// So a child forked from a process that had created a registry refuses every use of the runtime
// with an error that names the cause and the fix, and its destructors leave plugin state alone
// (they leak what the parent owned instead of calling into it).
#include "internal.hpp"

#include <parenchyma/error.hpp>

#include <pthread.h>

#include <atomic>
#include <string>

namespace parenchyma {
inline namespace v1 {
namespace detail {

std::atomic<bool> runtime_forked{false};

namespace {

std::atomic<uint64_t> registries_created{0};

void on_fork_child() noexcept {
  if (registries_created.load(std::memory_order_relaxed) > 0)
    runtime_forked.store(true, std::memory_order_relaxed);
}

// Installed when the library loads; glibc removes it when the library is unloaded.
const int atfork_installed = ::pthread_atfork(nullptr, nullptr, &on_fork_child);

} // namespace

void refuse_after_fork(const char* what) {
  (void)atfork_installed;
  throw error(errc::unavailable, "parenchyma",
              std::string(what) +
                  " in a process forked from one that had created the parenchyma runtime: "
                  "devices, queues and plugin threads do not survive fork() (the child would "
                  "hang). Create the runtime only after fork(), or exec() in the child; in "
                  "Python, use multiprocessing's 'spawn' or 'forkserver' start method "
                  "(multiprocessing.get_context('spawn'))");
}

uint64_t registry_created() {
  if (runtime_forked.load(std::memory_order_relaxed)) [[unlikely]]
    refuse_after_fork("creating a Registry");
  return registries_created.fetch_add(1, std::memory_order_relaxed) + 1;
}

bool abandon_after_fork(std::vector<boost::dll::shared_library>& libraries) noexcept {
  if (!forked()) return false;
  // Never unloaded: unloading would run the drivers' teardown against the parent's state.
  try {
    new std::vector<boost::dll::shared_library>(std::move(libraries));
  } catch (...) {
  }
  return true;
}

} // namespace detail
} // namespace v1
} // namespace parenchyma
