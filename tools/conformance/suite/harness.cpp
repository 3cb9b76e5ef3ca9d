// parenchyma-conformance: the harness behind PCY_CHECK / PCY_REQUIRE / skip() (harness.hpp).
#include "harness.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>

namespace parenchyma::conformance {

namespace {

// A case with thousands of wrong elements keeps the first of them; the count is exact.
constexpr size_t kept_failures = 30;

// Passed checks are counted without the lock: a case checks millions of elements, and a mutex
// per element cost more than the op under test under ThreadSanitizer (half of the BLAS suite's
// time there, 2026-12-07). Failures, notes and the case pointer stay under the lock.
struct running_case {
  std::mutex mutex;
  case_result* result = nullptr;
  std::atomic<bool> active{false};
  std::atomic<uint64_t> passed{0};
  std::atomic<uint64_t> flushed{0}; // of `passed`: those only the f32 flush rule let through
  std::atomic<bool> flush_rule{false};
};
running_case& current() {
  static running_case c; // one case runs at a time; checks from its threads meet here
  return c;
}
// Context lines per thread, as each thread of a case sees its own scope.
thread_local std::vector<std::string> info_stack;

std::string base_name(const char* file) {
  const std::string_view f(file);
  const size_t slash = f.rfind('/');
  return std::string(slash == std::string_view::npos ? f : f.substr(slash + 1));
}

void count_pass(running_case& c) noexcept {
  if (c.active.load(std::memory_order_relaxed)) c.passed.fetch_add(1, std::memory_order_relaxed);
}

void record(bool ok, std::string failure) {
  running_case& c = current();
  if (ok) {
    count_pass(c);
    return;
  }
  std::lock_guard lock(c.mutex);
  if (c.result == nullptr) return; // a check outside any case: nothing to record it in
  ++c.result->checks;
  ++c.result->failed_checks;
  if (c.result->failures.size() < kept_failures) c.result->failures.push_back(std::move(failure));
}

std::string describe(const char* what, const char* file, int line, std::string_view message) {
  std::string s = base_name(file) + ":" + std::to_string(line) + ": " + what;
  if (!message.empty()) s += str(": ", message);
  for (const auto& i : info_stack)
    s += str(" [", i, "]");
  return s;
}

std::mt19937_64& generator() noexcept {
  static std::mt19937_64 g{std::random_device{}()};
  return g;
}

} // namespace

bool check(bool ok, const char* what, const char* file, int line, std::string_view message) {
  record(ok, ok ? std::string() : describe(what, file, line, message));
  return ok;
}

void require(bool ok, const char* what, const char* file, int line, std::string_view message) {
  if (!check(ok, what, file, line, message)) throw case_aborted{};
}

void fail_check(std::string message) {
  for (const auto& i : info_stack)
    message += str(" [", i, "]");
  record(false, std::move(message));
}

void pass_check() noexcept { count_pass(current()); }

void set_f32_flush_rule(bool on) noexcept {
  current().flush_rule.store(on, std::memory_order_relaxed);
}
bool f32_flush_rule() noexcept { return current().flush_rule.load(std::memory_order_relaxed); }

void pass_check_flushed() noexcept {
  running_case& c = current();
  if (!c.active.load(std::memory_order_relaxed)) return;
  c.passed.fetch_add(1, std::memory_order_relaxed);
  c.flushed.fetch_add(1, std::memory_order_relaxed);
}

void note(std::string text) {
  running_case& c = current();
  std::lock_guard lock(c.mutex);
  if (c.result != nullptr) c.result->notes.push_back(std::move(text));
}

uint64_t failures_so_far() noexcept {
  running_case& c = current();
  std::lock_guard lock(c.mutex);
  return c.result != nullptr ? c.result->failed_checks : 0;
}

scoped_info::scoped_info(std::string text) { info_stack.push_back(std::move(text)); }
scoped_info::~scoped_info() { info_stack.pop_back(); }

std::mt19937_64& rng() noexcept { return generator(); }
void seed_rng(uint64_t seed) noexcept { generator().seed(seed); }

std::vector<unsigned char> random_bytes(size_t n) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<unsigned char> v(n);
  for (auto& x : v)
    x = static_cast<unsigned char>(d(rng()));
  return v;
}

const char* to_string(outcome o) noexcept {
  switch (o) {
  case outcome::passed: return "passed";
  case outcome::failed: return "failed";
  case outcome::skipped: return "skipped";
  }
  return "?";
}

case_result make_result(std::string full_name, outcome status, std::string reason) {
  case_result r;
  r.name = std::move(full_name);
  r.status = status;
  r.reason = std::move(reason);
  if (status == outcome::failed) {
    r.failures.push_back(r.reason);
    r.failed_checks = 1;
  }
  return r;
}

case_result run_case(const std::string& full_name, const std::function<void()>& body) {
  case_result r;
  r.name = full_name;
  running_case& c = current();
  {
    std::lock_guard lock(c.mutex);
    c.result = &r;
    c.passed.store(0, std::memory_order_relaxed);
    c.flushed.store(0, std::memory_order_relaxed);
    c.flush_rule.store(false, std::memory_order_relaxed);
    c.active.store(true, std::memory_order_relaxed);
  }
  info_stack.clear();
  std::string thrown, skipped;
  bool was_skipped = false;
  const auto start = std::chrono::steady_clock::now();
  try {
    body();
  } catch (const case_aborted&) {
  } catch (const case_skipped& s) {
    was_skipped = true;
    skipped = s.reason;
  } catch (const std::exception& e) {
    thrown = str("threw: ", e.what());
  } catch (...) {
    thrown = "threw a non-standard exception";
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  info_stack.clear();
  {
    // The case's threads have been joined (or their checks are ordered before its end).
    std::lock_guard lock(c.mutex);
    c.active.store(false, std::memory_order_relaxed);
    r.checks += c.passed.exchange(0, std::memory_order_relaxed);
    r.flushed_checks = c.flushed.exchange(0, std::memory_order_relaxed);
    r.f32_flush_rule = c.flush_rule.exchange(false, std::memory_order_relaxed);
    c.result = nullptr;
  }
  if (!thrown.empty()) {
    ++r.failed_checks;
    if (r.failures.size() < kept_failures) r.failures.push_back(thrown);
  }
  // A failure before a skip still fails the case: what was checked went wrong.
  if (r.failed_checks > 0) {
    r.status = outcome::failed;
    r.reason = r.failures.empty() ? "failed" : r.failures.front();
  } else if (was_skipped) {
    r.status = outcome::skipped;
    r.reason = skipped;
  }
  return r;
}

} // namespace parenchyma::conformance
