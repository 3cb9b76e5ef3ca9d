# DLPack in and out without copies, the buffer protocol, and what is refused.
import ctypes
import gc

import numpy as np
import pytest

import parenchyma
from conftest import host_ptr

_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_named(capsule, name):
    return bool(_capsule_is_valid(capsule, name.encode()))


def test_numpy_to_tensor_is_zero_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = parenchyma.from_dlpack(a)
    assert t.shape == (3, 4) and t.dtype == "float32" and t.backend is None
    assert t.data_ptr() == host_ptr(a)
    n = t.numpy()
    assert host_ptr(n) == host_ptr(a)
    np.testing.assert_array_equal(n, a)


def test_tensor_to_numpy_is_zero_copy(native):
    t = parenchyma.zeros((5,), "float64")
    n = t.numpy()
    assert host_ptr(n) == t.data_ptr()
    n[:] = [1, 2, 3, 4, 5]  # a write through the view is seen by the next op
    parenchyma.blas.scal(native, 2.0, t)
    np.testing.assert_array_equal(t.numpy(), [2, 4, 6, 8, 10])
    np.testing.assert_array_equal(n, [2, 4, 6, 8, 10])  # native: the same memory


def test_import_then_export_same_pointer_native(native):
    a = np.linspace(0, 1, 1023)
    t = parenchyma.from_dlpack(a, backend=native)
    assert t.backend == native
    assert t.__dlpack_device__() == (1, 0)
    b = np.from_dlpack(t)
    assert host_ptr(b) == host_ptr(a)
    parenchyma.blas.scal(native, 3.0, t)
    np.testing.assert_allclose(a, np.linspace(0, 3, 1023))


def test_import_then_export_opencl(opencl):
    try:
        shares_host = opencl.dlpack_device()[0] == 1
    except parenchyma.Error:  # an OpenCL GPU: its buffers have no DLPack device
        shares_host = False
    if not shares_host:
        pytest.skip(f"{opencl.name} does not share host memory: no zero-copy DLPack export")
    a = np.arange(4099, dtype=np.float32)
    t = parenchyma.from_dlpack(a, backend=opencl)
    parenchyma.blas.scal(opencl, 2.0, t)  # runs on the OpenCL device
    assert t.backend == opencl and t.__dlpack_device__() == (1, 0)
    b = np.from_dlpack(t)  # the OpenCL buffer's host pointer, or the host copy
    np.testing.assert_array_equal(b, 2 * np.arange(4099, dtype=np.float32))
    np.testing.assert_array_equal(t.numpy(), b)
    # The host copy is the NumPy array's memory: the producer sees the op's result.
    np.testing.assert_array_equal(a, b)
    assert host_ptr(t.numpy()) == host_ptr(a)


def test_raw_capsule_consumed_once():
    a = np.ones(7, dtype=np.float32)
    cap = a.__dlpack__()
    assert capsule_named(cap, "dltensor")
    t = parenchyma.from_dlpack(cap)
    assert capsule_named(cap, "used_dltensor")
    assert t.data_ptr() == host_ptr(a)
    with pytest.raises(parenchyma.Error, match="already consumed") as e:
        parenchyma.from_dlpack(cap)
    assert e.value.code == "invalid_argument"


def test_export_capsule_named_dltensor():
    t = parenchyma.zeros(3)
    cap = t.__dlpack__()
    assert type(cap).__name__ == "PyCapsule" and capsule_named(cap, "dltensor")
    b = np.from_dlpack(t)
    assert host_ptr(b) == t.data_ptr()
    del cap  # an unconsumed capsule releases its export


def test_non_contiguous_refused_capsule_not_consumed():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    s = a[:, ::2]
    with pytest.raises(parenchyma.Error, match="strides") as e:
        parenchyma.from_dlpack(s)
    assert e.value.code == "invalid_argument"
    cap = s.__dlpack__()
    with pytest.raises(parenchyma.Error, match="strides"):
        parenchyma.from_dlpack(cap)
    assert capsule_named(cap, "dltensor")  # a failed import leaves the capsule to its owner
    t = parenchyma.from_dlpack(cap, make_dense=True)  # a copy into a dense tensor
    assert capsule_named(cap, "used_dltensor")
    np.testing.assert_array_equal(t.numpy(), s)
    assert t.data_ptr() != host_ptr(a)


def test_read_only_numpy():
    a = np.arange(4, dtype=np.float32)
    a.setflags(write=False)
    try:
        t = parenchyma.from_dlpack(a)
    except (BufferError, parenchyma.Error):
        pass  # NumPy 1.x refuses to export a read-only array (the unversioned DLPack has no flag)
    else:
        # NumPy 2 exports it versioned with READ_ONLY: a read-only tensor, zero copy.
        assert parenchyma.DLPACK_VERSION[0] >= 1
        assert t.data_ptr() == host_ptr(a) and not t.numpy().flags.writeable
        with pytest.raises(parenchyma.Error, match="read-only"):
            parenchyma.blas.scal(parenchyma.Backend("native"), 2.0, t)
    t = parenchyma.asarray(a)  # a copy
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.data_ptr() != host_ptr(a)


def test_read_only_import_refuses_writes(native):
    a = np.arange(4, dtype=np.float32)
    t = parenchyma.from_dlpack(a, read_only=True)
    assert parenchyma.blas.asum(native, t) == 6.0
    with pytest.raises(parenchyma.Error):
        parenchyma.blas.scal(native, 2.0, t)
    np.testing.assert_array_equal(a, [0, 1, 2, 3])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "uint8"])
def test_dtypes_round_trip(dtype):
    a = (np.arange(10) % 7).astype(dtype)
    t = parenchyma.from_dlpack(a)
    assert t.dtype == dtype
    n = t.numpy()
    assert n.dtype == np.dtype(dtype) and host_ptr(n) == host_ptr(a)
    np.testing.assert_array_equal(n, a)


