"""The table of fuzzed operators: for each, a generator drawing valid inputs and attributes from the spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from hypothesis import strategies as st

from ._gen import (
    BOOL,
    F8,
    F32,
    F64,
    FLOATS,
    I4,
    INTS,
    NUMERIC,
    SIGNED,
    STRING,
    UNSIGNED,
    Gen,
    Node,
    P,
    dtype_range,
    elem_type,
    is_float,
    since_versions,
)

LATEST = onnx.defs.onnx_opset_version()
I64 = np.dtype(np.int64)
I32 = np.dtype(np.int32)
ANY = NUMERIC + (BOOL, STRING)


def i64(values: Any) -> np.ndarray:
    return np.array(values, dtype=np.int64)


@dataclass(frozen=True)
class OpSpec:
    """One fuzzed operator: ``gen(g)`` returns a valid node for ``g.opset``."""

    op: str
    gen: Callable[[Gen], Node]
    #: the first opset the generator handles (older versions have other semantics)
    min_opset: int = 1
    max_opset: int | None = None
    #: tolerance multiplier for float outputs (accumulations, transcendental functions)
    tol: float = 1.0
    #: outputs are moved or converted values: compare bit for bit
    exact: bool = False
    #: also compare with onnxruntime
    ort: bool = True
    #: cases that abort the onnxruntime process (``terminate called``): never sent to it
    ort_skip: Callable[[Any, dict], bool] | None = None
    #: onnx's type inference fails on some valid nodes of function-defined operators
    #: (MeanVarianceNormalization with axes); those take the first input's type
    strict_inference: bool = True
    #: the element type whose tolerance applies, when the spec computes in another precision
    #: than the output's (the float32 stash_type of normalizations on float64 inputs)
    tol_dtype: Callable[[Any], Any] | None = None
    variant: str = ""
    domain: str = ""

    @property
    def id(self) -> str:
        return f"{self.op}-{self.variant}" if self.variant else self.op

    @property
    def opsets(self) -> tuple[int, ...]:
        """Every since_version from ``min_opset`` on, ``min_opset`` itself, and the latest opset."""
        hi = self.max_opset if self.max_opset is not None else LATEST
        lo = max(self.min_opset, since_versions(self.op, self.domain)[0])
        vers = {v for v in since_versions(self.op, self.domain) if lo <= v <= hi}
        vers.add(lo)
        if self.max_opset is None:
            vers.add(LATEST)
        return tuple(sorted(vers))


# ---------------------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------------------


def unary(among: Any = NUMERIC, lo: float | None = None, hi: float | None = None, attrs: Any = None) -> Callable[[Gen], Node]:
    def gen(g: Gen) -> Node:
        dt = g.dtype(0, among)
        x = g.array(g.shape(), dt, lo, hi)
        return Node([x], attrs(g) if attrs else {})

    return gen


def nary(
    n: tuple[int, int] = (2, 2),
    among: Any = NUMERIC,
    lo: float | None = None,
    hi: float | None = None,
    nonzero_int_divisor: bool = False,
    attrs: Any = None,
    full_range: bool = False,
) -> Callable[[Gen], Node]:
    """Inputs of one type whose shapes broadcast together (multidirectional)."""

    def gen(g: Gen) -> Node:
        dt = g.dtype(0, among)
        base = g.shape()
        k = g.int(*n)
        xs = []
        for i in range(k):
            if full_range and dt.kind in "iu":
                a, b = dtype_range(dt)
            else:
                a, b = lo, hi
            x = g.array(g.broadcast_to(base), dt, a, b, nonzero=nonzero_int_divisor and i == 1 and dt.kind in "iu")
            xs.append(x)
        return Node(xs, attrs(g, dt) if attrs else {})

    return gen


def gen_pow(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    # the exponent has its own type from opset 12; integer powers stay small (no overflow)
    et = g.dtype(1, NUMERIC) if g.opset >= 12 else dt
    base = g.shape()
    if dt.kind in "iu":
        x = g.array(g.broadcast_to(base), dt, -4 if dt.kind == "i" else 0, 4)
    else:
        x = g.array(g.broadcast_to(base), dt, 0.0 if g.bool() else -3.0, 3.0)
    if et.kind in "iu" or dt.kind in "iu":
        y = g.array(g.broadcast_to(base), et, 0, 4)
        if is_float(et):
            y = np.asarray(np.round(y.astype(np.float64)).astype(et))
    else:
        y = g.array(g.broadcast_to(base), et, -2.0, 2.0)
    return Node([x, y])


def gen_mod(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    # floats need fmod=1 (the spec); integers take both
    fmod = 1 if is_float(dt) else g.int(0, 1)
    base = g.shape()
    x = g.array(g.broadcast_to(base), dt, -30, 30)
    y = g.array(g.broadcast_to(base), dt, -7, 7, nonzero=True)
    return Node([x, y], {"fmod": fmod})


def gen_bitshift(g: Gen) -> Node:
    dt = g.dtype(0, UNSIGNED)
    bits = dt.itemsize * 8
    base = g.shape()
    x = g.array(g.broadcast_to(base), dt, 0, dtype_range(dt)[1])
    # shifting by the width or more is undefined in C++ (onnxruntime): amounts below the width
    y = g.array(g.broadcast_to(base), dt, 0, bits - 1)
    return Node([x, y], {"direction": g.choice(["LEFT", "RIGHT"])})


def gen_where(g: Gen) -> Node:
    dt = g.dtype(1, ANY)
    base = g.shape()
    c = g.array(g.broadcast_to(base), BOOL)
    return Node([c, g.array(g.broadcast_to(base), dt), g.array(g.broadcast_to(base), dt)])


def gen_prelu(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    shape = g.shape(min_rank=1)
    # the slope broadcasts to X (unidirectional)
    return Node([g.array(shape, dt), g.array(g.broadcast_to(shape), dt, -2, 2)])


def gen_clip(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    x = g.array(g.shape(), dt)
    # min > max is allowed: every value becomes max (Clip-13)
    lo, hi = sorted([g.int(-5, 3), g.int(-3, 5)]) if not g.maybe() else (g.int(0, 3), g.int(-3, 0))
    if dt.kind == "u":
        lo, hi = lo + 5, hi + 5
    if g.opset < 11:
        attrs = {}
        if g.bool():
            attrs["min"] = float(lo)
        if g.bool():
            attrs["max"] = float(hi)
        return Node([x], attrs)
    mn = P(np.array(lo, dtype=dt)) if g.bool() else None
    mx = P(np.array(hi, dtype=dt)) if g.bool() else None
    return Node([x, mn, mx])


def f_attr(name: str, lo: float, hi: float) -> Callable[[Gen], dict]:
    return lambda g: {name: g.float(lo, hi)} if g.bool() else {}


def attrs_of(*fns: Callable[[Gen], dict]) -> Callable[[Gen], dict]:
    def make(g: Gen) -> dict:
        out: dict = {}
        for f in fns:
            out.update(f(g))
        return out

    return make


def gen_shrink(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    x = g.array(g.shape(), dt)
    attrs = {"lambd": g.float(0, 2), "bias": g.float(-1, 1) if is_float(dt) else float(g.int(0, 2))}
    return Node([x], attrs)


def gen_isinf(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    x = g.array(g.shape(), dt, special=True)
    attrs = {}
    if g.bool():
        attrs["detect_negative"] = g.int(0, 1)
    if g.bool():
        attrs["detect_positive"] = g.int(0, 1)
    return Node([x], attrs)


def gen_softmax(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    shape = g.shape(min_rank=1)
    x = g.array(shape, dt, -6, 6)
    attrs = {"axis": g.axis(len(shape), negative=g.opset >= 11)} if g.bool() else {}
    if g.opset < 13 and "axis" not in attrs and len(shape) < 2:
        attrs["axis"] = 0
    return Node([x], attrs)


def gen_cast(g: Gen) -> Node:
    src = g.dtype(0, (*NUMERIC, BOOL, STRING, *F8, *I4))
    from ._gen import allowed_types

    targets = [
        d for d in allowed_types("Cast", g.opset, 0, output=True) if d in (*NUMERIC, BOOL, STRING, *F8, *I4)
    ]
    if src == STRING:
        targets = [d for d in targets if d != STRING and d not in I4]
    if is_float(src) and src not in F8:
        targets = [d for d in targets if d != STRING]  # float formatting is left to implementations
    to = g.choice(targets)
    shape = g.shape()
    attrs = {"to": elem_type(to)}
    if src == STRING:
        if is_float(to):
            v = g.array(shape, F64, -100, 100)
            x = np.array([np.format_float_positional(f) for f in v.ravel()], dtype=object).reshape(shape)
            words = np.array(["inf", "-INF", "NaN", "1e3", "-2.5E-2"], dtype=object)
            mask = g.rng.random(shape) < 0.2
            x = np.where(mask, words[g.rng.integers(0, 5, shape)], x).astype(object)
        elif to == BOOL:
            x = np.array([str(int(v)) for v in g.array(shape, I64, 0, 1).ravel()], dtype=object).reshape(shape)
        else:
            lo, hi = dtype_range(to)
            v = g.array(shape, I64, max(lo, -100), min(hi, 100))
            x = np.array([str(int(i)) for i in v.ravel()], dtype=object).reshape(shape)
        return Node([x], attrs)
    if is_float(src) and (to.kind in "iu" or to in I4):
        # out-of-range float to integer conversions are undefined (the spec): values in range
        lo, hi = dtype_range(to)
        x = g.array(shape, src, max(lo, -100), min(hi, 100))
    elif to in F8 and is_float(src):
        x = g.array(shape, src, -600, 600) if g.bool() else g.array(shape, src)
    else:
        x = g.array(shape, src)
    if to in F8 and g.opset >= 19 and g.bool():
        attrs["saturate"] = g.int(0, 1)
    return Node([x], attrs)


# ---------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------


def reduce(among: Any, axes_input_from: int, lo: float | None = None, hi: float | None = None) -> Callable[[Gen], Node]:
    def gen(g: Gen) -> Node:
        dt = g.dtype(0, among)
        shape = g.shape(max_rank=4)
        x = g.array(shape, dt, lo, hi)
        axes = g.axes(len(shape))
        attrs: dict[str, Any] = {}
        if g.bool():
            attrs["keepdims"] = g.int(0, 1)
        if g.opset < axes_input_from:
            if axes:
                attrs["axes"] = axes
            return Node([x], attrs)
        if g.bool():
            attrs["noop_with_empty_axes"] = g.int(0, 1)
        how = g.int(0, 2)  # axes omitted, empty, or given
        if how == 0:
            return Node([x], attrs)
        return Node([x, P(i64(axes if how == 2 else []))], attrs)

    return gen


def gen_argmax(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC + (BOOL,))
    shape = g.shape(min_rank=1)
    axis = g.axis(len(shape), negative=g.opset >= 11)
    if shape[axis] == 0:  # an arg of an empty axis does not exist
        shape = tuple(2 if i == axis % len(shape) else d for i, d in enumerate(shape))
    attrs = {"axis": axis}
    if g.bool():
        attrs["keepdims"] = g.int(0, 1)
    if g.opset >= 12 and g.bool():
        attrs["select_last_index"] = g.int(0, 1)
    return Node([g.array(shape, dt)], attrs)


def gen_cumsum(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    shape = g.shape(min_rank=1)
    axis = g.axis(len(shape))
    attrs = {}
    if g.bool():
        attrs["exclusive"] = g.int(0, 1)
    if g.bool():
        attrs["reverse"] = g.int(0, 1)
    return Node([g.array(shape, dt), P(np.array(axis, dtype=g.choice([I32, I64])))], attrs)


def _sort_by_index(outs: list, node: Node) -> list:
    """TopK with sorted=0 leaves the order open: order both outputs by index along the axis."""
    if node.attrs.get("sorted", 1) == 1 or outs[1].size == 0:
        return outs
    axis = node.attrs.get("axis", -1)
    order = np.argsort(outs[1], axis=axis, kind="stable")
    return [np.take_along_axis(outs[0], order, axis), np.take_along_axis(outs[1], order, axis)]


def gen_topk(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    shape = g.shape(min_rank=1)
    axis = g.axis(len(shape), negative=g.opset >= 11)
    if g.opset < 10 and shape[axis] == 0:  # the attribute k of TopK-1 is at least 1
        shape = tuple(1 if i == axis % len(shape) else d for i, d in enumerate(shape))
    k = g.int(1 if g.opset < 10 else 0, shape[axis])
    x = g.array(shape, dt, special=False)
    attrs: dict[str, Any] = {"axis": axis}
    if g.opset >= 11:
        if g.bool():
            attrs["largest"] = g.int(0, 1)
        if g.bool():
            attrs["sorted"] = g.int(0, 1)
    if g.opset < 10:
        attrs["k"] = k
        return Node([x], attrs, n_outputs=2, canon=_sort_by_index)
    return Node([x, P(i64([k]))], attrs, n_outputs=2, canon=_sort_by_index)


# ---------------------------------------------------------------------------------------
# shapes and layout
# ---------------------------------------------------------------------------------------


def _factor(n: int) -> list[int]:
    out, p = [], 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def gen_reshape(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape()
    x = g.array(shape, dt)
    size = int(np.prod(shape))
    allowzero = g.opset >= 14 and g.bool()
    factors = [f for d in shape if d for f in _factor(d)]
    g.rng.shuffle(factors)
    rank = g.int(0, 4) if factors else g.int(0, 3)
    target = [1] * rank
    if factors and not rank:
        target = [1]
    for f in factors:
        target[int(g.rng.integers(0, len(target)))] *= f
    if size == 0:
        zi = shape.index(0)
        if allowzero:
            target.insert(g.int(0, len(target)), 0)
        else:
            target = target + [1] * max(0, zi - len(target))
            target.insert(zi, 0)
    else:
        if target and g.bool():
            target[g.int(0, len(target) - 1)] = -1
        if not allowzero:
            for i in range(min(len(target), len(shape))):
                if target[i] == shape[i] and g.int(0, 2) == 0:
                    target[i] = 0  # 0 copies the input's dimension
    attrs = {"allowzero": 1} if allowzero else {}
    return Node([x, P(i64(target))], attrs)


def gen_flatten(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(min_rank=1)
    r = len(shape)
    axis = g.int(-r if g.opset >= 11 else 0, r)
    return Node([g.array(shape, dt)], {"axis": axis} if g.bool() or axis != 1 else {})


def gen_squeeze(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = list(g.shape())
    for i in range(len(shape)):
        if g.bool():
            shape[i] = 1
    ones = [i for i, d in enumerate(shape) if d == 1]
    r = len(shape)
    chosen = [i for i in ones if g.bool()]
    if g.opset >= 11:
        chosen = [a - r if g.bool() else a for a in chosen]
    x = g.array(tuple(shape), dt)
    if not chosen and g.bool():
        return Node([x])  # every 1 is removed
    if g.opset < 13:
        return Node([x], {"axes": chosen}) if chosen else Node([x])
    return Node([x, P(i64(chosen))])


def gen_unsqueeze(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(max_rank=3)
    k = g.int(1, 3)
    out_rank = len(shape) + k
    axes = g.axes(out_rank, min_n=k, max_n=k, negative=g.opset >= 11)
    x = g.array(shape, dt)
    if g.opset < 13:
        return Node([x], {"axes": axes})
    return Node([x, P(i64(axes))])


def gen_transpose(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(max_rank=5)
    x = g.array(shape, dt)
    if g.maybe() or not shape:
        return Node([x])
    return Node([x], {"perm": list(g.draw(st.permutations(list(range(len(shape))))))})


def gen_concat(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = list(g.shape(min_rank=1))
    axis = g.axis(len(shape), negative=g.opset >= 11)
    xs = []
    for _ in range(g.int(1, 4)):
        s = list(shape)
        s[axis] = g.int(0, 3)
        xs.append(g.array(tuple(s), dt))
    return Node(xs, {"axis": axis})


def gen_split(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = list(g.shape(min_rank=1))
    axis = g.axis(len(shape), negative=g.opset >= 11)
    n = g.int(1, 4)
    d = shape[axis]
    attrs: dict[str, Any] = {"axis": axis} if axis != 0 or g.bool() else {}
    if g.bool():  # explicit sizes
        cuts = sorted(g.int(0, d) for _ in range(n - 1))
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [d])]
        x = g.array(tuple(shape), dt)
        if g.opset < 13:
            attrs["split"] = sizes
            return Node([x], attrs, n_outputs=n)
        return Node([x, P(i64(sizes))], attrs, n_outputs=n)
    if g.opset >= 18:
        attrs["num_outputs"] = n
        # an uneven split leaves the last chunk smaller (18): ceil(d/n) each
        if d % n and (n - 1) * -(-d // n) >= d:
            shape[axis] = d = n * g.int(0, 2)
    else:
        shape[axis] = n * g.int(0, 2)
    return Node([g.array(tuple(shape), dt)], attrs, n_outputs=n)


def gen_slice(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(min_rank=1)
    r = len(shape)
    x = g.array(shape, dt)
    axes = g.axes(r, min_n=1, negative=g.opset >= 11)
    big = 2**63 - 1
    starts, ends, steps = [], [], []
    for a in axes:
        d = shape[a]
        step = 1 if g.opset < 10 else g.choice([1, 1, 2, 3, -1, -2])
        starts.append(g.choice([g.int(-d - 2, d + 2), g.int(-d - 2, d + 2), -big - 1, big]))
        ends.append(g.choice([g.int(-d - 2, d + 2), g.int(-d - 2, d + 2), -big - 1, big]))
        steps.append(step)
    if g.opset < 10:
        attrs = {"starts": starts, "ends": ends}
        if g.bool() or axes != list(range(len(axes))):
            attrs["axes"] = axes
        return Node([x], attrs)
    it = g.choice([I64, I32])
    if it == I32:
        starts = [max(min(i, 2**31 - 1), -(2**31)) for i in starts]
        ends = [max(min(i, 2**31 - 1), -(2**31)) for i in ends]
    ins: list[Any] = [x, P(np.array(starts, it)), P(np.array(ends, it))]
    give_axes = g.bool() or axes != list(range(len(axes)))
    ins.append(P(np.array(axes, it)) if give_axes else None)
    if g.bool() or any(s != 1 for s in steps):
        ins.append(P(np.array(steps, it)))
    return Node(ins)


def gen_pad(g: Gen) -> Node:
    modes = ["constant", "reflect", "edge"] + (["wrap"] if g.opset >= 19 else [])
    mode = g.choice(modes)
    dt = g.dtype(0, ANY if mode == "constant" else NUMERIC + (BOOL,))
    if g.opset < 11:
        dt = g.dtype(0, FLOATS)
    shape = g.shape(min_rank=1)
    if mode != "constant":  # edge, reflect and wrap read the padded axes: no empty input
        shape = tuple(max(d, 1) for d in shape)
    r = len(shape)
    axes = list(range(r))
    use_axes = g.opset >= 18 and g.bool()
    if use_axes:
        axes = g.axes(r, min_n=1)
    before, after = [], []
    for a in axes:
        d = shape[a]
        if mode == "constant":
            lo = g.int(-d, 3)
            hi = g.int(-(d + min(lo, 0)), 3)  # the result keeps a size >= 0
        elif mode == "reflect":
            lo, hi = g.int(0, d - 1), g.int(0, d - 1)
        elif mode == "wrap":
            lo, hi = g.int(0, d), g.int(0, d)
        else:
            lo, hi = g.int(0, 3), g.int(0, 3)
        before.append(lo)
        after.append(hi)
    pads = before + after
    x = g.array(shape, dt)
    value = g.array((), dt, -3, 3, special=False) if g.bool() else None
    if g.opset < 11:
        attrs: dict[str, Any] = {"pads": pads, "mode": mode}
        if value is not None and mode == "constant":
            attrs["value"] = float(value)
        return Node([x], attrs)
    ins: list[Any] = [x, P(i64(pads)), P(value) if value is not None and mode == "constant" else None]
    if use_axes:
        ins.append(P(np.array(axes, g.choice([I32, I64]))))
    return Node(ins, {"mode": mode} if mode != "constant" or g.bool() else {})


def gen_tile(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(max_rank=3)
    return Node([g.array(shape, dt), P(i64([g.int(0, 3) for _ in shape]))])


def gen_expand(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(max_rank=3)
    target = [g.int(1, 3) for _ in range(g.int(0, 2))]
    for d in shape:
        if d == 1:
            target.append(g.int(0, 3))
        else:
            target.append(d if g.int(0, 2) else 1)  # 1 keeps the input's dimension (bidirectional)
    # target dims may also be dropped from the front when the input has them
    return Node([g.array(shape, dt), P(i64(target))])


def gen_gather(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(min_rank=1)
    axis = g.axis(len(shape), negative=g.opset >= 11)
    ishape = g.shape(max_rank=2, empty=shape[axis] > 0)
    if shape[axis] == 0:
        ishape = ishape + (0,) if ishape else (0,)
    return Node([g.array(shape, dt), P(g.indices(ishape, shape[axis], negative=g.opset >= 11))], {"axis": axis})


def gen_gather_elements(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(min_rank=1)
    axis = g.axis(len(shape))
    ishape = [g.int(0, d) if i != axis % len(shape) else g.int(0, 3) for i, d in enumerate(shape)]
    if shape[axis] == 0:
        ishape[axis % len(shape)] = 0
    return Node([g.array(shape, dt), P(g.indices(tuple(ishape), shape[axis]))], {"axis": axis})


def gen_gather_nd(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(min_rank=1, empty=False)
    r = len(shape)
    b = g.int(0, r - 1) if g.opset >= 12 else 0
    m = g.int(1, r - b)
    outer = tuple(g.int(0, 3) for _ in range(g.int(0, 2)))
    ishape = shape[:b] + outer + (m,)
    cols = [g.indices(shape[:b] + outer, shape[b + j], dtype=I64) for j in range(m)]
    idx = np.stack(cols, axis=-1) if cols else np.zeros(ishape, np.int64)
    attrs = {"batch_dims": b} if b or g.bool() else {}
    return Node([g.array(shape, dt), P(idx.reshape(ishape))], attrs)


def _reduction(g: Gen, dt: np.dtype) -> str:
    opts = ["none"]
    if g.opset >= 16 and dt != BOOL:
        opts += ["add", "mul"]
    if g.opset >= 18 and dt != BOOL:
        opts += ["max", "min"]
    return g.choice(opts)


def gen_scatter_elements(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(min_rank=1, max_rank=3)
    r = len(shape)
    axis = g.axis(r)
    ax = axis % r
    red = _reduction(g, dt) if dt != STRING else "none"
    ishape = [g.int(0, d) for d in shape]
    if red == "none":
        # duplicate targets have no defined result without a reduction: distinct indices along the axis
        keys = g.rng.random(shape)
        perm = np.argsort(keys, axis=ax)
        idx = perm[tuple(slice(0, n) for n in ishape)]
    else:
        ishape[ax] = g.int(0, 4) if shape[ax] else 0
        idx = g.rng.integers(0, max(shape[ax], 1), ishape)
    idx = np.where(g.rng.random(idx.shape) < 0.3, idx - shape[ax], idx).astype(g.choice([I32, I64]))
    attrs: dict[str, Any] = {"axis": axis}
    if red != "none" or (g.opset >= 16 and g.bool()):
        attrs["reduction"] = red
    upd = g.array(tuple(ishape), dt, -3, 3) if red == "mul" else g.array(tuple(ishape), dt)
    return Node([g.array(shape, dt), P(idx), upd], attrs)


def gen_scatter_nd(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(min_rank=1, max_rank=3)
    r = len(shape)
    m = g.int(1, r)
    red = _reduction(g, dt) if dt != STRING else "none"
    cells = int(np.prod(shape[:m]))
    outer = tuple(g.int(0, 3) for _ in range(g.int(0, 2)))
    k = int(np.prod(outer))
    if cells == 0:
        outer = outer + (0,) if outer else (0,)
        k = 0
    if red == "none":
        if k > cells:
            outer, k = (cells,), cells
        flat = g.rng.permutation(cells)[:k]
    else:
        flat = g.rng.integers(0, cells, k) if cells else np.zeros(0, np.int64)
    idx = np.stack(np.unravel_index(flat, shape[:m]), axis=-1).reshape(outer + (m,)).astype(np.int64)
    idx = np.where(g.rng.random(idx.shape) < 0.3, idx - np.array(shape[:m]), idx)
    upd_shape = outer + tuple(shape[m:])
    upd = g.array(upd_shape, dt, -3, 3) if red == "mul" else g.array(upd_shape, dt)
    attrs = {"reduction": red} if red != "none" or (g.opset >= 16 and g.bool()) else {}
    return Node([g.array(shape, dt), P(idx), upd], attrs)


def gen_onehot(g: Gen) -> Node:
    it = g.dtype(0, NUMERIC)
    shape = g.shape(min_rank=1, max_rank=3)
    depth = g.int(1, 5)
    lo, hi = (-depth - 2, depth + 2) if it.kind != "u" else (0, depth + 2)
    idx = g.array(shape, F64, lo, hi, special=False)
    idx = np.trunc(idx).astype(it)
    dtd = g.dtype(1, NUMERIC)
    vt = g.dtype(2, ANY)
    values = g.array((2,), vt)
    r = len(shape)
    attrs = {"axis": g.int(-r - 1, r)} if g.bool() else {}
    return Node([idx, P(np.array(depth, dtype=dtd).reshape(() if g.bool() else (1,))), P(values)], attrs)


def gen_range(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    if dt.kind in "iu":
        start, limit = g.int(-10, 10), g.int(-10, 10)
        delta = g.choice([1, 2, 3, -1, -2, -3])
    else:
        start, limit = g.int(-40, 40) / 4, g.int(-40, 40) / 4
        delta = g.choice([0.25, 0.5, 0.75, 1.0, 1.5, -0.5, -1.0, -1.25])
    return Node([P(np.array(start, dt)), P(np.array(limit, dt)), P(np.array(delta, dt))])


def gen_trilu(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(min_rank=2)
    ins: list[Any] = [g.array(shape, dt)]
    if g.bool():
        ins.append(P(np.array(g.int(-5, 5), np.int64)))
    return Node(ins, {"upper": g.int(0, 1)} if g.bool() else {})


def gen_depth_to_space(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    b = g.int(1, 3)
    n, c, h, w = g.int(0, 2), g.int(1, 2), g.int(1, 3), g.int(1, 3)
    attrs: dict[str, Any] = {"blocksize": b}
    if g.opset >= 11 and g.bool():
        attrs["mode"] = g.choice(["DCR", "CRD"])
    return Node([g.array((n, c * b * b, h, w), dt)], attrs)


def gen_space_to_depth(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    b = g.int(1, 3)
    n, c, h, w = g.int(0, 2), g.int(1, 3), g.int(1, 3), g.int(1, 3)
    return Node([g.array((n, c, h * b, w * b), dt)], {"blocksize": b})


def gen_compress(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(min_rank=1)
    attrs = {}
    if g.bool():
        axis = g.axis(len(shape), negative=g.opset >= 11)
        n = shape[axis]
        attrs["axis"] = axis
    else:
        n = int(np.prod(shape))
    cond = g.array((g.int(0, n),), BOOL)
    return Node([g.array(shape, dt), P(cond)], attrs)


def gen_nonzero(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC + (BOOL,))
    shape = g.shape(min_rank=0)
    return Node([g.array(shape, dt, -1, 1)])


def gen_unique(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape(min_rank=1, max_rank=3)
    x = g.array(shape, dt, -2, 2, special=False)
    attrs: dict[str, Any] = {}
    if g.bool():
        attrs["sorted"] = g.int(0, 1)
    if g.bool():
        attrs["axis"] = g.axis(len(shape))
    return Node([x], attrs, n_outputs=g.int(1, 4))


def gen_reverse_sequence(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = list(g.shape(min_rank=2, max_rank=4))
    time_axis, batch_axis = g.choice([(0, 1), (1, 0)])
    seq = shape[time_axis]
    lens = g.rng.integers(0 if seq == 0 else 1, seq + 1, shape[batch_axis])
    attrs = {"time_axis": time_axis, "batch_axis": batch_axis}
    return Node([g.array(tuple(shape), dt), P(lens.astype(np.int64))], attrs)


def gen_shape(g: Gen) -> Node:
    dt = g.dtype(0, ANY)
    shape = g.shape()
    attrs = {}
    if g.opset >= 15:
        if g.bool():
            attrs["start"] = g.int(-6, 6)
        if g.bool():
            attrs["end"] = g.int(-6, 6)
    return Node([g.array(shape, dt)], attrs)


def gen_constant_of_shape(g: Gen) -> Node:
    shape = g.shape()
    attrs = {}
    if g.bool():
        from ._gen import allowed_types

        vt = g.choice([d for d in allowed_types("ConstantOfShape", g.opset, 0, output=True) if d in NUMERIC + (BOOL,)])
        attrs["value"] = onnx.numpy_helper.from_array(g.array((1,), vt))
    return Node([P(i64(shape))], attrs)


def gen_eye_like(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC + (BOOL,))
    shape = (g.int(0, 4), g.int(0, 4))
    attrs: dict[str, Any] = {}
    if g.bool():
        attrs["k"] = g.int(-4, 4)
    if g.bool():
        from ._gen import allowed_types

        to = g.choice([d for d in allowed_types("EyeLike", g.opset, 0, output=True) if d in NUMERIC + (BOOL,)])
        attrs["dtype"] = elem_type(to)
    return Node([g.array(shape, dt)], attrs)


# ---------------------------------------------------------------------------------------
# linear algebra
# ---------------------------------------------------------------------------------------


def gen_matmul(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    m, k, n = g.int(0, 4), g.int(0, 5), g.int(0, 4)
    batch = g.shape(max_rank=2, empty=False)
    kind = g.int(0, 3)
    a_shape = (k,) if kind in (1, 3) else g.broadcast_to(batch) + (m, k)
    b_shape = (k,) if kind in (2, 3) else g.broadcast_to(batch) + (k, n)
    return Node([g.array(a_shape, dt, -3, 3), g.array(b_shape, dt, -3, 3)])


def gen_gemm(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    m, k, n = g.int(0, 4), g.int(0, 5), g.int(0, 4)
    attrs: dict[str, Any] = {}
    ta, tb = g.int(0, 1), g.int(0, 1)
    if ta:
        attrs["transA"] = 1
    if tb:
        attrs["transB"] = 1
    if g.bool():
        attrs["alpha"] = g.float(-2, 2) if is_float(dt) else float(g.int(-2, 2))
    if g.bool():
        attrs["beta"] = g.float(-2, 2) if is_float(dt) else float(g.int(-2, 2))
    a = g.array((k, m) if ta else (m, k), dt, -3, 3)
    b = g.array((n, k) if tb else (k, n), dt, -3, 3)
    if g.opset >= 11 and g.maybe():
        return Node([a, b], attrs)
    c_shape = g.choice([(), (n,), (1, n), (m, 1), (m, n), (1, 1)])
    return Node([a, b, g.array(c_shape, dt, -3, 3)], attrs)


EINSUM = [
    ("ij,jk->ik", "ij", "jk"),
    ("bij,bjk->bik", "bij", "bjk"),
    ("ii->i", "ii"),
    ("ij->ji", "ij"),
    ("i,i->", "i", "i"),
    ("...ij,...jk->...ik", "...ij", "...jk"),
    ("ij->", "ij"),
    ("ijk->kji", "ijk"),
    ("i,j->ij", "i", "j"),
    ("ij,ij->i", "ij", "ij"),
    ("bn,anm,bm->ba", "bn", "anm", "bm"),
    ("ij", "ij"),
    ("ji", "ij"),
    ("ii", "ii"),
    ("...j->...", "...j"),
    ("ijk,jl->ilk", "ijk", "jl"),
]


def gen_einsum(g: Gen) -> Node:
    dt = g.dtype(0, NUMERIC)
    eq, *terms = g.choice(EINSUM)
    sizes = {c: g.int(0 if g.maybe() else 1, 3) for c in "abijklmn"}
    ell = g.shape(max_rank=2, empty=False)
    xs = []
    for t in terms:
        shape: list[int] = []
        for c in t.replace("...", "."):
            shape.extend(ell if c == "." else [sizes[c]])
        xs.append(g.array(tuple(shape), dt, -3, 3))
    return Node(xs, {"equation": eq})


def gen_det(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    n = g.int(1, 4)
    batch = g.shape(max_rank=2)
    return Node([g.array(batch + (n, n), dt, -2, 2, special=False)])


# ---------------------------------------------------------------------------------------
# convolution and pooling
# ---------------------------------------------------------------------------------------


def _window(g: Gen, nd: int, pool: bool, dilations: bool = True) -> tuple[dict[str, Any], list[int], list[int], list[int], list[int], str]:
    """Kernel, strides, dilations, pads and auto_pad of a sliding window over ``nd`` axes."""
    kernel = [g.int(1, 3) for _ in range(nd)]
    strides = [g.int(1, 3) for _ in range(nd)]
    dil = [g.int(1, 2) for _ in range(nd)] if dilations and g.bool() else [1] * nd
    auto_pad = g.choice(["NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
    # pooling windows need pads below the kernel (onnxruntime refuses larger ones)
    pads = [g.int(0, k - 1 if pool else 2) for k in kernel * 2] if auto_pad == "NOTSET" else [0] * (2 * nd)
    attrs: dict[str, Any] = {}
    if g.bool() or any(s != 1 for s in strides):
        attrs["strides"] = strides
    if any(d != 1 for d in dil):
        attrs["dilations"] = dil
    if auto_pad != "NOTSET":
        attrs["auto_pad"] = auto_pad
    elif any(pads) or g.bool():
        attrs["pads"] = pads
    return attrs, kernel, strides, dil, pads, auto_pad


def _spatial(g: Gen, kernel: list[int], dil: list[int], pads: list[int]) -> list[int]:
    """Input sizes that leave at least one output position."""
    nd = len(kernel)
    return [max(g.int(1, 6), (kernel[i] - 1) * dil[i] + 1 - pads[i] - pads[i + nd]) for i in range(nd)]


def gen_conv(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    nd = g.int(1, 3)
    attrs, kernel, _, dil, pads, _ = _window(g, nd, pool=False)
    group = g.int(1, 2)
    cin, cout = group * g.int(1, 2), group * g.int(1, 2)
    n = g.int(0, 2) if g.maybe() else g.int(1, 2)
    sp = _spatial(g, kernel, dil, pads)
    if group > 1 or g.bool():
        attrs["group"] = group
    if g.bool():
        attrs["kernel_shape"] = kernel
    x = g.array((n, cin, *sp), dt, -2, 2)
    w = g.array((cout, cin // group, *kernel), dt, -2, 2)
    ins = [x, w]
    if g.bool():
        ins.append(g.array((cout,), dt, -2, 2))
    return Node(ins, attrs)


def gen_conv_transpose(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    nd = g.int(1, 3)
    attrs, kernel, strides, dil, pads, auto_pad = _window(g, nd, pool=False)
    group = g.int(1, 2)
    cin, cout = group * g.int(1, 2), group * g.int(1, 2)
    n = g.int(0, 2) if g.maybe() else g.int(1, 2)
    sp = [g.int(1, 4) for _ in range(nd)]
    if group > 1:
        attrs["group"] = group
    if g.bool():
        attrs["kernel_shape"] = kernel
    # the output must keep a size >= 1: (in-1)*stride + dilated kernel - pads
    if auto_pad == "NOTSET":
        for i in range(nd):
            full = (sp[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1
            while full - pads[i] - pads[i + nd] < 1:
                pads[i] = max(pads[i] - 1, 0)
                pads[i + nd] = max(pads[i + nd] - 1, 0)
        if "pads" in attrs:
            attrs["pads"] = pads
    if g.bool():
        # output_padding must be below the stride or the dilation (spec)
        attrs["output_padding"] = [g.int(0, max(strides[i], dil[i]) - 1) for i in range(nd)]
    elif g.maybe() and auto_pad == "NOTSET":
        base = [(sp[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(nd)]
        attrs["output_shape"] = [b + g.int(0, max(strides[i], dil[i]) - 1) - (0 if g.bool() else min(1, b - 1)) for i, b in enumerate(base)]
        attrs.pop("pads", None)
    x = g.array((n, cin, *sp), dt, -2, 2)
    w = g.array((cin, cout // group, *kernel), dt, -2, 2)
    ins = [x, w]
    if g.bool():
        ins.append(g.array((cout,), dt, -2, 2))
    return Node(ins, attrs)


def pool(kind: str) -> Callable[[Gen], Node]:
    def gen(g: Gen) -> Node:
        among = FLOATS + ((np.dtype(np.int8), np.dtype(np.uint8)) if kind == "max" else ())
        dt = g.dtype(0, among)
        nd = g.int(1, 3)
        dil_ok = (kind == "max" and g.opset >= 10) or (kind != "max" and g.opset >= 19) or (kind == "lp" and g.opset >= 18)
        attrs, kernel, _, dil, pads, _ = _window(g, nd, pool=True, dilations=dil_ok)
        attrs["kernel_shape"] = kernel
        sp = _spatial(g, kernel, dil, pads)
        n_out = 1
        if (kind in ("max", "avg") and g.opset >= 10) or (kind == "lp" and g.opset >= 18):
            if g.bool():
                attrs["ceil_mode"] = g.int(0, 1)
        if kind == "avg" and g.opset >= 7 and g.bool():
            attrs["count_include_pad"] = g.int(0, 1)
        if kind == "lp" and g.bool():
            attrs["p"] = g.int(1, 3)
        if kind == "max" and g.opset >= 8:
            n_out = g.int(1, 2)
            if g.bool():
                attrs["storage_order"] = g.int(0, 1)
        c = g.int(1, 3)
        n = g.int(0, 2) if g.maybe() else g.int(1, 2)
        return Node([g.array((n, c, *sp), dt, -3, 3)], attrs, n_outputs=n_out)

    return gen


def global_pool(lp: bool = False) -> Callable[[Gen], Node]:
    def gen(g: Gen) -> Node:
        dt = g.dtype(0, FLOATS)
        sp = tuple(g.int(1, 4) for _ in range(g.int(1, 3)))
        attrs = {"p": g.int(1, 3)} if lp and g.bool() else {}
        return Node([g.array((g.int(1, 2), g.int(1, 3), *sp), dt, -3, 3)], attrs)

    return gen


# ---------------------------------------------------------------------------------------
# normalization
# ---------------------------------------------------------------------------------------


def narrowest_input(case: Any) -> Any:
    """Parameters narrower than X (float32 statistics for a float64 X, BatchNormalization-15):
    where the computation rounds to them is the implementation's choice."""
    from ._gen import P as _P

    ins = [np.asarray(v.value if isinstance(v, _P) else v) for v in case.node.inputs if v is not None]
    return min((a.dtype for a in ins if is_float(a.dtype)), key=lambda d: np.dtype(d).itemsize)


