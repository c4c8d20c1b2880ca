"""Cast (1 to 28) and CastLike (15 to 25): every pair of element types, with ``saturate`` and ``round_mode``."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from onnx import TensorProto

from ..dtypes import EXOTIC_DTYPES, elem_from_name, elem_name, np_dtype
from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._minifloat import FLOAT_FORMATS, INT_FORMATS, encode_float, encode_int
from ._op import OpRun

_OBJECT = np.dtype(object)
_BOOL = np.dtype(bool)
_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
_SUB_BYTE_INTS = frozenset(INT_FORMATS)
#: every ml_dtypes type (their dtype.kind is 'V', except float8_e5m2 whose kind is 'f')
_ML_DTYPES = EXOTIC_DTYPES | frozenset(np.dtype(t) for t in (ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn))
_MASK64 = (1 << 64) - 1
ROUND_MODES = ("up", "down", "nearest")
_strings = getattr(np, "strings", np.char)  # numpy >= 2 names it np.strings


def is_float_dtype(dt: np.dtype) -> bool:
    """float16/32/64 and the ml_dtypes floats (bfloat16, float8, float6, float4)."""
    return dt.kind == "f" or (dt in _ML_DTYPES and dt not in _SUB_BYTE_INTS)


def is_int_dtype(dt: np.dtype) -> bool:
    """Every integer type, the 4-bit and 2-bit ones included (bool excluded)."""
    return dt.kind in "iu" or dt in _SUB_BYTE_INTS


# -- numbers to strings and back ----------------------------------------------------------


def to_string(x: np.ndarray) -> np.ndarray:
    """Object array of str: integers in decimal, bool as '1'/'0' (as onnxruntime), floats with 8 significant digits.

    The spec asks for a "plain floating-point representation"; onnxrt prints like
    onnxruntime does: ``%.8g`` for every float type ('0.1', '3.1415927', '1e+20'),
    'NaN', 'INF' and '-INF' for the special values.
    """
    dt = x.dtype
    if dt.kind in "OUS":
        return x.astype(_OBJECT)
    if dt == _BOOL:
        return x.astype(np.uint8).astype(str).astype(_OBJECT)
    if is_int_dtype(dt):
        if dt in _SUB_BYTE_INTS:
            x = x.astype(np.int8)
        return x.astype(str).astype(_OBJECT)
    v = x.astype(_F64)  # exact for every float type onnxrt knows
    out = _strings.mod("%.8g", v).astype(_OBJECT)
    out[np.isnan(v)] = "NaN"
    out[v == np.inf] = "INF"
    out[v == -np.inf] = "-INF"
    return out


def _parse_float(s: str | bytes) -> float:
    """A float from a decimal, scientific or hexadecimal literal; 'INF', '+INF', '-INF' and 'NaN' in any case."""
    text = (s.decode("utf-8", errors="replace") if isinstance(s, bytes) else str(s)).strip()
    try:
        return float(text)  # accepts 'inf', '+INF', 'nan', '-NaN' case-insensitively, like strtod
    except ValueError:
        pass
    try:
        return float.fromhex(text)  # '0x1p4', which strtod also reads
    except ValueError:
        raise KernelError(f"cannot convert the string {s!r} to a number.") from None


def _parse_int(s: str | bytes) -> int:
    """An integer, kept modulo 2**64 (wider values wrap like the integer casts do).

    Strings holding a float ('100.5') give its truncation toward zero; the spec calls
    that case undefined and gives 100 for '100.5' as an example.
    """
    text = (s.decode("utf-8", errors="replace") if isinstance(s, bytes) else str(s)).strip()
    try:
        return int(text, 10) & _MASK64
    except ValueError:
        pass
    f = _parse_float(s)
    if not math.isfinite(f):
        raise KernelError(f"cannot convert the string {s!r} to an integer.")
    return int(f) & _MASK64


_parse_float_each = np.frompyfunc(_parse_float, 1, 1)
_parse_int_each = np.frompyfunc(_parse_int, 1, 1)


def _strings_to(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    """Numbers parsed from strings, as float64 (float and bool targets) or integers (integer targets)."""
    if is_int_dtype(dst):
        wide = np.dtype(np.uint64) if dst == np.dtype(np.uint64) else np.dtype(np.int64)
        try:
            return x.astype(wide)  # plain integer literals, exact up to 64 bits
        except (ValueError, TypeError, OverflowError):
            return _parse_int_each(x).astype(np.uint64)
    try:
        return x.astype(_F64)  # decimal and scientific literals, INF/NaN spellings
    except (ValueError, TypeError):
        return _parse_float_each(x).astype(_F64)


# -- float8e8m0 ---------------------------------------------------------------------------------


def to_float8e8m0(x: np.ndarray, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """Round positive values to a power of two 2**k, k in [-127, 127] (float8e8m0, NaN = 0xFF).

    ``round_mode``: ``up`` takes the power of two at or above the value, ``down`` the one
    at or below, ``nearest`` the closer one (ties, 1.5 * 2**k, round up). Out of range,
    ``saturate`` clamps to E8M0_MAX/E8M0_MIN, else gives NaN; ``up`` always reaches
    E8M0_MIN from below. The spec leaves -0 and negative values unspecified: -0 is handled
    like 0 (E8M0_MIN when saturating or rounding up, NaN otherwise), negative values give NaN.
    Infinity saturates to E8M0_MAX, NaN stays NaN.
    """
    if round_mode not in ROUND_MODES:
        raise KernelError(f"round_mode must be one of {list(ROUND_MODES)}, got {round_mode!r}.")
    v = x.astype(_F64)
    mant, exp = np.frexp(v)  # v = mant * 2**exp, 0.5 <= |mant| < 1
    k = exp.astype(np.int64) - 1  # floor(log2(v)) for finite positive v
    frac = np.abs(mant) * 2.0  # v / 2**k, in [1, 2)
    if round_mode == "up":
        k += frac > 1.0
    elif round_mode == "nearest":
        k += frac >= 1.5
    bits = k + 127
    over = 254 if saturate else 255
    under = 0 if (saturate or round_mode == "up") else 255
    bits = np.where(bits > 254, over, bits)
    bits = np.where((bits < 0) | (v == 0), under, bits)
    bits = np.where(np.isposinf(v), over, bits)
    bits = np.where(np.isnan(v) | (v < 0), 255, bits)
    return bits.astype(np.uint8).view(_E8M0)


# -- the cast ---------------------------------------------------------------------------------


def cast(
    x: np.ndarray,
    dtype: np.dtype | type,
    saturate: bool = True,
    round_mode: str = "up",
    fnuz_inf_is_nan: bool = False,
) -> np.ndarray:
    """Convert ``x`` to ``dtype`` (``object`` for strings) with the rules of the Cast spec.

    - float to float: round to nearest even, +-inf out of range; the float 8 targets follow
      the spec's two tables (``saturate``), float4e2m1 and float6 have no infinity: out-of-range
      values and infinities clamp to the largest value, NaN becomes -0 (onnxrt's own encoding,
      :func:`._minifloat.encode_float`, whatever ml_dtypes' conversion does); float8e8m0 follows
      ``round_mode`` (:func:`to_float8e8m0`).
    - float to integer: truncation toward zero; out-of-range values are undefined by the
      spec, onnxrt wraps them like onnxruntime (300.0 -> 44 in int8); 4-bit and 2-bit targets
      wrap the same way, NaN and +-inf give 0 there (:func:`._minifloat.encode_int`).
    - integer to integer: the low bits, reinterpreted (200 int16 -> -56 int8); 4-bit and
      2-bit targets wrap the same way.
    - to bool: zero (and -0.0) is False, everything else (NaN included) is True.
    - strings: see :func:`to_string` and the string parsers (integers up to 64 bits exact,
      floats through float64).
    """
    dst = np.dtype(dtype)
    if dst.kind in "OUS":
        return to_string(x)
    src = x.dtype
    if src.kind in "OUS":
        x = _strings_to(x, dst)
        src = x.dtype
    if src == dst:
        return x
    # (float32 <-> float16 of large inputs by integer arithmetic on the bits, the same bits
    # faster: fast paths, onnxrt.fastpaths.cast)
    if dst == _E8M0:
        return to_float8e8m0(x, saturate, round_mode)
    if dst == _BOOL:
        return x != 0 if src in _ML_DTYPES else x.astype(_BOOL)
    # into the float 8/6/4 and 2/4-bit integer types by onnxrt's own rules, never by ml_dtypes'
    # conversions (out-of-range float -> int4 became 0 in ml_dtypes 0.7, it wrapped before)
    if dst in FLOAT_FORMATS:
        return encode_float(x, dst, saturate, fnuz_inf_is_nan)
    if dst in INT_FORMATS:
        return encode_int(x, dst)
    if src == _BOOL:
        x = x.astype(np.uint8)  # bool -> bfloat16 (and the other types) goes through uint8
    # float -> int: NaN/inf/out-of-range are undefined: silence numpy's warning, keep its C conversion
    with np.errstate(invalid="ignore", over="ignore"):
        if src in _ML_DTYPES and dst in _ML_DTYPES:
            # ml_dtypes lacks some direct pairs (int2 -> uint4, float6 -> int4): go through
            # float32 (exact for every ml_dtypes float) or int64 (exact for their integers)
            x = x.astype(_F32 if is_float_dtype(src) else np.int64)
        return x.astype(dst)


def _allowed_targets(op: OpRun, param: str) -> frozenset[int]:
    schema = op._schema
    if schema is None:
        return frozenset()
    for tc in schema.type_constraints:
        if tc.type_param_str == param:
            return frozenset(elem_from_name(s[len("tensor("):-1]) for s in tc.allowed_type_strs)
    return frozenset()


def _cast_options(op: OpRun) -> tuple[bool, str, bool]:
    """(saturate, round_mode, fnuz_inf_is_nan) of a Cast or CastLike node, validated."""
    saturate = getattr(op, "saturate", 1)
    saturate = 1 if saturate is None else saturate
    if saturate not in (0, 1):
        raise InvalidAttributeError(f"{op.node_label()}: attribute 'saturate' is {saturate!r}, expected 0 or 1.")
    round_mode = getattr(op, "round_mode", None) or "up"
    if round_mode not in ROUND_MODES:
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute 'round_mode' is {round_mode!r}, expected one of {list(ROUND_MODES)!r}."
        )
    return bool(saturate), round_mode, (op.since_version or 25) < 23


@register("Cast", versions=(1, 6, 9, 13, 19, 21, 23, 24, 25, 28))
class Cast(OpRun):
    """Cast: 1 ('to' is a type name string), 6 ('to' an integer), 9 (strings), 13 (bfloat16),
    19 (float 8 types, saturate), 21 (int4/uint4), 23 (float4e2m1; infinities saturate for the
    FNUZ types too), 24 (float8e8m0, round_mode), 25 (int2/uint2), 28 (float6)."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        to = self.to
        if isinstance(to, str | bytes):  # Cast 1 names the type: 'FLOAT', 'INT64'...
            name = to.decode() if isinstance(to, bytes) else to
            if name.upper() not in TensorProto.DataType.keys():
                raise InvalidAttributeError(f"{self.node_label()}: attribute 'to' is {name!r}, which is no ONNX type name.")
            to = TensorProto.DataType.Value(name.upper())
        allowed = _allowed_targets(self, "T2")
        if allowed and to not in allowed:
            names = sorted(elem_name(t) for t in allowed)
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'to' is {to!r} ({elem_name(to)}), which Cast "
                f"{self.since_version} does not allow; expected one of {names!r}."
            )
        try:
            self._dtype = np_dtype(to)
        except KeyError:
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'to' is {to!r}, an unknown element type.") from None
        self._saturate, self._round_mode, self._fnuz_nan = _cast_options(self)

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (np.asarray(cast(x, self._dtype, self._saturate, self._round_mode, self._fnuz_nan)),)


@register("CastLike", versions=(15, 19, 21, 23, 24, 25))
class CastLike(OpRun):
    """CastLike: the first input cast to the element type of the second (same rules as Cast);
    19 (float 8, saturate), 21 (int4/uint4), 23 (float4e2m1), 24 (float8e8m0, round_mode), 25 (int2/uint2)."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._saturate, self._round_mode, self._fnuz_nan = _cast_options(self)

    def _run(self, x, target_type, attributes=None, verbose=0, fLOG=None):
        return (np.asarray(cast(x, target_type.dtype, self._saturate, self._round_mode, self._fnuz_nan)),)
