# Type stubs for parenchyma.blas. Operands are Tensors or DLPack producers (NumPy arrays, ...).
from typing import Any, TypeVar

from ._parenchyma import Backend

_T = TypeVar("_T")

def asum(backend: Backend, x: Any) -> float: ...
def nrm2(backend: Backend, x: Any) -> float: ...
def dot(backend: Backend, x: Any, y: Any) -> float: ...
def axpy(backend: Backend, alpha: float, x: Any, y: _T) -> _T: ...
def axpby(backend: Backend, alpha: float, x: Any, beta: float, y: _T) -> _T: ...
def copy(backend: Backend, x: Any, y: _T) -> _T: ...
def scal(backend: Backend, alpha: float, x: _T) -> _T: ...
def swap(backend: Backend, x: Any, y: Any) -> None: ...
def gemv(
    backend: Backend,
    a: Any,
    x: Any,
    y: _T,
    alpha: float = 1.0,
    beta: float = 0.0,
    trans: bool = False,
) -> _T: ...
def gemm(
    backend: Backend,
    a: Any,
    b: Any,
    c: _T,
    alpha: float = 1.0,
    beta: float = 0.0,
    trans_a: bool = False,
    trans_b: bool = False,
) -> _T: ...
def gemm_batched(
    backend: Backend,
    a: Any,
    b: Any,
    c: _T,
    alpha: float = 1.0,
    beta: float = 0.0,
    trans_a: bool = False,
    trans_b: bool = False,
) -> _T: ...
