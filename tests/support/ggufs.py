"""Small GGUF checkpoints written with the ``gguf`` package itself (its writer, its Q8_0 quantisation), for tests.

``llama_like(path, …)`` writes a llama.cpp-named dense model; ``storage`` says, per tensor, the GGUF type it is
stored as. Shapes follow GGUF: a projection is ``ne = [in, out]`` (numpy ``out × in``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize


def add(w: GGUFWriter, name: str, ne: tuple[int, ...], qtype: str, rng: np.random.Generator) -> None:
    """Tensor ``name`` of GGUF shape ``ne`` stored ``qtype``: quantised by the ``gguf`` package where it can, random
    blocks of the type's size where it cannot (an IQ type: bytes enough to be listed, never meant to be read)."""
    data = rng.standard_normal(tuple(reversed(ne))).astype(np.float32) * 0.05
    if qtype == "F16":
        w.add_tensor(name, data.astype(np.float16))
    elif qtype == "F32":
        w.add_tensor(name, data)
    else:
        kind = GGMLQuantizationType[qtype]
        try:
            raw = quantize(data, kind)
        except NotImplementedError:
            values, nbytes = GGML_QUANT_SIZES[kind]
            raw = rng.integers(0, 256, (*data.shape[:-1], data.shape[-1] // values * nbytes), dtype=np.uint8)
        w.add_tensor(name, raw, raw_dtype=kind)


def writer(path: Path, arch: str, kv: dict) -> GGUFWriter:
    """A GGUF writer of ``arch`` holding metadata ``kv`` (``{arch}`` in a key stands for the architecture; ints as
    uint32, floats as float32, bools, strings, lists of ints); its tensors are the caller's to add."""
    w = GGUFWriter(str(path), arch)
    for key, v in kv.items():
        key = key.format(arch=arch)
        if isinstance(v, bool):
            w.add_bool(key, v)
        elif isinstance(v, int):
            w.add_uint32(key, v)
        elif isinstance(v, float):
            w.add_float32(key, v)
        elif isinstance(v, str):
            w.add_string(key, v)
        else:
            w.add_array(key, v)
    return w


def finish(w: GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write(path: Path, arch: str, kv: dict, tensors: dict[str, tuple[tuple[int, ...], str]], seed: int = 0) -> Path:
    """A GGUF of ``arch`` with metadata ``kv`` (as ``writer`` reads it) and ``tensors`` name → (ne, type)."""
    w = writer(path, arch, kv)
    rng = np.random.default_rng(seed)
    for name, (ne, qtype) in tensors.items():
        add(w, name, ne, qtype, rng)
    finish(w)
    return path


def llama_like(path: Path, layers: int = 4, d: int = 64, heads: int = 4, kv_heads: int = 2, ffn: int = 128,
               vocab: int = 256, types: dict[str, str] | None = None, extra_kv: dict | None = None,
               skip: tuple[str, ...] = (), block_count: int | None = None) -> Path:
    """A llama-architecture GGUF: every projection Q8_0 unless ``types`` says otherwise (tensor → type); norms F32."""
    hd = d // heads
    types = types or {}
    tensors: dict[str, tuple[tuple[int, ...], str]] = {
        "token_embd.weight": ((d, vocab), "F32"),
        "output_norm.weight": ((d,), "F32"),
        "output.weight": ((d, vocab), "Q8_0"),
    }
    for l in range(layers):
        b = f"blk.{l}."
        tensors.update({
            b + "attn_norm.weight": ((d,), "F32"),
            b + "attn_q.weight": ((d, heads * hd), "Q8_0"),
            b + "attn_k.weight": ((d, kv_heads * hd), "Q8_0"),
            b + "attn_v.weight": ((d, kv_heads * hd), "Q8_0"),
            b + "attn_output.weight": ((heads * hd, d), "Q8_0"),
            b + "ffn_norm.weight": ((d,), "F32"),
            b + "ffn_gate.weight": ((d, ffn), "Q8_0"),
            b + "ffn_up.weight": ((d, ffn), "Q8_0"),
            b + "ffn_down.weight": ((ffn, d), "Q8_0"),
        })
    for name, t in types.items():
        tensors[name] = (tensors[name][0], t)
    for name in skip:
        tensors.pop(name)
    kv = {
        "general.name": "tiny-gguf-llama",
        "{arch}.block_count": layers if block_count is None else block_count,
        "{arch}.embedding_length": d,
        "{arch}.feed_forward_length": ffn,
        "{arch}.attention.head_count": heads,
        "{arch}.attention.head_count_kv": kv_heads,
        "{arch}.attention.layer_norm_rms_epsilon": 1e-5,
        "{arch}.rope.freq_base": 10000.0,
        "{arch}.context_length": 2048,
        **(extra_kv or {}),
    }
    return write(path, "llama", kv, tensors)


# ---- a GGUF for any authored document ------------------------------------------------------------------------------

GGUF_ARCH = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "gemma3_text": "gemma3", "gemma3": "gemma3", "qwen3_5_moe": "qwen35moe",
             "qwen3_5": "qwen35", "qwen3_next": "qwen3next", "deepseek_v2": "deepseek2", "llama4": "llama4",
             "llama4_text": "llama4", "gpt_oss": "gpt-oss", "qwen3": "qwen3", "qwen2": "qwen2", "qwen3_moe": "qwen3moe", "qwen2_moe": "qwen2moe",
             "gemma2": "gemma2", "phi3": "phi3", "starcoder2": "starcoder2", "olmo2": "olmo2", "internlm2": "internlm2",
             "granite": "granite", "cohere2": "cohere2", "nemotron-nas": "deci"}


def as_gguf(spec, name: str | None = None, arch: str | None = None):
    """``spec`` as llama.cpp converts it: its architecture's GGUF name (``arch`` where the converter names it other than
    by the text model's type: a Mistral 3 wrapper's Mistral writes ``mistral3``), llama.cpp's tensor names, DeepSeek's
    ``kv_b_proj`` split into ``attn_k_b`` and ``attn_v_b`` as current converters write it, and InternLM2's grouped
    ``wqkv`` split into ``attn_q``, ``attn_k`` and ``attn_v`` (Phi-3's ``[q | k | v]`` stays one ``attn_qkv``)."""
    import dataclasses

    from streamed.model.spec import Attention, LatentAttention

    def layer(l):
        if isinstance(l.mixer, LatentAttention):
            return dataclasses.replace(l, mixer=dataclasses.replace(l.mixer, kv_b_packed=False))
        if isinstance(l.mixer, Attention) and l.mixer.fused == "grouped":
            return dataclasses.replace(l, mixer=dataclasses.replace(l.mixer, fused=None))
        return l

    return dataclasses.replace(spec, architecture=arch or GGUF_ARCH[spec.architecture], naming="gguf",
                               name=name or spec.name, layers=tuple(layer(l) for l in spec.layers))


def metadata(spec) -> dict:
    """llama.cpp's metadata for ``spec``: the keys ``streamed.model.gguf`` reads back."""
    from streamed.model.spec import Attention, Experts, GatedDeltaNet, LatentAttention

    kv = {"general.name": spec.name, "{arch}.block_count": len(spec.layers), "{arch}.embedding_length": spec.d,
          "{arch}.vocab_size": spec.vocab, "{arch}.attention.layer_norm_rms_epsilon": float(spec.final_norm.eps)}
    for layer in spec.layers:
        m, f = layer.mixer, layer.ffn
        if isinstance(m, Attention):
            kv["{arch}.attention.head_count"] = m.heads
            kv["{arch}.attention.head_count_kv"] = m.kv_heads
            kv["{arch}.attention.key_length"] = m.head_dim
            kv["{arch}.attention.value_length"] = m.head_dim
            if m.rotation is not None:
                kv.setdefault("{arch}.rope.dimension_count", m.rotation.dims)
                kv.setdefault("{arch}.rope.freq_base", float(m.rotation.base))
            if m.window or m.chunk:
                kv["{arch}.attention.sliding_window"] = m.window or m.chunk
        elif isinstance(m, GatedDeltaNet):
            kv.update({"{arch}.ssm.conv_kernel": m.conv_kernel, "{arch}.ssm.state_size": m.key_dim,
                       "{arch}.ssm.group_count": m.key_heads, "{arch}.ssm.time_step_rank": m.value_heads,
                       "{arch}.ssm.inner_size": m.value_heads * m.value_dim})
        elif isinstance(m, LatentAttention):
            kv.update({"{arch}.attention.head_count": m.heads, "{arch}.attention.kv_lora_rank": m.kv_rank,
                       "{arch}.attention.key_length_mla": m.nope_dim + m.rope_dim,
                       "{arch}.attention.value_length_mla": m.v_dim, "{arch}.rope.dimension_count": m.rope_dim,
                       "{arch}.rope.freq_base": float(m.rotation.base)})
            if m.q_rank:
                kv["{arch}.attention.q_lora_rank"] = m.q_rank
        if isinstance(f, Experts):
            kv.update({"{arch}.expert_count": f.count, "{arch}.expert_used_count": f.top_k,
                       "{arch}.expert_weights_norm": f.normalized,
                       "{arch}.expert_gating_func": 2 if f.scoring == "sigmoid" else 1})
    return kv


def tensors_of(text: str, types: dict[str, str] | None = None) -> dict[str, tuple[tuple[int, ...], str]]:
    """Every checkpoint tensor an authored document binds, with its GGUF shape (``ne``) and type: projections the
    document declares ``q8`` stored Q8_0 (where their rows are whole blocks), the rest F32, ``types`` overriding —
    except the routers and the shared expert's gate (``ffn_gate_inp``, ``ffn_gate_inp_shexp``), which llama.cpp's
    converter always writes F32, as a checkpoint of it would hold them.
    A tensor several weights carve by columns is as wide as its columns say."""
    from streamed.lang.parser import parse
    from streamed.model.checkpoint import bind
    from streamed.model.links import programs_of

    p = programs_of(parse(text))
    entries = p.document.checkpoint
    out: dict[str, list] = {}
    q8: dict[str, bool] = {}
    for prog in p.all():
        for w in prog.weights():
            ref = bind(entries, w.name)
            shape = list(w.shape)
            if len(shape) == 2 and (prog.section.kind.value == "embed" or ref.tensor.endswith(".bias")):
                ne = [shape[1], shape[0]]  # a lookup table, a stack of biases: read in the stored orientation
            elif len(shape) == 3:
                ne = [shape[1], shape[2], shape[0]]
            else:
                ne = shape[:]
            if ref.columns is not None:
                a, b, every = ref.columns
                axis = 1 if len(ne) >= 2 else 0
                ne[axis] = every * ne[axis] // (b - a) if every else b
            old = out.get(ref.tensor)
            if old is not None:
                axis = 1 if len(ne) >= 2 else 0
                ne[axis] = max(ne[axis], old[axis])
            out[ref.tensor] = ne
            router = ".ffn_gate_inp." in ref.tensor or ".ffn_gate_inp_shexp." in ref.tensor
            q8[ref.tensor] = q8.get(ref.tensor, True) and w.q8 and ne[0] % 32 == 0 and not router
    types = types or {}
    return {t: (tuple(ne), types.get(t, "Q8_0" if q8[t] else "F32")) for t, ne in out.items()}


#: What llama.cpp needs to load a file's vocabulary beyond its tensors: no tokenizer, a vocabulary size.
LOADABLE = {"tokenizer.ggml.model": "none", "llama.vocab_size": 256}


def loadable(path: Path) -> Path:
    """A two-layer llama GGUF llama.cpp loads (its vocabulary too: ``LOADABLE``), its embedding F16 — the file the
    header tests break one field of."""
    return llama_like(path, layers=2, types={"token_embd.weight": "F16"}, extra_kv=LOADABLE)


def refusal(path: Path) -> str | None:
    """What ``streamed`` says of the file at ``path`` when it reads its storage (``read_storage``), or ``None`` when
    it takes it: the refusal the header tests set beside llama.cpp's."""
    from streamed.model.gguf import CheckpointError, read_storage

    try:
        read_storage(path)
    except CheckpointError as e:
        return str(e)
    return None
