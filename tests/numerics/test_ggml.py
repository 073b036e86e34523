"""llama.cpp's CPU arithmetic (``streamed.numerics.ggml``) against its orders of operations written out here in exact
rational arithmetic, each rounding where ggml's source rounds (``ggml/src/ggml-cpu/``, the vendored 0c1e57098). That
the vendored build computes in these orders is held against llama.cpp's own tensors in ``tests/oracle``."""

from fractions import Fraction

import numpy as np
import pytest
from numba import njit

from exact import round_f32, round_f64
from streamed.numerics import ggml
from streamed.numerics.cpu import AVX2, AVX512, PATHS
from streamed.numerics.q8 import Planes, from_bytes, quantize_weight

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


def hsum(v: list[Fraction]) -> Fraction:
    """One register's horizontal sum where ggml writes ``hsum`` (tinyBLAS, ``hsum_float_8``, soft_max): AVX-512's
    ``_mm512_reduce_add_ps``; AVX2's high half plus low half, ``_mm_movehl_ps``, ``_mm_movehdup_ps``."""
    if len(v) == 16:
        return reduce16(v)
    t = [add(v[i + 4], v[i]) for i in range(4)]
    return add(add(t[0], t[2]), add(t[1], t[3]))


def vec_reduce(v: list[Fraction]) -> Fraction:
    """``GGML_F32_VEC_REDUCE``'s last register: AVX-512's ``_mm512_reduce_add_ps``; AVX2's low half plus high half,
    then ``_mm_hadd_ps`` twice (pairs 0+1 and 2+3, then those two)."""
    if len(v) == 16:
        return reduce16(v)
    t = [add(v[i], v[i + 4]) for i in range(4)]
    return add(add(t[0], t[1]), add(t[2], t[3]))


BOTH = pytest.mark.parametrize("path", [AVX2, AVX512], ids=["avx2", "avx512"])


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


@njit
def _halves(values, out):
    for i in range(values.shape[0]):
        out[i] = ggml._half(values[i])


def test_the_q8_0_activation_scale_is_rounded_to_fp16_as_numpy_rounds_it_at_every_boundary():
    """``d``'s fp16 rounding, done in the quantising kernel, against numpy's ``astype(float16)`` (an independent
    definition: C's and F16C's round to nearest, ties to even): every float32 whose low 13 mantissa bits lie at or
    beside a rounding boundary (a tie, either side of it; normals and subnormals of fp16), across every exponent
    from below fp16's subnormals to past its largest value, then a sweep of bit patterns, zero, ∞ and NaN."""
    low = np.array([0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x2FFF, 0x3000, 0x3001, 0x7FFFFF], np.uint32)
    exponents = np.arange(90, 145, dtype=np.uint32)  # 2⁻³⁷ … 2¹⁷
    near = (exponents[:, None, None] << 23) | (np.arange(0, 1 << 23, 1 << 13, dtype=np.uint32)[None, :, None]
                                             + low[None, None, :]) & 0x7FFFFF
    sweep = np.arange(0, 0x47900000, 4099, dtype=np.uint32)
    v = np.concatenate([near.ravel(), sweep]).view(np.float32)
    v = np.concatenate([v, np.float32([0.0, np.inf, np.nan, 65504.0, 65519.99, 65520.0, 2.0 ** -24, 2.0 ** -25])])
    got = np.empty_like(v)
    _halves(v, got)
    with np.errstate(over="ignore"):  # past 65520 is ∞, as it should be
        want = v.astype(np.float16).astype(np.float32)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), [(float(a), float(b), float(c)) for a, b, c in zip(v[~same][:5], got[~same], want[~same])]


