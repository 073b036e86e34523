"""Layer kinds on a 128-layer document, beside the time to merely tokenize it.

The document is authored by the tool itself: the Qwen3.8 example config (``examples/configs/qwen3.8.json``) with its
depth doubled to 128 layers — gated deltanet layers with full attention every 4th. Measured, in one run, as medians
of interleaved repetitions (the machine is shared, so runs of different stages alternate):

- *tokenize*: the lexer over the whole text (``streamed.lang.lexer.lex``), the floor for any analysis;
- *parse*: tokens to statements, with recovery;
- *check*: every program's semantic checks and shapes;
- *layer_kinds*: digests and kind names over the checked programs (the work this benchmark is about);
- *divergences*: the comparison of small kinds with large ones;
- *analyze*: all of it, as ``streamed kinds`` runs it.

    .venv/bin/python benchmarks/bench_kinds.py [--runs 15] [--append]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

from common import machine, record
from streamed.analysis.whole import analyze
from streamed.analysis.kinds import divergences, layer_kinds
from streamed.lang.lexer import lex
from streamed.lang.parser import parse
from streamed.model.author import author
from streamed.model.hf import spec_from_config
from streamed.model.program import programs_of

ROOT = Path(__file__).resolve().parents[1]


def document(layers: int = 128) -> str:
    config = json.loads((ROOT / "examples" / "configs" / "qwen3.8.json").read_text())
    text = config.get("text_config", config)
    text["num_hidden_layers"] = layers
    if "layer_types" in text:
        interval = text.get("full_attention_interval", 4)
        text["layer_types"] = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    return author(spec_from_config(config))



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--append", action="store_true", help="append the section to docs/performance.md")
    args = ap.parse_args()

    text = document()
    doc = parse(text)
    programs = programs_of(doc)
    kinds = layer_kinds(programs)
    assert len(programs.layers) == 128, len(programs.layers)
    stages = {
        "tokenize": lambda: lex(text),
        "parse": lambda: parse(text),
        "check": lambda: programs_of(doc),
        "layer_kinds": lambda: layer_kinds(programs),
        "divergences": lambda: divergences(programs, kinds),
        "analyze": lambda: analyze(text),
    }
    times: dict[str, list[float]] = {k: [] for k in stages}
    for fn in stages.values():
        fn()  # warm
    for _ in range(args.runs):
        for name, fn in stages.items():
            gc.collect()
            gc.disable()
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
            gc.enable()
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    load = os.getloadavg()[0]
    lines = [
        "## Layer kinds",
        "",
        f"`benchmarks/bench_kinds.py`, {datetime.date.today()}, {machine()}; medians of {args.runs} interleaved runs "
        f"in one process (load average {load:.1f} at the end: the machine is shared).",
        "",
        f"A 128-layer document authored by the tool (the Qwen3.8 config at 128 layers: {len(kinds)} kinds, "
        f"{len(text) // 1024} KiB, {sum(len(l.tokens) for l in lex(text))} tokens).",
        "",
        "| stage | median (ms) | × tokenize |",
        "|---|---:|---:|",
        *[f"| {k} | {v:.1f} | {v / med['tokenize']:.2f} |" for k, v in med.items()],
        "",
        f"**`layer_kinds` takes {med['layer_kinds']:.1f} ms, {med['layer_kinds'] / med['tokenize']:.2f}× the time to "
        f"merely tokenize the document** ({med['tokenize']:.1f} ms).",
        "",
    ]
    out = "\n".join(lines)
    print(out)
    if args.append:
        record(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
