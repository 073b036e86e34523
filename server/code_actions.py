"""Quick fixes: for a divergence, "make layer 17 one program with layer 13" (``streamed.analysis.repair``) and "compare
layer 17 with layer 13" (the diff view, ``compare``); for a misspelt operation, option, constant or name, the nearest
spelling the core put in the diagnostic's ``data``. And one refactoring, in the last layer: one more layer like it
(``repair.new_layer``: its text renumbered, the head reading the new layer's output) — also offered as a completion
(``completion``), both made by ``next_layer`` here."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.analysis.repair import NewLayer, make_one_program, new_layer
from streamed.lang.syntax import SectionKind
from . import compare
from .convert import overlaps, to_diagnostic, to_range
from .scheduler import Snapshot

def _edit(uri: str, rng: lsp.Range, text: str, version) -> lsp.WorkspaceEdit:
    return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
        lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), [lsp.TextEdit(rng, text)])])


def next_layer(snap: Snapshot, typing: int | None = None) -> tuple[NewLayer, lsp.Range, str, list[lsp.TextEdit]] | None:
    """One more layer after the document's last: the layer (``repair.new_layer``), the last layer's range from its
    heading to its last token, the text to insert at its end (a blank line, then the new section) and the edits that
    make the head read the new layer's output. ``typing``: a line where a word is being typed — what stands there
    and after it is not part of the last layer. ``None`` when the last layer does not check cleanly (a copy would
    copy its mistakes)."""
    a = snap.analysis
    layers = [s for s in a.document.sections if s.kind is SectionKind.LAYER]
    last = a.program_of(layers[-1]) if layers else None
    if last is None or last.errors:
        return None
    base = a.base_of(last.section)
    stop = typing - base.line if typing is not None else None
    if any(stop is None or d.range.start.line < stop for d in last.section.diagnostics):
        return None
    toks = last.tokens
    n = len(toks) if stop is None else sum(1 for t in toks if t.range.start.line < stop)
    if stop is not None and any(t.range.start.line > stop for t in toks[n:]):
        return None  # the line is inside the layer, not after it
    head = a.programs.head
    made = new_layer(last, a.chunk_texts[a.index_of(last.section)], head, n)
    if made is None:
        return None
    nl = "\r\n" if "\r\n" in a.chunk_texts[a.index_of(last.section)] else "\n"
    edits = []
    if head is not None:
        hb = a.base_of(head.section)
        edits = [lsp.TextEdit(to_range(hb.range(r)), name) for r, name in made.head]
    text = made.text.replace("\r\n", "\n").replace("\n", nl)
    heading = base.range(last.section.heading)
    end = base.range(toks[n - 1].range).end if n else heading.end
    return made, lsp.Range(to_range(heading).start, lsp.Position(end.line, end.character)), nl + nl + text, edits


def code_actions(snap: Snapshot, rng: lsp.Range) -> list[lsp.CodeAction]:
    a = snap.analysis
    out: list[lsp.CodeAction] = []
    for d in a.divergences:
        if not overlaps(to_range(d.range), rng):
            continue
        layer, rep = a.programs.layer(d.layer), a.programs.layer(d.representative)
        if layer is None or rep is None:
            continue
        rep_text = a.chunk_texts[a.index_of(rep.section)]
        fix = make_one_program(rep, rep_text, layer, d.statement, d.representative_statement)
        diag = next((x for x in a.diagnostics if x.code == "divergence" and x.range == d.range), None)
        diagnostics = [_lsp_diag(snap, diag)] if diag else None
        if fix is not None:
            out.append(lsp.CodeAction(
                fix.title, kind=lsp.CodeActionKind.QuickFix, is_preferred=True, diagnostics=diagnostics,
                edit=_edit(snap.uri, to_range(a.to_document(layer.section, fix.range)), fix.text, snap.version)))
        see = compare.command(snap.uri, d.layer, d.representative)
        out.append(lsp.CodeAction(see.title, kind=lsp.CodeActionKind.QuickFix, diagnostics=diagnostics, command=see))
    for diag in a.diagnostics:
        replacement = (diag.data or {}).get("replacement")
        if not replacement or not overlaps(to_range(diag.range), rng):
            continue
        out.append(lsp.CodeAction(
            f"change to `{replacement}`", kind=lsp.CodeActionKind.QuickFix, is_preferred=True,
            diagnostics=[_lsp_diag(snap, diag)], edit=_edit(snap.uri, to_range(diag.range), replacement, snap.version)))
    made = next_layer(snap)
    if made is not None:
        layer, last, text, head = made
        if last.start.line <= rng.start.line <= last.end.line:
            end = lsp.Range(last.end, last.end)
            out.append(lsp.CodeAction(layer.title, kind=lsp.CodeActionKind.Refactor, edit=lsp.WorkspaceEdit(document_changes=[
                lsp.TextDocumentEdit(lsp.OptionalVersionedTextDocumentIdentifier(uri=snap.uri, version=snap.version),
                                     [lsp.TextEdit(end, text), *head])])))
    return out


def _lsp_diag(snap: Snapshot, d) -> lsp.Diagnostic:
    return to_diagnostic(snap.uri, d)
