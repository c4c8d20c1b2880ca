"""Loading models: paths, bytes, file objects and protos; version checks; safe external data."""

from __future__ import annotations

import os
import stat
from typing import IO, Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto, TensorProto, defs

from .dtypes import np_dtype, raw_nbytes, sparse_to_dense, to_array
from .errors import GraphError, ModelLoadError, SecurityError

ModelSource = str | os.PathLike | bytes | bytearray | memoryview | ModelProto | IO[bytes]

#: newest IR version and ai.onnx opset this runtime understands
MAX_IR_VERSION = onnx.IR_VERSION
MAX_OPSET = defs.onnx_opset_version()


def load_model(model: Any) -> tuple[ModelProto, str | None]:
    """Read a model from any accepted source; returns the proto and the folder external data lives in."""
    if isinstance(model, ModelProto):
        return model, None
    if isinstance(model, str | os.PathLike):
        path = os.fspath(model)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise ModelLoadError(f"Model file {path!r} does not exist.") from None
        except IsADirectoryError:
            raise ModelLoadError(f"Model path {path!r} is a directory, not a model file.") from None
        except OSError as e:
            raise ModelLoadError(f"Model file {path!r} cannot be read: {e.strerror or e}.") from e
        return _parse(data, repr(path)), os.path.dirname(os.path.abspath(path))
    if isinstance(model, bytes | bytearray | memoryview):
        return _parse(bytes(model), "the given bytes"), None
    read = getattr(model, "read", None)
    if callable(read):
        data = read()
        if isinstance(data, str):
            raise ModelLoadError("The model file object is opened in text mode; open it with 'rb'.")
        name = getattr(model, "name", None)
        base = os.path.dirname(os.path.abspath(name)) if isinstance(name, str) else None
        return _parse(data, repr(name) if name else "the given file object"), base
    raise ModelLoadError(
        f"Cannot load a model from a {type(model).__name__}; expected a path, bytes, "
        f"a binary file object or an onnx.ModelProto."
    )


def _parse(data: bytes, what: str) -> ModelProto:
    if not data:
        raise ModelLoadError(f"Model {what} is empty.")
    proto = ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise ModelLoadError(f"Model {what} is not a valid ONNX protobuf ({e}).") from None
    if not proto.HasField("graph"):
        raise ModelLoadError(f"Model {what} holds no graph: it is not an ONNX model or it is truncated.")
    return proto


def check_versions(model: ModelProto) -> dict[str, int]:
    """Check IR version, opsets and that every text field is UTF-8; return the domain -> opset map (``""`` for ai.onnx)."""
    check_text(model)
    if model.ir_version > MAX_IR_VERSION:
        raise ModelLoadError(
            f"Model IR version {model.ir_version} is newer than onnxrt supports (at most {MAX_IR_VERSION})."
        )
    opsets: dict[str, int] = {}
    for imp in model.opset_import:
        dom = "" if imp.domain in ("", "ai.onnx") else imp.domain
        opsets[dom] = int(imp.version)
    if not model.opset_import:
        opsets[""] = 1  # IR version 1 models carry no opset_import
    if opsets.get("", 0) > MAX_OPSET:
        raise ModelLoadError(
            f"Model imports opset {opsets['']} of the ai.onnx domain; onnxrt supports up to {MAX_OPSET}."
        )
    return opsets


def load_limit(options: Any = None) -> int:
    """Byte cap of one tensor decoded at load (initializer, constant, sparse tensor's dense form):
    ``SessionOptions.max_tensor_bytes`` when set, never above the machine's physical memory."""
    from .ops_cpu._alloc import PHYSICAL_LIMIT

    cap = getattr(options, "max_tensor_bytes", None)
    return PHYSICAL_LIMIT if cap is None else min(int(cap), PHYSICAL_LIMIT)


