"""Fuse connected element-wise float32 nodes with one output into one FusedElementwise node (a program, not a pattern)."""

from __future__ import annotations

import numpy as np
from onnx import AttributeProto, NodeProto, helper, numpy_helper

from .fuse_activation import FUSED_DOMAIN
from .graph import Graph, Node

# Exporters write activations and normalisation tails as chains of small operators: SiLU
# (Sigmoid, Mul), HardSwish before opset 14 (Add, Clip, Div, Mul), GELU (Div, Erf, Add, Mul,
# Mul; or Pow, Mul, Add, Mul, Tanh, Add, Mul, Mul), LayerNormalization's scale and shift
# (Div, Mul, Add), a squeeze-excitation's gate (HardSigmoid, Mul). Each node is a pass over
# memory and an engine step. This pass finds every maximal group of element-wise nodes whose
# inner values nothing else reads, whatever the pattern, and replaces it by one node holding
# the group's nodes; its kernel runs them in turn (the reference) or evaluates them in one
# compiled pass (the fast path). Only float32 values are fused (the compiled interpreter's
# type); the inner values must be float32 by the graph's inferred types.

#: element-wise operators of ai.onnx whose every input is float data (a Clip's bounds too)
UNARY = frozenset({"Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Sqrt", "Erf", "Reciprocal", "HardSigmoid",
                   "HardSwish", "LeakyRelu"})
BINARY = frozenset({"Add", "Sub", "Mul", "Div"})
#: operators fused even alone: their reference takes several numpy passes (HardSwish: x / 6,
#: + 0.5, clip, * x), the compiled loop one (mobilenetv3's 21 HardSwish: 2.3 -> 0.5 ms a run)
ALONE = frozenset({"HardSwish", "HardSigmoid", "LeakyRelu"})
#: nodes per group at most (the interpreter's registers: one per value)
MAX_NODES = 12
#: distinct non-constant inputs per group at most (the interpreter's input slots: 8, one-element constants included)
MAX_INPUTS = 8

_F32 = np.dtype(np.float32)


def _is_f32(g: Graph, name: str) -> bool:
    c = g.const(name)
    if c is not None:
        return c.dtype == _F32
    dtype = g.info.get(name, (None, None))[0]
    return dtype is not None and np.dtype(dtype) == _F32


def _pow_exponent(g: Graph, node: Node) -> int | None:
    """2 or 3 when Pow's exponent is a one-element constant of that value."""
    if len(node.inputs) != 2:
        return None
    e = g.const(node.inputs[1])
    if e is None or e.size != 1 or e.dtype.kind not in "fiu":
        return None
    v = float(e.reshape(-1)[0])
    return int(v) if v in (2.0, 3.0) else None


def _eligible(g: Graph, node: Node) -> bool:
    if node.domain != "" or len(node.outputs) != 1 or node.implicit or not node.outputs[0]:
        return False
    op = node.op_type
    if op in UNARY:
        ok = len(node.inputs) == 1
    elif op in BINARY or (op in ("Max", "Min") and node.opset >= 8):
        ok = len(node.inputs) == 2
    elif op == "Clip":
        # bounds as attributes (opset < 11) or one-element float32 constants
        ok = node.opset < 11 or all(i == "" or (g.const(i) is not None and g.const(i).size == 1) for i in node.inputs[1:])
    elif op == "Pow":
        return _pow_exponent(g, node) is not None and _is_f32(g, node.inputs[0]) and _is_f32(g, node.outputs[0])
    else:
        return False
    if op in BINARY and node.opset < 7:  # (legacy broadcast attribute)
        return False
    return ok and all(i == "" or _is_f32(g, i) for i in node.inputs) and _is_f32(g, node.outputs[0])


def fuse_elementwise(g: Graph) -> bool:
    """Replace each group of two or more connected element-wise float32 nodes whose inner
    values only the group reads (or one node of ALONE) by one FusedElementwise node; returns
    whether anything changed."""
    consumers = g.consumers()
    producers = g.producers()
    outputs = set(g.outputs)
    taken: set[int] = set()
    replace: dict[int, Node] = {}
    removed: set[int] = set()
    for root in reversed(g.nodes):
        if id(root) in taken or not _eligible(g, root):
            continue
        members = {id(root): root}
        grown = True
        while grown and len(members) < MAX_NODES:
            grown = False
            for m in list(members.values()):
                for name in m.inputs:
                    p = producers.get(name)
                    if p is None or id(p) in members or id(p) in taken or name in outputs or not _eligible(g, p):
                        continue
                    if any(id(c) not in members for c in consumers.get(name, [])):
                        continue
                    members[id(p)] = p
                    grown = True
                    if len(members) >= MAX_NODES:
                        break
                if len(members) >= MAX_NODES:
                    break
        if len(members) < 2 and root.op_type not in ALONE:
            continue
        order = [n for n in g.nodes if id(n) in members]  # (g.nodes is sorted)
        fused = _fused_node(g, order, root)
        if fused is None:
            continue
        taken.update(members)
        replace[id(root)] = fused
        removed.update(k for k in members if k != id(root))
    if not replace:
        return False
    g.nodes = [replace.get(id(n), n) for n in g.nodes if id(n) not in removed]
    return True


