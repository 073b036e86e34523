"""Repairs the editor offers as quick fixes, as pure functions of an analysis: text to put where.

``make_one_program``: a layer that diverges from its kind's representative gets the representative's diverging
statement, renamed into the layer's names. The renaming is the one the two layers agree on before they part
(aligned binder by binder, LANGUAGE §7); a name the aligned part does not reach is renamed by ``rebind`` (its layer
suffix). Spacing is the representative's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from .kinds import binders, rebind
from ..lang.lexer import Range
from ..model.program import Program


@dataclass(frozen=True)
class Repair:
    """Replace ``range`` (relative to ``program``'s section) with ``text``."""

    program: Program
    range: Range
    text: str
    title: str


def aligned_renaming(rep: Program, layer: Program) -> dict[str, str]:
    """Binder → binder, read off the two token streams position by position until they first disagree."""
    ta, tb = [t.text for t in rep.tokens], [t.text for t in layer.tokens]
    na, nb = binders(ta), binders(tb)
    out: dict[str, str] = {}
    taken: set[str] = set()
    for x, y in zip(ta, tb):
        if (x in na) and (y in nb):
            if out.get(x, y) != y or (x not in out and y in taken):
                break
            out[x] = y
            taken.add(y)
        elif x != y:
            break
    return out


def statement_range(program: Program, statement: int) -> Range:
    a, b = program.section.spans[statement]
    toks = program.tokens
    return Range(toks[a].range.start, toks[b - 1].range.end)


def make_one_program(rep: Program, rep_text: str, layer: Program, statement: int | None,
                     rep_statement: int | None) -> Repair | None:
    """The statement of ``layer`` (index ``statement``) rewritten as ``rep``'s statement ``rep_statement``, renamed
    into the layer's names. ``rep_text`` is the text ``rep``'s ranges address (its chunk). ``None`` when the
    divergence has no statement on one side (one program longer than the other)."""
    if statement is None or rep_statement is None:
        return None
    if statement >= len(layer.section.spans) or rep_statement >= len(rep.section.spans):
        return None
    L, R = layer.section.index, rep.section.index
    names = aligned_renaming(rep, layer)
    rep_binders = binders([t.text for t in rep.tokens])
    a, b = rep.section.spans[rep_statement]
    data = rep_text.encode("utf-8")
    start = rep.tokens[a].range.start.offset
    pieces: list[str] = []
    at = start
    for t in rep.tokens[a:b]:
        pieces.append(data[at:t.range.start.offset].decode("utf-8", "replace"))
        word = t.text
        if word in rep_binders:
            word = names.get(word) or rebind(word, R, L)
        pieces.append(word)
        at = t.range.end.offset
    text = "".join(pieces)
    return Repair(layer, statement_range(layer, statement), text, f"make layer {L} one program with layer {R}")
