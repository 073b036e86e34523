"""The config route held against transformers' own configuration classes: for every shipped config
(``examples/configs/``) and every test config (``tests/model/configs/``), every field ``streamed author`` reads equals
what transformers resolves.

Each config is read twice. ``streamed.model.hf.spec_from_config`` gives the spec the author writes; independently of
it, ``AutoConfig.for_model(model_type, **config)`` (transformers' classes: their defaults, ``__post_init__``,
``layer_types``, ``head_dim``, the standardised ``rope_parameters``) gives the configuration, and ``expected`` below
says what transformers' modelling code builds from it — per model type (``MODELLING``, transcribed from
``modeling_<type>.py`` of the installed transformers): which layers slide and how far, which carry experts and how
they are weighted, which biases and norms there are, how each layer rotates. The two are compared field by field,
every layer; a disagreement is reported as ``layer 3 window: transformers 4096, streamed None``.

Configs transformers cannot read as published are said in ``COERCED`` with why and how they are read instead; fields
where transformers' reading is known to be wrong and ``streamed`` deliberately differs in ``KNOWN``, each asserted to
still differ (so that a fixed transformers shows up here). Adding a model type is adding its row to ``MODELLING``.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import transformers
from dataclasses import replace
from types import SimpleNamespace

from repo import CONFIGS, ROOT, without_refused
from streamed.model.hf import SUPPORTED, spec_from_config
from streamed.model.spec import Attention, Experts, GatedDeltaNet, LatentAttention, Linear, ModelSpec

transformers.logging.set_verbosity_error()

FILES = sorted([*CONFIGS.glob("*.json"), *(ROOT / "tests" / "model" / "configs").glob("*.json")])

#: Published configs with fields changed (in the text config when there is one) where a model type's rule shows only
#: when set: each name says what it exercises.
VARIANTS = {
    "qwen2.5-7b-instruct, use_sliding_window from layer 4": ("qwen2.5-7b-instruct.json",
                                                             {"use_sliding_window": True, "max_window_layers": 4}),
    "qwen1.5-moe-a2.7b, use_sliding_window below layer 10": ("qwen1.5-moe-a2.7b.json",
                                                             {"use_sliding_window": True, "max_window_layers": 10,
                                                              "sliding_window": 4096}),
    "qwen1.5-moe-a2.7b, mlp_only_layers and sparse step 2": ("qwen1.5-moe-a2.7b.json",
                                                             {"mlp_only_layers": [0, 5], "decoder_sparse_step": 2}),
    "qwen3-8b, use_sliding_window from layer 30": ("qwen3-8b.json",
                                                   {"use_sliding_window": True, "max_window_layers": 30}),
    "qwen3-30b-a3b, use_sliding_window": ("qwen3-30b-a3b.json", {"use_sliding_window": True, "sliding_window": 4096,
                                                                 "max_window_layers": 20}),
    "qwen3-30b-a3b, norm_topk_prob false": ("qwen3-30b-a3b.json", {"norm_topk_prob": False}),
    "qwen3-vl-30b-a3b, norm_topk_prob false": ("qwen3-vl-30b-a3b-instruct.json", {"norm_topk_prob": False}),
    "qwen3.5-35b-a3b, norm_topk_prob false and mlp_only_layers": ("qwen3.5-35b-a3b.json",
                                                                   {"norm_topk_prob": False, "mlp_only_layers": [0]}),
    "qwen3-next, no partial_rotary_factor": ("qwen3-next-80b-a3b.json", {"partial_rotary_factor": None}),
    "qwen2-57b-a14b, qkv_bias false": ("qwen2-57b-a14b.json", {"qkv_bias": False}),
    "deepseek-v2-chat, moe_layer_freq 2": ("deepseek-v2-chat.json", {"moe_layer_freq": 2}),
    "deepseek-v2-chat, scoring_func sigmoid": ("deepseek-v2-chat.json", {"scoring_func": "sigmoid"}),
    "deepseek-v2-lite, norm_topk_prob true": ("deepseek-v2-lite.json", {"norm_topk_prob": True}),
    "deepseek-v3, rope_interleave false": ("deepseek-v3.json", {"rope_interleave": False}),
    "deepseek-v3, topk_method greedy": ("deepseek-v3.json", {"topk_method": "greedy"}),
    "gemma-3-1b, pattern 3 without layer_types": ("gemma-3-1b-it.json", {"layer_types": None,
                                                                         "sliding_window_pattern": 3}),
    "gemma-3-12b, no query_pre_attn_scalar": ("gemma-3-12b-it.json", {"query_pre_attn_scalar": None}),
    "llama-4-maverick, no rope_theta": ("llama-4-maverick.json", {"rope_theta": None}),
    "llama-4-maverick, attention_chunk_size null": ("llama-4-maverick.json", {"attention_chunk_size": None}),
    "gpt-oss-120b, no rope_theta": ("gpt-oss-120b.json", {"rope_theta": None}),
    "llama-2-7b, no head counts for its keys": ("llama-2-7b.json", {"num_key_value_heads": None}),
    "mistral-7b-v0.1, no sliding_window": ("mistral-7b-v0.1.json", {"sliding_window": None}),
    "gemma-2-9b, no soft caps": ("gemma-2-9b.json", {"attn_logit_softcapping": None, "final_logit_softcapping": None}),
    "gemma-2-9b, the 27b's query_pre_attn_scalar": ("gemma-2-9b.json", {"query_pre_attn_scalar": 224}),
    "phi-3-mini-4k, no sliding_window": ("phi-3-mini-4k-instruct.json", {"sliding_window": None}),
    "phi-3-mini-4k, partial rotation": ("phi-3-mini-4k-instruct.json", {"partial_rotary_factor": 0.75}),
    "phi-3-mini-4k, longrope with its own attention factor": (
        "phi-3-mini-4k-instruct.json",
        {"max_position_embeddings": 131072,
         "rope_scaling": {**json.loads((ROOT / "tests/model/configs/phi-3-mini-128k-instruct.json").read_text())[
             "rope_scaling"], "type": "longrope", "attention_factor": 1.5}}),
    "starcoder2-7b, use_bias false": ("starcoder2-7b.json", {"use_bias": False}),
    "olmo-2-1124-7b, attention_bias": ("olmo-2-1124-7b.json", {"attention_bias": True}),
    "internlm2-chat-7b, bias and linear scaling": ("internlm2-chat-7b.json",
                                                   {"bias": True, "rope_scaling": {"type": "linear", "factor": 2.0}}),
    "granite-3.3-8b, attention_bias and mlp_bias": ("granite-3.3-8b-instruct.json",
                                                    {"attention_bias": True, "mlp_bias": True}),
    "granite-3.3-8b, multipliers of 1": ("granite-3.3-8b-instruct.json",
                                         {"embedding_multiplier": 1.0, "residual_multiplier": 1.0, "logits_scaling": 1.0}),
    "command-r7b, sliding_window null": ("c4ai-command-r7b-12-2024.json", {"sliding_window": None}),
    "command-r7b, sliding_window_pattern 2": ("c4ai-command-r7b-12-2024.json", {"sliding_window_pattern": 2}),
    "command-r7b, attention_bias": ("c4ai-command-r7b-12-2024.json", {"attention_bias": True}),
    "nemotron-51b, a feed-forward block linear and one removed": (
        "llama-3_1-nemotron-51b-instruct.json",
        {"block_configs": [*json.loads((ROOT / "tests/model/configs/llama-3_1-nemotron-51b-instruct.json").read_text())[
            "block_configs"][:78], {"attention": {"n_heads_in_group": 8}, "ffn": {"replace_with_linear": True}},
            {"attention": {"no_op": True}, "ffn": {"no_op": True}}], "mlp_bias": True}),
}

#: Published configs transformers refuses as they are: the fields given it instead, and why.
COERCED = {
    "llama-4-scout.json": ({"attn_temperature_tuning": True},
                           "transformers 5's Llama4TextConfig is a strict dataclass whose `attn_temperature_tuning` is "
                           "a bool; the published config writes 4, which transformers 4 read as true"),
    "phi-3-mini-128k-instruct.json": (
        {"rope_scaling": {**json.loads((ROOT / "tests/model/configs/phi-3-mini-128k-instruct.json").read_text())[
            "rope_scaling"], "type": "longrope"}},
        "transformers 5 standardises the rope parameters before Phi3Config renames `su` to `longrope`, so the first "
        "128k release's `su` misses `original_max_position_embeddings` in validation (a KeyError); it is the same "
        "scaling, which Phi-3's later files call `longrope`"),
}

#: (file, field): where transformers' reading is wrong and streamed's differs on purpose, with why.
KNOWN = {
    ("mistral-small-3.1-24b-instruct-2503.json", "tied"):
        "transformers 5 ties a Mistral3ForConditionalGeneration's head whenever the wrapper's `tie_word_embeddings` "
        "(default true since transformers#43429) says so; this config's text model says false and its checkpoint "
        "stores `lm_head.weight` (vLLM#51063): streamed reads the text model's",
}


#: InternLM2Config as the published remote code defines it (``configuration_internlm2.py`` of the internlm2 repositories;
#: transformers 5.24 does not ship the model): its defaults, ``num_key_value_heads`` the heads when None, and its
#: ``rope_scaling`` (``linear`` or ``dynamic`` with a factor) kept as given (``dynamic`` streamed refuses).
INTERNLM2_DEFAULTS = dict(vocab_size=103168, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                          num_attention_heads=32, num_key_value_heads=None, hidden_act="silu",
                          max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=False, bias=True,
                          rope_theta=10000, rope_scaling=None)


def _internlm2(fields: dict) -> SimpleNamespace:
    c = {**INTERNLM2_DEFAULTS, **fields, "model_type": "internlm2"}
    if c["num_key_value_heads"] is None:
        c["num_key_value_heads"] = c["num_attention_heads"]
    rp = dict(c["rope_scaling"] or {})
    rp = {"rope_type": rp.get("type", rp.get("rope_type", "default")), "rope_theta": c["rope_theta"],
          **{k: v for k, v in rp.items() if k not in ("type", "rope_type")}}
    tc = SimpleNamespace(**c, rope_parameters=rp)
    tc.get_text_config = lambda: tc
    return tc


#: Nemotron-NAS's DeciLMConfig as the published remote code defines it (``configuration_decilm.py`` of the nvidia
#: repositories, a LlamaConfig of transformers 4.44.2): LlamaConfig's defaults, ``intermediate_size`` and
#: ``num_key_value_heads`` set to None (each block says its own), ``head_dim`` hidden / heads, its ``block_configs``
#: kept per layer; its ``rope_scaling`` standardised as the vendored ``modeling_rope_utils`` reads it.
DECI_DEFAULTS = dict(vocab_size=32000, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                     hidden_act="silu", max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=False,
                     rope_theta=10000.0, rope_scaling=None, attention_bias=False, mlp_bias=False, block_configs=None)


def _deci(fields: dict) -> SimpleNamespace:
    c = {**DECI_DEFAULTS, **fields, "model_type": "nemotron-nas", "intermediate_size": None,
         "num_key_value_heads": None}
    rp = dict(c["rope_scaling"] or {})
    rp = {"rope_type": rp.get("rope_type", rp.get("type", "default")), "rope_theta": c["rope_theta"],
          **{k: v for k, v in rp.items() if k not in ("type", "rope_type")}}
    tc = SimpleNamespace(**c, rope_parameters=rp, head_dim=c["hidden_size"] // c["num_attention_heads"])
    tc.get_text_config = lambda: tc
    return tc


def tc_of(cfg: dict, name: str) -> tuple[Any, Any]:
    """transformers' configuration of ``cfg``: the whole (its outer ``tie_word_embeddings``) and its text model — as
    published, or, where this transformers refuses it so, with ``COERCED``'s fields."""
    fields = json.loads(json.dumps({k: v for k, v in cfg.items() if k != "model_type"}))
    if cfg["model_type"] in ("internlm2", "nemotron-nas"):
        tc = _internlm2(fields) if cfg["model_type"] == "internlm2" else _deci(fields)
        return tc, tc
    try:
        whole = for_model(cfg, {})
    except Exception:
        if name not in COERCED:
            raise
        whole = for_model(cfg, COERCED[name][0])  # refused as published: read as COERCED says
    return whole, whole.get_text_config()


