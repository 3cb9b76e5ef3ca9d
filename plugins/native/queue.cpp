// parenchyma native plugin: the thread pool, in-order queues on it, and events.
#include "native.hpp"

#include <cstring>

namespace parenchyma::native {

namespace {
// Below this size an operation on an idle queue runs inline: a thread hop costs more than it.
constexpr uint64_t inline_bytes = uint64_t{1} << 20;
} // namespace

thread_pool::thread_pool(unsigned threads) {
  workers_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i)
    workers_.emplace_back([this] { run(); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_)
    t.join();
}

void thread_pool::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void thread_pool::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

void queue_state::wait_for(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  ++waiters_;
  idle_cv_.wait(lock, [&] { return completed_.load(std::memory_order_relaxed) >= ticket; });
  --waiters_;
}

void queue_state::drain() {
  // Idleness is decided, and waiters are woken, under the lock: a waiter returns only after this
  // thread let go of it. The state outlives the queue while this job holds it (see native.hpp).
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (jobs_.empty()) {
      running_ = false;
      return;
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    std::string failure;
    try {
      job();
    } catch (const std::exception& e) {
      failure = e.what();
      if (failure.empty()) failure = "unknown error";
    } catch (...) {
      failure = "unknown error";
    }
    job = nullptr; // what the job captured goes before the lock is taken again
    lock.lock();
    if (!failure.empty()) {
      if (failure_.empty()) failure_ = std::move(failure);
      failed_.store(true, std::memory_order_release);
    }
    completed_.fetch_add(1, std::memory_order_release);
    if (waiters_ != 0) idle_cv_.notify_all();
  }
}

queue::~queue() {
  try {
    finish();
  } catch (...) {
    // Destruction waits for the work; a failure was already reported or is moot.
  }
}

void queue::finish() {
  queue_state& s = *state_;
  const uint64_t ticket = s.submitted_.load(std::memory_order_acquire);
  // The per-op fast path: an idle queue with nothing to report takes no lock.
  if (s.done(ticket) && !s.failed_.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> lock(s.mutex_);
  ++s.waiters_;
  s.idle_cv_.wait(lock, [&] { return s.completed_.load(std::memory_order_relaxed) >= ticket; });
  --s.waiters_;
  if (s.failure_.empty()) return;
  std::string f = std::move(s.failure_);
  s.failure_.clear();
  s.failed_.store(false, std::memory_order_release);
  lock.unlock();
  sdk::fail(PCY_ERR_DEVICE, "an earlier asynchronous operation failed: " + f);
}

void queue::enqueue(std::function<void()> job, uint64_t bytes, bool blocking) {
  queue_state& s = *state_;
  // Only the enqueuing thread writes submitted_, so its own load needs no ordering.
  const uint64_t submitted = s.submitted_.load(std::memory_order_relaxed);
  if (s.done(submitted) && (blocking || bytes < inline_bytes)) {
    job(); // idle queue: nothing to order against
    return;
  }
  bool start = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex_);
    s.jobs_.push_back(std::move(job));
    s.submitted_.store(submitted + 1, std::memory_order_release);
    if (!s.running_) start = s.running_ = true;
  }
  if (start) pool_.submit([st = state_] { st->drain(); });
  if (blocking) finish();
}

event* queue::record() {
  // An event is a ticket: it is complete once the queue has run every job submitted before it.
  return new event(state_, state_->submitted_.load(std::memory_order_relaxed));
}

void queue::wait(event& e) {
  // Ordering on the host is stronger than needed, and always correct.
  e.wait();
}

void queue::read(memory& m, uint64_t off, void* host, uint64_t bytes, bool blocking) {
  m.check_range(off, bytes, "read");
  const char* src = static_cast<const char*>(m.ptr) + off;
  if (src == host) return enqueue([] {}, 0, blocking);
  enqueue([=] { std::memcpy(host, src, bytes); }, bytes, blocking);
}

void queue::write(memory& m, uint64_t off, const void* host, uint64_t bytes, bool blocking) {
  m.check_range(off, bytes, "write");
  char* dst = static_cast<char*>(m.ptr) + off;
  if (dst == host) return enqueue([] {}, 0, blocking);
  enqueue([=] { std::memcpy(dst, host, bytes); }, bytes, blocking);
}

void queue::copy(memory& src, uint64_t so, memory& dst, uint64_t d, uint64_t bytes) {
  src.check_range(so, bytes, "copy source");
  dst.check_range(d, bytes, "copy destination");
  const char* s = static_cast<const char*>(src.ptr) + so;
  char* t = static_cast<char*>(dst.ptr) + d;
  enqueue([=] { std::memmove(t, s, bytes); }, bytes, false);
}

void queue::fill(memory& m, uint64_t off, uint64_t bytes, const void* pattern, uint32_t size) {
  m.check_range(off, bytes, "fill");
  if (size != 1 && size != 2 && size != 4 && size != 8 && size != 16)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str("fill pattern of ", size, " bytes (1, 2, 4, 8 or 16)"));
  unsigned char pat[16];
  std::memcpy(pat, pattern, size);
  char* dst = static_cast<char*>(m.ptr) + off;
  enqueue(
      [=] {
        if (size == 1) {
          std::memset(dst, pat[0], bytes);
          return;
        }
        for (uint64_t i = 0; i < bytes; i += size)
          std::memcpy(dst + i, pat, size);
      },
      bytes, false);
}

} // namespace parenchyma::native
