"""Scan: 8 (batch axis 0, sequence axis 1, sequence_lens) and 9 to 25 (per-input/output axes and directions)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..options import CURRENT_RUN_OPTIONS, check_terminate
from ..registry import register
from ._indexing import normalize_axis
from ._op import OpRun
from .op_if import subgraph_plan
from .op_loop import blank, empty_scan_output, stack_scan_output


def _check_flags(op: OpRun, name: str, values: list[int] | None, count: int) -> list[int]:
    if not values:
        return [0] * count
    if len(values) != count:
        raise InvalidAttributeError(f"{op.node_label()}: attribute {name!r} has {len(values)} values, expected {count}.")
    return list(values)


class _ScanBase(OpRun):
    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        body = subgraph_plan(self, "body")
        m = self.num_scan_inputs
        n_in = len(body.input_names)
        if m is None or m < 1 or m > n_in:
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'num_scan_inputs' is {m!r}, expected 1 to {n_in} (the body's inputs)."
            )
        self._n_state = n_in - m
        self._n_scan_out = len(body.output_names) - self._n_state
        if self._n_scan_out < 0:
            raise InvalidAttributeError(
                f"{self.node_label()}: the body has {len(body.output_names)} outputs, expected at least "
                f"{self._n_state} (one per state variable)."
            )
        self._body = body
        self._scan_info = list(body.graph.output[self._n_state :])


@register("Scan", versions=(8,))
class Scan8(_ScanBase):
    """Scan-8: inputs carry a batch axis 0 and a sequence axis 1; ``sequence_lens`` (optional)
    gives each batch entry's length, ``directions`` reverses inputs. Scan outputs past an entry's
    length are zeros, or empty strings (the spec leaves them undefined; onnxruntime writes zeros).
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._directions = _check_flags(self, "directions", self.directions, self.num_scan_inputs)

    def _run(self, sequence_lens=None, *inputs, context=None, attributes=None, verbose=0, fLOG=None):
        n_state = self._n_state
        if len(inputs) != n_state + self.num_scan_inputs:
            raise KernelError(f"Scan got {len(inputs)} state and scan inputs, its body takes {n_state + self.num_scan_inputs}.")
        states0 = inputs[:n_state]
        scans = [np.asarray(x) for x in inputs[n_state:]]
        for x in scans:
            if x.ndim < 2:
                raise KernelError(f"Scan-8 inputs need a batch axis and a sequence axis, got shape {list(x.shape)}.")
        batch, max_len = scans[0].shape[:2]
        for x in scans[1:]:
            if x.shape[:2] != (batch, max_len):
                raise KernelError(
                    f"Scan inputs must share batch size and sequence length, got shapes {[list(x.shape) for x in scans]}."
                )
        for s in states0:
            if np.ndim(s) < 1 or np.shape(s)[0] != batch:
                raise KernelError(f"Scan-8 state variables need the batch size {batch} as axis 0, got shape {list(np.shape(s))}.")
        if sequence_lens is None:
            lengths = [max_len] * batch
        else:
            lens = np.asarray(sequence_lens).reshape(-1)
            if lens.shape[0] != batch or (lens < 0).any() or (lens > max_len).any():
                raise KernelError(
                    f"sequence_lens must hold {batch} lengths in [0, {max_len}], got {lens.tolist()}."
                )
            lengths = [int(v) for v in lens]
        run = self._body.runner(context)
        n_out = self._n_scan_out
        final_states: list[list[Any]] = [[] for _ in range(n_state)]
        options = CURRENT_RUN_OPTIONS.get()  # RunOptions.terminate stops before the next iteration
        per_batch: list[list[np.ndarray]] = [[] for _ in range(n_out)]
        for b in range(batch):
            states = [s[b] for s in states0]
            length = lengths[b]
            # sequence t of entry b, read backwards within its own length when reversed
            seqs = [x[b, length - 1 :: -1] if d else x[b] for x, d in zip(scans, self._directions)] if length else []
            outs_t: list[list[Any]] = [[] for _ in range(n_out)]
            for t in range(length):
                if options is not None and options.terminate:
                    check_terminate(options)
                # x[t, ...] keeps a 0-d array (x[t] of a 1-D tensor would be a numpy scalar)
                outs = run([*states, *[x[t, ...] for x in seqs]])
                states = outs[:n_state]
                for k in range(n_out):
                    if not outs_t[k]:  # the first step's output tells the size of the stacked one
                        v = np.asarray(outs[n_state + k])
                        self.check_alloc((batch, max_len, *v.shape), v.dtype, f"scan output {self._scan_info[k].name!r}")
                    outs_t[k].append(outs[n_state + k])
            for k in range(n_state):
                final_states[k].append(states[k])
            for k in range(n_out):
                info = self._scan_info[k]
                if outs_t[k]:
                    arr = stack_scan_output(outs_t[k], info.name)
                    if length < max_len:
                        pad = blank((max_len - length,) + arr.shape[1:], arr.dtype)
                        arr = np.concatenate([arr, pad])
                else:
                    arr = None
                per_batch[k].append(arr)
        results = [stack_scan_output(v, "state") if v else np.asarray(s) for v, s in zip(final_states, states0)]
        for k in range(n_out):
            info = self._scan_info[k]
            known = next((a for a in per_batch[k] if a is not None), None)
            if known is None:
                results.append(empty_scan_output(info, (batch, max_len)))
                continue
            filled = [a if a is not None else blank(known.shape, known.dtype) for a in per_batch[k]]
            results.append(np.stack(filled))
        return tuple(results)


