// Array bundle for the native framework: runs an array program (pcy_array.h) on the calling
// thread as a blocked vector interpreter. The index space is walked in chunks of up to `block`
// elements along its innermost (collapsed) dimension; each instruction runs over a whole chunk
// in a typed loop the compiler vectorises, with every register a chunk-sized buffer that stays
// in cache. A fused chain of k operations reads its inputs and writes its output once.
//
// Ops run on the calling thread after the framework queue has finished earlier work on it (as
// the other native bundles do).
#include "array_program.hpp"
#include "array_scalar.hpp"

// This file is built with -ffp-contract=off (CMakeLists.txt): the random core's functions may
// inline here (GCC inlines nothing across its optimize pragma).
#if defined(__GNUC__) && !defined(__clang__) && defined(PCY_ARRAY_NATIVE_NO_CONTRACTION)
#define PCY_RNG_BUILT_WITHOUT_CONTRACTION 1
#endif
#include <parenchyma/abi/ext/pcy_array_random.h>
#include <parenchyma/sdk/bundle.hpp>
#include <parenchyma/sdk/op_schema.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace {

using namespace parenchyma;
using namespace parenchyma::array_bundle;

constexpr int64_t block = 1024; // elements per chunk (registers of 8 KiB at 8 bytes)

// ---- kernels over a chunk ----------------------------------------------------------------------
using kernel_fn = void (*)(void* out, const void* a, const void* b, const void* c, int64_t n);

#define PCY_UNARY(NAME, EXPR)                                                                      \
  struct NAME {                                                                                    \
    template <class T> static T f(T x) noexcept { return EXPR; }                                   \
  };
#define PCY_BINARY(NAME, EXPR)                                                                     \
  struct NAME {                                                                                    \
    template <class T> static T f(T x, T y) noexcept { return EXPR; }                              \
  };

// Numbers (integers wrap through uint64_t).
struct op_neg {
  template <class T> static T f(T x) noexcept {
    if constexpr (std::is_integral_v<T>)
      return wrap<T>(0 - u(x));
    else
      return -x;
  }
};
struct op_abs {
  template <class T> static T f(T x) noexcept {
    if constexpr (std::is_unsigned_v<T>)
      return x;
    else if constexpr (std::is_integral_v<T>)
      return x < 0 ? wrap<T>(0 - u(x)) : x;
    else
      return std::fabs(x);
  }
};
struct op_sign {
  template <class T> static T f(T x) noexcept {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>((x > 0) - (x < 0));
    else
      return fsign(x);
  }
};
struct op_square {
  template <class T> static T f(T x) noexcept {
    if constexpr (std::is_integral_v<T>)
      return wrap<T>(u(x) * u(x));
    else
      return x * x;
  }
};
struct op_add {
  template <class T> static T f(T x, T y) noexcept {
    if constexpr (std::is_integral_v<T>)
      return wrap<T>(u(x) + u(y));
    else
      return x + y;
  }
};
struct op_sub {
  template <class T> static T f(T x, T y) noexcept {
    if constexpr (std::is_integral_v<T>)
      return wrap<T>(u(x) - u(y));
    else
      return x - y;
  }
};
struct op_mul {
  template <class T> static T f(T x, T y) noexcept {
    if constexpr (std::is_integral_v<T>)
      return wrap<T>(u(x) * u(y));
    else
      return x * y;
  }
};
struct op_floordiv {
  template <class T> static T f(T x, T y) noexcept {
    if constexpr (std::is_integral_v<T>)
      return int_floordiv(x, y);
    else {
      T q, m;
      npy_divmod(x, y, q, m);
      return q;
    }
  }
};
struct op_rem {
  template <class T> static T f(T x, T y) noexcept {
    if constexpr (std::is_integral_v<T>)
      return int_rem(x, y);
    else {
      T q, m;
      npy_divmod(x, y, q, m);
      return m;
    }
  }
};
struct op_pow {
  template <class T> static T f(T x, T y) noexcept {
    if constexpr (std::is_integral_v<T>)
      return int_pow(x, y);
    else
      return std::pow(x, y);
  }
};
struct op_minimum {
  template <class T> static T f(T x, T y) noexcept {
    if constexpr (std::is_integral_v<T>)
      return x <= y ? x : y;
    else
      return (x <= y || x != x) ? x : y;
  }
};
struct op_maximum {
  template <class T> static T f(T x, T y) noexcept {
    if constexpr (std::is_integral_v<T>)
      return x >= y ? x : y;
    else
      return (x >= y || x != x) ? x : y;
  }
};
// Floating only.
PCY_UNARY(op_exp, std::exp(x))
PCY_UNARY(op_expm1, std::expm1(x))
PCY_UNARY(op_log, std::log(x))
PCY_UNARY(op_log1p, std::log1p(x))
PCY_UNARY(op_log2, std::log2(x))
PCY_UNARY(op_log10, std::log10(x))
PCY_UNARY(op_sqrt, std::sqrt(x))
PCY_UNARY(op_rsqrt, T(1) / std::sqrt(x))
PCY_UNARY(op_sin, std::sin(x))
PCY_UNARY(op_cos, std::cos(x))
PCY_UNARY(op_tan, std::tan(x))
PCY_UNARY(op_asin, std::asin(x))
PCY_UNARY(op_acos, std::acos(x))
PCY_UNARY(op_atan, std::atan(x))
PCY_UNARY(op_sinh, std::sinh(x))
PCY_UNARY(op_cosh, std::cosh(x))
PCY_UNARY(op_tanh, std::tanh(x))
PCY_UNARY(op_asinh, std::asinh(x))
PCY_UNARY(op_acosh, std::acosh(x))
PCY_UNARY(op_atanh, std::atanh(x))
PCY_UNARY(op_erf, std::erf(x))
PCY_UNARY(op_floor, std::floor(x))
PCY_UNARY(op_ceil, std::ceil(x))
PCY_UNARY(op_round, std::nearbyint(x))
PCY_UNARY(op_trunc, std::trunc(x))
PCY_BINARY(op_div, x / y)
PCY_BINARY(op_atan2, std::atan2(x, y))
PCY_BINARY(op_copysign, std::copysign(x, y))
PCY_BINARY(op_nextafter, std::nextafter(x, y))
PCY_BINARY(op_hypot, std::hypot(x, y))
PCY_BINARY(op_logaddexp, npy_logaddexp(x, y))
// Integers and bool (bool registers hold 0 or 1 as uint8_t).
struct op_not {
  template <class T> static T f(T x) noexcept { return static_cast<T>(~x); }
};
struct op_lnot {
  template <class T> static T f(T x) noexcept { return static_cast<T>(x == 0 ? 1 : 0); }
};
PCY_BINARY(op_and, static_cast<T>(x& y))
PCY_BINARY(op_or, static_cast<T>(x | y))
PCY_BINARY(op_xor, static_cast<T>(x ^ y))
PCY_BINARY(op_shl, int_shl(x, y))
PCY_BINARY(op_shr, int_shr(x, y))
#undef PCY_UNARY
#undef PCY_BINARY

// Registers of bool hold uint8_t; others their C type.
template <int D> using reg_t = std::conditional_t<D == PCY_DTYPE_BOOL, uint8_t, ctype<D>>;

template <class Op, class T>
void k_unary(void* o, const void* a, const void*, const void*, int64_t n) {
  T* out = static_cast<T*>(o);
  const T* x = static_cast<const T*>(a);
  for (int64_t i = 0; i < n; ++i)
    out[i] = Op::f(x[i]);
}
template <class Op, class T>
void k_binary(void* o, const void* a, const void* b, const void*, int64_t n) {
  T* out = static_cast<T*>(o);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i)
    out[i] = Op::f(x[i], y[i]);
}
template <class T> void k_where(void* o, const void* a, const void* b, const void* c, int64_t n) {
  T* out = static_cast<T*>(o);
  const uint8_t* m = static_cast<const uint8_t*>(a);
  const T* x = static_cast<const T*>(b);
  const T* y = static_cast<const T*>(c);
  for (int64_t i = 0; i < n; ++i)
    out[i] = m[i] ? x[i] : y[i];
}
template <int Cmp, class T>
void k_compare(void* o, const void* a, const void* b, const void*, int64_t n) {
  uint8_t* out = static_cast<uint8_t*>(o);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) {
    bool r;
    if constexpr (Cmp == PCY_ARRAY_OP_EQ)
      r = x[i] == y[i];
    else if constexpr (Cmp == PCY_ARRAY_OP_NE)
      r = x[i] != y[i];
    else if constexpr (Cmp == PCY_ARRAY_OP_LT)
      r = x[i] < y[i];
    else if constexpr (Cmp == PCY_ARRAY_OP_LE)
      r = x[i] <= y[i];
    else if constexpr (Cmp == PCY_ARRAY_OP_GT)
      r = x[i] > y[i];
    else
      r = x[i] >= y[i];
    out[i] = r ? 1 : 0;
  }
}
template <int Pred, class T>
void k_pred(void* o, const void* a, const void*, const void*, int64_t n) {
  uint8_t* out = static_cast<uint8_t*>(o);
  const T* x = static_cast<const T*>(a);
  for (int64_t i = 0; i < n; ++i) {
    bool r;
    if constexpr (Pred == PCY_ARRAY_OP_ISNAN)
      r = std::isnan(x[i]);
    else if constexpr (Pred == PCY_ARRAY_OP_ISINF)
      r = std::isinf(x[i]);
    else
      r = std::isfinite(x[i]);
    out[i] = r ? 1 : 0;
  }
}
// Casts between storage types; bool registers (uint8_t 0/1) as bool8.
template <int D> using cast_t = std::conditional_t<D == PCY_DTYPE_BOOL, bool8, ctype<D>>;
template <int From, int To>
void k_cast(void* o, const void* a, const void*, const void*, int64_t n) {
  using F = cast_t<From>;
  using T = cast_t<To>;
  static_assert(sizeof(F) == sizeof(reg_t<From>) && sizeof(T) == sizeof(reg_t<To>));
  const F* x = static_cast<const F*>(a);
  T* out = static_cast<T*>(o);
  for (int64_t i = 0; i < n; ++i)
    out[i] = cast<T>(x[i]);
}

