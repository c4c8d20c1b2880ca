"""The vectorized core of the tree ensembles: node arrays walked level by level for all rows at once."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidAttributeError, KernelError

#: node modes, numbered as TreeEnsemble (ml opset 5) encodes them; LEAF only exists before opset 5
MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER", "LEAF")
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER, LEAF = range(8)
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")

_COMPARE = {
    LEQ: np.less_equal,
    LT: np.less,
    GTE: np.greater_equal,
    GT: np.greater,
    EQ: np.equal,
    NEQ: np.not_equal,
}

#: rows x trees handled per chunk: keeps the state arrays of one level in the CPU cache
_CHUNK_ELEMENTS = 1 << 15


@dataclass
class Forest:
    """An ensemble compiled into flat node arrays (every tree, every node, leaves included).

    Nodes are numbered 0..n-1 over the whole ensemble. A leaf points to itself on both
    branches, so a walk of ``depth`` levels leaves every row on a leaf whatever its path
    length. ``leaf_row[k]`` is the row of node ``k`` in the ``weights`` table ([L, targets]),
    ``has[l, t]`` whether leaf ``l`` votes for target ``t`` at all (MIN/MAX and the
    classifiers' "has a score" rule need it).
    """

    feature: np.ndarray
    threshold: np.ndarray
    mode: np.ndarray
    missing_true: np.ndarray
    true_child: np.ndarray
    false_child: np.ndarray
    roots: np.ndarray
    leaf_row: np.ndarray
    weights: np.ndarray
    has: np.ndarray
    n_targets: int
    #: per leaf and target, the smallest / largest vote (+inf / -inf without a vote)
    wmin: np.ndarray | None = None
    wmax: np.ndarray | None = None
    members: dict[int, np.ndarray] = field(default_factory=dict)
    label: str = "TreeEnsemble"
    # filled by compile()
    depth: int = 0
    n_features: int = 0
    _tables: dict = field(default_factory=dict)

    # -- compilation -----------------------------------------------------------------------

    def compile(self) -> Forest:
        """Check the structure, measure the depth and precompute the walk tables."""
        n = len(self.feature)
        self.feature = self.feature.astype(np.intp)
        self.true_child = self.true_child.astype(np.intp)
        self.false_child = self.false_child.astype(np.intp)
        self.roots = self.roots.astype(np.intp)
        self.leaf_row = self.leaf_row.astype(np.intp)
        is_leaf = self.mode == LEAF
        inner = ~is_leaf
        if n and ((self.true_child[inner] < 0).any() or (self.true_child[inner] >= n).any()
                  or (self.false_child[inner] < 0).any() or (self.false_child[inner] >= n).any()):
            raise InvalidAttributeError(f"{self.label}: a node points to a child that does not exist.")
        if (self.feature[inner] < 0).any():
            raise InvalidAttributeError(f"{self.label}: a node has a negative feature id.")
        if (self.leaf_row[is_leaf] < 0).any():
            raise InvalidAttributeError(f"{self.label}: a leaf has no row in the weight table.")
        self.true_child[is_leaf] = np.nonzero(is_leaf)[0]
        self.false_child[is_leaf] = np.nonzero(is_leaf)[0]
        self.feature[is_leaf] = 0
        self.n_features = int(self.feature.max()) + 1 if n else 0
        self.depth = self._measure_depth(is_leaf)

        # Doubled state: a row at node k is in state 2k; state 2k + c, c the outcome of the
        # comparison, indexes the next state. Feature and threshold tables are repeated so
        # that state 2k reads them directly (one take per table and level).
        ch = np.empty(2 * n, dtype=np.intp)
        ch[0::2] = 2 * self.false_child
        ch[1::2] = 2 * self.true_child
        self._tables["general_children"] = ch
        nan_child = np.where(self.missing_true, self.true_child, self.false_child)
        self._tables["nan2"] = np.repeat(2 * nan_child, 2)
        self._tables["feature2"] = np.repeat(self.feature, 2)
        self._tables["leaf_row2"] = np.repeat(self.leaf_row, 2)
        modes = set(np.unique(self.mode[inner]).tolist())
        self._tables["modes"] = sorted(modes)
        thr = self.threshold
        # Fast path: every comparison rewritten as "x <= t'", swapping the branches of > and >=.
        # Valid for non-NaN x; NaN x is routed with the nan2 table instead.
        self._tables["canonical"] = modes <= {LEQ, LT, GTE, GT}
        if self._tables["canonical"]:
            flip = (self.mode == GTE) | (self.mode == GT)
            cch = np.empty(2 * n, dtype=np.intp)
            cch[0::2] = 2 * np.where(flip, self.true_child, self.false_child)
            cch[1::2] = 2 * np.where(flip, self.false_child, self.true_child)
            self._tables["canonical_children"] = cch
        if MEMBER in modes:
            self._compile_members()
        self._tables["threshold"] = thr
        self._tables["ntrees"] = len(self.roots)
        return self

    def _measure_depth(self, is_leaf: np.ndarray) -> int:
        """Levels needed to bring every root to a leaf (a breadth-first walk over node sets)."""
        n = len(self.feature)
        frontier = np.unique(self.roots)
        if frontier.size and (frontier.min() < 0 or frontier.max() >= n):
            raise InvalidAttributeError(f"{self.label}: a tree root points to a node that does not exist.")
        depth = 0
        while True:
            frontier = frontier[~is_leaf[frontier]]
            if frontier.size == 0:
                return depth
            depth += 1
            if depth > n:
                raise InvalidAttributeError(f"{self.label}: the trees contain a cycle.")
            frontier = np.unique(np.concatenate([self.true_child[frontier], self.false_child[frontier]]))

    def _compile_members(self) -> None:
        """BRANCH_MEMBER sets as sorted (node, value-rank) keys, for a vectorized membership test."""
        nodes = np.array(sorted(self.members), dtype=np.intp)
        values = [np.asarray(self.members[k], dtype=np.float64) for k in nodes]
        universe = np.unique(np.concatenate(values)) if values else np.zeros(0)
        slot = np.full(len(self.feature), -1, dtype=np.intp)
        slot[nodes] = np.arange(len(nodes))
        keys = [
            slot[k] * (len(universe) + 1) + np.searchsorted(universe, v) for k, v in zip(nodes, values)
        ]
        self._tables["member_universe"] = universe
        self._tables["member_slot"] = slot
        self._tables["member_keys"] = np.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.intp)

    def _is_member(self, node: np.ndarray, xv: np.ndarray) -> np.ndarray:
        universe = self._tables["member_universe"]
        keys = self._tables["member_keys"]
        if universe.size == 0 or keys.size == 0:
            return np.zeros(node.shape, dtype=bool)
        xd = xv.astype(np.float64)
        pos = np.searchsorted(universe, xd)
        found = universe[np.minimum(pos, universe.size - 1)] == xd
        key = self._tables["member_slot"][node] * (universe.size + 1) + pos
        kpos = np.minimum(np.searchsorted(keys, key), keys.size - 1)
        return found & (keys[kpos] == key)

    def _canonical_threshold(self, dtype: np.dtype) -> np.ndarray:
        """Thresholds t' such that the node's condition is x <= t' (LEQ/LT) or x > t' (GTE/GT), in ``dtype``."""
        cache = self._tables.setdefault("cthr", {})
        out = cache.get(dtype)
        if out is None:
            t = self.threshold.astype(dtype)
            with np.errstate(invalid="ignore"):
                strict = (self.mode == LT) | (self.mode == GTE)
                # x < t  <=>  x <= the float just below t (same for x >= t, on the other branch)
                lowered = np.nextafter(t, np.array(-np.inf, dtype=dtype))
                t = np.where(strict, lowered, t)
                # x < -inf never holds and x >= -inf always does: x <= NaN is always false
                t = np.where(strict & np.isneginf(self.threshold), np.array(np.nan, dtype=dtype), t)
                # > NaN and >= NaN never hold: they must take the false branch, the c=1 side here
                t = np.where(
                    ((self.mode == GT) | (self.mode == GTE)) & np.isnan(self.threshold),
                    np.array(np.inf, dtype=dtype),
                    t,
                )
            out = cache[dtype] = np.repeat(t.astype(dtype), 2)
        return out

    # -- walking -----------------------------------------------------------------------------

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """Leaf rows ([N, T], rows of ``weights``) reached by every row of ``x`` in every tree."""
        n, nf = x.shape
        if nf < self.n_features:
            raise KernelError(
                f"{self.label} reads feature {self.n_features - 1} but the input has {nf} features."
            )
        ntrees = len(self.roots)
        out = np.empty((n, ntrees), dtype=np.intp)
        if n == 0 or ntrees == 0:
            return out
        step = max(1, _CHUNK_ELEMENTS // ntrees)
        canonical = self._tables["canonical"]
        if canonical:
            cdtype = np.result_type(x.dtype, self.threshold.dtype)
            thr2 = self._canonical_threshold(cdtype)
        for start in range(0, n, step):
            xc = x[start:start + step]
            if canonical:
                out[start:start + step] = self._walk_canonical(xc, thr2)
            else:
                out[start:start + step] = self._walk_general(xc)
        return out

    def _walk_canonical(self, x: np.ndarray, thr2: np.ndarray) -> np.ndarray:
        """Every comparison is ``x <= t'``: seven numpy calls per level."""
        t = self._tables
        feature2, children, nan2 = t["feature2"], t["canonical_children"], t["nan2"]
        n, nf = x.shape
        flat = np.ascontiguousarray(x).reshape(-1)
        has_nan = flat.dtype.kind == "f" and bool(np.isnan(flat).any())
        state = np.empty((n, len(self.roots)), dtype=np.intp)
        state[:] = 2 * self.roots
        rowoff = (np.arange(n, dtype=np.intp) * nf)[:, None]
        for _ in range(self.depth):
            f = feature2.take(state)
            f += rowoff
            xv = flat.take(f)
            c = xv <= thr2.take(state)
            if has_nan:
                nan = np.isnan(xv)
                after = children.take(state + c)
                after[nan] = nan2.take(state[nan])
                state = after
            else:
                state += c
                state = children.take(state)
        return t["leaf_row2"].take(state)

    def _walk_general(self, x: np.ndarray) -> np.ndarray:
        """Any mode (EQ, NEQ, BRANCH_MEMBER): one comparison per mode present, per level."""
        t = self._tables
        feature2, children, nan2, modes = t["feature2"], t["general_children"], t["nan2"], t["modes"]
        thr2 = self._tables.setdefault("thr2", np.repeat(self.threshold, 2))
        mode2 = self._tables.setdefault("mode2", np.repeat(self.mode, 2))
        n, nf = x.shape
        flat = np.ascontiguousarray(x).reshape(-1)
        has_nan = flat.dtype.kind == "f" and bool(np.isnan(flat).any())
        state = np.empty((n, len(self.roots)), dtype=np.intp)
        state[:] = 2 * self.roots
        rowoff = (np.arange(n, dtype=np.intp) * nf)[:, None]
        for _ in range(self.depth):
            f = feature2.take(state)
            f += rowoff
            xv = flat.take(f)
            tv = thr2.take(state)
            if len(modes) == 1 and modes[0] != MEMBER:
                c = _COMPARE[modes[0]](xv, tv)
            else:
                m = mode2.take(state)
                c = np.zeros(state.shape, dtype=bool)
                for code in modes:
                    sel = m == code
                    if code == MEMBER:
                        c[sel] = self._is_member(state[sel] >> 1, xv[sel])
                    else:
                        c[sel] = _COMPARE[code](xv[sel], tv[sel])
            after = children.take(state + c)
            if has_nan:
                # the spec sends NaN to the branch nodes_missing_value_tracks_true names, for
                # every mode (onnxruntime lets NaN != t hold for BRANCH_NEQ)
                nan = np.isnan(xv)
                after[nan] = nan2.take(state[nan])
            state = after
        return t["leaf_row2"].take(state)

    # -- aggregation -------------------------------------------------------------------------

    def aggregate(self, x: np.ndarray, aggregate: str = "SUM", need_has: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """Scores [N, targets] (float64) aggregated over the trees, and has-a-vote flags when asked.

        SUM adds every vote of the leaves reached; AVERAGE divides that sum by the number
        of trees; MIN/MAX keep the smallest/largest vote per target. A target without any
        vote scores 0. ``has`` is computed when ``need_has`` or for MIN/MAX.
        """
        leaf = self.leaves(x)
        n = leaf.shape[0]
        if aggregate in ("SUM", "AVERAGE"):
            w = self.weights
            scores = np.empty((n, self.n_targets), dtype=np.float64)
            step = max(1, _CHUNK_ELEMENTS // max(1, leaf.shape[1] * max(1, self.n_targets) // 4))
            for s in range(0, n, step):
                scores[s:s + step] = w.take(leaf[s:s + step], axis=0).sum(axis=1, dtype=np.float64)
            if aggregate == "AVERAGE" and leaf.shape[1]:
                scores /= leaf.shape[1]
            has = self._has(leaf) if need_has else None
            return scores, has
        extreme = self.wmin if aggregate == "MIN" else self.wmax
        reduce = np.min if aggregate == "MIN" else np.max
        if leaf.shape[1]:
            scores = reduce(extreme.take(leaf, axis=0), axis=1)
        else:
            scores = np.zeros((n, self.n_targets))
        has = self._has(leaf)
        scores = np.where(has, scores, 0.0)
        return scores, has

    def _has(self, leaf: np.ndarray) -> np.ndarray:
        all_has = self._tables.get("all_has")
        if all_has is None:
            all_has = self._tables["all_has"] = self._covers_every_target()
        if all_has:
            return np.ones((leaf.shape[0], self.n_targets), dtype=bool)
        return self.has.take(leaf, axis=0).any(axis=1)

    def _covers_every_target(self) -> bool:
        """Whether every row gets a vote for every target: for each target, some tree votes
        for it at every one of its reachable leaves (then ``has`` is all true, no gather needed)."""
        ntrees = len(self.roots)
        if ntrees == 0:
            return False
        is_leaf = self.mode == LEAF
        nodes, trees = self.roots.copy(), np.arange(ntrees)
        found_nodes, found_trees = [], []
        while nodes.size:  # one pass per level, all trees at once
            lf = is_leaf[nodes]
            found_nodes.append(nodes[lf])
            found_trees.append(trees[lf])
            inner_nodes, inner_trees = nodes[~lf], trees[~lf]
            nodes = np.concatenate([self.true_child[inner_nodes], self.false_child[inner_nodes]])
            trees = np.concatenate([inner_trees, inner_trees])
        leaf_nodes = np.concatenate(found_nodes)
        leaf_trees = np.concatenate(found_trees)
        votes = self.has[self.leaf_row[leaf_nodes]]  # [reached leaves, targets]
        leaves_per_tree = np.bincount(leaf_trees, minlength=ntrees)
        # count, per tree and target, the leaves voting for the target
        per_tree = np.zeros((ntrees, self.n_targets), dtype=np.intp)
        np.add.at(per_tree, leaf_trees, votes.astype(np.intp))
        return bool((per_tree == leaves_per_tree[:, None]).any(axis=0).all())


def leaf_tables(
    leaf_of_entry: np.ndarray, target: np.ndarray, weight: np.ndarray, n_leaves: int, n_targets: int, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Dense per-leaf tables from (leaf, target, weight) votes: sums, has-a-vote, minima, maxima.

    A leaf may vote several times, even for the same target: SUM adds the votes, MIN/MAX
    treat each vote on its own.
    """
    w = np.zeros((n_leaves, n_targets), dtype=np.float64)
    np.add.at(w, (leaf_of_entry, target), weight.astype(np.float64))
    has = np.zeros((n_leaves, n_targets), dtype=bool)
    has[leaf_of_entry, target] = True
    wmin = np.full((n_leaves, n_targets), np.inf)
    np.minimum.at(wmin, (leaf_of_entry, target), weight.astype(np.float64))
    wmax = np.full((n_leaves, n_targets), -np.inf)
    np.maximum.at(wmax, (leaf_of_entry, target), weight.astype(np.float64))
    return w.astype(dtype), has, wmin, wmax
