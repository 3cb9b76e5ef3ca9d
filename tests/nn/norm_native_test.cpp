// The native NN bundle's layer_norm and rms_norm forward on f32 rows that stress its fast path
// (extensions/nn/native/nn_loops.hpp: statistics in one pass in double about the row's first
// element, y in f32 with the mean split into two floats) and its fallback to the double affine,
// against a long double reference of the documented definition (mean, then the biased variance
// from it). Rows: far from zero with a small spread, a first element far from the rest (the
// shift's worst case) in long rows, magnitudes near f32's largest and smallest, epsilon 0 (rstd
// beyond 2^100, and beyond f32's range: stored as infinity), and mixed scales. Bounds: y within
// 2^-19 of |(x - mean) rstd w| + |b| (plus the smallest subnormal), mean within 2^-22 of its
// magnitude plus 2^-40 of the row's mean |x|, rstd within 2^-21 relative.
#include "support/catch.hpp"

#include <parenchyma/nn.hpp>
#include <parenchyma/parenchyma.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace parenchyma;
namespace nn = parenchyma::nn;

namespace {

struct row_case {
  std::string name;
  uint64_t rows, n;
  double epsilon;
  // x of element j of row r from a uniform draw u in [-1, 1)
  double (*make)(uint64_t r, uint64_t j, double u);
};

void check_case(const Backend& b, const row_case& c, bool layer) {
  std::mt19937_64 rng(0x5eed + c.n * 31 + c.rows);
  std::uniform_real_distribution<double> u(-1, 1), uw(0.5, 1.5);
  std::vector<float> x(c.rows * c.n), w(c.n), bias(c.n);
  for (uint64_t r = 0; r < c.rows; ++r)
    for (uint64_t j = 0; j < c.n; ++j)
      x[r * c.n + j] = static_cast<float>(c.make(r, j, u(rng)));
  for (uint64_t j = 0; j < c.n; ++j) {
    w[j] = static_cast<float>(uw(rng));
    bias[j] = static_cast<float>(u(rng));
  }
  const std::vector<int64_t> shape{static_cast<int64_t>(c.rows), static_cast<int64_t>(c.n)},
      ns{static_cast<int64_t>(c.n)}, rs{static_cast<int64_t>(c.rows)};
  SharedTensor<float> xt(shape), wt(ns), bt(ns), yt(shape), mt(rs), rt(rs);
  auto put = [](SharedTensor<float>& t, const std::vector<float>& v) {
    auto m = t.write_only();
    std::copy(v.begin(), v.end(), m.begin());
  };
  put(xt, x);
  put(wt, w);
  put(bt, bias);
  if (layer)
    nn::layer_norm(b, xt, wt, bt, yt, mt, rt, 1, c.epsilon);
  else
    nn::rms_norm(b, xt, wt, yt, rt, 1, c.epsilon);
  const auto y = yt.read();
  std::vector<float> gm(c.rows);
  if (layer) {
    const auto m = mt.read();
    std::copy(m.begin(), m.end(), gm.begin());
  }
  const auto gr = rt.read();
  uint64_t bad = 0;
  for (uint64_t r = 0; r < c.rows; ++r) {
    const float* xr = x.data() + r * c.n;
    long double mean = 0, q = 0, amu = 0;
    if (layer) {
      for (uint64_t j = 0; j < c.n; ++j)
        mean += xr[j];
      mean /= static_cast<long double>(c.n);
    }
    for (uint64_t j = 0; j < c.n; ++j) {
      const long double d = xr[j] - mean;
      q += d * d;
      amu += std::fabs(static_cast<long double>(xr[j]));
    }
    amu /= static_cast<long double>(c.n);
    const long double rstd = 1 / std::sqrt(q / static_cast<long double>(c.n) + c.epsilon);
    const std::string at =
        c.name + (layer ? " layer_norm" : " rms_norm") + ", row " + std::to_string(r);
    if (layer) {
      const double err = std::fabs(static_cast<double>(gm[r] - mean));
      const double bound = std::ldexp(static_cast<double>(std::fabs(mean)), -22) +
                           std::ldexp(static_cast<double>(amu), -40) +
                           std::numeric_limits<float>::denorm_min();
      if (!(err <= bound)) {
        INFO(at << ": mean " << gm[r] << ", reference " << static_cast<double>(mean));
        CHECK(err <= bound);
      }
    }
    // rstd beyond f32's range is stored as infinity (the statistics are f32); y does not use it.
    const double rerr = rstd > std::numeric_limits<float>::max()
                            ? (std::isinf(gr[r]) ? 0.0 : 1.0)
                            : std::fabs(static_cast<double>((gr[r] - rstd) / rstd));
    if (!(rerr <= 0x1p-21)) {
      INFO(at << ": rstd " << gr[r] << ", reference " << static_cast<double>(rstd));
      CHECK(rerr <= 0x1p-21);
    }
    for (uint64_t j = 0; j < c.n; ++j) {
      const long double t = (xr[j] - mean) * rstd * w[j];
      const long double ref = t + (layer ? bias[j] : 0.0f);
      const double bound =
          std::ldexp(static_cast<double>(std::fabs(t) + (layer ? std::fabs(bias[j]) : 0.0f)), -19) +
          std::numeric_limits<float>::denorm_min();
      const double err = std::fabs(static_cast<double>(y[r * c.n + j] - ref));
      if (!(err <= bound) && bad++ < 5) {
        INFO(at << ", element " << j << ": y " << y[r * c.n + j] << ", reference "
                << static_cast<double>(ref) << " (x " << xr[j] << ")");
        CHECK(err <= bound);
      }
    }
  }
  CHECK(bad == 0);
}

} // namespace