def _external_int(what: str, info: dict[str, str], key: str) -> int | None:
    text = info.get(key)
    if not text:
        return None
    # int() would also take " 1_0" or "+4"; a byte count is plain decimal digits
    if not (isinstance(text, str) and text.isascii() and text.isdigit()):
        raise ModelLoadError(
            f"{what}: external-data {key} {text!r} is not a non-negative whole number of bytes."
        )
    return int(text)


def _external_path(tensor: TensorProto, base_dir: str | None, what: str) -> tuple[str, int, int | None]:
    info: dict[str, str] = {}
    for e in tensor.external_data:
        if not isinstance(e.key, str) or not isinstance(e.value, str):
            raise ModelLoadError(f"{what}: external-data entry {e.key!r} is not valid UTF-8.")
        info[e.key] = e.value
    location = info.get("location", "")
    if not location:
        raise ModelLoadError(f"{what} uses external data without a location.")
    if "\0" in location:
        raise ModelLoadError(f"{what}: external-data location {location!r} holds a NUL character.")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or (len(location) > 1 and location[1] == ":"):
        raise SecurityError(
            f"{what} names external data by the absolute path {location!r}; "
            f"only paths inside the model's folder are allowed."
        )
    base = os.path.realpath(base_dir or os.getcwd())
    full = os.path.realpath(os.path.join(base, location))
    if os.path.commonpath([base, full]) != base:
        raise SecurityError(
            f"{what} names external data {location!r}, which resolves to {full!r}, "
            f"outside the model's folder {base!r}."
        )
    offset = _external_int(what, info, "offset") or 0
    length = _external_int(what, info, "length")
    return full, offset, length


def _not_regular(what: str, path: str, mode: int) -> SecurityError:
    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else "a device or socket"
    return SecurityError(
        f"{what} names external data {path!r}, which is {kind}, not a regular file; "
        f"external data is read only from regular files."
    )


def _checked_region(tensor: TensorProto, base_dir: str | None, limit: int | None, what: str, use):
    """Open an external tensor's file (a regular file inside ``base_dir`` only), check its
    offset and length against the file's size and the length against the tensor's shape and
    type and ``limit``, then return ``use(file, path, offset, length)``: nothing is read or mapped
    before every check passed."""
    path, offset, length = _external_path(tensor, base_dir, what)
    try:
        # a FIFO would block open() and read() forever, a device could be endless:
        # refuse anything but a regular file, before opening and again on the opened file
        # (O_NONBLOCK makes opening a FIFO return at once, should one replace the file between)
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(what, path, mode)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise ModelLoadError(f"External data of {what[:1].lower()}{what[1:]} cannot be read from {path!r}: {e}.") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(what, path, st.st_mode)
        size = st.st_size
        if offset > size:
            raise ModelLoadError(
                f"{what}: external-data offset {offset} is past the end of {path!r} ({size} bytes)."
            )
        if length is None:
            length = size - offset
        elif length > size - offset:
            raise ModelLoadError(
                f"{what}: external data asks for {length} bytes at offset {offset} of {path!r}, "
                f"which holds {size} bytes."
            )
        expected = raw_nbytes(tensor, what)
        if expected is not None and length != expected:
            raise ModelLoadError(
                f"{what} has shape {list(tensor.dims)} and type "
                f"{np_dtype(tensor.data_type)}, which need {expected} bytes; its external data holds {length}."
            )
        if limit is not None and length > limit:
            raise ModelLoadError(
                f"{what}: external data of {length} bytes is above the limit of {limit} bytes "
                f"(SessionOptions.max_tensor_bytes, or the machine's physical memory when unset)."
            )
        try:
            return use(f, path, offset, length)
        except OSError as e:
            raise ModelLoadError(f"External data of {what[:1].lower()}{what[1:]} cannot be read from {path!r}: {e}.") from e


