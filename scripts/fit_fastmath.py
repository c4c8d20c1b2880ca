"""Fit the polynomial coefficients of src/onnxrt/fastpaths/_fastmath.py and print them as Python tables.

Usage: python scripts/fit_fastmath.py [--check]

Each polynomial is a weighted minimax (Chebyshev) fit on a dense grid, solved exactly as
a linear program (scipy's HiGHS) over a Chebyshev basis, converted to monomial
coefficients (Horner order: constant first) and rounded to float32. The weights express
the error that matters for the final float32 result (relative error of erf, erfc, expm1,
log1p). ``--check`` evaluates the rounded float32 polynomials the way _fastmath does and
prints the largest error in ulp against float64 references (scipy.special).
Development tool only: the runtime never imports scipy.optimize.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import scipy.special as sp
from numpy.polynomial import Chebyshev, Polynomial
from scipy.optimize import linprog

#: the split points and clip bounds _fastmath uses (keep both files in step)
ERF_SPLIT = 1.0  # |x| <= 1: x + x * Q(x^2); above: 1 - exp(P(|x| - 1))
ERF_CLIP = 3.925  # erf(x) rounds to 1.0f from x = 3.9192 on
GELU_SPLIT = 1.0  # |x| <= 1: gelu = x (0.5 + x q(x^2)); above: relu(x) - |x| h(|x|), h = exp(P(|x| - 1))
GELU_CLIP = 3.925 * math.sqrt(2.0)  # beyond, 0.5 * (1 + erf(x / sqrt 2)) rounds to 0 or 1 in float32
EXPM1_R = 0.3466 * 1.01  # |r| <= ln(2) / 2 after the reduction, a little slack for the rounding of k
LOG1P_W = 1.0 / 3.0  # w = t / (2 + t) for t in [0, 1]


def minimax(t: np.ndarray, f: np.ndarray, w: np.ndarray, deg: int) -> np.ndarray:
    """Monomial coefficients (constant first) of the degree-``deg`` P minimising max |w (f - P(t))|."""
    lo, hi = float(t.min()), float(t.max())
    u = (2.0 * t - (lo + hi)) / (hi - lo)
    basis = np.polynomial.chebyshev.chebvander(u, deg) * w[:, None]
    n = deg + 1
    ones = np.ones((len(t), 1))
    a_ub = np.vstack([np.hstack([basis, -ones]), np.hstack([-basis, -ones])])
    b_ub = np.concatenate([f * w, -f * w])
    cost = np.zeros(n + 1)
    cost[-1] = 1.0
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=[(None, None)] * n + [(0, None)], method="highs")
    if res.status != 0:
        raise RuntimeError(res.message)
    coef = Chebyshev(res.x[:n], domain=[lo, hi]).convert(kind=Polynomial).coef
    return np.pad(coef, (0, n - len(coef)))  # convert() drops trailing zeros


def fits() -> dict[str, np.ndarray]:
    """Every coefficient table (float32 values)."""
    out = {}
    # erf, |x| <= 1: erf(x) = x + x * Q(x^2), error relative to erf
    x = np.linspace(1e-4, ERF_SPLIT, 6000)
    s = x * x
    out["ERF_SMALL"] = minimax(s, (sp.erf(x) / x - 1.0), x / sp.erf(x), 6)
    # erf, 1 < |x| <= 3.925: erf = 1 - exp(P(|x| - 1)), P ~ log(erfc); weight erfc (error of erf, absolute)
    x = np.linspace(ERF_SPLIT, ERF_CLIP, 6000)
    out["ERF_LARGE"] = minimax(x - ERF_SPLIT, np.log(sp.erfc(x)), sp.erfc(x) / sp.erfc(ERF_SPLIT), 5)
    # the same in base 2 for the compiled loop (erf = 1 - 2**P2, no Cody-Waite step before the power)
    out["ERF_LARGE2"] = minimax(x - ERF_SPLIT, np.log2(sp.erfc(x)), sp.erfc(x) / sp.erfc(ERF_SPLIT), 5)
    # Gelu for |x| <= 1: x (0.5 + x q(x^2)), error relative to gelu (x h(|x|) for x < 0, the harder side)
    a = np.linspace(1e-4, GELU_SPLIT, 4000)
    h = 0.5 * sp.erfc(a / math.sqrt(2.0))
    out["GELU_SMALL"] = minimax(a * a, (a * (1.0 - h) - 0.5 * a) / (a * a), a / h, 4)
    # beyond, h(a) = 0.5 erfc(a / sqrt 2) (the upper tail, a = |x|) as exp(P(a - 1)), P ~ log h, error
    # relative to h (float32 cannot do much better: rounding P's value is already |P| * 2**-25 relative)
    a = np.linspace(GELU_SPLIT, GELU_CLIP, 8000)
    log_h = np.log(0.5) + np.log(sp.erfcx(a / math.sqrt(2.0))) - 0.5 * a * a
    out["GELU_LARGE"] = minimax(a - GELU_SPLIT, log_h, np.ones_like(a), 8)
    # expm1(r) = r (1 + r Q(r)) on |r| <= ln2/2, error relative to expm1
    r = np.linspace(-EXPM1_R, EXPM1_R, 6001)
    r = r[r != 0]
    out["EXPM1"] = minimax(r, (np.expm1(r) / r - 1.0) / r, r * r / np.abs(np.expm1(r)), 5)
    # exp(r) = 1 + r (1 + r Q(r)), error relative to exp: one degree fewer than expm1 needs
    out["EXP"] = minimax(r, (np.expm1(r) / r - 1.0) / r, r * r / np.exp(r), 4)
    # 2**f = 1 + f E(f) on |f| <= 1/2, error relative to 2**f (the compiled erf's large branch,
    # where erfc <= 0.16 scales it down: degree 5 keeps erf within 1 ulp)
    f = np.linspace(-0.5, 0.5, 6001)
    f = f[f != 0]
    out["EXP2"] = minimax(f, np.expm1(f * math.log(2.0)) / f, f / np.exp2(f), 4)
    # log1p(t) = t - w (t - w^2 S(w^2)), w = t / (2 + t): S(w2) = (2 atanh(w) - 2 w) / w^3
    w = np.linspace(1e-4, LOG1P_W, 6000)
    t = 2.0 * w / (1.0 - w)
    out["LOG1P"] = minimax(w * w, (2.0 * np.arctanh(w) - 2.0 * w) / w**3, w**3 / np.log1p(t), 3)
    return out


def _key(a: np.ndarray) -> np.ndarray:
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulp(y: np.ndarray, ref: np.ndarray) -> int:
    """Largest distance in float32 steps between y and ref rounded to float32."""
    with np.errstate(all="ignore"):
        r = ref.astype(np.float32)
    return int(np.max(np.abs(_key(y.astype(np.float32)) - _key(r))))


def check() -> None:
    """Evaluate the _fastmath kernels (which hold the rounded tables) against float64 references."""
    from onnxrt.fastpaths import _fastmath as fm

    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-6, 6, 2_000_000), rng.standard_normal(1_000_000)]).astype(np.float32)
    xd = x.astype(np.float64)
    print("erf", ulp(fm.erf(x), sp.erf(xd)))
    print("gelu (x >= -3)", ulp(fm.gelu(x)[x >= -3], (0.5 * xd * sp.erfc(-xd / math.sqrt(2.0)))[x >= -3]))
    neg = -np.abs(x) * 3
    print("expm1 (x <= 0)", ulp(fm.expm1_neg(neg), np.expm1(neg.astype(np.float64))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    for name, coef in fits().items():
        values = ", ".join(f"{float(np.float32(c))!r}" for c in coef)
        print(f"{name} = _f32({values})")
    if args.check:
        check()


if __name__ == "__main__":
    main()
