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
    "small-gemma2": {"attention, window 8": [0, 2], "attention": [1, 3]},
    "small-phi3": {"attention": [0, 1, 2, 3]},
    "small-starcoder2": {"attention, window 8": [0, 1, 2, 3]},
    "small-olmo2": {"attention": [0, 1, 2, 3]},
    "small-internlm2": {"attention": [0, 1, 2, 3]},
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
    out.update(_hostile_inputs(tmp_path))
    return out


def _hostile_inputs(tmp_path):
    """Issue 11's reproductions: each was a traceback, a hang or memory without end."""
    tiny = json.loads((CONFIGS / "tiny-llama.json").read_text())
    text = json.dumps(tiny)
    cases = {
        "nested-100000.json": (text[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}").encode(),
        "digits-5000.json": text.replace('"hidden_size": 64', '"hidden_size": ' + "9" * 5000).encode(),
        "nan.json": text.replace('"hidden_size": 64', '"hidden_size": NaN').encode(),
        "huge-float.json": text.replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": 1e400').encode(),
        "billion-layers.json": json.dumps({**tiny, "num_hidden_layers": 10**9}).encode(),
        "negative-width.json": json.dumps({**tiny, "intermediate_size": -128}).encode(),
        "enormous-rope.json": json.dumps({**tiny, "rope_theta": 10**400}).encode(),
    }
    out = {}
    for name, data in cases.items():
        out[name] = tmp_path / name
        out[name].write_bytes(data)
    out["no-heads.gguf"] = ggufs.llama_like(tmp_path / "no-heads.gguf", extra_kv={"{arch}.attention.head_count": 0})
    out["billion-blocks.gguf"] = ggufs.llama_like(tmp_path / "billion-blocks.gguf", block_count=10**9)
    return out


def test_hostile_configs_and_ggufs_are_refused_at_once_naming_what_is_wrong(run, tmp_path):
    import time

    expected = {"nested-100000.json": "nested more than 64 deep", "digits-5000.json": "4300 digits",
                "nan.json": "NaN is not JSON", "huge-float.json": "too large for a 64-bit float",
                "billion-layers.json": "`num_hidden_layers` is 1,000,000,000, past the limit of 65,536",
                "negative-width.json": "`intermediate_size` is -128; it must be at least 1",
                "enormous-rope.json": "`rope_theta` must be a positive number",
                "no-heads.gguf": "`llama.attention.head_count` is 0; it must be at least 1",
                "billion-blocks.gguf": "`llama.block_count` is 1,000,000,000, past the limit of 65,536"}
    for name, src in _hostile_inputs(tmp_path).items():
        started = time.perf_counter()
        code, _, err = run("author", src, "-o", tmp_path / "m.lgm")
        took = time.perf_counter() - started
        assert code == 2 and err.count("\n") == 1 and expected[name] in err, (name, err)
        assert took < 2.0, f"{name} took {took:.1f} s to be refused"


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


def test_an_architecture_not_read_is_one_line_exit_2_naming_every_one_that_is(run, tmp_path):
    from streamed.model.gguf import SUPPORTED as READ_GGUF
    from streamed.model.hf import SUPPORTED as READ_CONFIG

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "falcon", "hidden_size": 64, "num_hidden_layers": 2}))
    gguf = ggufs.write(tmp_path / "m.gguf", "falcon", {"{arch}.block_count": 1}, {"token_embd.weight": ((8, 4), "F32")})
    for src, names in ((config, READ_CONFIG), (gguf, READ_GGUF)):
        code, _, err = run("author", src, "-o", tmp_path / "m.lgm")
        assert code == 2 and err.count("\n") == 1 and "falcon" in err and "not supported" in err, err
        assert all(name in err for name in names), err
    for family in ("gemma2", "phi3", "starcoder2", "olmo2", "internlm2"):
        assert family in READ_CONFIG and family in READ_GGUF


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


# ---- what the author writes: one line per title and comment, the defaults it took, the file's mode ---------------


def test_a_line_break_in_the_name_or_in_the_config_never_writes_headings_into_the_document(run, tmp_path):
    """A newline in `--name` is refused; one in the config's `_name_or_path` is written as a space, so the document
    keeps its own sections; a rope scaling scheme carrying one is no scheme the language models, refused in one line
    that shows the value escaped (#28), so it never reaches the document either."""
    code, _, err = run("author", CONFIGS / "tiny-llama.json", "--name", "x\n## Layer 0\nLet q be 1.")
    assert code == 2 and "a title is one line" in err and err.count("\n") == 1
    cfg = json.loads((CONFIGS / "tiny-llama.json").read_text())
    cfg["_name_or_path"] = "org/evil\n## Layer 0\nLet q0 be 1."
    cfg["rope_scaling"] = {"rope_type": "yarn\n## Head\nReturn x.", "factor": 2.0}
    src = tmp_path / "config.json"
    src.write_text(json.dumps(cfg))
    code, out, err = run("author", src)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "`rope_scaling.rope_type`" in err and "a scheme the language does not model" in err
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64}
    src.write_text(json.dumps(cfg))
    code, out, _ = run("author", src)
    assert code == 0
    assert out.splitlines()[0] == "# evil ## Layer 0 Let q0 be 1."
    assert out.count("\n## Layer 0") == 1 and out.count("\n## Head") == 1
    doc = tmp_path / "m.lgm"
    doc.write_text(out)
    assert run("check", doc)[0] == 0


