# The array operations of parenchyma.Tensor and parenchyma.array_api, differential against NumPy
# (the reference) on seeded random data: awkward shapes (size 0 and 1, rank 0, broadcasting),
# non-contiguous views (negative steps, transposes), NaN/Inf/signed zero, integer wrap-around,
# every dtype pair through result_type and astype; on every backend present (conftest).
# The rules NumPy 1.x does not follow (NEP 50's weak scalars) are stated as literal results.
import os

import numpy as np
import pytest

import parenchyma
import parenchyma.array_api as xp
from conftest import get_backend

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"]
INTS = ["int8", "int16", "int32", "int64", "uint8"]
FLOATS = ["float16", "float32", "float64"]


# The exhaustive differential tests compile hundreds of distinct programs; on OpenCL each is a
# kernel build (PoCL: about 0.3 s each, minutes with a fresh kernel cache), so by default they run
# on native and test_every_backend covers each backend with a representative set.
# PARENCHYMA_TEST_ARRAY_ALL_BACKENDS=1 runs all of them on every backend.
ALL_BACKENDS = os.environ.get("PARENCHYMA_TEST_ARRAY_ALL_BACKENDS") == "1"


@pytest.fixture(params=["native", "opencl"])
def b(request):
    if request.param != "native" and not ALL_BACKENDS:
        pytest.skip("exhaustive on native only (PARENCHYMA_TEST_ARRAY_ALL_BACKENDS=1 for all; "
                    "test_every_backend covers %s)" % request.param)
    return get_backend(request.param)


@pytest.fixture(params=["native", "opencl"])
def every(request):
    return get_backend(request.param)


def rng(seed=0):
    return np.random.default_rng(seed)


def rand(shape, dtype, seed=0, lo=-5, hi=5):
    r = rng(seed)
    if dtype == "bool":
        return r.random(shape) < 0.5
    if dtype in INTS:
        info = np.iinfo(dtype)
        return r.integers(max(lo, info.min), min(hi, info.max) + 1, size=shape).astype(dtype)
    return (r.random(shape) * (hi - lo) + lo).astype(dtype)


def T(a, b):
    """A Tensor holding NumPy array a on backend b (bool goes through uint8: NumPy 1.24 exports
    no bool through DLPack)."""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return xp.astype(T(a.astype(np.uint8), b), "bool")
    t = parenchyma.asarray(np.array(a, order="C", copy=True))
    return t.to(b)


def check(t, ref, exact=True, rtol=None, zeros=True):
    assert isinstance(t, parenchyma.Tensor)
    ref = np.asarray(ref)
    assert t.shape == ref.shape, (t.shape, ref.shape)
    assert t.dtype == ref.dtype.name, (t.dtype, ref.dtype.name)
    got = t.numpy()
    if exact:
        np.testing.assert_array_equal(got, ref)
        if ref.dtype.kind == "f" and zeros:  # signed zeros too (a NaN's sign is free)
            real = ~np.isnan(ref)
            np.testing.assert_array_equal(np.signbit(got)[real], np.signbit(ref)[real])
    else:
        if rtol is None:
            rtol = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-13}[ref.dtype.name]
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol,
                                   atol=rtol, equal_nan=True)


# ---- dtypes ---------------------------------------------------------------------------------
def test_result_type_every_pair():
    for a in DTYPES:
        for c in DTYPES:
            assert xp.result_type(a, c) == np.result_type(a, c).name, (a, c)


def test_result_type_weak_scalars():
    # NEP 50 (NumPy 2): a Python scalar takes the array's dtype unless its kind is higher.
    assert xp.result_type("int8", 1) == "int8"
    assert xp.result_type("uint8", 1.5) == "float64"
    assert xp.result_type("float16", 1.5) == "float16"
    assert xp.result_type("bool", 1) == "int64"
    assert xp.result_type("bool", True) == "bool"
    assert xp.result_type("float32", 2, "int16") == "float32"


def test_binary_every_dtype_pair(b):
    for i, a in enumerate(DTYPES):
        for j, c in enumerate(DTYPES):
            x = rand((3, 1), a, seed=i)
            y = rand((4,), c, seed=10 + j)
            rt = np.result_type(x.dtype, y.dtype)
            op = np.logical_or if rt == np.bool_ else np.maximum
            ref = op(x.astype(rt), y.astype(rt))
            got = xp.logical_or(T(x, b), T(y, b)) if rt == np.bool_ else \
                xp.maximum(T(x, b), T(y, b))
            check(got, ref)
            check(T(x, b) == T(y, b), x.astype(rt) == y.astype(rt))


def test_astype_every_pair(b):
    base = np.array([0, 1, -1, 2, -7, 100, 127, -128, 3], dtype=np.int64)
    for src in DTYPES:
        if src == "bool":
            x = base % 2 == 0
        elif src in FLOATS:
            x = (base.astype(np.float64) + 0.25 * np.sign(base)).astype(src)
        else:
            x = base.astype(src)  # wraps into unsigned / narrow types, as NumPy
        t = T(x, b)
        for dst in DTYPES:
            if src in FLOATS and dst in INTS and np.iinfo(dst).min == 0:
                xs = np.abs(x)  # negative floats into unsigned: undefined in C and NumPy
                check(xp.astype(T(xs, b), dst), xs.astype(dst))
                continue
            check(xp.astype(t, dst), x.astype(dst))


