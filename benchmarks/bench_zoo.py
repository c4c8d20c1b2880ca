"""Today's exported models: onnxrt vs onnxruntime (issue 25), each runtime in its own worker process.

Usage: python benchmarks/bench_zoo.py [--models bert-base,gpt2] [--exporters torchscript,dynamo]
                                      [--repeat 5] [--rounds 2] [--no-export] [--chart benchmarks/out/zoo.png]

Needs the ``zoo`` extra to export (``pip install -e .[zoo]``: torch, transformers, timm,
onnxscript); with ``--no-export`` only the cache is used and none of them is imported.

Models, exported once into ``benchmarks/cache/zoo/`` from random-initialised configs
(``torch.manual_seed(0)``; no weights are downloaded):

- ``bert-base``: transformers ``BertModel(BertConfig())``, batch 1, seq 128 (input_ids,
  attention_mask; outputs last_hidden_state, pooler_output);
- ``gpt2``: ``GPT2LMHeadModel(GPT2Config())``, the whole sequence: seq 64, no past
  (input_ids, attention_mask; output logits);
- ``gpt2-step``: the same model, one decoding step as generation runs it: one new token
  and past key/values of length 63 (``use_cache=True``; inputs input_ids, attention_mask
  of length 64, past_key_values.N.key/value; outputs logits, present.N.key/value);
- ``mobilenetv3_large_100``, ``efficientnet_b0``, ``convnext_tiny``: timm
  ``create_model(name, pretrained=False)``, batch 1, 3x224x224.

Each is exported with both of torch's exporters: ``torchscript`` (``torch.onnx.export(...,
dynamo=False)``) and ``dynamo`` (``dynamo=True``, through onnxscript), with dynamic axes
for batch and sequence (when an exporter refuses them, the export is retried with static
shapes and the table says so). An exporter that fails on a model is a row of the table
with the error's first line. Each export runs in a subprocess of its own.

Measurement: onnxrt and onnxruntime (a default ``SessionOptions``: no thread or spinning
settings) each in a worker process of its own (``_workers.py``), started fresh for each
model: it imports its runtime, creates the session ("create") and runs it once ("first
run": create + first run, what a fresh process pays), warms up (onnxrt: its session's
``engine.warmup_runs``, at least 3 runs, for both), then times chunks of ``--repeat`` runs
on command, the two workers taking turns over ``--rounds`` rounds; latencies are medians
of all the timed runs. Peak RSS is each worker's whole-process VmHWM (Linux), read after
the timed runs. Outputs agree when the first outputs of the two processes (saved as .npy
files) are close with rtol 1e-3, atol 1e-4. Feeds are random with a fixed seed (token ids
uniform over the vocabulary, masks all ones, images and past key/values standard normal).

Targets (issue 25): every latency ratio <= 1.3, their geometric mean <= 1.1, every
peak-memory ratio <= 1.3.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import fmt_time, markdown_table  # noqa: E402
from _workers import WorkerSet, geomean, load_outputs, outputs_agree  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, "cache", "zoo")
MODELS = ["bert-base", "gpt2", "gpt2-step", "mobilenetv3_large_100", "efficientnet_b0", "convnext_tiny"]
TIMM = {"mobilenetv3_large_100", "efficientnet_b0", "convnext_tiny"}
EXPORTERS = ["torchscript", "dynamo"]
SEQ_BERT, SEQ_GPT2, PAST = 128, 64, 63
TARGET_RATIO, TARGET_GEOMEAN, TARGET_MEMORY = 1.3, 1.1, 1.3


# ----------------------------------------------------------------------------- export (torch)


def _torch_model(name: str) -> tuple[Any, list[tuple[str, np.ndarray]], list[str], dict[str, dict[int, str]]]:
    """(module, [(input name, numpy feed)], output names, dynamic axes) of a zoo model."""
    import torch

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    if name in TIMM:
        import timm

        model = timm.create_model(name, pretrained=False).eval()
        x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
        return model, [("input", x)], ["output"], {"input": {0: "batch"}, "output": {0: "batch"}}
    if name == "bert-base":
        from transformers import BertConfig, BertModel

        cfg = BertConfig()
        bert = BertModel(cfg).eval()

        class Bert(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.bert = bert

            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
                return out.last_hidden_state, out.pooler_output

        ids = rng.integers(0, cfg.vocab_size, (1, SEQ_BERT), dtype=np.int64)
        mask = np.ones((1, SEQ_BERT), np.int64)
        axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                "last_hidden_state": {0: "batch", 1: "seq"}, "pooler_output": {0: "batch"}}
        return Bert().eval(), [("input_ids", ids), ("attention_mask", mask)], ["last_hidden_state", "pooler_output"], axes
    if name in ("gpt2", "gpt2-step"):
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config()
        gpt2 = GPT2LMHeadModel(cfg).eval()
        if name == "gpt2":
            class Gpt2(torch.nn.Module):
                def __init__(self) -> None:
                    super().__init__()
                    self.gpt2 = gpt2

                def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                    return self.gpt2(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

            ids = rng.integers(0, cfg.vocab_size, (1, SEQ_GPT2), dtype=np.int64)
            mask = np.ones((1, SEQ_GPT2), np.int64)
            axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
            return Gpt2().eval(), [("input_ids", ids), ("attention_mask", mask)], ["logits"], axes
        from transformers import DynamicCache

        n_layer, n_head, head = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head
        # transformers renames past_key_values to cache (5.2x; the old name goes in 5.40)
        cache_arg = "cache" if "cache" in inspect.signature(gpt2.forward).parameters else "past_key_values"

        class Gpt2Step(torch.nn.Module):
            """One decoding step: past key/values in as flat tensors, a DynamicCache built from
            them (the form transformers' generation passes), the updated cache out flat."""

            def __init__(self) -> None:
                super().__init__()
                self.gpt2 = gpt2

            def forward(self, input_ids: Any, attention_mask: Any, *past: Any) -> Any:
                cache = DynamicCache(config=cfg)
                for i in range(n_layer):
                    cache.update(past[2 * i], past[2 * i + 1], i)
                out = self.gpt2(input_ids=input_ids, attention_mask=attention_mask, use_cache=True, **{cache_arg: cache})
                present = getattr(out, "cache", None) or out.past_key_values
                flat = []
                for i in range(n_layer):
                    layer = present.layers[i] if hasattr(present, "layers") else None
                    k, v = (layer.keys, layer.values) if layer is not None else (present[i][0], present[i][1])
                    flat += [k, v]
                return (out.logits, *flat)

        feeds = [("input_ids", rng.integers(0, cfg.vocab_size, (1, 1), dtype=np.int64)),
                 ("attention_mask", np.ones((1, PAST + 1), np.int64))]
        outputs = ["logits"]
        axes: dict[str, dict[int, str]] = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
                                          "logits": {0: "batch", 1: "seq"}}
        for i in range(n_layer):
            for kv in ("key", "value"):
                feeds.append((f"past_key_values.{i}.{kv}", rng.standard_normal((1, n_head, PAST, head)).astype(np.float32)))
                axes[f"past_key_values.{i}.{kv}"] = {0: "batch", 2: "past"}
                outputs.append(f"present.{i}.{kv}")
                axes[f"present.{i}.{kv}"] = {0: "batch", 2: "total"}
        return Gpt2Step().eval(), feeds, outputs, axes
    raise ValueError(f"unknown model {name!r}")


