"""NegativeLogLikelihoodLoss (12, 13, 22) and SoftmaxCrossEntropyLoss (12, 13), sharing one weighted NLL core."""

from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfRangeError, KernelError
from ..registry import register
from ._nn_math import compute_dtype, log_softmax
from ._op import OpRun

REDUCTIONS = ("none", "sum", "mean")


def _nll_core(
    log_prob: np.ndarray,
    target: np.ndarray,
    weight: np.ndarray | None,
    reduction: str,
    ignore_index: int | None,
) -> np.ndarray:
    """Weighted NLL on arrays already in the compute dtype; see :func:`negative_log_likelihood_loss`."""
    if reduction not in REDUCTIONS:
        raise KernelError(f"reduction must be one of {list(REDUCTIONS)!r}, got {reduction!r}.")
    if log_prob.ndim < 2:
        raise KernelError(f"input must have shape (N, C, d1, ..., dk), got {list(log_prob.shape)}.")
    n, c = log_prob.shape[:2]
    expected = (n,) + log_prob.shape[2:]
    if target.shape != expected:
        raise KernelError(f"target must have shape {list(expected)}, got {list(target.shape)}.")
    if target.dtype.kind not in "iu":
        raise KernelError(f"target must be an integer tensor, got dtype {target.dtype}.")
    target = target.astype(np.int64, copy=False)
    ignored = None if ignore_index is None else target == ignore_index
    # ignored targets may hold any value: read class 0 for them, their loss is masked out
    safe = target if ignored is None else np.where(ignored, 0, target)
    if safe.size and (safe.min() < 0 or safe.max() >= c):
        bad = safe[(safe < 0) | (safe >= c)].reshape(-1)[0]
        raise IndexOutOfRangeError(
            f"target holds {int(bad)}, outside the {c} classes [0, {c - 1}]"
            + ("." if ignore_index is None else f" and not ignore_index={ignore_index}.")
        )
    picked = np.take_along_axis(log_prob, safe[:, None], axis=1)[:, 0]  # log_prob[n, target[n, d...], d...]
    if weight is not None:
        weight = np.asarray(weight)
        if weight.shape != (c,):
            raise KernelError(f"weight must have shape [{c}], got {list(weight.shape)}.")
        w = weight.astype(log_prob.dtype)[safe]
        if ignored is not None:
            w[ignored] = 0
    elif ignored is not None:
        w = (~ignored).astype(log_prob.dtype)
    else:
        w = None
    loss = -picked if w is None else -picked * w
    if reduction == "none":
        return loss
    total = np.sum(loss)
    if reduction == "sum":
        return np.asarray(total)
    # mean: divided by the summed weights of the samples (their count without weights),
    # ignored samples counting for nothing; all samples ignored gives 0/0 = nan
    denom = loss.size if w is None else np.sum(w)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(total / denom)


def negative_log_likelihood_loss(
    input: np.ndarray,
    target: np.ndarray,
    weight: np.ndarray | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
) -> np.ndarray:
    """``loss[n, d...] = -input[n, target[n, d...], d...] * weight[target[n, d...]]``, then reduced.

    Samples whose target equals ``ignore_index`` lose nothing and weigh nothing. ``mean``
    divides the sum by the summed weights of the samples (their number without weights).
    A target outside [0, C) that is not ``ignore_index`` raises IndexOutOfRangeError.
    float16 and bfloat16 compute in float32.
    """
    input = np.asarray(input)
    dt = compute_dtype(input.dtype)
    loss = _nll_core(input.astype(dt, copy=False), np.asarray(target), weight, reduction, ignore_index)
    return loss.astype(input.dtype, copy=False)


def softmax_cross_entropy_loss(
    scores: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``NLL(log_softmax(scores, axis=1), labels)``; returns ``(loss, log_prob)``.

    The log-probabilities come from a max-shifted log-sum-exp, so no probability is
    rounded to 0 before its logarithm. Same reductions and ``ignore_index`` as
    :func:`negative_log_likelihood_loss`.
    """
    scores = np.asarray(scores)
    if scores.ndim < 2:
        raise KernelError(f"scores must have shape (N, C, d1, ..., dk), got {list(scores.shape)}.")
    dt = compute_dtype(scores.dtype)
    log_prob = log_softmax(scores.astype(dt, copy=False), axis=1)
    loss = _nll_core(log_prob, np.asarray(labels), weights, reduction, ignore_index)
    return loss.astype(scores.dtype, copy=False), log_prob.astype(scores.dtype, copy=False)


class _LossOp(OpRun):
    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.check_choice("reduction", REDUCTIONS)


@register("NegativeLogLikelihoodLoss", versions=(12, 13, 22))
class NegativeLogLikelihoodLoss(_LossOp):
    """NegativeLogLikelihoodLoss: 12, 13 (same semantics, reworded), 22 (bfloat16)."""

    def _run(self, input, target, weight=None, attributes=None, verbose=0, fLOG=None):
        return (negative_log_likelihood_loss(input, target, weight, self.reduction, self.ignore_index),)


@register("SoftmaxCrossEntropyLoss", versions=(12, 13))
class SoftmaxCrossEntropyLoss(_LossOp):
    """SoftmaxCrossEntropyLoss: 12, 13 (bfloat16); the optional second output is ``log_prob``."""

    def _run(self, scores, labels, weights=None, attributes=None, verbose=0, fLOG=None):
        return softmax_cross_entropy_loss(scores, labels, weights, self.reduction, self.ignore_index)
