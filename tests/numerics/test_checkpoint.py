"""Weights from a GGUF checkpoint through the `## Checkpoint` bindings: orientation, column and row slices, stacked
experts, and refusals that name the weight."""

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

from streamed.analysis.whole import analyze
from streamed.cli import main
from streamed.numerics.weights import WeightError, from_gguf, gguf_storage

Q8_0 = GGMLQuantizationType.Q8_0

DOC = """# Slices
## Model
Let d be 64.

## Checkpoint
E is "token_embd.weight".
A{l} is "blk.{l}.a.weight".
B{l} is "blk.{l}.a.weight", columns 16 to 32 of every 32.
C{l} is "blk.{l}.a.weight", rows 32 to 64.
X{l} is "blk.{l}.ffn_gate_exps.weight".

## Embed
Let tok be a token.
Let E be a weight of 10 by d.
Let x be row tok of E.
Return x.

## Layer 0
Let x be an input of rows by d.
Let A0 be a q8 weight of d by 64.
Let B0 be a q8 weight of d by 32.
Let C0 be a q8 weight of 32 by 64.
Let X0 be a weight of 3 by d by 8.
Let y0 be x times A0.
Let z0 be x times B0.
Let xo0 be y0 plus z0 times C0.
Return xo0.

## Head
Let xo0 be an input of rows by d.
Let next be index of the largest of xo0.
Return next.
"""


@pytest.fixture
def stored(tmp_path, gguf_writer):
    r = np.random.default_rng(0)
    a = r.standard_normal((64, 64)).astype(np.float32)  # numpy out × in: GGUF ne = [in 64, out 64]
    e = r.standard_normal((10, 64)).astype(np.float32)  # ne = [64, 10]: vocab × d as stored
    x = r.standard_normal((3, 8, 64)).astype(np.float32)  # ne = [64, 8, 3]: E experts of d → 8
    path = gguf_writer(tmp_path / "slices.gguf", {"token_embd.weight": (e, "F32"), "blk.0.a.weight": (a, "Q8_0"),
                                            "blk.0.ffn_gate_exps.weight": (x.astype(np.float16), "F16")})
    return path, a, e, x


def test_each_binding_reads_its_orientation_and_slice_of_the_stored_tensor(stored):
    path, a, e, x = stored
    an = analyze(DOC, gguf_storage(path))
    assert not an.errors, an.errors
    w = from_gguf(path, an.programs)
    product = dequantize(quantize(a, Q8_0), Q8_0).T  # in × out
    assert np.array_equal(w["A0"], product)
    cols = [*range(16, 32), *range(48, 64)]
    assert np.array_equal(w["B0"], product[:, cols])
    assert np.array_equal(w["C0"], product[32:64])
    assert np.array_equal(w["E"], e)
    assert np.array_equal(w["X0"], np.swapaxes(x.astype(np.float16).astype(np.float32), 1, 2))
    # Q8_0 weights read as stored keep their planes, row slices in whole blocks
    for n in ("A0", "B0", "C0"):
        assert np.array_equal(w.planes[n].dense(), w[n])
    assert w.planes["C0"].scales.shape == (1, 64)


def test_a_weight_whose_declared_shape_fits_no_orientation_is_refused_by_name(stored, tmp_path):
    path, *_ = stored
    an = analyze(DOC.replace("Let A0 be a q8 weight of d by 64.", "Let A0 be a q8 weight of d by 48.")
                 .replace("Let y0 be x times A0.", "Let y0 be x times B0 times (C0 times (x times A0)).")
                 , gguf_storage(path))
    with pytest.raises(WeightError) as e:
        from_gguf(path, an.programs)
    assert e.value.name == "A0" and "64×64" in e.value.why


def test_a_weight_the_checkpoint_lacks_is_refused_naming_the_tensor(tmp_path, gguf_writer):
    path = gguf_writer(tmp_path / "empty.gguf", {"token_embd.weight": (np.zeros((10, 64), np.float32), "F32")})
    an = analyze(DOC)
    with pytest.raises(WeightError, match="blk.0.a.weight"):
        from_gguf(path, an.programs)


def test_verify_runs_on_a_checkpoint_from_the_command_line(tmp_path, checkpoint_writer, capsys):
    from repo import EXAMPLES
    from streamed.numerics.weights import seeded

    doc = EXAMPLES / "tiny-llama.lgm"
    a = analyze(doc.read_text())
    floats = seeded(a.programs, 9).dense
    ckpt = checkpoint_writer(tmp_path / "t.gguf", a.programs, floats,
                             lambda n, t: ("F16", True) if n == "Emb" else (("Q8_0" if n.startswith("W") else "F32"), False))
    assert main(["verify", str(doc), "--checkpoint", str(ckpt), "--ctx", "16", "--steps", "3", "--mode", "tp"]) == 0
    out = capsys.readouterr().out
    assert f"checkpoint {ckpt}" in out and "agree" in out
