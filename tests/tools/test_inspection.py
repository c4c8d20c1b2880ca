"""mlprodict's inspection toolkit on OnnxInference: text, JSON, DOT/SVG, shapes, sizes, precision, intermediate models."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.cli import demo_model_path, main
from onnxrt.errors import GraphError, InvalidFeedError, MissingDependencyError, OnnxRuntimeError
from onnxrt.tools import shapes as shapes_mod

ROOT = Path(__file__).resolve().parents[2]
F = TensorProto.FLOAT


def _demo_feeds():
    return {"ids": np.array([[1, 2, 3, 0, 4, 5]], dtype=np.int64)}


def _chain_model():
    """X[N, 4] -> Relu -> r -> Exp -> e; e + X -> Z; a Split whose second half nobody reads."""
    nodes = [
        helper.make_node("Relu", ["X"], ["r"], name="relu"),
        helper.make_node("Exp", ["r"], ["e"], name="exp"),
        helper.make_node("Add", ["e", "X"], ["Z"], name="add"),
        helper.make_node("Split", ["Z"], ["h0", "h1"], name="split", axis=1, num_outputs=2),
        helper.make_node("Neg", ["h0"], ["W"], name="neg"),
    ]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("X", F, ["N", 4])],
        [helper.make_tensor_value_info("Z", F, ["N", 4]), helper.make_tensor_value_info("W", F, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _if_model():
    """If (c) then X + bias_outer else X * 2; the branches read outer values."""
    then_g = helper.make_graph(
        [helper.make_node("Add", ["X", "bias"], ["t"], name="then_add")], "then_g", [],
        [helper.make_tensor_value_info("t", F, [2, 3])],
    )
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    else_g = helper.make_graph(
        [helper.make_node("Mul", ["X", "two"], ["u"], name="else_mul")], "else_g", [],
        [helper.make_tensor_value_info("u", F, [2, 3])], [two],
    )
    nodes = [helper.make_node("If", ["c"], ["Y"], name="choose", then_branch=then_g, else_branch=else_g)]
    graph = helper.make_graph(
        nodes, "ifg",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("X", F, [2, 3])],
        [helper.make_tensor_value_info("Y", F, [2, 3])],
        [numpy_helper.from_array(np.full((3,), 0.5, np.float32), "bias")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _loop_model():
    """Loop 3 times: acc = acc * x (x from the outer graph)."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
            helper.make_node("Mul", ["acc_in", "x"], ["acc_out"], name="times_x"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", F, [2]),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("acc_out", F, [2])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "acc0"], ["acc"], name="power", body=body)],
        "loopg",
        [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("acc0", F, [2])],
        [helper.make_tensor_value_info("acc", F, [2])],
        [numpy_helper.from_array(np.array(3, np.int64), "n")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


# --- text, JSON, str -----------------------------------------------------------------------------


def test_to_text_lists_the_demo_model():
    oinf = onnxrt.OnnxInference(demo_model_path())
    lines = oinf.to_text().splitlines()
    assert lines[0] == "graph 'onnxrt_demo' (ir_version 8; opsets ai.onnx 18)"
    assert lines[1:3] == ["inputs:", "  ids: tensor(int64) [1, 6]"]
    assert lines[3] == "initializers:"
    assert lines[4] == "  embedding: float32 [32, 8]"  # 256 values: not shown
    assert lines[5].startswith("  scale: float32 [8] = [-0.6676873, 0.16324401,")
    assert "  zero_i: int64 [] = [0]" in lines
    i = lines.index("nodes:")
    assert lines[i + 1] == "    0 Gather 'lookup'(embedding, ids) -> emb  axis=0"
    assert lines[i + 7] == "    6 Constant 'one'() -> one_vec  value_floats=[1.0]"
    assert lines[i + 10] == "    9 ScatterElements 'histogram'(empty_hist, ids, ones) -> histogram  axis=1, reduction='add'"
    assert lines[i + 11 :] == [
        "outputs:", "  features: tensor(float) [1, 6, 8]", "  gates: tensor(float) [1, 6, 8]",
        "  histogram: tensor(float) [1, 32]", "  ids_shape: tensor(int64) [2]",
    ]
    assert str(oinf) == oinf.to_text()


def test_to_text_orders_nodes_as_they_run_and_nests_subgraphs():
    model = _chain_model()
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(reversed(nodes))  # stored backwards: listed in run order all the same
    text = onnxrt.OnnxInference(model).to_text()
    ops = re.findall(r"^\s+\d+ (\w+) '", text, flags=re.M)
    assert ops == ["Relu", "Exp", "Add", "Split", "Neg"]
    assert "  X: tensor(float) [N, 4]" in text and "  W: tensor(float) ?" in text
    sub = onnxrt.OnnxInference(_if_model()).to_text().splitlines()
    k = sub.index("        then_branch: graph 'then_g'")
    assert sub[k + 1 : k + 5] == [
        "          inputs:", "          nodes:", "              0 Add 'then_add'(X, bias) -> t",
        "          outputs:",
    ]
    assert "        else_branch: graph 'else_g'" in sub
    assert "            two: float32 [] = [2.0]" in sub


def test_to_json_data_and_text():
    oinf = onnxrt.OnnxInference(_chain_model())
    data = oinf.to_json()
    assert data["name"] == "chain" and data["ir_version"] == oinf.model.ir_version and data["opsets"] == {"": 18}
    assert data["inputs"] == [{"name": "X", "type": "tensor(float)", "shape": ["N", 4]}]
    assert data["outputs"][1] == {"name": "W", "type": "tensor(float)", "shape": None}
    assert data["initializers"] == [] and data["functions"] == []
    assert data["nodes"][3] == {
        "i": 3, "name": "split", "op_type": "Split", "domain": "", "inputs": ["Z"], "outputs": ["h0", "h1"],
        "attributes": {"axis": 1, "num_outputs": 2},
    }
    assert json.loads(oinf.to_json(indent=2)) == data
    assert oinf.to_json(indent=2).startswith('{\n  "ir_version"')
    # tensors, graphs, NaN: all JSON-serialisable
    idata = onnxrt.OnnxInference(_if_model()).to_json()
    then = idata["nodes"][0]["attributes"]["then_branch"]["graph"]
    assert then["nodes"][0]["op_type"] == "Add" and then["outputs"][0]["shape"] == [2, 3]
    assert idata["initializers"] == [{"name": "bias", "dtype": "float32", "shape": [3], "bytes": 12, "values": [0.5, 0.5, 0.5]}]
    nan = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([np.nan, np.inf, 1.5], np.float32)))
    g = helper.make_graph([nan], "k", [], [helper.make_tensor_value_info("k", F, [3])])
    kdata = onnxrt.OnnxInference(g, target_opset=18).to_json()
    assert kdata["nodes"][0]["attributes"]["value"]["tensor"]["values"] == ["nan", "inf", 1.5]
    json.loads(json.dumps(kdata, allow_nan=False))


