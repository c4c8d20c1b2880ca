"""onnxrt.dask.predict on a real two-process LocalCluster: arrays, DataFrames, several inputs, empty blocks, a killed worker."""

from __future__ import annotations

import logging
import os
import pickle
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")

import onnxrt
import onnxrt.dask as odask
from onnxrt.blocks import ModelHandle, session_builds

from . import _die

TIMEOUT = 180  # seconds; generous on a loaded two-core machine


def _cluster(**kw):
    return distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address="127.0.0.1:0",  # a free port: parallel clusters do not clash
        scheduler_port=0,
        silence_logs=logging.CRITICAL,
        **kw,
    )


@pytest.fixture(scope="module")
def client():
    with _cluster() as cluster, distributed.Client(cluster, timeout=TIMEOUT) as c:
        c.wait_for_workers(2, timeout=TIMEOUT)
        yield c


def _compute(client, *collections):
    return client.gather(client.compute(list(collections)), errors="raise")


@pytest.fixture(scope="module")
def classifier():
    """A 3-class LogisticRegression on 4 features: outputs label int64[N], probabilities float32[N,3]."""
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 0.8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression(max_iter=500).fit(x, y)
        onx = to_onnx(
            clf,
            x[:1],
            options={id(clf): {"zipmap": False}},
            target_opset={"": 18, "ai.onnx.ml": 3},
        )
    return clf, onx.SerializeToString()


def _two_inputs_model(declared_width=None):
    """a float[N,2], b float[N] -> y = a @ w + b as float[N,1] (declared [N, declared_width]), s = sum(a) float[N]."""
    w = numpy_helper.from_array(np.array([[2.0], [-3.0]], np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["a", "w"], ["aw"]),
        helper.make_node("Unsqueeze", ["b", "one"], ["b2"]),
        helper.make_node("Add", ["aw", "b2"], ["y"]),
        helper.make_node("ReduceSum", ["a", "one"], ["s"], keepdims=0),
    ]
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    graph = helper.make_graph(
        nodes,
        "two_inputs",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 2]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N"]),
        ],
        [
            helper.make_tensor_value_info(
                "y", TensorProto.FLOAT, ["N", declared_width]
            ),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N"]),
        ],
        [w, one],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 18)]
    ).SerializeToString()


def _local(model, feeds):
    return onnxrt.InferenceSession(model).run(None, feeds)


def _assert_proba_close(got, want, x, clf):
    """Softmax probabilities of the fixture's logistic regression, scored in blocks, against
    one run over all rows (blocks may take other product paths: BLAS, compiled rows).

    Each score s = x @ coef + intercept may differ by the rounding of 4 products and 4
    additions, 8 ulps of |x| @ |coef| + |intercept|; a change ds moves p_i by
    p_i (ds_i - sum_j p_j ds_j), at most 2 p_i max|ds|; the softmax's own exp, sum and
    division add a few ulps of p (8 allowed).
    """
    eps = np.finfo(np.float32).eps
    x = np.asarray(x, np.float64)
    scale = (np.abs(x) @ np.abs(clf.coef_).T + np.abs(clf.intercept_)).max(axis=1, keepdims=True)
    want = np.asarray(want)
    bound = want.astype(np.float64) * (2 * 8 * eps * scale + 8 * eps)
    got = np.asarray(got)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= bound), f"max error {err.max()}, bound there {bound.ravel()[np.argmax(err - bound)]}"


def _assert_matmul_add_close(got, a, b, want):
    """y = a @ w + b of _two_inputs_model, scored in blocks against one run over all rows.

    The rows' products may be computed by differently blocked BLAS calls (one dot product
    of 2 terms, fused or not), so each value may differ by the rounding of its 2 products
    and 2 additions: at most 4 float32 ulps of the magnitudes involved, |a| @ |w| + |b|.
    """
    w = np.array([2.0, -3.0])
    scale = np.abs(a.astype(np.float64)) @ np.abs(w) + np.abs(b.astype(np.float64))
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bound = 4 * np.finfo(np.float32).eps * scale
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    assert np.all(err <= bound), f"max error {err.max()} over bound {bound[np.argmax(err - bound)]}"


# ---------------------------------------------------------------------------- arrays


