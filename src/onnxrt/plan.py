"""The execution plan: values in a flat list of slots, each step a bound kernel with slot indices."""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import GraphProto

from . import compat, registry
from .dtypes import value_type_string
from .errors import GraphError, KernelError, OnnxRuntimeError, UnsupportedOperatorError, describe_value
from .functions import FunctionKey, GraphNode, ValueTypes, expand, expansion_budget, schema_body
from .model import initializer_array, load_limit, sort_nodes, sparse_initializer_array
from .ops_cpu._op import OpRun
from .typecheck import check_input_types

_MISSING = 0  # slot read for an omitted optional input (""): always None
_SINK = 1  # slot receiving outputs a node produces but nobody named: never read


@dataclass
class Step:
    """One node of the plan."""

    op: OpRun
    fn: Callable[..., tuple[Any, ...]]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    #: slots whose last reader is this step (released after it when not keeping values)
    frees: tuple[int, ...]
    #: (name, slot) of outer-scope values the node's subgraphs read
    context: tuple[tuple[str, int], ...]
    node: GraphNode

    @property
    def name(self) -> str:
        return self.node.proto.name

    @property
    def op_type(self) -> str:
        return self.node.proto.op_type


def _readonly(arr: Any) -> Any:
    if isinstance(arr, np.ndarray) and arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


def _frozen(arr: Any) -> Any:
    """A fresh array the engine made (an initializer's value, perhaps a reshaped view of
    another fresh one) made read-only itself, its bases too, not through a view: kernels may
    then cache what they derive from it (Winograd's transformed weights) for as long as it
    lives, since nothing can write it any more."""
    chain = []
    base = arr
    while isinstance(base, np.ndarray):
        chain.append(base)
        base = base.base
    for a in reversed(chain):  # a view's flag can only be cleared after its base's
        a.flags.writeable = False
    return arr


def _fast_step(st: Step) -> tuple[Any, ...]:
    """The tuple the hot loop unpacks: (fn, getter of 2+ inputs, single input slot,
    single output slot, output slots, slots to free, context)."""
    getter = operator.itemgetter(*st.inputs) if len(st.inputs) > 1 else None
    in0 = st.inputs[0] if len(st.inputs) == 1 else -1
    out0 = st.outputs[0] if len(st.outputs) == 1 and st.outputs[0] != _SINK else -1
    return (st.fn, getter, in0, out0, st.outputs, st.frees, st.context)


def optimization_level(options: Any) -> int:
    """The numeric level of ``options.graph_optimization_level`` (all passes when no options)."""
    if options is None:
        return 99
    return int(getattr(options, "graph_optimization_level", 99))


def _fetcher(slots: tuple[int, ...]) -> Callable[[list[Any]], tuple[Any, ...]]:
    """``values -> tuple of values[s]``, in C (itemgetter of one slot returns the bare value)."""
    if len(slots) > 1:
        return operator.itemgetter(*slots)
    return lambda values: tuple(values[s] for s in slots)


def _schema_body(gn: GraphNode, types: ValueTypes | None = None) -> tuple[onnx.FunctionProto, dict[str, int]] | None:
    """The schema function body of an operator onnxrt has no kernel for: context-free, or
    context-dependent when ``types`` gives the node's input types (see functions.schema_body)."""
    return schema_body(gn, lambda op, domain, opset: registry.lookup(op, domain, opset) is not None, types)


