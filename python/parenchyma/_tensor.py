"""The array methods of parenchyma.Tensor (operators, indexing, reductions, conversions).

Installed on the compiled Tensor class when the package loads; each one calls the array
front-end (parenchyma/array.hpp) through parenchyma._parenchyma._array, which holds the
semantics (NumPy 2 promotion with Python-style weak scalars, broadcasting, views, fusion).
"""

import operator

from ._parenchyma import Error, Tensor
from ._parenchyma import _array as _a

_KIND_RANK = {"bool": 0, "uint8": 1, "int8": 1, "int16": 1, "int32": 1, "int64": 1,
              "float16": 2, "bfloat16": 2, "float32": 2, "float64": 2}


def _error(code, origin, message):
    e = Error(origin + ": " + message)
    e.code, e.origin, e.message = code, origin, message
    e.description = code.replace("_", " ")
    return e


def _operand(x):
    """x as an operand: a Tensor or a Python scalar as is; anything array-like converted."""
    if isinstance(x, (Tensor, bool, int, float)):
        return x
    if isinstance(x, complex):
        raise _error("unsupported", "array", "complex numbers are not supported")
    if hasattr(x, "__dlpack__") or hasattr(x, "__array__") or isinstance(x, (list, tuple)):
        from .array_api import asarray  # NumPy scalars: 0-d, of their dtype (strong)

        return asarray(x)
    return None


def _binary(name, reflected=False):
    def op(self, other):
        o = _operand(other)
        if o is None:
            return NotImplemented
        return _a.binary(name, o, self) if reflected else _a.binary(name, self, o)

    op.__name__ = name
    return op


def _inplace(name):
    def op(self, other):
        o = _operand(other)
        if o is None:
            return NotImplemented
        value = _a.binary(name, self, o)
        if _KIND_RANK[value.dtype] > _KIND_RANK[self.dtype]:
            raise _error("invalid_argument", "array." + name,
                         "an in-place operation would change the dtype from " + self.dtype
                         + " to " + value.dtype + " (the result cannot be stored in place)")
        _a.assign(self, value)
        return self

    return op


def _unary(name):
    def op(self):
        return _a.unary(name, self)

    return op


def _matmul(x, y):
    from .array_api import matmul

    x, y = _operand(x), _operand(y)
    if x is None or y is None:
        return NotImplemented
    return matmul(x, y)


def _bool_mask(self, keys, origin):
    """The boolean mask of an index, as a Tensor on self's device, when the index is one
    (`x[mask]`, `x[mask, ...]`, `x[mask, :]`); None when the index has no boolean array.
    Other forms with a boolean array raise 'unsupported'."""
    found = None
    for i, k in enumerate(keys):
        if isinstance(k, bool) or (isinstance(k, Tensor) and k.dtype == "bool"):
            found = i
        elif isinstance(k, list) or (hasattr(k, "__array__") and not isinstance(k, Tensor)):
            import numpy as np  # a NumPy array or scalar, a list: a mask when its dtype is bool

            if np.asarray(k).dtype == np.bool_:
                found = i
        if found is not None:
            break
    if found is None:
        return None
    rest = keys[found + 1:]
    if found != 0 or sum(1 for k in rest if k is Ellipsis) > 1 or not all(
            k is Ellipsis or (isinstance(k, slice) and k == slice(None)) for k in rest):
        raise _error("unsupported", origin,
                     "a boolean index is supported as the whole index (x[mask], with mask of x's "
                     "shape or of its leading dimensions, optionally followed by ... or :); "
                     "combine it with other indices in separate steps, or use "
                     "parenchyma.array_api.where")
    from . import array_api

    k = keys[0]
    if isinstance(k, bool):
        return array_api.full((), k, dtype="bool", device=self.device)
    if isinstance(k, Tensor):
        return k
    return array_api.asarray(k, dtype="bool", device=self.device)


def _index_items(x, key):
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        if isinstance(k, bool) or (isinstance(k, Tensor) and k.dtype == "bool"):
            raise _error("unsupported", "parenchyma.Tensor.__getitem__",
                         "boolean indexing is supported as the whole index only (x[mask]); "
                         "use parenchyma.array_api.where")
        if _is_array_index(k):
            raise _error("unsupported", "parenchyma.Tensor.__getitem__",
                         "integer-array indexing is supported for one integer array with the "
                         "other axes whole (x[idx], x[:, idx]) only; use "
                         "parenchyma.array_api.take(x, indices, axis=...) per axis")
        if not (k is None or k is Ellipsis or isinstance(k, slice) or hasattr(k, "__index__")):
            from ._args import type_error

            raise type_error("parenchyma.Tensor.__getitem__",
                             "argument key: an index must be an int, a slice, Ellipsis, None, "
                             "an integer or boolean array, got " + type(k).__name__)
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise _error("invalid_argument", "parenchyma.Tensor.__getitem__",
                     "an index can only have a single Ellipsis")
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > x.ndim:
        raise _error("invalid_argument", "parenchyma.Tensor.__getitem__",
                     "too many indices: %d for a tensor of %d dimensions" % (n_real, x.ndim))
    if n_ell:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - n_real) + key[i + 1:]
    else:
        key = key + (slice(None),) * (x.ndim - n_real)
    return key


