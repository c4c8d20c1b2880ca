"""The scikit-learn zoo: fitted estimators and pipelines converted with skl2onnx, run by onnxrt.

Labels must equal scikit-learn's exactly; probabilities, scores, regression values and
transformed features must be within 1e-4 (float32 models, targets and features scaled to
unit size). onnxruntime runs the same models: where it departs from scikit-learn the case
names the departure and the test asserts it.

A model that uses an ai.onnx operator onnxrt does not implement yet is skipped with the
operator named. Every ai.onnx.ml node of every model is also checked on its own against
onnxruntime (``test_ml_nodes_match_onnxruntime``), whatever the rest of the graph needs.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import defs, helper

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

from sklearn import cluster, decomposition, ensemble, impute, linear_model, naive_bayes, neighbors  # noqa: E402
from sklearn import neural_network, pipeline, preprocessing, svm, tree  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.datasets import load_iris, make_classification, make_regression  # noqa: E402
from sklearn.feature_extraction import DictVectorizer  # noqa: E402
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer  # noqa: E402
from skl2onnx import to_onnx  # noqa: E402
from skl2onnx.common.data_types import DictionaryType, FloatTensorType, StringTensorType  # noqa: E402

import onnxrt  # noqa: E402
from onnxrt import registry  # noqa: E402

from ._util import assert_same  # noqa: E402

TARGET_OPSET = {"": 21, "ai.onnx.ml": 3}
ATOL = 1e-4

# ------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------


@functools.cache
def iris():
    x, y = load_iris(return_X_y=True)
    return x.astype(np.float32), y


@functools.cache
def iris_binary():
    x, y = iris()
    return x, (y == 1).astype(np.int64)


@functools.cache
def iris_names():
    x, y = iris()
    return x, np.array(["setosa", "versicolor", "virginica"], dtype=object)[y]


@functools.cache
def classification():
    x, y = make_classification(400, 8, n_informative=5, n_classes=3, n_clusters_per_class=1, random_state=0)
    return x.astype(np.float32), y


@functools.cache
def regression():
    x, y = make_regression(300, 6, noise=5.0, random_state=0)
    y = (y - y.mean()) / y.std()
    return x.astype(np.float32), y


@functools.cache
def regression_2d():
    x, y = make_regression(300, 6, n_targets=2, noise=5.0, random_state=1)
    y = (y - y.mean(axis=0)) / y.std(axis=0)
    return x.astype(np.float32), y


@functools.cache
def regression_wide():
    """Features of size ~10: large dot products, where float32 sums lose digits."""
    x, y = make_regression(1000, 10, noise=10.0, random_state=0)
    y = (y - y.mean()) / y.std()
    return (x * 10).astype(np.float32), y


COLORS = np.array(["red", "green", "blue", "amber"], dtype=object)
SIZES = np.array(["S", "M", "L"], dtype=object)


@functools.cache
def strings():
    rng = np.random.default_rng(0)
    x = np.stack([COLORS[rng.integers(0, 4, 200)], SIZES[rng.integers(0, 3, 200)], COLORS[rng.integers(0, 3, 200)]], axis=1)
    y = ((x[:, 0] == "red") | (x[:, 1] == "L")).astype(np.int64) + (x[:, 2] == "blue")
    return x, y


@functools.cache
def with_missing():
    x, y = classification()
    x = x.copy()
    rng = np.random.default_rng(1)
    x[rng.random(x.shape) < 0.1] = np.nan
    return x, y


WORDS = "the cat dog sat on mat ate my homework and cats dogs are pets red big small house tree runs".split()


@functools.cache
def text():
    rng = np.random.default_rng(2)
    docs = np.array([" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(120)], dtype=object)
    y = np.array([("cat" in d) + ("dog" in d) for d in docs])
    return docs, y


@functools.cache
def dicts():
    rng = np.random.default_rng(3)
    keys = ["alpha", "beta", "gamma", "delta", "eps"]
    rows = [{k: float(np.float32(rng.standard_normal())) for k in rng.choice(keys, size=int(rng.integers(1, 5)), replace=False)} for _ in range(60)]
    return rows, np.array([int(r.get("alpha", 0) > 0) for r in rows])


# ------------------------------------------------------------------------------------------
# the cases
# ------------------------------------------------------------------------------------------


@dataclass
class Case:
    """One fitted model: how to build it, what its outputs mean, and what onnxruntime does."""

    name: str
    build: Callable[[], Any]
    data: Callable[[], tuple[Any, Any]]
    kind: str  # classifier, scores (label + decision values), regressor, transformer, cluster
    options: dict[str, Any] = field(default_factory=dict)
    #: why onnxruntime's outputs differ from scikit-learn's, when they do
    ort_departs: str | None = None
    #: a fixed input type (strings, maps) instead of one inferred from the data
    initial_types: list[tuple[str, Any]] | None = None
    #: binary "scores" models: the output column holding scikit-learn's decision_function
    score_column: int = -1


def _clf(name, build, data=iris, zipmap=False, **kw):
    return Case(name, build, data, "classifier", options={"zipmap": zipmap}, **kw)


CASES = [
    # linear models
    _clf("logistic_regression_multiclass", lambda: linear_model.LogisticRegression(max_iter=500)),
    _clf("logistic_regression_binary_zipmap", lambda: linear_model.LogisticRegression(max_iter=500), iris_binary, zipmap=True),
    _clf("logistic_regression_ovr_zipmap", lambda: __import__("sklearn.multiclass", fromlist=["x"]).OneVsRestClassifier(linear_model.LogisticRegression(max_iter=500)), zipmap=True),
    Case("linear_regression", linear_model.LinearRegression, regression, "regressor"),
    Case("ridge_two_targets", linear_model.Ridge, regression_2d, "regressor"),
    Case("sgd_classifier_hinge", lambda: linear_model.SGDClassifier(random_state=0), classification, "scores"),
    _clf("sgd_classifier_log_loss", lambda: linear_model.SGDClassifier(loss="log_loss", random_state=0), classification),
    Case("ridge_classifier", linear_model.RidgeClassifier, classification, "scores"),
    Case("linear_svc_multiclass", lambda: svm.LinearSVC(random_state=0), classification, "scores"),
    Case("linear_svc_binary", lambda: svm.LinearSVC(random_state=0), iris_binary, "scores"),
    Case("linear_svr", lambda: svm.LinearSVR(random_state=0, max_iter=5000), regression, "regressor"),
    # trees and ensembles
    _clf("decision_tree_multiclass", lambda: tree.DecisionTreeClassifier(max_depth=5, random_state=0), classification),
    _clf("decision_tree_binary_zipmap", lambda: tree.DecisionTreeClassifier(max_depth=3, random_state=0), iris_binary, zipmap=True),
    Case("decision_tree_regressor", lambda: tree.DecisionTreeRegressor(max_depth=6, random_state=0), regression, "regressor"),
    _clf("random_forest_multiclass", lambda: ensemble.RandomForestClassifier(20, max_depth=6, random_state=0), classification),
    _clf("random_forest_binary_zipmap", lambda: ensemble.RandomForestClassifier(10, max_depth=4, random_state=0), iris_binary, zipmap=True),
    Case("random_forest_regressor_two_targets", lambda: ensemble.RandomForestRegressor(10, max_depth=6, random_state=0), regression_2d, "regressor"),
    _clf("random_forest_string_labels", lambda: ensemble.RandomForestClassifier(10, max_depth=4, random_state=0), iris_names),
    _clf("extra_trees_classifier", lambda: ensemble.ExtraTreesClassifier(15, max_depth=6, random_state=0), classification),
    Case("extra_trees_regressor", lambda: ensemble.ExtraTreesRegressor(15, max_depth=6, random_state=0), regression, "regressor"),
    _clf("gradient_boosting_multiclass", lambda: ensemble.GradientBoostingClassifier(n_estimators=20, random_state=0), classification),
    _clf("gradient_boosting_binary_zipmap", lambda: ensemble.GradientBoostingClassifier(n_estimators=20, random_state=0), iris_binary, zipmap=True),
    Case("gradient_boosting_regressor", lambda: ensemble.GradientBoostingRegressor(n_estimators=30, random_state=0), regression, "regressor"),
    _clf("adaboost_classifier", lambda: ensemble.AdaBoostClassifier(n_estimators=10, random_state=0), classification),
    Case("adaboost_regressor", lambda: ensemble.AdaBoostRegressor(n_estimators=10, random_state=0), regression, "regressor"),
    # support vector machines
    _clf("svc_rbf_probability", lambda: svm.SVC(probability=True, random_state=0), classification),
    _clf("svc_poly_probability_binary_zipmap", lambda: svm.SVC(kernel="poly", degree=2, probability=True, random_state=0), iris_binary, zipmap=True),
    _clf("svc_string_labels_zipmap", lambda: svm.SVC(probability=True, random_state=0), iris_names, zipmap=True),
    _clf("logistic_regression_string_labels", lambda: linear_model.LogisticRegression(max_iter=500), iris_names),
    Case("svc_linear_ovr_scores", lambda: svm.SVC(kernel="linear"), iris, "scores"),
    # SVMClassifier's two-class scores are [-d, d] with d libsvm's decision value, whose sign
    # scikit-learn flips: decision_function is the first column
    Case("svc_rbf_binary_scores", lambda: svm.SVC(), iris_binary, "scores", score_column=0),
    Case("svr_rbf", svm.SVR, regression, "regressor"),
    Case("nu_svr_poly", lambda: svm.NuSVR(kernel="poly", degree=2), regression, "regressor"),
    Case("svr_linear_wide_features", lambda: svm.SVR(kernel="linear"), regression_wide, "regressor",
         ort_departs="onnxruntime sums SVMRegressor's kernel terms in float32 and lands ~3e-3 away; onnxrt sums in float64"),
    # other estimators
    _clf("k_neighbors_classifier", lambda: neighbors.KNeighborsClassifier(5), classification),
    Case("k_neighbors_regressor", lambda: neighbors.KNeighborsRegressor(4), regression, "regressor"),
    _clf("gaussian_nb", naive_bayes.GaussianNB, classification),
    _clf("mlp_classifier", lambda: neural_network.MLPClassifier(hidden_layer_sizes=(16,), max_iter=300, random_state=0), classification),
    Case("mlp_regressor", lambda: neural_network.MLPRegressor(hidden_layer_sizes=(16,), max_iter=500, random_state=0), regression, "regressor"),
    Case("kmeans", lambda: cluster.KMeans(3, n_init=3, random_state=0), classification, "cluster"),
    # transformers
    Case("pca", lambda: decomposition.PCA(3), classification, "transformer"),
    Case("standard_scaler", preprocessing.StandardScaler, classification, "transformer"),
    Case("min_max_scaler", preprocessing.MinMaxScaler, classification, "transformer"),
    Case("normalizer_l2", preprocessing.Normalizer, classification, "transformer"),
    Case("normalizer_l1", lambda: preprocessing.Normalizer("l1"), classification, "transformer"),
    Case("binarizer", lambda: preprocessing.Binarizer(threshold=0.2), classification, "transformer"),
    Case("simple_imputer", impute.SimpleImputer, with_missing, "transformer"),
    Case("one_hot_encoder_strings", lambda: preprocessing.OneHotEncoder(sparse_output=False, handle_unknown="ignore"), strings, "transformer",
         initial_types=[("X", StringTensorType([None, 3]))]),
    Case("ordinal_encoder_strings", preprocessing.OrdinalEncoder, strings, "transformer", initial_types=[("X", StringTensorType([None, 3]))]),
    # pipelines
    _clf("pipeline_scaler_svc", lambda: pipeline.make_pipeline(preprocessing.StandardScaler(), svm.SVC(probability=True, random_state=0)), classification),
    _clf("pipeline_imputer_scaler_logistic_zipmap", lambda: pipeline.make_pipeline(impute.SimpleImputer(), preprocessing.StandardScaler(), linear_model.LogisticRegression(max_iter=500)), with_missing, zipmap=True),
    _clf("column_transformer_numeric_random_forest", lambda: pipeline.make_pipeline(
        ColumnTransformer([("scale", preprocessing.StandardScaler(), [0, 1, 2]), ("pca", decomposition.PCA(2), [3, 4, 5, 6]), ("bin", preprocessing.Binarizer(), [7])]),
        ensemble.RandomForestClassifier(10, max_depth=5, random_state=0)), classification),
    _clf("column_transformer_strings_logistic", lambda: pipeline.make_pipeline(
        ColumnTransformer([("onehot", preprocessing.OneHotEncoder(handle_unknown="ignore"), [0, 1]), ("ordinal", preprocessing.OrdinalEncoder(), [2])]),
        linear_model.LogisticRegression(max_iter=500)), strings, initial_types=[("X", StringTensorType([None, 3]))]),
    Case("dict_vectorizer", lambda: DictVectorizer(sparse=False), dicts, "transformer",
         initial_types=[("X", DictionaryType(StringTensorType([]), FloatTensorType([])))]),
    _clf("pipeline_dict_vectorizer_tree", lambda: pipeline.make_pipeline(DictVectorizer(sparse=False), tree.DecisionTreeClassifier(max_depth=3, random_state=0)), dicts,
         initial_types=[("X", DictionaryType(StringTensorType([]), FloatTensorType([])))]),
    Case("count_vectorizer", CountVectorizer, text, "transformer", initial_types=[("X", StringTensorType([None, 1]))]),
    Case("tfidf_vectorizer_bigrams", lambda: TfidfVectorizer(ngram_range=(1, 2)), text, "transformer", initial_types=[("X", StringTensorType([None, 1]))]),
    _clf("pipeline_tfidf_logistic", lambda: pipeline.make_pipeline(TfidfVectorizer(), linear_model.LogisticRegression(max_iter=500)), text,
         initial_types=[("X", StringTensorType([None, 1]))]),
]

TEXT_CASES = {"count_vectorizer", "tfidf_vectorizer_bigrams", "pipeline_tfidf_logistic"}


# ------------------------------------------------------------------------------------------
# conversion and running
# ------------------------------------------------------------------------------------------


@functools.cache
def fitted(name: str):
    case = next(c for c in CASES if c.name == name)
    model = case.build()
    x, y = case.data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(x, y)
    sample = x[:1] if isinstance(x, np.ndarray) else None
    opts = {id(model): case.options} if case.options else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case.initial_types:
            onx = to_onnx(model, initial_types=case.initial_types, options=opts, target_opset=TARGET_OPSET)
        else:
            onx = to_onnx(model, sample, options=opts, target_opset=TARGET_OPSET)
    return model, onx


def inputs_of(case: Case) -> Any:
    x, _ = case.data()
    if case.name in TEXT_CASES:
        return x.reshape(-1, 1)
    return x


def feeds_for(onx: onnx.ModelProto, x: Any) -> list[dict[str, Any]]:
    """One feed dict for the whole batch, or one per row for map inputs (DictVectorizer)."""
    name = onx.graph.input[0].name
    if isinstance(x, list):
        return [{name: row} for row in x]
    return [{name: x}]


def _stack(results: list[list[Any]]) -> list[Any]:
    if len(results) == 1:
        return results[0]
    out = []
    for parts in zip(*results):
        if isinstance(parts[0], list):
            out.append([v for p in parts for v in p])
        else:
            out.append(np.concatenate(parts, axis=0))
    return out


def missing_operators(onx: onnx.ModelProto) -> list[str]:
    """ai.onnx (and other non-ml) operators of the model onnxrt cannot run yet, recursively
    through subgraphs and through the function bodies the engine expands."""
    opsets = {(o.domain or ""): o.version for o in onx.opset_import}
    missing: list[str] = []

    def visit(nodes, opsets):
        for n in nodes:
            domain = n.domain if n.domain not in ("ai.onnx",) else ""
            for att in n.attribute:
                for g in ([att.g] if att.type == onnx.AttributeProto.GRAPH else list(att.graphs)):
                    visit(g.node, opsets)
            if registry.lookup(n.op_type, domain, opsets.get(domain, 1)) is not None:
                continue
            try:
                schema = defs.get_schema(n.op_type, opsets.get(domain, 1), domain)
            except defs.SchemaError:
                schema = None
            if schema is not None and schema.has_function:
                visit(schema.function_body.node, opsets)
                continue
            label = f"{domain or 'ai.onnx'}:{n.op_type}"
            if label not in missing:
                missing.append(label)

    visit(onx.graph.node, opsets)
    return missing


def replace_tokenizer(onx: onnx.ModelProto) -> onnx.ModelProto:
    """skl2onnx tokenizes text with com.microsoft's Tokenizer (no ONNX standard operator);
    on these whitespace-separated corpora ai.onnx StringSplit (opset 20) splits identically
    and its "" padding, like Tokenizer's "#", is outside every vocabulary."""
    out = onnx.ModelProto()
    out.CopyFrom(onx)
    nodes = []
    for n in out.graph.node:
        if n.op_type == "Tokenizer" and n.domain == "com.microsoft":
            nodes.append(helper.make_node("StringSplit", [n.input[0]], [n.output[0], n.output[0] + "_count"], name=n.name))
        else:
            nodes.append(n)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    imports = [o for o in out.opset_import if o.domain != "com.microsoft"]
    del out.opset_import[:]
    out.opset_import.extend(imports)
    return out