class Plan:
    """A graph compiled once: kernels bound to slot indices, values released after their last reader.

    ``outer_names`` are the names visible from enclosing graphs (for subgraphs); the ones
    this graph actually reads are listed in :attr:`outer_inputs` and passed at run time
    through ``context``. ``outer_in_scope(name)`` tells whether an outer name was already
    defined where the node holding this graph stands (stored order, as onnx's checker
    scopes names): a node of this graph producing it breaks the specification (a
    ModelWarning); a name the enclosing graph defines later may be reused silently. None:
    every outer name is in scope.

    ``checked_feeds``: the caller validates every feed against the element type its graph
    input declares (OnnxInference does for the main graph), so those types are fixed. Node
    input types are checked against the schemas on the first run; the steps reading a value
    whose type the graph does not fix (an input declaring no element type or fed unchecked,
    an outer-scope value, the output of a node holding subgraphs) and the steps after them
    are checked on every run, once per combination of input types (:func:`_checked`).
    """

    def __init__(
        self,
        graph: GraphProto,
        opsets: dict[str, int],
        base_dir: str | None = None,
        functions: dict[FunctionKey, onnx.FunctionProto] | None = None,
        outer_names: set[str] | frozenset[str] = frozenset(),
        options: Any = None,
        value_info: dict[str, Any] | None = None,
        optimize: bool = True,
        overridable_initializers: bool = True,
        outer_in_scope: Callable[[str], bool] | None = None,
        checked_feeds: bool = False,
    ):
        self.graph = graph
        self.name = graph.name
        # off-specification models onnxruntime runs (onnxrt.compat): each reported once
        opsets = compat.complete_opsets(graph, opsets, options)
        compat.check_input_dims(graph, options)
        protos, shadowed, replaced = compat.repair_nodes(graph, outer_names, options, outer_in_scope)
        if shadowed:  # inside this graph its own values win over the enclosing graphs' ones
            outer_names = frozenset(set(outer_names) - shadowed)
        self.opsets = opsets
        self.base_dir = base_dir
        self.functions = functions or {}
        self.options = options
        #: (domain, op_type) of off-specification operators already reported for this graph
        self._reported: set[tuple[str, str]] = set()

        # --- constants -------------------------------------------------------------
        self.initializers: dict[str, Any] = {}
        limit = load_limit(options)
        for init in graph.initializer:
            if init.name not in replaced:  # (a Constant node of that name replaces it)
                self.initializers[init.name] = _frozen(initializer_array(init, base_dir, limit))
        for sp in graph.sparse_initializer:
            if sp.values.name in replaced:
                continue
            self.initializers[sp.values.name] = _frozen(sparse_initializer_array(sp, limit))
        self.input_names = [i.name for i in graph.input]
        self.output_names = [o.name for o in graph.output]
        seen: set[str] = set()
        for name in self.input_names:
            if name in seen:
                raise GraphError(f"Graph {graph.name!r} declares input {name!r} twice.")
            seen.add(name)
        #: inputs that must be fed (those without an initializer of the same name)
        self.required_inputs = [n for n in self.input_names if n not in self.initializers]

        # --- nodes: expand functions, sort, bind kernels --------------------------------
        nodes = [GraphNode(n, opsets) for n in protos]
        # value types are only looked up to build context-dependent function bodies
        types = ValueTypes(graph, opsets, self.functions)
        nodes = expand(nodes, self.functions, opsets, schema_body=_schema_body, types=types, budget=expansion_budget(options))
        local = set(self.input_names) | set(self.initializers)
        available = local | set(outer_names)
        order = sort_nodes(nodes, available, graph.name)
        nodes = [nodes[i] for i in order]
        defined = set(local)
        for gn in nodes:
            defined.update(o for o in gn.output if o)
        visible = defined | set(outer_names)
        for name in self.output_names:
            if name not in visible:
                raise GraphError(f"Graph {graph.name!r} declares output {name!r}, which nothing defines.")

        # --- graph optimisations (onnxrt.optim), on the checked and sorted graph ------------
        #: names of the optimisation passes that changed this graph
        self.applied_passes: list[str] = []
        level = optimization_level(options) if optimize else 0
        if level > 0 and nodes:
            from .optim import optimize as run_passes

            info = dict(value_info or {})
            if not info:
                from .optim.graph import value_info_map

                info = value_info_map(graph)
            # IR < 4 lists every initializer as an input, yet they are constants (as in onnxruntime)
            overridable = {n for n in self.input_names if n in self.initializers} if overridable_initializers else set()
            nodes, consts, self.applied_passes = run_passes(
                nodes, self.initializers, self.input_names, self.output_names, level, info, overridable, options
            )
            self.initializers = {k: _readonly(v) for k, v in consts.items()}
            nodes = [nodes[i] for i in sort_nodes(nodes, set(self.input_names) | set(self.initializers) | set(outer_names), graph.name)]
            defined = set(self.input_names) | set(self.initializers)
            for gn in nodes:
                defined.update(o for o in gn.output if o)

        # --- slots ---------------------------------------------------------------------
        self.slots: dict[str, int] = {}

        def slot(name: str, output: bool = False) -> int:
            if not name:
                return _SINK if output else _MISSING
            s = self.slots.get(name)
            if s is None:
                s = self.slots[name] = len(self.slots) + 2
            return s

        for name in self.input_names:
            slot(name)
        for name in self.initializers:
            slot(name)
        outer_used: list[str] = []

        # stored position of each node output: the names in scope at a node are the graph's
        # inputs and initializers, the outputs of the nodes stored before it, and what was in
        # scope at the node holding this graph (onnx's checker reads scopes so)
        stored_at = {o: i for i, p in enumerate(protos) for o in p.output if o}

        def compile_graph_for(gn: GraphNode) -> Callable[[GraphProto, str], Plan]:
            at = next((stored_at[o] for o in gn.output if o in stored_at), None)

            def in_scope(name: str) -> bool:
                if name in local or at is None:
                    return True
                i = stored_at.get(name)
                if i is not None:
                    return i < at
                return outer_in_scope(name) if outer_in_scope is not None else True

            def compile_graph(sub: GraphProto, att_name: str, optimize_sub: bool = True) -> Plan:
                # a kernel that inspects the subgraph's operators (Gradient) asks for it unoptimised
                return Plan(
                    sub, gn.opsets, base_dir, self.functions, outer_names=visible, options=options,
                    optimize=optimize and optimize_sub, outer_in_scope=in_scope,
                )

            return compile_graph

        # the initializers no feed can replace: kernels may cache what they derive from them
        constants = set(self.initializers) - (set(self.input_names) if overridable_initializers else set())
        self.steps: list[Step] = []
        for gn in nodes:
            op = self._make_op(gn, compile_graph_for(gn))
            if consts := [i for i, n in enumerate(gn.input) if n in constants]:
                op.set_const_inputs(consts)
            ins = tuple(slot(n) for n in gn.input)
            outs = tuple(slot(n, output=True) for n in gn.output)
            ctx_names = list(op.implicit_inputs)
            for n in ctx_names:
                if n not in defined and n not in outer_used:
                    outer_used.append(n)
            ctx = tuple((n, slot(n)) for n in ctx_names)
            self.steps.append(Step(op, op._run, ins, outs, (), ctx, gn))
        for n in gn_inputs_from_outer(nodes, defined):
            if n not in outer_used:
                outer_used.append(n)
        for n in self.output_names:
            if n not in defined and n not in outer_used:
                outer_used.append(n)
        self.outer_inputs: list[str] = outer_used
        self._outer_slots = tuple((n, slot(n)) for n in outer_used)
        self.n_slots = len(self.slots) + 2
        self._output_slots = tuple(self.slots[n] for n in self.output_names)
        self._input_slots = tuple(self.slots[n] for n in self.input_names)
        #: whether some kernel may call BLAS (OpRun.uses_blas): runs of other plans leave
        #: BLAS's thread count as it is (RunScope)
        self.uses_blas = any(getattr(st.op, "uses_blas", True) for st in self.steps)

        # --- liveness: release a value after its last reader ----------------------------------
        keep = set(self._output_slots) | {self.slots[n] for n in self.initializers}
        last: dict[int, int] = {}
        for i, st in enumerate(self.steps):
            for s in st.inputs:
                last[s] = i
            for _, s in st.context:
                last[s] = i
            for s in st.outputs:  # an output nobody reads is released right away
                last.setdefault(s, i)
        frees: list[list[int]] = [[] for _ in self.steps]
        for s, i in last.items():
            if s not in keep and s not in (_MISSING, _SINK):
                frees[i].append(s)
        for st, fr in zip(self.steps, frees):
            st.frees = tuple(fr)

        template: list[Any] = [None] * self.n_slots
        for name, value in self.initializers.items():
            template[self.slots[name]] = value
        self._template = template
        #: every step's input types are checked on the first run; those of _dynamic_steps on every run
        self._types_checked = False
        fixed = self._fixed_input_slots(graph) if checked_feeds else set()
        self._dynamic_steps = _dynamic_steps(self.steps, set(self._input_slots) - fixed, self._outer_slots)
        #: the kernels of the checked steps, unwrapped (runner's calls of input types seen before)
        self._unchecked: dict[int, Callable[..., Any]] = {}
        for i in self._dynamic_steps:
            st = self.steps[i]
            self._unchecked[i] = st.fn
            st.fn = _checked(st.op, st.fn)
        self._fast = [_fast_step(st) for st in self.steps]

    def _fixed_input_slots(self, graph: GraphProto) -> set[int]:
        """Slots of the graph inputs whose feeds are checked against a declared element type
        (a tensor with elem_type set): their type is the same on every run."""
        fixed = set()
        for vi in graph.input:
            tp = vi.type
            if vi.HasField("type") and tp.WhichOneof("value") == "tensor_type" and tp.tensor_type.elem_type:
                fixed.add(self.slots[vi.name])
        return fixed

    # ---------------------------------------------------------------------------------

    def _make_op(self, gn: GraphNode, compile_graph: Callable[..., Any]) -> OpRun:
        node = gn.proto
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        cls, since = registry.resolve(node.op_type, domain, gn.opsets.get(domain), node.name)
        note = getattr(cls, "off_spec_note", None)
        if note is not None and (domain, node.op_type) not in self._reported:
            # an operator outside the specification at the model's opset (ops_cpu.op_legacy): once per graph
            self._reported.add((domain, node.op_type))
            compat.off_spec(
                self.options,
                f"Node {node.name!r} uses {node.op_type!r} at opset {gn.opsets.get(domain)} of domain "
                f"{domain or 'ai.onnx'!r}, which {note}; onnxrt runs it so.",
                UnsupportedOperatorError, stacklevel=5,
            )
        try:
            # graph: the graph holding the node (Gradient differentiates part of it)
            return cls(
                node, None, since_version=since, opsets=gn.opsets, compile_graph=compile_graph,
                session_options=self.options, graph=self.graph, base_dir=self.base_dir,
            )
        except OnnxRuntimeError:
            raise
        except Exception as e:  # a kernel constructor failing on its attributes
            raise GraphError(f"Node {node.name!r} ({node.op_type}) cannot be built: {e}") from e

    # ---------------------------------------------------------------------------------

    def run_list(self, inputs: list[Any], context: dict[str, Any] | None = None) -> list[Any]:
        """Run with inputs in declaration order; returns outputs in declaration order.

        Inputs beyond ``len(inputs)`` keep their initializer values (or stay unset).
        This is the entry point nested plans (If, Loop, Scan bodies) use.
        """
        values = self._template.copy()
        for s, v in zip(self._input_slots, inputs):
            values[s] = v
        if self._outer_slots:
            for name, s in self._outer_slots:
                values[s] = context[name]  # type: ignore[index]
        self._execute(values)
        return [values[s] for s in self._output_slots]

    def runner(self, context: dict[str, Any] | None = None) -> Callable[[list[Any]], tuple[Any, ...]]:
        """``run(inputs) -> outputs`` (a tuple) for a subgraph run many times in a row (Loop, Scan
        and SequenceMap bodies): like :meth:`run_list`, with less work per call. One list of
        values is reused from call to call (no template copy), inputs are bound with a slice,
        the steps run in a loop of their own, and an Identity whose output only leaves the
        graph is not run: the output is fetched from its input (Identity hands over the same
        object). Every call must give every input. A runner belongs to one kernel call (one
        thread); outer values are bound again each call since their last reader releases them.
        The first run of the plan takes the checked path of :meth:`_execute`. When the types
        of the inputs and outer values decide every other (no node holds a subgraph), a call
        whose input types an earlier call checked runs the steps without their checks."""
        values = self._template.copy()
        in_slots, outer = self._input_slots, self._outer_slots
        steps, fetch_slots, raw = self._runner_steps()
        seen: set[tuple[Any, ...]] = set()
        nd = np.ndarray
        outer_key = tuple(_type_key(context[n]) for n, _ in outer) if raw is not None and outer else ()  # type: ignore[index]
        execute = self._execute
        full_fetch = _fetcher(self._output_slots)
        fetch = _fetcher(fetch_slots)
        n_in = len(in_slots)
        # the inputs own slots 1..n (they are numbered first): bound with one slice assignment
        contiguous = in_slots == tuple(range(1, n_in + 1))
        wrap = self._wrap

        def run(inputs: list[Any]) -> tuple[Any, ...]:
            if contiguous and len(inputs) == n_in:
                values[1 : n_in + 1] = inputs
            else:
                for s, v in zip(in_slots, inputs):
                    values[s] = v
            if outer:
                for name, s in outer:
                    values[s] = context[name]  # type: ignore[index]
            if not self._types_checked:
                execute(values)
                return full_fetch(values)
            todo = steps
            if raw is not None:
                key = tuple([v.dtype if type(v) is nd else _type_key(v) for v in inputs]) + outer_key
                if key in seen:
                    todo = raw
            index = 0
            try:
                for index, fn, get, in0, out0, outs, frees, ctx in todo:
                    if ctx:
                        res = fn(*[values[s] for s in get], context={n: values[s] for n, s in ctx})
                    elif in0 >= 0:
                        res = fn(values[in0])
                    else:
                        res = fn(*get(values)) if get is not None else fn()
                    if out0 >= 0:
                        values[out0] = res[0]
                    else:
                        for s, r in zip(outs, res):
                            if s:  # slot 0 stands for omitted inputs: it must stay None
                                values[s] = r
                    if frees:
                        for s in frees:
                            values[s] = None
            except Exception as e:
                raise wrap(e, index, values) from e
            if todo is not raw and raw is not None:
                seen.add(key)
            return fetch(values)

        return run

    def _runner_steps(self) -> tuple[tuple[tuple[Any, ...], ...], tuple[int, ...], tuple[tuple[Any, ...], ...] | None]:
        """The steps :meth:`runner` runs, as (index, fn, getter, single input, single output,
        outputs, frees, context), the slots its outputs are fetched from, and the steps without
        their type checks when the input types decide all others (None otherwise). Computed once."""
        cached = getattr(self, "_runner_cache", None)
        if cached is not None:
            return cached
        read = {s for st in self.steps for s in st.inputs} | {s for st in self.steps for _, s in st.context}
        alias: dict[int, int] = {}
        skipped: set[int] = set()
        for i, st in enumerate(self.steps):
            proto = st.node.proto
            if (
                proto.op_type == "Identity" and proto.domain in ("", "ai.onnx") and not st.context
                and len(st.inputs) == 1 and len(st.outputs) == 1 and st.inputs[0] != _MISSING
                and st.outputs[0] in self._output_slots and st.outputs[0] not in read
                # the input must stay alive until the outputs are fetched
                and not any(st.inputs[0] in later.frees for later in self.steps[i + 1 :])
            ):
                alias[st.outputs[0]] = st.inputs[0]
                skipped.add(i)
        steps = []
        for i, st in enumerate(self.steps):
            if i in skipped:
                continue
            # inputs: the slot list itself (with a context), one slot (in0), or an itemgetter
            get: Any = st.inputs if st.context else operator.itemgetter(*st.inputs) if len(st.inputs) > 1 else None
            in0 = st.inputs[0] if len(st.inputs) == 1 and not st.context else -1
            out0 = st.outputs[0] if len(st.outputs) == 1 and st.outputs[0] != _SINK else -1
            steps.append((i, st.fn, get, in0, out0, st.outputs, st.frees, st.context))
        raw = None
        if self._unchecked and not any(st.context or _holds_graph(st.node.proto) for st in self.steps):
            raw = tuple((t[0], self._unchecked.get(t[0], t[1]), *t[2:]) for t in steps)
        cached = (tuple(steps), tuple(alias.get(s, s) for s in self._output_slots), raw)
        self._runner_cache = cached
        return cached

    def run_dict(self, feeds: dict[str, Any], context: dict[str, Any] | None = None, keep_all: bool = False) -> list[Any]:
        """Run from a name -> value dict; returns the slot list (all values when ``keep_all``)."""
        values = self._template.copy()
        slots = self.slots
        for name, v in feeds.items():
            values[slots[name]] = v
        if self._outer_slots:
            for name, s in self._outer_slots:
                values[s] = context[name]  # type: ignore[index]
        if keep_all:
            self._execute_slow(values, keep=True)
        else:
            self._execute(values)
        return values

    def _execute(self, values: list[Any]) -> None:
        if not self._types_checked:
            self._execute_slow(values)
            return
        i = 0
        try:
            # one tuple per step, unpacked once; the arity decides how inputs are fetched
            for i, (fn, get, in0, out0, outs, frees, ctx) in enumerate(self._fast):
                if ctx:
                    args = get(values) if get is not None else ((values[in0],) if in0 >= 0 else ())
                    res = fn(*args, context={n: values[s] for n, s in ctx})
                elif get is not None:
                    res = fn(*get(values))
                elif in0 >= 0:
                    res = fn(values[in0])
                else:
                    res = fn()
                if out0 >= 0:
                    values[out0] = res[0]
                else:
                    for s, r in zip(outs, res):
                        values[s] = r
                if frees:
                    for s in frees:
                        values[s] = None
        except Exception as e:
            raise self._wrap(e, i, values) from e

    def _execute_slow(
        self, values: list[Any], trace: Callable[..., None] | None = None, keep: bool = False
    ) -> None:
        """The instrumented loop: type checks (first run), ``trace(step, args, results, seconds)``
        after each node, and every value kept when ``keep`` (for ``intermediate=True``)."""
        check = not self._types_checked
        perf = time.perf_counter
        for i, st in enumerate(self.steps):
            args = [values[s] for s in st.inputs]
            t0 = perf()
            try:
                if check:
                    check_input_types(st.op, args)
                if st.context:
                    res = st.fn(*args, context={n: values[s] for n, s in st.context})
                else:
                    res = st.fn(*args)
            except Exception as e:
                raise self._wrap(e, i, values) from e
            dt = perf() - t0
            for s, r in zip(st.outputs, res):
                values[s] = r
            if trace is not None:
                trace(st, args, res, dt)
            if not keep:
                for s in st.frees:
                    values[s] = None
        self._types_checked = True

    def _wrap(self, e: BaseException, index: int, values: list[Any]) -> OnnxRuntimeError:
        st = self.steps[index]
        shown = ", ".join(
            f"{n or '<none>'}: {describe_value(values[s]) if s != _MISSING else 'None'}"
            for n, s in zip(st.node.input, st.inputs)
        )
        where = f" (inlined from {st.node.origin!r})" if st.node.origin else ""
        msg = f"Node {st.name!r} ({st.op_type}){where} failed on inputs [{shown}]: {e}"
        if isinstance(e, OnnxRuntimeError):
            cls: type[OnnxRuntimeError] = type(e)
        elif isinstance(e, MemoryError):
            from .errors import AllocationError

            cls = AllocationError
        else:
            cls = KernelError
        try:
            return cls(msg)
        except Exception:  # noqa: BLE001  (a subclass with another constructor)
            return KernelError(msg)

    def value_names(self) -> list[str]:
        """Every named value in slot order."""
        return sorted(self.slots, key=self.slots.__getitem__)