@register("Scan", versions=(9, 11, 16, 19, 21, 23, 24, 25))
class Scan(_ScanBase):
    """Scan: 9 (scan_input_axes/directions, scan_output_axes/directions, no batch axis),
    11 (negative axes), 16 and later widen the types. Each scan input is viewed with its scan
    axis first (and reversed for direction 1) once, so an iteration takes a view, not a copy.
    Scan outputs are stacked on their axis, reversed first for direction 1.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        m = self.num_scan_inputs
        self._in_axes = _check_flags(self, "scan_input_axes", self.scan_input_axes, m)
        self._in_dirs = _check_flags(self, "scan_input_directions", self.scan_input_directions, m)
        self._out_axes = _check_flags(self, "scan_output_axes", self.scan_output_axes, self._n_scan_out)
        self._out_dirs = _check_flags(self, "scan_output_directions", self.scan_output_directions, self._n_scan_out)

    def _run(self, *inputs, context=None, attributes=None, verbose=0, fLOG=None):
        n_state = self._n_state
        if len(inputs) != n_state + self.num_scan_inputs:
            raise KernelError(f"Scan got {len(inputs)} state and scan inputs, its body takes {n_state + self.num_scan_inputs}.")
        states = list(inputs[:n_state])
        seqs = []
        length = None
        for x, axis, d in zip(inputs[n_state:], self._in_axes, self._in_dirs):
            x = np.asarray(x)
            if x.ndim == 0:
                raise KernelError("Scan inputs must have rank >= 1, got a scalar.")
            x = np.moveaxis(x, normalize_axis(axis, x.ndim, "scan_input_axes"), 0)
            if d:
                x = x[::-1]
            if length is None:
                length = x.shape[0]
            elif x.shape[0] != length:
                raise KernelError(
                    f"Scan inputs must share their sequence length, got {length} and {x.shape[0]}."
                )
            seqs.append(x)
        run = self._body.runner(context)
        n_out = self._n_scan_out
        # the views of every step, made up front: list(x) splits in C; a 1-D input is split with
        # x[t, ...], which gives 0-d arrays where list(x) would give numpy scalars. zip yields one
        # tuple of views per step
        steps = zip(*[list(x) if x.ndim > 1 else [x[t, ...] for t in range(length)] for x in seqs]) if length else ()
        collected: list[tuple[Any, ...]] = []
        options = CURRENT_RUN_OPTIONS.get()  # RunOptions.terminate stops before the next iteration
        for elements in steps:
            if options is not None and options.terminate:
                check_terminate(options)
            outs = run([*states, *elements])
            states = outs[:n_state]
            if n_out:
                if not collected:  # the first step's outputs tell the size of the stacked ones
                    for k in range(n_out):
                        v = np.asarray(outs[n_state + k])
                        self.check_alloc((length, *v.shape), v.dtype, f"scan output {self._scan_info[k].name!r}")
                collected.append(outs[n_state:])
        outs_t = [list(col) for col in zip(*collected)] if collected else [[] for _ in range(n_out)]
        results = list(states)
        for k in range(n_out):
            info = self._scan_info[k]
            values = outs_t[k]
            if not values:
                arr = empty_scan_output(info)
                axis = normalize_axis(self._out_axes[k], arr.ndim, "scan_output_axes")
                results.append(np.moveaxis(arr, 0, axis))
                continue
            if self._out_dirs[k]:
                values = values[::-1]
            rank = np.ndim(values[0]) + 1
            axis = normalize_axis(self._out_axes[k], rank, "scan_output_axes")
            results.append(stack_scan_output(values, info.name, axis))
        return tuple(results)
