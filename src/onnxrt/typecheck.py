"""Element-type checks of node inputs against their schema's type constraints (no silent promotion), fused nodes included."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from onnx import defs

from .dtypes import value_type_string
from .errors import InvalidTypeError
from .ops_cpu._op import get_schema

_VARIADIC = defs.OpSchema.FormalParameterOption.Variadic

Rule = tuple[str, str | None, frozenset[str] | None, bool]  # input name, type param, allowed, homogeneous


@lru_cache(maxsize=None)
def _schema_rules(schema: defs.OpSchema) -> tuple[tuple[Rule, ...], Rule | None]:
    constraints = {c.type_param_str: frozenset(c.allowed_type_strs) for c in schema.type_constraints}
    rules: list[Rule] = []
    variadic: Rule | None = None
    for p in schema.inputs:
        if p.type_str in constraints:
            rule: Rule = (p.name, p.type_str, constraints[p.type_str], bool(p.is_homogeneous))
        else:  # a concrete type such as tensor(int64)
            rule = (p.name, None, frozenset([p.type_str]), True)
        rules.append(rule)
        if p.option == _VARIADIC:
            variadic = rule
    return tuple(rules), variadic


def _accepts(allowed: frozenset[str], type_str: str) -> bool:
    return type_str in allowed or f"optional({type_str})" in allowed


def _value_types(args: Any) -> list[str | None]:
    """The type string of each argument, None for what is not compared (omitted inputs,
    empty sequences, maps)."""
    out: list[str | None] = []
    for value in args:
        if value is None:
            out.append(None)
            continue
        t = value_type_string(value)
        out.append(None if "?" in t or t.startswith(("map", "optional(none")) else t)
    return out


def _check_schema(label: str, op_type: str, version: Any, schema: defs.OpSchema, types: list[str | None]) -> None:
    rules, variadic = _schema_rules(schema)
    bound: dict[str, tuple[str, str]] = {}
    for i, type_str in enumerate(types):
        if type_str is None:
            continue
        if i < len(rules):
            name, param, allowed, homogeneous = rules[i]
        elif variadic is not None:
            name, param, allowed, homogeneous = variadic
            name = f"{name}[{i - len(rules) + 1}]"
        else:
            return
        if allowed is not None and not _accepts(allowed, type_str):
            shown = sorted(a for a in allowed if not a.startswith(("seq", "optional")))[:12] or sorted(allowed)[:12]
            raise InvalidTypeError(
                f"{label}: input {name!r} has type {type_str}, which {op_type}-"
                f"{version} does not accept ({param or 'type'} is one of {', '.join(shown)})."
            )
        if param is not None and homogeneous:
            seen = bound.get(param)
            if seen is None:
                bound[param] = (name, type_str)
            elif seen[1] != type_str:
                raise InvalidTypeError(
                    f"{label}: input {name!r} has type {type_str} but input {seen[0]!r} has "
                    f"{seen[1]}; both are {param} and must have the same type."
                )


def accepts_types(op_type: str, version: int, types: list[str | None], domain: str = "") -> bool:
    """Whether inputs of these type strings (None: not compared) satisfy the schema of
    ``op_type``-``version``: the graph passes fold a node into another only when the folded
    node would not have raised InvalidTypeError."""
    schema = get_schema(op_type, version, domain)
    if schema is None:
        return True
    try:
        _check_schema("", op_type, version, schema, types)
    except InvalidTypeError:
        return False
    return True


def check_input_types(op: Any, args: Any) -> None:
    """Raise InvalidTypeError when an input's type breaks the schema of ``op`` (an OpRun), or,
    for onnxrt's fused nodes, the rules of the nodes they replace."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        fused = _FUSED.get(op.onnx_node.op_type) if op.onnx_node.domain == FUSED_DOMAIN else None
        if fused is not None:
            fused(op, _value_types(args))
        return
    _check_schema(op.node_label(), op.onnx_node.op_type, op.since_version, schema, _value_types(args))


# --- fused nodes (domain onnxrt, written by onnxrt.optim): the rules of the nodes they replace.
# Each function takes the fused kernel and its inputs' type strings; a fused node's output has
# the type of its first input (Conv, Gemm, MatMul, BatchNormalization, Add and Sum all output
# their T), which is what the replaced activation, Add or Concat read.

