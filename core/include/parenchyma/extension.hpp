// parenchyma: the front-end side of the extension kit — what every extension's header-only
// front-end (parenchyma/blas.hpp, parenchyma/nn.hpp, ...) is built from: a scalar argument type,
// the op keys made from the extension's schema (pcy_bundle.h), a checker whose errors name the
// op and the argument, and invoke(), which packs the arguments in schema order and refuses at
// compile time a call with the wrong number of them. Adding an extension is a schema header, a
// front-end over this file and a bundle per framework: no change to the core.
//
//   parenchyma::ext::checker c(pcy_blas_axpy_schema, x, "x");   // dtype from x, errors "blas.axpy"
//   c.vector(x, "x", n, incx, "incx");
//   parenchyma::ext::invoke<pcy_blas_axpy_schema>(backend, c.dtype(), {OpArg::integer(n), ...});
//
// The core then checks every argument against the schema again (kind, intent, dtype, rank) in
// Backend::invoke, with a few byte compares, so a front-end that packs an argument wrongly
// fails on that call with an error naming the op and the argument.
#pragma once

#include <parenchyma/backend.hpp>
#include <parenchyma/error.hpp>
#include <parenchyma/shared_tensor.hpp>

#include <parenchyma/abi/pcy_bundle.h>
#include <parenchyma/sdk/dtype.hpp>
#include <parenchyma/sdk/extent.hpp>

#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

namespace parenchyma::ext {

// A scalar argument: a host value, or a one-element tensor of the op's dtype (which stays on the
// device: no round trip).
class Scalar {
public:
  Scalar(double value) noexcept : value_(value) {} // NOLINT: implicit by design
  Scalar(const TensorStorage& tensor) noexcept : tensor_(&tensor) {}
  template <class T>
  Scalar(const SharedTensor<T>& tensor) noexcept : tensor_(&tensor.storage()) {} // NOLINT
  bool is_tensor() const noexcept { return tensor_ != nullptr; }
  double value() const noexcept { return value_; }
  const TensorStorage* tensor() const noexcept { return tensor_; }
  // The op argument it becomes (a SCALAR slot takes either).
  OpArg arg() const noexcept { return tensor_ ? OpArg::in(*tensor_) : OpArg::real(value_); }
  // A host zero: an output scaled by it is overwritten without being read.
  bool is_host_zero() const noexcept { return tensor_ == nullptr && value_ == 0; }

private:
  double value_ = 0;
  const TensorStorage* tensor_ = nullptr;
};

using sdk::dtype_name;

inline std::string shape_str(const TensorStorage& t) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < t.shape().size(); ++i)
    os << (i ? ", " : "") << t.shape()[i];
  os << "]";
  return os.str();
}

// A message part as a stream takes it; a null C string (a reason nobody set) reads "(null)"
// instead of cutting the message short.
template <class T> decltype(auto) message_part(const T& v) noexcept {
  if constexpr (std::is_convertible_v<const T&, const char*>) {
    const char* p = v;
    return p != nullptr ? p : "(null)";
  } else {
    return (v);
  }
}

// Throws errc `code` with origin "<extension>.<op>" and a message built from `parts`.
template <class... A> [[noreturn]] void fail(const pcy_op_schema& s, errc code, const A&... parts) {
  std::ostringstream os;
  (os << ... << message_part(parts));
  throw error(code, std::string(s.extension) + "." + s.name, os.str());
}

