"""onnxrt's fused operators (domain ``onnxrt``): Conv, Gemm, MatMul, BatchNormalization, Add or Sum followed by an activation; chains of dense layers; chains of element-wise nodes.

The graph optimiser (onnxrt.optim.fuse_activation) writes them; they run the original
operator's kernel, then the activation in place on its fresh output, saving one node, one
allocation and one pass of the engine.
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from ..errors import KernelError
from ..registry import lookup, register
from ._conv_common import apply_activation
from ._op import OpRun

FUSED_DOMAIN = "onnxrt"


#: elements from which apply_activation's np.clip beats np.maximum's lower call overhead
_CLIP_FROM = 4096
_F32 = np.dtype(np.float32)
_F32_ZERO = np.float32(0)


class _Fused(OpRun):
    """Base: ``base_op`` is the fused operator; attributes ``activation``, ``activation_params``
    and ``since_version`` (the base operator's opset) come with the node."""

    base_op = ""
    attribute_defaults = {"activation": "Relu", "activation_params": [], "since_version": 13}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        inner = NodeProto()
        inner.CopyFrom(onnx_node)
        inner.op_type = self.base_op
        inner.domain = ""
        del inner.attribute[:]
        inner.attribute.extend(a for a in onnx_node.attribute if a.name not in self.attribute_defaults)
        cls, since = lookup(self.base_op, "", int(self.atts_value["since_version"]))  # type: ignore[misc]
        # the session's options too: the base kernel checks its sizes against max_tensor_bytes
        self._inner = cls(inner, None, since_version=since, opsets=options.get("opsets"),
                          session_options=options.get("session_options"))
        self._act = self.atts_value["activation"]
        self._params = [float(p) for p in self.atts_value["activation_params"]]

    def set_const_inputs(self, positions) -> None:
        super().set_const_inputs(positions)
        self._inner.set_const_inputs(self.const_inputs)  # the base kernel keeps what it derives from them

    #: whether the base kernel may return (a view of) one of its inputs (Sum of one input...)
    may_alias = False

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        (y,) = self._inner._run(*inputs)[:1]
        # products are fresh arrays; a read-only result or one sharing an input's memory is
        # not ours to overwrite
        if not y.flags.writeable or (
            self.may_alias and any(isinstance(i, np.ndarray) and np.may_share_memory(y, i) for i in inputs)
        ):
            y = y.copy()
        if self._act == "Relu" and y.size < _CLIP_FROM:  # the common small case without the dispatch
            np.maximum(y, _F32_ZERO if y.dtype == _F32 else y.dtype.type(0), out=y)
            return (y,)
        return (apply_activation(y, self._act, self._params),)


@register("FusedConv", versions=(1,), domain=FUSED_DOMAIN)
class FusedConv(_Fused):
    """Conv + activation, and Conv + Sum/Add (+ activation) of a residual ``Z`` (a fourth
    input): the conv kernel adds the residual and applies the activation itself, on its
    fresh output before the final rounding (float16 outputs are rounded once). Activation
    "" is none (a residual alone). Reference: :func:`onnxrt.ops_cpu.op_conv.conv` with the
    inner Conv's keywords; fast paths: Conv's table (:mod:`onnxrt.fastpaths.conv`)."""

    base_op = "Conv"
    #: ``shuffle``: a channel shuffle folded into the node (onnxrt.optim.channel_shuffle);
    #: ``chain``, ``chain_opset``: an element-wise chain on the output (a :class:`Chain`:
    #: activation "Chain", onnxrt.optim.fuse_elementwise.fuse_chain_epilogue)
    attribute_defaults = {**_Fused.attribute_defaults, "shuffle": [], "chain": [], "chain_opset": 13}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._inner._kw["activation"] = self._act or None
        self._inner._kw["activation_params"] = self._params
        if self.atts_value["shuffle"]:
            self._inner._kw["shuffle"] = tuple(int(d) for d in self.atts_value["shuffle"])
        #: the chain after the convolution (its fast paths read it on the inner Conv too)
        self._chain = self._inner.chain = None
        if self.atts_value["chain"]:
            if self._act or self.atts_value["shuffle"]:
                raise KernelError(f"{self.node_label()}: a chain excludes an activation and a shuffle.")
            self._chain = self._inner.chain = Chain(self.atts_value["chain"], self.atts_value["chain_opset"],
                                                    self.node_label())
            self._inner._kw["activation"] = "Chain"

    def _run(self, x, w, b=None, z=None, attributes=None, verbose=0, fLOG=None):
        from .op_conv import conv

        inner = self._inner
        inner.check_sizes(x, w)
        if self._chain is not None:
            return (self._chain.apply(conv(x, w, b, z, **{**inner._kw, "activation": None})),)
        return (conv(x, w, b, z, **inner._kw),)


@register("FusedGemm", versions=(1,), domain=FUSED_DOMAIN)
class FusedGemm(_Fused):
    """Gemm + activation; Gemm + Relu on a few float32 rows runs the compiled dense loop
    (product, bias and Relu in one call), a fast path (onnxrt.fastpaths.gemm)."""

    base_op = "Gemm"


@register("FusedMatMul", versions=(1,), domain=FUSED_DOMAIN)
class FusedMatMul(_Fused):
    """MatMul + activation."""

    base_op = "MatMul"


@register("MatMulAdd", versions=(1,), domain=FUSED_DOMAIN)
class MatMulAdd(OpRun):
    """MatMul(A, B) + C, C one value per column of B: a linear layer on a stack of rows
    (B, S, K) or (N, H, W, K), as exporters write it (onnxrt.optim.gemm.fuse_matmul_bias;
    rank-2 products become Gemm instead). Reference: ai.onnx MatMul's kernel, then C added
    in place on its fresh result, the one rounding Add makes. The fast path
    (onnxrt.fastpaths.gemm) adds C inside the team's product blocks while they are in
    cache, saving a pass over the result and a tensor. ``since_version``: MatMul's opset."""

    attribute_defaults = {"since_version": 13}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        inner = NodeProto()
        inner.CopyFrom(onnx_node)
        inner.op_type, inner.domain = "MatMul", ""
        del inner.input[2:]
        del inner.attribute[:]
        cls, since = lookup("MatMul", "", int(self.atts_value["since_version"]))  # type: ignore[misc]
        self._inner = cls(inner, None, since_version=since, opsets=options.get("opsets"),
                          session_options=options.get("session_options"))

    def _run(self, a, b, c, attributes=None, verbose=0, fLOG=None):
        if c.ndim != 1 or b.ndim != 2 or c.shape[0] != b.shape[1] or c.dtype != a.dtype:
            raise KernelError(f"{self.node_label()}: C must be a vector of B's {b.shape[-1]} columns of A's type "
                              f"{a.dtype}, got {c.dtype}{list(c.shape)}.")
        (y,) = self._inner._run(a, b)[:1]
        if not y.flags.writeable or np.may_share_memory(y, a) or np.may_share_memory(y, b):
            y = y.copy()
        np.add(y, c, out=y)
        return (y,)


@register("FusedBatchNormalization", versions=(1,), domain=FUSED_DOMAIN)
class FusedBatchNormalization(_Fused):
    """BatchNormalization (inference) + activation; with Relu, one pass computes both."""

    base_op = "BatchNormalization"
    may_alias = True

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        if self._act == "Relu" and len(inputs) == 5 and not self._inner._training:
            return (self._inner.infer(*inputs, relu=True),)
        return super()._run(*inputs)


@register("FusedAdd", versions=(1,), domain=FUSED_DOMAIN)
class FusedAdd(_Fused):
    """Add + activation (residual connections followed by Relu)."""

    base_op = "Add"
    may_alias = True


@register("FusedSum", versions=(1,), domain=FUSED_DOMAIN)
class FusedSum(_Fused):
    """Sum + activation."""

    base_op = "Sum"
    may_alias = True


@register("DenseChain", versions=(1,), domain=FUSED_DOMAIN)
class DenseChain(OpRun):
    """Consecutive dense layers (Gemm, Gemm + Relu; onnxrt.optim.dense_chain writes them):
    inputs X, B1, C1, B2, C2, ... (C may be omitted), attributes ``trans_b`` and ``relus``.

    The reference runs the layers' own Gemm kernels in turn. A few float32 rows run every
    layer in one compiled call (``native.loops.dense_chain``, each layer as the compiled
    dense loop of Gemm: the same results as the nodes one by one), a fast path
    (onnxrt.fastpaths.gemm). A 5-layer MLP at one row: one kernel call and one engine
    step instead of five."""

    attribute_defaults = {"trans_b": [], "relus": []}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        from onnx import helper

        from .op_gemm import DENSE_MAX_ROWS, DENSE_MAX_WORK

        self._trans_b = [int(t) for t in self.atts_value["trans_b"]]
        self._relus = [int(r) for r in self.atts_value["relus"]]
        self._max_rows, self._max_work = DENSE_MAX_ROWS, DENSE_MAX_WORK
        self._layers = []
        for tb, relu in zip(self._trans_b, self._relus):
            if relu:
                node = helper.make_node("FusedGemm", ["a", "b", "c"], ["y"], domain=FUSED_DOMAIN, transB=tb,
                                        activation="Relu", since_version=13)
                cls, since = lookup("FusedGemm", FUSED_DOMAIN, 1)  # type: ignore[misc]
            else:
                node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=tb)
                cls, since = lookup("Gemm", "", 13)  # type: ignore[misc]
            self._layers.append(cls(node, None, since_version=since, opsets=options.get("opsets")))
        self._packable = False  # every weight and bias a model constant (set_const_inputs)

    def set_const_inputs(self, positions) -> None:
        super().set_const_inputs(positions)
        # the packed copies are only kept for constants: a feed's layers run on its arrays
        self._packable = {i for i, n in enumerate(self.onnx_node.input) if i and n} <= self.const_inputs

    def _run(self, x, *params, attributes=None, verbose=0, fLOG=None):
        a = x
        for layer, w, c in zip(self._layers, params[0::2], params[1::2]):
            a = layer._run(a, w)[0] if c is None else layer._run(a, w, c)[0]
        return (a,)


