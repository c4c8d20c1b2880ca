"""OrtValue, SparseTensor and OrtDevice: onnxruntime's value holders, on CPU over numpy arrays."""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, NotApplicableError, UnknownOptionError



class OrtDeviceVendorId(enum.IntEnum):
    """PCI vendor ids of device makers, with onnxruntime's names."""

    NONE = 0
    AMD = 0x1002
    NVIDIA = 0x10DE
    ARM = 0x13B5
    MICROSOFT = 0x1414
    HUAWEI = 0x19E5
    QUALCOMM = 0x5143
    INTEL = 0x8086


#: the names ``OrtDevice.make`` takes: onnxruntime's device type code (CPU 0, GPU 1, NPU 3) and vendor
_DEVICE_TYPES = {
    "cpu": (0, OrtDeviceVendorId.NONE),
    "cuda": (1, OrtDeviceVendorId.NVIDIA),
    "dml": (1, OrtDeviceVendorId.MICROSOFT),
    "gpu": (1, OrtDeviceVendorId.NONE),
    "webgpu": (1, OrtDeviceVendorId.NONE),
    "cann": (3, OrtDeviceVendorId.HUAWEI),
    "npu": (3, OrtDeviceVendorId.NONE),
}


def _cpu_only(what: str, device_type: Any, device_id: Any = 0) -> None:
    if isinstance(device_type, OrtDevice):
        device_type = device_type.name
    if not isinstance(device_type, str) or device_type.lower() != "cpu":
        raise NotApplicableError(
            f"{what}: onnxrt computes on the CPU only and keeps values in numpy arrays; "
            f"device {device_type!r} (id {device_id}) is not available (use 'cpu')."
        )


class OrtDevice:
    """A device description, as onnxruntime's ``OrtDevice.make(device_type, device_id)``.

    Devices of other types than ``"cpu"`` can be described (onnxruntime's CPU packages
    allow that too) but any value placed on them raises :class:`~onnxrt.NotApplicableError`.
    """

    __slots__ = ("name", "_type", "_id", "_vendor")

    def __init__(self, name: str, device_type: int, device_id: int, vendor_id: OrtDeviceVendorId):
        self.name = name
        self._type = device_type
        self._id = device_id
        self._vendor = vendor_id

    @staticmethod
    def make(device_type: str, device_id: int) -> OrtDevice:
        """A device by name (``"cpu"``, ``"cuda"``, ...) and id."""
        if not isinstance(device_type, str) or device_type.lower() not in _DEVICE_TYPES:
            raise InvalidArgumentError(f"Unsupported device type: {device_type!r}; known types are {sorted(_DEVICE_TYPES)}.")
        name = device_type.lower()
        code, vendor = _DEVICE_TYPES[name]
        return OrtDevice(name, code, int(device_id), vendor)

    def device_type(self) -> int:
        return self._type

    def device_id(self) -> int:
        return self._id

    def device_mem_type(self) -> int:
        """Always 0 (default memory)."""
        return 0

    def device_vendor_id(self) -> OrtDeviceVendorId:
        return self._vendor

    def __repr__(self) -> str:
        return f"OrtDevice({self.name!r}, {self._id})"


def _elem_dtype(element_type: Any) -> np.dtype:
    """numpy dtype of an element type given as a numpy type or an ONNX TensorProto code."""
    from .dtypes import ONNX_TO_NP  # onnx's type tables load on first use

    if isinstance(element_type, int) and not isinstance(element_type, bool):
        dt = ONNX_TO_NP.get(element_type)
        if dt is None:
            raise InvalidArgumentError(f"Element type {element_type} is not an ONNX TensorProto data type code.")
        return dt
    try:
        dt = np.dtype(element_type)
    except TypeError:
        raise InvalidArgumentError(f"Element type {element_type!r} is neither a numpy type nor an ONNX type code.") from None
    if dt.kind in "US":
        dt = np.dtype(object)
    return dt


def _strings(arr: np.ndarray) -> np.ndarray:
    """An object array of str for str, bytes or object arrays (bytes decoded as UTF-8)."""
    out = np.empty(arr.shape, dtype=object)
    flat = out.reshape(-1)
    for i, s in enumerate(arr.reshape(-1)):
        flat[i] = s.decode("utf-8", errors="surrogateescape") if isinstance(s, bytes) else str(s)
    return out


def _elem_code(dtype: np.dtype) -> int:
    from .dtypes import onnx_type

    try:
        return onnx_type(dtype)
    except KeyError:
        raise InvalidArgumentError(f"numpy dtype {dtype} has no ONNX element type.") from None


