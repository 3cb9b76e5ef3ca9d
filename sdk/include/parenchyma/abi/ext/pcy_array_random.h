/* parenchyma extension "array": the portable random-number core (pcy_array.h, "random").
 *
 * One source that every array bundle compiles as it is: C99 and C++20 on the host, OpenCL C 1.2
 * and CUDA C++ (NVRTC) on devices. The same (seed, offset, element) gives the SAME BITS
 * everywhere: the functions use only integer operations, conversions between integers and
 * floats (exact, or truncating toward zero), and IEEE float/double +, - and * whose results are
 * exact or correctly rounded (no division, no library call, no sqrt/log/cos, no reinterpretation
 * of a float's bits), so any conforming compiler computes them identically.
 *
 * The including code may define, before including this file:
 *   PCY_RNG_FN   the functions' qualifiers (default `static inline`; CUDA: `static __device__
 *                inline`; OpenCL: `static inline`)
 *   PCY_RNG_U32, PCY_RNG_U64, PCY_RNG_I64   32/64-bit integer types (defaults: <stdint.h>'s on
 *                the host, uint/ulong/long in OpenCL C, unsigned int/unsigned long long/long long
 *                in CUDA)
 *   PCY_RNG_F64  1 to define the double-precision functions (default 1 on the host and in CUDA,
 *                0 in OpenCL C: a device with cl_khr_fp64 defines it to 1; this file then
 *                enables the extension)
 *   PCY_RNG_FMUL, PCY_RNG_FADD, PCY_RNG_DMUL, PCY_RNG_DADD   all four or none: float and double
 *                a * b and a + b, each rounded on its own (defaults below)
 *
 * Floating-point CONTRACTION (a * b + c fused into one fma with a single rounding) would change
 * the bits. This file turns it off over its own functions wherever the language lets it:
 *   - OpenCL C: `#pragma OPENCL FP_CONTRACT OFF` (DEFAULT after them). Build without
 *     -cl-mad-enable, -cl-unsafe-math-optimizations and -cl-fast-relaxed-math.
 *   - CUDA device code: every floating + and * of the transforms is __fadd_rn, __fmul_rn,
 *     __dadd_rn or __dmul_rn, which are never fused: --fmad=true (NVRTC's default) is fine, the
 *     PTX has no fma (tests/array checks it). Do not pass --use_fast_math.
 *   - Clang (C, C++): `#pragma STDC FP_CONTRACT OFF` (DEFAULT after them). Clang's
 *     -ffp-contract=fast overrides the pragma: use the default (on) or -ffp-contract=off.
 *   - GCC (C, C++): GCC ignores the STDC pragma; `#pragma GCC optimize("fp-contract=off")` between
 *     push_options and pop_options does it instead, also in the GNU modes (-std=gnu*) whose
 *     default, -ffp-contract=fast, fuses on targets with FMA (-march=haswell and later).
 *     -ffp-contract=off on the command line is the belt to these braces. GCC does not inline
 *     across different optimize options: code built with -ffp-contract=off throughout may define
 *     PCY_RNG_BUILT_WITHOUT_CONTRACTION to skip the pragma and let the functions inline.
 *   - Other compilers: turn contraction off (MSVC: /fp:precise, without /fp:contract).
 * Never -ffast-math (or any value-changing option) for code that includes this file.
 *
 * The functions (all PCY_RNG_FN; U32 = PCY_RNG_U32 etc.):
 *   pcy_rng_philox(key0, key1, c0, c1, c2, c3, out[4])   Philox-4x32-10 (Salmon et al., SC'11:
 *        multipliers 0xD2511F53, 0xCD9E8D57; key increments 0x9E3779B9, 0xBB67AE85)
 *   pcy_rng_words(seed, offset, i, out[4])   the four words of counter c = offset + i (mod
 *        2^64): key (seed low, seed high), counter (c low, c high, 0, 0). Which element takes
 *        which counter and word: pcy_array.h, "random" (4 or 2 elements per counter)
 *   pcy_rng_uniform_f32(w0) = (w0 >> 8) 2^-24                         in [0, 1), exact
 *   pcy_rng_uniform_f64(w0, w1) = ((w0 >> 11) 2^32 + w1) 2^-53        in [0, 1), exact
 *   pcy_rng_normal_f32(w0, w1) = sqrt(-2 ln u1) cos(2 pi u2), u1 = ((w0 >> 8) + 1) 2^-24 in
 *        (0, 1], u2 = (w1 >> 8) 2^-24; within 4 ulp of the exact value (tests/array: worst
 *        seen 3.4 ulp in binary32, 3.2 in binary64); pcy_rng_normal_sin_f32: the pair's other
 *        member, sin for cos
 *   pcy_rng_normal_f64(w0, w1, w2, w3): the same with u1 = (k1 + 1) 2^-53, k1 = (w0 >> 11) 2^32
 *        + w1, and u2 = k2 2^-53, k2 = (w2 >> 11) 2^32 + w3; pcy_rng_normal_sin_f64 likewise
 *   pcy_rng_bernoulli(w0, t) = w0 < t (1 or 0), t from pcy_rng_bernoulli_threshold(p) =
 *        floor(p 2^32) clipped to [0, 2^32] (host only; NaN gives 0)
 *   pcy_rng_randint(w0, w1, lo, range) = lo + floor(x range / 2^64), x = w1 2^32 + w0: the high
 *        word of a 64x64-bit product in 32-bit limbs (mod 2^64 on the way back to signed)
 *
 * How the normal transform computes (every step exact or one rounding, in the stated order):
 *   ln u1: k = u1 2^B (B = 24 or 53) is an integer in [1, 2^B]; e = floor(log2 k) from a count
 *     of leading zeros (pcy_rng_log2_u32/_u64); m = k 2^-e (k shifted left to B bits, converted
 *     exactly, times 2^(1-B)) is in [1, 2); m >= sqrt(2) halves m and increments e; then ln u1 = ln
 * m - n ln 2, n = B - e, with ln m = f - f^2/2 + f^3 G(f), f = m - 1 (exact), G a fitted
 * polynomial, and ln 2 split into a short LN2_HI (n LN2_HI exact) and LN2_LO: s = -2 ln u1 = 2 (n
 * LN2_HI + (n LN2_LO - ln m)). sqrt s: s = t 4^j, t in [1, 4), j = floor(floor(log2 s) / 2),
 * floor(log2 s) from the integer part of s 2^B (exact scaling, then a conversion that truncates),
 * 4^-j and 2^j built from integer powers of two; 1/sqrt t from a cubic start and Newton steps y
 * (3/2 - t y^2 / 2) (3 in binary32, 4 in binary64); r = t y, then r + (y/2)(t - r r); finally times
 * 2^j. s = 0 (u1 = 1) gives 0. cos(2 pi u2): the top two bits of u2's integer give the quadrant q,
 * the rest x in [0, 1) of a quarter turn: cos(pi/2 (q + x)) is cos, -sin, -cos, sin of pi/2 x for q
 * = 0..3; x > 1/2 reflects to 1 - x (in integers) and swaps sin and cos; with y in [0, 1/2] and v =
 * y^2: sin(pi/2 y) = y S(v), cos(pi/2 y) = 1 + v C(v). sin(2 pi u2) is the cosine a quarter turn
 *     earlier (u2's integer minus 2^(B-2), modulo 2^B).
 *   z = sqrt(s) cos(2 pi u2) (one rounding; u1 = 1 gives a zero with the sign of the cosine).
 * The polynomials come from tools/array/fit_random_polys.py (mpmath), pasted below as exact
 * hexadecimal literals; changing any of them changes every normal draw of every bundle.
 */
