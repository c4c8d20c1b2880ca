"""Drawing blocks of the fuzzer: element types allowed by a schema, shapes (0-sized and broadcasting ones), arrays."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from hypothesis import strategies as st

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = (F32, F64, F16, BF16)
SIGNED = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UNSIGNED = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
INTS = SIGNED + UNSIGNED
BOOL = np.dtype(np.bool_)
STRING = np.dtype(object)
NUMERIC = FLOATS + INTS
F8 = tuple(
    np.dtype(t)
    for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz)
)
I4 = (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4))
#: every element type the fuzzer can generate
ALL = NUMERIC + (BOOL, STRING) + F8 + I4
#: float-like types onnx gets from ml_dtypes
EXOTIC_FLOATS = (BF16,) + F8

_TYPE_STRS: dict[str, np.dtype] = {}
for _dt in ALL:
    if _dt == STRING:
        _TYPE_STRS["tensor(string)"] = _dt
        continue
    _code = onnx.helper.np_dtype_to_tensor_dtype(_dt)
    _TYPE_STRS[f"tensor({onnx.helper.tensor_dtype_to_string(_code)[len('TensorProto.'):].lower()})"] = _dt
# onnx names float32/float64 'float'/'double' inside type strings
_TYPE_STRS["tensor(float)"] = F32
_TYPE_STRS["tensor(double)"] = F64
_TYPE_STRS["tensor(float16)"] = F16
_TYPE_STRS["tensor(bfloat16)"] = BF16


def elem_type(dtype: np.dtype) -> int:
    """TensorProto code of a numpy dtype (object arrays are strings)."""
    if np.dtype(dtype) == STRING:
        return onnx.TensorProto.STRING
    return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f" or np.dtype(dtype) in EXOTIC_FLOATS


@cache
def schema(op: str, opset: int, domain: str = "") -> onnx.defs.OpSchema:
    return onnx.defs.get_schema(op, opset, domain)


@cache
def since_versions(op: str, domain: str = "") -> tuple[int, ...]:
    return tuple(
        sorted(s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain == domain)
    )


@cache
def allowed_types(op: str, opset: int, index: int, domain: str = "", output: bool = False) -> tuple[np.dtype, ...]:
    """Element types the schema (resolved at ``opset``) allows for input (or output) ``index``
    that the fuzzer can generate; the last formal parameter stands for variadic ones."""
    sch = schema(op, opset, domain)
    params = sch.outputs if output else sch.inputs
    param = params[min(index, len(params) - 1)]
    strs = [param.type_str]
    for tc in sch.type_constraints:
        if tc.type_param_str == param.type_str:
            strs = list(tc.allowed_type_strs)
    return tuple(_TYPE_STRS[s] for s in strs if s in _TYPE_STRS)


def dtype_range(dtype: np.dtype) -> tuple[int, int]:
    dt = np.dtype(dtype)
    if dt in I4:
        info = ml_dtypes.iinfo(dt)
    else:
        info = np.iinfo(dt)
    return int(info.min), int(info.max)


@dataclass
class P:
    """An input that is a parameter of the node (shape, axes, indices...): the case decides
    whether it is fed at run time or stored as an initializer (folded at load)."""

    value: np.ndarray


@dataclass
class Node:
    """What an operator generator returns: the node's inputs (arrays, ``P`` parameters, or
    None for an omitted optional input), its attributes and how many outputs it names."""

    inputs: list[Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    n_outputs: int = 1
    #: a function turning outputs into a canonical form where the spec leaves an order open
    canon: Any = None


class Gen:
    """Per-example drawing context: hypothesis draws the structure (shapes, types, attributes),
    a numpy generator seeded by hypothesis draws the values (fast, shrinks through the seed)."""

    def __init__(self, draw: Any, op: str, opset: int, domain: str = ""):
        self.draw = draw
        self.op = op
        self.opset = opset
        self.domain = domain
        self.rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
        # values on a grid of quarters make ties (ArgMax, TopK, Unique, Round halves) likely
        self.grid = draw(st.booleans(), label="grid")
        # a few NaN/inf/zeros among float values
        self.special = draw(st.integers(0, 5), label="special") == 5

    # -- structure (hypothesis) ---------------------------------------------------------
    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def bool(self) -> bool:
        return self.draw(st.booleans())

    def choice(self, seq: Any) -> Any:
        return self.draw(st.sampled_from(list(seq)))

    def float(self, lo: float, hi: float) -> float:
        """An attribute float (attributes are stored as float32)."""
        v = self.draw(st.floats(lo, hi, allow_nan=False))
        return float(np.float32(v))

    def maybe(self) -> bool:
        """True one time in four (optional inputs, rare attributes)."""
        return self.draw(st.integers(0, 3)) == 3

    def dtype(self, index: int = 0, among: Any = NUMERIC) -> np.dtype:
        """An element type of input ``index`` allowed by the schema at this opset, among ``among``."""
        allowed = allowed_types(self.op, self.opset, index, self.domain)
        opts = [d for d in among if d in allowed]
        if not opts:
            raise ValueError(f"{self.op} opset {self.opset} input {index}: none of {among} allowed ({allowed})")
        return self.choice(opts)

    def shape(self, min_rank: int = 0, max_rank: int = 4, lo: int = 1, hi: int = 4, empty: bool = True) -> tuple[int, ...]:
        """A shape; one time in eight (when ``empty``) one of its dims is 0."""
        rank = self.int(min_rank, max_rank)
        dims = [self.int(lo, hi) for _ in range(rank)]
        if empty and rank and self.int(0, 7) == 7:
            dims[self.int(0, rank - 1)] = 0
        return tuple(dims)

    def broadcast_to(self, base: tuple[int, ...], drop: bool = True) -> tuple[int, ...]:
        """A shape that broadcasts to ``base``: leading dims dropped, some dims set to 1."""
        k = self.int(0, len(base)) if drop else 0
        return tuple(1 if self.int(0, 2) == 0 else d for d in base[k:])

    def axes(self, rank: int, min_n: int = 0, max_n: int | None = None, negative: bool = True) -> list[int]:
        """Distinct axes, possibly negative."""
        if rank == 0:
            return []
        max_n = rank if max_n is None else min(max_n, rank)
        n = self.int(min(min_n, max_n), max_n)
        chosen = self.draw(st.permutations(list(range(rank))))[:n]
        return [a - rank if negative and self.bool() else a for a in chosen]

    def axis(self, rank: int, negative: bool = True) -> int:
        a = self.int(0, rank - 1)
        return a - rank if negative and self.bool() else a

    # -- values (numpy) -----------------------------------------------------------------
    def array(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype,
        lo: float | None = None,
        hi: float | None = None,
        nonzero: bool = False,
        special: bool | None = None,
    ) -> np.ndarray:
        """Values of ``dtype`` in [lo, hi] (small integers, floats in [-4, 4] by default)."""
        return np.asarray(self._values(tuple(shape), dtype, lo, hi, nonzero, special))

    def _values(self, shape: tuple[int, ...], dtype: np.dtype, lo: Any, hi: Any, nonzero: bool, special: Any) -> Any:
        dt = np.dtype(dtype)
        rng = self.rng
        if dt == BOOL:
            return rng.random(shape) < 0.5
        if dt == STRING:
            words = np.array(["", "a", "b", "ab", "xyz", "A", "é", "1"], dtype=object)
            out = np.empty(shape, dtype=object)
            out[...] = words[rng.integers(0, len(words), shape)]
            return out
        if dt.kind in "iu" or dt in I4:
            dmin, dmax = dtype_range(dt)
            a = max(dmin, -20 if lo is None else int(lo))
            b = min(dmax, (40 if dt.kind == "u" or dt in I4[1:] else 20) if hi is None else int(hi))
            if dt.kind in "iu" and (a, b) == (dmin, dmax):  # every bit pattern
                n = int(np.prod(shape))
                return rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt).reshape(shape)
            v = rng.integers(a, b + 1, shape, dtype=np.int64)
            if nonzero:
                v = np.where(v == 0, 1 if b >= 1 else -1, v)
            return v.astype(dt)
        a = -4.0 if lo is None else lo
        b = 4.0 if hi is None else hi
        v = rng.uniform(a, b, shape)
        if self.grid:
            v = np.round(v * 4) / 4
        if nonzero:
            v = np.where(np.abs(v) < 0.125, 0.5, v)
        if (self.special if special is None else special) and v.size:
            specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
            mask = rng.random(shape) < 0.2
            v = np.where(mask, specials[rng.integers(0, len(specials), shape)], v)
        return v.astype(dt)

    def indices(self, shape: tuple[int, ...], bound: int, dtype: np.dtype | None = None, negative: bool = True) -> np.ndarray:
        """Valid indices into an axis of size ``bound`` (negative ones counting from the end)."""
        dt = dtype if dtype is not None else self.choice([np.dtype(np.int64), np.dtype(np.int32)])
        if bound == 0:  # only an empty index tensor is valid
            return np.zeros(shape, dtype=dt)
        v = self.rng.integers(0, bound, shape)
        if negative:
            v = np.where(self.rng.random(shape) < 0.3, v - bound, v)
        return np.asarray(v).astype(dt)