def for_model(cfg: dict, coerced: dict) -> Any:
    """transformers' whole configuration of ``cfg`` (a copy), the fields ``coerced`` given it over the file's (in its
    text model's where it has one)."""
    fields = json.loads(json.dumps({k: v for k, v in cfg.items() if k != "model_type"}))
    if coerced:
        target = fields["text_config"] if "text_config" in fields else fields
        target.update(coerced)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.AutoConfig.for_model(cfg["model_type"], **fields)


# ---- what transformers' modelling code builds, per model type ------------------------------------------------------


@dataclass(frozen=True)
class Modelling:
    """What a model type's ``modeling_<type>.py`` does with its configuration."""

    window: str = "none"  # "layer_types": sliding_window on its sliding_attention layers; "every": on every layer
    bias: str = "attention_bias"  # "qkv": q, k, v biased, o not; "qkv_bias": q, k, v as `qkv_bias`; "none"
    qk_norm: str = "none"  # "rms": RMS norm per head; "rms+1": with the 1 + g gain; "l2": Llama 4's, on rotating layers
    gated: bool = False  # Qwen3-Next's sigmoid output gate
    experts: Callable[[Any, int], dict | None] | None = None  # a layer's experts, or None for a dense block
    interleaved: Callable[[Any], bool] = lambda tc: False  # noqa: E731 — rotary as complex multiplication
    activation: str = "hidden_act"
    norm: str = "rms"  # "rms": RMSNorm of rms_norm_eps; "layer": nn.LayerNorm of norm_epsilon, with its bias
    sandwich: bool = False  # the blocks' outputs normed before they join the residual (Gemma, OLMo 2)
    pre_norm: bool = True  # the blocks' inputs normed (not OLMo 2's)
    fused: str | None = None  # q, k and v one projection: "qkv" in turn (Phi-3), "grouped" per KV head (InternLM2)
    mlp: str = "gated"  # "gated", "fused" (gate_up_proj), "ungated" (c_fc, c_proj: StarCoder2)
    softcap: bool = False  # Gemma 2: attn_logit_softcapping and final_logit_softcapping
    norm_eps: str = "rms_norm_eps"  # the field the norms' epsilon is
    scale: str | None = None  # the field the attention logits are scaled by, in place of 1/√head width (Granite)
    residual: str | None = None  # the field each block's output is multiplied by before the residual (Granite)
    mlp_bias: str | None = None  # the field that biases a gated MLP's three projections (Granite)
    parallel: bool = False  # attention and the MLP read one norm and both join the residual (Cohere)
    rope: Callable[[Any, str], bool] = lambda tc, t: True  # noqa: E731 — whether a layer of that type rotates
    logits: Callable[[Any], float | None] = lambda tc: None  # noqa: E731 — what the logits are multiplied by
    embed: Callable[[Any], float | None] = lambda tc: None  # noqa: E731 — what the embedding is multiplied by
    blocks: Callable[[Any, int], dict] | None = None  # a layer's own blocks (Nemotron-NAS)


