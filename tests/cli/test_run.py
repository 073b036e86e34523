"""`streamed run` as someone holding streamed against their own runtime uses it: the logits of every position, the
same whether the tokens go in one step or one at a time, the same from a lowered bundle as from the document, and
bad input named."""

import json

import numpy as np
import pytest

from repo import EXAMPLES

TINY = str(EXAMPLES / "tiny-llama.lgm")
GEMMA = str(EXAMPLES / "small-gemma3.lgm")


def logits(run, *argv):
    code, out, err = run("run", *argv, "--json")
    assert code == 0, err
    got = json.loads(out)
    return got["positions"], np.asarray(got["logits"]), got["next"]


def test_run_prints_every_position_s_logits_and_greedy_next_token(run):
    positions, rows, nxt = logits(run, TINY, "--tokens", "5,17,3,200")
    assert positions == [0, 1, 2, 3]
    assert rows.shape == (4, 256) and np.isfinite(rows).all()
    assert nxt == [int(i) for i in rows.argmax(axis=1)]


@pytest.mark.parametrize("doc", [TINY, GEMMA])
def test_one_step_or_one_token_at_a_time_give_the_same_logits(run, doc):
    _, together, _ = logits(run, doc, "--tokens", "1,2,3,4,5,6")
    _, decoded, _ = logits(run, doc, "--tokens", "1,2,3,4,5,6", "--decode")
    _, mixed, _ = logits(run, doc, "--tokens", "1,2,3,4,5,6", "--prefill", "4")
    np.testing.assert_allclose(decoded, together, rtol=1e-5, atol=1e-5 * np.abs(together).max())
    np.testing.assert_allclose(mixed, together, rtol=1e-5, atol=1e-5 * np.abs(together).max())


def test_a_seed_changes_the_weights(run):
    _, a, _ = logits(run, TINY, "--tokens", "1,2", "--seed", "1")
    _, b, _ = logits(run, TINY, "--tokens", "1,2", "--seed", "2")
    assert not np.allclose(a, b)


def test_a_decode_bundle_runs_the_tokens_the_reference_runs(run, tmp_path):
    code, _, err = run("lower", TINY, "--mode", "decode", "--ctx", "8", "-o", tmp_path / "b")
    assert code == 0, err
    # Eight tokens fill the bundle's context: both runs attend over caches of one length, so they sum alike.
    want = logits(run, TINY, "--tokens", "9,8,7,6,5,4,3,2", "--decode")
    got = logits(run, TINY, "--tokens", "9,8,7,6,5,4,3,2", "--decode", "--bundle", tmp_path / "b")
    assert got[0] == want[0] and got[2] == want[2]
    np.testing.assert_array_equal(got[1], want[1])  # the same per-op arithmetic over the same shapes: bit for bit


