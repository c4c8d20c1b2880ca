"""Numba-compiled kernels of the SVM, linear and Normalizer operators (loaded by _jit.kernels)."""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types

from .loops import _reinterpret

# Why these kernels exist
# -----------------------
# A classical-ML model usually scores a handful of rows: numpy then spends its time in the
# ~1 us cost of each of its calls (an SVC with probabilities made ~40 of them, and libsvm's
# pairwise coupling ran on Python floats). Each kernel below does the whole operator for a
# block of rows in one call. The SVM kernel computes its kernel values row by row, the
# support vectors stored feature-major ([F, n_sv]) so that the loops over support vectors
# vectorise, and as float32 (ONNX attributes are float32 values: the same numbers in half
# the memory traffic, which bounds that loop; the sums are float64); exp is a float64
# polynomial that vectorises too (numba's math.exp is a libm call per element, 10 ns).
# fastmath is limited to "contract" (FMA), except in the SVM's weighted sums of kernel
# values (reassociated, as a BLAS product's order is unspecified too); the coupling has no
# fastmath at all, so it repeats the Python-float iteration of op_svm._coupling_one
# operation for operation.

_OPTS = {"nogil": True, "cache": True, "error_model": "numpy", "fastmath": {"contract"}}
_INLINE = {"nogil": True, "error_model": "numpy", "inline": "always", "fastmath": {"contract"}}

#: kernel_type codes of :func:`svm_predict`
LINEAR, POLY, RBF, SIGMOID = range(4)
#: transform codes of :func:`linear_classify`
NONE, SOFTMAX, LOGISTIC = range(3)


#: the float64 whose bit pattern is a uint64, and back (bit casts, no conversion)
_f64_from_bits = _reinterpret(lambda t: t == types.uint64, types.float64, lambda b, v, t: b.bitcast(v, ir.DoubleType()))
_f64_to_bits = _reinterpret(lambda t: t == types.float64, types.uint64, lambda b, v, t: b.bitcast(v, ir.IntType(64)))


_LOG2E = 1.4426950408889634
#: ln 2 in two parts (fdlibm's): k * _LN2_HI is exact for |k| < 2**20
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
#: 1.5 * 2**52: v + _ROUNDER holds rint(v) in its low mantissa bits
_ROUNDER = 6755399441055744.0
#: exp(x) is a normal float64 from here up (exp(-708.3) = 2.5e-308)
_EXP_LOW = -708.3
_ONE_BITS = np.uint64(0x3FF0000000000000)
_SHIFT = np.uint64(52)
#: 1/2!, 1/3!, ..., 1/13!: expm1(r) = r + r^2 (1/2! + r/3! + ...), truncation below 2e-17 for |r| <= ln2/2
_EXPM1 = np.array([1.0 / math.factorial(i) for i in range(2, 14)])


@njit(**_INLINE)
def _exp_nonpositive(x):
    """exp(min(x, 0)) of a float64 (within 2 ulp): x = k ln2 + r, exp(r) by its Taylor
    series to r^13, times 2**k built from the bits; 0 below -708.3 (where exp is subnormal
    or 0: smaller than 2.5e-308). NaN stays NaN. Branch-free, so loops over it vectorise."""
    c = 0.0 if x > 0.0 else x
    c = _EXP_LOW if _EXP_LOW > c else c
    t = c * _LOG2E + _ROUNDER
    k = t - _ROUNDER
    r = (c - k * _LN2_HI) - k * _LN2_LO
    q = _EXPM1[11]
    for i in range(10, -1, -1):
        q = q * r + _EXPM1[i]
    p = (q * r + 1.0) * r
    # k + 1023 in the exponent field: t's low 12 bits hold k modulo 4096 (the rounder's shift out)
    y = (1.0 + p) * _f64_from_bits((_f64_to_bits(t) << _SHIFT) + _ONE_BITS)
    return 0.0 if x < _EXP_LOW else y


@njit(nogil=True, error_model="numpy", fastmath={"reassoc", "nsz", "contract"})
def _dot(a, w, p):
    """sum_k a[k] w[p, k], reassociated (vectorised)."""
    s = 0.0
    for k in range(a.size):
        s += a[k] * w[p, k]
    return s


