// GLSL helpers of array_vulkan's shaders (common/array_glsl.hpp writes each program's main and
// defines, before this text, which sections it needs). Floating values are classified by their
// bits (lavapipe's compiler treats float maths not marked `precise` as free of NaN and
// infinity); every floating step that must round on its own is `precise`.
//   PCY_F32, PCY_F64      bit-level NaN/inf/zero/sign tests, abs, negation, copysign, nextafter
//   PCY_HALF              f16/bf16 from and to f32 (and f64 with PCY_F64), integers: one rounding
//                         to nearest even from the exact value (array_codegen.hpp's conversions)
//   PCY_DIVMOD_F32/_F64   NumPy's floating divmod over C's fmod done on the bits
//   PCY_VIA_F64           the f32 transcendental functions through binary64, one rounding
//   PCY_MATH_F64          the f64 transcendental functions (with PCY_F64)
//   PCY_UPOW, PCY_UPOW64  integer powers modulo 2^32 / 2^64

// ---- PCY_F32 ----
#ifdef PCY_F32
// f32 division and square root, correctly rounded: through f64 where the device has it
// (PCY_DEVICE_F64, set by array_vulkan; the f64 result is within an f64 ulp, and an f32 quotient
// or root is never that close to a midpoint of two floats, so the final rounding is IEEE's),
// else GLSL's operators (2.5 and 3 ulp allowed; correctly rounded on lavapipe).
#ifdef PCY_DEVICE_F64
float pcy_div_f32(float a, float b) { return float(double(a) / double(b)); }
float pcy_sqrt_f32(float a) { return float(sqrt(double(a))); }
#else
float pcy_div_f32(float a, float b) { return a / b; }
float pcy_sqrt_f32(float a) { return sqrt(a); }
#endif
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
// Python's divmod of floats. The zero tests are float compares, like the other tests here, so
// that a device that flushes f32 subnormals (NVIDIA's) treats a subnormal as the zero it then
// computes with: a divisor that compares equal to zero is divided as the zero of its sign, and
// so is a dividend that does (pcy_fmod_f32 works on the bits, which the device does not flush);
// the divisions correctly rounded through f64 where the device has it.
void pcy_divmod_f32(float a, float b, out float fdiv, out float mod) {
  precise float m, dv, fd;
  if (b == float(0)) {
    const float a0 = a == float(0) ? pcy_copysign_f32(float(0), a) : a;
    const float b0 = pcy_copysign_f32(float(0), b);
    mod = pcy_fmod_f32(a0, b0);
    fdiv = pcy_div_f32(a0, b0);
    return;
  }
  m = pcy_fmod_f32(a, b);
  dv = pcy_div_f32(a - m, b);
  if (m != float(0)) {
    if (pcy_neg_f32(b) != (m < float(0))) {
      m = m + b;
      dv = dv - float(1);
    }
  } else {
    m = pcy_copysign_f32(float(0), b);
  }
  if (dv != float(0)) {
    fd = floor(dv);
    if (dv - fd > float(0.5)) fd = fd + float(1);
  } else {
    fd = pcy_copysign_f32(float(0), pcy_div_f32(a, b));
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
#endif

// ---- PCY_MATH_F64 ----
// The f64 transcendental functions (GLSL's built-ins are f32 only, or far off): our own, in
// binary64 with pairs hi + lo (error-free sums and Dekker's products: no fma) where a step needs
// more than 53 bits; C's (Annex F) and NumPy's special values, classified on the bits. Argument
// reduction: exp by ln 2 in two parts (Cody and Waite), log to m in [sqrt(1/2), sqrt(2)), sin,
// cos and tan exactly modulo pi/2 at any magnitude (x times 2/pi's bits, 1280 of them, as integer
// products). The polynomials are truncated Taylor series and the constants exact bits
// (tools/array/glsl_f64_constants.py prints them). Subnormal results are kept where the device
// keeps f64 subnormals. Accuracy: docs/array.md (the GPU test measures every function).
#ifdef PCY_MATH_F64
#define PCY_M64_INF packDouble2x32(uvec2(0u, 0x7FF00000u))
#define PCY_M64_NAN packDouble2x32(uvec2(0u, 0x7FF80000u))
#define PCY_M64_C(b) uint64BitsToDouble(b)
#define PCY_M64_PIO2_HI PCY_M64_C(0x3FF921FB54442D18ul)
#define PCY_M64_PIO2_LO PCY_M64_C(0x3C91A62633145C07ul)
#define PCY_M64_PI_HI PCY_M64_C(0x400921FB54442D18ul)
#define PCY_M64_PI_LO PCY_M64_C(0x3CA1A62633145C07ul)
#define PCY_M64_PIO4_HI PCY_M64_C(0x3FE921FB54442D18ul)
#define PCY_M64_PIO4_LO PCY_M64_C(0x3C81A62633145C07ul)
#define PCY_M64_LN2_HI PCY_M64_C(0x3FE62E42FEFA39EFul)
#define PCY_M64_LN2_LO PCY_M64_C(0x3C7ABC9E3B39803Ful)
// ln 2 in a first part of 32 bits (k times it is exact for |k| < 2^21) and the rest
#define PCY_M64_LN2A PCY_M64_C(0x3FE62E42FEE00000ul)
#define PCY_M64_LN2B PCY_M64_C(0x3DEA39EF35793C76ul)
#define PCY_M64_LOG2E PCY_M64_C(0x3FF71547652B82FEul)

// ---- error-free steps (every operation `precise`: never contracted, never reassociated)
void pcy_m64_two_sum(double a, double b, out double s, out double e) {
  precise double s_ = a + b;
  precise double v = s_ - a;
  precise double e_ = (a - (s_ - v)) + (b - v);
  s = s_;
  e = e_;
}
void pcy_m64_fast_sum(double a, double b, out double s, out double e) { // |a| >= |b|
  precise double s_ = a + b;
  precise double e_ = b - (s_ - a);
  s = s_;
  e = e_;
}
void pcy_m64_split(double a, out double hi, out double lo) { // Veltkamp: 26 + 27 bits
  precise double c = 134217729.0lf * a;
  precise double h = c - (c - a);
  precise double l = a - h;
  hi = h;
  lo = l;
}
void pcy_m64_two_prod(double a, double b, out double p, out double e) { // |a|, |b| < 2^995
  double ah, al, bh, bl;
  pcy_m64_split(a, ah, al);
  pcy_m64_split(b, bh, bl);
  precise double p_ = a * b;
  precise double e_ = (((ah * bh - p_) + ah * bl) + al * bh) + al * bl;
  p = p_;
  e = e_;
}
double pcy_m64_pow2(int n) { return packDouble2x32(uvec2(0u, uint(n + 1023) << 20)); } // normal n
// y 2^k rounded once (y in [1/2, 2], k in [-1080, 1030])
double pcy_m64_scale(double y, int k) {
  precise double r;
  if (k > 1000) r = (y * pcy_m64_pow2(1000)) * pcy_m64_pow2(k - 1000);
  else if (k < -1000) r = (y * pcy_m64_pow2(-1000)) * pcy_m64_pow2(k + 1000);
  else r = y * pcy_m64_pow2(k);
  return r;
}

// tools/array/glsl_f64_constants.py's output: the series' coefficients, erf's Taylor
// polynomials
double pcy_m64_exp_tail(double t) {
  precise double p = uint64BitsToDouble(0x3D2AE7F3E733B81Ful);
  p = uint64BitsToDouble(0x3D6AE7F3E733B81Ful) + t * p;
  p = uint64BitsToDouble(0x3DA93974A8C07C9Dul) + t * p;
  p = uint64BitsToDouble(0x3DE6124613A86D09ul) + t * p;
  p = uint64BitsToDouble(0x3E21EED8EFF8D898ul) + t * p;
  p = uint64BitsToDouble(0x3E5AE64567F544E4ul) + t * p;
  p = uint64BitsToDouble(0x3E927E4FB7789F5Cul) + t * p;
  p = uint64BitsToDouble(0x3EC71DE3A556C734ul) + t * p;
  p = uint64BitsToDouble(0x3EFA01A01A01A01Aul) + t * p;
  p = uint64BitsToDouble(0x3F2A01A01A01A01Aul) + t * p;
  p = uint64BitsToDouble(0x3F56C16C16C16C17ul) + t * p;
  p = uint64BitsToDouble(0x3F81111111111111ul) + t * p;
  p = uint64BitsToDouble(0x3FA5555555555555ul) + t * p;
  p = uint64BitsToDouble(0x3FC5555555555555ul) + t * p;
  p = uint64BitsToDouble(0x3FE0000000000000ul) + t * p;
  return p;
}
double pcy_m64_log_tail(double t) {
  precise double p = uint64BitsToDouble(0x3FB2F684BDA12F68ul);
  p = uint64BitsToDouble(0x3FB47AE147AE147Bul) + t * p;
  p = uint64BitsToDouble(0x3FB642C8590B2164ul) + t * p;
  p = uint64BitsToDouble(0x3FB8618618618618ul) + t * p;
  p = uint64BitsToDouble(0x3FBAF286BCA1AF28ul) + t * p;
  p = uint64BitsToDouble(0x3FBE1E1E1E1E1E1Eul) + t * p;
  p = uint64BitsToDouble(0x3FC1111111111111ul) + t * p;
  p = uint64BitsToDouble(0x3FC3B13B13B13B14ul) + t * p;
  p = uint64BitsToDouble(0x3FC745D1745D1746ul) + t * p;
  p = uint64BitsToDouble(0x3FCC71C71C71C71Cul) + t * p;
  p = uint64BitsToDouble(0x3FD2492492492492ul) + t * p;
  p = uint64BitsToDouble(0x3FD999999999999Aul) + t * p;
  return p;
}
double pcy_m64_sin_tail(double t) {
  precise double p = uint64BitsToDouble(0xBB4761B41316381Aul);
  p = uint64BitsToDouble(0x3BD71B8EF6DCF572ul) + t * p;
  p = uint64BitsToDouble(0xBC62F49B46814157ul) + t * p;
  p = uint64BitsToDouble(0x3CE952C77030AD4Aul) + t * p;
  p = uint64BitsToDouble(0xBD6AE7F3E733B81Ful) + t * p;
  p = uint64BitsToDouble(0x3DE6124613A86D09ul) + t * p;
  p = uint64BitsToDouble(0xBE5AE64567F544E4ul) + t * p;
  p = uint64BitsToDouble(0x3EC71DE3A556C734ul) + t * p;
  p = uint64BitsToDouble(0xBF2A01A01A01A01Aul) + t * p;
  p = uint64BitsToDouble(0x3F81111111111111ul) + t * p;
  p = uint64BitsToDouble(0xBFC5555555555555ul) + t * p;
  return p;
}
double pcy_m64_cos_tail(double t) {
  precise double p = uint64BitsToDouble(0x3AFF2CF01972F578ul);
  p = uint64BitsToDouble(0xBB90CE396DB7F853ul) + t * p;
  p = uint64BitsToDouble(0x3C1E542BA4020225ul) + t * p;
  p = uint64BitsToDouble(0xBCA6827863B97D97ul) + t * p;
  p = uint64BitsToDouble(0x3D2AE7F3E733B81Ful) + t * p;
  p = uint64BitsToDouble(0xBDA93974A8C07C9Dul) + t * p;
  p = uint64BitsToDouble(0x3E21EED8EFF8D898ul) + t * p;
  p = uint64BitsToDouble(0xBE927E4FB7789F5Cul) + t * p;
  p = uint64BitsToDouble(0x3EFA01A01A01A01Aul) + t * p;
  p = uint64BitsToDouble(0xBF56C16C16C16C17ul) + t * p;
  p = uint64BitsToDouble(0x3FA5555555555555ul) + t * p;
  return p;
}
double pcy_m64_atan_tail(double t) {
  precise double p = uint64BitsToDouble(0xBF915B1E5F75270Dul);
  p = uint64BitsToDouble(0x3F91F7047DC11F70ul) + t * p;
  p = uint64BitsToDouble(0xBF929E4129E4129Eul) + t * p;
  p = uint64BitsToDouble(0x3F93521CFB2B78C1ul) + t * p;
  p = uint64BitsToDouble(0xBF94141414141414ul) + t * p;
  p = uint64BitsToDouble(0x3F94E5E0A72F0539ul) + t * p;
  p = uint64BitsToDouble(0xBF95C9882B931057ul) + t * p;
  p = uint64BitsToDouble(0x3F96C16C16C16C17ul) + t * p;
  p = uint64BitsToDouble(0xBF97D05F417D05F4ul) + t * p;
  p = uint64BitsToDouble(0x3F98F9C18F9C18FAul) + t * p;
  p = uint64BitsToDouble(0xBF9A41A41A41A41Aul) + t * p;
  p = uint64BitsToDouble(0x3F9BACF914C1BAD0ul) + t * p;
  p = uint64BitsToDouble(0xBF9D41D41D41D41Dul) + t * p;
  p = uint64BitsToDouble(0x3F9F07C1F07C1F08ul) + t * p;
  p = uint64BitsToDouble(0xBFA0842108421084ul) + t * p;
  p = uint64BitsToDouble(0x3FA1A7B9611A7B96ul) + t * p;
  p = uint64BitsToDouble(0xBFA2F684BDA12F68ul) + t * p;
  p = uint64BitsToDouble(0x3FA47AE147AE147Bul) + t * p;
  p = uint64BitsToDouble(0xBFA642C8590B2164ul) + t * p;
  p = uint64BitsToDouble(0x3FA8618618618618ul) + t * p;
  p = uint64BitsToDouble(0xBFAAF286BCA1AF28ul) + t * p;
  p = uint64BitsToDouble(0x3FAE1E1E1E1E1E1Eul) + t * p;
  p = uint64BitsToDouble(0xBFB1111111111111ul) + t * p;
  p = uint64BitsToDouble(0x3FB3B13B13B13B14ul) + t * p;
  p = uint64BitsToDouble(0xBFB745D1745D1746ul) + t * p;
  p = uint64BitsToDouble(0x3FBC71C71C71C71Cul) + t * p;
  p = uint64BitsToDouble(0xBFC2492492492492ul) + t * p;
  p = uint64BitsToDouble(0x3FC999999999999Aul) + t * p;
  p = uint64BitsToDouble(0xBFD5555555555555ul) + t * p;
  return p;
}
double pcy_m64_sinh_tail(double t) {
  precise double p = uint64BitsToDouble(0x3BD71B8EF6DCF572ul);
  p = uint64BitsToDouble(0x3C62F49B46814157ul) + t * p;
  p = uint64BitsToDouble(0x3CE952C77030AD4Aul) + t * p;
  p = uint64BitsToDouble(0x3D6AE7F3E733B81Ful) + t * p;
  p = uint64BitsToDouble(0x3DE6124613A86D09ul) + t * p;
  p = uint64BitsToDouble(0x3E5AE64567F544E4ul) + t * p;
  p = uint64BitsToDouble(0x3EC71DE3A556C734ul) + t * p;
  p = uint64BitsToDouble(0x3F2A01A01A01A01Aul) + t * p;
  p = uint64BitsToDouble(0x3F81111111111111ul) + t * p;
  p = uint64BitsToDouble(0x3FC5555555555555ul) + t * p;
  return p;
}
double pcy_m64_cosh_tail(double t) {
  precise double p = uint64BitsToDouble(0x3B90CE396DB7F853ul);
  p = uint64BitsToDouble(0x3C1E542BA4020225ul) + t * p;
  p = uint64BitsToDouble(0x3CA6827863B97D97ul) + t * p;
  p = uint64BitsToDouble(0x3D2AE7F3E733B81Ful) + t * p;
  p = uint64BitsToDouble(0x3DA93974A8C07C9Dul) + t * p;
  p = uint64BitsToDouble(0x3E21EED8EFF8D898ul) + t * p;
  p = uint64BitsToDouble(0x3E927E4FB7789F5Cul) + t * p;
  p = uint64BitsToDouble(0x3EFA01A01A01A01Aul) + t * p;
  p = uint64BitsToDouble(0x3F56C16C16C16C17ul) + t * p;
  p = uint64BitsToDouble(0x3FA5555555555555ul) + t * p;
  p = uint64BitsToDouble(0x3FE0000000000000ul) + t * p;
  return p;
}
double pcy_m64_erf_small(double t) {
  precise double p = uint64BitsToDouble(0xBD1F56F071A885CFul);
  p = uint64BitsToDouble(0x3D5F683AE4A97007ul) + t * p;
  p = uint64BitsToDouble(0xBD9D8453CB0C46EAul) + t * p;
  p = uint64BitsToDouble(0x3DD9E6AD5E55A730ul) + t * p;
  p = uint64BitsToDouble(0xBE151D7181C5D36Dul) + t * p;
  p = uint64BitsToDouble(0x3E4FCC5720624C1Cul) + t * p;
  p = uint64BitsToDouble(0xBE85F742EC43E71Aul) + t * p;
  p = uint64BitsToDouble(0x3EBB9E6C9DC651A3ul) + t * p;
  p = uint64BitsToDouble(0xBEEF4D25C3E0C2EBul) + t * p;
  p = uint64BitsToDouble(0x3F1F9A326F9B89B7ul) + t * p;
  p = uint64BitsToDouble(0xBF4C02DB40040B86ul) + t * p;
  p = uint64BitsToDouble(0x3F7565BCD0E6A53Ful) + t * p;
  p = uint64BitsToDouble(0xBF9B82CE31288B51ul) + t * p;
  p = uint64BitsToDouble(0x3FBCE2F21A042BE2ul) + t * p;
  p = uint64BitsToDouble(0xBFD812746B0379E7ul) + t * p;
  p = uint64BitsToDouble(0x3FF20DD750429B6Dul) + t * p;
  return p;
}
double pcy_m64_erf_pick(int i, double c1, double c2, double c3, double c4, double c5,
                        double c6, double c7, double c8, double c9, double c10, double c11) {
  return i == 1   ? c1
         : i == 2 ? c2
         : i == 3 ? c3
         : i == 4 ? c4
         : i == 5 ? c5
         : i == 6 ? c6
         : i == 7 ? c7
         : i == 8 ? c8
         : i == 9 ? c9
         : i == 10 ? c10
                   : c11;
}
double pcy_m64_erf_taylor(int i, double t, out double lo) {
  precise double p = pcy_m64_erf_pick(i, -3.76864623557850052e-08lf, 2.29141694871487288e-08lf, -1.07480397344688551e-08lf,
      3.78744216633175368e-09lf, -9.35874306242874070e-10lf, 1.29953617884249394e-10lf,
      2.99172670594547529e-12lf, -5.00247044112802188e-12lf, 7.61099077225921551e-13lf,
      -7.11084901306497010e-15lf, -5.13228813999751032e-15lf);
  p = pcy_m64_erf_pick(i, 1.98859507001097596e-08lf, -2.25937308568745771e-08lf, 1.72522486865680421e-08lf,
      -9.37147201423943274e-09lf, 3.58145181450466873e-09lf, -9.03452464034886025e-10lf,
      1.23134809281210489e-10lf, -1.89828326451306815e-13lf, -2.29989152581622116e-12lf,
      1.45112895913687417e-13lf, 1.62949255892253393e-14lf) + t * p;
  p = pcy_m64_erf_pick(i, 3.82058502784588183e-07lf, -2.12060616372638188e-07lf, 8.15827933733719513e-08lf,
      -1.77213101663498592e-08lf, -5.17485506762382300e-10lf, 1.72761123645260155e-09lf,
      -5.18987957523104947e-10lf, 5.36554456208481824e-11lf, 3.49757697399938045e-12lf,
      -7.29108336383776470e-13lf, -4.47269930012967368e-14lf) + t * p;
  p = pcy_m64_erf_pick(i, -5.03428668077100579e-07lf, 5.07934814406465398e-07lf, -3.24705442156726596e-07lf,
      1.36484398598359540e-07lf, -3.45183957467976709e-08lf, 3.14265376573460734e-09lf,
      8.22096161513093294e-10lf, -2.39540055657159551e-10lf, 5.54344821397804488e-12lf,
      2.59331956394272481e-12lf, 1.08400676463334072e-13lf) + t * p;
  p = pcy_m64_erf_pick(i, -3.25226471300368499e-06lf, 1.35322871867976597e-06lf, -1.76386280122705784e-07lf,
      -1.56822986933482747e-07lf, 1.05806892731089722e-07lf, -2.73722587333803177e-08lf,
      1.68728295028595954e-09lf, 5.68592865077500352e-10lf, -6.14226700187895203e-11lf,
      -7.49376222594815037e-12lf, -2.34558512193281602e-13lf) + t * p;
  p = pcy_m64_erf_pick(i, 7.16623169430199274e-06lf, -6.40958060885830735e-06lf, 3.27325039845003827e-06lf,
      -8.61083378651434567e-07lf, 2.59990275976902220e-09lf, 6.63971027997246699e-08lf,
      -1.42028036655292168e-08lf, -4.05791150393088383e-10lf, 2.60947597621799308e-10lf,
      1.84523044188956040e-11lf, 4.55792741517898039e-13lf) + t * p;
  p = pcy_m64_erf_pick(i, 2.21179756428246257e-05lf, -3.01484355896276026e-06lf, -4.62546209604205831e-06lf,
      3.42002303296456044e-06lf, -9.14576651183659933e-07lf, 3.41516332279005407e-09lf,
      4.26024108679788130e-08lf, -3.02585414083861854e-09lf, -8.01556852021318397e-10lf,
      -3.95619647053036206e-11lf, -7.97507320908922687e-13lf) + t * p;
  p = pcy_m64_erf_pick(i, -7.57456209347206067e-05lf, 5.58281327855361962e-05lf, -1.77205746526325839e-05lf,
      -1.33207467538330957e-06lf, 2.68755471390731993e-06lf, -5.48237363473695136e-07lf,
      -5.73332450529476688e-08lf, 1.71266455516286198e-08lf, 1.99261791608682683e-09lf,
      7.46394186042905929e-11lf, 1.25700780567607545e-12lf) + t * p;
  p = pcy_m64_erf_pick(i, -1.06184664948626270e-04lf, -5.27380328249460039e-05lf, 6.86716770072682192e-05lf,
      -2.26882426454011001e-05lf, -1.07113381370613637e-06lf, 1.90435406203247730e-06lf,
      -9.01519743879060808e-08lf, -5.59078699925972546e-08lf, -4.17520689870179787e-09lf,
      -1.24500127630016981e-10lf, -1.78234727263122293e-12lf) + t * p;
  p = pcy_m64_erf_pick(i, 6.23983674313258489e-04lf, -3.23956714990693956e-04lf, -5.44549038611735415e-06lf,
      6.51349432823388933e-05lf, -1.58438047120425871e-05lf, -2.86429946075621703e-06lf,
      7.75348360144153782e-07lf, 1.37765728781402489e-07lf, 7.50569052465727314e-09lf,
      1.83784853596036714e-10lf, 2.26685026989277277e-12lf) + t * p;
  p = pcy_m64_erf_pick(i, 1.86032257352495065e-04lf, 7.93511499756847775e-04lf, -4.42750499254694336e-04lf,
      -1.14665831641415070e-05lf, 5.49969924243893312e-05lf, -2.32886623721087402e-06lf,
      -2.60330895463445415e-06lf, -2.75062840101914800e-07lf, -1.16608674599023819e-08lf,
      -2.39656687158999814e-10lf, -2.57433595770571631e-12lf) + t * p;
  p = pcy_m64_erf_pick(i, -3.96826044637476998e-03lf, 8.77636175280841055e-04lf, 8.94181745354844979e-04lf,
      -3.69380417703939461e-04lf, -7.12231147231515708e-05lf, 2.59138470056605935e-05lf,
      6.10888066565150866e-06lf, 4.57006180150471327e-07lf, 1.56753583876903529e-08lf,
      2.74867680896163606e-10lf, 2.59417252488624155e-12lf) + t * p;
  p = pcy_m64_erf_pick(i, 2.30178830402092728e-03lf, -5.69767805762095170e-03lf, 7.30051247140304431e-04lf,
      9.99493712611392807e-04lf, -8.90115712124397806e-05lf, -8.16476305301353731e-05lf,
      -1.11282274383984954e-05lf, -6.37832323271170290e-07lf, -1.81728169222694255e-08lf,
      -2.75368375023592329e-10lf, -2.30041375826322295e-12lf) + t * p;
  p = pcy_m64_erf_pick(i, 1.84352351779094523e-02lf, 3.62598260944274825e-03lf, -6.05875147039124009e-03lf,
      -6.70455969951892707e-04lf, 6.46040956672447385e-04lf, 1.69991414511391200e-04lf,
      1.62753027412143700e-05lf, 7.47725215114688624e-07lf, 1.80363058699122020e-08lf,
      2.38605034104141192e-10lf, 1.77554599774336400e-12lf) + t * p;
  p = pcy_m64_erf_pick(i, -2.68725095327684328e-02lf, 2.13012729634604325e-02lf, 8.96304509872736244e-03lf,
      -2.90435707106278130e-03lf, -1.65732740366604991e-03lf, -2.63528504215059911e-04lf,
      -1.92727214469532147e-05lf, -7.30920016344869929e-07lf, -1.51447160585061437e-08lf,
      -1.76403417111100316e-10lf, -1.17569019630002690e-12lf) + t * p;
  p = pcy_m64_erf_pick(i, -5.32427291677281048e-02lf, -4.71810364048501907e-02lf, 6.62436146831575038e-03lf,
      1.06576791656674587e-02lf, 2.75580841407368528e-03lf, 3.13797225490890545e-04lf,
      1.83709749981891138e-05lf, 5.87246179877144311e-07lf, 1.05723968798537724e-08lf,
      1.09200384562539165e-10lf, 6.54969163948057116e-13lf) + t * p;
  p = pcy_m64_erf_pick(i, 1.50686969342626709e-01lf, -6.15940423039819732e-03lf, -4.81022098321683134e-02lf,
      -1.90833836369542972e-02lf, -3.25811365963060619e-03lf, -2.86569337750268265e-04lf,
      -1.38412398779369212e-05lf, -3.78795269304067114e-07lf, -5.98092125473372846e-09lf,
      -5.51147095250370564e-11lf, -2.98752629751559360e-13lf) + t * p;
  p = pcy_m64_erf_pick(i, 2.67887945498003037e-02lf, 1.67535795066830973e-01lf, 9.01572847140068856e-02lf,
      2.17245536919713662e-02lf, 2.76038870506660570e-03lf, 1.95809711948193916e-04lf,
      7.96961606238756070e-06lf, 1.89019259799232621e-07lf, 2.63784501380103827e-09lf,
      2.18016848001288544e-11lf, 1.07206281601764920e-13lf) + t * p;
  p = pcy_m64_erf_pick(i, -4.82198301896405501e-01lf, -2.95651403059113471e-01lf, -9.23562428777631589e-02lf,
      -1.60702177995404628e-02lf, -1.61226242950792895e-03lf, -9.48643324966405230e-05lf,
      -3.30537071711926490e-06lf, -6.86119733079064957e-08lf, -8.51881959131213550e-10lf,
      -6.34413922590354621e-12lf, -2.83962895605442571e-14lf) + t * p;
  p = pcy_m64_erf_pick(i, 6.42931069195207372e-01lf, 2.36521122447290788e-01lf, 5.27749959301503715e-02lf,
      7.14231902201798319e-03lf, 5.86277247093792324e-04lf, 2.91890253835817022e-05lf,
      8.81432191231803939e-07lf, 1.61439937195074121e-08lf, 1.79343570343413367e-10lf,
      1.20840747160067548e-12lf, 4.93848514096421876e-15lf) + t * p;
  lo = pcy_m64_erf_pick(i, 4.69744077164288985e-17lf, -5.51775442986391971e-17lf, 2.14311902895653381e-17lf,
      2.69564058854134571e-17lf, 4.45137891621476123e-17lf, 5.22468057518706880e-17lf,
      4.22761823918296148e-17lf, 9.86675034192752030e-19lf, 5.46162210829949692e-17lf,
      2.85935404319126394e-17lf, 2.08755481074888535e-17lf) + t * p;
  return pcy_m64_erf_pick(i, 7.11155633653515085e-01lf, 9.22900128256458285e-01lf, 9.86671671219182422e-01lf,
      9.98537283413318821e-01lf, 9.99899378077880319e-01lf, 9.99995697220536273e-01lf,
      9.99999886272743388e-01lf, 9.99999998149425862e-01lf, 9.99999999981514898e-01lf,
      9.99999999999886868e-01lf, 9.99999999999999556e-01lf);
}
double pcy_m64_asin_tail(double t) {
  precise double p = uint64BitsToDouble(0x3F5CF7DEA5B6E830ul);
  p = uint64BitsToDouble(0x3F5E82BE60D9127Eul) + t * p;
  p = uint64BitsToDouble(0x3F6018F963C229BFul) + t * p;
  p = uint64BitsToDouble(0x3F61052BC5FA960Aul) + t * p;
  p = uint64BitsToDouble(0x3F6208D3570AE5A6ul) + t * p;
  p = uint64BitsToDouble(0x3F63275586C5F2F0ul) + t * p;
  p = uint64BitsToDouble(0x3F6464C0950F7D47ul) + t * p;
  p = uint64BitsToDouble(0x3F65C5F56EFAAAABul) + t * p;
  p = uint64BitsToDouble(0x3F6750DE64D7D05Ful) + t * p;
  p = uint64BitsToDouble(0x3F690CB77F60C7CEul) + t * p;
  p = uint64BitsToDouble(0x3F6B026F57B13B14ul) + t * p;
  p = uint64BitsToDouble(0x3F6D3D2A8E0DD67Dul) + t * p;
  p = uint64BitsToDouble(0x3F6FCAF8FB6DB6DBul) + t * p;
  p = uint64BitsToDouble(0x3F715EE9D45D1746ul) + t * p;
  p = uint64BitsToDouble(0x3F731683BDEF7BDFul) + t * p;
  p = uint64BitsToDouble(0x3F751BA308D3DCB1ul) + t * p;
  p = uint64BitsToDouble(0x3F7782DDA12F684Cul) + t * p;
  p = uint64BitsToDouble(0x3F7A6863D70A3D71ul) + t * p;
  p = uint64BitsToDouble(0x3F7DF3BD37A6F4DFul) + t * p;
  p = uint64BitsToDouble(0x3F812EF3CF3CF3CFul) + t * p;
  p = uint64BitsToDouble(0x3F83FDE50D79435Eul) + t * p;
  p = uint64BitsToDouble(0x3F87A87878787878ul) + t * p;
  p = uint64BitsToDouble(0x3F8C99999999999Aul) + t * p;
  p = uint64BitsToDouble(0x3F91C4EC4EC4EC4Ful) + t * p;
  p = uint64BitsToDouble(0x3F96E8BA2E8BA2E9ul) + t * p;
  p = uint64BitsToDouble(0x3F9F1C71C71C71C7ul) + t * p;
  p = uint64BitsToDouble(0x3FA6DB6DB6DB6DB7ul) + t * p;
  p = uint64BitsToDouble(0x3FB3333333333333ul) + t * p;
  p = uint64BitsToDouble(0x3FC5555555555555ul) + t * p;
  return p;
}

// e^(th + tl) (|tl| well below ulp(th)): k = round(th / ln 2), r = th - k ln 2 in two parts
// (exact: Sterbenz), e^r = 1 + r + r^2 E(r) summed small terms first, then 2^k.
double pcy_m64_exp(double th, double tl) {
  if (th > 709.782712893384lf) return PCY_M64_INF;
  if (th < -746.0lf) return 0.0lf;
  precise double kf = roundEven(th * PCY_M64_LOG2E);
  precise double rh = th - kf * PCY_M64_LN2A;
  precise double rl = tl - kf * PCY_M64_LN2B;
  precise double r = rh + rl;
  precise double c = (rh - r) + rl;
  precise double p = (r * r) * pcy_m64_exp_tail(r);
  precise double y = 1.0lf + (r + ((p + c) + c * r));
  return pcy_m64_scale(y, int(kf));
}
// e^(th + tl) as hi + lo, for th in [-708, 0] (normal results)
void pcy_m64_exp_dd(double th, double tl, out double hi, out double lo) {
  precise double kf = roundEven(th * PCY_M64_LOG2E);
  precise double rh = th - kf * PCY_M64_LN2A;
  precise double rl = tl - kf * PCY_M64_LN2B;
  precise double r = rh + rl;
  precise double c = (rh - r) + rl;
  precise double p = (r * r) * pcy_m64_exp_tail(r);
  double s, se, yh, yl;
  pcy_m64_two_sum(r, (p + c) + c * r, s, se);
  pcy_m64_fast_sum(1.0lf, s, yh, yl);
  const double two = pcy_m64_pow2(int(kf));
  precise double h = yh * two;
  precise double l = (yl + se) * two;
  hi = h;
  lo = l;
}
double pcy_exp_f64(double x) {
  if (pcy_isnan_f64(x)) return x;
  return pcy_m64_exp(x, 0.0lf);
}
double pcy_expm1_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_iszero_f64(x)) return x;
  if (x > 709.782712893384lf) return PCY_M64_INF;
  if (x < -40.0lf) return -1.0lf; // e^x below half an ulp of 1
  if (abs(x) < 0.34657359027997264lf) { // |x| <= ln2 / 2: the series itself
    precise double p = (x * x) * pcy_m64_exp_tail(x);
    precise double y = x + p;
    return y;
  }
  if (x < -2.0lf || x > 36.0lf) { // e^x - 1 loses nothing there
    precise double y = pcy_m64_exp(x, 0.0lf) - 1.0lf;
    return y;
  }
  // 2^k (1 + u) - 1 = (2^k - 1) + 2^k u, both exact for |k| <= 53, u = e^r - 1 as hi + lo
  precise double kf = roundEven(x * PCY_M64_LOG2E);
  precise double rh = x - kf * PCY_M64_LN2A;
  precise double rl = -(kf * PCY_M64_LN2B);
  precise double r = rh + rl;
  precise double c = (rh - r) + rl;
  precise double p = (r * r) * pcy_m64_exp_tail(r);
  double uh, ul;
  pcy_m64_two_sum(r, (p + c) + c * r, uh, ul);
  const double two = pcy_m64_pow2(int(kf));
  double s, e;
  pcy_m64_two_sum(two - 1.0lf, two * uh, s, e);
  precise double y = s + (e + two * ul);
  return y;
}