class _DLPackCapsule:
    """A bare DLPack capsule made consumable by ``numpy.from_dlpack`` (CPU memory)."""

    def __init__(self, capsule: Any):
        self._capsule = capsule

    def __dlpack__(self, **_: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class OrtValue:
    """A value as onnxruntime's ``OrtValue`` holds it: here a numpy array (a tensor), a
    :class:`SparseTensor`, a list (a sequence) or a map, always on the CPU.

    Deviations from onnxruntime: string arrays are accepted (their ``data_ptr`` and
    ``tensor_size_in_bytes`` raise); a non-CPU device raises
    :class:`~onnxrt.NotApplicableError`; ``update_inplace`` refuses another element type
    (onnxruntime copies the raw bytes); values made by ``from_dlpack`` from a bare capsule
    are read-only (numpy's rule for imported memory).
    """

    __slots__ = ("_value",)

    def __init__(self, value: Any):
        self._value = value

    # -- construction -----------------------------------------------------------------

    @classmethod
    def ortvalue_from_numpy(cls, numpy_obj: Any, /, device_type: str = "cpu", device_id: int = 0, vendor_id: int = -1) -> OrtValue:
        """Wrap a numpy array, sharing its memory (a non-contiguous array is copied first)."""
        _cpu_only("OrtValue.ortvalue_from_numpy", device_type, device_id)
        if not isinstance(numpy_obj, np.ndarray):
            raise InvalidArgumentError(f"OrtValue.ortvalue_from_numpy expects a numpy array, got {type(numpy_obj).__name__}.")
        if numpy_obj.dtype.kind in "USO":
            return cls(_strings(numpy_obj))
        _elem_code(numpy_obj.dtype)
        return cls(numpy_obj if numpy_obj.flags.c_contiguous else np.ascontiguousarray(numpy_obj))

    @classmethod
    def ortvalue_from_numpy_with_onnx_type(cls, data: Any, /, onnx_element_type: int) -> OrtValue:
        """Wrap ``data`` as a tensor of ONNX type ``onnx_element_type``: an array of that type,
        or of another type of the same item size whose bytes are reinterpreted (uint16 bits as
        bfloat16, uint8 bits as float8)."""
        if not isinstance(data, np.ndarray):
            raise InvalidArgumentError(f"OrtValue.ortvalue_from_numpy_with_onnx_type expects a numpy array, got {type(data).__name__}.")
        from .dtypes import elem_name

        target = _elem_dtype(onnx_element_type)
        if data.dtype == target or (target.kind == "O" and data.dtype.kind in "USO"):
            return cls.ortvalue_from_numpy(data)
        if target.kind == "O" or data.dtype.kind == "O" or data.dtype.itemsize != target.itemsize:
            raise InvalidArgumentError(
                f"OrtValue.ortvalue_from_numpy_with_onnx_type: an array of {data.dtype} cannot hold "
                f"{elem_name(onnx_element_type)} elements (item sizes {data.dtype.itemsize} and {target.itemsize})."
            )
        return cls(np.ascontiguousarray(data).view(target))

    @classmethod
    def ortvalue_from_shape_and_type(
        cls, shape: Any, element_type: Any, device_type: str = "cpu", device_id: int = 0, vendor_id: int = -1
    ) -> OrtValue:
        """A new tensor of ``shape`` and ``element_type`` (a numpy type or an ONNX type code),
        filled with zeros (onnxruntime leaves it uninitialised)."""
        _cpu_only("OrtValue.ortvalue_from_shape_and_type", device_type, device_id)
        dt = _elem_dtype(element_type)
        try:
            dims = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"OrtValue.ortvalue_from_shape_and_type expects a list of ints as shape, got {shape!r}.") from None
        if any(d < 0 for d in dims):
            raise InvalidArgumentError(f"OrtValue.ortvalue_from_shape_and_type: shape {list(dims)} has a negative dimension.")
        if dt.kind == "O":
            arr = np.empty(dims, dtype=object)
            arr.fill("")
            return cls(arr)
        return cls(np.zeros(dims, dtype=dt))

    @classmethod
    def ort_value_from_sparse_tensor(cls, sparse_tensor: SparseTensor) -> OrtValue:
        """Wrap a :class:`SparseTensor`."""
        if not isinstance(sparse_tensor, SparseTensor):
            raise InvalidArgumentError(f"OrtValue.ort_value_from_sparse_tensor expects a SparseTensor, got {type(sparse_tensor).__name__}.")
        return cls(sparse_tensor)

    @classmethod
    def from_dlpack(cls, data: Any, /, is_bool_tensor: bool = False) -> OrtValue:
        """A tensor over the memory of a DLPack capsule or of an object with ``__dlpack__``
        (read by ``numpy.from_dlpack``; CPU memory only). ``is_bool_tensor`` reads uint8
        memory as booleans."""
        if isinstance(data, OrtValue):
            arr = data.numpy()
        else:
            source = data if hasattr(data, "__dlpack__") else _DLPackCapsule(data)
            try:
                arr = np.from_dlpack(source)
            except (TypeError, ValueError, BufferError, RuntimeError) as e:
                raise InvalidArgumentError(f"OrtValue.from_dlpack cannot read {type(data).__name__}: {e}") from e
        if is_bool_tensor and arr.dtype == np.uint8:
            arr = arr.view(np.bool_)
        return cls(arr)

    # -- inspection -------------------------------------------------------------------

    def _tensor(self, what: str) -> np.ndarray:
        if not isinstance(self._value, np.ndarray):
            raise InvalidArgumentError(f"OrtValue.{what}: the value is a {self.data_type()}, not a tensor.")
        return self._value

    def numpy(self) -> np.ndarray:
        """The array itself (shared, not copied)."""
        return self._tensor("numpy")

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        arr = self._tensor("__array__")
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"OrtValue of {arr.dtype} cannot be read as {np.dtype(dtype)} without a copy.")
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def data_ptr(self) -> int:
        """Address of the tensor's first element."""
        arr = self._tensor("data_ptr")
        if arr.dtype.kind == "O":
            raise NotApplicableError("OrtValue.data_ptr: a string tensor holds Python objects; it has no raw data pointer.")
        return int(arr.ctypes.data)

    def device_name(self) -> str:
        """Always ``"cpu"``."""
        return "cpu"

    def shape(self) -> list[int]:
        """The tensor's shape (a sparse tensor's dense shape)."""
        if isinstance(self._value, SparseTensor):
            return self._value.dense_shape()
        return list(self._tensor("shape").shape)

    def data_type(self) -> str:
        """The type string: ``tensor(float)``, ``sparse_tensor(int64)``, ``seq(tensor(float))``."""
        from .dtypes import value_type_string

        if isinstance(self._value, SparseTensor):
            return self._value.data_type()
        return value_type_string(self._value)

    def element_type(self) -> int:
        """ONNX element type code of a tensor (of a sparse tensor's values)."""
        if isinstance(self._value, SparseTensor):
            return _elem_code(self._value._values.dtype)
        return _elem_code(self._tensor("element_type").dtype)

    def tensor_size_in_bytes(self) -> int:
        arr = self._tensor("tensor_size_in_bytes")
        if arr.dtype.kind == "O":
            raise NotApplicableError("OrtValue.tensor_size_in_bytes: a string tensor holds Python objects of no fixed size.")
        return int(arr.nbytes)

    def has_value(self) -> bool:
        """False for an empty optional."""
        return self._value is not None

    def is_tensor(self) -> bool:
        return isinstance(self._value, np.ndarray)

    def is_sparse_tensor(self) -> bool:
        return isinstance(self._value, SparseTensor)

    def is_tensor_sequence(self) -> bool:
        return isinstance(self._value, list)

    def as_sparse_tensor(self) -> SparseTensor:
        if not isinstance(self._value, SparseTensor):
            raise InvalidArgumentError(f"OrtValue.as_sparse_tensor: the value is a {self.data_type()}, not a sparse tensor.")
        return self._value

    def update_inplace(self, data: Any) -> None:
        """Copy ``data`` (a numpy array or an OrtValue of the same element type and size)
        into this tensor's memory."""
        arr = self._tensor("update_inplace")
        if isinstance(data, OrtValue):
            data = data.numpy()
        if not isinstance(data, np.ndarray):
            raise InvalidArgumentError(f"OrtValue.update_inplace: data must be a numpy.ndarray or an OrtValue, got {type(data).__name__}.")
        if data.size != arr.size:
            raise InvalidArgumentError(f"OrtValue.update_inplace: the new data has {data.size} elements, the OrtValue {arr.size}.")
        if data.dtype != arr.dtype and not (arr.dtype.kind == "O" and data.dtype.kind in "USO"):
            raise InvalidArgumentError(f"OrtValue.update_inplace: the new data is {data.dtype}, the OrtValue {arr.dtype}.")
        if not arr.flags.writeable:
            raise InvalidArgumentError("OrtValue.update_inplace: the OrtValue's memory is read-only (imported through DLPack).")
        if arr.dtype.kind == "O":
            data = _strings(data)
        np.copyto(arr, data.reshape(arr.shape))

    # -- DLPack -------------------------------------------------------------------------

    def to_dlpack(self) -> Any:
        """A DLPack capsule of the tensor (numpy's export; the memory is shared)."""
        return self._tensor("to_dlpack").__dlpack__()

    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        return self._tensor("__dlpack__").__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    def __repr__(self) -> str:
        if isinstance(self._value, np.ndarray):
            return f"OrtValue({self.data_type()}, shape={list(self._value.shape)})"
        return f"OrtValue({self.data_type()})"


