"""``--arithmetic llama.cpp`` is ggml's CPU kernels bit for bit: each function of ``streamed.numerics.ggml``, given the
tensors llama.cpp's own graph read, gives the tensor that graph computed — every bit of it — at a prefill of several
rows and at decode steps of one (ggml picks some kernels by the rows of the step). llama.cpp runs a Llama-shaped GGUF
whose heads are 80 wide (a reduction of 64 and 16 more: ggml's dot products treat the two parts differently); its
tensors are read through the scheduler's evaluation callback (``llamacpp.tensors``). The experts (``build_moe_ffn``:
the router's softmax or sigmoid, the chosen weights' renormalisation, each expert's products one row at a time, the
chosen outputs added best first) are held so on the oracle's Qwen3-MoE and Llama 4 (with its q/k norm), and layer
norm, soft caps, softplus, sigmoid and Gated DeltaNet's L2 norm and short convolution on its StarCoder2, Gemma 2 and
Qwen3.5.

Every function is computed on the kernel path of the llama.cpp under test (``llamacpp.BUILT``, read from the build's
own report): on an AVX2 host its AVX2 build, on an AVX-512 host its AVX-512 build (and ``test_kernel_paths.py`` runs
this module again against the other builds the host can run). The first test holds that report to the CPU's own
flags, read independently."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import llamacpp
import oracle
from llamacpp import MUL_MAT, RESHAPE, ROPE
from repo import CONFIGS
from streamed.numerics import cpu, ggml
from streamed.numerics.product import llama_cpp
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


def test_the_llama_cpp_under_test_computes_in_the_kernel_path_its_build_was_made_for():
    """The build's own report (``llama_print_system_info``) names the path its kernels take. A native build
    (llama-cpp-python's, built on this machine) takes the widest this CPU has — which ``/proc/cpuinfo`` says
    independently; a build made for one path (``STREAMED_ORACLE_BUILD``, ``test_kernel_paths.py``: its name in
    ``llama_builds.BUILDS``) reports that one, AVX512_BF16 and all."""
    import llama_builds
    from streamed.numerics import cpu

    path = llamacpp.built_path()
    flags, name, machine = cpu.this_host()
    want = llama_builds.BUILDS[os.environ["STREAMED_ORACLE_BUILD"]][0] if os.environ.get("STREAMED_ORACLE_BUILD") \
        else cpu.native_tuning(cpu.from_cpu(flags, machine), cpu.cpu_vendor(Path("/proc/cpuinfo").read_text()))
    assert path == want, (llamacpp.REPORT, name)
    assert path.tinyblas, "llama-cpp-python builds llama.cpp with llamafile's tinyBLAS"


PATH = llamacpp.BUILT if isinstance(llamacpp.BUILT, cpu.KernelPath) else None


@pytest.fixture(autouse=True)
def _a_path_this_host_runs():
    """Every kernel test computes on the build's path; a build no path emulates is reported, not tested."""
    llamacpp.built_path()


def test_rms_norm_and_products_are_ggml_s_bit_for_bit_at_prefill_and_decode(graph):
    kind, stored, steps = graph
    for step in steps:
        for layer in range(2):
            x = first(step, "embd" if layer == 0 else f"l_out-{layer - 1}")
            x = x.reshape(-1, x.shape[-1])
            xn = ggml.rms_norm(x, stored[f"blk.{layer}.attn_norm.weight"], 1e-5)
            assert same_bits(xn, first(step, f"attn_norm-{layer}")), (kind, layer)
            for out, w in (("Qcur", "attn_q"), ("Kcur", "attn_k"), ("Vcur", "attn_v")):
                got = ggml.mul_mat(xn, weight(stored, f"blk.{layer}.{w}.weight"), path=PATH)
                assert same_bits(got, first(step, f"{out}-{layer}", MUL_MAT)), (kind, layer, out, len(x))
            a = first(step, f"kqv_out-{layer}").reshape(len(x), -1)
            got = ggml.mul_mat(a, weight(stored, f"blk.{layer}.attn_output.weight"), path=PATH)
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
                               np.float32(1) / np.sqrt(np.float32(HEAD)), path=PATH)
            assert same_bits(a, first(step, f"kqv_out-{layer}")), (kind, layer, pos)
            gate = first(step, f"ffn_gate-{layer}").reshape(rows, -1)
            up = first(step, f"ffn_up-{layer}").reshape(rows, -1)
            assert same_bits(ggml.silu(gate, path=PATH) * up, first(step, f"ffn_swiglu-{layer}")), (kind, layer, pos)
            pos += rows


