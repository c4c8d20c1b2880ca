"""A model as a readable listing (to_text) and as JSON-serialisable data (to_json)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, helper

from ..dtypes import ONNX_TO_NP, elem_name, type_shape, type_string
from .shapes import run_order

#: initializers and tensor attributes of at most this many elements show their values
SMALL = 16


def _number(x: Any) -> Any:
    """A JSON-safe number: NaN and infinities become the strings 'nan', 'inf', '-inf'."""
    f = float(x)
    if math.isfinite(f):
        return int(x) if isinstance(x, int | np.integer) else f
    return "nan" if math.isnan(f) else ("inf" if f > 0 else "-inf")


def _values(arr: np.ndarray) -> list[Any]:
    flat = arr.reshape(-1)
    if arr.dtype.kind in "OUS":
        return [str(v) for v in flat]
    if arr.dtype.kind == "b":
        return [bool(v) for v in flat]
    if arr.dtype.kind == "c":
        return [[_number(v.real), _number(v.imag)] for v in flat]
    if arr.dtype.kind in "iu":
        return [int(v) for v in flat]
    if arr.dtype.itemsize <= 4:  # the shortest text that reads back as the same float32
        return [_number(float(str(np.float32(v)))) for v in flat]
    return [_number(v) for v in flat.astype(np.float64)]


def _np_name(elem_type: int) -> str:
    dt = ONNX_TO_NP.get(elem_type)
    if dt is None:
        return elem_name(elem_type)
    return "str" if dt.kind == "O" else dt.name


def tensor_data(tensor: onnx.TensorProto) -> dict[str, Any]:
    """name, dtype, shape, bytes of a TensorProto; its values too when it has at most
    :data:`SMALL` elements and holds them (external data is not read)."""
    shape = [int(d) for d in tensor.dims]
    size = math.prod(shape)
    dt = ONNX_TO_NP.get(tensor.data_type)
    out: dict[str, Any] = {
        "name": tensor.name,
        "dtype": _np_name(tensor.data_type),
        "shape": shape,
        "bytes": None if dt is None or dt.kind == "O" else size * dt.itemsize,
    }
    external = tensor.data_location == onnx.TensorProto.EXTERNAL
    if size <= SMALL and not external:
        from ..dtypes import to_array

        try:
            out["values"] = _values(to_array(tensor))
        except Exception:  # noqa: BLE001  (a type numpy_helper cannot decode: no values shown)
            pass
    return out


def attribute_data(att: AttributeProto, outer: set[str]) -> Any:
    """A node attribute as JSON-serialisable data; graphs become nested listings."""
    t = att.type
    if t == AttributeProto.GRAPH:
        return {"graph": graph_data(att.g, outer)}
    if t == AttributeProto.GRAPHS:
        return {"graphs": [graph_data(g, outer) for g in att.graphs]}
    if t == AttributeProto.TENSOR:
        return {"tensor": tensor_data(att.t)}
    if t == AttributeProto.TENSORS:
        return {"tensors": [tensor_data(x) for x in att.tensors]}
    if t == AttributeProto.SPARSE_TENSOR:
        return {"sparse_tensor": {"dtype": _np_name(att.sparse_tensor.values.data_type), "shape": list(att.sparse_tensor.dims)}}
    if t == AttributeProto.SPARSE_TENSORS:
        return {"sparse_tensors": [{"dtype": _np_name(s.values.data_type), "shape": list(s.dims)} for s in att.sparse_tensors]}
    if t == AttributeProto.TYPE_PROTO:
        return {"type": type_string(att.tp)}
    if t == AttributeProto.TYPE_PROTOS:
        return {"types": [type_string(x) for x in att.type_protos]}
    if att.ref_attr_name:
        return {"ref_attr_name": att.ref_attr_name}
    value = helper.get_attribute_value(att)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else _att_number(v) for v in value]
    return _att_number(value)


def _att_number(v: Any) -> Any:
    # FLOAT attributes are float32: shown by the shortest text that reads back as the same float32
    return _number(float(str(np.float32(v)))) if isinstance(v, float) else _number(v)


def _value_data(vi: onnx.ValueInfoProto) -> dict[str, Any]:
    tp = vi.type if vi.HasField("type") else None
    return {"name": vi.name, "type": type_string(tp) if tp is not None and tp.WhichOneof("value") else "unknown", "shape": type_shape(tp)}


def node_data(i: int, node: onnx.NodeProto, outer: set[str]) -> dict[str, Any]:
    return {
        "i": i,
        "name": node.name,
        "op_type": node.op_type,
        "domain": node.domain,
        "inputs": list(node.input),
        "outputs": list(node.output),
        "attributes": {a.name: attribute_data(a, outer) for a in node.attribute},
    }


def graph_data(graph: onnx.GraphProto, outer: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """name, inputs, initializers, nodes (in run order) and outputs of a graph."""
    scope = set(outer) | {i.name for i in graph.input} | {i.name for i in graph.initializer}
    for node in graph.node:
        scope.update(node.output)
    inits = [tensor_data(t) for t in graph.initializer]
    inits += [dict(tensor_data(s.values), shape=list(s.dims), sparse=True) for s in graph.sparse_initializer]
    return {
        "name": graph.name,
        "inputs": [_value_data(v) for v in graph.input],
        "initializers": inits,
        "nodes": [node_data(i, n, scope) for i, n in enumerate(run_order(graph, outer))],
        "outputs": [_value_data(v) for v in graph.output],
    }


def model_data(model: onnx.ModelProto) -> dict[str, Any]:
    """The whole model: graph_data of the main graph plus ir_version, opsets and the
    model-local functions (domain, name, inputs, outputs, attributes, nodes)."""
    data = {"ir_version": int(model.ir_version), "opsets": {o.domain: int(o.version) for o in model.opset_import}}
    data.update(graph_data(model.graph))
    data["functions"] = [
        {
            "domain": f.domain,
            "name": f.name,
            "inputs": list(f.input),
            "outputs": list(f.output),
            "attributes": list(f.attribute) + [a.name for a in f.attribute_proto],
            "nodes": [node_data(i, n, set(f.input)) for i, n in enumerate(f.node)],
        }
        for f in model.functions
    ]
    return data


# --- text ------------------------------------------------------------------------------------------


def _shape_text(shape: list[Any] | None) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _att_text(value: Any) -> str:
    if isinstance(value, dict):
        if "tensor" in value:
            t = value["tensor"]
            vals = f"={t['values']}" if "values" in t else ""
            return f"tensor({t['dtype']}{_shape_text(t['shape'])}){vals}"
        if "graph" in value:
            return f"<graph {value['graph']['name']!r}>"
        if "graphs" in value:
            return f"<{len(value['graphs'])} graphs>"
        key, val = next(iter(value.items()))
        return f"{key}({val})"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _graph_lines(data: dict[str, Any], indent: str) -> list[str]:
    lines = [f"{indent}inputs:"]
    for v in data["inputs"]:
        lines.append(f"{indent}  {v['name']}: {v['type']} {_shape_text(v['shape'])}")
    if data["initializers"]:
        lines.append(f"{indent}initializers:")
        for t in data["initializers"]:
            vals = f" = {t['values']}" if "values" in t else ""
            lines.append(f"{indent}  {t['name']}: {t['dtype']} {_shape_text(t['shape'])}{vals}")
    lines.append(f"{indent}nodes:")
    for n in data["nodes"]:
        name = f" {n['name']!r}" if n["name"] else ""
        op = f"{n['domain']}.{n['op_type']}" if n["domain"] not in ("", "ai.onnx") else n["op_type"]
        plain = {k: v for k, v in n["attributes"].items() if not (isinstance(v, dict) and ("graph" in v or "graphs" in v))}
        atts = "  " + ", ".join(f"{k}={_att_text(v)}" for k, v in plain.items()) if plain else ""
        lines.append(f"{indent}  {n['i']:>3} {op}{name}({', '.join(n['inputs'])}) -> {', '.join(n['outputs'])}{atts}")
        for k, v in n["attributes"].items():
            subs = [v["graph"]] if isinstance(v, dict) and "graph" in v else v.get("graphs", []) if isinstance(v, dict) else []
            for sub in subs:
                lines.append(f"{indent}        {k}: graph {sub['name']!r}")
                lines.extend(_graph_lines(sub, indent + "          "))
    lines.append(f"{indent}outputs:")
    for v in data["outputs"]:
        lines.append(f"{indent}  {v['name']}: {v['type']} {_shape_text(v['shape'])}")
    return lines


def to_text(model: onnx.ModelProto) -> str:
    """The listing: a header (graph name, IR version, opsets), then inputs, initializers
    (dtype, shape, values when small), nodes in run order with their attributes (subgraphs
    listed below their node, indented), outputs, and the model-local functions."""
    data = model_data(model)
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in data["opsets"].items())
    lines = [f"graph {data['name']!r} (ir_version {data['ir_version']}; opsets {opsets})"]
    lines.extend(_graph_lines(data, ""))
    for f in data["functions"]:
        lines.append(f"function {f['domain']}.{f['name']}({', '.join(f['inputs'])}) -> {', '.join(f['outputs'])}")
        for n in f["nodes"]:
            lines.append(f"  {n['i']:>3} {n['op_type']}({', '.join(n['inputs'])}) -> {', '.join(n['outputs'])}")
    return "\n".join(lines)
