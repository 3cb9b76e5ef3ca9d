// parenchyma BLAS front-end: asum, axpy, axpby, copy, dot, nrm2, scal, swap, gemv, gemm,
// gemm_batched on SharedTensors, for f32 and f64, on any backend (header-only over the core; the
// ops run in the "blas" bundle plugin of the framework that serves them). gemm also takes f16 and
// bf16 (f32 accumulation, host scalars) where a bundle serves them (cuBLAS on CUDA), and so does
// gemm_batched; elsewhere such a call falls back to a framework that does, by the fallback policy,
// or fails naming the cell.
//
//   parenchyma::Backend backend;                         // the best framework present
//   parenchyma::SharedTensor<float> a({m, k}), b({k, n}), c({m, n});
//   ... fill a and b through a.write_only() ...
//   parenchyma::blas::gemm(backend, blas::no_trans, blas::no_trans, 1.0, a, b, 0.0, c);
//   float norm = parenchyma::blas::nrm2(backend, c);     // a host value (waits for the result)
//
// Every argument is checked before anything runs (shapes, dtypes, increments, leading
// dimensions, written inputs): a bad one throws parenchyma::error(errc::invalid_argument or
// errc::uninitialized) with origin "blas.<op>" and a message naming the argument; no tensor is
// touched. Matrices are row-major 2-d tensors; a leading dimension is the distance between rows.
// Scalars are host values or one-element tensors (which stay on the device: no round trip).
// Every framework keeps the reference-BLAS conventions in the edge cases (docs/blas.md,
// "Reference semantics"): beta == 0 never reads the output, alpha == 0 never reads the inputs,
// quick returns (n, m or k == 0) touch nothing but what BLAS defines, scal by 0 multiplies.
// The tensor overloads below accept SharedTensor<T> directly (it converts to TensorStorage);
// passing tensors of different dtypes is a runtime error naming the argument.
#pragma once

#include <parenchyma/abi/ext/pcy_blas.h>
#include <parenchyma/backend.hpp>
#include <parenchyma/error.hpp>
#include <parenchyma/extension.hpp>
#include <parenchyma/shared_tensor.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <sstream>
#include <string>

