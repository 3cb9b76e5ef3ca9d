// parenchyma-conformance: the BLAS bundle suite. Every op and dtype on fresh random data of
// awkward sizes (1, 7, 1000, 4097, 65537; non-square and transposed matrices, leading dimensions >
// columns, increments 2, sub-matrices, scalars on the host and on the device, write-only outputs
// pre-filled with NaN) is checked against a naive double-precision reference. Elements a strided
// op must not touch are checked unchanged. semantics<T>() adds the reference-BLAS edge cases
// (docs/blas.md, "Reference semantics"): NaN/Inf outputs under beta = 0, nrm2 near the type's
// limits, quick returns compared bit for bit, alpha = 0 with NaN inputs, NaN-filled gaps, scal by
// 0 of NaN. input_class_cases<T>() adds the input classes of input_classes.hpp (non-finite, huge,
// tiny, wide-range, cancellation) on dot, asum, nrm2, axpy, gemv and gemm. Each case runs through
// the front-end (parenchyma/blas.hpp) on a backend of the framework under test. A cell the bundle
// does not serve here (errc::unsupported, or an op that ran on another framework by fallback) skips
// its case, or fails it with --require-ops; an f64 cell on a device that reports no fp64, and gemm
// in f16 / bf16, are optional: always a skip, with the reason (extension_suite.hpp decides).
#include "extension_suite.hpp"
#include "input_classes.hpp"

#include <parenchyma/blas.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace parenchyma::conformance {

namespace {

namespace blas = parenchyma::blas;

// |got - ref| <= tolerance, where the bound grows with the magnitude of the summed terms; under
// the f32 flush rule (extension_suite.hpp) widened by what flushing can lose in `terms` products
// scaled by `scale` (|alpha| + |beta|).
template <class T>
void expect_near(const std::string& what, size_t i, double got, double ref, double magnitude,
                 double terms, double scale = 1) {
  const double tol = sum_bound<T>(magnitude, terms) + 1e-30;
  compare_element<T>(std::fabs(got - ref) <= tol, what, i, got, ref, tol,
                     flush_bound<T>(terms, scale));
}

template <class T> void level1(extension_suite& reg) {
  // 65537: past the CUDA bundle's one-element-per-thread kernels (small_max 65536 elements).
  const std::vector<int64_t> sizes{1, 7, 1000, 4097, 65537};
  for (const int64_t n : sizes) {
    for (const int64_t inc : {1, 2}) {
      const std::string tag =
          std::string(tname<T>()) + " n=" + std::to_string(n) + " inc=" + std::to_string(inc);
      const int64_t len = 1 + (n - 1) * inc;
      for (const bool dev_scalar : {false, true}) {
        const std::string st = tag + (dev_scalar ? " device-scalars" : " host-scalars");
        reg.add<T>("axpy " + st, [=](const Backend& b) {
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
                           (hit ? std::fabs(x0[i]) : 0) + std::fabs(y0[i]), 1, 1 + alpha);
          }
        });
        reg.add<T>("axpby " + st, [=](const Backend& b) {
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
            expect_near<T>("axpby " + st, i, y1[i], ref, std::fabs(x0[i]) + std::fabs(y0[i]), 2,
                           std::fabs(alpha) + std::fabs(beta));
          }
        });
        reg.add<T>("scal " + st, [=](const Backend& b) {
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
                           std::fabs(3 * x0[i]), 1, alpha);
        });
      }
      reg.add<T>("axpby beta=0 write-only " + tag, [=](const Backend& b) {
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
      reg.add<T>("copy " + tag, [=](const Backend& b) {
        auto x = random_tensor<T>({len}), y = random_tensor<T>({len});
        const auto x0 = values(x), y0 = values(y);
        blas::copy(b, n, x, inc, y, inc);
        const auto y1 = values(y);
        for (int64_t i = 0; i < len; ++i)
          expect_near<T>("copy " + tag, i, y1[i], i % inc == 0 ? x0[i] : y0[i], 0, 1);
      });
      reg.add<T>("swap " + tag, [=](const Backend& b) {
        auto x = random_tensor<T>({len}), y = random_tensor<T>({n});
        const auto x0 = values(x), y0 = values(y);
        blas::swap(b, n, x, inc, y, 1);
        const auto x1 = values(x), y1 = values(y);
        for (int64_t i = 0; i < len; ++i)
          expect_near<T>("swap x " + tag, i, x1[i], i % inc == 0 ? y0[i / inc] : x0[i], 0, 1);
        for (int64_t i = 0; i < n; ++i)
          expect_near<T>("swap y " + tag, i, y1[i], x0[i * inc], 0, 1);
      });
      reg.add<T>("dot/asum/nrm2 " + tag, [=](const Backend& b) {
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
  reg.add<T>(std::string("dot result as device scalar ") + tname<T>(), [=](const Backend& b) {
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
      expect_near<T>("dot->axpy", i, y1[i], dd * x0[i] + y0[i], std::fabs(dd * x0[i]) + 1, 1000,
                     1 + dd);
  });
}

template <class T>
void gemv_case(extension_suite& reg, bool t, int64_t m, int64_t n, int64_t pad, int64_t inc,
               bool dev_scalars, bool beta0) {
  const std::string tag = std::string("gemv ") + tname<T>() + (t ? " T" : " N") +
                          " m=" + std::to_string(m) + " n=" + std::to_string(n) + " lda+" +
                          std::to_string(pad) + " inc=" + std::to_string(inc) +
                          (dev_scalars ? " device-scalars" : "") + (beta0 ? " beta=0" : "");
  reg.add<T>(tag, [=](const Backend& b) {
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
                     static_cast<double>(nx), std::fabs(alpha) + std::fabs(beta));
    }
  });
}

template <class T>
void gemm_case(extension_suite& reg, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t pad,
               bool dev_scalars, bool beta0, bool sub = false) {
  const std::string tag = std::string("gemm ") + tname<T>() + (ta ? " T" : " N") +
                          (tb ? "T" : "N") + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                          " k=" + std::to_string(k) + " ld+" + std::to_string(pad) +
                          (dev_scalars ? " device-scalars" : "") +
                          (beta0 ? " beta=0 write-only" : "") + (sub ? " sub-matrix" : "");
  reg.add<T>(tag, [=](const Backend& b) {
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
                       alpha * mag + std::fabs(beta * C0[ic]), static_cast<double>(k),
                       std::fabs(alpha) + std::fabs(beta));
      }
  });
}

template <class T> void level23(extension_suite& reg) {
  for (const bool t : {false, true}) {
    gemv_case<T>(reg, t, 1, 1, 0, 1, false, false);
    gemv_case<T>(reg, t, 7, 1000, 3, 1, false, false);
    gemv_case<T>(reg, t, 1000, 7, 0, 2, false, true);
    gemv_case<T>(reg, t, 129, 4097, 1, 2, true, false);
    gemv_case<T>(reg, t, 33, 65, 0, 1, true, true);
  }
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      gemm_case<T>(reg, ta, tb, 1, 1, 1, 0, false, false);
      gemm_case<T>(reg, ta, tb, 7, 5, 3, 0, false, true);
      gemm_case<T>(reg, ta, tb, 33, 65, 17, 3, false, false);
      gemm_case<T>(reg, ta, tb, 130, 67, 129, 0, true, false);
      gemm_case<T>(reg, ta, tb, 64, 64, 64, 0, false, true);
      gemm_case<T>(reg, ta, tb, 70, 45, 100, 1, true, true, true);
      gemm_case<T>(reg, ta, tb, 67, 131, 45, 0, false, true); // n across a 128-wide tile
      gemm_case<T>(reg, ta, tb, 5, 9, 0, 0, false, false); // k = 0: C = beta * C
    }
  gemm_case<T>(reg, false, false, 257, 300, 200, 0, false, false);
  gemm_case<T>(reg, true, false, 1, 4097, 7, 0, false, false);
  gemm_case<T>(reg, false, true, 4097, 1, 7, 0, false, true);
}

// ---- gemm in f16 / bf16 (served on CUDA: f32 accumulation, C rounded once) -------------------
// Optional cells: a framework that does not serve them skips them (with the reason), even with
// --require-ops. The reference is a double loop over the half-rounded inputs; the bound allows a
// rounding to the storage type of the result and of each part (alpha op(A) op(B) may be rounded
// before beta C is added), 2 units of its epsilon each, plus the f32 accumulation (8 eps_f32
// sqrt(k) of the summed magnitudes) plus the smallest subnormal.

