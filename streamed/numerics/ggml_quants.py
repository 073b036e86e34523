"""llama.cpp's CPU products over the K-quants (Q4_K, Q5_K, Q6_K), bit for bit on the AVX2 path — ``--arithmetic
llama.cpp`` for a weight kept in its blocks (``blocks.Blocks``).

What ggml computes (ggml-cpu.c ``type_traits_cpu``; arch/x86/quants.c): a K-quant's ``vec_dot_type`` is Q8_K, so the
activations are quantised a row at a time by ``quantize_row_q8_K`` (the reference C: per block of 256, the value of
largest magnitude ``max``, ``iscale = −127 / max``, ``q = nearest_int(iscale·x)`` capped at 127, ``d = 1 / iscale``,
and the sums of each 16 ``q``), then each output element is ``ggml_vec_dot_<type>_q8_K`` of a weight row with an
activation row. No tinyBLAS path takes a K-quant (llamafile/sgemm.cpp: F32, F16, BF16, Q8_0, Q4_0, Q5_0, IQ4_NL), so
every row, prefill or decode, is this dot. The AVX2 dot, per block of 256:

- integer sums, exact: each 8-bit product of a weight value (unsigned: Q4_K's nibble, Q5_K's 5 bits, Q6_K's 6 bits)
  with its activation, times its sub-block's scale, summed into eight int32 lanes — value ``p`` of the block into
  lane ``(p mod 32) // 4`` (``maddubs`` pairs, ``madd`` pairs again); Q6_K's lanes then lose ``32·(bsums·scales)``
  of the sub-blocks ``2l`` and ``2l+1`` (its values' offset of 32, taken out lane by lane);
- ``d = y.d · fp16(x.d)`` in float32, and ``acc[l] ← fma(d, float(lane l), acc[l])`` over the blocks;
- Q4_K's and Q5_K's mins: ``dmin = −y.d · fp16(x.dmin)``; Q4_K keeps four float lanes,
  ``acc_m[t] ← fma(dmin, float(m₂ₜ·S₂ₜ + m₂ₜ₊₁·S₂ₜ₊₁), acc_m[t])`` (``S`` a sub-block's sum of activations), added
  at the end as ``(m₀+m₂)+(m₁+m₃)``; Q5_K sums the four integers and keeps one float, ``summs += dmin·Σ``;
- the result ``hsum_float_8(acc)`` — ``((a₀+a₄)+(a₂+a₆))+((a₁+a₅)+(a₃+a₇))`` — plus the mins' float.

Held to llama.cpp's own product tensors bit for bit over reductions of one and two blocks (``tests/oracle/
test_quants.py``); over eight (d 2048) most elements still differ from llama.cpp's in the last bit — the
accumulation across blocks is not yet the build's (docs/performance.md).

``PATH`` names the path this is (AVX2, 8 lanes): the other types read as stored (the legacy quants, BF16, MXFP4,
Q2_K, Q3_K) are not computed here, and ``computes(type)`` says so — their products in llama.cpp's arithmetic are
the float product of their exact dequantisation (``ggml.mul_mat`` over float32), which is not llama.cpp's.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .blocks import _HALF, Blocks, _scale_min_k4
from .ggml import _hsum8
from .product import _fma

F32 = np.float32
QK_K = 256
#: The CPU path whose kernels these are: AVX2, eight float32 lanes.
PATH = "avx2"
#: The types whose products this module computes as llama.cpp does, and the code of each in ``_dot``.
DOTS = {"Q4_K": 6, "Q5_K": 7, "Q6_K": 8}


def computes(type_name: str) -> bool:
    """Whether a product over a weight stored ``type_name`` is computed here, as llama.cpp's CPU backend does."""
    return type_name in DOTS


def not_computed(values) -> list[str]:
    """The types of the weights among ``values`` kept in blocks whose products are not llama.cpp's here (sorted):
    what a run in llama.cpp's arithmetic says it computes otherwise."""
    return sorted({v.type for v in values if isinstance(v, Blocks) and not (computes(v.type) and v.raw.ndim == 2)})


# ---- Q8_K activations (quantize_row_q8_K_ref) ---------------------------------------------------------------------


@njit(cache=True)
def _nearest_int(v):
    """``nearest_int``: ``v + 1.5·2²³`` in float32, its low mantissa bits the integer (half to even)."""
    s = np.array([v + F32(12582912.0)], dtype=np.float32).view(np.int32)[0]
    return (s & 0x007FFFFF) - 0x00400000


@njit(cache=True, parallel=True)
def _quantize_q8_k(x, q, d, bsums):
    rows, k = x.shape
    for r in prange(rows):
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
        _quantize_q8_k(x, q, d, bsums)
    return q, d, bsums


# ---- the dots (ggml_vec_dot_q4_K_q8_K, _q5_K_, _q6_K_; AVX2) --------------------------------------------------------


