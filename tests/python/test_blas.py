# parenchyma.blas against NumPy (float64 references) on awkward sizes, both dtypes, native and
# OpenCL; gemm and gemv with transposes on non-square shapes.
import numpy as np
import pytest

import parenchyma
from parenchyma import blas

SIZES = [1, 7, 1023, 4099]
DTYPES = ["float32", "float64"]


def tol(dtype, n=1):
    eps = 1e-6 if dtype == "float32" else 1e-13
    return eps * max(1.0, np.sqrt(n)) * 10


def data(n, dtype, seed):
    return np.random.default_rng(seed).uniform(-1, 1, n).astype(dtype)


def tensor(a):
    return parenchyma.from_dlpack(np.array(a, copy=True))  # a copy: ops write through


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_reductions(backend, n, dtype):
    x, y = data(n, dtype, 1), data(n, dtype, 2)
    xr, yr = x.astype(np.float64), y.astype(np.float64)
    tx, ty = tensor(x), tensor(y)
    r = blas.dot(backend, tx, ty)
    assert isinstance(r, float)
    assert r == pytest.approx(xr @ yr, rel=tol(dtype, n), abs=tol(dtype, n))
    assert blas.nrm2(backend, tx) == pytest.approx(np.linalg.norm(xr), rel=tol(dtype, n))
    assert blas.asum(backend, tx) == pytest.approx(np.abs(xr).sum(), rel=tol(dtype, n))
    assert tx.backend == backend


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_level1_updates(backend, n, dtype):
    x, y = data(n, dtype, 3), data(n, dtype, 4)
    xr, yr = x.astype(np.float64), y.astype(np.float64)
    t = tol(dtype)

    tx, ty = tensor(x), tensor(y)
    assert blas.axpy(backend, 0.5, tx, ty) is ty
    np.testing.assert_allclose(ty.numpy(), 0.5 * xr + yr, rtol=t, atol=t)

    tx, ty = tensor(x), tensor(y)
    blas.axpby(backend, 2.0, tx, -3.0, ty)
    np.testing.assert_allclose(ty.numpy(), 2 * xr - 3 * yr, rtol=t, atol=t)

    tx = tensor(x)
    blas.scal(backend, -1.5, tx)
    np.testing.assert_allclose(tx.numpy(), -1.5 * xr, rtol=t, atol=t)

    tx, out = tensor(x), parenchyma.Tensor((n,), dtype)  # copy writes all of an unwritten y
    blas.copy(backend, tx, out)
    np.testing.assert_array_equal(out.numpy(), x)

    tx, ty = tensor(x), tensor(y)
    blas.swap(backend, tx, ty)
    np.testing.assert_array_equal(tx.numpy(), y)
    np.testing.assert_array_equal(ty.numpy(), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_transposes_non_square(backend, dtype, trans_a, trans_b):
    m, n, k = 37, 19, 23
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (n, k) if trans_b else (k, n)).astype(dtype)
    c = rng.uniform(-1, 1, (m, n)).astype(dtype)
    opa = a.T.astype(np.float64) if trans_a else a.astype(np.float64)
    opb = b.T.astype(np.float64) if trans_b else b.astype(np.float64)
    ref = 1.25 * opa @ opb - 0.5 * c.astype(np.float64)
    tc = tensor(c)
    out = blas.gemm(backend, tensor(a), tensor(b), tc, alpha=1.25, beta=-0.5, trans_a=trans_a,
                    trans_b=trans_b)
    assert out is tc
    np.testing.assert_allclose(tc.numpy(), ref, rtol=tol(dtype, k), atol=tol(dtype, k))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("broadcast", ["none", "a", "b"])
