"""The first run: what compiling the kernels costs a whole ``streamed run``, and what compiling ahead saves.

On the 1B-shaped Q8_0 checkpoint of ``bench_realsize.py`` (``--checkpoint 1b-q4km``: its Q4_K_M, made by llama.cpp's
quantizer — what people download; each written into ``--into`` when it is not there), a prefill of ``--tokens``
tokens in each arithmetic, three ways, each a new process with its own kernel cache
(``NUMBA_CACHE_DIR``): **cold** (an empty cache: the run compiles its kernels as it calls them; the background
warm-up it starts when it ends, ``streamed.numerics.ahead``, is stopped before the next measurement), **after
`streamed warm`** (an empty cache that ``streamed warm`` — ``make``'s install step — then filled; ``streamed warm``
itself is timed too) and **warm** (the cache the cold run left). Each is timed as wall and CPU
seconds (user and system, the processes it waited for included); the ways alternate, so the machine's other load
falls on all; the figures are medians of ``--runs``.

    .venv/bin/python benchmarks/bench_cold.py [--checkpoint 1b-q8|1b-q4km ...] [--runs N] [--tokens N] [--into DIR]
        [--write]
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests" / "support")]

from bench_realsize import ONE_B, made  # noqa: E402
from common import load_average, machine, publish, run_process  # noqa: E402

HEADING = "## The first run: compiling the kernels"
PY = sys.executable
#: What ``make``'s install step runs once the package is installed.
WARM = [PY, "-m", "streamed", "warm"]
#: The checkpoints measured: ``bench_realsize.made``'s (Q8_0, fast, source) for each.
CHECKPOINTS = {"1b-q8": (True, True, None), "1b-q4km": (False, True, "1b-f32")}
#: The ways a run is measured, in the order they run (and the table's).
WAYS = ("cold", "after `streamed warm`", "warm")


def timed(argv: list[str], cache: Path, ahead: bool = False) -> tuple[float, float]:
    """(wall, CPU) seconds of ``argv`` run with its kernels cached in ``cache``, with the background warm-up on or not;
    a warm-up it started is stopped before this returns."""
    from streamed.numerics import ahead as compiling

    os.environ["NUMBA_CACHE_DIR"] = str(cache)
    os.environ[compiling.ENV] = "1" if ahead else "0"
    cpu, wall, status = run_process(argv)
    if status:
        raise RuntimeError(f"{' '.join(argv)} failed ({status})")
    for _ in range(100):  # the warm-up takes its lock a moment after the run that started it ends
        pid = compiling.running()
        if pid is not None:
            os.killpg(pid, signal.SIGTERM)
        elif _ > 20:
            break
        time.sleep(0.05)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=40)
    ap.add_argument("--into", default=str(ROOT / "build" / "bench-cold"), help="where the checkpoint is (or is made)")
    ap.add_argument("--checkpoint", choices=CHECKPOINTS, action="append", help="which (default 1b-q8; repeat for more)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    args.checkpoint = args.checkpoint or ["1b-q8"]
    import numpy as np

    folder = Path(args.into)
    folder.mkdir(parents=True, exist_ok=True)
    tokens = ",".join(str(int(t)) for t in np.random.default_rng(7).integers(0, 32000, args.tokens))
    start_load = load_average()
    rows = []
    # Processes measured as an installed package runs: its modules' bytecode kept (bench_realsize.MEASURED).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    files = {name: (made(folder, name, ONE_B, *CHECKPOINTS[name]), folder / f"{name}.lgm") for name in args.checkpoint}
    for gguf, doc in files.values():
        if not doc.exists():
            run_process([PY, "-m", "streamed", "author", str(gguf), "-o", str(doc)])
    for name, arithmetic in ((n, a) for n in args.checkpoint for a in ("exact", "llama.cpp")):
        gguf, doc = files[name]
        argv = [PY, "-m", "streamed", "run", str(doc), "--checkpoint", str(gguf), "--tokens", tokens, "--prefill",
                str(args.tokens), "--save", str(folder / "logits.npz"), "--arithmetic", arithmetic]
        times: dict[str, list[tuple[float, float]]] = {way: [] for way in (*WAYS, "`streamed warm` itself")}
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
                going, warmed = Path(tmp) / "going", Path(tmp) / "warmed"
                times["cold"].append(timed(argv, going, ahead=True))
                times["`streamed warm` itself"].append(timed(WARM, warmed))
                times["after `streamed warm`"].append(timed(argv, warmed))
                times["warm"].append(timed(argv, going))
            print(name, arithmetic, {k: v[-1] for k, v in times.items()}, flush=True)
        for way, samples in times.items():
            rows.append({"checkpoint": name, "arithmetic": arithmetic, "way": way,
                         "wall": statistics.median(s[0] for s in samples),
                         "cpu": statistics.median(s[1] for s in samples)})
    publish(render(rows, args, start_load), args.write)


def render(rows: list[dict], args, start_load: str) -> str:
    command = " ".join(["benchmarks/bench_cold.py", *(f"--checkpoint {c}" for c in args.checkpoint),
                        f"--runs {args.runs} --tokens {args.tokens}"])
    lines = [HEADING, "",
             f"Measured {datetime.date.today().isoformat()} by `{command}` on {machine()}; load average {start_load} "
             f"at the start, {load_average()} at the end, on a machine shared with other work. A {args.tokens}-token "
             f"prefill of the 1B-shaped checkpoint, whole `streamed run --save` processes; medians "
             f"of {args.runs}, the ways alternating.", "",
             "| checkpoint | arithmetic | kernel cache | wall s | CPU s | wall beyond warm | CPU beyond warm |",
             "|---|---|---|---:|---:|---:|---:|"]
    warm = {(r["checkpoint"], r["arithmetic"]): r for r in rows if r["way"] == "warm"}
    for r in rows:
        w = warm[r["checkpoint"], r["arithmetic"]]
        beyond = "| |" if r["way"] not in WAYS else f"{r['wall'] - w['wall']:+.1f} | {r['cpu'] - w['cpu']:+.1f} |"
        lines.append(f"| {r['checkpoint']} | {r['arithmetic']} | {r['way']} | {r['wall']:.1f} | {r['cpu']:.1f} | "
                     + beyond)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
