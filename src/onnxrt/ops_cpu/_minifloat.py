"""Encoding into the 2/4-bit integers and the 8/6/4-bit floats by onnxrt's own arithmetic, viewed as ml_dtypes types."""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


class MiniFloat(NamedTuple):
    """A small binary float format; a code is sign bit | magnitude code, magnitudes increase with the code."""

    bits: int  # width of a code, sign included
    mant: int  # explicit mantissa bits
    emin: int  # exponent of the smallest normal value, 1 - bias
    max_code: int  # magnitude code of the largest finite value
    inf_code: int | None  # magnitude code of infinity, None where the format has none
    nan_code: int | None  # code of NaN with the sign bit clear, None where the format has none
    fnuz: bool  # no negative zero: the code of -0 is the one NaN

    @property
    def emax(self) -> int:
        """Exponent of the largest finite value."""
        return self.emin + (self.max_code >> self.mant) - 1

    @property
    def max_value(self) -> float:
        return float(2.0**self.emax * (1 + (self.max_code & ((1 << self.mant) - 1)) / (1 << self.mant)))


#: the float targets: E4M3FN has no infinity and NaN S.1111.111 (its largest value is S.1111.110 = 448);
#: E5M2 is IEEE-like (S.11111.00 infinity, S.11111.1x NaN); the FNUZ types use every code but 0x80,
#: their only NaN, and have a bias one larger; float4/float6 (OCP MX) have neither infinity nor NaN
FLOAT_FORMATS: dict[np.dtype, MiniFloat] = {
    np.dtype(ml_dtypes.float8_e4m3fn): MiniFloat(8, 3, -6, 0x7E, None, 0x7F, False),
    np.dtype(ml_dtypes.float8_e4m3fnuz): MiniFloat(8, 3, -7, 0x7F, None, 0x80, True),
    np.dtype(ml_dtypes.float8_e5m2): MiniFloat(8, 2, -14, 0x7B, 0x7C, 0x7E, False),
    np.dtype(ml_dtypes.float8_e5m2fnuz): MiniFloat(8, 2, -15, 0x7F, None, 0x80, True),
    np.dtype(ml_dtypes.float4_e2m1fn): MiniFloat(4, 1, 0, 0x7, None, None, False),
    np.dtype(ml_dtypes.float6_e2m3fn): MiniFloat(6, 3, 0, 0x1F, None, None, False),
    np.dtype(ml_dtypes.float6_e3m2fn): MiniFloat(6, 2, -2, 0x1F, None, None, False),
}

#: the sub-byte integer targets -> their width in bits
INT_FORMATS: dict[np.dtype, int] = {
    np.dtype(ml_dtypes.int4): 4,
    np.dtype(ml_dtypes.uint4): 4,
    np.dtype(ml_dtypes.int2): 2,
    np.dtype(ml_dtypes.uint2): 2,
}


def _as_float(x: np.ndarray) -> np.ndarray:
    """``x`` as float32 or float64 holding the same values: integers (and bool) go to float64, every
    other type (float16, bfloat16, the ml_dtypes floats and sub-byte integers) to float32, exactly.

    int64/uint64 beyond 2**53 round in float64, far beyond every format's range, so the encoding
    of such a value (overflow) does not change.
    """
    dt = x.dtype
    if dt == _F32 or dt == _F64:
        return x
    if dt.kind in "iub":
        return x.astype(_F64)
    return x.astype(_F32)