def q8_element(x_row: np.ndarray, w_blocks: np.ndarray) -> np.float32:
    """``ggml_vec_dot_q8_0_q8_0`` (its AVX2 code, which AVX-512 builds compile too): per block, lane l's integer sum of the 4 products of values
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


@pytest.mark.parametrize("host", ["this", "avx2", "generic"],
                         ids=["this host's code", "code for a host without VNNI", "code for a host without AVX2"])
def test_a_q8_0_product_is_ggml_s_integer_dot_per_lane_scaled_then_summed_across_lanes(host, monkeypatch):
    # 6 columns and rows: on a VNNI host a tile of 4 columns × 4 rows, its 2 rows left over, and 2 columns left over
    w = quantize_weight(R.standard_normal((96, 6)).astype(np.float32))
    raw = w.raw.copy()
    raw[:, 2:5] = 0x80  # int8 −128, which no quantiser writes but a file may hold: still exact
    w = Planes(raw)
    x = R.standard_normal((6, 96)).astype(np.float32)  # rows that share a weight's block, and rows alone
    if host != "this":
        monkeypatch.setattr(ggml, "_VNNI", False)
        monkeypatch.setattr(ggml, "_AVX2", host == "avx2")
        monkeypatch.setattr(ggml, "_q8_kernel", njit(ggml._q8_kernel.py_func))
    got = ggml.mul_mat(x, w, path=AVX2)
    want = [[q8_element(x[r], w.raw[n]) for n in range(6)] for r in range(6)]
    assert np.array_equal(got, np.array(want, dtype=np.float32))
    assert np.array_equal(ggml.mul_mat(x[1:2], w, path=AVX2), got[1:2])  # one row or six: one arithmetic
    assert np.array_equal(ggml.mul_mat(x, w, path=AVX512), got)  # exact integer sums, one hsum: one arithmetic


def vec_dot(x: np.ndarray, y: np.ndarray, wide_tail: bool, lanes: int) -> np.float32:
    """``ggml_vec_dot_f32`` / ``_f16`` with registers of ``lanes``: four fma accumulators over whole steps of
    ``4·lanes``, added ``(s₀+s₂)+(s₁+s₃)`` and reduced; the rest added one product at a time, in float32 (f32) or
    float64 (f16)."""
    n = len(x)
    step = 4 * lanes
    full = n - n % step
    acc = [[Fraction(0)] * lanes for _ in range(4)]
    for i in range(0, full, step):
        for j in range(4):
            for l in range(lanes):
                acc[j][l] = fma(F(x[i + lanes * j + l]), F(y[i + lanes * j + l]), acc[j][l])
    s = vec_reduce([add(add(acc[0][l], acc[2][l]), add(acc[1][l], acc[3][l])) for l in range(lanes)])
    for i in range(full, n):
        p = round_f32(F(x[i]) * F(y[i]))
        s = round_f64(s + p) if wide_tail else add(s, p)
    return np.float32(round_f32(s))


def tiny(x: np.ndarray, y: np.ndarray, lanes: int) -> np.float32:
    """llamafile's ``tinyBLAS<lanes>`` element: one fma accumulator of ``lanes``, then ``hsum``."""
    acc = [Fraction(0)] * lanes
    for i in range(0, len(x), lanes):
        for l in range(lanes):
            acc[l] = fma(F(x[i + l]), F(y[i + l]), acc[l])
    return np.float32(hsum(acc))


@BOTH
def test_a_float_product_is_ggml_s_dot_for_one_row_and_tinyblas_for_several(path):
    w = R.standard_normal((80, 8)).astype(np.float32)  # 80 = one step of 64 (two of 32) and 16 left over
    x = R.standard_normal((3, 80)).astype(np.float32)
    one = ggml.mul_mat(x[:1], w, path=path)
    assert np.array_equal(one, [[vec_dot(x[0], w[:, n], False, path.lanes) for n in range(8)]])
    several = ggml.mul_mat(x, w, path=path)
    assert np.array_equal(several, [[tiny(x[r], w[:, n], path.lanes) for n in range(8)] for r in range(3)])
    assert np.array_equal(ggml.mul_mat(x, w, rows=1, path=path)[:1], one)  # the step's rows decide, not the operand's
    half = w.astype(np.float16)
    xh = x.astype(np.float16).astype(np.float32)  # an F16 product reads its activations rounded to fp16
    assert np.array_equal(ggml.mul_mat(x[:1], half, path=path),
                          [[vec_dot(xh[0], half[:, n], True, path.lanes) for n in range(8)]])