@njit(**_INLINE)
def _dot_products(x, r, svt, kv):
    # kv[k] = <x[r], sv_k> in float64, features in order; four features per pass over kv
    # (the same sums as one per pass: the loop is bound by loads and stores, not arithmetic)
    nf, n_sv = svt.shape
    for k in range(n_sv):
        kv[k] = 0.0
    f = 0
    while f + 4 <= nf:
        x0 = np.float64(x[r, f])
        x1 = np.float64(x[r, f + 1])
        x2 = np.float64(x[r, f + 2])
        x3 = np.float64(x[r, f + 3])
        for k in range(n_sv):
            acc = kv[k] + x0 * np.float64(svt[f, k])
            acc += x1 * np.float64(svt[f + 1, k])
            acc += x2 * np.float64(svt[f + 2, k])
            kv[k] = acc + x3 * np.float64(svt[f + 3, k])
        f += 4
    while f < nf:
        xf = np.float64(x[r, f])
        for k in range(n_sv):
            kv[k] += xf * np.float64(svt[f, k])
        f += 1


@njit(**_INLINE)
def _kernel_row(x, r, svt, sq, kind, gamma, coef0, degree, kv):
    # kv[k] = K(x[r], sv_k) from the dot products with svt = sv^T [F, n_sv] (float32 when
    # the vectors are float32 values, as ONNX attributes are: half the memory traffic, the
    # same values): RBF expands the exponent as numpy's path does, 2 gamma <x, sv> -
    # gamma |sv|^2 - gamma |x|^2 (sq = gamma |sv|^2), at most 0; else gamma <x, sv> + coef0,
    # its power (POLY) or tanh (SIGMOID)
    _dot_products(x, r, svt, kv)
    n_sv = svt.shape[1]
    if kind == RBF:
        xx = 0.0
        for f in range(x.shape[1]):
            xf = np.float64(x[r, f])
            xx += xf * xf
        gx = gamma * xx
        g2 = 2.0 * gamma
        for k in range(n_sv):
            kv[k] = _exp_nonpositive((g2 * kv[k] - sq[k]) - gx)
    elif kind == POLY:
        for k in range(n_sv):
            kv[k] = math.pow(gamma * kv[k] + coef0, degree)
    elif kind == SIGMOID:
        for k in range(n_sv):
            kv[k] = math.tanh(gamma * kv[k] + coef0)


@njit(nogil=True, error_model="numpy")
def _vote(dec, k):
    # one vote per pair (i < j, row-major): i's when dec > 0, else j's; the first class with most votes
    votes = np.zeros(k, np.int64)
    p = 0
    for i in range(k):
        for j in range(i + 1, k):
            if dec[p] > 0:
                votes[i] += 1
            else:
                votes[j] += 1
            p += 1
    best = 0
    for c in range(1, k):
        if votes[c] > votes[best]:
            best = c
    return best


@njit(nogil=True, error_model="numpy")
def _couple(dec, prob_a, prob_b, k, rm, q, p, qp):
    """libsvm's probabilities of ``k`` classes into ``p`` from the pairwise decision values:
    Platt's sigmoid of each pair clipped to [1e-7, 1 - 1e-7], then op_svm._coupling_one's
    iteration, in the same order of operations (no fastmath: same rounding)."""
    pair = 0
    for i in range(k):
        rm[i, i] = 0.0
        for j in range(i + 1, k):
            f = dec[pair] * prob_a[pair] + prob_b[pair]
            e = math.exp(-abs(f))
            v = e / (1.0 + e) if f >= 0 else 1.0 / (1.0 + e)
            v = min(max(v, 1e-7), 1.0 - 1e-7)
            rm[i, j] = v
            rm[j, i] = 1.0 - v
            pair += 1
    for t in range(k):
        s = 0.0
        for j in range(k):
            q[t, j] = -rm[j, t] * rm[t, j]
            if j != t:
                s += rm[j, t] * rm[j, t]
        q[t, t] = s
    for t in range(k):
        p[t] = 1.0 / k
    eps = 0.005 / k
    for _ in range(max(100, k)):
        pqp = 0.0
        for t in range(k):
            s = 0.0
            for j in range(k):
                s += q[t, j] * p[j]
            qp[t] = s
            pqp += p[t] * s
        converged = True
        for t in range(k):
            if not abs(qp[t] - pqp) < eps:  # a NaN never converges, as in the Python loop
                converged = False
        if converged:
            break
        for t in range(k):
            qtt = q[t, t]
            diff = (-qp[t] + pqp) / qtt
            p[t] += diff
            scale = 1.0 + diff
            pqp = (pqp + diff * (diff * qtt + 2.0 * qp[t])) / (scale * scale)
            for j in range(k):
                qp[j] = (qp[j] + diff * q[t, j]) / scale
            for j in range(k):
                p[j] = p[j] / scale


