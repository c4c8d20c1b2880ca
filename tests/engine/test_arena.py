"""The run arena (onnxrt.native.arena): numpy's allocator inside large runs, kept blocks, what it gives back."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt import native

arena = pytest.importorskip("onnxrt.native.arena") if native.kernels() is not None else None
pytestmark = pytest.mark.skipif(arena is None or not arena.available(), reason="no compiled kernels or no arena here")

BIG = 1 << 20  # float32 elements: 4 MiB, far above arena.LARGE


def _handler(a: np.ndarray) -> str | None:
    return np._core.multiarray.get_handler_name(a)


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture(autouse=True)
def _empty_arena():
    arena.release()
    yield
    arena.release()


def test_arrays_made_inside_a_scope_come_from_the_arena_and_others_do_not():
    outside = np.empty(BIG, np.float32)
    with arena.Scope():
        small = np.ones(3, np.float32)
        large = np.ones(BIG, np.float32)
    after = np.empty(BIG, np.float32)
    assert _handler(small) == _handler(large) == "onnxrt_arena"
    assert _handler(outside) == _handler(after) == "default_allocator"
    assert _address(large) % 64 == 0  # large blocks start on a cache line
    np.testing.assert_array_equal(small, np.ones(3, np.float32))
    assert large.dtype == np.float32 and large.shape == (BIG,) and float(large.sum()) == BIG


def test_a_block_freed_in_a_run_serves_the_next_allocation_of_its_class():
    with arena.Scope():
        a = np.empty(BIG, np.float32)
        first = _address(a)
        del a
        kept = arena.stats()["cached"]
        assert kept >= BIG * 4
        hits = arena.stats()["hits"]
        b = np.empty(BIG - 1000, np.float32)  # a slightly smaller size: the same class
        assert _address(b) == first
        assert arena.stats()["hits"] == hits + 1
        assert arena.stats()["cached"] == kept - arena._class_size(arena._class_of(BIG * 4))
        b[:] = 2.0
        assert float(b.sum()) == 2.0 * (BIG - 1000)


def test_size_classes_hold_their_sizes_within_an_eighth_of_an_octave():
    for size in [arena.LARGE, arena.LARGE + 1, 300_000, 1 << 20, (1 << 20) + 1, 5_000_000, 123_456_789]:
        k = arena._class_of(size)
        cs = arena._class_size(k)
        assert size <= cs <= size * 1.125 + 1, (size, k, cs)
        if k > 0:
            assert arena._class_size(k - 1) < size  # the smallest class that holds it


def test_zeros_from_a_reused_dirty_block_are_zeros():
    with arena.Scope():
        a = np.empty(BIG, np.float32)
        a[:] = np.nan
        del a
        z = np.zeros(BIG, np.float32)
        assert z.dtype == np.float32 and z.shape == (BIG,)
        assert not np.any(z)


def test_blocks_freed_outside_runs_go_back_to_the_c_library():
    with arena.Scope():
        a = np.ones(BIG, np.float32)
    before = arena.stats()["cached"]
    del a  # the caller drops a run's output
    assert arena.stats()["cached"] == before == 0


def test_resizing_keeps_the_data_for_small_and_large_blocks():
    with arena.Scope():
        small = np.arange(10, dtype=np.float64)
        small.resize(50_000, refcheck=False)  # small -> beyond LARGE: the C library's realloc
        np.testing.assert_array_equal(small[:10], np.arange(10, dtype=np.float64))
        assert small.shape == (50_000,) and not np.any(small[10:])
        large = np.arange(BIG, dtype=np.float32)
        large.resize(3 * BIG, refcheck=False)  # beyond its class: a new block, the data copied
        np.testing.assert_array_equal(large[:BIG], np.arange(BIG, dtype=np.float32))
        large.resize(BIG // 2, refcheck=False)  # within its class: the same block
        np.testing.assert_array_equal(large, np.arange(BIG // 2, dtype=np.float32))
        assert _handler(small) == _handler(large) == "onnxrt_arena"


def test_frees_from_other_threads_during_a_run_are_kept_safely():
    with arena.Scope():
        blocks = [np.full(BIG // 4 + i * 4096, i, np.float32) for i in range(64)]
        sums = [float(b.sum()) for b in blocks]
        assert sums == [float(i * (BIG // 4 + i * 4096)) for i in range(64)]

        def drop(start: int) -> None:
            for i in range(start, 64, 4):
                blocks[i] = None

        threads = [threading.Thread(target=drop, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        kept = arena.stats()["cached"]
        assert kept > 0
        again = [np.ones(BIG // 4 + i * 4096, np.float32) for i in range(64)]
        assert all(float(a.sum()) == a.size for a in again)
    del again
    assert arena.release() >= 0 and arena.stats()["cached"] == 0


def test_the_cap_bounds_what_is_kept():
    cap = arena._STATE[arena._CAP]
    arena._STATE[arena._CAP] = 3 * BIG * 4
    try:
        with arena.Scope():
            blocks = [np.empty(BIG, np.float32) for _ in range(6)]
            del blocks
            assert 0 < arena.stats()["cached"] <= 3 * BIG * 4
    finally:
        arena._STATE[arena._CAP] = cap


def test_release_gives_every_kept_block_back():
    with arena.Scope():
        blocks = [np.empty(BIG * (i + 1), np.float32) for i in range(3)]
        del blocks
        kept = arena.stats()["cached"]
    assert kept >= 6 * BIG * 4
    assert arena.release() == kept
    assert arena.stats()["cached"] == 0


def _large_model() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 64, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 64, 64])
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Transpose", ["e"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["t"], ["u"], perm=[0, 2, 1, 3]), helper.make_node("Sub", ["u", "x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("enabled", [True, False])
def test_large_runs_use_the_arena_unless_the_session_options_turn_it_off(enabled):
    x = np.random.default_rng(0).standard_normal((1, 64, 64, 64)).astype(np.float32)
    options = onnxrt.SessionOptions()
    options.enable_cpu_mem_arena = enabled
    session = onnxrt.InferenceSession(_large_model(), options)
    for _ in range(4):
        y = session.run(None, {"x": x})[0]
    hits = arena.stats()["hits"]
    y = session.run(None, {"x": x})[0]
    assert (arena.stats()["hits"] > hits) == enabled
    assert y.dtype == np.float32 and y.shape == x.shape
    # exp(x) - x, each a correctly rounded float32 operation up to exp's few ulp
    np.testing.assert_allclose(y, np.exp(x) - x, rtol=4e-7 * 8, atol=1e-6)
    assert _handler(x) == "default_allocator"  # the feed is the caller's, untouched
    x_copy = x.copy()
    session.run(None, {"x": x})
    np.testing.assert_array_equal(x, x_copy)


def test_the_kept_blocks_go_back_when_the_last_session_that_ran_is_collected():
    x = np.random.default_rng(1).standard_normal((1, 64, 64, 64)).astype(np.float32)
    gc.collect()
    arena._OWNERS.clear()  # sessions of earlier tests still waiting for the collector
    session = onnxrt.InferenceSession(_large_model())
    for _ in range(4):
        session.run(None, {"x": x})
    assert arena.stats()["cached"] > 0
    gone = weakref.ref(session)
    del session
    gc.collect()
    assert gone() is None  # nothing keeps a session alive after its last reference
    if arena._OWNERS or arena._STATE[arena._IN_RUN]:  # a session of another test came back, or runs now
        pytest.skip("another session of this process ran in the arena meanwhile")
    assert arena.stats()["cached"] == 0