#: Experts as ``build_moe_ffn`` computes them: Qwen3-MoE's softmax router whose chosen weights are renormalised, two
#: of four experts a row; and Llama 4's sigmoid router weighting the expert's input, its q/k RMS norm without a gain.
MOE = {"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96, "vocab_size": 128, "num_experts": 4,
       "num_experts_per_tok": 2, "moe_intermediate_size": 32, "norm_topk_prob": True}
#: The oracle's Llama 4 case (``test_llamacpp.CASES``): Scout's configuration, small, experts on every layer (four
#: layers: llama.cpp aborts on a Llama 4 without a NoPE layer, whose temperature input it then never sets).
LLAMA4 = dict(hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2, intermediate_size=32,
              intermediate_size_mlp=64, num_hidden_layers=4, num_local_experts=4, vocab_size=128,
              interleave_moe_layer_step=1)


def llama4() -> dict:
    return config("llama-4-scout", **LLAMA4)


def bank(stored: dict, name: str) -> list:
    """A stored expert bank as the experts read it: expert ``e``'s weight ``in × out``."""
    w = stored[name]
    return [w[e] if isinstance(w, Planes) else w[e].T for e in range(w.shape[0])]


@pytest.fixture(scope="module", params=["Q8_0", "F16"])
def moe_graph(request, tmp_path_factory):
    from gguf import GGUFReader

    kind = request.param
    graphs = {}
    for name, cfg in (("qwen3-moe", MOE), ("llama4", llama4())):
        path = tmp_path_factory.mktemp(kind) / f"{name}.gguf"
        oracle.write(path, cfg, q8=kind == "Q8_0", f16=kind == "F16")
        _, steps = llamacpp.tensors(path, [t % 128 for t in TOKENS], PREFILL)
        stored = {}
        for t in GGUFReader(path).tensors:
            data = np.asarray(t.data)
            stored[t.name] = Planes(data) if t.tensor_type.name == "Q8_0" else data
        graphs[name] = stored, steps
    return kind, graphs


def test_a_softmax_router_its_renormalised_weights_and_the_experts_sum_are_ggml_s_bit_for_bit(moe_graph):
    from streamed.numerics import kernels as nx
    LLAMA_CPP = llama_cpp(PATH)

    kind, graphs = moe_graph
    stored, steps = graphs["qwen3-moe"]
    for step in steps:
        for layer in range(2):
            x = first(step, f"ffn_norm-{layer}").reshape(-1, 64)
            router = weight(stored, f"blk.{layer}.ffn_gate_inp.weight")
            logits = ggml.mul_mat(x, router, path=PATH)
            assert same_bits(logits, first(step, f"ffn_moe_logits-{layer}")), (kind, layer, len(x))
            assert same_bits(nx.softmax(logits, arithmetic=LLAMA_CPP), first(step, f"ffn_moe_probs-{layer}"))
            _, w = nx.route(logits, 2, "softmax", normalized=True, arithmetic=LLAMA_CPP)
            assert same_bits(w, first(step, f"ffn_moe_weights_norm-{layer}")), (kind, layer, len(x))
            banks = [bank(stored, f"blk.{layer}.ffn_{p}_exps.weight") for p in ("gate", "up", "down")]
            out = nx.experts(x, router, 2, *banks, scored_by="softmax", normalized=True, arithmetic=LLAMA_CPP)
            assert same_bits(out, first(step, f"ffn_moe_out-{layer}")), (kind, layer, len(x))