@register("FusedElementwise", versions=(1,), domain=FUSED_DOMAIN)
class FusedElementwise(OpRun):
    """A chain of element-wise nodes with one output (onnxrt.optim.fuse_elementwise writes it):
    attribute ``nodes`` holds the original nodes (serialized NodeProtos, in order) reading
    ``x0, x1, ...`` (this node's inputs) and each other's outputs, the last one writing ``y``;
    ``opset`` is their ai.onnx opset.

    The reference runs the nodes' own kernels in turn: the same values as the unfused graph.
    A compiled interpreter evaluates float32 chains in one pass over memory, block by block
    (``native.chain_loops``), a fast path (onnxrt.fastpaths.elementwise): SiLU, HardSwish,
    GELU in its exporter forms, a normalisation's scale and shift, each one kernel call."""

    attribute_defaults = {"nodes": [], "opset": 13}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        #: the ai.onnx opset of the chain's nodes
        self.opset = opset = int(self.atts_value["opset"])
        #: the chain's nodes (NodeProto) and their kernels, in order
        self.nodes, self.kernels = _chain_kernels(self.atts_value["nodes"], opset, self.node_label())

    def _run(self, *xs, attributes=None, verbose=0, fLOG=None):
        return (_run_chain(self.nodes, self.kernels, xs),)


