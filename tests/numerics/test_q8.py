"""Q8_0 bit for bit as the gguf package stores it, and the planes-and-scales layout the IR reads."""

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

from streamed.numerics import q8

Q8_0 = GGMLQuantizationType.Q8_0
#: gguf's own quantiser warns where a block's scale overflows fp16 or underflows — the very cases tested here.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def cases():
    r = np.random.default_rng(7)
    yield "random", r.standard_normal((6, 128)).astype(np.float32)
    z = r.standard_normal((4, 64)).astype(np.float32)
    z[1, :32] = 0
    z[3, 32:] = -0.0
    yield "zero blocks", z
    e = r.standard_normal((3, 96)).astype(np.float32)
    e[0, 0] = np.finfo(np.float32).max / 4
    e[1, 5] = -6.0e4
    e[2, 40] = 1e-30
    e[2, 41:64] = 1e-38
    yield "extreme values", e
    # Ties: max 127 makes d = 1, so x.5 values land exactly halfway (C's roundf goes away from zero).
    t = np.zeros((2, 32), dtype=np.float32)
    t[0, 0] = 127
    t[0, 1:8] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5]
    t[1, 0] = -127
    t[1, 1:4] = [3.5, -3.5, 64.5]
    yield "ties", t
    yield "subnormal scale", (r.standard_normal((2, 32)) * 1e-7).astype(np.float32)


@pytest.mark.parametrize("name,x", list(cases()), ids=[c[0] for c in cases()])
def test_quantize_writes_the_same_bytes_as_gguf(name, x):
    qv, d = q8.quantize_blocks(x)
    assert np.array_equal(q8.to_bytes(qv, d), quantize(x, Q8_0))


@pytest.mark.parametrize("name,x", list(cases()), ids=[c[0] for c in cases()])
def test_dequantize_reads_back_the_same_floats_as_gguf(name, x):
    raw = quantize(x, Q8_0)
    qv, d = q8.from_bytes(raw)
    mine = q8.dequantize_blocks(qv, d)
    theirs = dequantize(raw, Q8_0)
    assert mine.dtype == np.float32
    assert np.array_equal(mine.view(np.uint32), theirs.view(np.uint32))


def test_planes_are_int8_values_and_f16_scales_with_blocks_along_the_input_axis():
    r = np.random.default_rng(3)
    w = r.standard_normal((64, 5)).astype(np.float32)  # in × out
    p = q8.quantize_weight(w)
    assert p.values.dtype == np.int8 and p.values.shape == (64, 5)
    assert p.scales.dtype == np.float16 and p.scales.shape == (2, 5)
    # the scale of block b of column j is max |W[32b:32b+32, j]| / 127, rounded to f16
    for b in range(2):
        for j in range(5):
            assert p.scales[b, j] == np.float16(np.float32(np.abs(w[32 * b:32 * b + 32, j]).max()) / np.float32(127))
    # dense equals gguf's dequantisation of the tensor stored as GGUF stores it (numpy out × in)
    theirs = dequantize(quantize(np.ascontiguousarray(w.T), Q8_0), Q8_0).T
    assert np.array_equal(p.dense(), theirs)


def test_a_row_slice_of_planes_keeps_whole_blocks_and_refuses_to_cut_one():
    w = np.random.default_rng(1).standard_normal((96, 4)).astype(np.float32)
    p = q8.quantize_weight(w)
    s = p.select((32, 96), np.array([1, 3]))
    assert np.array_equal(s.dense(), p.dense()[32:96][:, [1, 3]])
    with pytest.raises(ValueError):
        p.select((16, 48), None)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra.numpy import arrays  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(1, 3).map(lambda k: 32 * k)),
              elements=st.floats(-1e6, 1e6, width=32) | st.sampled_from([0.0, -0.0, 0.5, -0.5, 1e-40, 65504.0])))
def test_any_float32_blocks_quantise_to_gguf_bytes_and_read_back_as_gguf_does(x):
    raw = quantize(x, Q8_0)
    qv, d = q8.quantize_blocks(x)
    assert np.array_equal(q8.to_bytes(qv, d), raw)
    with np.errstate(all="ignore"):
        theirs = dequantize(raw, Q8_0)
    assert np.array_equal(q8.dequantize_blocks(*q8.from_bytes(raw)).view(np.uint32), theirs.view(np.uint32))
