"""Functions: model-local FunctionProtos (nesting, attribute references, defaults, subgraphs) and the
fallback to schema function bodies, context-free and context-dependent, for operators without a kernel."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper

import onnxrt
from onnxrt import registry
from onnxrt.errors import GraphError, InvalidAttributeError, UnsupportedOperatorError
from onnxrt.functions import GraphNode, ValueTypes, expand, function_key, inline_call

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
LOCAL = "local.fn"


def vi(name: str, elem: int = F, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, functions=(), opset: int = 18, domains=(LOCAL,)) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "main", inputs, outputs)
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(graph, opset_imports=ops, functions=list(functions))
    m.ir_version = 10
    return m


def run(m: onnx.ModelProto, feeds: dict) -> list:
    return onnxrt.InferenceSession(m.SerializeToString()).run(None, feeds)


def run_ort(m: onnx.ModelProto, feeds: dict) -> list:
    import onnxruntime as ort

    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def ref_att(name: str, ref: str, att_type: int) -> AttributeProto:
    att = AttributeProto()
    att.name, att.ref_attr_name, att.type = name, ref, att_type
    return att


def function(name, inputs, outputs, nodes, attributes=(), defaults=(), opset: int = 18) -> onnx.FunctionProto:
    fn = helper.make_function(LOCAL, name, list(inputs), list(outputs), list(nodes),
                              [helper.make_opsetid("", opset), helper.make_opsetid(LOCAL, 1)], list(attributes))
    fn.attribute_proto.extend(defaults)
    return fn


# --- model-local functions ------------------------------------------------------------------------


def _scaled_add() -> onnx.FunctionProto:
    """ScaledAdd<alpha>(a, b) = a + alpha * b; alpha defaults to 2.0 (an attribute_proto default)."""
    alpha = helper.make_node("Constant", [], ["alpha"])
    alpha.attribute.append(ref_att("value_float", "alpha", AttributeProto.FLOAT))
    return function(
        "ScaledAdd", ["a", "b"], ["y"],
        [alpha, helper.make_node("Mul", ["alpha", "b"], ["ab"]), helper.make_node("Add", ["a", "ab"], ["y"])],
        defaults=[helper.make_attribute("alpha", 2.0)],
    )


def _twice() -> onnx.FunctionProto:
    """Twice<alpha>(x, y) = ScaledAdd<alpha>(ScaledAdd<alpha>(x, y), y): a nested call forwarding the reference."""
    first = helper.make_node("ScaledAdd", ["x", "y"], ["t"], domain=LOCAL)
    first.attribute.append(ref_att("alpha", "alpha", AttributeProto.FLOAT))
    second = helper.make_node("ScaledAdd", ["t", "y"], ["z"], domain=LOCAL)
    second.attribute.append(ref_att("alpha", "alpha", AttributeProto.FLOAT))
    return function("Twice", ["x", "y"], ["z"], [first, second], attributes=["alpha"])


def test_local_function_defaults_references_and_nesting_against_onnxruntime():
    nodes = [
        helper.make_node("ScaledAdd", ["x", "y"], ["default"], domain=LOCAL),  # alpha = 2 (default)
        helper.make_node("ScaledAdd", ["x", "y"], ["given"], domain=LOCAL, alpha=0.5),
        helper.make_node("Twice", ["x", "y"], ["nested"], domain=LOCAL, alpha=3.0),
    ]
    m = model(nodes, [vi("x", F, [3]), vi("y", F, [3])], [vi(n, F, [3]) for n in ("default", "given", "nested")],
              functions=[_scaled_add(), _twice()])
    x, y = np.arange(3, dtype=np.float32), np.array([1.0, -1.0, 0.5], np.float32)
    got = run(m, {"x": x, "y": y})
    np.testing.assert_allclose(got[0], x + 2 * y)
    np.testing.assert_allclose(got[1], x + 0.5 * y)
    np.testing.assert_allclose(got[2], x + 6 * y)
    for g, w in zip(got, run_ort(m, {"x": x, "y": y})):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_reference_to_an_attribute_nobody_gives_leaves_the_operator_default():
    # LeakyRelu's alpha refers to the function's 'slope', which has no default: LeakyRelu's 0.01 applies
    leaky = helper.make_node("LeakyRelu", ["x"], ["y"])
    leaky.attribute.append(ref_att("alpha", "slope", AttributeProto.FLOAT))
    fn = function("Leaky", ["x"], ["y"], [leaky], attributes=["slope"])
    m = model([helper.make_node("Leaky", ["x"], ["y"], domain=LOCAL)], [vi("x", F, [2])], [vi("y", F, [2])], [fn])
    (y,) = run(m, {"x": np.array([-100.0, 3.0], np.float32)})
    np.testing.assert_allclose(y, [-1.0, 3.0])
    m = model([helper.make_node("Leaky", ["x"], ["y"], domain=LOCAL, slope=0.5)], [vi("x", F, [2])], [vi("y", F, [2])], [fn])
    (y,) = run(m, {"x": np.array([-100.0, 3.0], np.float32)})
    np.testing.assert_allclose(y, [-50.0, 3.0])


def test_function_outputs_the_call_does_not_name_stay_usable_inside():
    fn = function("Pair", ["x"], ["a", "b"], [helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Abs", ["a"], ["b"])])
    m = model([helper.make_node("Pair", ["x"], ["", "b_out"], domain=LOCAL)], [vi("x", F, [2])], [vi("b_out", F, [2])], [fn])
    (b,) = run(m, {"x": np.array([-2.0, 3.0], np.float32)})
    np.testing.assert_array_equal(b, [2.0, 3.0])


def test_omitted_optional_input_of_a_function_is_absent_inside():
    fn = function("MaybeClip", ["x", "lo"], ["y"], [helper.make_node("Clip", ["x", "lo"], ["y"])])
    m = model([helper.make_node("MaybeClip", ["x"], ["y"], domain=LOCAL)], [vi("x", F, [2])], [vi("y", F, [2])], [fn])
    (y,) = run(m, {"x": np.array([-2.0, 3.0], np.float32)})
    np.testing.assert_array_equal(y, [-2.0, 3.0])


def test_function_with_a_subgraph_reading_its_inputs_and_attributes():
    """If inside a function: the branches read the function's inputs (renamed at the call) and a
    Constant in a branch refers to the function's attribute."""
    then_const = helper.make_node("Constant", [], ["k"])
    then_const.attribute.append(ref_att("value_float", "gain", AttributeProto.FLOAT))
    then_g = helper.make_graph([then_const, helper.make_node("Mul", ["x", "k"], ["t"])], "then", [], [vi("t", F, [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, [2])])
    fn = function("Gate", ["c", "x"], ["y"],
                  [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], attributes=["gain"])
    m = model([helper.make_node("Gate", ["cond", "v"], ["out"], domain=LOCAL, gain=4.0)],
              [vi("cond", B, []), vi("v", F, [2])], [vi("out", F, [2])], [fn])
    v = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(run(m, {"cond": np.array(True), "v": v})[0], 4 * v)
    np.testing.assert_array_equal(run(m, {"cond": np.array(False), "v": v})[0], -v)
    for c in (True, False):
        np.testing.assert_array_equal(run(m, {"cond": np.array(c), "v": v})[0],
                                      run_ort(m, {"cond": np.array(c), "v": v})[0])


def test_graph_attribute_given_by_the_call_reads_the_callers_names():
    """A branch passed to a function through a reference reads the caller's ``x``, even though
    the function calls its own formal input ``x`` too (bound here to the caller's ``v``)."""
    iff = helper.make_node("If", ["c"], ["y"], else_branch=helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, [2])]))
    iff.attribute.append(ref_att("then_branch", "branch", AttributeProto.GRAPH))
    fn = function("Choose", ["c", "x"], ["y"], [iff], attributes=["branch"])
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "branch", [], [vi("t", F, [2])])
    m = model([helper.make_node("Choose", ["cond", "v"], ["out"], domain=LOCAL, branch=branch)],
              [vi("cond", B, []), vi("v", F, [2]), vi("x", F, [2])], [vi("out", F, [2])], [fn])
    feeds = {"v": np.array([1.0, 2.0], np.float32), "x": np.array([7.0, 8.0], np.float32)}
    np.testing.assert_array_equal(run(m, {**feeds, "cond": np.array(True)})[0], feeds["x"])
    np.testing.assert_array_equal(run(m, {**feeds, "cond": np.array(False)})[0], -feeds["v"])


