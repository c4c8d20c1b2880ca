"""Binary and variadic arithmetic and bitwise operators as tables, with multidirectional broadcasting (and opset < 7 ``broadcast``/``axis``)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ._family import Spec, build_family

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_BF16 = np.dtype(ml_dtypes.bfloat16)


def _check_no_zero(b: np.ndarray) -> None:
    # integer division by zero has no value (C traps, numpy silently returns 0): refuse it
    if not np.all(b):
        raise KernelError("integer division by zero: the divisor holds a 0.")


# The rows are the reference kernels (numpy's ufuncs with the spec's integer rules). Add,
# Sub, Mul and Div of float32 inputs where one is a row broadcast along the other's leading
# axes have a fast path (onnxrt/fastpaths/elementwise.py: a compiled loop, same IEEE results).


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Float division; integer division truncates toward zero (spec of Div 14, C semantics)."""
    if a.dtype.kind not in "iu":
        return np.divide(a, b)
    _check_no_zero(b)
    if a.dtype.kind == "u":
        return np.floor_divide(a, b)
    q, r = np.divmod(a, b)
    # floor and truncation differ by one when the division is inexact and the signs differ
    q += (r != 0) & ((a < 0) != (b < 0))
    return q


def _mod(a: np.ndarray, b: np.ndarray, fmod: int = 0, floats_floor: bool = True) -> np.ndarray:
    """fmod=0: A - floor(A/B)*B, the sign of B (Python's %); fmod=1: C fmod, the sign of A.

    numpy's ``remainder`` and ``fmod`` implement exactly these, including the special
    cases Mod 28 lists for floats (infinite or zero operands give NaN, an infinite B gives
    A or B by the signs). Before opset 28 the spec requires fmod=1 for float inputs.
    """
    if a.dtype.kind in "iu":
        _check_no_zero(b)
    elif not fmod and not floats_floor:
        raise KernelError(f"Mod before opset 28 requires fmod=1 for floating point inputs, got dtype {a.dtype}.")
    return np.fmod(a, b) if fmod else np.remainder(a, b)


def _mod_attributes(op, kw):
    fmod = kw.get("fmod", 0)
    if fmod not in (0, 1):
        raise InvalidAttributeError(f"{op.node_label()}: attribute 'fmod' is {fmod!r}, expected 0 or 1.")
    return {"fmod": fmod, "floats_floor": (op.since_version or 28) >= 28}


def _is_float(dt: np.dtype) -> bool:
    # bfloat16 has kind 'V' (ml_dtypes); the ml_dtypes integers never reach Pow
    return dt.kind == "f" or dt == _BF16


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """X ** Y with the type of X (T), whatever the exponent's type (T1, Pow 12+).

    Same-type float operands use numpy's power directly. Integer bases with
    non-negative integer exponents are exact (wrapping on overflow, as integer
    multiplication does). Everything else (negative integer exponents, mixed types) is
    computed in float64 and converted to T, truncating toward zero for integer T as
    onnxruntime does (``2 ** -1`` is 0).
    """
    xd, yd = x.dtype, y.dtype
    if xd == yd and _is_float(xd):
        return np.power(x, y)
    if xd.kind in "iu" and yd.kind in "iu":
        if yd.kind == "u":
            return np.power(x.astype(np.uint64), y.astype(np.uint64)).astype(xd)
        if not (y < 0).any():
            if xd == yd:
                return np.power(x, y)
            return np.power(x.astype(np.int64), y.astype(np.int64)).astype(xd)
    with np.errstate(all="ignore"):
        return np.power(x.astype(_F64), y.astype(_F64)).astype(xd)


def _bitshift(x: np.ndarray, y: np.ndarray, left: bool = True) -> np.ndarray:
    """Shift X by Y bits (BitShift 11 unsigned, 28 signed too).

    numpy's shifts already give what BitShift 28 asks for a shift count outside
    [0, bits): 0, or -1 for a right shift of a negative signed X; a right shift of a
    signed X is arithmetic (sign-extending).
    """
    return np.left_shift(x, y) if left else np.right_shift(x, y)


def _bitshift_attributes(op, kw):
    direction = kw.get("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute 'direction' is {direction!r}, expected 'LEFT' or 'RIGHT'."
        )
    return {"left": direction == "LEFT"}


BINARY = [
    Spec("Add", np.add, (1, 6, 7, 13, 14)),
    Spec("Sub", np.subtract, (1, 6, 7, 13, 14)),
    Spec("Mul", np.multiply, (1, 6, 7, 13, 14)),
    Spec("Div", _div, (1, 6, 7, 13, 14)),
    Spec("Pow", _pow, (1, 7, 12, 13, 15)),
    Spec("Mod", _mod, (10, 13, 28), with_attributes=True, prepare=_mod_attributes),
    Spec("BitShift", _bitshift, (11, 28), with_attributes=True, prepare=_bitshift_attributes),
    Spec("BitwiseAnd", np.bitwise_and, (18,)),
    Spec("BitwiseOr", np.bitwise_or, (18,)),
    Spec("BitwiseXor", np.bitwise_xor, (18,)),
]

build_family(BINARY, "binary", globals())


def _fold(ufunc: np.ufunc, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
    """Apply a binary ufunc across every input, accumulating into one fresh output buffer."""
    if len(inputs) == 1:
        return inputs[0]
    if len(inputs) == 2:
        return ufunc(inputs[0], inputs[1])
    out = np.empty(np.broadcast_shapes(*(x.shape for x in inputs)), dtype=inputs[0].dtype)
    ufunc(inputs[0], inputs[1], out=out)
    for x in inputs[2:]:
        ufunc(out, x, out=out)
    return out


def _max(*inputs: np.ndarray) -> np.ndarray:
    # the spec is silent on NaN: a NaN in any input gives NaN, as onnxruntime does
    return _fold(np.maximum, inputs)


def _min(*inputs: np.ndarray) -> np.ndarray:
    return _fold(np.minimum, inputs)


def _sum(*inputs: np.ndarray) -> np.ndarray:
    return _fold(np.add, inputs)


def _mean(*inputs: np.ndarray) -> np.ndarray:
    if len(inputs) == 1:
        return inputs[0]
    total = np.asarray(_fold(np.add, inputs))  # 0-d operands give a numpy scalar, which out= refuses
    return np.divide(total, total.dtype.type(len(inputs)), out=total)


VARIADIC = [
    Spec("Max", _max, (1, 6, 8, 12, 13)),
    Spec("Min", _min, (1, 6, 8, 12, 13)),
    Spec("Sum", _sum, (1, 6, 8, 13)),
    Spec("Mean", _mean, (1, 6, 8, 13)),
]

build_family(VARIADIC, "variadic", globals())
