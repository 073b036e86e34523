"""Quantised weights kept in their blocks: every type dequantised exactly as the ``gguf`` package does (an
independent implementation of ggml-quants.c), and a product over the blocks equal to the product of the dense
weight, bit for bit, a band of columns at a time."""

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize, quantize

from streamed.numerics import blocks
from streamed.numerics.product import product

#: gguf's reference dequantiser warns where random bytes make an inf or nan scale — cases tested here on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def test_each_type_has_ggmls_block_size():
    for name, (values, nbytes, _) in blocks.TYPES.items():
        assert GGML_QUANT_SIZES[GGMLQuantizationType[name]] == (values, nbytes)


@pytest.mark.parametrize("name", sorted(blocks.TYPES))
def test_any_stored_bytes_dequantise_to_the_same_floats_as_gguf(name):
    values, nbytes, _ = blocks.TYPES[name]
    raw = np.random.default_rng(11).integers(0, 256, size=(7, nbytes * (512 // values)), dtype=np.uint8)
    mine = blocks.dequantize_rows(raw, name)
    theirs = dequantize(raw, GGMLQuantizationType[name])
    assert mine.dtype == np.float32 and mine.shape == theirs.shape
    assert np.array_equal(mine.view(np.uint32), theirs.view(np.uint32))  # nan payloads included


def _stored(name: str, out: int, k: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """A weight ``k × out`` as the type stores it (GGUF order: ``out`` rows of blocks along ``k``), and its dense
    value by gguf's dequantiser."""
    w = np.random.default_rng(seed).standard_normal((out, k)).astype(np.float32) * 0.1
    qtype = GGMLQuantizationType[name]
    try:
        raw = quantize(w, qtype)
    except NotImplementedError:  # gguf quantises only some types: the rest are random blocks with sane scales
        values, nbytes, _ = blocks.TYPES[name]
        raw = np.random.default_rng(seed).integers(0, 256, size=(out, nbytes * (k // values)), dtype=np.uint8)
        dense = dequantize(raw, qtype)
        raw = raw[np.all(np.isfinite(dense), axis=1)][:out]
    return raw, dequantize(raw, qtype).T


@pytest.mark.parametrize("name", sorted(blocks.TYPES))
def test_a_product_over_the_blocks_is_the_product_of_the_dense_weight(name, monkeypatch):
    raw, dense = _stored(name, 40, 512)
    x = np.random.default_rng(2).standard_normal((3, 512)).astype(np.float32)
    # bands of a few columns, so the product is seen to assemble bands
    monkeypatch.setattr("streamed.numerics.product.BAND_BYTES", 7 * 4 * 512)
    w = blocks.Blocks(raw, name)
    assert w.shape == dense.shape
    got = product(x, w)
    assert np.array_equal(got.view(np.uint32), product(x, np.ascontiguousarray(dense)).view(np.uint32))


def test_a_slice_of_whole_blocks_stays_in_blocks_and_one_that_cuts_a_block_is_dense():
    raw, dense = _stored("Q4_K", 8, 768)
    w = blocks.Blocks(raw, "Q4_K")
    kept = w.select((256, 768), slice(2, 6))
    assert isinstance(kept, blocks.Blocks) and np.shares_memory(kept.raw, raw)
    assert np.array_equal(kept.dense(), dense[256:768, 2:6])
    cut = w.cut(0, 32, 288)
    assert isinstance(cut, np.ndarray) and np.array_equal(cut, dense[32:288])


def test_a_type_streamed_does_not_read_is_refused_by_name():
    assert blocks.unread("Q4_K") is None and blocks.unread("F32") is None
    why = blocks.unread("IQ2_XXS")
    assert why.startswith("stored IQ2_XXS, a type streamed does not read")


def test_a_run_counts_a_weight_kept_in_blocks_at_its_stored_bytes_and_one_band():
    from repo import example
    from streamed.analysis.whole import analyze
    from streamed.model.checkpoint import Storage, bind
    from streamed.numerics.footprint import BAND_BYTES, of_run
    from streamed.numerics.weights import declared_weights

    programs = analyze(example("tiny-llama")).programs
    tensors = {bind(programs.document.checkpoint, n).tensor for n in declared_weights(programs)}

    def counted(kind: str):
        storage = Storage(dict.fromkeys(tensors, kind), "t.gguf")
        return of_run(programs, storage, rows=1, ctx=16, positions=1)

    f32, q4k, q6k = counted("F32"), counted("Q4_K"), counted("Q6_K")
    assert f32.weights == 4 * f32.values
    assert q4k.weights == int(f32.values * 144 / 256) + BAND_BYTES
    assert q6k.weights == int(f32.values * 210 / 256) + BAND_BYTES


def test_a_checkpoint_tensor_of_a_type_streamed_does_not_read_is_refused_in_one_line_naming_it(tmp_path, capsys):
    import ggufs
    from streamed.cli import main

    path = ggufs.llama_like(tmp_path / "iq.gguf", layers=2, types={"blk.1.attn_k.weight": "IQ4_NL",
                                                                   "blk.0.attn_q.weight": "Q4_0"})
    assert main(["author", str(path), "-o", str(tmp_path / "iq.lgm")]) == 0
    capsys.readouterr()
    code = main(["run", str(tmp_path / "iq.lgm"), "--checkpoint", str(path), "--tokens", "1,2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "`Wk1`: \"blk.1.attn_k.weight\" is stored IQ4_NL, a type streamed does not read" in err[0]


@pytest.mark.parametrize("kind", ["Q5_1", "MXFP4"])
def test_a_run_over_weights_kept_in_blocks_is_the_run_over_their_gguf_dequantised_copy_bit_for_bit(
        tmp_path, capsys, kind):
    import json

    import ggufs
    import quants
    from streamed.cli import main

    projections = [f"blk.{l}.{t}.weight" for l in range(2)
                   for t in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")]
    path = ggufs.llama_like(tmp_path / "q.gguf", layers=2, types=dict.fromkeys(projections + ["output.weight"], kind))
    copy = quants.dequantized(path, tmp_path / "f32.gguf")
    assert main(["author", str(path), "-o", str(tmp_path / "q.lgm")]) == 0
    logits = {}
    for name, ckpt in (("stored", path), ("copy", copy)):
        capsys.readouterr()
        code = main(["run", str(tmp_path / "q.lgm"), "--checkpoint", str(ckpt), "--tokens", "3,1,4,1,5",
                     "--prefill", "3", "--json"])
        out = capsys.readouterr()
        assert code == 0, out.err
        logits[name] = np.asarray(json.loads(out.out)["logits"], dtype=np.float32)
    assert np.array_equal(logits["stored"].view(np.uint32), logits["copy"].view(np.uint32))