def test_function_errors():
    m = model([helper.make_node("ScaledAdd", ["x", "y"], ["z"], domain=LOCAL, beta=1.0)],
              [vi("x", F, [1]), vi("y", F, [1])], [vi("z", F, [1])], [_scaled_add()])
    with pytest.raises(InvalidAttributeError, match=r"gives attribute 'beta' to function 'ScaledAdd'"):
        run(m, {})
    m = model([helper.make_node("ScaledAdd", ["x", "y", "x"], ["z"], domain=LOCAL)],
              [vi("x", F, [1]), vi("y", F, [1])], [vi("z", F, [1])], [_scaled_add()])
    with pytest.raises(GraphError, match="with 3 inputs; it takes at most 2"):
        run(m, {})
    loop = function("Ouroboros", ["x"], ["y"], [helper.make_node("Ouroboros", ["x"], ["y"], domain=LOCAL)])
    m = model([helper.make_node("Ouroboros", ["x"], ["y"], domain=LOCAL)], [vi("x", F, [1])], [vi("y", F, [1])], [loop])
    with pytest.raises(GraphError, match="nest deeper than 64 levels"):
        run(m, {})


def test_inline_call_prefixes_private_names():
    fn = _scaled_add()
    call = GraphNode(helper.make_node("ScaledAdd", ["p", "q"], ["r"], domain=LOCAL, name="call"), {"": 18})
    body = inline_call(call, fn, {"": 18})
    assert [n.op_type for n in body] == ["Constant", "Mul", "Add"]
    assert list(body[2].proto.input)[0] == "p" and list(body[2].proto.output) == ["r"]
    private = body[1].proto.output[0]
    assert private.startswith("_ScaledAdd_call_") and private.endswith("__ab")
    assert body[0].proto.attribute[0].f == 2.0 and body[0].origin == "call"


