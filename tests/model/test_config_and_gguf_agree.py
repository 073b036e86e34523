"""Authoring from a config.json and from a GGUF carrying the same hyperparameters gives one program up to names — so
what the llama.cpp oracle establishes for the GGUF route holds for the config route too.

Each shipped config (``examples/configs/``, and the test configs whose conversion those do not show) keeps its layer
count, layer types, head widths, rotations and their scaling; only its widths shrink (hidden size, heads, experts,
vocabulary), so that the GGUF llama.cpp's converter would write for it (``oracle.write``) is small. That GGUF's
metadata is the converter's, read from transformers' resolved config (``convert``), never from ``streamed``'s reading:
a field ``model.hf`` misreads makes the two documents differ here. The two documents' programs — every section but the title and the
``## Checkpoint`` bindings, comments dropped — must be equal once the checkpoint's own storage conventions (and
the orders of arithmetic llama.cpp's graph computes and its document states) are accounted for, and each convention
must be one the architecture's converter or graph really applies (``CONVENTIONS``): no other difference passes.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

import oracle
from repo import ROOT, config, without_refused
from streamed.model.author import author, number32
from streamed.model.float32 import f32
from streamed.model.gguf import read_gguf
from streamed.model.hf import spec_from_config

#: How llama.cpp's converter stores a weight differently from transformers, or llama.cpp's graph orders a computation
#: otherwise (the GGUF's document states llama.cpp's order), and how that shows in the program; each a (pattern in the
#: config's program, what the GGUF's program has instead).
CONVENTIONS = {
    # InternLM2's converter splits wqkv — per key/value head its queries, its key, its value — into attn_q, attn_k
    # and attn_v (and permutes q and k, the convention below); first, so that the lines below align.
    "wqkv split into q, k and v": (
        r"(?s)Let Wqkv(\d+) be a q8 weight of d by (\d+)\.\n(.*?)Let qkv\1 be (\w+) times Wqkv\1\.\n"
        r"Let qp\1 be columns 0 to (\d+) of qkv\1, of every (\d+)\.\nLet kp\1 be columns \d+ to (\d+) of qkv\1, of every \d+\.\n"
        r"(.*?)Set row pos of Vc\1 to columns \d+ to \d+ of qkv\1, of every \d+\.",
        lambda m: _split_wqkv(*m.groups())),
    # Gemma, Qwen3-Next and Qwen3.5 multiply by 1 + g; the converter stores g + 1.
    "gain stored with its +1": (r", offset 1\b", ""),
    # Qwen3-Next/3.5 keep A_log; the converter stores −exp(A_log).
    "decay's A stored as −exp(A_log)": (r"multiplied by \(exp of (\w+)\)\.\n(Let dc\d+ be )exp of \((gt\d+) scaled by -1\)",
                                        r"multiplied by \1.\n\2exp of \3"),
    # transformers' Llama rotates halves; the converter permutes q and k for llama.cpp's adjacent pairs.
    "q and k permuted for interleaved pairs": (r"(rope of [^\n]*heads \d+)\.", r"\1, interleaved."),
    # transformers scales Gated DeltaNet's q by 1/√dk before the recurrence; llama.cpp's fused ggml_gated_delta_net
    # scales its output by 1/sqrtf(dv) after it (dk = dv in both models).
    "q's scale after the recurrence": (
        r"(?s)(Let qh(\d+) be )\(l2norm of (\w+), epsilon ([^,]+), heads (\d+)\) scaled by ([\d.]+)\.(.*?"
        r"gated delta of qh\2, [^\n]*?)\.\n", lambda m: _scaled_after(*m.groups())),
    # the converter reorders Qwen3.5's value heads to take the key heads in turn.
    "value heads reordered in turn": (r"(gated delta [^\n]*heads \d+ sharing \d+)(?=[.,])", r"\1, in turn"),
    # transformers' gpt-oss leaves YaRN's ramp unrounded (truncate: false); llama.cpp always rounds it.
    "yarn ramp rounded": (r", unrounded ramp", ""),
    # transformers windows every Phi-3 and StarCoder2 layer by `sliding_window`; llama.cpp's graphs have no window
    # (Phi-3's reads the key and disables it).
    "no window in llama.cpp's graph": (r", window \d+", ""),
    # transformers' Gemma scales the attention logits by 1/√query_pre_attn_scalar; llama.cpp's Gemma graphs scale the
    # rotated queries by f_attention_scale, 1.0f/sqrtf(width) in float32, and attend at a scale of 1.
    "queries scaled before attention": (
        r"(?s)Let Kc(\d+) be a state of ctx by (\d+)\.(.*?\nSet row pos of Vc\1 to [^\n]*\.)\nLet a\1 be attention of "
        r"(\w+) over (Kc\1 and Vc\1 at pos, heads \d+ sharing (\d+)(?:, window \d+)?)(?:, scale ([\d.e-]+?))?"
        r"((?:, soft cap [\d.]+?)?)\.\n", lambda m: _queries_scaled(*m.groups())),
    # transformers' Qwen2-MoE gates its shared expert by sigmoid(g), llama.cpp's graph by silu(g)/g.
    "shared gate as silu's quotient": (r"(, shared gate \w+)(?=[.,])", r"\1, quotient gate"),
    # transformers' Cohere 2 adds a layer's outputs as (x + attention) + MLP, llama.cpp's graph as (MLP + x) + attention.
    "feed-forward block added first": (r"(?s)Let h(\d+) be (\w+) plus (\w+)\.\n(.*?)Let xo\1 be h\1 plus (\w+)\.",
                                       r"\4Let h\1 be \2 plus \5.\nLet xo\1 be h\1 plus \3."),
}


def _queries_scaled(l, kv_width, between, q, attend, sharing, scale, cap):
    """Gemma's attention as llama.cpp's graph computes it: the rotated queries times llama.cpp's float32
    ``1/sqrtf(width)`` (the width ``query_pre_attn_scalar``, the head's unless the config's scale says), then attention
    at a scale of 1."""
    width = round(1 / float(scale) ** 2) if scale else int(kv_width) // int(sharing)
    return (f"Let Kc{l} be a state of ctx by {kv_width}.{between}\n"
            f"Let qs{l} be {q} scaled by {number32(f32(1 / f32(math.sqrt(width))))}.\n"
            f"Let a{l} be attention of qs{l} over {attend}, scale 1{cap}.\n")


def _scaled_after(let, l, x, eps, heads, scale, between):
    """Gated DeltaNet's q left unscaled and the recurrence's output scaled, by llama.cpp's float32 ``1/sqrtf(d)``."""
    width = round(1 / float(scale) ** 2)
    return (f"{let}l2norm of {x}, epsilon {eps}, heads {heads}.{between}, "
            f"scale {number32(f32(1 / f32(math.sqrt(width))))}.\n")