def test_a_prefill_bundle_gives_its_last_row_then_decodes(run, tmp_path):
    code, _, err = run("lower", TINY, "--mode", "prefill", "--ctx", "8", "--chunk", "4", "-o", tmp_path / "b")
    assert code == 0, err
    _, want, _ = logits(run, TINY, "--tokens", "9,8,7,6,5,4", "--prefill", "4")
    positions, got, _ = logits(run, TINY, "--tokens", "9,8,7,6,5,4", "--bundle", tmp_path / "b")
    assert positions == [3, 4, 5]
    np.testing.assert_allclose(got, want[3:], rtol=1e-6, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("argv,message", [
    (["--tokens", "1,x"], "--tokens 1,x: token 2 is 'x', not a token id"),
    (["--tokens", "1,-2"], "token 2 is -2; a token id is not negative"),
    (["--tokens", "1,256"], "256 is not a token of"),
    (["--tokens", "1,2", "--prefill", "3"], "--prefill 3: must be between 1 and the 2 tokens given"),
    (["--tokens", "1", "--bundle", "/nonexistent/bundle"], "/nonexistent/bundle"),
])
def test_bad_input_is_one_message_naming_what_was_typed(run, argv, message):
    code, out, err = run("run", TINY, *argv)
    assert code == 2 and out == ""
    assert err.startswith("streamed: ") and message in err and "Traceback" not in err


def test_a_decode_bundle_refuses_a_prefill(run, tmp_path):
    run("lower", TINY, "--mode", "decode", "--ctx", "8", "-o", tmp_path / "b")
    code, _, err = run("run", TINY, "--tokens", "1,2,3", "--bundle", tmp_path / "b")
    assert code == 2 and "runs one token per step; give --decode" in err


def test_a_run_that_cannot_fit_is_refused_before_it_starts_naming_the_bytes_it_needs_and_has(run, tmp_path):
    text = (EXAMPLES / "tiny-llama.lgm").read_text()
    huge = tmp_path / "huge.lgm"  # a vocabulary of 2^28 (inside the limits): 64 GiB of embedding alone
    huge.write_text(text.replace("Let vocab be 256.", f"Let vocab be {2 ** 28}."))
    code, out, err = run("run", huge, "--tokens", "1,2")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "run needs 1" in err and "of memory — weights " in err and "and has " in err
    assert "available" in err  # the budget a share of what the machine has, said as such


def test_the_memory_budget_is_what_refuses_and_a_larger_one_runs(run):
    code, _, err = run("run", TINY, "--tokens", "1,2,3", "--memory", "100K")
    assert code == 2 and "and has 100 KB (--memory 100K)" in err
    code, out, err = run("run", TINY, "--tokens", "1,2,3", "--memory", "100M", "--json")
    assert code == 0, err


def test_progress_is_not_printed_where_stderr_is_not_a_terminal(run):
    code, out, err = run("run", TINY, "--tokens", "1,2,3,4", "--decode")
    assert code == 0 and err == ""


# ---- long runs: attention's scores in the estimate, computed a block of rows at a time --------------------------


def test_a_run_the_size_of_the_issue_s_is_refused_in_one_line_before_anything_is_allocated(run):
    """Issue 30: 60,000 tokens were `_ArrayMemoryError: Unable to allocate 53.6 GiB … (4, 60000, 60000)`, a
    traceback, when the estimate said 707 MB: attention's heads × rows × context scores were in no estimate."""
    from streamed.analysis.whole import analyze
    from streamed.numerics.footprint import attention_scores

    tokens = ",".join(str(i % 256) for i in range(60_000))
    code, out, err = run("run", TINY, "--tokens", tokens, "--memory", "300M")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "run needs " in err and "and has 300 MB (--memory 300M)" in err
    # the scores it counts are one block of rows at a time: heads × block × ctx, not heads × 60,000 × 60,000
    programs = analyze((EXAMPLES / "tiny-llama.lgm").read_bytes()).programs
    scores = attention_scores(programs.layers[0], programs.constants, rows=60_000, ctx=60_000)
    assert 0 < scores <= 200 * 2**20


def test_a_long_prefill_holds_no_more_than_its_estimate_and_never_rows_times_context_scores(monkeypatch):
    """1,200 tokens in one step, with blocks of at most 2¹⁶ scores: whole, attention's scores were 4 × 1,200 × 1,200
    float32 — 23 MB an array, several at once. A block of rows at a time, everything the run allocates at its peak
    (numpy's allocations, traced) stays within what the estimate counts, and below one whole array of scores."""
    import tracemalloc

    from streamed.analysis.whole import analyze
    from streamed.numerics import kernels
    from streamed.numerics.footprint import of_run
    from streamed.numerics.run import reference_logits
    from streamed.numerics.weights import seeded

    monkeypatch.setattr(kernels, "ATTENTION_BLOCK_VALUES", 1 << 16)
    programs = analyze((EXAMPLES / "tiny-llama.lgm").read_bytes()).programs
    n = 1200
    estimate = of_run(programs, None, rows=n, ctx=n, positions=n)
    weights = seeded(programs, 0)
    reference_logits(programs, weights, [1, 2, 3], 3)  # numba compiles the kernels first: no buffer of the run
    tracemalloc.start()
    try:
        got = reference_logits(programs, weights, [i % 256 for i in range(n)], n)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got.logits.shape == (n, 256) and np.isfinite(got.logits).all()
    assert peak <= estimate.total, (peak, estimate)
    assert peak < 4 * n * n * 4, peak


def test_logits_that_overflow_float32_are_refused_in_one_line_and_no_numpy_warning_reaches_the_terminal(run, tmp_path):
    """Issue 30: `run --json` printed 512 `NaN` logits — not JSON — with numpy RuntimeWarnings on stderr."""
    doc = tmp_path / "inf.lgm"
    doc.write_text((EXAMPLES / "tiny-llama.lgm").read_text().replace(
        "Let logits be rmsnorm of xo3 with gf, epsilon 0.00001 times Wout.",
        "Let big be (rmsnorm of xo3 with gf, epsilon 0.00001 times Wout) scaled by 1e30.\n"
        "Let logits be big scaled by 1e30."))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning raised is a failure here, as it was a line on the user's terminal
        for json_flag in ([], ["--json"]):
            code, out, err = run("run", doc, "--tokens", "1,2,3", *json_flag)
            assert code == 1 and out == "" and err.count("\n") == 1, err
            assert "the logits at position 0 are not finite (256 infinite of 256)" in err and "Warning" not in err


def test_tiny_llama_computes_on_a_gguf_what_author_writes_from_that_gguf(run, tmp_path):
    """The shipped tiny-llama.lgm binds GGUF names, so it rotates as llama.cpp's Llama does (adjacent pairs): on a
    GGUF of its shapes its logits are those of the document `streamed author` writes from that file. (Rotating halves,
    as it once did, they differed by 4e-5 of the largest logit on this file, and by 0.63 on a trained one.)"""
    from ggufs import llama_like

    gguf = llama_like(tmp_path / "tiny.gguf")  # 4 layers, d 64, 4 heads sharing 2, ffn 128, vocabulary 256
    assert run("author", gguf, "-o", tmp_path / "authored.lgm")[0] == 0
    _, ours, _ = logits(run, TINY, "--checkpoint", gguf, "--tokens", "5,17,3,200")
    _, authored, _ = logits(run, tmp_path / "authored.lgm", "--checkpoint", gguf, "--tokens", "5,17,3,200")
    assert np.abs(ours - authored).max() <= 1e-6 * np.abs(authored).max()


def test_save_writes_the_json_s_logits_bit_for_bit_to_a_numpy_file_and_prints_only_the_largest(run, tmp_path):
    """``--save F.npz``: the same positions, logits and next tokens ``--json`` prints — the float32 logits as
    computed (JSON's decimals read back to the same float32) — and on stdout a line a position, not every logit."""
    positions, rows, nxt = logits(run, TINY, "--tokens", "5,17,3,200", "--prefill", "2")
    saved = tmp_path / "logits.npz"
    code, out, err = run("run", TINY, "--tokens", "5,17,3,200", "--prefill", "2", "--save", str(saved))
    assert code == 0, err
    with np.load(saved) as z:
        assert z["logits"].dtype == np.float32 and np.array_equal(z["logits"], rows.astype(np.float32))
        assert z["positions"].tolist() == positions and z["next"].tolist() == nxt
        assert str(z["arithmetic"]) == "exact"
    lines = out.splitlines()
    assert len(lines) == 5 and lines[-1] == f"logits of 4 positions written to {saved}"
    assert all(line.startswith(f"position {p} ") and "largest logits" in line for p, line in zip(positions, lines))
    assert [p.name for p in tmp_path.iterdir()] == ["logits.npz"]  # no temporary file left beside it


def test_save_into_a_folder_that_does_not_exist_is_refused_before_the_run(run, tmp_path):
    where = tmp_path / "nowhere" / "logits.npz"
    code, out, err = run("run", TINY, "--tokens", "1,2", "--save", str(where))
    assert code == 2 and out == ""
    assert err.strip() == f"streamed: --save {where}: its folder {where.parent} does not exist"


def test_the_largest_logits_shown_are_a_full_sort_s_first_ties_by_index_nan_last():
    import numpy as np

    from streamed.cli.run import largest

    rng = np.random.default_rng(3)
    rows = [rng.standard_normal(32000).astype(np.float32),
            rng.integers(-3, 4, 500).astype(np.float32),  # many equal values: ties broken by index
            np.array([1, np.nan, 3, np.nan, 3, -0.0, 0.0], np.float32),
            np.array([np.nan, np.nan, 2, np.nan], np.float32),  # fewer numbers than asked
            np.array([-np.inf, np.inf, 5], np.float32), np.zeros(0, np.float32)]
    for row in rows:
        for k in (1, 3, 8, 40):
            assert largest(row, k).tolist() == np.argsort(-row, kind="stable")[:k].tolist(), (row[:8], k)


def test_a_run_of_the_document_itself_imports_none_of_the_lowering():
    """A reference run's process start is part of every run's time (a 1B prefill's, whole): it loads none of the
    lowering (its passes, the streamed model, the bundle writer)."""
    import subprocess
    import sys

    probe = ("import sys; from streamed.cli import main; status = main(['run', %r, '--tokens', '1,2,3']); "
             "print(status, sorted(m for m in sys.modules if m.startswith(('streamed.spatial.lower', "
             "'streamed.spatial.passes.certify', 'streamed.spatial.streamed_model', 'streamed.spatial.bundle'))))")
    p = subprocess.run([sys.executable, "-c", probe % TINY], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "0 []", p.stdout[-2000:]
