// pcy_array_random.h (sdk/include/parenchyma/abi/ext/) in GLSL, for array_vulkan's random
// shaders: the same functions in the same order of operations, so every draw gives the same bits
// as on every other framework (tests/array/array_gpu_test.cpp compares them). GLSL has no hex
// float literals, pointers or C casts: the fitted constants are their binary32/binary64 bits (the
// header's literal beside each), out-parameters replace pointers, and the 32x32-bit products of
// Philox come from umulExtended. Every floating local is `precise`: no contraction into fma, as
// the header requires. Needs GL_EXT_shader_explicit_arithmetic_types_int64; the binary64
// functions also PCY_RNG_F64 (a device with shaderFloat64).

// ---- the fitted constants (the header's, as bits) -----------------------------------------------
#define PCY_RNG_F32_LOG_G0 uintBitsToFloat(0x3EAAAAAAu) // 0x1.555554p-2f
#define PCY_RNG_F32_LOG_G1 uintBitsToFloat(0xBE7FFFFEu) // -0x1.fffffcp-3f
#define PCY_RNG_F32_LOG_G2 uintBitsToFloat(0x3E4CCEADu) // 0x1.999d5ap-3f
#define PCY_RNG_F32_LOG_G3 uintBitsToFloat(0xBE2AADA5u) // -0x1.555b4ap-3f
#define PCY_RNG_F32_LOG_G4 uintBitsToFloat(0x3E11E90Du) // 0x1.23d21ap-3f
#define PCY_RNG_F32_LOG_G5 uintBitsToFloat(0xBDFE7A63u) // -0x1.fcf4c6p-4f
#define PCY_RNG_F32_LOG_G6 uintBitsToFloat(0x3DEF5141u) // 0x1.dea282p-4f
#define PCY_RNG_F32_LOG_G7 uintBitsToFloat(0xBDEB1ADEu) // -0x1.d635bcp-4f
#define PCY_RNG_F32_LOG_G8 uintBitsToFloat(0x3D8EC753u) // 0x1.1d8ea6p-4f
#define PCY_RNG_F32_SIN_S0 uintBitsToFloat(0x3FC90FDBu) // 0x1.921fb6p+0f
#define PCY_RNG_F32_SIN_S1 uintBitsToFloat(0xBF255DDDu) // -0x1.4abbbap-1f
#define PCY_RNG_F32_SIN_S2 uintBitsToFloat(0x3DA32F62u) // 0x1.465ec4p-4f
#define PCY_RNG_F32_SIN_S3 uintBitsToFloat(0xBB96CDA0u) // -0x1.2d9b4p-8f
#define PCY_RNG_F32_COS_C0 uintBitsToFloat(0xBF9DE9E6u) // -0x1.3bd3ccp+0f
#define PCY_RNG_F32_COS_C1 uintBitsToFloat(0x3E81E0F5u) // 0x1.03c1eap-2f
#define PCY_RNG_F32_COS_C2 uintBitsToFloat(0xBCAAE5CCu) // -0x1.55cb98p-6f
#define PCY_RNG_F32_COS_C3 uintBitsToFloat(0x3A6DB249u) // 0x1.db6492p-11f
#define PCY_RNG_F64_LOG_G0 uint64BitsToDouble(0x3FD5555555555556ul) // 0x1.5555555555556p-2
#define PCY_RNG_F64_LOG_G1 uint64BitsToDouble(0xBFCFFFFFFFFFFFE7ul) // -0x1.fffffffffffe7p-3
#define PCY_RNG_F64_LOG_G2 uint64BitsToDouble(0x3FC9999999999010ul) // 0x1.999999999901p-3
#define PCY_RNG_F64_LOG_G3 uint64BitsToDouble(0xBFC5555555558074ul) // -0x1.5555555558074p-3
#define PCY_RNG_F64_LOG_G4 uint64BitsToDouble(0x3FC24924925376DAul) // 0x1.24924925376dap-3
#define PCY_RNG_F64_LOG_G5 uint64BitsToDouble(0xBFBFFFFFFFE0374Ful) // -0x1.fffffffe0374fp-4
#define PCY_RNG_F64_LOG_G6 uint64BitsToDouble(0x3FBC71C713CCCA51ul) // 0x1.c71c713ccca51p-4
#define PCY_RNG_F64_LOG_G7 uint64BitsToDouble(0xBFB9999999711BA3ul) // -0x1.9999999711ba3p-4
#define PCY_RNG_F64_LOG_G8 uint64BitsToDouble(0x3FB745D343946656ul) // 0x1.745d343946656p-4
#define PCY_RNG_F64_LOG_G9 uint64BitsToDouble(0xBFB555574CD5F5ABul) // -0x1.555574cd5f5abp-4
#define PCY_RNG_F64_LOG_G10 uint64BitsToDouble(0x3FB3B105762C04E6ul) // 0x1.3b105762c04e6p-4
#define PCY_RNG_F64_LOG_G11 uint64BitsToDouble(0xBFB248BBB2B73DD0ul) // -0x1.248bbb2b73ddp-4
#define PCY_RNG_F64_LOG_G12 uint64BitsToDouble(0x3FB1148D6D97BE33ul) // 0x1.1148d6d97be33p-4
#define PCY_RNG_F64_LOG_G13 uint64BitsToDouble(0xBFB009D9EDE13925ul) // -0x1.009d9ede13925p-4
#define PCY_RNG_F64_LOG_G14 uint64BitsToDouble(0x3FADE2B25A838DA5ul) // 0x1.de2b25a838da5p-5
#define PCY_RNG_F64_LOG_G15 uint64BitsToDouble(0xBFAB7C4FFE0C77FDul) // -0x1.b7c4ffe0c77fdp-5
#define PCY_RNG_F64_LOG_G16 uint64BitsToDouble(0x3FAB81071D2B9323ul) // 0x1.b81071d2b9323p-5
#define PCY_RNG_F64_LOG_G17 uint64BitsToDouble(0xBFAF6223B4EBAE32ul) // -0x1.f6223b4ebae32p-5
#define PCY_RNG_F64_LOG_G18 uint64BitsToDouble(0x3FAD03182232BB25ul) // 0x1.d03182232bb25p-5
#define PCY_RNG_F64_LOG_G19 uint64BitsToDouble(0xBF99A9A68C447047ul) // -0x1.9a9a68c447047p-6
#define PCY_RNG_F64_SIN_S0 uint64BitsToDouble(0x3FF921FB54442D18ul) // 0x1.921fb54442d18p+0
#define PCY_RNG_F64_SIN_S1 uint64BitsToDouble(0xBFE4ABBCE625BE41ul) // -0x1.4abbce625be41p-1
#define PCY_RNG_F64_SIN_S2 uint64BitsToDouble(0x3FB466BC677587F8ul) // 0x1.466bc677587f8p-4
#define PCY_RNG_F64_SIN_S3 uint64BitsToDouble(0xBF732D2CCE2E5B19ul) // -0x1.32d2cce2e5b19p-8
#define PCY_RNG_F64_SIN_S4 uint64BitsToDouble(0x3F250782FDA12D96ul) // 0x1.50782fda12d96p-13
#define PCY_RNG_F64_SIN_S5 uint64BitsToDouble(0xBECE30071AFC3E59ul) // -0x1.e30071afc3e59p-19
#define PCY_RNG_F64_SIN_S6 uint64BitsToDouble(0x3E6E3F38399551BFul) // 0x1.e3f38399551bfp-25
#define PCY_RNG_F64_COS_C0 uint64BitsToDouble(0xBFF3BD3CC9BE45DEul) // -0x1.3bd3cc9be45dep+0
#define PCY_RNG_F64_COS_C1 uint64BitsToDouble(0x3FD03C1F081B5AC0ul) // 0x1.03c1f081b5acp-2
#define PCY_RNG_F64_COS_C2 uint64BitsToDouble(0xBF955D3C7E3CB241ul) // -0x1.55d3c7e3cb241p-6
#define PCY_RNG_F64_COS_C3 uint64BitsToDouble(0x3F4E1F5068688D5Bul) // 0x1.e1f5068688d5bp-11
#define PCY_RNG_F64_COS_C4 uint64BitsToDouble(0xBEFA6D1EEF479BE1ul) // -0x1.a6d1eef479be1p-16
#define PCY_RNG_F64_COS_C5 uint64BitsToDouble(0x3E9F9CE245CADA0Bul) // 0x1.f9ce245cada0bp-22
#define PCY_RNG_F64_COS_C6 uint64BitsToDouble(0xBE3B2F3EB054AFCDul) // -0x1.b2f3eb054afcdp-28
#define PCY_RNG_RSQRT0 uintBitsToFloat(0x3FC4C1D7u) // 0x1.8983aep+0f
#define PCY_RNG_RSQRT1 uintBitsToFloat(0xBF362DB5u) // -0x1.6c5b6ap-1f
#define PCY_RNG_RSQRT2 uintBitsToFloat(0x3E3B919Au) // 0x1.772334p-3f
#define PCY_RNG_RSQRT3 uintBitsToFloat(0xBC8FDD8Au) // -0x1.1fbb14p-6f
#define PCY_RNG_F32_LN2_HI uintBitsToFloat(0x3F317200u) // 0x1.62e4p-1f
#define PCY_RNG_F32_LN2_LO uintBitsToFloat(0x35BFBE8Eu) // 0x1.7f7d1cp-20f
#define PCY_RNG_F64_LN2_HI uint64BitsToDouble(0x3FE62E42FEFA3800ul) // 0x1.62e42fefa38p-1
#define PCY_RNG_F64_LN2_LO uint64BitsToDouble(0x3D2EF35793C76730ul) // 0x1.ef35793c7673p-45
#define PCY_RNG_F32_SQRT2 uintBitsToFloat(0x3FB504F3u) // 0x1.6a09e6p+0f
#define PCY_RNG_F64_SQRT2 uint64BitsToDouble(0x3FF6A09E667F3BCDul) // 0x1.6a09e667f3bcdp+0

