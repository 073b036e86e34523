"""config.json → ModelSpec → document: every supported model_type, layer_types as transformers derives them, and one
clear error for every bad config."""

import json

import pytest

from repo import config
from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.hf import spec_from_config
from streamed.model.spec import Experts, GatedDeltaNet, LatentAttention, SpecError


def kinds_of(cfg: dict) -> dict[str, list[int]]:
    a = analyze(author(spec_from_config(cfg)))
    assert not a.errors, [d.message for d in a.errors][:3]
    assert not a.divergences
    return {k.name: list(k.layers) for k in a.kinds}


def small(model_type: str, **fields) -> dict:
    base = {"model_type": model_type, "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
            "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256, "rms_norm_eps": 1e-6}
    base.update(fields)
    return base


# ---- every model_type ---------------------------------------------------------------------------------------------


def test_llama_and_mistral_layers_are_one_kind_of_attention():
    assert kinds_of(small("llama")) == {"attention": list(range(8))}
    assert kinds_of(small("mistral", sliding_window=None)) == {"attention": list(range(8))}


def test_a_mistral_sliding_window_windows_every_layer():
    assert kinds_of(small("mistral", sliding_window=32)) == {"attention, window 32": list(range(8))}


def test_qwen2_biases_its_queries_keys_and_values_but_not_its_output():
    spec = spec_from_config(small("qwen2"))
    m = spec.layers[0].mixer
    assert m.bias and not m.out_bias
    assert "plus bq0" in author(spec)


def test_qwen2_slides_its_window_from_max_window_layers_when_use_sliding_window():
    cfg = small("qwen2", use_sliding_window=True, sliding_window=64, max_window_layers=6)
    assert kinds_of(cfg) == {"attention": list(range(6)), "attention, window 64": [6, 7]}
    assert kinds_of(small("qwen2", use_sliding_window=False, sliding_window=64)) == {"attention": list(range(8))}
    # An explicit sliding layer type without use_sliding_window attends in full, as transformers does.
    explicit = small("qwen2", sliding_window=64, layer_types=["sliding_attention"] * 8)
    assert kinds_of(explicit) == {"attention": list(range(8))}
    # max_window_layers defaults to transformers' 28: an 8-layer model has no sliding layer.
    assert kinds_of(small("qwen2", use_sliding_window=True, sliding_window=64)) == {"attention": list(range(8))}


def test_qwen3_norms_queries_and_keys_per_head():
    text = author(spec_from_config(small("qwen3", head_dim=32)))
    assert "rmsnorm of qp0 with gq0, epsilon 1e-6, heads 4" in text


def test_qwen3_moe_sparse_step_and_mlp_only_layers_decide_the_expert_layers():
    cfg = small("qwen3_moe", num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=2,
                mlp_only_layers=[5])
    assert kinds_of(cfg) == {"attention": [0, 2, 4, 5, 6], "attention, experts": [1, 3, 7]}


def test_qwen2_moe_has_a_gated_shared_expert():
    cfg = small("qwen2_moe", num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                shared_expert_intermediate_size=64)
    e = spec_from_config(cfg).layers[0].ffn
    assert isinstance(e, Experts) and e.shared_width == 64 and e.shared_gate


def test_qwen3_next_derives_full_attention_every_interval_layers():
    cfg = config("qwen3-next-80b-a3b")
    assert kinds_of(cfg) == {"gated deltanet, experts": [l for l in range(48) if l % 4 != 3],
                             "attention, experts": list(range(3, 48, 4))}
    cfg["full_attention_interval"] = 3
    assert kinds_of(cfg)["attention, experts"] == list(range(2, 48, 3))


def test_qwen3_next_reads_interleaved_qkvz_per_key_head():
    text = author(spec_from_config(config("qwen3-next-80b-a3b")))
    # 16 key heads: each group is q 128 | k 128 | v 2×128 | z 2×128 = 768 columns.
    assert 'Wlq{l}  is "model.layers.{l}.linear_attn.in_proj_qkvz.weight", columns 0 to 128 of every 768.' in text
    assert 'Wlz{l}  is "model.layers.{l}.linear_attn.in_proj_qkvz.weight", columns 512 to 768 of every 768.' in text
    assert 'Wqg{l}  is "model.layers.{l}.self_attn.q_proj.weight", columns 256 to 512 of every 512.' in text


def test_qwen3_5_reads_its_text_config_and_honours_layer_types():
    cfg = config("qwen3.8")
    spec = spec_from_config(cfg)
    assert len(spec.layers) == 64 and spec.d == 5120 and spec.hf_prefix == "model.language_model."
    types = cfg["text_config"]["layer_types"]
    assert [isinstance(l.mixer, GatedDeltaNet) for l in spec.layers] == [t == "linear_attention" for t in types]
    # An explicit layer_types wins over full_attention_interval.
    cfg["text_config"]["layer_types"] = ["full_attention"] + ["linear_attention"] * 63
    assert kinds_of(cfg) == {"attention": [0], "gated deltanet": list(range(1, 64))}


def test_qwen3_5_without_layer_types_derives_them_from_full_attention_interval():
    cfg = config("qwen3.8")
    del cfg["text_config"]["layer_types"]
    cfg["text_config"]["full_attention_interval"] = 2
    assert kinds_of(cfg)["attention"] == list(range(1, 64, 2))


def test_qwen3_5_moe_layers_are_experts():
    assert kinds_of(config("small-qwen35")) == {"gated deltanet, experts": [0, 1, 2, 4, 5, 6],
                                                "attention, experts": [3, 7]}


def test_gemma3_is_global_every_sixth_layer_and_sliding_elsewhere():
    k = kinds_of(config("gemma-3-27b"))
    assert k["attention"] == list(range(5, 62, 6))
    assert k["attention, window 1024"] == [l for l in range(62) if l % 6 != 5]


def test_gemma3_sliding_window_pattern_is_read_when_given():
    cfg = small("gemma3_text", head_dim=16, sliding_window=16, sliding_window_pattern=4)
    assert kinds_of(cfg) == {"attention, window 16": [0, 1, 2, 4, 5, 6], "attention": [3, 7]}


def test_gemma3_scales_the_embedding_and_logits_as_gemma_does():
    text = author(spec_from_config(config("gemma-3-27b")))
    assert "Let escale be 73.32121." in text  # √5376
    assert "scale 0.07715167" in text  # 1/√168, query_pre_attn_scalar
    assert "offset 1" in text
    assert "gelu of" in text
    # Local and global layers rotate at different bases: two rotation tables.
    assert "Rcos1 be a table of ctx by 64, cosines of base 10000." in text
    assert "Rcos2 be a table of ctx by 64, cosines of base 1000000, linear scaling by 8." in text


def test_gemma3_with_logit_softcapping_soft_caps_its_attention_and_final_logits_as_transformers_does():
    spec = spec_from_config(small("gemma3_text", head_dim=16, sliding_window=16, final_logit_softcapping=30.0,
                                  attn_logit_softcapping=50.0))
    assert spec.final_softcap == 30.0 and {l.mixer.softcap for l in spec.layers} == {50.0}
    plain = spec_from_config(small("gemma3_text", head_dim=16, sliding_window=16))
    assert plain.final_softcap is None and {l.mixer.softcap for l in plain.layers} == {None}
    with pytest.raises(SpecError, match="`final_logit_softcapping` is -1; a soft cap is positive"):
        spec_from_config(small("gemma3_text", head_dim=16, sliding_window=16, final_logit_softcapping=-1))


def test_deepseek_v2_lite_is_dense_first_then_experts():
    assert kinds_of(config("deepseek-v2-lite")) == {"latent attention": [0], "latent attention, experts": list(range(1, 27))}


def test_deepseek_layers_carry_experts_from_first_k_dense_replace_on_whatever_moe_layer_freq_says():
    # transformers' DeepseekV2DecoderLayer reads no `moe_layer_freq` (DeepSeek's own remote code did).
    cfg = config("small-deepseek-v2")
    cfg.update(num_hidden_layers=6, first_k_dense_replace=1, moe_layer_freq=2)
    assert kinds_of(cfg) == {"latent attention": [0], "latent attention, experts": [1, 2, 3, 4, 5]}


def test_deepseek_v2_yarn_scales_attention_logits_by_mscale_squared():
    m = spec_from_config(config("deepseek-v2-lite")).layers[0].mixer
    assert isinstance(m, LatentAttention)
    assert m.scale == pytest.approx(192 ** -0.5 * (0.1 * 0.707 * __import__("math").log(40) + 1) ** 2)


def test_deepseek_v3_routes_by_sigmoid_with_groups_and_a_selection_bias():
    cfg = config("small-deepseek-v2")
    cfg.update(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], q_lora_rank=32, n_group=4, topk_group=2, scoring_func="sigmoid",
               topk_method="noaux_tc", norm_topk_prob=True, routed_scaling_factor=2.5)
    text = author(spec_from_config(cfg))
    assert "scored by sigmoid, normalized, routed scale 2.5, selection bias eb1, groups 4 keeping 2" in text
    assert "Wqa1" in text and "gqa1" in text
    assert kinds_of(cfg) == {"latent attention": [0], "latent attention, experts": [1, 2, 3]}