class OrtSparseFormat(enum.IntEnum):
    """Sparse formats, with onnxruntime's names and codes."""

    ORT_SPARSE_UNDEFINED = 0
    ORT_SPARSE_COO = 1
    ORT_SPARSE_CSRC = 2
    ORT_SPARSE_BLOCK_SPARSE = 4


def _readonly_view(arr: np.ndarray) -> np.ndarray:
    view = arr.view()
    view.flags.writeable = False
    return view


def _indices(what: str, value: Any) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{what} must be a numpy array of integers, got {describe(value)}.")
    return value.astype(np.int64, copy=False)


def describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype} of shape {list(value.shape)}"
    return f"a {type(value).__name__}"


class SparseCooView:
    """The indices of a COO sparse tensor."""

    def __init__(self, indices: np.ndarray):
        self._indices = indices

    def indices(self) -> np.ndarray:
        """Read-only: linear indices ``[nnz]`` or coordinates ``[nnz, rank]``."""
        return _readonly_view(self._indices)


class SparseCsrView:
    """The indices of a CSR sparse tensor."""

    def __init__(self, inner: np.ndarray, outer: np.ndarray):
        self._inner = inner
        self._outer = outer

    def inner(self) -> np.ndarray:
        """Read-only column index of each value."""
        return _readonly_view(self._inner)

    def outer(self) -> np.ndarray:
        """Read-only row starts (rows + 1 entries)."""
        return _readonly_view(self._outer)