def test_can_cast_finfo_iinfo_isdtype():
    assert xp.can_cast("int8", "int16") and not xp.can_cast("int16", "int8")
    assert xp.can_cast("uint8", "int16") and not xp.can_cast("float64", "float32")
    assert xp.finfo(xp.float32).eps == np.finfo(np.float32).eps
    assert xp.iinfo(xp.int16).max == 32767 and xp.iinfo("uint8").min == 0
    assert xp.isdtype(xp.int8, "signed integer") and xp.isdtype(xp.uint8, "integral")
    assert xp.isdtype(xp.float16, "real floating") and not xp.isdtype(xp.bool, "numeric")
    assert xp.isdtype(xp.bool, "bool") and xp.isdtype(xp.int32, ("bool", "integral"))
    with pytest.raises(parenchyma.Error, match="not supported"):
        xp.asarray([1, 2], dtype="uint32")
    with pytest.raises(parenchyma.Error):
        xp.zeros(3, dtype="complex64")


# ---- elementwise ----------------------------------------------------------------------------
SHAPES = [((), (2, 3)), ((3, 1, 4), (5, 4)), ((0, 3), (1, 3)), ((1,), (7,)), ((2, 1), (1, 0))]

ARITH = [("add", np.add, "+"), ("subtract", np.subtract, "-"), ("multiply", np.multiply, "*"),
         ("maximum", np.maximum, None), ("minimum", np.minimum, None)]


def test_arithmetic_broadcasting(b):
    for k, (s1, s2) in enumerate(SHAPES):
        for dt in ("int32", "float32", "float64", "uint8"):
            x, y = rand(s1, dt, seed=k), rand(s2, dt, seed=k + 50)
            tx, ty = T(x, b), T(y, b)
            for name, f, sym in ARITH:
                ref = f(x, y)
                check(getattr(xp, name)(tx, ty), ref)
                if sym:
                    check(eval("tx %s ty" % sym), ref)
                    check(eval("ty %s tx" % sym), f(y, x))


