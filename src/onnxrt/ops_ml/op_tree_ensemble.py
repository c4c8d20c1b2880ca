"""TreeEnsemble (ml 5), TreeEnsembleRegressor and TreeEnsembleClassifier (ml 1, 3, 5): one shared walk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ..ops_cpu._op import OpRun
from ._common import ML_DOMAIN, add_columns, apply_transform, class_labels, floats_or_tensor, post_transform_fn
from ._tree_core import AGGREGATES, LEAF, MEMBER, MODES, Forest, leaf_tables


def _ints(op: OpRun, name: str, size: int | None = None, default: int | None = None) -> np.ndarray:
    value = getattr(op, name, None)
    if value is None:
        if default is None:
            raise InvalidAttributeError(f"{op.node_label()} misses the required attribute {name!r}.")
        return np.full(size or 0, default, dtype=np.int64)
    arr = np.asarray(value, dtype=np.int64).reshape(-1)
    if size is not None and arr.size != size:
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute {name!r} has {arr.size} values, expected {size} (one per node)."
        )
    return arr


def _input_float(x: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Integer inputs are compared as the threshold type, as onnxruntime converts them."""
    if x.dtype.kind == "f":
        return x
    return x.astype(thresholds.dtype if thresholds.dtype.kind == "f" else np.float32)


def _matrix(x: np.ndarray, op: OpRun) -> np.ndarray:
    if x.ndim == 2:
        return x
    if x.ndim == 1:
        return x.reshape(1, -1)
    raise KernelError(f"{op.node_label()} expects an input of shape [N, F] or [F], got shape {list(x.shape)}.")


# ------------------------------------------------------------------------------------------
# building Forests from the attributes
# ------------------------------------------------------------------------------------------


def check_targets(op: OpRun, n_targets: int, n_leaves: int) -> None:
    """Refuse, before the per-leaf tables are built, a target count below 1 or tables (one
    float64 per leaf and target) above ``SessionOptions.max_tensor_bytes``: an absurd
    ``n_targets`` (or target id) would otherwise allocate terabytes at load."""
    if n_targets < 1:
        raise InvalidAttributeError(f"{op.node_label()}: the model has {n_targets} targets, expected at least 1 (attribute 'n_targets').")
    op.check_alloc((n_leaves, n_targets), np.float64, "leaf table (leaves x n_targets)")


