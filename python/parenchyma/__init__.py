"""parenchyma: one runtime over CUDA, OpenCL and the host CPU, chosen at run time.

    import numpy as np, parenchyma
    backend = parenchyma.Backend()                 # the best device present
    x = np.arange(5, dtype=np.float32)
    t = parenchyma.from_dlpack(x)                  # no copy: t aliases x
    parenchyma.blas.scal(backend, 2.0, t)          # x now holds 0, 2, 4, 6, 8

Backend picks a framework and device; Tensor holds data with lazily coherent copies per
device; from_dlpack/asarray import any DLPack producer without a copy, Tensor.numpy() and
__dlpack__ export it back; parenchyma.blas runs BLAS ops; parenchyma.coll runs collectives between
the processes of an MPI job; info() says what was found.
Every failure raises parenchyma.Error. docs/python.md has the rules.
"""


def _cxx_runtime_global():
    """Makes the system's libstdc++ global before the compiled module loads.

    Python loads extension modules locally (RTLD_LOCAL), so the C++ runtime they bring is not in
    the process's global symbol scope. The plugins then load C++ libraries of their own (LLVM
    under PoCL, cuDNN); if any library of ours carries a copy of the C++ runtime (toolchains that
    link libstdc++ statically do), libstdc++'s own references could bind to that copy and those
    libraries crash in std::call_once. Loading libstdc++ globally first gives the process one C++
    runtime, as a C++ program has. PARENCHYMA_GLOBAL_CXX_RUNTIME=0 skips it (for diagnosis).
    """
    import os
    import sys

    if not sys.platform.startswith("linux"):
        return
    if os.environ.get("PARENCHYMA_GLOBAL_CXX_RUNTIME", "1") == "0":
        return
    import ctypes

    try:
        ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass  # no libstdc++.so.6 here (another C++ runtime): nothing to make global


_cxx_runtime_global()

from . import _args, _parenchyma  # noqa: E402

# Argument type errors name the parameter (parenchyma.ArgumentTypeError): before anything takes
# the compiled functions.
_args.install(_parenchyma, "parenchyma")
_args.install(_parenchyma.blas, "parenchyma.blas")
_args.install(_parenchyma.nn, "parenchyma.nn")
_args.install(_parenchyma.coll, "parenchyma.coll")
_args.install(_parenchyma._array, "parenchyma._array")

from ._parenchyma import (DLPACK_VERSION, ArgumentTypeError, Backend, Error,  # noqa: E402
                          Tensor, __version__, devices, from_dlpack, info)
from . import blas, coll, nn  # noqa: E402
from . import _tensor, array_api, random  # noqa: E402,F401  (_tensor: the Tensor's array methods)

__all__ = [
    "DLPACK_VERSION",
    "ArgumentTypeError",
    "Backend",
    "Error",
    "Tensor",
    "array_api",
    "asarray",
    "blas",
    "coll",
    "devices",
    "from_dlpack",
    "info",
    "nn",
    "random",
    "zeros",
    "__version__",
]


def zeros(shape, dtype="float32"):
    """A Tensor of zeros of the given shape and dtype (on the host; inside a `with backend:`
    block of this thread, on that backend)."""
    t = Tensor.zeros(shape, dtype)
    context = _parenchyma._array.context_backend()
    return t.to(context) if context is not None else t


def asarray(obj, dtype=None, backend=None):
    """A Tensor for `obj`, without a copy where possible.

    A Tensor is returned as it is; an object with __dlpack__ (NumPy, PyTorch, ...) is imported
    with from_dlpack (aliasing its memory); anything else (lists, scalars, non-contiguous or
    read-only arrays) goes through numpy.ascontiguousarray first, a copy the Tensor keeps alive.
    `dtype` converts (a copy) when the data has another one; `backend` is passed to from_dlpack
    (default: the backend of the innermost `with backend:` block of this thread, if any).
    """
    if backend is None and not isinstance(obj, Tensor):
        backend = _parenchyma._array.context_backend()
    if isinstance(obj, Tensor):
        if dtype is not None and str(_np_dtype(dtype)) != obj.dtype:
            raise _error("invalid_argument", "parenchyma.asarray",
                         "argument dtype: converting a Tensor (" + obj.dtype
                         + ") is not supported; convert its numpy() view")
        return obj
    import numpy as np

    if dtype is None and hasattr(obj, "__dlpack__"):
        flags = getattr(obj, "flags", None)
        if flags is None or (flags.c_contiguous and flags.writeable):
            return from_dlpack(obj, backend)
    array = np.ascontiguousarray(obj, dtype=_np_dtype(dtype) if dtype is not None else None)
    if not array.flags.writeable:
        array = array.copy()  # NumPy exports no read-only array through DLPack
    return from_dlpack(array, backend)


def _np_dtype(dtype):
    import numpy as np

    return np.dtype(dtype)


def _error(code, origin, message):
    e = Error(origin + ": " + message)
    e.code, e.origin, e.message = code, origin, message
    e.description = code.replace("_", " ")
    return e
