"""MatMul (1, 9, 13) and MatMulInteger (10): numpy.matmul semantics through BLAS."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ..parallel import matmul as parallel_matmul
from ._op import OpRun

_BLAS = (np.dtype(np.float32), np.dtype(np.float64))


def _shapes_error(a: np.ndarray, b: np.ndarray) -> KernelError:
    return KernelError(f"cannot multiply matrices of shapes {list(a.shape)} and {list(b.shape)}.")


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy.matmul: 1-D operands are promoted to matrices and the added axis removed,
    batch dimensions broadcast. float32/float64 go to BLAS; float16/bfloat16 are
    multiplied in float32 (BLAS, float32 accumulation) and rounded back; integers wrap."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise KernelError(f"MatMul operands must have rank >= 1, got shapes {list(a.shape)} and {list(b.shape)}.")
    dtype = a.dtype
    try:
        if dtype in _BLAS:
            return parallel_matmul(a, b)
        if dtype.kind in "iu":
            return np.matmul(a, b)
        return parallel_matmul(a.astype(np.float32), b.astype(np.float32)).astype(dtype)
    except ValueError as e:
        raise _shapes_error(a, b) from e


def _zero_point(zp, x: np.ndarray, row: bool) -> np.ndarray | None:
    if zp is None:
        return None
    z = np.asarray(zp)
    if z.size == 1:
        return z.reshape(()).astype(np.float64)
    if z.ndim != 1:
        raise KernelError(f"a zero point must be a scalar or 1-D, got shape {list(z.shape)}.")
    # per-row zero point of A ([M]) or per-column of B ([N])
    n = x.shape[-2] if row else x.shape[-1]
    if z.size != n:
        raise KernelError(f"a zero point has {z.size} values, expected 1 or {n}.")
    return z.astype(np.float64).reshape((n, 1) if row else (1, n))


def matmul_integer(a: np.ndarray, b: np.ndarray, a_zero_point=None, b_zero_point=None) -> np.ndarray:
    """int32 ``(A - a_zero_point) @ (B - b_zero_point)`` for int8/uint8 operands.

    Computed in float64 through BLAS: every product is below 2**16 in magnitude, so
    sums are exact while K < 2**37; the int32 result wraps like onnxruntime's beyond that.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise KernelError(f"MatMulInteger operands must have rank >= 1, got shapes {list(a.shape)} and {list(b.shape)}.")
    af = a.astype(np.float64)
    bf = b.astype(np.float64)
    za = _zero_point(a_zero_point, a if a.ndim > 1 else a.reshape(1, -1), row=True)
    zb = _zero_point(b_zero_point, b if b.ndim > 1 else b.reshape(-1, 1), row=False)
    if za is not None:
        af = af - (za if za.ndim == 0 or a.ndim > 1 else za.reshape(-1))
    if zb is not None:
        bf = bf - (zb if zb.ndim == 0 or b.ndim > 1 else zb.reshape(-1))
    try:
        y = np.matmul(af, bf)
    except ValueError as e:
        raise _shapes_error(a, b) from e
    return y.astype(np.int64).astype(np.int32)


@register("MatMul", versions=(1, 9, 13))
class MatMul(OpRun):
    """MatMul: 1, 9 (integers), 13 (bfloat16)."""

    def _run(self, a, b, attributes=None, verbose=0, fLOG=None):
        return (matmul(a, b),)


@register("MatMulInteger", versions=(10,))
class MatMulInteger(OpRun):
    """MatMulInteger: 10."""

    def _run(self, a, b, a_zero_point=None, b_zero_point=None, attributes=None, verbose=0, fLOG=None):
        return (matmul_integer(a, b, a_zero_point, b_zero_point),)