// ln x as hi + lo (x finite, > 0; relative error near 2^-64): x = 2^e m, m in
// [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f) as hi + lo,
// ln m = 2s + 2s^3/3 + 2s^5 L(s^2) with the first two terms in pairs.
void pcy_m64_log(double x, out double hi, out double lo) {
  uvec2 b = unpackDouble2x32(x);
  int e = 0;
  if (b.y < 0x00100000u) { // subnormal: 2^54 x
    precise double xs = x * PCY_M64_C(0x4350000000000000ul);
    b = unpackDouble2x32(xs);
    e = -54;
  }
  e += int(b.y >> 20) - 1023;
  uint mh = (b.y & 0x000FFFFFu) | 0x3FF00000u;
  if ((b.y & 0x000FFFFFu) > 0x6A09Eu) { // m > sqrt(2): m / 2
    mh -= 0x00100000u;
    e += 1;
  }
  const double m = packDouble2x32(uvec2(b.x, mh));
  precise double f = m - 1.0lf;
  double dh, dl;
  pcy_m64_fast_sum(2.0lf, f, dh, dl);
  precise double sh = f / dh;
  double q, qe;
  pcy_m64_two_prod(sh, dh, q, qe);
  precise double sl = (((f - q) - qe) - sh * dl) / dh;
  double z, ze, c3, c3e, t, te;
  pcy_m64_two_prod(sh, sh, z, ze);
  precise double zl = ze + 2.0lf * sh * sl;
  pcy_m64_two_prod(z, sh, c3, c3e); // s^3
  precise double c3l = c3e + (z * sl + zl * sh);
  pcy_m64_two_prod(c3, PCY_M64_C(0x3FE5555555555555ul), t, te); // 2/3 s^3
  precise double tl = te + (c3 * PCY_M64_C(0x3C85555555555555ul) +
                            c3l * PCY_M64_C(0x3FE5555555555555ul));
  precise double tail = (c3 * z) * pcy_m64_log_tail(z);
  const double ef = double(e);
  double s1, e1, s2, e2;
  pcy_m64_two_sum(ef * PCY_M64_LN2A, 2.0lf * sh, s1, e1);
  pcy_m64_two_sum(s1, t, s2, e2);
  precise double rest = (e1 + e2) + (((ef * PCY_M64_LN2B + 2.0lf * sl) + tl) + tail);
  pcy_m64_fast_sum(s2, rest, hi, lo);
}
// log's special values; finite x > 0: false (then the caller computes)
bool pcy_m64_log_special(double x, out double r) {
  r = x;
  if (pcy_isnan_f64(x) || (pcy_isinf_f64(x) && !pcy_neg_f64(x))) return true;
  if (pcy_iszero_f64(x)) { r = -PCY_M64_INF; return true; }
  if (pcy_neg_f64(x)) { r = PCY_M64_NAN; return true; }
  return false;
}
double pcy_log_f64(double x) {
  double r, hi, lo;
  if (pcy_m64_log_special(x, r)) return r;
  pcy_m64_log(x, hi, lo);
  return hi;
}
// (hi + lo) (ch + cl), rounded once
double pcy_m64_mul_dd(double hi, double lo, double ch, double cl) {
  double p, pe;
  pcy_m64_two_prod(hi, ch, p, pe);
  precise double y = p + (pe + (hi * cl + lo * ch));
  return y;
}
double pcy_log2_f64(double x) {
  double r, hi, lo;
  if (pcy_m64_log_special(x, r)) return r;
  pcy_m64_log(x, hi, lo);
  return pcy_m64_mul_dd(hi, lo, PCY_M64_LOG2E, PCY_M64_C(0x3C7777D0FFDA0D24ul));
}
double pcy_log10_f64(double x) {
  double r, hi, lo;
  if (pcy_m64_log_special(x, r)) return r;
  pcy_m64_log(x, hi, lo);
  return pcy_m64_mul_dd(hi, lo, PCY_M64_C(0x3FDBCB7B1526E50Eul),
                        PCY_M64_C(0x3C695355BAAAFAD3ul));
}
// ln(1 + x): 1 + x as an exact pair uh + ul, ln uh + ul / uh
double pcy_log1p_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_iszero_f64(x)) return x;
  if (x == -1.0lf) return -PCY_M64_INF;
  if (x < -1.0lf) return PCY_M64_NAN;
  if (pcy_isinf_f64(x)) return x;
  double uh, ul, hi, lo;
  pcy_m64_two_sum(1.0lf, x, uh, ul);
  pcy_m64_log(uh, hi, lo);
  precise double y = hi + (lo + ul / uh);
  return y;
}

