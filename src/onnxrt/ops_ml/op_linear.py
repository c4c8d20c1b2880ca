"""LinearClassifier and LinearRegressor (ml 1): one matrix product, then a score transform."""

from __future__ import annotations

import numpy as np

from ..compat import OffSpecOnce
from ..errors import InvalidAttributeError, KernelError
from .. import native as _jit
from ..ops_cpu._op import OpRun
from ..registry import register
from ._common import (
    ML_DOMAIN,
    add_columns,
    apply_transform,
    class_labels,
    post_transform_fn,
    probit,
)


def _rows(x: np.ndarray, op: OpRun) -> np.ndarray:
    """[N, F] float view of the input ([F] is one row; integers become float32)."""
    if x.ndim == 1:
        x = x.reshape(1, -1)
    elif x.ndim != 2:
        raise KernelError(f"{op.node_label()} expects an input of shape [N, F] or [F], got shape {list(x.shape)}.")
    if x.dtype.kind != "f":
        x = x.astype(np.float32)
    return x


def _weights(op: OpRun, coefficients: np.ndarray, n_out: int | None, x: np.ndarray) -> np.ndarray:
    """The [F, n_out] weight matrix for an input of F features (coefficients are row-major per
    output), in the input's dtype and contiguous; built once per (F, dtype) and cached on ``op``."""
    nf = x.shape[1]
    key = (nf, x.dtype)
    w = op._w_cache.get(key)
    if w is not None:
        return w
    if n_out is None:
        if nf == 0 or coefficients.size % nf:
            raise KernelError(
                f"{op.node_label()} has {coefficients.size} coefficients, not a multiple of the {nf} input features."
            )
        n_out = coefficients.size // nf
    if coefficients.size > n_out * nf and n_out * nf:
        # more coefficients than outputs x input width: onnxruntime reads the first
        # n_out * F of them, row-major per output, and ignores the rest (it refuses fewer)
        op._report(
            f"{op.node_label()} has {coefficients.size} coefficients, more than {n_out} outputs x {nf} input "
            f"features; the specification wants exactly {n_out * nf}. onnxrt uses the first {n_out * nf} "
            f"(row-major, {nf} per output), as onnxruntime does.",
            KernelError,
        )
        coefficients = coefficients[: n_out * nf]
    if coefficients.size != n_out * nf:
        raise KernelError(
            f"{op.node_label()} has {coefficients.size} coefficients, expected {n_out} x {nf} "
            f"for {n_out} outputs and {nf} input features."
        )
    w = op._w_cache[key] = np.ascontiguousarray(coefficients.reshape(n_out, nf).T.astype(x.dtype))
    return w


#: a tall, thin product (few features x few outputs) goes by blocks of this many rows
_BLOCK_ROWS = 512
#: the module of compiled kernels (numba), loaded through _jit.kernels
_JIT_ML = "onnxrt.native.ml_loops"
#: post_transform -> its code in native.ml_loops.linear_classify (-1: numpy applies it to the scores)
_JIT_TRANSFORMS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2}
#: multiply-adds per part when the compiled loop's rows split over the kernel pool
_JIT_PART_MACS = 2_000_000
_NO_LABELS = np.empty(0, dtype=np.int64)


