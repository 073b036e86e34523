"""The one product every operation computes with: ``Y = X · W`` in float32, in a fixed order of arithmetic that does
not depend on how many rows are computed together, how the weight is stored, or which kernel runs it.

The rule (docs: ARCHITECTURE.md, numerics). Each element ``Y[r, n] = Σₖ X[r, k]·W[k, n]`` is summed as:

1. the reduction axis is cut into blocks of 32 from ``k = 0`` (the last may be shorter);
2. within a block, lane ``l = (k − k₀) mod 8`` accumulates its terms in float32 with a fused multiply-add,
   ``aₗ ← fma(X[r, k], W[k, n], aₗ)`` from ``aₗ = +0``, in increasing ``k``;
3. the block's partial is ``((a₀+a₁)+(a₂+a₃))+((a₄+a₅)+(a₆+a₇))`` in float32;
4. the partials are added in float64 in increasing block order from 0, and the sum rounded once to float32.

Why this rule: every element is a function of its own row of ``X`` and its own column of ``W`` alone, so a row
computes alike in a tile, a batch or alone, and a column tile of the head gives the same logits — by construction,
not by a library's choice of kernel. A block's 32 terms are few enough that float32 lanes cost nothing in accuracy
(at most ``7u`` of the block's ``Σ|terms|``), and float64 between blocks keeps a long reduction exact to the last
rounding — so a tensor-parallel chip whose slice is whole blocks computes exactly the reference's block partials,
and the all-reduce bound of ``verify`` is the rounding of the partial sums alone. The lanes are 8 float32 wide, which
one AVX2 register holds, so the kernels below run it at the speed of a float32 product.

A weight is read where it is: float32 or float16 (any row stride, unit stride along the reduction), Q8_0 as GGUF
stores it (``q8.Planes``: 34-byte blocks, never densified), or another stored quantisation (``blocks.Blocks``: a
band of output columns dequantised at a time, exactly). A Q8_0 weight's value ``q·d`` is exact in float32,
so its product is the product of its dequantised weight, bit for bit; likewise float16. In llama.cpp's arithmetic
(``Arithmetic``) a product is ggml's instead (``ggml.mul_mat``).

The kernels are compiled by numba (LLVM) with each block's arithmetic written as explicit 8-lane vector code, so
the compiler cannot reorder it; they parallelise over output columns only, so the thread count changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from .blocks import Blocks
from .cpu import KernelPath
from .jit import INT64, array, cgutils, claim, compiled, intrinsic, kernel, on_threads, threads, types
from .q8 import BLOCK, BLOCK_BYTES, Planes

LANES = 8
F32 = np.float32
#: Bytes of a quantised weight (``blocks.Blocks``) a product densifies at once: a band of output columns (what
#: ``footprint.BAND_BYTES`` counts).
BAND_BYTES = 8 << 20

# ---- the block, as vector code ------------------------------------------------------------------------------------

_f32 = ir.FloatType()
_v8 = ir.VectorType(_f32, LANES)
_i64 = ir.IntType(64)
_i32 = ir.IntType(32)
_f64 = ir.DoubleType()


def _address(context, builder, aryty, ary, indices, scale_last: int):
    """The byte address of ``ary[i0, i1, i2 · scale_last]`` (the last index counted in units of ``scale_last``
    bytes; the last axis has unit stride — the callers check it)."""
    a = context.make_array(aryty)(context, builder, ary)
    strides = cgutils.unpack_tuple(builder, a.strides, aryty.ndim)
    at = builder.ptrtoint(a.data, _i64)
    for i, (index, stride) in enumerate(zip(indices, strides)):
        index = builder.sext(index, _i64) if index.type != _i64 else index
        step = ir.Constant(_i64, scale_last) if i == len(indices) - 1 else stride
        at = builder.add(at, builder.mul(index, step))
    return at


#: How far ahead of a weight's stream a one-row product asks for its bytes (``prefetch``), and into which cache
#: (``llvm.prefetch``'s locality: 3, every level). Measured on the Intel AVX-512 host, a 1B-shaped model's 113 Q8_0
#: decode products from the mapped file, 2 threads, quiet, medians of 4: none 8.3 GB/s; 2 KiB ahead 10.9; 4 KiB 11.8
#: (12.4 into every level); 8 KiB 11.6 (12.0).
AHEAD = 4096
_LOCALITY = 3


def prefetch(builder, at, ahead: int = AHEAD) -> None:
    """Ask for the cache line ``ahead`` bytes past the byte address ``at`` (``llvm.prefetch``: a read, ``_LOCALITY``).
    A hint: it never faults (an address past the mapping's end, or a page not mapped in yet, is dropped), and it
    changes no value.

    Why: a one-row product (a decode step) reads each weight byte once, as one sequential stream a thread; a core's
    own prefetcher follows a stream only within a 4 KiB page, and a core has few misses in flight, so a lone stream
    from memory is bound by memory's latency, not its bandwidth. Asking a page ahead keeps the next page's lines
    coming while this one's are summed."""
    i8p = ir.IntType(8).as_pointer()
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, _i32, _i32, _i32]),
                                        "llvm.prefetch.p0")
    builder.call(fn, [builder.inttoptr(builder.add(at, ir.Constant(_i64, ahead)), i8p), ir.Constant(_i32, 0),
                      ir.Constant(_i32, _LOCALITY), ir.Constant(_i32, 1)])


