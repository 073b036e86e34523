"""What the numerical certification costs, and what its tensor-parallel bound is measured against: per decode step,
the reference interpreter and the bundle executor on each small example (seeded weights, ctx 32); ``streamed verify``
with its default steps per deployment of tiny-llama (medians of ``--runs`` runs in one process) and, from process
start, on small-gemma3, whose 512-position window the default steps decode past; and, over seeds 0–31 of every
small document in every tensor-parallel deployment it admits (8 steps, ctx 32, each layer fed the reference's
input), the largest error of a tensor an all-reduce flows into, in units of ``(tp + 1) · u · max |want|`` — the
amplification ``verify.TP_AMPLIFICATION`` bounds.

    .venv/bin/python benchmarks/bench_verify.py [--runs N] [--write]

``--write`` records the tables in docs/performance.md under ``## Numerical certification`` (only that section).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import cpu_model, load_average, median_time, publish  # noqa: E402

from streamed.analysis.whole import analyze  # noqa: E402
from streamed.numerics.execute import Executor, plan_of  # noqa: E402
from streamed.numerics.reference import Reference  # noqa: E402
from streamed.spatial.deployment import Deployment  # noqa: E402
from streamed.spatial.streamed_model import lower_streamed  # noqa: E402
from streamed.numerics.verify import TP_AMPLIFICATION, UNIT_ROUNDOFF, References, covering, run  # noqa: E402
from streamed.numerics.weights import seeded  # noqa: E402
from streamed.spatial.streamed_model import StreamedReject  # noqa: E402

HEADING = "## Numerical certification"
SMALL = ("tiny-llama", "small-gemma3", "small-qwen35", "small-deepseek-v2")
#: The suite's own documents, certified beside the examples: every option, and heads that split over 4 chips.
DOCUMENTS = ROOT / "tests" / "numerics" / "documents"
CTX = 32
SEEDS = range(32)
TP = (Deployment("tp", ctx=CTX, tp=2), Deployment("tp", ctx=CTX, tp=4), Deployment("batched-tp", ctx=CTX, batch=2, tp=2),
      Deployment("batched-tp", ctx=CTX, batch=2, tp=4))


def per_step(name: str, runs: int) -> tuple[str, int, float, float]:
    a = analyze((ROOT / "examples" / f"{name}.lgm").read_text())
    w = seeded(a.programs, 0)
    plan = plan_of(lower_streamed(a, Deployment("decode", ctx=CTX)))

    def reference():
        r = Reference(a.programs, w, CTX)
        for pos in range(8):
            r.step([pos + 1], pos)

    def bundle():
        e = Executor(w)
        for pos in range(8):
            e.step(plan, [pos + 1], [pos])

    return name, len(a.programs.layers), median_time(runs, reference) / 8, median_time(runs, bundle) / 8


def whole_verify(runs: int) -> list[tuple[str, int, float]]:
    a = analyze((ROOT / "examples" / "tiny-llama.lgm").read_text())
    w = seeded(a.programs, 0)
    out = []
    for mode, kw in (("decode", {}), ("prefill", {"chunk": 4}), ("batched", {"batch": 4}), ("tp", {"tp": 2}),
                     ("batched-tp", {"batch": 4, "tp": 2}), ("forward", {})):
        dep = Deployment(mode, ctx=CTX, **kw)
        steps = covering(a.programs, dep)[0]

        def once():
            plans = {"step": plan_of(lower_streamed(a, dep))}
            if mode == "prefill":
                plans = {"prefill": plans["step"], "step": plan_of(lower_streamed(a, Deployment("decode", ctx=CTX)))}
            report = run(a.programs, w, dep, plans, steps)
            assert report.ok, report.first_failure or report.error

        out.append((dep.mode, steps, median_time(runs, once)))
    return out


def windowed_default() -> tuple[int, float]:
    """``streamed verify examples/small-gemma3.lgm`` as a user runs it: its default steps, from process start."""
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "streamed", "verify", "examples/small-gemma3.lgm"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return int(out.stdout.split(": ", 1)[1].split(" step", 1)[0]), time.perf_counter() - started


def amplification() -> list[tuple[str, str, float, int]]:
    """Per document and tensor-parallel deployment it admits: the largest error of a tensor an all-reduce flows
    into over seeds 0–31, in units of ``(tp + 1) · u · max |want|``, and how many such measures there were."""
    out = []
    paths = [ROOT / "examples" / f"{n}.lgm" for n in SMALL] + sorted(DOCUMENTS.glob("*.lgm"))
    for path in paths:
        a = analyze(path.read_text())
        for dep in TP:
            try:
                plans = {"step": plan_of(lower_streamed(a, dep))}
            except StreamedReject:
                continue
            worst, count = 0.0, 0
            for seed in SEEDS:
                w = seeded(a.programs, seed)
                report = run(a.programs, w, dep, plans, 8, seed=seed, stop_at_first=False,
                             references=References(a.programs, w))
                assert report.ok, report.error or report.first_failure.describe()
                for m in report.measures:
                    if m.bound > 0:
                        count += 1
                        worst = max(worst, m.max_rel / ((dep.chips + 1) * UNIT_ROUNDOFF))
            label = f"{dep.mode}, tp {dep.chips}" + (f", batch {dep.batch}" if dep.batched else "")
            out.append((path.stem, label, worst, count))
    return out


def report(steps, verifies, windowed, tp, runs: int) -> str:
    lines = [
        HEADING, "",
        f"Measured {datetime.date.today().isoformat()} by `benchmarks/bench_verify.py --runs {runs}` on "
        f"{os.cpu_count()} cores (`nproc`), {cpu_model()}; Python {platform.python_version()}; load average "
        f"{load_average()}; medians of {runs} runs in one process, on a machine shared with other work.", "",
        f"Per decode step (ctx {CTX}, seeded weights, 8 steps):", "",
        "| example | layers | reference ms/step | bundle executor ms/step | ratio |", "|---|---|---|---|---|",
    ]
    for name, layers, r, b in steps:
        lines.append(f"| {name} | {layers} | {r * 1e3:.2f} | {b * 1e3:.2f} | {b / r:.2f} |")
    lines += ["", f"`streamed verify` of tiny-llama with its default steps, ctx {CTX} (lowering, both runs, every "
              "comparison):", "", "| deployment | steps | seconds |", "|---|---:|---:|"]
    lines += [f"| {mode} | {n} | {s:.2f} |" for mode, n, s in verifies]
    n, seconds = windowed
    lines += ["", f"`streamed verify examples/small-gemma3.lgm` from process start, its default steps decoding past "
              f"its 512-position window: {n} steps, {seconds:.1f} s.", "",
              f"Tensor parallel, seeds 0–31, 8 steps at ctx {CTX}, each layer fed the reference's input: the largest "
              "error of a tensor an all-reduce flows into, relative to its largest magnitude, in units of "
              f"`(tp + 1) · 2⁻²⁴` — what `TP_AMPLIFICATION` ({TP_AMPLIFICATION:g}) bounds:", "",
              "| document | deployment | worst | measures |", "|---|---|---:|---:|"]
    lines += [f"| {doc} | {dep} | {worst:.2f} | {count:,} |" for doc, dep, worst, count in tp]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    section = report([per_step(n, args.runs) for n in SMALL], whole_verify(args.runs), windowed_default(),
                     amplification(), args.runs)
    publish(section, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
