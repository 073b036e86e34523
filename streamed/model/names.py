"""Tensor names: the checkpoint tensor that holds each slot of a layer (``attn_q``, ``ffn_norm_bias``…), as llama.cpp
names it in a GGUF (``gguf_tensor``: from the ``gguf`` package's own tensor table) and as transformers names a
model's parameters (``hf_tensor``: Llama's names, and each family's own where it spells them otherwise, ``HF_NAMES``).
The author binds every declared weight through these; the GGUF reader looks tensors up by them.
"""

from __future__ import annotations

#: slot → (llama.cpp's ``MODEL_TENSOR`` member, suffix). Slots with no tensor of their own use a suffix of one that
#: has. The ``gguf`` package is imported only when GGUF names are asked for: a config.json needs neither it nor numpy.
_GGUF_SLOTS: dict[str, tuple[str, str]] = {
    "token_embd": ("TOKEN_EMBD", "weight"),
    "output_norm": ("OUTPUT_NORM", "weight"),
    "output": ("OUTPUT", "weight"),
    "attn_norm": ("ATTN_NORM", "weight"),
    "attn_q": ("ATTN_Q", "weight"),
    "attn_k": ("ATTN_K", "weight"),
    "attn_v": ("ATTN_V", "weight"),
    "attn_q_bias": ("ATTN_Q", "bias"),
    "attn_k_bias": ("ATTN_K", "bias"),
    "attn_v_bias": ("ATTN_V", "bias"),
    "attn_output": ("ATTN_OUT", "weight"),
    "attn_output_bias": ("ATTN_OUT", "bias"),
    "attn_q_norm": ("ATTN_Q_NORM", "weight"),
    "attn_k_norm": ("ATTN_K_NORM", "weight"),
    "attn_sinks": ("ATTN_SINKS", "weight"),
    "attn_post_norm": ("ATTN_POST_NORM", "weight"),
    "ffn_norm": ("FFN_NORM", "weight"),
    "ffn_post_norm": ("FFN_POST_NORM", "weight"),
    "ffn_gate": ("FFN_GATE", "weight"),
    "ffn_up": ("FFN_UP", "weight"),
    "ffn_down": ("FFN_DOWN", "weight"),
    "ffn_gate_inp": ("FFN_GATE_INP", "weight"),
    "ffn_gate_inp_bias": ("FFN_GATE_INP", "bias"),
    "exp_probs_b": ("FFN_EXP_PROBS_B", "bias"),
    "ffn_gate_exps": ("FFN_GATE_EXP", "weight"),
    "ffn_up_exps": ("FFN_UP_EXP", "weight"),
    "ffn_down_exps": ("FFN_DOWN_EXP", "weight"),
    "ffn_gate_exps_bias": ("FFN_GATE_EXP", "bias"),
    "ffn_up_exps_bias": ("FFN_UP_EXP", "bias"),
    "ffn_down_exps_bias": ("FFN_DOWN_EXP", "bias"),
    "ffn_gate_shexp": ("FFN_GATE_SHEXP", "weight"),
    "ffn_up_shexp": ("FFN_UP_SHEXP", "weight"),
    "ffn_down_shexp": ("FFN_DOWN_SHEXP", "weight"),
    "ffn_gate_inp_shexp": ("FFN_GATE_INP_SHEXP", "weight"),
    "ssm_qkv": ("ATTN_QKV", "weight"),
    "ssm_z": ("ATTN_GATE", "weight"),
    "ssm_ba": ("SSM_BETA_ALPHA", "weight"),
    "ssm_beta": ("SSM_BETA", "weight"),
    "ssm_alpha": ("SSM_ALPHA", "weight"),
    "ssm_conv1d": ("SSM_CONV1D", "weight"),
    "ssm_dt": ("SSM_DT", "bias"),
    "ssm_a": ("SSM_A", ""),
    "ssm_norm": ("SSM_NORM", "weight"),
    "ssm_out": ("SSM_OUT", "weight"),
    "attn_q_a": ("ATTN_Q_A", "weight"),
    "attn_q_a_norm": ("ATTN_Q_A_NORM", "weight"),
    "attn_q_b": ("ATTN_Q_B", "weight"),
    "attn_kv_a_mqa": ("ATTN_KV_A_MQA", "weight"),
    "attn_kv_a_norm": ("ATTN_KV_A_NORM", "weight"),
    "attn_k_b": ("ATTN_K_B", "weight"),
    "attn_v_b": ("ATTN_V_B", "weight"),
    "attn_kv_b": ("ATTN_KV_B", "weight"),
    "attn_qkv": ("ATTN_QKV", "weight"),
    "attn_qkv_bias": ("ATTN_QKV", "bias"),
    "attn_norm_bias": ("ATTN_NORM", "bias"),
    "ffn_norm_bias": ("FFN_NORM", "bias"),
    "output_norm_bias": ("OUTPUT_NORM", "bias"),
    "ffn_up_bias": ("FFN_UP", "bias"),
    "ffn_down_bias": ("FFN_DOWN", "bias"),
    "ffn_gate_up": ("FFN_UP", "weight"),  # llama.cpp keeps Phi-3's fused gate and up in ffn_up
    "ffn_gate_bias": ("FFN_GATE", "bias"),
    "attn_linear": ("ATTN_OUT", "weight"),  # llama.cpp keeps Nemotron-NAS's linear replacement of attention as wo
}


