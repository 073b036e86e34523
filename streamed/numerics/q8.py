"""Q8_0 as GGUF stores it, bit for bit, and as the chip reads it: int8 planes and fp16 block scales.

GGUF's Q8_0 (ggml-quants.c ``quantize_row_q8_0_ref``) cuts each row of the tensor's innermost axis (``ne[0]``) into
blocks of 32; a block stores ``d = max|x| / 127`` as fp16 and ``q = round(x / d)`` (half away from zero, computed as
``x · (1/d)`` in float32, ``q = 0`` where ``d = 0``) as int8. Dequantisation is ``q · d`` in float32. Every value
here is computed in exactly that arithmetic, so ``dequantize(quantize(x))`` equals ``gguf.quants`` to the bit.

The language's orientation (docs/language.md §6): a weight is ``in by out`` and GGUF's ``ne = [in, out]``, so the
blocks run along ``in``. ``planes(blocks)`` gives the layout the lowering's IR reads: ``int8 in × out`` values and
``fp16 (in/32) × out`` scales, with ``W[i, o] = planes[i, o] · scales[i // 32, o]``.
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
    """A Q8_0 weight in the language's ``in × out`` orientation (leading axes, an expert's ``E``, kept in front):
    ``values`` int8 ``… × in × out``, ``scales`` fp16 ``… × in/32 × out``. Invariant: ``dense()`` is exactly the
    dequantised GGUF tensor, transposed into product orientation."""

    values: np.ndarray
    scales: np.ndarray

    @staticmethod
    def of_stored(q: np.ndarray, d: np.ndarray) -> "Planes":
        """From GGUF's blocks in numpy order (``… × out × in``, blocks along ``in``)."""
        return Planes(np.ascontiguousarray(np.swapaxes(q, -1, -2)), np.ascontiguousarray(np.swapaxes(d, -1, -2)))

    def dense(self) -> np.ndarray:
        v = self.values.astype(np.float32)
        s = np.repeat(self.scales.astype(np.float32), BLOCK, axis=-2)
        return v * s

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values.shape

    def select(self, rows: tuple[int, int] | None, columns: np.ndarray | None) -> "Planes":
        """Keep input features ``rows`` (block-aligned) and output features ``columns`` (any index array)."""
        v, s = self.values, self.scales
        if rows is not None:
            a, b = rows
            if a % BLOCK or b % BLOCK:
                raise ValueError(f"rows {a} to {b} cut a Q8_0 block of {BLOCK}")
            v, s = v[..., a:b, :], s[..., a // BLOCK:b // BLOCK, :]
        if columns is not None:
            v, s = v[..., columns], s[..., columns]
        return Planes(np.ascontiguousarray(v), np.ascontiguousarray(s))


def quantize_weight(w: np.ndarray) -> Planes:
    """Quantise an ``… × in × out`` weight as GGUF would store it (blocks of 32 along ``in``)."""
    q, d = quantize_blocks(np.swapaxes(np.asarray(w, dtype=np.float32), -1, -2))
    return Planes.of_stored(q, d)
