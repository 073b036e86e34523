"""Inlay hints: the shape of each bound name, after its binder (``Let q0: rows×64 be …``)."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.lang.syntax import Let
from streamed.model.program import show
from .scheduler import Snapshot


def inlay_hints(snap: Snapshot, rng: lsp.Range) -> list[lsp.InlayHint]:
    a = snap.analysis
    out: list[lsp.InlayHint] = []
    for p in a.programs.all():
        base = a.base_of(p.section)
        full = base.range(p.section.range)
        if full.end.line < rng.start.line or full.start.line > rng.end.line:
            continue
        for st in p.statements:
            if not isinstance(st, Let):
                continue
            shape = p.shapes.get(st.name.text)
            if shape is None:
                continue
            end = base.pos(st.name.range.end)
            if not (rng.start.line <= end.line <= rng.end.line):
                continue
            out.append(lsp.InlayHint(lsp.Position(end.line, end.character), f": {show(shape)}",
                                     kind=lsp.InlayHintKind.Type, padding_left=False, padding_right=True))
    return out
