"""Static shapes, element types and memory sizes of a model's values, without running it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TypeProto, helper

from ..dtypes import ONNX_TO_NP, elem_from_name, type_shape, type_string
from ..errors import InvalidFeedError
from ..model import node_free_names, sort_nodes

#: where a value's type and shape come from
ORIGINS = ("input", "initializer", "declared", "onnx", "function", "rule", "schema", "unknown")


@dataclass(frozen=True)
class ValueInfo:
    """The static type and shape of one value.

    ``shape`` is a tuple whose dims are ints (static), strings (symbolic, as the model names
    them or onnx's shape inference made them up) or None (unknown); ``shape`` itself is None
    when even the rank is unknown. ``elem_type`` is the ONNX element type code (0: unknown),
    ``type`` the onnxruntime-style type string (``tensor(float)``, ``seq(tensor(int64))``,
    ``unknown``) and ``origin`` where the information comes from (see :data:`ORIGINS`).
    """

    name: str
    type: str
    elem_type: int
    shape: tuple[int | str | None, ...] | None
    origin: str

    @property
    def dtype(self) -> np.dtype | None:
        """numpy dtype of a tensor's elements, None when unknown or not a tensor."""
        if not self.type.startswith("tensor("):
            return None
        return ONNX_TO_NP.get(self.elem_type)

    @property
    def known(self) -> bool:
        """Whether the type is known (the shape may still be partly unknown)."""
        return self.type != "unknown" and "elem0" not in self.type

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form: name, type, dtype (numpy name or None), shape (list or None), origin."""
        dt = self.dtype
        return {
            "name": self.name,
            "type": self.type,
            "dtype": None if dt is None else ("str" if dt.kind == "O" else dt.name),
            "shape": None if self.shape is None else list(self.shape),
            "origin": self.origin,
        }


def _info(name: str, tp: TypeProto | None, origin: str) -> ValueInfo:
    if tp is None or tp.WhichOneof("value") is None:
        return ValueInfo(name, "unknown", 0, None, "unknown")
    which = tp.WhichOneof("value")
    elem = tp.tensor_type.elem_type if which == "tensor_type" else 0
    shape = type_shape(tp)
    return ValueInfo(name, type_string(tp), int(elem), None if shape is None else tuple(shape), origin)


def _score(v: ValueInfo | None) -> int:
    """How much a ValueInfo tells: type known, rank known, dims known."""
    if v is None or not v.known:
        return 0
    if v.shape is None:
        return 1
    return 2 + sum(1 for d in v.shape if d is not None) + sum(1 for d in v.shape if isinstance(d, int))


def _better(old: ValueInfo | None, new: ValueInfo) -> bool:
    return _score(new) > _score(old)


def run_order(graph: onnx.GraphProto, outer: set[str] | frozenset[str] = frozenset()) -> list[onnx.NodeProto]:
    """The graph's nodes in the order onnxrt runs them (a topological order that keeps
    the stored order where it is valid), functions not inlined."""
    available = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    available |= {i.values.name for i in graph.sparse_initializer}
    nodes = list(graph.node)
    return [nodes[i] for i in sort_nodes(nodes, available | set(outer), graph.name)]


def onnx_inferred(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model after onnx's shape inference (types, data propagation), or the model
    itself when onnx's inference fails on it."""
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001  (onnx's inference is a help; onnxrt's rules follow)
        return model


# --- onnxrt's own rules, where onnx's shape inference leaves a value unknown -------------------

#: ai.onnx.ml operators whose output has the shape of their first input
_ML_SAME_SHAPE = {"Scaler", "Normalizer", "Binarizer", "Imputer", "LabelEncoder"}


def _attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for att in node.attribute:
        if att.name == name:
            return helper.get_attribute_value(att)
    return default


