// pcy_array_random.h on the host: Philox-4x32-10 known answers, the stream layout (offsets,
// disjoint streams), uniform/normal statistics (moments, Kolmogorov-Smirnov against the exact
// normal CDF), the normal transform's accuracy against long double references, randint and
// bernoulli, and bit identity between this C++ compile and a C99 compile of the same header.
// Every draw uses fixed seeds: the statistics are deterministic, the bounds are 5-sigma (or
// p < 1e-4) ones that a correct generator passes and a biased one does not.
#include "random_c99.h"
#include "random_common.hpp"
#include "support/catch.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

namespace rt = pcy_array_random_test;

namespace {

// Draw counts: PARENCHYMA_ARRAY_RANDOM_DRAWS overrides the default (10^6).
size_t draws() {
  if (const char* v = std::getenv("PARENCHYMA_ARRAY_RANDOM_DRAWS"); v != nullptr && *v) {
    return std::max<size_t>(10000, std::strtoull(v, nullptr, 10));
  }
  return 1000000;
}

struct moments {
  double mean = 0, var = 0, skew = 0, kurt = 0; // kurt: excess
};
template <class T> moments moments_of(const std::vector<T>& x) {
  long double s = 0;
  for (T v : x)
    s += v;
  const long double n = static_cast<long double>(x.size()), m = s / n;
  long double m2 = 0, m3 = 0, m4 = 0;
  for (T v : x) {
    const long double d = v - m;
    m2 += d * d;
    m3 += d * d * d;
    m4 += d * d * d * d;
  }
  m2 /= n, m3 /= n, m4 /= n;
  return {static_cast<double>(m), static_cast<double>(m2),
          static_cast<double>(m3 / std::pow(m2, 1.5L)), static_cast<double>(m4 / (m2 * m2) - 3)};
}

// sqrt(n) times the Kolmogorov-Smirnov distance of the sample from the CDF.
template <class T, class F> double ks_statistic(std::vector<T> x, F cdf) {
  std::sort(x.begin(), x.end());
  const double n = static_cast<double>(x.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double c = cdf(static_cast<double>(x[i]));
    d = std::max({d, c - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - c});
  }
  return d * std::sqrt(n);
}
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }
// P(K > 1.95) = 0.001 for the Kolmogorov distribution; the samples are fixed, so this is a
// fixed verdict, and a wrong transform (a variance off by 1%, a bent tail) lands far above it.
constexpr double ks_bound = 1.95;

// cos(2 pi u) for u in [0, 1), in long double, reduced to the NEAREST quarter turn
// (|theta| <= pi/4, exact since u is a dyadic rational) so the reference keeps its relative
// accuracy where cos is near 0.
long double cos2pi_ref(long double u) {
  const long double pi = 3.141592653589793238462643383279502884L;
  const long double q = std::nearbyint(4 * u);
  const long double theta = 2 * pi * (u - q / 4);
  switch (static_cast<int>(q) & 3) {
  case 0: return std::cos(theta);
  case 1: return -std::sin(theta);
  case 2: return -std::cos(theta);
  default: return std::sin(theta);
  }
}
// sqrt(-2 ln u1) cos(2 pi u2) with u1 = (k + 1) 2^-bits, u2 = j 2^-bits.
long double normal_ref(uint64_t k, uint64_t j, int bits) {
  const long double scale = std::ldexp(1.0L, -bits);
  const long double one_minus_u1 =
      static_cast<long double>((uint64_t(1) << bits) - (k + 1)) * scale;
  const long double s = -2 * std::log1p(-one_minus_u1);
  return std::sqrt(s) * cos2pi_ref(static_cast<long double>(j) * scale);
}
// |x - ref| in units of the ulp (of the type with `digits` bits) at ref.
long double ulp_error(long double x, long double ref, int digits) {
  if (ref == 0) return x == 0 ? 0 : std::numeric_limits<long double>::infinity();
  const int e = std::ilogb(ref);
  return std::fabs(x - ref) / std::ldexp(1.0L, e - (digits - 1));
}

} // namespace

