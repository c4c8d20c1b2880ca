"""Random tree ensembles in the ml 1/3 and ml 5 encodings, for differential tests against onnxruntime."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def random_trees(rng, n_trees, max_depth, n_features, modes=("BRANCH_LEQ",), missing=False, grid=None):
    """Node tuples of ``n_trees`` random binary trees (ids restart at 0 in each tree).

    Returns a dict of ``nodes_*`` lists and the list of (tree id, node id) leaves.
    ``grid`` draws thresholds from a few values so that EQ/NEQ nodes get hits.
    """
    out = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values", "truenodeids", "falsenodeids", "missing")}
    leaves = []
    for t in range(n_trees):
        counter = [0]

        def grow(depth):
            nid = counter[0]
            counter[0] += 1
            out["treeids"].append(t)
            out["nodeids"].append(nid)
            idx = len(out["nodeids"]) - 1
            is_leaf = depth >= max_depth or (depth > 0 and rng.random() < 0.25)
            if is_leaf:
                out["featureids"].append(0)
                out["modes"].append("LEAF")
                out["values"].append(0.0)
                out["truenodeids"].append(0)
                out["falsenodeids"].append(0)
                out["missing"].append(0)
                leaves.append((t, nid))
                return nid
            out["featureids"].append(int(rng.integers(0, n_features)))
            out["modes"].append(str(rng.choice(modes)))
            out["values"].append(float(rng.choice(grid)) if grid is not None else float(np.float32(rng.standard_normal())))
            out["truenodeids"].append(-1)
            out["falsenodeids"].append(-1)
            out["missing"].append(int(rng.integers(0, 2)) if missing else 0)
            tc = grow(depth + 1)
            fc = grow(depth + 1)
            out["truenodeids"][idx] = tc
            out["falsenodeids"][idx] = fc
            return nid

        grow(0)
    return out, leaves


def v1_attributes(nodes, prefix, votes, as_tensor=False):
    """Attributes of TreeEnsembleClassifier/Regressor from ``random_trees`` nodes and votes
    ``[(tree, node, id, weight)]``."""
    atts = dict(
        nodes_treeids=nodes["treeids"],
        nodes_nodeids=nodes["nodeids"],
        nodes_featureids=nodes["featureids"],
        nodes_modes=nodes["modes"],
        nodes_truenodeids=nodes["truenodeids"],
        nodes_falsenodeids=nodes["falsenodeids"],
        nodes_missing_value_tracks_true=nodes["missing"],
    )
    if not votes:  # an ensemble without votes still needs its vote attributes typed
        votes = [(nodes["treeids"][0], nodes["nodeids"][0], 0, 0.0)] if False else []
    atts[f"{prefix}_treeids"] = [v[0] for v in votes]
    atts[f"{prefix}_nodeids"] = [v[1] for v in votes]
    atts[f"{prefix}_ids"] = [v[2] for v in votes]
    w = [v[3] for v in votes]
    if as_tensor:
        atts["nodes_values_as_tensor"] = helper.make_tensor("v", TensorProto.DOUBLE, [len(nodes["values"])], nodes["values"])
        atts[f"{prefix}_weights_as_tensor"] = helper.make_tensor("w", TensorProto.DOUBLE, [len(w)], w)
    else:
        atts["nodes_values"] = nodes["values"]
        atts[f"{prefix}_weights"] = w
    return atts


def model(op_type, atts, in_type, out_types, ml_opset=3, opset=18):
    outs = ["Y", "Z"][: len(out_types)]
    node = helper.make_node(op_type, ["X"], outs, domain="ai.onnx.ml", **atts)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", in_type, None)],
        [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, out_types)],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", ml_opset)])
    m.ir_version = 9
    return m


def random_v5(rng, n_trees, max_depth, n_features, n_targets, modes=(0,), missing=False, grid=None, dtype=np.float32,
              aggregate=1, post=0):
    """Attributes of a random TreeEnsemble (ml 5): interior ``nodes_*``, one target per leaf.

    ``modes`` are mode codes (0 LEQ ... 5 NEQ, 6 BRANCH_MEMBER); member sets draw from ``grid``.
    """
    feat, modes_out, splits, tid, tleaf, fid, fleaf, mtt, members = [], [], [], [], [], [], [], [], []
    leaf_t, leaf_w, roots = [], [], []

    def leaf():
        leaf_t.append(int(rng.integers(0, n_targets)))
        leaf_w.append(float(dtype(rng.standard_normal())))
        return len(leaf_t) - 1

    def grow(depth):
        i = len(feat)
        feat.append(int(rng.integers(0, n_features)))
        mode = int(rng.choice(modes))
        modes_out.append(mode)
        splits.append(float(rng.choice(grid)) if grid is not None else float(dtype(rng.standard_normal())))
        if mode == 6:
            k = int(rng.integers(1, 4))
            members.extend(float(v) for v in rng.choice(grid if grid is not None else [0.0, 1.0], size=k))
            members.append(float("nan"))
        mtt.append(int(rng.integers(0, 2)) if missing else 0)
        for ids, leafs in ((tid, tleaf), (fid, fleaf)):
            ids.append(-1)
            leafs.append(0)
        for ids, leafs in ((tid, tleaf), (fid, fleaf)):
            if depth + 1 >= max_depth or rng.random() < 0.3:
                ids[i], leafs[i] = leaf(), 1
            else:
                ids[i], leafs[i] = grow(depth + 1), 0
        return i

    for _ in range(n_trees):
        roots.append(grow(0))
    np_dtype = np.dtype(dtype)
    tp = helper.np_dtype_to_tensor_dtype(np_dtype)
    atts = dict(
        n_targets=n_targets,
        aggregate_function=aggregate,
        post_transform=post,
        tree_roots=roots,
        nodes_modes=helper.make_tensor("modes", TensorProto.UINT8, [len(modes_out)], modes_out),
        nodes_featureids=feat,
        nodes_splits=helper.make_tensor("splits", tp, [len(splits)], np.array(splits, np_dtype).tolist()),
        nodes_truenodeids=tid,
        nodes_trueleafs=tleaf,
        nodes_falsenodeids=fid,
        nodes_falseleafs=fleaf,
        leaf_targetids=leaf_t,
        leaf_weights=helper.make_tensor("weights", tp, [len(leaf_w)], np.array(leaf_w, np_dtype).tolist()),
    )
    if missing:
        atts["nodes_missing_value_tracks_true"] = mtt
    if members:
        atts["membership_values"] = helper.make_tensor("members", tp, [len(members)], np.array(members, np_dtype).tolist())
    return atts