# --- DOT and SVG -----------------------------------------------------------------------------------


def test_to_dot_boxes_and_typed_edges():
    dot = onnxrt.OnnxInference(demo_model_path()).to_dot()
    assert dot.startswith('digraph "onnxrt_demo" {\n') and dot.endswith("}\n")
    assert '"input0" [shape=box, style=filled, fillcolor="#cfe2ff", label="ids\\nint64 [1, 6]"];' in dot
    assert '"init0" [shape=note, style=filled, fillcolor="#e9ecef", label="embedding\\nfloat32 [32, 8]"];' in dot
    assert '"node0" [shape=box, style="rounded,filled", fillcolor="#ffe5b4", label="Gather\\nlookup\\naxis=0"];' in dot
    assert '"node0" -> "node1" [label="emb\\nfloat32 [1, 6, 8]"];' in dot
    assert '"node9" -> "output2" [label="histogram\\nfloat32 [1, 32]"];' in dot
    assert '"output0" [shape=box, style=filled, fillcolor="#d1f2d1", label="features\\nfloat32 [1, 6, 8]"];' in dot
    assert len(re.findall(r"^  \"node\d+\" \[", dot, flags=re.M)) == 10
    assert dot.count(" -> ") == 16 + 4  # every node input, every graph output
    plain = onnxrt.OnnxInference(demo_model_path()).to_dot(show_shapes=False, rankdir="LR")
    assert '"node0" -> "node1" [label="emb"];' in plain and "rankdir=LR" in plain
    with pytest.raises(GraphError, match="rankdir"):
        onnxrt.OnnxInference(demo_model_path()).to_dot(rankdir="XY")


def test_to_dot_symbolic_dims_and_unknown_shapes():
    dot = onnxrt.OnnxInference(_chain_model()).to_dot()
    assert '"node0" -> "node1" [label="r\\nfloat32 [N, 4]"];' in dot
    assert '"node3" -> "node4" [label="h0\\nfloat32 [N, 2]"];' in dot


def test_to_dot_subgraphs_are_clusters():
    dot = onnxrt.OnnxInference(_if_model()).to_dot()
    assert dot.count("subgraph ") == 2
    assert 'subgraph "cluster_1" {' in dot and 'label="If \'choose\': then_branch";' in dot
    assert 'label="If \'choose\': else_branch";' in dot
    # outer values read inside a branch: dashed edges from the outer boxes
    assert '"input1" -> "node0_then_branch_node0" [label="X\\nfloat32 [2, 3]", style=dashed];' in dot
    assert '"init0" -> "node0_then_branch_node0" [label="bias\\nfloat32 [3]", style=dashed];' in dot
    # the branch's own initializer, its output going back to the If node
    assert '"node0_else_branch_init0" [shape=note' in dot
    assert '"node0_then_branch_output0" -> "node0" [style=dotted, arrowhead=empty];' in dot
    flat = onnxrt.OnnxInference(_if_model()).to_dot(recursive=False, size="7", ranksep="0.25")
    assert "subgraph" not in flat and flat.count(" -> ") == 2  # c into the If, the If to Y
    assert 'graph [rankdir=TB, fontsize=10, fontname="Helvetica", size="7", ranksep="0.25"];' in flat
    with pytest.raises(GraphError, match="not a Graphviz attribute"):
        onnxrt.OnnxInference(_if_model()).to_dot(**{"bad key": 1})
    loop = onnxrt.OnnxInference(_loop_model()).to_dot()
    assert 'label="Loop \'power\': body";' in loop
    assert '"node0_body_input2" -> "node0_body_node1" [label="acc_in\\nfloat32 [2]"];' in loop
    assert '"input0" -> "node0_body_node1" [label="x\\nfloat32 [2]", style=dashed];' in loop


