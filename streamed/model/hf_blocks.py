"""The model types whose layers differ from Llama's in how their blocks join the residual stream: Granite (each block's
output, the embedding, the attention logits and the final logits scaled by the config's multipliers), Cohere 2
(attention and the MLP side by side on one LayerNorm, sliding layers that rotate and global ones that do not, scaled
logits) and Nemotron-NAS (every layer its own ``block_configs`` entry: attention with its own key/value grouping,
removed or replaced by one product; a feed-forward block of its own width, removed or replaced) — each read as its
modelling code builds it: transformers 5's ``modeling_granite.py`` and ``modeling_cohere2.py``, and for
Nemotron-NAS, which transformers does not ship, the published remote code (``configuration_decilm.py``,
``block_config.py`` and ``modeling_decilm.py`` of the ``nvidia/Llama-3_1-Nemotron-51B-Instruct`` and
``-Super-49B-v1`` repositories).

Each builder has ``hf.py``'s signature ``(c, model_type, family, d, eps, layer_types, moe) → (layers, extra)``; the
fields are read through ``hf_config`` (the config's value, else the class default of ``hf_defaults``).
"""

from __future__ import annotations

import json
from typing import Any

from ..lang.limits import MAX_DIMENSION, beyond
from .hf_config import _Config, _activation, _heads, _partial, _rotation, _scaling_note, _window
from .spec import Attention, Dense, LayerSpec, Linear, Norm


def _multiplier(c: _Config, field: str) -> float | None:
    """A Granite multiplier: a finite number other than 0 (``None`` when it is 1, which changes nothing)."""
    v = c.float(field, 1.0)
    if v == 0:
        raise c.fail(field, "is 0; a multiplier of 0 would erase what it scales")
    return None if v == 1 else v


def _granite(c: _Config, model_type, family, d, eps, layer_types, moe):
    """Granite: Llama's layers with four multipliers — the embedding times ``embedding_multiplier``, the attention
    logits times ``attention_multiplier`` (in place of 1/√head width), each block's output times
    ``residual_multiplier`` before it joins the residual, the logits divided by ``logits_scaling`` — and biases on the
    attention projections when ``attention_bias``, on the MLP's when ``mlp_bias``."""
    heads, kv, hd = _heads(c, d)
    rot, _ = _rotation(c, _partial(c, hd))
    bias = c.bool("attention_bias", False)
    attention = c.float("attention_multiplier", 1.0)
    if attention == 0:  # as every other multiplier's 0 (``_multiplier``): all logits 0 is no attention at all
        raise c.fail("attention_multiplier", "is 0; a multiplier of 0 would erase what it scales")
    scale = None if attention == hd ** -0.5 else attention
    why = "Granite's attention_multiplier, in place of 1/√head width" if scale is not None else None
    mixer = Attention(heads, kv, hd, rot, bias=bias, out_bias=bias, scale=scale, scale_why=why)
    ffn = Dense(c.int("intermediate_size"), _activation(c, "hidden_act", "silu"), bias=c.bool("mlp_bias", False))
    layers = [LayerSpec(mixer, ffn, Norm(eps), residual_scale=_multiplier(c, "residual_multiplier"))
              for _ in layer_types]
    extra: dict[str, Any] = {"notes": _scaling_note(rot)}
    embed = _multiplier(c, "embedding_multiplier")
    if embed is not None:
        extra.update(embed_scale=embed, embed_scale_why="Granite's embedding_multiplier")
    logits = _multiplier(c, "logits_scaling")
    if logits is not None:
        extra.update(logit_scale=1 / logits,
                     logit_scale_why=f"1/{logits:g}: Granite divides its logits by logits_scaling")
    return layers, extra


def _cohere2(c: _Config, model_type, family, d, eps, layer_types, moe):
    """Cohere 2 (Command R7B): one LayerNorm without a bias (``layer_norm_eps``) feeds attention and the MLP side by
    side, and both join the residual; sliding layers attend through ``sliding_window`` and rotate their queries and
    keys in adjacent pairs (Cohere's ``rotate_half`` interleaves), global layers do not rotate at all; the logits are
    multiplied by ``logit_scale``; q, k, v and o biased when ``attention_bias``. With ``sliding_window`` null, a
    sliding layer neither slides nor rotates (``Cohere2Attention`` rotates only where it has a window)."""
    heads, kv, hd = _heads(c, d)
    rot, _ = _rotation(c, hd, interleaved=True)
    norm = Norm(c.float("layer_norm_eps", 1e-5), layer=True)
    bias = c.bool("attention_bias", False)
    ffn = Dense(c.int("intermediate_size"), _activation(c, "hidden_act", "silu"))
    window = _window(c) if c.has("sliding_window") else None
    layers = []
    for i, t in enumerate(layer_types):
        if t == "sliding_attention":
            mixer = Attention(heads, kv, hd, rot if window else None, window=window, bias=bias, out_bias=bias)
        elif t == "full_attention":
            mixer = Attention(heads, kv, hd, None, bias=bias, out_bias=bias)
        else:
            raise c.fail(f"layer_types[{i}]",
                         f"is {json.dumps(t)}; a Cohere 2 layer is sliding_attention or full_attention")
        layers.append(LayerSpec(mixer, ffn, norm, parallel=True))
    scale = c.float("logit_scale", 0.0625)
    return layers, {"notes": _scaling_note(rot), "final_norm": norm, "logit_scale": None if scale == 1 else scale,
                    "logit_scale_why": "Cohere's logit_scale"}