def test_llama4_is_chunked_with_rotation_and_global_without_every_fourth_layer():
    k = kinds_of(config("llama-4-scout"))
    assert k == {"attention, chunks of 8192, experts": [l for l in range(48) if l % 4 != 3],
                 "attention, experts": list(range(3, 48, 4))}


def test_llama4_no_rope_layers_and_interleave_moe_layer_step_are_honoured():
    cfg = config("llama-4-scout")
    t = cfg["text_config"]
    t.update(num_hidden_layers=4, no_rope_layers=[1, 0, 1, 1], interleave_moe_layer_step=2)
    spec = spec_from_config(cfg)
    assert [l.mixer.rotation is None for l in spec.layers] == [False, True, False, False]
    assert [isinstance(l.ffn, Experts) for l in spec.layers] == [False, True, False, True]
    assert spec.layers[0].ffn.width == 16384  # intermediate_size_mlp for the dense layers


def test_gpt_oss_alternates_sliding_and_full_attention():
    k = kinds_of(config("gpt-oss-20b"))
    assert k == {"attention, window 128, experts": list(range(0, 24, 2)), "attention, experts": list(range(1, 24, 2))}
    cfg = config("gpt-oss-20b")
    del cfg["layer_types"]
    assert kinds_of(cfg) == k  # derived the way GptOssConfig derives it