template <class H>
void half_gemm_case(extension_suite& reg, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    int64_t pad, double alpha, double beta, bool poison) {
  const std::string tag = std::string("gemm ") + tname<H>() + (ta ? " T" : " N") +
                          (tb ? "T" : "N") + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                          " k=" + std::to_string(k) + " ld+" + std::to_string(pad) +
                          " alpha=" + g3(alpha) + " beta=" + g3(beta) +
                          (poison ? " NaN in unread operands" : "");
  reg.add<H>(
      tag,
      [=](const Backend& b) {
        const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        const int64_t lda = ac + pad, ldb = bc + pad, ldc = n + pad;
        std::uniform_real_distribution<double> u(-1, 1);
        const auto fill = [&](SharedTensor<H>& t, bool nan) {
          for (H& v : t.write_only())
            v = H(nan ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(u(rng())));
        };
        // alpha == 0 or k == 0: A and B are not read (NaN there must not leak); beta == 0: C is
        // not.
        SharedTensor<H> A({std::max<int64_t>(ar, 1), std::max<int64_t>(lda, 1)}),
            B({std::max<int64_t>(br, 1), std::max<int64_t>(ldb, 1)}), C({m, ldc});
        fill(A, poison && alpha == 0);
        fill(B, poison && alpha == 0);
        fill(C, poison && beta == 0);
        const auto as_d = [](const SharedTensor<H>& t) {
          std::vector<double> v;
          for (const H& h : t.read())
            v.push_back(static_cast<double>(static_cast<float>(h)));
          return v;
        };
        const auto A0 = as_d(A), B0 = as_d(B), C0 = as_d(C);
        blas::gemm_dims d;
        d.m = m;
        d.n = n;
        d.k = k;
        d.lda = std::max<int64_t>(lda, 1);
        d.ldb = std::max<int64_t>(ldb, 1);
        d.ldc = ldc;
        blas::gemm(b, ta ? blas::trans : blas::no_trans, tb ? blas::trans : blas::no_trans, alpha,
                   A, B, beta, C, d);
        const auto C1 = as_d(C);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < ldc; ++j) {
            const size_t ic = static_cast<size_t>(i * ldc + j);
            if (j >= n) { // the gap past n columns: untouched, bit for bit (NaN stays NaN)
              expect_true(C1[ic] == C0[ic] || (std::isnan(C1[ic]) && std::isnan(C0[ic])),
                          str(tag, ": element ", ic, " outside the m x n window changed"));
              continue;
            }
            double s = 0, mag = 0;
            if (alpha != 0)
              for (int64_t l = 0; l < k; ++l) {
                const double a = ta ? A0[static_cast<size_t>(l * lda + i)]
                                    : A0[static_cast<size_t>(i * lda + l)];
                const double bb = tb ? B0[static_cast<size_t>(j * ldb + l)]
                                     : B0[static_cast<size_t>(l * ldb + j)];
                s += a * bb;
                mag += std::fabs(a * bb);
              }
            const double cterm = beta == 0 ? 0.0 : beta * C0[ic]; // beta == 0: C is not read
            const double ref = alpha * s + cterm;
            // The product may be rounded to the storage type before beta C is added (cuBLAS's
            // split-k epilogues do): two roundings of the parts, plus the f32 accumulation.
            const double tol =
                2 * eps<H>() * (std::fabs(ref) + std::fabs(alpha * s) + std::fabs(cterm)) +
                8 * 0x1p-24 * (std::sqrt(static_cast<double>(k)) + 1) *
                    (std::fabs(alpha) * mag + std::fabs(cterm)) +
                denorm_min<H>();
            report_element(std::fabs(C1[ic] - ref) <= tol, tag, tname<H>(), ic, C1[ic], ref, tol);
          }
      },
      {&blas::detail::gemm_key(dtype_v<H>)});
}

template <class H> void half_gemm(extension_suite& reg) {
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      half_gemm_case<H>(reg, ta, tb, 1, 1, 1, 0, 1.0, 0.0, false);
      half_gemm_case<H>(reg, ta, tb, 7, 5, 3, 0, 0.5, 2.0, false);
      half_gemm_case<H>(reg, ta, tb, 33, 65, 17, 3, -1.25, 0.5, false);
      half_gemm_case<H>(reg, ta, tb, 130, 67, 257, 1, 1.0, 0.0, true);
    }
  half_gemm_case<H>(reg, false, false, 256, 384, 1000, 0, 0.125, 1.0, false);
  half_gemm_case<H>(reg, false, false, 9, 17, 0, 2, 1.0, -0.5, false); // k = 0: C = beta C
  half_gemm_case<H>(reg, false, true, 9, 17, 11, 0, 0.0, 0.0, true);   // C = 0, nothing read
  half_gemm_case<H>(reg, true, false, 12, 5, 40, 1, 0.0, 3.0, true);   // alpha = 0: beta C
}

// gemm_batched in f16 / bf16 (CUDA: cublasGemmStridedBatchedEx): batch products from [batch,
// rows, cols] shapes (a broadcast operand 2-d), each held to half_gemm_case's bound.
template <class H>
void half_gemm_batched_case(extension_suite& reg, bool ta, bool tb, int64_t batch, int64_t m,
                            int64_t n, int64_t k, int broadcast, double alpha, double beta) {
  const std::string tag = str("gemm_batched ", tname<H>(), ta ? " T" : " N", tb ? "T" : "N",
                              " batch=", batch, " m=", m, " n=", n, " k=", k,
                              broadcast == 1   ? " broadcast A"
                              : broadcast == 2 ? " broadcast B"
                                               : "",
                              " alpha=", g3(alpha), " beta=", g3(beta));
  reg.add<H>(
      tag,
      [=](const Backend& b) {
        const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        std::uniform_real_distribution<double> u(-1, 1);
        const auto make = [&](std::vector<int64_t> shape, bool nan) {
          SharedTensor<H> t(std::move(shape));
          for (H& v : t.write_only())
            v = H(nan ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(u(rng())));
          return t;
        };
        auto A = broadcast == 1 ? make({ar, ac}, false) : make({batch, ar, ac}, false);
        auto B = broadcast == 2 ? make({br, bc}, false) : make({batch, br, bc}, false);
        auto C = make({batch, m, n}, beta == 0); // beta == 0: NaN in C must not leak
        const auto as_d = [](const SharedTensor<H>& t) {
          std::vector<double> v;
          for (const H& h : t.read())
            v.push_back(static_cast<double>(static_cast<float>(h)));
          return v;
        };
        const auto A0 = as_d(A), B0 = as_d(B), C0 = as_d(C);
        blas::gemm_batched(b, ta ? blas::trans : blas::no_trans, tb ? blas::trans : blas::no_trans,
                           alpha, A, B, beta, C);
        const auto C1 = as_d(C);
        const int64_t sa = broadcast == 1 ? 0 : ar * ac, sb = broadcast == 2 ? 0 : br * bc;
        for (int64_t p = 0; p < batch; ++p)
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              const size_t ic = static_cast<size_t>((p * m + i) * n + j);
              double s = 0, mag = 0;
              for (int64_t l = 0; l < k; ++l) {
                const double a = A0[static_cast<size_t>(p * sa + (ta ? l * ac + i : i * ac + l))];
                const double bb = B0[static_cast<size_t>(p * sb + (tb ? j * bc + l : l * bc + j))];
                s += a * bb;
                mag += std::fabs(a * bb);
              }
              const double cterm = beta == 0 ? 0.0 : beta * C0[ic];
              const double ref = alpha * s + cterm;
              const double tol =
                  2 * eps<H>() * (std::fabs(ref) + std::fabs(alpha * s) + std::fabs(cterm)) +
                  8 * 0x1p-24 * (std::sqrt(static_cast<double>(k)) + 1) *
                      (std::fabs(alpha) * mag + std::fabs(cterm)) +
                  denorm_min<H>();
              report_element(std::fabs(C1[ic] - ref) <= tol, tag, tname<H>(), ic, C1[ic], ref, tol);
            }
      },
      {&blas::detail::gemm_batched_key(dtype_v<H>)});
}

template <class H> void half_gemm_batched(extension_suite& reg) {
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      half_gemm_batched_case<H>(reg, ta, tb, 1, 7, 5, 3, 0, 1.0, 0.0);
      half_gemm_batched_case<H>(reg, ta, tb, 3, 33, 65, 17, 0, -1.25, 0.5);
      half_gemm_batched_case<H>(reg, ta, tb, 7, 20, 9, 40, 1, 0.5, 0.0);
      half_gemm_batched_case<H>(reg, ta, tb, 3, 9, 20, 13, 2, 1.0, 2.0);
    }
}

// ---- reference-BLAS semantics: the edge cases ported code relies on (docs/blas.md) ----------

enum class scal_mode { host, device, mixed }; // mixed: host alpha, device beta
const char* mode_name(scal_mode s) {
  return s == scal_mode::host     ? "host-scalars"
         : s == scal_mode::device ? "device-scalars"
                                  : "mixed-scalars";
}