def gguf_arch(name: str):
    """The ``MODEL_ARCH`` whose ``general.architecture`` is ``name`` (``qwen3next``), or ``None``."""
    from gguf.constants import MODEL_ARCH_NAMES

    for arch, n in MODEL_ARCH_NAMES.items():
        if n == name:
            return arch
    return None


def gguf_tensor(slot: str, architecture: str) -> str:
    """llama.cpp's name of ``slot`` in every layer (``blk.{l}.attn_q.weight``).

    ★ The norm before the feed-forward block is ``ffn_norm`` in most architectures but ``post_attention_norm`` in
    those that list no ``ffn_norm`` (Qwen3-Next, Qwen3.5): which one is read from the architecture's tensor list."""
    from gguf.constants import MODEL_TENSOR, MODEL_TENSORS, TENSOR_NAMES

    arch = gguf_arch(architecture)
    if slot == "ffn_norm" and arch is not None:
        listed = MODEL_TENSORS.get(arch, [])
        if MODEL_TENSOR.FFN_NORM not in listed and MODEL_TENSOR.FFN_PRE_NORM not in listed:
            slot = "attn_post_norm"
    tensor, suffix = _GGUF_SLOTS[slot]
    base = TENSOR_NAMES[getattr(MODEL_TENSOR, tensor)].format(bid="{l}")
    return f"{base}.{suffix}" if suffix else base


#: Parameter names a family spells its own way (``model_type`` family → slot → name under the layer, or under the
#: text model for ``token_embd`` and ``output_norm``; ``output`` whole). The rest are the Llama-like names below.
HF_NAMES: dict[str, dict[str, str]] = {
    "phi3": {"attn_qkv": "self_attn.qkv_proj.weight", "ffn_gate_up": "mlp.gate_up_proj.weight"},
    "starcoder2": {"attn_norm_bias": "input_layernorm.bias", "ffn_norm_bias": "post_attention_layernorm.bias",
                   "output_norm_bias": "norm.bias", "ffn_up": "mlp.c_fc.weight", "ffn_up_bias": "mlp.c_fc.bias",
                   "ffn_down": "mlp.c_proj.weight", "ffn_down_bias": "mlp.c_proj.bias"},
    # InternLM2's remote code (modeling_internlm2.py): its own names throughout.
    "internlm2": {"token_embd": "tok_embeddings.weight", "output": "output.weight", "attn_norm": "attention_norm.weight",
                  "attn_qkv": "attention.wqkv.weight", "attn_qkv_bias": "attention.wqkv.bias",
                  "attn_output": "attention.wo.weight", "attn_output_bias": "attention.wo.bias",
                  "ffn_norm": "ffn_norm.weight", "ffn_gate": "feed_forward.w1.weight",
                  "ffn_up": "feed_forward.w3.weight", "ffn_down": "feed_forward.w2.weight"},
}


