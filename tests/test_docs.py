"""Documentation that must stay true: the operator table and the custom-operator guide's code."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def test_operators_md_is_current():
    from onnxrt.tools.ops_table import markdown

    current = (ROOT / "docs" / "operators.md").read_text(encoding="utf-8")
    assert current == markdown() + "\n", "docs/operators.md is stale: run python scripts/gen_operators_doc.py"


def test_custom_operator_guide_runs(capsys):
    text = (ROOT / "docs" / "custom_operators.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 2
    ns: dict = {}
    exec(compile(blocks[0], "custom_operators.md#1", "exec"), ns)  # noqa: S102
    assert "[-1.   0.   1.5]" in capsys.readouterr().out
    exec(compile(blocks[1], "custom_operators.md#2", "exec"), ns)  # noqa: S102
    from onnx import TensorProto, helper

    import onnxrt

    node = helper.make_node("MinMax", ["X"], ["lo", "hi"], domain="example.ops")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("lo", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("hi", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("example.ops", 1)])
    lo, hi = onnxrt.InferenceSession(model).run(None, {"X": np.array([[3, 1, 2], [0, 5, -1]], np.float32)})
    np.testing.assert_array_equal(lo, [1, -1])
    np.testing.assert_array_equal(hi, [3, 5])
    assert lo.dtype == np.float32
