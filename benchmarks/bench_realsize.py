"""``streamed`` at real size, beside llama.cpp, whole processes on the same GGUF, tokens and thread count.

Checkpoints (seeded random weights, written as llama.cpp's converter lays them out, ``tests/support/oracle.write``,
into a temporary folder that is removed after):

- Llama-3.2-1B-shaped: d 2048, 16 layers, 32 query heads sharing 8, FFN 8192, vocabulary 32000 — F32 (4.4 GB) and
  with its projections Q8_0 (1.4 GB);
- Llama-3.1-8B-shaped, Q8_0: d 4096, 32 layers, FFN 14336, vocabulary 32000 (about 8.5 GB; ``--no-8b`` leaves it);
- the 1B shape as a downloaded Llama 3 file is (``1b-q8-vocab``, when ``--only`` asks for it): a vocabulary of
  128,256 and the tokenizer block in its header — tokens, their types, 280,147 merges — which llama.cpp builds its
  tokenizer from on every load, and which ``streamed`` reads past;
- each shape Q4_K_M (``1b-q4km``, ``8b-q4km``: ``--only`` asks for them), made by llama.cpp's own quantizer
  (``llama_model_quantize``, as ``tests/support/quants.py`` does) — the 1B from its F32 file, the 8B re-quantised from
  its Q8_0 file (an F32 8B is 32 GB; the types chosen per tensor are the same, the values a Q8_0 step coarser).

For each: llama.cpp (``llama-cpp-python``, 2 threads, memory-mapped, f32 KV cache), ``streamed run`` on the document
``streamed author`` writes from the file (the reference interpreter; a Q8_0 checkpoint in both arithmetics, the default
and ``--arithmetic llama.cpp``) and on a lowered decode bundle (``streamed lower --mode decode`` then ``streamed run
--bundle``; ``--no-bundle`` leaves it), each a new process: its wall time, its peak resident memory (``ru_maxrss``, the mapped file's pages it touched included), and its logits'
largest difference from llama.cpp's relative to llama.cpp's largest logit at each position. Prefill is every token
in one step; decode one token a step (``--steps`` picks one). Each ``streamed run`` writes its logits with ``--save``
(a NumPy file, as the llama.cpp script writes its own): printing 1.3 million logits as text would be timed otherwise. Runs alternate (llama.cpp, then each of streamed's) so the machine's other
load falls on all; the figures are medians of ``--runs`` (a ratio: the median of each run's time over the llama.cpp
run just before it), and the summary gives each type's and arithmetic's ratio to
llama.cpp for prefill and decode.

    .venv/bin/python benchmarks/bench_realsize.py [--runs N] [--tokens N] [--only NAME …] [--steps prefill|decode]
        [--arithmetic llama.cpp|exact] [--no-8b] [--no-bundle] [--into DIR] [--keep] [--write]

``--write`` records ``## Real size, beside llama.cpp`` in docs/performance.md. An 8B run needs about 16 GB free at
its peak (llama.cpp's mapping and ours are one page cache, read one after the other): it is skipped, saying so, when
the machine has less.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests" / "support")]

from common import cpu_model, load_average, publish  # noqa: E402

HEADING = "## Real size, beside llama.cpp"
PY = sys.executable

ONE_B = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 8192, "vocab_size": 32000,
         "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
EIGHT_B = {**ONE_B, "hidden_size": 4096, "num_hidden_layers": 32, "head_dim": 128, "intermediate_size": 14336}
#: The 1B shape with Llama 3's vocabulary (128,256 tokens) and the tokenizer block a downloaded file carries
#: (``bench_gguf_header.tokenizer``: its tokens, their types, 280,147 merges), for ``1b-q8-vocab``.
ONE_B_VOCAB = {**ONE_B, "vocab_size": 128_256}

LLAMA = """
import sys, numpy as np
sys.path.insert(0, {support!r})
import llamacpp
tokens = [int(t) for t in sys.argv[2].split(",")]
np.save(sys.argv[4], llamacpp.logits(sys.argv[1], tokens, int(sys.argv[3]), threads=2, mmap=True))
"""


#: Every process measured as an installed package runs: with its modules' bytecode kept (pip writes it at install; a
#: ``PYTHONDONTWRITEBYTECODE`` in the benchmark's environment would compile this checkout's sources in every run).
MEASURED = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def whole(argv: list[str], out: Path | None = None) -> tuple[float, int, str]:
    """Run ``argv`` to its end: (wall seconds, peak resident bytes, stdout), or raise with its stderr."""
    start = time.perf_counter()
    with open(out or os.devnull, "wb") as sink:
        p = subprocess.Popen(argv, cwd=ROOT, stdout=sink, stderr=subprocess.PIPE, env=MEASURED)
        _, status, usage = os.wait4(p.pid, 0)
        err = p.stderr.read().decode(errors="replace")
    took = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed: {err.strip()[-500:]}")
    return took, usage.ru_maxrss * 1024, err


def relative(got, want) -> float:
    import numpy as np

    got, want = np.atleast_2d(got), np.atleast_2d(want)
    return float((np.abs(got - want).max(axis=-1) / np.abs(want).max(axis=-1)).max())


def free_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def make(folder: Path, name: str, cfg: dict, q8: bool, fast: bool, source: str | None) -> Path:
    """The checkpoint ``name`` in ``folder`` (one already there is used): written by ``oracle.write``, or, given a
    ``source`` checkpoint's name, that file (made first) quantised by llama.cpp to Q4_K_M."""
    import oracle
    import quants

    gguf = folder / f"{name}.gguf"
    if gguf.exists():
        return gguf
    if source is None:
        kv = None
        if name.endswith("-vocab"):  # the tokenizer block of a downloaded Llama 3 in its header
            from bench_gguf_header import FAMILIES, tokenizer

            kv = tokenizer({**FAMILIES["llama3"], "tokens": cfg["vocab_size"]})
        return oracle.write(gguf, cfg, q8=q8, fast=fast, kv=kv).path
    origin = folder / f"{source}.gguf"
    made = not origin.exists()
    if made:
        oracle.write(origin, cfg, q8=source.endswith("q8"), fast=fast)
    quants.quantize(origin, gguf, "Q4_K_M", requantize=source.endswith("q8"))
    if made:
        origin.unlink()
    return gguf


