# The array_api functions whose result shape depends on the data (nonzero, boolean-mask indexing,
# the unique_* set functions, repeat with an array of counts) and the searches beside them
# (searchsorted, take_along_axis), differential against NumPy (the reference) on seeded random
# data of awkward sizes: empty, one element, around powers of two; NaN, -0.0, duplicates; views;
# on every backend present (conftest's `backend`: native and OpenCL).
import numpy as np
import pytest

import parenchyma
import parenchyma.array_api as xp

SIZES = [0, 1, 2, 3, 7, 16, 31, 33, 100, 1025]
FLOATS = ["float16", "float32", "float64"]


def rng(seed):
    return np.random.default_rng(seed)


def T(a, b):
    """A Tensor holding NumPy array a on backend b (bool through uint8: NumPy 1.24 exports no
    bool through DLPack)."""
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return xp.astype(T(a.astype(np.uint8), b), "bool")
    return parenchyma.asarray(np.array(a, order="C", copy=True)).to(b)


def values(shape, dtype, seed, distinct=6, specials=True):
    """Random values with many duplicates (`distinct` of them) and, for floats, NaN, -0.0 and
    +0.0 mixed in."""
    r = rng(seed)
    if dtype == "bool":
        return r.random(shape) < 0.4
    a = r.integers(-distinct // 2, distinct - distinct // 2, size=shape)
    if dtype in FLOATS:
        a = a.astype(dtype) * np.asarray(0.5, dtype)
        if specials and a.size:
            f = a.reshape(-1)
            pick = r.random(f.size)
            f[pick < 0.1] = np.nan
            f[(pick >= 0.1) & (pick < 0.2)] = -0.0
            f[(pick >= 0.2) & (pick < 0.25)] = 0.0
        return a
    return a.astype(dtype)


def same(t, ref, zeros=True):
    """t (a Tensor) equals NumPy's ref: shape, dtype and values (NaN equal to NaN; the sign of
    zeros too unless zeros=False)."""
    assert isinstance(t, parenchyma.Tensor), type(t)
    ref = np.asarray(ref)
    assert t.shape == ref.shape, (t.shape, ref.shape)
    assert t.dtype == ref.dtype.name, (t.dtype, ref.dtype.name)
    got = t.numpy()
    np.testing.assert_array_equal(got, ref)
    if zeros and ref.dtype.kind == "f":
        real = ~np.isnan(ref)
        np.testing.assert_array_equal(np.signbit(got)[real], np.signbit(ref)[real])


# ---- nonzero --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "int64", "float16",
                                   "float32", "float64"])
def test_nonzero(backend, dtype):
    shapes = [(n,) for n in SIZES] + [(3, 5), (2, 3, 4), (3, 0), (0, 4), (1, 1, 1), (4, 1, 9)]
    for k, shape in enumerate(shapes):
        a = values(shape, dtype, seed=k, distinct=3)  # about a third zeros (NaN is nonzero)
        got = xp.nonzero(T(a, backend))
        ref = np.nonzero(a)
        assert isinstance(got, tuple) and len(got) == len(ref) == a.ndim
        for g, r in zip(got, ref):
            same(g, r.astype(np.int64))


def test_nonzero_views_expressions_and_rank0(backend):
    a = values((6, 7), "float32", seed=3, distinct=3)
    t = T(a, backend)
    for view, ref in ((t.T, a.T), (t[::-2, 1::3], a[::-2, 1::3])):
        for g, r in zip(xp.nonzero(view), np.nonzero(ref)):
            same(g, r.astype(np.int64))
    for g, r in zip(xp.nonzero(t > 0), np.nonzero(a > 0)):  # a pending expression
        same(g, r.astype(np.int64))
    everything = np.ones((2, 3), np.int32)
    for g, r in zip(xp.nonzero(T(everything, backend)), np.nonzero(everything)):
        same(g, r.astype(np.int64))
    with pytest.raises(parenchyma.Error, match="zero-dimensional") as e:
        xp.nonzero(T(np.float32(1), backend))
    assert e.value.code == "invalid_argument"


