"""Document symbols: Model (its constants), Checkpoint, Embed, the layers grouped under their kinds, Head."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.analysis.whole import layer_ranges
from streamed.lang.syntax import SectionKind
from .convert import to_range
from .scheduler import Snapshot


def document_symbols(snap: Snapshot) -> list[lsp.DocumentSymbol]:
    a = snap.analysis
    out: list[lsp.DocumentSymbol] = []
    layer_symbols: dict[int, lsp.DocumentSymbol] = {}
    kind_at: int | None = None
    for section, base in zip(a.document.sections, a.bases):
        full, head = to_range(base.range(section.range)), to_range(base.range(section.heading))
        if section.kind is SectionKind.MODEL:
            children = [lsp.DocumentSymbol(c.name.text, lsp.SymbolKind.Constant, to_range(base.range(c.range)),
                                           to_range(base.range(c.name.range)), detail=c.value.text) for c in section.constants]
            out.append(lsp.DocumentSymbol("Model", lsp.SymbolKind.Module, full, head, children=children))
        elif section.kind is SectionKind.CHECKPOINT:
            out.append(lsp.DocumentSymbol("Checkpoint", lsp.SymbolKind.Namespace, full, head, detail=f"{len(section.entries)} entries"))
        elif section.kind is SectionKind.EMBED:
            out.append(lsp.DocumentSymbol("Embed", lsp.SymbolKind.Function, full, head))
        elif section.kind is SectionKind.HEAD:
            out.append(lsp.DocumentSymbol("Head", lsp.SymbolKind.Function, full, head))
        elif section.kind is SectionKind.LAYER and section.index is not None and section.index not in layer_symbols:
            layer_symbols[section.index] = lsp.DocumentSymbol(f"Layer {section.index}", lsp.SymbolKind.Class, full, head,
                                                             detail=section.note or None)
            if kind_at is None:
                kind_at = len(out)
    groups = []
    for k in a.kinds:
        members = [layer_symbols[i] for i in k.layers if i in layer_symbols]
        if not members:
            continue
        rng = lsp.Range(members[0].range.start, max((m.range.end for m in members), key=lambda p: (p.line, p.character)))
        n = len(k.layers)
        groups.append(lsp.DocumentSymbol(k.name, lsp.SymbolKind.Namespace, rng, members[0].selection_range,
                                         detail=f"{n} layer{'s' if n != 1 else ''}: {layer_ranges(k.layers)}", children=members))
    if kind_at is None:
        kind_at = len(out)
    return out[:kind_at] + groups + out[kind_at:]