def _jit_consts(op: OpRun, x: np.ndarray, n_out: int | None, n_labels: int | None = None) -> tuple | None:
    """What native.ml_loops.linear_classify needs for inputs like ``x`` (weights [C, F], intercepts
    [C] in x's dtype, rows per pool part, and two empty arrays standing for the outputs it
    is not asked for), cached on ``op`` per (features, dtype); None where the compiled path
    does not apply: another dtype than float32/float64, no feature, no score, or a
    classifier's binary encoding (one score, ``n_labels`` 2)."""
    key = (x.shape[1], x.dtype)
    consts = op._jit_cache.get(key)
    if consts is None:
        consts = False
        if (x.dtype == np.float32 or x.dtype == np.float64) and x.shape[1]:
            w = _weights(op, op._coef, n_out, x)
            nc = w.shape[1]
            if nc and not (nc == 1 and n_labels == 2):
                if n_labels is not None and nc > n_labels:
                    raise KernelError(f"{op.node_label()} computes {nc} scores but has {n_labels} class labels.")
                b = np.zeros(nc, x.dtype) if op._intercepts is None else op._intercepts.astype(x.dtype)
                no_scores, no_z = np.empty((0, nc), dtype=x.dtype), np.empty((0, nc), dtype=np.float32)
                consts = (np.ascontiguousarray(w.T), b, max(1, _JIT_PART_MACS // w.size), no_scores, no_z)
        op._jit_cache[key] = consts
    return consts or None


def _compiled_scores(k, x: np.ndarray, consts: tuple, transform: int,
                     labels: np.ndarray = _NO_LABELS) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(winners [N], scores [N, C] in x's dtype or None, transformed float32 scores or None)
    by native.ml_loops.linear_classify: winners are labels[i] for int64 ``labels``, else the
    indices i; the scores come back only when ``transform`` is -1 (then numpy transforms
    them). Rows split over the kernel pool by parts of about _JIT_PART_MACS multiply-adds."""
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
    _jit.split(n, lambda lo, hi: k.linear_classify(
        x[lo:hi], wt, b, transform, labels, winners[lo:hi], scores[lo:hi] if transform < 0 else scores,
        z[lo:hi] if transform >= 0 else z), min_part)
    return winners, scores, z


def linear_scores(x: np.ndarray, weights: np.ndarray, intercepts: np.ndarray | None) -> np.ndarray:
    """X @ W + b in the input's precision (float32 inputs stay float32, as onnxruntime's GEMM).

    A long, thin product is computed by blocks of 512 rows: each block is small enough for
    OpenBLAS to stay on the calling thread. Whole, it wakes OpenBLAS's helper threads, which
    on a busy machine takes milliseconds for microseconds of work (measured: 16 ms against
    0.3 ms for 10,000 x 20 by 20 x 3).
    """
    w = weights if x.dtype == weights.dtype else weights.astype(x.dtype)
    n = x.shape[0]
    if n > _BLOCK_ROWS and w.shape[0] * w.shape[1] <= 4096:
        out = np.empty((n, w.shape[1]), dtype=np.result_type(x.dtype, w.dtype))
        for start in range(0, n, _BLOCK_ROWS):
            np.matmul(x[start:start + _BLOCK_ROWS], w, out=out[start:start + _BLOCK_ROWS])
    else:
        out = x @ w
    if intercepts is not None:
        add_columns(out, intercepts.astype(out.dtype, copy=False))
    return out


@register("LinearClassifier", versions=(1,), domain=ML_DOMAIN)
class LinearClassifier(OpRun):
    """LinearClassifier (ml 1): scores = X W^T + intercepts, label = top score.

    The number of score columns is the number of intercepts (coefficients / features
    without intercepts). One score column with two labels is the binary encoding: the label
    is the second one when s > 0 and Z is [1 - s, s]; with LOGISTIC [1 - p, p], p = sigmoid(s);
    with PROBIT [-probit(s), probit(s)]. SOFTMAX and SOFTMAX_ZERO leave the pair as it is,
    as onnxruntime does (the spec does not define the binary case). ``multi_class`` has no
    effect, as in onnxruntime: the scores are the same for OvR and multinomial models, only
    their transform differs, and that is post_transform's job.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.labels = labels = class_labels(self, "classlabels_ints", "classlabels_strings", required=True)
        self._coef = np.asarray(self.coefficients, dtype=np.float32)
        self._intercepts = None if not self.intercepts else np.asarray(self.intercepts, dtype=np.float32)
        self._n_scores = None if self._intercepts is None else self._intercepts.size
        if self._n_scores is not None and self._n_scores > labels.size and not (self._n_scores == 1 and labels.size == 2):
            raise InvalidAttributeError(
                f"{self.node_label()} has {self._n_scores} intercepts (score columns) but {labels.size} class labels."
            )
        self._transform = post_transform_fn(self)
        self._transform_name = self.post_transform
        self._jit_transform = _JIT_TRANSFORMS.get(self.post_transform, -1)
        #: the labels the compiled kernel writes itself (int64 ones), or none
        self._jit_labels = labels if labels.dtype == np.int64 else _NO_LABELS
        self._jit_direct = self._jit_labels.size > 0 and self._jit_transform >= 0
        self._w_cache: dict[tuple[int, np.dtype], np.ndarray] = {}
        self._jit_cache: dict[tuple[int, np.dtype], tuple | bool] = {}
        self._report = OffSpecOnce(options.get("session_options"))

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        if self._jit_direct and x.ndim == 2 and x.flags.c_contiguous and (k := _jit.kernels(_JIT_ML)) is not None:
            # the common case (int64 labels, a compiled transform, the input seen before, few
            # rows) goes straight to the kernel: a single row costs a few microseconds
            consts = self._jit_cache.get((x.shape[1], x.dtype))
            if consts and x.shape[0] < 2 * consts[2]:
                winners = np.empty(x.shape[0], dtype=np.int64)
                z = np.empty((x.shape[0], consts[0].shape[0]), dtype=np.float32)
                k.linear_classify(x, consts[0], consts[1], self._jit_transform, self._jit_labels, winners, consts[3], z)
                return winners, z
        x = _rows(x, self)
        if (k := _jit.kernels(_JIT_ML)) is not None and (consts := _jit_consts(self, x, self._n_scores, self.labels.size)) is not None:
            # scores, label and transform in one compiled call (the binary encoding stays in numpy)
            winners, scores, z = _compiled_scores(k, x, consts, self._jit_transform, self._jit_labels)
            if self._jit_transform < 0:
                z = apply_transform(self._transform, scores).astype(np.float32, copy=False)
            return (winners if self._jit_labels.size else self.labels.take(winners)), z
        scores = linear_scores(x, _weights(self, self._coef, self._n_scores, x), self._intercepts)
        if scores.shape[1] == 1 and self.labels.size == 2:
            s = scores[:, 0]
            labels = self.labels.take((s > 0).astype(np.intp))
            name = self._transform_name
            if name == "LOGISTIC":
                p = apply_transform(self._transform, s)
                z = np.stack([1 - p, p], axis=1)
            elif name == "PROBIT":
                p = probit(s)
                z = np.stack([-p, p], axis=1)
            else:
                z = np.stack([1 - s, s], axis=1)
            return labels, z.astype(np.float32, copy=False)
        if scores.shape[1] > self.labels.size:
            raise KernelError(
                f"{self.node_label()} computes {scores.shape[1]} scores but has {self.labels.size} class labels."
            )
        labels = self.labels.take(scores.argmax(axis=1)) if scores.shape[1] else np.zeros(0, self.labels.dtype)
        z = apply_transform(self._transform, scores)
        return labels, z.astype(np.float32, copy=False)


@register("LinearRegressor", versions=(1,), domain=ML_DOMAIN)
class LinearRegressor(OpRun):
    """LinearRegressor (ml 1): Y = post_transform(X W^T + intercepts), W of shape [targets, F].

    The transform applies to every target count (onnxruntime skips LOGISTIC and the
    softmaxes when there is a single target; the spec does not make that exception).
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._coef = np.asarray(self.coefficients or [], dtype=np.float32)
        self._intercepts = None if not self.intercepts else np.asarray(self.intercepts, dtype=np.float32)
        if self.targets is None or self.targets < 1:
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'targets' is {self.targets!r}, expected a positive integer.")
        if self._intercepts is not None and self._intercepts.size != self.targets:
            raise InvalidAttributeError(
                f"{self.node_label()} has {self._intercepts.size} intercepts, expected {self.targets} (one per target)."
            )
        self._transform = post_transform_fn(self)
        self._jit_transform = _JIT_TRANSFORMS.get(self.post_transform, -1)
        self._w_cache: dict[tuple[int, np.dtype], np.ndarray] = {}
        self._jit_cache: dict[tuple[int, np.dtype], tuple | bool] = {}
        self._report = OffSpecOnce(options.get("session_options"))

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        x = _rows(x, self)
        if (k := _jit.kernels(_JIT_ML)) is not None and (consts := _jit_consts(self, x, self.targets)) is not None:
            _, y, z = _compiled_scores(k, x, consts, self._jit_transform)
            if self._jit_transform >= 0:
                return (z,)
        else:
            y = linear_scores(x, _weights(self, self._coef, self.targets, x), self._intercepts)
        return (apply_transform(self._transform, y).astype(np.float32, copy=False),)