def test_division_and_modulo(b):
    with np.errstate(all="ignore"):
        for dt in ("int8", "int32", "int64", "float32", "float64"):
            x = rand((4, 5), dt, seed=1, lo=-20, hi=20)
            y = rand((5,), dt, seed=2, lo=-4, hi=4)
            tx, ty = T(x, b), T(y, b)
            check(tx // ty, np.floor_divide(x, y))
            check(tx % ty, np.remainder(x, y))
            if dt in FLOATS:
                check(tx / ty, x / y)
                check(xp.pow(xp.abs(tx), ty), np.abs(x) ** y, exact=False)
    # integer true division gives a floating dtype
    q = T(np.array([1, 2, 3], np.int32), b) / 2
    assert q.dtype in ("float64", "float32") and np.allclose(q.numpy(), [0.5, 1, 1.5])


def test_integer_wrap(b):
    x = np.array([127, -128, 100, 0], np.int8)
    check(T(x, b) + 1, x + np.int8(1))
    check(T(x, b) * T(x, b), x * x)
    check(-T(x, b), -x)
    check(abs(T(x, b)), np.abs(x))
    u = np.array([0, 1, 255], np.uint8)
    check(T(u, b) - 1, u - np.uint8(1))
    big = np.array([2**31 - 1, -2**31], np.int32)
    check(T(big, b) + T(big, b), big + big)
    check(T(np.array([2**62], np.int64), b) * 4, np.array([2**62], np.int64) * np.int64(4))


def test_weak_scalars(b):
    i8 = T(np.array([1, 2], np.int8), b)
    assert (i8 + 1).dtype == "int8"
    assert (i8 * 1.5).dtype == "float64"
    assert (T(np.ones(2, np.float32), b) + 1.0).dtype == "float32"
    assert (T(np.ones(2, np.float16), b) * 2).dtype == "float16"
    bo = T(np.array([True, False]), b)
    assert (bo + 1).dtype == "int64" and (bo & True).dtype == "bool"
    check(3 - i8, np.array([2, 1], np.int8))
    # NumPy scalars and arrays are strong (their dtype counts); NumPy defers to Tensor
    check(i8 + np.int16(1), np.array([2, 3], np.int16))
    check(np.arange(2, dtype=np.int32) * i8, np.array([0, 2], np.int32))
    check(xp.asarray(2.0) * np.float32(3), np.float64(6.0).reshape(()))
    check(2 ** T(np.array([1.0, 3.0]), b), np.array([2.0, 8.0]))


def test_special_values(b):
    with np.errstate(all="ignore"):
        x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5], np.float64)
        y = np.array([1.0, np.nan, np.inf, -0.0, 0.0, -np.inf, 2.0], np.float64)
        tx, ty = T(x, b), T(y, b)
        check(tx + ty, x + y)
        check(tx * ty, x * y)
        # max/min of +0 and -0: either (NumPy's SIMD loops and the standard differ)
        check(xp.maximum(tx, ty), np.maximum(x, y), zeros=False)
        check(xp.minimum(tx, ty), np.minimum(x, y), zeros=False)
        check(-tx, -x)
        check(tx < ty, x < y)
        check(tx != tx, x != x)
        check(xp.isnan(tx), np.isnan(x))
        check(xp.isinf(tx), np.isinf(x))
        check(xp.isfinite(tx), np.isfinite(x))
        check(xp.sign(tx), np.sign(x))
        check(xp.round(T(np.array([0.5, 1.5, 2.5, -0.5]), b)), np.round([0.5, 1.5, 2.5, -0.5]))
        check(xp.floor(tx), np.floor(x))
        check(xp.signbit(tx), np.signbit(x))
        check(xp.copysign(tx, ty), np.copysign(x, y))
        check(tx // ty, np.floor_divide(x, y))
        check(tx % ty, np.remainder(x, y))
        check(xp.sqrt(tx), np.sqrt(x), exact=False)
        check(xp.exp(tx), np.exp(x), exact=False)
        check(xp.log(tx), np.log(x), exact=False)


def test_unary_functions(b):
    x = rand((6, 7), "float64", seed=3, lo=-0.9, hi=0.9)
    p = np.abs(x) + 0.1
    for name in ("sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
                 "arcsinh", "arctanh", "exp", "expm1", "log1p"):
        ours = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
                "arctanh": "atanh"}.get(name, name)
        check(getattr(xp, ours)(T(x, b)), getattr(np, name)(x), exact=False)
    for name in ("log", "log2", "log10", "sqrt"):
        check(getattr(xp, name)(T(p, b)), getattr(np, name)(p), exact=False)
    check(xp.acosh(T(p + 1, b)), np.arccosh(p + 1), exact=False)
    f = x.astype(np.float32)
    check(xp.exp(T(f, b)), np.exp(f), exact=False)
    check(xp.square(T(f, b)), np.square(f))
    check(xp.trunc(T(f, b)), np.trunc(f))
    check(xp.ceil(T(f, b)), np.ceil(f))
    check(xp.atan2(T(x, b), T(p, b)), np.arctan2(x, p), exact=False)
    check(xp.hypot(T(x, b), T(p, b)), np.hypot(x, p), exact=False)
    check(xp.logaddexp(T(x, b), T(p, b)), np.logaddexp(x, p), exact=False)
    h = x.astype(np.float16)
    check(T(h, b) * T(h, b) + 1, h * h + np.float16(1))
    check(xp.sqrt(T(np.array([1, 4, 9], np.int8), b)), np.sqrt(np.array([1, 4, 9], np.int8)))


def test_bitwise_and_logical(b):
    for dt in ("int8", "int32", "uint8", "int64"):
        x, y = rand((3, 4), dt, seed=5, lo=-50, hi=50), rand((4,), dt, seed=6, lo=0, hi=7)
        tx, ty = T(x, b), T(y, b)
        check(tx & ty, x & y)
        check(tx | ty, x | y)
        check(tx ^ ty, x ^ y)
        check(~tx, ~x)
        check(tx << ty, x << y)
        check(tx >> ty, x >> y)
    p, q = rand((5,), "bool", seed=1), rand((5,), "bool", seed=2)
    tp, tq = T(p, b), T(q, b)
    check(tp & tq, p & q)
    check(~tp, ~p)
    check(xp.logical_xor(tp, tq), np.logical_xor(p, q))
    check(xp.logical_not(T(np.array([0.0, 2.0, np.nan]), b)), np.logical_not([0.0, 2.0, np.nan]))
    with pytest.raises(parenchyma.Error):
        T(np.ones(3), b) & 1


def test_where_and_clip(b):
    x, y = rand((3, 4), "float32", seed=1), rand((4,), "int16", seed=2)
    c = x > 0
    check(xp.where(T(c, b), T(x, b), T(y, b)), np.where(c, x, y.astype(np.float32)))
    check(xp.where(T(c, b), T(x, b), 0.0), np.where(c, x, np.float32(0)))
    check(xp.clip(T(x, b), -1.0, 2.0), np.clip(x, -1, 2))
    check(xp.clip(T(y, b), 0), np.clip(y, 0, None))