class SparseTensor:
    """A sparse tensor as onnxruntime's Python ``SparseTensor`` (COO or CSR, on the CPU).

    Numeric values and indices share the memory of the arrays given (string values are
    copied). Deviations: onnxrt checks the indices (counts, bounds, CSR row starts that
    never decrease), where onnxruntime only checks counts; ``to_cuda`` raises
    :class:`~onnxrt.NotApplicableError`; block-sparse tensors cannot be made from Python
    (nor in onnxruntime), so ``as_blocksparse_view`` always raises.
    """

    def __init__(self, fmt: OrtSparseFormat, dense_shape: list[int], values: np.ndarray, indices: tuple[np.ndarray, ...]):
        self._format = fmt
        self._shape = dense_shape
        self._values = values
        self._indices = indices

    @staticmethod
    def _common(what: str, dense_shape: Any, values: Any, ort_device: Any) -> tuple[list[int], np.ndarray]:
        if ort_device is not None:
            _cpu_only(what, ort_device, ort_device.device_id() if isinstance(ort_device, OrtDevice) else 0)
        try:
            shape = [int(d) for d in dense_shape]
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"{what}: dense_shape must be a list of ints, got {dense_shape!r}.") from None
        if any(d < 0 for d in shape):
            raise InvalidArgumentError(f"{what}: dense_shape {shape} has a negative dimension.")
        if not isinstance(values, np.ndarray) or values.ndim != 1:
            raise InvalidArgumentError(f"{what}: values must be a 1-D numpy array, got {describe(values)}.")
        if values.dtype.kind in "USO":
            values = _strings(values)
        else:
            _elem_code(values.dtype)
        return shape, values

    @classmethod
    def sparse_coo_from_numpy(cls, dense_shape: Any, values: Any, coo_indices: Any, ort_device: Any) -> SparseTensor:
        """COO: ``coo_indices`` holds the linear index of each value (``[nnz]``) or its
        coordinates (``[nnz, rank]``)."""
        what = "SparseTensor.sparse_coo_from_numpy"
        shape, values = cls._common(what, dense_shape, values, ort_device)
        idx = _indices(f"{what}: coo_indices", coo_indices)
        nnz = values.shape[0]
        if idx.ndim == 1 and idx.shape[0] == nnz:
            bound = math.prod(shape)
            if nnz and (idx.min() < 0 or idx.max() >= bound):
                raise InvalidArgumentError(f"{what}: linear indices must lie in [0, {bound}) for dense shape {shape}.")
        elif idx.ndim == 2 and idx.shape == (nnz, len(shape)):
            if nnz and ((idx < 0).any() or (idx >= np.array(shape, dtype=np.int64)).any()):
                raise InvalidArgumentError(f"{what}: coordinates must lie inside dense shape {shape}.")
        else:
            raise InvalidArgumentError(
                f"{what}: coo_indices must have shape [{nnz}] (linear) or [{nnz}, {len(shape)}] (coordinates) "
                f"for {nnz} values, got {list(idx.shape)}."
            )
        return cls(OrtSparseFormat.ORT_SPARSE_COO, shape, values, (idx,))

    @classmethod
    def sparse_csr_from_numpy(
        cls, dense_shape: Any, values: Any, inner_indices: Any, outer_indices: Any, ort_device: Any
    ) -> SparseTensor:
        """CSR of a 2-D tensor: ``inner_indices`` the column of each value, ``outer_indices``
        where each row starts in ``values`` (rows + 1 entries)."""
        what = "SparseTensor.sparse_csr_from_numpy"
        shape, values = cls._common(what, dense_shape, values, ort_device)
        if len(shape) != 2:
            raise InvalidArgumentError(f"{what}: CSR holds 2-D tensors, dense_shape is {shape}.")
        inner = _indices(f"{what}: inner_indices", inner_indices)
        outer = _indices(f"{what}: outer_indices", outer_indices)
        nnz = values.shape[0]
        if inner.shape != (nnz,):
            raise InvalidArgumentError(f"{what}: inner_indices must have {nnz} entries (one per value), got {list(inner.shape)}.")
        if outer.shape != (shape[0] + 1,):
            raise InvalidArgumentError(f"{what}: outer_indices must have {shape[0] + 1} entries (rows + 1), got {list(outer.shape)}.")
        if outer[0] != 0 or outer[-1] != nnz or (np.diff(outer) < 0).any():
            raise InvalidArgumentError(f"{what}: outer_indices must start at 0, never decrease and end at {nnz}, got {outer.tolist()}.")
        if nnz and (inner.min() < 0 or inner.max() >= shape[1]):
            raise InvalidArgumentError(f"{what}: inner_indices must lie in [0, {shape[1]}).")
        return cls(OrtSparseFormat.ORT_SPARSE_CSRC, shape, values, (inner, outer))

    def values(self) -> np.ndarray:
        """Read-only view of the values."""
        return _readonly_view(self._values)

    def as_coo_view(self) -> SparseCooView:
        if self._format != OrtSparseFormat.ORT_SPARSE_COO:
            raise InvalidArgumentError(f"SparseTensor.as_coo_view: this sparse tensor is {self._format.name}, not COO.")
        return SparseCooView(self._indices[0])

    def as_csrc_view(self) -> SparseCsrView:
        if self._format != OrtSparseFormat.ORT_SPARSE_CSRC:
            raise InvalidArgumentError(f"SparseTensor.as_csrc_view: this sparse tensor is {self._format.name}, not CSR.")
        return SparseCsrView(*self._indices)

    def as_blocksparse_view(self) -> Any:
        raise InvalidArgumentError(f"SparseTensor.as_blocksparse_view: this sparse tensor is {self._format.name}, not block sparse.")

    def format(self) -> OrtSparseFormat:
        return self._format

    def dense_shape(self) -> list[int]:
        return list(self._shape)

    def data_type(self) -> str:
        """``sparse_tensor(float)`` and so on."""
        from .dtypes import elem_name

        return f"sparse_tensor({elem_name(_elem_code(self._values.dtype))})"

    def device_name(self) -> str:
        """Always ``"cpu"``."""
        return "cpu"

    def to_cuda(self, ort_device: Any) -> SparseTensor:
        """Not applicable: onnxrt has no CUDA device."""
        raise NotApplicableError("SparseTensor.to_cuda: onnxrt computes on the CPU only; there is no CUDA device to copy to.")

    def __repr__(self) -> str:
        return f"SparseTensor({self._format.name}, {self.data_type()}, dense_shape={self._shape}, nnz={self._values.shape[0]})"