// ---- glibc's vector math (libmvec) on x86-64 with AVX2 and FMA --------------------------------
// The transcendental functions dominate a chain's time when computed one element at a time
// (glibc's sinf: about 8 ns). libmvec computes 8 floats or 4 doubles per call (within 4 ulp, as
// glibc documents), special values as the scalar functions. Picked once at start-up by the CPU's
// features; elsewhere the scalar loops above run.
#if defined(__x86_64__) && defined(__GLIBC__) && defined(PCY_ARRAY_LIBMVEC)
#include <immintrin.h>
extern "C" {
#define PCY_MVEC_DECL(fn)                                                                          \
  __m256 _ZGVdN8v_##fn##f(__m256);                                                                 \
  __m256d _ZGVdN4v_##fn(__m256d);
#define PCY_MVEC_DECL2(fn)                                                                         \
  __m256 _ZGVdN8vv_##fn##f(__m256, __m256);                                                        \
  __m256d _ZGVdN4vv_##fn(__m256d, __m256d);
#define PCY_MVEC_UNARY(X)                                                                          \
  X(exp)                                                                                           \
  X(expm1)                                                                                         \
  X(log)                                                                                           \
  X(log1p)                                                                                         \
  X(log2)                                                                                          \
  X(log10)                                                                                         \
  X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) X(sinh) X(cosh) X(tanh) X(asinh) X(acosh) X(atanh)  \
      X(erf)
PCY_MVEC_UNARY(PCY_MVEC_DECL)
PCY_MVEC_DECL2(atan2)
PCY_MVEC_DECL2(hypot)
PCY_MVEC_DECL2(pow)
}
#define PCY_MVEC_KERNEL(fn)                                                                        \
  __attribute__((target("avx2,fma"))) void mv_##fn##_f32(void* o, const void* a, const void*,      \
                                                         const void*, int64_t n) {                 \
    float* out = static_cast<float*>(o);                                                           \
    const float* x = static_cast<const float*>(a);                                                 \
    int64_t i = 0;                                                                                 \
    for (; i + 8 <= n; i += 8)                                                                     \
      _mm256_storeu_ps(out + i, _ZGVdN8v_##fn##f(_mm256_loadu_ps(x + i)));                         \
    for (; i < n; ++i)                                                                             \
      out[i] = std::fn(x[i]);                                                                      \
  }                                                                                                \
  __attribute__((target("avx2,fma"))) void mv_##fn##_f64(void* o, const void* a, const void*,      \
                                                         const void*, int64_t n) {                 \
    double* out = static_cast<double*>(o);                                                         \
    const double* x = static_cast<const double*>(a);                                               \
    int64_t i = 0;                                                                                 \
    for (; i + 4 <= n; i += 4)                                                                     \
      _mm256_storeu_pd(out + i, _ZGVdN4v_##fn(_mm256_loadu_pd(x + i)));                            \
    for (; i < n; ++i)                                                                             \
      out[i] = std::fn(x[i]);                                                                      \
  }
#define PCY_MVEC_KERNEL2(fn)                                                                       \
  __attribute__((target("avx2,fma"))) void mv_##fn##_f32(void* o, const void* a, const void* b,    \
                                                         const void*, int64_t n) {                 \
    float* out = static_cast<float*>(o);                                                           \
    const float* x = static_cast<const float*>(a);                                                 \
    const float* y = static_cast<const float*>(b);                                                 \
    int64_t i = 0;                                                                                 \
    for (; i + 8 <= n; i += 8)                                                                     \
      _mm256_storeu_ps(out + i,                                                                    \
                       _ZGVdN8vv_##fn##f(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));         \
    for (; i < n; ++i)                                                                             \
      out[i] = std::fn(x[i], y[i]);                                                                \
  }                                                                                                \
  __attribute__((target("avx2,fma"))) void mv_##fn##_f64(void* o, const void* a, const void* b,    \
                                                         const void*, int64_t n) {                 \
    double* out = static_cast<double*>(o);                                                         \
    const double* x = static_cast<const double*>(a);                                               \
    const double* y = static_cast<const double*>(b);                                               \
    int64_t i = 0;                                                                                 \
    for (; i + 4 <= n; i += 4)                                                                     \
      _mm256_storeu_pd(out + i, _ZGVdN4vv_##fn(_mm256_loadu_pd(x + i), _mm256_loadu_pd(y + i)));   \
    for (; i < n; ++i)                                                                             \
      out[i] = std::fn(x[i], y[i]);                                                                \
  }
PCY_MVEC_UNARY(PCY_MVEC_KERNEL)
PCY_MVEC_KERNEL2(atan2)
PCY_MVEC_KERNEL2(hypot)
PCY_MVEC_KERNEL2(pow)
bool use_libmvec() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          std::getenv("PARENCHYMA_ARRAY_NO_LIBMVEC") == nullptr;
  return yes;
}
constexpr const char* math_impl = "libmvec (AVX2) where the CPU has it, glibc otherwise";
#else
constexpr const char* math_impl = "glibc";
#endif

// ---- the dispatch tables, filled once --------------------------------------------------------
constexpr int n_dtypes = 11; // pcy_dtype values 1..10
constexpr int n_ops = PCY_ARRAY_OP_END;

struct tables {
  kernel_fn op[n_ops][n_dtypes] = {}; // by op and operand dtype
  kernel_fn cast[n_dtypes][n_dtypes] = {};

  template <int D> void numbers() {
    using T = reg_t<D>;
    op[PCY_ARRAY_OP_NEG][D] = k_unary<op_neg, T>;
    op[PCY_ARRAY_OP_ABS][D] = k_unary<op_abs, T>;
    op[PCY_ARRAY_OP_SIGN][D] = k_unary<op_sign, T>;
    op[PCY_ARRAY_OP_SQUARE][D] = k_unary<op_square, T>;
    op[PCY_ARRAY_OP_ADD][D] = k_binary<op_add, T>;
    op[PCY_ARRAY_OP_SUB][D] = k_binary<op_sub, T>;
    op[PCY_ARRAY_OP_MUL][D] = k_binary<op_mul, T>;
    op[PCY_ARRAY_OP_FLOORDIV][D] = k_binary<op_floordiv, T>;
    op[PCY_ARRAY_OP_REM][D] = k_binary<op_rem, T>;
    op[PCY_ARRAY_OP_POW][D] = k_binary<op_pow, T>;
    op[PCY_ARRAY_OP_MINIMUM][D] = k_binary<op_minimum, T>;
    op[PCY_ARRAY_OP_MAXIMUM][D] = k_binary<op_maximum, T>;
  }
  template <int D> void arith() { // numbers and bool
    using T = reg_t<D>;
    op[PCY_ARRAY_OP_WHERE][D] = k_where<T>;
    op[PCY_ARRAY_OP_EQ][D] = k_compare<PCY_ARRAY_OP_EQ, T>;
    op[PCY_ARRAY_OP_NE][D] = k_compare<PCY_ARRAY_OP_NE, T>;
    op[PCY_ARRAY_OP_LT][D] = k_compare<PCY_ARRAY_OP_LT, T>;
    op[PCY_ARRAY_OP_LE][D] = k_compare<PCY_ARRAY_OP_LE, T>;
    op[PCY_ARRAY_OP_GT][D] = k_compare<PCY_ARRAY_OP_GT, T>;
    op[PCY_ARRAY_OP_GE][D] = k_compare<PCY_ARRAY_OP_GE, T>;
  }
  template <int D> void floats() {
    using T = reg_t<D>;
#define PCY_F1(OP, K) op[PCY_ARRAY_OP_##OP][D] = k_unary<K, T>;
#define PCY_F2(OP, K) op[PCY_ARRAY_OP_##OP][D] = k_binary<K, T>;
    PCY_F1(EXP, op_exp)
    PCY_F1(EXPM1, op_expm1)
    PCY_F1(LOG, op_log)
    PCY_F1(LOG1P, op_log1p)
    PCY_F1(LOG2, op_log2)
    PCY_F1(LOG10, op_log10)
    PCY_F1(SQRT, op_sqrt) PCY_F1(RSQRT, op_rsqrt) PCY_F1(SIN, op_sin) PCY_F1(COS, op_cos)
        PCY_F1(TAN, op_tan) PCY_F1(ASIN, op_asin) PCY_F1(ACOS, op_acos) PCY_F1(ATAN, op_atan)
            PCY_F1(SINH, op_sinh) PCY_F1(COSH, op_cosh) PCY_F1(TANH, op_tanh)
                PCY_F1(ASINH, op_asinh) PCY_F1(ACOSH, op_acosh) PCY_F1(ATANH, op_atanh)
                    PCY_F1(ERF, op_erf) PCY_F1(FLOOR, op_floor) PCY_F1(CEIL, op_ceil)
                        PCY_F1(ROUND, op_round) PCY_F1(TRUNC, op_trunc) PCY_F2(DIV, op_div)
                            PCY_F2(ATAN2, op_atan2) PCY_F2(COPYSIGN, op_copysign)
                                PCY_F2(NEXTAFTER, op_nextafter) PCY_F2(HYPOT, op_hypot)
                                    PCY_F2(LOGADDEXP, op_logaddexp)
#undef PCY_F1
#undef PCY_F2
                                        op[PCY_ARRAY_OP_ISNAN][D] = k_pred<PCY_ARRAY_OP_ISNAN, T>;
    op[PCY_ARRAY_OP_ISINF][D] = k_pred<PCY_ARRAY_OP_ISINF, T>;
    op[PCY_ARRAY_OP_ISFINITE][D] = k_pred<PCY_ARRAY_OP_ISFINITE, T>;
  }
  template <int D> void ints() {
    using T = reg_t<D>;
    op[PCY_ARRAY_OP_NOT][D] = k_unary<op_not, T>;
    op[PCY_ARRAY_OP_AND][D] = k_binary<op_and, T>;
    op[PCY_ARRAY_OP_OR][D] = k_binary<op_or, T>;
    op[PCY_ARRAY_OP_XOR][D] = k_binary<op_xor, T>;
    op[PCY_ARRAY_OP_SHL][D] = k_binary<op_shl, T>;
    op[PCY_ARRAY_OP_SHR][D] = k_binary<op_shr, T>;
  }
  template <int From, int... To> void casts_from() { ((cast[From][To] = k_cast<From, To>), ...); }
  template <int... D> void casts() { (casts_from<D, D...>(), ...); }