def _split_wqkv(l, total, between, x, q_end, every, k_end, later):
    """InternLM2's layer with its one wqkv product written as three, as the converter stores them."""
    groups = int(total) // int(every)
    q, k = int(q_end) * groups, (int(k_end) - int(q_end)) * groups
    return (f"Let Wq{l} be a q8 weight of d by {q}.\nLet Wk{l} be a q8 weight of d by {k}.\n"
            f"Let Wv{l} be a q8 weight of d by {k}.\n{between}Let qp{l} be {x} times Wq{l}.\n"
            f"Let kp{l} be {x} times Wk{l}.\n{later}Set row pos of Vc{l} to {x} times Wv{l}.")

#: A factor llama.cpp computes from the metadata in float32, step by step (DeepSeek-V2's YaRN attention scale,
#: ``deepseek2.cpp``), where transformers computes it in float64: the GGUF's document states llama.cpp's float32, the
#: config's the nearest float32 to transformers' value — a float32 or two apart.
LAST_BITS = "a factor in llama.cpp's float32"
NUMBER = re.compile(r"\d+\.\d+")

EXPECTED = {
    "tiny-llama": {"q and k permuted for interleaved pairs"},
    "llama-3.1-8b": {"q and k permuted for interleaved pairs"},
    "small-gemma3": {"gain stored with its +1", "queries scaled before attention"},
    "gemma-3-27b": {"gain stored with its +1", "queries scaled before attention"},
    "small-deepseek-v2": set(),
    "deepseek-v2-lite": {LAST_BITS},
    "llama-4-scout": set(),
    "gpt-oss-20b": {"yarn ramp rounded"},
    "qwen3-next-80b-a3b": {"gain stored with its +1", "decay's A stored as −exp(A_log)", "q's scale after the recurrence"},
    "qwen3.8": {"gain stored with its +1", "decay's A stored as −exp(A_log)", "value heads reordered in turn",
                "q's scale after the recurrence"},
    "small-qwen35": {"gain stored with its +1", "decay's A stored as −exp(A_log)", "value heads reordered in turn",
                     "q's scale after the recurrence"},
    # test configs (tests/model/configs/) whose conversion the shipped ones do not show
    "mixtral-8x7b-v0.1": {"q and k permuted for interleaved pairs"},
    "qwen1.5-moe-a2.7b": {"shared gate as silu's quotient"},
    "qwen3-30b-a3b": set(),
    "qwen2.5-7b-instruct": set(),
    "small-gemma2": {"gain stored with its +1", "queries scaled before attention"},
    "small-phi3": set(),
    "small-starcoder2": {"no window in llama.cpp's graph"},
    "small-olmo2": set(),
    "small-internlm2": {"q and k permuted for interleaved pairs", "wqkv split into q, k and v"},
    "gemma-2-9b": {"gain stored with its +1", "queries scaled before attention"},
    "phi-3-mini-4k-instruct": {"no window in llama.cpp's graph"},
    "phi-3-mini-128k-instruct": {"no window in llama.cpp's graph"},
    "starcoder2-7b": {"no window in llama.cpp's graph"},
    "olmo-2-1124-7b": set(),
    "internlm2-chat-7b": {"q and k permuted for interleaved pairs", "wqkv split into q, k and v"},
    "small-granite": {"q and k permuted for interleaved pairs"},
    "small-mistral3": {"q and k permuted for interleaved pairs"},
    "small-cohere2": {"feed-forward block added first"},  # transformers' Cohere rotates adjacent pairs too
    "small-nemotron-nas": {"q and k permuted for interleaved pairs"},
    "granite-3.3-8b-instruct": {"q and k permuted for interleaved pairs"},
    "mistral-small-3.1-24b-instruct-2503": {"q and k permuted for interleaved pairs"},
    "c4ai-command-r7b-12-2024": {"feed-forward block added first"},
    "llama-3_1-nemotron-51b-instruct": {"q and k permuted for interleaved pairs"},
    "llama-3_3-nemotron-super-49b-v1": {"q and k permuted for interleaved pairs"},
}
#: The model types whose llama.cpp tensors take the hidden width as heads × head width (``{n_embd, n_embd}``): they
#: shrink to heads of their real width.
WHOLE_HEADS = ("phi3", "starcoder2", "olmo2", "internlm2", "cohere2", "granite")