def _is_array_index(k):
    return isinstance(k, (Tensor, list)) or (hasattr(k, "__array__") and not hasattr(k, "__index__"))


def _getitem(self, key):
    keys = key if isinstance(key, tuple) else (key,)
    mask = _bool_mask(self, keys, "parenchyma.Tensor.__getitem__")
    if mask is not None:
        from . import array_api

        return array_api._mask_get(self, mask)
    arrays = [i for i, k in enumerate(keys) if _is_array_index(k)]
    if len(arrays) == 1 and not (isinstance(keys[arrays[0]], Tensor) and keys[arrays[0]].dtype == "bool"):
        rest = [k for i, k in enumerate(keys) if i != arrays[0]]
        if all(isinstance(k, slice) and k == slice(None) for k in rest):
            from . import array_api

            return array_api.take(self, _operand(keys[arrays[0]]), axis=arrays[0])
    items = _index_items(self, key)
    v = self
    axis = 0
    for k in items:
        if k is None:
            v = _a.expand_dims(v, axis)
            axis += 1
        elif isinstance(k, slice):
            if not (k.start is None and k.stop is None and k.step in (None, 1)):
                v = _a.slice(v, axis, k.start, k.stop, k.step)
            axis += 1
        else:
            v = _a.at(v, operator.index(k), axis)
    if v is self:
        v = _a.slice(self, 0, None, None, None) if self.ndim else _a.reshape(self, ())
    return v


def _setitem(self, key, value):
    o = _operand(value)
    if o is None:
        raise _error("invalid_argument", "parenchyma.Tensor.__setitem__",
                     "cannot assign a " + type(value).__name__)
    keys = key if isinstance(key, tuple) else (key,)
    mask = _bool_mask(self, keys, "parenchyma.Tensor.__setitem__")
    if mask is not None:
        from . import array_api

        array_api._mask_set(self, mask, value)
        return
    if any(_is_array_index(k) for k in keys):
        raise _error("unsupported", "parenchyma.Tensor.__setitem__",
                     "assigning through integer-array indices is not supported (a scatter); "
                     "assign through basic indices (ints, slices, ..., None), a boolean mask "
                     "(x[mask] = value) or use parenchyma.array_api.where")
    if isinstance(key, tuple) and len(key) == 0 or key is Ellipsis:
        target = self
    else:
        target = _getitem(self, key)
    _a.assign(target, o)


def _host(self):
    """A NumPy copy of the values (runs what is pending)."""
    import numpy as np

    return np.array(self.numpy(), copy=True)


def _item(self):
    """The value of a one-element tensor as a Python bool, int or float."""
    if self.size != 1:
        raise _error("invalid_argument", "parenchyma.Tensor.item",
                     "the tensor has %d elements; item() needs exactly one" % self.size)
    return self.numpy().reshape(()).item()


def _tolist(self):
    """The values as nested Python lists (a host copy)."""
    return self.numpy().tolist()


def _scalar_conv(kind, conv):
    def f(self):
        if self.size != 1:
            raise TypeError("only one-element tensors can be converted with %s() (this one has "
                            "shape %s)" % (kind, self.shape))
        return conv(_item(self))

    return f


def _bool(self):
    if self.size != 1:
        raise ValueError("the truth value of a tensor with %d elements is ambiguous; use "
                         "any() or all()" % self.size)
    return bool(_item(self))


def _index(self):
    if self.dtype not in ("int8", "int16", "int32", "int64", "uint8"):
        raise TypeError("only integer tensors can be used as an index (__index__), not "
                        + self.dtype)
    if self.ndim != 0:
        raise TypeError("only 0-d integer tensors can be used as an index (__index__)")
    return int(_item(self))


# A tensor with more elements than this shows no values in repr() and str() (reading them
# would copy the whole tensor to the host): only its description.
_REPR_MAX_ELEMENTS = 1000