def forest_from_nodes(op: OpRun, prefix: str, n_targets: int) -> Forest:
    """A Forest from the ml 1/3 encoding: ``nodes_*`` tuples keyed by (tree id, node id) and
    ``{prefix}_*`` votes (``class`` for the classifier, ``target`` for the regressor)."""
    label = op.node_label()
    check_targets(op, n_targets, 0)  # at least one target, before the ids are checked against it
    tree_ids = _ints(op, "nodes_treeids")
    n = tree_ids.size
    node_ids = _ints(op, "nodes_nodeids", n)
    features = _ints(op, "nodes_featureids", n)
    true_ids = _ints(op, "nodes_truenodeids", n)
    false_ids = _ints(op, "nodes_falsenodeids", n)
    # an absent or empty nodes_missing_value_tracks_true means false for every node
    missing = _ints(op, "nodes_missing_value_tracks_true", n) if getattr(op, "nodes_missing_value_tracks_true", None) else np.zeros(n, np.int64)
    modes_s = getattr(op, "nodes_modes", None) or []
    if len(modes_s) != n:
        raise InvalidAttributeError(f"{label}: attribute 'nodes_modes' has {len(modes_s)} values, expected {n}.")
    lookup = {m: i for i, m in enumerate(MODES) if m != "BRANCH_MEMBER"}
    try:
        modes = np.array([lookup[m.decode() if isinstance(m, bytes) else m] for m in modes_s], dtype=np.uint8)
    except KeyError as e:
        raise InvalidAttributeError(
            f"{label}: attribute 'nodes_modes' holds {e.args[0]!r}, expected one of {[m for m in lookup]!r}."
        ) from None
    values = floats_or_tensor(op, "nodes_values")
    if values is None:
        values = np.zeros(n, dtype=np.float32)
    if values.size != n:
        raise InvalidAttributeError(f"{label}: attribute 'nodes_values' has {values.size} values, expected {n}.")

    # (tree id, node id) -> position, with one sorted key array (no per-node Python work)
    for name, ids in (("nodes_nodeids", node_ids), ("nodes_truenodeids", true_ids), ("nodes_falsenodeids", false_ids)):
        if (ids < 0).any():
            raise InvalidAttributeError(f"{label}: attribute {name!r} holds the negative id {int(ids[ids < 0][0])}.")
    span = int(max(node_ids.max(initial=0), true_ids.max(initial=0), false_ids.max(initial=0))) + 1
    keys = tree_ids * span + node_ids
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    if n and (np.diff(sorted_keys) == 0).any():
        dup = sorted_keys[1:][np.diff(sorted_keys) == 0][0]
        raise InvalidAttributeError(
            f"{label}: node {int(dup % span)} of tree {int(dup // span)} is defined twice."
        )

    def position(trees: np.ndarray, ids: np.ndarray, what: str) -> np.ndarray:
        k = trees * span + ids
        pos = np.searchsorted(sorted_keys, k)
        pos = np.minimum(pos, max(n - 1, 0))
        bad = (sorted_keys[pos] != k) if n else np.ones(k.shape, bool)
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            raise InvalidAttributeError(
                f"{label}: {what} refers to node {int(ids[i])} of tree {int(trees[i])}, which does not exist."
            )
        return order[pos]

    is_leaf = modes == LEAF
    inner = ~is_leaf
    true_child = np.zeros(n, dtype=np.intp)
    false_child = np.zeros(n, dtype=np.intp)
    true_child[inner] = position(tree_ids[inner], true_ids[inner], "a true branch")
    false_child[inner] = position(tree_ids[inner], false_ids[inner], "a false branch")

    # roots: per tree, the node no other node points to (the smallest id if several)
    pointed = np.zeros(n, dtype=bool)
    pointed[true_child[inner]] = True
    pointed[false_child[inner]] = True
    trees = np.unique(tree_ids)
    cand = np.nonzero(~pointed)[0]
    cand = cand[np.lexsort((node_ids[cand], tree_ids[cand]))]
    first = np.unique(tree_ids[cand], return_index=True)
    if len(first[0]) != len(trees):
        missing_tree = np.setdiff1d(trees, first[0])[0]
        raise InvalidAttributeError(f"{label}: tree {int(missing_tree)} has no root (its nodes form a cycle).")
    roots = cand[first[1]]

    # votes at the leaves
    v_trees = np.asarray(getattr(op, f"{prefix}_treeids", None) or [], dtype=np.int64)
    m = v_trees.size
    v_nodes = _ints(op, f"{prefix}_nodeids", m) if m else np.zeros(0, np.int64)
    v_ids = _ints(op, f"{prefix}_ids", m) if m else np.zeros(0, np.int64)
    v_weights = floats_or_tensor(op, f"{prefix}_weights")
    if v_weights is None:
        v_weights = np.zeros(0, dtype=np.float32)
    if v_weights.size != m:
        raise InvalidAttributeError(
            f"{label}: attribute {prefix + '_weights'!r} has {v_weights.size} values, expected {m} (one per vote)."
        )
    if m and ((v_ids < 0).any() or (v_ids >= n_targets).any()):
        bad = v_ids[(v_ids < 0) | (v_ids >= n_targets)][0]
        raise InvalidAttributeError(
            f"{label}: attribute {prefix + '_ids'!r} holds {int(bad)}, out of range [0, {n_targets - 1}]."
        )
    leaf_row = np.full(n, -1, dtype=np.intp)
    leaf_row[is_leaf] = np.arange(int(is_leaf.sum()))
    voters = position(v_trees, v_nodes, f"attribute {prefix + '_nodeids'!r}") if m else np.zeros(0, np.intp)
    if m and not is_leaf[voters].all():
        i = int(np.nonzero(~is_leaf[voters])[0][0])
        raise InvalidAttributeError(
            f"{label}: a vote is attached to node {int(v_nodes[i])} of tree {int(v_trees[i])}, which is not a leaf."
        )
    wdtype = np.float64 if v_weights.dtype == np.float64 else np.float32
    check_targets(op, n_targets, int(is_leaf.sum()))
    w, has, wmin, wmax = leaf_tables(leaf_row[voters], v_ids, v_weights, int(is_leaf.sum()), n_targets, wdtype)
    forest = Forest(
        feature=features,
        threshold=values,
        mode=modes,
        missing_true=missing.astype(bool),
        true_child=true_child,
        false_child=false_child,
        roots=roots,
        leaf_row=leaf_row,
        weights=w,
        has=has,
        wmin=wmin,
        wmax=wmax,
        n_targets=n_targets,
        label=label,
        vote_weights=v_weights,
    )
    return forest.compile()