GDN = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32)


def shrunk(name: str) -> dict:
    """The shipped (or test) config with its widths made small and everything that shapes a program kept."""
    test = ROOT / "tests" / "model" / "configs" / f"{name}.json"
    c = without_refused(name, json.loads(test.read_text())) if test.exists() else config(name)
    t = c.get("text_config", c)
    heads = 2 if t.get("num_attention_heads", 2) >= 2 else 1
    small = dict(hidden_size=64, num_attention_heads=heads, num_key_value_heads=1, intermediate_size=64,
                 vocab_size=256)
    if "head_dim" not in t:
        small["head_dim"] = t["hidden_size"] // t["num_attention_heads"]  # the real head width, rotations and all
    if t.get("model_type", c.get("model_type")) in WHOLE_HEADS:
        small["hidden_size"] = heads * small.pop("head_dim", t.get("head_dim", 0))
    if t.get("query_pre_attn_scalar") is not None:
        # Gemma 3 27B's is its hidden size over its heads, the others' their head width: kept so.
        head = t.get("head_dim", small.get("head_dim"))
        small["query_pre_attn_scalar"] = head if t["query_pre_attn_scalar"] == head else 64 // heads
    for key, n in (("num_experts", 4), ("n_routed_experts", 4), ("num_local_experts", 4)):
        if t.get(key):
            small[key] = n
    for key in ("moe_intermediate_size", "shared_expert_intermediate_size", "intermediate_size_mlp"):
        if t.get(key):
            small[key] = 32
    if t.get("num_experts_per_tok"):
        small["num_experts_per_tok"] = min(2, t["num_experts_per_tok"])
    if t.get("kv_lora_rank"):
        small.update(kv_lora_rank=32, q_lora_rank=None)
    if "linear_num_value_heads" in t or t.get("model_type", c.get("model_type", "")).startswith("qwen3_"):
        small.update(GDN)
    if "block_configs" in t:
        # Nemotron-NAS: 8 heads of 16 (its heads are d / heads wide: 16 pairs' worth of Llama 3's frequency factors to
        # read the scaling back from), each layer's key/value heads kept (its group scaled by 8 / heads), its
        # feed-forward multiplier kept.
        for b in t["block_configs"]:
            if b["attention"].get("n_heads_in_group"):
                b["attention"]["n_heads_in_group"] = max(1, b["attention"]["n_heads_in_group"] * 8 // t["num_attention_heads"])
        small.update(num_attention_heads=8, hidden_size=128)
        small.pop("head_dim", None)
    t.update(small)
    if "experts_per_token" in t:
        t["experts_per_token"] = small.get("num_experts_per_tok", 2)
    return c


def program_text(text: str) -> str:
    """Every section but the title and the checkpoint's bindings; comments and the layer headings' notes dropped."""
    sections = re.split(r"^(?=#)", text, flags=re.M)
    keep = [s for s in sections if not s.startswith("# ") and not s.startswith("## Checkpoint")]
    lines = [re.sub(r"\s*--.*$", "", l).rstrip() for l in "".join(keep).splitlines()]
    lines = [re.sub(r"^(## Layer \d+).*", r"\1", l) for l in lines if l]
    return re.sub(r"  +", " ", "\n".join(lines))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_config_and_the_gguf_converted_from_it_author_one_program(tmp_path, name):
    cfg = shrunk(name)
    from_config = program_text(author(spec_from_config(cfg)))
    w = oracle.write(tmp_path / f"{name}.gguf", cfg)
    from_gguf = program_text(author(read_gguf(w.path).spec))
    applied = set()
    for why, (pattern, replacement) in CONVENTIONS.items():
        changed = re.sub(pattern, replacement, from_config)
        if _closer(changed, from_config, from_gguf):
            applied.add(why)
            from_config = changed
    last_bits = _float32_last_bits(from_config, from_gguf)
    if last_bits != from_config:
        applied.add(LAST_BITS)
        from_config = last_bits
    assert from_config == from_gguf, _first_difference(from_config, from_gguf)
    assert applied == EXPECTED[name]


def test_a_deci_layer_with_attention_and_no_feed_forward_block_is_attention_by_both_routes(tmp_path):
    """llama.cpp's deci graph skips such a layer whole (its `continue` drops the attention it computed); the model's
    own code adds the attention to the residual. Both routes write the attention (LANGUAGE §4), and the GGUF route says
    where llama.cpp differs."""
    cfg = shrunk("small-nemotron-nas")
    cfg["block_configs"][2]["ffn"] = {"ffn_mult": None, "no_op": True, "replace_with_linear": False}
    config_spec = spec_from_config(cfg)
    gguf_spec = read_gguf(oracle.write(tmp_path / "deci.gguf", cfg).path).spec
    for spec in (config_spec, gguf_spec):
        assert spec.layers[2].mixer is not None and spec.layers[2].ffn is None
    from_config, from_gguf = program_text(author(config_spec)), program_text(author(gguf_spec))
    layer = lambda text: re.search(r"## Layer 2\n.*?(?=\n## )", text, re.S).group(0)  # noqa: E731
    assert "attention of" in layer(from_gguf)
    converted = re.sub(CONVENTIONS["q and k permuted for interleaved pairs"][0],
                       CONVENTIONS["q and k permuted for interleaved pairs"][1], from_config)
    assert converted == from_gguf, _first_difference(converted, from_gguf)
    assert any("llama.cpp skips layer 2 whole, and this document does not" in n for n in gguf_spec.notes)


def _closer(changed: str, before: str, target: str) -> bool:
    """A convention applies when it brings the config's program line by line nearer the GGUF's."""
    def same(a: str) -> int:
        return sum(x == y for x, y in zip(a.splitlines(), target.splitlines()))
    return changed != before and same(changed) > same(before)




def _float32_last_bits(config: str, gguf: str) -> str:
    """The config's program with each decimal number that is within two float32 steps of the GGUF's in its place
    written as the GGUF's; any other difference is left to show."""
    a, b = NUMBER.split(config), NUMBER.split(gguf)
    x, y = NUMBER.findall(config), NUMBER.findall(gguf)
    if a != b or len(x) != len(y):
        return config

    def near(u: str, v: str) -> bool:
        p, q = np.float32(u), np.float32(v)
        return abs(int(p.view(np.int32)) - int(q.view(np.int32))) <= 2 and np.sign(p) == np.sign(q)

    chosen = [v if near(u, v) else u for u, v in zip(x, y)]
    return "".join(s + n for s, n in zip(a, chosen + [""]))


def _first_difference(a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {i + 1}:\n  config: {x}\n  gguf:   {y}"
    return f"lengths differ: {len(a.splitlines())} and {len(b.splitlines())} lines"
