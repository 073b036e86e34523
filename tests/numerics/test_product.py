"""The one product (``streamed.numerics.product``): every element follows the rule written out here in exact rational
arithmetic, whatever the rows computed with it, the weight's storage or the thread count. (llama.cpp's arithmetic is ggml's
products instead: ``test_ggml.py``.)"""

from fractions import Fraction

import numpy as np
import pytest

from exact import round_f32
from streamed.numerics import product as pr
from streamed.numerics.q8 import quantize_weight

R = np.random.default_rng(20)


def element(x_row: np.ndarray, w_col: np.ndarray) -> np.float32:
    """The rule: blocks of 32 from k = 0; in a block, lane (k − k₀) mod 8 takes fma(x, w, lane) in float32 in
    increasing k; the block's partial ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) in float32; partials summed exactly (float64
    holds every one of these sums of a few float32 partials exactly here) and rounded once to float32."""
    total = Fraction(0)
    for k0 in range(0, len(x_row), 32):
        lanes = [Fraction(0)] * 8
        for k in range(k0, min(k0 + 32, len(x_row))):
            j = (k - k0) % 8
            lanes[j] = round_f32(Fraction(float(x_row[k])) * Fraction(float(w_col[k])) + lanes[j])
        l = lanes
        partial = round_f32(round_f32(round_f32(l[0] + l[1]) + round_f32(l[2] + l[3]))
                            + round_f32(round_f32(l[4] + l[5]) + round_f32(l[6] + l[7])))
        total += partial
    return np.float32(round_f32(total))


@pytest.mark.parametrize("k", [64, 100, 7])
def test_every_element_is_its_blocks_of_fused_lanes_summed_once(k):
    x = R.standard_normal((3, k)).astype(np.float32)
    w = R.standard_normal((k, 5)).astype(np.float32)
    y = pr.product(x, w)
    want = np.array([[element(x[r], w[:, n]) for n in range(5)] for r in range(3)], dtype=np.float32)
    assert np.array_equal(y, want)


def test_a_row_computes_alike_alone_in_any_batch_in_parallel_and_in_a_column_tile():
    k, n = 2048, 1024
    w = R.standard_normal((k, n)).astype(np.float32)
    x = R.standard_normal((70, k)).astype(np.float32)  # rows that share a weight's block, and rows alone
    together = pr.product(x, w)
    alone = np.concatenate([pr.product(x[r:r + 1], w) for r in range(70)])
    some = np.concatenate([pr.product(x[r:r + 3], w) for r in range(0, 70, 3)])
    assert np.array_equal(together, alone) and np.array_equal(together, some)
    assert np.array_equal(pr.product(x, w[:, 100:164]), together[:, 100:164])


def test_q8_0_and_float16_weights_give_the_product_of_their_exact_values_read_in_place():
    w = R.standard_normal((96, 40)).astype(np.float32)
    x = R.standard_normal((4, 96)).astype(np.float32)
    planes = quantize_weight(w)
    assert np.array_equal(pr.product(x, planes), pr.product(x, planes.dense()))
    half = w.astype(np.float16)
    assert np.array_equal(pr.product(x, half), pr.product(x, half.astype(np.float32)))
    # A GGUF tensor is `out × in`: its transpose is read where it is (a view), and gives the same numbers.
    stored = np.ascontiguousarray(w.T)
    assert np.array_equal(pr.product(x, stored.T), pr.product(x, w))


def test_a_weight_read_in_place_from_a_file_and_one_made_in_memory_share_one_compiled_kernel(tmp_path):
    w = R.standard_normal((64, 8)).astype(np.float32)
    x = R.standard_normal((2, 64)).astype(np.float32)
    stored = tmp_path / "w.bin"
    np.ascontiguousarray(w.T).tofile(stored)
    mapped = np.memmap(stored, dtype=np.float32, mode="r", shape=(8, 64)).T  # read-only, a transposed view
    planes = quantize_weight(w)
    planes.raw.tofile(tmp_path / "q.bin")
    mapped_planes = type(planes)(np.memmap(tmp_path / "q.bin", dtype=np.uint8, mode="r", shape=planes.raw.shape))
    for weight in (w, mapped, w.astype(np.float16), planes, mapped_planes, planes.select(None, slice(2, 6))):
        pr.product(x, weight)
    assert len(pr._KERNEL.signatures) <= 3  # one a storage: float32, float16, Q8_0 (from images or numba)
    assert np.array_equal(pr.product(x, mapped), pr.product(x, w))


def test_grouped_heads_read_their_shared_matrix():
    heads, groups, rows, k, n = 4, 2, 3, 16, 5
    x = R.standard_normal((heads, rows, k)).astype(np.float32)
    w = R.standard_normal((groups, k, n)).astype(np.float32)
    y = pr.product(x, w, batched=heads)
    for h in range(heads):
        assert np.array_equal(y[h], pr.product(x[h], w[h // 2]))
