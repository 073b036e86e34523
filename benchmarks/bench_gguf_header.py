"""Reading a downloaded GGUF's header: its tokenizer block at real size, beside llama.cpp reading the same file.

A checkpoint people download carries its tokenizer in its header: Llama 3's 128,256 tokens, their types and 280,147
merges; Qwen3's 151,936 tokens and 151,387 merges; Gemma 3's 262,144 tokens with a score and a type each. For each, a
small model (2 layers, d 64) whose vocabulary is that size, written by the ``gguf`` package with such a block (byte
tokens where llama.cpp looks for them, the rest made up), and four whole processes on it, alternating, medians of
``--runs``:

- ``streamed kinds DOC --checkpoint FILE`` (the document ``streamed author`` wrote from the file) and ``streamed
  author FILE``: what a user runs on the file;
- llama.cpp's own parser reading the header (ggml's ``gguf_init_from_file``, through ctypes from the library
  ``llama-cpp-python`` built), the yardstick every ratio is over; and llama.cpp loading the file's vocabulary
  (``vocab_only``: that parser, then its tokenizer built), what it does on its way to a run;
- the ``gguf`` package's ``GGUFReader`` parsing the header, in a process of its own: the reader ``streamed`` used
  before ``model.gguf_file`` (a ``streamed run`` parsed the header twice with it).

    .venv/bin/python benchmarks/bench_gguf_header.py [--runs N] [--only llama3|qwen3|gemma3 ...] [--write]
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests" / "support")]

from common import load_average, machine, publish  # noqa: E402

HEADING = "## A downloaded checkpoint's header"
PY = sys.executable
SUPPORT = str(ROOT / "tests" / "support")

#: Each family's tokenizer block: its model, how many tokens, merges (BPE) or scores (SentencePiece).
FAMILIES = {
    "llama3": {"model": "gpt2", "tokens": 128_256, "merges": 280_147},
    "qwen3": {"model": "gpt2", "tokens": 151_936, "merges": 151_387},
    "gemma3": {"model": "llama", "tokens": 262_144, "merges": 0},
}

#: llama.cpp's GGUF parser (ggml's ``gguf_init_from_file``, from the library ``llama-cpp-python`` built), reading the
#: whole header — every key, every tensor's info — without the data (``no_alloc``).
PARSER = """
import ctypes, sys
from importlib.util import find_spec
lib = ctypes.CDLL(next(iter(find_spec("llama_cpp").submodule_search_locations)) + "/lib/libggml-base.so")
class Params(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]
lib.gguf_init_from_file.restype = ctypes.c_void_p
lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, Params]
lib.gguf_get_n_kv.restype = ctypes.c_int64
lib.gguf_get_n_kv.argtypes = [ctypes.c_void_p]
ctx = lib.gguf_init_from_file(sys.argv[1].encode(), Params(True, None))
assert ctx and lib.gguf_get_n_kv(ctx) > 0
"""
#: llama.cpp loading the file's vocabulary (``vocab_only``): its parser, then its tokenizer built.
VOCABULARY = f"""
import sys
sys.path.insert(0, {SUPPORT!r})
import llamacpp
why = llamacpp.refusal(sys.argv[1])
assert why is None, why
"""
GGUF_PACKAGE = "import sys; from gguf import GGUFReader; GGUFReader(sys.argv[1])"


def _byte_level() -> list[str]:
    """GPT-2's byte-level alphabet, the 256 tokens a BPE vocabulary begins with (``"\\n"`` is ``Ċ``), as its
    ``bytes_to_unicode`` maps them: printable bytes as themselves, the others to code points from 256 on."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out, n = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + n))
            n += 1
    return out


def tokenizer(family: dict) -> dict:
    """The tokenizer keys of a file of ``family``'s vocabulary, as llama.cpp's loader needs them."""
    n = family["tokens"]
    if family["model"] == "gpt2":
        tokens = _byte_level()
        tokens += [f"Ġt{i}" for i in range(n - len(tokens))]
        kv = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.tokens": tokens,
              "tokenizer.ggml.token_type": [1] * n,
              "tokenizer.ggml.merges": [f"Ġ t{i}" for i in range(family["merges"])]}
    else:
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
        tokens += [f"▁t{i}" for i in range(n - len(tokens))]
        kv = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
              "tokenizer.ggml.scores": [-float(i) for i in range(n)],
              "tokenizer.ggml.token_type": [2, 3, 3] + [6] * 256 + [1] * (n - 259)}
    return kv


