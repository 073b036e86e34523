"""The checkpoints people download — Q4_K_M, Q5_K_M, Q6_K, Q3_K_M, Q2_K, Q4_0 (Q4_1, Q5_0, Q5_1), BF16, each made by
llama.cpp's own quantizer from one F32 GGUF of a small Llama (widths multiples of 256, so every projection takes a
K-quant) — read as stored and computed as llama.cpp computes them.

- Read as stored: every product's weight is kept in its blocks (``Blocks``, its file's type), and dequantised
  exactly as the ``gguf`` package does (the format's reference implementation, not ``streamed``'s).
- Exact arithmetic: ``streamed`` on the quantised file computes what llama.cpp computes on the same file with every
  tensor dequantised (by ``gguf.quants``) and stored F32, within the F32 bound of ``test_llamacpp.py`` — through the
  reference and through the prefill and decode bundles. (On the quantised file itself llama.cpp quantises its
  activations, which exact arithmetic does not.)
- llama.cpp's arithmetic: a product over a K-quant (Q2_K … Q6_K), a legacy quant (Q4_0, Q4_1, Q5_0, Q5_1) or BF16
  weight is llama.cpp's, bit for bit — held to each product tensor llama.cpp's graph computes (``llamacpp.tensors``)
  at a prefill of several rows and at decode steps, from the very input llama.cpp's product read — and so are the
  logits of such a file, ``np.array_equal`` with llama.cpp's own, through the reference and the prefill and decode
  bundles, where exact arithmetic is 1e-4 or more away (Q4_K_M, Q5_K_M, Q6_K, Q3_K_M, Q2_K, Q4_0, Q4_1, Q5_0, Q5_1,
  BF16 files). These at a real width (d 1024, FFN 2048: reductions of 4 and 8 blocks of 256), where the accumulation
  across blocks counts; a prefill of 8 rows, from which ggml's tiled K-quant kernel takes the product, and of 6, where
  the ``vec_dot`` does; BF16 on each x86 path in that path's own code (AVX2's, AVX-512's with AVX512_BF16 and
  without: ``test_kernel_paths.py`` runs these again against a build of each path this host runs). What is not
  computed so ``run`` names.
- Banks of experts kept in blocks (ggml's ``mul_mat_id``): gpt-oss made MXFP4_MOE (its banks MXFP4, MXFP4's own dot
  over Q8_0 activations) and a Qwen3-MoE made Q4_K_M (its banks Q4_K and Q6_K), Q4_0 and BF16 (one row at a time
  where a matrix of several rows takes tinyBLAS: seen failing otherwise) — each expert's product tensor held
  bit for bit to llama.cpp's, at a prefill where some experts are routed 8 rows or more (ggml's tiled kernel takes a
  K-quant expert's product) and some fewer (the dot), and each file's logits ``np.array_equal`` to llama.cpp's,
  through the reference and the prefill and decode bundles; the banks kept in their stored blocks throughout.
- Kinds: a Q4_K_M file whose layer 1 keeps ``attn_v`` and ``ffn_down`` Q6_K (llama.cpp's ``use_more_bits``) has two
  layer kinds, and the divergence says which weight is stored how.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from gguf import GGUFReader
from gguf.quants import dequantize

import llamacpp
import oracle
import quants
from repo import CONFIGS, ROOT, lesser_target
from llamacpp import MUL_MAT
from streamed.analysis.whole import analyze
from streamed.model.author import author
from streamed.model.checkpoint import BLOCKS
from streamed.model.gguf import read_gguf
from streamed.numerics import ggml_quants
from streamed.numerics.blocks import Blocks
from streamed.numerics.weights import from_gguf

CFG = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 256,
       "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
TOKENS = [int(t) for t in np.random.default_rng(5).integers(0, 256, 9)]
PREFILL = 6
F32_TOLERANCE = 1e-5  # test_llamacpp.py's: both in float32, each in its own order of summation
#: The file types whose every product llama.cpp's arithmetic computes here, and the types their layers' weights take.
WEIGHT_TYPES = {"Q4_K_M": {"Q4_K", "Q6_K"}, "Q5_K_M": {"Q5_K", "Q6_K"}, "Q6_K": {"Q6_K"}, "Q4_0": {"Q4_0"},
                "Q3_K_M": {"Q3_K", "Q4_K", "Q5_K"}, "Q2_K": {"Q2_K", "Q3_K"},
                "Q4_1": {"Q4_1"}, "Q5_0": {"Q5_0"}, "Q5_1": {"Q5_1"}, "BF16": {"BF16"}}
COMPUTED = tuple(WEIGHT_TYPES)
#: A real width (a reduction of 4, 8 blocks of 256 and 32, 64 of 32), where a product's accumulation across blocks
#: shows: llama.cpp's hidden 1024, FFN 2048.
WIDE = {**CFG, "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 2048}
#: The logits' prefill is 8 rows, where ggml's tiled kernel takes a K-quant's product (the products' test's 6 rows
#: take the ``vec_dot``), then two decode steps.
WIDE_TOKENS = [int(t) for t in np.random.default_rng(6).integers(0, 256, 10)]
WIDE_PREFILL = 8
#: Prefills whose rows the tiled K-quant product (``ggml_tiled``) takes in every grouping: 16 lanes a group on AVX-512
#: VNNI (21 rows two groups, 40 three, 57 three and one), 8 elsewhere (21 three, 29 three and one).
TILED_PREFILLS = (21, 40, 57)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return oracle.write(tmp_path_factory.mktemp("f32") / "llama.gguf", CFG).path


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    return oracle.write(tmp_path_factory.mktemp("wide") / "llama.gguf", WIDE).path


@pytest.fixture(scope="module", params=quants.FTYPES)
def quantised(request, source):
    return request.param, quants.quantize(source, source.parent / f"{request.param}.gguf", request.param)


def worst(got: np.ndarray, want: np.ndarray) -> float:
    return float(oracle.relative(got, want).max())


def test_in_llama_cpp_s_arithmetic_run_names_the_weights_llama_cpp_itself_repacks_by_default(quantised, run, tmp_path):
    """llama.cpp's defaults move some types' weights into layouts of their own (AVX2's repacked Q4_0/Q4_K, AMX tiles)
    and multiply them in other kernels; ``--arithmetic llama.cpp`` is its arithmetic with that off (``--no-repack``),
    and says so, naming exactly the types llama.cpp's own log says it repacked loading the same file."""
    ftype, path = quantised
    theirs = llamacpp.repacked(path)
    doc = tmp_path / "model.lgm"
    assert run("author", path, "-o", doc)[0] == 0
    code, out, err = run("run", doc, "--checkpoint", path, "--tokens", "1,2", "--arithmetic", "llama.cpp")
    assert code == 0, err
    said = [line for line in err.splitlines() if "repacks" in line]
    if not theirs:
        assert said == [], (ftype, said)
        return
    assert len(said) == 1 and "--no-repack" in said[0], (ftype, err)
    named = said[0].split("repacks ", 1)[1].split(" weights", 1)[0].split(", ")
    assert set(named) == theirs, (ftype, named, theirs)


def test_every_product_weight_is_kept_in_its_stored_blocks_dequantised_as_gguf_does(quantised):
    ftype, path = quantised
    ck = read_gguf(path)
    a = analyze(author(ck.spec), ck.storage)
    weights = from_gguf(path, a.programs, ck.storage)
    stored = {t.name: t for t in GGUFReader(path).tensors}
    kept = 0
    for name, value in weights.values.items():
        tensor = stored[_tensor(a, name)]
        if tensor.tensor_type.name in ("F32", "F16", "Q8_0") or not isinstance(value, Blocks):
            continue
        kept += 1
        assert value.type == tensor.tensor_type.name
        want = dequantize(np.asarray(tensor.data), tensor.tensor_type).T
        assert np.array_equal(value.dense().view(np.uint32), np.ascontiguousarray(want).view(np.uint32)), name
    # every projection of both layers, and the head
    assert kept >= 2 * 7 + 1, (ftype, kept)


def _tensor(a, name: str) -> str:
    from streamed.model.checkpoint import bind

    return bind(a.programs.document.checkpoint, name).tensor


def test_in_exact_arithmetic_a_quantised_file_computes_what_llama_cpp_computes_on_its_dequantised_values(quantised):
    ftype, path = quantised
    want = llamacpp.logits(quants.dequantized(path, path.with_suffix(".f32.gguf")), TOKENS, PREFILL)
    ours = oracle.ours(path, TOKENS, PREFILL)
    assert worst(ours.reference, want) <= F32_TOLERANCE, ftype
    positions = sorted(ours.bundle)
    assert worst(np.stack([ours.bundle[p] for p in positions]), want[positions]) <= F32_TOLERANCE, ftype


@pytest.mark.parametrize("ftype", COMPUTED)
def test_in_llama_cpp_s_arithmetic_a_quantised_file_s_logits_are_llama_cpp_s_bit_for_bit_where_exact_ones_are_not(
        ftype, wide):
    _assert_computed_on_this_path(ftype)
    _hold_logits_bit_for_bit(quants.quantize(wide, wide.parent / f"logits-{ftype}.gguf", ftype), ftype, WIDE_TOKENS,
                             WIDE_PREFILL)


def _hold_logits_bit_for_bit(path, ftype: str, tokens: list[int], prefill: int) -> None:
    """``path``'s logits in llama.cpp's arithmetic are llama.cpp's, ``np.array_equal``, through the reference (the
    prefill and each decode step) and the prefill and decode bundles — where exact arithmetic's are 1e-4 or more
    away."""
    want = llamacpp.logits(path, tokens, prefill)
    assert worst(oracle.ours(path, tokens, prefill, bundle=False).reference, want) > 1e-4
    ours = oracle.ours(path, tokens, prefill, arithmetic="llama.cpp")
    assert np.array_equal(ours.reference, want), (ftype, worst(ours.reference, want))
    positions = sorted(ours.bundle)
    assert positions[0] < prefill <= positions[-1]  # the prefill bundle's last row and the decode bundle's
    got = np.stack([ours.bundle[p] for p in positions])
    assert np.array_equal(got, want[positions]), (ftype, worst(got, want[positions]))


@pytest.mark.parametrize("ftype", COMPUTED)
def test_in_llama_cpp_s_arithmetic_a_quantised_product_is_llama_cpp_s_bit_for_bit(ftype, wide):
    _assert_computed_on_this_path(ftype)
    path = quants.quantize(wide, wide.parent / f"graph-{ftype}.gguf", ftype)
    stored = {t.name: Blocks(np.asarray(t.data), t.tensor_type.name) for t in GGUFReader(path).tensors
              if ggml_quants.computes(t.tensor_type.name, llamacpp.built_path())}
    _, steps = llamacpp.tensors(path, TOKENS, PREFILL)
    held = set()
    for step in steps:  # the prefill (several rows: tinyBLAS where ggml takes it) and each decode step (one row)
        for layer in range(2):
            for norm, products in ((f"attn_norm-{layer}", (("Qcur", "attn_q"), ("Kcur", "attn_k"), ("Vcur", "attn_v"))),
                                   (f"ffn_norm-{layer}", (("ffn_gate", "ffn_gate"), ("ffn_up", "ffn_up"))),
                                   (f"ffn_swiglu-{layer}", (("ffn_out", "ffn_down"),))):
                x = _first(step, norm)
                x = x.reshape(-1, x.shape[-1])
                for out, w in products:
                    weight = stored[f"blk.{layer}.{w}.weight"]
                    got = ggml_quants.mul_mat(x, weight, path=llamacpp.built_path())
                    assert _same_bits(got, _first(step, f"{out}-{layer}", MUL_MAT)), (ftype, layer, out, len(x))
                    held.add(weight.type)
    assert held >= WEIGHT_TYPES[ftype], held


@pytest.mark.parametrize("ftype", ("Q4_K_M", "Q5_K_M", "Q3_K_M", "Q2_K"))
@pytest.mark.parametrize("rows", TILED_PREFILLS)
def test_in_llama_cpp_s_arithmetic_a_k_quant_product_of_any_number_of_rows_from_8_is_llama_cpp_s_bit_for_bit(
        ftype, rows, wide):
    """From 8 rows ggml's tiled kernel takes a K-quant's product; ``ggml_tiled`` computes it as an outer product, its
    rows in groups of a register's lanes. At prefills that group them every way it does, each product of a Q4_K_M's,
    a Q5_K_M's, a Q3_K_M's and a Q2_K's layers (Q2_K … Q6_K weights) is llama.cpp's own bit for bit."""
    _assert_computed_on_this_path(ftype)
    path = wide.parent / f"tiled-{ftype}.gguf"
    if not path.exists():
        quants.quantize(wide, path, ftype)
    stored = {t.name: Blocks(np.asarray(t.data), t.tensor_type.name) for t in GGUFReader(path).tensors
              if t.tensor_type.name in WEIGHT_TYPES[ftype]}
    tokens = [int(t) for t in np.random.default_rng(rows).integers(0, 256, rows)]
    _, steps = llamacpp.tensors(path, tokens, rows)
    held = set()
    for layer in range(2):
        for norm, products in ((f"attn_norm-{layer}", (("Qcur", "attn_q"), ("Kcur", "attn_k"), ("Vcur", "attn_v"))),
                               (f"ffn_norm-{layer}", (("ffn_gate", "ffn_gate"), ("ffn_up", "ffn_up"))),
                               (f"ffn_swiglu-{layer}", (("ffn_out", "ffn_down"),))):
            x = _first(steps[0], norm)
            x = x.reshape(-1, x.shape[-1])
            assert len(x) == rows
            for out, w in products:
                weight = stored[f"blk.{layer}.{w}.weight"]
                got = ggml_quants.mul_mat(x, weight, path=llamacpp.built_path())
                assert _same_bits(got, _first(steps[0], f"{out}-{layer}", MUL_MAT)), (ftype, rows, layer, out)
                held.add(weight.type)
    assert held == WEIGHT_TYPES[ftype], held


def test_a_k_quant_file_s_kernels_compiled_for_a_cpu_without_avx512_compute_this_host_s_logits(wide, tmp_path):
    """The K-quant products take two runs of 32 values a register where the CPU has AVX-512 BW
    (``ggml_quants._run_lanes``), one where it has AVX2 alone; the tiled product (``ggml_tiled``) 16 rows a group with
    AVX-512 VNNI, 8 with AVX2. Compiled for an AVX2 CPU (numba's ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES``, into a
    cache of its own; off x86-64, numba's generic CPU: ``repo.lesser_target``) the other forms run on this host too: a Q4_K_M's, a Q3_K_M's and a Q2_K's 29-row prefill (ggml's
    tiled kernel: here two groups, there four — three together and one) and two decode steps (the type's dot) — every
    K-quant type's products, Q2_K … Q6_K, as the forms compute them — are this host's logits bit for bit."""
    targets = (("host", {}), ("lesser", lesser_target()))
    tokens = [int(t) for t in np.random.default_rng(29).integers(0, 256, 31)]
    for ftype in ("Q4_K_M", "Q3_K_M", "Q2_K"):
        path = quants.quantize(wide, tmp_path / f"{ftype}.gguf", ftype)
        doc = tmp_path / f"{ftype}.lgm"
        doc.write_text(author(read_gguf(path).spec))
        saved = {}
        for target, extra in targets:
            saved[target] = tmp_path / f"{ftype}-{target}.npz"
            env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / f"cache-{target}"), "STREAMED_COMPILE_AHEAD": "0",
                   **extra}
            p = subprocess.run([sys.executable, "-m", "streamed", "run", str(doc), "--checkpoint", str(path),
                                "--tokens", ",".join(map(str, tokens)), "--prefill", "29",
                                "--arithmetic", "llama.cpp", "--save", str(saved[target])], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=900)
            assert p.returncode == 0, p.stderr[-2000:]
        with np.load(saved["host"]) as host, np.load(saved["lesser"]) as lesser:
            assert np.array_equal(host["logits"].view(np.uint32), lesser["logits"].view(np.uint32)), ftype