# ---- boolean-mask indexing ------------------------------------------------------------------
def test_mask_getitem(backend):
    for k, shape in enumerate([(0,), (1,), (7,), (33,), (4, 5), (3, 0), (2, 3, 4), (5, 1, 2)]):
        for dtype in ("int16", "float64", "bool"):
            a = values(shape, dtype, seed=10 + k)
            t = T(a, backend)
            for depth in range(0, len(shape) + 1):  # mask of the leading `depth` dimensions
                m = rng(20 + k + depth).random(shape[:depth]) < 0.5
                same(t[T(m, backend)], a[m])
                same(t[T(m, backend), ...], a[m, ...])
            full = rng(k).random(shape) < 0.3
            same(t[T(full, backend)], a[full])
            same(t[full], a[full])  # a NumPy mask
    a = values((4, 3), "float32", seed=1)
    t = T(a, backend)
    same(t[t > 0], a[a > 0])  # a pending expression as the mask
    same(t[[True, False, True, True]], a[[True, False, True, True]])  # a list
    same(t[True], a[True])  # a 0-d mask: a new axis of length 1 or 0
    same(t[False], a[False])
    same(t[T(np.zeros(4, bool), backend), :], a[np.zeros(4, bool), :])
    same(t[::-1].T[T(a.T[:, ::-1] > 1, backend)], a[::-1].T[a.T[:, ::-1] > 1])  # on a view


def test_mask_getitem_errors(backend):
    t = T(np.arange(12.0).reshape(3, 4), backend)
    with pytest.raises(parenchyma.Error, match="does not match") as e:
        t[T(np.ones(4, bool), backend)]
    assert e.value.code == "invalid_argument"
    with pytest.raises(parenchyma.Error, match="does not match"):
        t[T(np.ones((3, 4, 1), bool), backend)]
    for key in ((slice(None), np.ones(4, bool)), (np.ones(3, bool), 1), (0, True)):
        with pytest.raises(parenchyma.Error, match="whole index") as e:
            t[key]
        assert e.value.code == "unsupported"


def test_mask_setitem(backend):
    for k, shape in enumerate([(1,), (7,), (33,), (4, 5), (2, 3, 4), (3, 0)]):
        for depth in range(1, len(shape) + 1):
            a = values(shape, "float32", seed=30 + k, specials=False)
            m = rng(40 + k + depth).random(shape[:depth]) < 0.5
            rest = shape[depth:]
            cases = [2.5, np.float32(-1), np.arange(np.prod(rest), dtype=np.float32).reshape(rest)]
            if rest:
                cases.append(np.full((1,) + rest[-1:], 7, np.float32))  # broadcasts
            cases.append(np.arange(m.sum() * np.prod(rest), dtype=np.float32)
                         .reshape((int(m.sum()),) + rest))  # one value per selected element
            for v in cases:
                ref = a.copy()
                ref[m] = v
                t = T(a, backend)
                t[T(m, backend)] = v if np.ndim(v) == 0 else T(v, backend)
                same(t, ref)
    # the dtype of the tensor is kept: values are cast (floats to ints truncate)
    a = np.arange(-4, 8, dtype=np.int8).reshape(3, 4)
    t = T(a, backend)
    t[t < 0] = 2.75
    ref = a.copy()
    ref[ref < 0] = 2
    same(t, ref)
    t[T(ref > 5, backend)] = T(np.array([-1.9, 100.2]), backend)
    ref[ref > 5] = np.array([-1, 100], np.int8)
    same(t, ref)
    b = T(np.array([True, False, True]), backend)
    b[b] = False
    same(b, np.zeros(3, bool))
    # through a view: the base sees the write
    base = np.arange(20.0).reshape(4, 5)
    t = T(base, backend)
    v = t[1:, ::-2]
    v[v > 10] = 0.0
    ref = base.copy()
    rv = ref[1:, ::-2]
    rv[rv > 10] = 0.0
    same(t, ref)
    t[True] = -3.0  # a 0-d mask
    same(t, np.full((4, 5), -3.0))
    t[False] = 9.0
    same(t, np.full((4, 5), -3.0))


