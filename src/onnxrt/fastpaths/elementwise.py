"""Fast paths of the element-wise math (reference kernels: onnxrt.ops_cpu.family_unary,
family_activation and family_binary's rows).

- ``compiled float32 loop``: Erf, Sigmoid, Elu, Selu, Celu, Softplus and Gelu of float32
  (float16 through the compiled bit casts, bfloat16 through float32) by _fastmath's numba
  twins in native.loops: one fused pass per element, on the team for large inputs;
- ``numpy polynomial``: the same operators by _fastmath's chunked numpy passes (minimax
  polynomials, np.exp) where the compiled kernels are off: numpy's expm1, log1p,
  logaddexp and scipy's erf are scalar loops, 10 to 30 times slower;
- ``float16 compiled casts`` / ``float16 bit casts``: Mish, Swish and Gelu(tanh) of
  float16, whose float32 formula is the reference's own, through _fastmath's casts;
- ``compiled float32 loop`` of Relu (1.4x np.clip at 1e6 elements);
- ``compiled row broadcast``: Add, Sub, Mul and Div of float32 operands where one is a row
  broadcast along the other's leading axes (the same IEEE operations as numpy's).

Why _fastmath's numpy polynomials are a fast path and not the reference: they approximate
the spec's functions within stated bounds (1 to 4 ulp in float32, see each function's
docstring and tests/ops/test_fastmath.py), while the reference kernels evaluate the exact
formulas with numpy and scipy (expm1, logaddexp, erf/erfc) on every dtype. The paths
apply from the sizes where they win (``fm.MIN_SIZE``..., ``fm.JIT_MIN_SIZE`` for the
compiled loops): below, a few ufunc calls beat a chunked kernel's 15 to 45.

Every call of a node whose operator declares paths pays the dispatcher's signature
lookup (a few microseconds on a loaded 2-core machine), small inputs included. The
transcendental ufuncs' pool split therefore stays inside their reference kernels
(family_unary._on_pool, exact); Relu and Add/Sub/Mul/Div pay it for their compiled loops.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from .. import native
from ..dispatch import fast_path
from . import _fastmath as fm
from ..ops_cpu.family_activation import _gelu_plain, _mish_plain, _swish_plain

_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)
_BF16 = np.dtype(ml_dtypes.bfloat16)
_FLOATS = (_F32, _F16, _BF16)
_nd = np.ndarray

#: float32 elements from which Relu runs the compiled loop
RELU_JIT_SIZE = 1 << 14
#: elements from which a float32 operator with one input broadcast along the leading axes
#: runs the compiled loop (numpy's broadcast iterator: 1.5x onnxruntime's time at 1e6)
ROWS_OP_MIN_SIZE = 1 << 14


def _via_float32(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, compiled: bool) -> np.ndarray:
    """``fn`` (a float32 kernel) on x: float32 as it is, float16 through _fastmath's bit casts
    (compiled or numpy), bfloat16 through float32 (rounded once, as the reference)."""
    dt = x.dtype
    if dt == _F32:
        return fn(x)
    if dt == _F16:
        return fm.f32_to_f16(fn(fm.f16_to_f32(x, compiled=compiled)), compiled=compiled)
    return fn(x.astype(_F32)).astype(dt)


def _sized(dtypes: tuple[np.dtype, ...], size: int, extra: Callable[[Any], bool] | None = None) -> Callable[..., bool]:
    """``when``: an array of one of ``dtypes`` with at least ``size`` elements (and ``extra(op)``)."""
    if extra is None:
        return lambda op, x: type(x) is _nd and x.dtype in dtypes and x.size >= size
    return lambda op, x: type(x) is _nd and x.dtype in dtypes and x.size >= size and extra(op)


def _declare_fastmath(op_type: str, kernel: Callable[..., np.ndarray], min_size: int,
                      extra: Callable[[Any], bool] | None = None, dtypes: tuple[np.dtype, ...] = _FLOATS,
                      names: tuple[str, str] = ("compiled float32 loop", "numpy polynomial")) -> None:
    """Declare ``op_type``'s two paths around ``kernel(op, x32, compiled) -> y32``: the compiled
    one from fm.JIT_MIN_SIZE elements on, the numpy one from ``min_size`` on."""

    def compiled_path(op: Any, x: np.ndarray) -> Callable[[np.ndarray], tuple] | None:
        if native.kernels() is None:  # numba missing or failed to load
            return None
        return lambda x: (_via_float32(lambda v: kernel(op, v, True), x, True),)

    def numpy_path(op: Any, x: np.ndarray) -> Callable[[np.ndarray], tuple]:
        return lambda x: (_via_float32(lambda v: kernel(op, v, False), x, False),)

    if names == _CASTS:
        compiled_path.__doc__ = (f"{op_type} of float16 through _fastmath's compiled bit casts around the reference's "
                                 f"float32 formula, from {fm.JIT_MIN_SIZE} elements on.")
        numpy_path.__doc__ = (f"{op_type} of float16 through _fastmath's numpy bit casts around the reference's "
                              f"float32 formula, from {min_size} elements on, while compiled kernels are off.")
    else:
        compiled_path.__doc__ = (f"{op_type} of float32 (float16, bfloat16 through float32) by the compiled twin of "
                                 f"_fastmath's kernel, from {fm.JIT_MIN_SIZE} elements on.")
        numpy_path.__doc__ = (f"{op_type} of float32 (float16, bfloat16 through float32) by _fastmath's numpy "
                              f"passes, from {min_size} elements on, while compiled kernels are off.")
    fast_path(op_type, names[0], when=_sized(dtypes, fm.JIT_MIN_SIZE, extra), native=True, prepared=True,
              min_size=fm.JIT_MIN_SIZE)(compiled_path)
    fast_path(op_type, names[1], when=_sized(dtypes, min_size, extra), native=False, prepared=True,
              min_size=min_size)(numpy_path)


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def _alpha(op: Any, default: float = 1.0) -> float:
    return op._kw.get("alpha", default)


_SELU_ALPHA, _SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875
_CASTS = ("float16 compiled casts", "float16 bit casts")

_declare_fastmath("Erf", lambda op, x, c: fm.erf(x, compiled=c), fm.ERF_MIN_SIZE)
# fm.sigmoid is the reference's formula by chunks (no speed gain in numpy, bounded scratch
# memory); float16 gains the fast casts, float32 the compiled loop
_declare_fastmath("Sigmoid", lambda op, x, c: fm.sigmoid(x, compiled=c), fm.CAST_MIN_SIZE)
_declare_fastmath("Elu", lambda op, x, c: fm.elu(x, _alpha(op), compiled=c), fm.MIN_SIZE,
                  lambda op: _finite(_alpha(op)))
_declare_fastmath("Selu", lambda op, x, c: fm.selu(x, _alpha(op, _SELU_ALPHA), op._kw.get("gamma", _SELU_GAMMA),
                                                   compiled=c), fm.MIN_SIZE,
                  lambda op: _finite(_alpha(op, _SELU_ALPHA), op._kw.get("gamma", _SELU_GAMMA)))
# fm.celu's clip to x / alpha <= 0 holds for alpha > 0 only: other values take the reference
_declare_fastmath("Celu", lambda op, x, c: fm.celu(x, _alpha(op), compiled=c), fm.MIN_SIZE,
                  lambda op: _finite(_alpha(op)) and _alpha(op) > 0)
_declare_fastmath("Softplus", lambda op, x, c: fm.softplus(x, compiled=c), fm.MIN_SIZE)
_declare_fastmath("Gelu", lambda op, x, c: fm.gelu(x, compiled=c), fm.ERF_MIN_SIZE,
                  lambda op: op._kw["approximate"] == "none")
# the reference's float32 formulas are the fast ones (one np.exp and a few passes): only
# float16 gains, by the bit casts
_declare_fastmath("Gelu", lambda op, x, c: _gelu_plain(x, "tanh"), fm.ERF_MIN_SIZE,
                  lambda op: op._kw["approximate"] == "tanh", (_F16,), _CASTS)
_declare_fastmath("Mish", lambda op, x, c: _mish_plain(x), fm.CAST_MIN_SIZE, None, (_F16,), _CASTS)
_declare_fastmath("Swish", lambda op, x, c: _swish_plain(x, _alpha(op)), fm.CAST_MIN_SIZE, None, (_F16,), _CASTS)


@fast_path("Relu", "compiled float32 loop", when=_sized((_F32,), RELU_JIT_SIZE), native=True, min_size=RELU_JIT_SIZE)
def relu_compiled(op: Any, x: np.ndarray) -> tuple | None:
    """Relu of float32 from 16384 elements on (RELU_JIT_SIZE) by the compiled loop (1.4x faster than np.clip at 1e6)."""
    k = native.kernels()
    if k is None:
        return None
    x = np.ascontiguousarray(x)
    y = np.empty(x.shape, _F32)
    k.relu(x.reshape(-1), y.reshape(-1))
    return (y,)


_ROW_CODES = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3}


def _row_operands(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(full, row) when one float32 operand is a row of n > 1 values (1 along every other
    axis) broadcast along the other's leading axes, both C-contiguous; else None."""
    if type(a) is not _nd or type(b) is not _nd or a.dtype != _F32 or b.dtype != _F32 or a.shape == b.shape:
        return None
    if max(a.size, b.size) < ROWS_OP_MIN_SIZE:
        return None
    full, row = (a, b) if a.size >= b.size else (b, a)
    n = full.shape[-1] if full.ndim else 0
    if n > 1 and row.size == n and row.shape[-1] == n and full.flags.c_contiguous and row.flags.c_contiguous:
        return full, row
    return None