#ifndef PCY_ARRAY_RANDOM_H
#define PCY_ARRAY_RANDOM_H

#if defined(__OPENCL_VERSION__) || defined(__OPENCL_C_VERSION__)
#define PCY_RNG_OPENCL 1
#else
#define PCY_RNG_OPENCL 0
#endif

#ifndef PCY_RNG_FN
#define PCY_RNG_FN static inline
#endif

#if PCY_RNG_OPENCL
#ifndef PCY_RNG_U32
#define PCY_RNG_U32 uint
#endif
#ifndef PCY_RNG_U64
#define PCY_RNG_U64 ulong
#endif
#ifndef PCY_RNG_I64
#define PCY_RNG_I64 long
#endif
#ifndef PCY_RNG_F64
#define PCY_RNG_F64 0
#endif
#if PCY_RNG_F64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#elif defined(__CUDACC_RTC__)
#ifndef PCY_RNG_U32
#define PCY_RNG_U32 unsigned int
#endif
#ifndef PCY_RNG_U64
#define PCY_RNG_U64 unsigned long long
#endif
#ifndef PCY_RNG_I64
#define PCY_RNG_I64 long long
#endif
#else
#if !defined(PCY_RNG_U32) || !defined(PCY_RNG_U64) || !defined(PCY_RNG_I64)
#include <stdint.h>
#endif
#ifndef PCY_RNG_U32
#define PCY_RNG_U32 uint32_t
#endif
#ifndef PCY_RNG_U64
#define PCY_RNG_U64 uint64_t
#endif
#ifndef PCY_RNG_I64
#define PCY_RNG_I64 int64_t
#endif
#endif
#ifndef PCY_RNG_F64
#define PCY_RNG_F64 1
#endif

/* Floating + and *, never fused (see above). A platform whose compiler ignores the pragmas may
 * define all four itself (e.g. inline PTX mul.rn/add.rn on NVIDIA's OpenCL). */
#ifndef PCY_RNG_FMUL
#if defined(__CUDA_ARCH__)
#define PCY_RNG_FMUL(a, b) __fmul_rn((a), (b))
#define PCY_RNG_FADD(a, b) __fadd_rn((a), (b))
#define PCY_RNG_DMUL(a, b) __dmul_rn((a), (b))
#define PCY_RNG_DADD(a, b) __dadd_rn((a), (b))
#else
#define PCY_RNG_FMUL(a, b) ((a) * (b))
#define PCY_RNG_FADD(a, b) ((a) + (b))
#define PCY_RNG_DMUL(a, b) ((a) * (b))
#define PCY_RNG_DADD(a, b) ((a) + (b))
#endif
#endif

#if PCY_RNG_OPENCL
#pragma OPENCL FP_CONTRACT OFF
#elif defined(__clang__) && !defined(__CUDACC__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__) && !defined(__CUDACC__) && !defined(PCY_RNG_BUILT_WITHOUT_CONTRACTION)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

