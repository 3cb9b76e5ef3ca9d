"""BLAS on parenchyma backends: asum, axpy, axpby, copy, dot, nrm2, scal, swap, gemv, gemm,
gemm_batched.

Every op takes the backend first, then its operands: parenchyma.Tensor objects, or DLPack
producers (NumPy arrays, ...) imported for the call without a copy, so results written to
them land in their memory. float32 and float64; matrices are row-major 2-d tensors
(gemm_batched: a batch of them, [..., rows, cols]). A bad argument raises parenchyma.Error (code
'invalid_argument', origin 'blas.<op>') naming it, before anything runs. The GIL is released while an op runs.

    parenchyma.blas.gemm(backend, a, b, c, alpha=1.0, beta=0.0, trans_a=False, trans_b=False)
    parenchyma.blas.gemm_batched(backend, a, b, c)   # c[i] = a[i] @ b[i]
"""

from ._parenchyma import blas as _blas

asum = _blas.asum
axpy = _blas.axpy
axpby = _blas.axpby
copy = _blas.copy
dot = _blas.dot
nrm2 = _blas.nrm2
scal = _blas.scal
swap = _blas.swap
gemv = _blas.gemv
gemm = _blas.gemm
gemm_batched = _blas.gemm_batched

__all__ = ["asum", "axpy", "axpby", "copy", "dot", "nrm2", "scal", "swap", "gemv", "gemm",
           "gemm_batched"]
