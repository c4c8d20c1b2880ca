"""External data memory-mapped (onnxrt.model.initializer_array): which tensors are mapped, their values, the checks before."""

from __future__ import annotations

import mmap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import ModelLoadError
from onnxrt.model import MAP_FROM, initializer_array


def _external(name: str, arr: np.ndarray, location: str, offset: int, elem_type: int | None = None) -> TensorProto:
    t = TensorProto()
    t.name = name
    t.data_type = elem_type if elem_type is not None else helper.np_dtype_to_tensor_dtype(arr.dtype)
    t.dims.extend(arr.shape)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(arr.nbytes))):
        e = t.external_data.add()
        e.key, e.value = key, value
    return t


def _write(path, pieces: list[tuple[int, np.ndarray]]) -> None:
    size = max(off + a.nbytes for off, a in pieces)
    buf = bytearray(size)
    for off, a in pieces:
        buf[off:off + a.nbytes] = a.tobytes()
    path.write_bytes(bytes(buf))


def _is_mapped(arr: np.ndarray) -> bool:
    base = arr
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # np.frombuffer's base: a view of the buffer
        base = base.obj
    return isinstance(base, mmap.mmap)


def test_large_tensors_are_mapped_read_only_views_of_the_file(tmp_path):
    rng = np.random.default_rng(0)
    table = rng.standard_normal((512, 64)).astype(np.float32)  # 128 KiB: mapped
    small = rng.standard_normal((4, 4)).astype(np.float32)  # read
    offset = 4096 + 64  # aligned to the element size, not to a page
    _write(tmp_path / "w.bin", [(offset, table), (0, small)])
    t_big = _external("table", table, "w.bin", offset)
    t_small = _external("small", small, "w.bin", 0)
    big = initializer_array(t_big, str(tmp_path))
    assert big.dtype == np.float32 and big.shape == (512, 64) and _is_mapped(big)
    assert not big.flags.writeable
    np.testing.assert_array_equal(big, table)
    got = initializer_array(t_small, str(tmp_path))
    assert not _is_mapped(got)
    np.testing.assert_array_equal(got, small)
    # the proto is left as it was: still external
    assert t_big.data_location == TensorProto.EXTERNAL and not t_big.raw_data


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int8, np.int64, np.uint16])
def test_every_plain_numeric_type_maps_with_its_values(tmp_path, dtype):
    n = MAP_FROM // np.dtype(dtype).itemsize + 3
    arr = (np.arange(n) % 97).astype(dtype).reshape(-1)
    _write(tmp_path / "w.bin", [(64, arr)])
    got = initializer_array(_external("a", arr, "w.bin", 64), str(tmp_path))
    assert _is_mapped(got) and got.dtype == arr.dtype and got.shape == arr.shape
    np.testing.assert_array_equal(got, arr)


def test_unaligned_offset_and_packed_types_are_read(tmp_path):
    arr = np.arange(MAP_FROM, dtype=np.float32)
    _write(tmp_path / "w.bin", [(2, arr)])  # not a multiple of 4: read into an aligned array
    got = initializer_array(_external("a", arr, "w.bin", 2), str(tmp_path))
    assert not _is_mapped(got)
    np.testing.assert_array_equal(got, arr)
    # bfloat16 has no numpy layout of its own: decoded, not mapped
    raw = np.arange(MAP_FROM, dtype=np.uint16)
    _write(tmp_path / "b.bin", [(0, raw)])
    got = initializer_array(_external("b", raw, "b.bin", 0, TensorProto.BFLOAT16), str(tmp_path))
    assert not _is_mapped(got) and got.size == raw.size


def test_checks_come_before_the_mapping(tmp_path):
    arr = np.zeros(MAP_FROM, np.float32)
    _write(tmp_path / "w.bin", [(0, arr)])
    short = _external("a", np.zeros(MAP_FROM * 2, np.float32), "w.bin", 0)
    with pytest.raises(ModelLoadError, match="asks for .* bytes at offset 0"):
        initializer_array(short, str(tmp_path))
    with pytest.raises(ModelLoadError, match="above the limit"):
        initializer_array(_external("a", arr, "w.bin", 0), str(tmp_path), limit=1024)


def test_a_model_runs_on_mapped_weights(tmp_path):
    # a word-embedding table (Gather reads a few rows) and a projection (MatMul reads it all)
    rng = np.random.default_rng(1)
    emb = rng.standard_normal((1000, 32)).astype(np.float32)
    proj = rng.standard_normal((32, 600)).astype(np.float32)
    _write(tmp_path / "m.onnx.data", [(0, emb), (emb.nbytes, proj)])
    graph = helper.make_graph(
        [helper.make_node("Gather", ["emb", "ids"], ["h"]), helper.make_node("MatMul", ["h", "proj"], ["y"])],
        "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 600])],
        [_external("emb", emb, "m.onnx.data", 0), _external("proj", proj, "m.onnx.data", emb.nbytes)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    sess = onnxrt.InferenceSession(str(path))
    ids = np.array([3, 999, 0, 3], np.int64)
    for _ in range(3):  # the first run and the later, compiled, ones
        (y,) = sess.run(None, {"ids": ids})
        assert y.dtype == np.float32 and y.shape == (4, 600)
        # k = 32 products: within 32 eps of the sum of |terms| (BLAS blocks them its own way)
        bound = 32 * np.finfo(np.float32).eps * (np.abs(emb[ids]) @ np.abs(proj))
        assert np.all(np.abs(y - emb[ids] @ proj) <= bound)
    # the file is left as it was
    assert np.array_equal(np.fromfile(tmp_path / "m.onnx.data", np.float32, count=emb.size).reshape(emb.shape), emb)
    assert onnx.load(str(path), load_external_data=False).graph.initializer[0].data_location == TensorProto.EXTERNAL
