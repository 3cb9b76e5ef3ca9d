"""Argument type errors for every compiled function and method, in one place.

When no overload of a pybind11 function accepts the arguments, pybind11 raises a TypeError
"incompatible function arguments" that lists the C++ signatures and names no parameter.
install() wraps every compiled function and method: the call goes straight through, and only
when pybind11 refuses the arguments does the wrapper read the signature (the first line pybind11
writes into the docstring), find the first parameter that does not fit (or the missing or
unexpected one) and raise parenchyma.ArgumentTypeError (a TypeError and a parenchyma.Error, code
'invalid_argument') naming the function, the parameter, the type expected and the type given:

    parenchyma.blas.axpy: argument alpha: expected float (or int), got str

Arguments the compiled code converts itself (shapes, axes, dtypes, operands) raise the same
ArgumentTypeError from C++ (python/src/args.cpp).
"""

import functools
import re

_REFUSED = ("incompatible function arguments", "incompatible constructor arguments")
_SIGNATURE = re.compile(r"^(?:\d+\. )?(\w+)\((.*)\)(?: -> .*)?$")


def _split_top(text, sep=","):
    """Splits `text` at `sep` outside brackets and quotes (the parts stripped, empty ones dropped)."""
    parts, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return [p for p in parts if p]


def _parse(params):
    """[(name, type, has_default, keyword_only, star)] of one pybind11 signature line."""
    out, kw_only = [], False
    for p in _split_top(params):
        if p == "*":
            kw_only = True
            continue
        star = 2 if p.startswith("**") else 1 if p.startswith("*") else 0
        p = p.lstrip("*")
        default = False
        if " = " in p:
            p, default = p.split(" = ", 1)[0], True
        name, _, typ = p.partition(":")
        out.append((name.strip(), typ.strip() or "object", default, kw_only, star))
        if star == 1:
            kw_only = True
    return out


def _signatures(fn):
    sigs = []
    for line in (getattr(fn, "__doc__", None) or "").splitlines():
        m = _SIGNATURE.match(line.strip())
        if m:
            sigs.append(_parse(m.group(2)))
        elif sigs and line.strip() and not line.strip().startswith(tuple("0123456789")):
            if not line.startswith("Overloaded function"):
                break
    return sigs


def _short(typ):
    """'parenchyma._parenchyma.nn.Convolution' -> 'parenchyma.nn.Convolution'."""
    return typ.replace("parenchyma._parenchyma.", "parenchyma.")


def _class_for(typ):
    from . import _parenchyma

    obj = _parenchyma
    parts = typ.split(".")
    if parts[:2] != ["parenchyma", "_parenchyma"]:
        return None
    for p in parts[2:]:
        obj = getattr(obj, p, None)
        if obj is None:
            return None
    return obj if isinstance(obj, type) else None


_SPELLINGS = (  # pybind11 3 writes typing's protocols and PEP 604 unions; 2.x the plain names
    ("typing.SupportsFloat", "float"), ("typing.SupportsIndex", "int"), ("typing.SupportsInt", "int"),
    ("collections.abc.Sequence[", "Sequence["), ("collections.abc.Callable", "Callable"),
    ("typing.Sequence[", "Sequence["), ("typing.Optional[", "Optional["),
    ("typing.Union[", "Union["), ("typing.Any", "Any"), ("typing.Callable", "Callable"),
    ("list[", "List["), ("tuple[", "Tuple["), ("dict[", "Dict["),
)


def _normal(typ):
    """A signature's type in pybind11 2.x's spelling, whichever pybind11 wrote it."""
    typ = typ.strip()
    for new, old in _SPELLINGS:
        typ = typ.replace(new, old)
    return typ


def _alternatives(typ):
    """The members of a PEP 604 union `a | b` (outside brackets), else [typ]."""
    return _split_top(typ, "|")


def _fits(value, typ):
    """Whether pybind11 could convert `value` to `typ` (as far as its type goes)."""
    typ = _normal(typ)
    union = _alternatives(typ)
    if len(union) > 1:
        return any(_fits(value, t) for t in union)
    if typ == "None":
        return value is None
    if typ in ("object", "", "Any") or typ.startswith("Callable"):
        return True
    if typ.startswith("Optional[") and typ.endswith("]"):
        return value is None or _fits(value, typ[len("Optional["):-1])
    if typ.startswith("Union[") and typ.endswith("]"):
        return any(_fits(value, t) for t in _split_top(typ[len("Union["):-1]))
    if typ == "float":
        return not isinstance(value, (str, bytes)) and (
            hasattr(value, "__float__") or hasattr(value, "__index__"))
    if typ == "int":
        return hasattr(value, "__index__") and not isinstance(value, (str, bytes))
    if typ == "bool":  # pybind11 converts None and anything with __bool__ (not str: no __bool__)
        return value is None or hasattr(type(value), "__bool__")
    if typ == "str":
        return isinstance(value, (str, bytes))
    if typ.startswith(("List[", "Tuple[", "Sequence[")):
        try:
            iter(value)
        except TypeError:
            return False
        return not isinstance(value, (str, bytes))
    if typ.startswith("Dict["):
        return isinstance(value, dict)
    cls = _class_for(typ)
    if cls is not None:
        return isinstance(value, cls)
    return True  # a type this check does not know: not the culprit