/* ---- the fitted constants (tools/array/fit_random_polys.py) ---------------------------------- */
/* LOG_G: degree 8, relative error 3.4e-9 (2^-28.13) */
#define PCY_RNG_F32_LOG_G0 0x1.555554p-2f
#define PCY_RNG_F32_LOG_G1 -0x1.fffffcp-3f
#define PCY_RNG_F32_LOG_G2 0x1.999d5ap-3f
#define PCY_RNG_F32_LOG_G3 -0x1.555b4ap-3f
#define PCY_RNG_F32_LOG_G4 0x1.23d21ap-3f
#define PCY_RNG_F32_LOG_G5 -0x1.fcf4c6p-4f
#define PCY_RNG_F32_LOG_G6 0x1.dea282p-4f
#define PCY_RNG_F32_LOG_G7 -0x1.d635bcp-4f
#define PCY_RNG_F32_LOG_G8 0x1.1d8ea6p-4f
/* SIN_S: degree 3, relative error 3.54e-8 (2^-24.75) */
#define PCY_RNG_F32_SIN_S0 0x1.921fb6p+0f
#define PCY_RNG_F32_SIN_S1 -0x1.4abbbap-1f
#define PCY_RNG_F32_SIN_S2 0x1.465ec4p-4f
#define PCY_RNG_F32_SIN_S3 -0x1.2d9b4p-8f
/* COS_C: degree 3, relative error 1.29e-8 (2^-26.21) */
#define PCY_RNG_F32_COS_C0 -0x1.3bd3ccp+0f
#define PCY_RNG_F32_COS_C1 0x1.03c1eap-2f
#define PCY_RNG_F32_COS_C2 -0x1.55cb98p-6f
#define PCY_RNG_F32_COS_C3 0x1.db6492p-11f
/* LOG_G: degree 19, relative error 7.77e-18 (2^-56.84) */
#define PCY_RNG_F64_LOG_G0 0x1.5555555555556p-2
#define PCY_RNG_F64_LOG_G1 -0x1.fffffffffffe7p-3
#define PCY_RNG_F64_LOG_G2 0x1.999999999901p-3
#define PCY_RNG_F64_LOG_G3 -0x1.5555555558074p-3
#define PCY_RNG_F64_LOG_G4 0x1.24924925376dap-3
#define PCY_RNG_F64_LOG_G5 -0x1.fffffffe0374fp-4
#define PCY_RNG_F64_LOG_G6 0x1.c71c713ccca51p-4
#define PCY_RNG_F64_LOG_G7 -0x1.9999999711ba3p-4
#define PCY_RNG_F64_LOG_G8 0x1.745d343946656p-4
#define PCY_RNG_F64_LOG_G9 -0x1.555574cd5f5abp-4
#define PCY_RNG_F64_LOG_G10 0x1.3b105762c04e6p-4
#define PCY_RNG_F64_LOG_G11 -0x1.248bbb2b73ddp-4
#define PCY_RNG_F64_LOG_G12 0x1.1148d6d97be33p-4
#define PCY_RNG_F64_LOG_G13 -0x1.009d9ede13925p-4
#define PCY_RNG_F64_LOG_G14 0x1.de2b25a838da5p-5
#define PCY_RNG_F64_LOG_G15 -0x1.b7c4ffe0c77fdp-5
#define PCY_RNG_F64_LOG_G16 0x1.b81071d2b9323p-5
#define PCY_RNG_F64_LOG_G17 -0x1.f6223b4ebae32p-5
#define PCY_RNG_F64_LOG_G18 0x1.d03182232bb25p-5
#define PCY_RNG_F64_LOG_G19 -0x1.9a9a68c447047p-6
/* SIN_S: degree 6, relative error 3.9e-17 (2^-54.51) */
#define PCY_RNG_F64_SIN_S0 0x1.921fb54442d18p+0
#define PCY_RNG_F64_SIN_S1 -0x1.4abbce625be41p-1
#define PCY_RNG_F64_SIN_S2 0x1.466bc677587f8p-4
#define PCY_RNG_F64_SIN_S3 -0x1.32d2cce2e5b19p-8
#define PCY_RNG_F64_SIN_S4 0x1.50782fda12d96p-13
#define PCY_RNG_F64_SIN_S5 -0x1.e30071afc3e59p-19
#define PCY_RNG_F64_SIN_S6 0x1.e3f38399551bfp-25
/* COS_C: degree 6, relative error 2.6e-17 (2^-55.09) */
#define PCY_RNG_F64_COS_C0 -0x1.3bd3cc9be45dep+0
#define PCY_RNG_F64_COS_C1 0x1.03c1f081b5acp-2
#define PCY_RNG_F64_COS_C2 -0x1.55d3c7e3cb241p-6
#define PCY_RNG_F64_COS_C3 0x1.e1f5068688d5bp-11
#define PCY_RNG_F64_COS_C4 -0x1.a6d1eef479be1p-16
#define PCY_RNG_F64_COS_C5 0x1.f9ce245cada0bp-22
#define PCY_RNG_F64_COS_C6 -0x1.b2f3eb054afcdp-28
/* RSQRT start: degree 3, relative error 0.00886 */
#define PCY_RNG_RSQRT0 0x1.8983aep+0f
#define PCY_RNG_RSQRT1 -0x1.6c5b6ap-1f
#define PCY_RNG_RSQRT2 0x1.772334p-3f
#define PCY_RNG_RSQRT3 -0x1.1fbb14p-6f
#define PCY_RNG_F32_LN2_HI 0x1.62e4p-1f
#define PCY_RNG_F32_LN2_LO 0x1.7f7d1cp-20f
#define PCY_RNG_F64_LN2_HI 0x1.62e42fefa38p-1
#define PCY_RNG_F64_LN2_LO 0x1.ef35793c7673p-45
/* thresholds only: any fixed value near sqrt(2) would do */
#define PCY_RNG_F32_SQRT2 0x1.6a09e6p+0f
#define PCY_RNG_F64_SQRT2 0x1.6a09e667f3bcdp+0

