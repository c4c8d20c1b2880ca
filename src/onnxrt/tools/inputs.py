"""Random feeds built from a model's declared input types (for the CLI and benchmarks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..dtypes import np_dtype

#: integer values of an input that no node reads as an index: small and non-negative
SMALL_INTS = 10

#: operator -> (position of its index input, position of the data input it indexes, the
#: attribute naming the indexed axis and its default; None: every axis, the smallest
#: dimension bounds the values). Values are drawn in [0, dim) of the axis (or of the
#: smallest dimension), so they are valid whatever the node's other inputs hold.
_INDEX_READERS: dict[str, tuple[int, int, str | None, int]] = {
    "Gather": (1, 0, "axis", 0),
    "GatherElements": (1, 0, "axis", 0),
    "ScatterElements": (1, 0, "axis", 0),
    "Scatter": (1, 0, "axis", 0),
    "GatherND": (1, 0, None, 0),
    "ScatterND": (1, 0, None, 0),
    "TensorScatter": (2, 0, None, 0),
}
#: operators whose output holds the same values as their first input: an index that passes
#: through them is still an index for the nodes after them
_VALUE_PRESERVING = frozenset({"Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Expand", "Transpose"})


def random_tensor(elem_type: int, shape: list[Any] | None, rng: np.random.Generator, high: int = SMALL_INTS) -> np.ndarray:
    """A tensor of ``elem_type``; symbolic or unknown dimensions become 1; integers are drawn in [0, high)."""
    dims = feed_shape(shape)
    dtype = np_dtype(elem_type)
    if dtype.kind == "f" or dtype.name in ("bfloat16",) or dtype.kind == "V":
        return rng.standard_normal(dims).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, max(1, high), size=dims).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=dims).astype(bool)
    if dtype.kind == "O":
        out = np.empty(dims, dtype=object)
        out.reshape(-1)[:] = [f"s{i}" for i in range(out.size)]
        return out
    return rng.standard_normal(dims).astype(dtype)


def feed_shape(shape: list[Any] | None) -> tuple[int, ...]:
    """The shape a random feed takes for a declared one: symbolic or unknown dimensions are 1."""
    return tuple(d if isinstance(d, int) and d >= 0 else 1 for d in (shape or []))


def _known_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...] | None]:
    """Static shapes of the values of the main graph as random feeds make them: initializers,
    inputs (symbolic dimensions 1), and what onnx's shape inference derives from those."""
    from ..dtypes import type_shape

    graph = model.graph
    shapes: dict[str, tuple[int, ...] | None] = {i.name: tuple(i.dims) for i in graph.initializer}
    symbols: dict[str, int] = {}
    for vi in graph.input:
        if vi.name in shapes or vi.type.WhichOneof("value") != "tensor_type":
            continue
        declared = type_shape(vi.type)
        shapes[vi.name] = feed_shape(declared)
        symbols.update({d: 1 for d in declared or [] if isinstance(d, str)})
    infos = list(graph.value_info)
    try:
        infos += list(onnx.shape_inference.infer_shapes(model).graph.value_info)
    except Exception:  # noqa: BLE001  (a model onnx cannot infer: only the declared shapes are known)
        pass
    for vi in infos:
        if vi.name in shapes or vi.type.WhichOneof("value") != "tensor_type":
            continue
        declared = type_shape(vi.type)
        if declared is None:
            continue
        dims = [d if isinstance(d, int) else symbols.get(d) if isinstance(d, str) else None for d in declared]
        shapes[vi.name] = tuple(dims) if all(isinstance(d, int) and d >= 0 for d in dims) else None
    return shapes


def index_bounds(model: onnx.ModelProto) -> dict[str, int]:
    """Input name -> exclusive upper bound of the values that keep every index it feeds valid.

    An integer input read (directly, or through value-preserving nodes such as Cast or
    Reshape) as the indices of Gather, GatherElements, GatherND, Scatter* gets the size of
    the indexed axis (the smallest dimension where every axis is indexed); 1 when that size
    is unknown. Inputs read otherwise are not in the result.
    """
    graph = model.graph
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for pos, name in enumerate(node.input):
            if name:
                readers.setdefault(name, []).append((node, pos))
    shapes: dict[str, tuple[int, ...] | None] | None = None
    bounds: dict[str, int] = {}
    inits = {i.name for i in graph.initializer}
    for vi in graph.input:
        if vi.name in inits:
            continue
        todo, seen, bound = [vi.name], set(), None
        while todo:
            value = todo.pop()
            if value in seen:
                continue
            seen.add(value)
            for node, pos in readers.get(value, []):
                if node.domain in ("", "ai.onnx") and node.op_type in _VALUE_PRESERVING and pos == 0:
                    todo.extend(o for o in node.output if o)
                    continue
                spec = _INDEX_READERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
                if spec is None or pos != spec[0] or len(node.input) <= spec[1]:
                    continue
                if shapes is None:
                    shapes = _known_shapes(model)
                data = shapes.get(node.input[spec[1]])
                size = 1
                if data:
                    if spec[2] is None:
                        size = min(data)
                    else:
                        axis = next((a.i for a in node.attribute if a.name == spec[2]), spec[3])
                        if -len(data) <= axis < len(data):
                            size = data[axis]
                bound = size if bound is None else min(bound, size)
        if bound is not None:
            bounds[vi.name] = max(1, bound)
    return bounds


def random_feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, Any]:
    """Random values for every input of the model that has no initializer: floats from a
    standard normal, integers in [0, 10), or below the size of the axis they index
    (see :func:`index_bounds`)."""
    from ..dtypes import type_shape

    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    bounds = index_bounds(model)
    feeds: dict[str, Any] = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tp = vi.type
        which = tp.WhichOneof("value")
        high = bounds.get(vi.name, SMALL_INTS)
        if which == "tensor_type":
            feeds[vi.name] = random_tensor(tp.tensor_type.elem_type, type_shape(tp), rng, high)
        elif which == "sequence_type" and tp.sequence_type.elem_type.WhichOneof("value") == "tensor_type":
            inner = tp.sequence_type.elem_type
            feeds[vi.name] = [random_tensor(inner.tensor_type.elem_type, type_shape(inner), rng, high) for _ in range(2)]
        elif which == "optional_type":
            feeds[vi.name] = None
        else:
            raise ValueError(f"cannot build a random value for input {vi.name!r} of this type")
    return feeds