def test_to_dot_and_to_text_show_model_local_functions():
    from onnxrt.tools.dot import to_dot
    from onnxrt.tools.text import model_data, to_text

    model = _function_model()  # its custom operator has no kernel: the tools work on the model itself
    dot = to_dot(model)
    assert '"node0" [shape=box, style="rounded,filled", fillcolor="#ffe5b4", label="my.fn.Scale2\\ncall"];' in dot
    assert '"node1" -> "node2" [label="M"];' in dot  # a value of unknown type: its name alone
    assert "cluster_function0" not in to_dot(model, add_functions=False)
    k = dot.index('subgraph "cluster_function0" {')
    cluster = dot[k:]
    assert 'label="function my.fn.Scale2";' in cluster
    assert '"function0_node2" -> "function0_node3" [label="m"];' in cluster
    assert '"function0_node3" -> "function0_output0" [label="y"];' in cluster
    text = to_text(model).splitlines()
    assert text[-5:] == [
        "function my.fn.Scale2(x) -> y",
        "    0 Constant() -> two", "    1 Constant() -> one", "    2 Mul(x, two) -> m", "    3 Add(m, one) -> y",
    ]
    assert model_data(model)["functions"][0]["nodes"][2]["inputs"] == ["x", "two"]


def _has_dot() -> bool:
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


@pytest.mark.skipif(not _has_dot(), reason="needs the graphviz package and Graphviz's dot program")
def test_to_svg_renders():
    svg = onnxrt.OnnxInference(_if_model()).to_svg()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and svg.rstrip().endswith("</svg>")
    assert "then_add" in svg and "float32 [2, 3]" in svg
    flat = onnxrt.OnnxInference(_if_model()).to_svg(rankdir="LR", recursive=False)
    assert "<svg" in flat and "then_add" not in flat


def test_to_svg_names_the_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(MissingDependencyError, match=r"graphviz Python package.*onnxrt\[graph\]"):
        onnxrt.OnnxInference(demo_model_path()).to_svg()


def test_to_svg_names_the_missing_dot_program(monkeypatch):
    pytest.importorskip("graphviz")
    monkeypatch.setenv("PATH", "")
    with pytest.raises(MissingDependencyError, match="'dot' program"):
        onnxrt.OnnxInference(demo_model_path()).to_svg()


def test_cli_draw(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # DOT text needs no graphviz
    out = tmp_path / "g.dot"
    assert main(["draw", demo_model_path(), "-o", str(out), "--rankdir", "LR"]) == 0
    text = out.read_text()
    assert text == onnxrt.OnnxInference(demo_model_path()).to_dot(rankdir="LR")
    assert f"DOT text written to {out}" in capsys.readouterr().out
    assert main(["draw", demo_model_path()]) == 0
    assert capsys.readouterr().out == onnxrt.OnnxInference(demo_model_path()).to_dot()
    assert main(["draw", demo_model_path(), "-o", str(tmp_path / "g.svg")]) == 9
    assert "graphviz Python package" in capsys.readouterr().err
    assert not (tmp_path / "g.svg").exists()
    assert main(["draw", "-o", str(tmp_path / "g.png")]) == 2
    assert "draw writes .dot" in capsys.readouterr().err


def test_cli_draw_model_without_kernels(tmp_path, capsys):
    path = tmp_path / "custom.onnx"
    onnx.save(_function_model(), path)  # a custom operator onnxrt cannot run: drawn all the same
    assert main(["draw", str(path)]) == 0
    out = capsys.readouterr().out
    assert '"node1" [shape=box, style="rounded,filled", fillcolor="#ffe5b4", label="my.custom.Mystery\\nmystery"];' in out
    assert main(["run", str(path)]) == 5  # UnsupportedOperatorError


@pytest.mark.skipif(not _has_dot(), reason="needs the graphviz package and Graphviz's dot program")
def test_cli_draw_svg(tmp_path, capsys):
    out = tmp_path / "g.svg"
    assert main(["draw", "-o", str(out)]) == 0
    assert "<svg" in out.read_text() and "ScatterElements" in out.read_text()


# --- shapes and types -----------------------------------------------------------------------------


def test_infer_shapes_demo():
    infos = onnxrt.OnnxInference(demo_model_path()).infer_shapes()
    assert list(infos)[:6] == ["ids", "embedding", "scale", "bias", "empty_hist", "zero_i"]
    assert list(infos)[6:] == ["emb", "scaled", "shifted", "features", "gates", "ids_shape", "one_vec", "zero_ids", "ones", "histogram"]
    emb = infos["emb"]
    assert (emb.shape, emb.dtype, emb.type, emb.origin) == ((1, 6, 8), np.dtype(np.float32), "tensor(float)", "onnx")
    assert infos["zero_i"].shape == () and infos["zero_i"].origin == "initializer"
    assert infos["ids_shape"].to_dict() == {"name": "ids_shape", "type": "tensor(int64)", "dtype": "int64", "shape": [2], "origin": "declared"}
    types = onnxrt.OnnxInference(demo_model_path()).infer_types()
    assert types["ones"] == np.float32 and types["zero_ids"] == np.int64 and len(types) == 16


def test_infer_shapes_keeps_symbolic_dims():
    infos = onnxrt.OnnxInference(_chain_model()).infer_shapes()
    assert infos["r"].shape == ("N", 4) and infos["h1"].shape == ("N", 2)
    assert infos["W"].shape == ("N", 2) and infos["W"].origin == "onnx"  # declared without a shape


def _function_model():
    """A model-local function 'Scale2' (x * 2 + 1) called on X, then a custom operator onnxrt knows no schema of."""
    two = helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2.0, np.float32)))
    one = helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1.0, np.float32)))
    fn = helper.make_function(
        "my.fn", "Scale2", ["x"], ["y"],
        [two, one, helper.make_node("Mul", ["x", "two"], ["m"]), helper.make_node("Add", ["m", "one"], ["y"])],
        opset_imports=[helper.make_opsetid("", 18)],
    )
    nodes = [
        helper.make_node("Scale2", ["X"], ["S"], domain="my.fn", name="call"),
        helper.make_node("Mystery", ["S"], ["M"], domain="my.custom", name="mystery"),
        helper.make_node("Shape", ["M"], ["shp"], name="shape"),
        helper.make_node("Relu", ["S"], ["R"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "fg", [helper.make_tensor_value_info("X", F, ["N", 3])],
        [helper.make_tensor_value_info("R", F, None), helper.make_value_info("shp", onnx.TypeProto())],
    )
    return helper.make_model(
        graph, functions=[fn],
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("my.fn", 1), helper.make_opsetid("my.custom", 1)],
    )


def test_infer_shapes_own_rules_where_onnx_stops(monkeypatch):
    model = _function_model()
    # onnx's whole-model inference failing: every value below comes from onnxrt's rules
    monkeypatch.setattr(shapes_mod, "onnx_inferred", lambda m: m)
    infos = shapes_mod.infer_shapes(model)
    s = infos["S"]
    assert (s.type, s.shape, s.origin) == ("tensor(float)", ("N", 3), "function")
    assert infos["R"].shape == ("N", 3) and infos["R"].origin == "onnx"  # Relu's inference function, node by node
    m = infos["M"]
    assert (m.type, m.elem_type, m.shape, m.origin, m.dtype, m.known) == ("unknown", 0, None, "unknown", None, False)
    shp = infos["shp"]  # Shape's output: tensor(int64) by the schema, whatever its input
    assert (shp.type, shp.dtype, shp.shape, shp.origin) == ("tensor(int64)", np.dtype(np.int64), None, "schema")
    types = shapes_mod.infer_types(model)
    assert types["M"] is None and types["shp"] == np.int64 and types["S"] == np.float32


def test_infer_shapes_ml_rules():
    nodes = [
        helper.make_node("Scaler", ["X"], ["sc"], domain="ai.onnx.ml", scale=[1.0, 2.0, 3.0], offset=[0.0, 0.0, 1.0], name="scaler"),
        helper.make_node("LinearRegressor", ["sc"], ["Y"], domain="ai.onnx.ml", coefficients=[1.0] * 6, intercepts=[0.0, 1.0], targets=2, name="lin"),
        helper.make_node("ZipMap", ["Y"], ["Z"], domain="ai.onnx.ml", classlabels_int64s=[0, 1], name="zip"),
    ]
    graph = helper.make_graph(
        nodes, "ml", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, ["N", 3])],
        [helper.make_tensor_value_info("Y", F, None), helper.make_value_info("Z", onnx.TypeProto())],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 3)])
    oinf = onnxrt.OnnxInference(model)
    infos = oinf.infer_shapes()
    assert (infos["sc"].type, infos["sc"].shape, infos["sc"].origin) == ("tensor(float)", ("N", 3), "rule")
    assert (infos["Y"].type, infos["Y"].shape, infos["Y"].origin) == ("tensor(float)", ("N", 2), "rule")
    assert infos["Z"].type == "seq(map(int64,tensor(float)))" and infos["Z"].dtype is None
    assert oinf.infer_types()["Z"] == "seq(map(int64,tensor(float)))"
    y = oinf.run({"X": np.ones((5, 3))})["Y"]
    assert y.shape == (5, 2) and y.dtype == np.float32  # the rule agrees with the run