def run_onnxrt(onx: onnx.ModelProto, x: Any) -> list[Any]:
    sess = onnxrt.InferenceSession(onx.SerializeToString())
    return _stack([sess.run(None, f) for f in feeds_for(onx, x)])


def ort_session(onx: onnx.ModelProto) -> Any:
    """An onnxruntime session, or a skip when this machine cannot build one (StringNormalizer
    needs the en_US.UTF-8 locale, which not every machine installs)."""
    import onnxruntime as ort

    try:
        return ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        if "locale" in str(e):
            pytest.skip("onnxruntime's StringNormalizer needs the en_US.UTF-8 locale, missing here")
        raise


def run_ort(onx: onnx.ModelProto, x: Any) -> list[Any]:
    sess = ort_session(onx)
    return _stack([sess.run(None, f) for f in feeds_for(onx, x)])


# ------------------------------------------------------------------------------------------
# what scikit-learn says
# ------------------------------------------------------------------------------------------


def _proba_matrix(probabilities: Any, classes: np.ndarray) -> np.ndarray:
    """Probabilities as a matrix, ZipMap's list of dicts included (keys checked)."""
    if isinstance(probabilities, list):
        assert all(isinstance(row, dict) for row in probabilities)
        assert all(list(row) == classes.tolist() for row in probabilities)
        return np.array([list(row.values()) for row in probabilities])
    return np.asarray(probabilities)


