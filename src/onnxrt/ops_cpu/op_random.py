"""The random generators as a table: RandomNormal, RandomUniform, their *Like forms, Bernoulli and Multinomial."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..dtypes import np_dtype
from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

#: the output types of the float generators
_FLOAT_KINDS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, ml_dtypes.bfloat16))


def generator(seed: float | None) -> np.random.Generator:
    """A numpy Generator: seeded from ``seed`` when given (reproducible), else from fresh OS entropy.

    The seed attribute is a float; its 64 bits seed the generator, so every distinct float
    value is a distinct seed (1.0 and 1.5 do not collide).
    """
    if seed is None:
        return np.random.default_rng()
    return np.random.Generator(np.random.PCG64(int(np.float64(seed).view(np.uint64))))


def _draw_float(sample: Callable[[np.random.Generator, tuple[int, ...], np.dtype], np.ndarray],
                rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Draw in float32 (float64 for double) and round to ``dtype`` (float16, bfloat16)."""
    work = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
    return sample(rng, shape, work).astype(dtype, copy=False)


def random_normal(shape, dtype=np.float32, mean=0.0, scale=1.0, seed=None) -> np.ndarray:
    """Samples of N(mean, scale^2) of the given shape and float dtype."""
    def sample(rng, shp, work):
        x = rng.standard_normal(shp, dtype=work)
        x *= work.type(scale)
        x += work.type(mean)
        return x

    return _draw_float(sample, generator(seed), tuple(shape), np.dtype(dtype))


def random_uniform(shape, dtype=np.float32, low=0.0, high=1.0, seed=None) -> np.ndarray:
    """Samples of U[low, high) of the given shape and float dtype."""
    def sample(rng, shp, work):
        x = rng.random(shp, dtype=work)
        x *= work.type(high - low)
        x += work.type(low)
        return x

    return _draw_float(sample, generator(seed), tuple(shape), np.dtype(dtype))


def bernoulli(p: np.ndarray, dtype=None, seed=None) -> np.ndarray:
    """1 with probability ``p`` and 0 otherwise, element-wise, in ``dtype`` (default: p's dtype).

    Drawn as ``uniform[0, 1) < p``, the comparison of the operator's function body.
    """
    p = np.asarray(p)
    pf = p.astype(np.float64, copy=False)
    if pf.size and not (np.all(pf >= 0) and np.all(pf <= 1)):
        bad = pf[~((pf >= 0) & (pf <= 1))].reshape(-1)[0]
        raise KernelError(f"Bernoulli probabilities must lie in [0, 1], got {float(bad)!r}.")
    u = generator(seed).random(p.shape)
    return (u < pf).astype(p.dtype if dtype is None else dtype)


def multinomial(logits: np.ndarray, sample_size: int = 1, dtype=np.int32, seed=None) -> np.ndarray:
    """``sample_size`` class indices per row of ``logits`` (batch, classes), drawn with probabilities softmax(row).

    Vectorized: one uniform draw per sample, located in its row's cumulative distribution by
    one ``searchsorted`` over all rows laid end to end (row ``r`` shifted by ``r``).
    """
    logits = np.asarray(logits)
    if logits.ndim != 2:
        raise KernelError(f"input must have shape (batch_size, class_size), got {list(logits.shape)}.")
    batch, classes = logits.shape
    if sample_size < 1:
        raise KernelError(f"sample_size must be at least 1, got {sample_size}.")
    if classes == 0:
        raise KernelError("input has no class to sample from.")
    x = logits.astype(np.float64)
    x -= np.max(x, axis=1, keepdims=True)
    cdf = np.cumsum(np.exp(x), axis=1)
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1.0  # no rounding gap at the top of a row
    rows = np.arange(batch, dtype=np.float64)[:, None]
    u = generator(seed).random((batch, sample_size))
    # side='right': the first class whose cumulative probability exceeds u (skips empty classes)
    pos = np.searchsorted((cdf + rows).reshape(-1), (u + rows).reshape(-1), side="right").reshape(batch, sample_size)
    idx = pos - (np.arange(batch) * classes)[:, None]
    return np.minimum(idx, classes - 1).astype(dtype)


# --------------------------------------------------------------------------------------
# The table: one row per operator
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RandomSpec:
    """One random operator: ``fn(op, input)`` returns the output (``input`` is None for the generators without one)."""

    name: str
    versions: tuple[int, ...]
    fn: Callable[[Any, np.ndarray | None], np.ndarray]
    #: element types the ``dtype`` attribute may name (None: any float type)
    dtypes: frozenset[np.dtype] | None = None
    doc: str = ""


