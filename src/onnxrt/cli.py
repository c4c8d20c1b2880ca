"""The ``onnxrt`` command line: run (and, as they land, bench, profile, compare, ops)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from importlib import resources
from typing import Any

import numpy as np

from ._memory import tune_process
from .errors import OnnxRuntimeError


def demo_model_path() -> str:
    """Path of the demo model shipped inside the package."""
    return str(resources.files("onnxrt") / "data" / "demo.onnx")


class CliError(Exception):
    """A usage error the command line reports in one line."""

    exit_code = 2


def _parse_inputs(pairs: list[str]) -> dict[str, Any]:
    feeds: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise CliError(f"--input expects NAME=FILE.npy, got {pair!r}")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise CliError(f"input file {path!r} for {name!r} does not exist") from None
        except (OSError, ValueError) as e:
            raise CliError(f"input file {path!r} for {name!r} is not a readable .npy file: {e}") from None
    return feeds


def _write_text(path: str, text: str) -> None:
    """Write a text file the command produces; an OSError becomes the command's one-line error."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise CliError(f"cannot write {path!r}: {e.strerror or e}") from None


def _preview(value: Any) -> str:
    if isinstance(value, np.ndarray):
        with np.printoptions(threshold=8, edgeitems=3, precision=4, linewidth=100):
            return np.array2string(value.reshape(-1) if value.ndim > 1 else value, separator=", ")
    if isinstance(value, list):
        return f"sequence of {len(value)}"
    return repr(value)[:100]


def _describe(value: Any) -> tuple[str, str]:
    if isinstance(value, np.ndarray):
        return str(list(value.shape)), str(value.dtype)
    if isinstance(value, list):
        return f"seq[{len(value)}]", "sequence"
    if isinstance(value, dict):
        return f"map[{len(value)}]", "map"
    return "-", type(value).__name__


def _session_and_feeds(args: argparse.Namespace, options: Any = None) -> tuple[Any, dict[str, Any], str]:
    """The session of ``args.model`` (the demo model when None) and its feeds: the
    ``--input`` files, random values from the declared types for the others."""
    from . import InferenceSession
    from .tools.inputs import random_feeds

    path = args.model or demo_model_path()
    sess = InferenceSession(path, options)
    feeds = _parse_inputs(args.input)
    known = {i.name for i in sess.get_inputs()} | {i.name for i in sess.get_overridable_initializers()}
    for name in feeds:
        if name not in known:
            raise CliError(f"--input names {name!r}, which is not an input of the model ({sorted(known)})")
    missing = [i.name for i in sess.get_inputs() if i.name not in feeds]
    if missing:
        try:
            rnd = random_feeds(sess.engine.model, seed=args.seed)
        except ValueError as e:
            raise CliError(str(e)) from None
        for name in missing:
            feeds[name] = rnd[name]
        chosen = ", ".join(f"{m!r} {_describe(feeds[m])[1]}{_describe(feeds[m])[0]}" for m in missing)
        # stderr: stdout keeps the command's own output (outputs, tables) for pipes
        print(f"random inputs (seed {args.seed}): {chosen}", file=sys.stderr)
    return sess, feeds, path


def _warm_up(sess: Any, feeds: dict[str, Any], done: int = 0, run: Any = None) -> list[float]:
    """Run the session through the warm-up runs it still owes after ``done`` runs
    (``OnnxInference.warmup_runs``: the first run, and the second where compiled kernels
    start there); returns their times."""
    run = run or (lambda: sess.run(None, feeds))
    times = []
    for _ in range(sess.engine.warmup_runs - done):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return times


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def cmd_run(args: argparse.Namespace) -> int:
    if args.runs < 0:
        raise CliError("--runs must be 0 or more")
    t0 = time.perf_counter()
    sess, feeds, path = _session_and_feeds(args)
    created = time.perf_counter() - t0
    t0 = time.perf_counter()
    if args.verbose:
        res = sess.engine.run(feeds, verbose=args.verbose)
        outs = [res[n] for n in sess.engine.output_names]
    else:
        outs = sess.run(None, feeds)
    first = time.perf_counter() - t0
    print(f"model: {path}")
    for meta, value in zip(sess.get_outputs(), outs):
        shape, dtype = _describe(value)
        print(f"  {meta.name}: shape={shape} dtype={dtype}")
        print(f"    {_preview(value)}")
    # the first run carries what a process pays once (loading kernels, preparing weights):
    # it is reported apart from runs in steady state, which --runs measures
    print(f"session creation: {_ms(created)} (loading, checking, planning)")
    print(f"first run: {_ms(first)} (one-time warm-up included)")
    if args.runs:
        warm = _warm_up(sess, feeds, done=1)
        if warm:
            print(f"warm-up: {', '.join(_ms(t) for t in warm)} (the runs where compiled kernels start)")
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            times.append(time.perf_counter() - t0)
        print(f"steady runs: median {_ms(float(np.median(times)))}, min {_ms(min(times))} over {len(times)} runs")
    if args.output:
        arrays = {m.name: v for m, v in zip(sess.get_outputs(), outs) if isinstance(v, np.ndarray)}
        try:
            np.savez(args.output, **arrays)
        except OSError as e:
            raise CliError(f"cannot write {args.output!r}: {e.strerror or e}") from None
        print(f"outputs saved to {args.output}")
    return 0


