"""The sequence family (11, SplitToSequence 24): sequences are Python lists, never mutated in place."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import IndexOutOfRangeError, KernelError
from ..registry import register
from ._indexing import normalize_axis
from ._op import OpRun


def _position(position: Any, n: int, upper: int, name: str = "position") -> int:
    """A scalar position checked against [-n, upper] and made non-negative."""
    pos = np.asarray(position)
    if pos.size != 1:
        raise KernelError(f"{name} must be a scalar, got shape {list(pos.shape)}.")
    p = int(pos.reshape(-1)[0])
    if not -n <= p <= upper:
        raise IndexOutOfRangeError(f"{name} is {p}, out of range [{-n}, {upper}] for a sequence of {n} tensors.")
    return p + n if p < 0 else p


def _as_sequence(seq: Any, name: str = "input_sequence") -> list[Any]:
    if not isinstance(seq, list | tuple):
        raise KernelError(f"{name} must be a sequence, got {type(seq).__name__}.")
    return seq  # type: ignore[return-value]


def sequence_insert(seq: list[Any], tensor: np.ndarray, position: Any = None) -> list[Any]:
    """A new list with ``tensor`` inserted at ``position`` (default: at the back)."""
    seq = _as_sequence(seq)
    out = list(seq)
    if position is None:
        out.append(tensor)
    else:
        out.insert(_position(position, len(seq), len(seq)), tensor)
    return out


def sequence_erase(seq: list[Any], position: Any = None) -> list[Any]:
    """A new list without the tensor at ``position`` (default: the last one)."""
    seq = _as_sequence(seq)
    n = len(seq)
    if n == 0:
        raise KernelError("Cannot erase from an empty sequence.")
    p = n - 1 if position is None else _position(position, n, n - 1)
    out = list(seq)
    del out[p]
    return out


def sequence_at(seq: list[Any], position: Any) -> np.ndarray:
    """The tensor at ``position`` in [-n, n-1]."""
    seq = _as_sequence(seq)
    return seq[_position(position, len(seq), len(seq) - 1)]


def split_to_sequence(x: np.ndarray, split: np.ndarray | None = None, axis: int = 0, keepdims: int = 1) -> list[np.ndarray]:
    """Split ``x`` along ``axis``: in pieces of 1 (``split`` omitted; the axis is dropped when
    ``keepdims`` is 0), of ``split`` (a scalar; the last piece may be shorter), or of the lengths
    listed in a 1-D ``split`` (they must sum to the axis size). Pieces are read-only views of ``x``.
    """
    x = np.asarray(x)
    if x.ndim == 0:
        raise KernelError("SplitToSequence needs an input of rank >= 1, got a scalar.")
    axis = normalize_axis(axis, x.ndim)
    size = x.shape[axis]
    if split is None:
        if keepdims:
            return [x[(slice(None),) * axis + (slice(i, i + 1),)] for i in range(size)]
        return [x[(slice(None),) * axis + (i,)] for i in range(size)]
    split = np.asarray(split)
    if split.dtype.kind not in "iu":
        raise KernelError(f"split must be an integer tensor, got dtype {split.dtype}.")
    if split.ndim == 0:
        step = int(split)
        if step <= 0:
            raise KernelError(f"A scalar split must be positive, got {step}.")
        bounds = list(range(0, size, step)) + [size]
    elif split.ndim == 1:
        lengths = split.astype(np.int64)
        if (lengths < 0).any():
            raise KernelError(f"split must hold non-negative lengths, got {lengths.tolist()}.")
        if int(lengths.sum()) != size:
            raise KernelError(
                f"split lengths {lengths.tolist()} sum to {int(lengths.sum())}, expected the size {size} of axis {axis}."
            )
        bounds = [0] + np.cumsum(lengths).tolist()
    else:
        raise KernelError(f"split must be a scalar or a 1-D tensor, got rank {split.ndim}.")
    head = (slice(None),) * axis
    return [x[head + (slice(a, b),)] for a, b in zip(bounds[:-1], bounds[1:])]


def concat_from_sequence(seq: list[np.ndarray], axis: int, new_axis: int = 0, check: Any = None) -> np.ndarray:
    """Concatenate (``new_axis=0``) or stack (``new_axis=1``) the tensors of a sequence.

    ``check(shape, dtype)`` (the kernel's :meth:`OpRun.check_alloc`) sees the output's
    element count first: a sequence may hold one tensor many times for the cost of a
    pointer each, and its concatenation is then far larger than what it holds."""
    seq = _as_sequence(seq)
    if not seq:
        raise KernelError("ConcatFromSequence needs a non-empty sequence.")
    if check is not None:
        check([sum(int(np.size(t)) for t in seq)], np.asarray(seq[0]).dtype)
    rank = np.ndim(seq[0])
    if new_axis:
        ax = normalize_axis(axis, rank + 1)
        return np.stack(seq, axis=ax)
    if rank == 0:
        raise KernelError("ConcatFromSequence without new_axis needs tensors of rank >= 1, got scalars.")
    ax = normalize_axis(axis, rank)
    try:
        return np.concatenate(seq, axis=ax)
    except ValueError as e:
        shapes = [list(np.shape(t)) for t in seq]
        raise KernelError(f"Tensors of shapes {shapes} cannot be concatenated on axis {axis}: {e}") from None


@register("SequenceEmpty", versions=(11,))
class SequenceEmpty(OpRun):
    """SequenceEmpty-11: an empty list (the element type is a static property of the graph)."""

    def _run(self, attributes=None, verbose=0, fLOG=None):
        return ([],)


@register("SequenceConstruct", versions=(11,))
class SequenceConstruct(OpRun):
    """SequenceConstruct-11: a list of the input tensors."""

    def _run(self, *tensors, attributes=None, verbose=0, fLOG=None):
        return (list(tensors),)


@register("SequenceInsert", versions=(11,))
class SequenceInsert(OpRun):
    """SequenceInsert-11: position in [-n, n], default at the back."""

    def _run(self, seq, tensor, position=None, attributes=None, verbose=0, fLOG=None):
        return (sequence_insert(seq, tensor, position),)


@register("SequenceErase", versions=(11,))
class SequenceErase(OpRun):
    """SequenceErase-11: position in [-n, n-1], default the last tensor."""

    def _run(self, seq, position=None, attributes=None, verbose=0, fLOG=None):
        return (sequence_erase(seq, position),)


@register("SequenceAt", versions=(11,))
class SequenceAt(OpRun):
    """SequenceAt-11: position in [-n, n-1]. The tensor is returned as stored (never written to)."""

    def _run(self, seq, position, attributes=None, verbose=0, fLOG=None):
        return (sequence_at(seq, position),)


@register("SequenceLength", versions=(11,))
class SequenceLength(OpRun):
    """SequenceLength-11: an int64 scalar."""

    def _run(self, seq, attributes=None, verbose=0, fLOG=None):
        return (np.array(len(_as_sequence(seq)), dtype=np.int64),)


@register("SplitToSequence", versions=(11, 24))
class SplitToSequence(OpRun):
    """SplitToSequence: 11, 24 (bfloat16). ``keepdims`` only applies when ``split`` is omitted."""

    def _run(self, x, split=None, attributes=None, verbose=0, fLOG=None):
        return (split_to_sequence(x, split, axis=self.axis, keepdims=self.keepdims),)


@register("ConcatFromSequence", versions=(11,))
class ConcatFromSequence(OpRun):
    """ConcatFromSequence-11: ``new_axis=1`` stacks (axis in [-r-1, r]), else concatenates."""

    def _run(self, seq, attributes=None, verbose=0, fLOG=None):
        return (concat_from_sequence(seq, self.axis, self.new_axis, self.check_alloc),)
