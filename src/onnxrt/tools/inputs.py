"""Random feeds built from a model's declared input types (for the CLI and benchmarks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..dtypes import np_dtype


def random_tensor(elem_type: int, shape: list[Any] | None, rng: np.random.Generator) -> np.ndarray:
    """A tensor of ``elem_type``; symbolic or unknown dimensions become 1."""
    dims = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in (shape or []))
    dtype = np_dtype(elem_type)
    if dtype.kind == "f" or dtype.name in ("bfloat16",) or dtype.kind == "V":
        return rng.standard_normal(dims).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 10, size=dims).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=dims).astype(bool)
    if dtype.kind == "O":
        out = np.empty(dims, dtype=object)
        out.reshape(-1)[:] = [f"s{i}" for i in range(out.size)]
        return out
    return rng.standard_normal(dims).astype(dtype)


def random_feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, Any]:
    """Random values for every input of the model that has no initializer."""
    from ..dtypes import type_shape

    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds: dict[str, Any] = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tp = vi.type
        which = tp.WhichOneof("value")
        if which == "tensor_type":
            feeds[vi.name] = random_tensor(tp.tensor_type.elem_type, type_shape(tp), rng)
        elif which == "sequence_type" and tp.sequence_type.elem_type.WhichOneof("value") == "tensor_type":
            inner = tp.sequence_type.elem_type
            feeds[vi.name] = [random_tensor(inner.tensor_type.elem_type, type_shape(inner), rng) for _ in range(2)]
        elif which == "optional_type":
            feeds[vi.name] = None
        else:
            raise ValueError(f"cannot build a random value for input {vi.name!r} of this type")
    return feeds
