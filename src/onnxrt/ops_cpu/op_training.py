"""ai.onnx.preview.training (1): the Adagrad, Adam and Momentum optimizers, and Gradient (reverse-mode autodiff)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

DOMAIN = "ai.onnx.preview.training"


def _groups(op: OpRun, inputs: tuple[Any, ...], per_tensor: int) -> int:
    """Number of optimized tensors: the variadic inputs come in ``per_tensor`` equal groups."""
    if not inputs or len(inputs) % per_tensor:
        raise KernelError(
            f"{op.onnx_node.op_type} takes its tensors in {per_tensor} groups of equal size, got {len(inputs)} tensors."
        )
    return len(inputs) // per_tensor


def _scalar(value: Any, dtype: np.dtype, name: str) -> Any:
    arr = np.asarray(value)
    if arr.size != 1:
        raise KernelError(f"{name} must be a scalar, got shape {list(arr.shape)}.")
    return arr.reshape(()).astype(dtype)


def adagrad(r: Any, t: Any, x: np.ndarray, g: np.ndarray, h: np.ndarray, norm_coefficient: float = 0.0,
            epsilon: float = 1e-6, decay_factor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """One ADAGRAD step; returns (X_new, H_new) in X's element type."""
    dt = x.dtype.type
    rate = _scalar(r, x.dtype, "R") / (dt(1) + _scalar(t, x.dtype, "T") * dt(decay_factor))
    g_reg = dt(norm_coefficient) * x + g
    h_new = h + g_reg * g_reg
    x_new = x - rate * g_reg / (np.sqrt(h_new) + dt(epsilon))
    return x_new.astype(x.dtype, copy=False), h_new.astype(h.dtype, copy=False)


