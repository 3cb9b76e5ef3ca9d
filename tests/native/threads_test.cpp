// The native plugin's thread rules, checked under load (plugins/native/native.hpp):
//  - calls that enqueue on one queue come from one thread at a time, but queue_finish and event
//    waits may come from other threads at the same time and wait for the work enqueued before;
//  - a queue or event may be destroyed the moment finish or wait returns, and an event may be
//    destroyed before it completed;
//  - alloc, free, import and queue creation on one context may come from several threads at once.
// Worker threads never use Catch2 (not thread-safe in v2): they count failures, checked after join.
#include "support/catch.hpp"

#include <parenchyma/abi/pcy_framework.h>
#include <parenchyma/sdk/host.hpp>

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace host = parenchyma::sdk::host;

namespace {

// Above the plugin's 1 MiB inline threshold: such a non-blocking operation goes to the pool.
constexpr uint64_t pool_bytes = uint64_t{2} << 20;

const pcy_framework_api& plugin_api() {
  static const pcy_framework_api* api = [] {
    void* lib = ::dlopen(PCY_NATIVE_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "cannot load %s: %s\n", PCY_NATIVE_PLUGIN, ::dlerror());
      std::exit(1);
    }
    auto entry = reinterpret_cast<pcy_framework_entry_fn>(::dlsym(lib, PCY_FRAMEWORK_ENTRY_SYMBOL));
    if (entry == nullptr) {
      std::fprintf(stderr, "%s has no %s\n", PCY_NATIVE_PLUGIN, PCY_FRAMEWORK_ENTRY_SYMBOL);
      std::exit(1);
    }
    return entry();
  }();
  return *api;
}

pcy_host_services quiet_services() {
  pcy_host_services s{};
  s.struct_size = sizeof s;
  s.host_abi_major = PCY_ABI_VERSION_MAJOR;
  s.host_abi_minor = PCY_ABI_VERSION_MINOR;
  s.log = [](void*, pcy_log_level, const char*, const char*) {};
  s.log_level = PCY_LOG_ERROR;
  return s;
}

// One plugin instance and one context on the CPU.
struct native_env {
  native_env() : services(quiet_services()), fw(&plugin_api(), &services) {
    const uint32_t dev = 0;
    ctx = host::make_context(fw, std::span<const uint32_t>(&dev, 1));
  }
  pcy_host_services services;
  host::framework fw;
  host::context ctx;
  const pcy_framework_api& api() const { return fw.api(); }
};

host::memory import_host(const native_env& e, void* p, uint64_t bytes) {
  pcy_memory_handle h{};
  h.struct_size = sizeof h;
  h.kind = PCY_HANDLE_HOST_POINTER;
  h.host_pointer = p;
  h.bytes = bytes;
  pcy_memory_import_args a{};
  a.struct_size = sizeof a;
  a.context = e.ctx.get();
  a.device = 0;
  a.handle = &h;
  host::check(e.api().memory_import(&a));
  return {a.memory, e.api().memory_free};
}

void* host_pointer(const native_env& e, pcy_memory m) {
  pcy_native_handle_args a{};
  a.struct_size = sizeof a;
  a.object = PCY_NATIVE_MEMORY;
  a.memory = m;
  host::check(e.api().native_handle(&a));
  return a.handle;
}

host::event record(const native_env& e, pcy_queue q) {
  pcy_event ev = nullptr;
  host::check(e.api().event_record(q, &ev));
  return {ev, e.api().event_destroy};
}

void fill_byte(const native_env& e, pcy_queue q, pcy_memory m, uint64_t bytes, unsigned char v) {
  host::fill(e.fw, q, m, 0, bytes, &v, 1);
}

// Every 4 KiB page and the last byte hold v (a full scan is slow under ThreadSanitizer).
bool all_bytes(const void* p, uint64_t bytes, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (uint64_t i = 0; i < bytes; i += 4096)
    if (b[i] != v) return false;
  return b[bytes - 1] == v;
}

// Runs fn(i) on n threads at once; returns the failures they counted (with the first message).
struct failures {
  std::atomic<int> count{0};
  std::mutex mu;
  std::string first;
  void add(const std::string& what) {
    if (count.fetch_add(1) == 0) {
      std::lock_guard lock(mu);
      first = what;
    }
  }
};
void run_threads(int n, failures& f, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        fn(i);
      } catch (const std::exception& e) {
        f.add(e.what());
      }
    });
  for (auto& t : threads)
    t.join();
}

} // namespace

