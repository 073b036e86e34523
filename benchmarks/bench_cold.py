"""The first run: what compiling the kernels costs a whole ``streamed run``, and what the install's warm-up saves.

On the 1B-shaped Q8_0 checkpoint of ``bench_realsize.py`` (written into ``--into`` when it is not there), a prefill of
``--tokens`` tokens in each arithmetic, three ways, each a new process with its own kernel cache
(``NUMBA_CACHE_DIR``): **cold** (an empty cache: every kernel the run needs is compiled), **after the warm-up** (an
empty cache that ``make``'s install step then filled — ``WARM_UP``, small runs of ``examples/tiny-llama.lgm``),
and **warm** (the cache the cold run left). Each is timed as wall and CPU seconds (user and system); the three
alternate, so the machine's other load falls on all; the figures are medians of ``--runs``.

    .venv/bin/python benchmarks/bench_cold.py [--runs N] [--tokens N] [--into DIR] [--write]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests" / "support")]

from bench_realsize import ONE_B  # noqa: E402
from common import load_average, machine, publish, run_process  # noqa: E402

HEADING = "## The first run: compiling the kernels"
PY = sys.executable
#: What ``make``'s install step runs once the package is installed (the Makefile's ``warm-up`` lines).
WARM_UP = [[PY, "-m", "streamed", "run", "examples/tiny-llama.lgm", "--tokens", "1,2,3", *a]
           for a in ([], ["--arithmetic", "llama.cpp"])]


def timed(argv: list[str], cache: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of ``argv`` run with its kernels cached in ``cache``."""
    os.environ["NUMBA_CACHE_DIR"] = str(cache)
    cpu, wall, status = run_process(argv)
    if status:
        raise RuntimeError(f"{' '.join(argv)} failed ({status})")
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=40)
    ap.add_argument("--into", default=str(ROOT / "build" / "bench-cold"), help="where the checkpoint is (or is made)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    import numpy as np

    import oracle

    folder = Path(args.into)
    folder.mkdir(parents=True, exist_ok=True)
    gguf, doc = folder / "1b-q8.gguf", folder / "1b-q8.lgm"
    if not gguf.exists():
        oracle.write(gguf, ONE_B, q8=True, fast=True)
    if not doc.exists():
        run_process([PY, "-m", "streamed", "author", str(gguf), "-o", str(doc)])
    tokens = ",".join(str(int(t)) for t in np.random.default_rng(7).integers(0, 32000, args.tokens))
    start_load = load_average()
    rows = []
    # Processes measured as an installed package runs: its modules' bytecode kept (bench_realsize.MEASURED).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    for arithmetic in ("exact", "llama.cpp"):
        argv = [PY, "-m", "streamed", "run", str(doc), "--checkpoint", str(gguf), "--tokens", tokens, "--prefill",
                str(args.tokens), "--save", str(folder / "logits.npz"), "--arithmetic", arithmetic]
        times: dict[str, list[tuple[float, float]]] = {"cold": [], "after the warm-up": [], "warm": []}
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
                cold, warmed = Path(tmp) / "cold", Path(tmp) / "warmed"
                times["cold"].append(timed(argv, cold))
                for step in WARM_UP:
                    timed(step, warmed)
                times["after the warm-up"].append(timed(argv, warmed))
                times["warm"].append(timed(argv, cold))
            print(arithmetic, {k: v[-1] for k, v in times.items()}, flush=True)
        for way, samples in times.items():
            rows.append({"arithmetic": arithmetic, "way": way, "wall": statistics.median(s[0] for s in samples),
                         "cpu": statistics.median(s[1] for s in samples)})
    publish(render(rows, args, start_load), args.write)


def render(rows: list[dict], args, start_load: str) -> str:
    command = f"benchmarks/bench_cold.py --runs {args.runs} --tokens {args.tokens}"
    lines = [HEADING, "",
             f"Measured {datetime.date.today().isoformat()} by `{command}` on {machine()}; load average {start_load} "
             f"at the start, {load_average()} at the end, on a machine shared with other work. A {args.tokens}-token "
             f"prefill of the 1B-shaped Q8_0 checkpoint, whole `streamed run --save` processes; medians "
             f"of {args.runs}, the three ways alternating.", "",
             "| arithmetic | kernel cache | wall s | CPU s | CPU beyond warm |", "|---|---|---:|---:|---:|"]
    warm = {r["arithmetic"]: r["cpu"] for r in rows if r["way"] == "warm"}
    for r in rows:
        lines.append(f"| {r['arithmetic']} | {r['way']} | {r['wall']:.1f} | {r['cpu']:.1f} | "
                     f"{r['cpu'] - warm[r['arithmetic']]:+.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
