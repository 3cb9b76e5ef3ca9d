# Read-only queries leave a tensor's state alone: of a tensor nothing was written to,
# memoryview(t), numpy.asarray(t), bytes(t) and t.data_ptr() raise parenchyma.Error
# ('uninitialized') and the tensor stays unwritten, so an op reading it still raises instead of
# reading whatever the memory held. What hands out writable memory (numpy(), a writable buffer
# request, __dlpack__) counts as a write, as documented in docs/python.md.
import io

import numpy as np
import pytest

import parenchyma

QUERIES = {
    "memoryview": lambda t: memoryview(t),
    "numpy.asarray": lambda t: np.asarray(t),
    "numpy.array": lambda t: np.array(t),
    "bytes": lambda t: bytes(t),
    "data_ptr": lambda t: t.data_ptr(),
}


def exports_memory(backend):
    """Whether a tensor last written on `backend` exports its memory through DLPack (host
    memory, or a CUDA device); an OpenCL GPU's buffers have no DLPack device."""
    try:
        backend.dlpack_device()
        return True
    except parenchyma.Error:
        return False


def assert_still_unwritten(backend, t):
    assert not t.initialized
    y = parenchyma.Tensor.zeros(t.shape)
    with pytest.raises(parenchyma.Error) as e:
        parenchyma.blas.axpy(backend, 1.0, t, y)
    assert e.value.code == "uninitialized"


@pytest.mark.parametrize("on_backend", [False, True], ids=["host", "after-to"])
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_read_only_query_of_unwritten_tensor_raises_and_changes_nothing(backend, query,
                                                                          on_backend):
    t = parenchyma.Tensor(64)
    if on_backend:
        t.to(backend)
    with pytest.raises(parenchyma.Error) as e:
        QUERIES[query](t)
    assert e.value.code == "uninitialized", str(e.value)
    assert_still_unwritten(backend, t)


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_read_only_query_of_written_tensor_reads_it(backend, query):
    data = np.arange(16, dtype=np.float32)
    t = parenchyma.asarray(data.copy())
    parenchyma.blas.scal(backend, 2.0, t)
    if query == "data_ptr" and not exports_memory(backend):
        # What __dlpack__ would export: an OpenCL GPU's buffer has no DLPack device.
        with pytest.raises(parenchyma.Error) as e:
            QUERIES[query](t)
        assert e.value.code == "unsupported", str(e.value)
    else:
        QUERIES[query](t)  # no error
    np.testing.assert_array_equal(np.asarray(t), 2 * data)
    np.testing.assert_array_equal(np.frombuffer(bytes(t), dtype=np.float32), 2 * data)


def test_writable_buffer_request_counts_as_written(backend):
    data = np.arange(16, dtype=np.float32)
    t = parenchyma.Tensor(16)
    assert io.BytesIO(data.tobytes()).readinto(t) == data.nbytes  # PyBUF_WRITABLE
    assert t.initialized
    y = parenchyma.Tensor.zeros(16)
    parenchyma.blas.axpy(backend, 1.0, t, y)
    np.testing.assert_array_equal(y.numpy(), data)


def test_numpy_of_unwritten_tensor_is_writable_and_counts_as_written(backend):
    t = parenchyma.Tensor(16)
    a = t.numpy()  # like numpy.empty: the caller fills it
    assert t.initialized
    a[:] = 3.0
    y = parenchyma.Tensor.zeros(16)
    parenchyma.blas.axpy(backend, 1.0, t, y)
    np.testing.assert_array_equal(y.numpy(), np.full(16, 3.0, np.float32))


def test_asarray_of_bfloat16_raises_parenchyma_error():
    t = parenchyma.Tensor.zeros(4, "bfloat16")
    with pytest.raises(parenchyma.Error) as e:
        np.asarray(t)  # not an object array holding the Tensor
    assert e.value.code == "unsupported"