/* ---- Philox-4x32-10 -------------------------------------------------------------------------- */
PCY_RNG_FN void pcy_rng_philox(PCY_RNG_U32 key0, PCY_RNG_U32 key1, PCY_RNG_U32 c0, PCY_RNG_U32 c1,
                               PCY_RNG_U32 c2, PCY_RNG_U32 c3, PCY_RNG_U32 out[4]) {
  PCY_RNG_U32 k0 = key0, k1 = key1, x0 = c0, x1 = c1, x2 = c2, x3 = c3;
  int i;
  for (i = 0; i < 10; ++i) {
    const PCY_RNG_U64 p0 = (PCY_RNG_U64)0xD2511F53u * (PCY_RNG_U64)x0;
    const PCY_RNG_U64 p1 = (PCY_RNG_U64)0xCD9E8D57u * (PCY_RNG_U64)x2;
    x0 = (PCY_RNG_U32)(p1 >> 32) ^ x1 ^ k0;
    x2 = (PCY_RNG_U32)(p0 >> 32) ^ x3 ^ k1;
    x1 = (PCY_RNG_U32)p1;
    x3 = (PCY_RNG_U32)p0;
    k0 = (PCY_RNG_U32)(k0 + 0x9E3779B9u);
    k1 = (PCY_RNG_U32)(k1 + 0xBB67AE85u);
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}

PCY_RNG_FN void pcy_rng_words(PCY_RNG_U64 seed, PCY_RNG_U64 offset, PCY_RNG_U64 e,
                              PCY_RNG_U32 out[4]) {
  const PCY_RNG_U64 c = offset + e;
  pcy_rng_philox((PCY_RNG_U32)seed, (PCY_RNG_U32)(seed >> 32), (PCY_RNG_U32)c,
                 (PCY_RNG_U32)(c >> 32), 0u, 0u, out);
}

/* ---- integers -------------------------------------------------------------------------------- */
PCY_RNG_FN int pcy_rng_bernoulli(PCY_RNG_U32 w0, PCY_RNG_U64 threshold) {
  return (PCY_RNG_U64)w0 < threshold ? 1 : 0;
}

PCY_RNG_FN PCY_RNG_I64 pcy_rng_randint(PCY_RNG_U32 w0, PCY_RNG_U32 w1, PCY_RNG_I64 lo,
                                       PCY_RNG_U64 range) {
  const PCY_RNG_U64 mask = 0xFFFFFFFFu;
  const PCY_RNG_U64 r0 = range & mask, r1 = range >> 32;
  const PCY_RNG_U64 p00 = (PCY_RNG_U64)w0 * r0, p01 = (PCY_RNG_U64)w0 * r1;
  const PCY_RNG_U64 p10 = (PCY_RNG_U64)w1 * r0, p11 = (PCY_RNG_U64)w1 * r1;
  const PCY_RNG_U64 mid = (p00 >> 32) + (p01 & mask) + (p10 & mask); /* < 3 * 2^32 */
  const PCY_RNG_U64 hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
  return (PCY_RNG_I64)((PCY_RNG_U64)lo + hi);
}

/* ---- permutations ---------------------------------------------------------------------------
 * pcy_rng_permute(seed, offset, n, e): element e (0 <= e < n) of a random permutation of
 * [0, n), computed on its own (no sort): a four-round Feistel network over b-bit integers (b the
 * smallest even width with 2^b >= n, at least 2) whose round function is Philox-4x32-10 with key
 * (seed low, seed high) and counter (x, round, offset low, offset high), keeping the low b/2 bits
 * of word 0; values >= n walk the cycle (apply the network again) until one lands below n
 * (fewer than 4 steps on average: 2^b < 4n). A bijection for every (seed, offset), the same
 * integers on every device. */
PCY_RNG_FN PCY_RNG_U64 pcy_rng_feistel(PCY_RNG_U32 key0, PCY_RNG_U32 key1, PCY_RNG_U32 off0,
                                       PCY_RNG_U32 off1, PCY_RNG_U32 hb, PCY_RNG_U64 x) {
  const PCY_RNG_U64 mask = ((PCY_RNG_U64)1 << hb) - 1u;
  PCY_RNG_U64 l = x >> hb, r = x & mask;
  PCY_RNG_U32 w[4];
  PCY_RNG_U32 rnd;
  for (rnd = 0; rnd < 4u; ++rnd) {
    pcy_rng_philox(key0, key1, (PCY_RNG_U32)r, rnd, off0, off1, w);
    const PCY_RNG_U64 f = (PCY_RNG_U64)w[0] & mask;
    const PCY_RNG_U64 t = l ^ f;
    l = r;
    r = t;
  }
  return (l << hb) | r;
}

PCY_RNG_FN PCY_RNG_U64 pcy_rng_permute(PCY_RNG_U64 seed, PCY_RNG_U64 offset, PCY_RNG_U64 n,
                                       PCY_RNG_U64 e) {
  PCY_RNG_U32 bits = 2u;
  while (bits < 64u && ((PCY_RNG_U64)1 << bits) < n)
    bits += 2u;
  {
    const PCY_RNG_U32 hb = bits / 2u;
    const PCY_RNG_U32 k0 = (PCY_RNG_U32)seed, k1 = (PCY_RNG_U32)(seed >> 32);
    const PCY_RNG_U32 o0 = (PCY_RNG_U32)offset, o1 = (PCY_RNG_U32)(offset >> 32);
    PCY_RNG_U64 y = pcy_rng_feistel(k0, k1, o0, o1, hb, e);
    while (y >= n)
      y = pcy_rng_feistel(k0, k1, o0, o1, hb, y);
    return y;
  }
}

/* ---- floor(log2 x) of an integer x >= 1 (count leading zeros where the language has it) --- */
PCY_RNG_FN int pcy_rng_log2_u32(PCY_RNG_U32 x) {
#if PCY_RNG_OPENCL
  return 31 - (int)clz(x);
#elif defined(__CUDA_ARCH__)
  return 31 - __clz((int)x);
#elif defined(__GNUC__) || defined(__clang__)
  return 31 - __builtin_clz(x);
#else
  int e = 0;
  if (x >> 16) {
    x >>= 16;
    e += 16;
  }
  if (x >> 8) {
    x >>= 8;
    e += 8;
  }
  if (x >> 4) {
    x >>= 4;
    e += 4;
  }
  if (x >> 2) {
    x >>= 2;
    e += 2;
  }
  if (x >> 1) e += 1;
  return e;
#endif
}
PCY_RNG_FN int pcy_rng_log2_u64(PCY_RNG_U64 x) {
#if PCY_RNG_OPENCL
  return 63 - (int)clz(x);
#elif defined(__CUDA_ARCH__)
  return 63 - __clzll((long long)x);
#elif defined(__GNUC__) || defined(__clang__)
  return 63 - __builtin_clzll(x);
#else
  int e = 0;
  if (x >> 32) {
    x >>= 32;
    e += 32;
  }
  return e + pcy_rng_log2_u32((PCY_RNG_U32)x);
#endif
}

/* ---- binary32 -------------------------------------------------------------------------------- */
PCY_RNG_FN float pcy_rng_uniform_f32(PCY_RNG_U32 w0) { return (float)(w0 >> 8) * 0x1p-24f; }

/* -2 ln(k 2^-24) for an integer k in [1, 2^24]. */
PCY_RNG_FN float pcy_rng_neg2log_f32(PCY_RNG_U32 k) {
  int e = pcy_rng_log2_u32(k); /* 0..24 */
  float m, f, h, g, t, lnm, nf;
  /* k 2^-e, exact, in [1, 2): k shifted to 24 bits, then scaled by a power of two */
  m = e == 24 ? 1.0f : PCY_RNG_FMUL((float)(k << (23 - e)), 0x1p-23f);
  if (m >= PCY_RNG_F32_SQRT2) {
    m = PCY_RNG_FMUL(m, 0.5f);
    e += 1;
  }
  f = PCY_RNG_FADD(m, -1.0f); /* exact */
  h = PCY_RNG_FMUL(f, f);
  g = PCY_RNG_F32_LOG_G8;
  g = PCY_RNG_FADD(PCY_RNG_FMUL(g, f), PCY_RNG_F32_LOG_G7);
  g = PCY_RNG_FADD(PCY_RNG_FMUL(g, f), PCY_RNG_F32_LOG_G6);
  g = PCY_RNG_FADD(PCY_RNG_FMUL(g, f), PCY_RNG_F32_LOG_G5);
  g = PCY_RNG_FADD(PCY_RNG_FMUL(g, f), PCY_RNG_F32_LOG_G4);
  g = PCY_RNG_FADD(PCY_RNG_FMUL(g, f), PCY_RNG_F32_LOG_G3);
  g = PCY_RNG_FADD(PCY_RNG_FMUL(g, f), PCY_RNG_F32_LOG_G2);
  g = PCY_RNG_FADD(PCY_RNG_FMUL(g, f), PCY_RNG_F32_LOG_G1);
  g = PCY_RNG_FADD(PCY_RNG_FMUL(g, f), PCY_RNG_F32_LOG_G0);
  t = PCY_RNG_FMUL(PCY_RNG_FMUL(f, h), g);
  lnm = PCY_RNG_FADD(f, PCY_RNG_FADD(t, PCY_RNG_FMUL(h, -0.5f)));
  nf = (float)(24 - e); /* 0..24 */
  t = PCY_RNG_FADD(PCY_RNG_FMUL(nf, PCY_RNG_F32_LN2_HI),
                   PCY_RNG_FADD(PCY_RNG_FMUL(nf, PCY_RNG_F32_LN2_LO), -lnm));
  return PCY_RNG_FMUL(t, 2.0f);
}

/* sqrt(s) for s in {0} or [2^-24, 2^8). */
PCY_RNG_FN float pcy_rng_sqrt_f32(float s) {
  float t, sc, y, r;
  int i, j;
  if (!(s > 0.0f)) return 0.0f;
  /* s = t 4^j, t in [1, 4): j = floor(floor(log2 s) / 2), floor(log2 s) from the integer part of
   * s 2^24 (exact scaling, in [1, 2^32)); t and 2^j exact products with powers of two. */
  j = (pcy_rng_log2_u32((PCY_RNG_U32)PCY_RNG_FMUL(s, 0x1p24f)) >> 1) - 12; /* -12..3 */
  t = PCY_RNG_FMUL(s, PCY_RNG_FMUL((float)(1u << (6 - 2 * j)), 0x1p-6f));
  sc = PCY_RNG_FMUL((float)(1u << (j + 12)), 0x1p-12f);
  y = PCY_RNG_RSQRT3;
  y = PCY_RNG_FADD(PCY_RNG_FMUL(y, t), PCY_RNG_RSQRT2);
  y = PCY_RNG_FADD(PCY_RNG_FMUL(y, t), PCY_RNG_RSQRT1);
  y = PCY_RNG_FADD(PCY_RNG_FMUL(y, t), PCY_RNG_RSQRT0);
  for (i = 0; i < 3; ++i) {
    const float u = PCY_RNG_FMUL(PCY_RNG_FMUL(t, y), y);
    y = PCY_RNG_FMUL(y, PCY_RNG_FADD(1.5f, PCY_RNG_FMUL(u, -0.5f)));
  }
  r = PCY_RNG_FMUL(t, y);
  r = PCY_RNG_FADD(r, PCY_RNG_FMUL(PCY_RNG_FMUL(y, 0.5f), PCY_RNG_FADD(t, -PCY_RNG_FMUL(r, r))));
  return PCY_RNG_FMUL(r, sc);
}

/* cos and sin of 2 pi j 2^-24 for an integer j in [0, 2^24): the top two bits of j give the
 * quadrant q, the rest r a point of the quarter turn, reflected to y in [0, 1/2] (x > 1/2: 1 - x,
 * swapping sin and cos); sin(pi/2 y) = y S(v) and cos(pi/2 y) = 1 + v C(v), v = y^2, each
 * evaluated once for both: the sine's angle is a quarter turn back (q - 1, the same y). */
PCY_RNG_FN void pcy_rng_sincos2pi_f32(PCY_RNG_U32 j, float* c, float* s) {
  const PCY_RNG_U32 q = (j >> 22) & 3u;
  PCY_RNG_U32 r = j & 0x3FFFFFu;
  const int refl = r > 0x200000u;
  const int sine = (int)(q & 1u) ^ refl;
  float y, v, sp, cp;
  if (refl) r = 0x400000u - r;
  y = PCY_RNG_FMUL((float)r, 0x1p-22f);
  v = PCY_RNG_FMUL(y, y);
  sp = PCY_RNG_F32_SIN_S3;
  sp = PCY_RNG_FADD(PCY_RNG_FMUL(sp, v), PCY_RNG_F32_SIN_S2);
  sp = PCY_RNG_FADD(PCY_RNG_FMUL(sp, v), PCY_RNG_F32_SIN_S1);
  sp = PCY_RNG_FADD(PCY_RNG_FMUL(sp, v), PCY_RNG_F32_SIN_S0);
  sp = PCY_RNG_FMUL(y, sp);
  cp = PCY_RNG_F32_COS_C3;
  cp = PCY_RNG_FADD(PCY_RNG_FMUL(cp, v), PCY_RNG_F32_COS_C2);
  cp = PCY_RNG_FADD(PCY_RNG_FMUL(cp, v), PCY_RNG_F32_COS_C1);
  cp = PCY_RNG_FADD(PCY_RNG_FMUL(cp, v), PCY_RNG_F32_COS_C0);
  cp = PCY_RNG_FADD(1.0f, PCY_RNG_FMUL(v, cp));
  {
    const float a = sine ? sp : cp, b = sine ? cp : sp;
    *c = (q == 1u || q == 2u) ? -a : a;
    *s = (q == 2u || q == 3u) ? -b : b;
  }
}

/* cos(2 pi j 2^-24) for an integer j in [0, 2^24). */
PCY_RNG_FN float pcy_rng_cos2pi_f32(PCY_RNG_U32 j) {
  float c, s;
  pcy_rng_sincos2pi_f32(j, &c, &s);
  return c;
}

/* sin(2 pi j 2^-24) = cos(2 pi (j - 2^22) 2^-24), the angle a quarter turn back. */
PCY_RNG_FN float pcy_rng_sin2pi_f32(PCY_RNG_U32 j) {
  float c, s;
  pcy_rng_sincos2pi_f32(j, &c, &s);
  return s;
}

/* The Box-Muller radius sqrt(-2 ln u1), u1 = ((w0 >> 8) + 1) 2^-24. */
PCY_RNG_FN float pcy_rng_radius_f32(PCY_RNG_U32 w0) {
  return pcy_rng_sqrt_f32(pcy_rng_neg2log_f32((w0 >> 8) + 1u));
}

/* The pair of normals from (w0, w1): r cos(2 pi u2) and r sin(2 pi u2), u2 = (w1 >> 8) 2^-24. */
PCY_RNG_FN float pcy_rng_normal_f32(PCY_RNG_U32 w0, PCY_RNG_U32 w1) {
  return PCY_RNG_FMUL(pcy_rng_radius_f32(w0), pcy_rng_cos2pi_f32(w1 >> 8));
}
PCY_RNG_FN float pcy_rng_normal_sin_f32(PCY_RNG_U32 w0, PCY_RNG_U32 w1) {
  return PCY_RNG_FMUL(pcy_rng_radius_f32(w0), pcy_rng_sin2pi_f32(w1 >> 8));
}

/* ---- binary64 -------------------------------------------------------------------------------- */
#if PCY_RNG_F64
PCY_RNG_FN double pcy_rng_uniform_f64(PCY_RNG_U32 w0, PCY_RNG_U32 w1) {
  const double hi = PCY_RNG_DMUL((double)(w0 >> 11), 4294967296.0); /* exact */
  return PCY_RNG_DMUL(PCY_RNG_DADD(hi, (double)w1), 0x1p-53);       /* exact */
}

/* -2 ln(k 2^-53) for an integer k in [1, 2^53]. */
PCY_RNG_FN double pcy_rng_neg2log_f64(PCY_RNG_U64 k) {
  int e = pcy_rng_log2_u64(k); /* 0..53 */
  double m, f, h, g, t, lnm, nf;
  /* k 2^-e, exact, in [1, 2): k shifted to 53 bits, then scaled by a power of two */
  m = e == 53 ? 1.0 : PCY_RNG_DMUL((double)(k << (52 - e)), 0x1p-52);
  if (m >= PCY_RNG_F64_SQRT2) {
    m = PCY_RNG_DMUL(m, 0.5);
    e += 1;
  }
  f = PCY_RNG_DADD(m, -1.0); /* exact */
  h = PCY_RNG_DMUL(f, f);
  g = PCY_RNG_F64_LOG_G19;
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G18);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G17);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G16);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G15);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G14);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G13);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G12);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G11);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G10);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G9);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G8);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G7);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G6);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G5);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G4);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G3);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G2);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G1);
  g = PCY_RNG_DADD(PCY_RNG_DMUL(g, f), PCY_RNG_F64_LOG_G0);
  t = PCY_RNG_DMUL(PCY_RNG_DMUL(f, h), g);
  lnm = PCY_RNG_DADD(f, PCY_RNG_DADD(t, PCY_RNG_DMUL(h, -0.5)));
  nf = (double)(53 - e); /* 0..53 */
  t = PCY_RNG_DADD(PCY_RNG_DMUL(nf, PCY_RNG_F64_LN2_HI),
                   PCY_RNG_DADD(PCY_RNG_DMUL(nf, PCY_RNG_F64_LN2_LO), -lnm));
  return PCY_RNG_DMUL(t, 2.0);
}

