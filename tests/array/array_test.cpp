// The array extension through its front-end, on every framework with an array bundle here
// (native always; OpenCL where a device and the bundle exist), against float64 / integer
// references computed in this file on seeded random data of awkward sizes.
#include "array_backends.hpp"
#include "support/catch.hpp"
#include "support/random.hpp"

#include <parenchyma/array.hpp>
#include <parenchyma/graph.hpp>
#include <parenchyma/registry.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace parenchyma;
namespace pa = parenchyma::array;
using pcy_test_support::rng;

namespace {

std::vector<Backend> backends() { return array_test::array_backends(); }

std::vector<double> random_values(size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double& x : v)
    x = d(rng());
  return v;
}
template <class T> std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Row-major index helpers for references.
std::vector<int64_t> unravel(int64_t i, const pa::Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}
// The element of an array of shape `s` (row-major values v) at broadcast index `idx` of a
// larger shape.
template <class T>
T at_broadcast(const std::vector<T>& v, const pa::Shape& s, const std::vector<int64_t>& idx) {
  int64_t off = 0, stride = 1;
  for (size_t d = s.size(); d-- > 0;) {
    const int64_t i = idx[idx.size() - s.size() + d];
    off += (s[d] == 1 ? 0 : i) * stride;
    stride *= s[d];
  }
  return v[static_cast<size_t>(off)];
}

bool close(double got, double want, double rel, double abs) {
  if (std::isnan(want)) return std::isnan(got);
  return std::fabs(got - want) <= abs + rel * std::fabs(want);
}

bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

} // namespace

TEST_CASE("array: a fused chain with broadcasting and promotion matches float64 loops", "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    const pa::Shape sa{37, 1, 5}, sb{4, 5}, sc{5};
    const auto va = random_values(37 * 5, -3, 3), vb = random_values(20, -3, 3),
               vc = random_values(5, 0.5, 2);
    pa::Array a = pa::asarray(b, as<float>(va), sa);
    pa::Array x = pa::asarray(b, vb, sb); // f64
    pa::Array c = pa::asarray(b, as<float>(vc), sc);
    const uint64_t before = pa::programs_run();
    pa::Array y = pa::exp(a * x - 1.0) + pa::sin(c) / c - pa::sqrt(pa::abs(a)) * 2;
    CHECK(y.is_pending());
    CHECK(y.type() == PCY_DTYPE_F64);
    CHECK(y.shape() == pa::Shape{37, 4, 5});
    const std::vector<double> got = y.to_vector<double>();
    CHECK(pa::programs_run() - before == 1); // one program for the whole chain
    REQUIRE(got.size() == 37u * 4 * 5);
    const auto fa = as<float>(va), fc = as<float>(vc);
    for (int64_t i = 0; i < 37 * 4 * 5; ++i) {
      const auto idx = unravel(i, {37, 4, 5});
      const double av = at_broadcast(fa, sa, idx), xv = at_broadcast(vb, sb, idx);
      const double cv = at_broadcast(fc, sc, idx);
      // c is f32: sin(c)/c is computed in f32 then promoted (NumPy's order of promotion).
      const float sc_over_c = std::sin(static_cast<float>(cv)) / static_cast<float>(cv);
      const double want = std::exp(av * xv - 1.0) + static_cast<double>(sc_over_c) -
                          static_cast<double>(std::sqrt(std::fabs(static_cast<float>(av))) * 2.0f);
      // The host's f32 sin and sqrt on native; a device's own f32 functions elsewhere (within a
      // few f32 ulp of each term, about 1 in magnitude here).
      const bool host_math = b.framework().name() == "native";
      REQUIRE(close(got[static_cast<size_t>(i)], want, 1e-12, host_math ? 1e-12 : 4e-6));
    }
  }
}

TEST_CASE("array: fused and unfused evaluation give the same bits", "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    const auto v = random_values(1001, -4, 4);
    pa::Array a = pa::asarray(b, as<float>(v), {1001});
    pa::Array fused = pa::tanh(a * a + 1.0f) - pa::exp(a) * 0.5f + pa::floor(a);
    pa::Array t1 = (a * a).eval();
    pa::Array t2 = (t1 + 1.0f).eval();
    pa::Array t3 = pa::tanh(t2).eval();
    pa::Array t4 = pa::exp(a).eval();
    pa::Array t5 = (t4 * 0.5f).eval();
    pa::Array t6 = (t3 - t5).eval();
    pa::Array unfused = (t6 + pa::floor(a)).eval();
    const auto f = fused.to_vector<float>(), u = unfused.to_vector<float>();
    for (size_t i = 0; i < f.size(); ++i)
      REQUIRE(same_bits(f[i], u[i]));
  }
}

TEST_CASE("array: integer semantics (wrap, floor division, remainder, division by zero, shifts)",
          "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    const std::vector<int32_t> xs{7, -7, 7, -7, 5, INT32_MIN, INT32_MAX, 0, -1, 9};
    const std::vector<int32_t> ys{2, 2, -2, -2, 0, -1, 1, 3, 40, 33};
    pa::Array x = pa::asarray(b, xs, {10}), y = pa::asarray(b, ys, {10});
    const auto fd = pa::floor_divide(x, y).to_vector<int32_t>();
    const auto rm = pa::remainder(x, y).to_vector<int32_t>();
    const auto ad = (x + y).to_vector<int32_t>();
    const auto ml = (x * y).to_vector<int32_t>();
    const auto sl = (x << y).to_vector<int32_t>();
    const auto sr = (x >> y).to_vector<int32_t>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const int64_t a = xs[i], c = ys[i];
      int64_t q = 0, r = 0;
      if (c != 0) {
        q = a / c;
        r = a % c;
        if (r != 0 && ((r < 0) != (c < 0))) {
          r += c;
          q -= 1;
        }
      }
      INFO("x " << a << " y " << c);
      CHECK(fd[i] == static_cast<int32_t>(static_cast<uint32_t>(q)));
      CHECK(rm[i] == (c == -1 ? 0 : static_cast<int32_t>(r)));
      CHECK(ad[i] == static_cast<int32_t>(static_cast<uint32_t>(a + c)));
      CHECK(ml[i] == static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(a * c))));
      CHECK(sl[i] == (c < 0 || c >= 32 ? 0 : static_cast<int32_t>(static_cast<uint32_t>(a) << c)));
      CHECK(sr[i] == (c < 0 || c >= 32 ? (a < 0 ? -1 : 0) : static_cast<int32_t>(a >> c)));
    }
    // True division of integers gives f64 (the Array API's default floating dtype).
    CHECK((x / y).type() == PCY_DTYPE_F64);
  }
}

TEST_CASE("array: casts saturate, NaN goes to 0, half types round once", "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    const double nan = std::numeric_limits<double>::quiet_NaN(),
                 inf = std::numeric_limits<double>::infinity();
    const std::vector<double> v{nan,
                                inf,
                                -inf,
                                300.7,
                                -300.7,
                                2.5,
                                -2.5,
                                1e30,
                                -0.0,
                                65519.99,
                                65520.0,
                                1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
                                5.9604644775390625e-08 * 0.5};
    pa::Array x = pa::asarray(b, v, {static_cast<int64_t>(v.size())});
    const auto i8 = x.astype(PCY_DTYPE_I8).to_vector<int8_t>();
    const auto u8 = x.astype(PCY_DTYPE_U8).to_vector<uint8_t>();
    const auto i64 = x.astype(PCY_DTYPE_I64).to_vector<int64_t>();
    const auto h = x.astype(PCY_DTYPE_F16).astype(PCY_DTYPE_F64).to_vector<double>();
    const auto bo = x.astype(PCY_DTYPE_BOOL).to_vector<uint8_t>();
    CHECK(i8[0] == 0);
    CHECK(i8[1] == 127);
    CHECK(i8[2] == -128);
    CHECK(i8[3] == 127);
    CHECK(i8[4] == -128);
    CHECK(i8[5] == 2);
    CHECK(i8[6] == -2);
    CHECK(u8[4] == 0);
    CHECK(u8[3] == 255);
    CHECK(i64[7] == INT64_MAX);
    CHECK(i64[1] == INT64_MAX);
    CHECK(std::isnan(h[0]));
    CHECK(h[9] == 65504.0);       // below the halfway point: the largest finite
    CHECK(std::isinf(h[10]));     // 65520 rounds up to inf
    CHECK(h[11] == 1.0009765625); // just above a tie: one rounding (f32 first would tie to 1)
    CHECK(h[12] == 0.0);          // half the smallest subnormal: ties to even (0)
    CHECK(std::signbit(h[8]));
    CHECK(bo[0] == 1); // NaN is truthy
    CHECK(bo[8] == 0);
  }
}