TEST_CASE("array random: Philox-4x32-10 known answers", "[array][random]") {
  // Random123's kat_vectors (philox4x32 10): counter[4], key[2] -> output[4].
  const struct {
    uint32_t ctr[4], key[2], out[4];
  } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& v : kat) {
    uint32_t out[4];
    pcy_rng_philox(v.key[0], v.key[1], v.ctr[0], v.ctr[1], v.ctr[2], v.ctr[3], out);
    for (int i = 0; i < 4; ++i)
      CHECK(out[i] == v.out[i]);
  }
  // pcy_rng_words: key (seed low, seed high), counter (c low, c high, 0, 0), c = offset + e.
  const uint64_t seed = 0x299f31d0a4093822ull;
  const rt::words w = rt::draw(seed, 0x85a308d3243f6a88ull - 5, 5);
  uint32_t ref[4];
  pcy_rng_philox(0xa4093822, 0x299f31d0, 0x243f6a88, 0x85a308d3, 0, 0, ref);
  for (int i = 0; i < 4; ++i)
    CHECK(w[i] == ref[i]);
  const rt::words zero = rt::draw(0, 0, 0);
  CHECK(zero[0] == 0x6627e8d5);
  CHECK(zero[3] == 0x9b00dbd8);
}

TEST_CASE("array random: offsets split one stream, seeds give disjoint streams",
          "[array][random]") {
  const uint64_t seed = 1234567;
  for (uint64_t o : {uint64_t(0), uint64_t(77), ~uint64_t(0) - 3}) {
    for (uint64_t d : {uint64_t(1), uint64_t(5), uint64_t(1000)}) {
      for (uint64_t e = d; e < d + 20; ++e) {
        // element e at offset o is element e - d at offset o + d (64-bit wrap included)
        CHECK(rt::draw(seed, o, e) == rt::draw(seed, o + d, e - d));
      }
    }
  }
  CHECK(rt::draw(seed, ~uint64_t(0), 1) == rt::draw(seed, 0, 0));
  // The 64-bit words (w1 << 32 | w0) of two seeds' draws, and of one seed at two
  // non-overlapping offsets: 4 n words, no two equal (a collision of independent 64-bit
  // words among 4 10^6 has probability about 4e-7).
  const size_t n = draws();
  std::vector<uint64_t> all;
  all.reserve(4 * n);
  for (uint64_t s : {uint64_t(1), uint64_t(2)}) {
    for (uint64_t off : {uint64_t(0), uint64_t(n)}) {
      for (size_t e = 0; e < n; ++e) {
        const rt::words w = rt::draw(s, off, e);
        all.push_back(uint64_t(w[1]) << 32 | w[0]);
      }
    }
  }
  std::sort(all.begin(), all.end());
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
}

TEST_CASE("array random: uniform", "[array][random]") {
  // Exact values at the ends.
  CHECK(pcy_rng_uniform_f32(0) == 0.0f);
  CHECK(pcy_rng_uniform_f32(0xffffffffu) == 1.0f - 0x1p-24f);
  CHECK(pcy_rng_uniform_f32(0x80000000u) == 0.5f);
  CHECK(pcy_rng_uniform_f64(0, 0) == 0.0);
  CHECK(pcy_rng_uniform_f64(0xffffffffu, 0xffffffffu) == 1.0 - 0x1p-53);
  CHECK(pcy_rng_uniform_f64(0x80000000u, 0) == 0.5);
  CHECK(pcy_rng_uniform_f64(0, 1) == 0x1p-53);

  const size_t n = draws();
  std::vector<float> f(n);
  std::vector<double> d(n);
  for (size_t e = 0; e < n; ++e) {
    const rt::words w = rt::draw(42, 0, e);
    f[e] = pcy_rng_uniform_f32(w[0]);
    d[e] = pcy_rng_uniform_f64(w[0], w[1]);
    REQUIRE((f[e] >= 0 && f[e] < 1 && d[e] >= 0 && d[e] < 1));
  }
  const double sn = std::sqrt(static_cast<double>(n));
  for (const moments m : {moments_of(f), moments_of(d)}) {
    INFO("mean " << m.mean << " var " << m.var << " skew " << m.skew << " kurt " << m.kurt);
    CHECK(std::fabs(m.mean - 0.5) < 5 * std::sqrt(1.0 / 12) / sn);
    CHECK(std::fabs(m.var - 1.0 / 12) < 5 * std::sqrt(1.0 / 180) / sn);
    CHECK(std::fabs(m.skew) < 5 * std::sqrt(1.2) / sn);
    CHECK(std::fabs(m.kurt + 1.2) < 5 * std::sqrt(0.457) / sn);
  }
  const auto uniform_cdf = [](double x) { return std::clamp(x, 0.0, 1.0); };
  CHECK(ks_statistic(f, uniform_cdf) < ks_bound);
  CHECK(ks_statistic(d, uniform_cdf) < ks_bound);
}

