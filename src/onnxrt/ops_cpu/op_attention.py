"""Attention (23, 24, 25): scaled dot-product attention with masks, causal and window bounds, KV cache, softcap and GQA."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..parallel import matmul
from ..registry import register
from ._nn_math import compute_dtype
from ._op import OpRun

_LOW_PRECISION = frozenset({np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)})

#: softmax_precision (a TensorProto element type) -> the dtype the probabilities are rounded to
_SOFTMAX_PRECISION = {
    1: np.dtype(np.float32),
    10: np.dtype(np.float16),
    11: np.dtype(np.float64),
    16: np.dtype(ml_dtypes.bfloat16),
}


def _split_heads(x: np.ndarray, heads: int | None, name: str, attr: str) -> np.ndarray:
    """(batch, seq, heads * size) -> (batch, heads, seq, size)."""
    if heads is None or heads <= 0:
        raise KernelError(f"{name} is 3-D, so attribute {attr!r} must be a positive head count, got {heads!r}.")
    b, s, hidden = x.shape
    if hidden % heads:
        raise KernelError(f"{name} has hidden size {hidden}, which {attr}={heads} does not divide.")
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def _mask_bias(mask: np.ndarray, total: int, dt: np.dtype) -> np.ndarray:
    """The additive bias of ``attn_mask``: 0/-inf for a boolean mask, the values for a numeric one.

    A last dimension shorter than the total key length is padded with -inf (opset 24).
    """
    if mask.dtype == np.bool_:
        bias = np.where(mask, dt.type(0), dt.type(-np.inf))
    else:
        bias = mask.astype(dt)
    if bias.ndim == 0:
        bias = bias.reshape(1)
    short = total - bias.shape[-1]
    if short < 0:
        raise KernelError(
            f"attn_mask has {bias.shape[-1]} columns, more than the {total} keys (past and new) it masks."
        )
    if short:
        pad = np.full(bias.shape[:-1] + (short,), -np.inf, dtype=dt)
        bias = np.concatenate([bias, pad], axis=-1)
    if bias.ndim > 4:
        raise KernelError(f"attn_mask must have rank <= 4, got shape {list(mask.shape)}.")
    return bias.reshape((1,) * (4 - bias.ndim) + bias.shape)


def _with_structure(bias, nonpad_kv_seqlen, is_causal, left, right, batch, sq, total, past, dt):
    """``bias`` (None or the mask's) plus -inf where the causal bound ``j <= i + offset``, the
    windows of opset 25 or the padding of ``nonpad_kv_seqlen`` exclude key j for query i.
    The offset is the past length when there is a cache (``past`` not None), else
    ``nonpad_kv_seqlen - sq`` per batch when given, else 0."""
    if not (is_causal or left >= 0 or right >= 0 or nonpad_kv_seqlen is not None):
        return bias
    if nonpad_kv_seqlen is not None:
        nonpad = np.asarray(nonpad_kv_seqlen).astype(np.int64).reshape(-1)
        if nonpad.shape != (batch,):
            raise KernelError(f"nonpad_kv_seqlen must have shape [{batch}], got {list(np.shape(nonpad_kv_seqlen))}.")
        if nonpad.size and (nonpad.min() < 0 or nonpad.max() > total):
            raise KernelError(f"nonpad_kv_seqlen values must lie in [0, {total}], got {nonpad.tolist()}.")
        nonpad = nonpad.reshape(batch, 1, 1, 1)
    col = np.arange(total).reshape(1, 1, 1, total)
    # absolute position of each query: offset + index in the block
    pos = np.arange(sq).reshape(1, 1, sq, 1)
    if past is not None:
        pos = pos + past
    elif nonpad_kv_seqlen is not None:
        pos = pos + (nonpad - sq)
    allowed = np.ones((1, 1, 1, 1), dtype=bool)
    if is_causal:
        allowed = allowed & (col <= pos)
    if left >= 0:
        allowed = allowed & (col >= pos - left)
    if right >= 0:
        allowed = allowed & (col <= pos + right)
    if nonpad_kv_seqlen is not None:
        allowed = allowed & (col < nonpad)
    structural = np.where(allowed, dt.type(0), dt.type(-np.inf))
    return structural if bias is None else bias + structural


def attention(
    Q: np.ndarray,
    K: np.ndarray,
    V: np.ndarray,
    attn_mask: np.ndarray | None = None,
    past_key: np.ndarray | None = None,
    past_value: np.ndarray | None = None,
    nonpad_kv_seqlen: np.ndarray | None = None,
    *,
    is_causal: int = 0,
    kv_num_heads: int | None = None,
    q_num_heads: int | None = None,
    qk_matmul_output_mode: int = 0,
    scale: float | None = None,
    softcap: float = 0.0,
    softmax_precision: int | None = None,
    left_window_size: int = -1,
    right_window_size: int = -1,
    want_qk: bool = True,
    want_present: bool = True,
    items=None,
    exp_rows=None,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """``softmax(scale Q K^T (softcapped) + bias) V``; returns ``(Y, present_key, present_value, qk_matmul_output)``.

    Q, K, V are 4-D (batch, heads, seq, head_size) or 3-D (batch, seq, heads * head_size)
    with ``q_num_heads``/``kv_num_heads``. Query head ``h`` reads key/value head
    ``h // (q_num_heads / kv_num_heads)`` (GQA/MQA), computed as one batched product per
    key/value head group without repeating K or V. The bias adds ``attn_mask`` (boolean:
    False is -inf; numeric: added; a short last dimension is padded with -inf), the
    bottom-right causal bound ``j <= i + offset`` (offset = past length, or
    ``nonpad_kv_seqlen - q_seq`` per batch, else 0), the window bounds of opset 25 and the
    padding of ``nonpad_kv_seqlen``. A query row with every key disallowed gives a zero row
    in ``Y`` and in the mode-3 ``qk_matmul_output``. float16 and bfloat16 compute each step
    of the function body in float32 and round its result to the input type; the softmax runs
    in ``softmax_precision`` (default: the input type). ``want_qk``/``want_present`` false
    return None for the optional outputs (the node does not name them).

    This is the reference kernel. Its fast paths (onnxrt.fastpaths.attention) pass compiled
    replacements of two of its steps: ``items(Q, K, V, bias, scale, group, three_d) -> Y``
    computes Y whole (float32 inputs, no softcap, no qk output, float32 softmax: the caller
    checks); ``exp_rows(rows, maxima, sums)`` computes exp(rows - max) in place and the row
    sums of a float32 softmax.
    """
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    if Q.ndim not in (3, 4) or K.ndim != Q.ndim or V.ndim != Q.ndim:
        raise KernelError(
            f"Q, K and V must all be 3-D or all 4-D, got shapes {list(Q.shape)}, {list(K.shape)}, {list(V.shape)}."
        )
    three_d = Q.ndim == 3
    if three_d:
        Q = _split_heads(Q, q_num_heads, "Q", "q_num_heads")
        K = _split_heads(K, kv_num_heads, "K", "kv_num_heads")
        V = _split_heads(V, kv_num_heads, "V", "kv_num_heads")
    batch, hq, sq, head = Q.shape
    hkv = K.shape[1]
    if K.shape[0] != batch or V.shape[0] != batch:
        raise KernelError(f"Q, K and V must have the same batch size, got {batch}, {K.shape[0]}, {V.shape[0]}.")
    if K.shape[-1] != head:
        raise KernelError(f"K must have the head size of Q ({head}), got {K.shape[-1]}.")
    if V.shape[1] != hkv or V.shape[2] != K.shape[2]:
        raise KernelError(
            f"V must have K's head count and sequence length ({hkv}, {K.shape[2]}), got ({V.shape[1]}, {V.shape[2]})."
        )
    if hkv == 0 or hq % hkv:
        raise KernelError(f"the query head count ({hq}) must be a multiple of the key/value head count ({hkv}).")
    if (past_key is None) != (past_value is None):
        raise KernelError("past_key and past_value must be given together.")

    past = 0
    if past_key is not None:
        past_key, past_value = np.asarray(past_key), np.asarray(past_value)
        if past_key.ndim != 4 or past_key.shape[:2] != (batch, hkv) or past_key.shape[3] != head:
            raise KernelError(
                f"past_key must have shape [{batch}, {hkv}, past, {head}], got {list(past_key.shape)}."
            )
        if past_value.shape[:3] != past_key.shape[:3] or past_value.shape[3] != V.shape[3]:
            raise KernelError(
                f"past_value must have shape [{batch}, {hkv}, {past_key.shape[2]}, {V.shape[3]}], "
                f"got {list(past_value.shape)}."
            )
        past = past_key.shape[2]
        K = np.concatenate([past_key, K], axis=2)
        V = np.concatenate([past_value, V], axis=2)
    total = K.shape[2]
    out_dtype = Q.dtype
    dt = compute_dtype(np.result_type(compute_dtype(Q.dtype), compute_dtype(V.dtype)))
    group = hq // hkv
    if scale is None:
        scale = 1.0 / math.sqrt(head)

    # The function body produces a T1 tensor at every step (scaled Q and K, QK^T, softcap,
    # bias, softmax, PV). For float16 and bfloat16, onnxrt computes each step in float32 and
    # rounds its result to T1, as separate operators would: the conformance expectations are
    # computed that way and sit up to 1e-3 (relative) away from the exactly rounded result.
    low = out_dtype if out_dtype in _LOW_PRECISION else None

    def rounded(a: np.ndarray) -> np.ndarray:
        if low is not None:
            a[...] = a.astype(low)
        return a

    # -- bias: attn_mask, causal and window bounds, key padding ----------------------------
    bias = None if attn_mask is None else rounded(_mask_bias(np.asarray(attn_mask), total, dt))
    bias = _with_structure(bias, nonpad_kv_seqlen, is_causal, left_window_size, right_window_size,
                           batch, sq, total, past if past_key is not None else None, dt)
    precision = _SOFTMAX_PRECISION[softmax_precision] if softmax_precision is not None else out_dtype
    if items is not None and min(sq, total, head, V.shape[3]) > 0:
        Y = items(Q, K, V, bias, float(scale), group, three_d)
        if not want_present:
            return Y, None, None, None
        if past_key is None:  # K and V are (views of) the inputs: present copies, never the caller's arrays
            K, V = np.array(K, order="C"), np.array(V, order="C")
        return Y, K, V, None

    # scores: (batch, hkv, group * sq, total) from one product per key/value head
    if low is None:
        Qc = np.multiply(Q, dt.type(scale), dtype=dt)
        Kc = K.astype(dt, copy=False)
    else:
        # Q and K are each scaled by sqrt(scale) (rounded to T1), which keeps float16 products in range
        root = dt.type(low.type(math.sqrt(scale)))
        Qc = rounded(np.multiply(Q, root, dtype=dt))
        Kc = rounded(np.multiply(K, root, dtype=dt))
    scores = matmul(Qc.reshape(batch, hkv, group * sq, head), Kc.transpose(0, 1, 3, 2))
    scores = rounded(scores.reshape(batch, hq, sq, total))
    qk = scores.copy() if want_qk and qk_matmul_output_mode == 0 else None
    if softcap and softcap > 0:
        # softcap * tanh(scores / softcap), before any mask
        rounded(np.divide(scores, dt.type(softcap), out=scores))
        rounded(np.tanh(scores, out=scores))
        rounded(np.multiply(scores, dt.type(softcap), out=scores))
    if want_qk and qk_matmul_output_mode == 1:
        qk = scores.copy()

    if bias is not None:
        rounded(np.add(scores, bias, out=scores))
    if want_qk and qk_matmul_output_mode == 2:
        qk = scores.copy()

    # -- softmax ----------------------------------------------------------------------
    # It runs in softmax_precision, by default in T1. A precision narrower than float32
    # rounds after each elementary step (shift, exp, sum, divide), as numpy's float16 and
    # bfloat16 operations do; the conformance expectations of float16 are computed so.
    wdt = np.dtype(np.float64) if precision == np.float64 else np.dtype(np.float32)
    narrow = precision in _LOW_PRECISION

    def step(a: np.ndarray) -> np.ndarray:
        if narrow:
            a[...] = a.astype(precision)
        return a

    work = step(scores if scores.dtype == wdt else scores.astype(wdt))  # the scores cast to the precision
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.max(work, axis=-1, keepdims=True, initial=-np.inf)
        # a row of -inf (or without keys) has max -inf: shift it by 0 so that exp gives 0 instead of nan
        np.copyto(m, wdt.type(0), where=np.isneginf(m))
        if exp_rows is not None and wdt == np.float32 and not narrow and work.size >= 4096 and work.flags.c_contiguous:
            # exp(x - max) and the row sums in one pass per row
            rows = work.reshape(-1, work.shape[-1])
            denom = np.empty(m.shape, wdt)
            exp_rows(rows, m.reshape(-1), denom.reshape(-1))
        else:
            step(np.subtract(work, m, out=work))
            step(np.exp(work, out=work))
            denom = step(np.sum(work, axis=-1, keepdims=True))
    dead = None
    if total == 0:
        dead = np.ones((1, 1, 1, 1), dtype=bool)  # no key at all: every row is fully masked
    elif bias is not None:
        # fully masked query rows (every key's bias is -inf) give zero rows, not nan
        dead = np.all(np.isneginf(bias), axis=-1, keepdims=True)
        if not dead.any():
            dead = None
    # Normalising the probabilities costs a pass over (q_seq, total); when they are not an
    # output and need no rounding, Y = (exp @ V) / sum divides the smaller result instead.
    deferred = wdt == dt and not narrow and low is None and not (want_qk and qk_matmul_output_mode == 3)
    probs = work
    if not deferred:
        with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 on fully masked rows, zeroed below
            step(np.divide(work, denom, out=work))
        probs = rounded(work if wdt == dt else work.astype(dt))  # back to T1
        if dead is not None:
            probs = np.where(dead, dt.type(0), probs)
        if want_qk and qk_matmul_output_mode == 3:
            qk = probs

    Vc = V.astype(dt, copy=False)
    Y = matmul(probs.reshape(batch, hkv, group * sq, total), Vc).reshape(batch, hq, sq, V.shape[3])
    if deferred:
        with np.errstate(invalid="ignore", divide="ignore"):
            Y /= denom
        if dead is not None:
            Y = np.where(dead, dt.type(0), Y)
    if three_d:
        Y = Y.transpose(0, 2, 1, 3).reshape(batch, sq, hq * V.shape[3])
    Y = Y.astype(out_dtype, copy=False)
    if qk is not None:
        qk = qk.astype(out_dtype, copy=False)
    if not want_present:
        return Y, None, None, qk
    if past_key is None:  # K and V are (views of) the inputs: present copies, never the caller's arrays
        K, V = np.array(K, order="C"), np.array(V, order="C")
    return Y, K, V, qk


@register("Attention", versions=(23, 24, 25))
class Attention(OpRun):
    """Attention: 23, 24 (``nonpad_kv_seqlen``, masks shorter than the keys, offset-aware causal
    alignment), 25 (``left_window_size``/``right_window_size``).

    The errata of versions 23 and 24 (zero rows for fully masked queries, mode-3
    ``qk_matmul_output`` in the output type) apply to every version.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        label = self.node_label()
        self.check_choice("qk_matmul_output_mode", (0, 1, 2, 3))
        if self.softmax_precision is not None and self.softmax_precision not in _SOFTMAX_PRECISION:
            raise InvalidAttributeError(
                f"{label}: attribute 'softmax_precision' is {self.softmax_precision!r}, "
                f"expected one of {sorted(_SOFTMAX_PRECISION)!r}."
            )
        left = getattr(self, "left_window_size", -1)
        right = getattr(self, "right_window_size", -1)
        for name, value in (("left_window_size", left), ("right_window_size", right)):
            if value < -1:
                raise InvalidAttributeError(f"{label}: attribute {name!r} is {value}, expected -1 or a value >= 0.")
        if self.softcap < 0:
            raise InvalidAttributeError(f"{label}: attribute 'softcap' is {self.softcap}, expected a value >= 0.")
        outs = list(onnx_node.output)
        self._kw = {
            "is_causal": self.is_causal,
            "kv_num_heads": self.kv_num_heads,
            "q_num_heads": self.q_num_heads,
            "qk_matmul_output_mode": self.qk_matmul_output_mode,
            "scale": self.scale,
            "softcap": self.softcap,
            "softmax_precision": self.softmax_precision,
            "left_window_size": left,
            "right_window_size": right,
            # the optional outputs cost copies: only when the node names them
            "want_qk": len(outs) > 3 and bool(outs[3]),
            "want_present": len(outs) > 1 and any(outs[1:3]),
        }

    def _run(self, Q, K, V, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None,
             attributes=None, verbose=0, fLOG=None):
        return attention(Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen, **self._kw)