def load_external_data(
    tensor: TensorProto, base_dir: str | None, limit: int | None = None, what: str | None = None
) -> None:
    """Read an external tensor's bytes into it (in place), only from a regular file inside ``base_dir``.

    The offset and length are checked against the file's size, and the length against the
    tensor's shape and type and ``limit``, before any byte is read.
    """
    what = what or f"Initializer {tensor.name!r}"

    def read(f, path: str, offset: int, length: int) -> bytes:
        f.seek(offset)
        raw = f.read(length)
        if len(raw) != length:  # the file shrank while it was read
            raise ModelLoadError(f"{what}: {path!r} ended after {len(raw)} of {length} bytes.")
        return raw

    raw = _checked_region(tensor, base_dir, limit, what, read)
    del tensor.external_data[:]
    tensor.data_location = TensorProto.DEFAULT
    tensor.raw_data = raw


# Memory-mapped external data
# ---------------------------
# A tensor of external data whose bytes are numpy's own layout (a plain numeric type on a
# little-endian machine, at an offset aligned to its element size) is not read but mapped:
# the array is a read-only view of the file (initializers are read-only anyway, see
# onnxrt.plan._frozen). Its pages are read in when a kernel first touches them and stay
# shared with the page cache, so a table read in part, such as a word-embedding matrix
# that Gather reads a few rows of (bert-base: 94 MB, 128 rows a run), costs only the pages
# touched, and a prepared form (a transposed copy) does not sit beside a private copy of the
# original. As onnxruntime does with external initializers, the file must not be truncated
# or rewritten while a session uses it (the kernel would signal a bus error on a page that
# is gone). Small tensors are read as before (a mapping each would cost more than it saves).
#: external tensors of at least this many bytes are memory-mapped
MAP_FROM = 1 << 16
_MAPPABLE = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int8, np.int16, np.int32,
                                            np.int64, np.uint8, np.uint16, np.uint32, np.uint64))