class SparseFeed:
    """What a graph input declared as a sparse tensor accepts, and the check of its feeds.

    onnxruntime's rules: such an input takes a :class:`SparseTensor` (bare or in an
    :class:`OrtValue`), of the declared element type and shape, and nothing else; a dense
    input never takes one. No ONNX operator reads a sparse tensor, so a graph can only pass
    it to its outputs or to a custom operator; a standard operator fed one raises
    ``InvalidTypeError`` naming the node. Before the run, every part is checked as the ONNX
    specification asks of a sparse tensor (``dtypes.sparse_indices``): indices inside the
    dense shape, one per value, strictly ascending without duplicates (CSR rows ascending
    inside each row), and the dense form no larger than ``SessionOptions.max_tensor_bytes``
    (the rule of sparse initializers); each failure is ``InvalidFeedError`` naming the
    input. The graph gets a copy: the caller's arrays can change after the run starts
    without changing it, and an output is never the caller's own tensor.
    """

    __slots__ = ("name", "type_str", "elem_type", "shape", "limit")

    def __init__(self, name: str, type_str: str, tp: Any, limit: int | None = None):
        from .dtypes import type_shape

        self.name = name
        self.type_str = type_str
        st = tp.sparse_tensor_type
        self.elem_type = int(st.elem_type)
        # type_shape reads tensor types: the sparse type's shape has the same layout
        shaped = type(tp)()
        shaped.tensor_type.elem_type = st.elem_type
        if st.HasField("shape"):
            shaped.tensor_type.shape.CopyFrom(st.shape)
        self.shape = type_shape(shaped)
        self.limit = limit

    def check(self, value: Any) -> SparseTensor:
        """The validated copy of the feed ``value`` (``InvalidFeedError`` otherwise)."""
        from .dtypes import elem_name, same_dtype, sparse_indices
        from .errors import InvalidFeedError

        name, label = self.name, f"Input {self.name!r} ({self.type_str})"
        if isinstance(value, OrtValue):
            value = value._value
        if not isinstance(value, SparseTensor):
            raise InvalidFeedError(
                f"{label} expects a sparse tensor, got {describe(value)}; build one with "
                f"SparseTensor.sparse_coo_from_numpy or sparse_csr_from_numpy."
            )
        values, shape = value._values, list(value._shape)
        if not isinstance(values, np.ndarray) or values.ndim != 1:
            raise InvalidFeedError(f"{label}: the values must be a 1-D array, got {describe(values)}.")
        if self.elem_type and not same_dtype(values.dtype, self.elem_type):
            raise InvalidFeedError(
                f"{label} expects values of element type {elem_name(self.elem_type)}, got an array of dtype {values.dtype}."
            )
        if any(type(d) is not int or d < 0 for d in shape):
            raise InvalidFeedError(f"{label}: dense shape {shape} must hold non-negative integers.")
        if self.shape is not None:
            if len(self.shape) != len(shape) or any(isinstance(w, int) and w != g for w, g in zip(self.shape, shape)):
                raise InvalidFeedError(f"{label} expects dense shape {self.shape}, got {shape}.")
        # the dense form's size, in Python integers: refused before anything is built
        itemsize = values.dtype.itemsize if values.dtype.kind not in "OUS" else 8
        nbytes = math.prod(shape) * itemsize
        if self.limit is not None and nbytes > self.limit:
            raise InvalidFeedError(
                f"{label}: dense shape {shape} of {values.dtype} needs {nbytes} bytes, above the limit of "
                f"{self.limit} bytes (SessionOptions.max_tensor_bytes, or the machine's physical memory when unset)."
            )
        nnz = values.shape[0]
        if value._format == OrtSparseFormat.ORT_SPARSE_COO:
            (raw,) = value._indices
            sparse_indices(np.asarray(raw), shape, nnz, label, InvalidFeedError)
            indices: tuple[np.ndarray, ...] = (np.array(raw, dtype=np.int64),)
        elif value._format == OrtSparseFormat.ORT_SPARSE_CSRC:
            inner, outer = (np.asarray(a) for a in value._indices)
            if len(shape) != 2 or inner.shape != (nnz,) or outer.shape != (shape[0] + 1,):
                raise InvalidFeedError(
                    f"{label}: CSR needs a 2-D dense shape, {nnz} inner indices and rows + 1 outer indices; "
                    f"got dense shape {shape}, inner {list(inner.shape)}, outer {list(outer.shape)}."
                )
            if inner.dtype.kind not in "iu" or outer.dtype.kind not in "iu":
                raise InvalidFeedError(f"{label}: CSR indices must be integers, got {inner.dtype} and {outer.dtype}.")
            starts = np.diff(outer)
            if outer[0] != 0 or outer[-1] != nnz or (starts < 0).any():
                raise InvalidFeedError(f"{label}: outer indices must start at 0, never decrease and end at {nnz}, got {outer.tolist()}.")
            rows = np.repeat(np.arange(shape[0], dtype=np.int64), starts)
            sparse_indices(np.stack([rows, inner.astype(np.int64)], axis=1), shape, nnz, label, InvalidFeedError)
            indices = (np.array(inner, dtype=np.int64), np.array(outer, dtype=np.int64))
        else:
            raise InvalidFeedError(f"{label}: a {value._format.name} sparse tensor cannot be fed.")
        copied = values.copy() if values.dtype.kind != "O" else np.array(values, dtype=object)
        return SparseTensor(value._format, shape, copied, indices)


