// Array bundles, shared part: the semantics of each instruction of pcy_array.h on one value, in
// host C++ — what the native bundle runs and what the GPU code generators spell in OpenCL C and
// CUDA. Integers wrap (computed in uint64_t), floating point follows NumPy (npy_divmod,
// maximum/minimum, logaddexp), casts saturate, half types convert with one rounding.
#pragma once

#include <parenchyma/abi/pcy_base.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace parenchyma::array_bundle {

// ---- storage types -----------------------------------------------------------------------------
struct half_bits { // F16 storage
  uint16_t v;
};
struct bhalf_bits { // BF16 storage
  uint16_t v;
};
struct bool8 { // BOOL storage: 0 or 1 once loaded
  uint8_t v;
};

template <int D> struct ctype_of;
template <> struct ctype_of<PCY_DTYPE_F32> { using type = float; };
template <> struct ctype_of<PCY_DTYPE_F64> { using type = double; };
template <> struct ctype_of<PCY_DTYPE_I8> { using type = int8_t; };
template <> struct ctype_of<PCY_DTYPE_I16> { using type = int16_t; };
template <> struct ctype_of<PCY_DTYPE_I32> { using type = int32_t; };
template <> struct ctype_of<PCY_DTYPE_I64> { using type = int64_t; };
template <> struct ctype_of<PCY_DTYPE_U8> { using type = uint8_t; };
template <> struct ctype_of<PCY_DTYPE_BOOL> { using type = bool8; };
template <> struct ctype_of<PCY_DTYPE_F16> { using type = half_bits; };
template <> struct ctype_of<PCY_DTYPE_BF16> { using type = bhalf_bits; };
template <int D> using ctype = typename ctype_of<D>::type;

// ---- half conversions (one rounding, to nearest even) ------------------------------------------
// A binary format with `mant` fraction bits and exponent bias `bias` (f16: 10, 15; bf16: 7, 127).
template <int mant, int bias, int exp_bits> inline uint16_t round_to_half(double x) noexcept {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  const uint16_t sign = static_cast<uint16_t>((b >> 48) & 0x8000u);
  const uint16_t exp_all = static_cast<uint16_t>(((1u << exp_bits) - 1u) << mant);
  if (std::isnan(x)) return static_cast<uint16_t>(sign | exp_all | (1u << (mant - 1)));
  const double a = std::fabs(x);
  const int emin = 1 - bias, emax = bias;
  // The largest finite value rounded up halfway: (2 - 2^-(mant+1)) 2^emax and beyond round to inf.
  const double overflow = std::ldexp(2.0 - std::ldexp(1.0, -(mant + 1)), emax);
  if (a >= overflow) return static_cast<uint16_t>(sign | exp_all);
  if (a < std::ldexp(1.0, emin)) { // subnormal (or zero): units of 2^(emin - mant)
    const double q = std::nearbyint(std::ldexp(a, mant - emin));
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(q)); // q == 2^mant: smallest normal
  }
  int e = 0;
  (void)std::frexp(a, &e);                            // a = f 2^e, f in [0.5, 1)
  e -= 1;                                             // a = m 2^e, m in [1, 2)
  double q = std::nearbyint(std::ldexp(a, mant - e)); // in [2^mant, 2^(mant+1)]
  if (q >= std::ldexp(1.0, mant + 1)) {
    q = std::ldexp(1.0, mant);
    ++e;
  }
  const uint32_t frac = static_cast<uint32_t>(q) - (1u << mant);
  return static_cast<uint16_t>(sign | ((static_cast<uint32_t>(e + bias)) << mant) | frac);
}
template <int mant, int bias, int exp_bits> inline double half_to_double(uint16_t h) noexcept {
  const bool neg = (h & 0x8000u) != 0;
  const uint32_t e = (h >> mant) & ((1u << exp_bits) - 1u);
  const uint32_t f = h & ((1u << mant) - 1u);
  double v;
  if (e == 0)
    v = std::ldexp(static_cast<double>(f), 1 - bias - mant);
  else if (e == (1u << exp_bits) - 1u)
    v = f != 0 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(static_cast<double>(f | (1u << mant)), static_cast<int>(e) - bias - mant);
  return neg ? -v : v;
}
inline uint16_t f16_from(double x) noexcept { return round_to_half<10, 15, 5>(x); }
inline uint16_t bf16_from(double x) noexcept { return round_to_half<7, 127, 8>(x); }
inline double f16_to(uint16_t h) noexcept { return half_to_double<10, 15, 5>(h); }
inline double bf16_to(uint16_t h) noexcept { return half_to_double<7, 127, 8>(h); }