# ---- views, indexing, writes ------------------------------------------------------------------
def test_views_negative_steps_and_transposes(b):
    base = rand((5, 6, 4), "float32", seed=7)
    t = T(base, b)
    for key in [(slice(None, None, -1),), (slice(1, None, 2), slice(None, None, -2)),
                (Ellipsis, 0), (None, 1, Ellipsis, None), (-1, slice(-2, 0, -1), 3),
                (slice(10, -10, -3), Ellipsis, slice(1, 3)), (slice(3, 3),), ()]:
        v = t[key]
        check(v, base[key])
        check(v * 2 + 1, base[key] * np.float32(2) + np.float32(1))
    check(t.mT, np.swapaxes(base, -1, -2))
    check(t[0].T, base[0].T)
    check(xp.permute_dims(t, (2, 0, 1))[::-1] - t[0, :, 0],
          base.transpose(2, 0, 1)[::-1] - base[0, :, 0])
    check(xp.flip(t, axis=(0, 2)), np.flip(base, axis=(0, 2)))
    check(xp.reshape(t[::2], (-1, 4)), base[::2].reshape(-1, 4))
    check(xp.reshape(t[1:3], (8, -1), copy=False), base[1:3].reshape(8, -1))
    with pytest.raises(ValueError):
        xp.reshape(t.mT, (-1,), copy=False)
    check(xp.expand_dims(t, axis=-1), np.expand_dims(base, -1))
    check(xp.squeeze(t[:, :1], axis=1), base[:, 0])
    check(xp.broadcast_to(t[0, :, :1], (3, 6, 5)), np.broadcast_to(base[0, :, :1], (3, 6, 5)))
    check(xp.moveaxis(t, 0, -1), np.moveaxis(base, 0, -1))
    check(xp.matrix_transpose(t[1:4:2]), np.swapaxes(base[1:4:2], -1, -2))
    assert t[2, 3, 1].item() == base[2, 3, 1]
    with pytest.raises(parenchyma.Error):
        t[0, 0, 0, 0]
    with pytest.raises(parenchyma.Error):
        t[9]
    with pytest.raises(parenchyma.Error, match="take"):
        t[[0, 1], [1, 2]]


def test_integer_array_index_and_take(b):
    base = rand((5, 4), "int32", seed=8)
    t = T(base, b)
    idx = np.array([4, 0, -1, 2], np.int64)
    check(t[T(idx, b)], base[idx])
    j = np.array([3, -4], np.int64)
    check(t[:, T(j, b)], base[:, j])
    check(xp.take(t, T(idx, b), axis=0), np.take(base, idx, axis=0))


def test_setitem_and_inplace_write_through_views(b):
    base = rand((4, 6), "float64", seed=9)
    ref = base.copy()
    t = T(base, b)
    v = t[::-1, 1::2]
    v += 1
    ref[::-1, 1::2] += 1
    check(t, ref)
    t[0] = 7
    ref[0] = 7
    t[1:3, ::-3] = T(np.array([1.0, 2.0]), b)
    ref[1:3, ::-3] = [1.0, 2.0]
    t[..., -1] *= 2
    ref[..., -1] *= 2
    check(t, ref)
    lazy = t * 2  # pending: must keep its value after t is written
    t[:] = 0
    ref2 = ref * 2
    ref[:] = 0
    check(lazy, ref2)
    check(t, ref)
    with pytest.raises(parenchyma.Error, match="not supported"):
        t[T(np.array([0, 1]), b)] = 1.0  # a scatter: refused, never written into a copy
    t[t > 0] = 1.0  # a boolean mask: where() on the device (test_array_data_dependent.py)
    ref[ref > 0] = 1.0
    check(t, ref)
    i = T(np.array([1, 2], np.int32), b)
    with pytest.raises(parenchyma.Error, match="dtype"):
        i += 1.5
    i //= 2
    check(i, np.array([0, 1], np.int32))


def test_scalar_conversions_and_repr(b):
    t = T(np.array([[1.5, -2.0]]), b)
    assert float(t[0, 0]) == 1.5 and int(t[0, 1]) == -2 and bool(t[0, 0])
    assert t.tolist() == [[1.5, -2.0]] and t[0, 1].item() == -2.0
    assert [10, 20, 30][T(np.array(2, np.int64), b)] == 30
    assert [r.tolist() for r in T(np.arange(6).reshape(3, 2), b)] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError):
        bool(t)
    with pytest.raises(TypeError):
        float(t)
    r = repr(t)
    assert r.startswith("Tensor([[ 1.5, -2. ]]") and "float64" in r
    assert "shape=(2, 3)" in repr(parenchyma.Tensor((2, 3)))  # unwritten: no values


