"""The plan's construction stages, its public API and its one run loop with hooks."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxrt import OnnxInference
from onnxrt.errors import InvalidTypeError, KernelError
from onnxrt.ops_cpu._op import OpRun
from onnxrt.plan import Hooks, Plan, Step

STAGES = ["repair", "load_constants", "expand", "optimise", "bind", "allocate", "liveness", "type_checks", "tables"]
W = np.array([0.5, -2.0, 3.0], dtype=np.float32)


def _graph():
    """T1 = X + W, T2 = T1 * Y, Z = Relu(T2); outputs Z and T1."""
    f = TensorProto.FLOAT
    return helper.make_graph(
        [
            helper.make_node("Add", ["X", "W"], ["T1"], name="add"),
            helper.make_node("Mul", ["T1", "Y"], ["T2"], name="mul"),
            helper.make_node("Relu", ["T2"], ["Z"], name="relu"),
        ],
        "g",
        [helper.make_tensor_value_info("X", f, [3]), helper.make_tensor_value_info("Y", f, [3])],
        [helper.make_tensor_value_info("Z", f, [3]), helper.make_tensor_value_info("T1", f, [3])],
        [numpy_helper.from_array(W, "W")],
    )


def _feeds():
    return {"X": np.array([1.0, 2.0, -3.0], np.float32), "Y": np.array([2.0, -1.0, 4.0], np.float32)}


def _expected(feeds):
    t1 = feeds["X"] + W
    t2 = t1 * feeds["Y"]
    return t1, t2, np.maximum(t2, 0)


def test_stages_run_in_order_and_each_leaves_what_the_next_needs():
    plan = Plan(_graph(), {"": 17}, optimize=False)
    assert [r.name for r in plan.stage_log] == STAGES
    assert all(r.seconds >= 0 for r in plan.stage_log)
    log = {r.name: r.summary for r in plan.stage_log}
    assert log["expand"] == "3 nodes" and log["bind"] == "3 kernels" and log["allocate"] == "8 slots"
    # load_constants: the initializer, frozen
    assert list(plan.initializers) == ["W"] and not plan.initializers["W"].flags.writeable
    assert plan.required_inputs == ["X", "Y"]
    # bind + allocate: one step per node, in order, kernels bound to slots (0 and 1 reserved)
    assert plan.slots == {"X": 2, "Y": 3, "W": 4, "T1": 5, "T2": 6, "Z": 7}
    assert plan.n_slots == 8
    assert plan.input_slots == (2, 3) and plan.output_slots == (7, 5) and plan.outer_slots == ()
    assert [(st.name, st.op_type) for st in plan.steps] == [("add", "Add"), ("mul", "Mul"), ("relu", "Relu")]
    assert all(isinstance(st, Step) and isinstance(st.kernel, OpRun) and st.kernel is st.op for st in plan.steps)
    assert [(st.inputs, st.outputs) for st in plan.steps] == [((2, 4), (5,)), ((5, 3), (6,)), ((6,), (7,))]
    assert [(st.input_names, st.output_names) for st in plan.steps] == [
        (["X", "W"], ["T1"]), (["T1", "Y"], ["T2"]), (["T2"], ["Z"])
    ]
    # liveness: X after Add, Y after Mul, T2 after Relu; W (initializer), T1 and Z (outputs) stay
    assert [st.frees for st in plan.steps] == [(2,), (3,), (6,)]
    # the template holds the initializer only; new_values binds the feeds
    feeds = _feeds()
    values = plan.new_values(feeds)
    assert len(values) == 8 and values[4] is plan.initializers["W"]
    assert values[2] is feeds["X"] and values[3] is feeds["Y"]
    assert all(values[s] is None for s in (0, 1, 5, 6, 7))


def test_execute_releases_dead_values_and_returns_the_outputs():
    plan = Plan(_graph(), {"": 17}, optimize=False)
    t1, _, z = _expected(_feeds())
    for _ in range(2):  # the first run checks types, the second runs the plain table
        values = plan.new_values(_feeds())
        plan.execute(values)
        out = plan.outputs(values)
        np.testing.assert_array_equal(out[0], z)
        np.testing.assert_array_equal(out[1], t1)
        assert out[0].dtype == np.float32 and out[0].shape == (3,)
        assert values[2] is None and values[3] is None and values[6] is None  # released
    assert plan.run_list(list(_feeds().values()))[0].tolist() == z.tolist()


def test_hooks_see_every_node_in_order_with_its_values():
    plan = Plan(_graph(), {"": 17}, optimize=False)
    feeds = _feeds()
    t1, t2, z = _expected(feeds)
    events = []

    def before(st, args):
        events.append(("before", st.name, [(a.shape, a.dtype, a.tolist()) for a in args]))

    def after(st, args, res, dt):
        assert dt >= 0
        events.append(("after", st.name, [(r.shape, r.dtype, r.tolist()) for r in res]))

    for run in range(2):  # the first run (type checks) and a later one see the same
        events.clear()
        values = plan.new_values(feeds)
        plan.execute(values, Hooks(before=before, after=after))
        f32 = np.dtype(np.float32)
        assert events == [
            ("before", "add", [((3,), f32, feeds["X"].tolist()), ((3,), f32, W.tolist())]),
            ("after", "add", [((3,), f32, t1.tolist())]),
            ("before", "mul", [((3,), f32, t1.tolist()), ((3,), f32, feeds["Y"].tolist())]),
            ("after", "mul", [((3,), f32, t2.tolist())]),
            ("before", "relu", [((3,), f32, t2.tolist())]),
            ("after", "relu", [((3,), f32, z.tolist())]),
        ], run
        assert values[6] is None  # without keep, values are released as usual


def test_keep_hook_keeps_every_value_and_gives_the_plain_outputs():
    plan = Plan(_graph(), {"": 17}, optimize=False)
    feeds = _feeds()
    t1, t2, z = _expected(feeds)
    plain = plan.new_values(feeds)
    plan.execute(plain)
    kept = plan.new_values(feeds)
    plan.execute(kept, Hooks(keep=True))
    for a, b in zip(plan.outputs(plain), plan.outputs(kept)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(kept[plan.slots["T2"]], t2)
    assert kept[plan.slots["X"]] is feeds["X"] and kept[plan.slots["Y"]] is feeds["Y"]
    assert plan.run_dict(feeds, keep_all=True)[plan.slots["T2"]].tolist() == t2.tolist()


def test_intermediate_run_gives_the_same_outputs_as_a_plain_run():
    model = helper.make_model(_graph(), opset_imports=[helper.make_opsetid("", 17)])
    oinf = OnnxInference(model)
    feeds = _feeds()
    t1, t2, z = _expected(feeds)
    plain = oinf.run(feeds)
    inter = oinf.run(feeds, intermediate=True)
    assert set(inter) == {"X", "Y", "W", "T1", "T2", "Z"}
    for name in ("Z", "T1"):
        np.testing.assert_array_equal(inter[name], plain[name])
        assert inter[name].dtype == plain[name].dtype == np.float32
    np.testing.assert_array_equal(inter["T2"], t2)
    np.testing.assert_array_equal(plain["Z"], z)
    times = oinf.run(feeds, node_time=True)[1]
    # the optimised plan's nodes: Mul and Relu are one element-wise chain (T1, an output, is not fused through)
    assert [(t["name"], t["op_type"]) for t in times] == [("add", "Add"), ("relu", "FusedElementwise")]


def test_check_types_hook_checks_a_plan_whose_feeds_are_checked_by_the_caller():
    plan = Plan(_graph(), {"": 17}, optimize=False, checked_feeds=True)
    plan.execute(plan.new_values(_feeds()))  # the first run checks every node
    bad = {"X": np.array([1, 2, 3], np.int64), "Y": _feeds()["Y"]}
    values = plan.new_values(bad)
    plan.execute(values)  # the caller promised checked feeds: no check, numpy promotes
    assert plan.outputs(values)[1].dtype == np.float64
    with pytest.raises(InvalidTypeError, match="'add'"):
        plan.execute(plan.new_values(bad), Hooks(check_types=True))


def test_a_kernel_failure_is_wrapped_and_a_hook_failure_passes_through():
    plan = Plan(_graph(), {"": 17}, optimize=False)
    plan.execute(plan.new_values(_feeds()))
    with pytest.raises(KernelError, match=r"Node 'add' \(Add\) failed on inputs \[X: .*W: "):
        plan.execute(plan.new_values({"X": np.ones(4, np.float32), "Y": _feeds()["Y"]}))

    class Stop(Exception):
        pass

    def after(st, args, res, dt):
        if st.name == "mul":
            raise Stop("hook says stop")

    with pytest.raises(Stop, match="^hook says stop$"):
        plan.execute(plan.new_values(_feeds()), Hooks(after=after))


def _loop_model(trips):
    """A Loop of ``trips`` iterations: acc = acc * 2 + 1, scan output acc."""
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    two = numpy_helper.from_array(np.array([2.0], np.float32), "two")
    one = numpy_helper.from_array(np.array([1.0], np.float32), "one")
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["acc_in", "two"], ["t"], name="b_mul"),
            helper.make_node("Add", ["t", "one"], ["acc_out"], name="b_add"),
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond"),
            helper.make_node("Identity", ["acc_out"], ["scan_out"], name="b_scan"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", i64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", f, [1]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", f, [1]),
            helper.make_tensor_value_info("scan_out", f, [1]),
        ],
        [two, one],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "A"], ["R", "S"], name="loop", body=body)],
        "main",
        [helper.make_tensor_value_info("A", f, [1])],
        [helper.make_tensor_value_info("R", f, [1]), helper.make_tensor_value_info("S", f, [None, 1])],
        [numpy_helper.from_array(np.array(trips, np.int64), "M")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_loop_body_runs_through_the_plans_loop(monkeypatch):
    oinf = OnnxInference(_loop_model(4), options=None)
    feeds = {"A": np.array([1.0], np.float32)}
    oinf.run(feeds)  # first run: the body's types are checked through execute
    calls = []
    original = Plan._loop

    def counting(self, table, values):
        calls.append((self.name, [self.steps[row[0]].name for row in table]))
        return original(self, table, values)

    monkeypatch.setattr(Plan, "_loop", counting)
    out = oinf.run(feeds)
    acc, seq = 1.0, []
    for _ in range(4):
        acc = acc * 2 + 1
        seq.append([acc])
    np.testing.assert_array_equal(out["R"], np.array([acc], np.float32))
    np.testing.assert_array_equal(out["S"], np.array(seq, np.float32))
    assert out["S"].dtype == np.float32 and out["S"].shape == (4, 1)
    assert calls[0] == ("main", ["loop"])
    # every iteration of the body: the same loop, on the runner's table (b_cond and b_scan,
    # Identity nodes whose output only leaves the graph, are fetched from their input instead)
    assert calls[1:] == [("body", ["b_mul", "b_add"])] * 4
