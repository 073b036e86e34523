"""llama.cpp's CPU arithmetic (``streamed.numerics.ggml``) against its orders of operations written out here in exact
rational arithmetic, each rounding where ggml's source rounds (``ggml/src/ggml-cpu/``, the vendored 0c1e57098). That
the vendored build computes in these orders is held against llama.cpp's own tensors in ``tests/oracle``."""

from fractions import Fraction

import numpy as np
import pytest

from exact import round_f32, round_f64
from streamed.numerics import ggml
from streamed.numerics.q8 import from_bytes, quantize_weight

R = np.random.default_rng(21)


def F(v) -> Fraction:
    return Fraction(float(v))


def fma(a: Fraction, b: Fraction, c: Fraction) -> Fraction:
    return round_f32(a * b + c)


def add(a: Fraction, b: Fraction) -> Fraction:
    return round_f32(a + b)


def reduce16(v: list[Fraction]) -> Fraction:
    """``_mm512_reduce_add_ps`` as GCC expands it: lanes i and i+8, then i and i+4, then i and i+2, then the two."""
    a = [add(v[i + 8], v[i]) for i in range(8)]
    b = [add(a[i + 4], a[i]) for i in range(4)]
    return add(add(b[0], b[2]), add(b[1], b[3]))


def test_llama_cpp_s_q8_0_activations_round_half_to_even_with_127_over_the_block_maximum():
    block = np.zeros(32, np.float32)
    block[0] = 127.0  # d = 1, 127/max = 1: each value is its own quantisation
    block[1], block[2], block[3], block[4] = 2.5, -3.5, 0.49, 1.5
    q, d = ggml.quantize_q8_0(block[None])
    assert q[0, :5].tolist() == [127, 2, -4, 0, 2] and d.tolist() == [[1.0]]  # ties to even: 2.5 → 2, −3.5 → −4
    x = R.standard_normal((2, 64)).astype(np.float32)
    q, d = ggml.quantize_q8_0(x)
    top = np.abs(x).reshape(2, 2, 32).max(axis=-1)
    assert np.array_equal(d, (top / np.float32(127)).astype(np.float16).astype(np.float32))
    assert np.array_equal(q.reshape(2, 2, 32), np.rint(x.reshape(2, 2, 32) * (np.float32(127) / top)[..., None]))
    q, d = ggml.quantize_q8_0(np.zeros((1, 32), np.float32))
    assert not q.any() and not d.any()


