#!/usr/bin/env python3
"""Fits the polynomials of sdk/include/parenchyma/abi/ext/pcy_array_random.h (the portable normal
transform of the array extension's random numbers) and prints them as exact hex float literals.

Needs mpmath (pure Python). Each fit is a Chebyshev interpolant (near-minimax) at 60 digits; its
coefficients are then rounded to the target precision (binary32 or binary64) and the error of the
ROUNDED polynomial is measured on a dense grid, in the same form the header evaluates it:

  ln(1 + f) = f - f^2/2 + f^3 G(f),          f in [sqrt(1/2) - 1, sqrt(2) - 1]
  sin(pi/2 y) = y S(y^2),  cos(pi/2 y) = 1 + y^2 C(y^2),   y in [0, 1/2]
  1/sqrt(t) ~ R(t) (a start for Newton's iteration),   t in [1, 4]

The smallest degree whose relative error (of ln, cos) is below a quarter of an ulp (sin: one
ulp, as pi/2 itself rounds by up to 0.9 ulp of binary32) is chosen.
Run: python3 tools/array/fit_random_polys.py   (the header's literals are this script's output)
"""
import struct

import mpmath as mp

mp.mp.dps = 60
LO, HI = mp.sqrt(mp.mpf(1) / 2) - 1, mp.sqrt(2) - 1


def to_prec(x, bits):
    d = float(x)
    if bits == 24:
        return struct.unpack("f", struct.pack("f", d))[0]
    return d


def lit(x, bits):
    mant, exp = float(x).hex().split("p")
    mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
    return mant + "p" + exp + ("f" if bits == 24 else "")


def g_exact(f):  # (ln(1+f) - f + f^2/2) / f^3, by its series near 0
    f = mp.mpf(f)
    if abs(f) < mp.mpf("1e-12"):
        return mp.mpf(1) / 3 - f / 4
    return (mp.log1p(f) - f + f * f / 2) / f**3


def s_exact(v):  # sin(pi/2 sqrt v) / sqrt v
    v = mp.mpf(v)
    if v == 0:
        return mp.pi / 2
    r = mp.sqrt(v)
    return mp.sin(mp.pi / 2 * r) / r


def c_exact(v):  # (cos(pi/2 sqrt v) - 1) / v
    v = mp.mpf(v)
    if v == 0:
        return -(mp.pi**2) / 8
    return (mp.cos(mp.pi / 2 * mp.sqrt(v)) - 1) / v


def horner(cs, x):  # cs lowest first
    acc = mp.mpf(0)
    for c in reversed(cs):
        acc = acc * x + c
    return acc


def fit(fn, a, b, deg, bits):
    poly, _ = mp.chebyfit(fn, [a, b], deg + 1, error=True)
    return [to_prec(c, bits) for c in reversed(poly)]  # lowest first


def grid(a, b, n=2000):
    return [a + (b - a) * mp.mpf(i) / n for i in range(n + 1)]


def err_log(cs):
    worst = 0
    for f in grid(LO, HI):
        if f == 0:
            continue
        approx = f - f * f / 2 + f**3 * horner(cs, f)
        worst = max(worst, abs(approx / mp.log1p(f) - 1))
    return worst


def err_sin(cs):
    worst = 0
    for y in grid(mp.mpf(0), mp.mpf(1) / 2)[1:]:
        worst = max(worst, abs(y * horner(cs, y * y) / mp.sin(mp.pi / 2 * y) - 1))
    return worst


def err_cos(cs):
    worst = 0
    for y in grid(mp.mpf(0), mp.mpf(1) / 2):
        worst = max(worst, abs((1 + y * y * horner(cs, y * y)) / mp.cos(mp.pi / 2 * y) - 1))
    return worst


def err_rsqrt(cs):
    return max(abs(horner(cs, t) * mp.sqrt(t) - 1) for t in grid(mp.mpf(1), mp.mpf(4)))


def smallest(fn, a, b, err, bits, slack):
    target = mp.mpf(2) ** -(bits + slack)
    for deg in range(1, 40):
        cs = fit(fn, a, b, deg, bits)
        e = err(cs)
        if e < target:
            return cs, e
    raise SystemExit("no degree reaches the target")


def main():
    for bits, name in ((24, "F32"), (53, "F64")):
        print(f"/* ---- {name} (binary{32 if bits == 24 else 64}) ---- */")
        # sin's leading coefficient is pi/2 rounded: its target is one ulp
        for label, fn, a, b, err, slack in (
            ("LOG_G", g_exact, LO, HI, err_log, 2),
            ("SIN_S", s_exact, mp.mpf(0), mp.mpf(1) / 4, err_sin, 0),
            ("COS_C", c_exact, mp.mpf(0), mp.mpf(1) / 4, err_cos, 2),
        ):
            cs, e = smallest(fn, a, b, err, bits, slack)
            print(f"/* {label}: degree {len(cs) - 1}, relative error {mp.nstr(e, 3)}"
                  f" (2^{mp.nstr(mp.log(e, 2), 4)}) */")
            for i, c in enumerate(cs):
                print(f"#define PCY_RNG_{name}_{label}{i} {lit(c, bits)}")
    cs = fit(lambda t: 1 / mp.sqrt(t), mp.mpf(1), mp.mpf(4), 3, 24)
    print(f"/* RSQRT start: degree 3, relative error {mp.nstr(err_rsqrt(cs), 3)} */")
    for i, c in enumerate(cs):
        print(f"#define PCY_RNG_RSQRT{i} {lit(c, 24)}")
    ln2 = mp.log(2)
    for bits, name, keep in ((24, "F32", 16), (53, "F64", 42)):
        hi = mp.floor(ln2 * 2**keep) / 2**keep  # few bits: n * hi is exact for n <= 64
        lo = to_prec(ln2 - hi, bits)
        print(f"#define PCY_RNG_{name}_LN2_HI {lit(hi, bits)}")
        print(f"#define PCY_RNG_{name}_LN2_LO {lit(lo, bits)}")


if __name__ == "__main__":
    main()