def _dynamic_steps(steps: list[Step], roots: set[int], outer: tuple[tuple[str, int], ...]) -> tuple[int, ...]:
    """Indices of the steps whose input types may change from run to run: those reading a
    root slot, an outer-scope value, or the output of such a step or of a node holding
    subgraphs (a branch may differ from another). An output the schema types concretely
    (Shape's tensor(int64)) is fixed whatever the inputs."""
    dyn = set(roots) | {s for _, s in outer}
    found = []
    for i, st in enumerate(steps):
        reads = any(s in dyn for s in st.inputs if s != _MISSING) or any(s in dyn for _, s in st.context)
        if reads:
            found.append(i)
        if not (reads or st.context or st.node.proto.attribute and _holds_graph(st.node.proto)):
            continue
        schema = getattr(st.op, "_schema", None)
        formal = list(schema.outputs) if schema is not None else []
        params = {c.type_param_str for c in schema.type_constraints} if schema is not None else set()
        for k, s in enumerate(st.outputs):
            if k < len(formal) and formal[k].type_str not in params and not st.context:
                continue  # a concrete output type
            dyn.add(s)
    return tuple(found)


def _holds_graph(proto: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in proto.attribute)


def _type_key(value: Any) -> Any:
    return None if value is None else value_type_string(value)


