"""A layer with a window (or chunks) carries a cache of that window — a ring (LANGUAGE §8) — in the lowering, the
residency, the manifest and the estimate alike. Every size is checked against arithmetic written out here from the
models' published shapes: layers × 2 (keys, values) × positions × KV heads × head width × 2 bytes (bf16)."""

from __future__ import annotations

import pytest

from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.hf import read_config
from streamed.spatial.bundle import manifest
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed
from streamed.spatial.synth import two_kind_document
from repo import CONFIGS, ROOT

FIXTURES = ROOT / "tests" / "model" / "configs"


def authored(path) -> object:
    return analyze(author(read_config(path)))


@pytest.fixture(scope="module")
def mistral():
    return authored(FIXTURES / "mistral-7b-v0.1.json")


def states(model) -> int:
    return sum(model.residency["states"].values())


def test_mistral_7b_decode_at_ctx_131072_carries_its_4096_window_not_the_context(mistral):
    model = lower_streamed(mistral, Deployment("decode", ctx=131072))
    # 32 layers × 2 × 4096 positions × 8 KV heads × 128 × 2 bytes: 537 MB (a cache of every position: 17.2 GB).
    assert states(model) == 32 * 2 * 4096 * 8 * 128 * 2 == 536_870_912
    assert states(model) < 0.6e9
    m = manifest(model)
    (kind,) = m["kinds"]
    assert [(s["shape"], s["bytes"], s["ring"]) for s in kind["states"]] == [([4096, 1024], 4096 * 1024 * 2, True)] * 2
    # One program still serves all 32 layers: the rule reads the program, so the kind is unchanged.
    assert len(mistral.kinds) == 1 and len(m["layers"]) == 32 and {r["kind"] for r in m["layers"]} == {kind["name"]}


def test_the_estimate_reads_what_the_residency_holds(mistral):
    model = lower_streamed(mistral, Deployment("decode", ctx=131072))
    program = model.kinds[0].program
    cost = model.estimate["programs"][model.kinds[0].name]
    assert {program.tensor(n).tier for n in ("Kc0", "Vc0", "Rcos1", "Rsin1")} == {"hbm"}
    # From HBM a decode step of one layer reads its weights, each ring whole (4096 positions × 1024 × 2 B, keys and
    # values) — what the residency holds — writes one row of each (1024 × 2 B), and reads one row of each of the two
    # rotation tables for the queries' rotation and the keys' (64 × 2 B each).
    ring = 4096 * 1024 * 2
    assert model.residency["layers"][0]["state_bytes_per_layer"] == 2 * ring
    assert cost["bytes"]["hbm"] == cost["weight_bytes"] + 2 * ring + 2 * 1024 * 2 + 2 * 2 * 64 * 2


def test_a_prefill_chunk_s_ring_holds_the_window_and_the_chunk_and_its_decode_continues_in_the_same_rings(mistral):
    prefill = lower_streamed(mistral, Deployment("prefill", ctx=131072, chunk=512))
    # 4096 + 512 − 1 positions: the chunk's first row reads 4095 back, its last is written 511 on.
    assert states(prefill) == 32 * 2 * (4096 + 512 - 1) * 8 * 128 * 2
    continuing = lower_streamed(mistral, Deployment("decode", ctx=131072, chunk=512))
    shapes = lambda m: [(t.name, t.shape) for t in m.kinds[0].program.tensors if t.role == "state"]  # noqa: E731
    assert shapes(continuing) == shapes(prefill) == [("Kc0", (4607, 1024)), ("Vc0", (4607, 1024))]
    assert manifest(continuing)["chunk"] == 512


def test_a_batch_s_sequences_each_carry_a_ring_of_the_window(mistral):
    model = lower_streamed(mistral, Deployment("batched", ctx=131072, batch=4))
    assert states(model) == 4 * 32 * 2 * 4096 * 8 * 128 * 2


def test_gemma_3_12b_at_ctx_131072_rings_its_40_sliding_layers_and_keeps_its_8_global_ones_whole():
    model = lower_streamed(authored(FIXTURES / "gemma-3-12b-it.json"), Deployment("decode", ctx=131072))
    # 48 layers of 8 KV heads of 256; every 6th global (8), the rest windowed at 1024 (40).
    sliding, whole = 40 * 2 * 1024 * 8 * 256 * 2, 8 * 2 * 131072 * 8 * 256 * 2
    assert states(model) == sliding + whole  # 8.93 GB (a cache of every position everywhere: 51.5 GB)
    rings = {k["name"]: {s["ring"] for s in k["states"]} for k in manifest(model)["kinds"]}
    assert rings == {"attention, window 1024": {True}, "attention": {False}}


def test_llama_4_scout_at_a_million_positions_rings_its_chunked_layers():
    # Without its query temperature (attn_temperature_tuning off): with it, the document is the model for 8,191
    # positions only, and a million is refused (tests/spatial/test_modelled_context.py).
    import json

    from streamed.model.hf import spec_from_config

    config = json.loads((CONFIGS / "llama-4-scout.json").read_text())
    config["text_config"] = {**config["text_config"], "attn_temperature_tuning": False}
    model = lower_streamed(analyze(author(spec_from_config(config))), Deployment("decode", ctx=1 << 20))
    # 48 layers of 8 KV heads of 128: 36 attend in chunks of 8192 (a ring of 8192 for decode), every 4th (12) globally.
    chunked, whole = 36 * 2 * 8192 * 8 * 128 * 2, 12 * 2 * (1 << 20) * 8 * 128 * 2
    assert states(model) == chunked + whole  # 52.8 GB (every position everywhere: 206 GB)


def test_a_cache_another_op_reads_is_every_position_and_so_is_its_partner():
    text = two_kind_document(4, window=8)
    assert lower_streamed(analyze(text), Deployment("decode", ctx=64)).kinds[0].program.tensor("Kc0").shape[0] == 8
    add = lambda extra, uses: text.replace("Let h0 be x plus a0 times Wo0.",  # noqa: E731
                                           f"{extra}\nLet h0 be x plus {uses} times Wo0.", 1)
    # Layer 0 also attends over its caches without a window: a ring would not hold what that reads.
    unwindowed = add("Let b0 be attention of qp0 over Kc0 and Vc0 at pos, heads 4 sharing 2.", "(a0 plus b0)")
    # Layer 0 also normalises its value cache: the keys stay every position too (one attention reads both alike).
    partner = add("Let vn0 be softmax of Vc0.", "a0")
    for variant in (unwindowed, partner):
        a = analyze(variant)
        assert not a.errors, a.errors[0].message
        kind = next(k for k in a.kinds if 0 in k.layers)
        p = lower_streamed(a, Deployment("decode", ctx=64)).kind(kind.name).program
        assert p.tensor("Kc0").shape[0] == 64 and p.tensor("Vc0").shape[0] == 64
        assert not any(op.attr("ring") for op in p.ops)


def test_a_window_as_long_as_the_context_is_the_plain_cache(mistral):
    model = lower_streamed(mistral, Deployment("decode", ctx=4096))
    assert states(model) == 32 * 2 * 4096 * 8 * 128 * 2
    assert not any(s["ring"] for k in manifest(model)["kinds"] for s in k["states"])
    assert not any(op.attr("ring") for op in model.kinds[0].program.ops)
