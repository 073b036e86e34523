"""llama.cpp's CPU products over the types a checkpoint keeps in blocks — the K-quants Q2_K … Q6_K, the legacy
quants Q4_0, Q4_1, Q5_0, Q5_1, MXFP4 and BF16 — bit for bit on the AVX2 path and on the AVX-512 path (BF16 there
with AVX512_BF16 or without): ``--arithmetic llama.cpp`` for a weight kept in its blocks (``blocks.Blocks``), one
matrix or an expert's of a bank.

What ggml computes (ggml-cpu.c ``type_traits_cpu``; arch/x86/quants.c; llamafile/sgemm.cpp). Each type has a
``vec_dot_type`` the activations are converted to, a row at a time, before the product:

- K-quants → Q8_K (``quantize_row_q8_K``, the reference C: per block of 256, the value of largest magnitude ``max``,
  ``iscale = −127 / max``, ``q = nearest_int(iscale·x)`` capped at 127, ``d = 1 / iscale``, the sums of each 16
  ``q``). No tinyBLAS path takes a K-quant; below 8 rows computed together each element is the type's ``vec_dot``. Per
  block of 256: each 8-bit product of a weight value (Q2_K's 2 bits, Q3_K's 3 less 4, Q4_K's nibble, Q5_K's 5 bits,
  Q6_K's 6 bits) with its activation, times its sub-block's scale, summed into eight int32 lanes — value ``p`` into
  lane ``(p mod 32) // 4`` — exactly (Q6_K's lanes then lose ``32·(bsums·scales)`` of sub-blocks ``2l`` and ``2l+1``);
  ``d = y.d · fp16(x.d)`` and ``acc[l] ← fma(d, lane l, acc[l])``; Q4_K's mins in four float lanes ``acc_m[t] ←
  fma(−y.d·fp16(x.dmin), m₂ₜ·S₂ₜ + m₂ₜ₊₁·S₂ₜ₊₁, acc_m[t])`` added at the end as ``(m₀+m₂)+(m₁+m₃)``, Q5_K's in one
  float, Q2_K's into ``acc`` itself before the block's values (lane ``l`` ``m₂ₗ·S₂ₗ + m₂ₗ₊₁·S₂ₗ₊₁``); the result
  ``hsum_float_8(acc)`` — ``((a₀+a₄)+(a₂+a₆))+((a₁+a₅)+(a₃+a₇))`` — plus the mins. From 8 rows on, ggml's tiled kernel
  takes the product instead (ggml-cpu/tiled, ``ggml_tiled_min_batch``; computed here by ``ggml_tiled``), a different
  sum: per block, the whole integer ``s₁ = Σ scale·Σ w·q`` (Q6_K's ``w`` less 32) and
  ``s₂ = Σ min·S`` exactly, ``r = fma(−fp16(x.dmin), s₂, fp16(x.d)·s₁)`` (no mins for Q3_K, Q6_K), and ``acc ←
  fma(r, y.d, acc)`` from 0 in block order — the cause of the last-bit differences a prefill of 8 tokens or more
  showed.
- Q4_0, Q5_0 → Q8_0 (``quantize_row_q8_0``, ``ggml.quantize_q8_0``); Q4_1, Q5_1 → Q8_1 (the same ``q`` and ``d``,
  and ``s = fp16(d·Σq)`` per block). Per block of 32: eight int32 lanes, lane ``l`` the products of values
  ``4l … 4l+3`` (exact), ``acc[l] ← fma(d_w·d_x, lane l, acc[l])``; the ``_1`` types add their minimum as
  ``summs ← fma(m_w, s_x, summs)``; the result ``hsum_float_8(acc) (+ summs)``. tinyBLAS's Q4_0/Q5_0 kernel
  (several rows) computes each element alike.
- MXFP4 → Q8_0 (``ggml_vec_dot_mxfp4_q8_0``; tinyBLAS takes no MXFP4). Per block of 32: the values ``kvalues_mxfp4``
  (e2m1 doubled) of the nibbles, eight int32 lanes as the legacy quants' (exact), the scale ``fp16(d_x) ·
  e8m0_half(e)``; blocks in pairs, the even one's lanes ``acc[l] ← fma(scale, lane l, acc[l])``, the odd one's
  likewise into a second ``acc′``; the result ``hsum_float_8(acc + acc′)``, and an odd last block's 32 products
  summed exactly and added as ``fma(scale, Σ, ·)`` (the C's ``sumf += d·Σ`` as GCC contracts it by default; the
  product is exact in float32 while ``|Σ| < 2¹³``, so the contraction shows only in rare last bits, which no test has
  seen). AVX-512 builds compile the same ``__AVX2__`` branch (there is no wider one).
- BF16 → bf16 (``ggml_compute_fp32_to_bf16``, scalar on every x86 path: nearest, ties to even, a NaN kept quiet).
  AVX2: with two or more rows, tinyBLAS<8> (one fma accumulator of 8 lanes, ``hsum``: ``ggml._tiny``); with one,
  ``ggml_vec_dot_bf16``: four 8-lane fma accumulators over each 32 values, ``(c₀+c₂)+(c₁+c₃)``, ``hsum``, the tail
  in float64. AVX512_BF16 (vec.cpp's ``__AVX512BF16__`` branch; sgemm.cpp's ``tinyBLAS<32, __m512, __m512bh>``,
  whose ``madd`` is ``_mm512_dpbf16_ps``): each ``dpbf16`` lane takes a pair of bf16 values, ``t = acc + x₂ₗ₊₁·y₂ₗ₊₁``
  then ``t + x₂ₗ·y₂ₗ`` — the odd product first, each exact and added with one rounding to nearest even, subnormal
  inputs read as zero and each result flushed to zero where subnormal (``_dp``; all of it held to the build's own
  ``ggml_vec_dot_bf16`` on rows made to tell them apart). With two or more rows, tinyBLAS (``k`` a multiple of 32, as
  it loads 32 bf16 a step): one 16-lane accumulator ``dpbf16``-ed each 32 values, ``_mm512_reduce_add_ps``; with
  one, ``ggml_vec_dot_bf16``: two such accumulators over each 64 values (the first 32, the next 32), each reduced
  and added in float64, the tail in float64 as AVX2's. AVX-512 without AVX512_BF16 (vec.cpp's ``__AVX512F__``
  branch; sgemm.cpp's ``tinyBLAS<16, __m512, __m512>``, its ``load`` each 16 bf16 widened to float32 and its
  ``madd`` ``_mm512_fmadd_ps``): float code, no flushing. With two or more rows, tinyBLAS (``k`` a multiple of 16):
  one 16-lane fma accumulator, ``_mm512_reduce_add_ps`` (``ggml._tiny``); with one, ``ggml_vec_dot_bf16``: two
  16-lane accumulators over each 32 values (the first 16, the next 16) by fma — the C writes a multiply and an add,
  which GCC contracts (held to a build of it, where a multiply and an add are not the build's) — each reduced and
  added in float64, the tail in float64 as AVX2's.

A bank of experts (ggml's ``mul_mat_id``, ``ggml_compute_forward_mul_mat_id``): the activations are converted row by
row as above, the step's rows (token and slot) grouped by the expert they are routed to, and each expert's computed
alone — a K-quant's by the tiled kernel when 8 rows or more are routed to it (``ggml_compute_forward_mul_mat_id_tiled``
decides per expert, with the same per-element sum as ``mul_mat``'s), every other element (fewer rows, or any other
type) by the type's dot, one row at a time: ``mul_mat_id`` calls no tinyBLAS, and the repacked layouts are an extra
buffer type the oracle turns off. ``mul_mat(…, routed=n)`` is that expert's product (``Arithmetic.routed``).

Held to llama.cpp's own product tensors, and a file's logits to llama.cpp's, bit for bit at d 1024 and in MoE files
(gpt-oss MXFP4_MOE; a Qwen3-MoE made Q4_K_M, Q5_K_M, Q3_K_M and Q2_K — banks of every K-quant — some experts routed 8
rows or more and some fewer) (``tests/oracle/test_quants.py``). The K-quant and legacy dots are AVX2 code on either
x86 path (an AVX-512 build compiles the same ``__AVX2__`` branch; its VNNI sums are integer and exact; the tiled
kernel's VNNI variant writes ``r·y.d`` as a multiply and an add, which GCC contracts to the AVX2 variant's fma — held
on an AVX-512 VNNI host, an AMD EPYC: the tests above and a 1B-shaped Q4_K_M's 40-token prefill bit for bit); BF16 is
each path's own — AVX2's, AVX-512's with AVX512_BF16 and without (``cpu.KernelPath.bf16``) — held on this project's
AMD EPYC host to its native AVX-512 build (with AVX512_BF16) and to an AVX2 build and an AVX-512 build without
AVX512_BF16 (``tests/oracle/test_kernel_paths.py``). ``computes(type, path)`` says which products are computed so
(every type above, on every x86 path); one it did not would be the float product of its exact dequantisation, and
``run`` would say so (``not_computed``).
"""