  tables() {
    numbers<PCY_DTYPE_F32>();
    numbers<PCY_DTYPE_F64>();
    numbers<PCY_DTYPE_I8>();
    numbers<PCY_DTYPE_I16>();
    numbers<PCY_DTYPE_I32>();
    numbers<PCY_DTYPE_I64>();
    numbers<PCY_DTYPE_U8>();
    arith<PCY_DTYPE_F32>();
    arith<PCY_DTYPE_F64>();
    arith<PCY_DTYPE_I8>();
    arith<PCY_DTYPE_I16>();
    arith<PCY_DTYPE_I32>();
    arith<PCY_DTYPE_I64>();
    arith<PCY_DTYPE_U8>();
    arith<PCY_DTYPE_BOOL>();
    floats<PCY_DTYPE_F32>();
    floats<PCY_DTYPE_F64>();
    ints<PCY_DTYPE_I8>();
    ints<PCY_DTYPE_I16>();
    ints<PCY_DTYPE_I32>();
    ints<PCY_DTYPE_I64>();
    ints<PCY_DTYPE_U8>();
    using B = uint8_t;
    op[PCY_ARRAY_OP_NOT][PCY_DTYPE_BOOL] = k_unary<op_lnot, B>;
    op[PCY_ARRAY_OP_AND][PCY_DTYPE_BOOL] = k_binary<op_and, B>;
    op[PCY_ARRAY_OP_OR][PCY_DTYPE_BOOL] = k_binary<op_or, B>;
    op[PCY_ARRAY_OP_XOR][PCY_DTYPE_BOOL] = k_binary<op_xor, B>;
    op[PCY_ARRAY_OP_WHERE][PCY_DTYPE_F16] = k_where<uint16_t>;
    op[PCY_ARRAY_OP_WHERE][PCY_DTYPE_BF16] = k_where<uint16_t>;
#if defined(__x86_64__) && defined(__GLIBC__) && defined(PCY_ARRAY_LIBMVEC)
    if (use_libmvec()) {
#define PCY_MVEC_SET(fn, OP)                                                                       \
  op[PCY_ARRAY_OP_##OP][PCY_DTYPE_F32] = mv_##fn##_f32;                                            \
  op[PCY_ARRAY_OP_##OP][PCY_DTYPE_F64] = mv_##fn##_f64;
      PCY_MVEC_SET(exp, EXP)
      PCY_MVEC_SET(expm1, EXPM1)
      PCY_MVEC_SET(log, LOG)
      PCY_MVEC_SET(log1p, LOG1P)
      PCY_MVEC_SET(log2, LOG2)
      PCY_MVEC_SET(log10, LOG10)
      PCY_MVEC_SET(sin, SIN) PCY_MVEC_SET(cos, COS) PCY_MVEC_SET(tan, TAN) PCY_MVEC_SET(asin, ASIN)
          PCY_MVEC_SET(acos, ACOS) PCY_MVEC_SET(atan, ATAN) PCY_MVEC_SET(sinh, SINH)
              PCY_MVEC_SET(cosh, COSH) PCY_MVEC_SET(tanh, TANH) PCY_MVEC_SET(asinh, ASINH)
                  PCY_MVEC_SET(acosh, ACOSH) PCY_MVEC_SET(atanh, ATANH) PCY_MVEC_SET(erf, ERF)
                      PCY_MVEC_SET(atan2, ATAN2) PCY_MVEC_SET(hypot, HYPOT) PCY_MVEC_SET(pow, POW)
#undef PCY_MVEC_SET
    }
#endif
    casts<PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I32, PCY_DTYPE_I64, PCY_DTYPE_U8, PCY_DTYPE_F16,
          PCY_DTYPE_BF16, PCY_DTYPE_I8, PCY_DTYPE_I16, PCY_DTYPE_BOOL>();
  }
};
const tables& table() {
  static const tables t;
  return t;
}

// ---- loads and stores ------------------------------------------------------------------------
// n elements of dtype size `es` from p with stride s (elements) into a register; bool bytes are
// normalised to 0/1.
template <class T> void gather_t(T* out, const T* p, int64_t s, int64_t n) {
  if (s == 1)
    std::memcpy(out, p, static_cast<size_t>(n) * sizeof(T));
  else if (s == 0)
    std::fill(out, out + n, *p);
  else
    for (int64_t i = 0; i < n; ++i)
      out[i] = p[i * s];
}
void load(void* out, const char* base, int dtype, int64_t s, int64_t n) {
  switch (sdk::dtype_size(static_cast<pcy_dtype>(dtype))) {
  case 1: gather_t(static_cast<uint8_t*>(out), reinterpret_cast<const uint8_t*>(base), s, n); break;
  case 2:
    gather_t(static_cast<uint16_t*>(out), reinterpret_cast<const uint16_t*>(base), s, n);
    break;
  case 4:
    gather_t(static_cast<uint32_t*>(out), reinterpret_cast<const uint32_t*>(base), s, n);
    break;
  default:
    gather_t(static_cast<uint64_t*>(out), reinterpret_cast<const uint64_t*>(base), s, n);
    break;
  }
  if (dtype == PCY_DTYPE_BOOL) {
    uint8_t* b = static_cast<uint8_t*>(out);
    for (int64_t i = 0; i < n; ++i)
      b[i] = b[i] != 0 ? 1 : 0;
  }
}
template <class T> void scatter_t(T* p, const T* in, int64_t s, int64_t n) {
  if (s == 1) {
    if (p != in) std::memcpy(p, in, static_cast<size_t>(n) * sizeof(T)); // p == in: a LOAD
  } else {
    for (int64_t i = 0; i < n; ++i)
      p[i * s] = in[i]; // s == 0: the last one wins (rank 0 only)
  }
}
void store(char* base, const void* in, size_t es, int64_t s, int64_t n) {
  switch (es) {
  case 1: scatter_t(reinterpret_cast<uint8_t*>(base), static_cast<const uint8_t*>(in), s, n); break;
  case 2:
    scatter_t(reinterpret_cast<uint16_t*>(base), static_cast<const uint16_t*>(in), s, n);
    break;
  case 4:
    scatter_t(reinterpret_cast<uint32_t*>(base), static_cast<const uint32_t*>(in), s, n);
    break;
  default:
    scatter_t(reinterpret_cast<uint64_t*>(base), static_cast<const uint64_t*>(in), s, n);
    break;
  }
}
template <class T> void fill_const(void* out, T v, int64_t n) {
  std::fill(static_cast<T*>(out), static_cast<T*>(out) + n, v);
}
void constant(void* out, int dtype, int64_t word, int64_t n) {
  double f;
  std::memcpy(&f, &word, sizeof f);
  switch (dtype) {
  case PCY_DTYPE_F32: fill_const(out, static_cast<float>(f), n); break;
  case PCY_DTYPE_F64: fill_const(out, f, n); break;
  case PCY_DTYPE_I8: fill_const(out, static_cast<int8_t>(word), n); break;
  case PCY_DTYPE_I16: fill_const(out, static_cast<int16_t>(word), n); break;
  case PCY_DTYPE_I32: fill_const(out, static_cast<int32_t>(word), n); break;
  case PCY_DTYPE_I64: fill_const(out, word, n); break;
  case PCY_DTYPE_U8: fill_const(out, static_cast<uint8_t>(word), n); break;
  case PCY_DTYPE_BOOL: fill_const(out, static_cast<uint8_t>(word != 0 ? 1 : 0), n); break;
  default: break; // refused by the decoder
  }
}

// ---- the interpreter --------------------------------------------------------------------------
// What a runner derives from its program alone: the collapsed index space and each instruction's
// kernel (kept with the context's last eval program, which repeats).
struct plan {
  collapsed c;
  std::array<kernel_fn, max_instructions> fn; // [0, count) set by plan_into
};
inline void plan_into(const program& p, plan& out) {
  out.c = collapse(p);
  const tables& tb = table();
  for (int k = 0; k < p.count; ++k) {
    const instruction& in = p.code[static_cast<size_t>(k)];
    const int src = op_operands(in.op) > 0 ? p.code[static_cast<size_t>(in.a)].dtype : 0;
    kernel_fn& f = out.fn[static_cast<size_t>(k)];
    f = nullptr;
    if (in.op == PCY_ARRAY_OP_CAST)
      f = tb.cast[src][in.dtype];
    else if (in.op == PCY_ARRAY_OP_WHERE)
      f = tb.op[in.op][in.dtype];
    else if (op_operands(in.op) > 0)
      f = tb.op[in.op][src];
    if (op_operands(in.op) > 0 && f == nullptr)
      sdk::fail(PCY_ERR_INTERNAL, sdk::str("array_native: no kernel for instruction ", k));
  }
}

// A small program's one-chunk form: one output, no INDEX, GATHER or STORE, and an index space
// that collapses to at most one dimension of at most one block, so every call runs the whole
// space as one chunk of the same n elements. Its registers are the memo's own (count * n words,
// the constants filled once when planned); a call binds the operands' memory, runs the LOADs and
// the computing instructions (the same kernels in the same order as the blocked walk: the same
// bits) and stores. A LOAD reads in place where its stride is 1 or n is 1 (not bool, which is
// normalised): with one output nothing is stored before every instruction has run.
struct one_chunk_step {
  kernel_fn fn;          // nullptr: a LOAD
  void* out;             // the register (fn and a copying LOAD)
  int32_t k;             // the instruction
  int32_t a, b, c;       // fn: registers; LOAD: a is the operand
  int32_t dtype;         // LOAD
  bool in_place = false; // LOAD: the register is the operand's memory
};
struct one_chunk {
  bool on = false;
  int64_t n = 0;
  std::array<int64_t, max_operands> stride{}, offset{}; // elements
  std::array<size_t, max_operands> es{};
  std::vector<one_chunk_step> steps; // the instructions but the constants
  std::vector<uint64_t> regs;
  std::array<const void*, max_instructions> rp; // each register's values
};

// The last eval program of a context, decoded: a steady loop sends the same words over tensors
// of the same views call after call (the same tensors, or new ones of the same shape: a new
// array each call), and a call whose key (call_key: words, operand dtypes, shapes, byte offsets
// and which operands share memory) equals the last one's passed every check before and gets
// the same plan, so only its tensor pointers are rebound. One per context: the host serialises
// a context's ops.
struct eval_memo {
  call_key key;
  program p;
  plan pl; // p's, once planned
  one_chunk one; // p's one-chunk form, where it has one
  bool planned = false;
};

struct native_context {
  const pcy_framework_api* fw = nullptr;
  std::vector<uint64_t> regs; // count * block words, grown once per program size
  std::vector<uint64_t> acc;  // reduce accumulators (block entries of up to 16 bytes)
  eval_memo memo;
  void settle(pcy_queue q) const { sdk::check(fw->queue_finish(q)); }
};

// One program bound to its tensors, walked over a collapsed index space.
struct runner {
  const program& p;
  std::array<char*, max_operands> base{};
  std::array<size_t, max_operands> es{};
  uint64_t* regs = nullptr;
  std::optional<plan> own_; // the plan, when none was given
  const plan& pl;
  const collapsed& c;
  const std::array<kernel_fn, max_instructions>& fn;
  std::array<const void*, max_instructions> rp; // each register's values for the chunk

  runner(native_context& cx, const program& prog, const plan* given = nullptr)
      : p(prog), pl(pick(own_, prog, given)), c(pl.c), fn(pl.fn) {
    for (int o = 0; o < p.operands; ++o) {
      const pcy_tensor& t = *p.ops[static_cast<size_t>(o)].tensor;
      base[static_cast<size_t>(o)] = static_cast<char*>(sdk::native_of(*cx.fw, t)) + t.byte_offset;
      es[static_cast<size_t>(o)] = sdk::dtype_size(t.dtype);
    }
    const size_t words = static_cast<size_t>(p.count) * block;
    if (cx.regs.size() < words) cx.regs.resize(words);
    regs = cx.regs.data();
  }
  static const plan& pick(std::optional<plan>& own, const program& prog, const plan* given) {
    if (given != nullptr) return *given;
    own.emplace();
    plan_into(prog, *own);
    return *own;
  }
  void* reg(int64_t k) const { return regs + static_cast<size_t>(k) * block; }

  // Evaluates the program for n elements starting at index `idx` (collapsed dimensions) and
  // walking dimension `inner`; `off` holds each operand's element offset at idx. Returns the
  // value's register.
  const void* chunk(const int64_t* idx, int inner, int64_t n, const int64_t* off) {
    for (int k = 0; k < p.count; ++k) {
      const instruction& in = p.code[static_cast<size_t>(k)];
      void* out = reg(k);
      rp[static_cast<size_t>(k)] = out;
      switch (in.op) {
      case PCY_ARRAY_OP_LOAD: {
        const size_t o = static_cast<size_t>(in.a);
        const char* src = base[o] + off[o] * static_cast<int64_t>(es[o]);
        const int64_t s = inner >= 0 ? c.strides[o][static_cast<size_t>(inner)] : 0;
        // Read in place (no copy), unless several outputs are stored one after another: then a
        // store may overwrite what a later one still reads (in-place updates), so every value
        // is in a register before the first store.
        if (s == 1 && in.dtype != PCY_DTYPE_BOOL && p.outputs == 1)
          rp[static_cast<size_t>(k)] = src;
        else
          load(out, src, in.dtype, s, n);
        break;
      }
      case PCY_ARRAY_OP_CONST: constant(out, in.dtype, in.a, n); break;
      case PCY_ARRAY_OP_INDEX: {
        int64_t* v = static_cast<int64_t*>(out);
        const int64_t i0 = idx[in.a];
        if (in.a == inner)
          for (int64_t i = 0; i < n; ++i)
            v[i] = i0 + i;
        else
          std::fill(v, v + n, i0);
        break;
      }
      case PCY_ARRAY_OP_GATHER: gather(in, out, idx, inner, n, off); break;
      case PCY_ARRAY_OP_STORE: rp[static_cast<size_t>(k)] = rp[static_cast<size_t>(in.b)]; break;
      default:
        fn[static_cast<size_t>(k)](out, rp[static_cast<size_t>(in.a)],
                                   rp[static_cast<size_t>(in.b)], rp[static_cast<size_t>(in.c)], n);
        break;
      }
    }
    return rp[static_cast<size_t>(p.count - 1)];
  }

  void gather(const instruction& in, void* out, const int64_t* idx, int inner, int64_t n,
              const int64_t* off) const {
    const size_t o = static_cast<size_t>(in.a);
    const int d = static_cast<int>(in.c);
    const int64_t sd = c.strides[o][static_cast<size_t>(d)];
    const int64_t si = inner >= 0 ? c.strides[o][static_cast<size_t>(inner)] : 0;
    const int64_t* g = static_cast<const int64_t*>(rp[static_cast<size_t>(in.b)]);
    const size_t e = es[o];
    char* dst = static_cast<char*>(out);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t own = d == inner ? idx[d] + i : idx[d];
      const int64_t j = std::clamp<int64_t>(g[i], 0, in.extent - 1);
      const int64_t at = off[o] + i * si - own * sd + j * sd;
      std::memcpy(dst + static_cast<size_t>(i) * e, base[o] + at * static_cast<int64_t>(e), e);
    }
    if (in.dtype == PCY_DTYPE_BOOL)
      for (int64_t i = 0; i < n; ++i)
        dst[i] = dst[i] != 0 ? 1 : 0;
  }

  // Calls body(idx, off) for every index of dimensions [from, to) in row-major order (the
  // others held at idx's values), with the operands' offsets.
  template <class F> void walk(int from, int to, int64_t* idx, int64_t* off, F&& body) {
    if (from >= to) {
      body();
      return;
    }
    for (int d = from; d < to; ++d)
      if (c.shape[static_cast<size_t>(d)] == 0) return;
    for (;;) {
      body();
      int d = to - 1;
      for (; d >= from; --d) {
        const size_t ud = static_cast<size_t>(d);
        if (++idx[d] < c.shape[ud]) {
          for (int o = 0; o < p.operands; ++o)
            off[o] += c.strides[static_cast<size_t>(o)][ud];
          break;
        }
        for (int o = 0; o < p.operands; ++o)
          off[o] -= (c.shape[ud] - 1) * c.strides[static_cast<size_t>(o)][ud];
        idx[d] = 0;
      }
      if (d < from) return;
    }
  }
};

// ---- eval ---------------------------------------------------------------------------------------
void run_eval(native_context& cx, const program& p, const plan* given = nullptr) {
  if (p.elements == 0) return;
  runner r(cx, p, given);
  std::array<int64_t, max_rank> idx{};
  std::array<int64_t, max_operands> off{};
  for (int o = 0; o < p.operands; ++o)
    off[static_cast<size_t>(o)] = r.c.offset[static_cast<size_t>(o)];
  const int inner = r.c.rank - 1;
  const int64_t len = inner >= 0 ? r.c.shape[static_cast<size_t>(inner)] : 1;
  const int64_t s_out = inner >= 0 ? r.c.strides[0][static_cast<size_t>(inner)] : 0;
  r.walk(0, inner < 0 ? 0 : inner, idx.data(), off.data(), [&] {
    std::array<int64_t, max_operands> o2 = off;
    for (int64_t j = 0; j < len; j += block) {
      const int64_t n = std::min(block, len - j);
      if (inner >= 0) idx[static_cast<size_t>(inner)] = j;
      const void* v = r.chunk(idx.data(), inner, n, o2.data());
      // The further outputs' STOREs first: output 0 may be an input of theirs' (in place).
      for (int k = 0; p.outputs > 1 && k < p.count; ++k) {
        const instruction& in = p.code[static_cast<size_t>(k)];
        if (in.op != PCY_ARRAY_OP_STORE) continue;
        const size_t o = static_cast<size_t>(in.a);
        store(r.base[o] + o2[o] * static_cast<int64_t>(r.es[o]), r.rp[static_cast<size_t>(k)],
              r.es[o], inner >= 0 ? r.c.strides[o][static_cast<size_t>(inner)] : 0, n);
      }
      store(r.base[0] + o2[0] * static_cast<int64_t>(r.es[0]), v, r.es[0], s_out, n);
      for (int o = 0; o < p.operands; ++o)
        o2[static_cast<size_t>(o)] +=
            n * (inner >= 0 ? r.c.strides[static_cast<size_t>(o)][static_cast<size_t>(inner)] : 0);
    }
    if (inner >= 0) idx[static_cast<size_t>(inner)] = 0;
  });
}

// ---- reduce -----------------------------------------------------------------------------------
// Accumulation of one kind for value type T. Each output keeps (a, b, i): the running value(s)
// and, for arg kinds, the index.
template <class T> struct acc_t {
  T a;
  T b;
  int64_t i;
};

// The maximum (or minimum) of n values in 8 independent lanes, NaN propagating (maximum's rule).
// maximum/minimum as two selects (vectorised): the same values as op_maximum/op_minimum.
template <class T> inline T sel_max(T a, T b) noexcept {
  T r = a >= b ? a : b;
  if constexpr (std::is_floating_point_v<T>) r = a != a ? a : r;
  return r;
}
template <class T> inline T sel_min(T a, T b) noexcept {
  T r = a <= b ? a : b;
  if constexpr (std::is_floating_point_v<T>) r = a != a ? a : r;
  return r;
}
// In 16-byte vectors of lanes (the x86-64 baseline) (GCC's vector extension: the selects vectorise,
// the lanes are combined at the end), NaN propagating.
template <class T> T extreme(const T* v, int64_t n, bool max) {
  constexpr int L = static_cast<int>(16 / sizeof(T)), A = 4; // 4 independent accumulators
  if (n < 2 * A * L) {
    T m = v[0];
    for (int64_t i = 1; i < n; ++i)
      m = max ? sel_max(m, v[i]) : sel_min(m, v[i]);
    return m;
  }
  typedef T vec __attribute__((vector_size(16)));
  vec acc[A];
  std::memcpy(acc, v, sizeof acc);
  int64_t i = A * L;
  auto step = [max](vec a, vec x) {
    vec r = max ? (a >= x ? a : x) : (a <= x ? a : x);
    if constexpr (std::is_floating_point_v<T>) r = a != a ? a : r;
    return r;
  };
  for (; i + A * L <= n; i += A * L) {
    vec x[A];
    std::memcpy(x, v + i, sizeof x);
    for (int k = 0; k < A; ++k)
      acc[k] = step(acc[k], x[k]);
  }
  T lane[A * L];
  std::memcpy(lane, acc, sizeof acc);
  T m = lane[0];
  for (int l = 1; l < A * L; ++l)
    m = max ? sel_max(m, lane[l]) : sel_min(m, lane[l]);
  for (; i < n; ++i)
    m = max ? sel_max(m, v[i]) : sel_min(m, v[i]);
  return m;
}

// Pairwise summation in a fixed order (NumPy's scheme): blocks of up to 128 summed in 8 lanes
// (independent chains the compiler vectorises), blocks combined pairwise.
template <class T> T sum_chunk(const T* v, int64_t n) {
  if (n <= 128) {
    if constexpr (std::is_integral_v<T>) {
      uint64_t s = 0;
      for (int64_t i = 0; i < n; ++i)
        s += u(v[i]);
      return wrap<T>(s);
    } else {
      T lane[8] = {};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l)
          lane[l] += v[i + l];
      T s =
          ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      for (; i < n; ++i)
        s += v[i];
      return s;
    }
  }
  const int64_t h = (n / 2 + 7) / 8 * 8;
  const T x = sum_chunk(v, h), y = sum_chunk(v + h, n - h);
  if constexpr (std::is_integral_v<T>)
    return wrap<T>(u(x) + u(y));
  else
    return x + y;
}

