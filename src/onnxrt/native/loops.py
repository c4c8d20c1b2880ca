"""Numba-compiled float32 loops behind _fastmath's kernels and Softmax: one fused pass per element."""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.extending import intrinsic

from ..fastpaths import _fastmath as fm
from .layout import LAYOUTS

# Why these loops are written as they are
# ---------------------------------------
# numba compiles each function for the host CPU and LLVM vectorises a loop over
# contiguous float32 arrays (8 lanes with AVX2) when its body has no call it cannot inline
# and no branch it cannot turn into a select: every helper below is inlined, both sides of
# every branch are computed and selected (``a if c else b``), and error_model="numpy"
# drops the division-by-zero check that would otherwise stop vectorisation. fastmath is
# off (no reassociation: the Cody-Waite reduction and the rounding constant below rely on
# each float32 operation being rounded as written), except in the running sums of
# Softmax (``_sum_step``: that one addition may be reassociated), whose order does not
# matter within float32 rounding. A loop with a reduction in it (a sum, or a maximum of
# integer bits) is also interleaved two vectors per iteration by LLVM, which hides the
# latency of the polynomial chains: sigmoid's search for its subnormal cases pays for itself.
# The polynomials are _fastmath's (scripts/fit_fastmath.py), so both paths approximate
# the same functions with the same accuracy bounds (tests/ops/test_fastmath.py runs both).
# cache=True keeps the machine code in __pycache__ (or numba's user cache directory) so a
# process pays the compilation (about a second per kernel) once per installation.

_OPTS = {"nogil": True, "cache": True, "error_model": "numpy", "fastmath": {"contract"}}
_INLINE = {"nogil": True, "error_model": "numpy", "inline": "always", "fastmath": {"contract"}}
_f32 = np.float32
_ONE = _f32(1.0)
_ZERO = _f32(0.0)
_INF = _f32(np.inf)


def _reinterpret(accepts, result, emit):
    """A numba intrinsic ``f(value) -> result`` for argument types ``accepts(type)`` allows,
    whose machine code ``emit(builder, llvm_value, numba_type)`` builds (a bit cast or a
    hardware float conversion: what numba has no scalar function for)."""

    @intrinsic
    def reinterpret(typingctx, value):
        if not accepts(value):
            return None

        def codegen(context, builder, signature, args):
            return emit(builder, args[0], value)

        return result(value), codegen

    return reinterpret


def _low_32_bits(builder, value, numba_type):
    # numba widens int32 arithmetic to 64 bits: the truncation undoes it
    return value if numba_type.bitwidth == 32 else builder.trunc(value, ir.IntType(32))


#: the float32 whose bit pattern is the low 32 bits of an integer (no conversion)
_bits_to_f32 = _reinterpret(
    lambda t: isinstance(t, types.Integer), types.float32,
    lambda b, v, t: b.bitcast(_low_32_bits(b, v, t), ir.FloatType()),
)
#: the bit pattern of a float32 as a uint32
_f32_to_bits = _reinterpret(lambda t: t == types.float32, types.uint32, lambda b, v, t: b.bitcast(v, ir.IntType(32)))
#: the float16 nearest a float32 (ties to even; F16C's vcvtps2ph where the CPU has it), as uint16 bits
_f32_to_f16_bits = _reinterpret(
    lambda t: t == types.float32, types.uint16, lambda b, v, t: b.bitcast(b.fptrunc(v, ir.HalfType()), ir.IntType(16)),
)
#: the float32 value of the float16 with the given uint16 bits (exact; F16C's vcvtph2ps)
_f16_bits_to_f32 = _reinterpret(
    lambda t: t == types.uint16, types.float32, lambda b, v, t: b.fpext(b.bitcast(v, ir.HalfType()), ir.FloatType()),
)


@intrinsic
def _sum_step(typingctx, acc, value):
    """``acc + value`` as an fadd that LLVM may reassociate (and only that one): a running
    sum inside a loop vectorises (8 partial sums, interleaved) while every other operation
    of the loop keeps its written rounding, which a function-wide fastmath would give up."""
    if acc != types.float32 or value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.fadd(args[0], args[1], flags=("reassoc", "nsz"))

    return types.float32(types.float32, types.float32), codegen


@intrinsic
def _max_step(typingctx, acc, value):
    """``value if value > acc else acc`` as a compare and select that LLVM may treat as free
    of NaN (and only those two): a running maximum vectorises (maxps, 4 partial maxima)
    where numba's own ``max`` stays scalar. With a NaN among the values the result may or
    may not be NaN: callers must not depend on which."""
    if acc != types.float32 or value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        greater = builder.fcmp_ordered(">", args[1], args[0], flags=("nnan", "nsz"))
        return builder.select(greater, args[1], args[0], flags=("nnan", "nsz"))

    return types.float32(types.float32, types.float32), codegen


@njit(**_INLINE)
def _horner(coefs, t):
    acc = coefs[-1]
    for k in range(len(coefs) - 2, -1, -1):
        acc = acc * t + coefs[k]
    return acc


@njit(**_INLINE)
def _clip(x, lo, hi):
    # x86's maxps/minps exactly (one instruction each), in the operand order that returns
    # x when it is NaN: NaN flows through the arithmetic after it at no cost
    c = lo if lo > x else x
    return hi if hi < c else c


#: the bits of _fastmath's rounding constant: bits(c log2e + rounder) minus these is rint(c log2e)
_ROUNDER_BITS = np.int32(fm._ROUNDER.view(np.int32))


@njit(**_INLINE)
def _exp(x):
    """exp of a float32 (about 1 ulp): x = k ln2 + r, exp(r) = 1 + r (1 + r Q(r)) by _fastmath's
    EXP polynomial, times 2**k applied as two normal powers of two (k's halves), so results
    down to the subnormals round once and large x gives inf. NaN stays NaN."""
    return _exp_of_clipped(_clip(x, _f32(-104.0), _f32(89.0)))


@njit(**_INLINE)
def _exp_of_clipped(c):
    # _exp for -104 <= c <= 89 (or NaN): the callers clip where they need to
    t = c * fm._LOG2E + fm._ROUNDER  # the rounder leaves rint(c log2e) in t's low mantissa bits
    k = t - fm._ROUNDER
    r = (c - k * fm._LN2_HI) - k * fm._LN2_LO  # exact first step: k ln2_hi is exact
    p = (_horner(fm.EXP, r) * r + _ONE) * r
    # the integer k from t's bits (a float -> int conversion would not vectorise on AVX2)
    ki = np.int32(_f32_to_bits(t)) - _ROUNDER_BITS
    k1 = ki >> 1
    k2 = ki - k1
    # NaN went through the clip and every step above: y is NaN
    return (_ONE + p) * _bits_to_f32((k1 + 127) << 23) * _bits_to_f32((k2 + 127) << 23)


#: exp(x) is a normal float32 from here up
_EXP_NORMAL_LOW = _f32(-87.33)
#: _exp_normal of this or less is 0 (rint(x log2e) = -127: the power of two's bits are 0);
#: Softmax's exp clips there to flush the tiny results without a select
_EXP_FLUSH = _f32(-88.0)


@njit(**_INLINE)
def _exp_normal(c):
    """exp(c) for -87.33 <= c <= 88.7 (normal results, about 1 ulp; NaN stays NaN): _exp
    with one power of two and no clipping, 4 instructions fewer per vector."""
    t = c * fm._LOG2E + fm._ROUNDER
    k = t - fm._ROUNDER
    r = (c - k * fm._LN2_HI) - k * fm._LN2_LO
    p = (_horner(fm.EXP, r) * r + _ONE) * r
    # k << 23 from t's bits (the rounder's own bits shift out of the 32), plus 1.0's exponent
    return (_ONE + p) * _bits_to_f32((_f32_to_bits(t) << np.uint32(23)) + np.uint32(0x3F800000))


#: sigmoid's argument is clipped to [SIGMOID_LOW, SIGMOID_HIGH]: exp(88) is finite and
#: e / (1 + e) rounds to 1.0 from x = 17.3 on, so the top needs no overflow case; below
#: -87.33 exp(x) is subnormal (sigmoid_exact), below -104 sigmoid rounds to 0
_SIGMOID_HIGH = _f32(88.0)
_SIGMOID_LOW = _f32(-104.0)
#: the bits of _EXP_NORMAL_LOW: a float32 whose bits (as uint32) exceed these is below it (or a negative NaN)
_EXP_NORMAL_LOW_BITS = np.uint32(_EXP_NORMAL_LOW.view(np.uint32))


@njit(**_OPTS)
def sigmoid(x, y):
    """e / (1 + e) with e = exp(x) = p 2**k written p / (p + 2**-k): no multiplication by
    the power of two and no lower clip, exact for x >= -87.33 (2**-k is normal down there).
    Returns True when some x is below (or a negative NaN): then the caller runs
    sigmoid_exact over the same arrays (x must not be y), as this loop's values are garbage
    there. The reduction that finds them also makes LLVM interleave two vectors per
    iteration; with the degree-6 exp, 20-25% faster than e / (1 + e) (0.52 -> 0.41 ns an
    element on one core) at the same accuracy (within 2 ulp of float64, as before)."""
    low = np.uint32(0)
    for i in range(x.size):
        v = x[i]
        c = _SIGMOID_HIGH if _SIGMOID_HIGH < v else v  # NaN stays NaN
        t = c * fm._LOG2E + fm._ROUNDER
        k = t - fm._ROUNDER
        r = (c - k * fm._LN2_HI) - k * fm._LN2_LO
        p = _ONE + (_horner(fm.EXP, r) * r + _ONE) * r
        # 2**-k = (127 - k) << 23: t's bits shifted by 23 are k << 23 (the rounder's shift out)
        s = _bits_to_f32(np.uint32(0x3F800000) - (_f32_to_bits(t) << np.uint32(23)))
        y[i] = p / (p + s)
        low = max(low, _f32_to_bits(v))  # negative floats have the sign bit: the largest bits are the lowest x
    return low > _EXP_NORMAL_LOW_BITS


@njit(**_OPTS)
def sigmoid_exact(x, y):
    # e / (1 + e) with e = exp(x) as fm.sigmoid, down to the subnormals (y may be x)
    for i in range(x.size):
        e = _exp_of_clipped(_clip(x[i], _SIGMOID_LOW, _SIGMOID_HIGH))
        y[i] = e / (_ONE + e)


@njit(**_INLINE)
def _exp2_erfc(y):
    """2**y for -27 <= y <= -2.6 (or NaN, giving some NaN or garbage the caller drops):
    y = k + f exactly (the rounder gives k, |f| <= 1/2), 2**f = 1 + f E(f) with E of degree
    4, and k added to the exponent's bits. Within about 0.6 ulp relative, which is enough
    for erf's large branch (erfc <= 0.16 scales it by 0.19); the base-2 polynomial saves
    exp's three-step reduction: erf 1.09 -> 0.95 ns an element on one core."""
    t = y + fm._ROUNDER
    f = y - (t - fm._ROUNDER)
    p = _ONE + _horner(fm.EXP2, f) * f
    return _bits_to_f32(_f32_to_bits(p) + (_f32_to_bits(t) << np.uint32(23)))


#: the sign bit of a float32
_SIGN_BIT = np.uint32(0x80000000)


@njit(**_OPTS)
def erf(x, y):
    # |x| <= 1: x + x Q(x^2); above: 1 - exp(P(|x| - 1)) clipped at 3.925 (rounds to 1), signed.
    # NaN flows through without a select of its own: s keeps it (the comparison's operand
    # order), the large branch is taken only where |x| > 1 (false for NaN), and x's sign
    # bit is or-ed in (4-5% faster than copysign and a NaN select, same bits)
    for i in range(x.size):
        v = x[i]
        a = abs(v)
        s = fm.ERF_SPLIT if fm.ERF_SPLIT < a else a
        small = s + s * _horner(fm.ERF_SMALL, s * s)
        t = _clip(a, fm.ERF_SPLIT, fm.ERF_CLIP) - fm.ERF_SPLIT
        large = _ONE - _exp2_erfc(_horner(fm.ERF_LARGE2, t))  # P2(t) is in [-27, -2.6]
        r = large if a > fm.ERF_SPLIT else small
        y[i] = _bits_to_f32(_f32_to_bits(r) | (_f32_to_bits(v) & _SIGN_BIT))


@njit(**_OPTS)
def gelu(x, y):
    """Gelu as fm.gelu; returns whether some |x| exceeds GELU_CLIP (the caller recomputes those)."""
    top = np.uint32(0)  # the largest |x| as bits: an integer reduction vectorises, a float one would not
    for i in range(x.size):
        v = x[i]
        a = abs(v)
        s = _clip(v, -fm.GELU_SPLIT, fm.GELU_SPLIT)
        small = (_horner(fm.GELU_SMALL, s * s) * s + _f32(0.5)) * s
        t = _clip(a, fm.GELU_SPLIT, fm.GELU_CLIP) - fm.GELU_SPLIT
        large = max(v, _ZERO) - _exp(_horner(fm.GELU_LARGE, t)) * a
        r = small if a <= fm.GELU_SPLIT else large
        y[i] = r if v == v else v
        top = max(top, _f32_to_bits(a))
    return top > _CLIP_BITS


_CLIP_BITS = np.uint32(fm.GELU_CLIP.view(np.uint32))


@njit(**_INLINE)
def _expm1_neg(v):
    # expm1(min(v, 0)) as fm._expm1_neg_into: 2**k expm1(r) - (1 - 2**k)
    c = _clip(v, fm._EXPM1_LOW, _ZERO)
    k = (c * fm._LOG2E + fm._ROUNDER) - fm._ROUNDER
    r = (c - k * fm._LN2_HI) - k * fm._LN2_LO
    p = (_horner(fm.EXPM1, r) * r + _ONE) * r
    s = _bits_to_f32((np.int32(k) + np.int32(127)) << np.int32(23))
    return p * s - (_ONE - s)


@njit(**_OPTS)
def elu(x, y, alpha, gamma, scale):
    # alpha expm1(min(x / scale, 0)) + gamma max(x, 0): Elu (gamma = scale = 1), Selu, Celu
    # (1 multiplies and divides exactly); +-0 gives gamma * +-0, NaN stays NaN
    for i in range(x.size):
        v = x[i]
        r = alpha * _expm1_neg(v / scale) + gamma * max(v, _ZERO)
        y[i] = r if v != _ZERO else gamma * v
        if v != v:
            y[i] = v