def _mapped_array(tensor: TensorProto, base_dir: str | None, limit: int | None, what: str) -> np.ndarray | None:
    """The external tensor as a read-only array over a mapping of its file, or None where
    it must be read (see MAP_FROM and _MAPPABLE)."""
    import mmap
    import sys

    if sys.byteorder != "little" or tensor.HasField("segment"):
        return None
    dt = np_dtype(tensor.data_type)
    nbytes = raw_nbytes(tensor, what) if dt in _MAPPABLE else None
    if nbytes is None or nbytes < MAP_FROM:
        return None
    dims = tuple(int(d) for d in tensor.dims)

    def map_region(f, path: str, offset: int, length: int) -> np.ndarray | None:
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        if (offset - start) % dt.itemsize:
            return None  # (an unaligned tensor is read: numpy's kernels expect aligned elements)
        region = mmap.mmap(f.fileno(), length + offset - start, access=mmap.ACCESS_READ, offset=start)
        arr = np.frombuffer(region, dtype=dt, count=length // dt.itemsize, offset=offset - start)
        return arr.reshape(dims)

    return _checked_region(tensor, base_dir, limit, what, map_region)


def initializer_array(
    tensor: TensorProto, base_dir: str | None, limit: int | None = None, what: str | None = None
) -> np.ndarray:
    """numpy value of an initializer (or of a tensor attribute, ``what`` naming it), reading
    external data only inside ``base_dir``; checked against its shape and type and refused
    above ``limit`` bytes (``ModelLoadError``). External data of plain numeric types from
    MAP_FROM bytes on is memory-mapped (a read-only array over the file)."""
    what = what or f"Initializer {tensor.name!r}"
    if tensor.data_location != TensorProto.EXTERNAL:
        return to_array(tensor, what, limit)
    mapped = _mapped_array(tensor, base_dir, limit, what)
    if mapped is not None:
        return mapped
    copy = TensorProto()
    copy.CopyFrom(tensor)
    load_external_data(copy, base_dir, limit, what)
    return to_array(copy, what, limit)


def sparse_initializer_array(sparse: onnx.SparseTensorProto, limit: int | None = None) -> np.ndarray:
    """Dense value of a sparse initializer, checked (see :func:`onnxrt.dtypes.sparse_to_dense`)
    and refused above ``limit`` bytes before the dense array is allocated."""
    return sparse_to_dense(sparse, f"Sparse initializer {sparse.values.name!r}", limit)


# --- text fields -----------------------------------------------------------------------
# onnx.proto is proto2: protobuf parses a string field holding bytes that are not UTF-8
# without complaint and hands it to Python as bytes, which then fails far from the
# model (a TypeError in onnx's schema lookup, a bytes name in messages). Every string
# field of the model is checked once, at load.

_TEXT_FIELDS: dict[Any, tuple[list[tuple[str, bool]], list[tuple[str, bool]]]] = {}


def _fields(descriptor: Any) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """(string fields, message fields) of a message type, each as (name, repeated)."""
    found = _TEXT_FIELDS.get(descriptor)
    if found is None:
        from google.protobuf.descriptor import FieldDescriptor

        strings, messages = [], []
        for fd in descriptor.fields:
            repeated = bool(fd.is_repeated) if hasattr(fd, "is_repeated") else fd.label == FieldDescriptor.LABEL_REPEATED
            if fd.type == FieldDescriptor.TYPE_STRING:
                strings.append((fd.name, repeated))
            elif fd.type == FieldDescriptor.TYPE_MESSAGE:
                messages.append((fd.name, repeated))
        found = _TEXT_FIELDS[descriptor] = (strings, messages)
    return found


def _where(msg: Any, field: str, index: int | None) -> str:
    at = f"{field}[{index}]" if index is not None else field
    kind = type(msg).__name__
    if kind == "NodeProto":
        return f"node {msg.name!r} ({msg.op_type!r}): field {at}"
    if kind in ("TensorProto", "ValueInfoProto", "GraphProto", "FunctionProto"):
        return f"{kind[:-5].lower().replace('valueinfo', 'value')} {msg.name!r}: field {at}"
    if kind == "AttributeProto":
        return f"attribute {msg.name!r}: field {at}"
    return f"{kind}: field {at}"


def _check_text(msg: Any) -> None:
    strings, messages = _fields(msg.DESCRIPTOR)
    for name, repeated in strings:
        value = getattr(msg, name)
        items = enumerate(value) if repeated else ((None, value),)
        for i, v in items:
            if not isinstance(v, str):
                raise ModelLoadError(
                    f"The model's {_where(msg, name, i)} is not valid UTF-8 ({bytes(v)[:60]!r}); "
                    f"ONNX text fields must be UTF-8."
                )
    for name, repeated in messages:
        if repeated:
            for sub in getattr(msg, name):
                _check_text(sub)
        elif msg.HasField(name):
            _check_text(getattr(msg, name))


def check_text(model: ModelProto) -> None:
    """Raise ModelLoadError naming the field when any string field of the model is not UTF-8."""
    _check_text(model)


def graph_free_names(graph: onnx.GraphProto) -> set[str]:
    """Names a graph reads but does not define (what a subgraph takes from outer scopes)."""
    defined = {i.name for i in graph.input}
    defined.update(i.name for i in graph.initializer)
    defined.update(i.values.name for i in graph.sparse_initializer)
    for node in graph.node:
        defined.update(node.output)
    used: set[str] = set()
    for node in graph.node:
        used.update(n for n in node.input if n)
        for att in node.attribute:
            if att.type == onnx.AttributeProto.GRAPH:
                used |= graph_free_names(att.g)
            elif att.type == onnx.AttributeProto.GRAPHS:
                for g in att.graphs:
                    used |= graph_free_names(g)
    used.update(o.name for o in graph.output)
    return used - defined


def node_free_names(node: onnx.NodeProto) -> set[str]:
    """Outer names read by a node's subgraphs (its implicit inputs)."""
    out: set[str] = set()
    for att in node.attribute:
        if att.type == onnx.AttributeProto.GRAPH:
            out |= graph_free_names(att.g)
        elif att.type == onnx.AttributeProto.GRAPHS:
            for g in att.graphs:
                out |= graph_free_names(g)
    return out


def sort_nodes(
    nodes: list[Any],
    available: set[str],
    graph_name: str = "",
) -> list[int]:
    """Topological order of ``nodes`` (NodeProto-like: .input, .output, .name, .op_type, plus .attribute).

    Checks that every input is defined exactly once; keeps the stored order where it is
    already valid. Raises GraphError on undefined names, duplicate outputs and cycles.
    """
    producer: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for out in node.output:
            if not out:
                continue
            if out in producer:
                other = nodes[producer[out]]
                raise GraphError(
                    f"Value {out!r} is produced twice, by node {other.name!r} ({other.op_type}) "
                    f"and node {node.name!r} ({node.op_type})."
                )
            if out in available:
                raise GraphError(
                    f"Node {node.name!r} ({node.op_type}) produces {out!r}, which is already a graph input or initializer."
                )
            producer[out] = i
    deps: list[set[int]] = []
    for node in nodes:
        needs = [n for n in node.input if n]
        needs.extend(sorted(node_free_names(node)))
        d: set[int] = set()
        for name in needs:
            if name in producer:
                d.add(producer[name])
            elif name not in available:
                where = f" of graph {graph_name!r}" if graph_name else ""
                raise GraphError(
                    f"Node {node.name!r} ({node.op_type}) reads {name!r}, which no node, input or initializer{where} defines."
                )
        deps.append(d)
    users: list[list[int]] = [[] for _ in nodes]
    indeg = [0] * len(nodes)
    for i, d in enumerate(deps):
        indeg[i] = len(d)
        for j in d:
            users[j].append(i)
    import heapq

    ready = [i for i, k in enumerate(indeg) if k == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        stuck = [f"{nodes[i].name!r} ({nodes[i].op_type})" for i, k in enumerate(indeg) if k > 0]
        raise GraphError(f"The graph has a cycle through nodes {', '.join(stuck[:5])}.")
    return order


# --- a model file read with its weights set apart -------------------------------------------
# Parsing a model file holds the file's bytes, then protobuf's copy of them, then the arrays
# decoded from it: three times the weights at the peak (gpt2: 1.3 GB for 500 MB of weights).
# read_weights_apart walks the protobuf wire format of the file instead: the graph's large
# floating-point initializers' raw_data is read straight into numpy arrays (one copy, no
# bytes object in between) and left out of the bytes protobuf then parses (the rest of the
# model, small). Anything unusual (a second graph field, a repeated raw_data, groups, sizes
# that do not add up) gives None: the caller parses the whole file as usual, which reports
# what is wrong.

#: float types whose initializers are read apart (the weights)
_APART_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16})


