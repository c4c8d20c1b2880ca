"""onnxrt on Dask: rows per second of a 1,000,000-row tabular model on 1 vs 2 worker processes, and the per-block overhead.

Usage: python benchmarks/bench_dask.py [--rows 1000000] [--block-rows 50000] [--repeat 5]

Model: an MLP built with onnx.helper, 32 features -> 128 -> 128 -> 4 classes (Gemm, Relu,
Softmax), float32. The rows are generated on the workers (seeded) and persisted there before
timing; a timed run is ``onnxrt.dask.predict(...)`` persisted on the workers (the
results stay there, as when a cluster writes its scores), so the time is scoring, not
shipping data to or from this process. Each worker process has one thread and its
session one thread (``intra_op_num_threads=1``): the scale-out is by processes. The
baselines run the same blocks without dask: in this process with one thread, and in 1
and 2 plain processes started together, which measures what the machine gives to two
processes at once (the ceiling of any 2-worker speed-up here). Results are checked
against the local run before any timing.

The per-block overhead is measured on one worker: 20,000 rows as 2,000 blocks of 10
rows against 2 blocks of 10,000 rows; the difference per extra block is what dask and
onnxrt add to every block (scheduling, transfer, the cached-session look-up, checks).
onnxrt's own share is the block function against a bare ``InferenceSession.run`` of 10
rows, in this process (best of alternating rounds). Prints two markdown tables (medians
of ``--repeat`` runs).
"""

from __future__ import annotations

import _env  # noqa: F401  (first: OpenBLAS reads its settings when numpy loads it)

import argparse
import itertools
import logging
import os
import statistics
import sys
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from _common import fmt_time, markdown_table


def mlp(features: int = 32, hidden: int = 128, classes: int = 4, seed: int = 0):
    """X float[N, features] -> probabilities float[N, classes] through two Relu layers."""
    rng = np.random.default_rng(seed)
    sizes = [features, hidden, hidden, classes]
    inits, nodes, prev = [], [], "X"
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        w = (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
        inits += [
            numpy_helper.from_array(w, f"W{i}"),
            numpy_helper.from_array(np.zeros(b, np.float32), f"B{i}"),
        ]
        nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"B{i}"], [f"H{i}"]))
        prev = f"H{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [prev], [f"R{i}"]))
            prev = f"R{i}"
    nodes.append(helper.make_node("Softmax", [prev], ["probabilities"], axis=1))
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", features])],
        [
            helper.make_tensor_value_info(
                "probabilities", TensorProto.FLOAT, ["N", classes]
            )
        ],
        inits,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 18)]
    ).SerializeToString()


def one_thread_options():
    import onnxrt

    opts = onnxrt.SessionOptions()
    opts.intra_op_num_threads = 1
    return opts


def features(rows: int, block_rows: int):
    """The rows as a dask array generated where it is computed: the same values on any scheduler."""
    import dask.array as da

    rng = da.random.default_rng(0)
    return rng.standard_normal((rows, 32), chunks=(block_rows, 32), dtype=np.float32)


