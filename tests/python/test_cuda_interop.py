# CUDA interop on a machine with a GPU, PyTorch and CuPy: tensors move between parenchyma's cuda
# backend and torch / CuPy without copies (the same device pointer both ways), the work of each
# side is ordered by streams (events, no manual synchronise), and results equal torch's own ops.
# Skipped, with the reason, where torch, CuPy or a cuda backend is absent (the CPU machine).
import pytest

import parenchyma
from parenchyma import blas

from conftest import get_backend

torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device here", allow_module_level=True)


@pytest.fixture
def cuda():
    return get_backend("cuda")


@pytest.fixture(autouse=True)
def strict_fp32():
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # cuBLAS in strict fp32 on both sides
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


def test_torch_to_parenchyma_is_zero_copy(cuda):
    x = torch.randn(1001, device="cuda", dtype=torch.float32)
    t = parenchyma.from_dlpack(x, cuda)
    assert t.backend == cuda
    assert t.data_ptr() == x.data_ptr()
    assert t.__cuda_array_interface__["data"][0] == x.data_ptr()
    # An op on the imported tensor writes torch's memory; torch sees it through the export.
    expect = x * 2
    blas.scal(cuda, 2.0, t)
    y = torch.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr()
    torch.testing.assert_close(y, expect, rtol=0, atol=0)


def test_parenchyma_to_torch_is_zero_copy(cuda):
    t = parenchyma.from_dlpack(torch.arange(12, dtype=torch.float64, device="cuda").reshape(3, 4),
                               cuda)
    y = torch.from_dlpack(t)
    assert y.device.type == "cuda" and y.shape == (3, 4) and y.dtype == torch.float64
    assert y.data_ptr() == t.data_ptr()


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (513, 257, 1031), (2048, 2048, 2048)])
def test_gemm_matches_torch(cuda, m, n, k):
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(k, n, device="cuda")
    c = torch.empty(m, n, device="cuda")
    ta, tb, tc = (parenchyma.from_dlpack(v, cuda) for v in (a, b, c))
    blas.gemm(cuda, ta, tb, tc)
    got = torch.from_dlpack(tc)
    ref = (a.double() @ b.double()).float()
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4 * k ** 0.5)


def test_stream_order_torch_producer(cuda):
    # torch writes x on a side stream with a long kernel; parenchyma reads it without a manual
    # synchronise: from_dlpack passes our stream, torch makes it wait for its own.
    side = torch.cuda.Stream()
    n = 4096
    with torch.cuda.stream(side):
        a = torch.randn(n, n, device="cuda")
        x = a @ a  # long enough to race if nothing ordered it
        for _ in range(4):
            x = x @ a / n
        t = parenchyma.from_dlpack(x, cuda)  # the side stream is torch's current one here
    r = torch.empty(n, n, device="cuda")
    tr = parenchyma.from_dlpack(r, cuda)
    blas.copy(cuda, t, tr)
    side.synchronize()  # only for the reference below
    got = torch.from_dlpack(tr)
    torch.testing.assert_close(got, x, rtol=0, atol=0)


def test_stream_order_parenchyma_producer(cuda):
    # parenchyma writes c with a long gemm on its stream; torch reads it on its current stream
    # without a manual synchronise: torch.from_dlpack passes its stream, which waits on our event.
    n = 4096
    a = torch.randn(n, n, device="cuda")
    ta = parenchyma.from_dlpack(a, cuda)
    c = parenchyma.Tensor((n, n), "float32")
    for _ in range(3):
        blas.gemm(cuda, ta, ta, c, alpha=1.0 / n)
    got = torch.from_dlpack(c).clone()  # torch's stream waits for our gemms
    ref = (a @ a) / n
    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-3)


def test_export_stream_minus_one_and_legacy(cuda):
    t = parenchyma.from_dlpack(torch.ones(10, device="cuda"), cuda)
    for stream in (-1, 1, 2):
        cap = t.__dlpack__(stream=stream)
        assert cap is not None
    with pytest.raises(ValueError):
        t.__dlpack__(stream=0)


def test_cupy_both_ways(cuda):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed here")
    x = cupy.arange(1, 1000, dtype=cupy.float32)
    t = parenchyma.from_dlpack(x, cuda)
    assert t.data_ptr() == x.data.ptr
    blas.scal(cuda, 3.0, t)
    y = cupy.from_dlpack(t)
    assert y.data.ptr == x.data.ptr
    assert bool((y == cupy.arange(1, 1000, dtype=cupy.float32) * 3).all())
    # CUDA Array Interface v3: CuPy reads it without a copy.
    z = cupy.asarray(t)
    assert z.data.ptr == x.data.ptr


def test_numba_style_interface(cuda):
    t = parenchyma.from_dlpack(torch.zeros(4, 5, device="cuda", dtype=torch.float64), cuda)
    cai = t.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (4, 5) and cai["typestr"] == "<f8"
