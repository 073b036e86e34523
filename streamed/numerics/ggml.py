"""llama.cpp's CPU arithmetic, bit for bit: the kernels ggml's CPU backend runs for the operations a model's graph is
made of, as the vendored build compiles them (``llama-cpp-python`` 0.3.36, ``ggml-org/llama.cpp@0c1e57098``,
``use_extra_bufts`` off) on one of its x86-64 kernel paths (``cpu.KernelPath``: AVX2 or AVX-512, with llamafile's
tinyBLAS or without) — what ``--arithmetic llama.cpp`` computes. Every function whose result depends on the path takes
it (``path``); ``cpu.this_machine`` says which one the llama.cpp on a machine computes in.

Why bit for bit. llama.cpp quantises the activations of every Q8_0 product to Q8_0 (``quantize_row_q8_0``): a
rounding to one of 255 steps, so two implementations whose float32 sums differ in a last bit round a value that sits
near a half-step differently, and that step (about 1/127 of its block's largest value) is carried on through every
layer and position that reads it. At real widths there are millions of such roundings a run: any difference in the
arithmetic before them, however small, shows as a difference of 1e-2 in the logits. So each kernel here computes what
ggml's does, in the order ggml does it — each names the ggml function it is (``ggml/src/ggml-cpu/``) — and is held to
llama.cpp's own tensors, bit for bit, by ``tests/oracle/test_ggml_kernels.py`` on every path the host can run.

What depends on the path. A vector register holds ``L`` float32 values (8 under AVX2, 16 under AVX-512), and ggml
groups its sums by register: ``ggml_vec_dot_f32``/``_f16`` keep four accumulators of ``L`` lanes (``4L`` values a
step) and reduce them with ``GGML_F32_VEC_REDUCE``; tinyBLAS keeps one accumulator of ``L`` lanes and ``hsum``s it;
``soft_max``, the variance of ``norm`` and SiLU work a register at a time and leave the rest to scalar code; and
``ggml_v_expf`` is another sequence of roundings on each (AVX-512 scales by ``2ⁿ`` with ``scalef``, AVX2 multiplies
``k + k·j`` by a built power of two). The horizontal sums (``hsum``) of a register, as GCC compiles them:

- AVX-512 (``_mm512_reduce_add_ps``): lanes ``i`` and ``i+8``, then ``i`` and ``i+4``, ``i`` and ``i+2``, the two;
- AVX2, ``hsum_float_8``, tinyBLAS's ``hsum`` and ``soft_max``'s: ``tᵢ = vᵢ + vᵢ₊₄``, then ``(t₀+t₂) + (t₁+t₃)``;
- AVX2, ``GGML_F32x8_REDUCE`` (the dots'): ``tᵢ = vᵢ + vᵢ₊₄``, then two ``hadd``s: ``(t₀+t₁) + (t₂+t₃)``.

What depends on the batch. ggml chooses a kernel by the number of rows a product computes together (the tokens of a
batch): with one row, ``ggml_vec_dot_*``; with two or more, tinyBLAS (where the path has it) for float32 and float16
weights and for attention's ``p·v``. Q8_0 products take the same arithmetic on either path and either way (their
integer sums are exact, and ``hsum_float_8`` is the one AVX2 sum). ``rows`` (the rows of the step, not of a tile of
it) decides.

Math functions (``cosf``, ``sinf``, ``powf``, ``expf``) are the C library's, as ggml calls them: numba compiles them
to calls into the same libm.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from .product import (ACTIVATIONS, TASK_COLUMNS, WEIGHTS, _address, _element, _f32, _fma, _i32, _i64, _load, _v8,
                      operands, prefetch)
from .cpu import KernelPath
from .jit import (BOOLEAN, INT64, array, cgutils, claim, compiled, in_threads, intrinsic, kernel, on_threads, threads,
                  types)
from .q8 import BLOCK, BLOCK_BYTES, Planes

F32 = np.float32
#: Rows of ``X`` kept in cache together while a task's ``COLUMNS`` columns of ``W`` are read by a Q8_0 product (the
#: rows' int8 blocks 16 KB at a 2048 reduction, within a core's first-level cache); neither changes a sum's order.
ROW_TILE = 8
#: Columns of a Q8_0 product's task, taken by whichever thread is free next (``jit.claim``) — ggml's chunk of a
#: one-row product (``chunk_size`` 64). The threads then read neighbouring stretches of the weight at once, not two
#: halves far apart: a decode step's product over an FFN-sized weight (8192 × 2048, from memory, 2 threads, Intel
#: AVX-512 host) ran at 12.6–13.6 GB/s where the static halves ran at 10.8–13.2 (medians of 200 calls, 3 runs each).
COLUMNS = 64


# ---- Q8_0 activations (quantize_row_q8_0, arch/x86/quants.c) ------------------------------------------------------


def quantize_q8_0(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` (last axis a multiple of 32) as llama.cpp's CPU quantises a Q8_0 product's activations: per block of
    32, ``d = max|x| / 127`` rounded to fp16; ``q = round(x · (127 / max|x|))``, half to even (``_mm256_round_ps``,
    nearest), 0 where the block is all zeros. Returns ``q`` (int8, ``x``'s shape) and ``d`` (float32 holding the
    fp16 value, one per block)."""
    x = np.asarray(x, dtype=F32)
    k = x.shape[-1]
    if k % BLOCK:
        raise ValueError(f"Q8_0 activations need the reduction a multiple of {BLOCK}, not {k}")
    flat = np.ascontiguousarray(x.reshape(-1, k))
    q = np.empty(flat.shape, np.int8)
    d = np.empty((flat.shape[0], k // BLOCK), F32)
    _quantize_q8_0(flat, q, d)
    return q.reshape(x.shape), d.reshape(*x.shape[:-1], k // BLOCK)


@kernel
def _quantize_q8_0(x, q, d):
    """``quantize_q8_0``'s blocks in one pass: ``m`` = max|x|, ``d = fp16(m / 127)`` (``_half``) and ``q = rint(x ·
    (127 / m))`` (float32, half to even; 0 where the block is all zeros) — where numpy's dozen calls, and then its
    fp16 rounding's four, were 18 µs of a decode row's 2048 values (113 a 1B-shaped step)."""
    rows, k = x.shape
    for r in range(rows):
        for b in range(k // BLOCK):
            o = b * BLOCK
            m = np.float32(0)
            for j in range(BLOCK):
                m = max(m, abs(x[r, o + j]))
            d[r, b] = _half(m / np.float32(127))
            inv = np.float32(127) / m if m != 0 else np.float32(0)
            for j in range(BLOCK):
                q[r, o + j] = np.int8(np.rint(x[r, o + j] * inv))


@kernel
def _half(v):
    """The float32 ``v`` (not negative, or NaN) rounded to the nearest fp16, ties to even, as a float32 — numpy's
    ``astype(float16)`` and F16C's ``vcvtps2ph`` alike: ∞ from 65520 (half of fp16's last step past 65504), the
    fp16 subnormals' step 2⁻²⁴ below 2⁻¹⁴, else the step ``2^(e−10)`` of ``v``'s binade ``2^e``. Each product by a
    power of two is exact, so ``rint`` (half to even) is the one rounding."""
    if not v < np.float32(65520):  # ∞ and NaN as they are
        return v if v != v else np.float32(np.inf)
    if v < np.float32(2.0 ** -14):
        return np.float32(np.rint(v * np.float32(2.0 ** 24))) * np.float32(2.0 ** -24)
    step = _from_bits((((_bits(v) >> 23) & 0xFF) - 10) << 23)
    return np.float32(np.rint(v / step)) * step


# ---- Q8_0 × Q8_0 (ggml_vec_dot_q8_0_q8_0; tinyBLAS_Q0_AVX computes alike) ------------------------------------------

_i8x32 = ir.VectorType(ir.IntType(8), 32)
#: The quantised activations and their block scales as ``_q8_kernel`` is compiled for them (``jit.compiled``).
_INT8 = array("int8", 3, "C")
_SCALES = array("float32", 3, "A")
_i32x16 = ir.VectorType(_i32, 16)
_i32x8 = ir.VectorType(_i32, 8)


def _halves(builder, v, width: int):
    """The even and the odd elements of ``v``."""
    half = ir.VectorType(_i32, width // 2)
    return [builder.shuffle_vector(v, v, ir.Constant(half, list(range(j, width, 2)))) for j in (0, 1)]


def _target_features() -> set[str]:
    """The features of the CPU numba compiles for, as its code generator reads them: ``NUMBA_CPU_FEATURES`` when set
    (numba's setting for a cache made for another machine), else the host's. An intrinsic of a feature outside them
    is never emitted: LLVM cannot select it, and the process would abort."""
    from .images import target

    return set(target()[-1].split(","))


#: Whether the target has AVX2, whose byte products (``vpmaddubsw``) LLVM does not select for generic code.
_AVX2 = "+avx2" in _target_features()


def _block_sums(context, builder, qw, qx):
    """``Σ_{j<4} qw[4l+j]·qx[4l+j]`` for the eight lanes ``l`` of a block (32 int8 each), in int32 and exact: on AVX2
    as ggml's ``mul_sum_i8_pairs_float`` sums them — ``|qw|`` (unsigned) times ``qx`` with ``qw``'s sign, in pairs
    (``vpmaddubsw``: at most 2·128·127, never saturating, since an activation's ``|q|`` is at most 127), then pairs
    of pairs (``vpmaddwd`` by ones); elsewhere the same integers written generically."""
    i16x16 = ir.VectorType(ir.IntType(16), 16)
    if _AVX2:
        sign = builder.module.declare_intrinsic("llvm.x86.avx2.psign.b", (), ir.FunctionType(_i8x32, [_i8x32] * 2))
        bytes_ = builder.module.declare_intrinsic("llvm.x86.avx2.pmadd.ub.sw", (),
                                                  ir.FunctionType(i16x16, [_i8x32] * 2))
        words = builder.module.declare_intrinsic("llvm.x86.avx2.pmadd.wd", (), ir.FunctionType(_i32x8, [i16x16] * 2))
        pairs = builder.call(bytes_, [builder.call(sign, [qw, qw]), builder.call(sign, [qx, qw])])
        return builder.call(words, [pairs, ir.Constant(i16x16, [1] * 16)])
    i16x32 = ir.VectorType(ir.IntType(16), 32)
    (xe, xo), (we, wo) = _halves(builder, builder.sext(qx, i16x32), 32), _halves(builder, builder.sext(qw, i16x32), 32)
    pairs = builder.add(builder.mul(builder.sext(xe, _i32x16), builder.sext(we, _i32x16)),
                        builder.mul(builder.sext(xo, _i32x16), builder.sext(wo, _i32x16)))
    even, odd = _halves(builder, pairs, 16)
    return builder.add(even, odd)


def _hsum8_ir(builder, v):
    """``hsum_float_8`` of an ``<8 x float>``: ``((a₀+a₄)+(a₂+a₆)) + ((a₁+a₅)+(a₃+a₇))``."""
    a = [builder.extract_element(v, ir.Constant(_i32, i)) for i in range(8)]
    return builder.fadd(builder.fadd(builder.fadd(a[4], a[0]), builder.fadd(a[6], a[2])),
                        builder.fadd(builder.fadd(a[5], a[1]), builder.fadd(a[7], a[3])))


def _dots_operands(context, builder, signature, args):
    """A dots intrinsic's arguments (``qx, b, r, dx, w, wb, n, out``) with ``r`` and ``n`` as int64, and the number of
    blocks of the reduction."""
    qx, b, r, dx, w, wb, n, out = args
    r64 = builder.sext(r, _i64) if r.type != _i64 else r
    n64 = builder.sext(n, _i64) if n.type != _i64 else n
    shape = context.make_array(signature.args[0])(context, builder, qx).shape
    blocks = builder.udiv(cgutils.unpack_tuple(builder, shape, 3)[2], ir.Constant(_i64, BLOCK))
    return qx, b, r64, dx, w, wb, n64, out, blocks


def _q8_dots(rows: int, ahead: bool = False):
    """An intrinsic writing ``out[b, r+i, n]`` for ``i < rows``: the Q8_0 × Q8_0 dot of row ``r+i`` of ``qx[b]``
    with column ``n`` of ``w[wb]``, ``ggml_vec_dot_q8_0_q8_0``'s arithmetic — for each block, lane ``l`` takes
    ``acc[l] ← fma(d_w·d_x, Σ_{j<4} qw[4l+j]·qx[4l+j], acc[l])``, the integer sums exact (int8 widened to int16,
    products of at most 2¹⁴ summed in pairs to int32, as ``_mm256_maddubs_epi16`` and ``_mm256_madd_epi16`` sum
    them), the scales' product rounded once, one fma a lane; then ``hsum_float_8``. The accumulators stay in
    registers across the blocks, and each block of the weight is read and widened once for the rows."""

    @intrinsic
    def dots(typingctx, qx, b, r, dx, w, wb, n, out):
        def codegen(context, builder, signature, args):
            qx, b, r64, dx, w, wb, n64, out, blocks = _dots_operands(context, builder, signature, args)
            qxty, dxty, wty, outty = signature.args[0], signature.args[3], signature.args[4], signature.args[7]
            fma = builder.module.declare_intrinsic("llvm.fma.v8f32", (), ir.FunctionType(_v8, [_v8, _v8, _v8]))
            accs = [cgutils.alloca_once_value(builder, ir.Constant(_v8, [0.0] * 8)) for _ in range(rows)]
            with cgutils.for_range(builder, blocks) as loop:
                blk = loop.index
                wat = _address(context, builder, wty, w, (wb, n64, blk), BLOCK_BYTES)
                if ahead:
                    prefetch(builder, wat)
                dw = builder.fpext(builder.load(builder.inttoptr(wat, ir.HalfType().as_pointer()), align=1),
                                   ir.FloatType())
                qw = _load(builder, wat, 2, _i8x32)
                for i, acc in enumerate(accs):
                    row = builder.add(r64, ir.Constant(_i64, i))
                    xat = _address(context, builder, qxty, qx, (b, row, builder.mul(blk, ir.Constant(_i64, BLOCK))), 1)
                    dat = _address(context, builder, dxty, dx, (b, row, blk), 4)
                    dd = builder.fmul(dw, builder.load(builder.inttoptr(dat, ir.FloatType().as_pointer())))
                    splat = builder.insert_element(ir.Constant(_v8, None), dd, ir.Constant(_i32, 0))
                    splat = builder.shuffle_vector(splat, splat, ir.Constant(_i32x8, [0] * 8))
                    sums = _block_sums(context, builder, qw, _load(builder, xat, 0, _i8x32))
                    builder.store(builder.call(fma, [splat, builder.sitofp(sums, _v8), builder.load(acc)]), acc)
            for i, acc in enumerate(accs):
                at = _address(context, builder, outty, out, (b, builder.add(r64, ir.Constant(_i64, i)), n64), 4)
                builder.store(_hsum8_ir(builder, builder.load(acc)), builder.inttoptr(at, ir.FloatType().as_pointer()))
            return context.get_dummy_value()

        return types.void(qx, b, r, dx, w, wb, n, out), codegen

    return dots


#: Rows sharing one read of a weight's block; the rest one at a time. Neither changes a sum's order.
_Q8_ROWS = 4
_q8_rows, _q8_row = _q8_dots(_Q8_ROWS), _q8_dots(1, ahead=True)

#: Whether the target has AVX-512 VNNI (``vpdpbusd``: four byte products summed into an int32 lane, exactly) and BW.
_VNNI = {"+avx512vnni", "+avx512bw", "+avx512f"} <= _target_features()
_i8x64 = ir.VectorType(ir.IntType(8), 64)
_v16 = ir.VectorType(_f32, 16)
_mask64 = ir.VectorType(_i32, 64)


def _q8_pairs(rows: int, pairs: int):
    """``_q8_dots`` for ``rows`` rows and ``2·pairs`` columns at once, on AVX-512 VNNI: an intrinsic writing
    ``out[b, r+i, n+c]`` for ``i < rows``, ``c < 2·pairs``, each the very sum ``_q8_dots`` computes. Two columns share
    a 16-lane register: lanes ``0…7`` are column ``n+2p``'s 8 lanes, ``8…15`` column ``n+2p+1``'s, and lane ``l`` of
    each takes, block by block in increasing order, ``acc[l] ← fma(d_w·d_x, Σ_{j<4} qw[4l+j]·qx[4l+j], acc[l])`` —
    its own accumulator, its own blocks in ggml's order; only which registers are computed side by side changes.

    The integer sums, exact either way: ``vpdpbusd`` multiplies unsigned by signed bytes, so the activation is read
    as ``qx + 128`` (its bits with the top one flipped, in 0…255) and the sum starts from ``−128·Σ_{j<4} qw[4l+j]``
    (made once a weight's block for all the rows): ``−128·Σqw + Σ(qx+128)·qw = Σqx·qw`` in int32, no product or sum
    near its range. The scale ``d_w·d_x`` is the same float32 product (the two factors in a register)."""

    @intrinsic
    def dots(typingctx, qx, b, r, dx, w, wb, n, out):
        def codegen(context, builder, signature, args):
            if not _VNNI:  # never called there (``_q8_kernel``), and a VNNI instruction would not compile
                return context.get_dummy_value()
            qx, b, r64, dx, w, wb, n64, out, blocks = _dots_operands(context, builder, signature, args)
            qxty, dxty, wty, outty = signature.args[0], signature.args[3], signature.args[4], signature.args[7]
            fma = builder.module.declare_intrinsic("llvm.fma.v16f32", (), ir.FunctionType(_v16, [_v16] * 3))
            dpbusd = builder.module.declare_intrinsic("llvm.x86.avx512.vpdpbusd.512", (),
                                                      ir.FunctionType(_i32x16, [_i32x16] * 3))
            zero = ir.Constant(_i32x16, [0] * 16)
            top = builder.bitcast(ir.Constant(_i8x64, [-128] * 64), _i32x16)
            both = ir.Constant(_mask64, list(range(32)) * 2)
            accs = [[cgutils.alloca_once_value(builder, ir.Constant(_v16, [0.0] * 16)) for _ in range(pairs)]
                    for _ in range(rows)]
            with cgutils.for_range(builder, blocks) as loop:
                blk = loop.index
                qws, dws, starts = [], [], []
                for p in range(pairs):
                    halves, scales = [], ir.Constant(_v16, None)
                    for c in range(2):
                        col = builder.add(n64, ir.Constant(_i64, 2 * p + c))
                        wat = _address(context, builder, wty, w, (wb, col, blk), BLOCK_BYTES)
                        d = builder.load(builder.inttoptr(wat, ir.HalfType().as_pointer()), align=1)
                        scales = builder.insert_element(scales, builder.fpext(d, _f32), ir.Constant(_i32, 8 * c))
                        halves.append(_load(builder, wat, 2, _i8x32))
                    qws.append(builder.bitcast(builder.shuffle_vector(*halves, ir.Constant(_mask64, list(range(64)))),
                                               _i32x16))
                    dws.append(builder.shuffle_vector(scales, scales, ir.Constant(_i32x16, [0] * 8 + [8] * 8)))
                    # −128·Σ qw, as ``0 − vpdpbusd(0, 128, qw)``
                    starts.append(builder.sub(zero, builder.call(dpbusd, [zero, top, qws[p]])))
                for i in range(rows):
                    row = builder.add(r64, ir.Constant(_i64, i))
                    xat = _address(context, builder, qxty, qx, (b, row, builder.mul(blk, ir.Constant(_i64, BLOCK))), 1)
                    x = builder.xor(_load(builder, xat, 0, _i8x32), ir.Constant(_i8x32, [-128] * 32))
                    x = builder.bitcast(builder.shuffle_vector(x, x, both), _i32x16)
                    dat = _address(context, builder, dxty, dx, (b, row, blk), 4)
                    dxv = builder.insert_element(ir.Constant(_v16, None),
                                                 builder.load(builder.inttoptr(dat, _f32.as_pointer())),
                                                 ir.Constant(_i32, 0))
                    dxv = builder.shuffle_vector(dxv, dxv, ir.Constant(_i32x16, [0] * 16))
                    for p in range(pairs):
                        sums = builder.call(dpbusd, [starts[p], x, qws[p]])
                        acc = accs[i][p]
                        builder.store(builder.call(fma, [builder.fmul(dws[p], dxv), builder.sitofp(sums, _v16),
                                                         builder.load(acc)]), acc)
            for i in range(rows):
                row = builder.add(r64, ir.Constant(_i64, i))
                for p in range(pairs):
                    v = builder.load(accs[i][p])
                    for c in range(2):
                        half = builder.shuffle_vector(v, v, ir.Constant(_i32x8, list(range(8 * c, 8 * c + 8))))
                        col = builder.add(n64, ir.Constant(_i64, 2 * p + c))
                        at = _address(context, builder, outty, out, (b, row, col), 4)
                        builder.store(_hsum8_ir(builder, half), builder.inttoptr(at, _f32.as_pointer()))
            return context.get_dummy_value()

        return types.void(qx, b, r, dx, w, wb, n, out), codegen

    return dots


#: Columns a VNNI tile computes together (``_q8_pairs``); rows as ``_Q8_ROWS``. The rest of a group's columns, and
#: every column on a host without VNNI, take ``_q8_dots``.
_Q8_COLUMNS = 4
_q8_tile, _q8_tile_row = _q8_pairs(_Q8_ROWS, _Q8_COLUMNS // 2), _q8_pairs(1, _Q8_COLUMNS // 2)


@kernel
def _hsum8(a):
    """``hsum_float_8``: ``((a₀+a₄)+(a₂+a₆)) + ((a₁+a₅)+(a₃+a₇))``."""
    return ((a[4] + a[0]) + (a[6] + a[2])) + ((a[5] + a[1]) + (a[7] + a[3]))


def _q8_tasks(qx, dx, w, ratio, out, taken):
    """One thread's share of ``_q8_kernel``: the next task (``COLUMNS`` columns of one batch) as long as one is left."""
    nb_, rows, k = qx.shape
    n_out = w.shape[1]
    groups = (n_out + COLUMNS - 1) // COLUMNS
    tiled = _VNNI and rows >= _Q8_ROWS
    tasks = nb_ * groups
    g = claim(taken)
    while g < tasks:
        b = g // groups
        n0 = (g - b * groups) * COLUMNS
        n1 = min(n_out, n0 + COLUMNS)
        paired = n0 + (n1 - n0) // _Q8_COLUMNS * _Q8_COLUMNS if tiled else n0
        wb = b // ratio
        for r0 in range(0, rows, ROW_TILE):
            r1 = min(rows, r0 + ROW_TILE)
            shared = r0 + (r1 - r0) // _Q8_ROWS * _Q8_ROWS
            for n in range(n0, paired, _Q8_COLUMNS):
                for r in range(r0, shared, _Q8_ROWS):
                    _q8_tile(qx, b, r, dx, w, wb, n, out)
                for r in range(shared, r1):
                    _q8_tile_row(qx, b, r, dx, w, wb, n, out)
            for n in range(paired, n1):
                for r in range(r0, shared, _Q8_ROWS):
                    _q8_rows(qx, b, r, dx, w, wb, n, out)
                for r in range(shared, r1):
                    _q8_row(qx, b, r, dx, w, wb, n, out)
        g = claim(taken)


_q8_threads = on_threads(_q8_tasks)


@kernel
def _q8_kernel(qx, dx, w, ratio, nthreads, out):
    """``out[b, r, n]``: the Q8_0 dot of row ``r`` of ``qx[b]`` with column ``n`` of ``w[b // ratio]`` (``_q8_dots``),
    ``COLUMNS`` columns a task, ``nthreads`` threads each taking the next task as it is free (``jit.claim``), a tile of
    ``ROW_TILE`` rows kept in cache across a task's columns;
    on a VNNI host, with ``_Q8_ROWS`` rows or more, a group's columns ``_Q8_COLUMNS`` at a time (``_q8_pairs``), the
    rest one at a time. Fewer rows (a decode step's one) take a column at a time: a weight read once whatever the
    tile, one sequential stream a column streamed the mapped file at 18–19 GB/s where the tile's four did at 11–14
    (a 1-row product over 2 GB of an 8B's FFN weights, 2 threads), and the tile's work per block is made for rows
    that share it."""
    _q8_threads(nthreads, (qx, dx, w, ratio, out))


# ---- float32 and float16 dots -------------------------------------------------------------------------------------


@kernel
def _reduce16(v):
    """``_mm512_reduce_add_ps`` as GCC expands it: halves, then quarters, then pairs, then the two (the halves'
    sums held in scalars, not an array made each call: attention reduces a register for every cell)."""
    a0, a1, a2, a3 = v[8] + v[0], v[9] + v[1], v[10] + v[2], v[11] + v[3]
    a4, a5, a6, a7 = v[12] + v[4], v[13] + v[5], v[14] + v[6], v[15] + v[7]
    return ((a4 + a0) + (a6 + a2)) + ((a5 + a1) + (a7 + a3))


@kernel
def _hsum(v, lanes):
    """One register's horizontal sum: ``_mm512_reduce_add_ps`` (16 lanes), or AVX2's ``hsum`` (``hsum_float_8``,
    tinyBLAS's, soft_max's): ``tᵢ = vᵢ + vᵢ₊₄``, ``(t₀+t₂) + (t₁+t₃)``."""
    if lanes == 16:
        return _reduce16(v)
    return ((v[4] + v[0]) + (v[6] + v[2])) + ((v[5] + v[1]) + (v[7] + v[3]))


@kernel
def _vec_reduce(v, lanes):
    """``GGML_F32_VEC_REDUCE``'s last step, one register to a value: ``_mm512_reduce_add_ps`` (16 lanes), or AVX2's
    ``tᵢ = vᵢ + vᵢ₊₄`` and two ``_mm_hadd_ps``: ``(t₀+t₁) + (t₂+t₃)``."""
    if lanes == 16:
        return _reduce16(v)
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]))


@kernel
def _vec_dot(x, y, wide_tail, lanes, acc):
    """``ggml_vec_dot_f32`` (``wide_tail`` false) and ``ggml_vec_dot_f16`` (true) on values already widened to
    float32, ``L = lanes``: value ``k < n − n mod 4L`` goes to accumulator ``(k mod 4L) // L``, lane ``k mod L``, by
    fma in increasing ``k``; the four are added ``(s₀+s₂)+(s₁+s₃)`` and reduced (``_vec_reduce``); the rest one by
    one, each float32 product added in float32 (f32) or in float64 (f16). ``acc``: the caller's scratch of at least
    ``4 × lanes`` float32 (a kernel's, made once a thread's task, not once a dot)."""
    n = x.shape[0]
    step = 4 * lanes
    full = n - n % step
    acc[:4, :lanes] = 0
    for i in range(0, full, step):
        for j in range(4):
            for l in range(lanes):
                acc[j, l] = _fma(x[i + lanes * j + l], y[i + lanes * j + l], acc[j, l])
    for l in range(lanes):
        acc[0, l] = (acc[0, l] + acc[2, l]) + (acc[1, l] + acc[3, l])
    s = _vec_reduce(acc[0], lanes)
    if wide_tail:
        t = np.float64(s)
        for i in range(full, n):
            t += np.float64(np.float32(x[i] * y[i]))
        return np.float32(t)
    for i in range(full, n):
        s = s + x[i] * y[i]
    return s


@kernel
def _tiny(x, y, lanes, acc):
    """llamafile's ``tinyBLAS<L>`` element: one ``L``-lane fma accumulator over the reduction (a multiple of ``L``),
    then ``hsum``; ``acc`` the caller's scratch of at least ``lanes`` float32."""
    acc[:lanes] = 0
    for i in range(0, x.shape[0], lanes):
        for l in range(lanes):
            acc[l] = _fma(x[i + l], y[i + l], acc[l])
    return _hsum(acc, lanes)


def _float_tasks(x, w, ratio, tiny, wide_tail, lanes, out, taken):
    """One thread's share of ``_float_kernel``: the next ``TASK_COLUMNS`` columns while any are left, its scratch made
    once."""
    nb_, rows, k = x.shape
    n_out = w.shape[1]
    total = nb_ * n_out
    tasks = (total + TASK_COLUMNS - 1) // TASK_COLUMNS
    col = np.empty(k, np.float32)
    acc = np.empty((4, 16), np.float32)
    c = claim(taken)
    while c < tasks:
        for i in range(c * TASK_COLUMNS, min(total, (c + 1) * TASK_COLUMNS)):
            b = i // n_out
            n = i - b * n_out
            for j in range(k):
                col[j] = _element(w[b // ratio, n, j])
            for r in range(rows):
                out[b, r, n] = (_tiny(x[b, r], col, lanes, acc[0]) if tiny
                                else _vec_dot(x[b, r], col, wide_tail, lanes, acc))
        c = claim(taken)


_float_threads = on_threads(_float_tasks)


@kernel
def _float_kernel(x, w, ratio, tiny, wide_tail, lanes, nthreads, out):
    """``out[b] = x[b] · W[b // ratio]`` in ggml's float arithmetic (``mul_mat``), on ``nthreads`` threads taking
    ``TASK_COLUMNS`` columns at a time as each is free (``jit.claim``); a thread's scratch made once."""
    _float_threads(nthreads, (x, w, ratio, tiny, wide_tail, lanes, out))


def tiny_blas(rows: int, k: int, n: int, path: KernelPath, step: int = 0) -> bool:
    """Whether llamafile's tinyBLAS takes a float product (``llamafile_sgemm``): the path has it, two or more rows
    together, the reduction a multiple of the values one load takes (``k % KN``: ``step``, by default the register's
    lanes; 32 for bf16 pairs under AVX512_BF16), the output columns of 4 (``m % 4``)."""
    return path.tinyblas and rows >= 2 and k % (step or path.lanes) == 0 and n % 4 == 0


def mul_mat(x: np.ndarray, w, rows: int | None = None, batched: int = 0, *, path: KernelPath) -> np.ndarray:
    """``X · W`` as ``ggml_compute_forward_mul_mat`` computes it on ``path``, over the operands ``product.product``
    takes (``w`` float32, float16 or ``q8.Planes``; ``batched`` likewise). Q8_0: the activations quantised
    (``quantize_q8_0``), each element the Q8_0 dot. Float16: the activations rounded to fp16 (``from_float``), then as
    float32 on the widened values. Float32: tinyBLAS where ``tiny_blas`` says, else ``ggml_vec_dot_f32``. ``rows`` is
    how many rows ggml computes together (default: the operand's)."""
    o = operands(x, w, batched)
    out = o.empty()
    if not out.size:
        return o.shaped(out)
    if isinstance(w, Planes):
        q, d = quantize_q8_0(o.x)
        compiled(_q8_kernel, _INT8, _SCALES, WEIGHTS[o.raw.dtype], INT64, INT64, ACTIVATIONS)(
            q, d, o.raw, o.ratio, threads(), out)
    else:
        half = o.raw.dtype == np.float16
        xs = o.x.astype(np.float16).astype(F32) if half else o.x
        tiny = tiny_blas(o.x.shape[1] if rows is None else rows, o.x.shape[2], o.raw.shape[1], path)
        raw = o.raw.view(np.uint16) if half else o.raw
        compiled(_float_kernel, ACTIVATIONS, WEIGHTS[raw.dtype], INT64, BOOLEAN, BOOLEAN, INT64, INT64,
                 ACTIVATIONS)(xs, raw, o.ratio, tiny, half, path.lanes, threads(), out)
    return o.shaped(out)


# ---- norms ---------------------------------------------------------------------------------------------------------


@kernel
def _rms_norm(x, g, eps, out):
    rows, n = x.shape
    for r in range(rows):
        s = 0.0
        for i in range(n):
            s += np.float64(x[r, i] * x[r, i])
        mean = np.float32(s / n)
        scale = np.float32(1.0) / np.float32(math.sqrt(mean + eps))
        for i in range(n):
            out[r, i] = (x[r, i] * scale) * g[i]


def rms_norm(x: np.ndarray, gain: np.ndarray, epsilon: float, heads: int = 1) -> np.ndarray:
    """``ggml_compute_forward_rms_norm_f32`` followed by its ``mul`` (fused or not, one arithmetic): per row (per
    head's row when ``heads > 1``) ``Σ x²`` of float32 squares in float64 in order, ``mean`` rounded to float32,
    ``scale = 1/√(mean + ε)`` in float32, ``y = (x·scale)·g``."""
    x = np.asarray(x, dtype=F32)
    rows = x.reshape(-1, x.shape[-1] // heads)
    g = np.ascontiguousarray(gain, dtype=F32).reshape(-1)
    out = np.empty_like(rows)
    _rms_norm(np.ascontiguousarray(rows), g, F32(epsilon), out)
    return out.reshape(x.shape)


# ---- rotation (ggml_rope_cache_init, rotate_pairs) -----------------------------------------------------------------


@kernel
def _rope_tables(ctx, half, base, power, freq_scale, factors, low, high, ext_factor, mscale, cos, sin):
    """``ggml_rope_cache_init`` and ``rope_yarn`` as compiled (GCC contracts the ramp's mix into one fma), the angles'
    step ``base^power`` by ``powf`` here (a kernel of its own was a kernel more to compile in a first run)."""
    one, zero = np.float32(1.0), np.float32(0.0)
    theta_scale = np.float32(math.pow(base, power))
    for p in range(ctx):
        theta = np.float32(p)
        for i in range(half):
            extrap = theta / factors[i]
            t = freq_scale * extrap
            if ext_factor != zero:
                y = (np.float32(i) - low) / max(np.float32(0.001), high - low)
                mix = (one - min(one, max(zero, y))) * ext_factor
                t = _fma(t, one - mix, extrap * mix)
            cos[p, i] = np.float32(math.cos(t)) * mscale
            sin[p, i] = np.float32(math.sin(t)) * mscale
            theta = theta * theta_scale


@kernel
def _corr_dim(dims, context, turns, base):
    return np.float32(dims) * math.log(np.float32(context) / (turns * np.float32(2.0) * np.float32(math.pi))) \
        / (np.float32(2.0) * math.log(base))


def yarn_corr_dims(dims: int, context: int, base: float, fast: float, slow: float) -> tuple[np.float32, np.float32]:
    """``ggml_rope_yarn_corr_dims``: the dims at which the original context spans ``fast`` and ``slow`` turns, in
    float32 (``logf``), the first rounded down and the second up, clamped to ``[0, dims − 1]``."""
    low = math.floor(_corr_dim(dims, int(context), F32(fast), F32(base)))
    high = math.ceil(_corr_dim(dims, int(context), F32(slow), F32(base)))
    return F32(max(0, low)), F32(min(dims - 1, high))


def rope_tables(base: float, ctx: int, half: int, freq_scale: float = 1.0, factors: np.ndarray | None = None,
                mscale: float = 1.0, ramp: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The cosines and sines ggml's rope reads (``ggml_rope_cache_init``): at position ``p``, ``θ₀ = p`` and
    ``θᵢ₊₁ = θᵢ · base^(−2/R)`` in float32 (``powf``); angle ``freq_scale · θᵢ / fᵢ`` (``fᵢ`` the stored frequency
    factors: Llama 3's ``rope_freqs``, LongRoPE's list), with YaRN's ``ramp`` (its corrected dims,
    ``yarn_corr_dims``) mixed with the unscaled ``θᵢ / fᵢ`` as ``rope_yarn`` mixes them; ``cosf``/``sinf`` of it
    times ``mscale``, the float32 factor the rotation carries (for YaRN, ``rope_yarn``'s own term already in it)."""
    f = np.ones(half, F32) if factors is None else np.ascontiguousarray(factors, dtype=F32)
    low, high = ramp if ramp is not None else (F32(0), F32(0))
    cos = np.empty((ctx, half), F32)
    sin = np.empty((ctx, half), F32)
    _rope_tables(ctx, half, F32(base), F32(F32(-2.0) / F32(2 * half)), F32(freq_scale), f, F32(low), F32(high),
                 F32(1 if ramp is not None else 0), F32(mscale), cos, sin)
    return cos, sin


@kernel
def _rotate(x, c, s, first, stride, pairs):
    """``rotate_pairs`` as compiled (GCC contracts each line into one fma):
    ``y₀ = fma(x₀, cos, −x₁·sin)``, ``y₁ = fma(x₀, sin, x₁·cos)``."""
    rows, heads, _ = x.shape
    for r in range(rows):
        for h in range(heads):
            for i in range(pairs):
                a = first + (2 * i if stride == 1 else i)
                x0 = x[r, h, a]
                x1 = x[r, h, a + stride]
                ct = c[r, i]
                st = s[r, i]
                x[r, h, a] = _fma(x0, ct, -(x1 * st))
                x[r, h, a + stride] = _fma(x0, st, x1 * ct)


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, heads: int, rotating: int, after: int,
           interleaved: bool) -> np.ndarray:
    """``ggml_compute_forward_rope_flt`` on ``x`` (``rows × heads·width``) with the rows' cosines and sines (``rows ×
    rotating/2``): pairs adjacent (``interleaved``, GGML's normal mode) or halves (NeoX)."""
    x = np.array(x, dtype=F32).reshape(x.shape[0], heads, -1)
    half = rotating // 2
    _rotate(x, np.ascontiguousarray(cos[:, :half], dtype=F32), np.ascontiguousarray(sin[:, :half], dtype=F32),
            after, 1 if interleaved else half, half)
    return x.reshape(x.shape[0], -1)


# ---- exponentials (ggml_v_expf) ------------------------------------------------------------------------------------

_E = [F32(float.fromhex(h)) for h in ("0x1.715476p+0", "0x1.8p23", "0x1.62e4p-1", "0x1.7f7d1cp-20", "0x1.0e4020p-7",
                                      "0x1.573e2ep-5", "0x1.555e66p-3", "0x1.fffdb6p-2", "0x1.ffffecp-1")]
_LOG2E, _SHIFT, _LN2_HI, _LN2_LO, _P5, _P4, _P3, _P2, _P1 = _E


@intrinsic
def _bits(typingctx, x):
    """A float32's bits as an int64 in 0…2³²−1 (``_mm256_castps_si256``, one lane)."""

    def codegen(context, builder, signature, args):
        return builder.zext(builder.bitcast(args[0], _i32), _i64)

    return types.int64(types.float32), codegen


@intrinsic
def _from_bits(typingctx, x):
    """The float32 whose bits are ``x``'s low 32 (``_mm256_castsi256_ps``: integer lanes wrap)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.trunc(args[0], _i32), ir.FloatType())

    return types.float32(types.int64), codegen


@kernel
def v_expf(x, lanes):
    """``ggml_v_expf`` on one lane of the path's register. Both: ``z = fma(x, log₂e, 1.5·2²³)``, ``n = z − 1.5·2²³``
    (``round(x·log₂e)``), ``b = x − n·ln2`` in two fnmadds, ``u = b²``.

    AVX-512: ``j = fma(fma(fma(p₅,b,p₄), u, fma(p₃,b,p₂)), u, fma(p₁,b,1))``, the result ``j·2ⁿ``
    (``_mm512_scalef_ps``: rounded once); 0 or ∞ where ``|n| > 192``. Here ``(j·2ʰ)·2ⁿ⁻ʰ`` with ``h = ⌊n/2⌋``: both
    powers normal (``|h| ≤ 96``), the first product exact (``j`` is near 1), so only the second rounds — ``j·2ⁿ``
    rounded once, as ``scalef`` (and ``ldexp``) round it, for every float32 ``x`` (checked over all 2³² of them against
    ``ldexp``); in bit arithmetic, with no call, so a loop of it vectorises (``_silu``).

    AVX2: ``j = fma(fma(fma(p₅,b,p₄), u, fma(p₃,b,p₂)), u, p₁·b)`` (no 1), ``k = 2ⁿ`` built in the exponent bits
    (``z``'s bits shifted by 23, plus 1.0's), the result ``fma(j, k, k)``; where ``|n| > 126`` the scale is split in
    two (``s₂·(1+j)·s₁``), where ``|n| > 192`` it is ``s₁²`` (0 or ∞)."""
    z = _fma(x, _LOG2E, _SHIFT)
    n = z - _SHIFT
    b = _fma(-n, _LN2_LO, _fma(-n, _LN2_HI, x))
    u = b * b
    if lanes == 16:
        j = _fma(_fma(_fma(_P5, b, _P4), u, _fma(_P3, b, _P2)), u, _fma(_P1, b, np.float32(1.0)))
        m = _bits(z) - 0x4B400000  # n as an integer: z = 1.5·2²³ + n exactly while |n| ≤ 2²²
        h = m >> 1
        y = (j * _from_bits((h + 127) << 23)) * _from_bits((m - h + 127) << 23)
        if abs(n) > 192:
            y = np.float32(0.0) if n <= 0 else np.float32(np.inf)
        return y
    j = _fma(_fma(_fma(_P5, b, _P4), u, _fma(_P3, b, _P2)), u, _P1 * b)
    e = (_bits(z) << 23) & 0xFFFFFFFF
    k = _from_bits(e + 0x3F800000)
    if not abs(n) > 126:  # also false for NaN, as _CMP_GT_OQ is
        return _fma(k, j, k)
    g = 0x82000000 if n <= 0 else 0
    s1 = _from_bits(g + 0x7F000000)
    if abs(n) > 192:
        return s1 * s1
    s2 = _from_bits(e - g)
    return _fma(s2, j, s2) * s1


@kernel(error_model="numpy")
def _silu(x, lanes, out):
    """``numpy``'s error model: a float division by zero is IEEE's, not a raised error (``1 + e⁻ˣ`` is never 0), and
    without that branch LLVM vectorises the loop over whole registers, ``v_expf`` and all — the same operations on
    each value, in vector registers."""
    rows, n = x.shape
    full = n - n % lanes
    for r in range(rows):
        for i in range(full):
            out[r, i] = x[r, i] / (np.float32(1) + v_expf(np.float32(0) - x[r, i], lanes))
        for i in range(full, n):
            out[r, i] = x[r, i] / (np.float32(1) + np.float32(math.exp(-x[r, i])))


def silu(x: np.ndarray, *, path: KernelPath) -> np.ndarray:
    """``ggml_vec_silu_f32`` per row: ``x / (1 + e⁻ˣ)`` with ``ggml_v_expf`` over each row's whole registers, the C
    library's ``expf`` for the rest (``ggml_silu_f32``). ``ggml_vec_swiglu_f32`` is this times the gate."""
    x = np.asarray(x, dtype=F32)
    flat = np.ascontiguousarray(x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1))
    out = np.empty_like(flat)
    _silu(flat, path.lanes, out)
    return out.reshape(x.shape)


# ---- attention (mul_mat, soft_max_ext, mul_mat) ---------------------------------------------------------------------


@kernel
def _reduced(acc, four, lanes, count, t, out):
    """``out[j]``, ``j < count``: the registers ``acc[a, ·, j]`` summed as one dot's — with ``four``, the four
    accumulators as ``GGML_F32_VEC_REDUCE`` adds them (``(s₀+s₂)+(s₁+s₃)`` a lane, then ``_vec_reduce``), else the
    one register ``acc[0, ·, j]`` by ``_hsum`` — for every ``j`` at once. Each ``j`` takes the very operations in the
    same order as its own dot's reduction; the loops over ``j`` are innermost, so a sum is computed for a register's
    width of dots at a time (``t``: ``lanes × count`` scratch), where a dot at a time gathered its lanes through memory
    and added them one by one — for a decode step's attention, 32 heads × 64 cells × 2, three quarters of its time."""
    for l in range(lanes):
        if four:
            for j in range(count):
                t[l, j] = (acc[0, l, j] + acc[2, l, j]) + (acc[1, l, j] + acc[3, l, j])
        else:
            for j in range(count):
                t[l, j] = acc[0, l, j]
    if lanes == 16:  # _reduce16
        for j in range(count):
            a0, a1, a2, a3 = t[8, j] + t[0, j], t[9, j] + t[1, j], t[10, j] + t[2, j], t[11, j] + t[3, j]
            a4, a5, a6, a7 = t[12, j] + t[4, j], t[13, j] + t[5, j], t[14, j] + t[6, j], t[15, j] + t[7, j]
            out[j] = ((a4 + a0) + (a6 + a2)) + ((a5 + a1) + (a7 + a3))
    elif four:  # _vec_reduce, 8 lanes
        for j in range(count):
            out[j] = ((t[0, j] + t[4, j]) + (t[1, j] + t[5, j])) + ((t[2, j] + t[6, j]) + (t[3, j] + t[7, j]))
    else:  # _hsum, 8 lanes
        for j in range(count):
            out[j] = ((t[4, j] + t[0, j]) + (t[6, j] + t[2, j])) + ((t[5, j] + t[1, j]) + (t[7, j] + t[3, j]))


@kernel
def _keys_transposed(k, kt):
    """``kt[g, i, j] = k[j, g, i]``: the cache's keys (cells × groups × dims) as ``_attend`` reads them, dims × cells,
    16 cells a block. numpy's strided copy of the same took 13 ms for 8192 cells of 8 groups of 64 dims — every
    decode step's attention of every layer, three times its arithmetic."""
    n, groups, dk = k.shape
    for g in range(groups):
        for j0 in range(0, n, 16):
            block = k[j0:j0 + 16, g]
            for i in range(dk):
                row = kt[g, i, j0:j0 + 16]
                for j in range(block.shape[0]):
                    row[j] = block[j, i]


#: Cells a chunk of ``K·q`` takes together (``_attend``): its accumulators, 4 × 16 lanes × 64 float32, are 16 KB —
#: in the core's first-level cache while every dim of the head goes through them, where one pass over all the cells
#: a dim (160 KB of them at 640 cells) went through the second level three times a multiply-add.
CELLS = 64


@kernel(nogil=True)
def _attend(q, kt, vc, keep, span, scale, cap, tiny, sinks, lanes, finite, first, last, out):
    """Heads and rows ``first … last − 1`` of ``attention`` (task ``hr``: head ``hr // rows`` of row ``hr mod
    rows``), their scratch made once. One function, no kernel called but the registers' sums (``_reduced``) and
    ``v_expf``: numba
    links a called kernel's code into its caller and optimises and compiles it again there, so three levels of
    calls (and a parallel loop's outlined body) compiled the same loops four times in a cold first run.

    ``kq[j]`` = ``ggml_vec_dot_f32(k_j, q)`` for ``CELLS`` cells at once: element ``i`` of each dot goes to the
    accumulator and lane its own dot gives it (``(i mod 4L) // L``, ``i mod L``), in increasing ``i`` — each sum the
    cell's own, bit for bit, read a dim's row of the cells (``kt``: the keys transposed, dims × cells) at a time.
    ``soft_max_ext``, then ``out`` = ``p·V``: column ``c`` of the group's values dotted with ``p`` by tinyBLAS
    (``tiny``: one accumulator) or ``ggml_vec_dot_f32``, every column at once — cell ``j`` to the accumulator and
    lane the column's own dot gives it, each accumulator taking its cells in increasing ``j``, a cell's row of
    values read once, in order; each dot's registers summed as its own reduction, all the cells' (all the columns')
    at once (``_reduced``).

    Only the cells a row reads are computed — from its first kept cell to its last, ``span[r]`` = ``lo, hi``, never
    past ``ctx`` (a causal prefill's row ``r`` reads ``r + 1`` of them, a window's row its window) — and nothing changes a bit: a masked
    cell's score is −∞ whatever its dot, so its dot is not taken; its weight ``e^(−∞ − max)`` is +0 when the maximum is
    finite, so a register of such weights adds +0 to the float64 sum (which is never −0) and is not computed; and in
    ``p·V`` it adds ``v·(+0)`` to an accumulator that started at +0 — which leaves any accumulator as it is (one that
    starts at +0 never becomes −0 by adding), unless ``v`` is infinite or NaN: ``finite`` (the caller has looked at
    every value) says they are not, else every cell goes through ``p·V`` as in ggml. The padding's cells (``ctx …
    n − 1``, zeros in ggml's cache) are never read: their score is −∞, their weight +0 or — only where the maximum
    is −∞ — NaN, as every cell's then is. ``kt``: the keys transposed (``_keys_transposed``), groups × dims × cells."""
    rows, heads, dk = q.shape
    ctx, groups, dv = vc.shape
    n = keep.shape[1]  # the cells padded to a multiple of 64: ggml's sums over the padding's zeros are no sums
    ratio = heads // groups
    w = np.empty(n, np.float32)
    p = np.empty(n, np.float32)
    kq = np.empty((4, lanes, CELLS), np.float32)
    pv = np.empty((4, lanes, dv), np.float32)
    t = np.empty((lanes, max(CELLS, dv)), np.float32)
    step = 4 * lanes
    dk_full = dk - dk % step
    pv_step = lanes if tiny else step
    n_full = n - n % pv_step
    for hr in range(first, last):
        h = hr // rows
        r = hr - h * rows
        g = h // ratio
        x = q[r, h]
        lo, hi = span[r, 0], span[r, 1]
        for c0 in range(lo, hi, CELLS):
            count = min(hi - c0, CELLS)
            if dk_full == 0:
                kq[:] = 0
            for i in range(dk_full):
                a = (i % step) // lanes
                l = i % lanes
                xi = x[i]
                cells = kt[g, i, c0:c0 + count]  # indexed from 0: contiguous loads, no negative-index wrap
                acc = kq[a, l]
                if i < step:  # each accumulator's first: fma onto +0, as onto the zeroed register
                    for j in range(count):
                        acc[j] = _fma(cells[j], xi, np.float32(0))
                else:
                    for j in range(count):
                        acc[j] = _fma(cells[j], xi, acc[j])
            _reduced(kq, kq.shape[0] == 4, lanes, count, t, w[c0:c0 + count])  # True, not a constant: one ``_reduced``
            if dk_full < dk:
                for j in range(c0, c0 + count):
                    s = w[j]
                    for i in range(dk_full, dk):
                        s = s + kt[g, i, j] * x[i]
                    w[j] = s
        w[:lo] = -np.inf
        w[hi:] = -np.inf
        for j in range(lo, hi):
            w[j] = w[j] * scale
            if cap > 0:
                w[j] = np.float32(math.tanh(w[j] * (np.float32(1) / cap))) * cap
            if not keep[r, j]:
                w[j] = -np.inf
        m = np.float32(-np.inf)  # float32: ``w − max`` is a float32 difference, as ``ggml_v_expf``'s argument
        for j in range(lo, hi):  # −∞ elsewhere: ``max`` keeps ``m`` (it takes the new value only if greater)
            m = max(m, w[j])
        if sinks.shape[0]:
            m = max(m, sinks[h])
        sparse = math.isfinite(m)  # a masked cell's weight is +0
        total = 0.0
        for c in range(0, n, lanes):
            if sparse and (c + lanes <= lo or c >= hi):
                p[c:c + lanes] = 0
                continue
            wc, pc = w[c:c + lanes], p[c:c + lanes]  # indexed from 0, as ``cells`` above
            for l in range(lanes):
                pc[l] = v_expf(wc[l] - m, lanes)
            total += np.float64(_hsum(pc, lanes))
        if sinks.shape[0]:
            total += np.float64(np.float32(math.exp(sinks[h] - m)))
        inv = np.float32(1.0 / total)
        for j in range(n):
            p[j] = p[j] * inv
        if tiny:
            pv[0] = 0
        else:
            pv[:] = 0
        j0, j1 = (lo, min(hi, n_full)) if sparse and finite else (0, min(ctx, n_full))
        for j in range(j0, j1):
            a = 0 if tiny else (j % pv_step) // lanes
            l = j % lanes
            pj = p[j]
            for c in range(dv):
                pv[a, l, c] = _fma(vc[j, g, c], pj, pv[a, l, c])
        o = out[r, h]
        _reduced(pv, not tiny, lanes, dv, t, o)
        if not tiny and n_full < n:
            for c in range(dv):
                s = o[c]
                for j in range(n_full, n):
                    s = s + vc[j, g, c] * p[j]
                o[c] = s


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, keep: np.ndarray, heads: int, sharing: int,
              scale: float, sinks: np.ndarray | None = None, rows: int | None = None,
              softcap: float | None = None, *, path: KernelPath) -> np.ndarray:
    """llama.cpp's attention without flash attention, over a cache whose cell ``j`` holds position ``j``:
    ``kq = K·q`` by ``ggml_vec_dot_f32`` over the head's dims; ``soft_max_ext``: ``kq·scale`` (masked: −∞), its
    maximum (with the sink's), ``ggml_v_expf(w − max)`` summed a register at a time (``_hsum``) in float64, the sink's
    ``expf`` added, each value times ``(float)(1/sum)``; then ``p·V`` over the cells, by tinyBLAS when the batch
    has two or more rows (and the path has it), else ``ggml_vec_dot_f32``. A soft cap ``C`` turns the scaled ``w`` into
    ``C·tanhf(w·(1/C))`` (the document's order: Gemma 2's graph scales its queries before ``K·q`` — the same bits
    when the scale is a power of two, as ``1/√16`` is). llama.cpp's cache is padded to 256 cells, a multiple of 64: cells
    past the ones read hold zeros and weigh 0, so padding to a multiple of 64 changes no sum — ``keep`` (``rows ×
    ctx``) is padded so. A step of several rows (a prefill) looks at every value once, so that ``_attend`` may leave
    the cells a row does not read out of ``p·V`` (a decode step's one row reads nearly every cell: it does not)."""
    q, k, v = (np.ascontiguousarray(a, dtype=F32) for a in (q, k, v))
    r_, ctx = keep.shape
    n = -(-ctx // 64) * 64
    dk = q.shape[1] // heads
    dv = v.shape[1] // sharing
    kt = np.empty((sharing, dk, ctx), F32)
    _keys_transposed(k.reshape(ctx, sharing, dk), kt)
    vc = v.reshape(ctx, sharing, dv)
    kp = np.zeros((r_, n), bool)
    kp[:, :ctx] = keep
    read = kp.any(axis=1)  # each row's first and last kept cell (a row that keeps none: every cell of the cache)
    span = np.where(read[:, None], np.stack([kp.argmax(axis=1), n - kp[:, ::-1].argmax(axis=1)], axis=1),
                    np.array([0, ctx])).astype(np.int64)
    out = np.empty((r_, heads, dv), F32)
    s = np.zeros(0, F32) if sinks is None else np.ascontiguousarray(sinks, dtype=F32).reshape(-1)
    tiny = path.tinyblas and (r_ if rows is None else rows) >= 2 and dv % 4 == 0
    finite = r_ > 1 and bool(np.isfinite(v).all())
    args = (q.reshape(r_, heads, dk), kt, vc, kp, span, F32(scale), F32(softcap or 0), tiny, s, path.lanes, finite)
    in_threads(r_ * heads, lambda first, last: _attend(*args, first, last, out), r_ * heads * n * (dk + dv))
    return out.reshape(r_, heads * dv)


# ---- GELU (GGML_GELU_FP16) -----------------------------------------------------------------------------------------

_GELU_TABLE: np.ndarray | None = None


def gelu_table() -> np.ndarray:
    """ggml's ``ggml_table_gelu_f16``: for every fp16 value ``f``, ``fp16(½f(1 + tanh(√(2/π)·f·(1 + 0.044715f²))))``
    computed in float32 as ``ggml-cpu.c`` does (``_gelu_f32``)."""
    global _GELU_TABLE
    if _GELU_TABLE is None:
        f = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(F32)
        y = np.empty_like(f)
        _gelu_f32(f, y)
        _GELU_TABLE = y.astype(np.float16)
    return _GELU_TABLE


@kernel
def _gelu_f32(x, out):
    """``ggml_gelu_f32`` per value as compiled: ``½x·(1 + tanhf(c·x·fma(a·x, x, 1)))`` (GCC contracts ``1 + a·x·x``
    into one fma), ``tanhf`` the C library's. numpy's float32 ``tanh`` and an uncontracted sum each differ from it in
    last bits, and a last bit moves an entry whose value lies near an fp16 rounding boundary."""
    c = np.float32(0.79788456080286535587989211986876)
    a = np.float32(0.044715)
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = np.float32(0.5) * v * (np.float32(1) + np.float32(math.tanh(c * v * _fma(a * v, v, np.float32(1)))))


def gelu(x: np.ndarray) -> np.ndarray:
    """``ggml_vec_gelu_f32`` with ``GGML_GELU_FP16``: 0 below −10, ``x`` above 10, else the table at ``fp16(x)``."""
    x = np.asarray(x, dtype=F32)
    table = gelu_table()[x.astype(np.float16).view(np.uint16)].astype(F32)
    return np.where(x <= -10, F32(0), np.where(x >= 10, x, table)).astype(F32)


# ---- elementwise, norms and softmax of the recurrent and expert layers ---------------------------------------------


@kernel
def _unary(x, kind, out):
    for i in range(x.shape[0]):
        v = x[i]
        if kind == 0:  # op_sigmoid
            out[i] = np.float32(1) / (np.float32(1) + np.float32(math.exp(-v)))
        elif kind == 1:  # op_exp
            out[i] = np.float32(math.exp(v))
        elif kind == 2:  # op_softplus
            out[i] = v if v > 20 else np.float32(math.log(np.float32(1) + np.float32(math.exp(v))))
        else:  # op_tanh
            out[i] = np.float32(math.tanh(v))


_UNARY = {"sigmoid": 0, "exp": 1, "softplus": 2, "tanh": 3}


def unary(x: np.ndarray, kind: str) -> np.ndarray:
    """ggml's scalar unary ops (``unary-ops.cpp``), each value alone with the C library's functions: ``sigmoid``
    ``1/(1 + expf(−x))``, ``exp`` ``expf(x)``, ``softplus`` ``x`` above 20 else ``logf(1 + expf(x))``, ``tanh``."""
    x = np.asarray(x, dtype=F32)
    flat = np.ascontiguousarray(x.reshape(-1))
    out = np.empty_like(flat)
    _unary(flat, _UNARY[kind], out)
    return out.reshape(x.shape)


def soft_cap(x: np.ndarray, cap: float) -> np.ndarray:
    """A soft cap as llama.cpp's graphs write it: ``ggml_scale`` by ``1.0f/C``, ``ggml_tanh``, ``ggml_scale`` by C."""
    c = F32(cap)
    return unary(np.asarray(x, dtype=F32) * (F32(1) / c), "tanh") * c


@kernel
def _soft_max(x, lanes, out):
    rows, n = x.shape
    full = n - n % lanes
    for r in range(rows):
        m = np.float32(-np.inf)  # float32: ``x − max`` is a float32 difference, as ``expf``'s argument
        for i in range(n):
            m = max(m, x[r, i])
        total = 0.0
        for c in range(0, full, lanes):
            for l in range(lanes):
                out[r, c + l] = v_expf(x[r, c + l] - m, lanes)
            total += np.float64(_hsum(out[r, c:c + lanes], lanes))
        for i in range(full, n):
            out[r, i] = np.float32(math.exp(x[r, i] - m))
            total += np.float64(out[r, i])
        inv = np.float32(1.0 / total)
        for i in range(n):
            out[r, i] = out[r, i] * inv


def soft_max(x: np.ndarray, *, path: KernelPath) -> np.ndarray:
    """``ggml_soft_max`` along the last axis (no mask, scale 1): the row's maximum; ``ggml_v_expf(x − max)`` over
    whole registers, each register's sum (``_hsum``) added in float64, then ``expf`` one by one for the rest,
    each added in float64; every value times ``(float)(1/sum)``."""
    x = np.asarray(x, dtype=F32)
    flat = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))
    out = np.empty_like(flat)
    _soft_max(flat, path.lanes, out)
    return out.reshape(x.shape)


@kernel
def _norm(x, eps, lanes, out):
    rows, n = x.shape
    full = n - n % lanes
    sq = np.empty(lanes, np.float32)
    for r in range(rows):
        s = 0.0
        for i in range(n):
            s += np.float64(x[r, i])
        mean = np.float32(s) / np.float32(n)
        t = 0.0
        for c in range(0, full, lanes):
            for l in range(lanes):
                v = x[r, c + l] - mean
                out[r, c + l] = v
                sq[l] = v * v
            t += np.float64(_hsum(sq, lanes))
        for i in range(full, n):
            v = x[r, i] - mean
            out[r, i] = v
            t += np.float64(v * v)
        var = np.float32(t / n)
        scale = np.float32(1.0) / np.float32(math.sqrt(var + eps))
        for i in range(n):
            out[r, i] = out[r, i] * scale


def layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray | None, epsilon: float, *,
               path: KernelPath) -> np.ndarray:
    """``ggml_norm`` then ``mul`` by the gain and ``add`` of the bias: the mean ``(float)Σx / n`` (the sum in float64),
    ``ggml_vec_cvar_f32``'s variance (squared deviations summed a register at a time, ``_hsum``, in float64, the rest one
    by one), ``scale = 1/sqrtf(var + ε)``, ``(x − mean)·scale``."""
    x = np.asarray(x, dtype=F32)
    flat = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))
    out = np.empty_like(flat)
    _norm(flat, F32(epsilon), path.lanes, out)
    out = out.reshape(x.shape) * np.asarray(gain, dtype=F32)
    return out if bias is None else out + np.asarray(bias, dtype=F32)


