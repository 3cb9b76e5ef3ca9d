// GLSL helpers of array_vulkan's shaders (common/array_glsl.hpp writes each program's main and
// defines, before this text, which sections it needs). Floating values are classified by their
// bits (lavapipe's compiler treats float maths not marked `precise` as free of NaN and
// infinity); every floating step that must round on its own is `precise`.
//   PCY_F32, PCY_F64      bit-level NaN/inf/zero/sign tests, abs, negation, copysign, nextafter
//   PCY_HALF              f16/bf16 from and to f32 (and f64 with PCY_F64), integers: one rounding
//                         to nearest even from the exact value (array_codegen.hpp's conversions)
//   PCY_DIVMOD_F32/_F64   NumPy's floating divmod over C's fmod done on the bits
//   PCY_VIA_F64           the f32 transcendental functions through binary64, one rounding
//   PCY_UPOW, PCY_UPOW64  integer powers modulo 2^32 / 2^64

// ---- PCY_F32 ----
#ifdef PCY_F32
bool pcy_isnan_f32(float x) { return (floatBitsToUint(x) & 0x7FFFFFFFu) > 0x7F800000u; }
bool pcy_isinf_f32(float x) { return (floatBitsToUint(x) & 0x7FFFFFFFu) == 0x7F800000u; }
bool pcy_iszero_f32(float x) { return (floatBitsToUint(x) & 0x7FFFFFFFu) == 0u; }
bool pcy_neg_f32(float x) { return (floatBitsToUint(x) & 0x80000000u) != 0u; }
float pcy_abs_f32(float x) { return uintBitsToFloat(floatBitsToUint(x) & 0x7FFFFFFFu); }
float pcy_flip_f32(float x) { return uintBitsToFloat(floatBitsToUint(x) ^ 0x80000000u); }
float pcy_copysign_f32(float x, float y) {
  return uintBitsToFloat((floatBitsToUint(x) & 0x7FFFFFFFu) | (floatBitsToUint(y) & 0x80000000u));
}
float pcy_nextafter_f32(float x, float y) {
  if (pcy_isnan_f32(x) || pcy_isnan_f32(y)) return uintBitsToFloat(0x7FC00000u);
  const uint ux = floatBitsToUint(x), uy = floatBitsToUint(y);
  if (ux == uy || (pcy_iszero_f32(x) && pcy_iszero_f32(y))) return y;
  if (pcy_iszero_f32(x)) return uintBitsToFloat((uy & 0x80000000u) | 1u);
  const bool up = (x < y) != pcy_neg_f32(x); // away from zero
  return uintBitsToFloat(up ? ux + 1u : ux - 1u);
}
#endif

// ---- PCY_F64 ----
#ifdef PCY_F64
uint pcy_hi_f64(double x) { return unpackDouble2x32(x).y; }
uint pcy_lo_f64(double x) { return unpackDouble2x32(x).x; }
bool pcy_isnan_f64(double x) {
  const uint h = pcy_hi_f64(x) & 0x7FFFFFFFu;
  return h > 0x7FF00000u || (h == 0x7FF00000u && pcy_lo_f64(x) != 0u);
}
bool pcy_isinf_f64(double x) {
  return (pcy_hi_f64(x) & 0x7FFFFFFFu) == 0x7FF00000u && pcy_lo_f64(x) == 0u;
}
bool pcy_iszero_f64(double x) { return (pcy_hi_f64(x) & 0x7FFFFFFFu) == 0u && pcy_lo_f64(x) == 0u; }
bool pcy_neg_f64(double x) { return (pcy_hi_f64(x) & 0x80000000u) != 0u; }
double pcy_abs_f64(double x) {
  return packDouble2x32(uvec2(pcy_lo_f64(x), pcy_hi_f64(x) & 0x7FFFFFFFu));
}
double pcy_flip_f64(double x) {
  return packDouble2x32(uvec2(pcy_lo_f64(x), pcy_hi_f64(x) ^ 0x80000000u));
}
double pcy_copysign_f64(double x, double y) {
  return packDouble2x32(
      uvec2(pcy_lo_f64(x), (pcy_hi_f64(x) & 0x7FFFFFFFu) | (pcy_hi_f64(y) & 0x80000000u)));
}
double pcy_nextafter_f64(double x, double y) {
  if (pcy_isnan_f64(x) || pcy_isnan_f64(y)) return packDouble2x32(uvec2(0u, 0x7FF80000u));
  if (unpackDouble2x32(x) == unpackDouble2x32(y) || (pcy_iszero_f64(x) && pcy_iszero_f64(y)))
    return y;
  if (pcy_iszero_f64(x)) return packDouble2x32(uvec2(1u, pcy_hi_f64(y) & 0x80000000u));
  const bool up = (x < y) != pcy_neg_f64(x); // away from zero
  uint lo = pcy_lo_f64(x), hi = pcy_hi_f64(x);
  if (up) { lo += 1u; if (lo == 0u) hi += 1u; } else { if (lo == 0u) hi -= 1u; lo -= 1u; }
  return packDouble2x32(uvec2(lo, hi));
}
#endif