template <class T>
SharedTensor<T> tensor_from(std::vector<int64_t> shape, const std::vector<T>& v) {
  SharedTensor<T> t(std::move(shape));
  auto w = t.write_only();
  std::copy(v.begin(), v.end(), w.begin());
  return t;
}
// What an output holds before an op that must not read it: NaN, +Inf, -Inf in turn.
template <class T> T poison(size_t i) {
  switch (i % 3) {
  case 0: return std::numeric_limits<T>::quiet_NaN();
  case 1: return std::numeric_limits<T>::infinity();
  default: return -std::numeric_limits<T>::infinity();
  }
}
template <class T> std::vector<T> poison_pattern(size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = poison<T>(i);
  return v;
}
template <class T> bool same_bits(T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

// "Untouched" means bit for bit (NaN payloads and the sign of zero included).
template <class T> void expect_bits(const std::string& what, size_t i, T got, T want) {
  if (same_bits(got, want))
    pass_check();
  else
    fail_check(str(tname<T>(), " ", what, ": element ", i, " is ", g10(static_cast<double>(got)),
                   ", expected it untouched (", g10(static_cast<double>(want)), ")"));
}
template <class T>
void expect_untouched(const std::string& what, const std::vector<T>& got,
                      const std::vector<T>& before) {
  for (size_t i = 0; i < got.size(); ++i)
    expect_bits<T>(what, i, got[i], before[i]);
}
// Exactly `want` (0 * anything must give 0, 2 * v must give 2v): compared by value, so +0 == -0.
template <class T> void expect_exact(const std::string& what, size_t i, T got, double want) {
  if (static_cast<double>(got) == want)
    pass_check();
  else
    fail_check(str(tname<T>(), " ", what, ": element ", i, " got ", g10(static_cast<double>(got)),
                   " expected exactly ", g10(want)));
}

// y = alpha op(A) x with beta = 0, y pre-filled with NaN/Inf: dense (write-only), dense with a
// tail the op must not touch, strided. Every element outside the described ones keeps its bits.
template <class T> void beta0_gemv(extension_suite& reg) {
  for (const bool t : {false, true})
    for (const int layout : {0, 1, 2}) // 0 dense, 1 tail, 2 strided
      for (const scal_mode sm : {scal_mode::host, scal_mode::device, scal_mode::mixed}) {
        const int64_t m = 37, n = 53, lda = layout == 0 ? n : n + 2;
        const int64_t nx = t ? m : n, ny = t ? n : m, inc = layout == 2 ? 3 : 1;
        const int64_t ylen = layout == 0 ? ny : layout == 1 ? ny + 5 : 1 + (ny - 1) * inc + 2;
        const std::string tag = std::string("gemv beta=0 NaN/Inf y ") + (t ? "T " : "N ") +
                                (layout == 0   ? "dense"
                                 : layout == 1 ? "tail"
                                               : "strided") +
                                " " + mode_name(sm);
        reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
          const auto A0 = random_values<T>(static_cast<size_t>(m * lda)), x0 = random_values<T>(nx);
          const auto y0 = poison_pattern<T>(static_cast<size_t>(ylen));
          auto A = tensor_from<T>({m, lda}, A0), x = tensor_from<T>({nx}, x0),
               y = tensor_from<T>({ylen}, y0);
          const double alpha = 1.5;
          auto at = scalar_tensor<T>(alpha), bt = scalar_tensor<T>(0);
          const blas::Scalar al = sm == scal_mode::device ? blas::Scalar(at) : blas::Scalar(alpha);
          const blas::Scalar be = sm == scal_mode::host ? blas::Scalar(0.0) : blas::Scalar(bt);
          blas::gemv(b, t ? blas::trans : blas::no_trans, al, A, x, be, y,
                     {.m = m, .n = n, .lda = lda, .incx = 1, .incy = inc});
          const auto y1 = raw(y);
          for (int64_t i = 0; i < ylen; ++i) {
            if (i % inc != 0 || i / inc >= ny) {
              expect_bits<T>(tag + " (outside y)", i, y1[i], y0[i]);
              continue;
            }
            const int64_t r = i / inc;
            double s = 0, mag = 0;
            for (int64_t j = 0; j < nx; ++j) {
              const double a = t ? A0[j * lda + r] : A0[r * lda + j];
              s += a * x0[j];
              mag += std::fabs(a * x0[j]);
            }
            expect_near<T>(tag, i, y1[i], alpha * s, alpha * mag, static_cast<double>(nx),
                           std::fabs(alpha));
          }
        });
      }
}

// C = alpha op(A) op(B) with beta = 0, C pre-filled with NaN/Inf: whole (write-only), ldc > n,
// and m x n smaller than the tensor (spare rows); what lies outside the window keeps its bits.
template <class T> void beta0_gemm(extension_suite& reg) {
  struct shape {
    int64_t m, n, k;
  };
  for (const shape s : {shape{33, 29, 17}, shape{70, 45, 100}})
    for (const int tr : {0, 1, 2, 3})
      for (const int layout : {0, 1, 2}) // 0 whole, 1 ldc > n, 2 spare rows
        for (const scal_mode sm : {scal_mode::host, scal_mode::device, scal_mode::mixed}) {
          const bool ta = tr & 2, tb = tr & 1;
          const int64_t m = s.m, n = s.n, k = s.k;
          const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
          const int64_t ldc = layout == 1 ? n + 3 : n, rows = layout == 2 ? m + 2 : m;
          const std::string tag = std::string("gemm beta=0 NaN/Inf C ") + (ta ? "T" : "N") +
                                  (tb ? "T" : "N") + " m=" + std::to_string(m) + " " +
                                  (layout == 0   ? "whole"
                                   : layout == 1 ? "ldc>n"
                                                 : "spare-rows") +
                                  " " + mode_name(sm);
          reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
            const auto A0 = random_values<T>(static_cast<size_t>(ar * ac)),
                       B0 = random_values<T>(static_cast<size_t>(br * bc));
            const auto C0 = poison_pattern<T>(static_cast<size_t>(rows * ldc));
            auto A = tensor_from<T>({ar, ac}, A0), B = tensor_from<T>({br, bc}, B0),
                 C = tensor_from<T>({rows, ldc}, C0);
            const double alpha = -0.75;
            auto at = scalar_tensor<T>(alpha), bt = scalar_tensor<T>(0);
            const blas::Scalar al =
                sm == scal_mode::device ? blas::Scalar(at) : blas::Scalar(alpha);
            const blas::Scalar be = sm == scal_mode::host ? blas::Scalar(0.0) : blas::Scalar(bt);
            blas::gemm(b, ta ? blas::trans : blas::no_trans, tb ? blas::trans : blas::no_trans, al,
                       A, B, be, C, {.m = m, .n = n, .k = k, .lda = ac, .ldb = bc, .ldc = ldc});
            const auto C1 = raw(C);
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t j = 0; j < ldc; ++j) {
                const int64_t ic = i * ldc + j;
                if (i >= m || j >= n) {
                  expect_bits<T>(tag + " (outside C)", ic, C1[ic], C0[ic]);
                  continue;
                }
                double sum = 0, mag = 0;
                for (int64_t l = 0; l < k; ++l) {
                  const double a = ta ? A0[l * ac + i] : A0[i * ac + l];
                  const double bb = tb ? B0[j * bc + l] : B0[l * bc + j];
                  sum += a * bb;
                  mag += std::fabs(a * bb);
                }
                expect_near<T>(tag, ic, C1[ic], alpha * sum, std::fabs(alpha) * mag,
                               static_cast<double>(k), std::fabs(alpha));
              }
          });
        }
}

// y = alpha x + 0 y with y pre-filled with NaN/Inf: strided and with a tail.
template <class T> void beta0_axpby(extension_suite& reg) {
  for (const int64_t n : {7, 1000})
    for (const int64_t inc : {1, 2})
      for (const scal_mode sm : {scal_mode::host, scal_mode::device, scal_mode::mixed}) {
        const int64_t len = 1 + (n - 1) * inc + 3; // a tail beyond the last element
        const std::string tag = "axpby beta=0 NaN/Inf y n=" + std::to_string(n) +
                                " inc=" + std::to_string(inc) + " " + mode_name(sm);
        reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
          const auto x0 = random_values<T>(static_cast<size_t>(len));
          const auto y0 = poison_pattern<T>(static_cast<size_t>(len));
          auto x = tensor_from<T>({len}, x0), y = tensor_from<T>({len}, y0);
          const double alpha = 2.5;
          auto at = scalar_tensor<T>(alpha), bt = scalar_tensor<T>(0);
          const blas::Scalar al = sm == scal_mode::device ? blas::Scalar(at) : blas::Scalar(alpha);
          const blas::Scalar be = sm == scal_mode::host ? blas::Scalar(0.0) : blas::Scalar(bt);
          blas::axpby(b, n, al, x, inc, be, y, inc);
          const auto y1 = raw(y);
          for (int64_t i = 0; i < len; ++i) {
            if (i % inc == 0 && i / inc < n)
              expect_near<T>(tag, i, y1[i], alpha * x0[i], std::fabs(alpha * x0[i]), 1,
                             std::fabs(alpha));
            else
              expect_bits<T>(tag + " (outside y)", i, y1[i], y0[i]);
          }
        });
      }
}

// The norm of values whose squares overflow or underflow: a scaled sum of squares in double.
double scaled_norm(const std::vector<double>& v) {
  double scale = 0;
  for (double e : v)
    scale = std::max(scale, std::fabs(e));
  if (scale == 0) return 0;
  double ss = 0;
  for (double e : v)
    ss += (e / scale) * (e / scale);
  return scale * std::sqrt(ss);
}