@fast_path(tuple(_ROW_CODES), "compiled row broadcast", native=True, min_size=ROWS_OP_MIN_SIZE,
           when=lambda op, a, b: not op._legacy and _row_operands(a, b) is not None)
def rows_op_compiled(op: Any, a: np.ndarray, b: np.ndarray) -> tuple | None:
    """Add/Sub/Mul/Div of float32 where one operand is a row broadcast along the other's leading axes, by one compiled pass.

    numpy's broadcast iterator costs 1.5x onnxruntime's time at 1e6 elements; the loop
    runs the same IEEE operation per element (from ROWS_OP_MIN_SIZE elements on).
    """
    k = native.kernels()
    if k is None:
        return None
    full, row = _row_operands(a, b)
    n = full.shape[-1]
    y = np.empty(np.broadcast_shapes(a.shape, b.shape), _F32)
    k.rows_op(full.reshape(-1, n), row.reshape(n), y.reshape(-1, n), _ROW_CODES[op.op_type], row is a)
    return (y,)


def _col_operands(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray, tuple[int, int, int]] | None:
    """(full, col, (outer, count, inner)) when one float32 operand holds one value per index
    of a block of the other's axes followed by inner axes of more than one element (a
    per-channel scale or shift of NCHW: (1, C, 1, 1) against (N, C, H, W)), both C-contiguous
    and the full one of the output's shape; else None."""
    if type(a) is not _nd or type(b) is not _nd or a.dtype != _F32 or b.dtype != _F32 or a.shape == b.shape:
        return None
    full, col = (a, b) if a.size >= b.size else (b, a)
    if full.size < ROWS_OP_MIN_SIZE or col.ndim > full.ndim or not (full.flags.c_contiguous and col.flags.c_contiguous):
        return None
    shape = (1,) * (full.ndim - col.ndim) + col.shape
    axes = [i for i, d in enumerate(shape) if d != 1]
    if not axes:
        return None  # (a scalar: numpy's own loop is fast)
    p, q = axes[0], axes[-1]
    if any(shape[i] != full.shape[i] for i in range(p, q + 1)):
        return None
    inner = math.prod(full.shape[q + 1:])
    if inner < 2:
        return None  # (a row: the row broadcast's loop)
    return full, col, (math.prod(full.shape[:p]), math.prod(full.shape[p:q + 1]), inner)