def _load(builder, at, offset: int, vty):
    p = builder.inttoptr(builder.add(at, ir.Constant(_i64, offset)), vty.as_pointer())
    return builder.load(p, align=1)


def _tree(builder, acc):
    """``((a₀+a₁)+(a₂+a₃))+((a₄+a₅)+(a₆+a₇))``."""
    four = ir.VectorType(_i32, 4)
    two = ir.VectorType(_i32, 2)
    pairs = builder.fadd(builder.shuffle_vector(acc, acc, ir.Constant(four, [0, 2, 4, 6])),
                         builder.shuffle_vector(acc, acc, ir.Constant(four, [1, 3, 5, 7])))
    quads = builder.fadd(builder.shuffle_vector(pairs, pairs, ir.Constant(two, [0, 2])),
                         builder.shuffle_vector(pairs, pairs, ir.Constant(two, [1, 3])))
    return builder.fadd(builder.extract_element(quads, ir.Constant(_i32, 0)),
                        builder.extract_element(quads, ir.Constant(_i32, 1)))


def _weight_values(builder, wty, at):
    """The 32 weights of a block at byte address ``at`` as four ``<8 x float>``: float32 (as stored), float16 (stored
    as ``uint16``, widened exactly) or a Q8_0 block (``uint8``: its fp16 scale ``d``, then 32 int8 ``q``; the values
    ``q·d``, exact in float32)."""
    if wty.dtype == types.float32:
        return [_load(builder, at, 32 * s, _v8) for s in range(4)]
    if wty.dtype == types.uint16:
        half8 = ir.VectorType(ir.HalfType(), LANES)
        return [builder.fpext(_load(builder, at, 16 * s, half8), _v8) for s in range(4)]
    d = builder.fpext(builder.load(builder.inttoptr(at, ir.HalfType().as_pointer()), align=1), _f32)
    splat = builder.insert_element(ir.Constant(_v8, None), d, ir.Constant(_i32, 0))
    splat = builder.shuffle_vector(splat, splat, ir.Constant(ir.VectorType(_i32, LANES), [0] * LANES))
    i8x8 = ir.VectorType(ir.IntType(8), LANES)
    return [builder.fmul(builder.sitofp(_load(builder, at, 2 + 8 * s, i8x8), _v8), splat) for s in range(4)]


#: Bytes from one block of the reduction to the next, by how the weight is stored.
_BLOCK_STRIDE = {"float32": 128, "uint16": 64, "uint8": BLOCK_BYTES}


