"""Batch inference on Dask: ``predict`` over dask arrays and DataFrames, one session per worker process."""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    import dask
    import dask.array as da
    from dask.base import tokenize
except ImportError as e:  # pragma: no cover - the extra is missing
    raise ImportError("onnxrt.dask needs dask: pip install 'onnxrt[dask]'.") from e

from .blocks import (
    BlockPlan,
    ModelHandle,
    array_block,
    clear_sessions,
    frame_block,
    frame_meta,
    plan_array,
    plan_frame,
    session_builds,
)
from .errors import InvalidFeedError
from .session import SessionOptions

__all__ = ["ModelHandle", "clear_sessions", "predict", "session_builds"]


def predict(
    model: Any,
    data: Any,
    *,
    input_name: str | None = None,
    output_names: str | Sequence[str] | None = None,
    batch_size: int | None = None,
    sess_options: SessionOptions | None = None,
) -> Any:
    """Run ``model`` on every block of ``data``, lazily; returns a dask collection of the same kind.

    ``model`` is a path, bytes, an ``onnx.ModelProto``, an :class:`~onnxrt.InferenceSession`
    or an :class:`~onnxrt.blocks.ModelHandle`. It is read once here and checked by a local
    session, which also plans the outputs; nothing of ``data`` is computed.

    **Arrays** (``dask.array.Array``): blocks of rows along axis 0 feed the model's one
    input (``input_name`` may name it; a model with several inputs takes a DataFrame
    instead). The other axes are merged into one chunk (a rechunk, when they are split).
    The array's dtype must be the input's, as for ``InferenceSession.run``: no silent
    cast. Returns a ``dask.array.Array`` when one output is wanted (the model has one and
    ``output_names`` is None, or ``output_names`` is a string), else a ``dict`` output
    name -> ``dask.array.Array`` (``output_names`` a list: always a dict). Each output's
    blocks follow the input's row chunks; its other dims are one chunk.

    **DataFrames** (``dask.dataframe.DataFrame``): each partition's columns feed the
    model. A column named after an input feeds it (rank 1, or [rows, 1]), columns
    ``x_0 .. x_{k-1}`` feed a [rows, k] input ``x``; a model with one input that finds no
    such columns (or ``input_name``) takes every column, in order, as its [rows, columns]
    matrix. Columns are cast to the input's element type where numpy's ``same_kind`` rule
    allows (float64 to float32, int to float), never float to int or text to numbers.
    Returns a ``dask.dataframe.DataFrame`` on the input's index and divisions, with a
    column ``y`` for a 1-D (or [rows, 1]) output ``y`` and ``y_0 .. y_{k-1}`` for a
    [rows, k] one; a string output is an object column.

    The metadata (dtypes, chunks, columns) comes from the model's declared output types.
    When they leave a dim after the rows unknown, the model runs once locally on two rows
    of zeros to learn it (so a dim that depends on the values is not supported); an output
    without one row per input row is refused. Outputs must be tensors: a skl2onnx
    classifier is converted with ``options={id(clf): {"zipmap": False}}``.

    ``batch_size`` splits each block into runs of at most that many rows (bounds memory).
    An empty block gives empty outputs without running the model. An input whose first
    dimension is fixed to 1 is run row by row.

    Deviations from ``InferenceSession.run``: only the model's declared outputs can be
    asked for (not intermediate values), and only tensors with one row per input row;
    DataFrame columns are cast (arrays are not); rows are assumed independent: a model
    that mixes rows (a statistic over the batch) gives per-block, or per ``batch_size``,
    results.

    On the workers, each process builds the session once, on its first block, from the
    model's bytes (shipped once per worker as one graph key, not with every task) and
    reuses it for every later block and every later ``predict`` of the same model and
    ``sess_options``. A worker that dies loses nothing: the blocks are pure tasks, and
    dask reruns those it held on the other workers.
    """
    handle = (
        model
        if isinstance(model, ModelHandle) and sess_options is None
        else ModelHandle(model, sess_options)
    )
    if isinstance(data, da.Array):
        return _predict_array(handle, data, input_name, output_names, batch_size)
    # a DataFrame has imported dask.dataframe; arrays alone need no pandas
    dd = sys.modules.get("dask.dataframe")
    if dd is not None and isinstance(data, dd.DataFrame):
        return _predict_frame(handle, data, input_name, output_names, batch_size)
    kind = f"{type(data).__module__}.{type(data).__name__}"
    hint = ""
    if dd is not None and isinstance(data, dd.Series):
        hint = " (series.to_frame() makes it one)"
    elif isinstance(data, np.ndarray) or kind.startswith("pandas."):
        hint = " (da.from_array / dd.from_pandas make one; InferenceSession.run takes data in memory)"
    raise InvalidFeedError(
        f"data must be a dask.array.Array or a dask.dataframe.DataFrame, got a {kind}{hint}."
    )