template <class T> struct reducer {
  int kind;
  int pass; // 0 or 1 (VAR/STD/LOGSUMEXP have two)

  static bool two_pass(int kind) {
    return kind == PCY_ARRAY_REDUCE_VAR || kind == PCY_ARRAY_REDUCE_STD ||
           kind == PCY_ARRAY_REDUCE_LOGSUMEXP;
  }
  void init(acc_t<T>& s) const {
    if (pass == 1) { // a: the first pass's result (mean or max), b: the sum; i: flags
      s.b = T(0);
      return;
    }
    s.i = -1;
    switch (kind) {
    case PCY_ARRAY_REDUCE_PROD: s.a = T(1); break;
    case PCY_ARRAY_REDUCE_ALL: s.a = T(1); break;
    case PCY_ARRAY_REDUCE_LOGSUMEXP: s.a = -std::numeric_limits<T>::infinity(); break;
    default: s.a = T(0); break;
    }
  }
  // Folds value v at reduced position pos into s.
  void add(acc_t<T>& s, T v, int64_t pos) const {
    if (pass == 1) {
      if (kind == PCY_ARRAY_REDUCE_LOGSUMEXP) {
        if constexpr (std::is_floating_point_v<T>) s.b += std::exp(v - s.a);
      } else {
        const T d = v - s.a;
        s.b += d * d;
      }
      return;
    }
    switch (kind) {
    case PCY_ARRAY_REDUCE_SUM:
    case PCY_ARRAY_REDUCE_MEAN:
    case PCY_ARRAY_REDUCE_VAR:
    case PCY_ARRAY_REDUCE_STD: s.a = op_add::f(s.a, v); break;
    case PCY_ARRAY_REDUCE_NORM2: s.a += v * v; break;
    case PCY_ARRAY_REDUCE_PROD: s.a = op_mul::f(s.a, v); break;
    case PCY_ARRAY_REDUCE_MIN:
      if (s.i < 0)
        s.a = v;
      else
        s.a = op_minimum::f(s.a, v);
      s.i = 0;
      break;
    case PCY_ARRAY_REDUCE_MAX:
      if (s.i < 0)
        s.a = v;
      else
        s.a = op_maximum::f(s.a, v);
      s.i = 0;
      break;
    case PCY_ARRAY_REDUCE_ARGMIN:
      if (s.i < 0 || (s.a == s.a && (v < s.a || v != v))) {
        s.a = v;
        s.i = pos;
      }
      break;
    case PCY_ARRAY_REDUCE_ARGMAX:
      if (s.i < 0 || (s.a == s.a && (v > s.a || v != v))) {
        s.a = v;
        s.i = pos;
      }
      break;
    case PCY_ARRAY_REDUCE_ALL: s.a = static_cast<T>(s.a && v); break;
    case PCY_ARRAY_REDUCE_ANY: s.a = static_cast<T>(s.a || v); break;
    case PCY_ARRAY_REDUCE_LOGSUMEXP: // pass 0: the maximum (NaN propagates)
      if (v != v || v > s.a) s.a = v;
      break;
    default: break;
    }
  }
  // A whole chunk into one accumulator (the inner path): sums pairwise, the rest in order.
  void add_chunk(acc_t<T>& s, const T* v, int64_t n, int64_t pos) const {
    if (pass == 0 && (kind == PCY_ARRAY_REDUCE_SUM || kind == PCY_ARRAY_REDUCE_MEAN ||
                      kind == PCY_ARRAY_REDUCE_VAR || kind == PCY_ARRAY_REDUCE_STD)) {
      s.a = op_add::f(s.a, sum_chunk(v, n));
      return;
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (pass == 1 && (kind == PCY_ARRAY_REDUCE_VAR || kind == PCY_ARRAY_REDUCE_STD)) {
        // Squared deviations from the mean, summed as sum_chunk does (8 lanes, fixed order).
        const T m = s.a;
        T lane[8] = {};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
          for (int l = 0; l < 8; ++l) {
            const T d = v[i + l] - m;
            lane[l] += d * d;
          }
        T t = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
              ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        for (; i < n; ++i) {
          const T d = v[i] - m;
          t += d * d;
        }
        s.b += t;
        return;
      }
    }
    if (pass == 0 && (kind == PCY_ARRAY_REDUCE_MAX || kind == PCY_ARRAY_REDUCE_MIN) && n > 0) {
      const T m = extreme(v, n, kind == PCY_ARRAY_REDUCE_MAX);
      s.a = s.i < 0
                ? m
                : (kind == PCY_ARRAY_REDUCE_MAX ? op_maximum::f(s.a, m) : op_minimum::f(s.a, m));
      s.i = 0;
      return;
    }
    if (pass == 0 && (kind == PCY_ARRAY_REDUCE_ARGMAX || kind == PCY_ARRAY_REDUCE_ARGMIN) &&
        n > 0) {
      if (s.i >= 0 && s.a != s.a) return; // a NaN already won
      // The chunk's extreme (8 lanes, NaN propagating), then its first position: the first
      // maximum (minimum) of the chunk, or its first NaN.
      const bool mx = kind == PCY_ARRAY_REDUCE_ARGMAX;
      const T m = extreme(v, n, mx);
      const bool nan = m != m;
      if (s.i >= 0 && !nan && !(mx ? m > s.a : m < s.a)) return; // an earlier one stays
      int64_t at = 0;
      if (nan) {
        while (v[at] == v[at])
          ++at;
      } else {
        while (!(v[at] == m))
          ++at;
      }
      s.a = v[at];
      s.i = pos + at;
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      add(s, v[i], pos + i);
  }
  // After pass 0 of a two-pass kind: the value the second pass centres on.
  void between(acc_t<T>& s, int64_t count) const {
    if (kind == PCY_ARRAY_REDUCE_LOGSUMEXP) {
      const T m = s.a;
      s.b = T(0);
      s.a = std::isfinite(m) ? m : (m != m ? m : T(0));
      s.i = m != m ? -2 : std::isinf(m) ? (m > 0 ? -3 : -4) : -1;
      return;
    }
    s.a = count > 0 ? static_cast<T>(s.a / static_cast<T>(count)) : T(0);
  }
  template <class Out> Out finish(const acc_t<T>& s, int64_t count, double correction) const {
    if constexpr (std::is_floating_point_v<T>) {
      switch (kind) {
      case PCY_ARRAY_REDUCE_MEAN:
        return static_cast<Out>(count > 0 ? s.a / static_cast<T>(count)
                                          : std::numeric_limits<T>::quiet_NaN());
      case PCY_ARRAY_REDUCE_VAR:
      case PCY_ARRAY_REDUCE_STD: {
        const double dof = static_cast<double>(count) - correction;
        if (!(dof > 0)) return static_cast<Out>(std::numeric_limits<T>::quiet_NaN());
        const T var = s.b / static_cast<T>(dof);
        return static_cast<Out>(kind == PCY_ARRAY_REDUCE_STD ? std::sqrt(var) : var);
      }
      case PCY_ARRAY_REDUCE_LOGSUMEXP:
        if (s.i == -2) return static_cast<Out>(std::numeric_limits<T>::quiet_NaN());
        if (s.i == -3) return static_cast<Out>(std::numeric_limits<T>::infinity());
        if (s.i == -4 || count == 0) return static_cast<Out>(-std::numeric_limits<T>::infinity());
        return static_cast<Out>(s.a + std::log(s.b));
      case PCY_ARRAY_REDUCE_NORM2: return static_cast<Out>(std::sqrt(s.a));
      default: break;
      }
    }
    if (kind == PCY_ARRAY_REDUCE_ARGMIN || kind == PCY_ARRAY_REDUCE_ARGMAX)
      return static_cast<Out>(s.i);
    return static_cast<Out>(s.a);
  }
};

template <int D> void run_reduce_t(native_context& cx, const program& p, int kind, double corr) {
  using T = reg_t<D>;
  runner r(cx, p);
  const collapsed& c = r.c;
  const int kept = c.rank - c.reduced;
  int64_t count = 1;
  for (int d = kept; d < c.rank; ++d)
    count *= c.shape[static_cast<size_t>(d)];
  if (p.kept_elements == 0) return;
  const bool twice = reducer<T>::two_pass(kind);
  const int out_dtype = p.ops[0].dtype;
  auto write = [&](int64_t out_off, const acc_t<T>& s, const reducer<T>& rd) {
    char* dst = r.base[0] + out_off * static_cast<int64_t>(r.es[0]);
    if (out_dtype == PCY_DTYPE_I64) {
      const int64_t v = rd.template finish<int64_t>(s, count, corr);
      std::memcpy(dst, &v, sizeof v);
    } else {
      const T v = rd.template finish<T>(s, count, corr);
      std::memcpy(dst, &v, sizeof v);
    }
  };
  std::array<int64_t, max_rank> idx{};
  std::array<int64_t, max_operands> off{};
  for (int o = 0; o < p.operands; ++o)
    off[static_cast<size_t>(o)] = c.offset[static_cast<size_t>(o)];

  // The outer path: the innermost kept dimension walked in chunks with one accumulator per
  // element, when the first input is contiguous there and not along the reduced dimensions.
  const int kin = kept - 1;
  const bool outer = kept > 0 && c.reduced > 0 &&
                     std::abs(c.strides[1][static_cast<size_t>(kin)]) == 1 &&
                     std::abs(c.strides[1][static_cast<size_t>(c.rank - 1)]) != 1;
  if (outer) {
    const size_t need = static_cast<size_t>(block) * sizeof(acc_t<T>) / sizeof(uint64_t) + 1;
    if (cx.acc.size() < need) cx.acc.resize(need);
    acc_t<T>* acc = reinterpret_cast<acc_t<T>*>(cx.acc.data());
    const int64_t len = c.shape[static_cast<size_t>(kin)];
    r.walk(0, kin, idx.data(), off.data(), [&] {
      for (int64_t j = 0; j < len; j += block) {
        const int64_t n = std::min(block, len - j);
        idx[static_cast<size_t>(kin)] = j;
        std::array<int64_t, max_operands> base_off = off;
        for (int o = 0; o < p.operands; ++o)
          base_off[static_cast<size_t>(o)] +=
              j * c.strides[static_cast<size_t>(o)][static_cast<size_t>(kin)];
        for (int pass = 0; pass < (twice ? 2 : 1); ++pass) {
          const reducer<T> rd{kind, pass};
          if (pass == 0)
            for (int64_t i = 0; i < n; ++i)
              rd.init(acc[i]);
          else
            for (int64_t i = 0; i < n; ++i) {
              reducer<T>{kind, 0}.between(acc[i], count);
              rd.init(acc[i]);
            }
          std::array<int64_t, max_rank> ridx = idx;
          std::array<int64_t, max_operands> roff = base_off;
          int64_t pos = 0;
          // The common cases in a dense array of running values (vectorised): sums, and the
          // extremes (NaN propagating); the others through the reducer, per element.
          const bool sums = pass == 0 &&
                            (kind == PCY_ARRAY_REDUCE_SUM || kind == PCY_ARRAY_REDUCE_MEAN ||
                             kind == PCY_ARRAY_REDUCE_VAR || kind == PCY_ARRAY_REDUCE_STD) &&
                            std::is_floating_point_v<T>;
          const bool ext =
              pass == 0 && (kind == PCY_ARRAY_REDUCE_MAX || kind == PCY_ARRAY_REDUCE_MIN);
          T run[block];
          r.walk(kept, c.rank, ridx.data(), roff.data(), [&] {
            const T* v = static_cast<const T*>(r.chunk(ridx.data(), kin, n, roff.data()));
            if (sums) {
              if (pos == 0)
                for (int64_t i = 0; i < n; ++i)
                  run[i] = v[i];
              else
                for (int64_t i = 0; i < n; ++i)
                  run[i] += v[i];
            } else if (ext) {
              if (pos == 0)
                for (int64_t i = 0; i < n; ++i)
                  run[i] = v[i];
              else if (kind == PCY_ARRAY_REDUCE_MAX)
                for (int64_t i = 0; i < n; ++i)
                  run[i] = sel_max(run[i], v[i]);
              else
                for (int64_t i = 0; i < n; ++i)
                  run[i] = sel_min(run[i], v[i]);
            } else {
              for (int64_t i = 0; i < n; ++i)
                rd.add(acc[i], v[i], pos);
            }
            ++pos;
          });
          if ((sums || ext) && pos > 0)
            for (int64_t i = 0; i < n; ++i) {
              acc[i].a = run[i];
              acc[i].i = 0;
            }
        }
        const reducer<T> last{kind, twice ? 1 : 0};
        for (int64_t i = 0; i < n; ++i)
          write(base_off[0] + i * c.strides[0][static_cast<size_t>(kin)], acc[i], last);
      }
      idx[static_cast<size_t>(kin)] = 0;
    });
    return;
  }

  // The inner path: one accumulator per output, the reduced dimensions walked with chunks along
  // the innermost one.
  r.walk(0, kept, idx.data(), off.data(), [&] {
    acc_t<T> s{};
    for (int pass = 0; pass < (twice ? 2 : 1); ++pass) {
      const reducer<T> rd{kind, pass};
      if (pass == 1) reducer<T>{kind, 0}.between(s, count);
      rd.init(s);
      if (c.reduced == 0) {
        const T* v = static_cast<const T*>(r.chunk(idx.data(), -1, 1, off.data()));
        rd.add(s, v[0], 0);
        continue;
      }
      const int inner = c.rank - 1;
      const int64_t len = c.shape[static_cast<size_t>(inner)];
      std::array<int64_t, max_rank> ridx = idx;
      std::array<int64_t, max_operands> roff = off;
      int64_t pos = 0;
      r.walk(kept, inner, ridx.data(), roff.data(), [&] {
        std::array<int64_t, max_operands> o2 = roff;
        for (int64_t j = 0; j < len; j += block) {
          const int64_t n = std::min(block, len - j);
          ridx[static_cast<size_t>(inner)] = j;
          const T* v = static_cast<const T*>(r.chunk(ridx.data(), inner, n, o2.data()));
          rd.add_chunk(s, v, n, pos);
          pos += n;
          for (int o = 0; o < p.operands; ++o)
            o2[static_cast<size_t>(o)] +=
                n * c.strides[static_cast<size_t>(o)][static_cast<size_t>(inner)];
        }
        ridx[static_cast<size_t>(inner)] = 0;
      });
    }
    write(off[0], s, reducer<T>{kind, twice ? 1 : 0});
  });
}

void run_reduce(native_context& cx, const program& p, int kind, double corr) {
  switch (p.result_dtype()) {
  case PCY_DTYPE_F32: run_reduce_t<PCY_DTYPE_F32>(cx, p, kind, corr); break;
  case PCY_DTYPE_F64: run_reduce_t<PCY_DTYPE_F64>(cx, p, kind, corr); break;
  case PCY_DTYPE_I8: run_reduce_t<PCY_DTYPE_I8>(cx, p, kind, corr); break;
  case PCY_DTYPE_I16: run_reduce_t<PCY_DTYPE_I16>(cx, p, kind, corr); break;
  case PCY_DTYPE_I32: run_reduce_t<PCY_DTYPE_I32>(cx, p, kind, corr); break;
  case PCY_DTYPE_I64: run_reduce_t<PCY_DTYPE_I64>(cx, p, kind, corr); break;
  case PCY_DTYPE_U8: run_reduce_t<PCY_DTYPE_U8>(cx, p, kind, corr); break;
  case PCY_DTYPE_BOOL: run_reduce_t<PCY_DTYPE_BOOL>(cx, p, kind, corr); break;
  default: sdk::fail(PCY_ERR_INTERNAL, "array_native: reduce of an unchecked dtype");
  }
}

// ---- scan ---------------------------------------------------------------------------------------
template <int D> void run_scan_t(native_context& cx, const program& p, int kind) {
  using T = reg_t<D>;
  runner r(cx, p);
  const collapsed& c = r.c;
  if (p.elements == 0) return;
  const int kept = c.rank - c.reduced;
  std::array<int64_t, max_rank> idx{};
  std::array<int64_t, max_operands> off{};
  for (int o = 0; o < p.operands; ++o)
    off[static_cast<size_t>(o)] = c.offset[static_cast<size_t>(o)];
  const int inner = c.reduced > 0 ? c.rank - 1 : -1;
  const int64_t len = inner >= 0 ? c.shape[static_cast<size_t>(inner)] : 1;
  const int64_t s_out = inner >= 0 ? c.strides[0][static_cast<size_t>(inner)] : 0;
  r.walk(0, kept, idx.data(), off.data(), [&] {
    T run = kind == PCY_ARRAY_SCAN_PROD ? T(1) : T(0);
    std::array<int64_t, max_operands> o2 = off;
    std::array<int64_t, max_rank> ridx = idx;
    for (int64_t j = 0; j < len; j += block) {
      const int64_t n = std::min(block, len - j);
      if (inner >= 0) ridx[static_cast<size_t>(inner)] = j;
      const T* v = static_cast<const T*>(r.chunk(ridx.data(), inner, n, o2.data()));
      char* dst = r.base[0] + o2[0] * static_cast<int64_t>(sizeof(T));
      for (int64_t i = 0; i < n; ++i) {
        run = kind == PCY_ARRAY_SCAN_PROD ? op_mul::f(run, v[i]) : op_add::f(run, v[i]);
        std::memcpy(dst + i * s_out * static_cast<int64_t>(sizeof(T)), &run, sizeof(T));
      }
      for (int o = 0; o < p.operands; ++o)
        o2[static_cast<size_t>(o)] +=
            n * (inner >= 0 ? c.strides[static_cast<size_t>(o)][static_cast<size_t>(inner)] : 0);
    }
  });
}

void run_scan(native_context& cx, const program& p, int kind) {
  switch (p.result_dtype()) {
  case PCY_DTYPE_F32: run_scan_t<PCY_DTYPE_F32>(cx, p, kind); break;
  case PCY_DTYPE_F64: run_scan_t<PCY_DTYPE_F64>(cx, p, kind); break;
  case PCY_DTYPE_I8: run_scan_t<PCY_DTYPE_I8>(cx, p, kind); break;
  case PCY_DTYPE_I16: run_scan_t<PCY_DTYPE_I16>(cx, p, kind); break;
  case PCY_DTYPE_I32: run_scan_t<PCY_DTYPE_I32>(cx, p, kind); break;
  case PCY_DTYPE_I64: run_scan_t<PCY_DTYPE_I64>(cx, p, kind); break;
  case PCY_DTYPE_U8: run_scan_t<PCY_DTYPE_U8>(cx, p, kind); break;
  default: sdk::fail(PCY_ERR_INVALID_ARGUMENT, "array.scan: the value must be a number");
  }
}

// ---- sort ---------------------------------------------------------------------------------------
// Each row of the value into a buffer, a stable sort of its positions by the key order of
// pcy_array.h (NaN above +inf and equal to NaN, -0 == +0), then the values or the positions.
template <class T> constexpr bool key_less(T a, T b) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(b)) return !std::isnan(a);
    return a < b; // false when a is NaN (b is not)
  } else {
    return a < b;
  }
}

