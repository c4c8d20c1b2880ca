"""LoRA adapters: onnxruntime's AdapterFormat and LoraAdapter over its adapter file format (FlatBuffers, identifier TORT)."""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np

from .errors import AdapterFormatError, InvalidArgumentError

#: the adapter format version onnxrt writes and reads (onnxruntime's kAdapterFormatVersion)
FORMAT_VERSION = 1
_IDENTIFIER = b"TORT"


# ------------------------------------------------------------------------------------------
# reading FlatBuffers tables (the schema: Adapter {format_version, adapter_version,
# model_version, parameters: [Parameter {name, dims: [int64], data_type, raw_data: [uint8]}]})
# ------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, buf: Any, what: str):
        self.buf = memoryview(buf).cast("B")
        self.what = what

    def _u32(self, pos: int) -> int:
        if pos < 0 or pos + 4 > len(self.buf):
            raise AdapterFormatError(f"{self.what}: truncated adapter file (an offset points at {pos}, the file has {len(self.buf)} bytes).")
        return struct.unpack_from("<I", self.buf, pos)[0]

    def field(self, table: int, index: int) -> int | None:
        """The position of field ``index`` of the table at ``table``, None when absent."""
        vtable = table - struct.unpack_from("<i", self.buf, table)[0]
        if vtable < 0 or vtable + 4 > len(self.buf):
            raise AdapterFormatError(f"{self.what}: corrupt adapter file (a table's vtable lies outside the file).")
        vt_size = struct.unpack_from("<H", self.buf, vtable)[0]
        slot = 4 + 2 * index
        if slot + 2 > vt_size:
            return None
        offset = struct.unpack_from("<H", self.buf, vtable + slot)[0]
        return table + offset if offset else None

    def int32(self, table: int, index: int, default: int = 0) -> int:
        pos = self.field(table, index)
        return default if pos is None else struct.unpack_from("<i", self.buf, pos)[0]

    def target(self, table: int, index: int) -> int | None:
        pos = self.field(table, index)
        return None if pos is None else pos + self._u32(pos)

    def vector(self, start: int | None, itemsize: int) -> tuple[int, int]:
        """(position of the first element, length) of the vector at ``start``."""
        if start is None:
            return 0, 0
        n = self._u32(start)
        if start + 4 + n * itemsize > len(self.buf):
            raise AdapterFormatError(f"{self.what}: truncated adapter file (a vector of {n} elements runs past its end).")
        return start + 4, n


def _parse(buf: Any, what: str) -> tuple[int, int, int, dict[str, np.ndarray]]:
    """(format version, adapter version, model version, parameters) of an adapter file's bytes;
    the arrays are read-only views over ``buf``."""
    from .ortvalue import _elem_dtype

    r = _Reader(buf, what)
    if len(r.buf) < 8 or bytes(r.buf[4:8]) != _IDENTIFIER:
        raise AdapterFormatError(f"{what}: not an onnxruntime adapter file (no 'TORT' identifier at bytes 4..8).")
    root = r._u32(0)
    fmt = r.int32(root, 0)
    if fmt != FORMAT_VERSION:
        raise AdapterFormatError(f"{what}: adapter format version {fmt} is not supported (onnxrt reads version {FORMAT_VERSION}).")
    params: dict[str, np.ndarray] = {}
    first, count = r.vector(r.target(root, 3), 4)
    for i in range(count):
        pos = first + 4 * i
        table = pos + r._u32(pos)
        name_at, name_len = r.vector(r.target(table, 0), 1)
        name = bytes(r.buf[name_at : name_at + name_len]).decode("utf-8")
        dims_at, ndims = r.vector(r.target(table, 1), 8)
        if not ndims:  # onnxruntime refuses them too
            raise AdapterFormatError(f"{what}: parameter {name!r} has no dimensions (a LoRA parameter is at least 1-D).")
        dims = [int(d) for d in np.frombuffer(r.buf, dtype="<i8", count=ndims, offset=dims_at)]
        code = r.int32(table, 2)
        try:
            dtype = _elem_dtype(code)
        except Exception:  # noqa: BLE001  (re-raised as the file's error)
            raise AdapterFormatError(f"{what}: parameter {name!r} has element type {code}, which onnxrt cannot hold.") from None
        if dtype.kind == "O":
            raise AdapterFormatError(f"{what}: parameter {name!r} is a string tensor; adapters hold numeric tensors only.")
        data_at, nbytes = r.vector(r.target(table, 3), 1)
        size = int(np.prod(dims, dtype=np.int64))
        if nbytes != size * dtype.itemsize:
            raise AdapterFormatError(
                f"{what}: parameter {name!r} of shape {dims} and type {dtype} needs {size * dtype.itemsize} bytes, the file holds {nbytes}."
            )
        arr = np.frombuffer(r.buf, dtype=dtype, count=size, offset=data_at).reshape(dims)  # little-endian hosts
        params[name] = arr
    return fmt, r.int32(root, 1), r.int32(root, 2), params


