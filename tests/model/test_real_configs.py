"""`streamed author` on published Hugging Face config.json files (tests/model/configs/, transcribed from the models'
public configs, fields the real file leaves to transformers' defaults left out here too): each authors, checks and
falls into exactly the kinds its architecture's own rule gives, computed here from that rule."""

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

import nas
from repo import REFUSED_FIELDS, without_refused
from streamed.model.hf import spec_from_config
from streamed.model.spec import SpecError

FIXTURES = Path(__file__).resolve().parent / "configs"


def cli(*argv) -> tuple[int, str, str]:
    from streamed.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@dataclass
class Authored:
    code: int
    err: str
    text: str
    kinds_code: int
    kinds: dict
    check_code: int
    check: str


@pytest.fixture(scope="module")
def authored(tmp_path_factory):
    """Each fixture authored once through the command line, then `kinds --json` and `check` on the document."""
    folder = tmp_path_factory.mktemp("authored")
    done: dict[str, Authored] = {}

    def get(name: str) -> Authored:
        if name not in done:
            out = folder / f"{name}.lgm"
            source = folder / f"{name}.json"  # the fixture without the field it is refused for, if any
            source.write_text(json.dumps(config(name)))
            code, _, err = cli("author", source, "-o", out)
            text = out.read_text() if out.exists() else ""
            kcode, kout, _ = cli("kinds", out, "--json") if code == 0 else (None, "{}", "")
            ccode, cout, _ = cli("check", out) if code == 0 else (None, "", "")
            done[name] = Authored(code, err, text, kcode, json.loads(kout), ccode, cout)
        return done[name]

    return get


def config(name: str) -> dict:
    """The fixture, without the field `streamed author` refuses in it (``repo.REFUSED_FIELDS``)."""
    return without_refused(name, json.loads((FIXTURES / f"{name}.json").read_text()))


# ---- each architecture's rule, and what its text must say ----------------------------------------------------


@dataclass
class Case:
    layers: int
    kind: Callable[[int], str]  # layer index → the kind's name, by the architecture's rule
    says: tuple[str, ...]       # spot checks of the text


def every(n: int, label: str, other: str) -> Callable[[int], str]:
    """``label`` on every n-th layer (1-based: layers n-1, 2n-1, …), ``other`` elsewhere."""
    return lambda i: label if (i + 1) % n == 0 else other


def block_kinds(name: str) -> Callable[[int], str]:
    """A Nemotron-NAS config's kinds by its own rule (``nas.block_kinds``: equal ``block_configs`` entries are one)."""
    of = nas.kind_of_layer(config(name))
    return lambda i: of[i][0]


