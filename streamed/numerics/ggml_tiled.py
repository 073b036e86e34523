"""ggml's tiled K-quant product (``ggml-cpu/tiled``: 8 rows or more computed together) over Q2_K … Q6_K,
computed as an outer product — each weight row unpacked once, every activation row summed against it in the lanes
of a register — with ggml's integers and ggml's float32 steps, bit for bit; and the K-quant block unpacking the dots
of ``ggml_quants`` share.

What is computed (``ggml_quants``' docstring): per element and block of 256, the whole integer ``s₁ = Σ_sb scale_sb ·
Σ_{p∈sb} v_p·x_p`` (``v`` the weight's value: Q2_K's 2 bits, Q3_K's 3 less 4, Q4_K's nibble, Q5_K's 5 bits, Q6_K's 6
bits less 32; sub-blocks of 32 values, Q2_K's, Q3_K's and Q6_K's of 16) and, for Q2_K, Q4_K and Q5_K, ``s₂ = Σ_sb
min_sb · S_sb`` (``S`` the activation's sum over the sub-block); ``r = fma(−dmin, float(s₂), d·float(s₁))`` (``r =
d·float(s₁)`` for Q3_K and Q6_K) and ``acc ← fma(r, y.d, acc)`` from 0
in block order. The integers are exact in int32 (no product or partial sum near its range), so any order of their
sums is ggml's; the float32 steps are each lane's own, in ggml's order.

How (the layout, and why it is faster). The activations are laid out once a product (``interleaved``): rows in groups of
``lanes()`` (16 on AVX-512 VNNI, else 8; the last group padded with zero rows), each group's bytes four values of a row
after another, row after row — so one register holds values ``4c…4c+3`` of every row of the group. A task of 32 weight
rows (``TASK_COLUMNS``) is taken block by block: the block of each of its rows unpacked into scratch (``_unpacker``: its
values as unsigned bytes in value order, per sub-block its scale and its min, ``d`` and ``dmin``), then each tile of 4
rows computed with every group (``_tiler``). One ``vpdpbusd`` multiplies four of a weight row's values, broadcast (the
unsigned operand), by a group's register of activations (the signed one): each lane gains ``Σ_{j<4} v·x`` for its own
activation row, 64 products an instruction, summed down the sub-block with no horizontal step; the sub-block's lanes are
multiplied by its scale and added into ``s₁``. Q3_K's and Q6_K's values are unpacked unsigned: their −4 and −32
(``OFFSET``) are ``−4·S`` and ``−32·S`` of the sub-block, the sum's start. ``s₂`` takes two sub-blocks a step
(``vpdpwssd`` of the mins and the activation's sub-block sums, as int16 pairs). Without AVX-512 VNNI, AVX2's
``vpmaddubsw`` (pairs, at most 2·63·127: never saturating) then ``vpmaddwd`` take their place, 8 rows a register;
elsewhere the same integers are written generically. Groups are computed three at a time (then two, then one) beside the
tile's four weight rows: each activation register loaded once for four columns, each weight value broadcast once for
three groups, twelve sums in flight; the task's float32 accumulators live in scratch between blocks, so a block's
activations stay in the first-level cache while all 8 tiles read them.

The dots (fewer than 8 rows: a decode step) keep ``ggml_quants._k_elements`` (Q2_K's and Q3_K's ``_dot``): their
lanes are ggml's own eight, which an element's float steps depend on.
"""

from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir

from .ggml import _AVX2, _VNNI
from .jit import INT64, array, cgutils, claim, compiled, intrinsic, kernel, on_threads, types
from .product import TASK_COLUMNS, _address, _load

QK_K = 256
_I8 = ir.IntType(8)
_I16 = ir.IntType(16)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_F32 = ir.FloatType()
_B32 = ir.VectorType(_I8, 32)
_V8 = ir.VectorType(_I32, 8)
_V16 = ir.VectorType(_I32, 16)

