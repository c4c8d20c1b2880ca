"""SequenceMap (17): a subgraph applied to each position of one or more sequences."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidAttributeError, KernelError
from ..options import CURRENT_RUN_OPTIONS, check_terminate
from ..registry import register
from ._op import OpRun
from .op_if import subgraph_plan


@register("SequenceMap", versions=(17,))
class SequenceMap(OpRun):
    """SequenceMap-17: the body runs once per position of the first sequence; a sequence input
    gives its element at that position, a tensor input is passed whole each time. Each body
    output becomes one output sequence. The body is planned once; positions run in order.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        body = subgraph_plan(self, "body")
        n_in = len([n for n in onnx_node.input])
        if len(body.input_names) != n_in:
            raise InvalidAttributeError(
                f"{self.node_label()}: the body takes {len(body.input_names)} inputs, expected {n_in} (one per input of the node)."
            )
        self._body = body
        self._n_out = len(body.output_names)

    def _run(self, input_sequence, *additional, context=None, attributes=None, verbose=0, fLOG=None):
        if not isinstance(input_sequence, list):
            raise KernelError(f"input_sequence must be a sequence, got {type(input_sequence).__name__}.")
        n = len(input_sequence)
        args: list[Any] = [input_sequence, *additional]
        is_seq = [isinstance(a, list) for a in args]
        for k, (a, s) in enumerate(zip(args, is_seq)):
            if s and len(a) != n:
                raise KernelError(f"Sequence input {k} has {len(a)} elements, expected {n} like input_sequence.")
        run = self._body.runner(context)
        outs: list[list[Any]] = [[] for _ in range(self._n_out)]
        # RunOptions.terminate set from another thread stops the map before its next element
        options = CURRENT_RUN_OPTIONS.get()
        for i in range(n):
            if options is not None and options.terminate:
                check_terminate(options)
            res = run([a[i] if s else a for a, s in zip(args, is_seq)])
            for k in range(self._n_out):
                outs[k].append(res[k])
        return tuple(outs)
