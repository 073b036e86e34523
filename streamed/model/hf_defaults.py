"""The defaults of transformers' configuration classes for the fields ``hf.py`` reads, per ``model_type`` — what a
config that leaves a field out is read with, exactly as ``AutoConfig.from_pretrained`` reads it (transcribed from
each ``configuration_<type>.py``; ``tests/model/test_transformers_configs.py`` holds them against the installed
transformers: a config naming only its model type reads every field as that class resolves it).

A field whose class default is ``None`` is not listed: ``hf.py`` derives it as the class does (``num_key_value_heads``
= heads, ``head_dim`` = hidden / heads) or, if the model needs it, names it as missing. A field a model type's
modelling code does not read (DeepSeek's ``scoring_func``, ``moe_layer_freq``) is not listed and not read.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULTS"]

_LLAMA_LIKE = {"hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10_000.0, "tie_word_embeddings": False,
               "attention_bias": False}
_QWEN_WINDOW = {"use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28}
_GDN = {"linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "partial_rotary_factor": 0.25, "head_dim": 256}

DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {**_LLAMA_LIKE, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32, "mlp_bias": False},
    # Mixtral: a Mistral whose every feed-forward block is experts of `intermediate_size`, the top-k renormalised.
    "mixtral": {**_LLAMA_LIKE, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-5,
                "rope_theta": 1_000_000.0, "num_experts_per_tok": 2, "num_local_experts": 8},
    "mistral": {**_LLAMA_LIKE, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": 4096},
    "qwen2": {**_LLAMA_LIKE, **_QWEN_WINDOW, "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32},
    "qwen3": {**_LLAMA_LIKE, **_QWEN_WINDOW, "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128},
    "qwen2_moe": {**_LLAMA_LIKE, **_QWEN_WINDOW, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                  "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
                  "decoder_sparse_step": 1, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
                  "num_experts_per_tok": 4, "num_experts": 60, "norm_topk_prob": False},
    "qwen3_moe": {**_LLAMA_LIKE, **_QWEN_WINDOW, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144,
                  "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 4,
                  "decoder_sparse_step": 1, "moe_intermediate_size": 768, "num_experts_per_tok": 8,
                  "num_experts": 128, "norm_topk_prob": False},
    "qwen3_next": {**_LLAMA_LIKE, **_GDN, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                   "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2,
                   "decoder_sparse_step": 1, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
                   "num_experts_per_tok": 10, "num_experts": 512, "norm_topk_prob": True, "full_attention_interval": 4},
    "qwen3_5_text": {**_LLAMA_LIKE, **_GDN, "vocab_size": 248320, "hidden_size": 4096, "intermediate_size": 12288,
                     "num_hidden_layers": 32, "num_attention_heads": 16, "num_key_value_heads": 4,
                     "full_attention_interval": 4},
    "qwen3_5_moe_text": {**_LLAMA_LIKE, **_GDN, "vocab_size": 248320, "hidden_size": 2048, "num_hidden_layers": 40,
                         "num_attention_heads": 16, "num_key_value_heads": 2, "moe_intermediate_size": 512,
                         "shared_expert_intermediate_size": 512, "num_experts_per_tok": 8, "num_experts": 256,
                         "full_attention_interval": 4},
    "gemma3_text": {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
                    "rope_theta": 1_000_000.0, "attention_bias": False, "query_pre_attn_scalar": 256,
                    "sliding_window": 4096, "rope_local_base_freq": 10_000.0, "sliding_window_pattern": 6,
                    "max_position_embeddings": 131_072},
    "deepseek_v2": {**_LLAMA_LIKE, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
                    "num_hidden_layers": 32, "num_attention_heads": 32, "first_k_dense_replace": 0,
                    "kv_lora_rank": 512, "q_lora_rank": 1536, "n_routed_experts": 64, "n_shared_experts": 2,
                    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "routed_scaling_factor": 1.0,
                    "topk_method": "greedy", "v_head_dim": 128, "moe_intermediate_size": 1407},
    "deepseek_v3": {**_LLAMA_LIKE, "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
                    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
                    "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
                    "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
                    "v_head_dim": 128, "qk_nope_head_dim": 128, "n_group": 8, "topk_group": 4,
                    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "norm_topk_prob": True,
                    "rope_interleave": True},
    "llama4_text": {**_LLAMA_LIKE, "vocab_size": 202048, "hidden_size": 5120, "intermediate_size": 8192,
                    "intermediate_size_mlp": 16384, "num_hidden_layers": 48, "num_attention_heads": 40,
                    "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-5, "rope_theta": 500_000.0,
                    "num_experts_per_tok": 1, "num_local_experts": 16, "interleave_moe_layer_step": 1,
                    "use_qk_norm": True, "no_rope_layer_interval": 4, "attention_chunk_size": 8192,
                    "attn_temperature_tuning": True},
    "gpt_oss": {"num_hidden_layers": 36, "num_local_experts": 128, "vocab_size": 201088, "hidden_size": 2880,
                "intermediate_size": 2880, "head_dim": 64, "num_attention_heads": 64, "num_key_value_heads": 8,
                "sliding_window": 128, "tie_word_embeddings": False, "hidden_act": "silu", "rms_norm_eps": 1e-5,
                "rope_theta": 150_000.0, "num_experts_per_tok": 4, "swiglu_limit": 7.0, "attention_bias": True,
                "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                 "original_max_position_embeddings": 4096, "truncate": False}},
}
# The Gemma 2, Phi-3, StarCoder2 and OLMo 2 classes of transformers 5; InternLM2Config of the published remote code
# (configuration_internlm2.py: transformers does not ship it).
DEFAULTS.update({
    "gemma2": {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
               "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
               "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
               "attention_bias": False, "query_pre_attn_scalar": 256, "sliding_window": 4096,
               "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0},
    "phi3": {"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
             "num_attention_heads": 32, "hidden_act": "silu", "max_position_embeddings": 4096,
             "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False},
    "starcoder2": {"vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30,
                   "num_attention_heads": 24, "num_key_value_heads": 2, "hidden_act": "gelu_pytorch_tanh",
                   "norm_epsilon": 1e-5, "use_bias": True, "tie_word_embeddings": True},
    "olmo2": {"vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
              "rms_norm_eps": 1e-5},
    "internlm2": {"vocab_size": 103168, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                  "num_attention_heads": 32, "hidden_act": "silu", "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
                  "bias": True, "rope_theta": 10000.0},
})
# GraniteConfig and Cohere2Config of transformers 5; Nemotron-NAS's DeciLMConfig of the published remote code, a
# LlamaConfig of transformers 4.44.2 (``transformers_4_44_2__configuration_llama.py``) with its ``block_configs``.
DEFAULTS.update({
    "granite": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                "num_attention_heads": 32, "hidden_act": "silu", "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
                "rope_theta": 10000.0, "attention_bias": False, "mlp_bias": False, "embedding_multiplier": 1.0,
                "logits_scaling": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 1.0},
    "cohere2": {"vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528, "logit_scale": 0.0625,
                "num_hidden_layers": 40, "num_attention_heads": 64, "hidden_act": "silu", "layer_norm_eps": 1e-5,
                "tie_word_embeddings": True, "rope_theta": 10000.0, "attention_bias": False, "sliding_window": 4096,
                "sliding_window_pattern": 4},
    "nemotron-nas": {**_LLAMA_LIKE, "vocab_size": 32000, "hidden_size": 4096, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "mlp_bias": False},
})
_QWEN_VL = {**_LLAMA_LIKE, **_QWEN_WINDOW, "vocab_size": 152064, "hidden_size": 8192, "intermediate_size": 29568,
            "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "rms_norm_eps": 1e-5,
            "rope_theta": 1_000_000.0, "max_window_layers": 80}
DEFAULTS.update({
    "qwen2_vl_text": _QWEN_VL, "qwen2_5_vl_text": _QWEN_VL,
    "qwen3_vl_text": {**_LLAMA_LIKE, "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
                      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128,
                      "rope_theta": 500_000.0},
    # Qwen3-VL-MoE's class has no `norm_topk_prob`: its router always normalizes the top-k weights.
    "qwen3_vl_moe_text": {**_LLAMA_LIKE, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                          "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
                          "tie_word_embeddings": True, "rope_theta": 500_000.0, "decoder_sparse_step": 1,
                          "moe_intermediate_size": 1408, "num_experts_per_tok": 4, "num_experts": 60,
                          "norm_topk_prob": True},
})