def _latencies(fn: Any, feeds: dict[str, Any], runs: int, label: str) -> np.ndarray:
    from tqdm import tqdm

    fn(feeds)  # warm-up (onnxrt's is done before: _warm_up)
    times = []
    for _ in tqdm(range(runs), desc=label, unit="run", leave=False, file=sys.stderr):
        t0 = time.perf_counter()
        fn(feeds)
        times.append(time.perf_counter() - t0)
    return np.array(times)


def cmd_bench(args: argparse.Namespace) -> int:
    sess, feeds, path = _session_and_feeds(args)
    if args.runs < 1:
        raise CliError("--runs must be at least 1")
    _warm_up(sess, feeds)
    rows = [("onnxrt", _latencies(lambda f: sess.run(None, f), feeds, args.runs, "onnxrt"))]
    if not args.no_ort:
        try:
            import onnxruntime as ort
        except ImportError:
            print("onnxruntime is not installed: timing onnxrt alone")
        else:
            osess = ort.InferenceSession(sess.engine.model.SerializeToString(), providers=["CPUExecutionProvider"])
            rows.append(("onnxruntime", _latencies(lambda f: osess.run(None, f), feeds, args.runs, "onnxruntime")))
    print(f"model: {path} ({args.runs} runs)")
    print(f"{'runtime':<12} {'min':>10} {'median':>10} {'p90':>10}")
    for name, t in rows:
        print(f"{name:<12} {t.min() * 1e3:>8.3f}ms {np.median(t) * 1e3:>8.3f}ms {np.percentile(t, 90) * 1e3:>8.3f}ms")
    if len(rows) == 2:
        print(f"onnxrt / onnxruntime (median): {np.median(rows[0][1]) / np.median(rows[1][1]):.2f}")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    import json

    from tqdm import tqdm

    from . import SessionOptions
    from .tools.profiling import summarize, svg_bar_chart, warmup_runs

    if args.runs < 1:
        raise CliError("--runs must be at least 1")
    opts = SessionOptions()
    opts.enable_profiling = True
    sess, feeds, path = _session_and_feeds(args, opts)
    # the warm-up runs are in the trace, marked, and out of the tables below
    _warm_up(sess, feeds)
    for _ in tqdm(range(args.runs), desc="profiling", unit="run", leave=False, file=sys.stderr):
        sess.run(None, feeds)
    trace = sess.end_profiling()
    with open(trace, encoding="utf-8") as f:
        events = json.load(f)
    ops, slow = summarize(events)
    total = sum(t for _, t, _ in ops) or 1.0
    warm = warmup_runs(events)
    print(f"model: {path} ({args.runs} runs after {len(warm)} warm-up); trace: {trace}")
    print(f"warm-up runs (one-time loading and preparation, left out below): {', '.join(f'{t / 1e3:.3f} ms' for t in warm)}")
    print(f"{'operator':<28} {'calls':>6} {'total ms':>10} {'share':>7}")
    for op, t, n in ops:
        print(f"{op:<28} {n:>6} {t / 1e3:>10.3f} {100 * t / total:>6.1f}%")
    print("\nten slowest nodes (total over the runs):")
    for name, op, t in slow:
        print(f"  {name:<40} {op:<20} {t / 1e3:>10.3f} ms")
    chart = args.chart or os.path.splitext(trace)[0] + ".svg"
    svg = svg_bar_chart([(op, t / 1e3 / args.runs) for op, t, _ in ops[:25]], f"time per run by operator: {os.path.basename(path)}")
    _write_text(chart, svg)
    print(f"chart: {chart}")
    return 0