template <class T> void nrm2_limits(extension_suite& reg) {
  using lim = std::numeric_limits<T>;
  const bool f64 = sizeof(T) == 8;
  const double big = f64 ? 1e300 : 1e38, small = f64 ? 1e-300 : 1e-38;
  const double denorm = f64 ? 1e-310 : 1e-40; // below the smallest normal number
  for (const int64_t n : {1, 7, 1000, 4097})
    for (const int64_t inc : {1, 2})
      for (const int set : {0, 1, 2, 3, 4}) {
        static const char* names[] = {"big", "small", "denormal", "big+small", "wide"};
        const std::string tag = std::string("nrm2 ") + names[set] + " n=" + std::to_string(n) +
                                " inc=" + std::to_string(inc);
        reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
          const int64_t len = 1 + (n - 1) * inc;
          std::vector<T> x(static_cast<size_t>(len), lim::quiet_NaN()); // gaps: must not be read
          std::vector<double> used;
          std::uniform_real_distribution<double> u(0.25, 1), e(-1, 1);
          for (int64_t i = 0; i < n; ++i) {
            const double sign = (rng()() & 1) ? 1 : -1;
            double v = 0;
            switch (set) {
            case 0:
              v = big / std::sqrt(static_cast<double>(n)) * u(rng());
              break; // fits, squares do not
            case 1: v = small * u(rng()); break;
            case 2: v = denorm * u(rng()); break;
            case 3:
              v = i % 5 == 0 ? big / std::sqrt(static_cast<double>(n)) * u(rng())
                             : small * u(rng());
              break;
            default: // magnitudes over the whole exponent range of the type
              v = u(rng()) *
                  std::pow(10.0, e(rng()) * (f64 ? 300 : 37) - std::log10(static_cast<double>(n)));
            }
            x[static_cast<size_t>(i * inc)] = static_cast<T>(sign * v);
            used.push_back(static_cast<double>(x[static_cast<size_t>(i * inc)]));
          }
          const double ref = scaled_norm(used);
          auto xt = tensor_from<T>({len}, x);
          SharedTensor<T> r({1});
          blas::nrm2(b, n, xt, inc, r);
          const double got = r.read()[0];
          // Relative, plus a few units of the smallest denormal where the result is one itself.
          const double tol = 8 * lim::epsilon() * (std::sqrt(static_cast<double>(n)) + 1) * ref +
                             4 * static_cast<double>(lim::denorm_min());
          // Under the f32 flush rule: the flushed inputs move the norm by at most their own norm,
          // sqrt(n) x the smallest normal.
          const double flush = flush_bound<T>(std::sqrt(static_cast<double>(n)));
          compare_element<T>(std::fabs(got - ref) <= tol, tag, 0, got, ref, tol, flush);
          if (inc == 1) {
            const double host_value = blas::nrm2(b, xt);
            compare_element<T>(std::fabs(host_value - ref) <= tol, tag + " (host value)", 0,
                               host_value, ref, tol, flush);
          }
        });
      }
}

// n == 0 touches nothing; asum/dot/nrm2 of nothing are 0.
template <class T> void quick_n0(extension_suite& reg) {
  for (const bool dev : {false, true}) {
    const std::string tag = std::string("n=0 ") + (dev ? "device-scalars" : "host-scalars");
    reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
      auto xv = random_values<T>(9), yv = random_values<T>(9);
      xv[0] = yv[1] = std::numeric_limits<T>::quiet_NaN();
      yv[0] = T(-0.0);
      auto x = tensor_from<T>({9}, xv), y = tensor_from<T>({9}, yv);
      auto at = scalar_tensor<T>(0.5), bt = scalar_tensor<T>(0);
      const blas::Scalar al = dev ? blas::Scalar(at) : blas::Scalar(0.5);
      const blas::Scalar be = dev ? blas::Scalar(bt) : blas::Scalar(0.0);
      for (const char* op : {"asum", "dot", "nrm2"}) {
        SharedTensor<T> r({1});
        r.write_only()[0] = std::numeric_limits<T>::quiet_NaN();
        if (op[0] == 'a') blas::asum(b, 0, x, 1, r);
        if (op[0] == 'd') blas::dot(b, 0, x, 1, y, 1, r);
        if (op[0] == 'n') blas::nrm2(b, 0, x, 1, r);
        expect_exact<T>(tag + " " + op + " result", 0, r.read()[0], 0);
      }
      blas::axpy(b, 0, al, x, 1, y, 1);
      expect_untouched<T>(tag + " axpy y", raw(y), yv);
      blas::axpby(b, 0, al, x, 1, be, y, 2);
      expect_untouched<T>(tag + " axpby y", raw(y), yv);
      blas::scal(b, 0, al, y, 1);
      expect_untouched<T>(tag + " scal x", raw(y), yv);
      blas::copy(b, 0, x, 1, y, 1);
      expect_untouched<T>(tag + " copy y", raw(y), yv);
      blas::swap(b, 0, x, 1, y, 1);
      expect_untouched<T>(tag + " swap x", raw(x), xv);
      expect_untouched<T>(tag + " swap y", raw(y), yv);
    });
  }
}

// gemv with m == 0 or n == 0 leaves y exactly as it was, whatever beta is (reference BLAS
// returns at once); y holds -0 and NaN so that any write (even 1 * y + 0) shows.
template <class T> void quick_gemv(extension_suite& reg) {
  struct mn {
    int64_t m, n;
  };
  for (const bool t : {false, true})
    for (const mn s : {mn{0, 5}, mn{5, 0}, mn{0, 0}})
      for (const double beta : {0.0, 0.5, 1.0})
        for (const bool dev : {false, true}) {
          const int64_t nx = t ? s.m : s.n, ny = t ? s.n : s.m;
          const std::string tag = std::string("gemv quick return ") + (t ? "T" : "N") +
                                  " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                                  " beta=" + std::to_string(beta).substr(0, 3) +
                                  (dev ? " device-scalars" : " host-scalars");
          reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
            const int64_t cols = std::max<int64_t>(s.n, 1);
            auto A = tensor_from<T>(
                {std::max<int64_t>(s.m, 1), cols},
                random_values<T>(static_cast<size_t>(std::max<int64_t>(s.m, 1) * cols)));
            auto x = tensor_from<T>({std::max<int64_t>(nx, 1)},
                                    random_values<T>(std::max<int64_t>(nx, 1)));
            auto yv = random_values<T>(static_cast<size_t>(std::max<int64_t>(ny, 1)));
            yv[0] = T(-0.0);
            if (yv.size() > 2) yv[2] = std::numeric_limits<T>::quiet_NaN();
            auto y = tensor_from<T>({static_cast<int64_t>(yv.size())}, yv);
            auto at = scalar_tensor<T>(1.5), bt = scalar_tensor<T>(beta);
            const blas::Scalar al = dev ? blas::Scalar(at) : blas::Scalar(1.5);
            const blas::Scalar be = dev ? blas::Scalar(bt) : blas::Scalar(beta);
            blas::gemv(b, t ? blas::trans : blas::no_trans, al, A, x, be, y,
                       {.m = s.m, .n = s.n, .lda = cols, .incx = 1, .incy = 1});
            expect_untouched<T>(tag, raw(y), yv);
          });
        }
}

// gemv with alpha == 0: y = beta y, A and x not read (they hold NaN here).
template <class T> void alpha0_gemv(extension_suite& reg) {
  for (const bool t : {false, true})
    for (const double beta : {0.0, 0.5})
      for (const bool dev : {false, true}) {
        const std::string tag = std::string("gemv alpha=0 NaN in A, x ") + (t ? "T" : "N") +
                                " beta=" + std::to_string(beta).substr(0, 3) +
                                (dev ? " device-scalars" : " host-scalars");
        reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
          const int64_t m = 19, n = 23, inc = 2, nx = t ? m : n, ny = t ? n : m;
          auto Av = random_values<T>(static_cast<size_t>(m * n)), xv = random_values<T>(nx);
          Av[3] = xv[1] = std::numeric_limits<T>::quiet_NaN();
          Av[7] = std::numeric_limits<T>::infinity();
          const int64_t ylen = 1 + (ny - 1) * inc;
          const auto y0 = beta == 0 ? poison_pattern<T>(ylen) : random_values<T>(ylen);
          auto A = tensor_from<T>({m, n}, Av), x = tensor_from<T>({nx}, xv),
               y = tensor_from<T>({ylen}, y0);
          auto at = scalar_tensor<T>(0), bt = scalar_tensor<T>(beta);
          const blas::Scalar al = dev ? blas::Scalar(at) : blas::Scalar(0.0);
          const blas::Scalar be = dev ? blas::Scalar(bt) : blas::Scalar(beta);
          blas::gemv(b, t ? blas::trans : blas::no_trans, al, A, x, be, y,
                     {.m = m, .n = n, .lda = n, .incx = 1, .incy = inc});
          const auto y1 = raw(y);
          for (int64_t i = 0; i < ylen; ++i) {
            if (i % inc == 0)
              expect_exact<T>(tag, i, y1[i], beta == 0 ? 0.0 : beta * static_cast<double>(y0[i]));
            else
              expect_bits<T>(tag + " (outside y)", i, y1[i], y0[i]);
          }
        });
      }
}

