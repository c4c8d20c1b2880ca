"""A float32 model rewritten to compute in float64, and the node-by-node drift between the two."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, TypeProto, helper, numpy_helper

from ..dtypes import NP_TO_ONNX, elem_name
from ..errors import OnnxRuntimeError
from ..model import initializer_array
from .compare import difference
from .shapes import infer_shapes, run_order

#: attributes naming an element type that the node produces
_DTYPE_ATTRIBUTES = {"to", "dtype", "output_dtype"}
#: operators whose float32 inputs and outputs stay float32 (Casts around them): their
#: meaning is in the bits
_BIT_OPS = {"BitCast"}


def _target(dtype: Any) -> int:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise OnnxRuntimeError(f"switch_initializers_dtype: {dtype!r} is not a numpy dtype.") from None
    code = NP_TO_ONNX.get(dt)
    if dt.kind != "f" or code is None or code == TensorProto.FLOAT:
        raise OnnxRuntimeError(
            f"switch_initializers_dtype switches float32 to another float type (float64 usually), got {dt}."
        )
    return code


def _switch_type(tp: TypeProto, to: int) -> None:
    which = tp.WhichOneof("value")
    if which == "tensor_type" and tp.tensor_type.elem_type == TensorProto.FLOAT:
        tp.tensor_type.elem_type = to
    elif which == "sparse_tensor_type" and tp.sparse_tensor_type.elem_type == TensorProto.FLOAT:
        tp.sparse_tensor_type.elem_type = to
    elif which == "sequence_type":
        _switch_type(tp.sequence_type.elem_type, to)
    elif which == "optional_type":
        _switch_type(tp.optional_type.elem_type, to)
    elif which == "map_type":
        _switch_type(tp.map_type.value_type, to)


def _switch_tensor(t: TensorProto, to: int, base_dir: str | None) -> TensorProto:
    if t.data_type != TensorProto.FLOAT:
        return t
    arr = initializer_array(t, base_dir).astype(helper.tensor_dtype_to_np_dtype(to))
    return numpy_helper.from_array(arr, t.name)


def _switch_node(node: onnx.NodeProto, to: int, base_dir: str | None, done: list[tuple[str, str, str]]) -> None:
    for att in node.attribute:
        if att.type == AttributeProto.GRAPH:
            _switch_graph(att.g, to, base_dir, done)
        elif att.type == AttributeProto.GRAPHS:
            for g in att.graphs:
                _switch_graph(g, to, base_dir, done)
        elif (
            att.type == AttributeProto.INT and att.name in _DTYPE_ATTRIBUTES and att.i == TensorProto.FLOAT
            and node.op_type not in _BIT_OPS
        ):
            att.i = to
            done.append(("attribute", node.name or node.op_type, att.name))
        elif att.type == AttributeProto.TENSOR and att.t.data_type == TensorProto.FLOAT:
            att.t.CopyFrom(_switch_tensor(att.t, to, base_dir))
            done.append(("attribute", node.name or node.op_type, att.name))
    present = {a.name for a in node.attribute}
    if node.domain in ("", "ai.onnx") and node.op_type == "ConstantOfShape" and "value" not in present:
        # the default value is a float32 zero
        zero = numpy_helper.from_array(np.zeros(1, dtype=helper.tensor_dtype_to_np_dtype(to)))
        node.attribute.append(helper.make_attribute("value", zero))
        done.append(("attribute", node.name or node.op_type, "value"))
    elif node.domain in ("", "ai.onnx") and node.op_type in ("RandomNormal", "RandomUniform") and "dtype" not in present:
        node.attribute.append(helper.make_attribute("dtype", to))  # float32 by default
        done.append(("attribute", node.name or node.op_type, "dtype"))
    if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        for k, att in enumerate(node.attribute):
            if att.name in ("value_float", "value_floats"):
                values = np.array(helper.get_attribute_value(att), dtype=helper.tensor_dtype_to_np_dtype(to))
                new = helper.make_attribute("value", numpy_helper.from_array(values))
                del node.attribute[k]
                node.attribute.append(new)
                done.append(("attribute", node.name or node.op_type, att.name))
                break


def _switch_graph(graph: onnx.GraphProto, to: int, base_dir: str | None, done: list[tuple[str, str, str]]) -> None:
    for k, init in enumerate(graph.initializer):
        if init.data_type == TensorProto.FLOAT:
            graph.initializer[k].CopyFrom(_switch_tensor(init, to, base_dir))
            done.append(("initializer", init.name, elem_name(to)))
    for sp in graph.sparse_initializer:
        if sp.values.data_type == TensorProto.FLOAT:
            sp.values.CopyFrom(_switch_tensor(sp.values, to, base_dir))
            done.append(("initializer", sp.values.name, elem_name(to)))
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if vi.HasField("type"):
            _switch_type(vi.type, to)
    for node in graph.node:
        _switch_node(node, to, base_dir, done)


def _allowed(schema: Any, formal: Any) -> set[str]:
    constraints = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    return constraints.get(formal.type_str, {formal.type_str})


def _guard(model: onnx.ModelProto, original: onnx.ModelProto, to: int, opsets: dict[str, int], done: list[tuple[str, str, str]]) -> None:
    """Casts around the main graph's operators whose schema has no room for the new type:
    their float inputs go back to float32, their float32-only outputs forward to the new type."""
    from ..ops_cpu._op import get_schema

    infos = infer_shapes(original, opsets)
    wanted = f"tensor({elem_name(to)})"
    graph = model.graph
    nodes: list[onnx.NodeProto] = []
    taken = {o for n in graph.node for o in n.output} | {i.name for i in graph.input} | {i.name for i in graph.initializer}

    def fresh(base: str) -> str:
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}{k}"
        taken.add(name)
        return name

    for node in graph.node:
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        schema = get_schema(node.op_type, opsets.get(domain), domain)
        if schema is None or not schema.inputs and not schema.outputs:
            nodes.append(node)
            continue
        for k, name in enumerate(node.input):
            if not name or not schema.inputs:
                continue
            formal = schema.inputs[min(k, len(schema.inputs) - 1)]
            allowed = _allowed(schema, formal)
            info = infos.get(name)
            keep = wanted not in allowed or node.op_type in _BIT_OPS
            if info is not None and info.elem_type == TensorProto.FLOAT and keep and "tensor(float)" in allowed:
                cast_out = fresh(f"{name}__as_float32")
                nodes.append(helper.make_node("Cast", [name], [cast_out], to=TensorProto.FLOAT, name=fresh(f"{cast_out}_cast")))
                node.input[k] = cast_out
                done.append(("cast input to float32", node.name or node.op_type, name))
        after = []
        for k, name in enumerate(node.output):
            if not name or not schema.outputs:
                continue
            formal = schema.outputs[min(k, len(schema.outputs) - 1)]
            allowed = _allowed(schema, formal)
            info = infos.get(name)
            if info is not None and info.elem_type == TensorProto.FLOAT and (wanted not in allowed or node.op_type in _BIT_OPS):
                raw = fresh(f"{name}__float32")
                node.output[k] = raw
                after.append(helper.make_node("Cast", [raw], [name], to=to, name=fresh(f"{name}_cast")))
                done.append(("cast output to " + elem_name(to), node.name or node.op_type, name))
        nodes.append(node)
        nodes.extend(after)
    del graph.node[:]
    graph.node.extend(nodes)


def switch_dtype(
    model: onnx.ModelProto, dtype: Any = np.float64, base_dir: str | None = None, opsets: dict[str, int] | None = None
) -> tuple[onnx.ModelProto, list[tuple[str, str, str]]]:
    """A copy of ``model`` computing in ``dtype`` where it computed in float32: float32
    initializers (and Constant/ConstantOfShape values) converted, declared float types
    switched, Cast targets (and ``dtype`` attributes, explicit or float32 by default) of
    float32 moved to the new type, in
    subgraphs and model-local functions too; around main-graph operators whose schema
    does not accept the new type, Casts back to float32 and forward again. Returns the model
    and the list of changes made, as (what, where, detail)."""
    to = _target(dtype)
    new = onnx.ModelProto()
    new.CopyFrom(model)
    done: list[tuple[str, str, str]] = []
    _switch_graph(new.graph, to, base_dir, done)
    for f in new.functions:
        for node in f.node:
            _switch_node(node, to, base_dir, done)
    opsets = opsets or {o.domain if o.domain != "ai.onnx" else "": o.version for o in model.opset_import}
    _guard(new, model, to, opsets, done)
    return new, done


def precision_rows(oinf: Any, oinf64: Any, feeds: dict[str, Any]) -> list[dict[str, Any]]:
    """Run both engines on ``feeds`` (float32 feeds converted for the second) and compare
    every float output of every node, in run order: one dict per value with ``i``, ``name``,
    ``op_type``, ``output``, ``dtype`` (of the first run), ``max_abs`` and ``max_rel``."""
    wide = {}
    specs = oinf64._specs
    for name, value in feeds.items():
        spec = specs.get(name)
        if isinstance(value, np.ndarray) and value.dtype == np.float32 and spec is not None and spec.np_dtype is not None:
            value = value.astype(spec.np_dtype)
        wide[name] = value
    low = oinf.run(feeds, intermediate=True)
    high = oinf64.run(wide, intermediate=True)
    rows = []
    for i, node in enumerate(run_order(oinf.model.graph)):
        for out in node.output:
            a, b = low.get(out), high.get(out)
            if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.dtype.kind != "f":
                continue
            d = difference(out, a, b, rtol=0.0, atol=0.0)
            rows.append(
                {"i": i, "name": node.name, "op_type": node.op_type, "output": out, "dtype": a.dtype.name,
                 "max_abs": d.max_abs, "max_rel": d.max_rel}
            )
    return rows


def precision_table(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`precision_rows` as an aligned text table."""
    lines = [f"{'#':>4} {'node':<24} {'op_type':<18} {'output':<24} {'max abs':>12} {'max rel':>12}"]
    for r in rows:
        lines.append(
            f"{r['i']:>4} {r['name'][:24]:<24} {r['op_type'][:18]:<18} {r['output'][:24]:<24} "
            f"{r['max_abs']:>12.4g} {r['max_rel']:>12.4g}"
        )
    return "\n".join(lines)
