// parenchyma-conformance: the input classes that catch a vendor library's shortcuts, shared by
// the bundle suites (blas_suite.cpp, nn_suite.cpp). A library tuned for typical data may keep a
// running sum (one NaN, infinity or huge square then leaks into every later element), sum in
// f32 where the result is finite only in double, flush tiny values, or approximate a function
// to an absolute rather than a relative error. Each class below is data an op must still get
// right by the semantics the docs state (docs/nn.md and docs/blas.md, "Input classes"):
//
//   non_finite    NaN, +Inf and -Inf at a few positions among ordinary values. IEEE
//                 propagation per element: an output that depends on a non-finite input is what
//                 the float64 reference gives; every other output is unaffected (no leak across
//                 elements, channels or rows).
//   huge          finite values near the largest magnitude for which the op's intermediate
//                 results (squares, sums over its terms) stay finite in the element type (the
//                 caller's `huge`: the type's maximum over the op's growth): the float64
//                 reference within tolerance.
//   tiny          values near the smallest normal magnitude (the caller's `tiny`), some of them
//                 subnormal: the float64 reference within tolerance.
//   wide_range    magnitudes spread log-uniformly from tiny to huge, random signs.
//   cancellation  pairs +a, -a of magnitude near `huge` among ordinary values: sums whose
//                 terms cancel (the tolerance scales with the sum of |terms|, as everywhere).
//
// The generator returns doubles; the suite rounds them to the element type it tests.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace parenchyma::conformance::inputs {

enum class input_class { non_finite, huge, tiny, wide_range, cancellation };
inline constexpr input_class all_classes[] = {input_class::non_finite, input_class::huge,
                                              input_class::tiny, input_class::wide_range,
                                              input_class::cancellation};

inline const char* class_name(input_class c) {
  switch (c) {
  case input_class::non_finite: return "non-finite";
  case input_class::huge: return "huge";
  case input_class::tiny: return "tiny";
  case input_class::wide_range: return "wide-range";
  case input_class::cancellation: return "cancellation";
  }
  return "?";
}

// The magnitudes of the classes: `huge` the largest input magnitude whose intermediate results
// stay finite in the element type (the caller divides the type's maximum by the growth its op
// has: the number of terms it sums, or takes a root for a square), `tiny` the smallest normal
// magnitude of the type.
struct magnitudes {
  double huge = 1;
  double tiny = 1;
};

// Where a non-finite class puts its NaN, +Inf and -Inf (in that order, cycling): the caller
// names positions that let it see a leak (channel 0 of one pixel, one row of many).
using positions = std::vector<size_t>;

// n values of class c drawn with g. For non_finite, `at` says where the NaN / +Inf / -Inf go
// (empty: at n / 5, n / 2 and n - 1); the other values are uniform in [-1, 1).
template <class Rng>
std::vector<double> make(input_class c, size_t n, const magnitudes& m, Rng& g,
                         const positions& at = {}) {
  std::uniform_real_distribution<double> u(-1, 1), half(0.5, 1), unit(0, 1);
  std::vector<double> v(n);
  const auto sign = [&] { return u(g) < 0 ? -1.0 : 1.0; };
  switch (c) {
  case input_class::non_finite: {
    for (double& e : v)
      e = u(g);
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                               std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity()};
    const positions where = at.empty() && n > 0 ? positions{n / 5, n / 2, n - 1} : at;
    for (size_t k = 0; k < where.size(); ++k)
      if (where[k] < n) v[where[k]] = specials[k % 3];
    break;
  }
  case input_class::huge:
    for (double& e : v)
      e = sign() * half(g) * m.huge;
    break;
  case input_class::tiny:
    // Normal values a few times the smallest normal, and every eighth one subnormal.
    for (size_t i = 0; i < n; ++i)
      v[i] = sign() * (i % 8 == 7 ? half(g) * m.tiny * 0x1p-8 : (1 + 15 * unit(g)) * m.tiny);
    break;
  case input_class::wide_range: {
    const double lo = std::log(m.tiny), hi = std::log(m.huge);
    for (double& e : v)
      e = sign() * std::exp(lo + (hi - lo) * unit(g));
    break;
  }
  case input_class::cancellation:
    // +a at i, -a at i + 1 for every fourth i; ordinary values between.
    for (size_t i = 0; i < n; ++i)
      v[i] = u(g);
    for (size_t i = 0; i + 1 < n; i += 4) {
      v[i] = sign() * half(g) * m.huge;
      v[i + 1] = -v[i];
    }
    break;
  }
  return v;
}

} // namespace parenchyma::conformance::inputs