// The key of one op of a schema for one dtype: one static key per (schema, dtype), so every
// later call resolves with an index, not a name.
template <const pcy_op_schema& S> const OpKey& op_key(pcy_dtype t) noexcept {
  static const OpKey f32{S, PCY_DTYPE_F32}, f64{S, PCY_DTYPE_F64}, f16{S, PCY_DTYPE_F16},
      bf16{S, PCY_DTYPE_BF16}, i32{S, PCY_DTYPE_I32}, i64{S, PCY_DTYPE_I64}, u8{S, PCY_DTYPE_U8},
      i8{S, PCY_DTYPE_I8}, i16{S, PCY_DTYPE_I16}, b8{S, PCY_DTYPE_BOOL};
  switch (t) {
  case PCY_DTYPE_F64: return f64;
  case PCY_DTYPE_F16: return f16;
  case PCY_DTYPE_BF16: return bf16;
  case PCY_DTYPE_I32: return i32;
  case PCY_DTYPE_I64: return i64;
  case PCY_DTYPE_U8: return u8;
  case PCY_DTYPE_I8: return i8;
  case PCY_DTYPE_I16: return i16;
  case PCY_DTYPE_BOOL: return b8;
  case PCY_DTYPE_F32: break;
  }
  return f32;
}

// Runs the op with the arguments in schema order, written as a braced list:
//   ext::invoke<pcy_blas_scal_schema>(b, dtype, {OpArg::integer(n), alpha.arg(), ...});
// The list binds to the array parameter in place (no copy), and its length is checked against
// the schema at compile time.
template <const pcy_op_schema& S, size_t N>
void invoke(const Backend& b, pcy_dtype dtype, const OpArg (&args)[N]) {
  static_assert(N == S.arg_count, "the call's argument count differs from the op's schema");
  b.invoke(op_key<S>(dtype), std::span<const OpArg>(args, N));
}

// The checks a front-end runs before anything is enqueued; each error names the op and the
// argument and says what to do. The op's dtype is that of its first tensor argument.
class checker {
public:
  // `allowed`: the dtypes the op computes in (f32 and f64 unless said otherwise).
  checker(const pcy_op_schema& schema, const TensorStorage& first, const char* first_name,
          std::initializer_list<pcy_dtype> allowed = {PCY_DTYPE_F32, PCY_DTYPE_F64})
      : s_(schema) {
    dtype_ = first.dtype();
    for (pcy_dtype d : allowed)
      if (d == dtype_) return;
    unsupported_dtype(first_name, allowed); // cold: the message is built only here
  }
  pcy_dtype dtype() const noexcept { return dtype_; }
  const pcy_op_schema& schema() const noexcept { return s_; }

