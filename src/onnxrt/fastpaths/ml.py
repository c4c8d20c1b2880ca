"""Fast paths of the ai.onnx.ml kernels with compiled twins (reference kernels: onnxrt.ops_ml.op_linear,
op_svm, op_preprocessing).

- ``compiled linear``: LinearClassifier / LinearRegressor scores, label and transform in
  one compiled pass per row (native.ml_loops.linear_classify), rows over the kernel pool
  for large inputs; a few C-contiguous rows with int64 labels and a compiled transform
  call the kernel directly (logistic regression on one row: a few microseconds);
- ``compiled svm``: SVMClassifier (with support vectors) / SVMRegressor, a row's kernel
  values, decision values, votes and probabilities in one compiled pass
  (native.ml_loops.svm_predict);
- ``compiled rows``: Normalizer, one compiled pass per row (numpy's formula makes five to
  eight calls);
- ``compiled walk``: TreeEnsemble, TreeEnsembleRegressor and TreeEnsembleClassifier (SUM,
  AVERAGE; comparison splits): each row's walk through every tree in one compiled pass
  (native.tree_loops.forest_walk), the operator's post-processing as in the reference.

Every path is ``prepared``: its executor is built once per input signature (dtype, shape,
strides), so the per-call checks of the old direct shortcuts are the dispatcher's lookup.
The kernels compute the reference's formulas in the input's precision (float64 for SVM),
with the same transforms: tests/ml/test_fastpaths_ml.py compares them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import native
from ..dispatch import fast_path
from ..errors import KernelError
from ..parallel import parallel_for
from ..ops_ml import op_linear, op_svm
from ..ops_ml._common import ML_DOMAIN, apply_transform

#: the module of compiled kernels (numba), loaded through native.kernels
ML_LOOPS = "onnxrt.native.ml_loops"
#: post_transform -> its code in native.ml_loops.linear_classify (-1: numpy applies it to the scores)
LINEAR_TRANSFORMS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2}
#: multiply-adds per part when the linear kernel's rows split over the kernel pool
LINEAR_PART_MACS = 2_000_000
#: kernel_type -> the code of native.ml_loops.svm_predict
SVM_KIND_CODES = {name: i for i, name in enumerate(op_svm.KERNELS)}
#: multiply-adds (rows x support vectors x features) per part when the SVM kernel's rows
#: split over the kernel pool (about half a millisecond each)
SVM_PART_MACS = 4_000_000
#: norm -> its code in native.ml_loops.normalize_rows
NORM_CODES = {"MAX": 0, "L1": 1, "L2": 2}
#: elements per part when the Normalizer loop's rows split over the kernel pool
NORMALIZER_PART_ELEMENTS = 1 << 19

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_I32, _I64 = np.dtype(np.int32), np.dtype(np.int64)
_NO_LABELS = np.empty(0, dtype=np.int64)
_EMPTY = np.empty(0)
_nd = np.ndarray
Executor = Callable[..., tuple]


def _rows_input(x: Any, dtypes: tuple[np.dtype, ...]) -> bool:
    """An [N, F] or [F] array of one of ``dtypes`` (the reference reports anything else)."""
    return type(x) is _nd and (x.ndim == 1 or x.ndim == 2) and x.dtype in dtypes


# -- LinearClassifier, LinearRegressor -----------------------------------------------------------


def _linear_consts(op: Any, x: np.ndarray, n_out: int | None, n_labels: int | None = None) -> tuple | None:
    """What linear_classify needs for rows like ``x`` (weights [C, F], intercepts [C] in x's
    dtype, rows per pool part, and two empty arrays standing for the outputs it is not asked
    for), cached on ``op`` per (features, dtype); None where the compiled path does not
    apply: another dtype than float32/float64, no feature, no score, or a classifier's
    binary encoding (one score, ``n_labels`` 2), which the reference computes."""
    cache = op.__dict__.setdefault("_fast_linear", {})
    key = (x.shape[1], x.dtype)
    consts = cache.get(key)
    if consts is None:
        consts = False
        if (x.dtype == _F32 or x.dtype == _F64) and x.shape[1]:
            w = op_linear._weights(op, op._coef, n_out, x)
            nc = w.shape[1]
            if nc and not (nc == 1 and n_labels == 2):
                if n_labels is not None and nc > n_labels:
                    raise KernelError(f"{op.node_label()} computes {nc} scores but has {n_labels} class labels.")
                b = np.zeros(nc, x.dtype) if op._intercepts is None else op._intercepts.astype(x.dtype)
                no_scores, no_z = np.empty((0, nc), dtype=x.dtype), np.empty((0, nc), dtype=np.float32)
                consts = (np.ascontiguousarray(w.T), b, max(1, LINEAR_PART_MACS // w.size), no_scores, no_z)
        cache[key] = consts
    return consts or None


def _linear_scores(k: Any, x: np.ndarray, consts: tuple, transform: int,
                   labels: np.ndarray = _NO_LABELS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(winners [N], scores [N, C] in x's dtype, transformed float32 scores) by
    linear_classify: winners are labels[i] for int64 ``labels``, else the indices i; the
    scores come back only when ``transform`` is -1 (then numpy transforms them), the
    transformed ones otherwise. Rows split over the kernel pool by parts of about
    LINEAR_PART_MACS multiply-adds."""
    wt, b, min_part, scores, z = consts
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    n = x.shape[0]
    winners = np.empty(n, dtype=np.int64)
    if transform >= 0:
        z = np.empty((n, wt.shape[0]), dtype=np.float32)
    else:
        scores = np.empty((n, wt.shape[0]), dtype=x.dtype)
    if n < 2 * min_part:
        k.linear_classify(x, wt, b, transform, labels, winners, scores, z)
        return winners, scores, z
    native.split(n, lambda lo, hi: k.linear_classify(
        x[lo:hi], wt, b, transform, labels, winners[lo:hi], scores[lo:hi] if transform < 0 else scores,
        z[lo:hi] if transform >= 0 else z), min_part)
    return winners, scores, z


