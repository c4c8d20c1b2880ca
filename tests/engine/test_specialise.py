"""Shape specialisation (onnxrt.specialise): the steps one signature of the feeds' shapes fixes run once, on that signature's second run."""

from __future__ import annotations

import threading

import numpy as np
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxrt


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(extra_nodes=(), extra_outputs=()):
    """y = Reshape(x * mask, [batch, -1]) + count, the shapes' arithmetic as exporters write it:
    batch = Gather(Shape(x), 0), a causal-style mask from Range(Gather(Shape(x), 1)), count
    = Cast(Size(x))."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "zero"], ["n"], axis=0),
        helper.make_node("Gather", ["shp", "one"], ["c"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Range", ["zero_s", "c", "one_s"], ["r"]),
        helper.make_node("Cast", ["r"], ["rf"], to=T.FLOAT),
        helper.make_node("Unsqueeze", ["rf", "axes1"], ["rfu"]),
        helper.make_node("Mul", ["rfu", "half"], ["mask"]),
        helper.make_node("Mul", ["x", "mask"], ["xm"]),
        helper.make_node("Reshape", ["xm", "target"], ["resh"]),
        helper.make_node("Size", ["x"], ["sz"]),
        helper.make_node("Cast", ["sz"], ["szf"], to=T.FLOAT),
        helper.make_node("Sqrt", ["szf"], ["sq"]),
        helper.make_node("Add", ["resh", "sq"], ["y"]),
        *extra_nodes,
    ]
    inits = [_i64("zero", 0), _i64("one", 1), _i64("axes0", [0]), _i64("axes1", [1]), _i64("minus1", [-1]), _i64("zero_s", 0),
             _i64("one_s", 1), numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [None, None, 3])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)]
                          + [helper.make_tensor_value_info(o, T.INT64, None) for o in extra_outputs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _expected(x):
    n, c, _ = x.shape
    mask = (np.arange(c, dtype=np.float32) * np.float32(0.5))[:, None]
    return (x * mask).reshape(n, -1) + np.sqrt(np.float32(x.size))


def test_a_signature_run_twice_gets_a_table_without_its_shape_arithmetic():
    sess = onnxrt.OnnxInference(_model())
    spec = sess.plan._specialiser
    assert len(spec.fixed) >= 8 and spec.frontier
    rng = np.random.default_rng(0)
    for shape in [(2, 5, 3), (2, 5, 3), (2, 5, 3), (4, 7, 3), (4, 7, 3), (2, 5, 3), (1, 1, 3)]:
        x = rng.standard_normal(shape).astype(np.float32)
        y = sess.run({"x": x})["y"]
        assert y.dtype == np.float32 and y.shape == (shape[0], shape[1] * 3)
        np.testing.assert_array_equal(y, _expected(x))
    tables = {sig[0][1]: entry for sig, entry in spec._tables.items()}
    assert set(tables) == {(2, 5, 3), (4, 7, 3)}  # (1, 1, 3) ran once: no table
    template, table = tables[(2, 5, 3)]
    assert len(table) == len(sess.plan.steps) - len(spec.fixed) < len(sess.plan.steps)
    kept = [template[s] for s in spec.frontier]
    assert all(isinstance(v, np.ndarray) and not v.flags.writeable for v in kept)


def test_values_that_depend_on_data_are_not_fixed():
    # NonZero's count depends on x's values: its Shape is not a function of x's shape
    extra = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Shape", ["nz"], ["nzs"]),
             helper.make_node("Gather", ["nzs", "one"], ["count"], axis=0)]
    sess = onnxrt.OnnxInference(_model(extra, ["count", "shp"]))
    x = np.ones((2, 4, 3), np.float32)
    for k in range(5):
        x[0, 0, k % 3] = 0.0
        out = sess.run({"x": x})
        assert int(out["count"]) == np.count_nonzero(x) and out["count"].dtype == np.int64
        # a graph output computed from shapes stays a step: a fresh array the caller owns
        np.testing.assert_array_equal(out["shp"], [2, 4, 3])
        out["shp"][0] = 99
        np.testing.assert_array_equal(out["y"], _expected(x))


def test_random_values_are_drawn_on_every_run():
    extra = [helper.make_node("Shape", ["x"], ["s2"]), helper.make_node("ConstantOfShape", ["s2"], ["z"]),
             helper.make_node("RandomUniformLike", ["z"], ["u"], dtype=T.FLOAT)]
    model = _model(extra)
    model.graph.output.append(helper.make_tensor_value_info("u", T.FLOAT, None))
    sess = onnxrt.OnnxInference(model)
    x = np.ones((2, 3, 3), np.float32)
    draws = [sess.run({"x": x})["u"] for _ in range(4)]
    assert all(d.shape == (2, 3, 3) and d.dtype == np.float32 for d in draws)
    assert not np.array_equal(draws[2], draws[3])


def test_signatures_from_several_threads():
    sess = onnxrt.OnnxInference(_model())
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(30):
                shape = [(2, 5, 3), (3, 6, 3), (1, 9, 3)][int(rng.integers(3))]
                x = rng.standard_normal(shape).astype(np.float32)
                np.testing.assert_array_equal(sess.run({"x": x})["y"], _expected(x))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_unoptimised_sessions_do_not_specialise():
    so = onnxrt.SessionOptions()
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = onnxrt.OnnxInference(_model(), options=so)
    x = np.ones((2, 5, 3), np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(sess.run({"x": x})["y"], _expected(x))
    assert sess.plan._specialiser is None


def test_the_table_is_built_from_the_frontier_only():
    from onnxrt.plan import Hooks

    sess = onnxrt.OnnxInference(_model())
    spec = sess.plan._specialiser
    x = np.ones((2, 5, 3), np.float32)
    sess.run({"x": x})
    cap = spec.capture()
    values = sess.plan.new_values({"x": x})
    sess.plan.execute(values, Hooks(after=cap.after))
    # the run released its values as usual; only the frontier's were copied
    assert set(cap.values) == set(spec.frontier)
    assert all(values[s] is None for s in spec.frontier if s not in sess.plan.output_slots)