/* sqrt(s) for s in {0} or [2^-53, 2^8). */
PCY_RNG_FN double pcy_rng_sqrt_f64(double s) {
  double t, sc, y, r;
  int i, j;
  if (!(s > 0.0)) return 0.0;
  /* as in binary32, from the integer part of s 2^53 (in [1, 2^61)) */
  j = ((pcy_rng_log2_u64((PCY_RNG_U64)PCY_RNG_DMUL(s, 0x1p53)) + 1) >> 1) - 27; /* -27..3 */
  t = PCY_RNG_DMUL(s, PCY_RNG_DMUL((double)((PCY_RNG_U64)1 << (6 - 2 * j)), 0x1p-6));
  sc = PCY_RNG_DMUL((double)((PCY_RNG_U64)1 << (j + 27)), 0x1p-27);
  y = (double)PCY_RNG_RSQRT3;
  y = PCY_RNG_DADD(PCY_RNG_DMUL(y, t), (double)PCY_RNG_RSQRT2);
  y = PCY_RNG_DADD(PCY_RNG_DMUL(y, t), (double)PCY_RNG_RSQRT1);
  y = PCY_RNG_DADD(PCY_RNG_DMUL(y, t), (double)PCY_RNG_RSQRT0);
  for (i = 0; i < 4; ++i) {
    const double u = PCY_RNG_DMUL(PCY_RNG_DMUL(t, y), y);
    y = PCY_RNG_DMUL(y, PCY_RNG_DADD(1.5, PCY_RNG_DMUL(u, -0.5)));
  }
  r = PCY_RNG_DMUL(t, y);
  r = PCY_RNG_DADD(r, PCY_RNG_DMUL(PCY_RNG_DMUL(y, 0.5), PCY_RNG_DADD(t, -PCY_RNG_DMUL(r, r))));
  return PCY_RNG_DMUL(r, sc);
}