# --- schema function bodies for operators without a kernel -----------------------------------------------


def hide(monkeypatch, *ops: str) -> None:
    """Make the registry act as if onnxrt had no kernel for ``ops`` (the bodies must take over)."""
    original = registry.lookup

    def lookup(op_type, domain, opset):
        if op_type in ops and registry.normalize_domain(domain) == "":
            return None
        return original(op_type, domain, opset)

    monkeypatch.setattr(registry, "lookup", lookup)


def test_context_free_body_with_attribute_default(monkeypatch):
    """LeakyRelu's body refers to @alpha: omitted on the node, the schema default 0.01 applies."""
    x = np.array([-100.0, -1.0, 2.0], np.float32)
    m = model([helper.make_node("LeakyRelu", ["x"], ["y"]), helper.make_node("LeakyRelu", ["x"], ["z"], alpha=0.5)],
              [vi("x", F, [3])], [vi("y", F, [3]), vi("z", F, [3])], domains=())
    with_kernel = run(m, {"x": x})
    hide(monkeypatch, "LeakyRelu")
    sess = onnxrt.InferenceSession(m.SerializeToString())
    assert "LeakyRelu" not in [s.op_type for s in sess._engine.plan.steps]
    y, z = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, [-1.0, -0.01, 2.0], rtol=1e-6)
    np.testing.assert_allclose(z, [-50.0, -0.5, 2.0])
    for a, b in zip((y, z), with_kernel):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_context_dependent_body_inside_a_context_free_body(monkeypatch):
    """Softsign's body calls CastLike(One, input); with CastLike hidden too, its context-dependent
    body is built from the types of a value private to the inlined Softsign body."""
    hide(monkeypatch, "Softsign", "CastLike")
    x = np.array([-3.0, 0.0, 1.0], np.float64)
    m = model([helper.make_node("Softsign", ["x"], ["y"])], [vi("x", TensorProto.DOUBLE, [3])],
              [vi("y", TensorProto.DOUBLE, [3])], domains=())
    sess = onnxrt.InferenceSession(m.SerializeToString())
    ops = [s.op_type for s in sess._engine.plan.steps]  # Cast(One) may be folded into a constant
    assert "Softsign" not in ops and "CastLike" not in ops and "Div" in ops
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, x / (1 + np.abs(x)))


