"""★ A weight moves as it is stored: every weight the checkpoint stores Q8_0 is read as its planes and scales by every
program that reads it — expert banks, shared experts, routers, MLA's absorbed A and B, the head — and the bytes the
residency, the estimate and the manifest give are those of an independent count: the config's own numbers written
out here, elements × 34/32 for Q8_0 and × 2 for bf16."""

import json
import re
from pathlib import Path

import pytest

from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.hf import spec_from_config
from streamed.spatial.bundle import manifest
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed

from repo import CONFIGS, ROOT
from repo import example as example_text

TEST_CONFIGS = ROOT / "tests" / "model" / "configs"

Q8 = 34 / 32  # bytes per value: a block of 32 int8 values and one fp16 scale
BF16 = 2
F32 = 4  # a router (and a shared expert's gate): llama.cpp's quantizer keeps `ffn_gate_inp` as converted, F32


def authored(path: Path):
    return analyze(author(spec_from_config(json.loads(path.read_text()), name=path.stem)))


@pytest.fixture(scope="module")
def deepseek_v2():
    a = authored(TEST_CONFIGS / "deepseek-v2-chat.json")
    return lower_streamed(a, Deployment("decode", ctx=4096))


def deepseek_v2_count():
    """DeepSeek-V2's weights from its config.json (tests/model/configs/deepseek-v2-chat.json), counted by hand: what
    is Q8_0 (every projection but the router), F32 (the router) and bf16 (the embedding, the norms' gains), per
    program."""
    d, vocab, layers = 5120, 102400, 60
    q_rank, kv_rank, heads, nope, rope, v = 1536, 512, 128, 128, 64, 128
    ffn, experts, eff, shared, top = 12288, 160, 1536, 2 * 1536, 6
    attention_q8 = (d * q_rank + q_rank * heads * (nope + rope) + d * kv_rank + d * rope
                    + heads * nope * kv_rank + heads * kv_rank * v + heads * v * d)
    norms_bf16 = d + q_rank + kv_rank + d
    dense_ffn_q8 = 3 * d * ffn
    banks_q8 = 3 * experts * d * eff
    moe_rest_q8 = 3 * d * shared  # the shared expert
    router_f32 = d * experts
    layer0 = attention_q8 * Q8 + norms_bf16 * BF16 + dense_ffn_q8 * Q8
    moe = attention_q8 * Q8 + norms_bf16 * BF16 + (banks_q8 + moe_rest_q8) * Q8 + router_f32 * F32
    embed = vocab * d * BF16
    head = d * BF16 + d * vocab * Q8
    # A decode step reads all of a layer's weights but its experts' banks, of which it reads the 6 of 160 its token
    # chooses; the embedding's one row.
    moe_step = moe - banks_q8 * Q8 + 3 * top * d * eff * Q8
    return {"layer 0": layer0, "moe": moe, "embed": embed, "head": head, "moe step": moe_step, "embed step": d * BF16,
            "total": embed + layer0 + (layers - 1) * moe + head}


def test_deepseek_v2s_weights_are_their_q8_0_bytes_by_an_independent_count_in_residency_estimate_and_manifest(
        deepseek_v2):
    want = deepseek_v2_count()
    model = deepseek_v2
    # residency: every chip's weights, HBM and DDR together
    assert sum(model.residency["weights"].values()) == want["total"]
    assert round(want["total"] / 1e9) == 251  # not the 464 GB of reading the expert banks dense
    assert want["total"] == 251_109_468_160  # the routers F32: 141,977,600 bytes past the 250.97 GB of all Q8_0
    per_layer = {g["kind"]: g["weight_bytes_per_layer"] for g in model.residency["layers"]}
    assert per_layer == {"latent attention": want["layer 0"], "latent attention, experts": want["moe"]}
    # the manifest: every tensor each program loads, a kind's once per layer
    m = manifest(model)
    loads = lambda program: sum(r["bytes"] for w in program["weights"] for r in w["reads"])  # noqa: E731
    assert {k["name"]: loads(k) for k in m["kinds"]} == per_layer
    assert loads(m["shared"]["embed"]) == want["embed"] and loads(m["shared"]["head"]) == want["head"]
    assert sum(loads(k) * len(k["layers"]) for k in m["kinds"]) + want["embed"] + want["head"] == want["total"]
    # the estimate: what a decode step reads of each
    programs = model.estimate["programs"]
    assert programs["latent attention"]["weight_bytes"] == want["layer 0"]
    assert programs["latent attention, experts"]["weight_bytes"] == want["moe step"]
    assert programs["embed"]["weight_bytes"] == want["embed step"]
    assert programs["head"]["weight_bytes"] == want["head"]


