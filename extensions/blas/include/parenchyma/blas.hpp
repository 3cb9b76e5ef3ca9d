// parenchyma BLAS front-end: asum, axpy, axpby, copy, dot, nrm2, scal, swap, gemv, gemm on
// SharedTensors, for f32 and f64, on any backend (header-only over the core; the ops run in the
// "blas" bundle plugin of the framework that serves them).
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
#include <parenchyma/shared_tensor.hpp>

#include <array>
#include <cstdint>
#include <sstream>
#include <string>

namespace parenchyma::blas {

enum class transpose : int { no = 0, yes = 1 };
inline constexpr transpose no_trans = transpose::no;
inline constexpr transpose trans = transpose::yes;

// A scalar argument: a host value, or a one-element tensor of the op's dtype.
class Scalar {
public:
  Scalar(double value) noexcept : value_(value) {} // NOLINT: implicit by design
  Scalar(const TensorStorage& tensor) noexcept : tensor_(&tensor) {}
  template <class T>
  Scalar(const SharedTensor<T>& tensor) noexcept : tensor_(&tensor.storage()) {} // NOLINT
  bool is_tensor() const noexcept { return tensor_ != nullptr; }
  double value() const noexcept { return value_; }
  const TensorStorage* tensor() const noexcept { return tensor_; }

private:
  double value_ = 0;
  const TensorStorage* tensor_ = nullptr;
};

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

namespace detail {

#define PARENCHYMA_BLAS_KEY(op, sig)                                                               \
  inline const OpKey& op##_key(pcy_dtype t) noexcept {                                             \
    static const OpKey f32{PCY_BLAS_EXTENSION, #op, PCY_DTYPE_F32, sig};                           \
    static const OpKey f64{PCY_BLAS_EXTENSION, #op, PCY_DTYPE_F64, sig};                           \
    return t == PCY_DTYPE_F64 ? f64 : f32;                                                         \
  }
PARENCHYMA_BLAS_KEY(asum, PCY_BLAS_ASUM_SIG)
PARENCHYMA_BLAS_KEY(axpy, PCY_BLAS_AXPY_SIG)
PARENCHYMA_BLAS_KEY(axpby, PCY_BLAS_AXPBY_SIG)
PARENCHYMA_BLAS_KEY(copy, PCY_BLAS_COPY_SIG)
PARENCHYMA_BLAS_KEY(dot, PCY_BLAS_DOT_SIG)
PARENCHYMA_BLAS_KEY(nrm2, PCY_BLAS_NRM2_SIG)
PARENCHYMA_BLAS_KEY(scal, PCY_BLAS_SCAL_SIG)
PARENCHYMA_BLAS_KEY(swap, PCY_BLAS_SWAP_SIG)
PARENCHYMA_BLAS_KEY(gemv, PCY_BLAS_GEMV_SIG)
PARENCHYMA_BLAS_KEY(gemm, PCY_BLAS_GEMM_SIG)
#undef PARENCHYMA_BLAS_KEY

inline const char* dtype_name(pcy_dtype t) noexcept {
  switch (t) {
  case PCY_DTYPE_F32: return "f32";
  case PCY_DTYPE_F64: return "f64";
  case PCY_DTYPE_I32: return "i32";
  case PCY_DTYPE_I64: return "i64";
  case PCY_DTYPE_U8: return "u8";
  }
  return "?";
}

inline std::string shape_str(const TensorStorage& t) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < t.shape().size(); ++i)
    os << (i ? ", " : "") << t.shape()[i];
  os << "]";
  return os.str();
}

template <class... A> [[noreturn]] void fail(const char* op, errc code, const A&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw error(code, std::string("blas.") + op, os.str());
}

// The checks every op runs before anything is enqueued.
class checker {
public:
  checker(const char* op, const TensorStorage& first, const char* first_name) : op_(op) {
    dtype_ = first.dtype();
    if (dtype_ != PCY_DTYPE_F32 && dtype_ != PCY_DTYPE_F64)
      fail(op_, errc::invalid_argument, "argument ", first_name, ": dtype ", dtype_name(dtype_),
           " is not supported; BLAS ops compute in f32 or f64");
  }
  pcy_dtype dtype() const noexcept { return dtype_; }

