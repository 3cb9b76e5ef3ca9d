// NN bundle for the native framework: the bundle's own loops, one per op and dtype (f32, f64).
// They serve every cell where oneDNN does not (f64, the gradients oneDNN computes differently,
// shapes it refuses) and every cell when the bundle is built without oneDNN. Plain C++ over host
// pointers: no allocation (scratch comes from the caller), inner loops written so the compiler
// vectorises them (contiguous, no branches, independent accumulators for reductions).
#pragma once

#include <parenchyma/abi/ext/pcy_nn.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace parenchyma::nn_native {

// Built for AVX2 + FMA (x86-64-v3) and for the baseline; the loader picks the one the CPU runs
// (an ifunc). The clone is named by ISA level, not by a CPU: GCC dispatches "arch=haswell" on the
// CPU model, so every later CPU (an AVX-512 Xeon, an EPYC) ran the baseline build.
// Not in sanitizer builds: ThreadSanitizer crashes on an ifunc resolved while a plugin loads.
// Not on Windows: PE has no ifunc (the baseline build only there, docs/platforms.md).
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) &&                             \
    !defined(PCY_NN_NO_CLONES) && !defined(_WIN32)
#define PCY_NN_NATIVE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
// The norms, the softmax gradients and dropout also have an AVX-512 build (wider vectors than
// the clones' one source can name), called where the CPU runs x86-64-v4, decided once.
#define PCY_NN_HAVE_512 1
#define PCY_NN_TARGET_512 __attribute__((target("arch=x86-64-v4")))
inline bool cpu_has_512() {
  static const bool has = [] {
    __builtin_cpu_init(); // in case this runs before libgcc's constructor
    return __builtin_cpu_supports("x86-64-v4") != 0;
  }();
  return has;
}
// `call` (a void call of the AVX-512 build), then return, where the CPU runs x86-64-v4.
#define PCY_NN_USE_512(call)                                                                       \
  if (cpu_has_512()) {                                                                             \
    call;                                                                                          \
    return;                                                                                        \
  }
#else
#define PCY_NN_NATIVE_CLONES
#define PCY_NN_USE_512(call)
#endif

// ---- helpers ------------------------------------------------------------------------------

// A dot product with eight independent partial sums (vectorised without reassociation flags).
template <class T> inline T dot(const T* a, const T* b, int64_t n) {
  T acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      acc[j] += a[i + j] * b[i + j];
  T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i)
    s += a[i] * b[i];
  return s;
}
// The same for a strided b.
template <class T> inline T dot_strided(const T* a, const T* b, int64_t bstride, int64_t n) {
  T acc[4] = {};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j)
      acc[j] += a[i + j] * b[(i + j) * bstride];
  T s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; i < n; ++i)
    s += a[i] * b[i * bstride];
  return s;
}

// The output positions o in [0, n_out) with 0 <= o * stride + off < in: [lo, hi).
inline void valid_range(int64_t n_out, int64_t stride, int64_t off, int64_t in, int64_t& lo,
                        int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  const int64_t lim = in - off; // o * stride < lim
  hi = lim <= 0 ? 0 : (lim + stride - 1) / stride;
  hi = std::min(hi, n_out);
  lo = std::min(lo, hi);
}

#if defined(__GNUC__)
#define PCY_NN_AI __attribute__((always_inline)) // inlined into the clones too (their arch differs)
#else
#define PCY_NN_AI
#endif
// Eight partial sums added in a fixed tree (wide_sums' last step).
[[gnu::always_inline]] inline double lane_tree(const double* a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

#if defined(__GNUC__) && !defined(__clang__)
// 32-byte vectors of T (GCC's vector extension: AVX registers in the x86-64-v3 build, two SSE
// registers in the baseline) and their shuffle indices.
template <class T> struct vec32;
template <> struct vec32<float> {
  typedef float type __attribute__((vector_size(32)));
  typedef int32_t index __attribute__((vector_size(32)));
};
template <> struct vec32<double> {
  typedef double type __attribute__((vector_size(32)));
  typedef int64_t index __attribute__((vector_size(32)));
};
#endif

// Sums over a row in 32 lanes: K sums of f(j) over j in [0, n), element j of the full blocks of
// 32 in lane j % 32, the tail's elements in lanes 0, 1, ... in order (the tail's other lanes add
// +0, so a lane's -0 may become +0); the lanes added at the end in a fixed tree (lane k + lane
// k+8 + lane k+16 + lane k+24 pairwise, then lane_tree). Eight lanes are a chain of dependent
// adds per lane (the adds' latency bounds a row); 32 lanes let eight AVX2 vectors run side by
// side. fv(j, r) computes the K values of elements j..j+3 as vectors, fs(j, r) one element's by
// the same operations: the same bits in every build (baseline, AVX2, AVX-512).
#if defined(__GNUC__)
// Lanes in vectors of W doubles: W = 4 (32 bytes, AVX2's width; the baseline build runs each as
// two SSE registers) in every build, W = 8 in the AVX-512 build of the norms (a 64-byte type in
// the AVX2 build is split and spilled to memory: half speed). The lanes and their tree are the
// same for both widths, so are the bits.
template <unsigned W> struct wide;
template <> struct wide<4> {
  typedef double d __attribute__((vector_size(32)));
  typedef float f __attribute__((vector_size(16)));
};
template <> struct wide<8> {
  typedef double d __attribute__((vector_size(64)));
  typedef float f __attribute__((vector_size(32)));
};
template <unsigned W> [[gnu::always_inline]] inline typename wide<W>::d wide_load(const float* p) {
  typename wide<W>::f f;
  std::memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, typename wide<W>::d);
}
template <unsigned W> [[gnu::always_inline]] inline typename wide<W>::d wide_load(const double* p) {
  typename wide<W>::d d;
  std::memcpy(&d, p, sizeof d);
  return d;
}
template <unsigned W, unsigned K, class FV, class FS>
[[gnu::always_inline]] inline void wide_sums(uint64_t n, FV fv, FS fs, double (&out)[K]) {
  using V = typename wide<W>::d;
  constexpr unsigned Q = 32 / W;
  V acc[K][Q] = {}; // lane l in acc[k][l / W][l % W]
  uint64_t j = 0;
  for (; j + 32 <= n; j += 32)
    for (unsigned q = 0; q < Q; ++q) {
      V r[K];
      fv(j + W * q, r);
      for (unsigned k = 0; k < K; ++k)
        acc[k][q] += r[k];
    }
  if (j < n) { // the tail through a block of zeros (lanes past it add +0), so that acc stays in
               // registers: indexing a lane of it would keep it in memory for the whole loop
    double tail[K][32] = {};
    for (unsigned l = 0; j < n; ++j, ++l) {
      double r[K];
      fs(j, r);
      for (unsigned k = 0; k < K; ++k)
        tail[k][l] = r[k];
    }
    for (unsigned k = 0; k < K; ++k)
      for (unsigned q = 0; q < Q; ++q)
        acc[k][q] += wide_load<W>(tail[k] + W * q);
  }
  for (unsigned k = 0; k < K; ++k) {
    double a[8]; // lanes i, i + 8, i + 16, i + 24 pairwise
    if constexpr (W == 8) {
      const V t = (acc[k][0] + acc[k][1]) + (acc[k][2] + acc[k][3]);
      std::memcpy(a, &t, sizeof t);
    } else { // i < 4: vectors 0, 2, 4, 6; else 1, 3, 5, 7
      const V lo = (acc[k][0] + acc[k][2]) + (acc[k][4] + acc[k][6]),
              hi = (acc[k][1] + acc[k][3]) + (acc[k][5] + acc[k][7]);
      std::memcpy(a, &lo, sizeof lo);
      std::memcpy(a + 4, &hi, sizeof hi);
    }
    out[k] = lane_tree(a);
  }
}
// One sum in vectors of W: fv(j) the vector of elements j..j+W-1, fs(j) element j's value.
template <unsigned W, class FV, class FS>
[[gnu::always_inline]] inline double wide_sum(uint64_t n, FV fv, FS fs) {
  double o[1];
  wide_sums<W, 1>(
      n, [&](uint64_t j, typename wide<W>::d(&r)[1]) PCY_NN_AI { r[0] = fv(j); },
      [&](uint64_t j, double(&r)[1]) PCY_NN_AI { r[0] = fs(j); }, o);
  return o[0];
}
#else
#error "nn_native needs GCC's vector extension (GCC or clang)"
#endif

template <class T> inline void zero(T* p, uint64_t n) {
  if (n != 0) std::memset(p, 0, n * sizeof(T));
}

// ---- activations --------------------------------------------------------------------------

template <class T> void sigmoid_fwd(const T* x, T* y, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    y[i] = T(1) / (T(1) + std::exp(-x[i]));
}
template <class T> void relu_fwd(const T* x, T* y, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    y[i] = x[i] < T(0) ? T(0) : x[i]; // -0 and NaN pass through
}
template <class T> void tanh_fwd(const T* x, T* y, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    y[i] = std::tanh(x[i]);
}
template <class T> void elu_fwd(const T* x, T* y, uint64_t n, T alpha) {
  for (uint64_t i = 0; i < n; ++i)
    y[i] = x[i] > T(0) ? x[i] : alpha * std::expm1(x[i]);
}
// dx = dy * f'(x) from the forward's output y; dx may be dy (the pointwise forms).
template <class T> void sigmoid_bwd(const T* y, const T* dy, T* dx, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * (y[i] * (T(1) - y[i]));
}
template <class T> void relu_bwd(const T* y, const T* dy, T* dx, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    // dy read unconditionally: a conditional load stops GCC from vectorising (8x slower).
    const T d = dy[i];
    dx[i] = y[i] > T(0) ? d : T(0); // the select of pcy_nn.h, as a blend
  }
}
template <class T> void tanh_bwd(const T* y, const T* dy, T* dx, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * (T(1) - y[i] * y[i]);
}
template <class T> void elu_bwd(const T* y, const T* dy, T* dx, uint64_t n, T alpha) {
  for (uint64_t i = 0; i < n; ++i)
    dx[i] = y[i] > T(0) ? dy[i] : dy[i] * (y[i] + alpha);
}

// ---- softmax (x viewed as outer x len x inner) ----------------------------------------------
// scratch: 2 * inner doubles (unused when inner == 1).