def _qwen_moe(normalized: Callable[[Any], bool], shared: bool, every: bool = False):
    """Qwen2-MoE/Qwen3-MoE/Qwen3-Next/Qwen3-VL-MoE: experts where not in ``mlp_only_layers`` and
    ``(i + 1) % decoder_sparse_step == 0`` (Qwen3.5-MoE: every layer); the top-k renormalised as ``normalized``."""
    def experts(tc, i):
        if not every and (i in (tc.mlp_only_layers or []) or tc.num_experts <= 0 or (i + 1) % tc.decoder_sparse_step):
            return None
        return dict(count=tc.num_experts, top_k=tc.num_experts_per_tok, width=tc.moe_intermediate_size,
                    normalized=normalized(tc), scoring="softmax",
                    shared_width=tc.shared_expert_intermediate_size if shared else None, shared_gate=shared)
    return experts


def _deepseek(tc, i):
    """DeepSeek-V2: softmax, ``greedy`` or ``group_limited_greedy``, never renormalised, scaled; V3: sigmoid with a
    selection bias, groups, renormalised as ``norm_topk_prob``. Experts from ``first_k_dense_replace`` on."""
    if i < tc.first_k_dense_replace:
        return None
    v3 = tc.model_type == "deepseek_v3"
    grouped = v3 or tc.topk_method == "group_limited_greedy"
    return dict(count=tc.n_routed_experts, top_k=tc.num_experts_per_tok, width=tc.moe_intermediate_size,
                normalized=bool(tc.norm_topk_prob) if v3 else False, scoring="sigmoid" if v3 else "softmax",
                routed_scale=tc.routed_scaling_factor, selection_bias=v3,
                groups=tc.n_group if grouped else None, keep_groups=tc.topk_group if grouped else None,
                shared_width=tc.moe_intermediate_size * tc.n_shared_experts or None)