  void same_dtype(const TensorStorage& t, const char* name, const char* first_name) const {
    if (t.dtype() != dtype_)
      fail(op_, errc::invalid_argument, "argument ", name, ": dtype ", dtype_name(t.dtype()),
           " expected ", dtype_name(dtype_), " (the dtype of ", first_name,
           "); convert one of them so both have the same dtype");
  }
  void written(const TensorStorage& t, const char* name) const {
    if (!t.initialized())
      fail(op_, errc::uninitialized, "argument ", name,
           ": the tensor was never written; fill it (write()/write_only() on the host) or "
           "compute into it before passing it as an input");
  }
  void count(int64_t n, const char* name) const {
    if (n < 0)
      fail(op_, errc::invalid_argument, "argument ", name, ": ", n,
           " is negative; pass an element count >= 0");
  }
  // A vector of n elements with stride inc inside tensor t.
  void vector(const TensorStorage& t, const char* name, int64_t n, int64_t inc,
              const char* inc_name) const {
    if (inc < 1)
      fail(op_, errc::invalid_argument, "argument ", inc_name, ": ", inc,
           " expected >= 1 (negative and zero increments are not supported)");
    if (n == 0) return;
    // 1 + (n - 1) * inc, checked: modulo 2^64 a huge n and inc would wrap into "fits".
    uint64_t need = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(n - 1), static_cast<uint64_t>(inc), &need) ||
        __builtin_add_overflow(need, uint64_t{1}, &need))
      fail(op_, errc::invalid_argument, "argument ", name, ": ", n, " elements with ", inc_name,
           " = ", inc, " need more than 2^64 elements, got a tensor of shape ", shape_str(t),
           "; pass a smaller n or ", inc_name);
    if (need > t.size())
      fail(op_, errc::invalid_argument, "argument ", name, ": ", n, " elements with ", inc_name,
           " = ", inc, " need ", need, " elements, got a tensor of shape ", shape_str(t), " (",
           t.size(), " elements); pass a larger tensor or a smaller n");
  }
  void result(const TensorStorage& t, const char* name) const {
    if (t.size() != 1)
      fail(op_, errc::invalid_argument, "argument ", name,
           ": expected a one-element tensor for the result, got shape ", shape_str(t));
  }
  void scalar(const Scalar& s, const char* name) const {
    if (!s.is_tensor()) return;
    const TensorStorage& t = *s.tensor();
    if (t.dtype() != dtype_)
      fail(op_, errc::invalid_argument, "argument ", name, ": a ", dtype_name(t.dtype()),
           " tensor expected ", dtype_name(dtype_), " (the op's dtype)");
    if (t.size() != 1)
      fail(op_, errc::invalid_argument, "argument ", name,
           ": a scalar tensor must have one element, got shape ", shape_str(t));
    written(t, name);
  }
  void distinct(const TensorStorage& a, const char* an, const TensorStorage& b,
                const char* bn) const {
    if (&a == &b)
      fail(op_, errc::invalid_argument, "argument ", an, ": is the same tensor as ", bn, "; ", op_,
           " needs distinct tensors (copy one first)");
  }
  void distinct(const Scalar& s, const char* sn, const TensorStorage& b, const char* bn) const {
    if (s.is_tensor()) distinct(*s.tensor(), sn, b, bn);
  }
  // A row-major matrix: `rows` x `cols` as stored, leading dimension ld, inside tensor t.
  // `exact`: no sizes or ld were given, so the shape must be exactly rows x cols.
  template <class What>
  void matrix(const TensorStorage& t, const char* name, int64_t rows, int64_t cols, int64_t ld,
              const char* ld_name, bool exact, const What& what_fn) const {
    const auto what = [&] { return std::string(what_fn()); };
    if (t.shape().size() != 2)
      fail(op_, errc::invalid_argument, "argument ", name, ": expected a 2-d tensor (", what(),
           "), got shape ", shape_str(t));
    if (exact && (t.shape()[0] != rows || t.shape()[1] != cols))
      fail(op_, errc::invalid_argument, "argument ", name, ": shape ", shape_str(t), " expected [",
           rows, ", ", cols, "] (", what(),
           "); fix the shape, or pass explicit sizes for a sub-matrix");
    if (ld < (cols > 1 ? cols : 1))
      fail(op_, errc::invalid_argument, "argument ", ld_name, ": ", ld, " is smaller than the ",
           cols, " columns ", name, " has as stored (", what(), "); pass ", ld_name,
           " >= ", (cols > 1 ? cols : 1));
    if (rows == 0 || cols == 0) return;
    // (rows - 1) * ld + cols, checked like vector().
    uint64_t need = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(rows - 1), static_cast<uint64_t>(ld), &need) ||
        __builtin_add_overflow(need, static_cast<uint64_t>(cols), &need))
      fail(op_, errc::invalid_argument, "argument ", name, ": ", rows, " x ", cols, " with ",
           ld_name, " = ", ld, " need more than 2^64 elements (", what(), "), got shape ",
           shape_str(t), "; pass smaller sizes or ", ld_name);
    if (need > t.size())
      fail(op_, errc::invalid_argument, "argument ", name, ": ", rows, " x ", cols, " with ",
           ld_name, " = ", ld, " needs ", need, " elements (", what(), "), got shape ",
           shape_str(t), "; pass a larger tensor or smaller sizes");
  }