class _Unusual(Exception):
    """The file is not the plain layout read_weights_apart handles."""


def _varint(f: IO[bytes]) -> int:
    shift = value = 0
    for _ in range(10):
        b = f.read(1)
        if not b:
            raise _Unusual("end of file inside a varint")
        value |= (b[0] & 0x7F) << shift
        if b[0] < 0x80:
            return value
        shift += 7
    raise _Unusual("varint longer than 10 bytes")


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(f: IO[bytes], end: int) -> tuple[int, int, bytes]:
    """(field number, wire type, the field's bytes as stored: tag and payload) at f's position."""
    start = f.tell()
    tag = _varint(f)
    wire = tag & 7
    if wire == 0:
        _varint(f)
    elif wire in (1, 5):
        f.seek(8 if wire == 1 else 4, os.SEEK_CUR)
    elif wire == 2:
        n = _varint(f)
        f.seek(n, os.SEEK_CUR)
    else:
        raise _Unusual(f"wire type {wire}")
    stop = f.tell()
    if stop > end:
        raise _Unusual("a field runs past its message")
    f.seek(start)
    data = f.read(stop - start)
    return tag >> 3, wire, data


def _length_field(f: IO[bytes], end: int) -> tuple[int, int, int]:
    """(tag, payload start, payload end) of a length-delimited field at f's position."""
    tag = _varint(f)
    n = _varint(f)
    start = f.tell()
    if start + n > end:
        raise _Unusual("a field runs past its message")
    return tag, start, start + n