// ---- PCY_HALF ----
#ifdef PCY_HALF
uint16_t pcy_pack_half(uint sign, int e, uint64_t sig, int mant, int bias, int ebits) {
  const int emin = 1 - bias;
  int shift, biased;
  uint64_t q, rem, halfway;
  if (e >= emin) { shift = 63 - mant; biased = e + bias; }
  else { shift = 63 - mant + (emin - e); biased = 0; }
  if (shift > 64) return uint16_t(sign);
  if (shift == 64) { q = 0ul; rem = sig; }
  else { q = sig >> shift; rem = sig & ((1ul << shift) - 1ul); }
  halfway = 1ul << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1ul) != 0ul)) q += 1ul;
  if (biased == 0) return uint16_t(sign | uint(q));
  if ((q >> (mant + 1)) != 0ul) { q >>= 1; biased += 1; }
  if (biased >= (1 << ebits) - 1) return uint16_t(sign | (((1u << ebits) - 1u) << mant));
  return uint16_t(sign | (uint(biased) << mant) | (uint(q) & ((1u << mant) - 1u)));
}
int pcy_norm64(inout uint64_t x) {
  int n = 0;
  if ((x >> 32) == 0ul) { x <<= 32; n += 32; }
  if ((x >> 48) == 0ul) { x <<= 16; n += 16; }
  if ((x >> 56) == 0ul) { x <<= 8; n += 8; }
  if ((x >> 60) == 0ul) { x <<= 4; n += 4; }
  if ((x >> 62) == 0ul) { x <<= 2; n += 2; }
  if ((x >> 63) == 0ul) { x <<= 1; n += 1; }
  return n;
}
uint16_t pcy_half_nan(uint sign, int mant, int ebits) {
  return uint16_t(sign | (((1u << ebits) - 1u) << mant) | (1u << (mant - 1)));
}
uint16_t pcy_half_from_f32(float x, int mant, int bias, int ebits) {
  const uint b = floatBitsToUint(x);
  const uint sign = (b >> 16) & 0x8000u;
  const uint E = (b >> 23) & 0xFFu, F = b & 0x7FFFFFu;
  uint64_t sig;
  int e;
  if (E == 0xFFu)
    return F != 0u ? pcy_half_nan(sign, mant, ebits) : uint16_t(sign | (((1u << ebits) - 1u) << mant));
  if (E == 0u) {
    if (F == 0u) return uint16_t(sign);
    sig = uint64_t(F);
    e = -149 + 63 - pcy_norm64(sig);
  } else {
    sig = uint64_t(F | 0x800000u) << 40;
    e = int(E) - 127;
  }
  return pcy_pack_half(sign, e, sig, mant, bias, ebits);
}
uint16_t pcy_half_from_int(uint64_t m, bool neg, int mant, int bias, int ebits) {
  const uint sign = neg ? 0x8000u : 0u;
  uint64_t sig = m, q, rem;
  int e;
  if (m == 0ul) return uint16_t(sign);
  e = 63 - pcy_norm64(sig);
  q = sig >> 11;
  rem = sig & 0x7FFul;
  if (rem > 0x400ul || (rem == 0x400ul && (q & 1ul) != 0ul)) q += 1ul;
  if ((q >> 53) != 0ul) { q >>= 1; e += 1; }
  return pcy_pack_half(sign, e, q << 11, mant, bias, ebits);
}
float pcy_f32_from_f16(uint16_t h) {
  const uint u = uint(h);
  const uint sign = (u & 0x8000u) << 16, E = (u >> 10) & 0x1Fu, F = u & 0x3FFu;
  if (E == 0x1Fu) return uintBitsToFloat(sign | (F != 0u ? 0x7FC00000u : 0x7F800000u));
  if (E == 0u) {
    precise const float v = float(F) * uintBitsToFloat(0x33800000u);
    return uintBitsToFloat(floatBitsToUint(v) | sign);
  }
  return uintBitsToFloat(sign | ((E + 112u) << 23) | (F << 13));
}
float pcy_f32_from_bf16(uint16_t h) {
  const uint b = uint(h) << 16;
  if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu) != 0u)
    return uintBitsToFloat((b & 0x80000000u) | 0x7FC00000u);
  return uintBitsToFloat(b);
}
#ifdef PCY_F64
uint16_t pcy_half_from_f64(double x, int mant, int bias, int ebits) {
  const uint64_t b = doubleBitsToUint64(x);
  const uint sign = uint(b >> 48) & 0x8000u;
  const uint E = uint(b >> 52) & 0x7FFu;
  const uint64_t F = b & 0xFFFFFFFFFFFFFul;
  uint64_t sig;
  int e;
  if (E == 0x7FFu)
    return F != 0ul ? pcy_half_nan(sign, mant, ebits) : uint16_t(sign | (((1u << ebits) - 1u) << mant));
  if (E == 0u) {
    if (F == 0ul) return uint16_t(sign);
    sig = F;
    e = -1074 + 63 - pcy_norm64(sig);
  } else {
    sig = (F | 0x10000000000000ul) << 11;
    e = int(E) - 1023;
  }
  return pcy_pack_half(sign, e, sig, mant, bias, ebits);
}
#endif
#endif

