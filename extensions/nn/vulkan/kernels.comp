#version 450
// NN kernels of nn_vulkan: GLSL compute shaders, compiled at run time by the Vulkan plugin (one
// `#kernel NAME` section per kernel; the lines before the first are shared), once per dtype with
// -DREAL=float or -DREAL=double -DPCY_FP64 (the latter only on a device with shaderFloat64).
// Conventions, as blas_vulkan's kernels.comp:
//  - buffers are declared by BUF(binding, access, Block, array) and listed by PTR(Block, array) at
//    the head of the push-constant block, in binding order: storage buffers of set 0 by default,
//    GL_EXT_buffer_reference members filled with device addresses with -DPCY_ADDRESSES (tensors
//    above maxStorageBufferRange). The kernel bodies are the same either way;
//  - scalars follow in the push-constant block in member order, REAL members first;
//  - indices are 32-bit (the bundle refuses larger tensors) and element-wise kernels walk their
//    range grid-strided.
// Math. GLSL has exp, log and tanh for float only, and Vulkan holds them to loose bounds (exp
// 3 + 2|x| ulp, log an absolute error near 1, tanh whatever its formula gives) with no word on
// NaN, while the NN suite holds results to a few ulps and NaN to IEEE propagation. The shaders
// therefore use their own exp, expm1, log and
// tanh (range reduction by ln 2 and polynomials, in `real`, so f64 has them too), decide NaN by
// its bits and keep their arithmetic `precise`: Mesa's NIR otherwise treats float arithmetic as
// free of NaN and Inf and may rewrite it (docs/vulkan.md, "NaN on lavapipe").
#ifndef REAL
#define REAL float
#endif
#define real REAL
#ifdef PCY_ADDRESSES
#extension GL_EXT_buffer_reference : require
#ifdef PCY_FP64
#define RALIGN 8
#else
#define RALIGN 4
#endif
#define BUF(binding_, access, Block, array)                                                        \
  layout(buffer_reference, std430, buffer_reference_align = RALIGN) access buffer Block {          \
    real v[];                                                                                      \
  };
#define UBUF(binding_, access, Block, array)                                                       \
  layout(buffer_reference, std430, buffer_reference_align = 4) access buffer Block { uint v[]; };
#define IBUF(binding_, access, Block, array)                                                       \
  layout(buffer_reference, std430, buffer_reference_align = 4) access buffer Block { int v[]; };
#define PTR(Block, array) Block array##_ref;
// Every array name of the kernels, as the elements behind its address.
#define xs xs_ref.v
#define ms ms_ref.v
#define tail tail_ref.v
#define idx idx_ref.v
#define ys ys_ref.v
#define dys dys_ref.v
#define dxs dxs_ref.v
#define ws ws_ref.v
#define bs bs_ref.v
#define rs rs_ref.v
#define dws dws_ref.v
#define dbs dbs_ref.v
#else
#define BUF(binding_, access, Block, array)                                                        \
  layout(std430, set = 0, binding = binding_) access buffer Block { real array[]; };
#define UBUF(binding_, access, Block, array)                                                       \
  layout(std430, set = 0, binding = binding_) access buffer Block { uint array[]; };
#define IBUF(binding_, access, Block, array)                                                       \
  layout(std430, set = 0, binding = binding_) access buffer Block { int array[]; };
#define PTR(Block, array)
#endif
#define RW // BUF's access for a buffer read and written
#ifndef EWG
#define EWG 256
#endif
#define GID int(gl_GlobalInvocationID.x)
#define GSTRIDE int(gl_NumWorkGroups.x * gl_WorkGroupSize.x)

// Literals in the shared code are written real(v) with v exact in float (integers, factorials up
// to 13!, halves): the constants that are not (ln 2, sqrt 2) are spelled per dtype below, a double
// one with its lf suffix, or it would be rounded to float first.

// ---- bits --------------------------------------------------------------------------------------
#ifdef PCY_FP64
uint hi_word(double v) { return unpackDouble2x32(v).y; }
bool nan_bits(double v) {
  const uvec2 u = unpackDouble2x32(v); // (low word, high word)
  return (u.y & 0x7ff00000u) == 0x7ff00000u && ((u.y & 0xfffffu) | u.x) != 0u;
}
// Negative and neither -0 nor NaN.
bool below_zero(double v) {
  const uvec2 u = unpackDouble2x32(v);
  return (u.y & 0x80000000u) != 0u && !nan_bits(v) && ((u.y & 0x7fffffffu) | u.x) != 0u;
}
// Positive and neither +0 nor NaN.
bool above_zero(double v) {
  const uvec2 u = unpackDouble2x32(v);
  return (u.y & 0x80000000u) == 0u && !nan_bits(v) && ((u.y & 0x7fffffffu) | u.x) != 0u;
}
double inf_real() { return packDouble2x32(uvec2(0u, 0x7ff00000u)); }
double nan_real() { return packDouble2x32(uvec2(0u, 0x7ff80000u)); }
// 2^e for -1022 <= e <= 1023, from its bits.
double pow2(int e) { return packDouble2x32(uvec2(0u, uint(e + 1023) << 20)); }
#define MANT_BITS 53
#define EXP_OVER real(710.0)  // e^x above: +Inf
#define EXP_UNDER real(-746.0) // e^x below: 0
#define EXPM1_LOW real(-40.0)  // e^x - 1 below: -1 (e^x under half an ulp of 1)
#define TANH_ONE real(20.0)    // tanh beyond: +-1
#else
bool nan_bits(float v) {
  const uint u = floatBitsToUint(v);
  return (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu) != 0u;
}
bool below_zero(float v) {
  const uint u = floatBitsToUint(v);
  return (u & 0x80000000u) != 0u && !nan_bits(v) && (u & 0x7fffffffu) != 0u;
}
bool above_zero(float v) {
  const uint u = floatBitsToUint(v);
  return (u & 0x80000000u) == 0u && !nan_bits(v) && (u & 0x7fffffffu) != 0u;
}
float inf_real() { return uintBitsToFloat(0x7f800000u); }
float nan_real() { return uintBitsToFloat(0x7fc00000u); }
float pow2(int e) { return uintBitsToFloat(uint(e + 127) << 23); }
#define MANT_BITS 24
#define EXP_OVER real(89.0)
#define EXP_UNDER real(-104.0)
#define EXPM1_LOW real(-20.0)
#define TANH_ONE real(10.0)
#endif

// ---- elementary functions ----------------------------------------------------------------------
// ln 2 in two parts: LN2_HI has trailing zero bits, so k LN2_HI is exact for the k used here.
#ifdef PCY_FP64
#define LN2_HI 6.93147180369123816490e-01lf
#define LN2_LO 1.90821492927058770002e-10lf
#define INV_LN2 1.44269504088896338700lf
#define HALF_LN2 0.34657359027997264lf
#define SQRT2 1.41421356237309504880lf
#else
#define LN2_HI 0.693145751953125
#define LN2_LO 1.42860682030941723212e-06
#define INV_LN2 1.44269504088896338700
#define HALF_LN2 0.34657359027997264
#define SQRT2 1.41421356237309504880
#endif

