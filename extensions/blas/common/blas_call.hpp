// BLAS bundles, shared part: decodes an op call's arguments (pcy_blas.h signatures) into plain
// structs and re-checks them, so a bundle called by any host (not only through blas.hpp) never
// reads or writes outside a tensor. Errors name the op and the argument.
#pragma once

#include <parenchyma/abi/ext/pcy_blas.h>
#include <parenchyma/sdk/bundle.hpp>

#include <cstdint>
#include <limits>

// The checks run on every op: inlined, so only their (cold) failure paths cost a call.
#if defined(__GNUC__)
#define PCY_BLAS_HOT [[gnu::always_inline]]
#else
#define PCY_BLAS_HOT
#endif

namespace parenchyma::blas_bundle {

using sdk::fail;
using sdk::str;

// Index arithmetic on sizes a host passes in: every product and sum is overflow-checked, so a
// bound check can never wrap modulo 2^64 into "fits".
PCY_BLAS_HOT inline bool mul_ok(uint64_t a, uint64_t b, uint64_t& out) noexcept {
  return !__builtin_mul_overflow(a, b, &out);
}
PCY_BLAS_HOT inline bool add_ok(uint64_t a, uint64_t b, uint64_t& out) noexcept {
  return !__builtin_add_overflow(a, b, &out);
}

// The element count of a tensor; a negative extent or a count beyond 2^64 is refused.
inline uint64_t elements(const pcy_tensor& t, const char* op = "blas",
                         const char* name = "tensor") {
  uint64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] < 0 || !mul_ok(n, static_cast<uint64_t>(t.shape[i]), n))
      fail(PCY_ERR_INVALID_ARGUMENT,
           str(op, ": argument ", name, " has extent ", t.shape[i], " in dimension ", i,
               ", which is negative or overflows the element count"));
  return n;
}

// A scalar slot: a host value, or a one-element tensor (then `tensor` is set).
struct scalar_arg {
  double value = 0;
  const pcy_tensor* tensor = nullptr;
  bool is_zero() const noexcept { return tensor == nullptr && value == 0; }
  bool is_one() const noexcept { return tensor == nullptr && value == 1; }
};

struct vec_arg {
  const pcy_tensor* t = nullptr;
  int64_t inc = 1;
};

// Every BLAS op decoded: unused fields keep their defaults.
struct blas_call {
  int64_t n = 0, m = 0, k = 0;
  bool ta = false, tb = false;
  scalar_arg alpha, beta;
  vec_arg x, y;
  const pcy_tensor* result = nullptr;
  const pcy_tensor *A = nullptr, *B = nullptr, *C = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

class decoder {
public:
  decoder(const char* op, const sdk::op_args& a, pcy_dtype dtype) : op_(op), a_(a), dtype_(dtype) {}

