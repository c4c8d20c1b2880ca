"""_fastmath kernels, compiled and numpy paths: accuracy in ulp against float64 over dense sweeps, special values, chunking, float16 casts, dispatch."""

from __future__ import annotations

import math
import threading

import ml_dtypes
import numpy as np
import pytest
import scipy.special as sp

from onnxrt.fastpaths import _fastmath as fm
from onnxrt import native as _jit
from onnxrt.ops_cpu import family_activation as fa

from .test_elementwise import run

F32 = np.float32
BF16 = np.dtype(ml_dtypes.bfloat16)
TINY = float(np.finfo(np.float32).tiny)  # smallest normal float32
SQRT1_2 = 1.0 / math.sqrt(2.0)


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def kernel_path(request):
    """Every test runs twice: with the numba loops (native.loops) and with the numpy passes."""
    if request.param == "numpy":
        with _jit.disabled():
            yield request.param
    else:
        assert _jit.kernels() is not None, _jit.LOAD_ERROR  # numba is a dependency: its loss must show
        yield request.param


def _ordered(a: np.ndarray) -> np.ndarray:
    """float32 bits mapped to integers that count float32 steps (-0 and +0 both map to 0)."""
    i = np.asarray(a, F32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulps(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Distance in float32 steps between float32 ``y`` and the float64 ``ref`` rounded to float32 (NaN == NaN)."""
    with np.errstate(all="ignore"):
        r = np.asarray(ref, np.float64).astype(F32)
    d = np.abs(_ordered(y) - _ordered(r))
    d[np.isnan(y) & np.isnan(r)] = 0
    d[np.isnan(y) ^ np.isnan(r)] = 1 << 40
    return d


def sweep(lo: float, hi: float, n: int = 600_000, seed: int = 0) -> np.ndarray:
    """About 1e6 float32 values over [lo, hi]: an even grid, uniform and normal draws, and
    magnitudes spread logarithmically from the subnormals up (both signs) where in range."""
    rng = np.random.default_rng(seed)
    mags = np.exp(rng.uniform(math.log(1e-45), math.log(max(abs(lo), abs(hi))), n // 2))
    parts = [
        np.linspace(lo, hi, n),
        rng.uniform(lo, hi, n // 2),
        rng.standard_normal(n // 4) * (hi - lo) / 8,
        mags,
        -mags,
    ]
    x = np.concatenate(parts).astype(F32)
    return x[(x >= lo) & (x <= hi)]


def around(v: float, count: int = 2000) -> np.ndarray:
    """Every float32 within ``count`` steps of |v| (and their negatives; from +0 up when v is near 0)."""
    c = int(np.float32(abs(v)).view(np.int32))
    x = np.arange(max(c - count, 0), c + count + 1, dtype=np.int32).view(F32)
    return np.concatenate([x, -x])


def _gelu64(x):
    return 0.5 * x * sp.erfc(-x * SQRT1_2)


def _gelu_tanh64(x):
    u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-2.0 * u))


def _mish64(x):
    return x * np.tanh(np.logaddexp(x, 0.0))


# ---------------------------------------------------------------------------------------
# accuracy (float32 results against float64, in float32 steps)
# ---------------------------------------------------------------------------------------


def test_erf_within_one_ulp():
    x = np.concatenate([sweep(-6, 6), around(1.0), around(3.9192, 30000), around(3.925)])
    y = fm.erf(x)
    assert y.dtype == np.float32 and y.shape == x.shape
    assert ulps(y, sp.erf(x.astype(np.float64))).max() <= 1
    # beyond 3.9192 erf rounds to 1.0f: exactly +-1
    big = np.abs(x) >= 3.9193
    np.testing.assert_array_equal(y[big], np.sign(x[big]))
    # the exact merge of the branches needs both to give the same erf(1)
    one = np.ones(1, F32)
    small = one + one * np.polynomial.polynomial.polyval(one, np.array(fm.ERF_SMALL, F32)).astype(F32)
    assert fm._ERF_AT_SPLIT == F32(sp.erf(1.0)) == fm.erf(one)[0]
    assert abs(int(small.view(np.int32)[0]) - int(F32(sp.erf(1.0)).view(np.int32))) <= 1


def test_gelu_accuracy_by_region():
    x = np.concatenate([sweep(-5.5, 6), around(1.0)])
    y = fm.gelu(x)
    e = ulps(y, _gelu64(x.astype(np.float64)))
    assert e[x >= 0].max() <= 2
    assert e[(x < 0) & (x >= -1)].max() <= 4
    assert e[(x < -1) & (x >= -3)].max() <= 14
    # further out the rounding of the exponent (~x^2/2) dominates: relative error ~ x^2 * 6e-8
    tail = x < -3
    rel = np.abs(y[tail] / _gelu64(x[tail].astype(np.float64)) - 1)
    assert rel.max() < 3e-6
    # the float32 formula 0.5 x (1 + erf(x / sqrt 2)) has no correct digit at x = -4.5
    assert abs(fm.gelu(np.float32([-4.5]))[0] / _gelu64(-4.5) - 1) < 3e-6


def test_gelu_tanh_accuracy():
    # x / (1 + exp(-2u)), family_activation's float32 formula (no kernel needed)
    x = sweep(-9, 9)
    y = fa._gelu_plain(x, "tanh")
    ref = _gelu_tanh64(x.astype(np.float64))
    e = ulps(y, ref)
    assert e[x >= -1].max() <= 3
    # exp's argument -2u takes four roundings: a relative error up to about |2u| * 1.7e-7
    # (the float32 formula 0.5 x (1 + tanh u) loses everything there)
    neg = x < -1
    u2 = np.abs(2 * math.sqrt(2 / math.pi) * (x[neg] + 0.044715 * x[neg].astype(np.float64) ** 3))
    assert np.all(np.abs(y[neg] / ref[neg] - 1) <= 3e-7 + u2 * 2e-7)


def test_expm1_and_the_elus_within_their_bounds():
    x = np.concatenate([sweep(-30, 2), around(-17.3287, 3000), around(-0.3466), np.float32([-20, -20.5, -88, -1e30])])
    xd = x.astype(np.float64)
    assert ulps(fm.expm1_neg(x), np.expm1(np.minimum(xd, 0))).max() <= 1
    assert ulps(fm.elu(x), np.where(xd > 0, xd, np.expm1(xd))).max() <= 1
    assert ulps(fm.elu(x, 0.25), np.where(xd > 0, xd, 0.25 * np.expm1(xd))).max() <= 2
    alpha, gamma = F32(1.67326319217681884765625), F32(1.05070102214813232421875)
    selu = np.where(xd > 0, float(gamma) * xd, float(alpha) * float(gamma) * np.expm1(xd))
    assert ulps(fm.selu(x), selu).max() <= 2  # gamma * alpha is rounded once to float32
    celu = np.maximum(xd, 0) + np.minimum(0, 2.0 * np.expm1(xd / 2.0))
    assert ulps(fm.celu(x, 2.0), celu).max() <= 2


def test_sigmoid_and_swish_follow_numpy_exp():
    swish = fa._swish_plain
    # numpy's vectorised float32 exp is within 2 ulp; e / (1 + e) adds at most one step
    x = np.concatenate([sweep(-104, 100), np.float32([-87.3, -88.8, -95, -103.9, -104.5, 88.7, 88.8, 89])])
    xd = x.astype(np.float64)
    y = fm.sigmoid(x)
    assert ulps(y, 1.0 / (1.0 + np.exp(-xd))).max() <= 3  # the subnormal results included
    assert np.float32(np.exp(np.float32(-100))) == fm.sigmoid(np.float32([-100.0]))[0] > 0
    sw = swish(x)
    ref = xd / (1.0 + np.exp(-xd))
    normal = x > -87  # below, exp(x) is subnormal and x * exp(x) has its absolute accuracy only
    assert ulps(sw[normal], ref[normal]).max() <= 4  # sigmoid's 3, times x
    assert np.abs(sw[~normal] - ref[~normal]).max() < 3e-43  # about |x| * 2**-149
    xs = sweep(-40, 40)
    assert ulps(swish(xs, 0.5), xs.astype(np.float64) / (1.0 + np.exp(-0.5 * xs.astype(np.float64)))).max() <= 4


def test_softplus_and_mish():
    x = np.concatenate([sweep(-104, 100), around(0.0, 200)])
    xd = x.astype(np.float64)
    # log1p by the atanh series is within 1 ulp; np.exp's 2 ulp carry over where softplus ~ exp(x)
    with np.errstate(invalid="ignore"):
        assert ulps(fm.softplus(x), np.logaddexp(xd, 0.0)).max() <= 3
    t = np.concatenate([np.linspace(0, 1, 300_001), np.exp(np.linspace(-100, 0, 100_000))]).astype(F32)
    y, w, w2 = np.empty_like(t), np.empty_like(t), np.empty_like(t)
    fm._log1p_01(t, y, w, w2)
    assert ulps(y, np.log1p(t.astype(np.float64))).max() <= 1
    m = fa._mish_plain(x)  # x n / (n + 2), family_activation's float32 formula
    with np.errstate(invalid="ignore"):
        ref = _mish64(xd)
    normal = x > -87  # as for swish: x * (subnormal exp(x)) below
    assert ulps(m[normal], ref[normal]).max() <= 4
    assert np.abs(m[~normal] - ref[~normal]).max() < 3e-43


# ---------------------------------------------------------------------------------------
# special values
# ---------------------------------------------------------------------------------------

SPECIAL = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-40, 3.4e38, -3.4e38], F32)


def _same(y, expected):
    """Equal values, NaN where expected, and the same sign on zeros (a NaN's sign is not compared)."""
    expected = np.asarray(expected, F32)
    np.testing.assert_array_equal(y, expected)
    num = ~np.isnan(expected)
    assert np.array_equal(np.signbit(y[num]), np.signbit(expected[num])), (y, expected)


def test_special_values():
    s = SPECIAL
    tiny_erf = np.float32(s[5:9].astype(np.float64) * 2 / math.sqrt(math.pi))
    _same(fm.erf(s), [-0.0, 0.0, 1, -1, np.nan, *tiny_erf, 1, -1])
    _same(fm.gelu(s), [-0.0, 0.0, np.inf, np.nan, np.nan, 5e-46, -5e-46, 5e-41, -5e-41, 3.4e38, -0.0])
    _same(fa._gelu_plain(s, "tanh"), [-0.0, 0.0, np.inf, np.nan, np.nan, 5e-46, -5e-46, 5e-41, -5e-41, 3.4e38, -0.0])
    _same(fm.expm1_neg(s), [-0.0, 0.0, 0.0, -1, np.nan, 0.0, -1e-45, 0.0, -1e-40, 0.0, -1])
    _same(fm.elu(s), [-0.0, 0.0, np.inf, -1, np.nan, 1e-45, -1e-45, 1e-40, -1e-40, 3.4e38, -1])
    # celu(-1e-45): x / alpha underflows to -0 in float32 (as in the plain formula), so +0
    _same(fm.celu(s, 2.0), [-0.0, 0.0, np.inf, -2, np.nan, 1e-45, 0.0, 1e-40, -1e-40, 3.4e38, -2])
    _same(fm.sigmoid(s), [0.5, 0.5, 1, 0, np.nan, 0.5, 0.5, 0.5, 0.5, 1, 0])
    _same(fa._swish_plain(s), [-0.0, 0.0, np.inf, np.nan, np.nan, 5e-46, -5e-46, 5e-41, -5e-41, 3.4e38, -0.0])
    ln2 = math.log(2.0)
    _same(fm.softplus(s), [ln2, ln2, np.inf, 0, np.nan, ln2, ln2, ln2, ln2, 3.4e38, 0])
    _same(fa._mish_plain(s), [-0.0, 0.0, np.inf, np.nan, np.nan, 1e-45, -1e-45, 6.0000001e-41, -6.0000001e-41, 3.4e38, -0.0])
    # no warning leaks out of the kernels (overflowing exp, inf * 0; underflow is numpy's default 'ignore')
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        for f in (fm.erf, fm.gelu, fm.expm1_neg, fm.elu, fm.sigmoid, fm.softplus, fa._mish_plain, fa._swish_plain):
            f(s)
        fa._gelu_plain(s, "tanh")


def test_selu_special_values():
    y = fm.selu(np.array([-0.0, np.inf, -np.inf, np.nan, 2.0], F32))
    gamma = F32(1.05070102214813232421875)
    alpha_gamma = F32(F32(1.67326319217681884765625) * gamma)
    _same(y, [-0.0, np.inf, -alpha_gamma, np.nan, gamma * F32(2)])


# ---------------------------------------------------------------------------------------
# chunks, layouts, inputs left alone
# ---------------------------------------------------------------------------------------

KERNELS = [fm.erf, fm.gelu, fm.expm1_neg, fm.elu, fm.selu, fm.celu, fm.sigmoid, fm.softplus, fm.f32_to_f16]


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__)
def test_chunk_boundaries_give_the_same_bits(kernel, monkeypatch):
    rng = np.random.default_rng(1)
    x = np.concatenate([(rng.standard_normal(3 * 64 + 1) * 4), SPECIAL]).astype(F32)
    whole = kernel(x)
    monkeypatch.setattr(fm, "CHUNK", 64)
    for n in (0, 1, 63, 64, 65, 128, 129, len(x)):
        y = kernel(x[:n])
        assert y.shape == (n,) and y.dtype == whole.dtype
        np.testing.assert_array_equal(y.view(np.uint8), whole[:n].view(np.uint8))


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__)
def test_layouts_and_read_only_inputs(kernel):
    rng = np.random.default_rng(2)
    base = (rng.standard_normal((40, 30)) * 3).astype(F32)
    base.setflags(write=False)
    before = base.copy()
    for x in (base, base.T, base[:, ::3], base[::-2], np.asfortranarray(base), base[5, 7]):
        y = kernel(x)
        assert y.shape == x.shape
        np.testing.assert_array_equal(y, kernel(np.ascontiguousarray(x).reshape(-1)).reshape(x.shape))
    np.testing.assert_array_equal(base, before)
    assert kernel(base[5, 7]).ndim == 0


def test_sigmoid_in_place():
    x = np.linspace(-120, 120, 10_001, dtype=F32)
    expected = fm.sigmoid(x)
    y = x.copy()
    assert fm.sigmoid(y, out=y) is y
    np.testing.assert_array_equal(y, expected)


def test_compiled_sigmoid_flags_its_subnormal_cases(kernel_path):
    """The fast compiled loop (one power of two) agrees bit for bit with the exact one from
    -87.33 up and reports the inputs below it, whose results are recomputed."""
    k = _jit.kernels()
    if kernel_path != "compiled" or k is None:
        pytest.skip("the compiled loops only")
    x = np.concatenate([sweep(-87.33, 100, 100_000), np.float32([np.inf, np.nan, 88.0, 89.0, -0.0])])
    fast, exact = np.empty_like(x), np.empty_like(x)
    assert not k.sigmoid(x, fast)
    k.sigmoid_exact(x, exact)
    _bits_equal(fast, exact)
    for low in (np.float32(-87.34), np.float32(-np.inf), -np.float32(np.nan), np.float32(-1e30)):
        y = x.copy()
        y[777] = low
        assert k.sigmoid(y, fast)
        got = fm.sigmoid(y)
        if np.isnan(low):
            assert np.isnan(got[777])
        else:
            assert ulps(got[777:778], 1.0 / (1.0 + np.exp(-np.float64(low)))).max() <= 3
        _bits_equal(np.delete(got, 777), np.delete(exact, 777))


def test_threads_get_their_own_buffers(kernel_path):
    rng = np.random.default_rng(3)
    xs = [(rng.standard_normal(300_000) * (i + 1)).astype(F32) for i in range(4)]
    # native.disabled() switches the calling thread only: the new threads are told the path
    compiled = None if kernel_path == "compiled" else False
    expected = [fm.gelu(x, compiled=compiled) for x in xs]
    results = [None] * 4

    def work(i):
        for _ in range(3):
            results[i] = fm.gelu(xs[i], compiled=compiled)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r, e in zip(results, expected):
        np.testing.assert_array_equal(r, e)


# ---------------------------------------------------------------------------------------
# float32 <-> float16
# ---------------------------------------------------------------------------------------


def test_every_float16_converts_exactly_and_back():
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    f = fm.f16_to_f32(h)
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f.view(np.uint32), h.astype(np.float32).view(np.uint32))  # NaN payloads too
    np.testing.assert_array_equal(fm.f32_to_f16(f).view(np.uint16), h.view(np.uint16))