template <int D> void run_sort_t(native_context& cx, const program& p, int kind, bool desc) {
  using T = reg_t<D>;
  runner r(cx, p);
  const collapsed& c = r.c;
  if (p.elements == 0) return;
  const int kept = c.rank - c.reduced;
  std::array<int64_t, max_rank> idx{};
  std::array<int64_t, max_operands> off{};
  for (int o = 0; o < p.operands; ++o)
    off[static_cast<size_t>(o)] = c.offset[static_cast<size_t>(o)];
  const int inner = c.reduced > 0 ? c.rank - 1 : -1;
  const int64_t len = inner >= 0 ? c.shape[static_cast<size_t>(inner)] : 1;
  const int64_t s_out = inner >= 0 ? c.strides[0][static_cast<size_t>(inner)] : 0;
  std::vector<T> row(static_cast<size_t>(len));
  std::vector<int64_t> pos(static_cast<size_t>(len));
  r.walk(0, kept, idx.data(), off.data(), [&] {
    std::array<int64_t, max_operands> o2 = off;
    std::array<int64_t, max_rank> ridx = idx;
    for (int64_t j = 0; j < len; j += block) {
      const int64_t n = std::min(block, len - j);
      if (inner >= 0) ridx[static_cast<size_t>(inner)] = j;
      const T* v = static_cast<const T*>(r.chunk(ridx.data(), inner, n, o2.data()));
      std::copy(v, v + n, row.begin() + j);
      for (int o = 0; o < p.operands; ++o)
        o2[static_cast<size_t>(o)] +=
            n * (inner >= 0 ? c.strides[static_cast<size_t>(o)][static_cast<size_t>(inner)] : 0);
    }
    for (int64_t i = 0; i < len; ++i)
      pos[static_cast<size_t>(i)] = i;
    const T* rv = row.data();
    if (desc)
      std::stable_sort(pos.begin(), pos.end(),
                       [rv](int64_t a, int64_t b) { return key_less(rv[b], rv[a]); });
    else
      std::stable_sort(pos.begin(), pos.end(),
                       [rv](int64_t a, int64_t b) { return key_less(rv[a], rv[b]); });
    char* dst = r.base[0] + off[0] * static_cast<int64_t>(r.es[0]);
    if (kind == PCY_ARRAY_SORT_ARGSORT)
      for (int64_t i = 0; i < len; ++i)
        std::memcpy(dst + i * s_out * 8, &pos[static_cast<size_t>(i)], 8);
    else
      for (int64_t i = 0; i < len; ++i)
        std::memcpy(dst + i * s_out * static_cast<int64_t>(sizeof(T)),
                    &row[static_cast<size_t>(pos[static_cast<size_t>(i)])], sizeof(T));
  });
}

