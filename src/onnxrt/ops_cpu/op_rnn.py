"""RNN, GRU and LSTM: one time-step loop shared by the three cells, an activation table and direction handling."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._nn_math import compute_dtype, sigmoid
from ._op import OpRun

# --------------------------------------------------------------------------------------
# Activations. Each function transforms its argument in place (the argument is always a
# scratch buffer of the kernel) and returns it. Names are matched case-insensitively, as
# onnxruntime does.
# --------------------------------------------------------------------------------------


def _relu(x, alpha, beta):
    return np.maximum(x, 0, out=x)


def _tanh(x, alpha, beta):
    return np.tanh(x, out=x)


def _sigmoid(x, alpha, beta):
    return sigmoid(x, out=x)


def _affine(x, alpha, beta):
    x *= alpha
    x += beta
    return x


def _leaky_relu(x, alpha, beta):
    np.multiply(x, np.where(x >= 0, x.dtype.type(1), x.dtype.type(alpha)), out=x)
    return x


def _thresholded_relu(x, alpha, beta):
    x[x < alpha] = 0
    return x


def _scaled_tanh(x, alpha, beta):
    x *= beta
    np.tanh(x, out=x)
    x *= alpha
    return x


def _hard_sigmoid(x, alpha, beta):
    x *= alpha
    x += beta
    return np.clip(x, 0, 1, out=x)


def _elu(x, alpha, beta):
    neg = x < 0
    x[neg] = alpha * np.expm1(x[neg])
    return x


def _softsign(x, alpha, beta):
    x /= 1 + np.abs(x)
    return x


def _softplus(x, alpha, beta):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x
    r = np.log1p(np.exp(-np.abs(x)))
    np.maximum(x, 0, out=x)
    x += r
    return x


#: lower-case name -> (function, default alpha, default beta); defaults are those of the ONNX operators
ACTIVATIONS: dict[str, tuple[Callable[..., np.ndarray], float | None, float | None]] = {
    "relu": (_relu, None, None),
    "tanh": (_tanh, None, None),
    "sigmoid": (_sigmoid, None, None),
    "affine": (_affine, 1.0, 0.0),
    "leakyrelu": (_leaky_relu, 0.01, None),
    "thresholdedrelu": (_thresholded_relu, 1.0, None),
    "scaledtanh": (_scaled_tanh, 1.0, 1.0),
    "hardsigmoid": (_hard_sigmoid, 0.2, 0.5),
    "elu": (_elu, 1.0, None),
    "softsign": (_softsign, None, None),
    "softplus": (_softplus, None, None),
}

Activation = tuple[Callable[..., np.ndarray], float, float]

#: activations of each cell when the node gives none (per direction)
DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
#: gates per cell: the row blocks of W and R
N_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def parse_activations(
    names: Sequence[str] | None,
    alphas: Sequence[float] | None,
    betas: Sequence[float] | None,
    cell: str,
    num_directions: int,
) -> list[list[Activation]]:
    """Per direction, the list of (function, alpha, beta) of a cell.

    ``activation_alpha``/``activation_beta`` are consumed in the order of the activations,
    each value going to the next activation that takes that parameter (the others keep
    their defaults); this is how onnxruntime reads them, the spec only says "in the order
    of activation functions". Extra names are ignored (RNN's schema default lists two
    activations even for one direction).
    """
    per_dir = len(DEFAULT_ACTIVATIONS[cell])
    if not names:
        names = list(DEFAULT_ACTIVATIONS[cell]) * num_directions
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    if len(names) < per_dir * num_directions:
        raise InvalidAttributeError(
            f"{cell} expects {per_dir * num_directions} activations for {num_directions} direction(s), "
            f"got {len(names)}: {names!r}."
        )
    alpha_iter = iter(alphas or [])
    beta_iter = iter(betas or [])
    out: list[Activation] = []
    for name in names[: per_dir * num_directions]:
        entry = ACTIVATIONS.get(name.lower())
        if entry is None:
            raise InvalidAttributeError(
                f"{cell}: activation {name!r} is not one of {sorted(ACTIVATIONS)!r}."
            )
        fn, da, db = entry
        alpha = next(alpha_iter, da) if da is not None else 0.0
        beta = next(beta_iter, db) if db is not None else 0.0
        out.append((fn, float(alpha), float(beta)))
    return [out[d * per_dir:(d + 1) * per_dir] for d in range(num_directions)]


def _is(act: Activation, fn: Callable[..., Any]) -> bool:
    return act[0] is fn


# --------------------------------------------------------------------------------------
# Cells: one step each, vectorized over the batch and the hidden units. ``xw`` holds the
# input projection of the step with every bias that is a plain additive constant folded
# in; a step reads the previous hidden state ``h`` (and cell state ``c``) and writes the new
# ones into ``h_out`` (and ``c`` in place). Scratch buffers are allocated once per run.
# --------------------------------------------------------------------------------------


class _RNNCell:
    def __init__(self, R, Rb, acts, clip, N, **_):
        self.RT = np.ascontiguousarray(R.T)
        (self.f,) = acts
        self.clip = clip
        self.buf = np.empty((N, R.shape[1]), dtype=R.dtype)

    def step(self, xw, h, c, h_out):
        buf = np.dot(h, self.RT, out=self.buf)
        buf += xw
        if self.clip is not None:
            np.clip(buf, -self.clip, self.clip, out=buf)
        f, a, b = self.f
        h_out[...] = f(buf, a, b)


class _GRUCell:
    def __init__(self, R, Rb, acts, clip, N, linear_before_reset=0, **_):
        H = R.shape[1]
        self.H = H
        self.lbr = bool(linear_before_reset)
        self.RT = np.ascontiguousarray(R.T)  # (H, 3H)
        self.RT_zr = np.ascontiguousarray(R[: 2 * H].T)
        self.RT_h = np.ascontiguousarray(R[2 * H:].T)
        self.Rbh = Rb[2 * H:]
        self.f, self.g = acts
        self.clip = clip
        self.buf = np.empty((N, (3 if self.lbr else 2) * H), dtype=R.dtype)
        self.hh = np.empty((N, H), dtype=R.dtype)

    def step(self, xw, h, c, h_out):
        H, clip = self.H, self.clip
        if self.lbr:
            hr = np.dot(h, self.RT, out=self.buf)
            zr = hr[:, : 2 * H]
        else:
            zr = np.dot(h, self.RT_zr, out=self.buf)
        zr += xw[:, : 2 * H]
        if clip is not None:
            np.clip(zr, -clip, clip, out=zr)
        f, a, b = self.f
        f(zr, a, b)
        z, r = zr[:, :H], zr[:, H:]
        hh = self.hh
        if self.lbr:
            # ht = g(Xt Wh^T + rt (.) (Ht-1 Rh^T + Rbh) + Wbh)
            np.add(hr[:, 2 * H:], self.Rbh, out=hh)
            hh *= r
        else:
            # ht = g(Xt Wh^T + (rt (.) Ht-1) Rh^T + Rbh + Wbh); both biases are folded in xw
            np.dot(r * h, self.RT_h, out=hh)
        hh += xw[:, 2 * H:]
        if clip is not None:
            np.clip(hh, -clip, clip, out=hh)
        g, a, b = self.g
        ht = g(hh, a, b)
        # Ht = (1 - zt) ht + zt Ht-1 = ht + zt (Ht-1 - ht)
        np.subtract(h, ht, out=h_out)
        h_out *= z
        h_out += ht


class _LSTMCell:
    def __init__(self, R, Rb, acts, clip, N, P=None, input_forget=0, **_):
        H = R.shape[1]
        self.H = H
        self.RT = np.ascontiguousarray(R.T)  # (H, 4H), gate blocks i, o, f, c
        self.f, self.g, self.h = acts
        self.clip = clip
        self.P = P  # (3H,) blocks i, o, f, or None
        self.input_forget = bool(input_forget)
        self.buf = np.empty((N, 4 * H), dtype=R.dtype)
        self.tmp = np.empty((N, H), dtype=R.dtype)
        b = self.buf
        self.i, self.o, self.f_, self.cc = b[:, :H], b[:, H:2 * H], b[:, 2 * H:3 * H], b[:, 3 * H:]

    def step(self, xw, h, c, h_out):
        gates = np.dot(h, self.RT, out=self.buf)
        gates += xw
        i, o, f, cc, tmp = self.i, self.o, self.f_, self.cc, self.tmp
        H = self.H
        fa, fa_a, fa_b = self.f
        g, g_a, g_b = self.g
        hh, h_a, h_b = self.h
        clip = self.clip
        if self.P is not None:
            # peepholes of the input and forget gates read the previous cell state
            i += self.P[:H] * c
            f += self.P[2 * H:] * c
        if clip is not None:
            np.clip(i, -clip, clip, out=i)
            np.clip(f, -clip, clip, out=f)
        fa(i, fa_a, fa_b)
        if self.input_forget:
            np.subtract(1, i, out=f)  # coupled gates: ft = 1 - it, as onnxruntime does
        else:
            fa(f, fa_a, fa_b)
        if clip is not None:
            np.clip(cc, -clip, clip, out=cc)
        g(cc, g_a, g_b)
        # Ct = ft (.) Ct-1 + it (.) ct
        c *= f
        cc *= i
        c += cc
        if self.P is not None:
            o += self.P[H:2 * H] * c  # the output gate's peephole reads the new cell state
        if clip is not None:
            np.clip(o, -clip, clip, out=o)
        fa(o, fa_a, fa_b)
        # Ht = ot (.) h(Ct); like onnxruntime, the cell state is not clipped before h
        tmp[...] = c
        np.multiply(o, hh(tmp, h_a, h_b), out=h_out)


_CELLS = {"RNN": _RNNCell, "GRU": _GRUCell, "LSTM": _LSTMCell}


def _lstm_default_order(H: int) -> np.ndarray:
    """Row order o, f, i, c of the LSTM gate blocks (ONNX stores i, o, f, c) used by the default loop."""
    return np.concatenate([np.arange(H, 2 * H), np.arange(2 * H, 3 * H), np.arange(0, H), np.arange(3 * H, 4 * H)])


def _lstm_default_loop(xw: np.ndarray, R_ofic: np.ndarray, h: np.ndarray, c: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The common LSTM (sigmoid, tanh, tanh; no peephole, clip or coupling, full sequences).

    With the gates in the order o, f, i, c and the state kept as one array [c, g], a step is
    8 numpy calls: one sigmoid over o, f, i, one product [f c, i g], one sum. Writes every
    hidden state into ``Y`` (seq, batch, hidden) and returns the last cell state.
    """
    N, H = h.shape
    RT = np.ascontiguousarray(R_ofic.T)  # (H, 4H)
    buf = np.empty((N, 4 * H), dtype=xw.dtype)
    tmp = np.empty((N, H), dtype=xw.dtype)
    cg = np.empty((N, 2 * H), dtype=xw.dtype)
    cg[:, :H] = c
    c, g = cg[:, :H], cg[:, H:]
    ofi, o, fi, gpre = buf[:, : 3 * H], buf[:, :H], buf[:, H:3 * H], buf[:, 3 * H:]
    dot, add, mul, tanh = np.dot, np.add, np.multiply, np.tanh
    for t in range(xw.shape[0]):
        dot(h, RT, out=buf)
        add(buf, xw[t], out=buf)
        sigmoid(ofi, out=ofi)
        tanh(gpre, out=g)
        mul(cg, fi, out=cg)  # [ft (.) Ct-1, it (.) ct]
        add(c, g, out=c)  # Ct
        tanh(c, out=tmp)
        h = mul(o, tmp, out=Y[t])  # Ht = ot (.) h(Ct)
    return c.copy()