def time_once(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class Local:
    """The blocks run one after the other in this process, one thread, no dask."""

    def __init__(self, model: bytes, x: np.ndarray, block_rows: int):
        import onnxrt

        self.sess = onnxrt.InferenceSession(model, one_thread_options())
        self.x, self.block_rows = x, block_rows

    def run(self) -> np.ndarray:
        from threadpoolctl import threadpool_limits

        x, step = self.x, self.block_rows
        with threadpool_limits(1):
            return np.concatenate(
                [
                    self.sess.run(None, {"X": x[s : s + step]})[0]
                    for s in range(0, len(x), step)
                ]
            )


class Cluster:
    """A LocalCluster of ``workers`` one-thread processes holding the rows, persisted."""

    def __init__(self, model: bytes, rows: int, block_rows: int, workers: int):
        from distributed import Client, LocalCluster, wait

        self.model, self.opts = model, one_thread_options()
        self.cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.CRITICAL,
        )
        self.client = Client(self.cluster)
        self.data = self.client.persist(
            features(rows, block_rows)
        )  # made on the workers
        wait(self.data)

    def close(self) -> None:
        self.client.close()
        self.cluster.close()

    def _released(self, keys: list) -> None:
        """Wait until the scheduler has dropped ``keys``: a later run has the same keys and
        would otherwise find its results already there."""
        while self.client.run_on_scheduler(_held, keys):
            time.sleep(0.02)

    def score(self, data=None) -> float:
        """Seconds to score the rows on the workers (the results stay there, then are dropped)."""
        from dask.core import flatten
        from distributed import wait

        import onnxrt.dask

        t0 = time.perf_counter()
        y = self.client.persist(
            onnxrt.dask.predict(
                self.model, self.data if data is None else data, sess_options=self.opts
            )
        )
        wait(y)
        seconds = time.perf_counter() - t0
        keys = list(flatten(y.__dask_keys__()))
        del y
        self._released(keys)
        return seconds

    def check(self, expected: np.ndarray) -> None:
        from dask.core import flatten

        import onnxrt.dask

        y = onnxrt.dask.predict(self.model, self.data, sess_options=self.opts)
        keys = list(flatten(y.__dask_keys__()))
        np.testing.assert_allclose(
            self.client.compute(y).result(), expected, rtol=1e-5, atol=1e-7
        )
        del y
        self._released(keys)

    def block_overhead(self, repeat: int) -> tuple[float, float]:
        """Median seconds for 20,000 rows as 2,000 blocks of 10 rows, and as 2 blocks of 10,000."""
        from distributed import wait

        small = self.data[:20_000]
        many = self.client.persist(small.rechunk((10, 32)))
        few = self.client.persist(small.rechunk((10_000, 32)))
        wait([many, few])
        times: dict[str, list[float]] = {"many": [], "few": []}
        for _ in range(repeat):
            times["many"].append(self.score(many))
            times["few"].append(self.score(few))
        return statistics.median(times["many"]), statistics.median(times["few"])


def _plain_worker(model: bytes, rows: int, block_rows: int, barrier, queue) -> None:
    """One plain process scoring its own rows, started with the others by a barrier."""
    import time as _time

    from threadpoolctl import threadpool_limits

    import onnxrt

    sess = onnxrt.InferenceSession(model, one_thread_options())
    x = np.random.default_rng(rows).standard_normal((rows, 32)).astype(np.float32)
    with threadpool_limits(1):
        sess.run(None, {"X": x[:block_rows]})
        barrier.wait()
        t0 = _time.time()
        for s in range(0, rows, block_rows):
            sess.run(None, {"X": x[s : s + block_rows]})
        queue.put((t0, _time.time()))