def test_array_classifier_equals_local_run(client, classifier):
    clf, model = classifier
    x = np.random.default_rng(1).normal(size=(1000, 4)).astype(np.float32)
    # split along axis 1 too: predict merges it
    data = da.from_array(x, chunks=(150, 2))
    out = odask.predict(model, data)
    assert isinstance(out, dict) and list(out) == ["label", "probabilities"]
    label, proba = out["label"], out["probabilities"]
    assert label.dtype == np.int64 and proba.dtype == np.float32
    assert label.chunks == (data.chunks[0],)
    assert proba.chunks == (data.chunks[0], (3,))
    got_label, got_proba = _compute(client, label, proba)
    want_label, want_proba = _local(model, {"X": x})
    np.testing.assert_array_equal(got_label, want_label)
    _assert_proba_close(got_proba, want_proba, x, clf)
    np.testing.assert_array_equal(got_label, clf.predict(x))
    only = odask.predict(model, data, output_names="probabilities")
    assert isinstance(only, da.Array)
    _assert_proba_close(_compute(client, only)[0], want_proba, x, clf)


def test_array_empty_block(client, classifier):
    clf, model = classifier
    x = np.random.default_rng(2).normal(size=(90, 4)).astype(np.float32)
    data = da.from_array(x, chunks=((40, 0, 50), (4,)))
    out = odask.predict(model, data, output_names=["label", "probabilities"])
    assert out["probabilities"].chunks == ((40, 0, 50), (3,))
    got_label, got_proba = _compute(client, out["label"], out["probabilities"])
    want_label, want_proba = _local(model, {"X": x})
    np.testing.assert_array_equal(got_label, want_label)
    _assert_proba_close(got_proba, want_proba, x, clf)


def test_session_built_once_per_worker(client):
    opts = onnxrt.SessionOptions()
    # other options: another cache key than other tests' sessions of the same model
    opts.intra_op_num_threads = 1
    handle = ModelHandle(_two_inputs_model(1), opts)
    x = np.random.default_rng(3).normal(size=(400, 2)).astype(np.float32)
    frame = dd.from_pandas(
        pd.DataFrame({"a_0": x[:, 0], "a_1": x[:, 1], "b": x[:, 0] * 0.5}),
        npartitions=16,
    )
    first = odask.predict(handle, frame)
    second = odask.predict(handle, frame, output_names="y")
    graph = dict(first.__dask_graph__())
    # the model is one key of the graph, not a copy in every task
    assert sum("onnxrt-model-" in str(k) for k in graph) == 1
    res1, res2 = _compute(client, first, second)
    builds = client.run(session_builds)
    per_worker = [b.get(handle.key, 0) for b in builds.values()]
    # 32 blocks over two predict calls, and each worker process built the session at most once
    assert max(per_worker) == 1 and 1 <= sum(per_worker) <= 2, builds
    want_y, want_s = _local(
        handle.model_bytes, {"a": x, "b": (x[:, 0] * 0.5).astype(np.float32)}
    )
    b = (x[:, 0] * 0.5).astype(np.float32)
    _assert_matmul_add_close(res1["y"].to_numpy(), x, b, want_y[:, 0])
    _assert_matmul_add_close(res2["y"].to_numpy(), x, b, want_y[:, 0])
    np.testing.assert_array_equal(res1["s"].to_numpy(), want_s)


# ------------------------------------------------------------------------ dataframes


def test_dataframe_classifier_equals_local_run(client, classifier):
    clf, model = classifier
    # float64 columns: cast to the model's float32
    x = np.random.default_rng(4).normal(size=(500, 4))
    pdf = pd.DataFrame(x, columns=["f0", "f1", "f2", "f3"], index=np.arange(1000, 1500))
    frame = dd.from_pandas(pdf, npartitions=4)
    out = odask.predict(model, frame, batch_size=64)
    assert list(out.columns) == [
        "label",
        "probabilities_0",
        "probabilities_1",
        "probabilities_2",
    ]
    assert out.dtypes.to_dict() == {
        "label": np.int64,
        **{f"probabilities_{j}": np.float32 for j in range(3)},
    }
    assert out.divisions == frame.divisions
    (got,) = _compute(client, out)
    want_label, want_proba = _local(model, {"X": x.astype(np.float32)})
    assert got.index.equals(pdf.index)
    np.testing.assert_array_equal(got["label"].to_numpy(), want_label)
    _assert_proba_close(
        got[["probabilities_0", "probabilities_1", "probabilities_2"]].to_numpy(),
        want_proba,
        x,
        clf,
    )
    np.testing.assert_array_equal(
        got["label"].to_numpy(), clf.predict(x.astype(np.float32))
    )


