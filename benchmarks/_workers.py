"""Each runtime in its own worker process: the benchmarks' common harness.

The project's rule for comparing runtimes: onnxrt and onnxruntime each run in a process of
their own, with their default options (onnxruntime: a default ``SessionOptions``, no thread
or spinning settings), taking turns in chunks of runs; latencies are medians over all the
chunks. A runtime never shares a process with the other one, so neither pays for the
other's threads, allocator or imported libraries, and peak memory (``VmHWM``) is each
runtime's own.

Parent side (imports numpy only, never a runtime)::

    with WorkerSet(["onnxrt", "onnxruntime"]) as ws:
        loads = ws.load(model="m.onnx", feeds="feeds.npz")   # or factory="bench_nn:case_model", args=[...]
        times = ws.time(rounds=3, repeat=5)                   # runtime -> [seconds per run]
        peaks = ws.rss()

Worker side: ``python benchmarks/_workers.py RUNTIME`` reads one JSON command a line on
stdin and answers one JSON line (prefixed with ``@@worker``, so that whatever a library
prints is skipped) on stdout; its stderr goes to a log file whose tail is reported when it
fails. The worker imports its runtime before anything else (onnxrt sets OpenBLAS's
thread timeout when it is imported before numpy, as an application does), and only uses
public APIs (``onnxrt.InferenceSession``, ``onnxrt.SessionOptions``,
``InferenceSession.engine.warmup_runs`` where it exists), so the harness also measures an
older checkout: ``PYTHONPATH=/path/to/old/src python benchmarks/bench_models.py``.

Commands:

- ``load``: ``model`` (a path) and ``feeds`` (an .npz path), or ``factory``
  (``"module:function"``, found next to this file, called with ``args``; returns
  ``(model, feeds)`` where model is a ModelProto, bytes or a path); ``warmup`` (least
  number of warm-up runs: the session's ``engine.warmup_runs`` when larger), ``threads``
  (None: the runtime's defaults; N: ``intra_op_num_threads`` = N), ``creates`` (extra
  session creations, timed and discarded, for a median creation time), ``preload`` (first
  build and run a small model, so that one-time loads such as onnxrt's compiled kernels sit
  in the baseline), ``outputs`` (an .npz path for the first run's outputs). Answers the
  import, creation and first-run times, the baseline and peak resident memory (VmRSS before
  the session, VmHWM after the warm-up), or ``{"ok": false, "error": ...}``.
- ``time``: ``n`` timed runs of ``inner`` calls each, after one untimed run (the first
  run of a chunk meets cold caches and, on a small machine, the other worker's last
  threads): answers ``{"times": [...]}`` (seconds per call).
- ``rss``: ``{"rss": VmRSS, "hwm": VmHWM}`` in bytes.
- ``quit``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "@@worker "
RUNTIMES = ("onnxrt", "onnxruntime", "onnx.reference")


def vm(field: str) -> int:
    """``VmRSS``/``VmHWM`` of this process in bytes (0 where /proc is missing: not Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# ----------------------------------------------------------------------------- worker side


class _Worker:
    def __init__(self, runtime: str) -> None:
        self.runtime = runtime
        t0 = time.perf_counter()
        if runtime == "onnxrt":
            import onnxrt as rt  # first: before numpy (see the module's docstring)
        elif runtime == "onnxruntime":
            import onnxruntime as rt
        elif runtime == "onnx.reference":
            import onnx.reference as rt
        else:
            raise ValueError(f"unknown runtime {runtime!r}")
        import numpy as np

        self.rt, self.np = rt, np
        self.import_s = time.perf_counter() - t0
        self.sess: Any = None
        self.feeds: dict[str, Any] = {}
        self.run = lambda: None

    def _options(self, threads: int | None) -> Any:
        if threads is None or self.runtime == "onnx.reference":
            return None
        opts = self.rt.SessionOptions()
        opts.intra_op_num_threads = threads
        return opts

    def _create(self, model: Any, threads: int | None) -> Any:
        if self.runtime == "onnx.reference":
            import onnx

            if isinstance(model, (bytes, str)):
                model = onnx.load_model_from_string(model) if isinstance(model, bytes) else onnx.load(model)
            return self.rt.ReferenceEvaluator(model)
        if not isinstance(model, (bytes, str)):
            model = model.SerializeToString()
        opts = self._options(threads)
        if self.runtime == "onnxruntime":
            return self.rt.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        return self.rt.InferenceSession(model, opts)

    def _warmup_runs(self, least: int) -> int:
        engine = getattr(self.sess, "engine", None)  # onnxrt: OnnxInference.warmup_runs (newer checkouts)
        return max(least, int(getattr(engine, "warmup_runs", 0) or 0))

    def _preload(self, threads: int | None) -> None:
        """Build and run a small model (convolution, matrix product, sigmoid) a few times:
        libraries a runtime loads on first use are then in the baseline."""
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        np = self.np
        rng = np.random.default_rng(0)
        w = numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), "w")
        m = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "m")
        nodes = [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("MatMul", ["c", "m"], ["p"]),
            helper.make_node("Sigmoid", ["p"], ["y"]),
        ]
        graph = helper.make_graph(
            nodes, "preload", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64, 64])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, m],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        sess = self._create(model, threads)
        x = {"x": rng.standard_normal((1, 16, 64, 64)).astype(np.float32)}
        self.sess = sess
        for _ in range(self._warmup_runs(3)):
            sess.run(None, x)
        self.sess = None
        del sess, onnx

    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        np = self.np
        self.sess, self.run = None, lambda: None
        threads = msg.get("threads")
        if msg.get("factory"):
            module, func = msg["factory"].split(":")
            if HERE not in sys.path:
                sys.path.insert(0, HERE)
            model, feeds = getattr(__import__(module), func)(*msg.get("args", []))
        else:
            model = msg["model"]
            with np.load(msg["feeds"]) as f:
                feeds = {k: f[k] for k in f.files}
        self.feeds = feeds
        rss0 = vm("VmRSS")
        if msg.get("preload") and self.runtime != "onnx.reference":
            self._preload(threads)
        base = vm("VmRSS")
        t0 = time.perf_counter()
        sess = self._create(model, threads)
        t1 = time.perf_counter()
        out = sess.run(None, feeds)
        t2 = time.perf_counter()
        self.sess = sess
        self.run = lambda: sess.run(None, feeds)
        warm = []
        n_warm = self._warmup_runs(int(msg.get("warmup", 3))) - 1 if msg.get("warmup", 3) else 0
        for _ in range(max(0, n_warm)):
            t = time.perf_counter()
            self.run()
            warm.append(time.perf_counter() - t)
        peak = vm("VmHWM")
        if msg.get("outputs"):
            np.savez(msg["outputs"], **{f"out_{i}": np.asarray(o) for i, o in enumerate(out)})
        creates = []
        for _ in range(int(msg.get("creates", 0))):
            t = time.perf_counter()
            extra = self._create(model, threads)
            creates.append(time.perf_counter() - t)
            del extra
        return {
            "ok": True, "import_s": self.import_s, "create_s": t1 - t0, "first_run_s": t2 - t1, "warm_s": warm,
            "creates_s": creates, "preload_rss": base - rss0, "base_rss": base, "peak_rss": peak,
            "warmup_runs": n_warm + 1,
        }

    def time(self, msg: dict[str, Any]) -> dict[str, Any]:
        run, inner = self.run, int(msg.get("inner", 1))
        run()
        times = []
        for _ in range(int(msg.get("n", 1))):
            t0 = time.perf_counter()
            for _ in range(inner):
                run()
            times.append((time.perf_counter() - t0) / inner)
        return {"ok": True, "times": times}


