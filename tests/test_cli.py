"""The command line: run on the demo model, on a given model with inputs, and clear errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto

from onnxrt.cli import main

from .helpers import make_single_node_model


def test_run_demo_model(capsys):
    assert main(["run"]) == 0
    out = capsys.readouterr().out
    assert "features: shape=[1, 6, 8] dtype=float32" in out
    assert "histogram: shape=[1, 32] dtype=float32" in out
    assert "first run:" in out and "session creation:" in out


def test_run_with_inputs_and_output(tmp_path, capsys):
    model = make_single_node_model("Relu", [("x", TensorProto.FLOAT, [3])], [("y", TensorProto.FLOAT, [3])])
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    np.save(tmp_path / "x.npy", np.array([-1.0, 0.5, 2.0], np.float32))
    out_path = tmp_path / "out.npz"
    assert main(["run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(out_path)]) == 0
    saved = np.load(out_path)
    np.testing.assert_array_equal(saved["y"], [0.0, 0.5, 2.0])
    assert saved["y"].dtype == np.float32


def test_missing_model_one_line_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "onnxrt", "run", str(tmp_path / "nope.onnx")], capture_output=True, text=True)
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr


def test_unreadable_model(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model at all")
    assert main(["run", str(bad)]) != 0
    err = capsys.readouterr().err
    assert err.startswith("onnxrt: error: Model") and "not a valid ONNX" in err


def test_bad_input_argument(tmp_path, capsys):
    assert main(["run", "--input", "novalue"]) == 2
    assert "NAME=FILE.npy" in capsys.readouterr().err


# ----------------------------------------------------------------- start-up and honest timings


def test_version(capsys):
    import pytest

    import onnxrt

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"onnxrt {onnxrt.__version__}"


def test_ops_prints_a_header_and_refuses_an_unknown_domain(capsys):
    assert main(["ops", "--domain", "ai.onnx.ml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["domain", "operator", "onnxrt", "versions", "onnx", "versions"]
    assert len(lines) > 10 and all(line.startswith("ai.onnx.ml ") for line in lines[1:])
    assert any(line.split()[1] == "TreeEnsembleClassifier" for line in lines[1:])
    assert main(["ops", "--domain", "ai.onnx"]) == 0  # the default domain by its name
    assert any(line.split()[1] == "Conv" for line in capsys.readouterr().out.splitlines()[1:])
    assert main(["ops", "--domain", "no.such.domain"]) == 2
    err = capsys.readouterr().err
    assert "'no.such.domain' is not a domain" in err and "ai.onnx.ml" in err


def test_run_reports_session_creation_and_first_run_apart_from_steady_runs(capsys):
    assert main(["run", "--runs", "3"]) == 0
    out = capsys.readouterr().out
    lines = {line.split(":")[0]: line for line in out.splitlines() if ":" in line}
    assert "(loading, checking, planning)" in lines["session creation"]
    assert "(one-time warm-up included)" in lines["first run"]
    assert "over 3 runs" in lines["steady runs"]
    assert "run time" not in lines
    assert main(["run", "--runs", "-1"]) == 2


def test_profile_warms_up_first_and_refuses_zero_runs(tmp_path, capsys, monkeypatch):
    import json

    monkeypatch.chdir(tmp_path)
    assert main(["profile", "-n", "0"]) == 2
    assert "--runs must be at least 1" in capsys.readouterr().err
    assert main(["profile", "-n", "2", "--chart", str(tmp_path / "c.svg")]) == 0
    out = capsys.readouterr().out
    assert "(2 runs after 1 warm-up)" in out  # the tests run with ONNXRT_JIT=1: one warm-up run
    assert "warm-up runs (one-time loading and preparation, left out below):" in out
    (trace,) = tmp_path.glob("onnxrt_profile_*.json")
    events = json.loads(trace.read_text())
    runs = [e for e in events if e["name"] == "model_run"]
    assert [e["args"].get("warmup", False) for e in sorted(runs, key=lambda e: e["ts"])] == [True, False, False]
    nodes = [e for e in events if e["cat"] == "Node"]
    warm_nodes = [e for e in nodes if e["args"].get("warmup")]
    assert warm_nodes and len(nodes) == 3 * len(warm_nodes)  # every node of every run, the first one marked


def test_random_index_inputs_are_valid_for_the_nodes_that_read_them(tmp_path, capsys):
    """An int64 input indexing an axis of 4 (through a Cast) gets values in [0, 4); the
    chosen shapes go to stderr; compare with onnxruntime then agrees."""
    from onnx import helper, numpy_helper

    from onnxrt.tools.inputs import index_bounds, random_feeds

    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "table")
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["ids"], ["ids32"], to=TensorProto.INT32),
            helper.make_node("Gather", ["table", "ids32"], ["rows"], axis=0),
            helper.make_node("GatherElements", ["x", "cols"], ["picked"], axis=1),
        ],
        "g",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 50]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("cols", TensorProto.INT64, [2, 40]),
            helper.make_tensor_value_info("other", TensorProto.INT64, [30]),
        ],
        [
            helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["N", 50, 3]),
            helper.make_tensor_value_info("picked", TensorProto.FLOAT, [2, 40]),
        ],
        [table],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    assert index_bounds(model) == {"ids": 4, "cols": 3}
    feeds = random_feeds(model, seed=1)
    assert feeds["ids"].shape == (1, 50) and feeds["ids"].dtype == np.int64
    assert feeds["ids"].min() >= 0 and feeds["ids"].max() == 3  # 50 draws of [0, 4) reach 3
    assert feeds["cols"].min() >= 0 and feeds["cols"].max() == 2
    assert feeds["other"].min() >= 0 and feeds["other"].max() <= 9  # not an index: small non-negative
    path = tmp_path / "gather.onnx"
    onnx.save(model, path)
    assert main(["compare", str(path)]) == 0
    captured = capsys.readouterr()
    assert "random inputs (seed 0): 'ids' int64[1, 50], 'x' float32[2, 3], 'cols' int64[2, 40], 'other' int64[30]" in captured.err
    assert "random inputs" not in captured.out
