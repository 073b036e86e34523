"""The real models as the chips hold them: what each weighs when every weight stored Q8_0 is read as stored, and
what tensor parallelism over 4 and 8 chips gives (each chip the key/value heads its query heads read).

    .venv/bin/python benchmarks/bench_stored_q8.py [--write]

Every shipped and test config of the thirteen models issue #19 names (those this machine holds; Qwen3.6 27B's
config was not found — `examples/configs/qwen3.8.json` is the same 27B shape), authored by ``streamed author`` as
from a config.json (every projection declared ``q8``, so stored Q8_0 without a checkpoint), lowered for decode at ctx
4096 alone and over 4 and 8 chips on the SN50. Per model: its weights per chip, the part of them read as Q8_0
planes and scales (the rest: norms' gains and the embedding, stored bf16), the weights any program reads dense
though stored Q8_0 (with why), and the estimate's tokens per second; a deployment that cannot exist is shown with
its refusal. These are the lowering's figures, not timings: the same on any machine.

``--write`` records the section in docs/performance.md under ``## Real models: weights as stored, tensor
parallelism`` (replacing only that section).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import publish  # noqa: E402
from streamed.analysis.whole import analyze  # noqa: E402
from streamed.model.author import author  # noqa: E402
from streamed.model.hf import spec_from_config  # noqa: E402
from streamed.spatial.deployment import Deployment  # noqa: E402
from streamed.spatial.passes.fold_q8 import read_dense  # noqa: E402
from streamed.spatial.streamed_model import StreamedReject, lower_streamed  # noqa: E402
from streamed.spatial.units import size  # noqa: E402

TESTS = "tests/model/configs"
EXAMPLES = "examples/configs"
MODELS = {
    "Llama 3.1 8B": f"{EXAMPLES}/llama-3.1-8b.json",
    "Mistral 7B": f"{TESTS}/mistral-7b-v0.1.json",
    "Qwen2 7B": f"{TESTS}/qwen2-7b.json",
    "Qwen3 4B": f"{TESTS}/qwen3-4b.json",
    "Gemma 3 1B": f"{TESTS}/gemma-3-1b-it.json",
    "Gemma 3 12B": f"{TESTS}/gemma-3-12b-it.json",
    "gpt-oss 20B": f"{EXAMPLES}/gpt-oss-20b.json",
    "Llama 4 Scout": f"{EXAMPLES}/llama-4-scout.json",
    "DeepSeek-V2": f"{TESTS}/deepseek-v2-chat.json",
    "DeepSeek-V2-Lite": f"{EXAMPLES}/deepseek-v2-lite.json",
    "Qwen3-Next 80B": f"{EXAMPLES}/qwen3-next-80b-a3b.json",
    "Qwen3.5-MoE (35B-A3B)": f"{TESTS}/qwen3.5-35b-a3b.json",
    "Qwen3.5/3.6 27B shape (qwen3.8)": f"{EXAMPLES}/qwen3.8.json",
}
CTX = 4096


def weights_of(model) -> tuple[int, int]:
    """Every chip's weights (the fullest chip's, as residency places them) and how many of those bytes are Q8_0
    planes and scales, over the whole step (a kind's once per layer)."""
    total = sum(model.residency["weights"].values())
    q8 = 0
    for name, p in model.programs():
        layers = len(model.kind(name).layers) if name not in ("embed", "head") else 1
        chips = range(p.tp) if p.tp > 1 else (None,)
        per_chip = max(sum(t.bytes for t in p.tensors if t.role == "weight" and t.part is not None
                           and (c is None or t.chip in (None, c))) for c in chips)
        q8 += per_chip * layers
    return total, q8


def one(name: str, path: Path) -> list[str]:
    a = analyze(author(spec_from_config(json.loads(path.read_text()), name=name)))
    cells = []
    for dep in (Deployment("decode", ctx=CTX), Deployment("tp", ctx=CTX, tp=4), Deployment("tp", ctx=CTX, tp=8)):
        try:
            model = lower_streamed(a, dep)
        except StreamedReject as e:
            cells.append(f"refused: {e.why.split(': ', 2)[-1]}")
            continue
        total, q8 = weights_of(model)
        dense = sorted({d["of"] for _, p in model.programs() for d in read_dense(p)})
        read = f"{size(total)}/chip, {100 * q8 / total:.1f}% Q8_0"
        if dense:
            read += f", read dense: {', '.join(dense)}"
        replicated = sum(len(k.tp["replicas"]) for k in model.kinds) if dep.tp > 1 else 0
        read += f"{', KV heads replicated' if replicated else ''}; {model.estimate['tokens_per_second']:.0f} tokens/s"
        cells.append(read)
    return cells


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="record the section in docs/performance.md")
    args = ap.parse_args(argv)
    rows = []
    for name, rel in MODELS.items():
        path = ROOT / rel
        if path.exists():
            rows.append((name, rel, one(name, path)))
    table = ["| model (config) | decode | tp 4 | tp 8 |", "|---|---|---|---|"]
    table += [f"| {name} (`{rel}`) | {' | '.join(cells)} |" for name, rel, cells in rows]
    section = "\n".join([
        "## Real models: weights as stored, tensor parallelism",
        "",
        f"`benchmarks/bench_stored_q8.py`, {datetime.date.today().isoformat()}: the lowering's own figures (the same "
        "on any machine), each model authored from its config.json, lowered for decode at ctx 4096 on the SN50, alone "
        "and over 4 and 8 chips. Weights per chip as residency places them; the part read as Q8_0 planes and scales "
        "(the rest are the norms' gains and the embedding, stored bf16); weights stored Q8_0 but read dense, with "
        "the program's reason in the manifest's `read_dense`; the estimate's tokens per second. A refusal is the "
        "split no sharing makes.",
        "",
        *table,
        "",
    ])
    publish(section, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