def test_the_two_paths_sum_a_float_product_in_other_orders():
    """Why a path is a fact of the build: on the same operands AVX2's and AVX-512's sums differ in last bits."""
    w = R.standard_normal((256, 64)).astype(np.float32)
    x = R.standard_normal((1, 256)).astype(np.float32)
    assert not np.array_equal(ggml.mul_mat(x, w, path=AVX2), ggml.mul_mat(x, w, path=AVX512))


def test_without_llamafile_several_rows_take_ggml_s_dot():
    w = R.standard_normal((64, 4)).astype(np.float32)
    x = R.standard_normal((2, 64)).astype(np.float32)
    plain = PATHS["avx2:nollamafile"]
    assert np.array_equal(ggml.mul_mat(x, w, path=plain), [[vec_dot(x[r], w[:, n], False, 8) for n in range(4)]
                                                            for r in range(2)])


def test_tinyblas_takes_only_a_reduction_of_whole_registers_and_outputs_of_4s():
    assert ggml.tiny_blas(2, 64, 8, AVX512) and not ggml.tiny_blas(1, 64, 8, AVX512)
    assert not ggml.tiny_blas(2, 72, 8, AVX512) and not ggml.tiny_blas(2, 64, 6, AVX512)
    assert ggml.tiny_blas(2, 72, 8, AVX2)  # 72 is 9 registers of 8
    w = R.standard_normal((72, 4)).astype(np.float32)
    x = R.standard_normal((2, 72)).astype(np.float32)
    assert np.array_equal(ggml.mul_mat(x, w, path=AVX512),
                          [[vec_dot(x[r], w[:, n], False, 16) for n in range(4)] for r in range(2)])


def expf(x: float, lanes: int) -> float:
    """``ggml_v_expf`` on one lane where ``2ⁿ`` is a normal float32, each rounding written out (``vec.h``): AVX-512
    scales ``1 + b·p(b)`` by ``2ⁿ`` (``scalef``); AVX2 computes ``k + k·(b·p(b))`` with ``k = 2ⁿ``."""
    c = [Fraction(float.fromhex(h)) for h in ("0x1.715476p+0", "0x1.8p23", "0x1.62e4p-1", "0x1.7f7d1cp-20",
                                              "0x1.0e4020p-7", "0x1.573e2ep-5", "0x1.555e66p-3", "0x1.fffdb6p-2",
                                              "0x1.ffffecp-1")]
    log2e, shift, hi, lo, p5, p4, p3, p2, p1 = c
    X = Fraction(x)
    z = fma(X, log2e, shift)
    n = round_f32(z - shift)
    b = fma(-n, lo, fma(-n, hi, X))
    u = round_f32(b * b)
    inner = fma(fma(p5, b, p4), u, fma(p3, b, p2))
    if lanes == 16:
        return float(round_f32(fma(inner, u, fma(p1, b, Fraction(1))) * Fraction(2) ** int(n)))
    j = fma(inner, u, round_f32(p1 * b))
    k = Fraction(2) ** int(n)
    return float(fma(k, j, k))


@BOTH
@pytest.mark.parametrize("x", [0.0, -1e-8, 0.5, -0.69314718, -3.25, 7.0, -20.5, 60.0, -87.3, 88.7, -95.0, -104.5,
                               -200.0, 200.0])