#: Each type's code (``ggml_quants.DOTS``) → (block bytes, values a sub-block, whether it has mins).
SHAPES = {4: (84, 16, True), 5: (110, 16, False), 6: (144, 32, True), 7: (176, 32, True), 8: (210, 16, False)}
#: What a value ``u`` as unpacked (unsigned) is above the weight's value ``v = u − OFFSET`` (Q3_K's high bit clear is
#: −4, Q6_K's six bits are less 32): a sum over a sub-block starts from ``−OFFSET·S``, ``S`` the activations' sum.
OFFSET = {4: 0, 5: 4, 6: 0, 7: 0, 8: 32}
#: The types' names by code (``ggml_quants.DOTS``).
NAMES = {4: "Q2_K", 5: "Q3_K", 6: "Q4_K", 7: "Q5_K", 8: "Q6_K"}


def lanes() -> int:
    """Activation rows a register holds (a group of ``interleaved``): 16 where the target has AVX-512 VNNI, else 8."""
    return 16 if _VNNI else 8


def _splat(builder, value, vty):
    """``value`` in every lane of a ``vty``."""
    vec = builder.insert_element(ir.Constant(vty, None), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(_I32, vty.count), [0] * vty.count))


def _half_at(builder, wat, offset: int):
    """The fp16 at byte ``offset`` of a block, widened to float32."""
    at = builder.inttoptr(builder.add(wat, ir.Constant(_I64, offset)), ir.HalfType().as_pointer())
    return builder.fpext(builder.load(at, align=1), _F32)


# ---- a block's values and scales, as ggml's dots unpack them -------------------------------------------------------


def _k4_scales(builder, wat):
    """A Q4_K or Q5_K block's eight 6-bit scales and eight mins (``get_scale_min_k4`` of sub-blocks 0…7, from the 12
    packed bytes at 4) as two ``<8 x i32>``, and its ``d`` and ``dmin`` widened from fp16 — from the block's first
    16 bytes, in vector code: sub-block ``j < 4``: scale ``b₄₊ⱼ & 63``, min ``b₈₊ⱼ & 63``; ``j ≥ 4``: scale ``(b₈₊ⱼ &
    15) | (b_j >> 6) << 4``, min ``(b₈₊ⱼ >> 4) | (b₄₊ⱼ >> 6) << 4``."""
    b16 = ir.VectorType(_I8, 16)
    b8 = ir.VectorType(_I8, 8)
    b = _load(builder, wat, 0, b16)
    zero = ir.Constant(b16, [0] * 16)

    def pick(indices):
        return builder.shuffle_vector(b, zero, ir.Constant(_V8, indices))

    def const(values):
        return ir.Constant(b8, values)

    # Every shift is by one amount across the lanes (a lane with nothing to shift holds a zero byte, ``pick`` 16):
    # x86 has no byte shifts, and a shift by lane widened each to a word and back.
    six, four = const([6] * 8), const([4] * 8)
    low_sc = builder.and_(pick([4, 5, 6, 7, 12, 13, 14, 15]), const([63] * 4 + [15] * 4))
    sc = builder.or_(low_sc, builder.shl(builder.lshr(pick([16] * 4 + [4, 5, 6, 7]), six), four))
    low_mn = builder.or_(builder.and_(pick([8, 9, 10, 11, 16, 16, 16, 16]), const([63] * 8)),
                         builder.lshr(pick([16] * 4 + [12, 13, 14, 15]), four))
    mn = builder.or_(low_mn, builder.shl(builder.lshr(pick([16] * 4 + [8, 9, 10, 11]), six), four))
    return builder.zext(sc, _V8), builder.zext(mn, _V8), _half_at(builder, wat, 0), _half_at(builder, wat, 2)


def _k6_scales(builder, wat):
    """A Q6_K block's sixteen int8 scales (at 192) as ``<16 x i32>`` and its ``d`` (fp16 at 208) widened."""
    return builder.sext(_load(builder, wat, 192, ir.VectorType(_I8, 16)), _V16), _half_at(builder, wat, 208)


