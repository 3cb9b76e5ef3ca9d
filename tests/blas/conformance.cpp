// BLAS conformance suite: one program run once per framework (argv[1] = "native", "opencl",
// "cuda"). Every op and dtype on fresh random data of awkward sizes (1, 7, 1000, 4097; non-square
// and transposed matrices, leading dimensions > columns, increments 2, sub-matrices, scalars on
// the host and on the device, write-only outputs pre-filled with NaN) is checked against a naive
// double-precision reference. Elements a strided op must not touch are checked unchanged.
// A framework without devices (or without a BLAS bundle serving it) exits 77 with the reason.
#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace parenchyma;
namespace blas = parenchyma::blas;

int failures = 0, checks = 0, skipped_cells = 0;
std::string fw_name;
std::mt19937_64 rng{std::random_device{}()};

template <class T> const char* tname() { return sizeof(T) == 4 ? "f32" : "f64"; }

template <class T> SharedTensor<T> random_tensor(std::vector<int64_t> shape) {
  SharedTensor<T> t(std::move(shape));
  std::uniform_real_distribution<double> u(-1, 1);
  for (T& v : t.write_only())
    v = static_cast<T>(u(rng));
  return t;
}
template <class T> std::vector<double> values(const SharedTensor<T>& t) {
  auto s = t.read();
  return std::vector<double>(s.begin(), s.end());
}
template <class T> SharedTensor<T> scalar_tensor(double v) {
  SharedTensor<T> t({1});
  t.write_only()[0] = static_cast<T>(v);
  return t;
}

// |got - ref| <= tolerance, where the bound grows with the magnitude of the summed terms.
template <class T>
void expect_near(const std::string& what, size_t i, double got, double ref, double magnitude,
                 double terms) {
  ++checks;
  const double eps = std::numeric_limits<T>::epsilon();
  const double tol = 8 * eps * (std::sqrt(terms) + 1) * magnitude + 1e-30;
  if (!(std::fabs(got - ref) <= tol)) {
    if (++failures <= 30)
      std::printf("FAIL %s %s %s: element %zu got %.10g expected %.10g (tolerance %.3g)\n",
                  fw_name.c_str(), tname<T>(), what.c_str(), i, got, ref, tol);
  }
}
void expect_true(bool ok, const std::string& what) {
  ++checks;
  if (!ok && ++failures <= 30) std::printf("FAIL %s: %s\n", fw_name.c_str(), what.c_str());
}

// Runs one case; an f64 cell the device cannot serve counts as a skipped cell, not a failure.
void run_case(const std::string& what, const std::function<void()>& f) {
  try {
    f();
  } catch (const parenchyma::error& e) {
    if (e.code() == errc::unsupported && what.find("f64") != std::string::npos) {
      if (++skipped_cells <= 3) std::printf("skipped cell %s: %s\n", what.c_str(), e.what());
      return;
    }
    ++failures;
    std::printf("FAIL %s %s: threw %s\n", fw_name.c_str(), what.c_str(), e.what());
  } catch (const std::exception& e) {
    ++failures;
    std::printf("FAIL %s %s: threw %s\n", fw_name.c_str(), what.c_str(), e.what());
  }
}