void run_sort(native_context& cx, const program& p, int kind, bool desc) {
  switch (p.result_dtype()) {
  case PCY_DTYPE_F32: run_sort_t<PCY_DTYPE_F32>(cx, p, kind, desc); break;
  case PCY_DTYPE_F64: run_sort_t<PCY_DTYPE_F64>(cx, p, kind, desc); break;
  case PCY_DTYPE_I8: run_sort_t<PCY_DTYPE_I8>(cx, p, kind, desc); break;
  case PCY_DTYPE_I16: run_sort_t<PCY_DTYPE_I16>(cx, p, kind, desc); break;
  case PCY_DTYPE_I32: run_sort_t<PCY_DTYPE_I32>(cx, p, kind, desc); break;
  case PCY_DTYPE_I64: run_sort_t<PCY_DTYPE_I64>(cx, p, kind, desc); break;
  case PCY_DTYPE_U8: run_sort_t<PCY_DTYPE_U8>(cx, p, kind, desc); break;
  case PCY_DTYPE_BOOL: run_sort_t<PCY_DTYPE_BOOL>(cx, p, kind, desc); break;
  default: sdk::fail(PCY_ERR_INTERNAL, "array_native: sort of an unchecked dtype");
  }
}

// ---- the ops ------------------------------------------------------------------------------------
template <const pcy_op_schema& S> consteval uint32_t at(const char* name) {
  return sdk::arg_index(S, name);
}