CASES = {
    "qwen2.5-7b-instruct": Case(28, lambda i: "attention",  # use_sliding_window false: sliding_window is unused
                                ("heads 28 sharing 4", "cosines of base 1000000", "xn0 times Wq0 plus bq0")),
    "qwen2.5-0.5b": Case(24, lambda i: "attention", ("heads 14 sharing 2", 'Wout  is "model.embed_tokens.weight"')),
    "mistral-7b-v0.1": Case(32, lambda i: "attention, window 4096", ("heads 32 sharing 8, window 4096",
                                                                     "cosines of base 10000.")),
    "mistral-7b-v0.3": Case(32, lambda i: "attention", ("heads 32 sharing 8.", "cosines of base 1000000.")),
    # head_dim 128 though hidden_size / heads is 160
    "mistral-nemo-instruct-2407": Case(40, lambda i: "attention", ("a q8 weight of d by 4096.  -- 32 query heads of 128",
                                                                   "table of ctx by 64")),
    "llama-3.2-1b": Case(16, lambda i: "attention", ("heads 32 sharing 8", "llama3 scaling by 32 from 8192 with low 1 and high 4",
                                                     "cosines of base 500000", 'Wout  is "model.embed_tokens.weight"')),
    # rope_theta left out: LlamaConfig's 10000
    "llama-2-7b": Case(32, lambda i: "attention", ("# Llama-2-7b-hf\n", "heads 32 sharing 32", "cosines of base 10000.",
                                                   'Wout  is "lm_head.weight"')),
    # Qwen2 7B: use_sliding_window false, so its sliding_window of 131072 windows nothing; 28 heads sharing 4
    "qwen2-7b": Case(28, lambda i: "attention", ("heads 28 sharing 4", "cosines of base 1000000",
                                                 "xn0 times Wq0 plus bq0", "Let vocab be 152064.")),
    # Qwen3 4B: head_dim 128 over a hidden size of 2560 (20 heads' worth), tied embeddings
    "qwen3-4b": Case(36, lambda i: "attention", ("heads 32 sharing 8", "a q8 weight of d by 4096.",
                                                 'Wout  is "model.embed_tokens.weight"', "Let ffn be 9728.")),
    "qwen3-8b": Case(36, lambda i: "attention", ("heads 32 sharing 8", "rmsnorm of qp0 with gq0, epsilon 1e-6, heads 32",
                                                 "cosines of base 1000000")),
    # every layer 8 experts of 14336, top 2 renormalised (MixtralTopKRouter), no window (`sliding_window: null`)
    "mixtral-8x7b-v0.1": Case(32, lambda i: "attention, experts", ("heads 32 sharing 8", "8 experts, top 2",
                                                                   "normalized", "cosines of base 1000000")),
    "qwen3-30b-a3b": Case(48, lambda i: "attention, experts", ("heads 32 sharing 4", "top 8", "128 experts",
                                                               "normalized")),
    "qwen1.5-moe-a2.7b": Case(24, lambda i: "attention, experts", ("heads 16 sharing 16", "60 experts, top 4",
                                                                   "shared gate Wsg0", "plus bq0")),
    "qwen2-57b-a14b": Case(28, lambda i: "attention, experts", ("heads 28 sharing 4", "64 experts, top 8",
                                                                "a q8 weight of d by 20480", "shared gate Wsg0")),
    # Gemma3TextConfig's defaults for what the file leaves out: 8 heads sharing 4 of 256, sliding pattern 6, tied.
    "gemma-3-4b-it": Case(34, every(6, "attention", "attention, window 1024"),
                          ("heads 8 sharing 4, window 1024", "8 query heads of 256", "Let vocab be 262208.",
                           "cosines of base 10000.", "cosines of base 1000000, linear scaling by 8.",
                           'Wout   is "model.language_model.embed_tokens.weight"', "offset 1")),
    "gemma-3-12b-it": Case(48, every(6, "attention", "attention, window 1024"), ("heads 16 sharing 8, window 1024",)),
    "gemma-3-1b-it": Case(26, every(6, "attention", "attention, window 512"),
                          ("heads 4 sharing 1, window 512", "Let vocab be 262144.", 'is "model.embed_tokens.weight"')),
    "deepseek-v3": Case(61, lambda i: "latent attention" + (", experts" if i >= 3 else ""),
                        ("queries through rank 1536", "top 8", "scored by sigmoid, normalized, routed scale 2.5, "
                         "selection bias eb3, groups 8 keeping 4", "heads 128, nope 128, rope 64",
                         "cosines of base 10000, yarn scaling by 40 from 4096 with fast 32 and slow 1.", "256 experts")),
    "deepseek-v2-chat": Case(60, lambda i: "latent attention" + (", experts" if i >= 1 else ""),
                             ("queries through rank 1536", "160 experts, top 6", "routed scale 16, groups 8 keeping 3",
                              "a q8 weight of d by 3072.", "mscale_all_dim 0.707")),
    # Layers rotate and attend in chunks except every 4th (NoPE, global); experts every 2nd layer.
    "llama-4-maverick": Case(48, lambda i: ("attention" if (i + 1) % 4 == 0 else "attention, chunks of 8192")
                             + (", experts" if (i + 1) % 2 == 0 else ""),
                             ("heads 40 sharing 8, chunks of 8192", "128 experts, top 1", "scored by sigmoid",
                              "cosines of base 500000", "model.language_model.layers.{l}.")),
    "gpt-oss-120b": Case(36, lambda i: "attention, window 128, experts" if i % 2 == 0 else "attention, experts",
                         ("heads 64 sharing 8, window 128, sinks", "128 experts, top 4", "cosines of base 150000",
                          "clamped swiglu at 7", "quantized (mxfp4)")),
    "qwen3-next-80b-a3b-thinking": Case(48, every(4, "attention, experts", "gated deltanet, experts"),
                                        ("heads 16 sharing 2", "512 experts, top 10", "cosines of base 10000000",
                                         "table of ctx by 32", "shared gate")),
    "qwen3.5-35b-a3b": Case(40, every(4, "attention, experts", "gated deltanet, experts"),
                            ("heads 16 sharing 2", "256 experts, top 8", "cosines of base 10000000",
                             "table of ctx by 32", "model.language_model.layers.{l}.", "mrope")),
    # Wrappers this tool does not name, around a text model it does: LlamaConfig's 7B defaults fill llava's text.
    "llava-1.5-7b": Case(32, lambda i: "attention", ("heads 32 sharing 32", "32 query heads of 128", "Let d be 4096.",
                                                     "Let vocab be 32064.", "Let ffn be 11008.", "base 10000.",
                                                     "model.language_model.layers.{l}.", "a llava config")),
    "mistral-small-3.1-24b-instruct-2503": Case(40, lambda i: "attention", (
        "heads 32 sharing 8.", "32 query heads of 128", "cosines of base 1000000000.", "a mistral3 config",
        'Wout  is "lm_head.weight"')),
    # Vision-language Qwens: their text models, the multimodal rotation reducing to the plain one for text.
    "qwen2.5-vl-7b-instruct": Case(28, lambda i: "attention", (  # text fields flat beside vision_config
        "heads 28 sharing 4", "xn0 times Wq0 plus bq0", "cosines of base 1000000.", "model.language_model.layers.{l}.",
        "mrope")),
    "qwen3-vl-8b-instruct": Case(36, lambda i: "attention", (
        "heads 32 sharing 8", "rmsnorm of qp0 with gq0, epsilon 1e-6, heads 32", "cosines of base 5000000.", "mrope",
        "model.language_model.layers.{l}.")),
    "qwen3-vl-30b-a3b-instruct": Case(48, lambda i: "attention, experts", (
        "heads 32 sharing 4", "128 experts, top 8", "normalized", "cosines of base 5000000.")),
    # Gemma 2: windowed layers first, then every other one global; both soft-cap their logits, and so does the head.
    "gemma-2-9b": Case(42, lambda i: "attention, window 4096" if i % 2 == 0 else "attention", (
        "heads 16 sharing 8, window 4096, soft cap 50.", "heads 16 sharing 8, soft cap 50.",
        "soft cap of logits at 30.", "Let escale be 59.86652.", "offset 1", 'Wout   is "model.embed_tokens.weight"',
        "pre_feedforward_layernorm")),
    # Phi-3: one qkv product split by columns, one gate_up product; transformers windows every layer.
    "phi-3-mini-4k-instruct": Case(32, lambda i: "attention, window 2047", (
        "Let qkv0  be xn0 times Wqkv0.", "columns 0 to 3072 of qkv0", "columns 6144 to 9216 of qkv0",
        "heads 32 sharing 32, window 2047", "self_attn.qkv_proj.weight", "mlp.gate_up_proj.weight",
        "silu of (columns 0 to 8192 of gu0) multiplied by (columns 8192 to 16384 of gu0)")),
    "phi-3-mini-128k-instruct": Case(32, lambda i: "attention, window 262144", (
        "longrope scaling from 4096 with short factors 1.05 1.05 1.05 1.1", "and long factors 1.03 1.05",
        "64.81001, attention factor 1.1902381.")),
    # StarCoder2: layer norms with biases, a GELU MLP that is not gated, every projection biased.
    "starcoder2-7b": Case(32, lambda i: "attention, window 4096", (
        "layernorm of x with g0, bias gb0, epsilon 1e-5.", "gelu of (hn0 times Wu0 plus bu0)", "f0 times Wd0 plus bd0",
        "heads 36 sharing 4, window 4096", "cosines of base 1000000.", "mlp.c_fc.bias", "model.norm.bias",
        'Wout   is "model.embed_tokens.weight"')),
    # OLMo 2: no pre-norms; the blocks' outputs normed; q and k normed over the whole projection.
    "olmo-2-1124-7b": Case(32, lambda i: "attention", (
        "Let qp0   be x times Wq0.", "rmsnorm of qp0 with gq0, epsilon 1e-6.", "a weight of 4096.          -- the queries normed as a whole",
        "Let on0   be rmsnorm of o0 with gpa0", "silu of (h0 times Wg0)", "cosines of base 500000.")),
    # InternLM2: one wqkv product, grouped per key/value head: 4 queries, a key and a value of 128 each.
    "internlm2-chat-7b": Case(32, lambda i: "attention", (
        "columns 0 to 512 of qkv0, of every 768.", "columns 512 to 640 of qkv0, of every 768.",
        "columns 640 to 768 of qkv0, of every 768.", "heads 32 sharing 8.", "attention.wqkv.weight",
        "feed_forward.w1.weight")),
    # Granite: the embedding, the attention logits, each block's output and the logits scaled by its multipliers.
    "granite-3.3-8b-instruct": Case(40, lambda i: "attention", (
        "Let escale be 12.", "Let rscale be 0.22.", "Let lscale be 0.0625.", "row tok of Emb scaled by escale",
        "heads 32 sharing 8, scale 0.0078125.", "Let h0    be x plus (o0 scaled by rscale).",
        "Let xo0   be h0 plus (fo0 scaled by rscale).", "logits scaled by lscale", "cosines of base 10000000.",
        'Wout  is "model.embed_tokens.weight"')),
    # Command R7B: three windowed layers that rotate in adjacent pairs, a fourth global one that does not rotate;
    # attention and the MLP read one LayerNorm; the logits scaled by 0.25.
    "c4ai-command-r7b-12-2024": Case(32, every(4, "attention", "attention, window 4096"), (
        "layernorm of x with g0, epsilon 1e-5.", "heads 8, interleaved", "heads 32 sharing 8, window 4096.",
        "Let f0    be silu of (xn0 times Wg0) multiplied by (xn0 times Wu0).", "Let xo0   be h0 plus fo0.",
        "Let a3  be attention of qp3 over Kc3 and Vc3 at pos, heads 32 sharing 8.", "Let lscale be 0.25.",
        "cosines of base 50000.", 'Wout  is "model.embed_tokens.weight"')),
    # Nemotron-NAS: every layer its own block_configs entry — its own key/value grouping and feed-forward width,
    # attention replaced by one product or removed.
    "llama-3_1-nemotron-51b-instruct": Case(80, block_kinds("llama-3_1-nemotron-51b-instruct"), (
        "## Layer 0: distinct — attention, 64 heads sharing 8; feed-forward 7168 wide",
        "## Layer 11: distinct — one product in place of attention; feed-forward 14336 wide",
        "## Layer 43: distinct — no attention; feed-forward 7168 wide", "heads 64 sharing 1.",
        "Let o11    be xn11 times Wlin11.", "self_attn.linear_attn.weight", "Let xo43 be xo42 plus fo43.",
        "llama3 scaling by 8 from 8192 with low 1 and high 4")),
    "llama-3_3-nemotron-super-49b-v1": Case(80, block_kinds("llama-3_3-nemotron-super-49b-v1"), (
        "## Layer 6: distinct — no attention; feed-forward 14336 wide", "a q8 weight of d by 2816.",
        "heads 64 sharing 8.", "a q8 weight of d by 17920.")),
}


