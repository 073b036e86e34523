"""Repairs the editor offers as quick fixes, as pure functions of an analysis: text to put where.

``make_one_program``: a layer that diverges from its kind's representative gets the representative's diverging
statement, renamed into the layer's names. The renaming is the one the two layers agree on before they part
(aligned binder by binder, LANGUAGE §7); a name the aligned part does not reach is renamed by ``rebind`` (its layer
suffix). Spacing is the representative's own.

``new_layer``: the layer after the last one, as the last one's text renumbered (its binders renamed by ``rebind``),
and the head's input renamed to the new layer's output — what an author means by "one more layer like these".

``compare_with_representative``: the two programs as text side by side, the layer's bound names renamed into the
representative's, so that a line-by-line diff of the two shows only what makes them two programs.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, Sequence

from .kinds import _canon, binders, rebind
from ..lang.lexer import Range, Token
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


# ---- one more layer ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewLayer:
    """Layer ``index``, a copy of the layer before it renumbered: ``text`` is its section from ``## Layer`` to its
    last token (comments and spacing the original's), to go after that layer with a blank line between; ``head``
    renames the head's input — the previous last layer's output — to the new layer's (ranges relative to the
    head's section, as its tokens have them)."""

    index: int
    text: str
    head: tuple[tuple[Range, str], ...]

    @property
    def title(self) -> str:
        return f"add layer {self.index}, a copy of layer {self.index - 1} renumbered"


def new_layer(last: Program, last_text: str, head: Program | None = None, tokens: int | None = None) -> NewLayer | None:
    """Layer ``L + 1`` made from ``last`` (layer ``L``, the document's last): every name it binds renamed as
    ``rebind`` renames layer ``L``'s names into layer ``L + 1``'s (its input ``xo{L-1}`` → ``xo{L}``, ``Wq{L}`` →
    ``Wq{L+1}``, host tables kept), its heading renumbered. ``last_text`` is the text ``last``'s ranges' byte offsets
    index (its chunk, or the whole document); ``tokens``: how many of its tokens make the layer (what follows — a word
    being typed after it — is not copied). ``None`` for a layer with no number to follow."""
    section = last.section
    L = section.index
    at_number = section.index_range
    if L is None or at_number is None:
        return None
    N = L + 1
    toks = last.tokens[:tokens]
    own = binders([t.text for t in toks])
    data = last_text.encode("utf-8")
    start = section.heading.start.offset
    pieces = [data[start:at_number.start.offset], str(N).encode()]
    at = at_number.end.offset
    for t in toks:
        pieces.append(data[at:t.range.start.offset])
        pieces.append((rebind(t.text, L, N) if t.text in own else t.text).encode("utf-8"))
        at = t.range.end.offset
    text = b"".join(pieces).decode("utf-8", "replace")
    renames: list[tuple[Range, str]] = []
    if head is not None and last.output is not None:
        output = rebind(last.output, L, N)
        renames = [(t.range, output) for t in head.tokens if t.text == last.output]
    return NewLayer(N, text, tuple(renames))


# ---- the layer beside its representative ----------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """A layer and the representative it was meant to be one program with, as text of the same shape: one line per
    source line that holds tokens, comments and blank lines dropped, tokens one space apart (none where the source
    has them touching) — so a layer whose author aligned ``be`` to its longer names still lines up. ``layer_text``
    reads every name the layer binds as the representative's name for it: the lines that differ are exactly the
    lines where the two programs differ."""

    layer: int
    representative: int
    representative_text: str
    layer_text: str


def matched_names(layer: Program, rep: Program) -> dict[str, str]:
    """The layer's binder → the representative's, read off the statements the two programs share once binders are
    counted as alike, matched as a diff matches lines — so the renaming continues past the place where the programs
    part, and an inserted or removed statement shifts nothing. A pair that contradicts an earlier one is not taken
    (the first reading of a name, its ``Let``, decides); names in no shared statement are left out."""
    ta, tb = [t.text for t in layer.tokens], [t.text for t in rep.tokens]
    na, nb = binders(ta), binders(tb)
    ca, cb = _canon(ta), _canon(tb)
    sa, sb = layer.section.spans, rep.section.spans
    out: dict[str, str] = {}
    taken: set[str] = set()
    statements = difflib.SequenceMatcher(None, [tuple(ca[a:b]) for a, b in sa], [tuple(cb[a:b]) for a, b in sb],
                                         autojunk=False)
    for tag, i1, i2, j1, j2 in statements.get_opcodes():
        if tag != "equal":
            continue
        for (a, b), (c, d) in zip(sa[i1:i2], sb[j1:j2]):
            for x, y in zip(ta[a:b], tb[c:d]):
                if x in na and y in nb and x not in out and y not in taken:
                    out[x] = y
                    taken.add(y)
    return out


def program_lines(tokens: Sequence[Token], name: Callable[[str], str] = lambda w: w) -> str:
    """The program's tokens as text, one line per source line, each word passed through ``name``."""
    lines: list[str] = []
    line, prev = None, None
    for t in tokens:
        if t.line != line:
            lines.append("")
            line = t.line
        elif prev is not None and prev.end_offset != t.start_offset:
            lines[-1] += " "
        lines[-1] += name(t.text)
        prev = t
    return "\n".join(lines) + "\n" if lines else ""


def compare_with_representative(layer: Program, rep: Program) -> Comparison:
    """``layer`` and ``rep`` as a ``Comparison``: each name ``layer`` binds becomes the representative's name for it
    (``matched_names``), else the name ``rebind`` gives it in the representative's layer."""
    L, R = layer.section.index, rep.section.index
    names = matched_names(layer, rep)
    own = binders([t.text for t in layer.tokens])

    def renamed(word: str) -> str:
        if word not in own:
            return word
        return names.get(word) or rebind(word, L, R)

    return Comparison(L, R, program_lines(rep.tokens), program_lines(layer.tokens, renamed))
