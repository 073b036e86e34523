"""Which metadata keys llama.cpp reads, per architecture — so that a GGUF is read as llama.cpp reads it.

llama.cpp's loader reads a fixed set of keys for every architecture (``llama_model_base::load_hparams`` in
``src/llama-model.cpp``) and then its architecture's own (``load_arch_hparams`` in ``src/models/<arch>.cpp``); a key
neither reads is ignored, whatever it says: a ``sliding_window`` in a ``llama`` or ``qwen2`` GGUF puts no window on
any layer. This module is that rule as data, transcribed from the llama.cpp that ``llama-cpp-python`` 0.3.36 vendors
(``ggml-org/llama.cpp@0c1e57098``), and ``tests/oracle`` holds it against that llama.cpp:

- ``COMMON``: the keys read for every architecture;
- ``READS[arch]``: the keys that architecture's ``load_arch_hparams`` reads, and ``_conditional`` the few it reads
  only in some cases (Gemma 3 reads its pattern only when its window is positive…);
- what an architecture fixes rather than reads: the sliding-window pattern it defaults to (``SWA_PATTERN``, with the
  window itself where the loader has one, ``SWA_DEFAULT``) and whether its graph renormalises the chosen experts'
  weights (``TOPK_NORMALIZED``; DeepSeek-V2 alone reads ``expert_weights_norm``);
- ``UNMODELLED``: keys llama.cpp reads whose effect the language does not express — a GGUF that sets one (to anything
  but the value, or a value the predicate accepts, that changes nothing) is refused.

``reads(arch, metadata)`` is the set the reader may consult (``model.gguf._Meta`` consults no other key);
``ignored(arch, metadata)`` the architecture's keys present in a file that llama.cpp passes over — the author says
them once, in the document's header comment. Adding an architecture is adding its rows here.
"""

from __future__ import annotations

from typing import Any, Mapping

from gguf.constants import Keys

__all__ = ["COMMON", "READS", "SWA_PATTERN", "SWA_DEFAULT", "SWA_IF_POSITIVE", "TOPK_NORMALIZED", "UNMODELLED",
           "reads", "ignored"]

_A, _L, _R, _S = Keys.Attention, Keys.LLM, Keys.Rope, Keys.SSM
_RECURRENT_LAYERS = "{arch}.attention.recurrent_layers"  # LLM_KV_ATTENTION_RECURRENT_LAYERS (not in gguf-py 0.19)
_DEEPSTACK = "{arch}.deepstack_mapping"  # LLM_KV_DEEPSTACK_MAPPING (not in gguf-py 0.19)

#: ``llama_model_base::load_hparams``: read for every architecture before its own keys (and ``vocab_size``, which the
#: vocabulary loader reads for a file without a tokenizer).
COMMON: frozenset[str] = frozenset({
    _L.CONTEXT_LENGTH, _L.EMBEDDING_LENGTH, _L.EMBEDDING_LENGTH_OUT, _A.CAUSAL, _L.POOLING_TYPE,
    "{arch}.classifier.pooling_type", _L.BLOCK_COUNT, _L.NEXTN_PREDICT_LAYERS, _L.EXPERT_COUNT,
    _L.EXPERT_USED_COUNT, _L.EXPERT_GROUP_COUNT, _L.EXPERT_GROUP_USED_COUNT, _L.FEED_FORWARD_LENGTH,
    _A.HEAD_COUNT, _A.HEAD_COUNT_KV, _R.SCALING_FINETUNED, _R.SCALING_ORIG_CTX_LEN, _R.FREQ_BASE, _R.SCALING_TYPE,
    _R.SCALING_FACTOR, "{arch}.rope.scale_linear", _R.SCALING_ATTN_FACTOR, _R.SCALING_ALPHA, _A.KEY_LENGTH,
    _A.VALUE_LENGTH, _R.DIMENSION_COUNT, _A.KEY_LENGTH_SWA, _A.VALUE_LENGTH_SWA, _R.DIMENSION_COUNT_SWA,
    "{arch}.classifier.output_labels", _L.VOCAB_SIZE,
})

_GDN = frozenset({_S.CONV_KERNEL, _S.INNER_SIZE, _S.STATE_SIZE, _S.TIME_STEP_RANK, _S.GROUP_COUNT, _RECURRENT_LAYERS,
                  _L.FULL_ATTENTION_INTERVAL})
_SWA = frozenset({_A.SLIDING_WINDOW, _A.SLIDING_WINDOW_PATTERN, _R.FREQ_BASE_SWA})

