"""SVMClassifier and SVMRegressor (ml 1): vectorized kernels, one-vs-one votes, libsvm probabilities."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..ops_cpu._op import OpRun
from ..registry import register
from ._common import (
    ML_DOMAIN,
    add_columns,
    apply_transform,
    check_choice,
    class_labels,
    post_transform_fn,
    probit,
)

KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")


# The classes' _run are the reference kernels (kernel matrix by blocks and BLAS, numpy
# votes, libsvm's coupling). The compiled kernel doing a row's whole prediction in one pass
# (native.ml_loops.svm_predict) is a declared fast path: onnxrt/fastpaths/ml.py.


def rbf_constants(sv: np.ndarray, gamma: float, sv_sq: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """((2 gamma) sv^T contiguous, gamma |sv|^2): what :func:`kernel_matrix`'s RBF reuses."""
    sq = sv_sq if sv_sq is not None else (sv * sv).sum(axis=1)
    return np.ascontiguousarray((2 * gamma) * sv.T), gamma * sq


def kernel_matrix(x: np.ndarray, sv: np.ndarray, kind: str, gamma: float, coef0: float, degree: float,
                  sv_sq: np.ndarray | None = None, rbf: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """K[n, k] = kernel(x_n, sv_k) for every row and support vector, in float64.

    LINEAR: <x, sv>; POLY: (gamma <x, sv> + coef0) ^ degree; RBF: exp(-gamma |x - sv|^2);
    SIGMOID: tanh(gamma <x, sv> + coef0). The RBF exponent is built in place from one
    matrix product, 2 gamma <x, sv> - gamma |sv|^2 - gamma |x|^2, clipped at 0 against
    rounding; ``rbf`` holds :func:`rbf_constants` precomputed (else derived from sv).
    """
    if kind == "RBF":
        svt2g, gsq = rbf if rbf is not None else rbf_constants(sv, gamma, sv_sq)
        k = x @ svt2g
        k -= gsq
        k -= (gamma * np.einsum("ij,ij->i", x, x))[:, None]
        np.minimum(k, 0, out=k)
        return np.exp(k, out=k)
    k = x @ sv.T
    if kind == "LINEAR":
        return k
    if gamma != 1:
        k *= gamma
    if coef0:
        k += coef0
    if kind == "SIGMOID":
        return np.tanh(k, out=k)
    if degree == int(degree):
        return k ** int(degree)
    return np.power(k, degree, out=k)


#: rows per block of the kernel matrix: a [rows, support vectors] block stays in cache
_KERNEL_BLOCK = 1 << 20
#: products below this many multiply-adds run on the calling thread, by blocks of at most
#: _SINGLE_THREAD_MACS (OpenBLAS keeps those single-threaded)
_SMALL_PRODUCT = 64_000_000
_SINGLE_THREAD_MACS = 500_000


def sigmoid_predict(dec: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Platt's probability 1 / (1 + exp(dec * A + B)), without overflow (libsvm's sigmoid_predict)."""
    f = dec * a + b
    e = np.exp(-np.abs(f))
    return np.where(f >= 0, e / (1 + e), 1 / (1 + e))


def pairwise_coupling(r: np.ndarray, max_iter: int = 100) -> np.ndarray:
    """Class probabilities [N, k] from pairwise probabilities r[N, i, j] = P(i | i or j).

    Method 2 of Wu, Lin and Weng (2004), "Probability estimates for multi-class
    classification by pairwise coupling", the one libsvm (and so scikit-learn's SVC)
    implements: minimise p^T Q p under sum(p) = 1 with Q[t, t] = sum_{j != t} r[j, t]^2 and
    Q[t, j] = -r[j, t] r[t, j], by coordinate updates until max_t |(Qp)_t - p^T Q p| < 0.005 / k
    (at most max(100, k) sweeps). Every row runs the same sequence of updates and stops
    changing once it has converged, as it would alone. A batch of a few rows is solved with
    Python floats (numpy's per-call cost dominates there); larger batches are vectorized over
    rows, looping over sweeps and classes only.
    """
    n, k = r.shape[0], r.shape[1]
    iterations = max(max_iter, k)
    eps = 0.005 / k
    if n <= 4:
        return np.array([_coupling_one(row, k, iterations, eps) for row in r.tolist()]).reshape(n, k)
    rt = np.swapaxes(r, 1, 2)  # rt[:, t, j] = r[:, j, t]
    q = -rt * r
    idx = np.arange(k)
    q[:, idx, idx] = (rt * rt).sum(axis=2) - rt[:, idx, idx] ** 2
    # class-major layout: q[t, j] and p[t] are contiguous [rows] vectors
    qc = np.ascontiguousarray(q.transpose(1, 2, 0))
    p = np.full((k, n), 1.0 / k)
    result = np.empty((n, k))
    rows = np.arange(n)
    for _ in range(iterations):
        qp = (qc * p[None, :, :]).sum(axis=1)
        pqp = (p * qp).sum(axis=0)
        converged = np.abs(qp - pqp).max(axis=0) < eps
        if converged.any():
            # converged rows are final: store them and go on with the others only
            result[rows[converged]] = p[:, converged].T
            keep = ~converged
            if not keep.any():
                return result
            rows, p, qp, pqp, qc = rows[keep], p[:, keep], qp[:, keep], pqp[keep], qc[:, :, keep]
        for t in range(k):
            qtt = qc[t, t]
            diff = (pqp - qp[t]) / qtt
            p[t] += diff
            scale = 1 + diff
            pqp = (pqp + diff * (diff * qtt + 2 * qp[t])) / (scale * scale)
            qp += diff * qc[t]
            qp /= scale
            p /= scale
    result[rows] = p.T
    return result


def _coupling_one(r: list[list[float]], k: int, iterations: int, eps: float) -> list[float]:
    """The coupling of one row with Python floats (r as nested lists)."""
    q = [[-r[j][t] * r[t][j] for j in range(k)] for t in range(k)]
    for t in range(k):
        q[t][t] = sum(r[j][t] * r[j][t] for j in range(k) if j != t)
    p = [1.0 / k] * k
    for _ in range(iterations):
        qp = [sum(q[t][j] * p[j] for j in range(k)) for t in range(k)]
        pqp = sum(p[t] * qp[t] for t in range(k))
        if max(abs(qp[t] - pqp) for t in range(k)) < eps:
            break
        for t in range(k):
            qtt = q[t][t]
            diff = (-qp[t] + pqp) / qtt
            p[t] += diff
            scale = 1 + diff
            pqp = (pqp + diff * (diff * qtt + 2 * qp[t])) / (scale * scale)
            qt = q[t]
            qp = [(qp[j] + diff * qt[j]) / scale for j in range(k)]
            p = [v / scale for v in p]
    return p


def _rows(x: np.ndarray, op: OpRun, compiled: bool = False) -> np.ndarray:
    """[N, F] contiguous float64, the input itself when it already is (nothing writes to
    it); for the ``compiled`` kernel, a contiguous float32 input stays as it is."""
    if x.ndim == 1:
        x = x.reshape(1, -1)
    elif x.ndim != 2:
        raise KernelError(f"{op.node_label()} expects an input of shape [N, F] or [F], got shape {list(x.shape)}.")
    if compiled and x.dtype == np.float32 and x.flags.c_contiguous:
        return x
    return np.ascontiguousarray(x, dtype=np.float64)


class _SVMBase(OpRun):
    """Kernel attributes shared by both SVM operators."""

    def _read_kernel(self) -> None:
        self._kernel = check_choice(self, "kernel_type", self.kernel_type, KERNELS)
        params = list(self.kernel_params or [])
        params += [0.0] * (3 - len(params))
        self._gamma, self._coef0, self._degree = (float(v) for v in params[:3])
        self._transform = post_transform_fn(self)
        self._transform_name = self.post_transform

    def _set_vectors(self, sv: np.ndarray) -> None:
        """The support vectors [n_sv, F]; the constants of either path are built at its first run."""
        self._sv = sv
        self._sv_sq = (sv * sv).sum(axis=1)
        self._rbf = None  # rbf_constants

    def _rbf_constants(self) -> tuple[np.ndarray, np.ndarray]:
        if self._rbf is None:
            self._rbf = rbf_constants(self._sv, self._gamma, self._sv_sq)
        return self._rbf

    def _check_features(self, x: np.ndarray) -> None:
        if x.shape[1] != self._sv.shape[1]:
            raise KernelError(
                f"{self.node_label()} has support vectors of {self._sv.shape[1]} features, the input has {x.shape[1]}."
            )

    def _kernel_product(self, x: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """K(x, SV) @ weights, the kernel matrix built by blocks of rows (never whole)."""
        self._check_features(x)
        if self._kernel == "RBF":
            self._rbf_constants()
        n = x.shape[0]
        n_sv, nf = self._sv.shape
        if n * n_sv * nf < _SMALL_PRODUCT:
            # blocks under OpenBLAS's threading threshold (about 1e6 multiply-adds): waking its
            # helper threads costs milliseconds on a busy machine, more than such a product
            step = max(1, _SINGLE_THREAD_MACS // max(1, n_sv * nf))
        else:
            step = max(1, _KERNEL_BLOCK // max(1, n_sv))
        if n <= step:
            return kernel_matrix(x, self._sv, self._kernel, self._gamma, self._coef0, self._degree, self._sv_sq, self._rbf) @ weights
        out = np.empty((n,) + weights.shape[1:], dtype=np.float64)
        for start in range(0, n, step):
            block = kernel_matrix(x[start:start + step], self._sv, self._kernel, self._gamma, self._coef0, self._degree, self._sv_sq, self._rbf)
            out[start:start + step] = block @ weights
        return out


@register("SVMClassifier", versions=(1,), domain=ML_DOMAIN)
class SVMClassifier(_SVMBase):
    """SVMClassifier (ml 1).

    With ``vectors_per_class`` (libsvm's SVC): one decision value per pair of classes
    (i < j), d = sum over the SVs of i of coef[j-1] K + sum over the SVs of j of coef[i] K
    + rho[pair]; i gets the vote when d > 0; the label is the class with the most votes
    (the first on ties), as scikit-learn's predict. Z holds the pairwise decision values, or,
    with prob_a/prob_b, the class probabilities of libsvm's pairwise coupling. Without
    support vectors the model is linear: one score per class, X coef^T + rho[0] (onnxruntime
    adds the first rho to every class).

    Two classes, as onnxruntime (the spec leaves it open): Z is [-d, d] ([1 - d, d] under
    SOFTMAX/SOFTMAX_ZERO, [sigmoid(-d), sigmoid(d)] under LOGISTIC, [-probit(d), probit(d)]
    under PROBIT), or the probabilities [P(0), P(1)] then the transform. A linear model with a
    single score column gives the second label when s > 0.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        label = self.node_label()
        self._read_kernel()
        self.labels = labels = class_labels(self, "classlabels_ints", "classlabels_strings", required=True)
        self._coef = np.asarray(self.coefficients or [], dtype=np.float64)
        self._rho = np.asarray(self.rho or [], dtype=np.float64)
        vpc = self.vectors_per_class
        self._svc = bool(vpc) and bool(self.support_vectors)
        prob_a, prob_b = self.prob_a or [], self.prob_b or []
        if len(prob_a) != len(prob_b):
            raise InvalidAttributeError(
                f"{label}: attributes 'prob_a' and 'prob_b' have {len(prob_a)} and {len(prob_b)} values, expected the same count."
            )
        self._prob = (np.asarray(prob_a, np.float64), np.asarray(prob_b, np.float64)) if prob_a else None
        if self._svc:
            vpc = np.asarray(vpc, dtype=np.int64)
            k = vpc.size
            n_sv = int(vpc.sum())
            sv = np.asarray(self.support_vectors, dtype=np.float64)
            if n_sv == 0 or sv.size % n_sv:
                raise InvalidAttributeError(
                    f"{label} has {sv.size} support vector values, not a multiple of the {n_sv} vectors of 'vectors_per_class'."
                )
            self._set_vectors(sv.reshape(n_sv, -1))
            if self._coef.size != (k - 1) * n_sv:
                raise InvalidAttributeError(
                    f"{label} has {self._coef.size} coefficients, expected {(k - 1) * n_sv} ((classes - 1) x support vectors)."
                )
            n_pairs = k * (k - 1) // 2
            if self._rho.size != n_pairs:
                raise InvalidAttributeError(f"{label} has {self._rho.size} rho values, expected {n_pairs} (one per pair of classes).")
            if self._prob is not None and self._prob[0].size != n_pairs:
                raise InvalidAttributeError(
                    f"{label} has {self._prob[0].size} values in 'prob_a', expected {n_pairs} (one per pair of classes)."
                )
            if labels.size < k:
                raise InvalidAttributeError(f"{label} has {k} classes in 'vectors_per_class' but {labels.size} class labels.")
            self._k = k
            self._pairs = np.triu_indices(k, 1)
            self._pair_weights = self._pair_matrix(vpc, self._coef.reshape(k - 1, n_sv))
            self._pair_weights_t = np.ascontiguousarray(self._pair_weights.T)
        else:
            self._k = None

    @staticmethod
    def _pair_matrix(vpc: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """[n_sv, n_pairs] weights so that decision values are K @ W + rho (one matrix product).

        Pair (i, j) weighs class i's vectors by coef[j - 1] and class j's by coef[i]. A loop over
        the pairs of classes, at construction.
        """
        k = vpc.size
        starts = np.concatenate([[0], np.cumsum(vpc)])
        w = np.zeros((coef.shape[1], k * (k - 1) // 2))
        p = 0
        for i in range(k):
            for j in range(i + 1, k):
                si, sj = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
                w[si, p] = coef[j - 1, si]
                w[sj, p] = coef[i, sj]
                p += 1
        return w

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        x = _rows(x, self)
        if not self._svc:
            return self._linear(x)
        dec = add_columns(self._kernel_product(x, self._pair_weights), self._rho)
        labels = self.labels.take(self._votes(dec))
        # the coupling runs for two classes too (scikit-learn's libsvm does; the iteration
        # stops at a tolerance, so its result differs from r[0, 1] by up to ~5e-3)
        probs = None if self._prob is None else pairwise_coupling(self._pairwise_probabilities(dec))
        return labels, self._scores_out(dec, probs)

    def _scores_out(self, dec: np.ndarray, probs: np.ndarray | None) -> np.ndarray:
        """The second output from the decision values and the probabilities (when prob_a/prob_b)."""
        if self._prob is not None:
            return apply_transform(self._transform, probs).astype(np.float32)
        if self._k == 2:
            return self._binary_pair(dec[:, 0])
        return apply_transform(self._transform, dec).astype(np.float32)

    def _votes(self, dec: np.ndarray) -> np.ndarray:
        """The one-vs-one winner of each row: i wins pair (i, j) when d > 0, the first class
        with the most wins is the label."""
        if self._k == 2:
            return (dec[:, 0] <= 0).astype(np.intp)
        # the winner of each pair, then one count per class (a [N, pairs, k] comparison)
        ii, jj = self._pairs
        winners = np.where(dec > 0, ii, jj)
        votes = (winners[:, :, None] == np.arange(self._k)).sum(axis=1)
        return votes.argmax(axis=1)

    def _pairwise_probabilities(self, dec: np.ndarray) -> np.ndarray:
        """r[N, i, j] = P(i | i or j) by Platt's sigmoid, clipped to [1e-7, 1 - 1e-7] as libsvm does."""
        k = self._k
        ii, jj = self._pairs
        rij = np.clip(sigmoid_predict(dec, *self._prob), 1e-7, 1 - 1e-7)
        r = np.zeros((dec.shape[0], k, k))
        r[:, ii, jj] = rij
        r[:, jj, ii] = 1 - rij
        return r

    def _binary_pair(self, d: np.ndarray) -> np.ndarray:
        name = self._transform_name
        if name in ("SOFTMAX", "SOFTMAX_ZERO"):
            z = np.stack([1 - d, d], axis=1)
        elif name == "PROBIT":
            p = probit(d)
            z = np.stack([-p, p], axis=1)
        else:
            z = apply_transform(self._transform, np.stack([-d, d], axis=1))
        return z.astype(np.float32)

    def _linear(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        nf = x.shape[1]
        if nf == 0 or self._coef.size % nf:
            raise KernelError(
                f"{self.node_label()} has {self._coef.size} coefficients, not a multiple of the {nf} input features."
            )
        w = self._coef.reshape(-1, nf)
        scores = x @ w.T
        if self._rho.size:
            # the spec does not say how rho applies to a linear model; onnxruntime adds rho[0]
            # to every class score, and so does onnxrt
            scores += self._rho[0]
        if scores.shape[1] == 1 and self.labels.size == 2:
            s = scores[:, 0]
            labels = self.labels.take((s > 0).astype(np.intp))
            return labels, self._binary_pair(s)
        if scores.shape[1] > self.labels.size:
            raise KernelError(f"{self.node_label()} computes {scores.shape[1]} scores but has {self.labels.size} class labels.")
        labels = self.labels.take(scores.argmax(axis=1))
        return labels, apply_transform(self._transform, scores).astype(np.float32)


@register("SVMRegressor", versions=(1,), domain=ML_DOMAIN)
class SVMRegressor(_SVMBase):
    """SVMRegressor (ml 1): y = sum_k coef_k K(x, sv_k) + rho[0] (linear y = <x, coef> + rho[0]
    without support vectors). ``one_class`` outputs 1 where y >= 0 and -1 elsewhere
    (scikit-learn's OneClassSVM rule). post_transform applies to y, as the spec says
    (onnxruntime ignores it)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        label = self.node_label()
        self._read_kernel()
        self._coef = np.asarray(self.coefficients or [], dtype=np.float64)
        rho = self.rho or [0.0]
        self._rho = float(rho[0])
        n = int(self.n_supports or 0)
        if n > 0:
            sv = np.asarray(self.support_vectors or [], dtype=np.float64)
            if sv.size == 0 or sv.size % n:
                raise InvalidAttributeError(f"{label} has {sv.size} support vector values, not a multiple of n_supports={n}.")
            if self._coef.size != n:
                raise InvalidAttributeError(f"{label} has {self._coef.size} coefficients, expected n_supports={n}.")
            self._set_vectors(sv.reshape(n, -1))
            self._coef_t = self._coef.reshape(1, n)
            self._bias = np.array([self._rho])
        else:
            self._sv = None

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        x = _rows(x, self)
        if self._sv is not None:
            y = self._kernel_product(x, self._coef) + self._rho
        else:
            if self._coef.size != x.shape[1]:
                raise KernelError(
                    f"{self.node_label()} has {self._coef.size} coefficients, the input has {x.shape[1]} features."
                )
            y = x @ self._coef + self._rho
        return self._output(y)

    def _output(self, y: np.ndarray) -> tuple[np.ndarray]:
        """Y [N, 1] float32 from the values y: the one-class rule or post_transform."""
        y = y.reshape(-1, 1)
        if self.one_class:
            return (np.where(y >= 0, 1.0, -1.0).astype(np.float32),)
        return (apply_transform(self._transform, y).astype(np.float32),)