def _serve(runtime: str) -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever the libraries print goes to the log

    def reply(obj: dict[str, Any]) -> None:
        out.write(PREFIX + json.dumps(obj) + "\n")
        out.flush()

    try:
        worker = _Worker(runtime)
    except Exception as e:  # noqa: BLE001
        reply({"ok": False, "error": f"{type(e).__name__}: {e}", "type": type(e).__name__})
        return
    reply({"ok": True, "import_s": worker.import_s})
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg.get("cmd")
        if cmd == "quit":
            break
        try:
            if cmd == "load":
                res = worker.load(msg)
            elif cmd == "time":
                res = worker.time(msg)
            elif cmd == "rss":
                res = {"ok": True, "rss": vm("VmRSS"), "hwm": vm("VmHWM")}
            else:
                res = {"ok": False, "error": f"unknown command {cmd!r}", "type": "ValueError"}
        except Exception as e:  # noqa: BLE001  (reported to the parent, which records it)
            import traceback

            traceback.print_exc()
            res = {"ok": False, "error": f"{type(e).__name__}: {str(e).strip()}", "type": type(e).__name__}
        reply(res)


# ----------------------------------------------------------------------------- parent side


class WorkerError(RuntimeError):
    pass


class Worker:
    """One runtime's worker process."""

    def __init__(self, runtime: str, env: dict[str, str] | None = None, log_dir: str | None = None) -> None:
        self.runtime = runtime
        log_dir = log_dir or tempfile.gettempdir()
        fd, self.log_path = tempfile.mkstemp(prefix=f"worker-{runtime}-", suffix=".log", dir=log_dir)
        self._log = os.fdopen(fd, "w")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "_workers.py"), runtime], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1, env=env,
        )
        self.hello = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                raise WorkerError(f"{self.runtime} worker exited ({self.proc.returncode}): {self.log_tail()}")
            if line.startswith(PREFIX):
                return json.loads(line[len(PREFIX):])

    def log_tail(self, lines: int = 3) -> str:
        self._log.flush()
        try:
            with open(self.log_path) as f:
                return " | ".join(x.strip() for x in f.read().strip().splitlines()[-lines:])
        except OSError:
            return ""

    def call(self, cmd: str, **kw: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write('{"cmd": "quit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


class WorkerSet:
    """Workers of several runtimes taking turns; a runtime whose worker failed is left out
    of the later commands (its error is in ``errors``)."""

    def __init__(self, runtimes: list[str] | tuple[str, ...] = ("onnxrt", "onnxruntime"), env: dict[str, str] | None = None) -> None:
        self.runtimes = list(runtimes)
        self.workers: dict[str, Worker] = {}
        self.errors: dict[str, str] = {}
        #: runtimes whose last load succeeded (the ones ``time`` times)
        self.loaded: set[str] = set()
        self._env = env
        for rt in self.runtimes:
            self._start(rt)

    def _start(self, rt: str) -> None:
        try:
            w = Worker(rt, self._env)
        except WorkerError as e:
            self.errors[rt] = str(e)
            return
        if not w.hello.get("ok"):
            self.errors[rt] = w.hello.get("error", "?")
            w.close()
            return
        self.workers[rt] = w

    def __enter__(self) -> WorkerSet:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        for w in self.workers.values():
            w.close()
        self.workers.clear()

    def _call_all(self, cmd: str, order: list[str] | None = None, **kw: Any) -> dict[str, dict[str, Any]]:
        res = {}
        for rt in order or list(self.workers):
            w = self.workers.get(rt)
            if w is None:
                continue
            try:
                r = w.call(cmd, **kw)
            except WorkerError as e:
                r = {"ok": False, "error": str(e), "type": "WorkerError"}
                w.close()
                del self.workers[rt]
            if not r.get("ok"):
                self.errors[rt] = r.get("error", "?")
            res[rt] = r
        return res

    def load(self, outputs_dir: str | None = None, **kw: Any) -> dict[str, dict[str, Any]]:
        """Every worker builds its session (``load`` of the module docstring); each
        runtime's outputs go to ``outputs_dir/RUNTIME.npz`` when given. A worker whose load
        failed is closed (its error kept) and a fresh one started, so it can load another model."""
        res = {}
        self.errors = {rt: e for rt, e in self.errors.items() if rt not in self.workers}
        self.loaded = set()
        for rt in list(self.workers):
            extra = {"outputs": os.path.join(outputs_dir, f"{rt}.npz")} if outputs_dir else {}
            if extra and os.path.exists(extra["outputs"]):
                os.unlink(extra["outputs"])  # a failed load leaves none
            res.update(self._call_all("load", order=[rt], **kw, **extra))
        for rt, r in res.items():
            if r.get("ok"):
                self.loaded.add(rt)
            elif rt in self.workers:
                self.workers.pop(rt).close()
                err = self.errors.get(rt)
                self._start(rt)
                if err is not None:
                    self.errors[rt] = err
        return res

    def time(self, rounds: int = 3, repeat: int = 5, inner: int = 1, max_seconds: float | None = None) -> dict[str, list[float]]:
        """``rounds`` rounds in which every worker times a chunk of ``repeat`` runs (of
        ``inner`` calls each) in turn, the order reversed every other round; stops early
        (after two rounds at least) once ``max_seconds`` have passed."""
        loaded = [rt for rt in self.workers if rt in self.loaded]
        times: dict[str, list[float]] = {rt: [] for rt in loaded}
        start = time.perf_counter()
        for r in range(rounds):
            order = loaded if r % 2 == 0 else loaded[::-1]
            for rt, res in self._call_all("time", order=order, n=repeat, inner=inner).items():
                if res.get("ok"):
                    times.setdefault(rt, []).extend(res["times"])
            if max_seconds is not None and r >= 1 and time.perf_counter() - start > max_seconds:
                break
        return {rt: v for rt, v in times.items() if v}

    def rss(self) -> dict[str, dict[str, Any]]:
        return self._call_all("rss")


def inner_calls(seconds_per_run: float) -> int:
    """Calls per timed sample: 1, or enough calls for about 1 ms when a call takes under
    100 µs (a single call that short is mostly the timer's and the scheduler's noise)."""
    if seconds_per_run >= 1e-4:
        return 1
    return min(200, max(1, int(1e-3 / max(seconds_per_run, 1e-6))))


def load_outputs(outputs_dir: str, runtime: str) -> list[Any] | None:
    import numpy as np

    path = os.path.join(outputs_dir, f"{runtime}.npz")
    if not os.path.exists(path):
        return None
    with np.load(path) as f:
        return [f[f"out_{i}"] for i in range(len(f.files))]


def outputs_agree(a: list[Any] | None, b: list[Any] | None, rtol: float, atol: float, first_only: bool = False) -> tuple[bool, float]:
    """(all close, max abs difference) of two runtimes' outputs."""
    import numpy as np

    if a is None or b is None or len(a) != len(b):
        return False, float("nan")
    pairs = list(zip(a, b))[:1] if first_only else list(zip(a, b))
    ok, worst = True, 0.0
    for x, y in pairs:
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return False, float("nan")
        if x.dtype.kind in "fc" or y.dtype.kind in "fc":
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            ok &= bool(np.allclose(x64, y64, rtol=rtol, atol=atol, equal_nan=True))
            d = np.abs(x64 - y64)
            worst = max(worst, float(np.nanmax(d)) if d.size else 0.0)
        else:
            same = bool(np.array_equal(x, y))
            ok &= same
            worst = max(worst, 0.0 if same else float("inf"))
    return ok, worst


def geomean(values: list[float]) -> float | None:
    import math

    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


if __name__ == "__main__":
    _serve(sys.argv[1])
