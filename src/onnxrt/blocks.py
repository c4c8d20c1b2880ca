"""Engine-agnostic pieces of batch inference on a cluster: model handle, per-process session cache, block functions."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import GraphProto, ModelProto, NodeProto, TensorProto

from .dtypes import ONNX_TO_NP, same_dtype
from .errors import GraphError, InvalidFeedError, ModelLoadError, describe_value
from .model import load_external_data, load_model
from .session import InferenceSession, SessionOptions

#: sessions one process keeps; beyond, the least recently used is dropped
MAX_CACHED_SESSIONS = 16

_LOCK = threading.Lock()
_SESSIONS: OrderedDict[str, InferenceSession] = OrderedDict()
_BUILDS: dict[str, int] = {}


def session_builds() -> dict[str, int]:
    """How many sessions this process has built, per model key (:attr:`ModelHandle.key`)."""
    with _LOCK:
        return dict(_BUILDS)


def clear_sessions() -> None:
    """Drop this process's cached sessions (the build counts stay)."""
    with _LOCK:
        _SESSIONS.clear()


class ModelHandle:
    """A model by value, its bytes and session options, whose session is built once per process.

    ``model`` is a path, bytes, a binary file object, an ``onnx.ModelProto`` or an
    :class:`~onnxrt.InferenceSession` (whose options are kept unless ``sess_options`` is
    given). External data is read here, only inside the model's folder as a session reads
    it, and inlined, so workers need not see the driver's files. A handle pickles as its
    bytes, options and key (a SHA-256 of both), never as a session: :meth:`session` returns
    the calling process's cached session for the key and builds it on first use only.
    """

    __slots__ = ("_key", "_model", "_options")

    def __init__(self, model: Any, sess_options: SessionOptions | None = None):
        if isinstance(model, ModelHandle):
            model = model.model_bytes
        data: bytes | None = None
        if isinstance(model, InferenceSession):
            sess_options = sess_options or model.get_session_options()
            proto, base_dir = model.engine.model, model.engine.base_dir
        else:
            proto, base_dir = load_model(model)
            if isinstance(model, bytes | bytearray | memoryview):
                data = bytes(model)
        inlined = _inline_external_data(proto, base_dir)
        if inlined is not None:
            proto, data = inlined, None
        if data is None:
            try:
                data = proto.SerializeToString()
            except ValueError as e:
                raise ModelLoadError(
                    f"The model cannot be shipped to workers as bytes: {e} (a protobuf holds at most 2 GiB)."
                ) from e
        self._model = data
        self._options = sess_options or SessionOptions()
        digest = hashlib.sha256(data)
        digest.update(repr(sorted(vars(self._options).items())).encode())
        self._key = digest.hexdigest()

    @property
    def key(self) -> str:
        """SHA-256 of the model bytes and the options: the session cache's key."""
        return self._key

    @property
    def model_bytes(self) -> bytes:
        return self._model

    @property
    def options(self) -> SessionOptions:
        return self._options

    def session(self) -> InferenceSession:
        """This process's session for the model, built on first use and reused afterwards."""
        with _LOCK:
            sess = _SESSIONS.get(self._key)
            if sess is not None:
                _SESSIONS.move_to_end(self._key)
                return sess
            # built under the lock: threads of one worker asking at once still build one
            sess = InferenceSession(self._model, self._options)
            _SESSIONS[self._key] = sess
            _BUILDS[self._key] = _BUILDS.get(self._key, 0) + 1
            while len(_SESSIONS) > MAX_CACHED_SESSIONS:
                _SESSIONS.popitem(last=False)
            return sess

    def __getstate__(self) -> tuple[bytes, SessionOptions, str]:
        return (self._model, self._options, self._key)

    def __setstate__(self, state: tuple[bytes, SessionOptions, str]) -> None:
        self._model, self._options, self._key = state

    def __dask_tokenize__(self) -> tuple[str, str]:
        return ("onnxrt.ModelHandle", self._key)

    def __repr__(self) -> str:
        return f"ModelHandle(key={self._key[:12]}, {len(self._model)} bytes)"