FUSED_DOMAIN = "onnxrt"


def _check_op(op: Any, types: list[str | None]) -> None:
    schema = getattr(op, "_schema", None)
    if schema is not None:
        _check_schema(op.node_label(), op.onnx_node.op_type, op.since_version, schema, types)
    else:
        fused = _FUSED.get(op.onnx_node.op_type)
        if fused is not None:
            fused(op, types)


def _check_activation(op: Any, act: str, out_type: str | None) -> None:
    """The activation the fused node applies, on the type of the base operator's output
    (at the model's ai.onnx opset, as the replaced activation node was)."""
    if not act or out_type is None:
        return
    opset = (op.options.get("opsets") or {}).get("")
    schema = get_schema(act, opset, "")
    if schema is not None:
        _check_schema(op.node_label() + f" (fused {act})", act, schema.since_version, schema, [out_type])


def _same(op: Any, what: str, type_str: str | None, ref: str | None, ref_name: str) -> None:
    if type_str is not None and ref is not None and type_str != ref:
        raise InvalidTypeError(
            f"{op.node_label()}: {what} has type {type_str} but {ref_name} has {ref}; "
            f"the nodes it replaces need the same type (no silent promotion)."
        )


def _fused_base(op: Any, types: list[str | None]) -> None:
    """FusedGemm, FusedMatMul, FusedBatchNormalization, FusedAdd, FusedSum and FusedConv: the
    base operator's schema, a residual Z (FusedConv's fourth input, the replaced Add or Sum)
    of the convolution's type, then the activation."""
    inner = op._inner
    n = 3 if op.onnx_node.op_type == "FusedConv" else len(types)
    _check_schema(op.node_label(), inner.onnx_node.op_type, inner.since_version, inner._schema, types[:n])
    out = types[0] if types else None
    if n < len(types):
        _same(op, "the residual (input 3, the fused Add's other operand)", types[3], out, "the convolution's output")
    _check_activation(op, op._act, out)


def _dense_chain(op: Any, types: list[str | None]) -> None:
    """X, B1, C1, B2, C2...: Gemm after Gemm (each reading the previous output, of X's type),
    some followed by Relu."""
    cur = types[0] if types else None
    for i, layer in enumerate(op._layers):
        b = types[1 + 2 * i] if 1 + 2 * i < len(types) else None
        c = types[2 + 2 * i] if 2 + 2 * i < len(types) else None
        _check_op(layer, [cur, b, c])


def _conv_concat(op: Any, types: list[str | None]) -> None:
    """Four inputs per segment (a convolution's x, w, b, z; or a tensor and three omitted),
    then Concat's rule: every segment of one type."""
    first: tuple[int, str] | None = None
    for i, spec in enumerate(op._convs):
        seg = types[4 * i : 4 * i + 4]
        if spec is not None:
            _check_op(spec, seg)  # (the segment's Conv or FusedConv kernel)
        t = seg[0] if seg else None
        if t is None:
            continue
        if first is None:
            first = (i, t)
        else:
            _same(op, f"segment {i} of the fused Concat", t, first[1], f"segment {first[0]}")


def _elementwise_chain(op: Any, types: list[str | None]) -> None:
    """x0, x1, ...: each node of the chain checked against its schema, its output of its
    first input's type (every operator FusedElementwise takes keeps its input's type)."""
    env: dict[str, str | None] = {f"x{i}": t for i, t in enumerate(types)}
    for proto, kernel in zip(op.nodes, op.kernels):
        args = [env.get(n) if n else None for n in proto.input]
        _check_op(kernel, args)
        env[proto.output[0]] = args[0] if args else None


_FUSED = {
    "FusedElementwise": _elementwise_chain,
    "FusedConv": _fused_base,
    "FusedGemm": _fused_base,
    "FusedMatMul": _fused_base,
    "FusedBatchNormalization": _fused_base,
    "FusedAdd": _fused_base,
    "FusedSum": _fused_base,
    "DenseChain": _dense_chain,
    "ConvConcat": _conv_concat,
}