def _dynamic_shapes(model: Any, feeds: list[tuple[str, np.ndarray]], axes: dict[str, dict[int, str]]) -> tuple[Any, ...]:
    """torch.export's dynamic_shapes for the dynamo exporter: Dim.DYNAMIC on each named axis
    but those of size 1 other than the batch, grouped like forward's parameters (the
    trailing feeds into one tuple where forward takes *args)."""
    import torch

    specs = [{ax: torch.export.Dim.DYNAMIC for ax, nm in axes.get(n, {}).items() if v.shape[ax] != 1 or nm == "batch"}
             for n, v in feeds]
    params = inspect.signature(model.forward).parameters.values()
    fixed = sum(1 for q in params if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD))
    if any(q.kind == q.VAR_POSITIONAL for q in params):
        return (*specs[:fixed], tuple(specs[fixed:]))
    return tuple(specs)


def _paths(name: str, exporter: str) -> dict[str, str]:
    base = os.path.join(CACHE, f"{name}.{exporter}")
    return {"onnx": base + ".onnx", "feeds": base + ".feeds.npz", "error": base + ".error.txt", "info": base + ".json"}


def export_one(name: str, exporter: str) -> None:
    """Subprocess mode: export one model with one exporter into the cache (or its error)."""
    import warnings

    import onnx
    import torch

    warnings.simplefilter("ignore")
    p = _paths(name, exporter)
    os.makedirs(CACHE, exist_ok=True)
    model, feeds, outputs, axes = _torch_model(name)
    args = tuple(torch.from_numpy(v) for _, v in feeds)
    names = [n for n, _ in feeds]
    tmp = tempfile.mkdtemp(dir=CACHE)
    path = os.path.join(tmp, os.path.basename(p["onnx"]))
    note = ""
    t0 = time.perf_counter()
    attempts: list[tuple[str, dict[str, Any]]] = [("", {"dynamic_axes": axes})]
    if exporter == "dynamo":
        # dynamo: dynamic_axes are converted to dynamic_shapes, which fails on a forward with
        # *args (gpt2-step's past key/values); then dynamic_shapes directly, leaving static the
        # axes of size 1 other than the batch (a dynamic new-token axis makes transformers'
        # SDPA call take a symbolic is_causal, which torch.export rejects)
        attempts.append(("dynamic batch and past/total axes, static 1-token axis", {"dynamic_shapes": _dynamic_shapes(model, feeds, axes)}))
    attempts.append(("static shapes", {}))
    errors = []
    with torch.no_grad():
        for label, kw in attempts:
            try:
                torch.onnx.export(model, args, path, input_names=names, output_names=outputs, dynamo=exporter == "dynamo", **kw)
                break
            except Exception as e:  # noqa: BLE001  (the next attempt; the last one's error is reported)
                errors.append(_first_line(e))
                shutil.rmtree(tmp)
                tmp = tempfile.mkdtemp(dir=CACHE)
                path = os.path.join(tmp, os.path.basename(p["onnx"]))
                if label == attempts[-1][0]:
                    raise
                note = f"{attempts[len(errors)][0]} (dynamic axes: {errors[0]})"
    seconds = time.perf_counter() - t0
    # feeds by the exported graph's input names: positional when the exporter renamed them
    proto = onnx.load(path, load_external_data=False)
    inits = {i.name for i in proto.graph.initializer}
    graph_inputs = [i.name for i in proto.graph.input if i.name not in inits]
    by_name = dict(feeds)
    if all(n in by_name for n in graph_inputs):
        out = {n: by_name[n] for n in graph_inputs}
    elif len(graph_inputs) == len(feeds):
        out = {g: v for g, (_, v) in zip(graph_inputs, feeds)}
    else:
        raise RuntimeError(f"exported inputs {graph_inputs} do not match the feeds {names}")
    np.savez(os.path.join(tmp, "feeds.npz"), **out)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    info = {"nodes": len(proto.graph.node), "opset": opset, "note": note, "export_s": seconds,
            "torch": torch.__version__, "external_data": any(f != os.path.basename(path) for f in os.listdir(tmp) if f != "feeds.npz")}
    # the model (and its external data file, same folder) moves into the cache
    for f in os.listdir(tmp):
        if f == "feeds.npz":
            continue
        os.replace(os.path.join(tmp, f), os.path.join(CACHE, f))
    os.replace(os.path.join(tmp, "feeds.npz"), p["feeds"])
    shutil.rmtree(tmp, ignore_errors=True)
    with open(p["info"], "w") as f:
        json.dump(info, f)
    if os.path.exists(p["error"]):
        os.unlink(p["error"])