TEST_CASE("short-lived queues on one context, from several threads at once") {
  native_env e;
  failures f;
  constexpr int threads = 4, rounds = 60;
  run_threads(threads, f, [&](int t) {
    std::vector<unsigned char> src(pool_bytes), dst(pool_bytes);
    for (int r = 0; r < rounds; ++r) {
      const auto v = static_cast<unsigned char>(t * rounds + r);
      std::memset(src.data(), v, src.size());
      host::queue q = host::make_queue(e.fw, e.ctx.get(), 0);
      host::memory m = host::alloc(e.fw, e.ctx.get(), 0, pool_bytes);
      host::memory out = import_host(e, dst.data(), dst.size());
      host::write(e.fw, q.get(), m.get(), 0, src.data(), pool_bytes, false); // to the pool
      host::copy(e.fw, q.get(), m.get(), 0, out.get(), 0, pool_bytes);       // queued behind it
      // Some rounds finish at once (the work still runs), some once the pool is done with it
      // (the lock-free idle path), some in between.
      if (r % 3 == 1) {
        host::event ev = record(e, q.get());
        host::check(e.api().event_wait(ev.get()));
      } else if (r % 3 == 2) {
        std::this_thread::sleep_for(std::chrono::microseconds(200 * (r % 7)));
      }
      host::finish(e.fw, q.get());
      q.reset(); // destroyed right after finish, while a worker may be leaving the queue
      if (!all_bytes(dst.data(), dst.size(), v)) f.add("copy did not arrive before finish");
      out.reset();
      m.reset();
    }
  });
  INFO(f.first);
  CHECK(f.count == 0);
}

TEST_CASE("queue_finish from a second thread while the first enqueues") {
  native_env e;
  host::queue q = host::make_queue(e.fw, e.ctx.get(), 0);
  constexpr int slots = 24;
  std::vector<host::memory> mem;
  for (int i = 0; i < slots; ++i)
    mem.push_back(host::alloc(e.fw, e.ctx.get(), 0, pool_bytes));
  host::memory scratch = host::alloc(e.fw, e.ctx.get(), 0, 4096);
  std::atomic<int> published{0}; // slots whose fill was enqueued
  std::atomic<bool> stop{false};
  std::atomic<int> checks{0};
  failures f;
  run_threads(2, f, [&](int t) {
    if (t == 0) { // the enqueuing thread: each slot filled once, small work in between
      for (int i = 0; i < slots; ++i) {
        fill_byte(e, q.get(), mem[i].get(), pool_bytes, static_cast<unsigned char>(i + 1));
        fill_byte(e, q.get(), scratch.get(), 4096, static_cast<unsigned char>(i));
        published.store(i + 1, std::memory_order_release);
        if (i % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
      }
      stop.store(true);
      return;
    }
    // The other thread: finish must cover every fill enqueued before it was called.
    for (;;) {
      const bool last = stop.load();
      const int n = published.load(std::memory_order_acquire);
      if (n > 0) {
        host::finish(e.fw, q.get());
        if (!all_bytes(host_pointer(e, mem[n - 1].get()), pool_bytes,
                       static_cast<unsigned char>(n)))
          f.add("slot " + std::to_string(n - 1) + " not filled when finish returned");
        ++checks;
      }
      if (last) break;
    }
  });
  host::finish(e.fw, q.get());
  INFO(f.first);
  CHECK(f.count == 0);
  CHECK(checks > 0);
}

TEST_CASE("events recorded on one thread, waited and destroyed on another") {
  native_env e;
  constexpr int rounds = 200, slots = 4;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<host::event> channel;
  bool closed = false;
  failures f;
  run_threads(2, f, [&](int t) {
    if (t == 0) { // enqueues, records, hands the event over
      host::queue q = host::make_queue(e.fw, e.ctx.get(), 0);
      std::vector<host::memory> mem;
      for (int i = 0; i < slots; ++i)
        mem.push_back(host::alloc(e.fw, e.ctx.get(), 0, pool_bytes));
      for (int r = 0; r < rounds; ++r) {
        fill_byte(e, q.get(), mem[r % slots].get(), pool_bytes, static_cast<unsigned char>(r));
        host::event ev = record(e, q.get());
        if (r % 5 == 4) continue; // destroyed here, before it may have completed
        {
          std::lock_guard lock(mu);
          channel.push_back(std::move(ev));
        }
        cv.notify_one();
      }
      host::finish(e.fw, q.get());
      q.reset(); // events from it may still be waited on
      {
        std::lock_guard lock(mu);
        closed = true;
      }
      cv.notify_one();
      return;
    }
    for (;;) { // waits, then destroys at once
      host::event ev;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return closed || !channel.empty(); });
        if (channel.empty()) break;
        ev = std::move(channel.front());
        channel.pop_front();
      }
      host::check(e.api().event_wait(ev.get()));
      ev.reset();
    }
  });
  INFO(f.first);
  CHECK(f.count == 0);
}
