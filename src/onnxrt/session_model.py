"""The model a session runs: SessionOptions' dimension overrides and initializers applied, the optimised model written."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .errors import InvalidOptionError


def _needs_changes(options: Any) -> bool:
    return bool(
        getattr(options, "_free_dims_by_name", None)
        or getattr(options, "_free_dims_by_denotation", None)
        or getattr(options, "_initializers", None)
        or getattr(options, "_external_initializers", None)
        or getattr(options, "_external_files", None)
    )


def prepare_model(source: Any, options: Any) -> Any:
    """``source`` as given when the options change nothing; else a ModelProto (a copy: the
    caller's proto is never modified) with the free dimensions fixed and the initializers
    the options give in place, its other external data read in (so that it needs no folder)."""
    if not _needs_changes(options):
        return source
    from onnx import ModelProto

    from .model import load_model

    proto, base_dir = load_model(source)
    if isinstance(source, ModelProto):
        copy = ModelProto()
        copy.CopyFrom(source)
        proto = copy
    graph = proto.graph
    _fix_dims(graph, options._free_dims_by_name, options._free_dims_by_denotation)
    _replace_initializers(graph, options._initializers)
    _external_initializers(graph, options._external_initializers)
    _files_in_memory(graph, options._external_files)
    _read_external(graph, base_dir)
    return proto


# ------------------------------------------------------------------------------------------
# free dimensions
# ------------------------------------------------------------------------------------------


def _fix_dims(graph: Any, by_name: dict[str, int], by_denotation: dict[str, int]) -> None:
    """Fix the overridden dimensions of the inputs; a symbol fixed there (by its name or by
    its dimension's denotation) takes the same value in the outputs and value_info."""
    if not by_name and not by_denotation:
        return
    symbols = dict(by_name)
    for vi in graph.input:
        for axis, dim in _dims(vi):
            which = dim.WhichOneof("value")
            named = by_name.get(dim.dim_param) if which == "dim_param" else None
            denoted = by_denotation.get(dim.denotation) if dim.denotation else None
            if named is not None and denoted is not None and named != denoted:
                raise InvalidOptionError(
                    f"Conflicting free dimension overrides: dimension {axis} of input {vi.name!r} is named "
                    f"{dim.dim_param!r} (override {named}) and denoted {dim.denotation!r} (override {denoted})."
                )
            value = named if named is not None else denoted
            if value is None:
                continue
            if which == "dim_value":
                if dim.dim_value != value:
                    raise InvalidOptionError(
                        f"The model has input {vi.name!r} with a fixed dimension size {dim.dim_value} (axis {axis}, "
                        f"denotation {dim.denotation!r}) which does not equal the specified override of {value}."
                    )
                continue
            if which == "dim_param":
                symbols.setdefault(dim.dim_param, value)
            dim.dim_value = value  # clears dim_param (one of)
    for group in (graph.output, graph.value_info):
        for vi in group:
            for _, dim in _dims(vi):
                value = symbols.get(dim.dim_param) if dim.WhichOneof("value") == "dim_param" else None
                if value is None and dim.denotation and dim.WhichOneof("value") != "dim_value":
                    value = by_denotation.get(dim.denotation)
                if value is not None:
                    dim.dim_value = value


def _dims(vi: Any) -> list[tuple[int, Any]]:
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return []
    return list(enumerate(vi.type.tensor_type.shape.dim))


# ------------------------------------------------------------------------------------------
# initializers
# ------------------------------------------------------------------------------------------


def _tensor(name: str, value: np.ndarray) -> Any:
    from onnx import numpy_helper

    if value.dtype.kind in "USO":
        value = np.array([str(v) for v in value.reshape(-1)], dtype=object).reshape(value.shape)
    return numpy_helper.from_array(value, name)


def _check_like(method: str, init: Any, value: np.ndarray) -> None:
    from .dtypes import elem_name, same_dtype

    if not same_dtype(value.dtype, init.data_type):
        raise InvalidOptionError(
            f"SessionOptions.{method}: initializer {init.name!r} is {elem_name(init.data_type)}, the value given is {value.dtype}."
        )
    if list(value.shape) != list(init.dims):
        raise InvalidOptionError(
            f"SessionOptions.{method}: initializer {init.name!r} has shape {list(init.dims)}, the value given {list(value.shape)}."
        )


def _initializer_positions(graph: Any, values: dict[str, np.ndarray], method: str) -> list[tuple[int, str, np.ndarray]]:
    """(position in graph.initializer, name, value) of each value; an unknown name is an error."""
    index = {init.name: i for i, init in enumerate(graph.initializer)}
    found = []
    for name, value in values.items():
        i = index.get(name)
        if i is None:
            raise InvalidOptionError(
                f"SessionOptions.{method}: {name!r} is not an initializer of the model; "
                f"its initializers are {sorted(index)[:20]!r}."
            )
        found.append((i, name, value))
    return found


def _replace_initializers(graph: Any, values: dict[str, np.ndarray]) -> None:
    for i, name, value in _initializer_positions(graph, values, "add_initializer"):
        _check_like("add_initializer", graph.initializer[i], value)
        graph.initializer[i].CopyFrom(_tensor(name, value))


def _external_initializers(graph: Any, values: dict[str, np.ndarray]) -> None:
    from onnx import TensorProto

    for i, name, value in _initializer_positions(graph, values, "add_external_initializers"):
        init = graph.initializer[i]
        if init.data_location != TensorProto.EXTERNAL:
            raise InvalidOptionError(
                f"SessionOptions.add_external_initializers: initializer {name!r} keeps its data in the model, "
                f"not in an external file (use add_initializer to replace it)."
            )
        _check_like("add_external_initializers", init, value)
        init.CopyFrom(_tensor(name, value))


def _files_in_memory(graph: Any, files: dict[str, bytes]) -> None:
    from onnx import TensorProto

    if not files:
        return
    table = {os.path.normpath(k): v for k, v in files.items()}
    for init in graph.initializer:
        if init.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in init.external_data}
        location = os.path.normpath(info.get("location", ""))
        data = table.get(location)
        if data is None:
            raise InvalidOptionError(
                f"Initializer {init.name!r} reads external file {info.get('location', '')!r}, which is not among "
                f"the files given to add_external_initializers_from_files_in_memory ({sorted(files)!r})."
            )
        offset = int(info.get("offset", 0) or 0)
        length = int(info["length"]) if info.get("length") else len(data) - offset
        if offset < 0 or length < 0 or offset + length > len(data):
            raise InvalidOptionError(
                f"Initializer {init.name!r} reads {length} bytes at offset {offset} of file {info.get('location')!r}, "
                f"which holds {len(data)} bytes."
            )
        del init.external_data[:]
        init.data_location = TensorProto.DEFAULT
        init.raw_data = data[offset : offset + length]


def _read_external(graph: Any, base_dir: str | None) -> None:
    """Read the remaining external data (checked to stay inside the model's folder)."""
    from onnx import AttributeProto, TensorProto

    from .model import load_external_data

    for init in graph.initializer:
        if init.data_location == TensorProto.EXTERNAL:
            load_external_data(init, base_dir)
    for node in graph.node:
        for att in node.attribute:
            if att.type == AttributeProto.GRAPH:
                _read_external(att.g, base_dir)
            elif att.type == AttributeProto.GRAPHS:
                for g in att.graphs:
                    _read_external(g, base_dir)
            elif att.type == AttributeProto.TENSOR and att.t.data_location == TensorProto.EXTERNAL:
                load_external_data(att.t, base_dir)


# ------------------------------------------------------------------------------------------
# the optimised model
# ------------------------------------------------------------------------------------------


def optimized_model(engine: Any) -> Any:
    """A ModelProto of the plan after optimisation: its nodes (onnxrt's fused operators in
    domain ``onnxrt`` included) and constants (folded ones included), the model's inputs,
    outputs, functions and metadata."""
    from onnx import ModelProto, OperatorSetIdProto

    src = engine.model
    plan = engine.plan
    model = ModelProto()
    model.ir_version = src.ir_version
    model.producer_name = src.producer_name
    model.producer_version = src.producer_version
    model.domain = src.domain
    model.model_version = src.model_version
    model.doc_string = src.doc_string
    model.metadata_props.extend(src.metadata_props)
    model.functions.extend(src.functions)
    graph = model.graph
    graph.name = src.graph.name
    graph.doc_string = src.graph.doc_string
    graph.input.extend(src.graph.input)
    graph.output.extend(src.graph.output)
    for name, value in plan.initializers.items():
        graph.initializer.append(_tensor(name, np.asarray(value)))
    opsets = dict(engine.opsets)
    for st in plan.steps:
        graph.node.append(st.node.proto)
        domain = "" if st.node.proto.domain == "ai.onnx" else st.node.proto.domain
        if domain not in opsets:
            opsets[domain] = int(st.node.opsets.get(domain, 1))
    for domain, version in sorted(opsets.items()):
        model.opset_import.append(OperatorSetIdProto(domain=domain, version=version))
    return model


def write_optimized_model(engine: Any, path: str, options: Any) -> None:
    """Write :func:`optimized_model` to ``path``; with the session configuration entry
    ``session.optimized_model_external_initializers_file_name`` set, initializers of at least
    ``session.optimized_model_external_initializers_min_size_in_bytes`` bytes (1024 by
    default) go to that file, next to the model."""
    import onnx

    model = optimized_model(engine)
    config = getattr(options, "_config", {})
    external = config.get("session.optimized_model_external_initializers_file_name")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        if external:
            try:
                threshold = int(config.get("session.optimized_model_external_initializers_min_size_in_bytes", "1024"))
            except ValueError:
                raise InvalidOptionError(
                    "session.optimized_model_external_initializers_min_size_in_bytes must be an integer, got "
                    f"{config['session.optimized_model_external_initializers_min_size_in_bytes']!r}."
                ) from None
            target = os.path.join(folder, external)
            if os.path.exists(target):
                os.remove(target)  # onnx appends to an existing data file
            onnx.save_model(
                model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                location=external, size_threshold=threshold,
            )
        else:
            with open(path, "wb") as f:
                f.write(model.SerializeToString())
    except OSError as e:
        raise InvalidOptionError(
            f"SessionOptions.optimized_model_filepath: the optimised model cannot be written to {path!r}: {e}."
        ) from e
