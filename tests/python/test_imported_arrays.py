# Imported NumPy arrays behave the same whatever their address (docs/python.md, "Imported host
# arrays"): after an op and backend.synchronize() the array holds the result; what the program
# writes into it afterwards is what the next op reads; two tensors over one buffer see each
# other's results; operands that must be distinct are refused when their memory overlaps.
import numpy as np
import pytest

import parenchyma
from conftest import get_backend, host_ptr


@pytest.fixture(params=["native", "opencl", "cuda"])
def any_backend(request):
    return get_backend(request.param)


def at_offset(pool, offset, n):
    """A float32 view of n elements starting `offset` bytes past a 4096-byte boundary."""
    base = host_ptr(pool)
    start = (-base) % 4096 + offset
    assert start % 4 == 0
    view = pool[start // 4:start // 4 + n]
    assert host_ptr(view) % 4096 == offset % 4096
    return view


def test_results_reach_the_array_at_every_alignment(any_backend):
    b = any_backend
    rng = np.random.default_rng(21)
    n = 1031
    pool = np.zeros(n + 2048, dtype=np.float32)
    wrong = []
    for offset in range(4, 257, 4):
        a = at_offset(pool, offset, n)
        a[:] = rng.uniform(-4, 4, n).astype(np.float32)
        ref = a.astype(np.float64)
        t = parenchyma.from_dlpack(a)
        parenchyma.blas.scal(b, 2.0, t)
        b.synchronize()
        ref *= 2
        ok = np.allclose(a, ref, rtol=1e-6)
        # A write into the array after synchronize() is what the next op reads.
        a[::7] = np.arange(0, n, 7) % 13
        ref[::7] = np.arange(0, n, 7) % 13
        parenchyma.blas.scal(b, -3.0, t)
        b.synchronize()
        ref *= -3
        ok = ok and np.allclose(a, ref, rtol=1e-6)
        # A second tensor over the same buffer (the digits trainer's pattern).
        u = parenchyma.from_dlpack(a)
        parenchyma.blas.scal(b, 0.5, u)
        parenchyma.blas.scal(b, 4.0, t)  # reads what u wrote
        b.synchronize()
        ref *= 2
        ok = ok and np.allclose(a, ref, rtol=1e-6) and np.allclose(t.numpy(), ref, rtol=1e-6)
        if not ok:
            wrong.append(offset)
    assert wrong == [], f"{b.name}: wrong results at byte offsets {wrong}"


def test_one_array_as_input_and_output_is_refused(native):
    a = np.ones(64, dtype=np.float32)
    with pytest.raises(parenchyma.Error, match="shares memory") as e:
        parenchyma.blas.copy(native, a, a)
    assert e.value.code == "invalid_argument"
    # Overlapping views, one element apart.
    with pytest.raises(parenchyma.Error, match="shares memory"):
        parenchyma.blas.axpy(native, 1.0, a[:32], a[1:33])
    # The same elements updated in place run.
    parenchyma.blas.axpy(native, 1.0, a[:32], a[:32])
    native.synchronize()
    np.testing.assert_array_equal(a[:32], 2)


@pytest.mark.parametrize("op", ["pooling_max_grad", "pooling_avg_grad", "convolution"])
def test_aliased_nn_operands_are_refused(backend, op):
    x = np.random.default_rng(3).uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    if op == "pooling_max_grad":
        y = np.zeros((2, 3, 4, 4), np.float32)
        parenchyma.nn.pooling_max(backend, x, y)
        dy = np.ones_like(y)
        dx = np.zeros_like(x)
        with pytest.raises(parenchyma.Error, match="shares memory") as e:
            parenchyma.nn.pooling_max_grad(backend, dx, y, dy, dx)
    elif op == "pooling_avg_grad":
        dy = np.ones((2, 3, 8, 8), np.float32)
        with pytest.raises(parenchyma.Error, match="shares memory") as e:
            parenchyma.nn.pooling_avg_grad(backend, dy, dy, window=1)
    else:
        w = np.full((3, 3, 1, 1), 0.25, np.float32)
        conv = parenchyma.nn.Convolution(backend, x.shape, w.shape)
        with pytest.raises(parenchyma.Error, match="shares memory") as e:
            conv.forward(x, w, x)
    assert e.value.code == "invalid_argument"
    assert "nn." in str(e.value)