/* cos and sin of 2 pi j 2^-53 together (as pcy_rng_sincos2pi_f32). */
PCY_RNG_FN void pcy_rng_sincos2pi_f64(PCY_RNG_U64 j, double* c, double* s) {
  const PCY_RNG_U64 mid = (PCY_RNG_U64)1 << 50, quarter_turn = (PCY_RNG_U64)1 << 51;
  const PCY_RNG_U64 q = (j >> 51) & 3u;
  PCY_RNG_U64 r = j & (quarter_turn - 1u);
  const int refl = r > mid;
  const int sine = (int)(q & 1u) ^ refl;
  double y, v, sp, cp;
  if (refl) r = quarter_turn - r;
  y = PCY_RNG_DMUL((double)r, 0x1p-51);
  v = PCY_RNG_DMUL(y, y);
  sp = PCY_RNG_F64_SIN_S6;
  sp = PCY_RNG_DADD(PCY_RNG_DMUL(sp, v), PCY_RNG_F64_SIN_S5);
  sp = PCY_RNG_DADD(PCY_RNG_DMUL(sp, v), PCY_RNG_F64_SIN_S4);
  sp = PCY_RNG_DADD(PCY_RNG_DMUL(sp, v), PCY_RNG_F64_SIN_S3);
  sp = PCY_RNG_DADD(PCY_RNG_DMUL(sp, v), PCY_RNG_F64_SIN_S2);
  sp = PCY_RNG_DADD(PCY_RNG_DMUL(sp, v), PCY_RNG_F64_SIN_S1);
  sp = PCY_RNG_DADD(PCY_RNG_DMUL(sp, v), PCY_RNG_F64_SIN_S0);
  sp = PCY_RNG_DMUL(y, sp);
  cp = PCY_RNG_F64_COS_C6;
  cp = PCY_RNG_DADD(PCY_RNG_DMUL(cp, v), PCY_RNG_F64_COS_C5);
  cp = PCY_RNG_DADD(PCY_RNG_DMUL(cp, v), PCY_RNG_F64_COS_C4);
  cp = PCY_RNG_DADD(PCY_RNG_DMUL(cp, v), PCY_RNG_F64_COS_C3);
  cp = PCY_RNG_DADD(PCY_RNG_DMUL(cp, v), PCY_RNG_F64_COS_C2);
  cp = PCY_RNG_DADD(PCY_RNG_DMUL(cp, v), PCY_RNG_F64_COS_C1);
  cp = PCY_RNG_DADD(PCY_RNG_DMUL(cp, v), PCY_RNG_F64_COS_C0);
  cp = PCY_RNG_DADD(1.0, PCY_RNG_DMUL(v, cp));
  {
    const double a = sine ? sp : cp, b = sine ? cp : sp;
    *c = (q == 1u || q == 2u) ? -a : a;
    *s = (q == 2u || q == 3u) ? -b : b;
  }
}

