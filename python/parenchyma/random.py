"""parenchyma.random: random Tensors from a counter-based generator (Philox-4x32-10).

    g = parenchyma.random.Generator(seed=7)
    x = g.normal((1024, 64))                  # float32 on the default backend
    m = g.bernoulli((1024,), 0.1)             # the next counters of the same stream

A Generator is a stream (seed, offset): each draw takes the next counters (four elements per
counter; two for float64 and randint), so successive draws never overlap and a program replays
exactly from its seed. The values are the same bits on every
backend (native, OpenCL, CUDA): the array front-end's random op (parenchyma/array.hpp).
"""

from ._parenchyma import _array as _a
from . import _tensor  # noqa: F401  (the Tensor's array methods)
from ._args import as_float as _as_float

__all__ = ["Generator", "default_rng"]


class Generator:
    """A random stream: (seed, offset); each draw advances offset by the counters it takes."""

    def __init__(self, seed, offset=0):
        self._g = _a.Generator(seed, offset)

    @property
    def seed(self):
        """The stream's seed."""
        return self._g.seed

    @property
    def offset(self):
        """The index of the next element the stream gives."""
        return self._g.offset

    def uniform(self, shape, low=0.0, high=1.0, *, dtype="float32", device=None):
        """Values in [low, high) (floating dtypes)."""
        o = "parenchyma.random.Generator.uniform"
        return self._g.draw("uniform", shape, _as_float(low, o, "low"),
                            _as_float(high, o, "high"), dtype, device)

    def normal(self, shape, mean=0.0, std=1.0, *, dtype="float32", device=None):
        """mean + std * z, z standard normal (floating dtypes)."""
        o = "parenchyma.random.Generator.normal"
        return self._g.draw("normal", shape, _as_float(mean, o, "mean"), _as_float(std, o, "std"),
                            dtype, device)

    def bernoulli(self, shape, p, *, dtype="bool", device=None):
        """1 (True) with probability p, else 0."""
        return self._g.draw("bernoulli", shape,
                            _as_float(p, "parenchyma.random.Generator.bernoulli", "p"), None,
                            dtype, device)

    def randint(self, shape, low, high, *, dtype="int64", device=None):
        """Integers in [low, high) (integer dtypes)."""
        return self._g.draw("randint", shape, low, high, dtype, device)

    def permutation(self, x, *, dtype="int64", device=None):
        """A random permutation of range(x) (x an int), or of x's first axis (x a Tensor); the
        same on every backend, made without a sort (a Feistel network with Philox rounds)."""
        if isinstance(x, int):
            return self._g.draw("permutation", 1, x, None, dtype, device)
        from . import array_api as _xp
        idx = self._g.draw("permutation", 1, x.shape[0], None, dtype, x.device)
        return _xp.take(x, idx, axis=0)

    def __repr__(self):
        return "Generator(seed=%d, offset=%d)" % (self.seed, self.offset)


def default_rng(seed=0):
    """Generator(seed)."""
    return Generator(seed)
