"""Tree ensembles refuse absurd target counts and malformed node tables with onnxrt's own
errors at load, before any table of leaves x targets is built; the scores' rows x targets
go through OpRun.check_alloc at the run."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import AllocationError, InvalidAttributeError, KernelError, OnnxRuntimeError

F = TensorProto.FLOAT
ML = "ai.onnx.ml"


def stump(**over):
    """One tree: x[feature] <= 0.5 ? leaf 1 (weight 1) : leaf 2 (weight 10), both for target 0."""
    atts = dict(
        nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[1, 0, 0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_values=[0.5, 0.0, 0.0], nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
        target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[1.0, 10.0], n_targets=1,
    )
    atts.update(over)
    return atts


def regressor(cap=None, **over):
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, name="trees", **stump(**over))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", F, [None, 2])], [helper.make_tensor_value_info("Y", F, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 3)])
    so = onnxrt.SessionOptions()
    if cap is not None:
        so.max_tensor_bytes = cap
    return onnxrt.InferenceSession(m.SerializeToString(), so)


def v5(n_targets, leaf_targetids=(0, 0)):
    node = helper.make_node(
        "TreeEnsemble", ["X"], ["Y"], domain=ML, name="trees", n_targets=n_targets, tree_roots=[0], nodes_featureids=[1],
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [1], [0]), nodes_splits=helper.make_tensor("s", F, [1], [0.5]),
        nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1], nodes_falseleafs=[1],
        leaf_targetids=list(leaf_targetids), leaf_weights=helper.make_tensor("w", F, [2], [1.0, 10.0]),
    )
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", F, [None, 2])], [helper.make_tensor_value_info("Y", F, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 5)])
    return onnxrt.InferenceSession(m.SerializeToString())


X = np.array([[0.0, 0.2], [0.0, 0.9]], np.float32)


def load_refused(build, error=OnnxRuntimeError):
    tracemalloc.start()
    try:
        with pytest.raises(error) as info:
            build()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return str(info.value), peak


def test_a_valid_stump_scores_each_row():
    (y,) = regressor().run(None, {"X": X})
    np.testing.assert_array_equal(y, np.array([[1.0], [10.0]], np.float32))
    assert y.dtype == np.float32 and y.shape == (2, 1)
    (y5,) = v5(1).run(None, {"X": X})
    np.testing.assert_array_equal(y5, np.array([[1.0], [10.0]], np.float32))


@pytest.mark.parametrize("build", [lambda: regressor(n_targets=10**12), lambda: regressor(n_targets=None, target_ids=[0, 10**12]),
                                   lambda: v5(10**12)], ids=["n_targets", "target_id", "v5"])
def test_an_absurd_target_count_is_refused_at_load_before_allocating(build):
    msg, peak = load_refused(build, AllocationError)
    assert "leaf table (leaves x n_targets) of shape [2, 1000000000" in msg, msg
    assert "the machine's physical memory" in msg
    assert peak < 20 * 2**20


def test_a_target_table_over_the_cap_is_refused_and_so_are_the_scores():
    msg, _ = load_refused(lambda: regressor(cap=2**20, n_targets=100_000), AllocationError)
    assert "of shape [2, 100000] and dtype float64 needs 1600000 bytes, above the limit of 1048576 bytes" in msg
    # 60,000 targets fit in the tables (2 leaves) but not in the scores of 3 rows
    sess = regressor(cap=2**20, n_targets=60_000)
    (y,) = sess.run(None, {"X": X[:1]})
    assert y.shape == (1, 60_000) and y[0, 0] == 1.0 and not y[0, 1:].any()
    with pytest.raises(AllocationError, match=r"Node 'trees'.*scores of shape \[3, 60000\]"):
        sess.run(None, {"X": np.zeros((3, 2), np.float32)})


@pytest.mark.parametrize("over, message", [
    (dict(target_ids=[0, 1]), "attribute 'target_ids' holds 1, out of range [0, 0]"),
    (dict(target_ids=[0, -1]), "attribute 'target_ids' holds -1, out of range [0, 0]"),
    (dict(n_targets=0), "the model has 0 targets, expected at least 1"),
    (dict(nodes_truenodeids=[7, 0, 0]), "a true branch refers to node 7 of tree 0, which does not exist"),
    (dict(nodes_falsenodeids=[-2, 0, 0]), "attribute 'nodes_falsenodeids' holds the negative id -2"),
    (dict(nodes_featureids=[-1, 0, 0]), "a node has a negative feature id"),
    (dict(target_nodeids=[1, 0]), "a vote is attached to node 0 of tree 0, which is not a leaf"),
], ids=["target_id", "negative_target", "no_target", "missing_child", "negative_child", "negative_feature", "vote_on_branch"])
def test_malformed_trees_are_refused_at_load(over, message):
    with pytest.raises(InvalidAttributeError) as info:
        regressor(**over)
    assert message in str(info.value), str(info.value)
    assert "trees" in str(info.value)


def test_v5_leaf_target_beyond_n_targets_is_refused():
    with pytest.raises(InvalidAttributeError, match=r"attribute 'leaf_targetids' holds 3, out of range \[0, 1\]"):
        v5(2, leaf_targetids=(0, 3))


def test_a_feature_id_beyond_the_input_is_refused_at_the_run():
    sess = regressor(nodes_featureids=[5, 0, 0])
    with pytest.raises(KernelError, match="Node 'trees'") as info:
        sess.run(None, {"X": X})
    assert "5" in str(info.value) or "6" in str(info.value)