def expected_outputs(case: Case, model: Any, x: Any) -> dict[str, np.ndarray]:
    if case.kind == "classifier":
        return {"label": model.predict(x), "proba": model.predict_proba(x)}
    if case.kind == "scores":
        dec = model.decision_function(x)
        return {"label": model.predict(x), "scores": dec}
    if case.kind == "regressor":
        y = model.predict(x)
        return {"value": y.reshape(len(y), -1)}
    if case.kind == "cluster":
        return {"label": model.predict(x), "scores": model.transform(x)}
    out = model.transform(x)
    if hasattr(out, "toarray"):
        out = out.toarray()
    return {"value": np.asarray(out)}


def compare(case: Case, model: Any, outputs: list[Any], expected: dict[str, np.ndarray]) -> list[str]:
    """The differences between a runtime's outputs and scikit-learn's (empty when they agree)."""
    problems = []
    if "label" in expected:
        label = np.asarray(outputs[0]).reshape(-1)
        want = expected["label"].reshape(-1)
        if label.tolist() != want.tolist():
            problems.append(f"{int((label != want).sum())} labels differ")
    if "proba" in expected:
        got = _proba_matrix(outputs[1], model.classes_)
        err = np.abs(got - expected["proba"]).max()
        if not err <= ATOL:
            problems.append(f"probabilities off by {err:.2e}")
    if "scores" in expected:
        got = _proba_matrix(outputs[1], model.classes_) if isinstance(outputs[1], list) else np.asarray(outputs[1], dtype=np.float64)
        want = np.asarray(expected["scores"], dtype=np.float64)
        if want.ndim == 1:  # binary decision function: one column of the two-column scores
            want = want.reshape(-1, 1)
            got = got[:, case.score_column:][:, :1]
        # decision values are not bounded: 1e-4 absolute plus float32's relative rounding
        err = (np.abs(got.reshape(want.shape) - want) / (1 + 1e-1 * np.abs(want))).max() if got.size == want.size else np.inf
        if not err <= ATOL:
            problems.append(f"scores off by {err:.2e}")
    if "value" in expected:
        got = np.asarray(outputs[0], dtype=np.float64)
        want = np.asarray(expected["value"], dtype=np.float64)
        if got.shape != want.shape:
            problems.append(f"shape {got.shape} instead of {want.shape}")
        else:
            err = np.abs(got - want).max() if want.size else 0.0
            if not err <= ATOL:
                problems.append(f"values off by {err:.2e}")
    return problems