@fast_path(tuple(_ROW_CODES), "compiled channel broadcast", native=True, min_size=ROWS_OP_MIN_SIZE, prepared=True,
           when=lambda op, a, b: not op._legacy and _col_operands(a, b) is not None)
def cols_op_compiled(op: Any, a: np.ndarray, b: np.ndarray) -> Callable[..., tuple] | None:
    """Add/Sub/Mul/Div of float32 where one operand is one value per channel broadcast along the inner axes, by one compiled pass.

    A squeeze-excitation's scale (N, C, H, W) * (N, C, 1, 1): numpy's broadcast iterator runs
    a 49-element inner loop per channel at 7x7 (0.6 ns an element, 3x this loop); the same
    IEEE operation per element. Settled once per signature (the dispatcher keys it by both
    operands' dtype, shape and strides)."""
    k = native.kernels()
    if k is None:
        return None
    full, col, (outer, count, inner) = _col_operands(a, b)
    col_first = col is a
    code = _ROW_CODES[op.op_type]
    shape, cols_op = full.shape, k.cols_op

    def execute(a: np.ndarray, b: np.ndarray) -> tuple:
        full, col = (b, a) if col_first else (a, b)
        y = np.empty(shape, _F32)
        cols_op(full.reshape(outer, count, inner), col.reshape(count), y.reshape(outer, count, inner), code, col_first)
        return (y,)

    return execute