def _rule_shape(node: onnx.NodeProto, index: int, ins: list[ValueInfo | None]) -> tuple[int | str | None, ...] | None:
    """Output shapes onnx does not infer, for the ai.onnx.ml operators onnxrt knows."""
    if node.domain != "ai.onnx.ml":
        return None
    first = ins[0] if ins else None
    rows: int | str | None = None
    if first is not None and first.shape:
        rows = first.shape[0] if len(first.shape) == 2 else (1 if len(first.shape) == 1 else None)
    if node.op_type in _ML_SAME_SHAPE and first is not None:
        return first.shape
    if node.op_type == "LinearRegressor":
        return (rows, int(_attr(node, "targets", 1)))
    if node.op_type in ("TreeEnsembleRegressor", "TreeEnsemble"):
        return (rows, int(_attr(node, "n_targets", 1)))
    if node.op_type == "SVMRegressor":
        return (rows, 1)
    if node.op_type in ("TreeEnsembleClassifier", "LinearClassifier", "SVMClassifier"):
        if index == 0:  # the labels
            return (rows,)
        labels = (
            _attr(node, "classlabels_int64s") or _attr(node, "classlabels_ints") or _attr(node, "classlabels_strings") or []
        )
        # a tree ensemble scores every class; linear and SVM models of two classes may give one score
        tree = node.op_type == "TreeEnsembleClassifier"
        return (rows, len(labels) if labels and (tree or len(labels) > 2) else None)
    return None


def _parse_type(text: str) -> TypeProto | None:
    """A TypeProto from a schema type string: ``tensor(float)``, ``seq(tensor(int64))``."""
    if text.startswith("tensor(") and text.endswith(")"):
        try:
            return helper.make_tensor_type_proto(elem_from_name(text[7:-1]), None)
        except KeyError:
            return None
    if text.startswith("seq(") and text.endswith(")"):
        inner = _parse_type(text[4:-1])
        return None if inner is None else helper.make_sequence_type_proto(inner)
    return None


def _schema_output_type(schema: Any, index: int, node: onnx.NodeProto, types: dict[str, TypeProto]) -> TypeProto | None:
    """An output's type from the schema's type constraints: a fixed type, a constraint
    allowing a single type, or the type of an input bound to the same type parameter."""
    outs = schema.outputs
    if not outs:
        return None
    formal = outs[min(index, len(outs) - 1)]
    text = formal.type_str
    fixed = _parse_type(text)
    if fixed is not None:
        return fixed
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    if len(allowed.get(text, [])) == 1:
        return _parse_type(allowed[text][0])
    for k, formal_in in enumerate(schema.inputs):
        if formal_in.type_str != text:
            continue
        variadic = formal_in.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
        names = node.input[k:] if variadic else node.input[k : k + 1]
        for n in names:
            if n and n in types:
                return types[n]
    return None


def _node_types(
    node: onnx.NodeProto,
    types: dict[str, TypeProto],
    opsets: dict[str, int],
    functions: dict[tuple[str, str], onnx.FunctionProto],
) -> tuple[dict[str, TypeProto], str]:
    """Output types of one node from its input types: a model-local function's body,
    onnx's inference function for the node, in this order; (types, origin)."""
    from ..ops_cpu._op import get_schema

    ins = [types.get(n) for n in node.input if n]
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    fn = functions.get((node.domain, node.op_type)) or functions.get((domain, node.op_type))
    if fn is not None:
        if any(t is None for t in ins):
            return {}, "unknown"
        try:
            outs = onnx.shape_inference.infer_function_output_types(fn, ins, list(node.attribute))
        except Exception:  # noqa: BLE001  (a body onnx cannot type: left to the caller)
            return {}, "unknown"
        return {n: t for n, t in zip(node.output, outs) if n}, "function"
    schema = get_schema(node.op_type, opsets.get(domain), domain)
    if schema is None:
        return {}, "unknown"
    found: dict[str, TypeProto] = {}
    if all(t is not None for t in ins):
        try:
            found = dict(
                onnx.shape_inference.infer_node_outputs(
                    schema, node, {n: types[n] for n in node.input if n},
                    opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                )
            )
        except Exception:  # noqa: BLE001  (onnx's inference function refused the node)
            found = {}
    return {k: v for k, v in found.items() if v.WhichOneof("value") is not None}, "onnx"


