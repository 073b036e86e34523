"""Every operation of the language (docs/language.md §5), each defined once, written as its math.

These functions are the numerical meaning of the language: the reference interpreter (``reference.py``) calls them
statement by statement and the bundle executor (``execute.py``) calls the same ones for the spatial program's ops, so
"the bundle computes what the document computes" means the two walks agree — never that one function agrees with
itself. Each is checked against an independent, loop-by-loop formulation in ``tests/numerics/``.

Invariants:
- Activations are float32 in and out (token ids and positions are integers); a weight is read as stored — float32,
  float16 or ``q8.Planes`` — and multiplied by ``product`` alone, in the ``Arithmetic`` given (exact unless told);
  a function never mutates its inputs — an operation that updates a state returns the new state beside its output.
- A hidden state is ``rows × n``; row ``r`` of a step is at position ``pos + r``.
- A head's dims are contiguous: head ``h`` of an ``rows × H·w`` tensor is columns ``h·w … (h+1)·w − 1``; grouped
  heads share in order, query head ``h`` reading key/value head ``h // (H/G)`` (Ainslie et al. 2023).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..model.context import longrope_factors
from . import ggml, ggml_quants
from .blocks import Blocks
from .product import BAND_BYTES, EXACT, Arithmetic, product

F32 = np.float32


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=F32)


# ---- elementwise ---------------------------------------------------------------------------------------------------


def silu(x: np.ndarray, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """SiLU / swish: ``x·σ(x)`` (Elfwing et al. 2018; Ramachandran et al. 2017); in llama.cpp's, ggml's
    ``x / (1 + e⁻ˣ)`` (``ggml.silu``)."""
    if arithmetic.ggml:
        return ggml.silu(x, path=arithmetic.path)
    x = f32(x)
    return x * sigmoid(x)


def sigmoid(x: np.ndarray, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """Logistic ``σ(x) = 1/(1+e⁻ˣ)``, evaluated without overflow for large |x| (in llama.cpp's arithmetic, as ggml's
    scalar op: ``ggml.unary``)."""
    if arithmetic.ggml:
        return ggml.unary(x, "sigmoid")
    x = f32(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(F32)


def gelu(x: np.ndarray, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """GELU, tanh approximation: ``½x(1+tanh(√(2/π)(x+0.044715x³)))`` (Hendrycks & Gimpel 2016; GPT-2, Gemma) — or,
    in llama.cpp's arithmetic, read from ggml's fp16 table (``ggml.gelu``)."""
    return ggml.gelu(x) if arithmetic.ggml else _gelu(x)


def _gelu(x: np.ndarray) -> np.ndarray:
    x = f32(x)
    c = F32(np.sqrt(2.0 / np.pi))
    return (F32(0.5) * x * (1 + np.tanh(c * (x + F32(0.044715) * x * x * x)))).astype(F32)


def softplus(x: np.ndarray, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """``log(1+eˣ)``, computed as ``logaddexp(0, x)`` so large x neither overflows nor loses the linear tail (in
    llama.cpp's arithmetic, ggml's: ``x`` above 20, else ``logf(1 + expf(x))``)."""
    if arithmetic.ggml:
        return ggml.unary(x, "softplus")
    return np.logaddexp(F32(0), f32(x)).astype(F32)


def exp(x: np.ndarray, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    return ggml.unary(x, "exp") if arithmetic.ggml else np.exp(f32(x))


def softmax(x: np.ndarray, axis: int = -1, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """``eˣⁱ / Σⱼ eˣʲ`` along ``axis``, shifted by the maximum (which changes nothing but the range); in llama.cpp's
    arithmetic along the last axis as ``ggml.soft_max``."""
    if arithmetic.ggml and axis in (-1, np.ndim(x) - 1):
        return ggml.soft_max(x, path=arithmetic.path)
    x = f32(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(F32)


# ---- products and norms --------------------------------------------------------------------------------------------


def matmul(x: np.ndarray, w, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """``X[r,k]·W[k,n]`` — the language's ``times`` (weights are ``in by out``; float32, float16, or Q8_0 planes,
    read where they are). Every product is ``product.product``'s, whose fixed order of arithmetic makes a row's
    result independent of the rows computed with it — a batched step equals its sequences one by one, a tile its
    rows alone, bit for bit. In llama.cpp's arithmetic, ggml's product (``ggml.mul_mat``; over a weight kept in
    blocks, ``ggml_quants.mul_mat``)."""
    if arithmetic.ggml:
        if isinstance(w, Blocks):
            return _ggml_blocks(x, w, arithmetic)
        return ggml.mul_mat(x, w, arithmetic.rows, path=arithmetic.path)
    return product(x, w)


def _ggml_blocks(x: np.ndarray, w: Blocks, arithmetic: Arithmetic) -> np.ndarray:
    """A product over a weight kept in blocks, in llama.cpp's arithmetic: as ggml computes it where
    ``ggml_quants.computes`` says it does (an expert's as ``mul_mat_id`` does, by ``arithmetic.routed``); any other
    type's as ggml's float32 product of its exact dequantisation, a band of columns at a time — not llama.cpp's
    (docs/language.md, §8's arithmetic). A band is a multiple of 4 columns (or the whole weight), so ggml's choice of
    float kernel is the whole product's."""
    if ggml_quants.computes(w.type, arithmetic.path) and w.raw.ndim == 2:
        return ggml_quants.mul_mat(x, w, arithmetic.rows, path=arithmetic.path, routed=arithmetic.routed)
    k, n = w.shape[-2:]
    band = n if n % 4 else max(4, BAND_BYTES // max(1, 4 * k) // 4 * 4)
    parts = [ggml.mul_mat(x, np.swapaxes(w.columns(c, min(n, c + band)), -1, -2), arithmetic.rows,
                          path=arithmetic.path) for c in range(0, n, band)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)


def _per_head(x: np.ndarray, heads: int) -> np.ndarray:
    rows, n = x.shape
    return x.reshape(rows, heads, n // heads)


def rmsnorm(x: np.ndarray, gain: np.ndarray, epsilon: float = 1e-6, offset: float = 0.0, heads: int = 1,
            arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """RMS norm per row, or per head when ``heads > 1`` (QK-norm): ``x / √(mean x² + ε) · (G + O)``
    (Zhang & Sennrich 2019; Gemma writes its ``1 + g`` gain as offset 1). In llama.cpp's arithmetic, ggml's
    ``rms_norm`` then ``mul`` by ``G + O`` (``ggml.rms_norm``)."""
    if arithmetic.ggml:
        return ggml.rms_norm(x, f32(gain) + F32(offset) if offset else gain, epsilon, heads)
    x = f32(x)
    h = _per_head(x, heads)
    ms = np.mean(h * h, axis=-1, keepdims=True)
    out = h / np.sqrt(ms + F32(epsilon)) * (f32(gain) + F32(offset))
    return out.reshape(x.shape).astype(F32)


def layernorm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray | None = None, epsilon: float = 1e-5,
              arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """Layer norm per row (Ba, Kiros & Hinton 2016): ``(x − mean x) / √(var x + ε) · G + B``, the variance the mean
    of the squared deviations (``torch.nn.LayerNorm``, ggml's ``norm``); StarCoder2 has a bias, Cohere none. In
    llama.cpp's arithmetic, ``ggml.layer_norm``."""
    if arithmetic.ggml:
        return ggml.layer_norm(x, gain, bias, epsilon, path=arithmetic.path)
    x = f32(x)
    centred = x - np.mean(x, axis=-1, keepdims=True)
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    out = centred / np.sqrt(var + F32(epsilon)) * f32(gain)
    return (out if bias is None else out + f32(bias)).astype(F32)


def soft_cap(x: np.ndarray, cap: float, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """Soft-capping ``C·tanh(x/C)`` (Gemma 2's attention and final logits): about ``x`` for ``|x| ≪ C``, never past
    ``±C`` (in llama.cpp's arithmetic, ``ggml.soft_cap``)."""
    if arithmetic.ggml:
        return ggml.soft_cap(x, cap)
    c = F32(cap)
    return (c * np.tanh(f32(x) / c)).astype(F32)


def columns(x: np.ndarray, start: int, stop: int, every: int | None = None) -> np.ndarray:
    """Columns ``start … stop−1`` of ``x``, or of each consecutive group of ``every`` columns, the groups' parts side
    by side (one part of a fused product: Phi-3's ``[q | k | v]``, InternLM2's ``[q… k v]`` per key/value head)."""
    x = np.asarray(x)
    if every is None:
        return np.array(x[..., start:stop])
    groups = x.reshape(*x.shape[:-1], x.shape[-1] // every, every)
    return np.array(groups[..., start:stop].reshape(*x.shape[:-1], -1))


def l2norm(x: np.ndarray, epsilon: float = 1e-6, heads: int = 1, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """L2 norm per row or per head: ``x / √(Σ x² + ε)`` (Gated DeltaNet normalises its q and k so); in llama.cpp's
    arithmetic as llama.cpp computes Gated DeltaNet's (``ggml.l2_norm``: an RMS norm of ``ε/n``, scaled by ``1/√n``)."""
    if arithmetic.ggml:
        return ggml.l2_norm(x, epsilon, heads)
    x = f32(x)
    h = _per_head(x, heads)
    out = h / np.sqrt(np.sum(h * h, axis=-1, keepdims=True) + F32(epsilon))
    return out.reshape(x.shape).astype(F32)


def lookup(tokens: np.ndarray, table) -> np.ndarray:
    """Embedding lookup ``E[T[r], :]`` for each row's token id — only those rows read (a table the checkpoint
    stores quantised dequantises them alone: ``weights.Rows``)."""
    ids = np.asarray(tokens, dtype=np.int64)
    return f32(table.take_rows(ids) if hasattr(table, "take_rows") else np.asarray(table)[ids])


def argmax(x: np.ndarray) -> np.ndarray:
    """The index of the largest logit of each row; a tie goes to the lowest index (numpy's and llama.cpp's greedy)."""
    return np.argmax(f32(x), axis=-1).astype(np.int64)


# ---- host tables ---------------------------------------------------------------------------------------------------


def rotary_frequencies(base: float, width: int, scaling: str | None = None, factor: float = 1.0,
                       context: float | None = None, low: float | None = None, high: float | None = None,
                       fast: float = 32.0, slow: float = 1.0, unrounded: bool = False,
                       factors: tuple | None = None) -> np.ndarray:
    """The angular frequencies ``θᵢ`` (i < w) of a head rotating ``R = 2w`` dims: ``base^(−i/w)`` (RoFormer, Su et
    al. 2021), then as the scaling says — each as transformers' ``modeling_rope_utils`` and llama.cpp compute it:

    - ``linear``: ``θᵢ/F`` (position interpolation, Chen et al. 2023).
    - ``llama3``: with wavelength ``λᵢ = 2π/θᵢ``, ``θᵢ/F`` where ``λᵢ > N/L``, ``θᵢ`` where ``λᵢ < N/H``, and between
      them ``(1−s)·θᵢ/F + s·θᵢ`` with ``s = (N/λᵢ − L)/(H − L)`` (Llama 3.1; llama.cpp divides by the same factors,
      stored as ``rope_freqs``).
    - ``yarn``: ``θᵢ/F·(1−γᵢ) + θᵢ·γᵢ`` with ``γᵢ = 1 − clamp((i − a)/(b − a), 0, 1)``, where ``a``, ``b`` are the dims
      at which the original context ``N`` spans ``fast`` and ``slow`` turns, ``R·ln(N/(2π·β))/(2·ln base)`` — ``a``
      rounded down and ``b`` up unless ``unrounded`` (transformers' ``truncate: false``), then clamped to
      ``[0, R−1]`` (Peng et al. 2023, YaRN).
    - ``longrope``: ``θᵢ/fᵢ`` with ``factors`` ``fᵢ`` one per frequency (Ding et al. 2024, LongRoPE; Phi-3) —
      which of its two lists is for ``rotary_table`` to say.

    Float64 throughout: the tables built from these round once."""
    i = np.arange(width, dtype=np.float64)
    theta = np.power(float(base), -i / width)
    if scaling is None:
        return theta
    if scaling == "linear":
        return theta / factor
    if scaling == "longrope":
        return theta / np.asarray(factors, dtype=np.float64)
    if scaling == "llama3":
        wavelength = 2 * np.pi / theta
        # With high = low (Llama 4) no wavelength lies between: every frequency is kept or divided.
        smooth = (context / wavelength - low) / (high - low) if high > low else np.ones_like(theta)
        mixed = (1 - smooth) * theta / factor + smooth * theta
        return np.where(wavelength < context / high, theta, np.where(wavelength > context / low, theta / factor, mixed))
    if scaling == "yarn":
        dims = 2 * width

        def turns_at(rotations: float) -> float:
            return dims * np.log(context / (rotations * 2 * np.pi)) / (2 * np.log(base))

        a, b = turns_at(fast), turns_at(slow)
        if not unrounded:
            a, b = np.floor(a), np.ceil(b)
        a, b = max(a, 0.0), min(b, dims - 1.0)
        ramp = np.clip((i - a) / (b - a if b != a else 0.001), 0, 1)
        keep = 1 - ramp
        return theta / factor * (1 - keep) + theta * keep
    raise ValueError(f"a rotation is scaled `linear`, `llama3` or `yarn`, not `{scaling}`")


def rotary_table(fill: str, base: float, ctx: int, width: int, run_ctx: int | None = None,
                 **scaling) -> np.ndarray:
    """A host table of §4: ``A·cos(p·θᵢ)`` (``cosines``) or ``A·sin(p·θᵢ)`` (``sines``) for p < ctx, i < w, with the
    frequencies of ``rotary_frequencies`` and ``A`` the ``attention`` factor (YaRN's, 1 unless given; transformers
    and llama.cpp both fold it into the cosines and sines). Computed in float64 and rounded once, so every consumer
    reads the same float32 table. ``run_ctx``: the context the model runs at (default ``ctx``), which decides
    LongRoPE's list (``longrope_factors``; its ``context`` is the original one)."""
    attention = float(scaling.pop("attention", 1.0))
    if scaling.get("scaling") == "longrope":
        short, long = scaling.pop("short"), scaling.pop("long")
        original = scaling.pop("context")
        scaling["factors"] = long if longrope_factors(run_ctx or ctx, original) == "long" else short
    p = np.arange(ctx, dtype=np.float64)[:, None]
    angle = p * rotary_frequencies(base, width, **scaling)[None, :]
    if fill == "cosines":
        return (attention * np.cos(angle)).astype(F32)
    if fill == "sines":
        return (attention * np.sin(angle)).astype(F32)
    raise ValueError(f"a table is filled with `cosines` or `sines`, not `{fill}`")


def _llama3_factors(base: float, width: int, scaling: str, factor: float, context: float, low: float,
                   high: float) -> np.ndarray:
    """Llama 3's divisors as llama.cpp's converter stores them (``rope_freqs``, float32): frequencies
    ``1/base^(2i/R)`` in float32, their wavelengths in float64, ``F`` past ``N/L``, 1 short of ``N/H``, between them
    ``1/((1−s)/F + s)``."""
    freqs = np.float32(1) / (np.float32(base) ** (np.arange(0, 2 * width, 2, dtype=F32) / np.float32(2 * width)))
    wavelength = 2 * np.pi / freqs.astype(np.float64)
    smooth = (context / wavelength - low) / (high - low) if high > low else np.ones_like(wavelength)
    mixed = 1 / ((1 - smooth) / factor + smooth)
    return np.where(wavelength < context / high, 1.0, np.where(wavelength > context / low, factor, mixed)).astype(F32)


def fill_table(fill, ctx: int, width: int, arithmetic: Arithmetic = EXACT, run_ctx: int | None = None) -> np.ndarray:
    """The table a fill describes (``model.program.Fill``, as the document and the bundle carry it: ``(kind, base)``
    or ``(kind, base, params)``), ``ctx × width`` — computed from the fill and the context the model runs at
    (``run_ctx``, default ``ctx``: LongRoPE's list, ``longrope_factors``) and nothing else. In llama.cpp's
    arithmetic, as ggml's rope computes its angles and their factor in float32 (``ggml.rope_tables``) for every
    scaling llama.cpp has: none, ``linear``, ``llama3`` (its divisors as the converter stores them, ``rope_freqs``),
    ``yarn`` (its ramp at the dims ``ggml_rope_yarn_corr_dims`` gives) and ``longrope`` (the chosen list as
    divisors); the ``attention`` factor the document states is the float32 the cosines and sines are multiplied by.
    A ramp left ``unrounded`` is transformers', not llama.cpp's: that table keeps the one above (float64, rounded
    once)."""
    if fill[0] not in ("cosines", "sines"):
        raise ValueError(f"a table is filled with `cosines` or `sines`, not `{fill[0]}`")
    params = dict(fill[2]) if len(fill) > 2 else {}
    if not arithmetic.ggml or params.get("unrounded"):
        return rotary_table(fill[0], fill[1], ctx, width, run_ctx, **params)
    kind, base = params.get("scaling"), fill[1]
    scale, factors, ramp = 1.0, None, None
    if kind in ("linear", "yarn"):
        scale = 1.0 / float(params["factor"])
    if kind == "llama3":
        factors = _llama3_factors(base, width, kind, params["factor"], params["context"], params["low"], params["high"])
    elif kind == "longrope":
        chosen = longrope_factors(run_ctx or ctx, params["context"])
        factors = params["long"] if chosen == "long" else params["short"]
    elif kind == "yarn":
        ramp = ggml.yarn_corr_dims(2 * width, int(params["context"]), base, params.get("fast", 32.0),
                                   params.get("slow", 1.0))
    cos, sin = ggml.rope_tables(base, ctx, width, freq_scale=scale, factors=factors,
                                mscale=float(params.get("attention", 1.0)), ramp=ramp)
    return cos if fill[0] == "cosines" else sin


# ---- rotation and attention ----------------------------------------------------------------------------------------


def rope(x: np.ndarray, pos: int, cos: np.ndarray, sin: np.ndarray, heads: int, rotating: int | None = None,
         after: int = 0, interleaved: bool = False, arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """Rotary position embedding (Su et al. 2021, RoFormer): within each head, the ``R`` dims starting at ``after``
    (0 unless DeepSeek's ``[nope | rope]`` heads) form ``R/2`` pairs ``(a_i, b_i)`` and row ``r`` (position ``pos +
    r``) turns pair ``i`` by its angle: ``(a·cos − b·sin, b·cos + a·sin)`` with the tables' column ``i``. The pairs
    are the halves, ``(i, i + R/2)`` (GPT-NeoX; transformers' Llama, Qwen, Gemma), or ``interleaved`` adjacent dims
    ``(2i, 2i+1)`` (GPT-J; DeepSeek, Llama 4, and llama.cpp's permuted Llama q/k). Every other dim passes through
    (partial rotary: Qwen3-Next, GLM). ``R`` defaults to the rest of the head. ``cos``/``sin`` are the host tables,
    ``ctx × R/2``. In llama.cpp's arithmetic each pair is turned as ggml's compiled ``rotate_pairs`` turns it
    (``ggml.rotate``)."""
    x = f32(x)
    rows, n = x.shape
    width = n // heads
    r = width - after if rotating is None else rotating
    if arithmetic.ggml:
        return ggml.rotate(x, f32(cos)[pos:pos + rows], f32(sin)[pos:pos + rows], heads, r, after, interleaved)
    half = r // 2
    h = x.reshape(rows, heads, width)
    c = f32(cos)[pos:pos + rows, :half][:, None, :]
    s = f32(sin)[pos:pos + rows, :half][:, None, :]
    turned = h[..., after:after + r]
    if interleaved:
        a, b = turned[..., 0::2], turned[..., 1::2]
        turned = np.stack([a * c - b * s, b * c + a * s], axis=-1).reshape(turned.shape)
    else:
        a, b = turned[..., :half], turned[..., half:]
        turned = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    out = np.concatenate([h[..., :after], turned, h[..., after + r:]], axis=-1)
    return out.reshape(rows, n).astype(F32)


def causal_mask(pos: int, rows: int, ctx: int, window: int | None = None, chunk: int | None = None) -> np.ndarray:
    """Which cached positions ``j < ctx`` row ``r`` (position ``i = pos + r``) may attend: ``j ≤ i``; with a window
    ``j > i − W`` (Mistral, Gemma 3 local layers); with chunks ``⌊j/C⌋ = ⌊i/C⌋`` (Llama 4 chunked attention)."""
    i = pos + np.arange(rows)[:, None]
    j = np.arange(ctx)[None, :]
    keep = j <= i
    if window is not None:
        keep &= j > i - window
    if chunk is not None:
        keep &= (j // chunk) == (i // chunk)
    return keep


def ring_write(ring: np.ndarray, pos: int, value: np.ndarray, ctx: int) -> np.ndarray:
    """``Set row P of S to V`` on a state held as a ring of ``L`` rows (LANGUAGE §8): position ``P + r`` is written
    to row ``(P + r) mod L``; positions past the context's ``ctx`` are refused, as a plain cache refuses them."""
    value = f32(value)
    rows = value.shape[0]
    if pos < 0 or pos + rows > ctx:
        raise ValueError(f"positions {pos}…{pos + rows - 1} are past the context's {ctx}")
    out = f32(ring).copy()
    out[(pos + np.arange(rows)) % out.shape[0]] = value
    return out


def ring_read(ring: np.ndarray, pos: int, rows: int, ctx: int, reach: int | float) -> np.ndarray:
    """What a ring of ``L`` rows holds, as attention of ``rows`` rows at ``pos`` reads it: positions ``0 … ctx−1``,
    each of ``P + rows − L … P + rows − 1`` from its row ``p mod L`` and zero elsewhere. Attention keeps no other
    position of the step (``reach`` back, its window or chunk) — the ring must hold ``reach + rows − 1`` positions,
    or all ``ctx`` — and weighs the positions it does not keep by exactly 0, so over this frame it computes what it
    computes over a plain cache of ``ctx`` rows, bit for bit (tests/numerics/test_rings.py)."""
    ring = f32(ring)
    length = ring.shape[0]
    if length < min(ctx, reach + rows - 1):
        if reach == np.inf:
            raise ValueError(f"it reads a ring of {length} rows but keeps every position before its rows (it has no "
                             f"window or chunk)")
        raise ValueError(f"a ring of {length} rows cannot hold the {reach + rows - 1} positions {rows} rows read "
                         f"{reach} back")
    out = np.zeros((ctx,) + ring.shape[1:], dtype=F32)
    held = np.arange(max(0, pos + rows - length), pos + rows)
    out[held] = ring[held % length]
    return out


#: How many attention scores (query heads × rows × cached positions) one block of query rows holds at once:
#: attention is computed a block of rows at a time, so its memory grows with the context alone, never with rows ×
#: context (a 60,000-token prefill held 4 × 60,000 × 60,000 scores, 53.6 GiB, at once).
ATTENTION_BLOCK_VALUES = 1 << 22

#: The bytes each score of a block costs while it is computed: the exact arithmetic holds a few float32 arrays of
#: ``heads × block × ctx`` at once (the scaled logits, the masked logits, the exponentials, the probabilities) and
#: the mask; ggml's holds only the masks (a byte a score). ``numerics.footprint`` counts a run's blocks by it.
ATTENTION_SCORE_BYTES = 24


def attention_block(heads: int, rows: int, ctx: int) -> int:
    """How many query rows attention (and latent attention) computes at once: as many as keep ``heads × rows ×
    ctx`` within ``ATTENTION_BLOCK_VALUES``, at least one. Every row's values are computed alone (the product rule:
    a row reads only its own row of the queries), so a block changes no bit of the result."""
    return max(1, min(rows, ATTENTION_BLOCK_VALUES // max(1, heads * ctx)))


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, pos: int, heads: int, sharing: int,
              window: int | None = None, chunks: int | None = None, scale: float | None = None,
              sinks: np.ndarray | None = None, softcap: float | None = None,
              arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """Causal grouped-query attention (Vaswani et al. 2017; GQA, Ainslie et al. 2023) of ``rows`` queries over a
    cache of ``ctx`` keys and values: for query head ``h`` reading KV head ``g = h // (H/G)``,
    ``pᵢⱼ = softmax_j(F · qᵢ·kⱼ)`` over the masked positions (``causal_mask``), output ``Σⱼ pᵢⱼ vⱼ``. ``F`` defaults
    to ``1/√(head width)``. Sinks (gpt-oss) add one learned logit per head to the softmax's denominator only — a
    place attention may go that returns no value. ``softcap`` C soft-caps the scaled logits, ``C·tanh(F·q·k/C)``,
    before the mask (Gemma 2). In llama.cpp's arithmetic, ggml's (``ggml.attention``), whose default ``F`` is
    ``1/sqrtf(width)`` in float32."""
    q, k, v = f32(q), f32(k), f32(v)
    rows = q.shape[0]
    ctx = k.shape[0]
    dk = q.shape[1] // heads
    block = attention_block(heads, rows, ctx)
    if block < rows:  # a block of rows at a time (``attention_block``); ggml picks its kernel by the step's rows
        step = arithmetic if arithmetic.rows is not None else replace(arithmetic, rows=rows)
        return np.concatenate([attention(q[r:r + block], k, v, pos + r, heads, sharing, window, chunks, scale, sinks,
                                         softcap, step) for r in range(0, rows, block)])
    if arithmetic.ggml:
        f = F32(1) / np.sqrt(F32(dk)) if scale is None else F32(scale)
        return ggml.attention(q, k, v, causal_mask(pos, rows, ctx, window, chunks), heads, sharing, f, sinks,
                              arithmetic.rows, softcap, path=arithmetic.path)
    dv = v.shape[1] // sharing
    f = F32(1 / np.sqrt(dk)) if scale is None else F32(scale)
    qh = q.reshape(rows, heads, dk).transpose(1, 0, 2)  # H × rows × dk
    kh = k.reshape(ctx, sharing, dk).transpose(1, 2, 0)  # G × dk × ctx: query head h reads KV head h // (H/G)
    vh = v.reshape(ctx, sharing, dv).transpose(1, 0, 2)  # G × ctx × dv
    # Both products are ``product``'s: a row's attention does not depend on how many rows are computed with it.
    logits = product(qh, kh, batched=heads) * f  # H × rows × ctx
    if softcap is not None:
        logits = soft_cap(logits, softcap)
    keep = causal_mask(pos, rows, ctx, window, chunks)[None]
    logits = np.where(keep, logits, -np.inf)
    top = np.max(logits, axis=-1, keepdims=True)
    if sinks is not None:
        sink = f32(sinks)[:, None, None]
        top = np.maximum(top, sink)
    e = np.where(keep, np.exp(logits - top), F32(0))
    denom = np.sum(e, axis=-1, keepdims=True)
    if sinks is not None:
        denom = denom + np.exp(sink - top)
    p = (e / denom).astype(F32)
    out = product(p, vh, batched=heads)  # H × rows × dv
    return out.transpose(1, 0, 2).reshape(rows, heads * dv).astype(F32)


def latent_attention(q: np.ndarray, latents: np.ndarray, rope_keys: np.ndarray, pos: int, a, b, heads: int,
                     nope: int, rope_dims: int, scale: float | None = None,
                     arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """Multi-head latent attention in its absorbed form (DeepSeek-V2, 2024, §2.1.2): the cache holds one latent
    ``cⱼ`` (``r`` wide) and one shared rotated key ``kᴿⱼ`` (``M`` wide) per position. Head ``h``'s query is split
    ``[q_nope (N), q_rope (M)]``; the key up-projection is absorbed into the query, ``q̃ = q_nope·A[h]`` (``r``
    wide), so ``logitᵢⱼ = F·(q̃·cⱼ + q_rope·kᴿⱼ)`` over causal ``j ≤ pos + i``, the attended latent
    ``ōᵢ = Σⱼ pᵢⱼ cⱼ`` is read back through the value up-projection ``ōᵢ·B[h]``. ``F`` defaults to ``1/√(N+M)``. In llama.cpp's arithmetic, as its absorbed graph computes it: ggml's
    attention (``ggml.attention``) of ``[q̃ | q_rope]`` over keys ``[cⱼ | kᴿⱼ]`` and values ``cⱼ``."""
    q, c, kr = f32(q), f32(latents), f32(rope_keys)
    rows = q.shape[0]
    block = attention_block(heads, rows, c.shape[0])
    if block < rows:  # as ``attention``: a block of rows at a time
        step = arithmetic if arithmetic.rows is not None else replace(arithmetic, rows=rows)
        return np.concatenate([latent_attention(q[r:r + block], c, kr, pos + r, a, b, heads, nope, rope_dims, scale,
                                                step) for r in range(0, rows, block)])
    f = F32(1 / np.sqrt(nope + rope_dims)) if scale is None else F32(scale)
    qh = q.reshape(rows, heads, nope + rope_dims).transpose(1, 0, 2)  # H × rows × (N+M)
    q_nope, q_rope = qh[..., :nope], qh[..., nope:]
    # Every product is ``product``'s, as in ``attention``: a row computes alike in any tile. A and B are weights
    # (one matrix per head; float32 or Q8_0 planes), so what enters them follows the arithmetic.
    q_lat = _per_matrix(q_nope, a, arithmetic)  # H × rows × r
    if arithmetic.ggml:
        f = F32(1) / np.sqrt(F32(nope + rope_dims)) if scale is None else F32(scale)  # 1/sqrtf(N+M), as kq_scale
        # llama.cpp's absorbed MLA (deepseek2.cpp): attention of [q̃ | q_rope] over one key/value head, keys
        # [c | kᴿ] and values c — one dot product over r + M, as its `kq` sums it — then the value up-projection.
        qq = np.concatenate([q_lat, q_rope], axis=-1).transpose(1, 0, 2).reshape(rows, -1)
        o = ggml.attention(qq, np.concatenate([c, kr], axis=-1), c, causal_mask(pos, rows, c.shape[0]), heads, 1, f,
                           None, arithmetic.rows, path=arithmetic.path)
        out = _per_matrix(o.reshape(rows, heads, -1).transpose(1, 0, 2), b, arithmetic)  # H × rows × V
        return out.transpose(1, 0, 2).reshape(rows, -1).astype(F32)
    logits = (product(q_lat, c.T) + product(q_rope, kr.T)) * f  # H × rows × ctx
    keep = causal_mask(pos, rows, c.shape[0])[None]
    p = softmax(np.where(keep, logits, -np.inf))
    o_lat = product(p, c)  # H × rows × r
    out = _per_matrix(o_lat, b, arithmetic)  # H × rows × V
    return out.transpose(1, 0, 2).reshape(rows, -1).astype(F32)


def _per_matrix(x: np.ndarray, w, arithmetic: Arithmetic) -> np.ndarray:
    """``x[h] · w[h]`` for each leading index ``h`` (a weight with one matrix per head: MLA's A and B)."""
    return np.stack([matmul(x[h], w[h], arithmetic) for h in range(x.shape[0])])


# ---- recurrences ---------------------------------------------------------------------------------------------------


def gated_delta(q: np.ndarray, k: np.ndarray, v: np.ndarray, state: np.ndarray, decay: np.ndarray, beta: np.ndarray,
                heads: int, sharing: int | None = None, in_turn: bool = False, scale: float | None = None,
                arithmetic: Arithmetic = EXACT) -> tuple[np.ndarray, np.ndarray]:
    """The Gated DeltaNet recurrence (Yang, Kautz & Hatamizadeh 2024, eq. 10; Qwen3-Next's linear attention), row
    by row in order and for each value head ``h`` reading key head ``g = h // (H/G)`` — or ``g = h mod G`` when the
    value heads take the key heads ``in_turn`` (llama.cpp's converter stores Qwen3.5's value heads so):
    ``S ← a·S``; ``S ← S + b·k (v − Sᵀk)ᵀ``; ``o = Sᵀq``, times ``scale`` when given — with ``S`` the head's
    ``dk × dv`` memory. Returns the ``rows × H·dv`` outputs and the updated state (the step carries it). In
    llama.cpp's arithmetic, as its fused ``ggml_gated_delta_net`` computes it (``ggml.gated_delta``)."""
    q, k, v, s = f32(q), f32(k), f32(v), f32(state).copy()
    a, bt = f32(decay), f32(beta)
    rows = q.shape[0]
    groups = heads if sharing is None else sharing
    dk, dv = s.shape[1], s.shape[2]
    per = heads // groups
    qh = q.reshape(rows, groups, dk)
    kh = k.reshape(rows, groups, dk)
    vh = v.reshape(rows, heads, dv)
    kv_of = np.arange(heads) % groups if in_turn else np.arange(heads) // per
    if arithmetic.ggml:
        out, s = ggml.gated_delta(qh, kh, vh, s, a, bt, kv_of, 1.0 if scale is None else scale,
                                  path=arithmetic.path)
        return out.reshape(rows, heads * dv), s
    out = np.zeros((rows, heads, dv), dtype=F32)
    for t in range(rows):
        kt, qt = kh[t, kv_of], qh[t, kv_of]  # H × dk
        s = s * a[t][:, None, None]
        err = vh[t] - np.einsum("hkv,hk->hv", s, kt)  # H × dv
        s = s + bt[t][:, None, None] * kt[:, :, None] * err[:, None, :]
        out[t] = np.einsum("hkv,hk->hv", s, qt)
    if scale is not None:
        out = out * F32(scale)
    return out.reshape(rows, heads * dv).astype(F32), s.astype(F32)


def short_convolution(x: np.ndarray, state: np.ndarray, w: np.ndarray,
                      arithmetic: Arithmetic = EXACT) -> tuple[np.ndarray, np.ndarray]:
    """Causal depthwise convolution over the last ``k`` rows (H3/Mamba's short conv; Gated DeltaNet, Qwen3-Next):
    with ``z = [S; X]`` (the ``k−1`` rows before the step, then this step's), ``yᵣ = Σᵢ W[i] ⊙ z[r+i]`` —
    ``W[k−1]`` weighs the current row. Returns ``y`` and the new state, ``z``'s last ``k−1`` rows. In llama.cpp's
    arithmetic, as its ``ggml_ssm_conv`` sums (``ggml.ssm_conv``: some terms fused, by the path)."""
    x, s, w = f32(x), f32(state), f32(w)
    kk = w.shape[0]
    z = np.concatenate([s, x], axis=0)
    rows = x.shape[0]
    if arithmetic.ggml:
        y = ggml.ssm_conv(z, w, path=arithmetic.path)
    else:
        y = np.zeros_like(x)
        for i in range(kk):
            y += w[i] * z[i:i + rows]
    return y.astype(F32), z[z.shape[0] - (kk - 1):].copy() if kk > 1 else z[:0].copy()


# ---- mixture of experts --------------------------------------------------------------------------------------------


def swiglu(x: np.ndarray, g, u, d, bg=None, bu=None, bd=None, clamp: float | None = None,
           arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """One SwiGLU expert (Shazeer 2020): ``(silu(X·G) ⊙ X·U)·D``; with biases ``(…)·D + BD`` over ``X·G + BG``,
    ``X·U + BU``; with ``clamp`` L gpt-oss's activation ``(clamp(u, ±L) + 1) · g·σ(1.702·g)``, ``g = min(g, L)``."""
    gx = matmul(x, g, arithmetic) if bg is None else matmul(x, g, arithmetic) + f32(bg)
    ux = matmul(x, u, arithmetic) if bu is None else matmul(x, u, arithmetic) + f32(bu)
    if clamp is None:
        h = silu(gx, arithmetic) * ux
    else:
        lim = F32(clamp)
        gx = np.minimum(gx, lim)
        ux = np.clip(ux, -lim, lim)
        h = (ux + 1) * gx * sigmoid(F32(1.702) * gx, arithmetic)
    out = matmul(h, d, arithmetic)
    return out if bd is None else (out + f32(bd)).astype(F32)


def _column(w, n: int):
    """A gate stored as a vector, read as the ``n × 1`` matrix it multiplies by (Q8_0 planes are already one)."""
    return w if getattr(w, "ndim", 1) == 2 else f32(w).reshape(n, 1)


def route(logits: np.ndarray, top: int, scored_by: str = "softmax", normalized: bool = False,
          selection_bias: np.ndarray | None = None, groups: tuple[int, int] | None = None,
          arithmetic: Arithmetic = EXACT) -> tuple[np.ndarray, np.ndarray]:
    """Which experts each row goes to, and with what weight. Scores are ``softmax`` over all experts (Switch,
    Mixtral, Qwen-MoE) or ``sigmoid`` per expert (DeepSeek-V3, Llama 4). Selection ranks ``score + bias``
    (DeepSeek-V3's auxiliary-loss-free bias — choosing only, never weighting); with ``groups (N, M)`` experts form N
    groups, a group's rank being the sum of its two best biased scores (its best alone when it holds one expert), and
    only the M best groups are eligible (DeepSeek-V3 §2.1.2). The weights are the unbiased scores of the chosen K,
    divided by their sum when ``normalized`` (in llama.cpp's arithmetic as ``build_moe_ffn`` does: ``ggml.soft_max``
    or ggml's sigmoid, the sum ``ggml.weights_sum``). Returns (indices ``rows × K`` best first, weights ``rows × K``);
    ties go to the lower expert index."""
    logits = f32(logits)
    scores = softmax(logits, arithmetic=arithmetic) if scored_by == "softmax" else sigmoid(logits, arithmetic)
    choose = scores if selection_bias is None else scores + f32(selection_bias)
    rows, n = scores.shape
    if groups is not None:
        ng, keep = groups
        per = n // ng
        gs = np.sort(choose.reshape(rows, ng, per), axis=-1)[..., ::-1]
        rank = gs[..., :2].sum(axis=-1) if per >= 2 else gs[..., 0]
        best = np.argsort(-rank, axis=-1, kind="stable")[:, :keep]
        eligible = np.zeros((rows, ng), dtype=bool)
        np.put_along_axis(eligible, best, True, axis=-1)
        choose = np.where(np.repeat(eligible, per, axis=-1), choose, -np.inf)
    idx = np.argsort(-choose, axis=-1, kind="stable")[:, :top]
    w = np.take_along_axis(scores, idx, axis=-1)
    if normalized:
        w = ggml.weights_sum(w) if arithmetic.ggml else w / np.sum(w, axis=-1, keepdims=True)
    return idx, w.astype(F32)


def experts(x: np.ndarray, router, top: int, g, u, d, *,
            scored_by: str = "softmax", normalized: bool = False, routed_scale: float | None = None,
            selection_bias=None, groups: tuple[int, int] | None = None, router_bias=None,
            expert_biases: tuple | None = None, clamp: float | None = None, weighting_inputs: bool = False,
            shared: tuple | None = None, shared_gate=None, quotient_gate: bool = False,
            arithmetic: Arithmetic = EXACT) -> np.ndarray:
    """A mixture of SwiGLU experts (Shazeer et al. 2017; the options of §5): router logits ``X·R (+ router bias,
    gpt-oss)`` → ``route`` → for each row the weighted sum of its chosen experts' outputs — the weight multiplying
    the expert's output, or its input when ``weighting_inputs`` (Llama 4) — times ``routed_scale`` (DeepSeek's
    routed scaling factor); plus an always-on shared expert, gated by ``σ(X·S)`` when ``shared_gate`` (Qwen2-MoE,
    Qwen3-Next) — that σ(g) computed as ``silu(g)/g``, a float32 quotient, when ``quotient_gate`` (llama.cpp's
    Qwen2-MoE graph: ``ggml_div(ggml_silu(g), g)``; 0/0 where g is 0, as there). ``expert_biases`` is (gate, up, down), any of them ``None`` for none — a tensor-parallel chip
    whose partial must not add the down bias again.

    In llama.cpp's arithmetic, as ``build_moe_ffn`` computes: the routed scale multiplies the weights, an expert's
    products are ``ggml_mul_mat_id``'s (one row at a time: ``ggml_vec_dot``; a K-quant bank's by the tiled kernel for
    an expert 8 or more rows are routed to: ``Arithmetic.routed``, counted over the rows given — a row tile of a
    tiled program counts its own, where ggml counts the step's), and the K chosen outputs are added in the order of
    their rank (``ggml_add`` of the views), best first."""
    x = f32(x)
    logits = matmul(x, router, arithmetic)
    if router_bias is not None:
        logits = logits + f32(router_bias)
    idx, w = route(logits, top, scored_by, normalized, selection_bias, groups, arithmetic)
    if arithmetic.ggml:
        if routed_scale is not None:
            w, routed_scale = w * F32(routed_scale), None
        ranks = [idx[:, k:k + 1] for k in range(idx.shape[1])]
    else:
        ranks = [idx]
    out = None
    bg = bu = bd = None
    for rank, chosen in enumerate(ranks):
        part = np.zeros_like(x)
        for e in np.unique(chosen):
            each = replace(arithmetic, rows=1, routed=int(np.count_nonzero(idx == e))) if arithmetic.ggml \
                else arithmetic
            sel_rows, sel_k = np.nonzero(chosen == e)
            we = w[sel_rows, sel_k + (rank if arithmetic.ggml else 0)][:, None]
            xe = x[sel_rows]
            if expert_biases is not None:
                bg, bu, bd = (None if b is None else f32(b)[e] for b in expert_biases)
            if weighting_inputs:
                ye = swiglu(xe * we, g[e], u[e], d[e], bg, bu, bd, clamp, each)
            else:
                ye = swiglu(xe, g[e], u[e], d[e], bg, bu, bd, clamp, each) * we
            np.add.at(part, sel_rows, ye)
        out = part if out is None else out + part
    if routed_scale is not None:
        out = out * F32(routed_scale)
    if shared is not None:
        s = swiglu(x, *shared, arithmetic=arithmetic)
        if shared_gate is not None:
            g = matmul(x, _column(shared_gate, x.shape[1]), arithmetic)
            with np.errstate(invalid="ignore", divide="ignore"):
                s = s * (f32(silu(g, arithmetic)) / f32(g) if quotient_gate else sigmoid(g, arithmetic))
        out = out + s
    return out.astype(F32)
