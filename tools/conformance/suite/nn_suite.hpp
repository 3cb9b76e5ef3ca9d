// parenchyma-conformance: what the NN suite's two sources share (nn_suite.cpp, nn_suite_stats.cpp):
// the comparisons against the float64 references, the refusal check, and the case families
// nn_suite_stats.cpp defines (normalisation, cross entropy, embedding, batch_norm). Two sources
// so that the suite's largest compile runs on two cores.
#pragma once

#include "extension_suite.hpp"
#include "input_classes.hpp"
#include "nn_reference.hpp"

#include <parenchyma/nn.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace parenchyma::conformance::nn_cases {

namespace nn = parenchyma::nn;
using nn_ref::vec;

// ---- the element types ---------------------------------------------------------------------

// A large finite value of the type (its largest power of ten or so).
template <class T> double huge() {
  if constexpr (std::is_same_v<T, f16>) return 6e4;
  if constexpr (std::is_same_v<T, bf16>) return 1e38;
  return sizeof(T) == 4 ? 1e38 : 1e300;
}
// ---- comparisons ---------------------------------------------------------------------------

inline bool matches(double got, double ref, double tol) {
  if (std::isnan(ref)) return std::isnan(got);
  if (got == ref) return true; // also where the bound is NaN (0 x an infinite magnitude)
  if (std::isinf(ref)) return got == ref;
  return std::fabs(got - ref) <= tol; // false for a NaN got
}
// A sum: the bound of a sum (sum_bound) plus a few of the type's smallest denormals, for results
// that are denormal themselves, plus `flush` where the op itself may flush subnormals (cuDNN's
// convolutions: flush_bound). Under the f32 flush rule (extension_suite.hpp) what flushing can
// lose is allowed where `flush` does not already allow it.
template <class T>
void expect_near(const std::string& what, size_t i, double got, double ref, double mag,
                 double terms, double flush = 0) {
  const double tol = sum_bound<T>(mag, terms) + 4 * denorm_min<T>() + flush;
  compare_element<T>(matches(got, ref, tol), what, i, got, ref, tol,
                     flush > 0 ? 0 : flush_bound<T>(terms));
}
template <class T>
void expect_all(const std::string& what, const vec& got, const nn_ref::summed& r,
                bool flush_to_zero = false) {
  if (got.size() != r.v.size()) {
    fail_check(str(tname<T>(), " ", what, ": ", got.size(), " elements, expected ", r.v.size()));
    return;
  }
  for (size_t i = 0; i < got.size(); ++i)
    expect_near<T>(what, i, got[i], r.v[i], r.mag[i], r.terms[i],
                   flush_to_zero ? flush_bound<T>(r.terms[i]) : 0);
}
// A convolution through a transform (FFT, Winograd: Convolution::numerics): rounding error is
// spread over a tile, so each output is held to the bound of the output's largest magnitude and
// most terms (twice the per-element factor: the transforms add a few roundings of their own).
template <class T>
void expect_all_transform(const std::string& what, const vec& got, const nn_ref::summed& r) {
  if (got.size() != r.v.size()) {
    fail_check(str(tname<T>(), " ", what, ": ", got.size(), " elements, expected ", r.v.size()));
    return;
  }
  double mag = 0, terms = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    mag = std::max(mag, r.mag[i]);
    terms = std::max(terms, r.terms[i]);
  }
  for (size_t i = 0; i < got.size(); ++i)
    expect_near<T>(what + " (transform numerics)", i, got[i], r.v[i], 2 * mag, terms,
                   flush_bound<T>(terms));
}

// Average pooling and its gradient, with and without the padding counted, against the float64
// references; `tag` names the case ("<tag> include_padding", "<tag> exclude_padding grad").
template <class T>
void expect_pool_avg(const Backend& b, const nn_ref::pool_geom& g, const vec& x, const vec& dy,
                     const SharedTensor<T>& xt, const SharedTensor<T>& dyt,
                     const std::vector<int64_t>& xs, const std::vector<int64_t>& ys,
                     nn::PoolingParams p, const std::string& tag) {
  for (const bool incl : {true, false}) {
    p.include_padding = incl;
    const std::string what = tag + (incl ? " include_padding" : " exclude_padding");
    auto ya = poisoned<T>(ys);
    nn::pooling_avg(b, xt, ya, p);
    expect_all<T>(what, values(ya), nn_ref::pool_avg(g, x, incl));
    auto dxa = poisoned<T>(xs);
    nn::pooling_avg_grad(b, dyt, dxa, p);
    expect_all<T>(what + " grad", values(dxa), nn_ref::pool_avg_grad(g, dy, incl));
  }
}
// A convolution may flush subnormal products and partial sums to zero (cuDNN's kernels run with
// flush-to-zero; docs/nn.md "Input classes"): each of its terms may lose up to the smallest
// normal, and so may each partial sum.
template <class T>
void expect_conv(const std::string& what, const vec& got, const nn_ref::summed& r,
                 nn::conv_numerics n) {
  if (n == nn::conv_numerics::transform)
    expect_all_transform<T>(what, got, r);
  else
    expect_all<T>(what, got, r, true);
}
// A transcendental function: a few ulps relative plus a small absolute term.
template <class T>
void expect_func(const std::string& what, size_t i, double got, double ref, double abs_scale) {
  const double tol = 8 * eps<T>() * std::fabs(ref) + 2 * eps<T>() * abs_scale + 4 * denorm_min<T>();
  compare_element<T>(matches(got, ref, tol), what, i, got, ref, tol, flush_bound<T>(0));
}
// Exactly ref (NaN matches NaN; +0 and -0 are equal here); under the f32 flush rule a subnormal
// ref may be a zero of its sign.
template <class T> void expect_exact(const std::string& what, size_t i, double got, double ref) {
  compare_element<T>(matches(got, ref, 0), what, i, got, ref, 0, 0);
}

template <const pcy_op_schema& S, class T> const OpKey* key() {
  return &ext::op_key<S>(dtype_v<T>);
}

// Runs f, which must throw errc::invalid_argument from "nn.<op>" naming `arg`.
template <class F>
void expect_refused(const std::string& what, F&& f, const char* op, const char* arg) {
  try {
    f();
    fail_check(str(what, ": no error thrown"));
  } catch (const parenchyma::error& e) {
    const std::string m = e.what();
    expect_true(e.code() == errc::invalid_argument, str(what, ": errc ", static_cast<int>(e.code()),
                                                        ", expected invalid_argument: ", m));
    expect_true(e.origin() == std::string("nn.") + op,
                str(what, ": origin ", e.origin(), ", expected nn.", op));
    expect_true(m.find(arg) != std::string::npos,
                str(what, ": the message does not name ", arg, ": ", m));
  }
}

// The case families of nn_suite_stats.cpp (instantiated there for float, double, f16 and bf16).
template <class T> void norm_cases(extension_suite& reg);
template <class T> void xent_cases(extension_suite& reg);
template <class T> void embedding_cases(extension_suite& reg);
template <class T> void bn_cases(extension_suite& reg);

} // namespace parenchyma::conformance::nn_cases
