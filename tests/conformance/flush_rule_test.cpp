// The bundle suites' f32 flush rule (tools/conformance/suite/extension_suite.hpp) on synthetic
// results, no device needed: what a device that flushes f32 subnormals gives for nrm2-, dot-,
// gemm- and gradient-like results passes under the rule (counted apart) and fails without it; a
// result off by more than what flushing can lose fails under it too, and f64 never gains.
#include "support/catch.hpp"

#include "suite/extension_suite.hpp"
#include "suite/nn_suite.hpp"

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

namespace pc = parenchyma::conformance;

namespace {

constexpr double flt_min = FLT_MIN;

// One case of the harness that compares `got` with `ref` as a suite would, with the rule on or
// off; its result (passed or failed, and the checks that passed only under the rule).
template <class T>
pc::case_result compared(bool rule, double got, double ref, double tol, double allowance) {
  return pc::run_case("flush/compare", [=] {
    pc::set_f32_flush_rule(rule);
    pc::compare_element<T>(std::fabs(got - ref) <= tol, "synthetic", 0, got, ref, tol, allowance);
  });
}

bool passed_flushed(const pc::case_result& r) {
  return r.status == pc::outcome::passed && r.flushed_checks == 1 && r.f32_flush_rule;
}
bool failed(const pc::case_result& r) {
  return r.status == pc::outcome::failed && r.failed_checks == 1;
}

// The BLAS suite's bound for the input classes (expect_class): a sum's bound plus a few of the
// smallest subnormals.
double class_tol(double magnitude, double terms) {
  return pc::sum_bound<float>(magnitude, terms) + 4 * pc::denorm_min<float>();
}

} // namespace

TEST_CASE("flush_bound: (terms + 1) smallest normals, twice, times the scaling factors") {
  CHECK(pc::flush_bound<float>(0) == 2 * flt_min);
  CHECK(pc::flush_bound<float>(7) == 16 * flt_min);
  CHECK(pc::flush_bound<float>(7, 2.5) == 40 * flt_min);
  CHECK(pc::flush_bound<float>(7, 0.5) == 16 * flt_min); // a factor below 1 does not shrink it
  CHECK(pc::flush_bound<double>(7) == 16 * std::numeric_limits<double>::min());
}

TEST_CASE("flush rule: a flushed nrm2 of subnormal values") {
  // nrm2 of 4097 values of 1e-39 (f32 subnormals): 6.4e-38; flushed inputs give 0.
  const double n = 4097, ref = std::sqrt(n) * 1e-39;
  const double tol = class_tol(ref, n);
  const double allowance = pc::flush_bound<float>(std::sqrt(n)); // what the suite allows nrm2
  CHECK(failed(compared<float>(false, 0, ref, tol, allowance)));
  CHECK(passed_flushed(compared<float>(true, 0, ref, tol, allowance)));
  // A norm of 100 sqrt(n) smallest normals cannot lose all of it to flushing.
  const double big = 100 * std::sqrt(n) * flt_min;
  CHECK(failed(compared<float>(true, 0, big, class_tol(big, n), allowance)));
  // The exact result needs no rule, and is not counted as needing it.
  const auto exact = compared<float>(true, ref, ref, tol, allowance);
  CHECK(exact.status == pc::outcome::passed);
  CHECK(exact.flushed_checks == 0);
}

TEST_CASE("flush rule: a dot whose subnormal products were flushed") {
  // 1000 products of 3e-40 each and a few normal ones: 3e-37 of it is subnormal terms.
  const double terms = 1000, normal_part = 5 * flt_min, sub_part = terms * 3e-40;
  const double ref = normal_part + sub_part, got = normal_part;
  const double tol = class_tol(ref, terms), allowance = pc::flush_bound<float>(terms);
  CHECK(failed(compared<float>(false, got, ref, tol, allowance)));
  CHECK(passed_flushed(compared<float>(true, got, ref, tol, allowance)));
  // Off by more than every term and partial sum flushed: wrong, rule or not.
  CHECK(failed(compared<float>(true, ref + 1.5 * allowance, ref, tol, allowance)));
  CHECK(failed(compared<float>(true, ref - 1.5 * allowance, ref, tol, allowance)));
}

