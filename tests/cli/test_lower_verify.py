"""`streamed lower` and `streamed verify` as a demanding user runs them: bad sizes are bad input (exit 2) naming the
option, a document with errors shows them where `check` would (exit 1), nothing half-written stays behind, and the
bundle is an ordinary directory."""

import os
import stat

import pytest

from streamed.spatial import bundle as bundle_module
from streamed.cli import main
from streamed.spatial.synth import two_kind_document

from repo import EXAMPLES

TINY = str(EXAMPLES / "tiny-llama.lgm")


@pytest.mark.parametrize("command", ["lower", "verify"])
@pytest.mark.parametrize("argv,message", [
    (["--ctx", "0"], "--ctx 0: must be at least 1"),
    (["--ctx", "-5"], "--ctx -5: must be at least 1"),
    (["--mode", "batched", "--batch", "0"], "--batch 0: must be at least 1"),
    (["--mode", "tp", "--tp", "0"], "--tp 0: must be at least 1"),
    (["--ctx", "100000000000"], "--ctx 100000000000: is past the limit of 16,777,216"),
    (["--mode", "batched", "--batch", "1000000"], "--batch 1000000: is past the limit of 65,536"),
    (["--mode", "prefill", "--ctx", "16", "--chunk", "32"], "--chunk 32 is longer than --ctx 16"),
    (["--mode", "decode", "--tp", "4"], "--tp 4: --mode decode does not read it"),
    (["--mode", "forward", "--chunk", "8"], "--chunk 8: --mode forward does not read it"),
    (["--mode", "decode", "--ctx", "16", "--chunk", "32"], "--chunk 32 is longer than --ctx 16"),
])
def test_a_size_no_deployment_can_have_is_bad_input_naming_the_option(tmp_path, capsys, command, argv, message):
    out = ["-o", str(tmp_path / "b")] if command == "lower" else []
    assert main([command, TINY, *out, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("streamed: ") and message in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_decode_that_continues_a_prefill_takes_its_chunk_and_holds_the_prefill_s_rings(tmp_path, capsys):
    import json

    doc = tmp_path / "w.lgm"
    doc.write_text(two_kind_document(4, window=8))
    shapes = {}
    for mode, extra in (("prefill", ["--chunk", "4"]), ("decode", ["--chunk", "4"]), ("decode", [])):
        out = tmp_path / f"{mode}{len(extra)}"
        assert main(["lower", str(doc), "--mode", mode, "--ctx", "64", *extra, "-o", str(out)]) == 0
        m = json.loads((out / "manifest.json").read_text())
        state = m["kinds"][0]["states"][0]
        shapes[(mode, len(extra))] = (m["chunk"], state["shape"], state["ring"])
    # Window 8: a step of 4 rows needs 8 + 4 − 1 positions; a decode on its own, its 8.
    assert shapes == {("prefill", 2): (4, [11, 32], True), ("decode", 2): (4, [11, 32], True),
                      ("decode", 0): (None, [8, 32], True)}


def test_a_model_that_refuses_a_valid_deployment_is_exit_1_in_lower_and_verify(tmp_path, capsys):
    assert main(["lower", TINY, "--mode", "tp", "--tp", "3", "-o", str(tmp_path / "b")]) == 1
    assert "the bundle program does not lower: tensor parallel over 3 chips" in capsys.readouterr().err
    assert main(["verify", TINY, "--mode", "tp", "--tp", "3"]) == 1
    assert "the bundle program does not lower: tensor parallel over 3 chips" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command,done", [("lower", "lowered"), ("verify", "verified")])
def test_a_document_with_errors_shows_each_at_its_line_and_column_and_exits_1(tmp_path, capsys, command, done):
    doc = tmp_path / "m.lgm"
    text = two_kind_document(4).replace("Let hn1 be rmsnorm of h1", "Let hn1 be rmsnorm of hh1")
    doc.write_text(text)
    line = text[:text.index("Let hn1 be rmsnorm of hh1")].count("\n") + 1
    out = ["-o", str(tmp_path / "b")] if command == "lower" else []
    assert main([command, str(doc), *out]) == 1
    err = capsys.readouterr().err.splitlines()
    assert any(l.startswith(f"{doc}:{line}:") and ": error: " in l and "`hh1`" in l for l in err)
    assert err[-1] == f"streamed {command}: {doc} has 1 error, so nothing was {done}"
    assert not (tmp_path / "b").exists()


def test_an_empty_document_is_refused_with_its_one_error(tmp_path, capsys):
    doc = tmp_path / "empty.lgm"
    doc.write_text("")
    assert main(["lower", str(doc), "-o", str(tmp_path / "b")]) == 1
    assert f"{doc}:1:1: error: the document has no `# Title` first line" in capsys.readouterr().err


def test_a_bundle_is_readable_by_others_as_the_umask_allows(tmp_path, capsys):
    old = os.umask(0o022)
    try:
        assert main(["lower", TINY, "--ctx", "64", "-o", str(tmp_path / "b")]) == 0
    finally:
        os.umask(old)
    for path in (tmp_path / "b", tmp_path / "b" / "programs"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o755


def test_an_output_below_a_file_names_the_file(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["lower", TINY, "-o", str(tmp_path / "notes.txt" / "b")]) == 2
    assert f"{tmp_path / 'notes.txt'} is a file, not a directory" in capsys.readouterr().err


def test_a_target_that_is_a_directory_says_so(tmp_path, capsys):
    (tmp_path / "mine.toml").mkdir()
    assert main(["lower", TINY, "-o", str(tmp_path / "b"), "--target", str(tmp_path / "mine.toml")]) == 2
    assert "mine.toml: is a directory, not a target file" in capsys.readouterr().err


def test_ctrl_c_while_writing_keeps_the_old_bundle_and_leaves_no_temporary(tmp_path, capsys, monkeypatch):
    out = tmp_path / "b"
    assert main(["lower", TINY, "--ctx", "64", "-o", str(out)]) == 0
    old = (out / "manifest.json").read_bytes()
    real = bundle_module.manifest

    def interrupted(*args, **kw):
        real(*args, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(bundle_module, "manifest", interrupted)
    assert main(["lower", TINY, "--ctx", "128", "-o", str(out)]) == 130
    assert capsys.readouterr().err.endswith("streamed: interrupted\n")
    assert (out / "manifest.json").read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_ctrl_c_while_the_subcommands_load_is_a_message_not_a_traceback(capsys, monkeypatch):
    import streamed.cli.verify as verify_module

    def interrupted(sub):
        raise KeyboardInterrupt

    monkeypatch.setattr(verify_module, "add_parser", interrupted)
    assert main(["kinds", TINY]) == 130
    assert capsys.readouterr().err == "streamed: interrupted\n"


def test_verify_refuses_a_bundle_lowered_from_another_document(tmp_path, capsys):
    assert main(["lower", TINY, "--ctx", "64", "-o", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    other = str(EXAMPLES / "small-gemma3.lgm")
    assert main(["verify", other, "--bundle", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert f"is not a bundle of {other}" in err and "attention: 0-3" in err


@pytest.mark.parametrize("output", [".", "..", ""])
def test_the_current_directory_or_an_empty_path_is_never_taken_for_the_bundle(tmp_path, capsys, monkeypatch, output):
    here = tmp_path / "work"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["lower", TINY, "--ctx", "64", "-o", output]) == 2
    err = capsys.readouterr().err
    assert "is the current directory" in err or "an empty output path" in err
    assert "Traceback" not in err and sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    assert list(here.iterdir()) == []


def test_lowering_with_a_checkpoint_that_lacks_the_bound_tensors_warns_at_each_binding(tmp_path, capsys):
    import numpy as np
    from gguf import GGUFWriter

    ckpt = tmp_path / "other.gguf"
    w = GGUFWriter(str(ckpt), "llama")
    w.add_tensor("something.else", np.zeros(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert main(["lower", TINY, "--ctx", "64", "--checkpoint", str(ckpt), "-o", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    text = (EXAMPLES / "tiny-llama.lgm").read_text()
    line = text[:text.index("Let Emb be")].count("\n") + 1
    assert f"{TINY}:{line}:5: warning: `Emb` is bound to \"token_embd.weight\", which" in err
    assert "does not have" in err


def test_verify_of_a_written_bundle_refuses_a_deployment_given_beside_it(tmp_path, capsys):
    assert main(["lower", TINY, "--ctx", "64", "-o", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert main(["verify", TINY, "--bundle", str(tmp_path / "b"), "--mode", "tp"]) == 2
    assert "--mode tp: --bundle certifies the deployment the bundle was lowered for" in capsys.readouterr().err


def test_verify_that_runs_out_of_memory_says_so_and_suggests_a_smaller_context(capsys, monkeypatch):
    import streamed.numerics.verify as verify_module

    def exhausted(*args, **kw):  # what numpy raises for a forward pass's H × ctx × ctx scores at ctx 100,000
        raise MemoryError("Unable to allocate 149. GiB for an array with shape (4, 100000, 100000)")

    monkeypatch.setattr(verify_module, "run", exhausted)
    assert main(["verify", TINY, "--mode", "forward", "--ctx", "64", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "certifying forward (ctx 64) needs more memory than this machine gives" in err
    assert "149. GiB" in err and "smaller --ctx" in err and "Traceback" not in err


def test_a_tensor_parallel_summary_says_its_memory_figures_are_per_chip(tmp_path, capsys):
    doc = tmp_path / "m.lgm"
    doc.write_text(two_kind_document(4, heads=4, kv=4, q8=False))  # 16-wide head slices are not Q8_0 blocks
    assert main(["lower", str(doc), "--mode", "tp", "--tp", "4", "--ctx", "64", "-o", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "  residency      per chip of 4: states " in out and "from HBM per chip)" in out


def test_the_summary_names_weights_read_dense_with_why_and_key_value_heads_held_by_several_chips(tmp_path, capsys):
    doc = tmp_path / "m.lgm"
    doc.write_text(two_kind_document(4, heads=4, kv=2, hd=16))  # 16-row slices of Wo: half a Q8_0 block
    assert main(["lower", str(doc), "--mode", "tp", "--tp", "4", "--ctx", "64", "-o", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "  read dense     Wo0, Wo3: its 64 input features split over 4 chips as rows of 16, which cut its Q8_0 " \
           "blocks of 32\n" in out
    assert "  replicated     attention, window 8: 2 KV shares, each held by 2 chips; attention: 2 KV shares, each " \
           "held by 2 chips\n" in out


@pytest.mark.parametrize("command", ["author", "kinds", "check", "lower", "show", "verify", "run", "serve"])
def test_every_subcommand_s_help_prints_its_options_and_exits_0(capsys, command):
    # argparse formats help text with %: a literal percent sign in an option's help was a traceback (verify, run)
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: streamed {command}")
    if command in ("verify", "run"):
        assert "(default 80% of what the machine has available)" in " ".join(out.split())
