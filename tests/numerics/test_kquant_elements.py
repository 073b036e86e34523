"""The Q4_K, Q5_K and Q6_K products in llama.cpp's arithmetic (``ggml_quants.mul_mat``) at every grouping of rows the
kernels make — the dot's rows shared four at a time and the rows left over, one at a time; from 8 rows the tiled
kernel's groups of a register's rows (``ggml_tiled``: 16 or 8 to a group, groups three, two and one at a time, the last
padded) and its columns four at a time, the rest one by one, in tasks of 32 — held to a plain loop of the order the
module documents: per block of 256 the exact integer lanes, then ``vec_dot``'s ``acc ← fma(dx·dw, lane, acc)`` (Q4_K's
mins in four more lanes, Q5_K's in one float), ``hsum_float_8``, or, from 8 rows, the tiled kernel's ``fma(r, dx,
total)``.

The oracle tests (``tests/oracle/test_quants.py``) hold the products to llama.cpp's own at the row counts its files
take; this holds the same arithmetic at the counts they do not reach (a tile's leftover rows), against an
independent definition: each fma rounded once from its exact value (``fractions``), nothing of the kernel's code."""

from fractions import Fraction

import numpy as np
import pytest

from streamed.numerics import ggml_quants
from streamed.numerics.blocks import Blocks

F32 = np.float32
BYTES = {"Q4_K": 144, "Q5_K": 176, "Q6_K": 210}


def fma(a, b, c) -> F32:
    """``a·b + c`` rounded once to float32 (nearest, ties to even)."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    near = F32(float(exact))
    options = (near, np.nextafter(near, F32(np.inf)), np.nextafter(near, F32(-np.inf)))
    return min(options, key=lambda f: (abs(Fraction(float(f)) - exact), int(np.array(f).view(np.uint32)) & 1))


def half(raw, at) -> F32:
    return F32(raw[at:at + 2].copy().view(np.float16)[0])


def unpack(name: str, block: np.ndarray):
    """A block's 256 integer values, their 256 integer scales, its ``d``, ``dmin`` and 8 sub-block mins (Q4_K,
    Q5_K)."""
    p = np.arange(256)
    if name != "Q6_K":
        s = block[4:16].astype(np.int64)
        j = np.arange(8)
        low = j < 4
        sc = np.where(low, s[j % 4] & 63, (s[(j + 4) % 12] & 0xF) | ((s[(j - 4) % 12] >> 6) << 4))
        mn = np.where(low, s[(j + 4) % 12] & 63, (s[(j + 4) % 12] >> 4) | ((s[j % 12] >> 6) << 4))
        qs = block[-128:].astype(np.int64)
        byte = qs[32 * (p // 64) + p % 32]
        q = np.where((p // 32) % 2 == 0, byte & 0xF, byte >> 4)
        if name == "Q5_K":  # the fifth bit of value p: bit p // 32 of qh[p mod 32]
            q = q | (((block[16:48].astype(np.int64)[p % 32] >> (p // 32)) & 1) << 4)
        return q, sc[p // 32], half(block, 0), half(block, 2), mn
    ql, qh = block[:128].astype(np.int64), block[128:192].astype(np.int64)
    h, m, l = p // 128, (p % 128) // 32, p % 32
    nib = ql[64 * h + 32 * (m % 2) + l] >> (4 * (m // 2)) & 0xF
    q = nib | (((qh[32 * h + l] >> (2 * m)) & 3) << 4)
    scales = block[192:208].view(np.int8).astype(np.int64)
    return q, scales[p // 16], half(block, 208), F32(0), None


def element(name, row, qx, dx, bs, tiled) -> F32:
    """One element in the documented order (``ggml_quants``' docstring)."""
    acc, accm, summs, total = [F32(0)] * 8, [F32(0)] * 4, F32(0), F32(0)
    lane_of = (np.arange(256) % 32) // 4
    for i in range(len(dx)):
        q, sc, dw, dm, mins = unpack(name, row[i * BYTES[name]:(i + 1) * BYTES[name]])
        x = qx[256 * i:256 * (i + 1)].astype(np.int64)
        S = bs[16 * i:16 * (i + 1)].astype(np.int64)
        lanes = [int(np.sum((sc * q * x)[lane_of == l])) for l in range(8)]
        if name == "Q6_K":
            s16 = row[i * 210 + 192:i * 210 + 208].view(np.int8).astype(np.int64)
            lanes = [lanes[l] - 32 * int(S[2 * l] * s16[2 * l] + S[2 * l + 1] * s16[2 * l + 1]) for l in range(8)]
            m4 = [0] * 4
        else:
            m4 = [int(mins[2 * t] * (S[4 * t] + S[4 * t + 1]) + mins[2 * t + 1] * (S[4 * t + 2] + S[4 * t + 3]))
                  for t in range(4)]
        if tiled:
            r = F32(dw * F32(sum(lanes)))
            if name != "Q6_K":
                r = fma(-dm, F32(sum(m4)), r)
            total = fma(r, dx[i], total)
            continue
        d = F32(dx[i] * dw)
        acc = [fma(d, F32(lanes[l]), acc[l]) for l in range(8)]
        if name == "Q4_K":
            accm = [fma(F32(-dx[i] * dm), F32(m4[t]), accm[t]) for t in range(4)]
        elif name == "Q5_K":
            summs = fma(F32(-dx[i] * dm), F32(sum(m4)), summs)
    if tiled:
        return total
    a = acc
    total = F32(F32(F32(a[4] + a[0]) + F32(a[6] + a[2])) + F32(F32(a[5] + a[1]) + F32(a[7] + a[3])))
    if name == "Q4_K":
        return F32(total + F32(F32(accm[0] + accm[2]) + F32(accm[1] + accm[3])))
    return F32(total + summs) if name == "Q5_K" else total


def weight(name: str, k: int, n: int, seed: int) -> np.ndarray:
    """Random blocks with finite, moderate fp16 scales."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(n, k // 256, BYTES[name]), dtype=np.uint8)
    for at in ((208,) if name == "Q6_K" else (0, 2)):
        raw[:, :, at:at + 2] = (rng.standard_normal((n, k // 256, 1)) * 0.01).astype(np.float16).view(np.uint8)
    return raw.reshape(n, -1)


@pytest.mark.parametrize("name", sorted(BYTES))
@pytest.mark.parametrize("rows, n", [(1, 6), (3, 6), (5, 6), (8, 6), (9, 6), (11, 6),
                                     (17, 37), (33, 37), (40, 37), (49, 37), (57, 6)])
def test_a_q4_k_q5_k_or_q6_k_product_is_the_documented_order_at_every_grouping_of_its_rows(name, rows, n):
    k = 512
    raw = weight(name, k, n, rows)
    x = np.random.default_rng(100 + rows).standard_normal((rows, k)).astype(F32)
    got = ggml_quants.mul_mat(x, Blocks(raw, name))
    qx, dx, bs = ggml_quants.quantize_q8_k(x)
    tiled = rows >= ggml_quants.TILED_ROWS
    want = np.array([[element(name, raw[c], qx[r], dx[r], bs[r], tiled) for c in range(n)] for r in range(rows)])
    assert np.array_equal(got.view(np.uint32), want.astype(F32).view(np.uint32))
    other = np.array([[element(name, raw[c], qx[r], dx[r], bs[r], not tiled) for c in range(n)] for r in range(rows)])
    assert not np.array_equal(other, want)  # the two orders differ here: the test tells them apart