def test_a_config_missing_a_size_says_which_default_of_transformers_it_took(run, tmp_path):
    """transformers' LlamaConfig has real defaults (hidden_size 4096, 32 layers, vocabulary 32000): the config is
    read as transformers reads it, and the document and the command say which were taken."""
    cfg = json.loads((CONFIGS / "tiny-llama.json").read_text())
    del cfg["hidden_size"], cfg["vocab_size"]
    cfg["head_dim"] = 16
    src = tmp_path / "config.json"
    src.write_text(json.dumps(cfg))
    code, out, err = run("author", src)
    assert code == 0
    said = ["The config leaves out `hidden_size`: 4096 is transformers' LlamaConfig default.",
            "The config leaves out `vocab_size`: 32000 is transformers' LlamaConfig default."]
    assert all(f"-- {s}" in out for s in said) and "Let d be 4096." in out
    assert all(f"streamed author: warning: {src}: {s}" in err for s in said)
    complete = tmp_path / "complete.json"
    complete.write_text((CONFIGS / "tiny-llama.json").read_text())
    code, out, err = run("author", complete)
    assert code == 0 and "leaves out" not in out + err


def test_every_sizing_field_a_config_leaves_out_is_said_with_the_value_transformers_takes(run, tmp_path):
    """Issue 21: a config without `intermediate_size` became a model of 11008 silently (so did the head count and the
    epsilon). The values are transformers' LlamaConfig's, written out here from its `configuration_llama.py`:
    intermediate_size=11008, num_attention_heads=32, rms_norm_eps=1e-6, and num_key_value_heads None, which its
    __init__ replaces by num_attention_heads."""
    cfg = json.loads((CONFIGS / "tiny-llama.json").read_text())
    for field in ("intermediate_size", "num_attention_heads", "num_key_value_heads", "rms_norm_eps", "head_dim"):
        del cfg[field]
    src = tmp_path / "config.json"
    src.write_text(json.dumps(cfg))
    code, out, err = run("author", src)
    assert code == 0, err
    said = ["The config leaves out `rms_norm_eps`: 1e-06 is transformers' LlamaConfig default.",
            "The config leaves out `num_attention_heads`: 32 is transformers' LlamaConfig default.",
            "The config leaves out `num_key_value_heads`: 32, as transformers' LlamaConfig derives it.",
            "The config leaves out `intermediate_size`: 11008 is transformers' LlamaConfig default."]
    assert [l for l in out.splitlines() if "leaves out" in l] == [f"-- {s}" for s in said]
    assert [l for l in err.splitlines() if "leaves out" in l] == [f"streamed author: warning: {src}: {s}" for s in said]
    # …and the document is that model: 32 heads of 64 / 32 = 2, all of them holding keys, epsilon 1e-6.
    assert "Let ffn be 11008." in out and "heads 32 sharing 32." in out and "epsilon 1e-6." in out


def test_author_o_writes_a_file_as_the_umask_says_and_keeps_an_existing_file_s_mode(run, tmp_path):
    import os
    import stat

    new, kept = tmp_path / "new.lgm", tmp_path / "kept.lgm"
    kept.write_text("old\n")
    os.chmod(kept, 0o664)
    old_mask = os.umask(0o022)
    try:
        assert run("author", CONFIGS / "tiny-llama.json", "-o", new)[0] == 0
        assert run("author", CONFIGS / "tiny-llama.json", "-o", kept)[0] == 0
    finally:
        os.umask(old_mask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o644
    assert stat.S_IMODE(kept.stat().st_mode) == 0o664 and kept.read_text().startswith("# tiny-llama")


def test_author_o_naming_a_symbolic_link_writes_where_it_points_and_keeps_the_link(run, tmp_path):
    real = tmp_path / "models" / "m.lgm"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "m.lgm"
    link.symlink_to(real)
    assert run("author", CONFIGS / "tiny-llama.json", "-o", link)[0] == 0
    assert link.is_symlink() and real.read_text().startswith("# tiny-llama")
    assert sorted(p.name for p in real.parent.iterdir()) == ["m.lgm"]
