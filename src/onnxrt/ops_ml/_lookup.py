"""Vectorized key -> value lookups (sorted keys + searchsorted) for the encoders of the ml domain."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError


def _as_keys(values: np.ndarray) -> np.ndarray:
    """Keys in a sortable numpy form: strings become fixed-width unicode, numbers stay numbers."""
    if values.dtype.kind in "OUS":
        if values.size == 0:
            return np.zeros(values.shape, dtype="<U1")
        return values.astype(np.str_)
    return values


class Lookup:
    """A mapping from ``keys`` to positions 0..n-1, built once, queried on whole tensors.

    Duplicate keys: the last occurrence wins, or the first with ``first_wins`` (what
    onnxruntime's LabelEncoder does, its map keeping the first insertion). Float keys: ``nan_matches`` lets a NaN key match every NaN input
    (LabelEncoder 4); ``bitwise`` compares the bit patterns instead (LabelEncoder 2, where
    the spec says look-ups are bit-wise, so -0.0 and 0.0 differ and NaN matches its own bits).
    """

    def __init__(self, keys: np.ndarray, nan_matches: bool = False, bitwise: bool = False, first_wins: bool = False):
        keys = np.asarray(keys)
        self.kind = "str" if keys.dtype.kind in "OUS" else keys.dtype.kind
        self.bitwise = bitwise and keys.dtype.kind == "f"
        self.nan_position: int | None = None
        positions = np.arange(keys.size)
        if self.bitwise:
            keys = keys.view(np.int32 if keys.dtype.itemsize == 4 else np.int64)
        elif keys.dtype.kind == "f":
            nan = np.isnan(keys)
            if nan.any() and nan_matches:
                self.nan_position = int(positions[nan][0 if first_wins else -1])
            keys, positions = keys[~nan], positions[~nan]
        keys = _as_keys(keys)
        # sort by key then position; keep the last (or first) of each run of equal keys
        order = np.lexsort((positions, keys)) if keys.size else np.zeros(0, np.intp)
        skeys, spos = keys[order], positions[order]
        if skeys.size:
            keep = np.ones(skeys.size, dtype=bool)
            if first_wins:
                keep[1:] = skeys[1:] != skeys[:-1]
            else:
                keep[:-1] = skeys[1:] != skeys[:-1]
            skeys, spos = skeys[keep], spos[keep]
        self.keys = skeys
        self.positions = spos
        self.dtype = np.asarray(keys).dtype

    def find(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position of each element's key (0 where absent), found mask), both of x's shape."""
        x = np.asarray(x)
        if self.kind == "str":
            if x.dtype.kind not in "OUS":
                raise KernelError(f"the keys are strings but the input has dtype {x.dtype}.")
            q = _as_keys(x)
        else:
            if x.dtype.kind in "OUS":
                raise KernelError("the keys are numbers but the input holds strings.")
            if self.bitwise:
                if x.dtype.kind != "f":
                    raise KernelError(f"the keys are floats but the input has dtype {x.dtype}.")
                q = x.astype(self.keys_float_dtype).view(self.dtype)
            elif self.kind in "iu":
                if x.dtype.kind not in "iu":
                    raise KernelError(f"the keys are integers but the input has dtype {x.dtype}.")
                q = x.astype(np.int64)
            else:
                q = x
        n = self.keys.size
        if n == 0:
            pos = np.zeros(x.shape, dtype=np.intp)
            found = np.zeros(x.shape, dtype=bool)
        else:
            idx = np.searchsorted(self.keys, q)
            np.minimum(idx, n - 1, out=idx)
            found = self.keys[idx] == q
            pos = self.positions[idx]
        if self.nan_position is not None:
            nan = np.isnan(x)
            if nan.any():
                pos = np.where(nan, self.nan_position, pos)
                found = found | nan
        return pos, found

    @property
    def keys_float_dtype(self) -> np.dtype:
        return np.dtype(np.float32) if self.dtype == np.int32 else np.dtype(np.float64)


def lookup(keys: np.ndarray, values: np.ndarray, default, x: np.ndarray, **options) -> np.ndarray:
    """values[position of x in keys], default where absent (a one-shot :class:`Lookup`)."""
    pos, found = Lookup(keys, **options).find(x)
    return select(values, pos, found, default)


def select(values: np.ndarray, pos: np.ndarray, found: np.ndarray, default) -> np.ndarray:
    """``values[pos]`` where found, ``default`` elsewhere, in ``values``' dtype."""
    if values.size == 0:
        out = np.empty(pos.shape, dtype=values.dtype)
        out[...] = default
        return out
    out = values.take(pos)
    if not found.all():
        out[~found] = default
    return out