MODELLING: dict[str, Modelling] = {
    "llama": Modelling(),
    "mistral": Modelling(window="every", bias="none"),
    "mixtral": Modelling(window="every", bias="none", experts=lambda tc, i: dict(
        count=tc.num_local_experts, top_k=tc.num_experts_per_tok, width=tc.intermediate_size, normalized=True,
        scoring="softmax")),
    "qwen2": Modelling(window="layer_types", bias="qkv"),
    "qwen2_vl_text": Modelling(window="layer_types", bias="qkv"),
    "qwen2_5_vl_text": Modelling(window="layer_types", bias="qkv"),
    "qwen3": Modelling(window="layer_types", qk_norm="rms"),
    "qwen3_vl_text": Modelling(qk_norm="rms"),
    "qwen2_moe": Modelling(window="layer_types", bias="qkv_bias",
                           experts=_qwen_moe(lambda tc: tc.norm_topk_prob, shared=True)),
    "qwen3_moe": Modelling(window="every", qk_norm="rms",
                           experts=_qwen_moe(lambda tc: tc.norm_topk_prob, shared=False)),
    "qwen3_vl_moe_text": Modelling(qk_norm="rms", experts=_qwen_moe(lambda tc: True, shared=False)),
    "qwen3_next": Modelling(qk_norm="rms+1", gated=True, experts=_qwen_moe(lambda tc: tc.norm_topk_prob, shared=True)),
    "qwen3_5_text": Modelling(qk_norm="rms+1", gated=True),
    "qwen3_5_moe_text": Modelling(qk_norm="rms+1", gated=True,
                                  experts=_qwen_moe(lambda tc: True, shared=True, every=True)),
    "gemma3_text": Modelling(window="layer_types", qk_norm="rms+1", activation="hidden_activation"),
    "deepseek_v2": Modelling(bias="none", experts=_deepseek, interleaved=lambda tc: True),
    "deepseek_v3": Modelling(bias="none", experts=_deepseek, interleaved=lambda tc: tc.rope_interleave),
    "llama4_text": Modelling(qk_norm="l2", interleaved=lambda tc: True, experts=lambda tc, i: dict(
        count=tc.num_local_experts, top_k=tc.num_experts_per_tok, width=tc.intermediate_size, normalized=False,
        scoring="sigmoid", shared_width=tc.intermediate_size) if i in tc.moe_layers else None),
    "gpt_oss": Modelling(window="layer_types", experts=lambda tc, i: dict(
        count=tc.num_local_experts, top_k=tc.num_experts_per_tok, width=tc.intermediate_size, normalized=True,
        scoring="softmax")),
    "gemma2": Modelling(window="layer_types", activation="hidden_activation", sandwich=True, softcap=True),
    "phi3": Modelling(window="every", bias="none", fused="qkv", mlp="fused"),
    "starcoder2": Modelling(window="every", bias="use_bias", norm="layer", mlp="ungated"),
    "olmo2": Modelling(qk_norm="rms whole", sandwich=True, pre_norm=False),
    "internlm2": Modelling(bias="bias", fused="grouped"),
}
MODELLING["gemma3_text"] = replace(MODELLING["gemma3_text"], sandwich=True, softcap=True)
MODELLING["starcoder2"] = replace(MODELLING["starcoder2"], norm_eps="norm_epsilon")


