"""The vectorized core of the tree ensembles: node arrays walked level by level for all rows at once."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..parallel import parallel_for

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

#: rows x trees handled per chunk: the state arrays of one level stay in the CPU caches
#: (measured on a RandomForest of 100 trees: 1e5 elements walk 1.6x faster than 3e4 or 1e6)
_CHUNK_ELEMENTS = 100_000
#: at most this many targets are aggregated one by one (contiguous take + sum per target);
#: beyond, one [rows, trees, targets] gather
_PER_TARGET = 16
_NO_SCORES = np.zeros((0, 0), dtype=np.float64)
# Forest.aggregate is the reference walk (numpy, level by level for all rows at once). The
# compiled walk (native.tree_loops.forest_walk over :meth:`Forest._compiled_tables`) is a
# declared fast path of the tree operators: onnxrt/fastpaths/ml.py.


def _has_nan(flat: np.ndarray) -> bool:
    """Whether a float vector holds a NaN: one sum first (NaN, or inf - inf, makes it NaN)."""
    if flat.dtype.kind != "f" or flat.size == 0:
        return False
    return math.isnan(np.add.reduce(flat)) and bool(np.isnan(flat).any())


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
    #: the votes' weights as given (the classifiers' two-class rule looks at their signs)
    vote_weights: np.ndarray | None = None
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
        self._tables["leaf_row"] = self.leaf_row
        self._tables["roots2"] = 2 * self.roots
        modes = set(np.unique(self.mode[inner]).tolist())
        self._tables["modes"] = sorted(modes)
        # Fast path: every comparison rewritten as "x <= t'", swapping the branches of > and >=.
        # Valid for non-NaN x; NaN x is routed with the nan2 table instead.
        self._tables["canonical"] = modes <= {LEQ, LT, GTE, GT}
        if self._tables["canonical"]:
            flip = (self.mode == GTE) | (self.mode == GT)
            cch = np.empty(2 * n, dtype=np.intp)
            cch[0::2] = 2 * np.where(flip, self.true_child, self.false_child)
            cch[1::2] = 2 * np.where(flip, self.false_child, self.true_child)
            self._tables["canonical_children"] = cch
            # the last level maps straight to leaf rows (saves one take per chunk)
            self._tables["canonical_last"] = self.leaf_row.take(cch >> 1)
        if MEMBER in modes:
            self._compile_members()
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

    def _chunk_rows(self) -> int:
        return max(1, _CHUNK_ELEMENTS // max(1, len(self.roots)))

    def _check_features(self, x: np.ndarray) -> None:
        if x.shape[1] < self.n_features:
            raise KernelError(
                f"{self.label} reads feature {self.n_features - 1} but the input has {x.shape[1]} features."
            )

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """Leaf rows ([N, T], rows of ``weights``) reached by every row of ``x`` in every tree."""
        self._check_features(x)
        n, ntrees = x.shape[0], len(self.roots)
        out = np.empty((n, ntrees), dtype=np.intp)
        step = self._chunk_rows()
        walk = self._walker(x)
        for start in range(0, n, step):
            out[start:start + step] = walk(x[start:start + step])
        return out

    def _walker(self, x: np.ndarray):
        """The walk function for this input's dtype: the canonical one when every mode allows it."""
        walkers = self._tables.setdefault("walkers", {})
        walk = walkers.get(x.dtype)
        if walk is None:
            if self._tables["canonical"]:
                thr2 = self._canonical_threshold(np.result_type(x.dtype, self.threshold.dtype))
                walk = functools.partial(self._walk_canonical, thr2=thr2)
            else:
                walk = self._walk_general
            walkers[x.dtype] = walk
        return walk

    def _walk_canonical(self, x: np.ndarray, thr2: np.ndarray) -> np.ndarray:
        """Every comparison is ``x <= t'``: six numpy calls per level into reused buffers."""
        t = self._tables
        feature2, children = t["feature2"], t["canonical_children"]
        n, nf = x.shape
        ntrees = len(self.roots)
        flat = np.ascontiguousarray(x).reshape(-1)
        has_nan = _has_nan(flat)
        state = np.empty((n, ntrees), dtype=np.intp)
        state[:] = t["roots2"]
        after = np.empty_like(state)
        index = np.empty_like(state)
        xv = np.empty(state.shape, dtype=flat.dtype)
        tv = np.empty(state.shape, dtype=thr2.dtype)
        c = np.empty(state.shape, dtype=bool)
        rowoff = (np.arange(n, dtype=np.intp) * nf)[:, None] if n > 1 else None
        if self.depth == 0:
            return t["leaf_row2"].take(state)
        last = self.depth - 1
        # mode="wrap" skips take's bounds check and temporary copy: every index is valid
        for level in range(self.depth):
            feature2.take(state, out=index, mode="wrap")
            if rowoff is not None:
                index += rowoff
            flat.take(index, out=xv, mode="wrap")
            thr2.take(state, out=tv, mode="wrap")
            np.less_equal(xv, tv, out=c)
            if has_nan:
                nan = np.isnan(xv)
                nan_next = t["nan2"].take(state[nan])
            state += c
            (children if level < last else t["canonical_last"]).take(state, out=after, mode="wrap")
            if has_nan:
                after[nan] = nan_next if level < last else t["leaf_row"].take(nan_next >> 1)
            state, after = after, state
        return state

    def _walk_general(self, x: np.ndarray) -> np.ndarray:
        """Any mode (EQ, NEQ, BRANCH_MEMBER): one comparison per mode present, per level."""
        t = self._tables
        feature2, children, nan2, modes = t["feature2"], t["general_children"], t["nan2"], t["modes"]
        thr2 = self._tables.setdefault("thr2", np.repeat(self.threshold, 2))
        mode2 = self._tables.setdefault("mode2", np.repeat(self.mode, 2))
        n, nf = x.shape
        flat = np.ascontiguousarray(x).reshape(-1)
        has_nan = _has_nan(flat)
        state = np.empty((n, len(self.roots)), dtype=np.intp)
        state[:] = t["roots2"]
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

    def aggregate(self, x: np.ndarray, aggregate: str = "SUM", need_has: bool = False, threads: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Scores [N, targets] (float64) aggregated over the trees, and has-a-vote flags when asked.

        SUM adds every vote of the leaves reached; AVERAGE divides that sum by the number
        of trees; MIN/MAX keep the smallest/largest vote per target. A target without any
        vote scores 0. ``has`` is computed when ``need_has`` or for MIN/MAX. Rows go by
        chunks: each chunk is walked then aggregated while its leaves are still in cache.
        """
        self._check_features(x)
        n, ntrees, nt = x.shape[0], len(self.roots), self.n_targets
        scores = np.zeros((n, nt), dtype=np.float64)
        extreme = aggregate in ("MIN", "MAX")
        want_has = need_has or extreme
        has = np.zeros((n, nt), dtype=bool) if want_has else None
        if n == 0 or ntrees == 0:
            return scores, has
        all_has = want_has and self._all_has()
        walk = self._walker(x)
        step = self._chunk_rows()
        bounds = list(range(0, n, step)) + [n]

        def chunks(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                start, stop = bounds[i], bounds[i + 1]
                leaf = walk(x[start:stop])
                if extreme:
                    self._extreme_chunk(leaf, aggregate, scores[start:stop])
                else:
                    self._sum_chunk(leaf, scores[start:stop])
                if want_has and not all_has:
                    has[start:stop] = self.has.take(leaf, axis=0).any(axis=1)

        # chunks write disjoint rows: they share the kernel thread pool (numpy releases the
        # GIL in take and the comparisons), about 6 element operations per tree level
        if len(bounds) == 2:
            chunks(0, 1)
        else:
            parallel_for(len(bounds) - 1, chunks, work_per_item=step * ntrees * (6 * self.depth + 4), threads=threads)
        if want_has and all_has:
            has[:] = True
        if aggregate == "AVERAGE":
            scores /= ntrees
        if extreme and not all_has:
            scores[~has] = 0.0
        return scores, has

    def _compiled_tables(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The compiled walk's node table ([nodes, 4] uint32: feature, then the children for
        x > t, x <= t and NaN), canonical thresholds in the type inputs of ``dtype`` are
        compared in, leaf rows and roots (cached per input dtype)."""
        cache = self._tables.setdefault("compiled", {})
        out = cache.get(dtype)
        if out is None:
            dtype = np.result_type(dtype, self.threshold.dtype)
            cch = self._tables["canonical_children"] >> 1
            nan_child = self._tables["nan2"][0::2] >> 1
            # renumbered level by level (roots first, then their children, siblings side by
            # side): the first levels of every tree, visited by every row, share cache lines
            order = self._level_order()
            new = np.empty(len(order), dtype=np.intp)
            new[order] = np.arange(len(order))
            nodes = np.stack([self.feature[order], new[cch[0::2][order]], new[cch[1::2][order]], new[nan_child[order]]], axis=1)
            if len(nodes) and (nodes.max() >= 2**32 or self.leaf_row.max() >= 2**32):
                raise KernelError(f"{self.label}: more than 2**32 nodes or leaves.")
            thr = np.ascontiguousarray(self._canonical_threshold(dtype)[0::2][order])
            out = cache[dtype] = (
                nodes.astype(np.uint32), thr, self.leaf_row[order].astype(np.uintp), new[self.roots].astype(np.uintp)
            )
        return out

    def _level_order(self) -> np.ndarray:
        """Every node once: the roots, then the nodes one level down, and so on (children of
        a node next to each other), then the nodes no root reaches."""
        n = len(self.feature)
        is_leaf = self.mode == LEAF
        seen = np.zeros(n, dtype=bool)
        parts = []
        frontier = self.roots
        while frontier.size:
            _, first = np.unique(frontier, return_index=True)
            frontier = frontier[np.sort(first)]  # a node shared by two parents comes once
            frontier = frontier[~seen[frontier]]
            seen[frontier] = True
            parts.append(frontier)
            inner = frontier[~is_leaf[frontier]]
            frontier = np.stack([self.false_child[inner], self.true_child[inner]], axis=1).reshape(-1)
        parts.append(np.nonzero(~seen)[0])
        return np.concatenate(parts).astype(np.intp)

    def _per_target(self, table: np.ndarray, key: str) -> np.ndarray:
        """A [targets, leaves] contiguous copy of a [leaves, targets] table (cached)."""
        out = self._tables.get(key)
        if out is None:
            out = self._tables[key] = np.ascontiguousarray(table.T)
        return out

    def _sum_chunk(self, leaf: np.ndarray, out: np.ndarray) -> None:
        if self.n_targets <= _PER_TARGET:
            # one contiguous gather and row sum per target beats a [rows, trees, targets] gather
            wt = self._per_target(self.weights, "weights_t")
            for k in range(self.n_targets):
                out[:, k] = wt[k].take(leaf).sum(axis=1, dtype=np.float64)
        else:
            out[...] = self.weights.take(leaf, axis=0).sum(axis=1, dtype=np.float64)

    def _extreme_chunk(self, leaf: np.ndarray, aggregate: str, out: np.ndarray) -> None:
        table = self.wmin if aggregate == "MIN" else self.wmax
        reduce = np.min if aggregate == "MIN" else np.max
        if self.n_targets <= _PER_TARGET:
            wt = self._per_target(table, f"{aggregate}_t")
            for k in range(self.n_targets):
                out[:, k] = reduce(wt[k].take(leaf), axis=1)
        else:
            out[...] = reduce(table.take(leaf, axis=0), axis=1)

    def _all_has(self) -> bool:
        all_has = self._tables.get("all_has")
        if all_has is None:
            all_has = self._tables["all_has"] = self._covers_every_target()
        return all_has

    def _covers_every_target(self) -> bool:
        """Whether every row gets a vote for every target: for each target, some tree votes
        for it at every one of its reachable leaves (then ``has`` is all true, no gather needed)."""
        ntrees = len(self.roots)
        if ntrees == 0:
            return False
        is_leaf = self.mode == LEAF
        nodes, trees = self.roots.copy(), np.arange(ntrees)
        found_nodes, found_trees = [], []
        n = len(self.feature)
        while nodes.size:  # one pass per level, all trees at once
            lf = is_leaf[nodes]
            found_nodes.append(nodes[lf])
            found_trees.append(trees[lf])
            inner_nodes, inner_trees = nodes[~lf], trees[~lf]
            nodes = np.concatenate([self.true_child[inner_nodes], self.false_child[inner_nodes]])
            trees = np.concatenate([inner_trees, inner_trees])
            # a node shared by two parents (allowed in ml opset 5) is visited once per tree
            key = np.unique(trees * n + nodes)
            trees, nodes = key // n, key % n
        key = np.unique(np.concatenate(found_trees) * n + np.concatenate(found_nodes)) if found_nodes else np.zeros(0, np.intp)
        found_trees, found_nodes = [key // n], [key % n]
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