// gemm quick paths: k == 0 and alpha == 0 give C = beta C (beta = 0: C = 0, never read), with
// A and B not read (NaN in them for alpha == 0); m == 0 or n == 0 touches nothing.
template <class T> void quick_gemm(extension_suite& reg) {
  for (const int which : {0, 1}) // 0: k == 0, 1: alpha == 0 with NaN in A and B
    for (const double beta : {0.0, 2.0})
      for (const bool dev : {false, true}) {
        const std::string tag = std::string("gemm ") + (which == 0 ? "k=0" : "alpha=0 NaN in A,B") +
                                " beta=" + std::to_string(beta).substr(0, 3) +
                                " ldc>n spare-rows " + (dev ? "device-scalars" : "host-scalars");
        reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
          const int64_t m = 21, n = 13, k = which == 0 ? 0 : 11, ldc = n + 2, rows = m + 1;
          auto Av = random_values<T>(static_cast<size_t>(m * std::max<int64_t>(k, 1))),
               Bv = random_values<T>(static_cast<size_t>(std::max<int64_t>(k, 1) * n));
          Av[5] = Bv[2] = std::numeric_limits<T>::quiet_NaN();
          Bv[4] = -std::numeric_limits<T>::infinity();
          const auto C0 = beta == 0 ? poison_pattern<T>(rows * ldc) : random_values<T>(rows * ldc);
          auto A = tensor_from<T>({m, std::max<int64_t>(k, 1)}, Av),
               B = tensor_from<T>({std::max<int64_t>(k, 1), n}, Bv),
               C = tensor_from<T>({rows, ldc}, C0);
          const double alpha = which == 0 ? 1.5 : 0.0;
          auto at = scalar_tensor<T>(alpha), bt = scalar_tensor<T>(beta);
          const blas::Scalar al = dev ? blas::Scalar(at) : blas::Scalar(alpha);
          const blas::Scalar be = dev ? blas::Scalar(bt) : blas::Scalar(beta);
          blas::gemm(
              b, blas::no_trans, blas::no_trans, al, A, B, be, C,
              {.m = m, .n = n, .k = k, .lda = std::max<int64_t>(k, 1), .ldb = n, .ldc = ldc});
          const auto C1 = raw(C);
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const int64_t ic = i * ldc + j;
              if (i >= m || j >= n)
                expect_bits<T>(tag + " (outside C)", ic, C1[ic], C0[ic]);
              else
                expect_exact<T>(tag, ic, C1[ic],
                                beta == 0 ? 0.0 : beta * static_cast<double>(C0[ic]));
            }
        });
      }
  struct mn {
    int64_t m, n;
  };
  for (const mn s : {mn{0, 4}, mn{3, 0}, mn{0, 0}})
    for (const double beta : {0.0, 1.0})
      for (const bool dev : {false, true}) {
        const std::string tag = "gemm quick return m=" + std::to_string(s.m) +
                                " n=" + std::to_string(s.n) +
                                " beta=" + std::to_string(beta).substr(0, 3) +
                                (dev ? " device-scalars" : " host-scalars");
        reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
          auto A = random_tensor<T>({3, 5}), B = random_tensor<T>({5, 4});
          auto Cv = random_values<T>(12);
          Cv[0] = T(-0.0);
          Cv[1] = std::numeric_limits<T>::quiet_NaN();
          auto C = tensor_from<T>({3, 4}, Cv);
          auto at = scalar_tensor<T>(1.5), bt = scalar_tensor<T>(beta);
          const blas::Scalar al = dev ? blas::Scalar(at) : blas::Scalar(1.5);
          const blas::Scalar be = dev ? blas::Scalar(bt) : blas::Scalar(beta);
          blas::gemm(b, blas::no_trans, blas::no_trans, al, A, B, be, C,
                     {.m = s.m, .n = s.n, .k = 5, .lda = 5, .ldb = 4, .ldc = 4});
          expect_untouched<T>(tag, raw(C), Cv);
        });
      }
}

// axpy with alpha == 0 returns at once: y keeps its bits even where x holds NaN or Inf.
// axpby with alpha == 0 is y = beta y (x not read).
template <class T> void alpha0_axpy(extension_suite& reg) {
  for (const int64_t inc : {1, 2})
    for (const bool dev : {false, true}) {
      const std::string tag = "alpha=0 NaN/Inf in x inc=" + std::to_string(inc) +
                              (dev ? " device-scalars" : " host-scalars");
      reg.add<T>(std::string(tname<T>()) + " axpy " + tag, [=](const Backend& b) {
        const int64_t n = 1000, len = 1 + (n - 1) * inc;
        auto xv = random_values<T>(len), yv = random_values<T>(len);
        for (int64_t i = 0; i < len; i += 7)
          xv[i] = poison<T>(static_cast<size_t>(i / 7));
        yv[0] = T(-0.0);
        auto x = tensor_from<T>({len}, xv), y = tensor_from<T>({len}, yv);
        auto at = scalar_tensor<T>(0);
        blas::axpy(b, n, dev ? blas::Scalar(at) : blas::Scalar(0.0), x, inc, y, inc);
        expect_untouched<T>("axpy " + tag, raw(y), yv);
      });
      for (const double beta : {0.0, 0.5})
        reg.add<T>(std::string(tname<T>()) + " axpby beta=" + std::to_string(beta).substr(0, 3) +
                       " " + tag,
                   [=](const Backend& b) {
                     const int64_t n = 1000, len = 1 + (n - 1) * inc;
                     auto xv = random_values<T>(len);
                     for (int64_t i = 0; i < len; i += 7)
                       xv[i] = poison<T>(static_cast<size_t>(i / 7));
                     const auto yv = beta == 0 ? poison_pattern<T>(len) : random_values<T>(len);
                     auto x = tensor_from<T>({len}, xv), y = tensor_from<T>({len}, yv);
                     auto at = scalar_tensor<T>(0), bt = scalar_tensor<T>(beta);
                     blas::axpby(b, n, dev ? blas::Scalar(at) : blas::Scalar(0.0), x, inc,
                                 dev ? blas::Scalar(bt) : blas::Scalar(beta), y, inc);
                     const auto y1 = raw(y);
                     for (int64_t i = 0; i < len; ++i) {
                       if (i % inc == 0)
                         expect_exact<T>("axpby alpha=0 " + tag, i, y1[i],
                                         beta == 0 ? 0.0 : beta * static_cast<double>(yv[i]));
                       else
                         expect_bits<T>("axpby alpha=0 " + tag + " (outside y)", i, y1[i], yv[i]);
                     }
                   });
    }
}

// Strided level-1 outputs: the gaps and the tail hold NaN and keep their bits.
template <class T> void strided_untouched(extension_suite& reg) {
  for (const bool dev : {false, true}) {
    const std::string tag =
        std::string("inc=3 NaN gaps ") + (dev ? "device-scalars" : "host-scalars");
    reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
      const int64_t n = 333, inc = 3, len = 1 + (n - 1) * inc + 4;
      auto base = poison_pattern<T>(len);
      for (int64_t i = 0; i < n; ++i)
        base[i * inc] = random_values<T>(1)[0];
      auto xv = random_values<T>(len);
      auto at = scalar_tensor<T>(0.5), bt = scalar_tensor<T>(-2);
      const blas::Scalar al = dev ? blas::Scalar(at) : blas::Scalar(0.5);
      const blas::Scalar be = dev ? blas::Scalar(bt) : blas::Scalar(-2.0);
      const auto check_all = [&](const char* op, const std::vector<T>& got, auto&& value) {
        for (int64_t i = 0; i < len; ++i) {
          if (i % inc == 0 && i / inc < n)
            expect_near<T>(tag + " " + op, i, got[i], value(i), 2 * std::fabs(value(i)) + 1, 2);
          else
            expect_bits<T>(tag + " " + op + " (gap)", i, got[i], base[i]);
        }
      };
      auto x = tensor_from<T>({len}, xv);
      {
        auto y = tensor_from<T>({len}, base);
        blas::axpy(b, n, al, x, inc, y, inc);
        check_all("axpy", raw(y), [&](int64_t i) { return 0.5 * xv[i] + base[i]; });
      }
      {
        auto y = tensor_from<T>({len}, base);
        blas::axpby(b, n, al, x, inc, be, y, inc);
        check_all("axpby", raw(y), [&](int64_t i) { return 0.5 * xv[i] - 2.0 * base[i]; });
      }
      {
        auto y = tensor_from<T>({len}, base);
        blas::scal(b, n, be, y, inc);
        check_all("scal", raw(y), [&](int64_t i) { return -2.0 * base[i]; });
      }
      {
        auto y = tensor_from<T>({len}, base);
        blas::copy(b, n, x, inc, y, inc);
        check_all("copy", raw(y), [&](int64_t i) { return static_cast<double>(xv[i]); });
      }
      {
        auto zv = base;
        for (int64_t i = 0; i < n; ++i)
          zv[i * inc] = xv[i * inc];
        auto y = tensor_from<T>({len}, base), z = tensor_from<T>({len}, zv);
        blas::swap(b, n, z, inc, y, inc);
        check_all("swap y", raw(y), [&](int64_t i) { return static_cast<double>(zv[i]); });
        check_all("swap x", raw(z), [&](int64_t i) { return static_cast<double>(base[i]); });
      }
    });
  }
}