@pytest.mark.parametrize("name", sorted(REFUSED_FIELDS))
def test_a_published_config_with_a_field_that_changes_what_it_computes_unmodelled_is_refused_in_one_line(name):
    field, value = REFUSED_FIELDS[name]
    code, out, err = cli("author", FIXTURES / f"{name}.json", "-o", Path("/nonexistent") / "x.lgm")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"`{field}." in err and f'"{value}"' in err, err


def test_every_fixture_has_a_case_and_every_case_a_fixture():
    assert {p.stem for p in FIXTURES.glob("*.json")} == set(CASES)
    assert len(CASES) >= 15


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_config_authors_and_checks_into_exactly_its_architecture_s_kinds(authored, name):
    case, a = CASES[name], authored(name)
    assert a.code == 0, a.err
    assert a.kinds_code == 0 and a.kinds["divergences"] == []
    assert a.check_code == 0 and "error" not in a.check
    want: dict[str, list[int]] = {}
    for i in range(case.layers):
        want.setdefault(case.kind(i), []).append(i)
    got = [(k["name"], k["layers"]) for k in a.kinds["kinds"]]
    assert len({n for n, _ in got}) == len(got), got  # no two kinds share a name
    assert dict(got) == want
    assert sum(len(l) for _, l in got) == case.layers
    assert a.text.count("\n## Layer ") == case.layers


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_config_s_document_says_its_heads_window_experts_and_rotation_base(authored, name):
    a = authored(name)
    for phrase in CASES[name].says:
        assert phrase in a.text, phrase