def _unless_one(v: float) -> float | None:
    return None if v == 1 else v


def _deci_blocks(tc, i: int) -> dict:
    """``modeling_decilm.py``'s layer ``i``: attention removed (``no_op``), ``DeciLMLinearAttention`` (one
    ``hidden × hidden`` product) or ``num_attention_heads / n_heads_in_group`` key/value heads; the MLP removed, one
    product (``DeciLMLinearMLP``) or ``_ffn_mult_to_intermediate_size(ffn_mult, hidden)`` wide."""
    att, ffn = tc.block_configs[i]["attention"], tc.block_configs[i]["ffn"]
    mixer = "none" if att.get("no_op") else "linear" if att.get("replace_with_linear") else "attention"
    width = int(2 * (ffn.get("ffn_mult") or 0) * tc.hidden_size / 3)
    width = width if width % 256 == 0 else width + 256 - width % 256
    return dict(mixer=mixer, kv_heads=tc.num_attention_heads // att["n_heads_in_group"] if mixer == "attention" else None,
                ffn="none" if ffn.get("no_op") else "linear" if ffn.get("replace_with_linear") else "dense", width=width)


MODELLING.update({
    "granite": Modelling(scale="attention_multiplier", residual="residual_multiplier", mlp_bias="mlp_bias",
                         logits=lambda tc: _unless_one(1 / tc.logits_scaling),
                         embed=lambda tc: _unless_one(tc.embedding_multiplier)),
    # Cohere2Attention rotates (and slides) only where the layer has a window.
    "cohere2": Modelling(window="layer_types", norm="layer", norm_eps="layer_norm_eps", parallel=True,
                         interleaved=lambda tc: True, logits=lambda tc: _unless_one(tc.logit_scale),
                         rope=lambda tc, t: t == "sliding_attention" and tc.sliding_window is not None),
    "nemotron-nas": Modelling(mlp_bias="mlp_bias", blocks=_deci_blocks),
})