def _chain_kernels(blobs, opset: int, label: str) -> tuple[list[NodeProto], list[OpRun]]:
    # the serialized nodes of a chain and their ai.onnx kernels at ``opset``
    nodes: list[NodeProto] = []
    kernels: list[OpRun] = []
    for blob in blobs:
        proto = NodeProto()
        proto.ParseFromString(blob if isinstance(blob, bytes) else blob.encode("latin-1"))
        found = lookup(proto.op_type, "", opset)
        if found is None:
            raise KernelError(f"{label}: no kernel for {proto.op_type!r} at opset {opset}.")
        cls, since = found
        nodes.append(proto)
        kernels.append(cls(proto, None, since_version=since, opsets={"": opset}))
    return nodes, kernels


def _run_chain(nodes: list[NodeProto], kernels: list[OpRun], xs) -> np.ndarray:
    env: dict[str, object] = {f"x{i}": x for i, x in enumerate(xs)}
    for proto, kernel in zip(nodes, kernels):
        env[proto.output[0]] = kernel._run(*[env[n] if n else None for n in proto.input])[0]
    return env["y"]  # type: ignore[return-value]


class Chain:
    """An element-wise chain fused into the node that produces its one tensor input
    (onnxrt.optim.fuse_elementwise.fuse_chain_epilogue): FusedElementwise's nodes reading
    ``x0`` (the producer's output) and constants (Constant nodes), the last writing ``y``.
    ``apply(y)`` is the reference: the nodes' own kernels in turn, as the unfused graph
    computes them. The fast paths give a compiled form of the same program (``compiled``:
    set by onnxrt.fastpaths.elementwise.chain_inplace) to their kernels, which apply it to
    each block of output while it is in cache."""

    __slots__ = ("nodes", "kernels", "opset", "compiled", "__weakref__")

    def __init__(self, blobs, opset: int, label: str) -> None:
        self.opset = int(opset)
        self.nodes, self.kernels = _chain_kernels(blobs, self.opset, label)
        #: the compiled in-place form (False: not tried yet; None: none)
        self.compiled: object = False

    def apply(self, y: np.ndarray) -> np.ndarray:
        out = _run_chain(self.nodes, self.kernels, (y,))
        if out.shape != y.shape or out.dtype != y.dtype:
            raise KernelError(f"a fused chain changed its input's shape or type: {y.dtype}{list(y.shape)} -> "
                              f"{out.dtype}{list(out.shape)}.")
        return out