TEST_CASE("array: reductions over any axes, keepdims, against float64 loops", "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    const pa::Shape s{6, 7, 33};
    const auto v = random_values(6 * 7 * 33, -2, 2);
    pa::Array x = pa::asarray(b, v, s);
    for (const std::vector<int64_t>& axes :
         {std::vector<int64_t>{}, {0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1}}) {
      INFO("axes " << axes.size() << (axes.empty() ? -1 : axes[0]));
      std::vector<bool> red(3, axes.empty());
      for (int64_t a : axes)
        red[static_cast<size_t>(a)] = true;
      pa::Shape os;
      for (size_t d = 0; d < 3; ++d)
        if (!red[d]) os.push_back(s[d]);
      const size_t on = [&] {
        size_t n = 1;
        for (int64_t e : os)
          n *= static_cast<size_t>(e);
        return n;
      }();
      std::vector<double> sum(on, 0), mx(on, -1e300), sq(on, 0), lse(on, 0);
      std::vector<int64_t> cnt(on, 0), amax(on, -1);
      auto out_index = [&](const std::vector<int64_t>& idx) {
        size_t o = 0;
        for (size_t d = 0; d < 3; ++d)
          if (!red[d]) o = o * static_cast<size_t>(s[d]) + static_cast<size_t>(idx[d]);
        return o;
      };
      auto red_pos = [&](const std::vector<int64_t>& idx) {
        int64_t p = 0;
        for (size_t d = 0; d < 3; ++d)
          if (red[d]) p = p * s[d] + idx[d];
        return p;
      };
      for (size_t i = 0; i < v.size(); ++i) {
        const auto idx = unravel(static_cast<int64_t>(i), s);
        const size_t o = out_index(idx);
        sum[o] += v[i];
        ++cnt[o];
        if (v[i] > mx[o]) {
          mx[o] = v[i];
          amax[o] = red_pos(idx);
        }
      }
      for (size_t i = 0; i < v.size(); ++i) {
        const size_t o = out_index(unravel(static_cast<int64_t>(i), s));
        const double m = sum[o] / static_cast<double>(cnt[o]);
        sq[o] += (v[i] - m) * (v[i] - m);
        lse[o] += std::exp(v[i] - mx[o]);
      }
      const auto gs = pa::sum(x, axes).to_vector<double>();
      const auto gm = pa::mean(x, axes).to_vector<double>();
      const auto gv = pa::var(x, axes, 1.0).to_vector<double>();
      const auto gx = pa::max(x, axes).to_vector<double>();
      const auto gl = pa::logsumexp(x, axes).to_vector<double>();
      REQUIRE(gs.size() == on);
      for (size_t o = 0; o < on; ++o) {
        CHECK(close(gs[o], sum[o], 0, 1e-11));
        CHECK(close(gm[o], sum[o] / static_cast<double>(cnt[o]), 0, 1e-12));
        CHECK(close(gv[o], sq[o] / static_cast<double>(cnt[o] - 1), 1e-12, 0));
        CHECK(gx[o] == mx[o]);
        CHECK(close(gl[o], mx[o] + std::log(lse[o]), 1e-12, 0));
      }
      if (axes.size() == 1) {
        const auto ga = pa::argmax(x, axes[0]).to_vector<int64_t>();
        for (size_t o = 0; o < on; ++o)
          CHECK(ga[o] == amax[o]);
      }
      pa::Array k = pa::sum(x, axes, true);
      CHECK(k.ndim() == 3);
    }
    // NaN propagates through max and sum; argmax takes the first NaN.
    std::vector<double> w{1, 2, std::nan(""), 5, std::nan("")};
    pa::Array y = pa::asarray(b, w, {5});
    CHECK(std::isnan(pa::max(y).item<double>()));
    CHECK(std::isnan(pa::sum(y).item<double>()));
    CHECK(pa::argmax(y).item<int64_t>() == 2);
    // Integer sums accumulate in i64; bool all/any.
    pa::Array i = pa::asarray(b, std::vector<int32_t>{INT32_MAX, INT32_MAX, 2}, {3});
    CHECK(pa::sum(i).item<int64_t>() == int64_t{INT32_MAX} * 2 + 2);
    CHECK(pa::all(i > 1).item<bool>());
    CHECK(!pa::any(i < 0).item<bool>());
  }
}

TEST_CASE("array: an elementwise chain feeding a reduction runs as one program", "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    const auto va = random_values(4097, -1, 1), vb = random_values(4097, -1, 1);
    pa::Array a = pa::asarray(b, va, {4097}), c = pa::asarray(b, vb, {4097});
    const uint64_t before = pa::programs_run();
    const double got = pa::sum(pa::square(a - c)).item<double>();
    CHECK(pa::programs_run() - before == 1);
    double want = 0;
    for (size_t i = 0; i < va.size(); ++i)
      want += (va[i] - vb[i]) * (va[i] - vb[i]);
    CHECK(close(got, want, 1e-12, 0));
  }
}

TEST_CASE("array: views (reshape, transpose, slices with steps, flip, broadcast) and writes",
          "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    pa::Array x = pa::arange(b, 0, 24, 1, PCY_DTYPE_I32).reshape({2, 3, 4});
    CHECK(x.is_view());
    const auto t = x.permute_dims({2, 0, 1}).to_vector<int32_t>();
    REQUIRE(t.size() == 24);
    for (int64_t i = 0; i < 24; ++i) {
      const auto idx = unravel(i, {4, 2, 3}); // (k, i, j) -> x[i, j, k]
      CHECK(t[static_cast<size_t>(i)] == idx[1] * 12 + idx[2] * 4 + idx[0]);
    }
    const auto s = x.slice(2, -1, pa::Array::npos, -2).to_vector<int32_t>(); // x[:, :, ::-2]
    REQUIRE(s.size() == 12);
    CHECK(s[0] == 3);
    CHECK(s[1] == 1);
    CHECK(s[2] == 7);
    const auto f = x.flip({1}).at(0).to_vector<int32_t>(); // x[0, ::-1, :]
    CHECK(f == std::vector<int32_t>{8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3});
    const auto bc = pa::asarray(b, std::vector<int32_t>{1, 2}, {2, 1}).broadcast_to({2, 3});
    CHECK(bc.to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1, 2, 2, 2});
    // A write into a strided slice changes only those elements.
    pa::Array z = pa::zeros(b, {3, 5}, PCY_DTYPE_F32);
    z.slice(1, 1, pa::Array::npos, 2).assign(pa::asarray(b, std::vector<float>{7, 8}, {2}));
    CHECK(z.to_vector<float>() == std::vector<float>{0, 7, 0, 8, 0, 0, 7, 0, 8, 0, 0, 7, 0, 8, 0});
    // A pending expression that reads the written memory keeps its value.
    pa::Array w = pa::ones(b, {4}, PCY_DTYPE_F32);
    pa::Array pending = w * 3.0f;
    w.assign(pa::scalar(5.0));
    CHECK(pending.to_vector<float>() == std::vector<float>{3, 3, 3, 3});
    // In place through the same view: one program.
    const uint64_t before = pa::programs_run();
    w.assign(w * 2.0f + 1.0f);
    CHECK(pa::programs_run() - before == 1);
    CHECK(w.to_vector<float>() == std::vector<float>{11, 11, 11, 11});
    // x.assign(flip(x)): the value is read through another view of the target: run first.
    pa::Array r = pa::arange(b, 0, 5, 1, PCY_DTYPE_F32);
    r.assign(r.flip());
    CHECK(r.to_vector<float>() == std::vector<float>{4, 3, 2, 1, 0});
  }
}

TEST_CASE("array: creation and scans", "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    CHECK(pa::linspace(b, 0, 1, 5).to_vector<double>() ==
          std::vector<double>{0, 0.25, 0.5, 0.75, 1});
    CHECK(pa::eye(b, 2, 3, 1, PCY_DTYPE_I8).to_vector<int8_t>() ==
          std::vector<int8_t>{0, 1, 0, 0, 0, 1});
    CHECK(pa::full(b, {2}, 2.5, PCY_DTYPE_F16).astype(PCY_DTYPE_F32).to_vector<float>() ==
          std::vector<float>{2.5f, 2.5f});
    pa::Array x = pa::arange(b, 1, 7, 1, PCY_DTYPE_I32).reshape({2, 3});
    CHECK(pa::cumulative_sum(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 6, 4, 9, 15});
    CHECK(pa::cumulative_sum(x, 0, true).to_vector<int64_t>() ==
          std::vector<int64_t>{0, 0, 0, 1, 2, 3, 5, 7, 9});
  }
}

