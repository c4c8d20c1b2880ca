"""The numba kernels are optional and lazy: import onnxrt never loads numba, ONNXRT_JIT=0 runs numpy's paths."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

from onnxrt import native as _jit

_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from onnx import TensorProto, helper
    import onnxrt

    after_import = "numba" in sys.modules
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Erf", ["x"], ["e"]),
             helper.make_node("Softmax", ["x"], ["m"], axis=-1),
             helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16)]
    vi = lambda n, t: helper.make_tensor_value_info(n, t, [256, 512])
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT)],
                              [vi("s", TensorProto.FLOAT), vi("e", TensorProto.FLOAT), vi("m", TensorProto.FLOAT),
                               vi("h", TensorProto.FLOAT16)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    x = (np.random.default_rng(0).standard_normal((256, 512)) * 4).astype(np.float32)
    sess = onnxrt.InferenceSession(model.SerializeToString())
    outs = sess.run(None, {"x": x})
    after_first = "numba" in sys.modules
    warmups = sess.engine.warmup_runs
    again = sess.run(None, {"x": x})
    # a second session of the process: compiled kernels are loaded, its first run takes them
    other = onnxrt.InferenceSession(model.SerializeToString())
    from onnxrt.fastpaths import _fastmath
    calls = []
    kept = _fastmath._jit.kernels
    _fastmath._jit.kernels = lambda *a: calls.append(_fastmath._jit.active()) or kept(*a)
    np.testing.assert_array_equal(other.run(None, {"x": x})[0], again[0])
    np.savez(sys.argv[1], *outs, *again)
    print(after_import, after_first, "numba" in sys.modules, warmups, other.engine.warmup_runs, bool(calls) and all(calls))
    """
)


def _run(tmp_path, jit: str | None) -> tuple[str, list[np.ndarray], list[np.ndarray]]:
    """(numba loaded after import, after the first run, after the second; first run's outputs, second's)."""
    out = tmp_path / f"outs_{jit}.npz"
    env = dict(os.environ)
    env.pop("ONNXRT_JIT", None)
    if jit is not None:
        env["ONNXRT_JIT"] = jit
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with np.load(out) as data:
        return proc.stdout.strip(), [data[f"arr_{i}"] for i in range(4)], [data[f"arr_{i}"] for i in range(4, 8)]


def test_numba_loads_at_the_first_kernel_not_at_import_and_onnxrt_jit_0_keeps_it_out(tmp_path):
    flags_on, on, _ = _run(tmp_path, "1")
    flags_off, off, _ = _run(tmp_path, "0")
    assert flags_on == "False True True 1 1 True"  # not imported by `import onnxrt`, imported by the first large Sigmoid
    assert flags_off == "False False False 1 1 False"  # ONNXRT_JIT=0: never imported
    for a, b in zip(on, off):
        assert a.dtype == b.dtype and a.shape == b.shape == (256, 512)
    s_on, e_on, m_on, h_on = on
    s_off, e_off, m_off, h_off = off
    # both paths compute the same functions within their stated accuracy (a few float32 ulp)
    np.testing.assert_allclose(s_on, s_off, rtol=4e-7, atol=1e-38)
    np.testing.assert_allclose(e_on, e_off, rtol=2.5e-7, atol=1e-38)
    np.testing.assert_allclose(m_on, m_off, rtol=3e-6, atol=1e-37)
    np.testing.assert_array_equal(h_on.view(np.uint16), h_off.view(np.uint16))  # the casts are bit-exact


def test_the_kernels_load_here_and_disabled_turns_them_off():
    assert _jit.kernels() is not None, _jit.LOAD_ERROR
    assert _jit.LOAD_ERROR is None
    with _jit.disabled():
        assert _jit.kernels() is None
    assert _jit.kernels() is not None


def test_compiled_kernels_run_concurrently_from_many_threads():
    """nogil loops called from 8 threads at once (and the first compilation racing): same results."""
    import threading

    from onnxrt.fastpaths import _fastmath as fm

    x = (np.random.default_rng(1).standard_normal(300_000) * 3).astype(np.float32)
    expected = fm.erf(x)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                results.append(fm.erf(x))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 40
    for r in results:
        assert r.dtype == np.float32
        np.testing.assert_array_equal(r, expected)


def test_without_numba_the_numpy_kernels_run_and_the_reason_is_kept():
    """A process where numba cannot be imported: the kernels report why and every path runs numpy's code."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["numba"] = None  # 'import numba' now raises ImportError
        import numpy as np
        from onnxrt import native as _jit; from onnxrt.fastpaths import _fastmath as fm
        from onnxrt.ops_cpu.op_softmax import softmax
        x = (np.random.default_rng(0).standard_normal(100_000) * 3).astype(np.float32)
        e = fm.erf(x)
        s = softmax(x.reshape(100, 1000))
        assert _jit.kernels() is None
        print(_jit.LOAD_ERROR)
        print(e.dtype, float(np.abs(e).max()), s.dtype, float(s.sum()))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    reason, values = proc.stdout.strip().splitlines()
    assert reason.startswith("numba is not available")
    dtype, top, sdtype, total = values.split()
    assert dtype == "float32" and sdtype == "float32"
    assert 0.99 < float(top) <= 1.0 and abs(float(total) - 100.0) < 1e-3


def test_by_default_a_sessions_first_run_takes_numpy_paths_and_the_second_compiled_ones(tmp_path):
    """ONNXRT_JIT unset (``auto``): the first run of a session never loads numba (a process
    that runs a model once does not pay 0.4-1.5 s and ~100 MB for it); the second does, and
    both runs agree within the kernels' stated accuracy."""
    flags, first, second = _run(tmp_path, None)
    # numba: not after import nor the first run, after the second; 2 warm-up runs, and 1 for a
    # second session of the process (its first run takes the loaded compiled kernels)
    assert flags == "False False True 2 1 True"
    _, eager, _ = _run(tmp_path, "1")
    for a, b, c in zip(first, second, eager):
        assert a.dtype == b.dtype == c.dtype and a.shape == b.shape == c.shape == (256, 512)
    np.testing.assert_allclose(first[0], second[0], rtol=4e-7, atol=1e-38)
    np.testing.assert_allclose(first[1], second[1], rtol=2.5e-7, atol=1e-38)
    np.testing.assert_allclose(first[2], second[2], rtol=3e-6, atol=1e-37)
    np.testing.assert_array_equal(first[3].view(np.uint16), second[3].view(np.uint16))
    for b, c in zip(second, eager):  # the second run is the compiled one: the eager mode's bits
        np.testing.assert_array_equal(b, c)


def test_no_jit_run_hides_the_kernels_in_this_thread_and_in_pool_workers():
    from onnxrt import parallel

    assert _jit.active() and _jit.kernels() is not None
    seen: list[bool] = []
    with _jit.no_jit_run():
        assert not _jit.active() and _jit.kernels() is None
        # a parallel loop's chunks run on the pool's workers with the caller's setting
        parallel.parallel_for(8, lambda lo, hi: seen.extend([_jit.kernels() is None] * (hi - lo)),
                              work_per_item=parallel.MIN_PARALLEL_WORK)
    assert seen == [True] * 8
    assert _jit.active() and _jit.kernels() is not None