@njit(cache=True)
def _dot(code, w, qx, dx, bs, lanes, acc, accm):
    """One weight row ``w`` (its blocks' bytes) with one Q8_K activation row (``qx``, ``dx``, ``bs``)."""
    acc[:] = 0
    accm[:] = 0
    summs = F32(0)
    nbytes = 144 if code == 6 else 176 if code == 7 else 210
    for i in range(qx.shape[0] // QK_K):
        at = i * nbytes
        o = i * QK_K
        lanes[:] = 0
        if code == 8:  # Q6_K: ql[128], qh[64], scales[16] (int8), d
            d = dx[i] * _HALF[np.int64(w[at + 208]) | (np.int64(w[at + 209]) << 8)]
            for half in range(2):
                ql = at + 64 * half
                qh = at + 128 + 32 * half
                for l in range(32):
                    h = np.int32(w[qh + l])
                    lo = np.int32(w[ql + l])
                    hi = np.int32(w[ql + l + 32])
                    vals = ((lo & 0xF) | ((h & 3) << 4), (hi & 0xF) | (((h >> 2) & 3) << 4),
                            (lo >> 4) | (((h >> 4) & 3) << 4), (hi >> 4) | (((h >> 6) & 3) << 4))
                    for m in range(4):
                        p = 128 * half + 32 * m + l
                        sc = np.int32(np.int8(w[at + 192 + p // 16]))
                        lanes[l // 4] += sc * vals[m] * np.int32(qx[o + p])
            for l in range(8):
                s0 = np.int32(np.int8(w[at + 192 + 2 * l]))
                s1 = np.int32(np.int8(w[at + 192 + 2 * l + 1]))
                lanes[l] -= 32 * (bs[16 * i + 2 * l] * s0 + bs[16 * i + 2 * l + 1] * s1)
        else:  # Q4_K, Q5_K: d, dmin, scales[12], [qh[32],] qs[128]
            dw = _HALF[np.int64(w[at]) | (np.int64(w[at + 1]) << 8)]
            dm = _HALF[np.int64(w[at + 2]) | (np.int64(w[at + 3]) << 8)]
            d = dx[i] * dw
            dmin = -dx[i] * dm
            qs = at + (48 if code == 7 else 16)
            for g in range(4):
                sc1 = np.int32(_scale_min_k4(2 * g, w, at + 4)[0])
                sc2 = np.int32(_scale_min_k4(2 * g + 1, w, at + 4)[0])
                for l in range(32):
                    b = np.int32(w[qs + 32 * g + l])
                    v1 = b & 0xF
                    v2 = b >> 4
                    if code == 7:
                        hb = np.int32(w[at + 16 + l])
                        v1 += ((hb >> (2 * g)) & 1) << 4
                        v2 += ((hb >> (2 * g + 1)) & 1) << 4
                    lanes[l // 4] += sc1 * v1 * np.int32(qx[o + 64 * g + l]) \
                        + sc2 * v2 * np.int32(qx[o + 64 * g + 32 + l])
            prods = np.zeros(4, dtype=np.int32)
            for t in range(4):
                for u in range(2):
                    sb = 2 * t + u
                    mn = np.int32(_scale_min_k4(sb, w, at + 4)[1])
                    prods[t] += mn * (bs[16 * i + 2 * sb] + bs[16 * i + 2 * sb + 1])
            if code == 6:
                for t in range(4):
                    accm[t] = _fma(dmin, F32(prods[t]), accm[t])
            else:
                summs = _fma(dmin, F32((prods[0] + prods[1]) + (prods[2] + prods[3])), summs)
        for l in range(8):
            acc[l] = _fma(d, F32(lanes[l]), acc[l])
    total = _hsum8(acc)
    if code == 6:
        return total + ((accm[0] + accm[2]) + (accm[1] + accm[3]))
    if code == 7:
        return total + summs
    return total


@njit(cache=True, parallel=True)
def _kernel(code, qx, dx, bs, w, out):
    rows = qx.shape[0]
    n_out = w.shape[0]
    for n in prange(n_out):
        lanes = np.zeros(8, dtype=np.int32)
        acc = np.zeros(8, dtype=np.float32)
        accm = np.zeros(4, dtype=np.float32)
        for r in range(rows):
            out[r, n] = _dot(code, w[n], qx[r], dx[r], bs[r], lanes, acc, accm)


def mul_mat(x: np.ndarray, w: Blocks) -> np.ndarray:
    """``X · W`` as ``ggml_compute_forward_mul_mat`` computes it for a weight stored in a K-quant (``computes``):
    ``x`` (``… × k``) quantised to Q8_K row by row, each element the type's AVX2 dot. ``w`` is one matrix."""
    if w.raw.ndim != 2:
        raise ValueError(f"a bank of {w.type} matrices is not a product computed here")
    x = np.asarray(x, dtype=F32)
    lead, k = x.shape[:-1], x.shape[-1]
    if w.shape[0] != k:
        raise ValueError(f"a product of {'×'.join(map(str, x.shape))} by {'×'.join(map(str, w.shape))}: "
                         f"{k} ≠ {w.shape[0]}")
    q, d, bs = quantize_q8_k(x.reshape(-1, k))
    out = np.empty((q.shape[0], w.shape[1]), dtype=F32)
    if out.size:
        _kernel(DOTS[w.type], q, d, bs, np.ascontiguousarray(w.raw), out)
    return out.reshape(*lead, w.shape[1])