private:
  const char* op_;
  pcy_dtype dtype_;
};

// The default leading dimension of a 2-d tensor: its column count (at least 1, as BLAS wants).
inline int64_t ld_of(const TensorStorage& t) noexcept {
  return t.shape()[1] > 1 ? t.shape()[1] : 1;
}

inline OpArg scalar_arg(const Scalar& s) noexcept {
  return s.is_tensor() ? OpArg::in(*s.tensor()) : OpArg::real(s.value());
}
inline OpArg ntrans(transpose t) noexcept { return OpArg::integer(static_cast<int>(t)); }
inline const char* trans_name(transpose t) noexcept {
  return t == transpose::yes ? "transposed" : "not transposed";
}

} // namespace detail

// ---- level 1, BLAS form: explicit element count and increments ------------------------------

// result = sum |x_i|
inline void asum(const Backend& b, int64_t n, const TensorStorage& x, int64_t incx,
                 TensorStorage& result) {
  detail::checker c("asum", x, "x");
  c.count(n, "n");
  c.vector(x, "x", n, incx, "incx");
  c.same_dtype(result, "result", "x");
  c.result(result, "result");
  c.distinct(x, "x", result, "result");
  c.written(x, "x");
  const std::array<OpArg, 4> a{OpArg::integer(n), OpArg::in(x), OpArg::integer(incx),
                               OpArg::out(result)};
  b.invoke(detail::asum_key(c.dtype()), a);
}

// y = alpha * x + y
inline void axpy(const Backend& b, int64_t n, Scalar alpha, const TensorStorage& x, int64_t incx,
                 TensorStorage& y, int64_t incy) {
  detail::checker c("axpy", x, "x");
  c.count(n, "n");
  c.same_dtype(y, "y", "x");
  c.scalar(alpha, "alpha");
  c.vector(x, "x", n, incx, "incx");
  c.vector(y, "y", n, incy, "incy");
  c.distinct(alpha, "alpha", y, "y");
  if (&x == &y && incx != incy) c.distinct(x, "x", y, "y (with incx != incy)");
  c.written(x, "x");
  c.written(y, "y");
  const std::array<OpArg, 6> a{OpArg::integer(n), detail::scalar_arg(alpha),
                               OpArg::in(x),      OpArg::integer(incx),
                               OpArg::inout(y),   OpArg::integer(incy)};
  b.invoke(detail::axpy_key(c.dtype()), a);
}

// y = alpha * x + beta * y. With beta a host 0, y is write-only (it may be unwritten).
inline void axpby(const Backend& b, int64_t n, Scalar alpha, const TensorStorage& x, int64_t incx,
                  Scalar beta, TensorStorage& y, int64_t incy) {
  detail::checker c("axpby", x, "x");
  c.count(n, "n");
  c.same_dtype(y, "y", "x");
  c.scalar(alpha, "alpha");
  c.scalar(beta, "beta");
  c.vector(x, "x", n, incx, "incx");
  c.vector(y, "y", n, incy, "incy");
  c.distinct(alpha, "alpha", y, "y");
  c.distinct(beta, "beta", y, "y");
  if (&x == &y && incx != incy) c.distinct(x, "x", y, "y (with incx != incy)");
  c.written(x, "x");
  // Write-only only when y is fully overwritten (dense and whole) and beta is a host zero.
  const bool overwrite = !beta.is_tensor() && beta.value() == 0 && &x != &y && incy == 1 &&
                         static_cast<uint64_t>(n) == y.size();
  if (!overwrite) c.written(y, "y");
  const std::array<OpArg, 7> a{
      OpArg::integer(n),    detail::scalar_arg(alpha), OpArg::in(x),
      OpArg::integer(incx), detail::scalar_arg(beta),  overwrite ? OpArg::out(y) : OpArg::inout(y),
      OpArg::integer(incy)};
  b.invoke(detail::axpby_key(c.dtype()), a);
}