// ---- PCY_DIVMOD_F32 ----
#ifdef PCY_DIVMOD_F32
float pcy_fmod_f32(float x, float y) {
  const uint ux = floatBitsToUint(x), uy = floatBitsToUint(y);
  const uint sx = ux & 0x80000000u, ax = ux & ~0x80000000u, ay = uy & ~0x80000000u;
  if (ay == 0u || ax >= 0x7F800000u || ay > 0x7F800000u) return uintBitsToFloat(0x7FC00000u);
  if (ax < ay) return x;
  int ex = int(ax >> 23), ey = int(ay >> 23);
  uint mx = ax & 0x7FFFFFu, my = ay & 0x7FFFFFu;
  if (ex == 0) { ex = 1; while ((mx & 0x800000u) == 0u) { mx <<= 1; ex -= 1; } } else mx |= 0x800000u;
  if (ey == 0) { ey = 1; while ((my & 0x800000u) == 0u) { my <<= 1; ey -= 1; } } else my |= 0x800000u;
  for (; ex > ey; ex -= 1) {
    if (mx >= my) mx -= my;
    mx <<= 1;
  }
  if (mx >= my) mx -= my;
  if (mx == 0u) return uintBitsToFloat(sx);
  while ((mx & 0x800000u) == 0u) { mx <<= 1; ex -= 1; }
  const uint r = ex > 0 ? ((mx & 0x7FFFFFu) | (uint(ex) << 23)) : (mx >> (1 - ex));
  return uintBitsToFloat(r | sx);
}
void pcy_divmod_f32(float a, float b, out float fdiv, out float mod) {
  precise float m, dv, fd;
  if (pcy_iszero_f32(b)) {
    mod = pcy_fmod_f32(a, b);
    fdiv = a / b;
    return;
  }
  m = pcy_fmod_f32(a, b);
  dv = (a - m) / b;
  if (!pcy_iszero_f32(m)) {
    if (pcy_neg_f32(b) != (m < float(0))) {
      m = m + b;
      dv = dv - float(1);
    }
  } else {
    m = pcy_copysign_f32(float(0), b);
  }
  if (!pcy_iszero_f32(dv)) {
    fd = floor(dv);
    if (dv - fd > float(0.5)) fd = fd + float(1);
  } else {
    fd = pcy_copysign_f32(float(0), a / b);
  }
  fdiv = fd;
  mod = m;
}
float pcy_floordiv_f32(float a, float b) { float q, m; pcy_divmod_f32(a, b, q, m); return q; }
float pcy_fmodpy_f32(float a, float b) { float q, m; pcy_divmod_f32(a, b, q, m); return m; }
#endif

