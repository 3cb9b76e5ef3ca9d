// The native BLAS bundle's own loops: every op the bundle serves, written out in C++, for hosts
// without OpenBLAS (the mingw-w64 build: Debian has no OpenBLAS for it) and, chosen with
// PARENCHYMA_BLAS_NATIVE_IMPL=own, anywhere (the conformance suite runs them on Linux too).
//
// They follow the reference BLAS (netlib) in what they compute, with the bundle's own rules
// around them (docs/blas.md, "Reference semantics"): the caller has done the quick returns and
// the alpha == 0 / beta == 0 cases that must not read an operand; here beta == 0 still never
// reads y or C. Row-major matrices, positive increments (the front-end and the decoder check
// both). Single-threaded and plainly blocked: correct first, not fast (OpenBLAS is the fast path).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace parenchyma::blas_bundle::own {

// A float sum is kept in double (one rounding at the end), a double one in double.
template <class T> using acc_t = double;

template <class T> T asum(int64_t n, const T* x, int64_t inc) {
  acc_t<T> s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += std::fabs(static_cast<acc_t<T>>(x[i * inc]));
  return static_cast<T>(s);
}

template <class T> T dot(int64_t n, const T* x, int64_t incx, const T* y, int64_t incy) {
  acc_t<T> s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += static_cast<acc_t<T>>(x[i * incx]) * static_cast<acc_t<T>>(y[i * incy]);
  return static_cast<T>(s);
}

// Blue's scaled sum of squares (as LAPACK's dnrm2 since 3.10): three accumulators for values
// that would overflow when squared, that would underflow, and the rest; each is scaled by a
// power of two so that no square leaves the range. NaN gives NaN, Inf (without NaN) Inf.
template <class T> T nrm2(int64_t n, const T* x, int64_t inc) {
  using L = std::numeric_limits<T>;
  const T radix = static_cast<T>(L::radix);
  const int digits = L::digits, minexp = L::min_exponent, maxexp = L::max_exponent;
  // Thresholds and scales (Blue 1978; Anderson 2017).
  const T tsml = std::pow(radix, static_cast<T>(std::ceil((minexp - 1) * 0.5)));
  const T tbig = std::pow(radix, static_cast<T>(std::floor((maxexp - digits + 1) * 0.5)));
  const T ssml = std::pow(radix, static_cast<T>(-std::floor((minexp - digits) * 0.5)));
  const T sbig = std::pow(radix, static_cast<T>(-std::ceil((maxexp + digits - 1) * 0.5)));
  T asml = 0, amed = 0, abig = 0;
  bool notbig = true;
  for (int64_t i = 0; i < n; ++i) {
    const T ax = std::fabs(x[i * inc]);
    if (ax > tbig) {
      abig += (ax * sbig) * (ax * sbig);
      notbig = false;
    } else if (ax < tsml) {
      if (notbig) asml += (ax * ssml) * (ax * ssml);
    } else {
      amed += ax * ax; // NaN lands here: every comparison above is false
    }
  }
  T scl = 1, sumsq = 0;
  if (abig > 0 || std::isnan(abig)) {
    if (amed > 0 || std::isnan(amed)) abig += (amed * sbig) * sbig;
    scl = 1 / sbig;
    sumsq = abig;
  } else if (asml > 0) {
    if (amed > 0 || std::isnan(amed)) {
      const T med = std::sqrt(amed), sml = std::sqrt(asml) / ssml;
      const T ymin = std::min(med, sml), ymax = std::max(med, sml);
      scl = 1;
      sumsq = ymax * ymax * (1 + (ymin / ymax) * (ymin / ymax));
      if (std::isnan(amed)) sumsq = amed;
    } else {
      scl = 1 / ssml;
      sumsq = asml;
    }
  } else {
    sumsq = amed;
  }
  return scl * std::sqrt(sumsq);
}

template <class T> void axpy(int64_t n, T alpha, const T* x, int64_t incx, T* y, int64_t incy) {
  for (int64_t i = 0; i < n; ++i)
    y[i * incy] += alpha * x[i * incx];
}
// y = alpha * x + beta * y (beta != 0 here: the caller zeroes y for beta == 0).
template <class T>
void axpby(int64_t n, T alpha, const T* x, int64_t incx, T beta, T* y, int64_t incy) {
  for (int64_t i = 0; i < n; ++i)
    y[i * incy] = alpha * x[i * incx] + beta * y[i * incy];
}
template <class T> void copy(int64_t n, const T* x, int64_t incx, T* y, int64_t incy) {
  for (int64_t i = 0; i < n; ++i)
    y[i * incy] = x[i * incx];
}
template <class T> void scal(int64_t n, T alpha, T* x, int64_t inc) {
  for (int64_t i = 0; i < n; ++i)
    x[i * inc] *= alpha; // IEEE: NaN * 0 is NaN, -v * 0 is -0 (the bundle's rule)
}
template <class T> void swap(int64_t n, T* x, int64_t incx, T* y, int64_t incy) {
  for (int64_t i = 0; i < n; ++i)
    std::swap(x[i * incx], y[i * incy]);
}

// out = alpha * s + beta * out, not reading out when beta == 0.
template <class T> inline void update(T& out, T alpha, T s, T beta) {
  out = beta == T(0) ? alpha * s : alpha * s + beta * out;
}

// y = alpha * op(A) x + beta * y, A m x n row-major (lda), op(A) = A or A^T (trans).
template <class T>
void gemv(bool trans, int64_t m, int64_t n, T alpha, const T* A, int64_t lda, const T* x,
          int64_t incx, T beta, T* y, int64_t incy) {
  if (!trans) {
    for (int64_t i = 0; i < m; ++i) {
      T s = 0;
      for (int64_t j = 0; j < n; ++j)
        s += A[i * lda + j] * x[j * incx];
      update(y[i * incy], alpha, s, beta);
    }
    return;
  }
  // y[j] = sum_i A[i][j] x[i]: columns in blocks, rows streamed (A read row by row).
  constexpr int64_t block = 256;
  T acc[block];
  for (int64_t j0 = 0; j0 < n; j0 += block) {
    const int64_t nb = std::min(block, n - j0);
    std::fill(acc, acc + nb, T(0));
    for (int64_t i = 0; i < m; ++i) {
      const T xi = x[i * incx];
      const T* row = A + i * lda + j0;
      for (int64_t j = 0; j < nb; ++j)
        acc[j] += row[j] * xi;
    }
    for (int64_t j = 0; j < nb; ++j)
      update(y[(j0 + j) * incy], alpha, acc[j], beta);
  }
}

// C = alpha * op(A) op(B) + beta * C: op(A) m x k, op(B) k x n, all row-major (lda, ldb, ldc).
// Each row of C in blocks of columns, accumulated over k in a local block (no allocation).
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  constexpr int64_t block = 256;
  T acc[block];
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j0 = 0; j0 < n; j0 += block) {
      const int64_t nb = std::min(block, n - j0);
      std::fill(acc, acc + nb, T(0));
      for (int64_t p = 0; p < k; ++p) {
        const T a = ta ? A[p * lda + i] : A[i * lda + p];
        if (tb) {
          for (int64_t j = 0; j < nb; ++j)
            acc[j] += a * B[(j0 + j) * ldb + p];
        } else {
          const T* row = B + p * ldb + j0;
          for (int64_t j = 0; j < nb; ++j)
            acc[j] += a * row[j];
        }
      }
      for (int64_t j = 0; j < nb; ++j)
        update(C[i * ldc + j0 + j], alpha, acc[j], beta);
    }
  }
}

} // namespace parenchyma::blas_bundle::own