# ---- defaults, nulls, and what is genuinely missing -------------------------------------------------------------


def test_a_field_the_config_leaves_to_transformers_takes_its_default_not_an_error():
    t = config("gemma-3-4b-it")["text_config"]
    assert "num_attention_heads" not in t and "head_dim" not in t and "vocab_size" not in t
    m = spec_from_config(config("gemma-3-4b-it")).layers[0].mixer
    assert (m.heads, m.kv_heads, m.head_dim) == (8, 4, 256)


def test_a_mistral_config_without_sliding_window_takes_mistral_s_4096_and_null_means_no_window():
    cfg = config("mistral-7b-v0.3")
    assert spec_from_config(cfg).layers[0].mixer.window is None
    del cfg["sliding_window"]
    assert spec_from_config(cfg).layers[0].mixer.window == 4096


def test_deepseek_v2_q_lora_rank_left_out_is_1536_and_null_is_direct_queries():
    cfg = config("deepseek-v2-chat")
    del cfg["q_lora_rank"]
    assert spec_from_config(cfg).layers[0].mixer.q_rank == 1536
    cfg["q_lora_rank"] = None
    assert spec_from_config(cfg).layers[0].mixer.q_rank is None


def test_deepseek_v3_without_scoring_fields_routes_as_transformers_does_by_sigmoid_with_a_selection_bias():
    cfg = config("deepseek-v3")
    for k in ("scoring_func", "topk_method", "n_group", "topk_group", "routed_scaling_factor"):
        del cfg[k]
    e = spec_from_config(cfg).layers[3].ffn
    assert (e.scoring, e.selection_bias, e.groups, e.keep_groups, e.routed_scale) == ("sigmoid", True, 8, 4, 2.5)