def _node_tensors(nodes: Sequence[NodeProto]) -> Iterator[TensorProto]:
    for node in nodes:
        for att in node.attribute:
            if att.HasField("t"):
                yield att.t
            yield from att.tensors
            if att.HasField("g"):
                yield from _graph_tensors(att.g)
            for g in att.graphs:
                yield from _graph_tensors(g)


def _graph_tensors(graph: GraphProto) -> Iterator[TensorProto]:
    """Every tensor of a graph and its subgraphs: initializers and tensor attributes."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    yield from _node_tensors(graph.node)


def _model_tensors(proto: ModelProto) -> Iterator[TensorProto]:
    yield from _graph_tensors(proto.graph)
    for f in proto.functions:
        yield from _node_tensors(f.node)


def _inline_external_data(proto: ModelProto, base_dir: str | None) -> ModelProto | None:
    """A copy of the model holding its external tensors' bytes, or None when it has none."""
    if not any(t.data_location == TensorProto.EXTERNAL for t in _model_tensors(proto)):
        return None
    copy = ModelProto()
    copy.CopyFrom(proto)
    for t in _model_tensors(copy):
        if t.data_location == TensorProto.EXTERNAL:
            # a location outside base_dir is refused, as a session does
            load_external_data(t, base_dir)
    return copy


# ----------------------------------------------------------------------------------
# Plans: what a block function needs, worked out once on the driver from the model.


@dataclass(frozen=True)
class FeedSpec:
    """One model input: its numpy dtype and, for a DataFrame, the columns feeding it."""

    name: str
    dtype: np.dtype
    columns: tuple[str, ...] = ()
    #: a DataFrame column fed as a rank-1 [rows] tensor rather than [rows, k]
    vector: bool = False