// ---- sort and argsort against std::stable_sort
// --------------------------------------------------- The reference order, written from the rule
// (not the bundle's comparison): NaN above every number and equal to NaN; -0 == +0; stable.
template <class T> int sort_class(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v) ? 1 : 0;
  return 0;
}
template <class T> bool ref_less(T a, T b) {
  const int ca = sort_class(a), cb = sort_class(b);
  if (ca != cb) return ca < cb;
  return ca == 0 && a < b;
}
// Positions along `axis` of the row-major array v (shape s) in sorted order, per row.
template <class T>
std::vector<int64_t> ref_argsort(const std::vector<T>& v, const pa::Shape& s, size_t axis,
                                 bool descending) {
  std::vector<int64_t> out(v.size());
  int64_t inner = 1;
  for (size_t d = axis + 1; d < s.size(); ++d)
    inner *= s[d];
  const int64_t n = s[axis],
                outer = static_cast<int64_t>(v.size()) / std::max<int64_t>(1, n * inner);
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      for (int64_t k = 0; k < n; ++k)
        pos[static_cast<size_t>(k)] = k;
      std::stable_sort(pos.begin(), pos.end(), [&](int64_t x, int64_t y) {
        return descending ? ref_less(v[at(y)], v[at(x)]) : ref_less(v[at(x)], v[at(y)]);
      });
      for (int64_t k = 0; k < n; ++k)
        out[at(k)] = pos[static_cast<size_t>(k)];
    }
  return out;
}
template <class T> std::vector<T> sort_data(size_t n, bool specials) {
  std::uniform_int_distribution<int> d(-6, 6);
  std::vector<T> v(n);
  for (T& x : v) {
    const int k = d(rng());
    if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(k) * T(0.5);
      if (specials && k == -6) x = std::numeric_limits<T>::quiet_NaN();
      if (specials && k == 6) x = -std::numeric_limits<T>::quiet_NaN();
      if (specials && k == 5) x = std::numeric_limits<T>::infinity();
      if (specials && k == -5) x = -std::numeric_limits<T>::infinity();
      if (specials && k == 0 && (d(rng()) & 1)) x = T(-0.0);
    } else if constexpr (std::is_unsigned_v<T>) {
      x = static_cast<T>(k + 6);
    } else {
      x = static_cast<T>(k);
    }
  }
  return v;
}
template <class T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T> void check_sorts(const Backend& b, const pa::Shape& s) {
  size_t n = 1;
  for (int64_t e : s)
    n *= static_cast<size_t>(e);
  const std::vector<T> v = sort_data<T>(n, true);
  const pa::Array x = pa::asarray(b, v, s);
  for (size_t axis = 0; axis < s.size(); ++axis)
    for (bool desc : {false, true}) {
      INFO("shape " << s.size() << "-d, axis " << axis << ", descending " << desc << ", n " << n);
      const std::vector<int64_t> want = ref_argsort(v, s, axis, desc);
      const int64_t ax = axis + 1 == s.size() && !desc ? -1 : static_cast<int64_t>(axis);
      CHECK(pa::argsort(x, ax, desc).to_vector<int64_t>() == want);
      // The values: the input's elements at the positions (bit for bit: -0 and +0 keep their
      // order, NaN payloads and signs stay).
      int64_t inner = 1;
      for (size_t d = axis + 1; d < s.size(); ++d)
        inner *= s[d];
      std::vector<T> wv(n);
      for (size_t i = 0; i < n; ++i) {
        const int64_t k = (static_cast<int64_t>(i) / inner) % s[axis];
        wv[i] = v[i - static_cast<size_t>(k * inner) + static_cast<size_t>(want[i] * inner)];
      }
      CHECK(same_bits(pa::sort(x, ax, desc).to_vector<T>(), wv));
    }
}

TEST_CASE("array: sort and argsort match std::stable_sort (every axis, NaN, -0, duplicates)",
          "[array][sort]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    for (const pa::Shape& s :
         {pa::Shape{1}, pa::Shape{2}, pa::Shape{3}, pa::Shape{31}, pa::Shape{1000},
          pa::Shape{3, 5, 4}, pa::Shape{2, 1, 33}, pa::Shape{4, 7}, pa::Shape{2, 0, 3}}) {
      check_sorts<double>(b, s);
      check_sorts<float>(b, s);
      check_sorts<int32_t>(b, s);
    }
    for (const pa::Shape& s : {pa::Shape{17}, pa::Shape{3, 9}}) {
      check_sorts<int8_t>(b, s);
      check_sorts<int16_t>(b, s);
      check_sorts<int64_t>(b, s);
      check_sorts<uint8_t>(b, s);
    }
    // Views (a transposed, reversed, strided input) and pending expressions.
    const std::vector<double> v = sort_data<double>(60, true);
    const pa::Array base = pa::asarray(b, v, {6, 10});
    const pa::Array view = base.slice(1, 9, pa::Array::npos, -2).permute_dims({1, 0}); // (5, 6)
    const std::vector<double> vv = view.to_vector<double>();
    for (int64_t axis : {0, 1}) {
      CHECK(pa::argsort(view, axis).to_vector<int64_t>() ==
            ref_argsort(vv, {5, 6}, static_cast<size_t>(axis), false));
      CHECK(pa::argsort(view * 2.0, axis, true).to_vector<int64_t>() ==
            ref_argsort(vv, {5, 6}, static_cast<size_t>(axis), true));
    }
    // bool: false < true, stable.
    const pa::Array bl = pa::asarray(b, std::vector<uint8_t>{1, 0, 1, 1, 0}).astype(PCY_DTYPE_BOOL);
    CHECK(pa::argsort(bl).to_vector<int64_t>() == std::vector<int64_t>{1, 4, 0, 2, 3});
    CHECK(pa::argsort(bl, -1, true).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 3, 1, 4});
    CHECK(pa::sort(bl).to_vector<uint8_t>() == std::vector<uint8_t>{0, 0, 1, 1, 1});
    // Half types sort as f32 and come back exactly.
    const pa::Array h =
        pa::asarray(b, std::vector<float>{2.5f, -1, 0.5f, -1, 3}).astype(PCY_DTYPE_F16);
    CHECK(pa::sort(h).type() == PCY_DTYPE_F16);
    CHECK(pa::sort(h).astype(PCY_DTYPE_F32).to_vector<float>() ==
          std::vector<float>{-1, -1, 0.5f, 2.5f, 3});
    CHECK(pa::argsort(h, 0, true).to_vector<int64_t>() == std::vector<int64_t>{4, 0, 2, 1, 3});
    // 0-d arrays and bad axes are refused.
    auto msg = [](auto&& f) {
      try {
        f();
      } catch (const error& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    const pa::Array zero_d = pa::asarray(b, std::vector<float>{1}).reshape({});
    CHECK(msg([&] { (void)pa::sort(zero_d); }).find("sort") != std::string::npos);
    CHECK(msg([&] { (void)pa::argsort(base, 2); }).find("argsort: argument axis") !=
          std::string::npos);
  }
}

