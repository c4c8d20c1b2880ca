"""ScatterElements (11, 13, 16, 18) and the deprecated Scatter (9, 11)."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._indexing import checked_indices, flat_positions, normalize_axis
from ._op import OpRun

#: reduction -> ufunc applied with ``ufunc.at`` (duplicates accumulate in index order)
_REDUCERS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
REDUCTIONS = ("none", "add", "mul", "max", "min")


def reduction_of(op: OpRun) -> str:
    """The node's ``reduction``, checked against what its version allows (16: add/mul, 18: max/min)."""
    value = op.atts_value.get("reduction") or "none"
    since = op.since_version or 18
    allowed = ("none",) if since < 16 else ("none", "add", "mul") if since < 18 else REDUCTIONS
    if value not in allowed:
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute 'reduction' is {value!r}, expected one of {list(allowed)!r} "
            f"at version {since}."
        )
    return value


def scatter_elements(
    data: np.ndarray,
    indices: np.ndarray,
    updates: np.ndarray,
    axis: int = 0,
    reduction: str = "none",
) -> np.ndarray:
    """Copy of ``data`` where ``out[..., indices[i,j,...], ...] (op)= updates[i,j,...]`` along ``axis``.

    Every element type works (strings and bool included); indices may be int32 or int64
    and negative (counted from the end). An index outside [-s, s-1] raises
    IndexOutOfRangeError naming it. With ``reduction="none"`` the spec leaves duplicate
    indices undefined: onnxrt writes the updates in row-major order of ``indices``, so the
    last one wins, as onnxruntime's CPU kernel does. Other reductions fold every duplicate
    into the result (``add``/``mul``/``max``/``min``; on bool, add is ``or`` and mul ``and``).
    Vectorized: flat positions are computed with one pass per axis of the rank.
    """
    data = np.asarray(data)
    indices = np.asarray(indices)
    updates = np.asarray(updates)
    if reduction not in REDUCTIONS:
        raise KernelError(f"reduction must be one of {list(REDUCTIONS)}, got {reduction!r}.")
    rank = data.ndim
    if rank == 0:
        raise KernelError("data must have rank >= 1.")
    if indices.ndim != rank:
        raise KernelError(f"indices must have the rank of data ({rank}), got rank {indices.ndim}.")
    if updates.shape != indices.shape:
        raise KernelError(f"updates must have the shape of indices {list(indices.shape)}, got {list(updates.shape)}.")
    axis = normalize_axis(axis, rank)
    for k in range(rank):
        if k != axis and indices.shape[k] > data.shape[k]:
            raise KernelError(
                f"indices dimension {k} is {indices.shape[k]}, larger than data's {data.shape[k]}."
            )
    out = np.array(data, copy=True, order="C")
    if indices.size == 0:
        return out
    idx = checked_indices(indices, data.shape[axis], axis)
    pos = flat_positions(idx, data.shape, axis).reshape(-1)
    flat = out.reshape(-1)
    upd = updates.reshape(-1)
    if upd.dtype != out.dtype:
        upd = upd.astype(out.dtype)
    if reduction == "none":
        np.put(flat, pos, upd)  # sequential: the last duplicate wins
    else:
        _REDUCERS[reduction].at(flat, pos, upd)
    return out


@register("ScatterElements", versions=(11, 13, 16, 18))
class ScatterElements(OpRun):
    """ScatterElements: 11 (no reduction), 13 (bfloat16), 16 (reduction add/mul), 18 (max/min)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.reduction = reduction_of(self)

    def _run(self, data, indices, updates, attributes=None, verbose=0, fLOG=None):
        return (scatter_elements(data, indices, updates, axis=self.axis, reduction=self.reduction),)


@register("Scatter", versions=(9, 11))
class Scatter(OpRun):
    """Scatter (deprecated since 11; same semantics as ScatterElements without reduction)."""

    def _run(self, data, indices, updates, attributes=None, verbose=0, fLOG=None):
        return (scatter_elements(data, indices, updates, axis=self.axis),)