TEST_CASE("native layer_norm and rms_norm on hostile f32 rows", "[nn][native][norm]") {
  Backend b("native");
  const std::vector<row_case> cases{
      {"far from zero (1e6 + U(-1, 1))", 9, 1000, 1e-5,
       [](uint64_t, uint64_t, double v) { return 1e6 + v; }},
      {"far from zero (-3e4 + 1e-3 U)", 5, 777, 1e-5,
       [](uint64_t, uint64_t, double v) { return -3e4 + 1e-3 * v; }},
      {"first element an outlier, n = 65536", 2, 65536, 1e-5,
       [](uint64_t r, uint64_t j, double v) { return j == 0 ? (r == 0 ? 1e4 : -3e7) : v; }},
      {"first element an outlier, n = 33", 3, 33, 1e-5,
       [](uint64_t, uint64_t j, double v) { return j == 0 ? 1e5 : 1e-2 * v; }},
      {"near f32's largest (3e37 U)", 4, 300, 1e-5,
       [](uint64_t, uint64_t, double v) { return 3e37 * v; }},
      {"near f32's largest, offset (1e38 + 1e37 U)", 3, 129, 1e-5,
       [](uint64_t, uint64_t, double v) { return 1e38 + 1e37 * v; }},
      {"f32's extremes (3e38 and -3e38 by turns, one in three positive)", 3, 301, 1e-5,
       [](uint64_t, uint64_t j, double v) {
         return (j % 3 == 0 ? 3e38 : -3e38) * (0.9 + 0.1 * v);
       }},
      {"subnormal, epsilon 0 (1e-39 U: rstd beyond f32's range)", 3, 97, 0.0,
       [](uint64_t, uint64_t, double v) { return 1e-39 * v; }},
      {"tiny, epsilon 0 (1e-35 U: rstd beyond 2^100)", 4, 260, 0.0,
       [](uint64_t, uint64_t, double v) { return 1e-35 * v; }},
      {"tiny normal spread, epsilon 0 (1e-20 U)", 3, 100, 0.0,
       [](uint64_t, uint64_t, double v) { return 1e-20 * v; }},
      {"mixed scales (rows of 1e-10 to 1e20)", 7, 515, 1e-30,
       [](uint64_t r, uint64_t, double v) { return std::pow(10.0, 5.0 * r - 10) * v; }},
      {"one element", 4, 1, 1e-5, [](uint64_t r, uint64_t, double v) { return 7.0 * r + v; }},
      {"31 elements (no full block of lanes)", 3, 31, 1e-5,
       [](uint64_t, uint64_t, double v) { return 2 + v; }},
  };
  for (const row_case& c : cases)
    for (const bool layer : {true, false})
      check_case(b, c, layer);
}
