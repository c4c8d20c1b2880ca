"""The team of GIL-free worker threads: its results, its fallbacks (busy, one thread, other platforms), forks and concurrent callers."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from onnxrt import parallel
from onnxrt.fastpaths import _fastmath as fm
from onnxrt import native as _jit; from onnxrt.ops_cpu import op_softmax

from ..helpers import run_in_threads

team = _jit.kernels(_jit.TEAM)
pytestmark = pytest.mark.skipif(team is None or not team.available(), reason="no numba, or not Linux on x86-64")


def _large(seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(1 << 19).astype(np.float32) * 30
    x[::1001] = -95.0  # subnormal sigmoids: the fast loop's parts fall back to the exact loop
    x[7] = np.nan
    return x


@pytest.fixture
def spy(monkeypatch):
    """The team's jobs: (part function name, parts) per run that went to the team."""
    calls = []
    kept = team.run_kept

    def run_kept(block, address, slots, arrays, addr, part, parts, workers):  # every job (team_split, TeamJob)
        ran = kept(block, address, slots, arrays, addr, part, parts, workers)
        if ran:
            calls.append((part.__wrapped__.__name__, parts))
        return ran

    monkeypatch.setattr(team, "run_kept", run_kept)
    monkeypatch.setattr(parallel, "KERNEL_THREADS", 2)
    # short jobs go to the team only when a worker is awake (a hot run): make them deterministic
    monkeypatch.setattr(team, "awake", lambda: True)
    return calls


def _serial(fn, *args):
    with parallel.limit_threads(1):
        return fn(*args)


def test_team_sigmoid_and_erf_equal_the_single_thread_loops(spy):
    k = _jit.kernels()
    x = _large(1)
    for fn in (fm.sigmoid, fm.erf):
        got = fn(x)
        ref = _serial(fn, x)
        assert got.dtype == np.float32 and got.shape == x.shape
        np.testing.assert_array_equal(got, ref)
    assert [name for name, _ in spy] == ["elementwise_part", "elementwise_part"] and spy[0][1] == 8
    # in place (RNN gates, fused activations): the exact loop, part by part
    y = x.copy()
    fm.sigmoid(y, out=y)
    exact = np.empty_like(x)
    k.sigmoid_exact(x, exact)
    np.testing.assert_array_equal(y, exact)
    assert len(spy) == 3
    assert np.isnan(y[7]) and y[1001] > 0


@pytest.mark.parametrize("log", [False, True])
def test_team_softmax_equals_the_pool_path(spy, monkeypatch, log):
    from onnxrt.fastpaths.softmax import softmax_compiled

    x = np.random.default_rng(2).standard_normal((600, 1000)).astype(np.float32) * 20
    x[3, 999] = np.nan  # a NaN row (in the tail of the vectorised maximum, which may skip it)
    x[4] = -np.inf  # a row without any finite value
    x[5, :10] = np.inf
    got = softmax_compiled(x, x.shape[1], log)
    assert spy == [("softmax_part", 9)]
    monkeypatch.setattr(_jit, "team_split", lambda *a, **kw: False)
    ref = softmax_compiled(x, x.shape[1], log)
    # the team's part function and the pool's row loops are separately compiled loops that may
    # vectorise the row sum differently: a sum of n positive terms in 16 lanes and another
    # order differs by at most (n / 16 + 16) ulps of the sum, plus 2 for the exp and the
    # division (an absolute difference of that many ulps for the log's subtraction)
    ulps = (x.shape[1] / 16 + 16 + 2) * np.finfo(np.float32).eps
    fin = ~np.isnan(ref)
    assert np.array_equal(np.isnan(got), ~fin) and got.dtype == ref.dtype and got.shape == ref.shape
    if log:
        np.testing.assert_allclose(got[fin], ref[fin], rtol=ulps, atol=ulps)
    else:
        np.testing.assert_allclose(got[fin], ref[fin], rtol=ulps, atol=0)
    assert np.isnan(got[3]).all() and np.isnan(got[4]).all() and np.isnan(got[5]).all()
    assert not np.isnan(np.delete(got, [3, 4, 5], axis=0)).any()


def test_team_is_not_used_with_one_thread_small_arrays_or_when_busy(spy, monkeypatch):
    x = _large(3)
    ref = _serial(fm.sigmoid, x)
    np.testing.assert_array_equal(_serial(fm.sigmoid, x), ref)
    np.testing.assert_array_equal(fm.sigmoid(x[:1000]), ref[:1000])
    assert spy == []
    with team._BUSY:  # another caller's job: this one takes the pool instead
        np.testing.assert_array_equal(fm.sigmoid(x), ref)
    assert spy == []
    monkeypatch.setattr(team, "_SYSCALL", None)  # another platform
    assert not team.available()
    np.testing.assert_array_equal(fm.sigmoid(x), ref)
    assert spy == []