def _like_dtype(op: Any, x: np.ndarray) -> np.dtype:
    if op._dtype is not None:
        return op._dtype
    if x.dtype not in _FLOAT_KINDS:
        raise KernelError(
            f"{op.op_type} without a 'dtype' attribute takes its output type from the input, "
            f"which must then be a float type, got {x.dtype}."
        )
    return x.dtype


_NORMAL = lambda op, x: random_normal(  # noqa: E731
    op.shape if x is None else x.shape, op._dtype if x is None else _like_dtype(op, x), op.mean, op.scale, op.seed
)
_UNIFORM = lambda op, x: random_uniform(  # noqa: E731
    op.shape if x is None else x.shape, op._dtype if x is None else _like_dtype(op, x), op.low, op.high, op.seed
)

_BERNOULLI_TYPES = frozenset(
    np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "bool")
) | _FLOAT_KINDS

RANDOM = [
    RandomSpec("RandomNormal", (1, 22), _NORMAL, doc="RandomNormal (1, 22: bfloat16): N(mean, scale^2) of shape ``shape``."),
    RandomSpec("RandomUniform", (1, 22), _UNIFORM, doc="RandomUniform (1, 22: bfloat16): U[low, high) of shape ``shape``."),
    RandomSpec("RandomNormalLike", (1, 22), _NORMAL, doc="RandomNormalLike (1, 22): N(mean, scale^2) of the input's shape."),
    RandomSpec("RandomUniformLike", (1, 22), _UNIFORM, doc="RandomUniformLike (1, 22): U[low, high) of the input's shape."),
    RandomSpec(
        "Bernoulli", (15, 22), lambda op, x: bernoulli(x, op._dtype, op.seed), _BERNOULLI_TYPES,
        doc="Bernoulli (15, 22: bfloat16): 0/1 draws with the input's probabilities.",
    ),
    RandomSpec(
        "Multinomial", (7, 22), lambda op, x: multinomial(x, op.sample_size, op._dtype, op.seed),
        frozenset({np.dtype(np.int32), np.dtype(np.int64)}),
        doc="Multinomial (7, 22: bfloat16 input): class indices drawn from softmax(input) per row.",
    ),
]


def _make(spec: RandomSpec) -> type[OpRun]:
    has_input = spec.name not in ("RandomNormal", "RandomUniform")

    def __init__(self, onnx_node, desc=None, **options):
        OpRun.__init__(self, onnx_node, desc, **options)
        label = self.node_label()
        code = self.dtype
        self._dtype = None
        if code is not None:
            try:
                self._dtype = np_dtype(int(code))
            except KeyError:
                raise InvalidAttributeError(f"{label}: attribute 'dtype' is {code!r}, not an ONNX element type.") from None
            allowed = spec.dtypes or _FLOAT_KINDS
            if self._dtype not in allowed:
                raise InvalidAttributeError(
                    f"{label}: attribute 'dtype' names {self._dtype}, expected one of {sorted(str(d) for d in allowed)!r}."
                )
        shape = getattr(self, "shape", None)
        if not has_input and shape is not None and any(d < 0 for d in shape):
            raise InvalidAttributeError(f"{label}: attribute 'shape' is {shape!r}, dimensions must be >= 0.")

    if has_input:

        def _run(self, x, attributes=None, verbose=0, fLOG=None):
            x = np.asarray(x)
            # the input's shape (or sample_size) and the dtype attribute decide the size
            if spec.name == "Multinomial":
                if x.ndim == 2:  # float64 draws of shape (batch, sample_size), then the output
                    self.check_alloc((x.shape[0], max(int(self.sample_size), 0)), np.float64, "samples")
            elif spec.name == "Bernoulli":
                self.check_alloc(x.shape, self._dtype if self._dtype is not None else x.dtype)
            else:
                dtype = _like_dtype(self, x)
                self.check_alloc(x.shape, np.float64 if dtype == np.float64 else np.float32)
            return (spec.fn(self, x),)

    else:

        def _run(self, attributes=None, verbose=0, fLOG=None):
            # the shape attribute decides the size: float32 or float64 samples, then the output
            dtype = self._dtype if self._dtype is not None else np.dtype(np.float32)
            self.check_alloc(self.shape or (), np.float64 if dtype == np.float64 else np.float32)
            return (spec.fn(self, None),)

    cls = type(spec.name, (OpRun,), {"__init__": __init__, "_run": _run, "__doc__": spec.doc, "__module__": __name__})
    return register(spec.name, versions=spec.versions)(cls)


for _spec in RANDOM:
    globals()[_spec.name] = _make(_spec)