TEST_CASE("flush rule: a gemm element scaled by alpha and beta") {
  // C = alpha * sum_k a b + beta * c, k = 129, alpha 0.5, beta 2: the flushed products of the
  // sum lost 60 smallest normals (30 after alpha), within the allowance.
  const double k = 129, alpha = 0.5, beta = 2, c = 3 * flt_min;
  const double s = 40 * flt_min, lost = 60 * flt_min;
  const double ref = alpha * (s + lost) + beta * c, got = alpha * s + beta * c;
  const double tol = class_tol(alpha * (s + lost) + beta * c, k);
  const double allowance = pc::flush_bound<float>(k, alpha + beta);
  CHECK(failed(compared<float>(false, got, ref, tol, allowance)));
  CHECK(passed_flushed(compared<float>(true, got, ref, tol, allowance)));
  // A result that lost more than (terms + 1) smallest normals x the factors: rejected.
  CHECK(failed(compared<float>(true, ref - 2 * allowance, ref, tol, allowance)));
  CHECK(failed(compared<float>(true, ref + 2 * allowance, ref, tol, allowance)));
}

TEST_CASE("flush rule: a subnormal result may be a zero of its sign, and only of its sign") {
  const double ref = -3e-40; // an f32 subnormal
  CHECK(failed(compared<float>(false, -0.0, ref, 0, 0)));
  CHECK(passed_flushed(compared<float>(true, -0.0, ref, 0, 0)));
  CHECK(failed(compared<float>(true, 0.0, ref, 0, 0)));           // the other zero
  CHECK(failed(compared<float>(true, -0.0, -2 * flt_min, 0, 0))); // a normal result
  CHECK(failed(compared<float>(true, 1e-40, ref, 0, 0)));         // another subnormal
}

TEST_CASE("flush rule: NaN, infinities and f64 gain nothing") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double big = pc::flush_bound<float>(1000);
  CHECK(failed(compared<float>(true, nan, 1e-39, 0, big)));
  CHECK(failed(compared<float>(true, 0, inf, 0, big)));
  CHECK(failed(compared<float>(true, inf, 1e-39, 0, big)));
  // An f64 cell keeps its subnormals (the driver keeps them), rule or not.
  const double tiny64 = 1e-310;
  CHECK(failed(compared<double>(true, 0, 1000 * tiny64, 0, pc::flush_bound<double>(1000))));
  CHECK(failed(compared<double>(true, -0.0, -tiny64, 0, 0)));
}

TEST_CASE("flush rule: the NN suite's comparisons apply it to f32 elements") {
  namespace nc = pc::nn_cases;
  // sigmoid's gradient at x = -100: y = 3.7e-44 (subnormal) flushed, so dy * y (1 - y) is 0.
  const double y = 3.7e-44, dy = 0.8, ref = dy * y * (1 - y);
  const auto grad = [&](bool rule) {
    return pc::run_case("flush/nn", [&] {
      pc::set_f32_flush_rule(rule);
      nc::expect_near<float>("sigmoid grad", 0, 0.0, ref, dy * y, 2);
    });
  };
  CHECK(failed(grad(false)));
  CHECK(passed_flushed(grad(true)));
  // An average over a window of 9 subnormal inputs flushed: 0 for 9 x 5e-39 / 9.
  const auto pool = [&](double got) {
    return pc::run_case("flush/nn pool", [&] {
      pc::set_f32_flush_rule(true);
      nc::expect_near<float>("pooling_avg", 0, got, 5e-39, 5e-39, 9);
    });
  };
  CHECK(passed_flushed(pool(0)));
  CHECK(failed(pool(-30 * flt_min))); // beyond what flushing nine terms can lose
  // A convolution's own flush allowance (cuDNN) is part of its usual tolerance: nothing counted.
  const auto conv = pc::run_case("flush/nn conv", [&] {
    pc::set_f32_flush_rule(true);
    nc::expect_near<float>("convolution", 0, 0.0, 1e-37, 1e-37, 27, pc::flush_bound<float>(27));
  });
  CHECK(conv.status == pc::outcome::passed);
  CHECK(conv.flushed_checks == 0);
}
