"""OneHotEncoder (ml 1): one indicator column per category, appended as a last axis."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..ops_cpu._op import OpRun
from ..registry import register
from ._common import ML_DOMAIN, string_array
from ._lookup import Lookup


@register("OneHotEncoder", versions=(1,), domain=ML_DOMAIN)
class OneHotEncoder(OpRun):
    """OneHotEncoder (ml 1): Y has X's shape plus a last axis of len(cats), float32.

    Numeric inputs are truncated toward zero to int64 before the look-up (the spec: "cast to
    integers"). A category listed twice answers at its last position (onnxruntime). An
    unknown value gives a row of zeros, or an error when ``zeros`` is 0.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        strings, ints = self.cats_strings, self.cats_int64s
        if bool(strings) == bool(ints):
            raise InvalidAttributeError(
                f"{self.node_label()} must define exactly one of 'cats_strings' and 'cats_int64s'."
            )
        self._strings = bool(strings)
        cats = string_array(strings) if strings else np.asarray(ints, dtype=np.int64)
        self._n = cats.size
        self._lookup = Lookup(cats)

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        if self._strings != (x.dtype.kind in "OUS"):
            want = "strings" if self._strings else "numbers"
            raise KernelError(f"{self.node_label()} has categories of {want}, the input has dtype {x.dtype}.")
        if not self._strings and x.dtype.kind == "f":
            x = np.trunc(x).astype(np.int64)
        pos, found = self._lookup.find(x)
        if not self.zeros and not found.all():
            bad = np.asarray(x)[~found].reshape(-1)[0]
            raise KernelError(f"{self.node_label()} meets the unknown category {bad!r} and 'zeros' is 0.")
        out = np.zeros(x.shape + (self._n,), dtype=np.float32)
        flat = out.reshape(-1, self._n) if self._n else out.reshape(-1, 0)
        rows = np.nonzero(found.reshape(-1))[0]
        if rows.size:
            flat[rows, pos.reshape(-1)[rows]] = 1
        return (out,)