def test_ggml_s_vector_exponential_is_its_path_s_roundings_within_two_ulp_of_exp(path, x):
    """Where ``2ⁿ`` is a normal float32 (``|n| ≤ 126``) each rounding is the one written out above; past it the
    path's two-part scale (AVX2) or ``scalef`` (AVX-512) is held to the true exponential: within two units in the
    last place — subnormal results included —, ∞ and 0 where float32 has no room."""
    x32 = np.float32(x)
    got = float(ggml.v_expf(x32, path.lanes))
    if abs(float(x32) * 1.4426950408889634) < 126:
        assert got == expf(float(x32), path.lanes)
    with np.errstate(over="ignore"):  # e²⁰⁰ is past float32: ∞, as the path gives
        true = np.float32(np.exp(np.float64(x32)))
    if np.isinf(true):
        assert got == float("inf")
    else:
        assert abs(got - float(true)) <= 2 * float(np.spacing(true))


def test_the_two_paths_exponentials_differ_in_last_bits():
    xs = np.float32(-R.random(4096) * 20)
    a = np.array([ggml.v_expf(v, 8) for v in xs])
    b = np.array([ggml.v_expf(v, 16) for v in xs])
    assert (a != b).any() and np.abs(a - b).max() <= 2 * np.spacing(np.float32(1))


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


@BOTH
def test_the_fused_gated_delta_recurrence_is_ggml_s_column_dots_fmad_update_and_scale_after(path):
    """``ggml_gated_delta_net`` per head and row: the state (held as columns) scaled by the decay, each column's dot
    with k, ``δ = (v − dot)·β``, each column ``fma(k, δ, column)``, each column's dot with q times the scale."""
    rows, heads, d = 2, 2, 40
    q, k = (R.standard_normal((rows, 1, d)).astype(np.float32) for _ in range(2))
    v = R.standard_normal((rows, heads, d)).astype(np.float32)
    s0 = R.standard_normal((heads, d, d)).astype(np.float32)
    decay, beta = (R.random((rows, heads)).astype(np.float32) for _ in range(2))
    scale = np.float32(1) / np.sqrt(np.float32(d))
    out, state = ggml.gated_delta(q, k, v, s0, decay, beta, np.zeros(heads, np.int64), scale, path=path)
    for h in range(heads):
        cols = [[F(s0[h, i, j]) for i in range(d)] for j in range(d)]  # column j of S
        for t in range(rows):
            cols = [[round_f32(c * F(decay[t, h])) for c in col] for col in cols]
            kt = [F(x) for x in k[t, 0]]
            f32 = lambda c: np.array([float(x) for x in c], np.float32)  # noqa: E731
            deltas = [round_f32(round_f32(F(v[t, h, j]) - F(vec_dot(f32(cols[j]), k[t, 0], False, path.lanes)))
                                * F(beta[t, h])) for j in range(d)]
            cols = [[fma(kt[i], deltas[j], cols[j][i]) for i in range(d)] for j in range(d)]
            want = [round_f32(F(vec_dot(f32(cols[j]), q[t, 0], False, path.lanes)) * F(scale)) for j in range(d)]
            assert [Fraction(float(x)) for x in out[t, h]] == want, (h, t)
        assert [[Fraction(float(state[h, i, j])) for i in range(d)] for j in range(d)] == cols


def test_yarn_s_table_is_ggml_s_float32_rope_cache_close_to_the_float64_one():
    """ggml's YaRN cache: angles by repeated float32 multiplication, the ramp between the corrected dims mixed by one
    fma, ``cosf``·factor — within a few float32 steps of the same table in float64, and not the same bits."""
    from streamed.numerics.kernels import rotary_table

    half, ctx, base, factor, context = 8, 28, 10000.0, 8.0, 64
    ramp = ggml.yarn_corr_dims(2 * half, context, base, 32.0, 1.0)
    assert ramp == (0.0, 3.0)  # 16·ln(64/(2π·β))/(2 ln 10000): −0.99 rounded down and clamped to 0, 2.02 up
    cos, _ = ggml.rope_tables(base, ctx, half, freq_scale=1 / factor, mscale=1.2079442, ramp=ramp)
    exact = rotary_table("cosines", base, ctx, half, scaling="yarn", factor=factor, context=float(context),
                         attention=1.2079442)
    assert np.abs(cos - exact).max() <= 2e-5 and not np.array_equal(cos, exact)