def _assert_computed_on_this_path(ftype: str) -> None:
    """``ftype``'s products are computed as llama.cpp computes them on the path of the build under test — BF16 on
    AVX-512 without AVX512_BF16 too — and a run in llama.cpp's arithmetic names none of its types in its note
    (``not_computed`` on that path)."""
    path = llamacpp.built_path()
    assert all(ggml_quants.computes(t, path) for t in WEIGHT_TYPES[ftype]), (ftype, path)
    assert ggml_quants.not_computed([Blocks(np.zeros((2, 2), np.uint8), t) for t in WEIGHT_TYPES[ftype]], path) == []


def _first(step: dict, name: str, op: int | None = None) -> np.ndarray:
    return next(a for o, a in step[name] if op is None or o == op)


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    got, want = np.ascontiguousarray(got, np.float32).ravel(), np.ascontiguousarray(want, np.float32).ravel()
    return got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_q4_k_m_file_s_layer_with_q6_k_weights_is_its_own_kind_and_says_why(source):
    path = quants.quantize(source, source.parent / "kinds-Q4_K_M.gguf", "Q4_K_M")
    types = quants.types(path)
    assert (types["blk.0.attn_v.weight"], types["blk.1.attn_v.weight"]) == ("Q4_K", "Q6_K")  # use_more_bits
    ck = read_gguf(path)
    a = analyze(author(ck.spec), ck.storage)
    assert [list(k.layers) for k in a.kinds] == [[0], [1]]
    (d,) = a.divergences
    assert "is stored Q6_K but" in d.why and "is stored Q4_K" in d.why and "as stored, Q6_K" in d.why


