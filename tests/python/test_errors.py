# Bad input raises parenchyma.Error naming the argument, before anything runs.
import numpy as np
import pytest

import parenchyma
from parenchyma import blas


def t(a):
    return parenchyma.from_dlpack(np.ascontiguousarray(a))


def test_axpy_shape_mismatch(backend):
    x, y = t(np.ones(5)), t(np.ones(6))
    with pytest.raises(parenchyma.Error, match="argument y") as e:
        blas.axpy(backend, 1.0, x, y)
    assert e.value.code == "invalid_argument" and e.value.origin == "blas.axpy"
    np.testing.assert_array_equal(y.numpy(), np.ones(6))  # nothing ran


def test_wrong_dtype(backend):
    with pytest.raises(parenchyma.Error) as e:
        blas.axpy(backend, 1.0, t(np.ones(4, np.int32)), t(np.ones(4, np.int32)))
    assert e.value.code in ("invalid_argument", "unsupported") and "i32" in str(e.value)
    with pytest.raises(parenchyma.Error, match="argument y") as e:
        blas.axpy(backend, 1.0, t(np.ones(4, np.float32)), t(np.ones(4, np.float64)))
    assert e.value.code == "invalid_argument"


def test_gemm_3d_refused(backend):
    a = t(np.ones((2, 3, 4), np.float32))
    b = t(np.ones((4, 2), np.float32))
    c = t(np.zeros((2, 2), np.float32))
    with pytest.raises(parenchyma.Error, match="argument A.*2-d") as e:
        blas.gemm(backend, a, b, c)
    assert e.value.origin == "blas.gemm"


def test_gemm_inner_dimension_mismatch(backend):
    with pytest.raises(parenchyma.Error, match="argument B") as e:
        blas.gemm(backend, t(np.ones((3, 4))), t(np.ones((5, 2))), t(np.zeros((3, 2))))
    assert e.value.code == "invalid_argument"


def test_non_contiguous_slice_refused(backend):
    a = np.ones((4, 6), dtype=np.float32)
    with pytest.raises(parenchyma.Error, match="strides") as e:
        parenchyma.from_dlpack(a[:, ::2])
    assert e.value.code == "invalid_argument"
    # Passed straight to an op: the same refusal, naming the argument and the op.
    with pytest.raises(parenchyma.Error, match="argument x.*strides") as e:
        blas.scal(backend, 2.0, a[:, ::2])
    assert e.value.origin == "blas.scal"
    np.testing.assert_array_equal(a, np.ones((4, 6)))


def test_not_a_tensor(backend):
    with pytest.raises(parenchyma.Error, match="argument x.*list") as e:
        blas.nrm2(backend, [1.0, 2.0])
    assert e.value.code == "invalid_argument"
    with pytest.raises(parenchyma.Error, match="argument obj"):
        parenchyma.from_dlpack(3.0)


def test_uninitialized_input(backend):
    with pytest.raises(parenchyma.Error, match="argument x") as e:
        blas.axpy(backend, 1.0, parenchyma.Tensor(3, "float64"), t(np.ones(3)))
    assert e.value.code == "uninitialized"


def test_error_is_raised_not_crashing_for_unknown_framework_request():
    with pytest.raises(parenchyma.Error):
        parenchyma.Backend("cuda:99,opencl:99")
