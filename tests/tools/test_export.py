"""OnnxInference.to_python(): the exported module reproduces the engine on the conformance models."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx.backend.test.loader import load_model_tests

import onnxrt
from onnxrt import native
from onnxrt.errors import OnnxRuntimeError


def _exec(src: str, filename: str = "exported.py") -> dict:
    ns: dict = {"__file__": filename}
    exec(compile(src, filename, "exec"), ns)  # noqa: S102  (the module we generated)
    return ns


def _same(a, b) -> bool:
    """Bit-for-bit the same values (NaN equal to NaN), same shape and dtype."""
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "OUSbiu":
        return bool(np.array_equal(a, b))
    # floats, complex and the ml_dtypes types (bfloat16, float8...): compare as wide values
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    return bool(np.array_equal(a.astype(wide), b.astype(wide), equal_nan=True))


def test_export_conformance_node_models():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    checked, mismatches = 0, []
    # the exported module calls each kernel's _run, the reference: compare with a session
    # on the reference kernels, both without compiled code (fast paths give the same
    # function within their stated accuracy, not always the same bits)
    so = onnxrt.SessionOptions()
    so.fast_paths = False
    for case in cases:
        model = case.model
        try:
            oinf = onnxrt.OnnxInference(model, options=so)
            inputs, _ = case.data_sets[0]
            feed_names = [n for n in oinf.input_names if n not in oinf.plan.initializers]
            feeds = {n: (onnx.numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v) for n, v in zip(feed_names, inputs)}
            want = oinf.run(feeds)
        except OnnxRuntimeError:
            continue  # an operator onnxrt does not run yet (see expected_failures.txt)
        if any(n in oinf.plan.initializers for n in oinf.input_names):
            continue
        ns = _exec(oinf.to_python(), f"{case.name}.py")
        with native.no_jit_run():  # as the reference session runs: no compiled code
            got = ns["run"](feeds)
        checked += 1
        if set(got) != set(want) or not all(_same(got[k], want[k]) for k in want):
            if not case.name.startswith(("test_bernoulli", "test_dropout", "test_random")):
                mismatches.append(case.name)
    assert checked >= 100, f"only {checked} models exported"
    assert not mismatches, mismatches


def test_export_with_npz_beside_module(tmp_path):
    from onnxrt.cli import demo_model_path

    oinf = onnxrt.OnnxInference(demo_model_path())
    src = oinf.to_python(npz_path=str(tmp_path / "weights.npz"))
    path = tmp_path / "demo_model.py"
    path.write_text(src)
    ns = _exec(src, str(path))
    feeds = {"ids": np.array([[1, 2, 3, 0, 4, 5]], dtype=np.int64)}
    got, want = ns["run"](feeds), oinf.run(feeds)
    for k in want:
        # the module runs node by node; the session fuses the demo's element-wise chain into
        # one compiled loop whose tanh/exp are within a few float32 ulp
        np.testing.assert_allclose(got[k], want[k], rtol=16 * np.finfo(np.float32).eps, atol=1e-7)
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
    assert "bind_node" in src and "# Gather 'lookup'" in src


def test_export_refuses_large_initializers_without_npz():
    from onnx import TensorProto, helper, numpy_helper

    big = numpy_helper.from_array(np.zeros(300_000, np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [300_000])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [300_000])], [big],
    )
    oinf = onnxrt.OnnxInference(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    with pytest.raises(ValueError, match="npz_path"):
        oinf.to_python()
