"""The ``onnxrt`` command line: run (and, as they land, bench, profile, compare, ops)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from importlib import resources
from typing import Any

import numpy as np

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


def cmd_run(args: argparse.Namespace) -> int:
    from . import InferenceSession
    from .tools.inputs import random_feeds

    path = args.model or demo_model_path()
    sess = InferenceSession(path)
    feeds = _parse_inputs(args.input)
    missing = [i.name for i in sess.get_inputs() if i.name not in feeds]
    if missing:
        rnd = random_feeds(sess.engine.model, seed=args.seed)
        for name in missing:
            feeds[name] = rnd[name]
        print(f"random inputs for {', '.join(repr(m) for m in missing)} (seed {args.seed})")
    if args.verbose:
        t0 = time.perf_counter()
        res = sess.engine.run(feeds, verbose=1)
        outs = [res[n] for n in sess.engine.output_names]
        elapsed = time.perf_counter() - t0
    else:
        t0 = time.perf_counter()
        outs = sess.run(None, feeds)
        elapsed = time.perf_counter() - t0
    print(f"model: {path}")
    for meta, value in zip(sess.get_outputs(), outs):
        shape, dtype = _describe(value)
        print(f"  {meta.name}: shape={shape} dtype={dtype}")
        print(f"    {_preview(value)}")
    print(f"run time: {elapsed * 1e3:.3f} ms")
    if args.output:
        arrays = {m.name: v for m, v in zip(sess.get_outputs(), outs) if isinstance(v, np.ndarray)}
        try:
            np.savez(args.output, **arrays)
        except OSError as e:
            raise CliError(f"cannot write {args.output!r}: {e.strerror or e}") from None
        print(f"outputs saved to {args.output}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onnxrt", description="Run, inspect and benchmark ONNX models with onnxrt.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run a model (the shipped demo model when none is given)")
    run.add_argument("model", nargs="?", help="path of the .onnx model (default: the demo model)")
    run.add_argument("--input", "-i", action="append", metavar="NAME=FILE.npy", help="feed an input from a .npy file (repeatable); missing inputs are random")
    run.add_argument("--output", "-o", metavar="FILE.npz", help="save the outputs to a .npz file")
    run.add_argument("--verbose", "-v", action="store_true", help="print every node as it runs")
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run.set_defaults(func=cmd_run)
    return parser


def main(argv: list[str] | None = None) -> int:
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
