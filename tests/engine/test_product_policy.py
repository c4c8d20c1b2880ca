"""ProductPolicy: a session's runs choose between the team's split and BLAS's own threads for their large products by timing whole runs."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.context import ProductPolicy


def _drive(policy: ProductPolicy, seconds: dict[int, float], runs: int, work: int = 100) -> list[tuple[int, bool]]:
    seen = []
    for _ in range(runs):
        option, measured = policy.begin()
        seen.append((option, measured))
        policy.end(option, measured, seconds[option], work)
    return seen


def test_runs_alternate_in_pairs_and_the_faster_is_kept():
    policy = ProductPolicy()
    seen = _drive(policy, {ProductPolicy.TEAM: 0.2, ProductPolicy.BLAS: 0.1}, 16)
    # two warm-up runs on the team, then pairs (team, team, BLAS, BLAS, ...) measuring the second
    assert seen[:2] == [(0, False), (0, False)]
    assert seen[2:14] == [(0, False), (0, True), (1, False), (1, True)] * 3
    assert policy.pick == ProductPolicy.BLAS and seen[14:] == [(1, False), (1, False)]
    policy = ProductPolicy()
    _drive(policy, {ProductPolicy.TEAM: 0.1, ProductPolicy.BLAS: 0.2}, 16)
    assert policy.pick == ProductPolicy.TEAM


def test_blas_threads_must_win_by_the_margin():
    # the team is the default: BLAS's threads only when clearly faster than the team
    policy = ProductPolicy()
    _drive(policy, {ProductPolicy.TEAM: 0.100, ProductPolicy.BLAS: 0.095}, 16)
    assert policy.pick == ProductPolicy.TEAM
    policy = ProductPolicy()
    _drive(policy, {ProductPolicy.TEAM: 0.100, ProductPolicy.BLAS: 0.085}, 16)
    assert policy.pick == ProductPolicy.BLAS


def test_one_noisy_sample_does_not_decide():
    # runs slowed by other work raise their samples; the minimum of three of each decides
    # (two noisy team samples of three still leave the team's true time)
    policy = ProductPolicy()
    team = iter([0.30, 0.30, 0.10])
    for _ in range(16):
        option, measured = policy.begin()
        seconds = (next(team) if measured else 0.1) if option == ProductPolicy.TEAM else 0.12
        policy.end(option, measured, seconds, 100)
    assert policy.pick == ProductPolicy.TEAM


def test_only_runs_of_one_amount_of_work_are_compared():
    policy = ProductPolicy()
    for i in range(40):  # every run another size: never two comparable runs of each
        option, measured = policy.begin()
        policy.end(option, measured, 0.1, 1000 + i)
    assert policy.pick == ProductPolicy.TEAM  # gave up after 16 sizes, on the default
    policy = ProductPolicy()
    _drive(policy, {0: 0.1, 1: 0.2}, 16, work=0)  # no large product: nothing measured
    assert policy.pick == -1 and policy.times == {}


def test_concurrent_runs_are_not_measured():
    policy = ProductPolicy()
    for _ in range(3):
        policy.end(*policy.begin(), 0.1, 5)
    outer = policy.begin()
    inner = policy.begin()  # another thread's run of the same session
    assert inner == (ProductPolicy.TEAM, False)
    policy.end(*inner, 0.1, 5)
    policy.end(*outer, 0.1, 5)


def test_a_session_decides_and_keeps_its_values():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 1024)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 512])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    sess = onnxrt.OnnxInference(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    x = rng.standard_normal((256, 512)).astype(np.float32)
    expected = x.astype(np.float64) @ w.astype(np.float64)
    tol = 8 * 512 * np.finfo(np.float32).eps  # one dot of 512 products, blocked differently by each split
    for _ in range(14):
        y = sess.run({"x": x})["y"]
        assert y.dtype == np.float32 and y.shape == (256, 1024)
        np.testing.assert_allclose(y, expected, rtol=tol, atol=tol * np.abs(expected).max())
    from onnxrt import parallel

    if parallel.KERNEL_THREADS > 1:  # (one core: no threaded product, nothing to choose)
        assert sess._context.products.pick in (ProductPolicy.TEAM, ProductPolicy.BLAS)


def test_warmup_runs_cover_the_policy_runs_of_a_model_with_large_constants():
    rng = np.random.default_rng(0)
    big = numpy_helper.from_array(rng.standard_normal((256, 256)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [big])
    sess = onnxrt.OnnxInference(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert sess.warmup_runs == ProductPolicy.settling_runs() == 14
    small = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    assert onnxrt.OnnxInference(helper.make_model(small, opset_imports=[helper.make_opsetid("", 17)])).warmup_runs <= 2


def test_a_product_of_few_rows_runs_on_blas_threads_in_blas_runs():
    from onnxrt import parallel

    rng = np.random.default_rng(2)
    w = rng.standard_normal((768, 1024)).astype(np.float32)  # 3 MB of weights, 786K multiply-adds a row
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 768])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    sess = onnxrt.OnnxInference(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    x = rng.standard_normal((1, 768)).astype(np.float32)
    tol = 8 * 768 * np.finfo(np.float32).eps
    expected = x.astype(np.float64) @ w.astype(np.float64)
    assert 768 * 1024 < parallel.BLAS_THREADS_FROM
    # below BLAS_THREADS_FROM multiply-adds, yet memory-bound: BLAS's threads for its duration
    # in runs of the BLAS option, one thread in the team's (BLAS's spinning after it would
    # slow what follows)
    for pick, threads in ((ProductPolicy.BLAS, min(2, parallel.KERNEL_THREADS)), (ProductPolicy.TEAM, 1)):
        sess._context.products.pick = pick
        sess._context.reset_peak()
        for _ in range(3):
            y = sess.run({"x": x})["y"]
            assert y.dtype == np.float32 and y.shape == (1, 1024)
            np.testing.assert_allclose(y, expected, rtol=tol, atol=tol * np.abs(expected).max())
        assert sess._context.peak_threads == threads, pick


def test_few_rows_times_transposed_weights_never_wake_blas_threads_in_team_runs(monkeypatch):
    """In runs of the team's option, a few rows times transposed weights (a Gemm's transB, a
    classifier as exported) splits the weights' rows over the pool instead of running on
    BLAS's threads, which spin on the team's core after each product; in BLAS runs it runs
    on BLAS's threads. Same values either way."""
    from onnxrt import parallel

    rng = np.random.default_rng(3)
    k, n = 2048, 4608  # 9.4M multiply-adds a row, above BLAS_THREADS_FROM
    assert k * n >= parallel.BLAS_THREADS_FROM
    w = (rng.standard_normal((n, k)) / 32).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    sess = onnxrt.OnnxInference(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    boosts = []
    real = parallel._blas_boost
    monkeypatch.setattr(parallel, "_blas_boost", lambda a, b: boosts.append((a, b)) or real(a, b))
    for rows in (1, 3):
        x = rng.standard_normal((rows, k)).astype(np.float32)
        expected = x.astype(np.float64) @ w.T.astype(np.float64) + bias
        tol = 4 * k * np.finfo(np.float32).eps * np.abs(x).max() * np.abs(w).max()
        for pick in (ProductPolicy.TEAM, ProductPolicy.BLAS):
            sess._context.products.pick = pick
            boosts.clear()
            for _ in range(3):
                y = sess.run({"x": x})["y"]
                assert y.dtype == np.float32 and y.shape == (rows, n)
                np.testing.assert_allclose(y, expected, rtol=0, atol=tol)
            if parallel.KERNEL_THREADS > 1:
                assert (boosts == []) == (pick == ProductPolicy.TEAM), (rows, pick, boosts)
