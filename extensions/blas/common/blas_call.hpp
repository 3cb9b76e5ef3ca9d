// BLAS bundles, shared part: decodes an op call's arguments into a plain struct, by argument
// name from the schemas in pcy_blas.h (indices resolved at compile time), re-checking every
// value with the SDK's decoder (sdk/op_schema.hpp), so a bundle called by any host (not only
// through blas.hpp) never reads or writes outside a tensor. Errors name the op and the argument.
#pragma once

#include <parenchyma/abi/ext/pcy_blas.h>
#include <parenchyma/sdk/op_schema.hpp>

#include <cstdint>

namespace parenchyma::blas_bundle {

using sdk::fail;
using sdk::scalar_arg;
using sdk::str;
using sdk::vec_arg;

// Every BLAS op decoded: unused fields keep their defaults. The defaults are assigned one by one
// in the constructor's body, not as member initialisers: GCC zero-fills a struct with member
// initialisers by `rep stosq`, which costs about 20 ns a call on the CPU machine's EPYC (a
// micro-benchmark, 2026-12-02) — a third of the native dispatch overhead of a 1-element axpy
// (P3). Separate stores of which the decoder's overwrite the most are free.
struct blas_call {
  int64_t n, m, k;
  bool ta, tb;
  scalar_arg alpha, beta;
  vec_arg x, y;
  const pcy_tensor* result;
  const pcy_tensor *A, *B, *C;
  int64_t lda, ldb, ldc;
  blas_call() noexcept {
    n = m = k = 0;
    ta = tb = false;
    alpha.value = beta.value = 0;
    alpha.tensor = beta.tensor = nullptr;
    x.t = y.t = nullptr;
    x.inc = y.inc = 1;
    result = A = B = C = nullptr;
    lda = ldb = ldc = 0;
  }
};

namespace detail {
template <const pcy_op_schema& S> consteval uint32_t at(const char* name) {
  return sdk::arg_index(S, name);
}
} // namespace detail

// result = f(x): asum and nrm2.
template <const pcy_op_schema& S> blas_call decode_reduction(const sdk::op_args& a, pcy_dtype d) {
  constexpr uint32_t N = detail::at<S>("n"), X = detail::at<S>("x"), INCX = detail::at<S>("incx"),
                     R = detail::at<S>("result");
  sdk::decoder<S> dc(a, d);
  blas_call c;
  c.n = dc.count(N);
  c.x = dc.vector(X, INCX, c.n);
  c.result = &dc.result(R);
  return c;
}
inline blas_call decode_asum(const sdk::op_args& a, pcy_dtype d) {
  return decode_reduction<pcy_blas_asum_schema>(a, d);
}
inline blas_call decode_nrm2(const sdk::op_args& a, pcy_dtype d) {
  return decode_reduction<pcy_blas_nrm2_schema>(a, d);
}

// x and y of n elements: copy, swap, dot (plus its result).
template <const pcy_op_schema& S> blas_call decode_pair(const sdk::op_args& a, pcy_dtype d) {
  constexpr uint32_t N = detail::at<S>("n"), X = detail::at<S>("x"), INCX = detail::at<S>("incx"),
                     Y = detail::at<S>("y"), INCY = detail::at<S>("incy");
  sdk::decoder<S> dc(a, d);
  blas_call c;
  c.n = dc.count(N);
  c.x = dc.vector(X, INCX, c.n);
  c.y = dc.vector(Y, INCY, c.n);
  return c;
}
inline blas_call decode_copy(const sdk::op_args& a, pcy_dtype d) {
  return decode_pair<pcy_blas_copy_schema>(a, d);
}
inline blas_call decode_swap(const sdk::op_args& a, pcy_dtype d) {
  return decode_pair<pcy_blas_swap_schema>(a, d);
}
inline blas_call decode_dot(const sdk::op_args& a, pcy_dtype d) {
  blas_call c = decode_pair<pcy_blas_dot_schema>(a, d);
  c.result =
      &sdk::decoder<pcy_blas_dot_schema>(a, d).result(detail::at<pcy_blas_dot_schema>("result"));
  return c;
}

inline blas_call decode_axpy(const sdk::op_args& a, pcy_dtype d) {
  constexpr auto& S = pcy_blas_axpy_schema;
  sdk::decoder<S> dc(a, d);
  blas_call c;
  c.n = dc.count(detail::at<S>("n"));
  c.alpha = dc.scalar(detail::at<S>("alpha"));
  c.x = dc.vector(detail::at<S>("x"), detail::at<S>("incx"), c.n);
  c.y = dc.vector(detail::at<S>("y"), detail::at<S>("incy"), c.n);
  return c;
}
inline blas_call decode_axpby(const sdk::op_args& a, pcy_dtype d) {
  constexpr auto& S = pcy_blas_axpby_schema;
  sdk::decoder<S> dc(a, d);
  blas_call c;
  c.n = dc.count(detail::at<S>("n"));
  c.alpha = dc.scalar(detail::at<S>("alpha"));
  c.x = dc.vector(detail::at<S>("x"), detail::at<S>("incx"), c.n);
  c.beta = dc.scalar(detail::at<S>("beta"));
  c.y = dc.vector(detail::at<S>("y"), detail::at<S>("incy"), c.n);
  return c;
}
inline blas_call decode_scal(const sdk::op_args& a, pcy_dtype d) {
  constexpr auto& S = pcy_blas_scal_schema;
  sdk::decoder<S> dc(a, d);
  blas_call c;
  c.n = dc.count(detail::at<S>("n"));
  c.alpha = dc.scalar(detail::at<S>("alpha"));
  c.x = dc.vector(detail::at<S>("x"), detail::at<S>("incx"), c.n);
  return c;
}
inline blas_call decode_gemv(const sdk::op_args& a, pcy_dtype d) {
  constexpr auto& S = pcy_blas_gemv_schema;
  sdk::decoder<S> dc(a, d);
  blas_call c;
  c.ta = dc.flag(detail::at<S>("trans"));
  c.m = dc.count(detail::at<S>("m"));
  c.n = dc.count(detail::at<S>("n"));
  c.alpha = dc.scalar(detail::at<S>("alpha"));
  c.lda = a.i(detail::at<S>("lda"));
  c.A = &dc.matrix(detail::at<S>("A"), c.m, c.n, detail::at<S>("lda"));
  c.x = dc.vector(detail::at<S>("x"), detail::at<S>("incx"), c.ta ? c.m : c.n);
  c.beta = dc.scalar(detail::at<S>("beta"));
  c.y = dc.vector(detail::at<S>("y"), detail::at<S>("incy"), c.ta ? c.n : c.m);
  return c;
}
inline blas_call decode_gemm(const sdk::op_args& a, pcy_dtype d) {
  constexpr auto& S = pcy_blas_gemm_schema;
  sdk::decoder<S> dc(a, d);
  blas_call c;
  c.ta = dc.flag(detail::at<S>("transa"));
  c.tb = dc.flag(detail::at<S>("transb"));
  c.m = dc.count(detail::at<S>("m"));
  c.n = dc.count(detail::at<S>("n"));
  c.k = dc.count(detail::at<S>("k"));
  c.alpha = dc.scalar(detail::at<S>("alpha"));
  c.lda = a.i(detail::at<S>("lda"));
  c.A = &dc.matrix(detail::at<S>("A"), c.ta ? c.k : c.m, c.ta ? c.m : c.k, detail::at<S>("lda"));
  c.ldb = a.i(detail::at<S>("ldb"));
  c.B = &dc.matrix(detail::at<S>("B"), c.tb ? c.n : c.k, c.tb ? c.k : c.n, detail::at<S>("ldb"));
  c.beta = dc.scalar(detail::at<S>("beta"));
  c.ldc = a.i(detail::at<S>("ldc"));
  c.C = &dc.matrix(detail::at<S>("C"), c.m, c.n, detail::at<S>("ldc"));
  return c;
}

// gemm_batched: gemm's fields plus the batch and the element strides between its matrices.
// A struct of its own so that the other ops' blas_call stays as small as it is.
struct gemm_batched_call : blas_call {
  int64_t batch = 0, stride_a = 0, stride_b = 0, stride_c = 0;
};
inline gemm_batched_call decode_gemm_batched(const sdk::op_args& a, pcy_dtype d) {
  constexpr auto& S = pcy_blas_gemm_batched_schema;
  sdk::decoder<S> dc(a, d);
  gemm_batched_call c;
  c.ta = dc.flag(detail::at<S>("transa"));
  c.tb = dc.flag(detail::at<S>("transb"));
  c.m = dc.count(detail::at<S>("m"));
  c.n = dc.count(detail::at<S>("n"));
  c.k = dc.count(detail::at<S>("k"));
  c.batch = dc.count(detail::at<S>("batch"));
  c.alpha = dc.scalar(detail::at<S>("alpha"));
  c.lda = a.i(detail::at<S>("lda"));
  c.stride_a = a.i(detail::at<S>("stride_a"));
  c.A = &dc.matrices(detail::at<S>("A"), c.ta ? c.k : c.m, c.ta ? c.m : c.k, detail::at<S>("lda"),
                     detail::at<S>("stride_a"), c.batch, false);
  c.ldb = a.i(detail::at<S>("ldb"));
  c.stride_b = a.i(detail::at<S>("stride_b"));
  c.B = &dc.matrices(detail::at<S>("B"), c.tb ? c.n : c.k, c.tb ? c.k : c.n, detail::at<S>("ldb"),
                     detail::at<S>("stride_b"), c.batch, false);
  c.beta = dc.scalar(detail::at<S>("beta"));
  c.ldc = a.i(detail::at<S>("ldc"));
  c.stride_c = a.i(detail::at<S>("stride_c"));
  c.C = &dc.matrices(detail::at<S>("C"), c.m, c.n, detail::at<S>("ldc"), detail::at<S>("stride_c"),
                     c.batch, true);
  return c;
}

// Vendor APIs index with 32-bit ints: sdk::to_int, with errors that begin "blas.<op>: ".
PCY_SDK_HOT inline int to_int(int64_t v, const char* op, const char* name) {
  return sdk::to_int(v, PCY_BLAS_EXTENSION, op, name);
}

} // namespace parenchyma::blas_bundle
