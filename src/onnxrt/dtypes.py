"""Element types: ONNX TensorProto codes, numpy dtypes (ml_dtypes for the exotic ones) and type strings."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
from onnx import SparseTensorProto, TensorProto, TypeProto, helper

from .errors import ModelLoadError

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


# elements per stored byte (raw_data) or per int32_data entry of the packed sub-byte types
_PACKED = {
    code: per
    for code, per in (
        (getattr(TensorProto, "INT4", None), 2),
        (getattr(TensorProto, "UINT4", None), 2),
        (getattr(TensorProto, "FLOAT4E2M1", None), 2),
        (getattr(TensorProto, "INT2", None), 4),
        (getattr(TensorProto, "UINT2", None), 4),
    )
    if code is not None
}
# complex numbers take two entries of float_data / double_data each
_PAIRED = {TensorProto.COMPLEX64, TensorProto.COMPLEX128}


def _label(tensor: TensorProto, what: str | None) -> str:
    return what or f"Tensor {tensor.name!r}"


def tensor_count(tensor: TensorProto, what: str | None = None) -> int:
    """Element count of a TensorProto's dims, checked: known element type, no negative dimension."""
    label = _label(tensor, what)
    if tensor.data_type not in ONNX_TO_NP:
        raise ModelLoadError(
            f"{label} has element type {tensor.data_type}, which is not an ONNX element type "
            f"(expected one of the TensorProto.DataType codes {sorted(ONNX_TO_NP)})."
        )
    dims = [int(d) for d in tensor.dims]
    if any(d < 0 for d in dims):
        raise ModelLoadError(f"{label} has shape {dims}, with a negative dimension.")
    return math.prod(dims)