def _type_name(value):
    t = type(value)
    return t.__name__ if t.__module__ in ("builtins", None) else t.__module__ + "." + t.__name__


def _expected(typ):
    typ = _short(_normal(typ))
    union = _alternatives(typ)
    if sorted(union) == ["float", "int"]:
        return "float (or int)"
    if len(union) == 2 and "None" in union:
        typ = [t for t in union if t != "None"][0]
        return _expected(typ) + " or None"
    if typ == "float":
        return "float (or int)"
    if typ == "int":
        return "int"
    return typ


def _diagnose(sig, args, kwargs):
    """The complaint about one signature: the first parameter that does not fit, or None."""
    positional = [p for p in sig if not p[3] and p[4] == 0]
    has_varargs = any(p[4] == 1 for p in sig)
    has_varkw = any(p[4] == 2 for p in sig)
    bound = {}
    if len(args) > len(positional) and not has_varargs:
        return "takes at most %d positional arguments (%d given)" % (len(positional), len(args))
    for p, v in zip(positional, args):
        bound[p[0]] = v
    names = {p[0] for p in sig if p[4] == 0}
    for k, v in kwargs.items():
        if k not in names:
            if has_varkw:
                continue
            return "unexpected keyword argument '%s'" % k
        if k in bound:
            return "argument %s: given twice (by position and by keyword)" % k
        bound[k] = v
    for name, typ, default, _kw, star in sig:
        if star or name == "self":
            continue
        if name not in bound:
            if not default:
                return "missing argument %s (expected %s)" % (name, _expected(typ))
            continue
        v = bound[name]
        if not _fits(v, typ):
            return "argument %s: expected %s, got %s" % (name, _expected(typ), _type_name(v))
    return None


def _raise(qualname, fn, args, kwargs, original):
    complaint = None
    for sig in _signatures(fn):
        complaint = _diagnose(sig, args, kwargs)
        if complaint:
            break
    if complaint is None:  # not found: keep pybind11's account, without its overload list
        complaint = "arguments of the wrong types: " + str(original).split("\n")[0]
    raise type_error(qualname, complaint) from None


def _wrap(fn, qualname):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            text = str(e)
            if type(e) is not TypeError or not any(r in text.split("\n")[0] for r in _REFUSED):
                raise
            _raise(qualname, fn, args, kwargs, e)

    call.__parenchyma_checked__ = True
    return call


def _is_builtin(obj):
    return type(obj).__name__ in ("builtin_function_or_method", "instancemethod")


def install(module, public):
    """Wraps the functions of `module` (a pybind11 module) and the methods of its classes;
    `public` is the name errors give the module ('parenchyma.blas')."""
    for name, obj in list(vars(module).items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        if _is_builtin(obj):
            setattr(module, name, _wrap(obj, public + "." + name))
        elif isinstance(obj, type) and obj.__module__.startswith("parenchyma"):
            _install_class(obj, public + "." + name)


def _install_class(cls, public):
    for name, raw in list(vars(cls).items()):
        if isinstance(raw, staticmethod):
            fn = raw.__func__
            if _is_builtin(fn):
                setattr(cls, name, staticmethod(_wrap(fn, public + "." + name)))
        elif _is_builtin(raw):
            qual = public if name == "__init__" else public + "." + name
            setattr(cls, name, _wrap(raw, qual))


# ---- for the pure-Python functions -------------------------------------------------------------

def type_error(origin, message):
    """A parenchyma.ArgumentTypeError for `origin` ('parenchyma.array_api.arange')."""
    from . import _parenchyma

    e = _parenchyma.ArgumentTypeError(origin + ": " + message)
    e.code, e.origin, e.message = "invalid_argument", origin, message
    e.description = "invalid argument"
    return e


def as_float(value, origin, name):
    """`value` as a Python float (anything with __float__ or __index__, not a str), else
    ArgumentTypeError naming the argument."""
    if isinstance(value, (str, bytes)) or not (hasattr(value, "__float__")
                                               or hasattr(value, "__index__")):
        raise type_error(origin, "argument %s: expected float (or int), got %s"
                         % (name, _type_name(value)))
    return float(value)


def as_int(value, origin, name):
    """`value` as a Python int (anything with __index__), else ArgumentTypeError."""
    if not hasattr(value, "__index__") or isinstance(value, (str, bytes)):
        raise type_error(origin, "argument %s: expected int, got %s" % (name, _type_name(value)))
    return value.__index__()
