"""No table as long as the context is held on chip: a rotation reads its positions' rows of tables that live in
HBM, so Llama 3.1 8B decodes at ctx 2,097,152 (its 275 GB of KV caches in HBM and DDR); and a request that truly
cannot fit is refused naming the binding limit in units — batched 256 × 131072 for its caches, not for PMUs. Sizes
are held against arithmetic written out here from the model's published shape (32 layers, 8 KV heads of 128, a
rotation 64 pairs wide)."""

from __future__ import annotations

import pytest

from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.hf import read_config
from streamed.spatial.bundle import manifest
from streamed.spatial.deployment import Deployment
from streamed.spatial.passes.footprint import sram_footprint
from streamed.spatial.streamed_model import StreamedReject, lower_streamed
from streamed.spatial.synth import two_kind_document
from repo import CONFIGS

CTX = 2_097_152


@pytest.fixture(scope="module")
def llama():
    return analyze(author(read_config(CONFIGS / "llama-3.1-8b.json")))


@pytest.fixture(scope="module")
def long(llama):
    return lower_streamed(llama, Deployment("decode", ctx=CTX))


def test_llama_3_1_8b_decodes_at_ctx_2097152_with_its_caches_in_hbm_and_ddr(long):
    # 32 layers × 2 × 2,097,152 positions × 8 KV heads × 128 × 2 bytes = 275 GB: more than HBM, within HBM + DDR.
    kv = 32 * 2 * CTX * 8 * 128 * 2
    assert sum(long.residency["states"].values()) == kv == 274_877_906_944
    assert long.residency["states"]["ddr"] > 0 and long.residency["states"]["hbm"] > 0
    assert long.estimate["tokens_per_second"] > 0


def test_its_rotation_tables_live_in_hbm_and_a_step_stages_one_row_of_each(long):
    program = long.kinds[0].program
    tables = [t for t in program.tensors if t.role == "table"]
    assert {t.name for t in tables} == {"Rcos1", "Rsin1"} and {t.tier for t in tables} == {"hbm"}
    # Two tables of 2,097,152 positions × 64 columns × 2 bytes, once a chip — 537 MB, which SRAM (432 MB) never held.
    assert long.residency["tables"] == {"hbm": 2 * CTX * 64 * 2, "ddr": 0}
    # On chip, a decode step holds one row of each: 64 × 2 bytes.
    assert sram_footprint(program)["tables"] == 2 * 64 * 2
    assert {t["name"] for t in manifest(long)["kinds"][0]["tables"]} == {"Rcos1", "Rsin1"}


def test_the_estimate_reads_a_row_of_each_table_per_rotation_from_hbm(long):
    cost = long.estimate["programs"][long.kinds[0].name]
    program = long.kinds[0].program
    assert program.tensor("Kc0").tier == "ddr" and program.tensor("Wq0__q8").tier == "hbm"
    # From HBM: the layer's weights, and for the queries' rotation and the keys' one row (64 × 2 B) of each table.
    assert cost["bytes"]["hbm"] == cost["weight_bytes"] + 2 * 2 * 64 * 2


def test_batched_256_by_131072_is_refused_for_its_caches_naming_both_sizes(llama):
    with pytest.raises(StreamedReject) as e:
        lower_streamed(llama, Deployment("batched", ctx=131072, batch=256))
    # 256 sequences × 32 layers × 2 × 131,072 × 8 × 128 × 2 bytes = 4.40 TB; SRAM + HBM + DDR hold about 2.1 TB.
    assert 256 * 32 * 2 * 131072 * 8 * 128 * 2 == 4_398_046_511_104
    assert e.value.program == "bundle" and "PMU" not in str(e.value)
    assert e.value.why.startswith("the KV caches need 4.4 TB per chip; beside 9.02 GB of weights")
    assert "the SN50 holds 2.1 TB" in e.value.why
    assert e.value.binder in ("Kc0", "Vc0") or e.value.binder.startswith(("Kc", "Vc"))


