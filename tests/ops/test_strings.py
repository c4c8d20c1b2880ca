"""String operators and TfIdfVectorizer: spec cases, edge cases, onnxruntime and plain-loop oracles, errors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import InvalidAttributeError, KernelError
from onnxrt.ops_cpu.op_regex_full_match import RegexFullMatch, re2_to_python, regex_full_match
from onnxrt.ops_cpu.op_string_concat import string_concat
from onnxrt.ops_cpu.op_string_normalizer import StringNormalizer, string_normalizer
from onnxrt.ops_cpu.op_string_split import string_split
from onnxrt.ops_cpu.op_tfidf_vectorizer import TfIdfVectorizer

S = TensorProto.STRING


def _obj(values) -> np.ndarray:
    arr = np.empty(np.shape(values), dtype=object)
    arr[...] = values
    return arr


def _one_node(op: str, inputs, outputs, opset: int = 20, **atts) -> onnx.ModelProto:
    node = helper.make_node(op, [n for n, _, _ in inputs], [n for n, _, _ in outputs], **atts)
    graph = helper.make_graph(
        [node], op,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def _ort(model: onnx.ModelProto, feeds):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


# --- StringNormalizer ------------------------------------------------------------------------


def plain_normalizer(values, action, sensitive, stopwords):
    """The spec text as a loop (onnxruntime needs system locales this machine may lack)."""
    words = set(stopwords) if sensitive else {w.casefold() for w in stopwords}
    kept = [v for v in values if (v if sensitive else v.casefold()) not in words]
    change = {"NONE": lambda v: v, "LOWER": str.lower, "UPPER": str.upper}[action]
    return [change(v) for v in kept] or [""]


@pytest.mark.parametrize("action", ["NONE", "LOWER", "UPPER"])
@pytest.mark.parametrize("sensitive", [0, 1])
def test_string_normalizer_in_a_model(action, sensitive):
    values = ["Monday", "tuesday", "MONDAY", "Wédnesday", "çedille", "monday"]
    m = _one_node("StringNormalizer", [("x", S, [6])], [("y", S, None)], opset=10,
                  case_change_action=action, is_case_sensitive=sensitive, stopwords=["monday"])
    (got,) = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"x": _obj(values)})
    assert got.dtype == object
    assert got.tolist() == plain_normalizer(values, action, sensitive, ["monday"])
    assert got.shape == ((5,) if sensitive else (3,))


def test_string_normalizer_two_dims_and_empty_output():
    x = _obj([["monday", "Tuesday", "MONDAY"]])
    y = string_normalizer(x, "UPPER", 0, ["monday"])
    assert y.shape == (1, 1) and y.tolist() == [["TUESDAY"]]
    y = string_normalizer(_obj(["monday", "monday"]), "UPPER", 1, ["monday"])
    assert y.shape == (1,) and y.tolist() == [""]
    y = string_normalizer(_obj([["monday"]]), "NONE", 1, ["monday"])
    assert y.shape == (1, 1) and y.tolist() == [[""]]
    y = string_normalizer(_obj(["a", "B"]), "NONE", 0, None)  # no stop words: unchanged
    assert y.tolist() == ["a", "B"]


def test_string_normalizer_case_folding_and_locale():
    # caseless matching uses Unicode case folding: the stop word matches the upper form
    assert string_normalizer(_obj(["STRASSE", "weg"]), "NONE", 0, ["straße"]).tolist() == ["weg"]
    assert string_normalizer(_obj(["STRASSE"]), "NONE", 1, ["straße"]).tolist() == ["STRASSE"]
    x = _obj(["Istanbul", "ılık", "İzmir"])
    assert string_normalizer(x, "LOWER", 0, None, "en_US").tolist() == ["istanbul", "ılık", "i̇zmir"]
    assert string_normalizer(x, "LOWER", 0, None, "tr_TR.UTF-8").tolist() == ["ıstanbul", "ılık", "izmir"]
    assert string_normalizer(x, "UPPER", 0, None, "az-AZ").tolist() == ["ISTANBUL", "ILIK", "İZMİR"]


def test_string_normalizer_errors():
    with pytest.raises(KernelError, match=r"\[C\] or \[1, C\] tensor, got shape \[2, 2\]"):
        string_normalizer(_obj([["a", "b"], ["c", "d"]]))
    node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="TITLE")
    with pytest.raises(InvalidAttributeError, match=r"'case_change_action' is 'TITLE'"):
        StringNormalizer(node)


# --- StringConcat ------------------------------------------------------------------------------


def test_string_concat_broadcasting_empty_and_zero_dim():
    x = _obj(["a", "bc", ""])
    y = _obj([["1"], ["22"]])
    out = string_concat(x, y)
    assert out.dtype == object and out.shape == (2, 3)
    assert out.tolist() == [["a1", "bc1", "1"], ["a22", "bc22", "22"]]
    z = string_concat(_obj("abc"), _obj("déf"))
    assert isinstance(z, np.ndarray) and z.shape == () and z.dtype == object and z[()] == "abcdéf"
    e = string_concat(np.empty((0, 2), dtype=object), _obj(["x", "y"]))
    assert e.shape == (0, 2) and e.dtype == object
    with pytest.raises(KernelError, match="do not broadcast"):
        string_concat(_obj(["a", "b"]), _obj(["a", "b", "c"]))


def test_string_concat_in_a_model_keeps_zero_dimensional_output():
    m = _one_node("StringConcat", [("x", S, []), ("y", S, [])], [("z", S, [])])
    (z,) = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"x": _obj("a"), "y": _obj("b")})
    assert isinstance(z, np.ndarray) and z.shape == () and z[()] == "ab"


# --- StringSplit -------------------------------------------------------------------------------


def test_string_split_semantics():
    y, n = string_split(_obj(["o-n-n--x-", "o-n----nx"]), "-")
    assert y.tolist() == [["o", "n", "n", "", "x", ""], ["o", "n", "", "", "", "nx"]]
    assert n.dtype == np.int64 and n.tolist() == [6, 6]
    x = _obj([["hello world !", "  hello   world !"], ["hello world", ""]])
    for delimiter in (None, ""):
        y, n = string_split(x, delimiter)  # whitespace runs, stripped ends
        assert y.shape == (2, 2, 3)
        assert y.tolist() == [[["hello", "world", "!"], ["hello", "world", "!"]], [["hello", "world", ""], ["", "", ""]]]
        assert n.tolist() == [[3, 3], [2, 0]]
    y, n = string_split(_obj(["a.b.c.d", "x"]), ".", maxsplit=2)
    assert y.tolist() == [["a", "b", "c.d"], ["x", "", ""]] and n.tolist() == [3, 1]
    y, n = string_split(_obj(["abc"]), "abc")
    assert y.tolist() == [["", ""]] and n.tolist() == [2]
    y, n = string_split(np.empty((0,), dtype=object))
    assert y.shape == (0, 0) and n.shape == (0,) and n.dtype == np.int64
    y, n = string_split(_obj("a b"))  # a scalar gives a 1-D result
    assert y.shape == (2,) and n.shape == () and int(n) == 2


def test_string_split_against_onnxruntime():
    x = _obj([["a,b,,c", ",", ""], ["no", "x,y", ",,,"]])
    m = _one_node("StringSplit", [("x", S, [2, 3])], [("y", S, None), ("n", TensorProto.INT64, None)], delimiter=",", maxsplit=2)
    got = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    want = _ort(m, {"x": x})
    assert got[0].tolist() == want[0].tolist()
    np.testing.assert_array_equal(got[1], want[1])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.text(alphabet="ab- ", max_size=8), min_size=1, max_size=6),
    st.sampled_from([None, "-", "ab", " "]),
    st.one_of(st.none(), st.integers(0, 3)),
)
def test_string_split_matches_a_plain_definition(values, delimiter, maxsplit):
    y, n = string_split(_obj(values), delimiter, maxsplit)
    for row, count, s in zip(y.tolist(), n.tolist(), values):
        parts = s.split(delimiter or None, -1 if maxsplit is None else maxsplit) if s else []
        assert count == len(parts) and row[:count] == parts and all(p == "" for p in row[count:])


# --- RegexFullMatch ------------------------------------------------------------------------------


def test_regex_full_match_values_and_shape():
    x = _obj([["www.google.com", "www.facebook.com"], ["www.bbc.co.uk", "google.com"]])
    y = regex_full_match(x, r"www\.[\w.-]+\.\bcom\b")
    assert y.dtype == bool and y.shape == (2, 2)
    assert y.tolist() == [[True, True], [False, False]]
    assert regex_full_match(np.empty((0, 3), dtype=object), "a").shape == (0, 3)
    assert regex_full_match(_obj(["abc", "abcd"]), "abc").tolist() == [True, False]  # full match, not search


def test_re2_syntax_translation():
    assert regex_full_match(_obj(["ab12", "ab1x"]), "[[:alpha:]]+[[:digit:]]+").tolist() == [True, False]
    assert regex_full_match(_obj(["a.b*", "ab"]), r"\Qa.b*\E").tolist() == [True, False]
    assert regex_full_match(_obj(["abc"]), r"abc\z").tolist() == [True]
    assert re2_to_python(r"[\]a-z]x") == r"[\]a-z]x"
    for bad in (r"(a)\1", "a(?=b)", "(?<!x)y", r"\pL", "(?U)a+"):
        with pytest.raises(ValueError):
            re2_to_python(bad)


def test_regex_full_match_bad_pattern_fails_at_load():
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="a(?=b)", name="rx")
    with pytest.raises(InvalidAttributeError, match=r"'rx'.*not a valid RE2 pattern"):
        RegexFullMatch(node)
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="(unclosed")
    with pytest.raises(InvalidAttributeError, match="not a valid RE2 pattern"):
        RegexFullMatch(node)


def test_regex_full_match_against_onnxruntime():
    x = _obj(["user@example.com", "not an email", "a@b", "x@y.org"])
    m = _one_node("RegexFullMatch", [("x", S, [4])], [("y", TensorProto.BOOL, [4])], pattern=r"[\w.+-]+@[\w-]+\.[\w.]+")
    (got,) = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    (want,) = _ort(m, {"x": x})
    np.testing.assert_array_equal(got, want)


# --- TfIdfVectorizer -----------------------------------------------------------------------------


def plain_tfidf(x, mode, min_n, max_n, max_skip, ngram_counts, ngram_indexes, pool, weights=None):
    """Loop definition from the spec text: count every n-gram at every skip, look it up in the pool."""
    rows = [list(x)] if np.ndim(x) == 1 else [list(r) for r in x]
    starts = list(ngram_counts) + [len(pool)]
    table = {}
    slot = 0
    for n in range(1, len(ngram_counts) + 1):
        items = list(pool[starts[n - 1]:starts[n]])
        for k in range(0, len(items), n):
            table[tuple(items[k:k + n])] = slot
            slot += 1
    size = max(ngram_indexes) + 1
    out = np.zeros((len(rows), size), dtype=np.float32)
    w = np.ones(len(ngram_indexes)) if weights is None else np.asarray(weights)
    for r, row in enumerate(rows):
        counts = np.zeros(len(ngram_indexes))
        for n in range(min_n, max_n + 1):
            skips = range(max_skip + 1) if n > 1 else [0]
            for s in skips:
                for j in range(len(row)):
                    pos = [j + k * (s + 1) for k in range(n)]
                    if pos[-1] >= len(row):
                        break
                    key = tuple(row[p] for p in pos)
                    if key in table:
                        counts[table[key]] += 1
        if mode == "IDF":
            counts = np.minimum(counts, 1) * w
        elif mode == "TFIDF":
            counts = counts * w
        for i, idx in enumerate(ngram_indexes):
            out[r, idx] = counts[i]
    return out[0] if np.ndim(x) == 1 else out


def _tfidf(mode="TF", min_n=1, max_n=2, max_skip=0, ngram_counts=(0, 4), ngram_indexes=tuple(range(7)),
           pool_int64s=None, pool_strings=None, weights=None):
    atts = dict(mode=mode, min_gram_length=min_n, max_gram_length=max_n, max_skip_count=max_skip,
                ngram_counts=list(ngram_counts), ngram_indexes=list(ngram_indexes))
    if pool_int64s is not None:
        atts["pool_int64s"] = list(pool_int64s)
    if pool_strings is not None:
        atts["pool_strings"] = list(pool_strings)
    if weights is not None:
        atts["weights"] = [float(w) for w in weights]
    return TfIdfVectorizer(helper.make_node("TfIdfVectorizer", ["x"], ["y"], **atts)), atts


POOL = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7]


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("min_n, max_n, skip", [(1, 1, 0), (2, 2, 0), (1, 2, 5), (2, 2, 3)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_tfidf_int_pool_against_plain_loop(mode, min_n, max_n, skip, dtype):
    weights = [0.5, 1.0, 2.0, 3.0, 0.25, 1.5, 4.0]
    op, _ = _tfidf(mode, min_n, max_n, skip, pool_int64s=POOL, weights=weights)
    for x in (np.array([1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8], dtype), np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], dtype)):
        (y,) = op.run(x)
        want = plain_tfidf(x, mode, min_n, max_n, skip, [0, 4], list(range(7)), POOL, weights)
        assert y.dtype == np.float32 and y.shape == want.shape
        np.testing.assert_allclose(y, want)


def test_tfidf_string_pool_and_permuted_indexes():
    pool = ["a", "b", "c", "a", "b", "b", "c", "c", "a", "z", "zz"]
    ngram_counts, ngram_indexes = [0, 3], [4, 0, 2, 1, 3, 6, 5]
    op, _ = _tfidf("TFIDF", 1, 2, 1, ngram_counts, ngram_indexes, pool_strings=pool, weights=[1, 2, 3, 4, 5, 6, 7])
    x = np.array([["a", "b", "c", "a", "b"], ["z", "zz", "c", "c", "a"]], dtype=object)
    (y,) = op.run(x)
    want = plain_tfidf(x, "TFIDF", 1, 2, 1, ngram_counts, ngram_indexes, pool, [1, 2, 3, 4, 5, 6, 7])
    assert y.shape == (2, 7)
    np.testing.assert_allclose(y, want)
    assert y[0, 4] == 2.0  # "a" twice, weight 1, at output column 4


def test_tfidf_level_empty_and_short_rows():
    op, _ = _tfidf("TF", 2, 2, 0, [0, 0], [0, 1, 2], pool_int64s=[5, 6, 7, 8, 6, 7])
    (y,) = op.run(np.array([1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8], np.int32))
    np.testing.assert_array_equal(y, [1.0, 1.0, 1.0])
    (y,) = op.run(np.array([[5], [6]], np.int64))  # rows shorter than a bigram
    assert y.shape == (2, 3) and not y.any()
    (y,) = op.run(np.zeros((2, 0), np.int64))
    assert y.shape == (2, 3) and not y.any()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(st.integers(0, 6), min_size=6, max_size=6), min_size=1, max_size=3),
    st.integers(1, 3), st.integers(0, 2), st.integers(0, 3), st.sampled_from(["TF", "IDF", "TFIDF"]),
)
def test_tfidf_differential(rows, max_n, extra, skip, mode):
    min_n = max(1, max_n - extra)
    rng = np.random.default_rng(len(rows) * 7 + max_n)
    ngram_counts, pool = [], []
    for n in range(1, max_n + 1):
        ngram_counts.append(len(pool))
        grams = {tuple(rng.integers(0, 5, n).tolist()) for _ in range(4)}
        for g in sorted(grams):
            pool.extend(g)
    n_grams = sum(1 for n in range(1, max_n + 1) for _ in range((
        (ngram_counts[n] if n < max_n else len(pool)) - ngram_counts[n - 1]) // n))
    indexes = rng.permutation(n_grams).tolist()
    weights = rng.uniform(0.5, 2, n_grams).round(2).tolist()
    op, _ = _tfidf(mode, min_n, max_n, skip, ngram_counts, indexes, pool_int64s=pool, weights=weights)
    x = np.array(rows, np.int64)
    (y,) = op.run(x)
    np.testing.assert_allclose(y, plain_tfidf(x, mode, min_n, max_n, skip, ngram_counts, indexes, pool, weights), rtol=1e-6)


def test_tfidf_against_onnxruntime():
    x = np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], np.int32)
    _, atts = _tfidf("TFIDF", 1, 2, 2, pool_int64s=POOL, weights=[1, 2, 3, 4, 5, 6, 7])
    m = _one_node("TfIdfVectorizer", [("x", TensorProto.INT32, [2, 6])], [("y", TensorProto.FLOAT, None)], opset=9, **atts)
    (got,) = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    (want,) = _ort(m, {"x": x})
    np.testing.assert_allclose(got, want)


def test_tfidf_attribute_and_input_errors():
    with pytest.raises(InvalidAttributeError, match="exactly one of 'pool_int64s' and 'pool_strings'"):
        _tfidf(pool_int64s=None)
    with pytest.raises(InvalidAttributeError, match="holds 7 n-grams but ngram_indexes has 3"):
        _tfidf(ngram_indexes=(0, 1, 2), pool_int64s=POOL)
    with pytest.raises(InvalidAttributeError, match="not a multiple of 2"):
        _tfidf(ngram_counts=(0, 3), pool_int64s=POOL)
    with pytest.raises(InvalidAttributeError, match="weights has 2 values, expected 7"):
        _tfidf(pool_int64s=POOL, weights=[1, 2])
    op, _ = _tfidf(pool_int64s=POOL)
    with pytest.raises(KernelError, match="pool holds integers but the input has dtype object"):
        op.run(np.array(["a"], dtype=object))
    with pytest.raises(KernelError, match=r"\[C\] or \[N, C\] tensor"):
        op.run(np.zeros((1, 2, 3), np.int64))


def test_tfidf_wide_ngrams_fall_back_to_row_matching():
    """Integer keys V**n would overflow int64 (300 tokens, 8-grams): rows are matched with np.unique."""
    grams = [list(range(8)), list(range(7, -1, -1))]
    pool = list(range(300)) + grams[0] + grams[1]
    op, _ = _tfidf("TF", 8, 8, 1, [0, 300, 300, 300, 300, 300, 300, 300], list(range(302)), pool_int64s=pool)
    assert not op._pool._fits(8)
    x = np.array(list(range(8)) * 2 + [7, 0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0, 0], np.int64)
    (y,) = op.run(x)
    want = plain_tfidf(x, "TF", 8, 8, 1, [0, 300, 300, 300, 300, 300, 300, 300], list(range(302)), pool)
    np.testing.assert_array_equal(y, want)
    assert y[300] == 2.0 and y[301] == 1.0 and y.sum() == 3.0