@dataclass(frozen=True)
class OutputSpec:
    """One requested output: dtype, dims after the rows, and its DataFrame column names."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class BlockPlan:
    """Everything a block function needs besides the session; small, pickled with each task."""

    feeds: tuple[FeedSpec, ...]
    outputs: tuple[OutputSpec, ...]
    batch_size: int | None
    #: the outputs are all the model's, in order: the session's fast path
    all_outputs: bool


def plan_array(
    handle: ModelHandle,
    dtype: Any,
    row_shape: Sequence[int],
    *,
    input_name: str | None = None,
    output_names: str | Sequence[str] | None = None,
    batch_size: int | None = None,
) -> BlockPlan:
    """Plan for blocks of rows ``array[rows, *row_shape]`` of ``dtype`` fed to one input.

    The array's dtype must be the input's (no silent conversion, as in ``run``); its rank
    and static dims are checked against the declared shape.
    """
    sess = handle.session()
    batch_size = _check_batch_size(batch_size)
    inputs = sess.get_inputs()
    names = [i.name for i in inputs]
    if input_name is None:
        if len(inputs) != 1:
            raise InvalidFeedError(
                f"The model has {len(inputs)} inputs {names!r}; an array feeds one: pass input_name=..., "
                f"or a DataFrame whose columns are matched to the inputs by name."
            )
        arg = inputs[0]
    else:
        arg = _input_arg(inputs, input_name)
    if len(inputs) > 1:
        raise InvalidFeedError(
            f"The model needs inputs {names!r}; an array feeds only {arg.name!r}: "
            f"pass a DataFrame whose columns are matched to the inputs by name."
        )
    dtype = np.dtype(dtype)
    elem = _elem_type(sess, arg.name, inputs=True)
    if elem and not same_dtype(dtype, elem):
        want = ONNX_TO_NP[elem]
        hint = f" (data.astype(np.{want.name}))" if want.kind in "biuf" else ""
        raise InvalidFeedError(
            f"Input {arg.name!r} expects {arg.type}, the array has dtype {dtype}{hint}."
        )
    row_shape = tuple(int(d) for d in row_shape)
    declared = arg.shape
    if declared is not None:
        if len(declared) != 1 + len(row_shape):
            raise InvalidFeedError(
                f"Input {arg.name!r} expects rank {len(declared)} (shape {declared}), "
                f"the array has rank {1 + len(row_shape)} (shape [rows, {', '.join(map(str, row_shape))}])."
            )
        for axis, (want, got) in enumerate(zip(declared[1:], row_shape), start=1):
            if isinstance(want, int) and want != got:
                raise InvalidFeedError(
                    f"Input {arg.name!r} expects dimension {axis} to be {want} (shape {declared}), the array's is {got}."
                )
    batch_size = _fixed_batch(arg, batch_size)
    feed = FeedSpec(arg.name, dtype if dtype.kind not in "US" else np.dtype(object))

    def probe() -> dict[str, np.ndarray]:
        return {arg.name: _zeros((2, *row_shape), feed.dtype)}

    outputs, all_outputs = _output_specs(sess, output_names, probe)
    return BlockPlan((feed,), outputs, batch_size, all_outputs)


def plan_frame(
    handle: ModelHandle,
    meta: Any,
    *,
    input_name: str | None = None,
    output_names: str | Sequence[str] | None = None,
    batch_size: int | None = None,
) -> BlockPlan:
    """Plan for pandas DataFrames with the columns and dtypes of ``meta`` (an empty frame will do).

    Inputs take their columns by name: a column named like the input feeds a rank-1 input
    (or [rows, 1]); columns ``name_0 .. name_{k-1}`` feed a [rows, k] input. A model with
    one input (or ``input_name``) that finds no such columns takes every column, in order,
    as its [rows, columns] matrix. Columns are cast to the input's element type where
    numpy's ``same_kind`` rule allows it (float64 to float32, int to float); strings feed
    string inputs. Outputs become columns: ``name`` for a 1-D output or a [rows, 1] one,
    ``name_0 .. name_{k-1}`` for a [rows, k] one.
    """
    sess = handle.session()
    batch_size = _check_batch_size(batch_size)
    inputs = sess.get_inputs()
    names = [i.name for i in inputs]
    # inputs are matched on the labels' text; the feeds keep the labels (0, 1, ... work)
    labels = dict(zip((str(c) for c in meta.columns), meta.columns))
    columns = list(labels)
    if len(columns) != len(meta.columns):
        raise InvalidFeedError(
            f"The DataFrame's column names repeat: {list(meta.columns)!r}."
        )
    dtypes = dict(zip(columns, meta.dtypes))
    if input_name is not None:
        arg = _input_arg(inputs, input_name)
        if len(inputs) > 1:
            raise InvalidFeedError(
                f"input_name={input_name!r} feeds every column to one input, but the model needs {names!r}: "
                f"leave input_name out and name the columns after the inputs."
            )
        feeds = [_matrix_feed(sess, arg, columns, dtypes)]
    else:
        matched = [_named_feed(sess, arg, columns, dtypes) for arg in inputs]
        if all(m is not None for m in matched):
            feeds = matched  # type: ignore[assignment]
        elif len(inputs) == 1:
            feeds = [_matrix_feed(sess, inputs[0], columns, dtypes)]
        else:
            missing = [a.name for a, m in zip(inputs, matched) if m is None]
            raise InvalidFeedError(
                f"The model's inputs {names!r} take DataFrame columns by name (a column 'x', or columns "
                f"'x_0', 'x_1', ... for a [rows, k] input); none found for {missing!r} among {columns!r}."
            )
    feeds = [
        FeedSpec(f.name, f.dtype, tuple(labels[c] for c in f.columns), f.vector)
        for f in feeds
    ]
    for f in feeds:
        arg = next(a for a in inputs if a.name == f.name)
        batch_size = _fixed_batch(arg, batch_size)

    def probe() -> dict[str, np.ndarray]:
        return {
            f.name: _zeros((2,) if f.vector else (2, len(f.columns)), f.dtype)
            for f in feeds
        }

    outputs, all_outputs = _output_specs(sess, output_names, probe, frame=True)
    return BlockPlan(tuple(feeds), outputs, batch_size, all_outputs)


def _check_batch_size(batch_size: Any) -> int | None:
    if batch_size is None:
        return None
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int | np.integer)
        or batch_size < 1
    ):
        raise InvalidFeedError(
            f"batch_size must be a positive int or None, got {batch_size!r}."
        )
    return int(batch_size)


def _input_arg(inputs: list, input_name: str):
    for a in inputs:
        if a.name == input_name:
            return a
    raise InvalidFeedError(
        f"input_name={input_name!r} is not an input of the model; its inputs are {[a.name for a in inputs]!r}."
    )


def _fixed_batch(arg, batch_size: int | None) -> int | None:
    """A model whose input has a static first dimension of 1 runs row by row; any other static size is refused."""
    first = arg.shape[0] if arg.shape else None
    if not isinstance(first, int):
        return batch_size
    if first == 1 and batch_size in (None, 1):
        return 1
    raise InvalidFeedError(
        f"Input {arg.name!r} has a fixed first dimension {first} (shape {arg.shape}); blocks of rows need a "
        f"dynamic one{' or batch_size=1' if first == 1 else ''}, got batch_size={batch_size!r}."
    )


def _elem_type(sess: InferenceSession, name: str, inputs: bool) -> int:
    graph = sess.engine.model.graph
    for vi in graph.input if inputs else graph.output:
        if vi.name == name and vi.type.WhichOneof("value") == "tensor_type":
            return int(vi.type.tensor_type.elem_type)
    return 0


def _input_dtype(sess: InferenceSession, arg) -> np.dtype:
    if not arg.type.startswith("tensor("):
        raise InvalidFeedError(
            f"Input {arg.name!r} is a {arg.type}; a DataFrame feeds tensors only."
        )
    elem = _elem_type(sess, arg.name, inputs=True)
    if not elem:
        raise InvalidFeedError(
            f"Input {arg.name!r} declares no element type; a DataFrame cannot be converted to it."
        )
    return ONNX_TO_NP[elem]


def _check_columns(
    arg, cols: Sequence[str], dtypes: dict[str, Any], target: np.dtype
) -> None:
    """Refuse columns whose values would change meaning in the cast (float to int, text to numbers)."""
    for c in cols:
        if not _castable(dtypes[c], target):
            raise InvalidFeedError(
                f"Column {c!r} of dtype {dtypes[c]} cannot feed input {arg.name!r} ({arg.type}): "
                f"only casts of the same kind (float64 to float32, int to float) are made."
            )


def _castable(col_dtype: Any, target: np.dtype) -> bool:
    import pandas as pd

    if target.kind == "O":
        return pd.api.types.is_string_dtype(col_dtype) or pd.api.types.is_object_dtype(
            col_dtype
        )
    try:
        src = np.dtype(col_dtype)
    except TypeError:
        # pandas' nullable Int64, Float32, boolean carry their numpy dtype
        src = getattr(col_dtype, "numpy_dtype", None)
        if src is None:
            return False
    if target.kind == "b":
        return src.kind == "b"
    return src.kind in "biuf" and np.can_cast(src, target, "same_kind")


def _named_feed(
    sess: InferenceSession, arg, columns: list[str], dtypes: dict[str, Any]
) -> FeedSpec | None:
    """The columns named after an input, or None when there are none."""
    rank = len(arg.shape) if arg.shape is not None else None
    width = arg.shape[1] if rank == 2 and isinstance(arg.shape[1], int) else None
    if arg.name in columns and (rank in (1, None) or width in (1, None)):
        cols: tuple[str, ...] = (arg.name,)
        vector = rank == 1
    else:
        cols = ()
        while f"{arg.name}_{len(cols)}" in columns and (
            width is None or len(cols) < width
        ):
            cols += (f"{arg.name}_{len(cols)}",)
        if (
            not cols
            or rank not in (2, None)
            or (width is not None and len(cols) != width)
        ):
            return None
        vector = False
    dtype = _input_dtype(sess, arg)
    _check_columns(arg, cols, dtypes, dtype)
    return FeedSpec(arg.name, dtype, cols, vector)


def _matrix_feed(
    sess: InferenceSession, arg, columns: list[str], dtypes: dict[str, Any]
) -> FeedSpec:
    """Every column, in order, as the input's [rows, columns] matrix."""
    dtype = _input_dtype(sess, arg)
    shape = arg.shape
    if shape is not None and len(shape) == 1 and len(columns) == 1:
        _check_columns(arg, columns, dtypes, dtype)
        return FeedSpec(arg.name, dtype, tuple(columns), True)
    if shape is not None and len(shape) != 2:
        raise InvalidFeedError(
            f"Input {arg.name!r} has shape {shape}; a DataFrame feeds [rows, columns] tensors "
            f"(or one column to a rank-1 input), and this one has {len(columns)} columns."
        )
    if shape is not None and isinstance(shape[1], int) and shape[1] != len(columns):
        raise InvalidFeedError(
            f"Input {arg.name!r} expects {shape[1]} columns (shape {shape}), the DataFrame has {len(columns)}: {columns!r}."
        )
    if not columns:
        raise InvalidFeedError(
            f"Input {arg.name!r} needs columns; the DataFrame has none."
        )
    _check_columns(arg, columns, dtypes, dtype)
    return FeedSpec(arg.name, dtype, tuple(columns), False)


