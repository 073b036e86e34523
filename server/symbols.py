"""Document symbols, in document order: Model (its constants), Checkpoint, Embed, each layer — its kind as its detail,
and its heading's note when the kind's name does not already say it — and Head. Outline, breadcrumbs and sticky scroll read these ranges, so each symbol spans exactly its section: a
layer is never placed under a kind whose other layers lie elsewhere (the kinds are the Layer Kinds view's)."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.lang.syntax import SectionKind
from .convert import to_range
from .scheduler import Snapshot


def document_symbols(snap: Snapshot) -> list[lsp.DocumentSymbol]:
    a = snap.analysis
    out: list[lsp.DocumentSymbol] = []
    seen: set[int] = set()
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
        elif section.kind is SectionKind.LAYER and section.index is not None and section.index not in seen:
            seen.add(section.index)
            kind = a.kind_of(section.index)
            name = kind.name if kind is not None else None
            # The heading's note, unless the kind's name already says it (`## Layer 0: gated deltanet`).
            note = section.note if not (name and section.note and name.lower().startswith(section.note.lower())) else None
            detail = " — ".join(x for x in (name, note) if x) or None
            out.append(lsp.DocumentSymbol(f"Layer {section.index}", lsp.SymbolKind.Function, full, head, detail=detail))
    return out
