"""The map operators of the ml domain (ml 1): CastMap and DictVectorizer read maps, ZipMap writes them."""

from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfRangeError, InvalidAttributeError, KernelError
from ..ops_cpu._op import OpRun
from ..registry import register
from ._common import ML_DOMAIN, check_choice, class_labels, declared_map_value_dtype, string_array
from ._lookup import Lookup


def _map_items(m, label: str) -> tuple[list, list]:
    if not isinstance(m, dict):
        raise KernelError(f"{label} expects a map (a dict), got {type(m).__name__}.")
    return list(m.keys()), list(m.values())


def _values_array(values: list, declared: np.dtype | None = None) -> np.ndarray:
    """The map's values as an array of the type the graph declares for the map; without a
    declaration: str -> object, integers -> int64, floats -> their numpy dtype when they
    carry one, else float32 (a Python float does not say float or double; float is what
    converters emit)."""
    if declared is not None:
        if declared == object or declared.kind in "OUS":
            return string_array(values)
        return np.asarray(values, dtype=declared) if values else np.zeros(0, dtype=declared)
    if not values:
        return np.zeros(0, dtype=np.float32)
    first = values[0]
    if isinstance(first, str):
        return string_array(values)
    if isinstance(first, (bool, int, np.integer)):
        return np.asarray(values, dtype=np.int64)
    if isinstance(first, np.floating):
        return np.asarray(values, dtype=first.dtype)
    return np.asarray(values, dtype=np.float32)


@register("CastMap", versions=(1,), domain=ML_DOMAIN)
class CastMap(OpRun):
    """CastMap (ml 1): map(int64, string|float) -> [1, n] tensor ordered by key.

    DENSE keeps every value; SPARSE places value k at column k of a [1, max_map] row, zeros
    elsewhere, and drops keys >= max_map as onnxruntime does. TO_STRING writes floats with
    C's "%f" (onnxruntime's std::to_string) and fills the holes of a sparse row with "0.f",
    onnxruntime's choice (the spec does not name one). TO_INT64 truncates floats and
    parses strings; TO_FLOAT parses strings.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        check_choice(self, "cast_to", self.cast_to, ("TO_FLOAT", "TO_STRING", "TO_INT64"))
        check_choice(self, "map_form", self.map_form, ("DENSE", "SPARSE"))
        self._declared = declared_map_value_dtype(self, onnx_node.input[0])
        if self.map_form == "SPARSE" and (self.max_map is None or self.max_map < 0):
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'max_map' is {self.max_map!r}, expected a non-negative integer.")

    def _cast(self, values: np.ndarray) -> np.ndarray:
        target = self.cast_to
        try:
            if target == "TO_STRING":
                if values.dtype == object:
                    return values
                text = np.char.mod("%f", values.astype(np.float32).astype(np.float64))
                return text.astype(object)
            if values.dtype == object:
                values = values.astype(np.str_)
            if target == "TO_FLOAT":
                return values.astype(np.float32)
            if values.dtype.kind == "f":
                return np.trunc(values).astype(np.int64)
            return values.astype(np.int64)
        except ValueError as e:
            raise KernelError(f"{self.node_label()} cannot convert the map's values {target}: {e}") from None

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        keys, vals = _map_items(x, self.node_label())
        k = np.asarray(keys, dtype=np.int64) if keys else np.zeros(0, np.int64)
        v = self._cast(_values_array(vals, self._declared))
        if self.map_form == "DENSE":
            return (v[np.argsort(k, kind="stable")].reshape(1, -1),)
        if k.size and k.min() < 0:
            raise IndexOutOfRangeError(f"{self.node_label()}: map key {int(k.min())} is negative; SPARSE keys index the output.")
        fill = "0.f" if v.dtype == object else 0
        self.check_alloc([1, self.max_map], v.dtype)  # the model's max_map decides the width
        out = np.empty(self.max_map, dtype=v.dtype)
        out[...] = fill
        keep = k < self.max_map
        out[k[keep]] = v[keep]
        return (out.reshape(1, -1),)


@register("DictVectorizer", versions=(1,), domain=ML_DOMAIN)
class DictVectorizer(OpRun):
    """DictVectorizer (ml 1): the map's value for vocabulary entry i goes to column i, zeros
    elsewhere; keys outside the vocabulary are ignored (onnxruntime). The output has shape
    [1, V] like onnxruntime's (the spec says 1-D; converted models declare [N, V]) and the
    type of the map's values as the graph declares it (map(string, double) gives double)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        strings, ints = self.string_vocabulary, self.int64_vocabulary
        if bool(strings) == bool(ints):
            raise InvalidAttributeError(
                f"{self.node_label()} must define exactly one of 'string_vocabulary' and 'int64_vocabulary'."
            )
        vocab = string_array(strings) if strings else np.asarray(ints, dtype=np.int64)
        self._size = vocab.size
        self._lookup = Lookup(vocab)
        self._string_keys = bool(strings)
        self._declared = declared_map_value_dtype(self, onnx_node.input[0])

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        keys, vals = _map_items(x, self.node_label())
        values = _values_array(vals, self._declared)
        out = np.zeros((1, self._size), dtype=values.dtype)
        if values.dtype == object:
            out[...] = ""
        if not keys:
            return (out,)
        k = string_array(keys) if self._string_keys else np.asarray(keys)
        try:
            pos, found = self._lookup.find(k)
        except KernelError as e:
            raise KernelError(f"{self.node_label()}: {e}") from None
        out[0, pos[found]] = values[found]
        return (out,)


@register("ZipMap", versions=(1,), domain=ML_DOMAIN)
class ZipMap(OpRun):
    """ZipMap (ml 1): a [N, C] tensor -> a sequence (list) of N maps {label: float}.

    Keys are Python ints or strs, values Python floats, as onnxruntime returns them. A
    [C] input gives one map.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        labels = class_labels(self, "classlabels_int64s", "classlabels_strings")
        if labels is None:
            raise InvalidAttributeError(
                f"{self.node_label()} must define one of 'classlabels_int64s' and 'classlabels_strings'."
            )
        self._keys = labels.tolist()

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        rows = x.reshape(1, -1) if x.ndim == 1 else x
        if rows.ndim != 2 or rows.shape[1] != len(self._keys):
            raise KernelError(
                f"{self.node_label()} has {len(self._keys)} labels, the input has shape {list(x.shape)} "
                f"(expected [N, {len(self._keys)}])."
            )
        keys = self._keys
        # one dict per row: the output is a Python list of maps, built from Python floats
        return ([dict(zip(keys, row)) for row in rows.tolist()],)