def cmd_precision(args: argparse.Namespace) -> int:
    """``compare --precision``: node by node, how far the float32 run drifts from float64."""
    from .tools.precision import precision_table

    sess, feeds, path = _session_and_feeds(args)
    rows = sess.engine.compare_precision(feeds)
    print(f"model: {path}: float32 against float64, node by node")
    if not rows:
        print("no node computes float32 values: nothing to compare")
        return 0
    print(precision_table(rows))
    worst = max(rows, key=lambda r: r["max_rel"])
    print(f"largest relative drift: {worst['max_rel']:.4g} at {worst['output']!r} ({worst['op_type']} {worst['name']!r})")
    return 0


def cmd_draw(args: argparse.Namespace) -> int:
    """``draw``: the model as Graphviz DOT text, or an SVG drawing of it; the model is not
    planned, so one whose operators onnxrt has no kernel for draws too."""
    from .model import load_model
    from .tools.dot import to_dot, to_svg

    path = args.model or demo_model_path()
    out = args.output
    ext = os.path.splitext(out)[1].lower() if out else ".dot"
    if ext not in (".dot", ".gv", ".svg"):
        raise CliError(f"-o {out!r}: draw writes .dot (or .gv) DOT text or an .svg drawing")
    proto, _ = load_model(path)
    text = to_dot(proto, rankdir=args.rankdir)
    if ext == ".svg":
        text = to_svg(text)
    if not out:
        sys.stdout.write(text)
        return 0
    _write_text(out, text)
    print(f"model: {path}; {'drawing' if ext == '.svg' else 'DOT text'} written to {out}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .tools.compare import compare, first_divergence, stats

    if getattr(args, "precision", False):
        return cmd_precision(args)
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise CliError("compare needs onnxruntime (pip install onnxruntime)") from None
    sess, feeds, path = _session_and_feeds(args)
    model = sess.engine.model
    diffs = compare(model, feeds, rtol=args.rtol, atol=args.atol)
    print(f"model: {path} (rtol={args.rtol}, atol={args.atol})")
    print(f"{'output':<30} {'max abs diff':>14} {'max rel diff':>14}  status")
    for d in diffs:
        print(f"{d.name:<30} {d.max_abs:>14.6g} {d.max_rel:>14.6g}  {'ok' if d.ok else 'MISMATCH'} {d.note}")
    if all(d.ok for d in diffs):
        return 0
    div = first_divergence(model, feeds, rtol=args.rtol, atol=args.atol, progress=lambda it: tqdm(it, desc="searching", leave=False, file=sys.stderr))
    if div is None:
        print("no single node output diverges: the difference builds up across nodes")
    else:
        print(f"first diverging node: {div.node_name!r} ({div.op_type}), output {div.output!r}")
        print(f"  max abs diff {div.diff.max_abs:.6g}, max rel diff {div.diff.max_rel:.6g} {div.diff.note}")
        print(f"  onnxrt:      {stats(div.ours)}")
        print(f"  onnxruntime: {stats(div.theirs)}")
    return 1


def _print_paths(domain: str | None) -> int:
    """``onnxrt ops --paths``: every declared fast path, by operator; the reference kernel last."""
    from .dispatch import all_paths

    want = None if domain is None else ("" if domain == "ai.onnx" else domain)
    print(f"{'domain':<14} {'operator':<28} {'fast path':<30} {'native':<7} condition / what it does")
    for p in all_paths():
        if want is not None and p.domain != want:
            continue
        print(f"{p.domain or 'ai.onnx':<14} {p.op_type:<28} {p.name:<30} {'yes' if p.native else 'no':<7} {p.doc}")
    print("(every operator falls back to its reference kernel, OpRun._run in numpy, when no path applies)")
    return 0


def cmd_ops(args: argparse.Namespace) -> int:
    from .tools.ops_table import markdown, rows

    if args.markdown:
        print(markdown())
        return 0
    if args.paths:
        return _print_paths(args.domain)
    table = rows(custom=True)
    domain = None if args.domain is None else ("" if args.domain == "ai.onnx" else args.domain)
    if domain is not None and all(dom != domain for dom, *_ in table):
        known = sorted({dom or "ai.onnx" for dom, *_ in table})
        raise CliError(f"--domain {args.domain!r} is not a domain onnxrt knows; known domains: {', '.join(known)}")
    print(f"{'domain':<26} {'operator':<32} {'onnxrt versions':<28} onnx versions")
    for dom, op, have, known in table:
        if domain is not None and dom != domain:
            continue
        if not have and not args.all:
            continue
        print(f"{dom or 'ai.onnx':<26} {op:<32} {','.join(map(str, have)) or '-':<28} {','.join(map(str, known)) or 'custom'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="onnxrt", description="Run, inspect, profile and compare ONNX models with onnxrt.")
    parser.add_argument("--version", action="version", version=f"onnxrt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def model_command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("model", nargs="?", help="path of the .onnx model (default: the demo model shipped with onnxrt)")
        p.add_argument("--input", "-i", action="append", metavar="NAME=FILE.npy", help="feed an input from a .npy file (repeatable); other inputs get random values from their declared types")
        p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
        return p

    run = model_command("run", "run a model and print its outputs")
    run.add_argument("--output", "-o", metavar="FILE.npz", help="save the outputs to a .npz file")
    run.add_argument("--verbose", "-v", action="count", default=0, help="print every node as it runs (-vv adds value statistics)")
    run.add_argument("--runs", "-n", type=int, default=0, help="also time this many runs after the warm-up (default 0: the first run only)")
    run.set_defaults(func=cmd_run)

    bench = model_command("bench", "measure latency (min, median, p90), against onnxruntime when installed")
    bench.add_argument("--runs", "-n", type=int, default=50, help="number of timed runs (default 50)")
    bench.add_argument("--no-ort", action="store_true", help="do not time onnxruntime")
    bench.set_defaults(func=cmd_bench)

    prof = model_command("profile", "time every node: a table by operator type, the ten slowest nodes, an SVG chart")
    prof.add_argument("--runs", "-n", type=int, default=10, help="number of profiled runs (default 10)")
    prof.add_argument("--chart", metavar="FILE.svg", help="where to write the chart (default: beside the trace)")
    prof.set_defaults(func=cmd_profile)

    comp = model_command("compare", "compare outputs with onnxruntime; on a mismatch, find the first diverging node")
    comp.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (default 1e-3)")
    comp.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (default 1e-5)")
    comp.add_argument("--precision", action="store_true", help="compare the float32 model with itself run in float64, node by node (needs no onnxruntime)")
    comp.set_defaults(func=cmd_compare)

    draw_help = "draw the graph: Graphviz DOT text, or an SVG drawing (needs onnxrt[graph] and Graphviz's dot)"
    draw = sub.add_parser("draw", help=draw_help, description=draw_help)
    draw.add_argument("model", nargs="?", help="path of the .onnx model (default: the demo model shipped with onnxrt)")
    draw.add_argument("--output", "-o", metavar="FILE.svg|FILE.dot", help="where to write: .svg renders the drawing, .dot (or .gv) the DOT text (default: DOT text on stdout)")
    draw.add_argument("--rankdir", choices=["TB", "LR", "BT", "RL"], default="TB", help="direction of the drawing (default TB, top to bottom)")
    draw.set_defaults(func=cmd_draw)

    ops = sub.add_parser("ops", help="list the supported operators and versions per domain", description="list the supported operators and versions per domain")
    ops.add_argument("--domain", help="only this domain ('' or ai.onnx for the default domain)")
    ops.add_argument("--all", action="store_true", help="also list the operators onnxrt lacks")
    ops.add_argument("--markdown", action="store_true", help="print docs/operators.md")
    ops.add_argument("--paths", action="store_true", help="list each operator's declared fast paths (onnxrt.dispatch), in the order they are tried")
    ops.set_defaults(func=cmd_ops)
    return parser


def main(argv: list[str] | None = None) -> int:
    # the command line owns its process: runs reuse freed memory (onnxrt.tune_process;
    # ONNXRT_MALLOPT=0 leaves the allocator alone). OPENBLAS_THREAD_TIMEOUT must be in the
    # environment before Python starts to take effect (numpy is loaded by now)
    if os.environ.get("ONNXRT_MALLOPT", "").strip() != "0":
        tune_process(malloc=True)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except OnnxRuntimeError as e:
        print(f"onnxrt: error: {e}", file=sys.stderr)
        return e.exit_code
    except CliError as e:
        print(f"onnxrt: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("onnxrt: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