template <class T>
void softmax_fwd(const T* x, T* y, uint64_t outer, uint64_t len, uint64_t inner, bool log,
                 double* scratch) {
  if (inner == 1) {
    for (uint64_t o = 0; o < outer; ++o) {
      const T* xr = x + o * len;
      T* yr = y + o * len;
      T m = xr[0];
      for (uint64_t l = 1; l < len; ++l)
        m = xr[l] > m ? xr[l] : m; // a NaN below poisons the sum, so every output is NaN
      double s = 0;
      for (uint64_t l = 0; l < len; ++l)
        s += static_cast<double>(std::exp(xr[l] - m));
      if (log) {
        const T ls = static_cast<T>(std::log(s));
        for (uint64_t l = 0; l < len; ++l)
          yr[l] = (xr[l] - m) - ls;
      } else {
        const double inv = 1.0 / s;
        for (uint64_t l = 0; l < len; ++l)
          yr[l] = static_cast<T>(static_cast<double>(std::exp(xr[l] - m)) * inv);
      }
    }
    return;
  }
  double* mx = scratch;
  double* sum = scratch + inner;
  for (uint64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * len * inner;
    T* yo = y + o * len * inner;
    for (uint64_t i = 0; i < inner; ++i) {
      mx[i] = static_cast<double>(xo[i]);
      sum[i] = 0;
    }
    for (uint64_t l = 1; l < len; ++l)
      for (uint64_t i = 0; i < inner; ++i) {
        const double v = static_cast<double>(xo[l * inner + i]);
        mx[i] = v > mx[i] ? v : mx[i];
      }
    for (uint64_t l = 0; l < len; ++l)
      for (uint64_t i = 0; i < inner; ++i)
        sum[i] += static_cast<double>(std::exp(xo[l * inner + i] - static_cast<T>(mx[i])));
    if (log) {
      for (uint64_t i = 0; i < inner; ++i)
        sum[i] = std::log(sum[i]);
      for (uint64_t l = 0; l < len; ++l)
        for (uint64_t i = 0; i < inner; ++i)
          yo[l * inner + i] = (xo[l * inner + i] - static_cast<T>(mx[i])) - static_cast<T>(sum[i]);
    } else {
      for (uint64_t i = 0; i < inner; ++i)
        sum[i] = 1.0 / sum[i];
      for (uint64_t l = 0; l < len; ++l)
        for (uint64_t i = 0; i < inner; ++i)
          yo[l * inner + i] = static_cast<T>(
              static_cast<double>(std::exp(xo[l * inner + i] - static_cast<T>(mx[i]))) * sum[i]);
    }
  }
}

// Whether no element is NaN or infinite, from the bits: an exponent of all ones (NaN, infinity)
// plus one exponent unit carries into the sign bit, every other exponent does not. Integer and,
// add and or: one pass that vectorises, with no chain of dependent float adds.
template <class T> [[gnu::always_inline]] inline auto nonfinite_bits(T v) {
  if constexpr (sizeof(T) == 4) {
    return (std::bit_cast<uint32_t>(v) & 0x7f800000u) + 0x00800000u;
  } else {
    return (std::bit_cast<uint64_t>(v) & 0x7ff0000000000000ull) + 0x0010000000000000ull;
  }
}
template <class T> [[gnu::always_inline]] inline bool all_finite_body(const T* x, uint64_t n) {
  decltype(nonfinite_bits(T(0))) acc = 0;
  for (uint64_t i = 0; i < n; ++i)
    acc |= nonfinite_bits(x[i]);
  return (acc >> (8 * sizeof(T) - 1)) == 0;
}
PCY_NN_NATIVE_CLONES inline bool all_finite(const float* x, uint64_t n) {
  return all_finite_body(x, n);
}
PCY_NN_NATIVE_CLONES inline bool all_finite(const double* x, uint64_t n) {
  return all_finite_body(x, n);
}

// log_softmax of finite f32 rows around oneDNN's exp (nn_native.cpp's dn_log_softmax_rows),
// built like the other loops (AVX2 and the baseline: eight f32 lanes where the baseline has
// four; no multiply, so no contraction: the same bits on either). First each row's maximum into
// mx (in eight lanes, then across them) and y = x - max, false where a row holds a NaN or an
// infinity (the caller then runs the plain loop, which owns those semantics); then, once y holds
// e^(x - max), the row's sum in double (eight lanes, a fixed tree) and y = (x - max) - log(sum).
PCY_NN_NATIVE_CLONES inline bool log_softmax_rows_max(const float* x, float* y, double* mx,
                                                      uint64_t rows, uint64_t len) {
  uint32_t bad = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * len;
    float* yr = y + r * len;
    float m8[8];
    uint64_t l = 0;
#if defined(__GNUC__) && !defined(__clang__)
    {
      // Eight lanes in one vector (GCC's vector extension: the compiler left the array form
      // scalar), lane j taking elements j, j + 8, ... in order, as the loop below.
      using vf = vec32<float>::type;
      // unsigned lanes: the exponent test wraps into bit 31 (signed lanes would overflow)
      typedef uint32_t vu __attribute__((vector_size(32)));
      vf mv = vf{} + xr[0];
      vu bv{};
      for (; l + 8 <= len; l += 8) {
        vf v;
        std::memcpy(&v, xr + l, sizeof(v));
        mv = v > mv ? v : mv;
        vu u;
        std::memcpy(&u, &v, sizeof(u));
        bv |= (u & 0x7f800000u) + 0x00800000u;
      }
      std::memcpy(m8, &mv, sizeof(m8));
      for (int j = 0; j < 8; ++j)
        bad |= static_cast<uint32_t>(bv[j]);
    }
#else
    uint32_t b8[8] = {};
    for (float& v : m8)
      v = xr[0];
    for (; l + 8 <= len; l += 8)
      for (int j = 0; j < 8; ++j) {
        m8[j] = xr[l + j] > m8[j] ? xr[l + j] : m8[j];
        b8[j] |= nonfinite_bits(xr[l + j]);
      }
    for (const uint32_t v : b8)
      bad |= v;
#endif
    float m = m8[0];
    for (int j = 1; j < 8; ++j)
      m = m8[j] > m ? m8[j] : m;
    for (; l < len; ++l) {
      m = xr[l] > m ? xr[l] : m;
      bad |= nonfinite_bits(xr[l]);
    }
    mx[r] = m;
    for (l = 0; l < len; ++l)
      yr[l] = xr[l] - m;
  }
  return (bad >> 31) == 0;
}
PCY_NN_NATIVE_CLONES inline void log_softmax_rows_finish(const float* x, float* y,
                                                         const double* mx, uint64_t rows,
                                                         uint64_t len) {
  for (uint64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * len;
    float* yr = y + r * len;
    double s8[8] = {};
    uint64_t l = 0;
    for (; l + 8 <= len; l += 8)
      for (int j = 0; j < 8; ++j)
        s8[j] += static_cast<double>(yr[l + j]);
    double s = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
    for (; l < len; ++l)
      s += static_cast<double>(yr[l]);
    // The maximum's term is exactly 1, so s >= 1 (should oneDNN's exp(0) come out an ulp low,
    // log(s) must still not go below 0: y is never above 0).
    const float m = static_cast<float>(mx[r]), ls = static_cast<float>(std::log(std::max(s, 1.0)));
    for (l = 0; l < len; ++l)
      yr[l] = (xr[l] - m) - ls;
  }
}

// log_softmax_grad of rows whose dx already holds e^y (oneDNN's exp): dx = dy - e^y sum(dy), the
// sum in wide_sums' lanes. Built like the other loops, but without contracting dy - e^y s into a
// fused multiply-add (the baseline build has none): the same bits on either build.
#if defined(__GNUC__) && !defined(__clang__)
#define PCY_NN_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define PCY_NN_NO_CONTRACT
#endif
template <unsigned W>
[[gnu::always_inline]] inline void log_softmax_grad_rows_body(const float* dy, float* dx,
                                                              uint64_t rows, uint64_t len) {
  for (uint64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * len;
    float* dxr = dx + r * len;
    const auto sum = static_cast<float>(wide_sum<W>(
        len, [&](uint64_t l) PCY_NN_AI { return wide_load<W>(dyr + l); },
        [&](uint64_t l) PCY_NN_AI { return static_cast<double>(dyr[l]); }));
    for (uint64_t l = 0; l < len; ++l)
      dxr[l] = dyr[l] - dxr[l] * sum;
  }
}
PCY_NN_NATIVE_CLONES PCY_NN_NO_CONTRACT inline void
log_softmax_grad_rows_4(const float* dy, float* dx, uint64_t rows, uint64_t len) {
  log_softmax_grad_rows_body<4>(dy, dx, rows, len);
}
#if defined(PCY_NN_HAVE_512)
PCY_NN_TARGET_512 PCY_NN_NO_CONTRACT inline void
log_softmax_grad_rows_512(const float* dy, float* dx, uint64_t rows, uint64_t len) {
  log_softmax_grad_rows_body<8>(dy, dx, rows, len);
}
#endif
inline void log_softmax_grad_rows(const float* dy, float* dx, uint64_t rows, uint64_t len) {
  PCY_NN_USE_512(log_softmax_grad_rows_512(dy, dx, rows, len))
  log_softmax_grad_rows_4(dy, dx, rows, len);
}

// softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - e^y sum(dy). scratch: inner doubles.
template <unsigned W, class T>
[[gnu::always_inline]] inline void softmax_bwd_body(const T* y, const T* dy, T* dx, uint64_t outer,
                                                    uint64_t len, uint64_t inner, bool log,
                                                    double* scratch) {
  if (inner == 1) { // rows: the sum in lanes, then one pass
    for (uint64_t o = 0; o < outer; ++o) {
      const T* yr = y + o * len;
      const T* dyr = dy + o * len;
      T* dxr = dx + o * len;
      if (log) {
        const T s = static_cast<T>(wide_sum<W>(
            len, [&](uint64_t l) PCY_NN_AI { return wide_load<W>(dyr + l); },
            [&](uint64_t l) PCY_NN_AI { return double(dyr[l]); }));
        for (uint64_t l = 0; l < len; ++l)
          dxr[l] = dyr[l] - std::exp(yr[l]) * s;
      } else {
        const T s = static_cast<T>(wide_sum<W>(
            len, [&](uint64_t l) PCY_NN_AI { return wide_load<W>(dyr + l) * wide_load<W>(yr + l); },
            [&](uint64_t l) PCY_NN_AI { return double(dyr[l]) * double(yr[l]); }));
        for (uint64_t l = 0; l < len; ++l)
          dxr[l] = yr[l] * (dyr[l] - s);
      }
    }
    return;
  }
  double* sum = scratch;
  for (uint64_t o = 0; o < outer; ++o) {
    const uint64_t base = o * len * inner;
    const T* yo = y + base;
    const T* dyo = dy + base;
    T* dxo = dx + base;
    for (uint64_t i = 0; i < inner; ++i)
      sum[i] = 0;
    for (uint64_t l = 0; l < len; ++l)
      for (uint64_t i = 0; i < inner; ++i) {
        const uint64_t k = l * inner + i;
        sum[i] += log ? static_cast<double>(dyo[k])
                      : static_cast<double>(dyo[k]) * static_cast<double>(yo[k]);
      }
    for (uint64_t l = 0; l < len; ++l)
      for (uint64_t i = 0; i < inner; ++i) {
        const uint64_t k = l * inner + i;
        const T s = static_cast<T>(sum[i]);
        dxo[k] = log ? dyo[k] - std::exp(yo[k]) * s : yo[k] * (dyo[k] - s);
      }
  }
}

// ---- convolution ----------------------------------------------------------------------------

struct conv_geom {
  int64_t N = 0, C = 0, H = 0, W = 0, K = 0, R = 0, S = 0, P = 0, Q = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, G = 1;
  int64_t Cg() const { return C / G; }
  int64_t Kg() const { return K / G; }
  int64_t CRS() const { return Cg() * R * S; }
  int64_t PQ() const { return P * Q; }
};

// im2col of one image and group: col[(c R + r) S + s][p Q + q] = x[c, ih, iw] (0 outside).
template <class T> void im2col(const conv_geom& g, const T* x, T* col) {
  const int64_t PQ = g.PQ();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t r = 0; r < g.R; ++r)
      for (int64_t s = 0; s < g.S; ++s) {
        T* out = col + ((c * g.R + r) * g.S + s) * PQ;
        const int64_t off = s * g.dw - g.pw;
        int64_t q0, q1;
        valid_range(g.Q, g.sw, off, g.W, q0, q1);
        for (int64_t p = 0; p < g.P; ++p) {
          T* o = out + p * g.Q;
          const int64_t ih = p * g.sh - g.ph + r * g.dh;
          if (ih < 0 || ih >= g.H) {
            zero(o, static_cast<uint64_t>(g.Q));
            continue;
          }
          const T* xr = x + (c * g.H + ih) * g.W + off;
          for (int64_t q = 0; q < q0; ++q)
            o[q] = T(0);
          if (g.sw == 1)
            for (int64_t q = q0; q < q1; ++q)
              o[q] = xr[q];
          else
            for (int64_t q = q0; q < q1; ++q)
              o[q] = xr[q * g.sw];
          for (int64_t q = q1; q < g.Q; ++q)
            o[q] = T(0);
        }
      }
}
// The adjoint: dx[c, ih, iw] += col[...] (dx of one image and group, not cleared here).
template <class T> void col2im(const conv_geom& g, const T* col, T* dx) {
  const int64_t PQ = g.PQ();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t r = 0; r < g.R; ++r)
      for (int64_t s = 0; s < g.S; ++s) {
        const T* in = col + ((c * g.R + r) * g.S + s) * PQ;
        const int64_t off = s * g.dw - g.pw;
        int64_t q0, q1;
        valid_range(g.Q, g.sw, off, g.W, q0, q1);
        for (int64_t p = 0; p < g.P; ++p) {
          const int64_t ih = p * g.sh - g.ph + r * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          const T* i = in + p * g.Q;
          T* xr = dx + (c * g.H + ih) * g.W + off;
          if (g.sw == 1)
            for (int64_t q = q0; q < q1; ++q)
              xr[q] += i[q];
          else
            for (int64_t q = q0; q < q1; ++q)
              xr[q * g.sw] += i[q];
        }
      }
}

// C (M x N, row-major, ld N) = A B with A(i, k) = A[i sai + k sak] and B K x N (ld N): tiles
// of MR x NR kept in registers over the whole K, B's panel of NR columns reused from L1 across
// the row tiles.
template <class T, int MR, int NR>
[[gnu::always_inline]] inline void gemm_tile(int64_t K, const T* A, int64_t sai, int64_t sak,
                                             const T* B, int64_t ldb, T* C, int64_t ldc, bool add) {
  T acc[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int j = 0; j < NR; ++j)
      acc[m][j] = add ? C[m * ldc + j] : T(0);
  for (int64_t k = 0; k < K; ++k) {
    const T* b = B + k * ldb;
    for (int m = 0; m < MR; ++m) {
      const T a = A[m * sai + k * sak];
      for (int j = 0; j < NR; ++j)
        acc[m][j] += a * b[j];
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int j = 0; j < NR; ++j)
      C[m * ldc + j] = acc[m][j];
}
// K is walked in blocks of KB rows of B, so that a block stays in L2 and one panel of it (KB x
// NR) in L1 while every row tile of C passes over it.
template <class T>
[[gnu::always_inline]] inline void gemm_body(int64_t M, int64_t N, int64_t K, const T* A,
                                             int64_t sai, int64_t sak, const T* B, T* C) {
  constexpr int MR = 4, NR = static_cast<int>(32 / sizeof(T));
  constexpr int64_t KB = 128;
  const int64_t Nv = N - N % NR;
  for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += KB) {
    const int64_t kb = std::min(KB, K - k0);
    const bool add = k0 > 0;
    const T* Ak = A + k0 * sak;
    const T* Bk = B + k0 * N;
    for (int64_t j0 = 0; j0 < Nv; j0 += NR) {
      int64_t i0 = 0;
      for (; i0 + MR <= M; i0 += MR)
        gemm_tile<T, MR, NR>(kb, Ak + i0 * sai, sai, sak, Bk + j0, N, C + i0 * N + j0, N, add);
      for (; i0 < M; ++i0)
        gemm_tile<T, 1, NR>(kb, Ak + i0 * sai, sai, sak, Bk + j0, N, C + i0 * N + j0, N, add);
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = Nv; j < N; ++j) {
        T s = add ? C[i * N + j] : T(0);
        for (int64_t k = 0; k < kb; ++k)
          s += Ak[i * sai + k * sak] * Bk[k * N + j];
        C[i * N + j] = s;
      }
    if (K == 0) break;
  }
}
PCY_NN_NATIVE_CLONES inline void gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t sai,
                                      int64_t sak, const float* B, float* C) {
  gemm_body(M, N, K, A, sai, sak, B, C);
}
PCY_NN_NATIVE_CLONES inline void gemm(int64_t M, int64_t N, int64_t K, const double* A, int64_t sai,
                                      int64_t sak, const double* B, double* C) {
  gemm_body(M, N, K, A, sai, sak, B, C);
}

// Algorithm "im2col + gemm": col holds CRS x PQ elements (the workspace).
template <class T> void conv_fwd_im2col(const conv_geom& g, const T* x, const T* w, T* y, T* col) {
  const int64_t Cg = g.Cg(), Kg = g.Kg(), CRS = g.CRS(), PQ = g.PQ(), HW = g.H * g.W;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gr = 0; gr < g.G; ++gr) {
      im2col(g, x + (n * g.C + gr * Cg) * HW, col);
      gemm(Kg, PQ, CRS, w + gr * Kg * CRS, CRS, 1, col, y + (n * g.K + gr * Kg) * PQ);
    }
}
template <class T>
void conv_bwd_data_im2col(const conv_geom& g, const T* w, const T* dy, T* dx, T* col) {
  const int64_t Cg = g.Cg(), Kg = g.Kg(), CRS = g.CRS(), PQ = g.PQ(), HW = g.H * g.W;
  zero(dx, static_cast<uint64_t>(g.N * g.C * HW));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gr = 0; gr < g.G; ++gr) {
      // col (CRS x PQ) = w_g^T (CRS x Kg) dy_g (Kg x PQ)
      gemm(CRS, PQ, Kg, w + gr * Kg * CRS, 1, CRS, dy + (n * g.K + gr * Kg) * PQ, col);
      col2im(g, col, dx + (n * g.C + gr * Cg) * HW);
    }
}
template <class T>
void conv_bwd_filter_im2col(const conv_geom& g, const T* x, const T* dy, T* dw, T* col) {
  const int64_t Cg = g.Cg(), Kg = g.Kg(), CRS = g.CRS(), PQ = g.PQ(), HW = g.H * g.W;
  zero(dw, static_cast<uint64_t>(g.K * CRS));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gr = 0; gr < g.G; ++gr) {
      im2col(g, x + (n * g.C + gr * Cg) * HW, col);
      const T* dyg = dy + (n * g.K + gr * Kg) * PQ;
      T* dwg = dw + gr * Kg * CRS;
      for (int64_t k = 0; k < Kg; ++k)
        for (int64_t row = 0; row < CRS; ++row)
          dwg[k * CRS + row] += dot(dyg + k * PQ, col + row * PQ, PQ);
    }
}

