"""onnx.backend.base.Backend over onnxrt, so that onnx.backend.test.BackendTest runs the conformance suite."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from .inference import OnnxInference


class OnnxrtBackendRep(BackendRep):
    """A prepared model: ``run(inputs)`` with inputs as a list (graph order) or a dict."""

    def __init__(self, engine: OnnxInference):
        self.engine = engine
        # feeds fill the graph inputs that have no initializer first, as onnxruntime does
        inits = engine.initializer_names
        self._feed_names = [n for n in engine.input_names if n not in inits] + [
            n for n in engine.input_names if n in inits
        ]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, dict):
            feeds = inputs
        elif isinstance(inputs, list | tuple):
            feeds = dict(zip(self._feed_names, inputs))
        else:
            feeds = {self._feed_names[0]: inputs}
        res = self.engine.run(feeds)
        return tuple(res[n] for n in self.engine.output_names)


class OnnxrtBackend(Backend):
    """The onnx backend interface; CPU only. ``session_options``: the
    :class:`~onnxrt.SessionOptions` every session it prepares gets (None: the defaults); a
    subclass may set them, e.g. ``fast_paths = False`` to run the suite on the reference
    kernels."""

    session_options: Any = None

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> OnnxrtBackendRep:
        return OnnxrtBackendRep(OnnxInference(model, options=cls.session_options))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU", outputs_info: Any = None, **kwargs: Any) -> tuple[Any, ...]:
        """Run one node on inputs (a list in the node's input order, or a dict)."""
        from .dtypes import onnx_type

        if isinstance(inputs, dict):
            pairs = list(inputs.items())
        else:
            # one value per named input: an omitted optional input ("") takes no value
            pairs = list(zip([n for n in node.input if n], inputs))
        graph_inputs = []
        for name, value in pairs:
            if isinstance(value, np.ndarray):
                graph_inputs.append(onnx.helper.make_tensor_value_info(name, onnx_type(value.dtype), value.shape))
            else:
                graph_inputs.append(onnx.helper.make_empty_tensor_value_info(name))
        graph_outputs = [onnx.helper.make_empty_tensor_value_info(n) for n in node.output if n]
        graph = onnx.helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        opsets = [onnx.helper.make_opsetid("", opset)]
        if node.domain not in ("", "ai.onnx"):
            opsets.append(onnx.helper.make_opsetid(node.domain, kwargs.get("domain_version", 1)))
        model = onnx.helper.make_model(graph, opset_imports=opsets)
        engine = OnnxInference(model, options=cls.session_options)
        res = engine.run(dict(pairs))
        return tuple(res[n] for n in engine.output_names)


prepare = OnnxrtBackend.prepare
run_model = OnnxrtBackend.run_model
run_node = OnnxrtBackend.run_node
supports_device = OnnxrtBackend.supports_device
is_compatible = OnnxrtBackend.is_compatible