def gpt_oss_20b_count():
    """gpt-oss 20B from examples/configs/gpt-oss-20b.json: 24 layers of d 2880, 64 query heads and 8 key/value heads
    of 64 (with biases, and a sink per head), 32 experts of 2880 (with biases) behind a router with a bias."""
    d, vocab, layers, heads, kv, hd, experts, eff = 2880, 201088, 24, 64, 8, 64, 32, 2880
    q8 = d * heads * hd + 2 * d * kv * hd + heads * hd * d + 3 * experts * d * eff
    bf16 = 2 * d + (heads * hd + 2 * kv * hd + d) + heads + experts + 3 * experts * eff
    layer = q8 * Q8 + bf16 * BF16 + d * experts * F32
    return {"layers": {"attention, window 128, experts": layer, "attention, experts": layer},
            "embed": vocab * d * BF16, "head": d * BF16 + d * vocab * Q8,
            "total": layers * layer + vocab * d * BF16 + d * BF16 + d * vocab * Q8}


def llama_4_scout_count():
    """Llama 4 Scout from examples/configs/llama-4-scout.json: 48 layers of d 5120, 40 query heads and 8 key/value
    heads of 128 (their norms without weights), every layer 16 experts of 8192 and a shared expert of 8192."""
    d, vocab, layers, heads, kv, hd, experts, eff = 5120, 202048, 48, 40, 8, 128, 16, 8192
    q8 = d * heads * hd + 2 * d * kv * hd + heads * hd * d + 3 * experts * d * eff + 3 * d * eff
    layer = q8 * Q8 + 2 * d * BF16 + d * experts * F32
    return {"layers": {"attention, chunks of 8192, experts": layer, "attention, experts": layer},
            "embed": vocab * d * BF16, "head": d * BF16 + d * vocab * Q8,
            "total": layers * layer + vocab * d * BF16 + d * BF16 + d * vocab * Q8}


def qwen3_next_count():
    """Qwen3-Next 80B from examples/configs/qwen3-next-80b-a3b.json: 48 layers of d 2048, every fourth attention (16
    query heads with their output gate, 2 key/value heads of 256, a norm per head), the rest gated delta (16 key and
    32 value heads of 128, a convolution over 4 rows, a gate per value head); every layer 512 experts of 512 and a
    shared expert of 512 behind its one-column gate."""
    d, vocab, layers, every = 2048, 151936, 48, 4
    heads, kv, hd, kh, vh, lhd, conv = 16, 2, 256, 16, 32, 128, 4
    experts, eff = 512, 512
    moe_q8 = 3 * experts * d * eff + 3 * d * eff
    router_f32 = d * experts + d  # the router and the shared expert's one-column gate
    attention = ((2 * d * heads * hd + 2 * d * kv * hd + heads * hd * d + moe_q8) * Q8 + (2 * d + 2 * hd) * BF16
                 + router_f32 * F32)
    qk, v = kh * lhd, vh * lhd
    gated = ((2 * d * qk + 2 * d * v + 2 * d * vh + v * d + moe_q8) * Q8
             + (2 * d + conv * (2 * qk + v) + 2 * vh + lhd) * BF16 + router_f32 * F32)
    n_attention = layers // every
    return {"layers": {"attention, experts": attention, "gated deltanet, experts": gated},
            "embed": vocab * d * BF16, "head": d * BF16 + d * vocab * Q8,
            "total": n_attention * attention + (layers - n_attention) * gated + vocab * d * BF16 + d * BF16
            + d * vocab * Q8}


@pytest.mark.parametrize("config, count", [(CONFIGS / "gpt-oss-20b.json", gpt_oss_20b_count),
                                           (CONFIGS / "llama-4-scout.json", llama_4_scout_count),
                                           (CONFIGS / "qwen3-next-80b-a3b.json", qwen3_next_count)],
                         ids=["gpt-oss-20b", "llama-4-scout", "qwen3-next-80b"])
