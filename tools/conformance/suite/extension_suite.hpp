// parenchyma-conformance: the base of the extension (bundle) suites — blas, nn, and the ones to
// come. A suite built on it holds only its cases: extension_suite owns their registration, the
// set-up on each framework (a Backend of the framework under test), the first case that routes
// every op and dtype, the last one that counts the op calls that ran by fallback, and, per cell,
// the decision "served here, or skipped with the reason".
//
// That decision comes from capabilities, never from a case's name. Each cell is registered with
// the dtype its ops run in (add<T>), and may name the op keys it calls:
//   - a required dtype (f32; f64 on a device whose "fp64" property is true or absent): an op the
//     bundle does not serve here (errc::unsupported, or a call that ran on another framework by
//     fallback) skips the cell, or fails it under --require-ops;
//   - an optional dtype (f64 on a device that reports no fp64; f16 and bf16, which a bundle
//     serves only where it registers them): the same gaps always skip, with the reason.
// An optional cell that names its op keys is checked with Backend::route before it runs, so it
// is not run on another framework at all; every cell is judged by what happened when it ran
// (errc::unsupported, Backend::fallback_count).
//
// Also here, for every extension suite: the element types (names, epsilon, conversions), tensor
// helpers (random, poisoned, read back), the message formats, the error bound of a sum, and the
// f32 flush rule (a device that may flush f32 subnormals: flush_rule.hpp).
#pragma once

#include "flush_rule.hpp"
#include "suites.hpp"

#include <parenchyma/extension.hpp>
#include <parenchyma/parenchyma.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace parenchyma::conformance {

// ---- the framework under test ----------------------------------------------------------------

// What an extension suite's cases share on one framework: made by setup, released by teardown.
struct extension_target {
  std::unique_ptr<Backend> backend;
  std::string extension; // "blas"
  std::string framework; // "opencl"
  std::string device;    // the device's name, for reasons
  std::string bundles;   // the bundle names, for messages
  bool required = false; // --require-ops
  bool fp64 = true;      // the device's PCY_PROP_FP64 (a device that does not say has it)
  bool flush_f32 = false; // may_flush_f32: its f32 cells are held to the f32 flush rule
};

// Whether cells of a dtype must be served on the target's device, and if not, why.
struct dtype_need {
  bool optional = false;
  std::string why; // optional: the capability it lacks or the rule that makes it optional
};
dtype_need need_of(const extension_target& t, pcy_dtype dtype);

// ---- the suite -----------------------------------------------------------------------------

class extension_suite {
public:
  using body = std::function<void(const Backend&)>;
  // The op keys of one dtype that the first case routes (empty: none of that dtype).
  using keys_of = std::function<std::vector<const OpKey*>(pcy_dtype)>;

  // `name` is the prefix of the case names and what --suite picks; `extension` the bundles'
  // extension (PCY_BLAS_EXTENSION); `keys` the ops of each dtype, for the first case.
  extension_suite(std::string name, std::string extension, std::string description, keys_of keys);

  // A cell: a case whose ops run in `dtype` on the backend. `keys`: the ops it calls (may be
  // left out); where `dtype` is optional here they are routed first, and the cell is skipped
  // unless this framework's bundle serves them all.
  void add(std::string name, pcy_dtype dtype, body f, std::vector<const OpKey*> keys = {});
  template <class T> void add(std::string name, body f, std::vector<const OpKey*> keys = {}) {
    add(std::move(name), dtype_of<T>::value, std::move(f), std::move(keys));
  }

  // What the cases share on the framework under test (set up before they run).
  const std::shared_ptr<extension_target>& state() const noexcept { return st_; }

  // The suite: the route case, the cells in the order added, the fallback count.
  suite finish();

private:
  std::shared_ptr<extension_target> st_;
  std::shared_ptr<uint64_t> optional_fallbacks_; // op calls of optional cells that fell back
  std::string name_, extension_, description_;
  keys_of keys_;
  std::vector<test_case> cells_;
};

// ---- element types ---------------------------------------------------------------------------

template <class T> constexpr bool is_half = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;
template <class T> constexpr pcy_dtype dtype_v = dtype_of<T>::value;

template <class T> const char* tname() {
  if constexpr (std::is_same_v<T, f16>) return "f16";
  if constexpr (std::is_same_v<T, bf16>) return "bf16";
  return sizeof(T) == 4 ? "f32" : "f64";
}
template <class T> double eps() {
  if constexpr (std::is_same_v<T, f16>) return 0x1p-10;
  if constexpr (std::is_same_v<T, bf16>) return 0x1p-7;
  if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::epsilon();
  return 0;
}
template <class T> double denorm_min() {
  if constexpr (std::is_same_v<T, f16>) return 0x1p-24;
  if constexpr (std::is_same_v<T, bf16>) return 0x1p-133;
  if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::denorm_min();
  return 0;
}
template <class T> double tiny_normal() {
  if constexpr (std::is_same_v<T, f16>)
    return 0x1p-14;
  else if constexpr (std::is_same_v<T, bf16>)
    return 0x1p-126;
  else
    return static_cast<double>(std::numeric_limits<T>::min());
}
template <class T> double to_d(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<double>(v);
  else
    return static_cast<double>(static_cast<float>(v));
}
template <class T> T from_d(double v) {
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(v);
  else
    return T(static_cast<float>(v));
}
template <class T> double rounded(double v) { return to_d(from_d<T>(v)); }

// ---- messages --------------------------------------------------------------------------------

