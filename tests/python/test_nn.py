# parenchyma.nn against NumPy float64 references on small awkward shapes, native and OpenCL:
# every op family once, gradients included, and argument errors naming the argument.
import numpy as np
import pytest

import parenchyma
from parenchyma import nn


def rand(shape, dtype="float32", seed=0, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def tensor(a):
    return parenchyma.from_dlpack(np.array(a, copy=True))


def tol(dtype):
    return 2e-5 if dtype == "float32" else 1e-12


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_activations(backend, dtype):
    x = rand(1031, dtype, 1, -4, 4)
    x[:3] = [0.0, -0.0, 3.5]
    xd = x.astype(np.float64)
    refs = {
        "sigmoid": (1 / (1 + np.exp(-xd)), lambda y: y * (1 - y)),
        "relu": (np.maximum(xd, 0), lambda y: (y > 0).astype(np.float64)),
        "tanh": (np.tanh(xd), lambda y: 1 - y * y),
        "elu": (np.where(xd > 0, xd, np.expm1(xd)), lambda y: np.where(y > 0, 1.0, y + 1.0)),
    }
    dy = rand(1031, dtype, 2)
    for name, (ref, deriv) in refs.items():
        y = tensor(np.zeros_like(x))
        getattr(nn, name)(backend, tensor(x), y)
        got = y.numpy().astype(np.float64)
        np.testing.assert_allclose(got, ref, rtol=tol(dtype) * 10, atol=tol(dtype))
        dx = tensor(np.zeros_like(x))
        getattr(nn, name + "_grad")(backend, y, tensor(dy), dx)
        np.testing.assert_allclose(dx.numpy(), dy * deriv(got), rtol=tol(dtype) * 10,
                                   atol=tol(dtype))
        t = tensor(x)
        getattr(nn, name + "_pointwise")(backend, t)
        np.testing.assert_allclose(t.numpy(), got, rtol=0, atol=0)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax(backend, axis):
    x = rand((3, 7, 5), "float64", 3, -30, 30)
    y = tensor(np.zeros_like(x))
    nn.softmax(backend, tensor(x), y, axis)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    ref = e / e.sum(axis=axis, keepdims=True)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-15)
    ly = tensor(np.zeros_like(x))
    nn.log_softmax(backend, tensor(x), ly, axis)
    np.testing.assert_allclose(ly.numpy(), np.log(ref), rtol=1e-12, atol=1e-12)
    dy = rand(x.shape, "float64", 4)
    dx = tensor(np.zeros_like(x))
    nn.softmax_grad(backend, y, tensor(dy), dx, axis)
    ref_dx = ref * (dy - (dy * ref).sum(axis=axis, keepdims=True))
    np.testing.assert_allclose(dx.numpy(), ref_dx, rtol=1e-10, atol=1e-13)