def test_a_real_moe_models_weights_are_their_q8_0_bytes_by_an_independent_count_in_residency_and_manifest(
        config, count):
    """Expert banks and shared experts counted at 34 bytes per 32 values, routers at 4 bytes a value: were the banks
    read dense (2 bytes a value) the totals would be nearly twice these."""
    want = count()
    model = lower_streamed(authored(config), Deployment("decode", ctx=4096))
    assert sum(model.residency["weights"].values()) == want["total"]
    per_layer = {g["kind"]: g["weight_bytes_per_layer"] for g in model.residency["layers"]}
    assert per_layer == want["layers"]
    m = manifest(model)
    loads = lambda program: sum(r["bytes"] for w in program["weights"] for r in w["reads"])  # noqa: E731
    assert {k["name"]: loads(k) for k in m["kinds"]} == want["layers"]
    assert loads(m["shared"]["embed"]) == want["embed"] and loads(m["shared"]["head"]) == want["head"]


def test_gpt_oss_20b_assumed_mxfp4_moe_holds_its_expert_banks_at_17_bytes_per_32_values():
    """gpt-oss's `quantization_config` (mxfp4), lowered as llama.cpp's MXFP4_MOE file stores it (`--storage
    mxfp4_moe`): each expert bank (a stack of 32 matrices) MXFP4 — 32 four-bit values and a one-byte scale in 17
    bytes —, every other projection Q8_0, the routers F32; counted by hand from examples/configs/gpt-oss-20b.json."""
    from streamed.model.checkpoint import Storage

    d, vocab, layers, heads, kv, hd, experts, eff = 2880, 201088, 24, 64, 8, 64, 32, 2880
    q8 = d * heads * hd + 2 * d * kv * hd + heads * hd * d
    banks = 3 * experts * d * eff
    bf16 = 2 * d + (heads * hd + 2 * kv * hd + d) + heads + experts + 3 * experts * eff
    layer = q8 * Q8 + banks * 17 / 32 + bf16 * BF16 + d * experts * F32
    storage = Storage(assumed="MXFP4_MOE")
    model = lower_streamed(analyze(example_text("gpt-oss-20b"), storage), Deployment("decode", ctx=4096),
                           storage=storage)
    per_layer = {g["kind"]: g["weight_bytes_per_layer"] for g in model.residency["layers"]}
    assert per_layer == {"attention, window 128, experts": layer, "attention, experts": layer}
    total = layers * layer + vocab * d * BF16 + d * BF16 + d * vocab * Q8
    assert sum(model.residency["weights"].values()) == total
    assert round(total / 1e9, 1) == 12.6  # against 22.8 GB with the banks Q8_0
    m = manifest(model)
    assert m["checkpoint"]["assumed"] == "MXFP4_MOE"
    assert {s for row in m["layers"] for n, s in zip(row["weights"], row["storage"]) if n[:2] in ("Eg", "Eu", "Ed")} \
        == {"MXFP4"}


REAL = {"deepseek-v2": TEST_CONFIGS / "deepseek-v2-chat.json", "gpt-oss-20b": CONFIGS / "gpt-oss-20b.json",
        "llama-4-scout": CONFIGS / "llama-4-scout.json", "qwen3-next-80b": CONFIGS / "qwen3-next-80b-a3b.json",
        "deepseek-v2-lite": CONFIGS / "deepseek-v2-lite.json"}


@pytest.mark.parametrize("name", REAL)
def test_every_weight_a_real_model_stores_q8_0_is_read_as_its_planes_and_scales_at_every_layer(name):
    m = manifest(lower_streamed(authored(REAL[name]), Deployment("decode", ctx=4096)))
    kinds = {k["name"]: k for k in m["kinds"]}
    read_as = lambda w: {r["encoding"] for r in w["reads"]}  # noqa: E731
    banks = 0
    for row in m["layers"]:
        kind = kinds[row["kind"]]
        assert kind["read_dense"] == []
        for w, stored in zip(kind["weights"], row["storage"]):
            assert read_as(w) == ({"planes", "scales"} if stored == "Q8_0" else {"dense"}), (row["layer"], w["name"])
            banks += len(w["shape"]) == 3 and stored == "Q8_0"
    for program in m["shared"].values():
        assert program["read_dense"] == []
        for w in program["weights"]:
            assert read_as(w) == ({"planes", "scales"} if w["storage"] == "Q8_0" else {"dense"}), w["name"]
    assert banks > 0  # expert banks (or MLA's per-head A and B) among them, read as stored


