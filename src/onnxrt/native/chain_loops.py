"""The compiled interpreter of element-wise programs (onnxrt's FusedElementwise): one pass over memory for a chain of float32 operations."""

from __future__ import annotations

import threading

import numpy as np
from numba import carray, cfunc, njit, types

from ..fastpaths import _fastmath as fm
from .loops import _bits_to_f32, _clip, _exp, _exp2_erfc, _expm1_neg, _f32_at, _f32_to_bits, _horner

# A program is straight-line code: each instruction one float32 operation of the inputs and
# of earlier results. compile_program writes it as the body of one loop over the output's
# elements, every intermediate value a local variable, so memory sees each input read once
# and the output written once whatever the chain's length, and LLVM vectorises the loop.
# (An interpreter of the instructions over blocks of elements, compiled once for every
# program, ran 2-4x slower than numpy's passes here: its loops did not vectorise.)
#
# An input is read in one of four modes: 0 the output's own shape (element e), 1 a scalar
# (element 0), or a block of axes of the output broadcast along the others, element
# (e // inner) % count: 2 when inner > 1 (a per-channel vector of NCHW), 3 when inner = 1
# (a bias along the last axis, a row of a mask).
#
# The operations are IEEE float32 as numpy computes them (add, sub, mul, div, sqrt, the
# NaN-propagating maximum and minimum of np.maximum/np.minimum); exp, tanh, sigmoid and
# erf are _fastmath's approximations (about 1-3 ulp, tests/ops/test_fastpaths_chain.py).

_f32 = np.float32
_ONE = _f32(1.0)
_ZERO = _f32(0.0)
_HALF = _f32(0.5)
_SIGN_BIT = np.uint32(0x80000000)
_SIGMOID_NORMAL_LOW = _f32(-87.33)
_SIGMOID_HIGH = _f32(88.0)

_INLINE = {"nogil": True, "error_model": "numpy", "inline": "always", "fastmath": {"contract"}}


@njit(**_INLINE)
def _erf1(v):
    # loops.erf's formula for one element
    a = abs(v)
    s = fm.ERF_SPLIT if fm.ERF_SPLIT < a else a
    small = s + s * _horner(fm.ERF_SMALL, s * s)
    t = _clip(a, fm.ERF_SPLIT, fm.ERF_CLIP) - fm.ERF_SPLIT
    large = _ONE - _exp2_erfc(_horner(fm.ERF_LARGE2, t))
    r = large if a > fm.ERF_SPLIT else small
    return _bits_to_f32(_f32_to_bits(r) | (_f32_to_bits(v) & _SIGN_BIT))


@njit(**_INLINE)
def _tanh1(v):
    # tanh |v| = -m / (2 + m) with m = expm1(-2 |v|) in (-1, 0]: no cancellation near 0 (m is
    # accurate there), 1.0 from |v| = 9 on; the sign of v (and NaN) put back by its bits
    m = _expm1_neg(_f32(-2.0) * abs(v))
    r = -m / (_f32(2.0) + m)
    r = _bits_to_f32(_f32_to_bits(r) | (_f32_to_bits(v) & _SIGN_BIT))
    return r if v == v else v


@njit(**_INLINE)
def _max_nan(a, b):
    # np.maximum: NaN when either operand is NaN
    r = a if a > b else b
    return r if a == a else a


@njit(**_INLINE)
def _min_nan(a, b):
    r = a if a < b else b
    return r if a == a else a


@njit(**_INLINE)
def _sigmoid1(v):
    # loops.sigmoid's p / (p + 2**-k) (e = exp(c) = p 2**k), c clipped to [-87.33, 88]; below
    # -87.33, where sigmoid is subnormal, 0 (flushed as under FTZ: loops.sigmoid recomputes
    # those exactly, which here would cost a second exp per element); NaN stays NaN
    c = _clip(v, _SIGMOID_NORMAL_LOW, _SIGMOID_HIGH)
    t = c * fm._LOG2E + fm._ROUNDER
    k = t - fm._ROUNDER
    r = (c - k * fm._LN2_HI) - k * fm._LN2_LO
    p = _ONE + (_horner(fm.EXP, r) * r + _ONE) * r
    s = _bits_to_f32(np.uint32(0x3F800000) - (_f32_to_bits(t) << np.uint32(23)))
    r = p / (p + s)
    return _ZERO if v < _SIGMOID_NORMAL_LOW else r


@njit(**_INLINE)
def _hard_sigmoid1(v, alpha, beta):
    return _min_nan(_max_nan(v * alpha + beta, _ZERO), _ONE)


@njit(**_INLINE)
def _hard_swish1(v):
    return v * _min_nan(_max_nan(v * _f32(1.0 / 6.0) + _HALF, _ZERO), _ONE)


@njit(**_INLINE)
def _leaky_relu1(v, alpha):
    return v if v >= _ZERO else v * alpha


#: each operation as a float32 expression of its operands {a}, {b} and parameters {p0}, {p1}
EXPRESSIONS = {
    "Add": "{a} + {b}", "Sub": "{a} - {b}", "Mul": "{a} * {b}", "Div": "{a} / {b}",
    "Max": "_max_nan({a}, {b})", "Min": "_min_nan({a}, {b})",
    "Neg": "-{a}", "Abs": "abs({a})", "Sqrt": "np.sqrt({a})", "Exp": "_exp({a})", "Tanh": "_tanh1({a})",
    "Sigmoid": "_sigmoid1({a})", "Erf": "_erf1({a})", "Relu": "_max_nan({a}, _ZERO)", "Reciprocal": "_ONE / {a}",
    "HardSigmoid": "_hard_sigmoid1({a}, {p0}, {p1})", "HardSwish": "_hard_swish1({a})",
    "LeakyRelu": "_leaky_relu1({a}, {p0})", "Const": "{p0}",
}