from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir

from .blocks import _HALF, _MXFP4, Blocks, _e8m0_half
from .cpu import AVX2, KernelPath
from .ggml_tiled import _k_scales, _k_values, _splat, interleaved, tiled_kernel
from .jit import INT64, array, cgutils, claim, compiled, intrinsic, kernel, on_threads, threads, types
from .q8 import Planes
from .ggml import (_AVX2, _bits, _from_bits, _halves, _hsum, _hsum8, _hsum8_ir, _target_features, _tiny, quantize_q8_0,
                   tiny_blas)
from .product import TASK_COLUMNS, _address, _fma, _load, prefetch, task_span

F32 = np.float32
QK_K = 256
#: The K-quants whose products this module computes as llama.cpp does, and the code of each in ``_dot``.
DOTS = {"Q2_K": 4, "Q3_K": 5, "Q4_K": 6, "Q5_K": 7, "Q6_K": 8}
#: From this many rows computed together, ggml's tiled K-quant kernel takes the product (``ggml_tiled_min_batch``).
TILED_ROWS = 8
#: The legacy quants, and the code of each in ``_legacy_block`` (``blocks``' codes).
LEGACY = {"Q4_0": 0, "Q4_1": 1, "Q5_0": 2, "Q5_1": 3}
#: MXFP4's code in ``_legacy_block``: its dot has the legacy quants' shape over Q8_0 activations.
MXFP4 = 9


def computes(type_name: str, path: KernelPath = AVX2) -> bool:
    """Whether a product over a weight stored ``type_name`` — one matrix, or an expert's of a bank (``mul_mat_id``) —
    is computed here as llama.cpp's CPU backend computes it on ``path``: the K-quants, legacy quants and MXFP4 on
    either x86 path (their dots are AVX2 code on both, their integer sums exact), and BF16 on each x86 path in that
    path's own code — AVX2's, AVX-512's with AVX512_BF16 (``dpbf16``) and without (16-lane float code)."""
    return type_name in DOTS or type_name in LEGACY or type_name in ("MXFP4", "BF16")


def stored_types(values) -> set[str]:
    """The types of the weights among ``values`` kept as stored (``Q8_0`` for ``q8.Planes``, a ``Blocks``' own)."""
    return {"Q8_0" if isinstance(v, Planes) else v.type for v in values if isinstance(v, (Blocks, Planes))}


def not_computed(values, path: KernelPath = AVX2) -> list[str]:
    """The types of the weights among ``values`` kept in blocks (matrices or banks of experts) whose products are not
    llama.cpp's here (sorted): what a run in llama.cpp's arithmetic says it computes otherwise."""
    return sorted({v.type for v in values if isinstance(v, Blocks) and not computes(v.type, path)})


# ---- Q8_K activations (quantize_row_q8_K_ref) ---------------------------------------------------------------------


@kernel
def _nearest_int(v):
    """``nearest_int``: ``v + 1.5·2²³`` in float32, its low mantissa bits the integer (half to even) — the bits read
    in place (``_bits``), not through an array made a value."""
    return (_bits(v + F32(12582912.0)) & 0x007FFFFF) - 0x00400000