def _rows_partials(rows: int, ahead: bool = False):
    """An intrinsic setting ``acc[r+i]`` (float64), ``i < rows``, to the sum of every whole block's partial of row
    ``r+i`` of ``x[b]`` with column ``n`` of ``w[wb]``, added in increasing block order from 0: each partial 4 steps
    of an 8-lane fma and the tree — explicit vector code, so the compiler cannot reorder it. The sums stay in
    registers across the blocks, and each block of the weight is read and widened once for the rows."""

    @intrinsic
    def partials(typingctx, x, b, r, w, wb, n, acc):
        def codegen(context, builder, signature, args):
            x, b, r, w, wb, n, acc = args
            xty, wty, accty = signature.args[0], signature.args[3], signature.args[6]
            r64 = builder.sext(r, _i64) if r.type != _i64 else r
            blocks = builder.udiv(cgutils.unpack_tuple(builder, context.make_array(xty)(context, builder, x).shape,
                                                       3)[2], ir.Constant(_i64, BLOCK))
            fma = builder.module.declare_intrinsic("llvm.fma.v8f32", (), ir.FunctionType(_v8, [_v8, _v8, _v8]))
            sums = [cgutils.alloca_once_value(builder, ir.Constant(_f64, 0.0)) for _ in range(rows)]
            with cgutils.for_range(builder, blocks) as loop:
                blk = loop.index
                k0 = builder.mul(blk, ir.Constant(_i64, BLOCK))
                wat = _address(context, builder, wty, w, (wb, n, blk), _BLOCK_STRIDE[str(wty.dtype)])
                if ahead:
                    prefetch(builder, wat)
                values = _weight_values(builder, wty, wat)
                for i, total in enumerate(sums):
                    xat = _address(context, builder, xty, x, (b, builder.add(r64, ir.Constant(_i64, i)), k0), 4)
                    lanes = ir.Constant(_v8, [0.0] * LANES)
                    for step, wv in enumerate(values):
                        lanes = builder.call(fma, [_load(builder, xat, 32 * step, _v8), wv, lanes])
                    builder.store(builder.fadd(builder.load(total), builder.fpext(_tree(builder, lanes), _f64)), total)
            at = builder.bitcast(context.make_array(accty)(context, builder, acc).data, _f64.as_pointer())
            for i, total in enumerate(sums):
                builder.store(builder.load(total), builder.gep(at, [builder.add(r64, ir.Constant(_i64, i))]))
            return context.get_dummy_value()

        return types.void(x, b, r, w, wb, n, acc), codegen

    return partials


#: Rows of ``X`` that share one read of a weight's block (its values widened once); the rows past a multiple of it
#: one at a time. Neither changes a sum's order.
SHARED_ROWS = 4
_partials_rows, _partials_row = _rows_partials(SHARED_ROWS), _rows_partials(1, ahead=True)


@intrinsic
def _fma(typingctx, a, b, c):
    def codegen(context, builder, signature, args):
        f = builder.module.declare_intrinsic("llvm.fma.f32", (), ir.FunctionType(_f32, [_f32] * 3))
        return builder.call(f, args)

    return types.float32(types.float32, types.float32, types.float32), codegen


@intrinsic
def _element(typingctx, v):
    """One stored weight as float32: itself, or a float16 held as ``uint16``, widened."""

    def codegen(context, builder, signature, args):
        if signature.args[0] == types.uint16:
            return builder.fpext(builder.bitcast(args[0], ir.HalfType()), _f32)
        if signature.args[0] == types.float32:
            return args[0]
        return builder.uitofp(args[0], _f32)  # a Q8_0 byte: compiled, never reached (Q8_0 blocks are whole)

    return types.float32(v), codegen


# ---- the kernel ---------------------------------------------------------------------------------------------------
#: Output columns a thread's task computes together; a thread's scratch is made once for all its tasks (an allocation
#: a column was a third of a one-row K-quant product's time, a decode's), and the columns' order never changes a sum.
#: The tasks are taken by whichever thread is free next (``jit.claim``), as ggml's chunks are.
TASK_COLUMNS = 32
#: The bytes of weight a task of a one-row product reads at least (``task_span``), its columns one stream from memory.
TASK_BYTES = 512 << 10