TEST_CASE("array: bad arguments are refused naming the function and the argument", "[array]") {
  Backend b("native");
  pa::Array x = pa::zeros(b, {3, 4});
  auto msg = [](auto&& f) {
    try {
      f();
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(msg([&] { (void)(x + pa::zeros(b, {5})); }).find("do not broadcast") != std::string::npos);
  CHECK(msg([&] { (void)pa::sum(x, {2}); }).find("argument axis") != std::string::npos);
  CHECK(msg([&] { (void)x.reshape({5, 3}); }).find("cannot reshape") != std::string::npos);
  CHECK(msg([&] { (void)pa::max(pa::zeros(b, {3, 0}), {1}); }).find("empty") != std::string::npos);
  CHECK(msg([&] { (void)(x & x); }).find("integers") != std::string::npos);
}

TEST_CASE("array: take, concat, stack and matmul against loops", "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    pa::Array table = pa::arange(b, 0, 12, 1, PCY_DTYPE_F32).reshape({4, 3});
    pa::Array ids = pa::asarray(b, std::vector<int32_t>{3, -1, 0, 7, -9}, {5});
    // Rows 3, 3 (-1), 0, 3 (7 clipped), 0 (-9 clipped).
    CHECK(pa::take(table, ids, 0).to_vector<float>() ==
          std::vector<float>{9, 10, 11, 9, 10, 11, 0, 1, 2, 9, 10, 11, 0, 1, 2});
    CHECK(pa::take(table, pa::asarray(b, std::vector<int64_t>{2, 0}, {2}), 1).to_vector<float>() ==
          std::vector<float>{2, 0, 5, 3, 8, 6, 11, 9});
    pa::Array c = pa::concat({table, table.slice(0, 0, 1) * 10.0f}, 0);
    CHECK(c.shape() == pa::Shape{5, 3});
    CHECK(c.to_vector<float>().back() == 20.0f);
    CHECK(pa::stack({table.at(0), table.at(1)}, 1).to_vector<float>() ==
          std::vector<float>{0, 3, 1, 4, 2, 5});
    for (const pcy_dtype t : {PCY_DTYPE_F64, PCY_DTYPE_I32}) {
      const int64_t m = 7, k = 13, n = 5, batch = 3;
      const auto va = random_values(static_cast<size_t>(batch * m * k), -4, 4);
      const auto vb = random_values(static_cast<size_t>(k * n), -4, 4);
      pa::Array x = pa::asarray(b, va, {batch, m, k}).astype(t);
      pa::Array y = pa::asarray(b, vb, {k, n}).astype(t);
      const auto got = pa::matmul(x, y).astype(PCY_DTYPE_F64).to_vector<double>();
      const auto got2 = pa::matmul(x.at(1), y).astype(PCY_DTYPE_F64).to_vector<double>();
      REQUIRE(got.size() == static_cast<size_t>(batch * m * n));
      for (int64_t bi = 0; bi < batch; ++bi)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double want = 0;
            for (int64_t q = 0; q < k; ++q) {
              double av = va[static_cast<size_t>((bi * m + i) * k + q)];
              double bv = vb[static_cast<size_t>(q * n + j)];
              if (t == PCY_DTYPE_I32) {
                av = std::trunc(av);
                bv = std::trunc(bv);
              }
              want += av * bv;
            }
            const double g = got[static_cast<size_t>((bi * m + i) * n + j)];
            REQUIRE(close(g, want, 1e-12, 1e-12));
            if (bi == 1) REQUIRE(close(got2[static_cast<size_t>(i * n + j)], want, 1e-12, 1e-12));
          }
    }
    // bool: the logical or of logical ands, as NumPy's (p = [[1,0,0],[1,1,1]], q =
    // [[0,1],[0,0],[1,0]])
    pa::Array p =
        pa::asarray(b, std::vector<uint8_t>{1, 0, 0, 1, 1, 1}, {2, 3}).astype(PCY_DTYPE_BOOL);
    pa::Array q =
        pa::asarray(b, std::vector<uint8_t>{0, 1, 0, 0, 1, 0}, {3, 2}).astype(PCY_DTYPE_BOOL);
    pa::Array pq = pa::matmul(p, q);
    CHECK(pq.type() == PCY_DTYPE_BOOL);
    CHECK(pq.astype(PCY_DTYPE_U8).to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 1, 1});
  }
}

TEST_CASE("array: batched matmul (gemm_batched) with broadcasting and transposed views",
          "[array]") {
  // [..., m, k] @ [..., k, n] against float64 loops: equal batches, one matrix for all (stride
  // 0), a partial broadcast (materialised), transposed (mT) operands, awkward sizes.
  struct shape_case {
    pa::Shape x, y;
    bool tx, ty; // operand given as the mT of a tensor of the swapped shape
  };
  const shape_case cases[] = {
      {{3, 7, 13}, {3, 13, 5}, false, false}, {{4, 9, 6}, {6, 11}, false, false},
      {{6, 11}, {2, 3, 11, 4}, false, false}, {{2, 1, 5, 3}, {4, 3, 7}, false, false},
      {{3, 7, 13}, {3, 13, 5}, true, true},   {{1, 17, 9}, {5, 9, 1}, true, false}};
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    for (const pcy_dtype t : {PCY_DTYPE_F32, PCY_DTYPE_F64}) {
      for (const shape_case& sc : cases) {
        auto make = [&](const pa::Shape& s, bool tr, std::vector<double>& vals) {
          pa::Shape stored = s;
          if (tr) std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
          uint64_t n = 1;
          for (int64_t e : s)
            n *= static_cast<uint64_t>(e);
          const auto v = random_values(static_cast<size_t>(n), -3, 3);
          pa::Array a = pa::asarray(b, v, stored).astype(t);
          a.eval();
          if (tr) a = a.mT();
          // the logical values, row-major over s, as the dtype holds them
          vals = a.astype(PCY_DTYPE_F64).to_vector<double>();
          return a;
        };
        std::vector<double> vx, vy;
        pa::Array x = make(sc.x, sc.tx, vx), y = make(sc.y, sc.ty, vy);
        const uint64_t programs = pa::programs_run();
        pa::Array z = pa::matmul(x, y);
        z.eval();
        // Where the backend has gemm_batched and neither operand needs a copy: one BLAS call,
        // no array program (not the elementwise fallback).
        if (&sc == &cases[0] && pa::detail::has_blas<pcy_blas_gemm_batched_schema>(b, t))
          CHECK(pa::programs_run() == programs);
        const auto got = z.astype(PCY_DTYPE_F64).to_vector<double>();
        // reference: broadcast batch indices
        const size_t rx = sc.x.size(), ry = sc.y.size();
        const int64_t m = sc.x[rx - 2], k = sc.x[rx - 1], n = sc.y[ry - 1];
        const pa::Shape& zs = z.shape();
        const size_t rb = zs.size() - 2;
        int64_t nb = 1;
        for (size_t d = 0; d < rb; ++d)
          nb *= zs[d];
        INFO("x " << pa::detail::shape_str(sc.x) << " y " << pa::detail::shape_str(sc.y));
        REQUIRE(got.size() == static_cast<size_t>(nb * m * n));
        for (int64_t bi = 0; bi < nb; ++bi) {
          // batch index -> each operand's batch offset (size-1 and missing dimensions broadcast)
          int64_t rem = bi, ox = 0, oy = 0, sx = m * k, sy = k * n;
          for (size_t d = rb; d-- > 0;) {
            const int64_t i = rem % zs[d];
            rem /= zs[d];
            const int64_t dx = static_cast<int64_t>(d) - static_cast<int64_t>(rb - (rx - 2));
            const int64_t dy = static_cast<int64_t>(d) - static_cast<int64_t>(rb - (ry - 2));
            if (dx >= 0) {
              const int64_t e = sc.x[static_cast<size_t>(dx)];
              ox += (e == 1 ? 0 : i) * sx;
              sx *= e;
            }
            if (dy >= 0) {
              const int64_t e = sc.y[static_cast<size_t>(dy)];
              oy += (e == 1 ? 0 : i) * sy;
              sy *= e;
            }
          }
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double want = 0, mag = 0;
              for (int64_t q = 0; q < k; ++q) {
                const double p = vx[static_cast<size_t>(ox + i * k + q)] *
                                 vy[static_cast<size_t>(oy + q * n + j)];
                want += p;
                mag += std::fabs(p);
              }
              const double g = got[static_cast<size_t>((bi * m + i) * n + j)];
              const double eps = t == PCY_DTYPE_F32 ? 1.2e-7 : 2.3e-16;
              INFO("batch " << bi << " (" << i << ", " << j << "): " << g << " want " << want);
              REQUIRE(std::fabs(g - want) <= 2 * static_cast<double>(k) * eps * mag + 1e-300);
            }
        }
      }
    }
  }
}

TEST_CASE("array: an operand of a value written into its own input refuses to run later",
          "[array]") {
  Backend b("native");
  pa::Array w = pa::ones(b, {3});
  pa::Array t = w * 2.0f; // named: still held after the write
  w.assign(t + 1.0f);
  CHECK(w.to_vector<float>() == std::vector<float>{3, 3, 3});
  try {
    (void)t.to_vector<float>();
    FAIL("expected an error");
  } catch (const error& e) {
    CHECK(std::string(e.what()).find("eval() it before that write") != std::string::npos);
  }
}