def encode_float(x: np.ndarray, dtype: np.dtype, saturate: bool = True, fnuz_inf_is_nan: bool = False) -> np.ndarray:
    """``x`` rounded to the float format ``dtype`` (a key of :data:`FLOAT_FORMATS`), to nearest, ties to even.

    Out of range ("[x] > FLT_MAX": the value rounded to the target precision, so values below the
    rounding boundary above the largest value round to it) and infinities give, with ``saturate``,
    +-largest value; without it NaN (E4M3FN, keeping the sign as the spec's -Inf -> -NaN;
    FNUZ types), +-infinity (E5M2). Float4/float6 have neither: they always saturate. NaN stays NaN
    (its sign kept on E4M3FN/E5M2); on float4/float6 it becomes -0, the value onnxrt gave so far and
    the ONNX conformance data accepts (the float4 note of the ONNX documentation says 6 instead).
    FNUZ types have no -0: negative values rounding to zero give +0. ``fnuz_inf_is_nan``: Cast
    before 23 mapped +-inf to NaN on the FNUZ types whatever ``saturate``.
    """
    fmt = FLOAT_FORMATS[np.dtype(dtype)]
    shape = x.shape
    v = _as_float(np.asarray(x)).reshape(-1)
    m = fmt.mant
    # any magnitude at or beyond 2**(emax+2) overflows: +-inf become such a finite value, so that
    # they follow the overflow rule; np.minimum keeps NaN
    a = np.abs(v)
    np.minimum(a, 2.0 ** (fmt.emax + 2), out=a)
    with np.errstate(invalid="ignore", over="ignore"):
        # frexp gives a = f * 2**e with f in [0.5, 1): E = e - 1 = floor(log2 a), raised to emin
        # for the target's subnormals (and zero) by the floor on a
        _, k = np.frexp(np.maximum(a, 2.0**fmt.emin))
        # the spacing of the target's values in [2**E, 2**(E+1)) is 2**(E - m): n = a / 2**(E - m)
        # = ldexp(a, k) with k = m + 1 - e is exact (a power-of-two scaling, no underflow since
        # E - m < 0 whenever E = emin), and np.rint rounds it half to even; n = 2**(m+1) (carry)
        # lands on the first code of the next binade
        np.subtract(m + 1, k, out=k)
        n = np.ldexp(a, k, out=a)
        np.rint(n, out=n)
        code = n.astype(np.int32)  # NaN gives a meaningless value, replaced below
    # magnitude code = (E - emin) * 2**m + n: subnormals (E = emin, n < 2**m) are n itself; a normal
    # value's exponent field E - emin + 1 and mantissa n - 2**m add up to the same; E - emin = m - emin - k
    np.subtract(m - fmt.emin, k, out=k)
    np.left_shift(k, m, out=k)
    code += k
    if saturate or fmt.inf_code is None and fmt.nan_code is None:
        np.minimum(code, fmt.max_code, out=code)
    else:
        over = fmt.inf_code if fmt.inf_code is not None else fmt.nan_code
        code = np.where(code > fmt.max_code, over, code)
    out = code.astype(np.uint8)
    sign = np.signbit(v)
    if fmt.fnuz:
        sign &= out != 0  # no -0; the overflow NaN 0x80 keeps its code either way
        if fnuz_inf_is_nan:
            out[np.isinf(v)] = fmt.nan_code
    out |= sign.view(np.uint8) << (fmt.bits - 1)
    nan = np.isnan(v)
    if nan.any():
        if fmt.nan_code is None:
            out[nan] = 1 << (fmt.bits - 1)  # -0
        elif fmt.fnuz:
            out[nan] = fmt.nan_code
        else:
            out[nan] = fmt.nan_code | (sign[nan].view(np.uint8) << (fmt.bits - 1))
    return out.view(np.dtype(dtype)).reshape(shape)


def encode_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` converted to the 2/4-bit integer ``dtype`` (a key of :data:`INT_FORMATS`) by keeping its low bits.

    Integer sources: the spec's "discard higher bits and reinterpret" (two's complement for the
    signed types; 9 -> -7 in int4, -1 -> 15 in uint4). Float sources: truncation toward zero,
    then the same wrap of the exact integer (onnxrt's rule for every float -> integer cast,
    300.0 -> 44 in int8): out of range is undefined in the spec. NaN and +-inf, undefined too,
    give 0; finite floats too large for int64 are multiples of 2**bits and also give 0.
    """
    bits = INT_FORMATS[np.dtype(dtype)]
    shape = x.shape
    x = np.asarray(x).reshape(-1)
    dt = x.dtype
    if dt in INT_FORMATS:
        x = x.astype(np.int8)
        dt = x.dtype
    if dt.kind in "iub":
        low = x.astype(np.uint8)  # integer -> uint8 keeps the low 8 bits (modulo 2**8)
    else:
        v = _as_float(x)
        with np.errstate(invalid="ignore"):
            # C conversion truncates toward zero; beyond 2**62 (infinities included) every float
            # is a multiple of 2**bits (float64 carries 53 bits), as is 2**62: the clamp keeps the
            # low bits 0 and the int64 conversion defined; NaN converts to an unspecified value
            low = np.clip(v, -(2.0**62), 2.0**62).astype(np.int64).astype(np.uint8)
        nan = np.isnan(v)
        if nan.any():
            low[nan] = 0
    low &= (1 << bits) - 1
    return low.view(np.dtype(dtype)).reshape(shape)
