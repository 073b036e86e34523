"""The one product (``streamed.numerics.product``): every element follows the rule written out here in exact rational
arithmetic, whatever the rows computed with it, the weight's storage or the thread count — and llama.cpp's arithmetic
changes only what enters it."""

from fractions import Fraction

import numpy as np
import pytest

from streamed.numerics import product as pr
from streamed.numerics.q8 import quantize_weight

R = np.random.default_rng(20)


def round_f32(q: Fraction) -> Fraction:
    """``q`` rounded to the nearest float32, ties to even — exactly, with no float arithmetic in between."""
    if q == 0:
        return Fraction(0)
    sign = -1 if q < 0 else 1
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    ulp = Fraction(2) ** (max(e, -126) - 23)
    n, rest = divmod(a, ulp)
    if rest > ulp / 2 or (rest == ulp / 2 and n % 2 == 1):
        n += 1
    return sign * n * ulp


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
    k, n = 2048, 1024  # large enough that the product runs on every thread
    w = R.standard_normal((k, n)).astype(np.float32)
    x = R.standard_normal((70, k)).astype(np.float32)  # more rows than one cache tile of rows
    together = pr.product(x, w)
    assert 70 * n * k >= pr.PARALLEL_WORK
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


def test_grouped_heads_read_their_shared_matrix():
    heads, groups, rows, k, n = 4, 2, 3, 16, 5
    x = R.standard_normal((heads, rows, k)).astype(np.float32)
    w = R.standard_normal((groups, k, n)).astype(np.float32)
    y = pr.product(x, w, batched=heads)
    for h in range(heads):
        assert np.array_equal(y[h], pr.product(x[h], w[h // 2]))


def test_llama_cpp_s_q8_0_activations_round_half_to_even_with_127_over_the_block_maximum():
    block = np.zeros(32, np.float32)
    block[0] = 127.0  # d = 1, 127/max = 1: each value is its own quantisation
    block[1], block[2], block[3], block[4] = 2.5, -3.5, 0.49, 1.5
    got = pr.q8_activations(block[None])[0]
    assert got[:5].tolist() == [127.0, 2.0, -4.0, 0.0, 2.0]  # ties to even: 2.5 → 2, −3.5 → −4, 1.5 → 2
    x = R.standard_normal((2, 64)).astype(np.float32)
    q = pr.q8_activations(x).reshape(2, 2, 32)
    d = (np.abs(x).reshape(2, 2, 32).max(axis=-1) / np.float32(127)).astype(np.float16).astype(np.float32)
    steps = q / d[..., None]
    assert np.array_equal(steps, np.round(steps)) and np.abs(steps).max() == 127  # q·d, the scale fp16
    assert not pr.q8_activations(np.zeros((1, 32), np.float32)).any()


def test_llama_cpp_arithmetic_quantises_only_what_enters_a_stored_q8_0_or_f16_product():
    x = R.standard_normal((2, 64)).astype(np.float32)
    planes = quantize_weight(R.standard_normal((64, 8)).astype(np.float32))
    dense = planes.dense()
    assert np.array_equal(pr.LLAMA_CPP.enter(x, planes), pr.q8_activations(x))
    assert np.array_equal(pr.LLAMA_CPP.enter(x, dense.astype(np.float16)), x.astype(np.float16).astype(np.float32))
    assert pr.LLAMA_CPP.enter(x, dense) is x and pr.EXACT.enter(x, planes) is x


def test_llama_cpp_s_gelu_reads_the_fp16_table_of_the_tanh_approximation():
    x = np.array([-11.0, -0.3, 0.0, 0.7, 2.0, 12.0], np.float32)
    got = pr.LLAMA_CPP.gelu(x, None)
    h = x.astype(np.float16).astype(np.float64)
    table = (0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * h * (1 + 0.044715 * h * h)))).astype(np.float16)
    assert got[0] == 0 and got[-1] == 12.0
    assert np.array_equal(got[1:-1], table[1:-1].astype(np.float32))
