// parenchyma native framework plugin: the host CPU as a device. Memory is aligned host memory,
// queues run their work in order on a plugin-wide thread pool, and host pointers are shared with
// other plugins without copying (export and import of PCY_HANDLE_HOST_POINTER).
#pragma once

#include <parenchyma/sdk/framework.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace parenchyma::native {

class plugin;
class context;

// A fixed pool of worker threads shared by every queue of the plugin.
class thread_pool {
public:
  explicit thread_pool(unsigned threads);
  ~thread_pool();
  void submit(std::function<void()> job);
  unsigned size() const noexcept { return static_cast<unsigned>(workers_.size()); }

private:
  void run();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

class memory {
public:
  memory(void* p, uint64_t bytes, bool owned) : ptr(p), size(bytes), owned_(owned) {}
  ~memory();
  memory(const memory&) = delete;
  memory& operator=(const memory&) = delete;
  bool export_to(pcy_handle_kind kind, pcy_memory_handle& h);
  void* native() { return ptr; }
  void check_range(uint64_t offset, uint64_t bytes, const char* what) const;

  void* ptr;
  uint64_t size;

private:
  bool owned_;
};

class event {
public:
  void wait();
  void signal();

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  friend class queue;
};

// An in-order queue: work runs one item at a time, in submission order, on the pool. Small
// operations on an idle queue run inline on the caller's thread (no thread hop).
class queue {
public:
  explicit queue(thread_pool& pool) : pool_(pool) {}
  ~queue();
  void finish();
  event* record();
  void wait(event& e);
  void read(memory& m, uint64_t off, void* host, uint64_t bytes, bool blocking);
  void write(memory& m, uint64_t off, const void* host, uint64_t bytes, bool blocking);
  void copy(memory& src, uint64_t so, memory& dst, uint64_t d, uint64_t bytes);
  void fill(memory& m, uint64_t off, uint64_t bytes, const void* pattern, uint32_t size);

private:
  void enqueue(std::function<void()> job, uint64_t bytes, bool blocking);
  void drain();
  void rethrow_failure();
  thread_pool& pool_;
  std::mutex mutex_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> jobs_;
  bool running_ = false;
  std::atomic<uint64_t> pending_{0};
  std::string failure_; // first failure of an asynchronous job, reported at the next sync
  std::atomic<bool> failed_{false};
};

class context {
public:
  explicit context(plugin& p) : plugin_(p) {}
  queue* create_queue(uint32_t device);
  memory* alloc(uint32_t device, uint64_t bytes, uint32_t flags);
  memory* import(uint32_t device, const pcy_memory_handle& h);

private:
  plugin& plugin_;
};

class plugin {
public:
  using context_type = context;
  using queue_type = queue;
  using event_type = event;
  using memory_type = memory;
  static constexpr const char* name = "native";
  static constexpr const char* version = "0.1.0";
  static constexpr const char* description =
      "the host CPU (aligned host memory, thread-pool queues)";

  explicit plugin(const pcy_host_services& host);
  uint32_t device_count() const noexcept { return 1; }
  const char* reason() const noexcept { return nullptr; }
  std::span<const pcy_property> properties(uint32_t device) const;
  context* create_context(std::span<const uint32_t> devices);

  thread_pool& pool() noexcept { return pool_; }
  const sdk::logger& log() const noexcept { return log_; }
  uint64_t memory_bytes() const noexcept { return memory_bytes_; }

private:
  sdk::logger log_;
  std::string cpu_name_, cpu_vendor_;
  uint64_t memory_bytes_ = 0;
  std::vector<pcy_property> props_;
  thread_pool pool_;
};

} // namespace parenchyma::native
