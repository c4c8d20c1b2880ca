"""TreeEnsemble (ml 5), TreeEnsembleRegressor and TreeEnsembleClassifier (ml 1, 3, 5).

Three oracles: plain loops written from the spec text (one row, one tree, one node at a
time), onnxruntime on the configurations where the spec and onnxruntime agree, and the
spec examples. Where onnxruntime departs from the spec the tests assert the difference.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxrt.errors import InvalidAttributeError, KernelError
from onnxrt.fastpaths import ml as fastml
from onnxrt.ops_ml import _tree_core

from ._random_trees import random_trees, random_v5, v1_attributes
from .test_transforms import loop_softmax_zero
from ._util import ml_model, run_onnxrt, run_ort

RNG = np.random.default_rng(11)
MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
GRID = [-1.0, 0.0, 1.0, 2.0]


def _tensor_values(t):
    from onnx import numpy_helper

    return numpy_helper.to_array(t).reshape(-1)


# ------------------------------------------------------------------------------------------
# plain-loop oracles, straight from the spec text
# ------------------------------------------------------------------------------------------


def _condition(mode: str, x: float, t: float, members=None) -> bool:
    return {
        "BRANCH_LEQ": lambda: x <= t,
        "BRANCH_LT": lambda: x < t,
        "BRANCH_GTE": lambda: x >= t,
        "BRANCH_GT": lambda: x > t,
        "BRANCH_EQ": lambda: x == t,
        "BRANCH_NEQ": lambda: x != t,
        "BRANCH_MEMBER": lambda: x in members,
    }[mode]()


_TRANSFORM = {
    "NONE": lambda s: s,
    "LOGISTIC": lambda s: 1 / (1 + np.exp(-s)),
    "SOFTMAX": lambda s: np.exp(s - s.max(axis=1, keepdims=True)) / np.exp(s - s.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True),
    "SOFTMAX_ZERO": lambda s: np.array([loop_softmax_zero(list(r)) for r in s]).reshape(s.shape),
}


def _aggregate(votes: list[list[float]], agg: str, n_trees: int) -> list[float]:
    out = []
    for v in votes:
        if not v:
            out.append(0.0)
        elif agg == "SUM":
            out.append(sum(v))
        elif agg == "AVERAGE":
            out.append(sum(v) / n_trees)
        elif agg == "MIN":
            out.append(min(v))
        else:
            out.append(max(v))
    return out


def loop_v5(atts: dict, x: np.ndarray) -> np.ndarray:
    """TreeEnsemble, one row and one node at a time."""
    modes = _tensor_values(atts["nodes_modes"]).tolist()
    splits = _tensor_values(atts["nodes_splits"]).astype(np.float64).tolist()
    weights = _tensor_values(atts["leaf_weights"]).astype(np.float64).tolist()
    mtt = atts.get("nodes_missing_value_tracks_true") or [0] * len(modes)
    sets, current = [], []
    if "membership_values" in atts:
        for v in _tensor_values(atts["membership_values"]).tolist():
            if math.isnan(v):
                sets.append(current)
                current = []
            else:
                current.append(v)
    members = {}
    k = 0
    for i, m in enumerate(modes):
        if m == 6:
            members[i] = sets[k]
            k += 1
    names = MODES + ["BRANCH_MEMBER"]
    agg = ["AVERAGE", "SUM", "MIN", "MAX"][atts["aggregate_function"]]
    out = np.zeros((x.shape[0], atts["n_targets"]))
    for r, row in enumerate(x.astype(np.float64).tolist()):
        votes = [[] for _ in range(atts["n_targets"])]
        for root in atts["tree_roots"]:
            node, is_leaf = root, False
            while not is_leaf:
                v = row[atts["nodes_featureids"][node]]
                if math.isnan(v):
                    go = bool(mtt[node])
                else:
                    go = _condition(names[modes[node]], v, splits[node], members.get(node))
                if go:
                    node, is_leaf = atts["nodes_truenodeids"][node], bool(atts["nodes_trueleafs"][node])
                else:
                    node, is_leaf = atts["nodes_falsenodeids"][node], bool(atts["nodes_falseleafs"][node])
            votes[atts["leaf_targetids"][node]].append(weights[node])
        out[r] = _aggregate(votes, agg, len(atts["tree_roots"]))
    post = ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"][atts["post_transform"]]
    return _TRANSFORM[post](out)


def loop_v1_regressor(atts: dict, x: np.ndarray, n_targets: int) -> np.ndarray:
    """TreeEnsembleRegressor, one row and one node at a time."""
    nodes = {}
    for i, (t, n) in enumerate(zip(atts["nodes_treeids"], atts["nodes_nodeids"])):
        nodes[(t, n)] = i
    values = atts["nodes_values"] if "nodes_values" in atts else _tensor_values(atts["nodes_values_as_tensor"]).tolist()
    weights = atts["target_weights"] if "target_weights" in atts else _tensor_values(atts["target_weights_as_tensor"]).tolist()
    leaf_votes: dict[int, list] = {}
    for t, n, k, w in zip(atts["target_treeids"], atts["target_nodeids"], atts["target_ids"], weights):
        leaf_votes.setdefault(nodes[(t, n)], []).append((k, w))
    trees = sorted(set(atts["nodes_treeids"]))
    agg = atts.get("aggregate_function", "SUM")
    out = np.zeros((x.shape[0], n_targets))
    for r, row in enumerate(x.astype(np.float64).tolist()):
        votes = [[] for _ in range(n_targets)]
        for tree in trees:
            i = nodes[(tree, 0)]
            while atts["nodes_modes"][i] != "LEAF":
                v = row[atts["nodes_featureids"][i]]
                if math.isnan(v):
                    go = bool(atts["nodes_missing_value_tracks_true"][i])
                else:
                    go = _condition(atts["nodes_modes"][i], v, float(np.float32(values[i])) if "nodes_values" in atts else values[i])
                i = nodes[(tree, atts["nodes_truenodeids"][i] if go else atts["nodes_falsenodeids"][i])]
            per_target: dict[int, list] = {}
            for k, w in leaf_votes.get(i, []):
                per_target.setdefault(k, []).append(w)
            for k, ws in per_target.items():
                if agg in ("SUM", "AVERAGE"):
                    votes[k].append(sum(ws))
                else:
                    votes[k].extend(ws)
        out[r] = _aggregate(votes, agg, len(trees))
    base = atts.get("base_values")
    if base:
        out += base
    return _TRANSFORM[atts.get("post_transform", "NONE")](out)


# ------------------------------------------------------------------------------------------
# TreeEnsemble (ml 5)
# ------------------------------------------------------------------------------------------


def _v5_model(atts, x):
    return ml_model("TreeEnsemble", [("X", x)], ml_opset=5, opset=21, **atts)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_ensemble_v5_matches_loops(seed, dtype):
    rng = np.random.default_rng(seed)
    for _ in range(8):
        atts = random_v5(
            rng, int(rng.integers(1, 5)), int(rng.integers(1, 5)), 3, int(rng.integers(1, 4)),
            modes=list(range(7)), missing=True, grid=[-1.0, 0.0, 0.5, 1.0, 2.0], dtype=dtype,
            aggregate=int(rng.integers(0, 4)), post=int(rng.choice([0, 1, 2, 3])),
        )
        x = rng.choice(np.array([-1.0, 0.0, 0.5, 0.75, 1.0, 2.0, np.nan]), size=(25, 3)).astype(dtype)
        (y,) = run_onnxrt(_v5_model(atts, x), {"X": x})
        assert y.dtype == dtype and y.shape == (25, atts["n_targets"])
        np.testing.assert_allclose(y, loop_v5(atts, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_tree_ensemble_v5_matches_onnxruntime(seed):
    # where onnxruntime follows the spec: no NaN under BRANCH_NEQ, integral values for
    # BRANCH_MEMBER (onnxruntime truncates inputs for its member sets), post_transform 0 or 3
    rng = np.random.default_rng(100 + seed)
    for _ in range(10):
        dtype = rng.choice([np.float32, np.float64])
        atts = random_v5(
            rng, int(rng.integers(1, 5)), int(rng.integers(1, 5)), 3, int(rng.integers(2, 4)),
            modes=[0, 1, 2, 3, 4, 6], missing=True, grid=GRID, dtype=dtype,
            aggregate=int(rng.integers(0, 4)), post=int(rng.choice([0, 3])),
        )
        x = rng.choice(np.array([-1.0, 0.0, 1.0, 2.0, 3.0, np.nan]), size=(30, 3)).astype(dtype)
        model = _v5_model(atts, x)
        ours, theirs = run_onnxrt(model, {"X": x})[0], run_ort(model, {"X": x})[0]
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_tree_ensemble_v5_float16():
    atts = random_v5(RNG, 3, 3, 2, 2, modes=[0, 1, 4], grid=GRID, dtype=np.float16)
    x = RNG.choice(np.array([-1.0, 0.0, 1.0, 2.0]), size=(10, 2)).astype(np.float16)
    (y,) = run_onnxrt(_v5_model(atts, x), {"X": x})
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float64), loop_v5(atts, x), rtol=2e-3, atol=2e-3)


def test_tree_ensemble_v5_onnxruntime_departures():
    """Three places where onnxruntime 1.32 departs from the spec; onnxrt follows the spec."""
    leafs = dict(nodes_featureids=[0], nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1], nodes_falseleafs=[1],
                 leaf_targetids=[0, 1], leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, (2,), [0.25, 0.5]), tree_roots=[0], n_targets=2)
    x = np.array([[-1.0], [1.0], [np.nan]], np.float32)

    def atts(mode, split=0.0, post=0, members=None, **extra):
        a = dict(leafs, aggregate_function=1, post_transform=post,
                 nodes_modes=helper.make_tensor("m", TensorProto.UINT8, (1,), [mode]),
                 nodes_splits=helper.make_tensor("s", TensorProto.FLOAT, (1,), [split]), **extra)
        if members is not None:
            a["membership_values"] = helper.make_tensor("mv", TensorProto.FLOAT, (len(members),), members)
        return a

    # 1. post_transform 1 is SOFTMAX and 2 LOGISTIC in the spec; onnxruntime swaps them
    for post, name in ((1, "SOFTMAX"), (2, "LOGISTIC")):
        model = _v5_model(atts(0, post=post), x[:2])
        raw = np.array([[0.25, 0.0], [0.0, 0.5]])
        ours, theirs = run_onnxrt(model, {"X": x[:2]})[0], run_ort(model, {"X": x[:2]})[0]
        np.testing.assert_allclose(ours, _TRANSFORM[name](raw), rtol=1e-6)
        other = "LOGISTIC" if name == "SOFTMAX" else "SOFTMAX"
        np.testing.assert_allclose(theirs, _TRANSFORM[other](raw), rtol=1e-6)
    # 2. NaN takes the branch nodes_missing_value_tracks_true names, BRANCH_NEQ too (onnxruntime: NaN != t holds)
    model = _v5_model(atts(5, nodes_missing_value_tracks_true=[0]), x)
    assert run_onnxrt(model, {"X": x})[0][2].tolist() == [0.0, 0.5]
    assert run_ort(model, {"X": x})[0][2].tolist() == [0.25, 0.0]
    # 3. membership is exact; onnxruntime truncates the input when the set is integral
    xm = np.array([[0.5]], np.float32)
    model = _v5_model(atts(6, members=[1.0, -1.0, 0.0]), xm)
    assert run_onnxrt(model, {"X": xm})[0].tolist() == [[0.0, 0.5]]
    assert run_ort(model, {"X": xm})[0].tolist() == [[0.25, 0.0]]


def test_tree_ensemble_v5_single_leaf_tree_and_shared_leaves():
    # a tree that is a leaf: one node whose two branches reach the same leaf
    atts = dict(n_targets=1, aggregate_function=1, post_transform=0, tree_roots=[0, 1],
                nodes_modes=helper.make_tensor("m", TensorProto.UINT8, (2,), [0, 3]), nodes_featureids=[0, 1],
                nodes_splits=helper.make_tensor("s", TensorProto.DOUBLE, (2,), [0.0, 0.0]),
                nodes_truenodeids=[0, 1], nodes_trueleafs=[1, 1], nodes_falsenodeids=[0, 1], nodes_falseleafs=[1, 1],
                leaf_targetids=[0, 0], leaf_weights=helper.make_tensor("w", TensorProto.DOUBLE, (2,), [1.5, 10.0]))
    x = RNG.standard_normal((4, 2))
    (y,) = run_onnxrt(_v5_model(atts, x), {"X": x})
    assert y.tolist() == [[11.5]] * 4


def test_tree_ensemble_v5_errors():
    base = random_v5(np.random.default_rng(0), 1, 2, 2, 1, grid=GRID)
    x = np.zeros((1, 2), np.float32)
    bad_root = dict(base, tree_roots=[5])
    with pytest.raises(InvalidAttributeError, match="'tree_roots' holds 5"):
        run_onnxrt(_v5_model(bad_root, x), {"X": x})
    bad_target = dict(base, leaf_targetids=[3] * len(base["leaf_targetids"]))
    with pytest.raises(InvalidAttributeError, match="'leaf_targetids' holds 3, out of range"):
        run_onnxrt(_v5_model(bad_target, x), {"X": x})
    with pytest.raises(InvalidAttributeError, match="'aggregate_function' is 7"):
        run_onnxrt(_v5_model(dict(base, aggregate_function=7), x), {"X": x})
    with pytest.raises(InvalidAttributeError, match="'post_transform' is 9"):
        run_onnxrt(_v5_model(dict(base, post_transform=9), x), {"X": x})
    n = len(base["nodes_featureids"])
    cyc = dict(base, nodes_truenodeids=[0] * n, nodes_trueleafs=[0] * n)
    with pytest.raises(InvalidAttributeError, match="cycle"):
        run_onnxrt(_v5_model(cyc, x), {"X": x})
    member = dict(base, nodes_modes=helper.make_tensor("m", TensorProto.UINT8, (n,), [6] * n))
    with pytest.raises(InvalidAttributeError, match="BRANCH_MEMBER nodes but no attribute 'membership_values'"):
        run_onnxrt(_v5_model(member, x), {"X": x})
    with pytest.raises(KernelError, match="reads feature 1 but the input has 1 features"):
        far = dict(base, nodes_featureids=[1] * n)
        run_onnxrt(_v5_model(far, x[:, :1]), {"X": x[:, :1]})


# ------------------------------------------------------------------------------------------
# TreeEnsembleRegressor (ml 1, 3)
# ------------------------------------------------------------------------------------------


def _regressor(rng, n_targets, modes, missing, as_tensor=False, extra_votes=True):
    nodes, leaves = random_trees(rng, int(rng.integers(1, 5)), int(rng.integers(1, 5)), 3, modes=modes, missing=missing, grid=GRID)
    votes = []
    for t, n in leaves:  # every leaf votes for every target: the case the spec and onnxruntime agree on
        for k in range(n_targets):
            votes.append((t, n, k, float(np.float32(rng.standard_normal()))))
        if extra_votes and n_targets > 1 and rng.random() < 0.3:
            votes.append((t, n, int(rng.integers(0, n_targets)), float(np.float32(rng.standard_normal()))))
    return v1_attributes(nodes, "target", votes, as_tensor=as_tensor)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_tree_ensemble_regressor_matches_onnxruntime_and_loops(seed, agg):
    rng = np.random.default_rng(seed)
    for _ in range(6):
        nt = int(rng.integers(1, 4))
        atts = _regressor(rng, nt, modes=MODES[:5], missing=True)
        posts = ["NONE"] if nt == 1 else ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"]
        atts.update(n_targets=nt, aggregate_function=agg, post_transform=str(rng.choice(posts)))
        if rng.random() < 0.6:
            atts["base_values"] = [float(np.float32(v)) for v in rng.standard_normal(nt)]
        x = rng.choice(np.array([-1.0, 0.0, 0.5, 1.0, 2.0, np.nan]), size=(25, 3)).astype(np.float32)
        model = ml_model("TreeEnsembleRegressor", [("X", x)], ml_opset=1, **atts)
        ours, theirs = run_onnxrt(model, {"X": x})[0], run_ort(model, {"X": x})[0]
        assert ours.dtype == np.float32 and ours.shape == (25, nt)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ours, loop_v1_regressor(atts, x, nt), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32])
def test_tree_ensemble_regressor_v3_double_attributes(dtype):
    rng = np.random.default_rng(5)
    atts = _regressor(rng, 2, modes=MODES, missing=False, as_tensor=True)
    atts.update(n_targets=2, base_values_as_tensor=helper.make_tensor("b", TensorProto.DOUBLE, [2], [0.5, -0.25]))
    x = rng.choice(np.array([-1.0, 0.0, 0.5, 1.0, 2.0]), size=(20, 3)).astype(dtype)
    model = ml_model("TreeEnsembleRegressor", [("X", x)], ml_opset=3, **atts)
    (ours,) = run_onnxrt(model, {"X": x})
    assert ours.dtype == np.float32
    expected = loop_v1_regressor({**atts, "base_values": [0.5, -0.25]}, x, 2)
    np.testing.assert_allclose(ours, expected, rtol=1e-6, atol=1e-6)
    if dtype == np.float64:  # onnxruntime reads double attributes for double inputs only
        np.testing.assert_allclose(ours, run_ort(model, {"X": x})[0], rtol=1e-5, atol=1e-6)


def test_tree_ensemble_regressor_onnxruntime_departures():
    """onnxruntime 1.32 departs from the spec in four ways; onnxrt follows the spec."""
    nodes = dict(treeids=[0, 0, 0], nodeids=[0, 1, 2], featureids=[0, 0, 0], modes=["BRANCH_LEQ", "LEAF", "LEAF"],
                 values=[0.0, 0, 0], truenodeids=[1, 0, 0], falsenodeids=[2, 0, 0], missing=[0, 0, 0])
    x = np.array([[-1.0], [1.0]], np.float32)

    def both(votes, **kw):
        atts = v1_attributes(nodes, "target", votes)
        atts.update(kw)
        model = ml_model("TreeEnsembleRegressor", [("X", x)], ml_opset=1, **atts)
        return run_onnxrt(model, {"X": x})[0].tolist(), run_ort(model, {"X": x})[0].tolist()

    # 1. two votes of one leaf for the same target add up (onnxruntime keeps the first with one target)
    ours, theirs = both([(0, 1, 0, 1.0), (0, 1, 0, 2.0), (0, 2, 0, 5.0)], n_targets=1)
    assert ours == [[3.0], [5.0]] and theirs == [[1.0], [5.0]]
    # 2. a target nobody votes for is 0 + its base value (onnxruntime drops the base value)
    ours, theirs = both([(0, 1, 0, 1.0), (0, 2, 0, 5.0)], n_targets=2, base_values=[10.0, 20.0])
    assert ours == [[11.0, 20.0], [15.0, 20.0]] and theirs == [[11.0, 0.0], [15.0, 0.0]]
    # 3. post_transform applies to a single target (onnxruntime skips LOGISTIC there)
    ours, theirs = both([(0, 1, 0, 1.0), (0, 2, 0, -1.0)], n_targets=1, post_transform="LOGISTIC")
    np.testing.assert_allclose(ours, [[1 / (1 + math.exp(-1))], [1 / (1 + math.exp(1))]], rtol=1e-6)
    assert theirs == [[1.0], [-1.0]]
    # 4. PROBIT is exact (onnxruntime approximates erfinv)
    ours, theirs = both([(0, 1, 0, 0.3), (0, 2, 0, 0.9)], n_targets=1, post_transform="PROBIT")
    np.testing.assert_allclose(ours, [[-0.5244005127080407], [1.2815515655446004]], rtol=1e-6)
    assert abs(theirs[0][0] - ours[0][0]) > 1e-5


def test_tree_ensemble_regressor_ids_need_not_be_sorted():
    # nodes listed out of order, tree ids not contiguous: the structure is what the ids say
    atts = dict(
        nodes_treeids=[7, 3, 7, 3, 7, 3], nodes_nodeids=[2, 0, 0, 1, 1, 2], nodes_featureids=[0, 1, 0, 0, 0, 0],
        nodes_modes=["LEAF", "BRANCH_GT", "BRANCH_LEQ", "LEAF", "LEAF", "LEAF"], nodes_values=[0, 0.5, 0.0, 0, 0, 0],
        nodes_truenodeids=[0, 1, 1, 0, 0, 0], nodes_falsenodeids=[0, 2, 2, 0, 0, 0],
        target_treeids=[7, 7, 3, 3], target_nodeids=[1, 2, 1, 2], target_ids=[0, 0, 0, 0], target_weights=[1.0, 2.0, 10.0, 20.0],
        n_targets=1,
    )
    x = np.array([[-1.0, 1.0], [1.0, 0.0]], np.float32)
    (y,) = run_onnxrt(ml_model("TreeEnsembleRegressor", [("X", x)], ml_opset=1, **atts), {"X": x})
    assert y.tolist() == [[11.0], [22.0]]


def test_tree_ensemble_regressor_errors():
    nodes = dict(treeids=[0, 0, 0], nodeids=[0, 1, 2], featureids=[0, 0, 0], modes=["BRANCH_LEQ", "LEAF", "LEAF"],
                 values=[0.0, 0, 0], truenodeids=[1, 0, 0], falsenodeids=[2, 0, 0], missing=[0, 0, 0])
    x = np.zeros((1, 1), np.float32)

    def build(**changes):
        atts = v1_attributes(nodes, "target", [(0, 1, 0, 1.0)])
        atts.update(n_targets=1, **changes)
        return run_onnxrt(ml_model("TreeEnsembleRegressor", [("X", x)], ml_opset=1, **atts), {"X": x})

    with pytest.raises(InvalidAttributeError, match="refers to node 5 of tree 0, which does not exist"):
        build(nodes_truenodeids=[5, 0, 0])
    with pytest.raises(InvalidAttributeError, match="node 1 of tree 0 is defined twice"):
        build(nodes_nodeids=[0, 1, 1])
    with pytest.raises(InvalidAttributeError, match="'nodes_modes' holds 'BRANCH_XX'"):
        build(nodes_modes=["BRANCH_XX", "LEAF", "LEAF"])
    with pytest.raises(InvalidAttributeError, match="'aggregate_function' is 'MEDIAN'"):
        build(aggregate_function="MEDIAN")
    with pytest.raises(InvalidAttributeError, match="not a leaf"):
        build(target_nodeids=[0])
    with pytest.raises(InvalidAttributeError, match="'nodes_featureids' has 2 values, expected 3"):
        build(nodes_featureids=[0, 0])
    with pytest.raises(InvalidAttributeError, match="'base_values' has 2 values, expected 1"):
        build(base_values=[1.0, 2.0])


# ------------------------------------------------------------------------------------------
# TreeEnsembleClassifier (ml 1, 3)
# ------------------------------------------------------------------------------------------


def _classifier(rng, kind, positive, strings):
    nodes, leaves = random_trees(rng, int(rng.integers(1, 5)), int(rng.integers(1, 4)), 3, modes=MODES[:4], grid=GRID)
    nc = int(rng.integers(3, 5)) if kind == "multi" else 2
    votes = []
    for t, n in leaves:
        if kind == "multi":
            ks = range(nc) if rng.random() < 0.5 else rng.choice(nc, size=int(rng.integers(1, nc)), replace=False)
        else:
            ks = [0 if kind == "bin0" else 1]
        for k in ks:
            w = float(np.float32(rng.random() if positive else rng.standard_normal()))
            votes.append((t, n, int(k), w))
    atts = v1_attributes(nodes, "class", votes)
    if strings:
        atts["classlabels_strings"] = [f"c{i}" for i in range(nc)]
    else:
        atts["classlabels_int64s"] = list(range(10, 10 + nc))
    return atts, nc


@pytest.mark.parametrize("kind", ["multi", "bin0", "bin1"])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_tree_ensemble_classifier_matches_onnxruntime(kind, post):
    rng = np.random.default_rng(hash((kind, post)) % 2**32)
    for i in range(12):
        atts, nc = _classifier(rng, kind, positive=bool(i % 2), strings=i % 3 == 0)
        atts["post_transform"] = post
        if i % 4:
            atts["base_values"] = [float(np.float32(v)) for v in rng.standard_normal(nc if kind == "multi" else 1)]
        x = rng.standard_normal((30, 3)).astype(np.float32)
        model = ml_model("TreeEnsembleClassifier", [("X", x)], 2, ml_opset=1, **atts)
        (lo, zo), (lt, zt) = run_onnxrt(model, {"X": x}), run_ort(model, {"X": x})
        assert lo.dtype == lt.dtype and lo.tolist() == lt.tolist()
        assert zo.dtype == np.float32 and zo.shape == zt.shape == (30, nc)
        np.testing.assert_allclose(zo, zt, rtol=1e-5, atol=1e-6)


def test_tree_ensemble_classifier_v3_double_attributes():
    rng = np.random.default_rng(8)
    atts, nc = _classifier(rng, "multi", positive=True, strings=False)
    for name in ("nodes_values", "class_weights"):
        values = atts.pop(name)
        atts[name + "_as_tensor"] = helper.make_tensor(name, TensorProto.DOUBLE, [len(values)], values)
    atts["base_values_as_tensor"] = helper.make_tensor("b", TensorProto.DOUBLE, [nc], [0.1] * nc)
    x = rng.standard_normal((20, 3))
    model = ml_model("TreeEnsembleClassifier", [("X", x)], 2, ml_opset=3, **atts)
    (lo, zo), (lt, zt) = run_onnxrt(model, {"X": x}), run_ort(model, {"X": x})
    assert lo.tolist() == lt.tolist()
    np.testing.assert_allclose(zo, zt, rtol=1e-5, atol=1e-6)


def test_tree_ensemble_classifier_two_voted_classes_keeps_the_top_class():
    # both classes get votes: the label is the top class (spec); onnxruntime picks the second
    # label whenever its score is positive
    nodes = dict(treeids=[0, 0, 0], nodeids=[0, 1, 2], featureids=[0, 0, 0], modes=["BRANCH_LEQ", "LEAF", "LEAF"],
                 values=[0.0, 0, 0], truenodeids=[1, 0, 0], falsenodeids=[2, 0, 0], missing=[0, 0, 0])
    atts = v1_attributes(nodes, "class", [(0, 1, 0, 0.8), (0, 1, 1, 0.2), (0, 2, 0, 0.1), (0, 2, 1, 0.9)])
    atts["classlabels_int64s"] = [0, 1]
    x = np.array([[-1.0], [1.0]], np.float32)
    model = ml_model("TreeEnsembleClassifier", [("X", x)], 2, ml_opset=1, **atts)
    (lo, zo), (lt, zt) = run_onnxrt(model, {"X": x}), run_ort(model, {"X": x})
    assert lo.tolist() == [0, 1] and lt.tolist() == [1, 1]
    np.testing.assert_allclose(zo, zt)


def test_tree_ensemble_classifier_errors():
    atts, _ = _classifier(np.random.default_rng(1), "multi", True, False)
    x = np.zeros((1, 3), np.float32)
    bad = dict(atts, class_ids=[7] * len(atts["class_ids"]))
    with pytest.raises(InvalidAttributeError, match="'class_ids' holds 7, out of range"):
        run_onnxrt(ml_model("TreeEnsembleClassifier", [("X", x)], 2, ml_opset=1, **bad), {"X": x})
    nolabels = {k: v for k, v in atts.items() if not k.startswith("classlabels")}
    with pytest.raises(InvalidAttributeError, match="defines no class labels"):
        run_onnxrt(ml_model("TreeEnsembleClassifier", [("X", x)], 2, ml_opset=1, **nolabels), {"X": x})


# ------------------------------------------------------------------------------------------
# the walk itself
# ------------------------------------------------------------------------------------------


def test_canonical_and_general_walks_agree(monkeypatch):
    """The fast path rewrites <, >=, > as <= with swapped branches; the general path compares
    mode by mode. Both must reach the same leaves, NaN and infinite thresholds included."""
    rng = np.random.default_rng(21)
    nodes, leaves = random_trees(rng, 6, 5, 3, modes=MODES[:4], missing=True, grid=[-np.inf, -1.0, 0.0, 1.0, np.inf, np.nan])
    atts = v1_attributes(nodes, "target", [(t, n, 0, float(i)) for i, (t, n) in enumerate(leaves)])
    atts["n_targets"] = 1
    x = rng.choice(np.array([-np.inf, -1.0, 0.0, 0.5, 1.0, np.inf, np.nan]), size=(200, 3)).astype(np.float32)
    model = ml_model("TreeEnsembleRegressor", [("X", x)], ml_opset=1, **atts)
    fast = run_onnxrt(model, {"X": x})[0]
    original = _tree_core.Forest.compile

    def no_canonical(self):
        out = original(self)
        self._tables["canonical"] = False
        return out

    monkeypatch.setattr(_tree_core.Forest, "compile", no_canonical)
    slow = run_onnxrt(model, {"X": x})[0]
    np.testing.assert_array_equal(fast, slow)
    np.testing.assert_allclose(fast, loop_v1_regressor(atts, x, 1))


def test_many_rows_cross_chunks_and_inputs_stay_unchanged():
    rng = np.random.default_rng(4)
    atts = _regressor(rng, 2, modes=["BRANCH_LEQ"], missing=False, extra_votes=False)
    atts["n_targets"] = 2
    x = rng.standard_normal((5000, 3)).astype(np.float32)
    keep = x.copy()
    model = ml_model("TreeEnsembleRegressor", [("X", x)], ml_opset=1, **atts)
    ours = run_onnxrt(model, {"X": x})[0]
    np.testing.assert_allclose(ours, run_ort(model, {"X": x})[0], rtol=1e-5, atol=1e-6)
    assert (x == keep).all()
    # one row given as a vector, and no rows at all
    assert run_onnxrt(model, {"X": x[0]})[0].shape == (1, 2)
    assert run_onnxrt(model, {"X": x[:0]})[0].shape == (0, 2)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_walk_matches_numpy_walk(seed, dtype, monkeypatch):
    """The numba walk (one pass per level over blocks of (tree, row) lanes, split over the
    pool) reaches the leaves numpy's level-by-level walk reaches: NaN inputs, infinite and
    NaN thresholds, 1 row, a few rows, and more rows than one block of lanes."""
    from onnxrt import native as _jit

    assert _jit.kernels("onnxrt.native.tree_loops") is not None, _jit.LOAD_ERROR
    rng = np.random.default_rng(100 + seed)
    nodes, leaves = random_trees(rng, 7, 6, 4, modes=MODES[:4], missing=True, grid=[-np.inf, -1.0, 0.0, 1.0, np.inf, np.nan, 0.25])
    n_classes = 3
    votes = [(t, n, int(rng.integers(0, n_classes)), float(np.float32(rng.standard_normal()))) for t, n in leaves]
    atts = v1_attributes(nodes, "class", votes)
    atts["classlabels_int64s"] = list(range(n_classes))  # no base values: the "has a vote" rule needs the leaves
    monkeypatch.setattr(fastml, "TREE_PART_STEPS", 64)  # small parts: the pool shares the rows
    for rows in (1, 3, 300, 1100):
        x = rng.choice(np.array([-np.inf, -1.0, 0.0, 0.25, 0.5, 1.0, np.inf, np.nan]), size=(rows, 4)).astype(dtype)
        model = ml_model("TreeEnsembleClassifier", [("X", x)], n_outputs=2, ml_opset=1, **atts)
        compiled = run_onnxrt(model, {"X": x})
        with _jit.disabled():
            plain = run_onnxrt(model, {"X": x})
        assert compiled[0].dtype == plain[0].dtype == np.int64 and compiled[0].shape == (rows,)
        assert compiled[1].dtype == np.float32 and compiled[1].shape == (rows, n_classes)
        np.testing.assert_array_equal(compiled[0], plain[0])
        np.testing.assert_allclose(compiled[1], plain[1], rtol=1e-6, atol=1e-6)
        # with base values no "has a vote" flags are needed: few rows take the compiled walk's fewest steps
        based = ml_model("TreeEnsembleClassifier", [("X", x)], n_outputs=2, ml_opset=1, base_values=[0.1, -0.2, 0.3], **atts)
        compiled = run_onnxrt(based, {"X": x})
        with _jit.disabled():
            plain = run_onnxrt(based, {"X": x})
        np.testing.assert_array_equal(compiled[0], plain[0])
        np.testing.assert_allclose(compiled[1], plain[1], rtol=1e-6, atol=1e-6)
        reg = dict(atts, n_targets=n_classes, aggregate_function="AVERAGE")
        for key in ("class_ids", "class_nodeids", "class_treeids", "class_weights", "classlabels_int64s"):
            val = reg.pop(key)
            if key != "classlabels_int64s":
                reg[key.replace("class_", "target_")] = val
        model = ml_model("TreeEnsembleRegressor", [("X", x)], ml_opset=1, **reg)
        compiled = run_onnxrt(model, {"X": x})[0]
        with _jit.disabled():
            plain = run_onnxrt(model, {"X": x})[0]
        np.testing.assert_allclose(compiled, plain, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(compiled, loop_v1_regressor(reg, x.astype(np.float32) if dtype == np.float32 else x, n_classes), rtol=1e-5, atol=1e-5)
