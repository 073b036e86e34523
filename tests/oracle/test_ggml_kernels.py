"""``--arithmetic llama.cpp`` is ggml's CPU kernels bit for bit: each function of ``streamed.numerics.ggml``, given the
tensors llama.cpp's own graph read, gives the tensor that graph computed — every bit of it — at a prefill of several
rows and at decode steps of one (ggml picks some kernels by the rows of the step). llama.cpp runs a Llama-shaped GGUF
whose heads are 80 wide (a reduction of 64 and 16 more: ggml's dot products treat the two parts differently); its
tensors are read through the scheduler's evaluation callback (``llamacpp.tensors``).

These kernels are the AVX-512 build's (with VNNI): a llama.cpp built for other CPUs computes otherwise, and the first
test says which one this is."""

from __future__ import annotations

import numpy as np
import pytest

import llamacpp
import oracle
from llamacpp import MUL_MAT, RESHAPE, ROPE
from streamed.numerics import ggml
from streamed.numerics.q8 import Planes

CFG = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "head_dim": 80, "intermediate_size": 512, "vocab_size": 256,
       "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
TOKENS = [int(t) for t in np.random.default_rng(3).integers(0, 256, 9)]
PREFILL = 6
HEAD = 80


@pytest.fixture(scope="module", params=["Q8_0", "F32", "F16"])
def graph(request, tmp_path_factory):
    """(the checkpoint's tensors by name, llama.cpp's tensors at each step) for the Llama above, its projections stored
    as the parameter says."""
    from gguf import GGUFReader

    kind = request.param
    path = tmp_path_factory.mktemp(kind) / "llama.gguf"
    oracle.write(path, CFG, q8=kind == "Q8_0", f16=kind == "F16")
    _, steps = llamacpp.tensors(path, TOKENS, PREFILL)
    stored = {}
    for t in GGUFReader(path).tensors:
        data = np.asarray(t.data)
        stored[t.name] = Planes(data) if t.tensor_type.name == "Q8_0" else data
    return kind, stored, steps


def first(step: dict, name: str, op: int | None = None) -> np.ndarray:
    return next(a for o, a in step[name] if op is None or o == op)


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    got, want = np.ascontiguousarray(got, np.float32).ravel(), np.ascontiguousarray(want, np.float32).ravel()
    return got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))


def weight(stored: dict, name: str):
    """A stored weight as a product reads it, ``in × out``."""
    w = stored[name]
    return w if isinstance(w, Planes) else w.T


def test_the_llama_cpp_under_test_is_the_avx_512_build_whose_kernels_these_are():
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    assert "AVX512 = 1" in info and "AVX512_VNNI = 1" in info and "LLAMAFILE = 1" in info, info


def test_rms_norm_and_products_are_ggml_s_bit_for_bit_at_prefill_and_decode(graph):
    kind, stored, steps = graph
    for step in steps:
        for layer in range(2):
            x = first(step, "embd" if layer == 0 else f"l_out-{layer - 1}")
            x = x.reshape(-1, x.shape[-1])
            xn = ggml.rms_norm(x, stored[f"blk.{layer}.attn_norm.weight"], 1e-5)
            assert same_bits(xn, first(step, f"attn_norm-{layer}")), (kind, layer)
            for out, w in (("Qcur", "attn_q"), ("Kcur", "attn_k"), ("Vcur", "attn_v")):
                got = ggml.mul_mat(xn, weight(stored, f"blk.{layer}.{w}.weight"))
                assert same_bits(got, first(step, f"{out}-{layer}", MUL_MAT)), (kind, layer, out, len(x))
            a = first(step, f"kqv_out-{layer}").reshape(len(x), -1)
            got = ggml.mul_mat(a, weight(stored, f"blk.{layer}.attn_output.weight"))
            assert same_bits(got, first(step, f"attn_out-{layer}")), (kind, layer)


def test_rotation_attention_and_swiglu_are_ggml_s_bit_for_bit_at_prefill_and_decode(graph):
    kind, stored, steps = graph
    cos, sin = ggml.rope_tables(500000.0, len(TOKENS), HEAD // 2)
    for layer in range(2):
        keys, values, pos = [], [], 0
        for step in steps:
            q_in = first(step, f"Qcur-{layer}", RESHAPE)  # rows × heads × 80
            rows = q_in.shape[-3]
            turn = cos[pos:pos + rows], sin[pos:pos + rows]
            q = ggml.rotate(q_in.reshape(rows, -1), *turn, 4, HEAD, 0, True)
            assert same_bits(q, first(step, f"Qcur-{layer}", ROPE)), (kind, layer, pos)
            k = ggml.rotate(first(step, f"Kcur-{layer}", RESHAPE).reshape(rows, -1), *turn, 2, HEAD, 0, True)
            assert same_bits(k, first(step, f"Kcur-{layer}", ROPE)), (kind, layer, pos)
            keys.append(k)
            values.append(first(step, f"Vcur-{layer}", MUL_MAT).reshape(rows, -1))
            keep = np.arange(pos + rows)[None, :] <= pos + np.arange(rows)[:, None]
            a = ggml.attention(q, np.concatenate(keys), np.concatenate(values), keep, 4, 2,
                               np.float32(1) / np.sqrt(np.float32(HEAD)))
            assert same_bits(a, first(step, f"kqv_out-{layer}")), (kind, layer, pos)
            gate = first(step, f"ffn_gate-{layer}").reshape(rows, -1)
            up = first(step, f"ffn_up-{layer}").reshape(rows, -1)
            assert same_bits(ggml.silu(gate) * up, first(step, f"ffn_swiglu-{layer}")), (kind, layer, pos)
            pos += rows
