"""Every architecture through GGUF: a small model authored with llama.cpp's names, written as a GGUF with the gguf
package (metadata as llama.cpp writes it, projections Q8_0), read back — the same kinds."""

import pytest

import ggufs
from repo import config
from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.gguf import read_gguf
from streamed.model.hf import spec_from_config
from streamed.numerics.weights import from_gguf


def tiny_llama4():
    cfg = config("llama-4-scout")
    cfg["text_config"].update(hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
                              intermediate_size=32, intermediate_size_mlp=64, num_hidden_layers=8,
                              num_local_experts=4, vocab_size=256, interleave_moe_layer_step=2)
    # Chunks stay Scout's 8192: llama.cpp attends Llama 4's GGUFs in chunks of 8192 whatever their metadata says.
    return cfg


def tiny_gpt_oss():
    cfg = config("gpt-oss-20b")
    cfg.update(hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2, intermediate_size=32,
               num_hidden_layers=4, num_local_experts=4, vocab_size=256, sliding_window=16,
               layer_types=["sliding_attention", "full_attention"] * 2)
    return cfg


def tiny_qwen3_next():
    cfg = config("qwen3-next-80b-a3b")
    cfg.update(hidden_size=64, head_dim=32, num_attention_heads=2, num_key_value_heads=1, linear_num_key_heads=2,
               linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32, num_hidden_layers=8,
               num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
               vocab_size=256)
    return cfg


def tiny_qwen3_5():
    cfg = config("qwen3.8")
    cfg["text_config"].update(hidden_size=64, head_dim=32, num_attention_heads=2, num_key_value_heads=1,
                              linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
                              linear_value_head_dim=32, num_hidden_layers=8, intermediate_size=64, vocab_size=256,
                              layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 2)
    return cfg


def small(model_type, **fields):
    return {"model_type": model_type, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 64, "vocab_size": 256, **fields}


CASES = {
    "qwen3.8": tiny_qwen3_5,
    "qwen2": lambda: small("qwen2"),
    "qwen3": lambda: small("qwen3"),
    "qwen3-moe": lambda: small("qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                               decoder_sparse_step=2, norm_topk_prob=True),
    "tiny-llama": lambda: config("tiny-llama"),
    "small-gemma3": lambda: config("small-gemma3"),
    "small-qwen35": lambda: config("small-qwen35"),
    "small-deepseek-v2": lambda: config("small-deepseek-v2"),
    "llama4": tiny_llama4,
    "gpt-oss": tiny_gpt_oss,
    "qwen3-next": tiny_qwen3_next,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_model_written_to_gguf_reads_back_as_the_same_kinds(tmp_path, name):
    cfg = CASES[name]()
    spec = spec_from_config(cfg)
    gspec = ggufs.as_gguf(spec, name)
    arch = gspec.architecture
    text = author(gspec)
    written = analyze(text)
    assert not written.errors, [d.message for d in written.errors][:3]
    path = ggufs.write(tmp_path / f"{name}.gguf", arch, ggufs.metadata(gspec), ggufs.tensors_of(text))
    ckpt = read_gguf(path)
    back = analyze(author(ckpt.spec), ckpt.storage)
    assert not back.errors, [d.message for d in back.errors][:3]
    assert [(k.name, k.layers) for k in back.kinds] == [(k.name, k.layers) for k in written.kinds]
    assert back.divergences == ()
    for a, b in zip(gspec.layers, ckpt.spec.layers):
        assert type(a.mixer) is type(b.mixer) and type(a.ffn) is type(b.ffn)
        assert getattr(a.ffn, "width", None) == getattr(b.ffn, "width", None)
    # Every weight the document authored from the GGUF declares reads from it, in its declared shape (§6).
    weights = from_gguf(path, back.programs, ckpt.storage)
    assert weights is not None
