"""An 8B-shaped Q8_0 checkpoint over 2 and 4 local Ray actors, each capped below the whole model's bytes, beside
the single process and llama.cpp: each actor's peak memory, the time, and whether the logits are the single
process's bit for bit.

The checkpoint is ``bench_realsize``'s Llama-3.1-8B shape (d 4096, 32 layers, FFN 14336, vocabulary 32000, Q8_0
projections; about 8.5 GB), written into a temporary folder that is removed after. Each row is a whole process on
the same tokens, prefilled in one step, in ``--arithmetic llama.cpp``: llama.cpp (``llama-cpp-python``, 2 threads,
memory-mapped); ``streamed run`` in one process; the same over ``--cluster auto`` with 2 and with 4 actors, each
capped at ``--cap`` of the file's bytes (default 60%), started by a driver that records each actor's peak resident
set (``ru_maxrss`` of its process, the mapped pages it touched included) — Ray's start is in the time. Optionally
(``--verify``) ``streamed verify --cluster`` of a decode bundle over 4 actors, its verdict.

    .venv/bin/python benchmarks/bench_cluster.py [--tokens N] [--runs N] [--cap 0.6] [--verify] [--write]

It needs about 12 GB available (the page cache holds the file once; a process maps it or its part); it is skipped,
saying so, with less.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests" / "support")]

from bench_realsize import EIGHT_B, LLAMA, PY, free_bytes, relative, whole  # noqa: E402
from common import cpu_model, load_average, publish  # noqa: E402

HEADING = "## Beyond one machine: an 8B-shaped Q8_0 checkpoint over Ray actors"

#: The cluster's run, in a process of its own: the logits and each actor's range and peak, as JSON.
DRIVER = """
import json, sys
import numpy as np
from streamed.analysis.whole import analyze
from streamed.cluster import engine
from streamed.cluster.split import costs
from streamed.cluster.stage import Source
from streamed.model.gguf import read_storage
from streamed.numerics.product import LLAMA_CPP
from streamed.numerics.weights import read_as_q8

doc, gguf, tokens, actors, cap, out = sys.argv[1:7]
tokens = [int(t) for t in tokens.split(",")]
storage = read_storage(gguf)
programs = analyze(open(doc, "rb").read(), storage).programs
c = costs(programs, storage, rows=len(tokens), ctx=len(tokens), positions=len(tokens),
          seeded_q8=read_as_q8(programs, storage))
