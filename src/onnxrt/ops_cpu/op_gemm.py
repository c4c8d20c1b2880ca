"""Gemm (1, 6, 7, 9, 11, 13): Y = alpha * A' @ B' + beta * C through BLAS."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ..parallel import BLAS_THREADED_WORK, matmul
from ._op import OpRun

_BLAS = (np.dtype(np.float32), np.dtype(np.float64))
#: a float32 product of at most this many rows and multiply-adds runs in the compiled dense
#: loop (bias and Relu included); beyond, BLAS's blocked kernels win
DENSE_MAX_ROWS = 16
DENSE_MAX_WORK = 1 << 17


def gemm(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    transA: int = 0,
    transB: int = 0,
) -> np.ndarray:
    """``alpha * op(A) @ op(B) + beta * C`` with op a transpose when ``transA``/``transB``.

    A and B are 2-D; C (optional) broadcasts to [M, N]. Transposes are views that BLAS
    reads directly; alpha scales the smaller operand before the product (no extra pass
    over Y) and C is added in place into the fresh product. float16/bfloat16 run in
    float32 and are rounded once; integer types compute alpha/beta scaling in float64
    and truncate back.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise KernelError(f"A and B must be 2-D, got shapes {list(a.shape)} and {list(b.shape)}.")
    dtype = a.dtype
    at = a.T if transA else a
    bt = b.T if transB else b
    if at.shape[1] != bt.shape[0]:
        raise KernelError(
            f"cannot multiply A' {list(at.shape)} by B' {list(bt.shape)} (A {list(a.shape)}, transA={transA}, "
            f"B {list(b.shape)}, transB={transB})."
        )
    m, n = at.shape[0], bt.shape[1]
    if c is not None:
        c = np.asarray(c)
        try:
            np.broadcast_shapes(c.shape, (m, n))
        except ValueError:
            raise KernelError(f"C of shape {list(c.shape)} does not broadcast to [{m}, {n}].") from None
        if np.broadcast_shapes(c.shape, (m, n)) != (m, n):
            raise KernelError(f"C of shape {list(c.shape)} does not broadcast to [{m}, {n}].")
    if dtype.kind in "iu":
        y = np.matmul(at, bt)
        if alpha != 1.0 or (c is not None and beta != 1.0):
            yf = y.astype(np.float64) * alpha
            if c is not None and beta != 0.0:
                yf += beta * c.astype(np.float64)
            return yf.astype(dtype)
        if c is not None and beta != 0.0:
            y += c.astype(dtype, copy=False)
        return y
    work = dtype if dtype in _BLAS else np.dtype(np.float32)
    if work != dtype:
        at, bt = at.astype(work), bt.astype(work)
    if alpha != 1.0:
        # scale the operand with fewer elements: M*K or K*N instead of M*N
        if at.size <= bt.size:
            at = at * work.type(alpha)
        else:
            bt = bt * work.type(alpha)
    y = matmul(at, bt)
    if c is not None and beta != 0.0:
        cw = c if c.dtype == work else c.astype(work)
        if beta == 1.0:
            y += cw
        else:
            y += cw * work.type(beta) if cw.size < y.size else work.type(beta) * cw
    return y if work == dtype else y.astype(dtype)


@register("Gemm", versions=(1, 6, 7, 9, 11, 13))
class Gemm(OpRun):
    """Gemm: 1 and 6 (C required; with broadcast=0, C must already be [M, N]), 7 (C broadcasts),
    9 (integers), 11 (C optional), 13 (bfloat16). Reference: BLAS (the plain case without
    :func:`gemm`'s checks); a few float32 rows take the compiled dense loop, a fast path
    (onnxrt.fastpaths.gemm)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._strict_c = (self.since_version or 13) < 7 and not getattr(self, "broadcast", 0)
        # the common case (alpha = beta = 1, C optional) skips the general kernel's checks
        self._plain = self.alpha == 1.0 and self.beta == 1.0 and not self._strict_c
        #: whether B is transposed, for the compiled dense loop (onnxrt.fastpaths.gemm; None: it does not apply)
        self._dense_trans_b = bool(self.transB) if self._plain and not self.transA else None

    def _run(self, a, b, c=None, attributes=None, verbose=0, fLOG=None):
        if self._plain and a.dtype in _BLAS and a.ndim == 2 and b.ndim == 2 and b.dtype == a.dtype:
            at = a.T if self.transA else a
            bt = b.T if self.transB else b
            # products below OpenBLAS's threading threshold (one row through a dense layer)
            # skip matmul's dispatch: a few microseconds on graphs that run in tens
            y = np.dot(at, bt) if at.shape[0] * at.shape[1] * bt.shape[1] < BLAS_THREADED_WORK else matmul(at, bt)
            if c is not None:
                y += c  # C broadcasts to [M, N] (a C that would grow Y fails here, as it must)
            return (y,)
        if self._strict_c and c is not None:
            m = a.shape[1] if self.transA else a.shape[0]
            n = b.shape[0] if self.transB else b.shape[1]
            if tuple(np.shape(c)) != (m, n):
                raise KernelError(f"C has shape {list(np.shape(c))}; without broadcast=1 it must be [{m}, {n}].")
        return (gemm(a, b, c, self.alpha, self.beta, self.transA, self.transB),)