// y = x
inline void copy(const Backend& b, int64_t n, const TensorStorage& x, int64_t incx,
                 TensorStorage& y, int64_t incy) {
  detail::checker c("copy", x, "x");
  c.count(n, "n");
  c.same_dtype(y, "y", "x");
  c.vector(x, "x", n, incx, "incx");
  c.vector(y, "y", n, incy, "incy");
  c.distinct(x, "x", y, "y");
  c.written(x, "x");
  const bool overwrite = incy == 1 && static_cast<uint64_t>(n) == y.size();
  if (!overwrite) c.written(y, "y");
  const std::array<OpArg, 5> a{OpArg::integer(n), OpArg::in(x), OpArg::integer(incx),
                               overwrite ? OpArg::out(y) : OpArg::inout(y), OpArg::integer(incy)};
  b.invoke(detail::copy_key(c.dtype()), a);
}

// result = x . y
inline void dot(const Backend& b, int64_t n, const TensorStorage& x, int64_t incx,
                const TensorStorage& y, int64_t incy, TensorStorage& result) {
  detail::checker c("dot", x, "x");
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
  const std::array<OpArg, 6> a{OpArg::integer(n), OpArg::in(x),         OpArg::integer(incx),
                               OpArg::in(y),      OpArg::integer(incy), OpArg::out(result)};
  b.invoke(detail::dot_key(c.dtype()), a);
}

// result = sqrt(sum x_i^2)
inline void nrm2(const Backend& b, int64_t n, const TensorStorage& x, int64_t incx,
                 TensorStorage& result) {
  detail::checker c("nrm2", x, "x");
  c.count(n, "n");
  c.vector(x, "x", n, incx, "incx");
  c.same_dtype(result, "result", "x");
  c.result(result, "result");
  c.distinct(x, "x", result, "result");
  c.written(x, "x");
  const std::array<OpArg, 4> a{OpArg::integer(n), OpArg::in(x), OpArg::integer(incx),
                               OpArg::out(result)};
  b.invoke(detail::nrm2_key(c.dtype()), a);
}

// x = alpha * x
inline void scal(const Backend& b, int64_t n, Scalar alpha, TensorStorage& x, int64_t incx) {
  detail::checker c("scal", x, "x");
  c.count(n, "n");
  c.scalar(alpha, "alpha");
  c.vector(x, "x", n, incx, "incx");
  c.distinct(alpha, "alpha", x, "x");
  c.written(x, "x");
  const std::array<OpArg, 4> a{OpArg::integer(n), detail::scalar_arg(alpha), OpArg::inout(x),
                               OpArg::integer(incx)};
  b.invoke(detail::scal_key(c.dtype()), a);
}

// x <-> y
inline void swap(const Backend& b, int64_t n, TensorStorage& x, int64_t incx, TensorStorage& y,
                 int64_t incy) {
  detail::checker c("swap", x, "x");
  c.count(n, "n");
  c.same_dtype(y, "y", "x");
  c.vector(x, "x", n, incx, "incx");
  c.vector(y, "y", n, incy, "incy");
  c.distinct(x, "x", y, "y");
  c.written(x, "x");
  c.written(y, "y");
  const std::array<OpArg, 5> a{OpArg::integer(n), OpArg::inout(x), OpArg::integer(incx),
                               OpArg::inout(y), OpArg::integer(incy)};
  b.invoke(detail::swap_key(c.dtype()), a);
}

// ---- level 1, whole tensors (n = the element count, increments 1) ----------------------------

namespace detail {
inline int64_t same_size(const char* op, const TensorStorage& x, const TensorStorage& y) {
  if (x.size() != y.size())
    fail(op, errc::invalid_argument, "argument y: shape ", shape_str(y), " (", y.size(),
         " elements) expected ", x.size(), " elements like x ", shape_str(x),
         "; pass tensors of the same size, or use the form with n and increments");
  return static_cast<int64_t>(x.size());
}
} // namespace detail

