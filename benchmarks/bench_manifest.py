"""What writing a bundle's manifest costs against depth: its size and write time at 8, 128 and 512 layers, in decode
and in batched tensor parallel (the deployment with the most names per layer), beside the whole ``streamed lower``
command from process start and the floor under it (``streamed --help``: the interpreter and the command line).

    .venv/bin/python benchmarks/bench_manifest.py [--runs N] [--write]

The model is the generated two-kind model of bench_lowering.py (sliding-window and global attention, Gemma-like
widths), lowered once per depth and deployment; *manifest* is building the manifest and its text (CPU time of this
process, median of ``--runs``); *write* is ``write_bundle`` — every program file and the manifest, written into a
temporary directory and renamed into place (wall time, median). ``--write`` records the tables in
docs/performance.md under ``## Bundle manifest`` (only that section).
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import load_average, machine, median_time, publish  # noqa: E402
from streamed.analysis.whole import analyze  # noqa: E402
from streamed.spatial.bundle import manifest, manifest_text, write_bundle  # noqa: E402
from streamed.spatial.deployment import Deployment  # noqa: E402
from streamed.spatial.streamed_model import lower_streamed  # noqa: E402
from streamed.spatial.synth import two_kind_document  # noqa: E402

HEADING = "## Bundle manifest"
DEPTHS = (8, 128, 512)
WIDTHS = dict(d=2048, heads=8, kv=4, hd=256, ffn=8192, vocab=32768, window=1024, every=6)
DEPLOYMENTS = (Deployment("decode", ctx=4096), Deployment("batched-tp", ctx=4096, batch=8, tp=4))
STREAMED = [sys.executable, "-m", "streamed"]


def command(argv: list[str], runs: int) -> float:
    """The median wall time of a whole command, from process start."""
    def once():
        subprocess.run(argv, check=True, capture_output=True, cwd=ROOT)
    return median_time(runs, once)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    load_before = load_average()
    rows, commands = [], []
    with tempfile.TemporaryDirectory() as tmp:
        floor = command(STREAMED + ["--help"], args.runs)
        for n in DEPTHS:
            text = two_kind_document(n, **WIDTHS)
            doc = Path(tmp) / f"model-{n}.lgm"
            doc.write_text(text)
            a = analyze(text)
            for dep in DEPLOYMENTS:
                model = lower_streamed(a, dep)
                size = len(manifest_text(manifest(model, str(doc))).encode("utf-8"))
                build = median_time(args.runs, lambda: manifest_text(manifest(model, str(doc))), time.process_time)
                out = Path(tmp) / f"model-{n}-{dep.mode}.bundle"
                write = median_time(args.runs, lambda: write_bundle(model, out, source=str(doc)))
                rows.append((n, dep.mode, size, build, write))
            lower = command(STREAMED + ["lower", str(doc), "--mode", "decode", "--ctx", "4096", "-o",
                                        str(Path(tmp) / f"cli-{n}.bundle")], max(3, args.runs // 2))
            commands.append((n, lower))
    load_after = load_average()
    lines = [
        HEADING, "",
        f"Measured {datetime.date.today().isoformat()} by `benchmarks/bench_manifest.py --runs {args.runs}` on "
        f"{machine()}; load average {load_before} at the start, {load_after} at the end (the machine is shared with "
        "other work: wall times are upper bounds).", "",
        "The generated two-kind model (d 2048, 8 heads sharing 4 KV heads of 256, FFN 8192), decode at ctx 4096 and "
        "batched tensor parallel (batch 8 over 4 chips: 64 state names a layer). *manifest*: building it and its "
        "text, CPU time; *write*: `write_bundle`, every program file and the manifest, atomically, wall time; "
        "medians.", "",
        "| layers | deployment | manifest size | per layer | manifest (ms) | write (ms) |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    base = {mode: size for n, mode, size, _, _ in rows if n == DEPTHS[0]}
    for n, mode, size, build, write in rows:
        per = (size - base[mode]) / (n - DEPTHS[0]) if n > DEPTHS[0] else None
        lines.append(f"| {n} | {mode} | {size / 1e3:,.0f} KB | {'—' if per is None else f'{per:,.0f} B'} | "
                     f"{build * 1e3:.1f} | {write * 1e3:.1f} |")
    lines += ["", "The whole `streamed lower model-N.lgm --mode decode --ctx 4096 -o DIR` from process start (analysis, "
              "lowering, writing), beside the floor `streamed --help`:", "",
              "| layers | `streamed lower` (s) |", "|---:|---:|"]
    lines += [f"| {n} | {s:.2f} |" for n, s in commands]
    lines += [f"| floor (`streamed --help`) | {floor:.2f} |"]
    section = "\n".join(lines) + "\n"
    publish(section, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