def test_dataframe_several_inputs_by_column_name(client):
    # y declared [N, ?]: its width is learned by one local run
    model = _two_inputs_model()
    rng = np.random.default_rng(5)
    pdf = pd.DataFrame(
        {
            "b": rng.normal(size=300),
            "other": rng.normal(size=300),
            "a_1": rng.normal(size=300),
            "a_0": rng.normal(size=300),
        }
    )
    out = odask.predict(model, dd.from_pandas(pdf, npartitions=3))
    assert list(out.columns) == ["y", "s"]
    assert out.dtypes.to_dict() == {"y": np.float32, "s": np.float32}
    (got,) = _compute(client, out)
    a = pdf[["a_0", "a_1"]].to_numpy(np.float32)
    want_y, want_s = _local(model, {"a": a, "b": pdf["b"].to_numpy(np.float32)})
    _assert_matmul_add_close(got["y"].to_numpy(), a, pdf["b"].to_numpy(np.float32), want_y[:, 0])
    # a sum of two float32 values is correctly rounded whatever the blocking: exact
    np.testing.assert_array_equal(got["s"].to_numpy(), want_s)


def test_dataframe_empty_partition(client, classifier):
    clf, model = classifier
    x = np.random.default_rng(6).normal(size=(120, 4))
    pdf = pd.DataFrame(x, columns=["f0", "f1", "f2", "f3"])
    parts = [pdf.iloc[:70], pdf.iloc[:0], pdf.iloc[70:]]
    frame = dd.from_delayed([dask.delayed(p) for p in parts], meta=pdf.iloc[:0])
    out = odask.predict(model, frame)
    (got,) = _compute(client, out)
    assert len(got) == 120
    want_label, want_proba = _local(model, {"X": x.astype(np.float32)})
    np.testing.assert_array_equal(got["label"].to_numpy(), want_label)
    _assert_proba_close(got.iloc[:, 1:].to_numpy(), want_proba, x, clf)
    empty = odask.predict(model, frame).partitions[1].compute(scheduler="sync")
    assert len(empty) == 0 and empty.dtypes.to_dict() == out.dtypes.to_dict()


def test_dataframe_with_integer_column_labels(classifier):
    _, model = classifier
    x = np.random.default_rng(11).normal(size=(30, 4))
    frame = dd.from_pandas(pd.DataFrame(x), npartitions=2)  # columns 0, 1, 2, 3
    got = odask.predict(model, frame).compute(scheduler="sync")
    want_label, _ = _local(model, {"X": x.astype(np.float32)})
    np.testing.assert_array_equal(got["label"].to_numpy(), want_label)


def test_dataframe_string_labels():
    """A classifier on string classes: an object column, in the metadata as in the partitions."""
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(7)
    x = rng.normal(size=(200, 3)).astype(np.float32)
    y = np.where(x[:, 0] > 0, "up", "down")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression().fit(x, y)
        model = to_onnx(
            clf,
            x[:1],
            options={id(clf): {"zipmap": False}},
            target_opset={"": 18, "ai.onnx.ml": 3},
        )
    frame = dd.from_pandas(pd.DataFrame(x, columns=["p", "q", "r"]), npartitions=2)
    out = odask.predict(model, frame, output_names="label")
    assert out.dtypes["label"] == object
    got = out.compute(scheduler="sync")
    assert got.dtypes["label"] == object
    np.testing.assert_array_equal(got["label"].to_numpy(), clf.predict(x))


# --------------------------------------------------------------- laziness, batch_size


def _never(*args):
    raise AssertionError("predict computed its input to learn the metadata")


def test_metadata_needs_no_computation(classifier):
    _, model = classifier
    data = da.concatenate(
        [
            da.from_delayed(dask.delayed(_never)(i), (100, 4), np.float32)
            for i in range(3)
        ]
    )
    out = odask.predict(model, data)
    assert out["probabilities"].shape == (300, 3) and out["probabilities"].chunks == (
        (100, 100, 100),
        (3,),
    )
    meta = pd.DataFrame(
        {"u": np.zeros(0), "v": np.zeros(0), "w": np.zeros(0), "z": np.zeros(0)}
    )
    frame = dd.from_delayed(
        [dask.delayed(_never)(i) for i in range(2)], meta=meta, verify_meta=False
    )
    pred = odask.predict(
        _two_inputs_model(), frame.rename(columns={"u": "a_0", "v": "a_1", "w": "b"})
    )
    assert list(pred.columns) == ["y", "s"] and pred.npartitions == 2


