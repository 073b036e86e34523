"""Inlay hints: the shape of each bound name, after its binder (``Let q0: rows×64 be …``).

An author who lines up the ``be`` of a program's statements (``Let q0   be …`` over ``Let xn0  be …``) keeps them lined
up: the hints of the statements whose ``be`` stands in one column are padded to one width — a statement whose shape is
unknown gets a hint of spaces alone — so every ``be`` of the column moves by the same amount. Statements written with
one space before ``be`` are not padded (their ``be`` were never a column)."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.lang.syntax import Let
from streamed.model.program import show
from .scheduler import Snapshot


def _labels(p) -> dict[int, str]:
    """Each ``Let`` statement's hint label by statement index, padded where the program's ``be`` form a column."""
    toks, spans = p.section.tokens, p.section.spans
    rows = []  # (statement index, the hint, the column of `be`, spaces before it)
    for st in p.statements:
        if not isinstance(st, Let):
            continue
        shape = p.shapes.get(st.name.text)
        label = f": {show(shape)}" if shape is not None else ""
        a = spans[st.index][0]
        name, be = toks[a + 1].range, toks[a + 2].range
        aligned = be.start.line == name.end.line
        rows.append((st.index, label, be.start.character if aligned else None, be.start.character - name.end.character))
    columns: dict[int, list] = {}
    for row in rows:
        if row[2] is not None:
            columns.setdefault(row[2], []).append(row)
    out = {i: label for i, label, _, _ in rows if label}
    for members in columns.values():
        if len(members) < 2 or all(gap <= 1 for _, _, _, gap in members):
            continue
        width = max(len(label) for _, label, _, _ in members)
        for i, label, _, _ in members:
            out[i] = label.ljust(width)
    return out


def inlay_hints(snap: Snapshot, rng: lsp.Range) -> list[lsp.InlayHint]:
    a = snap.analysis
    out: list[lsp.InlayHint] = []
    for p in a.programs.all():
        base = a.base_of(p.section)
        full = base.range(p.section.range)
        if full.end.line < rng.start.line or full.start.line > rng.end.line:
            continue
        labels = None
        for st in p.statements:
            if not isinstance(st, Let):
                continue
            end = base.pos(st.name.range.end)
            if not (rng.start.line <= end.line <= rng.end.line):
                continue
            if labels is None:
                labels = _labels(p)
            label = labels.get(st.index)
            if label:
                out.append(lsp.InlayHint(lsp.Position(end.line, end.character), label,
                                         kind=lsp.InlayHintKind.Type, padding_left=False, padding_right=True))
    return out