// scal by 0: IEEE multiplication, as reference dscal computes it. NaN * 0 and Inf * 0 are NaN,
// -v * 0 is -0; nothing is replaced by a plain zero.
template <class T> void scal0_nan(extension_suite& reg) {
  for (const int64_t inc : {1, 2})
    for (const bool dev : {false, true}) {
      const std::string tag = "scal alpha=0 of NaN/Inf inc=" + std::to_string(inc) +
                              (dev ? " device-scalars" : " host-scalars");
      reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
        const int64_t n = 1000, len = 1 + (n - 1) * inc;
        auto xv = random_values<T>(len);
        for (int64_t i = 0; i < len; i += 5)
          xv[i] = poison<T>(static_cast<size_t>(i / 5));
        xv[1] = T(-0.0);
        auto x = tensor_from<T>({len}, xv);
        auto at = scalar_tensor<T>(0);
        blas::scal(b, n, dev ? blas::Scalar(at) : blas::Scalar(0.0), x, inc);
        const auto x1 = raw(x);
        for (int64_t i = 0; i < len; ++i) {
          if (i % inc != 0) {
            expect_bits<T>(tag + " (gap)", i, x1[i], xv[i]);
            continue;
          }
          const T want = xv[i] * T(0);
          const bool ok = std::isnan(want) ? std::isnan(x1[i]) : same_bits(x1[i], want);
          if (ok)
            pass_check();
          else
            fail_check(str(tname<T>(), " ", tag, ": element ", i, ": ",
                           g10(static_cast<double>(xv[i])), " * 0 gave ",
                           g10(static_cast<double>(x1[i])), ", expected ",
                           g10(static_cast<double>(want))));
        }
      });
    }
}

// A device-resident alpha with a host beta on a C larger than 4M elements (the CUDA bundle
// guards cuBLAS in blocks of rows there): alpha == 0 with NaN/Inf in A and B gives beta C
// exactly; a non-zero alpha the product. ldc > n: the column beyond n keeps its bits. Under a
// sanitizer, frameworks other than cuda (which have no such threshold) take a third of the rows:
// the checks are the same, at a third of the seconds (these 8 cases were 18 of the native
// suite's 31 s under ThreadSanitizer).
template <class T> void device_alpha_large_gemm(extension_suite& reg) {
  for (const bool ta : {false, true})
    for (const double alpha : {0.0, -1.25}) {
      const std::string tag = std::string("gemm device alpha, host beta, large C ") +
                              (ta ? "TN" : "NN") +
                              " alpha=" + (alpha == 0 ? "0 NaN in A,B" : "-1.25");
      reg.add<T>(std::string(tname<T>()) + " " + tag, [=](const Backend& b) {
        const bool small = sanitized_build && b.framework().name() != "cuda";
        const int64_t m = small ? 700 : 2100, n = 2048, k = 3, ldc = n + 1;
        const int64_t ar = ta ? k : m, ac = ta ? m : k;
        auto Av = random_values<T>(static_cast<size_t>(ar * ac)),
             Bv = random_values<T>(static_cast<size_t>(k * n));
        if (alpha == 0) {
          Av[1] = std::numeric_limits<T>::quiet_NaN();
          Av[static_cast<size_t>(ar * ac - 1)] = std::numeric_limits<T>::infinity();
          Bv[static_cast<size_t>(k * n / 2)] = std::numeric_limits<T>::quiet_NaN();
        }
        const auto C0 = random_values<T>(static_cast<size_t>(m * ldc));
        auto A = tensor_from<T>({ar, ac}, Av), B = tensor_from<T>({k, n}, Bv),
             C = tensor_from<T>({m, ldc}, C0);
        auto at = scalar_tensor<T>(alpha);
        const double beta = 0.5;
        blas::gemm(b, ta ? blas::trans : blas::no_trans, blas::no_trans, at, A, B, beta, C,
                   {.m = m, .n = n, .k = k, .lda = ac, .ldb = n, .ldc = ldc});
        const auto C1 = raw(C);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < ldc; ++j) {
            const int64_t ic = i * ldc + j;
            if (j >= n) {
              expect_bits<T>(tag + " (outside C)", ic, C1[ic], C0[ic]);
              continue;
            }
            if (alpha == 0) {
              expect_exact<T>(tag, ic, C1[ic], beta * static_cast<double>(C0[ic]));
              continue;
            }
            double sum = 0, mag = 0;
            for (int64_t l = 0; l < k; ++l) {
              const double av = ta ? Av[l * ac + i] : Av[i * ac + l];
              sum += av * Bv[l * n + j];
              mag += std::fabs(av * Bv[l * n + j]);
            }
            expect_near<T>(tag, ic, C1[ic], alpha * sum + beta * C0[ic],
                           std::fabs(alpha) * mag + std::fabs(beta * C0[ic]), k + 1.0,
                           std::fabs(alpha) + std::fabs(beta));
          }
      });
    }
}

// ---- input classes ---------------------------------------------------------------------------
// The classes of input_classes.hpp (non-finite, huge, tiny, wide-range, cancellation) on every
// op, at sizes past the bundles' small-size paths. Expected: the float64 reference (NaN where it
// is NaN, the same infinity where it is infinite; a NaN or infinity in one row of A reaches only
// that row's outputs), within 8 eps (sqrt(terms) + 1) of the summed magnitudes plus a few
// subnormals. nrm2 and asum of a vector holding NaN are NaN, of one holding an infinity (and no
// NaN) +Inf. Under the f32 flush rule (extension_suite.hpp) the bound widens by `flush`: what
// flushing can lose in the op (flush_bound of its terms and scaling factors).

namespace in = inputs;

template <class T>
void expect_class(const std::string& what, size_t i, double got, double ref, double magnitude,
                  double terms, double flush) {
  const double eps = std::numeric_limits<T>::epsilon();
  const double tol = 8 * eps * (std::sqrt(terms) + 1) * magnitude +
                     4 * static_cast<double>(std::numeric_limits<T>::denorm_min());
  const bool ok = std::isnan(ref)   ? std::isnan(got)
                  : std::isinf(ref) ? got == ref
                                    : std::fabs(got - ref) <= tol;
  compare_element<T>(ok, what, i, got, ref, tol, flush);
}
// n values of class c rounded to T; `huge` keeps the op's sums finite.
template <class T>
std::vector<double> class_values(in::input_class c, size_t n, double huge,
                                 const in::positions& at = {}) {
  std::vector<double> v =
      in::make(c, n, {huge, static_cast<double>(std::numeric_limits<T>::min())}, rng(), at);
  for (double& e : v)
    e = static_cast<double>(static_cast<T>(e));
  return v;
}