@kernel
def task_span(row_bytes, columns):
    """Columns a task computes, for a weight whose columns are ``row_bytes`` bytes each and ``columns`` of them: about
    ``TASK_BYTES`` of weight, at least ``TASK_COLUMNS`` columns and at most an eighth of them (so that the threads
    still share the work as each is free).

    Why: each task is a stretch of the weight read once from memory (a decode step's product) — and each starts cold:
    the stream a thread's prefetches followed ran into the next task, which another thread took. Tasks of 32 columns
    of a 2048-wide Q4_K weight (36 KB) read it at 24 GB/s on this project's AMD EPYC host, of 128 at 32 GB/s and of
    512 at 34–36 (an FFN-sized weight's one-row product, 2 threads, from memory)."""
    span = max(TASK_COLUMNS, TASK_BYTES // max(row_bytes, 1))
    return min(span, max(TASK_COLUMNS, columns // 8))
# One Python source, compiled once per storage (float32, float16 as uint16, Q8_0 as uint8: ``compiled``), in parallel
# over output columns, with one arithmetic.


def _tasks(x, w, ratio, out, taken):
    """One thread's share of ``_kernel``: the next ``TASK_COLUMNS`` columns while any are left, its scratch made once."""
    nb_, rows, k = x.shape
    n_out = w.shape[1]
    blocks = k // 32
    rem = k - blocks * 32
    total = nb_ * n_out
    tasks = (total + TASK_COLUMNS - 1) // TASK_COLUMNS
    acc = np.empty(rows)
    lanes = np.zeros(LANES, dtype=np.float32)
    c = claim(taken)
    while c < tasks:
        for i in range(c * TASK_COLUMNS, min(total, (c + 1) * TASK_COLUMNS)):
            b = i // n_out
            n = i - b * n_out
            wb = b // ratio
            shared = rows // SHARED_ROWS * SHARED_ROWS
            for r in range(0, shared, SHARED_ROWS):
                _partials_rows(x, b, r, w, wb, n, acc)
            for r in range(shared, rows):
                _partials_row(x, b, r, w, wb, n, acc)
            if rem:  # the last, shorter block, lane by lane as the rule says (never Q8_0: its blocks are whole)
                k0 = blocks * 32
                for r in range(rows):
                    lanes[:] = 0
                    for j in range(rem):
                        lanes[j % LANES] = _fma(x[b, r, k0 + j], _element(w[wb, n, k0 + j]), lanes[j % LANES])
                    acc[r] += np.float64(((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
                                         + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])))
            for r in range(rows):
                out[b, r, n] = np.float32(acc[r])
        c = claim(taken)


_kernel_threads = on_threads(_tasks)


def _kernel(x, w, ratio, nthreads, out):
    """``out[b] = x[b] · W[b // ratio]`` where ``w[·, n]`` holds column ``n`` of ``W`` along the reduction (dense
    float32/float16, or Q8_0 blocks), on ``nthreads`` threads taking ``TASK_COLUMNS`` columns at a time as each is free
    (``jit.claim``)."""
    _kernel_threads(nthreads, (x, w, ratio, out))


_KERNEL = kernel(_kernel)


# ---- one compiled signature a kernel ------------------------------------------------------------------------------

#: A product's operands as its kernels are compiled for them: activations and results C-contiguous float32; a
#: weight any layout, read-only, by how it is stored (float32, float16 as ``uint16``, Q8_0 blocks as ``uint8``).
ACTIVATIONS = array("float32", 3, "C")
WEIGHTS = {np.dtype(d): array(d, 3, "A", readonly=True) for d in (np.float32, np.uint16, np.uint8)}

# ---- the product --------------------------------------------------------------------------------------------------


def _rows_of_reduction(w: np.ndarray) -> np.ndarray:
    """``w`` (``… × K × N``) as ``… × N × K`` with unit stride along K: a view where it is one (a GGUF tensor read in
    product orientation), else a copy (an activation, a weight generated ``in × out``)."""
    t = np.swapaxes(w, -1, -2)
    if t.strides[-1] != t.itemsize:
        t = np.ascontiguousarray(t)
    return t


@dataclass(frozen=True)
class Operands:
    """A product's operands as its kernels read them: ``x`` as ``B × R × K`` (contiguous float32), the weight as
    ``B' × N × …`` rows of the reduction (``raw``: Q8_0 blocks, or float32/float16 values with unit stride along K),
    matrix ``b`` of ``x`` reading weight ``b // ratio``; ``shaped`` gives a ``B × R × N`` result the caller's shape."""

    x: np.ndarray
    raw: np.ndarray
    ratio: int
    lead: tuple[int, ...]
    batched: bool

    def empty(self) -> np.ndarray:
        return np.empty((self.x.shape[0], self.x.shape[1], self.raw.shape[1]), dtype=F32)

    def shaped(self, out: np.ndarray) -> np.ndarray:
        if self.batched:
            return out.reshape(*self.lead, self.x.shape[1], out.shape[-1])
        return out.reshape(*self.lead, out.shape[-1])


def operands(x: np.ndarray, w, batched: int = 0) -> Operands:
    """``x`` (``… × R × K``) and ``w`` (``K × N``, or with ``batched`` ``B' × K × N`` shared by ``x``'s leading
    matrices in groups) as ``Operands``; a weight whose reduction does not match is refused, naming both shapes."""
    x = np.asarray(x, dtype=F32)
    if batched:
        lead, (rows, k) = x.shape[:-2], x.shape[-2:]
        x3 = np.ascontiguousarray(x.reshape(-1, rows, k))
    else:
        lead, k = x.shape[:-1], x.shape[-1]
        x3 = np.ascontiguousarray(x.reshape(1, -1, k))
    if w.shape[-2] != k:
        raise ValueError(f"a product of {'×'.join(map(str, x.shape))} by {'×'.join(map(str, w.shape))}: "
                         f"{k} ≠ {w.shape[-2]}")
    if isinstance(w, Planes):
        raw = w.raw if w.raw.ndim == 3 else w.raw[None]
    else:
        w = np.asarray(w)
        if w.dtype not in (np.float32, np.float16):
            w = w.astype(F32)
        wt = _rows_of_reduction(w)
        raw = wt if wt.ndim == 3 else wt[None]
    if raw.shape[0] not in (1, x3.shape[0]) and x3.shape[0] % raw.shape[0]:
        raise ValueError(f"{x3.shape[0]} matrices cannot share {raw.shape[0]} weights")
    return Operands(x3, raw, x3.shape[0] // raw.shape[0], lead, bool(batched))


def product(x: np.ndarray, w, batched: int = 0) -> np.ndarray:
    """``X · W`` by the rule of the module docstring. ``x`` is ``… × R × K``; ``w`` is ``K × N`` (float32 or float16
    array, any strides) or a ``q8.Planes``, shared by every leading index of ``x`` — or, with ``batched`` > 0, ``w``
    is ``B' × K × N`` and ``x``'s ``B = batched`` leading matrices read ``w[b // (B / B')]`` (grouped heads share
    their key-value head's matrix)."""
    if isinstance(w, Blocks):
        return _banded(x, w, batched)
    o = operands(x, w, batched)
    out = o.empty()
    if out.size:
        raw = o.raw.view(np.uint16) if o.raw.dtype == np.float16 else o.raw
        compiled(_KERNEL, ACTIVATIONS, WEIGHTS[raw.dtype], INT64, INT64, ACTIVATIONS)(o.x, raw, o.ratio,
                                                                                         threads(), out)
    return o.shaped(out)


def _banded(x: np.ndarray, w: Blocks, batched: int) -> np.ndarray:
    """``X · W`` over a weight kept in its blocks: a band of output columns dequantised at a time (exactly,
    ``blocks.dequantize_rows``) and multiplied by the rule above. Each element reads its own column alone, so the
    bands change no sum: the result is the product of the dense weight, bit for bit, holding one band of it."""
    k, n = w.shape[-2:]
    lead = int(np.prod(w.shape[:-2], dtype=np.int64))
    band = max(1, BAND_BYTES // max(1, 4 * k * lead))
    parts = [product(x, np.swapaxes(w.columns(c, min(n, c + band)), -1, -2), batched)
             for c in range(0, n, band)] or [product(x, np.zeros((*w.shape[:-1], 0), dtype=F32), batched)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)


# ---- which arithmetic -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arithmetic:
    """What the operations' float32 arithmetic is made of. ``exact`` (the default): the language's operations as
    written, every product by the rule above. ``llama.cpp``: ggml's CPU kernels, bit for bit, wherever the vendored
    llama.cpp computes an operation (``ggml.py``: its products — Q8_0 activations quantised, F16 ones rounded —, norms,
    rotations, attention, SiLU and GELU), as its build on one kernel path computes them (``path``, a
    ``cpu.KernelPath``: AVX2 or AVX-512; required — which one is a fact of a machine, ``cpu.this_machine``).

    ``rows``: how many rows ggml computes together — the step's, where a program runs in tiles (ggml picks a float
    product's kernel by it); ``None``, the rows of the operand at hand. ``routed``: in one expert's products (ggml's
    ``mul_mat_id``), the rows the step routes to that expert, by which ggml picks a K-quant's kernel for it
    (``ggml_quants.mul_mat``); ``None``, not an expert's."""

    name: str = "exact"
    rows: int | None = None
    path: KernelPath | None = None
    routed: int | None = None

    def __post_init__(self):
        if self.name == "llama.cpp" and self.path is None:
            raise ValueError("llama.cpp's arithmetic is a kernel path's: say which (cpu.PATHS)")

    @property
    def ggml(self) -> bool:
        return self.name == "llama.cpp"

    @property
    def label(self) -> str:
        """``exact`` or ``llama.cpp:PATH`` — what ``run --json`` and ``verify`` print."""
        return f"llama.cpp:{self.path.name}" if self.ggml else self.name


def llama_cpp(path: KernelPath) -> Arithmetic:
    """llama.cpp's arithmetic on ``path``."""
    return Arithmetic("llama.cpp", path=path)


EXACT = Arithmetic("exact")
