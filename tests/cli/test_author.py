"""`streamed author` end to end: config → document → `streamed kinds --json`, the F16-among-Q8_0 split through
`--checkpoint`, and bad input: exit status 2, one message, nothing written."""

import json

import pytest

import ggufs
from repo import CONFIGS

EXPECTED = {
    "llama-3.1-8b": {"attention": list(range(32))},
    "gemma-3-27b": {"attention, window 1024": [l for l in range(62) if l % 6 != 5], "attention": list(range(5, 62, 6))},
    "qwen3.8": {"gated deltanet": [l for l in range(64) if l % 4 != 3], "attention": list(range(3, 64, 4))},
    "qwen3-next-80b-a3b": {"gated deltanet, experts": [l for l in range(48) if l % 4 != 3],
                           "attention, experts": list(range(3, 48, 4))},
    "deepseek-v2-lite": {"latent attention": [0], "latent attention, experts": list(range(1, 27))},
    "llama-4-scout": {"attention, chunks of 8192, experts": [l for l in range(48) if l % 4 != 3],
                      "attention, experts": list(range(3, 48, 4))},
    "gpt-oss-20b": {"attention, window 128, experts": list(range(0, 24, 2)), "attention, experts": list(range(1, 24, 2))},
    "tiny-llama": {"attention": [0, 1, 2, 3]},
    "small-gemma3": {"attention, window 512": [0, 1, 2, 3, 4, 6, 7, 8, 9, 10], "attention": [5, 11]},
    "small-qwen35": {"gated deltanet, experts": [0, 1, 2, 4, 5, 6], "attention, experts": [3, 7]},
    "small-deepseek-v2": {"latent attention": [0], "latent attention, experts": [1, 2, 3]},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_authoring_an_example_config_gives_exactly_its_architecture_s_kinds(run, tmp_path, name):
    out = tmp_path / f"{name}.lgm"
    code, _, err = run("author", CONFIGS / f"{name}.json", "-o", out)
    assert code == 0, err
    code, stdout, _ = run("kinds", out, "--json")
    got = json.loads(stdout)
    assert code == 0
    assert {k["name"]: k["layers"] for k in got["kinds"]} == EXPECTED[name]
    assert got["divergences"] == []
    code, stdout, _ = run("check", out)
    assert code == 0 and "error" not in stdout


def test_author_without_output_prints_the_document(run):
    code, out, _ = run("author", CONFIGS / "tiny-llama.json")
    assert code == 0 and out.startswith("# tiny-llama\n") and "## Layer 3" in out


def test_a_checkpoint_storing_one_layer_s_weight_f16_splits_that_layer_off_naming_the_weight(run, tmp_path):
    ckpt = ggufs.llama_like(tmp_path / "m.gguf", layers=5, types={"blk.3.ffn_up.weight": "F16"})
    doc = tmp_path / "m.lgm"
    assert run("author", ckpt, "-o", doc)[0] == 0
    code, out, _ = run("kinds", doc, "--json")
    assert [k["layers"] for k in json.loads(out)["kinds"]] == [[0, 1, 2, 3, 4]]  # as declared: one kind
    code, out, _ = run("kinds", doc, "--json", "--checkpoint", ckpt)
    got = json.loads(out)
    assert code == 0
    assert [k["layers"] for k in got["kinds"]] == [[0, 1, 2, 4], [3]]
    (div,) = got["divergences"]
    assert div["layer"] == 3 and div["representative"] == 0
    assert "`Wu3` is stored F16" in div["why"] and "`Wu0` is stored Q8_0" in div["why"]
    code, out, _ = run("check", doc, "--checkpoint", ckpt)
    assert code == 0 and "layer 3 is not one program with layer 0" in out and "Wu3" in out


def test_a_checkpoint_storing_every_layer_as_declared_keeps_one_kind(run, tmp_path):
    ckpt = ggufs.llama_like(tmp_path / "m.gguf", layers=3)
    doc = tmp_path / "m.lgm"
    run("author", ckpt, "-o", doc)
    got = json.loads(run("kinds", doc, "--json", "--checkpoint", ckpt)[1])
    assert [k["layers"] for k in got["kinds"]] == [[0, 1, 2]] and got["divergences"] == []


# ---- bad input: exit 2, one message, nothing written ----------------------------------------------------------


def _bad_inputs(tmp_path):
    good = ggufs.llama_like(tmp_path / "good.gguf").read_bytes()
    cases = {
        "not-json.json": b'{"model_type": "llama", "hidden_size": 64,',
        "not-utf8.json": b"\xff\xfe\x00{",
        "wrong-types.json": json.dumps({"model_type": "llama", "hidden_size": "big", "num_hidden_layers": 2}).encode(),
        "zero-layers.json": json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 0,
                                        "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 256}).encode(),
        "unsupported.json": json.dumps({"model_type": "t5", "d_model": 64}).encode(),
        "truncated.gguf": good[: len(good) // 3],
        "garbage.gguf": b"GGUF" + b"\xff" * 64,
    }
    out = {}
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        out[name] = p
    out["mismatched.gguf"] = ggufs.llama_like(tmp_path / "mismatched.gguf", layers=3, block_count=2)
    out["zero-layers.gguf"] = ggufs.llama_like(tmp_path / "zero-layers.gguf", layers=0, block_count=0)
    return out


def test_bad_input_is_one_message_exit_2_and_nothing_written(run, tmp_path):
    for name, src in _bad_inputs(tmp_path).items():
        out = tmp_path / f"{name}.lgm"
        code, stdout, err = run("author", src, "-o", out)
        assert code == 2, (name, err)
        assert err.startswith("streamed: ") and err.count("\n") == 1, (name, err)
        assert str(src) in err, (name, err)
        assert "Traceback" not in err
        assert not out.exists(), name
        assert not list(tmp_path.glob(f".{out.name}.*")), name  # no temporary left behind


def test_a_failed_author_leaves_an_existing_output_untouched(run, tmp_path):
    out = tmp_path / "model.lgm"
    out.write_text("keep me\n")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert run("author", bad, "-o", out)[0] == 2
    assert out.read_text() == "keep me\n"


def test_a_bad_checkpoint_for_kinds_is_exit_2(run, tmp_path):
    doc = tmp_path / "m.lgm"
    run("author", CONFIGS / "tiny-llama.json", "-o", doc)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00")
    code, _, err = run("kinds", doc, "--checkpoint", bad)
    assert code == 2 and str(bad) in err


def test_a_missing_source_is_exit_2(run, tmp_path):
    code, _, err = run("author", tmp_path / "nope.json")
    assert code == 2 and "no such file" in err


def test_a_model_folder_is_read_through_its_config_json_and_named_after_the_folder(run, tmp_path):
    folder = tmp_path / "Qwen3-Next-80B-A3B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "qwen3-next-80b-a3b.json").read_text())
    out = tmp_path / "m.lgm"
    code, _, err = run("author", folder, "-o", out)
    assert code == 0
    assert out.read_text().startswith("# Qwen3-Next-80B-A3B-Instruct\n")
    assert "36 × gated deltanet, experts; 12 × attention, experts" in err
    code, _, err = run("author", tmp_path, "-o", tmp_path / "x.lgm")
    assert code == 2 and "without a config.json" in err


def test_a_document_authored_from_a_gguf_verifies_against_that_gguf(run, tmp_path):
    from streamed.model.author import author
    from streamed.model.hf import spec_from_config

    from repo import config

    spec = ggufs.as_gguf(spec_from_config(config("small-qwen35")), "small-qwen35")
    text = author(spec)
    ckpt = ggufs.write(tmp_path / "q.gguf", spec.architecture, ggufs.metadata(spec), ggufs.tensors_of(text))
    doc = tmp_path / "q.lgm"
    assert run("author", ckpt, "-o", doc)[0] == 0
    code, out, err = run("verify", doc, "--checkpoint", ckpt, "--steps", "1")
    assert code == 0, out + err
    assert "agree" in out
