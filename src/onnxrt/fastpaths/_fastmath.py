"""Fast float32 kernels: erf, Gelu, the ELUs (expm1), sigmoid, softplus (log1p), float32 <-> float16 casts.

Each public function computes its function within the accuracy its docstring states, by
minimax polynomials in numpy passes or, when the compiled kernels are available, by their
numba twins in :mod:`onnxrt.native.loops` (one fused pass per element, on the team of
GIL-free threads for large inputs). ``compiled=False`` keeps a call on the numpy passes;
the default (None) takes the twins whenever :func:`onnxrt.native.kernels` offers them.

These are fast paths, not the operators' semantics: the reference kernels (family_unary,
family_activation) evaluate the spec's formulas with numpy and scipy, and the paths of
onnxrt/fastpaths/elementwise.py call these functions (numpy passes: ``native=False``
paths; the twins: ``native=True`` ones). Other kernels (Cast, BatchNormalization, the
convolutions' epilogues) call them directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from ..ops_cpu import _special

from ..parallel import parallel_for
from .. import native as _jit
from ..native.layout import ELEMENTWISE

# How these kernels are fast without a compiled extension
# -------------------------------------------------------
# numpy runs one ufunc over a whole array at a time, at about 0.15 ms per 1e6 float32
# elements for + - * / and the integer bit operations on this class of CPU (clip 0.2), and
# about 10 times that for np.exp, which numpy vectorises for float32 on AVX2 (np.log and
# np.tanh too): a reduction plus polynomial exp in numpy takes ~20 passes and loses to it.
# What is slow is what numpy leaves to scalar libm or scipy: expm1, log1p, logaddexp,
# scipy.special.erf (15-40 ns per element), and the float32 <-> float16 casts.
# Each kernel below is therefore a short sequence of whole-chunk ufunc passes with out=
# arguments (no temporaries), built on np.exp where an exponential is needed, with
# minimax polynomials (scripts/fit_fastmath.py) evaluated by Horner's rule in float32
# where numpy has no fast primitive. Inputs are processed in chunks of CHUNK elements so
# the scratch buffers stay small; the buffers belong to one call (thread safe).
#
# Branches are never taken per element (np.where and boolean masks over random data cost
# 20x a plain pass): every element runs every branch on inputs clipped into the branch's
# domain, and the branch results are merged exactly (see erf). Rare special values
# (overflowing exp) are detected with one reduction per chunk and recomputed.
# Measured accuracy against float64 references is in tests/ops/test_fastmath.py. Mish,
# Swish and Gelu(approximate='tanh') need no kernel here: family_activation writes them
# as one np.exp and a few passes (x n / (n + 2), x e / (1 + e), x / (1 + exp(-2u))).

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_BF16 = np.dtype(ml_dtypes.bfloat16)
_f32 = np.float32
_U32 = np.uint32
_ONE = _f32(1.0)

#: elements per chunk: large enough that the ~1 us cost of each ufunc call stays small,
#: small enough that a kernel's scratch buffers (3 or 4 of them) stay around 1 MiB each
CHUNK = 1 << 18
#: from this many elements on the kernels beat the plain numpy / scipy calls (each kernel
#: issues 15 to 45 ufunc calls per chunk, about 1 us each): measured crossovers are about
#: 2-4K elements for the ELUs and softplus, 8-16K for erf and Gelu (scipy's erf is fast on
#: small arrays), 32-64K for the float16 casts
MIN_SIZE = 4096
#: from this many elements on the compiled loops beat numpy and scipy (a call costs ~2 us)
JIT_MIN_SIZE = 1024
#: elements per part of a compiled (numba) kernel split over the pool (see _jit.split):
#: measured on two cores at 1e6 elements, erf 1.58 -> 1.0 ms and sigmoid 875 -> 625 us
#: with parts of 128K instead of 512K (one call); no loss down to 262K elements
JIT_PART = 1 << 17
#: native.team's elementwise kinds (kept here so that importing _fastmath does not load numba)
_TEAM_SIGMOID, _TEAM_SIGMOID_EXACT, _TEAM_ERF = 0, 1, 2
ERF_MIN_SIZE = 1 << 14
CAST_MIN_SIZE = 1 << 16


def _coefs(*values: float) -> tuple[np.float32, ...]:
    return tuple(_f32(v) for v in values)


# -- coefficient tables (scripts/fit_fastmath.py: weighted minimax fits, rounded to float32) --

#: erf(x) = x + x Q(x^2) for |x| <= 1
ERF_SMALL = _coefs(0.12837916612625122, -0.3761261999607086, 0.11283549666404724, -0.026852967217564583,
                   0.005187540780752897, -0.0008008771692402661, 7.863844803068787e-05)
#: erf(x) = 1 - exp(P(x - 1)) for 1 < x <= 3.925 (P approximates log erfc)
ERF_LARGE = _coefs(-1.8496055603027344, -2.6389567852020264, -0.8432433009147644, -0.04097849130630493,
                   0.008971698582172394, -0.0011288460809737444)
#: the compiled loop's form of the same: erf(x) = 1 - 2**P2(x - 1), P2 approximating log2 erfc
ERF_LARGE2 = _coefs(-2.668416738510132, -3.8072149753570557, -1.216494083404541, -0.05926795303821564,
                    0.013120067305862904, -0.0016987057169899344)
ERF_SPLIT = _f32(1.0)
ERF_CLIP = _f32(3.925)  # erf(x) rounds to 1.0f from x = 3.9192 on
#: Gelu(x) = x (0.5 + x q(x^2)) for |x| <= 1
GELU_SMALL = _coefs(0.39894211292266846, -0.0664878562092781, 0.009961288422346115, -0.0011617530835792422,
                    9.094621782423928e-05)
#: Gelu's upper tail h(a) = 0.5 erfc(a / sqrt 2) = exp(P(a - 1)) for 1 < a = |x| <= 3.925 sqrt 2
GELU_LARGE = _coefs(-1.8410215377807617, -1.5251381397247314, -0.4004330635070801, -0.01953747496008873,
                    0.003369912737980485, -0.00046909385127946734, 4.8027082812041044e-05, -3.1456665965379216e-06,
                    9.730583627742817e-08)
GELU_SPLIT = _f32(1.0)
GELU_CLIP = _f32(3.925 * math.sqrt(2.0))
#: expm1(r) = r (1 + r Q(r)) for |r| <= ln(2) / 2
EXPM1 = _coefs(0.5, 0.1666666716337204, 0.041666291654109955, 0.008333285339176655, 0.0013946428662166,
               0.00019911275012418628)
#: exp(r) = 1 + r (1 + r Q(r)) for |r| <= ln(2) / 2: the compiled loops' exp (one degree below
#: EXPM1, which must stay accurate relative to expm1 near 0; as accurate relative to exp)
EXP = _coefs(0.4999997317790985, 0.166664719581604, 0.041671544313430786, 0.008373528718948364,
             0.0013693602522835135)
#: 2**f = 1 + f E(f) for |f| <= 1/2 (the compiled erf, whose erfc <= 0.16 scales this error down)
EXP2 = _coefs(0.6931469440460205, 0.24022246897220612, 0.05550765618681908, 0.009671349078416824,
              0.0013253967044875026)
#: log1p(t) = t - w (t - w^2 S(w^2)) with w = t / (2 + t), for 0 <= t <= 1
LOG1P = _coefs(0.6666659712791443, 0.4001264274120331, 0.2812122702598572, 0.27532315254211426)

_LOG2E = _f32(1.4426950408889634)
#: ln 2 = _LN2_HI + _LN2_LO; _LN2_HI has 15 significant bits, so k * _LN2_HI is exact for |k| < 512
_LN2_HI = _f32(0.693145751953125)
_LN2_LO = _f32(1.428606765330187e-06)
#: 1.5 * 2**23: adding it rounds a float32 of magnitude < 2**22 to an integer, kept in the low mantissa bits
_ROUNDER = _f32(12582912.0)
_EXPM1_LOW = _f32(-20.0)  # expm1(x) rounds to -1.0f from x = -17.33 on


def _horner(coefs: tuple[np.float32, ...], t: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """acc = coefs[0] + coefs[1] t + ... + coefs[n] t**n by Horner's rule in float32 (acc is not t)."""
    np.multiply(t, coefs[-1], out=acc)
    np.add(acc, coefs[-2], out=acc)
    for c in coefs[-3::-1]:
        np.multiply(acc, t, out=acc)
        np.add(acc, c, out=acc)
    return acc