def conv_ref(x, w, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    p = (h + 2 * pad[0] - dil[0] * (r - 1) - 1) // stride[0] + 1
    q = (wd + 2 * pad[1] - dil[1] * (s - 1) - 1) // stride[1] + 1
    xp = np.zeros((n, c, h + 2 * pad[0], wd + 2 * pad[1]))
    xp[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + wd] = x
    y = np.zeros((n, k, p, q))
    kg = k // groups
    for g in range(groups):
        for i in range(r):
            for j in range(s):
                patch = xp[:, g * cg:(g + 1) * cg,
                           i * dil[0]:i * dil[0] + stride[0] * (p - 1) + 1:stride[0],
                           j * dil[1]:j * dil[1] + stride[1] * (q - 1) + 1:stride[1]]
                y[:, g * kg:(g + 1) * kg] += np.einsum("ncpq,kc->nkpq", patch,
                                                       w[g * kg:(g + 1) * kg, :, i, j])
    return y


@pytest.mark.parametrize("stride,pad,dil,groups", [((1, 1), (1, 1), (1, 1), 1),
                                                   ((2, 1), (0, 2), (1, 2), 2)])
def test_convolution(backend, stride, pad, dil, groups):
    x = rand((2, 4, 9, 7), "float64", 5)
    w = rand((6, 4 // groups, 3, 2), "float64", 6)
    bias = rand(6, "float64", 7)
    conv = nn.Convolution(backend, x.shape, w.shape, stride=stride, padding=pad, dilation=dil,
                          groups=groups, dtype="float64")
    ref = conv_ref(x, w, stride, pad, dil, groups)
    assert conv.y_shape == ref.shape
    y = tensor(np.zeros(ref.shape))
    conv.forward(tensor(x), tensor(w), y, bias=tensor(bias))
    np.testing.assert_allclose(y.numpy(), ref + bias[None, :, None, None], rtol=1e-11, atol=1e-12)
    # Gradients against finite differences of sum(y * dy) in float64.
    dy = rand(ref.shape, "float64", 8)
    dx, dw, db = (tensor(np.zeros(s)) for s in (x.shape, w.shape, (6,)))
    conv.grad_data(tensor(w), tensor(dy), dx)
    conv.grad_filter(tensor(x), tensor(dy), dw)
    conv.grad_bias(tensor(dy), db)
    np.testing.assert_allclose(db.numpy(), dy.sum(axis=(0, 2, 3)), rtol=1e-12, atol=1e-12)
    h = 1e-6
    for idx in [(0, 0, 0, 0), (1, 3, 4, 6), (0, 2, 8, 3)]:
        xp = x.copy()
        xp[idx] += h
        fd = ((conv_ref(xp, w, stride, pad, dil, groups) - ref) * dy).sum() / h
        assert dx.numpy()[idx] == pytest.approx(fd, rel=1e-4, abs=1e-6)
    for idx in [(0, 0, 0, 0), (5, 1, 2, 1)]:
        wp = w.copy()
        wp[idx] += h
        fd = ((conv_ref(x, wp, stride, pad, dil, groups) - ref) * dy).sum() / h
        assert dw.numpy()[idx] == pytest.approx(fd, rel=1e-4, abs=1e-6)


def test_pooling(backend):
    x = rand((2, 3, 7, 8), "float32", 9)
    shape = nn.pooling_output_shape(x.shape, window=3, stride=2, padding=1)
    assert shape == (2, 3, 4, 4)
    y = tensor(np.zeros(shape, "float32"))
    idx = tensor(np.zeros(shape, "int32"))
    nn.pooling_max(backend, tensor(x), y, idx, window=3, stride=2, padding=1)
    xp = np.full((2, 3, 9, 10), -np.inf, "float32")
    xp[:, :, 1:8, 1:9] = x
    ref = np.zeros(shape, "float32")
    for p in range(4):
        for q in range(4):
            ref[:, :, p, q] = xp[:, :, 2 * p:2 * p + 3, 2 * q:2 * q + 3].max(axis=(2, 3))
    np.testing.assert_array_equal(y.numpy(), ref)
    flat = x.reshape(2, 3, -1)
    got = np.take_along_axis(flat, idx.numpy().reshape(2, 3, -1).astype(np.int64), axis=2)
    np.testing.assert_array_equal(got.reshape(shape), ref)
    a = tensor(np.zeros((2, 3, 3, 4), "float32"))
    nn.pooling_avg(backend, tensor(x), a)
    ref_a = x[:, :, :6, :8].reshape(2, 3, 3, 2, 4, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(a.numpy(), ref_a, rtol=1e-6, atol=1e-7)


def test_lrn_and_dropout(backend):
    x = rand((2, 6, 3, 4), "float64", 10)
    y = tensor(np.zeros_like(x))
    nn.lrn(backend, tensor(x), y, n=3, alpha=0.1, beta=0.75, k=2.0)
    sq = np.pad(x * x, ((0, 0), (1, 1), (0, 0), (0, 0)))
    s = 2.0 + 0.1 / 3 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:])
    np.testing.assert_allclose(y.numpy(), x * s ** -0.75, rtol=1e-12)
    d = rand(10007, "float32", 11)
    out = tensor(np.zeros_like(d))
    mask = tensor(np.zeros(d.shape, "uint8"))
    nn.dropout(backend, tensor(d), out, mask, 0.25, 1234)
    m = mask.numpy()
    assert 0.2 < 1 - m.mean() < 0.3
    np.testing.assert_allclose(out.numpy(), np.where(m != 0, d / np.float32(0.75), 0), rtol=1e-6)


def test_layer_norm_and_rms_norm_against_numpy(backend):
    x = rand((6, 5, 37), "float64", 12) * 3 + 100  # far from zero: cancellation
    w = rand((5, 37), "float64", 13) + 1
    b = rand((5, 37), "float64", 14)
    dy = rand((6, 5, 37), "float64", 15)
    rows = x.reshape(6, -1)
    mu = rows.mean(axis=1, keepdims=True)
    var = ((rows - mu) ** 2).mean(axis=1, keepdims=True)
    rs = 1 / np.sqrt(var + 1e-5)
    xh = (rows - mu) * rs
    ref = (xh * w.reshape(1, -1) + b.reshape(1, -1)).reshape(x.shape)
    y = tensor(np.zeros_like(x))
    mean = tensor(np.zeros(6))
    rstd = tensor(np.zeros(6))
    nn.layer_norm(backend, tensor(x), tensor(w), tensor(b), y, mean, rstd, axis=1)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(mean.numpy(), mu[:, 0], rtol=1e-12)
    np.testing.assert_allclose(rstd.numpy(), rs[:, 0], rtol=1e-9)
    y2 = tensor(np.zeros_like(x))
    nn.layer_norm(backend, tensor(x), tensor(w), tensor(b), y2, axis=1)  # nothing saved
    np.testing.assert_allclose(y2.numpy(), ref, rtol=1e-9, atol=1e-9)
    # the gradients: dx from the formula, dweight and dbias summed over the rows
    g = dy.reshape(6, -1) * w.reshape(1, -1)
    dx_ref = rs * (g - g.mean(axis=1, keepdims=True) - xh * (g * xh).mean(axis=1, keepdims=True))
    dx, dw, db = (tensor(np.zeros_like(x)), tensor(np.zeros_like(w)), tensor(np.zeros_like(w)))
    nn.layer_norm_grad(backend, tensor(x), tensor(w), mean, rstd, tensor(dy), dx, dw, db, axis=1)
    np.testing.assert_allclose(dx.numpy(), dx_ref.reshape(x.shape), rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(dw.numpy(), (dy.reshape(6, -1) * xh).sum(0).reshape(w.shape),
                               rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(db.numpy(), dy.sum(axis=0), rtol=1e-10, atol=1e-12)
    # rms_norm along the last axis, float32 (statistics float32)
    x32 = rand((9, 130), "float32", 16)
    w32 = rand(130, "float32", 17)
    rr = 1 / np.sqrt((x32.astype("float64") ** 2).mean(axis=1, keepdims=True) + 1e-6)
    y32 = tensor(np.zeros_like(x32))
    r32 = tensor(np.zeros(9, "float32"))
    nn.rms_norm(backend, tensor(x32), tensor(w32), y32, r32)
    np.testing.assert_allclose(y32.numpy(), x32 * rr * w32, rtol=2e-5, atol=2e-6)
    dy32 = rand((9, 130), "float32", 18)
    dx32, dw32 = tensor(np.zeros_like(x32)), tensor(np.zeros_like(w32))
    nn.rms_norm_grad(backend, tensor(x32), tensor(w32), r32, tensor(dy32), dx32, dw32)
    xh32 = x32 * r32.numpy()[:, None].astype("float64")
    g32 = dy32 * w32.astype("float64")
    ref_dx = r32.numpy()[:, None] * (g32 - xh32 * (g32 * xh32).mean(axis=1, keepdims=True))
    np.testing.assert_allclose(dx32.numpy(), ref_dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw32.numpy(), (dy32 * xh32).sum(0), rtol=1e-4, atol=1e-5)
    with pytest.raises(parenchyma.Error) as e:  # statistics of the wrong dtype
        nn.rms_norm(backend, tensor(x32), tensor(w32), y32, tensor(np.zeros(9)))
    assert e.value.origin == "nn.rms_norm" and "argument rstd" in str(e.value)


def xent_numpy(x, t, ignore, s, reduction):
    """cross_entropy and its gradient (for dloss = 1 / per-row ones) in float64 NumPy."""
    rows, c = x.reshape(-1, x.shape[-1]).shape
    xr = x.reshape(rows, c).astype("float64")
    m = xr.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(xr - m).sum(axis=1, keepdims=True)))[:, 0]
    keep = t.reshape(-1) != ignore
    tt = np.where(keep, t.reshape(-1), 0)
    per = (1 - s) * (lse - xr[np.arange(rows), tt]) + s * (lse - xr.mean(axis=1))
    per = np.where(keep, per, 0.0)
    loss = {"none": per, "mean": per.sum() / keep.sum(), "sum": per.sum()}[reduction]
    onehot = np.zeros_like(xr)
    onehot[np.arange(rows), tt] = 1
    g = np.exp(xr - lse[:, None]) - (1 - s) * onehot - s / c
    return loss, lse, np.where(keep[:, None], g, 0.0), keep


def test_cross_entropy_against_numpy(backend):
    for dtype, tol in (("float64", 1e-10), ("float32", 2e-5)):
        stat = "float64" if dtype == "float64" else "float32"
        x = rand((3, 4, 11), dtype, 21, -4, 4) + np.asarray(50, dtype)  # far from zero
        t = np.random.default_rng(22).integers(0, 11, (3, 4)).astype("int32")
        t[0, 1] = t[2, 3] = 5 if dtype == "float32" else -100
        ignore = 5 if dtype == "float32" else -100
        for s in (0.0, 0.1):
            for red in ("none", "mean", "sum"):
                ref, lse_ref, g, keep = xent_numpy(x, t, ignore, s, red)
                loss = tensor(np.zeros((3, 4) if red == "none" else (1,), dtype))
                lse = tensor(np.zeros(12, stat))
                nn.cross_entropy(backend, tensor(x), tensor(t), loss, lse, ignore_index=ignore,
                                 label_smoothing=s, reduction=red)
                np.testing.assert_allclose(loss.numpy().reshape(np.shape(ref)), ref, rtol=tol,
                                           atol=tol)
                np.testing.assert_allclose(lse.numpy(), lse_ref, rtol=tol)
                loss2 = tensor(np.zeros((3, 4) if red == "none" else (1,), dtype))
                nn.cross_entropy(backend, tensor(x), tensor(t), loss2, ignore_index=ignore,
                                 label_smoothing=s, reduction=red)  # lse not saved
                np.testing.assert_allclose(loss2.numpy(), loss.numpy(), rtol=tol, atol=tol)
                dl = rand((3, 4) if red == "none" else (1,), dtype, 23, 0.5, 2)
                scale = dl.reshape(-1, 1).astype("float64")
                if red == "mean":
                    scale = scale / keep.sum()
                dx = tensor(np.zeros_like(x))
                nn.cross_entropy_grad(backend, tensor(x), tensor(t), lse, tensor(dl), dx,
                                      ignore_index=ignore, label_smoothing=s, reduction=red)
                np.testing.assert_allclose(dx.numpy().reshape(12, 11), g * scale, rtol=tol * 10,
                                           atol=tol)
    x = tensor(rand((4, 3)))
    t = tensor(np.zeros(4, "int32"))
    with pytest.raises(parenchyma.Error) as e:
        nn.cross_entropy(backend, x, t, tensor(np.zeros(1, "float32")), reduction="avg")
    assert e.value.code == "invalid_argument" and e.value.origin == "nn.cross_entropy"
    assert "argument reduction" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        nn.cross_entropy(backend, x, t, tensor(np.zeros(1, "float32")), label_smoothing=2.0)
    assert e.value.origin == "nn.cross_entropy" and "argument label_smoothing" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:  # int64 labels
        nn.cross_entropy(backend, x, tensor(np.zeros(4, "int64")), tensor(np.zeros(1, "float32")))
    assert e.value.origin == "nn.cross_entropy" and "argument labels" in str(e.value)


def embedding_grad_numpy(idx, dy, v, d, padding_idx, dtype):
    """dweight summed in position order in the compute dtype (float32 / float64), as pcy_nn.h
    specifies its bits, and the float64 sum."""
    acc = np.zeros((v, d), "float64" if dtype == "float64" else "float32")
    ref = np.zeros((v, d), "float64")
    flat = idx.reshape(-1)
    rows = dy.reshape(-1, d)
    for i, k in enumerate(flat):
        if 0 <= k < v and k != padding_idx:
            acc[k] += rows[i].astype(acc.dtype)
            ref[k] += rows[i]
    return acc.astype(dtype), ref


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_against_numpy(backend, dtype):
    v, d = 7, 5
    w = rand((v, d), dtype, 31, -2, 2)
    idx = np.random.default_rng(32).integers(0, v, (9, 61)).astype("int32")  # many repeats
    idx[0, 0], idx[3, 7], idx[8, 60] = v, -1, 2**31 - 1  # outside the table: NaN rows
    for padding_idx in (-1, 2):
        y = nn.embedding(backend, tensor(w), tensor(idx), padding_idx=padding_idx)
        got = y.numpy()
        assert got.shape == (9, 61, d) and got.dtype == np.dtype(dtype)
        ok = (idx >= 0) & (idx < v)
        np.testing.assert_array_equal(got[ok], w[idx[ok]])  # padding_idx's row too
        assert np.isnan(got[~ok]).all()
        out = tensor(np.zeros((9, 61, d), dtype))
        assert nn.embedding(backend, tensor(w), tensor(idx), out) is out
        np.testing.assert_array_equal(out.numpy()[ok], w[idx[ok]])
        # The gradient: magnitudes 2^-8 .. 2^6, so the order of the additions shows in the bits.
        g = np.random.default_rng(33)
        dy = (g.uniform(-1, 1, (9, 61, d)) * 2.0 ** g.integers(-8, 7, (9, 61, d))).astype(dtype)
        exact, ref = embedding_grad_numpy(idx, dy, v, d, padding_idx, dtype)
        dw = nn.embedding_grad(backend, tensor(idx), tensor(dy), v, padding_idx=padding_idx)
        np.testing.assert_allclose(dw.numpy(), ref, rtol=tol(dtype) * 10, atol=tol(dtype))
        np.testing.assert_array_equal(dw.numpy(), exact)  # bit for bit, position order
        if padding_idx >= 0:
            assert (dw.numpy()[padding_idx] == 0).all()
        into = tensor(np.full((v, d), np.nan, dtype))  # overwritten, not accumulated
        assert nn.embedding_grad(backend, tensor(idx), tensor(dy), into,
                                 padding_idx=padding_idx) is into
        np.testing.assert_array_equal(into.numpy(), exact)
    # Rows never indexed are 0; a scalar index; no indices at all.
    dw = nn.embedding_grad(backend, tensor(np.array([1, 1], "int32")), tensor(np.ones((2, 3), dtype)),
                           4)
    np.testing.assert_array_equal(dw.numpy(), [[0] * 3, [2] * 3, [0] * 3, [0] * 3])
    y = nn.embedding(backend, tensor(w), tensor(np.array(3, "int32")))
    np.testing.assert_array_equal(y.numpy(), w[3])
    y = nn.embedding(backend, tensor(w), tensor(np.zeros((0,), "int32")))
    assert y.numpy().shape == (0, d)
    dw = nn.embedding_grad(backend, tensor(np.zeros((0,), "int32")), tensor(np.zeros((0, d), dtype)),
                           v)
    np.testing.assert_array_equal(dw.numpy(), np.zeros((v, d), dtype))


def test_embedding_errors(native):
    w = tensor(rand((4, 3)))
    with pytest.raises(parenchyma.Error) as e:  # int64 indices
        nn.embedding(native, w, tensor(np.zeros(2, "int64")))
    assert e.value.code == "invalid_argument" and e.value.origin == "nn.embedding"
    assert "argument indices" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        nn.embedding(native, w, tensor(np.zeros(2, "int32")), padding_idx=4)
    assert e.value.origin == "nn.embedding" and "argument padding_idx" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        nn.embedding(native, w, tensor(np.zeros(2, "int32")), tensor(np.zeros((2, 4), "float32")))
    assert e.value.origin == "nn.embedding" and "argument y" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        nn.embedding_grad(native, tensor(np.zeros(2, "int32")), tensor(np.zeros((2, 3), "float32")),
                          tensor(np.zeros((4, 2), "float32")))
    assert e.value.origin == "nn.embedding_grad" and "argument dy" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        nn.embedding_grad(native, tensor(np.zeros(2, "int32")), tensor(np.zeros((2, 3), "float32")),
                          -1)
    assert e.value.origin == "nn.embedding_grad" and "argument num_embeddings" in str(e.value)


def bn_numpy(x, w, b, rm, rv, training, momentum, eps):
    """batch_norm in float64 NumPy: y, the statistics used, the running statistics after."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    xd = x.astype("float64")
    if training:
        m = xd.size // x.shape[1]
        mu = xd.mean(axis=axes)
        var = ((xd - mu.reshape(shape)) ** 2).mean(axis=axes)
        rm = (1 - momentum) * rm + momentum * mu
        rv = (1 - momentum) * rv + momentum * var * m / (m - 1)
    else:
        mu, var = rm.astype("float64"), rv.astype("float64")
    rs = 1 / np.sqrt(var + eps)
    y = (xd - mu.reshape(shape)) * rs.reshape(shape) * w.reshape(shape) + b.reshape(shape)
    return y, mu, rs, rm, rv


def bn_grad_numpy(x, w, mu, rs, dy, training):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    xh = (x.astype("float64") - mu.reshape(shape)) * rs.reshape(shape)
    g = dy * w.reshape(shape)
    if training:
        dx = rs.reshape(shape) * (g - g.mean(axis=axes, keepdims=True)
                                  - xh * (g * xh).mean(axis=axes, keepdims=True))
    else:
        dx = rs.reshape(shape) * g
    return dx, (dy * xh).sum(axis=axes), dy.sum(axis=axes)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_against_numpy(backend, dtype):
    tol = 1e-10 if dtype == "float64" else 2e-4
    stat = dtype
    for shape, training, offset in (((4, 3, 5, 7), True, 0.0), ((6, 5, 11), True, 100.0),
                                    ((3, 4), True, 0.0), ((4, 3, 5, 7), False, 0.0)):
        c = shape[1]
        x = rand(shape, dtype, 31, -2, 2) + np.asarray(offset, dtype)  # offset: cancellation
        w = rand(c, dtype, 32) + np.asarray(1, dtype)
        b = rand(c, dtype, 33)
        rm0 = rand(c, stat, 34, -0.5, 0.5)
        rv0 = rand(c, stat, 35, 0.5, 1.5)
        dy = rand(shape, dtype, 36)
        y_ref, mu, rs, rm_ref, rv_ref = bn_numpy(x, w, b, rm0, rv0, training, 0.2, 1e-5)
        y = tensor(np.zeros_like(x))
        rm, rv = tensor(rm0), tensor(rv0)
        sm, sr = tensor(np.zeros(c, stat)), tensor(np.zeros(c, stat))
        out = nn.batch_norm(backend, tensor(x), tensor(w), tensor(b), y, rm, rv, sm, sr,
                            training=training, momentum=0.2)
        assert out[0] is y and out[1] is sm and out[2] is sr
        scale = 1 + abs(offset)
        np.testing.assert_allclose(y.numpy(), y_ref, rtol=tol * scale, atol=tol * scale)
        np.testing.assert_allclose(sm.numpy(), mu, rtol=tol, atol=tol * scale)
        np.testing.assert_allclose(sr.numpy(), rs, rtol=tol * scale)
        np.testing.assert_allclose(rm.numpy(), rm_ref, rtol=tol, atol=tol * scale)
        np.testing.assert_allclose(rv.numpy(), rv_ref, rtol=tol * scale)
        if training:  # without running or saved statistics: the same y
            y2 = tensor(np.zeros_like(x))
            nn.batch_norm(backend, tensor(x), tensor(w), tensor(b), y2, training=True)
            np.testing.assert_allclose(y2.numpy(), y.numpy(), rtol=0, atol=0)
        # the gradients from the saved statistics (as stored)
        smv, srv = sm.numpy().astype("float64"), sr.numpy().astype("float64")
        dx_ref, dw_ref, db_ref = bn_grad_numpy(x, w, smv, srv, dy, training)
        dx, dw, db = tensor(np.zeros_like(x)), tensor(np.zeros(c, dtype)), tensor(np.zeros(c, dtype))
        nn.batch_norm_grad(backend, tensor(x), tensor(w), sm, sr, tensor(dy), dx, dw, db,
                           training=training)
        np.testing.assert_allclose(dx.numpy(), dx_ref, rtol=tol * 10 * scale, atol=tol * scale)
        np.testing.assert_allclose(dw.numpy(), dw_ref, rtol=tol * 10, atol=tol * scale)
        np.testing.assert_allclose(db.numpy(), db_ref, rtol=tol * 10, atol=tol)
        dx2 = tensor(np.zeros_like(x))
        got = nn.batch_norm_grad(backend, tensor(x), tensor(w), sm, sr, tensor(dy), dx2,
                                 training=training)  # dweight, dbias not computed
        assert got[1] is None and got[2] is None
        np.testing.assert_allclose(dx2.numpy(), dx.numpy(), rtol=0, atol=0)


def test_batch_norm_refusals(backend):
    x = tensor(rand((1, 3)))
    w, b = tensor(rand(3)), tensor(rand(3))
    y = tensor(np.zeros((1, 3), "float32"))
    with pytest.raises(parenchyma.Error) as e:  # one value per channel
        nn.batch_norm(backend, x, w, b, y, training=True)
    assert e.value.code == "invalid_argument" and e.value.origin == "nn.batch_norm"
    assert "more than 1 value per channel" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:  # evaluation without running statistics
        nn.batch_norm(backend, x, w, b, y, training=False)
    assert e.value.origin == "nn.batch_norm" and "running_mean" in str(e.value)
    x4 = tensor(rand((4, 3)))
    y4 = tensor(np.zeros((4, 3), "float32"))
    with pytest.raises(parenchyma.Error) as e:
        nn.batch_norm(backend, x4, w, b, y4, training=True, momentum=-0.5)
    assert "argument momentum" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:  # running statistics of the data's dtype (f64)
        nn.batch_norm(backend, tensor(rand((4, 3), "float64")), tensor(rand(3, "float64")),
                      tensor(rand(3, "float64")), tensor(np.zeros((4, 3))),
                      tensor(np.zeros(3, "float32")), training=True)
    assert "argument running_mean" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        nn.batch_norm_grad(backend, x4, w, tensor(np.zeros(3, "float32")),
                           tensor(np.ones(3, "float32")), x4, tensor(np.zeros((4, 3), "float32")),
                           tensor(np.zeros(2, "float32")), training=True)
    assert e.value.origin == "nn.batch_norm_grad" and "argument dweight" in str(e.value)


def test_errors_name_the_argument(native):
    x = tensor(np.zeros((2, 3), "float32"))
    with pytest.raises(parenchyma.Error) as e:
        nn.relu(native, x, tensor(np.zeros(5, "float32")))
    assert e.value.origin == "nn.relu" and "argument y" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        nn.Convolution(native, (1, 3, 5, 5), (4, 2, 3, 3))
    assert "argument w" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        nn.pooling_output_shape((1, 1, 4, 4), window=2, padding=2)
    assert "padding" in str(e.value)