# ---- reductions -------------------------------------------------------------------------------
def test_reductions(b):
    for dt in ("int8", "int32", "float32", "float64", "bool", "uint8"):
        for shape, axes in [((4, 5, 3), None), ((4, 5, 3), 1), ((4, 5, 3), (0, 2)), ((1, 0), 0),
                            ((0, 3), 0),
                            ((), None), ((7,), -1)]:
            x = rand(shape, dt, seed=11)
            t = T(x, b)
            if dt == "bool" or x.size == 0 and axes is None:
                pass
            sum_dt = x.dtype if dt in FLOATS else np.int64
            check(xp.sum(t, axis=axes), np.sum(x, axis=axes, dtype=sum_dt),
                  exact=dt not in FLOATS)
            check(xp.sum(t, axis=axes, keepdims=True),
                  np.sum(x, axis=axes, dtype=sum_dt, keepdims=True), exact=dt not in FLOATS)
            check(xp.prod(t, axis=axes), np.prod(x, axis=axes, dtype=sum_dt),
                  exact=dt not in FLOATS)
            check(xp.all(t, axis=axes), np.all(x, axis=axes))
            check(xp.any(t, axis=axes, keepdims=True), np.any(x, axis=axes, keepdims=True))
            if x.size:
                check(xp.max(t, axis=axes), np.max(x, axis=axes))
                check(t.min(axis=axes), np.min(x, axis=axes))
            if dt != "bool" and x.size:
                fdt = x.dtype if dt in FLOATS else np.float64
                check(xp.mean(t, axis=axes), np.mean(x, axis=axes, dtype=fdt).astype(fdt),
                      exact=False)
                check(xp.var(t, axis=axes, correction=1) if x.size > 1 else xp.var(t, axis=axes),
                      np.var(x, axis=axes, ddof=1 if x.size > 1 else 0, dtype=fdt).astype(fdt),
                      exact=False)
                check(t.std(axis=axes), np.std(x, axis=axes, dtype=fdt).astype(fdt), exact=False)
    x = np.array([[1.0, np.nan, 3.0], [5.0, 5.0, -1.0]])
    t = T(x, b)
    check(xp.argmax(t, axis=1), np.argmax(x, axis=1))
    check(xp.argmin(t), np.argmin(x))
    check(t.argmax(axis=0, keepdims=True), np.argmax(x, axis=0, keepdims=True))
    check(xp.max(t, axis=1), np.max(x, axis=1))
    with pytest.raises(parenchyma.Error):
        xp.max(T(np.zeros((0, 3)), b), axis=0)


def test_cumulative(b):
    x = rand((3, 4), "int16", seed=12)
    check(xp.cumulative_sum(T(x, b), axis=1), np.cumsum(x, axis=1, dtype=np.int64))
    check(xp.cumulative_sum(T(x, b), axis=0, include_initial=True),
          np.concatenate([np.zeros((1, 4), np.int64), np.cumsum(x, axis=0, dtype=np.int64)]))
    f = rand((6,), "float64", seed=13)
    check(xp.cumulative_prod(T(f, b)), np.cumprod(f), exact=False)


def np_sort(x, axis, descending):
    """The Array API's sort with NumPy (array-api-strict's rule): descending is a stable sort of
    the reversed axis, reversed back, so equal values keep their order."""
    if not descending:
        return np.sort(x, axis=axis, kind="stable")
    return np.flip(np.sort(np.flip(x, axis=axis), axis=axis, kind="stable"), axis=axis)