# --------------------------------------------------------------------------------------
# The shared driver
# --------------------------------------------------------------------------------------


def _check_shape(name: str, arr: np.ndarray, expected: tuple[int, ...]) -> None:
    if arr.shape != expected:
        raise KernelError(f"{name} must have shape {list(expected)}, got {list(arr.shape)}.")


def recurrent(
    cell: str,
    X: np.ndarray,
    W: np.ndarray,
    R: np.ndarray,
    B: np.ndarray | None = None,
    sequence_lens: np.ndarray | None = None,
    initial_h: np.ndarray | None = None,
    initial_c: np.ndarray | None = None,
    P: np.ndarray | None = None,
    *,
    hidden_size: int | None = None,
    direction: str = "forward",
    layout: int = 0,
    activations: Sequence[str] | None = None,
    activation_alpha: Sequence[float] | None = None,
    activation_beta: Sequence[float] | None = None,
    clip: float | None = None,
    linear_before_reset: int = 0,
    input_forget: int = 0,
    lstm_steps: Callable[..., np.ndarray] | None = None,
) -> tuple[np.ndarray, ...]:
    """Run an RNN, GRU or LSTM layer; returns ``(Y, Y_h)`` or ``(Y, Y_h, Y_c)`` for LSTM.

    The input projections of every time step are one matrix product before the loop; the
    loop over time steps does one matrix product with R per step, vectorized over the
    batch. With ``sequence_lens``, a sequence stops updating its state after its length,
    its outputs ``Y`` past the length are zero, and ``Y_h``/``Y_c`` hold the state of its
    last valid step (zero for a length of 0, as onnxruntime gives). The reverse direction
    reads each sequence backwards from its own last valid step. float16 and bfloat16
    compute in float32.

    This is the reference kernel. A fast path (onnxrt.fastpaths.rnn) passes
    ``lstm_steps(xw, R, h, c, Y) -> c``, which runs every time step of a float32 LSTM of
    the default configuration (sigmoid/tanh/tanh, no peepholes, clip, input_forget or
    sequence_lens) for one direction, writing each step's hidden state into ``Y`` and
    returning the final cell state.
    """
    X, W, R = np.asarray(X), np.asarray(W), np.asarray(R)
    if direction == "foward":  # the default of GRU-1 is spelled so in the spec
        direction = "forward"
    if direction not in ("forward", "reverse", "bidirectional"):
        raise InvalidAttributeError(
            f"direction must be one of ['forward', 'reverse', 'bidirectional'], got {direction!r}."
        )
    if layout not in (0, 1):
        raise InvalidAttributeError(f"layout must be 0 or 1, got {layout!r}.")
    if X.ndim != 3:
        raise KernelError(f"X must have rank 3, got shape {list(X.shape)}.")
    if layout == 1:
        X = X.transpose(1, 0, 2)  # [batch, seq, input] -> [seq, batch, input]
    S, N, I = X.shape
    D = 2 if direction == "bidirectional" else 1
    G = N_GATES[cell]
    acts = parse_activations(activations, activation_alpha, activation_beta, cell, D)
    if R.ndim != 3:
        raise KernelError(f"R must have rank 3, got shape {list(R.shape)}.")
    H = R.shape[-1]
    if hidden_size is not None and hidden_size != H:
        raise KernelError(f"hidden_size is {hidden_size} but R has shape {list(R.shape)} (hidden size {H}).")
    _check_shape("W", W, (D, G * H, I))
    _check_shape("R", R, (D, G * H, H))
    if B is not None:
        _check_shape("B", B, (D, 2 * G * H))
    if P is not None:
        _check_shape("P", P, (D, 3 * H))

    def state(name: str, value: np.ndarray | None) -> np.ndarray | None:
        if value is None:
            return None
        value = np.asarray(value)
        if layout == 1:
            _check_shape(name, value, (N, D, H))
            return value.transpose(1, 0, 2)
        _check_shape(name, value, (D, N, H))
        return value

    initial_h = state("initial_h", initial_h)
    initial_c = state("initial_c", initial_c)

    lens = None
    if sequence_lens is not None:
        lens = np.asarray(sequence_lens).astype(np.int64).reshape(-1)
        if lens.shape != (N,):
            raise KernelError(f"sequence_lens must have shape [{N}], got {list(np.shape(sequence_lens))}.")
        if lens.size and (lens.min() < 0 or lens.max() > S):
            bad = lens[(lens < 0) | (lens > S)][0]
            raise KernelError(f"sequence_lens holds {int(bad)}, expected values in [0, {S}].")
        if np.all(lens == S):
            lens = None  # every sequence is full: the unmasked loop gives the same result

    dt = compute_dtype(X.dtype)
    Xc = X.astype(dt, copy=False).reshape(S * N, I)
    Y = np.zeros((S, D, N, H), dtype=dt)
    Yh = np.empty((D, N, H), dtype=dt)
    Yc = np.empty((D, N, H), dtype=dt) if cell == "LSTM" else None
    batch = np.arange(N)
    if lens is not None:
        t_col = np.arange(S)[:, None]
        valid = t_col < lens[None, :]  # (S, N)
        # reverse reading order of each sequence inside its own length; an involution
        rev = np.where(valid, lens[None, :] - 1 - t_col, t_col)

    for d in range(D):
        reverse = direction == "reverse" or d == 1
        Wd = W[d].astype(dt, copy=False)
        Rd = R[d].astype(dt, copy=False)
        if B is not None:
            Wb = B[d, : G * H].astype(dt)
            Rb = B[d, G * H:].astype(dt)
        else:
            Wb = np.zeros(G * H, dtype=dt)
            Rb = np.zeros(G * H, dtype=dt)
        # bias folded into the input projection: all of it, except Rbh of a GRU with
        # linear_before_reset (it sits inside the reset gate's product)
        fold = Wb + Rb
        if cell == "GRU" and linear_before_reset:
            fold[2 * H:] = Wb[2 * H:]
        default_lstm = (
            cell == "LSTM" and lens is None and P is None and clip is None and not input_forget
            and _is(acts[d][0], _sigmoid) and _is(acts[d][1], _tanh) and _is(acts[d][2], _tanh)
        )
        compiled = default_lstm and dt == np.float32 and lstm_steps is not None
        if default_lstm and not compiled:
            order = _lstm_default_order(H)
            Wd, Rd, fold = Wd[order], Rd[order], fold[order]
        xw = np.dot(Xc, Wd.T)
        xw += fold
        xw = xw.reshape(S, N, G * H)
        if reverse:
            xw = xw[::-1] if lens is None else xw[rev, batch]
        h = np.zeros((N, H), dtype=dt) if initial_h is None else initial_h[d].astype(dt)
        c = None
        if cell == "LSTM":
            c = np.zeros((N, H), dtype=dt) if initial_c is None else initial_c[d].astype(dt)  # a copy: updated in place
        Yd = np.empty((S, N, H), dtype=dt)
        if compiled:
            c = lstm_steps(xw, Rd, h, c, Yd)
            if S:
                h = Yd[-1].copy()
        elif default_lstm:
            c = _lstm_default_loop(xw, Rd, h, c, Yd)
            if S:
                h = Yd[-1].copy()
        else:
            cell_step = _CELLS[cell](
                Rd, Rb, acts[d], clip, N,
                linear_before_reset=linear_before_reset, input_forget=input_forget,
                P=None if P is None else P[d].astype(dt),
            ).step
            if lens is None:
                for t in range(S):
                    cell_step(xw[t], h, c, Yd[t])  # the new hidden state is written straight into Y
                    h = Yd[t]
                h = h.copy()
            else:
                h_new = np.empty_like(h)
                for t in range(S):
                    c_old = None if c is None else c.copy()
                    cell_step(xw[t], h, c, h_new)
                    keep = ~valid[t][:, None]  # finished sequences keep their state and output zeros
                    np.copyto(h, h_new, where=~keep)
                    if c is not None:
                        np.copyto(c, c_old, where=keep)
                    np.copyto(Yd[t], np.where(keep, 0, h_new))
        if reverse:
            Yd = Yd[::-1] if lens is None else Yd[rev, batch]
        Y[:, d] = Yd
        Yh[d] = h
        if Yc is not None:
            Yc[d] = c
        if lens is not None:
            # the spec is silent on empty sequences; onnxruntime gives them zero final states
            Yh[d][lens == 0] = 0
            if Yc is not None:
                Yc[d][lens == 0] = 0

    out_dtype = X.dtype
    if layout == 1:
        Y = Y.transpose(2, 0, 1, 3)  # [seq, dir, batch, hidden] -> [batch, seq, dir, hidden]
        Yh = Yh.transpose(1, 0, 2)
        Yc = None if Yc is None else Yc.transpose(1, 0, 2)
    res = [np.ascontiguousarray(Y, dtype=out_dtype), np.ascontiguousarray(Yh, dtype=out_dtype)]
    if Yc is not None:
        res.append(np.ascontiguousarray(Yc, dtype=out_dtype))
    return tuple(res)