def test_concurrent_callers_share_or_fall_back(spy):
    inputs = [_large(10 + i) for i in range(4)]
    expected = [_serial(fm.sigmoid, x) for x in inputs]

    def caller(i: int) -> None:
        for _ in range(10):
            np.testing.assert_array_equal(fm.sigmoid(inputs[i]), expected[i])

    assert not run_in_threads(caller, 4)
    assert spy  # some calls ran on the team


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_starts_its_own_team(spy):
    x = _large(4)
    expected = _serial(fm.sigmoid, x)
    np.testing.assert_array_equal(fm.sigmoid(x), expected)  # the parent's workers exist now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its parent's workers are not copied
        ok = False
        try:
            ok = bool(np.array_equal(fm.sigmoid(x), expected, equal_nan=True)) and len(spy) == 2
        finally:
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1"
    np.testing.assert_array_equal(fm.sigmoid(x), expected)  # and the parent's team still runs
    assert len(spy) == 2 and sys.platform.startswith("linux")


def test_team_transposes_blocks_of_rows(spy):
    from onnxrt.fastpaths.transpose import batched_2d, transpose_compiled

    def transpose(x, perm):  # Transpose's compiled path (onnxrt.fastpaths.transpose)
        return transpose_compiled(x, *batched_2d(x.shape, perm))

    rng = np.random.default_rng(6)
    for shape, perm in (((1000, 1003), (1, 0)), ((4, 300, 517), (0, 2, 1))):
        x = rng.standard_normal(shape).astype(np.float32)
        got = transpose(x, perm)
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, x.transpose(perm))
    assert [name for name, _ in spy] == ["transpose_part", "transpose_part"]


@pytest.mark.parametrize("stride", [1, 2])
def test_team_depthwise_and_grouped_pointwise_convolutions_equal_the_serial_paths(spy, monkeypatch, stride):
    """Depthwise planes and the (image, group) products of a grouped 1x1 convolution split
    over the team, each with its bias, residual and Relu: the same bits as the one-thread
    loop and the batched product with its epilogue pass."""
    from ..ops.conv_table import fast_conv

    def conv(*args, **kw):  # Conv's table, W a feed: the unprepared entries
        return fast_conv(*args, const=False, **kw)

    rng = np.random.default_rng(20 + stride)
    x = rng.standard_normal((2, 64, 30, 30)).astype(np.float32)
    x[0, 5, 3, 3] = np.nan
    cases = [  # (weights, kwargs): depthwise 3x3, then a 4-group 1x1
        (rng.standard_normal((64, 1, 3, 3)).astype(np.float32), dict(group=64, pads=[1, 1, 1, 1], strides=[stride] * 2)),
        (rng.standard_normal((64, 16, 1, 1)).astype(np.float32), dict(group=4, strides=[stride] * 2)),
    ]
    b = rng.standard_normal(64).astype(np.float32)
    residuals = [rng.standard_normal(conv(x, w, **kw).shape).astype(np.float32) for w, kw in cases]
    spy.clear()

    def run_all() -> list[np.ndarray]:
        out = []
        for (w, kw), z in zip(cases, residuals):
            for bias, res, act in ((None, None, None), (b, None, "Relu"), (b, z, "Relu"), (None, z, None)):
                out.append(conv(x, w, bias, res, activation=act, **kw))
        return out

    got = run_all()
    # a strided 1x1 reads a subsampled, non-contiguous input: it keeps the batched product
    assert [name for name, _ in spy] == ["depthwise_part"] * 4 + (["pointwise_groups_part"] * 4 if stride == 1 else [])
    monkeypatch.setattr(_jit, "team_split", lambda *a, **kw: False)
    ref = run_all()
    for g, r in zip(got, ref):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_array_equal(g, r)
    assert np.isnan(got[0][0, 5]).any() and (got[1][~np.isnan(got[1])] >= 0).all()


def _wait_for(predicate, seconds: float = 2.0) -> bool:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


class _Session:
    """What RunScope reads and writes of a session: the team jobs of its last run."""

    def __init__(self, team_jobs: int):
        self.team_jobs = team_jobs