// ---- PCY_DIVMOD_F64 ----
#ifdef PCY_DIVMOD_F64
double pcy_fmod_f64(double x, double y) {
  const uint64_t ux = doubleBitsToUint64(x), uy = doubleBitsToUint64(y);
  const uint64_t sx = ux & 0x8000000000000000ul, ax = ux & ~0x8000000000000000ul, ay = uy & ~0x8000000000000000ul;
  if (ay == 0ul || ax >= 0x7FF0000000000000ul || ay > 0x7FF0000000000000ul) return uint64BitsToDouble(0x7FF8000000000000ul);
  if (ax < ay) return x;
  int ex = int(ax >> 52), ey = int(ay >> 52);
  uint64_t mx = ax & 0xFFFFFFFFFFFFFul, my = ay & 0xFFFFFFFFFFFFFul;
  if (ex == 0) { ex = 1; while ((mx & 0x10000000000000ul) == 0ul) { mx <<= 1; ex -= 1; } } else mx |= 0x10000000000000ul;
  if (ey == 0) { ey = 1; while ((my & 0x10000000000000ul) == 0ul) { my <<= 1; ey -= 1; } } else my |= 0x10000000000000ul;
  for (; ex > ey; ex -= 1) {
    if (mx >= my) mx -= my;
    mx <<= 1;
  }
  if (mx >= my) mx -= my;
  if (mx == 0ul) return uint64BitsToDouble(sx);
  while ((mx & 0x10000000000000ul) == 0ul) { mx <<= 1; ex -= 1; }
  const uint64_t r = ex > 0 ? ((mx & 0xFFFFFFFFFFFFFul) | (uint64_t(ex) << 52)) : (mx >> (1 - ex));
  return uint64BitsToDouble(r | sx);
}
void pcy_divmod_f64(double a, double b, out double fdiv, out double mod) {
  precise double m, dv, fd;
  if (pcy_iszero_f64(b)) {
    mod = pcy_fmod_f64(a, b);
    fdiv = a / b;
    return;
  }
  m = pcy_fmod_f64(a, b);
  dv = (a - m) / b;
  if (!pcy_iszero_f64(m)) {
    if (pcy_neg_f64(b) != (m < double(0))) {
      m = m + b;
      dv = dv - double(1);
    }
  } else {
    m = pcy_copysign_f64(double(0), b);
  }
  if (!pcy_iszero_f64(dv)) {
    fd = floor(dv);
    if (dv - fd > double(0.5)) fd = fd + double(1);
  } else {
    fd = pcy_copysign_f64(double(0), a / b);
  }
  fdiv = fd;
  mod = m;
}
double pcy_floordiv_f64(double a, double b) { double q, m; pcy_divmod_f64(a, b, q, m); return q; }
double pcy_fmodpy_f64(double a, double b) { double q, m; pcy_divmod_f64(a, b, q, m); return m; }
#endif