// v 2^k in two steps (each factor a normal power of two), so that a result near the ends of the
// range rounds once, to a subnormal or to infinity.
real scale2(real v, int k) {
  const int k1 = k / 2;
  precise real s = v * pow2(k1);
  s = s * pow2(k - k1);
  return s;
}
// e^r - 1 for |r| <= ln 2 / 2: its Taylor series, to the precision of `real`.
real expm1_reduced(real r) {
#ifdef PCY_FP64
  precise real p = real(1.0) / real(6227020800.0);
  p = p * r + real(1.0) / real(479001600.0);
  p = p * r + real(1.0) / real(39916800.0);
  p = p * r + real(1.0) / real(3628800.0);
  p = p * r + real(1.0) / real(362880.0);
  p = p * r + real(1.0) / real(40320.0);
  p = p * r + real(1.0) / real(5040.0);
#else
  precise real p = real(1.0) / real(40320.0);
  p = p * r + real(1.0) / real(5040.0);
#endif
  p = p * r + real(1.0) / real(720.0);
  p = p * r + real(1.0) / real(120.0);
  p = p * r + real(1.0) / real(24.0);
  p = p * r + real(1.0) / real(6.0);
  p = p * r + real(0.5);
  p = p * r * r + r;
  return p;
}
// x = k ln 2 + r with |r| <= ln 2 / 2 (k returned).
real reduce_ln2(real x, out int k) {
  precise real kf = floor(x * INV_LN2 + real(0.5));
  precise real r = (x - kf * LN2_HI) - kf * LN2_LO;
  k = int(kf);
  return r;
}
real exp_r(real x) {
  if (nan_bits(x)) return x;
  if (x > EXP_OVER) return inf_real();
  if (x < EXP_UNDER) return real(0.0);
  int k;
  const real r = reduce_ln2(x, k);
  precise real p = expm1_reduced(r) + real(1.0);
  return scale2(p, k);
}
real expm1_r(real x) {
  if (nan_bits(x)) return x;
  if (x > EXP_OVER) return inf_real();
  if (x < EXPM1_LOW) return real(-1.0);
  if (abs(x) <= HALF_LN2) return expm1_reduced(x);
  int k;
  const real r = reduce_ln2(x, k);
  const real em = expm1_reduced(r);
  if (k >= MANT_BITS) { // 2^k - 1 is not exact, and the -1 vanishes anyway
    precise real p = em + real(1.0);
    return scale2(p, k) - real(1.0);
  }
  const real t = pow2(k); // -30 <= k < MANT_BITS here
  precise real v = (t - real(1.0)) + t * em;
  return v;
}
// log x for x > 0 (NaN and +Inf pass; 0 gives -Inf, negatives NaN); x = 2^e m with
// sqrt(1/2) <= m < sqrt(2), log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172.
real log_r(real x) {
  if (nan_bits(x) || x == inf_real()) return x;
  if (!above_zero(x)) return x == real(0.0) ? -inf_real() : nan_real();
  int e = 0;
#ifdef PCY_FP64
  if (hi_word(x) < 0x00100000u) { // subnormal: scaled into the normal range first
    x = x * pow2(54);
    e = -54;
  }
  const uvec2 u = unpackDouble2x32(x);
  e += int(u.y >> 20) - 1023;
  real m = packDouble2x32(uvec2(u.x, (u.y & 0xfffffu) | 0x3ff00000u)); // [1, 2)
#else
  if (floatBitsToUint(x) < 0x00800000u) {
    x = x * pow2(25);
    e = -25;
  }
  const uint u = floatBitsToUint(x);
  e += int(u >> 23) - 127;
  real m = uintBitsToFloat((u & 0x7fffffu) | 0x3f800000u);
#endif
  if (m > SQRT2) {
    m = m * real(0.5);
    e = e + 1;
  }
  precise real s = (m - real(1.0)) / (m + real(1.0));
  precise real s2 = s * s;
#ifdef PCY_FP64
  precise real p = real(1.0) / real(23.0);
  p = p * s2 + real(1.0) / real(21.0);
  p = p * s2 + real(1.0) / real(19.0);
  p = p * s2 + real(1.0) / real(17.0);
  p = p * s2 + real(1.0) / real(15.0);
  p = p * s2 + real(1.0) / real(13.0);
  p = p * s2 + real(1.0) / real(11.0);
  p = p * s2 + real(1.0) / real(9.0);
#else
  precise real p = real(1.0) / real(11.0);
  p = p * s2 + real(1.0) / real(9.0);
#endif
  p = p * s2 + real(1.0) / real(7.0);
  p = p * s2 + real(1.0) / real(5.0);
  p = p * s2 + real(1.0) / real(3.0);
  precise real lm = real(2.0) * s + real(2.0) * s * (s2 * p);
  const real ef = real(e);
  precise real v = ef * LN2_HI + (ef * LN2_LO + lm);
  return v;
}
// tanh |x| = -expm1(-2|x|) / (2 + expm1(-2|x|)): no cancellation, NaN passes.
real tanh_r(real x) {
  if (nan_bits(x)) return x;
  const real a = abs(x);
  if (a > TANH_ONE) return below_zero(x) ? real(-1.0) : real(1.0);
  const real e = expm1_r(real(-2.0) * a);
  precise real t = -e / (real(2.0) + e);
  return below_zero(x) ? -t : t;
}

// ---- activations: kind 0 sigmoid, 1 relu, 2 tanh, 3 elu ----------------------------------------
real act_f(int kind, real v, real alpha) {
  if (kind == 0) {
    precise real s = real(1.0) / (real(1.0) + exp_r(-v));
    return s;
  }
  if (kind == 1) return below_zero(v) ? real(0.0) : v; // -0 and NaN pass through
  if (kind == 2) return tanh_r(v);
  if (above_zero(v)) return v;
  precise real e = alpha * expm1_r(v); // NaN passes
  return e;
}
// dy * f'(x) from the forward's output y (pcy_nn.h).
real act_g(int kind, real y, real dy, real alpha) {
  precise real g;
  if (kind == 0)
    g = dy * (y * (real(1.0) - y));
  else if (kind == 1)
    g = above_zero(y) ? dy : real(0.0); // a select: a NaN y gives 0
  else if (kind == 2)
    g = dy * (real(1.0) - y * y);
  else
    g = above_zero(y) ? dy : dy * (y + alpha);
  return g;
}

// ---- dropout: splitmix64 of pcy_nn.h (PCY_NN_DROPOUT_MIX) in 32-bit halves ---------------------
// A uvec2 is a 64-bit value (low word, high word): shaderInt64 is not required.
uvec2 add64(uvec2 a, uvec2 b) {
  uint carry;
  const uint lo = uaddCarry(a.x, b.x, carry);
  return uvec2(lo, a.y + b.y + carry);
}
uvec2 mul64(uvec2 a, uvec2 b) { // the low 64 bits of a b
  uint hi, lo;
  umulExtended(a.x, b.x, hi, lo);
  return uvec2(lo, hi + a.x * b.y + a.y * b.x);
}
uvec2 xorshr64(uvec2 z, int s) { // z ^ (z >> s), 0 < s < 32
  return z ^ uvec2((z.x >> s) | (z.y << (32 - s)), z.y >> s);
}
// Element i is kept: (mix(seed, i) >> 40) >= thr.
bool dropout_keep(uvec2 seed, int i, uint thr) {
  uvec2 z = add64(seed, mul64(uvec2(uint(i) + 1u, 0u), uvec2(0x7F4A7C15u, 0x9E3779B9u)));
  z = mul64(xorshr64(z, 30), uvec2(0x1CE4E5B9u, 0xBF58476Du));
  z = mul64(xorshr64(z, 27), uvec2(0x133111EBu, 0x94D049BBu));
  z = xorshr64(z, 31);
  return (z.y >> 8) >= thr;
}

// ---- pooling: planes of H x W pooled to P x Q; window wh ww, stride sh sw, padding ph pw ------
#define POOL_ARGS int planes; int H; int W; int P; int Q; int wh; int ww; int sh; int sw; int ph; int pw;
// The pooled rows p whose window covers input row h: [lo, hi].
#define COVER(h, pad, win, st, PP, lo, hi)                                                         \
  const int lo = max(0, (h + pad - win + st) >= 0 ? (h + pad - win + st) / st : 0);                \
  const int hi = min(PP - 1, (h + pad) / st);
// The divisor of window (p, q): wh ww with include_padding, else its elements inside x.
int window_count(int H, int W, int h0, int w0, int wh, int ww, int incl) {
  if (incl != 0) return wh * ww;
  return (min(h0 + wh, H) - max(h0, 0)) * (min(w0 + ww, W) - max(w0, 0));
}

// ---- convolution geometry, as the bundle passes it (16 ints) ----------------------------------
#define CONV_ARGS                                                                                  \
  int N; int C; int H; int W; int K; int R; int S; int P; int Q; int sh; int sw; int ph; int pw;   \
  int dh; int dw; int groups;