double pcy_sinh_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_iszero_f64(x) || pcy_isinf_f64(x)) return x;
  const double a = abs(x);
  precise double y;
  if (a < 1.0lf) {
    y = a + ((a * a) * a) * pcy_m64_sinh_tail(a * a);
  } else if (a < 22.0lf) {
    precise double e = pcy_m64_exp(a, 0.0lf);
    y = 0.5lf * e - 0.5lf / e;
  } else if (a <= 709.782712893384lf) {
    y = 0.5lf * pcy_m64_exp(a, 0.0lf);
  } else { // e^a overflows before sinh does: (e^(a/2) / 2) e^(a/2)
    precise double w = pcy_m64_exp(0.5lf * a, 0.0lf);
    y = (0.5lf * w) * w;
  }
  return pcy_copysign_f64(y, x);
}
double pcy_cosh_f64(double x) {
  if (pcy_isnan_f64(x)) return x;
  const double a = abs(x);
  precise double y;
  if (a < 1.0lf) {
    y = 1.0lf + (a * a) * pcy_m64_cosh_tail(a * a);
  } else if (a < 22.0lf) {
    precise double e = pcy_m64_exp(a, 0.0lf);
    y = 0.5lf * e + 0.5lf / e;
  } else if (a <= 709.782712893384lf) {
    y = 0.5lf * pcy_m64_exp(a, 0.0lf);
  } else {
    precise double w = pcy_m64_exp(0.5lf * a, 0.0lf);
    y = (0.5lf * w) * w;
  }
  return y;
}
double pcy_tanh_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_iszero_f64(x)) return x;
  const double a = abs(x);
  precise double y;
  if (a > 22.0lf) {
    y = 1.0lf;
  } else if (a < 0.5lf) { // sinh / cosh by their series: no cancellation
    precise double z = a * a;
    precise double sh = a + (z * a) * pcy_m64_sinh_tail(z);
    precise double ch = 1.0lf + z * pcy_m64_cosh_tail(z);
    y = sh / ch;
  } else { // 1 - 2 / (e^2a + 1)
    precise double m = pcy_expm1_f64(a + a);
    y = 1.0lf - 2.0lf / (m + 2.0lf);
  }
  return pcy_copysign_f64(y, x);
}