def _numpy_half(x):
    with np.errstate(all="ignore"):
        return x.astype(np.float16).view(np.uint16)


def test_float32_to_float16_matches_numpy_bit_for_bit():
    rng = np.random.default_rng(4)
    bits = rng.integers(0, 1 << 32, 2_000_000, dtype=np.uint64).astype(np.uint32).view(F32)  # every exponent, NaNs
    typical = (rng.standard_normal(1_000_000) * np.exp(rng.uniform(-20, 12, 1_000_000))).astype(F32)
    # ties: the midpoints between consecutive halves (exact in float32), both signs
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mid = ((h[:-1] + h[1:]) / 2).astype(F32)
    edges = np.array([65504, 65519.996, 65520, 65536, 1e9, np.inf, 2**-14, 2**-24, 2**-25, 2**-26, 3 * 2**-25, 1e-45, 0.0], F32)
    nans = np.array([0x7F800001, 0x7FC00000, 0x7F802000, 0x7FBFFFFF, 0x7F801FFF, 0x7FFFFFFF], np.uint32).view(F32)
    for x in (bits, typical, mid, -mid, edges, -edges, nans, -nans):
        y = fm.f32_to_f16(x)
        assert y.dtype == np.float16
        np.testing.assert_array_equal(y.view(np.uint16), _numpy_half(x))