// ---- work-group sums and maxima ----------------------------------------------------------------
// The sum of every invocation's v, the same on each: a pairwise tree over the EWG values (EWG a
// power of two; invocation i adds i + s for s = EWG/2, ..., 1), a fixed order: the same bits
// every run. A macro defining the function with its shared array, for the kernels that use it;
// call it in uniform control flow. WG_MAX_FUNCTION (after it) is the maximum by the same tree: a
// comparison, so a NaN is skipped unless both sides are NaN (callers start from -Inf).
#ifdef PCY_SHUFFLE
// With subgroup shuffles (-DPCY_SHUFFLE: the device has them in compute shaders and its subgroup
// size divides EWG): a butterfly inside each subgroup (every lane ends with the same bits: each
// step adds a pair in both orders, and addition commutes), then the first lane of each subgroup
// writes its value and every invocation adds the gl_NumSubgroups values in order. Two barriers
// instead of the tree's log2(EWG) + 2; a fixed order for a given subgroup size.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#define WG_SUM_FUNCTION                                                                            \
  shared real wg_part[EWG];                                                                        \
  real wg_sum(real v) {                                                                            \
    precise real s = v;                                                                            \
    for (uint m = gl_SubgroupSize / 2u; m > 0u; m >>= 1u) {                                        \
      precise real t = s + subgroupShuffleXor(s, m);                                               \
      s = t;                                                                                       \
    }                                                                                              \
    if (gl_SubgroupInvocationID == 0u) wg_part[gl_SubgroupID] = s;                                 \
    barrier();                                                                                     \
    precise real r = wg_part[0];                                                                   \
    for (uint i = 1u; i < gl_NumSubgroups; ++i) r += wg_part[i];                                   \
    barrier();                                                                                     \
    return r;                                                                                      \
  }
#define WG_MAX_FUNCTION                                                                            \
  real wg_max(real v) {                                                                            \
    real s = v;                                                                                    \
    for (uint m = gl_SubgroupSize / 2u; m > 0u; m >>= 1u) {                                        \
      const real o = subgroupShuffleXor(s, m);                                                     \
      s = o > s ? o : s;                                                                           \
    }                                                                                              \
    if (gl_SubgroupInvocationID == 0u) wg_part[gl_SubgroupID] = s;                                 \
    barrier();                                                                                     \
    real r = wg_part[0];                                                                           \
    for (uint i = 1u; i < gl_NumSubgroups; ++i) r = wg_part[i] > r ? wg_part[i] : r;               \
    barrier();                                                                                     \
    return r;                                                                                      \
  }
#else
#define WG_SUM_FUNCTION                                                                            \
  shared real wg_part[EWG];                                                                        \
  real wg_sum(real v) {                                                                            \
    const uint lid = gl_LocalInvocationID.x;                                                       \
    wg_part[lid] = v;                                                                              \
    barrier();                                                                                     \
    for (uint s = uint(EWG) / 2u; s > 0u; s >>= 1u) {                                              \
      if (lid < s) {                                                                               \
        precise real t = wg_part[lid] + wg_part[lid + s];                                          \
        wg_part[lid] = t;                                                                          \
      }                                                                                            \
      barrier();                                                                                   \
    }                                                                                              \
    const real r = wg_part[0];                                                                     \
    barrier();                                                                                     \
    return r;                                                                                      \
  }
#define WG_MAX_FUNCTION                                                                            \
  real wg_max(real v) {                                                                            \
    const uint lid = gl_LocalInvocationID.x;                                                       \
    wg_part[lid] = v;                                                                              \
    barrier();                                                                                     \
    for (uint s = uint(EWG) / 2u; s > 0u; s >>= 1u) {                                              \
      if (lid < s && wg_part[lid + s] > wg_part[lid]) wg_part[lid] = wg_part[lid + s];             \
      barrier();                                                                                   \
    }                                                                                              \
    const real r = wg_part[0];                                                                     \
    barrier();                                                                                     \
    return r;                                                                                      \
  }
#endif
// Rows of the work-group kernels up to ROWREG x EWG elements stay in registers (element
// lid + k EWG in slot k); longer rows are read again for each pass.
#define ROWREG 8

// ---- cross_entropy: label t is ignore_index (ign_on 0: ignore_index is outside the i32 labels)
#define IGNORED(t) (ign_on != 0 && (t) == ignore)

// ---- LRN across channels: s = k + alpha / n sum of x^2 over [c - n/2, c + (n-1)/2] ----------------
// The window's ends are clipped to the channels before they are added to c (no overflow for any
// n below 2^31).
// s of channel c at the column `col` (its channel-0 element; channels HW apart): a macro that
// defines the function after the kernel's buffers, which it reads (xs).
#define LRN_S_FUNCTION                                                                             \
  real lrn_s(int col, int HW, int c, int C, int n, real alpha, real k) {                           \
    precise real acc = real(0.0);                                                                  \
    for (int j = c - min(c, n / 2); j <= c + min(C - 1 - c, (n - 1) / 2); ++j) {                  \
      const real v = xs[col + j * HW];                                                             \
      acc += v * v;                                                                                \
    }                                                                                              \
    precise real s = k + alpha / real(n) * acc;                                                    \
    return s;                                                                                      \
  }
// s^-beta for s > 0 (beta >= 0; beta 0 gives 1 as pow does, NaN passes otherwise).
real lrn_pow(real s, real beta) {
  if (beta == real(0.0)) return real(1.0);
  precise real e = -beta * log_r(s);
  return exp_r(e);
}

#kernel act_fwd
// y = f(x); x and y may be one buffer (the in-place forms).
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, writeonly, Y, ys)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys)
  real alpha; int n; int kind; };
void main() {
  // Four strides an iteration, the four loads before any use (blas_vulkan's level-1 kernels).
  const int st = GSTRIDE;
  int i = GID;
  for (; i < n - 3 * st; i += 4 * st) {
    const real x0 = xs[i], x1 = xs[i + st], x2 = xs[i + 2 * st], x3 = xs[i + 3 * st];
    ys[i] = act_f(kind, x0, alpha);
    ys[i + st] = act_f(kind, x1, alpha);
    ys[i + 2 * st] = act_f(kind, x2, alpha);
    ys[i + 3 * st] = act_f(kind, x3, alpha);
  }
  for (; i < n; i += st) ys[i] = act_f(kind, xs[i], alpha);
}

#kernel act_bwd
// dx = dy f'(x) from y; dy and dx may be one buffer (the in-place forms).
layout(local_size_x = EWG) in;
BUF(0, readonly, Y, ys)
BUF(1, readonly, DY, dys)
BUF(2, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(Y, ys) PTR(DY, dys) PTR(DX, dxs)
  real alpha; int n; int kind; };
void main() {
  const int st = GSTRIDE;
  int i = GID;
  for (; i < n - 3 * st; i += 4 * st) {
    const real y0 = ys[i], y1 = ys[i + st], y2 = ys[i + 2 * st], y3 = ys[i + 3 * st];
    const real d0 = dys[i], d1 = dys[i + st], d2 = dys[i + 2 * st], d3 = dys[i + 3 * st];
    dxs[i] = act_g(kind, y0, d0, alpha);
    dxs[i + st] = act_g(kind, y1, d1, alpha);
    dxs[i + 2 * st] = act_g(kind, y2, d2, alpha);
    dxs[i + 3 * st] = act_g(kind, y3, d3, alpha);
  }
  for (; i < n; i += st) dxs[i] = act_g(kind, ys[i], dys[i], alpha);
}

#kernel softmax_fwd
// Along an axis: the tensor is outer x len x inner; an invocation per (outer, inner) line.
// The maximum skips NaN (a comparison) but a NaN reaches the sum, so its line becomes NaN, as an
// infinity does through Inf - Inf; -Inf gives 0 (log_softmax: -Inf).
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, writeonly, Y, ys)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys)
  int lines; int len; int inner; int logm; };
void main() {
  for (int t = GID; t < lines; t += GSTRIDE) {
    const int base = (t / inner) * len * inner + t % inner;
    real m = xs[base];
    for (int j = 1; j < len; ++j) {
      const real v = xs[base + j * inner];
      m = v > m ? v : m;
    }
    precise real acc = real(0.0);
    for (int j = 0; j < len; ++j) acc += exp_r(xs[base + j * inner] - m);
    if (logm != 0) {
      const real ls = log_r(acc);
      for (int j = 0; j < len; ++j) {
        precise real v = (xs[base + j * inner] - m) - ls;
        ys[base + j * inner] = v;
      }
    } else {
      for (int j = 0; j < len; ++j) {
        precise real v = exp_r(xs[base + j * inner] - m) / acc;
        ys[base + j * inner] = v;
      }
    }
  }
}

