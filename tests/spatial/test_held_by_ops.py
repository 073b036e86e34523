"""What an op holds while it runs is in its program's footprint: an expert's gate and up activations (routed and
shared), latent attention's absorbed products, attention's score tile, gated delta's state as it is updated, a short
convolution's window, an all-reduce's received partial sums. Each count below is written out by hand from the
document's numbers (bf16 values 2 bytes, accumulated ones f32, 4 bytes) — not from the function that computes it."""

from pathlib import Path

import pytest

import streamed.spatial

from streamed.analysis.whole import analyze
from streamed.spatial.deployment import Deployment
from streamed.spatial.passes.footprint import own_bytes, sram_footprint
from streamed.spatial.streamed_model import StreamedReject, lower_streamed
from streamed.spatial.target import parse_target

from repo import example

ROWS = 16  # a forward step of 16 rows at ctx 16
SN50 = Path(streamed.spatial.__file__).parent / "targets" / "sn50.toml"


def held(program) -> dict[str, list[int]]:
    """The certificate's bytes held by each op, by the op's kind."""
    out: dict[str, list[int]] = {}
    for entry in program.certificate["held_by_ops"]:
        assert program.ops[entry["op"]].kind == entry["kind"]
        out.setdefault(entry["kind"], []).append(entry["bytes"])
    return out


@pytest.fixture(scope="module")
def qwen35():
    return lower_streamed(analyze(example("small-qwen35")), Deployment("forward", ROWS))


@pytest.fixture(scope="module")
def deepseek():
    return lower_streamed(analyze(example("small-deepseek-v2")), Deployment("forward", ROWS))


def kind(model, name):
    return next(k.program for k in model.kinds if k.name == name)


def test_an_experts_op_holds_its_routed_and_shared_activations(qwen35):
    # small-qwen35: 8 experts of width 64, top 2, a shared expert of 64 behind a shared gate.
    router = ROWS * 8 * 2
    routed = 2 * ROWS * 2 * 64 * 2  # gate and up, for each row's two experts
    shared = 2 * ROWS * 64 * 2      # the shared expert's gate and up
    shared_gate = ROWS * 2
    assert held(kind(qwen35, "gated deltanet, experts"))["experts"] == [router + routed + shared + shared_gate]
    assert router + routed + shared + shared_gate == 12_576


def test_an_experts_op_without_a_shared_gate_holds_no_gate_value(deepseek):
    # small-deepseek-v2: 8 experts of 64, top 2, a shared expert of 64, no shared gate.
    assert held(kind(deepseek, "latent attention, experts"))["experts"] == [ROWS * 8 * 2 + 2 * ROWS * 2 * 64 * 2
                                                                           + 2 * ROWS * 64 * 2] == [12_544]


def test_latent_attention_holds_its_absorbed_queries_score_tile_and_latent_accumulator(deepseek):
    # 4 heads, rank 64, 16 keys (ctx 16): absorbed queries bf16; the score tile with each row's running maximum and
    # sum, and the latent accumulator, f32.
    absorbed = ROWS * 4 * 64 * 2
    scores = ROWS * 4 * (16 + 2) * 4
    latent = ROWS * 4 * 64 * 4
    for name in ("latent attention", "latent attention, experts"):
        assert held(kind(deepseek, name))["latent_attention"] == [absorbed + scores + latent] == [29_184]


def test_attention_holds_a_score_tile_of_at_most_128_keys_and_its_accumulator(qwen35):
    # 4 query heads over 2 key/value heads of 32 (a cache 64 wide): at ctx 16 a query row scores 16 keys.
    assert held(kind(qwen35, "attention, experts"))["attention"] == [ROWS * 4 * (16 + 2) * 4 + ROWS * 4 * 32 * 4]
    # At ctx 4096 a row reaches 4096 keys; the tile is 128 of them.
    long = lower_streamed(analyze(example("small-qwen35")), Deployment("prefill", 4096, chunk=ROWS))
    assert held(kind(long, "attention, experts"))["attention"] == [ROWS * 4 * (128 + 2) * 4 + ROWS * 4 * 32 * 4]


