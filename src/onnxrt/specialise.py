"""Shape specialisation: runs of one input-shape signature skip the steps whose values that signature fixes (a Plan's step tables)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

# Exporters give dynamic axes as shape arithmetic inside the graph: Shape, Gather, Unsqueeze,
# Concat, Reshape's target, Range and the masks built from it (gpt2 from torchscript: 1,526
# steps, 1,000 of them such arithmetic, recomputed on every run). For one signature of the
# feeds' shapes (and dtypes) every value computable from shapes and constants is the same on
# every run. A Specialiser finds those steps once per plan (by the rules below, from the
# operators' definitions), and at the second run of a signature keeps their values as
# constants of a step table without them; later runs of that signature run only the rest.
# Which operators:
# - Shape and Size give values from their input's shape alone;
# - SHAPE_FROM_SHAPES give an output whose shape follows from their inputs' shapes (and
#   attributes): element-wise operators, products, normalisations, Gather (indices' shape),
#   Concat...;
# - SHAPE_FROM_VALUES give an output whose shape follows from the first input's shape and
#   the other inputs' values (Reshape's target, Expand's shape, Slice's bounds...);
# - every other operator (NonZero, Unique, Loop, If, a custom one...) gives neither; a step
#   whose inputs are all known values gives a known value, unless it draws random numbers.

SHAPE_OF = frozenset({"Shape", "Size"})
SHAPE_FROM_SHAPES = frozenset({
    "Abs", "Acos", "Add", "And", "Asin", "Atan", "BitShift", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Concat", "Conv",
    "Cos", "Div", "Elu", "Equal", "Erf", "Exp", "Flatten", "Floor", "Gather", "GatherElements", "Gelu", "Gemm",
    "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LayerNormalization",
    "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "MatMul", "Max", "Mean", "Min", "Mod", "Mul", "Neg",
    "Not", "Or", "Pow", "PRelu", "Reciprocal", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Softmax",
    "Softplus", "Sqrt", "Sub", "Sum", "Tan", "Tanh", "Transpose", "Trilu", "Where", "Xor",
    "FusedElementwise", "FusedGemm", "FusedMatMul", "FusedAdd", "FusedSum", "FusedConv", "MatMulAdd",
})
SHAPE_FROM_VALUES = frozenset({
    "ConstantOfShape", "Expand", "Range", "Reshape", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
    "Slice", "Split", "Squeeze", "Tile", "Unsqueeze",
})
#: operators whose result must not be computed once for all runs
NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
                              "Multinomial", "Dropout"})
#: steps a plan must fix for a signature before it specialises at all
MIN_STEPS = 8
#: bytes of values one specialised table may keep as constants
MAX_BYTES = 16 << 20
#: signatures with a table of their own at most (the least recently used goes)
MAX_TABLES = 4
#: signatures counted at most before the counts start over
MAX_SEEN = 64


def _signature(feeds: dict[str, Any]) -> tuple | None:
    sig = []
    for name, v in feeds.items():
        if type(v) is not np.ndarray:
            return None
        sig.append((name, v.shape, v.dtype.str))
    sig.sort()
    return tuple(sig)


class Specialiser:
    """The steps of ``plan`` (a :class:`onnxrt.plan.Plan` of a main graph) whose values one
    signature of the feeds' shapes and dtypes fixes, and the step tables without them, one per
    signature run twice (at most MAX_TABLES). ``fixed`` lists those steps' indices; empty when
    the plan has too few of them to gain (then :meth:`lookup` always gives None)."""

    def __init__(self, plan: Any, missing: int, make_row: Callable[[int, Any], tuple]) -> None:
        self.plan = plan
        self._row = make_row
        self._missing = missing
        self.fixed, self.frontier = self._analyse()
        self._seen: dict[tuple, int] = {}
        self._tables: OrderedDict[tuple, tuple[list[Any], tuple] | None] = OrderedDict()
        self._lock = threading.Lock()

    def _analyse(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        plan = self.plan
        overridable = set(plan.input_names) & set(plan.initializers)
        known_value = {plan.slots[n] for n in plan.initializers if n not in overridable} | {self._missing}
        known_shape = set(known_value) | {plan.slots[n] for n in plan.input_names}
        outputs = set(plan.output_slots)
        fixed: list[int] = []
        for i, st in enumerate(plan.steps):
            op = st.op_type
            if st.context or op in NONDETERMINISTIC or any(s == self._missing for s in st.outputs):
                continue
            ins = st.inputs
            if op in SHAPE_OF:
                value = bool(ins) and ins[0] in known_shape
            else:
                value = all(s in known_value for s in ins)
            if value and not any(s in outputs for s in st.outputs):
                known_value.update(st.outputs)
                known_shape.update(st.outputs)
                fixed.append(i)
                continue
            if (op in SHAPE_FROM_SHAPES and all(s in known_shape for s in ins)) or (
                    op in SHAPE_FROM_VALUES and ins and ins[0] in known_shape and all(s in known_value for s in ins[1:])):
                known_shape.update(st.outputs)
        if len(fixed) < MIN_STEPS:
            return (), ()
        fixed_set = set(fixed)
        produced = {s for i in fixed for s in plan.steps[i].outputs}
        read = {s for i, st in enumerate(plan.steps) if i not in fixed_set for s in st.inputs}
        return tuple(fixed), tuple(sorted(produced & read))

    def lookup(self, feeds: dict[str, Any]) -> tuple[tuple | None, tuple[list[Any], tuple] | None]:
        """(the signature of ``feeds`` or None, its specialised (template, table) or None)."""
        if not self.fixed:
            return None, None
        sig = _signature(feeds)
        if sig is None:
            return None, None
        entry = self._tables.get(sig)
        if entry is not None:
            self._tables.move_to_end(sig)
        return sig, entry

    def wants(self, sig: tuple) -> bool:
        """Whether this run of ``sig`` should build its table (its second run, none yet)."""
        if sig in self._tables:
            return False
        if len(self._seen) >= MAX_SEEN and sig not in self._seen:
            self._seen.clear()
        n = self._seen[sig] = self._seen.get(sig, 0) + 1
        return n == 2

    def capture(self) -> _Capture:
        """A hook keeping copies of the frontier's values as a run produces them (the run
        releases its values as usual: keeping all of them doubled bert's peak memory)."""
        return _Capture(set(self.frontier))

    def build(self, sig: tuple, values: dict[int, Any]) -> None:
        """The table of ``sig`` from the frontier's values of a run (slot -> value)."""
        plan = self.plan
        template = list(plan._template)
        size = 0
        for s in self.frontier:
            v = values.get(s)
            if isinstance(v, np.ndarray):  # (a copy the capture made)
                v.flags.writeable = False
                size += v.nbytes
            elif v is None or isinstance(v, list):
                return self._give_up(sig)
            template[s] = v
        if size > MAX_BYTES:
            return self._give_up(sig)
        fixed = set(self.fixed)
        keep = set(plan.output_slots) | {plan.slots[n] for n in plan.initializers} | set(self.frontier)
        rest = [i for i in range(len(plan.steps)) if i not in fixed]
        last: dict[int, int] = {}
        for i in rest:
            st = plan.steps[i]
            for s in st.inputs:
                last[s] = i
            for _, s in st.context:
                last[s] = i
            for s in st.outputs:
                last.setdefault(s, i)
        frees: dict[int, list[int]] = {}
        for s, i in last.items():
            if s not in keep and s >= 2:  # (0 and 1: the missing and sink slots)
                frees.setdefault(i, []).append(s)
        table = tuple(self._row(i, replace(plan.steps[i], frees=tuple(frees.get(i, ())))) for i in rest)
        with self._lock:
            self._tables[sig] = (template, table)
            while len(self._tables) > MAX_TABLES:
                self._tables.popitem(last=False)

    def _give_up(self, sig: tuple) -> None:
        with self._lock:
            self._tables[sig] = None  # (kept as "no table": the general one runs)
            while len(self._tables) > MAX_TABLES:
                self._tables.popitem(last=False)


class _Capture:
    """``after`` hook of a run: copies of the values written to ``slots`` (read-only)."""

    __slots__ = ("slots", "values", "size")

    def __init__(self, slots: set[int]) -> None:
        self.slots = slots
        self.values: dict[int, Any] = {}
        self.size = 0

    def after(self, st: Any, args: list[Any], results: tuple[Any, ...], seconds: float) -> None:
        for s, v in zip(st.outputs, results):
            if s in self.slots and self.size <= MAX_BYTES:  # (past it the table is given up anyway)
                if isinstance(v, np.ndarray):
                    self.size += v.nbytes
                    v = np.array(v, copy=True)
                self.values[s] = v