def _fused_node(g: Graph, order: list[Node], root: Node) -> Node | None:
    """The FusedElementwise node of ``order`` (the group's nodes, sorted; ``root`` last), or
    None when it would read more than MAX_INPUTS values."""
    inputs: list[str] = []
    names: dict[str, str] = {}  # graph name -> name inside the chain

    def inner(name: str) -> str:
        if not name:
            return ""
        if name not in names:
            names[name] = f"x{len(inputs)}"
            inputs.append(name)
        return names[name]

    protos = []
    for i, node in enumerate(order):
        out = "y" if node is root else f"t{i}"
        if node.op_type == "Pow":
            # Pow(x, 2) = x * x (exactly: pow rounds the same square); Pow(x, 3) = (x * x) * x,
            # two roundings as onnxruntime's special case (within 2 ulp of the exact cube)
            x = inner(node.inputs[0])
            if _pow_exponent(g, node) == 2:
                protos.append(helper.make_node("Mul", [x, x], [out]))
            else:
                protos.append(helper.make_node("Mul", [x, x], [f"{out}_sq"]))
                protos.append(helper.make_node("Mul", [f"{out}_sq", x], [out]))
        else:
            p = helper.make_node(node.op_type, [inner(n) for n in node.inputs], [out])
            p.attribute.extend(node.attrs.values())
            protos.append(p)
        names[node.outputs[0]] = out
    if len(inputs) > MAX_INPUTS:
        return None
    fused = Node("FusedElementwise", FUSED_DOMAIN, inputs, [root.outputs[0]], {}, root.name or order[0].name,
                 {**root.opsets, FUSED_DOMAIN: 1}, root.origin)
    fused.set_attr("nodes", [p.SerializeToString() for p in protos], AttributeProto.STRINGS)
    fused.set_attr("opset", root.opsets.get("", 13))
    return fused



# A chain right after a convolution (efficientnet's SiLU after each expansion and depthwise
# convolution, HardSwish in mobilenetv3) costs a pass over memory of the convolution's
# output: 1.2M values at 112x112, read back from DRAM. fuse_chain_epilogue moves the chain
# into the convolution (a FusedConv with attribute ``chain``), whose kernels apply it to
# each block of output while it is in cache; the reference applies it to the whole output.

#: constant inputs of a chain fused into a producer: one value, of rank small enough not
#: to raise the rank of a convolution's output (3 and more)
_CHAIN_CONST_RANK = 3


def _chain_producer(g: Graph, node: Node, consumers: dict, producers: dict) -> Node | None:
    """The Conv or FusedConv (no activation, shuffle or chain) whose output is ``node``'s
    first input and read by nothing else, when every other input of ``node`` is a
    one-element float32 constant; else None."""
    if node.domain != FUSED_DOMAIN or node.op_type != "FusedElementwise" or not node.inputs:
        return None
    x = node.inputs[0]
    for name in node.inputs[1:]:
        c = g.const(name)
        if c is None or c.size != 1 or c.dtype != _F32 or c.ndim > _CHAIN_CONST_RANK:
            return None
    p = producers.get(x)
    if p is None or len(p.outputs) != 1 or x in g.outputs or consumers.get(x) != [node] or not _is_f32(g, x):
        return None
    if p.domain == "" and p.op_type == "Conv":
        return p
    if (p.domain == FUSED_DOMAIN and p.op_type == "FusedConv" and not p.attr("activation", "")
            and not p.attr("shuffle", []) and not p.attr("chain", [])):
        return p
    return None


def fuse_chain_epilogue(g: Graph) -> bool:
    """Conv / FusedConv (without activation) -> FusedElementwise reading only its output and
    one-element constants becomes one FusedConv whose ``chain`` (the FusedElementwise's
    nodes, its constants as Constant nodes) runs on the convolution's output; returns
    whether anything changed."""
    consumers = g.consumers()
    producers = g.producers()
    removed = []
    for node in list(g.nodes):
        conv = _chain_producer(g, node, consumers, producers)
        if conv is None:
            continue
        protos = []
        for i, name in enumerate(node.inputs[1:], start=1):
            protos.append(helper.make_node("Constant", [], [f"x{i}"], value=numpy_helper.from_array(g.const(name), f"x{i}")))
        for blob in node.attr("nodes"):
            protos.append(NodeProto.FromString(blob))
        if conv.domain == "":
            since = conv.opset
            conv.op_type, conv.domain = "FusedConv", FUSED_DOMAIN
            conv.opsets = {**conv.opsets, FUSED_DOMAIN: 1}
            conv.set_attr("activation", "", AttributeProto.STRING)
            conv.set_attr("activation_params", [], AttributeProto.FLOATS)
            conv.set_attr("since_version", since)
        conv.set_attr("chain", [p.SerializeToString() for p in protos], AttributeProto.STRINGS)
        conv.set_attr("chain_opset", int(node.attr("opset", 13)))
        conv.outputs = list(node.outputs)
        for name in conv.outputs:
            producers[name] = conv
        removed.append(node)
    for node in removed:
        g.nodes.remove(node)
    return bool(removed)