  PCY_BLAS_HOT int64_t count(uint32_t k, const char* name) const {
    const int64_t v = a_.i(k);
    if (v < 0) fail(PCY_ERR_INVALID_ARGUMENT, str(op_, ": argument ", name, " = ", v, " < 0"));
    return v;
  }
  PCY_BLAS_HOT bool flag(uint32_t k, const char* name) const {
    const int64_t v = a_.i(k);
    if (v != 0 && v != 1)
      fail(PCY_ERR_INVALID_ARGUMENT, str(op_, ": argument ", name, " = ", v, ", expected 0 or 1"));
    return v == 1;
  }
  PCY_BLAS_HOT const pcy_tensor& tensor(uint32_t k, const char* name) const {
    const pcy_tensor& t = a_.t(k);
    if (t.dtype != dtype_)
      fail(PCY_ERR_INVALID_ARGUMENT,
           str(op_, ": argument ", name, " has dtype ", sdk::dtype_name(t.dtype), ", expected ",
               sdk::dtype_name(dtype_)));
    if (t.strides != nullptr)
      fail(PCY_ERR_UNSUPPORTED,
           str(op_, ": argument ", name, " is strided; this bundle takes dense row-major tensors"));
    return t;
  }
  PCY_BLAS_HOT scalar_arg scalar(uint32_t k, const char* name) const {
    scalar_arg s;
    if (a_.is_tensor(k)) {
      s.tensor = &tensor(k, name);
      if (elements(*s.tensor, op_, name) != 1)
        fail(PCY_ERR_INVALID_ARGUMENT,
             str(op_, ": scalar argument ", name, " must be a one-element tensor"));
    } else {
      s.value = a_.f(k);
    }
    return s;
  }
  PCY_BLAS_HOT vec_arg vector(uint32_t tk, uint32_t ik, int64_t n, const char* name) const {
    vec_arg v{&tensor(tk, name), a_.i(ik)};
    if (v.inc < 1)
      fail(PCY_ERR_INVALID_ARGUMENT,
           str(op_, ": increment of ", name, " = ", v.inc, ", expected >= 1"));
    if (n == 0) return v;
    // 1 + (n - 1) * inc elements, computed without wrapping.
    const uint64_t have = elements(*v.t, op_, name);
    uint64_t need = 0;
    if (!mul_ok(static_cast<uint64_t>(n - 1), static_cast<uint64_t>(v.inc), need) ||
        !add_ok(need, 1, need) || need > have)
      fail(PCY_ERR_INVALID_ARGUMENT,
           str(op_, ": argument ", name, ": ", n, " elements with increment ", v.inc,
               " do not fit in ", name, " (", have, " elements)"));
    return v;
  }
  PCY_BLAS_HOT const pcy_tensor& result(uint32_t k) const {
    const pcy_tensor& t = tensor(k, "result");
    if (elements(t, op_, "result") != 1)
      fail(PCY_ERR_INVALID_ARGUMENT, str(op_, ": result must be a one-element tensor"));
    return t;
  }
  const pcy_tensor& matrix(uint32_t tk, int64_t rows, int64_t cols, int64_t ld, const char* name,
                           const char* ld_name) const {
    const pcy_tensor& t = tensor(tk, name);
    if (ld < (cols > 1 ? cols : 1))
      fail(PCY_ERR_INVALID_ARGUMENT, str(op_, ": argument ", ld_name, " = ", ld, " (of ", name,
                                         ") is smaller than its ", cols, " stored columns"));
    if (rows == 0 || cols == 0) return t;
    // (rows - 1) * ld + cols elements, computed without wrapping.
    const uint64_t have = elements(t, op_, name);
    uint64_t need = 0;
    if (!mul_ok(static_cast<uint64_t>(rows - 1), static_cast<uint64_t>(ld), need) ||
        !add_ok(need, static_cast<uint64_t>(cols), need) || need > have)
      fail(PCY_ERR_INVALID_ARGUMENT,
           str(op_, ": argument ", name, ": ", rows, " x ", cols, " with ", ld_name, " = ", ld,
               " does not fit in ", name, " (", have, " elements)"));
    return t;
  }

private:
  const char* op_;
  const sdk::op_args& a_;
  pcy_dtype dtype_;
};

// Argument layouts, in pcy_blas.h order.
inline blas_call decode_asum(const sdk::op_args& a, pcy_dtype d, const char* op = "asum") {
  decoder dc(op, a, d);
  blas_call c;
  c.n = dc.count(0, "n");
  c.x = dc.vector(1, 2, c.n, "x");
  c.result = &dc.result(3);
  return c;
}
inline blas_call decode_nrm2(const sdk::op_args& a, pcy_dtype d) {
  return decode_asum(a, d, "nrm2");
}
inline blas_call decode_axpy(const sdk::op_args& a, pcy_dtype d) {
  decoder dc("axpy", a, d);
  blas_call c;
  c.n = dc.count(0, "n");
  c.alpha = dc.scalar(1, "alpha");
  c.x = dc.vector(2, 3, c.n, "x");
  c.y = dc.vector(4, 5, c.n, "y");
  return c;
}
inline blas_call decode_axpby(const sdk::op_args& a, pcy_dtype d) {
  decoder dc("axpby", a, d);
  blas_call c;
  c.n = dc.count(0, "n");
  c.alpha = dc.scalar(1, "alpha");
  c.x = dc.vector(2, 3, c.n, "x");
  c.beta = dc.scalar(4, "beta");
  c.y = dc.vector(5, 6, c.n, "y");
  return c;
}
inline blas_call decode_copy(const sdk::op_args& a, pcy_dtype d, const char* op = "copy") {
  decoder dc(op, a, d);
  blas_call c;
  c.n = dc.count(0, "n");
  c.x = dc.vector(1, 2, c.n, "x");
  c.y = dc.vector(3, 4, c.n, "y");
  return c;
}
inline blas_call decode_swap(const sdk::op_args& a, pcy_dtype d) {
  return decode_copy(a, d, "swap");
}
inline blas_call decode_dot(const sdk::op_args& a, pcy_dtype d) {
  blas_call c = decode_copy(a, d, "dot");
  c.result = &decoder("dot", a, d).result(5);
  return c;
}
inline blas_call decode_scal(const sdk::op_args& a, pcy_dtype d) {
  decoder dc("scal", a, d);
  blas_call c;
  c.n = dc.count(0, "n");
  c.alpha = dc.scalar(1, "alpha");
  c.x = dc.vector(2, 3, c.n, "x");
  return c;
}
inline blas_call decode_gemv(const sdk::op_args& a, pcy_dtype d) {
  decoder dc("gemv", a, d);
  blas_call c;
  c.ta = dc.flag(0, "trans");
  c.m = dc.count(1, "m");
  c.n = dc.count(2, "n");
  c.alpha = dc.scalar(3, "alpha");
  c.lda = a.i(5);
  c.A = &dc.matrix(4, c.m, c.n, c.lda, "A", "lda");
  c.x = dc.vector(6, 7, c.ta ? c.m : c.n, "x");
  c.beta = dc.scalar(8, "beta");
  c.y = dc.vector(9, 10, c.ta ? c.n : c.m, "y");
  return c;
}
inline blas_call decode_gemm(const sdk::op_args& a, pcy_dtype d) {
  decoder dc("gemm", a, d);
  blas_call c;
  c.ta = dc.flag(0, "transa");
  c.tb = dc.flag(1, "transb");
  c.m = dc.count(2, "m");
  c.n = dc.count(3, "n");
  c.k = dc.count(4, "k");
  c.alpha = dc.scalar(5, "alpha");
  c.lda = a.i(7);
  c.A = &dc.matrix(6, c.ta ? c.k : c.m, c.ta ? c.m : c.k, c.lda, "A", "lda");
  c.ldb = a.i(9);
  c.B = &dc.matrix(8, c.tb ? c.n : c.k, c.tb ? c.k : c.n, c.ldb, "B", "ldb");
  c.beta = dc.scalar(10, "beta");
  c.ldc = a.i(12);
  c.C = &dc.matrix(11, c.m, c.n, c.ldc, "C", "ldc");
  return c;
}

// Vendor APIs index with 32-bit ints: refuse what does not fit instead of wrapping.
PCY_BLAS_HOT inline int to_int(int64_t v, const char* op, const char* name) {
  if (v > std::numeric_limits<int>::max())
    fail(PCY_ERR_UNSUPPORTED, str(op, ": ", name, " = ", v,
                                  " exceeds the 32-bit range of this implementation; split the "
                                  "operation into smaller parts"));
  return static_cast<int>(v);
}

} // namespace parenchyma::blas_bundle
