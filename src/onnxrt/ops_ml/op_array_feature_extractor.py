"""ArrayFeatureExtractor (ml 1): select columns of the last axis."""

from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfRangeError, KernelError
from ..ops_cpu._op import OpRun
from ..registry import register
from ._common import ML_DOMAIN


def array_feature_extractor(x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``x[..., indices]`` with the indices flattened: shape ``x.shape[:-1] + [len(indices)]``.

    A 1-D ``x`` gives one row ([1, len]), as onnxruntime does. Indices count from 0 and must
    lie in [0, C) (onnxruntime rejects negative ones too).
    """
    x = np.asarray(x)
    idx = np.asarray(indices).reshape(-1)
    if x.ndim == 0:
        raise KernelError("X must have rank >= 1.")
    if idx.dtype.kind not in "iu":
        raise KernelError(f"Y must be an integer tensor, got dtype {idx.dtype}.")
    size = x.shape[-1]
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        bad = idx[(idx < 0) | (idx >= size)][0]
        raise IndexOutOfRangeError(f"Y holds {int(bad)}, out of range [0, {size - 1}] for the last axis of X (size {size}).")
    out = np.take(x, idx.astype(np.intp, copy=False), axis=-1)
    if x.ndim == 1:
        out = out.reshape(1, -1)
    return out


@register("ArrayFeatureExtractor", versions=(1,), domain=ML_DOMAIN)
class ArrayFeatureExtractor(OpRun):
    """ArrayFeatureExtractor (ml 1): every element type of its schema, strings included."""

    def _run(self, x, y, attributes=None, verbose=0, fLOG=None):
        return (array_feature_extractor(x, y),)
