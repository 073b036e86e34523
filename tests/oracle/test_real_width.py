"""A slice of the real-size benchmark (``benchmarks/bench_realsize.py``) that ``make test`` runs, so every change sees
real widths: two layers of an 8B-shaped Llama — d 4096, 32 query heads sharing 8 of 128 dims — over a 32,000-token
vocabulary (its feed-forward narrowed to 1024 to keep the file, 1.5 GB, and the run near a minute), F32, beside
llama.cpp on the same file: ``streamed run`` on the authored document, its prefill and then decode steps, and a lowered
decode bundle; and its projections Q8_0, in llama.cpp's arithmetic, bit for bit."""

from __future__ import annotations

import json

import numpy as np

import llamacpp
import oracle

SLICE = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 1024, "vocab_size": 32000,
         "rope_theta": 500000.0, "rms_norm_eps": 1e-5}
TOKENS = [int(t) for t in np.random.default_rng(7).integers(0, 32000, 8)]
PREFILL = 4
#: At these widths each product sums 4096 terms; measured 1e-6 (docs/performance.md, the real-size section).
TOLERANCE = 1e-5


def test_two_real_width_layers_compute_llama_cpp_s_logits_from_the_document_and_from_a_bundle(tmp_path, run):
    w = oracle.write(tmp_path / "slice.gguf", SLICE)
    want = llamacpp.logits(w.path, TOKENS, PREFILL)
    code, _, err = run("author", w.path, "-o", tmp_path / "slice.lgm")
    assert code == 0, err
    text = ",".join(map(str, TOKENS))
    code, out, err = run("run", tmp_path / "slice.lgm", "--checkpoint", w.path, "--tokens", text, "--prefill",
                         str(PREFILL), "--json")
    assert code == 0, err
    got = np.asarray(json.loads(out)["logits"], dtype=np.float32)
    assert got.shape == (8, 32000)
    assert oracle.relative(got, want).max() <= TOLERANCE
    code, _, err = run("lower", tmp_path / "slice.lgm", "--mode", "decode", "--ctx", "8", "--checkpoint", w.path,
                       "-o", tmp_path / "bundle")
    assert code == 0, err
    code, out, err = run("run", tmp_path / "slice.lgm", "--checkpoint", w.path, "--tokens", text, "--decode",
                         "--bundle", tmp_path / "bundle", "--json")
    assert code == 0, err
    bundle = np.asarray(json.loads(out)["logits"], dtype=np.float32)
    assert oracle.relative(bundle, want).max() <= TOLERANCE


def test_two_real_width_q8_0_layers_are_llama_cpp_s_logits_bit_for_bit_in_its_arithmetic(tmp_path, run):
    """The same slice with its projections Q8_0 (blocks drawn as blocks, ``fast``): in ``--arithmetic llama.cpp``,
    prefill then decode, every logit is llama.cpp's — at d 4096 each activation row is quantised in 128 blocks, and
    one block rounded otherwise would show."""
    w = oracle.write(tmp_path / "slice.gguf", SLICE, q8=True, fast=True)
    want = llamacpp.logits(w.path, TOKENS, PREFILL)
    code, _, err = run("author", w.path, "-o", tmp_path / "slice.lgm")
    assert code == 0, err
    argv = ["run", tmp_path / "slice.lgm", "--checkpoint", w.path, "--tokens", ",".join(map(str, TOKENS)),
            "--prefill", str(PREFILL), "--json"]
    code, out, err = run(*argv, "--arithmetic", "llama.cpp")
    assert code == 0, err
    got = np.asarray(json.loads(out)["logits"], dtype=np.float32)
    assert got.shape == (8, 32000) and np.array_equal(got, want), oracle.relative(got, want).max()
    code, out, err = run(*argv)
    assert oracle.relative(np.asarray(json.loads(out)["logits"], dtype=np.float32), want).max() > 1e-3
