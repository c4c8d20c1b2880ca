"""ReverseSequence (10, 28): reverse the first seq_len[b] steps of each batch entry along the time axis."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun


def reverse_sequence(x: np.ndarray, sequence_lens: np.ndarray, batch_axis: int = 1, time_axis: int = 0) -> np.ndarray:
    """Output where, for batch entry b, time steps t < L[b] come from step L[b] - 1 - t
    and the others are copied. One gather (take_along_axis) with a [batch, time] index."""
    x = np.asarray(x)
    lens = np.asarray(sequence_lens).astype(np.int64).reshape(-1)
    if x.ndim < 2:
        raise KernelError(f"input must have rank >= 2, got shape {list(x.shape)}.")
    if {batch_axis, time_axis} != {0, 1}:
        raise KernelError(f"batch_axis and time_axis must be 0 and 1 (either order), got {batch_axis} and {time_axis}.")
    nb, nt = x.shape[batch_axis], x.shape[time_axis]
    if lens.size != nb:
        raise KernelError(f"sequence_lens has {lens.size} values, expected {nb} (the batch size).")
    if lens.size and (lens.min() < 0 or lens.max() > nt):
        bad = lens[(lens < 0) | (lens > nt)][0]
        raise KernelError(f"sequence_lens holds {int(bad)}, out of range [0, {nt}] (the time axis length).")
    t = np.arange(nt, dtype=np.int64).reshape(1, nt)
    L = lens.reshape(nb, 1)
    src = np.where(t < L, L - 1 - t, t)  # [batch, time]
    if time_axis == 0:
        src = src.T
    src = src.reshape(src.shape + (1,) * (x.ndim - 2))
    return np.take_along_axis(x, src, axis=time_axis)


@register("ReverseSequence", versions=(10, 28))
class ReverseSequence(OpRun):
    """ReverseSequence: 10, 28 (bfloat16)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if {self.batch_axis, self.time_axis} != {0, 1}:
            raise InvalidAttributeError(
                f"{self.node_label()}: attributes 'batch_axis' and 'time_axis' must be 0 and 1, "
                f"got {self.batch_axis} and {self.time_axis}."
            )

    def _run(self, x, sequence_lens, attributes=None, verbose=0, fLOG=None):
        return (reverse_sequence(x, sequence_lens, self.batch_axis, self.time_axis),)