#kernel softmax_bwd
// softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - e^y sum(dy); a line per invocation.
layout(local_size_x = EWG) in;
BUF(0, readonly, Y, ys)
BUF(1, readonly, DY, dys)
BUF(2, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(Y, ys) PTR(DY, dys) PTR(DX, dxs)
  int lines; int len; int inner; int logm; };
void main() {
  for (int t = GID; t < lines; t += GSTRIDE) {
    const int base = (t / inner) * len * inner + t % inner;
    precise real acc = real(0.0);
    for (int j = 0; j < len; ++j) {
      const int k = base + j * inner;
      acc += logm != 0 ? dys[k] : dys[k] * ys[k];
    }
    for (int j = 0; j < len; ++j) {
      const int k = base + j * inner;
      precise real v = logm != 0 ? dys[k] - exp_r(ys[k]) * acc : ys[k] * (dys[k] - acc);
      dxs[k] = v;
    }
  }
}

#kernel softmax_fwd_wg
// The last axis (inner 1) with long rows: a work-group per row (grid-strided over the rows),
// invocation lid taking the elements lid, lid + EWG, ...; the maximum and the sum over the
// work-group by wg_max and wg_sum. Local maxima start from -Inf and skip NaN by comparison; a
// NaN reaches the sum, so its row becomes NaN, as with softmax_fwd.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, writeonly, Y, ys)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys)
  int rows; int len; int logm; };
WG_SUM_FUNCTION
WG_MAX_FUNCTION
void main() {
  const int lid = int(gl_LocalInvocationID.x), groups = int(gl_NumWorkGroups.x);
  const bool held = len <= ROWREG * EWG;
  // Held rows: the group's next row is loaded (into nx) before this row's sums, so its loads
  // are in flight while the work-group reduces.
  real nx[ROWREG];
  if (held && int(gl_WorkGroupID.x) < rows)
    for (int k = 0; k < ROWREG; ++k) {
      const int j = lid + k * EWG;
      nx[k] = j < len ? xs[int(gl_WorkGroupID.x) * len + j] : -inf_real();
    }
  for (int r = int(gl_WorkGroupID.x); r < rows; r += groups) {
    const int base = r * len;
    real e[ROWREG];
    real m = -inf_real();
    if (held) {
      for (int k = 0; k < ROWREG; ++k) {
        e[k] = nx[k];
        m = e[k] > m ? e[k] : m;
      }
      if (r + groups < rows)
        for (int k = 0; k < ROWREG; ++k) {
          const int j = lid + k * EWG;
          nx[k] = j < len ? xs[(r + groups) * len + j] : -inf_real();
        }
    } else {
      for (int j = lid; j < len; j += EWG) {
        const real v = xs[base + j];
        m = v > m ? v : m;
      }
    }
    m = wg_max(m);
    precise real acc = real(0.0);
    if (held) {
      for (int k = 0; k < ROWREG; ++k)
        if (lid + k * EWG < len) {
          precise real d = e[k] - m;
          e[k] = logm != 0 ? d : exp_r(d);
          acc += logm != 0 ? exp_r(d) : e[k];
        }
    } else {
      for (int j = lid; j < len; j += EWG) acc += exp_r(xs[base + j] - m);
    }
    const real tot = wg_sum(acc);
    const real ls = logm != 0 ? log_r(tot) : real(0.0);
    if (held) {
      for (int k = 0; k < ROWREG; ++k) {
        const int j = lid + k * EWG;
        if (j < len) {
          precise real v = logm != 0 ? e[k] - ls : e[k] / tot;
          ys[base + j] = v;
        }
      }
    } else {
      for (int j = lid; j < len; j += EWG) {
        precise real d = xs[base + j] - m;
        precise real v = logm != 0 ? d - ls : exp_r(d) / tot;
        ys[base + j] = v;
      }
    }
  }
}

#kernel softmax_bwd_wg
// softmax_bwd by a work-group per row (inner 1, long rows), its sum by wg_sum.
layout(local_size_x = EWG) in;
BUF(0, readonly, Y, ys)
BUF(1, readonly, DY, dys)
BUF(2, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(Y, ys) PTR(DY, dys) PTR(DX, dxs)
  int rows; int len; int logm; };
WG_SUM_FUNCTION
void main() {
  const int lid = int(gl_LocalInvocationID.x);
  const bool held = len <= ROWREG * EWG;
  for (int r = int(gl_WorkGroupID.x); r < rows; r += int(gl_NumWorkGroups.x)) {
    const int base = r * len;
    real yv[ROWREG], dv[ROWREG];
    precise real acc = real(0.0);
    if (held) {
      for (int k = 0; k < ROWREG; ++k) {
        const int j = lid + k * EWG;
        yv[k] = j < len ? ys[base + j] : real(0.0);
        dv[k] = j < len ? dys[base + j] : real(0.0);
        if (j < len) acc += logm != 0 ? dv[k] : dv[k] * yv[k];
      }
    } else {
      for (int j = lid; j < len; j += EWG)
        acc += logm != 0 ? dys[base + j] : dys[base + j] * ys[base + j];
    }
    const real tot = wg_sum(acc);
    if (held) {
      for (int k = 0; k < ROWREG; ++k) {
        const int j = lid + k * EWG;
        if (j < len) {
          precise real v = logm != 0 ? dv[k] - exp_r(yv[k]) * tot : yv[k] * (dv[k] - tot);
          dxs[base + j] = v;
        }
      }
    } else {
      for (int j = lid; j < len; j += EWG) {
        const real y = ys[base + j], dy = dys[base + j];
        precise real v = logm != 0 ? dy - exp_r(y) * tot : y * (dy - tot);
        dxs[base + j] = v;
      }
    }
  }
}

#kernel dropout_fwd
// An invocation per 4 elements: their y and their mask word (one byte each, little-endian). The
// mask holds n bytes, so its last word is not whole when 4 does not divide n: that word goes to
// `tail`, and the bundle copies its bytes into place (no 8-bit storage needed).
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, writeonly, Y, ys)
UBUF(2, writeonly, M, ms)
UBUF(3, writeonly, TAIL, tail)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys) PTR(M, ms) PTR(TAIL, tail)
  real scale; int n; uint seed_lo; uint seed_hi; uint thr; };
void main() {
  const int words = (n + 3) / 4;
  for (int w = GID; w < words; w += GSTRIDE) {
    uint packed = 0u;
    for (int b = 0; b < 4; ++b) {
      const int i = 4 * w + b;
      if (i >= n) break;
      const bool keep = dropout_keep(uvec2(seed_lo, seed_hi), i, thr);
      precise real v = xs[i] * scale;
      ys[i] = keep ? v : real(0.0);
      packed |= (keep ? 1u : 0u) << (8 * b);
    }
    if (4 * w + 4 <= n)
      ms[w] = packed;
    else
      tail[0] = packed;
  }
}

#kernel dropout_bwd
// dx = mask ? dy scale : 0 (any non-zero byte keeps), 4 elements an invocation; the mask's last
// word, when not whole, comes from `tail` (copied there by the bundle).
layout(local_size_x = EWG) in;
BUF(0, readonly, DY, dys)
UBUF(1, readonly, M, ms)
UBUF(2, readonly, TAIL, tail)
BUF(3, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(DY, dys) PTR(M, ms) PTR(TAIL, tail) PTR(DX, dxs)
  real scale; int n; };
void main() {
  const int words = (n + 3) / 4;
  for (int w = GID; w < words; w += GSTRIDE) {
    const uint word = 4 * w + 4 <= n ? ms[w] : tail[0];
    for (int b = 0; b < 4; ++b) {
      const int i = 4 * w + b;
      if (i >= n) break;
      precise real v = dys[i] * scale;
      dxs[i] = ((word >> (8 * b)) & 0xffu) != 0u ? v : real(0.0);
    }
  }
}

#kernel pool_max
// y = the window's maximum; the first maximum in row-major order as h W + w into idx when
// with_idx. NaN counts as the largest value (the first NaN wins). An invocation per output.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, writeonly, Y, ys)
IBUF(2, writeonly, I, idx)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys) PTR(I, idx)
  POOL_ARGS int with_idx; };
