"""parenchyma.array_api: the Python Array API standard (2024.12) over parenchyma.Tensor.

    import parenchyma.array_api as xp
    x = xp.linspace(0, 1, 5, dtype=xp.float32)      # on the default backend
    y = xp.sum(xp.exp(x) * 2 - 1)                    # the chain runs fused with the sum

Every function runs on the backend of its Tensor arguments (Tensor.device); creation functions
take device=<parenchyma.Backend> (default: the default backend, parenchyma.Backend()). The
semantics are the array front-end's (parenchyma/array.hpp): NumPy 2 promotion with Python-style
weak scalars, broadcasting, views that share memory, lazy elementwise chains that run as one
program. dtypes are their names (xp.float32 == "float32"). What is not supported raises
parenchyma.Error (code 'unsupported'); docs/python.md has the table.
"""

import builtins
import collections as _collections
import math as _math
import operator as _operator

from ._parenchyma import Backend, Error, Tensor
from ._parenchyma import _array as _a
from . import _tensor  # noqa: F401  (installs the Tensor methods)
from ._args import as_float as _as_float, as_int as _as_int, type_error as _type_error

__array_api_version__ = "2024.12"

# ---- data types ---------------------------------------------------------------------------
bool = "bool"  # noqa: A001  (the standard's name)
int8 = "int8"
int16 = "int16"
int32 = "int32"
int64 = "int64"
uint8 = "uint8"
float16 = "float16"  # an extension: the standard has no float16
float32 = "float32"
float64 = "float64"
bfloat16 = "bfloat16"  # an extension (computes in float32)

_ALL = (bool, int8, int16, int32, int64, uint8, float16, bfloat16, float32, float64)
_SIGNED = (int8, int16, int32, int64)
_UNSIGNED = (uint8,)
_FLOATING = (float16, bfloat16, float32, float64)
_UNSUPPORTED_DTYPES = ("uint16", "uint32", "uint64", "complex64", "complex128")

e = _math.e
inf = _math.inf
nan = _math.nan
pi = _math.pi
newaxis = None


def _error(code, origin, message):
    err = Error(origin + ": " + message)
    err.code, err.origin, err.message = code, origin, message
    err.description = code.replace("_", " ")
    return err


def _dtype(d, origin="dtype"):
    if d is None:
        return None
    name = getattr(d, "name", None) if not isinstance(d, str) else d
    if name is None:
        import numpy as np

        name = np.dtype(d).name
    if name in _UNSUPPORTED_DTYPES:
        raise _error("unsupported", "array_api", "argument " + origin + ": " + name
                     + " is not supported (dtypes: " + ", ".join(_ALL) + ")")
    if name not in _ALL:
        raise _error("invalid_argument", "array_api", "argument " + origin + ": unknown dtype "
                     + repr(d))
    return name


def _device(device, *arrays):
    if device is not None:
        if not isinstance(device, Backend):
            raise _type_error("parenchyma.array_api",
                              "argument device: expected a parenchyma.Backend, got "
                              + type(device).__name__)
        return device
    for x in arrays:
        if isinstance(x, Tensor) and x.backend is not None:
            return x.backend
    return None


def _tensor(x, origin):
    if isinstance(x, Tensor):
        return x
    raise _type_error("parenchyma.array_api." + origin,
                      "argument x: expected a parenchyma.Tensor, got " + type(x).__name__)


def _axes(axis, ndim):
    """None: all axes; an int or a tuple of ints."""
    if axis is None:
        return None
    if isinstance(axis, tuple):
        return list(axis)
    return [axis]


# ---- creation -----------------------------------------------------------------------------
def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """A Tensor of obj (a Tensor, a Python scalar or nested sequence, any DLPack or NumPy-like
    object); copy=None copies only when needed, False never (raising when it must), True
    always."""
    dt = _dtype(dtype)
    if isinstance(obj, Tensor):
        x = obj
        if device is not None and x.backend is not None and x.backend != device:
            if copy is False:
                raise ValueError("asarray: moving to another device needs a copy (copy=False)")
        moves = device is not None and x.backend is not None and x.backend != device
        if dt is not None and dt != x.dtype:
            if copy is False:
                raise ValueError("asarray: a dtype conversion needs a copy (copy=False)")
            x = _a.astype(x, dt, True)
        elif copy or moves:
            x = _a.copy(x)  # the input keeps its backend
        if device is not None:
            x.to(device)
        return x
    import numpy as np
    from . import from_dlpack

    if isinstance(obj, (builtins.bool, int, float)) or isinstance(obj, (list, tuple)):
        if dt is None:
            a = np.asarray(obj)
            if a.dtype.kind == "f":
                a = a.astype(np.float64)
            elif a.dtype.kind in "iu":
                a = a.astype(np.int64)
        else:
            a = np.asarray(obj, dtype=dt)
        if a.dtype.kind == "c":
            raise _error("unsupported", "array_api.asarray", "complex values are not supported")
        t = _from_numpy(np.array(a, order="C", copy=True))
    else:
        if copy is False and dt is not None:
            a = np.asarray(obj)
            if a.dtype.name != dt:
                raise ValueError("asarray: a dtype conversion needs a copy (copy=False)")
        a = np.asarray(obj, dtype=dt)
        if copy or not a.flags.c_contiguous or not a.flags.writeable:
            if copy is False:
                raise ValueError("asarray: the data needs a copy (copy=False)")
            a = np.array(a, order="C", copy=True)
        _dtype(a.dtype.name, "obj")
        t = _from_numpy(a)
    if device is not None:
        t.to(device)
    return t


def _from_numpy(a):
    """A Tensor aliasing the NumPy array a (bool: a copy through uint8 where NumPy cannot
    export bool through DLPack, before 1.25)."""
    from . import from_dlpack as _from

    if a.dtype.name == "bool":
        try:
            return _from(a)
        except (Error, BufferError, TypeError):
            return _a.astype(_from(a.view("uint8")), "bool", True)
    return _from(a)


def from_dlpack(x, /, *, device=None, copy=None):
    """Imports a DLPack producer (no copy unless copy=True)."""
    from . import from_dlpack as _from

    t = _from(x, device)
    return _a.copy(t) if copy else t


def empty(shape, *, dtype=None, device=None):
    return _a.empty(_shape(shape), _dtype(dtype) or float64, _device(device))


def empty_like(x, /, *, dtype=None, device=None):
    return _a.empty(x.shape, _dtype(dtype) or x.dtype, _device(device, x))


def zeros(shape, *, dtype=None, device=None):
    return _a.full(_shape(shape), 0, _dtype(dtype) or float64, _device(device))