def l2_norm(x: np.ndarray, epsilon: float, heads: int = 1) -> np.ndarray:
    """The language's ``l2norm``, ``x/√(Σx² + ε)`` per row (per head's row when ``heads > 1``), as llama.cpp computes
    it for Gated DeltaNet's q and k (``build_gdn_l2_norm``, not ``ggml_l2_norm``): ``ggml_rms_norm`` with ``ε/n``
    (``n`` the row's width, the division in float32), then ``ggml_scale`` by ``1/sqrtf(n)``.

    Llama 4's q/k norm is ``ggml_rms_norm`` without a gain, which the document writes ``(l2norm of X, epsilon n·ε)
    scaled by √n``: with ``n`` a power of 4 every step of that scales exactly, and the result is ``ggml_rms_norm``'s
    bit for bit too."""
    x = np.asarray(x, dtype=F32)
    n = x.shape[-1] // heads
    ones = np.ones(n, F32)
    return rms_norm(x, ones, F32(epsilon) / F32(n), heads) * (F32(1) / F32(math.sqrt(F32(n))))


def weights_sum(w: np.ndarray) -> np.ndarray:
    """The chosen experts' weights normalised as ``build_moe_ffn`` does: ``ggml_sum_rows`` (float64, rounded to
    float32), clamped below at fp16's smallest normal, ``ggml_div``."""
    w = np.asarray(w, dtype=F32)
    total = np.zeros(w.shape[:-1] + (1,))
    for k in range(w.shape[-1]):  # in order, as ggml_vec_sum_f32 adds
        total += w[..., k:k + 1].astype(np.float64)
    return (w / np.maximum(total.astype(F32), F32(6.103515625e-5))).astype(F32)


