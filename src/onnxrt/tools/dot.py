"""A model as a Graphviz DOT drawing (to_dot), rendered to SVG through the graphviz package (to_svg)."""

from __future__ import annotations

import onnx
import re
from typing import Any

from onnx import AttributeProto

from ..errors import GraphError, MissingDependencyError
from .shapes import ValueInfo, _info, infer_shapes, onnx_inferred, run_order
from .text import _att_text, attribute_data

#: fill colours: graph inputs, initializers, operators, graph outputs
COLORS = {"input": "#cfe2ff", "initializer": "#e9ecef", "node": "#ffe5b4", "output": "#d1f2d1"}
#: attributes shown in an operator's box, at most
MAX_ATTRIBUTES = 4


def _q(text: str) -> str:
    """A DOT double-quoted string; newlines become DOT's centred line breaks."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _describe(info: ValueInfo | None) -> str:
    """``float32 [N, 8]``, ``seq(tensor(float))``, or '' when nothing is known."""
    if info is None or not info.known:
        return ""
    if info.type.startswith("tensor("):
        dt = info.dtype
        name = ("str" if dt.kind == "O" else dt.name) if dt is not None else info.type
        if info.shape is None:
            return name
        return f"{name} [{', '.join('?' if d is None else str(d) for d in info.shape)}]"
    return info.type


def _local_infos(graph: onnx.GraphProto) -> dict[str, ValueInfo]:
    """Types of a subgraph's values: declared, and those onnx's inference wrote into it."""
    infos: dict[str, ValueInfo] = {}
    for init in graph.initializer:
        infos[init.name] = _info(init.name, onnx.helper.make_tensor_type_proto(init.data_type, list(init.dims)), "initializer")
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        if vi.HasField("type") and vi.type.WhichOneof("value") is not None:
            infos.setdefault(vi.name, _info(vi.name, vi.type, "declared"))
    return infos


class _Dot:
    def __init__(self, show_shapes: bool, recursive: bool = True):
        self.lines: list[str] = []
        self.show_shapes = show_shapes
        self.recursive = recursive
        self.clusters = 0

    def edge(self, src: str, dst: str, name: str, info: ValueInfo | None, indent: str, style: str = "") -> None:
        label = name
        desc = _describe(info) if self.show_shapes else ""
        if desc:
            label += "\n" + desc
        extra = f", style={style}" if style else ""
        self.lines.append(f"{indent}{_q(src)} -> {_q(dst)} [label={_q(label)}{extra}];")

    def value_box(self, ident: str, kind: str, name: str, info: ValueInfo | None, indent: str, shape: str = "box") -> None:
        label = name
        desc = _describe(info)
        if desc:
            label += "\n" + desc
        self.lines.append(
            f'{indent}{_q(ident)} [shape={shape}, style=filled, fillcolor="{COLORS[kind]}", label={_q(label)}];'
        )

    def graph(
        self,
        graph: onnx.GraphProto,
        infos: dict[str, ValueInfo],
        prefix: str,
        outer: dict[str, str],
        indent: str,
    ) -> dict[str, str]:
        """Emit one graph's boxes and edges; returns its outputs' box ids."""
        scope: dict[str, str] = {}
        for k, vi in enumerate(graph.input):
            ident = f"{prefix}input{k}"
            self.value_box(ident, "input", vi.name, infos.get(vi.name), indent)
            scope[vi.name] = ident
        for k, init in enumerate(list(graph.initializer) + [s.values for s in graph.sparse_initializer]):
            if init.name in scope:  # an input's default value: drawn as the input
                continue
            ident = f"{prefix}init{k}"
            self.value_box(ident, "initializer", init.name, infos.get(init.name), indent, shape="note")
            scope[init.name] = ident
        for i, node in enumerate(run_order(graph, set(outer))):
            ident = f"{prefix}node{i}"
            op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            label = op + (f"\n{node.name}" if node.name else "")
            atts = [a for a in node.attribute if a.type not in (AttributeProto.GRAPH, AttributeProto.GRAPHS)]
            for att in atts[:MAX_ATTRIBUTES]:
                text = _att_text(attribute_data(att, set()))
                label += f"\n{att.name}={text if len(text) <= 30 else text[:27] + '...'}"
            if len(atts) > MAX_ATTRIBUTES:
                label += f"\n(+{len(atts) - MAX_ATTRIBUTES} attributes)"
            self.lines.append(
                f'{indent}{_q(ident)} [shape=box, style="rounded,filled", fillcolor="{COLORS["node"]}", label={_q(label)}];'
            )
            for name in node.input:
                if not name:
                    continue
                src = scope.get(name)
                if src is not None:
                    self.edge(src, ident, name, infos.get(name), indent)
                elif name in outer:  # a value of an enclosing graph
                    self.edge(outer[name], ident, name, infos.get(name), indent, style="dashed")
            visible = {**outer, **scope}
            for att in node.attribute if self.recursive else ():
                subs = [att.g] if att.type == AttributeProto.GRAPH else list(att.graphs) if att.type == AttributeProto.GRAPHS else []
                for k, sub in enumerate(subs):
                    self.clusters += 1
                    cluster = f"cluster_{self.clusters}"
                    self.lines.append(f"{indent}subgraph {_q(cluster)} {{")
                    inner = indent + "  "
                    title = f"{op} {node.name!r}: {att.name}" + (f"[{k}]" if att.type == AttributeProto.GRAPHS else "")
                    self.lines.append(f"{inner}label={_q(title)}; style=dashed; color=\"#888888\";")
                    sub_infos = _local_infos(sub)
                    for n, v in infos.items():  # outer values keep their types inside
                        sub_infos.setdefault(n, v)
                    sub_prefix = f"{ident}_{att.name}{k if att.type == AttributeProto.GRAPHS else ''}_"
                    sub_outs = self.graph(sub, sub_infos, sub_prefix, visible, inner)
                    self.lines.append(f"{indent}}}")
                    for out_id in sub_outs.values():  # a body's results flow back into its node
                        self.lines.append(f"{indent}{_q(out_id)} -> {_q(ident)} [style=dotted, arrowhead=empty];")
            for name in node.output:
                if name:
                    scope[name] = ident
        outs: dict[str, str] = {}
        for k, vi in enumerate(graph.output):
            ident = f"{prefix}output{k}"
            info = infos.get(vi.name)
            if info is None or not info.known:
                tp = vi.type if vi.HasField("type") else None
                info = _info(vi.name, tp, "declared") if tp is not None and tp.WhichOneof("value") else info
            self.value_box(ident, "output", vi.name, info, indent)
            src = scope.get(vi.name) or outer.get(vi.name)
            if src is not None:
                self.edge(src, ident, vi.name, info, indent, style="" if vi.name in scope else "dashed")
            outs[vi.name] = ident
        return outs


def to_dot(
    model: onnx.ModelProto,
    infos: dict[str, ValueInfo] | None = None,
    rankdir: str = "TB",
    show_shapes: bool = True,
    recursive: bool = True,
    add_functions: bool = True,
    **params: Any,
) -> str:
    """The DOT text of the model: graph inputs (blue), initializers (grey notes), operators
    in run order (orange, with up to four attributes), graph outputs (green); edges carry the
    value's name and, when known, its element type and shape (``infos``, by default
    :func:`onnxrt.tools.shapes.infer_shapes`). If, Loop and Scan bodies (any graph
    attribute) are clusters inside their node's graph: values read from an enclosing
    graph come in as dashed edges, the body's outputs go back to the node as dotted ones.
    Model-local functions are drawn as clusters of their own, beside the graph.

    As in mlprodict, ``recursive=False`` leaves the bodies out, ``add_functions=False``
    the functions, and ``params`` are Graphviz graph attributes (``size="7"``,
    ``ranksep="0.25"``, ``orientation="portrait"``...)."""
    if rankdir not in ("TB", "LR", "BT", "RL"):
        raise GraphError(f"rankdir must be one of TB, LR, BT, RL, got {rankdir!r}.")
    for key in params:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise GraphError(f"{key!r} is not a Graphviz attribute name.")
    if infos is None:
        infos = infer_shapes(model)
    inferred = onnx_inferred(model)  # its subgraphs hold the types onnx inferred inside bodies
    graph = inferred.graph if len(inferred.graph.node) == len(model.graph.node) else model.graph
    dot = _Dot(show_shapes, recursive)
    dot.lines.append(f"digraph {_q(model.graph.name or 'model')} {{")
    extra = "".join(f", {k}={_q(str(v))}" for k, v in params.items() if v is not None)
    dot.lines.append(f"  graph [rankdir={rankdir}, fontsize=10, fontname=\"Helvetica\"{extra}];")
    dot.lines.append('  node [fontsize=10, fontname="Helvetica"];')
    dot.lines.append('  edge [fontsize=8, fontname="Helvetica"];')
    dot.graph(graph, dict(infos), "", {}, "  ")
    for k, fn in enumerate(model.functions if add_functions else ()):  # one cluster each, beside the graph
        body = onnx.helper.make_graph(
            list(fn.node), fn.name, [onnx.helper.make_empty_tensor_value_info(n) for n in fn.input],
            [onnx.helper.make_empty_tensor_value_info(n) for n in fn.output],
        )
        dot.lines.append(f"  subgraph {_q(f'cluster_function{k}')} {{")
        dot.lines.append(f'    label={_q(f"function {fn.domain}.{fn.name}")}; style=dashed; color="#4a7bd0";')
        dot.graph(body, {}, f"function{k}_", {}, "    ")
        dot.lines.append("  }")
    dot.lines.append("}")
    return "\n".join(dot.lines) + "\n"


def to_svg(dot: str) -> str:
    """Render DOT text as an SVG document with the graphviz Python package and Graphviz's
    ``dot`` program; raises :class:`onnxrt.errors.MissingDependencyError` naming whichever
    is missing."""
    try:
        import graphviz
    except ImportError:
        raise MissingDependencyError(
            "Drawing to SVG needs the graphviz Python package, which is not installed: "
            "pip install 'onnxrt[graph]' (Graphviz's dot program is needed too, e.g. apt-get install graphviz). "
            "to_dot() and 'onnxrt draw -o graph.dot' give the DOT text without either."
        ) from None
    try:
        return graphviz.Source(dot).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise MissingDependencyError(
            "Drawing to SVG needs Graphviz's 'dot' program, which is not on PATH: install Graphviz "
            "(apt-get install graphviz, brew install graphviz, or https://graphviz.org/download/). "
            "to_dot() and 'onnxrt draw -o graph.dot' give the DOT text without it."
        ) from None
    except graphviz.CalledProcessError as e:
        raise GraphError(f"Graphviz's dot program failed on the drawing: {e.stderr or e}") from e

