# Both DLPack capsule kinds on every build, checked against the ABI as this file declares it
# independently (ctypes, from the published field layout) rather than through NumPy, whose
# versioned support depends on its version: a foreign producer's 'dltensor' and
# 'dltensor_versioned' capsules imported, ours read field by field, READ_ONLY both ways, a
# foreign major version refused without consuming, and the producer's deleter run exactly once.
import ctypes
import gc

import numpy as np
import pytest

import parenchyma
from conftest import host_ptr


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion),
                                     ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER_V),
                                     ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

READ_ONLY = 1 << 0
KDLCPU = 1
KDLFLOAT = 2

_new = ctypes.pythonapi.PyCapsule_New
_new.restype = ctypes.py_object
_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_get = ctypes.pythonapi.PyCapsule_GetPointer
_get.restype = ctypes.c_void_p
_get.argtypes = [ctypes.py_object, ctypes.c_char_p]
_valid = ctypes.pythonapi.PyCapsule_IsValid
_valid.restype = ctypes.c_int
_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# The capsule names live as long as the module (a capsule keeps only the pointer).
UNVERSIONED = b"dltensor"
VERSIONED = b"dltensor_versioned"


class Producer:
    """A foreign producer: a float32 NumPy array handed out as one DLPack struct of either kind;
    counts its deleter's calls."""

    def __init__(self, array, versioned, major=1, flags=0):
        self.array = array
        self.shape = (ctypes.c_int64 * array.ndim)(*array.shape)
        self.deleted = 0
        tensor = DLTensor(array.ctypes.data, DLDevice(KDLCPU, 0), array.ndim,
                          DLDataType(KDLFLOAT, 32, 1), self.shape, None, 0)
        if versioned:
            self.deleter = DELETER_V(self._delete)
            self.managed = DLManagedTensorVersioned(DLPackVersion(major, 0), None, self.deleter,
                                                    flags, tensor)
        else:
            self.deleter = DELETER(self._delete)
            self.managed = DLManagedTensor(tensor, None, self.deleter)
        self.capsule = _new(ctypes.addressof(self.managed), VERSIONED if versioned
                            else UNVERSIONED, None)

    def _delete(self, _):
        self.deleted += 1


def collect():
    for _ in range(3):
        gc.collect()


@pytest.mark.parametrize("versioned", [False, True], ids=["dltensor", "dltensor_versioned"])
def test_foreign_capsule_is_imported_in_place(native, versioned):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    p = Producer(a, versioned)
    t = parenchyma.from_dlpack(p.capsule)
    name = b"used_dltensor_versioned" if versioned else b"used_dltensor"
    assert _valid(p.capsule, name)  # consumed: renamed as the protocol asks
    assert t.shape == (2, 3) and t.data_ptr() == host_ptr(a)
    parenchyma.blas.scal(native, 2.0, t)
    native.synchronize()
    np.testing.assert_array_equal(a, 2.0 * np.arange(6, dtype=np.float32).reshape(2, 3))
    assert p.deleted == 0
    del t
    collect()
    assert p.deleted == 1


def test_foreign_read_only_flag_is_honoured(native):
    a = np.arange(4, dtype=np.float32)
    p = Producer(a, versioned=True, flags=READ_ONLY)
    t = parenchyma.from_dlpack(p.capsule)
    assert parenchyma.blas.asum(native, t) == 6.0
    with pytest.raises(parenchyma.Error, match="read-only"):
        parenchyma.blas.scal(native, 2.0, t)
    np.testing.assert_array_equal(a, [0, 1, 2, 3])
    del t
    collect()
    assert p.deleted == 1


def test_foreign_major_version_is_refused_unconsumed():
    p = Producer(np.zeros(3, dtype=np.float32), versioned=True, major=2)
    with pytest.raises(parenchyma.Error, match="DLPack 2.0"):
        parenchyma.from_dlpack(p.capsule)
    assert _valid(p.capsule, VERSIONED)  # still the producer's
    assert p.deleted == 0


@pytest.mark.parametrize("max_version", [None, (0, 8), (1, 0), (1, 7), (2, 0)])
def test_export_kind_follows_max_version(max_version):
    t = parenchyma.asarray(np.arange(5, dtype=np.float32))
    cap = t.__dlpack__(max_version=max_version)
    versioned = max_version is not None and max_version[0] >= 1
    name = VERSIONED if versioned else UNVERSIONED
    assert _valid(cap, name)
    address = _get(cap, name)
    if versioned:
        m = DLManagedTensorVersioned.from_address(address)
        assert (m.version.major, m.version.minor) == parenchyma.DLPACK_VERSION == (1, 0)
        assert m.flags & READ_ONLY == 0
        assert m.deleter  # the capsule's destructor calls it (the capsule is never consumed here)
        dl = m.dl_tensor
    else:
        m = DLManagedTensor.from_address(address)
        assert m.deleter
        dl = m.dl_tensor
    assert dl.data == t.data_ptr() and dl.byte_offset == 0
    assert (dl.device.device_type, dl.device.device_id) == (KDLCPU, 0)
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (KDLFLOAT, 32, 1)
    assert dl.ndim == 1 and dl.shape[0] == 5
    assert not dl.strides or dl.strides[0] == 1
    values = (ctypes.c_float * 5).from_address(dl.data)
    assert list(values) == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_read_only_export_carries_the_flag():
    a = np.arange(3, dtype=np.float32)
    r = parenchyma.from_dlpack(a, read_only=True)
    cap = r.__dlpack__(max_version=(1, 0))
    m = DLManagedTensorVersioned.from_address(_get(cap, VERSIONED))
    assert m.flags & READ_ONLY
    assert m.dl_tensor.data == host_ptr(a)