def rnn(X, W, R, B=None, sequence_lens=None, initial_h=None, **attributes):
    """Simple RNN layer: ``Ht = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi)``; returns ``(Y, Y_h)``."""
    return recurrent("RNN", X, W, R, B, sequence_lens, initial_h, **attributes)


def gru(X, W, R, B=None, sequence_lens=None, initial_h=None, **attributes):
    """GRU layer (gates z, r, h; ``linear_before_reset`` as in the spec); returns ``(Y, Y_h)``."""
    return recurrent("GRU", X, W, R, B, sequence_lens, initial_h, **attributes)


def lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, **attributes):
    """LSTM layer (gates i, o, f, c; peepholes P, ``input_forget``); returns ``(Y, Y_h, Y_c)``."""
    return recurrent("LSTM", X, W, R, B, sequence_lens, initial_h, initial_c, P, **attributes)


class _RecurrentOp(OpRun):
    """Attribute handling shared by the three layers."""

    cell = ""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        direction = getattr(self, "direction", "forward") or "forward"
        if direction == "foward":  # GRU-1's schema default
            direction = self._atts["direction"] = "forward"
        self.direction = direction
        self.check_choice("direction", ("forward", "reverse", "bidirectional"))
        num_directions = 2 if direction == "bidirectional" else 1
        try:
            parse_activations(
                self.activations, self.activation_alpha, self.activation_beta, self.cell, num_directions
            )
        except InvalidAttributeError as e:
            raise InvalidAttributeError(f"{self.node_label()}: {e}") from None
        self._kw = {
            "hidden_size": self.hidden_size,
            "direction": direction,
            "layout": getattr(self, "layout", 0) or 0,
            "activations": self.activations,
            "activation_alpha": self.activation_alpha,
            "activation_beta": self.activation_beta,
            "clip": self.clip,
        }
        if self._kw["layout"] not in (0, 1):
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'layout' is {self._kw['layout']!r}, expected 0 or 1.")


