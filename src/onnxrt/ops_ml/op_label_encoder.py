"""LabelEncoder (ml 1, 2, 4) and CategoryMapper (ml 1): element-wise look-up tables."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..ops_cpu._op import OpRun
from ..registry import register
from ._common import ML_DOMAIN, string_array
from ._lookup import Lookup, select

#: the attribute suffixes of LabelEncoder 2/4 and the dtype each one holds
_KINDS = {"strings": np.dtype(object), "int64s": np.dtype(np.int64), "floats": np.dtype(np.float32)}


def _array(values, dtype: np.dtype) -> np.ndarray:
    if dtype == object:
        return string_array(values)
    return np.asarray(values, dtype=dtype)


def _string_int_maps(op: OpRun, strings: np.ndarray, ints: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Strings -> ints or ints -> strings through parallel arrays (the input's type decides)."""
    if x.dtype.kind in "OUS":
        pos, found = op._by_string.find(x)
        return select(ints, pos, found, op.default_int64)
    if x.dtype.kind not in "iu":
        raise KernelError(f"{op.node_label()} expects strings or int64, got dtype {x.dtype}.")
    pos, found = op._by_int.find(x)
    return select(strings, pos, found, op.default_string)


@register("CategoryMapper", versions=(1,), domain=ML_DOMAIN)
class CategoryMapper(OpRun):
    """CategoryMapper (ml 1): strings -> int64 (default_int64 when absent) or int64 -> strings
    (default_string), through the parallel lists cats_strings / cats_int64s."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        strings = string_array(self.cats_strings or [])
        ints = np.asarray(self.cats_int64s or [], dtype=np.int64)
        if strings.size != ints.size:
            raise InvalidAttributeError(
                f"{self.node_label()}: 'cats_strings' has {strings.size} values and 'cats_int64s' {ints.size}; "
                f"expected the same length."
            )
        self._strings, self._ints = strings, ints
        self._by_string = Lookup(strings)
        self._by_int = Lookup(ints)

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (_string_int_maps(self, self._strings, self._ints, x),)


@register("LabelEncoder", versions=(1, 2, 4), domain=ML_DOMAIN)
class LabelEncoder(OpRun):
    """LabelEncoder: 1 (strings <-> their index in classes_strings), 2 (keys_* -> values_*,
    bit-wise float comparison), 4 (keys_tensor / values_tensor of any listed type,
    default_tensor; a NaN key matches every NaN).

    A repeated key: version 4's spec says the last one takes precedence, and onnxrt does so
    (onnxruntime keeps the first); versions 1 and 2 say nothing and onnxrt keeps the first,
    as onnxruntime.

    Version 4 without default_tensor uses the default_* attribute of the values' kind
    (default_int64 for integer values of any width, default_float for floats and doubles,
    default_string for strings), which are the defaults the spec lists.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        label = self.node_label()
        if (self.since_version or 4) < 2:
            classes = string_array(self.classes_strings or [])
            self._v1 = True
            self._strings = classes
            self._ints = np.arange(classes.size, dtype=np.int64)
            self._by_string = Lookup(classes, first_wins=True)
            self._by_int = Lookup(self._ints)
            return
        self._v1 = False
        keys = self._pick(("keys_", "keys_tensor"), label)
        values = self._pick(("values_", "values_tensor"), label)
        if keys.size != values.size:
            raise InvalidAttributeError(
                f"{label} has {keys.size} keys and {values.size} values; expected the same count."
            )
        self._keys, self._values = keys, values
        since = self.since_version or 4
        self._lookup = Lookup(keys, nan_matches=since >= 4, bitwise=since < 4, first_wins=since < 4)
        self._default = self._default_value(values, label)

    def _pick(self, prefixes: tuple[str, str], label: str) -> np.ndarray:
        """The one keys_*/values_* attribute the node sets, as an array of its type."""
        prefix, tensor_name = prefixes
        found = [(s, getattr(self, prefix + s, None)) for s in _KINDS]
        found = [(s, v) for s, v in found if v is not None and len(v)]
        tensor = getattr(self, tensor_name, None)
        if tensor is not None:
            found.append(("tensor", tensor))
        if len(found) != 1:
            names = [prefix + s for s in _KINDS] + ([tensor_name] if (self.since_version or 4) >= 4 else [])
            raise InvalidAttributeError(
                f"{label} must set exactly one of {names!r}, it sets {[prefix + s if s != 'tensor' else tensor_name for s, _ in found]!r}."
            )
        kind, value = found[0]
        if kind == "tensor":
            arr = np.asarray(value).reshape(-1)
            return arr
        return _array(value, _KINDS[kind])

    def _default_value(self, values: np.ndarray, label: str):
        tensor = getattr(self, "default_tensor", None)
        if tensor is not None:
            t = np.asarray(tensor).reshape(-1)
            if t.size != 1:
                raise InvalidAttributeError(f"{label}: attribute 'default_tensor' has {t.size} values, expected 1.")
            if (t.dtype.kind in "OUS") != (values.dtype.kind in "OUS"):
                raise InvalidAttributeError(
                    f"{label}: attribute 'default_tensor' has type {t.dtype}, the values are {values.dtype}."
                )
            return t[0]
        if values.dtype.kind in "OUS":
            return self.default_string
        if values.dtype.kind in "iu":
            return self.default_int64
        return self.default_float

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        if self._v1:
            return (_string_int_maps(self, self._strings, self._ints, x),)
        try:
            pos, found = self._lookup.find(x)
        except KernelError as e:
            raise KernelError(f"{self.node_label()}: {e}") from None
        return (select(self._values, pos, found, self._default),)