def test_large_runs_keep_the_workers_awake(spy, monkeypatch):
    """An eager run (large tensors) of a session whose last run gave the team several jobs
    keeps the team's workers awake, yielding their core, from its start to its end; nested
    scopes count once; one-thread, small and team-less runs not at all; a session counts
    the jobs of each run and its large runs go through it."""
    x = _large(5)
    fm.sigmoid(x)  # the team exists now
    assert parallel._HOOKS.heat is team.heat
    ctl = team._CTL
    asleep = lambda: ctl[team._SLEEP] == 1  # noqa: E731
    assert _wait_for(asleep)  # idle workers sleep after SPIN_US
    owner = _Session(parallel.HOT_RUN_JOBS)
    with parallel.RunScope(None, eager=True, owner=owner):
        assert ctl[team._HOT] == 1 and _wait_for(lambda: not asleep())  # woken at the start
        with parallel.RunScope(None, eager=True, owner=owner):  # a run inside a kernel (a Loop's body)
            assert ctl[team._HOT] == 1
        import time

        time.sleep(0.02)  # far longer than SPIN_US: still awake
        assert not asleep()
        np.testing.assert_array_equal(fm.sigmoid(x), _serial(fm.sigmoid, x))
    assert ctl[team._HOT] == 0 and _wait_for(asleep)
    assert owner.team_jobs == 1  # the sigmoid's
    for scope in (parallel.RunScope(1, eager=True, owner=_Session(9)), parallel.RunScope(None, eager=False, owner=_Session(9)),
                  parallel.RunScope(None, eager=True, owner=_Session(parallel.HOT_RUN_JOBS - 1)),
                  parallel.RunScope(None, eager=True)):
        with scope:
            assert ctl[team._HOT] == 0
    calls = []
    monkeypatch.setattr(parallel._HOOKS, "heat", lambda d: calls.append(d) or True)
    import onnxrt
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Sigmoid", ["X"], ["A"]), helper.make_node("Erf", ["A"], ["B"]),
             helper.make_node("Sigmoid", ["B"], ["C"]), helper.make_node("Erf", ["C"], ["Y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None])])
    so = onnxrt.SessionOptions()  # (the four nodes unfused: each its own team job)
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = onnxrt.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(), so)
    sess.run(None, {"X": x[:10]})
    assert calls == [] and sess._engine.team_jobs == 0
    sess.run(None, {"X": x})  # four team jobs: the next large run keeps the workers awake
    assert calls == [] and sess._engine.team_jobs == 4
    (y,) = sess.run(None, {"X": x})
    assert calls == [1, -1] and y.dtype == np.float32 and y.shape == x.shape


def test_team_im2col_pooling_and_batch_normalization_equal_the_serial_paths(spy, monkeypatch):
    """im2col planes (strided, dilated, padded), max and average pooling planes (the 3x3
    stride-2 max and the same-size average by their own part functions) and the rows of
    BatchNormalization's scale and shift (+ Relu) split over the team: the same bits as the
    serial loops."""
    from onnxrt.fastpaths.norm import affine_compiled
    from onnxrt.fastpaths.pool import compiled_pool

    def pool(x, mode, kernel_shape, **kw):  # MaxPool/AveragePool's compiled path (onnxrt.fastpaths.pool)
        return compiled_pool(x.shape, mode, kernel_shape, **kw)(x)

    def _apply(x, a, b, spatial, relu=False):  # BatchNormalization's compiled path (onnxrt.fastpaths.norm)
        return affine_compiled(x, a, b, relu)

    from ..ops.conv_table import fast_conv

    def conv(*args, **kw):  # Conv's table, W a feed: the unprepared entries
        return fast_conv(*args, const=False, **kw)

    rng = np.random.default_rng(30)
    x = rng.standard_normal((2, 48, 41, 37)).astype(np.float32)
    x[1, 3, 4, 5] = np.nan
    w = rng.standard_normal((16, 48, 3, 3)).astype(np.float32)
    a, b = rng.standard_normal(48).astype(np.float32), rng.standard_normal(48).astype(np.float32)

    def run_all() -> list[np.ndarray]:
        return [
            conv(x, w, pads=[1, 0, 2, 1], strides=[2, 1], dilations=[1, 2]),  # small: im2col, then BLAS
            pool(x, "max", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
            pool(x, "avg", kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0),
            _apply(x, a, b, spatial=True),
            _apply(x, a, b, spatial=True, relu=True),
        ]

    got = run_all()
    assert [name for name, _ in spy] == ["im2col_part", "pool_s2_part", "pool_same_part", "affine_part", "affine_part"]
    monkeypatch.setattr(_jit, "team_split", lambda *a, **kw: False)
    for g, r in zip(got, run_all()):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_array_equal(g, r)
    assert not np.isnan(got[1]).any() and np.isnan(got[2][1, 3]).any() and np.isnan(got[4][1, 3]).any() and (got[4][~np.isnan(got[4])] >= 0).all()


def test_pool_loops_and_threaded_products_of_a_hot_run_put_the_workers_to_sleep(spy, monkeypatch):
    """Inside a hot run, the kernel pool's loops and BLAS's threaded products have the cores
    to themselves: the team's count drops below zero (workers sleep at once) for their
    duration and comes back after, woken; nested loops and cold runs change nothing."""
    fm.sigmoid(_large(6))  # the team exists
    assert parallel.COLD == team.COLD
    ctl = team._CTL
    seen = []

    def chunk(lo: int, hi: int) -> None:
        seen.append(int(ctl[team._HOT]))
        parallel.parallel_for(4, lambda a, b: seen.append(int(ctl[team._HOT])), work_per_item=parallel.MIN_PARALLEL_WORK)

    with parallel.RunScope(None, eager=True, owner=_Session(parallel.HOT_RUN_JOBS)):
        assert ctl[team._HOT] == 1
        parallel.parallel_for(4, chunk, work_per_item=parallel.MIN_PARALLEL_WORK)
        assert ctl[team._HOT] == 1 and seen and all(v == 1 - parallel.COLD for v in seen)
        deltas = []
        real = parallel._HOOKS.heat
        monkeypatch.setattr(parallel._HOOKS, "heat", lambda d: deltas.append(d) or real(d))
        a = np.random.default_rng(7).standard_normal((600, 600))  # float64: BLAS's own threads
        np.testing.assert_allclose(parallel.matmul(a, a), a @ a, rtol=1e-12, atol=1e-9)
        assert deltas == [-parallel.COLD, parallel.COLD] and ctl[team._HOT] == 1
    assert ctl[team._HOT] == 0
    seen.clear()
    with parallel.RunScope(None, eager=False):
        parallel.parallel_for(4, chunk, work_per_item=parallel.MIN_PARALLEL_WORK)
    assert seen and all(v == 0 for v in seen)


def test_products_of_a_large_run_split_over_the_team(spy):
    """Inside a large run, float32 products from BLAS_THREADS_FROM multiply-adds are split by
    blocks of rows (more rows than columns) or columns over the team, one single-threaded
    BLAS call per block; strided rows and ``out`` are honoured, other dtypes and products
    outside a run keep BLAS's own threads."""
    rng = np.random.default_rng(40)
    cases = [((300, 700), (700, 100)), ((64, 300), (300, 3000))]  # by rows, by columns
    with parallel.RunScope(None, eager=True):
        for sa, sb in cases:
            a = rng.standard_normal(sa).astype(np.float32)
            b = rng.standard_normal(sb).astype(np.float32)
            want = a.astype(np.float64) @ b
            got = parallel.matmul(a, b)
            assert got.dtype == np.float32 and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        assert [name for name, _ in spy] == ["gemm_part", "gemm_part"] and all(p == 2 for _, p in spy)
        wide = rng.standard_normal((64, 400)).astype(np.float32)
        a = wide[:, :300]  # rows 400 floats apart
        out = np.full((64, 3000), np.nan, np.float32)
        assert parallel.matmul(a, b, out=out) is out
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
        assert len(spy) == 3
        parallel.matmul(a.astype(np.float64), b.astype(np.float64))
        assert len(spy) == 3
    parallel.matmul(a, b)
    assert len(spy) == 3


def test_team_convolution_bands_equal_the_pool_path(spy, monkeypatch):
    """The bands of a large 2-D convolution taken from one counter by the team's threads,
    each with its own block of column scratch and the epilogue: the pool's bits."""
    from ..ops.conv_table import fast_conv as conv

    rng = np.random.default_rng(50)
    x = rng.standard_normal((2, 8, 120, 57)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    z = rng.standard_normal((2, 16, 60, 57)).astype(np.float32)
    kw = dict(pads=[1, 1, 1, 1], strides=[2, 1])
    got = [conv(x, w, **kw), conv(x, w, b, z, activation="Relu", **kw)]
    assert [name for name, _ in spy] == ["bands_part", "bands_part"] and all(p == 2 for _, p in spy)
    monkeypatch.setattr(_jit, "team_split", lambda *a, **k: False)
    for g, r in zip(got, [conv(x, w, **kw), conv(x, w, b, z, activation="Relu", **kw)]):
        assert g.dtype == np.float32 and g.shape == (2, 16, 60, 57)
        np.testing.assert_array_equal(g, r)
    assert (got[1] >= 0).all()


@pytest.mark.parametrize("kernel", [1, 3])
def test_team_products_of_a_convolution_apply_its_epilogue_by_blocks(spy, monkeypatch, kernel):
    """A one-image convolution whose product is large enough for two threads (1x1, or 3x3 on
    a map below the bands' size) runs it on the team with the bias, residual and Relu
    applied to each block in cache: the values of the product then the epilogue pass."""
    from ..ops.conv_table import fast_conv

    def conv(*args, **kw):  # Conv's table, W a feed: the unprepared entries
        return fast_conv(*args, const=False, **kw)

    rng = np.random.default_rng(60 + kernel)
    x = rng.standard_normal((1, 128, 40, 40)).astype(np.float32)
    w = (rng.standard_normal((96, 128, kernel, kernel)) / kernel).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    z = rng.standard_normal((1, 96, 40, 40)).astype(np.float32)
    pads = [kernel // 2] * 4
    got = [conv(x, w, b, z, pads=pads, activation="Relu"), conv(x, w, b, pads=pads), conv(x, w, pads=pads, activation="Relu")]
    names = [name for name, _ in spy if name != "im2col_part"]
    assert names == ["gemm_part"] * 3
    monkeypatch.setattr(_jit, "team_split", lambda *a, **k: False)
    want = [conv(x, w, b, z, pads=pads, activation="Relu"), conv(x, w, b, pads=pads), conv(x, w, pads=pads, activation="Relu")]
    for g, r in zip(got, want):
        assert g.dtype == np.float32 and g.shape == (1, 96, 40, 40)
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-3)
    assert (got[0] >= 0).all() and (got[1] < 0).any() and (got[2] >= 0).all()


def test_short_jobs_go_only_to_awake_workers(spy, monkeypatch):
    """A job below its kernel's cold size (here BatchNormalization's rows) waits for no
    sleeping worker: it runs on the caller, with the same bits; awake workers take it."""
    from onnxrt.fastpaths.norm import affine_compiled

    def _apply(x, a, b, spatial, relu=False):  # BatchNormalization's compiled path (onnxrt.fastpaths.norm)
        return affine_compiled(x, a, b, relu)

    rng = np.random.default_rng(70)
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)  # 200K elements: 6 parts, below the cold size
    a, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    hot = _apply(x, a, b, spatial=True, relu=True)
    assert [name for name, _ in spy] == ["affine_part"]
    monkeypatch.setattr(team, "awake", lambda: False)
    cold = _apply(x, a, b, spatial=True, relu=True)
    assert len(spy) == 1 and cold.dtype == np.float32 and cold.shape == x.shape
    np.testing.assert_array_equal(hot, cold)
    big = rng.standard_normal((1, 64, 112, 112)).astype(np.float32)  # above: sleeping workers are woken
    _apply(big, a, b, spatial=True)
    assert [name for name, _ in spy] == ["affine_part", "affine_part"]


def test_a_run_counts_the_short_jobs_it_offered_sleeping_workers(spy, monkeypatch):
    """Short jobs that found the workers asleep still count for the session: its next large
    run then keeps them awake (else a session that starts cold would stay cold)."""
    import onnxrt
    from onnx import TensorProto, helper, numpy_helper

    monkeypatch.setattr(team, "awake", lambda: False)
    rng = np.random.default_rng(80)
    inits = [numpy_helper.from_array(rng.standard_normal(64).astype(np.float32) + (2 if n == "var" else 0), n)
             for n in ("scale", "bias", "mean", "var")]
    nodes = [helper.make_node("BatchNormalization", [f"h{i}", "scale", "bias", "mean", "var"], [f"h{i + 1}"]) for i in range(4)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 64, 56, 56])],
                          [helper.make_tensor_value_info("h4", TensorProto.FLOAT, None)], inits)
    so = onnxrt.SessionOptions()
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL  # four nodes, four jobs
    sess = onnxrt.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]).SerializeToString(), so)
    calls = []
    monkeypatch.setattr(parallel._HOOKS, "heat", lambda d: calls.append(d) or True)
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    (y,) = sess.run(None, {"h0": x})
    assert spy == [] and calls == [] and sess._engine.team_jobs == 4
    assert y.dtype == np.float32 and y.shape == x.shape
    sess.run(None, {"h0": x})
    assert calls == [1, -1]


