"""Feeds from a pandas DataFrame: columns by input name, or every column into a single tabular input."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from ..errors import InvalidFeedError


def is_dataframe(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame, told by its type's module: pandas itself is
    never imported for a feed that is not one."""
    return type(value).__module__.startswith("pandas") and hasattr(value, "columns") and hasattr(value, "iloc")


def _dtype(spec: Any) -> np.dtype:
    if spec.kind != "tensor_type":
        raise InvalidFeedError(f"Input {spec.name!r} is a {spec.type_str}; a DataFrame feeds tensors only.")
    if spec.elem_type == TensorProto.STRING:
        return np.dtype(object)
    if spec.np_dtype is None:
        raise InvalidFeedError(f"Input {spec.name!r} ({spec.type_str}) declares no element type a DataFrame column can take.")
    return spec.np_dtype


def _convert(frame: Any, columns: list[Any], spec: Any, vector: bool) -> np.ndarray:
    target = _dtype(spec)
    for c in columns:
        col = frame[c]
        kind = getattr(col.dtype, "kind", "O")
        if target.kind == "O":
            ok = kind in "OSU" or str(col.dtype) == "string"
        elif target.kind == "b":
            ok = kind == "b"
        else:
            numpy_dtype = getattr(col.dtype, "numpy_dtype", None)  # pandas' nullable Int64, Float32
            src = numpy_dtype if numpy_dtype is not None else col.dtype
            ok = isinstance(src, np.dtype) and src.kind in "biuf" and np.can_cast(src, target, "same_kind")
        if not ok:
            raise InvalidFeedError(
                f"Column {c!r} of dtype {col.dtype} cannot feed input {spec.name!r} ({spec.type_str}): "
                f"only casts of the same kind (float64 to float32, int to float) are made."
            )
    try:
        if vector:
            return frame[columns[0]].to_numpy(dtype=target)
        return np.ascontiguousarray(frame[columns].to_numpy(dtype=target))
    except (TypeError, ValueError) as e:  # missing values in an integer column, for one
        raise InvalidFeedError(f"Columns {columns!r} cannot be converted to {target} for input {spec.name!r}: {e}") from e


def frame_feeds(frame: Any, specs: dict[str, Any], required: list[str]) -> dict[str, np.ndarray]:
    """The feeds of a DataFrame (``specs``: the engine's input specs by name).

    A column named like an input feeds it, as [rows] for a rank-1 input and [rows, 1]
    otherwise; columns ``x_0 .. x_{k-1}`` feed input ``x`` as [rows, k]. When the columns
    do not name every required input and the model has a single one, every column, in
    order, feeds it as [rows, columns] (a single column feeds a rank-1 input as [rows]).
    Columns are cast to the input's element type where numpy's ``same_kind`` rule allows.
    """
    labels = {str(c): c for c in frame.columns}
    if len(labels) != len(frame.columns):
        raise InvalidFeedError(f"The DataFrame's column names repeat: {list(frame.columns)!r}.")
    feeds: dict[str, np.ndarray] = {}
    missing = []
    for name, spec in specs.items():
        if name in labels:
            feeds[name] = _convert(frame, [labels[name]], spec, vector=spec.rank == 1)
            if spec.rank not in (1, -1) and feeds[name].ndim == 1:
                feeds[name] = feeds[name].reshape(-1, 1)
            continue
        cols = []
        while f"{name}_{len(cols)}" in labels:
            cols.append(labels[f"{name}_{len(cols)}"])
        if cols:
            feeds[name] = _convert(frame, cols, spec, vector=False)
        elif name in required:
            missing.append(name)
    if not missing:
        return feeds
    if len(required) == 1:
        spec = specs[required[0]]
        columns = list(frame.columns)
        if not columns:
            raise InvalidFeedError(f"Input {spec.name!r} needs columns; the DataFrame has none.")
        vector = spec.rank == 1 and len(columns) == 1
        if spec.rank not in (2, -1) and not vector:
            raise InvalidFeedError(
                f"Input {spec.name!r} has rank {spec.rank}; a DataFrame's columns feed a [rows, columns] input "
                f"(or one column a rank-1 input), and this one has {len(columns)} columns."
            )
        return {spec.name: _convert(frame, columns, spec, vector=vector)}
    raise InvalidFeedError(
        f"The model's inputs {required!r} take DataFrame columns by name (a column 'x', or columns "
        f"'x_0', 'x_1', ... for a [rows, k] input); none found for {missing!r} among {list(labels)!r}."
    )
