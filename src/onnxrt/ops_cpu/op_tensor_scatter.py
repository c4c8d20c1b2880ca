"""TensorScatter (24): write an update into a KV cache along the sequence axis, per-batch offsets, linear or circular."""

from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfRangeError, InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun


def tensor_scatter(
    past_cache: np.ndarray,
    update: np.ndarray,
    write_indices: np.ndarray | None = None,
    axis: int = -2,
    mode: str = "linear",
) -> np.ndarray:
    """Copy of ``past_cache`` with ``update`` written at ``write_indices[b] + s`` along ``axis`` for every batch ``b``.

    In ``circular`` mode positions wrap modulo the cache length; in ``linear`` mode a
    write past the end raises IndexOutOfRangeError. Every element type works (strings
    included). One fancy-index assignment writes every batch at once.
    """
    past_cache, update = np.asarray(past_cache), np.asarray(update)
    if mode not in ("linear", "circular"):
        raise InvalidAttributeError(f"mode must be 'linear' or 'circular', got {mode!r}.")
    rank = past_cache.ndim
    if rank < 2:
        raise KernelError(f"past_cache must have rank >= 2, got shape {list(past_cache.shape)}.")
    if not -rank <= axis < rank:
        raise InvalidAttributeError(f"axis {axis} is out of range for rank {rank}.")
    axis %= rank
    if axis == 0:
        raise InvalidAttributeError("axis cannot be 0, the batch dimension.")
    expected = past_cache.shape[:axis] + (update.shape[axis] if update.ndim == rank else -1,) + past_cache.shape[axis + 1:]
    if update.ndim != rank or update.shape != expected:
        raise KernelError(
            f"update must have the shape of past_cache {list(past_cache.shape)} except along axis {axis}, "
            f"got {list(update.shape)}."
        )
    batch, cap, seq = past_cache.shape[0], past_cache.shape[axis], update.shape[axis]
    if seq > cap:
        raise KernelError(f"update has {seq} positions along axis {axis}, more than the cache's {cap}.")
    if write_indices is None:
        start = np.zeros(batch, dtype=np.int64)
    else:
        start = np.asarray(write_indices).astype(np.int64).reshape(-1)
        if start.shape != (batch,):
            raise KernelError(f"write_indices must have shape [{batch}], got {list(np.shape(write_indices))}.")
        if start.size and start.min() < 0:
            raise IndexOutOfRangeError(f"write_indices holds {int(start.min())}, expected values >= 0.")
    pos = start[:, None] + np.arange(seq)[None, :]  # (batch, seq)
    if mode == "circular":
        pos %= cap
    elif pos.size and pos.max() >= cap:
        b = int(np.argmax(pos.max(axis=1) >= cap))
        raise IndexOutOfRangeError(
            f"write_indices[{b}] = {int(start[b])} plus {seq} updates passes the cache length {cap} in linear mode."
        )
    out = past_cache.copy()
    if seq == 0:
        return out
    # (batch, seq_axis, ...) views: the assignment goes through to ``out``
    view = np.moveaxis(out, axis, 1)
    upd = np.moveaxis(update, axis, 1)
    view[np.arange(batch)[:, None], pos] = upd
    return out


@register("TensorScatter", versions=(24,))
class TensorScatter(OpRun):
    """TensorScatter (24)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.check_choice("mode", ("linear", "circular"))

    def _run(self, past_cache, update, write_indices=None, attributes=None, verbose=0, fLOG=None):
        return (tensor_scatter(past_cache, update, write_indices, axis=self.axis, mode=self.mode),)