// Algorithm "direct": no workspace.
template <class T> void conv_fwd_direct(const conv_geom& g, const T* x, const T* w, T* y) {
  const int64_t Cg = g.Cg(), Kg = g.Kg(), PQ = g.PQ(), HW = g.H * g.W;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      const int64_t gr = k / Kg;
      T* yp = y + (n * g.K + k) * PQ;
      zero(yp, static_cast<uint64_t>(PQ));
      for (int64_t c = 0; c < Cg; ++c) {
        const T* xp = x + (n * g.C + gr * Cg + c) * HW;
        for (int64_t r = 0; r < g.R; ++r)
          for (int64_t s = 0; s < g.S; ++s) {
            const T wv = w[((k * Cg + c) * g.R + r) * g.S + s];
            const int64_t off = s * g.dw - g.pw;
            int64_t q0, q1;
            valid_range(g.Q, g.sw, off, g.W, q0, q1);
            for (int64_t p = 0; p < g.P; ++p) {
              const int64_t ih = p * g.sh - g.ph + r * g.dh;
              if (ih < 0 || ih >= g.H) continue;
              const T* xr = xp + ih * g.W + off;
              T* yr = yp + p * g.Q;
              if (g.sw == 1)
                for (int64_t q = q0; q < q1; ++q)
                  yr[q] += wv * xr[q];
              else
                for (int64_t q = q0; q < q1; ++q)
                  yr[q] += wv * xr[q * g.sw];
            }
          }
      }
    }
}
template <class T> void conv_bwd_data_direct(const conv_geom& g, const T* w, const T* dy, T* dx) {
  const int64_t Cg = g.Cg(), Kg = g.Kg(), PQ = g.PQ(), HW = g.H * g.W;
  zero(dx, static_cast<uint64_t>(g.N * g.C * HW));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      const int64_t gr = k / Kg;
      const T* dyp = dy + (n * g.K + k) * PQ;
      for (int64_t c = 0; c < Cg; ++c) {
        T* dxp = dx + (n * g.C + gr * Cg + c) * HW;
        for (int64_t r = 0; r < g.R; ++r)
          for (int64_t s = 0; s < g.S; ++s) {
            const T wv = w[((k * Cg + c) * g.R + r) * g.S + s];
            const int64_t off = s * g.dw - g.pw;
            int64_t q0, q1;
            valid_range(g.Q, g.sw, off, g.W, q0, q1);
            for (int64_t p = 0; p < g.P; ++p) {
              const int64_t ih = p * g.sh - g.ph + r * g.dh;
              if (ih < 0 || ih >= g.H) continue;
              T* xr = dxp + ih * g.W + off;
              const T* yr = dyp + p * g.Q;
              if (g.sw == 1)
                for (int64_t q = q0; q < q1; ++q)
                  xr[q] += wv * yr[q];
              else
                for (int64_t q = q0; q < q1; ++q)
                  xr[q * g.sw] += wv * yr[q];
            }
          }
      }
    }
}
template <class T> void conv_bwd_filter_direct(const conv_geom& g, const T* x, const T* dy, T* dw) {
  const int64_t Cg = g.Cg(), Kg = g.Kg(), PQ = g.PQ(), HW = g.H * g.W;
  zero(dw, static_cast<uint64_t>(g.K * g.CRS()));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      const int64_t gr = k / Kg;
      const T* dyp = dy + (n * g.K + k) * PQ;
      for (int64_t c = 0; c < Cg; ++c) {
        const T* xp = x + (n * g.C + gr * Cg + c) * HW;
        for (int64_t r = 0; r < g.R; ++r)
          for (int64_t s = 0; s < g.S; ++s) {
            const int64_t off = s * g.dw - g.pw;
            int64_t q0, q1;
            valid_range(g.Q, g.sw, off, g.W, q0, q1);
            T acc = T(0);
            for (int64_t p = 0; p < g.P; ++p) {
              const int64_t ih = p * g.sh - g.ph + r * g.dh;
              if (ih < 0 || ih >= g.H || q1 <= q0) continue;
              const T* xr = xp + ih * g.W + off + q0 * g.sw;
              const T* yr = dyp + p * g.Q + q0;
              acc += g.sw == 1 ? dot(yr, xr, q1 - q0) : dot_strided(yr, xr, g.sw, q1 - q0);
            }
            dw[((k * Cg + c) * g.R + r) * g.S + s] += acc;
          }
      }
    }
}

// y[n, k, :] += bias[k]; db[k] = sum over n and the plane of dy[n, k, :].
template <class T> void conv_bias(T* y, const T* b, int64_t N, int64_t K, int64_t PQ) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      T* yp = y + (n * K + k) * PQ;
      const T bk = b[k];
      for (int64_t i = 0; i < PQ; ++i)
        yp[i] += bk;
    }
}
template <class T> void conv_grad_bias(const T* dy, T* db, int64_t N, int64_t K, int64_t PQ) {
  for (int64_t k = 0; k < K; ++k) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* p = dy + (n * K + k) * PQ;
      double part[4] = {};
      int64_t i = 0;
      for (; i + 4 <= PQ; i += 4)
        for (int j = 0; j < 4; ++j)
          part[j] += static_cast<double>(p[i + j]);
      for (; i < PQ; ++i)
        part[0] += static_cast<double>(p[i]);
      s += (part[0] + part[1]) + (part[2] + part[3]);
    }
    db[k] = static_cast<T>(s);
  }
}

// ---- pooling --------------------------------------------------------------------------------

struct pool_geom {
  int64_t planes = 0, H = 0, W = 0, P = 0, Q = 0;
  int64_t wh = 1, ww = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool include_padding = true;
};

// The window of output (p, q) clipped to the plane: rows [h0, h1), columns [w0, w1).
inline void pool_window(const pool_geom& g, int64_t p, int64_t q, int64_t& h0, int64_t& h1,
                        int64_t& w0, int64_t& w1) {
  const int64_t hs = p * g.sh - g.ph, ws = q * g.sw - g.pw;
  h0 = std::max<int64_t>(hs, 0);
  h1 = std::min(hs + g.wh, g.H);
  w0 = std::max<int64_t>(ws, 0);
  w1 = std::min(ws + g.ww, g.W);
}

// The first maximum of the window in row-major order, NaN above every number. Returns its
// position h W + w in the plane.
template <class T>
inline int64_t window_argmax(const pool_geom& g, const T* xp, int64_t h0, int64_t h1, int64_t w0,
                             int64_t w1) {
  int64_t best = h0 * g.W + w0;
  T bv = xp[best];
  if (bv != bv) return best;
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t w = w0; w < w1; ++w) {
      const T v = xp[h * g.W + w];
      if (v > bv || v != v) {
        bv = v;
        best = h * g.W + w;
        if (v != v) return best;
      }
    }
  return best;
}

// One output, without branches on the data (a compare picks the maximum and its position; a NaN
// only marks the window, which window_argmax then takes again): random data mispredicted most
// compares of a branching loop.
template <class T>
[[gnu::always_inline]] inline int64_t pool_max_one(const pool_geom& g, const T* xp, int64_t p,
                                                   int64_t q) {
  int64_t h0, h1, w0, w1;
  pool_window(g, p, q, h0, h1, w0, w1);
  int64_t at = h0 * g.W + w0;
  T bv = xp[at];
  bool nan = false;
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t w = w0; w < w1; ++w) {
      const T v = xp[h * g.W + w];
      const bool gt = v > bv;
      bv = gt ? v : bv;
      at = gt ? h * g.W + w : at;
      nan |= v != v;
    }
  return nan ? window_argmax(g, xp, h0, h1, w0, w1) : at;
}
// Outputs q0 .. q0 + nb - 1 of row p whose windows lie inside the plane's columns, column
// stride SW: the window's maximum for the whole block at once (a loop the compiler vectorises);
// nz[i] becomes NaN where the window holds a NaN or an infinity (v - v), which the caller takes
// again one at a time.
template <int SW, class T>
[[gnu::always_inline]] inline void pool_max_block(const pool_geom& g, const T* xp, int64_t h0,
                                                  int64_t h1, int64_t c0, int64_t nb, T* bv,
                                                  T* nz) {
  int64_t i0 = 0;
#if defined(__GNUC__) && !defined(__clang__)
  if constexpr (SW == 2) {
    // Column stride 2: a vector of VL outputs at a time, its maximum and NaN mark in registers
    // over the whole window (h, then s: the compares of the loop below, in its order), each
    // window column's VL elements the even lanes of two overlapping loads (the last element
    // read is the block's last window's: nothing past the plane).
    constexpr int VL = 32 / static_cast<int>(sizeof(T));
    using vec = typename vec32<T>::type;
    using ivec = typename vec32<T>::index;
    ivec even{};
    for (int l = 0; l < VL / 2; ++l) {
      even[l] = 2 * l;              // a's even lanes
      even[VL / 2 + l] = VL + 2 * l + 1; // b (loaded from VL - 1 on) from its lane 1
    }
    auto column = [&](int64_t h, int64_t s, int64_t at, vec& v) PCY_NN_AI {
      const T* src = xp + h * g.W + c0 + 2 * at + s;
      vec a, b;
      std::memcpy(&a, src, sizeof(vec));
      std::memcpy(&b, src + VL - 1, sizeof(vec));
      v = __builtin_shuffle(a, b, even);
    };
    // The last vector ends at nb (it may redo outputs of the one before: the same values).
    for (int64_t at = 0; nb >= VL && at < nb; at += VL) {
      at = std::min(at, nb - VL);
      vec m, z{}, v;
      column(h0, 0, at, m);
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t s = 0; s < g.ww; ++s) {
          column(h, s, at, v);
          m = v > m ? v : m;
          z += v - v;
        }
      std::memcpy(bv + at, &m, sizeof(vec));
      std::memcpy(nz + at, &z, sizeof(vec));
      i0 = at + VL;
    }
    if (i0 == nb) return;
  }