def _predict_array(
    handle: ModelHandle,
    data: da.Array,
    input_name: str | None,
    output_names: Any,
    batch_size: int | None,
) -> Any:
    if data.ndim == 0:
        raise InvalidFeedError(
            "data is a 0-d dask array; predict needs rows along axis 0."
        )
    if any(math.isnan(d) for d in data.shape[1:]):
        raise InvalidFeedError(
            f"data has shape {data.shape}: the dims after the rows must be known (data.compute_chunk_sizes())."
        )
    if any(n != 1 for n in data.numblocks[1:]):
        data = data.rechunk({axis: -1 for axis in range(1, data.ndim)})
    plan = plan_array(
        handle,
        data.dtype,
        data.shape[1:],
        input_name=input_name,
        output_names=output_names,
        batch_size=batch_size,
    )
    token = tokenize(handle, plan, data.name)
    in_index = ("i", *(f"in{axis}" for axis in range(1, data.ndim)))
    model_key = _handle_key(handle)

    def output(spec, func, *args) -> da.Array:
        axes = tuple(f"out{axis}" for axis in range(1, 1 + len(spec.shape)))
        return da.blockwise(
            func,
            ("i", *axes),
            *args,
            new_axes=dict(zip(axes, spec.shape)),
            dtype=spec.dtype,
            meta=np.empty((0,) * (1 + len(spec.shape)), dtype=spec.dtype),
            name=f"onnxrt-{spec.name}-{token}",
        )

    if len(plan.outputs) == 1:  # one task per block, no tuple to pick from
        result = {
            plan.outputs[0].name: output(
                plan.outputs[0],
                _array_task_one,
                data,
                in_index,
                model_key,
                None,
                plan,
                None,
            )
        }
    else:
        parts = da.blockwise(
            _array_task,
            "i",
            data,
            in_index,
            model_key,
            None,
            plan,
            None,
            dtype=object,
            meta=np.empty((0,), dtype=object),
            name=f"onnxrt-predict-{token}",
        )
        result = {
            spec.name: output(spec, operator.getitem, parts, "i", k, None)
            for k, spec in enumerate(plan.outputs)
        }
    if len(result) == 1 and (output_names is None or isinstance(output_names, str)):
        return next(iter(result.values()))
    return result


def _predict_frame(
    handle: ModelHandle,
    data: Any,
    input_name: str | None,
    output_names: Any,
    batch_size: int | None,
) -> Any:
    plan = plan_frame(
        handle,
        data._meta,
        input_name=input_name,
        output_names=output_names,
        batch_size=batch_size,
    )
    return data.map_partitions(
        onnxrt_predict_frame,
        _handle_key(handle),
        plan,
        meta=frame_meta(plan, data._meta.index),
        enforce_metadata=False,
        transform_divisions=False,
        align_dataframes=False,
    )


def _handle_key(handle: ModelHandle) -> Any:
    """The model as one key of the graph: each worker fetches it once, whatever the number of tasks."""
    return dask.delayed(handle, pure=True, name=f"onnxrt-model-{handle.key}")


def _array_task(
    block: Any, handle: ModelHandle, plan: BlockPlan
) -> tuple[np.ndarray, ...]:
    while isinstance(
        block, list
    ):  # blockwise hands the single chunk of each merged axis in a list
        block = block[0]
    return array_block(handle, plan, block)


def _array_task_one(block: Any, handle: ModelHandle, plan: BlockPlan) -> np.ndarray:
    return _array_task(block, handle, plan)[0]


def onnxrt_predict_frame(frame: Any, handle: ModelHandle, plan: BlockPlan) -> Any:
    return frame_block(handle, plan, frame)