def adam(r: Any, t: Any, x: np.ndarray, g: np.ndarray, v: np.ndarray, h: np.ndarray, alpha: float = 0.9,
         beta: float = 0.999, epsilon: float = 1e-6, norm_coefficient: float = 0.0,
         norm_coefficient_post: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One Adam step; returns (X_new, V_new, H_new). The bias correction applies when T > 0."""
    dt = x.dtype.type
    a, b = dt(alpha), dt(beta)
    g_reg = dt(norm_coefficient) * x + g
    v_new = a * v + (dt(1) - a) * g_reg
    h_new = b * h + (dt(1) - b) * (g_reg * g_reg)
    rate = _scalar(r, x.dtype, "R")
    steps = int(np.asarray(t).reshape(-1)[0])
    if steps > 0:
        rate = rate * np.sqrt(dt(1) - b**steps) / (dt(1) - a**steps)
    x_new = x - rate * (v_new / (np.sqrt(h_new) + dt(epsilon)))
    x_final = (dt(1) - dt(norm_coefficient_post)) * x_new
    return x_final.astype(x.dtype, copy=False), v_new.astype(v.dtype, copy=False), h_new.astype(h.dtype, copy=False)


def momentum(r: Any, t: Any, x: np.ndarray, g: np.ndarray, v: np.ndarray, alpha: float, beta: float,
             norm_coefficient: float, mode: str = "standard") -> tuple[np.ndarray, np.ndarray]:
    """One step of SGD with standard or Nesterov momentum; beta counts 1 on the first step (T == 0)."""
    dt = x.dtype.type
    g_reg = dt(norm_coefficient) * x + g
    b = dt(beta) if int(np.asarray(t).reshape(-1)[0]) > 0 else dt(1)
    v_new = dt(alpha) * v + b * g_reg
    rate = _scalar(r, x.dtype, "R")
    if mode == "nesterov":
        x_new = x - rate * (g_reg + dt(alpha) * v_new)
    else:
        x_new = x - rate * v_new
    return x_new.astype(x.dtype, copy=False), v_new.astype(v.dtype, copy=False)


@register("Adagrad", versions=(1,), domain=DOMAIN)
class Adagrad(OpRun):
    """Adagrad-1: inputs R, T, X_1..X_n, G_1..G_n, H_1..H_n; outputs X_new_1..n, H_new_1..n."""

    def _run(self, r, t, *tensors, attributes=None, verbose=0, fLOG=None):
        n = _groups(self, tensors, 3)
        res = [adagrad(r, t, tensors[i], tensors[n + i], tensors[2 * n + i], self.norm_coefficient, self.epsilon,
                       self.decay_factor) for i in range(n)]
        return tuple(p[0] for p in res) + tuple(p[1] for p in res)


@register("Adam", versions=(1,), domain=DOMAIN)
class Adam(OpRun):
    """Adam-1: inputs R, T, then X, G, V, H groups; outputs X_new, V_new, H_new groups."""

    def _run(self, r, t, *tensors, attributes=None, verbose=0, fLOG=None):
        n = _groups(self, tensors, 4)
        res = [adam(r, t, tensors[i], tensors[n + i], tensors[2 * n + i], tensors[3 * n + i], self.alpha, self.beta,
                    self.epsilon, self.norm_coefficient, self.norm_coefficient_post) for i in range(n)]
        return tuple(p[k] for k in range(3) for p in res)


@register("Momentum", versions=(1,), domain=DOMAIN)
class Momentum(OpRun):
    """Momentum-1: mode 'standard' or 'nesterov'; inputs R, T, then X, G, V groups; outputs X_new, V_new groups."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.check_choice("mode", ("standard", "nesterov"))

    def _run(self, r, t, *tensors, attributes=None, verbose=0, fLOG=None):
        n = _groups(self, tensors, 3)
        res = [momentum(r, t, tensors[i], tensors[n + i], tensors[2 * n + i], self.alpha, self.beta,
                        self.norm_coefficient, self.mode) for i in range(n)]
        return tuple(p[0] for p in res) + tuple(p[1] for p in res)


# --- Gradient ------------------------------------------------------------------------------


def unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` down to ``shape``: the adjoint of numpy broadcasting."""
    if grad.shape == tuple(shape):
        return grad
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(shape)


def _matmul_grad(a: np.ndarray, b: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # 1-D operands are promoted as numpy does (a to a row, b to a column), then restored
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = np.expand_dims(g2, -2)
    if b.ndim == 1:
        g2 = np.expand_dims(g2, -1)
    ga = g2 @ np.swapaxes(b2, -1, -2)
    gb = np.swapaxes(a2, -1, -2) @ g2
    ga = unbroadcast(ga, a2.shape).reshape(a.shape)
    gb = unbroadcast(gb, b2.shape).reshape(b.shape)
    return ga, gb


def _reduce_axes(op: OpRun, x: np.ndarray, ins: list[Any]) -> tuple[tuple[int, ...], bool]:
    axes = ins[1] if len(ins) > 1 and ins[1] is not None else getattr(op, "axes", None)
    keepdims = bool(getattr(op, "keepdims", 1))
    if axes is None or len(np.asarray(axes).reshape(-1)) == 0:
        if getattr(op, "noop_with_empty_axes", 0):
            return (), True
        return tuple(range(x.ndim)), keepdims
    return tuple(int(a) % x.ndim for a in np.asarray(axes).reshape(-1)), keepdims


def _reduce_grad(op: OpRun, ins: list[Any], outs: list[Any], g: np.ndarray, mean: bool) -> list[Any]:
    x = ins[0]
    axes, keepdims = _reduce_axes(op, x, ins)
    if axes and not keepdims:
        g = np.expand_dims(g, axes)
    gx = np.broadcast_to(g, x.shape)
    if mean and axes:
        gx = gx / np.prod([x.shape[a] for a in axes])
    return [np.array(gx, dtype=x.dtype)]


#: op_type -> backward rule: (op, inputs, outputs, output gradient) -> one gradient (or None) per input
BackwardRule = Callable[[OpRun, list[Any], list[Any], np.ndarray], list[Any]]
BACKWARD: dict[str, BackwardRule] = {
    "Add": lambda op, i, o, g: [g, g],
    "Sub": lambda op, i, o, g: [g, -g],
    "Mul": lambda op, i, o, g: [g * i[1], g * i[0]],
    "Div": lambda op, i, o, g: [g / i[1], -g * i[0] / (i[1] * i[1])],
    "Neg": lambda op, i, o, g: [-g],
    "Identity": lambda op, i, o, g: [g],
    "Sum": lambda op, i, o, g: [g] * len(i),
    "MatMul": lambda op, i, o, g: list(_matmul_grad(i[0], i[1], g)),
    "Relu": lambda op, i, o, g: [g * (i[0] > 0)],
    "Sigmoid": lambda op, i, o, g: [g * o[0] * (1 - o[0])],
    "Tanh": lambda op, i, o, g: [g * (1 - o[0] * o[0])],
    "Exp": lambda op, i, o, g: [g * o[0]],
    "Log": lambda op, i, o, g: [g / i[0]],
    "Sqrt": lambda op, i, o, g: [g / (2 * o[0])],
    "Abs": lambda op, i, o, g: [g * np.sign(i[0])],
    "Pow": lambda op, i, o, g: [
        g * i[1] * np.power(i[0], i[1] - 1),
        g * o[0] * np.log(np.where(i[0] > 0, i[0], 1)),
    ],
    "Reshape": lambda op, i, o, g: [g.reshape(np.shape(i[0])), None],
    "Flatten": lambda op, i, o, g: [g.reshape(np.shape(i[0]))],
    "Transpose": lambda op, i, o, g: [
        np.transpose(g, np.argsort(op.perm)) if getattr(op, "perm", None) else np.transpose(g)
    ],
    "ReduceSum": lambda op, i, o, g: _reduce_grad(op, i, o, g, mean=False),
    "ReduceMean": lambda op, i, o, g: _reduce_grad(op, i, o, g, mean=True),
}


def _backward_slice(graph: onnx.GraphProto, y: str, stops: set[str]) -> list[onnx.NodeProto]:
    """The nodes ``y`` depends on, walking back from ``y`` and stopping at ``stops``, in graph order."""
    producer = {o: n for n in graph.node for o in n.output if o}
    wanted: set[int] = set()
    todo = [y]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name in stops:
            continue
        seen.add(name)
        node = producer.get(name)
        if node is None:
            continue  # a graph input, an initializer or an outer value
        if id(node) not in wanted:
            wanted.add(id(node))
            todo.extend(n for n in node.input if n)
    return [n for n in graph.node if id(n) in wanted]


@register("Gradient", versions=(1,), domain=DOMAIN)
class Gradient(OpRun):
    """Gradient-1: the gradient of tensor ``y`` with respect to each tensor of ``xs``, the graph
    being evaluated at the node's inputs (values of ``xs`` then ``zs``).

    The nodes computing ``y`` are found once, at load time, in the graph holding the node
    (walking back from ``y`` and stopping at ``xs`` and ``zs``) and planned as a nested graph;
    each run evaluates it and propagates the gradient backwards with the rules of
    :data:`BACKWARD` (one per operator; broadcasting is undone by summing). ``y`` is seeded
    with ones, so for a non-scalar ``y`` the result is the gradient of ``sum(y)``. A tensor of
    ``xs`` that ``y`` does not depend on gets a zero gradient.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        label = self.node_label()
        xs, zs = list(self.xs or []), list(self.zs or [])
        if not xs:
            raise InvalidAttributeError(f"{label}: attribute 'xs' must name at least one tensor.")
        self._xs = xs
        names = xs + zs
        if len(set(names)) != len(names):
            raise InvalidAttributeError(f"{label}: 'xs' and 'zs' name a tensor twice ({names!r}).")
        if len(onnx_node.input) != len(names):
            raise InvalidAttributeError(
                f"{label} has {len(onnx_node.input)} inputs, expected {len(names)} (one per name of 'xs' then 'zs')."
            )
        graph = options.get("graph")
        compile_graph = options.get("compile_graph")
        if graph is None or compile_graph is None:
            raise InvalidAttributeError(f"{label} differentiates the graph holding it; build it inside a model.")
        nodes = _backward_slice(graph, self.y, set(names))
        if not nodes and self.y not in names:
            raise InvalidAttributeError(f"{label}: no node computes {self.y!r} from {names!r}.")
        for node in nodes:
            if node is onnx_node or (node.op_type == "Gradient" and list(node.output) == list(onnx_node.output)):
                raise InvalidAttributeError(f"{label}: {self.y!r} depends on the node's own outputs.")
        # the forward copy renames what it defines, so it never redefines a name of the graph
        prefix = f"_grad_{onnx_node.name or id(self)}__"
        local = set(names) | {o for n in nodes for o in n.output if o}
        renamed = []
        for node in nodes:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            for i, n in enumerate(node.input):
                if n in local:
                    copy.input[i] = prefix + n
            for i, n in enumerate(node.output):
                if n:
                    copy.output[i] = prefix + n
            renamed.append(copy)
        self._in_names = [prefix + n for n in names]
        self._y_name = prefix + self.y if self.y in local else self.y
        sub = helper.make_graph(
            renamed,
            f"{onnx_node.name or 'Gradient'}_forward",
            [helper.make_empty_tensor_value_info(n) for n in self._in_names],
            [helper.make_empty_tensor_value_info(self._y_name)],
        )
        # unoptimised: fused operators (FusedAdd, Gemm...) have no backward rule here
        self._forward = compile_graph(sub, "forward", optimize_sub=False)
        self._implicit.extend(n for n in self._forward.outer_inputs if n not in self._implicit)
        for st in self._forward.steps:
            if st.op_type not in BACKWARD:
                raise InvalidAttributeError(
                    f"{label}: onnxrt cannot differentiate operator {st.op_type!r} (node {st.name!r}); "
                    f"it knows {sorted(BACKWARD)!r}."
                )

    def _run(self, *inputs, context=None, attributes=None, verbose=0, fLOG=None):
        plan = self._forward
        feeds = dict(zip(self._in_names, inputs))
        values = plan.run_dict(feeds, context, keep_all=True)
        y_slot = plan.slots[self._y_name]
        y = values[y_slot]
        grads: dict[int, np.ndarray] = {y_slot: np.ones_like(y)}
        for st in reversed(plan.steps):
            g_out = [grads.get(s) for s in st.outputs]
            if all(g is None for g in g_out):
                continue
            if len(st.outputs) > 1 and any(g is not None for g in g_out[1:]):
                raise KernelError(f"Cannot differentiate through output 2+ of node {st.name!r} ({st.op_type}).")
            ins = [values[s] for s in st.inputs]
            outs = [values[s] for s in st.outputs]
            in_grads = BACKWARD[st.op_type](st.op, ins, outs, g_out[0])
            for s, x, g in zip(st.inputs, ins, in_grads):
                if g is None or s == 0 or not isinstance(x, np.ndarray | np.generic) or x.dtype.kind not in "fc":
                    continue
                g = unbroadcast(np.asarray(g, dtype=x.dtype), np.shape(x))
                grads[s] = grads[s] + g if s in grads else g
        out = []
        for name, x in zip(self._in_names, inputs):
            g = grads.get(plan.slots[name])
            out.append(np.zeros_like(x) if g is None else np.asarray(g, dtype=np.asarray(x).dtype))
        return tuple(out)