template <class T> void level1(const Backend& b) {
  const std::vector<int64_t> sizes{1, 7, 1000, 4097};
  for (const int64_t n : sizes) {
    for (const int64_t inc : {1, 2}) {
      const std::string tag =
          std::string(tname<T>()) + " n=" + std::to_string(n) + " inc=" + std::to_string(inc);
      const int64_t len = 1 + (n - 1) * inc;
      for (const bool dev_scalar : {false, true}) {
        const std::string st = tag + (dev_scalar ? " device-scalars" : " host-scalars");
        run_case("axpy " + st, [&] {
          auto x = random_tensor<T>({len}), y = random_tensor<T>({len + 1});
          const auto x0 = values(x), y0 = values(y);
          const double alpha = 0.75;
          auto at = scalar_tensor<T>(alpha);
          if (dev_scalar)
            blas::axpy(b, n, at, x, inc, y, inc);
          else
            blas::axpy(b, n, alpha, x, inc, y, inc);
          const auto y1 = values(y);
          for (int64_t i = 0; i < len + 1; ++i) {
            const bool hit = i % inc == 0 && i / inc < n;
            const double ref = hit ? static_cast<T>(alpha) * x0[i] + y0[i] : y0[i];
            expect_near<T>("axpy " + st, i, y1[i], ref,
                           (hit ? std::fabs(x0[i]) : 0) + std::fabs(y0[i]), 1);
          }
        });
        run_case("axpby " + st, [&] {
          auto x = random_tensor<T>({len}), y = random_tensor<T>({len});
          const auto x0 = values(x), y0 = values(y);
          const double alpha = -1.25, beta = 0.5;
          auto at = scalar_tensor<T>(alpha);
          if (dev_scalar)
            blas::axpby(b, n, at, x, inc, beta, y, inc); // mixed: device alpha, host beta
          else
            blas::axpby(b, n, alpha, x, inc, beta, y, inc);
          const auto y1 = values(y);
          for (int64_t i = 0; i < len; ++i) {
            const bool hit = i % inc == 0;
            const double ref = hit ? alpha * x0[i] + beta * y0[i] : y0[i];
            expect_near<T>("axpby " + st, i, y1[i], ref, std::fabs(x0[i]) + std::fabs(y0[i]), 2);
          }
        });
        run_case("scal " + st, [&] {
          auto x = random_tensor<T>({len});
          const auto x0 = values(x);
          const double alpha = 3.0;
          auto at = scalar_tensor<T>(alpha);
          if (dev_scalar)
            blas::scal(b, n, at, x, inc);
          else
            blas::scal(b, n, alpha, x, inc);
          const auto x1 = values(x);
          for (int64_t i = 0; i < len; ++i)
            expect_near<T>("scal " + st, i, x1[i], i % inc == 0 ? alpha * x0[i] : x0[i],
                           std::fabs(3 * x0[i]), 1);
        });
      }
      run_case("axpby beta=0 write-only " + tag, [&] {
        auto x = random_tensor<T>({n});
        SharedTensor<T> y({n});
        if (n > 7) // poison what the op may see (else leave y unwritten); OUT never reads it
          for (T& v : y.write_only())
            v = std::numeric_limits<T>::quiet_NaN();
        const auto x0 = values(x);
        blas::axpby(b, 2.0, x, 0.0, y);
        const auto y1 = values(y);
        for (int64_t i = 0; i < n; ++i)
          expect_near<T>("axpby beta=0 " + tag, i, y1[i], 2 * x0[i], std::fabs(2 * x0[i]), 1);
      });
      run_case("copy " + tag, [&] {
        auto x = random_tensor<T>({len}), y = random_tensor<T>({len});
        const auto x0 = values(x), y0 = values(y);
        blas::copy(b, n, x, inc, y, inc);
        const auto y1 = values(y);
        for (int64_t i = 0; i < len; ++i)
          expect_near<T>("copy " + tag, i, y1[i], i % inc == 0 ? x0[i] : y0[i], 0, 1);
      });
      run_case("swap " + tag, [&] {
        auto x = random_tensor<T>({len}), y = random_tensor<T>({n});
        const auto x0 = values(x), y0 = values(y);
        blas::swap(b, n, x, inc, y, 1);
        const auto x1 = values(x), y1 = values(y);
        for (int64_t i = 0; i < len; ++i)
          expect_near<T>("swap x " + tag, i, x1[i], i % inc == 0 ? y0[i / inc] : x0[i], 0, 1);
        for (int64_t i = 0; i < n; ++i)
          expect_near<T>("swap y " + tag, i, y1[i], x0[i * inc], 0, 1);
      });
      run_case("dot/asum/nrm2 " + tag, [&] {
        auto x = random_tensor<T>({len}), y = random_tensor<T>({len});
        const auto x0 = values(x), y0 = values(y);
        SharedTensor<T> r1({1}), r2({1}), r3({1});
        blas::dot(b, n, x, inc, y, inc, r1);
        blas::asum(b, n, x, inc, r2);
        blas::nrm2(b, n, x, inc, r3);
        double dot = 0, dmag = 0, asum = 0, ss = 0;
        for (int64_t i = 0; i < n; ++i) {
          dot += x0[i * inc] * y0[i * inc];
          dmag += std::fabs(x0[i * inc] * y0[i * inc]);
          asum += std::fabs(x0[i * inc]);
          ss += x0[i * inc] * x0[i * inc];
        }
        expect_near<T>("dot " + tag, 0, r1.read()[0], dot, dmag, static_cast<double>(n));
        expect_near<T>("asum " + tag, 0, r2.read()[0], asum, asum, static_cast<double>(n));
        expect_near<T>("nrm2 " + tag, 0, r3.read()[0], std::sqrt(ss), std::sqrt(ss),
                       static_cast<double>(n));
        // The host-value forms on whole tensors, chained through the device result.
        if (inc == 1) {
          expect_near<T>("dot (host value) " + tag, 0, blas::dot(b, x, y), dot, dmag,
                         static_cast<double>(n));
          expect_near<T>("nrm2 (host value) " + tag, 0, blas::nrm2(b, x), std::sqrt(ss),
                         std::sqrt(ss), static_cast<double>(n));
          expect_near<T>("asum (host value) " + tag, 0, blas::asum(b, x), asum, asum,
                         static_cast<double>(n));
        }
      });
    }
  }
  // A result that stays on the device feeds the next op as a scalar: y = dot(x, x) * x + y.
  run_case(std::string("dot result as device scalar ") + tname<T>(), [&] {
    auto x = random_tensor<T>({1000}), y = random_tensor<T>({1000});
    const auto x0 = values(x), y0 = values(y);
    SharedTensor<T> d({1});
    blas::dot(b, x, x, d);
    blas::axpy(b, d, x, y);
    double dd = 0;
    for (double v : x0)
      dd += v * v;
    const auto y1 = values(y);
    for (size_t i = 0; i < y1.size(); ++i)
      expect_near<T>("dot->axpy", i, y1[i], dd * x0[i] + y0[i], std::fabs(dd * x0[i]) + 1, 1000);
  });
}