# -- Pow with a small constant exponent -------------------------------------------------------
# numpy's power with an array exponent calls pow() per element: Pow(x, 3) of 196K float32
# (gpt2's tanh-GELU) took 14 ms against 82 us for (x * x) * x. onnxruntime also computes a
# one-element exponent of 2 as a square and of 3 as two products (its Pow kernel's special
# cases); the cube then carries two roundings (within 2 ulp of the exact cube, pow() within 1).
_POW_FLOATS = (_F32, np.dtype(np.float64))


def _small_exponent(op: Any, x: Any, y: Any) -> float | None:
    """The exponent when Pow's Y is a one-element model constant of 2 or 3 and X a float32 or
    float64 tensor at least as high in rank (the output then has X's shape), else None."""
    if (type(x) is not _nd or type(y) is not _nd or x.dtype not in _POW_FLOATS or y.size != 1 or y.ndim > x.ndim
            or y.dtype.kind not in "fiu" or 1 not in op.const_inputs or getattr(op, "_legacy", False)):
        return None
    e = float(y.reshape(-1)[0])
    return e if e in (2.0, 3.0) else None


@fast_path("Pow", "square or cube by products", native=False, when=lambda op, x, y: _small_exponent(op, x, y) is not None)
def pow_by_products(op: Any, x: np.ndarray, y: np.ndarray) -> tuple:
    """Pow(X, 2) as X * X and Pow(X, 3) as (X * X) * X for float32/float64 X and a one-element constant Y (onnxruntime's special cases)."""
    sq = np.multiply(x, x)
    if _small_exponent(op, x, y) == 3.0:
        np.multiply(sq, x, out=sq)
    return (sq,)


# -- FusedElementwise: a chain of element-wise nodes as one compiled loop ----------------------
# onnxrt.optim.fuse_elementwise groups the nodes; native.chain_loops generates one loop per
# program, so each input is read once and the output written once whatever the chain's
# length. Its exp, tanh, sigmoid and erf are _fastmath's (1-3 ulp).

#: elements per part of the pool's split of one chain: waking the pool costs ~100 us here, a
#: HardSwish 0.25 ns an element, a SiLU 0.6 (parts of 32K elements made a 200K-element
#: HardSwish 3.5x slower than one call)
CHAIN_PART = fm.JIT_PART

_SAME = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Neg", "Abs", "Sqrt", "Exp", "Tanh", "Sigmoid", "Erf", "Relu",
         "Reciprocal", "HardSwish"}
_FLT_MAX = float(np.finfo(np.float32).max)


def chain_program(op: Any) -> tuple | None:
    """The instructions ``(operation, destination, a, b, p0, p1)`` of a FusedElementwise
    kernel's nodes for native.chain_loops.compile_program (operands ``x0``... for inputs,
    ``t0``... for results), or None for a node it cannot evaluate."""
    from onnx import helper

    names: dict[str, str] = {}
    code: list[tuple] = []

    def emit(name: str, a: str = "", b: str = "", p0: float = 0.0, p1: float = 0.0) -> str:
        dst = f"t{len(code)}"
        code.append((name, dst, a, b, p0, p1))
        return dst

    def ref(name: str) -> str:
        return names.get(name, name)  # (an input: x0, x1, ...)

    for proto in op.nodes:
        t = proto.op_type
        atts = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        ins = [ref(n) if n else "" for n in proto.input]
        if t == "Clip":
            if op.opset < 11:
                lo = emit("Const", p0=float(atts.get("min", -_FLT_MAX)))
                hi = emit("Const", p0=float(atts.get("max", _FLT_MAX)))
            else:
                lo = ins[1] if len(ins) > 1 and ins[1] else ""
                hi = ins[2] if len(ins) > 2 and ins[2] else ""
            # np.clip: min(max(x, lo), hi), NaN anywhere giving NaN; no bound: a copy (max(x, x))
            d = emit("Max", ins[0], lo or ins[0])
            if hi:
                d = emit("Min", d, hi)
        elif t == "Constant":
            # a one-element constant of a chain fused into its producer (fuse_chain_epilogue)
            from onnx import numpy_helper

            value = numpy_helper.to_array(atts["value"]) if "value" in atts else None
            if value is None or value.size != 1:
                return None
            d = emit("Const", p0=float(value.reshape(-1)[0]))
        elif t == "HardSigmoid":
            d = emit(t, ins[0], "", float(atts.get("alpha", 0.2)), float(atts.get("beta", 0.5)))
        elif t == "LeakyRelu":
            d = emit(t, ins[0], "", float(atts.get("alpha", 0.01)))
        elif t in _SAME:
            d = emit(t, ins[0], ins[1] if len(ins) > 1 else "")
        else:
            return None
        names[proto.output[0]] = d
    if not code or names.get("y") != code[-1][1]:
        return None  # (the last node writes y: fuse_elementwise's order)
    return tuple(code)