def forest_from_v5(op: OpRun) -> Forest:
    """A Forest from the TreeEnsemble (ml 5) encoding: interior ``nodes_*``, separate ``leaf_*``."""
    label = op.node_label()
    features = _ints(op, "nodes_featureids")
    n = features.size
    true_ids = _ints(op, "nodes_truenodeids", n)
    false_ids = _ints(op, "nodes_falsenodeids", n)
    true_leaf = _ints(op, "nodes_trueleafs", n).astype(bool)
    false_leaf = _ints(op, "nodes_falseleafs", n).astype(bool)
    missing = getattr(op, "nodes_missing_value_tracks_true", None)
    missing = np.zeros(n, bool) if missing is None else np.asarray(missing, dtype=bool).reshape(-1)
    if missing.size != n:
        raise InvalidAttributeError(f"{label}: attribute 'nodes_missing_value_tracks_true' has {missing.size} values, expected {n}.")
    modes = np.asarray(op.nodes_modes).reshape(-1).astype(np.int64)
    if modes.size != n:
        raise InvalidAttributeError(f"{label}: attribute 'nodes_modes' has {modes.size} values, expected {n}.")
    if ((modes < 0) | (modes > MEMBER)).any():
        bad = modes[(modes < 0) | (modes > MEMBER)][0]
        raise InvalidAttributeError(f"{label}: attribute 'nodes_modes' holds {int(bad)}, expected a value in [0, 6].")
    splits = np.asarray(op.nodes_splits).reshape(-1)
    if splits.size != n:
        raise InvalidAttributeError(f"{label}: attribute 'nodes_splits' has {splits.size} values, expected {n}.")
    targets = _ints(op, "leaf_targetids")
    n_leaves = targets.size
    weights = np.asarray(op.leaf_weights).reshape(-1)
    if weights.size != n_leaves:
        raise InvalidAttributeError(f"{label}: attribute 'leaf_weights' has {weights.size} values, expected {n_leaves}.")
    n_targets = op.n_targets
    if n_targets is None:
        raise InvalidAttributeError(f"{label} misses the required attribute 'n_targets'.")
    if n_leaves and ((targets < 0) | (targets >= n_targets)).any():
        bad = targets[(targets < 0) | (targets >= n_targets)][0]
        raise InvalidAttributeError(f"{label}: attribute 'leaf_targetids' holds {int(bad)}, out of range [0, {n_targets - 1}].")
    for ids, leafs, what in ((true_ids, true_leaf, "true"), (false_ids, false_leaf, "false")):
        bound = np.where(leafs, n_leaves, n)
        if ((ids < 0) | (ids >= bound)).any():
            i = int(np.nonzero((ids < 0) | (ids >= bound))[0][0])
            kind = "leaf" if leafs[i] else "node"
            raise InvalidAttributeError(
                f"{label}: the {what} branch of node {i} points to {kind} {int(ids[i])}, which does not exist."
            )
    roots = _ints(op, "tree_roots")
    if ((roots < 0) | (roots >= n)).any():
        bad = roots[(roots < 0) | (roots >= n)][0]
        raise InvalidAttributeError(f"{label}: attribute 'tree_roots' holds {int(bad)}, out of range [0, {n - 1}].")

    # interior nodes are 0..n-1, leaves n..n+L-1 (self-looping sinks)
    total = n + n_leaves
    feature = np.zeros(total, dtype=np.intp)
    feature[:n] = features
    threshold = np.zeros(total, dtype=splits.dtype)
    threshold[:n] = splits
    mode = np.full(total, LEAF, dtype=np.uint8)
    mode[:n] = modes
    mtt = np.zeros(total, dtype=bool)
    mtt[:n] = missing
    true_child = np.arange(total, dtype=np.intp)
    false_child = np.arange(total, dtype=np.intp)
    true_child[:n] = np.where(true_leaf, n + true_ids, true_ids)
    false_child[:n] = np.where(false_leaf, n + false_ids, false_ids)
    leaf_row = np.full(total, -1, dtype=np.intp)
    leaf_row[n:] = np.arange(n_leaves)

    members: dict[int, np.ndarray] = {}
    member_nodes = np.nonzero(modes == MEMBER)[0]
    if member_nodes.size:
        values = getattr(op, "membership_values", None)
        if values is None:
            raise InvalidAttributeError(f"{label} has BRANCH_MEMBER nodes but no attribute 'membership_values'.")
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        # sets are listed in node order, each one closed by a NaN (the last NaN is optional)
        cuts = np.nonzero(np.isnan(values))[0]
        sets = np.split(values, cuts)
        sets = [s[~np.isnan(s)] for s in sets]
        if len(sets) > member_nodes.size and sets[-1].size == 0:
            sets = sets[:-1]
        if len(sets) != member_nodes.size:
            raise InvalidAttributeError(
                f"{label}: attribute 'membership_values' holds {len(sets)} sets, expected {member_nodes.size} "
                f"(one per BRANCH_MEMBER node)."
            )
        members = {int(k): s for k, s in zip(member_nodes, sets)}

    wdtype = weights.dtype if weights.dtype.kind == "f" else np.float32
    check_targets(op, int(n_targets), n_leaves)
    w, has, wmin, wmax = leaf_tables(np.arange(n_leaves), targets, weights, n_leaves, n_targets, np.float64 if wdtype == np.float64 else np.float32)
    return Forest(
        feature=feature,
        threshold=threshold,
        mode=mode,
        missing_true=mtt,
        true_child=true_child,
        false_child=false_child,
        roots=roots,
        leaf_row=leaf_row,
        weights=w,
        has=has,
        wmin=wmin,
        wmax=wmax,
        n_targets=int(n_targets),
        members=members,
        label=label,
    ).compile()