def test_infer_shapes_tree_rules(monkeypatch):
    leaf = dict(nodes_treeids=[0], nodes_nodeids=[0], nodes_featureids=[0], nodes_values=[0.0], nodes_modes=["LEAF"],
                nodes_truenodeids=[0], nodes_falsenodeids=[0])
    nodes = [
        helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "proba"], domain="ai.onnx.ml", name="cls",
                         classlabels_int64s=[3, 5, 7], class_treeids=[0, 0, 0], class_nodeids=[0, 0, 0],
                         class_ids=[0, 1, 2], class_weights=[0.2, 0.5, 0.3], **leaf),
        helper.make_node("TreeEnsembleRegressor", ["X"], ["reg"], domain="ai.onnx.ml", name="reg", n_targets=2,
                         target_treeids=[0, 0], target_nodeids=[0, 0], target_ids=[0, 1], target_weights=[1.5, -1.0], **leaf),
    ]
    untyped = onnx.TypeProto()
    graph = helper.make_graph(
        nodes, "trees", [helper.make_tensor_value_info("X", F, ["N", 2])],
        [helper.make_value_info(n, untyped) for n in ("label", "proba", "reg")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    monkeypatch.setattr(shapes_mod, "onnx_inferred", lambda m: m)  # as when onnx's inference gives up
    infos = shapes_mod.infer_shapes(model)
    assert (infos["label"].dtype, infos["label"].shape) == (np.dtype(np.int64), ("N",))
    assert (infos["proba"].dtype, infos["proba"].shape, infos["proba"].origin) == (np.dtype(np.float32), ("N", 3), "rule")
    assert (infos["reg"].dtype, infos["reg"].shape, infos["reg"].origin) == (np.dtype(np.float32), ("N", 2), "rule")
    res = onnxrt.OnnxInference(model).run({"X": np.zeros((4, 2), np.float32)})
    assert res["label"].shape == (4,) and res["proba"].shape == (4, 3) and res["reg"].shape == (4, 2)
    sizes = shapes_mod.infer_sizes(model, {"X": (4, 2)})
    assert [n["outputs"] for n in sizes["nodes"]] == [{"label": 32, "proba": 48}, {"reg": 32}]


# --- sizes -----------------------------------------------------------------------------------------


def test_infer_sizes_liveness():
    oinf = onnxrt.OnnxInference(_chain_model())
    sizes = oinf.infer_sizes({"X": (2, 4)})
    assert [(n["name"], n["temp"], n["live"]) for n in sizes["nodes"]] == [
        ("relu", 32, 32),    # r
        ("exp", 32, 32),     # e; r freed after its last reader
        ("add", 32, 32),     # Z (an output, kept); e freed
        ("split", 32, 48),   # h0, h1: h1 nobody reads, freed at once
        ("neg", 16, 48),     # W; h0 freed
    ]
    assert sizes["nodes"][3]["outputs"] == {"h0": 16, "h1": 16}
    assert (sizes["peak"], sizes["peak_node"]) == (64, "exp")
    assert sizes["inputs"] == 32 and sizes["initializers"] == 0 and sizes["unknown"] == []
    same = oinf.infer_sizes({"X": np.zeros((2, 4), np.float32)})
    assert same == sizes
    big = oinf.infer_sizes({"X": (1000, 4)})
    assert big["peak"] == 32000 and big["nodes"][4]["outputs"] == {"W": 8000}
    with pytest.raises(InvalidFeedError, match="missing"):
        oinf.infer_sizes({})
    with pytest.raises(InvalidFeedError, match="not an input"):
        oinf.infer_sizes({"X": (2, 4), "Q": (1,)})
    with pytest.raises(InvalidFeedError, match=r"declared with shape \['N', 4\]"):
        oinf.infer_sizes({"X": (2, 5)})
    with pytest.raises(InvalidFeedError, match="an array or a shape"):
        oinf.infer_sizes({"X": "2x4"})


def test_infer_sizes_demo_and_unknown_sizes():
    sizes = onnxrt.OnnxInference(demo_model_path()).infer_sizes(_demo_feeds())
    assert sizes["initializers"] == (32 * 8 + 8 + 8 + 32) * 4 + 8
    assert sizes["inputs"] == 48
    assert (sizes["peak"], sizes["peak_node"]) == (3 * 192, "gate")
    loop = onnxrt.OnnxInference(_loop_model()).infer_sizes({"x": (2,), "acc0": np.zeros(2, np.float32)})
    assert loop["nodes"] == [{"i": 0, "name": "power", "op_type": "Loop", "outputs": {"acc": 8}, "temp": 8, "live": 8}]
    assert (loop["inputs"], loop["initializers"], loop["peak"]) == (16, 8, 8)
    branch = onnxrt.OnnxInference(_if_model()).infer_sizes({"c": (), "X": (2, 3)})
    assert branch["inputs"] == 1 + 24 and branch["peak"] == 24 and branch["unknown"] == []
    seq_in = helper.make_tensor_sequence_value_info("S", F, None)
    seq = helper.make_graph(
        [helper.make_node("SequenceLength", ["S"], ["n"])], "seq", [seq_in],
        [helper.make_tensor_value_info("n", TensorProto.INT64, [])],
    )
    with pytest.raises(InvalidFeedError, match=r"tensor inputs only; input 'S' has type seq\(tensor\(float\)\)"):
        onnxrt.OnnxInference(seq, target_opset=18).infer_sizes({"S": (2,)})
    unknown = shapes_mod.infer_sizes(_function_model(), {"X": (4, 3)})
    assert unknown["unknown"] == ["M", "shp"]
    assert unknown["nodes"][1]["outputs"] == {"M": None} and unknown["nodes"][1]["temp"] == 0


# --- global_index, node_time, runtime, target_opset, GraphProto -------------------------------------


def test_global_index_is_stable():
    a = onnxrt.OnnxInference(demo_model_path())
    b = onnxrt.OnnxInference(demo_model_path())
    assert b.global_index("histogram") == 15  # asked first, numbered as the graph orders it
    assert [a.global_index(n) for n in ("ids", "embedding", "zero_i", "emb", "histogram")] == [0, 1, 5, 6, 15]
    assert a.global_index("not_a_value") == 16 and a.global_index("not_a_value") == 16
    assert a.global_index("another") == 17 and b.global_index("emb") == 6


def test_run_node_time():
    oinf = onnxrt.OnnxInference(demo_model_path())
    res, times = oinf.run(_demo_feeds(), node_time=True)
    expected = oinf.run(_demo_feeds())
    assert set(res) == set(expected)
    for k in res:
        np.testing.assert_array_equal(res[k], expected[k])
    assert [t["i"] for t in times] == list(range(len(oinf.plan.steps)))
    assert [(t["name"], t["op_type"]) for t in times] == [(st.name, st.op_type) for st in oinf.plan.steps]
    assert all(set(t) == {"i", "name", "op_type", "time"} and isinstance(t["time"], float) and t["time"] >= 0 for t in times)
    every, times2 = oinf.run(_demo_feeds(), intermediate=True, node_time=True)
    assert "emb" in every and len(times2) == 10  # the graph as written: every node
    assert [t["name"] for t in times2][:3] == ["lookup", "scale", "shift"]


def test_constructor_runtime_target_opset_graph():
    with pytest.raises(OnnxRuntimeError, match="runtime='onnxruntime1'.*'python'"):
        onnxrt.OnnxInference(demo_model_path(), runtime="onnxruntime1")
    assert onnxrt.OnnxInference(demo_model_path(), runtime="python").runtime == "python"
    graph = _chain_model().graph
    g = onnxrt.OnnxInference(graph)
    assert g.opsets == {"": onnx.defs.onnx_opset_version()}
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    np.testing.assert_allclose(g.run({"X": x})["Z"], np.exp(np.maximum(x, 0)) + x, rtol=1e-6)
    g13 = onnxrt.OnnxInference(_if_model().graph, target_opset=13)
    assert g13.opsets == {"": 13}
    np.testing.assert_array_equal(g13.run({"c": np.array(False), "X": np.ones((2, 3), np.float32)})["Y"], np.full((2, 3), 2.0, np.float32))
    ml = helper.make_graph(
        [helper.make_node("Binarizer", ["X"], ["Y"], domain="ai.onnx.ml", threshold=0.5)], "b",
        [helper.make_tensor_value_info("X", F, [3])], [helper.make_tensor_value_info("Y", F, [3])],
    )
    b = onnxrt.OnnxInference(ml)
    assert b.opsets["ai.onnx.ml"] == onnx.defs.onnx_ml_opset_version()
    np.testing.assert_array_equal(b.run({"X": np.array([0.2, 0.7, 0.5], np.float32)})["Y"], [0, 1, 0])
    # target_opset on a model: its opset imports are replaced, the kernels resolve at that version
    m = onnxrt.OnnxInference(_if_model(), target_opset={"": 16})
    assert m.opsets == {"": 16} and m.model.opset_import[0].version == 16
    with pytest.raises(OnnxRuntimeError, match="target_opset"):
        onnxrt.OnnxInference(demo_model_path(), target_opset="18")


# --- DataFrames --------------------------------------------------------------------------------


def test_run_dataframe_single_input():
    pd = pytest.importorskip("pandas")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["X", "w"], ["S"])],
        "tab", [helper.make_tensor_value_info("X", F, ["N", 3])], [helper.make_tensor_value_info("S", F, ["N", 3])],
        [numpy_helper.from_array(np.array([1.0, 10.0, 100.0], np.float32), "w")],
    )
    oinf = onnxrt.OnnxInference(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3, 4], "c": np.array([5, 6], np.float32)})
    s = oinf.run(frame)["S"]
    assert s.dtype == np.float32 and s.shape == (2, 3)
    np.testing.assert_array_equal(s, [[1, 30, 500], [2, 40, 600]])
    with pytest.raises(InvalidFeedError, match="Column 'b' of dtype (object|str) cannot feed input 'X'"):
        oinf.run(pd.DataFrame({"a": [1.0], "b": ["x"], "c": [2.0]}))
    with pytest.raises(InvalidFeedError, match="expects dimension 1 to be 3"):
        oinf.run(pd.DataFrame({"a": [1.0], "b": [2.0]}))


