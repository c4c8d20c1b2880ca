"""The execution plan: values in a flat list of slots, each step a bound kernel with slot indices.

A :class:`Plan` is built in named stages (its docstring lists them) and run by one loop,
:meth:`Plan._loop`, over a step table (:func:`_row`). Hooks (:class:`Hooks`: a callable
before and after each node, intermediates kept, input types checked) run through the same
loop on a table derived from the plain one, as do Loop, Scan and SequenceMap bodies
(:meth:`Plan.runner`).
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import onnx
from onnx import GraphProto

from . import compat, dispatch, registry
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
    """One node of the plan: its kernel and the slots it reads and writes."""

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

    @property
    def kernel(self) -> OpRun:
        """The bound kernel (an :class:`OpRun`), the same object as :attr:`op`."""
        return self.op

    @property
    def input_names(self) -> list[str]:
        """The names of the node's inputs ("" for an omitted one), in the order of :attr:`inputs`."""
        return list(self.node.proto.input)

    @property
    def output_names(self) -> list[str]:
        """The names of the node's outputs, in the order of :attr:`outputs`."""
        return list(self.node.proto.output)


@dataclass
class Hooks:
    """What :meth:`Plan.execute` does around each node besides running it.

    ``before(step, args)`` is called before the node's kernel, ``after(step, args, results,
    seconds)`` after it (the ``trace`` of :meth:`onnxrt.OnnxInference.run`; ``seconds`` is the
    kernel's time). ``keep``: no value is released after its last reader (every intermediate
    stays in the value list). ``check_types``: every node's input types are checked against
    its schema before it runs (a plan does so on its first run anyway). An exception a hook
    raises leaves the run as it is, not wrapped as a node's failure."""

    before: Callable[[Step, list[Any]], None] | None = None
    after: Callable[[Step, list[Any], tuple[Any, ...], float], None] | None = None
    keep: bool = False
    check_types: bool = False


class StageRecord(NamedTuple):
    """One stage of a plan's construction (:attr:`Plan.stage_log`)."""

    name: str
    seconds: float
    #: what the stage left, in a few words ("12 nodes", "31 slots")
    summary: str


class _HookError(Exception):
    """Carries an exception a hook raised through :meth:`Plan._loop`, which re-raises it as it was."""

    def __init__(self, error: Exception):
        super().__init__(error)
        self.error = error


class _Scope(NamedTuple):
    """What the expand stage knows of the names around the nodes, for binding their subgraphs."""

    #: the graph's inputs and initializers
    local: set[str]
    #: every name a subgraph may read: defined in this graph or visible from the enclosing ones
    visible: set[str]
    #: stored position of each node output (onnx's checker scopes names by it)
    stored_at: dict[str, int]
    outer_in_scope: Callable[[str], bool] | None


