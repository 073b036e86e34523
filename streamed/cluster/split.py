"""The split of a model into layer ranges, one a Ray actor: chosen from the bytes each layer holds and the memory each
actor may use, or refused — in one line, before any actor starts — when the actors cannot hold the model.

What a range holds (``numerics.footprint.of_run``, counted on the document's programs of that range alone): its
layers' weights in their working form and their carried states (KV caches, recurrent states) — both grow with the
range — and, once, the largest step's tensors and tables of any of its programs (one program runs at a time). The
first range also holds the embedding, the last the head and the logits (a weight both declare, a tied embedding, is
counted in each: each actor maps its own view of it).

The split keeps ranges contiguous and in model order (the hidden state flows from one to the next). Given a number
of actors, it is the one whose largest range is smallest (a binary search over the bound, each bound filled
greedily), each range within its actor's cap; given the layers of each actor (``2,5,1``), it is that one, checked
against the caps. Pure: the caps come from the caller (``engine`` reads them from the cluster's nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..model.checkpoint import Storage
from ..model.program import Programs
from ..numerics.footprint import of_run
from ..spatial.units import size


class SplitRefused(Exception):
    """The actors cannot hold the model as asked: one line saying what needs what."""


@dataclass(frozen=True)
class Costs:
    """Bytes by program: ``held`` what each layer keeps for the whole run (weights, states), ``passing`` what it
    holds only while it runs (its step's tensors and tables); the embedding's and the head's totals."""

    held: tuple[int, ...]
    passing: tuple[int, ...]
    embed: int
    head: int

    def of(self, first: int, stop: int, embed: bool, head: bool) -> int:
        """The bytes a range of layers ``first…stop−1`` holds, with the embedding and the head when it has them."""
        passing = max(self.passing[first:stop], default=0)
        return sum(self.held[first:stop]) + passing + (self.embed if embed else 0) + (self.head if head else 0)

    @property
    def total(self) -> int:
        return self.of(0, len(self.held), True, True)


def costs(programs: Programs, storage: Storage | None, *, rows: int, ctx: int, positions: int,
          seeded_q8: frozenset[str] = frozenset(), copies: int = 1, held_steps: int = 1) -> Costs:
    """Each layer's bytes, and the embedding's and the head's, as ``of_run`` counts a run of that program alone."""

    def alone(embed=None, layers=(), head=None):
        view = replace(programs, embed=embed, layers=tuple(layers), head=head)
        return of_run(view, storage, rows=rows, ctx=ctx, positions=positions if head is not None else 0,
                      copies=copies, seeded_q8=seeded_q8, held_steps=held_steps)

    held, passing = [], []
    for layer in programs.layers:
        f = alone(layers=[layer])
        held.append(f.weights + f.states)
        passing.append(f.activations)
    e = alone(embed=programs.embed).total if programs.embed is not None else 0
    h = alone(head=programs.head).total if programs.head is not None else 0
    return Costs(tuple(held), tuple(passing), e, h)


@dataclass(frozen=True)
class Range:
    """One actor's part of the model: layers ``first…stop−1`` (indices into ``Programs.layers``), with the embedding
    and the head when ``embed``/``head``; ``bytes`` what it holds; ``place`` the node it runs on (its id) and
    ``host`` that node's address, as a person reads it."""

    first: int
    stop: int
    embed: bool
    head: bool
    bytes: int
    place: str = ""
    host: str = ""

    @property
    def label(self) -> str:
        """``layers 4-7`` (what a message names), ``layer 4`` for one."""
        last = self.stop - 1
        return f"layer {self.first}" if last == self.first else f"layers {self.first}-{last}"


@dataclass(frozen=True)
class Slot:
    """Where an actor may run: the node (``place`` its id, ``host`` its address) and the bytes it may hold."""

    place: str
    host: str
    cap: int


def split(c: Costs, slots: list[Slot], counts: list[int] | None = None) -> list[Range]:
    """One contiguous range per slot, in model order (module docstring), or ``SplitRefused``: the number of layers
    of each actor when ``counts`` is given, else the split whose largest range is smallest."""
    n = len(c.held)
    if not slots:
        raise SplitRefused("the cluster has no node to run on")
    if counts is not None:
        if len(counts) != len(slots) or sum(counts) != n or min(counts) < 1:
            raise SplitRefused(f"{len(counts)} ranges of {'+'.join(map(str, counts))} layers do not divide the "
                               f"model's {n} layers over {len(slots)} actors")
        bounds, at = [], 0
        for k in counts:
            bounds.append((at, at + k))
            at += k
    else:
        if n < len(slots):
            raise SplitRefused(f"{len(slots)} actors for {n} layers: give at most one actor a layer")
        bounds = _balanced(c, slots)
    ranges = [Range(a, b, i == 0, i == len(bounds) - 1, c.of(a, b, i == 0, i == len(bounds) - 1), s.place, s.host)
              for i, ((a, b), s) in enumerate(zip(bounds, slots))]
    over = [(r, s) for r, s in zip(ranges, slots) if r.bytes > s.cap]
    if over:
        r, s = over[0]
        alone = max(range(len(c.held)), key=lambda i: c.of(i, i + 1, i == 0, i == n - 1))
        raise SplitRefused(f"the cluster cannot hold the model: {r.label} need{'s' if r.stop - r.first == 1 else ''} {size(r.bytes)} but the actor on "
                           f"{s.host} may use {size(s.cap)} ({len(slots)} actors hold at most "
                           f"{size(sum(x.cap for x in slots))} of the model's {size(c.total)}; layer {alone} alone needs "
                           f"{size(c.of(alone, alone + 1, alone == 0, alone == n - 1))})")
    return ranges


def _balanced(c: Costs, slots: list[Slot]) -> list[tuple[int, int]]:
    """The contiguous split into ``len(slots)`` non-empty ranges whose largest range in bytes is smallest, each
    within its slot's cap where any split can be; when none can, the smallest ignoring the caps (``split`` then
    refuses it, naming the first range that does not fit). Filling each range greedily up to a bound is exact for
    contiguous ranges: a range's bytes only grow as it takes more layers."""
    n, k = len(c.held), len(slots)

    def fill(bound: int, capped: bool) -> list[tuple[int, int]] | None:
        out, at = [], 0
        for i, s in enumerate(slots):
            left = k - i - 1  # ranges still to come, each at least one layer
            limit = min(bound, s.cap) if capped else bound
            stop = at + 1
            while stop < n - left and c.of(at, stop + 1, i == 0, False) <= limit:
                stop += 1
            if i == k - 1:
                stop = n
            if c.of(at, stop, i == 0, i == k - 1) > limit:
                return None
            out.append((at, stop))
            at = stop
        return out if at == n else None

    for capped in (True, False):
        lo, hi = 0, c.total
        if fill(hi, capped) is None:
            continue
        while lo < hi:
            mid = (lo + hi) // 2
            if fill(mid, capped) is None:
                lo = mid + 1
            else:
                hi = mid
        return fill(lo, capped)
    return [(i * n // k, (i + 1) * n // k) for i in range(k)]