/* cos(2 pi j 2^-53) for an integer j in [0, 2^53). */
PCY_RNG_FN double pcy_rng_cos2pi_f64(PCY_RNG_U64 j) {
  double c, s;
  pcy_rng_sincos2pi_f64(j, &c, &s);
  return c;
}

/* sin(2 pi j 2^-53) = cos(2 pi (j - 2^51) 2^-53). */
PCY_RNG_FN double pcy_rng_sin2pi_f64(PCY_RNG_U64 j) {
  double c, s;
  pcy_rng_sincos2pi_f64(j, &c, &s);
  return s;
}

/* sqrt(-2 ln u1), u1 = (k1 + 1) 2^-53, k1 = (w0 >> 11) 2^32 + w1. */
PCY_RNG_FN double pcy_rng_radius_f64(PCY_RNG_U32 w0, PCY_RNG_U32 w1) {
  const PCY_RNG_U64 k1 = ((PCY_RNG_U64)(w0 >> 11) << 32 | (PCY_RNG_U64)w1) + 1u;
  return pcy_rng_sqrt_f64(pcy_rng_neg2log_f64(k1));
}

/* The pair from (w0, w1, w2, w3): r cos(2 pi u2) and r sin(2 pi u2), u2 = k2 2^-53,
 * k2 = (w2 >> 11) 2^32 + w3. */