  void same_dtype(const TensorStorage& t, const char* name, const char* first_name) const {
    if (t.dtype() != dtype_)
      fail(s_, errc::invalid_argument, "argument ", name, ": dtype ", dtype_name(t.dtype()),
           " expected ", dtype_name(dtype_), " (the dtype of ", first_name,
           "); convert one of them so both have the same dtype");
  }
  void written(const TensorStorage& t, const char* name) const {
    if (!t.initialized())
      fail(s_, errc::uninitialized, "argument ", name,
           ": the tensor was never written; fill it (write()/write_only() on the host) or "
           "compute into it before passing it as an input");
  }
  void count(int64_t n, const char* name) const {
    if (n < 0)
      fail(s_, errc::invalid_argument, "argument ", name, ": ", n,
           " is negative; pass an element count >= 0");
  }
  // A vector of n elements with stride inc inside tensor t; 1 + (n - 1) * inc is computed
  // without wrapping (sdk::vector_extent, which the bundles' decoder uses too).
  void vector(const TensorStorage& t, const char* name, int64_t n, int64_t inc,
              const char* inc_name) const {
    if (inc < 1)
      fail(s_, errc::invalid_argument, "argument ", inc_name, ": ", inc,
           " expected >= 1 (negative and zero increments are not supported)");
    if (n <= 0) return;
    uint64_t need = 0;
    if (!sdk::vector_extent(n, inc, need) || need > t.size())
      fail(s_, errc::invalid_argument, "argument ", name, ": ", n, " elements with ", inc_name,
           " = ", inc, " need more than the ", t.size(), " elements of a tensor of shape ",
           shape_str(t), "; pass a larger tensor or a smaller n");
  }
  void result(const TensorStorage& t, const char* name) const {
    if (t.size() != 1)
      fail(s_, errc::invalid_argument, "argument ", name,
           ": expected a one-element tensor for the result, got shape ", shape_str(t));
  }
  void scalar(const Scalar& s, const char* name) const {
    if (!s.is_tensor()) return;
    const TensorStorage& t = *s.tensor();
    if (t.dtype() != dtype_)
      fail(s_, errc::invalid_argument, "argument ", name, ": a ", dtype_name(t.dtype()),
           " tensor expected ", dtype_name(dtype_), " (the op's dtype)");
    if (t.size() != 1)
      fail(s_, errc::invalid_argument, "argument ", name,
           ": a scalar tensor must have one element, got shape ", shape_str(t));
    written(t, name);
  }
  // Operands that must not share memory: the same tensor, or two tensors over overlapping
  // bytes of one imported buffer (TensorStorage::shares_memory_with).
  void distinct(const TensorStorage& a, const char* an, const TensorStorage& b,
                const char* bn) const {
    if (&a == &b)
      fail(s_, errc::invalid_argument, "argument ", an, ": is the same tensor as ", bn, "; ",
           s_.name, " needs distinct tensors (copy one first)");
    if (a.shares_memory_with(b)) [[unlikely]]
      fail(s_, errc::invalid_argument, "argument ", an, ": shares memory with ", bn,
           " (both are views of one imported buffer, and their bytes overlap); ", s_.name,
           " needs operands in distinct memory: copy one of them first");
  }
  // Vectors an elementwise op may update in place: one memory read and written with the same
  // increment is fine; any other sharing is refused as distinct() does.
  void in_place_or_distinct(const TensorStorage& x, const char* xn, int64_t incx,
                            const TensorStorage& y, const char* yn, int64_t incy) const {
    if (&x != &y && !x.shares_memory_with(y)) [[likely]]
      return;
    if (incx == incy && x.same_memory_as(y)) return;
    if (&x == &y)
      fail(s_, errc::invalid_argument, "argument ", xn, ": is the same tensor as ", yn,
           " with another increment (", incx, " and ", incy, "); ", s_.name,
           " runs in place only with equal increments: copy one first");
    fail(s_, errc::invalid_argument, "argument ", xn, ": shares memory with ", yn,
         " (both are views of one imported buffer, and their bytes overlap without being the "
         "same elements); ",
         s_.name, " needs them in distinct memory or exactly the same: copy one of them first");
  }
  void distinct(const Scalar& s, const char* sn, const TensorStorage& b, const char* bn) const {
    if (s.is_tensor()) distinct(*s.tensor(), sn, b, bn);
  }
  void rank(const TensorStorage& t, const char* name, size_t dims, const char* what) const {
    if (t.shape().size() != dims)
      fail(s_, errc::invalid_argument, "argument ", name, ": expected a ", dims, "-d tensor (",
           what, "), got shape ", shape_str(t));
  }
  // A row-major matrix: `rows` x `cols` as stored, leading dimension ld, inside tensor t.
  // `exact`: no sizes or ld were given, so the shape must be exactly rows x cols. The extent
  // (rows - 1) * ld + cols is computed without wrapping (sdk::matrix_extent, as in the decoder).
  template <class What>
  void matrix(const TensorStorage& t, const char* name, int64_t rows, int64_t cols, int64_t ld,
              const char* ld_name, bool exact, const What& what_fn) const {
    const auto what = [&] { return std::string(what_fn()); };
    if (t.shape().size() != 2)
      fail(s_, errc::invalid_argument, "argument ", name, ": expected a 2-d tensor (", what(),
           "), got shape ", shape_str(t));
    if (rows < 0 || cols < 0)
      fail(s_, errc::invalid_argument, "argument ", name, ": ", rows, " x ", cols,
           " has a negative extent (", what(), ")");
    if (exact && (t.shape()[0] != rows || t.shape()[1] != cols))
      fail(s_, errc::invalid_argument, "argument ", name, ": shape ", shape_str(t), " expected [",
           rows, ", ", cols, "] (", what(),
           "); fix the shape, or pass explicit sizes for a sub-matrix");
    if (ld < (cols > 1 ? cols : 1))
      fail(s_, errc::invalid_argument, "argument ", ld_name, ": ", ld, " is smaller than the ",
           cols, " columns ", name, " has as stored (", what(), "); pass ", ld_name,
           " >= ", (cols > 1 ? cols : 1));
    if (rows == 0 || cols == 0) return;
    uint64_t need = 0;
    if (!sdk::matrix_extent(rows, cols, ld, need) || need > t.size())
      fail(s_, errc::invalid_argument, "argument ", name, ": ", rows, " x ", cols, " with ",
           ld_name, " = ", ld, " needs more than the ", t.size(), " elements (", what(),
           ") of shape ", shape_str(t), "; pass a larger tensor or smaller sizes");
  }