MADE = """
import json, sys
from pathlib import Path
sys.path[:0] = json.loads(sys.argv[1])
import bench_realsize
folder, name, cfg, q8, fast, source = json.loads(sys.argv[2])
bench_realsize.make(Path(folder), name, cfg, q8, fast, source)
"""


def made(folder: Path, name: str, cfg: dict, q8: bool, fast: bool, source: str | None) -> Path:
    """``make`` in a child process, so that this one stays small: on Linux a child's peak resident set
    (``ru_maxrss``) starts at its parent's when it is spawned (``exec`` carries the old image's high-water mark
    over), and a parent that had written or quantised a checkpoint would raise every peak measured after it."""
    paths = [str(ROOT / "benchmarks"), str(ROOT / "tests" / "support"), str(ROOT)]
    subprocess.run([PY, "-c", MADE, json.dumps(paths), json.dumps([str(folder), name, cfg, q8, fast, source])],
                   cwd=ROOT, check=True)
    return folder / f"{name}.gguf"


def case(folder: Path, name: str, cfg: dict, q8: bool, tokens: list[int], runs: int, bundle: bool,
         fast: bool = False, keep: bool = False, source: str | None = None,
         steps: tuple[str, ...] = ("prefill", "decode"), only: tuple[str, ...] = ()) -> list[dict]:
    """Every row of one checkpoint: prefill and decode, llama.cpp and streamed (reference; bundle for decode)."""
    import numpy as np

    t = time.perf_counter()
    gguf = made(folder, name, cfg, q8, fast, source)
    print(f"{name}: wrote {gguf.stat().st_size / 1e9:.2f} GB in {time.perf_counter() - t:.0f} s", flush=True)
    doc = folder / f"{name}.lgm"
    subprocess.run([PY, "-m", "streamed", "author", str(gguf), "-o", str(doc)], cwd=ROOT, check=True)
    text = ",".join(map(str, tokens))
    arithmetics = tuple(a for a in (("llama.cpp", "exact") if q8 or source else ("exact",)) if not only or a in only)
    bundle_dir = folder / f"{name}.bundle"
    if bundle:
        subprocess.run([PY, "-m", "streamed", "lower", str(doc), "--mode", "decode", "--ctx", str(len(tokens)),
                        "--checkpoint", str(gguf), "-o", str(bundle_dir)], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    rows = []
    for step, prefill in (("prefill", len(tokens)), ("decode", 1)):
        if step not in steps:
            continue
        saved = folder / "ours.npz"
        ours_argv = [PY, "-m", "streamed", "run", str(doc), "--checkpoint", str(gguf), "--tokens", text,
                     "--prefill", str(prefill), "--save", str(saved)]
        kinds = [(f"reference {a}", [*ours_argv, "--arithmetic", a]) for a in arithmetics]
        if bundle and step == "decode":
            kinds.append((f"bundle {arithmetics[0]}", [*ours_argv, "--arithmetic", arithmetics[0], "--bundle",
                                                        str(bundle_dir)]))
        times: dict[str, list[float]] = {"llama.cpp": [], **{k: [] for k, _ in kinds}}
        peaks: dict[str, int] = {}
        agree: dict[str, float] = {}
        want = None
        for _ in range(runs):
            npy = folder / "llama.npy"
            took, peak, _ = whole([PY, "-c", LLAMA.format(support=str(ROOT / "tests" / "support")), str(gguf), text,
                                   str(prefill), str(npy)])
            times["llama.cpp"].append(took)
            peaks["llama.cpp"] = max(peaks.get("llama.cpp", 0), peak)
            want = np.load(npy)
            for kind, argv in kinds:
                took, peak, _ = whole(argv)
                times[kind].append(took)
                peaks[kind] = max(peaks.get(kind, 0), peak)
                with np.load(saved) as got:
                    agree[kind] = relative(got["logits"], want[got["positions"]])
        for kind in ["llama.cpp"] + [k for k, _ in kinds]:
            rows.append({"checkpoint": name, "size": gguf.stat().st_size, "step": step, "who": kind,
                         "seconds": statistics.median(times[kind]),
                         "ratio": statistics.median(t / b for t, b in zip(times[kind], times["llama.cpp"])),
                         "peak": peaks[kind], "agreement": agree.get(kind)})
            print(rows[-1], flush=True)
    if not keep:
        gguf.unlink()
    shutil.rmtree(bundle_dir, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=40)
    ap.add_argument("--no-8b", action="store_true", help="leave out the 8B-shaped checkpoint")
    ap.add_argument("--only", action="append",
                    choices=("1b-f32", "1b-q8", "8b-q8", "1b-q4km", "8b-q4km", "1b-q8-vocab"),
                    help="this checkpoint (repeat for more; default: 1b-f32, 1b-q8 and 8b-q8)")
    ap.add_argument("--steps", choices=("prefill", "decode"), action="append", help="only these steps")
    ap.add_argument("--arithmetic", choices=("llama.cpp", "exact"), action="append",
                    help="only streamed's runs in these arithmetics (a K-quant decode in the exact one is minutes)")
    ap.add_argument("--dir", default=str(ROOT / "build"), help="where the temporary folder is made")
    ap.add_argument("--into", help="work in this folder instead (a checkpoint already there is used; each is "
                                   "removed after its runs)")
    ap.add_argument("--no-bundle", action="store_true", help="leave out the lowered decode bundle's runs")
    ap.add_argument("--keep", action="store_true", help="keep the checkpoints written (with --into)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    import numpy as np

    tokens = [int(t) for t in np.random.default_rng(7).integers(0, 32000, args.tokens)]
    start_load = load_average()
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    # The 8B-shaped checkpoint's Q8_0 blocks are drawn as blocks (``oracle.write(fast=True)``): quantising 8 billion
    # float values takes longer than the runs.
    plan = [("1b-f32", ONE_B, False, True, None), ("1b-q8", ONE_B, True, True, None),
            ("8b-q8", EIGHT_B, True, False, None), ("1b-q4km", ONE_B, False, True, "1b-f32"),
            ("8b-q4km", EIGHT_B, False, False, "8b-q8"), ("1b-q8-vocab", ONE_B_VOCAB, True, True, None)]
    rows, notes = [], []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-realsize-") as tmp:
        tmp = args.into or tmp
        for name, cfg, q8, bundle, source in plan:
            if (name not in args.only if args.only else source is not None or name.endswith("-vocab")) \
                    or name.startswith("8b") and args.no_8b:
                continue
            if name.startswith("8b") and free_bytes() < 16e9:
                notes.append(f"The 8B-shaped run was left out: {free_bytes() / 1e9:.1f} GB free, it needs 16 GB.")
                continue
            rows += case(Path(tmp), name, cfg, q8, tokens, args.runs, bundle and not args.no_bundle,
                         fast=name.startswith("8b"), keep=args.keep and bool(args.into), source=source,
                         steps=tuple(args.steps or ("prefill", "decode")), only=tuple(args.arithmetic or ()))
    publish(render(rows, notes, args, start_load), args.write)


def ratios_by_type(rows: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """``{(checkpoint, who): {step: median time ÷ llama.cpp's}}`` for each of streamed's runs (``reference exact``,
    ``reference llama.cpp``, ``bundle …``)."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        if r["who"] != "llama.cpp":
            out.setdefault((r["checkpoint"], r["who"]), {})[r["step"]] = r["ratio"]
    return out


def render(rows: list[dict], notes: list[str], args, start_load: str) -> str:
    when = datetime.date.today().isoformat()
    lines = [HEADING, "",
             f"Measured {when} by `benchmarks/bench_realsize.py {' '.join(sys.argv[1:])}` on "
             f"{os.cpu_count()} cores ({cpu_model()}), Python {sys.version.split()[0]}; load average {start_load} at "
             f"the start, {load_average()} at the end, on a machine shared with other work. Whole processes, "
             f"{args.tokens} tokens, 2 threads each; medians of {args.runs}. Agreement: the largest difference from "
             "llama.cpp's logits relative to its largest logit at each position. "
             "Peak: the process's largest resident set, the mapped checkpoint's pages included.", "",
             "| checkpoint | file | steps | who | seconds | × llama.cpp | peak memory | agreement |",
             "|---|---:|---|---|---:|---:|---:|---:|"]
    for r in rows:
        agree = "" if r["agreement"] is None else f"{r['agreement']:.2g}"
        lines.append(f"| {r['checkpoint']} | {r['size'] / 1e9:.2f} GB | {r['step']} | {r['who']} | "
                     f"{r['seconds']:.1f} | {r['ratio']:.2f} | {r['peak'] / 1e9:.2f} GB | {agree} |")
    lines += ["", "| checkpoint | arithmetic | prefill × llama.cpp | decode × llama.cpp |", "|---|---|---:|---:|"]
    for (checkpoint, who), ratios in ratios_by_type(rows).items():
        shown = [f"{ratios[step]:.2f}" if step in ratios else "—" for step in ("prefill", "decode")]
        lines.append(f"| {checkpoint} | {who} | {shown[0]} | {shown[1]} |")
    lines += ["", *notes, "",
              "What to read in it. Time: the issue's bound is 2× llama.cpp for F32 prefill and decode and for Q8_0 "
              "prefill, 5× for Q8_0 decode. Peak: the mapped checkpoint's pages count in the resident set (about the "
              "file), and nothing of it is copied: the bound is 1.5× the file plus 1 GB. Agreement: F32 within 1e-4; "
              "Q8_0, in llama.cpp's arithmetic, within 1e-3 — 0 is llama.cpp's logits bit for bit."]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    main()
