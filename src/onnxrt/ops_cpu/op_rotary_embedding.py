"""RotaryEmbedding (23): rotary positional embeddings, halves or interleaved pairs, full or partial rotation."""

from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfRangeError, KernelError
from ..registry import register
from ._nn_math import compute_dtype
from ._op import OpRun


def rotary_embedding(
    X: np.ndarray,
    cos_cache: np.ndarray,
    sin_cache: np.ndarray,
    position_ids: np.ndarray | None = None,
    *,
    interleaved: int = 0,
    rotary_embedding_dim: int = 0,
    num_heads: int | None = None,
) -> np.ndarray:
    """Rotate the first ``rotary_embedding_dim`` features of every head by position-dependent angles.

    X is (batch, heads, seq, head_size) or (batch, seq, heads * head_size) with
    ``num_heads``. Pairs are ``(x[k], x[k + rd/2])`` or, interleaved, ``(x[2k], x[2k+1])``;
    each becomes ``(cos x1 - sin x2, sin x1 + cos x2)``. The caches are indexed by
    ``position_ids`` (batch, seq) when given, otherwise they are (batch, seq, rd/2).
    Features past ``rotary_embedding_dim`` are copied. float16/bfloat16 compute in float32.
    """
    X = np.asarray(X)
    cos_cache, sin_cache = np.asarray(cos_cache), np.asarray(sin_cache)
    if X.ndim == 4:
        batch, heads, seq, head = X.shape
        x = X.transpose(0, 2, 1, 3)  # (batch, seq, heads, head)
    elif X.ndim == 3:
        if not num_heads or num_heads <= 0:
            raise KernelError(f"input is 3-D, so attribute 'num_heads' must be positive, got {num_heads!r}.")
        batch, seq, hidden = X.shape
        if hidden % num_heads:
            raise KernelError(f"input hidden size {hidden} is not a multiple of num_heads={num_heads}.")
        heads, head = num_heads, hidden // num_heads
        x = X.reshape(batch, seq, heads, head)
    else:
        raise KernelError(f"input must be 3-D or 4-D, got shape {list(X.shape)}.")
    rd = rotary_embedding_dim or head
    if rd > head or rd % 2:
        raise KernelError(f"rotary_embedding_dim must be even and at most the head size {head}, got {rd}.")
    half = rd // 2
    if position_ids is not None:
        pos = np.asarray(position_ids)
        if pos.shape != (batch, seq):
            raise KernelError(f"position_ids must have shape [{batch}, {seq}], got {list(pos.shape)}.")
        if cos_cache.ndim != 2 or sin_cache.shape != cos_cache.shape:
            raise KernelError(
                f"cos_cache and sin_cache must be 2-D of the same shape with position_ids, "
                f"got {list(cos_cache.shape)} and {list(sin_cache.shape)}."
            )
        if pos.size and (pos.min() < 0 or pos.max() >= cos_cache.shape[0]):
            bad = pos[(pos < 0) | (pos >= cos_cache.shape[0])][0]
            raise IndexOutOfRangeError(
                f"position_ids holds {int(bad)}, outside [0, {cos_cache.shape[0] - 1}] (the cache rows)."
            )
        cos, sin = cos_cache[pos], sin_cache[pos]  # (batch, seq, half)
    else:
        if cos_cache.shape != (batch, seq, cos_cache.shape[-1]) or sin_cache.shape != cos_cache.shape:
            raise KernelError(
                f"without position_ids, cos_cache and sin_cache must have shape [{batch}, {seq}, {half}], "
                f"got {list(cos_cache.shape)} and {list(sin_cache.shape)}."
            )
        cos, sin = cos_cache, sin_cache
    if cos.shape[-1] != half:
        raise KernelError(f"the caches' last dimension must be rotary_embedding_dim / 2 = {half}, got {cos.shape[-1]}.")
    dt = compute_dtype(X.dtype)
    cos = cos.astype(dt)[:, :, None, :]  # broadcast over heads
    sin = sin.astype(dt)[:, :, None, :]
    out = x.astype(dt)  # a copy, (batch, seq, heads, head)
    if interleaved:
        x1, x2 = out[..., 0:rd:2], out[..., 1:rd:2]
    else:
        x1, x2 = out[..., :half], out[..., half:rd]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    x1[...] = real
    x2[...] = imag
    if X.ndim == 4:
        out = out.transpose(0, 2, 1, 3)
    else:
        out = out.reshape(batch, seq, heads * head)
    return np.ascontiguousarray(out, dtype=X.dtype)


@register("RotaryEmbedding", versions=(23,))
class RotaryEmbedding(OpRun):
    """RotaryEmbedding (23)."""

    def _run(self, X, cos_cache, sin_cache, position_ids=None, attributes=None, verbose=0, fLOG=None):
        return (
            rotary_embedding(
                X, cos_cache, sin_cache, position_ids,
                interleaved=self.interleaved, rotary_embedding_dim=self.rotary_embedding_dim,
                num_heads=self.num_heads,
            ),
        )
