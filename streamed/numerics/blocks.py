"""Quantised weights as GGUF stores them — the legacy quants (Q4_0, Q4_1, Q5_0, Q5_1), the K-quants (Q2_K … Q6_K),
BF16 and MXFP4 — kept in their blocks until a product reads them (Q8_0 has its own planes, ``q8.Planes``).

``Blocks(raw, type)`` is one such weight: ``raw`` holds the file's bytes (``uint8 … × out × in/block·bytes``, each
row of the stored tensor a run of blocks along ``in``; usually a view of the memory-mapped checkpoint), ``type`` the
GGUF type's name. In the language's ``in × out`` orientation it means ``W[…, i, o] = dequantize(raw[…, o, :])[i]``.

Invariant: ``dequantize_rows`` is ggml's ``dequantize_row_<type>`` (ggml-quants.c) in the same float32 operations in
the same order — every value is one or two float32 roundings of integers and fp16/e8m0 scales, computed as
``gguf.quants`` computes them — so ``Blocks.dense()`` is exactly the dequantised GGUF tensor, and the product of a
``Blocks`` weight is the product of that dense weight, bit for bit (``product.product`` dequantises a band of output
columns at a time, so a product never holds more than a band of the weight densified).

The types read here are ``READ``; any other (the IQ types, TQ, NVFP4…) is refused by ``unread(type)``, a reason a
caller puts beside the tensor's name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..model.checkpoint import BLOCKS
from .jit import INT64, array, claim, compiled, kernel, on_threads, threads

#: The code of each type read here (``_block_of``).
_CODES = {"Q4_0": 0, "Q4_1": 1, "Q5_0": 2, "Q5_1": 3, "Q2_K": 4, "Q3_K": 5, "Q4_K": 6, "Q5_K": 7, "Q6_K": 8,
          "MXFP4": 9, "BF16": 10}
#: Each type read here: (values per block, bytes per block, code of the kernel) — the sizes are ggml's
#: (``checkpoint.BLOCKS``; a test holds them to the ``gguf`` package's table).
TYPES = {t: (*BLOCKS[t], code) for t, code in _CODES.items()}
#: Every type a checkpoint tensor may be stored as and be read: these, Q8_0 (``q8.Planes``) and the float types.
READ = frozenset(TYPES) | {"Q8_0", "F32", "F16"}

#: fp16 bit patterns to float32, exactly (a scale's widening).
_HALF = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
#: MXFP4's e2m1 values, doubled (ggml's ``kvalues_mxfp4``); the e8m0 scale is read halved to match.
_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.int8)


def unread(type_name: str) -> str | None:
    """Why a tensor stored ``type_name`` cannot be read, or ``None`` when it can."""
    if type_name in READ:
        return None
    return (f"stored {type_name}, a type streamed does not read (it reads {', '.join(sorted(READ))}); "
            "requantise it with llama-quantize to one of those")


@kernel(inline="always")
def _h(raw, at, half):
    return half[np.int64(raw[at]) | (np.int64(raw[at + 1]) << 8)]


@kernel(inline="always")
def _u32(raw, at):
    """A little-endian uint32 (a legacy quant's ``qh``: the fifth bit of each of 32 values)."""
    return (np.uint32(raw[at]) | (np.uint32(raw[at + 1]) << 8) | (np.uint32(raw[at + 2]) << 16)
            | (np.uint32(raw[at + 3]) << 24))


@kernel(inline="always")
def _e8m0_half(e):
    """An MXFP4 block's e8m0 scale halved, as float32 (``ggml_e8m0_to_fp32_half``: ``2^(e − 128)``; its two least
    ``e`` subnormal) — the half that matches ``_MXFP4``'s doubled values."""
    e = np.uint32(e)
    bits = (np.uint32(0x00200000) << e) if e < 2 else ((e - np.uint32(1)) << np.uint32(23))
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


@kernel(inline="always")
def _scale_min_k4(j, raw, s):
    """``get_scale_min_k4``: the 6-bit scale and min of sub-block ``j`` from the 12 packed bytes at ``s``."""
    if j < 4:
        return raw[s + j] & 63, raw[s + j + 4] & 63
    return ((raw[s + j + 4] & 0xF) | ((raw[s + j - 4] >> 6) << 4),
            (raw[s + j + 4] >> 4) | ((raw[s + j] >> 6) << 4))


def _block_of(code: int):
    """The dequantiser of one block of the type ``code`` (``_CODES``): ``block(raw, at, out, o, half, mx)`` writes the
    block at byte ``at`` of ``raw`` into ``out[o:o + values]`` (float32), as ggml-quants.c does. ``code`` is a constant
    of the closure, so numba drops every other type's branch before it types the function (``_rows_of``)."""

    @kernel(inline="always")
    def block(raw, at, out, o, half, mx):
        f32 = np.float32
        if code == 0 or code == 2:  # Q4_0, Q5_0: d, [qh,] qs; x = (q − 8|16)·d
            d = _h(raw, at, half)
            qh = _u32(raw, at + 2) if code == 2 else np.uint32(0)
            qs = at + 6 if code == 2 else at + 2
            for j in range(16):
                lo = np.int32(raw[qs + j] & 0xF)
                hi = np.int32(raw[qs + j] >> 4)
                if code == 2:
                    lo = (lo | np.int32(((qh >> j) << 4) & 0x10)) - 16
                    hi = (hi | np.int32((qh >> (j + 12)) & 0x10)) - 16
                else:
                    lo -= 8
                    hi -= 8
                out[o + j] = d * f32(lo)
                out[o + j + 16] = d * f32(hi)
        elif code == 1 or code == 3:  # Q4_1, Q5_1: d, m, [qh,] qs; x = q·d + m
            d = _h(raw, at, half)
            m = _h(raw, at + 2, half)
            qh = _u32(raw, at + 4) if code == 3 else np.uint32(0)
            qs = at + 8 if code == 3 else at + 4
            for j in range(16):
                lo = np.int32(raw[qs + j] & 0xF)
                hi = np.int32(raw[qs + j] >> 4)
                if code == 3:
                    lo = lo | np.int32(((qh >> j) << 4) & 0x10)
                    hi = hi | np.int32((qh >> (j + 12)) & 0x10)
                out[o + j] = d * f32(lo) + m
                out[o + j + 16] = d * f32(hi) + m
        elif code == 4:  # Q2_K: scales[16], qs[64], d, dmin
            d = _h(raw, at + 80, half)
            dmin = _h(raw, at + 82, half)
            y = o
            s = 0
            for n in range(2):
                q = at + 16 + 32 * n
                for shift in range(0, 8, 2):
                    for half16 in range(2):
                        sc = raw[at + s]
                        s += 1
                        dl = d * f32(sc & 0xF)
                        ml = dmin * f32(sc >> 4)
                        for l in range(16):
                            out[y] = dl * f32((raw[q + 16 * half16 + l] >> shift) & 3) - ml
                            y += 1
        elif code == 5:  # Q3_K: hmask[32], qs[64], scales[12], d
            d = _h(raw, at + 108, half)
            sc = at + 96
            y = o
            s = 0
            m = 1
            for n in range(2):
                q = at + 32 + 32 * n
                for shift in range(0, 8, 2):
                    for half16 in range(2):
                        # the 6-bit scale ``s``: its low 4 bits from bytes 0–7, its high 2 from bytes 8–11
                        low = (raw[sc + (s % 8)] >> (4 * (s // 8))) & 0xF
                        high = (raw[sc + 8 + (s % 4)] >> (2 * (s // 4))) & 3
                        dl = d * f32(np.int32(low | (high << 4)) - 32)
                        s += 1
                        for l in range(16):
                            i = 16 * half16 + l
                            v = np.int32((raw[q + i] >> shift) & 3) - (0 if raw[at + i] & m else 4)
                            out[y] = dl * f32(v)
                            y += 1
                    m <<= 1
        elif code == 6 or code == 7:  # Q4_K, Q5_K: d, dmin, scales[12], [qh[32],] qs[128]
            d = _h(raw, at, half)
            dmin = _h(raw, at + 2, half)
            qh = at + 16
            ql = at + 16 + (32 if code == 7 else 0)
            y = o
            for g in range(4):
                sc1, m1 = _scale_min_k4(2 * g, raw, at + 4)
                sc2, m2 = _scale_min_k4(2 * g + 1, raw, at + 4)
                d1 = d * f32(sc1)
                dm1 = dmin * f32(m1)
                d2 = d * f32(sc2)
                dm2 = dmin * f32(m2)
                for l in range(32):
                    v = np.int32(raw[ql + 32 * g + l] & 0xF)
                    if code == 7 and raw[qh + l] & (1 << (2 * g)):
                        v += 16
                    out[y + l] = d1 * f32(v) - dm1
                for l in range(32):
                    v = np.int32(raw[ql + 32 * g + l] >> 4)
                    if code == 7 and raw[qh + l] & (2 << (2 * g)):
                        v += 16
                    out[y + 32 + l] = d2 * f32(v) - dm2
                y += 64
        elif code == 8:  # Q6_K: ql[128], qh[64], scales[16] (int8), d
            d = _h(raw, at + 208, half)
            for n in range(2):
                ql = at + 64 * n
                qh = at + 128 + 32 * n
                sc = at + 192 + 8 * n
                y = o + 128 * n
                for l in range(32):
                    i = l // 16
                    h = raw[qh + l]
                    q1 = np.int32((raw[ql + l] & 0xF) | ((h & 3) << 4)) - 32
                    q2 = np.int32((raw[ql + l + 32] & 0xF) | (((h >> 2) & 3) << 4)) - 32
                    q3 = np.int32((raw[ql + l] >> 4) | (((h >> 4) & 3) << 4)) - 32
                    q4 = np.int32((raw[ql + l + 32] >> 4) | (((h >> 6) & 3) << 4)) - 32
                    out[y + l] = (d * f32(np.int8(raw[sc + i]))) * f32(q1)
                    out[y + l + 32] = (d * f32(np.int8(raw[sc + i + 2]))) * f32(q2)
                    out[y + l + 64] = (d * f32(np.int8(raw[sc + i + 4]))) * f32(q3)
                    out[y + l + 96] = (d * f32(np.int8(raw[sc + i + 6]))) * f32(q4)
        elif code == 9:  # MXFP4: e (e8m0), qs[16]
            d = _e8m0_half(raw[at])
            for j in range(16):
                b = raw[at + 1 + j]
                out[o + j] = d * f32(mx[b & 0xF])
                out[o + j + 16] = d * f32(mx[b >> 4])
        else:  # BF16: the high half of a float32
            bits = (np.uint32(raw[at]) | (np.uint32(raw[at + 1]) << 8)) << np.uint32(16)
            out[o] = np.array([bits], dtype=np.uint32).view(np.float32)[0]

    return block


@functools.lru_cache(maxsize=None)
def _rows_of(type_name: str):
    """The kernel dequantising rows of ``type_name``: ``rows(values, nbytes, raw, out, half, mx, nthreads)`` writes
    each row of ``raw`` (its blocks' bytes) into the same row of ``out``, a row a task on ``nthreads`` threads
    (``jit.on_threads``); made once a process a type.

    Why one kernel a type, not one for every type with the type's code an argument: numba compiles every branch of a
    kernel — dequantising one Q4_K tensor (a Q4_K_M file's token embeddings) compiled all eleven types' code, 9 s of a
    machine's first run (then a parallel loop, compiled twice), where one type's is 2–3 s. Its own name keeps its own file in the kernel cache; one signature (``_ROWS``) keeps what a warm-up
    compiled what every run uses."""
    block = _block_of(_CODES[type_name])

    def share(values, nbytes, raw, out, half, mx, taken):  # one thread's: the next row while any is left
        r = claim(taken)
        while r < raw.shape[0]:
            for b in range(raw.shape[1] // nbytes):
                block(raw[r], b * nbytes, out[r], b * values, half, mx)
            r = claim(taken)

    shared = on_threads(share)

    def rows(values, nbytes, raw, out, half, mx, nthreads):
        shared(nthreads, (values, nbytes, raw, out, half, mx))

    share.__qualname__ = share.__name__ = f"_share_{type_name}"
    rows.__qualname__ = rows.__name__ = f"_rows_{type_name}"
    return compiled(kernel(rows), *_ROWS)


#: ``_rows_of``'s operands as its kernels are compiled for them (``jit.compiled``): the stored bytes read-only, so a
#: tensor's bytes mapped from the file and a copy of some of its rows (an embedding's) share one machine code.
_ROWS = (INT64, INT64, array("uint8", 2, "C", readonly=True), array("float32", 2, "C"),
         array("float32", 1, "C", readonly=True), array("int8", 1, "C", readonly=True), INT64)


def dequantize_rows(raw: np.ndarray, type_name: str) -> np.ndarray:
    """A tensor's stored bytes (``uint8 … × row bytes``) as float32 values (``… × row values``), exactly."""
    block, nbytes, _ = TYPES[type_name]
    raw = np.asarray(raw, dtype=np.uint8)
    lead, width = raw.shape[:-1], raw.shape[-1]
    flat = np.ascontiguousarray(raw.reshape(-1, width))
    out = np.empty((flat.shape[0], width // nbytes * block), dtype=np.float32)
    if out.size:
        _rows_of(type_name)(block, nbytes, flat, out, _HALF, _MXFP4, threads())
    return out.reshape(*lead, out.shape[-1])


@dataclass(frozen=True)
class Blocks:
    """A weight stored in one of ``TYPES``, read in product orientation and never densified whole: ``raw`` its
    stored bytes (``uint8 … × out × in/block·bytes``), ``type`` its GGUF type. ``dense()`` is the float32 weight in
    ``in × out`` orientation (leading axes — an expert bank's ``E`` — in front), made when asked; a product reads
    ``raw`` a band of columns at a time (``columns``)."""

    raw: np.ndarray
    type: str

    @property
    def block(self) -> int:
        return TYPES[self.type][0]

    @property
    def block_bytes(self) -> int:
        return TYPES[self.type][1]

    def columns(self, start: int, stop: int) -> np.ndarray:
        """Output columns ``start:stop`` dequantised, as ``… × (stop − start) × in`` — rows of the reduction, unit
        stride along ``in``, the orientation a product reads."""
        return dequantize_rows(self.raw[..., start:stop, :], self.type)

    def dense(self) -> np.ndarray:
        return np.ascontiguousarray(np.swapaxes(dequantize_rows(self.raw, self.type), -1, -2))

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        d = self.dense()
        return d if dtype is None else d.astype(dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        *lead, out, nbytes = self.raw.shape
        return (*lead, nbytes // self.block_bytes * self.block, out)

    @property
    def ndim(self) -> int:
        return self.raw.ndim

    @property
    def nbytes(self) -> int:
        return self.raw.nbytes

    def __getitem__(self, index) -> "Blocks":
        """One matrix of a bank (``blocks[e]``): an index into the leading axes."""
        if self.raw.ndim < 3:
            raise IndexError(f"a single {self.type} matrix has no bank to index")
        return Blocks(self.raw[index], self.type)

    def select(self, rows: tuple[int, int] | None, columns) -> "Blocks | np.ndarray":
        """Keep input features ``rows`` and output features ``columns`` (a ``slice`` or an index array): a view of
        ``raw`` where the rows keep whole blocks, else the dense float32 part (a slice that cuts a block)."""
        raw = self.raw
        if columns is not None:
            raw = raw[..., columns, :]
        if rows is None:
            return Blocks(raw, self.type)
        a, b = rows
        if a % self.block or b % self.block:
            return np.ascontiguousarray(Blocks(raw, self.type).dense()[..., a:b, :])
        return Blocks(raw[..., a // self.block * self.block_bytes:b // self.block * self.block_bytes], self.type)

    def cut(self, axis: int, start: int, stop: int):
        """``W`` cut along ``axis`` (of ``in × out``) as the IR's ``slice`` does (``q8.Planes.cut``)."""
        axis = axis % len(self.shape)
        if axis == len(self.shape) - 1:
            return self.select(None, slice(start, stop))
        if axis == len(self.shape) - 2:
            return self.select((start, stop), None)
        index = [slice(None)] * self.raw.ndim
        index[axis] = slice(start, stop)
        return Blocks(self.raw[tuple(index)], self.type)