def test_mask_setitem_errors(backend):
    t = T(np.arange(6.0), backend)
    m = T(np.array([1, 0, 1, 0, 0, 1], bool), backend)
    with pytest.raises(parenchyma.Error, match="3 selected"):
        t[m] = T(np.arange(4.0), backend)
    with pytest.raises(parenchyma.Error, match="does not broadcast"):
        t[m] = T(np.ones((3, 2)), backend)
    t2 = T(np.zeros((2, 3)), backend)
    with pytest.raises(parenchyma.Error, match="does not broadcast"):
        t2[T(np.array([True, False]), backend)] = T(np.ones(2), backend)
    with pytest.raises(parenchyma.Error, match="integer-array"):
        t[T(np.array([0, 2]), backend)] = 1.0
    same(t, np.arange(6.0))  # nothing was written


# ---- unique_* ------------------------------------------------------------------------------
def np_unique(a):
    """NumPy's unique with the standard's rules (NaNs distinct), inverse in a's shape."""
    v, i, inv, c = np.unique(a.reshape(-1), return_index=True, return_inverse=True,
                             return_counts=True, equal_nan=False)
    return v, i.astype(np.int64), inv.reshape(a.shape).astype(np.int64), c.astype(np.int64)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "int64", "float16",
                                   "float32", "float64"])
def test_unique(backend, dtype):
    shapes = [(n,) for n in SIZES] + [(), (3, 5), (2, 0), (4, 1, 6)]
    for k, shape in enumerate(shapes):
        for distinct in (3, 50):
            a = values(shape, dtype, seed=100 * k + distinct, distinct=distinct)
            t = T(a, backend)
            v, i, inv, c = np_unique(a)
            # which zero stands for {-0.0, +0.0} is the first in x's order (the sort is stable)
            r = xp.unique_all(t)
            assert type(r).__name__ == "UniqueAllResult" and r._fields == (
                "values", "indices", "inverse_indices", "counts")
            same(r.values, v, zeros=False)
            same(r.indices, i)
            same(r.inverse_indices, inv)
            same(r.counts, c)
            if a.size and dtype in FLOATS:  # the value is x's element at its first index
                same(r.values, a.reshape(-1)[i])
            same(xp.unique_values(t), v, zeros=False)
            uc = xp.unique_counts(t)
            same(uc.values, v, zeros=False)
            same(uc.counts, c)
            ui = xp.unique_inverse(t)
            same(ui.values, v, zeros=False)
            same(ui.inverse_indices, inv)
            if a.size:  # values[inverse] is x, NaNs included
                np.testing.assert_array_equal(ui.values.numpy()[ui.inverse_indices.numpy()], a)


def test_unique_nan_each_distinct(backend):
    a = np.array([np.nan, 1.0, np.nan, -0.0, 0.0, np.nan, 1.0], np.float32)
    r = xp.unique_all(T(a, backend))
    np.testing.assert_array_equal(r.values.numpy(), [0.0, 1.0, np.nan, np.nan, np.nan])
    assert np.signbit(r.values.numpy()[0])  # -0.0 came first
    same(r.indices, np.array([3, 1, 0, 2, 5]))
    same(r.inverse_indices, np.array([2, 1, 3, 0, 0, 4, 1]))
    same(r.counts, np.array([2, 2, 1, 1, 1]))
    v = xp.unique_values(T(a, backend)[::-1])  # a view
    np.testing.assert_array_equal(v.numpy(), [0.0, 1.0, np.nan, np.nan, np.nan])