def raw_nbytes(tensor: TensorProto, what: str | None = None) -> int | None:
    """Bytes the ``raw_data`` (or external data) of a tensor must hold; None for strings, which have no raw form."""
    n = tensor_count(tensor, what)
    if tensor.data_type == TensorProto.STRING:
        return None
    per = _PACKED.get(tensor.data_type)
    if per is not None:
        return -(-n // per)
    return n * ONNX_TO_NP[tensor.data_type].itemsize


def check_size(nbytes: int, shape: Any, dtype: Any, label: str, limit: int | None) -> None:
    """Raise ModelLoadError when a decoded tensor of ``nbytes`` would exceed ``limit`` (the load-time cap)."""
    if limit is not None and nbytes > limit:
        raise ModelLoadError(
            f"{label} of shape {list(shape)} and type {np.dtype(dtype)} needs {nbytes} bytes, above the limit "
            f"of {limit} bytes (SessionOptions.max_tensor_bytes, or the machine's physical memory when unset)."
        )


def to_array(tensor: TensorProto, what: str | None = None, limit: int | None = None) -> np.ndarray:
    """numpy array of a TensorProto held in memory; strings become an object array of str.

    The stored data is checked against the declared type and shape before decoding:
    ``ModelLoadError`` (naming ``what``, by default the tensor) for an unknown element
    type, a negative dimension, a data length other than the shape needs, strings that
    are not UTF-8, or a size above ``limit`` bytes. External data is resolved by
    :mod:`onnxrt.model`, which checks the location first.
    """
    from onnx import numpy_helper

    label = _label(tensor, what)
    n = tensor_count(tensor, label)
    dt = ONNX_TO_NP[tensor.data_type]
    dims = [int(d) for d in tensor.dims]
    check_size(n * (dt.itemsize or 8), dims, dt, label, limit)
    if tensor.data_location == TensorProto.EXTERNAL:
        raise ModelLoadError(f"{label} keeps its data in an external file, which was not read.")
    if tensor.HasField("segment"):
        raise ModelLoadError(f"{label} is a segment of a larger tensor; onnxrt does not read segmented tensors.")
    if tensor.data_type == TensorProto.STRING:
        if tensor.HasField("raw_data"):
            raise ModelLoadError(f"{label} is a string tensor with raw_data; strings must be stored in string_data.")
        if len(tensor.string_data) != n:
            raise ModelLoadError(
                f"{label} has shape {dims}, which needs {n} strings; string_data holds {len(tensor.string_data)}."
            )
        out = np.empty(n, dtype=object)
        for i, s in enumerate(tensor.string_data):
            try:
                out[i] = s.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ModelLoadError(f"{label}: string {i} is not valid UTF-8 ({s[:40]!r}: {e.reason}).") from None
        return out.reshape(dims)
    if tensor.HasField("raw_data"):
        expected = raw_nbytes(tensor, label)
        got = len(tensor.raw_data)
        if got != expected:
            raise ModelLoadError(
                f"{label} has shape {dims} and type {dt}, which need {expected} bytes of raw_data; it holds {got}."
            )
    else:
        field = helper.tensor_dtype_to_field(tensor.data_type)
        per = _PACKED.get(tensor.data_type)
        expected = -(-n // per) if per is not None else n * (2 if tensor.data_type in _PAIRED else 1)
        got = len(getattr(tensor, field))
        if got != expected:
            raise ModelLoadError(
                f"{label} has shape {dims} and type {dt}, which need {expected} values in {field}; it holds {got}."
            )
    try:
        return numpy_helper.to_array(tensor)
    except (ValueError, TypeError, KeyError, OverflowError) as e:
        raise ModelLoadError(f"{label} cannot be decoded: {e}.") from None


def sparse_indices(raw: np.ndarray, dims: list[int], nnz: int, label: str, error: type[Exception] = ModelLoadError) -> np.ndarray:
    """The linearised (row-major) int64 indices of a sparse tensor's ``nnz`` values in dense
    shape ``dims``, from ``raw`` of shape [NNZ] (linearised) or [NNZ, rank] (coordinates),
    checked as the ONNX specification asks: integers, one per value, inside the dense shape,
    strictly ascending without duplicates. Raises ``error`` (``ModelLoadError`` for the
    model's tensors, ``InvalidFeedError`` for a feed) naming ``label``; allocates nothing of
    the dense shape's size.
    """
    n = math.prod(dims)
    idx_dims = list(raw.shape)
    if nnz == 0 and math.prod(idx_dims) == 0:
        return np.zeros(0, dtype=np.int64)
    if raw.dtype.kind not in "iu":
        raise error(f"{label}: indices must be int64; they are {raw.dtype}.")
    if idx_dims == [nnz]:
        indices = raw.astype(np.int64)
        bad = np.flatnonzero((indices < 0) | (indices >= n))
        if bad.size:
            i = int(bad[0])
            raise error(
                f"{label}: index {i} is {int(indices[i])}, outside the {n} elements of dense shape {dims}."
            )
    elif idx_dims == [nnz, len(dims)]:
        coords = raw.astype(np.int64)
        for axis, size in enumerate(dims):
            bad = np.flatnonzero((coords[:, axis] < 0) | (coords[:, axis] >= size))
            if bad.size:
                i = int(bad[0])
                raise error(
                    f"{label}: index {i} is {coords[i].tolist()}, outside dense shape {dims} on axis {axis}."
                )
        indices = np.ravel_multi_index(tuple(coords.T), dims) if nnz else np.zeros(0, dtype=np.int64)
    else:
        raise error(
            f"{label}: indices must have shape [{nnz}] (linearised) or [{nnz}, {len(dims)}] (coordinates) "
            f"for {nnz} values and dense shape {dims}; they have shape {idx_dims}."
        )
    steps = np.diff(indices)
    bad = np.flatnonzero(steps <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        problem = "repeats" if steps[i - 1] == 0 else "comes after"
        raise error(
            f"{label}: index {i} ({int(indices[i])} linearised) {problem} index {i - 1} "
            f"({int(indices[i - 1])}); sparse indices must be strictly ascending, without duplicates."
        )
    return indices


def sparse_to_dense(sp: SparseTensorProto, what: str | None = None, limit: int | None = None) -> np.ndarray:
    """Dense array of a SparseTensorProto, every part checked before the dense array is allocated.

    The spec (onnx.proto, SparseTensorProto): ``values`` has shape [NNZ]; ``indices`` has
    shape [NNZ] (linearised, row-major) or [NNZ, rank] (coordinates), type int64, and "the
    indices must appear in ascending order without duplication" (lexicographic for
    coordinates, which is the order of their linearisation). The default value is zero,
    the empty string for strings. Errors are ``ModelLoadError`` naming ``what``.
    """
    label = what or f"Sparse tensor {sp.values.name!r}"
    values_t, indices_t = sp.values, sp.indices
    dims = [int(d) for d in sp.dims]
    if any(d < 0 for d in dims):
        raise ModelLoadError(f"{label} has dense shape {dims}, with a negative dimension.")
    n = math.prod(dims)
    if values_t.data_type not in ONNX_TO_NP:
        tensor_count(values_t, f"{label}: values")  # raises on the unknown type
    dt = ONNX_TO_NP[values_t.data_type]
    # the dense tensor is what gets allocated: refuse it before decoding anything
    check_size(n * (dt.itemsize or 8), dims, dt, label, limit)
    if len(values_t.dims) != 1:
        raise ModelLoadError(f"{label}: values must have shape [NNZ]; they have shape {list(values_t.dims)}.")
    nnz = int(values_t.dims[0])
    values = to_array(values_t, f"{label}: values")
    idx_dims = [int(d) for d in indices_t.dims]
    if nnz == 0 and math.prod(idx_dims) == 0:
        indices = np.zeros(0, dtype=np.int64)
    else:
        raw = to_array(indices_t, f"{label}: indices")
        indices = sparse_indices(raw, dims, nnz, label)
    if values_t.data_type == TensorProto.STRING:
        dense = np.full(dims, "", dtype=object)
    else:
        dense = np.zeros(dims, dtype=dt)
    if nnz:
        dense.reshape(-1)[indices] = values
    return dense