def test_a_needed_field_without_a_default_is_one_error_naming_it(tmp_path):
    cfg = config("deepseek-v2-chat")
    del cfg["num_experts_per_tok"]  # DeepseekV2Config's default is None: a MoE layer cannot be built
    src = tmp_path / "config.json"
    src.write_text(json.dumps(cfg))
    code, _, err = cli("author", src, "-o", tmp_path / "m.lgm")
    assert code == 2 and "`num_experts_per_tok`" in err and err.count("\n") == 1
    assert not (tmp_path / "m.lgm").exists()
    cfg = config("qwen3-next-80b-a3b-thinking")
    cfg["linear_num_key_heads"] = None
    with pytest.raises(SpecError, match="`linear_num_key_heads` is null"):
        spec_from_config(cfg)


def test_a_sliding_layer_without_a_window_is_refused_by_name():
    cfg = {**config("gpt-oss-120b"), "sliding_window": None}
    with pytest.raises(SpecError, match="`sliding_window`"):
        spec_from_config(cfg)


# ---- fields that must not matter, and fields that must agree ---------------------------------------------------


@pytest.mark.parametrize("name", ["qwen3-8b", "gemma-3-4b-it", "llama-4-maverick"])
def test_the_dtype_is_ignored(name):
    base = spec_from_config(config(name))
    for key, value in (("torch_dtype", "float32"), ("dtype", "float16")):
        cfg = config(name)
        cfg[key] = value
        if "text_config" in cfg:
            cfg["text_config"][key] = value
        assert spec_from_config(cfg) == base
    cfg = config(name)
    cfg.pop("torch_dtype", None)
    assert spec_from_config(cfg) == base