# ---- searchsorted -------------------------------------------------------------------------
def test_searchsorted(backend):
    for k, n in enumerate(SIZES):
        for dtype in ("int32", "int64", "uint8", "float32", "float64", "float16"):
            x1 = np.sort(values((n,), dtype, seed=200 + k, distinct=9))  # NaN last, as sort()
            x2 = values((3, 7), dtype, seed=300 + k, distinct=12)
            t1, t2 = T(x1, backend), T(x2, backend)
            for side in ("left", "right"):
                same(xp.searchsorted(t1, t2, side=side),
                     np.searchsorted(x1, x2, side=side).astype(np.int64))
    x1 = np.array([-1.0, -0.0, 0.0, 0.0, 2.0, np.nan, np.nan])
    for x2 in (np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 2.0]), np.array(0.0),
               np.zeros((0, 2))):
        for side in ("left", "right"):
            same(xp.searchsorted(T(x1, backend), T(x2, backend), side=side),
                 np.searchsorted(x1, x2, side=side).astype(np.int64))
    same(xp.searchsorted(T(x1, backend), 0.0), np.int64(np.searchsorted(x1, 0.0)))
    i8 = np.array([-100, 0, 100], np.int8)
    for v in (1000, -1000, 0, 100, 2.5):  # Python scalars: weak, and never wrapped
        for side in ("left", "right"):
            same(xp.searchsorted(T(i8, backend), v, side=side),
                 np.int64(np.searchsorted(i8.astype(np.float64), v, side=side)))
    f32 = np.array([0.1, 0.2], np.float32)  # a float scalar takes x1's dtype (NumPy 2)
    same(xp.searchsorted(T(f32, backend), 0.1, side="right"), np.int64(1))
    b1 = np.array([False, False, True])
    same(xp.searchsorted(T(b1, backend), T(np.array([True, False]), backend), side="right"),
         np.array([3, 2], np.int64))


def test_searchsorted_sorter_views_and_mixed_dtypes(backend):
    r = rng(5)
    x1 = r.integers(-50, 50, 200).astype(np.int16)
    x2 = r.integers(-60, 60, (4, 9)).astype(np.int16)
    order = np.argsort(x1, kind="stable")
    for side in ("left", "right"):
        same(xp.searchsorted(T(x1, backend), T(x2, backend), side=side,
                             sorter=T(order, backend)),
             np.searchsorted(x1, x2, side=side, sorter=order).astype(np.int64))
    s = np.sort(x1)
    same(xp.searchsorted(T(s[::-1].copy(), backend)[::-1], T(x2, backend).T),
         np.searchsorted(s, x2.T).astype(np.int64))  # a reversed view of a reversed copy
    f = x2.astype(np.float64) + 0.5
    same(xp.searchsorted(T(s, backend), T(f, backend)), np.searchsorted(s, f).astype(np.int64))
    fs = np.concatenate([np.sort(f.reshape(-1)), [np.nan, np.nan]])  # float x1, integer x2
    for side in ("left", "right"):
        same(xp.searchsorted(T(fs, backend), T(x2, backend), side=side),
             np.searchsorted(fs, x2, side=side).astype(np.int64))
    with pytest.raises(parenchyma.Error, match="1-d"):
        xp.searchsorted(T(np.zeros((2, 2)), backend), T(np.zeros(2), backend))
    with pytest.raises(parenchyma.Error, match="side"):
        xp.searchsorted(T(s, backend), T(x2, backend), side="middle")


# ---- take_along_axis ---------------------------------------------------------------------
def test_take_along_axis(backend):
    r = rng(7)
    for k, shape in enumerate([(1,), (9,), (4, 7), (3, 1, 5), (2, 6, 3), (5, 0), (0, 3)]):
        a = values(shape, "float32", seed=400 + k)
        t = T(a, backend)
        for axis in range(-len(shape), len(shape)):
            n = shape[axis]
            order = np.argsort(a, axis=axis, kind="stable")
            same(xp.take_along_axis(t, T(order, backend), axis=axis),
                 np.take_along_axis(a, order, axis=axis))
            # other lengths along the axis, negative indices, broadcasting the other axes
            ishape = list(shape)
            ishape[axis] = 3
            for d in range(len(shape)):
                if d != axis % len(shape) and shape[d] > 1 and r.random() < 0.5:
                    ishape[d] = 1
            if n == 0 and np.prod(ishape) > 0:
                continue
            idx = r.integers(-n, max(n, 1), size=ishape) if n else np.zeros(ishape, np.int64)
            same(xp.take_along_axis(t, T(idx, backend), axis=axis),
                 np.take_along_axis(a, idx, axis=axis))
    # x broadcast against the indices; int32 indices; a transposed view
    a = values((1, 6), "int32", seed=9)
    idx = r.integers(0, 6, (4, 2)).astype(np.int32)
    same(xp.take_along_axis(T(a, backend), T(idx, backend), axis=1),
         np.take_along_axis(np.broadcast_to(a, (4, 6)), idx, axis=1))
    b = values((5, 4), "float64", seed=11)
    idx = r.integers(0, 5, (2, 4))
    same(xp.take_along_axis(T(b, backend).T, T(idx.T.copy(), backend), axis=-1),
         np.take_along_axis(b.T, idx.T, axis=-1))
    with pytest.raises(parenchyma.Error, match="dimensions"):
        xp.take_along_axis(T(b, backend), T(np.zeros(4, np.int64), backend), axis=0)
    with pytest.raises(parenchyma.Error, match="integers"):
        xp.take_along_axis(T(b, backend), T(np.zeros((1, 4)), backend), axis=0)