# ------------------------------------------------------------------------------------------
# memory descriptions: onnxruntime's OrtMemoryInfo, its enums and OrtArenaCfg
# ------------------------------------------------------------------------------------------


class OrtAllocatorType(enum.IntEnum):
    """Allocator kinds, with onnxruntime's names and values."""

    INVALID = -1
    ORT_DEVICE_ALLOCATOR = 0
    ORT_ARENA_ALLOCATOR = 1


class OrtMemType(enum.IntEnum):
    """Memory kinds of an ``OrtMemoryInfo``, with onnxruntime's names and values
    (``CPU`` is an alias of ``CPU_OUTPUT``)."""

    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0


class OrtDeviceMemoryType(enum.IntEnum):
    """A device's memory kinds, with onnxruntime's names and values."""

    DEFAULT = 0
    HOST_ACCESSIBLE = 5


class OrtMemoryInfoDeviceType(enum.IntEnum):
    """Device kinds of ``OrtMemoryInfo.create_v2``, with onnxruntime's names and values."""

    CPU = 0
    GPU = 1
    FPGA = 2
    NPU = 3


#: the names OrtMemoryInfo(...) takes, as onnxruntime's CreateMemoryInfo: (device type, vendor, device memory type)
_MEMORY_NAMES = {
    "Cpu": (0, OrtDeviceVendorId.NONE, OrtDeviceMemoryType.DEFAULT),
    "Cuda": (1, OrtDeviceVendorId.NVIDIA, OrtDeviceMemoryType.DEFAULT),
    "CudaPinned": (1, OrtDeviceVendorId.NVIDIA, OrtDeviceMemoryType.HOST_ACCESSIBLE),
    "DML": (1, OrtDeviceVendorId.MICROSOFT, OrtDeviceMemoryType.DEFAULT),
    "QnnHtpShared": (1, OrtDeviceVendorId.QUALCOMM, OrtDeviceMemoryType.HOST_ACCESSIBLE),
}


