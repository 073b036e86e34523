"""Lowering cost against depth, measured in one run, and the time to decode-lower the 64-layer Qwen3.8 example.

    .venv/bin/python benchmarks/bench_lowering.py [--runs N] [--write]

Depth independence: the same two-kind model (generated: sliding-window and global attention, Gemma-like widths) at 8,
32 and 128 layers, decode at ctx 4096, analysed once, then lowered ``--runs`` times each with a fresh kind cache
(medians). ``lower`` is ``lower_streamed`` (each layer bound by its renaming; the name maps materialise on first
read); ``+ manifest`` also materialises every layer's binding as ``write_bundle`` does. The naive baseline lowers
every layer's program on its own, as a compiler that does not know kinds would. ``--write`` records the table in
docs/performance.md under ``## Lowering`` (replacing only that section).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import cpu_model, load_average, record  # noqa: E402
from streamed.analysis.whole import analyze  # noqa: E402
from streamed.spatial.bundle import manifest  # noqa: E402
from streamed.analysis.kinds import stored_q8  # noqa: E402
from streamed.spatial.lower import lower_program  # noqa: E402
from streamed.spatial.synth import two_kind_document  # noqa: E402
from streamed.spatial.target import load_target  # noqa: E402
from streamed.spatial.deployment import Deployment  # noqa: E402
from streamed.spatial.streamed_model import lower_streamed  # noqa: E402

DEPTHS = (8, 32, 128)
#: CPU time of this process: on a machine shared with other work, wall time also counts the waits for a core.
CLOCK = time.process_time
DEPLOYMENT = Deployment("decode", ctx=4096)
WIDTHS = dict(d=2048, heads=8, kv=4, hd=256, ffn=8192, vocab=32768, window=1024, every=6)


def naive(analysis) -> None:
    """Every layer lowered as if it were its own program: what lowering costs without kinds."""
    progs, target = analysis.programs, load_target()
    cut = DEPLOYMENT.cut("layer")
    for p in progs.layers:
        lower_program(p, progs.constants, cut, target, p.label, stored_q8(progs, p, analysis.storage))


def timed(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t = CLOCK()
        fn()
        samples.append(CLOCK() - t)
    return statistics.median(samples)


def interleaved(fns: dict, runs: int) -> dict:
    """Medians of each function's time, the runs interleaved (depth 8, 32, 128, 8, …) so that a change in the
    machine's load falls on every depth alike."""
    samples: dict = {k: [] for k in fns}
    for _ in range(runs):
        for k, fn in fns.items():
            gc.collect()
            gc.disable()  # as timeit does: a collection's cost is the whole heap's, not the call's
            try:
                t = CLOCK()
                fn()
                samples[k].append(CLOCK() - t)
            finally:
                gc.enable()
    return {k: statistics.median(v) for k, v in samples.items()}




def measure(runs: int) -> dict:
    load = load_average()
    rows = []
    analyses = {n: analyze(two_kind_document(n, **WIDTHS)) for n in DEPTHS}
    for n, a in analyses.items():
        assert not a.errors and len(a.kinds) == 2, (n, a.errors[:1], a.kinds)
    lower = interleaved({n: (lambda a=a: lower_streamed(a, DEPLOYMENT)) for n, a in analyses.items()}, runs)
    full = interleaved({n: (lambda a=a: manifest(lower_streamed(a, DEPLOYMENT))) for n, a in analyses.items()}, runs)
    base = interleaved({n: (lambda a=a: naive(a)) for n, a in analyses.items()}, max(3, runs // 4))
    for n, a in analyses.items():
        rows.append({"layers": n, "kinds": len(a.kinds), "lower": lower[n], "manifest": full[n], "naive": base[n]})
    qwen = ROOT / "examples" / "qwen3.8.lgm"
    if qwen.exists():
        text = qwen.read_text("utf-8")
        source = "examples/qwen3.8.lgm"
    else:
        text = two_kind_document(64, **WIDTHS)
        source = "a generated 64-layer two-kind document (examples/qwen3.8.lgm absent)"
    analysed = analyze(text)
    if analysed.errors:
        raise SystemExit(f"{source} has errors; the first: {analysed.errors[0].message}")
    q_analyze = timed(lambda: analyze(text), 5)
    q_lower = timed(lambda: lower_streamed(analysed, DEPLOYMENT), 5)
    q_total = timed(lambda: manifest(lower_streamed(analyze(text), DEPLOYMENT)), 5)
    walls = []
    for _ in range(5):
        t = time.perf_counter()
        manifest(lower_streamed(analyze(text), DEPLOYMENT))
        walls.append(time.perf_counter() - t)
    q_wall = statistics.median(walls)
    qwen_row = (source, len(analysed.programs.layers), len(analysed.kinds), q_analyze, q_lower, q_total, q_wall)
    return {"load": (load, load_average()), "rows": rows, "qwen": qwen_row, "runs": runs}


def report(m: dict) -> str:
    rows = m["rows"]
    first = rows[0]
    ms = lambda s: f"{s * 1e3:.2f}"
    out = [
        "## Lowering",
        "",
        f"Measured by `benchmarks/bench_lowering.py` on {datetime.date.today().isoformat()}: {os.cpu_count()} cores "
        f"(`nproc`), {cpu_model()}; Python {platform.python_version()}. The machine is shared with other work (load "
        f"average {m['load'][0]} at the start, {m['load'][1]} at the end), so "
        f"every figure is this process's CPU time (not wall time, which also counts the waits for a core), a median "
        f"({m['runs']} runs; the naive baseline {max(3, m['runs'] // 4)}) with the depths' runs interleaved and the "
        "garbage collector paused during each (as `timeit` does), all in one run.",
        "",
        "Depth independence: one generated two-kind model (sliding-window and global attention; d 2048, 8 heads "
        "sharing 4 KV heads of 256, FFN 8192), decode at ctx 4096, analysed once and lowered with a fresh kind "
        "cache. *lower* is `lower_streamed` (kinds lowered, every layer bound by its renaming); *+ manifest* also "
        "materialises every layer's name map, as writing the bundle does; *naive* lowers every layer's program.",
        "",
        "| layers | kinds | lower (ms) | ratio to 8 | + manifest (ms) | ratio to 8 | naive (ms) | ratio to 8 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(f"| {r['layers']} | {r['kinds']} | {ms(r['lower'])} | {r['lower'] / first['lower']:.2f}× | "
                   f"{ms(r['manifest'])} | {r['manifest'] / first['manifest']:.2f}× | {ms(r['naive'])} | "
                   f"{r['naive'] / first['naive']:.2f}× |")
    source, layers, kinds, qa, ql, qt, qw = m["qwen"]
    out += [
        "",
        f"Decode-lowering {source} ({layers} layers, {kinds} kinds, ctx 4096): analysis {qa:.3f} s, lowering "
        f"{ql:.3f} s, analysis + lowering + manifest {qt:.3f} s of CPU, {qw:.3f} s of wall time (the target: under "
        f"2 s).",
        "",
    ]
    return "\n".join(out)



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--write", action="store_true", help="record the table in docs/performance.md")
    args = ap.parse_args()
    m = measure(args.runs)
    section = report(m)
    print(section)
    if args.write:
        print(f"recorded in {record(section)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