def _mscale(factor: float, m: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def _rotation(tc, layer_type: str, dims_of: int) -> dict:
    """The rotation ``modeling_rope_utils`` builds for a layer type from the standardised ``rope_parameters``."""
    rp = tc.rope_parameters
    rp = rp.get(layer_type, rp) if isinstance(rp.get(layer_type), dict) else rp
    kind = rp.get("rope_type", "default")
    out = dict(dims=int(dims_of * rp.get("partial_rotary_factor", 1.0)), base=float(rp["rope_theta"]), kind=kind,
               attention=1.0)
    if kind == "linear":
        out["factor"] = float(rp["factor"])
    elif kind == "llama3":
        out.update(factor=float(rp["factor"]), context=float(rp["original_max_position_embeddings"]),
                   low=float(rp["low_freq_factor"]), high=float(rp["high_freq_factor"]))
    elif kind == "yarn":  # _compute_yarn_parameters
        factor = float(rp["factor"])
        attention = rp.get("attention_factor")
        if attention is None:
            m, mall = rp.get("mscale"), rp.get("mscale_all_dim")
            attention = _mscale(factor, m) / _mscale(factor, mall) if m and mall else _mscale(factor)
        out.update(factor=factor, context=float(rp["original_max_position_embeddings"]),
                   fast=float(rp.get("beta_fast") or 32), slow=float(rp.get("beta_slow") or 1),
                   unrounded=not rp.get("truncate", True), attention=float(attention))
    elif kind == "longrope":  # _compute_longrope_parameters
        original = rp["original_max_position_embeddings"]
        factor = rp.get("factor") or tc.max_position_embeddings / original
        attention = rp.get("attention_factor")
        if attention is None:
            attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
        out.update(context=float(original), short=list(rp["short_factor"]), long=list(rp["long_factor"]),
                   attention=float(attention))
    return out


def expected(whole, tc) -> dict:
    """What transformers builds from the configuration: the model's fields and every layer's."""
    mod = MODELLING[tc.model_type]
    n, d = tc.num_hidden_layers, tc.hidden_size
    head_dim = getattr(tc, "head_dim", None) or d // tc.num_attention_heads
    types = getattr(tc, "layer_types", None) or ["full_attention"] * n
    layers = []
    eps = getattr(tc, mod.norm_eps)
    residual = _unless_one(getattr(tc, mod.residual)) if mod.residual else None
    for i in range(n):
        t = types[i]
        layer: dict[str, Any] = {"norm eps": eps, "layer norm": mod.norm == "layer", "sandwich": mod.sandwich,
                                 "pre norm": mod.pre_norm, "parallel": mod.parallel, "residual scale": residual}
        block = mod.blocks(tc, i) if mod.blocks else {"mixer": "attention", "ffn": "dense"}
        if t == "linear_attention":
            layer.update(mixer="gated deltanet", key_heads=tc.linear_num_key_heads,
                         value_heads=tc.linear_num_value_heads, key_dim=tc.linear_key_head_dim,
                         value_dim=tc.linear_value_head_dim, conv_kernel=tc.linear_conv_kernel_dim)
        elif tc.model_type.startswith("deepseek"):
            rot = _rotation(tc, t, tc.qk_rope_head_dim)
            scale = (tc.qk_nope_head_dim + tc.qk_rope_head_dim) ** -0.5  # yarn_apply_mscale
            if rot["kind"] != "default" and tc.rope_parameters.get("mscale_all_dim"):
                scale *= _mscale(tc.rope_parameters["factor"], tc.rope_parameters["mscale_all_dim"]) ** 2
            layer.update(mixer="latent attention", heads=tc.num_attention_heads, q_rank=tc.q_lora_rank,
                         kv_rank=tc.kv_lora_rank, nope=tc.qk_nope_head_dim, rope=tc.qk_rope_head_dim,
                         v=tc.v_head_dim, rotation=rot, interleaved=mod.interleaved(tc), scale=scale)
        elif block["mixer"] != "attention":
            layer["mixer"] = block["mixer"]
        else:
            rope = tc.no_rope_layers[i] if tc.model_type == "llama4_text" else mod.rope(tc, t)
            window = None
            if mod.window == "every" or (mod.window == "layer_types" and t == "sliding_attention"):
                window = tc.sliding_window
            bias = {"attention_bias": getattr(tc, "attention_bias", False), "qkv": True, "none": False,
                    "qkv_bias": getattr(tc, "qkv_bias", False), "use_bias": getattr(tc, "use_bias", False),
                    "bias": getattr(tc, "bias", False)}[mod.bias]
            out_bias = bias if mod.bias in ("attention_bias", "use_bias", "bias") else False
            qk = None if mod.qk_norm in ("none", "l2") else tc.rms_norm_eps
            scale = head_dim ** -0.5
            if tc.model_type in ("gemma3_text", "gemma2"):
                scale = tc.query_pre_attn_scalar ** -0.5
            if mod.scale:
                scale = getattr(tc, mod.scale)
            layer.update(mixer="attention", heads=tc.num_attention_heads,
                         kv_heads=block.get("kv_heads") or tc.num_key_value_heads,
                         head_dim=head_dim, rotation=_rotation(tc, t, head_dim) if rope else None,
                         interleaved=mod.interleaved(tc) if rope else None, window=window,
                         chunk=tc.attention_chunk_size if t == "chunked_attention" else None, bias=bias,
                         out_bias=out_bias, qk_norm=qk, qk_l2=mod.qk_norm == "l2" and bool(rope) and tc.use_qk_norm,
                         gated=mod.gated, scale=scale, fused=mod.fused, qk_whole=mod.qk_norm == "rms whole",
                         softcap=tc.attn_logit_softcapping if mod.softcap else None)
        experts = mod.experts(tc, i) if mod.experts else None
        if experts is not None:
            layer["ffn"] = {"kind": "experts", "routed_scale": None, "selection_bias": False, "groups": None,
                            "keep_groups": None, "shared_width": None, "shared_gate": False, **experts}
            if layer["ffn"]["routed_scale"] == 1:
                layer["ffn"]["routed_scale"] = None
        elif block["ffn"] != "dense":
            layer["ffn"] = {"kind": block["ffn"]}
        else:
            width = tc.intermediate_size_mlp if tc.model_type == "llama4_text" else block.get("width") or tc.intermediate_size
            layer["ffn"] = {"kind": "dense", "width": width, "activation": getattr(tc, mod.activation),
                            "gated": mod.mlp != "ungated", "fused": mod.mlp == "fused",
                            "bias": (mod.mlp == "ungated" and tc.use_bias) or bool(mod.mlp_bias and getattr(tc, mod.mlp_bias))}
        layers.append(layer)
    return {"d": d, "vocab": tc.vocab_size, "layers": n, "tied": bool(getattr(whole, "tie_word_embeddings", False)),
            "final norm eps": eps, "final layer norm": mod.norm == "layer",
            "final soft cap": tc.final_logit_softcapping if mod.softcap else None, "logit scale": mod.logits(tc),
            "embed scale": math.sqrt(d) if tc.model_type in ("gemma3_text", "gemma2") else mod.embed(tc),
            "per layer": layers}


# ---- the same fields of the spec streamed reads --------------------------------------------------------------------


ACTIVATIONS = {"silu": ("silu", "swish"), "gelu": ("gelu_pytorch_tanh", "gelu_new", "gelu_fast")}


def _spec_rotation(rot) -> dict | None:
    if rot is None:
        return None
    out = dict(dims=rot.dims, base=rot.base, kind="default", attention=rot.attention)
    s = rot.scaling
    if rot.unmodelled is not None:
        out["kind"] = rot.unmodelled.split("`")[1]
    elif s is not None:
        out.update(kind=s.kind, factor=s.factor)
        if s.kind == "llama3":
            out.update(context=s.context, low=s.low, high=s.high)
        if s.kind == "yarn":
            out.update(context=s.context, fast=s.fast, slow=s.slow, unrounded=s.unrounded)
        if s.kind == "longrope":
            del out["factor"]
            out.update(context=s.context, short=list(s.short), long=list(s.long))
    return out


def read(spec: ModelSpec) -> dict:
    layers = []
    for layer in spec.layers:
        m, f = layer.mixer, layer.ffn
        out: dict[str, Any] = {"norm eps": layer.norm.eps, "layer norm": layer.norm.layer, "sandwich": layer.sandwich,
                               "pre norm": layer.pre_norm, "parallel": layer.parallel,
                               "residual scale": layer.residual_scale}
        if m is None or isinstance(m, Linear):
            out["mixer"] = "none" if m is None else "linear"
        elif isinstance(m, GatedDeltaNet):
            out.update(mixer="gated deltanet", key_heads=m.key_heads, value_heads=m.value_heads, key_dim=m.key_dim,
                       value_dim=m.value_dim, conv_kernel=m.conv_kernel)
        elif isinstance(m, LatentAttention):
            out.update(mixer="latent attention", heads=m.heads, q_rank=m.q_rank, kv_rank=m.kv_rank, nope=m.nope_dim,
                       rope=m.rope_dim, v=m.v_dim, rotation=_spec_rotation(m.rotation),
                       interleaved=m.rotation.interleaved,
                       scale=m.scale if m.scale is not None else (m.nope_dim + m.rope_dim) ** -0.5)
        else:
            assert isinstance(m, Attention)
            out.update(mixer="attention", heads=m.heads, kv_heads=m.kv_heads, head_dim=m.head_dim,
                       rotation=_spec_rotation(m.rotation), interleaved=m.rotation.interleaved if m.rotation else None,
                       window=m.window, chunk=m.chunk, bias=m.bias, out_bias=m.out_bias,
                       qk_norm=m.qk_norm.eps if m.qk_norm else None, qk_l2=m.qk_l2, gated=m.gated,
                       scale=m.scale if m.scale is not None else m.head_dim ** -0.5, fused=m.fused,
                       qk_whole=m.qk_norm_whole, softcap=m.softcap)
        if f is None or isinstance(f, Linear):
            out["ffn"] = {"kind": "none" if f is None else "linear"}
        elif isinstance(f, Experts):
            out["ffn"] = dict(kind="experts", count=f.count, top_k=f.top_k, width=f.width, normalized=f.normalized,
                              scoring=f.scoring, routed_scale=None if f.routed_scale == 1 else f.routed_scale,
                              selection_bias=f.selection_bias,
                              groups=f.groups, keep_groups=f.keep_groups, shared_width=f.shared_width,
                              shared_gate=f.shared_gate)
        else:
            out["ffn"] = dict(kind="dense", width=f.width, activation=f.activation, gated=f.gated, fused=f.fused,
                              bias=f.bias)
        layers.append(out)
    return {"d": spec.d, "vocab": spec.vocab, "layers": len(spec.layers), "tied": spec.tied,
            "final norm eps": spec.final_norm.eps, "final layer norm": spec.final_norm.layer,
            "final soft cap": spec.final_softcap, "logit scale": spec.logit_scale, "embed scale": spec.embed_scale,
            "per layer": layers}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=0)
    return a == b