def _describe(self):
    """'<parenchyma.Tensor shape=(2, 3) dtype=float32 backend='opencl:0' ...>': the shape, the
    dtype, the backend it was last used on (none: a host tensor), and whether it is unwritten,
    read-only (no), a view or a pending expression."""
    parts = ["shape=" + str(tuple(self.shape)), "dtype=" + self.dtype]
    b = self.backend
    parts.append("backend='" + b.name + "'" if b is not None else "backend=None (host)")
    kind = _a.kind(self)
    if kind != "dense":
        parts.append(kind)
    parts.append("written" if self.initialized else "unwritten")
    return "<parenchyma.Tensor " + " ".join(parts) + ">"


def _shows_values(self):
    return (self.initialized and self.dtype != "bfloat16"
            and self.size <= _REPR_MAX_ELEMENTS)


def _repr(self):
    """Tensor([...], dtype=..., backend='...') with the values of a small written tensor; the
    description (shape, dtype, backend, state; no values) otherwise."""
    if not _shows_values(self):
        return _describe(self)
    import numpy as np

    a = self.numpy()
    body = np.array2string(a, separator=", ", prefix="Tensor(", threshold=_REPR_MAX_ELEMENTS)
    extra = ""
    if self.backend is not None:
        extra = ", backend='" + self.backend.name + "'"
    return "Tensor(" + body + ", dtype=" + self.dtype + extra + ")"


def _str(self):
    """The values as NumPy prints them (a small written tensor), else the description."""
    if not _shows_values(self):
        return _describe(self)
    import numpy as np

    return np.array2string(self.numpy())


# ---- pickling ----------------------------------------------------------------------------------
# A Tensor pickles by value: its shape, dtype, a host copy of its data (a NumPy array; None for an
# unwritten tensor) and the name of its backend (Backend.name, the request string Backend()
# takes; None for a host tensor). Unpickling makes the tensor on a backend of that name; where
# none can be made (another machine), on the host (used with the default backend) with a
# RuntimeWarning naming the missing backend.


# Names this process in pickles (with a backend's token): a tensor unpickled in the process that
# pickled it (copy.deepcopy) comes back on the very backend it was on, while that one lives.
_PROCESS = None


def _process():
    global _PROCESS
    if _PROCESS is None:
        import os

        _PROCESS = "%d-%s" % (os.getpid(), os.urandom(8).hex())
    return _PROCESS


def _backend_named(name, origin=None):
    """A Backend for `name`: the very backend the tensor was on when `origin` (process, token)
    says it was pickled in this process and that backend lives; else the thread's default
    backend when it has that name; else the most recently made backend of that name still in
    use; else a new Backend(name); None, with a RuntimeWarning, when none can be made."""
    from ._parenchyma import Backend

    if origin is not None and origin[0] == _process():
        b = _a.live_backend(name, origin[1])
        if b is not None:
            return b
    default = _a.default_backend()
    if default.name == name:
        return default
    b = _a.live_backend(name)
    if b is not None:
        return b
    try:
        return Backend(name)
    except Error as e:
        import warnings

        warnings.warn("parenchyma: the pickled tensor's backend %r is not available here "
                      "(%s); the tensor is made on the host and used with the default "
                      "backend %r" % (name, e, default.name), RuntimeWarning, stacklevel=3)
        return None


def _rebuild(shape, dtype, data, backend, origin=None):
    """Unpickles a Tensor (see _reduce)."""
    b = _backend_named(backend, origin) if backend is not None else None
    if data is None:
        t = Tensor(shape, dtype)
        return t.to(b) if b is not None else t
    from . import array_api

    if dtype == "bfloat16":  # NumPy has none: pickled as float32 (exact), converted back
        t = _a.astype(array_api.asarray(data), "bfloat16", True)
    else:
        t = array_api.asarray(data)
    if tuple(t.shape) != tuple(shape) or t.dtype != dtype:
        raise _error("invalid_argument", "parenchyma.Tensor (unpickling)",
                     "the pickled data (%s %s) does not match the tensor (%s %s)"
                     % (t.shape, t.dtype, tuple(shape), dtype))
    return t.to(b) if b is not None else t


def _reduce(self):
    """Pickles the tensor by value: (shape, dtype, a host copy of the data or None when
    unwritten, the backend's name or None, and where it was pickled: this process and the
    backend's token, used only when unpickled in this same process)."""
    import numpy as np

    b = self.backend
    backend = b.name if b is not None else None
    origin = (_process(), _a.backend_token(b)) if b is not None else None
    if not self.initialized:
        return (_rebuild, (tuple(self.shape), self.dtype, None, backend, origin))
    if self.dtype == "bfloat16":
        data = np.array(_a.astype(self, "float32", True).numpy(), copy=True)
    else:
        data = np.array(self.numpy(), copy=True)
    return (_rebuild, (tuple(self.shape), self.dtype, data, backend, origin))


def _axes(axis):
    if axis is None:
        return None
    if isinstance(axis, tuple) and len(axis) == 0:
        return ()
    return axis