def test_a_sigmoid_router_weighting_inputs_and_llama_4_s_q_k_norm_are_ggml_s_bit_for_bit(moe_graph):
    from streamed.numerics import kernels as nx
    LLAMA_CPP = llama_cpp(PATH)

    kind, graphs = moe_graph
    stored, steps = graphs["llama4"]
    for step in steps:
        for layer in range(2):
            for name, heads in (("Qcur", 4), ("Kcur", 2)):
                rotated = first(step, f"{name}-{layer}", ROPE).reshape(-1, heads * 16)
                # the document's ``(l2norm of X, epsilon 16ε, heads H) scaled by 4``: ggml_rms_norm without a gain
                got = nx.l2norm(rotated, np.float32(16) * np.float32(1e-5), heads, LLAMA_CPP) * np.float32(4)
                assert same_bits(got, first(step, f"{name}_normed-{layer}")), (kind, layer, name)
            # llama4.cpp names the attention's output ``ffn_norm``: the experts' input is normalised here
            x = ggml.rms_norm(first(step, f"ffn_inp-{layer}").reshape(-1, 64), stored[f"blk.{layer}.ffn_norm.weight"],
                              1e-5)
            router = weight(stored, f"blk.{layer}.ffn_gate_inp.weight")
            logits = ggml.mul_mat(x, router, path=PATH)
            assert same_bits(logits, first(step, f"ffn_moe_logits-{layer}")), (kind, layer, len(x))
            assert same_bits(nx.sigmoid(logits, LLAMA_CPP), first(step, f"ffn_moe_probs-{layer}")), (kind, layer)
            banks = [bank(stored, f"blk.{layer}.ffn_{p}_exps.weight") for p in ("gate", "up", "down")]
            out = nx.experts(x, router, 1, *banks, scored_by="sigmoid", weighting_inputs=True, arithmetic=LLAMA_CPP)
            assert same_bits(out, first(step, f"ffn_moe_out-{layer}")), (kind, layer, len(x))
            shared = [weight(stored, f"blk.{layer}.ffn_{p}_shexp.weight") for p in ("gate", "up", "down")]
            out = nx.experts(x, router, 1, *banks, scored_by="sigmoid", weighting_inputs=True, shared=shared,
                             arithmetic=LLAMA_CPP)
            assert same_bits(out, first(step, f"ffn_moe_out_merged-{layer}")), (kind, layer, len(x))


def config(name: str, **fields) -> dict:
    """A shipped config with ``fields`` replaced (in its text model's, where it has one): the oracle's cases."""
    c = json.loads((CONFIGS / f"{name}.json").read_text())
    (c.setdefault("text_config", {}) if "text_config" in c else c).update(fields)
    return c


@pytest.fixture(scope="module")
def elementwise_graphs(tmp_path_factory):
    """llama.cpp's tensors for the oracle's StarCoder2 (layer norms with a bias, GELU; F16), Gemma 2 (soft caps) and
    Qwen3.5 (Gated DeltaNet's softplus, sigmoid and L2 norm), F32."""
    from gguf import GGUFReader

    gdn = dict(hidden_size=64, head_dim=32, num_attention_heads=2, num_key_value_heads=1, linear_num_key_heads=2,
               linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32, num_hidden_layers=4,
               vocab_size=256, intermediate_size=64, layer_types=["linear_attention"] * 3 + ["full_attention"])
    cases = {"starcoder2": config("small-starcoder2", sliding_window=None), "gemma2": config("small-gemma2"),
             "qwen35": config("qwen3.8", **gdn)}
    graphs = {}
    for name, c in cases.items():
        path = tmp_path_factory.mktemp(name) / "model.gguf"
        vocab = c.get("text_config", c)["vocab_size"]
        if name == "starcoder2":  # the oracle's F16 case and tokens: a GELU input there takes a table entry that
            # only ggml-cpu.c's own arithmetic (tanhf, one fma) rounds to llama.cpp's fp16 value
            oracle.write(path, c, f16=True)
            tokens = [int(t) for t in np.random.default_rng(7).integers(0, vocab, 28)]
            _, steps = llamacpp.tensors(path, tokens, 16)
        else:
            oracle.write(path, c)
            _, steps = llamacpp.tensors(path, [t % vocab for t in TOKENS], PREFILL)
        graphs[name] = {t.name: np.asarray(t.data) for t in GGUFReader(path).tensors}, steps
    return graphs


