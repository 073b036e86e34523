"""llama.cpp is the oracle: what `streamed author X.gguf` computes is what llama.cpp computes on the same file.

For every architecture both read, a small GGUF with seeded random weights (``oracle.write``: metadata and tensors as
llama.cpp's converter lays them out) is evaluated by llama.cpp — 16 tokens in one batch, then one decode step per
token past every sliding window — with an f32 KV cache, and by ``streamed``: the reference interpreter on the
document authored from the file, and the bundle executor on its lowered prefill and decode bundles. Each
position's logits are compared relative to the largest logit llama.cpp gives there.

Tolerances, each measured (``docs/oracle.md`` has the figures):
- F32 weights: ``F32_TOLERANCE``. Both compute in float32; llama.cpp sums in its SIMD order, ``streamed`` by its
  product's rule (blocks of 32 in float32 lanes, float64 between blocks), and llama.cpp builds its rotation angles by
  repeated float32 multiplication. Measured: at most 5e-6 over every case (Qwen3.5 with experts); 2× room.
- GELU (Gemma 2 and 3): ``GELU_TOLERANCE``. llama.cpp's CPU GELU rounds its input to fp16 and reads a 65536-entry
  fp16 table (``GGML_GELU_FP16``). Measured 2.7e-5 (Gemma 3), 1.2e-4 (Gemma 2); StarCoder2, whose GELU is not gated
  and feeds its down projection alone, ``UNGATED_GELU_TOLERANCE``: measured 3.7e-4. Each bound leaves 2× room. With
  that table emulated (each entry as ``ggml-cpu.c`` computes it: libm's ``tanhf``, one fma) all three agree within
  the F32 bound — Gemma 2 and StarCoder2 bit for bit —, which a test here shows.
- In llama.cpp's arithmetic (``--arithmetic llama.cpp``: ggml's CPU kernels, bit for bit — its products with Q8_0
  activations and fp16 ones, norms, rotation tables and turns, attention (latent too), the fused Gated DeltaNet
  recurrence, SiLU, GELU's fp16 table, the experts' routing and sum; ``test_ggml_kernels.py`` holds most of them to
  llama.cpp's own tensors, the cases here the rest through the logits) every Q8_0 checkpoint's logits are llama.cpp's,
  every bit of them, through the reference and through the bundles, and so are every F16 checkpoint's through the
  reference. That needs the document authored from a GGUF to state llama.cpp's order of arithmetic where its graph
  differs from transformers' model, and its float32 constants to the last bit: Gemma's rotated queries scaled by
  ``1.0f/sqrtf(width)`` before an attention at scale 1 and its embedding by ``sqrtf(d)``, Cohere 2's ``(ffn + x) +
  attention``, Qwen2-MoE's shared gate as ``silu(g)/g`` (each was a case left within 1e-3 until its document said
  so). A case that is not, ``Q8_LEFT`` or ``F16_LEFT`` (``Q8_LEFT_ON`` for one kernel path), would be named there with
  what its difference is made of and held to ``Q8_TOLERANCE``, 1e-3; none is.
- Without llama.cpp's arithmetic, Q8_0 cases differ by up to 0.2: the activation quantisation itself.

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
GELU_TOLERANCE = 2.5e-4
UNGATED_GELU_TOLERANCE = 7.5e-4
Q8_TOLERANCE = 1e-3
#: Q8_0 cases whose logits in llama.cpp's arithmetic are not llama.cpp's bit for bit, and why (docs/oracle.md): none.
Q8_LEFT: dict[str, str] = {}
#: Q8_0 cases left on one kernel path only, with the bound each is held to (measured on a host of that path, 2×
#: room): where a path's sums happen to round as the document's orders do, the case is bit for bit there. None is
#: left: the rotation tables (YaRN's, LongRoPE's) are ggml's scalar code, alike on every path, and the factors the
#: documents state llama.cpp's float32s; latent attention and the fused Gated DeltaNet recurrence sum on the path's
#: lanes as ggml's do, on whichever path computes.
Q8_LEFT_ON: dict[str, dict[str, tuple[str, float]]] = {"avx2": {}, "avx512": {}}
#: F16 cases not bit for bit in llama.cpp's arithmetic, and why (docs/oracle.md): none. (An fp16 rounding is 32 times
#: finer than a Q8_0 step: last bits that a Q8_0 product's quantisation absorbs reach an F16 product's activations and
#: the logits, so F16 shows orders Q8_0 hides — Qwen2-MoE's shared gate, silu(g)/g, was one.)
F16_LEFT: dict[str, str] = {}
#: Granite adds each block's output ×0.22 to an embedding ×12: llama.cpp's quantisation of the blocks' activations
#: reaches its logits at 2e-4, within the Q8_0 bound even in exact float32 (the arithmetic still holds it there).
QUANTISATION_DAMPED = {"granite", "granite, biased attention and MLP"}
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
    # q, k and v stored in one attn_qkv, which llama.cpp loads for any architecture: one product, split by columns.
    "llama, q k v fused in attn_qkv": lambda: small("llama"),
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
    # Gemma 2: windowed and global layers in turn, soft-capped attention and final logits, sandwich norms.
    "gemma2": lambda: cfg("small-gemma2"),
    # Phi-3: fused qkv and gate_up; LongRoPE's long factors (the context past the original 16), its short ones (the
    # context within the original 512: llama.cpp's and ours the 28 tokens' rounded up to 256), and none. An original
    # context of 32 or 128 is past 28 tokens but not past 256, the context llama.cpp runs them at: long factors on
    # every route (the reference chose by the tokens and read the short ones, 1.73 and 1.49 away).
    "phi3": lambda: cfg("small-phi3"),
    "phi3, longrope within the original context": lambda: cfg("small-phi3", original_max_position_embeddings=512,
                                                              max_position_embeddings=2048),
    "phi3, an original context of 32": lambda: cfg("small-phi3", original_max_position_embeddings=32,
                                                   max_position_embeddings=2048),
    "phi3, an original context of 128": lambda: cfg("small-phi3", original_max_position_embeddings=128,
                                                    max_position_embeddings=2048),
    "phi3, no rope scaling": lambda: cfg("small-phi3", rope_scaling=None),
    # StarCoder2: layer norms with biases, an ungated GELU MLP, biased projections (its window, llama.cpp has not).
    "starcoder2": lambda: cfg("small-starcoder2", sliding_window=None),
    # OLMo 2: post-norms only, q/k norms over the whole projection.
    "olmo2": lambda: cfg("small-olmo2"),
    # InternLM2: the grouped wqkv, split by the converter into q, k and v.
    "internlm2": lambda: cfg("small-internlm2"),
    # Granite: the embedding, the attention logits, each block's output and the logits scaled by its multipliers.
    "granite": lambda: cfg("small-granite"),
    "granite, biased attention and MLP": lambda: cfg("small-granite", attention_bias=True, mlp_bias=True),
    # Mistral 3: the wrapper's Mistral text model, which the converter writes as architecture mistral3.
    "mistral3": lambda: cfg("small-mistral3"),
    # (an original context of 4096 puts YaRN's ramp inside the 8 rotated pairs, where its betas show)
    "mistral3, yarn rope scaling": lambda: cfg("small-mistral3", max_position_embeddings=32768, rope_theta=10000.0,
                                               rope_scaling={"rope_type": "yarn", "factor": 8.0,
                                                             "original_max_position_embeddings": 4096}),
    # Cohere 2: one LayerNorm feeding attention and the MLP side by side; window 8 and rotation on three layers of
    # four, the fourth global without rotation; scaled logits; the head tied.
    "cohere2": lambda: cfg("small-cohere2"),
    # Nemotron-NAS (deci): per-layer key/value grouping and feed-forward widths, attention replaced by one product or
    # removed, a layer with neither block; Llama 3's rope_freqs from the rope parameters' original length.
    "deci": lambda: cfg("small-nemotron-nas"),
}


def _deci_attention_only() -> dict:
    c = cfg("small-nemotron-nas")
    c["block_configs"][2]["ffn"] = {"ffn_mult": None, "no_op": True, "replace_with_linear": False}
    return c


GELU = {"gemma3", "gemma3, linear rope scaling", "gemma2"}
UNGATED_GELU = {"starcoder2"}


def tolerance(name: str) -> float:
    return UNGATED_GELU_TOLERANCE if name in UNGATED_GELU else GELU_TOLERANCE if name in GELU else F32_TOLERANCE


#: How a case's GGUF differs from what the converter writes (``oracle.write``'s ``kv`` and ``squeeze``).
WRITTEN = {
    "llama, a sliding_window key it ignores": {"kv": {"{arch}.attention.sliding_window": WINDOW // 2}},
    "qwen2, a sliding_window key it ignores": {"kv": {"{arch}.attention.sliding_window": WINDOW // 2}},
    "qwen2-moe, a shared-expert gate stored [d]": {"squeeze": ("ffn_gate_inp_shexp.weight",)},
    "llama, q k v fused in attn_qkv": {"fused": True},
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


def test_a_deci_layer_with_attention_and_no_feed_forward_block_is_where_llama_cpp_differs_and_nowhere_else(tmp_path):
    """llama.cpp's deci graph `continue`s past a layer without a feed-forward block before its attention joins the
    residual: the layer is skipped whole. The model's own code adds the attention, and so does the document (both
    routes; LANGUAGE §4). So llama.cpp's logits differ from the document's — and equal, within F32's tolerance, those
    of the same document with that one layer as llama.cpp runs it (its input returned)."""
    from dataclasses import replace

    c = _deci_attention_only()
    w = oracle.write(tmp_path / "model.gguf", c)
    tokens = tokens_for(c)
    want = llamacpp.logits(w.path, tokens, PREFILL)
    kept = oracle.ours(w.path, tokens, PREFILL, bundle=False)
    assert worst(kept.reference, want)[0] > 100 * F32_TOLERANCE
    skipped = oracle.ours(w.path, tokens, PREFILL, bundle=False, edit=lambda spec: replace(
        spec, layers=tuple(replace(l, mixer=None) if i == 2 else l for i, l in enumerate(spec.layers))))
    rel, at = worst(skipped.reference, want)
    assert rel <= F32_TOLERANCE, f"with layer 2 skipped, the document leaves llama.cpp at position {at}: {rel:.3g}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_authored_program_computes_llama_cpp_s_logits_at_every_position(tmp_path, name):
    want, ours = evaluate(tmp_path, name)
    bound = tolerance(name)
    rel, at = worst(ours.reference, want)
    assert rel <= bound, f"{name}: the reference leaves llama.cpp at position {at}: {rel:.3g} relative"
    positions = sorted(ours.bundle)
    assert positions == [PREFILL - 1, *range(PREFILL, TOKENS)]
    rel, at = worst(np.stack([ours.bundle[p] for p in positions]), want[positions])
    assert rel <= bound, f"{name}: the bundle leaves llama.cpp at position {positions[at]}: {rel:.3g} relative"


#: One case per architecture, for the metadata-key rule (``streamed.model.gguf_keys``).
ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen2moe": "qwen2-moe", "qwen3moe": "qwen3-moe",
                 "qwen3next": "qwen3next", "qwen35": "qwen35", "qwen35moe": "qwen35moe", "gemma3": "gemma3",
                 "deepseek2": "deepseek2", "llama4": "llama4", "gpt-oss": "gpt-oss", "gemma2": "gemma2", "phi3": "phi3",
                 "starcoder2": "starcoder2", "olmo2": "olmo2", "internlm2": "internlm2", "granite": "granite",
                 "mistral3": "mistral3", "cohere2": "cohere2", "deci": "deci"}
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
    ("gemma3", {"{arch}.final_logit_softcapping": 50.0}),
    ("gemma2", {"{arch}.attention.sliding_window": WINDOW // 2}),
    ("gemma2", {"{arch}.attention.sliding_window_pattern": 3}),
    ("gemma2", {"{arch}.rope.freq_base_swa": 50.0}),
    ("gemma2", {"{arch}.attn_logit_softcapping": 0.5}),
    ("gemma2", {"{arch}.final_logit_softcapping": 50.0}),
    # Olmo 3's converted files: a window on the layers its pattern slides, their rotation unscaled.
    ("olmo2", {"{arch}.attention.sliding_window": WINDOW // 2}),
    ("olmo2", {"{arch}.attention.sliding_window": WINDOW // 2, "{arch}.attention.sliding_window_pattern": 2}),
    # Granite's multipliers, each applied where it is not 0 (the logit scale divides), and its rope switch.
    ("granite", {"{arch}.attention.scale": 0.05}),
    ("granite", {"{arch}.residual_scale": 0.5}),
    ("granite", {"{arch}.embedding_scale": 3.0}),
    ("granite", {"{arch}.logit_scale": 2.0}),
    ("granite", {"{arch}.rope.scaling.finetuned": False}),
    ("cohere2", {"{arch}.attention.sliding_window": WINDOW // 2}),
    ("cohere2", {"{arch}.attention.sliding_window_pattern": 3}),
    ("cohere2", {"{arch}.logit_scale": 1.5}),
    # Mistral 3 reads YaRN's betas and its log multiplier (an attention factor of get_mscale(F)/get_mscale(F, m)).
    ("mistral3, yarn rope scaling", {"{arch}.rope.scaling.yarn_beta_fast": 8.0}),
    ("mistral3, yarn rope scaling", {"{arch}.rope.scaling.yarn_beta_slow": 4.0}),
    ("mistral3, yarn rope scaling", {"{arch}.rope.scaling.yarn_log_multiplier": 0.5}),
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
    assert rel <= tolerance(name), f"{rel:.3g} at position {at}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_q8_0_checkpoints_compute_llama_cpp_s_logits_bit_for_bit_in_its_arithmetic(tmp_path, name):
    c = CASES[name]()
    w = oracle.write(tmp_path / "model.gguf", c, q8=True, **WRITTEN.get(name, {}))
    tokens = tokens_for(c)
    want = llamacpp.logits(w.path, tokens, PREFILL)
    exact = oracle.ours(w.path, tokens, PREFILL, bundle=False).reference
    if name in QUANTISATION_DAMPED:
        assert worst(exact, want)[0] <= Q8_TOLERANCE, "the quantisation now shows: drop it from QUANTISATION_DAMPED"
    else:
        assert worst(exact, want)[0] > Q8_TOLERANCE, "llama.cpp quantises its activations; exact float32 does not"
    ours = oracle.ours(w.path, tokens, PREFILL, arithmetic="llama.cpp")
    positions = sorted(ours.bundle)
    bundle = np.stack([ours.bundle[p] for p in positions])
    on_path = Q8_LEFT_ON.get(llamacpp.built_path().isa, {})
    if name in Q8_LEFT or name in on_path:
        bound = on_path[name][1] if name in on_path else Q8_TOLERANCE
        for got, at in ((ours.reference, list(range(TOKENS))), (bundle, positions)):
            rel, i = worst(got, want[at])
            assert rel <= bound, f"{name}: {rel:.3g} at position {at[i]}"
        return
    rel, at = worst(ours.reference, want)
    assert np.array_equal(ours.reference, want), f"{name}: the reference leaves llama.cpp at position {at} ({rel:.3g})"
    assert np.array_equal(bundle, want[positions]), f"{name}: the bundle leaves llama.cpp"


#: A long prefill, then decode steps: its rows read up to three chunks of cells (``ggml.CELLS``), its windows (40
#: cells) cross a chunk's edge, and the cells a row does not read are left out of its attention (``ggml._attend``).
LONG, LONG_PREFILL, LONG_WINDOW = 150, 140, 40
LONG_CASES = {
    "llama": lambda: small("llama"),
    "gemma2, soft-capped, a window of 40": lambda: cfg("small-gemma2", sliding_window=LONG_WINDOW),
    "gpt-oss, sinks, a window of 40": lambda: {**CASES["gpt-oss"](), "sliding_window": LONG_WINDOW},
}


@pytest.mark.parametrize("name", sorted(LONG_CASES))
def test_a_prefill_of_140_rows_and_the_steps_after_it_are_llama_cpp_s_logits_bit_for_bit(tmp_path, name):
    """Attention over many cells — a causal row reading its past, a windowed row its window, with soft caps and
    sinks — is llama.cpp's to the bit in its arithmetic, through the reference and the lowered bundle (whose
    windowed caches are rings), at a prefill of 140 rows and each decode step after it."""
    c = LONG_CASES[name]()
    w = oracle.write(tmp_path / "model.gguf", c, q8=True)
    tokens = [int(t) for t in np.random.default_rng(11).integers(0, c.get("text_config", c)["vocab_size"], LONG)]
    want = llamacpp.logits(w.path, tokens, LONG_PREFILL)
    ours = oracle.ours(w.path, tokens, LONG_PREFILL, arithmetic="llama.cpp")
    rel, at = worst(ours.reference, want)
    assert np.array_equal(ours.reference, want), f"{name}: the reference leaves llama.cpp at position {at} ({rel:.3g})"
    positions = sorted(ours.bundle)
    assert positions == list(range(LONG_PREFILL - 1, LONG)), positions
    assert np.array_equal(np.stack([ours.bundle[p] for p in positions]), want[positions]), f"{name}: the bundle"


@pytest.mark.parametrize("name", sorted(CASES))
def test_f16_checkpoints_compute_llama_cpp_s_logits_bit_for_bit_in_its_arithmetic(tmp_path, name):
    c = CASES[name]()
    w = oracle.write(tmp_path / "model.gguf", c, f16=True, **WRITTEN.get(name, {}))
    tokens = tokens_for(c)
    want = llamacpp.logits(w.path, tokens, PREFILL)
    got = oracle.ours(w.path, tokens, PREFILL, bundle=False, arithmetic="llama.cpp").reference
    rel, at = worst(got, want)
    if name in F16_LEFT:
        assert rel <= Q8_TOLERANCE, f"{name}: {rel:.3g} at position {at}"
    else:
        assert np.array_equal(got, want), f"{name}: {rel:.3g} at position {at}"


@pytest.mark.parametrize("name", sorted(GELU | UNGATED_GELU))
def test_a_gelu_model_s_f32_differences_are_llama_cpp_s_fp16_gelu_table(tmp_path, name):
    want, plain = evaluate(tmp_path, name, bundle=False)
    emulated = oracle.ours(tmp_path / "model.gguf", tokens_for(CASES[name]()), PREFILL, bundle=False,
                           arithmetic="llama.cpp")
    assert worst(emulated.reference, want)[0] <= F32_TOLERANCE < worst(plain.reference, want)[0]


@pytest.mark.parametrize("name", ["llama", "gemma3", "deepseek2", "qwen35moe", "qwen2-moe, a shared-expert gate stored [d]",
                                  "phi3", "deci"])
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
    assert rel <= tolerance(name), f"{rel:.3g} at position {at}"


def test_streamed_run_in_llama_cpp_s_arithmetic_prints_llama_cpp_s_logits_of_a_q8_0_checkpoint(tmp_path, run):
    c = CASES["qwen2"]()
    w = oracle.write(tmp_path / "model.gguf", c, q8=True)
    tokens = tokens_for(c)
    code, _, err = run("author", w.path, "-o", tmp_path / "model.lgm")
    assert code == 0, err
    argv = ["run", tmp_path / "model.lgm", "--checkpoint", w.path, "--tokens", ",".join(map(str, tokens)),
            "--prefill", str(PREFILL), "--json"]
    want = llamacpp.logits(w.path, tokens, PREFILL)
    code, out, err = run(*argv, "--arithmetic", "llama.cpp")
    assert code == 0, err
    assert np.array_equal(np.asarray(json.loads(out)["logits"], dtype=np.float32), want)
    code, out, err = run(*argv)
    assert worst(np.asarray(json.loads(out)["logits"], dtype=np.float32), want)[0] > Q8_TOLERANCE


@pytest.mark.parametrize("original, factors", [(32, "long"), (128, "long"), (512, "short")])
def test_longrope_factors_are_chosen_by_the_context_as_llama_cpp_chooses_them_on_every_route(tmp_path, run, original,
                                                                                            factors):
    """Phi-3 on 28 tokens: llama.cpp runs them at a context of 256 (28 rounded up to a multiple of 256), past an
    original context of 32 or 128 (its long factors) and within 512 (its short ones). `streamed run`, a decode bundle
    lowered at ctx 28 and `run --ctx 28` all choose as llama.cpp does, and the bundle's manifest says which."""
    c = cfg("small-phi3", original_max_position_embeddings=original, max_position_embeddings=2048)
    w = oracle.write(tmp_path / "model.gguf", c)
    tokens = tokens_for(c)
    want = llamacpp.logits(w.path, tokens, PREFILL)
    code, _, err = run("author", w.path, "-o", tmp_path / "model.lgm")
    assert code == 0, err
    text = ",".join(map(str, tokens))
    for extra in ([], ["--ctx", str(TOKENS)]):
        code, out, err = run("run", tmp_path / "model.lgm", "--checkpoint", w.path, "--tokens", text, "--prefill",
                             str(PREFILL), "--json", *extra)
        assert code == 0, err
        rel, at = worst(np.asarray(json.loads(out)["logits"], dtype=np.float32), want)
        assert rel <= F32_TOLERANCE, f"run {' '.join(extra)}: {rel:.3g} at position {at}"
    code, _, err = run("lower", tmp_path / "model.lgm", "--mode", "decode", "--ctx", str(TOKENS), "--checkpoint",
                       w.path, "-o", tmp_path / "bundle")
    assert code == 0, err
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    def lists(v):  # every table's `factors`, wherever a program's tables are listed
        if isinstance(v, dict):
            return ({v["factors"]} if "factors" in v else set()).union(*map(lists, v.values()))
        return set().union(*map(lists, v)) if isinstance(v, list) else set()

    assert lists(manifest) == {factors}, lists(manifest)
    code, out, err = run("run", tmp_path / "model.lgm", "--checkpoint", w.path, "--tokens", text, "--decode",
                         "--bundle", tmp_path / "bundle", "--json")
    assert code == 0, err
    rel, at = worst(np.asarray(json.loads(out)["logits"], dtype=np.float32), want)
    assert rel <= F32_TOLERANCE, f"the bundle: {rel:.3g} at position {at}"
