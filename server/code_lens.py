"""Code lenses: on every ``## Layer N`` header its kind (``attention, window 512 · 52 layers · first: layer 0``,
clicking goes to the representative), and on ``## Model`` the kind count and the bundle command."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.lang.syntax import SectionKind
from .convert import to_range
from .scheduler import Snapshot


def lens_title(kind, layer: int | None = None) -> str:
    n = len(kind.layers)
    return f"{kind.name} · {n} layer{'s' if n != 1 else ''} · first: layer {kind.representative}"


def code_lenses(snap: Snapshot) -> list[lsp.CodeLens]:
    a = snap.analysis
    out: list[lsp.CodeLens] = []
    checked = {p.section.index for p in a.programs.layers}
    for section, base in zip(a.document.sections, a.bases):
        heading = base.range(section.heading)
        if section.kind is SectionKind.LAYER and section.index in checked:
            kind = a.kind_of(section.index)
            if kind is None:
                continue
            # The command maps this heading to the representative's (``definition.representative_location``).
            arg = {"uri": snap.uri, "position": {"line": heading.start.line, "character": heading.start.character}}
            out.append(lsp.CodeLens(range=to_range(heading), command=lsp.Command(title=lens_title(kind), command="streamed.goToRepresentative", arguments=[arg])))
        elif section.kind is SectionKind.MODEL:
            n = len(a.kinds)
            title = f"{n} kind{'s' if n != 1 else ''} · Lower SN50 bundle…"
            out.append(lsp.CodeLens(range=to_range(heading), command=lsp.Command(title=title, command="streamed.lowerBundle", arguments=[{"uri": snap.uri}])))
    return out