// ln(2a) for a >= 2^28 and the like: ln a + ln 2 as pairs
double pcy_m64_log_plus_ln2(double a) {
  double hi, lo, s, e;
  pcy_m64_log(a, hi, lo);
  pcy_m64_two_sum(hi, PCY_M64_LN2_HI, s, e);
  precise double y = s + (e + (lo + PCY_M64_LN2_LO));
  return y;
}
double pcy_asinh_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_iszero_f64(x) || pcy_isinf_f64(x)) return x;
  const double a = abs(x);
  precise double y;
  if (a < 3.7252902984e-09lf) y = a; // 2^-28
  else if (a > 268435456.0lf) y = pcy_m64_log_plus_ln2(a);
  else if (a > 2.0lf) y = pcy_log_f64(2.0lf * a + 1.0lf / (sqrt(a * a + 1.0lf) + a));
  else {
    precise double z = a * a;
    y = pcy_log1p_f64(a + z / (1.0lf + sqrt(1.0lf + z)));
  }
  return pcy_copysign_f64(y, x);
}
double pcy_acosh_f64(double x) {
  if (pcy_isnan_f64(x)) return x;
  if (x < 1.0lf) return PCY_M64_NAN;
  if (pcy_isinf_f64(x)) return x;
  if (x == 1.0lf) return 0.0lf;
  precise double y;
  if (x > 268435456.0lf) y = pcy_m64_log_plus_ln2(x);
  else if (x > 2.0lf) y = pcy_log_f64(2.0lf * x - 1.0lf / (x + sqrt(x * x - 1.0lf)));
  else {
    precise double t = x - 1.0lf;
    y = pcy_log1p_f64(t + sqrt(2.0lf * t + t * t));
  }
  return y;
}
double pcy_atanh_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_iszero_f64(x)) return x;
  const double a = abs(x);
  if (a > 1.0lf) return PCY_M64_NAN;
  if (a == 1.0lf) return pcy_copysign_f64(PCY_M64_INF, x);
  precise double y;
  if (a < 3.7252902984e-09lf) y = a;
  else if (a < 0.5lf) {
    precise double t = a + a;
    y = 0.5lf * pcy_log1p_f64(t + (t * a) / (1.0lf - a));
  } else y = 0.5lf * pcy_log1p_f64((a + a) / (1.0lf - a));
  return pcy_copysign_f64(y, x);
}

