"""The thirteen real models of issue #19 in its ten deployments, as a new user lowers them: each authored from its
published config.json, lowered on the SN50, and recorded as lowered (residency per tier, the part of the weights read
as Q8_0 planes and scales and any weight stored Q8_0 but read dense, whether key/value heads are replicated over the
chips, the roofline estimate's tokens/s) or refused (the limit it names, and why that limit is physical).

    .venv/bin/python benchmarks/bench_real_models.py [--write]

Nothing here is timed: every figure is the lowering's own arithmetic (residency, estimate), the same on any machine —
the CPU time of the whole run is printed beside it for scale. ``--write`` records the tables in docs/performance.md
under ``## Real models in ten deployments`` (only that section).
"""

from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import load_average, machine, publish  # noqa: E402
from streamed.analysis.whole import analyze  # noqa: E402
from streamed.model.author import author  # noqa: E402
from streamed.model.hf import read_config  # noqa: E402
from streamed.spatial.deployment import Deployment  # noqa: E402
from streamed.spatial.passes.fold_q8 import read_dense  # noqa: E402
from streamed.spatial.streamed_model import StreamedReject, lower_streamed  # noqa: E402
from streamed.spatial.units import size  # noqa: E402

HEADING = "## Real models in ten deployments"
FIXTURES = "tests/model/configs"
#: The thirteen models of #19 and the published config.json each is authored from.
MODELS = {
    "Llama 3.1 8B": "examples/configs/llama-3.1-8b.json",
    "Mistral 7B v0.1": f"{FIXTURES}/mistral-7b-v0.1.json",
    "Qwen2 7B": f"{FIXTURES}/qwen2-7b.json",
    "Qwen3 4B": f"{FIXTURES}/qwen3-4b.json",
    "Gemma 3 1B": f"{FIXTURES}/gemma-3-1b-it.json",
    "Gemma 3 12B": f"{FIXTURES}/gemma-3-12b-it.json",
    "gpt-oss 20B": "examples/configs/gpt-oss-20b.json",
    "Llama 4 Scout": "examples/configs/llama-4-scout.json",
    "DeepSeek-V2": f"{FIXTURES}/deepseek-v2-chat.json",
    "DeepSeek-V2-Lite": "examples/configs/deepseek-v2-lite.json",
    "Qwen3-Next 80B": "examples/configs/qwen3-next-80b-a3b.json",
    "Qwen3.5-MoE (35B-A3B)": f"{FIXTURES}/qwen3.5-35b-a3b.json",
    "Qwen3.6 27B": "examples/configs/qwen3.8.json",
}
#: The ten deployments of #19 (batched and tensor parallel at the command line's default context, 4096).
DEPLOYMENTS = {
    "forward 2k": Deployment("forward", ctx=2048),
    "forward 32k": Deployment("forward", ctx=32768),
    "decode 4k": Deployment("decode", ctx=4096),
    "decode 128k": Deployment("decode", ctx=131072),
    "prefill 128k, chunks of 8192": Deployment("prefill", ctx=131072, chunk=8192),
    "prefill 128k, chunks of 512": Deployment("prefill", ctx=131072, chunk=512),
    "batched 8": Deployment("batched", ctx=4096, batch=8),
    "tp 4": Deployment("tp", ctx=4096, tp=4),
    "tp 8": Deployment("tp", ctx=4096, tp=8),
    "batched-tp 8×4": Deployment("batched-tp", ctx=4096, batch=8, tp=4),
}
#: The long-context requests #19 names beside the table.
REQUESTS = [
    ("Llama 3.1 8B", "decode 2,097,152", Deployment("decode", ctx=2_097_152)),
    ("Llama 3.1 8B", "batched 256 × 131072", Deployment("batched", ctx=131072, batch=256)),
    ("Llama 4 Scout", "decode 1,048,576", Deployment("decode", ctx=1_048_576)),
    ("Mistral 7B v0.1", "decode 131072", Deployment("decode", ctx=131072)),
    ("Gemma 3 12B", "decode 131072", Deployment("decode", ctx=131072)),
]

#: Why a refusal's limit is physical (or that it is not), by what it says.
PHYSICAL = [
    (re.compile(r"need .* per chip; .* holds|weights need .* per chip"),
     "physical: the states or weights exceed what SRAM, HBM and DDR hold"),
    (re.compile(r"the (\d+ )?query heads of attention( \(\d+\))? do not split over \d+ chips"),
     "physical: a chip computes whole query heads, and they do not divide by the chips (vLLM and Megatron refuse "
     "the same split)"),
    (re.compile(r"the (\d+ )?heads of latent attention( \(\d+\))? do not split"),
     "physical: a chip computes whole heads, and they do not divide by the chips"),
    (re.compile(r"key/value heads"),
     "not physical: KV heads that divide the chips are replicated as deployed engines do (#19 deliverable 3)"),
]


def why_physical(why: str) -> str:
    return next((said for pattern, said in PHYSICAL if pattern.search(why)), "not classified: a design limit")


def tiers(d: dict) -> str:
    return ", ".join(f"{t.upper()} {size(v)}" for t, v in d.items() if v) or "—"


