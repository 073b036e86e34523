"""Each operation of the language against an independent formulation: scalar loops written from the published
equations (float64), never the vectorised definition checked against itself."""

import math

import numpy as np
import pytest

from streamed.numerics import kernels as nx

RTOL = 2e-5
ATOL = 2e-6


def rng(seed=0):
    return np.random.default_rng(seed)


def close(a, b):
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=RTOL, atol=ATOL)


def sig(v):
    return 1.0 / (1.0 + math.exp(-v))


def test_elementwise_activations_follow_their_formulas_value_by_value():
    x = rng().standard_normal(64).astype(np.float32) * 4
    x[:3] = [-90.0, 0.0, 90.0]
    for name, f in (
        ("silu", lambda v: v * sig(v)),
        ("sigmoid", sig),
        ("gelu", lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))),
        ("softplus", lambda v: v + math.log1p(math.exp(-v)) if v > 0 else math.log1p(math.exp(v))),
        ("exp", lambda v: math.exp(min(v, 80))),
    ):
        xs = np.minimum(x, 80) if name == "exp" else x
        close(getattr(nx, name)(xs), [f(float(v)) for v in xs])


def test_softmax_sums_to_one_along_the_last_axis_and_follows_exp_over_sum():
    x = rng().standard_normal((3, 7)).astype(np.float32) * 10
    want = [[math.exp(v) / sum(math.exp(u) for u in row) for v in row] for row in x.astype(np.float64)]
    close(nx.softmax(x), want)


def test_matmul_is_the_sum_over_the_inner_index():
    x, w = rng().standard_normal((3, 5)), rng(1).standard_normal((5, 4))
    want = [[sum(x[r, k] * w[k, n] for k in range(5)) for n in range(4)] for r in range(3)]
    close(nx.matmul(x, w), want)