# ---- Gated DeltaNet (ggml_compute_forward_gated_delta_net) ---------------------------------------------------------


@kernel
def _gated_delta(q, k, v, s, a, b, kv_of, scale, lanes, out):
    """Per row in order and value head ``h``, with the state held as ggml holds it (``m[j]`` = column ``j`` of
    ``S``): ``m ← a·m`` (``ggml_vec_scale_f32``); ``δⱼ = (vⱼ − m[j]·k)·b`` with the path's ``ggml_vec_dot_f32``;
    ``m[j] ← fma(k, δⱼ, m[j])`` (``ggml_vec_mad_f32``); ``oⱼ = (m[j]·q)·scale``."""
    rows, heads = a.shape
    dv, dk = s.shape[1], s.shape[2]
    delta = np.empty(dv, np.float32)
    acc = np.empty((4, 16), np.float32)  # _vec_dot's scratch, made once
    for t in range(rows):
        for h in range(heads):
            g = kv_of[h]
            kt, qt = k[t, g], q[t, g]
            m = s[h]
            for j in range(dv):
                for i in range(dk):
                    m[j, i] = m[j, i] * a[t, h]
            for j in range(dv):
                delta[j] = (v[t, h, j] - _vec_dot(m[j], kt, False, lanes, acc)) * b[t, h]
            for j in range(dv):
                for i in range(dk):
                    m[j, i] = _fma(kt[i], delta[j], m[j, i])
            for j in range(dv):
                out[t, h, j] = _vec_dot(m[j], qt, False, lanes, acc) * scale