#: Per architecture (``general.architecture``), the keys its ``load_arch_hparams`` reads.
READS: dict[str, frozenset[str]] = {
    "llama": frozenset({_A.LAYERNORM_RMS_EPS}),
    "qwen2": frozenset({_A.LAYERNORM_RMS_EPS}),
    "qwen3": frozenset({_A.LAYERNORM_RMS_EPS}),
    "qwen2moe": frozenset({_A.LAYERNORM_RMS_EPS, _L.EXPERT_FEED_FORWARD_LENGTH, _L.EXPERT_SHARED_FEED_FORWARD_LENGTH}),
    "qwen3moe": frozenset({_A.LAYERNORM_RMS_EPS, _L.EXPERT_FEED_FORWARD_LENGTH}),
    "qwen3next": frozenset({_A.LAYERNORM_RMS_EPS, _L.EXPERT_FEED_FORWARD_LENGTH,
                            _L.EXPERT_SHARED_FEED_FORWARD_LENGTH}) | _GDN,
    "qwen35": frozenset({_A.LAYERNORM_RMS_EPS, _R.DIMENSION_SECTIONS}) | _GDN,
    "qwen35moe": frozenset({_A.LAYERNORM_RMS_EPS, _R.DIMENSION_SECTIONS, _L.EXPERT_FEED_FORWARD_LENGTH,
                            _L.EXPERT_SHARED_FEED_FORWARD_LENGTH}) | _GDN,
    "gemma3": frozenset({_A.LAYERNORM_RMS_EPS, _L.FINAL_LOGIT_SOFTCAPPING}) | _SWA,
    "deepseek2": frozenset({
        _A.LAYERNORM_RMS_EPS, _L.LEADING_DENSE_BLOCK_COUNT, _A.Q_LORA_RANK, _A.KV_LORA_RANK, _A.KEY_LENGTH_MLA,
        _A.VALUE_LENGTH_MLA, _L.EXPERT_FEED_FORWARD_LENGTH, _L.EXPERT_SHARED_COUNT, _L.EXPERT_WEIGHTS_SCALE,
        _L.EXPERT_WEIGHTS_NORM, _L.EXPERT_GATING_FUNC, _R.SCALING_YARN_LOG_MUL, _A.TEMPERATURE_SCALE,
        _A.TEMPERATURE_LENGTH}),
    "llama4": frozenset({_A.LAYERNORM_RMS_EPS, _L.EXPERT_FEED_FORWARD_LENGTH, _L.INTERLEAVE_MOE_LAYER_STEP}) | _SWA,
    "gpt-oss": frozenset({_A.LAYERNORM_RMS_EPS, _L.EXPERT_FEED_FORWARD_LENGTH}) | _SWA,
    "gemma2": frozenset({_A.LAYERNORM_RMS_EPS, _L.ATTN_LOGIT_SOFTCAPPING, _L.FINAL_LOGIT_SOFTCAPPING}) | _SWA,
    "phi3": frozenset({_A.LAYERNORM_RMS_EPS, _A.SLIDING_WINDOW}),  # a window it reads, warns of, and disables
    "starcoder2": frozenset({_A.LAYERNORM_EPS}),
    # The window only Olmo 3's converted files set. Its loader also reads `rope.freq_base_swa`, but olmo2.cpp's graph
    # rotates every layer at the global base: a key that changes nothing, said as ignored.
    "olmo2": frozenset({_A.LAYERNORM_RMS_EPS, _A.SLIDING_WINDOW, _A.SLIDING_WINDOW_PATTERN}),
    "internlm2": frozenset({_A.LAYERNORM_RMS_EPS}),
    # Granite's four multipliers (each 0 when absent: then none applies, but the logit scale, which it requires);
    # Granite Vision's deepstack mapping; Granite-MoE-shared's width.
    "granite": frozenset({_A.LAYERNORM_RMS_EPS, _L.LOGIT_SCALE, _L.RESIDUAL_SCALE, _L.EMBEDDING_SCALE, _A.SCALE,
                          _DEEPSTACK, _L.EXPERT_SHARED_FEED_FORWARD_LENGTH}),
    "mistral3": frozenset({_A.LAYERNORM_RMS_EPS, _A.TEMPERATURE_SCALE, _R.SCALING_YARN_BETA_FAST,
                           _R.SCALING_YARN_BETA_SLOW, _R.SCALING_YARN_LOG_MUL}),
    # Its loader also reads `rope.freq_base_swa`, but cohere2.cpp rotates its sliding layers at the global base: a key
    # that changes nothing, said as ignored.
    "cohere2": frozenset({_A.SLIDING_WINDOW, _A.SLIDING_WINDOW_PATTERN, _L.LOGIT_SCALE, _A.LAYERNORM_EPS}),
    # Per-layer head counts, key/value head counts and feed-forward widths are the common keys, read as arrays.
    "deci": frozenset({_A.LAYERNORM_RMS_EPS}),
}