TEST_CASE("array random: normal statistics", "[array][random]") {
  // Both members of each Box-Muller pair (cos and sin of one angle), as a draw lays them out.
  const size_t n = draws() / 2 * 2;
  std::vector<float> f(n);
  std::vector<double> d(n);
  for (size_t e = 0; e < n; e += 2) {
    const rt::words w = rt::draw(20261206, 1000, e / 2);
    f[e] = pcy_rng_normal_f32(w[0], w[1]);
    f[e + 1] = pcy_rng_normal_sin_f32(w[0], w[1]);
    d[e] = pcy_rng_normal_f64(w[0], w[1], w[2], w[3]);
    d[e + 1] = pcy_rng_normal_sin_f64(w[0], w[1], w[2], w[3]);
    REQUIRE((std::isfinite(f[e]) && std::isfinite(d[e])));
    REQUIRE((std::isfinite(f[e + 1]) && std::isfinite(d[e + 1])));
  }
  // The members of a pair are uncorrelated, and so are their squares (Box-Muller's pair is
  // independent): correlations within 5 sigma (1 / sqrt(n / 2)) of 0.
  auto corr = [](const auto& v, auto g) {
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    const double m = static_cast<double>(v.size() / 2);
    for (size_t i = 0; i + 1 < v.size(); i += 2) {
      const double x = g(static_cast<double>(v[i])), y = g(static_cast<double>(v[i + 1]));
      sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y;
    }
    const double cxy = sxy / m - (sx / m) * (sy / m);
    return cxy / std::sqrt((sxx / m - (sx / m) * (sx / m)) * (syy / m - (sy / m) * (sy / m)));
  };
  const double bound = 5 / std::sqrt(static_cast<double>(n / 2));
  const auto id = [](double x) { return x; };
  const auto sq = [](double x) { return x * x; };
  CHECK(std::fabs(corr(f, id)) < bound);
  CHECK(std::fabs(corr(f, sq)) < bound);
  CHECK(std::fabs(corr(d, id)) < bound);
  CHECK(std::fabs(corr(d, sq)) < bound);
  const double sn = std::sqrt(static_cast<double>(n));
  for (const moments m : {moments_of(f), moments_of(d)}) {
    INFO("mean " << m.mean << " var " << m.var << " skew " << m.skew << " kurt " << m.kurt);
    CHECK(std::fabs(m.mean) < 5 / sn);
    CHECK(std::fabs(m.var - 1) < 5 * std::sqrt(2.0) / sn);
    CHECK(std::fabs(m.skew) < 5 * std::sqrt(6.0) / sn);
    CHECK(std::fabs(m.kurt) < 5 * std::sqrt(24.0) / sn);
  }
  const double kf = ks_statistic(f, normal_cdf), kd = ks_statistic(d, normal_cdf);
  std::printf("normal: %zu draws, sqrt(n) KS distance: f32 %.3f, f64 %.3f (bound %.2f)\n", n, kf,
              kd, ks_bound);
  CHECK(kf < ks_bound);
  CHECK(kd < ks_bound);
  // The binary32 tail ends where u1 does: |z| <= sqrt(2 * 24 ln 2) = 5.768.
  const auto [lo, hi] = std::minmax_element(f.begin(), f.end());
  CHECK(*lo >= -5.7686f);
  CHECK(*hi <= 5.7686f);
}

