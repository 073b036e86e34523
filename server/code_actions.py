"""Quick fixes: for a divergence, "make layer 17 one program with layer 13" (``streamed.analysis.repair``) and "compare
layer 17 with layer 13" (the diff view, ``compare``); for a misspelt operation, option, constant or name, the nearest
spelling the core put in the diagnostic's ``data``."""

from __future__ import annotations

from lsprotocol import types as lsp

from streamed.analysis.repair import make_one_program
from . import compare
from .convert import overlaps, to_diagnostic, to_range
from .scheduler import Snapshot

def _edit(uri: str, rng: lsp.Range, text: str, version) -> lsp.WorkspaceEdit:
    return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
        lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), [lsp.TextEdit(rng, text)])])


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
    return out


def _lsp_diag(snap: Snapshot, d) -> lsp.Diagnostic:
    return to_diagnostic(snap.uri, d)
