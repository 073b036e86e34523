"""The metadata llama.cpp's converter writes for a Hugging Face config — from transformers' reading of the config,
never from ``streamed``'s.

``convert_hf_to_gguf.py`` reads a model's hyperparameters as ``AutoConfig.from_pretrained(dir).to_dict()`` (falling
back to the raw ``config.json`` when transformers refuses it), moves ``text_config`` to the top level, and writes
``TextModel.set_gguf_parameters``'s keys plus its architecture class's own. This module transcribes that, for the
architectures the oracle uses, from the converter that ``llama-cpp-python`` 0.3.36 vendors
(``ggml-org/llama.cpp@0c1e57098``: ``conversion/base.py``, ``llama.py``, ``qwen.py``, ``gemma.py``, ``deepseek.py``,
``gpt_oss.py``, ``phi.py``, ``starcoder.py``, ``olmo.py``, ``internlm.py``, ``granite.py``, ``mistral3.py``,
``command_r.py``, ``deci.py``) — so a field ``streamed.model.hf`` misreads is not handed to llama.cpp as well: the GGUF says what
transformers says.

``metadata(cfg)`` gives ``(architecture, kv)`` — ``kv`` keyed like ``ggufs.writer``'s (``{arch}.block_count``) —
and ``extra_tensors(cfg)`` the tensors the converter adds (Llama 3's ``rope_freqs``). Nothing here reads a tensor:
the oracle lays the tensors out itself and llama.cpp's loader holds their shapes to this metadata.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np

#: model_type → (GGUF architecture, the converter's class): what ``architectures[0]`` selects in the converter.
ARCHITECTURE = {
    "llama": ("llama", "LlamaModel"), "mistral": ("llama", "LlamaModel"), "mixtral": ("llama", "LlamaModel"),
    "qwen2": ("qwen2", "Qwen2Model"), "qwen3": ("qwen3", "Qwen3Model"), "qwen2_moe": ("qwen2moe", "Qwen2MoeModel"),
    "qwen3_moe": ("qwen3moe", "Qwen3MoeModel"), "qwen3_next": ("qwen3next", "Qwen3NextModel"),
    "qwen3_5": ("qwen35", "Qwen3_5TextModel"), "qwen3_5_text": ("qwen35", "Qwen3_5TextModel"),
    "qwen3_5_moe": ("qwen35moe", "Qwen3_5MoeTextModel"), "qwen3_5_moe_text": ("qwen35moe", "Qwen3_5MoeTextModel"),
    "gemma3": ("gemma3", "Gemma3Model"), "gemma3_text": ("gemma3", "Gemma3Model"),
    "deepseek_v2": ("deepseek2", "DeepseekV2Model"), "llama4": ("llama4", "Llama4Model"),
    "llama4_text": ("llama4", "Llama4Model"), "gpt_oss": ("gpt-oss", "GptOssModel"),
    "gemma2": ("gemma2", "Gemma2Model"), "phi3": ("phi3", "Phi3MiniModel"), "starcoder2": ("starcoder2", "StarCoder2Model"),
    "olmo2": ("olmo2", "Olmo2Model"), "internlm2": ("internlm2", "InternLM2Model"),
    # Mistral3ForConditionalGeneration converts through Ministral3Model, a LlamaModel writing architecture mistral3.
    "granite": ("granite", "GraniteModel"), "mistral3": ("mistral3", "LlamaModel"), "cohere2": ("cohere2", "Cohere2Model"),
    "nemotron-nas": ("deci", "DeciModel"),
}


def hparams(cfg: dict) -> dict:
    """``ModelBase.load_hparams`` then ``TextModel.__init__``: transformers' resolved config as a dict (the raw one
    when transformers refuses it, as the converter falls back), ``text_config`` moved to the top level."""
    import transformers

    transformers.logging.set_verbosity_error()
    fields = {k: v for k, v in cfg.items() if k != "model_type"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hp = transformers.AutoConfig.for_model(cfg["model_type"], **json.loads(json.dumps(fields))).to_dict()
    except Exception:  # noqa: BLE001 — the converter's own fallback: "Trying to load config.json instead"
        hp = json.loads(json.dumps(cfg))
    if isinstance(hp.get("text_config"), dict):
        hp = {**hp, **hp["text_config"]}
    return hp


def _rope_parameters(hp: dict) -> dict:
    """``TextModel.__init__``'s ``rope_parameters``, with ``rope_theta`` and ``rope_type`` mirrored into it."""
    rp = dict(hp.get("rope_parameters", hp.get("rope_scaling")) or {})
    theta = next((hp[k] for k in ("global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta",
                                  "rotary_emb_base") if k in hp), None)
    local = next((hp[k] for k in ("local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta",
                                  "rope_local_base_freq") if k in hp), None)
    partial = _first(hp, ("partial_rotary_factor", "rope_pct", "rope_percent"))
    original = hp.get("original_max_position_embeddings")
    if "full_attention" not in rp and "sliding_attention" not in rp:
        if local is not None:
            rp["sliding_attention"] = {"rope_theta": local}
        if "rope_theta" not in rp and theta is not None:
            rp["rope_theta"] = theta
        if "rope_type" not in rp and rp.get("type") is not None:
            rp["rope_type"] = rp["type"]
        if "partial_rotary_factor" not in rp and partial is not None:
            rp["partial_rotary_factor"] = partial
        if "original_max_position_embeddings" not in rp and original is not None:
            rp["original_max_position_embeddings"] = original
    return rp