template <class T> void input_class_cases(extension_suite& reg) {
  const double max = static_cast<double>(std::numeric_limits<T>::max());
  for (const in::input_class ic : in::all_classes) {
    const std::string cls = std::string(" [") + in::class_name(ic) + "]";
    for (const int64_t n : {4097, 65537}) {
      // Twice for non-finite: with the NaN, and with only the infinities.
      for (const bool no_nan : {false, true}) {
        if (no_nan && ic != in::input_class::non_finite) continue;
        const std::string tag = str(tname<T>(), " n=", n, cls, no_nan ? " (no NaN)" : "");
        reg.add<T>("dot/asum/nrm2/axpy " + tag, [=](const Backend& b) {
          const double h = max / (4 * static_cast<double>(n));
          std::vector<double> x = class_values<T>(ic, static_cast<size_t>(n), h);
          if (no_nan)
            for (double& e : x)
              if (std::isnan(e)) e = 0.5;
          const std::vector<double> y =
              class_values<T>(in::input_class::wide_range, static_cast<size_t>(n), 1.0);
          auto xt = tensor_of<T>({n}, x), yt = tensor_of<T>({n}, y);
          SharedTensor<T> r1({1}), r2({1}), r3({1});
          blas::dot(b, xt, yt, r1);
          blas::asum(b, n, xt, 1, r2);
          blas::nrm2(b, n, xt, 1, r3);
          double dot = 0, dmag = 0, asum = 0;
          bool any_nan = false, any_inf = false;
          for (int64_t i = 0; i < n; ++i) {
            dot += x[i] * y[i];
            dmag += std::fabs(x[i] * y[i]);
            asum += std::fabs(x[i]);
            any_nan = any_nan || std::isnan(x[i]);
            any_inf = any_inf || std::isinf(x[i]);
          }
          const double inf = std::numeric_limits<double>::infinity();
          const double nrm = any_nan   ? std::numeric_limits<double>::quiet_NaN()
                             : any_inf ? inf
                                       : scaled_norm(x);
          const double terms = static_cast<double>(n);
          expect_class<T>("dot " + tag, 0, r1.read()[0], dot, dmag, terms, flush_bound<T>(terms));
          expect_class<T>("asum " + tag, 0, r2.read()[0], asum, asum, terms, flush_bound<T>(terms));
          // A norm moves by at most the norm of what was flushed: sqrt(n) smallest normals.
          expect_class<T>("nrm2 " + tag, 0, r3.read()[0], nrm, nrm, terms,
                          flush_bound<T>(std::sqrt(terms)));
          // axpy: elementwise, so each NaN or infinity stays where it is.
          const double alpha = 0.75;
          blas::axpy(b, n, alpha, xt, 1, yt, 1);
          const auto y1 = values(yt);
          for (int64_t i = 0; i < n; ++i)
            expect_class<T>("axpy " + tag, static_cast<size_t>(i), y1[i],
                            static_cast<double>(static_cast<T>(alpha)) * x[i] + y[i],
                            std::fabs(x[i]) + std::fabs(y[i]), 1, flush_bound<T>(1, alpha + 1));
        });
      }
    }
    // gemv and gemm with A of the class: a non-finite value in row r of A reaches row r of the
    // result only (for gemv T: column r).
    for (const bool t : {false, true}) {
      const int64_t m = 67, n = 129;
      const std::string tag = str("gemv ", tname<T>(), t ? " T" : " N", " m=", m, " n=", n, cls);
      reg.add<T>(tag, [=](const Backend& b) {
        const int64_t nx = t ? m : n, ny = t ? n : m;
        const std::vector<double> A =
            class_values<T>(ic, static_cast<size_t>(m * n), max / (4 * static_cast<double>(nx)),
                            {5, static_cast<size_t>(2 * n + 7), static_cast<size_t>(m * n - 1)});
        const std::vector<double> x =
            class_values<T>(in::input_class::wide_range, static_cast<size_t>(nx), 1.0);
        const std::vector<double> y =
            class_values<T>(in::input_class::wide_range, static_cast<size_t>(ny), 1.0);
        auto At = tensor_of<T>({m, n}, A), xt = tensor_of<T>({nx}, x), yt = tensor_of<T>({ny}, y);
        const double alpha = 1.5, beta = -0.5;
        blas::gemv(b, t ? blas::trans : blas::no_trans, alpha, At, xt, beta, yt);
        const auto y1 = values(yt);
        for (int64_t r = 0; r < ny; ++r) {
          double s = 0, mag = 0;
          for (int64_t j = 0; j < nx; ++j) {
            const double a = t ? A[j * n + r] : A[r * n + j];
            s += a * x[j];
            mag += std::fabs(a * x[j]);
          }
          expect_class<T>(tag, static_cast<size_t>(r), y1[r], alpha * s + beta * y[r],
                          alpha * mag + std::fabs(beta * y[r]), static_cast<double>(nx),
                          flush_bound<T>(static_cast<double>(nx), alpha + std::fabs(beta)));
        }
      });
    }
    for (const bool ta : {false, true}) {
      const int64_t m = 65, n = 33, k = 129;
      const std::string tag =
          str("gemm ", tname<T>(), ta ? " TN" : " NN", " m=", m, " n=", n, " k=", k, cls);
      reg.add<T>(tag, [=](const Backend& b) {
        const int64_t ar = ta ? k : m, ac = ta ? m : k;
        const std::vector<double> A =
            class_values<T>(ic, static_cast<size_t>(m * k), max / (4 * static_cast<double>(k)),
                            {3, static_cast<size_t>(4 * ac + 9), static_cast<size_t>(m * k - 1)});
        const std::vector<double> B =
            class_values<T>(in::input_class::wide_range, static_cast<size_t>(k * n), 1.0);
        const std::vector<double> C =
            class_values<T>(in::input_class::wide_range, static_cast<size_t>(m * n), 1.0);
        auto At = tensor_of<T>({ar, ac}, A), Bt = tensor_of<T>({k, n}, B),
             Ct = tensor_of<T>({m, n}, C);
        const double alpha = 0.5, beta = 2.0;
        blas::gemm(b, ta ? blas::trans : blas::no_trans, blas::no_trans, alpha, At, Bt, beta, Ct);
        const auto C1 = values(Ct);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0, mag = 0;
            for (int64_t l = 0; l < k; ++l) {
              const double a = ta ? A[l * ac + i] : A[i * ac + l];
              s += a * B[l * n + j];
              mag += std::fabs(a * B[l * n + j]);
            }
            const size_t ic_ = static_cast<size_t>(i * n + j);
            expect_class<T>(tag, ic_, C1[ic_], alpha * s + beta * C[ic_],
                            alpha * mag + std::fabs(beta * C[ic_]), static_cast<double>(k),
                            flush_bound<T>(static_cast<double>(k), alpha + beta));
          }
      });
    }
    // gemm_batched with every A_i of the class and one B for all (stride 0): a non-finite value
    // in row r of A_i reaches row r of C_i only.
    for (const bool ta : {false, true}) {
      const int64_t batch = 3, m = 33, n = 17, k = 65;
      const std::string tag = str("gemm_batched ", tname<T>(), ta ? " TN" : " NN", " batch=", batch,
                                  " m=", m, " n=", n, " k=", k, " broadcast B", cls);
      reg.add<T>(tag, [=](const Backend& b) {
        const int64_t ar = ta ? k : m, ac = ta ? m : k, per = m * k;
        const std::vector<double> A = class_values<T>(
            ic, static_cast<size_t>(batch * per), max / (4 * static_cast<double>(k)),
            {2, static_cast<size_t>(per + 3 * ac + 5), static_cast<size_t>(batch * per - 1)});
        const std::vector<double> B =
            class_values<T>(in::input_class::wide_range, static_cast<size_t>(k * n), 1.0);
        const std::vector<double> C =
            class_values<T>(in::input_class::wide_range, static_cast<size_t>(batch * m * n), 1.0);
        auto At = tensor_of<T>({batch, ar, ac}, A), Bt = tensor_of<T>({k, n}, B),
             Ct = tensor_of<T>({batch, m, n}, C);
        const double alpha = 0.5, beta = 2.0;
        blas::gemm_batched(b, ta ? blas::trans : blas::no_trans, blas::no_trans, alpha, At, Bt,
                           beta, Ct);
        const auto C1 = values(Ct);
        for (int64_t p = 0; p < batch; ++p)
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double s = 0, mag = 0;
              for (int64_t l = 0; l < k; ++l) {
                const double a = A[p * per + (ta ? l * ac + i : i * ac + l)];
                s += a * B[l * n + j];
                mag += std::fabs(a * B[l * n + j]);
              }
              const size_t ic_ = static_cast<size_t>((p * m + i) * n + j);
              expect_class<T>(tag, ic_, C1[ic_], alpha * s + beta * C[ic_],
                              alpha * mag + std::fabs(beta * C[ic_]), static_cast<double>(k),
                              flush_bound<T>(static_cast<double>(k), alpha + beta));
            }
      });
    }
  }
}

// ---- gemm_batched: strided batches of gemm products -------------------------------------------
// Each case fills A, B and C with their matrices `stride` elements apart (gap: spare elements
// between consecutive matrices and after the last; pad: leading dimensions beyond the columns),
// runs the batch and checks every C_i against a double reference from its own A_i and B_i (a
// broadcast operand: stride 0, the one matrix), and every element outside the C windows bit for
// bit. C starts as NaN/Inf wherever beta == 0 (none of it may reach the result), as random values
// otherwise. `shaped`: no sizes given, the front-end takes them from [batch, rows, cols] shapes.
struct batched_shape {
  int64_t batch, m, n, k;
  bool ta, tb;
  int broadcast = 0;  // 0 none, 1 A (stride_a 0), 2 B (stride_b 0)
  int64_t pad = 0;    // leading dimensions beyond the columns
  int64_t gap = 0;    // spare elements between matrices (and after the last)
  bool shaped = true; // sizes from the shapes (pad and gap must be 0)
  double alpha = 0.5, beta = 2.0;
  bool dev_scalars = false;
  bool poison_inputs = false; // NaN/Inf in A and B: only with alpha == 0 or k == 0
};