@register("RNN", versions=(1, 7, 14, 22))
class RNN(_RecurrentOp):
    """RNN: 1 (``output_sequence``, ignored: Y is always computed), 7, 14 (``layout``), 22 (bfloat16)."""

    cell = "RNN"

    def _run(self, X, W, R, B=None, sequence_lens=None, initial_h=None, attributes=None, verbose=0, fLOG=None):
        return recurrent("RNN", X, W, R, B, sequence_lens, initial_h, **self._kw)


@register("GRU", versions=(1, 3, 7, 14, 22))
class GRU(_RecurrentOp):
    """GRU: 1 (no ``linear_before_reset``; default direction spelled 'foward'), 3, 7, 14 (``layout``), 22 (bfloat16)."""

    cell = "GRU"

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._kw["linear_before_reset"] = getattr(self, "linear_before_reset", 0) or 0

    def _run(self, X, W, R, B=None, sequence_lens=None, initial_h=None, attributes=None, verbose=0, fLOG=None):
        return recurrent("GRU", X, W, R, B, sequence_lens, initial_h, **self._kw)


@register("LSTM", versions=(1, 7, 14, 22))
class LSTM(_RecurrentOp):
    """LSTM: 1 (``output_sequence``, ignored), 7, 14 (``layout``), 22 (bfloat16).

    LSTM-1 writes ``Ht-1*Ri`` without the transpose that version 7 added to the text; both
    versions compute ``Ht-1 Ri^T``, as onnxruntime does (R has shape [4H, H] in both).
    """

    cell = "LSTM"

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._kw["input_forget"] = self.input_forget or 0

    def _run(self, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None,
             attributes=None, verbose=0, fLOG=None):
        return recurrent("LSTM", X, W, R, B, sequence_lens, initial_h, initial_c, P, **self._kw)
