"""Folding: one range per section, from its heading to its last line with text."""

from __future__ import annotations

from lsprotocol import types as lsp

from .scheduler import Snapshot


def folding_ranges(snap: Snapshot) -> list[lsp.FoldingRange]:
    a = snap.analysis
    out = []
    for section, base, text in zip(a.document.sections, a.bases, a.chunk_texts):
        lines = text.split("\n")
        last = len(lines) - 1
        while last > 0 and not lines[last].strip():
            last -= 1
        if last > 0:
            out.append(lsp.FoldingRange(start_line=base.line, end_line=base.line + last, kind=lsp.FoldingRangeKind.Region))
    return out