def gated_delta(q: np.ndarray, k: np.ndarray, v: np.ndarray, state: np.ndarray, decay: np.ndarray, beta: np.ndarray,
                kv_of: np.ndarray, scale: float, *, path: KernelPath) -> tuple[np.ndarray, np.ndarray]:
    """The Gated DeltaNet recurrence as ggml's fused ``ggml_gated_delta_net`` computes it on the CPU: ``q``, ``k``
    ``rows × G × dk``, ``v`` ``rows × H × dv``, ``state`` ``H × dk × dv``, ``decay`` (``expf`` of the log-decay
    ggml is given) and ``beta`` ``rows × H``, value head ``h`` reading key head ``kv_of[h]``; the output scaled by
    ``scale`` after its dot products (ggml's ``1/sqrtf(dv)``). Returns ``rows × H × dv`` and the new state."""
    s = np.ascontiguousarray(np.swapaxes(np.asarray(state, dtype=F32), 1, 2))  # H × dv × dk: ggml's rows
    out = np.empty(np.shape(v), F32)
    _gated_delta(np.ascontiguousarray(q, dtype=F32), np.ascontiguousarray(k, dtype=F32),
                 np.ascontiguousarray(v, dtype=F32), s, np.ascontiguousarray(decay, dtype=F32),
                 np.ascontiguousarray(beta, dtype=F32), np.ascontiguousarray(kv_of, dtype=np.int64), F32(scale),
                 path.lanes, out)
    return out, np.ascontiguousarray(np.swapaxes(s, 1, 2))


