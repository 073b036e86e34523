"""Go to definition, and ``streamed.goToRepresentative``.

On a layer header: its kind's representative header. On a name: the ``Let`` that binds it in its program (a
``## Model`` constant for a constant). ``goToRepresentative`` maps a position in any layer to the same token of the
representative layer — same token index, since layers of one kind are one program up to names; a layer that
diverges goes to the representative of the kind it was meant to be."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.analysis.incremental import IncrementalAnalysis, Spot, spot
from streamed.lang.syntax import SectionKind
from .convert import to_range
from .scheduler import Snapshot


def _representative_of(a: IncrementalAnalysis, layer: int) -> int | None:
    d = a.divergence_of(layer)
    if d is not None:
        return d.representative
    k = a.kind_of(layer)
    return k.representative if k is not None else None


def representative_range(a: IncrementalAnalysis, line: int, character: int):
    """The document range in the representative layer corresponding to a position in a layer, or ``None``."""
    s = spot(a, line, character)
    if s is None or s.section.kind is not SectionKind.LAYER or s.program is None:
        return None
    rep_index = _representative_of(a, s.section.index)
    rep = a.layer_section(rep_index) if rep_index is not None else None
    if rep is None:
        return None
    base = a.base_of(rep)
    if s.on_heading or s.token_index is None:
        return base.range(rep.heading)
    i = min(s.token_index, len(rep.tokens) - 1)
    return base.range(rep.tokens[i].range) if i >= 0 else base.range(rep.heading)


def go_to_representative(snap: Snapshot, line: int, character: int) -> dict | None:
    r = representative_range(snap.analysis, line, character)
    if r is None:
        return None
    return {"uri": snap.uri, "range": {"start": {"line": r.start.line, "character": r.start.character},
                                       "end": {"line": r.end.line, "character": r.end.character}}}


def binding_range(a: IncrementalAnalysis, s: Spot):
    """Where the name under the cursor is bound: its program's ``Let``, or the ``## Model`` constant."""
    tok = s.token
    if tok is None or not tok.is_word or tok.is_number:
        return None
    if s.program is not None:
        r = s.program.bound_at.get(tok.text)
        if r is None and tok.text in s.program.decls:
            r = s.program.decls[tok.text].range
        if r is not None:
            return s.to_document(r)
    for section, base in zip(a.document.sections, a.bases):
        if section.kind is SectionKind.MODEL:
            for c in section.constants:
                if c.name.text == tok.text:
                    return base.range(c.name.range)
    return None


def definition(snap: Snapshot, line: int, character: int) -> lsp.Location | None:
    a = snap.analysis
    s = spot(a, line, character)
    if s is None:
        return None
    if s.on_heading:
        r = representative_range(a, line, character) if s.section.kind is SectionKind.LAYER else None
    else:
        r = binding_range(a, s)
    return lsp.Location(snap.uri, to_range(r)) if r is not None else None
