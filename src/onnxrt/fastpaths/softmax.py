"""Fast paths of Softmax and LogSoftmax (reference kernels: onnxrt.ops_cpu.op_softmax).

- ``compiled rows``: float32 lanes along the last axis (or the trailing block of opsets 1
  and 11) through native.loops' row loop, on the team for large inputs;
- ``pool lanes``: large inputs of any float type split by blocks of the first axis over
  onnxrt's kernel pool, each block computed by the reference's numpy formula (exactly the
  reference's bits: every lane is computed as in one call).

Hardmax only compares: its reference kernel is all it has.
"""

from __future__ import annotations

import math

import numpy as np

from .. import native
from ..dispatch import fast_path
from ..native.layout import SOFTMAX
from ..parallel import parallel_for
from ..ops_cpu.op_softmax import _softmax_native

_F32 = np.dtype(np.float32)

#: float32 elements from which Softmax/LogSoftmax along the last axis run the compiled loop:
#: two compiled calls against numpy's four passes and two reductions, 15 -> 7.5 us for 1000
#: elements (squeezenet's classifier; 27 -> 19 us behind a large kernel); below, about even
JIT_SIZE = 1 << 8
#: elements from which Softmax/LogSoftmax split their lanes over the kernel pool
PARALLEL_SIZE = 1 << 18
#: elements from which the compiled rows go to the team
TEAM_SIZE = 1 << 19

_LOG = {"Softmax": False, "LogSoftmax": True}


def _axis(op, x) -> int | None:
    """The softmax axis of a valid call (None: an out-of-range axis, a scalar or an empty
    input, which the reference handles and reports)."""
    r = x.ndim
    axis = op.axis
    if r == 0 or x.size == 0 or not -r <= axis < r:
        return None
    return axis + r if axis < 0 else axis


def softmax_compiled(x: np.ndarray, lane: int, log: bool) -> np.ndarray:
    """Softmax (LogSoftmax when ``log``) of a float32 array over lanes of its ``lane``
    trailing elements by native.loops' row loop: exp(x - max) by native.loops' exp (about
    1 ulp, numpy's is 2; results below about 8.6e-39 flush to 0, as onnxruntime's do), its
    sum, then the scaling (or the subtraction of the log), each row while it is in cache,
    after a compiled pass for the row maxima. Blocks of rows go to the team (or the pool)."""
    k = native.kernels()
    src = np.ascontiguousarray(x).reshape(-1, lane)
    out = np.empty(src.shape, dtype=np.float32)
    rows = src.shape[0]

    def block(lo: int, hi: int) -> None:
        maxima = np.empty(hi - lo, np.float32)
        k.row_maxima(src[lo:hi], maxima)  # as the team's parts do (numpy's max: 1.5x longer)
        k.softmax_rows(src[lo:hi], maxima, out[lo:hi], log)

    args = SOFTMAX.pack(x=src, y=out, rows=rows, n=lane, log=int(log))
    if not (rows * lane >= TEAM_SIZE and native.team_split("softmax_part", args, rows * lane, max_parts=rows)):
        native.split(rows, block, max(1, (1 << 18) // lane))
    return out.reshape(x.shape)


def _compiled_applies(op, x) -> bool:
    if x.dtype != _F32 or x.size < JIT_SIZE:
        return False
    axis = _axis(op, x)
    return axis is not None and (op._coerce_2d or axis == x.ndim - 1)


@fast_path(("Softmax", "LogSoftmax"), "compiled rows", when=_compiled_applies)
def compiled_rows(op, x):
    """float32 lanes of 256+ elements along the last axis (or opsets 1/11's trailing block): native.loops' row loop.

    Within about 1 ulp of the reference per element (its exp is numpy's, 2 ulp), except
    that results below about 8.6e-39 flush to 0 as onnxruntime's do.
    """
    axis = _axis(op, x)
    return (softmax_compiled(x, math.prod(x.shape[axis:]), _LOG[op.onnx_node.op_type]),)


def softmax_lanes(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    """The reference's formula over blocks of the first axis on the kernel pool (the lanes
    run along ``axis`` > 0, so every block holds whole lanes; np.exp dominates and is
    compute-bound, a second core halves it). Each lane is computed as in one call."""
    out = np.empty(x.shape, dtype=x.dtype)

    def rows(lo: int, hi: int) -> None:
        with np.errstate(all="ignore"):  # numpy's error state is per thread
            out[lo:hi] = _softmax_native(x[lo:hi], axis, log)

    parallel_for(x.shape[0], rows, work_per_item=(x.size // x.shape[0]) * 16)
    return out


def _pool_applies(op, x) -> bool:
    if x.size < PARALLEL_SIZE or x.shape[0] < 2:
        return False
    axis = _axis(op, x)
    return axis is not None and (op._coerce_2d or axis > 0)


@fast_path(("Softmax", "LogSoftmax"), "pool lanes", when=_pool_applies, native=False)
def pool_lanes(op, x):
    """Inputs of 256K+ elements whose lanes do not run along the first axis: blocks of the first axis on the kernel pool.

    The reference's bits exactly (each lane computed by the same numpy formula).
    """
    axis = _axis(op, x)
    work = x  # Softmax computes in the input's type (op_softmax._apply)
    if op._coerce_2d:
        shape = work.shape
        work = work.reshape(math.prod(shape[:axis]), math.prod(shape[axis:]))
        if work.shape[0] < 2:
            return None
        return (softmax_lanes(work, 1, _LOG[op.onnx_node.op_type]).reshape(shape),)
    return (softmax_lanes(work, axis, _LOG[op.onnx_node.op_type]),)
