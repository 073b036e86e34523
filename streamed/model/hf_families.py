"""The model types whose layers differ from Llama's in more than their options: Gemma 2 and 3 (sandwich norms, logit
soft-capping, windowed and global layers), Phi-3 (fused ``qkv`` and ``gate_up``, LongRoPE), StarCoder2 (layer norms
with biases, a GELU MLP, biased projections), OLMo 2 (post-norms only, q/k norms over the whole projection) and
InternLM2 (a fused ``wqkv`` grouped per key/value head) — each read as its modelling code builds it: transformers 5's
``modeling_<type>.py``, and for InternLM2, which transformers does not ship, the published remote code
(``modeling_internlm2.py`` of the ``internlm/internlm2-*`` repositories).

Each builder has ``hf.py``'s signature ``(c, model_type, family, d, eps, layer_types, moe) → (layers, extra)``; the
fields are read through ``hf_config`` (the config's value, else the class default of ``hf_defaults``).
"""

from __future__ import annotations

import json
import math

from .hf_config import _Config, _activation, _heads, _no, _partial, _rotation, _scaling_note, _window
from .spec import Attention, Dense, LayerSpec, Norm, Rotation


def _gemma(c: _Config, model_type, family, d, eps, layer_types, moe):
    """Gemma 2 and Gemma 3: RMS norms of ``1 + g`` before and after each block, the embedding scaled by √d, logits
    scaled by ``query_pre_attn_scalar``, windowed and global layers, the scaled attention logits and the final logits
    soft-capped when ``attn_logit_softcapping`` and ``final_logit_softcapping`` say (Gemma 2's 50 and 30 by default,
    Gemma 3's none). Gemma 3 norms q and k per head and rotates its windowed layers at their own base."""
    gemma3 = family == "gemma3"
    heads, kv, hd = _heads(c, d)
    rot = _partial(c, hd)
    _no(c, "use_bidirectional_attention", "attention over the whole sequence (an encoder, EmbeddingGemma), not causal")
    bias = c.bool("attention_bias", False)
    norm = Norm(eps, 1.0)  # Gemma's RMSNorm multiplies by 1 + weight
    scalar = c.float("query_pre_attn_scalar", 256.0)
    if scalar <= 0:
        raise c.fail("query_pre_attn_scalar", f"is {scalar:g}; logits are scaled by its inverse square root, so it is positive")
    scale = scalar ** -0.5
    why = f"1/√{scalar:g}: Gemma scales logits by query_pre_attn_scalar, not the head width" if scale != hd ** -0.5 else None
    caps = {}
    for field in ("attn_logit_softcapping", "final_logit_softcapping"):
        caps[field] = c.float(field, None)
        if caps[field] is not None and caps[field] <= 0:
            raise c.fail(field, f"is {caps[field]:g}; a soft cap is positive (null for none)")
    grot, _ = _rotation(c, rot, "full_attention", 1_000_000.0 if gemma3 else 10_000.0)
    lparams = (c.dict("rope_parameters") or {}).get("sliding_attention")
    if not gemma3:
        lrot = grot
    elif isinstance(lparams, dict):
        lrot, _ = _rotation(c, rot, "sliding_attention", 10_000.0)
    else:
        lrot = Rotation(rot, c.float("rope_local_base_freq", 10_000.0))
    act = _activation(c, "hidden_activation", "gelu_pytorch_tanh") if c.has("hidden_activation") \
        else _activation(c, "hidden_act", "gelu_pytorch_tanh")
    common = dict(qk_norm=norm if gemma3 else None, bias=bias, out_bias=bias, scale=scale if why else None,
                  scale_why=why, softcap=caps["attn_logit_softcapping"])
    layers = []
    for i, t in enumerate(layer_types):
        if t == "sliding_attention":
            mixer = Attention(heads, kv, hd, lrot, window=_window(c), **common)
        elif t == "full_attention":
            mixer = Attention(heads, kv, hd, grot, **common)
        else:
            raise c.fail(f"layer_types[{i}]", f"is {json.dumps(t)}; a Gemma layer is sliding_attention or full_attention")
        layers.append(LayerSpec(mixer, Dense(c.int("intermediate_size"), act), norm, sandwich=True))
    notes = [("Global layers: " if gemma3 else "") + n for n in _scaling_note(grot)]
    return layers, {"notes": notes, "final_norm": norm, "embed_scale": math.sqrt(d),
                    "final_softcap": caps["final_logit_softcapping"]}