@pytest.mark.parametrize("name", ["deepseek-v2", "gpt-oss-20b", "llama-4-scout", "qwen3-next-80b"])
def test_a_real_models_experts_op_reads_its_banks_and_shared_expert_as_planes_and_its_router_f32(name):
    model = lower_streamed(authored(REAL[name]), Deployment("decode", ctx=4096))
    for k in model.kinds:
        for op in k.program.ops:
            if op.kind == "experts":
                optional = op.attr("optional")
                products = {2, 3, 4} | {5 + i for i, a in enumerate(optional)
                                        if a in ("shared_gate_proj", "shared_up", "shared_down")}
                assert set(op.attr("q8")) == products, k.name
                assert all(k.program.tensor(op.inputs[i]).part == "planes" for i in products)
                gates = [1] + [5 + i for i, a in enumerate(optional) if a == "shared_gate"]
                assert all(k.program.tensor(op.inputs[i]).dtype == "f32" for i in gates)
            if op.kind == "latent_attention":
                assert op.attr("q8") == (4, 5)


def test_a_weight_the_checkpoint_stores_q8_0_that_is_read_dense_is_named_with_why_in_certificate_and_manifest(
        tmp_path):
    """From a GGUF: an embedding stored Q8_0 is looked up by rows, and a projection the document does not declare
    `q8` is multiplied dense — each is named, with why, in its program's certificate and the manifest; every other
    Q8_0 tensor is read as stored."""
    import ggufs
    from repo import example
    from streamed.model.gguf import read_storage

    text = re.sub(r"Let (Wo\d+) +be a q8 weight", r"Let \1 be a weight", example("small-deepseek-v2"))
    types = {"model.embed_tokens.weight": "Q8_0", **{f"model.layers.{l}.self_attn.o_proj.weight": "Q8_0" for l in range(4)}}
    path = ggufs.write(tmp_path / "m.gguf", "deepseek2", {}, ggufs.tensors_of(text, types))
    storage = read_storage(path)
    a = analyze(text, storage)
    assert not a.errors
    model = lower_streamed(a, Deployment("decode", ctx=64), storage=storage)
    m = manifest(model)
    embed = {d["of"]: d for d in m["shared"]["embed"]["read_dense"]}
    assert list(embed) == ["Emb"] and "looked up" in embed["Emb"]["why"]
    assert model.embed.certificate["read_dense"] == {"Emb": embed["Emb"]["why"]}
    why = "the document does not declare it `q8`, so its products read it dense (declare it `q8` to read it as stored)"
    by_kind = {k["name"]: {d["of"]: d["why"] for d in k["read_dense"]} for k in m["kinds"]}
    assert by_kind == {"latent attention": {"Wo0": why}, "latent attention, experts": {"Wo1": why}}
    # the other layers of the kind read their own Wo dense by the same program: its row names each one's tensor
    rows = [r for r in m["layers"] if r["kind"] == "latent attention, experts"]
    assert {r["storage"][r["weights"].index(f"Wo{r['layer']}")] for r in rows} == {"Q8_0"}
    assert m["shared"]["head"]["read_dense"] == []


def test_a_bundle_read_back_keeps_its_read_dense_and_one_that_hides_a_dense_read_is_refused(tmp_path):
    """The reader derives the manifest from the programs again: a program's read_dense is its own (the lowering's),
    so the reader holds it to the layers' storage — a weight stored Q8_0 that a program reads dense without saying
    why is refused, even when the program file, its digest and the manifest were all edited to hide it."""
    import hashlib

    from streamed.spatial.bundle import BundleError, read_bundle, write_bundle
    from streamed.spatial.synth import two_kind_document

    # 4 heads of 16 over 4 chips: each chip's rows of Wo are half a Q8_0 block, so the chips read Wo dense
    model = lower_streamed(analyze(two_kind_document(4, heads=4, kv=4, hd=16)), Deployment("tp", ctx=64, tp=4))
    write_bundle(model, tmp_path / "b")
    again = read_bundle(tmp_path / "b")
    assert [d["of"] for d in again.kinds[0].tp["read_dense"]] == ["Wo0"]

    program = tmp_path / "b" / "programs" / "layer-0.json"
    p = json.loads(program.read_text())
    del p["certificate"]["read_dense"]
    text = json.dumps(p, separators=(",", ":"))
    program.write_text(text)
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    m["digests"]["programs/layer-0.json"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    m["kinds"][0]["read_dense"] = m["kinds"][0]["tp"]["read_dense"] = []
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BundleError, match="kind `attention, window 8` reads `Wo0` dense though it is stored Q8_0, and "
                                          "its read_dense does not say why"):
        read_bundle(tmp_path / "b")