void main() {
  const int PQ = P * Q, HW = H * W, total = planes * PQ;
  for (int t = GID; t < total; t += GSTRIDE) {
    const int q = t % Q, p = (t / Q) % P, base = (t / PQ) * HW;
    const int h0 = p * sh - ph, w0 = q * sw - pw;
    int bi = -1;
    real best = real(0.0);
    if (h0 >= 0 && w0 >= 0 && h0 + wh <= H && w0 + ww <= W && wh * ww <= 9) {
      // A window of at most 3 x 3 inside the plane: its loads issued together (a loop of constant
      // bound), then compared in the same row-major order.
      real v[9];
      for (int k = 0; k < 9; ++k)
        if (k < wh * ww) v[k] = xs[base + (h0 + k / ww) * W + w0 + k % ww];
      for (int k = 0; k < 9; ++k)
        if (k < wh * ww && (bi < 0 || (!nan_bits(best) && (nan_bits(v[k]) || v[k] > best)))) {
          best = v[k];
          bi = (h0 + k / ww) * W + w0 + k % ww;
        }
    } else {
      for (int r = max(h0, 0); r < min(h0 + wh, H); ++r)
        for (int c = max(w0, 0); c < min(w0 + ww, W); ++c) {
          const real v = xs[base + r * W + c];
          if (bi < 0 || (!nan_bits(best) && (nan_bits(v) || v > best))) {
            best = v;
            bi = r * W + c;
          }
        }
    }
    ys[t] = bi < 0 ? nan_real() : best;
    if (with_idx != 0) idx[t] = bi;
  }
}

#kernel pool_max_grad
// dx[h, w] = the sum of dy over the windows whose first maximum (recomputed from x) is (h, w):
// an invocation per element of dx, no atomics.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, DY, dys)
BUF(2, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(DY, dys) PTR(DX, dxs)
  POOL_ARGS };
void main() {
  const int PQ = P * Q, HW = H * W, total = planes * HW;
  for (int t = GID; t < total; t += GSTRIDE) {
    const int iw = t % W, ih = (t / W) % H, plane = t / HW;
    const int me = ih * W + iw;
    COVER(ih, ph, wh, sh, P, p0, p1)
    COVER(iw, pw, ww, sw, Q, q0, q1)
    precise real acc = real(0.0);
    for (int p = p0; p <= p1; ++p)
      for (int q = q0; q <= q1; ++q) {
        const int h0 = p * sh - ph, w0 = q * sw - pw;
        int bi = -1;
        real best = real(0.0);
        for (int r = max(h0, 0); r < min(h0 + wh, H); ++r)
          for (int c = max(w0, 0); c < min(w0 + ww, W); ++c) {
            const real v = xs[plane * HW + r * W + c];
            if (bi < 0 || (!nan_bits(best) && (nan_bits(v) || v > best))) {
              best = v;
              bi = r * W + c;
            }
          }
        if (bi == me) acc += dys[plane * PQ + p * Q + q];
      }
    dxs[t] = acc;
  }
}

#kernel pool_max_grad_idx
// From indices: dx = 0, then dy[p, q] added at indices[p, q] in row-major (p, q) order (the
// reference's); indices outside the plane add nothing. An invocation per plane.
layout(local_size_x = EWG) in;
BUF(0, readonly, DY, dys)
IBUF(1, readonly, I, idx)
BUF(2, RW, DX, dxs)
layout(push_constant) uniform args {
  PTR(DY, dys) PTR(I, idx) PTR(DX, dxs)
  int planes; int HW; int PQ; };
void main() {
  for (int plane = GID; plane < planes; plane += GSTRIDE) {
    for (int i = 0; i < HW; ++i) dxs[plane * HW + i] = real(0.0);
    for (int j = 0; j < PQ; ++j) {
      const int i = idx[plane * PQ + j];
      if (i >= 0 && i < HW) {
        precise real v = dxs[plane * HW + i] + dys[plane * PQ + j];
        dxs[plane * HW + i] = v;
      }
    }
  }
}

#kernel pool_avg
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, writeonly, Y, ys)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys)
  POOL_ARGS int incl; };
void main() {
  const int PQ = P * Q, HW = H * W, total = planes * PQ;
  for (int t = GID; t < total; t += GSTRIDE) {
    const int q = t % Q, p = (t / Q) % P, base = (t / PQ) * HW;
    const int h0 = p * sh - ph, w0 = q * sw - pw;
    precise real acc = real(0.0);
    for (int r = max(h0, 0); r < min(h0 + wh, H); ++r)
      for (int c = max(w0, 0); c < min(w0 + ww, W); ++c) acc += xs[base + r * W + c];
    precise real v = acc / real(window_count(H, W, h0, w0, wh, ww, incl));
    ys[t] = v;
  }
}

#kernel pool_avg_grad
// dx[h, w] = the sum over the windows covering (h, w) of dy / their divisor.
layout(local_size_x = EWG) in;
BUF(0, readonly, DY, dys)
BUF(1, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(DY, dys) PTR(DX, dxs)
  POOL_ARGS int incl; };
void main() {
  const int PQ = P * Q, HW = H * W, total = planes * HW;
  for (int t = GID; t < total; t += GSTRIDE) {
    const int iw = t % W, ih = (t / W) % H, plane = t / HW;
    COVER(ih, ph, wh, sh, P, p0, p1)
    COVER(iw, pw, ww, sw, Q, q0, q1)
    precise real acc = real(0.0);
    for (int p = p0; p <= p1; ++p)
      for (int q = q0; q <= q1; ++q)
        acc += dys[plane * PQ + p * Q + q] /
               real(window_count(H, W, p * sh - ph, q * sw - pw, wh, ww, incl));
    dxs[t] = acc;
  }
}

#kernel lrn_fwd
// y = x s^-beta; an invocation per element.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, writeonly, Y, ys)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys)
  real alpha; real beta; real k; int total; int C; int HW; int n; };
LRN_S_FUNCTION
void main() {
  for (int t = GID; t < total; t += GSTRIDE) {
    const int c = (t / HW) % C, col = (t / (HW * C)) * C * HW + t % HW;
    precise real v = xs[t] * lrn_pow(lrn_s(col, HW, c, C, n, alpha, k), beta);
    ys[t] = v;
  }
}

#kernel lrn_grad
// dx[c] = dy[c] s[c]^-beta - 2 alpha beta / n x[c] sum_{c': c in W(c')} dy[c'] y[c'] / s[c'],
// c' in [c - (n-1)/2, c + n/2]; each s recomputed from x (no workspace). An invocation per element.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, Y, ys)
BUF(2, readonly, DY, dys)
BUF(3, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys) PTR(DY, dys) PTR(DX, dxs)
  real alpha; real beta; real k; int total; int C; int HW; int n; };
LRN_S_FUNCTION
void main() {
  for (int t = GID; t < total; t += GSTRIDE) {
    const int c = (t / HW) % C, col = (t / (HW * C)) * C * HW + t % HW;
    precise real acc = real(0.0);
    for (int j = c - min(c, (n - 1) / 2); j <= c + min(C - 1 - c, n / 2); ++j) {
      const int e = col + j * HW;
      acc += dys[e] * ys[e] / lrn_s(col, HW, j, C, n, alpha, k);
    }
    const real s = lrn_s(col, HW, c, C, n, alpha, k);
    precise real v =
        dys[t] * lrn_pow(s, beta) - real(2.0) * alpha * beta / real(n) * xs[t] * acc;
    dxs[t] = v;
  }
}

#kernel norm_fwd
// layer_norm (layer 1) and rms_norm (0): an invocation per row of n, two passes (the mean, then
// the squares about it); save: 1 writes the mean, 2 rstd. A row of NaN or an infinity turns NaN
// through Inf - Inf; n = 0 gives NaN statistics.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, W, ws)
BUF(2, readonly, B, bs)
BUF(3, writeonly, Y, ys)
BUF(4, writeonly, M, ms)
BUF(5, writeonly, R, rs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(W, ws) PTR(B, bs) PTR(Y, ys) PTR(M, ms) PTR(R, rs)
  real eps; int outer; int n; int layer; int save; };