def test_architectures_naming_another_model_s_class_is_refused(tmp_path):
    cfg = {**config("qwen3-8b"), "architectures": ["Qwen3MoeForCausalLM"]}
    with pytest.raises(SpecError, match="`architectures` names Qwen3MoeForCausalLM"):
        spec_from_config(cfg)
    with pytest.raises(SpecError, match="`architectures`"):
        spec_from_config({**config("llama-3.2-1b"), "architectures": ["MistralForCausalLM"]})
    # A class of the model's own, or one this tool does not know (a fine-tune's), is fine.
    spec_from_config({**config("qwen3-8b"), "architectures": ["Qwen3ForSequenceClassification"]})
    spec_from_config({**config("llama-2-7b"), "architectures": ["MyLlamaForCausalLM"]})
    spec_from_config({k: v for k, v in config("llama-2-7b").items() if k != "architectures"})


# ---- multimodal wrappers: text_config ---------------------------------------------------------------------------


WRAPPED = ["gemma-3-4b-it", "llama-4-maverick", "qwen3.5-35b-a3b", "llava-1.5-7b", "mistral-small-3.1-24b-instruct-2503",
           "qwen3-vl-8b-instruct", "qwen3-vl-30b-a3b-instruct"]


@pytest.mark.parametrize("name", WRAPPED)
def test_a_wrapper_s_text_config_is_the_model_its_text_config_alone_describes(name):
    cfg = config(name)
    text = dict(cfg["text_config"])
    flat = {**text, "tie_word_embeddings": cfg.get("tie_word_embeddings", text.get("tie_word_embeddings"))}
    if flat["tie_word_embeddings"] is None:
        del flat["tie_word_embeddings"]
    nested, alone = spec_from_config(cfg), spec_from_config(flat)
    assert nested.layers == alone.layers and nested.d == alone.d and nested.vocab == alone.vocab
    assert nested.tied == alone.tied
    assert (nested.hf_prefix, alone.hf_prefix) == ("model.language_model.", "model.")


def test_the_dense_qwen3_5_wrapper_reads_its_text_config_with_its_defaults():
    cfg = config("qwen3.5-35b-a3b")
    t = cfg["text_config"]
    dense = {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
             "text_config": {"model_type": "qwen3_5_text", "hidden_size": 2048, "num_hidden_layers": 8,
                             "intermediate_size": 6144, "rope_parameters": t["rope_parameters"]}}
    spec = spec_from_config(dense)
    full = [i for i, l in enumerate(spec.layers) if l.mixer.kind == "attention"]
    assert full == [3, 7]  # full_attention_interval's default, 4
    m = spec.layers[3].mixer
    assert (m.heads, m.kv_heads, m.head_dim, m.rotation.dims) == (16, 4, 256, 64)  # Qwen3_5TextConfig's defaults
    assert spec.vocab == 248320 and spec.hf_prefix == "model.language_model."


def test_a_text_config_of_another_model_type_is_refused():
    cfg = config("gemma-3-4b-it")
    cfg["text_config"]["model_type"] = "llama4_text"
    with pytest.raises(SpecError, match="`text_config.model_type`"):
        spec_from_config(cfg)


# ---- flags that change the model are honoured or refused, never dropped ----------------------------------------


def test_a_qwen2_moe_config_without_qkv_bias_has_no_query_bias():
    assert spec_from_config(config("qwen2-57b-a14b")).layers[0].mixer.bias  # qkv_bias defaults to true
    assert not spec_from_config({**config("qwen2-57b-a14b"), "qkv_bias": False}).layers[0].mixer.bias


def test_gemma3_attention_bias_is_honoured_and_bidirectional_attention_refused():
    m = spec_from_config({**config("gemma-3-1b-it"), "attention_bias": True}).layers[0].mixer
    assert m.bias and m.out_bias
    with pytest.raises(SpecError, match="`use_bidirectional_attention`"):
        spec_from_config({**config("gemma-3-1b-it"), "use_bidirectional_attention": True})
    spec_from_config({**config("gemma-3-1b-it"), "use_bidirectional_attention": False})


def test_deepseek_attention_bias_is_refused_by_name():
    with pytest.raises(SpecError, match="`attention_bias`"):
        spec_from_config({**config("deepseek-v3"), "attention_bias": True})