def _batch_dependent_model():
    """y = x - max(x over the rows of the run): reveals how rows were grouped into runs."""
    nodes = [
        helper.make_node("ReduceMax", ["x"], ["m"], axes=[0], keepdims=1),
        helper.make_node("Sub", ["x", "m"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_batch_size_splits_each_block():
    model = _batch_dependent_model()
    x = np.random.default_rng(8).normal(size=(25, 3)).astype(np.float32)
    out = odask.predict(model, da.from_array(x, chunks=10), batch_size=4).compute(
        scheduler="sync"
    )
    sess = onnxrt.InferenceSession(model)
    want = [
        sess.run(None, {"x": x[b + s : b + min(s + 4, n)]})[0]
        for b, n in ((0, 10), (10, 10), (20, 5))
        for s in range(0, n, 4)
    ]
    np.testing.assert_array_equal(out, np.concatenate(want))
    whole = odask.predict(model, da.from_array(x, chunks=10)).compute(scheduler="sync")
    np.testing.assert_array_equal(whole[:10], sess.run(None, {"x": x[:10]})[0])


def test_model_handle_pickles_as_bytes_and_reuses_the_process_session(tmp_path):
    model = _batch_dependent_model()
    handle = ModelHandle(model)
    sess = handle.session()
    copy = pickle.loads(pickle.dumps(handle))
    assert copy.key == handle.key and copy.session() is sess
    assert session_builds()[handle.key] == 1
    assert len(pickle.dumps(handle)) < len(handle.model_bytes) + 2000
    # sessions pickle too (model bytes and options)
    sess2 = pickle.loads(pickle.dumps(sess))
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(
        sess2.run(None, {"x": x})[0], sess.run(None, {"x": x})[0]
    )


def test_model_handle_inlines_external_data(tmp_path):
    import onnx

    w = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(4, 1024), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1024])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    path = tmp_path / "m.onnx"
    onnx.save_model(
        model, path, save_as_external_data=True, location="m.data", size_threshold=0
    )
    handle = ModelHandle(str(path))
    os.remove(tmp_path / "m.data")  # a worker elsewhere sees none of the driver's files
    x = np.ones((3, 4), np.float32)
    (y,) = onnxrt.InferenceSession(handle.model_bytes).run(None, {"x": x})
    np.testing.assert_array_equal(y, x @ numpy_helper.to_array(w))


# --------------------------------------------------------------------------- errors


def test_errors_name_what_was_expected_and_what_came(classifier):
    _, model = classifier
    x = da.zeros((10, 4), chunks=5, dtype=np.float32)
    with pytest.raises(onnxrt.InvalidFeedError, match=r"input_name='Z'.*\['X'\]"):
        odask.predict(model, x, input_name="Z")
    with pytest.raises(
        onnxrt.InvalidFeedError, match=r"tensor\(float\).*float64.*astype"
    ):
        odask.predict(model, x.astype(np.float64))
    with pytest.raises(onnxrt.InvalidFeedError, match=r"dimension 1 to be 4.*3"):
        odask.predict(model, x[:, :3])
    with pytest.raises(
        onnxrt.InvalidFeedError,
        match=r"dask.array.Array or a dask.dataframe.DataFrame.*numpy.ndarray",
    ):
        odask.predict(model, np.zeros((10, 4), np.float32))
    with pytest.raises(
        onnxrt.InvalidFeedError, match=r"'nope'.*\['label', 'probabilities'\]"
    ):
        odask.predict(model, x, output_names=["nope"])
    with pytest.raises(
        onnxrt.InvalidFeedError, match="batch_size must be a positive int.*0"
    ):
        odask.predict(model, x, batch_size=0)
    with pytest.raises(onnxrt.ModelLoadError):
        odask.predict(b"not a model", x)
    two = _two_inputs_model(1)
    frame = dd.from_pandas(
        pd.DataFrame({"a_0": [1.0], "a_1": [2.0], "c": [3.0]}), npartitions=1
    )
    with pytest.raises(
        onnxrt.InvalidFeedError,
        match=r"none found for \['b'\] among \['a_0', 'a_1', 'c'\]",
    ):
        odask.predict(two, frame)
    with pytest.raises(
        onnxrt.InvalidFeedError, match=r"The model has 2 inputs \['a', 'b'\]"
    ):
        odask.predict(two, x)
    text = dd.from_pandas(
        pd.DataFrame({"f0": ["a"], "f1": [1.0], "f2": [1.0], "f3": [1.0]}),
        npartitions=1,
    )
    with pytest.raises(
        onnxrt.InvalidFeedError,
        match=r"Column 'f0' of dtype .*input 'X' \(tensor\(float\)\)",
    ):
        odask.predict(model, text)
    narrow = dd.from_pandas(pd.DataFrame({"f0": [1.0], "f1": [1.0]}), npartitions=1)
    with pytest.raises(onnxrt.InvalidFeedError, match=r"expects 4 columns.*has 2"):
        odask.predict(model, narrow)


def test_a_block_unlike_the_declared_type_fails_loudly():
    frame = dd.from_pandas(
        pd.DataFrame({"a_0": [1.0, 2.0], "a_1": [2.0, 3.0], "b": [3.0, 4.0]}),
        npartitions=1,
    )
    # declares y [N, 2], computes [N, 1]
    out = odask.predict(_two_inputs_model(2), frame)
    assert list(out.columns) == ["y_0", "y_1", "s"]
    with pytest.raises(
        onnxrt.GraphError, match=r"'y' came as float32\[2,1\].*expected float32\[2,2\]"
    ):
        out.compute(scheduler="sync")


def test_zipmap_outputs_are_refused():
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    x = np.random.default_rng(9).normal(size=(50, 2)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression().fit(x, x[:, 0] > 0)
        model = to_onnx(clf, x[:1], target_opset={"": 18, "ai.onnx.ml": 3})
    with pytest.raises(
        onnxrt.GraphError, match=r"'output_probability' is a seq.*zipmap"
    ):
        odask.predict(model, da.from_array(x, chunks=10))


# ------------------------------------------------------------------- a worker dies


def _die_model(marker, row):
    graph = helper.make_graph(
        [
            helper.make_node(
                "DieOnce",
                ["x"],
                ["d"],
                domain=_die.DOMAIN,
                marker=str(marker),
                row=float(row),
            ),
            helper.make_node("Mul", ["d", "two"], ["y"]),
        ],
        "die",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")],
    )
    return helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", 18),
            helper.make_opsetid(_die.DOMAIN, 1),
        ],
    )


