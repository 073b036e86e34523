"""Authoring time: ``config.json`` → ModelSpec → document, for the 64-layer Qwen3.8 config (and the other examples).

Measures the median of N runs of the import and the author (the work of ``streamed author`` less process start and
file writes), and, separately, ``streamed kinds`` on the result so the figure can be read against the analysis.
Prints a Markdown section; ``--append`` adds it to docs/performance.md under ``## Authoring``.

    .venv/bin/python benchmarks/bench_author.py [--runs 21] [--append]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import cpu_model, record
from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.hf import spec_from_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "examples" / "configs"
NAMES = ["qwen3.8", "gemma-3-27b", "qwen3-next-80b-a3b", "llama-4-scout", "deepseek-v2-lite", "llama-3.1-8b", "gpt-oss-20b"]


def median_seconds(fn, runs: int) -> float:
    fn()  # warm: imports, caches
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)



def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--append", action="store_true", help="append the section to docs/performance.md")
    args = ap.parse_args()
    rows = []
    for name in NAMES:
        raw = (CONFIGS / f"{name}.json").read_text()

        def authoring():
            return author(spec_from_config(json.loads(raw), name=name))

        text = authoring()
        t_author = median_seconds(authoring, args.runs)
        t_kinds = median_seconds(lambda: analyze(text), max(3, args.runs // 4))
        layers = text.count("\n## Layer ")
        rows.append((name, layers, len(text), t_author, t_kinds))
    qwen = rows[0]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "streamed", "author", str(CONFIGS / "qwen3.8.json"), "-o", str(Path(tmp) / "q.lgm")]
        t_cli = median_seconds(lambda: subprocess.run(cmd, check=True, capture_output=True), 5)
    lines = [
        "## Authoring",
        "",
        f"`benchmarks/bench_author.py`, {datetime.date.today().isoformat()}, {os.cpu_count()} CPUs ({cpu_model()}), "
        f"Python {platform.python_version()}; median of {args.runs} runs (analysis: of {max(3, args.runs // 4)}). "
        "The machine is shared with other work while this runs: wall times vary up to ×3 between runs.",
        "",
        f"**Authoring the 64-layer Qwen3.8 config (`examples/configs/qwen3.8.json`): {qwen[3] * 1000:.1f} ms** "
        f"(config.json parsed, imported and written out as a {qwen[2] // 1024} KiB document; the bar is 1 s). "
        f"The whole command, `streamed author examples/configs/qwen3.8.json -o …` in a new process (interpreter "
        f"start and imports included), takes {t_cli * 1000:.0f} ms (median of 5).",
        "",
        "| config | layers | document | author (median) | `analyze` of the result (median) |",
        "|---|---|---|---|---|",
    ]
    for name, layers, size, ta, tk in rows:
        lines.append(f"| {name} | {layers} | {size // 1024} KiB | {ta * 1000:.1f} ms | {tk * 1000:.0f} ms |")
    section = "\n".join(lines) + "\n"
    print(section)
    if args.append:
        record(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