@BOTH
def test_a_quotient_gate_multiplies_the_shared_expert_by_ggml_s_silu_divided_by_its_input(path):
    """Qwen2-MoE's shared gate in llama.cpp's graph: ``g = X·S``, then ``ggml_div(ggml_silu(g), g)`` — ggml's SiLU,
    a float32 quotient (the exact quotient rounded once) — times the shared expert's output, ``ggml_mul``. Routed
    experts that add nothing (their down projections 0) leave that product alone in the output. The quotient is σ(g)
    as a function, and a last bit away from ggml's sigmoid on some rows: with ``quotient_gate`` off those differ."""
    from streamed.numerics import kernels as nx
    from streamed.numerics.product import llama_cpp

    rows, dm, f, n = 64, 32, 32, 4
    arithmetic = llama_cpp(path)
    x = R.standard_normal((rows, dm)).astype(np.float32)
    router = R.standard_normal((dm, n)).astype(np.float32)
    g, u = (R.standard_normal((n, dm, f)).astype(np.float32) for _ in range(2))
    zero = np.zeros((n, f, dm), np.float32)
    shared = tuple(R.standard_normal(s).astype(np.float32) for s in ((dm, f), (dm, f), (f, dm)))
    gate = R.standard_normal((dm, 1)).astype(np.float32)
    got = nx.experts(x, router, 2, g, u, zero, shared=shared, shared_gate=gate, quotient_gate=True,
                     arithmetic=arithmetic)
    s = nx.swiglu(x, *shared, arithmetic=arithmetic)
    pre = nx.matmul(x, gate, arithmetic)[:, 0]
    silu = ggml.silu(pre[:, None], path=path)[:, 0]
    quotient = [round_f32(F(a) / F(b)) for a, b in zip(silu, pre)]
    want = [[round_f32(F(s[r, c]) * quotient[r]) for c in range(dm)] for r in range(rows)]
    assert [[F(v) for v in row] for row in got] == want
    sigmoid = nx.experts(x, router, 2, g, u, zero, shared=shared, shared_gate=gate, arithmetic=arithmetic)
    assert not np.array_equal(sigmoid, got)


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("four", [True, False], ids=["vec_dot", "tinyblas"])
def test_attention_s_registers_are_summed_every_cell_at_once_in_each_dot_s_own_order(lanes, four):
    """``_reduced`` sums the registers of many dots (one a cell) at once: each cell's sum is what its own dot's
    reduction gives — ``GGML_F32_VEC_REDUCE`` of four accumulators (``(s₀+s₂)+(s₁+s₃)`` a lane, then the last
    register's), or tinyBLAS's one register by ``hsum`` — bit for bit, for magnitudes where the orders differ."""
    cells = 37
    scale = np.exp2(R.integers(-24, 24, (4, lanes, cells))).astype(np.float32)
    acc = (R.standard_normal((4, lanes, cells)) * scale).astype(np.float32)
    out = np.empty(cells, np.float32)
    ggml._reduced(acc, four, lanes, cells, np.empty((lanes, cells), np.float32), out)
    want = []
    for j in range(cells):
        if four:
            v = [add(add(F(acc[0, l, j]), F(acc[2, l, j])), add(F(acc[1, l, j]), F(acc[3, l, j])))
                 for l in range(lanes)]
            want.append(vec_reduce(v))
        else:
            want.append(hsum([F(acc[0, l, j]) for l in range(lanes)]))
    assert [F(x) for x in out] == want
    if lanes == 8:  # the two 8-lane orders are not one: a reduction in the other order would fail here
        other = [(hsum if four else vec_reduce)([F(x) for x in acc[0, :, j]]) for j in range(cells)]
        mine = [(vec_reduce if four else hsum)([F(x) for x in acc[0, :, j]]) for j in range(cells)]
        assert other != mine



