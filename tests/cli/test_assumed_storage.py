"""A document lowered with no checkpoint assumes its storage, and says so: in `lower`'s output and in the manifest,
weight by weight — what llama.cpp's quantizer writes for the file type the user names (`--storage`, Q8_0 by
default): routers and shared gates kept F32 (`ffn_gate_inp`, which the quantizer never quantises), a weight whose
input features are not whole blocks of 32 kept F16 (the quantizer's fallback), every other weight the file's type."""

import json

import pytest

from streamed.cli import main
from streamed.model.hf import spec_from_config
from streamed.model.author import author

from repo import EXAMPLES, config

SMALL_DEEPSEEK = str(EXAMPLES / "small-deepseek-v2.lgm")
SMALL_QWEN35 = str(EXAMPLES / "small-qwen35.lgm")


def lowered(tmp_path, capsys, doc, *argv) -> tuple[str, dict]:
    out = tmp_path / "b"
    assert main(["lower", doc, "-o", str(out), "--no-sweep", *argv]) == 0, capsys.readouterr().err
    return capsys.readouterr().out, json.loads((out / "manifest.json").read_text())


def storage_of(manifest: dict) -> dict[str, str]:
    """Each layer's weight and the storage the manifest records for it."""
    return {n: s for row in manifest["layers"] for n, s in zip(row["weights"], row["storage"])}


def test_a_lowering_without_a_checkpoint_says_its_storage_is_assumed_in_its_output_and_manifest(tmp_path, capsys):
    out, m = lowered(tmp_path, capsys, SMALL_DEEPSEEK)
    assert m["checkpoint"]["file"] is None and m["checkpoint"]["assumed"] == "Q8_0"
    assert m["checkpoint"]["storage"].startswith("assumed: what llama.cpp's quantizer writes for a Q8_0 file")
    # 3 expert layers' routers F32; every other weight declared q8 Q8_0 (16 a layer, 13 without the experts).
    assert "  storage        assumed: what llama.cpp's quantizer writes for a Q8_0 file" in out
    assert ": 46 Q8_0; 3 F32 (Wr1, Wr2, Wr3)" in out


def test_routers_and_shared_gates_are_assumed_f32_as_the_quantizer_keeps_ffn_gate_inp(tmp_path, capsys):
    _, m = lowered(tmp_path, capsys, SMALL_QWEN35)
    stored = storage_of(m)
    for l in range(8):
        assert stored[f"Wr{l}"] == "F32" and stored[f"Wsg{l}"] == "F32"
        assert stored[f"Eg{l}"] == stored[f"Wgs{l}"] == "Q8_0"
    # ... and read dense, as stored: no program reads a router as Q8_0 planes.
    kind = m["kinds"][0]
    reads = {w["name"]: {r["encoding"] for r in w["reads"]} for w in kind["weights"]}
    assert reads["Wr0"] == {"dense"} and reads["Eg0"] == {"planes", "scales"}


DEPLOYMENTS = [["--mode", "forward", "--ctx", "20"], ["--mode", "decode", "--ctx", "20"],
               ["--mode", "prefill", "--ctx", "20", "--chunk", "4"], ["--mode", "batched", "--ctx", "20", "--batch", "3"],
               ["--mode", "tp", "--ctx", "20", "--tp", "2"], ["--mode", "tp", "--ctx", "20", "--tp", "4"],
               ["--mode", "batched-tp", "--ctx", "20", "--batch", "2", "--tp", "2"],
               ["--mode", "batched-tp", "--ctx", "20", "--batch", "2", "--tp", "4"]]


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda a: "-".join(a[1::2]))
def test_a_deepseek_v2_whose_absorbed_keys_are_16_wide_lowers_with_them_f16_in_every_deployment(
        tmp_path, capsys, deployment):
    # qk_nope_head_dim 16: Wkb's input features are 16, not whole blocks of 32 — llama.cpp's quantizer writes
    # attn_k_b F16 (tensor_type_fallback), and so is it assumed; it was refused before.
    doc = tmp_path / "ds16.lgm"
    doc.write_text(author(spec_from_config({**config("small-deepseek-v2"), "qk_nope_head_dim": 16})))
    out, m = lowered(tmp_path, capsys, str(doc), *deployment)
    stored = storage_of(m)
    assert [stored[f"Wkb{l}"] for l in range(4)] == ["F16"] * 4
    assert [stored[f"Wvb{l}"] for l in range(4)] == ["Q8_0"] * 4
    assert "4 F16 (Wkb0, Wkb1, Wkb2, …)" in out


def test_storage_f16_assumes_every_quantisable_weight_f16_and_folds_none(tmp_path, capsys):
    out, m = lowered(tmp_path, capsys, SMALL_DEEPSEEK, "--storage", "f16")
    assert m["checkpoint"]["assumed"] == "F16"
    assert set(storage_of(m).values()) == {"F16", "F32", "dense"}
    assert ": 46 F16; 3 F32 (Wr1, Wr2, Wr3)" in out
    for k in m["kinds"]:
        assert all(r["encoding"] == "dense" for w in k["weights"] for r in w["reads"])


def test_storage_beside_a_checkpoint_is_bad_input_naming_both(tmp_path, capsys):
    assert main(["lower", SMALL_DEEPSEEK, "-o", str(tmp_path / "b"), "--storage", "bf16",
                 "--checkpoint", str(tmp_path / "model.gguf")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("streamed: --storage bf16 names what to assume without a checkpoint, but --checkpoint ")
    assert not (tmp_path / "b").exists()