def _tensor(f: IO[bytes], end: int, held: dict[str, np.ndarray], limit: int | None) -> bytes:
    """An initializer's bytes without its raw_data when it is a weight (read into ``held``)."""
    out = bytearray()
    raw: tuple[int, int] | None = None
    while f.tell() < end:
        at = f.tell()
        tag = _varint(f)
        f.seek(at)
        if tag == (9 << 3 | 2):  # raw_data
            if raw is not None:
                raise _Unusual("raw_data twice")
            _, start, stop = _length_field(f, end)
            raw = (start, stop)
            f.seek(stop)
        else:
            out += _field(f, end)[2]
    if raw is None:
        return bytes(out)
    probe = TensorProto.FromString(bytes(out))
    from .dtypes import ONNX_TO_NP, check_size, tensor_count

    start, stop = raw
    n = tensor_count(probe, f"Initializer {probe.name!r}")
    if (probe.data_type not in _APART_TYPES or n < 1024 or probe.data_location == TensorProto.EXTERNAL
            or probe.HasField("segment") or probe.name in held):
        f.seek(start)
        return bytes(out) + _encode_varint(9 << 3 | 2) + _encode_varint(stop - start) + f.read(stop - start)
    dtype = ONNX_TO_NP[probe.data_type]
    dims = [int(d) for d in probe.dims]
    check_size(n * dtype.itemsize, dims, dtype, f"Initializer {probe.name!r}", limit)
    if stop - start != n * dtype.itemsize:
        raise _Unusual("raw_data of another size than the dims need")  # (the full parse says so)
    array = np.empty(n, dtype)
    f.seek(start)
    if f.readinto(memoryview(array.view(np.uint8))) != stop - start:  # type: ignore[attr-defined]
        raise _Unusual("end of file inside raw_data")
    if np.little_endian is False:
        array = array.byteswap()
    held[probe.name] = array.reshape(dims)
    f.seek(end)
    return bytes(out)


def read_weights_apart(path: str, limit: int | None = None) -> tuple[ModelProto, dict[str, np.ndarray]] | None:
    """(the model without its weights' data, the weights as arrays by name) of a model file
    whose main graph stores large floating-point initializers (1024 elements or more) as
    raw_data; None when it has none or its layout is not the plain one (parse it whole then).
    The arrays are checked against their dims and ``limit`` as :func:`initializer_array` does."""
    held: dict[str, np.ndarray] = {}
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            size = os.fstat(f.fileno()).st_size
            model = bytearray()
            graphs = 0
            while f.tell() < size:
                at = f.tell()
                tag = _varint(f)
                f.seek(at)
                if tag != (7 << 3 | 2):  # not the graph
                    model += _field(f, size)[2]
                    continue
                graphs += 1
                if graphs > 1:
                    return None  # (protobuf merges repeated message fields)
                _, start, stop = _length_field(f, size)
                graph = bytearray()
                while f.tell() < stop:
                    at = f.tell()
                    gtag = _varint(f)
                    f.seek(at)
                    if gtag == (5 << 3 | 2):  # an initializer
                        _, t0, t1 = _length_field(f, stop)
                        tensor = _tensor(f, t1, held, limit)
                        graph += _encode_varint(gtag) + _encode_varint(len(tensor)) + tensor
                        f.seek(t1)
                    else:
                        graph += _field(f, stop)[2]
                model += _encode_varint(tag) + _encode_varint(len(graph)) + graph
        if not held:
            return None
        proto = ModelProto()
        proto.ParseFromString(bytes(model))
    except (_Unusual, OSError, DecodeError, ValueError, RuntimeError, KeyError, ModelLoadError):
        return None  # (the whole parse reports a broken file in its own order)
    if not proto.HasField("graph"):
        return None
    return proto, held