def infer_shapes(model: onnx.ModelProto, opsets: dict[str, int] | None = None) -> dict[str, ValueInfo]:
    """Static type and shape of every value of the main graph: inputs, initializers, then
    node outputs in run order. Declared types first, then onnx's shape inference (with
    data propagation), then, node by node, onnxrt's own rules where onnx stops: model-local
    functions typed from their bodies, shapes of ai.onnx.ml operators onnx leaves unknown,
    types from the schema's type constraints; what nothing tells is marked
    ``origin="unknown"``."""
    graph = model.graph
    opsets = opsets or {o.domain if o.domain != "ai.onnx" else "": o.version for o in model.opset_import}
    functions = {(f.domain, f.name): f for f in model.functions}
    out: dict[str, ValueInfo] = {}
    protos: dict[str, TypeProto] = {}

    def put(name: str, tp: TypeProto | None, origin: str) -> None:
        if not name or tp is None or tp.WhichOneof("value") is None:
            return
        info = _info(name, tp, origin)
        if _better(out.get(name), info):
            out[name] = info
            protos[name] = tp

    for vi in graph.input:
        put(vi.name, vi.type if vi.HasField("type") else None, "input")
    for init in graph.initializer:
        put(init.name, helper.make_tensor_type_proto(init.data_type, list(init.dims)), "initializer")
    for sp in graph.sparse_initializer:
        put(sp.values.name, helper.make_tensor_type_proto(sp.values.data_type, list(sp.dims)), "initializer")
    for vi in list(graph.value_info) + list(graph.output):
        put(vi.name, vi.type if vi.HasField("type") else None, "declared")
    inferred = onnx_inferred(model)
    if inferred is not model:
        for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
            put(vi.name, vi.type, "onnx")

    for node in run_order(graph):
        if all(_score(out.get(o)) >= 2 and None not in (out[o].shape or ()) for o in node.output if o):
            continue
        found, origin = _node_types(node, protos, opsets, functions)
        for name, tp in found.items():
            put(name, tp, origin)
        ins = [out.get(n) for n in node.input]
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        schema = None
        for k, name in enumerate(node.output):
            if not name:
                continue
            cur = out.get(name)
            if cur is None or not cur.known:
                if schema is None:
                    from ..ops_cpu._op import get_schema

                    schema = get_schema(node.op_type, opsets.get(domain), domain)
                if schema is not None:
                    tp = _schema_output_type(schema, k, node, protos)
                    put(name, tp, "schema")
                    cur = out.get(name)
            if cur is not None and cur.known and cur.shape is None and cur.type.startswith("tensor("):
                shape = _rule_shape(node, k, ins)
                if shape is not None:
                    tp = helper.make_tensor_type_proto(cur.elem_type, list(shape))
                    out[name] = ValueInfo(name, cur.type, cur.elem_type, tuple(shape), "rule")
                    protos[name] = tp
            if name not in out:
                out[name] = ValueInfo(name, "unknown", 0, None, "unknown")
    for vi in graph.output:
        out.setdefault(vi.name, ValueInfo(vi.name, "unknown", 0, None, "unknown"))
    # inputs, initializers, node outputs in run order, then the rest (outputs that pass an input through)
    names = [vi.name for vi in graph.input] + [i.name for i in graph.initializer]
    names += [i.values.name for i in graph.sparse_initializer]
    names += [o for node in run_order(graph) for o in node.output if o]
    ordered = {n: out[n] for n in names if n in out}
    ordered.update((n, v) for n, v in out.items() if n not in ordered)
    return ordered


def infer_types(model: onnx.ModelProto, opsets: dict[str, int] | None = None) -> dict[str, Any]:
    """name -> numpy dtype for tensors, the type string for other values (``seq(tensor(float))``),
    None where the type is unknown."""
    res: dict[str, Any] = {}
    for name, info in infer_shapes(model, opsets).items():
        if not info.known:
            res[name] = None
        elif info.type.startswith("tensor("):
            res[name] = info.dtype
        else:
            res[name] = info.type
    return res


# --- memory --------------------------------------------------------------------------------


def _feed_shape(name: str, value: Any) -> tuple[tuple[int, ...], np.dtype | None]:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return tuple(int(d) for d in value.shape), np.dtype(value.dtype)
    if isinstance(value, tuple | list) and all(isinstance(d, int | np.integer) and d >= 0 for d in value):
        return tuple(int(d) for d in value), None
    raise InvalidFeedError(
        f"infer_sizes takes, for input {name!r}, an array or a shape (a tuple of non-negative ints), got {value!r}."
    )


def _nbytes(info: ValueInfo | None) -> int | None:
    if info is None or info.shape is None or not info.type.startswith("tensor("):
        return None
    if not all(isinstance(d, int) for d in info.shape):
        return None
    dt = info.dtype
    if dt is None:
        return None
    # strings: the object array's pointers, the text itself is not counted
    return int(math.prod(info.shape)) * (8 if dt.kind == "O" else dt.itemsize)