def test_run_dataframe_columns_by_name():
    pd = pytest.importorskip("pandas")
    graph = helper.make_graph(
        [helper.make_node("Unsqueeze", ["a", "one"], ["a2"]), helper.make_node("Add", ["a2", "b"], ["Y"]),
         helper.make_node("Identity", ["label"], ["L"])],
        "named",
        [helper.make_tensor_value_info("a", F, ["N"]), helper.make_tensor_value_info("b", F, ["N", 2]),
         helper.make_tensor_value_info("label", TensorProto.STRING, ["N", 1])],
        [helper.make_tensor_value_info("Y", F, ["N", 2]), helper.make_tensor_value_info("L", TensorProto.STRING, ["N", 1])],
        [numpy_helper.from_array(np.array([1], np.int64), "one")],
    )
    oinf = onnxrt.OnnxInference(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    frame = pd.DataFrame({"b_1": [10.0, 20.0], "label": ["x", "y"], "a": [1.0, 2.0], "b_0": [100.0, 200.0]})
    res = oinf.run(frame)
    np.testing.assert_array_equal(res["Y"], np.array([[101, 11], [202, 22]], np.float32))
    assert res["Y"].dtype == np.float32
    assert res["L"].shape == (2, 1) and res["L"].tolist() == [["x"], ["y"]]
    with pytest.raises(InvalidFeedError, match=r"none found for \['b'\]"):
        oinf.run(frame[["a", "label"]])
    res_t, times = oinf.run(frame, node_time=True)
    np.testing.assert_array_equal(res_t["Y"], res["Y"])
    assert [t["op_type"] for t in times][-1] in {"Identity", "Add"}


def test_pandas_graphviz_not_imported():
    code = (
        "import sys, numpy as np, onnxrt\n"
        "from onnxrt.cli import demo_model_path\n"
        "o = onnxrt.OnnxInference(demo_model_path())\n"
        "o.run({'ids': np.zeros((1, 6), np.int64)}, node_time=True)\n"
        "o.to_dot(); o.to_text(); o.infer_sizes({'ids': (1, 6)})\n"
        "bad = [m for m in ('pandas', 'graphviz', 'onnxrt.tools.frames') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    mine = ("shapes", "text", "dot", "precision", "intermediate", "frames")
    light = f"import sys, onnxrt\nbad = [m for m in {mine!r} if 'onnxrt.tools.' + m in sys.modules]\nassert not bad, bad\n"
    subprocess.run([sys.executable, "-c", light], check=True, cwd=ROOT)


# --- precision -------------------------------------------------------------------------------------


def _float_model():
    """y = Cast(Cast(x * w + c, to=float16), to=float); k = ConstantOfShape; then float32-only ZipMap input and LinearRegressor output."""
    nodes = [
        helper.make_node("Constant", [], ["c"], value_floats=[0.1, 0.2, 0.3], name="const"),
        helper.make_node("Mul", ["x", "w"], ["xw"], name="mul"),
        helper.make_node("Add", ["xw", "c"], ["s"], name="add"),
        helper.make_node("Cast", ["s"], ["s16"], to=TensorProto.FLOAT16, name="to16"),
        helper.make_node("Cast", ["s16"], ["y"], to=F, name="back"),
        helper.make_node("Shape", ["x"], ["shp"], name="shape"),
        helper.make_node("ConstantOfShape", ["shp"], ["k"], value=numpy_helper.from_array(np.array([0.25], np.float32)), name="fill"),
        helper.make_node("LinearRegressor", ["s"], ["lin"], domain="ai.onnx.ml", coefficients=[1.0, 1.0, 1.0], intercepts=[0.5], name="lin"),
        helper.make_node("Add", ["lin", "third"], ["lin2"], name="add_third"),
        helper.make_node("ZipMap", ["s"], ["z"], domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2], name="zip"),
    ]
    graph = helper.make_graph(
        nodes, "fm", [helper.make_tensor_value_info("x", F, ["N", 3])],
        [helper.make_tensor_value_info("y", F, ["N", 3]), helper.make_tensor_value_info("s", F, ["N", 3]),
         helper.make_tensor_value_info("k", F, ["N", 3]), helper.make_tensor_value_info("lin2", F, ["N", 1]),
         helper.make_value_info("z", onnx.TypeProto())],
        [numpy_helper.from_array(np.array([1 / 3, 2 / 3, 0.1], np.float32), "w"),
         numpy_helper.from_array(np.array([1 / 3], np.float32), "third")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 3)])