def test_team_winograd_equals_the_serial_stages(spy):
    """A Winograd convolution's three stages on the team (input channels, the 16 products,
    output channels) give the caller-alone result bit for bit, epilogue included."""
    from ..ops.conv_table import run, run_path

    rng = np.random.default_rng(41)
    x = rng.standard_normal((2, 64, 28, 28)).astype(np.float32)
    w = rng.standard_normal((96, 64, 3, 3)).astype(np.float32)
    w.flags.writeable = False
    b = rng.standard_normal(96).astype(np.float32)
    z = rng.standard_normal((2, 96, 28, 28)).astype(np.float32)
    got, path = run(x, w, b, z, pads=[1, 1, 1, 1], activation="Relu")  # W a model constant
    assert path == "winograd"
    names = [name for name, _ in spy]
    assert names == ["wino_input_part", "wino_gemm_part", "wino_output_part"] * 2
    ref = _serial(lambda: run_path("winograd", x, w, b, z, pads=[1, 1, 1, 1], activation="Relu"))
    assert len(spy) == 6
    assert got.dtype == np.float32 and got.shape == (2, 96, 28, 28)
    np.testing.assert_array_equal(got, ref)
    assert (got > 0).any() and (got == 0).any()


_PREPARED_CASES = {
    # name: (x shape, w shape, group, strides, pads, the team jobs of one call)
    "1x1": ((1, 128, 28, 28), (64, 128, 1, 1), 1, 1, 0, ["gemm_part"]),
    "grouped 1x1": ((1, 128, 28, 28), (128, 32, 1, 1), 4, 1, 0, ["pointwise_groups_part"]),
    "depthwise": ((1, 96, 28, 28), (96, 1, 3, 3), 96, 1, 1, ["depthwise_part"]),
    "depthwise stride 2": ((1, 96, 28, 28), (96, 1, 3, 3), 96, 2, 1, ["depthwise_part"]),
    "im2col": ((1, 16, 30, 30), (64, 16, 3, 3), 1, 1, 1, ["im2col_part", "gemm_part"]),
    # a model constant's weights (the node's weights_cache): their Winograd transform is kept
    "winograd": ((1, 64, 28, 28), (48, 64, 3, 3), 1, 1, 1, ["wino_input_part", "wino_gemm_part", "wino_output_part"]),
}


