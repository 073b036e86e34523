"""What a run holds in memory, counted from the document before anything is read or made — so a run that cannot fit
is refused with the bytes it needs, never stopped by a MemoryError or the kernel's OOM killer halfway.

A run holds (each counted from declared shapes, with ``rows``, ``ctx`` bound):

- **weights**, in their working form (``weights.py``): a checkpoint's tensors of every type read as stored (float32,
  float16, Q8_0, the legacy and K-quants, BF16, MXFP4) are read where they are mapped, so they occupy their own bytes
  in the page cache (4, 2, 34/32, 144/256 for Q4_K… bytes a value), and a product over one kept in blocks other than
  Q8_0 densifies a band of columns at a time (``BAND_BYTES``, counted once); seeded weights are made as float32 (a ``q8`` one then kept as its
  planes, 34/32 bytes a value, after one float32 copy of the largest).
- **states and tables**: every carried state (KV caches, recurrent states) at ``ctx`` — a windowed cache as its ring
  (LANGUAGE §8), beside the one frame of ``ctx`` positions its attention reads it into while it runs — every host
  table, once per sequence that holds them (``copies``: 2 when ``verify`` runs the reference and the bundle side by
  side).
- **one step's tensors**: every name a program binds, at the step's ``rows`` (the reference keeps a step's values
  until it ends) — and the logits of every position the run returns.
- **attention's scores**: the largest block of query heads × rows × cached positions any attention holds while it
  runs (``kernels.attention_block``: a block of rows at a time, so a long prefill's scores are a few MB, not
  heads × rows × context — 53.6 GiB at 60,000 tokens), at ``kernels.ATTENTION_SCORE_BYTES`` a score.

Pure: the counts come from the ``Programs`` and the checkpoint's ``Storage``; what the machine has is the command
line's to read (``cli/common.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..model.caches import ring_lengths
from ..model.checkpoint import Storage, bind
from ..analysis.kinds import calls_of
from ..lang.syntax import Name
from ..model.checkpoint import BLOCKS, SIZES
from ..model.program import Program, Programs
from .kernels import ATTENTION_SCORE_BYTES, attention_block
from .q8 import BLOCK, BLOCK_BYTES
from .reference import operands

#: Bytes a value of a weight occupies, by how the checkpoint stores it: every type read as stored (``SIZES``: the
#: float types, Q8_0, the legacy and K-quants, BF16, MXFP4) its own bytes; anything else counted as float32.
STORED_BYTES = {kind: nbytes / values for kind, (values, nbytes) in SIZES.items()}
#: What a product over a weight kept in blocks other than Q8_0 holds densified at once (``product.BAND_BYTES``).
BAND_BYTES = 8 << 20


@dataclass(frozen=True)
class Footprint:
    weights: int
    states: int
    activations: int
    values: int = 0  # how many weight values the programs declare (Python's integers: exact at any width)

    @property
    def total(self) -> int:
        return self.weights + self.states + self.activations


def _size(shape, rows: int, ctx: int) -> int:
    bound = {"rows": rows, "ctx": ctx}
    return math.prod(int(bound.get(d, 1)) if isinstance(d, str) else int(d) for d in shape)


def attention_scores(p: Program, constants, rows: int, ctx: int) -> int:
    """The bytes of the largest block of scores an attention of ``p`` holds while a step of ``rows`` rows over
    ``ctx`` cached positions runs (module docstring)."""
    most = 0
    for c in calls_of(p):
        if c.op not in ("attention", "latent attention"):
            continue
        heads = operands(c)[1].get("heads:H")
        heads = max(1, int(constants.get(heads.text, 1) if isinstance(heads, Name) else getattr(heads, "value", 1)))
        most = max(most, ATTENTION_SCORE_BYTES * heads * attention_block(heads, rows, ctx) * ctx)
    return most


def of_run(programs: Programs, storage: Storage | None, *, rows: int, ctx: int, positions: int,
           copies: int = 1, seeded_q8: frozenset[str] = frozenset(), held_steps: int = 1) -> Footprint:
    """The memory a run of ``programs`` holds: weights from a checkpoint stored as ``storage`` says (``None``, or a
    storage without types: seeded, those in ``seeded_q8`` kept as Q8_0 planes), steps of at most ``rows`` rows over caches of ``ctx`` positions,
    ``positions`` rows of logits returned, ``copies`` sequences holding states, and ``held_steps`` steps' tensors and
    states kept at once (``verify`` keeps every step of the reference it compares against) (module docstring)."""
    entries = programs.document.checkpoint
    weights = 0.0
    values = 0
    largest = 0
    seen: set[str] = set()
    states = tables = step = frame = scores = 0
    vocab = 0
    banded = False
    for p in programs.all():
        rings = ring_lengths(p, programs.constants, ctx, rows)
        for d in p.decls.values():
            n = _size(d.shape, rows, ctx)
            if d.name in rings:  # a ring of its window and a step's rows; attention reads keys and values at ctx
                frame = max(frame, 2 * 4 * n)
                n = n // ctx * rings[d.name]
            if d.role == "weight":
                if d.name in seen:
                    continue
                seen.add(d.name)
                values += n
                largest = max(largest, n)
                if storage is None or storage.types is None:
                    weights += n * (BLOCK_BYTES / BLOCK if d.name in seeded_q8 else 4.0)
                else:
                    ref = bind(entries, d.name)
                    kind = storage.types.get(ref.tensor) if ref is not None else None
                    weights += n * STORED_BYTES.get(kind or "F32", 4.0)
                    banded |= kind in BLOCKS and kind != "Q8_0"
                if p is programs.embed and len(d.shape) == 2 and isinstance(d.shape[0], int):
                    vocab = max(vocab, d.shape[0])
            elif d.role == "state":
                states += 4 * n
            elif d.role == "table":
                tables += 4 * n
        step += 4 * sum(_size(s, rows, ctx) for name, s in p.shapes.items()
                        if s is not None and name not in p.decls)
        scores = max(scores, attention_scores(p, programs.constants, rows, ctx))
    if (storage is None or storage.types is None) and seeded_q8:
        weights += 4 * largest  # a q8 weight is made as float32 first, one at a time
    if banded:
        weights += BAND_BYTES  # one band of columns densified by the product that reads it
    logits = 4 * positions * vocab
    return Footprint(int(weights), (copies + held_steps - 1) * states + copies * tables,
                     held_steps * int(step) + frame + scores + logits, values)