def _enum_arg(what: str, cls: type[enum.IntEnum], value: Any) -> Any:
    if isinstance(value, cls):
        return value
    raise InvalidArgumentError(
        f"{what} expects a member of onnxrt.{cls.__name__} ({', '.join(cls.__members__)}), got {type(value).__name__} {value!r}."
    )


def _int_arg(what: str, value: Any) -> int:
    import operator

    try:
        return int(operator.index(value))
    except TypeError:
        raise InvalidArgumentError(f"{what} expects an int, got {type(value).__name__} {value!r}.") from None


class OrtMemoryInfo:
    """Where a value's memory lives, as onnxruntime's ``OrtMemoryInfo(name, allocator_type,
    device_id, mem_type)`` and ``OrtMemoryInfo.create_v2(...)`` describe it.

    ``name`` is one of onnxruntime's names (``"Cpu"``, ``"Cuda"``, ``"CudaPinned"``,
    ``"DML"``, ``"QnnHtpShared"``); another raises :class:`~onnxrt.InvalidArgumentError`
    ("Specified device is not supported"), as in onnxruntime. Non-CPU memory can be described
    but onnxrt keeps every value in CPU memory (numpy arrays): sessions report ``"Cpu"``.
    """

    __slots__ = ("name", "allocator_type", "device_id", "mem_type", "device_mem_type", "device_vendor_id", "_device_type", "alignment")

    def __init__(self, name: str, allocator_type: OrtAllocatorType, device_id: int, mem_type: OrtMemType):
        if not isinstance(name, str):
            raise InvalidArgumentError(f"OrtMemoryInfo: name is a str, got {type(name).__name__} {name!r}.")
        known = _MEMORY_NAMES.get(name)
        if known is None:
            raise InvalidArgumentError(
                f"OrtMemoryInfo: Specified device is not supported: {name!r}; the names are {list(_MEMORY_NAMES)} "
                f"(or use OrtMemoryInfo.create_v2)."
            )
        device_type, vendor, device_mem = known
        self.name = name
        self.allocator_type = _enum_arg("OrtMemoryInfo: allocator_type", OrtAllocatorType, allocator_type)
        self.mem_type = _enum_arg("OrtMemoryInfo: mem_type", OrtMemType, mem_type)
        self.device_id = 0 if device_type == 0 else _int_arg("OrtMemoryInfo: device_id", device_id)
        self.device_mem_type = device_mem
        self.device_vendor_id = int(vendor)
        self._device_type = device_type
        self.alignment = 0

    @classmethod
    def create_v2(
        cls,
        name: str,
        device_type: OrtMemoryInfoDeviceType,
        vendor_id: int,
        device_id: int,
        device_mem_type: OrtDeviceMemoryType,
        alignment: int,
        allocator_type: OrtAllocatorType,
    ) -> OrtMemoryInfo:
        """A memory description from its parts (onnxruntime's ``CreateMemoryInfo_V2``): any
        name; ``mem_type`` is ``DEFAULT`` for a device's default memory and ``CPU_OUTPUT`` for
        host-accessible memory, as in onnxruntime."""
        if not isinstance(name, str):
            raise InvalidArgumentError(f"OrtMemoryInfo.create_v2: name is a str, got {type(name).__name__} {name!r}.")
        self = cls.__new__(cls)
        self.name = name
        self._device_type = int(_enum_arg("OrtMemoryInfo.create_v2: device_type", OrtMemoryInfoDeviceType, device_type))
        self.device_vendor_id = _int_arg("OrtMemoryInfo.create_v2: vendor_id", vendor_id)
        self.device_id = _int_arg("OrtMemoryInfo.create_v2: device_id", device_id)
        self.device_mem_type = _enum_arg("OrtMemoryInfo.create_v2: device_mem_type", OrtDeviceMemoryType, device_mem_type)
        self.alignment = _int_arg("OrtMemoryInfo.create_v2: alignment", alignment)
        self.allocator_type = _enum_arg("OrtMemoryInfo.create_v2: allocator_type", OrtAllocatorType, allocator_type)
        self.mem_type = OrtMemType.DEFAULT if self.device_mem_type == OrtDeviceMemoryType.DEFAULT else OrtMemType.CPU_OUTPUT
        return self

    def __repr__(self) -> str:
        return (
            f"OrtMemoryInfo(name={self.name!r}, allocator_type={self.allocator_type.name}, device_id={self.device_id}, "
            f"mem_type={self.mem_type.name}, device_mem_type={self.device_mem_type.name}, vendor={self.device_vendor_id:#x})"
        )