def test_bfloat16_has_no_numpy_view():
    t = parenchyma.zeros(4, "bfloat16")
    with pytest.raises(parenchyma.Error, match="bfloat16"):
        t.numpy()
    with pytest.raises(parenchyma.Error, match="bfloat16") as e:
        memoryview(t)  # a parenchyma.Error like every other refusal, not a bare BufferError
    assert e.value.code == "unsupported"
    with pytest.raises(parenchyma.Error, match="bfloat16"):
        np.asarray(t)
    assert t.__dlpack_device__() == (1, 0)


def test_memory_outlives_the_other_side():
    a = np.arange(100, dtype=np.float32)
    t = parenchyma.from_dlpack(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(100, dtype=np.float32))
    n = parenchyma.zeros(50).numpy()  # the Tensor is gone at once
    gc.collect()
    n[:] = 1.0
    assert n.sum() == 50.0


def test_buffer_protocol():
    t = parenchyma.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3))
    m = memoryview(t)
    assert m.format == "f" and m.shape == (2, 3) and m.itemsize == 4 and not m.readonly
    assert m.tolist() == [[0, 1, 2], [3, 4, 5]]
    v = np.asarray(t)  # NumPy takes the buffer: a view, no copy
    assert host_ptr(v) == t.data_ptr()
    v[0, 0] = 42
    assert t.numpy()[0, 0] == 42
    m.release()


def test_no_cuda_array_interface_off_cuda(backend):
    t = parenchyma.zeros(3).to(backend)
    assert t.backend == backend
    assert not hasattr(t, "__cuda_array_interface__")


def test_dlpack_keywords():
    t = parenchyma.zeros(2)
    parenchyma.from_dlpack(t.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0)))
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        t.__dlpack__(copy=True)


def test_tensor_to_tensor_via_dlpack(native):
    t = parenchyma.zeros(8, "float64")
    u = parenchyma.from_dlpack(t)  # parenchyma's own export: the same memory
    assert u.data_ptr() == t.data_ptr()
    parenchyma.blas.axpy(native, 1.0, parenchyma.from_dlpack(np.ones(8)), u)
    np.testing.assert_array_equal(t.numpy(), np.ones(8))


def test_from_numpy_and_asarray():
    a = np.ones((2, 2), dtype=np.float32)
    assert parenchyma.Tensor.from_numpy(a).data_ptr() == host_ptr(a)
    assert parenchyma.asarray(a).data_ptr() == host_ptr(a)
    t = parenchyma.asarray([[1, 2], [3, 4]], dtype="float64")
    assert t.dtype == "float64" and t.shape == (2, 2)
    assert parenchyma.asarray(t) is t
    s = parenchyma.asarray(np.arange(10.0)[::2])  # non-contiguous: copied
    np.testing.assert_array_equal(s.numpy(), [0, 2, 4, 6, 8])
    with pytest.raises(parenchyma.Error):
        parenchyma.Tensor.from_numpy([1, 2])


# ---- DLPack >= 1.0: DLManagedTensorVersioned ('dltensor_versioned' capsules) ----------------
# Every build speaks it (parenchyma/dlpack_abi.h declares the structs; no system dlpack.h).
def test_dlpack_version_attribute():
    assert parenchyma.DLPACK_VERSION == (1, 0)


def test_versioned_export_when_asked():
    t = parenchyma.zeros((2, 3), "float32")
    c = t.__dlpack__(max_version=(1, 0))
    assert capsule_named(c, "dltensor_versioned")
    u = parenchyma.from_dlpack(c)
    assert capsule_named(c, "used_dltensor_versioned")
    assert u.shape == (2, 3) and u.data_ptr() == t.data_ptr()
    # An older consumer (max_version None or (0, x)) still gets the unversioned capsule.
    assert capsule_named(t.__dlpack__(), "dltensor")
    assert capsule_named(t.__dlpack__(max_version=(0, 8)), "dltensor")


def test_versioned_read_only_flag_round_trip():
    a = np.arange(4, dtype=np.float64)
    r = parenchyma.from_dlpack(a, read_only=True)
    w = parenchyma.from_dlpack(r.__dlpack__(max_version=(1, 1)))  # READ_ONLY travels in flags
    assert not w.numpy().flags.writeable
    with pytest.raises(parenchyma.Error, match="read-only"):
        parenchyma.blas.scal(parenchyma.Backend("native"), 2.0, w)
    np.testing.assert_array_equal(a, [0, 1, 2, 3])


def test_versioned_import_from_numpy():
    a = np.arange(6, dtype=np.float32)
    try:
        a.__dlpack__(max_version=(1, 0))
    except TypeError:
        pytest.skip(f"NumPy {np.__version__} exports no versioned capsules (max_version needs "
                    "NumPy >= 2.1); the unversioned path is tested above")
    t = parenchyma.from_dlpack(a)  # asks for max_version, gets a versioned capsule
    assert t.data_ptr() == host_ptr(a)
    ro = a.copy()
    ro.flags.writeable = False
    try:
        r = parenchyma.from_dlpack(ro)
    except BufferError:
        pytest.skip("this NumPy refuses to export read-only arrays")
    assert not r.numpy().flags.writeable  # NumPy's READ_ONLY flag is honoured


def test_read_only_stays_read_only_through_numpy_and_buffers():
    a = np.arange(3, dtype=np.float32)
    r = parenchyma.from_dlpack(a, read_only=True)
    assert not r.numpy().flags.writeable
    assert memoryview(r).readonly
    with pytest.raises(TypeError):
        memoryview(r)[0] = 1.0