def infer_sizes(model: onnx.ModelProto, feeds: dict[str, Any], opsets: dict[str, int] | None = None) -> dict[str, Any]:
    """Memory estimate of a run for given input shapes (``feeds``: name -> array or shape).

    The inputs' declared shapes are replaced by the given ones and :func:`infer_shapes`
    runs on that model; each node's temporary memory is the bytes of its outputs (what an
    If, Loop or Scan body allocates inside is not counted), and the
    run's peak follows the nodes in run order, each value freed after its last reader
    (graph outputs are kept to the end). Inputs and initializers are counted apart.
    Returns ``{"nodes": [{"i", "name", "op_type", "outputs": {name: bytes or None},
    "temp": bytes, "live": bytes after the node}], "inputs": bytes, "initializers":
    bytes, "peak": bytes, "peak_node": name, "unknown": [values whose size is unknown]}``.
    """
    graph = model.graph
    inits = {i.name for i in graph.initializer} | {i.values.name for i in graph.sparse_initializer}
    declared = {vi.name: vi for vi in graph.input}
    for name in feeds:
        if name not in declared:
            raise InvalidFeedError(f"infer_sizes: {name!r} is not an input of the model; its inputs are {list(declared)!r}.")
    missing = [n for n in declared if n not in inits and n not in feeds]
    if missing:
        raise InvalidFeedError(f"infer_sizes needs a shape for every input; missing {missing!r}.")
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    inputs_bytes = 0
    for vi in fixed.graph.input:
        if vi.name not in feeds:
            continue
        shape, dtype = _feed_shape(vi.name, feeds[vi.name])
        want = type_shape(vi.type)
        if want is not None and (
            len(want) != len(shape) or any(isinstance(w, int) and w != d for w, d in zip(want, shape))
        ):
            raise InvalidFeedError(
                f"infer_sizes: input {vi.name!r} is declared with shape {want}, got shape {list(shape)}."
            )
        elem = vi.type.tensor_type.elem_type if vi.type.WhichOneof("value") == "tensor_type" else 0
        if vi.type.WhichOneof("value") not in (None, "tensor_type"):
            raise InvalidFeedError(f"infer_sizes estimates tensor inputs only; input {vi.name!r} has type {type_string(vi.type)}.")
        if not elem and dtype is not None:
            from ..dtypes import onnx_type

            elem = onnx_type(dtype)
        vi.type.CopyFrom(helper.make_tensor_type_proto(elem, list(shape)))
        size = _nbytes(_info(vi.name, vi.type, "input"))
        inputs_bytes += size or 0
    # declared shapes with symbolic or unknown dims may hold the ones just replaced: dropped
    # (onnx infers them again from the given shapes); fully static ones stay
    def symbolic(vi: onnx.ValueInfoProto) -> bool:
        shape = type_shape(vi.type) if vi.HasField("type") else None
        return shape is not None and not all(isinstance(d, int) for d in shape)

    kept = [vi for vi in fixed.graph.value_info if not symbolic(vi)]
    del fixed.graph.value_info[:]
    fixed.graph.value_info.extend(kept)
    for vi in fixed.graph.output:
        if symbolic(vi):
            vi.type.tensor_type.ClearField("shape")
    infos = infer_shapes(fixed, opsets)
    init_bytes = sum(_nbytes(infos.get(n)) or 0 for n in inits)
    order = run_order(fixed.graph)
    last: dict[str, int] = {}
    for i, node in enumerate(order):
        for n in list(node.input) + sorted(node_free_names(node)):
            if n:
                last[n] = i
    keep = {o.name for o in graph.output} | inits | set(declared)
    live = 0
    peak, peak_node = 0, ""
    nodes = []
    unknown: list[str] = []
    sizes: dict[str, int] = {}
    for i, node in enumerate(order):
        outs: dict[str, int | None] = {}
        for o in node.output:
            if not o:
                continue
            b = _nbytes(infos.get(o))
            outs[o] = b
            if b is None:
                unknown.append(o)
            else:
                sizes[o] = b
        temp = sum(b for b in outs.values() if b is not None)
        live += temp
        if live > peak:
            peak, peak_node = live, node.name
        for o in outs:  # outputs nobody reads go at once
            if o not in last and o not in keep:
                live -= sizes.get(o, 0)
        for n in list(node.input) + sorted(node_free_names(node)):
            if n and last.get(n) == i and n not in keep:
                live -= sizes.pop(n, 0)
        nodes.append({"i": i, "name": node.name, "op_type": node.op_type, "outputs": outs, "temp": temp, "live": live})
    return {
        "nodes": nodes,
        "inputs": inputs_bytes,
        "initializers": init_bytes,
        "peak": peak,
        "peak_node": peak_node,
        "unknown": unknown,
    }
