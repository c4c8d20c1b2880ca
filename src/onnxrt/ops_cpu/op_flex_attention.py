"""FlexAttention (ai.onnx.preview 1): scaled dot-product attention with score_mod and prob_mod subgraphs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import np_dtype
from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun
from .op_if import subgraph_plan


def _softmax_last(x: np.ndarray) -> np.ndarray:
    # shifting by the row maximum keeps exp() finite; a row of -inf stays NaN as in Softmax
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def _matmul_as(a: np.ndarray, b: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``a @ b`` rounded to ``dtype``; 16-bit floats are multiplied in float32 then rounded."""
    if dtype.itemsize < 4:
        return (a.astype(np.float32) @ b.astype(np.float32)).astype(dtype)
    return a @ b


def flex_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scale: float | None = None,
    softmax_precision: int | None = None,
    score_mod: Any = None,
    prob_mod: Any = None,
    context: dict[str, Any] | None = None,
) -> np.ndarray:
    """``softmax(score_mod(Q K^T * scale)) -> prob_mod -> @ V`` over rank-4 inputs.

    Shapes: Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev) -> Y (B, Hq, L, Ev). With
    Hq = g * Hkv, query head h uses K/V head h // g. As the schema's function body does,
    Q and K are each multiplied by sqrt(scale) in their own type (scale defaults to
    1/sqrt(E)) before the product; scores are then cast to ``softmax_precision`` (float32,
    double for double inputs), where score_mod, softmax, prob_mod and the product with V run,
    and the result is cast back to Q's type. ``score_mod``/``prob_mod`` are nested plans.
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    for name, t in (("Q", q), ("K", k), ("V", v)):
        if t.ndim != 4:
            raise KernelError(f"{name} must have rank 4, got shape {list(t.shape)}.")
    b, hq, _, e = q.shape
    if k.shape[0] != b or v.shape[0] != b or k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2] or k.shape[3] != e:
        raise KernelError(
            f"Shapes Q {list(q.shape)}, K {list(k.shape)}, V {list(v.shape)} do not fit "
            f"(B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev)."
        )
    hkv = k.shape[1]
    if hkv == 0 or hq % hkv:
        raise KernelError(f"q_num_heads {hq} must be a multiple of kv_num_heads {hkv}.")
    if hq != hkv:
        k = np.repeat(k, hq // hkv, axis=1)
        v = np.repeat(v, hq // hkv, axis=1)
    dtype = q.dtype
    if softmax_precision is None:
        precision = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
    else:
        precision = np_dtype(softmax_precision)
    # the body computes the scale and its square root in float32, whatever the input type
    if scale is None:
        scale = np.float32(1) / np.sqrt(np.float32(e))
    root = np.asarray(np.sqrt(np.float32(scale))).astype(dtype)
    scores = _matmul_as(q * root, np.swapaxes(k * root, -1, -2), dtype).astype(precision)
    if score_mod is not None:
        scores = np.asarray(score_mod.run_list([scores], context)[0])
    probs = _softmax_last(scores)
    if prob_mod is not None:
        probs = np.asarray(prob_mod.run_list([probs], context)[0])
    return (probs @ v.astype(precision)).astype(dtype)


@register("FlexAttention", versions=(1,), domain="ai.onnx.preview")
class FlexAttention(OpRun):
    """FlexAttention-1 (ai.onnx.preview): GQA, scale, softmax_precision, score_mod and prob_mod
    subgraphs (planned once, each run on the whole score or probability tensor)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._score_mod = subgraph_plan(self, "score_mod") if self.score_mod is not None else None
        self._prob_mod = subgraph_plan(self, "prob_mod") if self.prob_mod is not None else None
        for name, plan in (("score_mod", self._score_mod), ("prob_mod", self._prob_mod)):
            if plan is not None and (len(plan.input_names) != 1 or len(plan.output_names) != 1):
                raise InvalidAttributeError(
                    f"{self.node_label()}: {name!r} must take one input and give one output, "
                    f"got {len(plan.input_names)} and {len(plan.output_names)}."
                )
        if self.softmax_precision is not None and self.softmax_precision not in (1, 10, 11, 16):
            raise InvalidAttributeError(
                f"{self.node_label()}: softmax_precision {self.softmax_precision} is not a float type "
                f"(1 float, 10 float16, 11 double, 16 bfloat16)."
            )

    def _run(self, q, k, v, context=None, attributes=None, verbose=0, fLOG=None):
        return (flex_attention(q, k, v, self.scale, self.softmax_precision, self._score_mod, self._prob_mod, context),)