// atan a for finite a >= 0: a reduced to |t| <= 7/16 about 0, 1/2, 1, 3/2 or infinity
// (atan a = atan c + atan((a - c) / (1 + a c))), then t + t^3 A(t^2).
double pcy_m64_atan(double a) {
  if (a > 7.3786976294838206e19lf) return PCY_M64_PIO2_HI; // 2^66
  if (a < 3.7252902984e-09lf) return a;
  precise double t;
  double bh = 0.0lf, bl = 0.0lf;
  if (a < 0.4375lf) t = a;
  else if (a < 0.6875lf) {
    t = (2.0lf * a - 1.0lf) / (2.0lf + a);
    bh = PCY_M64_C(0x3FDDAC670561BB4Ful);
    bl = PCY_M64_C(0x3C7A2B7F222F65E2ul);
  } else if (a < 1.1875lf) {
    t = (a - 1.0lf) / (a + 1.0lf);
    bh = PCY_M64_PIO4_HI;
    bl = PCY_M64_PIO4_LO;
  } else if (a < 2.4375lf) {
    t = (a - 1.5lf) / (1.0lf + 1.5lf * a);
    bh = PCY_M64_C(0x3FEF730BD281F69Bul);
    bl = PCY_M64_C(0x3C7007887AF0CBBDul);
  } else {
    t = -1.0lf / a;
    bh = PCY_M64_PIO2_HI;
    bl = PCY_M64_PIO2_LO;
  }
  precise double z = t * t;
  precise double w = (t * z) * pcy_m64_atan_tail(z);
  precise double y = bh + (t + (w + bl));
  return y;
}
double pcy_atan_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_iszero_f64(x)) return x;
  return pcy_copysign_f64(pcy_m64_atan(abs(x)), x);
}
// asin s = s + s^3 B(s^2) for s = sqrt((1 - a) / 2) as an exact-ish pair: sh + sl, then
// (for a >= 1/2) asin a = pi/2 - 2 asin s, acos a = 2 asin s
void pcy_m64_asin_half(double w, out double sh, out double rest) {
  precise double s = sqrt(w);
  double q, qe;
  pcy_m64_two_prod(s, s, q, qe);
  precise double sl = ((w - q) - qe) / (s + s);
  precise double v = (s * w) * pcy_m64_asin_tail(w);
  precise double r = sl + v;
  sh = s;
  rest = r;
}
double pcy_asin_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_iszero_f64(x)) return x;
  const double a = abs(x);
  if (a > 1.0lf) return PCY_M64_NAN;
  precise double y;
  if (a == 1.0lf) y = PCY_M64_PIO2_HI;
  else if (a < 1.4901161193847656e-08lf) y = a; // 2^-26
  else if (a < 0.5lf) {
    precise double z = a * a;
    y = a + (a * z) * pcy_m64_asin_tail(z);
  } else {
    double sh, rest;
    pcy_m64_asin_half((1.0lf - a) * 0.5lf, sh, rest);
    y = PCY_M64_PIO2_HI - (2.0lf * sh - (PCY_M64_PIO2_LO - 2.0lf * rest));
  }
  return pcy_copysign_f64(y, x);
}
double pcy_acos_f64(double x) {
  if (pcy_isnan_f64(x)) return x;
  const double a = abs(x);
  if (a > 1.0lf) return PCY_M64_NAN;
  if (x == 1.0lf) return 0.0lf;
  if (x == -1.0lf) return PCY_M64_PI_HI;
  precise double y;
  if (a < 0.5lf) {
    precise double z = x * x;
    y = PCY_M64_PIO2_HI - (x - (PCY_M64_PIO2_LO - (x * z) * pcy_m64_asin_tail(z)));
  } else if (x > 0.0lf) {
    double sh, rest;
    pcy_m64_asin_half((1.0lf - x) * 0.5lf, sh, rest);
    y = 2.0lf * sh + 2.0lf * rest;
  } else {
    double sh, rest;
    pcy_m64_asin_half((1.0lf + x) * 0.5lf, sh, rest);
    y = PCY_M64_PI_HI - (2.0lf * sh - (PCY_M64_PI_LO - 2.0lf * rest));
  }
  return y;
}
double pcy_atan2_f64(double y, double x) { // C's special values, then atan |y/x| placed
  if (pcy_isnan_f64(x) || pcy_isnan_f64(y)) return PCY_M64_NAN;
  precise double r;
  if (pcy_iszero_f64(y)) {
    r = pcy_neg_f64(x) ? PCY_M64_PI_HI : 0.0lf;
  } else if (pcy_isinf_f64(y)) {
    r = pcy_isinf_f64(x) ? (pcy_neg_f64(x) ? PCY_M64_C(0x4002D97C7F3321D2ul) : PCY_M64_PIO4_HI)
                         : PCY_M64_PIO2_HI;
  } else if (pcy_iszero_f64(x)) {
    r = PCY_M64_PIO2_HI;
  } else if (pcy_isinf_f64(x)) {
    r = pcy_neg_f64(x) ? PCY_M64_PI_HI : 0.0lf;
  } else {
    precise double q = abs(y) / abs(x);
    precise double a = pcy_isinf_f64(q) ? PCY_M64_PIO2_HI : pcy_m64_atan(q);
    r = pcy_neg_f64(x) ? PCY_M64_PI_HI - (a - PCY_M64_PI_LO) : a;
  }
  return pcy_copysign_f64(r, y);
}
double pcy_hypot_f64(double x, double y) { // inf wins over NaN (C's hypot)
  if (pcy_isinf_f64(x) || pcy_isinf_f64(y)) return PCY_M64_INF;
  if (pcy_isnan_f64(x) || pcy_isnan_f64(y)) return PCY_M64_NAN;
  precise double a = max(abs(x), abs(y));
  precise double b = min(abs(x), abs(y));
  if (b == 0.0lf || b < a * 8.6736173798840355e-19lf) return a; // 2^-60
  double back = 1.0lf;
  if (a > PCY_M64_C(0x5F30000000000000ul)) { // 2^500: scaled by 2^-600 (exact)
    a = a * PCY_M64_C(0x1A70000000000000ul);
    b = b * PCY_M64_C(0x1A70000000000000ul);
    back = PCY_M64_C(0x6570000000000000ul);
  } else if (a < PCY_M64_C(0x20B0000000000000ul)) { // 2^-500: by 2^600
    a = a * PCY_M64_C(0x6570000000000000ul);
    b = b * PCY_M64_C(0x6570000000000000ul);
    back = PCY_M64_C(0x1A70000000000000ul);
  }
  double ph, pl, qh, ql, sh, se;
  pcy_m64_two_prod(a, a, ph, pl);
  pcy_m64_two_prod(b, b, qh, ql);
  pcy_m64_two_sum(ph, qh, sh, se);
  precise double sl = se + (pl + ql);
  precise double r = sqrt(sh);
  double rr, rre;
  pcy_m64_two_prod(r, r, rr, rre);
  precise double y2 = (r + (((sh - rr) - rre) + sl) / (r + r)) * back;
  return y2;
}
double pcy_logaddexp_f64(double x, double y) { // npy_logaddexp's cases
  if (x == y) {
    precise double r = x + PCY_M64_LN2_HI;
    return pcy_isinf_f64(x) ? x : r;
  }
  precise double t = x - y;
  if (pcy_isnan_f64(x) || pcy_isnan_f64(y)) return PCY_M64_NAN;
  if (pcy_isinf_f64(x) || pcy_isinf_f64(y)) return t > 0.0lf ? x : y;
  const double m = t > 0.0lf ? x : y;
  if (abs(t) > 708.0lf) { // e^-|t| near or below the subnormals: no cancellation left
    precise double r = m + pcy_log1p_f64(pcy_m64_exp(-abs(t), 0.0lf));
    return r;
  }
  // m + ln(1 + e^-|t|) with |t| and e^-|t| as pairs: m and the log cancel where they meet
  double th, tl, uh, ul, vh, vl, hi, lo, s, e;
  pcy_m64_two_sum(x, -y, th, tl);
  if (th > 0.0lf) pcy_m64_exp_dd(-th, -tl, uh, ul);
  else pcy_m64_exp_dd(th, tl, uh, ul);
  pcy_m64_fast_sum(1.0lf, uh, vh, vl);
  pcy_m64_log(vh, hi, lo);
  pcy_m64_two_sum(m, hi, s, e);
  precise double r = s + (e + (lo + (vl + ul) / vh));
  return r;
}
// C's pow (Annex F's special values), then e^(y ln|x|) with y ln|x| as a pair, and the sign of an
// odd integer power of a negative x.
double pcy_pow_f64(double x, double y) {
  if (pcy_iszero_f64(y) || x == 1.0lf) return 1.0lf;
  if (pcy_isnan_f64(x) || pcy_isnan_f64(y)) return PCY_M64_NAN;
  const bool yint = !pcy_isinf_f64(y) && floor(y) == y;
  precise double hy = 0.5lf * y;
  const bool yodd = yint && abs(y) < 9007199254740992.0lf && floor(hy) != hy;
  if (pcy_iszero_f64(x)) {
    if (y < 0.0lf) return yodd ? pcy_copysign_f64(PCY_M64_INF, x) : PCY_M64_INF;
    return yodd ? x : 0.0lf;
  }
  if (pcy_isinf_f64(y)) {
    const double ax = abs(x);
    if (ax == 1.0lf) return 1.0lf;
    return (ax < 1.0lf) == (y < 0.0lf) ? PCY_M64_INF : 0.0lf;
  }
  if (pcy_isinf_f64(x)) {
    const double mag = y < 0.0lf ? 0.0lf : PCY_M64_INF;
    return pcy_neg_f64(x) && yodd ? -mag : mag;
  }
  if (x < 0.0lf && !yint) return PCY_M64_NAN;
  double lh, ll;
  pcy_m64_log(abs(x), lh, ll);
  precise double th = y * lh;
  precise double r;
  if (abs(th) > 800.0lf) r = th > 0.0lf ? PCY_M64_INF : 0.0lf;
  else {
    double p, pe;
    pcy_m64_two_prod(y, lh, p, pe);
    double s, e;
    pcy_m64_fast_sum(p, pe + y * ll, s, e);
    r = pcy_m64_exp(s, e);
  }
  return x < 0.0lf && yodd ? -r : r;
}