def cpu_memory_info() -> OrtMemoryInfo:
    """The memory every onnxrt value lives in: numpy's, on the CPU (as onnxruntime's CPU
    provider describes its arena)."""
    return OrtMemoryInfo("Cpu", OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, OrtMemType.DEFAULT)


_ARENA_KEYS = (
    "max_mem",
    "arena_extend_strategy",
    "initial_chunk_size_bytes",
    "max_dead_bytes_per_chunk",
    "initial_growth_chunk_size_bytes",
    "max_power_of_two_extend_bytes",
)


class OrtArenaCfg:
    """An arena allocator's configuration, as onnxruntime's: ``OrtArenaCfg(max_mem,
    arena_extend_strategy, initial_chunk_size_bytes, max_dead_bytes_per_chunk)`` or
    ``OrtArenaCfg({key: value})`` with onnxruntime's keys; a value left out is -1 (the
    default). An unknown key raises :class:`~onnxrt.InvalidArgumentError` ("Invalid
    OrtArenaCfg option"). numpy allocates onnxrt's arrays: the values are kept, not used."""

    __slots__ = _ARENA_KEYS

    def __init__(self, *args: Any):
        for key in _ARENA_KEYS:
            object.__setattr__(self, key, -1)
        if len(args) == 1 and isinstance(args[0], dict):
            for key, value in args[0].items():
                if key not in _ARENA_KEYS:
                    raise InvalidArgumentError(f"Invalid OrtArenaCfg option: {key}; the options are {list(_ARENA_KEYS)}.")
                setattr(self, key, value)
        elif len(args) == 4:
            for key, value in zip(_ARENA_KEYS, args):
                setattr(self, key, value)
        else:
            raise InvalidArgumentError(
                "OrtArenaCfg takes (max_mem, arena_extend_strategy, initial_chunk_size_bytes, max_dead_bytes_per_chunk) "
                f"or a dict of options, got {len(args)} arguments."
            )

    def __setattr__(self, key: str, value: Any) -> None:
        if key not in _ARENA_KEYS:
            raise UnknownOptionError(f"OrtArenaCfg has no attribute {key!r}; its attributes are {list(_ARENA_KEYS)}.")
        object.__setattr__(self, key, _int_arg(f"OrtArenaCfg.{key}", value))

    def __repr__(self) -> str:
        return "OrtArenaCfg(" + ", ".join(f"{k}={getattr(self, k)}" for k in _ARENA_KEYS) + ")"
