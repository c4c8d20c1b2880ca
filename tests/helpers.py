"""Helpers shared by the tests: building small models with onnx.helper, running a function in several threads."""

from __future__ import annotations

from typing import Any

import onnx
from onnx import helper


def make_single_node_model(
    op_type: str,
    inputs: list[tuple[str, int, Any]],
    outputs: list[tuple[str, int, Any]],
    opset: int = 18,
    domain: str = "",
    node_name: str = "node",
    initializers: list[onnx.TensorProto] | None = None,
    ir_version: int = 8,
    **attributes: Any,
) -> onnx.ModelProto:
    """A model with one node; ``inputs``/``outputs`` are (name, elem_type, shape) triples."""
    node = helper.make_node(op_type, [n for n, _, _ in inputs], [n for n, _, _ in outputs], name=node_name, domain=domain, **attributes)
    graph = helper.make_graph(
        [node],
        f"single_{op_type}",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializers or [],
    )
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = ir_version
    return model


def run_in_threads(fn, count: int) -> list[BaseException]:
    """``fn(i)`` in ``count`` threads started together (a barrier); the exceptions they raised."""
    import threading

    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def body(i: int) -> None:
        try:
            barrier.wait()
            fn(i)
        except BaseException as e:  # noqa: BLE001  (returned to the test)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