def test_a_wrapper_around_an_unsupported_text_model_or_of_unknown_naming_is_refused_naming_its_model_type():
    cfg = {**config("llava-1.5-7b"), "text_config": {"model_type": "gpt2", "hidden_size": 64}}
    with pytest.raises(SpecError, match='`model_type` "llava" is not supported'):
        spec_from_config(cfg)
    # Idefics3 holds its text model as `model.text_model`: its names are not transformers' language_model ones.
    cfg = {**config("llava-1.5-7b"), "model_type": "idefics3", "architectures": ["Idefics3ForConditionalGeneration"]}
    with pytest.raises(SpecError, match='`model_type` "idefics3" is not supported'):
        spec_from_config(cfg)


def test_a_llava_text_config_that_names_no_model_type_is_llama_as_llava_config_defaults_it():
    cfg = config("llava-1.5-7b")
    del cfg["text_config"]["model_type"]
    assert spec_from_config(cfg).layers == spec_from_config(config("llava-1.5-7b")).layers


def test_llama4_attention_chunk_size_left_out_is_8192_and_null_is_no_chunking():
    cfg = config("llama-4-maverick")
    del cfg["text_config"]["attention_chunk_size"]
    assert spec_from_config(cfg).layers[0].mixer.chunk == 8192
    cfg["text_config"]["attention_chunk_size"] = None
    spec = spec_from_config(cfg)
    assert [l.mixer.chunk for l in spec.layers] == [None] * 48
    assert [l.mixer.rotation is None for l in spec.layers] == [(i + 1) % 4 == 0 for i in range(48)]


def test_a_config_json_saved_with_a_byte_order_mark_is_read(tmp_path):
    src = tmp_path / "config.json"
    src.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "qwen3-8b.json").read_bytes())
    code, _, err = cli("author", src, "-o", tmp_path / "m.lgm")
    assert code == 0, err


def test_a_flat_qwen2_5_vl_config_is_its_text_model_as_nested_under_text_config():
    flat = config("qwen2.5-vl-7b-instruct")
    text = {k: v for k, v in flat.items() if k not in ("vision_config", "architectures")}
    nested = {"model_type": "qwen2_5_vl", "text_config": {**text, "model_type": "qwen2_5_vl_text"},
              "vision_config": flat["vision_config"]}
    a, b = spec_from_config(flat), spec_from_config(nested)
    assert a.layers == b.layers and a.hf_prefix == b.hf_prefix == "model.language_model."


def test_a_qwen3_moe_config_that_uses_its_sliding_window_slides_on_every_layer():
    # transformers' Qwen3MoeAttention windows every layer with `sliding_window` (its class keeps no layer types).
    cfg = {**config("qwen3-30b-a3b"), "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 40}
    assert [l.mixer.window for l in spec_from_config(cfg).layers] == [4096] * 48


def test_a_qwen2_moe_config_that_uses_its_sliding_window_slides_every_other_layer_below_max_window_layers():
    # transformers' Qwen2MoeConfig: sliding when (i + 1) % 2 and i < max_window_layers.
    cfg = {**config("qwen1.5-moe-a2.7b"), "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 5}
    assert [l.mixer.window for l in spec_from_config(cfg).layers] == [4096, None] * 2 + [4096] + [None] * 19


def test_legacy_layer_type_names_are_read_as_transformers_remaps_them():
    cfg = config("qwen3.5-35b-a3b")
    t = cfg["text_config"]
    t["layer_types"] = ["attention" if x == "full_attention" else "mamba" for x in t["layer_types"]]
    assert spec_from_config(cfg).layers == spec_from_config(config("qwen3.5-35b-a3b")).layers


def test_a_mistral3_wrapper_around_ministral3_is_refused_naming_its_text_model():
    # Ministral 3's text model scales its queries' temperature by position (llama_4_scaling_beta): not a mistral.
    cfg = config("mistral-small-3.1-24b-instruct-2503")
    cfg["text_config"]["model_type"] = "ministral3"
    with pytest.raises(SpecError, match='`model_type` "mistral3" is not supported with a `text_config.model_type` '
                                        '"ministral3"'):
        spec_from_config(cfg)