def _method(name):
    def f(self, *args, **kwargs):
        from . import array_api

        return getattr(array_api, name)(self, *args, **kwargs)

    f.__name__ = name
    f.__doc__ = "parenchyma.array_api.%s(self, ...): see that function." % name
    return f


def _reshape(self, *shape, copy=None):
    """A tensor of the same values in another shape: a view of a dense tensor, else a copy
    (reshape((2, 3)) or reshape(2, 3); one extent may be -1)."""
    if len(shape) == 1 and not hasattr(shape[0], "__index__"):
        shape = tuple(shape[0])
    from . import array_api

    return array_api.reshape(self, shape, copy=copy)


def _astype(self, dtype, copy=True):
    """The values converted to dtype (a new tensor; copy=False returns self when the dtype
    is the same)."""
    from . import array_api

    return array_api.astype(self, dtype, copy=copy)


def _array_namespace(self, api_version=None):
    from . import array_api

    if api_version is not None and api_version not in ("2021.12", "2022.12", "2023.12",
                                                       "2024.12"):
        raise ValueError("unsupported Array API version %r (parenchyma.array_api implements "
                         "2024.12)" % (api_version,))
    return array_api


def _device(self):
    b = self.backend
    return b if b is not None else _a.default_backend()


def _to_device(self, device, stream=None):
    """Tensor.to(device) (the Array API name; stream must be None)."""
    if stream is not None:
        raise _error("invalid_argument", "parenchyma.Tensor.to_device",
                     "argument stream: only None is supported (the backend orders its own work)")
    return self.to(device)


def _install():
    T = Tensor
    for name, fn in (("add", "__add__"), ("subtract", "__sub__"), ("multiply", "__mul__"),
                     ("divide", "__truediv__"), ("floor_divide", "__floordiv__"),
                     ("remainder", "__mod__"), ("pow", "__pow__"), ("bitwise_and", "__and__"),
                     ("bitwise_or", "__or__"), ("bitwise_xor", "__xor__"),
                     ("bitwise_left_shift", "__lshift__"), ("bitwise_right_shift", "__rshift__")):
        setattr(T, fn, _binary(name))
        setattr(T, "__r" + fn[2:], _binary(name, reflected=True))
        setattr(T, "__i" + fn[2:], _inplace(name))
    for name, fn in (("equal", "__eq__"), ("not_equal", "__ne__"), ("less", "__lt__"),
                     ("less_equal", "__le__"), ("greater", "__gt__"),
                     ("greater_equal", "__ge__")):
        setattr(T, fn, _binary(name))
    T.__hash__ = None
    T.__neg__ = _unary("negative")
    T.__pos__ = _unary("positive")
    T.__abs__ = _unary("abs")
    T.__invert__ = _unary("bitwise_invert")
    T.__matmul__ = lambda self, other: _matmul(self, other)
    T.__rmatmul__ = lambda self, other: _matmul(other, self)

    def imatmul(self, other):
        r = _matmul(self, other)
        if r.shape != self.shape:
            raise _error("invalid_argument", "array.matmul",
                         "in-place matmul would change the shape from %s to %s"
                         % (self.shape, r.shape))
        _a.assign(self, r)
        return self

    T.__imatmul__ = imatmul
    T.__array_ufunc__ = None  # NumPy defers to Tensor's reflected operators
    T.__getitem__ = _getitem

    def _iter(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (_a.at(self, i, 0) for i in range(self.shape[0]))

    T.__iter__ = _iter
    T.__setitem__ = _setitem
    T.__bool__ = _bool
    T.__float__ = _scalar_conv("float", float)
    T.__int__ = _scalar_conv("int", int)
    T.__complex__ = _scalar_conv("complex", complex)
    T.__index__ = _index
    T.__repr__ = _repr
    T.__str__ = _str
    T.__reduce__ = _reduce
    T.__array_namespace__ = _array_namespace
    T.item = _item
    T.tolist = _tolist
    T.reshape = _reshape
    T.astype = _astype
    def copy(self):
        """A dense copy (a new tensor on the same backend)."""
        return _a.copy(self)

    T.copy = copy
    T.device = property(_device, doc="The backend the tensor's operations run on (the "
                                     "default backend for a host tensor).")
    T.to_device = _to_device
    T.T = property(lambda self: _method("_T")(self), doc="The transpose of a 2-d tensor.")
    T.mT = property(lambda self: _method("matrix_transpose")(self),
                    doc="The transpose of the last two axes.")
    for name in ("sum", "mean", "max", "min", "argmax", "argmin", "prod", "std", "var", "all",
                 "any", "cumulative_sum", "cumulative_prod", "squeeze", "flip"):
        setattr(T, name, _method(name))


_install()