#: the unprepared entry of Conv's table each prepared one settles once
_UNPREPARED = {"1x1": "1x1", "grouped 1x1": "pointwise groups on the team", "depthwise": "depthwise compiled",
               "depthwise stride 2": "depthwise compiled", "im2col": "im2col compiled", "winograd": "winograd"}


@pytest.mark.parametrize("case", sorted(_PREPARED_CASES))
def test_prepared_convolutions_equal_the_general_path(spy, case):
    """A node's prepared executors (Conv's ``prepared ...`` entries, one per input signature,
    W and B model constants) run the team jobs of the unprepared entry with the same
    arguments: the same bits for every epilogue (a Relu without a bias too, which the
    parts apply alone) and for a Concat block (``out``)."""
    from onnxrt.ops_cpu.op_conv import conv

    from ..ops.conv_table import conv_op, dispatcher, run, run_path

    xs, ws, group, stride, pad, jobs = _PREPARED_CASES[case]
    kind = case.replace(" stride 2", "")
    rng = np.random.default_rng(80)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    w.flags.writeable = False
    b = rng.standard_normal(ws[0]).astype(np.float32)
    kw = {"group": group, "strides": [stride] * 2, "pads": [pad] * 4}
    y_shape = conv(x, w, b, **kw).shape
    z = rng.standard_normal(y_shape).astype(np.float32)
    for args, act in [((b,), "Relu"), ((b,), None), ((b, z), "Relu"), ((None, z), None), ((None,), "Relu")]:
        want = run_path(_UNPREPARED[case], x, w, *args, activation=act, **kw)
        spy.clear()
        got, path = run(x, w, *args, activation=act, **kw)
        assert path == f"prepared {kind}"
        assert [name for name, _ in spy] == jobs
        assert got.dtype == np.float32 and got.shape == y_shape
        np.testing.assert_array_equal(got, want)
        block = np.zeros((1, y_shape[1] + 5) + y_shape[2:], np.float32)
        into, path = run(x, w, *args, activation=act, out=block[:, 5:], **kw)
        assert path == f"prepared {kind}"
        assert into.base is block or into.base is block.base
        np.testing.assert_array_equal(block[:, 5:], want)
        assert not block[:, :5].any()
    # one executor per input signature: another shape prepares its own
    d = dispatcher(conv_op(**kw))
    bigger = rng.standard_normal(xs[:2] + (xs[2] + 2, xs[3] + 2)).astype(np.float32)
    np.testing.assert_array_equal(d(bigger, w, b)[0], run_path(_UNPREPARED[case], bigger, w, b, **kw))
    np.testing.assert_array_equal(d(x, w, b)[0], run_path(_UNPREPARED[case], x, w, b, **kw))
    assert [name for _, name in d.choices()] == [f"prepared {kind}"] * 2