def _zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "O":
        return np.full(shape, "", dtype=object)
    return np.zeros(shape, dtype=dtype)


def _output_specs(
    sess: InferenceSession, output_names: Any, probe, frame: bool = False
) -> tuple[tuple[OutputSpec, ...], bool]:
    """dtype and dims after the rows of each requested output, from the declared types when they
    say it all, else from one run on two rows of zeros (dims that depend on values are not found)."""
    outputs = {o.name: o for o in sess.get_outputs()}
    if output_names is None:
        wanted = list(outputs)
    elif isinstance(output_names, str):
        wanted = [output_names]
    else:
        wanted = list(output_names)
    if not wanted:
        raise InvalidFeedError(
            "output_names is empty; name at least one output or pass None for all."
        )
    for n in wanted:
        if n not in outputs:
            raise InvalidFeedError(
                f"Requested output {n!r} is not an output of the model; its outputs are {list(outputs)!r}."
            )
        if not outputs[n].type.startswith("tensor("):
            raise GraphError(
                f"Output {n!r} is a {outputs[n].type}; predict returns tensors only "
                f"(a classifier converted by skl2onnx needs options={{id(clf): {{'zipmap': False}}}})."
            )
    known: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
    for n in wanted:
        elem = _elem_type(sess, n, inputs=False)
        shape = outputs[n].shape
        if shape is not None and len(shape) == 0:
            raise GraphError(
                f"Output {n!r} is a scalar (shape []); predict needs one output row per input row."
            )
        if elem and shape is not None and all(isinstance(d, int) for d in shape[1:]):
            known[n] = (ONNX_TO_NP[elem], tuple(shape[1:]))
    if len(known) < len(wanted):
        feeds = probe()
        try:
            values = sess.run(wanted, feeds)
        except Exception as e:
            unknown = [n for n in wanted if n not in known]
            raise GraphError(
                f"The model does not declare the dims after the rows of outputs {unknown!r}; running it on "
                f"two rows of zeros to learn them failed: {e}"
            ) from e
        for n, v in zip(wanted, values):
            v = np.asarray(v)
            if v.ndim == 0 or v.shape[0] != 2:
                raise GraphError(
                    f"Output {n!r} came as {describe_value(v)} for 2 input rows: it has no row per input row, "
                    f"so it cannot be computed block by block."
                )
            if n not in known:
                known[n] = (
                    np.dtype(object) if v.dtype.kind in "US" else v.dtype,
                    tuple(v.shape[1:]),
                )
    specs = []
    for n in wanted:
        dtype, shape = known[n]
        specs.append(
            OutputSpec(n, dtype, shape, _output_columns(n, shape) if frame else ())
        )
    if frame:
        seen: dict[str, str] = {}
        for s in specs:
            for c in s.columns:
                if c in seen:
                    raise GraphError(
                        f"Outputs {seen[c]!r} and {s.name!r} both give a column {c!r}."
                    )
                seen[c] = s.name
    return tuple(specs), wanted == list(outputs)