@fast_path("LinearClassifier", "compiled linear", domain=ML_DOMAIN, native=True, prepared=True,
           when=lambda op, x: _rows_input(x, (_F32, _F64, _I32, _I64)))
def linear_classifier_compiled(op: Any, x: np.ndarray) -> Executor | None:
    """LinearClassifier's scores, label and transform in one compiled pass per row (not the binary encoding).

    A few C-contiguous rows with int64 labels and a compiled transform (NONE, SOFTMAX,
    LOGISTIC) call the kernel directly; otherwise rows split over the pool and numpy
    applies the other transforms to the scores.
    """
    k = native.kernels(ML_LOOPS)
    if k is None:
        return None
    xr = op_linear._rows(x, op)
    consts = _linear_consts(op, xr, op._n_scores, op.labels.size)
    if consts is None:
        return None
    transform = LINEAR_TRANSFORMS.get(op.post_transform, -1)
    labels = op.labels if op.labels.dtype == np.int64 else _NO_LABELS
    n = xr.shape[0]
    if labels.size and transform >= 0 and xr is x and x.flags.c_contiguous and n < 2 * consts[2]:
        wt, b, _, no_scores, _ = consts
        nc = wt.shape[0]

        def direct(x: np.ndarray) -> tuple:
            winners = np.empty(n, dtype=np.int64)
            z = np.empty((n, nc), dtype=np.float32)
            k.linear_classify(x, wt, b, transform, labels, winners, no_scores, z)
            return winners, z

        return direct

    def run(x: np.ndarray) -> tuple:
        winners, scores, z = _linear_scores(k, op_linear._rows(x, op), consts, transform, labels)
        if transform < 0:
            z = apply_transform(op._transform, scores).astype(np.float32, copy=False)
        return (winners if labels.size else op.labels.take(winners)), z

    return run