def zeros_like(x, /, *, dtype=None, device=None):
    return _a.full(x.shape, 0, _dtype(dtype) or x.dtype, _device(device, x))


def ones(shape, *, dtype=None, device=None):
    return _a.full(_shape(shape), 1, _dtype(dtype) or float64, _device(device))


def ones_like(x, /, *, dtype=None, device=None):
    return _a.full(x.shape, 1, _dtype(dtype) or x.dtype, _device(device, x))


def _fill_dtype(v):
    if isinstance(v, builtins.bool):
        return bool
    if isinstance(v, int):
        return int64
    if isinstance(v, float):
        return float64
    raise _type_error("parenchyma.array_api.full",
                      "argument fill_value: expected a bool, int or float, got "
                      + type(v).__name__)


def full(shape, fill_value, *, dtype=None, device=None):
    return _a.full(_shape(shape), fill_value, _dtype(dtype) or _fill_dtype(fill_value),
                   _device(device))


def full_like(x, /, fill_value, *, dtype=None, device=None):
    return _a.full(x.shape, fill_value, _dtype(dtype) or x.dtype, _device(device, x))


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        dtype = float64 if builtins.any(isinstance(v, float) for v in (start, stop, step)) \
            else int64
    o = "parenchyma.array_api.arange"
    return _a.arange(_as_float(start, o, "start"), _as_float(stop, o, "stop"),
                     _as_float(step, o, "step"), _dtype(dtype), _device(device))


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    if isinstance(start, complex) or isinstance(stop, complex):
        raise _error("unsupported", "array_api.linspace", "complex values are not supported")
    o = "parenchyma.array_api.linspace"
    return _a.linspace(_as_float(start, o, "start"), _as_float(stop, o, "stop"),
                       _as_int(num, o, "num"), endpoint, _dtype(dtype) or float64,
                       _device(device))


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    return _a.eye(n_rows, n_cols, k, _dtype(dtype) or float64, _device(device))