// erf: a < 1/2 the Maclaurin series (odd), a in [1/2, 6) the Taylor polynomial of its half-unit
// interval (erf(c) as a pair), beyond: 1.
double pcy_erf_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_iszero_f64(x)) return x;
  const double a = abs(x);
  precise double y;
  if (a < 0.5lf) y = a * pcy_m64_erf_small(a * a);
  else if (a >= 6.0lf) y = 1.0lf;
  else {
    const int i = int(a * 2.0lf);
    precise double t = a - (double(i) * 0.5lf + 0.25lf);
    double lo;
    const double hi = pcy_m64_erf_taylor(i, t, lo);
    y = hi + lo;
  }
  return pcy_copysign_f64(y, x);
}


// sin, cos and tan: |x| >= pi/4 reduced exactly modulo pi/2 (Payne and Hanek): x = m 2^E, the
// 192 bits of 2/pi from bit E - 1 on (earlier ones make multiples of 4; bits before the first
// are zeros: two words of them ahead of the table) times m as an integer product whose bits
// 190 and 191 are the quadrant and 189 .. 62 the fraction (to 2^-137 of x 2/pi); the fraction
// (folded to [-1/2, 1/2]) times pi/2 as a pair. Then series on [-pi/4, pi/4]. Every index into
// the product is a constant (no array indexed by a variable:
// lavapipe compiled one for seconds to minutes a shader).
void pcy_m64_mac(uint w, uint64_t m, inout uint p, inout uint64_t c) {
  const uint64_t t = m * uint64_t(w) + uint64_t(p) + c;
  p = uint(t);
  c = t >> 32;
}
void pcy_m64_pick(uint v, int d, inout uint t0, inout uint t1, inout uint t2, inout uint t3,
                  inout uint t4, inout uint t5, inout uint t6) {
  t0 = d == 0 ? v : t0;
  t1 = d == 1 ? v : t1;
  t2 = d == 2 ? v : t2;
  t3 = d == 3 ? v : t3;
  t4 = d == 4 ? v : t4;
  t5 = d == 5 ? v : t5;
  t6 = d == 6 ? v : t6;
}
// tools/array/glsl_f64_constants.py's output: 2/pi's first 1280 bits
void pcy_m64_2opi_words(int wi, out uint t0, out uint t1, out uint t2, out uint t3,
                        out uint t4, out uint t5, out uint t6) {
  t0 = 0u, t1 = 0u, t2 = 0u, t3 = 0u, t4 = 0u, t5 = 0u, t6 = 0u;
  pcy_m64_pick(0xA2F9836Eu, 2 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x4E441529u, 3 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xFC2757D1u, 4 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xF534DDC0u, 5 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xDB629599u, 6 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x3C439041u, 7 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xFE5163ABu, 8 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xDEBBC561u, 9 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xB7246E3Au, 10 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x424DD2E0u, 11 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x06492EEAu, 12 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x09D1921Cu, 13 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xFE1DEB1Cu, 14 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xB129A73Eu, 15 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xE88235F5u, 16 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x2EBB4484u, 17 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xE99C7026u, 18 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xB45F7E41u, 19 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x3991D639u, 20 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x835339F4u, 21 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x9C845F8Bu, 22 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xBDF9283Bu, 23 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x1FF897FFu, 24 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xDE05980Fu, 25 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xEF2F118Bu, 26 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x5A0A6D1Fu, 27 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x6D367ECFu, 28 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x27CB09B7u, 29 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x4F463F66u, 30 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x9E5FEA2Du, 31 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x7527BAC7u, 32 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xEBE5F17Bu, 33 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x3D0739F7u, 34 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x8A5292EAu, 35 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x6BFB5FB1u, 36 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x1F8D5D08u, 37 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x56033046u, 38 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xFC7B6BABu, 39 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0xF0CFBC20u, 40 - wi, t0, t1, t2, t3, t4, t5, t6);
  pcy_m64_pick(0x9AF4361Du, 41 - wi, t0, t1, t2, t3, t4, t5, t6);
}
uint pcy_m64_shl(uint a, uint b, int bi) { return bi == 0 ? a : (a << bi) | (b >> (32 - bi)); }
uint pcy_m64_rem_pio2(double ax, out double rh, out double rl) { // ax finite, >= pi/4
  const uint64_t b = doubleBitsToUint64(ax);
  const uint64_t m = (b & 0xFFFFFFFFFFFFFul) | 0x10000000000000ul;
  const int E = int(b >> 52) - 1075;    // ax = m 2^E, E >= -53
  const int o = E - 2 + 64;             // bit E - 1 of 2/pi, 0-based, in the padded table
  const int wi = o >> 5, bi = o & 31;
  // W = the window's 6 words, w5 the most significant; P = m W up to bit 191 (p0 .. p5)
  uint t0, t1, t2, t3, t4, t5, t6;
  pcy_m64_2opi_words(wi, t0, t1, t2, t3, t4, t5, t6);
  const uint w0 = pcy_m64_shl(t5, t6, bi), w1 = pcy_m64_shl(t4, t5, bi),
             w2 = pcy_m64_shl(t3, t4, bi), w3 = pcy_m64_shl(t2, t3, bi),
             w4 = pcy_m64_shl(t1, t2, bi), w5 = pcy_m64_shl(t0, t1, bi);
  uint p0 = 0u, p1 = 0u, p2 = 0u, p3 = 0u, p4 = 0u, p5 = 0u;
  const uint64_t ml = m & 0xFFFFFFFFul, mh = m >> 32;
  uint64_t c = 0ul;
  pcy_m64_mac(w0, ml, p0, c);
  pcy_m64_mac(w1, ml, p1, c);
  pcy_m64_mac(w2, ml, p2, c);
  pcy_m64_mac(w3, ml, p3, c);
  pcy_m64_mac(w4, ml, p4, c);
  pcy_m64_mac(w5, ml, p5, c);
  c = 0ul;
  pcy_m64_mac(w0, mh, p1, c);
  pcy_m64_mac(w1, mh, p2, c);
  pcy_m64_mac(w2, mh, p3, c);
  pcy_m64_mac(w3, mh, p4, c);
  pcy_m64_mac(w4, mh, p5, c);
  uint q = p5 >> 30;
  uint64_t fh = (uint64_t(p5 & 0x3FFFFFFFu) << 34) | (uint64_t(p4) << 2) | uint64_t(p3 >> 30);
  uint64_t fl = (uint64_t(p3 & 0x3FFFFFFFu) << 34) | (uint64_t(p2) << 2) | uint64_t(p1 >> 30);
  const bool neg = (fh >> 63) != 0ul;
  if (neg) { // fraction - 1 (two's complement), one quadrant on
    fh = ~fh + (fl == 0ul ? 1ul : 0ul);
    fl = ~fl + 1ul;
    q = (q + 1u) & 3u;
  }
  int sh = 0; // normalise: the leading one to bit 63 of fh
  if (fh == 0ul) {
    fh = fl;
    fl = 0ul;
    sh = 64;
  }
  if (fh == 0ul) {
    rh = 0.0lf;
    rl = 0.0lf;
    return q;
  }
  int n = 0;
  if ((fh >> 32) == 0ul) n += 32;
  if ((fh << n >> 48) == 0ul) n += 16;
  if ((fh << n >> 56) == 0ul) n += 8;
  if ((fh << n >> 60) == 0ul) n += 4;
  if ((fh << n >> 62) == 0ul) n += 2;
  if ((fh << n >> 63) == 0ul) n += 1;
  if (n > 0) {
    fh = (fh << n) | (fl >> (64 - n));
    fl <<= n;
  }
  sh += n; // fraction = (fh:fl) 2^(-128 - sh)
  precise double dh = double(fh >> 11) * pcy_m64_pow2(-53 - sh);
  precise double dl = double(((fh & 0x7FFul) << 42) | (fl >> 22)) * pcy_m64_pow2(-106 - sh);
  double p, pe;
  pcy_m64_two_prod(dh, PCY_M64_PIO2_HI, p, pe);
  precise double pl = pe + (dh * PCY_M64_PIO2_LO + dl * PCY_M64_PIO2_HI);
  double h, l;
  pcy_m64_fast_sum(p, pl, h, l);
  rh = neg ? -h : h;
  rl = neg ? -l : l;
  return q;
}
double pcy_m64_sin_k(double h, double l) { // sin(h + l), |h| <= pi/4, |l| tiny
  precise double z = h * h;
  precise double y = h + (((z * h) * pcy_m64_sin_tail(z)) + l * (1.0lf - 0.5lf * z));
  return y;
}
double pcy_m64_cos_k(double h, double l) { // cos(h + l)
  precise double z = h * h;
  precise double hz = 0.5lf * z;
  precise double w = 1.0lf - hz;
  precise double y = w + (((1.0lf - w) - hz) + ((z * z) * pcy_m64_cos_tail(z) - h * l));
  return y;
}
// |x| as q pi/2 + (h + l); x finite
uint pcy_m64_reduce(double ax, out double h, out double l) {
  if (ax < PCY_M64_PIO4_HI) {
    h = ax;
    l = 0.0lf;
    return 0u;
  }
  return pcy_m64_rem_pio2(ax, h, l);
}
double pcy_sin_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_isinf_f64(x)) return PCY_M64_NAN;
  if (pcy_iszero_f64(x)) return x;
  double h, l;
  const uint q = pcy_m64_reduce(abs(x), h, l);
  precise double r = (q & 1u) == 0u ? pcy_m64_sin_k(h, l) : pcy_m64_cos_k(h, l);
  if (q >= 2u) r = -r;
  return pcy_neg_f64(x) ? -r : r;
}
double pcy_cos_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_isinf_f64(x)) return PCY_M64_NAN;
  double h, l;
  const uint q = pcy_m64_reduce(abs(x), h, l);
  precise double r = (q & 1u) == 0u ? pcy_m64_cos_k(h, l) : pcy_m64_sin_k(h, l);
  if (q == 1u || q == 2u) r = -r;
  return r;
}
double pcy_tan_f64(double x) {
  if (pcy_isnan_f64(x) || pcy_isinf_f64(x)) return PCY_M64_NAN;
  if (pcy_iszero_f64(x)) return x;
  double h, l;
  const uint q = pcy_m64_reduce(abs(x), h, l);
  const double s = pcy_m64_sin_k(h, l), c = pcy_m64_cos_k(h, l);
  precise double r = (q & 1u) == 0u ? s / c : -c / s;
  return pcy_neg_f64(x) ? -r : r;
}
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