def differences(want: dict, got: dict, where: str = "") -> list[str]:
    """Every field where ``got`` (streamed) differs from ``want`` (transformers), named by its place."""
    out = []
    for key in want.keys() | got.keys():
        a, b = want.get(key, "—"), got.get(key, "—")
        name = f"{where}{key}"
        if key == "per layer":
            for i, (x, y) in enumerate(zip(a, b)):
                out += differences(x, y, f"layer {i} ")
        elif isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, f"{name} ")
        elif key == "activation":
            if b not in [k for k, names in ACTIVATIONS.items() if a in names]:
                out.append(f"{name}: transformers {a!r}, streamed {b!r}")
        elif not _same(a, b):
            out.append(f"{name}: transformers {a!r}, streamed {b!r}")
    return sorted(out)


def config_of(path: Path, fields: dict) -> dict:
    """The config at ``path`` with ``fields`` set (``None``: left out), in its text config when it has one."""
    cfg = without_refused(path.stem, json.loads(path.read_text()))  # what streamed refuses is held elsewhere
    target = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    for k, v in fields.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = v
    return cfg


CASES: dict[str, tuple[Path | None, dict]] = {f"{p.parent.name}/{p.name}": (p, {}) for p in FILES}
CASES.update({name: (next(p for p in FILES if p.name == file), fields) for name, (file, fields) in VARIANTS.items()})


