"""Helpers shared by the ai.onnx.ml kernels: score post-transforms, class labels, attribute readers."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidAttributeError
from ..ops_cpu import _special

ML_DOMAIN = "ai.onnx.ml"

#: post_transform names, in the order TreeEnsemble (ml opset 5) encodes them as integers
POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


#: a last axis this short is handled column by column (numpy's reductions and broadcasts
#: over a 3-wide last axis run ~10x slower than the same work on long vectors)
_SHORT_AXIS = 16


def _short_rows(x: np.ndarray) -> bool:
    return x.ndim == 2 and x.shape[1] <= _SHORT_AXIS and x.shape[0] >= 64


def row_max(x: np.ndarray) -> np.ndarray:
    """Maximum over the last axis, keeping it ([N, 1] for [N, C])."""
    if _short_rows(x) and x.shape[1]:
        m = x[:, 0].copy()
        for j in range(1, x.shape[1]):
            np.maximum(m, x[:, j], out=m)
        return m[:, None]
    return np.maximum.reduce(x, axis=-1, keepdims=True)


def row_sum(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis, keeping it (a product with a vector of ones for short rows)."""
    if _short_rows(x) and x.dtype.kind == "f":
        return (x @ np.ones(x.shape[1], dtype=x.dtype))[:, None]
    return np.add.reduce(x, axis=-1, keepdims=True)


