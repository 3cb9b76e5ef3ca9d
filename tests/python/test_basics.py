# The package's surface: import, Backend, Tensor construction, info(), the error type.
import numpy as np
import pytest

import parenchyma


def test_import_and_version():
    assert isinstance(parenchyma.__version__, str) and parenchyma.__version__
    for name in ("Backend", "Tensor", "Error", "from_dlpack", "asarray", "info", "blas"):
        assert hasattr(parenchyma, name), name
    import parenchyma.blas as blas

    for op in ("asum", "axpy", "axpby", "copy", "dot", "nrm2", "scal", "swap", "gemv", "gemm",
               "gemm_batched"):
        assert callable(getattr(blas, op)), op
        assert getattr(blas, op).__doc__


def test_default_backend():
    b = parenchyma.Backend()
    assert b.name.startswith(b.framework + ":")
    assert isinstance(b.device, str) and b.device
    assert b.device_kind in ("cpu", "gpu", "accelerator", "other")
    assert b.name in repr(b)
    b.synchronize()


def test_backend_properties(backend):
    assert backend.framework in ("native", "opencl")
    assert backend == backend
    assert backend != parenchyma.Backend(backend.name)  # each Backend() is its own stream


def test_unknown_backend_raises_error():
    with pytest.raises(parenchyma.Error) as e:
        parenchyma.Backend("no-such-framework")
    assert e.value.code in ("unavailable", "config", "not_found")
    assert e.value.message and e.value.message in str(e.value)
    assert isinstance(e.value, Exception)


def test_error_attributes_default_none():
    e = parenchyma.Error("x")
    assert e.code is None and e.origin is None and e.message is None


def test_tensor_construction():
    t = parenchyma.Tensor((2, 3), "float64")
    assert t.shape == (2, 3) and t.dtype == "float64" and t.size == 6 and t.ndim == 2
    assert t.nbytes == 48 and not t.initialized and t.backend is None
    assert len(t) == 2
    assert "shape=(2, 3)" in repr(t)
    assert parenchyma.Tensor(5).shape == (5,)
    assert parenchyma.Tensor([4, 0], np.int32).dtype == "int32"
    assert parenchyma.Tensor([1], np.dtype("uint8")).dtype == "uint8"
    for name in ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8"):
        assert parenchyma.Tensor([1], name).dtype == name


def test_tensor_bad_arguments():
    with pytest.raises(parenchyma.Error, match="dtype") as e:
        parenchyma.Tensor((2,), "complex64")
    assert e.value.code == "invalid_argument"
    with pytest.raises(parenchyma.Error, match="shape"):
        parenchyma.Tensor("abc")
    with pytest.raises(parenchyma.Error) as e:
        parenchyma.Tensor((2, -1))
    assert e.value.code == "invalid_argument"


def test_zeros_and_uninitialized():
    z = parenchyma.zeros((3, 2), "float64")
    assert z.initialized
    np.testing.assert_array_equal(z.numpy(), np.zeros((3, 2)))
    with pytest.raises(parenchyma.Error) as e:
        parenchyma.blas.nrm2(parenchyma.Backend("native"), parenchyma.Tensor((4,)))
    assert e.value.code == "uninitialized"


def test_info():
    i = parenchyma.info()
    # the keys of parenchyma-info --json (test_object_model.py compares them with the tool's)
    assert {"plugins", "ranking", "selected", "frameworks", "ops", "devices"} <= set(i)
    assert i["plugins"] and all(
        {"name", "kind", "path", "status", "stage", "reason", "advice"} <= set(e)
        for e in i["plugins"])
    names = [f["name"] for f in i["frameworks"]]
    assert "native" in names
    native = next(f for f in i["frameworks"] if f["name"] == "native")
    assert native["devices"] and {"name", "kind", "properties"} <= set(native["devices"][0])
    assert isinstance(native["devices"][0]["properties"], dict)
    assert i["ranking"] and set(i["ranking"]) <= set(names)
    assert i["selected"]["backend"] == parenchyma.Backend().name
    assert any(o["op"] == "gemm" and o["extension"] == "blas" for o in i["ops"])


def test_cxx_runtime_is_global_after_import():
    # The package makes libstdc++ global before its compiled module loads (one C++ runtime in
    # the process, as in a C++ program): without it, C++ libraries the plugins load later (LLVM
    # under PoCL 5, cuDNN) crashed in std::call_once on the H200 (docs/python.md).
    import ctypes
    import os
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("the global-scope rule is about glibc's dynamic linker")
    if os.environ.get("PARENCHYMA_GLOBAL_CXX_RUNTIME") == "0":
        pytest.skip("PARENCHYMA_GLOBAL_CXX_RUNTIME=0 turns it off")
    process = ctypes.CDLL(None)  # the global scope
    assert hasattr(process, "_ZSt9terminatev"), "libstdc++ is not in the global symbol scope"
