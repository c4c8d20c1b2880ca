"""The Sphinx site in docs/ builds with warnings as errors, with a page per operator module."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_sphinx_build_has_no_warning(tmp_path):
    pytest.importorskip("sphinx")
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-10000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-10000:]

    from onnxrt.ops_cpu import _modules
    from onnxrt.registry import registered

    builtin = {"", "ai.onnx.ml", "onnxrt", "ai.onnx.preview", "ai.onnx.preview.training"}
    pages = {p.stem for p in (out / "_generated" / "ops").glob("op_*.html")}
    own = {_modules.module_names(op)[0] for dom, op in registered() if dom in builtin}
    assert pages == own

    relu = (out / "_generated" / "ops" / "op_relu.html").read_text(encoding="utf-8")
    for heading in ("Short summary", "Classes", "Functions", "Properties", "Methods", "Documentation"):
        assert f">{heading}<" in relu, heading
    assert "ONNX specification, version 14 (the newest)" in relu
    assert "rectified linear function" in relu  # onnx.defs' doc of Relu
    assert "args_default_modified" in relu
    assert 'id="onnxrt.ops_cpu.op_relu.Relu"' in relu  # autodoc indexed the class at its path
    # a real file keeps its page: ScatterElements' versions, onnx's docs where they changed
    scatter = (out / "_generated" / "ops" / "op_scatter_elements.html").read_text(encoding="utf-8")
    assert re.search(r"<td><p>18</p></td>\s*<td><p>yes</p></td>", scatter)
    assert "ONNX specification, version 16" in scatter and "ONNX specification, version 13" in scatter
    assert "ONNX specification, version 11" not in scatter  # the same text as 13's
    # the ML operators live under ops_cpu's paths too, as in mlprodict
    tree = (out / "_generated" / "ops" / "op_tree_ensemble_classifier.html").read_text(encoding="utf-8")
    assert "TreeEnsembleClassifier (ai.onnx.ml)" in tree

    # the user guide comes from README.md and docs/*.md, the API pages from the docstrings
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "API tour" in index
    for page in ("architecture", "custom_operators", "distributed", "operators", "api/session", "api/inference"):
        assert (out / f"{page}.html").is_file(), page
    session = (out / "api" / "session.html").read_text(encoding="utf-8")
    assert 'id="onnxrt.InferenceSession"' in session and 'id="onnxrt.SessionOptions"' in session
