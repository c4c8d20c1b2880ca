"""Helpers of the signal and vision kernels: scalar inputs, output_datatype, real/imaginary pairs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import ONNX_TO_NP, elem_name
from ..errors import InvalidAttributeError, KernelError


def scalar_int(value: Any, name: str) -> int:
    """The integer held by a scalar input (shape ``()`` or ``[1]``), or a KernelError."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise KernelError(f"{name!r} must be a scalar, got a tensor of shape {list(arr.shape)}.")
    if arr.dtype.kind not in "iu":
        raise KernelError(f"{name!r} must be an integer scalar, got dtype {arr.dtype}.")
    return int(arr.reshape(-1)[0])


def scalar_float(value: Any, name: str) -> float:
    """The number held by a scalar input (shape ``()`` or ``[1]``), or a KernelError."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise KernelError(f"{name!r} must be a scalar, got a tensor of shape {list(arr.shape)}.")
    return float(arr.reshape(-1)[0].astype(np.float64))


def attribute_dtype(op: Any, name: str, allowed: frozenset[str]) -> np.dtype:
    """numpy dtype of an ``output_datatype``-like attribute, checked against the schema's type strings."""
    code = getattr(op, name)
    label = elem_name(code) if code in ONNX_TO_NP else str(code)
    if code not in ONNX_TO_NP or f"tensor({label})" not in allowed:
        names = sorted(s[7:-1] for s in allowed)
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute {name!r} is {code} ({label}), expected the code of one of {names}."
        )
    return ONNX_TO_NP[code]


def allowed_types(op: Any, param: str) -> frozenset[str]:
    """Type strings a schema allows for the type parameter ``param`` (``T2``...)."""
    for c in op._schema.type_constraints:
        if c.type_param_str == param:
            return frozenset(c.allowed_type_strs)
    return frozenset()


def compute_dtypes(dtype: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(real, complex) dtypes computations on ``dtype`` run in: double stays double, every
    narrower float (float32, float16, bfloat16) runs in single precision."""
    if dtype == np.float64:
        return np.dtype(np.float64), np.dtype(np.complex128)
    return np.dtype(np.float32), np.dtype(np.complex64)


def pairs_to_complex(x: np.ndarray, name: str = "input") -> np.ndarray:
    """``[..., 1]`` (real) or ``[..., 2]`` (real, imaginary) to a complex array ``[...]``."""
    if x.ndim == 0 or x.shape[-1] not in (1, 2):
        raise KernelError(
            f"{name!r} must end with a dimension of 1 (real) or 2 (complex), got shape {list(x.shape)}."
        )
    real, cplx = compute_dtypes(x.dtype)
    if x.shape[-1] == 1:
        return x[..., 0].astype(real)
    out = np.empty(x.shape[:-1], dtype=cplx)
    out.real = x[..., 0]
    out.imag = x[..., 1]
    return out


def complex_to_pairs(c: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A complex array ``[...]`` to ``[..., 2]`` (real, imaginary) of ``dtype``."""
    out = np.empty(c.shape + (2,), dtype=dtype)
    out[..., 0] = c.real
    out[..., 1] = c.imag
    return out
