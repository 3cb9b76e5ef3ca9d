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

// What a queue's pool work touches: its jobs, its counters and the lock and condition variable
// that guard them. Shared by the queue, its events and a drain job on the pool, so that a caller
// may destroy the queue (or an event) the moment finish() (or wait()) returns while a worker is
// still leaving drain(): nothing a worker touches is freed under it.
// submitted_ counts jobs handed to the pool (written by the enqueuing thread, under mutex_),
// completed_ the jobs the pool has run (written by the worker, under mutex_). The queue is idle
// when they are equal; an acquire load of completed_ sees every effect of the jobs it counts,
// which is what lets the per-op fast path take no lock.
class queue_state {
public:
  bool done(uint64_t ticket) const noexcept {
    return completed_.load(std::memory_order_acquire) >= ticket;
  }
  void wait_for(uint64_t ticket); // blocks until job number `ticket` and all before it have run
  void drain();                   // the pool job: runs the queued jobs in order

private:
  friend class queue;
  std::mutex mutex_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> jobs_; // guarded by mutex_
  bool running_ = false;                   // a drain job is on the pool; guarded by mutex_
  unsigned waiters_ = 0;                   // threads in wait_for; guarded by mutex_
  std::string failure_; // first failure of a pool job, reported at the next sync; guarded
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<bool> failed_{false};
};

// An event: the point of its queue's work at which it was recorded.
class event {
public:
  event(std::shared_ptr<queue_state> s, uint64_t ticket) : state_(std::move(s)), ticket_(ticket) {}
  void wait() {
    if (!state_->done(ticket_)) state_->wait_for(ticket_);
  }

private:
  std::shared_ptr<queue_state> state_;
  uint64_t ticket_;
};

// An in-order queue: work runs one item at a time, in submission order, on the pool. Small
// operations on an idle queue run inline on the caller's thread (no thread hop).
// Threads: calls that enqueue (read, write, copy, fill, record, wait) come from one thread at a
// time; finish() and event waits may come from other threads at the same time and wait for at
// least the work enqueued before they were called.
class queue {
public:
  explicit queue(thread_pool& pool) : pool_(pool), state_(std::make_shared<queue_state>()) {}
  ~queue();
  PCY_SDK_QUEUE_MEMBERS(memory, event);

private:
  void enqueue(std::function<void()> job, uint64_t bytes, bool blocking);
  thread_pool& pool_;
  std::shared_ptr<queue_state> state_;
};

class context {
public:
  PCY_SDK_CONTEXT_MEMBERS(context, plugin, queue, memory); // one device: the CPU
  memory* import(uint32_t device, const pcy_memory_handle& h);

private:
  plugin& plugin_;
};

// One device, the host CPU; no reason() (it always has it).
class plugin : public sdk::framework_plugin<context, queue, event, memory> {
public:
  static constexpr sdk::plugin_info info{"native", "0.1.0",
                                         "the host CPU (aligned host memory, thread-pool queues)"};

  explicit plugin(const pcy_host_services& host);

  thread_pool& pool() noexcept { return pool_; }
  uint64_t memory_bytes() const noexcept { return memory_bytes_; }

private:
  uint64_t memory_bytes_ = 0;
  thread_pool pool_;
};

} // namespace parenchyma::native