template <class T>
void gemv_case(const Backend& b, bool t, int64_t m, int64_t n, int64_t pad, int64_t inc,
               bool dev_scalars, bool beta0) {
  const std::string tag = std::string("gemv ") + tname<T>() + (t ? " T" : " N") +
                          " m=" + std::to_string(m) + " n=" + std::to_string(n) + " lda+" +
                          std::to_string(pad) + " inc=" + std::to_string(inc) +
                          (dev_scalars ? " device-scalars" : "") + (beta0 ? " beta=0" : "");
  run_case(tag, [&] {
    const int64_t lda = n + pad, nx = t ? m : n, ny = t ? n : m;
    auto A = random_tensor<T>({m, lda});
    auto x = random_tensor<T>({1 + (nx - 1) * inc});
    auto y = random_tensor<T>({1 + (ny - 1) * inc});
    const auto A0 = values(A), x0 = values(x), y0 = values(y);
    const double alpha = 1.5, beta = beta0 ? 0.0 : -0.5;
    auto at = scalar_tensor<T>(alpha), bt = scalar_tensor<T>(beta);
    blas::gemv_dims d;
    d.m = m;
    d.n = n;
    d.lda = lda;
    d.incx = inc;
    d.incy = inc;
    if (dev_scalars)
      blas::gemv(b, t ? blas::trans : blas::no_trans, at, A, x, bt, y, d);
    else
      blas::gemv(b, t ? blas::trans : blas::no_trans, alpha, A, x, beta, y, d);
    const auto y1 = values(y);
    for (int64_t i = 0; i < static_cast<int64_t>(y1.size()); ++i) {
      if (i % inc != 0) {
        expect_near<T>(tag, i, y1[i], y0[i], 0, 1);
        continue;
      }
      const int64_t r = i / inc;
      double s = 0, mag = 0;
      for (int64_t j = 0; j < nx; ++j) {
        const double a = t ? A0[j * lda + r] : A0[r * lda + j];
        s += a * x0[j * inc];
        mag += std::fabs(a * x0[j * inc]);
      }
      const double ref = alpha * s + beta * y0[i];
      expect_near<T>(tag, i, y1[i], ref, std::fabs(alpha) * mag + std::fabs(beta * y0[i]),
                     static_cast<double>(nx));
    }
  });
}