TEST_CASE("array: random draws: the same bits on every backend, offsets split one stream, "
          "moments",
          "[array]") {
  Backend native("native");
  const uint64_t seed = 0x5eed'0000'1234ull;
  const auto ref_n = pa::random::normal(native, {1000}, seed, 77).to_vector<float>();
  const auto ref_u =
      pa::random::uniform(native, {999}, seed, 5, -2, 3, PCY_DTYPE_F64).to_vector<double>();
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    const auto n = pa::random::normal(b, {1000}, seed, 77).to_vector<float>();
    const auto u = pa::random::uniform(b, {999}, seed, 5, -2, 3, PCY_DTYPE_F64).to_vector<double>();
    for (size_t i = 0; i < n.size(); ++i)
      REQUIRE(same_bits(n[i], ref_n[i]));
    for (size_t i = 0; i < u.size(); ++i)
      REQUIRE(same_bits(u[i], ref_u[i]));
    // Element e at offset o is element e - 40 at offset o + 10 (4 f32 elements per counter).
    const auto shifted = pa::random::normal(b, {960}, seed, 87).to_vector<float>();
    for (size_t i = 0; i < shifted.size(); ++i)
      REQUIRE(same_bits(shifted[i], n[i + 40]));
    // and element e - 20 at offset o + 10 for f64 (2 per counter)
    const auto u_shift =
        pa::random::uniform(b, {979}, seed, 15, -2, 3, PCY_DTYPE_F64).to_vector<double>();
    for (size_t i = 0; i < u_shift.size(); ++i)
      REQUIRE(same_bits(u_shift[i], u[i + 20]));
    // A strided view draws in its own row-major order.
    pa::Array z = pa::zeros(b, {4, 6});
    pa::Array g = pa::random::normal(b, {4, 3}, seed, 77);
    z.slice(1, 0, pa::Array::npos, 2).assign(g);
    const auto zv = z.to_vector<float>();
    for (size_t i = 0; i < 12; ++i)
      REQUIRE(same_bits(zv[(i / 3) * 6 + (i % 3) * 2], n[i]));
    // Moments of a larger draw.
    pa::random::Generator gen(seed);
    pa::Array big = gen.normal(b, {200000}, 1.5, 2.0, PCY_DTYPE_F64);
    const double m = pa::mean(big).item<double>(), sd = pa::std(big).item<double>();
    CHECK(std::fabs(m - 1.5) < 0.02);
    CHECK(std::fabs(sd - 2.0) < 0.02);
    const double p = pa::mean(gen.bernoulli(b, {100000}, 0.25)).item<double>();
    CHECK(std::fabs(p - 0.25) < 0.01);
    pa::Array ri = gen.randint(b, {50000}, -3, 4, PCY_DTYPE_I32);
    CHECK(pa::min(ri).item<int32_t>() == -3);
    CHECK(pa::max(ri).item<int32_t>() == 3);
    // counters: 2 f64 normals, 4 Bernoulli draws, 2 randint draws per counter
    CHECK(gen.offset() == 200000 / 2 + 100000 / 4 + 50000 / 2);
    // Draws whose sizes are whole counters continue one stream; a partial counter is skipped.
    pa::random::Generator g2(seed, 3);
    const auto a8 = g2.normal(b, {8}).to_vector<float>();
    const auto a7 = g2.normal(b, {7}).to_vector<float>(); // counters 5 .. 6, lane 3 of 6 unused
    const auto a4 = g2.normal(b, {4}).to_vector<float>(); // counter 7
    CHECK(g2.offset() == 3 + 2 + 2 + 1);
    const auto one = pa::random::normal(b, {20}, seed, 3).to_vector<float>();
    for (size_t i = 0; i < 8; ++i)
      REQUIRE(same_bits(a8[i], one[i]));
    for (size_t i = 0; i < 7; ++i)
      REQUIRE(same_bits(a7[i], one[8 + i]));
    for (size_t i = 0; i < 4; ++i)
      REQUIRE(same_bits(a4[i], one[16 + i]));
  }
}

TEST_CASE("array: fill_normal and fill_uniform draw into a view: the same bits as a new draw",
          "[array]") {
  const uint64_t seed = 4242;
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    // the whole tensor
    pa::Array x = pa::empty(b, {37, 5});
    pa::random::fill_normal(x, seed, 3, 1.0, 2.0);
    const auto want = pa::random::normal(b, {37, 5}, seed, 3, 1.0, 2.0).to_vector<float>();
    const auto got = x.to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
      REQUIRE(same_bits(got[i], want[i]));
    // every other column of an f64 array: the view's row-major order; the rest untouched
    pa::Array z = pa::full(b, {6, 8}, -7.0, PCY_DTYPE_F64);
    pa::Array v = z.slice(1, 1, pa::Array::npos, 2);
    pa::random::fill_uniform(v, seed, 11, -1, 1);
    const auto u =
        pa::random::uniform(b, {6, 4}, seed, 11, -1, 1, PCY_DTYPE_F64).to_vector<double>();
    const auto zv = z.to_vector<double>();
    for (size_t r = 0; r < 6; ++r)
      for (size_t c = 0; c < 8; ++c) {
        const double e = zv[r * 8 + c];
        if (c % 2 == 1)
          REQUIRE(same_bits(e, u[r * 4 + c / 2]));
        else
          REQUIRE(e == -7.0);
      }
    // an expression reading the target runs before the draw overwrites it
    pa::Array y = pa::ones(b, {16});
    pa::Array pending = y * 3.0f;
    pa::random::fill_normal(y, seed);
    CHECK(pending.to_vector<float>() == std::vector<float>(16, 3.0f));
    // a Generator's fill takes the counters a draw of that shape takes
    pa::random::Generator g(seed, 5);
    pa::Array w = pa::empty(b, {10});
    g.fill_normal(w);
    CHECK(g.offset() == 5 + 3);
    const auto wn = pa::random::normal(b, {10}, seed, 5).to_vector<float>();
    const auto wv = w.to_vector<float>();
    for (size_t i = 0; i < 10; ++i)
      REQUIRE(same_bits(wv[i], wn[i]));
    // refused: a pending expression, an integer array
    pa::Array p2 = y + 1.0f;
    CHECK_THROWS_WITH(pa::random::fill_normal(p2, seed),
                      Catch::Matchers::Contains("pending expression"));
    pa::Array iv = pa::zeros(b, {4}, PCY_DTYPE_I32);
    CHECK_THROWS_WITH(pa::random::fill_uniform(iv, seed), Catch::Matchers::Contains("floating"));
  }
}

TEST_CASE("array: var and std of data far from zero (cancellation) match float64", "[array]") {
  // 1e4 + u, u in [-1, 1): E[x^2] - E[x]^2 in f32 would lose every digit; the contract's two
  // passes or stable merge (the GPU bundles' one-pass Welford/Chan) keep them. Long rows (the
  // split path on GPUs), short ones and a whole-array reduction.
  std::mt19937_64 g(20261206);
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t rows = 7, cols = 42857;
  std::vector<float> h(static_cast<size_t>(rows * cols));
  for (float& v : h)
    v = static_cast<float>(1e4 + u(g));
  auto ref_var = [&](size_t first, size_t n, size_t step) {
    double m = 0, s2 = 0;
    for (size_t i = 0; i < n; ++i)
      m += h[first + i * step];
    m /= static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) {
      const double d = h[first + i * step] - m;
      s2 += d * d;
    }
    return s2 / static_cast<double>(n - 1);
  };
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    SharedTensor<float> t({rows, cols});
    std::copy(h.begin(), h.end(), t.write_only().begin());
    pa::Array x = pa::wrap(b, t);
    const int64_t last[] = {1}, first[] = {0};
    const auto vr = pa::var(x, last, 1.0).to_vector<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const double w = ref_var(static_cast<size_t>(r * cols), static_cast<size_t>(cols), 1);
      INFO("row " << r);
      CHECK(std::fabs(vr[static_cast<size_t>(r)] - w) <= 1e-3 * w);
    }
    const auto vc = pa::std(x, first, 1.0).to_vector<float>();
    for (int64_t c = 0; c < cols; c += 997) {
      const double w = std::sqrt(
          ref_var(static_cast<size_t>(c), static_cast<size_t>(rows), static_cast<size_t>(cols)));
      INFO("column " << c);
      CHECK(std::fabs(vc[static_cast<size_t>(c)] - w) <= 1e-3 * w);
    }
    const double all = pa::var(x, {}, 1.0).item<float>();
    const double wall = ref_var(0, h.size(), 1);
    CHECK(std::fabs(all - wall) <= 1e-3 * wall);
  }
}