def _output_columns(name: str, shape: tuple[int, ...]) -> tuple[str, ...]:
    if shape in ((), (1,)):
        return (name,)
    if len(shape) == 1:
        return tuple(f"{name}_{j}" for j in range(shape[0]))
    raise GraphError(
        f"Output {name!r} has shape [rows, {', '.join(map(str, shape))}]; a DataFrame column holds one value "
        f"per row, so only 1-D and 2-D outputs become columns: predict on a dask array instead."
    )


# ----------------------------------------------------------------------------------
# Block functions: what runs inside a task, on any engine.


def run_rows(
    handle: ModelHandle, plan: BlockPlan, feeds: dict[str, np.ndarray], rows: int
) -> list[np.ndarray]:
    """The plan's outputs for ``rows`` rows of feeds, in sub-batches of ``plan.batch_size`` rows.

    Zero rows give empty outputs of the planned dtypes without running the model.
    """
    if rows == 0:
        return [np.empty((0, *o.shape), o.dtype) for o in plan.outputs]
    sess = handle.session()
    names = None if plan.all_outputs else [o.name for o in plan.outputs]
    step = plan.batch_size or rows
    if step >= rows:
        return _checked(plan, sess.run(names, feeds), rows)
    parts = [
        _checked(
            plan,
            sess.run(names, {k: v[s : s + step] for k, v in feeds.items()}),
            min(step, rows - s),
        )
        for s in range(0, rows, step)
    ]
    return [np.concatenate([p[i] for p in parts]) for i in range(len(plan.outputs))]