def _checked(op: OpRun, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` checking its inputs' types against ``op``'s rules first, once per combination of
    input types (an array's dtype, any other value's type string): a run of types already
    seen costs one tuple and one set lookup."""
    passed: set[Any] = set()
    nd = np.ndarray
    n = len(op.onnx_node.input)
    if n == 1 and not _holds_graph(op.onnx_node):

        def run1(a: Any) -> Any:  # the common arities without the generic tuple
            key = a.dtype if type(a) is nd else _type_key(a)
            if key not in passed:
                check_input_types(op, (a,))
                passed.add(key)
            return fn(a)

        return run1
    if n == 2 and not _holds_graph(op.onnx_node):

        def run2(a: Any, b: Any) -> Any:
            key = (a.dtype if type(a) is nd else _type_key(a), b.dtype if type(b) is nd else _type_key(b))
            if key not in passed:
                check_input_types(op, (a, b))
                passed.add(key)
            return fn(a, b)

        return run2

    def run(*args: Any, **kwargs: Any) -> Any:
        key = tuple([a.dtype if type(a) is nd else _type_key(a) for a in args])
        if key not in passed:
            check_input_types(op, args)
            passed.add(key)
        return fn(*args, **kwargs)

    return run


def gn_inputs_from_outer(nodes: list[GraphNode], defined: set[str]) -> list[str]:
    """Direct node inputs that come from an enclosing graph."""
    out: list[str] = []
    for gn in nodes:
        for n in gn.input:
            if n and n not in defined and n not in out:
                out.append(n)
    return out