def _first_line(e: BaseException | str) -> str:
    text = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    return (lines[0] if lines else text)[:200]


def ensure_exported(name: str, exporter: str, no_export: bool) -> str | None:
    """The cached model's path, or None (the error is in the cache's .error.txt)."""
    p = _paths(name, exporter)
    if os.path.exists(p["onnx"]) and os.path.exists(p["feeds"]):
        return p["onnx"]
    if no_export:
        return None
    os.makedirs(CACHE, exist_ok=True)
    print(f"  exporting {name} with {exporter}...", file=sys.stderr, flush=True)
    proc = subprocess.run([sys.executable, __file__, "--export-one", name, exporter], capture_output=True, text=True)
    if proc.returncode != 0 or not os.path.exists(p["onnx"]):
        err = proc.stderr.strip().splitlines()
        # the exception's line: the last line of the traceback that names an error
        last = next((x for x in reversed(err) if "Error" in x or "Exception" in x), err[-1] if err else f"exit {proc.returncode}")
        with open(p["error"], "w") as f:
            f.write(last.strip() + "\n\n" + proc.stderr[-20000:])
        return None
    return p["onnx"]


def export_error(name: str, exporter: str) -> str:
    p = _paths(name, exporter)
    try:
        with open(p["error"]) as f:
            return _first_line(f.read())
    except OSError:
        return "not in the cache (--no-export)"