def test_gated_delta_holds_its_state_as_it_is_updated_and_a_convolution_its_window(qwen35):
    program = kind(qwen35, "gated deltanet, experts")
    # The state 4 heads × 32 × 32 in f32, and each row's read-out and delta (4 heads × 32 each), f32.
    assert held(program)["gated_delta"] == [4 * 32 * 32 * 4 + 2 * 4 * 32 * 4] == [17_408]
    # Three convolutions of kernel 4 over 64, 64 and 128 channels: the state's 3 rows and the step's 16, bf16.
    assert sorted(held(program)["short_convolution"]) == [(3 + ROWS) * 64 * 2, (3 + ROWS) * 64 * 2,
                                                          (3 + ROWS) * 128 * 2]


def test_an_all_reduce_holds_the_other_chips_partial_sums():
    model = lower_streamed(analyze(example("tiny-llama")), Deployment("tp", 16, tp=4))
    program = model.kinds[0].program
    d = program.tensor(program.inputs[0].name).shape[1]
    # Decode: one row of d values from each of the 3 other chips, bf16 — for each of the layer's all-reduces.
    assert set(held(program)["allreduce"]) == {3 * d * 2}


def test_the_certificate_counts_what_the_ops_hold_in_its_sram_bytes(qwen35):
    for k in qwen35.kinds:
        p = k.program
        use = sram_footprint(p)
        assert p.certificate["held_bytes"] == use["held"] == sum(e["bytes"] for e in p.certificate["held_by_ops"])
        assert p.certificate["sram_bytes"] == own_bytes(p) == use["activations"] + use["tables"] + use["held"]


def test_gpt_oss_20b_forward_at_4096_is_tiled_and_each_tile_counts_its_experts_activations():
    # Before: one tile of 4096 rows certified at 344.5 MB of the SN50's 432 MB without the experts' 189 MB.
    model = lower_streamed(analyze(example("gpt-oss-20b")), Deployment("forward", 4096))
    for k in model.kinds:
        p = k.program
        rows = p.tile_rows
        assert p.tiles and rows < 4096
        # 32 experts of width 2880, top 4: the router's scores and each row's four experts' gate and up, bf16.
        assert held(p)["experts"] == [rows * 32 * 2 + 2 * rows * 4 * 2880 * 2]
        assert p.certificate["sram_bytes"] <= 432 * 10**6
    whole = 2 * 4096 * 4 * 2880 * 2
    assert whole == 188_743_680  # what one tile of 4096 rows would hold for the routed experts alone


def test_a_program_whose_ops_hold_more_than_sram_even_in_one_row_is_refused_naming_the_bytes():
    # A chip of 64 KB. One decode row of gpt-oss-20b's layer 0 holds, inside its ops: attention's score tile,
    # 1 row × 64 heads × (128 + 2) × 4 = 33,280 bytes, and accumulator 64 × 64 × 4 = 16,384 (49,664); the experts'
    # scores 32 × 2 and four experts' gate and up 2 × 4 × 2,880 × 2 (46,144) — 95,808 bytes beside its activations.
    text = (SN50.parent / "sn50.toml").read_text().replace("sram_mb = 432", "sram_mb = 0.064")
    with pytest.raises(StreamedReject) as e:
        lower_streamed(analyze(example("gpt-oss-20b")), Deployment("decode", 4096),
                       target=parse_target(text, "small.toml"))
    assert e.value.binder == "a0"  # the attention statement: what holds the most
    assert ("95.8 KB held by its ops while they run, the most by `attention` of `a0`: 49.7 KB, of which a score "
            "tile (1 row × 64 heads × 128 keys) and its running maxima and sums 33.3 KB); the SN50 has 64 KB") in str(e.value)