def _checked(plan: BlockPlan, values: list[Any], rows: int) -> list[np.ndarray]:
    """Outputs as planned, or an error: the dask metadata promised these dtypes and shapes."""
    out = []
    for spec, v in zip(plan.outputs, values):
        v = np.asarray(v)
        if v.dtype != spec.dtype and spec.dtype.kind == "O" and v.dtype.kind in "US":
            v = v.astype(object)
        if v.dtype != spec.dtype or v.shape != (rows, *spec.shape):
            want = f"{spec.dtype}[{','.join(map(str, (rows, *spec.shape)))}]"
            raise GraphError(
                f"Output {spec.name!r} came as {describe_value(v)} for {rows} rows; the plan, made from the "
                f"model's declared types, expected {want}."
            )
        out.append(v)
    return out


def array_block(
    handle: ModelHandle, plan: BlockPlan, block: np.ndarray
) -> tuple[np.ndarray, ...]:
    """The plan's outputs for one block of rows of an array (the plan's single input)."""
    block = np.asarray(block)
    return tuple(run_rows(handle, plan, {plan.feeds[0].name: block}, len(block)))


def frame_feeds(plan: BlockPlan, frame: Any) -> dict[str, np.ndarray]:
    """The model's feeds from a pandas DataFrame's columns, cast as planned."""
    feeds = {}
    for f in plan.feeds:
        try:
            if f.vector:
                value = frame[f.columns[0]].to_numpy(dtype=f.dtype)
            else:
                value = np.ascontiguousarray(
                    frame[list(f.columns)].to_numpy(dtype=f.dtype)
                )
        except (
            TypeError,
            ValueError,
        ) as e:  # missing values in integer columns, for one
            raise InvalidFeedError(
                f"Columns {list(f.columns)!r} cannot be converted to {f.dtype} for input {f.name!r}: {e}"
            ) from e
        feeds[f.name] = value
    return feeds


def frame_outputs(plan: BlockPlan, values: list[np.ndarray], index: Any) -> Any:
    """A pandas DataFrame of the outputs, one column per value (see :func:`plan_frame`), on ``index``."""
    import pandas as pd

    cols: dict[str, Any] = {}
    for spec, v in zip(plan.outputs, values):
        v2 = v.reshape(len(v), int(np.prod(spec.shape)))
        for j, c in enumerate(spec.columns):
            col = v2[:, j]
            # object, not pandas' inferred str: the same dtype for the metadata's empty column
            cols[c] = (
                pd.Series(col, index=index, dtype=object, copy=False)
                if col.dtype.kind == "O"
                else col
            )
    return pd.DataFrame(cols, index=index, copy=False)


def frame_block(handle: ModelHandle, plan: BlockPlan, frame: Any) -> Any:
    """The plan's outputs for one pandas DataFrame, as a DataFrame on the same index."""
    values = run_rows(handle, plan, frame_feeds(plan, frame), len(frame))
    return frame_outputs(plan, values, frame.index)


def frame_meta(plan: BlockPlan, index: Any) -> Any:
    """The empty DataFrame :func:`frame_block` returns for zero rows: dask's ``meta``."""
    return frame_outputs(
        plan, [np.empty((0, *o.shape), o.dtype) for o in plan.outputs], index[:0]
    )