@pytest.mark.parametrize("ftype", ["Q3_K_S", "Q4_0"])
def test_a_run_in_llama_cpp_s_arithmetic_of_a_file_whose_every_type_it_computes_says_nothing_of_them(
        tmp_path, run, source, ftype):
    path = quants.quantize(source, tmp_path / f"{ftype}.gguf", ftype)
    code, _, err = run("author", path, "-o", tmp_path / "model.lgm")
    assert code == 0, err
    code, out, err = run("run", tmp_path / "model.lgm", "--checkpoint", path, "--tokens",
                         ",".join(map(str, TOKENS)), "--arithmetic", "llama.cpp", "--json")
    assert code == 0, err
    # the one note it may give is llama.cpp's repacking (its defaults' other kernels), not a type computed otherwise
    assert [line for line in err.splitlines() if "note:" in line and "--no-repack" not in line] == [], err


def test_llama_cpp_s_arithmetic_computes_every_type_read_on_every_x86_path_bf16_without_avx512_bf16_too():
    """What ``run`` names in its note (``not_computed``) is nothing, on every path: every type read — MXFP4, every
    bank of experts kept in blocks, and BF16 on AVX2, on AVX-512 with AVX512_BF16 (``dpbf16``) and on AVX-512 without
    it (16-lane float code: Skylake-X, Cascade Lake, Ice Lake) among them — is computed as llama.cpp computes it."""
    from dataclasses import replace

    from streamed.numerics.cpu import AVX2, AVX512, PATHS

    one = lambda t, *lead: Blocks(np.zeros((*lead, 4, 2 * BLOCKS[t][1]), np.uint8), t)  # noqa: E731
    read = [one(t, *lead) for t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "BF16",
                                    "MXFP4") for lead in ((), (3,))]
    assert AVX512.bf16 and not AVX2.bf16  # avx512 names the path with AVX512_BF16
    for path in (*PATHS.values(), *(replace(p, bf16=False) for p in PATHS.values() if p.isa == "avx512")):
        assert ggml_quants.not_computed(read, path) == [], path