void main() {
  for (int r = GID; r < outer; r += GSTRIDE) {
    const int base = r * n;
    real mu = real(0.0), rstd = nan_real();
    if (n == 0) {
      mu = nan_real();
    } else {
      if (layer != 0) {
        precise real acc = real(0.0);
        for (int j = 0; j < n; ++j) acc += xs[base + j];
        precise real m = acc / real(n);
        mu = m;
      }
      precise real acc = real(0.0);
      for (int j = 0; j < n; ++j) {
        precise real d = xs[base + j] - mu;
        acc += d * d;
      }
      precise real v = real(1.0) / sqrt(acc / real(n) + eps);
      rstd = v;
      for (int j = 0; j < n; ++j) {
        precise real h = (xs[base + j] - mu) * rstd * ws[j];
        if (layer != 0) h += bs[j];
        ys[base + j] = h;
      }
    }
    if ((save & 1) != 0) ms[r] = mu;
    if ((save & 2) != 0) rs[r] = rstd;
  }
}

#kernel norm_bwd_row
// dx per row: rstd (g - mean(g) - xhat mean(g xhat)), g = dy w (rms_norm: no mean(g) term); an
// invocation per row.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, W, ws)
BUF(2, readonly, M, ms)
BUF(3, readonly, R, rs)
BUF(4, readonly, DY, dys)
BUF(5, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(W, ws) PTR(M, ms) PTR(R, rs) PTR(DY, dys) PTR(DX, dxs)
  int outer; int n; int layer; };
void main() {
  for (int r = GID; r < outer; r += GSTRIDE) {
    const int base = r * n;
    const real mu = layer != 0 ? ms[r] : real(0.0), rstd = rs[r];
    precise real sg = real(0.0), sgx = real(0.0);
    for (int j = 0; j < n; ++j) {
      precise real g = dys[base + j] * ws[j];
      sg += g;
      sgx += g * ((xs[base + j] - mu) * rstd);
    }
    precise real mg = layer != 0 ? sg / real(n) : real(0.0);
    precise real mgx = sgx / real(n);
    for (int j = 0; j < n; ++j) {
      precise real v = rstd * (dys[base + j] * ws[j] - mg - ((xs[base + j] - mu) * rstd) * mgx);
      dxs[base + j] = v;
    }
  }
}

#kernel norm_fwd_wg
// norm_fwd for long rows: a work-group per row (grid-strided over the rows), invocation lid
// taking the elements lid, lid + EWG, ...; the two sums by wg_sum. Same arithmetic per element as
// norm_fwd (the bundle sends n = 0 there).
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, W, ws)
BUF(2, readonly, B, bs)
BUF(3, writeonly, Y, ys)
BUF(4, writeonly, M, ms)
BUF(5, writeonly, R, rs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(W, ws) PTR(B, bs) PTR(Y, ys) PTR(M, ms) PTR(R, rs)
  real eps; int outer; int n; int layer; int save; };
WG_SUM_FUNCTION
void main() {
  const int lid = int(gl_LocalInvocationID.x);
  const bool held = n <= ROWREG * EWG;
  for (int r = int(gl_WorkGroupID.x); r < outer; r += int(gl_NumWorkGroups.x)) {
    const int base = r * n;
    real xv[ROWREG];
    if (held)
      for (int k = 0; k < ROWREG; ++k) {
        const int j = lid + k * EWG;
        xv[k] = j < n ? xs[base + j] : real(0.0);
      }
    real mu = real(0.0);
    if (layer != 0) {
      precise real acc = real(0.0);
      if (held)
        for (int k = 0; k < ROWREG; ++k) acc += xv[k];
      else
        for (int j = lid; j < n; j += EWG) acc += xs[base + j];
      precise real m = wg_sum(acc) / real(n);
      mu = m;
    }
    precise real sq = real(0.0);
    if (held) {
      for (int k = 0; k < ROWREG; ++k)
        if (lid + k * EWG < n) {
          precise real d = xv[k] - mu;
          sq += d * d;
        }
    } else {
      for (int j = lid; j < n; j += EWG) {
        precise real d = xs[base + j] - mu;
        sq += d * d;
      }
    }
    precise real rstd = real(1.0) / sqrt(wg_sum(sq) / real(n) + eps);
    if (held) {
      for (int k = 0; k < ROWREG; ++k) {
        const int j = lid + k * EWG;
        if (j < n) {
          precise real h = (xv[k] - mu) * rstd * ws[j];
          if (layer != 0) h += bs[j];
          ys[base + j] = h;
        }
      }
    } else {
      for (int j = lid; j < n; j += EWG) {
        precise real h = (xs[base + j] - mu) * rstd * ws[j];
        if (layer != 0) h += bs[j];
        ys[base + j] = h;
      }
    }
    if (lid == 0) {
      if ((save & 1) != 0) ms[r] = mu;
      if ((save & 2) != 0) rs[r] = rstd;
    }
  }
}

#kernel norm_bwd_wg
// norm_bwd_row for long rows: a work-group per row, its two sums by wg_sum.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, W, ws)
BUF(2, readonly, M, ms)
BUF(3, readonly, R, rs)
BUF(4, readonly, DY, dys)
BUF(5, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(W, ws) PTR(M, ms) PTR(R, rs) PTR(DY, dys) PTR(DX, dxs)
  int outer; int n; int layer; };
WG_SUM_FUNCTION
void main() {
  const int lid = int(gl_LocalInvocationID.x);
  const bool held = n <= ROWREG * EWG;
  for (int r = int(gl_WorkGroupID.x); r < outer; r += int(gl_NumWorkGroups.x)) {
    const int base = r * n;
    const real mu = layer != 0 ? ms[r] : real(0.0), rstd = rs[r];
    real gv[ROWREG], hv[ROWREG];
    precise real sg = real(0.0), sgx = real(0.0);
    if (held) {
      for (int k = 0; k < ROWREG; ++k) {
        const int j = lid + k * EWG;
        gv[k] = real(0.0);
        hv[k] = real(0.0);
        if (j < n) {
          precise real g = dys[base + j] * ws[j];
          precise real h = (xs[base + j] - mu) * rstd;
          gv[k] = g;
          hv[k] = h;
          sg += g;
          sgx += g * h;
        }
      }
    } else {
      for (int j = lid; j < n; j += EWG) {
        precise real g = dys[base + j] * ws[j];
        precise real h = (xs[base + j] - mu) * rstd;
        sg += g;
        sgx += g * h;
      }
    }
    const real tsg = wg_sum(sg), tsgx = wg_sum(sgx);
    precise real mg = layer != 0 ? tsg / real(n) : real(0.0);
    precise real mgx = tsgx / real(n);
    if (held) {
      for (int k = 0; k < ROWREG; ++k) {
        const int j = lid + k * EWG;
        if (j < n) {
          precise real v = rstd * (gv[k] - mg - hv[k] * mgx);
          dxs[base + j] = v;
        }
      }
    } else {
      for (int j = lid; j < n; j += EWG) {
        precise real g = dys[base + j] * ws[j];
        precise real h = (xs[base + j] - mu) * rstd;
        precise real v = rstd * (g - mg - h * mgx);
        dxs[base + j] = v;
      }
    }
  }
}

#kernel norm_bwd_cols
// dweight[j] = the sum over rows of dy xhat, dbias[j] (layer) the sum of dy: an invocation per
// column, the rows in order (the same bits on every run, no atomics).
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, M, ms)
BUF(2, readonly, R, rs)
BUF(3, readonly, DY, dys)
BUF(4, writeonly, DW, dws)
BUF(5, writeonly, DB, dbs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(M, ms) PTR(R, rs) PTR(DY, dys) PTR(DW, dws) PTR(DB, dbs)
  int outer; int n; int layer; };
void main() {
  for (int j = GID; j < n; j += GSTRIDE) {
    precise real aw = real(0.0), ab = real(0.0);
    for (int r = 0; r < outer; ++r) {
      const real d = dys[r * n + j];
      const real mu = layer != 0 ? ms[r] : real(0.0);
      aw += d * ((xs[r * n + j] - mu) * rs[r]);
      ab += d;
    }
    dws[j] = aw;
    if (layer != 0) dbs[j] = ab;
  }
}