def write(folder: Path, name: str) -> Path:
    import ggufs

    family = FAMILIES[name]
    path = folder / f"{name}.gguf"
    ggufs.llama_like(path, layers=2, d=64, heads=4, kv_heads=2, ffn=128, vocab=family["tokens"],
                     types={"token_embd.weight": "F16"}, extra_kv=tokenizer(family))
    return path


def timed(argv: list[str]) -> float:
    t = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    if done.returncode:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed: {done.stderr.strip()[-400:]}")
    return took


def case(folder: Path, name: str, runs: int) -> dict:
    path = write(folder, name)
    doc = folder / f"{name}.lgm"
    subprocess.run([PY, "-m", "streamed", "author", str(path), "-o", str(doc)], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    who = {
        "llama.cpp": [PY, "-c", PARSER, str(path)],
        "llama.cpp vocabulary": [PY, "-c", VOCABULARY, str(path)],
        "streamed kinds": [PY, "-m", "streamed", "kinds", str(doc), "--checkpoint", str(path)],
        "streamed author": [PY, "-m", "streamed", "author", str(path), "-o", str(folder / "again.lgm")],
        "GGUFReader": [PY, "-c", GGUF_PACKAGE, str(path)],
    }
    times: dict[str, list[float]] = {k: [] for k in who}
    for _ in range(runs):
        for k, argv in who.items():
            times[k].append(timed(argv))
    row = {"name": name, "bytes": path.stat().st_size, **{k: statistics.median(v) for k, v in times.items()}}
    for k in ("llama.cpp vocabulary", "streamed kinds", "streamed author", "GGUFReader"):
        row[f"{k} ratio"] = statistics.median(a / b for a, b in zip(times[k], times["llama.cpp"]))
    print(row, flush=True)
    return row


def render(rows: list[dict], args, load: str) -> str:
    when = datetime.date.today().isoformat()
    lines = [HEADING, "",
             f"Measured {when} by `benchmarks/bench_gguf_header.py {' '.join(sys.argv[1:])}` on {machine()}, load "
             f"{load} at the start, {load_average()} at the end; whole processes, alternating, medians of "
             f"{args.runs} (a ratio: the median of each run's time over llama.cpp's just before it).", "",
             "| tokenizer block | file | llama.cpp's parser (`gguf_init_from_file`) | llama.cpp's vocabulary load "
             "| `streamed kinds` | `streamed author` | the `gguf` package's `GGUFReader` (the reader before) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        f = FAMILIES[r["name"]]
        block = f"{r['name']}: {f['tokens']:,} tokens" + (f", {f['merges']:,} merges" if f["merges"] else ", scores")
        lines.append(f"| {block} | {r['bytes'] / 1e6:.0f} MB | {r['llama.cpp']:.2f} s | {r['llama.cpp vocabulary']:.2f} s "
                     f"({r['llama.cpp vocabulary ratio']:.2f}×) | {r['streamed kinds']:.2f} s "
                     f"({r['streamed kinds ratio']:.2f}×) | {r['streamed author']:.2f} s "
                     f"({r['streamed author ratio']:.2f}×) | {r['GGUFReader']:.2f} s ({r['GGUFReader ratio']:.1f}×) |")
    lines += ["", "What to read in it. llama.cpp's parser copies every string of the header into memory in C; "
              "`streamed` reads the header in Python (`model.gguf_file`: a numeric array one view of the mapped file, "
              "an array of strings walked for its end and never decoded, as no spec reads the tokenizer's keys), and "
              "its process also starts the interpreter and imports numpy and the analysis — the difference between "
              "the two columns. llama.cpp builds its tokenizer from the block on every load, a run's included; "
              "`streamed` has no tokenizer to build. The `gguf` package's reader makes a numpy view for every "
              "element of every array: before `model.gguf_file`, every `streamed` command on such a file paid that "
              "column, and `streamed run` paid it twice."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", nargs="*", choices=list(FAMILIES), default=None)
    ap.add_argument("--write", action="store_true", help="record the section in docs/performance.md")
    args = ap.parse_args()
    load = load_average()
    with tempfile.TemporaryDirectory() as d:
        rows = [case(Path(d), name, args.runs) for name in (args.only or FAMILIES)]
    publish(render(rows, args, load), args.write)


if __name__ == "__main__":
    main()