def _bf16_bits(v) -> np.ndarray:
    return (np.asarray(v, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_in_llama_cpp_s_arithmetic_a_bf16_dot_is_the_build_s_own_to_its_subnormals_and_its_order_of_addition():
    """The one-row BF16 product (``ggml_vec_dot_bf16``) against the build's own, called directly: random rows of the
    widths and tails a model has, and rows made to tell apart what a model's values seldom reach — under AVX512_BF16
    (``dpbf16``) the odd product of each pair added before the even one, each product exact into a single rounding
    (a subnormal product still counts against a normal sum; 1 + 2⁻²⁴ + (2⁻²⁴+2⁻³¹) is 1 + 2⁻²³ so and 1 + 2⁻²² the
    other way), subnormal inputs read as zero, a subnormal result (of
    either addition) flushed to zero; in float code (AVX2, AVX-512 without AVX512_BF16) each product added to its lane
    by fma, one rounding, subnormals kept (3·2⁻¹⁵⁰ into a lane holding 2⁻¹⁴⁹ is 2⁻¹⁴⁸ so, and 3·2⁻¹⁴⁹ with the
    product rounded first); the tail past the last whole step computed in float32 products, no flushing."""
    path = llamacpp.built_path()
    _assert_computed_on_this_path("BF16")
    p = np.float32(2.0) ** -np.arange(0, 150, dtype=np.float32)  # p[e] = 2⁻ᵉ, exact

    def row(n, **at):
        x, y = np.zeros(n, np.float32), np.zeros(n, np.float32)
        for i, (a, b) in at.items():
            x[int(i[1:])], y[int(i[1:])] = a, b
        return x, y

    rows = [row(64, i1=(p[63], p[63]), i0=(-p[62] * np.float32(0.5), p[63] * np.float32(1.75))),  # sum subnormal
            row(64, i1=(p[63], p[63]), i0=(p[70], p[70])),  # a subnormal product into a normal sum
            row(64, i0=(p[63], p[63]), i1=(p[70], p[70])),  # a subnormal first sum, flushed before the second
            row(128, i0=(p[63], p[63]), i65=(p[70], p[70])),  # a subnormal product into the next step's sum
            row(64, i0=(np.float32(2.0 ** -127), p[0] / p[100])),  # a subnormal input
            row(65, i64=(np.float32(2.0 ** -127), p[0] / p[100])),  # … in the tail
            row(128, i0=(p[0], p[0]), i65=(p[0], p[24]), i64=(p[0] + p[7], p[24])),  # the order: odd first
            row(64, i0=(p[75], p[74]), i32=(p[75] * np.float32(3), p[75]))]  # a lane's fma: one rounding
    rng = np.random.default_rng(3)
    for n in (64, 128, 1024, 2048, 100, 300, 33):
        for scale in (1.0, 1e-3, 2.0 ** -60):
            rows.append(((rng.standard_normal(n) * scale).astype(np.float32),
                         rng.standard_normal(n).astype(np.float32)))
    for i, (x, w) in enumerate(rows):
        x = ggml_quants.to_bf16(x)
        want = llamacpp.vec_dot_bf16(_bf16_bits(w), _bf16_bits(x))
        got = ggml_quants.mul_mat(x[None], Blocks(_bf16_bits(w).view(np.uint8)[None], "BF16"), path=path)[0, 0]
        assert _same_bits(got, want), (i, len(x), got, want)


def test_in_llama_cpp_s_arithmetic_a_bf16_product_of_several_rows_over_a_width_tinyblas_does_not_load_is_the_dot_s(
        tmp_path):
    """tinyBLAS takes a BF16 product of several rows only where its loads cover the reduction (``k % KN``): 8 values
    a load on AVX2, 16 on AVX-512 without AVX512_BF16, 32 with it — so at a width of 200 (and an FFN of 344) a 6-row
    prefill is tinyBLAS's on AVX2 and ``ggml_vec_dot_bf16``'s row by row on either AVX-512 path, each bit for bit."""
    path = llamacpp.built_path()
    _assert_computed_on_this_path("BF16")
    source = oracle.write(tmp_path / "f32.gguf", {**CFG, "hidden_size": 200, "intermediate_size": 344}).path
    file = quants.quantize(source, tmp_path / "BF16.gguf", "BF16")
    stored = {t.name: Blocks(np.asarray(t.data), t.tensor_type.name) for t in GGUFReader(file).tensors}
    _, steps = llamacpp.tensors(file, TOKENS, PREFILL)
    for layer in range(2):
        for norm, out, w in (("attn_norm", "Qcur", "attn_q"), ("ffn_norm", "ffn_up", "ffn_up"),
                             ("ffn_swiglu", "ffn_out", "ffn_down")):
            x = _first(steps[0], f"{norm}-{layer}")
            x = x.reshape(-1, x.shape[-1])
            assert len(x) == PREFILL and x.shape[1] % 16 and not x.shape[1] % 8
            got = ggml_quants.mul_mat(x, stored[f"blk.{layer}.{w}.weight"], path=path)
            assert _same_bits(got, _first(steps[0], f"{out}-{layer}", MUL_MAT)), (layer, out, path.name)


#: Two MoE files as llama.cpp's quantizer makes them. gpt-oss made MXFP4_MOE: its expert banks MXFP4, every other
#: product Q8_0; d 512 and an FFN of 96 — 16 blocks of 32 and 3: MXFP4's dot sums its blocks in two accumulators,
#: even and odd, an odd last block apart (each block's scaled lane sums are mostly exact in float32, so only the
#: order of many additions shows: at d 128 one accumulator gave the same bits, at d 512 it does not). A Qwen3-MoE made
#: Q4_K_M at widths of 256, so its banks take K-quants (Q4_K; layer 1's down bank Q6_K) — and made Q5_K_M (Q5_K, Q6_K),
#: Q3_K_M (Q3_K, Q4_K) and Q2_K (Q2_K, Q3_K), so every K-quant's bank goes through both of ggml's kernels — and made
#: Q4_0 and BF16.
QWEN3_MOE = {**CFG, "model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
             "norm_topk_prob": True}
MOE = {"MXFP4_MOE": {**json.loads((CONFIGS / "gpt-oss-20b.json").read_text()), "hidden_size": 512, "head_dim": 16,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
                     "num_hidden_layers": 2, "num_local_experts": 4, "vocab_size": 256, "sliding_window": 8,
                     "layer_types": ["sliding_attention", "full_attention"]},
       "Q4_K_M": QWEN3_MOE, "Q5_K_M": QWEN3_MOE, "Q3_K_M": QWEN3_MOE, "Q2_K": QWEN3_MOE, "Q4_0": QWEN3_MOE,
       "BF16": QWEN3_MOE}
#: The types of each file's banks, and the names of its graph's expert inputs (the normed input, the gated one).
BANKS = {"MXFP4_MOE": ({"MXFP4"}, "attn_post_norm", "ffn_moe_swiglu_oai"),
         "Q4_K_M": ({"Q4_K", "Q6_K"}, "ffn_norm", "ffn_moe_swiglu"), "Q5_K_M": ({"Q5_K", "Q6_K"}, "ffn_norm",
                                                                                   "ffn_moe_swiglu"),
         "Q3_K_M": ({"Q3_K", "Q4_K"}, "ffn_norm", "ffn_moe_swiglu"), "Q2_K": ({"Q2_K", "Q3_K"}, "ffn_norm",
                                                                            "ffn_moe_swiglu"),
         "Q4_0": ({"Q4_0"}, "ffn_norm", "ffn_moe_swiglu"),
         "BF16": ({"BF16"}, "ffn_norm", "ffn_moe_swiglu")}
#: A prefill of 20 rows over 4 experts (gpt-oss chooses all 4, Qwen3-MoE 2): some experts are routed 8 rows or more,
#: where ggml's tiled kernel takes a K-quant expert's product, some fewer; then two decode steps (one row each).
MOE_TOKENS = [int(t) for t in np.random.default_rng(8).integers(0, 256, 22)]
MOE_PREFILL = 20
MUL_MAT_ID = MUL_MAT + 1  # ``enum ggml_op``'s next


@pytest.fixture(scope="module", params=sorted(MOE))
def moe(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("moe")
    source = oracle.write(folder / "f32.gguf", MOE[request.param]).path
    return request.param, quants.quantize(source, folder / f"{request.param}.gguf", request.param)


def test_in_llama_cpp_s_arithmetic_an_expert_s_product_over_a_bank_kept_in_blocks_is_llama_cpp_s_bit_for_bit(moe):
    ftype, path = moe
    if ftype in WEIGHT_TYPES:
        _assert_computed_on_this_path(ftype)
    types, normed, gated = BANKS[ftype]
    reader = GGUFReader(path)
    banks = {t.name: Blocks(np.asarray(t.data), t.tensor_type.name) for t in reader.tensors
             if t.name.endswith("_exps.weight")}
    assert {b.type for b in banks.values()} == types
    _, steps = llamacpp.tensors(path, MOE_TOKENS, MOE_PREFILL)
    routed = set()
    for step in steps:
        for layer in range(2):
            x = _first(step, f"{normed}-{layer}")
            x = x.reshape(-1, x.shape[-1])
            chosen = _first(step, f"ffn_moe_gate-{layer}", MUL_MAT_ID).shape[-2]
            ids = np.argsort(-_first(step, f"ffn_moe_probs-{layer}").reshape(len(x), -1), axis=-1, kind="stable")
            ids = ids[:, :chosen]  # llama.cpp's choice: the best ``chosen`` of each row's scores
            h = _first(step, f"{gated}-{layer}").reshape(len(x), chosen, -1)
            for e in np.unique(ids):
                rows, slots = np.nonzero(ids == e)
                for out, w, given in (("gate", "ffn_gate_exps", x[rows]), ("up", "ffn_up_exps", x[rows]),
                                      ("down", "ffn_down_exps", h[rows, slots])):
                    want = _first(step, f"ffn_moe_{out}-{layer}", MUL_MAT_ID)
                    want = want.reshape(len(x), chosen, -1)[rows, slots]
                    got = ggml_quants.mul_mat(given, banks[f"blk.{layer}.{w}.weight"][e], path=llamacpp.built_path(),
                                              routed=len(rows))
                    assert _same_bits(got, want), (ftype, layer, out, e, len(rows))
                routed.add(len(rows))
    assert max(routed) >= ggml_quants.TILED_ROWS > min(routed), routed  # the tiled kernel's experts and the dot's


def test_in_llama_cpp_s_arithmetic_a_moe_file_s_logits_are_llama_cpp_s_bit_for_bit_its_banks_kept_in_blocks(moe):
    ftype, path = moe
    if ftype in WEIGHT_TYPES:
        _assert_computed_on_this_path(ftype)
    ck = read_gguf(path)
    a = analyze(author(ck.spec), ck.storage)
    stored = {t.name: t for t in GGUFReader(path).tensors}
    banks = [(name, value) for name, value in from_gguf(path, a.programs, ck.storage).values.items()
             if _tensor(a, name).endswith("_exps.weight")]
    assert banks
    for name, value in banks:  # each bank its file's blocks, where they are mapped: no dense copy of a bank
        tensor = stored[_tensor(a, name)]
        assert isinstance(value, Blocks) and value.raw.ndim == 3 and value.type == tensor.tensor_type.name, name
        assert value.raw.nbytes == tensor.n_bytes and not value.raw.flags.owndata, name
    _hold_logits_bit_for_bit(path, ftype, MOE_TOKENS, MOE_PREFILL)


#: A modest Q4_K_M file (d 1024, FFN 4096, vocabulary 32000: 64 MB), and the least one of the same architecture.
MODEST = {**WIDE, "intermediate_size": 4096, "vocab_size": 32000}
LEAST = CFG
MEMORY_TOKENS = [int(t) for t in np.random.default_rng(7).integers(0, 256, 8)]


#: A ``streamed …`` command that says, when it is done, its own peak resident set (``VmHWM``: the process's memory
#: since its ``exec``; ``ru_maxrss`` would start from the forking test process's, which Linux carries across fork and
#: exec).
PEAK_AT_EXIT = """
import sys
from streamed.cli import main
status = main(sys.argv[1:])
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("peak-kB", hwm.split()[1], file=sys.stderr)
sys.exit(status)
"""


def _peak_bytes(args: list) -> int:
    """The peak resident set of ``streamed ARGS`` (this checkout's), a whole process."""
    p = subprocess.run([sys.executable, "-c", PEAK_AT_EXIT, *map(str, args)], cwd=ROOT, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    return int(next(line for line in p.stderr.splitlines() if line.startswith("peak-kB")).split()[1]) * 1024


@pytest.mark.parametrize("arithmetic", ["exact", "llama.cpp"])
def test_a_run_of_a_q4_k_m_file_holds_the_file_and_its_caches_within_1_2x_beyond_the_process_s_own(
        tmp_path_factory, arithmetic):
    """Issue 29: ``run`` on a Q4_K_M file held 1.99× the file. What a run holds beyond the process's fixed cost (the
    interpreter, numpy, numba and LLVM's pages, the kernels loaded: the same run of the least file of the same
    architecture) is within 1.2× of the file plus its caches (the KV cache, the logits) — its weights are read where
    they are mapped, never copied."""
    folder = tmp_path_factory.mktemp("memory")
    sizes, peaks = {}, {}
    for name, cfg in (("least", LEAST), ("modest", MODEST)):
        source = oracle.write(folder / f"{name}-f32.gguf", cfg, fast=True).path
        path = quants.quantize(source, folder / f"{name}.gguf", "Q4_K_M")
        source.unlink()
        assert _peak_bytes(["author", path, "-o", folder / f"{name}.lgm"]) > 0
        sizes[name] = path.stat().st_size
        peaks[name] = _peak_bytes(["run", folder / f"{name}.lgm", "--checkpoint", path, "--tokens",
                                   ",".join(map(str, MEMORY_TOKENS)), "--arithmetic", arithmetic])
    layers, kv = MODEST["num_hidden_layers"], MODEST["num_key_value_heads"] * MODEST["head_dim"]
    caches = 2 * layers * kv * len(MEMORY_TOKENS) * 4 + len(MEMORY_TOKENS) * MODEST["vocab_size"] * 4
    held = peaks["modest"] - peaks["least"]
    assert held <= 1.2 * (sizes["modest"] - sizes["least"] + caches), (held, sizes, peaks)