@fast_path("LinearRegressor", "compiled linear", domain=ML_DOMAIN, native=True, prepared=True,
           when=lambda op, x: _rows_input(x, (_F32, _F64, _I32, _I64)))
def linear_regressor_compiled(op: Any, x: np.ndarray) -> Executor | None:
    """LinearRegressor's targets and transform in one compiled pass per row (numpy transforms PROBIT and SOFTMAX_ZERO)."""
    k = native.kernels(ML_LOOPS)
    if k is None:
        return None
    consts = _linear_consts(op, op_linear._rows(x, op), op.targets)
    if consts is None:
        return None
    transform = LINEAR_TRANSFORMS.get(op.post_transform, -1)

    def run(x: np.ndarray) -> tuple:
        _, y, z = _linear_scores(k, op_linear._rows(x, op), consts, transform)
        if transform >= 0:
            return (z,)
        return (apply_transform(op._transform, y).astype(np.float32, copy=False),)

    return run


# -- SVMClassifier, SVMRegressor ---------------------------------------------------------------


def _svm_args(op: Any, wt: np.ndarray, bias: np.ndarray, n_classes: int, prob: tuple | None,
              labels: np.ndarray) -> tuple[tuple, int]:
    """svm_predict's constant arguments and the rows per pool part, bound once per node."""
    bound = op.__dict__.get("_fast_svm")
    if bound is None:
        pa, pb = prob if prob is not None else (_EMPTY, _EMPTY)
        # float32 vectors when they are float32 values (always, from ONNX attributes): the
        # kernel is bound by memory traffic
        sv32 = op._sv.astype(np.float32)
        svt = np.ascontiguousarray((sv32 if np.array_equal(sv32, op._sv) else op._sv).T)
        sq = op._gamma * op._sv_sq if op._kernel == "RBF" else _EMPTY
        args = (svt, sq, SVM_KIND_CODES[op._kernel], op._gamma, op._coef0, op._degree, wt, bias, n_classes, pa, pb, labels)
        bound = op.__dict__["_fast_svm"] = (args, max(1, SVM_PART_MACS // max(1, op._sv.size)))
    return bound


def _svm_predict(k: Any, x: np.ndarray, args: tuple, min_part: int, n_dec: int, n_classes: int, with_probs: bool,
                 probs_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(decision values [N, n_dec], winners [N] or [0], probabilities [N, classes] or [0, 0])
    by svm_predict; rows go to the kernel pool by parts of about SVM_PART_MACS multiply-adds."""
    n = x.shape[0]
    dec = np.empty((n, n_dec))
    winners = np.empty(n if n_classes else 0, dtype=np.int64)
    probs = np.empty((n, n_classes) if with_probs else (0, 0), dtype=probs_dtype)
    if n < 2 * min_part:
        k.svm_predict(x, *args, dec, winners, probs)
    else:
        native.split(n, lambda lo, hi: k.svm_predict(x[lo:hi], *args, dec[lo:hi], winners[lo:hi], probs[lo:hi]), min_part)
    return dec, winners, probs


def _svm_rows(op: Any, x: np.ndarray) -> np.ndarray:
    """[N, F] rows for svm_predict (contiguous float32 as they are, else float64), F checked."""
    x = op_svm._rows(x, op, compiled=True)
    op._check_features(x)
    return x


@fast_path("SVMClassifier", "compiled svm", domain=ML_DOMAIN, native=True, prepared=True,
           when=lambda op, x: op._svc and _rows_input(x, (_F32, _F64, _I32, _I64)))
def svm_classifier_compiled(op: Any, x: np.ndarray) -> Executor | None:
    """SVMClassifier with support vectors: kernel values, one-vs-one votes and libsvm's probabilities in one compiled pass per row.

    Probabilities without a post_transform come out as float32 directly (with int64
    labels and a few float32 rows, one kernel call and nothing else).
    """
    k = native.kernels(ML_LOOPS)
    if k is None:
        return None
    labels = op.labels if op.labels.dtype == np.int64 else _NO_LABELS
    args, min_part = _svm_args(op, op._pair_weights_t, op._rho, op._k, op._prob, labels)
    direct = op._prob is not None and op._transform is None
    probs_dtype = _F32 if direct else _F64
    n_dec, n_classes, with_probs = op._rho.size, op._k, op._prob is not None

    def run(x: np.ndarray) -> tuple:
        dec, winners, probs = _svm_predict(k, _svm_rows(op, x), args, min_part, n_dec, n_classes, with_probs, probs_dtype)
        out = winners if labels.size else op.labels.take(winners)
        return out, (probs if direct else op._scores_out(dec, probs))

    return run


@fast_path("SVMRegressor", "compiled svm", domain=ML_DOMAIN, native=True, prepared=True,
           when=lambda op, x: op._sv is not None and _rows_input(x, (_F32, _F64, _I32, _I64)))
def svm_regressor_compiled(op: Any, x: np.ndarray) -> Executor | None:
    """SVMRegressor with support vectors: the kernel values and their weighted sum in one compiled pass per row."""
    k = native.kernels(ML_LOOPS)
    if k is None:
        return None
    args, min_part = _svm_args(op, op._coef_t, op._bias, 0, None, _NO_LABELS)

    def run(x: np.ndarray) -> tuple:
        dec = _svm_predict(k, _svm_rows(op, x), args, min_part, 1, 0, False, _F64)[0]
        return op._output(dec)

    return run


# -- Normalizer --------------------------------------------------------------------------------


@fast_path("Normalizer", "compiled rows", domain=ML_DOMAIN, native=True, prepared=True,
           when=lambda op, x: _rows_input(x, (_F32, _F64, _I32, _I64)) and x.shape[-1] > 0)
def normalizer_compiled(op: Any, x: np.ndarray) -> Executor | None:
    """Normalizer (MAX, L1, L2) in one compiled pass per row, rows over the pool for large inputs."""
    k = native.kernels(ML_LOOPS)
    if k is None:
        return None
    code = NORM_CODES[op.norm]
    shape = x.shape
    c = shape[-1]
    n = x.size // c
    part = max(1, NORMALIZER_PART_ELEMENTS // c)
    if x.ndim == 2 and x.dtype.kind == "f" and x.flags.c_contiguous and n < 2 * part:

        def direct(x: np.ndarray) -> tuple:
            out = np.empty(shape, dtype=_F32)
            k.normalize_rows(x, code, out)
            return (out,)

        return direct

    def run(x: np.ndarray) -> tuple:
        rows = np.ascontiguousarray(x.reshape(n, c), dtype=x.dtype if x.dtype.kind == "f" else _F32)
        out = np.empty((n, c), dtype=_F32)
        if n < 2 * part:
            k.normalize_rows(rows, code, out)
        else:
            native.split(n, lambda lo, hi: k.normalize_rows(rows[lo:hi], code, out[lo:hi]), part)
        return (out.reshape(shape),)

    return run


# -- TreeEnsemble, TreeEnsembleRegressor, TreeEnsembleClassifier ------------------------------------

#: the module of the compiled tree walk
TREE_LOOPS = "onnxrt.native.tree_loops"
#: node steps (rows x trees x depth) per part of a compiled walk shared over the pool
TREE_PART_STEPS = 1 << 21
#: at most this many C-contiguous rows (without "has a vote" flags) go to the compiled walk
#: with the fewest Python steps: one row through a model is mostly per-call cost
TREE_FEW_ROWS = 64
_NO_LEAVES = np.zeros((0, 0), dtype=np.intp)


def _tree_walk(forest: Any, k: Any, x: np.ndarray, aggregate: str, need_has: bool = False,
               threads: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """:meth:`Forest.aggregate`'s (scores, has) for SUM or AVERAGE of float rows by the
    compiled walk (native.tree_loops.forest_walk): each row's leaves and their votes in one
    pass; rows split over the pool from a few million node steps."""
    n = x.shape[0]
    if n <= TREE_FEW_ROWS and not need_has and x.flags.c_contiguous and x.shape[1] >= forest.n_features:
        fast = forest._tables.get(("few_rows", x.dtype))
        if fast is None:
            nodes, thr, leaf_row, roots = forest._compiled_tables(x.dtype)
            fast = forest._tables[("few_rows", x.dtype)] = (nodes, thr, leaf_row, roots, np.ascontiguousarray(forest.weights))
        nodes, thr, leaf_row, roots, weights = fast
        scores = np.zeros((n, forest.n_targets))
        k.forest_walk(x.reshape(-1), x.shape[1], 0, n, nodes, thr, leaf_row, roots, forest.depth, weights, _NO_LEAVES, scores)
        if aggregate == "AVERAGE":
            scores /= len(roots)
        return scores, None
    forest._check_features(x)
    ntrees = len(forest.roots)
    scores = np.zeros((n, forest.n_targets), dtype=np.float64)
    has = np.zeros((n, forest.n_targets), dtype=bool) if need_has else None
    if n == 0:
        return scores, has
    all_has = need_has and forest._all_has()
    nf = x.shape[1]
    flat = np.ascontiguousarray(x).reshape(-1)
    nodes, thr, leaf_row, roots = forest._compiled_tables(x.dtype)
    leaves = np.empty((n, ntrees), dtype=np.intp) if need_has and not all_has else _NO_LEAVES
    weights = forest._tables.get("weights_c")
    if weights is None:
        weights = forest._tables["weights_c"] = np.ascontiguousarray(forest.weights)
    depth = forest.depth
    steps = max(1, ntrees * max(depth, 1))
    part = max(1, TREE_PART_STEPS // steps)
    if n < 2 * part:
        k.forest_walk(flat, nf, 0, n, nodes, thr, leaf_row, roots, depth, weights, leaves, scores)
    else:
        bounds = list(range(0, n, part)) + [n]
        parallel_for(len(bounds) - 1, lambda lo, hi: k.forest_walk(
            flat, nf, bounds[lo], bounds[hi], nodes, thr, leaf_row, roots, depth, weights, leaves, scores),
            work_per_item=part * steps, threads=threads)
    if need_has:
        if all_has:
            has[:] = True
        else:
            has[:] = forest.has.take(leaves, axis=0).any(axis=1)
    if aggregate == "AVERAGE":
        scores /= ntrees
    return scores, has


def _tree_when(op: Any, x: Any) -> bool:
    """Rows of numbers (compared as floats), a SUM or AVERAGE of trees with <, <=, >, >= splits only."""
    forest = op.forest
    return (type(x) is _nd and (x.ndim == 1 or x.ndim == 2) and x.dtype.kind in "fiu"
            and getattr(op, "_aggregate", "SUM") in ("SUM", "AVERAGE")
            and bool(forest._tables["canonical"]) and len(forest.roots) > 0)


@fast_path(("TreeEnsemble", "TreeEnsembleRegressor", "TreeEnsembleClassifier"), "compiled walk", domain=ML_DOMAIN,
           native=True, prepared=True, when=_tree_when)
def tree_ensemble_compiled(op: Any, x: np.ndarray) -> Executor | None:
    """Tree ensembles (SUM, AVERAGE; comparison splits): each row's walk through every tree in one compiled pass.

    The operator's own post-processing (base values, transform, labels) runs on the
    scores as in the reference (its ``_predict``); up to TREE_FEW_ROWS contiguous rows
    take the walk with the fewest Python steps.
    """
    k = native.kernels(TREE_LOOPS)
    if k is None:
        return None
    forest = op.forest

    def walk(x: np.ndarray, aggregate: str, need_has: bool = False, threads: int | None = None) -> tuple:
        return _tree_walk(forest, k, x, aggregate, need_has, threads)

    return lambda x: op._predict(x, walk)
