"""Loading models: paths, bytes, file objects and protos; version checks; safe external data."""

from __future__ import annotations

import os
from typing import IO, Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto, TensorProto, defs

from .dtypes import to_array
from .errors import GraphError, ModelLoadError, SecurityError

ModelSource = str | os.PathLike | bytes | bytearray | memoryview | ModelProto | IO[bytes]

#: newest IR version and ai.onnx opset this runtime understands
MAX_IR_VERSION = onnx.IR_VERSION
MAX_OPSET = defs.onnx_opset_version()


def load_model(model: Any) -> tuple[ModelProto, str | None]:
    """Read a model from any accepted source; returns the proto and the folder external data lives in."""
    if isinstance(model, ModelProto):
        return model, None
    if isinstance(model, str | os.PathLike):
        path = os.fspath(model)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise ModelLoadError(f"Model file {path!r} does not exist.") from None
        except IsADirectoryError:
            raise ModelLoadError(f"Model path {path!r} is a directory, not a model file.") from None
        except OSError as e:
            raise ModelLoadError(f"Model file {path!r} cannot be read: {e.strerror or e}.") from e
        return _parse(data, repr(path)), os.path.dirname(os.path.abspath(path))
    if isinstance(model, bytes | bytearray | memoryview):
        return _parse(bytes(model), "the given bytes"), None
    read = getattr(model, "read", None)
    if callable(read):
        data = read()
        if isinstance(data, str):
            raise ModelLoadError("The model file object is opened in text mode; open it with 'rb'.")
        name = getattr(model, "name", None)
        base = os.path.dirname(os.path.abspath(name)) if isinstance(name, str) else None
        return _parse(data, repr(name) if name else "the given file object"), base
    raise ModelLoadError(
        f"Cannot load a model from a {type(model).__name__}; expected a path, bytes, "
        f"a binary file object or an onnx.ModelProto."
    )


def _parse(data: bytes, what: str) -> ModelProto:
    if not data:
        raise ModelLoadError(f"Model {what} is empty.")
    proto = ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise ModelLoadError(f"Model {what} is not a valid ONNX protobuf ({e}).") from None
    if not proto.HasField("graph"):
        raise ModelLoadError(f"Model {what} holds no graph: it is not an ONNX model or it is truncated.")
    return proto


def check_versions(model: ModelProto) -> dict[str, int]:
    """Check IR version and opsets; return the domain -> opset map (``""`` for ai.onnx)."""
    if model.ir_version > MAX_IR_VERSION:
        raise ModelLoadError(
            f"Model IR version {model.ir_version} is newer than onnxrt supports (at most {MAX_IR_VERSION})."
        )
    opsets: dict[str, int] = {}
    for imp in model.opset_import:
        dom = "" if imp.domain in ("", "ai.onnx") else imp.domain
        opsets[dom] = int(imp.version)
    if not model.opset_import:
        opsets[""] = 1  # IR version 1 models carry no opset_import
    if opsets.get("", 0) > MAX_OPSET:
        raise ModelLoadError(
            f"Model imports opset {opsets['']} of the ai.onnx domain; onnxrt supports up to {MAX_OPSET}."
        )
    return opsets


def _external_path(tensor: TensorProto, base_dir: str | None) -> tuple[str, int, int | None]:
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    if not location:
        raise ModelLoadError(f"Initializer {tensor.name!r} uses external data without a location.")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or (len(location) > 1 and location[1] == ":"):
        raise SecurityError(
            f"Initializer {tensor.name!r} names external data by the absolute path {location!r}; "
            f"only paths inside the model's folder are allowed."
        )
    base = os.path.realpath(base_dir or os.getcwd())
    full = os.path.realpath(os.path.join(base, location))
    if os.path.commonpath([base, full]) != base:
        raise SecurityError(
            f"Initializer {tensor.name!r} names external data {location!r}, which resolves to {full!r}, "
            f"outside the model's folder {base!r}."
        )
    offset = int(info.get("offset", 0) or 0)
    length = int(info["length"]) if info.get("length") else None
    return full, offset, length