_COMPILED: dict[str, object] = {}
_COMPILE_LOCK = threading.Lock()


def _scope() -> dict:
    return {"np": np, "_f32": _f32, "_ZERO": _ZERO, "_ONE": _ONE, "_max_nan": _max_nan, "_min_nan": _min_nan,
            "_exp": _exp, "_tanh1": _tanh1, "_sigmoid1": _sigmoid1, "_erf1": _erf1,
            "_hard_sigmoid1": _hard_sigmoid1, "_hard_swish1": _hard_swish1, "_leaky_relu1": _leaky_relu1,
            "carray": carray, "_f32_at": _f32_at}


def _body(program: tuple, indent: str, out: str) -> list[str]:
    # the program's instructions as float32 statements, the last one assigning ``out``
    lines = []
    for i, (name, dst, a, b, p0, p1) in enumerate(program):
        expr = EXPRESSIONS[name].format(a=a, b=b, p0=f"_f32({float(np.float32(p0))!r})", p1=f"_f32({float(np.float32(p1))!r})")
        lines.append(f"{indent}{out if i == len(program) - 1 else dst} = {expr}")
    return lines


def compile_inplace(program: tuple) -> object | None:
    """The compiled C callable ``void act(float *y, int64 count)`` (a numba cfunc: its
    ``address`` goes into a team job's ``act`` field) applying ``program`` in place to
    ``count`` float32 values, for a program whose one input is x0 (constants are Const
    instructions); None for a program reading other inputs. The program's element-wise
    arithmetic is compile_program's, so the values are those of the FusedElementwise
    fast path. Compiled once per program for the process."""
    if any(isinstance(op[k], str) and op[k].startswith("x") and op[k] != "x0" for op in program for k in (2, 3)):
        return None
    lines = ["def act(address, count):", "    y = carray(_f32_at(address), count)", "    for j in range(count):",
             "        x0 = y[j]"]
    lines += _body(program, "        ", "y[j]")
    source = "\n".join(lines) + "\n"
    with _COMPILE_LOCK:
        fn = _COMPILED.get(source)
        if fn is None:
            scope = _scope()
            exec(compile(source, "<onnxrt chain>", "exec"), scope)  # noqa: S102 (source generated from a fixed table)
            fn = _COMPILED[source] = cfunc(types.void(types.int64, types.int64), nopython=True, error_model="numpy",
                                           fastmath={"contract"})(scope["act"])
    return fn


def compile_program(program: tuple, modes: tuple) -> object:
    """The compiled loop ``kernel(a0, ..., y, lo, hi, inner, count)`` of ``program``:
    instructions ``(operation, destination, a, b, p0, p1)`` where operands name inputs
    (``x0``...) or earlier destinations, the last destination being the output; ``modes``
    gives each input's reading, one per input a0... (0: element e; 1: element 0; 2: element (e // inner[k]) %
    count[k] with inner[k] > 1, a per-channel vector; 3: element e % count[k], a row).
    Generated as straight-line source (every value a local of one loop iteration: one pass,
    nothing in memory but the inputs and the output), compiled once per program and modes
    for the process.

    The loop runs over runs of elements along which every broadcast input is either one
    value (mode 2: up to the next multiple of inner) or a contiguous slice (mode 3: up to the
    end of the row), so the inner loop has no integer division and vectorises."""
    # one parameter per input of the node (numba's dispatch checks every argument's type: about
    # a microsecond each, which a small tensor's call feels)
    arrays = "".join(f"a{k}, " for k in range(len(modes)))
    lines = [f"def kernel({arrays}y, lo, hi, inner, count):"]
    used = sorted({int(op[k][1:]) for op in program for k in (2, 3) if isinstance(op[k], str) and op[k].startswith("x")})
    for k in used:
        if modes[k] == 1:
            lines.append(f"    x{k} = a{k}[0]")
    lines.append("    pos = lo")
    lines.append("    while pos < hi:")
    lines.append("        end = hi")
    for k in used:
        if modes[k] == 2:
            lines.append(f"        q{k} = pos // inner[{k}]")
            lines.append(f"        x{k} = a{k}[q{k} % count[{k}]]")
            lines.append(f"        end = min(end, (q{k} + 1) * inner[{k}])")
        elif modes[k] == 3:
            lines.append(f"        r{k} = pos % count[{k}]")
            lines.append(f"        end = min(end, pos + count[{k}] - r{k})")
    # slices indexed from 0 by the loop counter: numba's negative-index wrap-around check on
    # a[pos + j] (pos may be negative, for all LLVM knows) made the loop 2-3x slower
    for k in used:
        if modes[k] == 0:
            lines.append(f"        c{k} = a{k}[pos:end]")
        elif modes[k] == 3:
            lines.append(f"        c{k} = a{k}[r{k}:r{k} + end - pos]")
    lines.append("        ys = y[pos:end]")
    lines.append("        for j in range(end - pos):")
    for k in used:
        if modes[k] in (0, 3):
            lines.append(f"            x{k} = c{k}[j]")
    lines += _body(program, "            ", "ys[j]")
    lines.append("        pos = end")
    source = "\n".join(lines) + "\n"
    with _COMPILE_LOCK:
        fn = _COMPILED.get(source)
        if fn is None:
            scope = _scope()
            exec(compile(source, "<onnxrt chain>", "exec"), scope)  # noqa: S102 (source generated above from a fixed table)
            fn = _COMPILED[source] = njit(nogil=True, error_model="numpy", fastmath={"contract"})(scope["kernel"])
    return fn
