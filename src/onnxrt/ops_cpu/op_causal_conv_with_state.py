"""CausalConvWithState (27): stateful causal depthwise 1-D convolution with an optional fused SiLU."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._conv_common import apply_activation, as_compute, compute_dtype, to_output
from ._op import OpRun

CAUSAL_ACTIVATIONS = ("none", "silu", "swish")


def causal_conv_with_state(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    past_state: np.ndarray | None = None,
    activation: str = "none",
) -> tuple[np.ndarray, np.ndarray]:
    """(output, present_state) of a causal depthwise convolution carrying its state.

    x (B, C, L), weight (C, 1, k), bias (C,), past_state (B, C, k-1) (zeros when absent).
    The sequence ``concat(past_state, x)`` is convolved without padding, so
    ``output[t] = sum_j weight[c, 0, j] * seq[t + j] (+ bias)``; ``silu`` / ``swish``
    (the same function) multiply the result by its sigmoid. ``present_state`` is the last
    k-1 positions of ``seq``. float16/bfloat16 compute in float32. A loop over the k taps.
    """
    x = np.asarray(x)
    weight = np.asarray(weight)
    if activation not in CAUSAL_ACTIVATIONS:
        raise KernelError(f"activation is {activation!r}, expected one of {list(CAUSAL_ACTIVATIONS)!r}.")
    if x.ndim != 3:
        raise KernelError(f"input must have rank 3 (batch, channels, length), got shape {list(x.shape)}.")
    n_b, n_c, length = x.shape
    if weight.ndim != 3 or weight.shape[0] != n_c or weight.shape[1] != 1 or weight.shape[2] < 1:
        raise KernelError(f"weight must have shape [{n_c}, 1, k] with k >= 1, got {list(weight.shape)}.")
    k = weight.shape[2]
    cdt = compute_dtype(x.dtype)
    if past_state is None:
        past = np.zeros((n_b, n_c, k - 1), cdt)
    else:
        past = np.asarray(past_state)
        if past.shape != (n_b, n_c, k - 1):
            raise KernelError(f"past_state must have shape {[n_b, n_c, k - 1]}, got {list(past.shape)}.")
        past = as_compute(past, cdt)
    seq = np.concatenate([past, as_compute(x, cdt)], axis=2)
    wc = as_compute(weight, cdt)
    y = seq[:, :, 0:length] * wc[None, :, 0, 0:1]
    for j in range(1, k):
        y += seq[:, :, j:j + length] * wc[None, :, 0, j:j + 1]
    if bias is not None:
        bias = np.asarray(bias)
        if bias.shape != (n_c,):
            raise KernelError(f"bias must have shape [{n_c}], got {list(bias.shape)}.")
        y += as_compute(bias, cdt)[None, :, None]
    if activation != "none":
        sig = apply_activation(y.copy(), "Sigmoid")
        y *= sig
    present = seq[:, :, seq.shape[2] - (k - 1):]
    return to_output(y, x.dtype), to_output(np.ascontiguousarray(present), x.dtype)


@register("CausalConvWithState", versions=(27,))
class CausalConvWithState(OpRun):
    """CausalConvWithState: 27. Kernel: :func:`causal_conv_with_state`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if self.activation not in CAUSAL_ACTIVATIONS:
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'activation' is {self.activation!r}, "
                f"expected one of {list(CAUSAL_ACTIVATIONS)!r}."
            )

    def _run(self, x, weight, bias=None, past_state=None, attributes=None, verbose=0, fLOG=None):
        return causal_conv_with_state(x, weight, bias, past_state, self.activation)