std::string g10(double v);                            // printf's %.10g: values in messages
std::string g3(double v);                             // printf's %.3g: tolerances in messages
std::string shape_tag(const std::vector<int64_t>& s); // "2x3x4"
size_t count_of(const std::vector<int64_t>& s);       // the number of elements of a shape
// A check the suite compared itself: counted, and `what` recorded when it failed.
void expect_true(bool ok, const std::string& what);
// One compared element: counted, or "<tn> <what>: element i got G expected R (tolerance T)".
void report_element(bool ok, const std::string& what, const char* tn, size_t i, double got,
                    double ref, double tol);

// The error bound of a sum of `terms` products in T: 8 eps (sqrt(terms) + 1) x the sum of the
// terms' magnitudes. Each suite adds its own floor (BLAS 1e-30; NN a few denormals, and what
// flushing subnormals to zero may lose).
template <class T> double sum_bound(double magnitude, double terms) {
  return 8 * eps<T>() * (std::sqrt(terms) + 1) * magnitude;
}

// ---- the f32 flush rule ----------------------------------------------------------------------
// On a device that may flush f32 subnormals (may_flush_f32, decided once per device at set-up),
// an f32 subnormal input or result may be a zero of its sign (docs/vulkan.md). There an f32 cell
// is held to the flush rule: an element that misses the reference by its usual tolerance still
// passes if it is within that tolerance widened by what flushing can lose (flush_bound), or is
// the reference flushed to a zero of its sign; such passes are counted apart ("passed under the
// f32 flush rule" in the report). f64, f16 and bf16 cells, and every other device, keep the
// usual tolerance.

// What flushing subnormals to zero may lose in a result that sums `terms` products and is scaled
// by factors of total magnitude `scale` (|alpha| + |beta|; 1 where there are none): up to the
// smallest normal for each product (a flushed input with it) and each partial sum, and for the
// result.
template <class T> double flush_bound(double terms, double scale = 1) {
  return 2 * (terms + 1) * tiny_normal<T>() * std::max(1.0, scale);
}
// Whether the running cell's elements of T are held to the f32 flush rule.
template <class T> bool flush_rule_holds() { return std::is_same_v<T, float> && f32_flush_rule(); }
// `got` against `ref` under the flush rule: within tol + allowance (a flush_bound), or exactly
// a subnormal reference flushed to a zero of its sign. A NaN or an infinity gains nothing.
template <class T> bool matches_flushed(double got, double ref, double tol, double allowance) {
  if (!std::isfinite(ref) || !std::isfinite(got)) return false;
  if (got == 0 && std::fabs(ref) < tiny_normal<T>() && std::signbit(got) == std::signbit(ref))
    return true;
  return std::fabs(got - ref) <= tol + allowance;
}
// One compared element of T, counted: `ok` by the usual tolerance `tol`; else, where the flush
// rule holds, matches_flushed with `allowance` (counted as passed under the rule); else the
// failure "<tn> <what>: element i got G expected R (tolerance T[ under the f32 flush rule])".
template <class T>
void compare_element(bool ok, const std::string& what, size_t i, double got, double ref, double tol,
                     double allowance) {
  if (ok) return pass_check();
  if (!flush_rule_holds<T>()) return report_element(false, what, tname<T>(), i, got, ref, tol);
  if (matches_flushed<T>(got, ref, tol, allowance)) return pass_check_flushed();
  report_element(false, what + " (under the f32 flush rule)", tname<T>(), i, got, ref,
                 tol + allowance);
}

// ---- tensors ---------------------------------------------------------------------------------

// Values drawn in [lo, hi) and rounded to T: a reference computes from exactly what the op sees.
template <class T> std::vector<double> random_vec(size_t n, double lo = -1, double hi = 1) {
  std::vector<double> v = random_values<double>(n, lo, hi);
  for (double& e : v)
    e = rounded<T>(e);
  return v;
}
template <class T>
SharedTensor<T> tensor_of(std::vector<int64_t> shape, const std::vector<double>& v) {
  SharedTensor<T> t(std::move(shape));
  auto w = t.write_only();
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = from_d<T>(v[i]);
  return t;
}
// A tensor of values drawn in [-1, 1).
template <class T> SharedTensor<T> random_tensor(std::vector<int64_t> shape) {
  SharedTensor<T> t(std::move(shape));
  std::uniform_real_distribution<double> u(-1, 1);
  for (T& v : t.write_only())
    v = from_d<T>(u(rng()));
  return t;
}
template <class T> SharedTensor<T> scalar_tensor(double v) {
  SharedTensor<T> t({1});
  t.write_only()[0] = from_d<T>(v);
  return t;
}
// An output the op must overwrite completely: NaN everywhere.
template <class T> SharedTensor<T> poisoned(std::vector<int64_t> shape) {
  SharedTensor<T> t(std::move(shape));
  for (T& e : t.write_only())
    e = from_d<T>(std::numeric_limits<double>::quiet_NaN());
  return t;
}
// The tensor's elements as doubles.
template <class T> std::vector<double> values(const SharedTensor<T>& t) {
  auto s = t.read();
  std::vector<double> v(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    v[i] = to_d(s[i]);
  return v;
}
template <class T> std::vector<T> raw(const SharedTensor<T>& t) {
  auto s = t.read();
  return {s.begin(), s.end()};
}
// Empty vectors compare equal without memcmp (their data() may be null: undefined for memcmp).
template <class T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

} // namespace parenchyma::conformance
