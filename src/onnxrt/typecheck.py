"""Element-type checks of node inputs against their schema's type constraints (no silent promotion).

The engine runs them once per plan, on its first run: feeds are validated against the
declared input types, so the types flowing through a graph do not change between runs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from onnx import defs

from .dtypes import value_type_string
from .errors import InvalidTypeError

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


def check_input_types(op: Any, args: list[Any]) -> None:
    """Raise InvalidTypeError when an input's type breaks the schema of ``op`` (an OpRun)."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return
    rules, variadic = _schema_rules(schema)
    bound: dict[str, tuple[str, str]] = {}
    for i, value in enumerate(args):
        if value is None:
            continue
        if i < len(rules):
            name, param, allowed, homogeneous = rules[i]
        elif variadic is not None:
            name, param, allowed, homogeneous = variadic
            name = f"{name}[{i - len(rules) + 1}]"
        else:
            return
        type_str = value_type_string(value)
        if "?" in type_str or type_str.startswith(("map", "optional(none")):
            continue  # an empty sequence or a map: nothing to compare
        if allowed is not None and not _accepts(allowed, type_str):
            shown = sorted(a for a in allowed if not a.startswith(("seq", "optional")))[:12] or sorted(allowed)[:12]
            raise InvalidTypeError(
                f"{op._node_label()}: input {name!r} has type {type_str}, which {op.onnx_node.op_type}-"
                f"{op.since_version} does not accept ({param or 'type'} is one of {', '.join(shown)})."
            )
        if param is not None and homogeneous:
            seen = bound.get(param)
            if seen is None:
                bound[param] = (name, type_str)
            elif seen[1] != type_str:
                raise InvalidTypeError(
                    f"{op._node_label()}: input {name!r} has type {type_str} but input {seen[0]!r} has "
                    f"{seen[1]}; both are {param} and must have the same type."
                )