@njit(**_OPTS)
def svm_predict(x, svt, sq, kind, gamma, coef0, degree, wt, bias, n_classes, prob_a, prob_b, labels, dec, winners, probs):  # pragma: no cover (compiled)
    """For each row r of ``x`` [N, F]: dec[r, p] = sum_k K(x_r, sv_k) wt[p, k] + bias[p] in
    float64 (``svt`` and ``sq`` as :func:`_kernel_row` reads them, sq empty but for RBF); with ``n_classes`` > 0,
    the one-vs-one vote of those pairwise values: winners[r] = labels[i] (i itself when
    ``labels`` is empty) for i the winning class; with ``prob_a`` non-empty, libsvm's class
    probabilities (see :func:`_couple`) into probs[r], float32 or float64.

    Deviations from numpy's path (op_svm.kernel_matrix): exp as :func:`_exp_nonpositive`,
    the sums in another order (features in order, the weighted sum reassociated): values
    agree within about 1e-15 relative."""
    n = x.shape[0]
    n_sv = svt.shape[1]
    n_pairs = wt.shape[0]
    kv = np.empty(n_sv)
    rm = np.empty((n_classes, n_classes))
    q = np.empty((n_classes, n_classes))
    qp = np.empty(n_classes)
    p = np.empty(n_classes)
    with_prob = prob_a.size > 0
    named = labels.size > 0
    for r in range(n):
        _kernel_row(x, r, svt, sq, kind, gamma, coef0, degree, kv)
        for j in range(n_pairs):
            dec[r, j] = _dot(kv, wt, j) + bias[j]
        if n_classes > 0:
            d = dec[r]
            best = _vote(d, n_classes)
            winners[r] = labels[best] if named else best
            if with_prob:
                _couple(d, prob_a, prob_b, n_classes, rm, q, p, qp)
                for c in range(n_classes):
                    probs[r, c] = p[c]


@njit(**_INLINE)
def _argmax_row(a, r):
    # the first index of the largest a[r, c], or of the first NaN (np.argmax's rule): the
    # common case is branch-free (random scores would mispredict every other comparison)
    best = 0
    top = a[r, 0]
    nan = top != top
    for c in range(1, a.shape[1]):
        v = a[r, c]
        take = v > top
        best = c if take else best
        top = v if take else top
        nan = nan | (v != v)
    if nan:
        for c in range(a.shape[1]):
            if a[r, c] != a[r, c]:
                return c
    return best


#: rows per block of linear_classify: the block's transform runs as flat loops over a scratch
_ROWS_BLOCK = 256