def test_switch_initializers_dtype():
    oinf = onnxrt.OnnxInference(_float_model())
    wide = oinf.switch_initializers_dtype()
    assert isinstance(wide, onnxrt.OnnxInference) and wide is not oinf
    g = wide.model.graph
    assert {t.name: t.data_type for t in g.initializer} == {"w": TensorProto.DOUBLE, "third": TensorProto.DOUBLE}
    assert g.input[0].type.tensor_type.elem_type == TensorProto.DOUBLE
    casts = {n.name: helper.get_attribute_value(n.attribute[0]) for n in g.node if n.op_type == "Cast" and n.name in ("to16", "back")}
    assert casts == {"to16": TensorProto.FLOAT16, "back": TensorProto.DOUBLE}
    ops = [(n.op_type, list(n.input), list(n.output)) for n in g.node]
    assert ("LinearRegressor", ["s"], ["lin__float32"]) in ops and ("Cast", ["lin__float32"], ["lin"]) in ops
    assert ("Cast", ["s"], ["s__as_float32"]) in ops and ("ZipMap", ["s__as_float32"], ["z"]) in ops
    assert ("cast output to double", "lin", "lin") in wide.switched
    assert ("initializer", "w", "double") in wide.switched and ("attribute", "const", "value_floats") in wide.switched
    assert oinf.model.graph.initializer[0].data_type == F  # the original is left alone

    x = np.array([[0.3, 1.7, -2.2], [1e3, 3.1, 0.7]], np.float32)
    low, high = oinf.run({"x": x}), wide.run({"x": x.astype(np.float64)})
    for name in ("y", "s", "k", "lin2"):
        assert low[name].dtype == np.float32 and high[name].dtype == np.float64, name
    # the float32 constants, widened exactly: the same numbers, computed in float64
    w64 = np.array([1 / 3, 2 / 3, 0.1], np.float32).astype(np.float64)
    s64 = x.astype(np.float64) * w64 + np.array([0.1, 0.2, 0.3], np.float32).astype(np.float64)
    np.testing.assert_allclose(high["s"], s64, rtol=1e-15)
    np.testing.assert_array_equal(high["y"], s64.astype(np.float16).astype(np.float64))
    np.testing.assert_array_equal(high["k"], np.full((2, 3), 0.25))
    np.testing.assert_allclose(low["s"], s64, rtol=1e-6)
    assert high["z"][0][2] == pytest.approx(float(np.float32(s64[0, 2])))  # through ZipMap's float32 input
    with pytest.raises(OnnxRuntimeError, match="float32 to another float type"):
        oinf.switch_initializers_dtype(np.int64)