# ----------------------------------------------------------------------------- measurement


#: seconds a chunk of timed runs lasts at least (within --max-seconds): short runs get more of them
CHUNK_SECONDS = 0.2


def measure(name: str, exporter: str, path: str, repeat: int, rounds: int, max_seconds: float) -> dict[str, Any]:
    p = _paths(name, exporter)
    res: dict[str, Any] = {"model": name, "exporter": exporter}
    try:
        with open(p["info"]) as f:
            res["info"] = json.load(f)
    except OSError:
        res["info"] = {}
    outdir = tempfile.mkdtemp(prefix="zoo-out-")
    try:
        with WorkerSet(["onnxrt", "onnxruntime"]) as ws:
            loads = ws.load(outputs_dir=outdir, model=path, feeds=p["feeds"], warmup=3)
            res["load"] = loads
            if ws.errors:
                res["errors"] = dict(ws.errors)
            if len(ws.workers) == 2:
                # chunks of ``repeat`` runs, or of CHUNK_SECONDS for short runs (10 timed runs of a
                # 6 ms model gave medians 40% apart between processes: the first runs after the
                # other worker's chunk share the cores with its spinning threads), the timed runs
                # taking at most about max_seconds in all
                per_run = max(statistics_median(r["warm_s"] or [r["first_run_s"]]) for r in loads.values())
                n = max(2, min(max(repeat, int(CHUNK_SECONDS / max(per_run, 1e-9))),
                               int(max_seconds / max(per_run * 2 * rounds, 1e-9))))
                res["times"] = ws.time(rounds=rounds, repeat=n)
            res["rss"] = ws.rss()
        a, b = load_outputs(outdir, "onnxrt"), load_outputs(outdir, "onnxruntime")
        res["agree"], res["max_diff"] = outputs_agree(a, b, rtol=1e-3, atol=1e-4, first_only=True)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    return res


def statistics_median(v: list[float]) -> float:
    import statistics

    return statistics.median(v)


def _mb(b: int | None) -> str:
    return f"{b / 2**20:,.0f} MB" if b else "-"


