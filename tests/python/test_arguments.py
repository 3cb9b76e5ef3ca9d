# Argument conversion: every integer argument of the package, given an integer that does not
# fit (2**63, -2**63 - 1, 2**64) or something that is not an integer, raises parenchyma.Error
# ('invalid_argument') naming the argument, never pybind11's "Unable to cast Python instance";
# an operand its producer refuses to export (NumPy: read-only or bool arrays) raises
# parenchyma.Error naming the operand, never NumPy's BufferError.
import ast
import os

import numpy as np
import pytest

import parenchyma
from parenchyma import nn

STUBS = os.path.join(os.path.dirname(parenchyma.__file__))
INT_ANNOTATIONS = ("int", "_Pair", "_Shape", "_Algo")


def integer_parameters():
    """(function, parameter) for every parameter the stubs annotate with an integer type."""
    found = set()
    for stub, prefix in (("_parenchyma.pyi", ""), ("nn.pyi", "nn."), ("__init__.pyi", "")):
        tree = ast.parse(open(os.path.join(STUBS, stub)).read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for f in node.body:
                    if isinstance(f, ast.FunctionDef):
                        f.qualname = prefix + node.name + "." + f.name
            if not isinstance(node, ast.FunctionDef):
                continue
            name = getattr(node, "qualname", prefix + node.name)
            args = node.args.args + node.args.kwonlyargs
            for a in args:
                if a.annotation is None:
                    continue
                text = ast.unparse(a.annotation)
                if any(t in text.replace("[", " ").replace("]", " ").replace(",", " ").split()
                       for t in INT_ANNOTATIONS):
                    found.add(name + "." + a.arg)
    return found


def t(*shape, dtype="float32"):
    return parenchyma.Tensor.zeros(shape, dtype)


# One call per integer parameter, `v` in that parameter's place (in each of its positions).
def calls(b):
    x4 = lambda: t(1, 1, 4, 4)  # noqa: E731
    conv = lambda **kw: nn.Convolution(b, kw.pop("x", (1, 1, 4, 4)),  # noqa: E731
                                       kw.pop("w", (1, 1, 3, 3)), **kw)
    table = {
        "Tensor.__init__.shape": [lambda v: parenchyma.Tensor(v), lambda v: parenchyma.Tensor((2, v))],
        "Tensor.zeros.shape": [lambda v: parenchyma.Tensor.zeros(v),
                               lambda v: parenchyma.Tensor.zeros([v])],
        "zeros.shape": [lambda v: parenchyma.zeros(v), lambda v: parenchyma.zeros((v, 1))],
        "Tensor.__dlpack__.stream": [lambda v: t(4).__dlpack__(stream=v)],
        "Tensor.__dlpack__.max_version": [lambda v: t(4).__dlpack__(max_version=(v, 0)),
                                          lambda v: t(4).__dlpack__(max_version=(1, v))],
        "Tensor.__dlpack__.dl_device": [lambda v: t(4).__dlpack__(dl_device=(v, 0)),
                                        lambda v: t(4).__dlpack__(dl_device=(1, v))],
        "nn.Convolution.__init__.x_shape": [lambda v: conv(x=(1, 1, v, 4))],
        "nn.Convolution.__init__.w_shape": [lambda v: conv(w=(v, 1, 3, 3))],
        "nn.Convolution.__init__.stride": [lambda v: conv(stride=v), lambda v: conv(stride=(1, v))],
        "nn.Convolution.__init__.padding": [lambda v: conv(padding=v),
                                            lambda v: conv(padding=(v, 1))],
        "nn.Convolution.__init__.dilation": [lambda v: conv(dilation=v),
                                             lambda v: conv(dilation=(1, v))],
        "nn.Convolution.__init__.groups": [lambda v: conv(groups=v)],
        "nn.Convolution.__init__.algorithm": [lambda v: conv(algorithm=v),
                                              lambda v: conv(algorithm=("auto", v, "auto"))],
        "nn.pooling_output_shape.x_shape": [lambda v: nn.pooling_output_shape((1, 1, v, 4))],
        "nn.pooling_output_shape.window": [lambda v: nn.pooling_output_shape((1, 1, 4, 4), v)],
        "nn.pooling_output_shape.stride": [
            lambda v: nn.pooling_output_shape((1, 1, 4, 4), 2, (v, 1))],
        "nn.pooling_output_shape.padding": [
            lambda v: nn.pooling_output_shape((1, 1, 4, 4), 2, None, v)],
    }
    for op, operands in (("pooling_max", lambda: (x4(), t(1, 1, 2, 2))),
                         ("pooling_max_grad", lambda: (x4(), t(1, 1, 2, 2), t(1, 1, 2, 2), x4())),
                         ("pooling_avg", lambda: (x4(), t(1, 1, 2, 2))),
                         ("pooling_avg_grad", lambda: (t(1, 1, 2, 2), x4()))):
        for p in ("window", "stride", "padding"):
            table[f"nn.{op}.{p}"] = [
                lambda v, op=op, operands=operands, p=p: getattr(nn, op)(b, *operands(), **{p: v}),
                lambda v, op=op, operands=operands, p=p: getattr(nn, op)(b, *operands(),
                                                                          **{p: (1, v)})]
    for op, n in (("softmax", 2), ("log_softmax", 2), ("softmax_grad", 3), ("log_softmax_grad", 3)):
        table[f"nn.{op}.axis"] = [
            lambda v, op=op, n=n: getattr(nn, op)(b, *[t(2, 3) for _ in range(n)], axis=v)]
    # the array methods (parenchyma/_tensor.py): axes are integers too
    z = lambda: parenchyma.asarray(np.zeros((2, 3), np.float32))  # noqa: E731
    for m in ("argmax", "argmin", "cumulative_sum", "cumulative_prod"):
        table[f"Tensor.{m}.axis"] = [lambda v, m=m: getattr(z(), m)(axis=v)]
    table["Tensor.squeeze.axis"] = [lambda v: z()[None].squeeze(v),
                                    lambda v: z()[None].squeeze((0, v))]
    table["Tensor.to_device.stream"] = [lambda v: z().to_device(b, stream=v)]
    f64 = lambda *s: t(*s, dtype="float64")  # noqa: E731
    table["nn.layer_norm.axis"] = [lambda v: nn.layer_norm(b, *[f64(2, 3)] * 2, f64(2, 3), f64(2, 3),
                                                           axis=v)]
    table["nn.layer_norm_grad.axis"] = [
        lambda v: nn.layer_norm_grad(b, f64(2, 3), f64(2, 3), f64(2), f64(2), f64(2, 3), f64(2, 3),
                                     f64(2, 3), f64(2, 3), axis=v)]
    table["nn.rms_norm.axis"] = [lambda v: nn.rms_norm(b, f64(2, 3), f64(2, 3), f64(2, 3), axis=v)]
    table["nn.rms_norm_grad.axis"] = [
        lambda v: nn.rms_norm_grad(b, f64(2, 3), f64(2, 3), f64(2), f64(2, 3), f64(2, 3), f64(2, 3),
                                   axis=v)]
    i32 = lambda *s: t(*s, dtype="int32")  # noqa: E731
    table["nn.cross_entropy.ignore_index"] = [
        lambda v: nn.cross_entropy(b, t(2, 3), i32(2), t(1), ignore_index=v)]
    table["nn.cross_entropy_grad.ignore_index"] = [
        lambda v: nn.cross_entropy_grad(b, t(2, 3), i32(2), t(2), t(1), t(2, 3), ignore_index=v)]
    table["nn.embedding.padding_idx"] = [
        lambda v: nn.embedding(b, t(4, 3), i32(2), padding_idx=v)]
    table["nn.embedding_grad.padding_idx"] = [
        lambda v: nn.embedding_grad(b, i32(2), t(2, 3), t(4, 3), padding_idx=v)]
    table["nn.embedding_grad.num_embeddings"] = [lambda v: nn.embedding_grad(b, i32(2), t(2, 3), v)]
    table["nn.lrn.n"] = [lambda v: nn.lrn(b, x4(), x4(), n=v)]
    table["nn.lrn_grad.n"] = [lambda v: nn.lrn_grad(b, x4(), x4(), x4(), x4(), n=v)]
    table["nn.dropout.seed"] = [
        lambda v: nn.dropout(b, t(8), t(8), t(8, dtype="uint8"), 0.5, v)]
    return table


def test_the_sweep_covers_every_integer_parameter(native):
    assert set(calls(native)) == integer_parameters()


BAD = [2**63, -2**63 - 1, 2**64, 10**30]


@pytest.mark.parametrize("value", BAD, ids=["2^63", "-2^63-1", "2^64", "1e30"])
def test_out_of_range_integers_raise_parenchyma_error_naming_the_argument(native, value):
    for key, fns in sorted(calls(native).items()):
        param = key.rsplit(".", 1)[1]
        if param == "seed" and value == 2**63:
            continue  # in range: seeds are uint64
        for fn in fns:
            with pytest.raises(parenchyma.Error) as e:
                fn(value)
            assert e.value.code == "invalid_argument", (key, str(e.value))
            assert f"argument {param}" in str(e.value), (key, str(e.value))
            assert "Unable to cast" not in str(e.value)


@pytest.mark.parametrize("value", ["3", 2.5, object()], ids=["str", "float", "object"])
def test_non_integers_raise_parenchyma_error_naming_the_argument(native, value):
    for key, fns in sorted(calls(native).items()):
        param = key.rsplit(".", 1)[1]
        if param == "algorithm" and value == "3":
            continue  # a str is a name there ('auto', 'heuristic'): refused as a name
        for fn in fns:
            with pytest.raises(parenchyma.Error) as e:
                fn(value)
            assert f"argument {param}" in str(e.value) or param == "algorithm", (key, str(e.value))
            assert "Unable to cast" not in str(e.value)


def test_numpy_integers_are_integers(native):
    x = parenchyma.Tensor(np.int64(3))
    assert x.shape == (3,)
    assert parenchyma.Tensor((np.int32(2), np.uint8(5))).shape == (2, 5)
    assert nn.pooling_output_shape((1, 1, 4, 4), np.int64(2)) == (1, 1, 2, 2)


def test_dropout_seed_takes_the_whole_uint64_range(native):
    for seed in (0, 2**63, 2**64 - 1):
        nn.dropout(native, t(8), t(8), t(8, dtype="uint8"), 0.5, seed)
    with pytest.raises(parenchyma.Error, match="argument seed"):
        nn.dropout(native, t(8), t(8), t(8, dtype="uint8"), 0.5, -1)


def test_max_version_must_be_a_pair(native):
    for bad in ((1,), (1, 0, 0), "10", 1):
        with pytest.raises(parenchyma.Error, match="argument max_version"):
            t(4).__dlpack__(max_version=bad)


# ---- operands the producer refuses to export -----------------------------------------------

def read_only_array():
    a = np.arange(8, dtype=np.float32)
    a.flags.writeable = False
    return a


def numpy_exports_read_only():
    """NumPy >= 2.1 exports a read-only array as a versioned capsule with READ_ONLY (every build
    reads those); older NumPy refuses to export it."""
    try:
        read_only_array().__dlpack__(max_version=(1, 0))
    except (BufferError, TypeError):
        return False
    return True


def test_read_only_numpy_operands_are_read_only_tensors(native):
    if not numpy_exports_read_only():
        pytest.skip(f"NumPy {np.__version__} refuses to export read-only arrays (the refusal is "
                    "tested below)")
    x = parenchyma.from_dlpack(read_only_array())  # zero copy, read-only
    assert not x.numpy().flags.writeable
    np.testing.assert_array_equal(x.numpy(), np.arange(8))
    for write in (lambda: parenchyma.blas.scal(native, 2.0, read_only_array()),
                  lambda: parenchyma.blas.axpy(native, 1.0, t(8), read_only_array())):
        with pytest.raises(parenchyma.Error, match="read-only") as e:
            write()
        assert e.value.code == "invalid_argument"
    y = t(8)
    nn.relu(native, read_only_array(), y)  # reading is allowed
    np.testing.assert_array_equal(y.numpy(), np.arange(8))


@pytest.mark.parametrize("make", [read_only_array], ids=["read-only"])
def test_refused_exports_raise_parenchyma_error_naming_the_operand(native, make):
    if numpy_exports_read_only():
        pytest.skip(f"NumPy {np.__version__} exports read-only arrays (versioned, READ_ONLY): "
                    "tested above")
    codes = ("invalid_argument",)
    with pytest.raises(parenchyma.Error) as e:
        parenchyma.from_dlpack(make())
    assert e.value.code in codes, str(e.value)
    assert e.value.origin == "parenchyma.from_dlpack" and "argument obj" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        parenchyma.blas.scal(native, 2.0, make())
    assert e.value.code in codes, str(e.value)
    assert e.value.origin == "blas.scal" and "argument x" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        parenchyma.blas.axpy(native, 1.0, t(8), make())
    assert "argument y" in str(e.value)
    with pytest.raises(parenchyma.Error) as e:
        nn.relu(native, make(), t(8))
    assert e.value.origin == "nn.relu" and "argument x" in str(e.value)


def test_bool_imports_and_float_ops_refuse_it_naming_the_operand(native):
    # ABI 1.5: bool is a dtype (one byte); NumPy >= 1.25 exports it as DLPack's bool.
    if tuple(int(v) for v in np.__version__.split(".")[:2]) < (1, 25):
        pytest.skip(f"NumPy {np.__version__} does not export bool through DLPack (1.25 does)")
    b = parenchyma.from_dlpack(np.array([True, False, True]))
    assert b.dtype == "bool" and b.numpy().tolist() == [True, False, True]
    with pytest.raises(parenchyma.Error) as e:
        parenchyma.blas.scal(native, 2.0, b)
    assert e.value.code == "invalid_argument" and "argument x" in str(e.value)