def _first(hp: dict, keys: tuple[str, ...]) -> Any:
    return next((hp[k] for k in keys if k in hp), None)


def _text_model(hp: dict, rp: dict) -> dict:
    """``TextModel.set_gguf_parameters``."""
    kv: dict[str, Any] = {"{arch}.block_count": _first(hp, ("n_layers", "num_hidden_layers", "n_layer", "num_layers"))}
    for key, names in (("context_length", ("max_position_embeddings", "n_ctx", "n_positions", "max_length",
                                           "max_sequence_length", "model_max_length")),
                       ("embedding_length", ("hidden_size", "n_embd", "dim")),
                       ("feed_forward_length", ("intermediate_size", "n_inner", "hidden_dim")),
                       ("attention.head_count", ("num_attention_heads", "n_head", "n_heads")),
                       ("attention.head_count_kv", ("num_key_value_heads", "n_kv_heads"))):
        if (v := _first(hp, names)) is not None:
            kv["{arch}." + key] = v
    params = rp.get("full_attention", rp)
    kind, factor = params.get("rope_type"), params.get("factor")
    if kind == "linear" and factor is not None:
        kv["{arch}.rope.scaling.type"] = "linear"
        kv["{arch}.rope.scaling.factor"] = float(factor)
    elif kind == "yarn" and factor is not None:
        kv["{arch}.rope.scaling.type"] = "yarn"
        kv["{arch}.rope.scaling.factor"] = float(factor)
        kv["{arch}.rope.scaling.original_context_length"] = params["original_max_position_embeddings"]
        for key, name in (("yarn_ext_factor", "extrapolation_factor"), ("yarn_beta_fast", "beta_fast"),
                          ("yarn_beta_slow", "beta_slow")):
            if params.get(name) is not None:
                kv["{arch}.rope.scaling." + key] = float(params[name])
        if (attn := params.get("attention_factor", params.get("attn_factor"))) is not None:
            kv["{arch}.rope.scaling.yarn_attn_factor"] = float(attn)
    if "mrope_section" in rp:
        kv["{arch}.rope.dimension_sections"] = (list(rp["mrope_section"]) + [0, 0, 0, 0])[:4]
    if params.get("rope_theta") is not None:
        kv["{arch}.rope.freq_base"] = float(params["rope_theta"])
    if (local := (rp.get("sliding_attention") or {}).get("rope_theta")) is not None:
        kv["{arch}.rope.freq_base_swa"] = float(local)
    if (eps := _first(hp, ("rms_norm_eps", "norm_eps"))) is not None:
        kv["{arch}.attention.layer_norm_rms_epsilon"] = float(eps)
    if (eps := _first(hp, ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"))) is not None:
        kv["{arch}.attention.layer_norm_epsilon"] = float(eps)
    if (n := _first(hp, ("num_local_experts", "num_experts"))) is not None:
        kv["{arch}.expert_count"] = n
    if (n := _first(hp, ("num_experts_per_tok", "num_experts_per_token", "top_k_experts"))) is not None:
        kv["{arch}.expert_used_count"] = n
    if hp.get("n_group") is not None:
        kv["{arch}.expert_group_count"] = hp["n_group"]
    if hp.get("topk_group") is not None:
        kv["{arch}.expert_group_used_count"] = hp["topk_group"]
    if (f := _first(hp, ("score_function", "scoring_func", "score_func", "moe_router_activation",
                         "moe_router_activation_func"))) is not None:
        kv["{arch}.expert_gating_func"] = {"softmax": 1, "sigmoid": 2}[f]
    if hp.get("head_dim") is not None:
        kv["{arch}.attention.key_length"] = kv["{arch}.attention.value_length"] = hp["head_dim"]
    return kv


def _head_dim(hp: dict) -> int:
    return hp["head_dim"] if hp.get("head_dim") is not None else hp["hidden_size"] // hp["num_attention_heads"]


def _gemma2(hp: dict) -> dict[str, Any]:
    """``Gemma2Model.set_gguf_parameters``: its own keys only (no rotation base: llama.cpp's 10000)."""
    return {"{arch}.context_length": hp["max_position_embeddings"], "{arch}.embedding_length": hp["hidden_size"],
            "{arch}.block_count": hp["num_hidden_layers"], "{arch}.feed_forward_length": hp["intermediate_size"],
            "{arch}.attention.head_count": hp["num_attention_heads"],
            "{arch}.attention.head_count_kv": hp.get("num_key_value_heads", hp["num_attention_heads"]),
            "{arch}.attention.layer_norm_rms_epsilon": float(hp["rms_norm_eps"]),
            "{arch}.attention.key_length": hp["head_dim"], "{arch}.attention.value_length": hp["head_dim"],
            "{arch}.attn_logit_softcapping": float(hp["attn_logit_softcapping"]),
            "{arch}.final_logit_softcapping": float(hp["final_logit_softcapping"]),
            "{arch}.attention.sliding_window": hp["sliding_window"]}


def _phi3(hp: dict, rp: dict) -> dict[str, Any]:
    """``Phi3MiniModel.set_gguf_parameters`` (its own, not TextModel's) and the attention factor its
    ``generate_extra_tensors`` writes beside LongRoPE's factors."""
    n_embd, n_head = hp["hidden_size"], hp["num_attention_heads"]
    original = rp["original_max_position_embeddings"]
    kv = {"{arch}.context_length": hp["max_position_embeddings"],
          "{arch}.rope.scaling.original_context_length": original, "{arch}.embedding_length": n_embd,
          "{arch}.feed_forward_length": hp["intermediate_size"], "{arch}.block_count": hp["num_hidden_layers"],
          "{arch}.attention.head_count": n_head, "{arch}.attention.head_count_kv": hp["num_key_value_heads"],
          "{arch}.attention.layer_norm_rms_epsilon": float(hp["rms_norm_eps"]),
          "{arch}.rope.dimension_count": int(rp.get("partial_rotary_factor", 1.0) * n_embd) // n_head,
          "{arch}.rope.freq_base": float(rp.get("full_attention", rp)["rope_theta"]),
          "{arch}.attention.sliding_window": hp.get("sliding_window") or 0}
    if rp.get("long_factor"):
        scale = hp["max_position_embeddings"] / original
        kv["{arch}.rope.scaling.attn_factor"] = math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1 else 1.0
    return kv


def _ffn_width(mult: float | None, d: int) -> int:
    """``DeciModel._ffn_mult_to_intermediate_size`` (0 for a block without ``ffn_mult``)."""
    width = int(2 * (mult or 0.0) * d / 3)
    return width if width % 256 == 0 else width + 256 - width % 256


def _deci(hp: dict, rp: dict) -> dict[str, Any]:
    """``DeciModel.set_gguf_parameters`` for a config with ``block_configs`` (its own keys, not TextModel's): per layer
    the head count (0 without attention), the key/value head count (0 without attention or for its linear
    replacement) and the feed-forward width from ``ffn_mult``."""
    heads, d = hp["num_attention_heads"], hp["hidden_size"]
    n_kv, n_head, n_ff = [], [], []
    for b in hp["block_configs"]:
        att = b["attention"]
        if att.get("n_heads_in_group") is None:
            n_kv.append(0)
            n_head.append(heads if att.get("replace_with_linear") is True else 0)
        else:
            n_kv.append(heads // att["n_heads_in_group"])
            n_head.append(heads)
        n_ff.append(_ffn_width(b["ffn"].get("ffn_mult"), d))
    kv: dict[str, Any] = {}
    if rp.get("rope_theta") is not None:
        kv["{arch}.rope.freq_base"] = float(rp["rope_theta"])
    kv.update({"{arch}.attention.head_count_kv": n_kv, "{arch}.attention.head_count": n_head,
               "{arch}.feed_forward_length": n_ff, "{arch}.block_count": hp["num_hidden_layers"],
               "{arch}.context_length": hp["max_position_embeddings"], "{arch}.embedding_length": d,
               "{arch}.attention.layer_norm_rms_epsilon": float(hp["rms_norm_eps"]),
               "{arch}.attention.key_length": d // heads, "{arch}.attention.value_length": d // heads,
               "{arch}.vocab_size": hp["vocab_size"], "{arch}.rope.dimension_count": d // heads})
    return kv


def metadata(cfg: dict) -> tuple[str, dict[str, Any]]:
    """The GGUF architecture and the metadata the converter writes for ``cfg`` (a parsed ``config.json``)."""
    arch, cls = ARCHITECTURE[cfg["model_type"]]
    hp = hparams(cfg)
    if cls in ("Gemma2Model", "Phi3MiniModel"):
        return arch, _gemma2(hp) if cls == "Gemma2Model" else _phi3(hp, _rope_parameters(hp))
    if cls == "DeciModel":
        return arch, _deci(hp, _rope_parameters(hp))
    if cls == "GraniteModel":  # GraniteModel.set_gguf_parameters: no head_dim (llama.cpp's is hidden / heads)
        hp.pop("head_dim", None)
    if cls == "Llama4Model":  # Llama4Model.__init__: the dense width is intermediate_size_mlp
        hp["intermediate_size_moe"], hp["intermediate_size"] = hp["intermediate_size"], hp["intermediate_size_mlp"]
    if cls == "DeepseekV2Model":  # latent attention converted as one KV head (MQA)
        hp["num_key_value_heads"] = 1
        hp["rms_norm_eps"] = hp.get("rms_norm_eps", 1e-6)
    rp = _rope_parameters(hp)
    kv = _text_model(hp, rp)
    if cls in ("LlamaModel", "Llama4Model", "GraniteModel"):
        kv["{arch}.vocab_size"] = hp["vocab_size"]
        kv["{arch}.rope.dimension_count"] = _head_dim(hp)
    if cls == "GraniteModel":  # each written only when truthy
        for key, name in (("attention.scale", "attention_multiplier"), ("embedding_scale", "embedding_multiplier"),
                          ("residual_scale", "residual_multiplier"), ("logit_scale", "logits_scaling")):
            if hp.get(name):
                kv["{arch}." + key] = float(hp[name])
    if cls == "Cohere2Model":
        kv["{arch}.logit_scale"] = float(hp["logit_scale"])
        kv["{arch}.attention.sliding_window"] = hp["sliding_window"]
        kv["{arch}.vocab_size"] = hp["vocab_size"]
        kv["{arch}.rope.dimension_count"] = int(hp["rotary_pct"] * (hp["hidden_size"] // hp["num_attention_heads"]))
        kv["{arch}.rope.scaling.type"] = "none"
    if cls == "Llama4Model":
        kv["{arch}.interleave_moe_layer_step"] = hp["interleave_moe_layer_step"]
        kv["{arch}.expert_feed_forward_length"] = hp["intermediate_size_moe"]
        if "layer_types" in hp and all(t == "full_attention" for t in hp["layer_types"]):
            kv["{arch}.attention.sliding_window"] = 0
    if cls in ("Qwen2MoeModel", "Qwen3MoeModel", "Qwen3NextModel", "Qwen3_5TextModel", "Qwen3_5MoeTextModel"):
        if hp.get("moe_intermediate_size") is not None:
            kv["{arch}.expert_feed_forward_length"] = hp["moe_intermediate_size"]
        if hp.get("shared_expert_intermediate_size") is not None:
            kv["{arch}.expert_shared_feed_forward_length"] = hp["shared_expert_intermediate_size"]
    if cls in ("Qwen3NextModel", "Qwen3_5TextModel", "Qwen3_5MoeTextModel"):
        kv.update({"{arch}.ssm.conv_kernel": hp["linear_conv_kernel_dim"],
                   "{arch}.ssm.state_size": hp["linear_key_head_dim"],
                   "{arch}.ssm.group_count": hp["linear_num_key_heads"],
                   "{arch}.ssm.time_step_rank": hp["linear_num_value_heads"],
                   "{arch}.ssm.inner_size": hp["linear_value_head_dim"] * hp["linear_num_value_heads"],
                   "{arch}.full_attention_interval": hp.get("full_attention_interval", 4)})
        if hp.get("layer_types") is not None:
            kv["{arch}.attention.recurrent_layers"] = [t == "linear_attention" for t in hp["layer_types"]]
        kv["{arch}.rope.dimension_count"] = int(_head_dim(hp) * rp.get("partial_rotary_factor", 0.25))
        if cls != "Qwen3NextModel" and "mrope_section" not in rp:
            kv["{arch}.rope.dimension_sections"] = [11, 11, 10, 0]
    if cls == "Gemma3Model":
        kv["{arch}.context_length"] = hp.get("max_position_embeddings", 131072)
        kv["{arch}.attention.head_count"] = hp.get("num_attention_heads", 8)
        kv["{arch}.attention.layer_norm_rms_epsilon"] = float(hp.get("rms_norm_eps", 1e-6))
        kv["{arch}.attention.key_length"] = kv["{arch}.attention.value_length"] = hp.get("head_dim", 256)
        kv["{arch}.rope.freq_base"] = float(rp.get("full_attention", rp).get("rope_theta", 1_000_000.0))
        if hp.get("final_logit_softcapping"):
            kv["{arch}.final_logit_softcapping"] = float(hp["final_logit_softcapping"])
        if hp.get("sliding_window_pattern") != 1:
            kv["{arch}.attention.sliding_window"] = hp["sliding_window"]
        kv["{arch}.attention.head_count_kv"] = hp.get("num_key_value_heads", 4)
    if cls == "DeepseekV2Model":
        moe = hp.get("n_routed_experts") is not None
        first = hp.get("first_k_dense_replace")
        kv["{arch}.leading_dense_block_count"] = (hp["num_hidden_layers"] if not moe else 0) if first is None else first
        rank = hp.get("kv_lora_rank", 512)
        kv["{arch}.vocab_size"] = hp["vocab_size"]
        if hp.get("q_lora_rank") is not None:
            kv["{arch}.attention.q_lora_rank"] = hp["q_lora_rank"]
        kv.update({"{arch}.attention.kv_lora_rank": rank,
                   "{arch}.attention.key_length": rank + hp["qk_rope_head_dim"],
                   "{arch}.attention.value_length": rank,
                   "{arch}.attention.key_length_mla": hp["qk_nope_head_dim"] + hp["qk_rope_head_dim"],
                   "{arch}.attention.value_length_mla": hp["v_head_dim"],
                   "{arch}.expert_feed_forward_length": _first(hp, ("moe_intermediate_size", "intermediate_size"))})
        if moe:
            kv["{arch}.expert_count"] = hp["n_routed_experts"]
        kv["{arch}.expert_shared_count"] = hp.get("n_shared_experts", 0)
        if hp.get("routed_scaling_factor") is not None:
            kv["{arch}.expert_weights_scale"] = float(hp["routed_scaling_factor"])
        if hp.get("norm_topk_prob"):
            kv["{arch}.expert_weights_norm"] = True
        kv["{arch}.rope.dimension_count"] = hp["qk_rope_head_dim"]
        if rp.get("mscale_all_dim") is not None:
            kv["{arch}.rope.scaling.yarn_log_multiplier"] = 0.1 * float(rp["mscale_all_dim"])
    if cls == "GptOssModel":
        kv["{arch}.attention.sliding_window"] = hp["sliding_window"]
        kv["{arch}.expert_feed_forward_length"] = hp["intermediate_size"]
    if cls == "Olmo2Model" and "sliding_window" in hp:
        kv["{arch}.attention.sliding_window"] = hp["sliding_window"]
        kv["{arch}.attention.sliding_window_pattern"] = [t == "sliding_attention" for t in hp["layer_types"]] \
            if "layer_types" in hp else [(i + 1) % 4 != 0 for i in range(hp["num_hidden_layers"])]
    return arch, kv


def extra_tensors(cfg: dict) -> dict[str, np.ndarray]:
    """``LlamaModel.generate_extra_tensors``: Llama 3's ``rope_freqs``, one divisor per frequency — computed, as the
    converter does, with the pretraining length from the top level of the config (8192 when it is only inside the
    rope parameters); ``Phi3MiniModel.generate_extra_tensors``: LongRoPE's long and short factors as given."""
    arch, cls = ARCHITECTURE[cfg["model_type"]]
    hp = hparams(cfg)
    params = _rope_parameters(hp)
    params = params.get("full_attention", params)
    if cls == "Phi3MiniModel":
        if not params.get("long_factor"):
            return {}
        return {"rope_factors_long.weight": np.asarray(params["long_factor"], dtype=np.float32),
                "rope_factors_short.weight": np.asarray(params["short_factor"], dtype=np.float32)}
    if cls not in ("LlamaModel", "Llama4Model", "GraniteModel", "DeciModel") \
            or str(params.get("rope_type", "")).lower() != "llama3":
        return {}
    base = params.get("rope_theta", 10000.0)
    dim = _head_dim(hp) if cls != "DeciModel" else hp["hidden_size"] // hp["num_attention_heads"]
    freqs = 1.0 / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    factor, low = params.get("factor", 8.0), params.get("low_freq_factor", 1.0)
    high = params.get("high_freq_factor", 4.0)
    # LlamaModel reads the pretraining length from the top level of the config, DeciModel from the rope parameters.
    old = (params if cls == "DeciModel" else hp).get("original_max_position_embeddings", 8192)
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / float(freq)
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return {"rope_freqs.weight": np.asarray(out, dtype=np.float32)}
