"""What the numerical certification costs: per decode step, the reference interpreter and the bundle executor on each
small example (seeded weights, ctx 32), and the whole of ``streamed verify`` (8 steps) per deployment of
tiny-llama — medians of ``--runs`` runs in one process.

    .venv/bin/python benchmarks/bench_verify.py [--runs N] [--write]

``--write`` records the tables in docs/performance.md under ``## Numerical certification`` (only that section).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import cpu_model, median_time, publish  # noqa: E402

from streamed.analysis.whole import analyze  # noqa: E402
from streamed.numerics.execute import Executor, plan_of  # noqa: E402
from streamed.numerics.reference import Reference  # noqa: E402
from streamed.spatial.deployment import Deployment  # noqa: E402
from streamed.spatial.streamed_model import lower_streamed  # noqa: E402
from streamed.numerics.verify import run  # noqa: E402
from streamed.numerics.weights import seeded  # noqa: E402

HEADING = "## Numerical certification"
SMALL = ("tiny-llama", "small-gemma3", "small-qwen35", "small-deepseek-v2")
CTX = 32


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


def whole_verify(runs: int) -> list[tuple[str, float]]:
    a = analyze((ROOT / "examples" / "tiny-llama.lgm").read_text())
    w = seeded(a.programs, 0)
    out = []
    for mode, kw in (("decode", {}), ("prefill", {"chunk": 4}), ("batched", {"batch": 4}), ("tp", {"tp": 2}),
                     ("batched-tp", {"batch": 4, "tp": 2}), ("forward", {})):
        dep = Deployment(mode, ctx=CTX, **kw)

        def once():
            plans = {"step": plan_of(lower_streamed(a, dep))}
            if mode == "prefill":
                plans = {"prefill": plans["step"], "step": plan_of(lower_streamed(a, Deployment("decode", ctx=CTX)))}
            report = run(a.programs, w, dep, plans, 8)
            assert report.ok, report.first_failure or report.error

        out.append((dep.mode, median_time(runs, once)))
    return out


def report(steps, verifies, runs: int) -> str:
    lines = [
        HEADING, "",
        f"Measured {datetime.date.today().isoformat()} by `benchmarks/bench_verify.py --runs {runs}` on "
        f"{os.cpu_count()} cores (`nproc`), {cpu_model()}; Python {platform.python_version()}; medians of {runs} runs "
        "in one process, on a machine shared with other work.", "",
        f"Per decode step (ctx {CTX}, seeded weights, 8 steps):", "",
        "| example | layers | reference ms/step | bundle executor ms/step | ratio |", "|---|---|---|---|---|",
    ]
    for name, layers, r, b in steps:
        lines.append(f"| {name} | {layers} | {r * 1e3:.2f} | {b * 1e3:.2f} | {b / r:.2f} |")
    lines += ["", f"`streamed verify` of tiny-llama, 8 steps, ctx {CTX} (lowering, both runs, every comparison):", "",
              "| deployment | seconds |", "|---|---|"]
    lines += [f"| {mode} | {s:.2f} |" for mode, s in verifies]
    return "\n".join(lines) + "\n"



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    section = report([per_step(n, args.runs) for n in SMALL], whole_verify(args.runs), args.runs)
    publish(section, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