def load_external_data(tensor: TensorProto, base_dir: str | None) -> None:
    """Read an external tensor's bytes into it (in place), only from inside ``base_dir``."""
    path, offset, length = _external_path(tensor, base_dir)
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            raw = f.read() if length is None else f.read(length)
    except OSError as e:
        raise ModelLoadError(f"External data of tensor {tensor.name!r} cannot be read from {path!r}: {e}.") from e
    del tensor.external_data[:]
    tensor.data_location = TensorProto.DEFAULT
    tensor.raw_data = raw


def initializer_array(tensor: TensorProto, base_dir: str | None) -> np.ndarray:
    """numpy value of an initializer, reading external data only inside ``base_dir``."""
    if tensor.data_location != TensorProto.EXTERNAL:
        return to_array(tensor)
    copy = TensorProto()
    copy.CopyFrom(tensor)
    load_external_data(copy, base_dir)
    try:
        return to_array(copy)
    except ValueError as e:
        raise ModelLoadError(f"External data of initializer {tensor.name!r} does not match its shape: {e}.") from e


def graph_free_names(graph: onnx.GraphProto) -> set[str]:
    """Names a graph reads but does not define (what a subgraph takes from outer scopes)."""
    defined = {i.name for i in graph.input}
    defined.update(i.name for i in graph.initializer)
    defined.update(i.values.name for i in graph.sparse_initializer)
    for node in graph.node:
        defined.update(node.output)
    used: set[str] = set()
    for node in graph.node:
        used.update(n for n in node.input if n)
        for att in node.attribute:
            if att.type == onnx.AttributeProto.GRAPH:
                used |= graph_free_names(att.g)
            elif att.type == onnx.AttributeProto.GRAPHS:
                for g in att.graphs:
                    used |= graph_free_names(g)
    used.update(o.name for o in graph.output)
    return used - defined


def node_free_names(node: onnx.NodeProto) -> set[str]:
    """Outer names read by a node's subgraphs (its implicit inputs)."""
    out: set[str] = set()
    for att in node.attribute:
        if att.type == onnx.AttributeProto.GRAPH:
            out |= graph_free_names(att.g)
        elif att.type == onnx.AttributeProto.GRAPHS:
            for g in att.graphs:
                out |= graph_free_names(g)
    return out


def sort_nodes(
    nodes: list[Any],
    available: set[str],
    graph_name: str = "",
) -> list[int]:
    """Topological order of ``nodes`` (NodeProto-like: .input, .output, .name, .op_type, plus .attribute).

    Checks that every input is defined exactly once; keeps the stored order where it is
    already valid. Raises GraphError on undefined names, duplicate outputs and cycles.
    """
    producer: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for out in node.output:
            if not out:
                continue
            if out in producer:
                other = nodes[producer[out]]
                raise GraphError(
                    f"Value {out!r} is produced twice, by node {other.name!r} ({other.op_type}) "
                    f"and node {node.name!r} ({node.op_type})."
                )
            if out in available:
                raise GraphError(
                    f"Node {node.name!r} ({node.op_type}) produces {out!r}, which is already a graph input or initializer."
                )
            producer[out] = i
    deps: list[set[int]] = []
    for node in nodes:
        needs = [n for n in node.input if n]
        needs.extend(sorted(node_free_names(node)))
        d: set[int] = set()
        for name in needs:
            if name in producer:
                d.add(producer[name])
            elif name not in available:
                where = f" of graph {graph_name!r}" if graph_name else ""
                raise GraphError(
                    f"Node {node.name!r} ({node.op_type}) reads {name!r}, which no node, input or initializer{where} defines."
                )
        deps.append(d)
    users: list[list[int]] = [[] for _ in nodes]
    indeg = [0] * len(nodes)
    for i, d in enumerate(deps):
        indeg[i] = len(d)
        for j in d:
            users[j].append(i)
    import heapq

    ready = [i for i, k in enumerate(indeg) if k == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        stuck = [f"{nodes[i].name!r} ({nodes[i].op_type})" for i, k in enumerate(indeg) if k > 0]
        raise GraphError(f"The graph has a cycle through nodes {', '.join(stuck[:5])}.")
    return order