# ------------------------------------------------------------------------------------------
# writing: objects laid out front to back, every offset pointing forward as FlatBuffers needs
# ------------------------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()
        self.patches: list[tuple[int, str]] = []  # (position of a uoffset, key of its target)
        self.places: dict[str, int] = {}

    def align(self, n: int, shift: int = 0) -> None:
        """Pad so that ``len(out) + shift`` is a multiple of ``n``."""
        self.out += b"\0" * ((-(len(self.out) + shift)) % n)

    def table(self, key: str, fields: list[tuple[str, Any]]) -> None:
        """A vtable then its table: fields are ('i', int32) or ('o', key of the target)."""
        self.align(4)
        vt = len(self.out)
        size = 4 + 4 * len(fields)
        self.out += struct.pack(f"<HH{len(fields)}H", 4 + 2 * len(fields), size, *(4 + 4 * i for i in range(len(fields))))
        self.align(4)
        table = len(self.out)
        self.places[key] = table
        self.out += struct.pack("<i", table - vt)
        for kind, value in fields:
            if kind == "i":
                self.out += struct.pack("<i", value)
            else:
                self.patches.append((len(self.out), value))
                self.out += b"\0\0\0\0"

    def vector(self, key: str, data: bytes, count: int, align: int = 4) -> None:
        self.align(max(align, 4), 4)  # the elements, after the 4-byte length, start aligned
        self.places[key] = len(self.out)
        self.out += struct.pack("<I", count) + data

    def offsets(self, key: str, targets: list[str]) -> None:
        self.align(4)
        self.places[key] = len(self.out)
        self.out += struct.pack("<I", len(targets))
        for t in targets:
            self.patches.append((len(self.out), t))
            self.out += b"\0\0\0\0"

    def finish(self) -> bytes:
        for pos, key in self.patches:
            struct.pack_into("<I", self.out, pos, self.places[key] - pos)
        return bytes(self.out)


def _serialize(adapter_version: int, model_version: int, params: dict[str, np.ndarray]) -> bytes:
    from .ortvalue import _elem_code

    w = _Writer()
    w.out += b"\0\0\0\0" + _IDENTIFIER
    w.patches.append((0, "root"))
    w.table("root", [("i", FORMAT_VERSION), ("i", adapter_version), ("i", model_version), ("o", "params")])
    names = list(params)
    w.offsets("params", [f"p{i}" for i in range(len(names))])
    for i, name in enumerate(names):
        w.table(f"p{i}", [("o", f"n{i}"), ("o", f"d{i}"), ("i", _elem_code(params[name].dtype)), ("o", f"r{i}")])
    for i, name in enumerate(names):
        arr = np.require(params[name], requirements="C")  # (ascontiguousarray makes a 0-d array 1-d)
        encoded = name.encode("utf-8")
        w.vector(f"n{i}", encoded + b"\0", len(encoded))
        w.vector(f"d{i}", np.asarray(arr.shape, dtype="<i8").tobytes(), arr.ndim, align=8)
        w.vector(f"r{i}", arr.tobytes(), arr.nbytes, align=8)
    return w.finish()


def _tensor(what: str, name: Any, value: Any) -> np.ndarray:
    from .ortvalue import OrtValue

    if not isinstance(name, str):
        raise InvalidArgumentError(f"{what}: parameter names are str, got {type(name).__name__} {name!r}.")
    if isinstance(value, OrtValue):
        if not value.is_tensor():
            raise InvalidArgumentError(f"{what}: parameter {name!r} is not a dense tensor.")
        value = value.numpy()
    if not isinstance(value, np.ndarray):
        raise InvalidArgumentError(f"{what}: parameter {name!r} must be an OrtValue or a numpy array, got {type(value).__name__}.")
    if value.dtype.kind in "OUS":
        raise InvalidArgumentError(f"{what}: parameter {name!r} is a string tensor; adapters hold numeric tensors only.")
    if value.ndim == 0:
        raise InvalidArgumentError(f"{what}: parameter {name!r} is a scalar; a LoRA parameter is at least 1-D (onnxruntime reads no other).")
    return value


