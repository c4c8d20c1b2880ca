"""Element types: ONNX TensorProto codes, numpy dtypes (ml_dtypes for the exotic ones) and type strings."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from onnx import TensorProto, TypeProto, helper

# Every element type onnx knows, code -> numpy dtype. Strings are object arrays of str.
ONNX_TO_NP: dict[int, np.dtype] = {}
for _name, _code in TensorProto.DataType.items():
    if _code == TensorProto.UNDEFINED:
        continue
    try:
        ONNX_TO_NP[_code] = np.dtype(helper.tensor_dtype_to_np_dtype(_code))
    except (KeyError, TypeError, ValueError):  # a code newer than this onnx's mapping
        continue

# numpy dtype -> code. The first code wins for a dtype shared by several codes.
NP_TO_ONNX: dict[np.dtype, int] = {}
for _code, _dt in ONNX_TO_NP.items():
    NP_TO_ONNX.setdefault(_dt, _code)

# The names onnxruntime uses inside 'tensor(...)'.
_ELEM_NAMES: dict[int, str] = {
    code: name.lower() for name, code in TensorProto.DataType.items() if code != 0
}
_ELEM_NAMES[TensorProto.FLOAT] = "float"
_ELEM_NAMES[TensorProto.DOUBLE] = "double"
_NAME_TO_ELEM = {v: k for k, v in _ELEM_NAMES.items()}

#: the sub-byte and 8-bit float types that ml_dtypes provides
EXOTIC_DTYPES = frozenset(
    np.dtype(t)
    for t in (
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e4m3fnuz,
        ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e5m2fnuz,
        ml_dtypes.float8_e8m0fnu,
        ml_dtypes.float4_e2m1fn,
        ml_dtypes.int4,
        ml_dtypes.uint4,
        ml_dtypes.int2,
        ml_dtypes.uint2,
    )
)


def np_dtype(elem_type: int) -> np.dtype:
    """numpy dtype of an ONNX element type code."""
    return ONNX_TO_NP[elem_type]


def onnx_type(dtype: Any) -> int:
    """ONNX element type code of a numpy dtype; ``str`` and bytes kinds map to STRING."""
    dt = np.dtype(dtype)
    if dt.kind in "OUS":
        return TensorProto.STRING
    return NP_TO_ONNX[dt]


def elem_name(elem_type: int) -> str:
    """Name used in type strings: ``float``, ``int64``, ``float8e4m3fn``."""
    return _ELEM_NAMES.get(elem_type, f"elem{elem_type}")


def elem_from_name(name: str) -> int:
    """Inverse of :func:`elem_name`."""
    return _NAME_TO_ELEM[name]


def type_string(tp: TypeProto | None) -> str:
    """onnxruntime-style type string of a TypeProto: ``tensor(float)``, ``seq(tensor(int64))``."""
    if tp is None:
        return "unknown"
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        return f"tensor({elem_name(tp.tensor_type.elem_type)})"
    if which == "sparse_tensor_type":
        return f"sparse_tensor({elem_name(tp.sparse_tensor_type.elem_type)})"
    if which == "sequence_type":
        return f"seq({type_string(tp.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"optional({type_string(tp.optional_type.elem_type)})"
    if which == "map_type":
        key = elem_name(tp.map_type.key_type)
        return f"map({key},{type_string(tp.map_type.value_type)})"
    return "unknown"


def type_shape(tp: TypeProto | None) -> list[int | str | None] | None:
    """Declared shape of a tensor type: ints for static dims, names for symbolic ones, None for unknown (or negative)."""
    if tp is None or tp.WhichOneof("value") != "tensor_type":
        return None
    tt = tp.tensor_type
    if not tt.HasField("shape"):
        return None
    dims: list[int | str | None] = []
    for d in tt.shape.dim:
        which = d.WhichOneof("value")
        if which == "dim_value":
            # a negative value (exporters write -1 for "unknown") is free, as in onnxruntime;
            # the plan reports it (onnxrt.compat.check_input_dims)
            dims.append(int(d.dim_value) if d.dim_value >= 0 else None)
        elif which == "dim_param":
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dims


def value_type_string(value: Any) -> str:
    """Type string of a runtime value, in the same style as :func:`type_string`."""
    if value is None:
        return "optional(none)"
    if isinstance(value, np.ndarray | np.generic):
        dt = value.dtype
        if dt.kind in "OUS":
            return "tensor(string)"
        code = NP_TO_ONNX.get(dt)
        return f"tensor({elem_name(code)})" if code is not None else f"tensor({dt})"
    if isinstance(value, list):
        inner = value_type_string(value[0]) if value else "?"
        return f"seq({inner})"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


def same_dtype(value_dtype: np.dtype, elem_type: int) -> bool:
    """Whether an array of ``value_dtype`` is acceptable for an ONNX ``elem_type``."""
    if elem_type == TensorProto.STRING:
        return value_dtype.kind in "OUS"
    expected = ONNX_TO_NP.get(elem_type)
    return expected is not None and value_dtype == expected


def to_array(tensor: TensorProto) -> np.ndarray:
    """numpy array of a TensorProto held in memory; strings become an object array of str.

    External data is resolved by :mod:`onnxrt.model`, which checks the location first.
    """
    from onnx import numpy_helper

    arr = numpy_helper.to_array(tensor)
    if tensor.data_type == TensorProto.STRING:
        flat = [s.decode("utf-8", errors="surrogateescape") if isinstance(s, bytes) else s for s in arr.reshape(-1)]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        arr = out.reshape(arr.shape)
    return arr