def _quantize_q8_k_rows(x, q, d, bsums, taken):
    """One thread's share of ``_quantize_q8_k``: the next row while any is left."""
    rows, k = x.shape
    r = claim(taken)
    while r < rows:
        for i in range(k // QK_K):
            o = i * QK_K
            top = F32(0)
            amax = F32(0)
            for j in range(QK_K):
                ax = abs(x[r, o + j])
                if ax > amax:
                    amax = ax
                    top = x[r, o + j]
            if amax == 0:
                d[r, i] = 0
                for j in range(QK_K):
                    q[r, o + j] = 0
                for j in range(16):
                    bsums[r, 16 * i + j] = 0
                continue
            iscale = F32(-127.0) / top
            for j in range(QK_K):
                v = _nearest_int(iscale * x[r, o + j])
                q[r, o + j] = min(127, v)
            for j in range(16):
                s = 0
                for t in range(16):
                    s += q[r, o + 16 * j + t]
                bsums[r, 16 * i + j] = s
            d[r, i] = F32(1.0) / iscale
        r = claim(taken)


_quantize_q8_k_threads = on_threads(_quantize_q8_k_rows)


@kernel
def _quantize_q8_k(x, q, d, bsums, nthreads):
    """``quantize_q8_k``'s rows on ``nthreads`` threads, a row a task."""
    _quantize_q8_k_threads(nthreads, (x, q, d, bsums))


def quantize_q8_k(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``x`` (``rows × k``, ``k`` a multiple of 256) as ``quantize_row_q8_K`` quantises them: ``q`` (int8),
    ``d`` (float32 per block of 256), ``bsums`` (the sum of each 16 ``q``)."""
    x = np.ascontiguousarray(x, dtype=F32)
    rows, k = x.shape
    if k % QK_K:
        raise ValueError(f"Q8_K activations need the reduction a multiple of {QK_K}, not {k}")
    q = np.empty((rows, k), dtype=np.int8)
    d = np.empty((rows, k // QK_K), dtype=F32)
    bsums = np.empty((rows, k // 16), dtype=np.int32)
    if x.size:
        _quantize_q8_k(x, q, d, bsums, threads())
    return q, d, bsums


# ---- Q2_K and Q3_K (ggml_vec_dot_q2_K_q8_K, _q3_K_; AVX2) -----------------------------------------------------------


@kernel
def _block_bytes(code):
    """A Q2_K (code 4) or Q3_K (5) block's bytes."""
    return 84 if code == 4 else 110


_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_F32 = ir.FloatType()
_V16 = ir.VectorType(_I32, 16)
_V8 = ir.VectorType(_I32, 8)
_H32 = ir.VectorType(ir.IntType(16), 32)
_B32 = ir.VectorType(ir.IntType(8), 32)


def _widened_pairs(builder, w, x):
    """``w·x`` summed in adjacent pairs in int32 (``w`` an int16 ``scale·q``, whose product with ``x`` does not fit
    int16)."""
    v32 = ir.VectorType(_I32, 32)
    p = builder.mul(builder.sext(w, v32), builder.sext(x, v32))
    return builder.add(*(builder.shuffle_vector(p, p, ir.Constant(_V16, list(range(k, 32, 2)))) for k in (0, 1)))


def _store_lanes(context, builder, lty, lanes, acc, index_type):
    """Store ``lanes[l] = acc[2l] + acc[2l+1]`` (``acc``: 16 pair sums, pair ``k`` of values ``4l…4l+3`` at
    ``2l, 2l+1``)."""
    out = builder.add(builder.shuffle_vector(acc, acc, ir.Constant(_V8, list(range(0, 16, 2)))),
                      builder.shuffle_vector(acc, acc, ir.Constant(_V8, list(range(1, 16, 2)))))
    at = _address(context, builder, lty, lanes, (ir.Constant(index_type, 0),), 4)
    builder.store(out, builder.inttoptr(at, _V8.as_pointer()), align=1)


@intrinsic
def _lane_sums(typingctx, wv, qx, o, lanes):
    """``lanes[l] = Σ wv[o+p]·qx[o+p]`` over the block's 256 values ``p`` with ``(p mod 32) // 4 = l``, in int32 and
    exact (``|wv| < 2¹⁴``, ``|qx| ≤ 127``: a lane's 32 products stay far below 2³¹): the 32 positions of each run of
    32 values summed as vectors across the block's 8 runs, then each lane's 4 — vector code the loop's scalar form did
    not become."""

    def codegen(context, builder, signature, args):
        wv, qx, o, lanes = args
        wty, xty, _, lty = signature.args
        acc = ir.Constant(_V16, [0] * 16)
        for c in range(QK_K // 32):  # products summed in adjacent pairs (vpmaddwd's form), pairs across the runs
            start = builder.add(o, ir.Constant(o.type, 32 * c))
            w = _load(builder, _address(context, builder, wty, wv, (start,), 2), 0, _H32)
            x = builder.sext(_load(builder, _address(context, builder, xty, qx, (start,), 1), 0, _B32), _H32)
            acc = builder.add(acc, _widened_pairs(builder, w, x))
        _store_lanes(context, builder, lty, lanes, acc, o.type)
        return context.get_dummy_value()

    return types.void(wv, qx, o, lanes), codegen


@kernel
def _values(code, w, wv):
    """Each value of a Q2_K or Q3_K weight row ``w`` (its blocks' bytes) as the integer its dot multiplies the
    activation by: ``wv[p] = scale·q`` — the sub-block's integer scale times the value's quant (Q2_K's unsigned, its
    mins taken with the activation's block sums in ``_dot``; Q3_K's with its high bit's −4, its scale less 32). Made
    once a row, read by every activation row: ggml's integer sums are exact, so taking them from here in any order
    gives its integers."""
    nbytes = _block_bytes(code)
    for i in range(wv.shape[0] // QK_K):
        at = i * nbytes
        o = i * QK_K
        # Q2_K: scales[16], qs[64], d, dmin; Q3_K: hmask[32], qs[64], scales[12], d
        for p in range(QK_K):  # value p: byte 32j + t of qs, bits 2m (p = 128j + 32m + t); sub-block p // 16
            j = p // 128
            m = (p % 128) // 32
            t = p % 32
            sb = p // 16
            if code == 4:
                v = np.int32((w[at + 16 + 32 * j + t] >> (2 * m)) & 3)
                sc = np.int32(w[at + sb] & 0xF)
            else:
                high_bit = (w[at + t] >> (4 * j + m)) & 1
                v = np.int32((w[at + 32 + 32 * j + t] >> (2 * m)) & 3) - (0 if high_bit else 4)
                low = (w[at + 96 + sb % 8] >> (4 * (sb // 8))) & 0xF
                high = (w[at + 104 + sb % 4] >> (2 * (sb // 4))) & 3
                sc = np.int32(low | (high << 4)) - 32
            wv[o + p] = np.int16(sc * v)


@kernel
def _dot(code, w, wv, qx, dx, bs, lanes, acc):
    """One Q2_K or Q3_K weight row ``w`` (its blocks' bytes; ``wv`` its ``_values``) with one Q8_K activation row
    (``qx``, ``dx``, ``bs``): the type's ``vec_dot`` (its tiled kernel's element, from 8 rows: ``ggml_tiled``). A
    block's integer sums go to lane ``(p mod 32) // 4`` of value ``p``, as every K-quant ``vec_dot`` on AVX2 sums
    them (``_lane_sums``)."""
    acc[:] = 0
    nbytes = _block_bytes(code)
    for i in range(qx.shape[0] // QK_K):
        at = i * nbytes
        o = i * QK_K
        _lane_sums(wv, qx, o, lanes)
        dw = _HALF[np.int64(w[at + 80]) | (np.int64(w[at + 81]) << 8)] if code == 4 else \
            _HALF[np.int64(w[at + 108]) | (np.int64(w[at + 109]) << 8)]
        d = dx[i] * dw
        if code == 4:  # the mins first: lane l ← m₂ₗ·S₂ₗ + m₂ₗ₊₁·S₂ₗ₊₁ (madd), one fma a lane
            dm = _HALF[np.int64(w[at + 82]) | (np.int64(w[at + 83]) << 8)]
            dmin = -dx[i] * dm
            for l in range(8):
                mins = np.int32(w[at + 2 * l] >> 4) * bs[16 * i + 2 * l] \
                    + np.int32(w[at + 2 * l + 1] >> 4) * bs[16 * i + 2 * l + 1]
                acc[l] = _fma(dmin, F32(mins), acc[l])
        for l in range(8):
            acc[l] = _fma(d, F32(lanes[l]), acc[l])
    return _hsum8(acc)


# ---- Q4_K, Q5_K and Q6_K: each element whole in vector code -------------------------------------------------------------

_F4 = ir.VectorType(ir.FloatType(), 4)
_F8 = ir.VectorType(ir.FloatType(), 8)
_H16 = ir.VectorType(ir.IntType(16), 16)
_V4 = ir.VectorType(_I32, 4)


def _scaled_quads(builder, u, x, scale):
    """``lane l = scale_l · Σ_{j<4} u[4l+j]·x[4l+j]`` (``<8 x i32>``) of 32 unsigned weight values ``u`` (at most
    63) and 32 activations ``x`` (int8, ``|x| ≤ 127``), ``scale`` the ``<16 x i16>`` whose pair ``2l, 2l+1`` holds
    lane ``l``'s scale — ggml's AVX2 K-quant dots' own form: ``vpmaddubsw`` (pairs, at most 2·63·127: never
    saturating), then ``vpmaddwd`` by the scales (exact); without AVX2 the same integers written generically."""
    if _AVX2:
        pairs = builder.module.declare_intrinsic("llvm.x86.avx2.pmadd.ub.sw", (), ir.FunctionType(_H16, [_B32] * 2))
        words = builder.module.declare_intrinsic("llvm.x86.avx2.pmadd.wd", (), ir.FunctionType(_V8, [_H16] * 2))
        return builder.call(words, [builder.call(pairs, [u, x]), scale])
    v32 = ir.VectorType(_I32, 32)
    p = builder.mul(builder.zext(u, v32), builder.sext(x, v32))
    quads = [builder.shuffle_vector(p, p, ir.Constant(_V8, list(range(j, 32, 4)))) for j in range(4)]
    each = builder.sext(builder.shuffle_vector(scale, scale, ir.Constant(_V8, list(range(0, 16, 2)))), _V8)
    return builder.mul(builder.add(builder.add(quads[0], quads[1]), builder.add(quads[2], quads[3])), each)


#: Whether the target has AVX-512 BW, whose byte and word products (``vpmaddubsw``, ``vpmaddwd``) take 64 bytes at once.
_AVX512BW = {"+avx512bw", "+avx512f"} <= _target_features()
_B64 = ir.VectorType(ir.IntType(8), 64)
_H32x = ir.VectorType(ir.IntType(16), 32)


def _scaled_pairs(builder, u, x, scale):
    """``_scaled_quads`` of two runs at once, on AVX-512 BW: ``u`` and ``x`` the two runs' 32 values each, one after
    the other (``<64 x i8>``), ``scale`` their two ``<16 x i16>`` scales likewise; lanes ``0…7`` of the ``<16 x i32>``
    are the first run's lanes, ``8…15`` the second's — the same integers, in registers twice as wide."""
    pairs = builder.module.declare_intrinsic("llvm.x86.avx512.pmaddubs.w.512", (), ir.FunctionType(_H32x, [_B64] * 2))
    words = builder.module.declare_intrinsic("llvm.x86.avx512.pmaddw.d.512", (), ir.FunctionType(_V16, [_H32x] * 2))
    return builder.call(words, [builder.call(pairs, [u, x]), scale])


def _run_lanes(builder, runs, xat):
    """The block's eight lanes (``<8 x i32>``), lane ``l`` = ``Σ`` over its eight runs of ``scale·Σ_{j<4}
    u[4l+j]·x[4l+j]`` (``runs``: each run's values and scale, in value order; ``xat``: the activation row's block,
    run ``c`` at byte ``32c``). Exact integers, so any order of their sums is ggml's: on AVX-512 BW two runs a
    register (``_scaled_pairs``), their halves added at the end; else a run a register (``_scaled_quads``)."""
    if _AVX512BW:
        wide = ir.Constant(_V16, [0] * 16)
        both = ir.Constant(ir.VectorType(_I32, 64), list(range(64)))
        scales = ir.Constant(ir.VectorType(_I32, 32), list(range(32)))
        for c in range(0, len(runs), 2):
            (u0, s0), (u1, s1) = runs[c], runs[c + 1]
            wide = builder.add(wide, _scaled_pairs(builder, builder.shuffle_vector(u0, u1, both),
                                                   _load(builder, xat, 32 * c, _B64),
                                                   builder.shuffle_vector(s0, s1, scales)))
        low, high = (builder.shuffle_vector(wide, wide, ir.Constant(_V8, list(range(j, j + 8)))) for j in (0, 8))
        return builder.add(low, high)
    lanes = ir.Constant(_V8, [0] * 8)
    for c, (v, s) in enumerate(runs):
        lanes = builder.add(lanes, _scaled_quads(builder, v, _load(builder, xat, 32 * c, _B32), s))
    return lanes


def _isum(builder, v, width: int):
    """The sum of ``v``'s ``width`` int32 lanes (exact: any order)."""
    while width > 1:
        low, high = (builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(_I32, width // 2),
                                                               list(range(j, j + width // 2))))
                     for j in (0, width // 2))
        v, width = builder.add(low, high), width // 2
    return builder.extract_element(v, ir.Constant(_I32, 0))


def _at(context, builder, aryty, ary, indices, size, vty):
    """A pointer to ``vty`` at ``ary[indices]`` (the last index in units of ``size`` bytes)."""
    return builder.inttoptr(_address(context, builder, aryty, ary, indices, size), vty.as_pointer())


#: Activation rows sharing one unpacking of a weight block; the rest one at a time. Neither changes a sum's order.
_K_ROWS = 4


def _k_elements(code: int):
    """An intrinsic writing column ``n`` of ``out``: the product of weight row ``n`` of ``w`` (Q4_K, code 6, Q5_K,
    7, or Q6_K, 8, as stored) with each Q8_K activation row (``qx``, ``dx``, ``bs``) — ``_dot``'s element
    (the module's docstring), the type's ``vec_dot`` (``ggml_vec_dot_q4_K_q8_K`` …, arch/x86/quants.c), in the same
    operations in the same order (the tiled kernel's element, 8 rows or more: ``ggml_tiled``). Per block of 256, in
    block order: the lanes ``l = Σ scale·q·x`` over the values ``p`` with ``(p mod 32) // 4 = l`` (``_scaled_quads``
    over each run of 32; ``q`` unsigned, Q6_K's 0…63 with its lanes then less ``32·(bsums·scales)`` of its sub-blocks
    ``2l, 2l+1``), and Q4_K's and Q5_K's mins ``m_sb·(S₂ₛ_b + S₂ₛ_b₊₁)``, all integers and exact, so the vector sums
    give ggml's; then the float32 operations of ``_dot``: ``acc ← fma(dx·dw, float(lane), acc)`` lane by lane
    (``<8 x float>``, the lanes independent, each in block order), Q4_K's ``accm ← fma(−dx·dm, float(m₂ₜ·S… +
    m₂ₜ₊₁·S…), accm)`` in four
    lanes, Q5_K's ``summs ← fma(−dx·dm, float(Σ mins), summs)``; at the end ``hsum_float_8(acc)`` (+
    ``(accm₀+accm₂)+(accm₁+accm₃)``, + ``summs``). The rows are taken ``_K_ROWS`` at a time, the rest one by one; each
    row keeps its own accumulators, so the rows computed together change nothing but how often a block's weight bytes
    are loaded and unpacked (once for the ``_K_ROWS``). A block's sub-block scales, mins, ``d`` and ``dmin`` are
    unpacked from its own bytes in vector code as the block is summed (``ggml_tiled._k_scales``), as ggml's dots
    unpack them: a column's scales unpacked ahead in scalar code took as long as its one-row dot."""
    nbytes = {6: 144, 7: 176, 8: 210}[code]
    floor = code != 8  # Q4_K and Q5_K have mins

    @intrinsic
    def elements(typingctx, qx, dx, bs, w, n, out):
        def codegen(context, builder, signature, args):
            qx, dx, bs, w, n, out = args
            xty, dty, bty, wty, _, oty = signature.args
            n = builder.sext(n, _I64) if n.type != _I64 else n
            fma8, fma4, fma1 = (builder.module.declare_intrinsic(f"llvm.fma.{s}", (), ir.FunctionType(t, [t] * 3))
                                for s, t in (("v8f32", _F8), ("v4f32", _F4), ("f32", _F32)))
            count, blocks = cgutils.unpack_tuple(builder, context.make_array(dty)(context, builder, dx).shape, 2)
            zero8, zero4, zero = ir.Constant(_F8, [0.0] * 8), ir.Constant(_F4, [0.0] * 4), ir.Constant(_F32, 0.0)

            def emit(r, rows):  # rows r … r + rows − 1
                accs = [cgutils.alloca_once_value(builder, zero8) for _ in range(rows)]
                accms = [cgutils.alloca_once_value(builder, zero4 if code == 6 else zero) for _ in range(rows if floor
                                                                                                     else 0)]
                with cgutils.for_range(builder, blocks) as loop:
                    i = loop.index
                    wat = _address(context, builder, wty, w, (n, builder.mul(i, ir.Constant(_I64, nbytes))), 1)
                    if rows == 1:  # a decode step's: the weight streamed once (``product.prefetch``)
                        prefetch(builder, wat)
                    sixteen = builder.mul(i, ir.Constant(_I64, 16))
                    runs = []  # (values, scale) of each run of 32 values, in value order
                    values = _k_values(builder, code, wat)
                    if floor:
                        subs, mins, dw, dm = _k_scales(builder, code, wat)
                        for c, v in enumerate(values):
                            s = builder.trunc(builder.extract_element(subs, ir.Constant(_I32, c)), ir.IntType(16))
                            runs.append((v, _splat(builder, s, _H16)))
                    else:  # run 4h+m's scales 8h+2m, +1: sub-blocks 2c, 2c+1
                        subs, _, dw, _ = _k_scales(builder, code, wat)
                        pair = builder.trunc(subs, _H16)
                        for c, v in enumerate(values):
                            runs.append((v, builder.shuffle_vector(pair, pair, ir.Constant(_V16, [2 * c] * 8
                                                                                            + [2 * c + 1] * 8))))
                    for row, acc in enumerate(accs):
                        at = builder.add(r, ir.Constant(_I64, row))
                        xat = _address(context, builder, xty, qx, (at, builder.mul(i, ir.Constant(_I64, QK_K))), 1)
                        lanes = _run_lanes(builder, runs, xat)
                        bsums = builder.load(_at(context, builder, bty, bs, (at, sixteen), 4, _V16), align=4)
                        dx_ = builder.load(_at(context, builder, dty, dx, (at, i), 4, _F32))
                        if code == 8:  # lane l less 32·(S₂ₗ·s₂ₗ + S₂ₗ₊₁·s₂ₗ₊₁)
                            offset = builder.add(*_halves(builder, builder.mul(bsums, subs), 16))
                            lanes = builder.sub(lanes, builder.shl(offset, ir.Constant(_V8, [5] * 8)))
                        else:  # m_sb·(S₂ₛ_b + S₂ₛ_b₊₁) a sub-block
                            per_sub = builder.mul(mins, builder.add(*_halves(builder, bsums, 16)))
                        d = _splat(builder, builder.fmul(dx_, dw), _F8)
                        builder.store(builder.call(fma8, [d, builder.sitofp(lanes, _F8), builder.load(acc)]), acc)
                        if floor:
                            dmin = builder.fmul(builder.fsub(ir.Constant(_F32, -0.0), dx_), dm)
                            accm = accms[row]
                            if code == 6:  # four lanes, t: m₂ₜ·S₂ₜ + m₂ₜ₊₁·S₂ₜ₊₁
                                four = builder.sitofp(builder.add(*_halves(builder, per_sub, 8)), _F4)
                                dmins = _splat(builder, dmin, _F4)
                                builder.store(builder.call(fma4, [dmins, four, builder.load(accm)]), accm)
                            else:  # Q5_K: one float, the whole block's
                                whole = builder.sitofp(_isum(builder, per_sub, 8), _F32)
                                builder.store(builder.call(fma1, [dmin, whole, builder.load(accm)]), accm)
                for row, acc in enumerate(accs):
                    total = _hsum8_ir(builder, builder.load(acc))
                    if code == 6:
                        m = [builder.extract_element(builder.load(accms[row]), ir.Constant(_I32, t)) for t in range(4)]
                        total = builder.fadd(total, builder.fadd(builder.fadd(m[0], m[2]), builder.fadd(m[1], m[3])))
                    elif code == 7:
                        total = builder.fadd(total, builder.load(accms[row]))
                    at = builder.add(r, ir.Constant(_I64, row))
                    builder.store(total, _at(context, builder, oty, out, (at, n), 4, _F32))

            shared = builder.sub(count, builder.srem(count, ir.Constant(_I64, _K_ROWS)))
            with cgutils.for_range_slice(builder, ir.Constant(_I64, 0), shared, ir.Constant(_I64, _K_ROWS)) as (r, _):
                emit(r, _K_ROWS)
            with cgutils.for_range_slice(builder, shared, count, ir.Constant(_I64, 1)) as (r, _):
                emit(r, 1)
            return context.get_dummy_value()

        return types.void(qx, dx, bs, w, n, out), codegen

    return elements


#: Q4_K's, Q5_K's and Q6_K's dot (``_k_elements``) by code; their tiled products are ``ggml_tiled``'s.
_K_ELEMENTS = {code: _k_elements(code) for code in (6, 7, 8)}


@functools.lru_cache(maxsize=None)
def _kernel_of(type_name: str):
    """The kernel of a product over ``type_name`` (one of ``DOTS``) of fewer than ``TILED_ROWS`` rows (more are
    ``ggml_tiled``'s): ``product(qx, dx, bs, w, nthreads, out)`` writes ``out[r, n]``, the type's dot of weight row
    ``n`` with activation row ``r`` — Q4_K's, Q5_K's and Q6_K's whole in vector code (``_k_elements``), Q2_K's and
    Q3_K's by ``_dot``, each weight row decoded once for every activation row (``_values``); ``product.task_span``
    columns a task (``product``), taken by the ``nthreads`` threads as each is free (``jit.claim``), a thread's tasks
    sharing one scratch. Made once a process a type.

    Why one kernel a type (the type's code a constant of the closure, every other type's branch dropped before numba
    types it): a kernel for every type, the code an argument, compiled all five types' code and linked and optimised
    it again into the parallel loop's body — 13 s of a machine's first run of a Q4_K_M file, which needs two."""
    code = DOTS[type_name]
    dots = _K_ELEMENTS.get(code)  # None: Q2_K's and Q3_K's branch does not take it

    def share(qx, dx, bs, w, out, taken):  # one thread's: its tasks share its scratch
        rows, k = qx.shape
        n_out = w.shape[0]
        span = task_span(w.shape[1], n_out)
        tasks = (n_out + span - 1) // span
        lanes = np.zeros(8, dtype=np.int32)
        acc = np.zeros(8, dtype=np.float32)
        wv = np.empty(k if code < 6 else 0, dtype=np.int16)
        c = claim(taken)
        while c < tasks:
            for n in range(c * span, min(n_out, (c + 1) * span)):
                if code >= 6:
                    dots(qx, dx, bs, w, n, out)
                    continue
                _values(code, w[n], wv)
                for r in range(rows):
                    out[r, n] = _dot(code, w[n], wv, qx[r], dx[r], bs[r], lanes, acc)
            c = claim(taken)

    shared = on_threads(share)

    def product(qx, dx, bs, w, nthreads, out):
        shared(nthreads, (qx, dx, bs, w, out))

    share.__qualname__ = share.__name__ = f"_share_{type_name}"
    product.__qualname__ = product.__name__ = f"_kernel_{type_name}"
    return compiled(kernel(product), *_K_OPERANDS)


#: ``_kernel_of``'s operands as its kernels are compiled for them (``jit.compiled``): Q8_K activations (``q``, ``d``,
#: ``bsums``), the weight's bytes read-only (mapped from the file or made in memory, one machine code), the results.
_K_OPERANDS = (array("int8", 2, "C"), array("float32", 2, "C"), array("int32", 2, "C"),
               array("uint8", 2, "C", readonly=True), INT64, array("float32", 2, "C"))


# ---- the legacy quants (ggml_vec_dot_q4_0_q8_0, _q4_1_q8_1, _q5_0_q8_0, _q5_1_q8_1; tinyBLAS_Q0_AVX) and MXFP4 -------
# ---- (ggml_vec_dot_mxfp4_q8_0) -----------------------------------------------------------------------------------


@kernel
def _legacy_block(code, w, at, v):
    """Block ``at`` of a legacy (or MXFP4) weight row as ggml's AVX2 dot unpacks it: its 32 integers in value order
    into ``v`` (Q4_0 ``q − 8``, Q5_0 ``q − 16``, Q4_1 and Q5_1 ``q`` unsigned, MXFP4 ``kvalues_mxfp4[q]``, its e2m1
    values doubled), and its ``d`` and ``m`` widened (fp16; MXFP4's ``d`` its e8m0 scale halved; ``m`` 0 but for the
    ``_1`` types)."""
    if code == MXFP4:  # e (e8m0), qs[16]: value j the low nibble of byte j, value j + 16 its high one
        for j in range(16):
            b = w[at + 1 + j]
            v[j] = _MXFP4[b & 0xF]
            v[j + 16] = _MXFP4[b >> 4]
        return _e8m0_half(w[at]), F32(0)
    d = _HALF[np.int64(w[at]) | (np.int64(w[at + 1]) << 8)]
    m = F32(0)
    if code == 1 or code == 3:
        m = _HALF[np.int64(w[at + 2]) | (np.int64(w[at + 3]) << 8)]
    five = code == 2 or code == 3
    h = at + (2 if code == 2 else 4)
    qh = np.int64(0)
    if five:
        qh = np.int64(w[h]) | (np.int64(w[h + 1]) << 8) | (np.int64(w[h + 2]) << 16) | (np.int64(w[h + 3]) << 24)
    qs = at + (2 if code == 0 else 4 if code == 1 else 6 if code == 2 else 8)
    offset = 8 if code == 0 else 16 if code == 2 else 0
    for j in range(16):
        lo = np.int32(w[qs + j] & 0xF)
        hi = np.int32(w[qs + j] >> 4)
        if five:
            lo |= np.int32((qh >> j) & 1) << 4
            hi |= np.int32((qh >> (j + 16)) & 1) << 4
        v[j] = lo - offset
        v[j + 16] = hi - offset
    return d, m


def _legacy_tasks(code, nbytes, qx, dx, sx, w, out, taken):
    """One thread's share of ``_legacy_kernel``: the next task's columns (``product.task_span``) while any are left,
    its scratch made once."""
    rows, k = qx.shape
    nb = k // 32
    paired = nb - nb % 2 if code == MXFP4 else nb
    n_out = w.shape[0]
    span = task_span(w.shape[1], n_out)
    tasks = (n_out + span - 1) // span
    v = np.empty(32, dtype=np.int32)
    acc = np.empty((rows, 2, 8), dtype=np.float32)
    summs = np.empty(rows, dtype=np.float32)
    c = claim(taken)
    while c < tasks:
        for n in range(c * span, min(n_out, (c + 1) * span)):
            _legacy_column(code, nbytes, qx, dx, sx, w, n, nb, paired, v, acc, summs, out)
        c = claim(taken)


_legacy_threads = on_threads(_legacy_tasks)


@kernel
def _legacy_kernel(code, nbytes, qx, dx, sx, w, nthreads, out):
    """Each element: per block of 32, eight int32 lanes (lane ``l`` the products of values ``4l … 4l+3``, exact),
    ``acc[l] ← fma(d_w·d_x, lane l, acc[l])``; for Q4_1 and Q5_1 also ``summs ← fma(m_w, s_x, summs)``; the result
    ``hsum_float_8(acc) + summs``. MXFP4 takes its blocks in pairs, the even one's lanes into ``acc``, the odd one's
    into a second ``acc′``, and an odd last block apart: the result ``hsum_float_8(acc + acc′)``, then ``fma(d, Σ
    of the last block's products, ·)``. ``nthreads`` threads take a task's columns (``product.task_span``) at a time
    as each is free (``jit.claim``)."""
    _legacy_threads(nthreads, (code, nbytes, qx, dx, sx, w, out))


@kernel
def _legacy_column(code, nbytes, qx, dx, sx, w, n, nb, paired, v, acc, summs, out):
    """Column ``n`` of ``_legacy_kernel``'s product, ``v``, ``acc`` and ``summs`` its thread's scratch."""
    rows = qx.shape[0]
    acc[:] = 0
    summs[:] = 0
    for b in range(paired):
        dw, mw = _legacy_block(code, w[n], b * nbytes, v)
        half = b % 2 if code == MXFP4 else 0
        for r in range(rows):
            d = dw * dx[r, b]
            for l in range(8):
                s = np.int32(0)
                for j in range(4):
                    s += v[4 * l + j] * np.int32(qx[r, 32 * b + 4 * l + j])
                acc[r, half, l] = _fma(d, F32(s), acc[r, half, l])
            if code == 1 or code == 3:
                summs[r] = _fma(mw, sx[r, b], summs[r])
    for r in range(rows):
        total = _hsum8(acc[r, 0] + acc[r, 1]) if code == MXFP4 else _hsum8(acc[r, 0])
        out[r, n] = total + summs[r] if code == 1 or code == 3 else total
    if paired < nb:  # MXFP4's odd last block: its 32 products summed exactly, one fma onto the sum
        dw, _ = _legacy_block(code, w[n], paired * nbytes, v)
        for r in range(rows):
            s = np.int32(0)
            for j in range(32):
                s += v[j] * np.int32(qx[r, 32 * paired + j])
            out[r, n] = _fma(dw * dx[r, paired], F32(s), out[r, n])


def quantize_q8_1(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``x`` as ``quantize_row_q8_1`` (AVX2) quantises them: ``q`` and ``d`` as Q8_0's (``ggml.quantize_q8_0``),
    and per block ``s = fp16(d₃₂ · Σq)``, ``d₃₂ = max|x| / 127`` in float32 before its rounding to fp16."""
    q, d = quantize_q8_0(x)
    top = np.max(np.abs(x.reshape(*x.shape[:-1], -1, 32)), axis=-1)
    total = q.reshape(*q.shape[:-1], -1, 32).sum(axis=-1, dtype=np.int32)
    s = ((top / F32(127)).astype(F32) * total.astype(F32)).astype(np.float16).astype(F32)
    return q, d, s


# ---- BF16 (ggml_vec_dot_bf16 and tinyBLAS over bf16: AVX2's and AVX-512F's fma, AVX512_BF16's dpbf16) --------------


def to_bf16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bf16 as ``ggml_compute_fp32_to_bf16`` does (nearest, ties to even; a NaN kept quiet), held
    as float32."""
    bits = np.ascontiguousarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    rounded = np.where(nan, (bits >> 16) | 64, (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)
    return (rounded.astype(np.uint32) << 16).view(F32)


@kernel
def _bf16_dot(x, y, acc):
    """``ggml_vec_dot_bf16`` on AVX2 over values already widened: four accumulators of 8 lanes (value ``k`` of each
    32 to accumulator ``(k mod 32) // 8``, lane ``k mod 8``, by fma), added ``(c₀+c₂)+(c₁+c₃)`` and ``hsum``ed; the
    rest added one float32 product at a time in float64. ``acc``: the caller's 4 × 8 float32 scratch."""
    n = x.shape[0]
    full = n - n % 32
    acc[:] = 0
    for i in range(0, full, 32):
        for j in range(4):
            for l in range(8):
                acc[j, l] = _fma(x[i + 8 * j + l], y[i + 8 * j + l], acc[j, l])
    for l in range(8):
        acc[0, l] = (acc[0, l] + acc[2, l]) + (acc[1, l] + acc[3, l])
    t = np.float64(_hsum(acc[0], 8))
    for i in range(full, n):
        t += np.float64(np.float32(x[i] * y[i]))
    return np.float32(t)


#: The least normal float32, 2⁻¹²⁶: below it ``dpbf16`` reads and writes zero.
_NORMAL = F32(2.0 ** -126)


@kernel
def _ftz(v):
    """``v``, or a zero of its sign where it is subnormal: ``dpbf16``'s DAZ on its inputs and FTZ on its results."""
    return v if abs(v) >= _NORMAL else v * F32(0)


@kernel
def _dp(acc, x, y, i):
    """One float32 lane of ``_mm512_dpbf16_ps``: over the bf16 pair ``i, i+1`` of ``x`` and ``y``, the odd product
    first — ``t = acc + x[i+1]·y[i+1]``, then ``t + x[i]·y[i]`` — each product exact and added with one rounding
    (nearest even), subnormal inputs read as zero and each of the two results flushed to zero when subnormal — as
    Intel's pseudo-code for VDPBF16PS says and this project's AMD EPYC host computes it (``test_quants.py``)."""
    t = _ftz(_fma(_ftz(x[i + 1]), _ftz(y[i + 1]), acc))
    return _ftz(_fma(_ftz(x[i]), _ftz(y[i]), t))


@kernel
def _bf16_dot512(x, y, dp, acc):
    """``ggml_vec_dot_bf16`` on AVX-512 over values already widened: two 16-lane accumulators, each reduced
    (``_mm512_reduce_add_ps``) and added in float64, the first then the second, then the rest one float32 product
    at a time, as ``_bf16_dot``. Under AVX512_BF16 (``dp``; vec.cpp's ``__AVX512BF16__`` branch) each 64 values
    ``dpbf16`` into the first (the first 32, lane ``l`` the pair ``2l, 2l+1``) and the second (the next 32); without
    it (its ``__AVX512F__`` branch) each 32 values go to the first (the first 16, lane ``l`` value ``l``) and the
    second (the next 16) by fma — the C's ``_mm512_add_ps(_mm512_mul_ps(x, y), c)``, which GCC contracts.
    ``acc``: the caller's scratch of 2 × 16 float32 or more."""
    n = x.shape[0]
    step = 64 if dp else 32
    full = n - n % step
    acc[:2, :16] = 0
    for i in range(0, full, step):
        for h in range(2):
            for l in range(16):
                if dp:
                    acc[h, l] = _dp(acc[h, l], x, y, i + 32 * h + 2 * l)
                else:
                    acc[h, l] = _fma(x[i + 16 * h + l], y[i + 16 * h + l], acc[h, l])
    t = np.float64(_hsum(acc[0], 16)) + np.float64(_hsum(acc[1], 16))
    for i in range(full, n):
        t += np.float64(np.float32(x[i] * y[i]))
    return np.float32(t)


@kernel
def _tiny_dp(x, y, acc):
    """llamafile's ``tinyBLAS<32>`` element over bf16 under AVX512_BF16: one 16-lane accumulator, each 32 values
    ``dpbf16`` into it (lane ``l`` the pair ``2l, 2l+1``), then ``_mm512_reduce_add_ps``; ``acc`` the caller's
    scratch of 16 float32 or more."""
    acc[:16] = 0
    for i in range(0, x.shape[0], 32):
        for l in range(16):
            acc[l] = _dp(acc[l], x, y, i + 2 * l)
    return _hsum(acc, 16)


def _bf16_tasks(x, w, tiny, lanes, dp, out, taken):
    """One thread's share of ``_bf16_kernel``: the next ``TASK_COLUMNS`` columns while any are left, its scratch made
    once."""
    rows, k = x.shape
    n_out = w.shape[0]
    tasks = (n_out + TASK_COLUMNS - 1) // TASK_COLUMNS
    col = np.empty(k, np.float32)
    acc = np.empty((4, 16), np.float32)  # the element's accumulators
    c = claim(taken)
    while c < tasks:
        for n in range(c * TASK_COLUMNS, min(n_out, (c + 1) * TASK_COLUMNS)):
            for j in range(k):
                col[j] = _from_bits(np.int64(w[n, j]) << 16)
            for r in range(rows):
                if tiny:
                    out[r, n] = _tiny_dp(x[r], col, acc[0]) if dp else _tiny(x[r], col, lanes, acc[0])
                else:
                    out[r, n] = _bf16_dot512(x[r], col, dp, acc) if lanes == 16 else _bf16_dot(x[r], col, acc)
        c = claim(taken)


_bf16_threads = on_threads(_bf16_tasks)


@kernel
def _bf16_kernel(x, w, tiny, lanes, dp, nthreads, out):
    """``out[r, n]``: row ``r`` of ``x`` by column ``n`` of ``w`` (bf16 bits), by tinyBLAS's element (``tiny``) or
    ``ggml_vec_dot_bf16``'s — AVX512_BF16's ``dpbf16`` code where ``dp``, else the float code of the path's ``lanes``
    (AVX2's 8, AVX-512F's 16); ``nthreads`` threads take ``TASK_COLUMNS`` columns at a time as each is free
    (``jit.claim``)."""
    _bf16_threads(nthreads, (x, w, tiny, lanes, dp, out))


# ---- the product ----------------------------------------------------------------------------------------------------


def mul_mat(x: np.ndarray, w: Blocks, rows: int | None = None, *, path: KernelPath = AVX2,
            routed: int | None = None) -> np.ndarray:
    """``X · W`` as ``ggml_compute_forward_mul_mat`` computes it on ``path`` for a weight ``computes`` says it
    computes: ``x`` (``… × k``) converted to the type's ``vec_dot_type`` row by row (Q8_K, Q8_0, Q8_1 or bf16), each
    element the type's dot — or, for BF16 and two or more ``rows`` together, tinyBLAS's (``ggml.tiny_blas``), for a
    K-quant and 8 or more, the tiled kernel's. ``w`` is one matrix; ``rows`` how many rows ggml computes together
    (default: ``x``'s).

    With ``routed``, ``w`` is one expert's matrix of a bank and the product ``ggml_compute_forward_mul_mat_id``'s for
    it, ``routed`` the rows (token and slot) routed to that expert in the whole step: ggml groups a step's rows by
    expert and computes each expert's alone — a K-quant's by the tiled kernel from 8 of them
    (``ggml_compute_forward_mul_mat_id_tiled`` decides per expert), every other element by the type's dot, one row at a
    time (``mul_mat_id`` calls no tinyBLAS). Each element reads its own row alone, so ``x`` may be any part of those
    rows."""
    if not computes(w.type, path) or w.raw.ndim != 2:
        raise ValueError(f"a product over {'a bank of ' if w.raw.ndim != 2 else ''}{w.type} on the {path.name} path "
                         "is not computed here")
    if routed is not None:
        rows = routed if w.type in DOTS else 1
    x = np.asarray(x, dtype=F32)
    lead, k = x.shape[:-1], x.shape[-1]
    if w.shape[0] != k:
        raise ValueError(f"a product of {'×'.join(map(str, x.shape))} by {'×'.join(map(str, w.shape))}: "
                         f"{k} ≠ {w.shape[0]}")
    x2 = np.ascontiguousarray(x.reshape(-1, k))
    out = np.empty((x2.shape[0], w.shape[1]), dtype=F32)
    if out.size:
        raw = np.ascontiguousarray(w.raw)
        if w.type in DOTS:
            q, d, bs = quantize_q8_k(x2)
            if (x2.shape[0] if rows is None else rows) >= TILED_ROWS:  # ggml's tiled kernel's (``ggml_tiled``)
                code = DOTS[w.type]
                xi, sx, dxi = interleaved(q, d, bs, code)
                tiled_kernel(code)(xi, sx, dxi, raw, x2.shape[0], threads(), out)
            else:
                _kernel_of(w.type)(q, d, bs, raw, threads(), out)
        elif w.type in LEGACY or w.type == "MXFP4":
            if w.type in ("Q4_1", "Q5_1"):
                q, d, s = quantize_q8_1(x2)
            else:  # the ``_0`` types and MXFP4 have no minimum: ``s`` is not read
                (q, d), s = quantize_q8_0(x2), None
            _legacy_kernel(LEGACY.get(w.type, MXFP4), w.block_bytes, q, d, d if s is None else s, raw, threads(),
                           out)
        else:
            dp = path.isa == "avx512" and path.bf16
            tiny = tiny_blas(x2.shape[0] if rows is None else rows, k, w.shape[1], path, 32 if dp else path.lanes)
            _bf16_kernel(to_bf16(x2), raw.view(np.uint16), tiny, path.lanes, dp, threads(), out)
    return out.reshape(*lead, w.shape[1])
