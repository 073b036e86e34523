"""Where a section of the editor's document is: the incremental analysis parses each chunk on its own, as if it began
at line 0, byte 0, so a section's ranges are relative to its chunk; ``Base`` — where the chunk starts — places them in
the document, and ``Where`` finds each section's chunk. And what an editor position falls on (``spot``): its section,
the program, the token under it.

Invariant: a chunk starts at a line start, so a relative range and its document range differ only in line and byte
offset, never in UTF-16 column.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from itertools import chain

from .whole import diagnostic_order
from ..lang.lexer import Pos, Range
from ..lang.syntax import Diagnostic, Filled, Related, Section, Severity
from ..model.program import Program

__all__ = ["Base", "Block", "Where", "Spot", "in_order", "placed", "placed_runs", "spot", "token_at"]

# ---- moving ranges between a chunk and the document ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Base:
    line: int
    offset: int

    def pos(self, p: Pos) -> Pos:
        return Pos(p.line + self.line, p.character, p.offset + self.offset)

    def range(self, r: Range) -> Range:
        return Range(self.pos(r.start), self.pos(r.end))

    def diagnostic(self, d: Diagnostic, related: "Base | None" = None) -> Diagnostic:
        rb = related or self
        return Diagnostic(self.range(d.range), d.severity, d.message, d.code,
                          tuple(Related(rb.range(x.range), x.message) for x in d.related) if d.related else (), d.data)


_BOUND_AT_LINE = re.compile(r"(is already bound at line )(\d+)(;)")


def _relocated(d: Diagnostic, base: Base) -> Diagnostic:
    """The one checker message that names a line (``already bound at line N``) computed on a chunk-relative section,
    with N made a document line."""
    if d.code != "rebound" or base.line == 0:
        return d
    msg = _BOUND_AT_LINE.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + base.line}{m.group(3)}", d.message)
    return replace(d, message=msg)


def placed(diags, base: Base) -> tuple[Diagnostic, ...]:
    return tuple(_relocated(base.diagnostic(d), base) for d in diags) if diags else ()


# ---- a chunk's diagnostics, kept relative to it -------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Block:
    """A chunk's diagnostics as its own parse says them — relative to the chunk, in the report's order (moving every
    offset by one base keeps ``diagnostic_order``) — made once per parse of the chunk and placed only when read: an
    edit above a chunk moves its base, never its block. ``movable``: no message names a line (``_relocated``), so
    placing a diagnostic moves its ranges and nothing else."""

    source: tuple[Diagnostic, ...]  # the parse's diagnostics, as the parse made them
    diagnostics: tuple[Diagnostic, ...]
    first: tuple  # ``diagnostic_order`` of the first diagnostic and of the last, chunk-relative
    last: tuple
    errors: bool
    movable: bool

    @classmethod
    def of(cls, diags: tuple[Diagnostic, ...]) -> "Block":
        if type(diags) is Filled and diags.in_order and diags.rows:
            # A layer sharing its shape's broken parse: its rows kept as they are, in order — every one a syntax
            # error, none naming a line; only the first and the last made into diagnostics, for their places.
            return cls(diags, diags, diagnostic_order(diags[0]), diagnostic_order(diags[-1]), True,
                       all(d.code != "rebound" for d in diags.head))
        ordered = tuple(sorted(diags, key=diagnostic_order))
        return cls(diags, ordered, diagnostic_order(ordered[0]), diagnostic_order(ordered[-1]),
                   any(d.severity is Severity.ERROR for d in ordered), all(d.code != "rebound" for d in ordered))


def _moved(key: tuple, base: Base) -> tuple:
    return (key[0] + base.offset, key[1], key[2] + base.offset, *key[3:])


def in_order(blocks, loose: list[Diagnostic]) -> tuple | None:
    """The report's order of ``loose`` (document diagnostics, in ``diagnostic_order``) and ``blocks`` (``(Base,
    Block)`` in document order, each lying before the next chunk starts) as runs: ``(None, diagnostics)`` placed, or
    ``(base, block's diagnostics)`` to be placed at ``base`` — without placing or sorting a block's diagnostics.
    ``None`` when a loose diagnostic falls inside a block's span (first to last, inclusive): the caller sorts them
    all, as ``diagnostic_order`` alone decides ties."""
    keys = list(map(diagnostic_order, loose))
    runs: list = []
    j, n = 0, len(keys)
    for base, b in blocks:
        k = bisect.bisect_left(keys, _moved(b.first, base), j)
        if k > j:
            runs.append((None, tuple(loose[j:k])))
            j = k
        if j < n and keys[j] <= _moved(b.last, base):
            return None
        runs.append((base, b.diagnostics))
    if j < n:
        runs.append((None, tuple(loose[j:])))
    return tuple(runs)


def placed_runs(runs) -> tuple[Diagnostic, ...]:
    """``in_order``'s runs as the diagnostics they stand for, every one placed in the document."""
    return tuple(chain.from_iterable(diags if base is None else placed(diags, base) for base, diags in runs))


class Where:
    """Where each section's chunk starts, for placing its ranges in the document."""

    def __init__(self, sections_col, line0, byte0, layer_at, special):
        self.sections_col = sections_col
        self.line0 = line0
        self.byte0 = byte0
        self.layer_at = layer_at
        self.special = special
        self._chunk: dict[int, int] | None = None

    def chunk(self, section: Section) -> int:
        """The chunk of ``section`` (``KeyError`` for a section not of this document)."""
        layer_at, i = self.layer_at, section.index
        if i is not None and i < len(layer_at) and self.sections_col[layer_at[i]] is section:
            return layer_at[i]  # layers numbered in order: layer i is the i-th layer chunk
        for k in self.special:  # the model, checkpoint, embed and head: a handful
            if self.sections_col[k] is section:
                return k
        if self._chunk is None:
            self._chunk = {id(s): k for k, s in enumerate(self.sections_col) if s is not None}
        k = self._chunk[id(section)]
        if self.sections_col[k] is not section:
            raise KeyError(section)
        return k

    def base(self, section: Section) -> Base:
        i = self.chunk(section)
        return Base(self.line0[i], self.byte0[i])

    def at(self, section: Section, r: Range) -> Range:
        return self.base(section).range(r)


# ---- what is at an editor position ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spot:
    """What an editor position falls on: its section (chunk-relative), the section's base, the program (for
    embed, layers and head), and the token under the position (``token_index`` into ``section.tokens``) or the
    heading."""

    section: Section
    base: Base
    program: Program | None
    token_index: int | None
    on_heading: bool

    @property
    def token(self):
        return None if self.token_index is None else self.section.tokens[self.token_index]

    def to_document(self, r: Range) -> Range:
        return self.base.range(r)


def token_at(section: Section, line: int, character: int) -> int | None:
    """The index of the token of ``section`` at a chunk-relative position: the token that contains it, else one that
    ends exactly there (the cursor just after a word)."""
    toks = section.tokens
    keys = [(t.line, t.start_character) for t in toks]
    i = bisect.bisect_right(keys, (line, character)) - 1
    if i < 0:
        return None
    r = toks[i].range
    if (line, character) <= (r.end.line, r.end.character):
        return i
    return None


def spot(a, line: int, character: int) -> Spot | None:
    """What document position (``line``, UTF-16 ``character``) of the incremental analysis ``a`` falls on."""
    i = a.section_at(line)
    if i is None:
        return None
    section, base = a.document.sections[i], a.base_of(a.document.sections[i])
    rel = line - base.line
    on_heading = rel == section.heading.start.line
    return Spot(section, base, a.program_of(section), None if on_heading else token_at(section, rel, character), on_heading)