# ---------------------------------------------------------------------------------------
# dispatch: the operators use the kernels from fm.MIN_SIZE elements on
# ---------------------------------------------------------------------------------------

N = fm.CAST_MIN_SIZE + 5  # above every kernel's threshold

ENGINE_CASES = {
    # op -> (opset, attributes, float64 reference)
    "Erf": (13, {}, lambda v: sp.erf(v)),
    "Sigmoid": (13, {}, lambda v: 1 / (1 + np.exp(-v))),
    "Elu": (22, {"alpha": 0.5}, lambda v: np.where(v > 0, v, 0.5 * np.expm1(v))),
    "Selu": (22, {}, lambda v: np.where(v > 0, v, 1.6732632423543772 * np.expm1(v)) * 1.0507009873554805),
    "Celu": (28, {"alpha": 2.0}, lambda v: np.maximum(v, 0) + np.minimum(0, 2 * np.expm1(v / 2))),
    "Softplus": (22, {}, lambda v: np.logaddexp(v, 0)),
    "Gelu": (20, {}, _gelu64),
    "Mish": (22, {}, _mish64),
    "Swish": (24, {"alpha": 0.75}, lambda v: v / (1 + np.exp(-0.75 * v))),
}


@pytest.mark.parametrize("op", sorted(ENGINE_CASES))
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16], ids=str)
def test_operators_take_the_fast_kernels(op, dtype):
    opset, attrs, ref = ENGINE_CASES[op]
    x = (np.random.default_rng(5).standard_normal(N) * 3).astype(dtype)
    y = run(op, x, opset=opset, **attrs)
    assert y.dtype == dtype and y.shape == x.shape
    expected = ref(x.astype(np.float64))
    tol = {np.dtype(np.float32): 1e-6, np.dtype(np.float16): 1e-3, BF16: 8e-3}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), expected, rtol=tol, atol=tol * 1e-2)
    # large and small inputs agree: the small ones take numpy / scipy (Gelu's far negative
    # tail is 3e-6 relative in float32, see fm.gelu)
    small = run(op, x[:100], opset=opset, **attrs)
    rtol = 3e-6 if op == "Gelu" and dtype == np.dtype(np.float32) else tol
    np.testing.assert_allclose(y[:100].astype(np.float64), small.astype(np.float64), rtol=rtol, atol=1e-30)