template <class T> void gemm_batched_case(extension_suite& reg, const batched_shape& s) {
  const std::string tag =
      str("gemm_batched ", tname<T>(), s.ta ? " T" : " N", s.tb ? "T" : "N", " batch=", s.batch,
          " m=", s.m, " n=", s.n, " k=", s.k,
          s.broadcast == 1   ? " broadcast A"
          : s.broadcast == 2 ? " broadcast B"
                             : "",
          s.pad != 0 ? str(" ld+", s.pad) : "", s.gap != 0 ? str(" gap ", s.gap) : "",
          s.shaped ? " from shapes" : " explicit", " alpha=", g3(s.alpha), " beta=", g3(s.beta),
          s.dev_scalars ? " device-scalars" : "", s.poison_inputs ? " NaN/Inf in A,B" : "");
  reg.add<T>(tag, [=](const Backend& b) {
    const int64_t ar = s.ta ? s.k : s.m, ac = s.ta ? s.m : s.k;
    const int64_t br = s.tb ? s.n : s.k, bc = s.tb ? s.k : s.n;
    const int64_t lda = std::max<int64_t>(ac + s.pad, 1), ldb = std::max<int64_t>(bc + s.pad, 1),
                  ldc = s.n + s.pad;
    const int64_t sa = s.broadcast == 1 ? 0 : ar * lda + s.gap;
    const int64_t sb = s.broadcast == 2 ? 0 : br * ldb + s.gap;
    const int64_t sc = s.m * ldc + s.gap;
    const int64_t na = s.broadcast == 1 ? 1 : s.batch, nb = s.broadcast == 2 ? 1 : s.batch;
    const auto len = [&](int64_t count, int64_t stride, int64_t one) {
      return std::max<int64_t>((count - 1) * stride + one + s.gap, 1);
    };
    const int64_t la = len(na, sa, ar * lda), lb = len(nb, sb, br * ldb),
                  lc = len(s.batch, sc, s.m * ldc);
    const auto inputs = [&](int64_t n) {
      return s.poison_inputs ? poison_pattern<T>(static_cast<size_t>(n))
                             : random_values<T>(static_cast<size_t>(n));
    };
    const std::vector<T> A0 = inputs(la), B0 = inputs(lb);
    const std::vector<T> C0 = s.beta == 0 ? poison_pattern<T>(static_cast<size_t>(lc))
                                          : random_values<T>(static_cast<size_t>(lc));
    // Shapes: [count, rows, cols] (a broadcast A 2-d, a broadcast B [1, rows, cols]), or flat
    // with explicit sizes.
    using shape_t = std::vector<int64_t>;
    auto A = tensor_from<T>(!s.shaped          ? shape_t{la}
                            : s.broadcast == 1 ? shape_t{ar, ac}
                                               : shape_t{na, ar, ac},
                            A0);
    auto B = tensor_from<T>(s.shaped ? shape_t{nb, br, bc} : shape_t{lb}, B0);
    auto C = tensor_from<T>(s.shaped ? shape_t{s.batch, s.m, s.n} : shape_t{lc}, C0);
    auto at = scalar_tensor<T>(s.alpha), bt = scalar_tensor<T>(s.beta);
    const blas::Scalar al = s.dev_scalars ? blas::Scalar(at) : blas::Scalar(s.alpha);
    const blas::Scalar be = s.dev_scalars ? blas::Scalar(bt) : blas::Scalar(s.beta);
    blas::gemm_batched_dims d;
    if (!s.shaped)
      d = {.m = s.m,
           .n = s.n,
           .k = s.k,
           .lda = lda,
           .ldb = ldb,
           .ldc = ldc,
           .batch = s.batch,
           .stride_a = sa,
           .stride_b = sb,
           .stride_c = sc};
    blas::gemm_batched(b, s.ta ? blas::trans : blas::no_trans, s.tb ? blas::trans : blas::no_trans,
                       al, A, B, be, C, d);
    const auto C1 = raw(C);
    std::vector<bool> inside(static_cast<size_t>(lc), false);
    for (int64_t p = 0; p < s.batch; ++p)
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          const int64_t ic = p * sc + i * ldc + j;
          inside[static_cast<size_t>(ic)] = true;
          double sum = 0, mag = 0;
          if (s.alpha != 0)
            for (int64_t l = 0; l < s.k; ++l) {
              const double a = static_cast<double>(
                  A0[static_cast<size_t>(p * sa + (s.ta ? l * lda + i : i * lda + l))]);
              const double bb = static_cast<double>(
                  B0[static_cast<size_t>(p * sb + (s.tb ? j * ldb + l : l * ldb + j))]);
              sum += a * bb;
              mag += std::fabs(a * bb);
            }
          const double c0 = static_cast<double>(C0[static_cast<size_t>(ic)]);
          const double cterm = s.beta == 0 ? 0.0 : s.beta * c0; // beta == 0: C is not read
          expect_near<T>(tag, static_cast<size_t>(ic), static_cast<double>(C1[ic]),
                         s.alpha * sum + cterm, std::fabs(s.alpha) * mag + std::fabs(cterm),
                         static_cast<double>(std::max<int64_t>(s.k, 1)),
                         std::fabs(s.alpha) + std::fabs(s.beta));
        }
    for (int64_t ic = 0; ic < lc; ++ic)
      if (!inside[static_cast<size_t>(ic)])
        expect_bits<T>(tag + " (outside the C matrices)", static_cast<size_t>(ic), C1[ic], C0[ic]);
  });
}

template <class T> void gemm_batched_cases(extension_suite& reg) {
  using bs = batched_shape;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      gemm_batched_case<T>(reg, bs{1, 7, 5, 3, ta, tb});
      gemm_batched_case<T>(reg, bs{3, 33, 65, 17, ta, tb, 0, 3, 5, false});
      gemm_batched_case<T>(reg, bs{7, 13, 9, 21, ta, tb, 0, 0, 0, true, -1.25, 0.0});
      gemm_batched_case<T>(reg, bs{3, 20, 11, 30, ta, tb, 1, 0, 0, true}); // A broadcast
      gemm_batched_case<T>(reg, bs{7, 9, 20, 13, ta, tb, 2, 0, 0, true});  // B broadcast
      gemm_batched_case<T>(reg, bs{3, 17, 6, 9, ta, tb, 1, 1, 2, false});  // A broadcast, ld+
      gemm_batched_case<T>(reg, bs{7, 6, 17, 9, ta, tb, 2, 2, 1, false});  // B broadcast, ld+
      gemm_batched_case<T>(reg, bs{3, 19, 23, 8, ta, tb, 0, 1, 3, false, 0.75, 0.0}); // gaps NaN
    }
  // Device-resident scalars (beta 0 on the device: NaN in C must not leak), larger products.
  gemm_batched_case<T>(reg, bs{3, 33, 29, 17, false, false, 0, 0, 4, false, -0.75, 0.0, true});
  gemm_batched_case<T>(reg, bs{7, 10, 12, 14, true, false, 2, 2, 0, false, 1.5, -0.5, true});
  gemm_batched_case<T>(reg, bs{3, 130, 67, 129, false, true});
  gemm_batched_case<T>(reg, bs{7, 64, 64, 64, false, false, 1});
  // Quick paths: k == 0 and alpha == 0 give C_i = beta C_i, A and B not read (NaN/Inf there).
  gemm_batched_case<T>(reg, bs{3, 5, 9, 0, false, false, 0, 2, 1, false, 1.0, -0.5});
  gemm_batched_case<T>(reg, bs{3, 5, 9, 0, false, false, 0, 0, 0, false, 1.0, 0.0});
  gemm_batched_case<T>(reg, bs{3, 8, 7, 6, true, true, 0, 1, 2, false, 0.0, 3.0, false, true});
  gemm_batched_case<T>(reg, bs{7, 8, 7, 6, false, true, 1, 0, 1, false, 0.0, 0.0, false, true});
  gemm_batched_case<T>(reg, bs{3, 8, 7, 6, false, false, 2, 0, 0, false, 0.0, 2.0, true, true});
}

template <class T> void semantics(extension_suite& reg) {
  beta0_gemv<T>(reg);
  beta0_gemm<T>(reg);
  beta0_axpby<T>(reg);
  nrm2_limits<T>(reg);
  quick_n0<T>(reg);
  quick_gemv<T>(reg);
  alpha0_gemv<T>(reg);
  quick_gemm<T>(reg);
  device_alpha_large_gemm<T>(reg);
  alpha0_axpy<T>(reg);
  strided_untouched<T>(reg);
  scal0_nan<T>(reg);
}

// The ops the first case routes, per dtype: every op in f32 and f64, gemm and gemm_batched in
// f16 and bf16.
std::vector<const OpKey*> blas_keys(pcy_dtype d) {
  namespace k = blas::detail;
  if (d == PCY_DTYPE_F32 || d == PCY_DTYPE_F64)
    return {&k::asum_key(d), &k::axpy_key(d), &k::axpby_key(d),       &k::copy_key(d),
            &k::dot_key(d),  &k::nrm2_key(d), &k::scal_key(d),        &k::swap_key(d),
            &k::gemv_key(d), &k::gemm_key(d), &k::gemm_batched_key(d)};
  if (d == PCY_DTYPE_F16 || d == PCY_DTYPE_BF16) return {&k::gemm_key(d), &k::gemm_batched_key(d)};
  return {};
}

} // namespace

suite blas_suite() {
  extension_suite reg("blas", PCY_BLAS_EXTENSION,
                      "the BLAS bundle of the framework: every op and dtype against a reference, "
                      "reference-BLAS edge cases",
                      blas_keys);
  level1<float>(reg);
  level23<float>(reg);
  level1<double>(reg);
  level23<double>(reg);
  gemm_batched_cases<float>(reg);
  gemm_batched_cases<double>(reg);
  semantics<float>(reg);
  semantics<double>(reg);
  input_class_cases<float>(reg);
  input_class_cases<double>(reg);
  half_gemm<f16>(reg);
  half_gemm<bf16>(reg);
  half_gemm_batched<f16>(reg);
  half_gemm_batched<bf16>(reg);
  return reg.finish();
}

} // namespace parenchyma::conformance