#kernel xent_fwd
// cross_entropy: an invocation per row of C classes: its maximum (a comparison skips a NaN, the
// sums take it), then sum e^(x - max) and sum x. red 0 writes each row's loss; red 1 (mean) and
// 2 (sum) run in ONE work-group: invocation i adds the rows i, i + EWG, ... in order, then the
// first adds the EWG partial sums in order (the same bits on every run). save: lse written.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
IBUF(1, readonly, I, idx)
BUF(2, writeonly, L, ys)
BUF(3, writeonly, S, rs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(I, idx) PTR(L, ys) PTR(S, rs)
  real eps; int rows; int C; int ignore; int ign_on; int red; int save; };
shared real part[EWG];
shared int counted[EWG];
void main() {
  precise real total = real(0.0);
  int count = 0;
  const int lid = int(gl_LocalInvocationID.x);
  for (int r = red == 0 ? GID : lid; r < rows; r += red == 0 ? GSTRIDE : EWG) {
    const int base = r * C;
    real m = -inf_real();
    for (int j = 0; j < C; ++j) {
      const real v = xs[base + j];
      m = v > m ? v : m;
    }
    precise real acc = real(0.0), sx = real(0.0);
    for (int j = 0; j < C; ++j) {
      const real v = xs[base + j];
      acc += exp_r(v - m);
      sx += v;
    }
    precise real l = m + log_r(acc);
    if (save != 0) rs[r] = l;
    const int t = idx[r];
    precise real v = real(0.0);
    if (!IGNORED(t)) {
      ++count;
      if (t >= 0 && t < C) {
        // The smoothing term only where eps > 0: a -inf logit leaves the loss finite otherwise.
        v = (real(1.0) - eps) * (l - xs[base + t]);
        if (eps > real(0.0)) v = v + eps * (l - sx / real(C));
      } else {
        v = nan_real();
      }
      total += v;
    }
    if (red == 0) ys[r] = v;
  }
  if (red != 0) {
    part[lid] = total;
    counted[lid] = count;
    barrier();
    if (lid == 0) {
      precise real s = real(0.0);
      int k = 0;
      for (int i = 0; i < EWG; ++i) {
        s += part[i];
        k += counted[i];
      }
      precise real mean = s / real(k); // 0 / 0: NaN (no row counted)
      ys[0] = red == 1 ? (k == 0 ? nan_real() : mean) : s;
    }
  }
}

#kernel xent_bwd
// dlogits = g (e^(x - lse) - (1 - eps) onehot(t) - eps / C), an invocation per row; red 1 (mean):
// every work-group first counts the rows not ignored (an exact integer sum). Ignored rows 0,
// labels outside the classes NaN.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
IBUF(1, readonly, I, idx)
BUF(2, readonly, S, rs)
BUF(3, readonly, DL, dys)
BUF(4, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(I, idx) PTR(S, rs) PTR(DL, dys) PTR(DX, dxs)
  real eps; int rows; int C; int ignore; int ign_on; int red; };
shared int counted[EWG];
void main() {
  const int lid = int(gl_LocalInvocationID.x);
  real g0 = red == 0 ? real(0.0) : dys[0];
  if (red == 1) {
    int k = 0;
    for (int r = lid; r < rows; r += EWG) k += IGNORED(idx[r]) ? 0 : 1;
    counted[lid] = k;
    barrier();
    k = 0;
    for (int i = 0; i < EWG; ++i) k += counted[i];
    precise real g = g0 / real(k);
    g0 = g;
  }
  precise real off = eps / real(C);
  for (int r = GID; r < rows; r += GSTRIDE) {
    const int base = r * C, t = idx[r];
    if (IGNORED(t)) {
      for (int j = 0; j < C; ++j) dxs[base + j] = real(0.0);
      continue;
    }
    const bool ok = t >= 0 && t < C;
    const real g = red == 0 ? dys[r] : g0, l = rs[r];
    for (int j = 0; j < C; ++j) {
      precise real v = g * (exp_r(xs[base + j] - l) - off - (j == t ? real(1.0) - eps : real(0.0)));
      dxs[base + j] = ok ? v : nan_real();
    }
  }
}

#kernel emb_fwd
// embedding: a gather, an invocation per element of y (n x D); an index outside [0, V) gives NaN.
layout(local_size_x = EWG) in;
BUF(0, readonly, W, ws)
IBUF(1, readonly, I, idx)
BUF(2, writeonly, Y, ys)
layout(push_constant) uniform args {
  PTR(W, ws) PTR(I, idx) PTR(Y, ys)
  int n; int D; int V; };
void main() {
  const int total = n * D;
  for (int e = GID; e < total; e += GSTRIDE) {
    const int i = e / D, j = e - i * D, v = idx[i];
    ys[e] = v >= 0 && v < V ? ws[v * D + j] : nan_real();
  }
}

#kernel emb_grad
// embedding_grad, deterministic without atomics: an invocation per row v of dweight and chunk of
// EMB_CHUNK columns scans the n positions in increasing order, adding dy[i, chunk] where
// indices[i] == v, each column's sum from +0 (padding_idx's row stays 0). Every invocation reads
// all n indices: slow for large inputs. The chunk keeps an invocation's loop iterations near
// n + (its matches) EMB_CHUNK: lavapipe ends a shader's loops after 65535 iterations in all.
#define EMB_CHUNK 32
layout(local_size_x = EWG) in;
IBUF(0, readonly, I, idx)
BUF(1, readonly, DY, dys)
BUF(2, writeonly, DW, dws)
layout(push_constant) uniform args {
  PTR(I, idx) PTR(DY, dys) PTR(DW, dws)
  int n; int D; int V; int pad; };
void main() {
  const int chunks = (D + EMB_CHUNK - 1) / EMB_CHUNK, items = V * chunks;
  for (int t = GID; t < items; t += GSTRIDE) {
    const int v = t / chunks, j0 = (t - v * chunks) * EMB_CHUNK,
              w = min(EMB_CHUNK, D - j0);
    precise real acc[EMB_CHUNK];
    for (int j = 0; j < EMB_CHUNK; ++j) acc[j] = real(0.0);
    if (v != pad)
      for (int i = 0; i < n; ++i)
        if (idx[i] == v)
          for (int j = 0; j < w; ++j) acc[j] += dys[i * D + j0 + j];
    for (int j = 0; j < w; ++j) dws[v * D + j0 + j] = acc[j];
  }
}

#kernel bn_fwd
// batch_norm: a work-group per channel (grid-strided over the channels) over its M = N sp
// elements; channel c's element i is x[(i / sp) C sp + c sp + i % sp]. Each invocation sums
// every EWG-th element, the first adds the EWG partial sums in order (the same bits every run).
// Training: two passes (the mean, then the squares about it). flags: 1 training, 2 running_mean,
// 4 running_var, 8 save_mean, 16 save_rstd (those absent are the tail word, not touched).
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, W, ws)
BUF(2, readonly, B, bs)
BUF(3, RW, RM, ms)
BUF(4, RW, RV, rs)
BUF(5, writeonly, Y, ys)
BUF(6, writeonly, SM, dws)
BUF(7, writeonly, SR, dbs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(W, ws) PTR(B, bs) PTR(RM, ms) PTR(RV, rs) PTR(Y, ys) PTR(SM, dws) PTR(SR, dbs)
  real momentum; real eps; int N; int C; int sp; int flags; };
WG_SUM_FUNCTION
void main() {
  const int lid = int(gl_LocalInvocationID.x), M = N * sp, cs = C * sp;
  for (int c = int(gl_WorkGroupID.x); c < C; c += int(gl_NumWorkGroups.x)) {
    const int base = c * sp;
    real mu, rstd;
    if ((flags & 1) != 0) {
      precise real acc = real(0.0);
      for (int i = lid; i < M; i += EWG) acc += xs[base + (i / sp) * cs + i % sp];
      precise real m = wg_sum(acc) / real(M);
      mu = m;
      precise real sq = real(0.0);
      for (int i = lid; i < M; i += EWG) {
        precise real d = xs[base + (i / sp) * cs + i % sp] - mu;
        sq += d * d;
      }
      precise real var = wg_sum(sq) / real(M);
      precise real r = real(1.0) / sqrt(var + eps);
      rstd = r;
      if (lid == 0) {
        if ((flags & 2) != 0) {
          precise real v = (real(1.0) - momentum) * ms[c] + momentum * mu;
          ms[c] = v;
        }
        if ((flags & 4) != 0) {
          precise real v =
              (real(1.0) - momentum) * rs[c] + momentum * (var * real(M) / real(M - 1));
          rs[c] = v;
        }
      }
    } else {
      mu = ms[c];
      precise real r = real(1.0) / sqrt(rs[c] + eps);
      rstd = r;
    }
    const real wc = ws[c], bc = bs[c];
    for (int i = lid; i < M; i += EWG) {
      const int e = base + (i / sp) * cs + i % sp;
      precise real v = (xs[e] - mu) * rstd * wc + bc;
      ys[e] = v;
    }
    if (lid == 0) {
      if ((flags & 8) != 0) dws[c] = mu;
      if ((flags & 16) != 0) dbs[c] = rstd;
    }
  }
}