#endif
  for (int64_t i = i0; i < nb; ++i) {
    bv[i] = xp[h0 * g.W + c0 + i * SW];
    nz[i] = T(0);
  }
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t s = 0; s < g.ww; ++s) {
      const T* src = xp + h * g.W + c0 + s;
      for (int64_t i = i0; i < nb; ++i) {
        const T v = src[i * SW];
        bv[i] = v > bv[i] ? v : bv[i];
        nz[i] += v - v;
      }
    }
}
// Rows of outputs: without indices and where the column stride is 1 or 2, the outputs whose
// windows lie inside the plane's columns in blocks of 64 (pool_max_block), the rest (and every
// output of the indexed forward) one at a time. The first maximum
// in row-major order, a NaN above every number (window_argmax for a window holding one).
template <class T>
[[gnu::always_inline]] inline void pool_max_body(const pool_geom& g, const T* x, T* y,
                                                 int32_t* idx) {
  const int64_t HW = g.H * g.W, PQ = g.P * g.Q;
  int64_t qa = 0, qb = 0; // outputs with whole windows along the columns: [qa, qb)
  if (idx == nullptr && (g.sw == 1 || g.sw == 2))
    valid_range(g.Q, g.sw, -g.pw, g.W - g.ww + 1, qa, qb);
  constexpr int64_t B = 64;
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* xp = x + pl * HW;
    T* yp = y + pl * PQ;
    int32_t* ip = idx != nullptr ? idx + pl * PQ : nullptr;
    auto one = [&](int64_t p, int64_t q) PCY_NN_AI {
      const int64_t at = pool_max_one(g, xp, p, q);
      yp[p * g.Q + q] = xp[at];
      if (ip != nullptr) ip[p * g.Q + q] = static_cast<int32_t>(at);
    };
    for (int64_t p = 0; p < g.P; ++p) {
      const int64_t hs = p * g.sh - g.ph;
      const int64_t h0 = std::max<int64_t>(hs, 0), h1 = std::min(hs + g.wh, g.H);
      for (int64_t q = 0; q < qa; ++q)
        one(p, q);
      for (int64_t q0 = qa; q0 < qb; q0 += B) {
        const int64_t nb = std::min(B, qb - q0);
        T nz[B];
        T* bv = yp + p * g.Q + q0; // the block's maxima, written in place
        const int64_t c0 = q0 * g.sw - g.pw; // the first window's first column
        if (g.sw == 1)
          pool_max_block<1>(g, xp, h0, h1, c0, nb, bv, nz);
        else
          pool_max_block<2>(g, xp, h0, h1, c0, nb, bv, nz);
        // Again one at a time where the position is wanted too or a window is not finite.
        int clean = ip == nullptr ? 1 : 0;
        for (int64_t i = 0; i < nb; ++i)
          clean &= nz[i] == T(0) ? 1 : 0;
        if (clean == 0)
          for (int64_t i = 0; i < nb; ++i)
            if (ip != nullptr || nz[i] != T(0)) one(p, q0 + i);
      }
      for (int64_t q = std::max(qa, qb); q < g.Q; ++q)
        one(p, q);
    }
  }
}
PCY_NN_NATIVE_CLONES inline void pool_max_fwd(const pool_geom& g, const float* x, float* y,
                                              int32_t* idx) {
  pool_max_body(g, x, y, idx);
}
PCY_NN_NATIVE_CLONES inline void pool_max_fwd(const pool_geom& g, const double* x, double* y,
                                              int32_t* idx) {
  pool_max_body(g, x, y, idx);
}
template <class T> void pool_max_bwd(const pool_geom& g, const T* x, const T* dy, T* dx) {
  const int64_t HW = g.H * g.W, PQ = g.P * g.Q;
  zero(dx, static_cast<uint64_t>(g.planes * HW));
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* xp = x + pl * HW;
    for (int64_t p = 0; p < g.P; ++p)
      for (int64_t q = 0; q < g.Q; ++q) {
        int64_t h0, h1, w0, w1;
        pool_window(g, p, q, h0, h1, w0, w1);
        dx[pl * HW + window_argmax(g, xp, h0, h1, w0, w1)] += dy[pl * PQ + p * g.Q + q];
      }
  }
}
template <class T>
void pool_max_bwd_indexed(int64_t planes, int64_t HW, int64_t PQ, const T* dy, const int32_t* idx,
                          T* dx) {
  zero(dx, static_cast<uint64_t>(planes * HW));
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t i = 0; i < PQ; ++i) {
      const int64_t at = idx[pl * PQ + i];
      if (at >= 0 && at < HW) dx[pl * HW + at] += dy[pl * PQ + i];
    }
}
template <class T> void pool_avg_fwd(const pool_geom& g, const T* x, T* y) {
  const int64_t HW = g.H * g.W, PQ = g.P * g.Q;
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* xp = x + pl * HW;
    for (int64_t p = 0; p < g.P; ++p)
      for (int64_t q = 0; q < g.Q; ++q) {
        int64_t h0, h1, w0, w1;
        pool_window(g, p, q, h0, h1, w0, w1);
        double s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w)
            s += static_cast<double>(xp[h * g.W + w]);
        const double div = g.include_padding ? static_cast<double>(g.wh * g.ww)
                                             : static_cast<double>((h1 - h0) * (w1 - w0));
        y[pl * PQ + p * g.Q + q] = static_cast<T>(s / div);
      }
  }
}
template <class T> void pool_avg_bwd(const pool_geom& g, const T* dy, T* dx) {
  const int64_t HW = g.H * g.W, PQ = g.P * g.Q;
  zero(dx, static_cast<uint64_t>(g.planes * HW));
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    T* xp = dx + pl * HW;
    for (int64_t p = 0; p < g.P; ++p)
      for (int64_t q = 0; q < g.Q; ++q) {
        int64_t h0, h1, w0, w1;
        pool_window(g, p, q, h0, h1, w0, w1);
        const T div =
            g.include_padding ? static_cast<T>(g.wh * g.ww) : static_cast<T>((h1 - h0) * (w1 - w0));
        const T v = dy[pl * PQ + p * g.Q + q] / div;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w)
            xp[h * g.W + w] += v;
      }
  }
}

// ---- LRN (across channels) ------------------------------------------------------------------

struct lrn_geom {
  int64_t N = 0, C = 0, HW = 0, n = 1;
  double alpha = 0, beta = 0, k = 1;
};

// One channel's scale: s[i] = k + alpha/n * (sum of x^2 over the channels of c's window),
// summed afresh in double for each channel (no running sum: nothing leaks across channels).
template <class T>
[[gnu::always_inline]] inline void lrn_channel_scale(const lrn_geom& g, const T* x, int64_t c,
                                                     double* s) {
  const double an = g.alpha / static_cast<double>(g.n);
  for (int64_t i = 0; i < g.HW; ++i)
    s[i] = 0;
  const int64_t lo = std::max<int64_t>(c - g.n / 2, 0), hi = std::min(c + (g.n - 1) / 2, g.C - 1);
  for (int64_t cc = lo; cc <= hi; ++cc) {
    const T* xc = x + cc * g.HW;
    for (int64_t i = 0; i < g.HW; ++i)
      s[i] += static_cast<double>(xc[i]) * static_cast<double>(xc[i]);
  }
  for (int64_t i = 0; i < g.HW; ++i)
    s[i] = g.k + an * s[i];
}

// s[c] = k + alpha / n * sum_{c' in [c - n/2, c + (n-1)/2] and [0, C)} x[c']^2, for one image:
// s holds C x HW doubles.
template <class T> void lrn_scale(const lrn_geom& g, const T* x, double* s) {
  for (int64_t c = 0; c < g.C; ++c)
    lrn_channel_scale(g, x, c, s + c * g.HW);
}

// s^-beta for the s of lrn_scale (s >= k > 0, or NaN / +Inf). f32 results with beta 0.75
// (AlexNet's), 0.5 or 1 take square roots and a division (vectorised, a few ulps of double);
// everything else std::pow.
template <class T>
inline void lrn_apply(const T* x, T* y, const double* s, int64_t n, double beta) {
  if constexpr (sizeof(T) == 4) {
    if (beta == 0.75) {
      for (int64_t i = 0; i < n; ++i) {
        const double r = std::sqrt(s[i]);
        y[i] = static_cast<T>(static_cast<double>(x[i]) / (r * std::sqrt(r)));
      }
      return;
    }
    if (beta == 0.5) {
      for (int64_t i = 0; i < n; ++i)
        y[i] = static_cast<T>(static_cast<double>(x[i]) / std::sqrt(s[i]));
      return;
    }
    if (beta == 1) {
      for (int64_t i = 0; i < n; ++i)
        y[i] = static_cast<T>(static_cast<double>(x[i]) / s[i]);
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<T>(static_cast<double>(x[i]) * std::pow(s[i], -beta));
}
// One image: each channel's window summed afresh (never a running sum: one NaN, infinity or
// huge square would then stay in the channels after its window). scratch: HW doubles.
template <class T>
inline void lrn_image_body(const lrn_geom& g, const T* xi, T* yi, int64_t c0, int64_t c1,
                           double* scratch) {
  for (int64_t c = c0; c < c1; ++c) {
    lrn_channel_scale(g, xi, c, scratch);
    lrn_apply(xi + c * g.HW, yi + c * g.HW, scratch, g.HW, g.beta);
  }
}
// f32: each channel's window summed afresh in f32 (in channel order) and s^-beta in f32, eight
// lanes where the double form has four and with f32's square root and division. pcy_nn.h's
// semantics hold: a NaN or infinity reaches exactly the channels whose window holds it (no
// running sum), and finite inputs stay within the suite's bounds up to the magnitude at which a
// window's sum of squares still fits f32 (docs/nn.md, "Input classes"). beta other than 0.75,
// 0.5 or 1 takes std::pow in double. Channels [c0, c1) of one image (each channel's output
// depends on x alone, so channel blocks may run on different threads). scratch: HW doubles, used
// as HW floats.
PCY_NN_NATIVE_CLONES inline void lrn_image(const lrn_geom& g, const float* x, float* y, int64_t c0,
                                           int64_t c1, double* scratch) {
  float* s = reinterpret_cast<float*>(scratch);
  const float an = static_cast<float>(g.alpha / static_cast<double>(g.n));
  const float k = static_cast<float>(g.k);
  const int64_t HW = g.HW;
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t i = 0; i < HW; ++i)
      s[i] = 0;
    const int64_t lo = std::max<int64_t>(c - g.n / 2, 0), hi = std::min(c + (g.n - 1) / 2, g.C - 1);
    for (int64_t cc = lo; cc <= hi; ++cc) {
      const float* xc = x + cc * HW;
      for (int64_t i = 0; i < HW; ++i)
        s[i] += xc[i] * xc[i];
    }
    const float* xi = x + c * HW;
    float* yi = y + c * HW;
    if (g.beta == 0.75) {
      for (int64_t i = 0; i < HW; ++i) {
        const float r = std::sqrt(k + an * s[i]);
        yi[i] = xi[i] / (r * std::sqrt(r));
      }
    } else if (g.beta == 0.5) {
      for (int64_t i = 0; i < HW; ++i)
        yi[i] = xi[i] / std::sqrt(k + an * s[i]);
    } else if (g.beta == 1) {
      for (int64_t i = 0; i < HW; ++i)
        yi[i] = xi[i] / (k + an * s[i]);
    } else {
      for (int64_t i = 0; i < HW; ++i)
        yi[i] = static_cast<float>(static_cast<double>(xi[i]) *
                                   std::pow(static_cast<double>(k + an * s[i]), -g.beta));
    }
  }
}
PCY_NN_NATIVE_CLONES inline void lrn_image(const lrn_geom& g, const double* x, double* y,
                                           int64_t c0, int64_t c1, double* scratch) {
  lrn_image_body(g, x, y, c0, c1, scratch);
}
// The (image, channel) pairs [lo, hi) in image-major order.
template <class T>
void lrn_fwd(const lrn_geom& g, const T* x, T* y, int64_t lo, int64_t hi, double* scratch) {
  const int64_t CHW = g.C * g.HW;
  for (int64_t n = lo / g.C; n * g.C < hi; ++n) {
    const int64_t c0 = std::max(lo - n * g.C, int64_t{0}), c1 = std::min(hi - n * g.C, g.C);
    lrn_image(g, x + n * CHW, y + n * CHW, c0, c1, scratch);
  }
}
// dx[c] = dy[c] s[c]^-beta - 2 alpha beta / n x[c] sum_{c': c in W(c')} dy[c'] y[c'] / s[c'].
// scratch: 2 x C x HW doubles.
// Images [n0, n1).
template <class T>
void lrn_bwd(const lrn_geom& g, const T* x, const T* y, const T* dy, T* dx, int64_t n0, int64_t n1,
             double* scratch) {
  const int64_t CHW = g.C * g.HW;
  double* s = scratch;
  double* ratio = scratch + CHW;
  const double coef = 2.0 * g.alpha * g.beta / static_cast<double>(g.n);
  for (int64_t n = n0; n < n1; ++n) {
    const T* xi = x + n * CHW;
    const T* yi = y + n * CHW;
    const T* dyi = dy + n * CHW;
    T* dxi = dx + n * CHW;
    lrn_scale(g, xi, s);
    for (int64_t i = 0; i < CHW; ++i)
      ratio[i] = static_cast<double>(dyi[i]) * static_cast<double>(yi[i]) / s[i];
    for (int64_t c = 0; c < g.C; ++c) {
      // c in W(c') <=> c - (n-1)/2 <= c' <= c + n/2
      const int64_t lo = std::max<int64_t>(c - (g.n - 1) / 2, 0),
                    hi = std::min(c + g.n / 2, g.C - 1);
      T* dxc = dxi + c * g.HW;
      const T* xc = xi + c * g.HW;
      const T* dyc = dyi + c * g.HW;
      const double* sc = s + c * g.HW;
      for (int64_t i = 0; i < g.HW; ++i) {
        double acc = 0;
        for (int64_t cc = lo; cc <= hi; ++cc)
          acc += ratio[cc * g.HW + i];
        dxc[i] = static_cast<T>(static_cast<double>(dyc[i]) * std::pow(sc[i], -g.beta) -
                                coef * static_cast<double>(xc[i]) * acc);
      }
    }
  }
}

