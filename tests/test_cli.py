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
    assert "run time:" in out


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