def _read_file(path: Any, what: str) -> Any:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise InvalidArgumentError(f"{what} expects a file path, got {type(path).__name__} {path!r}.")
    try:
        if os.path.getsize(path) == 0:
            raise AdapterFormatError(f"{what}: {path!r} is empty, not an onnxruntime adapter file.")
        return np.memmap(path, dtype=np.uint8, mode="r")
    except OSError as e:
        raise AdapterFormatError(f"{what}: cannot read the adapter file {path!r}: {e}") from None


class AdapterFormat:
    """onnxruntime's adapter file (LoRA parameters): build one with ``set_adapter_version``,
    ``set_model_version`` and ``set_parameters`` then ``export_adapter(path)``, or read one
    with ``AdapterFormat.read_adapter(path)``. The file format is onnxruntime's (FlatBuffers,
    identifier ``TORT``, format version 1): files onnxrt writes load in onnxruntime and the
    other way round."""

    def __init__(self) -> None:
        self._format_version = FORMAT_VERSION
        self._adapter_version = 0
        self._model_version = 0
        self._params: dict[str, np.ndarray] = {}

    def get_format_version(self) -> int:
        return self._format_version

    def get_adapter_version(self) -> int:
        return self._adapter_version

    def set_adapter_version(self, adapter_version: int) -> None:
        self._adapter_version = _int32("AdapterFormat.set_adapter_version", adapter_version)

    def get_model_version(self) -> int:
        return self._model_version

    def set_model_version(self, model_version: int) -> None:
        self._model_version = _int32("AdapterFormat.set_model_version", model_version)

    def set_parameters(self, params: dict[str, Any]) -> None:
        """The parameters to export: name -> :class:`~onnxrt.OrtValue` (or numpy array) of a
        numeric tensor."""
        if not isinstance(params, dict):
            raise InvalidArgumentError(f"AdapterFormat.set_parameters expects a dict name -> OrtValue, got {type(params).__name__}.")
        self._params = {n: _tensor("AdapterFormat.set_parameters", n, v) for n, v in params.items()}

    def get_parameters(self) -> dict[str, Any]:
        """name -> :class:`~onnxrt.OrtValue`; on a read adapter, read-only views over the file."""
        from .ortvalue import OrtValue

        return {n: OrtValue(v) for n, v in self._params.items()}

    def export_adapter(self, file_path: Any) -> None:
        """Write the adapter file at ``file_path``."""
        if isinstance(file_path, os.PathLike):
            file_path = os.fspath(file_path)
        if not isinstance(file_path, str):
            raise InvalidArgumentError(f"AdapterFormat.export_adapter expects a file path, got {type(file_path).__name__}.")
        data = _serialize(self._adapter_version, self._model_version, self._params)
        with open(file_path, "wb") as f:
            f.write(data)

    @staticmethod
    def read_adapter(file_path: Any) -> AdapterFormat:
        """Read an adapter file (onnxruntime's or onnxrt's); the parameters stay in the file,
        mapped in memory."""
        what = "AdapterFormat.read_adapter"
        fmt, adapter_version, model_version, params = _parse(_read_file(file_path, what), f"{what}({file_path!r})")
        self = AdapterFormat()
        self._format_version, self._adapter_version, self._model_version, self._params = fmt, adapter_version, model_version, params
        return self


class LoraAdapter:
    """A LoRA adapter loaded from an adapter file (``Load(path)``, onnxruntime's method
    name); made active for a run with ``RunOptions.add_active_adapter(adapter)``: its
    parameters are fed as the model's inputs of the same names (a feed given to ``run`` for
    the same name wins)."""

    def __init__(self) -> None:
        self._params: dict[str, np.ndarray] = {}
        self._loaded = False

    def Load(self, file_path: Any) -> None:  # noqa: N802  (onnxruntime's name)
        """Map the adapter file in memory and read its parameters."""
        what = "LoraAdapter.Load"
        _, _, _, self._params = _parse(_read_file(file_path, what), f"{what}({file_path!r})")
        self._loaded = True

    @property
    def parameters(self) -> dict[str, np.ndarray]:
        """name -> read-only array (views over the mapped file)."""
        return dict(self._params)


def _int32(what: str, value: Any) -> int:
    import operator

    try:
        number = operator.index(value)
    except TypeError:
        raise InvalidArgumentError(f"{what} expects an int, got {type(value).__name__} {value!r}.") from None
    if not -(2**31) <= number < 2**31:
        raise InvalidArgumentError(f"{what} expects a 32-bit int, got {number}.")
    return int(number)