PCY_RNG_FN double pcy_rng_normal_f64(PCY_RNG_U32 w0, PCY_RNG_U32 w1, PCY_RNG_U32 w2,
                                     PCY_RNG_U32 w3) {
  const PCY_RNG_U64 k2 = (PCY_RNG_U64)(w2 >> 11) << 32 | (PCY_RNG_U64)w3;
  return PCY_RNG_DMUL(pcy_rng_radius_f64(w0, w1), pcy_rng_cos2pi_f64(k2));
}
PCY_RNG_FN double pcy_rng_normal_sin_f64(PCY_RNG_U32 w0, PCY_RNG_U32 w1, PCY_RNG_U32 w2,
                                         PCY_RNG_U32 w3) {
  const PCY_RNG_U64 k2 = (PCY_RNG_U64)(w2 >> 11) << 32 | (PCY_RNG_U64)w3;
  return PCY_RNG_DMUL(pcy_rng_radius_f64(w0, w1), pcy_rng_sin2pi_f64(k2));
}
#endif /* PCY_RNG_F64 */

/* ---- host helper ----------------------------------------------------------------------------- */
#if !PCY_RNG_OPENCL && !defined(__CUDACC_RTC__)
/* floor(p 2^32) clipped to [0, 2^32]; NaN gives 0 (never true). */
static inline PCY_RNG_U64 pcy_rng_bernoulli_threshold(double p) {
  if (!(p > 0.0)) return 0u;
  if (p >= 1.0) return (PCY_RNG_U64)1 << 32;
  return (PCY_RNG_U64)(p * 4294967296.0); /* exact product; truncation = floor for p > 0 */
}
#endif

#if PCY_RNG_OPENCL
#pragma OPENCL FP_CONTRACT DEFAULT
#elif defined(__clang__) && !defined(__CUDACC__)
#pragma STDC FP_CONTRACT DEFAULT
#elif defined(__GNUC__) && !defined(__CUDACC__) && !defined(PCY_RNG_BUILT_WITHOUT_CONTRACTION)
#pragma GCC pop_options
#endif

#endif /* PCY_ARRAY_RANDOM_H */
