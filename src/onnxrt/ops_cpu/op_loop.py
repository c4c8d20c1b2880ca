"""Loop (1 to 25): a body graph planned once, run per iteration on loop-carried values and outer values."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import onnx

from ..dtypes import np_dtype
from ..errors import InvalidAttributeError, KernelError
from ..options import CURRENT_RUN_OPTIONS, check_terminate
from ..registry import register
from ._alloc import tensor_limit
from ._op import OpRun
from .op_if import condition, subgraph_plan


def empty_scan_output(value_info: onnx.ValueInfoProto, leading: tuple[int, ...] = (0,)) -> np.ndarray:
    """The scan output of a loop that ran zero times, typed from the body's declared output.

    As onnxruntime does, the shape is ``leading`` followed by the declared dims, a symbolic
    or unknown dim counting 0; an output of unknown rank gives shape ``leading`` alone.
    """
    tp = value_info.type
    if tp.WhichOneof("value") != "tensor_type":
        raise KernelError(f"Scan output {value_info.name!r} must be a tensor, got {tp.WhichOneof('value')}.")
    tt = tp.tensor_type
    dtype = np_dtype(tt.elem_type) if tt.elem_type else np.dtype(np.float32)
    dims: tuple[int, ...] = ()
    if tt.HasField("shape"):
        dims = tuple(int(d.dim_value) if d.HasField("dim_value") else 0 for d in tt.shape.dim)
    # Scan-8 pads batch entries of length 0 with this
    return blank(leading + dims, dtype)


def blank(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Padding: zeros, or empty strings for a string tensor."""
    return np.full(shape, "", dtype=object) if dtype == object else np.zeros(shape, dtype=dtype)


def _reads_input(plan: Any, index: int) -> bool:
    """Whether any node (or subgraph, or output) of ``plan`` reads its ``index``-th input."""
    name = plan.input_names[index]
    if name in plan.output_names:
        return True
    return any(name in st.node.input or any(n == name for n, _ in st.context) for st in plan.steps)


def stack_scan_output(values: list[Any], name: str, axis: int = 0) -> np.ndarray:
    """Stack the per-iteration values of one scan output along a new ``axis``.

    ``np.array`` copies the list in one C loop (``np.stack`` indexes every value in Python);
    values of different shapes are an error.
    """
    first = np.shape(values[0])
    try:
        out = np.array(values)
    except ValueError:
        out = None
    if out is None or out.shape != (len(values), *first):
        shapes = sorted({tuple(np.shape(v)) for v in values})
        raise KernelError(
            f"Scan output {name!r} changes shape across iterations ({[list(s) for s in shapes][:4]}), "
            f"so its values cannot be stacked."
        )
    return np.moveaxis(out, 0, axis) if axis else out


@register("Loop", versions=(1, 11, 13, 16, 19, 21, 23, 24, 25))
class Loop(OpRun):
    """Loop: 1, 11, 13 (loop-carried sequences), 16 (optionals), later versions widen the types.

    Inputs ``M`` (trip count) and ``cond`` are both optional. Deviation, following
    onnxruntime: the condition the body returns always ends the loop when false, even when
    the node gives no ``cond`` (the spec calls it ignored then); without this, a loop with
    neither input never ends. Loop-carried values may change shape, type and kind (tensor,
    sequence, optional) from one iteration to the next; scan outputs are stacked on a new
    leading axis and must keep their shape. The body is planned once, at load time.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        body = subgraph_plan(self, "body")
        n_in = len(body.input_names)
        if n_in < 2:
            raise InvalidAttributeError(
                f"{self.node_label()}: the body must take at least 2 inputs (iteration number, condition), got {n_in}."
            )
        self._n_carried = n_in - 2
        self._n_scan = len(body.output_names) - 1 - self._n_carried
        if self._n_scan < 0:
            raise InvalidAttributeError(
                f"{self.node_label()}: the body has {len(body.output_names)} outputs, expected at least "
                f"{1 + self._n_carried} (the condition and {self._n_carried} loop-carried values)."
            )
        self._body = body
        self._scan_info = list(body.graph.output[1 + self._n_carried :])
        # a body that never reads the iteration number is not given a fresh array for it
        self._reads_iteration = _reads_input(body, 0)

    def _run(self, M=None, cond=None, *v_initial, context=None, attributes=None, verbose=0, fLOG=None):
        n_carried = self._n_carried
        if len(v_initial) != n_carried:
            raise KernelError(f"Loop got {len(v_initial)} loop-carried inputs, its body takes {n_carried}.")
        trip = sys.maxsize
        if M is not None:
            m = np.asarray(M)
            if m.size != 1:
                raise KernelError(f"M (trip count) must hold one element, got shape {list(m.shape)}.")
            trip = int(m.reshape(-1)[0])
        keep_going = True if cond is None else condition(cond)
        cond_value = np.array(keep_going) if cond is None else cond
        carried = v_initial
        n_scan = self._n_scan
        collected: list[tuple[Any, ...]] = []  # the scan outputs of each iteration
        run = self._body.runner(context)
        end = 1 + n_carried
        counter = self._reads_iteration
        # RunOptions.terminate set from another thread stops the loop before its next iteration
        options = CURRENT_RUN_OPTIONS.get()
        # bytes of each scan output so far: checked against max_tensor_bytes as they accumulate
        totals = [0] * n_scan
        limit = tensor_limit(self.options)
        i = 0
        while keep_going and i < trip:
            if options is not None and options.terminate:
                check_terminate(options)
            outs = run([np.array(i, dtype=np.int64) if counter else None, cond_value, *carried])
            cond_value = outs[0]
            carried = outs[1:end]
            if n_scan:
                collected.append(outs[end:])
                for k in range(n_scan):
                    totals[k] += getattr(outs[end + k], "nbytes", 0)
                    if totals[k] > limit:
                        v = np.asarray(outs[end + k])
                        self.check_alloc((i + 1, *v.shape), v.dtype, f"scan output {self._scan_info[k].name!r}")
            try:  # a one-element tensor converts directly
                keep_going = bool(cond_value)
            except (TypeError, ValueError):
                keep_going = condition(cond_value, "the condition returned by the body")
            i += 1
        scans = [list(col) for col in zip(*collected)] if collected else [[] for _ in range(n_scan)]
        results = []
        for k in range(n_scan):
            info = self._scan_info[k]
            results.append(stack_scan_output(scans[k], info.name) if scans[k] else empty_scan_output(info))
        return (*carried, *results)