// ---- Philox-4x32-10 -----------------------------------------------------------------------------
void pcy_rng_philox(uint key0, uint key1, uint c0, uint c1, uint c2, uint c3, out uint o[4]) {
  uint k0 = key0, k1 = key1, x0 = c0, x1 = c1, x2 = c2, x3 = c3;
  for (int i = 0; i < 10; ++i) {
    uint h0, l0, h1, l1;
    umulExtended(0xD2511F53u, x0, h0, l0);
    umulExtended(0xCD9E8D57u, x2, h1, l1);
    x0 = h1 ^ x1 ^ k0;
    x2 = h0 ^ x3 ^ k1;
    x1 = l1;
    x3 = l0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  o[0] = x0;
  o[1] = x1;
  o[2] = x2;
  o[3] = x3;
}

void pcy_rng_words(uint64_t seed, uint64_t offset, uint64_t e, out uint o[4]) {
  const uint64_t c = offset + e;
  pcy_rng_philox(uint(seed), uint(seed >> 32), uint(c), uint(c >> 32), 0u, 0u, o);
}

// ---- integers -----------------------------------------------------------------------------------
uint pcy_rng_bernoulli(uint w0, uint64_t threshold) { return uint64_t(w0) < threshold ? 1u : 0u; }

int64_t pcy_rng_randint(uint w0, uint w1, int64_t lo, uint64_t range) {
  const uint64_t mask = 0xFFFFFFFFul;
  const uint64_t r0 = range & mask, r1 = range >> 32;
  const uint64_t p00 = uint64_t(w0) * r0, p01 = uint64_t(w0) * r1;
  const uint64_t p10 = uint64_t(w1) * r0, p11 = uint64_t(w1) * r1;
  const uint64_t mid = (p00 >> 32) + (p01 & mask) + (p10 & mask);
  const uint64_t hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
  return int64_t(uint64_t(lo) + hi);
}

// ---- permutations (a Feistel network walked until it lands below n) ----------------------------
uint64_t pcy_rng_feistel(uint key0, uint key1, uint off0, uint off1, uint hb, uint64_t x) {
  const uint64_t mask = (1ul << hb) - 1ul;
  uint64_t l = x >> hb, r = x & mask;
  uint w[4];
  for (uint rnd = 0u; rnd < 4u; ++rnd) {
    pcy_rng_philox(key0, key1, uint(r), rnd, off0, off1, w);
    const uint64_t f = uint64_t(w[0]) & mask;
    const uint64_t t = l ^ f;
    l = r;
    r = t;
  }
  return (l << hb) | r;
}

uint64_t pcy_rng_permute(uint64_t seed, uint64_t offset, uint64_t n, uint64_t e) {
  uint bits = 2u;
  while (bits < 64u && (1ul << bits) < n)
    bits += 2u;
  const uint hb = bits / 2u;
  const uint k0 = uint(seed), k1 = uint(seed >> 32);
  const uint o0 = uint(offset), o1 = uint(offset >> 32);
  uint64_t y = pcy_rng_feistel(k0, k1, o0, o1, hb, e);
  while (y >= n)
    y = pcy_rng_feistel(k0, k1, o0, o1, hb, y);
  return y;
}

// ---- floor(log2 x), x >= 1 ----------------------------------------------------------------------
int pcy_rng_log2_u32(uint x) { return findMSB(x); }
int pcy_rng_log2_u64(uint64_t x) {
  const uint hi = uint(x >> 32);
  return hi != 0u ? 32 + findMSB(hi) : findMSB(uint(x));
}

// ---- binary32 -----------------------------------------------------------------------------------
float pcy_rng_uniform_f32(uint w0) {
  precise const float r = float(w0 >> 8) * uintBitsToFloat(0x33800000u); // 2^-24
  return r;
}

float pcy_rng_neg2log_f32(uint k) {
  int e = pcy_rng_log2_u32(k);
  precise float m, f, h, g, t, lnm, nf;
  m = e == 24 ? 1.0 : float(k << (23 - e)) * uintBitsToFloat(0x34000000u); // 2^-23
  if (m >= PCY_RNG_F32_SQRT2) {
    m = m * 0.5;
    e += 1;
  }
  f = m + -1.0;
  h = f * f;
  g = PCY_RNG_F32_LOG_G8;
  g = g * f + PCY_RNG_F32_LOG_G7;
  g = g * f + PCY_RNG_F32_LOG_G6;
  g = g * f + PCY_RNG_F32_LOG_G5;
  g = g * f + PCY_RNG_F32_LOG_G4;
  g = g * f + PCY_RNG_F32_LOG_G3;
  g = g * f + PCY_RNG_F32_LOG_G2;
  g = g * f + PCY_RNG_F32_LOG_G1;
  g = g * f + PCY_RNG_F32_LOG_G0;
  t = (f * h) * g;
  lnm = f + (t + h * -0.5);
  nf = float(24 - e);
  t = nf * PCY_RNG_F32_LN2_HI + (nf * PCY_RNG_F32_LN2_LO + -lnm);
  return t * 2.0;
}

float pcy_rng_sqrt_f32(float s) {
  precise float t, sc, y, r;
  if (!(s > 0.0)) return 0.0;
  precise const float s24 = s * uintBitsToFloat(0x4B800000u); // 2^24
  const int j = (pcy_rng_log2_u32(uint(s24)) >> 1) - 12;
  t = s * (float(1u << (6 - 2 * j)) * uintBitsToFloat(0x3C800000u)); // 2^-6
  sc = float(1u << (j + 12)) * uintBitsToFloat(0x39800000u);         // 2^-12
  y = PCY_RNG_RSQRT3;
  y = y * t + PCY_RNG_RSQRT2;
  y = y * t + PCY_RNG_RSQRT1;
  y = y * t + PCY_RNG_RSQRT0;
  for (int i = 0; i < 3; ++i) {
    precise const float u = (t * y) * y;
    y = y * (1.5 + u * -0.5);
  }
  r = t * y;
  r = r + (y * 0.5) * (t + -(r * r));
  return r * sc;
}

void pcy_rng_sincos2pi_f32(uint j, out float c, out float s) {
  const uint q = (j >> 22) & 3u;
  uint r = j & 0x3FFFFFu;
  const bool refl = r > 0x200000u;
  const bool sine = ((q & 1u) != 0u) != refl;
  precise float y, v, sp, cp;
  if (refl) r = 0x400000u - r;
  y = float(r) * uintBitsToFloat(0x34800000u); // 2^-22
  v = y * y;
  sp = PCY_RNG_F32_SIN_S3;
  sp = sp * v + PCY_RNG_F32_SIN_S2;
  sp = sp * v + PCY_RNG_F32_SIN_S1;
  sp = sp * v + PCY_RNG_F32_SIN_S0;
  sp = y * sp;
  cp = PCY_RNG_F32_COS_C3;
  cp = cp * v + PCY_RNG_F32_COS_C2;
  cp = cp * v + PCY_RNG_F32_COS_C1;
  cp = cp * v + PCY_RNG_F32_COS_C0;
  cp = 1.0 + v * cp;
  precise const float a = sine ? sp : cp, b = sine ? cp : sp;
  c = (q == 1u || q == 2u) ? -a : a;
  s = (q == 2u || q == 3u) ? -b : b;
}

float pcy_rng_radius_f32(uint w0) { return pcy_rng_sqrt_f32(pcy_rng_neg2log_f32((w0 >> 8) + 1u)); }

// ---- binary64 -----------------------------------------------------------------------------------
#ifdef PCY_RNG_F64
double pcy_rng_uniform_f64(uint w0, uint w1) {
  precise const double hi = double(w0 >> 11) * 4294967296.0lf;
  precise const double r = (hi + double(w1)) * uint64BitsToDouble(0x3CA0000000000000ul); // 2^-53
  return r;
}

double pcy_rng_neg2log_f64(uint64_t k) {
  int e = pcy_rng_log2_u64(k);
  precise double m, f, h, g, t, lnm, nf;
  m = e == 53 ? 1.0lf : double(k << (52 - e)) * uint64BitsToDouble(0x3CB0000000000000ul); // 2^-52
  if (m >= PCY_RNG_F64_SQRT2) {
    m = m * 0.5lf;
    e += 1;
  }
  f = m + -1.0lf;
  h = f * f;
  g = PCY_RNG_F64_LOG_G19;
  g = g * f + PCY_RNG_F64_LOG_G18;
  g = g * f + PCY_RNG_F64_LOG_G17;
  g = g * f + PCY_RNG_F64_LOG_G16;
  g = g * f + PCY_RNG_F64_LOG_G15;
  g = g * f + PCY_RNG_F64_LOG_G14;
  g = g * f + PCY_RNG_F64_LOG_G13;
  g = g * f + PCY_RNG_F64_LOG_G12;
  g = g * f + PCY_RNG_F64_LOG_G11;
  g = g * f + PCY_RNG_F64_LOG_G10;
  g = g * f + PCY_RNG_F64_LOG_G9;
  g = g * f + PCY_RNG_F64_LOG_G8;
  g = g * f + PCY_RNG_F64_LOG_G7;
  g = g * f + PCY_RNG_F64_LOG_G6;
  g = g * f + PCY_RNG_F64_LOG_G5;
  g = g * f + PCY_RNG_F64_LOG_G4;
  g = g * f + PCY_RNG_F64_LOG_G3;
  g = g * f + PCY_RNG_F64_LOG_G2;
  g = g * f + PCY_RNG_F64_LOG_G1;
  g = g * f + PCY_RNG_F64_LOG_G0;
  t = (f * h) * g;
  lnm = f + (t + h * -0.5lf);
  nf = double(53 - e);
  t = nf * PCY_RNG_F64_LN2_HI + (nf * PCY_RNG_F64_LN2_LO + -lnm);
  return t * 2.0lf;
}

double pcy_rng_sqrt_f64(double s) {
  precise double t, sc, y, r;
  if (!(s > 0.0lf)) return 0.0lf;
  precise const double s53 = s * uint64BitsToDouble(0x4340000000000000ul); // 2^53
  const int j = ((pcy_rng_log2_u64(uint64_t(s53)) + 1) >> 1) - 27;
  t = s * (double(1ul << (6 - 2 * j)) * uint64BitsToDouble(0x3F90000000000000ul)); // 2^-6
  sc = double(1ul << (j + 27)) * uint64BitsToDouble(0x3E40000000000000ul);         // 2^-27
  y = double(PCY_RNG_RSQRT3);
  y = y * t + double(PCY_RNG_RSQRT2);
  y = y * t + double(PCY_RNG_RSQRT1);
  y = y * t + double(PCY_RNG_RSQRT0);
  for (int i = 0; i < 4; ++i) {
    precise const double u = (t * y) * y;
    y = y * (1.5lf + u * -0.5lf);
  }
  r = t * y;
  r = r + (y * 0.5lf) * (t + -(r * r));
  return r * sc;
}

void pcy_rng_sincos2pi_f64(uint64_t j, out double c, out double s) {
  const uint64_t mid = 1ul << 50, quarter_turn = 1ul << 51;
  const uint64_t q = (j >> 51) & 3ul;
  uint64_t r = j & (quarter_turn - 1ul);
  const bool refl = r > mid;
  const bool sine = ((q & 1ul) != 0ul) != refl;
  precise double y, v, sp, cp;
  if (refl) r = quarter_turn - r;
  y = double(r) * uint64BitsToDouble(0x3CC0000000000000ul); // 2^-51
  v = y * y;
  sp = PCY_RNG_F64_SIN_S6;
  sp = sp * v + PCY_RNG_F64_SIN_S5;
  sp = sp * v + PCY_RNG_F64_SIN_S4;
  sp = sp * v + PCY_RNG_F64_SIN_S3;
  sp = sp * v + PCY_RNG_F64_SIN_S2;
  sp = sp * v + PCY_RNG_F64_SIN_S1;
  sp = sp * v + PCY_RNG_F64_SIN_S0;
  sp = y * sp;
  cp = PCY_RNG_F64_COS_C6;
  cp = cp * v + PCY_RNG_F64_COS_C5;
  cp = cp * v + PCY_RNG_F64_COS_C4;
  cp = cp * v + PCY_RNG_F64_COS_C3;
  cp = cp * v + PCY_RNG_F64_COS_C2;
  cp = cp * v + PCY_RNG_F64_COS_C1;
  cp = cp * v + PCY_RNG_F64_COS_C0;
  cp = 1.0lf + v * cp;
  precise const double a = sine ? sp : cp, b = sine ? cp : sp;
  c = (q == 1ul || q == 2ul) ? -a : a;
  s = (q == 2ul || q == 3ul) ? -b : b;
}

double pcy_rng_radius_f64(uint w0, uint w1) {
  const uint64_t k1 = ((uint64_t(w0 >> 11) << 32) | uint64_t(w1)) + 1ul;
  return pcy_rng_sqrt_f64(pcy_rng_neg2log_f64(k1));
}
#endif