placed = engine.place("auto", c, int(actors), None, int(cap))
peaks = []
got = engine.run(placed, programs, Source(gguf, storage), tokens, len(tokens), LLAMA_CPP, peaks=peaks)
json.dump({"logits": got.logits.tolist(), "model": c.total,
           "ranges": [[r.label, r.bytes, p] for r, p in zip(placed.ranges, peaks)]}, open(out, "w"))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--cap", type=float, default=0.6, help="each actor's cap, a share of the file's bytes")
    ap.add_argument("--verify", action="store_true", help="also verify a decode bundle over 4 actors")
    ap.add_argument("--dir", default=str(ROOT / "build"))
    ap.add_argument("--into", help="work in this folder (a checkpoint already there is used and kept)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    import numpy as np

    import oracle

    if free_bytes() < 12e9:
        publish(f"{HEADING}\n\nLeft out: {free_bytes() / 1e9:.1f} GB available, it needs 12 GB.\n", False)
        return
    start_load = load_average()
    tokens = [int(t) for t in np.random.default_rng(7).integers(0, 32000, args.tokens)]
    text = ",".join(map(str, tokens))
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-cluster-") as tmp:
        folder = Path(args.into or tmp)
        gguf = folder / "8b-q8.gguf"
        if not gguf.exists():
            oracle.write(gguf, EIGHT_B, q8=True, fast=True)
        doc = folder / "8b-q8.lgm"
        whole([PY, "-m", "streamed", "author", str(gguf), "-o", str(doc)])
        size = gguf.stat().st_size
        cap = int(args.cap * size)
        times: dict[str, list[float]] = {}
        peaks: dict[str, int] = {}
        logits: dict[str, np.ndarray] = {}
        ranges: dict[str, list] = {}
        for _ in range(args.runs):
            for who, argv in [
                ("llama.cpp", [PY, "-c", LLAMA.format(support=str(ROOT / "tests" / "support")), str(gguf), text,
                               str(len(tokens)), str(folder / "llama.npy")]),
                ("one process", [PY, "-m", "streamed", "run", str(doc), "--checkpoint", str(gguf), "--tokens", text,
                                 "--json", "--arithmetic", "llama.cpp"]),
                *[(f"{n} actors", [PY, "-c", DRIVER, str(doc), str(gguf), text, str(n), str(cap),
                                   str(folder / f"cluster{n}.json")]) for n in (2, 4)],
            ]:
                out = folder / "one.json" if who == "one process" else None
                took, peak, _ = whole(argv, out)
                times.setdefault(who, []).append(took)
                peaks[who] = max(peaks.get(who, 0), peak)
                if who == "llama.cpp":
                    logits[who] = np.load(folder / "llama.npy")
                elif who == "one process":
                    logits[who] = np.asarray(json.loads(out.read_text())["logits"], dtype=np.float32)
                else:
                    got = json.loads((folder / f"cluster{who.split()[0]}.json").read_text())
                    logits[who] = np.asarray(got["logits"], dtype=np.float32)
                    ranges[who] = got["ranges"]
                print(who, f"{took:.1f} s", flush=True)
        verdict = None
        if args.verify:
            bundle = folder / "8b.bundle"
            whole([PY, "-m", "streamed", "lower", str(doc), "--mode", "decode", "--ctx", "16", "--checkpoint",
                   str(gguf), "-o", str(bundle)])
            took, _, _ = whole([PY, "-m", "streamed", "verify", str(doc), "--bundle", str(bundle), "--checkpoint",
                                str(gguf), "--steps", "2", "--arithmetic", "llama.cpp", "--cluster", "auto",
                                "--actors", "4", "--actor-memory", str(cap)], folder / "verify.txt")
            verdict = ((folder / "verify.txt").read_text().strip().splitlines()[-1], took)
        if not args.into:
            gguf.unlink()
    publish(render(args, size, cap, times, peaks, logits, ranges, verdict, start_load), args.write)


def render(args, size, cap, times, peaks, logits, ranges, verdict, start_load) -> str:
    import numpy as np

    base = statistics.median(times["llama.cpp"])
    one = statistics.median(times["one process"])
    lines = [HEADING, "",
             f"Measured {datetime.date.today().isoformat()} by `benchmarks/bench_cluster.py --tokens {args.tokens} "
             f"--runs {args.runs}` on {os.cpu_count()} cores ({cpu_model()}), Python {sys.version.split()[0]}; load "
             f"average {start_load} at the start, {load_average()} at the end, on a machine shared with other work. "
             f"The 8B-shaped Q8_0 checkpoint ({size / 1e9:.2f} GB), {args.tokens} tokens prefilled in one step, "
             f"`--arithmetic llama.cpp`; whole processes, medians of {args.runs}; the actors are local (one node), "
             f"each capped at {cap / 1e9:.2f} GB ({args.cap:.0%} of the file). Peak: a process's largest resident "
             "set, the mapped pages it touched included.", "",
             "| who | seconds | × one process | × llama.cpp | peak memory | logits |", "|---|---:|---:|---:|---:|---|"]
    for who in times:
        t = statistics.median(times[who])
        if who == "llama.cpp":
            same = ""
        elif who == "one process":
            same = f"{relative(logits[who], logits['llama.cpp']):.2g} from llama.cpp's"
        else:
            same = "the one process's, bit for bit" if np.array_equal(logits[who], logits["one process"]) else \
                f"DIFFER from the one process's ({relative(logits[who], logits['one process']):.2g})"
        peak = f"{peaks[who] / 1e9:.2f} GB" if who not in ranges else \
            ", ".join(f"{label} {p / 1e9:.2f} GB" for label, _, p in ranges[who]) + f" (driver {peaks[who] / 1e9:.2f} GB)"
        lines.append(f"| {who} | {t:.1f} | {t / one:.2f} | {t / base:.2f} | {peak} | {same} |")
    if verdict is not None:
        lines += ["", f"`streamed verify --cluster auto --actors 4` of a decode bundle (ctx 16, 2 steps): "
                      f"\"{verdict[0]}\" in {verdict[1]:.0f} s."]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    main()