# ------------------------------------------------------------------------------------------
# kernels
# ------------------------------------------------------------------------------------------


def _aggregate_name(op: OpRun, value: Any) -> str:
    if isinstance(value, (int, np.integer)):
        if not 0 <= int(value) < len(AGGREGATES):
            raise InvalidAttributeError(
                f"{op.node_label()}: attribute 'aggregate_function' is {int(value)}, expected an integer in [0, 3]."
            )
        return AGGREGATES[int(value)]
    if value not in AGGREGATES:
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute 'aggregate_function' is {value!r}, expected one of {list(AGGREGATES)!r}."
        )
    return value


@register("TreeEnsemble", versions=(5,), domain=ML_DOMAIN)
class TreeEnsemble(OpRun):
    """TreeEnsemble (ml 5): interior nodes and leaves in separate tuples, every mode including
    BRANCH_MEMBER, aggregate_function and post_transform as integers. Output has the input type.

    Follows the spec where onnxruntime 1.32 departs from it: post_transform 1 is SOFTMAX and 2
    LOGISTIC (onnxruntime swaps them); NaN takes the branch nodes_missing_value_tracks_true
    names under every mode (onnxruntime lets NaN != t hold for BRANCH_NEQ); membership is
    exact (onnxruntime truncates inputs against integral sets); PROBIT is exact.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._aggregate = _aggregate_name(self, self.aggregate_function)
        self._transform = post_transform_fn(self, int(self.post_transform))
        self.forest = forest_from_v5(self)

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return self._predict(x, self.forest.aggregate)

    def _predict(self, x: np.ndarray, aggregate: Callable[..., tuple]) -> tuple:
        """The outputs, the trees' scores by ``aggregate`` (:meth:`Forest.aggregate`, or the
        compiled walk of a fast path, onnxrt/fastpaths/ml.py)."""
        x = _matrix(x, self)
        # float16 is compared as float32 (exact: float16 values and splits are float32 values)
        xw = x.astype(np.float32) if x.dtype == np.float16 else x
        self.check_alloc((x.shape[0], self.forest.n_targets), np.float64, "scores")
        scores, _ = aggregate(xw, self._aggregate)
        scores = apply_transform(self._transform, scores)
        return (scores.astype(x.dtype),)


class _TreeV1(OpRun):
    """Shared construction of the ml 1/3/5 classifier and regressor (``nodes_*`` keyed by ids)."""

    def _threshold_input(self, x: np.ndarray) -> np.ndarray:
        x = _matrix(x, self)
        return _input_float(x, self.forest.threshold)


@register("TreeEnsembleRegressor", versions=(1, 3, 5), domain=ML_DOMAIN)
class TreeEnsembleRegressor(_TreeV1):
    """TreeEnsembleRegressor: 1, 3 (``*_as_tensor`` double attributes), 5 (deprecated, same).

    Y[n, t] = post_transform(aggregate over trees of the leaf votes for t + base_values[t]);
    AVERAGE divides the sum by the number of trees; a target without any vote scores 0
    (then its base value). The output is float32. NaN inputs follow
    nodes_missing_value_tracks_true under every mode.

    onnxruntime 1.32 departs from this in corner cases onnxrt keeps to the spec on: with one
    target it skips LOGISTIC/SOFTMAX and keeps only the first of a leaf's votes; with several
    targets it drops the base value of a target nobody voted for; PROBIT is approximate there.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._aggregate = _aggregate_name(self, self.aggregate_function)
        self._transform = post_transform_fn(self)
        n_targets = self.n_targets
        if n_targets is None:
            ids = getattr(self, "target_ids", None) or [0]
            n_targets = int(max(ids)) + 1
        self.forest = forest_from_nodes(self, "target", int(n_targets))
        base = floats_or_tensor(self, "base_values")
        if base is not None and base.size not in (0, n_targets):
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'base_values' has {base.size} values, expected {n_targets} (one per target)."
            )
        self._base = None if base is None or base.size == 0 else base.astype(np.float64)

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return self._predict(x, self.forest.aggregate)

    def _predict(self, x: np.ndarray, aggregate: Callable[..., tuple]) -> tuple:
        """The output, the trees' scores by ``aggregate`` (:meth:`Forest.aggregate`, or a fast path's compiled walk)."""
        x = self._threshold_input(x)
        self.check_alloc((x.shape[0], self.forest.n_targets), np.float64, "scores")
        scores, _ = aggregate(x, self._aggregate)
        if self._base is not None:
            add_columns(scores, self._base)
        scores = apply_transform(self._transform, scores)
        return (scores.astype(np.float32),)