@pytest.mark.parametrize("path", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_attention_split_over_threads_gives_the_bits_of_one_thread(path, monkeypatch):
    """``ggml.attention`` splits its heads and rows over threads when the work is large (``jit.SERIAL``): how many
    ranges they are cut into changes no bit — causal, windowed, soft-capped and sink-weighted rows alike. Three
    ranges, whatever this host's cores (on one core the pool's thread runs its two in turn)."""
    from streamed.numerics import jit

    monkeypatch.setattr(jit, "threads", lambda: 3)
    rows, ctx, heads, groups, dk = 70, 150, 4, 2, 64
    q = R.standard_normal((rows, heads * dk)).astype(np.float32)
    k, v = (R.standard_normal((ctx, groups * dk)).astype(np.float32) for _ in range(2))
    pos = ctx - rows + np.arange(rows)[:, None]
    cells = np.arange(ctx)[None, :]
    for window, sinks, cap in ((None, None, None), (30, R.standard_normal(heads).astype(np.float32), None),
                               (45, None, 20.0)):
        keep = (cells <= pos) & ((cells > pos - window) if window else True)
        args = (q, k, v, keep, heads, groups, np.float32(0.125), sinks, None, cap)
        monkeypatch.setattr(jit, "SERIAL", 1 << 62)
        one = ggml.attention(*args, path=path)
        monkeypatch.setattr(jit, "SERIAL", 0)
        split = ggml.attention(*args, path=path)
        assert np.array_equal(one.view(np.uint32), split.view(np.uint32)), (window, "three ranges")


@pytest.mark.parametrize("path", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_an_infinite_value_in_a_cell_no_row_reads_still_makes_its_column_nan_as_in_ggml(path):
    """A prefill's rows leave the cells they do not read out of ``p·V`` — but ggml adds every cell's ``v·p``, and a
    masked cell's ``p`` is +0: an infinite value there makes ``∞·0`` = NaN in its column, for every head reading that
    group and every row, and nothing else. Attention keeps that (it looks at the values before it leaves any out)."""
    rows, ctx, heads, groups, dk = 8, 100, 4, 2, 64
    q = R.standard_normal((rows, heads * dk)).astype(np.float32)
    k, v = (R.standard_normal((ctx, groups * dk)).astype(np.float32) for _ in range(2))
    v[ctx - 1, dk + 5] = np.inf  # group 1, column 5; cell ctx − 1 is past every row's position
    keep = np.arange(ctx)[None, :] <= (ctx - 2 - rows + np.arange(rows))[:, None]
    out = ggml.attention(q, k, v, keep, heads, groups, np.float32(0.125), path=path).reshape(rows, heads, dk)
    nan = np.zeros_like(out, bool)
    nan[:, 2:, 5] = True  # heads 2 and 3 read group 1
    assert np.array_equal(np.isnan(out), nan)


@pytest.mark.parametrize("path", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_a_row_that_keeps_no_cell_attends_as_ieee_says_nan_or_all_to_its_sink(path):
    """A row whose every cell is masked has every score −∞: without a sink its maximum is −∞ and every weight
    ``e^(−∞ − (−∞))`` NaN, so its output is NaN; with a sink every cell's weight is 0 and the sink takes all, so its
    output is 0. The rows beside it attend as ever."""
    rows, ctx, heads, groups, dk = 3, 9, 4, 2, 64
    q = R.standard_normal((rows, heads * dk)).astype(np.float32)
    k, v = (R.standard_normal((ctx, groups * dk)).astype(np.float32) for _ in range(2))
    keep = np.ones((rows, ctx), bool)
    keep[1] = False
    out = ggml.attention(q, k, v, keep, heads, groups, np.float32(0.125), path=path).reshape(rows, heads, dk)
    assert np.isnan(out[1]).all() and np.isfinite(out[[0, 2]]).all()
    sinks = R.standard_normal(heads).astype(np.float32)
    out = ggml.attention(q, k, v, keep, heads, groups, np.float32(0.125), sinks, path=path).reshape(rows, heads, dk)
    assert (out[1] == 0).all() and np.isfinite(out).all()