// ---- casts -----------------------------------------------------------------------------------
// Any storage value as double (exact for every type but i64 beyond 2^53, rounded then).
template <class S> inline double as_double(S v) noexcept {
  if constexpr (std::is_same_v<S, half_bits>)
    return f16_to(v.v);
  else if constexpr (std::is_same_v<S, bhalf_bits>)
    return bf16_to(v.v);
  else if constexpr (std::is_same_v<S, bool8>)
    return v.v != 0 ? 1.0 : 0.0;
  else
    return static_cast<double>(v);
}
template <class S> inline bool truthy(S v) noexcept {
  if constexpr (std::is_same_v<S, half_bits> || std::is_same_v<S, bhalf_bits>)
    return (v.v & 0x7FFFu) != 0;
  else if constexpr (std::is_same_v<S, bool8>)
    return v.v != 0;
  else
    return v != S(0) || (std::is_floating_point_v<S> && v != v);
}
template <class T> inline T saturate_from_double(double x) noexcept {
  if (std::isnan(x)) return T(0);
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double hi_excl = std::is_same_v<T, int64_t>
                                 ? 9223372036854775808.0
                                 : static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
  if (x <= lo) return std::numeric_limits<T>::min();
  if (x >= hi_excl) return std::numeric_limits<T>::max();
  return static_cast<T>(x); // truncates toward zero; in range
}
template <class To, class From> inline To cast(From v) noexcept {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool8>) {
    return bool8{static_cast<uint8_t>(truthy(v) ? 1 : 0)};
  } else if constexpr (std::is_same_v<To, half_bits>) {
    if constexpr (std::is_same_v<From, float> || std::is_same_v<From, double>)
      return half_bits{f16_from(static_cast<double>(v))};
    else
      return half_bits{f16_from(as_double(v))};
  } else if constexpr (std::is_same_v<To, bhalf_bits>) {
    return bhalf_bits{bf16_from(as_double(v))};
  } else if constexpr (std::is_floating_point_v<To>) {
    if constexpr (std::is_same_v<From, half_bits> || std::is_same_v<From, bhalf_bits> ||
                  std::is_same_v<From, bool8>)
      return static_cast<To>(as_double(v));
    else
      return static_cast<To>(v); // int -> float and float -> float: nearest even
  } else {                       // integer target
    if constexpr (std::is_same_v<From, bool8>)
      return static_cast<To>(v.v != 0 ? 1 : 0);
    else if constexpr (std::is_integral_v<From>)
      return static_cast<To>(static_cast<uint64_t>(static_cast<int64_t>(v))); // wraps
    else
      return saturate_from_double<To>(as_double(v));
  }
}

// ---- integer helpers ---------------------------------------------------------------------------
template <class T> inline T wrap(uint64_t v) noexcept { return static_cast<T>(v); }
template <class T> inline uint64_t u(T v) noexcept {
  return static_cast<uint64_t>(static_cast<int64_t>(v));
}

template <class T> inline T int_floordiv(T a, T b) noexcept {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>)
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return a;
  T q = static_cast<T>(a / b);
  if constexpr (std::is_signed_v<T>)
    if (static_cast<T>(a % b) != 0 && ((a < 0) != (b < 0))) q = static_cast<T>(q - 1);
  return q;
}
template <class T> inline T int_rem(T a, T b) noexcept {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>)
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return 0;
  T r = static_cast<T>(a % b);
  if constexpr (std::is_signed_v<T>)
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
  return r;
}
template <class T> inline T int_pow(T a, T b) noexcept {
  if constexpr (std::is_signed_v<T>)
    if (b < 0) return a == 1 ? T(1) : a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0);
  uint64_t base = u(a), e = static_cast<uint64_t>(b), r = 1;
  while (e != 0) {
    if (e & 1u) r *= base;
    base *= base;
    e >>= 1;
  }
  return wrap<T>(r);
}
template <class T> inline T int_shl(T a, T b) noexcept {
  constexpr int bits = 8 * sizeof(T);
  if (b < 0 || static_cast<int64_t>(b) >= bits) return 0;
  return wrap<T>(u(a) << static_cast<int>(b));
}
template <class T> inline T int_shr(T a, T b) noexcept {
  constexpr int bits = 8 * sizeof(T);
  if (b < 0 || static_cast<int64_t>(b) >= bits)
    return (std::is_signed_v<T> && a < 0) ? T(-1) : T(0);
  return static_cast<T>(a >> static_cast<int>(b));
}

// ---- floating helpers (NumPy's) ------------------------------------------------------------
template <class T> inline void npy_divmod(T a, T b, T& floordiv, T& mod) noexcept {
  if (b == T(0)) {
    mod = std::fmod(a, b);
    floordiv = a / b;
    return;
  }
  mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0)) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= T(1);
    }
  } else {
    mod = std::copysign(T(0), b);
  }
  if (div != T(0)) {
    floordiv = std::floor(div);
    if (div - floordiv > T(0.5)) floordiv += T(1);
  } else {
    floordiv = std::copysign(T(0), a / b);
  }
}
template <class T> inline T npy_logaddexp(T x, T y) noexcept {
  if (x == y) return x + static_cast<T>(0.693147180559945309417232121458176568);
  const T t = x - y;
  if (t > 0) return x + std::log1p(std::exp(-t));
  if (t <= 0) return y + std::log1p(std::exp(t));
  return t; // NaN
}
template <class T> inline T fsign(T x) noexcept {
  return x > 0 ? T(1) : x < 0 ? T(-1) : x == 0 ? T(0) : x;
}

} // namespace parenchyma::array_bundle