// ---- dropout --------------------------------------------------------------------------------

// Elements [base, base + n) of the op (x, y and mask point at element base): each element's
// draw depends on its index alone, so blocks may run on different threads. The plain loop: the
// AVX-512 build vectorises it (a 64-bit multiply, vpmullq).
template <class T>
[[gnu::always_inline]] inline void dropout_fwd_plain(const T* x, T* y, uint8_t* mask, uint64_t n,
                                                     uint64_t seed, uint32_t threshold, T scale,
                                                     uint64_t base) {
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t z = 0;
    PCY_NN_DROPOUT_MIX(seed, base + i, z);
    const bool keep = (z >> 40) >= threshold;
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : T(0);
  }
}
// Four elements at a time in 64-bit lanes (GCC's vector extension: AVX2 and SSE2 have no 64-bit
// multiply, and the compiler leaves the plain loop scalar; built from 32-bit ones here, 2.5x
// faster). The same draws and values as the plain loop (a dropped element is +0).
template <class T>
[[gnu::always_inline]] inline void dropout_fwd_lanes(const T* x, T* y, uint8_t* mask, uint64_t n,
                                                     uint64_t seed, uint32_t threshold, T scale,
                                                     uint64_t base) {
  typedef uint64_t u64x4 __attribute__((vector_size(32)));
  typedef int64_t i64x4 __attribute__((vector_size(32)));
  typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> I;
  typedef T tx4 __attribute__((vector_size(4 * sizeof(T))));
  typedef I ix4 __attribute__((vector_size(4 * sizeof(T))));
  const u64x4 step = {1, 2, 3, 4};
  uint64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    u64x4 z = (u64x4{} + (base + i)) + step; // index + 1
    z = (u64x4{} + seed) + z * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    const i64x4 keep = (z >> 40) >= static_cast<uint64_t>(threshold); // -1 or 0 per lane
    const ix4 k = __builtin_convertvector(keep, ix4);
    tx4 v;
    std::memcpy(&v, x + i, sizeof v);
    v *= scale;
    v = reinterpret_cast<tx4>(reinterpret_cast<ix4>(v) & k);
    std::memcpy(y + i, &v, sizeof v);
    for (int l = 0; l < 4; ++l)
      mask[i + static_cast<uint64_t>(l)] = static_cast<uint8_t>(k[l] & 1);
  }
  dropout_fwd_plain(x + i, y + i, mask + i, n - i, seed, threshold, scale, base + i);
}
// dx = mask ? dy * scale : +0, eight at a time (the plain loop stayed scalar, with a branch per
// element: the byte mask against 4- or 8-byte values); dx may be dy.
template <class T>
[[gnu::always_inline]] inline void dropout_bwd_body(const T* dy, const uint8_t* mask, T* dx,
                                                    uint64_t n, T scale) {
  typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> I;
  typedef T tx8 __attribute__((vector_size(8 * sizeof(T))));
  typedef I ix8 __attribute__((vector_size(8 * sizeof(T))));
  typedef uint8_t u8x8 __attribute__((vector_size(8)));
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    u8x8 m;
    std::memcpy(&m, mask + i, sizeof m);
    const ix8 keep = __builtin_convertvector(m, ix8) != 0; // -1 or 0 per lane
    tx8 v;
    std::memcpy(&v, dy + i, sizeof v);
    v *= scale;
    v = reinterpret_cast<tx8>(reinterpret_cast<ix8>(v) & keep);
    std::memcpy(dx + i, &v, sizeof v);
  }
  for (; i < n; ++i) {
    const T d = dy[i] * scale;
    dx[i] = mask[i] != 0 ? d : T(0);
  }
}
#define PCY_NN_DROPOUT_CLONES(T)                                                                   \
  PCY_NN_NATIVE_CLONES inline void dropout_fwd_4(const T* x, T* y, uint8_t* mask, uint64_t n,      \
                                                 uint64_t seed, uint32_t threshold, T scale,       \
                                                 uint64_t base) {                                  \
    dropout_fwd_lanes(x, y, mask, n, seed, threshold, scale, base);                                \
  }                                                                                                \
  PCY_NN_NATIVE_CLONES inline void dropout_bwd(const T* dy, const uint8_t* mask, T* dx,            \
                                               uint64_t n, T scale) {                              \
    dropout_bwd_body(dy, mask, dx, n, scale);                                                      \
  }
PCY_NN_DROPOUT_CLONES(float)
PCY_NN_DROPOUT_CLONES(double)
#undef PCY_NN_DROPOUT_CLONES
#if defined(PCY_NN_HAVE_512)
template <class T>
PCY_NN_TARGET_512 void dropout_fwd_512(const T* x, T* y, uint8_t* mask, uint64_t n, uint64_t seed,
                                       uint32_t threshold, T scale, uint64_t base) {
  dropout_fwd_plain(x, y, mask, n, seed, threshold, scale, base);
}
#endif
template <class T>
void dropout_fwd(const T* x, T* y, uint8_t* mask, uint64_t n, uint64_t seed, uint32_t threshold,
                 T scale, uint64_t base) {
  PCY_NN_USE_512(dropout_fwd_512(x, y, mask, n, seed, threshold, scale, base))
  dropout_fwd_4(x, y, mask, n, seed, threshold, scale, base);
}