def q8_element(x_row: np.ndarray, w_blocks: np.ndarray) -> np.float32:
    """``ggml_vec_dot_q8_0_q8_0`` (AVX2 with VNNI): per block, lane l's integer sum of the 4 products of values
    4l…4l+3 (exact), times the two scales' product rounded to float32, by fma into lane l; then ``hsum_float_8``."""
    q, d = ggml.quantize_q8_0(x_row[None])
    qw, dw = from_bytes(w_blocks[None])
    lanes = [Fraction(0)] * 8
    for b in range(len(x_row) // 32):
        dd = round_f32(F(dw[0, b]) * F(d[0, b]))
        for l in range(8):
            s = sum(int(qw[0, 32 * b + 4 * l + j]) * int(q[0, 32 * b + 4 * l + j]) for j in range(4))
            lanes[l] = fma(dd, Fraction(s), lanes[l])
    t = [add(lanes[i + 4], lanes[i]) for i in range(4)]
    return np.float32(add(add(t[0], t[2]), add(t[1], t[3])))


def test_a_q8_0_product_is_ggml_s_integer_dot_per_lane_scaled_then_summed_across_lanes():
    w = quantize_weight(R.standard_normal((96, 6)).astype(np.float32))
    x = R.standard_normal((3, 96)).astype(np.float32)
    got = ggml.mul_mat(x, w)
    want = [[q8_element(x[r], w.raw[n]) for n in range(6)] for r in range(3)]
    assert np.array_equal(got, np.array(want, dtype=np.float32))
    assert np.array_equal(ggml.mul_mat(x[1:2], w), got[1:2])  # one row or three: one arithmetic


def vec_dot(x: np.ndarray, y: np.ndarray, wide_tail: bool) -> np.float32:
    """``ggml_vec_dot_f32`` / ``_f16`` (AVX-512): four 16-lane fma accumulators over whole steps of 64, added
    ``(s₀+s₂)+(s₁+s₃)`` and reduced; the rest added one product at a time, in float32 (f32) or float64 (f16)."""
    n = len(x)
    full = n - n % 64
    acc = [[Fraction(0)] * 16 for _ in range(4)]
    for i in range(0, full, 64):
        for j in range(4):
            for l in range(16):
                acc[j][l] = fma(F(x[i + 16 * j + l]), F(y[i + 16 * j + l]), acc[j][l])
    s = reduce16([add(add(acc[0][l], acc[2][l]), add(acc[1][l], acc[3][l])) for l in range(16)])
    for i in range(full, n):
        p = round_f32(F(x[i]) * F(y[i]))
        s = round_f64(s + p) if wide_tail else add(s, p)
    return np.float32(round_f32(s))


def tiny16(x: np.ndarray, y: np.ndarray) -> np.float32:
    """llamafile's ``tinyBLAS<16>`` element: one 16-lane fma accumulator, then reduced."""
    acc = [Fraction(0)] * 16
    for i in range(0, len(x), 16):
        for l in range(16):
            acc[l] = fma(F(x[i + l]), F(y[i + l]), acc[l])
    return np.float32(reduce16(acc))


def test_a_float_product_is_ggml_s_dot_for_one_row_and_tinyblas_for_several():
    w = R.standard_normal((80, 8)).astype(np.float32)  # 80 = one step of 64 and 16 left over
    x = R.standard_normal((3, 80)).astype(np.float32)
    one = ggml.mul_mat(x[:1], w)
    assert np.array_equal(one, [[vec_dot(x[0], w[:, n], False) for n in range(8)]])
    several = ggml.mul_mat(x, w)
    assert np.array_equal(several, [[tiny16(x[r], w[:, n]) for n in range(8)] for r in range(3)])
    assert np.array_equal(ggml.mul_mat(x, w, rows=1)[:1], one)  # the step's rows decide, not the operand's
    half = w.astype(np.float16)
    xh = x.astype(np.float16).astype(np.float32)  # an F16 product reads its activations rounded to fp16
    assert np.array_equal(ggml.mul_mat(x[:1], half), [[vec_dot(xh[0], half[:, n], True) for n in range(8)]])


def test_tinyblas_takes_only_a_reduction_of_16s_and_outputs_of_4s():
    assert ggml.tiny_blas(2, 64, 8) and not ggml.tiny_blas(1, 64, 8)
    assert not ggml.tiny_blas(2, 72, 8) and not ggml.tiny_blas(2, 64, 6)
    w = R.standard_normal((72, 4)).astype(np.float32)
    x = R.standard_normal((2, 72)).astype(np.float32)
    assert np.array_equal(ggml.mul_mat(x, w), [[vec_dot(x[r], w[:, n], False) for n in range(4)] for r in range(2)])


def test_rms_norm_sums_float32_squares_in_float64_and_scales_by_a_float32_reciprocal():
    x = R.standard_normal((2, 40)).astype(np.float32)
    g = R.standard_normal(40).astype(np.float32)
    got = ggml.rms_norm(x, g, 1e-5)
    for r in range(2):
        s = np.float64(0)
        for v in x[r]:
            s += np.float64(v * v)  # each square rounded to float32, then added in float64
        mean = np.float32(s / 40)
        scale = np.float32(1) / np.sqrt(mean + np.float32(1e-5))
        assert np.array_equal(got[r], (x[r] * scale) * g)


@pytest.mark.parametrize("x", [np.array([-11.0, -0.3, 0.0, 0.7, 2.0, 12.0], np.float32)])
def test_llama_cpp_s_gelu_reads_the_fp16_table_of_the_tanh_approximation(x):
    got = ggml.gelu(x)
    h = x.astype(np.float16).astype(np.float64)
    table = (0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * h * (1 + 0.044715 * h * h)))).astype(np.float16)
    assert got[0] == 0 and got[-1] == 12.0
    assert np.array_equal(got[1:-1], table[1:-1].astype(np.float32))