@pytest.mark.parametrize("heads,offset,eps", [(1, 0.0, 1e-6), (4, 0.0, 1e-5), (2, 1.0, 1e-6)])
def test_rmsnorm_divides_each_row_or_head_by_its_root_mean_square(heads, offset, eps):
    x = rng().standard_normal((3, 16)).astype(np.float32)
    g = rng(2).standard_normal(16 // heads).astype(np.float32)
    w = 16 // heads
    want = np.zeros((3, 16))
    for r in range(3):
        for h in range(heads):
            seg = [float(v) for v in x[r, h * w:(h + 1) * w]]
            rms = math.sqrt(sum(v * v for v in seg) / w + eps)
            for i in range(w):
                want[r, h * w + i] = seg[i] / rms * (g[i] + offset)
    close(nx.rmsnorm(x, g, eps, offset, heads), want)


@pytest.mark.parametrize("scale,eps", [(1e-4, 1e-6), (1e-3, 1e-5), (3e-3, 1e-6), (30.0, 1e-5)])
def test_rmsnorm_puts_epsilon_inside_the_square_root_where_the_rms_is_far_from_1(scale, eps):
    """Issue 21: `x / (√(mean x²) + ε)` passed every numerics test — inputs of rms ≈ 1, where ε's place shifts the
    result by about ε, under the 2e-5 tolerance. At an rms of 1e-3 with ε 1e-5 the two differ threefold. The formula,
    written out: y = x / √(mean(x²) + ε) · g."""
    x = (rng(3).standard_normal((4, 32)) * scale).astype(np.float32)
    g = rng(4).standard_normal(32).astype(np.float32)
    want = np.zeros((4, 32))
    for r in range(4):
        row = [float(v) for v in x[r]]
        rms = math.sqrt(sum(v * v for v in row) / len(row) + eps)
        want[r] = [v / rms * float(gi) for v, gi in zip(row, g)]
    np.testing.assert_allclose(nx.rmsnorm(x, g, eps), want, rtol=RTOL, atol=ATOL * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("heads", [1, 4])
def test_l2norm_gives_unit_rows_or_heads(heads):
    x = rng().standard_normal((2, 16)).astype(np.float32)
    w = 16 // heads
    want = np.zeros((2, 16))
    for r in range(2):
        for h in range(heads):
            seg = x[r, h * w:(h + 1) * w].astype(np.float64)
            want[r, h * w:(h + 1) * w] = seg / math.sqrt(sum(v * v for v in seg) + 1e-6)
    close(nx.l2norm(x, 1e-6, heads), want)


def test_lookup_and_argmax_read_rows_and_first_largest_index():
    e = rng().standard_normal((10, 4)).astype(np.float32)
    close(nx.lookup(np.array([3, 0, 3]), e), [e[3], e[0], e[3]])
    x = np.array([[1.0, 5.0, 5.0, 2.0], [-1.0, -2.0, -0.5, -3.0]], dtype=np.float32)
    assert nx.argmax(x).tolist() == [1, 2]


def test_rotary_tables_are_the_roformer_frequencies():
    c = nx.rotary_table("cosines", 10000, 6, 4)
    s = nx.rotary_table("sines", 10000, 6, 4)
    for p in range(6):
        for i in range(4):
            theta = 10000 ** (-2 * i / 8)
            assert abs(c[p, i] - math.cos(p * theta)) < 1e-6 and abs(s[p, i] - math.sin(p * theta)) < 1e-6


@pytest.mark.parametrize("rotating,after", [(None, 0), (4, 0), (4, 4)])
def test_rope_rotates_each_pair_i_and_i_plus_half_by_the_position_angle(rotating, after):
    heads, w, rows, pos = 2, 8, 3, 5
    r = (w - after) if rotating is None else rotating
    half = r // 2
    x = rng().standard_normal((rows, heads * w)).astype(np.float32)
    cos = nx.rotary_table("cosines", 10000, 16, half)
    sin = nx.rotary_table("sines", 10000, 16, half)
    want = x.astype(np.float64).copy()
    for row in range(rows):
        p = pos + row
        for h in range(heads):
            base = h * w + after
            for i in range(half):
                theta = p * 10000 ** (-i / half)
                a, b = float(x[row, base + i]), float(x[row, base + i + half])
                want[row, base + i] = a * math.cos(theta) - b * math.sin(theta)
                want[row, base + i + half] = b * math.cos(theta) + a * math.sin(theta)
    close(nx.rope(x, pos, cos, sin, heads, rotating, after), want)


@pytest.mark.parametrize("after", [0, 2])
def test_interleaved_rope_rotates_each_adjacent_pair_by_the_position_angle(after):
    heads, w, rows, pos = 2, 8, 3, 5
    half = (w - after) // 2
    x = rng(3).standard_normal((rows, heads * w)).astype(np.float32)
    cos = nx.rotary_table("cosines", 10000, 16, half)
    sin = nx.rotary_table("sines", 10000, 16, half)
    want = x.astype(np.float64).copy()
    for row in range(rows):
        for h in range(heads):
            base = h * w + after
            for i in range(half):  # GPT-J / ggml's ROPE_TYPE_NORM: dims 2i and 2i+1 turn together
                theta = (pos + row) * 10000 ** (-i / half)
                a, b = float(x[row, base + 2 * i]), float(x[row, base + 2 * i + 1])
                want[row, base + 2 * i] = a * math.cos(theta) - b * math.sin(theta)
                want[row, base + 2 * i + 1] = b * math.cos(theta) + a * math.sin(theta)
    close(nx.rope(x, pos, cos, sin, heads, after=after, interleaved=True), want)


def transformers_llama3(base, dim, factor, low, high, old):
    """transformers' ``_compute_llama3_parameters``, transcribed (float64)."""
    inv_freq = 1.0 / base ** (np.arange(0, dim, 2) / dim)
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    llama = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * llama / factor + smooth * llama
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, llama)


def transformers_yarn(base, dim, factor, old, fast=32, slow=1, truncate=True):
    """transformers' ``_compute_yarn_parameters`` (its inverse frequencies), transcribed (float64)."""
    def correction_dim(rotations):
        return (dim * math.log(old / (rotations * 2 * math.pi))) / (2 * math.log(base))
    low, high = correction_dim(fast), correction_dim(slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    pos_freqs = base ** (np.arange(0, dim, 2) / dim)
    return 1 / (factor * pos_freqs) * (1 - extrapolation) + 1 / pos_freqs * extrapolation


@pytest.mark.parametrize("scaling, want", [
    (dict(scaling="linear", factor=4.0), lambda: 1 / 500000 ** (np.arange(0, 64, 2) / 64) / 4),
    (dict(scaling="llama3", factor=8.0, context=8192, low=1.0, high=4.0),
     lambda: transformers_llama3(500000, 64, 8.0, 1.0, 4.0, 8192)),
    (dict(scaling="llama3", factor=16.0, context=8192, low=1.0, high=1.0),  # Llama 4 Scout: no smooth band
     lambda: transformers_llama3(500000, 64, 16.0, 1.0, 1.0 + 1e-12, 8192)),
    (dict(scaling="yarn", factor=32.0, context=4096, fast=32.0, slow=1.0),
     lambda: transformers_yarn(500000, 64, 32.0, 4096)),
    (dict(scaling="yarn", factor=32.0, context=4096, fast=32.0, slow=1.0, unrounded=True),
     lambda: transformers_yarn(500000, 64, 32.0, 4096, truncate=False)),
])
def test_rotary_frequencies_scale_as_transformers_computes_them(scaling, want):
    np.testing.assert_allclose(nx.rotary_frequencies(500000, 32, **scaling), want(), rtol=1e-12)


def test_longrope_divides_each_frequency_by_its_short_factor_within_the_original_context_and_its_long_one_past_it():
    # transformers' _compute_longrope_parameters: inv_freq = 1 / (ext_factors · base^(2i/dim)), its attention factor on
    # the cosines; the short factors while the context llama.cpp runs at (rounded up to a multiple of 256) is within
    # the original one, the long ones past it — a table of 16 rows of a model run at 16 positions is one of 256.
    base, dim, short, long = 10000.0, 8, (1.0, 1.5, 2.0, 4.0), (2.0, 3.0, 5.0, 9.0)
    for original, run_ctx, factors in ((256.0, 16, short), (256.0, 256, short), (256.0, 257, long),
                                       (16.0, 16, long), (300.0, 300, long), (512.0, 300, short)):
        fill = ("cosines", base, (("scaling", "longrope"), ("context", original), ("short", short), ("long", long),
                                  ("attention", 1.2)))
        ctx = 16
        table = nx.fill_table(fill, ctx, dim // 2, run_ctx=run_ctx)
        for p in (0, 5, ctx - 1):
            for i in range(dim // 2):
                theta = 1.0 / (factors[i] * base ** (2 * i / dim))
                assert math.isclose(float(table[p, i]), 1.2 * math.cos(p * theta), rel_tol=1e-6, abs_tol=1e-7)


def test_soft_cap_is_cap_times_tanh_of_x_over_cap():
    x = rng().standard_normal(40).astype(np.float32) * 60
    close(nx.soft_cap(x, 30.0), [30.0 * math.tanh(float(v) / 30.0) for v in x])
    assert np.all(np.abs(nx.soft_cap(x, 30.0)) < 30.0)


@pytest.mark.parametrize("bias", [False, True])
def test_layernorm_centres_each_row_divides_by_its_deviation_then_scales_and_shifts(bias):
    x = rng(1).standard_normal((3, 16)).astype(np.float32) * 3 + 2
    g = rng(2).standard_normal(16).astype(np.float32)
    b = rng(3).standard_normal(16).astype(np.float32) if bias else None
    want = np.zeros((3, 16))
    for r in range(3):
        row = [float(v) for v in x[r]]
        mean = sum(row) / 16
        var = sum((v - mean) ** 2 for v in row) / 16
        for j in range(16):
            want[r, j] = (row[j] - mean) / math.sqrt(var + 1e-5) * float(g[j]) + (float(b[j]) if bias else 0.0)
    close(nx.layernorm(x, g, b, 1e-5), want)


@pytest.mark.parametrize("start, stop, every", [(0, 6, None), (6, 12, None), (0, 2, 6), (2, 3, 6), (5, 6, 6)])
def test_columns_take_columns_start_to_stop_of_the_whole_or_of_every_group(start, stop, every):
    x = rng().standard_normal((2, 24)).astype(np.float32)
    group = every or 24
    want = [[float(x[r, g * group + j]) for g in range(24 // group) for j in range(start, stop)] for r in range(2)]
    np.testing.assert_array_equal(nx.columns(x, start, stop, every), np.asarray(want, dtype=np.float32))


def test_a_fill_s_attention_factor_multiplies_its_cosines_and_sines():
    plain = nx.fill_table(("sines", 10000.0), 8, 4)
    scaled = nx.fill_table(("sines", 10000.0, (("attention", 1.25),)), 8, 4)
    np.testing.assert_allclose(scaled, 1.25 * plain.astype(np.float64), rtol=1e-6)


def loop_attention(q, k, v, pos, heads, groups, window=None, chunk=None, scale=None, sinks=None, softcap=None):
    rows, ctx = q.shape[0], k.shape[0]
    dk = q.shape[1] // heads
    dv = v.shape[1] // groups
    f = 1 / math.sqrt(dk) if scale is None else scale
    out = np.zeros((rows, heads * dv))
    for r in range(rows):
        i = pos + r
        for h in range(heads):
            g = h * groups // heads
            qs = q[r, h * dk:(h + 1) * dk].astype(np.float64)
            allowed = [j for j in range(ctx) if j <= i and (window is None or j > i - window)
                       and (chunk is None or j // chunk == i // chunk)]
            logits = {j: f * float(qs @ k[j, g * dk:(g + 1) * dk]) for j in allowed}
            if softcap is not None:  # Gemma 2: cap · tanh(logit / cap), before the softmax
                logits = {j: softcap * math.tanh(l / softcap) for j, l in logits.items()}
            m = max(list(logits.values()) + ([float(sinks[h])] if sinks is not None else []))
            den = sum(math.exp(l - m) for l in logits.values()) + (math.exp(float(sinks[h]) - m) if sinks is not None else 0)
            for j, l in logits.items():
                out[r, h * dv:(h + 1) * dv] += math.exp(l - m) / den * v[j, g * dv:(g + 1) * dv]
    return out


@pytest.mark.parametrize("opts", [{}, {"window": 3}, {"chunk": 4}, {"scale": 0.3}, {"sinks": True}, {"window": 5, "sinks": True},
                                  {"softcap": 0.7}, {"window": 3, "softcap": 2.0, "scale": 0.9}])
def test_attention_is_causal_grouped_softmax_over_allowed_positions(opts):
    heads, groups, dk, ctx, rows, pos = 4, 2, 8, 12, 3, 6
    q = rng(1).standard_normal((rows, heads * dk)).astype(np.float32)
    k = rng(2).standard_normal((ctx, groups * dk)).astype(np.float32)
    v = rng(3).standard_normal((ctx, groups * dk)).astype(np.float32)
    sinks = rng(4).standard_normal(heads).astype(np.float32) if opts.get("sinks") else None
    got = nx.attention(q, k, v, pos, heads, groups, opts.get("window"), opts.get("chunk"), opts.get("scale"), sinks,
                       opts.get("softcap"))
    close(got, loop_attention(q, k, v, pos, heads, groups, opts.get("window"), opts.get("chunk"), opts.get("scale"), sinks,
                              opts.get("softcap")))


def test_latent_attention_absorbed_equals_attention_over_up_projected_keys_and_values():
    """The absorbed form equals the naive MLA of DeepSeek-V2 eq. 9–19: keys ``[cⱼ·A[h]ᵀ | kᴿⱼ]``, values
    ``cⱼ·B[h]``, ordinary causal attention per head."""
    heads, nope, rope_dims, r, vw, ctx, rows, pos = 2, 4, 2, 6, 3, 9, 2, 5
    q = rng(1).standard_normal((rows, heads * (nope + rope_dims))).astype(np.float32)
    c = rng(2).standard_normal((ctx, r)).astype(np.float32)
    kr = rng(3).standard_normal((ctx, rope_dims)).astype(np.float32)
    a = rng(4).standard_normal((heads, nope, r)).astype(np.float32)
    b = rng(5).standard_normal((heads, r, vw)).astype(np.float32)
    want = np.zeros((rows, heads * vw))
    for h in range(heads):
        keys = np.concatenate([c.astype(np.float64) @ a[h].T, kr], axis=1)  # ctx × (N+M)
        vals = c.astype(np.float64) @ b[h]
        qh = q[:, h * (nope + rope_dims):(h + 1) * (nope + rope_dims)]
        want[:, h * vw:(h + 1) * vw] = loop_attention(qh, keys, vals, pos, 1, 1, scale=1 / math.sqrt(nope + rope_dims))
    close(nx.latent_attention(q, c, kr, pos, a, b, heads, nope, rope_dims), want)


@pytest.mark.parametrize("sharing, in_turn", [(None, False), (2, False), (2, True)])
def test_gated_delta_follows_the_recurrence_element_by_element(sharing, in_turn):
    heads, dk, dv, rows = 4, 3, 2, 3
    groups = heads if sharing is None else sharing
    q = rng(1).standard_normal((rows, groups * dk)).astype(np.float32)
    k = rng(2).standard_normal((rows, groups * dk)).astype(np.float32)
    v = rng(3).standard_normal((rows, heads * dv)).astype(np.float32)
    s0 = rng(4).standard_normal((heads, dk, dv)).astype(np.float32)
    a = rng(5).uniform(0.5, 1.0, (rows, heads)).astype(np.float32)
    b = rng(6).uniform(0.0, 1.0, (rows, heads)).astype(np.float32)
    s = s0.astype(np.float64).copy()
    want = np.zeros((rows, heads * dv))
    for t in range(rows):
        for h in range(heads):
            g = h % groups if in_turn else h * groups // heads  # in turn: llama.cpp's Qwen3.5 order
            kv = k[t, g * dk:(g + 1) * dk]
            qv = q[t, g * dk:(g + 1) * dk]
            for i in range(dk):
                for j in range(dv):
                    s[h, i, j] *= a[t, h]
            pred = [sum(s[h, i, j] * kv[i] for i in range(dk)) for j in range(dv)]
            for i in range(dk):
                for j in range(dv):
                    s[h, i, j] += b[t, h] * kv[i] * (v[t, h * dv + j] - pred[j])
            for j in range(dv):
                want[t, h * dv + j] = sum(s[h, i, j] * qv[i] for i in range(dk))
    out, s1 = nx.gated_delta(q, k, v, s0, a, b, heads, sharing, in_turn)
    close(out, want)
    close(s1, s)


def test_short_convolution_weights_the_last_k_rows_and_carries_k_minus_1():
    k, c, rows = 4, 5, 3
    x = rng(1).standard_normal((rows, c)).astype(np.float32)
    st = rng(2).standard_normal((k - 1, c)).astype(np.float32)
    w = rng(3).standard_normal((k, c)).astype(np.float32)
    history = [list(r) for r in st] + [list(r) for r in x]
    want = [[sum(w[i, ch] * history[t + i][ch] for i in range(k)) for ch in range(c)] for t in range(rows)]
    y, s1 = nx.short_convolution(x, st, w)
    close(y, want)
    close(s1, history[-(k - 1):])


def loop_experts(x, router, top, g, u, d, scored="softmax", normalized=False, routed_scale=None, sel_bias=None,
                 groups=None, router_bias=None, biases=None, clamp=None, weighting_inputs=False, shared=None, shared_gate=None):
    rows, dm = x.shape
    n = router.shape[1]
    out = np.zeros((rows, dm))
    for r in range(rows):
        xr = x[r].astype(np.float64)
        logits = [float(xr @ router[:, e]) + (float(router_bias[e]) if router_bias is not None else 0) for e in range(n)]
        if scored == "softmax":
            m = max(logits)
            z = sum(math.exp(l - m) for l in logits)
            scores = [math.exp(l - m) / z for l in logits]
        else:
            scores = [sig(l) for l in logits]
        choose = [scores[e] + (float(sel_bias[e]) if sel_bias is not None else 0) for e in range(n)]
        eligible = list(range(n))
        if groups is not None:
            ng, keep = groups
            per = n // ng
            gscore = [sum(sorted(choose[gi * per:(gi + 1) * per], reverse=True)[:2]) for gi in range(ng)]
            best = sorted(range(ng), key=lambda gi: (-gscore[gi], gi))[:keep]
            eligible = [e for e in range(n) if e // per in best]
        chosen = sorted(eligible, key=lambda e: (-choose[e], e))[:top]
        wts = [scores[e] for e in chosen]
        if normalized:
            tot = sum(wts)
            wts = [w / tot for w in wts]
        acc = np.zeros(dm)
        for e, wt in zip(chosen, wts):
            inp = xr * wt if weighting_inputs else xr
            gv = inp @ g[e] + (biases[0][e] if biases else 0)
            uv = inp @ u[e] + (biases[1][e] if biases else 0)
            if clamp is None:
                h = gv * (1 / (1 + np.exp(-gv))) * uv
            else:
                gv = np.minimum(gv, clamp)
                uv = np.clip(uv, -clamp, clamp)
                h = (uv + 1) * gv / (1 + np.exp(-1.702 * gv))
            y = h @ d[e] + (biases[2][e] if biases else 0)
            acc += y if weighting_inputs else wt * y
        if routed_scale is not None:
            acc *= routed_scale
        if shared is not None:
            g2, u2, d2 = shared
            gv = xr @ g2
            sv = (gv / (1 + np.exp(-gv)) * (xr @ u2)) @ d2
            if shared_gate is not None:
                sv = sv * sig(float(xr @ shared_gate.reshape(-1)))
            acc += sv
        out[r] = acc
    return out


EXPERT_OPTIONS = [
    {},
    {"scored": "sigmoid", "normalized": True, "routed_scale": 2.5},
    {"sel_bias": True, "groups": (4, 2), "scored": "sigmoid", "normalized": True},
    {"router_bias": True, "biases": True, "clamp": 1.5, "normalized": True},
    {"weighting_inputs": True, "scored": "sigmoid", "top": 1},
    {"shared": True, "shared_gate": True},
]


@pytest.mark.parametrize("opts", EXPERT_OPTIONS)
def test_experts_route_each_row_to_its_top_k_and_sum_by_weight(opts):
    rows, dm, f, n, top = 5, 8, 6, 8, opts.get("top", 2)
    R = rng(0)
    x = R.standard_normal((rows, dm)).astype(np.float32)
    router = R.standard_normal((dm, n)).astype(np.float32)
    g, u = (R.standard_normal((n, dm, f)).astype(np.float32) for _ in range(2))
    d = R.standard_normal((n, f, dm)).astype(np.float32)
    sel = R.standard_normal(n).astype(np.float32) * 0.1 if opts.get("sel_bias") else None
    rb = R.standard_normal(n).astype(np.float32) if opts.get("router_bias") else None
    biases = (R.standard_normal((n, f)).astype(np.float32), R.standard_normal((n, f)).astype(np.float32),
              R.standard_normal((n, dm)).astype(np.float32)) if opts.get("biases") else None
    shared = (R.standard_normal((dm, f)).astype(np.float32), R.standard_normal((dm, f)).astype(np.float32),
              R.standard_normal((f, dm)).astype(np.float32)) if opts.get("shared") else None
    sg = R.standard_normal((dm, 1)).astype(np.float32) if opts.get("shared_gate") else None
    kw = dict(scored_by=opts.get("scored", "softmax"), normalized=opts.get("normalized", False),
              routed_scale=opts.get("routed_scale"), selection_bias=sel, groups=opts.get("groups"), router_bias=rb,
              expert_biases=biases, clamp=opts.get("clamp"), weighting_inputs=opts.get("weighting_inputs", False),
              shared=shared, shared_gate=sg)
    got = nx.experts(x, router, top, g, u, d, **kw)
    want = loop_experts(x, router, top, g, u, d, opts.get("scored", "softmax"), opts.get("normalized", False),
                        opts.get("routed_scale"), sel, opts.get("groups"), rb, biases, opts.get("clamp"),
                        opts.get("weighting_inputs", False), shared, sg)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_group_limited_routing_never_picks_an_expert_outside_the_kept_groups():
    scores_logits = np.array([[5.0, 4.9, 0.0, 0.0, 4.8, 0.0, 0.0, 0.0]], dtype=np.float32)
    idx, _ = nx.route(scores_logits, 2, "sigmoid", groups=(4, 1))
    assert set(idx[0].tolist()) == {0, 1}
