"""Small GGUF checkpoints written with the ``gguf`` package itself (its writer, its Q8_0 quantisation), for tests.

``llama_like(path, …)`` writes a llama.cpp-named dense model; ``storage`` says, per tensor, the GGUF type it is
stored as. Shapes follow GGUF: a projection is ``ne = [in, out]`` (numpy ``out × in``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize


def add(w: GGUFWriter, name: str, ne: tuple[int, ...], qtype: str, rng: np.random.Generator) -> None:
    data = rng.standard_normal(tuple(reversed(ne))).astype(np.float32) * 0.05
    if qtype == "Q8_0":
        w.add_tensor(name, quantize(data, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)
    elif qtype == "F16":
        w.add_tensor(name, data.astype(np.float16))
    else:
        w.add_tensor(name, data)


def write(path: Path, arch: str, kv: dict, tensors: dict[str, tuple[tuple[int, ...], str]], seed: int = 0) -> Path:
    """A GGUF of ``arch`` with metadata ``kv`` (``{arch}`` in a key stands for the architecture; ints as uint32,
    floats as float32, bools, strings, lists of ints) and ``tensors`` name → (ne, type)."""
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
    rng = np.random.default_rng(seed)
    for name, (ne, qtype) in tensors.items():
        add(w, name, ne, qtype, rng)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
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