TEST_CASE("array: fused expressions record into graphs and replay with new inputs", "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    SharedTensor<float> x({257});
    for (float& v : x.write_only())
      v = 1.0f;
    pa::Array a = pa::wrap(b, x);
    pa::Array y = pa::empty(b, {257});
    pa::Array total;
    Graph g = Graph::record(b, [&] {
      y.assign(pa::exp(a) * 2.0f + 1.0f); // one program, its words copied at recording
      total = pa::sum(y * y);
    });
    for (int round = 1; round <= 3; ++round) {
      for (float& v : x.write_only())
        v = static_cast<float>(round) * 0.25f;
      g.replay();
      const float want = std::exp(static_cast<float>(round) * 0.25f) * 2.0f + 1.0f;
      const auto yv = y.to_vector<float>();
      CHECK(close(yv[0], want, 1e-6, 0));
      CHECK(close(yv[256], want, 1e-6, 0));
      CHECK(close(total.item<float>(), 257.0 * want * want, 1e-5, 0));
    }
  }
}

TEST_CASE("array: assign_all writes several results in one program (an Adam step)", "[array]") {
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    const auto vg = random_values(1000, -1, 1), vp = random_values(1000, -1, 1);
    pa::Array p = pa::asarray(b, as<float>(vp), {1000}), g = pa::asarray(b, as<float>(vg), {1000});
    pa::Array m = pa::zeros(b, {1000}), v = pa::zeros(b, {1000});
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, step = 0.01;
    std::vector<float> hm(1000, 0), hv(1000, 0), hp = as<float>(vp);
    const auto fg = as<float>(vg);
    for (int t = 0; t < 3; ++t) {
      const uint64_t before = pa::programs_run();
      pa::Array m_new = m * b1 + g * (1 - b1);
      pa::Array v_new = v * b2 + pa::square(g) * (1 - b2);
      pa::assign_all({m, v, p}, {m_new, v_new, p - m_new * step / (pa::sqrt(v_new) + eps)});
      CHECK(pa::programs_run() - before == 1);
      for (size_t i = 0; i < 1000; ++i) {
        hm[i] = static_cast<float>(hm[i] * static_cast<float>(b1)) +
                static_cast<float>(fg[i] * static_cast<float>(1 - b1));
        hv[i] = static_cast<float>(hv[i] * static_cast<float>(b2)) +
                static_cast<float>((fg[i] * fg[i]) * static_cast<float>(1 - b2));
        hp[i] = hp[i] -
                (hm[i] * static_cast<float>(step)) / (std::sqrt(hv[i]) + static_cast<float>(eps));
      }
    }
    const auto gm = m.to_vector<float>(), gv = v.to_vector<float>(), gp = p.to_vector<float>();
    // The named values read the targets they were written into: they refuse to run again.
    pa::Array again = g * (1 - b1);
    CHECK(again.to_vector<float>().size() == 1000); // an expression of g alone is still fine
    for (size_t i = 0; i < 1000; ++i) {
      REQUIRE(same_bits(gm[i], hm[i]));
      REQUIRE(same_bits(gv[i], hv[i]));
      REQUIRE(same_bits(gp[i], hp[i]));
    }
  }
}

TEST_CASE("array: random permutations are bijections, the same on every backend, uniform",
          "[array]") {
  Backend native("native");
  for (const int64_t n : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{1000}, int64_t{4097}}) {
    const auto ref = pa::random::permutation(native, n, 77, 5).to_vector<int64_t>();
    std::vector<int> seen(static_cast<size_t>(n), 0);
    for (int64_t v : ref) {
      REQUIRE(v >= 0);
      REQUIRE(v < n);
      ++seen[static_cast<size_t>(v)];
    }
    for (int c : seen)
      REQUIRE(c == 1);
    for (const Backend& b : backends())
      CHECK(pa::random::permutation(b, n, 77, 5).to_vector<int64_t>() == ref);
    if (n == 4097) CHECK(pa::random::permutation(native, n, 77, 6).to_vector<int64_t>() != ref);
  }
  // Where element 0 lands over 6000 permutations of 6: each place about 1000 times.
  std::vector<int> where(6, 0);
  for (uint64_t s = 0; s < 6000; ++s)
    ++where[static_cast<size_t>(pa::random::permutation(native, 6, s).to_vector<int64_t>()[0])];
  double chi = 0;
  for (int c : where)
    chi += (c - 1000.0) * (c - 1000.0) / 1000.0;
  CHECK(chi < 20.5); // 5 degrees of freedom, p = 0.001
}

TEST_CASE("array: x[{...}] indexing as NumPy's basic indexing", "[array]") {
  Backend b("native");
  pa::Array x = pa::arange(b, 0, 24, 1, PCY_DTYPE_I32).reshape({2, 3, 4});
  CHECK(x[{1, pa::slice(0, pa::end, 2)}].to_vector<int32_t>() ==
        std::vector<int32_t>{12, 13, 14, 15, 20, 21, 22, 23}); // x[1, ::2]
  CHECK(x[{pa::ellipsis, 0}].to_vector<int32_t>() == std::vector<int32_t>{0, 4, 8, 12, 16, 20});
  CHECK(x[{pa::slice(), -1, pa::slice(pa::end, pa::end, -3)}].to_vector<int32_t>() ==
        std::vector<int32_t>{11, 8, 23, 20}); // x[:, -1, ::-3]
  CHECK(x[{0, pa::newaxis, 1}].shape() == pa::Shape{1, 4});
  CHECK(x[{pa::ellipsis}].shape() == pa::Shape{2, 3, 4});
  try {
    (void)x[{0, 0, 0, 0}];
    FAIL("four indices for three dimensions were accepted");
  } catch (const error& e) {
    CHECK(std::string(e.what()).find("4 indices") != std::string::npos);
  }
}

