"""Lowering cost against depth, as the user pays it: ``streamed lower`` from process start, at 8, 128 and 512 layers.

    .venv/bin/python benchmarks/bench_lowering.py [--runs N] [--write]

The documents are real models at any depth, written by ``streamed author``: Llama 3.1 8B's config (one kind) and
Gemma 3 27B's (sliding-window and global attention: two kinds), each at 8, 128 and 512 layers, lowered for decode at
ctx 4096 into a bundle. Everything is measured in one run, the depths alternating, as CPU time (what other work on
a shared machine does not change; wall time beside it), medians. Every table has its floor: a process that starts
Python, reads the document and tokenizes it with one ``re.findall``.

- *whole process*: ``streamed lower DOC --mode decode --ctx 4096 --no-sweep -o DIR`` — what the targets are about
  (the lowering itself: the roofline's sweep, one more lowering per batch and context, is ``bench_pictures.py``'s);
- *in process*: where a run's time goes — ``analyze``; ``lower_streamed`` with a fresh kind cache (the kinds
  lowered, every layer bound by its renaming); the manifest; writing the bundle; and *naive*, every layer's program
  lowered on its own, as a compiler that does not know kinds would;
- the 64-layer Qwen3.8 example lowered whole, against its 2 s target.

``--write`` records the section in docs/performance.md under ``## Lowering`` (replacing only that section).
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import authored, floor_command, load_average, load_line, machine, median, record, run_process  # noqa: E402
from streamed.analysis.kinds import stored_q8  # noqa: E402
from streamed.analysis.whole import analyze  # noqa: E402
from streamed.spatial.bundle import manifest, write_bundle  # noqa: E402
from streamed.spatial.deployment import Deployment  # noqa: E402
from streamed.spatial.lower import lower_program  # noqa: E402
from streamed.spatial.streamed_model import lower_streamed  # noqa: E402
from streamed.spatial.target import load_target  # noqa: E402

DEPTHS = (8, 128, 512)
MODELS = {"llama-3.1-8b": "Llama 3.1 8B (one kind)", "gemma-3-27b": "Gemma 3 27B (two kinds)"}
DEPLOYMENT = Deployment("decode", ctx=4096)
#: The targets: the whole command at 128 and 512 layers, against the same command at 8.
TARGETS = {128: 1.3, 512: 2.0}
CLOCK = time.process_time


def naive(analysis) -> None:
    """Every layer lowered as if it were its own program: what lowering costs without kinds."""
    progs, target = analysis.programs, load_target()
    cut = DEPLOYMENT.cut("layer")
    for p in progs.layers:
        lower_program(p, progs.constants, cut, target, p.label, stored_q8(progs, p, analysis.storage))


def whole_process(paths: dict, out: Path, runs: int) -> dict:
    samples: dict = {}
    for _ in range(runs):
        for (model, n), path in paths.items():
            for what, cmd in (("floor", floor_command(path)),
                              ("lower", [sys.executable, "-m", "streamed", "lower", str(path), "--mode", "decode",
                                         "--ctx", "4096", "--no-sweep", "-o", str(out / f"{model}-{n}")])):
                cpu, wall, code = run_process(cmd)
                if code != 0:
                    raise SystemExit(f"{' '.join(cmd)} exited {code}")
                samples.setdefault((model, n, what), []).append((cpu, wall))
    return {k: (median(c for c, _ in v), median(w for _, w in v)) for k, v in samples.items()}


def in_process(texts: dict, out: Path, runs: int) -> dict:
    samples: dict = {}
    analyses = {k: analyze(t) for k, t in texts.items()}
    for _ in range(runs):
        for key, text in texts.items():
            a = analyses[key]
            steps = {
                "analyze": lambda: analyze(text),
                "lower_streamed": lambda: lower_streamed(a, DEPLOYMENT),
                "manifest": lambda m=lower_streamed(a, DEPLOYMENT): manifest(m),
                "write the bundle": lambda m=lower_streamed(a, DEPLOYMENT): (shutil.rmtree(out / "b", ignore_errors=True), write_bundle(m, out / "b")),
            }
            for name, fn in steps.items():
                t = CLOCK()
                fn()
                samples.setdefault((*key, name), []).append(CLOCK() - t)
    for _ in range(max(1, runs // 5)):
        for key in texts:
            t = CLOCK()
            naive(analyses[key])
            samples.setdefault((*key, "naive: every layer lowered"), []).append(CLOCK() - t)
    return {k: median(v) for k, v in samples.items()}


def qwen_example(runs: int) -> tuple:
    text = (ROOT / "examples" / "qwen3.8.lgm").read_text("utf-8")
    a = analyze(text)
    if a.errors:
        raise SystemExit(f"examples/qwen3.8.lgm has errors; the first: {a.errors[0].message}")
    cpu, wall = [], []
    for _ in range(runs):
        t, w = CLOCK(), time.perf_counter()
        manifest(lower_streamed(analyze(text), DEPLOYMENT))
        cpu.append(CLOCK() - t)
        wall.append(time.perf_counter() - w)
    return len(a.programs.layers), len(a.kinds), median(cpu), median(wall)


def report(m: dict) -> str:
    ms = lambda s: f"{s * 1e3:.0f}" if s >= 0.1 else f"{s * 1e3:.1f}"  # noqa: E731
    outer, inner, texts = m["outer"], m["inner"], m["texts"]
    slope = lambda model, step: (inner[(model, DEPTHS[-1], step)] - inner[(model, DEPTHS[0], step)]) * 1e3 / (  # noqa: E731
        DEPTHS[-1] - DEPTHS[0])
    out = [
        "## Lowering",
        "",
        f"`benchmarks/bench_lowering.py`, {datetime.date.today().isoformat()}, {machine()}; {load_line(*m['load'])} "
        f"(the machine is shared). CPU time (wall time beside it), medians of {m['runs']} runs (naive: "
        f"{max(1, m['runs'] // 5)}), the depths alternating in one run, the garbage collector on.",
        "",
        "The documents: `streamed author` of " + "; ".join(
            f"{label} at " + ", ".join(f"{n} layers ({len(texts[(model, n)]) // 1024} KiB)" for n in DEPTHS)
            for model, label in MODELS.items()) + "; decode at ctx 4096.",
        "",
        "**`streamed lower DOC --mode decode --ctx 4096 --no-sweep -o DIR`, whole process** (CPU ms; × the same at "
        "8 layers; wall ms; the sweep `lower` adds without `--no-sweep` is under Pictures):",
        "",
        "| model | what | " + " | ".join(f"{n} layers" for n in DEPTHS) + " |",
        "|---|---|" + "---:|" * len(DEPTHS),
    ]
    verdicts = []
    for model, label in MODELS.items():
        for what, name in (("floor", "floor: start, read, `re.findall`"), ("lower", "`streamed lower`")):
            base = outer[(model, DEPTHS[0], what)][0]
            cells = []
            for n in DEPTHS:
                cpu, wall = outer[(model, n, what)]
                cells.append(f"{ms(cpu)} ({cpu / base:.2f}×; wall {ms(wall)})")
                if what == "lower" and n in TARGETS:
                    ratio = cpu / base
                    verdicts.append(f"{label} at {n} layers {ratio:.2f}× (target ≤ {TARGETS[n]}×: "
                                    + ("met" if ratio <= TARGETS[n] else f"**missed** by {ratio / TARGETS[n]:.2f}×") + ")")
            out.append(f"| {label} | {name} | " + " | ".join(cells) + " |")
    out += ["", "**Against the 8-layer command:** " + "; ".join(verdicts) + ".", ""]
    out += [
        "**In process: where the time goes** (CPU ms):",
        "",
        "| model | step | " + " | ".join(f"{n} layers" for n in DEPTHS) + " |",
        "|---|---|" + "---:|" * len(DEPTHS),
    ]
    steps = list(dict.fromkeys(k[2] for k in inner))
    for model, label in MODELS.items():
        for step in steps:
            out.append(f"| {label} | {step} | " + " | ".join(ms(inner[(model, n, step)]) for n in DEPTHS) + " |")
    layers, kinds, qcpu, qwall = m["qwen"]
    out += [
        "",
        f"Decode-lowering `examples/qwen3.8.lgm` ({layers} layers, {kinds} kinds, ctx 4096): analysis, lowering and "
        f"manifest {qcpu:.3f} s of CPU, {qwall:.3f} s of wall time (the target: under 2 s).",
        "",
        "Only the first layer of each shape is parsed and checked and only each kind's representative is lowered; "
        "every other layer is lexed, compared by its shape and bound by its renaming. What each layer past the "
        "eighth still costs, in process: " + "; ".join(
            f"{label}: analysis {slope(model, 'analyze'):.3f} ms (the floor's share "
            f"{(outer[(model, DEPTHS[-1], 'floor')][0] - outer[(model, DEPTHS[0], 'floor')][0]) * 1e3 / (DEPTHS[-1] - DEPTHS[0]):.3f} ms), "
            f"its manifest row and its bytes on disk {slope(model, 'manifest') + slope(model, 'write the bundle'):.3f} ms"
            for model, label in MODELS.items()) + ".",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--write", action="store_true", help="record the section in docs/performance.md")
    args = ap.parse_args()
    load_start = load_average()
    texts = {(model, n): authored(model, n) for model in MODELS for n in DEPTHS}
    for key, text in texts.items():
        a = analyze(text)
        assert len(a.programs.layers) == key[1] and not a.errors, (key, a.errors[:1])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = {}
        for (model, n), text in texts.items():
            paths[(model, n)] = tmp / f"{model}-{n}.lgm"
            paths[(model, n)].write_text(text, "utf-8")
        outer = whole_process(paths, tmp, args.runs)
        inner = in_process(texts, tmp, args.runs)
    m = {"outer": outer, "inner": inner, "texts": texts, "runs": args.runs, "qwen": qwen_example(5),
         "load": (load_start, load_average())}
    section = report(m)
    print(section)
    if args.write:
        print(f"recorded in {record(section)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
