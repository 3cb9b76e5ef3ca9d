#!/usr/bin/env python3
"""Prints the constants of extensions/array/vulkan/helpers.glsl's PCY_MATH_F64 section (the f64
transcendental functions of the array bundle for Vulkan) as exact binary64 bit patterns.

Nothing is fitted: the polynomials are truncated Taylor series whose coefficients are rounded once
to binary64 from 60-digit values (mpmath); constants that must carry more than 53 bits are pairs
hi + lo (hi the rounded value, lo the rounded rest). 2/pi's bits (for the argument reduction of
sin, cos and tan at any magnitude, 40 words) come from mpmath's pi at enough digits, checked against a
second evaluation at more digits.
Run: python3 tools/array/glsl_f64_constants.py   (helpers.glsl's literals are this output)
"""
import struct

import mpmath as mp

mp.mp.dps = 60


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def lit(x):
    return "uint64BitsToDouble(0x%016Xul)" % bits(x)


def dd(name, x):
    hi = float(x)
    lo = float(x - mp.mpf(hi))
    print("// %s = %s" % (name, mp.nstr(x, 25)))
    print("const double %s_hi = %r, %s_lo = %r; // bits 0x%016X, 0x%016X" % (name, hi, name, lo,
                                                                            bits(hi), bits(lo)))


def horner(name, coeffs):
    """A GLSL function evaluating sum coeffs[i] t^i by Horner's rule."""
    print("double %s(double t) {" % name)
    print("  precise double p = %s;" % lit(coeffs[-1]))
    for c in reversed(coeffs[:-1]):
        print("  p = %s + t * p;" % lit(c))
    print("  return p;\n}")


def two_over_pi_words(nwords):
    with mp.workdps(nwords * 32 // 3 + 50):
        v = int(mp.floor(2 / mp.pi * mp.mpf(2) ** (32 * nwords)))
    with mp.workdps(nwords * 32 // 3 + 80):
        check = int(mp.floor(2 / mp.pi * mp.mpf(2) ** (32 * nwords)))
    assert v == check
    return [(v >> (32 * (nwords - 1 - i))) & 0xFFFFFFFF for i in range(nwords)]


if __name__ == "__main__":
    # 2/pi's words as straight-line selects (lavapipe compiled a table indexed by a variable in
    # seconds per shader): t_j = word wi + j of the table with two zero words ahead
    w = two_over_pi_words(40)
    print("void pcy_m64_2opi_words(int wi, out uint t0, out uint t1, out uint t2, out uint t3,")
    print("                        out uint t4, out uint t5, out uint t6) {")
    print("  t0 = 0u, t1 = 0u, t2 = 0u, t3 = 0u, t4 = 0u, t5 = 0u, t6 = 0u;")
    for i, x in enumerate(w):
        print("  pcy_m64_pick(0x%08Xu, %d - wi, t0, t1, t2, t3, t4, t5, t6);" % (x, i + 2))
    print("}")
    dd("pio2", mp.pi / 2)
    dd("pi", mp.pi)
    dd("ln2", mp.log(2))
    dd("log2e", 1 / mp.log(2))
    dd("log10e", 1 / mp.log(10))
    dd("atan_half", mp.atan(mp.mpf(1) / 2))
    dd("pio4", mp.pi / 4)
    dd("atan_3_2", mp.atan(mp.mpf(3) / 2))
    dd("two_3", mp.mpf(2) / 3)
    dd("two_sqrtpi", 2 / mp.sqrt(mp.pi))
    dd("inv_sqrtpi", 1 / mp.sqrt(mp.pi))
    # e^r = 1 + r + r^2 E(r), |r| <= ln2 / 2: E's terms to r^14 / 16!
    horner("pcy_m64_exp_tail", [1 / mp.factorial(n) for n in range(2, 17)])
    # log(m) = 2s + 2s^3/3 + 2s^5 L(s^2), s^2 <= 0.0295
    horner("pcy_m64_log_tail", [mp.mpf(2) / (2 * k + 1) for k in range(2, 14)])
    # sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2), |r| <= pi/4
    horner("pcy_m64_sin_tail", [(-1) ** k / mp.factorial(2 * k + 1) for k in range(1, 12)])
    horner("pcy_m64_cos_tail", [(-1) ** k / mp.factorial(2 * k) for k in range(2, 13)])
    # atan t = t + t^3 A(t^2), |t| <= 7/16
    horner("pcy_m64_atan_tail", [mp.mpf((-1) ** k) / (2 * k + 1) for k in range(1, 30)])
    # asin t = t + t^3 B(t^2), |t| <= 1/2
    # sinh a = a + a^3 H(a^2), cosh a = 1 + a^2 K(a^2), a < 1
    horner("pcy_m64_sinh_tail", [1 / mp.factorial(2 * k + 3) for k in range(0, 10)])
    horner("pcy_m64_cosh_tail", [1 / mp.factorial(2 * k + 2) for k in range(0, 11)])
    # erf a = a M(a^2), a < 1/2 (Maclaurin); on [i/2, i/2 + 1/2), i = 1..11, erf's Taylor
    # polynomial of degree 20 about c = i/2 + 1/4 (|a - c| <= 1/4), erf(c) as hi + lo
    horner("pcy_m64_erf_small", [2 / mp.sqrt(mp.pi) * (-1) ** n / (mp.factorial(n) * (2 * n + 1))
                                 for n in range(0, 16)])
    rows = []
    for i in range(1, 12):
        co = mp.taylor(mp.erf, mp.mpf(i) / 2 + mp.mpf(1) / 4, 20)
        hi = float(co[0])
        rows.append([hi, float(co[0] - mp.mpf(hi))] + [float(x) for x in co[1:]])
    # coefficient k of interval i picked by selects (lavapipe compiled a table indexed by a
    # variable for minutes), then Horner's rule in t = a - c
    print("double pcy_m64_erf_taylor(int i, double t, out double lo) {")
    sel = lambda k: "pcy_m64_erf_pick(i, " + ",\n      ".join(
        ", ".join("%.17elf" % rows[r][k] for r in range(j, min(j + 3, 11)))
        for j in range(0, 11, 3)) + ")"
    print("  precise double p = %s;" % sel(21))
    for k in range(20, 1, -1):
        print("  p = %s + t * p;" % sel(k))
    print("  lo = %s + t * p;" % sel(1))
    print("  return %s;\n}" % sel(0))
    horner("pcy_m64_asin_tail",
           [mp.factorial(2 * n) / (4 ** n * mp.factorial(n) ** 2 * (2 * n + 1))
            for n in range(1, 30)])
