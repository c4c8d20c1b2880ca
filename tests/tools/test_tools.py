"""Profiling traces, verbose tracing, comparison with onnxruntime and the CLI commands around them."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt import registry
from onnxrt.cli import demo_model_path, main
from onnxrt.tools.compare import compare, first_divergence


def _feeds():
    return {"ids": np.array([[1, 2, 3, 0, 4, 5]], dtype=np.int64)}


def test_profiling_writes_chrome_trace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    opts = onnxrt.SessionOptions()
    opts.enable_profiling = True
    sess = onnxrt.InferenceSession(demo_model_path(), opts)
    for _ in range(3):
        sess.run(None, _feeds())
    path = sess.end_profiling()
    events = json.loads(open(path).read())
    nodes = [e for e in events if e["cat"] == "Node"]
    n_steps = len(sess.engine.plan.steps)
    assert n_steps >= 6
    assert len(nodes) == 3 * n_steps and len([e for e in events if e["name"] == "model_run"]) == 3
    for e in nodes:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0 and isinstance(e["tid"], int)
        assert e["args"]["op_name"] in {"Gather", "Mul", "Add", "Relu", "Sigmoid", "Shape", "Constant", "ScatterElements",
                                        "FusedElementwise"}
    lookup = next(e for e in nodes if e["args"]["node_name"] == "lookup")
    assert lookup["args"]["input_type_shape"] == [{"float": [32, 8]}, {"int64": [1, 6]}]
    assert lookup["args"]["output_type_shape"] == [{"float": [1, 6, 8]}]
    assert onnxrt.InferenceSession(demo_model_path()).end_profiling() == ""


def test_verbose_levels():
    lines: list[str] = []
    oinf = onnxrt.OnnxInference(demo_model_path())
    res = oinf.run(_feeds(), verbose=1, fLOG=lines.append)
    assert len(lines) == len(oinf.plan.steps) and lines[0].startswith("Gather('lookup') [float32[32,8], int64[1,6]] -> [float32[1,6,8]]")
    lines.clear()
    res2 = oinf.run(_feeds(), verbose=2, fLOG=lines.append)
    stats = [ln for ln in lines if ln.startswith("    ")]
    assert any(ln.startswith("    features: min=0 ") and "nan=0" in ln for ln in stats)
    for k in res:
        np.testing.assert_array_equal(res[k], res2[k])


def _model_with_mismatch():
    """y = Relu(x) + c: a model where one node is deliberately wrong in a patched kernel
    (float64: the optimiser fuses float32 element-wise chains into one compiled loop, which
    does not call Relu's kernel)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Add", ["r", "c"], ["y"], name="add")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4])],
        [numpy_helper.from_array(np.ones(4, np.float64), "c")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def test_compare_finds_first_diverging_node(monkeypatch):
    relu = registry.lookup("Relu", "", 14)[0]
    model = _model_with_mismatch()
    feeds = {"x": np.array([-1.0, 2.0, -3.0, 4.0], np.float64)}
    assert all(d.ok for d in compare(model, feeds))
    assert first_divergence(model, feeds) is None
    # break Relu on purpose: the search must name it, not the Add after it
    monkeypatch.setattr(relu, "_run", lambda self, x, **kw: (np.abs(x),))
    diffs = compare(model, feeds)
    assert not diffs[0].ok and diffs[0].max_abs == 3.0
    div = first_divergence(model, feeds)
    assert div is not None and div.node_name == "relu" and div.op_type == "Relu" and div.output == "r"
    np.testing.assert_array_equal(div.ours, [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(div.theirs, [0.0, 2.0, 0.0, 4.0])


def test_cli_compare_exit_codes(tmp_path, capsys, monkeypatch):
    relu = registry.lookup("Relu", "", 14)[0]
    path = tmp_path / "m.onnx"
    onnx.save(_model_with_mismatch(), path)
    assert main(["compare", str(path)]) == 0
    assert "ok" in capsys.readouterr().out
    monkeypatch.setattr(relu, "_run", lambda self, x, **kw: (np.abs(x),))
    assert main(["compare", str(path)]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "first diverging node: 'relu' (Relu), output 'r'" in out


def test_cli_bench_profile_ops(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--runs", "5"]) == 0
    out = capsys.readouterr().out
    assert "onnxrt" in out and "median" in out and "p90" in out and "onnxruntime" in out
    chart = tmp_path / "chart.svg"
    assert main(["profile", "--runs", "3", "--chart", str(chart)]) == 0
    out = capsys.readouterr().out
    assert "ScatterElements" in out and "ten slowest nodes" in out
    assert chart.read_text().startswith("<svg")
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert "ScatterElements" in out and "11,13,16,18" in out


def test_cli_help_for_every_command(capsys):
    import pytest

    for cmd in ("run", "bench", "profile", "compare", "ops"):
        with pytest.raises(SystemExit) as exc:
            main([cmd, "--help"])
        assert exc.value.code == 0
        assert "usage: onnxrt " + cmd in capsys.readouterr().out


def test_cli_unknown_input_name(capsys):
    assert main(["run", "--input", "nope=x.npy"]) == 2
    assert "does not exist" in capsys.readouterr().err