TEST_CASE("array: repeated programs (the front-end's and the bundles' memos of their last ones) "
          "see every change of constant, operand, output, view and dtype",
          "[array][memo]") {
  using F = std::vector<float>;
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    pa::Array x = pa::asarray(b, F{1, 2, 3, 4}, {4});
    pa::Array x2 = pa::asarray(b, F{10, 20, 30, 40}, {4});
    pa::Array y = pa::zeros(b, {4}), y2 = pa::zeros(b, {4});
    for (int i = 0; i < 3; ++i) {
      y.assign(x * 2.0f + 1.0f);
      CHECK(y.to_vector<float>() == F{3, 5, 7, 9});
    }
    y.assign(x * 2.0f + 5.0f); // another constant
    CHECK(y.to_vector<float>() == F{7, 9, 11, 13});
    y.assign(x * 3.0f + 1.0f);
    CHECK(y.to_vector<float>() == F{4, 7, 10, 13});
    y.assign(x * 2 + 1); // int constants: the same f32 words
    CHECK(y.to_vector<float>() == F{3, 5, 7, 9});
    y.assign(x2 * 2.0f + 1.0f); // another operand
    CHECK(y.to_vector<float>() == F{21, 41, 61, 81});
    y2.assign(x * 2.0f + 1.0f); // another output
    CHECK(y2.to_vector<float>() == F{3, 5, 7, 9});
    CHECK(y.to_vector<float>() == F{21, 41, 61, 81});
    y.assign(x * 2.0f + 1.0f);
    CHECK(y.to_vector<float>() == F{3, 5, 7, 9});
    x.assign(pa::asarray(b, F{5, 6, 7, 8}, {4})); // new values in the same tensor
    y.assign(x * 2.0f + 1.0f);
    CHECK(y.to_vector<float>() == F{11, 13, 15, 17});
    x.assign(x * 2.0f + 1.0f); // in place, repeated
    x.assign(x * 2.0f + 1.0f);
    CHECK(x.to_vector<float>() == F{23, 27, 31, 35});
    y.assign(x + x); // one node twice, and two nodes of one view
    CHECK(y.to_vector<float>() == F{46, 54, 62, 70});
    y.assign(x + x.reshape({4}));
    CHECK(y.to_vector<float>() == F{46, 54, 62, 70});
    y.assign(x - x2);
    CHECK(y.to_vector<float>() == F{13, 7, 1, -5});
    y.assign(x2 - x);
    CHECK(y.to_vector<float>() == F{-13, -7, -1, 5});
    // Views of one tensor: other offsets and strides, the same shape.
    pa::Array big = pa::asarray(b, F{1, 2, 3, 4, 5, 6, 7, 8}, {8});
    y.assign(big.slice(0, 0, 4) * 2.0f + 1.0f);
    CHECK(y.to_vector<float>() == F{3, 5, 7, 9});
    y.assign(big.slice(0, 4, 8) * 2.0f + 1.0f);
    CHECK(y.to_vector<float>() == F{11, 13, 15, 17});
    y.assign(big.slice(0, 0, 8, 2) * 2.0f + 1.0f);
    CHECK(y.to_vector<float>() == F{3, 7, 11, 15});
    y.assign(big.flip().slice(0, 0, 4) * 2.0f + 1.0f);
    CHECK(y.to_vector<float>() == F{17, 15, 13, 11});
    big.slice(0, 4, 8).assign(x2 * 2.0f + 1.0f); // another view as the output
    big.slice(0, 0, 4).assign(x2 * 2.0f + 1.0f);
    CHECK(big.to_vector<float>() == F{21, 41, 61, 81, 21, 41, 61, 81});
    // Other dtypes with the same expression.
    pa::Array xd = pa::asarray(b, std::vector<double>{1, 2, 3, 4}, {4});
    pa::Array yd = pa::zeros(b, {4}, pa::dt::f64);
    yd.assign(xd * 2.0 + 1.0);
    CHECK(yd.to_vector<double>() == std::vector<double>{3, 5, 7, 9});
    y.assign(xd * 2.0 + 1.0);
    CHECK(y.to_vector<float>() == F{3, 5, 7, 9});
    pa::Array xi = pa::asarray(b, std::vector<int32_t>{1, 2, 3, 4}, {4});
    y.assign(xi * 2 + 1);
    CHECK(y.to_vector<float>() == F{3, 5, 7, 9});
    pa::Array yi = pa::zeros(b, {4}, pa::dt::i32);
    yi.assign(xi * 2 + 1);
    CHECK(yi.to_vector<int32_t>() == std::vector<int32_t>{3, 5, 7, 9});
    yi.assign(xi * 2.5 + 1); // f64 value, cast to i32
    CHECK(yi.to_vector<int32_t>() == std::vector<int32_t>{3, 6, 8, 11});
    // Broadcasting into a larger output.
    pa::Array m = pa::zeros(b, {2, 4});
    m.assign(x2 * 2.0f + 1.0f);
    CHECK(m.to_vector<float>() == F{21, 41, 61, 81, 21, 41, 61, 81});
    m.assign(pa::asarray(b, F{1, 2}, {2, 1}) * 2.0f + 1.0f);
    CHECK(m.to_vector<float>() == F{3, 3, 3, 3, 5, 5, 5, 5});
    // New results (eval): the same tree over other tensors and shapes.
    for (int i = 0; i < 3; ++i)
      CHECK((x2 + x2).eval().to_vector<float>() == F{20, 40, 60, 80});
    CHECK((big.slice(0, 0, 4) + big.slice(0, 0, 4)).eval().to_vector<float>() ==
          F{42, 82, 122, 162});
    CHECK((x2 + 1.5f).eval().to_vector<float>() == F{11.5f, 21.5f, 31.5f, 41.5f});
    CHECK((x2 + 2.5f).eval().to_vector<float>() == F{12.5f, 22.5f, 32.5f, 42.5f});
    CHECK((m + m).eval().to_vector<float>() == F{6, 6, 6, 6, 10, 10, 10, 10});
  }
}

// The bundles' memo keys a program by its words, the operands' dtypes, shapes and byte offsets and
// which operands share memory, not by where their memory lies: new arrays of one view (a new
// result each call, as every Python op makes) repeat it with their own memory bound, and every
// change of view, dtype or aliasing between repeats is decoded and checked afresh. Each result
// against host arithmetic.
TEST_CASE("array: new arrays of one view repeat the memo with their own memory; changed views, "
          "dtypes, offsets and aliasing between repeats are seen",
          "[array][memo]") {
  using F = std::vector<float>;
  auto twice_plus = [](F v, float c) {
    for (float& e : v)
      e = e * 2.0f + c;
    return v;
  };
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    // New results kept alive, so each lies elsewhere; new inputs of the same shape.
    std::vector<pa::Array> kept, ins;
    std::vector<F> want;
    for (int i = 0; i < 12; ++i) {
      F v(6);
      for (size_t j = 0; j < v.size(); ++j)
        v[j] = static_cast<float>(i * 10) + static_cast<float>(j);
      ins.push_back(pa::asarray(b, v, {6}));
      kept.push_back((ins.back() * 2.0f + 1.0f).eval());
      want.push_back(twice_plus(v, 1.0f));
      kept.push_back((ins.front() * 2.0f + 1.0f).eval()); // a new output over the first input
      want.push_back(twice_plus(F{0, 1, 2, 3, 4, 5}, 1.0f));
    }
    for (size_t i = 0; i < kept.size(); ++i) {
      INFO("result " << i);
      CHECK(kept[i].to_vector<float>() == want[i]);
    }
    // One element (the one-chunk form of a rank-0 index space), new each call.
    pa::Array one = pa::asarray(b, F{3}, {1});
    std::vector<pa::Array> ones;
    for (int i = 0; i < 5; ++i)
      ones.push_back((one + one).eval());
    for (const pa::Array& r : ones)
      CHECK(r.to_vector<float>() == F{6});
    // The same words over distinct tensors and in place (the output is the input, same view),
    // alternating: the aliasing pattern differs, so each is decoded.
    F host = {1, 2, 3, 4, 5, 6};
    pa::Array t = pa::asarray(b, host, {6}), y = pa::zeros(b, {6});
    for (int i = 0; i < 3; ++i) {
      y.assign(t * 2.0f + 1.0f);
      CHECK(y.to_vector<float>() == twice_plus(host, 1.0f));
      t.assign(t * 2.0f + 1.0f);
      host = twice_plus(host, 1.0f);
      CHECK(t.to_vector<float>() == host);
    }
    // Views of one tensor at other offsets and strides, new results each; then outputs that are
    // views of the input's tensor (in place through the same view, and overlapping it through
    // another view), against distinct tensors of the same views.
    F bh(16);
    for (size_t j = 0; j < bh.size(); ++j)
      bh[j] = static_cast<float>(j);
    pa::Array big = pa::asarray(b, bh, {16}), other = pa::zeros(b, {16});
    for (int64_t off : {0, 4, 8, 12, 4, 0}) {
      INFO("offset " << off);
      const F got = (big.slice(0, off, off + 4) * 2.0f + 1.0f).eval().to_vector<float>();
      CHECK(got == twice_plus(F(bh.begin() + off, bh.begin() + off + 4), 1.0f));
    }
    CHECK((big.slice(0, 0, 16, 4) * 2.0f + 1.0f).eval().to_vector<float>() ==
          twice_plus(F{0, 4, 8, 12}, 1.0f));
    for (int i = 0; i < 2; ++i) {
      other.slice(0, 1, 9).assign(big.slice(0, 0, 8) * 2.0f + 1.0f);
      F ref = other.to_vector<float>();
      const F in8(bh.begin(), bh.begin() + 8);
      CHECK(F(ref.begin() + 1, ref.begin() + 9) == twice_plus(in8, 1.0f));
      big.slice(0, 1, 9).assign(big.slice(0, 0, 8) * 2.0f + 1.0f); // overlapping, shifted
      const F tw = twice_plus(in8, 1.0f);
      std::copy(tw.begin(), tw.end(), bh.begin() + 1);
      CHECK(big.to_vector<float>() == bh);
      big.slice(0, 0, 8).assign(big.slice(0, 0, 8) * 2.0f + 1.0f); // in place, the same view
      const F tw0 = twice_plus(F(bh.begin(), bh.begin() + 8), 1.0f);
      std::copy(tw0.begin(), tw0.end(), bh.begin());
      CHECK(big.to_vector<float>() == bh);
    }
    // The same expression in other dtypes, new results each.
    pa::Array xd = pa::asarray(b, std::vector<double>{1, 2, 3}, {3});
    pa::Array xf = pa::asarray(b, F{1, 2, 3}, {3});
    pa::Array xi = pa::asarray(b, std::vector<int32_t>{1, 2, 3}, {3});
    for (int i = 0; i < 2; ++i) {
      CHECK((xd + xd).eval().to_vector<double>() == std::vector<double>{2, 4, 6});
      CHECK((xf + xf).eval().to_vector<float>() == F{2, 4, 6});
      CHECK((xi + xi).eval().to_vector<int32_t>() == std::vector<int32_t>{2, 4, 6});
    }
    // A longer index space than one block (the blocked walk), new results each.
    F lh(3000);
    for (size_t j = 0; j < lh.size(); ++j)
      lh[j] = static_cast<float>(j % 97);
    pa::Array lx = pa::asarray(b, lh, {3000});
    std::vector<pa::Array> longs;
    for (int i = 0; i < 3; ++i)
      longs.push_back((lx * 2.0f + 1.0f).eval());
    for (const pa::Array& r : longs)
      CHECK(r.to_vector<float>() == twice_plus(lh, 1.0f));
  }
}