def plain_processes(model: bytes, rows: int, block_rows: int, n: int) -> float:
    """Wall seconds for ``n`` plain processes (no dask) sharing ``rows``: the machine's ceiling."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [
        ctx.Process(
            target=_plain_worker, args=(model, rows // n, block_rows, barrier, queue)
        )
        for _ in range(n)
    ]
    for p in procs:
        p.start()
    spans = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    return max(t1 for _, t1 in spans) - min(t0 for t0, _ in spans)


def _held(keys, dask_scheduler=None) -> bool:
    """Whether the scheduler still holds any of ``keys`` (run on the scheduler)."""
    return any(k in dask_scheduler.tasks for k in keys)


def onnxrt_block_share(
    model: bytes, number: int = 1000, rounds: int = 9
) -> tuple[float, float]:
    """Seconds per 10-row block: onnxrt's block function (cache look-up, checks) vs a bare run
    of the same session; the two take turns, and each keeps its best round (the machine is shared)."""
    from onnxrt.blocks import ModelHandle, array_block, plan_array

    handle = ModelHandle(model, one_thread_options())
    plan = plan_array(handle, np.float32, (32,))
    sess = handle.session()
    block = np.random.default_rng(1).standard_normal((10, 32)).astype(np.float32)
    ours = lambda: array_block(handle, plan, block)
    bare = lambda: sess.run(None, {"X": block})
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for i, fn in enumerate((ours, bare)):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            best[i] = min(best[i], (time.perf_counter() - t0) / number)
    return best[0], best[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--block-rows", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    model = mlp()
    x = features(args.rows, args.block_rows).compute(scheduler="threads")
    blocks = -(-args.rows // args.block_rows)
    print("  starting the clusters...", file=sys.stderr)
    local = Local(model, x, args.block_rows)
    expected = local.run()
    clusters = {n: Cluster(model, args.rows, args.block_rows, n) for n in (1, 2)}
    try:
        # the first run also builds each worker's session
        first = {n: c.score() for n, c in clusters.items()}
        for c in clusters.values():
            c.check(expected)
        # every setup takes its turn in each round: the machine's noise hits all alike
        times: dict[str, list[float]] = {
            k: [] for k in ("local", "plain1", "plain2", "dask1", "dask2")
        }
        for r in range(args.repeat):
            print(f"  round {r + 1} of {args.repeat}...", file=sys.stderr)
            times["local"].append(time_once(local.run))
            times["plain1"].append(
                plain_processes(model, args.rows, args.block_rows, 1)
            )
            times["plain2"].append(
                plain_processes(model, args.rows, args.block_rows, 2)
            )
            times["dask1"].append(clusters[1].score())
            times["dask2"].append(clusters[2].score())
        many, few = clusters[1].block_overhead(args.repeat)
    finally:
        # last in, first out: each cluster restores the log level it found when it started
        for c in reversed(list(clusters.values())):
            c.close()
    med = {k: statistics.median(v) for k, v in times.items()}

    def rate(seconds: float) -> str:
        return f"{args.rows / seconds:,.0f}"

    rows = [
        [
            "this process, 1 thread, no dask",
            "-",
            fmt_time(med["local"]),
            rate(med["local"]),
            "-",
        ],
        [
            "1 plain process, no dask",
            "-",
            fmt_time(med["plain1"]),
            rate(med["plain1"]),
            "1.00",
        ],
        [
            "2 plain processes, no dask (the machine's ceiling)",
            "-",
            fmt_time(med["plain2"]),
            rate(med["plain2"]),
            f"{med['plain1'] / med['plain2']:.2f}",
        ],
        [
            "dask, 1 worker process",
            fmt_time(first[1]),
            fmt_time(med["dask1"]),
            rate(med["dask1"]),
            "1.00",
        ],
        [
            "dask, 2 worker processes",
            fmt_time(first[2]),
            fmt_time(med["dask2"]),
            rate(med["dask2"]),
            f"{med['dask1'] / med['dask2']:.2f}",
        ],
    ]
    print(
        f"MLP 32-128-128-4, {args.rows:,} rows in {blocks} blocks of {args.block_rows:,}; "
        f"medians of {args.repeat} rounds, each setup taking its turn in every round\n"
    )
    print(
        markdown_table(
            ["run", "first run", "time", "rows/s", "vs 1 process of its kind"], rows
        )
    )
    per_block = (many - few) / (2000 - 2)
    ours, bare = onnxrt_block_share(model)
    print()
    print(
        markdown_table(
            ["per-block overhead (1 worker, 20,000 rows)", "value"],
            [
                ["2,000 blocks of 10 rows", fmt_time(many)],
                ["2 blocks of 10,000 rows", fmt_time(few)],
                ["overhead per block (dask + onnxrt)", fmt_time(per_block)],
                ["onnxrt block function, 10 rows (this process)", fmt_time(ours)],
                ["bare InferenceSession.run, 10 rows", fmt_time(bare)],
                ["onnxrt's share of the overhead", fmt_time(max(ours - bare, 0.0))],
            ],
        )
    )


# the worker processes are spawned: they import this module and must not run main()
if __name__ == "__main__":
    main()
