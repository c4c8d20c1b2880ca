"""TfIdfVectorizer (9): n-gram counts (with skips) of int or string tokens, weighted TF, IDF or TFIDF."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun


class NgramPool:
    """The pool of n-grams, compiled once: token ids, and per length a sorted table of keys.

    Every pool token gets an id in ``[0, V)``; an n-gram of ids is the integer key
    ``sum(id_k * V**(n-1-k))``, so matching n-grams is a ``searchsorted`` over sorted keys.
    When ``V**n`` would overflow int64, n-grams are compared row-wise with ``np.unique``.
    """

    def __init__(self, pool: np.ndarray, ngram_counts: list[int], ngram_indexes: list[int], max_len: int):
        self.tokens = np.unique(pool) if pool.size else pool
        self.n_tokens = int(self.tokens.size)
        ids = np.searchsorted(self.tokens, pool) if pool.size else np.zeros(0, dtype=np.intp)
        starts = list(ngram_counts) + [pool.size]
        self.by_length: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        slot = 0
        for n in range(1, len(ngram_counts) + 1):
            lo, hi = starts[n - 1], starts[n]
            if hi < lo or (hi - lo) % n:
                raise InvalidAttributeError(
                    f"ngram_counts {list(ngram_counts)} give {hi - lo} pool items to the {n}-grams, not a multiple of {n}."
                )
            grams = ids[lo:hi].reshape(-1, n)
            if n <= max_len:
                self.by_length[n] = (grams, np.arange(slot, slot + grams.shape[0]))
            slot += grams.shape[0]
        if slot != len(ngram_indexes):
            raise InvalidAttributeError(
                f"The pool holds {slot} n-grams but ngram_indexes has {len(ngram_indexes)} entries."
            )
        self.n_grams = slot
        self._keyed = {n: self._keys(g) for n, (g, _) in self.by_length.items()}

    def _fits(self, n: int) -> bool:
        return n * np.log2(max(self.n_tokens, 2)) < 62

    def _keys(self, grams: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        if not self._fits(grams.shape[1]):
            return None
        keys = self._key(grams)
        order = np.argsort(keys, kind="stable")
        return keys[order], order

    def _key(self, grams: np.ndarray) -> np.ndarray:
        key = np.zeros(grams.shape[0], dtype=np.int64)
        for k in range(grams.shape[1]):  # loop over the n-gram length only
            key = key * self.n_tokens + grams[:, k]
        return key

    def token_ids(self, x: np.ndarray) -> np.ndarray:
        """Pool id of each token of ``x``, -1 for tokens not in the pool."""
        if self.n_tokens == 0:
            return np.full(x.shape, -1, dtype=np.intp)
        pos = np.searchsorted(self.tokens, x)
        pos = np.minimum(pos, self.n_tokens - 1)
        return np.where(self.tokens[pos] == x, pos, -1)

    def match(self, n: int, grams: np.ndarray) -> np.ndarray:
        """For rows of n token ids (all >= 0), the pool slot of each n-gram or -1."""
        table, slots = self.by_length[n]
        if grams.shape[0] == 0 or table.shape[0] == 0:
            return np.full(grams.shape[0], -1, dtype=np.intp)
        keyed = self._keyed[n]
        if keyed is not None:
            sorted_keys, order = keyed
            key = self._key(grams)
            pos = np.minimum(np.searchsorted(sorted_keys, key), sorted_keys.size - 1)
            return np.where(sorted_keys[pos] == key, slots[order[pos]], -1)
        # wide n-grams: identify equal rows of pool and data together
        both = np.concatenate([table, grams])
        _, inverse = np.unique(both, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        first = np.full(inverse.max() + 1, -1, dtype=np.intp)
        first[inverse[: table.shape[0]][::-1]] = slots[::-1]
        return first[inverse[table.shape[0] :]]


def tfidf_vectorizer(
    x: np.ndarray,
    pool: NgramPool,
    ngram_indexes: np.ndarray,
    weights: np.ndarray,
    mode: str,
    min_gram_length: int,
    max_gram_length: int,
    max_skip_count: int,
) -> np.ndarray:
    """The [C] -> [K] or [N, C] -> [N, K] n-gram vector (float32), K = max(ngram_indexes) + 1.

    For each length n in [min, max] and each skip s in [0, max_skip_count], the n-grams of a
    row are the tokens at ``j, j+s+1, ..., j+(n-1)(s+1)``; unigrams are counted once (skips
    do not apply to them). N-grams never cross rows. Loops run over n and s only.
    """
    x = np.asarray(x)
    if x.ndim == 1:
        rows = x.reshape(1, -1)
    elif x.ndim == 2:
        rows = x
    else:
        raise KernelError(f"TfIdfVectorizer takes a [C] or [N, C] tensor, got shape {list(x.shape)}.")
    n_rows, width = rows.shape
    ids = pool.token_ids(rows)
    counts = np.zeros((n_rows, pool.n_grams), dtype=np.int64)
    for n in range(max(min_gram_length, 1), max_gram_length + 1):
        if n not in pool.by_length:
            continue
        for skip in range(max_skip_count + 1 if n > 1 else 1):
            step = skip + 1
            span = (n - 1) * step + 1
            if span > width:
                break
            starts = np.arange(width - span + 1)
            cols = starts[:, None] + step * np.arange(n)[None, :]  # [G, n] token positions
            grams = ids[:, cols]  # [rows, G, n]
            valid = (grams >= 0).all(axis=2)
            row_of = np.broadcast_to(np.arange(n_rows)[:, None], valid.shape)[valid]
            found = pool.match(n, grams[valid])
            hit = found >= 0
            np.add.at(counts, (row_of[hit], found[hit]), 1)
    counts_f = counts.astype(np.float32)
    if mode == "IDF":
        counts_f = np.minimum(counts_f, 1.0) * weights
    elif mode == "TFIDF":
        counts_f = counts_f * weights
    size = int(ngram_indexes.max()) + 1 if ngram_indexes.size else 0
    out = np.zeros((n_rows, size), dtype=np.float32)
    out[:, ngram_indexes] = counts_f
    return out[0] if x.ndim == 1 else out


@register("TfIdfVectorizer", versions=(9,))
class TfIdfVectorizer(OpRun):
    """TfIdfVectorizer-9: TF, IDF (counts capped at 1, times weights), TFIDF (counts times weights);
    skip n-grams; int64 pools (int32/int64 input) or string pools (string input).
    The pool is compiled once into sorted integer keys.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        label = self.node_label()
        self.check_choice("mode", ("TF", "IDF", "TFIDF"))
        if (self.pool_int64s is None) == (self.pool_strings is None):
            raise InvalidAttributeError(f"{label} needs exactly one of 'pool_int64s' and 'pool_strings'.")
        if self.min_gram_length < 1 or self.max_gram_length < self.min_gram_length:
            raise InvalidAttributeError(
                f"{label}: min_gram_length {self.min_gram_length} and max_gram_length {self.max_gram_length} "
                f"must satisfy 1 <= min <= max."
            )
        if self.max_skip_count < 0:
            raise InvalidAttributeError(f"{label}: max_skip_count is {self.max_skip_count}, expected >= 0.")
        self._strings = self.pool_strings is not None
        pool = np.array(self.pool_strings, dtype=object) if self._strings else np.array(self.pool_int64s, dtype=np.int64)
        self._indexes = np.array(self.ngram_indexes, dtype=np.int64)
        if (self._indexes < 0).any():
            raise InvalidAttributeError(f"{label}: ngram_indexes must be non-negative.")
        if self.weights:
            self._weights = np.array(self.weights, dtype=np.float32)
            if self._weights.size != self._indexes.size:
                raise InvalidAttributeError(
                    f"{label}: weights has {self._weights.size} values, expected {self._indexes.size} (one per n-gram)."
                )
        else:
            self._weights = np.ones(self._indexes.size, dtype=np.float32)
        try:
            self._pool = NgramPool(pool, list(self.ngram_counts), list(self.ngram_indexes), self.max_gram_length)
        except InvalidAttributeError as e:
            raise InvalidAttributeError(f"{label}: {e}") from None

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        x = np.asarray(x)
        if self._strings != (x.dtype.kind in "OUS"):
            kind = "string" if self._strings else "integer"
            raise KernelError(f"The pool holds {kind}s but the input has dtype {x.dtype}.")
        if not self._strings:
            x = x.astype(np.int64, copy=False)
        # the output's width is max(ngram_indexes) + 1: the model decides it
        width = int(self._indexes.max()) + 1 if self._indexes.size else 0
        self.check_alloc(([x.shape[0]] if x.ndim == 2 else []) + [width], np.float32)
        return (
            tfidf_vectorizer(
                x, self._pool, self._indexes, self._weights, self.mode,
                self.min_gram_length, self.max_gram_length, self.max_skip_count,
            ),
        )
