"""If (1 to 25): runs one of two subgraphs, planned once, on the outer values it reads."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun


def condition(cond: Any, name: str = "cond") -> bool:
    """The truth value of a one-element boolean (or numeric) tensor."""
    arr = np.asarray(cond)
    if arr.size != 1:
        raise KernelError(f"{name} must hold exactly one element, got shape {list(arr.shape)}.")
    return bool(arr.reshape(-1)[0])


def subgraph_plan(op: OpRun, name: str) -> Any:
    """The nested plan of GRAPH attribute ``name``.

    Inside a model the engine has already compiled it (``compile_graph``); a kernel built
    alone (``If(node).run(...)``) compiles it here, once, and its outer-scope names are
    then given at run time through ``context``.
    """
    value = getattr(op, name)
    if isinstance(value, onnx.GraphProto):
        from ..model import graph_free_names
        from ..plan import Plan

        opsets = op.options.get("opsets") or {"": op.since_version or onnx.defs.onnx_opset_version()}
        value = Plan(value, opsets, outer_names=graph_free_names(value))
        setattr(op, name, value)
        op._atts[name] = value
        op._implicit.extend(n for n in value.outer_inputs if n not in op._implicit)
    if not hasattr(value, "run_list"):
        raise InvalidAttributeError(f"{op.node_label()}: attribute {name!r} is not a graph.")
    return value


@register("If", versions=(1, 11, 13, 16, 19, 21, 23, 24, 25))
class If(OpRun):
    """If: 1, 11 (branches may have different output shapes), 13 (sequences), 16 (optionals),
    later versions widen the element types. Both branches are planned once, when the model
    is loaded; at run time the chosen branch reads outer-scope values by reference.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        n_out = len(onnx_node.output)
        runs = []
        for name in ("then_branch", "else_branch"):
            branch = subgraph_plan(self, name)
            if len(branch.output_names) != n_out:
                raise InvalidAttributeError(
                    f"{self.node_label()}: {name!r} has {len(branch.output_names)} outputs, "
                    f"expected {n_out} (one per output of the node)."
                )
            runs.append(branch.run_list)
        self._then_run, self._else_run = runs

    def _run(self, cond, context=None, attributes=None, verbose=0, fLOG=None):
        run = self._then_run if condition(cond) else self._else_run
        return tuple(run((), context))