// eval_<N> (O = 1) and evalm<O>_<N>: the call's program, decoded, or the context's last one
// when the call's key equals its key.
template <const pcy_op_schema& S, int N, int O>
const program& decoded_eval(native_context& cx, const sdk::op_args& a) {
  constexpr uint32_t prog_k = sdk::arg_index(S, "program"), out_k = sdk::arg_index(S, "out");
  eval_memo& m = cx.memo;
  if (m.key.matches(S, a, prog_k, out_k, N + O)) {
    for (int o = 0; o < N + O; ++o)
      m.p.ops[static_cast<size_t>(o)].tensor = &a.t(out_k + static_cast<uint32_t>(o));
    m.p.words = a.ints(prog_k);
    return m.p;
  }
  m.key.op = nullptr;
  m.planned = false;
  // What a new program holds before decoding (the decoder sets the rest).
  m.p.ops = {};
  m.p.shape = {};
  m.p.dtype_mask = 0;
  decode_eval<S, N, O>(a, m.p);
  m.key.store(S, a, prog_k, out_k, N + O);
  return m.p;
}
// The one-chunk form of m's program, where it has one (see one_chunk).
void plan_one_chunk(eval_memo& m) {
  const program& p = m.p;
  const collapsed& c = m.pl.c;
  one_chunk& f = m.one;
  f.on = false;
  if (p.outputs != 1 || c.rank > 1) return;
  const int64_t n = c.rank == 1 ? c.shape[0] : 1;
  if (n < 1 || n > block) return;
  for (int k = 0; k < p.count; ++k) {
    const int op = p.code[static_cast<size_t>(k)].op;
    if (op == PCY_ARRAY_OP_INDEX || op == PCY_ARRAY_OP_GATHER || op == PCY_ARRAY_OP_STORE) return;
  }
  f.n = n;
  for (int o = 0; o < p.operands; ++o) {
    const size_t uo = static_cast<size_t>(o);
    f.stride[uo] = c.rank == 1 ? c.strides[uo][0] : 0;
    f.offset[uo] = c.offset[uo];
    f.es[uo] = sdk::dtype_size(static_cast<pcy_dtype>(p.ops[uo].dtype));
  }
  f.regs.assign(static_cast<size_t>(p.count) * static_cast<size_t>(n), 0);
  f.steps.clear();
  for (int k = 0; k < p.count; ++k) {
    const instruction& in = p.code[static_cast<size_t>(k)];
    void* out = f.regs.data() + static_cast<size_t>(k) * static_cast<size_t>(n);
    f.rp[static_cast<size_t>(k)] = out;
    one_chunk_step st{};
    st.out = out;
    st.k = k;
    switch (in.op) {
    case PCY_ARRAY_OP_CONST: constant(out, in.dtype, in.a, n); continue;
    case PCY_ARRAY_OP_LOAD: {
      const int64_t s = f.stride[static_cast<size_t>(in.a)];
      st.a = static_cast<int32_t>(in.a);
      st.dtype = in.dtype;
      st.in_place = (s == 1 || n == 1) && in.dtype != PCY_DTYPE_BOOL;
      break;
    }
    default:
      st.fn = m.pl.fn[static_cast<size_t>(k)];
      st.a = static_cast<int32_t>(in.a);
      st.b = static_cast<int32_t>(in.b);
      st.c = static_cast<int32_t>(in.c);
      break;
    }
    f.steps.push_back(st);
  }
  f.on = true;
}

// One element of es bytes (a store of n = 1).
inline void store_one(char* dst, const void* v, size_t es) {
  switch (es) {
  case 1: *reinterpret_cast<uint8_t*>(dst) = *static_cast<const uint8_t*>(v); break;
  case 2: *reinterpret_cast<uint16_t*>(dst) = *static_cast<const uint16_t*>(v); break;
  case 4: *reinterpret_cast<uint32_t*>(dst) = *static_cast<const uint32_t*>(v); break;
  default: *reinterpret_cast<uint64_t*>(dst) = *static_cast<const uint64_t*>(v); break;
  }
}

void run_one_chunk(native_context& cx, const program& p, one_chunk& f) {
  std::array<char*, max_operands> base;
  for (int o = 0; o < p.operands; ++o) {
    const size_t uo = static_cast<size_t>(o);
    const pcy_tensor& t = *p.ops[uo].tensor;
    base[uo] = static_cast<char*>(sdk::native_of(*cx.fw, t)) + t.byte_offset +
               f.offset[uo] * static_cast<int64_t>(f.es[uo]);
  }
  const int64_t n = f.n;
  for (const one_chunk_step& st : f.steps) {
    if (st.fn != nullptr) {
      st.fn(st.out, f.rp[static_cast<size_t>(st.a)], f.rp[static_cast<size_t>(st.b)],
            f.rp[static_cast<size_t>(st.c)], n);
    } else if (st.in_place) {
      f.rp[static_cast<size_t>(st.k)] = base[static_cast<size_t>(st.a)];
    } else {
      load(st.out, base[static_cast<size_t>(st.a)], st.dtype, f.stride[static_cast<size_t>(st.a)],
           n);
    }
  }
  const void* v = f.rp[static_cast<size_t>(p.count - 1)];
  if (n == 1) {
    if (base[0] != v) store_one(base[0], v, f.es[0]);
  } else {
    store(base[0], v, f.es[0], f.stride[0], n);
  }
}

// Runs the context's last eval program (decoded_eval's) with its plan, made once.
void run_memo_eval(native_context& cx) {
  eval_memo& m = cx.memo;
  if (m.p.elements == 0) return;
  if (!m.planned) {
    plan_into(m.p, m.pl);
    plan_one_chunk(m);
    m.planned = true;
  }
  if (m.one.on) return run_one_chunk(cx, m.p, m.one);
  run_eval(cx, m.p, &m.pl);
}
template <const pcy_op_schema& S, int N> void op_eval(native_context& cx, const sdk::op_args& a) {
  (void)decoded_eval<S, N, 1>(cx, a);
  cx.settle(a.queue());
  run_memo_eval(cx);
}
template <const pcy_op_schema& S, int N, int O>
void op_evalm(native_context& cx, const sdk::op_args& a) {
  (void)decoded_eval<S, N, O>(cx, a);
  cx.settle(a.queue());
  run_memo_eval(cx);
}
template <const pcy_op_schema& S, int N> void op_reduce(native_context& cx, const sdk::op_args& a) {
  program p;
  const reduce_args r = decode_reduce<S, N>(a, p);
  cx.settle(a.queue());
  run_reduce(cx, p, r.kind, r.correction);
}
template <const pcy_op_schema& S, int N> void op_scan(native_context& cx, const sdk::op_args& a) {
  program p;
  const int k = decode_scan<S, N>(a, p);
  cx.settle(a.queue());
  run_scan(cx, p, k);
}

void op_sort(native_context& cx, const sdk::op_args& a) {
  program p;
  const sort_args k = decode_sort<pcy_array_sort_1_schema>(a, p);
  cx.settle(a.queue());
  run_sort(cx, p, k.kind, k.descending);
}

// ---- random -------------------------------------------------------------------------------------
// The view of a random op's output: {R, shape[R], offset, strides[R]} (pcy_array.h), checked
// against the tensor.
using view_t = random_call;