@njit(**_OPTS)
def softplus(x, y):
    # max(x, 0) + log1p(exp(-|x|)), log1p(t) = t - w (t - w^2 S(w^2)), w = t / (2 + t)
    for i in range(x.size):
        v = x[i]
        t = _exp(-abs(v))
        w = t / (_f32(2.0) + t)
        w2 = w * w
        r = max(v, _ZERO) + (t - (t - _horner(fm.LOG1P, w2) * w2) * w)
        y[i] = r if v == v else v


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def f32_to_f16(x, h):
    # the hardware conversion (round to nearest even, inf from 65520 on, subnormals), alone
    # in the loop so that it stays one vcvtps2ph per 8 values; the reassociated sum of
    # v - v (NaN from an inf or a NaN) only decides whether a second pass gives NaNs
    # numpy's bits: sign, 0x7C00 and the top 10 payload bits (at least 1), where the
    # hardware would also set the quiet bit
    found = _ZERO
    for i in range(x.size):
        v = x[i]
        h[i] = _f32_to_f16_bits(v)
        found += v - v
    if found != found:
        for i in range(x.size):
            v = x[i]
            if v != v:
                u = _f32_to_bits(v)
                h[i] = np.uint16(((u >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7C00) | max((u & np.uint32(0x007FFFFF)) >> np.uint32(13), np.uint32(1)))


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def f16_to_f32(h, y):
    # h: float16 bits as uint16, y: float32 bits as uint32. Exact (vcvtph2ps); as in
    # f32_to_f16 the reassociated sum of v - v only decides whether a second pass keeps
    # NaN payloads as they are (numpy does not set the quiet bit, the hardware would)
    found = _ZERO
    for i in range(h.size):
        v = _f16_bits_to_f32(h[i])
        y[i] = _f32_to_bits(v)
        found += v - v
    if found != found:
        for i in range(h.size):
            b = h[i]
            if (b & np.uint16(0x7C00)) == np.uint16(0x7C00):
                y[i] = ((np.uint32(b) & np.uint32(0x8000)) << np.uint32(16)) | np.uint32(0x7F800000) | ((np.uint32(b) & np.uint32(0x03FF)) << np.uint32(13))


@njit(**_INLINE)
def _exp_nonpositive(x):
    """exp(x) for finite x <= 0 or -inf (about 1 ulp), 0 below about -87.68: Softmax's exp,
    one power of two and no NaN or overflow cases (onnxruntime flushes too). Clipped at -88,
    where rint(x log2e) = -127 makes the power of two's bits 0: the flush costs no select
    (6-13% of the Softmax loop), and x in [-87.68, -87.33] gives its subnormal exactly."""
    return _exp_normal(x if x > _EXP_FLUSH else _EXP_FLUSH)


@njit(**_OPTS)
def row_maxima(x, maxima):
    """maxima[r] = the maximum of row r of the 2-D float32 array x, NaN when the row holds
    one (numpy's max): a vectorised maximum and an or of NaN tests in one pass."""
    for r in range(x.shape[0]):
        row = x[r]
        m = -_INF
        nan = False
        for i in range(row.size):
            v = row[i]
            m = _max_step(m, v)
            nan |= v != v
        maxima[r] = _f32(np.nan) if nan else m


@njit(**_OPTS)
def softmax_rows(x, maxima, y, log):
    """Softmax (or LogSoftmax when ``log``) of each row of the 2-D float32 array ``x`` into
    ``y``, given each row's maximum (numpy's max reduction vectorises, a float max loop
    here would not). A row whose maximum is not finite (a NaN, +inf, or only -inf in it)
    is NaN throughout, as exp(x - max) / sum gives; exp(x - max) below about 8.6e-39 is 0.
    The division is a multiplication by the reciprocal of the sum (one more rounding, as
    onnxruntime does)."""
    for row in range(x.shape[0]):
        src = x[row]
        dst = y[row]
        m = maxima[row]
        if not (m - m == _ZERO):  # NaN or an infinite maximum
            for i in range(src.size):
                dst[i] = np.nan
            continue
        s = _ZERO
        for i in range(src.size):
            e = _exp_nonpositive(src[i] - m)
            dst[i] = e
            s = _sum_step(s, e)
        if log:
            ls = _f32(math.log(s))
            for i in range(src.size):
                dst[i] = (src[i] - m) - ls
        else:
            inv = _ONE / s
            for i in range(src.size):
                dst[i] = dst[i] * inv


# -- 2-D depthwise convolution and pooling ------------------------------------------------------
# Each plane is copied into a padded scratch plane of row pitch PW (zeros for the
# convolution and the average, -inf for the maximum; the border is filled once per call),
# so every kernel tap covers the whole output: output pixel (oh, t) reads
# flat[(oh sh + i dh) PW + t sw + j dw] for tap (i, j). With unit strides, q = oh PW + t
# makes each tap one loop over the whole plane (the columns t >= OW of each pitch are
# computed and dropped); other strides loop per output row. The loops index flat arrays
# with unsigned integers: numba tests signed indices for wrap-around, which stops LLVM's
# vectorisation, and each array slice costs two atomic reference-count updates, which
# dominated small planes (shufflenet's 7x7). The maximum writes each tap's result into the
# other of two buffers: ``acc[q] = v if v > acc[q] else acc[q]`` in place compiles to a
# conditional store that does not vectorise; the out-of-place form is one vmaxps.

_U = np.uintp
#: cells of the padded planes that pool2d's flat passes take at once (a group of small planes
#: in 128 KiB; at least one plane)
POOL_GROUP_CELLS = 1 << 15


@njit(**_INLINE)
def _reduce3_into(dst, d0, a, a0, b, b0, c, c0, n, is_max):
    # dst[d0 + q] = fmax(fmax(a, b), c) or (a + b) + c at offsets a0/b0/c0 + q: two taps
    # folded per pass (the same selects and the same order of additions as two passes of
    # _reduce_into); dst may be a for the sum, not for the maximum
    if is_max:
        for q in range(_U(n)):
            m = a[a0 + q]
            v = b[b0 + q]
            m = v if (v > m) | (m != m) else m
            v = c[c0 + q]
            dst[d0 + q] = v if (v > m) | (m != m) else m
    else:
        for q in range(_U(n)):
            dst[d0 + q] = (a[a0 + q] + b[b0 + q]) + c[c0 + q]


@njit(**_INLINE)
def _reduce_taps(first, second, d0, src, s0, step, k, n, is_max):
    # reduce_i src[s0 + i step + q] over k >= 2 taps into first or second (at d0 + q, q < n),
    # two taps per pass after the first pair; returns the array holding the result
    if k == 2:
        _reduce_into(first, d0, src, s0, src, s0 + step, n, is_max)
        return first
    _reduce3_into(first, d0, src, s0, src, s0 + step, src, s0 + _U(2) * step, n, is_max)
    cur, other = first, second
    i = 3
    while i < k:
        if not is_max:
            other = cur  # sums accumulate in place
        if i + 1 < k:
            _reduce3_into(other, d0, cur, d0, src, s0 + _U(i) * step, src, s0 + _U(i + 1) * step, n, is_max)
            i += 2
        else:
            _reduce_into(other, d0, cur, d0, src, s0 + _U(i) * step, n, is_max)
            i += 1
        cur, other = other, cur
    return cur


@njit(**_INLINE)
def _reduce_taps_to(first, second, d0, src, s0, step, k, n, is_max):
    # _reduce_taps with the result always in first: a maximum that would end in second
    # starts there instead (its passes alternate between the two buffers)
    passes = 0 if k <= 3 else (k - 2) // 2
    if is_max and passes % 2 == 1:
        _reduce_taps(second, first, d0, src, s0, step, k, n, is_max)
    else:
        _reduce_taps(first, second, d0, src, s0, step, k, n, is_max)


@njit(**_INLINE)
def _pick_max(yf, out, row, at, sw, n):
    # yf[out + t] = row[at + t sw]; whether any is -inf (a window to check for NaN)
    lost = False
    for t in range(_U(n)):
        m = row[at + t * sw]
        yf[out + t] = m
        lost |= m == -_INF
    return lost


@njit(**_INLINE)
def _pick_scaled(yf, out, row, at, sw, invf, scale, n):
    # yf[out + t] = row[at + t sw] * invf[scale + t] (the average's 1 / count)
    for t in range(_U(n)):
        yf[out + t] = row[at + t * sw] * invf[scale + t]


@njit(**_INLINE)
def _plane_into(xf, base, height, width, buf, pitch, rows, pt, pl):
    # the interior of the padded plane: buf[(pt + h) pitch + pl + w] = x[base + h W + w], clipped to buf
    n = min(width, pitch - pl)
    for h in range(min(height, rows - pt)):
        src = _U(base + h * width)
        dst = _U((pt + h) * pitch + pl)
        for c in range(_U(n)):
            buf[dst + c] = xf[src + c]


@njit(**_INLINE)
def _geometry(out_h, out_w, kh, kw, sh, sw, dh, dw):
    # pitch and rows of the padded plane (every read of the loops below stays inside),
    # then the runs: (count, length, input step, output step)
    pitch = (out_w - 1) * sw + (kw - 1) * dw + 1
    rows = (out_h - 1) * sh + (kh - 1) * dh + 1
    if sh == 1 and sw == 1:
        return pitch, rows, 1, out_h * pitch - (pitch - out_w), 0, 0
    return pitch, rows, out_h, out_w, sh * pitch, pitch


@njit(**_INLINE)
def _tap_add(acc, out0, buf, in0, sw, n, wv):
    # acc[out0 + q] += wv * buf[in0 + sw q], q < n
    if sw == 1:
        for q in range(_U(n)):
            acc[out0 + q] += wv * buf[in0 + q]
    elif sw == 2:
        for q in range(_U(n)):
            acc[out0 + q] += wv * buf[in0 + _U(2) * q]
    else:
        for q in range(_U(n)):
            acc[out0 + q] += wv * buf[in0 + _U(sw) * q]


@njit(**_INLINE)
def _tap_max(dst, cur, out0, buf, in0, sw, n):
    # dst[out0 + q] = max(cur[out0 + q], buf[in0 + sw q]); a NaN tap never wins (maxps keeps cur)
    if sw == 1:
        for q in range(_U(n)):
            v = buf[in0 + q]
            a = cur[out0 + q]
            dst[out0 + q] = v if v > a else a
    elif sw == 2:
        for q in range(_U(n)):
            v = buf[in0 + _U(2) * q]
            a = cur[out0 + q]
            dst[out0 + q] = v if v > a else a
    else:
        for q in range(_U(n)):
            v = buf[in0 + _U(sw) * q]
            a = cur[out0 + q]
            dst[out0 + q] = v if v > a else a


@njit(**_INLINE)
def _plane_out(yf, base, acc, out_h, out_w, pitch):
    for oh in range(out_h):
        dst = _U(base + oh * out_w)
        src = _U(oh * pitch)
        for t in range(_U(out_w)):
            yf[dst + t] = acc[src + t]


@njit(**_INLINE)
def _epilogue(yf, base, n, bias, b, relu, z):
    """yf[base:base + n]: + bias[b] when ``bias`` is not empty, + z[base:base + n] (a residual
    of y's layout) when ``z`` is not empty, then max(., 0) when relu (NaN and -0 kept): the
    bias, a residual Sum and a Relu of the nodes a convolution was fused with, on a piece
    of output still in cache, each addition rounded as the separate nodes round it."""
    o = _U(base)
    bv = bias[b] if bias.size else _ZERO
    if z.size:
        for t in range(_U(n)):
            v = yf[o + t]
            if bias.size:
                v = v + bv
            v = v + z[o + t]
            yf[o + t] = (_ZERO if v < _ZERO else v) if relu else v
    elif relu:
        for t in range(_U(n)):
            v = yf[o + t] + bv if bias.size else yf[o + t]
            yf[o + t] = _ZERO if v < _ZERO else v
    else:
        for t in range(_U(n)):
            yf[o + t] += bv


@njit(**_INLINE)
def _nine_taps(buf, p, c1, c2, r1, r2, k):
    # the 3x3 window at buf[p] (column steps c1, c2, row steps r1, r2) times the weights k,
    # summed in row-major tap order from the first product (fused multiply-adds)
    s = k[0] * buf[p]
    s = s + k[1] * buf[p + c1]
    s = s + k[2] * buf[p + c2]
    s = s + k[3] * buf[p + r1]
    s = s + k[4] * buf[p + r1 + c1]
    s = s + k[5] * buf[p + r1 + c2]
    s = s + k[6] * buf[p + r2]
    s = s + k[7] * buf[p + r2 + c1]
    return s + k[8] * buf[p + r2 + c2]


@njit(**_INLINE)
def _taps3x3(acc, buf, n, pitch, dh, dw, wf, w0):
    """acc[q] = the 9 taps of a 3x3 kernel (weights wf[w0:w0 + 9]) at unit strides, summed
    in registers in row-major tap order with fused multiply-adds (the rounding of
    _tap_add's passes from zero): one store per output instead of one per tap."""
    k = (wf[w0], wf[w0 + 1], wf[w0 + 2], wf[w0 + 3], wf[w0 + 4], wf[w0 + 5], wf[w0 + 6], wf[w0 + 7], wf[w0 + 8])
    c1, c2 = _U(dw), _U(2 * dw)
    r1, r2 = _U(dh * pitch), _U(2 * dh * pitch)
    for q in range(_U(n)):
        acc[q] = _nine_taps(buf, q, c1, c2, r1, r2, k)


@njit(**_INLINE)
def _taps3x3_strided(acc, buf, out_h, out_w, pitch, sh, sw, dh, dw, wf, w0):
    """acc[oh pitch + q] = the 9 taps of a 3x3 kernel at output (oh, q) with strides
    (sh, sw), summed in registers in _taps3x3's order: one pass per output row instead of
    nine strided passes of out_w elements (shufflenet's stride-2 layers: ~3x)."""
    k = (wf[w0], wf[w0 + 1], wf[w0 + 2], wf[w0 + 3], wf[w0 + 4], wf[w0 + 5], wf[w0 + 6], wf[w0 + 7], wf[w0 + 8])
    c1, c2 = _U(dw), _U(2 * dw)
    r1, r2 = _U(dh * pitch), _U(2 * dh * pitch)
    for oh in range(out_h):
        base = _U(oh * sh * pitch)
        o = _U(oh * pitch)
        for q in range(_U(out_w)):
            acc[o + q] = _nine_taps(buf, base + _U(sw) * q, c1, c2, r1, r2, k)


@njit(**_INLINE)
def _phases_into(xf, base, height, width, buf, prow, ppitch, rows_p, pitch_p, sh, sw, pt, pl):
    # the polyphase form of the zero-padded plane (rows_p x pitch_p): phase (a, b) holds its
    # rows a, a + sh, ... and columns b, b + sw, ... as a (prow, ppitch) plane at
    # buf[((a sw + b) prow) ppitch]; only the interior is written (the padding stays zero).
    # What depends on the column alone is computed once, rows only advance counters
    plane = prow * ppitch
    if sw == 1:
        n1 = min(width, ppitch - pl)
    else:
        # column phases of x's even and odd columns (sw == 2), or of x's columns w0, w0 + sw...
        e_lim = min((width + 1) // 2, ppitch - pl // 2, (pitch_p - pl + 1) // 2)
        o_lim = min(width // 2, ppitch - (pl + 1) // 2, (pitch_p - pl) // 2)
        e_off = (pl % 2) * plane + pl // 2
        o_off = ((pl + 1) % 2) * plane + (pl + 1) // 2
        both = max(0, min(e_lim, o_lim))
    r = pt
    rp, rr = pt % sh, pt // sh
    for h in range(height):
        if r >= rows_p:
            break
        src = _U(base + h * width)
        row = (rp * sw * prow + rr) * ppitch
        if sw == 1:  # one column phase: a contiguous copy
            dst = _U(row + pl)
            for j in range(_U(n1)):
                buf[dst + j] = xf[src + j]
        elif sw == 2:  # both column phases from one pass over the row
            de, do = _U(row + e_off), _U(row + o_off)
            for j in range(_U(both)):
                buf[de + j] = xf[src + _U(2) * j]
                buf[do + j] = xf[src + _U(2) * j + _U(1)]
            for j in range(both, e_lim):
                buf[de + j] = xf[src + 2 * j]
            for j in range(both, o_lim):
                buf[do + j] = xf[src + 2 * j + 1]
        else:
            for cp in range(sw):
                w0 = ((cp - pl) % sw + sw) % sw  # the first column of x in this column phase
                c0 = (w0 + pl) // sw
                n = min((width - w0 + sw - 1) // sw, ppitch - c0, (pitch_p - pl - w0 + sw - 1) // sw)
                dst = _U(row + cp * plane + c0)
                s0 = src + _U(w0)
                for j in range(max(0, n)):
                    buf[dst + j] = xf[s0 + _U(sw) * j]
        r += 1
        rp += 1
        if rp == sh:
            rp = 0
            rr += 1


@njit(**_INLINE)
def _phase_taps(acc, buf, n, prow, ppitch, kh, kw, sh, sw, dh, dw, wf, w0):
    """acc[q] = the correlation at flat output q (pitch ppitch) from the polyphase planes:
    every tap of every stride is a unit-stride read of one phase, and each kernel row's
    taps are summed in registers (kw of 3, 5 or 7) before one addition to acc, in row-major
    tap order: one pass per kernel row instead of one strided pass per tap."""
    for i in range(kh):
        r_off = i * dh
        rbase = ((r_off % sh) * sw * prow + r_off // sh) * ppitch
        k0 = _U(w0 + i * kw)
        if kw == 3 or kw == 5 or kw == 7:
            b0 = _U(rbase + ((0 % sw) * prow) * ppitch + 0 // sw)
            b1 = _U(rbase + (((dw) % sw) * prow) * ppitch + (dw) // sw)
            b2 = _U(rbase + (((2 * dw) % sw) * prow) * ppitch + (2 * dw) // sw)
            a0, a1, a2 = wf[k0], wf[k0 + 1], wf[k0 + 2]
            if kw == 3:
                if i == 0:
                    for q in range(_U(n)):
                        acc[q] = a0 * buf[b0 + q] + a1 * buf[b1 + q] + a2 * buf[b2 + q]
                else:
                    for q in range(_U(n)):
                        acc[q] += a0 * buf[b0 + q] + a1 * buf[b1 + q] + a2 * buf[b2 + q]
                continue
            b3 = _U(rbase + (((3 * dw) % sw) * prow) * ppitch + (3 * dw) // sw)
            b4 = _U(rbase + (((4 * dw) % sw) * prow) * ppitch + (4 * dw) // sw)
            a3, a4 = wf[k0 + 3], wf[k0 + 4]
            if kw == 5:
                if i == 0:
                    for q in range(_U(n)):
                        acc[q] = a0 * buf[b0 + q] + a1 * buf[b1 + q] + a2 * buf[b2 + q] + a3 * buf[b3 + q] + a4 * buf[b4 + q]
                else:
                    for q in range(_U(n)):
                        acc[q] += a0 * buf[b0 + q] + a1 * buf[b1 + q] + a2 * buf[b2 + q] + a3 * buf[b3 + q] + a4 * buf[b4 + q]
                continue
            b5 = _U(rbase + (((5 * dw) % sw) * prow) * ppitch + (5 * dw) // sw)
            b6 = _U(rbase + (((6 * dw) % sw) * prow) * ppitch + (6 * dw) // sw)
            a5, a6 = wf[k0 + 5], wf[k0 + 6]
            if i == 0:
                for q in range(_U(n)):
                    acc[q] = (a0 * buf[b0 + q] + a1 * buf[b1 + q] + a2 * buf[b2 + q] + a3 * buf[b3 + q] + a4 * buf[b4 + q]
                              + a5 * buf[b5 + q] + a6 * buf[b6 + q])
            else:
                for q in range(_U(n)):
                    acc[q] += (a0 * buf[b0 + q] + a1 * buf[b1 + q] + a2 * buf[b2 + q] + a3 * buf[b3 + q] + a4 * buf[b4 + q]
                               + a5 * buf[b5 + q] + a6 * buf[b6 + q])
        else:
            if i == 0:
                acc[:n] = _ZERO
            for j in range(kw):
                c_off = j * dw
                b = _U(rbase + ((c_off % sw) * prow) * ppitch + c_off // sw)
                a = wf[k0 + j]
                for q in range(_U(n)):
                    acc[q] += a * buf[b + q]


@njit(**_OPTS)
def depthwise_conv2d(x, w, y, first, sh, sw, dh, dw, pt, pl, bias, relu, z):
    """y[p] = the correlation of plane x[p] with kernel w[(first + p) % C] (x: (planes, H, W),
    w: (C, KH, KW), all C-contiguous; ``first`` is the index of x[0] among all planes), then
    _epilogue's bias[(first + p) % C], residual z (flat, y's layout) and Relu.

    The zero padding is materialised, so an infinite weight meeting it gives NaN as the
    definition says. Taps accumulate in row-major kernel order, with fused multiply-adds."""
    planes, height, width = x.shape
    out_h, out_w = y.shape[1], y.shape[2]
    n_ch, kh, kw = w.shape
    pitch, rows, runs, n, step_in, step_out = _geometry(out_h, out_w, kh, kw, sh, sw, dh, dw)
    if not (kh == 3 and kw == 3 and sh == 1 and sw == 1):
        _depthwise_phased(x, w, y, first, sh, sw, dh, dw, pt, pl, bias, relu, z, pitch, rows)
        return
    buf = np.zeros(rows * pitch, np.float32)
    acc = np.empty(out_h * pitch, np.float32)
    xf, yf, wf = x.reshape(-1), y.reshape(-1), w.reshape(-1)
    for p in range(planes):
        c = (first + p) % n_ch
        _plane_into(xf, p * height * width, height, width, buf, pitch, rows, pt, pl)
        if kh == 3 and kw == 3 and runs == 1:
            _taps3x3(acc, buf, n, pitch, dh, dw, wf, _U(c * 9))
        elif kh == 3 and kw == 3:
            _taps3x3_strided(acc, buf, out_h, out_w, pitch, sh, sw, dh, dw, wf, _U(c * 9))
        else:
            acc[:] = _ZERO
            for i in range(kh):
                for j in range(kw):
                    wv = wf[_U((c * kh + i) * kw + j)]
                    for run in range(runs):
                        _tap_add(acc, _U(run * step_out), buf, _U(run * step_in + i * dh * pitch + j * dw), sw, n, wv)
        _plane_out(yf, p * out_h * out_w, acc, out_h, out_w, pitch)
        if bias.size or z.size or relu:
            _epilogue(yf, p * out_h * out_w, out_h * out_w, bias, c, relu, z)


@njit(**_INLINE)
def _depthwise_phased(x, w, y, first, sh, sw, dh, dw, pt, pl, bias, relu, z, pitch_p, rows_p):
    # depthwise_conv2d for strided or other than 3x3 kernels: the padded plane split into its
    # sh x sw polyphase planes makes every tap a unit-stride read (stride-2 layers read every
    # other element per tap before: 2-5 GFMA/s), with one pass per kernel row (_phase_taps)
    planes, height, width = x.shape
    out_h, out_w = y.shape[1], y.shape[2]
    n_ch, kh, kw = w.shape
    ppitch = (pitch_p + sw - 1) // sw
    prow = (rows_p + sh - 1) // sh + 1  # a spare row: the flat reads of the last row's tail
    buf = np.zeros(sh * sw * prow * ppitch, np.float32)
    n = out_h * ppitch
    # n would do; allocated at the padded plane's row length as the direct path's is: with
    # the smaller size glibc trimmed its heap between runs, and efficientnet's next large
    # outputs faulted in again (1,900 page faults a run, 10% of its time)
    acc = np.empty(out_h * pitch_p, np.float32)
    xf, yf, wf = x.reshape(-1), y.reshape(-1), w.reshape(-1)
    for p in range(planes):
        c = (first + p) % n_ch
        _phases_into(xf, p * height * width, height, width, buf, prow, ppitch, rows_p, pitch_p, sh, sw, pt, pl)
        _phase_taps(acc, buf, n, prow, ppitch, kh, kw, sh, sw, dh, dw, wf, _U(c * kh * kw))
        _plane_out(yf, p * out_h * out_w, acc, out_h, out_w, ppitch)
        if bias.size or z.size or relu:
            _epilogue(yf, p * out_h * out_w, out_h * out_w, bias, c, relu, z)


@njit(**_INLINE)
def _reduce_into(dst, d0, a, a0, b, b0, n, is_max):
    # dst[d0 + q] = fmax(a[a0 + q], b[b0 + q]) (NaN loses against a number on either side)
    # or the sum, q < n; dst may be a (same offsets) for the sum, not for the maximum
    if is_max:
        for q in range(_U(n)):
            v = b[b0 + q]
            c = a[a0 + q]
            dst[d0 + q] = v if (v > c) | (c != c) else c
    else:
        for q in range(_U(n)):
            dst[d0 + q] = a[a0 + q] + b[b0 + q]


@njit(**_INLINE)
def _join(m, v, is_max):
    # the maximum (a NaN loses against a number, as onnxruntime's '>') or the sum
    if is_max:
        return v if (v > m) | (m != m) else m
    return m + v


@njit(**_INLINE)
def _taps_at(src, q, first, count, step, is_max):
    # src[q + first step] joined with the next count - 1 taps, step apart
    m = src[q + first * step]
    for i in range(first + 1, first + count):
        m = _join(m, src[q + i * step], is_max)
    return m


@njit(**_OPTS)
def pool2d_same(x, y, kh, kw, pt, pl, is_max, inv):
    """pool2d for unit strides and dilations whose output has the input's size (pads adding
    up to the kernel's size minus one on each axis: 3x3 with pads 1), over the planes as one
    flat array: along the rows, each cell joined with its kw - 1 neighbours by passes over
    every plane at once, then the cells whose window leaves their row (the first pl and the
    last kw - 1 - pl columns) redone from their row alone; then along the columns the same
    with rows W apart, redoing each plane's first pt and last kh - 1 - pt rows. Long
    vectorised passes where pool2d's padded copies and per-row loops cost 1-2.5 ns an
    element on 7x7 and 14x14 planes. Taps outside the input are left out (no -inf or 0
    joins a window), so a window of NaN alone gives NaN; averages add along the rows first,
    in tap order, then multiply by inv (OH, OW)."""
    planes, height, width = x.shape
    hw = height * width
    n = planes * hw
    xf, yf, invf = x.reshape(-1), y.reshape(-1), inv.reshape(-1)
    h = np.empty(n, np.float32)
    spare = np.empty(n if max(kh, kw) > 3 else 0, np.float32)
    pr = kw - 1 - pl
    pb = kh - 1 - pt
    zero = _U(0)
    # along the rows: every cell flat (those near a row's ends read the next row: redone)
    if kw == 1:
        h[:] = xf
    elif n > kw - 1:
        _reduce_taps_to(h, spare, _U(pl), xf, zero, _U(1), kw, n - (kw - 1), is_max)
    right = max(width - pr, min(pl, width))  # the first column of the right-hand edge
    if kw == 3 and pl == 1 and width >= 2:  # the usual 3x3 with pads 1: two cells per row
        for r in range(planes * height):
            row = _U(r * width)
            h[row] = _join(xf[row], xf[row + 1], is_max)
            end = row + _U(width - 1)
            h[end] = _join(xf[end - 1], xf[end], is_max)
    else:
        for r in range(planes * height if kw > 1 else 0):
            row = r * width
            for c in range(min(pl, width)):
                h[row + c] = _taps_at(xf, row, 0, min(width, c - pl + kw), 1, is_max)
            for c in range(right, width):
                lo = max(0, c - pl)
                h[row + c] = _taps_at(xf, row + lo, 0, width - lo, 1, is_max)
    # along the columns, the same with steps of a row, into y
    if kh == 1:
        yf[:] = h
    elif n > (kh - 1) * width:
        _reduce_taps_to(yf, spare, _U(pt * width), h, zero, _U(width), kh, n - (kh - 1) * width, is_max)
    for p in range(planes if kh > 1 else 0):
        base = p * hw
        for r in range(height):
            if pt <= r < height - pb:
                continue
            lo = max(0, r - pt)
            count = min(height, r - pt + kh) - lo
            at = _U(base + lo * width)
            dst = _U(base + r * width)
            # tap by tap over the row (vectorised), in the same order as the flat pass
            for c in range(_U(width)):
                yf[dst + c] = h[at + c]
            for i in range(1, count):
                tap = at + _U(i * width)
                for c in range(_U(width)):
                    yf[dst + c] = _join(yf[dst + c], h[tap + c], is_max)
    if not is_max:
        for p in range(planes):
            base = _U(p * hw)
            for q in range(_U(hw)):
                yf[base + q] *= invf[q]


@njit(**_OPTS)
def pool2d_s2(x, y, pt, pl, is_max, inv):
    """pool2d for 3x3 windows at strides 2 (dilations 1), the usual downsampling pools: per
    output row, its valid input rows joined into one row of padded columns (the padding
    value outside the input), then each output joins its three cells of that row, in
    pool2d's order (the same bits), without pool2d's pass over every column of the row.
    Max windows that saw only -inf or NaN are recomputed as pool2d does. squeezenet's max
    pools on one core: 64x111x111 239 -> 185 us, 128x55x55 151 -> 113, 256x27x27 117 -> 78."""
    planes, height, width = x.shape
    out_h, out_w = y.shape[1], y.shape[2]
    pitch = 2 * out_w + 1
    pad = -_INF if is_max else _ZERO
    v = np.empty(pitch, np.float32)
    xf, yf, invf = x.reshape(-1), y.reshape(-1), inv.reshape(-1)
    c_lo = min(pl, pitch)
    c_hi = max(c_lo, min(pl + width, pitch))
    seg = c_hi - c_lo
    step = _U(width)
    for p in range(planes):
        for oh in range(out_h):
            top = 2 * oh - pt
            i_lo = max(0, -top)
            taps = min(3, height - top) - i_lo
            if taps <= 0 or seg <= 0:
                for q in range(_U(pitch)):
                    v[q] = pad
            else:
                for q in range(_U(c_lo)):
                    v[q] = pad
                for q in range(_U(c_hi), _U(pitch)):
                    v[q] = pad
                src = _U(p * height * width + (top + i_lo) * width + c_lo - pl)
                if taps == 3 and is_max:
                    # _reduce3_into's maximum written out: its run-time mode test kept
                    # this loop 1.3-1.6x slower
                    d0 = _U(c_lo)
                    for q in range(_U(seg)):
                        m = xf[src + q]
                        b = xf[src + step + q]
                        m = b if (b > m) | (m != m) else m
                        b = xf[src + _U(2) * step + q]
                        v[d0 + q] = b if (b > m) | (m != m) else m
                elif taps == 3:
                    _reduce3_into(v, _U(c_lo), xf, src, xf, src + step, xf, src + _U(2) * step, seg, is_max)
                elif taps == 2:
                    _reduce_into(v, _U(c_lo), xf, src, xf, src + step, seg, is_max)
                else:
                    for q in range(_U(seg)):
                        v[_U(c_lo) + q] = xf[src + q]
            out = _U((p * out_h + oh) * out_w)
            if is_max:
                lost = False
                for t in range(_U(out_w)):
                    q = _U(2) * t
                    m = v[q]
                    b = v[q + _U(1)]
                    m = b if (b > m) | (m != m) else m
                    b = v[q + _U(2)]
                    m = b if (b > m) | (m != m) else m
                    yf[out + t] = m
                    lost |= m == -_INF
                if lost:  # rare: -inf, or NaN only (a NaN never wins '>')
                    for t in range(_U(out_w)):
                        if yf[out + t] == -_INF:
                            yf[out + t] = _max_window_nan(x[p], oh, t, 3, 3, 2, 2, 1, 1, pt, pl)
            else:
                scale = _U(oh * out_w)
                for t in range(_U(out_w)):
                    q = _U(2) * t
                    yf[out + t] = ((v[q] + v[q + _U(1)]) + v[q + _U(2)]) * invf[scale + t]


@njit(**_OPTS)
def pool2d(x, y, kh, kw, sh, sw, dh, dw, pt, pl, is_max, inv):
    """Max (is_max) or average pooling of the planes x (planes, H, W) into y (planes, OH, OW).

    Separable: each plane is first reduced along its columns over the kh taps, for the
    output rows only, then along its rows over the kw taps at every column (flat passes
    over all output rows), then every sw-th column is kept: about (kh + kw) / 2
    vectorised passes (two taps folded per pass) instead of kh kw strided ones. With unit
    row strides the column stage runs flat over a padded copy of the plane; with larger
    ones it reads the plane's rows directly, tap rows outside the input skipped and
    columns outside it set to the padding value. Max keeps a NaN only when its window
    holds nothing else (a number beats NaN, as onnxruntime's '>' comparison does); a
    window wholly in the padding gives -inf. Average sums the window (the padding adds
    zeros) and multiplies by ``inv`` (OH, OW), 1 / the count of cells that count."""
    planes, height, width = x.shape
    out_h, out_w = y.shape[1], y.shape[2]
    pitch = (out_w - 1) * sw + (kw - 1) * dw + 1
    rows = (out_h - 1) * sh + (kh - 1) * dh + 1
    span = out_h * pitch - (kw - 1) * dw  # cells whose row reduction stays inside the column-reduced plane
    pad = -_INF if is_max else _ZERO
    # unit row strides: planes are copied, a group at a time, into a padded buffer holding
    # their padded planes one after the other, and each tap pair is one flat pass over the
    # whole group (small planes: one pass per group instead of a few short loops per plane);
    # a plane's taps never leave its own padded rows, the rows between planes are skipped
    flat = sh == 1 and kh > 1
    group = max(1, min(planes, POOL_GROUP_CELLS // (rows * pitch))) if flat else 1
    cells = group * rows * pitch if flat else out_h * pitch
    c0 = np.empty(cells, np.float32)
    c1 = np.empty(cells, np.float32)
    r0 = np.empty(cells, np.float32)
    r1 = np.empty(cells, np.float32)
    xf, yf, invf = x.reshape(-1), y.reshape(-1), inv.reshape(-1)
    zero = _U(0)
    # the columns of a column-reduced row that hold input: [c_lo, c_hi), the rest is padding
    c_lo = min(pl, pitch)
    c_hi = max(c_lo, min(pl + width, pitch))
    seg = c_hi - c_lo
    # per output row (strides above 1): the first input row its taps read and how many
    # exist, computed once (two signed divisions per row and plane cost more than the row)
    row_first = np.zeros(0 if flat else out_h, np.intp)
    row_taps = np.zeros(0 if flat else out_h, np.intp)
    for oh in range(0 if flat else out_h):
        top = oh * sh - pt
        i_lo = 0 if top >= 0 else (-top + dh - 1) // dh
        last = top + (kh - 1) * dh
        i_hi = kh if last < height else ((height - 1 - top) // dh + 1 if height - 1 - top >= 0 else 0)
        row_first[oh] = top + i_lo * dh
        row_taps[oh] = i_hi - i_lo
    side_pad = c_lo > 0 or c_hi < pitch
    step = _U(dh * width)
    buf = np.full(cells if flat else 0, pad, np.float32)
    slot = rows * pitch
    for g0 in range(0, planes if flat else 0, group):
        g1 = min(g0 + group, planes)
        for p in range(g0, g1):
            _plane_into(xf, p * height * width, height, width, buf[(p - g0) * slot:], pitch, rows, pt, pl)
        length = (g1 - g0 - 1) * slot + out_h * pitch
        col = _reduce_taps(c0, c1, zero, buf, zero, _U(dh * pitch), kh, length, is_max)
        if kw == 1:
            row = col
        else:
            row = _reduce_taps(r0, r1, zero, col, zero, _U(dw), kw, length - (kw - 1) * dw, is_max)
        for p in range(g0, g1):
            _pool_out(x, yf, p, row, (p - g0) * slot, pitch, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl, is_max, invf)
    for p in range(0 if flat else planes):
        plane = p * height * width
        # other strides: along the columns straight from the plane (no padded copy, which
        # would cost more than the strided rows it serves): for output row oh,
        # col[oh pitch + c] = reduce over the taps i whose input row oh sh + i dh - pt
        # exists of x[that row, c - pl]; cells with no input take the padding value
        for oh in range(out_h):
            at = oh * pitch
            taps = row_taps[oh]
            if taps <= 0 or seg <= 0:
                for q in range(_U(pitch)):
                    c0[_U(at) + q] = pad
                continue
            if side_pad:
                for q in range(_U(c_lo)):
                    c0[_U(at) + q] = pad
                for q in range(_U(c_hi), _U(pitch)):
                    c0[_U(at) + q] = pad
            src = _U(plane + row_first[oh] * width)
            d0 = _U(at + c_lo)
            if taps == 1:
                for q in range(_U(seg)):
                    c0[d0 + q] = xf[src + q]
            elif taps == 3:
                _reduce3_into(c0, d0, xf, src, xf, src + step, xf, src + _U(2) * step, seg, is_max)
            else:
                _reduce_taps_to(c0, c1, d0, xf, src, step, taps, seg, is_max)
        col = c0
        # along the rows: row[q] = reduce_j col[q + j dw], flat over all output rows
        if kw == 1:
            row = col
        else:
            row = _reduce_taps(r0, r1, zero, col, zero, _U(dw), kw, span, is_max)
        _pool_out(x, yf, p, row, 0, pitch, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl, is_max, invf)


@njit(nogil=True, error_model="numpy", fastmath={"contract"})
def _pool_out(x, yf, p, row, first, pitch, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl, is_max, invf):
    # every sw-th column of the reduced rows (plane p's from offset ``first``) into plane p
    # of y: max windows that saw only -inf or NaN are recomputed (a window of NaN alone is
    # NaN), averages scaled by 1 / count
    base = p * out_h * out_w
    for oh in range(out_h):
        out = _U(base + oh * out_w)
        at = _U(first + oh * pitch)
        if is_max:
            # unit and 2 strides as constants: LLVM vectorises those loads (a run-time
            # stride leaves one scalar load per output)
            if sw == 1:
                lost = _pick_max(yf, out, row, at, _U(1), out_w)
            elif sw == 2:
                lost = _pick_max(yf, out, row, at, _U(2), out_w)
            else:
                lost = _pick_max(yf, out, row, at, _U(sw), out_w)
            if lost:  # rare: -inf, or NaN only (a NaN never wins '>')
                for t in range(_U(out_w)):
                    if yf[out + t] == -_INF:
                        yf[out + t] = _max_window_nan(x[p], oh, t, kh, kw, sh, sw, dh, dw, pt, pl)
        else:
            scale = _U(oh * out_w)
            if sw == 1:
                _pick_scaled(yf, out, row, at, _U(1), invf, scale, out_w)
            elif sw == 2:
                _pick_scaled(yf, out, row, at, _U(2), invf, scale, out_w)
            else:
                _pick_scaled(yf, out, row, at, _U(sw), invf, scale, out_w)


@njit(nogil=True, error_model="numpy")
def _max_window_nan(plane, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl):
    # -inf when the window holds a number (or nothing), NaN when it holds only NaN
    height, width = plane.shape
    nan = False
    for i in range(kh):
        ih = oh * sh + i * dh - pt
        if ih < 0 or ih >= height:
            continue
        for j in range(kw):
            iw = ow * sw + j * dw - pl
            if iw < 0 or iw >= width:
                continue
            v = plane[ih, iw]
            if v == v:
                return -_INF
            nan = True
    return np.float32(np.nan) if nan else -_INF


# -- per-row affine map (BatchNormalization's inference) ----------------------------------------


@njit(nogil=True, cache=True, error_model="numpy")
def affine_rows(x, a, b, y, relu):
    """y[r] = x[r] * a[r] + b[r] for the rows of 2-D arrays, then max(y, 0) when ``relu``
    (-0 and NaN kept, as Relu's clip keeps them): one pass; multiply and add rounded
    separately, as numpy's two passes round."""
    rows, cols = x.shape
    xf, yf = x.reshape(-1), y.reshape(-1)
    for r in range(rows):
        ar = a[r]
        br = b[r]
        base = _U(r * cols)
        if relu:
            for c in range(_U(cols)):
                v = xf[base + c] * ar + br
                yf[base + c] = _ZERO if v < _ZERO else v
        else:
            for c in range(_U(cols)):
                yf[base + c] = xf[base + c] * ar + br


@njit(nogil=True, error_model="numpy", fastmath={"reassoc", "nsz", "contract"})
def _sum_f64(xf, base, n):
    # float64 sum of float32 values (reassociated: vectorised with several accumulators)
    s = 0.0
    for c in range(_U(n)):
        s += np.float64(xf[base + c])
    return s


@njit(nogil=True, error_model="numpy", fastmath={"reassoc", "nsz", "contract"})
def _sum_sq_dev_f64(xf, base, n, mean):
    s = 0.0
    for c in range(_U(n)):
        d = np.float64(xf[base + c]) - mean
        s += d * d
    return s


@njit(**_OPTS)
def layer_norm_rows(x, scale, bias, has_bias, epsilon, y, mean_out, inv_out):
    """LayerNormalization of the rows of a 2-D float32 array, per-column scale (and bias).

    Mean and variance are accumulated in float64 (two passes over the row, the variance
    on centred values), rounded to float32, then y = ((x - mean) * inv_std) * scale (+ bias)
    with each float32 operation rounded as numpy's passes round them."""
    rows, cols = x.shape
    xf, yf = x.reshape(-1), y.reshape(-1)
    for r in range(rows):
        base = _U(r * cols)
        mean = _sum_f64(xf, base, cols) / cols
        ss = _sum_sq_dev_f64(xf, base, cols, mean)
        m32 = np.float32(mean)
        inv = np.float32(1.0) / np.float32(math.sqrt(np.float32(ss / cols) + epsilon))
        mean_out[r] = m32
        inv_out[r] = inv
        if has_bias:
            for c in range(_U(cols)):
                yf[base + c] = ((xf[base + c] - m32) * inv) * scale[c] + bias[c]
        else:
            for c in range(_U(cols)):
                yf[base + c] = ((xf[base + c] - m32) * inv) * scale[c]


# -- NonMaxSuppression's greedy pass ------------------------------------------------------------


@njit(**_INLINE)
def _nan_min(a, b):
    return a if (a < b) | (a != a) else b


@njit(**_INLINE)
def _nan_max(a, b):
    return a if (a > b) | (a != a) else b


@njit(nogil=True, cache=True, error_model="numpy")
def nms(boxes, ranked, n_cand, n_class, center, max_out, threshold, out):
    """NonMaxSuppression of every batch and class: ``ranked[g]`` holds group g's box
    indices by decreasing score (its first ``n_cand[g]`` are candidates); each candidate is
    kept unless its IoU with a box its group kept exceeds ``threshold``, up to ``max_out``
    per group. Writes [batch, class, box] rows into ``out`` and returns their count.

    Corners and areas are computed as op_non_max_suppression._corners does, and the IoU
    test with the same float32 operations as _suppresses (min/max propagating NaN, no
    contraction), so both paths keep the same boxes. The kept boxes of the current group
    are stored column-wise, so each candidate is tested against all of them in one
    vectorised loop."""
    n_box = boxes.shape[1]
    ky0 = np.empty(n_box, np.float32)
    kx0 = np.empty(n_box, np.float32)
    ky1 = np.empty(n_box, np.float32)
    kx1 = np.empty(n_box, np.float32)
    karea = np.empty(n_box, np.float32)
    half = np.float32(2.0)
    rows = 0
    for g in range(ranked.shape[0]):
        batch = g // n_class
        count = 0
        for r in range(n_cand[g]):
            if count >= max_out:
                break
            b = ranked[g, r]
            if center:
                xc, yc, w, h = boxes[batch, b, 0], boxes[batch, b, 1], boxes[batch, b, 2], boxes[batch, b, 3]
                y0, x0, y1, x1 = yc - h / half, xc - w / half, yc + h / half, xc + w / half
            else:
                c0, c1, c2, c3 = boxes[batch, b, 0], boxes[batch, b, 1], boxes[batch, b, 2], boxes[batch, b, 3]
                y0, x0, y1, x1 = np.minimum(c0, c2), np.minimum(c1, c3), np.maximum(c0, c2), np.maximum(c1, c3)
            area = (y1 - y0) * (x1 - x0)
            suppressed = False
            for m in range(count):
                ih = _nan_min(y1, ky1[m]) - _nan_max(y0, ky0[m])
                iw = _nan_min(x1, kx1[m]) - _nan_max(x0, kx0[m])
                inter = ih * iw
                union = (karea[m] + area) - inter
                suppressed |= (ih > 0) & (iw > 0) & (inter / union > threshold)
            if not suppressed:
                ky0[count], kx0[count], ky1[count], kx1[count], karea[count] = y0, x0, y1, x1, area
                count += 1
                out[rows, 0] = batch
                out[rows, 1] = g % n_class
                out[rows, 2] = b
                rows += 1
    return rows


# -- ConvTranspose's col2im ---------------------------------------------------------------------


@njit(**_INLINE)
def _valid_range(k, d, p, s, size, out):
    # [lo, hi): the input indices i with 0 <= i s + k d - p < out
    off = k * d - p
    lo = 0 if off >= 0 else (s - 1 - off) // s
    hi = (out - 1 - off) // s + 1 if out - 1 - off >= 0 else 0
    return lo, min(hi, size)


@njit(nogil=True, cache=True, error_model="numpy")
def col2im2d(col, y, sh, sw, dh, dw, pt, pl):
    """y[p] = sum over taps (i, j) of col[p, i, j] placed at (h sh + i dh - pt, w sw + j dw - pl)
    (col: (planes, KH, KW, H, W), y: (planes, OH, OW), both C-contiguous; y is overwritten).
    Taps add in row-major kernel order, as the numpy path's loop over kernel offsets."""
    planes, kh, kw, height, width = col.shape
    out_h, out_w = y.shape[1], y.shape[2]
    cf, yf = col.reshape(-1), y.reshape(-1)
    yf[:] = _ZERO
    for p in range(planes):
        for i in range(kh):
            h_lo, h_hi = _valid_range(i, dh, pt, sh, height, out_h)
            for j in range(kw):
                w_lo, w_hi = _valid_range(j, dw, pl, sw, width, out_w)
                src0 = ((p * kh + i) * kw + j) * height * width
                for h in range(h_lo, h_hi):
                    src = _U(src0 + h * width)
                    dst = _U(p * out_h * out_w + (h * sh + i * dh - pt) * out_w + j * dw - pl)
                    if sw == 1:
                        for w in range(_U(w_lo), _U(w_hi)):
                            yf[dst + w] += cf[src + w]
                    else:
                        for w in range(_U(w_lo), _U(w_hi)):
                            yf[dst + w * _U(sw)] += cf[src + w]


@njit(**_OPTS)
def exp_shift_rows(x, maxima, sums):
    """In place on the rows of a 2-D float32 array: x[r] = exp(x[r] - maxima[r]) and
    sums[r] = its sum (Attention's softmax before the division). A row whose maximum is
    NaN or +inf becomes NaN (as numpy's exp(x - max) gives); -inf entries give 0, and
    results below about 8.6e-39 flush to 0, as in softmax_rows."""
    for row in range(x.shape[0]):
        r = x[row]
        m = maxima[row]
        if not (m - m == _ZERO):
            r[:] = np.nan
            sums[row] = np.nan
            continue
        s = _ZERO
        for i in range(r.size):
            e = _exp_nonpositive(r[i] - m)
            r[i] = e
            s = _sum_step(s, e)
        sums[row] = s


# -- im2col for 2-D convolutions ----------------------------------------------------------------


@njit(nogil=True, cache=True, error_model="numpy")
def im2col2d(x, colf, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl):
    """col[(p KH + i) KW + j, oh OW + ow] = x[p, oh sh + i dh - pt, ow sw + j dw - pl], 0
    outside the input (x: (planes, H, W) C-contiguous, colf: the flat column matrix).
    One pass writing each column row once; contiguous copies for unit strides."""
    planes, height, width = x.shape
    _im2col_rows(x.reshape(-1), 0, colf, planes, height, width, 0, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl)


@njit(**_INLINE)
def _im2col_rows(xf, x0, colf, planes, height, width, r0, r1, out_w, kh, kw, sh, sw, dh, dw, pt, pl):
    # im2col2d's columns of the output rows [r0, r1) only (a band), planes from xf[x0:]
    npix = (r1 - r0) * out_w
    # unit strides on rows as wide as the output's (3x3 with pads 1, say): a tap's valid
    # rows are one contiguous run of the input, shifted by its column offset; one copy
    # serves them all, then each row's few columns outside the input are zeroed (13x13
    # maps: 4x fewer loop starts than a copy per row)
    whole = sh == 1 and sw == 1 and width == out_w
    for p in range(planes):
        for i in range(kh):
            for j in range(kw):
                base = ((p * kh + i) * kw + j) * npix
                lo, hi = _valid_range(j, dw, pl, sw, out_w, width)  # columns ow whose input column exists
                lo = min(lo, out_w)
                hi = max(hi, lo)
                if whole and hi > lo:
                    # output rows [a, b) whose input row oh + i dh - pt exists
                    a = max(r0, pt - i * dh)
                    b = min(r1, height + pt - i * dh)
                    if b <= a:
                        a = b = r1
                    for t in range(_U(base), _U(base + (a - r0) * out_w)):
                        colf[t] = _ZERO
                    for t in range(_U(base + (b - r0) * out_w), _U(base + npix)):
                        colf[t] = _ZERO
                    if b > a:
                        # element q of the run holds input (row a + i dh - pt) W + q + shift,
                        # read from the first valid column of the first row to the last of
                        # the last row (nothing outside the plane)
                        src = x0 + p * height * width + (a + i * dh - pt) * width + j * dw - pl
                        dst = base + (a - r0) * out_w
                        q0, q1 = lo, (b - a) * out_w - (out_w - hi)
                        for q in range(_U(q1 - q0)):
                            colf[_U(dst + q0) + q] = xf[_U(src + q0) + q]
                        for oh in range(b - a):
                            row = _U(dst + oh * out_w)
                            for t in range(_U(lo)):
                                colf[row + t] = _ZERO
                            for t in range(_U(hi), _U(out_w)):
                                colf[row + t] = _ZERO
                    continue
                for oh in range(r0, r1):
                    dst = _U(base + (oh - r0) * out_w)
                    ih = oh * sh + i * dh - pt
                    if ih < 0 or ih >= height:
                        for t in range(_U(out_w)):
                            colf[dst + t] = _ZERO
                        continue
                    for t in range(_U(lo)):
                        colf[dst + t] = _ZERO
                    src = _U(x0 + p * height * width + ih * width + lo * sw + j * dw - pl)
                    n = _U(hi - lo)
                    d0 = dst + _U(lo)
                    if sw == 1:
                        for t in range(n):
                            colf[d0 + t] = xf[src + t]
                    else:
                        for t in range(n):
                            colf[d0 + t] = xf[src + t * _U(sw)]
                    for t in range(_U(hi), _U(out_w)):
                        colf[dst + t] = _ZERO


@intrinsic
def _next_index(typingctx, counter):
    """Atomically ``counter[0] += 1`` (an int64 array), returning the value before: threads
    running one compiled loop take work items in turn without the GIL."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("add", data, context.get_constant(types.int64, 1), "monotonic")

    return types.int64(counter), codegen


@intrinsic
def _sgemm(typingctx, fn, trans_b, m, n, k, alpha, a, a_off, lda, b, b_off, ldb, c, c_off, ldc):
    """C = alpha A op(B) through the CBLAS ``sgemm`` at address ``fn`` (an ILP64 OpenBLAS:
    64-bit sizes), row-major float32: A (m, k) from ``a.flat[a_off]`` with row stride
    ``lda``, B from ``b.flat[b_off]`` with row stride ``ldb``, (k, n) or, when ``trans_b``,
    (n, k) and transposed; C (m, n) from ``c.flat[c_off]`` with row stride ``ldc``
    (overwritten: beta = 0). The address is an argument, so the compiled code can be cached."""
    if not all(isinstance(t, types.Array) and t.dtype == types.float32 for t in (a, b, c)):
        return None

    def codegen(context, builder, signature, args):
        i32, i64, f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
        ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, i64])
        fn_, tb, m_, n_, k_, alpha_, a_, a_off_, lda_, b_, b_off_, ldb_, c_, c_off_, ldc_ = args
        sig = signature.args

        def at(i, value, offset):
            data = context.make_array(sig[i])(context, builder, value).data
            return builder.bitcast(builder.gep(data, [offset]), ptr)

        const = ir.Constant
        # CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112
        op_b = builder.select(builder.icmp_signed("!=", tb, const(i64, 0)), const(i32, 112), const(i32, 111))
        call = builder.inttoptr(fn_, fnty.as_pointer())
        builder.call(call, [const(i32, 101), const(i32, 111), op_b, m_, n_, k_, builder.fptrunc(alpha_, f32),
                            at(6, a_, a_off_), lda_, at(9, b_, b_off_), ldb_, const(f32, 0.0), at(12, c_, c_off_), ldc_])
        return context.get_dummy_value()

    i64 = types.int64
    return types.none(i64, i64, i64, i64, i64, types.float64, a, i64, i64, b, i64, i64, c, i64, i64), codegen


@njit(nogil=True, cache=True, error_model="numpy")
def conv2d_bands(x, w2, y, counter, band_rows, sgemm, col, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl, bias, relu, z):
    """A 2-D float32 convolution (one group) by bands of output rows: each band's im2col
    columns into ``col`` (this thread's scratch, small enough to stay in cache), then one
    single-threaded BLAS product into the band's slice of every output channel. Bands
    (image, rows) are taken from ``counter`` by every thread running this loop, so the
    threads share one convolution without the GIL and without a barrier between bands.
    x: (N, C, H, W), w2: (M, C KH KW), y: (N, M, OH OW), all C-contiguous. Each band then
    gets _epilogue's bias (M,), residual z (flat, y's layout) and Relu while it is in cache."""
    images, planes, height, width = x.shape
    m, depth = w2.shape
    xf, yf = x.reshape(-1), y.reshape(-1)
    npix = out_h * out_w
    per_image = (out_h + band_rows - 1) // band_rows
    while True:
        b = _next_index(counter)
        if b >= images * per_image:
            return
        img = b // per_image
        r0 = (b - img * per_image) * band_rows
        r1 = min(r0 + band_rows, out_h)
        _im2col_rows(xf, img * planes * height * width, col, planes, height, width, r0, r1, out_w,
                     kh, kw, sh, sw, dh, dw, pt, pl)
        y0 = img * m * npix + r0 * out_w
        _sgemm(sgemm, 0, m, (r1 - r0) * out_w, depth, 1.0, w2, 0, depth, col, 0, (r1 - r0) * out_w, yf, y0, npix)
        if bias.size or z.size or relu:
            for ch in range(m):
                _epilogue(yf, y0 + ch * npix, (r1 - r0) * out_w, bias, ch, relu, z)


# -- Winograd F(2x2, 3x3) for 3x3 convolutions with unit strides -----------------------------------
# Y = A^T [ (G g G^T) * (B^T d B) ] A per 2x2 output tile: 16 products of (M, C) by (C, tiles)
# matrices, one per position of the 4x4 transformed tile, instead of one (M, 9C) by (9C, pixels)
# product over im2col columns: 2.25 times fewer multiply-adds, and no column matrix. The
# transforms only add and subtract (B, A) or halve (G, applied once to the weights in
# float64), so the rounding stays that of a few float32 additions per value.


@njit(nogil=True, cache=True, error_model="numpy")
def wino_weights(w, u):
    """u[4a + b, m, c] = (G g G^T)[a, b] for the 3x3 kernel g = w[m, c] (G's rows: (1, 0, 0),
    (1, 1, 1) / 2, (1, -1, 1) / 2, (0, 0, 1)), computed in float64 and rounded once."""
    t = np.empty((4, 3))
    for m in range(w.shape[0]):
        for c in range(w.shape[1]):
            for j in range(3):
                g0, g1, g2 = np.float64(w[m, c, 0, j]), np.float64(w[m, c, 1, j]), np.float64(w[m, c, 2, j])
                t[0, j] = g0
                t[1, j] = 0.5 * (g0 + g1 + g2)
                t[2, j] = 0.5 * (g0 - g1 + g2)
                t[3, j] = g2
            for a in range(4):
                h0, h1, h2 = t[a, 0], t[a, 1], t[a, 2]
                u[4 * a, m, c] = np.float32(h0)
                u[4 * a + 1, m, c] = np.float32(0.5 * (h0 + h1 + h2))
                u[4 * a + 2, m, c] = np.float32(0.5 * (h0 - h1 + h2))
                u[4 * a + 3, m, c] = np.float32(h2)


@njit(**_OPTS)
def wino_input(x, v, c0, c1, pt, pl, th, tw):
    """v[4a + b, c, ty tw + tx] = (B^T d B)[a, b] for the 4x4 patch d of channel c (in [c0, c1))
    of x (C, H, W) padded by (pt, pl) with zeros, at rows 2ty.. and columns 2tx..: a padded
    copy of each plane, then the row combinations (d0 - d2, d1 + d2, d2 - d1, d1 - d3) along
    whole rows and the same along each tile's columns."""
    height, width = x.shape[1], x.shape[2]
    ph, pw = 2 * th + 2, 2 * tw + 2
    plane = np.zeros(ph * pw, np.float32)
    rows = np.empty(4 * pw, np.float32)
    h_end = min(height, ph - pt)
    w_end = min(width, pw - pl)
    for c in range(c0, c1):
        src = x[c]
        for h in range(h_end):
            at = _U((h + pt) * pw + pl)
            row = src[h]
            for q in range(_U(w_end)):
                plane[at + q] = row[q]
        for ty in range(th):
            top = _U(2 * ty * pw)
            for q in range(_U(pw)):
                d0 = plane[top + q]
                d1 = plane[top + _U(pw) + q]
                d2 = plane[top + _U(2 * pw) + q]
                d3 = plane[top + _U(3 * pw) + q]
                rows[q] = d0 - d2
                rows[_U(pw) + q] = d1 + d2
                rows[_U(2 * pw) + q] = d2 - d1
                rows[_U(3 * pw) + q] = d1 - d3
            base = ty * tw
            for a in range(4):
                r = _U(a * pw)
                o0, o1, o2, o3 = v[4 * a, c], v[4 * a + 1, c], v[4 * a + 2, c], v[4 * a + 3, c]
                for tx in range(_U(tw)):
                    e0 = rows[r + _U(2) * tx]
                    e1 = rows[r + _U(2) * tx + _U(1)]
                    e2 = rows[r + _U(2) * tx + _U(2)]
                    e3 = rows[r + _U(2) * tx + _U(3)]
                    o0[base + tx] = e0 - e2
                    o1[base + tx] = e1 + e2
                    o2[base + tx] = e2 - e1
                    o3[base + tx] = e1 - e3


@njit(**_OPTS)
def wino_output(mx, y, m0, m1, th, tw, bias, relu, z):
    """y[m] for m in [m0, m1) from the tile products mx (16, M, tiles): each 2x2 output tile is
    A^T p A (rows: p0 + p1 + p2 and p1 - p2 - p3, then the same along the columns), then
    _epilogue's bias (when not empty), residual z (y's layout, flat; when not empty) and
    Relu, each rounded as the separate nodes round them. Tiles past an odd edge are dropped.

    Per channel, one flat pass over every tile reads each of the 16 products once and
    writes the tile's four outputs to four rows of scratch; the rows then interleave into
    the image and the epilogue runs over the whole plane (loops of all the tiles instead of
    one row of them: 64 channels of 56x56, 820 -> 300 us on one core)."""
    out_h, out_w = y.shape[1], y.shape[2]
    tiles = th * tw
    r = np.empty(4 * tiles, np.float32)
    half = out_w // 2
    yf = y.reshape(-1)
    for m in range(m0, m1):
        for t in range(_U(tiles)):
            s0 = (mx[0, m, t] + mx[4, m, t]) + mx[8, m, t]
            s1 = (mx[1, m, t] + mx[5, m, t]) + mx[9, m, t]
            s2 = (mx[2, m, t] + mx[6, m, t]) + mx[10, m, t]
            s3 = (mx[3, m, t] + mx[7, m, t]) + mx[11, m, t]
            r[t] = (s0 + s1) + s2
            r[_U(tiles) + t] = (s1 - s2) - s3
            s0 = (mx[4, m, t] - mx[8, m, t]) - mx[12, m, t]
            s1 = (mx[5, m, t] - mx[9, m, t]) - mx[13, m, t]
            s2 = (mx[6, m, t] - mx[10, m, t]) - mx[14, m, t]
            s3 = (mx[7, m, t] - mx[11, m, t]) - mx[15, m, t]
            r[_U(2 * tiles) + t] = (s0 + s1) + s2
            r[_U(3 * tiles) + t] = (s1 - s2) - s3
        plane = m * out_h * out_w
        for h in range(out_h):
            ty, i = h // 2, h % 2
            src0 = _U((2 * i) * tiles + ty * tw)
            src1 = src0 + _U(tiles)
            row = _U(plane + h * out_w)
            for tx in range(_U(half)):
                yf[row + _U(2) * tx] = r[src0 + tx]
                yf[row + _U(2) * tx + _U(1)] = r[src1 + tx]
            if out_w % 2:
                yf[row + _U(out_w - 1)] = r[src0 + _U(tw - 1)]
        if bias.size or z.size or relu:
            _epilogue(yf, plane, out_h * out_w, bias, m, relu, z)


# -- Attention: scores, softmax and the product with V, item by item without the GIL -----------


@njit(**_INLINE)
def _exp_shifted(x):
    """exp(x) for x <= 0 as _exp_nonpositive, but NaN for NaN (kept by the clip's operand order)."""
    return _exp_normal(_EXP_FLUSH if _EXP_FLUSH > x else x)


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def attention_items(q, k, v, y, bias, qs, ks, vs, ys, bs, shape, block, scale, counter, sgemm, scores, sums):
    """softmax(scale Q K^T + bias) V in float32 for items (batch, query head, block of
    ``block`` query rows) taken from ``counter`` until none is left, so every thread running
    this loop shares one Attention: per item, one BLAS product into ``scores`` (this
    thread's scratch, ``block`` x keys), the row maxima, exp(s - max) with the row sums,
    a second product into Y and the division of Y's rows by the sums (softmax's division
    deferred to the smaller result).

    q, k, v, y, bias: flat float32 arrays addressed by element strides qs/ks/vs/ys/bs
    (batch, head, row; the last axis contiguous; bias strides 0 where it broadcasts, and
    bias.size == 0 for none). shape: (batch, query heads, query rows, keys, head size,
    value head size, query heads per key/value head). A row whose maximum is not finite
    gives zeros when its bias is -inf throughout (a fully masked query), else NaN, as
    exp(s - max) / sum gives; a NaN score makes its row NaN."""
    batch, hq, sq, total, d, dv, group = shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], shape[6]
    per_head = (sq + block - 1) // block
    with_bias = bias.size > 0
    while True:
        item = _next_index(counter)
        if item >= batch * hq * per_head:
            return
        bh = item // per_head
        r0 = (item - bh * per_head) * block
        rows = min(block, sq - r0)
        b = bh // hq
        h = bh - b * hq
        hk = h // group
        _sgemm(sgemm, 1, rows, total, d, scale, q, b * qs[0] + h * qs[1] + r0 * qs[2], qs[2],
               k, b * ks[0] + hk * ks[1], ks[2], scores, 0, total)
        for r in range(rows):
            row = _U(r * total)
            b0 = _U(b * bs[0] + h * bs[1] + (r0 + r) * bs[2])
            if with_bias:
                for j in range(_U(total)):
                    scores[row + j] += bias[b0 + j]
            m = -_INF
            for j in range(_U(total)):
                m = _max_step(m, scores[row + j])
            if not (m - m == _ZERO):  # no finite maximum: -inf throughout, a NaN or +inf
                dead = with_bias
                if with_bias:
                    for j in range(_U(total)):
                        dead = dead and bias[b0 + j] == -_INF
                fill = _ZERO if dead else _f32(np.nan)
                for j in range(_U(total)):
                    scores[row + j] = fill
                sums[r] = _ONE
                continue
            s = _ZERO
            for j in range(_U(total)):
                e = _exp_shifted(scores[row + j] - m)
                scores[row + j] = e
                s = _sum_step(s, e)
            sums[r] = s
        y0 = b * ys[0] + h * ys[1] + r0 * ys[2]
        _sgemm(sgemm, 0, rows, dv, total, 1.0, scores, 0, total, v, b * vs[0] + hk * vs[1], vs[2], y, y0, ys[2])
        for r in range(rows):
            o = _U(y0 + r * ys[2])
            s = sums[r]
            for j in range(_U(dv)):
                y[o + j] = y[o + j] / s


@njit(nogil=True, cache=True, error_model="numpy")
def dense_chain(x, weights, biases, layers, y):
    """Consecutive dense layers on a few rows, each as dense_small (so the same results as
    the layers one by one): x -> layer 0 -> ... -> y. weights and biases: every layer's B
    (row-major, (K, N) or, with trans_b, (N, K)) and C packed in two float32 arrays;
    layers: int64 (L, 6) of (K, N, trans_b, relu, B offset, C offset or -1 for none).
    Intermediate rows are allocated here."""
    rows = x.shape[0]
    last = layers.shape[0] - 1
    cur = np.empty((rows, layers[0, 1]), np.float32) if last else y
    _dense_layer(x, weights, biases, layers, 0, cur)
    for layer in range(1, last + 1):
        out = y if layer == last else np.empty((rows, layers[layer, 1]), np.float32)
        _dense_layer(cur, weights, biases, layers, layer, out)
        cur = out


@njit(**_INLINE)
def _dense_layer(x, weights, biases, layers, layer, out):
    kk, n, tb, relu, wo, bo = layers[layer]
    b = biases[bo:bo + n] if bo >= 0 else biases[0:0]
    dense_small(x, weights[wo:wo + kk * n], b, relu != 0, tb != 0, out)


# -- LSTM: the whole recurrence of the common configuration in one call --------------------------


@njit(**_INLINE)
def _sigmoid1(x):
    # sigmoid_exact's formula for one value
    e = _exp_of_clipped(_clip(x, _SIGMOID_LOW, _SIGMOID_HIGH))
    return e / (_ONE + e)


@njit(**_INLINE)
def _tanh1(x):
    """tanh(x) = sign(x) (-e / (2 + e)), e = expm1(-2 |x|) (a few ulp: no cancellation
    near 0, 1 from |x| = 9.1 on); NaN stays NaN, -0 stays -0."""
    e = _expm1_neg(_f32(-2.0) * abs(x))
    return math.copysign(-e / (_f32(2.0) + e), x)


@njit(**_INLINE)
def _times_rows_t(a, a0, rf, out, rows, depth, width):
    """out[r, j] = a[a0 + r depth: + depth] . R[j] for R (width, depth) row-major (width a
    multiple of 4: an LSTM's four gate blocks): a few
    rows (a batch of hidden states) times R^T without transposing R, four rows of R per
    pass so each load of ``a`` serves four products (BLAS's sgemm would pack all of R on
    every call, which costs more than the product at batch 1)."""
    for r in range(rows):
        ab = _U(a0 + r * depth)
        o = _U(r * width)
        for j in range(0, width - 3, 4):
            b0 = _U(j * depth)
            b1 = b0 + _U(depth)
            b2 = b1 + _U(depth)
            b3 = b2 + _U(depth)
            s0 = s1 = s2 = s3 = _ZERO
            for q in range(_U(depth)):
                v = a[ab + q]
                s0 = _sum_step(s0, v * rf[b0 + q])
                s1 = _sum_step(s1, v * rf[b1 + q])
                s2 = _sum_step(s2, v * rf[b2 + q])
                s3 = _sum_step(s3, v * rf[b3 + q])
            out[o + _U(j)] = s0
            out[o + _U(j + 1)] = s1
            out[o + _U(j + 2)] = s2
            out[o + _U(j + 3)] = s3


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def lstm_default(xw, r, h0, c, y, sgemm, gates):
    """The LSTM recurrence with sigmoid, tanh, tanh and no peephole, clip or coupled gates
    over full sequences, one call for all time steps: per step one product
    ``gates = h R^T`` (BLAS's sgemm at address ``sgemm`` from a batch of 8, else
    _times_rows_t) and one fused pass over the hidden units: i o f = sigmoid(gates +
    xw[t]), g = tanh(...), c = f c + i g, h = o tanh(c), written straight into y[t].

    xw: (S, N, 4H) input projections plus biases, gate blocks in ONNX's order i, o, f, c;
    r: (4H, H) R in the same order; h0: (N, H); c: (N, H), the cell state, updated in
    place; y: (S, N, H) receives every hidden state; gates: (N, 4H) scratch."""
    steps, batch, g4 = xw.shape
    hidden = g4 // 4
    xf, yf, hf, cf, gf = xw.reshape(-1), y.reshape(-1), h0.reshape(-1), c.reshape(-1), gates.reshape(-1)
    rf = r.reshape(-1)
    for t in range(steps):
        src = hf if t == 0 else yf
        s0 = 0 if t == 0 else (t - 1) * batch * hidden
        if batch >= 8:
            _sgemm(sgemm, 1, batch, g4, hidden, 1.0, src, s0, hidden, r, 0, hidden, gf, 0, g4)
        else:
            _times_rows_t(src, s0, rf, gf, batch, hidden, g4)
        for n in range(batch):
            gb = _U(n * g4)
            xb = _U((t * batch + n) * g4)
            hb = _U(n * hidden)
            yb = _U((t * batch + n) * hidden)
            for j in range(_U(hidden)):
                i = _sigmoid1(gf[gb + j] + xf[xb + j])
                o = _sigmoid1(gf[gb + _U(hidden) + j] + xf[xb + _U(hidden) + j])
                f = _sigmoid1(gf[gb + _U(2 * hidden) + j] + xf[xb + _U(2 * hidden) + j])
                g = _tanh1(gf[gb + _U(3 * hidden) + j] + xf[xb + _U(3 * hidden) + j])
                cn = f * cf[hb + j] + i * g
                cf[hb + j] = cn
                yf[yb + j] = o * _tanh1(cn)


@njit(nogil=True, cache=True, error_model="numpy")
def rows_op(full, row, y, op, row_first):
    """y[r, j] = full[r, j] op row[j] (``row_first``: row[j] op full[r, j]) over 2-D float32
    arrays, op 0 to 3: + - * / (IEEE, as numpy's): a binary operator whose second input
    broadcasts along the leading axes, one pass without numpy's broadcast iterator."""
    rows, n = full.shape
    ff, yf = full.reshape(-1), y.reshape(-1)
    for r in range(rows):
        base = _U(r * n)
        if op == 0:
            for j in range(_U(n)):
                yf[base + j] = ff[base + j] + row[j]
        elif op == 1:
            if row_first:
                for j in range(_U(n)):
                    yf[base + j] = row[j] - ff[base + j]
            else:
                for j in range(_U(n)):
                    yf[base + j] = ff[base + j] - row[j]
        elif op == 2:
            for j in range(_U(n)):
                yf[base + j] = ff[base + j] * row[j]
        elif row_first:
            for j in range(_U(n)):
                yf[base + j] = row[j] / ff[base + j]
        else:
            for j in range(_U(n)):
                yf[base + j] = ff[base + j] / row[j]


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def row_sums(x, out, count):
    """out[r] = (sum of row r of the float32 (rows, n) array x) / count (count 1: the sum).
    The sum runs in the vector lanes LLVM unrolls (reassociation allowed for this loop only):
    a fixed order for a given n, within a few ulp of numpy's pairwise sums at these lengths,
    as einsum's SIMD loop (the reference) is; then one rounded division."""
    rows, n = x.shape
    xf = x.reshape(-1)
    for r in range(rows):
        base = _U(r * n)
        acc = np.float32(0.0)
        for j in range(_U(n)):
            acc += xf[base + j]
        out[r] = acc / count if count != 1 else acc


@njit(nogil=True, cache=True, error_model="numpy")
def cols_op(full, col, y, op, col_first):
    """y[o, c, i] = full[o, c, i] op col[c] (``col_first``: col[c] op full[o, c, i]) over
    float32 arrays (full and y 3-D, col 1-D), op 0 to 3: + - * / (IEEE, as numpy's): a
    binary operator whose second input is one value per channel (N, C, 1, 1) broadcast along
    the inner axes, one pass where numpy's iterator runs a short inner loop per channel."""
    outer, count, inner = full.shape
    ff, yf = full.reshape(-1), y.reshape(-1)
    for o in range(outer):
        for c in range(count):
            base = _U((o * count + c) * inner)
            v = col[c]
            if op == 0:
                for j in range(_U(inner)):
                    yf[base + j] = ff[base + j] + v
            elif op == 1:
                if col_first:
                    for j in range(_U(inner)):
                        yf[base + j] = v - ff[base + j]
                else:
                    for j in range(_U(inner)):
                        yf[base + j] = ff[base + j] - v
            elif op == 2:
                for j in range(_U(inner)):
                    yf[base + j] = ff[base + j] * v
            elif col_first:
                for j in range(_U(inner)):
                    yf[base + j] = v / ff[base + j]
            else:
                for j in range(_U(inner)):
                    yf[base + j] = ff[base + j] / v


@njit(nogil=True, cache=True, error_model="numpy")
def epilogue_rows(y, bias, relu, z):
    """In place on the rows of a 2-D float32 array (a convolution's output as (N M, pixels)):
    _epilogue's bias (row r gets bias[r % M]; none when empty), residual z (flat, y's
    layout; none when empty) and Relu, in one pass instead of up to three."""
    rows, cols = y.shape
    yf = y.reshape(-1)
    m = max(bias.size, 1)
    for r in range(rows):
        _epilogue(yf, r * cols, cols, bias, r % m, relu, z)


@njit(nogil=True, error_model="numpy", fastmath={"reassoc", "nsz", "contract"})
def _dot_f32(xf, xo, wf, wo, n):
    # float32 dot product of two contiguous runs (reassociated: several vector accumulators,
    # as a BLAS kernel sums in its own order)
    s = _ZERO
    for c in range(_U(n)):
        s += xf[xo + c] * wf[wo + c]
    return s


@njit(**_OPTS)
def dense_small(x, w, b, relu, trans_b, y):
    """y = x @ W (+ b) into y [M, N] for float32 C-contiguous x [M, K] and W [K, N] ([N, K] when
    ``trans_b``), b of N values or none (empty), then max(y, 0) when ``relu`` (NaN kept):
    a few rows through a dense layer, Gemm/MatMul + bias + Relu in one compiled call where
    numpy needs three (product, addition, maximum: ~1.5 us each at one row). Products are
    summed in float32 in the loop's order (BLAS sums in its own: results agree within
    float32 rounding). The caller allocates y: an array made and returned by a compiled
    function costs ~1 us more to hand back to Python."""
    m, kk = x.shape
    n = y.shape[1]
    xf = x.reshape(-1)
    wf = w.reshape(-1)
    yf = y.reshape(-1)
    has_b = b.shape[0] > 0
    for i in range(m):
        row = _U(i * n)
        if trans_b:
            for j in range(_U(n)):
                yf[row + j] = _dot_f32(xf, _U(i * kk), wf, j * _U(kk), kk)
        else:
            for j in range(_U(n)):
                yf[row + j] = _ZERO
            # four rows of W per pass over y: a quarter of the loads and stores of y
            k4 = kk - kk % 4
            xi = _U(i * kk)
            for k in range(0, k4, 4):
                a0 = xf[xi + _U(k)]
                a1 = xf[xi + _U(k + 1)]
                a2 = xf[xi + _U(k + 2)]
                a3 = xf[xi + _U(k + 3)]
                w0 = _U(k * n)
                w1 = w0 + _U(n)
                w2 = w1 + _U(n)
                w3 = w2 + _U(n)
                for j in range(_U(n)):
                    yf[row + j] += ((a0 * wf[w0 + j] + a1 * wf[w1 + j]) + a2 * wf[w2 + j]) + a3 * wf[w3 + j]
            for k in range(k4, kk):
                a = xf[xi + _U(k)]
                wrow = _U(k * n)
                for j in range(_U(n)):
                    yf[row + j] += a * wf[wrow + j]
        if has_b:
            for j in range(_U(n)):
                yf[row + j] += b[j]
        if relu:
            for j in range(_U(n)):
                v = yf[row + j]
                yf[row + j] = _ZERO if v < _ZERO else v


# -- batched 2-D transpose of 4-byte elements ---------------------------------------------------

# an 8x8 block of 32-bit values transposed in AVX registers: eight row loads, three rounds
# of eight shuffles (pairs of rows interleaved by 1, 2, then 4 elements), eight row stores.
# LLVM lowers the shuffles to vunpcklps / vshufps / vperm2f128 (SSE: two halves each);
# an element-by-element loop is latency-bound on its scattered stores (3-4x slower).
_UNPACK_LO, _UNPACK_HI = (0, 8, 1, 9, 4, 12, 5, 13), (2, 10, 3, 11, 6, 14, 7, 15)
_PAIRS_LO, _PAIRS_HI = (0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15)
_HALVES_LO, _HALVES_HI = (0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)


@intrinsic
def _transpose8x8(typingctx, src, s0, ss, dst, d0, ds):
    # dst[d0 + c ds + r] = src[s0 + r ss + c] for r, c < 8 (1-D uint32 arrays, intp offsets)
    if not all(isinstance(a, types.Array) and a.dtype == types.uint32 for a in (src, dst)):
        return None

    def codegen(context, builder, signature, args):
        ty = signature.args
        s_base, s_step, d_base, d_step = (context.cast(builder, args[i], ty[i], types.intp) for i in (1, 2, 4, 5))
        sp = context.make_array(ty[0])(context, builder, args[0]).data
        dp = context.make_array(ty[3])(context, builder, args[3]).data
        i32 = ir.IntType(32)
        vec = ir.VectorType(i32, 8)

        def row_ptr(base, ptr, step, i):
            at = builder.add(base, builder.mul(step, ir.Constant(step.type, i)))
            return builder.bitcast(builder.gep(ptr, [at]), vec.as_pointer())

        def shuffle(a, b, mask):
            return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(i32, 8), [ir.Constant(i32, m) for m in mask]))

        r = [builder.load(row_ptr(s_base, sp, s_step, i), align=4) for i in range(8)]
        t = []
        for i in range(0, 8, 2):
            t += [shuffle(r[i], r[i + 1], _UNPACK_LO), shuffle(r[i], r[i + 1], _UNPACK_HI)]
        s = []
        for a, b in ((0, 2), (1, 3), (4, 6), (5, 7)):
            s += [shuffle(t[a], t[b], _PAIRS_LO), shuffle(t[a], t[b], _PAIRS_HI)]
        o = [shuffle(s[i], s[i + 4], _HALVES_LO) for i in range(4)] + [shuffle(s[i], s[i + 4], _HALVES_HI) for i in range(4)]
        for i in range(8):
            builder.store(o[i], row_ptr(d_base, dp, d_step, i), align=4)
        return context.get_dummy_value()

    return types.void(src, s0, ss, dst, d0, ds), codegen


@njit(nogil=True, cache=True, error_model="numpy")
def transpose_u32(src, dst, lo, hi):
    """dst[b, j, i] = src[b, i, j] for the 8-row blocks [lo, hi) of src (B, M, N) counted
    across batches (block k: batch k // ceil(M / 8), rows from 8 (k % ceil(M / 8))); both
    C-contiguous uint32 (any 4-byte type viewed so). 8x8 register transposes along each
    block's rows (eight sequential read streams), element copies for the edges."""
    batches, m, n = src.shape
    per = (m + 7) // 8
    n_full = n - n % 8
    sf, df = src.reshape(-1), dst.reshape(-1)
    for k in range(lo, hi):
        b = k // per
        i0 = (k - b * per) * 8
        i1 = min(i0 + 8, m)
        base = b * m * n
        j_lo = 0
        if i1 - i0 == 8:
            for j in range(0, n_full, 8):
                _transpose8x8(sf, base + i0 * n + j, n, df, base + j * m + i0, m)
            j_lo = n_full
        for i in range(i0, i1):
            for j in range(j_lo, n):
                df[base + j * m + i] = sf[base + i * n + j]


@njit(nogil=True, cache=True)
def address(a):
    """The address of an array's data (ndarray.ctypes.data costs four times as much)."""
    return a.ctypes.data


def _pointer(dtype):
    @intrinsic
    def pointer(typingctx, address):
        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(dtype).as_pointer())

        return types.CPointer(dtype)(types.int64), codegen

    return pointer


_i64_at = _pointer(types.int64)


@intrinsic
def _call_act(typingctx, fn, address, count):
    """fn(address, count) for the address of a compiled in-place chain ``void(int64, int64)``
    (native.chain_loops.compile_inplace): the block of ``count`` float32 at ``address``."""

    def codegen(context, builder, signature, values):
        fn_address, block, n = values
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(64), ir.IntType(64)])
        builder.call(builder.inttoptr(fn_address, fnty.as_pointer()), [block, n])
        return context.get_dummy_value()

    return types.none(types.int64, types.int64, types.int64), codegen
_f32_at = _pointer(types.float32)
_u32_at = _pointer(types.uint32)


# -- part functions of native.team's jobs: each gets the address of an int64 argument block and a part
# index. They live here, not in native.team: numba's cache of a function is keyed on its own file only,
# so a part compiled elsewhere would keep stale copies of the loops below it calls.

#: float32 values per block a part finishes before it applies a chain to them (``act``): 512 KiB,
#: in L2 (2 MiB a core here) with the part's operands, and few enough BLAS calls per part
#: (each call packs its operands again)
ACT_BLOCK = 1 << 17

#: elementwise kinds (first word of the arguments)
SIGMOID, SIGMOID_EXACT, ERF, RELU = 0, 1, 2, 3


@njit(**_OPTS)
def relu(x, y):
    # max(x, 0) keeping -0 and NaN (np.clip's and onnxruntime's Relu)
    for i in range(x.size):
        v = x[i]
        y[i] = _ZERO if v < _ZERO else v


#: positions of each part's fields (native/layout.py declares the blocks): constants of the compiled decoders
_AT_ELEMENTWISE = LAYOUTS["elementwise_part"].at
_AT_TRANSPOSE = LAYOUTS["transpose_part"].at
_AT_SOFTMAX = LAYOUTS["softmax_part"].at
_AT_DEPTHWISE = LAYOUTS["depthwise_part"].at
_AT_POINTWISE_GROUPS = LAYOUTS["pointwise_groups_part"].at
_AT_IM2COL = LAYOUTS["im2col_part"].at
_AT_WINO_INPUT = LAYOUTS["wino_input_part"].at
_AT_WINO_GEMM = LAYOUTS["wino_gemm_part"].at
_AT_WINO_OUTPUT = LAYOUTS["wino_output_part"].at
_AT_POOL = LAYOUTS["pool_part"].at
_AT_AFFINE = LAYOUTS["affine_part"].at
_AT_GEMM = LAYOUTS["gemm_part"].at
_AT_BANDS = LAYOUTS["bands_part"].at


def elementwise_part(args, part):
    """Part ``part`` of y = f(x) over float32 arrays: args = (kind, x address, y address,
    size, parts); the kinds are SIGMOID (the fast loop, the exact one where it flags
    subnormal results), SIGMOID_EXACT (x may be y) and ERF."""
    a = carray(_i64_at(args), len(_AT_ELEMENTWISE))
    n, parts = a[_AT_ELEMENTWISE.n], a[_AT_ELEMENTWISE.parts]
    lo, hi = n * part // parts, n * (part + 1) // parts
    x = carray(_f32_at(a[_AT_ELEMENTWISE.x]), n)[lo:hi]
    y = carray(_f32_at(a[_AT_ELEMENTWISE.y]), n)[lo:hi]
    kind = a[_AT_ELEMENTWISE.kind]
    if kind == SIGMOID:
        if sigmoid(x, y):
            sigmoid_exact(x, y)
    elif kind == SIGMOID_EXACT:
        sigmoid_exact(x, y)
    elif kind == ERF:
        erf(x, y)
    else:
        relu(x, y)


def transpose_part(args, part):
    """Part ``part`` of transpose_u32: args = (src address, dst address, batches, m, n,
    parts), the blocks of 8 rows split evenly."""
    a = carray(_i64_at(args), len(_AT_TRANSPOSE))
    batches, m, n, parts = a[_AT_TRANSPOSE.batches], a[_AT_TRANSPOSE.m], a[_AT_TRANSPOSE.n], a[_AT_TRANSPOSE.parts]
    blocks = batches * ((m + 7) // 8)
    src = carray(_u32_at(a[_AT_TRANSPOSE.src]), (batches, m, n))
    dst = carray(_u32_at(a[_AT_TRANSPOSE.dst]), (batches, n, m))
    transpose_u32(src, dst, blocks * part // parts, blocks * (part + 1) // parts)


def softmax_part(args, part):
    """Part ``part`` of Softmax (LogSoftmax when ``log``) over the rows of float32 (rows, n)
    arrays: args = (x address, y address, rows, n, log, parts)."""
    a = carray(_i64_at(args), len(_AT_SOFTMAX))
    rows, n, parts = a[_AT_SOFTMAX.rows], a[_AT_SOFTMAX.n], a[_AT_SOFTMAX.parts]
    lo, hi = rows * part // parts, rows * (part + 1) // parts
    x = carray(_f32_at(a[_AT_SOFTMAX.x]), (rows, n))[lo:hi]
    y = carray(_f32_at(a[_AT_SOFTMAX.y]), (rows, n))[lo:hi]
    maxima = np.empty(hi - lo, np.float32)
    row_maxima(x, maxima)
    softmax_rows(x, maxima, y, a[_AT_SOFTMAX.log] != 0)


def depthwise_part(args, part):
    """Part ``part`` of depthwise_conv2d over float32 planes: args = (x address, w address,
    y address, bias address, z address, planes, height, width, channels, kh, kw, out_h,
    out_w, sh, sw, dh, dw, pt, pl, bias size, z size, relu, parts), blocks of whole planes."""
    a = carray(_i64_at(args), len(_AT_DEPTHWISE))
    planes, height, width, n_ch, kh, kw, out_h, out_w = a[_AT_DEPTHWISE.planes], a[_AT_DEPTHWISE.height], a[_AT_DEPTHWISE.width], a[_AT_DEPTHWISE.channels], a[_AT_DEPTHWISE.kh], a[_AT_DEPTHWISE.kw], a[_AT_DEPTHWISE.out_h], a[_AT_DEPTHWISE.out_w]
    parts = a[_AT_DEPTHWISE.parts]
    lo, hi = planes * part // parts, planes * (part + 1) // parts
    x = carray(_f32_at(a[_AT_DEPTHWISE.x]), (planes, height, width))[lo:hi]
    w = carray(_f32_at(a[_AT_DEPTHWISE.w]), (n_ch, kh, kw))
    y = carray(_f32_at(a[_AT_DEPTHWISE.y]), (planes, out_h, out_w))
    bias = carray(_f32_at(a[_AT_DEPTHWISE.bias]), a[_AT_DEPTHWISE.bias_size])
    npix = out_h * out_w
    z = carray(_f32_at(a[_AT_DEPTHWISE.z]), a[_AT_DEPTHWISE.z_size])[lo * npix:hi * npix] if a[_AT_DEPTHWISE.z_size] else carray(_f32_at(a[_AT_DEPTHWISE.z]), 0)
    act = a[_AT_DEPTHWISE.act]
    if act == 0:
        depthwise_conv2d(x, w, y[lo:hi], lo, a[_AT_DEPTHWISE.sh], a[_AT_DEPTHWISE.sw], a[_AT_DEPTHWISE.dh], a[_AT_DEPTHWISE.dw], a[_AT_DEPTHWISE.pt], a[_AT_DEPTHWISE.pl], bias, a[_AT_DEPTHWISE.relu] != 0, z)
        return
    # a chain after the convolution: planes by chunks of about ACT_BLOCK values, each chunk's
    # chain applied while its planes are in cache
    chunk = max(1, ACT_BLOCK // npix)
    for p0 in range(lo, hi, chunk):
        p1 = min(hi, p0 + chunk)
        zc = z[(p0 - lo) * npix:(p1 - lo) * npix] if z.size else z
        depthwise_conv2d(x[p0 - lo:p1 - lo], w, y[p0:p1], p0, a[_AT_DEPTHWISE.sh], a[_AT_DEPTHWISE.sw], a[_AT_DEPTHWISE.dh], a[_AT_DEPTHWISE.dw], a[_AT_DEPTHWISE.pt], a[_AT_DEPTHWISE.pl], bias, a[_AT_DEPTHWISE.relu] != 0, zc)
        _call_act(act, a[_AT_DEPTHWISE.y] + p0 * npix * 4, (p1 - p0) * npix)


def pointwise_groups_part(args, part):
    """Part ``part`` of a grouped 1x1 float32 convolution: for each (image, group) item of
    the part, Y[n, g] (mg, P) = W[g] (mg, cg) X[n, g] (cg, P) by one single-threaded BLAS
    call, then _epilogue's bias, residual and Relu on those rows while they are in cache.
    With ``shuffled`` (no residual), row j of group g goes to channel j groups + g (the
    channel shuffle folded into the convolution: Y's rows at a stride of ``groups``).
    args = (w address, x address, y address, bias address, z address, images, groups, mg,
    cg, npix, sgemm address, bias size, z size, relu, shuffled, parts); items split evenly."""
    a = carray(_i64_at(args), len(_AT_POINTWISE_GROUPS))
    images, groups, mg, cg, npix, parts = a[_AT_POINTWISE_GROUPS.images], a[_AT_POINTWISE_GROUPS.groups], a[_AT_POINTWISE_GROUPS.mg], a[_AT_POINTWISE_GROUPS.cg], a[_AT_POINTWISE_GROUPS.npix], a[_AT_POINTWISE_GROUPS.parts]
    items = images * groups
    w = carray(_f32_at(a[_AT_POINTWISE_GROUPS.w]), groups * mg * cg)
    x = carray(_f32_at(a[_AT_POINTWISE_GROUPS.x]), items * cg * npix)
    y = carray(_f32_at(a[_AT_POINTWISE_GROUPS.y]), items * mg * npix)
    bias = carray(_f32_at(a[_AT_POINTWISE_GROUPS.bias]), a[_AT_POINTWISE_GROUPS.bias_size])
    z = carray(_f32_at(a[_AT_POINTWISE_GROUPS.z]), a[_AT_POINTWISE_GROUPS.z_size])
    relu = a[_AT_POINTWISE_GROUPS.relu] != 0
    shuffled = a[_AT_POINTWISE_GROUPS.shuffled] != 0
    for item in range(items * part // parts, items * (part + 1) // parts):
        g = item % groups
        if shuffled:
            y0, row = (item - g) * mg * npix + g * npix, groups * npix
        else:
            y0, row = item * mg * npix, npix
        _sgemm(a[_AT_POINTWISE_GROUPS.sgemm], 0, mg, npix, cg, 1.0, w, g * mg * cg, cg, x, item * cg * npix, npix, y, y0, row)
        if bias.size or z.size or relu:
            for ch in range(mg):
                _epilogue(y, y0 + ch * row, npix, bias, g * mg + ch, relu, z)


def im2col_part(args, part):
    """Part ``part`` of im2col2d over blocks of whole planes: args = (x address, column
    address, planes, height, width, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl, parts)."""
    a = carray(_i64_at(args), len(_AT_IM2COL))
    planes, height, width, out_h, out_w, kh, kw, parts = a[_AT_IM2COL.planes], a[_AT_IM2COL.height], a[_AT_IM2COL.width], a[_AT_IM2COL.out_h], a[_AT_IM2COL.out_w], a[_AT_IM2COL.kh], a[_AT_IM2COL.kw], a[_AT_IM2COL.parts]
    lo, hi = planes * part // parts, planes * (part + 1) // parts
    rows = kh * kw * out_h * out_w  # column elements per plane
    x = carray(_f32_at(a[_AT_IM2COL.x]), (planes, height, width))[lo:hi]
    col = carray(_f32_at(a[_AT_IM2COL.col]), planes * rows)[lo * rows:hi * rows]
    im2col2d(x, col, out_h, out_w, kh, kw, a[_AT_IM2COL.sh], a[_AT_IM2COL.sw], a[_AT_IM2COL.dh], a[_AT_IM2COL.dw], a[_AT_IM2COL.pt], a[_AT_IM2COL.pl])


def wino_input_part(args, part):
    """Part ``part`` of wino_input over blocks of channels: args = (x address, v address,
    channels, height, width, pt, pl, th, tw, parts)."""
    a = carray(_i64_at(args), len(_AT_WINO_INPUT))
    ch, height, width, th, tw, parts = a[_AT_WINO_INPUT.channels], a[_AT_WINO_INPUT.height], a[_AT_WINO_INPUT.width], a[_AT_WINO_INPUT.th], a[_AT_WINO_INPUT.tw], a[_AT_WINO_INPUT.parts]
    x = carray(_f32_at(a[_AT_WINO_INPUT.x]), (ch, height, width))
    v = carray(_f32_at(a[_AT_WINO_INPUT.v]), (16, ch, th * tw))
    wino_input(x, v, ch * part // parts, ch * (part + 1) // parts, a[_AT_WINO_INPUT.pt], a[_AT_WINO_INPUT.pl], th, tw)


def wino_gemm_part(args, part):
    """Part ``part`` of the 16 tile products mx[i] = u[i] v[i] (u (16, M, C), v (16, C, T)),
    each one single-threaded BLAS call: args = (u address, v address, mx address, M, C, T,
    sgemm address, parts)."""
    a = carray(_i64_at(args), len(_AT_WINO_GEMM))
    m, c, t, parts = a[_AT_WINO_GEMM.m], a[_AT_WINO_GEMM.c], a[_AT_WINO_GEMM.t], a[_AT_WINO_GEMM.parts]
    u = carray(_f32_at(a[_AT_WINO_GEMM.u]), 16 * m * c)
    v = carray(_f32_at(a[_AT_WINO_GEMM.v]), 16 * c * t)
    mx = carray(_f32_at(a[_AT_WINO_GEMM.mx]), 16 * m * t)
    for i in range(16 * part // parts, 16 * (part + 1) // parts):
        _sgemm(a[_AT_WINO_GEMM.sgemm], 0, m, t, c, 1.0, u, i * m * c, c, v, i * c * t, t, mx, i * m * t, t)


def wino_output_part(args, part):
    """Part ``part`` of wino_output over blocks of output channels: args = (mx address,
    y address, M, out_h, out_w, th, tw, bias address, bias size, relu, z address, z size,
    parts)."""
    a = carray(_i64_at(args), len(_AT_WINO_OUTPUT))
    m, out_h, out_w, th, tw, parts = a[_AT_WINO_OUTPUT.m], a[_AT_WINO_OUTPUT.out_h], a[_AT_WINO_OUTPUT.out_w], a[_AT_WINO_OUTPUT.th], a[_AT_WINO_OUTPUT.tw], a[_AT_WINO_OUTPUT.parts]
    mx = carray(_f32_at(a[_AT_WINO_OUTPUT.mx]), (16, m, th * tw))
    y = carray(_f32_at(a[_AT_WINO_OUTPUT.y]), (m, out_h, out_w))
    bias = carray(_f32_at(a[_AT_WINO_OUTPUT.bias]), a[_AT_WINO_OUTPUT.bias_size])
    z = carray(_f32_at(a[_AT_WINO_OUTPUT.z]), a[_AT_WINO_OUTPUT.z_size])
    wino_output(mx, y, m * part // parts, m * (part + 1) // parts, th, tw, bias, a[_AT_WINO_OUTPUT.relu] != 0, z)


@njit(**_INLINE)
def _pool_part_arrays(args, part):
    # pool_part's argument block and its block of planes: (block, x, y, scale)
    a = carray(_i64_at(args), len(_AT_POOL))
    planes, height, width, out_h, out_w, parts = a[_AT_POOL.planes], a[_AT_POOL.height], a[_AT_POOL.width], a[_AT_POOL.out_h], a[_AT_POOL.out_w], a[_AT_POOL.parts]
    lo, hi = planes * part // parts, planes * (part + 1) // parts
    x = carray(_f32_at(a[_AT_POOL.x]), (planes, height, width))[lo:hi]
    y = carray(_f32_at(a[_AT_POOL.y]), (planes, out_h, out_w))[lo:hi]
    return a, x, y, carray(_f32_at(a[_AT_POOL.scale]), (a[_AT_POOL.scale_rows], a[_AT_POOL.scale_cols]))


def pool_part(args, part):
    """Part ``part`` of pool2d over blocks of whole planes: args = (x address, y address,
    scale address, planes, height, width, out_h, out_w, scale rows, scale columns, kh, kw,
    sh, sw, dh, dw, pt, pl, is_max, parts)."""
    a, x, y, inv = _pool_part_arrays(args, part)
    pool2d(x, y, a[_AT_POOL.kh], a[_AT_POOL.kw], a[_AT_POOL.sh], a[_AT_POOL.sw], a[_AT_POOL.dh], a[_AT_POOL.dw], a[_AT_POOL.pt], a[_AT_POOL.pl], a[_AT_POOL.is_max] != 0, inv)


def pool_s2_part(args, part):
    """Part ``part`` of pool2d_s2 over blocks of whole planes: pool_part's args (3x3 windows,
    strides 2, dilations 1). Its own part function, as pool_same_part."""
    a, x, y, inv = _pool_part_arrays(args, part)
    pool2d_s2(x, y, a[_AT_POOL.pt], a[_AT_POOL.pl], a[_AT_POOL.is_max] != 0, inv)


def pool_same_part(args, part):
    """Part ``part`` of pool2d_same over blocks of whole planes: pool_part's args (the
    strides and dilations 1). Its own part function: a model without same-size pools never
    loads its code (each compiled function loaded from numba's cache is resident memory)."""
    a, x, y, inv = _pool_part_arrays(args, part)
    pool2d_same(x, y, a[_AT_POOL.kh], a[_AT_POOL.kw], a[_AT_POOL.pt], a[_AT_POOL.pl], a[_AT_POOL.is_max] != 0, inv)


def affine_part(args, part):
    """Part ``part`` of affine_rows over blocks of rows: args = (x address, a address,
    b address, y address, rows, columns, relu, parts)."""
    a = carray(_i64_at(args), len(_AT_AFFINE))
    rows, cols, parts = a[_AT_AFFINE.rows], a[_AT_AFFINE.cols], a[_AT_AFFINE.parts]
    lo, hi = rows * part // parts, rows * (part + 1) // parts
    x = carray(_f32_at(a[_AT_AFFINE.x]), (rows, cols))[lo:hi]
    y = carray(_f32_at(a[_AT_AFFINE.y]), (rows, cols))[lo:hi]
    affine_rows(x, carray(_f32_at(a[_AT_AFFINE.a]), rows)[lo:hi], carray(_f32_at(a[_AT_AFFINE.b]), rows)[lo:hi], y, a[_AT_AFFINE.relu] != 0)


def gemm_part(args, part):
    """Part ``part`` of C = A B (float32, row-major, unit column strides): one
    single-threaded BLAS call on a block of C's rows (``by_rows``) or columns, blocks of 16
    shared evenly, then _epilogue's bias (one per row), residual (C's layout) and Relu on
    the block while it is in cache. args = (a address, b address, c address, m, k, n, lda,
    ldb, ldc, sgemm address, by_rows, bias address, bias size, z address, z size, relu,
    trans_b, column bias address, column bias size, parts); with trans_b, B is the
    transpose of an (n, k) matrix of row stride ldb (a Gemm's transB, a linear layer's
    weights as exported). A column bias (n values: a linear layer's) is added to the block
    after the product, one rounding as Add's."""
    a = carray(_i64_at(args), len(_AT_GEMM))
    m, kk, n, lda, ldb, ldc, by_rows, parts = a[_AT_GEMM.m], a[_AT_GEMM.k], a[_AT_GEMM.n], a[_AT_GEMM.lda], a[_AT_GEMM.ldb], a[_AT_GEMM.ldc], a[_AT_GEMM.by_rows], a[_AT_GEMM.parts]
    size = m if by_rows else n
    blocks = (size + 15) // 16
    i0 = min(size, blocks * part // parts * 16)
    i1 = min(size, blocks * (part + 1) // parts * 16)
    if i1 <= i0:
        return
    av = carray(_f32_at(a[_AT_GEMM.a]), (m - 1) * lda + kk)
    tb = a[_AT_GEMM.trans_b]
    bv = carray(_f32_at(a[_AT_GEMM.b]), (n - 1) * ldb + kk if tb else (kk - 1) * ldb + n)
    cv = carray(_f32_at(a[_AT_GEMM.c]), (m - 1) * ldc + n)
    bias = carray(_f32_at(a[_AT_GEMM.bias]), a[_AT_GEMM.bias_size])
    z = carray(_f32_at(a[_AT_GEMM.z]), a[_AT_GEMM.z_size])
    relu = a[_AT_GEMM.relu] != 0
    cbias = carray(_f32_at(a[_AT_GEMM.cbias]), a[_AT_GEMM.cbias_size])
    post = bias.size or z.size or relu
    act = a[_AT_GEMM.act]
    c0 = a[_AT_GEMM.c]
    if by_rows:
        # with a chain: blocks of rows of about ACT_BLOCK values, the chain applied to each
        # while it is in cache (one BLAS call for the part otherwise)
        step = (i1 - i0) if act == 0 else max(1, ACT_BLOCK // n)
        for j0 in range(i0, i1, step):
            j1 = min(i1, j0 + step)
            _sgemm(a[_AT_GEMM.sgemm], tb, j1 - j0, n, kk, 1.0, av, j0 * lda, lda, bv, 0, ldb, cv, j0 * ldc, ldc)
            if post:
                for r in range(j0, j1):
                    _epilogue(cv, r * ldc, n, bias, r, relu, z)
            if cbias.size:
                for r in range(j0, j1):
                    o = _U(r * ldc)
                    for t in range(_U(n)):
                        cv[o + t] += cbias[t]
            if act != 0:
                if ldc == n:
                    _call_act(act, c0 + j0 * ldc * 4, (j1 - j0) * n)
                else:
                    for r in range(j0, j1):
                        _call_act(act, c0 + r * ldc * 4, n)
    else:
        # columns i0.. of op(B): B's columns, or the stored transpose's rows; with a chain, by
        # blocks of columns of about ACT_BLOCK values
        step = (i1 - i0) if act == 0 else max(16, ACT_BLOCK // m // 16 * 16)
        for j0 in range(i0, i1, step):
            j1 = min(i1, j0 + step)
            _sgemm(a[_AT_GEMM.sgemm], tb, m, j1 - j0, kk, 1.0, av, 0, lda, bv, j0 * ldb if tb else j0, ldb, cv, j0, ldc)
            if post:
                for r in range(m):
                    _epilogue(cv, r * ldc + j0, j1 - j0, bias, r, relu, z)
            if cbias.size:
                for r in range(m):
                    o = _U(r * ldc + j0)
                    for t in range(_U(j1 - j0)):
                        cv[o + t] += cbias[j0 + t]
            if act != 0:
                for r in range(m):
                    _call_act(act, c0 + (r * ldc + j0) * 4, j1 - j0)


def bands_part(args, part):
    """Part ``part`` of conv2d_bands: this thread takes bands from the shared counter until
    none is left, building each band's columns in its own block of the scratch. args = (x
    address, w2 address, y address, counter address, scratch address, bias address, z
    address, images, channels, height, width, m, out_h, out_w, band rows, sgemm address,
    kh, kw, sh, sw, dh, dw, pt, pl, bias size, z size, relu, parts)."""
    a = carray(_i64_at(args), len(_AT_BANDS))
    images, planes, height, width, m, out_h, out_w, rows = a[_AT_BANDS.images], a[_AT_BANDS.channels], a[_AT_BANDS.height], a[_AT_BANDS.width], a[_AT_BANDS.m], a[_AT_BANDS.out_h], a[_AT_BANDS.out_w], a[_AT_BANDS.band_rows]
    kh, kw = a[_AT_BANDS.kh], a[_AT_BANDS.kw]
    depth = planes * kh * kw
    block = depth * rows * out_w
    x = carray(_f32_at(a[_AT_BANDS.x]), (images, planes, height, width))
    w2 = carray(_f32_at(a[_AT_BANDS.w2]), (m, depth))
    y = carray(_f32_at(a[_AT_BANDS.y]), (images, m, out_h * out_w))
    counter = carray(_i64_at(a[_AT_BANDS.counter]), 1)
    col = carray(_f32_at(a[_AT_BANDS.scratch]), block * a[_AT_BANDS.parts])[part * block:(part + 1) * block]
    conv2d_bands(x, w2, y, counter, rows, a[_AT_BANDS.sgemm], col, out_h, out_w, kh, kw, a[_AT_BANDS.sh], a[_AT_BANDS.sw], a[_AT_BANDS.dh], a[_AT_BANDS.dw], a[_AT_BANDS.pt], a[_AT_BANDS.pl],
                 carray(_f32_at(a[_AT_BANDS.bias]), a[_AT_BANDS.bias_size]), a[_AT_BANDS.relu] != 0, carray(_f32_at(a[_AT_BANDS.z]), a[_AT_BANDS.z_size]))


_PARTS: dict = {}


def part_function(name: str):
    """The part function ``name`` compiled as a C callback ``void(int64, int64)`` (loaded from
    numba's cache after the first time), on first use: compiling callbacks at import would
    cost every process 0.3 s, team or not."""
    fn = _PARTS.get(name)
    if fn is None:
        fn = _PARTS[name] = cfunc(types.void(types.int64, types.int64), nogil=True, cache=True)(globals()[name])
    return fn