def _row(index: int, st: Step) -> tuple[Any, ...]:
    """One row of a step table, the tuple :meth:`Plan._loop` unpacks: (index, fn, get, in0,
    out0, outputs, frees, context). ``get`` fetches 2+ inputs (an itemgetter) or, for a node
    with a context, is its tuple of input slots; ``in0`` is the single input's slot (-1: not
    one input, or a context); ``out0`` the single output's slot (-1: several, or none named)."""
    get: Any = st.inputs if st.context else operator.itemgetter(*st.inputs) if len(st.inputs) > 1 else None
    in0 = st.inputs[0] if len(st.inputs) == 1 and not st.context else -1
    out0 = st.outputs[0] if len(st.outputs) == 1 and st.outputs[0] != _SINK else -1
    return (index, st.fn, get, in0, out0, st.outputs, st.frees, st.context)


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

    Construction runs these stages in order (each logged in :attr:`stage_log`):

    1. ``repair``: off-specification models onnxruntime runs (:mod:`onnxrt.compat`): opsets
       completed, input dims checked, node protos repaired -> the node protos to compile.
    2. ``load_constants``: initializers decoded and frozen, input and output names
       -> :attr:`initializers`, :attr:`input_names`, :attr:`output_names`, :attr:`required_inputs`.
    3. ``expand``: functions inlined, nodes sorted, outputs checked -> the sorted
       :class:`GraphNode` list and the names in scope for subgraphs.
    4. ``optimise``: :mod:`onnxrt.optim`'s passes at the options' level, nodes sorted again
       -> nodes, :attr:`initializers` (folded constants) and :attr:`applied_passes`.
    5. ``bind``: each node's kernel resolved in the registry and built (subgraphs compiled
       into plans of their own); constant inputs marked -> one :class:`OpRun` per node.
    6. ``allocate``: one slot per value (inputs, initializers, then node values in order;
       0 and 1 are reserved) -> :attr:`slots`, :attr:`steps`, :attr:`input_slots`,
       :attr:`output_slots`, :attr:`outer_slots`, :attr:`outer_inputs`, :attr:`n_slots`.
    7. ``liveness``: each value released after its last reader (``Step.frees``), outputs and
       initializers kept -> the template value list (:meth:`new_values`).
    8. ``type_checks``: the steps whose input types may change from run to run wrap their
       kernel in a per-run check (``Step.fn``).
    9. ``tables``: the step table :meth:`_loop` runs (:func:`_row`).

    Running: :meth:`new_values` then :meth:`execute` (with optional :class:`Hooks`), or
    :meth:`run_dict` / :meth:`run_list`, or :meth:`runner` for a body run many times; every
    one of them executes steps through :meth:`_loop` only.
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
        constants: dict[str, np.ndarray] | None = None,
    ):
        self.graph = graph
        #: initializers decoded by the caller, by name: used instead of the graph's data
        #: (OnnxInference keeps one copy of a model's weights, see ``OnnxInference.model``)
        self._given = constants or {}
        self.name = graph.name
        self.base_dir = base_dir
        self.functions = functions or {}
        self.options = options
        #: (domain, op_type) of off-specification operators already reported for this graph
        self._reported: set[tuple[str, str]] = set()
        #: the construction's stages, in the order they ran
        self.stage_log: list[StageRecord] = []
        log = self._log
        t = time.perf_counter()
        protos, outer_names, replaced = self._stage_repair(opsets, outer_names, outer_in_scope)
        t = log("repair", t, f"{len(protos)} nodes")
        self._stage_load_constants(replaced)
        t = log("load_constants", t, f"{len(self.initializers)} initializers")
        nodes, scope = self._stage_expand(protos, outer_names, outer_in_scope)
        t = log("expand", t, f"{len(nodes)} nodes")
        nodes = self._stage_optimise(nodes, outer_names, value_info, optimize, overridable_initializers)
        t = log("optimise", t, f"{len(nodes)} nodes, passes {self.applied_passes}")
        ops = self._stage_bind(nodes, scope, optimize, overridable_initializers)
        t = log("bind", t, f"{len(ops)} kernels")
        self._stage_allocate(nodes, ops)
        t = log("allocate", t, f"{self.n_slots} slots")
        self._stage_liveness()
        t = log("liveness", t, f"{sum(len(st.frees) for st in self.steps)} releases")
        self._stage_type_checks(checked_feeds)
        t = log("type_checks", t, f"{len(self._dynamic_steps)} steps checked every run")
        self._stage_tables()
        log("tables", t, f"{len(self._table)} rows")
        #: shape specialisation of run_dict's runs (onnxrt.specialise), once enabled
        self._specialiser: Any = None

    def enable_specialisation(self) -> bool:
        """Let :meth:`run_dict` keep, per signature of the feeds' shapes and dtypes run twice,
        a step table without the steps that signature fixes (:mod:`onnxrt.specialise`);
        returns whether this plan has enough such steps to gain."""
        from .specialise import Specialiser

        self._specialiser = Specialiser(self, _MISSING, _row)
        return bool(self._specialiser.fixed)

    def _log(self, name: str, t0: float, summary: str) -> float:
        t = time.perf_counter()
        self.stage_log.append(StageRecord(name, t - t0, summary))
        return t

    # --- construction stages --------------------------------------------------------------

    def _stage_repair(
        self, opsets: dict[str, int], outer_names: set[str] | frozenset[str], outer_in_scope: Callable[[str], bool] | None
    ) -> tuple[list[onnx.NodeProto], set[str] | frozenset[str], set[str]]:
        """Report and repair what breaks the specification: (node protos, outer names, replaced initializers)."""
        graph, options = self.graph, self.options
        # off-specification models onnxruntime runs (onnxrt.compat): each reported once
        self.opsets = compat.complete_opsets(graph, opsets, options)
        compat.check_input_dims(graph, options)
        protos, shadowed, replaced = compat.repair_nodes(graph, outer_names, options, outer_in_scope)
        if shadowed:  # inside this graph its own values win over the enclosing graphs' ones
            outer_names = frozenset(set(outer_names) - shadowed)
        return protos, outer_names, replaced

    def _stage_load_constants(self, replaced: set[str]) -> None:
        """Decode the initializers (frozen: kernels may cache what they derive) and list the inputs and outputs."""
        graph = self.graph
        self.initializers: dict[str, Any] = {}
        limit = load_limit(self.options)
        for init in graph.initializer:
            if init.name not in replaced:  # (a Constant node of that name replaces it)
                given = self._given.get(init.name)
                value = initializer_array(init, self.base_dir, limit) if given is None else given
                self.initializers[init.name] = _frozen(value)
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

    def _stage_expand(
        self, protos: list[onnx.NodeProto], outer_names: set[str] | frozenset[str], outer_in_scope: Callable[[str], bool] | None
    ) -> tuple[list[GraphNode], _Scope]:
        """Inline functions, sort the nodes and check every output is defined: (nodes, scope for subgraphs)."""
        graph, opsets = self.graph, self.opsets
        nodes = [GraphNode(n, opsets) for n in protos]
        # value types are only looked up to build context-dependent function bodies
        types = ValueTypes(graph, opsets, self.functions)
        nodes = expand(nodes, self.functions, opsets, schema_body=_schema_body, types=types, budget=expansion_budget(self.options))
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
        # stored position of each node output: the names in scope at a node are the graph's
        # inputs and initializers, the outputs of the nodes stored before it, and what was in
        # scope at the node holding this graph (onnx's checker reads scopes so)
        stored_at = {o: i for i, p in enumerate(protos) for o in p.output if o}
        return nodes, _Scope(local, visible, stored_at, outer_in_scope)

    def _stage_optimise(
        self, nodes: list[GraphNode], outer_names: set[str] | frozenset[str], value_info: dict[str, Any] | None,
        optimize: bool, overridable_initializers: bool,
    ) -> list[GraphNode]:
        """Run onnxrt.optim's passes at the options' level on the checked, sorted nodes; sort again."""
        #: names of the optimisation passes that changed this graph
        self.applied_passes: list[str] = []
        level = optimization_level(self.options) if optimize else 0
        if level > 0 and nodes:
            from .optim import optimize as run_passes

            info = dict(value_info or {})
            if not info:
                from .optim.graph import value_info_map

                info = value_info_map(self.graph)
            # IR < 4 lists every initializer as an input, yet they are constants (as in onnxruntime)
            overridable = {n for n in self.input_names if n in self.initializers} if overridable_initializers else set()
            nodes, consts, self.applied_passes = run_passes(
                nodes, self.initializers, self.input_names, self.output_names, level, info, overridable, self.options
            )
            self.initializers = {k: _readonly(v) for k, v in consts.items()}
            available = set(self.input_names) | set(self.initializers) | set(outer_names)
            nodes = [nodes[i] for i in sort_nodes(nodes, available, self.graph.name)]
        return nodes

    def _stage_bind(self, nodes: list[GraphNode], scope: _Scope, optimize: bool, overridable_initializers: bool) -> list[OpRun]:
        """Resolve and build each node's kernel (compiling its subgraphs); mark its constant inputs."""
        # the initializers no feed can replace: kernels may cache what they derive from them
        constants = set(self.initializers) - (set(self.input_names) if overridable_initializers else set())
        ops = []
        for gn in nodes:
            op = self._make_op(gn, self._subgraph_compiler(gn, scope, optimize))
            if consts := [i for i, n in enumerate(gn.input) if n in constants]:
                op.set_const_inputs(consts)
            ops.append(op)
        return ops

    def _stage_allocate(self, nodes: list[GraphNode], ops: list[OpRun]) -> None:
        """Give every value a slot and build the steps (kernel, input and output slots, context)."""
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
        defined = set(self.input_names) | set(self.initializers)
        for gn in nodes:
            defined.update(o for o in gn.output if o)
        outer_used: list[str] = []
        self.steps: list[Step] = []
        for gn, op in zip(nodes, ops):
            ins = tuple(slot(n) for n in gn.input)
            outs = tuple(slot(n, output=True) for n in gn.output)
            ctx_names = list(op.implicit_inputs)
            for n in ctx_names:
                if n not in defined and n not in outer_used:
                    outer_used.append(n)
            ctx = tuple((n, slot(n)) for n in ctx_names)
            self.steps.append(Step(op, dispatch.bind(op, reference=not getattr(self.options, "fast_paths", True)), ins, outs, (), ctx, gn))
        for n in gn_inputs_from_outer(nodes, defined):
            if n not in outer_used:
                outer_used.append(n)
        for n in self.output_names:
            if n not in defined and n not in outer_used:
                outer_used.append(n)
        #: the outer-scope names this graph reads (bound from ``context`` at each run)
        self.outer_inputs: list[str] = outer_used
        #: (name, slot) of each outer-scope value
        self.outer_slots = tuple((n, slot(n)) for n in outer_used)
        self.n_slots = len(self.slots) + 2
        #: the slots of the graph's outputs and inputs, in declaration order
        self.output_slots = tuple(self.slots[n] for n in self.output_names)
        self.input_slots = tuple(self.slots[n] for n in self.input_names)
        #: whether some kernel may call BLAS (OpRun.uses_blas): runs of other plans leave
        #: BLAS's thread count as it is (RunScope)
        self.uses_blas = any(getattr(st.op, "uses_blas", True) for st in self.steps)

    def _stage_liveness(self) -> None:
        """Release each value after its last reader (outputs and initializers stay); fill the value template."""
        keep = set(self.output_slots) | {self.slots[n] for n in self.initializers}
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

    def _stage_type_checks(self, checked_feeds: bool) -> None:
        """Wrap the kernels of the steps whose input types may change from run to run in a check."""
        #: every step's input types are checked on the first run; those of _dynamic_steps on every run
        self._types_checked = False
        fixed = self._fixed_input_slots(self.graph) if checked_feeds else set()
        self._dynamic_steps = _dynamic_steps(self.steps, set(self.input_slots) - fixed, self.outer_slots)
        #: the kernels of the checked steps, unwrapped (runner's calls of input types seen before)
        self._unchecked: dict[int, Callable[..., Any]] = {}
        for i in self._dynamic_steps:
            st = self.steps[i]
            self._unchecked[i] = st.fn
            st.fn = _checked(st.op, st.fn)

    def _stage_tables(self) -> None:
        """Build the step table :meth:`_loop` runs."""
        self._table = tuple(_row(i, st) for i, st in enumerate(self.steps))
        self._runner_cache: tuple[Any, ...] | None = None

    def _fixed_input_slots(self, graph: GraphProto) -> set[int]:
        """Slots of the graph inputs whose feeds are checked against a declared element type
        (a tensor with elem_type set): their type is the same on every run."""
        fixed = set()
        for vi in graph.input:
            tp = vi.type
            if vi.HasField("type") and tp.WhichOneof("value") == "tensor_type" and tp.tensor_type.elem_type:
                fixed.add(self.slots[vi.name])
        return fixed

    def _subgraph_compiler(self, gn: GraphNode, scope: _Scope, optimize: bool) -> Callable[..., Plan]:
        """``compile_graph(sub, att_name, optimize_sub=True) -> Plan`` for the subgraphs of ``gn``."""
        local, visible, stored_at, outer_in_scope = scope
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
                sub, gn.opsets, self.base_dir, self.functions, outer_names=visible, options=self.options,
                optimize=optimize and optimize_sub, outer_in_scope=in_scope,
            )

        return compile_graph

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
                UnsupportedOperatorError, stacklevel=6,
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

    # --- running ----------------------------------------------------------------------------

    def new_values(self, feeds: dict[str, Any] | None = None, context: dict[str, Any] | None = None) -> list[Any]:
        """A fresh value list for :meth:`execute`: the initializers in their slots, ``feeds``
        (name -> value) and the outer-scope values this graph reads (from ``context``) bound."""
        values = self._template.copy()
        if feeds:
            slots = self.slots
            for name, v in feeds.items():
                values[slots[name]] = v
        if self.outer_slots:
            for name, s in self.outer_slots:
                values[s] = context[name]  # type: ignore[index]
        return values

    def outputs(self, values: list[Any]) -> list[Any]:
        """The graph's outputs, in declaration order, from a value list :meth:`execute` ran on."""
        return [values[s] for s in self.output_slots]

    def execute(self, values: list[Any], hooks: Hooks | None = None) -> None:
        """Run every step on ``values`` (from :meth:`new_values`), in place. The plan's first run
        checks every node's input types against its schema; ``hooks`` (:class:`Hooks`) add a
        callable before and after each node, keep every value, or check types again. Without
        hooks, after the first run, the plain step table runs."""
        if hooks is None and self._types_checked:
            self._loop(self._table, values)
            return
        check = not self._types_checked
        h = hooks if hooks is not None else Hooks()
        self._loop(self._hooked_table(h, check or h.check_types), values)
        self._types_checked = True

    def _loop(self, table: tuple[tuple[Any, ...], ...], values: list[Any]) -> None:
        """The run loop, the only one: executes the rows of a step table (:func:`_row`) on
        ``values`` in order. A node's failure is raised as an onnxrt error naming the node and
        describing its inputs; an exception a hook raised passes through as it was."""
        index = 0
        try:
            # one tuple per step, unpacked once; the arity decides how inputs are fetched
            for index, fn, get, in0, out0, outs, frees, ctx in table:
                if ctx:
                    res = fn(*[values[s] for s in get], context={n: values[s] for n, s in ctx})
                elif in0 >= 0:
                    res = fn(values[in0])
                elif get is not None:
                    res = fn(*get(values))
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
        except _HookError as e:
            raise e.error from e.error.__cause__
        except Exception as e:
            raise self._wrap(e, index, values) from e

    def _hooked_table(self, hooks: Hooks, check: bool) -> tuple[tuple[Any, ...], ...]:
        """The step table with each kernel wrapped in ``hooks`` (and a type check when ``check``),
        no value released when ``hooks.keep``."""
        table = []
        for row in self._table:
            index, fn = row[0], row[1]
            if check or hooks.before is not None or hooks.after is not None:
                fn = _hooked(self.steps[index], fn, hooks, check)
            table.append((index, fn, *row[2:6], () if hooks.keep else row[6], row[7]))
        return tuple(table)

    def run_list(self, inputs: list[Any], context: dict[str, Any] | None = None) -> list[Any]:
        """Run with inputs in declaration order; returns outputs in declaration order.

        Inputs beyond ``len(inputs)`` keep their initializer values (or stay unset).
        This is the entry point nested plans (If, Loop, Scan bodies) use.
        """
        values = self._template.copy()
        for s, v in zip(self.input_slots, inputs):
            values[s] = v
        if self.outer_slots:
            for name, s in self.outer_slots:
                values[s] = context[name]  # type: ignore[index]
        if self._types_checked:
            self._loop(self._table, values)
        else:
            self.execute(values)
        return [values[s] for s in self.output_slots]

    def runner(self, context: dict[str, Any] | None = None) -> Callable[[list[Any]], tuple[Any, ...]]:
        """``run(inputs) -> outputs`` (a tuple) for a subgraph run many times in a row (Loop, Scan
        and SequenceMap bodies): like :meth:`run_list`, with less work per call. One list of
        values is reused from call to call (no template copy), inputs are bound with a slice,
        the steps run through :meth:`_loop` on a table derived from the plan's (:meth:`_runner_steps`),
        and an Identity whose output only leaves the graph is not run: the output is fetched
        from its input (Identity hands over the same object). Every call must give every input.
        A runner belongs to one kernel call (one thread); outer values are bound again each call
        since their last reader releases them. The first run of the plan takes the checked path
        of :meth:`execute`. When the types of the inputs and outer values decide every other (no
        node holds a subgraph), a call whose input types an earlier call checked runs the steps
        without their checks."""
        values = self._template.copy()
        in_slots, outer = self.input_slots, self.outer_slots
        steps, fetch_slots, raw = self._runner_steps()
        seen: set[tuple[Any, ...]] = set()
        nd = np.ndarray
        outer_key = tuple(_type_key(context[n]) for n, _ in outer) if raw is not None and outer else ()  # type: ignore[index]
        execute, loop = self.execute, self._loop
        full_fetch = _fetcher(self.output_slots)
        fetch = _fetcher(fetch_slots)
        n_in = len(in_slots)
        # the inputs own the slots after the two reserved ones (they are numbered first): bound with one slice
        contiguous = in_slots == tuple(range(2, n_in + 2))

        def run(inputs: list[Any]) -> tuple[Any, ...]:
            if contiguous and len(inputs) == n_in:
                values[2 : n_in + 2] = inputs
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
            loop(todo, values)
            if todo is not raw and raw is not None:
                seen.add(key)
            return fetch(values)

        return run

    def _runner_steps(self) -> tuple[tuple[tuple[Any, ...], ...], tuple[int, ...], tuple[tuple[Any, ...], ...] | None]:
        """The step table :meth:`runner` runs (the plan's, less the Identity nodes whose output
        only leaves the graph), the slots its outputs are fetched from, and the same table with
        the kernels unwrapped from their type checks when the input types decide all others
        (None otherwise). Computed once."""
        cached = self._runner_cache
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
                and st.outputs[0] in self.output_slots and st.outputs[0] not in read
                # the input must stay alive until the outputs are fetched
                and not any(st.inputs[0] in later.frees for later in self.steps[i + 1 :])
            ):
                alias[st.outputs[0]] = st.inputs[0]
                skipped.add(i)
        steps = tuple(row for row in self._table if row[0] not in skipped)
        raw = None
        if self._unchecked and not any(st.context or _holds_graph(st.node.proto) for st in self.steps):
            raw = tuple((row[0], self._unchecked.get(row[0], row[1]), *row[2:]) for row in steps)
        cached = (steps, tuple(alias.get(s, s) for s in self.output_slots), raw)
        self._runner_cache = cached
        return cached

    def run_dict(self, feeds: dict[str, Any], context: dict[str, Any] | None = None, keep_all: bool = False) -> list[Any]:
        """Run from a name -> value dict; returns the slot list (all values when ``keep_all``):
        :meth:`new_values` and :meth:`execute`, in one call on the hot path."""
        slots = self.slots
        spec = self._specialiser
        if spec is not None and not keep_all and context is None and self._types_checked:
            sig, entry = spec.lookup(feeds)
            if entry is not None:  # the table of this signature: its fixed values are constants
                template, table = entry
                values = template.copy()
                for name, v in feeds.items():
                    values[slots[name]] = v
                self._loop(table, values)
                return values
            if sig is not None and spec.wants(sig):  # its second run: the fixed values kept for the table
                values = self._template.copy()
                for name, v in feeds.items():
                    values[slots[name]] = v
                kept = spec.capture()
                self.execute(values, Hooks(after=kept.after))
                spec.build(sig, kept.values)
                return values
        values = self._template.copy()
        for name, v in feeds.items():
            values[slots[name]] = v
        if self.outer_slots:
            for name, s in self.outer_slots:
                values[s] = context[name]  # type: ignore[index]
        if keep_all:
            self.execute(values, Hooks(keep=True))
        elif self._types_checked:
            self._loop(self._table, values)
        else:
            self.execute(values)
        return values

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


def _hooked(st: Step, fn: Callable[..., Any], hooks: Hooks, check: bool) -> Callable[..., Any]:
    """``fn`` (the kernel of ``st``) with ``hooks.before`` and ``hooks.after`` around it and,
    when ``check``, its input types checked first (inside the time ``after`` is given)."""
    op, before, after, perf = st.op, hooks.before, hooks.after, time.perf_counter

    def run(*args: Any, **kwargs: Any) -> Any:
        if before is not None:
            try:
                before(st, list(args))
            except Exception as e:
                raise _HookError(e) from e
        t0 = perf()
        if check:
            check_input_types(op, args)
        res = fn(*args, **kwargs)
        dt = perf() - t0
        if after is not None:
            try:
                after(st, list(args), res, dt)
            except Exception as e:
                raise _HookError(e) from e
        return res

    return run


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