def test_switch_initializers_dtype_defaults_and_bits():
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("ConstantOfShape", ["shp"], ["zeros"]),  # no value: a float32 zero by default
        helper.make_node("Sub", ["x", "zeros"], ["y"]),
        helper.make_node("BitCast", ["x"], ["bits"], to=TensorProto.INT32),  # float32 bits, whatever the run
        helper.make_node("BitCast", ["bits"], ["back"], to=F),
        helper.make_node("RandomUniform", [], ["r"], shape=[2], seed=1.0),  # float32 by default
    ]
    graph = helper.make_graph(
        nodes, "defaults", [helper.make_tensor_value_info("x", F, [3])],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in
         (("y", F, [3]), ("bits", TensorProto.INT32, [3]), ("back", F, [3]), ("r", F, [2]))],
    )
    oinf = onnxrt.OnnxInference(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)]))
    wide = oinf.switch_initializers_dtype()
    x = np.array([1.5, -0.1, 3e38], np.float32)
    res = wide.run({"x": x.astype(np.float64)})
    assert res["y"].dtype == np.float64 and res["r"].dtype == np.float64 and res["back"].dtype == np.float64
    np.testing.assert_array_equal(res["y"], x.astype(np.float64))
    np.testing.assert_array_equal(res["bits"], x.view(np.int32))
    np.testing.assert_array_equal(res["back"], x.astype(np.float64))
    assert ("attribute", "ConstantOfShape", "value") in wide.switched and ("attribute", "RandomUniform", "dtype") in wide.switched
    rows = oinf.compare_precision({"x": x})
    assert [r["output"] for r in rows] == ["zeros", "y", "back", "r"] and all(r["max_abs"] == 0 for r in rows[:3])


