"""ai.onnx.ml models from scikit-learn: onnxrt vs onnxruntime on 1, 100 and 10,000 rows.

Usage: python benchmarks/bench_ml.py [--rows 1,100,10000] [--repeat 15] [--models rf,gbr,svc,lr] [--single-thread]

Models (converted with skl2onnx, no ZipMap): RandomForestClassifier (100 trees, depth 10),
GradientBoostingRegressor (200 trees), SVC (rbf, with probabilities), LogisticRegression;
20 features, 3 classes. Before timing, onnxrt's outputs are checked against scikit-learn
(labels exactly, values within 1e-4). Prints a markdown table of median times (runtimes
run alternately in one process) and the ratio onnxrt/onnxruntime (lower is better; the
targets are <= 2 at 10,000 rows and <= 1 at one row). ``--single-thread`` gives each
runtime one thread (onnxruntime's intra-op pool, onnxrt's kernel pool and BLAS): on a
shared, loaded machine that comparison is the stable one.
"""

from __future__ import annotations

import _env  # noqa: F401  (first: OpenBLAS reads its settings when numpy loads it)

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import fmt_time, make_runners, markdown_table, ort_session, time_alternating  # noqa: E402


def models(names: list[str]):
    """(label, fitted model, converted ONNX model, data) per benchmarked model."""
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC
    from skl2onnx import to_onnx

    x, y = make_classification(3000, 20, n_informative=10, n_classes=3, random_state=0)
    x = x.astype(np.float32)
    xr, yr = make_regression(3000, 20, noise=1.0, random_state=0)
    xr, yr = xr.astype(np.float32), (yr - yr.mean()) / yr.std()
    table = {
        "rf": ("RandomForestClassifier 100x10", lambda: RandomForestClassifier(100, max_depth=10, random_state=0).fit(x, y), x),
        "gbr": ("GradientBoostingRegressor 200", lambda: GradientBoostingRegressor(n_estimators=200, random_state=0).fit(xr, yr), xr),
        "svc": ("SVC rbf (probabilities)", lambda: SVC(probability=True, random_state=0).fit(x[:1500], y[:1500]), x),
        "lr": ("LogisticRegression", lambda: LogisticRegression(max_iter=1000).fit(x, y), x),
    }
    for name in names:
        label, fit, data = table[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = fit()
            opts = {id(model): {"zipmap": False}} if hasattr(model, "predict_proba") else None
            onx = to_onnx(model, data[:1], options=opts, target_opset={"": 21, "ai.onnx.ml": 3})
        yield label, model, onx, data


def check_against_sklearn(model, outputs, x) -> None:
    """onnxrt must be right before it is timed: labels exact, values within 1e-4."""
    if hasattr(model, "predict_proba"):
        np.testing.assert_array_equal(outputs[0], model.predict(x))
        np.testing.assert_allclose(outputs[1], model.predict_proba(x), atol=1e-4, rtol=0)
    else:
        np.testing.assert_allclose(outputs[0][:, 0], model.predict(x), atol=1e-4, rtol=0)


def single_thread_runners(onx) -> dict:
    """onnxrt and onnxruntime sessions limited to one thread each (BLAS included)."""
    import onnxrt

    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # pragma: no cover
        print("  threadpoolctl missing: BLAS keeps its threads", file=sys.stderr)
    data = onx.SerializeToString()
    opts = onnxrt.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = onnxrt.InferenceSession(data, opts)
    return {"onnxrt": lambda feeds: sess.run(None, feeds), "onnxruntime": ort_session(data, threads=1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1,100,10000")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--models", default="rf,gbr,svc,lr")
    parser.add_argument("--single-thread", action="store_true", help="one thread per runtime")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for label, model, onx, data in models(args.models.split(",")):
        runners = single_thread_runners(onx) if args.single_thread else make_runners(onx, with_reference=False)
        for n in [int(float(r)) for r in args.rows.split(",")]:
            x = data[rng.integers(0, len(data), n)]
            feeds = {onx.graph.input[0].name: x}
            check_against_sklearn(model, runners["onnxrt"](feeds), x)
            med = time_alternating(runners, feeds, repeat=args.repeat)
            ratio = med["onnxrt"] / med["onnxruntime"]
            rows.append([label, str(n), fmt_time(med["onnxrt"]), fmt_time(med["onnxruntime"]), f"{ratio:.2f}"])
            print(f"  {label} {n}: onnxrt/ort {ratio:.2f}", file=sys.stderr)
    print(markdown_table(["model", "rows", "onnxrt", "onnxruntime", "onnxrt/ort"], rows))


if __name__ == "__main__":
    main()
