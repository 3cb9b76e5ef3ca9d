// parenchyma mock plugin: in-order queues (synchronous, or on a thread of each queue's own with
// PARENCHYMA_MOCK_ASYNC=1, so that a host that forgets to wait reads stale bytes), events as
// tickets, transfers, fills and the add_one kernel.
#include "mock.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace parenchyma::mock {

queue_state::queue_state(bool async) {
  if (async) worker_ = std::thread([this] { run(); });
}

queue_state::~queue_state() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

uint64_t queue_state::submit(std::function<void()> job) {
  if (!worker_.joinable()) {
    // Synchronous: the job runs here; counted before and after, so a finish() from another
    // thread meanwhile waits for it.
    uint64_t ticket = 0;
    {
      std::lock_guard lock(mutex_);
      ticket = ++submitted_;
    }
    job();
    {
      std::lock_guard lock(mutex_);
      ++completed_;
    }
    cv_.notify_all();
    return ticket;
  }
  uint64_t ticket = 0;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
    ticket = ++submitted_;
  }
  cv_.notify_all();
  return ticket;
}

uint64_t queue_state::ticket() const {
  std::lock_guard lock(mutex_);
  return submitted_;
}

void queue_state::wait_for(uint64_t ticket) {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return completed_ >= ticket; });
}

void queue_state::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return; // stopped, and nothing left to run
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
    ++completed_;
    cv_.notify_all();
  }
}

void queue::finish() { state_->wait_for(state_->ticket()); }
event* queue::record() { return new event(state_, state_->ticket()); }

void queue::wait(event& e) {
  if (e.queue() == state_) return; // the same in-order queue: already ordered
  // This queue's later work waits for the event's point in the other queue.
  const uint64_t t = state_->submit([q = e.queue(), ticket = e.ticket()] { q->wait_for(ticket); });
  (void)t;
}

void queue::read(memory& m, uint64_t off, void* host, uint64_t bytes, bool blocking) {
  const std::byte* src = m.at(off, bytes, "read");
  if (host == nullptr && bytes != 0) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "read into NULL");
  const uint64_t t = state_->submit([=] { std::memcpy(host, src, bytes); });
  if (blocking) state_->wait_for(t);
}

void queue::write(memory& m, uint64_t off, const void* host, uint64_t bytes, bool blocking) {
  std::byte* dst = m.at(off, bytes, "write");
  if (host == nullptr && bytes != 0) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "write from NULL");
  const uint64_t t = state_->submit([=] { std::memcpy(dst, host, bytes); });
  if (blocking) state_->wait_for(t);
}

void queue::copy(memory& src, uint64_t so, memory& dst, uint64_t d, uint64_t bytes) {
  const std::byte* from = src.at(so, bytes, "copy source");
  std::byte* to = dst.at(d, bytes, "copy destination");
  state_->submit([=] { std::memmove(to, from, bytes); });
}

void queue::fill(memory& m, uint64_t off, uint64_t bytes, const void* pattern, uint32_t size) {
  std::byte* dst = m.at(off, bytes, "fill");
  std::array<std::byte, 16> p{}; // the pattern is copied before the call returns (abi.md H3)
  std::memcpy(p.data(), pattern, size);
  // PARENCHYMA_MOCK_BREAK=fill: the last pattern is left out, which the suite must catch.
  const uint64_t end = plugin_.config().broken == "fill" && bytes >= size ? bytes - size : bytes;
  state_->submit([=] {
    for (uint64_t i = 0; i < end; i += size)
      std::memcpy(dst + i, p.data(), size);
  });
}

void queue::launch(kernel& k, const pcy_kernel_launch_args& a) {
  if (k.name() != "add_one") sdk::fail(PCY_ERR_LAUNCH, sdk::str("mock has no kernel ", k.name()));
  if (a.arg_count != 2 || a.args == nullptr || a.args[0].kind != PCY_ARG_MEMORY ||
      a.args[0].memory == nullptr || a.args[1].kind != PCY_ARG_SCALAR ||
      a.args[1].size != sizeof(uint32_t) || a.args[1].value == nullptr)
    sdk::fail(PCY_ERR_LAUNCH, "add_one takes (memory x, uint32 n)");
  uint32_t n = 0;
  std::memcpy(&n, a.args[1].value, sizeof n);
  const uint64_t count = std::min<uint64_t>(a.global[0], n); // work-items beyond n do nothing
  auto& x = *reinterpret_cast<memory*>(a.args[0].memory);
  std::byte* base = x.at(0, count * sizeof(float), "add_one's x");
  state_->submit([=] {
    for (uint64_t i = 0; i < count; ++i) {
      float v = 0;
      std::memcpy(&v, base + i * sizeof v, sizeof v);
      v += 1.0f;
      std::memcpy(base + i * sizeof v, &v, sizeof v);
    }
  });
}

void* queue::native() {
  settings::offered(plugin_.config().natives, "native handles");
  return this;
}

} // namespace parenchyma::mock