#: The sliding-window pattern an architecture's layers follow when the file states none (``load_swa_pattern(ml, N)``:
#: of every N layers the last attends globally); an architecture not listed has no windowed layer at all.
SWA_PATTERN: dict[str, int] = {"gemma3": 6, "llama4": 4, "gpt-oss": 2, "gemma2": 2, "olmo2": 4, "cohere2": 4}
#: The window an architecture's windowed layers have when the file states none (``hparams.n_swa``'s default there).
SWA_DEFAULT: dict[str, int] = {"gemma2": 4096}
#: The architectures whose layers slide only when the file's window is positive (``found_swa && n_swa > 0``): they
#: read the pattern and the local base only then.
SWA_IF_POSITIVE = ("gemma3", "olmo2")

#: Whether the architecture's graph divides the chosen experts' weights by their sum (``build_moe_ffn``'s ``norm_w``,
#: written into each ``src/models/<arch>.cpp``). ``None``: read from ``expert_weights_norm`` (false when absent).
#: gpt-oss softmaxes the chosen logits among themselves (``SOFTMAX_WEIGHT``): the same weights as normalizing.
TOPK_NORMALIZED: dict[str, bool | None] = {
    "llama": True, "qwen2moe": False, "qwen3moe": True, "qwen3next": True, "qwen35moe": True, "llama4": False,
    "gpt-oss": True, "deepseek2": None,
}

#: Keys llama.cpp reads whose effect the language does not express: a file that sets one (to anything but the value
#: that changes nothing) is refused, naming it, rather than read as a different model.
UNMODELLED: dict[str, tuple[Any, str]] = {
    _A.TEMPERATURE_SCALE: (0.0, "tunes the queries' temperature by position"),
    _DEEPSTACK: (lambda v: isinstance(v, list) and all(isinstance(x, int) and x < 0 for x in v),
                 "adds vision projections to layers (Granite Vision's deepstack)"),
}


def _conditional(arch: str, meta: Mapping[str, Any]) -> frozenset[str]:
    """The keys of ``READS[arch]`` llama.cpp reads only in some cases, left out where it does not: Gemma 3 and OLMo 2
    read their pattern and local base only when their window is positive; Llama 4 neither when its window is 0 (then no layer is
    chunked); DeepSeek-V2 no query rank for its lite models (26 or 27 layers, or 48 over a vocabulary of 128256)."""
    def key(k: str) -> str:
        return k.format(arch=arch)

    window = meta.get(key(_A.SLIDING_WINDOW))
    if arch in SWA_IF_POSITIVE and not (isinstance(window, int) and window > 0):
        return frozenset({_A.SLIDING_WINDOW_PATTERN, _R.FREQ_BASE_SWA})
    if arch == "llama4" and window == 0 and key(_A.SLIDING_WINDOW) in meta:
        return frozenset({_A.SLIDING_WINDOW_PATTERN, _R.FREQ_BASE_SWA})
    if arch == "deepseek2":
        layers, vocab = meta.get(key(_L.BLOCK_COUNT)), meta.get(key(_L.VOCAB_SIZE))
        if layers in (26, 27) or (layers == 48 and vocab == 128256):
            return frozenset({_A.Q_LORA_RANK})
    return frozenset()


def reads(arch: str, meta: Mapping[str, Any]) -> frozenset[str]:
    """Every key (``{arch}`` filled in) llama.cpp reads from a file of ``arch`` with metadata ``meta``."""
    keys = (COMMON | READS.get(arch, frozenset())) - _conditional(arch, meta)
    return frozenset(k.format(arch=arch) for k in keys)


def ignored(arch: str, meta: Mapping[str, Any]) -> list[str]:
    """The keys of ``meta`` under the architecture's prefix (``llama.…``) that llama.cpp does not read, in order."""
    read = reads(arch, meta)
    return sorted(k for k in meta if k.startswith(f"{arch}.") and k not in read)
