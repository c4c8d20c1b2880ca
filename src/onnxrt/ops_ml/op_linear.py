"""LinearClassifier and LinearRegressor (ml 1): one matrix product, then a score transform."""

from __future__ import annotations

import numpy as np

from ..compat import OffSpecOnce
from ..errors import InvalidAttributeError, KernelError
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

# The classes' _run are the reference kernels (BLAS through numpy, numpy transforms). The
# compiled kernel computing scores, label and transform in one pass (native.ml_loops) is a
# declared fast path: onnxrt/fastpaths/ml.py.

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
        self._w_cache: dict[tuple[int, np.dtype], np.ndarray] = {}
        self._report = OffSpecOnce(options.get("session_options"))

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        x = _rows(x, self)
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
        self._w_cache: dict[tuple[int, np.dtype], np.ndarray] = {}
        self._report = OffSpecOnce(options.get("session_options"))

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        x = _rows(x, self)
        y = linear_scores(x, _weights(self, self._coef, self.targets, x), self._intercepts)
        return (apply_transform(self._transform, y).astype(np.float32, copy=False),)