def _every_layer_window(c: _Config) -> int | None:
    """Phi-3's and StarCoder2's attention: ``sliding_window`` (when not null) on every layer."""
    return c.int("sliding_window") if c.has("sliding_window") else None


def _phi3(c: _Config, model_type, family, d, eps, layer_types, moe):
    """Phi-3: q, k and v one product (``qkv_proj``, queries then keys then values), the gate and up projections one
    (``gate_up_proj``, gate first), LongRoPE when ``rope_scaling`` says ``longrope`` (or ``su``, or ``yarn``, which
    Phi3Config reads as LongRoPE), ``sliding_window`` on every layer; no biases."""
    heads, kv, hd = _heads(c, d)
    key = "rope_parameters" if c.dict("rope_parameters") is not None else "rope_scaling"
    scaling = c.dict(key) or {}
    if (scaling.get("rope_type") or scaling.get("type")) == "yarn":
        fixed = {k: v for k, v in scaling.items() if k != "type"}
        c = _Config({**c.data, key: {**fixed, "rope_type": "longrope"}}, c.where, c.model_type, c.defaults)
    rot, _ = _rotation(c, _partial(c, hd))
    mixer = Attention(heads, kv, hd, rot, window=_every_layer_window(c), fused="qkv")
    ffn = Dense(c.int("intermediate_size"), _activation(c, "hidden_act", "silu"), fused=True)
    layers = [LayerSpec(mixer, ffn, Norm(eps)) for _ in layer_types]
    return layers, {"notes": _scaling_note(rot)}


def _starcoder2(c: _Config, model_type, family, d, eps, layer_types, moe):
    """StarCoder2: layer norms with biases (``norm_epsilon``), a GELU MLP that is not gated (``c_fc``, ``c_proj``),
    biases on every projection when ``use_bias``, ``sliding_window`` on every layer."""
    heads, kv, hd = _heads(c, d)
    rot, _ = _rotation(c, _partial(c, hd))
    bias = c.bool("use_bias", True)
    norm = Norm(c.float("norm_epsilon", 1e-5), layer=True, bias=True)
    mixer = Attention(heads, kv, hd, rot, window=_every_layer_window(c), bias=bias, out_bias=bias)
    ffn = Dense(c.int("intermediate_size"), _activation(c, "hidden_act", "gelu_pytorch_tanh"), gated=False, bias=bias)
    layers = [LayerSpec(mixer, ffn, norm) for _ in layer_types]
    return layers, {"notes": _scaling_note(rot), "final_norm": norm}


def _olmo2(c: _Config, model_type, family, d, eps, layer_types, moe):
    """OLMo 2: no norm before attention or the MLP; their outputs are normed (``post_attention_layernorm``,
    ``post_feedforward_layernorm``) before they join the residual; q and k are RMS-normed over the whole projection
    (``q_norm`` of heads × head_dim), before the rotation."""
    heads, kv, hd = _heads(c, d)
    rot, _ = _rotation(c, _partial(c, hd))
    bias = c.bool("attention_bias", False)
    norm = Norm(eps)
    mixer = Attention(heads, kv, hd, rot, qk_norm=norm, qk_norm_whole=True, bias=bias, out_bias=bias)
    ffn = Dense(c.int("intermediate_size"), _activation(c, "hidden_act", "silu"))
    layers = [LayerSpec(mixer, ffn, norm, sandwich=True, pre_norm=False) for _ in layer_types]
    return layers, {"notes": _scaling_note(rot)}


def _internlm2(c: _Config, model_type, family, d, eps, layer_types, moe):
    """InternLM2 (remote code): q, k and v one product, ``wqkv``, laid out per key/value head as its queries, its key
    and its value (``rearrange(…, "b q (h gs d) -> b q h gs d")``); biases on ``wqkv`` and ``wo`` when ``bias``."""
    heads, kv, hd = _heads(c, d)
    rot, _ = _rotation(c, _partial(c, hd))
    bias = c.bool("bias", True)
    mixer = Attention(heads, kv, hd, rot, bias=bias, out_bias=bias, fused="grouped")
    ffn = Dense(c.int("intermediate_size"), _activation(c, "hidden_act", "silu"))
    layers = [LayerSpec(mixer, ffn, Norm(eps)) for _ in layer_types]
    return layers, {"notes": _scaling_note(rot)}


BUILDERS = {"gemma2": _gemma, "gemma3": _gemma, "phi3": _phi3, "starcoder2": _starcoder2, "olmo2": _olmo2,
            "internlm2": _internlm2}
