"""Q8_0 as GGUF stores it, bit for bit, and as the chip reads it: int8 planes and fp16 block scales.

GGUF's Q8_0 (ggml-quants.c ``quantize_row_q8_0_ref``) cuts each row of the tensor's innermost axis (``ne[0]``) into
blocks of 32; a block stores ``d = max|x| / 127`` as fp16 and ``q = round(x / d)`` (half away from zero, computed as
``x · (1/d)`` in float32, ``q = 0`` where ``d = 0``) as int8. Dequantisation is ``q · d`` in float32. Every value
here is computed in exactly that arithmetic, so ``dequantize(quantize(x))`` equals ``gguf.quants`` to the bit.

The language's orientation (docs/language.md §6): a weight is ``in by out`` and GGUF's ``ne = [in, out]``, so the
blocks run along ``in``. ``planes(blocks)`` gives the layout the lowering's IR reads: ``int8 in × out`` values and
``fp16 (in/32) × out`` scales, with ``W[i, o] = planes[i, o] · scales[i // 32, o]`` — held as GGUF's own bytes
(``Planes.raw``), so a checkpoint's Q8_0 tensor is read where it is mapped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLOCK = 32
BLOCK_BYTES = 2 + BLOCK  # one fp16 scale, 32 int8 values


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """C's ``roundf``: halves go away from zero (numpy's ``round`` goes to even)."""
    a = np.abs(x)
    f = np.floor(a)
    return np.sign(x) * (f + np.floor(2 * (a - f)))


def quantize_blocks(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quantise float values, last axis a multiple of 32, into (int8 values of the same shape, fp16 scales with the
    last axis divided by 32) — the two halves of GGUF's Q8_0 blocks."""
    x = np.asarray(x, dtype=np.float32)
    if x.shape[-1] % BLOCK:
        raise ValueError(f"Q8_0 needs the innermost axis a multiple of {BLOCK}, not {x.shape[-1]}")
    b = x.reshape(*x.shape[:-1], x.shape[-1] // BLOCK, BLOCK)
    d = np.max(np.abs(b), axis=-1, keepdims=True) / np.float32(127)
    # A scale past fp16's range stores as inf, as GGUF's does: the same bytes, whatever they mean.
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
        q = _round_half_away((b * inv).astype(np.float32)).astype(np.int8)
        return q.reshape(x.shape), d[..., 0].astype(np.float16)


def dequantize_blocks(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``q · d`` in float32, each fp16 scale applying to its block of 32 along the last axis."""
    q = np.asarray(q, dtype=np.int8)
    b = q.reshape(*q.shape[:-1], q.shape[-1] // BLOCK, BLOCK).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        return (b * np.asarray(d, dtype=np.float16).astype(np.float32)[..., None]).reshape(q.shape)


def to_bytes(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The GGUF byte layout: per block, 2 bytes of fp16 scale then 32 int8 values (``uint8``, last axis ×34/32)."""
    qb = q.reshape(*q.shape[:-1], q.shape[-1] // BLOCK, BLOCK).view(np.uint8)
    db = np.asarray(d, dtype=np.float16)[..., None].view(np.uint8)
    return np.concatenate([db, qb], axis=-1).reshape(*q.shape[:-1], -1)


def from_bytes(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of ``to_bytes``: a GGUF Q8_0 tensor's bytes (``… × nbytes``) → (int8 values, fp16 scales)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    b = raw.reshape(*raw.shape[:-1], raw.shape[-1] // BLOCK_BYTES, BLOCK_BYTES)
    d = np.ascontiguousarray(b[..., :2]).view(np.float16)[..., 0]
    q = np.ascontiguousarray(b[..., 2:]).view(np.int8)
    return q.reshape(*raw.shape[:-1], -1), d


@dataclass(frozen=True)
class Planes:
    """A Q8_0 weight as GGUF stores it and the chip reads it, never densified until asked: ``raw`` holds its blocks
    as the file does (``uint8 … × out × in/32·34``, each block an fp16 scale then 32 int8 values; usually a view of
    the memory-mapped checkpoint), and the weight means, in the language's ``in × out`` orientation (leading axes —
    an expert bank's ``E`` — in front), ``W[…, i, o] = values[…, i, o] · scales[…, i // 32, o]``.

    ``values`` and ``scales`` are those planes as arrays and ``dense()`` the float32 weight — each made when asked
    (a test, a chip's off-block slice); a product reads ``raw`` itself (``product.product``). Invariant: ``dense()``
    is exactly the dequantised GGUF tensor, transposed into product orientation."""

    raw: np.ndarray

    @staticmethod
    def of_stored(q: np.ndarray, d: np.ndarray) -> "Planes":
        """From GGUF's blocks in numpy order (``… × out × in``, blocks along ``in``): int8 values, fp16 scales."""
        return Planes(to_bytes(np.asarray(q, dtype=np.int8), np.asarray(d, dtype=np.float16)))

    @staticmethod
    def of_planes(values: np.ndarray, scales: np.ndarray) -> "Planes":
        """From the two planes in ``in × out`` orientation (the IR's ``planes`` and ``scales`` tensors)."""
        return Planes.of_stored(np.swapaxes(values, -1, -2), np.swapaxes(scales, -1, -2))

    def _stored(self) -> tuple[np.ndarray, np.ndarray]:
        return from_bytes(self.raw)

    @property
    def values(self) -> np.ndarray:
        return np.ascontiguousarray(np.swapaxes(self._stored()[0], -1, -2))

    @property
    def scales(self) -> np.ndarray:
        return np.ascontiguousarray(np.swapaxes(self._stored()[1], -1, -2))

    def dense(self) -> np.ndarray:
        return np.ascontiguousarray(np.swapaxes(dequantize_blocks(*self._stored()), -1, -2))

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """The dense weight, for whatever reads it as an array (a comparison, an elementwise use)."""
        d = self.dense()
        return d if dtype is None else d.astype(dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        *lead, out, nbytes = self.raw.shape
        return (*lead, nbytes // BLOCK_BYTES * BLOCK, out)

    @property
    def ndim(self) -> int:
        return self.raw.ndim

    @property
    def nbytes(self) -> int:
        return self.raw.nbytes

    def __getitem__(self, index) -> "Planes":
        """One matrix of a bank (``planes[e]``): an index into the leading axes."""
        if self.raw.ndim < 3:
            raise IndexError("a single Q8_0 matrix has no bank to index")
        return Planes(self.raw[index])

    def select(self, rows: tuple[int, int] | None, columns) -> "Planes":
        """Keep input features ``rows`` (block-aligned) and output features ``columns`` (a ``slice`` or an index
        array) — views of ``raw`` where numpy gives one (a row range; a column range), a copy for an index array."""
        raw = self.raw
        if rows is not None:
            a, b = rows
            if a % BLOCK or b % BLOCK:
                raise ValueError(f"rows {a} to {b} cut a Q8_0 block of {BLOCK}")
            raw = raw[..., a // BLOCK * BLOCK_BYTES:b // BLOCK * BLOCK_BYTES]
        if columns is not None:
            raw = raw[..., columns, :]
        return Planes(raw)

    def cut(self, axis: int, start: int, stop: int):
        """``W`` cut along ``axis`` (of ``in × out``) as the IR's ``slice`` does: Planes while the cut keeps whole
        blocks, the dense float32 slice where it cuts one (a chip whose row slice is read dense)."""
        axis = axis % len(self.shape)
        if axis == len(self.shape) - 1:
            return self.select(None, slice(start, stop))
        if axis == len(self.shape) - 2:
            if start % BLOCK == 0 and stop % BLOCK == 0:
                return self.select((start, stop), None)
            return np.ascontiguousarray(self.dense()[..., start:stop, :])
        index = [slice(None)] * self.raw.ndim
        index[axis] = slice(start, stop)
        return Planes(self.raw[tuple(index)])


def quantize_weight(w: np.ndarray) -> Planes:
    """Quantise an ``… × in × out`` weight as GGUF would store it (blocks of 32 along ``in``)."""
    q, d = quantize_blocks(np.swapaxes(np.asarray(w, dtype=np.float32), -1, -2))
    return Planes.of_stored(q, d)
