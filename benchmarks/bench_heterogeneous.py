"""Heterogeneous documents stay fast (issue #23): models whose every layer is its own kind, in the editor and in
``streamed kinds``, beside the same model with one kind and beside the floor.

The documents, written by the tool:

- *Llama, one kind*: ``streamed author`` of Llama 3.1 8B's config at 512 layers;
- *Llama, every layer its own kind*: the same at 128 and 512 layers with layer l's first epsilon written
  ``{l + 1}e-7`` (``common.every_layer_its_own``) — as many kinds as layers, every layer but the first a divergence;
- *Nemotron-NAS-like*: ``streamed.spatial.synth.nas_document`` at 512 layers with Nemotron-51B's widths (d 8192, 64
  query heads of 128): each layer its own attention block — 8, 4, 2 or 1 query heads per KV head, removed, or one
  linear map — and its own FFN width: 512 kinds.

Measured, everything alternating in one run, CPU time (what other work on the shared machine does not change):

- *the language server*, the real one over stdio (``debounceMs: 0``, the decode deployment, so that every analysis
  checks every kind's lowering): the cold open (``didOpen`` → diagnostics of version 1, every kind lowered) and
  keystrokes — rounds of 7 (a comment typed and removed, a name renamed through the layer and back, a digit of an
  epsilon changed and restored: the layer leaves its kind and returns), round-robin over one server per document;
  the server's CPU per keystroke is the work an edit costs;
- *``streamed kinds DOC``* as a whole process, beside the floor process (start Python, read the file, tokenize it
  with one ``re.findall``), and ``analyze`` in a process of its own, beside the tokenizer alone on the same text.

``--before DIR`` first measures the streamed of another checkout (its server, its command line, its ``analyze``: its
``streamed/`` and ``server/`` put first on the child processes' path) on the documents this one writes: the figures
before a change, beside those after.

    .venv/bin/python benchmarks/bench_heterogeneous.py [--keys 20] [--cold 3] [--runs 7] [--before DIR] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from bench_server import Session, cpu_seconds, keystrokes, pct
from common import (authored, every_layer_its_own, floor_command, load_average, load_line, machine, publish,
                    run_process)

#: Nemotron-51B's widths: hidden 8192, 64 query heads of 128.
NAS = {"d": 8192, "heads": 64, "hd": 128, "vocab": 256000}
TARGETS = {"keystroke_ms": 50.0, "kinds_ratio": 20.0}

#: In a process of its own (so that ``--code`` measures another checkout): ``analyze`` and the tokenizer alone on
#: each file, alternating, CPU medians.
IN_PROCESS = r'''
import json, re, sys, time
from streamed.analysis.whole import analyze
runs, paths = int(sys.argv[1]), sys.argv[2:]
texts = [open(p, encoding="utf-8").read() for p in paths]
floor = re.compile(r"[A-Za-z0-9_]+|\S")
out = {p: {"analyze": [], "floor": []} for p in paths}
for _ in range(runs):
    for p, t in zip(paths, texts):
        for name, fn in (("floor", lambda: floor.findall(t)), ("analyze", lambda: analyze(t))):
            s = time.process_time(); fn(); out[p][name].append(time.process_time() - s)
print(json.dumps(out))
'''


def documents() -> dict[str, tuple[str, int]]:
    from streamed.spatial.synth import NAS_BLOCKS, nas_document

    llama = {n: authored("llama-3.1-8b", n) for n in (128, 512)}
    nas_blocks = [(NAS_BLOCKS[l % len(NAS_BLOCKS)][0], 32 * (200 + l)) for l in range(512)]
    return {
        "Llama, one kind, 512 layers": (llama[512], 512),
        "Llama, every layer its own kind, 128 layers": (every_layer_its_own(llama[128]), 128),
        "Llama, every layer its own kind, 512 layers": (every_layer_its_own(llama[512]), 512),
        "Nemotron-NAS-like, every layer its own kind, 512 layers": (nas_document(512, blocks=nas_blocks, **NAS), 512),
    }


def environment(code: Path | None) -> dict | None:
    """The environment that makes a child process import the streamed at ``code`` (its ``streamed/`` and its
    ``server/`` as ``streamed_lsp``), or ``None`` for this checkout."""
    if code is None:
        return None
    shim = Path(tempfile.mkdtemp(prefix="bench-code-"))
    (shim / "streamed").symlink_to(code.resolve() / "streamed")
    (shim / "streamed_lsp").symlink_to(code.resolve() / "server")
    return {**os.environ, "PYTHONPATH": str(shim)}


async def server(docs: dict, root: Path, args, env: dict | None) -> dict:
    Session.env = env
    if env is not None:
        os.chdir(env["PYTHONPATH"])  # the servers' working folder: ``python -m`` puts it before PYTHONPATH
    cold: dict = {label: [] for label in docs}
    for _ in range(args.cold):
        for label, (text, _) in docs.items():
            s = Session()
            await s.start(root)
            uri = (root / "cold.lgm").as_uri()
            cpu0, t = cpu_seconds(s.pid), time.perf_counter()
            s.open(uri, text)
            await s.wait(uri, 1, timeout=600)
            cold[label].append((time.perf_counter() - t, cpu_seconds(s.pid) - cpu0, len(s.diagnostics[uri])))
            await s.stop()
    keys = await keystrokes({label: (text, layers, ()) for label, (text, layers) in docs.items()}, root, args.keys)
    return {"cold": cold, "keys": keys}


def kinds(paths: dict[str, Path], runs: int, env: dict | None) -> dict:
    """``streamed kinds`` and the floor as whole processes, alternating; ``analyze`` and the tokenizer in a process
    of its own."""
    outer: dict = {label: {"kinds": [], "floor": []} for label in paths}
    for _ in range(runs):
        for label, path in paths.items():
            for name, cmd in (("floor", floor_command(path)), ("kinds", [sys.executable, "-m", "streamed", "kinds", str(path)])):
                cpu, wall, code = run_env(cmd, env)
                if code not in (0, 1):
                    raise SystemExit(f"{' '.join(cmd)} exited {code}")
                outer[label][name].append(cpu)
    done = subprocess.run([sys.executable, "-c", IN_PROCESS, str(runs), *map(str, paths.values())], env=env,
                          cwd=env["PYTHONPATH"] if env else None, capture_output=True, text=True, check=True)
    inner = json.loads(done.stdout)
    return {label: {"kinds": statistics.median(outer[label]["kinds"]), "floor": statistics.median(outer[label]["floor"]),
                    "analyze": statistics.median(inner[str(path)]["analyze"]),
                    "tokenizer": statistics.median(inner[str(path)]["floor"])} for label, path in paths.items()}


def run_env(cmd: list[str], env: dict | None) -> tuple[float, float, int]:
    if env is None:
        return run_process(cmd)
    t = time.perf_counter()
    # Not from this checkout's folder: ``python -m`` puts the working folder before PYTHONPATH.
    p = subprocess.Popen(cmd, cwd=env["PYTHONPATH"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - t, os.waitstatus_to_exitcode(status)


def report(docs: dict, runs: dict, args, load: tuple[str, str]) -> str:
    """The section: a row per document and per code measured (``runs``: its label → its figures), the targets."""
    med = statistics.median
    ms = lambda s: f"{s * 1e3:.1f}"  # noqa: E731
    from streamed.analysis.whole import analyze

    shapes = {label: analyze(text) for label, (text, _) in docs.items()}
    before = f" `{args.before}` (before) is measured first, then this checkout (after)." if args.before else ""
    out = [
        "## Heterogeneous documents",
        "",
        f"`benchmarks/bench_heterogeneous.py`{' --before ' + str(args.before) if args.before else ''}, "
        f"{date.today().isoformat()}, {machine()}; {load_line(*load)} (the machine is shared: CPU time is the figure "
        f"to read).{before} The real server over stdio, `debounceMs: 0`, decode deployment (every analysis checks "
        "every kind's lowering); keystrokes in rounds of 7 (a comment typed and removed, a name renamed through its "
        f"layer and back, a digit of an epsilon changed and restored), {args.keys} rounds round-robin over one server "
        f"per document; cold opens: medians of {args.cold}; `streamed kinds` and `analyze`: medians of {args.runs}. "
        "The floors: the tokenizer alone (`re.findall` of the seed's token rule over the text, in process) and a "
        "process that starts Python, reads the file and runs it. The latencies are wall time, which on a loaded "
        "machine counts the waits for a core: the CPU columns are the figures; the targets are judged on them.",
        "",
        "| document | kinds | divergences | code | cold open: server CPU | keystroke: server CPU | p50 / p95 latency | `analyze` (× tokenizer) | `streamed kinds` process (× floor process; × tokenizer) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    verdicts = []
    for label, (text, layers) in docs.items():
        a = shapes[label]
        for code, m in runs.items():
            cold = m["server"]["cold"][label]
            st = m["server"]["keys"][label]
            every = [x for xs in st["samples"].values() for x in xs]
            cpu = st["cpu"] / len(every)
            k = m["kinds"][label]
            out.append(f"| {label} ({len(text) // 1024} KiB) | {len(a.kinds)} | {len(a.divergences)} | {code} | "
                       f"{med(c for _, c, _ in cold):.2f} s | {ms(cpu)} ms | {ms(med(every))} / {ms(pct(every, 0.95))} ms | "
                       f"{ms(k['analyze'])} ms ({k['analyze'] / k['tokenizer']:.1f}×) | "
                       f"{ms(k['kinds'])} ms ({k['kinds'] / k['floor']:.1f}×; {k['kinds'] / k['tokenizer']:.1f}×) |")
            if code == "after" and layers == 512 and len(a.kinds) == layers:
                # The yardstick for `kinds` (its "1.54 s, 67×") is the whole process over the tokenizer alone.
                ok = cpu * 1e3 < TARGETS["keystroke_ms"]
                ratio = k["kinds"] / k["tokenizer"]
                verdicts.append(f"{label}: {ms(cpu)} ms of server CPU a keystroke (target < {TARGETS['keystroke_ms']:g} "
                                f"ms: {'met' if ok else '**missed**'}); the whole `streamed kinds` process {ratio:.1f}× "
                                f"the tokenizer (target ≤ {TARGETS['kinds_ratio']:g}×: "
                                f"{'met' if ratio <= TARGETS['kinds_ratio'] else '**missed**'}; {k['kinds'] / k['floor']:.1f}× "
                                f"the floor process), `analyze` alone {k['analyze'] / k['tokenizer']:.1f}× the tokenizer")
    out += ["", "**At 512 layers, every layer its own kind:** " + "; ".join(verdicts) + ".", "",
            "What an edit costs there: the edited layer is parsed (or renamed and renumbered from its frame's tree) and "
            "checked; the kinds are regrouped when its digest changed, each kind named once; which kind each kind was "
            "meant to be is found in one pass over the kinds, and where a layer parts from its representative is "
            "compared again only for the edited layer (for every layer of a kind whose representative it edited, or "
            "when a layer joins a kind that becomes the largest: then every divergence names a new representative); "
            "each divergence's diagnostic is placed again only when its sections moved; the lowering check asks the "
            "kind cache only for the programs the edit changed (a new kind is lowered once); the server writes the "
            "JSON of the diagnostics that changed and joins the rest. What stays proportional to the kinds is a pass "
            "over lists (the kinds, the divergences, the diagnostics in order), at a few microseconds a kind. The "
            "whole analysis parses once per frame (the layers' text up to names and numbers: one, here, for every "
            "layer but the first, whose comments differ) and checks each layer with its own numbers; where a layer that "
            "differs from its representative only in numbers parts from it is read off the differing numbers (its "
            "sentences are the representative's with those numbers put in), not compared token by token through "
            "`difflib`.", ""]
    return "\n".join(out)


async def measure(args, code: Path | None) -> tuple[dict, dict]:
    docs = documents()
    env = environment(code)
    here = os.getcwd()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            paths = {}
            for i, (label, (text, _)) in enumerate(docs.items()):
                paths[label] = root / f"doc{i}.lgm"
                paths[label].write_text(text, "utf-8")
            m = {"server": await server(docs, root, args, env), "kinds": kinds(paths, args.runs, env)}
    finally:
        os.chdir(here)
    return docs, m


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=20, help="keystroke rounds of 7 per document")
    ap.add_argument("--cold", type=int, default=3, help="cold opens per document")
    ap.add_argument("--runs", type=int, default=7, help="runs of each command and of `analyze`")
    ap.add_argument("--before", type=Path, help="a checkout to measure first, as the figures before (its streamed/, server/)")
    ap.add_argument("--write", action="store_true", help="record under ## Heterogeneous documents in docs/performance.md")
    args = ap.parse_args()
    load_start = load_average()
    runs = {}
    if args.before:
        docs, runs["before"] = asyncio.run(measure(args, args.before))
    docs, runs["after"] = asyncio.run(measure(args, None))
    publish(report(docs, runs, args, (load_start, load_average())), args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
