"""Import a Hugging Face ``config.json`` as a ``ModelSpec``, reading each field exactly as transformers defines it.

Supported ``model_type``s: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, qwen3_next, qwen3_5, qwen3_5_moe
(text config nested under ``text_config``), gemma2, gemma3 / gemma3_text, deepseek_v2, deepseek_v3, llama4 /
llama4_text, gpt_oss, phi3, starcoder2, olmo2, internlm2 (its published remote code; ``hf_families`` builds these
five and the Gemmas); the vision-language Qwens' text models (qwen2_vl, qwen2_5_vl — text fields nested or flat —,
qwen3_vl, qwen3_vl_moe); and the vision-language wrappers in ``WRAPPERS`` (llava, mistral3…) around one of those text models. A
wrapper's text model is written as transformers holds it, under ``model.language_model.``; its vision tower is not.

Per-layer structure comes from ``layer_types`` when the config has it; otherwise it is derived the way the model's
configuration class and modelling code derive it (``full_attention_interval``, ``sliding_window_pattern``,
``first_k_dense_replace``, ``no_rope_layers``, ``interleave_moe_layer_step``, ``decoder_sparse_step`` with
``mlp_only_layers``, ``use_sliding_window`` with ``max_window_layers``…).

Invariant: a config either gives the model it describes or one ``SpecError`` naming the field and what is wrong —
never a traceback, never a silently different model. A field the config leaves out takes the default of the model's
configuration class (``hf_defaults.DEFAULTS``, from transformers' ``configuration_*.py``): published configs leave
many fields to it (Gemma 3's ``text_config`` omits its head counts). A field written ``null`` is null, as transformers
reads it (``"sliding_window": null`` is no window, ``"q_lora_rank": null`` no query bottleneck). A field the model
needs whose class default is null too (DeepSeek-V2's ``num_experts_per_tok``) is one error naming it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..lang.files import FileProblem, read_file
from ..lang.jsontext import JsonError, loads
from ..lang.limits import MAX_CONFIG_BYTES, MAX_CONTEXT, MAX_LAYER, beyond
from .hf_config import (
    _Config, _activation, _heads, _kind_of_layer, _mrope_note, _no, _partial, _rotation, _scaling_note, _window,
    _yarn_mscale,
)
from .hf_defaults import DEFAULTS
from .hf_blocks import BUILDERS as BLOCK_BUILDERS
from .hf_families import BUILDERS
from .spec import (Attention, Dense, Experts, GatedDeltaNet, LatentAttention, LayerSpec, ModelSpec, NOPE_NOTE, Norm,
                   SpecError)

__all__ = ["read_config", "spec_from_config", "SUPPORTED", "derive_layer_types"]

SUPPORTED = (
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_text",
    "qwen3_5_moe", "qwen3_5_moe_text", "gemma3", "gemma3_text", "deepseek_v2", "deepseek_v3", "llama4",
    "llama4_text", "gpt_oss", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text", "qwen3_vl",
    "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "gemma2", "phi3", "starcoder2", "olmo2", "internlm2",
    "granite", "cohere2", "nemotron-nas",
)

#: The fields that size a whole model: one left to its class default is said in the document (``ModelSpec.assumed``).
SIZING = ("num_hidden_layers", "hidden_size", "vocab_size")
LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")
#: Older names transformers still reads as these (``remap_legacy_layer_types``).
LEGACY_LAYER_TYPES = {"attention": "full_attention", "mamba": "linear_attention"}

#: A multimodal wrapper's text model: the ``model_type`` of its ``text_config`` (whose class defaults apply). Qwen2-VL
#: and Qwen2.5-VL configs may also hold the text fields flat, beside `vision_config`, as transformers still reads them.
TEXT_MODEL = {"gemma3": "gemma3_text", "llama4": "llama4_text", "qwen3_5": "qwen3_5_text",
              "qwen3_5_moe": "qwen3_5_moe_text", "qwen2_vl": "qwen2_vl_text", "qwen2_5_vl": "qwen2_5_vl_text",
              "qwen3_vl": "qwen3_vl_text", "qwen3_vl_moe": "qwen3_vl_moe_text"}
#: Vision-language wrappers whose text model (``text_config``, of any supported text model_type; the default named
#: here when it names none) transformers holds as ``model.language_model``. Others (Idefics3's ``text_model``…) are
#: not read: their parameter names are their own.
WRAPPERS = {"llava": "llama", "llava_next": "llama", "llava_next_video": "llama", "llava_onevision": "qwen2",
            "mistral3": "mistral", "internvl": "qwen2"}
#: A multimodal wrapper's own `tie_word_embeddings` default — which is what transformers ties its head by — and whether
#: its class forwards the text config's true to a false one of its own (those that saved it in `text_config` before
#: transformers 5).
OUTER_TIE = {"gemma3": (True, False), "llama4": (False, False), "qwen3_5": (False, False), "qwen3_5_moe": (False, False),
             "qwen2_vl": (False, True), "qwen2_5_vl": (False, True), "qwen3_vl": (False, False),
             "qwen3_vl_moe": (False, False), "llava": (False, True), "llava_next": (False, False),
             "llava_next_video": (False, True), "llava_onevision": (False, True), "mistral3": (True, False),
             "internvl": (True, False)}
#: The text model a vision-language one extends: the same layers, its rotation split in sections (mrope) that agree
#: for text.
_TEXT_BASE = {"qwen2_vl": "qwen2", "qwen2_vl_text": "qwen2", "qwen2_5_vl": "qwen2", "qwen2_5_vl_text": "qwen2",
              "qwen3_vl": "qwen3", "qwen3_vl_text": "qwen3", "qwen3_vl_moe": "qwen3_moe", "qwen3_vl_moe_text": "qwen3_moe"}


# ---- layer types ---------------------------------------------------------------------------------------------------


def derive_layer_types(c: _Config, n: int, family: str) -> list[str]:
    """The config's ``layer_types``, checked, or derived as the model's configuration class derives it."""
    if c.has("layer_types"):
        v = c.raw("layer_types")
        if not isinstance(v, list):
            raise c.fail("layer_types", f"must be a list of layer types, not {json.dumps(v)[:60]}")
        if len(v) != n:
            raise c.fail("layer_types", f"lists {len(v)} layers but `num_hidden_layers` is {n}")
        v = [LEGACY_LAYER_TYPES.get(t, t) if isinstance(t, str) else t for t in v]
        for i, t in enumerate(v):
            if t not in LAYER_TYPES:
                raise c.fail(f"layer_types[{i}]", f"is {json.dumps(t)}; a layer type is one of {', '.join(LAYER_TYPES)}")
        return v
    if family in ("qwen3_next", "qwen3_5"):
        interval = c.int("full_attention_interval", 4)
        return ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)]
    if family == "gemma3":
        # Saved by transformers ≥ 4.52 as `_sliding_window_pattern` (with `layer_types`); earlier without the `_`.
        field = "_sliding_window_pattern" if "_sliding_window_pattern" in c.data and "sliding_window_pattern" not in c.data else "sliding_window_pattern"
        pattern = c.int(field, 6)
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    if family in ("gpt_oss", "gemma2"):
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    if family == "cohere2":  # Cohere2Config: the last of every `sliding_window_pattern` layers is global
        pattern = c.int("sliding_window_pattern", 4)
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    if family == "llama4":
        return ["chunked_attention" if r else "full_attention" for r in _llama4_rope_layers(c, n)]
    if family in ("qwen2", "qwen3", "qwen_moe"):
        # Each configuration class's rule, all only with `use_sliding_window`: Qwen2, Qwen3 and the Qwen2-VLs slide from
        # layer `max_window_layers` on; Qwen2-MoE slides every other layer below it (from the first); Qwen3-MoE every
        # layer; the Qwen3-VLs never (their classes have no window).
        use = c.bool("use_sliding_window", False) and c.get("sliding_window") is not None
        if not use or c.model_type.startswith("qwen3_vl"):
            return ["full_attention"] * n
        if c.model_type == "qwen3_moe":
            return ["sliding_attention"] * n
        first = c.int("max_window_layers", 28, minimum=0)
        if c.model_type == "qwen2_moe":
            return ["sliding_attention" if (i + 1) % 2 and i < first else "full_attention" for i in range(n)]
        return ["sliding_attention" if i >= first else "full_attention" for i in range(n)]
    if family in ("mistral", "mixtral", "phi3", "starcoder2"):
        return ["sliding_attention" if c.has("sliding_window") else "full_attention"] * n
    return ["full_attention"] * n


def _llama4_rope_layers(c: _Config, n: int) -> list[int]:
    rope = c.int_list("no_rope_layers", []) if c.has("no_rope_layers") else []
    if not rope:
        interval = c.int("no_rope_layer_interval", 4)
        rope = [int((i + 1) % interval != 0) for i in range(n)]
    if len(rope) < n:
        raise c.fail("no_rope_layers", f"lists {len(rope)} layers but `num_hidden_layers` is {n}")
    return rope


def _moe_layers(c: _Config, n: int, family: str) -> list[bool]:
    """Which layers' feed-forward block is a mixture of experts, by the model's own rule."""
    if family == "deepseek":
        if not c.has("n_routed_experts"):
            return [False] * n
        # transformers' DeepSeek decoder layers: experts from `first_k_dense_replace` on (`moe_layer_freq` unread).
        first = c.int("first_k_dense_replace", 0, minimum=0)
        return [i >= first for i in range(n)]
    if family == "llama4":
        if c.has("moe_layers"):
            moe = set(c.int_list("moe_layers"))
        else:
            step = c.int("interleave_moe_layer_step", 1)
            moe = set(range(step - 1, n, step))
        return [i in moe for i in range(n)]
    if family == "qwen3_5_moe":  # every Qwen3.5-MoE decoder layer's block is experts
        return [True] * n
    if family in ("qwen_moe", "qwen3_next"):
        only = set(c.int_list("mlp_only_layers", [])) if c.has("mlp_only_layers") else set()
        step = c.int("decoder_sparse_step", 1)
        experts = c.int("num_experts")
        return [i not in only and experts > 0 and (i + 1) % step == 0 for i in range(n)]
    if family in ("gpt_oss", "mixtral"):
        return [True] * n
    return [False] * n


# ---- the import ----------------------------------------------------------------------------------------------------


#: model_type → (the family whose builder writes it, the stem of its transformers classes: ``Qwen3MoeForCausalLM``).
_TYPES = {
    "llama": ("llama", "Llama"), "mistral": ("mistral", "Mistral"), "mixtral": ("mixtral", "Mixtral"),
    "qwen2": ("qwen2", "Qwen2"),
    "qwen3": ("qwen3", "Qwen3"), "qwen2_moe": ("qwen_moe", "Qwen2Moe"), "qwen3_moe": ("qwen_moe", "Qwen3Moe"),
    "qwen3_next": ("qwen3_next", "Qwen3Next"), "qwen3_5": ("qwen3_5", "Qwen3_5"),
    "qwen3_5_text": ("qwen3_5", "Qwen3_5"), "qwen3_5_moe": ("qwen3_5_moe", "Qwen3_5Moe"),
    "qwen3_5_moe_text": ("qwen3_5_moe", "Qwen3_5Moe"), "gemma3": ("gemma3", "Gemma3"),
    "gemma3_text": ("gemma3", "Gemma3"), "deepseek_v2": ("deepseek", "DeepseekV2"),
    "deepseek_v3": ("deepseek", "DeepseekV3"), "llama4": ("llama4", "Llama4"), "llama4_text": ("llama4", "Llama4"),
    "gpt_oss": ("gpt_oss", "GptOss"), "qwen2_vl": ("qwen2", "Qwen2VL"), "qwen2_vl_text": ("qwen2", "Qwen2VL"),
    "qwen2_5_vl": ("qwen2", "Qwen2_5_VL"), "qwen2_5_vl_text": ("qwen2", "Qwen2_5_VL"), "qwen3_vl": ("qwen3", "Qwen3VL"),
    "qwen3_vl_text": ("qwen3", "Qwen3VL"), "qwen3_vl_moe": ("qwen_moe", "Qwen3VLMoe"),
    "qwen3_vl_moe_text": ("qwen_moe", "Qwen3VLMoe"),
    "gemma2": ("gemma2", "Gemma2"), "phi3": ("phi3", "Phi3"), "starcoder2": ("starcoder2", "Starcoder2"),
    "olmo2": ("olmo2", "Olmo2"), "internlm2": ("internlm2", "InternLM2"),
    "granite": ("granite", "Granite"), "cohere2": ("cohere2", "Cohere2"), "nemotron-nas": ("nemotron_nas", "DeciLM"),
}
_FAMILY = {t: family for t, (family, _) in _TYPES.items()}
_ARCH_STEM = {t: stem for t, (_, stem) in _TYPES.items()}


def _check_architectures(config: dict, where: str, model_type: str) -> None:
    """``architectures`` naming another supported model's class (``Qwen3MoeForCausalLM`` in a ``qwen3`` config) is
    a config at odds with itself: which model it is cannot be told, so it is refused. A class this tool does not know
    (a fine-tune's own) is left alone, as transformers leaves it: the model is built from ``model_type``."""
    archs = config.get("architectures")
    if archs is None:
        return
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise SpecError(f"{where}: `architectures` must be a list of class names, not {json.dumps(archs)[:60]}")
    stems = set(_ARCH_STEM.values())
    for a in archs:
        cut = min((i for i in (a.find("For"), a.find("Model")) if i > 0), default=-1)
        stem = a[:cut] if cut > 0 else None
        if stem in stems and stem != _ARCH_STEM[model_type]:
            raise SpecError(f"{where}: `architectures` names {a}, which is not a {model_type} model "
                            f"(`model_type` is {json.dumps(model_type)}; its classes are {_ARCH_STEM[model_type]}…)")


def spec_from_config(config: Any, where: str = "config.json", name: str | None = None) -> ModelSpec:
    """The ``ModelSpec`` a parsed ``config.json`` describes. Pure; raises ``SpecError`` naming the field."""
    if not isinstance(config, dict):
        raise SpecError(f"{where}: a config is a JSON object, not {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type is None:
        raise SpecError(f"{where}: `model_type` is missing; it names the architecture (one of {', '.join(SUPPORTED)})")
    if not isinstance(model_type, str):
        raise SpecError(f"{where}: `model_type` must be a string, not {json.dumps(model_type)}")
    wrapper = None
    text = config.get("text_config")
    inner = text.get("model_type", WRAPPERS.get(model_type)) if isinstance(text, dict) else None
    if model_type in WRAPPERS and isinstance(inner, str) and inner in _FAMILY and inner not in TEXT_MODEL:
        # A vision-language wrapper around a text model this tool writes: the text model, as transformers holds it
        # under `model.language_model.`; the vision tower is not written.
        wrapper, model_type = model_type, inner
    if model_type in WRAPPERS and wrapper is None and not isinstance(text, dict):
        raise SpecError(f"{where}: a {model_type} config describes its text model in `text_config`, which is missing")
    if model_type in WRAPPERS and wrapper is None and isinstance(inner, str):
        # A wrapper this tool reads, around a text model it does not (Ministral 3's `ministral3`, whose queries'
        # temperature grows with the position): the text model is what is not supported.
        raise SpecError(f"{where}: `model_type` {json.dumps(model_type)} is not supported with a "
                        f"`text_config.model_type` {json.dumps(inner)} (its text model is one of: "
                        f"{', '.join(t for t in SUPPORTED if t not in TEXT_MODEL)})")
    if model_type not in _FAMILY:
        raise SpecError(f"{where}: `model_type` {json.dumps(model_type)} is not supported (supported: {', '.join(SUPPORTED)})")
    _check_architectures(config if wrapper is None else text, where, model_type)
    data = config
    # A wrapper's text model lives under `model.language_model.`, whether its fields are nested or (Qwen2.5-VL) flat.
    prefix = "model.language_model." if model_type in TEXT_MODEL or wrapper else "model."
    text_where = where
    text_type = TEXT_MODEL.get(model_type, model_type)
    if (model_type in TEXT_MODEL or wrapper) and "text_config" in config:
        if not isinstance(text, dict):
            raise SpecError(f"{where}: `text_config` must be an object, not {json.dumps(text)[:60]}")
        inner = text.get("model_type", text_type)
        if inner not in (text_type, model_type):
            raise SpecError(f"{where}: `text_config.model_type` is {json.dumps(inner)}; a {model_type} model's text "
                            f"config is {text_type}")
        data = dict(text)
        text_where = f"{where}: text_config"
    family = _FAMILY[model_type]
    c = _Config(data, text_where, model_type, DEFAULTS.get(text_type, {}))
    n = c.int("num_hidden_layers", maximum=MAX_LAYER + 1)
    d = c.int("hidden_size")
    vocab = c.int("vocab_size")
    # Every supported class has a real default for these three (and for the widths, head counts and epsilon the
    # layers read); a config leaving one out is read as transformers reads it, but the document says so (a model
    # authored at LlamaConfig's 4096 × 32 layers, or its intermediate 11008, without a word would be a silently
    # different model).
    cls = f"{_ARCH_STEM[model_type]}{'Text' if text_type.endswith('_text') else ''}Config"
    eps = c.float("rms_norm_eps", 1e-6)
    layer_types = derive_layer_types(c, n, {"qwen3_5_moe": "qwen3_5"}.get(family, family))
    moe = _moe_layers(c, n, family)
    build = {
        "llama": _llama, "mistral": _llama, "mixtral": _llama, "qwen2": _llama, "qwen3": _llama, "qwen_moe": _llama,
        "qwen3_next": _qwen3_next, "qwen3_5": _qwen3_next, "qwen3_5_moe": _qwen3_next,
        "deepseek": _deepseek, "llama4": _llama4, "gpt_oss": _gpt_oss, **BUILDERS, **BLOCK_BUILDERS,
    }[family]
    layers, extra = build(c, model_type, family, d, eps, layer_types, moe)
    for layer in layers:
        if isinstance(layer.ffn, Experts) and layer.ffn.top_k > layer.ffn.count:
            raise c.fail("num_experts_per_tok", f"is {layer.ffn.top_k}, more than the {layer.ffn.count} experts there are")
    tied = _tied(c, config, wrapper or (model_type if model_type in TEXT_MODEL else None), where)
    # Every number the model took from its class default (the sizes first) is said, not only the three above.
    assumed = tuple(f"The config leaves out `{f}`: {v}, as transformers' {cls} derives it." if derived else
                    f"The config leaves out `{f}`: {v} is transformers' {cls} default." for f, (v, derived) in sorted(
                        c.defaulted.items(), key=lambda fv: SIZING.index(fv[0]) if fv[0] in SIZING else len(SIZING)))
    notes = list(extra.get("notes", ()))
    if wrapper:
        notes.insert(0, f"The text model of a {wrapper} config (its text_config); the vision tower is not written.")
    quant = config.get("quantization_config")
    if quant is not None and not isinstance(quant, dict):
        raise SpecError(f"{where}: `quantization_config` must be an object, not {json.dumps(quant)[:40]}")
    if quant:
        # MXFP4 (gpt-oss) is what llama.cpp stores too (`--storage mxfp4_moe`: the expert banks in 17 bytes per 32
        # values); any other method (FP8's blocks, GPTQ's packs…) is refused rather than assumed away.
        method = quant.get("quant_method")
        if method != "mxfp4":
            raise SpecError(f"{where}: `quantization_config.quant_method` is {json.dumps(method)[:40]}: a "
                            f"quantization the project does not model (mxfp4 is)")
        notes.append("The published checkpoint is quantized (mxfp4): its expert banks are stored MXFP4, 17 bytes per "
                     "32 values, as llama.cpp's MXFP4_MOE files store them — lower with `--storage mxfp4_moe` to "
                     "count them so; the bindings name transformers' dequantised parameters.")
    return ModelSpec(
        name=name or extra.get("name", model_type), architecture=model_type, d=d, vocab=vocab, layers=tuple(layers),
        final_norm=extra.get("final_norm", Norm(eps)), tied=tied, embed_scale=extra.get("embed_scale"),
        final_softcap=extra.get("final_softcap"), logit_scale=extra.get("logit_scale"),
        logit_scale_why=extra.get("logit_scale_why"), embed_scale_why=extra.get("embed_scale_why"),
        naming="hf", hf_prefix=prefix, source=where, notes=tuple(notes), assumed=assumed, trained=_trained(c),
        modelled=extra.get("modelled"), modelled_why=extra.get("modelled_why"),
    )


def _trained(c: _Config) -> int | None:
    """The context the model was trained at: ``max_position_embeddings`` (as transformers holds it), else its rope
    scaling's ``original_max_position_embeddings``; ``None`` when the config says neither."""
    scaling = c.dict("rope_scaling") or c.dict("rope_parameters") or {}
    for field, v in (("max_position_embeddings", c.get("max_position_embeddings")),
                     ("rope_scaling.original_max_position_embeddings", scaling.get("original_max_position_embeddings"))):
        if v is not None:
            why = beyond(v, MAX_CONTEXT)
            if why is not None:
                raise c.fail(field, why)
            return int(v)
    return None


def _tied(c: _Config, config: dict, outer: str | None, where: str) -> bool:
    """Whether the head is the embedding, as transformers ties it: by a wrapper's own ``tie_word_embeddings``
    (``OUTER_TIE``), else the text model's — and Mistral 3's by its text model's: transformers 5 ties every Mistral 3
    whose top level is silent (transformers#43429), discarding Mistral-Small's ``lm_head.weight`` (vLLM#51063)."""
    text = c.bool("tie_word_embeddings", False)
    if outer is None or outer == "mistral3":
        return text
    default, forwards = OUTER_TIE[outer]
    stated = config.get("tie_word_embeddings", default)
    if not isinstance(stated, bool):
        raise SpecError(f"{where}: `tie_word_embeddings` must be true or false, not {json.dumps(stated)}")
    return stated or (forwards and text)


def _llama(c, model_type, family, d, eps, layer_types, moe):
    model_type = _TEXT_BASE.get(model_type, model_type)
    heads, kv, hd = _heads(c, d)
    rot, _ = _rotation(c, _partial(c, hd))
    qwen = family in ("qwen2", "qwen3", "qwen_moe")
    # Qwen2 always biases q, k and v; Qwen2-MoE as its `qkv_bias` says (True by default).
    if model_type == "qwen2":
        bias = True
    elif model_type == "qwen2_moe":
        bias = c.bool("qkv_bias", True)
    else:
        bias = c.bool("attention_bias", False)
    out_bias = False if model_type in ("qwen2", "qwen2_moe") else bias
    if family == "llama":
        _no(c, "mlp_bias", "biases on the feed-forward projections")
    qk_norm = Norm(eps) if model_type in ("qwen3", "qwen3_moe") else None
    act = _activation(c, "hidden_act", "silu")
    norm = Norm(eps)
    layers = []
    for i in range(len(layer_types)):
        t = _kind_of_layer(c, i, layer_types[i], ("full_attention", "sliding_attention"), model_type)
        # Qwen2/Qwen3 attend through their window only when `use_sliding_window` says so, whatever the layer type.
        windowed = t == "sliding_attention" and (not qwen or c.bool("use_sliding_window", False))
        window = _window(c) if windowed else None
        mixer = Attention(heads, kv, hd, rot, window=window, qk_norm=qk_norm, bias=bias, out_bias=out_bias)
        if moe[i] and family == "mixtral":
            ffn = Experts(c.int("num_local_experts"), c.int("num_experts_per_tok"), c.int("intermediate_size"),
                          normalized=True)
        elif moe[i]:
            # Qwen3-VL-MoE's router always renormalises (its class has no `norm_topk_prob`).
            ffn = Experts(c.int("num_experts"), c.int("num_experts_per_tok"), c.int("moe_intermediate_size"),
                          normalized=True if c.model_type.startswith("qwen3_vl") else c.bool("norm_topk_prob", False),
                          shared_width=c.int("shared_expert_intermediate_size", None) if model_type == "qwen2_moe" else None,
                          shared_gate=model_type == "qwen2_moe")
        else:
            ffn = Dense(c.int("intermediate_size"), act)
        layers.append(LayerSpec(mixer, ffn, norm))
    return layers, {"notes": _scaling_note(rot) + _mrope_note(c)}


def _qwen3_next(c, model_type, family, d, eps, layer_types, moe):
    heads, kv, hd = _heads(c, d)
    rot, _ = _rotation(c, _partial(c, hd))
    norm = Norm(eps, 1.0)  # Qwen3-Next's RMSNorm multiplies by 1 + weight
    gdn = GatedDeltaNet(c.int("linear_num_key_heads"), c.int("linear_num_value_heads"), c.int("linear_key_head_dim"),
                        c.int("linear_value_head_dim"), c.int("linear_conv_kernel_dim"), Norm(eps))
    if gdn.value_heads % gdn.key_heads:
        raise c.fail("linear_num_value_heads", f"is {gdn.value_heads}, not a multiple of `linear_num_key_heads` ({gdn.key_heads})")
    layers = []
    for i, t in enumerate(layer_types):
        if t == "linear_attention":
            mixer = gdn
        elif t == "full_attention":
            mixer = Attention(heads, kv, hd, rot, qk_norm=norm, gated=True, bias=c.bool("attention_bias", False),
                              out_bias=c.bool("attention_bias", False))
        else:
            raise c.fail(f"layer_types[{i}]", f"is {json.dumps(t)}; a {model_type} layer is linear_attention or full_attention")
        if family == "qwen3_5" or not moe[i]:
            ffn = Dense(c.int("intermediate_size"), _activation(c, "hidden_act", "silu"))
        else:
            shared = c.int("shared_expert_intermediate_size", None) if c.has("shared_expert_intermediate_size") else None
            ffn = Experts(c.int("num_experts"), c.int("num_experts_per_tok"), c.int("moe_intermediate_size"),
                          # Qwen3.5-MoE's router always renormalises (its modelling code reads no `norm_topk_prob`).
                          normalized=True if family == "qwen3_5_moe" else c.bool("norm_topk_prob", True),
                          shared_width=shared, shared_gate=shared is not None)
        layers.append(LayerSpec(mixer, ffn, norm))
    return layers, {"notes": _scaling_note(rot) + _mrope_note(c), "final_norm": norm}


def _deepseek(c, model_type, family, d, eps, layer_types, moe):
    _no(c, "attention_bias", "biases on the latent attention's projections")
    heads = c.int("num_attention_heads")
    q_rank = c.int("q_lora_rank") if c.has("q_lora_rank") else None
    nope, rope_dim, v = c.int("qk_nope_head_dim"), c.int("qk_rope_head_dim"), c.int("v_head_dim")
    # transformers' DeepSeek-V2 rotates adjacent pairs (its rotary embedding is complex multiplication); V3 as its
    # `rope_interleave` says (true by default).
    interleaved = model_type == "deepseek_v2" or c.bool("rope_interleave", True)
    rotation, params = _rotation(c, rope_dim, skip=nope, interleaved=interleaved)
    scale, why = None, None
    mall = params.get("mscale_all_dim") if params else None
    if params and mall:
        factor = params.get("factor", 1.0)
        for key, value in (("mscale_all_dim", mall), ("factor", factor)):
            if beyond(value, math.inf, minimum=0, whole=False):
                raise c.fail("rope_scaling", f"has `{key}` {json.dumps(value)[:40]}; it is a positive number")
        m = _yarn_mscale(float(factor), float(mall))
        scale = (nope + rope_dim) ** -0.5 * m * m
        why = f"1/√{nope + rope_dim} × {m:.4f}²: yarn's attention scale (mscale_all_dim {mall:g})"
    mla = LatentAttention(heads, q_rank, c.int("kv_lora_rank"), nope, rope_dim, v, rotation, scale, why)
    norm = Norm(eps)
    layers = []
    for i in range(len(layer_types)):
        if moe[i]:
            shared = c.int("n_shared_experts", 0, minimum=0)
            width = c.int("moe_intermediate_size")
            ffn = Experts(c.int("n_routed_experts"), c.int("num_experts_per_tok"), width,
                          routed_scale=c.float("routed_scaling_factor", 1.0),
                          shared_width=width * shared if shared else None, **_deepseek_router(c, model_type))
        else:
            ffn = Dense(c.int("intermediate_size"), _activation(c, "hidden_act", "silu"))
        layers.append(LayerSpec(mla, ffn, norm))
    notes = _scaling_note(rotation)
    if model_type == "deepseek_v2" and any(isinstance(l.ffn, Experts) and l.ffn.groups for l in layers):
        notes.append("transformers ranks a DeepSeek-V2 expert group by its best score; the language's groups rank by "
                     "their two best, as llama.cpp does for DeepSeek-V2 and transformers for V3.")
    return layers, {"notes": notes}


def _deepseek_router(c: _Config, model_type: str) -> dict:
    """transformers' DeepSeek routers. V2: softmax, the top-k of all (``greedy``) or of the best ``topk_group`` of
    ``n_group`` groups (``group_limited_greedy``), never renormalised (``scoring_func``, ``norm_topk_prob`` unread).
    V3: sigmoid with a selection bias within the best groups, renormalised as ``norm_topk_prob`` says (``scoring_func``,
    ``topk_method`` unread)."""
    if model_type == "deepseek_v3":
        groups = c.int("n_group", 1)
        return dict(scoring="sigmoid", normalized=c.bool("norm_topk_prob", True), selection_bias=True,
                    groups=groups if groups > 1 else None, keep_groups=c.int("topk_group") if groups > 1 else None)
    method = c.str("topk_method", "greedy")
    if method not in ("greedy", "group_limited_greedy"):
        raise c.fail("topk_method", f"is {json.dumps(method)}; a DeepSeek-V2 router is greedy or group_limited_greedy")
    groups = c.int("n_group", 1) if method == "group_limited_greedy" else 1
    return dict(groups=groups if groups > 1 else None, keep_groups=c.int("topk_group", 1) if groups > 1 else None)


def _llama4(c, model_type, family, d, eps, layer_types, moe):
    heads, kv, hd = _heads(c, d)
    # transformers' Llama 4 rotates adjacent pairs (its rotary embedding is complex multiplication).
    rotation, _ = _rotation(c, _partial(c, hd), default_base=500_000.0, interleaved=True)
    rope_layers = _llama4_rope_layers(c, len(layer_types))
    qk_l2 = c.bool("use_qk_norm", True)
    # Published Llama 4 configs write `attn_temperature_tuning: 4`; transformers 4.x reads it as truthy.
    tuning = c.raw("attn_temperature_tuning", True)
    if not isinstance(tuning, (bool, int)):
        raise c.fail("attn_temperature_tuning", f"must be true or false, not {json.dumps(tuning)}")
    temperature = _llama4_temperature(c, tuning, rope_layers)
    norm = Norm(eps)
    layers = []
    for i, t in enumerate(layer_types):
        _kind_of_layer(c, i, t, ("chunked_attention", "full_attention"), "Llama 4")
        rope = bool(rope_layers[i])
        # `attention_chunk_size: null` is no chunking: the layer attends to all it has seen, as transformers does.
        chunk = c.int("attention_chunk_size") if t == "chunked_attention" and c.has("attention_chunk_size") else None
        notes = () if rope or not temperature else (NOPE_NOTE,)
        mixer = Attention(heads, kv, hd, rotation if rope else None, chunk=chunk,
                          qk_l2=qk_l2 and rope, bias=c.bool("attention_bias", False),
                          out_bias=c.bool("attention_bias", False), notes=notes)
        if moe[i]:
            ffn = Experts(c.int("num_local_experts"), c.int("num_experts_per_tok", 1), c.int("intermediate_size"),
                          scoring="sigmoid", weighting_inputs=True, shared_width=c.int("intermediate_size"))
        else:
            ffn = Dense(c.int("intermediate_size_mlp"), _activation(c, "hidden_act", "silu"))
        layers.append(LayerSpec(mixer, ffn, norm))
    return layers, {"notes": _scaling_note(rotation), **temperature}


def _llama4_temperature(c, tuning, rope_layers) -> dict:
    """Llama 4's query temperature on its NoPE layers — transformers multiplies their queries by
    ``log1p(floor((p + 1)/floor_scale))·attn_scale + 1`` — as what the document leaves out: exactly 1 for the first
    ``floor_scale − 1`` positions, which the document then computes as the model does (``modelled``); past them it
    is refused, not approximated. Nothing when no layer is NoPE, tuning is off or ``attn_scale`` is 0."""
    if not tuning or all(rope_layers) or c.float("attn_scale", 0.1) == 0:
        return {}
    floor = c.int("floor_scale", 8192)
    if floor < 2:
        raise c.fail("floor_scale", f"is {floor}: Llama 4's query temperature then scales the queries from the "
                                    f"first position, which the language does not express")
    return {"modelled": floor - 1,
            "modelled_why": f"Llama 4's NoPE layers scale their queries by a temperature (attn_temperature_tuning) "
                            f"that is 1 only before position floor_scale − 1 = {floor - 1:,}, and is not written"}



def _gpt_oss(c, model_type, family, d, eps, layer_types, moe):
    heads, kv, hd = _heads(c, d)
    rotation, _ = _rotation(c, _partial(c, hd), default_base=150_000.0)
    bias = c.bool("attention_bias", True)
    norm = Norm(c.float("rms_norm_eps", 1e-5))
    experts = Experts(c.int("num_local_experts"), c.int("num_experts_per_tok", c.data.get("experts_per_token", 4)),
                      c.int("intermediate_size"), normalized=True, router_bias=True, expert_biases=True,
                      clamp=c.float("swiglu_limit", 7.0))
    layers = []
    for i, t in enumerate(layer_types):
        _kind_of_layer(c, i, t, ("sliding_attention", "full_attention"), "gpt-oss")
        window = _window(c) if t == "sliding_attention" else None
        mixer = Attention(heads, kv, hd, rotation, window=window, bias=bias, out_bias=bias, sinks=True)
        layers.append(LayerSpec(mixer, experts, norm))
    notes = _scaling_note(rotation)
    notes.append("The router's top-k logits are softmaxed among themselves: softmax over all experts, normalized.")
    return layers, {"notes": notes, "final_norm": norm}


def read_config(path: str | Path, name: str | None = None) -> ModelSpec:
    """The spec of the ``config.json`` at ``path``; a ``SpecError`` naming the file and the field on any fault."""
    try:
        raw = read_file(path, MAX_CONFIG_BYTES, "a config.json")  # a regular file, its size checked first
    except FileProblem as e:
        raise SpecError(str(e)) from None
    try:
        config = loads(raw)
    except JsonError as e:
        raise SpecError(f"{path}: {e}") from None
    return spec_from_config(config, str(path), name)