TEST_CASE("array random: normal transform accuracy", "[array][random]") {
  long double worst32 = 0, worst64 = 0;
  uint64_t at32[2] = {}, at64[2] = {};
  const auto check32 = [&](uint32_t k, uint32_t j) {
    const float z = pcy_rng_normal_f32(k << 8 | 0x3f, j << 8 | 0xc1);
    const long double err = ulp_error(z, normal_ref(k, j, 24), 24);
    if (!(err <= worst32)) worst32 = err, at32[0] = k, at32[1] = j;
    // the sine member: sin(2 pi j 2^-24) = cos(2 pi (j - 2^22) 2^-24)
    const float zs = pcy_rng_normal_sin_f32(k << 8 | 0x3f, j << 8 | 0xc1);
    const long double es = ulp_error(zs, normal_ref(k, (j - (1u << 22)) & 0xFFFFFFu, 24), 24);
    if (!(es <= worst32)) worst32 = es, at32[0] = k, at32[1] = j;
  };
  const auto check64 = [&](uint64_t k, uint64_t j) {
    const auto w0 = static_cast<uint32_t>(k >> 32) << 11 | 0x2a5, w1 = static_cast<uint32_t>(k);
    const auto w2 = static_cast<uint32_t>(j >> 32) << 11 | 0x5a2, w3 = static_cast<uint32_t>(j);
    const double z = pcy_rng_normal_f64(w0, w1, w2, w3);
    const long double err = ulp_error(z, normal_ref(k, j, 53), 53);
    if (!(err <= worst64)) worst64 = err, at64[0] = k, at64[1] = j;
    const double zs = pcy_rng_normal_sin_f64(w0, w1, w2, w3);
    const uint64_t js = (j - (uint64_t(1) << 51)) & ((uint64_t(1) << 53) - 1);
    const long double es = ulp_error(zs, normal_ref(k, js, 53), 53);
    if (!(es <= worst64)) worst64 = es, at64[0] = k, at64[1] = j;
  };
  // every pair of edge integers
  for (uint32_t k : rt::edge_k24()) {
    for (uint32_t j : rt::edge_j24())
      check32(k, j);
  }
  for (uint64_t k : rt::edge_k53()) {
    for (uint64_t j : rt::edge_j53())
      check64(k, j);
  }
  // u1 = 1 exactly: z = 0 (either sign)
  CHECK(pcy_rng_normal_f32(0xffffff00u, 12345u << 8) == 0.0f);
  CHECK(pcy_rng_normal_f64(0xfffff800u, 0xffffffffu, 0x12345, 6789) == 0.0);
  // and random words
  const size_t n = draws() / 5;
  for (size_t e = 0; e < n; ++e) {
    const rt::words w = rt::draw(99, 0, e);
    check32(w[0] >> 8, w[1] >> 8);
    check64(uint64_t(w[0] >> 11) << 32 | w[1], uint64_t(w[2] >> 11) << 32 | w[3]);
  }
  std::printf("normal transform: worst error %.3Lf ulp (binary32, k %llu j %llu), %.3Lf ulp "
              "(binary64, k %llu j %llu)\n",
              worst32, static_cast<unsigned long long>(at32[0]),
              static_cast<unsigned long long>(at32[1]), worst64,
              static_cast<unsigned long long>(at64[0]), static_cast<unsigned long long>(at64[1]));
  CHECK(worst32 <= 4);
  CHECK(worst64 <= 4);
}