def converted(case: Case) -> tuple[Any, onnx.ModelProto]:
    model, onx = fitted(case.name)
    if case.name in TEXT_CASES:
        onx = replace_tokenizer(onx)
    return model, onx


# ------------------------------------------------------------------------------------------
# the tests
# ------------------------------------------------------------------------------------------


def test_the_zoo_is_large_enough():
    assert len(CASES) >= 30
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_onnxrt_equals_scikit_learn(case):
    model, onx = converted(case)
    missing = missing_operators(onx)
    assert not [m for m in missing if m.startswith("ai.onnx.ml:")], missing
    if missing:
        pytest.skip(f"waits for operator(s) {', '.join(missing)}")
    x = inputs_of(case)
    sk_x = x.ravel() if case.name in TEXT_CASES else x
    expected = expected_outputs(case, model, sk_x)
    ours = run_onnxrt(onx, x)
    problems = compare(case, model, ours, expected)
    assert not problems, f"onnxrt departs from scikit-learn: {problems}"
    # dtypes and shapes of the main outputs
    first = np.asarray(ours[0])
    assert first.shape[0] == len(x)
    if case.kind in ("classifier", "scores", "cluster"):
        assert first.dtype.kind == np.asarray(expected["label"]).dtype.kind
    else:
        assert first.dtype == np.float32


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_onnxruntime_against_scikit_learn(case):
    """onnxruntime on the same model: it agrees with scikit-learn, or the case says where not."""
    model, onx = converted(case)
    x = inputs_of(case)
    sk_x = x.ravel() if case.name in TEXT_CASES else x
    problems = compare(case, model, run_ort(onx, x), expected_outputs(case, model, sk_x))
    if case.ort_departs is None:
        assert not problems, f"onnxruntime departs from scikit-learn: {problems}"
    else:
        assert problems, f"onnxruntime now agrees with scikit-learn ({case.ort_departs})"