template <class T>
void gemm_case(const Backend& b, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t pad,
               bool dev_scalars, bool beta0, bool sub = false) {
  const std::string tag = std::string("gemm ") + tname<T>() + (ta ? " T" : " N") +
                          (tb ? "T" : "N") + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                          " k=" + std::to_string(k) + " ld+" + std::to_string(pad) +
                          (dev_scalars ? " device-scalars" : "") +
                          (beta0 ? " beta=0 write-only" : "") + (sub ? " sub-matrix" : "");
  run_case(tag, [&] {
    const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    const int64_t extra = sub ? 2 : 0; // a sub-matrix: tensors with spare rows
    const int64_t lda = ac + pad, ldb = bc + pad, ldc = n + pad;
    auto A = random_tensor<T>({ar + extra, lda});
    auto B = random_tensor<T>({br + extra, ldb});
    SharedTensor<T> C({m + extra, ldc});
    const bool write_only = beta0 && pad == 0 && !sub && !dev_scalars;
    if (write_only) {
      // The op takes C write-only: small cases leave it unwritten, larger ones poison the host
      // copy with NaN, which must not leak in where device memory aliases host memory.
      if (m > 7)
        for (T& v : C.write_only())
          v = std::numeric_limits<T>::quiet_NaN();
    } else {
      C = random_tensor<T>({m + extra, ldc});
    }
    const auto A0 = values(A), B0 = values(B);
    const std::vector<double> C0 = write_only ? std::vector<double>(C.size(), 0) : values(C);
    const double alpha = 0.5, beta = beta0 ? 0.0 : 2.0;
    auto at = scalar_tensor<T>(alpha), bt = scalar_tensor<T>(beta);
    blas::gemm_dims d;
    if (pad != 0 || sub) {
      d.m = m;
      d.n = n;
      d.k = k;
      d.lda = lda;
      d.ldb = ldb;
      d.ldc = ldc;
    }
    const auto opa = ta ? blas::trans : blas::no_trans, opb = tb ? blas::trans : blas::no_trans;
    if (dev_scalars)
      blas::gemm(b, opa, opb, at, A, B, bt, C, d);
    else
      blas::gemm(b, opa, opb, alpha, A, B, beta, C, d);
    const auto C1 = values(C);
    for (int64_t i = 0; i < m + extra; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const int64_t ic = i * ldc + j;
        if (i >= m || j >= n) { // outside the m x n window: untouched
          expect_near<T>(tag + " (outside C)", static_cast<size_t>(ic), C1[ic], C0[ic], 0, 1);
          continue;
        }
        double s = 0, mag = 0;
        for (int64_t l = 0; l < k; ++l) {
          const double a = ta ? A0[l * lda + i] : A0[i * lda + l];
          const double bb = tb ? B0[j * ldb + l] : B0[l * ldb + j];
          s += a * bb;
          mag += std::fabs(a * bb);
        }
        const double ref = alpha * s + beta * C0[ic];
        expect_near<T>(tag, static_cast<size_t>(ic), C1[ic], ref,
                       alpha * mag + std::fabs(beta * C0[ic]), static_cast<double>(k));
      }
  });
}