def hf_tensor(slot: str, architecture: str, prefix: str = "model.") -> str:
    """transformers' parameter name of ``slot`` for a model of ``architecture`` (its ``model_type`` family).

    ``prefix`` is where the text model's layers live (``model.`` or ``model.language_model.``). Experts are named as
    transformers holds them, stacked per layer (``mlp.experts.gate_up_proj``): a checkpoint that stores one tensor
    per expert is stacked on load."""
    fam = _family(architecture)
    layer = f"{prefix}layers.{{l}}."
    own = HF_NAMES.get(fam, {})
    if slot in own:
        if slot == "output":
            return own[slot]
        return (prefix if slot in ("token_embd", "output_norm", "output_norm_bias") else layer) + own[slot]
    mlp = "feed_forward." if fam == "llama4" else "mlp."
    if slot == "token_embd":
        return f"{prefix}embed_tokens.weight"
    if slot == "output_norm":
        return f"{prefix}norm.weight"
    if slot == "output":
        return "lm_head.weight"
    attn = "linear_attn." if slot.startswith("ssm_") else "self_attn."
    names = {
        "attn_norm": "input_layernorm.weight",
        "attn_q": "q_proj.weight", "attn_k": "k_proj.weight", "attn_v": "v_proj.weight", "attn_output": "o_proj.weight",
        "attn_q_bias": "q_proj.bias", "attn_k_bias": "k_proj.bias", "attn_v_bias": "v_proj.bias",
        "attn_output_bias": "o_proj.bias", "attn_q_norm": "q_norm.weight", "attn_k_norm": "k_norm.weight",
        "attn_sinks": "sinks",
        "attn_q_a": "q_a_proj.weight", "attn_q_a_norm": "q_a_layernorm.weight", "attn_q_b": "q_b_proj.weight",
        "attn_kv_a_mqa": "kv_a_proj_with_mqa.weight", "attn_kv_a_norm": "kv_a_layernorm.weight",
        "attn_k_b": "kv_b_proj.weight", "attn_v_b": "kv_b_proj.weight", "attn_kv_b": "kv_b_proj.weight",
        "ssm_qkv": "in_proj_qkvz.weight" if fam == "qwen3_next" else "in_proj_qkv.weight",
        "ssm_z": "in_proj_qkvz.weight" if fam == "qwen3_next" else "in_proj_z.weight",
        "ssm_ba": "in_proj_ba.weight", "ssm_beta": "in_proj_b.weight", "ssm_alpha": "in_proj_a.weight",
        "ssm_conv1d": "conv1d.weight", "ssm_dt": "dt_bias", "ssm_a": "A_log", "ssm_norm": "norm.weight",
        "ssm_out": "out_proj.weight", "attn_linear": "linear_attn.weight",
    }
    if slot in names:
        if slot == "attn_norm":
            return layer + names[slot]
        return layer + attn + names[slot]
    # Norms around the feed-forward block: Gemma's sandwich names its pre-FFN norm apart from the post-attention one.
    if slot == "attn_post_norm":
        return layer + "post_attention_layernorm.weight"
    if slot == "ffn_norm":
        return layer + ("pre_feedforward_layernorm.weight" if fam == "gemma" else "post_attention_layernorm.weight")
    if slot == "ffn_post_norm":
        return layer + "post_feedforward_layernorm.weight"
    router = {"gpt_oss": "router", "llama4": "router"}.get(fam, "gate")
    shared = {"deepseek": "shared_experts", "llama4": "shared_expert"}.get(fam, "shared_expert")
    ffn = {
        "ffn_gate": "gate_proj.weight", "ffn_up": "up_proj.weight", "ffn_down": "down_proj.weight",
        "ffn_gate_inp": f"{router}.weight", "ffn_gate_inp_bias": f"{router}.bias",
        "exp_probs_b": f"{router}.e_score_correction_bias",
        "ffn_gate_exps": "experts.gate_up_proj", "ffn_up_exps": "experts.gate_up_proj",
        "ffn_down_exps": "experts.down_proj",
        "ffn_gate_exps_bias": "experts.gate_up_proj_bias", "ffn_up_exps_bias": "experts.gate_up_proj_bias",
        "ffn_down_exps_bias": "experts.down_proj_bias",
        "ffn_gate_bias": "gate_proj.bias", "ffn_up_bias": "up_proj.bias", "ffn_down_bias": "down_proj.bias",
        "ffn_linear": "linear_mlp.weight",
        "ffn_gate_shexp": f"{shared}.gate_proj.weight", "ffn_up_shexp": f"{shared}.up_proj.weight",
        "ffn_down_shexp": f"{shared}.down_proj.weight", "ffn_gate_inp_shexp": "shared_expert_gate.weight",
    }
    return layer + mlp + ffn[slot]


def _family(architecture: str) -> str:
    a = architecture
    if a.startswith("deepseek"):
        return "deepseek"
    if a.startswith("llama4"):
        return "llama4"
    if a.startswith("gemma"):
        return "gemma"
    if a.startswith("qwen3_next"):
        return "qwen3_next"
    return a