def meshgrid(*arrays, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError("indexing must be 'xy' or 'ij'")
    n = len(arrays)
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        pos = i
        if indexing == "xy" and n >= 2 and i < 2:
            pos = 1 - i
        s = [1] * n
        s[pos] = a.shape[0]
        out.append(_a.copy(broadcast_to(reshape(a, tuple(s)), tuple(shape))))
    return out


def _tri(x, k, lower):
    n, m = x.shape[-2], x.shape[-1]
    i = _a.expand_dims(arange(n, device=x.device), 1)
    j = _a.expand_dims(arange(m, device=x.device), 0)
    keep = (j - i <= k) if lower else (j - i >= k)
    return where(keep, x, zeros((), dtype=x.dtype, device=x.device))


def tril(x, /, *, k=0):
    return _tri(x, k, True)


def triu(x, /, *, k=0):
    return _tri(x, k, False)


def _shape(shape):
    if hasattr(shape, "__index__"):
        return (shape.__index__(),)
    return tuple(shape)


# ---- data type functions ------------------------------------------------------------------
def astype(x, dtype, /, *, copy=True, device=None):
    dt = _dtype(dtype)
    if not copy and dt == x.dtype and (device is None or device == x.device):
        return x
    r = _a.astype(x, dt, True)
    if device is not None:
        r.to(device)
    return r


def can_cast(from_, to, /):
    f = from_.dtype if isinstance(from_, Tensor) else _dtype(from_)
    return _a.promote(f, _dtype(to)) == _dtype(to)


class _FInfo:
    def __init__(self, dtype):
        import numpy as np

        name = _dtype(dtype)
        if name == bfloat16:
            self.bits, self.eps, self.max = 16, 2.0 ** -7, 3.3895313892515355e38
            self.min, self.smallest_normal = -self.max, 2.0 ** -126
        else:
            fi = np.finfo(name)
            self.bits, self.eps, self.max = fi.bits, float(fi.eps), float(fi.max)
            self.min, self.smallest_normal = float(fi.min), float(fi.smallest_normal)
        self.dtype = name

    def __repr__(self):
        return "finfo(dtype=%s)" % self.dtype


class _IInfo:
    def __init__(self, dtype):
        import numpy as np

        ii = np.iinfo(_dtype(dtype))
        self.bits, self.max, self.min, self.dtype = ii.bits, int(ii.max), int(ii.min), _dtype(dtype)

    def __repr__(self):
        return "iinfo(dtype=%s)" % self.dtype


def finfo(type, /):
    name = type.dtype if isinstance(type, Tensor) else _dtype(type)
    if name not in _FLOATING:
        raise _error("invalid_argument", "array_api.finfo", name + " is not a floating dtype")
    return _FInfo(name)


def iinfo(type, /):
    name = type.dtype if isinstance(type, Tensor) else _dtype(type)
    if name not in _SIGNED + _UNSIGNED:
        raise _error("invalid_argument", "array_api.iinfo", name + " is not an integer dtype")
    return _IInfo(name)


_KINDS = {
    "bool": (bool,),
    "signed integer": _SIGNED,
    "unsigned integer": _UNSIGNED,
    "integral": _SIGNED + _UNSIGNED,
    "real floating": _FLOATING,
    "complex floating": (),
    "numeric": _SIGNED + _UNSIGNED + _FLOATING,
}


def isdtype(dtype, kind):
    d = _dtype(dtype)
    if isinstance(kind, tuple):
        return builtins.any(isdtype(d, k) for k in kind)
    if isinstance(kind, str) and kind in _KINDS and kind != "bool":
        return d in _KINDS[kind]
    return d == _dtype(kind)


def result_type(*arrays_and_dtypes):
    """The dtype of an operation on these (Tensors and dtypes strong; Python scalars weak)."""
    items = []
    for a in arrays_and_dtypes:
        if isinstance(a, Tensor):
            items.append(a.dtype)
        elif isinstance(a, (builtins.bool, int, float)):
            items.append(a)
        else:
            items.append(_dtype(a))
    strong = [a for a in items if isinstance(a, str)]
    weak = [a for a in items if not isinstance(a, str)]
    if not strong:
        raise _error("invalid_argument", "array_api.result_type",
                     "at least one array or dtype is required")
    r = strong[0]
    for a in strong[1:] + weak:
        r = _a.result_type(r, a)
    return r


# ---- elementwise --------------------------------------------------------------------------
def _elementwise1(name, impl=None):
    def f(x, /):
        return _a.unary(impl or name, _tensor(x, name))

    f.__name__ = name
    f.__doc__ = "%s(x), elementwise (lazy: fuses with the operations around it)." % name
    return f


def _elementwise2(name, impl=None):
    def f(x1, x2, /):
        if not isinstance(x1, Tensor) and not isinstance(x2, Tensor):
            raise _type_error("parenchyma.array_api." + name,
                              "argument x1 or x2: expected a parenchyma.Tensor (at least one of "
                              "them), got %s and %s" % (type(x1).__name__, type(x2).__name__))
        return _a.binary(impl or name, _tensor_or_scalar(x1), _tensor_or_scalar(x2))

    f.__name__ = name
    f.__doc__ = ("%s(x1, x2), elementwise with broadcasting and promotion (a Python scalar is "
                 "weak; lazy: fuses with the operations around it)." % name)
    return f


def _tensor_or_scalar(x):
    if isinstance(x, (Tensor, builtins.bool, int, float)):
        return x
    return asarray(x)


for _n in ("abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "bitwise_invert", "ceil",
           "cos", "cosh", "exp", "expm1", "floor", "isfinite", "isinf", "isnan", "log", "log1p",
           "log2", "log10", "logical_not", "negative", "positive", "reciprocal", "round", "sign",
           "sin", "sinh", "square", "sqrt", "tan", "tanh", "trunc", "erf", "rsqrt"):
    globals()[_n] = _elementwise1(_n)
for _n in ("add", "atan2", "bitwise_and", "bitwise_left_shift", "bitwise_or",
           "bitwise_right_shift", "bitwise_xor", "copysign", "divide", "equal", "floor_divide",
           "greater", "greater_equal", "hypot", "less", "less_equal", "logaddexp", "logical_and",
           "logical_or", "logical_xor", "maximum", "minimum", "multiply", "nextafter",
           "not_equal", "pow", "remainder", "subtract"):
    globals()[_n] = _elementwise2(_n)
del _n


def clip(x, /, min=None, max=None):
    r = x
    if min is not None:
        r = _a.binary("maximum", r, min)
    if max is not None:
        r = _a.binary("minimum", r, max)
    if r is x:
        return _a.copy(x)
    return r if r.dtype == x.dtype else _a.astype(r, x.dtype, True)


def signbit(x, /):
    if x.dtype in _FLOATING:
        return less(copysign(1.0, x), 0)  # noqa: F821  (defined above by the loop)
    if x.dtype in _SIGNED:
        return less(x, 0)  # noqa: F821
    return _a.full(x.shape, False, bool, x.device)


def real(x, /):
    return _a.copy(x)


def conj(x, /):
    return _a.copy(x)


def imag(x, /):
    return _a.full(x.shape, 0, x.dtype, x.device)


# ---- indexing -----------------------------------------------------------------------------
def take(x, indices, /, *, axis=None):
    """x's elements at integer `indices` along `axis` (required unless x is 1-d). Indices
    outside [-n, n) are clipped to the nearest end (NumPy's mode="clip"; the standard leaves
    them unspecified)."""
    if axis is None:
        if x.ndim != 1:
            raise _error("invalid_argument", "array_api.take",
                         "argument axis: required for arrays of %d dimensions" % x.ndim)
        axis = 0
    return _a.take(x, _tensor_or_scalar(indices), axis)


def take_along_axis(x, indices, /, *, axis=-1):
    """x's elements at `indices` along `axis`, element by element (indices has x's rank; the
    other axes broadcast, as NumPy's take_along_axis). Negative indices count from the end;
    indices outside [-n, n) are clipped to the nearest end, as take() does. One gather on the
    device (a non-row-major view of x is copied densely first); no synchronisation."""
    x = _tensor(x, "take_along_axis")
    dev = x.device
    indices = _index_operand(indices, dev, "take_along_axis", "indices")
    if x.ndim == 0:
        raise _error("invalid_argument", "array_api.take_along_axis",
                     "argument x: needs at least one dimension")
    if indices.ndim != x.ndim:
        raise _error("invalid_argument", "array_api.take_along_axis",
                     "argument indices: %d dimensions; x has %d (they must be equal)"
                     % (indices.ndim, x.ndim))
    if not -x.ndim <= axis < x.ndim:
        _bad_axis("take_along_axis", axis, x.ndim)
    ax = axis % x.ndim
    n = x.shape[ax]
    xb = x.shape[:ax] + x.shape[ax + 1:]
    ib = indices.shape[:ax] + indices.shape[ax + 1:]
    try:
        batch = broadcast_shapes(xb, ib)
    except Error:
        raise _error("invalid_argument", "array_api.take_along_axis",
                     "the shapes %s and %s do not broadcast outside axis %d"
                     % (x.shape, indices.shape, ax)) from None
    k = indices.shape[ax]
    if n == 0 and k > 0 and _math.prod(batch) > 0:
        raise _error("invalid_argument", "array_api.take_along_axis",
                     "argument x: axis %d is empty; nothing to take" % ax)
    out_shape = batch + (k,)
    if _math.prod(out_shape) == 0:
        r = _a.empty(out_shape, x.dtype, dev)
        return moveaxis(r, -1, ax)
    # Flat positions into x with the axis moved last (row-major): the clipped index along the
    # axis plus each batch coordinate times its stride (0 where x broadcasts that axis).
    src = reshape(moveaxis(x, ax, -1), (-1,))
    j = moveaxis(indices, ax, -1)
    if j.dtype != int64:
        j = _a.astype(j, int64, True)
    j = _a.where(_a.binary("less", j, 0), _a.binary("add", j, n), j)
    off = _a.binary("minimum", _a.binary("maximum", j, 0), builtins.max(n - 1, 0))
    stride = n
    nb = len(batch)
    for d in range(nb - 1, -1, -1):
        if xb[d] != 1 and batch[d] > 1:
            s = [1] * (nb + 1)
            s[d] = batch[d]
            term = _a.reshape(_a.arange(0.0, float(batch[d]) * stride, float(stride), int64,
                                        dev), tuple(s))
            off = _a.binary("add", off, term)
        stride *= xb[d]
    off = _a.broadcast_to(off, out_shape)
    return moveaxis(_a.take(src, off, 0), -1, ax)


def _check_mask(x, mask, origin):
    k = mask.ndim
    if k > x.ndim or tuple(mask.shape) != tuple(x.shape[:k]):
        raise _error("invalid_argument", origin,
                     "a boolean index of shape %s does not match the tensor's shape %s (it must "
                     "be the shape's leading dimensions)" % (mask.shape, x.shape))


def _mask_get(x, mask):
    """x[mask] for a bool mask of x's leading dimensions: the selected elements (or sub-arrays),
    in row-major order, along one new first axis. Reads the count back (a synchronisation);
    the positions and the gather run on the device."""
    _check_mask(x, mask, "parenchyma.Tensor.__getitem__")
    k = mask.ndim
    count, pos = _true_positions(_flat(mask))
    if k == 1:
        src = x
    elif k == 0:
        src = _a.expand_dims(x, 0)
    else:
        src = _a.reshape(x, (_math.prod(x.shape[:k]),) + tuple(x.shape[k:]))
    return _a.take(src, pos, 0)


def _mask_set(x, mask, value):
    """x[mask] = value. value broadcasts to the selection's shape (count,) + x.shape[k:]: one
    that broadcasts to x.shape[k:] is written with one where() on the device, without a
    synchronisation; one value per selected element (a first axis of length count) is gathered
    to its place by the mask's running count (the count is read back to check the length)."""
    origin = "parenchyma.Tensor.__setitem__"
    _check_mask(x, mask, origin)
    dev = x.device
    rest = tuple(x.shape[mask.ndim:])
    if isinstance(value, (builtins.bool, int, float)):
        v = _a.full((), value, x.dtype, dev)
    else:
        v = value if isinstance(value, Tensor) else asarray(value, device=dev)
        if v.dtype != x.dtype:
            v = _a.astype(v, x.dtype, True)
    while v.ndim > len(rest) + 1 and v.shape[0] == 1:
        v = _a.squeeze(v, 0)
    if v.ndim > len(rest) + 1:
        raise _error("invalid_argument", origin,
                     "a value of shape %s does not broadcast to the selection's shape (count,) + "
                     "%s" % (v.shape, rest))
    m = _a.reshape(mask, tuple(mask.shape) + (1,) * len(rest))
    if v.ndim == len(rest) + 1 and v.shape[0] != 1:
        # One value per selected element: element i of the selection takes v[running count - 1].
        flat = _flat(mask)
        cs = _a.scan("cumulative_sum", _a.astype(flat, int64, True), 0, False)
        (count,) = _read_ints(_last(cs)) if flat.shape[0] else (0,)
        if count != v.shape[0]:
            raise _error("invalid_argument", origin,
                         "a value of shape %s for %d selected elements (shape (%d,) + %s)"
                         % (v.shape, count, count, rest))
        if count == 0:
            return
        at = _a.reshape(_a.binary("maximum", _a.binary("subtract", cs, 1), 0), mask.shape)
        v = _a.take(v, at, 0)
    elif v.ndim == len(rest) + 1:
        v = _a.squeeze(v, 0)
    try:
        new = _a.where(m, v, x)
    except Error as e:
        raise _error("invalid_argument", origin,
                     "a value of shape %s does not broadcast to the selection's shape (count,) + "
                     "%s (%s)" % (v.shape, rest, e)) from None
    if tuple(new.shape) != tuple(x.shape):
        raise _error("invalid_argument", origin,
                     "a value of shape %s does not broadcast to the selection's shape (count,) + "
                     "%s" % (v.shape, rest))
    _a.assign(x, new)


# ---- linear algebra -----------------------------------------------------------------------
def matmul(x1, x2, /):
    """The matrix product with batch broadcasting (the front-end's matmul: 2-d floating
    products on the backend's gemm, others as one fused multiply-and-sum program)."""
    return _a.product("matmul", _tensor_or_scalar(x1), _tensor_or_scalar(x2), 0)


def matrix_transpose(x, /):
    if x.ndim < 2:
        raise _error("invalid_argument", "array_api.matrix_transpose",
                     "needs at least 2 dimensions, got %d" % x.ndim)
    axes = list(range(x.ndim))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return _a.permute_dims(x, axes)


def _T(x, /):
    if x.ndim != 2:
        raise _error("invalid_argument", "parenchyma.Tensor.T",
                     "T is the transpose of a 2-d tensor; this one has %d dimensions (use mT or "
                     "permute_dims)" % x.ndim)
    return _a.permute_dims(x, [1, 0])


def vecdot(x1, x2, /, *, axis=-1):
    x1, x2 = _tensor_or_scalar(x1), _tensor_or_scalar(x2)
    n1 = x1.shape[axis] if x1.ndim else None
    n2 = x2.shape[axis] if x2.ndim else None
    if n1 != n2:
        raise _error("invalid_argument", "array_api.vecdot",
                     "the contracted dimensions differ: %s and %s" % (n1, n2))
    r = _a.product("vecdot", x1, x2, axis)
    dt = result_type(x1, x2)
    return r if r.dtype == dt else _a.astype(r, dt, True)


def tensordot(x1, x2, /, *, axes=2):
    if isinstance(axes, int):
        return _a.product("tensordot", x1, x2, axes)
    a1, a2 = [list(a) if isinstance(a, (list, tuple)) else [a] for a in axes]
    if len(a1) != len(a2):
        raise _error("invalid_argument", "array_api.tensordot",
                     "argument axes: %d and %d axes" % (len(a1), len(a2)))
    a1 = [a % x1.ndim for a in a1]
    a2 = [a % x2.ndim for a in a2]
    free1 = [i for i in range(x1.ndim) if i not in a1]
    free2 = [j for j in range(x2.ndim) if j not in a2]
    return _a.product("tensordot", _a.permute_dims(x1, free1 + a1),
                      _a.permute_dims(x2, a2 + free2), len(a1))


# ---- manipulation -------------------------------------------------------------------------
def broadcast_arrays(*arrays):
    shape = broadcast_shapes(*[a.shape for a in arrays])
    return [_a.broadcast_to(a, shape) for a in arrays]


def broadcast_shapes(*shapes):
    r = ()
    for s in shapes:
        n = builtins.max(len(r), len(s))
        a = (1,) * (n - len(r)) + tuple(r)
        b = (1,) * (n - len(s)) + tuple(s)
        out = []
        for i, (p, q) in enumerate(zip(a, b)):
            if p != q and p != 1 and q != 1:
                raise _error("invalid_argument", "array_api.broadcast_shapes",
                             "shapes %s and %s do not broadcast" % (tuple(r), tuple(s)))
            out.append(q if p == 1 else p)
        r = tuple(out)
    return r


def broadcast_to(x, /, shape):
    return _a.broadcast_to(x, tuple(shape))


def concat(arrays, /, *, axis=0):
    arrays = [_tensor_or_scalar(a) for a in arrays]
    if axis is None:
        arrays = [_a.reshape(a, (-1,)) for a in arrays]
        axis = 0
    return _a.join("concat", arrays, axis)


def stack(arrays, /, *, axis=0):
    return _a.join("stack", [_tensor_or_scalar(a) for a in arrays], axis)


def unstack(x, /, *, axis=0):
    return tuple(_a.at(x, i, axis) for i in range(x.shape[axis]))


def expand_dims(x, /, axis=0):
    return _a.expand_dims(x, axis)


def flip(x, /, *, axis=None):
    return _a.flip(x, axis)


def moveaxis(x, source, destination, /):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination differ in length")
    nd = x.ndim
    src = [s % nd if -nd <= s < nd else _bad_axis("moveaxis", s, nd) for s in src]
    dst = [d % nd if -nd <= d < nd else _bad_axis("moveaxis", d, nd) for d in dst]
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _a.permute_dims(x, order)


def _bad_axis(fn, a, nd):
    raise _error("invalid_argument", "array_api." + fn,
                 "axis %d is out of range for %d dimensions" % (a, nd))


def permute_dims(x, /, axes):
    return _a.permute_dims(x, list(axes))


def _row_major(x):
    """Whether x's elements are in row-major order in memory (a reshape of it is a view)."""
    kind = _a.kind(x)
    if kind != "view":
        return True  # a whole tensor; a pending expression runs into a dense one
    _, strides = _a.view_layout(x)
    expect = 1
    for n, st in zip(reversed(x.shape), reversed(strides)):
        if n != 1 and st != expect:
            return False
        expect *= n
    return True


def reshape(x, /, shape, *, copy=None):
    """x's values in another shape: a view when x is in row-major order (always for
    copy=False, which raises ValueError where that is not possible), else a copy."""
    if copy:
        return _a.reshape(_a.copy(x), tuple(shape))
    if copy is False and x.size > 1 and not _row_major(x):
        raise ValueError("reshape: this view is not in row-major order; reshaping it needs a "
                         "copy (copy=False)")
    return _a.reshape(x, tuple(shape))


def roll(x, /, shift, *, axis=None):
    if axis is None:
        return reshape(roll(reshape(x, (-1,)), shift, axis=0), x.shape)
    shifts = [shift] if isinstance(shift, int) else list(shift)
    axes = [axis] if isinstance(axis, int) else list(axis)
    if len(shifts) != len(axes):
        raise ValueError("roll: shift and axis differ in length")
    r = x
    for s, a in zip(shifts, axes):
        n = r.shape[a]
        if n == 0:
            continue
        s %= n
        if s == 0:
            continue
        r = concat([_a.slice(r, a, n - s, None, 1), _a.slice(r, a, 0, n - s, 1)], axis=a)
    return r if r is not x else _a.copy(x)


def squeeze(x, /, axis):
    return _a.squeeze(x, axis)


def tile(x, repetitions, /):
    reps = tuple(repetitions)
    nd = builtins.max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    v = _a.reshape(x, shape)
    inter, target = [], []
    for r, s in zip(reps, shape):
        inter += [1, s]
        target += [r, s]
    v = _a.broadcast_to(_a.reshape(v, tuple(inter)), tuple(target))
    return _a.reshape(_a.copy(v), tuple(r * s for r, s in zip(reps, shape)))


def repeat(x, repeats, /, *, axis=None):
    """Each element of x (flattened when axis is None) `repeats` times along the axis. repeats
    is an int or a 1-d integer array with one count per element of the axis (or one for all).
    With an array, the result's length is its sum, read back to the host (a synchronisation,
    as CuPy's); the gather indices are found on the device (a binary search of the running
    count)."""
    if isinstance(repeats, Tensor) or not hasattr(repeats, "__index__"):
        return _repeat_array(x, repeats, axis)
    repeats = _operator.index(repeats)
    if repeats < 0:
        raise _error("invalid_argument", "array_api.repeat",
                     "argument repeats: %d; counts are >= 0" % repeats)
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    ax = axis % x.ndim
    v = _a.expand_dims(x, ax + 1)
    shape = list(v.shape)
    shape[ax + 1] = repeats
    v = _a.copy(_a.broadcast_to(v, tuple(shape)))
    out = list(x.shape)
    out[ax] *= repeats
    return _a.reshape(v, tuple(out))


def _repeat_array(x, repeats, axis):
    x = _tensor(x, "repeat")
    dev = x.device
    r = _index_operand(repeats, dev, "repeat", "repeats")
    if r.ndim > 1:
        raise _error("invalid_argument", "array_api.repeat",
                     "argument repeats: %d dimensions; an int or a 1-d array" % r.ndim)
    if axis is None:
        x = _flat(x)
        axis = 0
    if not -x.ndim <= axis < x.ndim:
        _bad_axis("repeat", axis, x.ndim)
    ax = axis % x.ndim
    n = x.shape[ax]
    if r.ndim == 0 or r.shape[0] != n:
        if r.ndim == 1 and r.shape[0] != 1:
            raise _error("invalid_argument", "array_api.repeat",
                         "argument repeats: %d counts for an axis of %d" % (r.shape[0], n))
        r = _a.broadcast_to(_a.reshape(r, (1,)), (n,))
    if n == 0:
        return _a.copy(x)
    cs = _a.scan("cumulative_sum", _a.astype(r, int64, True), 0, False)
    total, low = _read_ints(_last(cs), _a.reduce("min", r, None, False, 0.0))
    if low < 0:
        raise _error("invalid_argument", "array_api.repeat",
                     "argument repeats: a count of %d; counts are >= 0" % low)
    return _a.take(x, _running_count_search(cs, total, dev), ax)


# ---- searching ----------------------------------------------------------------------------
def argmax(x, /, *, axis=None, keepdims=False):
    return _a.argreduce("argmax", x, axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    return _a.argreduce("argmin", x, axis, keepdims)


def where(condition, x1, x2, /):
    return _a.where(_tensor_or_scalar(condition), _tensor_or_scalar(x1), _tensor_or_scalar(x2))


def count_nonzero(x, /, *, axis=None, keepdims=False):
    return sum(not_equal(x, 0), axis=axis, keepdims=keepdims)  # noqa: F821


def nonzero(x, /):
    """The indices of x's nonzero elements (NaN is nonzero, -0.0 is zero): a tuple of x.ndim
    int64 arrays, in row-major order. x needs at least one dimension (the standard's rule; a
    0-d x raises). The result's length depends on the data: the call reads that count back to
    the host (it synchronises, as CuPy's does); the indices are found and stay on the
    device."""
    x = _tensor(x, "nonzero")
    if x.ndim == 0:
        raise _error("invalid_argument", "array_api.nonzero",
                     "x is zero-dimensional; nonzero needs at least one dimension (use "
                     "nonzero(expand_dims(x)) or x != 0)")
    count, flat = _true_positions(_a.astype(_flat(x), bool, True))
    out = []
    stride = _math.prod(x.shape)
    for d, n in enumerate(x.shape):  # the row-major coordinates of each flat position
        stride = stride // n if n else 0
        i = flat
        if stride > 1:
            i = _a.binary("floor_divide", i, stride)
        if d > 0:
            i = _a.binary("remainder", i, n)
        out.append(i)
    return tuple(out)


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """The positions (int64, x2's shape) at which x2's values would be inserted into the 1-d
    x1, sorted ascending (or sorted by `sorter`, the positions that sort it), to keep it sorted:
    side="left" the first such position, "right" the last. The order is sort()'s: NaN after
    every number, -0.0 equal to +0.0. A binary search on the device (log2(len(x1)) + 1
    gathers over x2's elements); no synchronisation."""
    x1 = _tensor(x1, "searchsorted")
    if x1.ndim != 1:
        raise _error("invalid_argument", "array_api.searchsorted",
                     "argument x1: %d dimensions; x1 is 1-d" % x1.ndim)
    if side not in ("left", "right"):
        raise _error("invalid_argument", "array_api.searchsorted",
                     "argument side: %r; 'left' or 'right'" % (side,))
    dev = x1.device
    if isinstance(x2, (builtins.bool, int, float)):
        dt = _a.result_type(x1.dtype, x2)  # a weak scalar: x1's dtype where the value fits
        if not isinstance(x2, (builtins.bool, float)) and dt in _SIGNED + _UNSIGNED:
            info = iinfo(dt)
            if not info.min <= x2 <= info.max:
                dt = int64
        x2 = _a.full((), x2, dt, dev)
    x2 = _tensor(_tensor_or_scalar(x2), "searchsorted")
    if sorter is not None:
        sorter = _index_operand(sorter, dev, "searchsorted", "sorter")
        if sorter.shape != x1.shape:
            raise _error("invalid_argument", "array_api.searchsorted",
                         "argument sorter: shape %s; x1 has %s" % (sorter.shape, x1.shape))
        x1 = _a.take(x1, sorter, 0)
    return _search(x1, x2, side == "right")


# ---- data-dependent shapes: compaction and search on the device ---------------------------
def _flat(x):
    return _a.reshape(x, (-1,))


def _index_operand(v, device, fn, arg):
    """v (a Tensor, or anything asarray takes) as an integer Tensor on `device`."""
    if not isinstance(v, Tensor):
        import numpy as np

        a = np.asarray(v)
        # an empty sequence is an integer one here (NumPy makes [] float64)
        v = asarray(a.astype(np.int64) if a.size == 0 and a.dtype.kind == "f" else a,
                    device=device)
    if v.dtype not in _SIGNED + _UNSIGNED:
        raise _error("invalid_argument", "array_api." + fn,
                     "argument %s: dtype %s; it takes integers" % (arg, v.dtype))
    return v


def _read_ints(*scalars):
    """The values of 0-d integer tensors as Python ints, in one read back to the host (this
    waits for the device: a data-dependent shape needs it)."""
    parts = [_a.reshape(_a.astype(t, int64, True), (1,)) for t in scalars]
    v = _a.join("concat", parts, 0) if len(parts) > 1 else parts[0]
    return [int(i) for i in v.numpy().tolist()]


def _last(t):
    """t[-1] of a 1-d tensor as a 0-d tensor of its own (not a view: reading it back moves one
    element, not t)."""
    return _a.copy(_a.at(t, t.shape[0] - 1, 0))


def _search(x1, v, right, nan_aware=None):
    """For each element of v, the number of elements of the sorted 1-d x1 that sort before it
    (right: before or equal), in sort()'s order (NaN last). Binary lifting: one gather and one
    elementwise program per bit of len(x1); int64, v's shape."""
    dev = x1.device
    n = x1.shape[0]
    pos = _a.full(v.shape, 0, int64, dev)
    if n == 0 or v.size == 0:
        return pos
    if x1.dtype == bool:
        x1 = _a.astype(x1, uint8, True)
    if v.dtype == bool:
        v = _a.astype(v, uint8, True)
    if nan_aware is None:  # only a NaN in v changes the comparisons (a NaN of x1 compares false)
        nan_aware = v.dtype in _FLOATING
    if nan_aware:
        vnan = _a.unary("isnan", v)
        _a.eval(vnan)
    step = 1 << (n.bit_length() - 1)
    while step:
        cand = _a.binary("add", pos, step)
        a = _a.take(x1, _a.binary("minimum", _a.binary("subtract", cand, 1), n - 1), 0)
        if right:
            before = _a.binary("less_equal", a, v)
            if nan_aware:  # NaN sorts after every number and with the other NaNs
                before = _a.binary("logical_or", before, vnan)
        else:
            before = _a.binary("less", a, v)
            if nan_aware:
                before = _a.binary("logical_or", before, _a.binary(
                    "logical_and", vnan, _a.unary("logical_not", _a.unary("isnan", a))))
        ok = _a.binary("logical_and", before, _a.binary("less_equal", cand, n))
        pos = _a.where(ok, cand, pos)
        _a.eval(pos)
        step >>= 1
    return pos


def _true_positions(flags):
    """(count, positions): the positions (int64, 1-d, ascending) of the true elements of the 1-d
    bool tensor `flags`. Reads the count back (a synchronisation); the positions are found on
    the device by a binary search of the flags' running count."""
    dev = flags.device
    n = flags.shape[0]
    if n == 0:
        return 0, _a.empty((0,), int64, dev)
    cs = _a.scan("cumulative_sum", _a.astype(flags, int64, True), 0, False)
    (count,) = _read_ints(_last(cs))
    return count, _running_count_search(cs, count, dev)


def _running_count_search(cs, count, dev):
    """Where the running count cs (nondecreasing, int64) first reaches 1, 2, ..., count."""
    return _search(cs, _a.arange(0.0, float(count), 1.0, int64, dev), True, False)


# ---- statistical --------------------------------------------------------------------------
def _reduce(name, x, axis, keepdims, correction=0.0, dtype=None):
    x = _tensor(x, name)
    if dtype is not None:
        x = _a.astype(x, _dtype(dtype), False)
    if isinstance(axis, tuple) and len(axis) == 0:
        # over no axes: the values themselves (in the reduction's dtype)
        r = _a.reduce(name, _a.expand_dims(x, 0), 0, keepdims=False, correction=correction)
        return r
    return _a.reduce(name, x, axis, keepdims,
                     _as_float(correction, "parenchyma.array_api." + name, "correction"))


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    return _reduce("sum", x, axis, keepdims, dtype=dtype)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return _reduce("prod", x, axis, keepdims, dtype=dtype)


def max(x, /, *, axis=None, keepdims=False):
    return _reduce("max", x, axis, keepdims)


def min(x, /, *, axis=None, keepdims=False):
    return _reduce("min", x, axis, keepdims)


def mean(x, /, *, axis=None, keepdims=False):
    return _reduce("mean", x, axis, keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    return _reduce("var", x, axis, keepdims, correction)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return _reduce("std", x, axis, keepdims, correction)


def logsumexp(x, /, *, axis=None, keepdims=False):
    """An extension: log(sum(exp(x))) computed stably."""
    return _reduce("logsumexp", x, axis, keepdims)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    if dtype is not None:
        x = _a.astype(x, _dtype(dtype), False)
    r = _a.scan("cumulative_sum", x, axis, include_initial)
    return r if dtype is None or r.dtype == _dtype(dtype) else _a.astype(r, _dtype(dtype), False)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    if dtype is not None:
        x = _a.astype(x, _dtype(dtype), False)
    r = _a.scan("cumulative_prod", x, axis, include_initial)
    return r if dtype is None or r.dtype == _dtype(dtype) else _a.astype(r, _dtype(dtype), False)


# ---- sorting ------------------------------------------------------------------------------
def sort(x, /, *, axis=-1, descending=False, stable=True):
    """Stable (equal values keep their order, descending too); NaN last ascending, first
    descending; -0.0 and +0.0 equal."""
    return _a.sort("sort", x, axis, descending, stable)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """The positions (int64) that sort x along the axis; stable as sort()."""
    return _a.sort("argsort", x, axis, descending, stable)


# ---- utility ------------------------------------------------------------------------------
def all(x, /, *, axis=None, keepdims=False):
    return _reduce("all", x, axis, keepdims)


def any(x, /, *, axis=None, keepdims=False):
    return _reduce("any", x, axis, keepdims)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = concat(parts, axis=axis)
    for _ in range(n):
        m = x.shape[axis]
        x = subtract(_a.slice(x, axis, 1, None, 1), _a.slice(x, axis, 0, m - 1, 1))  # noqa: F821
    return x


# ---- linalg extension namespace (vector_norm, matmul, ...) -----------------------------------
class _Linalg:
    matmul = staticmethod(matmul)
    matrix_transpose = staticmethod(matrix_transpose)
    tensordot = staticmethod(tensordot)
    vecdot = staticmethod(vecdot)

    @staticmethod
    def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
        return _a.vector_norm(x, axis, _as_float(ord, "parenchyma.array_api.linalg.vector_norm",
                                                 "ord"), keepdims)


linalg = _Linalg()


# ---- sets ---------------------------------------------------------------------------------
UniqueAllResult = _collections.namedtuple("UniqueAllResult",
                                          ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = _collections.namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = _collections.namedtuple("UniqueInverseResult",
                                              ["values", "inverse_indices"])
UniqueAllResult.__doc__ = "unique_all's result: (values, indices, inverse_indices, counts)."
UniqueCountsResult.__doc__ = "unique_counts's result: (values, counts)."
UniqueInverseResult.__doc__ = "unique_inverse's result: (values, inverse_indices)."


def _unique(x, origin, indices=False, inverse=False, counts=False):
    """The distinct values of x (flattened), ascending in sort()'s order, and what else is
    asked: the index of each value's first occurrence, each element's value (x's shape), each
    value's count (all int64). NaNs are each distinct (the standard's rule); -0.0 and +0.0 are
    one value (the first in x's order). One stable sort and a binary search on the device; the
    number of values is read back to the host (a synchronisation)."""
    x = _tensor(x, origin)
    dev = x.device
    flat = _flat(x)
    n = flat.shape[0]
    r = {}
    if n == 0:
        r["values"] = _a.empty((0,), x.dtype, dev)
        r["indices"] = _a.empty((0,), int64, dev)
        r["counts"] = _a.empty((0,), int64, dev)
        r["inverse_indices"] = _a.empty(x.shape, int64, dev)
        return r
    if indices:
        perm = _a.sort("argsort", flat, 0, False, True)
        s = _a.take(flat, perm, 0)
    else:
        s = _a.sort("sort", flat, 0, False, True)
    # A value starts where it differs from the one before it (NaN != NaN: each NaN starts one).
    new = _a.binary("not_equal", _a.slice(s, 0, 1, None, 1), _a.slice(s, 0, 0, n - 1, 1))
    new = _a.join("concat", [_a.full((1,), 1, int64, dev), _a.astype(new, int64, True)], 0)
    cs = _a.scan("cumulative_sum", new, 0, False)
    (u,) = _read_ints(_last(cs))
    starts = _running_count_search(cs, u, dev)
    r["values"] = _a.take(s, starts, 0)
    if indices:
        r["indices"] = _a.take(perm, starts, 0)  # the sort is stable: a value's first occurrence
    if counts:
        ends = _a.join("concat", [_a.slice(starts, 0, 1, None, 1), _a.full((1,), n, int64, dev)],
                       0)
        r["counts"] = _a.binary("subtract", ends, starts)
    if inverse:
        # An element's value: the number of values that sort before it (a binary search of the
        # values). A NaN is the k-th NaN value, after the u - nnan numbers.
        g = _search(r["values"], flat, False, False)
        if x.dtype in _FLOATING:
            isn = _a.unary("isnan", flat)
            csn = _a.scan("cumulative_sum", _a.astype(isn, int64, True), 0, False)
            first_nan = _a.binary("subtract", u - 1, _last(csn))
            g = _a.where(isn, _a.binary("add", csn, first_nan), g)
        r["inverse_indices"] = _a.reshape(g, x.shape)
    return r


def unique_values(x, /):
    """The distinct values of x, 1-d, ascending (NaNs each distinct, last). Synchronises: the
    number of values is read back (see unique_all)."""
    return _unique(x, "unique_values")["values"]


def unique_counts(x, /):
    """(values, counts): unique_values(x) and how often each occurs in x (int64)."""
    r = _unique(x, "unique_counts", counts=True)
    return UniqueCountsResult(r["values"], r["counts"])


def unique_inverse(x, /):
    """(values, inverse_indices): unique_values(x) and, for each element of x (x's shape), the
    position of its value (int64): values[inverse_indices] is x."""
    r = _unique(x, "unique_inverse", inverse=True)
    return UniqueInverseResult(r["values"], r["inverse_indices"])


def unique_all(x, /):
    """(values, indices, inverse_indices, counts): the distinct values of x, ascending in
    sort()'s order; the flat index of each one's first occurrence in x; for each element of x
    (x's shape) the position of its value; how often each occurs. Indices and counts are int64.
    NaNs are each distinct (the standard's rule: each is its own value, count 1); -0.0 and
    +0.0 are one value. Runs on the device (a stable sort, then binary searches); the number of
    values decides the result's shape, so it is read back to the host: the call synchronises,
    as CuPy's does."""
    r = _unique(x, "unique_all", indices=True, inverse=True, counts=True)
    return UniqueAllResult(r["values"], r["indices"], r["inverse_indices"], r["counts"])


def __array_namespace_info__():
    return _Info()


class _Info:
    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": None}

    def default_device(self):
        return _a.default_backend()

    def default_dtypes(self, *, device=None):
        return {"real floating": float64, "complex floating": None, "integral": int64,
                "indexing": int64}

    def devices(self):
        return [_a.default_backend()]

    def dtypes(self, *, device=None, kind=None):
        names = [d for d in _ALL if d != bfloat16]
        if kind is not None:
            names = [d for d in names if isdtype(d, kind)]
        return {d: d for d in names}


# ---- docstrings of the functions above that have none in their body --------------------------
_DOCS = {
    "empty": "An uninitialised Tensor of `shape` (dtype: float64 by default) on `device` (default: "
             "the default backend, or the innermost `with backend:` of this thread).",
    "empty_like": "An uninitialised Tensor with x's shape (and dtype and device unless given).",
    "zeros": "A Tensor of zeros of `shape` (dtype: float64 by default) on `device`.",
    "zeros_like": "A Tensor of zeros with x's shape (and dtype and device unless given).",
    "ones": "A Tensor of ones of `shape` (dtype: float64 by default) on `device`.",
    "ones_like": "A Tensor of ones with x's shape (and dtype and device unless given).",
    "full": "A Tensor of `shape` filled with `fill_value` (dtype: from the value unless given).",
    "full_like": "A Tensor with x's shape filled with `fill_value`.",
    "arange": "Evenly spaced values in [start, stop) with `step` (arange(n): 0 .. n-1).",
    "linspace": "`num` evenly spaced values from start to stop (stop included when endpoint).",
    "eye": "A 2-d Tensor with ones on the k-th diagonal and zeros elsewhere.",
    "meshgrid": "Coordinate matrices from 1-d Tensors ('xy' or 'ij' indexing), as a list.",
    "tril": "x with the elements above the k-th diagonal (of the last two axes) zeroed.",
    "triu": "x with the elements below the k-th diagonal (of the last two axes) zeroed.",
    "astype": "x converted to `dtype` (a new Tensor unless copy=False and nothing changes).",
    "can_cast": "Whether `from_` (a dtype or a Tensor) converts to `to` under the promotion rules.",
    "finfo": "Machine limits of a floating dtype (bits, eps, max, min, smallest_normal, dtype).",
    "iinfo": "Machine limits of an integer dtype (bits, max, min, dtype).",
    "isdtype": "Whether `dtype` is of `kind` ('bool', 'signed integer', 'unsigned integer', "
               "'integral', 'real floating', 'complex floating', 'numeric', a dtype, or a tuple "
               "of these).",
    "clip": "x with its values limited to [min, max] (either may be None).",
    "signbit": "Whether each element's sign bit is set (True for -0.0 and negative NaN).",
    "real": "The real part: a copy of x (real dtypes only).",
    "conj": "The complex conjugate: a copy of x (real dtypes only).",
    "imag": "The imaginary part: zeros of x's shape (real dtypes only).",
    "matrix_transpose": "The transpose of the last two axes (a view).",
    "vecdot": "The dot product of x1 and x2 along `axis`, broadcasting the other axes.",
    "tensordot": "The sum of products over `axes` (an int: the last n of x1 and first n of x2; "
                 "or two sequences of axes).",
    "broadcast_arrays": "The arrays broadcast to one shape (views), as a list.",
    "broadcast_shapes": "The shape the given shapes broadcast to.",
    "broadcast_to": "x broadcast to `shape` (a view).",
    "concat": "The arrays joined along `axis` (axis=None: flattened first).",
    "stack": "The arrays (of one shape) joined along a new axis.",
    "unstack": "The slices of x along `axis`, as a tuple of views.",
    "expand_dims": "x with a new axis of length one at `axis` (a view).",
    "flip": "x with the order of the elements along `axis` reversed (a view; all axes by default).",
    "moveaxis": "x with the axes `source` moved to `destination` (a view).",
    "permute_dims": "x with its axes permuted as `axes` says (a view).",
    "roll": "x with its elements shifted by `shift` along `axis` (flattened when None), wrapping.",
    "squeeze": "x without the axes of length one that `axis` names (a view).",
    "tile": "x repeated `repetitions` times along each axis.",
    "argmax": "The index of the largest value (along `axis`, or of the flattened x); the first "
              "one on ties.",
    "argmin": "The index of the smallest value (along `axis`, or of the flattened x); the first "
              "one on ties.",
    "where": "x1 where condition is true, else x2 (broadcast together).",
    "count_nonzero": "The number of non-zero elements (along `axis`).",
    "sum": "The sum of the elements (along `axis`).",
    "prod": "The product of the elements (along `axis`).",
    "max": "The largest element (along `axis`); NaN propagates.",
    "min": "The smallest element (along `axis`); NaN propagates.",
    "mean": "The arithmetic mean (along `axis`).",
    "var": "The variance (along `axis`), dividing by N - correction.",
    "std": "The standard deviation (along `axis`), dividing by N - correction.",
    "cumulative_sum": "The running sum along `axis` (include_initial: a leading zero).",
    "cumulative_prod": "The running product along `axis` (include_initial: a leading one).",
    "all": "Whether every element (along `axis`) is true.",
    "any": "Whether some element (along `axis`) is true.",
    "diff": "The n-th discrete difference along `axis` (with prepend / append joined first).",
}
for _n, _d in _DOCS.items():
    globals()[_n].__doc__ = _d
del _n, _d
_Linalg.vector_norm.__doc__ = "The vector norm of order `ord` (along `axis`; all elements by default)."
_Linalg.__doc__ = "The standard's linalg extension: matmul, matrix_transpose, tensordot, " \
                  "vecdot, vector_norm."
_Info.__doc__ = "What __array_namespace_info__() returns: the namespace's capabilities, devices " \
                "and dtypes."
_Info.capabilities.__doc__ = "{'boolean indexing', 'data-dependent shapes', 'max dimensions'}."
_Info.default_device.__doc__ = "The default backend (of this thread: see `with backend:`)."
_Info.default_dtypes.__doc__ = "The default dtypes: float64, int64 (indexing: int64)."
_Info.devices.__doc__ = "The devices creation functions accept: the default backend."
_Info.dtypes.__doc__ = "The supported dtypes ({name: name}), of one kind if `kind` is given."


__all__ = sorted(n for n, v in list(globals().items())
                 if not n.startswith("_") and n not in ("Backend", "Error", "Tensor", "builtins"))


def _programs_run():
    """The array programs (op calls, one kernel each on a GPU) this thread has run: a fused
    chain of elementwise operations counts once."""
    return _a.programs_run()