def _k_values(builder, code: int, wat):
    """A Q2_K (code 4), Q3_K (5), Q4_K (6), Q5_K (7) or Q6_K (8) block's 256 values, unsigned (``OFFSET`` above the
    value: Q3_K's 0…7, Q6_K's 0…63), as eight ``<32 x i8>`` in value order — run ``c`` the values ``32c … 32c+31`` —
    from its bytes at ``wat``. Q2_K: ``qs[64]`` at 16, run ``4h+m`` bits ``2m`` of ``qs[32h + l]``; Q3_K: those of
    its ``qs[64]`` at 32, with bit ``4h+m`` of ``hmask[l]`` (at 0) above them (set: the value as is; clear: less 4).
    Q4_K and Q5_K: ``qs[128]`` (at 16; Q5_K's at 48, after ``qh[32]``), run ``2g`` the low nibbles of bytes
    ``32g…32g+31``, run ``2g+1`` their high ones, Q5_K's fifth bit of value ``32·run + l`` bit ``run`` of ``qh[l]``;
    Q6_K: ``ql[128]``, ``qh[64]``, run ``4h+m`` of the half ``h`` the nibble ``m // 2`` of ``ql[64h + 32(m mod 2) +
    l]`` with bits ``2m`` of ``qh[32h + l]`` above it."""
    def splat(value):
        return ir.Constant(_B32, [value] * 32)

    runs = []
    if code in (4, 5):
        hmask = _load(builder, wat, 0, _B32) if code == 5 else None
        for h in range(2):
            q = _load(builder, wat, (32 if code == 5 else 16) + 32 * h, _B32)
            for m in range(4):
                v = builder.and_(builder.lshr(q, splat(2 * m)), splat(3))
                if code == 5:
                    bit = builder.and_(builder.lshr(hmask, splat(4 * h + m)), splat(1))
                    v = builder.or_(v, builder.shl(bit, splat(2)))
                runs.append(v)
        return runs
    if code in (6, 7):
        qh = _load(builder, wat, 16, _B32) if code == 7 else None
        for g in range(4):
            q = _load(builder, wat, (48 if code == 7 else 16) + 32 * g, _B32)
            for half, v in enumerate((builder.and_(q, splat(15)), builder.lshr(q, splat(4)))):
                if code == 7:
                    bit = builder.and_(builder.lshr(qh, splat(2 * g + half)), splat(1))
                    v = builder.or_(v, builder.shl(bit, splat(4)))
                runs.append(v)
        return runs
    for h in range(2):
        ql = [_load(builder, wat, 64 * h + 32 * t, _B32) for t in (0, 1)]
        qh = _load(builder, wat, 128 + 32 * h, _B32)
        for m in range(4):
            low = builder.and_(builder.lshr(ql[m % 2], splat(4 * (m // 2))), splat(15))
            top = builder.and_(builder.lshr(qh, splat(2 * m)), splat(3))
            runs.append(builder.or_(low, builder.shl(top, splat(4))))
    return runs


def _store(builder, at, offset: int, value):
    builder.store(value, builder.inttoptr(builder.add(at, ir.Constant(_I64, offset)), value.type.as_pointer()),
                  align=1)


def _unpacker(code: int):
    """An intrinsic ``unpack(w, n, i, v, sc, mn, dd, slot)``: block ``i`` of weight row ``n`` of ``w`` (its blocks'
    bytes) into slot ``slot`` of its thread's scratch (the first index of each array) — ``v`` its 256 values unsigned
    in value order (``_k_values``: ``OFFSET`` above the value), per sub-block ``sc`` its scale (int32), ``mn`` its mins
    two to an int32 (``_word_pairs``; the types with mins), ``dd`` its ``d`` and ``dmin`` (float32, side by side)."""
    nbytes = SHAPES[code][0]

    @intrinsic
    def unpack(typingctx, w, n, i, v, sc, mn, dd, slot):
        def codegen(context, builder, signature, args):
            w, n, i, v, sc, mn, dd, slot = args
            wty, _, _, vty, scty, mnty, dty, _ = signature.args
            n, i, slot = (builder.sext(a, _I64) if a.type != _I64 else a for a in (n, i, slot))
            zero = ir.Constant(_I64, 0)
            wat = _address(context, builder, wty, w, (n, builder.mul(i, ir.Constant(_I64, nbytes))), 1)
            vat = _address(context, builder, vty, v, (slot, zero), 1)
            sat, mat = (_address(context, builder, t, a, (slot, zero), 4) for t, a in ((scty, sc), (mnty, mn)))
            dat = _address(context, builder, dty, dd, (slot, zero), 4)
            for c, u in enumerate(_k_values(builder, code, wat)):
                _store(builder, vat, 32 * c, u)
            scales, low, d, dmin = _k_scales(builder, code, wat)
            if low is not None:
                _store(builder, mat, 0, _word_pairs(builder, low))
            _store(builder, sat, 0, scales)
            _store(builder, dat, 0, d)
            _store(builder, dat, 4, dmin)
            return context.get_dummy_value()

        return types.void(w, n, i, v, sc, mn, dd, slot), codegen

    return unpack


def _word_pairs(builder, v):
    """The values of ``v`` (``<n x i32>``, each below 2¹⁵) as ``n/2`` int32 each holding two int16: element ``2t`` in
    its low half, ``2t + 1`` in its high one — what ``vpdpwssd`` and ``vpmaddwd`` multiply in pairs."""
    n = v.type.count
    half = ir.VectorType(_I32, n // 2)
    even, odd = (builder.shuffle_vector(v, v, ir.Constant(half, list(range(j, n, 2)))) for j in (0, 1))
    return builder.or_(even, builder.shl(odd, ir.Constant(half, [16] * (n // 2))))


def _k_scales(builder, code: int, wat):
    """A block's sub-block scales (signed, ``<per x i32>``), its mins (``<per x i32>``, or None for a type without),
    ``d`` and ``dmin`` (0 without mins): Q2_K's ``scales[16]`` at 0, scale the low nibble and min the high one, ``d``
    at 80, ``dmin`` at 82; Q3_K's sixteen 6-bit scales less 32 — low nibbles of bytes 96…103 (sub-blocks 0…7 the low
    ones, 8…15 the high), bits ``2·(s // 4)`` of byte ``104 + s mod 4`` above them — ``d`` at 108 (its 110 bytes read
    no further); Q4_K's, Q5_K's and Q6_K's as ``_k4_scales`` and ``_k6_scales`` read them."""
    if code in (6, 7):
        return _k4_scales(builder, wat)
    if code == 8:
        scales, d = _k6_scales(builder, wat)
        return scales, None, d, ir.Constant(_F32, 0.0)
    b16 = ir.VectorType(_I8, 16)
    if code == 4:
        b = _load(builder, wat, 0, b16)
        return (builder.zext(builder.and_(b, ir.Constant(b16, [15] * 16)), _V16),
                builder.zext(builder.lshr(b, ir.Constant(b16, [4] * 16)), _V16), _half_at(builder, wat, 80),
                _half_at(builder, wat, 82))
    b8, b4 = ir.VectorType(_I8, 8), ir.VectorType(_I8, 4)
    low8 = _load(builder, wat, 96, b8)
    low = builder.shuffle_vector(builder.and_(low8, ir.Constant(b8, [15] * 8)),
                                 builder.lshr(low8, ir.Constant(b8, [4] * 8)), ir.Constant(_V16, list(range(16))))
    high4 = _load(builder, wat, 104, b4)
    parts = [builder.and_(builder.lshr(high4, ir.Constant(b4, [2 * j] * 4)), ir.Constant(b4, [3] * 4))
             for j in range(4)]
    eight = ir.Constant(_V8, list(range(8)))
    high = builder.shuffle_vector(builder.shuffle_vector(parts[0], parts[1], eight),
                                  builder.shuffle_vector(parts[2], parts[3], eight), ir.Constant(_V16, list(range(16))))
    scales = builder.or_(low, builder.shl(high, ir.Constant(b16, [4] * 16)))
    return (builder.sub(builder.zext(scales, _V16), ir.Constant(_V16, [32] * 16)), None, _half_at(builder, wat, 108),
            ir.Constant(_F32, 0.0))


def _dot2(builder, acc, a, b, width: int):
    """``acc + a₂ₗ·b₂ₗ + a₂ₗ₊₁·b₂ₗ₊₁`` in each int32 lane ``l`` of ``width``, ``a`` and ``b`` pairs of int16 (as
    ``<width x i32>``): ``vpdpwssd`` on AVX-512 VNNI, ``vpmaddwd`` on AVX2, else generic code. Exact (the sums far below
    2³¹)."""
    if width == 16:
        dpwssd = builder.module.declare_intrinsic("llvm.x86.avx512.vpdpwssd.512", (), ir.FunctionType(_V16, [_V16] * 3))
        return builder.call(dpwssd, [acc, a, b])
    h16 = ir.VectorType(_I16, 16)
    ah, bh = builder.bitcast(a, h16), builder.bitcast(b, h16)
    if _AVX2:
        words = builder.module.declare_intrinsic("llvm.x86.avx2.pmadd.wd", (), ir.FunctionType(_V8, [h16] * 2))
        return builder.add(acc, builder.call(words, [ah, bh]))
    v16 = ir.VectorType(_I32, 16)
    p = builder.mul(builder.sext(ah, v16), builder.sext(bh, v16))
    even, odd = (builder.shuffle_vector(p, p, ir.Constant(_V8, list(range(j, 16, 2)))) for j in (0, 1))
    return builder.add(acc, builder.add(even, odd))


def _dot4(builder, acc, u, x, width: int):
    """``acc + Σ_{j<4} u[4l+j]·x[4l+j]`` in each int32 lane ``l`` of ``width`` (``u`` unsigned bytes — the weight's
    values, at most 63 — and ``x`` signed ones, both as ``<width x i32>``): ``vpdpbusd`` on AVX-512 VNNI; on AVX2
    ``vpmaddubsw`` (pairs, at most 2·63·127: never saturating) then ``vpmaddwd`` by ones; else generic code. Exact
    either way."""
    if width == 16:
        dpbusd = builder.module.declare_intrinsic("llvm.x86.avx512.vpdpbusd.512", (), ir.FunctionType(_V16, [_V16] * 3))
        return builder.call(dpbusd, [acc, u, x])
    ub, xb = builder.bitcast(u, _B32), builder.bitcast(x, _B32)
    if _AVX2:
        h16 = ir.VectorType(_I16, 16)
        pairs = builder.module.declare_intrinsic("llvm.x86.avx2.pmadd.ub.sw", (), ir.FunctionType(h16, [_B32] * 2))
        words = builder.module.declare_intrinsic("llvm.x86.avx2.pmadd.wd", (), ir.FunctionType(_V8, [h16] * 2))
        return builder.add(acc, builder.call(words, [builder.call(pairs, [ub, xb]), ir.Constant(h16, [1] * 16)]))
    v32 = ir.VectorType(_I32, 32)
    p = builder.mul(builder.zext(ub, v32), builder.sext(xb, v32))
    quads = [builder.shuffle_vector(p, p, ir.Constant(_V8, list(range(j, 32, 4)))) for j in range(4)]
    return builder.add(acc, builder.add(builder.add(quads[0], quads[1]), builder.add(quads[2], quads[3])))


#: The register tile: weight rows (columns of the product) and groups of activation rows computed together — each
#: activation register loaded once for the columns, each weight value broadcast once for the groups.
_COLUMNS = 4
_GROUPS = 3


def _tiler(code: int, cols: int):
    """An intrinsic ``tile(xi, sx, dxi, v, sc, mn, corr, dd, i, slot, acc)``: block ``i`` of the columns in slots
    ``slot … slot + cols − 1`` of the scratch (``_unpacker``'s, that block's) with every group of ``interleaved``'s
    activations, ``_GROUPS`` groups at a time, then the rest: ``acc[slot + c, g, l] ← fma(r, y.d, acc[…])`` — each
    (column, group) pair its own integers and its own float32 lanes, so the tile changes which registers are computed
    side by side, nothing else."""
    _, sub, mins = SHAPES[code]
    per = QK_K // sub
    width = lanes()

    @intrinsic
    def tile(typingctx, xi, sx, dxi, v, sc, mn, dd, i, slot, acc):
        def codegen(context, builder, signature, args):
            vi, vf = ir.VectorType(_I32, width), ir.VectorType(_F32, width)
            xi, sx, dxi, v, sc, mn, dd, i, slot, acc = args
            xty, sxty, dxty, vty, scty, mnty, dty, _, _, aty = signature.args
            i, slot = (builder.sext(a, _I64) if a.type != _I64 else a for a in (i, slot))
            fma = builder.module.declare_intrinsic(f"llvm.fma.v{width}f32", (), ir.FunctionType(vf, [vf] * 3))
            groups = builder.extract_value(context.make_array(dxty)(context, builder, dxi).shape, 0)
            zero_i = ir.Constant(vi, [0] * width)

            def const(value):
                return ir.Constant(_I64, value)

            def splat(at, ty, vty):  # the value of type ``ty`` at the address ``at`` in every lane
                return _splat(builder, builder.load(builder.inttoptr(at, ty.as_pointer()), align=1), vty)

            slots = [builder.add(slot, const(c)) for c in range(cols)]
            vats = [_address(context, builder, vty, v, (k, const(0)), 1) for k in slots]
            sats, mats = ([_address(context, builder, t, a, (k, const(0)), 4) for k in slots]
                          for t, a in ((scty, sc), (mnty, mn)))
            first = builder.mul(i, const(per))

            def emit(g0, count):  # groups g0 … g0 + count − 1
                gs = [builder.add(g0, const(h)) for h in range(count)]
                pairs = [(c, h) for c in range(cols) for h in range(count)]
                xats = [_address(context, builder, xty, xi, (g, builder.mul(i, const(QK_K // 4)), const(0)), 1)
                        for g in gs]
                # A loop over the sub-blocks, not unrolled: the tile's registers are its sums, its ``s₁`` and one
                # step's activations — unrolled, LLVM interleaved the sub-blocks' loads and spilled.
                s1 = {key: cgutils.alloca_once_value(builder, zero_i) for key in pairs}
                s2 = {key: cgutils.alloca_once_value(builder, zero_i) for key in pairs}
                with cgutils.for_range(builder, const(per)) as inner:
                    s = inner.index
                    at = builder.mul(s, const(sub))
                    # Each pair's sum in ``chains`` independent parts (the steps alternate), enough of them in
                    # flight to cover ``vpdpbusd``'s latency when the tile is narrow.
                    chains = max(1, 8 // len(pairs))
                    if not OFFSET[code]:
                        starts = [zero_i] * count
                    else:  # Q3_K's values less 4, Q6_K's less 32: −offset·S of the sub-block, the activations' sum
                        starts = [builder.load(builder.inttoptr(_address(context, builder, sxty, sx, (
                            g, builder.add(first, s), const(0)), 4), vi.as_pointer()), align=4) for g in gs]
                    sums = {(c, h): [starts[h]] + [zero_i] * (chains - 1) for c, h in pairs}
                    for j in range(sub // 4):
                        xs = [_load(builder, builder.add(xat, builder.mul(at, const(width))), 4 * j * width, vi)
                              for xat in xats]
                        for c in range(cols):
                            wv = splat(builder.add(builder.add(vats[c], at), const(4 * j)), _I32, vi)
                            for h in range(count):
                                part = sums[c, h]
                                part[j % chains] = _dot4(builder, part[j % chains], wv, xs[h], width)
                    for c in range(cols):
                        scale = splat(builder.add(sats[c], builder.mul(s, const(4))), _I32, vi)
                        for h in range(count):
                            whole = functools.reduce(builder.add, sums[c, h])
                            builder.store(builder.add(builder.load(s1[c, h]), builder.mul(whole, scale)), s1[c, h])
                if mins:  # s₂ = Σ min·S over the block's sub-blocks, two sub-blocks a step
                    for t in range(per // 2):
                        got = [builder.load(builder.inttoptr(_address(context, builder, sxty, sx, (
                            g, builder.add(builder.mul(i, const(per // 2)), const(t)), const(0)), 4), vi.as_pointer()),
                            align=4) for g in gs]
                        for c in range(cols):
                            two = splat(builder.add(mats[c], const(4 * t)), _I32, vi)
                            for h in range(count):
                                builder.store(_dot2(builder, builder.load(s2[c, h]), got[h], two, width), s2[c, h])
                for c, k in enumerate(slots):  # r = fma(−dmin, float(s₂), d·float(s₁)); acc ← fma(r, y.d, acc)
                    dat = _address(context, builder, dty, dd, (k, const(0)), 4)
                    d = splat(dat, _F32, vf)
                    negmin = builder.fsub(ir.Constant(vf, [-0.0] * width), splat(builder.add(dat, const(4)), _F32, vf))
                    for h, g in enumerate(gs):
                        res = builder.fmul(d, builder.sitofp(builder.load(s1[c, h]), vf))
                        if mins:
                            res = builder.call(fma, [negmin, builder.sitofp(builder.load(s2[c, h]), vf), res])
                        yd = builder.load(builder.inttoptr(_address(context, builder, dxty, dxi, (g, i, const(0)), 4),
                                                           vf.as_pointer()), align=4)
                        to = builder.inttoptr(_address(context, builder, aty, acc, (k, g, const(0)), 4),
                                              vf.as_pointer())
                        builder.store(builder.call(fma, [res, yd, builder.load(to, align=4)]), to, align=4)

            # ``_GROUPS`` groups at a time, then what is left two at a time and one.
            start = const(0)
            for count in sorted({_GROUPS, 2, 1}, reverse=True):
                stop = builder.add(start, builder.mul(builder.sdiv(builder.sub(groups, start), const(count)),
                                                      const(count)))
                with cgutils.for_range_slice(builder, start, stop, const(count)) as (g, _):
                    emit(g, count)
                start = stop
            return context.get_dummy_value()

        return types.void(xi, sx, dxi, v, sc, mn, dd, i, slot, acc), codegen

    return tile


def interleaved(q: np.ndarray, d: np.ndarray, bsums: np.ndarray, code: int):
    """Q8_K activations (``ggml_quants.quantize_q8_k``'s ``q``, ``d``, ``bsums``; ``rows × k``) laid out for
    ``_tiler`` over the type ``code``, rows in groups of ``lanes()`` (the last padded with zeros): ``xi[g, c, 4l + j]``
    the byte ``q`` of value ``4c + j`` of row ``g·lanes + l``; ``dxi[g, i, l]`` its block ``i``'s ``d``; ``sx[g, t,
    l]`` for a type with mins its sums of sub-blocks ``2t`` and ``2t + 1`` as a pair of int16, for one with an
    ``OFFSET`` its sum of sub-block ``t`` times ``−OFFSET``."""
    _, sub, mins = SHAPES[code]
    rows, k = q.shape
    width = lanes()
    groups = -(-rows // width)
    padded = groups * width
    quads = np.zeros((padded, k // 4), np.int32)  # four values a row as one int32: a transpose of words, not bytes
    quads[:rows] = np.ascontiguousarray(q).view(np.int32)
    xi = np.ascontiguousarray(quads.reshape(groups, width, k // 4).transpose(0, 2, 1)).view(np.int8)
    dx = np.zeros((padded, k // QK_K), np.float32)
    dx[:rows] = d
    dxi = np.ascontiguousarray(dx.reshape(groups, width, -1).transpose(0, 2, 1))
    sums = bsums if sub == 16 else bsums[:, 0::2] + bsums[:, 1::2]  # the activations' sum of each sub-block
    if mins:
        sums = (sums[:, 0::2] & 0xFFFF) | (sums[:, 1::2] << 16)  # |S| ≤ 32·127: each fits int16
    else:
        sums = sums * np.int32(-OFFSET[code])
    padded_sums = np.zeros((padded, sums.shape[1]), np.int32)
    padded_sums[:rows] = sums
    return xi, np.ascontiguousarray(padded_sums.reshape(groups, width, -1).transpose(0, 2, 1)), dxi


@functools.lru_cache(maxsize=None)
def tiled_kernel(code: int):
    """The tiled product's kernel over ``code`` (``NAMES``: 4 Q2_K … 8 Q6_K): ``product(xi, sx, dxi, w, rows, nthreads,
    out)`` writes ``out[r, n]`` for every activation row ``r < rows`` (``interleaved``'s layout) and weight row ``n``,
    ``TASK_COLUMNS`` columns a task taken by the ``nthreads`` threads as each is free (``jit.claim``), block by block:
    each weight row's block unpacked once into its thread's scratch (``_unpacker``) and computed with every group
    (``_tiler``). Made once a process a type."""
    _, sub, _ = SHAPES[code]
    unpack, tile = _unpacker(code), _tiler(code, _COLUMNS)

    def share(xi, sx, dxi, w, rows, out, taken):
        # A task's columns block by block: the block's activations (every group's) stay in the core's first cache
        # while each column tile of the task reads them, and the task's sums are kept in ``acc`` between blocks. A
        # task's last tile short of ``_COLUMNS`` columns fills its other slots with its last column, computed and
        # dropped (one tile's code, not a second compiled for one column).
        groups, blocks, width = dxi.shape
        n_out = w.shape[0]
        tasks = (n_out + TASK_COLUMNS - 1) // TASK_COLUMNS
        v = np.empty((TASK_COLUMNS, QK_K), dtype=np.int8)
        sc = np.empty((TASK_COLUMNS, QK_K // sub), dtype=np.int32)
        mn = np.empty((TASK_COLUMNS, QK_K // sub), dtype=np.int32)
        dd = np.empty((TASK_COLUMNS, 2), dtype=np.float32)
        acc = np.empty((TASK_COLUMNS, groups, width), dtype=np.float32)
        c = claim(taken)
        while c < tasks:
            n0 = c * TASK_COLUMNS
            cols = min(n_out, n0 + TASK_COLUMNS) - n0
            slots = (cols + _COLUMNS - 1) // _COLUMNS * _COLUMNS
            acc[:] = 0
            for i in range(blocks):
                for j in range(slots):
                    unpack(w, n0 + min(j, cols - 1), i, v, sc, mn, dd, j)
                for j in range(0, slots, _COLUMNS):
                    tile(xi, sx, dxi, v, sc, mn, dd, i, j, acc)
            for g in range(groups):
                for lane in range(width):
                    r = g * width + lane
                    if r < rows:
                        for j in range(cols):
                            out[r, n0 + j] = acc[j, g, lane]
            c = claim(taken)

    shared = on_threads(share)

    def product(xi, sx, dxi, w, rows, nthreads, out):
        shared(nthreads, (xi, sx, dxi, w, rows, out))

    name = NAMES[code]
    share.__qualname__ = share.__name__ = f"_tiled_share_{name}"
    product.__qualname__ = product.__name__ = f"_tiled_{name}"
    return compiled(kernel(product), *_OPERANDS)


#: ``tiled_kernel``'s operands as its kernels are compiled for them: the interleaved activations (``xi``, ``sx``,
#: ``dxi``), the weight's bytes read-only (mapped or in memory, one machine code), the rows, the threads, the results.
_OPERANDS = (array("int8", 3, "C"), array("int32", 3, "C"), array("float32", 3, "C"),
             array("uint8", 2, "C", readonly=True), INT64, INT64, array("float32", 2, "C"))