def stored(model) -> str:
    """How the chips read the weights: the share of the fullest chip's weight bytes that are Q8_0 planes and scales
    (the rest: norms' gains and the embedding, stored bf16), over the whole step (a kind's once per layer); the
    weights stored Q8_0 that a program reads dense (the manifest's ``read_dense`` says why); and whether key/value
    heads are replicated over the chips (``tp.replicas``)."""
    total = sum(model.residency["weights"].values())
    q8 = 0
    for name, p in model.programs():
        layers = len(model.kind(name).layers) if name not in ("embed", "head") else 1
        chips = range(p.tp) if p.tp > 1 else (None,)
        q8 += layers * max(sum(t.bytes for t in p.tensors if t.role == "weight" and t.part is not None
                               and (c is None or t.chip in (None, c))) for c in chips)
    said = f"{100 * q8 / total:.1f}%"
    dense = sorted({d["of"] for _, p in model.programs() for d in read_dense(p)})
    if dense:
        said += f"; read dense: {', '.join(dense)}"
    if any(k.tp.get("replicas") for k in model.kinds if k.tp):
        said += "; KV heads replicated"
    return said


def lowered(a, dep: Deployment) -> dict:
    try:
        m = lower_streamed(a, dep)
    except StreamedReject as e:
        return {"ok": False, "why": str(e)}
    r = m.residency
    return {"ok": True, "states": tiers(r["states"]), "weights": tiers(r["weights"]), "q8": stored(m),
            "tables": tiers(r.get("tables", {})), "tps": m.estimate["tokens_per_second"]}


def commit() -> str:
    """The commit measured (the tables change with the lowering, not with the machine)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def row(name: str, what: str, r: dict) -> str:
    """One line of a table: what lowered, where it lives and its rate; or the refusal and why its limit is physical."""
    if r["ok"]:
        return (f"| {name} | {what} | lowered | {r['states']} | {r['weights']} | {r['q8']} | {r['tables']} | "
                f"{rate(r['tps'])} |")
    return f"| {name} | {what} | refused: {r['why']} — *{why_physical(r['why'])}* | | | | | |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    load_before = load_average()
    cpu = time.process_time()
    analyses = {name: analyze(author(read_config(ROOT / path))) for name, path in MODELS.items()}
    results = {(name, dep): lowered(a, d) for name, a in analyses.items() for dep, d in DEPLOYMENTS.items()}
    requests = [(name, what, lowered(analyses[name], d)) for name, what, d in REQUESTS]
    cpu = time.process_time() - cpu
    ok = sum(r["ok"] for r in results.values())
    refused = [(k, r) for k, r in results.items() if not r["ok"]]
    classes: dict[str, int] = {}
    for _, r in refused:
        classes[why_physical(r["why"])] = classes.get(why_physical(r["why"]), 0) + 1
    lines = [
        HEADING, "",
        f"Measured {datetime.date.today().isoformat()} by `benchmarks/bench_real_models.py` at commit {commit()} on "
        f"{machine()}; load "
        f"average {load_before}; {cpu:.1f} s of CPU for the {len(results) + len(requests)} lowerings. Nothing is "
        "timed: residency and tokens/s are the lowering's arithmetic (the SN50 target, per chip; tokens/s the "
        "roofline estimate), the same on any machine.", "",
        "The models are authored from their published config.json (`examples/configs/`, `tests/model/configs/`; "
        "Qwen2 7B and Qwen3 4B were added from public copies of their published files found through the project's "
        "search; Qwen3.6 27B is `examples/configs/qwen3.8.json`, whose text model is Qwen3.6-27B's published "
        "architecture — 64 layers, d 5120, 24 query heads sharing 4, Gated DeltaNet 16/48 heads of 128 — as its model "
        "card gives it). Batched and tensor-parallel deployments at ctx 4096.", "",
        f"**{ok} of {len(results)} lower.** The {len(refused)} refusals, each with the limit it names:"
        + "".join(f" {n} {c}." for c, n in sorted(classes.items())), "",
        "Columns: the states and weights per tier (per chip, as residency places them); *Q8_0* the share of the "
        "weight bytes read as Q8_0 planes and scales (the rest are norms' gains and the embedding, stored bf16), "
        "any weight stored Q8_0 that a program reads dense (its manifest's `read_dense` says why), and whether "
        "key/value heads are replicated over the chips (`tp.replicas`); the rotation tables' tier; the estimate's "
        "tokens/s.", "",
        "| model | deployment | result | states | weights | Q8_0 | tables | tokens/s |",
        "|---|---|---|---|---|---|---|---:|",
    ]
    lines += [row(name, dep, r) for (name, dep), r in results.items()]
    lines += ["", "Long contexts (#19): a windowed or chunked layer carries a ring of its window (LANGUAGE §8), and "
              "rotation tables live in HBM.", "",
              "| model | request | result | states | weights | Q8_0 | tables | tokens/s |", "|---|---|---|---|---|---|---|---:|"]
    lines += [row(name, what, r) for name, what, r in requests]
    lines += ["", "Before the rings (the same lowering with every cache as long as the context): Mistral 7B decode at "
              "ctx 131072 carried 17.2 GB of KV, Gemma 3 12B 51.5 GB, Llama 4 Scout at 1,048,576 206 GB; Llama 3.1 8B "
              "at ctx 2,097,152 was refused for 537 MB of rotation tables in SRAM, and batched 256 × 131072 for PMUs."]
    publish("\n".join(lines), args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