def test_batched_256_by_131072_is_one_line_from_check_naming_the_bytes_needed_and_held(tmp_path, capsys):
    """As a new user meets it: the document authored from Llama 3.1 8B's config.json, checked for the deployment. The
    figures are the config's and the SN50's (target file: 432 MB SRAM, 64 GB HBM, 2048 GB DDR), counted here."""
    from streamed.cli import main

    doc = tmp_path / "llama.lgm"
    doc.write_text(author(read_config(CONFIGS / "llama-3.1-8b.json")))
    d, layers, heads, kv, hd, ffn, vocab, ctx, batch = 4096, 32, 32, 8, 128, 14336, 128256, 131072, 256
    need = batch * layers * 2 * ctx * kv * hd * 2  # keys and values, bf16
    weights = (layers * ((d * heads * hd + 2 * d * kv * hd + heads * hd * d + 3 * d * ffn) * 34 / 32 + 2 * d * 2)
               + vocab * d * 2 + d * 2 + d * vocab * 34 / 32)  # projections Q8_0, norms and embedding bf16
    tables = 2 * ctx * (hd // 2) * 2  # the rotation's cosines and sines, bf16, in HBM
    held = 432e6 + 64e9 + 2048e9 - weights - tables
    assert main(["check", str(doc), "--mode", "batched", "--batch", str(batch), "--ctx", str(ctx)]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert (f"error: the bundle program does not lower: the KV caches need {need / 1e12:.2g} TB per chip; beside "
            f"{weights / 1e9:.3g} GB of weights and {tables / 1e6:.3g} MB of tables the SN50 holds "
            f"{held / 1e12:.2g} TB") in line
    assert "PMU" not in line


def test_weights_that_fit_no_memory_are_refused_naming_all_of_them_against_hbm_and_ddr(tmp_path):
    small = tmp_path / "small.toml"
    small.write_text('name = "small"\npcus = 2080\npmus = 2080\nsram_mb = 432\nhbm_gb = 0.001\nddr_gb = 0.001\n'
                     'hbm_tb_s = 1.8\nddr_tb_s = 0.2\nsram_tb_s = 100\nlink_gb_s = 400\npeak_bf16_tflops = 1600\n')
    a = analyze(two_kind_document(4, d=256, ffn=1024, q8=False))
    with pytest.raises(StreamedReject) as e:
        lower_streamed(a, Deployment("decode", ctx=64), target=str(small))
    # Each layer, bf16: queries 256 × 64, keys and values 256 × 32 each, output 64 × 256, the feed-forward's three of
    # 256 × 1024, two norms of 256; four layers, the embedding (256 × 256), the head (256 × 256 and 256), and the two
    # rotation tables (64 positions × 8 × 2 B) held beside them: 6.95 MB.
    layer = (256 * (64 + 32 + 32 + 64) + 3 * 256 * 1024 + 2 * 256) * 2
    total = 4 * layer + 256 * 256 * 2 + (256 * 256 + 256) * 2 + 2 * 64 * 8 * 2
    assert e.value.why.startswith(f"the weights need {total / 1e6:.3g} MB per chip; the SMALL's HBM and DDR hold 2 MB")


def test_a_table_another_op_reads_whole_stays_in_sram():
    text = two_kind_document(4)
    text = text.replace("Let h0 be x plus a0 times Wo0.",
                        "Let rc0 be softmax of Rcos1.\nLet h0 be x plus a0 times Wo0.")
    a = analyze(text)
    assert not a.errors, a.errors[0].message
    model = lower_streamed(a, Deployment("decode", ctx=64))
    zero = model.kind(next(k.name for k in a.kinds if 0 in k.layers)).program
    assert zero.tensor("Rcos1").tier == "sram" and zero.tensor("Rsin1").tier == "hbm"
    assert sram_footprint(zero)["tables"] == 64 * 8 * 2 + 8 * 2  # the whole cosines; one row of the sines