def test_gelu_tanh_and_unusual_attributes_through_the_engine():
    x = (np.random.default_rng(6).standard_normal(N) * 3).astype(F32)
    y = run("Gelu", x, opset=20, approximate="tanh")
    np.testing.assert_allclose(y, _gelu_tanh64(x.astype(np.float64)), rtol=2e-5, atol=1e-30)  # see test_gelu_tanh_accuracy
    # Celu with a negative alpha declines the fast kernel (its clip assumes alpha > 0)
    y = run("Celu", x, opset=12, alpha=-1.5)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(y, np.maximum(xd, 0) + np.minimum(0, -1.5 * np.expm1(xd / -1.5)), rtol=1e-6)


def test_relu_keeps_signed_zero_and_nan():
    x = np.array([-0.0, 0.0, -1.0, 2.0, np.nan, -np.inf, np.inf], F32)
    y = run("Relu", x, opset=14)
    _same(y, [-0.0, 0.0, 0.0, 2.0, np.nan, 0.0, np.inf])


def test_cast_between_float32_and_float16_uses_the_bit_kernels():
    x = (np.random.default_rng(7).standard_normal(N) * 1e3).astype(F32)
    x[:4] = [np.nan, np.inf, 7e4, -1e-6]
    h = run("Cast", x, opset=21, to=10)
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h.view(np.uint16), _numpy_half(x))
    back = run("Cast", h, opset=21, to=1)
    np.testing.assert_array_equal(back.view(np.uint32), h.astype(np.float32).view(np.uint32))