#: A config that says only its model type: every field is its class's default. (DeepSeek-V2's class has no default
#: for `num_experts_per_tok`, so transformers' model cannot route and `streamed author` refuses it, naming the field —
#: the test of that is `test_a_deepseek_v2_config_without_its_top_k_is_refused_as_transformers_cannot_route_it`;
#: Nemotron-NAS's has none for `block_configs`, without which its model has no layers to build.)
DEFAULT_ONLY = [t for t in SUPPORTED if t not in ("deepseek_v2", "nemotron-nas")]
CASES.update({f"{t}, every field its class's default": (None, {"model_type": t}) for t in DEFAULT_ONLY})


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_field_the_author_reads_equals_what_transformers_resolves(case):
    path, fields = CASES[case]
    cfg = config_of(path, fields) if path is not None else dict(fields)
    whole, tc = tc_of(cfg, path.name if path is not None else "")
    assert tc.model_type in MODELLING, f"{tc.model_type}: say what its modelling code builds (MODELLING)"
    found = differences(expected(whole, tc), read(spec_from_config(cfg, str(path or case))))
    known = {f: why for (name, f), why in KNOWN.items() if path is not None and name == path.name and not fields}
    for f in known:
        assert any(d.startswith(f"{f}:") for d in found), f"{f} now agrees with transformers: drop it from KNOWN"
    found = [d for d in found if d.split(":")[0] not in known]
    assert not found, f"{len(found)} fields differ:\n" + "\n".join(found[:12])


def test_each_coerced_config_is_refused_as_published_or_read_by_transformers_as_its_coercion_reads_it():
    """No entry of COERCED stands unchecked: the transformers installed refuses the file as published (the reason
    still holds, and the coerced reading is the one compared), or — a later release reads it (5.25 reads Phi-3's
    first 128k file, its `su`) — it is read as published, and reads it as the coercion does."""
    for name, (coerced, why) in COERCED.items():
        cfg = json.loads(next(p for p in FILES if p.name == name).read_text())
        try:
            published = for_model(cfg, {})
        except Exception:
            continue
        made = for_model(cfg, coerced)
        found = differences(expected(published, published.get_text_config()), expected(made, made.get_text_config()))
        assert not found, f"{name}: transformers {transformers.__version__} reads it as published otherwise than " \
                          f"coerced ({why}):\n" + "\n".join(found[:12])


def test_a_deepseek_v2_config_without_its_top_k_is_refused_as_transformers_cannot_route_it():
    from streamed.model.spec import SpecError

    _, tc = tc_of({"model_type": "deepseek_v2"}, "")
    assert tc.num_experts_per_tok is None
    with pytest.raises(SpecError, match="num_experts_per_tok"):
        spec_from_config({"model_type": "deepseek_v2"})


def test_a_nemotron_nas_config_without_block_configs_is_refused_as_its_model_cannot_build_a_layer():
    from streamed.model.spec import SpecError

    assert _deci({}).block_configs is None
    with pytest.raises(SpecError, match="`block_configs`"):
        spec_from_config({"model_type": "nemotron-nas"})