// ---- normalisation (pcy_nn.h) ---------------------------------------------------------------
// Rows of n: layer_norm (LAYER) or rms_norm, sums in double, in wide_sums' 32 lanes. S: the
// statistics type; mean and rstd may be null (not saved).
//
// f64 rows: the mean, then the variance from it (two passes), and y in double.
template <unsigned W, bool LAYER, class S>
[[gnu::always_inline]] inline void norm_fwd_body(const double* x, const double* w, const double* b,
                                                 double* y, S* mean, S* rstd, uint64_t outer,
                                                 uint64_t n, double eps) {
  using V = typename wide<W>::d;
  const double dn = static_cast<double>(n);
  for (uint64_t r = 0; r < outer; ++r) {
    const double* xr = x + r * n;
    double* yr = y + r * n;
    double mu = 0;
    if constexpr (LAYER) {
      double s[1];
      wide_sums<W, 1>(
          n, [&](uint64_t j, V(&o)[1]) PCY_NN_AI { o[0] = wide_load<W>(xr + j); },
          [&](uint64_t j, double(&o)[1]) PCY_NN_AI { o[0] = xr[j]; }, s);
      mu = s[0] / dn;
    }
    double q[1];
    wide_sums<W, 1>(
        n,
        [&](uint64_t j, V(&o)[1]) PCY_NN_AI {
          const V d = wide_load<W>(xr + j) - mu;
          o[0] = d * d;
        },
        [&](uint64_t j, double(&o)[1]) PCY_NN_AI {
          const double d = xr[j] - mu;
          o[0] = d * d;
        },
        q);
    const double rs = 1.0 / std::sqrt(q[0] / dn + eps);
    for (uint64_t j = 0; j < n; ++j) {
      double h = (xr[j] - mu) * rs * w[j];
      if constexpr (LAYER) h += b[j];
      yr[j] = h;
    }
    if (LAYER && mean != nullptr) mean[r] = static_cast<S>(mu); // n = 0: 0 / 0, NaN
    if (rstd != nullptr) rstd[r] = static_cast<S>(rs);
  }
}
// f32 rows: the statistics in one pass in double, about the row's first element s: with
// d = x - s (exact in double), mean = s + sum(d) / n and n var = sum(d^2) - sum(d)^2 / n. The
// shift keeps a row far from zero from cancelling: (s - mean)^2 <= n var, so the subtraction
// loses at most log2(n + 1) of double's 53 bits (n = 2^16: 36 bits left, f32 needs 24). Then
// y in f32: (x - mean) as (x - hi) - lo with mean = hi + lo in two floats, times rstd and w,
// plus b (a few ulp; the f64 path's affine where mean or rstd leaves [2^-100, 2^100], where a
// float would overflow or go subnormal, and in rows holding a NaN or an infinity).
template <unsigned W, bool LAYER, class S>
[[gnu::always_inline]] inline void norm_fwd_body(const float* x, const float* w, const float* b,
                                                 float* y, S* mean, S* rstd, uint64_t outer,
                                                 uint64_t n, double eps) {
  using V = typename wide<W>::d;
  const double dn = static_cast<double>(n);
  for (uint64_t r = 0; r < outer; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double mu = 0, q = 0;
    if constexpr (LAYER) {
      const double sh = n != 0 ? static_cast<double>(xr[0]) : 0.0;
      double s[2];
      wide_sums<W, 2>(
          n,
          [&](uint64_t j, V(&o)[2]) PCY_NN_AI {
            const V d = wide_load<W>(xr + j) - sh;
            o[0] = d;
            o[1] = d * d;
          },
          [&](uint64_t j, double(&o)[2]) PCY_NN_AI {
            const double d = static_cast<double>(xr[j]) - sh;
            o[0] = d;
            o[1] = d * d;
          },
          s);
      mu = sh + s[0] / dn; // n = 0: 0 / 0, NaN
      q = s[1] - s[0] * (s[0] / dn);
      if (q < 0) q = 0; // rounding; a NaN stays
    } else {
      double s[1];
      wide_sums<W, 1>(
          n,
          [&](uint64_t j, V(&o)[1]) PCY_NN_AI {
            const V d = wide_load<W>(xr + j);
            o[0] = d * d;
          },
          [&](uint64_t j, double(&o)[1]) PCY_NN_AI {
            const double d = static_cast<double>(xr[j]);
            o[0] = d * d;
          },
          s);
      q = s[0];
    }
    const double rs = 1.0 / std::sqrt(q / dn + eps);
    if (rs >= 0x1p-100 && rs <= 0x1p100 && std::fabs(mu) <= 0x1p100) {
      const float hi = static_cast<float>(mu), lo = static_cast<float>(mu - double(hi)),
                  rf = static_cast<float>(rs);
      for (uint64_t j = 0; j < n; ++j) {
        if constexpr (LAYER)
          yr[j] = ((xr[j] - hi) - lo) * rf * w[j] + b[j];
        else
          yr[j] = xr[j] * rf * w[j];
      }
    } else {
      for (uint64_t j = 0; j < n; ++j) {
        double h = (static_cast<double>(xr[j]) - mu) * rs * static_cast<double>(w[j]);
        if constexpr (LAYER) h += static_cast<double>(b[j]);
        yr[j] = static_cast<float>(h);
      }
    }
    if (LAYER && mean != nullptr) mean[r] = static_cast<S>(mu);
    if (rstd != nullptr) rstd[r] = static_cast<S>(rs);
  }
}
// The gradients of rows [0, outer): dx (the row sums in wide_sums' lanes), and the rows' dw (and
// db for LAYER) sums in row order into acc (2 n doubles, zeroed first), added in the same pass as
// the row's dx. The caller runs it per chunk of rows and adds the chunks' sums (nn_native.cpp,
// op_norm_grad).
template <unsigned W, bool LAYER, class T, class S>
[[gnu::always_inline]] inline void norm_bwd_dx_body(const T* x, const double* w, const S* mean,
                                                    const S* rstd, const T* dy, T* dx,
                                                    uint64_t outer, uint64_t n, double* acc) {
  using V = typename wide<W>::d;
  const double dn = static_cast<double>(n);
  for (uint64_t j = 0; j < 2 * n; ++j)
    acc[j] = 0;
  double* aw = acc;
  double* ab = acc + n;
  for (uint64_t r = 0; r < outer; ++r) {
    const T* xr = x + r * n;
    const T* dyr = dy + r * n;
    T* dxr = dx + r * n;
    const double mu = LAYER ? static_cast<double>(mean[r]) : 0.0;
    const double rs = static_cast<double>(rstd[r]);
    double sums[2];
    wide_sums<W, 2>(
        n,
        [&](uint64_t j, V(&o)[2]) PCY_NN_AI {
          const V xh = (wide_load<W>(xr + j) - mu) * rs;
          const V g = wide_load<W>(dyr + j) * wide_load<W>(w + j);
          o[0] = g;
          o[1] = g * xh;
        },
        [&](uint64_t j, double(&o)[2]) PCY_NN_AI {
          const double xh = (static_cast<double>(xr[j]) - mu) * rs;
          const double g = static_cast<double>(dyr[j]) * w[j];
          o[0] = g;
          o[1] = g * xh;
        },
        sums);
    const double sg = sums[0] / dn, sgx = sums[1] / dn;
    // dx and the row's share of dw (and db) in one pass: x and dy read once more, not twice
    for (uint64_t j = 0; j < n; ++j) {
      const double xh = (static_cast<double>(xr[j]) - mu) * rs;
      const double d = static_cast<double>(dyr[j]);
      const double g = d * w[j];
      dxr[j] = static_cast<T>(rs * (LAYER ? g - sg - xh * sgx : g - xh * sgx));
      aw[j] += d * xh;
      if constexpr (LAYER) ab[j] += d;
    }
  }
}
// dw (and db) of columns [j0, j1): the chunks' sums (part: chunk k's dw sums at 2 n k, its db
// sums n after) added in chunk order, in double.
template <bool LAYER, class T>
void norm_chunk_sums(const double* part, uint64_t chunks, uint64_t n, uint64_t j0, uint64_t j1,
                     T* dw, T* db) {
  for (uint64_t j = j0; j < j1; ++j) {
    double sw = 0, sb = 0;
    for (uint64_t k = 0; k < chunks; ++k) {
      sw += part[k * 2 * n + j];
      if constexpr (LAYER) sb += part[k * 2 * n + n + j];
    }
    dw[j] = static_cast<T>(sw);
    if constexpr (LAYER) db[j] = static_cast<T>(sb);
  }
}

// Built like gemm (AVX2 + FMA and the baseline) for f32 and f64, the norms' row loops also for
// AVX-512 (x86-64-v4) with vectors of eight doubles, picked once per process.
#if defined(PCY_NN_HAVE_512)
#define PCY_NN_NORM_512(T)                                                                         \
  PCY_NN_TARGET_512 inline void norm_fwd_512(bool layer, const T* x, const T* w, const T* b, T* y, \
                                             T* mean, T* rstd, uint64_t outer, uint64_t n,         \
                                             double eps) {                                         \
    if (layer)                                                                                     \
      norm_fwd_body<8, true>(x, w, b, y, mean, rstd, outer, n, eps);                               \
    else                                                                                           \
      norm_fwd_body<8, false>(x, w, b, y, mean, rstd, outer, n, eps);                              \
  }                                                                                                \
  PCY_NN_TARGET_512 inline void norm_bwd_dx_512(bool layer, const T* x, const double* w,           \
                                                const T* mean, const T* rstd, const T* dy, T* dx,  \
                                                uint64_t outer, uint64_t n, double* acc) {         \
    if (layer)                                                                                     \
      norm_bwd_dx_body<8, true>(x, w, mean, rstd, dy, dx, outer, n, acc);                          \
    else                                                                                           \
      norm_bwd_dx_body<8, false>(x, w, mean, rstd, dy, dx, outer, n, acc);                         \
  }                                                                                                \
  PCY_NN_TARGET_512 inline void softmax_bwd_512(const T* y, const T* dy, T* dx, uint64_t outer,    \
                                                uint64_t len, uint64_t inner, bool log,            \
                                                double* scratch) {                                 \
    softmax_bwd_body<8>(y, dy, dx, outer, len, inner, log, scratch);                               \
  }
#else
#define PCY_NN_NORM_512(T)
#endif
#define PCY_NN_NORM_CLONES(T)                                                                      \
  PCY_NN_NORM_512(T)                                                                               \
  PCY_NN_NATIVE_CLONES inline void norm_fwd_4(bool layer, const T* x, const T* w, const T* b,      \
                                              T* y, T* mean, T* rstd, uint64_t outer, uint64_t n,  \
                                              double eps) {                                        \
    if (layer)                                                                                     \
      norm_fwd_body<4, true>(x, w, b, y, mean, rstd, outer, n, eps);                               \
    else                                                                                           \
      norm_fwd_body<4, false>(x, w, b, y, mean, rstd, outer, n, eps);                              \
  }                                                                                                \
  inline void norm_fwd_c(bool layer, const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,   \
                         uint64_t outer, uint64_t n, double eps) {                                 \
    PCY_NN_USE_512(norm_fwd_512(layer, x, w, b, y, mean, rstd, outer, n, eps))                \
    norm_fwd_4(layer, x, w, b, y, mean, rstd, outer, n, eps);                                      \
  }                                                                                                \
  PCY_NN_NATIVE_CLONES inline void norm_bwd_dx_4(bool layer, const T* x, const double* w,          \
                                                 const T* mean, const T* rstd, const T* dy, T* dx, \
                                                 uint64_t outer, uint64_t n, double* acc) {        \
    if (layer)                                                                                     \
      norm_bwd_dx_body<4, true>(x, w, mean, rstd, dy, dx, outer, n, acc);                          \
    else                                                                                           \
      norm_bwd_dx_body<4, false>(x, w, mean, rstd, dy, dx, outer, n, acc);                         \
  }                                                                                                \
  inline void norm_bwd_dx_c(bool layer, const T* x, const double* w, const T* mean, const T* rstd, \
                            const T* dy, T* dx, uint64_t outer, uint64_t n, double* acc) {         \
    PCY_NN_USE_512(norm_bwd_dx_512(layer, x, w, mean, rstd, dy, dx, outer, n, acc))           \
    norm_bwd_dx_4(layer, x, w, mean, rstd, dy, dx, outer, n, acc);                                 \
  }                                                                                                \
  PCY_NN_NATIVE_CLONES inline void softmax_bwd_4(const T* y, const T* dy, T* dx, uint64_t outer,   \
                                                 uint64_t len, uint64_t inner, bool log,           \
                                                 double* scratch) {                                \
    softmax_bwd_body<4>(y, dy, dx, outer, len, inner, log, scratch);                               \
  }                                                                                                \
  inline void softmax_bwd(const T* y, const T* dy, T* dx, uint64_t outer, uint64_t len,            \
                          uint64_t inner, bool log, double* scratch) {                             \
    PCY_NN_USE_512(softmax_bwd_512(y, dy, dx, outer, len, inner, log, scratch))               \
    softmax_bwd_4(y, dy, dx, outer, len, inner, log, scratch);                                     \
  }
