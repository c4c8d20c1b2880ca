"""Hostile model files (bad sparse tensors, initializers, text, external data) get onnxrt's own error before any allocation."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import ModelLoadError, OnnxRuntimeError, SecurityError


def _model(nodes=(), inits=(), sparse=(), out_type=TensorProto.FLOAT, out="y", opset=18):
    graph = helper.make_graph(
        list(nodes), "g", [], [helper.make_tensor_value_info(out, out_type, None)],
        initializer=list(inits), sparse_initializer=list(sparse),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _run(model, options=None):
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return onnxrt.InferenceSession(data, options).run(None, {})[0]


def _load_error(model, *needles, cls=ModelLoadError, options=None):
    """Load ``model``; assert it fails with ``cls`` whose message holds every needle."""
    with pytest.raises(cls) as info:
        _run(model, options)
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, (needle, msg)
    return msg


def _sparse(values, indices, dims, idx_dims=None, name="y", dtype=TensorProto.FLOAT):
    vals = helper.make_tensor(name, dtype, [len(values)], values)
    idx = helper.make_tensor("idx", TensorProto.INT64, idx_dims or [len(indices)], indices)
    return helper.make_sparse_tensor(vals, idx, dims)


def _peak_during(fn):
    """Peak bytes numpy/Python allocated while ``fn`` ran (fn is expected to raise)."""
    tracemalloc.start()
    try:
        fn()
    except OnnxRuntimeError as e:
        err = e
    else:
        err = None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert err is not None, "no error raised"
    return peak, err


# --- sparse initializers ------------------------------------------------------------------


def test_sparse_initializer_valid_linear_and_coordinates():
    y = _run(_model(sparse=[_sparse([5.0, 7.0], [1, 3], [4])]))
    np.testing.assert_array_equal(y, np.array([0, 5, 0, 7], np.float32))
    y = _run(_model(sparse=[_sparse([5.0, 7.0], [0, 2, 1, 0], [2, 3], idx_dims=[2, 2])]))
    np.testing.assert_array_equal(y, np.array([[0, 0, 5], [7, 0, 0]], np.float32))


def test_sparse_string_default_is_empty_string():
    sp = _sparse([b"a"], [1], [3], dtype=TensorProto.STRING)
    y = _run(_model(sparse=[sp], out_type=TensorProto.STRING))
    assert y.tolist() == ["", "a", ""]


def test_sparse_negative_index_refused():
    _load_error(_model(sparse=[_sparse([5.0], [-1], [4])]), "Sparse initializer 'y'", "index 0 is -1", "outside")


def test_sparse_index_past_dense_shape_refused():
    _load_error(_model(sparse=[_sparse([5.0], [99], [4])]), "Sparse initializer 'y'", "99", "outside the 4 elements")


def test_sparse_coordinate_out_of_axis_refused():
    sp = _sparse([5.0], [0, 3], [2, 3], idx_dims=[1, 2])
    _load_error(_model(sparse=[sp]), "Sparse initializer 'y'", "[0, 3]", "axis 1")


def test_sparse_one_value_for_two_indices_refused():
    _load_error(_model(sparse=[_sparse([5.0], [0, 1], [4], idx_dims=[2])]), "Sparse initializer 'y'", "shape [1]", "[2]")


def test_sparse_duplicate_and_descending_indices_refused():
    _load_error(_model(sparse=[_sparse([1.0, 2.0], [2, 2], [4])]), "Sparse initializer 'y'", "repeats", "strictly ascending")
    _load_error(_model(sparse=[_sparse([1.0, 2.0], [3, 1], [4])]), "Sparse initializer 'y'", "comes after", "strictly ascending")


def test_sparse_huge_dense_shape_refused_before_allocation():
    model = _model(sparse=[_sparse([5.0], [0], [10**6, 10**6])]).SerializeToString()
    peak, err = _peak_during(lambda: _run(model))
    assert isinstance(err, ModelLoadError)
    assert "Sparse initializer 'y'" in str(err) and "4000000000000 bytes" in str(err)
    assert peak < 50_000_000  # the 4 TB dense array never existed


def test_sparse_dense_size_against_max_tensor_bytes():
    opts = onnxrt.SessionOptions()
    opts.max_tensor_bytes = 100
    model = _model(sparse=[_sparse([5.0], [0], [10, 10])])
    _load_error(model, "Sparse initializer 'y'", "400 bytes", "limit of 100", options=opts)
    opts.max_tensor_bytes = 400
    assert _run(model, opts)[0, 0] == 5.0


def test_constant_sparse_value_checked_and_decoded():
    node = helper.make_node("Constant", [], ["y"], name="c", sparse_value=_sparse([2.0], [5], [3], name="v"))
    _load_error(_model([node]), "Node 'c' (Constant)", "sparse_value", "outside")
    node = helper.make_node("Constant", [], ["y"], name="c", sparse_value=_sparse([2.0], [2], [3], name="v"))
    np.testing.assert_array_equal(_run(_model([node])), np.array([0, 0, 2], np.float32))


def test_constant_sparse_value_huge_refused_before_allocation():
    node = helper.make_node("Constant", [], ["y"], name="c", sparse_value=_sparse([2.0], [0], [10**6, 10**6], name="v"))
    model = _model([node]).SerializeToString()
    peak, err = _peak_during(lambda: _run(model))
    assert isinstance(err, ModelLoadError) and "Node 'c' (Constant)" in str(err)
    assert peak < 50_000_000


def _constant_value_sparse(indices):
    node = helper.make_node("Constant", [], ["y"], name="c")
    att = node.attribute.add()
    att.name = "value"
    att.type = onnx.AttributeProto.SPARSE_TENSOR
    att.sparse_tensor.CopyFrom(_sparse([2.0], indices, [3], name="v"))
    return _model([node])


def test_constant_value_holding_sparse_tensor():
    # off-specification (value is typed TENSOR), read as sparse_value like onnxruntime: same checks
    with pytest.warns(onnxrt.ModelWarning, match="sparse tensor in attribute 'value'"):
        np.testing.assert_array_equal(_run(_constant_value_sparse([1])), np.array([0, 2, 0], np.float32))
    with pytest.warns(onnxrt.ModelWarning):
        _load_error(_constant_value_sparse([-1]), "Node 'c' (Constant)", "index 0 is -1", "outside")


# --- dense initializers -------------------------------------------------------------------


def _tensor(**fields):
    t = TensorProto(name="w", **fields)
    return t


def _identity_model(init):
    return _model([helper.make_node("Identity", ["w"], ["y"], name="n")], inits=[init])


def test_raw_data_length_mismatch():
    t = _tensor(data_type=TensorProto.FLOAT, dims=[3], raw_data=b"\0" * 8)
    _load_error(_identity_model(t), "Initializer 'w'", "need 12 bytes", "holds 8")


def test_typed_data_count_mismatch():
    t = _tensor(data_type=TensorProto.FLOAT, dims=[3], float_data=[1.0, 2.0])
    _load_error(_identity_model(t), "Initializer 'w'", "3 values in float_data", "holds 2")
    t = _tensor(data_type=TensorProto.INT64, dims=[2, 2], int64_data=[1, 2, 3, 4, 5])
    _load_error(_identity_model(t), "Initializer 'w'", "4 values in int64_data", "holds 5")
    t = _tensor(data_type=TensorProto.COMPLEX64, dims=[2], float_data=[1.0, 2.0])
    _load_error(_identity_model(t), "Initializer 'w'", "4 values in float_data", "holds 2")


def test_packed_int4_counts():
    good = helper.make_tensor("w", TensorProto.INT4, [3], [1, -2, 3])
    model = _model([helper.make_node("Cast", ["w"], ["y"], to=TensorProto.FLOAT)], inits=[good], opset=21)
    np.testing.assert_array_equal(_run(model), np.array([1, -2, 3], np.float32))
    bad = _tensor(data_type=TensorProto.INT4, dims=[5], int32_data=[1, 2])
    _load_error(_identity_model(bad), "Initializer 'w'", "3 values in int32_data", "holds 2")


def test_unknown_data_type():
    t = _tensor(data_type=999, dims=[2], float_data=[1.0, 2.0])
    _load_error(_identity_model(t), "Initializer 'w'", "element type 999")


def test_huge_dims_without_data_refused_before_allocation():
    model = _identity_model(_tensor(data_type=TensorProto.FLOAT, dims=[10**6, 10**6])).SerializeToString()
    peak, err = _peak_during(lambda: _run(model))
    assert isinstance(err, ModelLoadError) and "Initializer 'w'" in str(err)
    assert peak < 50_000_000


def test_initializer_above_max_tensor_bytes():
    opts = onnxrt.SessionOptions()
    opts.max_tensor_bytes = 16
    t = helper.make_tensor("w", TensorProto.FLOAT, [5], [1.0] * 5)
    _load_error(_identity_model(t), "Initializer 'w'", "20 bytes", "limit of 16", options=opts)


def test_string_initializer_not_utf8_and_raw_strings():
    t = _tensor(data_type=TensorProto.STRING, dims=[2], string_data=[b"ok", b"\xff\xfe"])
    _load_error(_identity_model(t), "Initializer 'w'", "string 1", "UTF-8")
    t = _tensor(data_type=TensorProto.STRING, dims=[1], raw_data=b"abc")
    _load_error(_identity_model(t), "Initializer 'w'", "raw_data")


def _patched(model, old: bytes, new: bytes) -> bytes:
    data = model.SerializeToString()
    assert data.count(old) == 1
    return data.replace(old, new)


def test_non_utf8_op_type_name_and_initializer_name():
    model = _identity_model(helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0]))
    _load_error(_patched(model, b"Identity", b"Identit\xff"), "node 'n'", "op_type", "UTF-8")
    model.graph.node[0].name = "nodename"
    _load_error(_patched(model, b"nodename", b"nodenam\xff"), "field name", "UTF-8")
    model = _model([helper.make_node("Identity", ["weights"], ["y"], name="n")],
                   inits=[helper.make_tensor("weights", TensorProto.FLOAT, [1], [1.0])])
    data = model.SerializeToString().replace(b"weights", b"weight\xff")
    _load_error(data, "field", "UTF-8", "weight\\xff")


# --- external data ------------------------------------------------------------------------


def _external_model(tmp_path, entries, dims=(3,), name="w"):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(dims))
    t.data_location = TensorProto.EXTERNAL
    for k, v in entries.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    path = tmp_path / "m.onnx"
    onnx.save(_model([helper.make_node("Identity", [name], ["y"], name="n")], inits=[t]), str(path))
    return str(path)


def _external_error(path, *needles, cls=ModelLoadError, options=None):
    with pytest.raises(cls) as info:
        onnxrt.InferenceSession(path, options)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_external_data_offset_and_length_read(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\x11" * 4 + np.array([1, 2, 3], np.float32).tobytes() + b"\x22" * 4)
    path = _external_model(tmp_path, {"location": "w.bin", "offset": "4", "length": "12"})
    (y,) = onnxrt.InferenceSession(path).run(None, {})
    np.testing.assert_array_equal(y, np.array([1, 2, 3], np.float32))


def test_external_data_nul_offset_and_length_garbage(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.zeros(3, np.float32).tobytes())
    _external_error(_external_model(tmp_path, {"location": "w\0.bin"}), "Initializer 'w'", "NUL")
    _external_error(_external_model(tmp_path, {"location": "w.bin", "offset": "abc"}), "Initializer 'w'", "offset 'abc'")
    _external_error(_external_model(tmp_path, {"location": "w.bin", "length": "-4"}), "Initializer 'w'", "length '-4'")


def test_external_data_huge_length_refused_before_allocation(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.zeros(3, np.float32).tobytes())
    path = _external_model(tmp_path, {"location": "w.bin", "length": str(10**15)}, dims=(250 * 10**12,))
    peak, err = _peak_during(lambda: onnxrt.InferenceSession(path))
    assert isinstance(err, ModelLoadError)
    assert "Initializer 'w'" in str(err) and str(10**15) in str(err) and "holds 12 bytes" in str(err)
    assert peak < 50_000_000


def test_external_data_length_other_than_shape_needs(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.zeros(4, np.float32).tobytes())
    _external_error(_external_model(tmp_path, {"location": "w.bin"}), "Initializer 'w'", "need 12 bytes", "holds 16")
    _external_error(
        _external_model(tmp_path, {"location": "w.bin", "offset": "20"}), "Initializer 'w'", "offset 20", "past the end"
    )


def test_external_data_directory_refused(tmp_path):
    (tmp_path / "sub").mkdir()
    _external_error(_external_model(tmp_path, {"location": "sub"}), "Initializer 'w'", "a directory", cls=SecurityError)


def _load_in_subprocess(path):
    """Load ``path`` in a fresh interpreter; its stdout ("REFUSED <message>" or "LOADED").

    A load that opens a FIFO blocks forever: the timeout turns that into a failure.
    """
    script = textwrap.dedent(
        f"""
        import onnxrt
        try:
            onnxrt.InferenceSession({path!r})
        except onnxrt.SecurityError as e:
            print("REFUSED", e)
        else:
            print("LOADED")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_external_data_fifo_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "w.bin")
    out = _load_in_subprocess(_external_model(tmp_path, {"location": "w.bin"}))
    assert out.startswith("REFUSED"), out
    assert "Initializer 'w'" in out and "a FIFO, not a regular file" in out