template <class T> void store_at(char* base, int64_t at, T v) {
  std::memcpy(base + at * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

template <class F> void each_element(const view_t& v, F&& f) {
  if (v.elements == 0) return;
  std::array<int64_t, max_rank> idx{};
  int64_t at = v.offset;
  for (uint64_t e = 0; e < v.elements; ++e) {
    f(e, at);
    for (int d = v.rank - 1; d >= 0; --d) {
      const size_t ud = static_cast<size_t>(d);
      if (++idx[ud] < v.shape[ud]) {
        at += v.strides[ud];
        break;
      }
      at -= (v.shape[ud] - 1) * v.strides[ud];
      idx[ud] = 0;
    }
  }
}

void op_random(native_context& cx, const sdk::op_args& a) {
  const random_call v = decode_random(a);
  const pcy_tensor& out = a.t(at<pcy_array_random_schema>("out"));
  const int64_t dist = v.distribution;
  const int dt = v.dtype;
  const uint64_t seed = v.seed, offset = v.stream_offset;
  const double pa_ = v.a, pb = v.b;
  cx.settle(a.queue());
  char* base = static_cast<char*>(sdk::native_of(*cx.fw, out)) + out.byte_offset;
  // Element e takes counter offset + e / P and lane e % P (pcy_array.h): each counter's words
  // and its P values are made once, when its first element comes (the walk is in element order).
  const int P = pcy_array_random_per_counter(static_cast<int>(dist), dt);
  auto per_counter = [&](auto value_type, auto fill, auto store) {
    using V = typename decltype(value_type)::type;
    V vals[4] = {};
    uint64_t cur = ~uint64_t{0};
    each_element(v, [&](uint64_t e, int64_t at_) {
      const uint64_t c = e / static_cast<uint64_t>(P);
      if (c != cur) {
        PCY_RNG_U32 wd[4];
        pcy_rng_words(seed, offset, c, wd);
        fill(wd, vals);
        cur = c;
      }
      store(at_, vals[e % static_cast<uint64_t>(P)]);
    });
  };
  switch (dist) {
  case PCY_ARRAY_RANDOM_UNIFORM:
  case PCY_ARRAY_RANDOM_NORMAL: {
    const bool normal = dist == PCY_ARRAY_RANDOM_NORMAL;
    if (dt == PCY_DTYPE_F64) {
      const double a64 = pa_, b64 = pb, scale = normal ? b64 : b64 - a64;
      per_counter(
          std::type_identity<double>{},
          [&](const PCY_RNG_U32(&w)[4], double(&r)[4]) {
            if (normal) {
              const double rad = pcy_rng_radius_f64(w[0], w[1]);
              double c, sn;
              pcy_rng_sincos2pi_f64(static_cast<uint64_t>(w[2] >> 11) << 32 | w[3], &c, &sn);
              r[0] = rad * c;
              r[1] = rad * sn;
            } else {
              r[0] = pcy_rng_uniform_f64(w[0], w[1]);
              r[1] = pcy_rng_uniform_f64(w[2], w[3]);
            }
          },
          [&](int64_t at_, double r) {
            const double t = scale * r;
            store_at(base, at_, a64 + t);
          });
    } else {
      const float a32 = static_cast<float>(pa_), b32 = static_cast<float>(pb);
      const float scale = normal ? b32 : b32 - a32;
      per_counter(
          std::type_identity<float>{},
          [&](const PCY_RNG_U32(&w)[4], float(&r)[4]) {
            if (normal) {
              for (int h = 0; h < 2; ++h) { // a pair: one radius, one angle's cos and sin
                const float rad = pcy_rng_radius_f32(w[2 * h]);
                float c, sn;
                pcy_rng_sincos2pi_f32(w[2 * h + 1] >> 8, &c, &sn);
                r[2 * h] = rad * c;
                r[2 * h + 1] = rad * sn;
              }
            } else {
              for (int l = 0; l < 4; ++l)
                r[l] = pcy_rng_uniform_f32(w[l]);
            }
          },
          [&](int64_t at_, float r) {
            const float t = scale * r;
            const float x = a32 + t;
            if (dt == PCY_DTYPE_F32)
              store_at(base, at_, x);
            else if (dt == PCY_DTYPE_F16)
              store_at(base, at_, f16_from(static_cast<double>(x)));
            else
              store_at(base, at_, bf16_from(static_cast<double>(x)));
          });
    }
    break;
  }
  case PCY_ARRAY_RANDOM_BERNOULLI: {
    const PCY_RNG_U64 t = pcy_rng_bernoulli_threshold(pa_);
    const size_t es = sdk::dtype_size(out.dtype);
    per_counter(
        std::type_identity<uint8_t>{},
        [&](const PCY_RNG_U32(&w)[4], uint8_t(&r)[4]) {
          for (int l = 0; l < 4; ++l)
            r[l] = static_cast<uint8_t>(pcy_rng_bernoulli(w[l], t) != 0);
        },
        [&](int64_t at_, uint8_t one) {
          char* p = base + at_ * static_cast<int64_t>(es);
          switch (dt) {
          case PCY_DTYPE_F32: store_at(p, 0, one ? 1.0f : 0.0f); break;
          case PCY_DTYPE_F64: store_at(p, 0, one ? 1.0 : 0.0); break;
          case PCY_DTYPE_F16: store_at(p, 0, static_cast<uint16_t>(one ? 0x3C00 : 0)); break;
          case PCY_DTYPE_BF16: store_at(p, 0, static_cast<uint16_t>(one ? 0x3F80 : 0)); break;
          case PCY_DTYPE_I16: store_at(p, 0, static_cast<int16_t>(one)); break;
          case PCY_DTYPE_I32: store_at(p, 0, static_cast<int32_t>(one)); break;
          case PCY_DTYPE_I64: store_at(p, 0, static_cast<int64_t>(one)); break;
          default: store_at(p, 0, one); break; // U8, I8, BOOL
          }
        });
    break;
  }
  case PCY_ARRAY_RANDOM_RANDINT: {
    const int64_t lo = static_cast<int64_t>(pa_);
    const uint64_t range =
        static_cast<uint64_t>(static_cast<int64_t>(pb)) - static_cast<uint64_t>(lo);
    const size_t es = sdk::dtype_size(out.dtype);
    per_counter(
        std::type_identity<int64_t>{},
        [&](const PCY_RNG_U32(&w)[4], int64_t(&r)[4]) {
          r[0] = pcy_rng_randint(w[0], w[1], lo, range);
          r[1] = pcy_rng_randint(w[2], w[3], lo, range);
        },
        [&](int64_t at_, int64_t x) {
          char* p = base + at_ * static_cast<int64_t>(es);
          switch (dt) {
          case PCY_DTYPE_I8: store_at(p, 0, static_cast<int8_t>(x)); break;
          case PCY_DTYPE_I16: store_at(p, 0, static_cast<int16_t>(x)); break;
          case PCY_DTYPE_I32: store_at(p, 0, static_cast<int32_t>(x)); break;
          case PCY_DTYPE_U8: store_at(p, 0, static_cast<uint8_t>(x)); break;
          default: store_at(p, 0, x); break;
          }
        });
    break;
  }
  case PCY_ARRAY_RANDOM_PERMUTATION:
    each_element(v, [&](uint64_t e, int64_t at_) {
      const uint64_t y = pcy_rng_permute(seed, offset, v.elements, e);
      if (dt == PCY_DTYPE_I32)
        store_at(base, at_, static_cast<int32_t>(y));
      else
        store_at(base, at_, static_cast<int64_t>(y));
    });
    break;
  default: // BITS
    per_counter(
        std::type_identity<int64_t>{},
        [&](const PCY_RNG_U32(&w)[4], int64_t(&r)[4]) {
          r[0] = static_cast<int64_t>((static_cast<uint64_t>(w[1]) << 32) | w[0]);
          r[1] = static_cast<int64_t>((static_cast<uint64_t>(w[3]) << 32) | w[2]);
        },
        [&](int64_t at_, int64_t x) { store_at(base, at_, x); });
    break;
  }
}

constexpr sdk::bundle_identity identity{
    "array_native", PCY_ARRAY_EXTENSION, "native",
    "array expressions, reductions, scans, sorts and random numbers on the host CPU (a blocked "
    "vector interpreter)"};

class array_native_bundle : public sdk::bundle_base<identity, native_context> {
public:
  explicit array_native_bundle(const pcy_host_services& host) : bundle_base(host) {
    (void)table();
    constexpr pcy_dtype all[] = {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I32,  PCY_DTYPE_I64,
                                 PCY_DTYPE_U8,  PCY_DTYPE_F16, PCY_DTYPE_BF16, PCY_DTYPE_I8,
                                 PCY_DTYPE_I16, PCY_DTYPE_BOOL};
    const std::string impl = std::string("native blocked interpreter; math: ") + math_impl;
    for (pcy_dtype d : all) {
      table_.add<op_random>(pcy_array_random_schema, d, impl + "; Philox-4x32-10");
#define PCY_ADD_EVAL(n)                                                                            \
  table_.add<op_eval<pcy_array_eval_##n##_schema, n>>(pcy_array_eval_##n##_schema, d, impl);
      PCY_ADD_EVAL(0)
      PCY_ADD_EVAL(1)
      PCY_ADD_EVAL(2)
      PCY_ADD_EVAL(3)
      PCY_ADD_EVAL(4)
      PCY_ADD_EVAL(5)
      PCY_ADD_EVAL(6) PCY_ADD_EVAL(7) PCY_ADD_EVAL(8)
#undef PCY_ADD_EVAL
#define PCY_ADD_EVALM(m, n)                                                                        \
  table_.add<op_evalm<pcy_array_evalm##m##_##n##_schema, n, m>>(pcy_array_evalm##m##_##n##_schema, \
                                                                d, impl);
          PCY_ADD_EVALM(2, 0) PCY_ADD_EVALM(2, 1) PCY_ADD_EVALM(2, 2) PCY_ADD_EVALM(2, 3)
              PCY_ADD_EVALM(2, 4) PCY_ADD_EVALM(2, 5) PCY_ADD_EVALM(2, 6) PCY_ADD_EVALM(3, 0)
                  PCY_ADD_EVALM(3, 1) PCY_ADD_EVALM(3, 2) PCY_ADD_EVALM(3, 3) PCY_ADD_EVALM(3, 4)
                      PCY_ADD_EVALM(3, 5) PCY_ADD_EVALM(3, 6)
#undef PCY_ADD_EVALM
                          if (d == PCY_DTYPE_F16 || d == PCY_DTYPE_BF16) continue;
#define PCY_ADD_REDUCE(n)                                                                          \
  table_.add<op_reduce<pcy_array_reduce_##n##_schema, n>>(pcy_array_reduce_##n##_schema, d, impl);
      PCY_ADD_REDUCE(1)
      PCY_ADD_REDUCE(2)
      PCY_ADD_REDUCE(3)
      PCY_ADD_REDUCE(4)
#undef PCY_ADD_REDUCE
      table_.add<op_sort>(pcy_array_sort_1_schema, d, impl);
      if (d == PCY_DTYPE_BOOL) continue;
      table_.add<op_scan<pcy_array_scan_1_schema, 1>>(pcy_array_scan_1_schema, d, impl);
      table_.add<op_scan<pcy_array_scan_2_schema, 2>>(pcy_array_scan_2_schema, d, impl);
    }
  }

  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    sdk::require_slots(*a.framework, name,
                       {PCY_FRAMEWORK_SLOT_native_handle, PCY_FRAMEWORK_SLOT_queue_finish});
    auto c = std::make_unique<native_context>();
    c->fw = a.framework;
    return c.release();
  }

private:
  sdk::op_table<array_native_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(array_native_bundle)