TEST_CASE("array random: the sine is the cosine a quarter turn back, bit for bit",
          "[array][random]") {
  std::vector<uint32_t> j24 = rt::edge_j24();
  std::vector<uint64_t> j53 = rt::edge_j53();
  for (size_t e = 0; e < 200000; ++e) {
    const rt::words w = rt::draw(31337, 0, e);
    j24.push_back(w[0] >> 8);
    j53.push_back(uint64_t(w[2] >> 11) << 32 | w[3]);
  }
  // sin(2 pi j) = cos(2 pi (j - quarter)): the pair's two members share one reduction, and the
  // quadrant logic must agree with the cosine's at every edge
  for (uint32_t j : j24) {
    float c, s;
    pcy_rng_sincos2pi_f32(j, &c, &s);
    INFO("j " << j);
    REQUIRE(std::bit_cast<uint32_t>(c) == std::bit_cast<uint32_t>(pcy_rng_cos2pi_f32(j)));
    REQUIRE(std::bit_cast<uint32_t>(s) ==
            std::bit_cast<uint32_t>(pcy_rng_cos2pi_f32((j - (1u << 22)) & 0xFFFFFFu)));
  }
  for (uint64_t j : j53) {
    double c, s;
    pcy_rng_sincos2pi_f64(j, &c, &s);
    INFO("j " << j);
    REQUIRE(std::bit_cast<uint64_t>(c) == std::bit_cast<uint64_t>(pcy_rng_cos2pi_f64(j)));
    const uint64_t back = (j - (uint64_t(1) << 51)) & ((uint64_t(1) << 53) - 1);
    REQUIRE(std::bit_cast<uint64_t>(s) == std::bit_cast<uint64_t>(pcy_rng_cos2pi_f64(back)));
  }
}

TEST_CASE("array random: bernoulli", "[array][random]") {
  CHECK(pcy_rng_bernoulli_threshold(0.0) == 0);
  CHECK(pcy_rng_bernoulli_threshold(-0.5) == 0);
  CHECK(pcy_rng_bernoulli_threshold(std::numeric_limits<double>::quiet_NaN()) == 0);
  CHECK(pcy_rng_bernoulli_threshold(1.0) == uint64_t(1) << 32);
  CHECK(pcy_rng_bernoulli_threshold(7.0) == uint64_t(1) << 32);
  CHECK(pcy_rng_bernoulli_threshold(0.5) == uint64_t(1) << 31);
  CHECK(pcy_rng_bernoulli_threshold(1.0 - 0x1p-40) == (uint64_t(1) << 32) - 1);
  CHECK(pcy_rng_bernoulli_threshold(0x1p-32) == 1);
  CHECK(pcy_rng_bernoulli_threshold(0x1p-33) == 0);
  // p = 0 never, p = 1 always
  for (uint32_t w : {0u, 1u, 0x80000000u, 0xffffffffu}) {
    CHECK(pcy_rng_bernoulli(w, 0) == 0);
    CHECK(pcy_rng_bernoulli(w, uint64_t(1) << 32) == 1);
  }
  CHECK(pcy_rng_bernoulli(0x4ccccccbu, pcy_rng_bernoulli_threshold(0.3)) == 1);
  CHECK(pcy_rng_bernoulli(0x4ccccccc, pcy_rng_bernoulli_threshold(0.3)) == 0);
  const size_t n = draws();
  const uint64_t t = pcy_rng_bernoulli_threshold(0.3);
  size_t ones = 0;
  for (size_t e = 0; e < n; ++e)
    ones += static_cast<size_t>(pcy_rng_bernoulli(rt::draw(5, 0, e)[0], t));
  const double p = static_cast<double>(ones) / static_cast<double>(n);
  CHECK(std::fabs(p - 0.3) < 5 * std::sqrt(0.21 / static_cast<double>(n)));
}