# ---- short convolution (ggml_compute_forward_ssm_conv_f32) --------------------------------------------------------


@kernel
def _ssm_conv(z, w, fused_from, out):
    rows, n = out.shape
    k = w.shape[0]
    for r in range(rows):
        for c in range(n):
            s = np.float32(0)
            for i in range(k):
                if i < fused_from:
                    s = s + z[r + i, c] * w[i, c]
                else:
                    s = _fma(z[r + i, c], w[i, c], s)
            out[r, c] = s


def ssm_conv(z: np.ndarray, w: np.ndarray, *, path: KernelPath) -> np.ndarray:
    """``ggml_ssm_conv`` as the build computes it: ``yᵣ[c] = Σᵢ W[i, c]·z[r+i, c]`` over the window ``z`` (``k − 1 +
    rows`` rows: the state's, then the step's) and the ``k × c`` kernel ``W``. ggml writes it as a scalar loop in
    float32 (``sumf += s[i]·c[i]``, ``ggml_compute_forward_ssm_conv_f32``, ops.cpp), so what it computes is what
    GCC (12, ``-O3``, FMA on, no fast-math) made of that loop: the reduction over ``i`` vectorised by registers —
    ``L`` products in one multiply, then one register of ``L/2``, each product rounded and added to the sum in
    order — and the rest, fewer than ``L/2``, a scalar loop whose ``sumf += s·c`` is contracted to one fma. So the
    last ``k mod (L/2)`` terms are fused: Qwen3-Next's ``k = 4`` is four rounded products on AVX2 (one register of
    4) and four fmas on AVX-512 (under half a register of 16). ``L`` is the width GCC vectorises with
    (``path.loop_lanes``): the path's lanes for ``-mavx512f`` and for ``-march=native`` on this project's AMD EPYC;
    for Intel's AVX-512 CPUs (``-march=skylake-avx512``, ``icelake-server``, ``sapphirerapids``) GCC 12 prefers
    256-bit registers and compiles this loop as on AVX2 (``cpu.native_tuning``). Returns ``rows × c``."""
    z, w = np.ascontiguousarray(z, dtype=F32), np.ascontiguousarray(w, dtype=F32)
    k = w.shape[0]
    out = np.empty((z.shape[0] - k + 1, z.shape[1]), F32)
    _ssm_conv(z, w, k - k % (path.loop_lanes // 2), out)
    return out
