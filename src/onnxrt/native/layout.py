"""Argument blocks of the team's part functions, declared once by named fields: the packer, the decoder's indices and the debug checks come from the declaration.

A part function (``native.loops.*_part``) receives the address of an int64 block and
decodes it by position. Writing the positions twice (a list at the call site, ``a[19]``
in the part) lets an off-by-one read another field as an address: memory is corrupted
instead of an error raised. Here a :class:`Layout` names the fields once:

- ``LAYOUT.pack(x=..., y=..., n=...)`` builds the argument list in the declared order
  (every field given, no other; arrays stand for their data's address, ``None`` for an
  array passed at each call of a prepared job);
- ``LAYOUT.at`` is a named tuple of the positions, a constant the compiled decoder
  reads (``a[AT.n]``), and ``LAYOUT.size`` the block's length;
- with ``ONNXRT_NATIVE_DEBUG=1`` in the environment, every call through the team checks
  the block against its layout before any compiled code reads it (:func:`check`): its
  length, each array field's dtype, contiguity and size (the size rule a field declares,
  evaluated on the block's integer fields), and that each address in the block belongs
  to an array the caller holds for the call (lifetime). A failure raises
  :class:`NativeArgumentError` naming the part and the field.

The last field of every block is ``parts``, appended by the team's caller.
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: checks every team call's argument block against its layout (slower; for tests and debugging)
DEBUG = os.environ.get("ONNXRT_NATIVE_DEBUG", "0").strip().lower() not in ("", "0", "false", "no", "off")

#: field kinds: an array of this element type (its data's address in the block), or an integer
_ARRAY_KINDS = {"f32": np.dtype(np.float32), "i64": np.dtype(np.int64), "u32": np.dtype(np.uint32),
                "any": None}
_SCALAR_KINDS = ("int", "bool", "fn")

#: part function name -> its layout (every part the team runs is declared here)
LAYOUTS: dict[str, Layout] = {}


class NativeArgumentError(RuntimeError):
    """An argument block does not match its declared layout (raised in debug mode, before the call)."""


class Field:
    """One named word of a block: ``kind`` is an array kind (``f32``, ``i64``, ``u32``,
    ``any``) or ``int``/``bool``/``fn`` (a function's address); ``size``, for an array, gives the
    elements the part reads from the block's integer fields, counted from the array's first
    element over its memory span (checked in debug mode); ``contiguous`` False for an array
    the part reads with a row stride of its own (a field of the block)."""

    __slots__ = ("contiguous", "kind", "name", "size")

    def __init__(self, name: str, kind: str, size: Callable[[dict[str, int]], int] | None = None,
                 contiguous: bool = True):
        if kind not in _ARRAY_KINDS and kind not in _SCALAR_KINDS:
            raise ValueError(f"field {name!r}: unknown kind {kind!r}")
        self.name, self.kind, self.size, self.contiguous = name, kind, size, contiguous

    @property
    def is_array(self) -> bool:
        return self.kind in _ARRAY_KINDS


class Layout:
    """The declared fields of one part function's argument block (``parts`` is appended last)."""

    def __init__(self, part: str, fields: Sequence[Field], doc: str = ""):
        names = [f.name for f in fields] + ["parts"]
        if len(set(names)) != len(names):
            raise ValueError(f"layout {part!r} names a field twice")
        self.part = part
        self.fields = list(fields) + [Field("parts", "int")]
        self.names = tuple(names)
        self.size = len(self.fields)
        #: positions by name, a constant for compiled decoders (``a[AT.height]``)
        self.at = namedtuple(f"{part}_at", names)(*range(len(names)))  # type: ignore[misc]
        self._given = frozenset(names[:-1])
        self.doc = doc
        if part in LAYOUTS:
            raise ValueError(f"layout {part!r} declared twice")
        LAYOUTS[part] = self

    def pack(self, **values: Any) -> list[Any]:
        """The argument list in declared order (without ``parts``); every field must be given."""
        if values.keys() != self._given:
            missing = sorted(self._given - values.keys())
            extra = sorted(values.keys() - self._given)
            raise NativeArgumentError(f"{self.part}: argument block misses {missing} / has unknown {extra}")
        return [values[n] for n in self.names[:-1]]

    def __repr__(self) -> str:
        return f"Layout({self.part!r}, {', '.join(f'{f.name}:{f.kind}' for f in self.fields)})"


def check(part: str, block: np.ndarray, arrays_by_slot: dict[int, Any]) -> None:
    """Debug-mode check of a filled block before the team runs ``part`` over it:
    ``arrays_by_slot`` maps each array field's position to the array whose address the
    block holds there (the arrays the caller keeps alive for the call)."""
    layout = LAYOUTS.get(part)
    if layout is None:
        raise NativeArgumentError(f"part {part!r} has no declared layout (native/layout.py)")
    if block.dtype != np.int64 or block.ndim != 1 or not block.flags.c_contiguous:
        raise NativeArgumentError(f"{part}: the argument block must be a contiguous int64 vector")
    if block.size != layout.size:
        raise NativeArgumentError(f"{part}: the block has {block.size} words, its layout {layout.size}")
    ints = {f.name: int(block[i]) for i, f in enumerate(layout.fields) if not f.is_array}
    for i, f in enumerate(layout.fields):
        if f.kind == "fn" and block[i] == 0:
            raise NativeArgumentError(f"{part}: field {f.name!r} (a function's address) is null")
        if not f.is_array:
            continue
        a = arrays_by_slot.get(i)
        if a is None:
            raise NativeArgumentError(f"{part}: field {f.name!r} holds an address no array passed to the call owns "
                                      f"(the array it was taken from may be freed)")
        if type(a) is not np.ndarray:
            raise NativeArgumentError(f"{part}: field {f.name!r} must be a numpy array, got {type(a).__name__}")
        if int(block[i]) != a.ctypes.data:
            raise NativeArgumentError(f"{part}: field {f.name!r} holds {int(block[i]):#x}, not the address of the array "
                                      f"given for it ({a.ctypes.data:#x})")
        want = _ARRAY_KINDS[f.kind]
        if want is not None and a.dtype != want:
            raise NativeArgumentError(f"{part}: field {f.name!r} must be {want}, got {a.dtype}")
        if f.contiguous and not a.flags.c_contiguous:
            raise NativeArgumentError(f"{part}: field {f.name!r} must be C-contiguous (strides {a.strides})")
        if f.size is not None:
            need = int(f.size(ints))
            span = _span(a)
            if span < need:
                raise NativeArgumentError(f"{part}: field {f.name!r} spans {span} elements, the part reads {need}")


def _span(a: np.ndarray) -> int:
    """Elements from an array's first one to its last in memory (its size when contiguous)."""
    if a.size == 0:
        return 0
    if any(st < 0 for st in a.strides):
        return a.size  # (never packed: negative strides are copied first)
    return sum((n - 1) * st for n, st in zip(a.shape, a.strides)) // a.itemsize + 1


# -- the declared blocks ------------------------------------------------------------------
# One entry per part function of native.loops, fields in block order. Sizes say how many
# elements the part reads from each array (the debug mode checks them).

def _f(name: str, kind: str = "int", size: Callable[[dict[str, int]], int] | None = None, contiguous: bool = True) -> Field:
    return Field(name, kind, size, contiguous)


def _n(*names: str) -> Callable[[dict[str, int]], int]:
    """A size rule: the product of these integer fields."""
    def size(v: dict[str, int]) -> int:
        out = 1
        for n in names:
            out *= v[n]
        return out
    return size


# ``act`` (GEMM, DEPTHWISE): 0, or the address of a compiled element-wise chain applied in
# place to each finished block while it is in cache, ``void act(float *y, int64 count)``
# (native.chain_loops.compile_inplace; its owner keeps it alive for the job's lifetime)
ELEMENTWISE = Layout("elementwise_part", [
    _f("kind"), _f("x", "f32", _n("n")), _f("y", "f32", _n("n")), _f("n")])
TRANSPOSE = Layout("transpose_part", [
    _f("src", "u32", _n("batches", "m", "n")), _f("dst", "u32", _n("batches", "m", "n")), _f("batches"), _f("m"), _f("n")])
SOFTMAX = Layout("softmax_part", [
    _f("x", "f32", _n("rows", "n")), _f("y", "f32", _n("rows", "n")), _f("rows"), _f("n"), _f("log", "bool")])
DEPTHWISE = Layout("depthwise_part", [
    _f("x", "f32", _n("planes", "height", "width")), _f("w", "f32", _n("channels", "kh", "kw")),
    _f("y", "f32", _n("planes", "out_h", "out_w")), _f("bias", "f32", _n("bias_size")), _f("z", "f32", _n("z_size")),
    _f("planes"), _f("height"), _f("width"), _f("channels"), _f("kh"), _f("kw"), _f("out_h"), _f("out_w"),
    _f("sh"), _f("sw"), _f("dh"), _f("dw"), _f("pt"), _f("pl"), _f("bias_size"), _f("z_size"), _f("relu", "bool"),
    _f("act")])
POINTWISE_GROUPS = Layout("pointwise_groups_part", [
    _f("w", "f32", _n("groups", "mg", "cg")), _f("x", "f32", _n("images", "groups", "cg", "npix")),
    _f("y", "f32", _n("images", "groups", "mg", "npix")), _f("bias", "f32", _n("bias_size")),
    _f("z", "f32", _n("z_size")), _f("images"), _f("groups"), _f("mg"), _f("cg"), _f("npix"), _f("sgemm", "fn"),
    _f("bias_size"), _f("z_size"), _f("relu", "bool"), _f("shuffled", "bool")])
IM2COL = Layout("im2col_part", [
    _f("x", "f32", _n("planes", "height", "width")), _f("col", "f32", _n("planes", "kh", "kw", "out_h", "out_w")),
    _f("planes"), _f("height"), _f("width"), _f("out_h"), _f("out_w"), _f("kh"), _f("kw"), _f("sh"), _f("sw"),
    _f("dh"), _f("dw"), _f("pt"), _f("pl")])
WINO_INPUT = Layout("wino_input_part", [
    _f("x", "f32", _n("channels", "height", "width")), _f("v", "f32", lambda v: 16 * v["channels"] * v["th"] * v["tw"]),
    _f("channels"), _f("height"), _f("width"), _f("pt"), _f("pl"), _f("th"), _f("tw")])
WINO_GEMM = Layout("wino_gemm_part", [
    _f("u", "f32", lambda v: 16 * v["m"] * v["c"]), _f("v", "f32", lambda v: 16 * v["c"] * v["t"]),
    _f("mx", "f32", lambda v: 16 * v["m"] * v["t"]), _f("m"), _f("c"), _f("t"), _f("sgemm", "fn")])
WINO_OUTPUT = Layout("wino_output_part", [
    _f("mx", "f32", lambda v: 16 * v["m"] * v["th"] * v["tw"]), _f("y", "f32", _n("m", "out_h", "out_w")),
    _f("m"), _f("out_h"), _f("out_w"), _f("th"), _f("tw"), _f("bias", "f32", _n("bias_size")), _f("bias_size"),
    _f("relu", "bool"), _f("z", "f32", _n("z_size")), _f("z_size")])
_POOL_FIELDS = [
    _f("x", "f32", _n("planes", "height", "width")), _f("y", "f32", _n("planes", "out_h", "out_w")),
    _f("scale", "f32", _n("scale_rows", "scale_cols")), _f("planes"), _f("height"), _f("width"), _f("out_h"),
    _f("out_w"), _f("scale_rows"), _f("scale_cols"), _f("kh"), _f("kw"), _f("sh"), _f("sw"), _f("dh"), _f("dw"),
    _f("pt"), _f("pl"), _f("is_max", "bool")]
POOL = Layout("pool_part", _POOL_FIELDS)
POOL_S2 = Layout("pool_s2_part", _POOL_FIELDS)
POOL_SAME = Layout("pool_same_part", _POOL_FIELDS)
AFFINE = Layout("affine_part", [
    _f("x", "f32", _n("rows", "cols")), _f("a", "f32", _n("rows")), _f("b", "f32", _n("rows")),
    _f("y", "f32", _n("rows", "cols")), _f("rows"), _f("cols"), _f("relu", "bool")])
GEMM = Layout("gemm_part", [
    _f("a", "f32", lambda v: (v["m"] - 1) * v["lda"] + v["k"], contiguous=False),
    # B is (k, n) with row stride ldb, or with trans_b its transpose stored (n, k) with row stride ldb
    _f("b", "f32", lambda v: (v["n"] - 1) * v["ldb"] + v["k"] if v["trans_b"] else (v["k"] - 1) * v["ldb"] + v["n"],
       contiguous=False),
    _f("c", "f32", lambda v: (v["m"] - 1) * v["ldc"] + v["n"], contiguous=False),
    _f("m"), _f("k"), _f("n"), _f("lda"), _f("ldb"), _f("ldc"), _f("sgemm", "fn"), _f("by_rows", "bool"),
    _f("bias", "f32", _n("bias_size")), _f("bias_size"), _f("z", "f32", _n("z_size")), _f("z_size"), _f("relu", "bool"),
    _f("trans_b", "bool"), _f("cbias", "f32", _n("cbias_size")), _f("cbias_size"), _f("act")])
BANDS = Layout("bands_part", [
    _f("x", "f32", _n("images", "channels", "height", "width")),
    _f("w2", "f32", lambda v: v["m"] * v["channels"] * v["kh"] * v["kw"]),
    _f("y", "f32", _n("images", "m", "out_h", "out_w")), _f("counter", "i64", lambda v: 1),
    _f("scratch", "f32", lambda v: v["channels"] * v["kh"] * v["kw"] * v["band_rows"] * v["out_w"] * v["parts"]),
    _f("bias", "f32", _n("bias_size")), _f("z", "f32", _n("z_size")),
    _f("images"), _f("channels"), _f("height"), _f("width"), _f("m"), _f("out_h"), _f("out_w"), _f("band_rows"),
    _f("sgemm", "fn"), _f("kh"), _f("kw"), _f("sh"), _f("sw"), _f("dh"), _f("dw"), _f("pt"), _f("pl"),
    _f("bias_size"), _f("z_size"), _f("relu", "bool")])