def test_gemm_batched(backend, dtype, trans_a, broadcast):
    batch, m, n, k = 3, 13, 7, 9
    rng = np.random.default_rng(8)
    ashape = (k, m) if trans_a else (m, k)
    a = rng.uniform(-1, 1, ashape if broadcast == "a" else (batch,) + ashape).astype(dtype)
    b = rng.uniform(-1, 1, (1, k, n) if broadcast == "b" else (batch, k, n)).astype(dtype)
    c = rng.uniform(-1, 1, (batch, m, n)).astype(dtype)
    opa = np.swapaxes(a, -1, -2) if trans_a else a
    ref = 0.5 * np.matmul(opa.astype(np.float64), b.astype(np.float64)) + 2.0 * c
    tc = tensor(c)
    out = blas.gemm_batched(backend, tensor(a), tensor(b), tc, alpha=0.5, beta=2.0,
                            trans_a=trans_a)
    assert out is tc
    np.testing.assert_allclose(tc.numpy(), ref, rtol=tol(dtype, k), atol=tol(dtype, k))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_larger_and_beta_zero(backend, dtype):
    m, n, k = 129, 65, 77
    rng = np.random.default_rng(6)
    a, b = rng.uniform(-1, 1, (m, k)).astype(dtype), rng.uniform(-1, 1, (k, n)).astype(dtype)
    c = parenchyma.Tensor((m, n), dtype)  # beta == 0: C is write-only, may be unwritten
    blas.gemm(backend, tensor(a), tensor(b), c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.numpy(), ref, rtol=tol(dtype, k), atol=tol(dtype, k))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("shape", [(1, 1), (7, 1023), (1023, 7)])
def test_gemv(backend, dtype, trans, shape):
    m, n = shape
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (m, n)).astype(dtype)
    x = rng.uniform(-1, 1, m if trans else n).astype(dtype)
    y = rng.uniform(-1, 1, n if trans else m).astype(dtype)
    opa = a.T.astype(np.float64) if trans else a.astype(np.float64)
    ref = 2.0 * opa @ x.astype(np.float64) + 0.25 * y.astype(np.float64)
    ty = tensor(y)
    blas.gemv(backend, tensor(a), tensor(x), ty, alpha=2.0, beta=0.25, trans=trans)
    t = tol(dtype, max(m, n))
    np.testing.assert_allclose(ty.numpy(), ref, rtol=t, atol=t)


def test_numpy_operands_directly(backend):
    x = np.arange(1023, dtype=np.float64)
    y = np.ones(1023)
    assert blas.axpy(backend, 2.0, x, y) is y  # y is imported for the call: updated in place
    np.testing.assert_array_equal(y, 2 * np.arange(1023) + 1)
    assert blas.dot(backend, x, x) == pytest.approx(float(x @ x))
    c = np.zeros((3, 2), dtype=np.float32)
    blas.gemm(backend, np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), c)
    np.testing.assert_array_equal(c, np.full((3, 2), 4.0))


def test_numpy_imported_into_opencl(opencl):
    """A NumPy array imported into the OpenCL (PoCL) backend: the op runs there, the array
    sees the result."""
    a = np.arange(4099, dtype=np.float32)
    b = np.ones(4099, dtype=np.float32)
    ta = parenchyma.from_dlpack(a, backend=opencl)
    tb = parenchyma.from_dlpack(b, backend=opencl)
    assert ta.backend == opencl
    blas.axpy(opencl, 3.0, ta, tb)
    np.testing.assert_array_equal(tb.numpy(), 3 * np.arange(4099, dtype=np.float32) + 1)
    np.testing.assert_array_equal(b, 3 * np.arange(4099, dtype=np.float32) + 1)
    assert blas.asum(opencl, ta) == pytest.approx(float(np.arange(4099).sum()), rel=1e-6)


def test_tensor_moves_between_backends(native, opencl):
    t = tensor(np.arange(7, dtype=np.float64))
    blas.scal(opencl, 2.0, t)
    blas.scal(native, 3.0, t)
    blas.scal(opencl, 0.5, t)
    np.testing.assert_array_equal(t.numpy(), 3 * np.arange(7))
    assert t.backend == opencl