def add_columns(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x += b along the last axis, in place (column by column for short rows)."""
    if _short_rows(x) and b.size == x.shape[1]:
        for j in range(x.shape[1]):
            x[:, j] += b[j]
    else:
        x += b
    return x


def logistic(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) as 0.5 + 0.5 tanh(x / 2): no overflow, one transcendental."""
    out = np.multiply(x, 0.5, dtype=x.dtype)
    np.tanh(out, out=out)
    out *= 0.5
    out += 0.5
    return out


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax along the last axis (shifted by the row maximum for stability)."""
    e = np.exp(x - row_max(x))
    e /= row_sum(e)
    return e


def softmax_zero(x: np.ndarray) -> np.ndarray:
    """SOFTMAX_ZERO: a softmax over the non-zero scores of each row; zero scores stay zero.

    The spec names this transform without defining it, so onnxrt follows onnxruntime: a
    score is zero when |s| <= 1e-7 and is left at s * exp(-max) (0 for an exact zero), the
    others are exp(s - max), and the row is divided by the sum of the non-zero ones. A row of
    zeros divides 0 by 0 and gives NaN there, as in onnxruntime.
    """
    mx = row_max(x)
    nonzero = np.abs(x) > 1e-7
    e = np.where(nonzero, np.exp(x - mx), x * np.exp(-mx))
    total = row_sum(np.where(nonzero, e, 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (e / total).astype(x.dtype, copy=False)


def probit(x: np.ndarray) -> np.ndarray:
    """sqrt(2) * erfinv(2p - 1), the quantile function of the standard normal.

    onnxruntime uses a closed-form approximation of erfinv (error about 1e-3); onnxrt
    computes the exact value with scipy.special.erfinv.
    """
    return (np.sqrt(2) * _special.erfinv(2 * x.astype(np.float64) - 1)).astype(x.dtype)


_TRANSFORMS = {
    "NONE": None,
    "SOFTMAX": softmax,
    "LOGISTIC": logistic,
    "SOFTMAX_ZERO": softmax_zero,
    "PROBIT": probit,
}


def post_transform_fn(op: Any, value: Any = None) -> Any:
    """The function of the node's ``post_transform`` (None for NONE), checked.

    ``value`` overrides the attribute (TreeEnsemble encodes it as an integer).
    """
    name = op.post_transform if value is None else value
    if isinstance(name, bytes):
        name = name.decode()
    if isinstance(name, (int, np.integer)):
        if not 0 <= int(name) < len(POST_TRANSFORMS):
            raise InvalidAttributeError(
                f"{op.node_label()}: attribute 'post_transform' is {int(name)}, expected an integer in [0, 4]."
            )
        name = POST_TRANSFORMS[int(name)]
    if name not in _TRANSFORMS:
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute 'post_transform' is {name!r}, expected one of {list(_TRANSFORMS)!r}."
        )
    return _TRANSFORMS[name]


def apply_transform(fn: Any, scores: np.ndarray) -> np.ndarray:
    """``fn(scores)`` or ``scores`` itself when there is no transform."""
    return scores if fn is None else fn(scores)


def class_labels(op: Any, ints: str, strings: str, required: bool = False) -> np.ndarray | None:
    """The class labels as an array (int64 or object of str); at most one attribute may be set.

    Returns None when neither attribute is set, unless ``required`` (a classifier): then no
    label at all is an InvalidAttributeError.
    """
    if required:
        labels = class_labels(op, ints, strings)
        if labels is None or labels.size == 0:
            raise InvalidAttributeError(f"{op.node_label()} defines no class labels ({ints!r} or {strings!r}).")
        return labels
    li = getattr(op, ints, None)
    ls = getattr(op, strings, None)
    if li is not None and ls is not None and len(li) and len(ls):
        raise InvalidAttributeError(
            f"{op.node_label()} defines both {ints!r} and {strings!r}; exactly one of them is expected."
        )
    if ls is not None and len(ls):
        return string_array(ls)
    if li is not None and len(li):
        return np.asarray(li, dtype=np.int64)
    if ls is not None:
        return string_array(ls)
    if li is not None:
        return np.asarray(li, dtype=np.int64)
    return None


def string_array(values: Any) -> np.ndarray:
    """An object array of str (attributes decode to str; undecodable bytes are kept as they are)."""
    out = np.empty(len(values), dtype=object)
    out[:] = [v.decode("utf-8", errors="surrogateescape") if isinstance(v, bytes) else v for v in values]
    return out


def floats_or_tensor(op: Any, name: str, dtype: Any = np.float32) -> np.ndarray | None:
    """Attribute ``name`` or its ``name_as_tensor`` twin (double precision) as a 1-D array.

    Only one of the two may be given. The list form is float32 (what its FLOATS type
    holds), the tensor form keeps its own element type.
    """
    tensor = getattr(op, f"{name}_as_tensor", None)
    plain = getattr(op, name, None)
    if tensor is not None and plain is not None:
        raise InvalidAttributeError(
            f"{op.node_label()} defines both {name!r} and {name + '_as_tensor'!r}; at most one is expected."
        )
    if tensor is not None:
        return np.asarray(tensor).reshape(-1)
    if plain is not None:
        return np.asarray(plain, dtype=dtype)
    return None


def require(op: Any, name: str) -> Any:
    """The value of attribute ``name``, or an InvalidAttributeError when the node omits it."""
    value = getattr(op, name, None)
    if value is None:
        raise InvalidAttributeError(f"{op.node_label()} misses the required attribute {name!r}.")
    return value


def check_choice(op: Any, name: str, value: Any, choices: tuple[Any, ...]) -> Any:
    """``value`` when it is one of ``choices``, else an InvalidAttributeError naming the attribute."""
    if value not in choices:
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute {name!r} is {value!r}, expected one of {list(choices)!r}."
        )
    return value


def declared_type(op: Any, name: str) -> Any:
    """The TypeProto the graph declares for value ``name`` (inputs, value_info, outputs), or None."""
    graph = op.options.get("graph")
    if graph is None or not name:
        return None
    for vi in (*graph.input, *graph.value_info, *graph.output):
        if vi.name == name and vi.HasField("type"):
            return vi.type
    return None


def declared_map_value_dtype(op: Any, name: str) -> np.dtype | None:
    """The numpy dtype of the values of map ``name`` as the graph declares it, or None."""
    tp = declared_type(op, name)
    if tp is None or tp.WhichOneof("value") != "map_type":
        return None
    value = tp.map_type.value_type
    if value.WhichOneof("value") != "tensor_type" or not value.tensor_type.elem_type:
        return None
    from ..dtypes import np_dtype

    try:
        return np_dtype(value.tensor_type.elem_type)
    except KeyError:
        return None
