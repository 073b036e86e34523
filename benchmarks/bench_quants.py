"""The checkpoints people download, beside llama.cpp: issue #29's table, measured.

One F32 GGUF of a 2-layer Llama (d 2048, FFN 8192, 32 query heads sharing 8, vocabulary 32000; seeded weights as
``tests/support/oracle.write`` lays them out) is quantised by llama.cpp's own quantizer (``llama_model_quantize``) to
each of Q4_K_M, Q5_K_M, Q6_K, Q4_0 and BF16. On each file, whole processes, 2 threads, the same tokens: llama.cpp
(``llama-cpp-python``, memory-mapped, f32 KV cache), ``streamed run`` on the document ``streamed author`` writes from
the file — exact arithmetic and ``--arithmetic llama.cpp``. For
each: wall time, peak resident memory (``ru_maxrss``, the mapped file's pages it touched included) over the file's
size, and the logits' largest difference from llama.cpp's relative to its largest logit at each position.

    .venv/bin/python benchmarks/bench_quants.py [--tokens N] [--only Q4_K_M …] [--into DIR] [--write]

``--write`` records ``## Quantised checkpoints, beside llama.cpp`` in docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests" / "support")]

from bench_realsize import LLAMA, PY, relative, whole  # noqa: E402
from common import cpu_model, load_average, publish  # noqa: E402

HEADING = "## Quantised checkpoints, beside llama.cpp"
CFG = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 2, "num_attention_heads": 32,
       "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 8192, "vocab_size": 32000,
       "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}


MAKE = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import oracle, quants
source = Path(sys.argv[3])
if not source.exists():
    oracle.write(source, json.loads(sys.argv[2]), fast=True)
for ftype in sys.argv[4:]:
    quants.quantize(source, source.parent / f"{ftype}.gguf", ftype)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--only", nargs="+", default=None, help="these file types (default: every one of quants.FTYPES)")
    ap.add_argument("--into", help="work in this folder (its files already made are used, and left there)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    import numpy as np

    import quants

    args.only = args.only or list(quants.FTYPES)

    tokens = [int(t) for t in np.random.default_rng(7).integers(0, 32000, args.tokens)]
    text = ",".join(map(str, tokens))
    start_load = load_average()
    rows = []
    (ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "build", prefix="bench-quants-") as tmp:
        folder = Path(args.into or tmp)
        # The files are made in a process of their own: a child's peak resident set starts from this process's
        # (Linux keeps ``maxrss`` across fork and exec), so this one stays small.
        source = folder / "f32.gguf"
        missing = [f for f in args.only if not (folder / f"{f}.gguf").exists()]
        if missing:
            subprocess.run([PY, "-c", MAKE, str(ROOT / "tests" / "support"), json.dumps(CFG), str(source),
                            *missing], cwd=ROOT, check=True)
        for ftype in args.only:
            gguf = folder / f"{ftype}.gguf"
            size = gguf.stat().st_size
            doc = folder / f"{ftype}.lgm"
            subprocess.run([PY, "-m", "streamed", "author", str(gguf), "-o", str(doc)], cwd=ROOT, check=True)
            npy = folder / "llama.npy"
            took, peak, _ = whole([PY, "-c", LLAMA.format(support=str(ROOT / "tests" / "support")), str(gguf), text,
                                   str(len(tokens)), str(npy)])
            want = np.load(npy)
            rows.append({"file": ftype, "size": size, "who": "llama.cpp", "seconds": took, "peak": peak,
                         "agreement": None})
            print(rows[-1], flush=True)
            for arithmetic in ("exact", "llama.cpp"):
                out = folder / "ours.json"
                took, peak, err = whole([PY, "-m", "streamed", "run", str(doc), "--checkpoint", str(gguf), "--tokens",
                                         text, "--json", "--arithmetic", arithmetic], out)
                got = json.loads(out.read_text())
                rows.append({"file": ftype, "size": size, "who": f"streamed ({arithmetic})", "seconds": took,
                             "peak": peak, "agreement": relative(np.asarray(got["logits"], np.float32), want)})
                print(rows[-1], flush=True)
            if not args.into:
                gguf.unlink()
    publish(render(rows, args, start_load), args.write)


def render(rows: list[dict], args, start_load: str) -> str:
    lines = [HEADING, "",
             f"Measured {datetime.date.today().isoformat()} by `benchmarks/bench_quants.py --tokens {args.tokens}` on "
             f"{os.cpu_count()} cores ({cpu_model()}), Python {sys.version.split()[0]}; load average {start_load} at "
             f"the start, {load_average()} at the end, on a machine shared with other work. One run each (whole "
             "processes, 2 threads, prefill of every token in one step). Files made by llama.cpp's own quantizer "
             "from one F32 GGUF of a 2-layer Llama, d 2048, vocabulary 32000. Peak / file: the process's largest "
             "resident set over the file's size (the mapped file's pages count in it; the KV cache and one step's "
             "tensors are small here). Agreement: the largest difference from llama.cpp's logits on the same file "
             "relative to its largest logit at each position.", "",
             "| file | size | who | seconds | peak memory | peak / file | agreement |",
             "|---|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        agree = "" if r["agreement"] is None else f"{r['agreement']:.2g}"
        lines.append(f"| {r['file']} | {r['size'] / 1e6:.0f} MB | {r['who']} | {r['seconds']:.1f} | "
                     f"{r['peak'] / 1e6:.0f} MB | {r['peak'] / r['size']:.2f} | {agree} |")
    lines += ["", "What to read in it. Agreement: in llama.cpp's arithmetic every product over these types is ggml's "
              "(`streamed/numerics/ggml_quants.py`: the K-quants' vec_dot, and from 8 rows ggml's tiled kernel; the "
              "legacy quants' and BF16's dots), so a 0 is llama.cpp's logits bit for bit (`tests/oracle/"
              "test_quants.py` holds it at d 1024). Peak memory: a streamed process holds about 160 MB before it "
              "reads a weight (the interpreter, numpy, numba and LLVM's pages, the kernels loaded: a run of a "
              "d-256 file peaks there); beyond that a run holds the mapped file's pages it reads and one band, under "
              "0.9× the file (`tests/oracle/test_quants.py` holds 1.2× of file and caches at 64 MB) — no copy of a "
              "weight. The whole process's ratio to the file is that fixed cost over the file's size: above 1.2× for "
              "files under about 450 MB."]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    main()
