"""StringSplit (20): split each string on a delimiter (or runs of whitespace), padded to the longest split."""

from __future__ import annotations

from itertools import chain

import numpy as np

from ..errors import InvalidAttributeError
from ..registry import register
from ._op import OpRun


def string_split(x: np.ndarray, delimiter: str | None = None, maxsplit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(substrings, counts) for a string tensor of any shape.

    ``delimiter`` unset or ``""``: runs of whitespace separate, leading and trailing whitespace
    is dropped (an empty or blank string gives no substring). Otherwise every delimiter
    separates, so consecutive ones delimit empty strings. ``maxsplit`` limits the splits, left
    to right, the rest of the string being the last substring. An empty string gives none. ``substrings`` has shape
    ``x.shape + [max count]``, padded with ``""``; ``counts`` (int64) has the shape of ``x``.
    Python's ``str.split`` has exactly these semantics; numpy applies it element-wise.
    """
    x = np.asarray(x, dtype=object)
    sep = delimiter or None
    limit = -1 if maxsplit is None else int(maxsplit)
    flat = x.reshape(-1)
    n = flat.size
    if n == 0:
        return np.empty(x.shape + (0,), dtype=object), np.zeros(x.shape, dtype=np.int64)
    # an empty string has no substring, whatever the delimiter (onnxruntime; the spec is silent
    # and str.split would give [""] for an explicit delimiter)
    pieces = np.frompyfunc(lambda s: s.split(sep, limit) if s else [], 1, 1)(flat)
    counts = np.fromiter(map(len, pieces), dtype=np.int64, count=n)
    width = int(counts.max())
    out = np.full((n, width), "", dtype=object)
    total = int(counts.sum())
    if total:
        values = np.empty(total, dtype=object)
        values[:] = list(chain.from_iterable(pieces))
        rows = np.repeat(np.arange(n), counts)
        starts = np.cumsum(counts) - counts
        cols = np.arange(total) - np.repeat(starts, counts)
        out[rows, cols] = values
    return out.reshape(x.shape + (width,)), counts.reshape(x.shape)


@register("StringSplit", versions=(20,))
class StringSplit(OpRun):
    """StringSplit-20: delimiter (unset or empty: whitespace runs), maxsplit (unset: no limit)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if self.maxsplit is not None and self.maxsplit < 0:
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'maxsplit' is {self.maxsplit}, expected >= 0.")

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return string_split(x, self.delimiter, self.maxsplit)