PCY_NN_NORM_CLONES(float)
PCY_NN_NORM_CLONES(double)
#undef PCY_NN_NORM_CLONES
// Statistics of the data's type (pcy_nn.h's statistics dtype for f32 and f64).
template <bool LAYER, class T>
void norm_fwd(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, uint64_t outer,
              uint64_t n, double eps) {
  norm_fwd_c(LAYER, x, w, b, y, mean, rstd, outer, n, eps);
}

// ---- batch normalisation (pcy_nn.h) ---------------------------------------------------------
// x is N x C x sp; channel c's elements are x[(n C + c) sp + s]. Sums in double, in (n, s)
// order. Statistics pointers may be null (absent); training needs M = N sp >= 2 (the decoder).
template <class T, class S>
void bn_fwd(const T* x, const T* w, const T* b, S* rmean, S* rvar, T* y, S* smean, S* srstd,
            uint64_t N, uint64_t C, uint64_t sp, bool training, double momentum, double eps) {
  const uint64_t M = N * sp;
  const double dm = static_cast<double>(M);
  for (uint64_t c = 0; c < C; ++c) {
    double mu, rs;
    if (training) {
      double s1 = 0;
      for (uint64_t n = 0; n < N; ++n)
        for (uint64_t k = 0; k < sp; ++k)
          s1 += static_cast<double>(x[(n * C + c) * sp + k]);
      mu = s1 / dm;
      double s2 = 0;
      for (uint64_t n = 0; n < N; ++n)
        for (uint64_t k = 0; k < sp; ++k) {
          const double d = static_cast<double>(x[(n * C + c) * sp + k]) - mu;
          s2 += d * d;
        }
      const double var = s2 / dm;
      rs = 1.0 / std::sqrt(var + eps);
      if (rmean != nullptr)
        rmean[c] = static_cast<S>((1 - momentum) * static_cast<double>(rmean[c]) + momentum * mu);
      if (rvar != nullptr)
        rvar[c] = static_cast<S>((1 - momentum) * static_cast<double>(rvar[c]) +
                                 momentum * var * dm / (dm - 1));
    } else {
      mu = static_cast<double>(rmean[c]);
      rs = 1.0 / std::sqrt(static_cast<double>(rvar[c]) + eps);
    }
    const double wc = static_cast<double>(w[c]), bc = static_cast<double>(b[c]);
    for (uint64_t n = 0; n < N; ++n)
      for (uint64_t k = 0; k < sp; ++k) {
        const uint64_t i = (n * C + c) * sp + k;
        y[i] = static_cast<T>((static_cast<double>(x[i]) - mu) * rs * wc + bc);
      }
    if (smean != nullptr) smean[c] = static_cast<S>(mu);
    if (srstd != nullptr) srstd[c] = static_cast<S>(rs);
  }
}
// The gradients per channel: sum dy and sum dy xhat (in double), then dx; dw, db may be null.
template <class T, class S>
void bn_bwd(const T* x, const T* w, const S* mean, const S* rstd, const T* dy, T* dx, T* dw, T* db,
            uint64_t N, uint64_t C, uint64_t sp, bool training) {
  const double dm = static_cast<double>(N * sp);
  for (uint64_t c = 0; c < C; ++c) {
    const double mu = static_cast<double>(mean[c]), rs = static_cast<double>(rstd[c]);
    const double wc = static_cast<double>(w[c]);
    double sd = 0, sdx = 0;
    for (uint64_t n = 0; n < N; ++n)
      for (uint64_t k = 0; k < sp; ++k) {
        const uint64_t i = (n * C + c) * sp + k;
        const double d = static_cast<double>(dy[i]);
        sd += d;
        sdx += d * ((static_cast<double>(x[i]) - mu) * rs);
      }
    if (dw != nullptr) dw[c] = static_cast<T>(sdx);
    if (db != nullptr) db[c] = static_cast<T>(sd);
    // g = dy w: mean(g) = w sd / M, mean(g xhat) = w sdx / M.
    const double mg = training ? wc * sd / dm : 0.0, mgx = training ? wc * sdx / dm : 0.0;
    for (uint64_t n = 0; n < N; ++n)
      for (uint64_t k = 0; k < sp; ++k) {
        const uint64_t i = (n * C + c) * sp + k;
        const double g = static_cast<double>(dy[i]) * wc;
        if (training) {
          const double xh = (static_cast<double>(x[i]) - mu) * rs;
          dx[i] = static_cast<T>(rs * (g - mg - xh * mgx));
        } else {
          dx[i] = static_cast<T>(rs * g); // x does not enter (a NaN x leaves dx finite)
        }
      }
  }
}

// ---- cross entropy (pcy_nn.h) ---------------------------------------------------------------
// Rows of C classes, in double; the reductions over the rows in row order. lse may be null.
inline bool xent_ignored(int32_t t, int64_t ignore) { return static_cast<int64_t>(t) == ignore; }
inline bool xent_valid(int32_t t, uint64_t C) { return t >= 0 && static_cast<uint64_t>(t) < C; }
template <class T, class S>
void xent_fwd(const T* x, const int32_t* labels, T* loss, S* lse, uint64_t rows, uint64_t C,
              int64_t ignore, double eps, int reduction) {
  double total = 0;
  uint64_t count = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * C;
    double m = -std::numeric_limits<double>::infinity(), sx = 0;
    for (uint64_t j = 0; j < C; ++j) {
      const double v = static_cast<double>(xr[j]);
      m = v > m || v != v ? v : m; // a NaN wins
      sx += v;
    }
    double se = 0;
    for (uint64_t j = 0; j < C; ++j)
      se += std::exp(static_cast<double>(xr[j]) - m);
    const double l = m + std::log(se);
    if (lse != nullptr) lse[r] = static_cast<S>(l);
    const int32_t t = labels[r];
    double v = 0;
    if (!xent_ignored(t, ignore)) {
      ++count;
      // The smoothing term only where eps > 0 (a -inf logit makes it infinite).
      v = xent_valid(t, C) ? (1 - eps) * (l - static_cast<double>(xr[t])) +
                                 (eps > 0 ? eps * (l - sx / static_cast<double>(C)) : 0.0)
                           : std::numeric_limits<double>::quiet_NaN();
      total += v;
    }
    if (reduction == 0) loss[r] = static_cast<T>(v);
  }
  if (reduction == 1) loss[0] = static_cast<T>(total / static_cast<double>(count)); // 0/0: NaN
  if (reduction == 2) loss[0] = static_cast<T>(total);
}
template <class T, class S>
void xent_bwd(const T* x, const int32_t* labels, const S* lse, const T* dloss, T* dx, uint64_t rows,
              uint64_t C, int64_t ignore, double eps, int reduction) {
  double g0 = reduction == 0 ? 0.0 : static_cast<double>(dloss[0]);
  if (reduction == 1) {
    uint64_t count = 0;
    for (uint64_t r = 0; r < rows; ++r)
      count += xent_ignored(labels[r], ignore) ? 0 : 1;
    g0 /= static_cast<double>(count);
  }
  const double off = eps / static_cast<double>(C);
  for (uint64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * C;
    T* dr = dx + r * C;
    const int32_t t = labels[r];
    if (xent_ignored(t, ignore)) {
      for (uint64_t j = 0; j < C; ++j)
        dr[j] = T(0);
      continue;
    }
    const bool ok = xent_valid(t, C);
    const double g = reduction == 0 ? static_cast<double>(dloss[r]) : g0;
    const double l = static_cast<double>(lse[r]);
    for (uint64_t j = 0; j < C; ++j) {
      const double p = std::exp(static_cast<double>(xr[j]) - l);
      const double v = ok ? g * (p - off - (static_cast<int64_t>(j) == t ? 1 - eps : 0.0))
                          : std::numeric_limits<double>::quiet_NaN();
      dr[j] = static_cast<T>(v);
    }
  }
}

// ---- embedding (pcy_nn.h) -------------------------------------------------------------------
// The forward: a row copy per position; an index outside [0, V) gives a NaN row.
template <class T>
void embedding_fwd(const T* w, const int32_t* idx, T* y, uint64_t V, uint64_t D, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t v = idx[i];
    T* yr = y + i * D;
    if (v >= 0 && static_cast<uint64_t>(v) < V)
      std::memcpy(yr, w + static_cast<uint64_t>(v) * D, D * sizeof(T));
    else
      for (uint64_t j = 0; j < D; ++j)
        yr[j] = std::numeric_limits<T>::quiet_NaN();
  }
}
// The gradient: dweight = 0, then each position's dy row added to its index's row, in position
// order, in T (the compute dtype of f32 and f64); padding_idx (-1: none) and indices outside
// [0, V) add nothing.
template <class T>
void embedding_bwd(const int32_t* idx, const T* dy, T* dw, uint64_t V, uint64_t D, uint64_t n,
                   int64_t padding_idx) {
  for (uint64_t k = 0; k < V * D; ++k)
    dw[k] = T(0);
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t v = idx[i];
    if (v < 0 || static_cast<uint64_t>(v) >= V || static_cast<int64_t>(v) == padding_idx) continue;
    T* r = dw + static_cast<uint64_t>(v) * D;
    const T* g = dy + i * D;
    for (uint64_t j = 0; j < D; ++j)
      r[j] += g[j];
  }
}

} // namespace parenchyma::nn_native
