"""Tensor parallelism as deployed engines do it: when the chips outnumber the key/value heads (and those divide the
chips), each chip holds the KV head its query heads read — the manifest says which chip holds which copy, and the
residency counts every copy (checked against the config's own numbers, written out here). Only a split no sharing
makes is refused."""

import json

import pytest

from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.hf import spec_from_config
from streamed.spatial.bundle import manifest
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import StreamedReject, lower_streamed

from repo import CONFIGS, ROOT, example

TEST_CONFIGS = ROOT / "tests" / "model" / "configs"
Q8 = 34 / 32
BF16 = 2


def authored(path):
    return analyze(author(spec_from_config(json.loads(path.read_text()), name=path.stem)))


@pytest.fixture(scope="module")
def qwen3_next():
    return analyze(example("qwen3-next-80b-a3b"))


@pytest.mark.parametrize("tp", [4, 8])
def test_qwen3_next_lowers_over_more_chips_than_its_two_kv_heads_each_chip_holding_the_head_its_queries_read(
        qwen3_next, tp):
    model = lower_streamed(qwen3_next, Deployment("tp", ctx=4096, tp=tp))
    kind = next(k for k in model.kinds if k.name == "attention, experts")
    p = kind.program
    heads, kv, width = 16, 2, 256  # the config: 16 query heads sharing 2 key/value heads of 256
    half = list(range(tp // 2))
    replicas = {r["of"]: r for r in kind.tp["replicas"]}
    for name in ("Kc3", "Vc3", "Wk3", "Wv3"):
        assert replicas[name]["shares"] == [{"start": 0, "stop": width, "chips": half},
                                            {"start": width, "stop": 2 * width, "chips": [c + tp // 2 for c in half]}]
    chips = set()
    for op in p.ops:
        if op.kind == "attention":
            q, k, v = (p.tensor(n) for n in op.inputs[:3])
            first_query_head = q.slice[1] // width
            assert k.slice[1] // width == v.slice[1] // width == first_query_head // (heads // kv)
            assert op.attr("heads") == heads // tp and op.attr("groups") == 1
            chips.add(op.chip)
    assert chips == set(range(tp))
    # the manifest's states: each chip's share of each cache, by its slice of the whole
    m = manifest(model)
    states = {s["name"]: s for s in next(k for k in m["kinds"] if k["name"] == kind.name)["states"]}
    for c in range(tp):
        assert (states[f"Kc3_c{c}"]["chip"], states[f"Kc3_c{c}"]["slice"]) == (c, [1, c // (tp // 2) * width,
                                                                                     (c // (tp // 2) + 1) * width])


@pytest.mark.parametrize("tp", [4, 8])
def test_qwen3_next_carries_on_each_chip_its_copy_of_a_kv_head_and_its_share_of_the_recurrent_state(qwen3_next, tp):
    ctx = 4096
    model = lower_streamed(qwen3_next, Deployment("tp", ctx=ctx, tp=tp))
    # the config: 36 gated deltanet layers (32 value heads and 16 key heads of 128; convolution over 3 past rows of
    # q 2048, k 2048, v 4096 wide), 12 attention layers (2 key/value heads of 256, each chip one of them)
    gated = (32 // tp) * 128 * 128 * BF16 + 3 * (2048 // tp) * BF16 * 2 + 3 * (4096 // tp) * BF16
    attention = 2 * ctx * 256 * BF16
    per_layer = {g["kind"]: g["state_bytes_per_layer"] for g in model.residency["layers"]}
    assert per_layer == {"gated deltanet, experts": gated, "attention, experts": attention}
    assert sum(model.residency["states"].values()) == 36 * gated + 12 * attention


@pytest.mark.parametrize("tp", [4, 8])
def test_qwen3_next_from_its_config_over_more_chips_than_kv_heads_holds_the_weights_counted_by_hand(tp):
    """Qwen3-Next 80B authored from examples/configs/qwen3-next-80b-a3b.json, over 4 and 8 chips: every chip its
    query heads (with their output gate), its copy of one of the 2 key/value heads, its gated-delta heads, its
    columns of every expert and of the shared expert; the router, the shared expert's gate, the norms, the embedding
    and the head whole on every chip. Projections Q8_0 (34 bytes per 32 values), the router and shared gate F32 (as
    llama.cpp's quantizer keeps them), the rest bf16."""
    model = lower_streamed(authored(CONFIGS / "qwen3-next-80b-a3b.json"), Deployment("tp", ctx=4096, tp=tp))
    d, vocab, heads, hd, kh, vh, lhd, conv, experts, eff = 2048, 151936, 16, 256, 16, 32, 128, 4, 512, 512
    moe = (3 * experts * d * eff // tp + 3 * d * eff // tp) * Q8 + (d * experts + d) * 4  # router, shared gate F32
    attention = ((2 * d * heads * hd // tp + 2 * d * hd + heads * hd // tp * d) * Q8  # Wq, Wqg; one KV head; Wo
                 + (2 * d + 2 * hd) * BF16 + moe)
    qk, v = kh * lhd // tp, vh * lhd // tp
    gated = ((2 * d * qk + 2 * d * v + 2 * d * vh // tp + v * d) * Q8  # q, k; v, z; beta, decay; out
             + (2 * d + conv * (2 * qk + v) + vh // tp + vh + lhd) * BF16  # norms, conv, dt bias, A (whole), gate norm
             + moe)
    per_layer = {g["kind"]: g["weight_bytes_per_layer"] for g in model.residency["layers"]}
    assert per_layer == {"attention, experts": attention, "gated deltanet, experts": gated}
    shared = vocab * d * BF16 + d * BF16 + d * vocab * Q8
    assert sum(model.residency["weights"].values()) == 12 * attention + 36 * gated + shared


def test_gemma_3_1b_over_four_chips_gives_each_chip_its_copy_of_the_one_kv_head_counted_in_residency():
    model = lower_streamed(authored(TEST_CONFIGS / "gemma-3-1b-it.json"), Deployment("tp", ctx=512, tp=4))
    # the config: d 1152, 4 query heads sharing 1 key/value head of 256, FFN 6912, vocabulary 262144, 26 layers,
    # four norms a layer and a q and k norm per head; the head tied to the embedding (read d by vocab, Q8_0)
    d, heads, hd, ffn, vocab, layers, tp = 1152, 4, 256, 6912, 262144, 26, 4
    layer_q8 = (d * heads * hd // tp      # the chip's query heads
                + 2 * d * hd              # its copy of the key and value projections
                + heads * hd // tp * d    # its rows of the output projection
                + 3 * d * ffn // tp)      # its FFN columns (and rows of the down projection)
    layer_bf16 = 4 * d + 2 * hd
    weights = layers * (layer_q8 * Q8 + layer_bf16 * BF16) + vocab * d * BF16 + d * BF16 + d * vocab * Q8
    assert sum(model.residency["weights"].values()) == weights
    assert sum(model.residency["states"].values()) == layers * 2 * 512 * hd * BF16  # a whole KV copy per chip
    m = manifest(model)
    for k in m["kinds"]:
        rep = k["representative"]
        replicas = {r["of"]: r["shares"] for r in k["tp"]["replicas"]}
        for name in (f"Kc{rep}", f"Vc{rep}", f"Wk{rep}", f"Wv{rep}"):
            assert replicas[name] == [{"start": 0, "stop": hd, "chips": [0, 1, 2, 3]}]


def test_gemma_3_1b_over_four_chips_past_its_window_holds_on_every_chip_a_ring_copy_of_the_kv_head():
    """Rings and replicas together: at ctx 4096 each of the 22 sliding layers (window 512) carries on every chip its
    copy of the one key/value head as a ring of the window, and each of the 4 global layers its copy as long as the
    context — the manifest says both (ring, of, slice) for every chip's share."""
    model = lower_streamed(authored(TEST_CONFIGS / "gemma-3-1b-it.json"), Deployment("tp", ctx=4096, tp=4))
    hd, window, ctx, sliding, full, tp = 256, 512, 4096, 22, 4, 4  # sliding_window_pattern 6: every sixth is global
    ring, cache = 2 * window * hd * BF16, 2 * ctx * hd * BF16  # keys and values, one head
    per_layer = {g["kind"]: g["state_bytes_per_layer"] for g in model.residency["layers"]}
    assert per_layer == {"attention, window 512": ring, "attention": cache}
    assert sum(model.residency["states"].values()) == sliding * ring + full * cache == 28_311_552
    m = manifest(model)
    for k in m["kinds"]:
        rep, rows = k["representative"], (window if k["name"] == "attention, window 512" else ctx)
        want = [{"name": f"{c}c{rep}_c{chip}", "shape": [rows, hd], "dtype": "bf16", "bytes": rows * hd * BF16,
                 "chip": chip, "ring": rows == window, "of": f"{c}c{rep}", "slice": [1, 0, hd]}
                for c in "KV" for chip in range(tp)]
        assert k["states"] == want


def test_the_qwen3_5_and_3_6_27b_shape_lowers_over_eight_chips():
    """examples/configs/qwen3.8.json is the 64-layer Qwen3.5/3.6-27B shape: 24 query heads sharing 4 key/value
    heads, gated delta with 16 key and 48 value heads — over 8 chips each KV head is held by two."""
    model = lower_streamed(analyze(example("qwen3.8")), Deployment("tp", ctx=4096, tp=8))
    kind = next(k for k in model.kinds if k.name == "attention")
    shares = {r["of"]: r["shares"] for r in kind.tp["replicas"]}[f"Kc{kind.representative}"]
    assert [s["chips"] for s in shares] == [[0, 1], [2, 3], [4, 5], [6, 7]]


@pytest.mark.parametrize("config, tp", [(TEST_CONFIGS / "qwen3.5-35b-a3b.json", 4), (TEST_CONFIGS / "qwen3.5-35b-a3b.json", 8),
                                        (TEST_CONFIGS / "qwen2-7b.json", 4), (CONFIGS / "qwen3-next-80b-a3b.json", 8)],
                         ids=lambda x: getattr(x, "stem", x))
def test_real_models_with_fewer_kv_heads_than_chips_lower_in_batched_tensor_parallel_too(config, tp):
    model = lower_streamed(authored(config), Deployment("batched-tp", ctx=4096, batch=4, tp=tp))
    assert model.kinds and all(k.tp["chips"] == tp for k in model.kinds)


def test_only_a_split_no_sharing_makes_is_refused_28_query_heads_over_8_chips():
    with pytest.raises(StreamedReject) as e:
        lower_streamed(authored(TEST_CONFIGS / "qwen2-7b.json"), Deployment("tp", ctx=4096, tp=8))
    assert str(e.value) == ("the bundle program does not lower: tensor parallel over 8 chips: layer 0 (attention): "
                            "the query heads of attention (28) do not split over 8 chips")