// ---- PCY_VIA_F64 ----
#ifdef PCY_VIA_F64
double pcy_exp_d(double x) { // |x| < 110
  precise const double k = roundEven(x * 1.4426950408889634lf);
  precise const double r = (x - k * uint64BitsToDouble(0x3FE62E42FEE00000ul)) -
                           k * uint64BitsToDouble(0x3DEA39EF35793C76ul);
  precise double p = 1.0lf;
  for (int i = 13; i >= 1; --i)
    p = 1.0lf + (r / double(i)) * p;
  return ldexp(p, int(k));
}
double pcy_expm1_d(double x) { // |x| < 110
  if (abs(x) >= 0.5lf) {
    precise const double e = pcy_exp_d(x) - 1.0lf;
    return e;
  }
  precise double p = 1.0lf;
  for (int i = 16; i >= 2; --i)
    p = 1.0lf + (x / double(i)) * p;
  precise const double y = x * p;
  return y;
}
double pcy_log_d(double x) { // x > 0, finite
  int e;
  precise double m = frexp(x, e);
  if (m < 0.70710678118654752lf) {
    m = m * 2.0lf;
    e -= 1;
  }
  precise const double f = (m - 1.0lf) / (m + 1.0lf);
  precise const double z = f * f;
  precise double p = 1.0lf / 23.0lf;
  for (int i = 21; i >= 1; i -= 2)
    p = 1.0lf / double(i) + z * p;
  precise const double y = double(e) * 0.69314718055994531lf + 2.0lf * f * p;
  return y;
}
float pcy_f32_of_d(double d) { // one rounding; beyond the largest float (and its half ulp): inf
  if (abs(d) >= uint64BitsToDouble(0x47EFFFFFF0000000ul))
    return uintBitsToFloat(d < 0.0lf ? 0xFF800000u : 0x7F800000u);
  return float(d);
}
float pcy_exp_f32(float x) {
  if (pcy_isnan_f32(x)) return x;
  if (x > 100.0) return uintBitsToFloat(0x7F800000u);
  if (x < -110.0) return 0.0;
  return pcy_f32_of_d(pcy_exp_d(double(x)));
}
float pcy_expm1_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_iszero_f32(x)) return x;
  if (x > 100.0) return uintBitsToFloat(0x7F800000u);
  if (x < -110.0) return -1.0;
  return pcy_f32_of_d(pcy_expm1_d(double(x)));
}
// log in double of a float x, with log's specials; `scale` multiplies a finite result
float pcy_logs_f32(float x, double scale) {
  if (pcy_isnan_f32(x)) return x;
  if (pcy_iszero_f32(x)) return uintBitsToFloat(0xFF800000u);
  if (pcy_neg_f32(x)) return uintBitsToFloat(0x7FC00000u);
  if (pcy_isinf_f32(x)) return x;
  precise const double y = pcy_log_d(double(x)) * scale;
  return pcy_f32_of_d(y);
}
float pcy_log_f32(float x) { return pcy_logs_f32(x, 1.0lf); }
float pcy_log2_f32(float x) { return pcy_logs_f32(x, 1.4426950408889634lf); }
float pcy_log10_f32(float x) { return pcy_logs_f32(x, 0.43429448190325183lf); }
float pcy_log1p_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_iszero_f32(x)) return x;
  if (x == -1.0) return uintBitsToFloat(0xFF800000u);
  if (x < -1.0) return uintBitsToFloat(0x7FC00000u);
  if (pcy_isinf_f32(x)) return x;
  const double d = double(x);
  if (abs(d) < 0.0009765625lf) {
    precise const double y = d * (1.0lf + d * (-0.5lf + d * (1.0lf / 3.0lf + d * (-0.25lf + d *
                             (0.2lf + d * (-1.0lf / 6.0lf))))));
    return pcy_f32_of_d(y);
  }
  precise const double y = pcy_log_d(1.0lf + d); // exact: |x| >= 2^-10, 24 bits
  return pcy_f32_of_d(y);
}
float pcy_sinh_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_iszero_f32(x) || pcy_isinf_f32(x)) return x;
  if (abs(x) > 100.0) return pcy_copysign_f32(uintBitsToFloat(0x7F800000u), x);
  if (abs(x) >= 1.0) { // e^-|x| is small: no cancellation
    precise const double e = pcy_exp_d(abs(double(x)));
    precise const double y = 0.5lf * (e - 1.0lf / e);
    return pcy_copysign_f32(pcy_f32_of_d(y), x);
  }
  precise const double m = pcy_expm1_d(double(x));
  precise const double y = 0.5lf * (m + m / (m + 1.0lf));
  return pcy_f32_of_d(y);
}
float pcy_cosh_f32(float x) {
  if (pcy_isnan_f32(x)) return x;
  if (pcy_isinf_f32(x) || abs(x) > 100.0) return uintBitsToFloat(0x7F800000u);
  precise const double e = pcy_exp_d(abs(double(x)));
  precise const double y = 0.5lf * (e + 1.0lf / e);
  return pcy_f32_of_d(y);
}
double pcy_atan_d(double x) { // finite
  const double ax = abs(x);
  const double pi_2 = 1.5707963267948966lf, pi_4 = 0.78539816339744831lf;
  precise double t = ax, base = 0.0lf;
  bool inv = false;
  if (t > 1.0lf) {
    t = 1.0lf / t;
    inv = true;
  }
  if (t > 0.41421356237309505lf) { // atan t = pi/4 + atan((t - 1) / (t + 1))
    t = (t - 1.0lf) / (t + 1.0lf);
    base = pi_4;
  }
  precise const double z = t * t;
  precise double p = 0.0lf;
  for (int k = 30; k >= 0; --k)
    p = ((k & 1) != 0 ? -1.0lf : 1.0lf) / double(2 * k + 1) + z * p;
  precise double r = base + t * p;
  if (inv) r = pi_2 - r;
  return x < 0.0lf ? -r : r;
}
float pcy_atan_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_iszero_f32(x)) return x;
  if (pcy_isinf_f32(x)) return pcy_copysign_f32(float(1.5707963267948966lf), x);
  return pcy_f32_of_d(pcy_atan_d(double(x)));
}
float pcy_asin_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_iszero_f32(x)) return x;
  const double d = double(x);
  if (abs(d) > 1.0lf) return uintBitsToFloat(0x7FC00000u);
  if (abs(d) == 1.0lf) return pcy_copysign_f32(float(1.5707963267948966lf), x);
  precise const double c = sqrt((1.0lf - d) * (1.0lf + d));
  return pcy_f32_of_d(pcy_atan_d(d / c));
}
float pcy_acos_f32(float x) {
  if (pcy_isnan_f32(x)) return x;
  const double d = double(x);
  if (abs(d) > 1.0lf) return uintBitsToFloat(0x7FC00000u);
  if (d == -1.0lf) return float(3.1415926535897932lf);
  precise const double q = sqrt((1.0lf - d) / (1.0lf + d));
  precise const double y = 2.0lf * pcy_atan_d(q);
  return pcy_f32_of_d(y);
}
float pcy_asinh_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_iszero_f32(x) || pcy_isinf_f32(x)) return x;
  const double a = abs(double(x));
  precise double y;
  if (a < 0.0009765625lf)
    y = a * (1.0lf + a * a * (-1.0lf / 6.0lf + a * a * (3.0lf / 40.0lf)));
  else
    y = pcy_log_d(a + sqrt(a * a + 1.0lf));
  return pcy_copysign_f32(pcy_f32_of_d(y), x);
}
float pcy_acosh_f32(float x) {
  if (pcy_isnan_f32(x)) return x;
  const double d = double(x);
  if (d < 1.0lf) return uintBitsToFloat(0x7FC00000u);
  if (pcy_isinf_f32(x)) return x;
  if (d == 1.0lf) return 0.0;
  precise const double y = pcy_log_d(d + sqrt((d - 1.0lf) * (d + 1.0lf)));
  return pcy_f32_of_d(y);
}
float pcy_atanh_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_iszero_f32(x)) return x;
  const double d = double(x), a = abs(d);
  if (a > 1.0lf) return uintBitsToFloat(0x7FC00000u);
  if (a == 1.0lf) return pcy_copysign_f32(uintBitsToFloat(0x7F800000u), x);
  precise double y;
  if (a < 0.0009765625lf)
    y = a * (1.0lf + a * a * (1.0lf / 3.0lf + a * a * 0.2lf));
  else
    y = 0.5lf * pcy_log_d((1.0lf + a) / (1.0lf - a));
  return pcy_copysign_f32(pcy_f32_of_d(y), x);
}
float pcy_erf_f32(float x) { // the Maclaurin series in double (|x| < 4), else +-1
  if (pcy_isnan_f32(x) || pcy_iszero_f32(x)) return x;
  const double a = abs(double(x));
  if (a >= 4.0lf) return pcy_copysign_f32(1.0, x);
  precise const double z = a * a;
  precise double term = a, sum = a;
  for (int n = 1; n < 90; ++n) {
    term = term * (-z) / double(n);
    sum = sum + term / double(2 * n + 1);
  }
  precise const double y = sum * 1.1283791670955126lf; // 2 / sqrt(pi)
  return pcy_copysign_f32(pcy_f32_of_d(y), x);
}
float pcy_hypot_f32(float x, float y) { // inf wins over NaN (C's hypot)
  if (pcy_isinf_f32(x) || pcy_isinf_f32(y)) return uintBitsToFloat(0x7F800000u);
  if (pcy_isnan_f32(x) || pcy_isnan_f32(y)) return uintBitsToFloat(0x7FC00000u);
  const double a = double(x), b = double(y);
  precise const double r = sqrt(a * a + b * b);
  return pcy_f32_of_d(r);
}
float pcy_atan2_f32(float y, float x) { // C's special values, then atan(|y/x|) placed
  if (pcy_isnan_f32(x) || pcy_isnan_f32(y)) return uintBitsToFloat(0x7FC00000u);
  const double pi = 3.1415926535897932lf, pi_2 = 1.5707963267948966lf;
  precise double r;
  if (pcy_iszero_f32(y)) {
    r = pcy_neg_f32(x) ? pi : 0.0lf;
  } else if (pcy_isinf_f32(y)) {
    r = pcy_isinf_f32(x) ? (pcy_neg_f32(x) ? 2.3561944901923449lf : 0.78539816339744831lf) : pi_2;
  } else if (pcy_iszero_f32(x)) {
    r = pi_2;
  } else if (pcy_isinf_f32(x)) {
    r = pcy_neg_f32(x) ? pi : 0.0lf;
  } else {
    precise const double a = pcy_atan_d(abs(double(y)) / abs(double(x)));
    r = pcy_neg_f32(x) ? pi - a : a;
  }
  return pcy_copysign_f32(pcy_f32_of_d(r), y);
}
float pcy_logaddexp_f32(float x, float y) { // npy_logaddexp's cases, in double
  if (x == y) {
    precise const double r = double(x) + 0.69314718055994531lf;
    return pcy_isinf_f32(x) ? x : pcy_f32_of_d(r);
  }
  precise const double t = double(x) - double(y);
  if (pcy_isnan_f32(x) || pcy_isnan_f32(y)) return uintBitsToFloat(0x7FC00000u);
  if (pcy_isinf_f32(x) || pcy_isinf_f32(y)) return t > 0.0lf ? x : y;
  const double m = t > 0.0lf ? double(x) : double(y);
  precise const double u = pcy_exp_d(-abs(t)); // in (0, 1]
  precise double l;
  if (u < 0.0009765625lf)
    l = u * (1.0lf + u * (-0.5lf + u * (1.0lf / 3.0lf + u * (-0.25lf + u * 0.2lf))));
  else
    l = pcy_log_d(1.0lf + u);
  precise const double r = m + l;
  return pcy_f32_of_d(r);
}
// sin, cos and tan of a float: |x| reduced exactly modulo pi/2 (x times 2/pi's bits as a 128-bit
// product: the quadrant and 60-odd bits of the fraction), then series in double on
// [-pi/4, pi/4]. 2/pi's first 288 bits (computed from Machin's formula in integers).
const uint pcy_two_over_pi[9] = uint[9](0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u,
                                         0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u,
                                         0xB7246E3Au);