def test_layer_norm_gelu_soft_caps_softplus_sigmoid_and_l2_norm_are_ggml_s_bit_for_bit(elementwise_graphs):
    from streamed.numerics import kernels as nx
    LLAMA_CPP = llama_cpp(PATH)

    stored, steps = elementwise_graphs["starcoder2"]
    for step in steps:
        for layer in range(4):
            x = first(step, f"ffn_inp-{layer}").reshape(-1, 64)
            got = nx.layernorm(x, stored[f"blk.{layer}.ffn_norm.weight"], stored[f"blk.{layer}.ffn_norm.bias"], 1e-5,
                               LLAMA_CPP)
            assert same_bits(got, first(step, f"ffn_norm-{layer}")), ("layer norm", layer, len(x))
            up = first(step, f"ffn_up_b-{layer}")
            assert same_bits(nx.gelu(up, LLAMA_CPP), first(step, f"ffn_gelu-{layer}")), ("GELU's table", layer)
    stored, steps = elementwise_graphs["gemma2"]
    for step in steps:
        for layer in range(2):
            got = nx.soft_cap(first(step, f"kq-{layer}"), 50.0, LLAMA_CPP)
            assert same_bits(got, first(step, f"kq_scaled_2-{layer}")), ("attention's soft cap", layer)
        logits = ggml.mul_mat(first(step, "result_norm").reshape(-1, 64), stored["token_embd.weight"].T, path=PATH)
        assert same_bits(nx.soft_cap(logits, 30.0, LLAMA_CPP), first(step, "result_output")), "the final soft cap"
    stored, steps = elementwise_graphs["qwen35"]
    for step in steps:
        gate = nx.softplus(first(step, "alpha-0") + stored["blk.0.ssm_dt.bias"], LLAMA_CPP)
        assert same_bits(gate, first(step, "a_softplus-0")), "softplus"
        for name in ("q", "k"):  # build_gdn_l2_norm: the language's x/√(Σx² + ε), two heads of 32
            x = first(step, f"{name}_conv-0")
            got = nx.l2norm(x.reshape(len(x.reshape(-1, 64)), 64), 1e-6, 2, LLAMA_CPP)
            assert same_bits(got, first(step, f"{name}_conv_predelta-0")), f"{name}'s L2 norm"
        assert same_bits(nx.sigmoid(first(step, "beta-0"), LLAMA_CPP), first(step, "beta_sigmoid-0")), "sigmoid"


def test_gated_deltanet_s_short_convolution_is_ggml_s_ssm_conv_bit_for_bit_at_prefill_and_decode(elementwise_graphs):
    """``ggml_ssm_conv`` is a scalar loop in ggml's source; what it computes is what the compiler made of it on the
    path — some of its terms fused (``ggml.ssm_conv``): on AVX-512 all four of Qwen3.5's, on AVX2 none."""
    from streamed.numerics import kernels as nx
    LLAMA_CPP = llama_cpp(PATH)

    stored, steps = elementwise_graphs["qwen35"]
    for layer in range(3):
        w = stored[f"blk.{layer}.ssm_conv1d.weight"]  # channels × k
        k = w.shape[1]
        for step in steps:
            window = first(step, f"conv_input-{layer}").reshape(w.shape[0], -1).T  # the state's k − 1 rows, the step's
            got, state = nx.short_convolution(window[k - 1:], window[:k - 1], w.T, LLAMA_CPP)
            assert same_bits(got, first(step, f"conv_output_raw-{layer}")), (layer, len(window) - k + 1)
            assert same_bits(state, window[len(window) - k + 1:]), layer