def test_llama_3_1_is_one_kind():
    assert kinds_of(config("llama-3.1-8b")) == {"attention": list(range(32))}


def test_llama_3_1_rotates_at_the_frequencies_its_llama3_scaling_gives():
    text = author(spec_from_config(config("llama-3.1-8b")))
    assert "cosines of base 500000, llama3 scaling by 8 from 8192 with low 1 and high 4." in text
    assert "not modelled" not in text


def test_yarn_is_written_with_the_attention_factor_transformers_derives():
    text = author(spec_from_config(config("gpt-oss-20b")))
    # get_mscale(32) = 0.1·ln 32 + 1; gpt-oss asks for an unrounded ramp (`truncate: false`).
    assert "yarn scaling by 32 from 4096 with fast 32 and slow 1, unrounded ramp, attention factor 1.3465736." in text


def test_deepseek_and_llama4_rotate_adjacent_pairs_and_llama_rotates_halves():
    assert ", interleaved" in author(spec_from_config(config("deepseek-v2-lite")))
    assert ", interleaved" in author(spec_from_config(config("llama-4-scout")))
    assert "interleaved" not in author(spec_from_config(config("llama-3.1-8b")))


@pytest.mark.parametrize("scaling, said", [
    ({"rope_type": "dynamic", "factor": 2.0}, '`rope_scaling.rope_type` is "dynamic": its frequencies change with the '
                                              "sequence's length"),
    ({"type": "dynamic", "factor": 2.0}, '`rope_scaling.type` is "dynamic"'),
    ({"rope_type": "foo"}, '`rope_scaling.rope_type` is "foo": a scheme the language does not model'),
])
def test_a_rope_scaling_the_language_cannot_express_is_refused_naming_the_field_and_the_value(scaling, said):
    with pytest.raises(SpecError) as e:
        spec_from_config({**config("llama-3.1-8b"), "rope_scaling": scaling})
    assert said in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("method", ["fp8", "gptq", None])
def test_a_quantization_config_other_than_mxfp4_is_refused_naming_the_method(method):
    with pytest.raises(SpecError) as e:
        spec_from_config({**config("llama-3.1-8b"), "quantization_config": {"quant_method": method}})
    assert f"`quantization_config.quant_method` is {json.dumps(method)}: a quantization the project does not model" \
        in str(e.value)


def test_an_mxfp4_quantization_config_is_read_and_its_storage_named():
    text = author(spec_from_config({**config("gpt-oss-20b"), "quantization_config": {"quant_method": "mxfp4"}}))
    assert "expert banks are stored MXFP4, 17 bytes per 32 values" in text and "--storage mxfp4_moe" in text


# ---- bad configs ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cfg, field", [
    ({"model_type": "bert", "hidden_size": 64}, "model_type"),
    ({"hidden_size": 64}, "model_type"),
    (small("llama", num_hidden_layers=0), "num_hidden_layers"),
    (small("llama", hidden_size="64"), "hidden_size"),
    (small("llama", num_attention_heads=True), "num_attention_heads"),
    (small("llama", num_key_value_heads=3), "num_key_value_heads"),
    (small("llama", rms_norm_eps="tiny"), "rms_norm_eps"),
    (small("llama", layer_types=["full_attention"] * 3), "layer_types"),
    (small("llama", layer_types=["full_attention"] * 7 + ["mystery"]), "layer_types[7]"),
    (small("llama", hidden_act="relu"), "hidden_act"),
    ({k: v for k, v in config("small-deepseek-v2").items() if k != "num_experts_per_tok"}, "num_experts_per_tok"),
    ({**config("qwen3-next-80b-a3b"), "linear_num_value_heads": None}, "linear_num_value_heads"),
    ({**config("qwen3.8"), "text_config": [1, 2]}, "text_config"),
    ({**config("deepseek-v2-lite"), "kv_lora_rank": -1}, "kv_lora_rank"),
    ({**config("gpt-oss-20b"), "num_experts_per_tok": 33}, "num_experts_per_tok"),
    ({**config("gpt-oss-20b"), "head_dim": 45}, "head_dim"),
    ({**config("qwen3-next-80b-a3b"), "partial_rotary_factor": 0.2}, "partial_rotary_factor"),
    ({**config("small-gemma3"), "query_pre_attn_scalar": 0}, "query_pre_attn_scalar"),
])
def test_a_bad_config_is_one_error_naming_the_field(cfg, field):
    with pytest.raises(SpecError) as e:
        spec_from_config(cfg)
    assert f"`{field}`" in str(e.value)


def test_a_config_that_is_not_an_object_is_refused():
    with pytest.raises(SpecError, match="JSON object"):
        spec_from_config([1, 2, 3])