def test_external_data_outside_folder_still_refused(tmp_path):
    _external_error(_external_model(tmp_path, {"location": "../w.bin"}), "outside the model's folder", cls=SecurityError)


def _constant_external_model(tmp_path, location):
    t = TensorProto(name="v", data_type=TensorProto.FLOAT, dims=[3])
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", location
    path = tmp_path / "m.onnx"
    onnx.save(_model([helper.make_node("Constant", [], ["y"], name="c", value=t)]), str(path))
    return str(path)


def test_constant_external_value_read_from_model_folder(tmp_path, monkeypatch):
    (tmp_path / "c.bin").write_bytes(np.array([1, 2, 3], np.float32).tobytes())
    path = _constant_external_model(tmp_path, "c.bin")
    monkeypatch.chdir(tmp_path.parent)  # the folder is the model's, not the current directory
    (y,) = onnxrt.InferenceSession(path).run(None, {})
    np.testing.assert_array_equal(y, np.array([1, 2, 3], np.float32))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_constant_external_value_fifo_and_escape_refused(tmp_path):
    os.mkfifo(tmp_path / "c.bin")
    out = _load_in_subprocess(_constant_external_model(tmp_path, "c.bin"))
    assert out.startswith("REFUSED"), out
    assert "Node 'c' (Constant): attribute 'value'" in out and "a FIFO, not a regular file" in out
    _external_error(_constant_external_model(tmp_path, "../c.bin"), "Node 'c' (Constant)", "outside", cls=SecurityError)
