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

void event::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return done_; });
}

void event::signal() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

queue::~queue() {
  try {
    finish();
  } catch (...) {
    // Destruction waits for the work; a failure was already reported or is moot.
  }
}

void queue::rethrow_failure() {
  if (failure_.empty()) return;
  std::string f = std::move(failure_);
  failure_.clear();
  failed_.store(false, std::memory_order_release);
  sdk::fail(PCY_ERR_DEVICE, "an earlier asynchronous operation failed: " + f);
}

void queue::finish() {
  // The per-op fast path: an idle queue with nothing to report takes no lock.
  if (pending_.load(std::memory_order_acquire) == 0 && !failed_.load(std::memory_order_acquire))
    return;
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [this] { return jobs_.empty() && !running_; });
  rethrow_failure();
}

void queue::drain() {
  for (;;) {
    std::function<void()> job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (jobs_.empty()) {
        running_ = false;
        idle_cv_.notify_all();
        return;
      }
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      job();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_.empty()) failure_ = e.what();
      failed_.store(true, std::memory_order_release);
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void queue::enqueue(std::function<void()> job, uint64_t bytes, bool blocking) {
  if (pending_.load(std::memory_order_acquire) == 0 && (blocking || bytes < inline_bytes)) {
    job(); // idle queue: nothing to order against
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
    pending_.fetch_add(1, std::memory_order_acq_rel);
    if (!running_) {
      running_ = true;
      pool_.submit([this] { drain(); });
    }
  }
  if (blocking) finish();
}

event* queue::record() {
  auto* e = new event();
  if (pending_.load(std::memory_order_acquire) == 0) {
    e->signal();
    return e;
  }
  enqueue([e] { e->signal(); }, inline_bytes, false);
  return e;
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
