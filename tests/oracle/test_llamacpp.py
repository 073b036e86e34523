"""llama.cpp is the oracle: what `streamed author X.gguf` computes is what llama.cpp computes on the same file.

For every architecture both read, a small GGUF with seeded random weights (``oracle.write``: metadata and tensors as
llama.cpp's converter lays them out) is evaluated by llama.cpp — 16 tokens in one batch, then one decode step per
token past every sliding window — with an f32 KV cache, and by ``streamed``: the reference interpreter on the
document authored from the file, and the bundle executor on its lowered prefill and decode bundles. Each
position's logits are compared relative to the largest logit llama.cpp gives there.

Tolerances, each measured (``docs/oracle.md`` has the figures):
- F32 weights: ``F32_TOLERANCE``. Both compute in float32; llama.cpp sums in its SIMD order, ``streamed`` in
  float64 rounded once (and llama.cpp builds its rotation angles by repeated float32 multiplication). Measured: at
  most 5e-6 over every case (Qwen3.5 with experts); the bound leaves 2× room.
- GELU (Gemma 3): ``GELU_TOLERANCE``. llama.cpp's CPU GELU rounds its input to fp16 and reads a 65536-entry fp16 table
  (``GGML_GELU_FP16``). Measured 3e-5; with that table emulated in the reference the case agrees within the F32 bound,
  which a test here shows.
- Q8_0 projections: ``Q8_TOLERANCE``. llama.cpp quantises the activations to Q8_0 too (blocks of 32, an fp16 scale)
  before an int8 dot product; ``streamed`` multiplies float32 activations by the exactly dequantised weights. Measured
  up to 0.05 for dense models and 0.2 with experts (a quantised router input flips a top-k choice); with llama.cpp's
  activation quantisation emulated in the reference a dense model agrees within ``Q8_EMULATED_TOLERANCE``, which a
  test here shows.

Which metadata keys count is llama.cpp's rule per architecture (``streamed.model.gguf_keys``), held against it both
ways: every optional key an architecture does not read changes neither llama.cpp's logits nor the document, every
one it reads is read alike. ``WRITTEN`` says how a case's GGUF differs from what the converter writes (a key it does
not write, a gate stored ``[d]``).

The module imports ``llama_cpp`` (through ``llamacpp``): without it the suite fails to collect — never skips.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import llamacpp
import oracle
from repo import CONFIGS

F32_TOLERANCE = 1e-5
GELU_TOLERANCE = 1e-4
Q8_TOLERANCE = 0.25
Q8_EMULATED_TOLERANCE = F32_TOLERANCE
PREFILL = 16
WINDOW = 8  # every windowed case's window: 12 decode steps run past it
TOKENS = 28


def cfg(name: str, **fields) -> dict:
    c = json.loads((CONFIGS / f"{name}.json").read_text())
    if "text_config" in c:
        c["text_config"] = {**c["text_config"], **fields}
    else:
        c.update(fields)
    return c


def small(model_type: str, **fields) -> dict:
    return {"model_type": model_type, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96, "vocab_size": 128, **fields}


GDN = dict(hidden_size=64, head_dim=32, num_attention_heads=2, num_key_value_heads=1, linear_num_key_heads=2,
           linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32, num_hidden_layers=4,
           vocab_size=256)

#: Every architecture `streamed author X.gguf` and llama.cpp both read, each as small as shows its features.
CASES = {
    "llama": lambda: small("llama"),
    # vocab = d: the embedding is square, so only its use says which way it binds
    "llama, square embedding": lambda: small("llama", hidden_size=128, num_attention_heads=2, head_dim=64),
    # The pretraining length also at the top level: the converter reads it there (8192 when it is only in the scaling).
    "llama, llama3 rope scaling": lambda: small("llama", hidden_size=128, num_attention_heads=2, num_key_value_heads=1,
                                                head_dim=64, rope_theta=500000.0, original_max_position_embeddings=64,
                                                rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                              "high_freq_factor": 4.0,
                                                              "original_max_position_embeddings": 64}),
    # Mixtral converts to architecture `llama` with experts; llama.cpp renormalises the chosen experts' weights.
    "llama, mixtral-style experts": lambda: small("mixtral", num_local_experts=4, num_experts_per_tok=2,
                                                  intermediate_size=32),
    # A key llama.cpp does not read for the architecture (gguf_keys.READS): no layer of either is windowed.
    "llama, a sliding_window key it ignores": lambda: small("llama"),
    "qwen2, a sliding_window key it ignores": lambda: small("qwen2"),
    # The shared expert's gate stored [d], as llama.cpp's loader also takes it (not [d, 1]).
    "qwen2-moe, a shared-expert gate stored [d]": lambda: small("qwen2_moe", num_experts=4, num_experts_per_tok=2,
                                                               moe_intermediate_size=32,
                                                               shared_expert_intermediate_size=48),
    "llama, linear rope scaling": lambda: small("llama", rope_scaling={"rope_type": "linear", "factor": 4.0}),
    "qwen2": lambda: small("qwen2"),
    "qwen3": lambda: small("qwen3"),
    "qwen3, yarn rope scaling": lambda: small("qwen3", rope_scaling={"rope_type": "yarn", "factor": 8.0,
                                                                     "original_max_position_embeddings": 64}),
    "qwen2-moe": lambda: small("qwen2_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                               shared_expert_intermediate_size=48),
    "qwen3-moe": lambda: small("qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                               norm_topk_prob=True),
    "gemma3": lambda: cfg("small-gemma3", num_hidden_layers=6, sliding_window=WINDOW),
    "gemma3, linear rope scaling": lambda: cfg("small-gemma3", num_hidden_layers=6, sliding_window=WINDOW,
                                               rope_scaling={"rope_type": "linear", "factor": 8.0}),
    "deepseek2": lambda: cfg("small-deepseek-v2"),
    "deepseek2, yarn rope scaling": lambda: cfg("small-deepseek-v2", max_position_embeddings=512,
                                                rope_scaling={"type": "yarn", "factor": 8, "beta_fast": 32, "beta_slow": 1,
                                                              "mscale": 0.707, "mscale_all_dim": 0.707,
                                                              "original_max_position_embeddings": 64}),
    "qwen3next": lambda: cfg("qwen3-next-80b-a3b", **GDN, num_experts=4, num_experts_per_tok=2,
                             moe_intermediate_size=32, shared_expert_intermediate_size=32),
    "qwen35": lambda: cfg("qwen3.8", **GDN, intermediate_size=64,
                          layer_types=["linear_attention"] * 3 + ["full_attention"]),
    "qwen35moe": lambda: cfg("small-qwen35", num_hidden_layers=4, layer_types=["linear_attention"] * 3 + ["full_attention"]),
    "gpt-oss": lambda: cfg("gpt-oss-20b", hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
                           intermediate_size=32, num_hidden_layers=4, num_local_experts=4, vocab_size=256,
                           sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"] * 2),
    "llama4": lambda: cfg("llama-4-scout", hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
                          intermediate_size=32, intermediate_size_mlp=64, num_hidden_layers=4, num_local_experts=4,
                          vocab_size=256, interleave_moe_layer_step=2),
}
GELU = {"gemma3", "gemma3, linear rope scaling"}
#: How a case's GGUF differs from what the converter writes (``oracle.write``'s ``kv`` and ``squeeze``).
WRITTEN = {
    "llama, a sliding_window key it ignores": {"kv": {"{arch}.attention.sliding_window": WINDOW // 2}},
    "qwen2, a sliding_window key it ignores": {"kv": {"{arch}.attention.sliding_window": WINDOW // 2}},
    "qwen2-moe, a shared-expert gate stored [d]": {"squeeze": ("ffn_gate_inp_shexp.weight",)},
}


def tokens_for(c: dict) -> list[int]:
    vocab = c.get("text_config", c)["vocab_size"]
    return [int(t) for t in np.random.default_rng(7).integers(0, vocab, TOKENS)]


def evaluate(tmp_path, name: str, q8: bool = False, bundle: bool = True):
    c = CASES[name]()
    w = oracle.write(tmp_path / "model.gguf", c, q8=q8, **WRITTEN.get(name, {}))
    tokens = tokens_for(c)
    want = llamacpp.logits(w.path, tokens, PREFILL)
    return want, oracle.ours(w.path, tokens, PREFILL, bundle=bundle)


def worst(got: np.ndarray, want: np.ndarray) -> tuple[float, int]:
    rel = oracle.relative(got, want)
    return float(rel.max()), int(rel.argmax())


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_authored_program_computes_llama_cpp_s_logits_at_every_position(tmp_path, name):
    want, ours = evaluate(tmp_path, name)
    tolerance = GELU_TOLERANCE if name in GELU else F32_TOLERANCE
    rel, at = worst(ours.reference, want)
    assert rel <= tolerance, f"{name}: the reference leaves llama.cpp at position {at}: {rel:.3g} relative"
    positions = sorted(ours.bundle)
    assert positions == [PREFILL - 1, *range(PREFILL, TOKENS)]
    rel, at = worst(np.stack([ours.bundle[p] for p in positions]), want[positions])
    assert rel <= tolerance, f"{name}: the bundle leaves llama.cpp at position {positions[at]}: {rel:.3g} relative"


#: One case per architecture, for the metadata-key rule (``streamed.model.gguf_keys``).
ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen2moe": "qwen2-moe", "qwen3moe": "qwen3-moe",
                 "qwen3next": "qwen3next", "qwen35": "qwen35", "qwen35moe": "qwen35moe", "gemma3": "gemma3",
                 "deepseek2": "deepseek2", "llama4": "llama4", "gpt-oss": "gpt-oss"}
#: Optional keys that change a model where an architecture reads them, each set to a value that would show.
PROBES = {"{arch}.attention.sliding_window": WINDOW // 2, "{arch}.attention.sliding_window_pattern": 3,
          "{arch}.attention.scale": 0.05, "{arch}.rope.freq_base_swa": 50.0, "{arch}.expert_weights_norm": True,
          "{arch}.expert_gating_func": 2, "{arch}.expert_weights_scale": 3.0,
          "{arch}.rope.scaling.yarn_log_multiplier": 0.3}


def test_the_key_rule_covers_every_architecture_the_reader_supports():
    from streamed.model import gguf, gguf_keys

    assert set(ARCHITECTURES) == set(gguf.SUPPORTED) == set(gguf_keys.READS)


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_keys_llama_cpp_does_not_read_for_an_architecture_change_neither_its_logits_nor_the_document(tmp_path, arch):
    from streamed.model.author import author
    from streamed.model.gguf import read_gguf
    from streamed.model.gguf_keys import READS

    name = ARCHITECTURES[arch]
    c = CASES[name]()
    unread = {k: v for k, v in PROBES.items() if k not in READS[arch]}
    assert unread, arch
    plain = oracle.write(tmp_path / "plain.gguf", c, **WRITTEN.get(name, {}))
    probed = oracle.write(tmp_path / "probed.gguf", c, kv={**WRITTEN.get(name, {}).get("kv", {}), **unread},
                          squeeze=WRITTEN.get(name, {}).get("squeeze", ()))
    tokens = tokens_for(c)
    assert np.array_equal(llamacpp.logits(probed.path, tokens, PREFILL), llamacpp.logits(plain.path, tokens, PREFILL))
    text = author(read_gguf(probed.path).spec)
    said = [line for line in text.splitlines() if "llama.cpp ignores" in line]
    assert len(said) == 1 and all(k.format(arch=arch) in said[0] for k in unread), said
    assert program(text) == program(author(read_gguf(plain.path).spec))


def program(text: str) -> str:
    """A document without its comments and title: what it computes."""
    return "\n".join(line.split("--")[0].rstrip() for line in text.splitlines()[1:] if line.split("--")[0].strip())


#: (case, keys): keys an architecture does read, each set changing what it computes — and read alike by both. (Llama 4
#: with a window of 0 is left out: llama.cpp 0c1e57098 aborts on it, `GGML_ASSERT(f_attn_temp_scale != 0.0f)`; its
#: chunks of 8192 change nothing over 28 tokens, so its pattern shows through the local base.)
READ_KEYS = [
    ("gemma3", {"{arch}.attention.sliding_window": WINDOW // 2}),
    ("gemma3", {"{arch}.attention.sliding_window_pattern": 3}),
    ("gemma3", {"{arch}.rope.freq_base_swa": 50.0}),
    ("gemma3", {"{arch}.attention.sliding_window": 0}),
    ("gpt-oss", {"{arch}.attention.sliding_window_pattern": 3}),
    ("gpt-oss", {"{arch}.rope.freq_base_swa": 50.0}),
    ("llama4", {"{arch}.rope.freq_base_swa": 50.0}),
    ("llama4", {"{arch}.attention.sliding_window_pattern": 2, "{arch}.rope.freq_base_swa": 50.0}),
    ("deepseek2", {"{arch}.expert_weights_norm": True}),
    ("deepseek2", {"{arch}.expert_gating_func": 2}),
    ("deepseek2", {"{arch}.expert_weights_scale": 3.0}),
    ("deepseek2, yarn rope scaling", {"{arch}.rope.scaling.yarn_log_multiplier": 0.3}),
]


@pytest.mark.parametrize("name, kv", READ_KEYS,
                         ids=[f"{n}: " + ", ".join(f"{k[7:]} {v}" for k, v in kv.items()) for n, kv in READ_KEYS])
def test_a_key_llama_cpp_reads_for_an_architecture_is_read_as_llama_cpp_reads_it(tmp_path, name, kv):
    c = CASES[name]()
    tokens = tokens_for(c)
    plain = oracle.write(tmp_path / "plain.gguf", c)
    w = oracle.write(tmp_path / "model.gguf", c, kv=kv)
    want = llamacpp.logits(w.path, tokens, PREFILL)
    assert worst(llamacpp.logits(plain.path, tokens, PREFILL), want)[0] > 100 * F32_TOLERANCE, "the key changes nothing"
    rel, at = worst(oracle.ours(w.path, tokens, PREFILL, bundle=False).reference, want)
    assert rel <= (GELU_TOLERANCE if name in GELU else F32_TOLERANCE), f"{rel:.3g} at position {at}"


@pytest.mark.parametrize("name", ["llama", "qwen3-moe", "deepseek2", "qwen35moe", "qwen3next", "gpt-oss"])
def test_q8_0_checkpoints_agree_within_what_llama_cpp_s_activation_quantisation_explains(tmp_path, name):
    want, ours = evaluate(tmp_path, name, q8=True, bundle=False)
    rel, at = worst(ours.reference, want)
    assert rel <= Q8_TOLERANCE, f"{name}: {rel:.3g} at position {at}"


def _q8_activations(monkeypatch, weights) -> None:
    """Make the reference quantise a product's activations to Q8_0 when the weight is stored Q8_0, as llama.cpp's
    ``ggml_vec_dot_q8_0_q8_0`` does: per row, blocks of 32 along the reduction, scale ``max|x|/127`` kept as fp16,
    values rounded half away from zero."""
    import streamed.numerics.kernels as nx

    plain = nx.matmul
    stored = [weights.dense[n] for n in weights.planes]

    def matmul(x, w):
        if any(np.shares_memory(w, s) for s in stored):
            x = np.asarray(x, dtype=np.float32)
            blocks = x.reshape(*x.shape[:-1], -1, 32)
            d = np.abs(blocks).max(axis=-1, keepdims=True) / 127
            inv = np.where(d > 0, 1 / np.where(d > 0, d, 1), 0)
            q = np.trunc(blocks * inv + np.copysign(0.5, blocks))
            x = (q * d.astype(np.float16).astype(np.float32)).reshape(x.shape)
        return plain(x, w)

    monkeypatch.setattr(nx, "matmul", matmul)


def test_q8_0_differences_are_llama_cpp_s_activation_quantisation(tmp_path, monkeypatch):
    from streamed.analysis.whole import analyze
    from streamed.model.author import author
    from streamed.model.gguf import read_gguf
    from streamed.numerics.run import reference_logits
    from streamed.numerics.weights import from_gguf

    # Dense, every query head its own KV head: here the emulation accounts for every difference. (With grouped
    # heads a residual of about 5e-3 remains from the third position on — not yet explained; with experts a
    # quantised router input can flip a top-k choice.)
    c = small("llama", num_key_value_heads=4)
    w = oracle.write(tmp_path / "model.gguf", c, q8=True)
    tokens = tokens_for(c)
    want = llamacpp.logits(w.path, tokens, PREFILL)
    ck = read_gguf(w.path)
    a = analyze(author(ck.spec), ck.storage)
    weights = from_gguf(w.path, a.programs, ck.storage)
    assert weights.planes, "the projections are read as stored Q8_0"
    plain, _ = worst(reference_logits(a.programs, weights, tokens, PREFILL).logits, want)
    _q8_activations(monkeypatch, weights)
    emulated, at = worst(reference_logits(a.programs, weights, tokens, PREFILL).logits, want)
    assert emulated <= Q8_EMULATED_TOLERANCE < plain, (plain, emulated, at)


def test_gemma3_s_differences_are_llama_cpp_s_fp16_gelu_table(tmp_path, monkeypatch):
    import streamed.numerics.kernels as nx

    want, ours = evaluate(tmp_path, "gemma3", bundle=False)
    plain, _ = worst(ours.reference, want)
    exact = nx.gelu

    def gelu_fp16(x):  # ggml_vec_gelu_f32 under GGML_GELU_FP16
        x = np.asarray(x, dtype=np.float32)
        table = exact(x.astype(np.float16).astype(np.float32)).astype(np.float16).astype(np.float32)
        return np.where(x <= -10, 0, np.where(x >= 10, x, table)).astype(np.float32)

    monkeypatch.setattr(nx, "gelu", gelu_fp16)
    _, ours = evaluate(tmp_path, "gemma3", bundle=False)
    emulated, at = worst(ours.reference, want)
    assert emulated <= F32_TOLERANCE < plain, (plain, emulated, at)


@pytest.mark.parametrize("name", ["llama", "gemma3", "deepseek2", "qwen35moe", "qwen2-moe, a shared-expert gate stored [d]"])
def test_streamed_run_on_the_authored_document_prints_llama_cpp_s_logits(tmp_path, run, name):
    c = CASES[name]()
    w = oracle.write(tmp_path / "model.gguf", c, **WRITTEN.get(name, {}))
    tokens = tokens_for(c)
    code, _, err = run("author", w.path, "-o", tmp_path / "model.lgm")
    assert code == 0, err
    code, out, err = run("run", tmp_path / "model.lgm", "--checkpoint", w.path, "--tokens",
                         ",".join(map(str, tokens)), "--prefill", str(PREFILL), "--json")
    assert code == 0, err
    got = json.loads(out)
    want = llamacpp.logits(w.path, tokens, PREFILL)
    assert got["positions"] == list(range(TOKENS))
    rel, at = worst(np.asarray(got["logits"], dtype=np.float32), want)
    assert rel <= (GELU_TOLERANCE if name in GELU else F32_TOLERANCE), f"{rel:.3g} at position {at}"