template <class T> void level23(const Backend& b) {
  for (const bool t : {false, true}) {
    gemv_case<T>(b, t, 1, 1, 0, 1, false, false);
    gemv_case<T>(b, t, 7, 1000, 3, 1, false, false);
    gemv_case<T>(b, t, 1000, 7, 0, 2, false, true);
    gemv_case<T>(b, t, 129, 4097, 1, 2, true, false);
    gemv_case<T>(b, t, 33, 65, 0, 1, true, true);
  }
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      gemm_case<T>(b, ta, tb, 1, 1, 1, 0, false, false);
      gemm_case<T>(b, ta, tb, 7, 5, 3, 0, false, true);
      gemm_case<T>(b, ta, tb, 33, 65, 17, 3, false, false);
      gemm_case<T>(b, ta, tb, 130, 67, 129, 0, true, false);
      gemm_case<T>(b, ta, tb, 64, 64, 64, 0, false, true);
      gemm_case<T>(b, ta, tb, 70, 45, 100, 1, true, true, true);
      gemm_case<T>(b, ta, tb, 5, 9, 0, 0, false, false); // k = 0: C = beta * C
    }
  gemm_case<T>(b, false, false, 257, 300, 200, 0, false, false);
  gemm_case<T>(b, true, false, 1, 4097, 7, 0, false, false);
  gemm_case<T>(b, false, true, 4097, 1, 7, 0, false, true);
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: %s <framework>\n", argv[0]);
    return 2;
  }
  fw_name = argv[1];
  Registry& reg = Registry::global();
  const Framework* fw = reg.find_framework(fw_name);
  if (fw == nullptr) {
    std::string why = "the framework plugin was not loaded";
    for (const auto& e : reg.load_report())
      if (e.name == fw_name || e.path.find("parenchyma-" + fw_name + ".") != std::string::npos)
        why = e.stage + ": " + e.reason;
    std::printf("SKIPPED: %s: %s\n", fw_name.c_str(), why.c_str());
    return 77;
  }
  if (fw->devices().empty()) {
    std::printf("SKIPPED: %s: %s\n", fw_name.c_str(),
                fw->reason().empty() ? "no devices" : fw->reason().c_str());
    return 77;
  }
  const BundleInfo* bundle = nullptr;
  for (const auto& bi : reg.bundles())
    if (bi->extension() == "blas" && bi->framework() == fw_name) bundle = bi.get();
  if (bundle == nullptr) {
    std::printf("FAIL: %s has devices but no blas bundle was loaded (see parenchyma-info)\n",
                fw_name.c_str());
    return 1;
  }
  if (bundle->ops().empty()) {
    std::printf("SKIPPED: %s: %s serves no ops: %s\n", fw_name.c_str(), bundle->name().c_str(),
                bundle->reason().c_str());
    return 77;
  }
  Backend b(fw_name);
  std::printf("conformance: blas on %s (%s), bundle %s, seed from random_device\n",
              b.name().c_str(), b.device().name.c_str(), bundle->name().c_str());

  // Every cell must be served here, not by fallback.
  for (const pcy_dtype d : {PCY_DTYPE_F32, PCY_DTYPE_F64}) {
    const char* dn = d == PCY_DTYPE_F32 ? "f32" : "f64";
    for (const OpKey* k :
         {&blas::detail::asum_key(d), &blas::detail::axpy_key(d), &blas::detail::axpby_key(d),
          &blas::detail::copy_key(d), &blas::detail::dot_key(d), &blas::detail::nrm2_key(d),
          &blas::detail::scal_key(d), &blas::detail::swap_key(d), &blas::detail::gemv_key(d),
          &blas::detail::gemm_key(d)}) {
      const OpRoute r = b.route(*k);
      expect_true(r.framework == fw_name && !r.fallback, std::string("blas.") + k->name + " " + dn +
                                                             " routes to " + r.framework + " (" +
                                                             r.bundle + "), expected " + fw_name);
      std::printf("  %-6s %s: %s\n", k->name, dn, r.implementation.c_str());
    }
  }

  level1<float>(b);
  level23<float>(b);
  level1<double>(b);
  level23<double>(b);
  expect_true(b.fallback_count() == 0, "no op may run by fallback");

  std::printf("%s: %d checks, %d failures, %d f64 cells skipped\n", fw_name.c_str(), checks,
              failures, skipped_cells);
  return failures == 0 ? 0 : 1;
}