#kernel bn_bwd
// The gradient per channel (a work-group each, as bn_fwd): sum dy and sum dy xhat (dbias and
// dweight), then dx = rstd (g - mean(g) - xhat mean(g xhat)) in training, rstd g otherwise
// (g = dy w; x does not enter, so a NaN x leaves dx finite). flags: 1 training, 2 dweight,
// 4 dbias.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, W, ws)
BUF(2, readonly, MEAN, ms)
BUF(3, readonly, RSTD, rs)
BUF(4, readonly, DY, dys)
BUF(5, writeonly, DX, dxs)
BUF(6, writeonly, DW, dws)
BUF(7, writeonly, DB, dbs)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(W, ws) PTR(MEAN, ms) PTR(RSTD, rs) PTR(DY, dys) PTR(DX, dxs) PTR(DW, dws) PTR(DB, dbs)
  int N; int C; int sp; int flags; };
WG_SUM_FUNCTION
void main() {
  const int lid = int(gl_LocalInvocationID.x), M = N * sp, cs = C * sp;
  for (int c = int(gl_WorkGroupID.x); c < C; c += int(gl_NumWorkGroups.x)) {
    const int base = c * sp;
    const real mu = ms[c], rstd = rs[c], wc = ws[c];
    precise real sd = real(0.0), sdx = real(0.0);
    for (int i = lid; i < M; i += EWG) {
      const int e = base + (i / sp) * cs + i % sp;
      const real d = dys[e];
      sd += d;
      sdx += d * ((xs[e] - mu) * rstd);
    }
    const real tsd = wg_sum(sd), tsdx = wg_sum(sdx);
    if (lid == 0) {
      if ((flags & 2) != 0) dws[c] = tsdx;
      if ((flags & 4) != 0) dbs[c] = tsd;
    }
    precise real mg = wc * tsd / real(M), mgx = wc * tsdx / real(M);
    for (int i = lid; i < M; i += EWG) {
      const int e = base + (i / sp) * cs + i % sp;
      precise real v;
      if ((flags & 1) != 0)
        v = rstd * (dys[e] * wc - mg - ((xs[e] - mu) * rstd) * mgx);
      else
        v = rstd * (dys[e] * wc);
      dxs[e] = v;
    }
  }
}

// ---- convolution (direct loops): geometry N C H W K R S P Q sh sw ph pw dh dw groups ----------
#kernel conv_fwd
// y[n,k,p,q] = the sum over c (of k's group), r, s of x w, in that order; an invocation per y.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, WF, ws)
BUF(2, writeonly, Y, ys)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(WF, ws) PTR(Y, ys)
  CONV_ARGS };
void main() {
  const int Cg = C / groups, Kg = K / groups, total = N * K * P * Q;
  for (int t = GID; t < total; t += GSTRIDE) {
    const int q = t % Q, p = (t / Q) % P, k = (t / (P * Q)) % K, n = t / (K * P * Q);
    const int c0 = (k / Kg) * Cg;
    precise real acc = real(0.0);
    for (int c = 0; c < Cg; ++c)
      for (int r = 0; r < R; ++r) {
        const int h = p * sh - ph + r * dh;
        if (h < 0 || h >= H) continue;
        for (int s = 0; s < S; ++s) {
          const int w = q * sw - pw + s * dw;
          if (w < 0 || w >= W) continue;
          acc += xs[((n * C + c0 + c) * H + h) * W + w] * ws[((k * Cg + c) * R + r) * S + s];
        }
      }
    ys[t] = acc;
  }
}

#kernel conv_data
// dx[n,c,h,w] = the sum over k (of c's group), r, s with h = p sh - ph + r dh (w likewise) of
// dy[n,k,p,q] w[k,c,r,s]; an invocation per dx.
layout(local_size_x = EWG) in;
BUF(0, readonly, WF, ws)
BUF(1, readonly, DY, dys)
BUF(2, writeonly, DX, dxs)
layout(push_constant) uniform args {
  PTR(WF, ws) PTR(DY, dys) PTR(DX, dxs)
  CONV_ARGS };
void main() {
  const int Cg = C / groups, Kg = K / groups, total = N * C * H * W;
  for (int t = GID; t < total; t += GSTRIDE) {
    const int iw = t % W, ih = (t / W) % H, ci = (t / (H * W)) % C, n = t / (C * H * W);
    const int g = ci / Cg, c = ci - g * Cg;
    precise real acc = real(0.0);
    for (int k = g * Kg; k < (g + 1) * Kg; ++k)
      for (int r = 0; r < R; ++r) {
        const int hh = ih + ph - r * dh;
        if (hh < 0 || hh % sh != 0 || hh / sh >= P) continue;
        const int p = hh / sh;
        for (int s = 0; s < S; ++s) {
          const int ww = iw + pw - s * dw;
          if (ww < 0 || ww % sw != 0 || ww / sw >= Q) continue;
          acc += dys[((n * K + k) * P + p) * Q + ww / sw] * ws[((k * Cg + c) * R + r) * S + s];
        }
      }
    dxs[t] = acc;
  }
}

#kernel conv_filter
// dw[k,c,r,s] = the sum over n, p, q of x dy, in that order; an invocation per dw.
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, DY, dys)
BUF(2, writeonly, DW, dws)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(DY, dys) PTR(DW, dws)
  CONV_ARGS };
void main() {
  const int Cg = C / groups, Kg = K / groups, total = K * Cg * R * S;
  for (int t = GID; t < total; t += GSTRIDE) {
    const int s = t % S, r = (t / S) % R, c = (t / (R * S)) % Cg, k = t / (Cg * R * S);
    const int ci = (k / Kg) * Cg + c;
    precise real acc = real(0.0);
    for (int n = 0; n < N; ++n)
      for (int p = 0; p < P; ++p) {
        const int h = p * sh - ph + r * dh;
        if (h < 0 || h >= H) continue;
        for (int q = 0; q < Q; ++q) {
          const int w = q * sw - pw + s * dw;
          if (w < 0 || w >= W) continue;
          acc += xs[((n * C + ci) * H + h) * W + w] * dys[((n * K + k) * P + p) * Q + q];
        }
      }
    dws[t] = acc;
  }
}

#kernel conv_bias
// y[n,k,:,:] += bias[k]; an invocation per element.
layout(local_size_x = EWG) in;
BUF(0, RW, Y, ys)
BUF(1, readonly, B, bs)
layout(push_constant) uniform args {
  PTR(Y, ys) PTR(B, bs)
  int total; int K; int PQ; };
void main() {
  for (int t = GID; t < total; t += GSTRIDE) {
    precise real v = ys[t] + bs[(t / PQ) % K];
    ys[t] = v;
  }
}

#kernel conv_grad_bias
// db[k] = the sum over n, p, q of dy: a work-group per k (grid-strided), each invocation adding
// every EWG-th element, the first the partial sums in order.
layout(local_size_x = EWG) in;
BUF(0, readonly, DY, dys)
BUF(1, writeonly, DB, dbs)
layout(push_constant) uniform args {
  PTR(DY, dys) PTR(DB, dbs)
  int N; int K; int PQ; };
WG_SUM_FUNCTION
void main() {
  const int lid = int(gl_LocalInvocationID.x), M = N * PQ;
  for (int k = int(gl_WorkGroupID.x); k < K; k += int(gl_NumWorkGroups.x)) {
    precise real acc = real(0.0);
    for (int i = lid; i < M; i += EWG) acc += dys[((i / PQ) * K + k) * PQ + i % PQ];
    const real tot = wg_sum(acc);
    if (lid == 0) dbs[k] = tot;
  }
}