def _with_all_outputs(onx: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(onx)
    known = {o.name for o in out.graph.output}
    for n in out.graph.node:
        for name in n.output:
            if name and name not in known:
                out.graph.output.append(helper.ValueInfoProto(name=name))
                known.add(name)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ml_nodes_match_onnxruntime(case):
    """Each ai.onnx.ml node alone, fed onnxruntime's values of its inputs, gives onnxruntime's outputs."""
    _, onx = converted(case)
    ml_nodes = [n for n in onx.graph.node if n.domain == "ai.onnx.ml"]
    if not ml_nodes:
        pytest.skip("no ai.onnx.ml node in this model")
    if case.ort_departs:
        pytest.skip(f"onnxruntime is not the oracle here: {case.ort_departs}")
    x = inputs_of(case)
    full = _with_all_outputs(onx)
    sess = ort_session(full)
    names = [o.name for o in sess.get_outputs()]
    feeds = feeds_for(onx, x)[:20]  # map inputs run row by row: 20 rows are plenty
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in onx.graph.initializer}
    for feed in feeds:
        values = dict(zip(names, sess.run(None, feed)))
        values.update(feed)
        values.update(inits)
        for node in ml_nodes:
            inputs = [helper.make_value_info(i, _type_of(onx, i, values[i])) for i in node.input]
            outputs = [helper.ValueInfoProto(name=o) for o in node.output]
            g = helper.make_graph([node], "one", inputs, outputs)
            m = helper.make_model(g, opset_imports=list(onx.opset_import))
            m.ir_version = onx.ir_version
            ours = onnxrt.InferenceSession(m.SerializeToString()).run(None, {i: values[i] for i in node.input})
            for name, got in zip(node.output, ours):
                want = values[name]
                if isinstance(want, list):
                    assert len(got) == len(want)
                    for g_row, w_row in zip(got, want):
                        assert list(g_row) == list(w_row)
                        np.testing.assert_allclose(list(g_row.values()), list(w_row.values()), rtol=0, atol=ATOL)
                else:
                    # onnxruntime computes SVM kernels and couplings in float32, onnxrt in float64:
                    # the zoo's tolerance, 1e-4, bounds the difference
                    assert_same(got, np.asarray(want), atol=ATOL, rtol=0)


def _type_of(onx: onnx.ModelProto, name: str, value: Any) -> onnx.TypeProto:
    for vi in list(onx.graph.input) + list(onx.graph.value_info) + list(onx.graph.output):
        if vi.name == name and vi.type.WhichOneof("value"):
            return vi.type
    if isinstance(value, dict):
        raise AssertionError(f"map value {name!r} without a declared type")
    arr = np.asarray(value)
    elem = onnx.TensorProto.STRING if arr.dtype.kind in "OUS" else helper.np_dtype_to_tensor_dtype(arr.dtype)
    return helper.make_tensor_type_proto(elem, None)