inline void asum(const Backend& b, const TensorStorage& x, TensorStorage& result) {
  asum(b, static_cast<int64_t>(x.size()), x, 1, result);
}
inline void axpy(const Backend& b, Scalar alpha, const TensorStorage& x, TensorStorage& y) {
  axpy(b, detail::same_size("axpy", x, y), alpha, x, 1, y, 1);
}
inline void axpby(const Backend& b, Scalar alpha, const TensorStorage& x, Scalar beta,
                  TensorStorage& y) {
  axpby(b, detail::same_size("axpby", x, y), alpha, x, 1, beta, y, 1);
}
inline void copy(const Backend& b, const TensorStorage& x, TensorStorage& y) {
  copy(b, detail::same_size("copy", x, y), x, 1, y, 1);
}
inline void dot(const Backend& b, const TensorStorage& x, const TensorStorage& y,
                TensorStorage& result) {
  dot(b, detail::same_size("dot", x, y), x, 1, y, 1, result);
}
inline void nrm2(const Backend& b, const TensorStorage& x, TensorStorage& result) {
  nrm2(b, static_cast<int64_t>(x.size()), x, 1, result);
}
inline void scal(const Backend& b, Scalar alpha, TensorStorage& x) {
  scal(b, static_cast<int64_t>(x.size()), alpha, x, 1);
}
inline void swap(const Backend& b, TensorStorage& x, TensorStorage& y) {
  swap(b, detail::same_size("swap", x, y), x, 1, y, 1);
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
  detail::checker c("gemv", A, "A");
  c.same_dtype(x, "x", "A");
  c.same_dtype(y, "y", "A");
  c.scalar(alpha, "alpha");
  c.scalar(beta, "beta");
  if (A.shape().size() != 2)
    detail::fail("gemv", errc::invalid_argument, "argument A: expected a 2-d tensor, got shape ",
                 detail::shape_str(A));
  const bool sized = d.m >= 0 || d.n >= 0 || d.lda >= 0;
  const int64_t m = d.m >= 0 ? d.m : A.shape()[0];
  const int64_t n = d.n >= 0 ? d.n : A.shape()[1];
  const int64_t lda = d.lda >= 0 ? d.lda : detail::ld_of(A);
  c.matrix(A, "A", m, n, lda, "lda", !sized, [] { return "A is m x n as stored"; });
  const bool t = ta == transpose::yes;
  const int64_t nx = t ? m : n, ny = t ? n : m;
  if (!sized && d.incx == 1 && static_cast<int64_t>(x.size()) != nx)
    detail::fail("gemv", errc::invalid_argument, "argument x: ", x.size(), " elements expected ",
                 nx, " (op(A) = A ", detail::trans_name(ta), " is ", t ? n : m, " x ", nx,
                 ", A shape ", detail::shape_str(A), ")");
  if (!sized && d.incy == 1 && static_cast<int64_t>(y.size()) != ny)
    detail::fail("gemv", errc::invalid_argument, "argument y: ", y.size(), " elements expected ",
                 ny, " (op(A) = A ", detail::trans_name(ta), " is ", ny, " x ", nx, ", A shape ",
                 detail::shape_str(A), ")");
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
  const std::array<OpArg, 11> a{detail::ntrans(ta),
                                OpArg::integer(m),
                                OpArg::integer(n),
                                detail::scalar_arg(alpha),
                                OpArg::in(A),
                                OpArg::integer(lda),
                                OpArg::in(x),
                                OpArg::integer(d.incx),
                                detail::scalar_arg(beta),
                                overwrite ? OpArg::out(y) : OpArg::inout(y),
                                OpArg::integer(d.incy)};
  b.invoke(detail::gemv_key(c.dtype()), a);
}

// C = alpha * op(A) op(B) + beta * C, row-major; C is m x n, op(A) m x k, op(B) k x n.
// Sizes default to the shapes (C's for m and n, op(A)'s for k), leading dimensions to each
// tensor's column count. With beta a host 0 and C whole (m x n of an m x n tensor), C is
// write-only (it may be unwritten).
inline void gemm(const Backend& b, transpose ta, transpose tb, Scalar alpha, const TensorStorage& A,
                 const TensorStorage& B, Scalar beta, TensorStorage& C, const gemm_dims& d = {}) {
  detail::checker c("gemm", A, "A");
  c.same_dtype(B, "B", "A");
  c.same_dtype(C, "C", "A");
  c.scalar(alpha, "alpha");
  c.scalar(beta, "beta");
  for (const TensorStorage* p : {&A, &B, const_cast<const TensorStorage*>(&C)})
    if (p->shape().size() != 2)
      detail::fail("gemm", errc::invalid_argument, "argument ",
                   p == &A   ? "A"
                   : p == &B ? "B"
                             : "C",
                   ": expected a 2-d tensor (a row-major matrix), got shape ",
                   detail::shape_str(*p));
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
  const std::array<OpArg, 13> a{
      detail::ntrans(ta),  detail::ntrans(tb),       OpArg::integer(m),
      OpArg::integer(n),   OpArg::integer(k),        detail::scalar_arg(alpha),
      OpArg::in(A),        OpArg::integer(lda),      OpArg::in(B),
      OpArg::integer(ldb), detail::scalar_arg(beta), overwrite ? OpArg::out(C) : OpArg::inout(C),
      OpArg::integer(ldc)};
  b.invoke(detail::gemm_key(c.dtype()), a);
}

} // namespace parenchyma::blas