def test_take_along_axis_clips_like_take(backend):
    a = np.arange(12.0).reshape(3, 4)
    idx = np.array([[9], [-9], [3]])
    same(xp.take_along_axis(T(a, backend), T(idx, backend), axis=1),
         np.take_along_axis(a, np.clip(idx, -4, 3), axis=1))


# ---- repeat with an array ------------------------------------------------------------------
def test_repeat_array(backend):
    r = rng(13)
    for k, shape in enumerate([(0,), (1,), (5,), (33,), (3, 4), (2, 0), (2, 3, 5)]):
        a = values(shape, "float64", seed=500 + k)
        t = T(a, backend)
        for axis in [None] + list(range(-len(shape), len(shape))):
            n = a.size if axis is None else shape[axis]
            reps = r.integers(0, 4, n)
            same(xp.repeat(t, T(reps, backend), axis=axis), np.repeat(a, reps, axis=axis))
            same(xp.repeat(t, list(reps), axis=axis), np.repeat(a, reps, axis=axis))
            one = np.array([2])
            same(xp.repeat(t, T(one, backend), axis=axis), np.repeat(a, one, axis=axis))
            same(xp.repeat(t, 3, axis=axis), np.repeat(a, 3, axis=axis))
    a = np.arange(6, dtype=np.int8)
    same(xp.repeat(T(a, backend), T(np.zeros(6, np.int32), backend)), np.zeros(0, np.int8))
    same(xp.repeat(T(a, backend)[::-2], T(np.array([1, 0, 5]), backend)),
         np.repeat(a[::-2], [1, 0, 5]))
    with pytest.raises(parenchyma.Error, match=">= 0"):
        xp.repeat(T(a, backend), T(np.array([1, -1, 1, 1, 1, 1]), backend))
    with pytest.raises(parenchyma.Error, match="counts for an axis"):
        xp.repeat(T(a, backend), T(np.array([1, 2]), backend))
    with pytest.raises(parenchyma.Error, match="integers"):
        xp.repeat(T(a, backend), T(np.ones(6), backend))


def test_bfloat16(backend):
    # no NumPy bfloat16: compared through float32, with values bfloat16 holds exactly
    a = values((50,), "float32", seed=3)
    t = xp.astype(T(a, backend), "bfloat16")
    v, i, inv, c = np_unique(a)
    r = xp.unique_all(t)
    assert r.values.dtype == "bfloat16"
    same(xp.astype(r.values, "float32"), v, zeros=False)
    same(r.indices, i)
    same(r.inverse_indices, inv)
    same(r.counts, c)
    s = np.sort(a)
    same(xp.searchsorted(xp.astype(T(s, backend), "bfloat16"), t, side="right"),
         np.searchsorted(s, a, side="right").astype(np.int64))
    m = a > 0
    same(xp.astype(t[T(m, backend)], "float32"), a[m])
    for g, ref in zip(xp.nonzero(t), np.nonzero(a)):
        same(g, ref.astype(np.int64))


def test_capabilities():
    caps = xp.__array_namespace_info__().capabilities()
    assert caps["boolean indexing"] is True and caps["data-dependent shapes"] is True
