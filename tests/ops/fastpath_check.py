"""Shared check of the fast-path tests (tests/ops/test_fastpaths_*.py): a model run by a
session with fast paths on must pick the expected path and agree with a session on the
reference kernels (SessionOptions.fast_paths = False) within the test's tolerance."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import onnxrt
from onnxrt import native


def picked(sess: onnxrt.OnnxInference, op_type: str) -> set[str]:
    """The paths the session picked for nodes of ``op_type`` (compiled kernels active)."""
    return {r["path"] for r in sess.fast_paths() if r["op_type"] == op_type}


def check_path(model, feeds: dict[str, np.ndarray], op_type: str, path: str, rtol: float = 0.0,
               atol: float = 0.0, optimize: bool = True) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Run ``model`` twice with fast paths (the second run has the compiled kernels active
    whatever ONNXRT_JIT says but 0), assert that ``op_type``'s node picked ``path``, compare
    every output with the reference session's (same dtype and shape, values within
    ``rtol``/``atol``; exact by default). Returns (fast outputs, reference outputs)."""
    if native.kernels() is None and _is_native(op_type, path):
        pytest.skip("no compiled kernels")
    so = onnxrt.SessionOptions()
    if not optimize:
        so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = onnxrt.OnnxInference(model, options=so)
    sess.run(feeds)
    got = sess.run(feeds)
    assert path in picked(sess, op_type), (path, sess.fast_paths())
    ref_so = onnxrt.SessionOptions()
    ref_so.fast_paths = False
    if not optimize:
        ref_so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref_sess = onnxrt.OnnxInference(model, options=ref_so)
    expected = ref_sess.run(feeds)
    assert ref_sess.fast_paths() == []
    fast = [got[k] for k in expected]
    ref = [expected[k] for k in expected]
    for a, b in zip(fast, ref):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return fast, ref


def _is_native(op_type: str, name: str) -> bool:
    from onnxrt import dispatch

    return any(p.native for p in dispatch.paths_for(op_type) if p.name == name)


def f32_sum_tol(k: int, magnitude: float) -> float:
    """Absolute tolerance of a float32 sum of ``k`` terms of total magnitude ``magnitude``
    computed in two different orders: k * eps * sum|terms|."""
    return k * float(np.finfo(np.float32).eps) * magnitude


def feeds_of(**arrays: Any) -> dict[str, np.ndarray]:
    return dict(arrays)