def test_context_dependent_body_typed_by_shape_inference(monkeypatch):
    """CastLike's target is an intermediate value with no value_info: shape inference types it."""
    hide(monkeypatch, "CastLike")
    nodes = [helper.make_node("Add", ["t", "t"], ["tt"]), helper.make_node("CastLike", ["x", "tt"], ["y"])]
    m = model(nodes, [vi("x", F, [2]), vi("t", TensorProto.DOUBLE, [1])], [vi("y", TensorProto.DOUBLE, [2])], domains=())
    (y,) = run(m, {"x": np.array([1.5, 2.5], np.float32), "t": np.zeros(1)})
    assert y.dtype == np.float64 and y.tolist() == [1.5, 2.5]


def test_sequence_map_runs_through_its_context_dependent_body(monkeypatch):
    """SequenceMap without its kernel: the body onnx builds (a Loop over the sequences) runs instead."""
    body = helper.make_graph(
        [helper.make_node("Add", ["a", "k"], ["s"]), helper.make_node("Shape", ["a"], ["n"])],
        "body", [vi("a", F, None), vi("k", F, [])], [vi("s", F, None), vi("n", I64, [1])],
    )
    seq = helper.make_tensor_sequence_value_info
    m = model([helper.make_node("SequenceMap", ["xs", "k"], ["out", "shapes"], body=body)],
              [seq("xs", F, None), vi("k", F, [])], [seq("out", F, None), seq("shapes", I64, None)], opset=17, domains=())
    feeds = {"xs": [np.arange(n, dtype=np.float32) for n in (2, 0, 3)], "k": np.array(10.0, np.float32)}
    with_kernel = run(m, feeds)
    hide(monkeypatch, "SequenceMap")
    sess = onnxrt.InferenceSession(m.SerializeToString())
    ops = {s.op_type for s in sess._engine.plan.steps}
    assert "SequenceMap" not in ops and "Loop" in ops
    got = sess.run(None, feeds)
    for g, w in zip(got, with_kernel):
        assert [a.tolist() for a in g] == [b.tolist() for b in w]
    assert [a.tolist() for a in got[0]] == [[10.0, 11.0], [], [10.0, 11.0, 12.0]]


def test_operator_without_kernel_nor_usable_body_is_reported(monkeypatch):
    hide(monkeypatch, "CastLike")
    # the target's type is unknown: neither declared nor inferable, so no body can be built
    m = model([helper.make_node("CastLike", ["x", "t"], ["y"], name="cl")],
              [vi("x", F, [2]), helper.make_empty_tensor_value_info("t")], [vi("y", F, None)], domains=())
    with pytest.raises(UnsupportedOperatorError, match=r"'cl' uses operator 'CastLike'"):
        run(m, {})


def test_value_types_declared_inferred_and_propagated():
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])], "g", [vi("x", TensorProto.DOUBLE, [2])], [vi("z", F, None)],
        [helper.make_tensor("w", I64, [3], [1, 2, 3])],
    )
    types = ValueTypes(graph, {"": 18})
    assert types.get("x").tensor_type.elem_type == TensorProto.DOUBLE
    assert types.get("w").tensor_type.elem_type == I64
    assert types.get("y").tensor_type.elem_type == TensorProto.DOUBLE  # by shape inference
    types.add_inlined([GraphNode(helper.make_node("Cast", ["y"], ["private"], to=TensorProto.FLOAT16), {"": 18})])
    assert types.get("private").tensor_type.elem_type == TensorProto.FLOAT16  # propagated
    assert types.get("nowhere") is None


def test_expand_keeps_nodes_without_functions():
    nodes = [GraphNode(helper.make_node("Relu", ["x"], ["y"]), {"": 18})]
    assert expand(nodes, {}, {"": 18}) == nodes
    assert function_key("ai.onnx", "Relu") == ("", "Relu", "")