def test_compare_precision():
    oinf = onnxrt.OnnxInference(_float_model())
    x = np.array([[0.3, 1.7, -2.2], [1e3, 3.1, 0.7]], np.float32)
    rows = oinf.compare_precision({"x": x})
    assert [r["output"] for r in rows] == ["c", "xw", "s", "s16", "y", "k", "lin", "lin2"]
    assert all(set(r) == {"i", "name", "op_type", "output", "dtype", "max_abs", "max_rel"} for r in rows)
    by = {r["output"]: r for r in rows}
    assert by["s16"]["dtype"] == "float16" and by["s"]["i"] == 2 and by["s"]["op_type"] == "Add" and by["s"]["name"] == "add" and by["s"]["dtype"] == "float32"
    low = oinf.run({"x": x}, intermediate=True)
    high = oinf.switch_initializers_dtype().run({"x": x.astype(np.float64)}, intermediate=True)
    for out in ("xw", "s", "lin2"):
        d = np.abs(low[out].astype(np.float64) - high[out])
        assert by[out]["max_abs"] == pytest.approx(float(d.max()), rel=1e-12)
        assert by[out]["max_rel"] == pytest.approx(float((d / np.maximum(np.abs(high[out]), 1e-12)).max()), rel=1e-12)
    assert 0 < by["s"]["max_rel"] < 1e-6 and by["k"]["max_abs"] == 0.0
    assert by["y"]["max_abs"] == 0.0  # float16 rounding dominates: both runs round to the same halves


def test_cli_compare_precision(capsys):
    assert main(["compare", "--precision", demo_model_path()]) == 0
    out = capsys.readouterr().out
    assert "float32 against float64, node by node" in out
    lines = [ln for ln in out.splitlines() if re.match(r"\s+\d+ ", ln)]
    assert [ln.split()[1] for ln in lines] == ["lookup", "scale", "shift", "relu", "gate", "one", "ones_like", "histogram"]
    assert re.search(r"largest relative drift: [0-9.e-]+ at '(gates|features|shifted|scaled)'", out)


# --- intermediate models ---------------------------------------------------------------------------


def test_build_intermediate():
    oinf = onnxrt.OnnxInference(demo_model_path())
    inter = oinf.build_intermediate()
    assert list(inter) == ["emb", "scaled", "shifted", "features", "gates", "ids_shape", "one_vec", "zero_ids", "ones", "histogram"]
    every = oinf.run(_demo_feeds(), intermediate=True)
    for name, sub in inter.items():
        assert isinstance(sub, onnxrt.OnnxInference) and sub.output_names == [name]
        got = sub.run(_demo_feeds())
        assert list(got) == [name]
        # the cut model runs optimised (compiled Sigmoid, element-wise chains in one compiled
        # loop, within a few float32 ulp), the intermediate run the graph as written
        np.testing.assert_allclose(got[name], every[name], rtol=8 * np.finfo(np.float32).eps, atol=0)
        assert got[name].dtype == every[name].dtype and got[name].shape == every[name].shape
    scaled = inter["scaled"].model.graph
    assert [n.name for n in scaled.node] == ["lookup", "scale"]
    assert [t.name for t in scaled.initializer] == ["embedding", "scale"]
    assert scaled.output[0].type.tensor_type.elem_type == F
    assert [d.dim_value for d in scaled.output[0].type.tensor_type.shape.dim] == [1, 6, 8]
    some = oinf.build_intermediate(["ones", "emb"])
    assert list(some) == ["emb", "ones"]  # run order
    assert list(oinf.build_intermediate("gates")) == ["gates"]
    with pytest.raises(GraphError, match="Did you mean 'gates'"):
        oinf.build_intermediate("gatez")
    with pytest.raises(GraphError, match="not a node output"):
        oinf.build_intermediate("ids")
    # a subgraph's outer reads count as dependencies
    loop = onnxrt.OnnxInference(_loop_model()).build_intermediate()
    x, a = np.array([2.0, 3.0], np.float32), np.array([1.0, 1.0], np.float32)
    np.testing.assert_array_equal(loop["acc"].run({"x": x, "acc0": a})["acc"], [8.0, 27.0])


# --- README ----------------------------------------------------------------------------------------


def test_readme_inspection_snippet_runs(tmp_path, monkeypatch, capsys):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "demo_model_path" in b]
    assert len(blocks) == 1, "README's inspection tour (on the demo model) is missing"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "graphviz", None)  # the snippet writes DOT text, no rendering
    exec(compile(blocks[0], "README.md#inspection", "exec"), {})  # noqa: S102
    out = capsys.readouterr().out
    assert "0 Gather 'lookup'(embedding, ids) -> emb" in out
    # the values the README's comments announce
    for line in ("float32 (1, 6, 8)", "576 gate", "(1, 6, 8) 6"):
        assert line in out.splitlines(), line
    assert re.search(r"^scaled [0-9.e-]+ [0-9.e-]+$", out, flags=re.M)
    assert (tmp_path / "demo.dot").read_text().startswith('digraph "onnxrt_demo"')