  // `count` row-major matrices of `rows` x `cols` as stored, leading dimension ld, the i-th
  // starting at element i * stride of t (any rank: its elements in row-major order). The extent
  // (count - 1) * stride + (rows - 1) * ld + cols is computed without wrapping, as the bundles'
  // decoder does (sdk::strided_extent). `disjoint` (an output): with count > 1 the stride must
  // keep the matrices apart (at least one matrix's extent).
  template <class What>
  void matrices(const TensorStorage& t, const char* name, int64_t rows, int64_t cols, int64_t ld,
                const char* ld_name, int64_t stride, const char* stride_name, int64_t count,
                bool disjoint, const What& what_fn) const {
    const auto what = [&] { return std::string(what_fn()); };
    if (rows < 0 || cols < 0)
      fail(s_, errc::invalid_argument, "argument ", name, ": ", rows, " x ", cols,
           " has a negative extent (", what(), ")");
    if (ld < (cols > 1 ? cols : 1))
      fail(s_, errc::invalid_argument, "argument ", ld_name, ": ", ld, " is smaller than the ",
           cols, " columns ", name, " has as stored (", what(), "); pass ", ld_name,
           " >= ", (cols > 1 ? cols : 1));
    if (stride < 0)
      fail(s_, errc::invalid_argument, "argument ", stride_name, ": ", stride,
           " is negative; pass the element distance between consecutive matrices of ", name,
           " (0: one matrix for every product)");
    if (rows == 0 || cols == 0 || count <= 0) return;
    uint64_t one = 0, need = 0;
    if (!sdk::matrix_extent(rows, cols, ld, one) ||
        !sdk::strided_extent(count, stride, one, need) || need > t.size())
      fail(s_, errc::invalid_argument, "argument ", name, ": ", count, " matrices of ", rows, " x ",
           cols, " with ", ld_name, " = ", ld, " and ", stride_name, " = ", stride,
           " need more than the ", t.size(), " elements (", what(), ") of shape ", shape_str(t),
           "; pass a larger tensor, a smaller batch or smaller strides");
    if (disjoint && count > 1 && static_cast<uint64_t>(stride) < one)
      fail(s_, errc::invalid_argument, "argument ", stride_name, ": ", stride,
           " is smaller than the ", one, " elements one ", rows, " x ", cols, " matrix of ", name,
           " spans with ", ld_name, " = ", ld, ", so the outputs would overlap; pass ", stride_name,
           " >= ", one);
  }

private:
  [[noreturn]] [[gnu::noinline]] void
  unsupported_dtype(const char* first_name, std::initializer_list<pcy_dtype> allowed) const {
    std::string list;
    for (pcy_dtype d : allowed)
      list += (list.empty() ? "" : " or ") + std::string(dtype_name(d));
    fail(s_, errc::invalid_argument, "argument ", first_name, ": dtype ", dtype_name(dtype_),
         " is not supported; ", s_.name, " computes in ", list);
  }
  const pcy_op_schema& s_;
  pcy_dtype dtype_;
};

} // namespace parenchyma::ext