# ---- Nemotron-NAS ----------------------------------------------------------------------------------------------

#: A block's fields the remote code reads and the language does not express, with the value that changes nothing.
_UNREAD_ATTENTION = {"sparsify": None, "window_length": None, "num_sink_tokens": None, "unshifted_sink": False,
                     "use_prefill_window_in_sink_attention": False}
_UNREAD_FFN = {"sparsify": None}


def ffn_mult_width(ffn_mult: float, d: int) -> int:
    """The remote code's ``_ffn_mult_to_intermediate_size``: ``int(2·ffn_mult·d/3)`` rounded up to a multiple of
    256 (llama.cpp's converter writes the same widths)."""
    width = int(2 * ffn_mult * d / 3)
    return width if width % 256 == 0 else width + 256 - width % 256


def _flag(c: _Config, where: str, block: dict, key: str) -> bool:
    v = block.get(key, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise c.fail(f"{where}.{key}", f"must be true or false, not {json.dumps(v)[:40]}")
    return v


def _block(c: _Config, i: int, entry: Any, part: str, unread: dict) -> tuple[dict, str | None]:
    """``block_configs[i].<part>`` and what it is: ``"no_op"`` (removed), ``"linear"`` (one product in its place) or
    ``None`` (the block itself), after refusing the fields the language does not express."""
    where = f"block_configs[{i}].{part}"
    block = entry.get(part) or {}
    if not isinstance(block, dict):
        raise c.fail(where, f"must be an object, not {json.dumps(block)[:60]}")
    for key, inert in unread.items():
        if block.get(key, inert) not in (inert, None, False):
            raise c.fail(f"{where}.{key}", f"is {json.dumps(block[key])[:40]}: the language does not express it")
    removed, linear = _flag(c, where, block, "no_op"), _flag(c, where, block, "replace_with_linear")
    if removed and linear:
        raise c.fail(where, "is both `no_op` and `replace_with_linear`: a block is removed or replaced, not both")
    return block, "no_op" if removed else "linear" if linear else None


def _nemotron_nas(c: _Config, model_type, family, d, eps, layer_types, moe):
    """Nemotron-NAS: a Llama whose layer ``i`` is ``block_configs[i]``. Its attention is removed (``no_op``: the
    residual passes by, no norm), one ``d by d`` product on the normed input (``replace_with_linear``), or grouped-query
    attention of ``num_attention_heads`` heads sharing ``num_attention_heads / n_heads_in_group`` key/value heads; its
    feed-forward block is removed, one product, or a SwiGLU of ``ffn_mult``'s width (``ffn_mult_width``). Heads are
    ``hidden_size / num_attention_heads`` wide; biases as ``attention_bias`` and ``mlp_bias`` say."""
    heads = c.int("num_attention_heads")
    if d % heads:
        raise c.fail("num_attention_heads", f"is {heads}, which does not divide `hidden_size` ({d})")
    hd = d // heads
    rot, _ = _rotation(c, _partial(c, hd))
    bias, mlp_bias = c.bool("attention_bias", False), c.bool("mlp_bias", False)
    act = _activation(c, "hidden_act", "silu")
    blocks = c.raw("block_configs")
    if not isinstance(blocks, list):
        raise c.fail("block_configs", f"must be a list of blocks, one a layer, not {json.dumps(blocks)[:60]}")
    if len(blocks) != len(layer_types):
        raise c.fail("block_configs", f"lists {len(blocks)} blocks but `num_hidden_layers` is {len(layer_types)}")
    layers = []
    for i, entry in enumerate(blocks):
        where = f"block_configs[{i}]"
        if not isinstance(entry, dict):
            raise c.fail(where, f"must be an object, not {json.dumps(entry)[:60]}")
        (att, mixing), (ffn, feeding) = (_block(c, i, entry, "attention", _UNREAD_ATTENTION),
                                         _block(c, i, entry, "ffn", _UNREAD_FFN))
        mixer = feed = None
        if mixing == "linear":
            mixer = Linear()
        elif mixing is None:
            group = att.get("n_heads_in_group")
            why = beyond(group, heads, minimum=1)
            if why is None and heads % group:
                why = f"is {group}, which does not divide `num_attention_heads` ({heads})"
            if why is not None:
                raise c.fail(f"{where}.attention.n_heads_in_group", why)
            mixer = Attention(heads, heads // int(group), hd, rot, bias=bias, out_bias=bias)
        if feeding == "linear":
            feed = Linear()
        elif feeding is None:
            mult = ffn.get("ffn_mult")
            if beyond(mult, MAX_DIMENSION, minimum=0, whole=False) is not None or mult <= 0:
                raise c.fail(f"{where}.ffn.ffn_mult", f"must be a positive number, not {json.dumps(mult)[:40]}")
            width = ffn_mult_width(float(mult), d)
            if beyond(width, MAX_DIMENSION) is not None:
                raise c.fail(f"{where}.ffn.ffn_mult", f"is {mult:g}: a feed-forward block {width:,} wide, past the "
                                                      f"limit of {MAX_DIMENSION:,}")
            feed = Dense(width, act, bias=mlp_bias)
        layers.append(LayerSpec(mixer, feed, Norm(eps)))
    return layers, {"notes": _scaling_note(rot)}


BUILDERS = {"granite": _granite, "cohere2": _cohere2, "nemotron_nas": _nemotron_nas}