@njit(**_OPTS)
def linear_classify(x, wt, b, transform, labels, winners, scores, z):  # pragma: no cover (compiled)
    """For each row r of ``x``: the scores x[r] @ wt.T + b in x's precision (wt [C, F],
    F >= 1; each sum over the features in order, then the intercept), into scores[r] unless ``scores`` has no rows; winners[r] = labels[i] (i itself when
    ``labels`` is empty) for i the first index of the largest score (of the first NaN if
    any, as np.argmax); and, for ``transform`` NONE, SOFTMAX or LOGISTIC (other codes leave
    ``z`` alone), z[r] = transform(scores) as float32. Deviation from numpy's path
    (op_linear, _common): the transforms run in float64 from the scores, exp(s - max)
    times 1 / sum (s - max in the scores' precision; a NaN in the row gives NaN
    throughout) and 1 / (1 + exp(-s)), exp as :func:`_exp_nonpositive`: with float32
    scores, within 1 float32 ulp of numpy's."""
    n, nf = x.shape
    nc = wt.shape[0]
    keep = scores.shape[0] > 0
    named = labels.size > 0
    rows = min(n, _ROWS_BLOCK)
    blk = np.empty((rows, nc), dtype=x.dtype)
    d = np.empty(rows * nc)
    xt = np.empty((nf, rows), dtype=x.dtype)
    acc = np.empty(rows, dtype=x.dtype)
    for r0 in range(0, n, _ROWS_BLOCK):
        r1 = min(r0 + _ROWS_BLOCK, n)
        m = r1 - r0
        # the block transposed, so that each score is a loop over the block's rows (vectorised,
        # features in order) rather than a 20-term reduction per row
        for i in range(m):
            for f in range(nf):
                xt[f, i] = x[r0 + i, f]
        for c in range(nc):
            w0 = wt[c, 0]
            for i in range(m):
                acc[i] = xt[0, i] * w0
            for f in range(1, nf):
                wf = wt[c, f]
                for i in range(m):
                    acc[i] += xt[f, i] * wf
            bc = b[c]
            for i in range(m):
                blk[i, c] = acc[i] + bc
        for r in range(r0, r1):
            i = r - r0
            best = _argmax_row(blk, i)
            winners[r] = labels[best] if named else best
            if keep:
                for c in range(nc):
                    scores[r, c] = blk[i, c]
        if transform == NONE:
            for r in range(r0, r1):
                for c in range(nc):
                    z[r, c] = blk[r - r0, c]
            continue
        if transform != SOFTMAX and transform != LOGISTIC:
            continue
        # the exponents into d, row after row, then one flat (vectorised) loop of exp
        for i in range(r1 - r0):
            if transform == SOFTMAX:
                top = blk[i, 0]
                for c in range(1, nc):
                    v = blk[i, c]
                    top = v if (v > top or v != v) else top  # a NaN sticks
                for c in range(nc):
                    d[i * nc + c] = np.float64(blk[i, c] - top)
            else:
                for c in range(nc):
                    d[i * nc + c] = -abs(np.float64(blk[i, c]))
        for j in range((r1 - r0) * nc):
            d[j] = _exp_nonpositive(d[j])
        for i in range(r1 - r0):
            base = i * nc
            if transform == SOFTMAX:
                total = 0.0
                for c in range(nc):
                    total += d[base + c]
                inv = 1.0 / total
                for c in range(nc):
                    z[r0 + i, c] = d[base + c] * inv
            else:
                for c in range(nc):
                    # 1 / (1 + exp(-s)) from e = exp(-|s|): no overflow; NaN stays NaN
                    e = d[base + c]
                    q = 1.0 / (1.0 + e)
                    z[r0 + i, c] = q if blk[i, c] >= 0 else e * q


@njit(**_OPTS)
def normalize_rows(x, norm, y):  # pragma: no cover (compiled)
    """y[r] = x[r] / d as float32, d in x's precision: the row's maximum (norm 0, a NaN in
    the row makes it NaN), the sum of |x| (1) or sqrt(sum x^2) (2); d = 0 leaves the row
    as it is. Sums run in column order (numpy's may differ: float rounding apart)."""
    n, nc = x.shape
    for r in range(n):
        if norm == 0:
            d = x[r, 0]
            for c in range(1, nc):
                v = x[r, c]
                d = v if (v > d or v != v) else d
        elif norm == 1:
            d = abs(x[r, 0])
            for c in range(1, nc):
                d += abs(x[r, c])
        else:
            d = x[r, 0] * x[r, 0]
            for c in range(1, nc):
                d += x[r, c] * x[r, c]
            d = math.sqrt(d)
        if d == 0:
            d = d + 1
        for c in range(nc):
            y[r, c] = x[r, c] / d