namespace parenchyma::blas {

enum class transpose : int { no = 0, yes = 1 };
inline constexpr transpose no_trans = transpose::no;
inline constexpr transpose trans = transpose::yes;

// A scalar argument: a host value, or a one-element tensor of the op's dtype.
using Scalar = ext::Scalar;

// Sub-matrix sizes and leading dimensions for gemv/gemm; -1 takes the value from the shapes.
struct gemv_dims {
  int64_t m = -1, n = -1; // A is m x n as stored
  int64_t lda = -1;
  int64_t incx = 1, incy = 1;
};
struct gemm_dims {
  int64_t m = -1, n = -1, k = -1; // C is m x n, op(A) m x k, op(B) k x n
  int64_t lda = -1, ldb = -1, ldc = -1;
};

// Sizes, leading dimensions, batch and strides for gemm_batched; -1 takes the value from the
// shapes (see gemm_batched). A stride is the element distance between consecutive matrices of an
// operand; 0 for A or B uses one matrix for every product (broadcast).
struct gemm_batched_dims {
  int64_t m = -1, n = -1, k = -1; // each C_i is m x n, op(A_i) m x k, op(B_i) k x n
  int64_t lda = -1, ldb = -1, ldc = -1;
  int64_t batch = -1;
  int64_t stride_a = -1, stride_b = -1, stride_c = -1;
};

namespace detail {

// The op keys, one per op and dtype, made from the schemas in pcy_blas.h.
inline const OpKey& asum_key(pcy_dtype t) noexcept { return ext::op_key<pcy_blas_asum_schema>(t); }
inline const OpKey& axpy_key(pcy_dtype t) noexcept { return ext::op_key<pcy_blas_axpy_schema>(t); }
inline const OpKey& axpby_key(pcy_dtype t) noexcept {
  return ext::op_key<pcy_blas_axpby_schema>(t);
}
inline const OpKey& copy_key(pcy_dtype t) noexcept { return ext::op_key<pcy_blas_copy_schema>(t); }
inline const OpKey& dot_key(pcy_dtype t) noexcept { return ext::op_key<pcy_blas_dot_schema>(t); }
inline const OpKey& nrm2_key(pcy_dtype t) noexcept { return ext::op_key<pcy_blas_nrm2_schema>(t); }
inline const OpKey& scal_key(pcy_dtype t) noexcept { return ext::op_key<pcy_blas_scal_schema>(t); }
inline const OpKey& swap_key(pcy_dtype t) noexcept { return ext::op_key<pcy_blas_swap_schema>(t); }
inline const OpKey& gemv_key(pcy_dtype t) noexcept { return ext::op_key<pcy_blas_gemv_schema>(t); }
inline const OpKey& gemm_key(pcy_dtype t) noexcept { return ext::op_key<pcy_blas_gemm_schema>(t); }
inline const OpKey& gemm_batched_key(pcy_dtype t) noexcept {
  return ext::op_key<pcy_blas_gemm_batched_schema>(t);
}

// The default leading dimension of a 2-d tensor: its column count (at least 1, as BLAS wants).
inline int64_t ld_of(const TensorStorage& t) noexcept {
  return t.shape()[1] > 1 ? t.shape()[1] : 1;
}

inline OpArg scalar_arg(const Scalar& s) noexcept { return s.arg(); }
inline OpArg ntrans(transpose t) noexcept { return OpArg::integer(static_cast<int>(t)); }
inline const char* trans_name(transpose t) noexcept {
  return t == transpose::yes ? "transposed" : "not transposed";
}

// gemm in f16 / bf16 applies alpha and beta in f32 (cuBLAS's mixed precision): they are host
// values there.
[[noreturn]] [[gnu::noinline]] inline void refuse_device_scalar(const ext::checker& c,
                                                                const char* name) {
  ext::fail(c.schema(), errc::invalid_argument, "argument ", name,
            ": a one-element tensor as a scalar is supported for f32 and f64; in ",
            ext::dtype_name(c.dtype()), " pass ", name, " as a number (applied in f32)");
}
inline void host_scalars_only(const ext::checker& c, const Scalar& alpha, const Scalar& beta) {
  if (alpha.is_tensor()) refuse_device_scalar(c, "alpha");
  if (beta.is_tensor()) refuse_device_scalar(c, "beta");
}

} // namespace detail

// ---- level 1, BLAS form: explicit element count and increments ------------------------------

// result = sum |x_i|
inline void asum(const Backend& b, int64_t n, const TensorStorage& x, int64_t incx,
                 TensorStorage& result) {
  ext::checker c(pcy_blas_asum_schema, x, "x");
  c.count(n, "n");
  c.vector(x, "x", n, incx, "incx");
  c.same_dtype(result, "result", "x");
  c.result(result, "result");
  c.distinct(x, "x", result, "result");
  c.written(x, "x");
  ext::invoke<pcy_blas_asum_schema>(
      b, c.dtype(), {OpArg::integer(n), OpArg::in(x), OpArg::integer(incx), OpArg::out(result)});
}

// y = alpha * x + y
inline void axpy(const Backend& b, int64_t n, Scalar alpha, const TensorStorage& x, int64_t incx,
                 TensorStorage& y, int64_t incy) {
  ext::checker c(pcy_blas_axpy_schema, x, "x");
  c.count(n, "n");
  c.same_dtype(y, "y", "x");
  c.scalar(alpha, "alpha");
  c.vector(x, "x", n, incx, "incx");
  c.vector(y, "y", n, incy, "incy");
  c.distinct(alpha, "alpha", y, "y");
  c.in_place_or_distinct(x, "x", incx, y, "y", incy);
  c.written(x, "x");
  c.written(y, "y");
  ext::invoke<pcy_blas_axpy_schema>(b, c.dtype(),
                                    {OpArg::integer(n), detail::scalar_arg(alpha), OpArg::in(x),
                                     OpArg::integer(incx), OpArg::inout(y), OpArg::integer(incy)});
}

// y = alpha * x + beta * y. With beta a host 0, y is write-only (it may be unwritten).
inline void axpby(const Backend& b, int64_t n, Scalar alpha, const TensorStorage& x, int64_t incx,
                  Scalar beta, TensorStorage& y, int64_t incy) {
  ext::checker c(pcy_blas_axpby_schema, x, "x");
  c.count(n, "n");
  c.same_dtype(y, "y", "x");
  c.scalar(alpha, "alpha");
  c.scalar(beta, "beta");
  c.vector(x, "x", n, incx, "incx");
  c.vector(y, "y", n, incy, "incy");
  c.distinct(alpha, "alpha", y, "y");
  c.distinct(beta, "beta", y, "y");
  c.in_place_or_distinct(x, "x", incx, y, "y", incy);
  c.written(x, "x");
  // Write-only only when y is fully overwritten (dense and whole) and beta is a host zero.
  const bool overwrite = !beta.is_tensor() && beta.value() == 0 && !x.same_memory_as(y) &&
                         incy == 1 && static_cast<uint64_t>(n) == y.size();
  if (!overwrite) c.written(y, "y");
  ext::invoke<pcy_blas_axpby_schema>(b, c.dtype(),
                                     {OpArg::integer(n), detail::scalar_arg(alpha), OpArg::in(x),
                                      OpArg::integer(incx), detail::scalar_arg(beta),
                                      overwrite ? OpArg::out(y) : OpArg::inout(y),
                                      OpArg::integer(incy)});
}

// y = x
inline void copy(const Backend& b, int64_t n, const TensorStorage& x, int64_t incx,
                 TensorStorage& y, int64_t incy) {
  ext::checker c(pcy_blas_copy_schema, x, "x");
  c.count(n, "n");
  c.same_dtype(y, "y", "x");
  c.vector(x, "x", n, incx, "incx");
  c.vector(y, "y", n, incy, "incy");
  c.distinct(x, "x", y, "y");
  c.written(x, "x");
  const bool overwrite = incy == 1 && static_cast<uint64_t>(n) == y.size();
  if (!overwrite) c.written(y, "y");
  ext::invoke<pcy_blas_copy_schema>(b, c.dtype(),
                                    {OpArg::integer(n), OpArg::in(x), OpArg::integer(incx),
                                     overwrite ? OpArg::out(y) : OpArg::inout(y),
                                     OpArg::integer(incy)});
}

// result = x . y
inline void dot(const Backend& b, int64_t n, const TensorStorage& x, int64_t incx,
                const TensorStorage& y, int64_t incy, TensorStorage& result) {
  ext::checker c(pcy_blas_dot_schema, x, "x");
  c.count(n, "n");
  c.same_dtype(y, "y", "x");
  c.same_dtype(result, "result", "x");
  c.vector(x, "x", n, incx, "incx");
  c.vector(y, "y", n, incy, "incy");
  c.result(result, "result");
  c.distinct(x, "x", result, "result");
  c.distinct(y, "y", result, "result");
  c.written(x, "x");
  c.written(y, "y");
  ext::invoke<pcy_blas_dot_schema>(b, c.dtype(),
                                   {OpArg::integer(n), OpArg::in(x), OpArg::integer(incx),
                                    OpArg::in(y), OpArg::integer(incy), OpArg::out(result)});
}

// result = sqrt(sum x_i^2)
inline void nrm2(const Backend& b, int64_t n, const TensorStorage& x, int64_t incx,
                 TensorStorage& result) {
  ext::checker c(pcy_blas_nrm2_schema, x, "x");
  c.count(n, "n");
  c.vector(x, "x", n, incx, "incx");
  c.same_dtype(result, "result", "x");
  c.result(result, "result");
  c.distinct(x, "x", result, "result");
  c.written(x, "x");
  ext::invoke<pcy_blas_nrm2_schema>(
      b, c.dtype(), {OpArg::integer(n), OpArg::in(x), OpArg::integer(incx), OpArg::out(result)});
}

// x = alpha * x
inline void scal(const Backend& b, int64_t n, Scalar alpha, TensorStorage& x, int64_t incx) {
  ext::checker c(pcy_blas_scal_schema, x, "x");
  c.count(n, "n");
  c.scalar(alpha, "alpha");
  c.vector(x, "x", n, incx, "incx");
  c.distinct(alpha, "alpha", x, "x");
  c.written(x, "x");
  ext::invoke<pcy_blas_scal_schema>(
      b, c.dtype(),
      {OpArg::integer(n), detail::scalar_arg(alpha), OpArg::inout(x), OpArg::integer(incx)});
}

// x <-> y
inline void swap(const Backend& b, int64_t n, TensorStorage& x, int64_t incx, TensorStorage& y,
                 int64_t incy) {
  ext::checker c(pcy_blas_swap_schema, x, "x");
  c.count(n, "n");
  c.same_dtype(y, "y", "x");
  c.vector(x, "x", n, incx, "incx");
  c.vector(y, "y", n, incy, "incy");
  c.distinct(x, "x", y, "y");
  c.written(x, "x");
  c.written(y, "y");
  ext::invoke<pcy_blas_swap_schema>(b, c.dtype(),
                                    {OpArg::integer(n), OpArg::inout(x), OpArg::integer(incx),
                                     OpArg::inout(y), OpArg::integer(incy)});
}

// ---- level 1, whole tensors (n = the element count, increments 1) ----------------------------

namespace detail {
inline int64_t same_size(const pcy_op_schema& op, const TensorStorage& x, const TensorStorage& y) {
  if (x.size() != y.size())
    ext::fail(op, errc::invalid_argument, "argument y: shape ", ext::shape_str(y), " (", y.size(),
              " elements) expected ", x.size(), " elements like x ", ext::shape_str(x),
              "; pass tensors of the same size, or use the form with n and increments");
  return static_cast<int64_t>(x.size());
}
} // namespace detail

inline void asum(const Backend& b, const TensorStorage& x, TensorStorage& result) {
  asum(b, static_cast<int64_t>(x.size()), x, 1, result);
}
inline void axpy(const Backend& b, Scalar alpha, const TensorStorage& x, TensorStorage& y) {
  axpy(b, detail::same_size(pcy_blas_axpy_schema, x, y), alpha, x, 1, y, 1);
}
inline void axpby(const Backend& b, Scalar alpha, const TensorStorage& x, Scalar beta,
                  TensorStorage& y) {
  axpby(b, detail::same_size(pcy_blas_axpby_schema, x, y), alpha, x, 1, beta, y, 1);
}
inline void copy(const Backend& b, const TensorStorage& x, TensorStorage& y) {
  copy(b, detail::same_size(pcy_blas_copy_schema, x, y), x, 1, y, 1);
}
inline void dot(const Backend& b, const TensorStorage& x, const TensorStorage& y,
                TensorStorage& result) {
  dot(b, detail::same_size(pcy_blas_dot_schema, x, y), x, 1, y, 1, result);
}
inline void nrm2(const Backend& b, const TensorStorage& x, TensorStorage& result) {
  nrm2(b, static_cast<int64_t>(x.size()), x, 1, result);
}
inline void scal(const Backend& b, Scalar alpha, TensorStorage& x) {
  scal(b, static_cast<int64_t>(x.size()), alpha, x, 1);
}
inline void swap(const Backend& b, TensorStorage& x, TensorStorage& y) {
  swap(b, detail::same_size(pcy_blas_swap_schema, x, y), x, 1, y, 1);
}

// Results as host values: waits for the op (a round trip). Use the result-tensor forms to keep
// the value on the device and avoid the one-element allocation.
template <class T> T asum(const Backend& b, const SharedTensor<T>& x) {
  SharedTensor<T> r({1});
  asum(b, x, r);
  return r.read()[0];
}
template <class T> T dot(const Backend& b, const SharedTensor<T>& x, const SharedTensor<T>& y) {
  SharedTensor<T> r({1});
  dot(b, x, y, r);
  return r.read()[0];
}
template <class T> T nrm2(const Backend& b, const SharedTensor<T>& x) {
  SharedTensor<T> r({1});
  nrm2(b, x, r);
  return r.read()[0];
}

// ---- level 2 and 3 ---------------------------------------------------------------------------

// y = alpha * op(A) x + beta * y; A is m x n as stored (row-major). With beta a host 0 and y
// dense and whole, y is write-only (it may be unwritten).
inline void gemv(const Backend& b, transpose ta, Scalar alpha, const TensorStorage& A,
                 const TensorStorage& x, Scalar beta, TensorStorage& y, const gemv_dims& d = {}) {
  ext::checker c(pcy_blas_gemv_schema, A, "A");
  c.same_dtype(x, "x", "A");
  c.same_dtype(y, "y", "A");
  c.scalar(alpha, "alpha");
  c.scalar(beta, "beta");
  if (A.shape().size() != 2)
    ext::fail(pcy_blas_gemv_schema, errc::invalid_argument,
              "argument A: expected a 2-d tensor, got shape ", ext::shape_str(A));
  const bool sized = d.m >= 0 || d.n >= 0 || d.lda >= 0;
  const int64_t m = d.m >= 0 ? d.m : A.shape()[0];
  const int64_t n = d.n >= 0 ? d.n : A.shape()[1];
  const int64_t lda = d.lda >= 0 ? d.lda : detail::ld_of(A);
  c.matrix(A, "A", m, n, lda, "lda", !sized, [] { return "A is m x n as stored"; });
  const bool t = ta == transpose::yes;
  const int64_t nx = t ? m : n, ny = t ? n : m;
  if (!sized && d.incx == 1 && static_cast<int64_t>(x.size()) != nx)
    ext::fail(pcy_blas_gemv_schema, errc::invalid_argument, "argument x: ", x.size(),
              " elements expected ", nx, " (op(A) = A ", detail::trans_name(ta), " is ", t ? n : m,
              " x ", nx, ", A shape ", ext::shape_str(A), ")");
  if (!sized && d.incy == 1 && static_cast<int64_t>(y.size()) != ny)
    ext::fail(pcy_blas_gemv_schema, errc::invalid_argument, "argument y: ", y.size(),
              " elements expected ", ny, " (op(A) = A ", detail::trans_name(ta), " is ", ny, " x ",
              nx, ", A shape ", ext::shape_str(A), ")");
  c.vector(x, "x", nx, d.incx, "incx");
  c.vector(y, "y", ny, d.incy, "incy");
  c.distinct(A, "A", y, "y");
  c.distinct(x, "x", y, "y");
  c.distinct(alpha, "alpha", y, "y");
  c.distinct(beta, "beta", y, "y");
  c.written(A, "A");
  c.written(x, "x");
  // m == 0 or n == 0 is a quick return that leaves y exactly as it was (reference BLAS): y is
  // then never write-only, and an unwritten y stays unwritten.
  const bool empty = m == 0 || n == 0;
  if (empty && !y.initialized()) return;
  const bool overwrite = !empty && !beta.is_tensor() && beta.value() == 0 && d.incy == 1 &&
                         static_cast<uint64_t>(ny) == y.size();
  if (!overwrite) c.written(y, "y");
  ext::invoke<pcy_blas_gemv_schema>(b, c.dtype(),
                                    {detail::ntrans(ta), OpArg::integer(m), OpArg::integer(n),
                                     detail::scalar_arg(alpha), OpArg::in(A), OpArg::integer(lda),
                                     OpArg::in(x), OpArg::integer(d.incx), detail::scalar_arg(beta),
                                     overwrite ? OpArg::out(y) : OpArg::inout(y),
                                     OpArg::integer(d.incy)});
}

// C = alpha * op(A) op(B) + beta * C, row-major; C is m x n, op(A) m x k, op(B) k x n.
// Sizes default to the shapes (C's for m and n, op(A)'s for k), leading dimensions to each
// tensor's column count. With beta a host 0 and C whole (m x n of an m x n tensor), C is
// write-only (it may be unwritten).
inline void gemm(const Backend& b, transpose ta, transpose tb, Scalar alpha, const TensorStorage& A,
                 const TensorStorage& B, Scalar beta, TensorStorage& C, const gemm_dims& d = {}) {
  ext::checker c(pcy_blas_gemm_schema, A, "A",
                 {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_F16, PCY_DTYPE_BF16});
  c.same_dtype(B, "B", "A");
  c.same_dtype(C, "C", "A");
  if (c.dtype() == PCY_DTYPE_F16 || c.dtype() == PCY_DTYPE_BF16) [[unlikely]]
    detail::host_scalars_only(c, alpha, beta);
  c.scalar(alpha, "alpha");
  c.scalar(beta, "beta");
  for (const TensorStorage* p : {&A, &B, const_cast<const TensorStorage*>(&C)})
    if (p->shape().size() != 2)
      ext::fail(pcy_blas_gemm_schema, errc::invalid_argument, "argument ",
                p == &A   ? "A"
                : p == &B ? "B"
                          : "C",
                ": expected a 2-d tensor (a row-major matrix), got shape ", ext::shape_str(*p));
  const bool ta_ = ta == transpose::yes, tb_ = tb == transpose::yes;
  const bool sized = d.m >= 0 || d.n >= 0 || d.k >= 0;
  const int64_t m = d.m >= 0 ? d.m : C.shape()[0];
  const int64_t n = d.n >= 0 ? d.n : C.shape()[1];
  const int64_t k = d.k >= 0 ? d.k : (ta_ ? A.shape()[0] : A.shape()[1]);
  const int64_t lda = d.lda >= 0 ? d.lda : detail::ld_of(A);
  const int64_t ldb = d.ldb >= 0 ? d.ldb : detail::ld_of(B);
  const int64_t ldc = d.ldc >= 0 ? d.ldc : detail::ld_of(C);
  // What each operand must be, spelled out only when a check fails (no allocation per call).
  const auto what = [&](char which) {
    if (which == 'C') return "C is m x n = " + std::to_string(m) + " x " + std::to_string(n);
    const bool t = which == 'A' ? ta_ : tb_;
    const std::string dims = which == 'A' ? "m x k" : "k x n";
    const int64_t r = which == 'A' ? m : k, cdim = which == 'A' ? k : n;
    return std::string("op(") + which + ") = " + which + " " +
           detail::trans_name(t ? trans : no_trans) + " must be " + dims + " = " +
           std::to_string(r) + " x " + std::to_string(cdim) + ", so " + which + " is stored " +
           (t ? std::string(dims.rbegin(), dims.rend()) : dims);
  };
  c.matrix(A, "A", ta_ ? k : m, ta_ ? m : k, lda, "lda", !sized && d.lda < 0,
           [&] { return what('A'); });
  c.matrix(B, "B", tb_ ? n : k, tb_ ? k : n, ldb, "ldb", !sized && d.ldb < 0,
           [&] { return what('B'); });
  c.matrix(C, "C", m, n, ldc, "ldc", !sized && d.ldc < 0, [&] { return what('C'); });
  c.distinct(A, "A", C, "C");
  c.distinct(B, "B", C, "C");
  c.distinct(alpha, "alpha", C, "C");
  c.distinct(beta, "beta", C, "C");
  c.written(A, "A");
  c.written(B, "B");
  // m * n cannot overflow here: C's check above bounded it by C's size.
  const bool overwrite = !beta.is_tensor() && beta.value() == 0 && ldc == n &&
                         static_cast<uint64_t>(m) * static_cast<uint64_t>(n) == C.size();
  if (!overwrite) c.written(C, "C");
  ext::invoke<pcy_blas_gemm_schema>(
      b, c.dtype(),
      {detail::ntrans(ta), detail::ntrans(tb), OpArg::integer(m), OpArg::integer(n),
       OpArg::integer(k), detail::scalar_arg(alpha), OpArg::in(A), OpArg::integer(lda),
       OpArg::in(B), OpArg::integer(ldb), detail::scalar_arg(beta),
       overwrite ? OpArg::out(C) : OpArg::inout(C), OpArg::integer(ldc)});
}

// C_i = alpha * op(A_i) op(B_i) + beta * C_i for i < batch, row-major, each product as gemm's;
// X_i is the matrix that starts at element i * stride_x of X (its elements in row-major order).
// With no dims given, the shapes say everything: C is [..., m, n] (batch = the product of its
// leading extents, 1 for a 2-d C), A is [..., m, k] (or [..., k, m] transposed) and B
// [..., k, n] (or [..., n, k]), each holding batch matrices or exactly one (a 2-d A or B, or
// leading extents of product 1: stride 0, that matrix serves every product). Any value in
// gemm_batched_dims replaces the one from the shapes: m, n, k and the leading dimensions as in
// gemm (giving one drops the exact-shape check; the extents are still checked), batch (>= 1)
// and the strides (the distance between matrices, in elements; C's at least one matrix's extent,
// (m - 1) * ldc + n, so that no two outputs overlap). A shape-derived batch of 0 (a leading
// extent 0) does nothing. With beta a host 0 and the batches covering C whole, C is write-only.
// f32, f64, and f16 / bf16 (host scalars) where a bundle serves them, as gemm.
inline void gemm_batched(const Backend& b, transpose ta, transpose tb, Scalar alpha,
                         const TensorStorage& A, const TensorStorage& B, Scalar beta,
                         TensorStorage& C, const gemm_batched_dims& d = {}) {
  const pcy_op_schema& S = pcy_blas_gemm_batched_schema;
  ext::checker c(S, A, "A", {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_F16, PCY_DTYPE_BF16});
  c.same_dtype(B, "B", "A");
  c.same_dtype(C, "C", "A");
  if (c.dtype() == PCY_DTYPE_F16 || c.dtype() == PCY_DTYPE_BF16) [[unlikely]]
    detail::host_scalars_only(c, alpha, beta);
  c.scalar(alpha, "alpha");
  c.scalar(beta, "beta");
  const bool ta_ = ta == transpose::yes, tb_ = tb == transpose::yes;
  // A value from the shapes needs the tensor's last two extents.
  const auto rank2 = [&](const TensorStorage& t, const char* name, const char* value) {
    if (t.shape().size() < 2)
      ext::fail(S, errc::invalid_argument, "argument ", name,
                ": expected a tensor of rank >= 2 ([..., rows, columns]) to take ", value,
                " from, got shape ", ext::shape_str(t), "; reshape it or pass ", value,
                " in gemm_batched_dims");
  };
  const auto dim = [](const TensorStorage& t, size_t from_end) {
    return t.shape()[t.shape().size() - from_end];
  };
  // The number of matrices a tensor holds by its shape: the product of its leading extents.
  const auto matrices_in = [](const TensorStorage& t) {
    int64_t count = 1;
    for (size_t i = 0; i + 2 < t.shape().size(); ++i)
      count *= t.shape()[i];
    return count;
  };
  const bool sized = d.m >= 0 || d.n >= 0 || d.k >= 0;
  if (d.m < 0 || d.n < 0 || d.ldc < 0 || d.stride_c == -1 || d.batch < 0)
    rank2(C, "C", "m, n, batch");
  if (d.k < 0 || d.lda < 0 || d.stride_a == -1) rank2(A, "A", "k, lda, stride_a");
  if (d.ldb < 0 || d.stride_b == -1) rank2(B, "B", "ldb, stride_b");
  const int64_t m = d.m >= 0 ? d.m : dim(C, 2);
  const int64_t n = d.n >= 0 ? d.n : dim(C, 1);
  const int64_t k = d.k >= 0 ? d.k : (ta_ ? dim(A, 2) : dim(A, 1));
  const int64_t lda = d.lda >= 0 ? d.lda : std::max<int64_t>(dim(A, 1), 1);
  const int64_t ldb = d.ldb >= 0 ? d.ldb : std::max<int64_t>(dim(B, 1), 1);
  const int64_t ldc = d.ldc >= 0 ? d.ldc : std::max<int64_t>(dim(C, 1), 1);
  if (d.batch == 0 || d.batch < -1)
    ext::fail(S, errc::invalid_argument, "argument batch: ", d.batch,
              " is not a number of products; pass batch >= 1 (or -1: from C's shape)");
  const int64_t batch = d.batch >= 1 ? d.batch : matrices_in(C);
  // What each operand must be, spelled out only when a check fails.
  const auto what = [&](char which) {
    const std::string nb = std::to_string(batch) + " products";
    if (which == 'C')
      return "each C_i is m x n = " + std::to_string(m) + " x " + std::to_string(n) + ", " + nb;
    const bool t = which == 'A' ? ta_ : tb_;
    const std::string dims = which == 'A' ? "m x k" : "k x n";
    const int64_t r = which == 'A' ? m : k, cdim = which == 'A' ? k : n;
    return std::string("op(") + which + "_i) = " + which + "_i " +
           detail::trans_name(t ? trans : no_trans) + " must be " + dims + " = " +
           std::to_string(r) + " x " + std::to_string(cdim) + ", so " + which + "_i is stored " +
           (t ? std::string(dims.rbegin(), dims.rend()) : dims) + ", " + nb;
  };
  // An input's stride from its shape: 0 when it holds one matrix (broadcast), else its matrix
  // size, when it holds batch matrices (checked here only when no sizes were given).
  const auto input_stride = [&](const TensorStorage& t, char which, int64_t given) -> int64_t {
    if (given != -1) return given; // a negative one is refused below
    const int64_t count = matrices_in(t);
    if (count == 1) return 0;
    if (!sized && count != batch)
      ext::fail(S, errc::invalid_argument, "argument ", which == 'A' ? "A" : "B", ": shape ",
                ext::shape_str(t), " holds ", count, " matrices, expected ", batch,
                " (C's batch) or 1 (one matrix for every product) (", what(which),
                "); fix the leading extents, or pass stride_", which == 'A' ? "a" : "b",
                " and batch in gemm_batched_dims");
    return dim(t, 2) * dim(t, 1);
  };
  const int64_t stride_a = input_stride(A, 'A', d.stride_a);
  const int64_t stride_b = input_stride(B, 'B', d.stride_b);
  const int64_t stride_c = d.stride_c != -1 ? d.stride_c : dim(C, 2) * dim(C, 1);
  // No sizes given: the last two extents must be exactly the matrices (as gemm's exact check).
  const auto exact = [&](const TensorStorage& t, const char* name, int64_t rows, int64_t cols,
                         char which) {
    if (dim(t, 2) != rows || dim(t, 1) != cols)
      ext::fail(S, errc::invalid_argument, "argument ", name, ": shape ", ext::shape_str(t),
                " expected [..., ", rows, ", ", cols, "] (", what(which),
                "); fix the shape, or pass explicit sizes for sub-matrices");
  };
  if (!sized && d.lda < 0) exact(A, "A", ta_ ? k : m, ta_ ? m : k, 'A');
  if (!sized && d.ldb < 0) exact(B, "B", tb_ ? n : k, tb_ ? k : n, 'B');
  if (!sized && d.ldc < 0) exact(C, "C", m, n, 'C');
  c.matrices(A, "A", ta_ ? k : m, ta_ ? m : k, lda, "lda", stride_a, "stride_a", batch, false,
             [&] { return what('A'); });
  c.matrices(B, "B", tb_ ? n : k, tb_ ? k : n, ldb, "ldb", stride_b, "stride_b", batch, false,
             [&] { return what('B'); });
  c.matrices(C, "C", m, n, ldc, "ldc", stride_c, "stride_c", batch, true,
             [&] { return what('C'); });
  c.distinct(A, "A", C, "C");
  c.distinct(B, "B", C, "C");
  c.distinct(alpha, "alpha", C, "C");
  c.distinct(beta, "beta", C, "C");
  if (batch == 0) return; // a leading extent 0: no product, nothing touched
  c.written(A, "A");
  c.written(B, "B");
  // batch * m * n cannot overflow here: with stride_c == m * n, C's check bounded it by C's size.
  const bool overwrite = !beta.is_tensor() && beta.value() == 0 && ldc == n && stride_c == m * n &&
                         static_cast<uint64_t>(batch) * static_cast<uint64_t>(m * n) == C.size();
  if (!overwrite) c.written(C, "C");
  ext::invoke<pcy_blas_gemm_batched_schema>(
      b, c.dtype(),
      {detail::ntrans(ta), detail::ntrans(tb), OpArg::integer(m), OpArg::integer(n),
       OpArg::integer(k), detail::scalar_arg(alpha), OpArg::in(A), OpArg::integer(lda),
       OpArg::integer(stride_a), OpArg::in(B), OpArg::integer(ldb), OpArg::integer(stride_b),
       detail::scalar_arg(beta), overwrite ? OpArg::out(C) : OpArg::inout(C), OpArg::integer(ldc),
       OpArg::integer(stride_c), OpArg::integer(batch)});
}

} // namespace parenchyma::blas
