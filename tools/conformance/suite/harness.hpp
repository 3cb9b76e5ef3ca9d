// parenchyma-conformance: the small test harness the conformance suites are written in. A case
// is a named function; checks inside it record failures against the case that is running, a
// required check ends it, skip() ends it as skipped with a reason. The installed program uses
// it instead of a test framework, so a plugin author needs nothing but the installed SDK.
//
// Threads: checks may come from any thread while a case runs (passes are counted atomically,
// failures under a lock); one case runs at a time.
#pragma once

#include <parenchyma/sdk/common.hpp>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::conformance {

using sdk::str;

// Thrown by a failed required check: the case ends as failed (the failure is already recorded).
struct case_aborted {};
// Thrown by skip(): the case ends as skipped, with the reason.
struct case_skipped {
  std::string reason;
};

[[noreturn]] inline void skip(std::string reason) { throw case_skipped{std::move(reason)}; }

// True in a build under AddressSanitizer or ThreadSanitizer (10-20x slower). A case whose size
// matters only for one framework's code (a threshold of that bundle) may take a smaller size
// elsewhere there; what it checks stays the same.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif
#else
inline constexpr bool sanitized_build = false;
#endif

// One check of the running case. A failed one is recorded with where it is, what it checked,
// `message` (may be empty) and the context lines in scope (PCY_INFO). Returns `ok`.
bool check(bool ok, const char* what, const char* file, int line, std::string_view message = {});
// As check, but a failure ends the case.
void require(bool ok, const char* what, const char* file, int line, std::string_view message = {});
// A failure with a message of its own (a value the suite compared itself); counted as a check.
void fail_check(std::string message);
// A passed check the suite compared itself (so the case's check count stays meaningful).
void pass_check() noexcept;
// The f32 flush rule (extension_suite.hpp, docs/vulkan.md): whether the running case's f32
// results may have their subnormals flushed (its device may flush them). Off when a case starts.
void set_f32_flush_rule(bool on) noexcept;
bool f32_flush_rule() noexcept;
// A passed check that passed only under the f32 flush rule (counted apart, so that a report says
// how much the rule let through).
void pass_check_flushed() noexcept;
// A line kept with the case's result whatever its outcome (what ran, which implementation).
void note(std::string text);
// The number of failed checks of the running case so far.
uint64_t failures_so_far() noexcept;

// A context line shown with every failure while it is in scope (the test's "INFO").
class scoped_info {
public:
  explicit scoped_info(std::string text);
  ~scoped_info();
  scoped_info(const scoped_info&) = delete;
  scoped_info& operator=(const scoped_info&) = delete;
};

// The random data of a run: one generator, seeded once per run (the seed is in every report).
std::mt19937_64& rng() noexcept;
void seed_rng(uint64_t seed) noexcept;
template <class T> std::vector<T> random_values(size_t n, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v)
    x = static_cast<T>(d(rng()));
  return v;
}
std::vector<unsigned char> random_bytes(size_t n);

// One case of a suite.
struct test_case {
  std::string name; // unique in its suite, e.g. "fill with 1, 2, 4, 8 and 16-byte patterns"
  std::function<void()> run; // the checks; uses what its suite's setup made
};

enum class outcome { passed, failed, skipped };
const char* to_string(outcome o) noexcept;

struct case_result {
  std::string name; // "<suite>/<case>"
  outcome status = outcome::passed;
  std::string reason;                // skipped: why; failed: the first failure
  std::vector<std::string> failures; // the first failures, with where and why
  uint64_t failed_checks = 0;        // all of them (more than `failures` may hold)
  uint64_t checks = 0;
  bool f32_flush_rule = false; // the case ran under the f32 flush rule
  uint64_t flushed_checks = 0; // its passed checks that passed only under that rule
  std::vector<std::string> notes;
  double seconds = 0;
};

// Runs one case and returns its result; never throws.
case_result run_case(const std::string& full_name, const std::function<void()>& body);
// A result for something that did not run as a case (a plugin that did not load, a suite that
// could not be set up).
case_result make_result(std::string full_name, outcome status, std::string reason);

} // namespace parenchyma::conformance

#define PCY_CONFORMANCE_CAT2(a, b) a##b
#define PCY_CONFORMANCE_CAT(a, b) PCY_CONFORMANCE_CAT2(a, b)
// PCY_CHECK(expr[, message...]), PCY_REQUIRE(expr[, message...]): the message pieces are joined
// with sdk::str, e.g. PCY_CHECK(got == want, "element ", i).
#define PCY_CHECK(expr, ...)                                                                       \
  ::parenchyma::conformance::check(static_cast<bool>(expr), #expr, __FILE__,                       \
                                   __LINE__ __VA_OPT__(, ::parenchyma::sdk::str(__VA_ARGS__)))
#define PCY_REQUIRE(expr, ...)                                                                     \
  ::parenchyma::conformance::require(static_cast<bool>(expr), #expr, __FILE__,                     \
                                     __LINE__ __VA_OPT__(, ::parenchyma::sdk::str(__VA_ARGS__)))
#define PCY_INFO(...)                                                                              \
  ::parenchyma::conformance::scoped_info PCY_CONFORMANCE_CAT(pcy_info_, __LINE__)(                 \
      ::parenchyma::sdk::str(__VA_ARGS__))