def test_prepared_convolutions_read_the_weights_at_each_call_and_fall_back(spy, monkeypatch):
    """An executor keeps no copy of what it was prepared with (weights changed in place are
    used), serves only the arrays it was prepared with (another array runs the unprepared
    entry), and falls back when the team declines: wholly (nothing ran) or after the im2col
    columns (the product then runs on the caller with the epilogue), with the same values."""
    from ..ops.conv_table import conv_op, dispatcher, run_path

    rng = np.random.default_rng(81)
    x = rng.standard_normal((1, 16, 30, 30)).astype(np.float32)
    w = rng.standard_normal((64, 16, 3, 3)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    z = rng.standard_normal((1, 64, 30, 30)).astype(np.float32)
    kw = dict(pads=[1] * 4, activation="Relu")
    d = dispatcher(conv_op(z=True, **kw))
    first = d(x, w, b, z)[0]
    assert [name for _, name in d.choices()] == ["prepared im2col"]
    w *= 2
    second = d(x, w, b, z)[0]
    np.testing.assert_array_equal(second, run_path("im2col compiled", x, w, b, z, **kw))
    assert not np.array_equal(first, second)
    spy.clear()
    other = w.copy()
    np.testing.assert_array_equal(d(x, other, b, z)[0], second)
    assert [name for name, _ in spy] == ["im2col_part", "gemm_part"]  # (the unprepared entry's team jobs)
    real = team.run_kept  # the spy's: prepared jobs go through run_kept
    monkeypatch.setattr(team, "run_kept", lambda *a: False if a[5].__wrapped__.__name__ == "gemm_part" else real(*a))
    late = d(x, w, b, z)[0]
    monkeypatch.setattr(team, "run_kept", lambda *a: False)
    none = d(x, w, b, z)[0]
    for got in (late, none):
        assert got.dtype == np.float32 and got.shape == (1, 64, 30, 30) and (got >= 0).all()
        np.testing.assert_allclose(got, second, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((1, 7, 7, 96), (96, 40)),        # a linear layer on (N, H, W, C)
    ((3, 5, 64), (1, 64, 33)),        # B with a batch axis of 1
    ((2, 3, 4, 16), (1, 1, 16, 8)),
    ((4, 16), (1, 1, 16, 8)),         # A without batch axes, B's ones broadcast
    ((3, 0, 16), (16, 8)),            # no rows
    ((3, 5, 0), (0, 8)),              # K = 0: zeros
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_stack_times_one_matrix_is_one_product(a_shape, b_shape, dtype):
    """parallel.matmul folds A's batch axes into rows when B has none: np.matmul's values,
    shape and dtype, on a transposed view of A and into ``out`` as well."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    k = a_shape[-1]
    # float32: each element is one dot of length K, summed in another order than the oracle's
    tol = (8 * k * np.finfo(dtype).eps) if k else 0
    got = parallel.matmul(a, b)
    assert got.shape == expected.shape and got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * np.sqrt(max(k, 1)))
    if a.ndim >= 3:
        # the same values from a view whose rows are not evenly strided
        at = np.ascontiguousarray(np.swapaxes(a, 0, -2)).swapaxes(0, -2)
        assert at.size == 0 or not at.flags.c_contiguous or at.shape[0] == 1 or at.shape[-2] == 1
        np.testing.assert_array_equal(parallel.matmul(at, b), got)
    out = np.full(expected.shape, np.nan, dtype)
    assert parallel.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, got)


@pytest.mark.parametrize("m,n", [(64, 512), (512, 64)])
def test_team_gemm_takes_a_transposed_b_and_a_column_bias(spy, m, n):
    """team_gemm with B the transpose of a C-contiguous matrix (a Gemm's transB) passes it to
    each part's sgemm as transposed: the same values as with B copied, split by rows (m > n)
    or by columns, with the bias/Relu epilogue; a column bias (a linear layer's) is added to
    each part's block, one rounding after the product."""
    fm.sigmoid(_large(6))  # the team exists
    rng = np.random.default_rng(11)
    k = 256
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    cbias = rng.standard_normal(n).astype(np.float32)
    expected = a.astype(np.float64) @ w.T.astype(np.float64)
    tol = 4 * k * np.finfo(np.float32).eps * np.abs(expected).max()
    with parallel.RunScope(None, eager=True, owner=_Session(parallel.HOT_RUN_JOBS)):
        got = _jit.team_gemm(a, w.T, None)
        copied = _jit.team_gemm(a, np.ascontiguousarray(w.T), None)
        relu = _jit.team_gemm(a, w.T, None, epilogue=[bias, True, np.empty(0, np.float32)])
        linear = _jit.team_gemm(a, w.T, None, col_bias=cbias)
        refused = _jit.team_gemm(a, w.T, None, col_bias=cbias[:-1])  # not one per column: not the team's
    if got is None:
        pytest.skip("the team did not take the product (one thread or no team here)")
    assert [name for name, _ in spy][-4:] == ["gemm_part"] * 4 and refused is None
    for c in (got, copied, linear):
        assert c.dtype == np.float32 and c.shape == (m, n)
    np.testing.assert_allclose(got, expected, rtol=0, atol=tol)
    np.testing.assert_allclose(copied, expected, rtol=0, atol=tol)
    np.testing.assert_allclose(relu, np.maximum(expected + bias[:, None], 0), rtol=0, atol=tol)
    np.testing.assert_array_equal(linear, got + cbias)  # the product's bits, then one rounding of the addition


_MID_SIZE_CONVS = r"""
import numpy as np, onnxrt
from onnx import TensorProto as T, helper as h, numpy_helper as nh
from onnxrt import native, parallel
from onnxrt.native import team
parallel.KERNEL_THREADS = 2
rng = np.random.default_rng(0)
inits, nodes, prev = [], [], "x"
for i in range(6):  # 1x1 convolutions of 4.3M multiply-adds: below the team's cold_total
    cin, cout = (40, 120) if i % 2 == 0 else (120, 40)
    inits += [nh.from_array((rng.standard_normal((cout, cin, 1, 1)) * 0.1).astype(np.float32), f"w{i}"),
              nh.from_array(rng.standard_normal(cout).astype(np.float32), f"b{i}")]
    nodes += [h.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"]), h.make_node("Relu", [f"c{i}"], [f"r{i}"])]
    prev = f"r{i}"
g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 40, 30, 30])],
                 [h.make_tensor_value_info(prev, T.FLOAT, None)], inits)
model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
x = rng.standard_normal((1, 40, 30, 30)).astype(np.float32)
sess = onnxrt.OnnxInference(model)
jobs = []
kept = team.run_kept
def run_kept(*args):
    ran = kept(*args)
    jobs.append(ran)
    return ran
team.run_kept = run_kept
for _ in range(6):
    y = sess.run({"x": x})[prev]
assert team._STARTED, "the team never started"
jobs.clear()
y = sess.run({"x": x})[prev]
assert sum(jobs) == 6, jobs  # every convolution of the hot run on the team
print("ok", y.shape, y.dtype)
"""


def test_a_model_of_mid_size_jobs_starts_the_team_for_its_hot_runs():
    """Jobs below their cold_total go to the team only when its workers are awake; a session
    whose runs offer several starts the workers when its next run begins (heat), instead of
    running every job on one thread because no job ever started them."""
    if not team.available() or _jit.kernels() is None:
        pytest.skip("no team here")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _MID_SIZE_CONVS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().startswith("ok (1, 40, 30, 30) float32")


@pytest.fixture
def small_kernels(monkeypatch):
    """As where numpy's OpenBLAS has small-matrix kernels (a SkylakeX core)."""
    monkeypatch.setattr(_jit.blas, "_ARCH", ["SkylakeX"])


def test_small_matrix_kernels_follow_openblas_core(monkeypatch):
    for arch, small in [("SkylakeX", True), ("Cooperlake", True), ("SapphireRapids", True), ("Haswell", False),
                        ("Zen", False), (None, False)]:
        monkeypatch.setattr(_jit.blas, "_ARCH", [arch])
        assert _jit.blas.small_matrix_kernels() is small


def test_without_small_matrix_kernels_products_split_one_part_per_thread(monkeypatch):
    """Where OpenBLAS's kernels all pack (Haswell, Zen), a team product is one part per
    thread along its longer side, whatever its depth."""
    monkeypatch.setattr(_jit.blas, "_ARCH", ["Haswell"])
    assert _jit.gemm_parts(120, 40, 784, False, 2) == 2
    assert _jit.gemm_parts(64, 16, 12544, False, 2) == 2
    assert _jit.gemm_split(64, 16, 12544, 2) == (False, 2)
    assert _jit.gemm_split(120, 40, 900, 2) == (False, 2)
    assert _jit.gemm_split(900, 40, 120, 2) == (True, 2)
    assert _jit.gemm_split(120, 40, 900, 1) == (False, 1)


def test_gemm_parts_keep_small_products_within_the_small_matrix_kernels(small_kernels):
    """Products of little depth or work split into parts of at most SMALL_GEMM_WORK
    multiply-adds, a multiple of the threads; others one part per thread."""
    gp, small = _jit.gemm_parts, _jit.SMALL_GEMM_WORK
    assert gp(120, 40, 784, False, 2) == 4  # 49 blocks of 16 columns, 13 per part at most
    assert gp(64, 16, 12544, False, 2) == 14
    assert gp(480, 80, 196, True, 2) == 10  # 30 blocks of 16 rows, 3 per part at most
    assert gp(160, 960, 49, True, 2) == 2  # depth 960: the packed kernels
    assert gp(120, 40, 784, False, 1) == 1  # one thread
    assert gp(2048, 32, 4096, False, 2) == 2  # a block of 16 columns alone is over SMALL_GEMM_WORK
    assert gp(64, 16, 50000, False, 2) == 2  # more than SMALL_GEMM_PARTS parts
    for m, k, n, by_rows in [(120, 40, 784, False), (64, 16, 12544, False), (184, 80, 196, False), (960, 40, 49, True)]:
        parts = gp(m, k, n, by_rows, 2)
        blocks = ((m if by_rows else n) + 15) // 16
        assert parts % 2 == 0 and parts <= blocks
        if parts > 2:  # every part within the small kernels' size
            assert -(-blocks // parts) * 16 * k * (n if by_rows else m) <= small


def test_gemm_split_prefers_whole_rows(small_kernels):
    """The small-matrix split by rows when it exists (the parts' epilogues on contiguous rows),
    else by columns, else the longer side in one part per thread."""
    gs = _jit.gemm_split
    assert gs(120, 40, 900, 2) == (True, 8)  # 16 rows x 40 x 900 = 576K per block
    assert gs(40, 120, 900, 2) == (False, 6)  # a block of 16 rows is 1.7M: columns
    assert gs(64, 16, 12544, 2) == (False, 14)
    assert gs(128, 768, 3072, 2) == (False, 2)  # deep: the packed kernels, the longer side
    assert gs(3072, 768, 128, 2) == (True, 2)
    assert gs(120, 40, 900, 1) == (False, 1)  # one thread: the longer side, one part


@pytest.mark.parametrize("small", [True, False], ids=["small_kernels", "packed_kernels"])
@pytest.mark.parametrize("m, k, n", [(120, 40, 784), (40, 120, 784), (64, 16, 3136), (120, 40, 900)])
def test_team_gemm_in_small_parts_gives_the_product(spy, monkeypatch, m, k, n, small):
    monkeypatch.setattr(_jit.blas, "_ARCH", ["SkylakeX" if small else "Haswell"])
    rng = np.random.default_rng(12)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    with parallel.RunScope(None, eager=True):
        c = _jit.team_gemm(a, b, None, part_size=1 << 16)
    assert c is not None and c.dtype == np.float32 and c.shape == (m, n)
    assert spy and spy[-1] == ("gemm_part", _jit.gemm_split(m, k, n, 2)[1])
    want = a.astype(np.float64) @ b.astype(np.float64)
    # sums of k float32 products in BLAS's order: k eps sum|a b| apart at most
    bound = k * float(np.finfo(np.float32).eps) * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert (np.abs(c - want) <= bound).all()