def test_worker_killed_during_computation_loses_nothing(tmp_path):
    _die.register()  # the driver's own session (planning) needs the operator too
    marker = tmp_path / "died"
    n = 600
    x = np.stack([np.arange(n), np.linspace(-1, 1, n)], axis=1).astype(np.float32)
    data = da.from_array(x, chunks=50)
    # block 6 of 12 kills its worker
    y = odask.predict(_die_model(marker, row=325), data)
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 3}),
        _cluster() as cluster,
        distributed.Client(cluster, timeout=TIMEOUT) as c,
    ):
        c.register_plugin(_die.RegisterDieOnce())
        c.wait_for_workers(2, timeout=TIMEOUT)
        pids = set(c.run(os.getpid).values())
        got = c.compute(y).result(timeout=TIMEOUT)
        assert marker.exists()  # a worker did die on that block
        np.testing.assert_array_equal(got, x * 2)  # and dask re-ran what it lost
        c.wait_for_workers(2, timeout=TIMEOUT)
        # the nanny started a new worker process
        assert set(c.run(os.getpid).values()) != pids


# --------------------------------------------------------------------------- README


def test_readme_usage_runs(tmp_path, monkeypatch, classifier):
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(
        encoding="utf-8"
    )
    section = readme.split("## On a cluster (Dask)", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    _, model = classifier
    (tmp_path / "model.onnx").write_bytes(model)
    monkeypatch.chdir(tmp_path)
    x = np.random.default_rng(10).normal(size=(40, 4))
    frame = dd.from_pandas(
        pd.DataFrame(x, columns=["f0", "f1", "f2", "f3"]), npartitions=2
    )
    with dask.config.set(scheduler="sync"):
        exec(compile(block, "README.md", "exec"), {"frame": frame})  # noqa: S102
    scores = pd.read_parquet(tmp_path / "scores")
    want_label, _ = _local(model, {"X": x.astype(np.float32)})
    np.testing.assert_array_equal(scores["label"].to_numpy(), want_label)
