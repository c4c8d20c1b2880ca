"""LinearAttention (27): recurrent linear attention (linear, gated, delta, gated_delta rules) with GQA and a state cache."""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

UPDATE_RULES = ("linear", "gated", "delta", "gated_delta")


def linear_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    past_state: np.ndarray | None = None,
    decay: np.ndarray | None = None,
    beta: np.ndarray | None = None,
    *,
    q_num_heads: int,
    kv_num_heads: int,
    scale: float = 0.0,
    update_rule: str = "gated_delta",
) -> tuple[np.ndarray, np.ndarray]:
    """Run the recurrence token by token; returns ``(output, present_state)``.

    Shapes: query (B, T, Hq*dk), key (B, T, Hkv*dk), value (B, T, Hkv*dv), state
    (B, Hkv, dk, dv). With ``g = exp(decay)`` (per key dimension or per head) and ``b = beta``:

    - linear:      ``S = S + k v^T``
    - gated:       ``S = g S + k v^T``
    - delta:       ``S = S + b k (v - S^T k)^T``
    - gated_delta: ``S = g S + b k (v - (g S)^T k)^T``

    and ``o = scale q^T S`` with the updated state; query head ``h`` reads the state of
    key/value head ``h // (Hq / Hkv)``. The loop runs over time steps, each vectorized over
    batch and heads; the state is kept in float32, as the operator's function body does.
    ``scale = 0`` means ``1 / sqrt(dk)``.
    """
    if update_rule not in UPDATE_RULES:
        raise InvalidAttributeError(f"update_rule must be one of {list(UPDATE_RULES)!r}, got {update_rule!r}.")
    query, key, value = np.asarray(query), np.asarray(key), np.asarray(value)
    for name, x in (("query", query), ("key", key), ("value", value)):
        if x.ndim != 3:
            raise KernelError(f"{name} must be 3-D (batch, seq, heads * size), got shape {list(x.shape)}.")
    if not q_num_heads or not kv_num_heads or q_num_heads <= 0 or kv_num_heads <= 0:
        raise KernelError(f"q_num_heads and kv_num_heads must be positive, got {q_num_heads} and {kv_num_heads}.")
    if q_num_heads % kv_num_heads:
        raise KernelError(f"q_num_heads ({q_num_heads}) must be a multiple of kv_num_heads ({kv_num_heads}).")
    B, T, qh = query.shape
    if qh % q_num_heads:
        raise KernelError(f"query hidden size {qh} is not a multiple of q_num_heads={q_num_heads}.")
    dk = qh // q_num_heads
    hkv, group = kv_num_heads, q_num_heads // kv_num_heads
    if key.shape != (B, T, hkv * dk):
        raise KernelError(f"key must have shape [{B}, {T}, {hkv * dk}], got {list(key.shape)}.")
    if value.shape[:2] != (B, T) or value.shape[2] % hkv:
        raise KernelError(f"value must have shape [{B}, {T}, {hkv} * dv], got {list(value.shape)}.")
    dv = value.shape[2] // hkv
    gated = update_rule in ("gated", "gated_delta")
    delta = update_rule in ("delta", "gated_delta")
    dt = np.dtype(np.float32)

    eg = None
    if gated:
        if decay is None:
            raise KernelError(f"update_rule {update_rule!r} needs the 'decay' input.")
        decay = np.asarray(decay)
        if decay.shape not in ((B, T, hkv * dk), (B, T, hkv)):
            raise KernelError(
                f"decay must have shape [{B}, {T}, {hkv * dk}] or [{B}, {T}, {hkv}], got {list(decay.shape)}."
            )
        # exp of the log-space gate, scaling the rows (key dimensions) of the state
        eg = np.exp(decay.astype(dt).reshape(B, T, hkv, -1))[..., None]  # (B, T, Hkv, dk or 1, 1)
    bt = None
    if delta:
        if beta is None:
            raise KernelError(f"update_rule {update_rule!r} needs the 'beta' input.")
        beta = np.asarray(beta)
        if beta.shape not in ((B, T, hkv), (B, T, 1)):
            raise KernelError(f"beta must have shape [{B}, {T}, {hkv}] or [{B}, {T}, 1], got {list(beta.shape)}.")
        bt = beta.astype(dt).reshape(B, T, -1, 1)  # (B, T, Hkv or 1, 1)

    if past_state is None:
        S = np.zeros((B, hkv, dk, dv), dtype=dt)
        state_dtype = query.dtype
    else:
        past_state = np.asarray(past_state)
        if past_state.shape != (B, hkv, dk, dv):
            raise KernelError(f"past_state must have shape [{B}, {hkv}, {dk}, {dv}], got {list(past_state.shape)}.")
        S = past_state.astype(dt)  # a copy: updated in place
        state_dtype = past_state.dtype

    q = query.astype(dt).reshape(B, T, hkv, group, dk)
    k = key.astype(dt).reshape(B, T, hkv, dk)
    v = value.astype(dt).reshape(B, T, hkv, dv)
    out = np.empty((B, T, hkv, group, dv), dtype=dt)
    for t in range(T):
        if gated:
            S *= eg[:, t]
        kt = k[:, t]
        if delta:
            # v - S^T k: what the state currently returns for this key
            w = v[:, t] - np.matmul(kt[:, :, None, :], S)[:, :, 0, :]
            w *= bt[:, t]
        else:
            w = v[:, t]
        S += kt[:, :, :, None] * w[:, :, None, :]
        np.matmul(q[:, t], S, out=out[:, t])
    out *= dt.type(scale if scale else 1.0 / math.sqrt(dk))
    output = out.reshape(B, T, q_num_heads * dv).astype(query.dtype, copy=False)
    return output, S.astype(state_dtype, copy=False)


@register("LinearAttention", versions=(27,))
class LinearAttention(OpRun):
    """LinearAttention (27). ``chunk_size`` is a tuning hint of chunk-parallel implementations; the
    token-by-token recurrence gives the same result and ignores it."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.check_choice("update_rule", UPDATE_RULES)

    def _run(self, query, key, value, past_state=None, decay=None, beta=None, attributes=None, verbose=0, fLOG=None):
        return linear_attention(
            query, key, value, past_state, decay, beta,
            q_num_heads=self.q_num_heads, kv_num_heads=self.kv_num_heads,
            scale=self.scale, update_rule=self.update_rule,
        )
