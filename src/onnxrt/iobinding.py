"""IOBinding: onnxruntime's bound inputs and outputs for ``InferenceSession.run_with_iobinding``, on CPU memory."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import InvalidArgumentError
from .ortvalue import OrtValue, _cpu_only, _elem_dtype


def _memory(what: str, element_type: Any, shape: Any, buffer_ptr: Any) -> np.ndarray:
    """A numpy array over ``buffer_ptr`` (CPU memory the caller owns and keeps alive)."""
    dtype = _elem_dtype(element_type)
    if dtype.kind == "O":
        raise InvalidArgumentError(f"{what}: string tensors hold Python objects and cannot be bound to raw memory.")
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what}: shape must be a list of ints, got {shape!r}.") from None
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"{what}: shape {list(dims)} has a negative dimension.")
    if not isinstance(buffer_ptr, int) or isinstance(buffer_ptr, bool) or buffer_ptr <= 0:
        raise InvalidArgumentError(f"{what}: buffer_ptr must be a non-null memory address (an int), got {buffer_ptr!r}.")
    from .native.memory import array_at

    return array_at(buffer_ptr, dtype, math.prod(dims)).reshape(dims)


class IOBinding:
    """Inputs and outputs bound once for repeated ``session.run_with_iobinding(binding)``.

    Bound inputs are read at each run (a bound array changed between runs gives the new
    values); an output bound to memory (an OrtValue or ``buffer_ptr``) receives its result
    there, other outputs are new arrays each run. Deviations from onnxruntime: only the
    ``"cpu"`` device exists (others raise :class:`~onnxrt.NotApplicableError`);
    ``synchronize_inputs``/``synchronize_outputs`` have nothing to wait for (runs are
    synchronous); ``get_outputs_as_ortvaluevector`` returns a list of OrtValue.
    """

    def __init__(self, session: Any):
        self._session = session
        self._inputs: dict[str, Any] = {}
        self._outputs: dict[str, np.ndarray | None] = {}
        self._results: list[OrtValue] = []

    def _input_name(self, what: str, name: Any) -> str:
        known = [a.name for a in self._session.get_inputs()] + [a.name for a in self._session.get_overridable_initializers()]
        if name not in known:
            raise InvalidArgumentError(f"IOBinding.{what}: {name!r} is not an input of the model; its inputs are {known!r}.")
        return name

    def bind_cpu_input(self, name: str, arr_on_cpu: Any) -> None:
        """Bind input ``name`` to an array (read at each run, never written)."""
        self._inputs[self._input_name("bind_cpu_input", name)] = arr_on_cpu

    def bind_input(self, name: str, device_type: Any, device_id: int, element_type: Any, shape: Any, buffer_ptr: int) -> None:
        """Bind input ``name`` to ``shape`` elements of ``element_type`` (a numpy type or an
        ONNX type code) at address ``buffer_ptr``."""
        _cpu_only("IOBinding.bind_input", device_type, device_id)
        self._inputs[self._input_name("bind_input", name)] = _memory("IOBinding.bind_input", element_type, shape, buffer_ptr)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        if not isinstance(ortvalue, OrtValue):
            raise InvalidArgumentError(f"IOBinding.bind_ortvalue_input expects an OrtValue, got {type(ortvalue).__name__}.")
        self._inputs[self._input_name("bind_ortvalue_input", name)] = ortvalue

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: onnxrt's inputs are CPU memory."""

    def bind_output(
        self, name: str, device_type: Any = "cpu", device_id: int = 0, element_type: Any = None, shape: Any = None, buffer_ptr: Any = None
    ) -> None:
        """Bind output ``name``: a new array each run, or, with ``buffer_ptr``, the memory
        there (``element_type`` and ``shape`` required, checked against the result)."""
        _cpu_only("IOBinding.bind_output", device_type, device_id)
        if not isinstance(name, str):
            raise InvalidArgumentError(f"IOBinding.bind_output expects a str name, got {type(name).__name__}.")
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise InvalidArgumentError("IOBinding.bind_output: `element_type` and `shape` are to be provided if pre-allocated memory is provided.")
        self._outputs[name] = _memory("IOBinding.bind_output", element_type, shape, buffer_ptr)

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        """Bind output ``name`` to an OrtValue's tensor: each run writes the result into it."""
        if not isinstance(ortvalue, OrtValue) or not ortvalue.is_tensor():
            raise InvalidArgumentError(f"IOBinding.bind_ortvalue_output expects an OrtValue holding a tensor, got {ortvalue!r}.")
        if not isinstance(name, str):
            raise InvalidArgumentError(f"IOBinding.bind_ortvalue_output expects a str name, got {type(name).__name__}.")
        if not ortvalue.numpy().flags.writeable:
            raise InvalidArgumentError(f"IOBinding.bind_ortvalue_output: the OrtValue bound to {name!r} is read-only.")
        self._outputs[name] = ortvalue.numpy()

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: onnxrt's runs end when their outputs are written."""

    def get_outputs(self) -> list[OrtValue]:
        """The outputs of the last run, in the order they were bound."""
        return list(self._results)

    def get_outputs_as_ortvaluevector(self) -> list[OrtValue]:
        """Same as :meth:`get_outputs` (onnxrt has no separate vector type)."""
        return list(self._results)

    def copy_outputs_to_cpu(self) -> list[Any]:
        """Copies of the last run's outputs as numpy arrays (sequences as lists)."""
        out = []
        for v in self._results:
            value = v._value
            out.append(value.copy() if isinstance(value, np.ndarray) else value)
        return out

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = []

    def _run(self, run_options: Any) -> None:
        """The session's ``run_with_iobinding``: run, then place each result."""
        if not self._outputs:
            raise InvalidArgumentError("IOBinding: at least one output should be bound before run_with_iobinding.")
        names = list(self._outputs)
        results = self._session.run(names, dict(self._inputs), run_options)
        placed = []
        for name, value in zip(names, results):
            dest = self._outputs[name]
            if dest is None:
                placed.append(OrtValue(value))
                continue
            if not isinstance(value, np.ndarray) or value.shape != dest.shape or value.dtype != dest.dtype:
                got = f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__
                raise InvalidArgumentError(
                    f"IOBinding: output {name!r} is {got}, the memory bound to it holds {dest.dtype}{list(dest.shape)}."
                )
            np.copyto(dest, value)
            placed.append(OrtValue(dest))
        self._results = placed