TEST_CASE("array random: randint", "[array][random]") {
  // The exact high word of the 64x64 product, against the compiler's 128-bit integers.
  const auto ref = [](uint32_t w0, uint32_t w1, int64_t lo, uint64_t range) {
    __extension__ typedef unsigned __int128 u128; // GCC and Clang: an independent reference
    const u128 x = uint64_t(w1) << 32 | w0;
    const auto hi = static_cast<uint64_t>((x * range) >> 64);
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + hi);
  };
  const uint64_t ranges[] = {
      1, 2, 3, 10, 1000, 0xffffffffull, 0x100000000ull, 0x123456789abcdefull, ~uint64_t(0)};
  const int64_t los[] = {0, -5, std::numeric_limits<int64_t>::min(), 1000000007};
  for (size_t e = 0; e < 20000; ++e) {
    const rt::words w = rt::draw(8, 0, e);
    for (uint64_t r : ranges) {
      for (int64_t lo : los) {
        const int64_t v = pcy_rng_randint(w[0], w[1], lo, r);
        REQUIRE(v == ref(w[0], w[1], lo, r));
        // lo <= v < lo + range (in the wrapping sense: v - lo < range)
        REQUIRE(static_cast<uint64_t>(v) - static_cast<uint64_t>(lo) < r);
      }
    }
  }
  for (uint64_t r : ranges) {
    CHECK(pcy_rng_randint(0, 0, -3, r) == -3);
    CHECK(static_cast<uint64_t>(pcy_rng_randint(0xffffffffu, 0xffffffffu, 0, r)) == r - 1);
  }
  // Uniformity: chi-square over a small range and over 64 buckets of a large one.
  const size_t n = draws();
  for (const uint64_t range : {uint64_t(10), uint64_t(1000), uint64_t(3) << 60}) {
    const size_t bins = range <= 1000 ? static_cast<size_t>(range) : 64;
    std::vector<double> count(bins);
    for (size_t e = 0; e < n; ++e) {
      const rt::words w = rt::draw(range, 0, e);
      const auto v = static_cast<uint64_t>(pcy_rng_randint(w[0], w[1], 0, range));
      const size_t b = range <= 1000 ? static_cast<size_t>(v)
                                     : static_cast<size_t>(static_cast<long double>(v) * bins /
                                                           static_cast<long double>(range));
      count[b] += 1;
    }
    const double expect = static_cast<double>(n) / static_cast<double>(bins);
    double chi2 = 0;
    for (double c : count)
      chi2 += (c - expect) * (c - expect) / expect;
    const double df = static_cast<double>(bins - 1);
    INFO("range " << range << ": chi-square " << chi2 << " with " << df << " degrees of freedom");
    CHECK(chi2 < df + 5 * std::sqrt(2 * df)); // about p < 1e-4 at these sizes
    CHECK(chi2 > std::max(0.0, df - 5 * std::sqrt(2 * df)));
  }
}

TEST_CASE("array random: C99 and C++ compiles give the same bits", "[array][random]") {
  std::vector<rt::words> ws = rt::edge_words();
  for (size_t e = 0; e < 50000; ++e)
    ws.push_back(rt::draw(31337, 0, e));
  size_t mismatches = 0;
  for (const rt::words& w : ws) {
    uint32_t c[4];
    pcy_test_c99_words(w[0], w[1], w[2], c);
    const rt::words cpp = rt::draw(w[0], w[1], w[2]);
    mismatches += !std::equal(cpp.begin(), cpp.end(), c);
    mismatches += std::bit_cast<uint32_t>(pcy_rng_uniform_f32(w[0])) !=
                  std::bit_cast<uint32_t>(pcy_test_c99_uniform_f32(w[0]));
    mismatches += std::bit_cast<uint64_t>(pcy_rng_uniform_f64(w[0], w[1])) !=
                  std::bit_cast<uint64_t>(pcy_test_c99_uniform_f64(w[0], w[1]));
    mismatches += std::bit_cast<uint32_t>(pcy_rng_normal_f32(w[0], w[1])) !=
                  std::bit_cast<uint32_t>(pcy_test_c99_normal_f32(w[0], w[1]));
    mismatches += std::bit_cast<uint64_t>(pcy_rng_normal_f64(w[0], w[1], w[2], w[3])) !=
                  std::bit_cast<uint64_t>(pcy_test_c99_normal_f64(w[0], w[1], w[2], w[3]));
    mismatches += pcy_rng_bernoulli(w[0], w[2]) != pcy_test_c99_bernoulli(w[0], w[2]);
    const uint64_t range = uint64_t(w[3]) << 17 | 1;
    mismatches +=
        pcy_rng_randint(w[0], w[1], -1000, range) != pcy_test_c99_randint(w[0], w[1], -1000, range);
  }
  CHECK(mismatches == 0);
  for (double p : {0.0, 0.25, 0.3, 0.999, 1.0, 2.0}) {
    CHECK(pcy_rng_bernoulli_threshold(p) == pcy_test_c99_bernoulli_threshold(p));
  }
}
