"""FeatureVectorizer (ml 1): concatenate inputs along the feature axis into one float tensor."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..ops_cpu._op import OpRun
from ..registry import register
from ._common import ML_DOMAIN


def feature_vectorizer(inputs: list[np.ndarray], dims: list[int] | None = None) -> np.ndarray:
    """[N, sum(dims)] float32: input i contributes its first dims[i] features, zero-padded.

    Each input is read as [N, C] ([C] is one row; higher ranks flatten after the first axis,
    as onnxruntime does). Without ``inputdimensions`` every input keeps its own width.
    """
    if not inputs:
        raise KernelError("FeatureVectorizer needs at least one input.")
    rows = []
    for x in inputs:
        x = np.asarray(x)
        rows.append(x.reshape(1, -1) if x.ndim <= 1 else x.reshape(x.shape[0], -1))
    n = rows[0].shape[0]
    for i, r in enumerate(rows):
        if r.shape[0] != n:
            raise KernelError(f"input {i} has {r.shape[0]} rows, input 0 has {n}; all inputs need the same batch size.")
    widths = list(dims) if dims else [r.shape[1] for r in rows]
    if len(widths) != len(rows):
        raise KernelError(f"'inputdimensions' has {len(widths)} values for {len(rows)} inputs.")
    out = np.zeros((n, int(sum(widths))), dtype=np.float32)
    col = 0
    for r, w in zip(rows, widths):
        k = min(w, r.shape[1])
        out[:, col:col + k] = r[:, :k]
        col += w
    return out


@register("FeatureVectorizer", versions=(1,), domain=ML_DOMAIN)
class FeatureVectorizer(OpRun):
    """FeatureVectorizer (ml 1): variadic inputs, float32 output; inputs wider than their
    ``inputdimensions`` entry are cut, narrower ones padded with zeros."""

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        return (feature_vectorizer(list(inputs), self.inputdimensions),)