def chain_modes(shapes: list[tuple[int, ...]], out_shape: tuple[int, ...]) -> tuple[tuple, np.ndarray, np.ndarray] | None:
    """(modes, inner, count) of each input for native.chain_loops (8 each), or None when an
    input broadcasts along axes that are not one block (the reference then runs)."""
    modes = [0] * 8
    inner = np.ones(8, np.int64)
    count = np.ones(8, np.int64)
    rank = len(out_shape)
    for k, shape in enumerate(shapes):
        s = (1,) * (rank - len(shape)) + tuple(shape)
        if s == tuple(out_shape):
            continue  # mode 0: the output's shape
        if math.prod(s) == 1:
            modes[k] = 1
            continue
        axes = [i for i, d in enumerate(s) if d != 1]
        p, q = axes[0], axes[-1]
        if any(s[i] != out_shape[i] for i in range(p, q + 1)):
            return None
        inner[k], count[k] = math.prod(out_shape[q + 1:]), math.prod(s[p:q + 1])
        modes[k] = 2 if inner[k] > 1 else 3
    return tuple(modes), inner, count


def chain_inplace(chain: Any) -> Any | None:
    """The compiled in-place form (a C callable ``void(float *y, int64 count)``, native.
    chain_loops.compile_inplace) of a chain fused into its producer (op_fused.Chain), kept
    on the chain; None without compiled kernels (not kept: a later call may have them) or
    for a program the compiler does not take."""
    if chain.compiled is False:
        k = native.kernels("onnxrt.native.chain_loops")
        if k is None:
            return None
        program = chain_program(chain)
        chain.compiled = None if program is None else k.compile_inplace(program)
    return chain.compiled


def apply_chain(chain: Any, y: np.ndarray) -> np.ndarray:
    """A fused chain on a fresh float32 output ``y``, in place by its compiled form (split
    over the pool for large outputs), else by its reference (op_fused.Chain.apply)."""
    fn = chain_inplace(chain) if y.dtype == _F32 and y.flags.c_contiguous and y.flags.writeable else None
    if fn is None:
        return chain.apply(y)
    if y.size:
        call, base = fn.ctypes, y.ctypes.data
        native.split(y.size, lambda lo, hi: call(base + 4 * lo, hi - lo), CHAIN_PART)
    return y


def _chain_applies(op: Any, *xs: Any) -> bool:
    return 0 < len(xs) <= 8 and all(type(x) is _nd and x.dtype == _F32 for x in xs)


@fast_path("FusedElementwise", "compiled program", domain="onnxrt", when=_chain_applies, native=True, prepared=True)
def chain_compiled(op: Any, *xs: np.ndarray) -> Callable[..., tuple] | None:
    """A float32 chain in one pass by a loop native.chain_loops generates for its program
    (inputs of the output's shape, one element, or broadcast along one block of axes), split
    over the pool."""
    k = native.kernels("onnxrt.native.chain_loops")
    if k is None:
        return None
    program = getattr(op, "_chain_program", False)
    if program is False:
        program = op._chain_program = chain_program(op)
    if program is None:
        return None
    out_shape = np.broadcast_shapes(*[x.shape for x in xs])
    found = chain_modes([x.shape for x in xs], out_shape)
    if found is None:
        return None
    modes, inner, count = found
    kernel = k.compile_program(program, modes[:len(xs)])
    n = math.prod(out_shape)

    def execute(*xs: np.ndarray) -> tuple:
        flat = [np.ascontiguousarray(x).reshape(-1) for x in xs]
        y = np.empty(out_shape, _F32)
        yf = y.reshape(-1)
        if n:
            native.split(n, lambda lo, hi: kernel(*flat, yf, lo, hi, inner, count), CHAIN_PART)
        return (y,)

    return execute