def _chunked(
    kernel: Callable[..., None],
    x: np.ndarray,
    nbuf: int,
    *args: Any,
    out_dtype: np.dtype = _F32,
    buf_dtype: np.dtype = _F32,
    out: np.ndarray | None = None,
    jit: Callable[[np.ndarray, np.ndarray], object] | None = None,
    jit_split: bool = True,
    team_kind: int | None = None,
) -> np.ndarray:
    """Run ``kernel(x_chunk, out_chunk, *buffers, *args)`` over CHUNK-sized pieces of ``x`` (any shape, any strides).

    ``jit``, when given, is a compiled loop ``jit(x_chunk, out_chunk)`` that replaces the
    kernel (and its buffers): one pass per element instead of the kernel's 15 to 45, in
    parts of at least JIT_PART elements over the pool, or in one call when ``jit_split``
    is False (the casts: memory-bound, a second thread only adds its wake-up).
    ``team_kind`` (one of native.team's elementwise kinds) runs large arrays on the team of
    GIL-free threads instead of the pool when it is available.

    The kernel reads its input chunk (never writes it) and fills the output chunk; the
    ``nbuf`` scratch buffers are allocated here, once per call. ``out``, when given, is a
    C-contiguous array of x's shape and ``out_dtype`` that receives the result (only
    kernels written for it may get ``out`` aliasing ``x``).
    """
    x = np.asarray(x)
    flat = np.ascontiguousarray(x).reshape(-1)  # one copy when x is not C-contiguous; 0-d gives shape (1,)
    if out is None:
        out = np.empty(x.shape, dtype=out_dtype)
    oflat = out.reshape(-1)
    n = flat.size
    if n == 0:
        return out
    if jit is not None:
        if not jit_split:
            jit(flat, oflat)
        elif not (
            team_kind is not None and n >= 2 * JIT_PART and flat.dtype == oflat.dtype == _F32
            and _jit.team_split("elementwise_part", ELEMENTWISE.pack(kind=team_kind, x=flat, y=oflat, n=n), n)
        ):
            _jit.split(n, lambda lo, hi: jit(flat[lo:hi], oflat[lo:hi]), JIT_PART)
        return out
    step = min(n, CHUNK)

    def chunks(lo: int, hi: int) -> None:
        # scratch buffers belong to one range of chunks (one thread); numpy's error state
        # is per thread, so the pool's workers set it too
        bufs = [np.empty(step, dtype=buf_dtype) for _ in range(nbuf)]
        with np.errstate(all="ignore"):
            for c in range(lo, hi):
                start = c * step
                stop = min(start + step, n)
                if stop - start != step:
                    bufs = [b[: stop - start] for b in bufs]
                kernel(flat[start:stop], oflat[start:stop], *bufs, *args)

    count = -(-n // step)
    if count == 1:
        chunks(0, 1)
    else:
        # chunks are independent: large inputs use the kernel thread pool (each chunk costs
        # 15 to 45 whole-chunk passes, numpy releases the GIL inside each)
        parallel_for(count, chunks, work_per_item=step * 16)
    return out


def _loops(compiled: bool | None) -> Any:
    """native.loops when a call may take the compiled twins (``compiled`` None: whenever
    :func:`onnxrt.native.kernels` offers them; False: never), else None."""
    return None if compiled is False else _jit.kernels()


def _compiled(k: Any, name: str, *args: Any) -> Callable[[np.ndarray, np.ndarray], object] | None:
    """The numba loop ``name`` of native.loops ``k`` bound to ``args`` (after x and out), or None without it."""
    if k is None:
        return None
    fn = getattr(k, name)
    return fn if not args else (lambda x, y: fn(x, y, *args))


# -- erf ------------------------------------------------------------------------------------


def _erf_chunk(x: np.ndarray, y: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    ai = a.view(np.uint32)
    np.bitwise_and(x.view(np.uint32), 0x7FFFFFFF, out=ai)  # a = |x|
    # large branch on |x| clipped to [1, 3.925]: 1 - exp(P(|x| - 1)), in b
    np.clip(a, ERF_SPLIT, ERF_CLIP, out=y)
    np.subtract(y, ERF_SPLIT, out=y)
    _horner(ERF_LARGE, y, b)
    np.exp(b, out=b)
    np.subtract(_f32(1.0), b, out=b)
    # small branch on |x| clipped to [0, 1]: x + x Q(x^2), in c
    np.clip(a, _f32(0.0), ERF_SPLIT, out=y)
    np.multiply(y, y, out=a)
    _horner(ERF_SMALL, a, c)
    np.multiply(c, y, out=c)
    np.add(c, y, out=c)
    # exact merge: where |x| <= 1 the large branch saw x = 1 and b == _ERF_AT_SPLIT, so
    # c + (b - _ERF_AT_SPLIT) == c; where |x| > 1 the small branch gives c == erf(1) too
    # (both tables give the correctly rounded erf(1), tested) and b - _ERF_AT_SPLIT is exact
    # (Sterbenz: both lie in [0.84, 1]), so the sum is b exactly. With another CPU's np.exp
    # making the two values of erf(1) differ, the large branch would be off by that ulp.
    np.subtract(b, _ERF_AT_SPLIT, out=b)
    np.add(c, b, out=y)
    # erf is odd: put the sign of x back (NaN keeps its sign, -0 gives -0)
    np.bitwise_and(x.view(np.uint32), 0x80000000, out=ai)
    np.bitwise_or(y.view(np.uint32), ai, out=y.view(np.uint32))


def erf(x: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """erf of a float32 array, within 1 ulp of the correctly rounded value (float32 in, float32 out).

    |x| <= 1: x + x Q(x^2) with Q of degree 6; 1 < |x| <= 3.925: 1 - exp(P(|x| - 1)) with P
    of degree 5 approximating log(erfc), whose relative error only scales erfc <= 0.16;
    beyond, 1.0 (erf rounds to 1.0f from 3.9192 on). Both branches run on every element
    (clipped into their domains) and merge exactly. erf(+-0) = +-0, erf(+-inf) = +-1,
    NaN stays NaN.
    """
    return _chunked(_erf_chunk, x, 3, jit=_compiled(_loops(compiled), "erf"), team_kind=_TEAM_ERF)


def _erf_at_split() -> np.float32:
    # evaluated by the same array code as the kernel (numpy's vector exp may differ from its scalar one)
    u = np.zeros(16, dtype=_F32)
    b = np.empty_like(u)
    _horner(ERF_LARGE, u, b)
    np.exp(b, out=b)
    return _f32(1.0) - b[0]


_ERF_AT_SPLIT = _erf_at_split()


# -- Gelu -------------------------------------------------------------------------------------


def _gelu_chunk(x: np.ndarray, y: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> None:
    ai = a.view(np.int32)
    np.bitwise_and(x.view(np.int32), 0x7FFFFFFF, out=ai)  # a = |x|
    # |x| > 1: gelu(x) = x (1 - h) for x > 0 and x h for x < 0, that is relu(x) - |x| h:
    # h = 0.5 erfc(|x| / sqrt 2) = exp(P(|x| - 1)) is small and exact in relative terms, so
    # negative inputs do not cancel as 1 + erf(x / sqrt 2) does; in b
    np.clip(a, GELU_SPLIT, GELU_CLIP, out=y)
    np.subtract(y, GELU_SPLIT, out=y)
    _horner(GELU_LARGE, y, b)
    np.exp(b, out=b)
    np.multiply(b, a, out=b)
    np.clip(x, _f32(0.0), _f32(np.inf), out=y)
    np.subtract(y, b, out=b)
    # |x| <= 1: gelu(x) = x (0.5 + x q(x^2)) (x q <= 0.34: the sum cancels at most 3x); in d.
    # The product with x keeps gelu(-0) = -0.
    np.clip(x, -GELU_SPLIT, GELU_SPLIT, out=y)
    np.multiply(y, y, out=c)
    _horner(GELU_SMALL, c, d)
    np.multiply(d, y, out=d)
    np.add(d, _f32(0.5), out=d)
    np.multiply(d, y, out=d)
    # select by bits: mask = -1 where |x| > 1 (|x| >= 0 compares as int32; NaN's bits exceed 1.0's)
    ci = c.view(np.int32)
    np.subtract(_GELU_SPLIT_BITS, ai, out=ci)
    np.right_shift(ci, 31, out=ci)
    bi, di = b.view(np.int32), d.view(np.int32)
    np.bitwise_xor(bi, di, out=bi)
    np.bitwise_and(bi, ci, out=bi)
    np.bitwise_xor(di, bi, out=y.view(np.int32))
    top = np.max(a)
    if not top <= GELU_CLIP:  # |x| > 5.55 (or NaN in the chunk): the few far-tail values from scipy
        big = np.flatnonzero(a > GELU_CLIP)
        y[big] = _gelu_far(x[big])


def gelu(x: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """Gelu (approximate='none') of a float32 array: 0.5 x (1 + erf(x / sqrt 2)).

    |x| <= 1: x (0.5 + x q(x^2)) with q of degree 4. |x| > 1: relu(x) - |x| h(|x|) with the
    upper tail h(a) = 0.5 erfc(a / sqrt 2) = exp(P(a - 1)), P of degree 8: negative inputs
    keep their relative accuracy where the literal formula cancels (1 + erf(-3 / sqrt 2)
    loses 9 bits in float32, 1 + erf(-4) all of them). The rare |x| > 5.55 (tiny results
    for negative x) go to scipy.special.erfc. Within 2 ulp of the float64 value for x >= 0
    and 4 ulp for -1 <= x < 0 (where 0.5 + x q cancels up to 3x; the float32 formula with
    scipy's erf is within 2 there); below, the rounding of P's value (|P| ~ x^2 / 2) makes
    the relative error grow to 11 ulp at x = -3 and 40 ulp (2e-6) at -5.5, where the float32
    formula is 100 ulp off at -2.5 and has no correct digit below -4. gelu(+inf) = inf,
    gelu(-inf) = NaN and gelu(-0) = -0, as the formula gives.
    """
    k = _loops(compiled)
    return _chunked(_gelu_chunk, x, 4, jit=None if k is None else _gelu_compiled(k))


def _gelu_far(x: np.ndarray) -> np.ndarray:
    # 0.5 x erfc(-x / sqrt 2) in float32, as family_activation._gelu computes small inputs:
    # x above 5.55, a tiny negative value (or -0) below -5.55, NaN at -inf (-inf * 0, as
    # the spec's formula gives)
    y = _special.erfc(x * _MINUS_SQRT1_2)
    y *= _f32(0.5)  # before x: erfc <= 2, so x * 2 could overflow
    y *= x
    return y


def _gelu_compiled(k: Any) -> Callable[[np.ndarray, np.ndarray], None]:
    def run(x: np.ndarray, y: np.ndarray) -> None:
        if k.gelu(x, y):  # the loop counted |x| > GELU_CLIP: their far tail, as the numpy kernel does
            big = np.flatnonzero(np.abs(x) > GELU_CLIP)
            with np.errstate(all="ignore"):  # -inf gives NaN, as the formula does
                y[big] = _gelu_far(x[big])

    return run


_MINUS_SQRT1_2 = _f32(-1.0 / math.sqrt(2.0))
_GELU_SPLIT_BITS = np.int32(GELU_SPLIT.view(np.int32))


# -- expm1 and the exponential linear units ------------------------------------------------------


def _expm1_neg_into(src: np.ndarray, y: np.ndarray, t: np.ndarray, r: np.ndarray, z: np.ndarray, scale: np.float32 | None = None) -> None:
    """y = expm1(min(src / scale, 0)) (see :func:`expm1_neg`); t, r, z are scratch."""
    if scale is None:
        np.clip(src, _EXPM1_LOW, _f32(0.0), out=r)
    else:
        np.divide(src, scale, out=r)
        np.clip(r, _EXPM1_LOW, _f32(0.0), out=r)
    # x = k ln2 + r with k = rint(x log2e): the rounder leaves k in t's low mantissa bits
    np.multiply(r, _LOG2E, out=t)
    np.add(t, _ROUNDER, out=t)
    np.subtract(t, _ROUNDER, out=y)  # k as a float
    np.multiply(y, _LN2_HI, out=z)
    np.subtract(r, z, out=r)  # exact: k ln2_hi is exact and close to x
    np.multiply(y, _LN2_LO, out=z)
    np.subtract(r, z, out=r)  # |r| <= ln2 / 2 (+-0 stays +-0)
    # p = expm1(r) = r (1 + r Q(r))
    _horner(EXPM1, r, y)
    np.multiply(y, r, out=y)
    np.add(y, _f32(1.0), out=y)
    np.multiply(y, r, out=y)
    # s = 2**k from the bits of t: (t_bits << 23) is k << 23 (the rounder's bits shift out)
    ti = t.view(np.uint32)
    np.left_shift(ti, 23, out=ti)
    np.add(ti, 0x3F800000, out=ti)
    # expm1(x) = s p - (1 - s): exact for k = 0 (and -0 stays -0), no cancellation for k < 0
    np.subtract(_f32(1.0), t, out=z)
    np.multiply(y, t, out=y)
    np.subtract(y, z, out=y)


def _expm1_neg_chunk(x: np.ndarray, y: np.ndarray, t: np.ndarray, r: np.ndarray, z: np.ndarray) -> None:
    _expm1_neg_into(x, y, t, r, z)


def expm1_neg(x: np.ndarray) -> np.ndarray:
    """expm1(min(x, 0)) of a float32 array, within 1 ulp: the negative half of expm1 the ELUs need.

    Cody-Waite reduction x = k ln2 + r (|r| <= ln2/2, ln2 split in two so that k ln2_hi is
    exact), expm1(r) by a degree-7 minimax polynomial, 2**k built from the integer k in
    the exponent bits, and expm1(x) = 2**k expm1(r) - (1 - 2**k), which is exact for k = 0
    and cancels nothing for k < 0. Inputs below -20 give -1 (as expm1 rounds), positive
    inputs 0, -0 gives -0, NaN stays NaN.
    """
    return _chunked(_expm1_neg_chunk, x, 3)


def _elu_chunk(x: np.ndarray, y: np.ndarray, t: np.ndarray, r: np.ndarray, z: np.ndarray, alpha: np.float32, gamma: np.float32 | None, scale: np.float32 | None) -> None:
    # y = alpha * expm1(min(x / scale, 0)) + gamma * max(x, 0); the clips keep -0, so elu(-0) = -0
    _expm1_neg_into(x, y, t, r, z, scale)
    np.multiply(y, alpha, out=y)
    np.clip(x, _f32(0.0), _f32(np.inf), out=z)
    if gamma is not None:
        np.multiply(z, gamma, out=z)
    np.add(z, y, out=y)


def elu(x: np.ndarray, alpha: float = 1.0, *, compiled: bool | None = None) -> np.ndarray:
    """Elu of a float32 array: x for x > 0, alpha (exp(x) - 1) otherwise, from :func:`expm1_neg` (1-2 ulp)."""
    return _chunked(_elu_chunk, x, 3, _f32(alpha), None, None, jit=_compiled(_loops(compiled), "elu", _f32(alpha), _ONE, _ONE))


def selu(x: np.ndarray, alpha: float = 1.67326319217681884765625, gamma: float = 1.05070102214813232421875, *,
         compiled: bool | None = None) -> np.ndarray:
    """Selu of a float32 array: gamma x for x > 0, (gamma alpha) (exp(x) - 1) otherwise (gamma alpha rounded once)."""
    ag, g = _f32(_f32(alpha) * _f32(gamma)), _f32(gamma)
    return _chunked(_elu_chunk, x, 3, ag, g, None, jit=_compiled(_loops(compiled), "elu", ag, g, _ONE))


def celu(x: np.ndarray, alpha: float = 1.0, *, compiled: bool | None = None) -> np.ndarray:
    """Celu of a float32 array for alpha > 0: max(0, x) + alpha (exp(min(x, 0) / alpha) - 1)."""
    return _chunked(_elu_chunk, x, 3, _f32(alpha), None, _f32(alpha), jit=_compiled(_loops(compiled), "elu", _f32(alpha), _ONE, _f32(alpha)))


# -- sigmoid and softplus --------------------------------------------------------------------------


def _sigmoid_chunk(x: np.ndarray, y: np.ndarray, e: np.ndarray) -> None:
    # sigmoid = e / (1 + e), e = exp(x): no overflow below, so tiny results keep their
    # relative accuracy down to the subnormals (1 / (1 + exp(-x)) gives 0 below -88.7).
    # y may be x itself: x is not read after y is first written.
    np.exp(x, out=e)
    np.add(e, _f32(1.0), out=y)
    np.divide(e, y, out=y)
    top = np.max(e)
    if not top < _f32(np.inf):  # exp overflowed (x > 88.7, where sigmoid rounds to 1), or NaN in the chunk
        y[np.isinf(e)] = _f32(1.0)


def sigmoid(x: np.ndarray, out: np.ndarray | None = None, *, compiled: bool | None = None) -> np.ndarray:
    """Sigmoid of a float32 array as exp(x) / (1 + exp(x)) (1.0 where exp(x) overflows).

    One np.exp, one add, one divide: the error is np.exp's (numpy's vectorised float32 exp
    is within 2 ulp) for x < 0, damped by 1 / (1 + exp(x)) above, so within 3 ulp; results
    down to the subnormals keep their accuracy (sigmoid(-100) = 3.7e-44, not 0).
    ``out`` may be ``x`` itself (a C-contiguous float32 array) for an in-place sigmoid.
    """
    k = _loops(compiled)
    jit = None
    if k is not None:
        if out is not None and np.shares_memory(out, x):
            jit, kind = k.sigmoid_exact, _TEAM_SIGMOID_EXACT  # the fast loop's fallback needs x after y is written
        else:
            def jit(xc: np.ndarray, yc: np.ndarray) -> None:
                if k.sigmoid(xc, yc):  # some x below -87.33, where exp(x) is subnormal
                    k.sigmoid_exact(xc, yc)
            kind = _TEAM_SIGMOID
        return _chunked(_sigmoid_chunk, x, 1, out=out, jit=jit, team_kind=kind)
    return _chunked(_sigmoid_chunk, x, 1, out=out)


def _softplus_chunk(x: np.ndarray, y: np.ndarray, t: np.ndarray, w: np.ndarray, w2: np.ndarray) -> None:
    # softplus(x) = max(x, 0) + log1p(exp(-|x|)): exp's argument is <= 0, log1p's in (0, 1]
    ti = t.view(np.uint32)
    np.bitwise_or(x.view(np.uint32), 0x80000000, out=ti)  # -|x|
    np.exp(t, out=t)
    _log1p_01(t, y, w, w2)
    np.clip(x, _f32(0.0), _f32(np.inf), out=w)
    np.add(y, w, out=y)


def _log1p_01(t: np.ndarray, y: np.ndarray, w: np.ndarray, w2: np.ndarray) -> None:
    """y = log1p(t) for t in [0, 1] (t is kept): log1p(t) = 2 atanh(w), w = t / (2 + t) <= 1/3.

    2 atanh(w) = 2w + w^3 S(w^2), and 2w = t - t w, so log1p(t) = t - w (t - w^2 S(w^2)):
    the exact t leads and the correction is at most a third of it, so the result is
    within about 1 ulp without numpy's scalar log1p.
    """
    np.add(t, _f32(2.0), out=w)
    np.divide(t, w, out=w)
    np.multiply(w, w, out=w2)
    _horner(LOG1P, w2, y)
    np.multiply(y, w2, out=y)
    np.subtract(t, y, out=y)
    np.multiply(y, w, out=y)
    np.subtract(t, y, out=y)


def softplus(x: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """Softplus of a float32 array: max(x, 0) + log1p(exp(-|x|)), log1p by the atanh series (1 ulp).

    Within 3 ulp: no overflow for large x, softplus(x) ~ exp(x) to np.exp's accuracy (2 ulp) for very
    negative x, softplus(+inf) = inf, softplus(-inf) = 0.
    """
    return _chunked(_softplus_chunk, x, 3, jit=_compiled(_loops(compiled), "softplus"))


# -- float32 <-> float16 ----------------------------------------------------------------------------


def _to_f16_chunk(x: np.ndarray, h: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    xi = x.view(np.uint32)
    np.bitwise_and(xi, _U32(0x7FFFFFFF), out=a)  # |x| bits
    nan = a.max() > 0x7F800000
    # half subnormals (|x| < 2**-14): |x| + 0.5 rounds |x| to a multiple of 2**-24 (ties to
    # even, by the FPU); the low bits then hold |x| / 2**-24 in [0, 1024]
    np.clip(a, _U32(0), _U32(0x38800000), out=b)  # numpy scalars: Python ints make clip 3x slower
    bf = b.view(np.float32)
    np.add(bf, _f32(0.5), out=bf)
    # half normals: drop 13 mantissa bits rounding to nearest even, rebias the exponent by
    # -112; |x| >= 65520 reaches 0x7C00 (inf) through the rounding carry, as IEEE says
    np.clip(a, _U32(0x38800000), _U32(0x47800000), out=a)
    np.right_shift(a, _U32(13), out=c)
    np.bitwise_and(c, _U32(1), out=c)
    np.add(a, c, out=a)
    np.add(a, _U32((0x0FFF - 0x38000000) & 0xFFFFFFFF), out=a)
    # the sign goes to bit 28, which the shift brings to the half's bit 15
    np.right_shift(xi, _U32(3), out=c)
    np.bitwise_and(c, _U32(0x10000000), out=c)
    np.add(a, c, out=a)
    np.right_shift(a, _U32(13), out=a)
    # each path gives 0x400 on the other's range: sum them, minus 0x400 and 0.5's bits
    # (the low 15 bits stay in [0, 0x7C00]: nothing reaches the sign)
    np.add(a, b, out=a)
    np.subtract(a, _U32(0x3F000400), out=a)
    np.copyto(h, a, casting="unsafe")
    if nan:  # NaN: sign | 0x7C00 | the top 10 payload bits (at least 1, to stay NaN), as numpy does
        idx = np.flatnonzero(np.isnan(x))
        bits = xi[idx]
        payload = np.maximum((bits & 0x007FFFFF) >> 13, 1)
        h[idx] = ((bits >> 16) & 0x8000) | 0x7C00 | payload


def f32_to_f16(x: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """float32 -> float16 by integer arithmetic on the bits, bit-exact with numpy's astype.

    Round to nearest even, overflow to +-inf from 65520 on, subnormal halves and signed
    zeros exact, NaN payloads truncated to 10 bits as numpy does (kept NaN).
    """
    k = _loops(compiled)
    jit = None if k is None else k.f32_to_f16
    out = _chunked(_to_f16_chunk, x, 3, out_dtype=np.dtype(np.uint16), buf_dtype=np.dtype(np.uint32), jit=jit, jit_split=False)
    return out.view(_F16)


def _from_f16_chunk(h: np.ndarray, y: np.ndarray, u: np.ndarray) -> None:
    hi = h.view(np.uint16)
    np.left_shift(hi, 16, out=u, dtype=np.uint32)
    ui = u.view(np.int32)
    # arithmetic shift: exponent and mantissa land at bits 13-27 (the f32 layout shifted down
    # by 112 in the exponent), the sign smears over bits 28-31 and the mask keeps bit 31
    np.right_shift(ui, 3, out=ui)
    np.bitwise_and(u, 0x8FFFFFFF, out=u)
    # times 2**112 restores the exponent; half subnormals (float32 subnormals here) come out normal, exactly
    np.multiply(u.view(np.float32), _f32(2.0**112), out=y)
    np.bitwise_and(hi, 0x7C00, out=u.view(np.uint16)[: hi.size])
    if u.view(np.uint16)[: hi.size].max() == 0x7C00:  # inf and NaN: exponent all ones, payload kept
        idx = np.flatnonzero(u.view(np.uint16)[: hi.size] == 0x7C00)
        bits = hi[idx].astype(np.uint32)
        y.view(np.uint32)[idx] = ((bits & 0x8000) << 16) | 0x7F800000 | ((bits & 0x03FF) << 13)


def f16_to_f32(x: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """float16 -> float32 (exact) by a shift, a mask and one multiplication by 2**112; bit-exact with numpy."""
    k = _loops(compiled)
    jit = None if k is None else (lambda h, y: k.f16_to_f32(h, y.view(_U32)))
    return _chunked(_from_f16_chunk, x.view(np.uint16), 1, buf_dtype=np.dtype(np.uint32), jit=jit, jit_split=False)