def report(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    rows, ratios, mems, footnotes = [], [], [], []
    for r in results:
        label = [r["model"], r["exporter"]]
        if r.get("export_error"):
            rows.append(label + ["-"] * 8 + [f"export failed [{len(footnotes) + 1}]"])
            footnotes.append(f"[{len(footnotes) + 1}] {r['model']}/{r['exporter']}: {r['export_error']}")
            continue
        times, loads, rss = r.get("times", {}), r.get("load", {}), r.get("rss", {})
        med = {rt: statistics_median(v) for rt, v in times.items()}
        ratio = med["onnxrt"] / med["onnxruntime"] if len(med) == 2 else None
        peak = {rt: x.get("hwm") for rt, x in rss.items() if x.get("ok")}
        mem_ratio = peak["onnxrt"] / peak["onnxruntime"] if peak.get("onnxrt") and peak.get("onnxruntime") else None
        if ratio:
            ratios.append((r, ratio))
        if mem_ratio:
            mems.append((r, mem_ratio))
        ok = lambda rt: loads.get(rt, {}).get("ok")  # noqa: E731
        create = lambda rt: fmt_time(loads[rt]["create_s"]) if ok(rt) else "-"  # noqa: E731
        first = lambda rt: fmt_time(loads[rt]["create_s"] + loads[rt]["first_run_s"]) if ok(rt) else "-"  # noqa: E731
        notes = []
        for rt, e in r.get("errors", {}).items():
            notes.append(f"{rt} failed: {_first_line(e)}")
        if r.get("info", {}).get("note"):
            notes.append(f"exported with {r['info']['note']}")
        agree = ("yes" if r.get("agree") else f"no ({r.get('max_diff', float('nan')):.2g})") if ratio else "-"
        if notes:
            footnotes.append(f"[{len(footnotes) + 1}] {r['model']}/{r['exporter']}: {'; '.join(notes)}")
            agree += f" [{len(footnotes)}]"
        rows.append(label + [
            str(r.get("info", {}).get("nodes", "-")),
            fmt_time(med.get("onnxrt")), fmt_time(med.get("onnxruntime")), f"{ratio:.2f}" if ratio else "-",
            f"{create('onnxrt')} / {create('onnxruntime')}", f"{first('onnxrt')} / {first('onnxruntime')}",
            f"{_mb(peak.get('onnxrt'))} / {_mb(peak.get('onnxruntime'))}", f"{mem_ratio:.2f}" if mem_ratio else "-",
            agree,
        ])
    table = markdown_table(
        ["model", "exporter", "nodes", "onnxrt", "onnxruntime", "ratio", "session creation (onnxrt / ort)",
         "first run, fresh process (create + run)", "peak RSS (onnxrt / ort)", "memory ratio", "outputs agree"],
        rows,
    )
    g = geomean([x for _, x in ratios])
    summary = {"geomean": g, "ratios": ratios, "mems": mems}
    lines = [table, *footnotes, ""]
    for exp in EXPORTERS:
        ge = geomean([x for r, x in ratios if r["exporter"] == exp])
        if ge:
            lines.append(f"geometric mean of latency ratios, {exp}: {ge:.2f}")
    if g:
        lines.append(f"geometric mean of latency ratios, all: {g:.2f}")
    slow = [f"{r['model']}/{r['exporter']} {x:.2f}" for r, x in ratios if x > TARGET_RATIO]
    heavy = [f"{r['model']}/{r['exporter']} {x:.2f}" for r, x in mems if x > TARGET_MEMORY]
    failed = [f"{r['model']}/{r['exporter']}" for r in results if r.get("export_error") or len(r.get("times", {})) < 2]
    lines.append("")
    lines.append("targets of issue 25:")
    lines.append(f"- every latency ratio <= {TARGET_RATIO}: " + ("met" if ratios and not slow else "NOT met" + (f" ({', '.join(slow)})" if slow else "")))
    lines.append(f"- geometric mean <= {TARGET_GEOMEAN}: " + ("met" if g and g <= TARGET_GEOMEAN else "NOT met" + (f" ({g:.2f})" if g else "")))
    lines.append(f"- every peak-memory ratio <= {TARGET_MEMORY}: " + ("met" if mems and not heavy else "NOT met" + (f" ({', '.join(heavy)})" if heavy else "")))
    if failed:
        lines.append(f"- not measured (export or runtime failure): {', '.join(failed)}")
    return "\n".join(lines), summary


def chart(results: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [m for m in MODELS if any(r["model"] == m for r in results)]
    exporters = [e for e in EXPORTERS if any(r["exporter"] == e for r in results)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / max(1, len(exporters))
    for ax, key, target, title in ((axes[0], "latency", TARGET_RATIO, "median latency"), (axes[1], "memory", TARGET_MEMORY, "peak RSS")):
        for j, exp in enumerate(exporters):
            vals = []
            for m in models:
                r = next((r for r in results if r["model"] == m and r["exporter"] == exp), None)
                v = None
                if r and len(r.get("times", {})) == 2 and key == "latency":
                    v = statistics_median(r["times"]["onnxrt"]) / statistics_median(r["times"]["onnxruntime"])
                elif r and key == "memory":
                    rss = r.get("rss", {})
                    if rss.get("onnxrt", {}).get("hwm") and rss.get("onnxruntime", {}).get("hwm"):
                        v = rss["onnxrt"]["hwm"] / rss["onnxruntime"]["hwm"]
                vals.append(v or 0.0)
            xs = [i + (j - (len(exporters) - 1) / 2) * width for i in range(len(models))]
            ax.bar(xs, vals, width, label=exp)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(target, color="gray", linestyle="--", linewidth=0.8, label=f"target {target}x")
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels(models, rotation=30, ha="right")
        ax.set_ylabel(f"onnxrt / onnxruntime ({title})")
        ax.set_title(f"{title} ratio (lower is better; 0: not measured)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per chunk (more when runs are short: CHUNK_SECONDS; fewer when long: --max-seconds)")
    parser.add_argument("--rounds", type=int, default=2, help="chunks per runtime, the workers taking turns")
    parser.add_argument("--max-seconds", type=float, default=25.0, help="about the timed runs' share of each model's measurement")
    parser.add_argument("--no-export", action="store_true", help="use the cache only (torch is not imported)")
    parser.add_argument("--chart", default=os.path.join(HERE, "out", "zoo.png"))
    parser.add_argument("--json", default="", help="also write the raw results there")
    parser.add_argument("--export-one", nargs=2, metavar=("MODEL", "EXPORTER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.export_one:
        export_one(*args.export_one)
        return
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    exporters = [e.strip() for e in args.exporters.split(",") if e.strip()]
    for m in models:
        if m not in MODELS:
            parser.error(f"unknown model {m!r} (known: {', '.join(MODELS)})")
    for e in exporters:
        if e not in EXPORTERS:
            parser.error(f"unknown exporter {e!r} (known: {', '.join(EXPORTERS)})")
    results = []
    for m in models:
        for e in exporters:
            path = ensure_exported(m, e, args.no_export)
            if path is None:
                results.append({"model": m, "exporter": e, "export_error": export_error(m, e)})
                print(f"  {m}/{e}: export failed: {results[-1]['export_error']}", file=sys.stderr, flush=True)
                continue
            t0 = time.perf_counter()
            r = measure(m, e, path, args.repeat, args.rounds, args.max_seconds)
            results.append(r)
            t = r.get("times", {})
            ratio = f"{statistics_median(t['onnxrt']) / statistics_median(t['onnxruntime']):.2f}" if len(t) == 2 else "-"
            print(f"  {m}/{e}: onnxrt/ort {ratio} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    load = f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"
    print(f"{os.cpu_count()} cores; load average at the end: {load}\n")
    text, _ = report(results)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{k: v for k, v in r.items()} for r in results], f, default=str, indent=1)
    if args.chart:
        os.makedirs(os.path.dirname(args.chart) or ".", exist_ok=True)
        try:
            chart(results, args.chart)
            print(f"\nchart: {args.chart}")
        except ImportError:
            print("\nmatplotlib is not installed (pip install onnxrt[bench]): no chart")


if __name__ == "__main__":
    main()