def np_argsort(x, axis, descending):
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    r = np.flip(np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable"), axis=axis)
    return (x.shape[axis] - 1 - r).astype(np.int64)


def sort_data(shape, dtype, seed):
    x = rand(shape, dtype, seed=seed, lo=-4, hi=4)  # few distinct values: many ties
    if dtype in ("float16", "float32", "float64") and x.size:
        flat = x.reshape(-1)
        r = rng(seed + 100)
        for v in (np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, -0.0, 0.0):
            flat[r.integers(0, flat.size, size=max(1, flat.size // 8))] = v
        flat[:] = np.where(np.isnan(flat) | np.isinf(flat) | (flat == 0), flat, np.round(flat))
    return x


def test_sort_argsort(b):
    shapes = [(1,), (2,), (3,), (31,), (1000,), (3, 5, 4), (2, 1, 33), (0, 3)]
    for k, dtype in enumerate(DTYPES):
        for j, shape in enumerate(shapes):
            x = sort_data(shape, dtype, seed=k * 17 + j)
            t = T(x, b)
            for axis in range(-len(shape), len(shape)):
                for desc in (False, True):
                    what = (dtype, shape, axis, desc)
                    got = xp.argsort(t, axis=axis, descending=desc)
                    assert got.dtype == "int64", what
                    np.testing.assert_array_equal(got.numpy(), np_argsort(x, axis, desc),
                                                  err_msg=str(what))
                    check(xp.sort(t, axis=axis, descending=desc), np_sort(x, axis, desc))
    # a view (reversed, transposed) and a pending expression; the default axis is the last
    x = sort_data((6, 9), "float64", seed=5)
    t = T(x, b)
    check(xp.argsort(t[::-1, 1::2].T), np.argsort(x[::-1, 1::2].T, kind="stable"))
    check(xp.sort(t * 2 - 1, axis=0, descending=True), np_sort(x * 2 - 1, 0, True))
    # -0.0 and +0.0 are equal: they keep their order (NumPy's stable sort too)
    z = np.array([0.0, -0.0, 0.0, -1.0, -0.0], np.float32)
    check(xp.sort(T(z, b)), np.sort(z, kind="stable"))
    assert np.signbit(xp.sort(T(z, b)).numpy()).tolist() == [True, False, True, False, True]
    with pytest.raises(parenchyma.Error, match="axis"):
        xp.sort(t, axis=2)
    with pytest.raises(parenchyma.Error):
        xp.argsort(xp.asarray(1.0, device=b))


# ---- linear algebra, manipulation, creation ------------------------------------------------
def test_matmul(b):
    cases = [((3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((3, 4, 5), (3, 5, 2)),
             ((6, 3), (2, 3, 5)), ((4,), (4, 3)), ((3, 4), (4,)),
             ((4,), (4,)), ((0, 2), (2, 3)), ((2, 0), (0, 3))]
    for dt in ("float64", "float32", "int32", "int8"):
        for s1, s2 in cases:
            x, y = rand(s1, dt, seed=1), rand(s2, dt, seed=2)
            ref = np.matmul(x, y)
            check(T(x, b) @ T(y, b), ref, exact=dt in INTS, rtol=1e-5 if dt == "float32" else None)
    z = rand((3, 5, 4), "float32", seed=6)
    check(T(z, b).mT @ T(z, b), np.matmul(z.transpose(0, 2, 1), z), exact=False, rtol=1e-5)
    x = rand((5, 4), "float64", seed=3)
    check(T(x, b)[::-1].T @ T(x, b)[:, ::2], x[::-1].T @ x[:, ::2], exact=False)
    check(xp.vecdot(T(x, b), T(x, b)), np.sum(x * x, axis=-1), exact=False)
    y = rand((4, 3, 2), "float64", seed=4)
    check(xp.tensordot(T(x, b), T(y, b), axes=1), np.tensordot(x, y, axes=1), exact=False)
    check(xp.tensordot(T(y, b), T(y, b), axes=([0, 1], [0, 1])),
          np.tensordot(y, y, axes=([0, 1], [0, 1])), exact=False)
    bo = rand((3, 4), "bool", seed=5)
    check(T(bo, b) @ T(bo.T.copy(), b), bo @ bo.T)
    with pytest.raises(parenchyma.Error):
        T(x, b) @ T(x, b)


def test_manipulation(b):
    x, y = rand((2, 3), "int32", seed=1), rand((4, 3), "int16", seed=2)
    check(xp.concat([T(x, b), T(y, b)]), np.concatenate([x, y.astype(np.int32)]))
    check(xp.concat([T(x, b), T(y, b)[:2]], axis=None),
          np.concatenate([x.ravel(), y[:2].ravel().astype(np.int32)]))
    check(xp.stack([T(x, b), T(x, b)[::-1]], axis=-1), np.stack([x, x[::-1]], axis=-1))
    check(xp.roll(T(y, b), 2, axis=0), np.roll(y, 2, axis=0))
    check(xp.roll(T(y, b), -1), np.roll(y, -1))
    check(xp.tile(T(x, b), (2, 1, 2)), np.tile(x, (2, 1, 2)))
    check(xp.repeat(T(x, b), 2, axis=1), np.repeat(x, 2, axis=1))
    check(xp.diff(T(y, b), axis=0), np.diff(y, axis=0))
    check(xp.tril(T(y, b), k=-1), np.tril(y, k=-1))
    check(xp.triu(T(y, b)), np.triu(y))
    p, q = xp.broadcast_arrays(T(x, b)[:, :1], T(y, b)[0])
    check(p, np.broadcast_to(x[:, :1], (2, 3)))
    check(q, np.broadcast_to(y[0], (2, 3)))
    assert [u.shape for u in xp.unstack(T(x, b), axis=1)] == [(2,)] * 3
    m1, m2 = xp.meshgrid(T(np.arange(3), b), T(np.arange(2), b))
    r1, r2 = np.meshgrid(np.arange(3), np.arange(2))
    check(m1, r1)
    check(m2, r2)
    check(xp.count_nonzero(T(x, b)), np.int64(np.count_nonzero(x)))


def test_creation(b):
    check(xp.arange(5, device=b), np.arange(5))
    check(xp.arange(1.0, 2.0, 0.25, device=b), np.arange(1.0, 2.0, 0.25))
    check(xp.arange(10, 0, -3, dtype=xp.int8, device=b), np.arange(10, 0, -3, dtype=np.int8))
    check(xp.linspace(0, 1, 5, device=b), np.linspace(0, 1, 5))
    check(xp.linspace(0, 1, 4, endpoint=False, dtype="float32", device=b),
          np.linspace(0, 1, 4, endpoint=False, dtype=np.float32))
    check(xp.eye(3, 4, k=1, dtype="int32", device=b), np.eye(3, 4, k=1, dtype=np.int32))
    check(xp.full((2, 0), 3, device=b), np.full((2, 0), 3, np.int64))
    check(xp.sum(xp.zeros((0, 3), device=b), axis=0), np.zeros(3))
    check(xp.prod(xp.empty((3, 0), dtype="int32", device=b), axis=1), np.ones(3, np.int64))
    check(xp.full((2,), 2**62 + 1, dtype="int64", device=b), np.full(2, 2**62 + 1, np.int64))
    check(xp.zeros((2, 3), dtype="bool", device=b), np.zeros((2, 3), bool))
    check(xp.ones(4, dtype="float16", device=b), np.ones(4, np.float16))
    t = xp.full((3,), -1.5, device=b)
    check(xp.ones_like(t), np.ones(3))
    check(xp.zeros_like(t, dtype="int8"), np.zeros(3, np.int8))
    check(xp.full_like(t, 7), np.full(3, 7.0))
    e = xp.empty_like(t)
    assert e.shape == (3,) and e.dtype == "float64"
    check(xp.asarray([[1, 2], [3, 4]], device=b), np.array([[1, 2], [3, 4]], np.int64))
    check(xp.asarray([True, False]), np.array([True, False]))
    check(xp.asarray(2.5, dtype="float32"), np.float32(2.5).reshape(()))
    c = xp.asarray(t, copy=True)
    c[0] = 0
    assert t[0].item() == -1.5
    check(xp.from_dlpack(np.arange(3.0)), np.arange(3.0))


# ---- backends, fusion, existing ops -----------------------------------------------------------
def test_chain_runs_as_one_program(b):
    x = T(rand((64, 33), "float32", seed=1), b)
    y = T(rand((33,), "float32", seed=2), b)
    for k in (1, 5, 20):
        before = xp._programs_run()
        z = x
        for i in range(k):
            z = (z * y + 0.5) if i % 2 else xp.sin(z) - y
        assert xp._programs_run() == before  # nothing ran yet
        z.numpy()
        assert xp._programs_run() - before == 1, k
    before = xp._programs_run()
    s = xp.sum(xp.exp(x * 2 - 1) / 3 + x, axis=1)  # the chain is the reduction's prologue
    assert xp._programs_run() - before == 1 and s.shape == (64,)


def test_default_backend_and_mixing():
    h = parenchyma.asarray(np.arange(4.0))
    assert h.backend is None
    r = h + 1
    assert r.backend == xp.__array_namespace_info__().default_device() == h.device
    n = get_backend("native")
    try:
        o = parenchyma.Backend("opencl")
    except parenchyma.Error as e:
        pytest.skip("no second backend to mix: %s" % e)
    x = parenchyma.asarray(np.ones(3)).to(n)
    y = parenchyma.asarray(np.ones(3)).to(o)
    with pytest.raises(parenchyma.Error, match=n.name + ".*" + o.name):
        x + y
    assert x.__array_namespace__() is xp and xp.__array_api_version__ == "2024.12"


def test_existing_ops_take_views_and_expressions(b):
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = T(base, b)
    v = t[:, ::-2]  # a strided view: BLAS writes a dense copy, then back through the view
    parenchyma.blas.scal(b, 2.0, v)
    ref = base.copy()
    ref[:, ::-2] *= 2
    check(t, ref)
    e = t * 0.5 - 1  # a pending expression runs into its own tensor first
    assert parenchyma.blas.asum(b, e) == pytest.approx(np.abs(ref * 0.5 - 1).sum())
    np.testing.assert_array_equal(np.from_dlpack(t[1:]) if hasattr(np, "from_dlpack") else
                                  t[1:].numpy(), ref[1:])
    lazy = t + 1  # pending, reads t: runs before an op writes t
    parenchyma.blas.scal(b, 3.0, t)
    check(lazy, ref + 1)
    ref *= 3
    check(t, ref)
    out = T(np.zeros((4, 3), np.float32), b)
    parenchyma.nn.relu(b, t.T - 10, out[::-1])  # an expression in, a reversed view out
    check(out, np.maximum(ref.T - 10, 0)[::-1])
    w = t[::2, 1:3].numpy()  # a strided NumPy view over the base's host copy
    np.testing.assert_array_equal(w, ref[::2, 1:3])
    np.testing.assert_array_equal(np.asarray(t.T), ref.T)
    assert t.T.nbytes == ref.nbytes and t[0].size == 4
    p = t * 1  # pending: data_ptr runs it first
    assert p.data_ptr() != 0 and p.data_ptr() != t.data_ptr()
    assert t[1:].data_ptr() == t.data_ptr() + 4 * 4  # a view: its first element's address


def test_unsupported_are_clear():
    x = xp.asarray([[1.0, 2.0], [3.0, 4.0]])
    m = xp.asarray([True, False])
    for f in (lambda: x[m, 0], lambda: x[0, m], lambda: x[[0, 1], [1, 0]]):
        with pytest.raises(parenchyma.Error, match="supported") as e:
            f()
        assert e.value.code == "unsupported"
    with pytest.raises(parenchyma.Error, match="not supported") as e:
        x[xp.asarray([0, 1])] = 1.0  # a scatter
    assert e.value.code == "unsupported"
    with pytest.raises(parenchyma.Error, match="not supported") as e:
        xp.zeros(2, dtype="complex64")
    assert e.value.code == "unsupported"


# ---- random -------------------------------------------------------------------------------------
def test_random_streams(b):
    g = parenchyma.random.Generator(7)
    u = g.uniform((1000,), device=b).numpy()
    # the offset counts counters: four float32 draws each
    assert g.offset == 250 and u.dtype == np.float32 and (u >= 0).all() and (u < 1).all()
    n = g.normal((200, 50), 1.0, 2.0, dtype="float64", device=b).numpy()
    assert abs(n.mean() - 1.0) < 0.1 and abs(n.std() - 2.0) < 0.1
    k = g.randint((500,), -3, 4, device=b).numpy()
    assert k.dtype == np.int64 and k.min() == -3 and k.max() == 3
    m = g.bernoulli((4000,), 0.25, device=b).numpy()
    assert m.dtype == np.bool_ and abs(m.mean() - 0.25) < 0.03
    # a stream: two draws are one longer draw, split; the same seed replays
    h = parenchyma.random.Generator(7)
    both = h.uniform((1000,), device=b).numpy()
    np.testing.assert_array_equal(both, u)
    a1 = parenchyma.random.Generator(3).uniform(10, device=b).numpy()
    g2 = parenchyma.random.Generator(3)
    a2 = np.concatenate([g2.uniform(4, device=b).numpy(), g2.uniform(6, device=b).numpy()])
    np.testing.assert_array_equal(a1, a2)
    # a draw that ends inside a counter leaves the rest of it unused
    g3 = parenchyma.random.Generator(3)
    a3 = g3.uniform(3, device=b).numpy()
    assert g3.offset == 1
    np.testing.assert_array_equal(a3, a1[:3])
    np.testing.assert_array_equal(g3.uniform(4, device=b).numpy(), a1[4:8])
    with pytest.raises(parenchyma.Error):
        g.randint(3, 5, 5, device=b)
    with pytest.raises(parenchyma.Error):
        g.uniform(3, dtype="int32", device=b)
    p = parenchyma.random.Generator(5).permutation(1000, device=b).numpy()
    assert sorted(p.tolist()) == list(range(1000)) and p.dtype == np.int64
    x = xp.asarray(np.arange(12.0).reshape(6, 2), device=b)
    rows = parenchyma.random.Generator(5).permutation(x).numpy()
    assert sorted(rows[:, 0].tolist()) == [0, 2, 4, 6, 8, 10]


def test_random_same_values_on_every_backend():
    n = get_backend("native")
    try:
        o = parenchyma.Backend("opencl")
    except parenchyma.Error as e:
        pytest.skip("no OpenCL backend: %s" % e)
    x = parenchyma.random.Generator(11).normal((64,), device=n).numpy()
    y = parenchyma.random.Generator(11).normal((64,), device=o).numpy()
    np.testing.assert_array_equal(x, y)


# ---- every backend: a representative set (each line a few distinct programs) --------------------
def test_every_backend(every):
    b = every
    x = rand((5, 1, 4), "float32", seed=21)
    y = rand((3, 4), "float32", seed=22)
    i = rand((3, 4), "int8", seed=23, lo=-128, hi=127)
    tx, ty, ti = T(x, b), T(y, b), T(i, b)
    before = xp._programs_run()
    z = xp.exp(tx * ty - 1.0) / 3 + tx[::-1]  # broadcast, a reversed view, one fused program
    check(z, np.exp(x * y - np.float32(1)) / np.float32(3) + x[::-1], exact=False)
    assert xp._programs_run() - before == 1
    check(ti + 100, i + np.int8(100))  # wraps
    check(ti // 3, i // np.int8(3))
    check(ti.astype("float16") * 2, i.astype(np.float16) * np.float16(2))
    check(xp.where(ty > 0, ty, -1.0), np.where(y > 0, y, np.float32(-1)))
    check(xp.sum(ty, axis=0), np.sum(y, axis=0), exact=False)
    check(xp.max(ti.T, axis=1, keepdims=True), np.max(i.T, axis=1, keepdims=True))
    check(xp.argmax(ty, axis=1), np.argmax(y, axis=1))
    check(xp.mean(ti), np.mean(i, dtype=np.float64), exact=False)
    check(xp.cumulative_sum(ti, axis=1), np.cumsum(i, axis=1, dtype=np.int64))
    check(xp.argsort(ti, axis=0, descending=True), np_argsort(i, 0, True))
    check(xp.sort(ty.T), np.sort(y.T, kind="stable"))
    check(ty @ ty.T, y @ y.T, exact=False, rtol=1e-5)
    check(ti[1:, ::-2], i[1:, ::-2])
    w = T(y.copy(), b)
    w[::2, 1:] = 0.5
    ref = y.copy()
    ref[::2, 1:] = 0.5
    check(w, ref)
    check(xp.concat([ty, ty[::-1]], axis=1), np.concatenate([y, y[::-1]], axis=1))
    check(xp.take(ty, T(np.array([2, 0]), b), axis=0), y[[2, 0]])
    check(xp.arange(4, dtype="int32", device=b), np.arange(4, dtype=np.int32))
    assert float(ty[0, 0]) == float(y[0, 0]) and "Tensor(" in repr(ty)