// |x| (finite) as q pi/2 + a, a in [-pi/4, pi/4]; returns a, q in 0..3
double pcy_reduce_pio2(float ax, out uint q) {
  if (ax < 0.78539816) {
    q = 0u;
    return double(ax);
  }
  const uint b = floatBitsToUint(ax);
  const uint64_t m = uint64_t((b & 0x7FFFFFu) | 0x800000u);
  const int E = int(b >> 23) - 150; // ax = m 2^E, E in [-24, 104]
  const int i0 = max(1, E - 1);     // 2/pi's bits from i0 (1-based): the rest are 0 mod 4
  const int sh = i0 + 95 - E;       // fraction bits of the product, 94..120
  const int o = i0 - 1, wi = o / 32, bi = o % 32;
  uint w[3];
  for (int j = 0; j < 3; ++j)
    w[j] = bi == 0 ? pcy_two_over_pi[wi + j]
                   : (pcy_two_over_pi[wi + j] << bi) | (pcy_two_over_pi[wi + j + 1] >> (32 - bi));
  const uint64_t p0 = m * uint64_t(w[0]), p1 = m * uint64_t(w[1]), p2 = m * uint64_t(w[2]);
  const uint64_t lo = p2 + (p1 << 32);
  const uint64_t hi = p0 + (p1 >> 32) + (lo < p2 ? 1ul : 0ul);
  q = uint(hi >> (sh - 64)) & 3u;
  const int L = 128 - sh; // 8..34
  const uint64_t ghi = (hi << L) | (lo >> (64 - L)), glo = lo << L;
  precise double f = double(ghi) * uint64BitsToDouble(0x3BF0000000000000ul) +
                     double(glo) * uint64BitsToDouble(0x37F0000000000000ul); // 2^-64, 2^-128
  if (f >= 0.5lf) {
    f = f - 1.0lf;
    q = (q + 1u) & 3u;
  }
  precise const double a = f * 1.5707963267948966lf;
  return a;
}
double pcy_sin_d(double a) { // |a| <= pi/4
  precise const double z = a * a;
  precise double p = 1.0lf;
  for (int k = 19; k >= 3; k -= 2)
    p = 1.0lf - z / double(k * (k - 1)) * p;
  precise const double y = a * p;
  return y;
}
double pcy_cos_d(double a) { // |a| <= pi/4
  precise const double z = a * a;
  precise double p = 1.0lf;
  for (int k = 20; k >= 2; k -= 2)
    p = 1.0lf - z / double(k * (k - 1)) * p;
  return p;
}
float pcy_sin_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_isinf_f32(x)) return uintBitsToFloat(0x7FC00000u);
  if (pcy_iszero_f32(x)) return x;
  uint q;
  const double a = pcy_reduce_pio2(abs(x), q);
  precise double r = (q & 1u) == 0u ? pcy_sin_d(a) : pcy_cos_d(a);
  if (q >= 2u) r = -r;
  return pcy_copysign_f32(1.0, x) * pcy_f32_of_d(r);
}
float pcy_cos_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_isinf_f32(x)) return uintBitsToFloat(0x7FC00000u);
  uint q;
  const double a = pcy_reduce_pio2(abs(x), q);
  precise double r = (q & 1u) == 0u ? pcy_cos_d(a) : pcy_sin_d(a);
  if (q == 1u || q == 2u) r = -r;
  return pcy_f32_of_d(r);
}
float pcy_tan_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_isinf_f32(x)) return uintBitsToFloat(0x7FC00000u);
  if (pcy_iszero_f32(x)) return x;
  uint q;
  const double a = pcy_reduce_pio2(abs(x), q);
  const double sa = pcy_sin_d(a), ca = pcy_cos_d(a);
  precise const double r = (q & 1u) == 0u ? sa / ca : -ca / sa;
  return pcy_copysign_f32(1.0, x) * pcy_f32_of_d(r);
}
// C's pow (Annex F's special values), then exp(y log|x|) in double and the sign of an odd
// integer power of a negative x.
float pcy_pow_f32(float x, float y) {
  if (pcy_iszero_f32(y) || x == 1.0) return 1.0;
  if (pcy_isnan_f32(x) || pcy_isnan_f32(y)) return uintBitsToFloat(0x7FC00000u);
  const float inf = uintBitsToFloat(0x7F800000u);
  const bool yint = !pcy_isinf_f32(y) && floor(y) == y;
  const bool yodd = yint && abs(y) < 16777216.0 && (int(abs(y)) & 1) == 1;
  if (pcy_iszero_f32(x)) {
    if (y < 0.0) return yodd ? pcy_copysign_f32(inf, x) : inf;
    return yodd ? x : 0.0;
  }
  if (pcy_isinf_f32(y)) {
    const float ax = abs(x);
    if (ax == 1.0) return 1.0;
    return (ax < 1.0) == (y < 0.0) ? inf : 0.0;
  }
  if (pcy_isinf_f32(x)) {
    const float mag = y < 0.0 ? 0.0 : inf;
    return pcy_neg_f32(x) && yodd ? -mag : mag;
  }
  if (x < 0.0 && !yint) return uintBitsToFloat(0x7FC00000u);
  precise const double t = double(y) * pcy_log_d(abs(double(x)));
  float r;
  if (t > 100.0lf) r = inf;
  else if (t < -110.0lf) r = 0.0;
  else r = pcy_f32_of_d(pcy_exp_d(t));
  return x < 0.0 && yodd ? -r : r;
}
float pcy_tanh_f32(float x) {
  if (pcy_isnan_f32(x) || pcy_iszero_f32(x)) return x;
  if (abs(x) > 20.0) return pcy_copysign_f32(1.0, x);
  precise const double m = pcy_expm1_d(2.0lf * double(x));
  precise const double y = m / (m + 2.0lf);
  return pcy_f32_of_d(y);
}
#ifdef PCY_F64
// exp and log of f64 for LOGSUMEXP of f64 (array_codegen.hpp's reducer): the series above
// (within a few ulp), with the C library's special values; exp below -708 gives 0 (the
// subnormal results are not kept: a sum that holds exp(0) = 1 does not see them).
double pcy_exp_f64(double x) {
  if (pcy_isnan_f64(x)) return x;
  if (x > 709.78lf) return packDouble2x32(uvec2(0u, 0x7FF00000u));
  if (x < -708.0lf) return 0.0lf;
  return pcy_exp_d(x);
}
double pcy_log_f64(double x) {
  if (pcy_isnan_f64(x) || (pcy_isinf_f64(x) && !pcy_neg_f64(x))) return x;
  if (pcy_iszero_f64(x)) return packDouble2x32(uvec2(0u, 0xFFF00000u));
  if (pcy_neg_f64(x)) return packDouble2x32(uvec2(0u, 0x7FF80000u));
  return pcy_log_d(x);
}
#endif
#endif

// ---- PCY_UPOW, PCY_UPOW64 ----
#ifdef PCY_UPOW
uint pcy_upow(uint b, uint e) {
  uint r = 1u;
  while (e != 0u) {
    if ((e & 1u) != 0u) r *= b;
    b *= b;
    e >>= 1u;
  }
  return r;
}
#endif
#ifdef PCY_UPOW64
uint64_t pcy_upow64(uint64_t b, uint64_t e) {
  uint64_t r = 1ul;
  while (e != 0ul) {
    if ((e & 1ul) != 0ul) r *= b;
    b *= b;
    e >>= 1ul;
  }
  return r;
}
#endif