@register("TreeEnsembleClassifier", versions=(1, 3, 5), domain=ML_DOMAIN)
class TreeEnsembleClassifier(_TreeV1):
    """TreeEnsembleClassifier: 1, 3 (``*_as_tensor`` double attributes), 5 (deprecated, same).

    Scores are the sums of the class votes plus base_values, then post_transform; the label
    is the top class among the classes that received a vote (every class when base_values
    are given). Ties go to the first class.

    Two labels with every vote for one class id is the "binary" encoding converters emit
    (one score s per row); the spec does not define it and onnxrt follows onnxruntime:
    s = votes + base_values[0]; the label is the second one when s > 0.5 (all weights >= 0:
    s is a probability) or s > 0 (signed margins); Z is [1 - s, s] or [-s, s], with LOGISTIC
    [sigmoid(-s), sigmoid(s)], with PROBIT [-probit(s), probit(s)] (onnxruntime writes
    garbage there), SOFTMAX and SOFTMAX_ZERO leave the pair as it is (onnxruntime). When the
    single class id is 1, s = votes (+ base_values[1]) and Z is the transform of [0, s]. With votes for both classes onnxrt
    keeps the spec's "top class" where onnxruntime picks the second label whenever its score
    is positive.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.labels = labels = class_labels(self, "classlabels_int64s", "classlabels_strings", required=True)
        self._transform_name = self.post_transform
        self._transform = post_transform_fn(self)
        n_classes = labels.size
        self.forest = forest_from_nodes(self, "class", n_classes)
        base = floats_or_tensor(self, "base_values")
        self._base = None if base is None or base.size == 0 else base.astype(np.float64)
        allowed = (1, 2) if n_classes == 2 else (n_classes,)
        if self._base is not None and self._base.size not in allowed:
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'base_values' has {self._base.size} values, expected {n_classes} (one per class)."
            )
        voted = np.unique(np.asarray(getattr(self, "class_ids", None) or [], dtype=np.int64))
        weights = self.forest.vote_weights
        self._single_id = int(voted[0]) if n_classes == 2 and voted.size == 1 else None
        self._threshold = 0.5 if bool((weights >= 0).all()) else 0.0
        self._all_positive = self._threshold == 0.5
        #: the top class is chosen among the classes a row has votes for only without base
        #: values, and only matters when some leaf does not vote for every class
        self._need_has = self._base is None and self._single_id is None and not self.forest._all_has()

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return self._predict(x, self.forest.aggregate)

    def _predict(self, x: np.ndarray, aggregate: Callable[..., tuple]) -> tuple:
        """Labels and scores, the trees' sums by ``aggregate`` (:meth:`Forest.aggregate`, or a fast path's compiled walk)."""
        need_has = self._need_has
        x = self._threshold_input(x)
        scores, has = aggregate(x, "SUM", need_has=need_has)
        if self._single_id is not None:
            return self._binary(scores)
        if self._base is not None:
            if self._base.size == scores.shape[1]:
                add_columns(scores, self._base)
            else:  # two labels, one base value: it belongs to class 0
                scores[:, 0] += self._base[0]
        ranked = np.where(has, scores, -np.inf) if need_has else scores
        labels = self.labels.take(ranked.argmax(axis=1))
        z = apply_transform(self._transform, scores)
        return labels, z.astype(np.float32)

    def _binary(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cid = self._single_id
        s = scores[:, cid]
        if self._base is not None and cid < self._base.size:
            # base_values[0] belongs to class 0: votes for class 1 alone ignore a single base value
            s = s + self._base[cid]
        labels = self.labels.take((s > self._threshold).astype(np.intp))
        name = self._transform_name
        if cid == 1:
            z = np.stack([np.zeros_like(s), s], axis=1)
            return labels, apply_transform(self._transform, z).astype(np.float32)
        if name == "LOGISTIC":
            z = np.stack([-s, s], axis=1)
        elif name == "PROBIT":
            p = apply_transform(self._transform, s)
            z = np.stack([-p, p], axis=1)
            return labels, z.astype(np.float32)
        elif self._all_positive:
            z = np.stack([1 - s, s], axis=1)
        else:
            z = np.stack([-s, s], axis=1)
        if name == "LOGISTIC":
            z = apply_transform(self._transform, z)
        return labels, z.astype(np.float32)
