"""Every conformance model gives the same results with optimisations off and on."""

from __future__ import annotations

import glob
import os
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests

import onnxrt
from onnxrt.errors import OnnxRuntimeError

RANDOM = ("bernoulli", "random", "dropout", "multinomial")


def _cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in ("node", "simple", "pytorch-converted", "pytorch-operator"):
            for case in load_model_tests(kind=kind):
                if any(r in case.name for r in RANDOM):
                    continue
                if case.model is not None:
                    model = case.model
                    inputs = case.data_sets[0][0]
                else:
                    model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
                    sets = sorted(glob.glob(os.path.join(case.model_dir, "test_data_set*")))
                    if not sets:
                        continue
                    inputs = []
                    for i in range(len(glob.glob(os.path.join(sets[0], "input_*.pb")))):
                        t = onnx.TensorProto()
                        with open(os.path.join(sets[0], f"input_{i}.pb"), "rb") as f:
                            t.ParseFromString(f.read())
                        inputs.append(numpy_helper.to_array(t))
                yield case.name, model, inputs


def _close(a, b) -> bool:
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        return bool(np.allclose(a.astype(np.complex128), b.astype(np.complex128), rtol=1e-4, atol=1e-5, equal_nan=True))
    return bool(np.array_equal(a, b))


def test_optimisations_do_not_change_conformance_results(monkeypatch):
    import onnxrt.specialise

    # every plan with one fixed step specialises (the default waits for 8): the mechanism runs
    # over every conformance model with shape arithmetic
    monkeypatch.setattr(onnxrt.specialise, "MIN_STEPS", 1)
    off = onnxrt.SessionOptions()
    off.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    checked, optimised, specialised, different = 0, 0, 0, []
    for name, model, inputs in _cases():
        try:
            plain = onnxrt.InferenceSession(model, off)
            feeds = dict(zip([i.name for i in plain.get_inputs()], inputs))
            want = plain.run(None, feeds)
        except (OnnxRuntimeError, ValueError, TypeError):
            continue  # not supported yet: see expected_failures.txt
        sess = onnxrt.InferenceSession(model)
        checked += 1
        optimised += bool(sess.engine.plan.applied_passes)
        # three runs: the third of one signature runs the plan's shape-specialised table
        # where the model has shape arithmetic to fix (onnxrt.specialise)
        for _ in range(3):
            got = sess.run(None, feeds)
            if not all(_close(a, b) for a, b in zip(got, want)):
                different.append(name)
                break
        spec = sess.engine.plan._specialiser
        specialised += bool(spec is not None and any(e is not None for e in spec._tables.values()))
    assert checked > 300, checked
    assert optimised > 20, optimised
    assert specialised > 0, specialised  # (3 of them here)
    assert not different, different