// `x OP v` and `v OP x` with a host scalar beside an f32 or f64 array build their node directly
// (not through a scalar Array and the general binary op): the same dtypes and bits as the general
// path (pa::add(x, pa::scalar(v)), ...) and as host arithmetic in the array's dtype, and the same
// laziness (an expression kept past its statement still fuses and still reads the values its
// operands had when it was built).
TEST_CASE("array: host scalars beside f32/f64 arrays: the general path's dtypes, bits and "
          "laziness",
          "[array][scalar]") {
  enum class op { add, sub, mul, div, rem, eq, ne, lt, le, gt, ge };
  const op ops[] = {op::add, op::sub, op::mul, op::div, op::rem, op::eq,
                    op::ne,  op::lt,  op::le,  op::gt,  op::ge};
  // Through the operators (the direct node), left or right of the array.
  auto by_operator = [](op o, const pa::Array& x, double v, bool left) -> pa::Array {
    switch (o) {
    case op::add: return left ? v + x : x + v;
    case op::sub: return left ? v - x : x - v;
    case op::mul: return left ? v * x : x * v;
    case op::div: return left ? v / x : x / v;
    case op::rem: return left ? v % x : x % v;
    case op::eq: return left ? v == x : x == v;
    case op::ne: return left ? v != x : x != v;
    case op::lt: return left ? v < x : x < v;
    case op::le: return left ? v <= x : x <= v;
    case op::gt: return left ? v > x : x > v;
    case op::ge: return left ? v >= x : x >= v;
    }
    return {};
  };
  // Through the named functions and a weak scalar Array (the general binary op).
  auto by_function = [](op o, const pa::Array& x, double v, bool left) -> pa::Array {
    const pa::Array s = pa::scalar(v);
    const pa::Array& a = left ? s : x;
    const pa::Array& c = left ? x : s;
    switch (o) {
    case op::add: return pa::add(a, c);
    case op::sub: return pa::subtract(a, c);
    case op::mul: return pa::multiply(a, c);
    case op::div: return pa::divide(a, c);
    case op::rem: return pa::remainder(a, c);
    case op::eq: return pa::equal(a, c);
    case op::ne: return pa::not_equal(a, c);
    case op::lt: return pa::less(a, c);
    case op::le: return pa::less_equal(a, c);
    case op::gt: return pa::greater(a, c);
    case op::ge: return pa::greater_equal(a, c);
    }
    return {};
  };
  // Host arithmetic in T (remainder: checked against the general path only).
  auto reference = []<class T>(op o, T a, T c) -> double {
    switch (o) {
    case op::add: return static_cast<double>(static_cast<T>(a + c));
    case op::sub: return static_cast<double>(static_cast<T>(a - c));
    case op::mul: return static_cast<double>(static_cast<T>(a * c));
    case op::div: return static_cast<double>(static_cast<T>(a / c));
    case op::eq: return a == c;
    case op::ne: return a != c;
    case op::lt: return a < c;
    case op::le: return a <= c;
    case op::gt: return a > c;
    case op::ge: return a >= c;
    case op::rem: break;
    }
    return 0;
  };
  auto values = [](const pa::Array& r) -> std::vector<double> {
    if (r.type() == pa::dt::boolean) {
      const auto v = r.to_vector<uint8_t>();
      return std::vector<double>(v.begin(), v.end());
    }
    if (r.type() == pa::dt::f32) {
      const auto v = r.to_vector<float>();
      return std::vector<double>(v.begin(), v.end());
    }
    return r.to_vector<double>();
  };
  const std::vector<double> xs = {-2.5, -1, -0.0, 0, 0.75, 1, 3, 1e30};
  const double scalars[] = {2.0, -0.5, 0.0, 3.0, 1e-3};
  for (const Backend& b : backends()) {
    INFO("backend " << b.name());
    for (const pa::dtype t : {pa::dt::f32, pa::dt::f64}) {
      INFO("dtype " << pa::name_of(t));
      const pa::Array x =
          t == pa::dt::f32 ? pa::asarray(b, as<float>(xs), {2, 4}) : pa::asarray(b, xs, {2, 4});
      for (const op o : ops)
        for (const double v : scalars)
          for (const bool left : {false, true}) {
            INFO("op " << static_cast<int>(o) << " v " << v << " left " << left);
            const pa::Array got = by_operator(o, x, v, left);
            const pa::Array want = by_function(o, x, v, left);
            CHECK(got.type() == want.type());
            CHECK(got.type() == (o >= op::eq ? pa::dt::boolean : t));
            CHECK(got.shape() == pa::Shape{2, 4});
            const std::vector<double> g = values(got), w = values(want);
            REQUIRE(g.size() == xs.size());
            for (size_t i = 0; i < g.size(); ++i) {
              CHECK(same_bits(g[i], w[i]));
              if (o == op::rem) continue;
              const double r =
                  t == pa::dt::f32
                      ? (left ? reference(o, static_cast<float>(v), static_cast<float>(xs[i]))
                              : reference(o, static_cast<float>(xs[i]), static_cast<float>(v)))
                      : (left ? reference(o, v, xs[i]) : reference(o, xs[i], v));
              // (OpenCL C's f32 division may be 2.5 ulp off: within that there)
              const double ulps = o == op::div && t == pa::dt::f32 ? 3 * 0x1p-23 : 0;
              CHECK((same_bits(g[i], r) || close(g[i], r, ulps, 0)));
            }
            // int scalars: the same node as the double ones
            if (v == 2.0) {
              const pa::Array gi = left ? by_operator(o, x, 2, true) : by_operator(o, x, 2, false);
              const std::vector<double> g2 = values(gi);
              for (size_t i = 0; i < g2.size(); ++i)
                CHECK(same_bits(g2[i], g[i]));
            }
          }
    }
    // Kept past its statement: still one program with the assignment, reading the values its
    // operand had when built (a write into the operand runs it first), whatever the operand
    // variable holds later.
    using F = std::vector<float>;
    pa::Array x = pa::asarray(b, F{1, 2, 3, 4}, {4});
    pa::Array y = pa::zeros(b, {4});
    {
      const auto t = x * 2.0f;
      const uint64_t before = pa::programs_run();
      y.assign(t + 1.0f);
      CHECK(pa::programs_run() - before == 1);
      CHECK(y.to_vector<float>() == F{3, 5, 7, 9});
    }
    {
      auto t = 3.0f - x / 2.0f;
      x.assign(pa::asarray(b, F{10, 20, 30, 40}, {4})); // a write into t's operand
      y.assign(t * 2.0f);
      CHECK(y.to_vector<float>() == F{5, 4, 3, 2});
      auto u = x + 1.0f;
      x = pa::asarray(b, F{-1, -1, -1, -1}, {4}); // the variable holds another array now
      y.assign(u);
      CHECK(y.to_vector<float>() == F{11, 21, 31, 41});
      CHECK((x * 2.0f).eval().to_vector<float>() == F{-2, -2, -2, -2});
    }
    {
      // In place through the direct node, and an expression of the target held across the write.
      pa::Array z = pa::asarray(b, F{1, 2, 3, 4}, {4});
      auto old = z * 10.0f;
      z.assign(z * 2.0f + 1.0f);
      CHECK(z.to_vector<float>() == F{3, 5, 7, 9});
      CHECK(old.to_vector<float>() == F{10, 20, 30, 40});
    }
  }
  // Arrays the direct node does not take keep the general path's rules.
  Backend b("native");
  CHECK((pa::scalar(2.0) * 3.0).type() == pa::dt::f64);
  CHECK((pa::full_scalar(2.0, pa::dt::f32) * 3.0).type() == pa::dt::f32);
  CHECK((pa::asarray(b, std::vector<int32_t>{1, 2}, {2}) * 2.5).type() == pa::dt::f64);
  CHECK((pa::zeros(b, {2}, pa::dt::f16) + 1.0).type() == pa::dt::f16);
  try {
    (void)(pa::Array() * 2.0);
    FAIL("no error");
  } catch (const error& e) {
    CHECK(std::string(e.what()).find("array.multiply") != std::string::npos);
    CHECK(std::string(e.what()).find("empty Array") != std::string::npos);
  }
}