def gen_batch_norm(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    c = g.int(1, 3)
    shape = (g.int(0, 2) if g.maybe() else g.int(1, 2), c, *(g.int(1, 3) for _ in range(g.int(0, 2))))
    pt = g.dtype(1, FLOATS) if g.opset >= 15 else dt
    mt = g.dtype(3, FLOATS) if g.opset >= 15 else dt
    attrs = {"epsilon": g.float(1e-5, 0.1)} if g.bool() else {}
    if g.bool():
        attrs["momentum"] = g.float(0.1, 0.99)
    ins = [g.array(shape, dt), g.array((c,), pt), g.array((c,), pt), g.array((c,), mt), g.array((c,), mt, 0.5, 2, special=False)]
    return Node(ins, attrs)


def gen_instance_norm(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    c = g.int(1, 3)
    shape = (g.int(1, 2), c, *(g.int(1, 4) for _ in range(g.int(1, 2))))
    attrs = {"epsilon": g.float(1e-5, 0.1)} if g.bool() else {}
    return Node([g.array(shape, dt), g.array((c,), dt), g.array((c,), dt)], attrs)


def stash_precision(case: Any) -> Any:
    """Stage one of LayerNormalization and GroupNormalization-21 runs in ``stash_type``
    (float32 by default): a float64 input is only as precise as float32 then."""
    if case.op == "GroupNormalization" and case.opset < 21:
        return None
    return None if case.node.attrs.get("stash_type", 1) == 11 else F32


def gen_layer_norm(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    shape = g.shape(min_rank=1, max_rank=4)
    r = len(shape)
    axis = g.axis(r)
    norm = shape[axis % r:]
    attrs: dict[str, Any] = {"axis": axis} if axis != -1 or g.bool() else {}
    if g.bool():
        attrs["epsilon"] = g.float(1e-5, 0.1)
    if g.bool():
        attrs["stash_type"] = g.choice([1, 11])
    ins: list[Any] = [g.array(shape, dt), g.array(g.broadcast_to(norm, drop=False), dt)]
    if g.bool():
        ins.append(g.array(g.broadcast_to(norm, drop=False), dt))
    return Node(ins, attrs, n_outputs=g.int(1, 3))


def gen_lrn(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    shape = (g.int(1, 2), g.int(1, 5), *(g.int(1, 3) for _ in range(2)))
    attrs: dict[str, Any] = {"size": g.choice([1, 3, 5, 2])}
    if g.bool():
        attrs["alpha"] = g.float(1e-4, 0.5)
    if g.bool():
        attrs["beta"] = g.float(0.25, 1)
    if g.bool():
        attrs["bias"] = g.float(0.5, 2)
    return Node([g.array(shape, dt)], attrs)


def gen_group_norm(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    groups = g.int(1, 3)
    c = groups * g.int(1, 2)
    shape = (g.int(1, 2), c, *(g.int(1, 3) for _ in range(g.int(0, 2))))
    pc = c if g.opset >= 21 else groups
    attrs: dict[str, Any] = {"num_groups": groups}
    if g.bool():
        attrs["epsilon"] = g.float(1e-5, 0.1)
    if g.opset >= 21 and g.bool():
        attrs["stash_type"] = g.choice([1, 11])
    return Node([g.array(shape, dt), g.array((pc,), dt), g.array((pc,), dt)], attrs)


def gen_mvn(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    shape = (g.int(1, 3), g.int(1, 3), g.int(1, 3), g.int(1, 3))
    attrs = {"axes": sorted(a % 4 for a in g.axes(4, min_n=1))} if g.bool() else {}
    return Node([g.array(shape, dt)], attrs)


def gen_lp_norm(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    shape = g.shape(min_rank=1)
    attrs: dict[str, Any] = {}
    if g.bool():
        attrs["axis"] = g.axis(len(shape))
    if g.bool():
        attrs["p"] = g.int(1, 2)
    return Node([g.array(shape, dt)], attrs)


# ---------------------------------------------------------------------------------------
# quantization, resize
# ---------------------------------------------------------------------------------------


def gen_quantize(g: Gen) -> Node:
    xt = g.dtype(0, FLOATS if g.opset >= 19 else (F32,))
    from ._gen import allowed_types

    qts = [d for d in allowed_types("QuantizeLinear", g.opset, 2) if d in INTS + F8 + I4]
    qt = g.choice(qts)
    shape = g.shape(min_rank=0, max_rank=3)
    attrs: dict[str, Any] = {}
    per_axis = g.opset >= 13 and len(shape) > 0 and g.bool()
    st_dt = xt if g.opset >= 19 else F32
    if per_axis:
        axis = g.axis(len(shape))
        attrs["axis"] = axis
        sshape: tuple[int, ...] = (shape[axis],)
    else:
        sshape = ()
    scale = g.array(sshape, st_dt, 0.05, 2, special=False)
    x = g.array(shape, xt, -300, 300) if g.bool() else g.array(shape, xt)
    ins: list[Any] = [x, P(scale)]
    if qt in F8 or g.bool():
        zp = np.zeros(sshape, qt) if qt in F8 else g.array(sshape, qt)
        ins.append(P(zp))
    elif qt not in (np.dtype(np.uint8),):
        ins.append(P(np.zeros(sshape, qt)))  # without a zero point the output type is uint8
    if qt in F8 and g.bool():
        attrs["saturate"] = g.int(0, 1)
    return Node(ins, attrs)


def gen_dequantize(g: Gen) -> Node:
    from ._gen import allowed_types

    qt = g.choice([d for d in allowed_types("DequantizeLinear", g.opset, 0) if d in INTS + F8 + I4])
    shape = g.shape(min_rank=0, max_rank=3)
    attrs: dict[str, Any] = {}
    per_axis = g.opset >= 13 and len(shape) > 0 and g.bool()
    sdt = g.dtype(1, FLOATS) if g.opset >= 19 else F32
    if per_axis:
        axis = g.axis(len(shape))
        attrs["axis"] = axis
        sshape: tuple[int, ...] = (shape[axis],)
    else:
        sshape = ()
    x = g.array(shape, qt, *dtype_range(qt)) if qt.kind in "iu" or qt in I4 else g.array(shape, qt)
    ins: list[Any] = [x, P(g.array(sshape, sdt, 0.05, 2, special=False))]
    if g.bool():
        # int32 and float 8 zero points must be 0 (the spec)
        zero = qt == np.dtype(np.int32) or qt in F8
        ins.append(P(np.zeros(sshape, qt) if zero else g.array(sshape, qt)))
    return Node(ins, attrs)


def gen_resize(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS + ((np.dtype(np.int8), np.dtype(np.uint8)) if g.opset >= 11 else ()))
    rank = g.int(1, 4) if g.bool() else 4
    shape = [g.int(1, 4) for _ in range(rank)]
    modes = ["nearest", "linear"] + (["cubic"] if g.opset >= 11 else [])
    mode = g.choice(modes)
    attrs: dict[str, Any] = {"mode": mode}
    ctm = "asymmetric"
    if g.opset >= 11:
        opts = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"]
        if g.opset >= 19:
            opts.append("half_pixel_symmetric")
        if g.opset < 13:
            opts.append("tf_half_pixel_for_nn")
        ctm = g.choice(opts)
        attrs["coordinate_transformation_mode"] = ctm
        if mode == "nearest" and g.bool():
            attrs["nearest_mode"] = g.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
        if mode == "cubic":
            if g.bool():
                attrs["cubic_coeff_a"] = g.choice([-0.75, -0.5])
            if g.bool():
                attrs["exclude_outside"] = 1
        if ctm == "tf_crop_and_resize" and g.bool():
            attrs["extrapolation_value"] = g.float(-2, 2)
    # scales on the outer axes stay 1 (onnxruntime resizes at most the inner axes)
    inner = min(rank, 2)
    axes = None
    if g.opset >= 18 and g.maybe():
        axes = sorted(g.axes(rank, min_n=1, max_n=inner, negative=False))
        if mode != "nearest":
            axes = [a for a in axes if a >= rank - inner] or [rank - 1]
        attrs["axes"] = axes
    resized = axes if axes is not None else list(range(rank - inner, rank))
    if g.opset >= 18 and mode != "nearest" and g.maybe():
        attrs["antialias"] = 1
    # finite values only: where an infinity meets a zero interpolation weight, each runtime
    # gives its own NaN pattern (test_resize_infinity_and_zero_weights records them)
    x = g.array(tuple(shape), dt, -4, 4, special=False)
    use_sizes = g.opset >= 11 and g.bool()
    full = axes if axes is not None else list(range(rank))
    roi = None
    if ctm == "tf_crop_and_resize":
        starts = [g.choice([0.0, 0.25, 0.5]) if a in resized else 0.0 for a in full]
        ends = [g.choice([1.0, 0.75, 1.25]) if a in resized else 1.0 for a in full]
        roi = P(np.array(starts + ends, dtype=g.dtype(1, FLOATS)))
    if use_sizes:
        sizes = [g.int(1, 7) if a in resized else shape[a] for a in full]
        if g.opset >= 18 and len(resized) > 1 and g.bool():
            attrs["keep_aspect_ratio_policy"] = g.choice(["stretch", "not_larger", "not_smaller"])
        if g.opset < 13:  # roi and scales are required inputs of Resize-11 (empty when unused)
            empty = P(np.zeros(0, np.float32))
            return Node([x, roi if roi is not None else empty, empty, P(i64(sizes))], attrs)
        return Node([x, roi, None, P(i64(sizes))], attrs)
    scales = [g.choice([0.5, 0.6, 1.0, 1.5, 2.0, 2.5, 3.0, 0.75]) if a in resized else 1.0 for a in full]
    sc = P(np.array(scales, dtype=np.float32))
    if g.opset < 11:
        return Node([x, sc], attrs)
    if roi is None and g.opset < 13:
        roi = P(np.zeros(0, np.float32))
    return Node([x, roi, sc], attrs)


def gen_dropout(g: Gen) -> Node:
    dt = g.dtype(0, FLOATS)
    x = g.array(g.shape(), dt)
    n_out = g.int(1, 2)
    if g.opset >= 12:
        ins: list[Any] = [x]
        if g.bool():
            ins.append(P(np.array(g.choice([0.0, 0.5]), dtype=g.dtype(1, FLOATS))))
            if g.bool():
                ins.append(P(np.array(False)))
        return Node(ins, n_outputs=n_out)
    return Node([x], {"ratio": 0.5} if g.bool() else {}, n_outputs=n_out)


# ---------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------

# float functions with a restricted domain get values inside it (outside, every side returns NaN)
_UNARY_MATH = [
    ("Abs", NUMERIC, None, None, 1), ("Neg", SIGNED + FLOATS, None, None, 1), ("Sign", NUMERIC, None, None, 1),
    ("Reciprocal", FLOATS, None, None, 1), ("Floor", FLOATS, None, None, 1), ("Ceil", FLOATS, None, None, 1),
    ("Round", FLOATS, None, None, 1), ("Exp", FLOATS, None, None, 2), ("Log", FLOATS, -1, 8, 2),
    ("Sqrt", FLOATS, -1, 8, 1), ("Sin", FLOATS, None, None, 2), ("Cos", FLOATS, None, None, 2),
    ("Tan", FLOATS, -1.5, 1.5, 2), ("Asin", FLOATS, -1, 1, 2), ("Acos", FLOATS, -1, 1, 2),
    ("Atan", FLOATS, None, None, 2), ("Sinh", FLOATS, None, None, 2), ("Cosh", FLOATS, None, None, 2),
    ("Asinh", FLOATS, None, None, 2), ("Acosh", FLOATS, 1, 6, 2), ("Atanh", FLOATS, -1, 1, 2),
    ("Erf", FLOATS, None, None, 2), ("Sigmoid", FLOATS, None, None, 2), ("Tanh", FLOATS, None, None, 2),
    ("Relu", NUMERIC, None, None, 1), ("Softplus", FLOATS, None, None, 2), ("Softsign", FLOATS, None, None, 2),
    ("IsNaN", FLOATS, None, None, 1), ("Not", (BOOL,), None, None, 1),
    ("BitwiseNot", INTS, None, None, 1), ("HardSwish", FLOATS, None, None, 2), ("Mish", FLOATS, None, None, 2),
]
_MIN_OPSET = {"Relu": 6, "Abs": 6, "Neg": 6, "Reciprocal": 6, "Floor": 6, "Ceil": 6, "Exp": 6, "Log": 6,
              "Sqrt": 6, "Sigmoid": 6, "Tanh": 6}

SPECS: list[OpSpec] = [
    OpSpec(op, unary(among, lo, hi), min_opset=_MIN_OPSET.get(op, 1), tol=tol) for op, among, lo, hi, tol in _UNARY_MATH
]

SPECS += [
    OpSpec("LeakyRelu", unary(FLOATS, attrs=f_attr("alpha", -1, 1)), min_opset=6),
    OpSpec("Elu", unary(FLOATS, attrs=f_attr("alpha", 0, 2)), min_opset=6, tol=2),
    OpSpec("Selu", unary(FLOATS, attrs=attrs_of(f_attr("alpha", 0.5, 2), f_attr("gamma", 0.5, 2))), min_opset=6, tol=2),
    OpSpec("HardSigmoid", unary(FLOATS, attrs=attrs_of(f_attr("alpha", 0, 1), f_attr("beta", 0, 1))), min_opset=6),
    OpSpec("ThresholdedRelu", unary(FLOATS, attrs=f_attr("alpha", -1, 2))),
    OpSpec("Celu", unary((F32,) + FLOATS, attrs=lambda g: {"alpha": g.float(0.25, 2)} if g.bool() else {}), tol=2),
    OpSpec("Gelu", unary(FLOATS, attrs=lambda g: {"approximate": g.choice(["none", "tanh"])} if g.bool() else {}), tol=2),
    OpSpec("Shrink", gen_shrink),
    OpSpec("IsInf", gen_isinf),
    OpSpec("PRelu", gen_prelu, min_opset=7),
    OpSpec("Softmax", gen_softmax, tol=2),
    OpSpec("LogSoftmax", gen_softmax, tol=2),
    OpSpec("Hardmax", gen_softmax),
    OpSpec("Clip", gen_clip, min_opset=6),
    OpSpec("Cast", gen_cast, min_opset=6, exact=True),
    OpSpec("Add", nary(), min_opset=7),
    OpSpec("Sub", nary(), min_opset=7),
    OpSpec("Mul", nary(), min_opset=7),
    OpSpec("Div", nary(nonzero_int_divisor=True), min_opset=7),
    OpSpec("Pow", gen_pow, min_opset=7, tol=2),
    OpSpec("Mod", gen_mod, min_opset=10),
    OpSpec("Max", nary((1, 3)), min_opset=8),
    OpSpec("Min", nary((1, 3)), min_opset=8),
    OpSpec("Sum", nary((1, 3)), min_opset=8),
    OpSpec("Mean", nary((1, 3)), min_opset=8),
    OpSpec("BitShift", gen_bitshift),
    OpSpec("BitwiseAnd", nary(among=INTS, full_range=True)),
    OpSpec("BitwiseOr", nary(among=INTS, full_range=True)),
    OpSpec("BitwiseXor", nary(among=INTS, full_range=True)),
    OpSpec("And", nary(among=(BOOL,)), min_opset=7),
    OpSpec("Or", nary(among=(BOOL,)), min_opset=7),
    OpSpec("Xor", nary(among=(BOOL,)), min_opset=7),
    OpSpec("Equal", nary(among=ANY, lo=-2, hi=2), min_opset=7),
    OpSpec("Less", nary(lo=-2, hi=2), min_opset=7),
    OpSpec("Greater", nary(lo=-2, hi=2), min_opset=7),
    OpSpec("LessOrEqual", nary(lo=-2, hi=2)),
    OpSpec("GreaterOrEqual", nary(lo=-2, hi=2)),
    OpSpec("Where", gen_where),
    # reductions: axes became an input at 13 (ReduceSum) and 18 (the others)
    OpSpec("ReduceSum", reduce(NUMERIC, 13), tol=4),
    OpSpec("ReduceMean", reduce(NUMERIC, 18), tol=4),
    OpSpec("ReduceMax", reduce(NUMERIC + (BOOL,), 18)),
    OpSpec("ReduceMin", reduce(NUMERIC + (BOOL,), 18)),
    OpSpec("ReduceProd", reduce(NUMERIC, 18, -2, 2), tol=4),
    OpSpec("ReduceL1", reduce(NUMERIC, 18), tol=4),
    OpSpec("ReduceL2", reduce(NUMERIC, 18), tol=4),
    OpSpec("ReduceLogSum", reduce(NUMERIC, 18, 0, 4), tol=4),
    OpSpec("ReduceLogSumExp", reduce(NUMERIC, 18), tol=4),
    OpSpec("ReduceSumSquare", reduce(NUMERIC, 18), tol=4),
    OpSpec("ArgMax", gen_argmax),
    OpSpec("ArgMin", gen_argmax),
    OpSpec("CumSum", gen_cumsum, tol=4),
    OpSpec("TopK", gen_topk, exact=True),
    OpSpec("Reshape", gen_reshape, min_opset=5, exact=True),
    OpSpec("Flatten", gen_flatten, exact=True),
    OpSpec("Squeeze", gen_squeeze, exact=True),
    OpSpec("Unsqueeze", gen_unsqueeze, exact=True),
    OpSpec("Transpose", gen_transpose, exact=True),
    OpSpec("Concat", gen_concat, min_opset=4, exact=True),
    OpSpec("Split", gen_split, min_opset=2, exact=True),
    OpSpec("Slice", gen_slice, exact=True),
    # onnx's inference of Pad refuses int32 axes initializers (its ParseData wants int64)
    OpSpec("Pad", gen_pad, min_opset=2, exact=True, strict_inference=False),
    OpSpec("Tile", gen_tile, min_opset=6, exact=True),
    OpSpec("Expand", gen_expand, exact=True),
    OpSpec("Gather", gen_gather, exact=True),
    OpSpec("GatherElements", gen_gather_elements, exact=True),
    OpSpec("GatherND", gen_gather_nd, exact=True),
    OpSpec("ScatterElements", gen_scatter_elements, tol=2),
    OpSpec("ScatterND", gen_scatter_nd, tol=2),
    OpSpec("OneHot", gen_onehot, exact=True),
    OpSpec("Range", gen_range),
    OpSpec("Trilu", gen_trilu, exact=True),
    OpSpec("DepthToSpace", gen_depth_to_space, exact=True),
    OpSpec("SpaceToDepth", gen_space_to_depth, exact=True),
    OpSpec("Compress", gen_compress, exact=True),
    OpSpec("NonZero", gen_nonzero),
    OpSpec("Unique", gen_unique, exact=True, ort_skip=lambda case, feeds: "axis" in case.node.attrs and feeds["x0"].size == 0),
    OpSpec("ReverseSequence", gen_reverse_sequence, exact=True),
    OpSpec("Shape", gen_shape),
    OpSpec("Size", unary(ANY)),
    OpSpec("Identity", unary(ANY), exact=True),
    OpSpec("ConstantOfShape", gen_constant_of_shape, exact=True),
    OpSpec("EyeLike", gen_eye_like, exact=True),
    OpSpec("MatMul", gen_matmul, tol=4),
    OpSpec("Gemm", gen_gemm, min_opset=7, tol=4),
    # onnxruntime dies of SIGFPE on three operands with an empty contracted axis
    OpSpec("Einsum", gen_einsum, tol=4, ort_skip=lambda case, feeds: len(case.node.inputs) > 2 and any(
        np.asarray(v).size == 0 for v in case.node.inputs)),
    OpSpec("Det", gen_det, tol=16),
    OpSpec("Conv", gen_conv, tol=8),
    OpSpec("ConvTranspose", gen_conv_transpose, tol=8),
    OpSpec("MaxPool", pool("max"), exact=True),
    OpSpec("AveragePool", pool("avg"), tol=4),
    OpSpec("LpPool", pool("lp"), min_opset=2, tol=4),
    OpSpec("GlobalAveragePool", global_pool(), tol=4),
    OpSpec("GlobalMaxPool", global_pool(), exact=True),
    OpSpec("GlobalLpPool", global_pool(lp=True), min_opset=2, tol=4),
    OpSpec("BatchNormalization", gen_batch_norm, min_opset=9, tol=4, tol_dtype=narrowest_input),
    OpSpec("InstanceNormalization", gen_instance_norm, min_opset=6, tol=8),
    OpSpec("LayerNormalization", gen_layer_norm, tol=8, tol_dtype=stash_precision),
    OpSpec("GroupNormalization", gen_group_norm, tol=8, tol_dtype=stash_precision),
    OpSpec("LRN", gen_lrn, tol=4),
    OpSpec("MeanVarianceNormalization", gen_mvn, tol=8, strict_inference=False),
    OpSpec("LpNormalization", gen_lp_norm, tol=4),
    OpSpec("QuantizeLinear", gen_quantize, exact=True),
    OpSpec("DequantizeLinear", gen_dequantize),
    # onnx's inference of Resize-11 misreads an empty scales input fed at run time
    # scales are float32 (and sizes become float32 scales): a float64 X is interpolated at
    # coordinates known to float32 precision only
    OpSpec("Resize", gen_resize, min_opset=10, tol=4, strict_inference=False, tol_dtype=lambda case: F32),
    OpSpec("Dropout", gen_dropout, min_opset=7, exact=True),
]

_ids = [s.id for s in SPECS]
if len(_ids) != len(set(_ids)):  # pragma: no cover  (a table typo)
    raise RuntimeError(f"duplicate fuzz spec ids: {sorted(i for i in _ids if _ids.count(i) > 1)}")