def _bits_equal(a, b):
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b))
    np.testing.assert_array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


@pytest.mark.parametrize("alpha", [0.01, 0.2, 1.0, 0.0, -0.5, 1.5, 1e30, np.inf, np.nan])
def test_leaky_relu_without_where_keeps_every_bit(alpha):
    # max(alpha x, x) / min(alpha x, x) instead of np.where(x < 0, alpha x, x)
    x = np.concatenate([np.random.default_rng(8).standard_normal(50_000) * 3, SPECIAL]).astype(F32)
    with np.errstate(all="ignore"):
        expected = np.where(x < 0, x * F32(alpha), x)
        _bits_equal(fa._leaky_relu(x, alpha=alpha), expected)


@pytest.mark.parametrize(("alpha", "beta"), [(0.2, 0.5), (1 / 6, 0.5), (1.0, 0.0), (-1.0, -0.0), (2.0, 1.0)])
def test_hard_sigmoid_by_clip_keeps_every_bit(alpha, beta):
    x = np.concatenate([np.random.default_rng(9).standard_normal(50_000) * 3, SPECIAL]).astype(F32)
    with np.errstate(all="ignore"):
        y = x * F32(alpha) + F32(beta)
        expected = np.minimum(np.maximum(y, F32(0)), F32(1))
        _bits_equal(fa._hard_sigmoid(x, alpha=alpha, beta=beta), expected)
        _bits_equal(fa._hard_swish(x), np.minimum(np.maximum(x * F32(1 / 6) + F32(0.5), F32(0)), F32(1)) * x)
